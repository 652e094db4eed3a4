//! A `parking_lot::Mutex` that four threads fight over: each takes it 50 times and holds it
//! ~1 ms, busy (spinning on its own CPU clock). parking_lot parks a waiting thread on a word
//! of its own (its thread data's futex), not on the lock: contend keys these waits by the
//! locking call site (the line that locks `HOT` below), not by a futex word.
//!
//! Build (parking_lot comes from the cargo registry, not from rustc alone): `cargo build
//! --offline --release -p testkit --example parking_lot_mutex` (testkit's Cargo.toml).
//! Options: `-t THREADS` (4), `-n LOCKS_PER_THREAD` (50), `-u HOLD_US` (1000).
//!
//! Truth line (examples/README.md): `hot.addr` the Mutex's address (no futex wait is on it),
//! `hot.line` the source line of the `lock()` call, and per thread `tN.tid`, `tN.lock_ns`
//! (wall time inside `lock()`, CLOCK_MONOTONIC), `tN.offcpu_ns` (of that, the time the thread
//! was not on a CPU: wall minus its own CPU clock), `tN.rundelay_ns` (of that, the time it
//! was runnable but waiting for a CPU, from `/proc/thread-self/schedstat`'s run_delay),
//! `tN.slow` (`lock()` calls that took over 50 µs: those that waited).

use parking_lot::Mutex;
use std::sync::Barrier;

static HOT: Mutex<()> = Mutex::new(());

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

const CLOCK_MONOTONIC: i32 = 1;
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

fn now(clock: i32) -> u64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid out-pointer; both clocks exist on every Linux.
    unsafe { clock_gettime(clock, &mut ts) };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

fn tid() -> u32 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

struct Measured {
    tid: u32,
    lock_ns: u64,
    offcpu_ns: u64,
    rundelay_ns: u64,
    slow: u64,
}

/// The thread's run_delay (ns waiting on a run queue), read from its open schedstat file.
fn run_delay(schedstat: &std::fs::File) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 128];
    let n = schedstat.read_at(&mut buf, 0).unwrap_or(0);
    std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let (mut threads, mut n, mut hold_us) = (4usize, 50u64, 1000u64);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || -> u64 {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("parking_lot_mutex: {a} takes a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "-t" => threads = value() as usize,
            "-n" => n = value(),
            "-u" => hold_us = value(),
            _ => {
                eprintln!(
                    "usage: parking_lot_mutex [-t THREADS] [-n LOCKS_PER_THREAD] [-u HOLD_US]"
                );
                std::process::exit(2)
            }
        }
    }
    let start = Barrier::new(threads);
    let mut lock_line = 0;
    let results: Vec<Measured> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let start = &start;
                s.spawn(move || {
                    let mut m = Measured {
                        tid: tid(),
                        lock_ns: 0,
                        offcpu_ns: 0,
                        rundelay_ns: 0,
                        slow: 0,
                    };
                    let schedstat = std::fs::File::open("/proc/thread-self/schedstat").ok();
                    start.wait();
                    let mut line = 0;
                    for _ in 0..n {
                        let d0 = schedstat.as_ref().map_or(0, run_delay);
                        let (w0, c0) = (now(CLOCK_MONOTONIC), now(CLOCK_THREAD_CPUTIME_ID));
                        let (guard, at) = (HOT.lock(), line!());
                        let (w1, c1) = (now(CLOCK_MONOTONIC), now(CLOCK_THREAD_CPUTIME_ID));
                        let d1 = schedstat.as_ref().map_or(0, run_delay);
                        line = at;
                        m.rundelay_ns += d1.saturating_sub(d0);
                        let wall = w1 - w0;
                        m.lock_ns += wall;
                        m.offcpu_ns += wall.saturating_sub(c1 - c0);
                        m.slow += u64::from(wall > 50_000);
                        let until = c1 + hold_us * 1000;
                        while now(CLOCK_THREAD_CPUTIME_ID) < until {
                            std::hint::spin_loop();
                        }
                        drop(guard);
                    }
                    (m, line)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let (m, line) = h.join().unwrap();
                lock_line = line;
                m
            })
            .collect()
    });
    let mut line = format!(
        "truth program=parking_lot_mutex threads={threads} locks_per_thread={n} hold_ns={} hot.addr={:p} hot.line={lock_line}",
        hold_us * 1000,
        &HOT as *const _,
    );
    for (i, m) in results.iter().enumerate() {
        line.push_str(&format!(
            " t{i}.tid={} t{i}.lock_ns={} t{i}.offcpu_ns={} t{i}.rundelay_ns={} t{i}.slow={}",
            m.tid, m.lock_ns, m.offcpu_ns, m.rundelay_ns, m.slow
        ));
    }
    println!("{line}");
}
