//! Run directories: numbering instead of overwriting, meta.json versioning.

use trace::meta::{Meta, SCHEMA_VERSION};
use trace::{RunDir, RunDirError};

#[test]
fn an_existing_run_is_kept_and_the_new_one_numbered() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("contend.data");
    let a = RunDir::create(&base).unwrap();
    let b = RunDir::create(&base).unwrap();
    let c = RunDir::create(&base).unwrap();
    assert_eq!(a.path(), base);
    assert_eq!(b.path(), dir.path().join("contend.data.1"));
    assert_eq!(c.path(), dir.path().join("contend.data.2"));
    assert!(c.path().join("streams").is_dir());
}

#[test]
fn meta_round_trips_and_tolerates_unknown_fields() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunDir::create(&dir.path().join("r")).unwrap();
    let mut meta = Meta::new(vec!["./app".into(), "--threads".into(), "4".into()]);
    meta.captured.push("mark".into());
    meta.unavailable.push(trace::meta::Unavailable {
        what: "hardware counters".into(),
        why: "perf_event_open: no PMU in this VM".into(),
    });
    run.write_meta(&meta).unwrap();
    let (_, back) = RunDir::open(run.path()).unwrap();
    assert_eq!(back, meta);

    let mut v: serde_json::Value = serde_json::to_value(&meta).unwrap();
    v["a_field_from_the_future"] = serde_json::json!({"x": 1});
    assert_eq!(Meta::from_json(&v.to_string()).unwrap(), meta);
}

#[test]
fn a_newer_major_schema_is_refused_by_name() {
    let mut v = serde_json::to_value(Meta::new(vec![])).unwrap();
    v["schema_version"] = (SCHEMA_VERSION + 1).into();
    let err = Meta::from_json(&v.to_string()).unwrap_err();
    assert!(err.contains("newer"), "{err}");
    assert!(Meta::from_json("{}")
        .unwrap_err()
        .contains("schema_version"));
    assert!(Meta::from_json("{").unwrap_err().contains("not valid JSON"));
}

#[test]
fn opening_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        RunDir::open(&dir.path().join("nope")),
        Err(RunDirError::Missing { .. })
    ));
    assert!(matches!(
        RunDir::open(dir.path()),
        Err(RunDirError::NoMeta { .. })
    ));
    std::fs::write(dir.path().join("meta.json"), "[]").unwrap();
    let err = RunDir::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("meta.json"), "{err}");
}
