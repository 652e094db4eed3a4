//! The lock what-if against the real fix: a program recorded with its planted lock, and the
//! same program with a lock per thread (`-n`) run for real; the replayed prediction must keep
//! the held work (never below the CPU work over the CPUs) and land near the fixed program's
//! time.

use crate::common::{self, build, contend_in, num, serial, stdout, truth_line, two_cpus, Truth};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Runs of the fixed program: the median is compared, the spread widens the tolerance.
const RUNS: usize = 5;

/// What the issue asks, and what the model does on a quiet machine with room to spare
/// (docs/benchmarks.md, "Lock what-if checked against the real fix": +3 to +9 % there).
const MODEL_TOLERANCE: f64 = 0.20;

/// The sampler's blind spot per thread: its last interval before it exits (10 ms).
const SAMPLER_INTERVAL_NS: f64 = 10e6;

/// A recorded program's what-if for `lock` (its truth-line prefix), checked against the
/// program run with `-n`; returns the report's JSON locks section and the lock's what-if.
struct Checked {
    locks: Value,
    what_if: Value,
    cpus: f64,
    /// The recorded run's length, and how far the replay of it with every lock kept fell
    /// from that (the machine's other work, which the model does not know about).
    recorded_ns: f64,
    model_error_ns: f64,
}

fn check_against_fix(
    dir: &Path,
    exe: &Path,
    args: &[&str],
    lock: &str,
    fixed_args: impl Fn(&Truth) -> Vec<String>,
    cpu_work_ns: impl Fn(&Truth) -> f64,
) -> Checked {
    let truth = common::record(dir, &["--locks"], exe, args);
    let report = common::report_json(dir, &["run"]);
    let locks = report["locks"].clone();
    let w = &locks["what_if"];
    let cpus = w["cpus"]
        .as_f64()
        .unwrap_or_else(|| panic!("no what-if: {locks}"));
    assert_eq!(w["cpus_from"], "online", "{w}");
    assert_eq!(cpus, common::online_cpus() as f64, "{w}");
    let addr =
        u64::from_str_radix(truth[&format!("{lock}.addr")].trim_start_matches("0x"), 16).unwrap();
    let stats = locks["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"]["address"] == addr)
        .unwrap_or_else(|| panic!("{lock} not in the report: {locks}"))
        .clone();
    assert!(
        stats["contended"].as_u64().unwrap() >= 1,
        "precondition: {lock} never made a thread wait, no wait to remove: {stats}"
    );
    let hot = w["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"]["address"] == addr)
        .unwrap_or_else(|| panic!("{lock} not replayed: {w}"))
        .clone();
    assert_eq!(hot["method"], "replay", "{hot}");
    assert_eq!(
        stats["what_if"], hot,
        "each lock's entry carries its what-if"
    );
    let predicted = hot["predicted_ns"].as_f64().unwrap();
    let bound = hot["bound_ns"].as_f64().unwrap();
    assert!(
        predicted >= bound,
        "the replay is never below its bound: {hot}"
    );

    // Whatever the machine's load: the program's CPU work cannot run faster than on all the
    // CPUs (less what the sampler may miss of each thread).
    let threads = num(&truth, "threads");
    let floor = (cpu_work_ns(&truth) - threads * SAMPLER_INTERVAL_NS) / cpus;
    assert!(
        bound >= floor,
        "the bound keeps the held work: {bound} ns < {floor} ns of CPU work per CPU: {hot}"
    );
    // The old subtraction (the run less the lock's critical-path wait) forgot it.
    let old = stats["what_if_ns"].as_f64().unwrap();
    eprintln!("{lock}: the old column said {:.1} ms", old / 1e6);

    // The real fix, run RUNS times.
    let fixed: Vec<String> = fixed_args(&truth);
    let mut walls = Vec::new();
    for _ in 0..RUNS {
        let t0 = Instant::now();
        let out = Command::new(exe).args(&fixed).output().unwrap();
        let wall = t0.elapsed().as_nanos() as f64;
        assert!(out.status.success());
        let t = truth_line(&stdout(&out));
        assert_eq!(t["own_locks"], "1", "{t:?}");
        walls.push(wall);
    }
    walls.sort_by(f64::total_cmp);
    let measured = walls[RUNS / 2];
    let spread = walls[RUNS - 1] - walls[0];
    // The machine's other work slows runs in a way the model does not know about (it takes
    // the CPUs to be the run's alone): the model's own error on the recorded run (replayed
    // with every lock kept, against the time measured, which includes the other processes'
    // share of the CPUs) and the spread of the fixed program's runs (how much that share
    // changed while they ran) widen the tolerance. On an idle machine both are a few %.
    let as_recorded = w["replayed_as_recorded_ns"].as_f64().unwrap_or(0.0);
    let recorded = w["measured_ns"].as_f64().unwrap();
    let noise = (recorded - as_recorded).abs() + spread;
    let allowed = MODEL_TOLERANCE * measured + noise;
    let verdict = format!(
        "{lock}: predicted {:.1} ms (bound {:.1}), measured without the lock {:.1} ms (runs \
         {:?} ms): {:+.1} %, allowed ±{:.1} ms (20 % + {:.1} ms of noise: the model's error \
         on the recorded run {:.1} of {:.1} ms, the runs' spread {:.1} ms)",
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
    Checked {
        locks,
        what_if: hot,
        cpus,
        recorded_ns: recorded,
        model_error_ns: (recorded - as_recorded).abs(),
    }
}

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
    // Each round's hold and work spin on the thread's CPU clock: at least this much CPU work.
    let work = |t: &Truth| {
        num(t, "threads") * num(t, "holds_per_thread") * (num(t, "hold_ns") + num(t, "work_ns"))
    };
    let c = check_against_fix(
        dir.path(),
        &exe,
        &[],
        "hot_lock",
        |_| vec!["-n".into()],
        work,
    );
    // The old column said ~20 ms of a ~430 ms run here; the replay keeps the 4 × 110 ms of
    // CPU work on 2 CPUs. The old column is the recorded run less the lock's wait, so other
    // programs' share of the CPUs lengthens it (1.3 s runs and 178 ms seen at a load of 9):
    // compared only where the replay of the recorded run says the run had the CPUs to itself
    // (within 10 %).
    let old = c.locks["locks"][0]["what_if_ns"].as_f64().unwrap();
    let predicted = c.what_if["predicted_ns"].as_f64().unwrap();
    if c.model_error_ns <= 0.1 * c.recorded_ns {
        assert!(predicted > 2.0 * old, "{old} {predicted}");
    } else {
        eprintln!(
            "old column {:.1} ms against the replay's {:.1} ms not compared: the recorded run \
             ({:.1} ms) was {:.1} ms longer than its replay (other work on the machine)",
            old / 1e6,
            predicted / 1e6,
            c.recorded_ns / 1e6,
            c.model_error_ns / 1e6
        );
    }

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
        &format!("replayed on {} CPUs", c.cpus),
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
}

/// serialised's main thread waits for the workers in pthread_join, which contend does not
/// trace: the replay must not take that wait for a sleep (it would predict the recorded run).
#[test]
fn serialised_what_if_predicts_the_program_with_a_lock_per_thread() {
    let _one = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/serialised.c", dir.path()) else {
        return;
    };
    // One calibration for both programs, so that they do the same work and neither spends
    // the calibration's time.
    let out = Command::new(&exe)
        .args(["-t", "1", "-w", "10"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let iters = truth_line(&stdout(&out))["iters_per_ms"].clone();
    let c = check_against_fix(
        dir.path(),
        &exe,
        &["-t", "2", "-w", "200", "-i", &iters],
        "big_lock",
        |_| {
            ["-t", "2", "-w", "200", "-i", &iters, "-n"]
                .map(String::from)
                .to_vec()
        },
        |t| num(t, "cpu_ns_total"),
    );
    // Serialised, the recorded run took about the two workers' work one after the other;
    // the prediction is about half of it.
    let predicted = c.what_if["predicted_ns"].as_f64().unwrap();
    let recorded = c.locks["what_if"]["measured_ns"].as_f64().unwrap();
    assert!(predicted < 0.8 * recorded, "{predicted} of {recorded}");
}
