//! Recording real (tiny) programs: what the run directory and meta.json hold, and the error of
//! a program that cannot start. Nothing here depends on the machine's speed.

use recorder::{Notice, RecordError, RecordOptions};
use trace::{Captured, RunDir, StreamRole};

fn options(dir: &std::path::Path, command: &[&str]) -> RecordOptions {
    RecordOptions {
        command: command.iter().map(|s| s.to_string()).collect(),
        output: dir.join("run"),
        recorded_by: vec!["contend".into(), "record".into()],
        // The tracepoints need privileges some machines do not give: not what is tested here.
        sched_trace: false,
        ..RecordOptions::default()
    }
}

#[test]
fn a_recording_writes_meta_once_with_what_was_captured() {
    let dir = tempfile::tempdir().unwrap();
    let mut told: Vec<Notice> = Vec::new();
    let recorded = recorder::record(
        &options(dir.path(), &["/bin/sh", "-c", "exit 3"]),
        &mut |n| told.push(n),
    )
    .unwrap();
    assert_eq!(recorded.failed_status(), Some(3));
    let (_, meta) = RunDir::open(recorded.run.path()).unwrap();
    assert_eq!(meta, recorded.meta, "what is returned is what was written");
    assert_eq!(meta.recorded_by, ["contend", "record"]);
    assert_eq!(meta.command, ["/bin/sh", "-c", "exit 3"]);
    assert!(meta.has(Captured::Schedstat));
    assert!(!meta.has(Captured::Locks));
    assert_eq!(meta.exit_status, Some(3));
    assert_eq!(meta.outcome.as_deref(), Some("exited with status 3"));
    assert_eq!(
        meta.topology.is_some(),
        topology::Topology::live().is_ok(),
        "this machine's topology is recorded where it can be read"
    );
    // Whatever the sampler caught, every stream says which recorder wrote it.
    for s in &meta.streams {
        assert!(s.role.is_some(), "{}", s.file);
        assert!(matches!(s.role(), StreamRole::Sampler | StreamRole::System));
    }
    assert!(
        told.iter().any(|n| n.text.starts_with("recorded ")),
        "{told:?}"
    );
}

#[test]
fn a_program_that_is_not_there_could_not_start_and_its_run_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let err = recorder::record(
        &options(dir.path(), &["./no-such-program-here"]),
        &mut |_| {},
    )
    .err()
    .expect("cannot start");
    let RecordError::CouldNotStart(e) = err else {
        panic!("{err}");
    };
    assert_eq!(e.exit_code(), 127);
    assert!(e.to_string().contains("the empty run is kept in"), "{e}");
    let (_, meta) = RunDir::open(&e.run).unwrap();
    assert_eq!(meta.exit_status, Some(127));
    assert!(meta
        .outcome
        .as_deref()
        .is_some_and(|o| o.starts_with("could not start")));
}

#[test]
fn a_file_that_is_not_executable_exits_126() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let err = recorder::record(
        &options(dir.path(), &[script.to_str().unwrap()]),
        &mut |_| {},
    )
    .err()
    .expect("cannot start");
    match err {
        RecordError::CouldNotStart(e) => assert_eq!(e.exit_code(), 126, "{e}"),
        other => panic!("{other}"),
    }
}

#[test]
fn bad_input_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), &["/bin/true"]);
    o.placement.cores = Some(2);
    assert!(matches!(
        recorder::record(&o, &mut |_| {}),
        Err(RecordError::BadInput(_))
    ));
    let mut o = options(dir.path(), &["/bin/true"]);
    o.interfere = Some("ctx 2".into());
    assert!(matches!(
        recorder::record(&o, &mut |_| {}),
        Err(RecordError::BadInput(_))
    ));
    assert!(!dir.path().join("run").exists());
    assert!(matches!(
        recorder::sampling_interval(-1.0),
        Err(RecordError::BadInput(_))
    ));
    assert!(recorder::sampling_interval(0.0).unwrap().is_none());
    assert!(recorder::sampling_interval(70_000.0).is_err());
}
