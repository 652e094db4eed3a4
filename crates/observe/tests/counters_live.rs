//! Live checks of `observe::counters` against the kernel: software events go through the same
//! open/inherit/enable-on-exec/read path as hardware ones, so they verify the mechanism on any
//! machine; the hardware test is written to hold with and without a PMU.

use observe::counters::{hardware_pmu, merge_unavailable, Counter, CounterSet, Reading, HARDWARE};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// CPU time each of the child's two busy shells spins for, ms.
const BURN_MS: u64 = 200;

/// Two background busy loops, each spinning until its own shell has used [`BURN_MS`] of CPU
/// time (so the work is the same on any machine, at any load), waited for by the shell: one
/// in a forked subshell, one in an exec'd grandchild `sh`.
fn two_busy_loops() -> String {
    let burn = testkit::BURN_SH;
    format!("{burn}; burn {BURN_MS} & sh -c '{burn}; burn {BURN_MS}' & wait")
}

/// Spins until this thread has used `ns` of CPU; returns what it used.
fn burn(ns: u64) -> u64 {
    testkit::burn_cpu(Duration::from_nanos(ns)).as_nanos() as u64
}

/// Reaps `child` with wait4 (not `Child::wait`, which gives no rusage) and returns its exit
/// status and CPU time (user + system, including the descendants it waited for), in ns.
fn wait4_cpu_ns(child: std::process::Child) -> (i32, u64) {
    let pid = child.id();
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out-pointers.
    let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
    assert_eq!(
        rc,
        pid as libc::pid_t,
        "wait4: {}",
        std::io::Error::last_os_error()
    );
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (status, tv(ru.ru_utime) + tv(ru.ru_stime))
}

fn find(readings: &[Reading], c: Counter) -> &Reading {
    readings
        .iter()
        .find(|r| r.counter == c)
        .unwrap_or_else(|| panic!("no {c:?} reading in {readings:?}"))
}

#[test]
fn task_clock_matches_child_cpu_time_and_not_our_threads() {
    let (set, missing) = CounterSet::for_children(&[Counter::TaskClock, Counter::ContextSwitches]);
    assert!(
        missing.is_empty(),
        "software events unavailable: {missing:?}"
    );
    assert!(!set.is_empty());

    // A thread of ours created after the open: it inherits the events, disabled, and never
    // execs, so its CPU time must not appear. Same for the opening thread's own work below.
    let sibling = std::thread::spawn(|| burn(400_000_000));

    let child = Command::new("sh")
        .arg("-c")
        .arg(two_busy_loops())
        .spawn()
        .expect("spawn sh");
    let own = burn(100_000_000);
    let (status, child_cpu) = wait4_cpu_ns(child);
    assert_eq!(status, 0);
    let sibling_cpu = sibling.join().unwrap();

    let readings = set.read();
    let tc = find(&readings, Counter::TaskClock);
    let cs = find(&readings, Counter::ContextSwitches);
    eprintln!(
        "child cpu {child_cpu} ns, task-clock {} ns, sibling {sibling_cpu} ns, own {own} ns, \
         context switches {}",
        tc.value, cs.value
    );
    // The precondition: each shell spun until it had used BURN_MS of CPU (by its own
    // /proc/self/stat, whose utime + stime the kernel scales to the exact runtime), so wait4
    // must report at least both; a tick (10 ms at most) of rounding per shell is allowed.
    assert!(
        child_cpu >= (2 * BURN_MS - 20) * 1_000_000,
        "the child did too little work to compare: {child_cpu} ns, expected ≥ 2 × {BURN_MS} ms"
    );
    assert!(sibling_cpu >= 400_000_000);
    assert_eq!(tc.event, "task-clock");
    assert!(
        !tc.estimated(),
        "software events are never multiplexed: {tc:?}"
    );
    assert!(tc.enabled_ns > 0);
    // Both are the scheduler's runtime of the same tasks, so load does not move one against
    // the other. They differ only by what one sees and the other does not: wait4 counts the
    // forked child before its exec (the events start at exec), and task-clock of the exited
    // inherited children is folded in as each exits; both are a few ms at most against the
    // ≥ 400 ms compared. 20 % would still catch our own threads' 500 ms counted by mistake.
    let (lo, hi) = (child_cpu as f64 * 0.8, child_cpu as f64 * 1.2);
    assert!(
        (tc.value as f64) >= lo && (tc.value as f64) <= hi,
        "task-clock {} ns outside [0.8, 1.2] × the child's CPU time {child_cpu} ns \
         (our own threads used {} ns: counted by mistake?)",
        tc.value,
        sibling_cpu + own
    );
    // The shell blocks in `wait`, so it switches at least once.
    assert!(cs.value >= 1, "{cs:?}");
}

#[test]
fn hardware_counters_here_or_the_reason_why_not() {
    let pmu = hardware_pmu(Path::new("/sys/bus/event_source/devices"));
    let (set, missing) = CounterSet::for_children(HARDWARE);
    for m in &missing {
        assert!(!m.why.is_empty(), "{m:?}");
    }
    if pmu.is_none() {
        // This VM: no PMU. Every hardware counter is unavailable, for that one reason, said once.
        assert!(set.is_empty());
        assert!(set.read().is_empty());
        assert_eq!(missing.len(), HARDWARE.len(), "{missing:?}");
        for m in &missing {
            assert!(m.why.contains("no PMU on this machine"), "{m:?}");
        }
        let merged = merge_unavailable(&missing);
        assert_eq!(merged.len(), 1, "{merged:?}");
        eprintln!("unavailable: {}: {}", merged[0].what, merged[0].why);
        return;
    }
    // A machine with a PMU: whatever opened counts the child's work.
    let child = Command::new("sh")
        .arg("-c")
        .arg(two_busy_loops())
        .spawn()
        .expect("spawn sh");
    let (status, _) = wait4_cpu_ns(child);
    assert_eq!(status, 0);
    let readings = set.read();
    eprintln!("{readings:#?}\nunavailable: {missing:#?}");
    assert_eq!(readings.len() + missing.len(), HARDWARE.len());
    if let Some(c) = readings.iter().find(|r| r.counter == Counter::Cycles) {
        assert!(c.estimate().is_some_and(|v| v > 0), "{c:?}");
    } else {
        // Only a refusal with a reason (permissions, a PMU without the event) is acceptable.
        assert!(missing.iter().any(|m| m.what == "cycles"));
    }
}

/// CPU time the kernel has charged to these threads (schedstat's first field, as of their
/// last tick or switch), ns.
fn schedstat_ns(pid: u32, tids: &[u32]) -> u64 {
    tids.iter()
        .map(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{t}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn attached_threads_are_counted_from_the_attach() {
    let mut child = Command::new("sh")
        .arg("-c")
        // Spins until killed below: no iteration count that a fast machine could finish
        // before the 150 ms of CPU time waited for.
        .arg("while :; do :; done")
        .spawn()
        .expect("spawn sh");
    let pid = child.id();
    let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    assert!(!tids.is_empty());
    // The interval [before, after] encloses [open, read].
    let before = schedstat_ns(pid, &tids);
    let (set, missing) = CounterSet::for_threads(&tids, &[Counter::TaskClock]);
    assert!(missing.is_empty(), "{missing:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while schedstat_ns(pid, &tids) - before < 150_000_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let readings = set.read();
    let after = schedstat_ns(pid, &tids);
    let _ = child.kill();
    let _ = child.wait();

    let tc = find(&readings, Counter::TaskClock);
    let ran = after - before;
    eprintln!(
        "attached task-clock {} ns; the threads ran {ran} ns meanwhile",
        tc.value
    );
    assert!(ran >= 150_000_000, "the target hardly ran: {ran} ns");
    // schedstat is brought up to date only at ticks and switches, so it may lag a running
    // thread by a tick or two; task-clock is read exactly.
    assert!(tc.value <= ran + 10_000_000, "{tc:?} > {ran} + 10 ms");
    assert!(tc.value as f64 >= ran as f64 * 0.8, "{tc:?} < 0.8 × {ran}");
}

#[test]
fn attaching_to_a_thread_that_is_gone_says_so() {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().unwrap();
    let (set, missing) = CounterSet::for_threads(&[pid], &[Counter::TaskClock]);
    assert!(set.is_empty());
    assert_eq!(missing.len(), 1);
    assert!(missing[0].why.contains("exited"), "{missing:?}");
}
