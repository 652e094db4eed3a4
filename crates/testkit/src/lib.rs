//! What contend's test binaries share, so that every test behaves the same on any machine:
//!
//! - **Visible skips.** libtest has no "skipped" outcome and captures a passing test's
//!   output, so a test that returns early would look passed. [`skip`] appends a line to the
//!   file named by `CONTEND_TEST_SKIP_LOG` (set by `scripts/test.sh`, which prints and counts
//!   the lines at the end) as well as to stderr.
//! - **Packages the test script installs** are never a reason to skip under CI (`CI=true`):
//!   [`require_command`] fails the test there, and skips visibly elsewhere.
//! - **CPU-time clocks**, so that work is sized by the CPU time it reached, never by an
//!   iteration count tuned on one machine.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// The environment variable naming the file that collects skip lines.
pub const SKIP_LOG: &str = "CONTEND_TEST_SKIP_LOG";

/// The running test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string()
}

/// Records that the calling test was skipped, and why. The caller then returns.
///
/// One line per call, `SKIPPED <binary> <test>: <reason>`, on stderr and appended (one
/// `write`, `O_APPEND`, so lines from parallel tests do not interleave) to `$CONTEND_TEST_SKIP_LOG`.
pub fn skip(reason: &str) {
    log_line("SKIPPED", reason);
}

/// Records that an attempt of the calling test failed and is tried again, with why: a bounded
/// retry of an inherently noisy check must never hide a failure, so each failed attempt is
/// printed by `scripts/test.sh` beside the skips (a passing test's stderr is captured).
pub fn attempt_failed(why: &str) {
    log_line("RETRIED", why);
}

/// Records a check that the calling test could not make on this machine, and why (its
/// precondition did not hold: the threads never ran together, other work held the CPUs), while
/// the rest of the test ran: listed by `scripts/test.sh` so that a weaker run is never silent.
pub fn check_not_made(why: &str) {
    log_line("UNCHECKED", why);
}

/// Appends `TAG <binary> <test>: <text>` to stderr and the log file.
fn log_line(tag: &str, text: &str) {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_string())
        })
        .unwrap_or_default();
    // One line, whatever the text holds.
    let text = text.replace('\n', " ");
    let line = format!("{tag} {binary} {}: {text}\n", test_name());
    eprint!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG) {
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            panic!(
                "cannot record the {tag} line in {}: {e}",
                Path::new(&path).display()
            );
        }
    }
}

/// Whether tests run under CI (`CI=true`, as CI systems set it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Whether `command` is on PATH.
pub fn have_command(command: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let p = dir.join(command);
            std::fs::metadata(&p).is_ok_and(|m| m.is_file())
        })
    })
}

/// `command`, which `scripts/test.sh` installs from `package`, is there: true. Missing, under CI
/// this panics (the script should have installed it: a skip would hide that); elsewhere the
/// test is skipped visibly and this returns false.
pub fn require_command(command: &str, package: &str) -> bool {
    if have_command(command) {
        return true;
    }
    let why =
        format!("`{command}` is missing (Debian package {package}; scripts/test.sh installs it)");
    if under_ci() {
        panic!("{why}: under CI a package the test script installs is never a reason to skip");
    }
    skip(&why);
    false
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the kernel to fill.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime: {}", std::io::Error::last_os_error());
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CLOCK_MONOTONIC, ns (the clock contend records with).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Spins until the calling thread has used `cpu` of CPU time, whatever the machine's speed
/// or load; returns the CPU time used (≥ `cpu`).
pub fn burn_cpu(cpu: Duration) -> Duration {
    let want = cpu.as_nanos() as u64;
    let start = thread_cpu_ns();
    let mut x = 0u64;
    while thread_cpu_ns() - start < want {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    std::hint::black_box(x);
    Duration::from_nanos(thread_cpu_ns() - start)
}

/// A POSIX shell function `burn MS` that spins until the shell process running it has used
/// MS ms of CPU time (user + system, from its own `/proc/self/stat`, read by a builtin so no
/// process is forked). Clock ticks are 10 ms on most kernels, so it overshoots by at most one.
/// Use it as `sh -c "$BURN_SH; burn 200"`, also in subshells (`burn 200 &`).
pub const BURN_SH: &str = r#"burn() {
  _want=$(( $1 * $(getconf CLK_TCK) / 1000 ))
  while :; do
    read -r _stat < /proc/self/stat
    set -- ${_stat##*) }
    [ $(( ${12} + ${13} )) -ge $_want ] && break
    _i=0; while [ $_i -lt 1000 ]; do _i=$((_i+1)); done
  done
}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_reaches_the_cpu_time_asked_for() {
        let used = burn_cpu(Duration::from_millis(30));
        assert!(used >= Duration::from_millis(30), "{used:?}");
    }

    #[test]
    fn the_shell_burn_reaches_its_cpu_time_in_a_subshell_too() {
        // The shell's own accounting of its children: `times` prints it after the wait.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{BURN_SH}; burn 50 & wait; cat /proc/$$/stat"))
            .output()
            .expect("sh");
        assert!(out.status.success(), "{out:?}");
        let stat = String::from_utf8_lossy(&out.stdout);
        let after = stat.rsplit_once(") ").expect("a stat line").1;
        let fields: Vec<u64> = after
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        // cutime + cstime: fields 16 and 17 of stat, 14 and 15 after the name.
        let ticks = fields[13] + fields[14];
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        assert!(
            ticks * 1000 / hz >= 50,
            "the subshell used only {ticks} ticks at {hz} Hz"
        );
    }
}
