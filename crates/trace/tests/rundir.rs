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
    let mut with_slash = base.into_os_string();
    with_slash.push("/");
    let d = RunDir::create(std::path::Path::new(&with_slash)).unwrap();
    assert_eq!(
        d.path(),
        dir.path().join("contend.data.3"),
        "not nested in the old run"
    );
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

#[test]
fn a_hostile_meta_cannot_point_outside_the_run() {
    for file in [
        "/etc/passwd",
        "../other/streams/t.cst",
        "streams/../../x.cst",
        "",
    ] {
        let mut meta = Meta::new(vec![]);
        meta.streams.push(trace::meta::StreamEntry {
            file: file.into(),
            kind: trace::StreamKind::Thread,
            pid: 1,
            tid: 1,
            rank: None,
            events: 0,
            dropped: 0,
            name: String::new(),
            role: None,
        });
        let err = Meta::from_json(&serde_json::to_string(&meta).unwrap()).unwrap_err();
        assert!(
            err.contains("not a path inside the run directory"),
            "{file}: {err}"
        );
    }
    let mut meta = Meta::new(vec![]);
    meta.clock.hz = 0;
    let err = Meta::from_json(&serde_json::to_string(&meta).unwrap()).unwrap_err();
    assert!(err.contains("clock.hz"), "{err}");
}

#[test]
fn stream_files_lists_only_streams_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunDir::create(&dir.path().join("r")).unwrap();
    for name in ["t2", "t10", "a"] {
        std::fs::write(run.stream_path(name).0, b"").unwrap();
    }
    std::fs::write(run.path().join("streams/notes.txt"), b"").unwrap();
    assert_eq!(
        run.stream_files().unwrap(),
        ["streams/a.cst", "streams/t10.cst", "streams/t2.cst"]
    );
}

/// The committed fixture runs were recorded before stream roles, typed `captured` and the
/// typed topology: they still load, their roles are inferred from the file names, and they
/// write back the same JSON value.
#[test]
fn recorded_fixtures_load_typed_and_write_back_the_same() {
    use trace::{Captured, StreamRole};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/runs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        let path = entry.path().join("meta.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        seen += 1;
        let meta = Meta::from_json(&text).unwrap();
        let topo = meta
            .topology
            .as_ref()
            .expect("fixtures record the topology");
        assert_eq!(
            topo.summary.pus,
            topo.topology.pus.len(),
            "{}",
            path.display()
        );
        assert_eq!(meta.online_cpus(), Some(topo.topology.pus.len() as u32));
        let original: serde_json::Value = serde_json::from_str(&text).unwrap();
        let written = serde_json::to_value(&meta).unwrap();
        assert_eq!(written, original, "{}", path.display());
        for s in &meta.streams {
            let name = s.file.rsplit('/').next().unwrap();
            let want = if name.starts_with("sched-") {
                StreamRole::Sampler
            } else if name == "system.cst" {
                StreamRole::System
            } else if name.starts_with("rank-") {
                StreamRole::MpiRank
            } else {
                StreamRole::Lock
            };
            assert_eq!(s.role(), want, "{}", s.file);
        }
        let locks = meta.streams_with(StreamRole::Lock).count();
        assert_eq!(meta.has(Captured::Locks), locks > 0, "{}", path.display());
    }
    assert!(seen >= 4, "fixtures found in {}", root.display());
}

#[test]
fn the_stream_index_gives_listed_roles_and_names_and_infers_the_rest() {
    use trace::meta::StreamEntry;
    use trace::{StreamKind, StreamRole};
    let entry = |file: &str, name: &str, role: Option<StreamRole>| StreamEntry {
        file: file.into(),
        kind: StreamKind::Thread,
        pid: 1,
        tid: 2,
        rank: None,
        events: 0,
        dropped: 0,
        name: name.into(),
        role,
    };
    let mut meta = Meta::new(vec!["./app".into()]);
    meta.streams = vec![
        entry("streams/sched-2.cst", "odd", Some(StreamRole::Lock)),
        entry("streams/1-2-3.cst", "worker", None),
        // Listed twice: the first entry counts, as the loader reads the file once.
        entry("streams/1-2-3.cst", "again", Some(StreamRole::Sampler)),
    ];
    let index = meta.stream_index();
    // A listed role wins over the name; a listed stream without one is inferred.
    assert_eq!(index.role("streams/sched-2.cst"), StreamRole::Lock);
    assert_eq!(index.role("streams/1-2-3.cst"), StreamRole::Lock);
    assert_eq!(index.name("streams/1-2-3.cst"), "worker");
    // Not listed (a recorder that died before rewriting meta.json): by its name.
    assert_eq!(index.role("streams/sched-9.cst"), StreamRole::Sampler);
    assert_eq!(index.role("streams/rank-0.cst"), StreamRole::MpiRank);
    assert_eq!(index.name("streams/sched-9.cst"), "");
}
