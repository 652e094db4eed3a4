//! The service-time sampler and the activity analysis end to end (`contend record`, then
//! `contend report --json`'s `activity`), on the scaling examples whose activity is known:
//! examples/scaling/independent.c (every thread always runnable: A = threads, up to the
//! CPUs) and examples/scaling/serialised.c (one lock lets one thread compute at a time:
//! A = 1, and the lock waits explain the rest). Also `record -p` on a running program, and
//! what `record` does with bad input.
//!
//! Tolerances are for a noisy 2-CPU machine (other builds and tests running beside): A counts
//! a thread waiting on a run queue as active, so other load barely moves it; what moves it is
//! time when fewer threads exist (the program's start-up, ~20 ms of calibration, and threads
//! finishing at different times when the machine is shared unfairly) and, on a VM, CPU time
//! the hypervisor steals (measured around each recording, see `steal_ns`). Never absolute
//! timings: service times are compared with the CPU time the program measured itself in the
//! same run (its `truth` line).

use crate::common::{
    build, contend_in, meta, num, online_cpus, record, report_json, serial, stderr,
    trace_processor, two_cpus, KillOnDrop, Truth, CONTEND,
};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Time the hypervisor has taken CPUs 0 and 1 away from this VM (`steal` in /proc/stat), ns,
/// to the 10 ms tick. With CONFIG_PARAVIRT_TIME_ACCOUNTING the guest leaves stolen time out
/// of a thread's on-CPU time (and of CLOCK_THREAD_CPUTIME_ID) and does not count it as
/// run-queue wait either, so to schedstat a thread whose CPU was stolen looks blocked: A is
/// lower than the threads' wall-clock activity by up to steal / T. (Checked on this VM: a
/// thread spinning alone on CPU 0 for 3 s had 18 and 30 ms of its wall time in neither
/// field while CPU 0's steal grew by 20 and 30 ms.) 0 on bare metal.
fn steal_ns() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("cpu0 ") || l.starts_with("cpu1 "))
        .filter_map(|l| l.split_whitespace().nth(8)?.parse::<f64>().ok())
        .sum::<f64>()
        * 1e9
        / hz
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

/// The activity in one line, for assertion messages: A, τ/T, T and every thread's split.
fn shown(a: &Value) -> String {
    let mut s = format!(
        "A={:.3} running={:.3} listing_3_3={} T={:.1}ms service={:.1}ms runq={:.1}ms blocked={:.1}ms; threads:",
        f(a, "active_threads"),
        f(a, "running_threads"),
        a["active_threads_listing_3_3"],
        f(a, "elapsed_ns") / 1e6,
        f(a, "service_ns") / 1e6,
        f(a, "runq_wait_ns") / 1e6,
        f(a, "blocked_ns") / 1e6,
    );
    for t in a["threads"].as_array().unwrap() {
        s += &format!(
            " [{} {} life={:.1} svc={:.1} runq={:.1} blk={:.1} cpus={}]",
            t["tid"],
            t["name"].as_str().unwrap_or(""),
            f(t, "lifetime_ns") / 1e6,
            f(t, "service_ns") / 1e6,
            f(t, "runq_wait_ns") / 1e6,
            f(t, "blocked_ns") / 1e6,
            t["cpus"]
        );
    }
    s
}

/// The sampler's own record of a run, for assertion messages: its rounds, how many came
/// late (it waited for a CPU itself), and the program's CPU time from wait4 against the
/// service it sampled (the difference is what it did not see: threads' last intervals).
fn sampler_shown(dir: &Path, a: &Value) -> String {
    let m = meta(&dir.join("run"));
    let cpu = a["cpu_ns"].as_f64().unwrap_or(f64::NAN);
    format!(
        "sampler: {} rounds, {} late; wait4 CPU {:.1} ms, sampled service {:.1} ms",
        m["sampling"]["rounds"],
        m["sampling"]["late_rounds"],
        cpu / 1e6,
        f(a, "service_ns") / 1e6
    )
}

/// The activity row of the thread with this tid.
fn thread(a: &Value, tid: f64) -> &Value {
    a["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"].as_f64() == Some(tid))
        .unwrap_or_else(|| panic!("thread {tid} not in the activity: {}", shown(a)))
}

/// Each worker's service time against the CPU time it measured itself
/// (CLOCK_THREAD_CPUTIME_ID, read as the thread's last act). Both come from the kernel's
/// sum_exec_runtime; they differ by what the sampler cannot see: the thread's last
/// interval before it exits (up to one 10 ms interval, ~2.5 % of 400 ms). 15 % leaves room
/// for a late sampling round on a loaded machine.
fn services_match_truth(a: &Value, truth: &Truth) {
    for i in 0..num(truth, "threads") as usize {
        let t = thread(a, num(truth, &format!("worker{i}.tid")));
        let service = f(t, "service_ns");
        let cpu = num(truth, &format!("worker{i}.cpu_ns"));
        let off = (service - cpu).abs() / cpu * 100.0;
        assert!(
            off <= 15.0,
            "worker-{i}: service {:.1} ms, truth CPU time {:.1} ms ({off:.1} % off, limit 15 %); {}",
            service / 1e6,
            cpu / 1e6,
            shown(a)
        );
    }
}

#[test]
fn independent_threads_on_two_cpus_are_both_active() {
    let _one_at_a_time = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    let steal_before = steal_ns();
    let truth = record(dir.path(), &["--cpus", "0,1"], &exe, &["-t", "2"]);
    let steal = steal_ns() - steal_before;
    let report = report_json(dir.path(), &["run"]);
    let a = &report["activity"];
    eprintln!("measured (independent on 2 CPUs): {}", shown(a));
    let active = f(a, "active_threads");
    let m = 2.0;
    // What the hypervisor took from the VM meanwhile (see steal_ns), in threads.
    let stolen = steal / f(a, "elapsed_ns");
    let sampler = format!(
        "{}; steal on CPUs 0-1 {:.0} ms = {stolen:.3} threads",
        sampler_shown(dir.path(), a),
        steal / 1e6
    );
    // What the program saw itself: each worker never sleeps, so it is active from the start
    // to its end (busy_ns); main is active while it calibrates, before the start. Over
    // contend's T (which also has the program's start-up and exit) that is
    let expected = (num(&truth, "busy_ns_total") + num(&truth, "calibration_ns"))
        / (num(&truth, "wall_ns") + num(&truth, "calibration_ns"));
    eprintln!(
        "A = {active:.3}, from the truth line {expected:.3} (its own active_threads={}); {sampler}",
        truth["active_threads"],
    );
    // contend's A must agree with it. The sampler loses each worker's last interval before
    // it exits (≤ 10 ms, ~0.025 of A for a 0.4 s run) and counts the program's start-up and
    // exit in T (~0.01–0.03): measured 0.01–0.09 below in ~150 runs, so 0.15. Plus what the
    // hypervisor stole: two runs (before steal was measured here) came out 0.19 and 0.5
    // below, their workers "blocked" 33–55 ms though they never sleep, which is what stolen
    // CPU time looks like to schedstat.
    let limit = 0.15 + stolen;
    assert!(
        (active - expected).abs() <= limit,
        "A = {active:.3}, the program's own spans give {expected:.3} (limit ± {limit:.3}); {sampler}; truth {truth:?}; {}",
        shown(a)
    );
    // In absolute terms: two threads always runnable for ~0.4 s, plus ~20 ms of main
    // calibrating alone, give A ≈ 1.95 on an idle machine. A machine shared with other work
    // can let one worker finish well before the other, and the second then runs alone:
    // beside other builds A was 1.55–2.02 (below 1.6 in 9 of ~80 runs at load averages of
    // 3–5 on 2 CPUs: one worker ended after 400–500 ms, the other after 660–780 ms, and the
    // program's own measure agreed). So the lower bound is 1.4 rather than 1.6, less what
    // was stolen; the check against the truth above stays tight, and a sampler or analysis
    // that lost the run-queue wait or a thread would still give ~1. Above 2 only by main's
    // bit of activity and a sampling interval's rounding: 2.2.
    let low = 1.4 - stolen;
    assert!(
        (low..=2.2).contains(&active),
        "A = {active:.3}, expected {low:.3}..2.2 (truth: wall {} ns, active_threads {}); {sampler}; {}",
        truth["wall_ns"],
        truth["active_threads"],
        shown(a)
    );
    // The dependency loss m − A: nothing makes these threads wait for each other, so what
    // is lost is only the unequal ending above (the brief's 0.4, widened to 0.6 with A's
    // lower bound, for the same reason).
    assert!(
        m - active < 0.6 + stolen,
        "m − A = {:.3} on {m} CPUs, expected < {:.3}; {sampler}; {}",
        m - active,
        0.6 + stolen,
        shown(a)
    );
    services_match_truth(a, &truth);
    // Each worker is runnable for its whole life: it never sleeps. What shows as blocked is
    // the sampler's rounding of its first interval (≤ 10 ms, measured 1–35 ms) and steal.
    for i in 0..2 {
        let t = thread(a, num(&truth, &format!("worker{i}.tid")));
        let blocked = f(t, "blocked_ns");
        let life = f(t, "lifetime_ns");
        assert!(
            blocked <= 0.15 * life + steal,
            "worker-{i} blocked {:.1} of {:.1} ms, a thread that never sleeps; {sampler}; {}",
            blocked / 1e6,
            life / 1e6,
            shown(a)
        );
    }
}

/// The lock waits the probe saw on thread `tid` (its row of `locks.threads`).
fn lock_wait_of_thread(locks: &Value, tid: f64) -> f64 {
    locks["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["tid"].as_f64() == Some(tid))
        .map(|t| t["wait_ns"].as_f64().unwrap_or(0.0))
        .sum()
}

#[test]
fn serialised_threads_are_one_active_thread_waiting_on_one_lock() {
    let _one_at_a_time = serial();
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/serialised.c", dir.path()) else {
        return;
    };
    let steal_before = steal_ns();
    let truth = record(
        dir.path(),
        &["--locks", "--cpus", "0,1"],
        &exe,
        &["-t", "2"],
    );
    let steal = steal_ns() - steal_before;
    let report = report_json(dir.path(), &["run"]);
    let a = &report["activity"];
    eprintln!("measured (serialised on 2 CPUs): {}", shown(a));
    let active = f(a, "active_threads");
    let elapsed = f(a, "elapsed_ns");
    let m = 2.0;
    let stolen = steal / elapsed;
    // One thread computes at a time: A ≈ 1, less the hand-offs (the woken waiter takes tens
    // of µs to run) and what the hypervisor stole (see steal_ns), plus main's calibration.
    // On a loaded machine A grows (a preempted holder waits on a run queue while the other
    // thread still waits for the lock: 1 + that wait / T): 1.3 leaves room for ~30 % of the
    // run spent that way. Measured 0.88–1.13 in ~100 runs beside other builds.
    let low = 0.8 - stolen;
    assert!(
        (low..=1.3).contains(&active),
        "A = {active:.3}, expected {low:.3}..1.3 (steal {:.0} ms); {}",
        steal / 1e6,
        shown(a)
    );
    let loss = m - active;
    assert!(
        loss >= 0.6,
        "m − A = {loss:.3} on {m} CPUs, expected ≥ 0.6; {}",
        shown(a)
    );

    // The lock explains the idle CPU: (m − A) × T thread-ns were not spent active, and the
    // waits for big_lock account for most of them (each worker waits while the other holds).
    let locks = &report["locks"];
    let addr = u64::from_str_radix(truth["big_lock.addr"].trim_start_matches("0x"), 16).unwrap();
    let hot = locks["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"]["address"].as_u64() == Some(addr))
        .unwrap_or_else(|| panic!("big_lock {addr:#x} not in the report: {}", locks["locks"]));
    // The lock analysis covers the same run, on the same clock: the sampler's streams
    // (CLOCK_MONOTONIC ns) are not lock streams (TSC ticks), so no thread is listed twice
    // and the span is the run's, not a mixture of the two clocks (it once was ~500 s).
    let span = f(locks, "end_ns") - f(locks, "start_ns");
    assert!(
        (0.5 * elapsed..=1.5 * elapsed).contains(&span),
        "locks span {:.1} ms, activity T {:.1} ms",
        span / 1e6,
        elapsed / 1e6
    );
    let mut tids: Vec<u64> = locks["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tid"].as_u64().unwrap_or(0))
        .collect();
    let listed = tids.len();
    tids.sort_unstable();
    tids.dedup();
    assert_eq!(
        tids.len(),
        listed,
        "a thread listed twice in locks.threads: {}",
        locks["threads"]
    );
    let wait = f(hot, "wait_ns");
    let idle = loss * elapsed;
    eprintln!(
        "big_lock wait {:.1} ms, idle (m − A) × T {:.1} ms, per worker {:?} ms",
        wait / 1e6,
        idle / 1e6,
        (0..2)
            .map(
                |i| (lock_wait_of_thread(locks, num(&truth, &format!("worker{i}.tid"))) / 1e6)
                    .round()
            )
            .collect::<Vec<_>>()
    );
    assert!(
        wait >= 0.6 * idle,
        "big_lock wait {:.1} ms explains {:.0} % of the idle (m − A) × T = {:.1} ms, expected ≥ 60 % (truth wait {} ns); {}",
        wait / 1e6,
        100.0 * wait / idle,
        idle / 1e6,
        truth["big_lock.wait_ns_total"],
        shown(a)
    );

    // Each worker's blocked time is mostly waiting for big_lock (the rest, 10–40 ms: the
    // start barrier, the hand-over sleeps, the sampler's rounding of a thread's first
    // interval), and each waits about half the run, (threads − 1) / threads of it (measured
    // 45–55 %; 30–70 % allows for one worker being preempted more while it holds).
    for i in 0..2 {
        let tid = num(&truth, &format!("worker{i}.tid"));
        let t = thread(a, tid);
        let blocked = f(t, "blocked_ns");
        let lock_wait = lock_wait_of_thread(locks, tid);
        assert!(
            lock_wait >= 0.7 * blocked,
            "worker-{i}: lock wait {:.1} ms of {:.1} ms blocked, expected ≥ 70 % (truth wait {} ns); {}",
            lock_wait / 1e6,
            blocked / 1e6,
            truth[&format!("worker{i}.wait_ns")],
            shown(a)
        );
        assert!(
            (0.3..=0.7).contains(&(lock_wait / elapsed)),
            "worker-{i}: lock wait {:.1} ms is {:.0} % of T = {:.1} ms, expected 30..70 %; {}",
            lock_wait / 1e6,
            100.0 * lock_wait / elapsed,
            elapsed / 1e6,
            shown(a)
        );
    }
    services_match_truth(a, &truth);
}

#[test]
fn independent_threads_on_one_cpu_are_runnable_but_one_runs() {
    let _one_at_a_time = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    let truth = record(dir.path(), &["--cpus", "0"], &exe, &["-t", "2"]);
    let report = report_json(dir.path(), &["run"]);
    let a = &report["activity"];
    eprintln!("measured (independent on 1 CPU): {}", shown(a));
    let active = f(a, "active_threads");
    let running = f(a, "running_threads");
    // Both workers are runnable throughout (one on the CPU, one on its run queue) and one CPU
    // shares itself fairly, so they end together: A ≈ 1.95 as on two CPUs. τ / T can only
    // exceed 1 by rounding (one CPU): 1.1.
    assert!(
        active >= 1.6,
        "A = {active:.3} on 1 CPU with 2 runnable threads, expected ≥ 1.6; {}",
        shown(a)
    );
    assert!(
        running <= 1.1,
        "τ / T = {running:.3} on 1 CPU, expected ≤ 1.1; {}",
        shown(a)
    );
    for i in 0..2 {
        let t = thread(a, num(&truth, &format!("worker{i}.tid")));
        assert_eq!(
            t["cpus"],
            serde_json::json!([0]),
            "worker-{i}; {}",
            shown(a)
        );
    }
    services_match_truth(a, &truth);
}

#[test]
fn serialised_threads_on_one_cpu_lose_nothing_to_the_lock() {
    let _one_at_a_time = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/serialised.c", dir.path()) else {
        return;
    };
    let truth = record(dir.path(), &["--cpus", "0"], &exe, &["-t", "2"]);
    let report = report_json(dir.path(), &["run"]);
    let a = &report["activity"];
    eprintln!("measured (serialised on 1 CPU): {}", shown(a));
    let active = f(a, "active_threads");
    let running = f(a, "running_threads");
    // One CPU can run only one thread anyway: the lock costs no parallelism, m − A ≈ 0. A is
    // a little above 1: the waiter, woken by the unlock, preempts the releaser, which then
    // waits on the run queue before it gets to block on the lock. Measured 1.05–1.20 alone
    // and 1.07–1.31 beside CPU hogs and other builds (the program getting 23–71 % of CPU 0),
    // so the excess is not a function of the load. The upper bound is there to catch the
    // lock's blocked waiter counted as active, which gives A ≈ 2: 1.5 is midway, well clear
    // of both.
    assert!(
        (0.8..=1.5).contains(&active),
        "A = {active:.3} on 1 CPU, expected 0.8..1.5 (truth wall {} ns); {}",
        truth["wall_ns"],
        shown(a)
    );
    assert!(running <= 1.1, "τ / T above 1 on 1 CPU; {}", shown(a));
}

/// Starts `independent -t 2 -w 3000` (3 s of compute per thread) and waits until its two
/// workers exist.
fn start_independent(exe: &Path) -> KillOnDrop {
    let child = Command::new(exe)
        .args(["-t", "2", "-w", "3000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let running = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.count())
            .unwrap_or(0);
        if tasks >= 3 {
            return running;
        }
        assert!(
            Instant::now() < deadline,
            "independent (pid {pid}) did not start its 2 workers within 5 s ({tasks} tasks)"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn attaching_to_a_running_program_samples_its_workers() {
    let _one_at_a_time = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    let program = start_independent(&exe);
    let pid = program.0.id().to_string();
    let out = contend_in(
        dir.path(),
        &["record", "-p", &pid, "--duration", "0.5", "-o", "run"],
    );
    assert!(
        out.status.success(),
        "record -p {pid} --duration 0.5: {:?}: {}",
        out.status,
        stderr(&out)
    );
    let m = meta(&dir.path().join("run"));
    assert_eq!(m["attached"], true, "meta.json: {m}");
    let report = report_json(dir.path(), &["run"]);
    let a = &report["activity"];
    eprintln!("measured (attached): {}", shown(a));
    // The program is still running: both workers were sampled, each getting some CPU.
    for name in ["worker-0", "worker-1"] {
        let t = a["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in the activity; {}", shown(a)));
        assert!(
            f(t, "service_ns") > 0.0,
            "{name} got no service; {}",
            shown(a)
        );
    }
    // Recording stopped after the duration, not when the program (3 s of work) ended.
    let elapsed = f(a, "elapsed_ns");
    assert!(
        (0.4e9..2.5e9).contains(&elapsed),
        "attached for {:.1} ms with --duration 0.5; {}",
        elapsed / 1e6,
        shown(a)
    );
    drop(program);
}

#[test]
fn attaching_to_a_missing_pid_is_refused() {
    // A pid that does not exist: counting down from the largest the kernel hands out.
    let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(32768);
    let pid = (2..max)
        .rev()
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = contend_in(dir.path(), &["record", "-p", &pid, "-o", "run"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "record -p {pid}: {err}");
    assert_eq!(err.lines().count(), 1, "one line expected: {err:?}");
    assert!(err.contains(&pid), "the message names pid {pid}: {err:?}");
}

#[test]
fn ctrl_c_stops_an_attached_recording_and_keeps_it() {
    let _one_at_a_time = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    let program = start_independent(&exe);
    let pid = program.0.id().to_string();
    let mut recorder = Command::new(CONTEND)
        .args(["record", "-p", &pid, "-o", "run"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: sends SIGINT to the recorder this test started (and has not reaped).
    assert_eq!(unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) }, 0);
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = recorder.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(2) {
            let _ = recorder.kill();
            let _ = recorder.wait();
            panic!("contend record -p did not stop within 2 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    use std::io::Read;
    recorder
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "after SIGINT: {status:?}: {err}");
    let m = meta(&dir.path().join("run"));
    let outcome = m["outcome"].as_str().unwrap_or("");
    assert!(outcome.contains("Ctrl-C"), "outcome {outcome:?}; {err}");
    assert_eq!(m["attached"], true, "meta.json: {m}");
    // The program was not touched: it is still running.
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the recorded program is gone after Ctrl-C to the recorder"
    );
    drop(program);
}

#[test]
fn a_program_that_cannot_start_exits_127_and_keeps_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = contend_in(
        dir.path(),
        &["record", "-o", "run", "--", "/nonexistent/prog"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert_eq!(err.lines().count(), 1, "one line expected: {err:?}");
    assert!(
        err.contains("/nonexistent/prog"),
        "names the program: {err:?}"
    );
    let m = meta(&dir.path().join("run"));
    let outcome = m["outcome"].as_str().unwrap_or("");
    assert!(
        outcome.starts_with("could not start"),
        "outcome {outcome:?}"
    );
}

#[test]
fn a_program_killed_by_sigkill_makes_record_exit_137() {
    let dir = tempfile::tempdir().unwrap();
    let out = contend_in(
        dir.path(),
        &["record", "-o", "run", "--", "sh", "-c", "kill -KILL $$"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(137), "{err}");
    assert!(err.contains("killed by signal 9"), "{err:?}");
    let m = meta(&dir.path().join("run"));
    assert_eq!(m["exit_status"], 137, "meta.json: {m}");
}

#[test]
fn more_cores_than_the_machine_has_are_refused() {
    let cores = (online_cpus() + 1).to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = contend_in(
        dir.path(),
        &[
            "record",
            "--cores",
            &cores,
            "--fill",
            "socket-first",
            "-o",
            "run",
            "--",
            "true",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "--cores {cores}: {err}");
    assert!(
        err.contains(&format!("--cores {cores}")) && err.contains("CPU"),
        "names the problem: {err:?}"
    );
    assert!(
        !dir.path().join("run").exists(),
        "nothing recorded for a refused placement"
    );
}

#[test]
fn sigterm_to_record_reaches_the_program_and_the_run_is_kept() {
    // `sleep` stands for a long-running program; contend gets SIGTERM (as from a job
    // scheduler or `timeout`), passes it on, and still writes the run.
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(CONTEND)
        .args(["record", "-o", "run", "--", "sleep", "30"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "contend took {:?} to stop",
        started.elapsed()
    );
    // The program died of the SIGTERM it was passed: 128 + 15.
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(err.contains("passed it on to the program"), "{err}");
    let m = meta(&dir.path().join("run"));
    assert_eq!(m["exit_status"], 143, "meta.json: {m}");
    assert!(
        m["outcome"].as_str().unwrap_or("").contains("signal 15"),
        "meta.json: {m}"
    );
    assert!(
        !m["streams"].as_array().unwrap().is_empty(),
        "the sampled stream is listed: {m}"
    );
}

#[test]
fn a_recorded_run_exports_its_threads_to_perfetto_and_an_svg_timeline() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/scaling/independent.c", dir.path()) else {
        return;
    };
    let steal_before = steal_ns();
    // 300 ms of CPU time per worker (independent.c calibrates its work on the thread's CPU
    // clock): long against what the sampler cannot see, the end of a thread's life.
    let truth = record(dir.path(), &[], &exe, &["-t", "2", "-w", "300"]);
    let steal = steal_ns() - steal_before;
    let out = contend_in(
        dir.path(),
        &[
            "report",
            "run",
            "--perfetto",
            "run.pftrace",
            "--timeline",
            "threads.svg",
        ],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("counter tracks"), "{err}");
    let svg = std::fs::read_to_string(dir.path().join("threads.svg")).unwrap();
    assert!(svg.contains(">running</text>") && svg.contains("threads alive"));
    // Each worker has its "on CPU (%)" and "waiting for a CPU (%)" counters: one point per
    // sampling interval, its share of that interval, then a 0 that ends the track. Single
    // points are lumpy (schedstat adds a wait when the wait ends, CPU time at ticks and
    // switches: shares of 0 and 300 % next to each other under load), so the check is on
    // what they add up to: each counter integrated over time (value × the time to the next
    // point), which must give back the thread's CPU time and its runnable time.
    let Some(rows) = trace_processor(
        &dir.path().join("run.pftrace"),
        &[
            "select thread, track, count(*) as n, sum(value * dur) / 100 as integral_ns \
             from (select t.name as thread, k.name as track, c.value as value, \
                   lead(c.ts) over (partition by c.track_id order by c.ts) - c.ts as dur \
                   from counter c join thread_counter_track k on c.track_id = k.id \
                   join thread t using (utid) \
                   where k.name in ('on CPU (%)', 'waiting for a CPU (%)')) \
             where dur is not null group by thread, track order by thread, track",
        ],
    ) else {
        return;
    };
    let integral = |tid: f64, track: &str| -> (f64, f64) {
        let row = rows[0]
            .iter()
            .find(|r| {
                r["track"] == track
                    && r["thread"]
                        .as_str()
                        .is_some_and(|t| t.ends_with(&format!("({tid})")))
            })
            .unwrap_or_else(|| panic!("no {track:?} counter of thread {tid}: {:?}", rows[0]));
        (f(row, "integral_ns"), f(row, "n"))
    };
    // What the sampler itself recorded for each thread, which the counters are drawn from.
    let report = report_json(dir.path(), &["run"]);
    let a = &report["activity"];
    let sampler = sampler_shown(dir.path(), a);
    for i in 0..2 {
        let tid = num(&truth, &format!("worker{i}.tid"));
        let (on, n) = integral(tid, "on CPU (%)");
        let (waiting, _) = integral(tid, "waiting for a CPU (%)");
        // The truth: the worker's own CPU time, and its life from the start line (it never
        // sleeps, so it is runnable all of it). Under a CPU hog it is on a CPU about half of
        // that, idle nearly all; the counters must follow it either way.
        let cpu = num(&truth, &format!("worker{i}.cpu_ns"));
        let busy = num(&truth, &format!("worker{i}.busy_ns"));
        let t = thread(a, tid);
        let (service, runq) = (f(t, "service_ns"), f(t, "runq_wait_ns"));
        eprintln!(
            "worker-{i}: on CPU {:.1} ms + waiting {:.1} ms over {n} intervals (sampled: \
             service {:.1} ms, run queue {:.1} ms); its own CPU time {:.1} ms in {:.1} ms \
             ({:.0} % on CPU by its clock, {:.0} % by the counter); {sampler}",
            on / 1e6,
            waiting / 1e6,
            service / 1e6,
            runq / 1e6,
            cpu / 1e6,
            busy / 1e6,
            100.0 * cpu / busy,
            100.0 * on / busy
        );
        // The export loses nothing: its counters integrate exactly (but for float rounding,
        // 1 µs) to the samples they are drawn from, whatever the load.
        for (what, counter, sampled) in [("on CPU", on, service), ("waiting", waiting, runq)] {
            assert!(
                (counter - sampled).abs() <= 1e3,
                "worker-{i}: the {what:?} counter adds up to {:.3} ms, the samples it is drawn \
                 from to {:.3} ms: the export lost or added {:.3} ms; {sampler}; {}",
                counter / 1e6,
                sampled / 1e6,
                (sampled - counter) / 1e6,
                shown(a)
            );
        }
        // Precondition: enough points for the integrals to mean something. 300 ms of its CPU
        // time is ≥ 300 ms of life, 30 rounds of 10 ms if the sampler were never delayed; but
        // it shares 2 CPUs with two workers that never sleep, and each wake-up was seen to
        // come 5–8 ms late (rounds every ~15 ms, none "late" by a whole interval: 19 points).
        // 10 points is what a sampler woken once per 30 ms would still give.
        assert!(
            n >= 10.0,
            "worker-{i}: only {n} intervals sampled; {sampler}; {truth:?}"
        );
        // The samples miss the thread's time after the last round before it exits: one
        // interval plus the sampler's own wait for a CPU (up to ~40 ms of wall seen beside a
        // CPU hog, ~20 ms of a half-CPU thread's time): ≤ 7 % of 300 ms; 15 % as in
        // services_match_truth.
        assert!(
            (on - cpu).abs() <= 0.15 * cpu,
            "worker-{i}: the on-CPU counter adds up to {:.1} ms, its own CPU time is {:.1} ms \
             (limit ± 15 %); {sampler}; {truth:?}",
            on / 1e6,
            cpu / 1e6
        );
        // On a CPU or waiting for one, all its life, at any load. Less by the same unsampled
        // end (≤ 40 ms of ≥ 300 ms: 13 %, so 15 %) and what the hypervisor stole (steal_ns);
        // more by its time on a run queue before the start line, which a loaded machine can
        // make a few intervals long (15 % again).
        let (low, high) = (0.85 * busy - steal, 1.15 * busy);
        assert!(
            (low..=high).contains(&(on + waiting)),
            "worker-{i}: on CPU {:.1} ms + waiting {:.1} ms, not within {:.1}..{:.1} ms of its \
             {:.1} ms life (a thread that never sleeps; steal {:.1} ms); {truth:?}",
            on / 1e6,
            waiting / 1e6,
            low / 1e6,
            high / 1e6,
            busy / 1e6,
            steal / 1e6
        );
    }
}
