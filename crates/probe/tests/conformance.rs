//! The probe must not change what a program sees: every conformance program (conformance/)
//! gives byte-identical output and exit status with the probe recording as without it.

use std::path::PathBuf;
use std::process::Command;

/// The probe cdylib cargo built beside this test (target/<profile>/deps/).
fn probe_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = deps.join("libcontend_probe.so");
    assert!(lib.is_file(), "{} not built", lib.display());
    lib
}

/// Runs the suite with the probe recording, one in `sample_every` uncontended acquisitions
/// (1: all, the full mode; above 1, sampled mode's hand-written fast paths run too), and heap
/// allocations too with `alloc_sites`.
fn conformance_with(sample_every: u32, alloc_sites: bool) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/run.sh");
    // Recording into a directory of the test's own, so the probe's whole recording path runs,
    // ring creation included (nothing drains the rings: full rings count drops, as designed).
    let rings = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(&script)
        .arg(probe_library())
        .env("CONTEND_RINGS", rings.path())
        .env("CONTEND_CLOCK", "tsc")
        .env("CONTEND_LOCK_SAMPLE", sample_every.to_string())
        .env("CONTEND_ALLOC_SITES", if alloc_sites { "1" } else { "0" })
        .env("REPEAT", "2")
        .output()
        .expect("running conformance/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "conformance failures (1 in {sample_every} recorded):\n{stdout}\n{stderr}"
    );
    let passed = stdout.lines().filter(|l| l.starts_with("PASS ")).count();
    assert!(
        passed >= 12,
        "expected every program to run and pass:\n{stdout}"
    );
}

#[test]
fn programs_behave_identically_with_the_probe_recording() {
    conformance_with(1, false);
}

#[test]
fn programs_behave_identically_with_allocations_recorded() {
    conformance_with(1, true);
}

#[test]
fn programs_behave_identically_with_the_probe_sampling() {
    conformance_with(3, false);
}
