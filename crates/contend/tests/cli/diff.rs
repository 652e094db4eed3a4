//! `contend diff` as users run it: saved JSON reports with known numbers, the % changes it
//! prints, every format, `--fail-if` exit codes, refused inputs, and two run directories built
//! with the trace writer.

use crate::common::{assert_one_line_error, contend, stderr, stdout};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use trace::meta::{Meta, StreamEntry};
use trace::{ClockSource, EventKind, Header, ObjectKind, Record, RunDir, StreamKind, StreamWriter};

/// A report as `contend report --json` prints it, with the numbers that matter set.
fn report(wait_ns: u64, events: u64, counter_wait_ns: u64, duration_s: f64) -> Value {
    json!({
        "run": "contend.data",
        "command": ["./app"],
        "started_utc": "2024-01-01T00:00:00Z",
        "started_unix_ns": 1_704_067_200_000_000_000u64,
        "duration_s": duration_s,
        "host": "h", "kernel": "6.1",
        "clock": {"source": "monotonic", "hz": 1_000_000_000u64, "calibration_points": 0},
        "captured": ["locks"],
        "streams": [{"file": "streams/t1.cst", "pid": 10, "tid": 11, "events": events,
                     "span_s": 0.5, "dropped": 0, "complete": true}],
        "events": events,
        "events_dropped": 0,
        "exit_status": 0,
        "locks": {
            "sample_every": 1, "start_ns": 100, "end_ns": 900,
            "summary": {"events": 10, "contended": 2, "wait_ns": wait_ns, "mean_hold_ns": 50.0},
            "locks": [
                {"lock": {"pid": 10, "address": 4096, "name": "counter_lock"},
                 "kind": "mutex", "wait_ns": counter_wait_ns, "threads": [11, 12]}
            ]
        }
    })
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    p.to_str().unwrap().to_string()
}

/// Three saved reports: b waits 50 % more overall and half as long on counter_lock; c has no
/// events and lacks counter_lock.
fn three(dir: &Path) -> (String, String, String) {
    let a = write(dir, "a.json", &report(2_000_000, 400, 1_000_000, 1.0));
    let b = write(dir, "b.json", &report(3_000_000, 400, 500_000, 1.1));
    let mut c = report(2_000_000, 0, 0, 2.0);
    c["locks"]["locks"] = json!([]);
    let c = write(dir, "c.json", &c);
    (a, b, c)
}

/// The table row of a metric, whitespace collapsed.
fn row(text: &str, metric: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(metric))
        .unwrap_or_else(|| panic!("no row {metric} in\n{text}"));
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn percent_changes_against_the_first_input_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = three(dir.path());
    let out = contend(&["diff", &a, &b, &c]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("CHANGE (%)") && text.contains("UNIT"),
        "{text}"
    );
    assert_eq!(
        row(&text, "locks.summary.wait_ns"),
        "│ locks.summary.wait_ns ms 2.000 3.000 +50.0 2.000 0.0 │"
    );
    assert_eq!(
        row(&text, "locks.locks[name=counter_lock].wait_ns"),
        "│ locks.locks[name=counter_lock].wait_ns ms 1.000 0.500 -50.0 — missing │"
    );
    assert_eq!(
        row(&text, "events"),
        "│ events count 400 400 0.0 0 -100.0 │"
    );
    assert_eq!(
        row(&text, "duration_s"),
        "│ duration_s s 1.000 1.100 +10.0 2.000 +100.0 │"
    );
    // identities are not compared
    for id in [
        "started_unix_ns",
        ".pid",
        ".tid",
        ".address",
        "start_ns",
        "exit_status",
    ] {
        assert!(!text.contains(id), "{id} in\n{text}");
    }
    assert!(!text.contains("threads["), "{text}");
}

#[test]
fn metric_globs_select_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, _) = three(dir.path());
    let out = contend(&["diff", &a, &b, "--metric", "locks.*wait*"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("locks.")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(!text.contains("events"), "{text}");

    let out = contend(&["diff", &a, &b, "--metric", "nothing.here*"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no metric matches --metric nothing.here*"));
}

#[test]
fn json_csv_markdown_and_latex_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, _) = three(dir.path());
    let out = contend(&["diff", &a, &b, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("diff", &v);
    assert_eq!(v["baseline"], a.as_str());
    let m = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "locks.summary.wait_ns")
        .unwrap();
    assert_eq!(m["unit"], "ns");
    assert_eq!(m["values"], json!([2_000_000.0, 3_000_000.0]));
    assert_eq!(m["changes"][0]["pct"], 50.0);
    assert_eq!(m["changes"][0]["delta"], 1_000_000.0);

    for args in [vec!["--csv"], vec!["--format", "csv"]] {
        let mut full = vec!["diff", &a, &b];
        full.extend(args);
        let out = contend(&full);
        let text = stdout(&out);
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            format!("metric,unit,{a},{b},{b} change (%)")
        );
        assert!(
            text.contains("\nlocks.summary.wait_ns,ns,2000000,3000000,50\n"),
            "{text}"
        );
    }

    let md = stdout(&contend(&["diff", &a, &b, "--format", "markdown"]));
    assert!(md.starts_with("| metric | unit |"), "{md}");
    assert!(
        md.contains("| `locks.summary.wait_ns` | ms | 2.000 | 3.000 | +50.0 |"),
        "{md}"
    );

    let tex = stdout(&contend(&["diff", &a, &b, "--format", "latex"]));
    assert!(tex.contains("\\begin{tabular}"), "{tex}");
    assert!(
        tex.contains("locks.summary.wait\\_ns & ms & 2.000 & 3.000 & +50.0 \\\\"),
        "{tex}"
    );

    // --json with another format is a usage error
    let out = contend(&["diff", &a, &b, "--json", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_crossed_bound_exits_1_and_names_the_metric() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, _) = three(dir.path());
    let out = contend(&["diff", &a, &b, "--fail-if", "locks.summary.wait_ns>+5%"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.starts_with("contend: bound crossed: "))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(
        line,
        format!("contend: bound crossed: locks.summary.wait_ns: 2.000 ms -> 3.000 ms (+50.0 %, +1.000 ms) in {b}, bound locks.summary.wait_ns>+5%")
    );
    assert!(
        err.contains("contend: error: 1 --fail-if bound(s) crossed"),
        "{err}"
    );
    // the table is still printed
    assert!(stdout(&out).contains("locks.summary.wait_ns"));

    // a glob: any match crossing fires (counter_lock waits 50 % less)
    let out = contend(&["diff", &a, &b, "--fail-if", "locks.*wait*<-40%"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(
            "bound crossed: locks.locks[name=counter_lock].wait_ns: 1.000 ms -> 0.500 ms (-50.0 %"
        ),
        "{err}"
    );
    assert!(
        !err.contains("bound crossed: locks.summary.wait_ns"),
        "{err}"
    );

    // absolute, in the metric's own unit (ns)
    let out = contend(&["diff", &a, &b, "--fail-if", "locks.summary.wait_ns>+999999"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bounds_not_crossed_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, _) = three(dir.path());
    let out = contend(&[
        "diff",
        &a,
        &b,
        "--fail-if",
        "locks.summary.wait_ns>+50%",
        "--fail-if",
        "locks.summary.wait_ns>+1000000",
        "--fail-if",
        "events<-1%",
        "--fail-if",
        "locks.*wait*<-60%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("crossed"), "{}", stderr(&out));
}

#[test]
fn a_bound_on_a_missing_metric_is_a_note_unless_asked_to_fail() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _, c) = three(dir.path());
    let bound = "locks.locks[name=counter_lock].wait_ns>+5%";
    let out = contend(&["diff", &a, &c, "--fail-if", bound]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "contend: note: locks.locks[name=counter_lock].wait_ns: no value in {c}"
        )),
        "{err}"
    );
    let out = contend(&["diff", &a, &c, "--fail-if", bound, "--fail-if-missing"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // a glob matching nothing anywhere is a note too
    let out = contend(&["diff", &a, &c, "--fail-if", "no.such.metric>+5%"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("no metric matches `no.such.metric`"));
}

#[test]
fn a_malformed_bound_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, _) = three(dir.path());
    for bad in ["wait_ns=5%", "wait_ns>", "wait_ns>lots", ">+5%"] {
        let out = contend(&["diff", &a, &b, "--fail-if", bad]);
        assert_one_line_error(
            &out,
            2,
            &[
                &format!("--fail-if '{bad}'"),
                "expected METRIC>+N%",
                "METRIC<-N%",
            ],
        );
    }
}

#[test]
fn inputs_that_are_not_runs_or_reports_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _, _) = three(dir.path());
    let missing = dir.path().join("nope.json");
    let missing = missing.to_str().unwrap();
    assert_one_line_error(
        &contend(&["diff", &a, missing]),
        2,
        &[
            missing,
            "no such file or directory",
            "expected a run directory",
        ],
    );
    let text = write(dir.path(), "notes.txt", &json!(null));
    std::fs::write(&text, "hello").unwrap();
    assert_one_line_error(
        &contend(&["diff", &text, &a]),
        2,
        &[&text, "not a JSON report", "expected a run directory"],
    );
    let array = write(dir.path(), "array.json", &json!([1, 2]));
    assert_one_line_error(
        &contend(&["diff", &a, &array]),
        2,
        &[&array, "not an object"],
    );
    let empty_dir = dir.path().join("empty");
    std::fs::create_dir(&empty_dir).unwrap();
    let empty_dir = empty_dir.to_str().unwrap();
    assert_one_line_error(
        &contend(&["diff", &a, empty_dir]),
        2,
        &[empty_dir, "without meta.json or scale.json"],
    );
    // one input is not a comparison
    assert_eq!(contend(&["diff", &a]).status.code(), Some(2));
}

#[test]
fn a_scale_directory_is_read_from_its_scale_json() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _, _) = three(dir.path());
    let scale = dir.path().join("scale.data");
    std::fs::create_dir(&scale).unwrap();
    let mut v = report(4_000_000, 400, 1_000_000, 1.0);
    v["speedup"] = json!(3.2);
    write(&scale, "scale.json", &v);
    let out = contend(&["diff", &a, scale.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        row(&text, "locks.summary.wait_ns").contains("+100.0"),
        "{text}"
    );
    assert!(row(&text, "speedup").contains("— 3.200 missing"), "{text}");
}

/// Time, kind and aux byte of a lock event.
type Event = (u64, EventKind, u8);

/// A run directory whose two threads contend for one mutex: t1 holds it for `hold_ns`
/// while t2 waits, so the run's lock wait is `hold_ns`.
fn lock_run(root: &Path, name: &str, hold_ns: u64) -> PathBuf {
    let run = RunDir::create(&root.join(name)).unwrap();
    let mut meta = Meta::new(vec!["./example".into()]);
    meta.captured.push("locks".into());
    let release = trace::locks::MODE_EXCLUSIVE;
    let contended = trace::locks::CONTENDED;
    let events: [(&str, u32, Vec<Event>); 2] = [
        (
            "t1",
            11,
            vec![
                (0, EventKind::LockAcquired, release),
                (hold_ns, EventKind::LockReleased, release),
            ],
        ),
        (
            "t2",
            12,
            vec![
                (0, EventKind::LockWait, contended),
                (hold_ns, EventKind::LockAcquired, contended),
                (hold_ns + 1_000_000, EventKind::LockReleased, release),
            ],
        ),
    ];
    for (stream, tid, records) in events {
        let (path, rel) = run.stream_path(stream);
        let header = Header {
            kind: StreamKind::Thread,
            clock: ClockSource::Monotonic,
            clock_hz: 1_000_000_000,
            pid: 10,
            tid,
            rank: -1,
            base_time: 0,
        };
        let mut w = StreamWriter::new(std::fs::File::create(&path).unwrap(), &header, 64).unwrap();
        let lock = w.intern_object(0x1000, ObjectKind::Mutex);
        let site = w.intern_site(0x401000);
        let n = records.len() as u64;
        for (ts, kind, aux) in records {
            w.push(&Record {
                ts,
                kind,
                aux,
                site,
                obj: lock,
            });
        }
        w.finish(hold_ns + 2_000_000).unwrap();
        meta.streams.push(StreamEntry {
            file: rel,
            kind: StreamKind::Thread,
            pid: 10,
            tid,
            rank: None,
            events: n,
            dropped: 0,
            name: String::new(),
            role: Some(trace::StreamRole::Lock),
        });
    }
    run.write_meta(&meta).unwrap();
    run.path().to_path_buf()
}

#[test]
fn two_run_directories_are_compared() {
    let dir = tempfile::tempdir().unwrap();
    let a = lock_run(dir.path(), "a.data", 1_000_000);
    let b = lock_run(dir.path(), "b.data", 3_000_000);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = contend(&["diff", a, b]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        row(&text, "locks.summary.wait_ns"),
        "│ locks.summary.wait_ns ms 1.000 3.000 +200.0 │"
    );
    assert_eq!(
        row(&text, "locks.locks[address=0x1000].wait_ns"),
        "│ locks.locks[address=0x1000].wait_ns ms 1.000 3.000 +200.0 │"
    );
    assert_eq!(row(&text, "events"), "│ events count 5 5 0.0 │");
    assert!(!text.contains("unix_ns"), "{text}");

    // the same numbers as the saved report of the run
    let saved = contend(&["report", "--json", a]);
    assert!(saved.status.success());
    let saved_path = dir.path().join("a.json");
    std::fs::write(&saved_path, &saved.stdout).unwrap();
    let out = contend(&[
        "diff",
        saved_path.to_str().unwrap(),
        b,
        "--metric",
        "locks.summary.wait_ns",
        "--fail-if",
        "locks.summary.wait_ns>+100%",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("+200.0"));
    assert!(stderr(&out)
        .contains("bound crossed: locks.summary.wait_ns: 1.000 ms -> 3.000 ms (+200.0 %"));
}
