//! `contend scale` end to end on the bundled scaling examples: the model's verdicts for a
//! program with no dependencies and for one serialised by a lock, the sweep's plot, the saved
//! result read back by `contend report`, and the bad-input messages. Tolerances are for a
//! noisy 2-CPU machine and compare quantities of the same run, never absolute times.

use crate::common::{build, contend, serial, text, two_cpus};
use serde_json::Value;

/// The verdict on m threads from a scale.json (one core count besides 1 in these tests).
fn verdict(scale: &Value, m: u64) -> &Value {
    scale["thread_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["threads"] == m)
        .and_then(|t| t["verdicts"].as_array().and_then(|v| v.first()))
        .unwrap_or_else(|| panic!("no verdict for {m} threads in {scale}"))
}

/// The keys scale.json promises (another helper's validation reads exactly these).
const VERDICT_KEYS: [&str; 22] = [
    "threads",
    "cores",
    "baseline",
    "baseline_reason",
    "cause",
    "loss_threads",
    "memory_pct",
    "cpu_wait_pct",
    "blocked_pct",
    "memory_thread_ns",
    "cpu_wait_thread_ns",
    "blocked_thread_ns",
    "omega",
    "measured_speedup",
    "predicted_speedup",
    "lock_waits_pct_of_blocked",
    "top_lock",
    "rounds",
    "disturbed",
    "settle",
    "text",
    "estimates",
];
const RUN_KEYS: [&str; 7] = [
    "user_ns",
    "system_ns",
    "steal_ns",
    "others_cpu_ns",
    "top_lock",
    "top_lock_wait_ns",
    "round",
];

/// Checks the JSON contract, the rounds against `--repeat MIN..MAX`, the run names and that
/// the runs were interleaved: by their start times (meta.json), every run of round r started
/// before any of round r + 1, and consecutive rounds started with different configurations.
fn check_rounds(dir: &std::path::Path, scale: &Value, min: u64, max: u64) {
    assert_eq!(scale["schema_version"], 1);
    let rounds = scale["rounds"].as_u64().unwrap();
    assert!((min..=max).contains(&rounds), "{rounds} rounds");
    let v = verdict(scale, 2);
    for key in VERDICT_KEYS {
        assert!(v.get(key).is_some(), "verdict without {key}: {v}");
    }
    for key in ["loss_threads", "memory_pct", "omega", "measured_speedup"] {
        let i = &v[key];
        let (lo, est, hi) = (
            i["low"].as_f64().unwrap(),
            i["estimate"].as_f64().unwrap(),
            i["high"].as_f64().unwrap(),
        );
        assert!(lo <= hi && est.is_finite(), "{key}: {i}");
    }
    assert_eq!(v["rounds"].as_u64(), Some(rounds));
    let runs = scale["runs"].as_array().unwrap();
    // 2 threads on 1 and on 2 cores, and the one-thread baseline, each round.
    assert_eq!(runs.len() as u64, 3 * rounds);
    let mut started: Vec<(u64, u64, String)> = Vec::new();
    for r in runs {
        for key in RUN_KEYS {
            assert!(r.get(key).is_some(), "run without {key}: {r}");
        }
        assert!(r["user_ns"].as_f64().unwrap() > 0.0, "{r}");
        let name = r["run"].as_str().unwrap();
        let round = r["round"].as_u64().unwrap();
        assert_eq!(
            name,
            format!("m{}-n{}-r{round}", r["threads"], r["cores"]),
            "{r}"
        );
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(name).join("meta.json")).unwrap(),
        )
        .unwrap();
        let start = meta["monotonic_span"][0].as_u64().unwrap();
        started.push((start, round, name.split("-r").next().unwrap().to_string()));
    }
    started.sort();
    let order: Vec<u64> = started.iter().map(|s| s.1).collect();
    assert!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "runs not in rounds: {started:?}"
    );
    let firsts: Vec<&str> = started.chunks(3).map(|c| c[0].2.as_str()).collect();
    assert!(
        firsts.windows(2).all(|w| w[0] != w[1]),
        "the same configuration ran first in consecutive rounds: {started:?}"
    );
}

/// The model of m threads on m cores from a scale.json.
fn model(scale: &Value, m: u64) -> &Value {
    scale["thread_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["threads"] == m)
        .and_then(|t| t["models"].as_array().and_then(|ms| ms.first()))
        .unwrap_or_else(|| panic!("no model for {m} threads in {scale}"))
}

#[test]
fn independent_threads_lose_little_and_a_lock_loses_a_thread_explained_by_its_waits() {
    let _one = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (Some(independent), Some(serialised)) = (
        build("examples/scaling/independent.c", dir.path()),
        build("examples/scaling/serialised.c", dir.path()),
    ) else {
        return;
    };
    // Calibrated once here: left to each run, the calibration is a serial phase of the
    // program (one thread computing, the process's other CPU idle), which the model rightly
    // counts as a loss.
    let iters = {
        let out = std::process::Command::new(&independent)
            .args(["-t", "1", "-w", "0"])
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("iters_per_ms=").map(str::to_string))
            .unwrap_or_else(|| panic!("no iters_per_ms in {stdout}"))
    };
    let a = dir.path().join("a.scale");
    let out = contend(&[
        "scale",
        "--threads",
        "2",
        "--repeat",
        "3..4",
        "-o",
        a.to_str().unwrap(),
        "--",
        independent.to_str().unwrap(),
        "-t",
        "{threads}",
        "-w",
        "250",
        "-i",
        &iters,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("loss to dependencies D = m − A (3.8)"),
        "{stdout}"
    );
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("scale.json")).unwrap()).unwrap();
    check_rounds(&a, &scale, 3, 4);
    // Independent compute threads: never memory contention named with confidence. On a
    // shared machine the loss may be waiting for a CPU (other processes held it), or too noisy
    // to tell. Blocking is never named on a machine the verdict found quiet; on a busy one a
    // worker slowed by other processes finishes late and its partner waits in the join, which
    // is blocking, said beside the busy-machine note.
    let v = verdict(&scale, 2);
    let cause = v["cause"].as_str().unwrap();
    let busy = !v["disturbed"].as_array().unwrap().is_empty();
    assert!(
        ["none", "cannot-tell", "cpu-wait"].contains(&cause) || (cause == "blocked" && busy),
        "independent threads: {cause}: {}",
        v["text"]
    );
    if cause == "blocked" {
        testkit::check_not_made(&format!(
            "independent threads: blocking named on a busy machine: {}",
            v["text"]
        ));
    }
    assert!(stdout.contains(v["text"].as_str().unwrap()), "{stdout}");
    assert!(
        stdout.contains("round(s) of every configuration, interleaved"),
        "{stdout}"
    );
    if cause == "cannot-tell" {
        assert!(!v["settle"].as_array().unwrap().is_empty(), "{v}");
    }
    let m = model(&scale, 2);
    let (active, d, r) = (
        m["active_threads"].as_f64().unwrap(),
        m["dependency_loss_threads"].as_f64().unwrap(),
        m["memory_loss_threads"].as_f64().unwrap(),
    );
    // Independent compute threads: nearly 2 active, little lost to dependencies (start-up and
    // uneven finishing on a shared machine cost up to ~0.5), no memory contention to speak of
    // (ω from on-CPU time: the same work on 1 or 2 cores, within noise).
    assert!((1.4..=2.1).contains(&active), "A = {active}: {m}");
    assert!(d < 0.6, "D = {d}: {m}");
    assert!(r.abs() < 0.3, "R = {r}: {m}");

    let b = dir.path().join("b.scale");
    let out = contend(&[
        "scale",
        "--threads",
        "2",
        "--repeat",
        "3..4",
        "--locks",
        "-o",
        b.to_str().unwrap(),
        "--",
        serialised.to_str().unwrap(),
        "-t",
        "{threads}",
        "-w",
        "250",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("scale.json")).unwrap()).unwrap();
    check_rounds(&b, &scale, 3, 4);
    // One lock serialises the work: the loss is blocking (or the noise hides it), never
    // memory contention, never no loss; when blocking is named, the lock waits explain it
    // and the lock is named as the lock report names it.
    let v = verdict(&scale, 2);
    let cause = v["cause"].as_str().unwrap();
    assert!(
        ["blocked", "cannot-tell"].contains(&cause),
        "serialised threads: {cause}: {}",
        v["text"]
    );
    let explained = &v["lock_waits_pct_of_blocked"];
    assert!(explained.is_object(), "{v}");
    if cause == "blocked" {
        assert!(explained["estimate"].as_f64().unwrap() >= 60.0, "{v}");
        let top = v["top_lock"]
            .as_str()
            .unwrap_or_else(|| panic!("no top lock: {v}"));
        assert!(!top.is_empty(), "{v}");
        assert!(v["text"].as_str().unwrap().contains(top), "{v}");
    }
    let m = model(&scale, 2);
    let active = m["active_threads"].as_f64().unwrap();
    let d = m["dependency_loss_threads"].as_f64().unwrap();
    let speedup = m["measured_speedup"].as_f64().unwrap();
    let predicted = m["predicted_speedup"].as_f64().unwrap();
    // One lock serialises all the work: about one thread active, one lost to dependencies,
    // no speed-up; and the lock waits account for most of D·T(n) (table 4.11).
    assert!((0.8..=1.3).contains(&active), "A = {active}: {m}");
    assert!(d >= 0.7, "D = {d}: {m}");
    // The model's speed-up A/(1+ω) is made of load-proof quantities (a thread waiting for a
    // CPU counts as active; ω is CPU time from wait4), so it is checked on any machine.
    assert!(predicted < 1.3, "predicted speed-up {predicted}: {m}");
    // The measured one is a ratio of wall times of runs made one after another, T(1)/T(2) =
    // R(2)/R(1) for the same service S, where R = S/T is the average number of the program's
    // threads on a CPU. A serialised program keeps one thread runnable at every moment but the
    // lock hand-offs, so on a core of its own R(1) ≈ 1 (0.97 here, quiet), and R(2) ≈ 1 too: no speed-up. Beside
    // a CPU hog sharing its one core R(1) falls to ~0.5 or below (0.16 was seen, speed-up
    // 1.87), and the ratio then measures the hog. So it is checked when the one-core runs had
    // their core (R(1) ≥ 0.8; a program that did speed up would still show R(2) ≈ 2 ≥ 1.3 ×
    // R(1)), and logged otherwise; a busy two-core run only lowers the ratio.
    let one_core = scale["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cores"] == 1)
        .expect("a one-core configuration");
    let r1 = one_core["configuration"]["service_ns"].as_f64().unwrap()
        / one_core["configuration"]["elapsed_ns"].as_f64().unwrap();
    if r1 >= 0.8 {
        assert!(speedup < 1.3, "speed-up {speedup} (R(1) = {r1:.2}): {m}");
    } else {
        testkit::check_not_made(&format!(
            "measured speed-up {speedup} not checked: on one core the program had a thread on \
             the CPU only {r1:.2} of the time (other work held it; ≥ 0.8 needed)"
        ));
    }
    let locks = &m["locks"];
    let explained = locks["explained_pct"].as_f64().unwrap();
    assert!(
        explained >= 60.0,
        "lock waits explain {explained} %: {locks}"
    );
    let printed = text(&out.stdout);
    assert!(printed.contains("Lock waits explain"), "{printed}");

    // The saved result reads back, as text and as JSON, and diffs against the other.
    let shown = contend(&["report", b.to_str().unwrap()]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(text(&shown.stdout).contains("speed-up measured T(1)/T(n)"));
    let diff = contend(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--metric",
        "*models*dependency_loss_threads",
        "--fail-if",
        "*models*dependency_loss_threads>+100%",
    ]);
    assert_eq!(diff.status.code(), Some(1), "{}", text(&diff.stderr));
    assert!(text(&diff.stderr).contains("dependency_loss_threads"));
}

#[test]
fn a_sweep_plots_speedup_and_a_missing_placeholder_is_said() {
    let _one = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(independent) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    let out_dir = dir.path().join("sweep");
    let out = contend(&[
        "scale",
        "--threads",
        "1,2",
        "--repeat",
        "1",
        "-o",
        out_dir.to_str().unwrap(),
        "--",
        independent.to_str().unwrap(),
        "-w",
        "100",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no {threads} placeholder: only OMP_NUM_THREADS"),
        "{stderr}"
    );
    let svg = std::fs::read_to_string(out_dir.join("speedup.svg")).unwrap();
    assert!(svg.contains(">measured</text>") && svg.contains(">ideal</text>"));
    // 1 thread on 1 core, 2 threads on 1 and on 2 cores.
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('m'))
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, vec!["m1-n1-r1", "m2-n1-r1", "m2-n2-r1"]);
}

#[test]
fn a_budget_stops_the_rounds_and_too_few_rounds_give_no_verdict() {
    let _one = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(independent) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    let out_dir = dir.path().join("budget");
    let out = contend(&[
        "scale",
        "--threads",
        "2",
        "--budget",
        "1ms",
        "-o",
        out_dir.to_str().unwrap(),
        "--",
        independent.to_str().unwrap(),
        "-t",
        "{threads}",
        "-w",
        "50",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("scale.json")).unwrap())
            .unwrap();
    // One round (every configuration once) is over a 1 ms budget: the rounds stop there.
    assert_eq!(scale["rounds"], 1, "{}", scale["stopped"]);
    assert_eq!(scale["runs"].as_array().unwrap().len(), 3);
    let stopped = scale["stopped"].as_str().unwrap();
    assert!(
        stopped.starts_with("stopped by --budget 1ms after 1 round(s), fewer than the 3"),
        "{stopped}"
    );
    let v = verdict(&scale, 2);
    assert_eq!(v["cause"], "cannot-tell", "{v}");
    assert_eq!(
        v["settle"][0], "more rounds: at least 3 (now 1): --repeat 3..10",
        "{v}"
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("cannot tell from 1 round(s)"), "{stdout}");
    assert!(stdout.contains(stopped), "{stdout}");
}

#[test]
fn a_run_that_fails_stops_the_rounds_and_the_complete_ones_are_kept() {
    let _one = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(independent) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    // The program fails from its 5th start on: round 1 is its runs 1–3, so round 2 breaks.
    let count = dir.path().join("starts");
    let script = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {c}; [ $n -ge 5 ] && exit 3; exec {p} -t \"$1\" -w 50",
        c = count.display(),
        p = independent.display()
    );
    let out_dir = dir.path().join("failing");
    let out = contend(&[
        "scale",
        "--threads",
        "2",
        "-o",
        out_dir.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
        "sh",
        "{threads}",
    ]);
    // The program's status, as `record` passes it on.
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("exited with status 3 in m")
            && stderr.contains("stopping after 1 complete round(s)"),
        "{stderr}"
    );
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("scale.json")).unwrap())
            .unwrap();
    // The broken round is left out: one complete round of three configurations.
    assert_eq!(scale["rounds"], 1, "{}", scale["stopped"]);
    assert_eq!(scale["runs"].as_array().unwrap().len(), 3);
    assert!(
        scale["stopped"]
            .as_str()
            .unwrap()
            .starts_with("a run failed in round 2"),
        "{}",
        scale["stopped"]
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("the verdicts use the 1 complete round(s) before it"),
        "{stdout}"
    );
    // One round is too few for a verdict, and it says so.
    assert_eq!(verdict(&scale, 2)["cause"], "cannot-tell");
}

#[test]
fn bad_input_is_one_line() {
    let bad = contend(&["scale", "--threads", "0", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("--threads"),
        "{}",
        text(&bad.stderr)
    );
    let bad = contend(&["scale", "--threads", "2", "--cores", "1,x", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("`x`"), "{}", text(&bad.stderr));
    for (args, says) in [
        (
            &["--repeat", "0"][..],
            "--repeat `0`: give a number of rounds",
        ),
        (
            &["--repeat", "5..3"][..],
            "--repeat `5..3`: MIN is above MAX",
        ),
        (&["--repeat", "3..x"][..], "--repeat `3..x`: give a number"),
        (&["--budget", "soon"][..], "--budget `soon`:"),
        (
            &["--precision", "0"][..],
            "--precision 0: give percentage points",
        ),
    ] {
        let mut all = vec!["scale", "--threads", "2"];
        all.extend_from_slice(args);
        all.extend(["--", "true"]);
        let bad = contend(&all);
        assert_eq!(bad.status.code(), Some(2), "{args:?}");
        let stderr = text(&bad.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let failing = contend(&[
        "scale",
        "--threads",
        "1",
        "--repeat",
        "1",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(failing.status.code(), Some(3), "{}", text(&failing.stderr));
    assert!(
        text(&failing.stderr).contains("exited with status 3"),
        "{}",
        text(&failing.stderr)
    );
}
