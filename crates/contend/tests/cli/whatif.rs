//! The lock what-if against the real fix: planted_hold recorded with its hot lock, and the same
//! program with a lock per thread (`-n`) run for real; the replayed prediction must keep the
//! held work (never below the CPU time over the CPUs) and land near the fixed program's time.

use crate::common::{self, build, contend_in, num, serial, stdout, truth_line, two_cpus};
use std::process::Command;
use std::time::Instant;

/// Runs of the fixed program: the median is compared, the spread widens the tolerance.
const RUNS: usize = 5;

/// The model's error on a quiet machine (docs/benchmarks.md, "Lock what-if checked against
/// the real fix": within 10 % on every case there); 20 % is what the issue asks.
const MODEL_TOLERANCE: f64 = 0.20;

#[test]
fn planted_hold_what_if_predicts_the_program_with_a_lock_per_thread() {
    let _one = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/locks/planted_hold.c", dir.path()) else {
        return;
    };
    let truth = common::record(dir.path(), &["--locks"], &exe, &[]);
    let held_at_call = num(&truth, "hot_lock.held_at_call");
    assert!(
        held_at_call >= 1.0,
        "precondition: the threads never overlapped, no wait to remove: {truth:?}"
    );
    let report = common::report_json(dir.path(), &["run"]);
    let locks = &report["locks"];
    let w = &locks["what_if"];
    let cpus = w["cpus"]
        .as_f64()
        .unwrap_or_else(|| panic!("no what-if: {locks}"));
    assert_eq!(w["cpus_from"], "online", "{w}");
    assert_eq!(cpus, common::online_cpus() as f64, "{w}");
    let addr = u64::from_str_radix(truth["hot_lock.addr"].trim_start_matches("0x"), 16).unwrap();
    let hot = w["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"]["address"] == addr)
        .unwrap_or_else(|| panic!("hot_lock not replayed: {w}"));
    assert_eq!(hot["method"], "replay", "{hot}");
    let predicted = hot["predicted_ns"].as_f64().unwrap();
    let bound = hot["bound_ns"].as_f64().unwrap();
    assert!(
        predicted >= bound,
        "the replay is never below its bound: {hot}"
    );

    // Whatever the machine's load: the program's CPU work (each round's hold and work spin on
    // the thread's CPU clock, so at least this much) cannot run faster than on all the CPUs.
    // Less the sampler's blind spot: a thread's last interval before it exits (10 ms each).
    let threads = num(&truth, "threads");
    let work = threads
        * num(&truth, "holds_per_thread")
        * (num(&truth, "hold_ns") + num(&truth, "work_ns"));
    let floor = (work - threads * 10e6) / cpus;
    assert!(
        bound >= floor,
        "the bound keeps the held work: {bound} ns < {floor} ns of CPU work per CPU: {hot}"
    );
    // The old subtraction (run less the lock's critical-path wait) said ~20 ms here.
    let old = locks["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"]["address"] == addr)
        .unwrap()["what_if_ns"]
        .as_f64()
        .unwrap();
    assert!(old < floor && predicted > 2.0 * old, "{old} {predicted}");

    // The real fix, run RUNS times.
    let mut walls = Vec::new();
    for _ in 0..RUNS {
        let t0 = Instant::now();
        let out = Command::new(&exe).arg("-n").output().unwrap();
        let wall = t0.elapsed().as_nanos() as f64;
        assert!(out.status.success());
        let fixed = truth_line(&stdout(&out));
        assert_eq!(fixed["own_locks"], "1");
        assert_eq!(num(&fixed, "hot_lock.waits_over_5us"), 0.0, "{fixed:?}");
        walls.push(wall);
    }
    walls.sort_by(f64::total_cmp);
    let measured = walls[RUNS / 2];
    let spread = walls[RUNS - 1] - walls[0];
    // The machine's other work slows the runs the model does not know about: the model's own
    // error on the recorded run (replayed with every lock kept, against the time measured,
    // which includes the other processes' share of the CPUs) and the spread of the fixed
    // program's runs (how much that share changed while they ran) widen the tolerance.
    let as_recorded = w["replayed_as_recorded_ns"].as_f64().unwrap_or(0.0);
    let recorded = w["measured_ns"].as_f64().unwrap();
    let noise = (recorded - as_recorded).abs() + spread;
    let allowed = MODEL_TOLERANCE * measured + noise;
    let verdict = format!(
        "predicted {:.1} ms (bound {:.1}), measured without the lock {:.1} ms (runs {:?} ms): \
         {:+.1} %, allowed ±{:.1} ms (20 % + {:.1} ms of noise: the model's error on the \
         recorded run {:.1} of {:.1} ms, the runs' spread {:.1} ms)",
        predicted / 1e6,
        bound / 1e6,
        measured / 1e6,
        walls
            .iter()
            .map(|w| (w / 1e5).round() / 10.0)
            .collect::<Vec<_>>(),
        100.0 * (predicted - measured) / measured,
        allowed / 1e6,
        noise / 1e6,
        as_recorded / 1e6,
        recorded / 1e6,
        spread / 1e6
    );
    eprintln!("{verdict}");
    assert!((predicted - measured).abs() <= allowed, "{verdict}");

    // The text says what it assumed, in lines a 100-column terminal shows whole.
    let out = contend_in(dir.path(), &["report", "run"]);
    let text = stdout(&out);
    let note: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("* the run's time if that lock never made"))
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = note
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for needle in [
        &format!("replayed on {cpus} CPUs"),
        "CPU time it used",
        "shared fairly",
        "other locks unchanged",
        "sleeps and I/O kept",
        "Check: replayed with every lock kept",
    ] {
        assert!(joined.contains(needle), "{needle:?} not in {note:#?}");
    }
    assert!(note.iter().all(|l| l.chars().count() <= 100), "{note:#?}");
    assert!(text.contains("RUN IF ITS WAITS WERE 0 (ms)*"), "{text}");
    // Each lock's JSON entry carries its own prediction too.
    let entry = locks["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"]["address"] == addr)
        .unwrap();
    assert_eq!(&entry["what_if"], hot, "{entry}");
}
