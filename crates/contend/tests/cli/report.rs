//! `contend report` on run directories built with the trace writer: a good run is summarised;
//! damaged ones are refused with one line and exit code 2.

use crate::common::contend;
use std::path::{Path, PathBuf};
use trace::meta::{Meta, StreamEntry};
use trace::{ClockSource, EventKind, Header, Record, RunDir, StreamKind, StreamWriter};

/// A run with two thread streams: `t1` closed with 300 marks, `t2` cut after 100 (no trailer).
fn make_run(root: &Path) -> PathBuf {
    let run = RunDir::create(&root.join("contend.data")).unwrap();
    let mut meta = Meta::new(vec!["./example".into(), "4".into()]);
    meta.captured.push("mark".into());
    meta.unavailable.push(trace::meta::Unavailable {
        what: "hardware counters".into(),
        why: "no PMU in this VM".into(),
    });
    for (name, tid, n, close) in [("t1", 11, 300u64, true), ("t2", 12, 100, false)] {
        let (path, rel) = run.stream_path(name);
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
        let label = w.intern_string("tick");
        for i in 0..n {
            w.push(&Record {
                ts: 1_000_000 * i,
                kind: EventKind::Mark,
                aux: 0,
                site: trace::NO_SITE,
                obj: label,
            });
        }
        if close {
            w.finish(n * 1_000_000).unwrap();
        } else {
            w.flush().unwrap();
            std::mem::forget(w); // as if killed: no trailer
        }
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
fn a_run_is_summarised_per_stream() {
    let dir = tempfile::tempdir().unwrap();
    let run = make_run(dir.path());
    let out = contend(&["report", run.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("command:     ./example 4"), "{text}");
    assert!(
        text.contains("events:      400 in 2 stream(s), 0 dropped"),
        "{text}"
    );
    assert!(
        text.contains("unavailable: hardware counters: no PMU in this VM"),
        "{text}"
    );
    assert!(
        text.contains("clock:       monotonic (1000000000 Hz)"),
        "{text}"
    );
    let row = |file: &str| {
        let line = text.lines().find(|l| l.contains(file)).unwrap_or_default();
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    assert_eq!(
        row("streams/t1.cst"),
        "│ streams/t1.cst thread 10 11 300 mark: 300 0.299000 0 yes │"
    );
    assert_eq!(
        row("streams/t2.cst"),
        "│ streams/t2.cst thread 10 12 100 mark: 100 0.099000 0 NO │"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("t2.cst was not closed by its writer"),
        "{stderr}"
    );

    let out = contend(&["report", "--json", run.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["events"], 400);
    assert_eq!(v["streams"][0]["complete"], true);
    assert_eq!(v["streams"][1]["complete"], false);
    assert_eq!(v["streams"][0]["span_s"], 0.299);
    assert_eq!(v["streams"][1]["events_by_kind"]["mark"], 100);
    assert_eq!(v["clock"]["source"], "monotonic");
    assert_eq!(v["clock"]["hz"], 1_000_000_000u64);
    assert_eq!(v["unavailable"][0]["what"], "hardware counters");
}

#[test]
fn a_stream_missing_from_meta_is_read_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let run = make_run(dir.path());
    std::fs::copy(run.join("streams/t1.cst"), run.join("streams/t3.cst")).unwrap();
    let out = contend(&["report", run.to_str().unwrap()]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("streams/t3.cst is not listed in meta.json"),
        "{stderr}"
    );
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("700 in 3 stream(s)"));
}

#[test]
fn an_empty_or_missing_stream_file_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = make_run(dir.path());
    std::fs::write(run.join("streams/t1.cst"), b"").unwrap();
    assert_refused(&run, "streams/t1.cst: at byte 0: the file is 0 bytes");
    std::fs::remove_file(run.join("streams/t1.cst")).unwrap();
    assert_refused(&run, "streams/t1.cst");
}

fn assert_refused(run: &Path, needle: &str) {
    let out = contend(&["report", run.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let errors: Vec<&str> = stderr.lines().filter(|l| !l.contains("note:")).collect();
    assert_eq!(errors.len(), 1, "not one line: {stderr}");
    assert!(errors[0].starts_with("contend: error: "), "{stderr}");
    assert!(errors[0].contains(needle), "{needle:?} not in {stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_truncated_stream_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = make_run(dir.path());
    let path = run.join("streams/t1.cst");
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 100).unwrap(); // inside the last events chunk
    assert_refused(&run, "streams/t1.cst: at byte");
    assert_refused(&run, "truncated inside chunk");
}

#[test]
fn a_bit_flip_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = make_run(dir.path());
    let path = run.join("streams/t2.cst");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[500] ^= 0x08;
    std::fs::write(&path, bytes).unwrap();
    assert_refused(&run, "streams/t2.cst: at byte");
    assert_refused(&run, "checksum mismatch");
}

#[test]
fn missing_and_foreign_runs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert_refused(&dir.path().join("nothing-here"), "no such run directory");
    assert_refused(dir.path(), "not a run directory");
    let run = make_run(dir.path());
    let meta = run.join("meta.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(
        &meta,
        text.replace("\"schema_version\": 1", "\"schema_version\": 9"),
    )
    .unwrap();
    assert_refused(&run, "newer than this contend");
}
