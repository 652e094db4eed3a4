//! Programs the lock probe cannot enter (issue 18, item 3): a statically linked program, one a
//! shell starts, a static child of a dynamic parent, a setuid program run by another user, and
//! a CONTEND_PROBE that is no library. Their locks were not measured, and neither `record` nor
//! `report` may show that as "no lock was acquired"; a dynamic program that takes no lock is a
//! measured zero, and must say so.

use crate::common::{
    assert_one_line_error, contend_in, meta, serial, show, stderr, stdout, truth_line, Truth,
    CONTEND,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Two threads taking one mutex 40 000 times each (80 000 acquisitions, counted by the program
/// under the lock). Given a run directory, it then waits (at most 60 s) until contend's sampler
/// has seen it (its stream file exists), so that a test does not depend on how soon the
/// sampler looks.
const LOCKS_80K: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long acquisitions;

static void *work(void *arg) {
    for (int i = 0; i < 40000; i++) {
        pthread_mutex_lock(&lock);
        acquisitions++;
        pthread_mutex_unlock(&lock);
    }
    return arg;
}

int main(int argc, char **argv) {
    pthread_t a, b;
    pthread_create(&a, NULL, work, NULL);
    pthread_create(&b, NULL, work, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int seen = 0;
    if (argc > 1) {
        char path[4096];
        snprintf(path, sizeof path, "%s/streams/sched-%d.cst", argv[1], (int)getpid());
        for (int i = 0; i < 60000 && !seen; i++) {
            seen = access(path, F_OK) == 0;
            struct timespec ms = {0, 1000000};
            if (!seen)
                nanosleep(&ms, NULL);
        }
    }
    printf("truth pid=%d acquisitions=%ld lock=%p seen=%d\n", (int)getpid(), acquisitions,
           (void *)&lock, seen);
    return 0;
}
"#;

/// A program that takes no lock at all.
const NO_LOCKS: &str = r#"
#include <stdio.h>
int main(void) {
    printf("truth locks=0\n");
    return 0;
}
"#;

/// `cc FLAGS -o dir/name` of `source`; `None` (a visible skip, with the compiler's words) when
/// it cannot be built here.
fn cc(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Option<PathBuf> {
    if !testkit::require_command("cc", "gcc") {
        return None;
    }
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(flags)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("running cc");
    if !out.status.success() {
        testkit::skip(&format!(
            "cannot build {name} with cc {}: {}",
            flags.join(" "),
            stderr(&out).trim()
        ));
        return None;
    }
    Some(exe)
}

/// The 80 000-lock program linked statically (no dynamic loader: nothing can be preloaded);
/// `None` when this machine has no static C library (a visible skip).
fn static_locks(dir: &Path) -> Option<PathBuf> {
    cc(dir, "locks80k-static", LOCKS_80K, &["-static", "-pthread"])
}

/// `contend record --locks -o run -- COMMAND` in `dir`, which must succeed.
fn record_locks(dir: &Path, command: &[&str]) -> std::process::Output {
    let mut args = vec!["record", "--locks", "-o", "run", "--"];
    args.extend_from_slice(command);
    let out = contend_in(dir, &args);
    assert!(out.status.success(), "{}", show(&out));
    out
}

/// `contend report run` in `dir` (text), which must succeed.
fn report_text(dir: &Path) -> String {
    let out = contend_in(dir, &["report", "run"]);
    assert!(out.status.success(), "{}", show(&out));
    stdout(&out)
}

fn report_json(dir: &Path) -> Value {
    crate::common::report_json(dir, &["run"])
}

fn captured(meta: &Value) -> Vec<String> {
    meta["captured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

/// meta.json's `unavailable` entries about locks: (what, why).
fn locks_unavailable(meta: &Value) -> Vec<(String, String)> {
    meta["unavailable"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["what"].as_str().unwrap().starts_with("locks"))
        .map(|u| {
            (
                u["what"].as_str().unwrap().to_string(),
                u["why"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn acquisitions(truth: &Truth) -> u64 {
    truth["acquisitions"].parse().unwrap()
}

/// A run whose locks were not measured at all: meta.json does not capture them but lists why,
/// the probe counted no process, and the report says "not measured" instead of any zero.
fn assert_not_measured(dir: &Path, reason: &str) {
    let run = dir.join("run");
    let m = meta(&run);
    assert!(!captured(&m).contains(&"locks".to_string()), "{m}");
    let unavailable = locks_unavailable(&m);
    assert_eq!(unavailable.len(), 1, "{unavailable:?}");
    assert_eq!(unavailable[0].0, "locks");
    assert!(unavailable[0].1.contains(reason), "{unavailable:?}");
    assert_eq!(m["lock_probe_processes"], 0);

    let text = report_text(dir);
    assert!(
        text.contains(&format!("Locks: not measured ({}", unavailable[0].1)),
        "{text}"
    );
    assert!(text.contains("unavailable: locks: "), "{text}");
    assert!(!text.contains("No lock was acquired"), "{text}");
    assert!(!text.contains("mutex events"), "{text}");
    let json = report_json(dir);
    assert!(
        json.get("locks").is_none(),
        "no lock figures: {}",
        json["locks"]
    );
}

#[test]
fn a_static_program_that_took_80000_locks_is_not_measured_and_never_shown_as_zero() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = static_locks(dir.path()) else {
        return;
    };
    let out = record_locks(dir.path(), &[exe.to_str().unwrap()]);
    let truth = truth_line(&stdout(&out));
    assert_eq!(acquisitions(&truth), 80_000, "the program took its locks");
    let err = stderr(&out);
    let shown = exe.display();
    assert!(
        err.contains(&format!("contend: warning: {shown} is statically linked: the lock probe cannot be preloaded (LD_PRELOAD needs the dynamic loader); its locks will not be recorded")),
        "told before the launch: {err}"
    );
    assert!(
        err.contains(&format!(
            "contend: warning: locks were not measured: {shown} is statically linked"
        )),
        "told after the run: {err}"
    );
    assert_not_measured(dir.path(), "is statically linked");

    // The same source linked dynamically: every acquisition measured.
    let dynamic = cc(dir.path(), "locks80k", LOCKS_80K, &["-pthread"]).unwrap();
    std::fs::remove_dir_all(dir.path().join("run")).unwrap();
    let out = record_locks(dir.path(), &[dynamic.to_str().unwrap()]);
    let truth = truth_line(&stdout(&out));
    assert!(!stderr(&out).contains("not measured"), "{}", stderr(&out));
    let m = meta(&dir.path().join("run"));
    assert!(captured(&m).contains(&"locks".to_string()));
    assert_eq!(m["lock_probe_processes"], 1);
    let json = report_json(dir.path());
    let address = u64::from_str_radix(truth["lock"].trim_start_matches("0x"), 16).unwrap();
    let lock = json["locks"]["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"]["address"] == address)
        .unwrap_or_else(|| panic!("lock {address:#x} not in {}", json["locks"]));
    assert_eq!(lock["acquisitions"], 80_000);
}

#[test]
fn a_static_program_a_shell_runs_is_named_while_the_shell_is_measured() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = static_locks(dir.path()) else {
        return;
    };
    let shown = exe.display().to_string();
    // The shell (dynamic: the probe enters it) execs the static program in its own process.
    let out = record_locks(dir.path(), &["sh", "-c", &shown]);
    assert_eq!(acquisitions(&truth_line(&stdout(&out))), 80_000);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "contend: warning: locks of {shown} were not measured: {shown} is statically linked"
        )),
        "{err}"
    );
    let m = meta(&dir.path().join("run"));
    assert!(captured(&m).contains(&"locks".to_string()), "the shell was");
    assert_eq!(m["lock_probe_processes"], 1);
    assert_eq!(
        locks_unavailable(&m),
        [(
            format!("locks of {shown}"),
            format!("{shown} is statically linked: the lock probe cannot be preloaded (LD_PRELOAD needs the dynamic loader)")
        )]
    );
    let text = report_text(dir.path());
    assert!(
        text.contains(&format!(
            "  not measured: locks of {shown}: {shown} is statically linked"
        )),
        "{text}"
    );
    assert!(
        text.contains("No lock was acquired in the 1 process(es) the probe was loaded in (a measured 0); the rest were not measured (above)."),
        "{text}"
    );
    assert!(!text.contains("No lock was acquired."), "{text}");
    let json = report_json(dir.path());
    assert_eq!(json["locks"]["probe_processes"], 1);
    assert_eq!(
        json["locks"]["not_measured"][0]["what"],
        format!("locks of {shown}")
    );
}

#[test]
fn a_static_child_of_a_dynamic_parent_is_counted_by_its_pid() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = static_locks(dir.path()) else {
        return;
    };
    let run = dir.path().join("run");
    // Named through variables, so that nothing before the launch can see the program: only
    // the sampler's processes against the probe's announcements tell. The shell forks it.
    let prog = format!("PROG={}", exe.display());
    let run_arg = format!("RUN={}", run.display());
    let out = record_locks(
        dir.path(),
        &[
            "env",
            &prog,
            &run_arg,
            "sh",
            "-c",
            "\"$PROG\" \"$RUN\"; true",
        ],
    );
    let truth = truth_line(&stdout(&out));
    assert_eq!(acquisitions(&truth), 80_000);
    if truth["seen"] != "1" {
        testkit::check_not_made("the sampler did not see the static child within 60 s");
        return;
    }
    let pid = &truth["pid"];
    let pid_number: u64 = pid.parse().unwrap();
    let m = meta(&run);
    assert!(captured(&m).contains(&"locks".to_string()), "the shell was");
    // Forked (not vforked), the child had the probe and left its mark at the fork; what tells
    // that it exec'd a program the probe did not enter is then the name the sampler last saw.
    // Seen only between fork and exec (the parent's name), it is taken as loaded: a miss, never
    // a false claim.
    let last_name = m["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["role"] == "sampler" && s["tid"] == pid_number)
        .map(|s| s["name"].as_str().unwrap().to_string())
        .unwrap_or_default();
    if !last_name.starts_with("locks80k") && locks_unavailable(&m).is_empty() {
        assert_eq!(m["lock_probe_processes"], 2, "{m}");
        testkit::check_not_made(&format!(
            "the sampler last saw the static child as {last_name:?}, before its exec"
        ));
        return;
    }
    assert_eq!(m["lock_probe_processes"], 1, "env and sh, one process");
    let unavailable = locks_unavailable(&m);
    assert_eq!(unavailable.len(), 1, "{unavailable:?}");
    assert_eq!(unavailable[0].0, "locks in 1 process(es)");
    assert!(
        unavailable[0].1.starts_with(&format!(
            "the probe never announced itself in process(es) {pid} (last seen as {last_name}): "
        )),
        "{unavailable:?}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("contend: warning: locks of 1 of 2 process(es) were not measured: "),
        "{err}"
    );
    let text = report_text(dir.path());
    assert!(
        text.contains(&format!("  not measured: locks in 1 process(es): the probe never announced itself in process(es) {pid} ")),
        "{text}"
    );
}

#[test]
fn a_forked_subshell_that_ends_with_exit_is_not_called_unmeasured() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // dash ends a subshell with _exit (no destructor runs): only the probe's mark at the fork
    // says it was there. The subshell waits (at most 60 s) until the sampler has seen it.
    let script = format!(
        "(p=$(exec sh -c 'echo $PPID'); i=0; \
          while [ ! -e {}/streams/sched-$p.cst ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done; \
          echo truth subshell=$p); true",
        run.display()
    );
    let out = record_locks(dir.path(), &["sh", "-c", &script]);
    let err = stderr(&out);
    assert!(!err.contains("not measured"), "{err}");
    let subshell: u64 = truth_line(&stdout(&out))["subshell"].parse().unwrap();
    let m = meta(&run);
    assert!(locks_unavailable(&m).is_empty(), "{m}");
    let sampled = m["streams"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["role"] == "sampler" && s["pid"] == subshell);
    assert!(sampled, "the sampler saw the subshell {subshell}: {m}");
    assert!(
        m["lock_probe_processes"].as_u64().unwrap() >= 2,
        "sh and its subshell: {m}"
    );
}

#[test]
fn a_program_that_takes_no_lock_is_a_measured_zero() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = cc(dir.path(), "no-locks", NO_LOCKS, &[]) else {
        return;
    };
    let out = record_locks(dir.path(), &[exe.to_str().unwrap()]);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let m = meta(&dir.path().join("run"));
    assert!(captured(&m).contains(&"locks".to_string()), "{m}");
    assert_eq!(m["lock_probe_processes"], 1);
    assert!(locks_unavailable(&m).is_empty(), "{m}");
    let text = report_text(dir.path());
    assert!(
        text.contains("  probe: loaded in 1 process(es)\n"),
        "{text}"
    );
    assert!(
        text.contains("No lock was acquired: the probe, loaded in 1 process(es), saw no pthread lock taken (a measured 0)."),
        "{text}"
    );
    assert!(!text.contains("not measured"), "{text}");
    let json = report_json(dir.path());
    assert_eq!(json["locks"]["probe_processes"], 1);
    assert_eq!(json["locks"]["summary"]["events"], 0);
    assert_eq!(json["locks"]["locks"].as_array().unwrap().len(), 0);
}

#[test]
fn contend_probe_naming_a_text_file_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("probe.txt");
    std::fs::write(&text, "not a library\n").unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(CONTEND)
        .args(["record", "--locks", "-o", "run", "--", "touch"])
        .arg(&marker)
        .current_dir(dir.path())
        .env("CONTEND_PROBE", &text)
        .output()
        .unwrap();
    assert_one_line_error(
        &out,
        2,
        &[&format!(
            "CONTEND_PROBE names {}, which is a text file, not an ELF shared library for ",
            text.display()
        )],
    );
    assert!(!marker.exists(), "the program was not started");
    assert!(!dir.path().join("run").exists(), "no run directory is left");

    // A program is no library either.
    let out = Command::new(CONTEND)
        .args(["record", "--locks", "-o", "run", "--", "true"])
        .current_dir(dir.path())
        .env("CONTEND_PROBE", CONTEND)
        .output()
        .unwrap();
    assert_one_line_error(&out, 2, &["CONTEND_PROBE names ", "ELF executable"]);
}

/// The uid and gid of `nobody`, when this runs as root and `setpriv` can run contend as
/// nobody; else `None`, with the reason as a visible skip.
fn run_as_nobody_possible(dir: &Path) -> Option<(u32, u32)> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip("needs root, to make a setuid-root program and run contend as nobody");
        return None;
    }
    if !testkit::require_command("setpriv", "util-linux") {
        return None;
    }
    // SAFETY: a NUL-terminated name; the result is read at once.
    let pw = unsafe { libc::getpwnam(c"nobody".as_ptr()) };
    if pw.is_null() {
        testkit::skip("this machine has no user nobody");
        return None;
    }
    // SAFETY: non-null, just returned.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    let out = nobody(uid, gid, dir)
        .arg("--version")
        .output()
        .expect("running setpriv");
    if !out.status.success() {
        testkit::skip(&format!(
            "contend cannot run as nobody here (its directories are not open to other users?): {}",
            stderr(&out).trim()
        ));
        return None;
    }
    Some((uid, gid))
}

/// `setpriv` running contend as `uid`/`gid` with no supplementary groups, in `dir`.
fn nobody(uid: u32, gid: u32, dir: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg(CONTEND)
        .current_dir(dir);
    c
}

#[test]
fn a_setuid_root_program_run_by_another_user_is_not_measured() {
    use std::os::unix::fs::PermissionsExt;
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some((uid, gid)) = run_as_nobody_possible(dir.path()) else {
        return;
    };
    let Some(exe) = cc(dir.path(), "locks80k", LOCKS_80K, &["-pthread"]) else {
        return;
    };
    // Owned by root (who runs the test), set-user-ID; the directories open to nobody, and
    // the run written into one of nobody's.
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("nobody");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(uid), Some(gid)).unwrap();

    let out = nobody(uid, gid, &work)
        .args(["record", "--locks", "-o", "run", "--"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(acquisitions(&truth_line(&stdout(&out))), 80_000);
    let err = stderr(&out);
    let shown = exe.display();
    assert!(
        err.contains(&format!("contend: warning: {shown} is setuid (owner uid 0, contend runs as uid {uid}): the kernel runs it in secure-execution mode, where the dynamic loader ignores LD_PRELOAD")),
        "{err}"
    );
    assert!(
        err.contains("contend: warning: locks were not measured: "),
        "{err}"
    );
    assert_not_measured(&work, "secure-execution mode");

    // Root runs the same setuid-root program: no secure execution, every lock measured.
    let out = record_locks(dir.path(), &[exe.to_str().unwrap()]);
    assert!(
        !stderr(&out).contains("secure-execution"),
        "{}",
        stderr(&out)
    );
    let m = meta(&dir.path().join("run"));
    assert!(captured(&m).contains(&"locks".to_string()), "{m}");
    assert_eq!(m["lock_probe_processes"], 1);
}
