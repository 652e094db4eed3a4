//! `explain::open` on the run directories committed under fixtures/runs/ (what they hold is in
//! the golden outputs checked by `cargo test -p contend --test cli fixtures::`), and on damaged copies of them: each section found, the JSON form,
//! and a damaged run as an error naming the file, never a panic.

use explain::{Error, Explained, Options};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/runs")
        .join(name)
}

/// A copy of a fixture that a test may damage, as `TMP/name`.
fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if e.file_type().unwrap().is_dir() {
                copy_tree(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join(name);
    copy_tree(&fixture(name), &run);
    (tmp, run)
}

fn open(run: &Path) -> explain::Run {
    match explain::open(run, &Options::default()) {
        Ok(r) => r,
        Err(e) => panic!("{}: {e}", run.display()),
    }
}

fn error_of(run: &Path, options: &Options) -> Error {
    match explain::open(run, options) {
        Ok(_) => panic!("{} opened, but it should not", run.display()),
        Err(e) => e,
    }
}

#[test]
fn a_lock_run_has_its_locks_activity_and_named_sites_in_json() {
    let run = open(&fixture("locks"));
    // The fixture's program is named relative to the directory holding it (see
    // tests/names.rs): from here its symbols are not found, which is a notice.
    assert!(
        run.notices.iter().all(|n| n.0.starts_with("symbols: ")),
        "{:?}",
        run.notices
    );
    assert_eq!(run.summary.streams.len(), 8);
    assert!(run.activity.is_some(), "schedstat was captured");
    assert!(run.mpi.is_none() && run.sharing.is_none());
    let locks = run.locks.as_ref().expect("locks were captured");
    assert!(!locks.report.locks.is_empty());
    // Every call site the report shows has a name for the text and for JSON.
    for site in locks.report.locks.iter().flat_map(|l| &l.sites) {
        let address = site.site.expect("the probe records call sites");
        assert!(locks.naming.sites.contains_key(&address));
        assert!(locks.sites.contains_key(&address));
    }

    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(json["schema_version"], explain::SCHEMA_VERSION);
    assert!(json["locks"]["summary"]["wait_ns"].is_u64());
    assert!(json["activity"]["service_ns"].is_u64());
    assert!(json["locks"]["locks"][0]["sites"][0]["site"].is_u64());
}

#[test]
fn an_mpi_run_has_its_ranks_and_a_job_it_does_not_hold_is_an_option_error() {
    let run = open(&fixture("mpi"));
    let mpi = run.mpi.as_ref().expect("rank traces");
    assert!(!mpi.site_names.is_empty());
    let json = serde_json::to_value(&run).unwrap();
    assert!(json["mpi"]["site_names"].is_array());

    let options = Options {
        mpi_job: Some(7),
        ..Options::default()
    };
    let e = error_of(&fixture("mpi"), &options);
    assert!(matches!(e, Error::Option(_)), "{e}");
    assert!(e.to_string().contains("--mpi-job 7"), "{e}");
}

#[test]
fn a_sharing_run_has_its_lines_named() {
    let run = open(&fixture("sharing"));
    let sharing = run.sharing.as_ref().expect("sharing results");
    assert!(!sharing.report.lines.is_empty());
    assert_eq!(sharing.naming.lines.len(), sharing.report.lines.len());
    let json = serde_json::to_value(explain::Versioned::new(&explain::json::SharingJson::of(
        sharing,
    )))
    .unwrap();
    assert_eq!(json["schema_version"], explain::SCHEMA_VERSION);
    assert!(json["lines"][0]["belongs_to"].is_string());
    assert_eq!(sharing.strips(1).len(), 1);
}

#[test]
fn a_scale_directory_is_its_model() {
    let Explained::Scale(model) =
        explain::open_any(&fixture("scale"), &Options::default()).unwrap_or_else(|e| panic!("{e}"))
    else {
        panic!("a scale directory opened as a run");
    };
    assert_eq!(model.runs.len(), 2);
    let json = serde_json::to_value(Explained::Scale(model)).unwrap();
    assert_eq!(json["schema_version"], explain::SCHEMA_VERSION);
    // Each of its runs is a run directory of its own.
    let one = open(&fixture("scale").join("m2-n1-r1"));
    assert!(one.activity.is_some());
}

#[test]
fn a_missing_directory_is_an_error() {
    let e = error_of(Path::new("/nonexistent/contend-run"), &Options::default());
    assert!(matches!(e, Error::Damaged(_)), "{e}");
}

#[test]
fn a_damaged_stream_is_an_error_naming_it() {
    let (_tmp, run) = copy("locks");
    let stream = run.join("streams/10518-10520-5984823110228.cst");
    std::fs::write(&stream, b"not a stream at all, just some bytes of text").unwrap();
    let e = error_of(&run, &Options::default());
    assert!(matches!(e, Error::Damaged(_)), "{e}");
    assert!(
        e.to_string().contains("10518-10520-5984823110228.cst"),
        "{e}"
    );
}

#[test]
fn a_stream_meta_json_does_not_list_is_read_with_a_notice() {
    let (_tmp, run) = copy("activity");
    let meta_path = run.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    let streams = meta["streams"].as_array_mut().unwrap();
    let dropped = streams.remove(0)["file"].as_str().unwrap().to_string();
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();

    let opened = open(&run);
    assert!(
        opened
            .notices
            .iter()
            .any(|n| n.0.contains(&dropped) && n.0.contains("not listed in meta.json")),
        "{:?}",
        opened.notices
    );
    let full = open(&fixture("activity"));
    assert_eq!(opened.summary.streams.len(), full.summary.streams.len());
}
