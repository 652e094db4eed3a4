//! The probe's announcements in the rings directory: every process image it is loaded in
//! leaves `<pid>-<instance>.probe`, lock or no lock, so that the recorder can tell a measured
//! zero from a process it never entered; a forked child leaves `<pid>-<instance>.fork` with its
//! name at the fork, and a `.probe` only when it ends normally without exec'ing or execs a
//! program the probe enters, so that a child that exec'd a static program has the fork mark
//! alone.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The probe cdylib cargo built beside this test (target/<profile>/deps/).
fn probe_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libcontend_probe.so");
    assert!(lib.is_file(), "{} not built", lib.display());
    lib
}

/// Forks; the child execs argv[1..] when given, else ends with exit(0) having taken no lock.
/// Prints `parent child`.
const FORKER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    pid_t child = fork();
    if (child == 0) {
        if (argc > 1) {
            execv(argv[1], argv + 1);
            _exit(127);
        }
        exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    printf("%d %d\n", (int)getpid(), (int)child);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
"#;

/// `cc FLAGS -o dir/name source`; `None` (a visible skip) when it cannot be built here.
fn cc(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Option<PathBuf> {
    if !testkit::require_command("cc", "gcc") {
        return None;
    }
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    if !out.status.success() {
        testkit::skip(&format!(
            "cannot build {name} with cc {}: {}",
            flags.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return None;
    }
    Some(exe)
}

/// What a run left: (parent pid, child pid), the pids that left `.probe` marks, and the fork
/// marks by pid with the name each holds.
struct Marks {
    parent: u32,
    child: u32,
    probe: BTreeSet<u32>,
    fork: BTreeMap<u32, String>,
}

/// Runs `exe args` with the probe recording into a fresh directory.
fn run(exe: &Path, args: &[&Path]) -> Marks {
    let rings = tempfile::tempdir().unwrap();
    let marks_dir = rings.path().join(trace::ring::MARKS_DIR);
    std::fs::create_dir(&marks_dir).unwrap();
    let out = Command::new(exe)
        .args(args)
        .env("LD_PRELOAD", probe_library())
        .env("CONTEND_RINGS", rings.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let pids: Vec<u32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let mut marks = Marks {
        parent: pids[0],
        child: pids[1],
        probe: BTreeSet::new(),
        fork: BTreeMap::new(),
    };
    for e in std::fs::read_dir(&marks_dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let m = e.metadata().unwrap();
        let pid = |stem: &str| stem.split_once('-').unwrap().0.parse::<u32>().unwrap();
        if let Some(stem) = name.strip_suffix(".probe") {
            assert_eq!(m.len(), 0, "{name}: an empty mark");
            marks.probe.insert(pid(stem));
        } else if let Some(stem) = name.strip_suffix(".fork") {
            marks
                .fork
                .insert(pid(stem), std::fs::read_to_string(e.path()).unwrap());
        } else {
            continue;
        }
        assert_eq!(m.permissions().mode() & 0o777, 0o600, "{name}: private");
    }
    marks
}

#[test]
fn a_process_that_takes_no_lock_announces_itself_and_so_does_a_forked_child() {
    let dir = tempfile::tempdir().unwrap();
    let Some(forker) = cc(dir.path(), "forker", FORKER, &[]) else {
        return;
    };
    let m = run(&forker, &[]);
    // The child ended with exit(): its fork mark, and its confirmation at exit.
    assert_eq!(m.probe, [m.parent, m.child].into_iter().collect());
    assert_eq!(
        m.fork,
        [(m.child, "forker".to_string())].into_iter().collect()
    );
}

#[test]
fn a_child_that_execs_a_static_program_has_its_fork_mark_alone() {
    let dir = tempfile::tempdir().unwrap();
    let Some(forker) = cc(dir.path(), "forker", FORKER, &[]) else {
        return;
    };
    let Some(fixed) = cc(
        dir.path(),
        "static",
        "int main(void) { return 0; }\n",
        &["-static"],
    ) else {
        return;
    };
    let m = run(&forker, &[&fixed]);
    assert_eq!(m.probe, [m.parent].into_iter().collect());
    assert_eq!(
        m.fork,
        [(m.child, "forker".to_string())].into_iter().collect()
    );
    // Exec'ing a dynamic program instead: its image announces itself under the child's pid.
    let dynamic = cc(dir.path(), "dynamic", "int main(void) { return 0; }\n", &[]).unwrap();
    let m = run(&forker, &[&dynamic]);
    assert_eq!(m.probe, [m.parent, m.child].into_iter().collect());
}
