//! A Rust `std::sync::Mutex` that four threads fight over: each takes it 50 times and holds it
//! ~1 ms, busy (spinning on its own CPU clock, so the hold is CPU time, not a sleep). The
//! lock probe cannot see it (no pthread call); the off-CPU recorder sees its futex waits.
//!
//! Build: `rustc -O -g examples/waits/std_mutex.rs -o std_mutex` (std only).
//! Options: `-t THREADS` (4), `-n LOCKS_PER_THREAD` (50), `-u HOLD_US` (1000), `-H` (the
//! Mutex on the heap, from `Box::new`, instead of the static `HOT`).
//!
//! Truth line (examples/README.md): `hot.addr` and `hot.size` the Mutex's address and size
//! (its futex word lies inside it), and per thread `tN.tid`, `tN.lock_ns` (wall time inside
//! `lock()`, CLOCK_MONOTONIC), `tN.offcpu_ns` (of that, the time the thread was not on a CPU:
//! wall minus its own CPU clock), `tN.rundelay_ns` (of that, the time it was runnable but
//! waiting for a CPU, from `/proc/thread-self/schedstat`'s run_delay: after a wake-up, or
//! preempted inside the call), `tN.slow` (`lock()` calls that took over 50 µs: those that
//! waited).

use std::sync::{Barrier, Mutex};

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
    let (mut threads, mut n, mut hold_us, mut heap) = (4usize, 50u64, 1000u64, false);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || -> u64 {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("std_mutex: {a} takes a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "-t" => threads = value() as usize,
            "-n" => n = value(),
            "-u" => hold_us = value(),
            "-H" => heap = true,
            _ => {
                eprintln!("usage: std_mutex [-t THREADS] [-n LOCKS_PER_THREAD] [-u HOLD_US] [-H]");
                std::process::exit(2)
            }
        }
    }
    let hot: &'static Mutex<()> = if heap {
        Box::leak(Box::new(Mutex::new(())))
    } else {
        &HOT
    };
    let start = Barrier::new(threads);
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
                    for _ in 0..n {
                        let d0 = schedstat.as_ref().map_or(0, run_delay);
                        let (w0, c0) = (now(CLOCK_MONOTONIC), now(CLOCK_THREAD_CPUTIME_ID));
                        let guard = hot.lock().unwrap();
                        let (w1, c1) = (now(CLOCK_MONOTONIC), now(CLOCK_THREAD_CPUTIME_ID));
                        let d1 = schedstat.as_ref().map_or(0, run_delay);
                        m.rundelay_ns += d1.saturating_sub(d0);
                        let wall = w1 - w0;
                        m.lock_ns += wall;
                        m.offcpu_ns += wall.saturating_sub(c1 - c0);
                        m.slow += u64::from(wall > 50_000);
                        let until = c1 + hold_us * 1000;
                        while now(CLOCK_THREAD_CPUTIME_ID) < until {
                            std::hint::spin_loop();
                        }
                        drop(guard); // the critical section ends: where the waiters are woken
                    }
                    m
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut line = format!(
        "truth program=std_mutex threads={threads} locks_per_thread={n} hold_ns={} hot.heap={} hot.addr={:p} hot.size={}",
        hold_us * 1000,
        u8::from(heap),
        hot as *const _,
        std::mem::size_of_val(hot)
    );
    for (i, m) in results.iter().enumerate() {
        line.push_str(&format!(
            " t{i}.tid={} t{i}.lock_ns={} t{i}.offcpu_ns={} t{i}.rundelay_ns={} t{i}.slow={}",
            m.tid, m.lock_ns, m.offcpu_ns, m.rundelay_ns, m.slow
        ));
    }
    println!("{line}");
}
