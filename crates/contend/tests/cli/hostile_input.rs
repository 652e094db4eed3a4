//! Input made to hurt (issue 18): FIFOs, devices, links and oversized files where contend reads
//! a file, closed pipes on its output, paths that cannot be a run directory, counts no machine
//! holds, and streams whose times run backwards. Each must end promptly with the true message
//! and the documented exit code, never a hang, a panic, a wrapped number or a lost run.

use crate::common::{
    assert_one_line_error, contend, meta, output_within, serial, show, stderr, stdout, CONTEND,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use trace::meta::{Meta, StreamEntry};
use trace::{ClockSource, EventKind, Header, ObjectKind, Record, RunDir, StreamKind, StreamWriter};

/// Long enough for any of these commands on a loaded machine; a FIFO read would block forever.
const DEADLINE: Duration = Duration::from_secs(60);

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// `contend ARGS`, which must end within the deadline.
fn bounded(args: &[&OsStr]) -> Output {
    output_within(Command::new(CONTEND).args(args), DEADLINE)
        .unwrap_or_else(|| panic!("contend {args:?} did not end within {DEADLINE:?}"))
}

fn header(tid: u32) -> Header {
    Header {
        kind: StreamKind::Thread,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 10,
        tid,
        rank: -1,
        base_time: 0,
    }
}

/// One lock event of the probe's.
fn lock_event(ts: u64, kind: EventKind, lock: u32, site: u16, aux: u8) -> Record {
    Record {
        ts,
        kind,
        aux,
        site,
        obj: lock,
    }
}

/// A run of one thread's lock stream (`events` with the lock and site ids below), listed in
/// meta.json as a lock run spanning `span`.
fn lock_run(root: &Path, events: &[(u64, EventKind, u8)], span: [u64; 2]) -> PathBuf {
    let run = RunDir::create(&root.join("run")).unwrap();
    let mut meta = Meta::new(vec!["./hostile".into()]);
    meta.captured.push(trace::Captured::Locks);
    meta.monotonic_span = Some(span);
    let (path, rel) = run.stream_path("10-11-1");
    let mut w = StreamWriter::new(std::fs::File::create(&path).unwrap(), &header(11), 64).unwrap();
    let lock = w.intern_object(0x1000, ObjectKind::Mutex);
    let site = w.intern_site(0x401000);
    for &(ts, kind, aux) in events {
        w.push(&lock_event(ts, kind, lock, site, aux));
    }
    let end = events.iter().map(|e| e.0).max().unwrap_or(0);
    w.finish(end).unwrap();
    meta.streams.push(StreamEntry {
        file: rel,
        kind: StreamKind::Thread,
        pid: 10,
        tid: 11,
        rank: None,
        events: events.len() as u64,
        dropped: 0,
        name: "hostile".into(),
        role: Some(trace::StreamRole::Lock),
    });
    run.write_meta(&meta).unwrap();
    run.path().to_path_buf()
}

/// An ordinary small lock run: one contended acquisition, held 1 ms.
fn good_run(root: &Path) -> PathBuf {
    use trace::locks::CONTENDED;
    lock_run(
        root,
        &[
            (1_000_000, EventKind::LockWait, 0),
            (2_000_000, EventKind::LockAcquired, CONTENDED),
            (3_000_000, EventKind::LockReleased, 0),
        ],
        [0, 4_000_000],
    )
}

fn report(run: &Path, extra: &[&str]) -> Output {
    let mut args = vec![OsStr::new("report"), run.as_os_str()];
    args.extend(extra.iter().map(OsStr::new));
    bounded(&args)
}

#[test]
fn a_fifo_as_meta_json_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = good_run(dir.path());
    std::fs::remove_file(run.join("meta.json")).unwrap();
    mkfifo(&run.join("meta.json"));
    let out = report(&run, &[]);
    assert_one_line_error(&out, 2, &["meta.json is a FIFO, not a regular file"]);
}

#[test]
fn a_fifo_as_a_memory_map_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = good_run(dir.path());
    std::fs::create_dir(run.join("maps")).unwrap();
    mkfifo(&run.join("maps/10-1.maps"));
    let out = report(&run, &[]);
    assert_one_line_error(
        &out,
        2,
        &[
            "maps/10-1.maps is a FIFO, not a regular file",
            "memory maps",
        ],
    );
}

#[test]
fn a_fifo_as_a_rank_stream_of_mpi_from_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = good_run(dir.path());
    let other = dir.path().join("other-host");
    std::fs::create_dir_all(other.join("streams")).unwrap();
    mkfifo(&other.join("streams/rank-0.cst"));
    let out = report(&run, &["--mpi-from", other.to_str().unwrap()]);
    assert_one_line_error(
        &out,
        2,
        &["other-host/streams/rank-0.cst is a FIFO, not a regular file"],
    );
}

#[test]
fn c2c_import_of_a_fifo_or_a_directory_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("perf.data");
    mkfifo(&fifo);
    let out = bounded(&[
        OsStr::new("c2c"),
        OsStr::new("import"),
        fifo.as_os_str(),
        OsStr::new("-o"),
        dir.path().join("imported").as_os_str(),
    ]);
    assert_one_line_error(&out, 2, &["perf.data is a FIFO, not a regular file"]);
    let out = bounded(&[
        OsStr::new("c2c"),
        OsStr::new("import"),
        dir.path().as_os_str(),
    ]);
    assert_one_line_error(&out, 2, &["is a directory, not a regular file"]);
    assert!(!dir.path().join("imported").exists(), "no run was made");
}

#[test]
fn dev_zero_behind_a_link_is_refused_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let run = good_run(dir.path());
    // In a run directory: a link, refused by name before anything is read.
    std::fs::create_dir(run.join("maps")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", run.join("maps/10-1.maps")).unwrap();
    let out = report(&run, &[]);
    assert_one_line_error(
        &out,
        2,
        &["maps/10-1.maps is a symbolic link to /dev/zero, out of the run directory"],
    );
    std::fs::remove_file(run.join("maps/10-1.maps")).unwrap();
    std::fs::rename(run.join("meta.json"), dir.path().join("meta.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", run.join("meta.json")).unwrap();
    let out = report(&run, &[]);
    assert_one_line_error(
        &out,
        2,
        &["meta.json is a symbolic link to /dev/zero, out of the run directory"],
    );
    // A path the user names is followed, and what it leads to must be a regular file.
    let link = dir.path().join("perf.data");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let out = bounded(&[OsStr::new("c2c"), OsStr::new("import"), link.as_os_str()]);
    assert_one_line_error(
        &out,
        2,
        &["perf.data is a character device, not a regular file"],
    );
}

#[test]
fn an_oversized_meta_json_is_refused_by_its_size_unread() {
    let dir = tempfile::tempdir().unwrap();
    let run = good_run(dir.path());
    // Sparse: 3.1 GiB that take no disk.
    std::fs::File::options()
        .write(true)
        .open(run.join("meta.json"))
        .unwrap()
        .set_len(3_328_599_654)
        .unwrap();
    let out = report(&run, &[]);
    assert_one_line_error(
        &out,
        2,
        &["meta.json is 3.1 GiB, more than the 64 MiB a meta.json may be"],
    );
}

#[test]
fn a_link_out_of_the_run_directory_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let run = good_run(dir.path());
    // The streams directory moved out and linked back: what it holds is not the run's.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::rename(run.join("streams"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, run.join("streams")).unwrap();
    let out = report(&run, &[]);
    assert_one_line_error(
        &out,
        2,
        &[
            &format!("streams is a symbolic link to {}", elsewhere.display()),
            "out of the run directory",
        ],
    );
    // A stream meta.json lists outside the run is refused without being opened (meta.json's
    // own check; trace::files refuses it again where a file is opened).
    std::fs::remove_file(run.join("streams")).unwrap();
    std::fs::rename(&elsewhere, run.join("streams")).unwrap();
    let mut m: Meta =
        Meta::from_json(&std::fs::read_to_string(run.join("meta.json")).unwrap()).unwrap();
    m.streams[0].file = "../outside.cst".into();
    std::fs::copy(
        run.join("streams/10-11-1.cst"),
        dir.path().join("outside.cst"),
    )
    .unwrap();
    std::fs::write(run.join("meta.json"), serde_json::to_string(&m).unwrap()).unwrap();
    let out = report(&run, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        stderr(&out).contains("\"../outside.cst\" is not a path inside the run directory"),
        "{}",
        show(&out)
    );
}

/// `sh -c SCRIPT` with stdout and stderr a pipe whose reader has already gone: every write
/// meets EPIPE, as with `| true` once `true` has exited, without depending on who runs first.
fn with_closed_output(script: &str, dir: &Path) -> std::process::ExitStatus {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .env("CONTEND", CONTEND)
        .current_dir(dir)
        .stdout(writer.try_clone().unwrap())
        .stderr(writer);
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("{script} did not end within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn record_with_its_output_closed_keeps_the_whole_run() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    // The program outlives contend's first notes, then fails: its status must come through.
    let status = with_closed_output(
        r#""$CONTEND" record -o R -- sh -c 'sleep 0.3; exit 3'; echo $? > status"#,
        dir.path(),
    );
    assert!(status.success(), "{status:?}");
    let code = std::fs::read_to_string(dir.path().join("status")).unwrap();
    assert_eq!(code.trim(), "3", "contend passes the program's status on");
    let m = meta(&dir.path().join("R"));
    assert!(m["ended"]["unix_ns"].as_u64().is_some(), "{m}");
    assert_eq!(m["exit_status"], 3, "{m}");
    let streams = m["streams"].as_array().unwrap();
    assert!(!streams.is_empty(), "{m}");
    // The same through a shell pipe, as users write it.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#""$CONTEND" record -o R2 -- sh -c 'sleep 0.3; exit 3' 2>&1 | true"#)
        .env("CONTEND", CONTEND)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let m = meta(&dir.path().join("R2"));
    assert!(m["ended"]["unix_ns"].as_u64().is_some(), "{m}");
    assert_eq!(m["exit_status"], 3, "{m}");
}

#[test]
fn report_to_a_closed_pipe_ends_quietly_with_0() {
    let dir = tempfile::tempdir().unwrap();
    let run = good_run(dir.path());
    for args in ["", "--json", "--perfetto -"] {
        let status = with_closed_output(
            &format!(r#""$CONTEND" report run {args}; echo $? > status"#),
            dir.path(),
        );
        assert!(status.success(), "{status:?}");
        let code = std::fs::read_to_string(dir.path().join("status")).unwrap();
        assert_eq!(code.trim(), "0", "report {args} to a closed pipe");
    }
    let _ = run;
    // `| head -1`: one line read, contend's status 0 and nothing on stderr.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"{ "$CONTEND" report run 2>err; echo $? > status; } | head -1"#)
        .env("CONTEND", CONTEND)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", show(&out));
    let code = std::fs::read_to_string(dir.path().join("status")).unwrap();
    assert_eq!(code.trim(), "0");
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_non_utf8_output_path_is_recorded_into() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"run-\xff");
    let out = output_within(
        Command::new(CONTEND)
            .current_dir(dir.path())
            .arg("record")
            .arg("--interval")
            .arg("0")
            .arg("-o")
            .arg(name)
            .args(["--", "true"]),
        DEADLINE,
    )
    .expect("record ends");
    assert!(out.status.success(), "{}", show(&out));
    let m = meta(&dir.path().join(name));
    assert_eq!(m["recorded_by"][5], "run-\u{fffd}", "{m}");
    assert!(m["ended"]["unix_ns"].as_u64().is_some(), "{m}");
}

#[test]
fn output_paths_that_cannot_be_a_run_directory_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let root_numbered = Path::new("/.1").exists();
    let out = contend(&["record", "-o", "/", "--", "true"]);
    assert_one_line_error(&out, 2, &["/: names no new directory"]);
    assert_eq!(Path::new("/.1").exists(), root_numbered, "no /.1 was made");

    let out = contend(&["record", "-o", "/proc/nope", "--", "true"]);
    assert_one_line_error(
        &out,
        2,
        &["/proc/nope: cannot create a directory in /proc: it takes no new directories"],
    );

    let file = dir.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    let out = contend(&["record", "-o", file.to_str().unwrap(), "--", "true"]);
    assert_one_line_error(
        &out,
        2,
        &["afile: exists and is a regular file, not a directory"],
    );
    let out = contend(&[
        "record",
        "-o",
        file.join("run").to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_one_line_error(
        &out,
        2,
        &["afile is a regular file, not a directory to create the run in"],
    );
    let out = contend(&["scale", "--threads", "1", "-o", "/", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        stderr(&out).contains("/: names no new directory"),
        "{}",
        show(&out)
    );
}

#[test]
fn a_file_given_as_a_run_directory_is_called_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "x").unwrap();
    let out = contend(&["report", file.to_str().unwrap()]);
    assert_one_line_error(
        &out,
        2,
        &["notes.txt is a regular file, not a run directory"],
    );
    let out = contend(&["report", dir.path().join("absent").to_str().unwrap()]);
    assert_one_line_error(&out, 2, &["absent: no such run directory"]);
}

#[test]
fn scale_refuses_more_threads_than_a_machine_holds() {
    let out = contend(&["scale", "--threads", "4294967295", "--", "true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let cpus = crate::common::online_cpus();
    let expected = format!(
        "--threads 4294967295: at most {} on this machine (64 per online CPU, {cpus} online)",
        64 * cpus
    );
    assert!(err.contains(&expected), "{err}");
    assert!(stdout(&out).is_empty());
}

/// Every whole number of 13 digits or more in `text` (digits grouped by spaces read as one;
/// decimals after a point ignored): no duration or count of these runs is that large, and a
/// u64 wrapped below zero prints as 18 446 744 073 709 ms.
fn long_numbers(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut digits = String::new();
    let mut after_point = false;
    let mut previous = ' ';
    for c in text.chars().chain(std::iter::once('\n')) {
        if c.is_ascii_digit() {
            if digits.is_empty() {
                after_point = previous == '.';
            }
            digits.push(c);
        } else if c == ' ' && !digits.is_empty() && digits.len() % 4 == 3 {
            digits.push(' '); // perhaps a thousands separator
        } else {
            let n = digits.replace(' ', "");
            if n.len() >= 13 && !after_point {
                found.push(n);
            }
            digits.clear();
        }
        previous = c;
    }
    found
}

/// Every number in `v` that is 2^62 or more (no duration, count or CLOCK_MONOTONIC time of a
/// run is; a u64 wrapped below zero is 2^64 less a little).
fn huge_json_numbers(v: &serde_json::Value, path: &str, found: &mut Vec<String>) {
    match v {
        serde_json::Value::Number(n) if n.as_f64().is_some_and(|x| x.abs() >= 2f64.powi(62)) => {
            found.push(format!("{path} = {n}"));
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                huge_json_numbers(x, &format!("{path}[{i}]"), found);
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                huge_json_numbers(x, &format!("{path}.{k}"), found);
            }
        }
        _ => {}
    }
}

/// `contend report RUN` as text and as JSON, both succeeding; neither may show a wrapped
/// number, and stderr must say what was invalid. Returns the notes.
fn report_without_wrapped_values(run: &Path, needles: &[&str]) -> String {
    let text = report(run, &[]);
    assert!(text.status.success(), "{}", show(&text));
    assert_eq!(
        long_numbers(&stdout(&text)),
        Vec::<String>::new(),
        "{}",
        show(&text)
    );
    let json = report(run, &["--json"]);
    assert!(json.status.success(), "{}", show(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let mut huge = Vec::new();
    huge_json_numbers(&v, "", &mut huge);
    assert_eq!(huge, Vec::<String>::new(), "{}", show(&json));
    let notes = stderr(&text);
    for n in needles {
        assert!(notes.contains(n), "{n:?} not in {notes}");
    }
    assert!(!notes.contains("panicked"), "{notes}");
    notes
}

/// A run of one sampler stream (`samples`) and, if given, one MPI rank stream (`calls`, with
/// the rank's clock samples `clock`).
fn sampled_run(
    root: &Path,
    samples: &[trace::sched::ThreadSample],
    calls: &[(u64, u64, trace::mpi::Function)],
    clock: &[(u64, u8, i64)],
    span: [u64; 2],
) -> PathBuf {
    let run = RunDir::create(&root.join("run")).unwrap();
    let mut meta = Meta::new(vec!["./hostile".into()]);
    meta.captured.push(trace::Captured::Schedstat);
    meta.monotonic_span = Some(span);
    meta.sampling = Some(trace::meta::Sampling {
        interval_ns: 10_000_000,
        source: "schedstat".into(),
        rounds: samples.len() as u64,
        late_rounds: 0,
        sampler_cpu_ns: 0,
        wall_ns: span[1].wrapping_sub(span[0]),
        sched_tracepoints: false,
        steal_ns: None,
        sched_trace: None,
    });
    let (path, rel) = run.stream_path("sched-11");
    let mut w = StreamWriter::new(std::fs::File::create(&path).unwrap(), &header(11), 64).unwrap();
    for s in samples {
        for r in s.encode() {
            w.push(&r);
        }
    }
    w.finish(samples.iter().map(|s| s.ts).max().unwrap_or(0))
        .unwrap();
    meta.streams.push(StreamEntry {
        file: rel,
        kind: StreamKind::Thread,
        pid: 10,
        tid: 11,
        rank: None,
        events: 3 * samples.len() as u64,
        dropped: 0,
        name: "worker".into(),
        role: Some(trace::StreamRole::Sampler),
    });
    if !calls.is_empty() {
        meta.captured.push(trace::Captured::Mpi);
        let (path, rel) = run.stream_path("rank-0");
        let h = Header {
            kind: StreamKind::Rank,
            rank: 0,
            ..header(12)
        };
        let mut w = StreamWriter::new(std::fs::File::create(&path).unwrap(), &h, 64).unwrap();
        for &(ts, phase, offset_ns) in clock {
            let c = trace::mpi::ClockSample {
                ts,
                phase,
                round_trips: 1,
                best_round_trip_ns: 100,
                offset_ns,
            };
            for r in c.encode() {
                w.push(&r);
            }
        }
        for &(enter, exit, f) in calls {
            let g = trace::mpi::CallGroup {
                enter,
                exit,
                function: f as u8,
                site: trace::NO_SITE,
                comm: trace::mpi::NO_COMM,
                args: Vec::new(),
                ret: 0,
            };
            for r in g.encode() {
                w.push(&r);
            }
        }
        w.finish(calls.iter().map(|c| c.1).max().unwrap_or(0))
            .unwrap();
        meta.streams.push(StreamEntry {
            file: rel,
            kind: StreamKind::Rank,
            pid: 10,
            tid: 12,
            rank: Some(0),
            events: 0,
            dropped: 0,
            name: "rank 0".into(),
            role: Some(trace::StreamRole::MpiRank),
        });
    }
    run.write_meta(&meta).unwrap();
    run.path().to_path_buf()
}

#[test]
fn hostile_lock_streams_show_no_wrapped_value() {
    use trace::locks::CONTENDED;
    use EventKind::*;
    // An acquisition timed before its wait: the wait was acquired - requested, wrapped to
    // 18 446 744 073 709 ms in a release build (a panic in a debug one).
    let dir = tempfile::tempdir().unwrap();
    let run = lock_run(
        dir.path(),
        &[
            (5_000_000, LockWait, 0),
            (1_000_000, LockAcquired, CONTENDED),
            (6_000_000, LockReleased, 0),
            // And a release before its acquisition.
            (7_000_000, LockAcquired, 0),
            (6_500_000, LockReleased, 0),
        ],
        [0, 10_000_000],
    );
    report_without_wrapped_values(
        &run,
        &[
            "2 lock event(s) are timed before the event they end",
            "counted as 0",
        ],
    );
    // A run span that ends before it starts.
    let dir = tempfile::tempdir().unwrap();
    let run = good_run_with_span(dir.path(), [10_000_000, 0]);
    report_without_wrapped_values(
        &run,
        &["monotonic_span [10000000, 0] is invalid (it ends before it starts)"],
    );
}

fn good_run_with_span(root: &Path, span: [u64; 2]) -> PathBuf {
    use trace::locks::CONTENDED;
    lock_run(
        root,
        &[
            (1_000_000, EventKind::LockWait, 0),
            (2_000_000, EventKind::LockAcquired, CONTENDED),
            (3_000_000, EventKind::LockReleased, 0),
        ],
        span,
    )
}

#[test]
fn hostile_sampler_and_mpi_streams_show_no_wrapped_value() {
    use trace::mpi::Function::{Barrier, Finalize, Init};
    use trace::sched::ThreadSample;
    let s = |ts: u64, on_cpu_ns: u64, runq_wait_ns: u64| ThreadSample {
        ts,
        on_cpu_ns,
        runq_wait_ns,
        voluntary_switches: 1,
        involuntary_switches: 1,
        last_cpu: Some(0),
        state: b'R',
    };
    // Times near the end of u64 in a span that claims all of it: the elapsed time and the
    // thread's lifetime were 18 446 744 073 709 ms.
    let dir = tempfile::tempdir().unwrap();
    let run = sampled_run(
        dir.path(),
        &[s(u64::MAX - 30, 10, 10), s(u64::MAX - 20, 10, 10)],
        &[],
        &[],
        [0, u64::MAX],
    );
    report_without_wrapped_values(
        &run,
        &[
            "monotonic_span [0, 18446744073709551615] is invalid",
            "2 of 2 service-time samples of thread 11 are invalid",
        ],
    );
    // Samples that run backwards, or give a thread more CPU time than time passed; an MPI
    // call that exits before it enters, one past a century, and clock offsets at i64's ends.
    let big = trace::sched::MAX_SAMPLE_NS;
    let dir = tempfile::tempdir().unwrap();
    let run = sampled_run(
        dir.path(),
        &[
            s(30_000_000, 1_000_000, 0),
            s(10_000_000, 5_000_000, 1_000),
            s(40_000_000, big, big),
        ],
        &[
            (1_000_000, 2_000_000, Init),
            (9_000_000, 3_000_000, Barrier),
            (u64::MAX - 1, 5, Barrier),
            (10_000_000, 11_000_000, Finalize),
        ],
        &[(1_000_000, 0, i64::MIN), (10_000_000, 1, i64::MAX)],
        [0, 50_000_000],
    );
    report_without_wrapped_values(
        &run,
        &[
            "2 of 3 service-time samples of thread 11 are invalid",
            "rank-0.cst: 3 MPI call(s) or clock comparison(s) are invalid",
            "rank-0.cst: 1 MPI call(s) exit before they enter",
        ],
    );
}

#[test]
fn perfetto_of_a_damaged_run_is_bad_input() {
    use trace::locks::CONTENDED;
    let dir = tempfile::tempdir().unwrap();
    // Times Perfetto's signed nanoseconds cannot hold: not the machine's failure (exit 1)
    // but the run's (exit 2).
    let run = lock_run(
        dir.path(),
        &[
            (u64::MAX - 10, EventKind::LockWait, 0),
            (u64::MAX - 5, EventKind::LockAcquired, CONTENDED),
            (u64::MAX - 1, EventKind::LockReleased, 0),
        ],
        [0, 10_000_000],
    );
    let trace = dir.path().join("t.pftrace");
    let out = report(&run, &["--perfetto", trace.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        err.contains("contend: error: --perfetto: cannot export: slice")
            && err
                .contains("beyond Perfetto's signed 64-bit timestamps (the run's data is damaged"),
        "{err}"
    );
}
