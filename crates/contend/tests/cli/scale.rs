//! `contend scale` end to end on the bundled scaling examples: the model's verdicts for a
//! program with no dependencies and for one serialised by a lock, the sweep's plot, the saved
//! result read back by `contend report`, and the bad-input messages. Tolerances are for a
//! noisy 2-CPU machine and compare quantities of the same run, never absolute times.

use crate::common::{build, contend, serial, text, two_cpus};
use serde_json::Value;

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
    let a = dir.path().join("a.scale");
    let out = contend(&[
        "scale",
        "--threads",
        "2",
        "--repeat",
        "2",
        "-o",
        a.to_str().unwrap(),
        "--",
        independent.to_str().unwrap(),
        "-t",
        "{threads}",
        "-w",
        "250",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("loss to dependencies D = m − A (3.8)"),
        "{stdout}"
    );
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("scale.json")).unwrap()).unwrap();
    // 2 configurations × 2 repeats, each a run directory.
    assert_eq!(scale["runs"].as_array().unwrap().len(), 4);
    for r in scale["runs"].as_array().unwrap() {
        assert!(a
            .join(r["run"].as_str().unwrap())
            .join("meta.json")
            .is_file());
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
        "2",
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
    let verdict = text(&out.stdout);
    assert!(verdict.contains("Lock waits explain"), "{verdict}");

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
