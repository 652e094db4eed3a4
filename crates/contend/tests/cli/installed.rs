//! An installed contend (issue 21): the binary alone, copied where no library is beside it,
//! run with an empty HOME and the system's own tools on PATH, has every command: it carries the
//! lock probe and the sharing runtime and writes them to the user's cache on first use. A cache
//! another user could write to is refused, with the path and the fix; a full disk is a clear
//! error, and nothing half-written is used later.

use crate::common::{build, stderr, stdout, CONTEND};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The contend binary alone in `dir/bin` (no .so beside it, as `cargo install` leaves it).
fn installed(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("contend");
    std::fs::copy(CONTEND, &exe).unwrap();
    exe
}

/// `exe ARGS` in `cwd` with nothing of this build's environment: an empty HOME, the system's
/// PATH, and `extra`.
fn run(exe: &Path, cwd: &Path, home: &Path, extra: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(exe);
    c.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home);
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        stderr(out),
        stdout(out)
    );
}

/// The files of the cache, by name, and the cache's mode.
fn cache_files(home: &Path) -> (Vec<String>, u32) {
    let dir = home.join(".cache/contend");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    (names, mode)
}

#[test]
fn the_binary_alone_records_locks_sharing_and_mpi() {
    let _one = crate::common::serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(dir.path());
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();

    // record --locks: the probe comes from the binary.
    let Some(ph) = build("examples/locks/planted_hold.c", &work) else {
        return;
    };
    let ph = ph.to_str().unwrap().to_string();
    let out = run(
        &exe,
        &work,
        &home,
        &[],
        &["record", "--locks", "-o", "locks", "--", &ph],
    );
    ok(&out, "record --locks");
    let out = run(&exe, &work, &home, &[], &["report", "--json", "locks"]);
    ok(&out, "report");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["locks"]["locks"].as_array().unwrap().len() >= 2,
        "locks found: {}",
        report["locks"]
    );
    let (files, mode) = cache_files(&home);
    assert_eq!(mode, 0o700);
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("libcontend_probe-") && f.ends_with(".so")),
        "{files:?}"
    );

    // contend cc, then c2c record: the sharing runtime comes from the binary.
    let src = crate::common::repo("examples/sharing/reader_writer.c");
    let prog = work.join("rw");
    let out = run(
        &exe,
        &work,
        &home,
        &[],
        &[
            "cc",
            "--",
            "cc",
            "-O2",
            "-g",
            "-pthread",
            src.to_str().unwrap(),
            "-o",
            prog.to_str().unwrap(),
        ],
    );
    ok(&out, "contend cc");
    let out = run(
        &exe,
        &work,
        &home,
        &[],
        &[
            "c2c",
            "record",
            "-o",
            "sharing",
            "--",
            prog.to_str().unwrap(),
        ],
    );
    ok(&out, "c2c record");
    let out = run(&exe, &work, &home, &[], &["c2c", "report", "sharing"]);
    ok(&out, "c2c report");
    assert!(
        stdout(&out).contains("reader_writer.c:"),
        "{}",
        stdout(&out)
    );
    let (files, _) = cache_files(&home);
    assert!(
        files.iter().any(|f| f.starts_with("libcontend_sharing-")),
        "{files:?}"
    );

    // record --mpi, both MPIs (the wrapper's source was embedded before).
    use crate::common::mpi::{require, MPICH, OPEN_MPI};
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    for mpi in [&OPEN_MPI, &MPICH] {
        let program = work.join(format!("ls-{}", mpi.mpicc));
        let status = Command::new(mpi.mpicc)
            .args(["-O2", "-g", "-o"])
            .arg(&program)
            .arg(crate::common::repo("examples/mpi/late_sender.c"))
            .status()
            .unwrap();
        assert!(status.success());
        let run_dir = format!("mpi-{}", mpi.mpicc);
        let mut args = vec!["record", "--mpi", "-o", &run_dir, "--"];
        args.extend_from_slice(mpi.launcher);
        args.extend(["-np", "2", program.to_str().unwrap()]);
        let out = run(&exe, &work, &home, &[], &args);
        ok(&out, mpi.name);
        let out = run(&exe, &work, &home, &[], &["report", "--json", &run_dir]);
        ok(&out, "report --mpi");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            report["mpi"]["ranks"].as_array().unwrap().len(),
            2,
            "{}",
            mpi.name
        );
    }
}

#[test]
fn a_cache_others_can_write_is_refused_with_its_path_and_the_fix() {
    let _one = crate::common::serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(dir.path());
    let home = dir.path().join("home");
    let cache = home.join(".cache/contend");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let Some(ph) = build("examples/locks/planted_hold.c", dir.path()) else {
        return;
    };
    let out = run(
        &exe,
        dir.path(),
        &home,
        &[],
        &["record", "--locks", "-o", "run", "--", ph.to_str().unwrap()],
    );
    // The run goes on with a private temporary cache, and says why the user's was not used.
    ok(&out, "record --locks beside a writable cache");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cache {} not used: it is writable by group or others",
            cache.display()
        )) && err.contains("chmod 700"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        0,
        "nothing written into it"
    );
}

#[test]
fn a_full_disk_while_writing_the_cache_is_a_clear_error_and_leaves_nothing_used_later() {
    let _one = crate::common::serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(dir.path());
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    // A file system of 1 MiB, far less than the probe: the write fails with ENOSPC.
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs"])
        .arg(&small)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (needs root and mount rights)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(small.clone());
    let cache = small.join("cache");
    let Some(ph) = build("examples/locks/planted_hold.c", dir.path()) else {
        return;
    };
    let ph = ph.to_str().unwrap().to_string();
    let env = [("CONTEND_CACHE", cache.to_str().unwrap())];
    let out = run(
        &exe,
        dir.path(),
        &home,
        &env,
        &["record", "--locks", "-o", "run", "--", &ph],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot write libcontend_probe-")
            && err.contains(&cache.display().to_string()),
        "{err}"
    );
    assert!(
        !std::fs::read_dir(&cache).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("libcontend_probe")),
        "a half-written probe was left where contend looks"
    );
    // With room again the same cache serves.
    let _ = Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(&small)
        .status();
    let out = run(
        &exe,
        dir.path(),
        &home,
        &env,
        &["record", "--locks", "-o", "run2", "--", &ph],
    );
    ok(&out, "record --locks once there is room");
}
