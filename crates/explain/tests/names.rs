//! Names in the model: the locks fixture's program, found where its maps say
//! (`/proc/self/cwd/locks/bin/planted_hold`), names the lock and its call site as the text
//! report does and, split, in the JSON. Its own test binary: it changes the working directory.

use std::path::{Path, PathBuf};

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

#[test]
fn lock_call_sites_are_named_by_function_and_line_beside_their_address() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/runs/locks");
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture, &tmp.path().join("locks"));
    // The module must not be newer than the run (a rebuilt program is not trusted for names).
    std::fs::File::options()
        .write(true)
        .open(tmp.path().join("locks/meta.json"))
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    std::env::set_current_dir(tmp.path()).unwrap();

    let run = explain::open(Path::new("locks"), &explain::Options::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(run.notices.is_empty(), "{:?}", run.notices);
    let locks = run.locks.as_ref().unwrap();
    let hot = &locks.report.locks[0];
    assert_eq!(locks.naming.locks[&hot.lock], "hot_lock");
    let address = hot.sites[0].site.unwrap();
    assert!(locks.naming.sites[&address].starts_with("update_shared_counter (planted_hold.c:"));

    let json = serde_json::to_value(&run).unwrap();
    let site = &json["locks"]["locks"][0]["sites"][0];
    assert_eq!(site["site"], address);
    assert_eq!(site["function"], "update_shared_counter");
    assert!(
        site["location"]
            .as_str()
            .is_some_and(|l| l.starts_with("planted_hold.c:")),
        "{site}"
    );
    assert_eq!(json["locks"]["locks"][0]["lock"]["name"], "hot_lock");
}
