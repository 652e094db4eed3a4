//! A broadcast: `WAITERS` threads wait on one `std::sync::Condvar` for a new round, and a
//! publisher wakes them all with one `notify_all()` per round (std's futex Condvar: one
//! `FUTEX_WAKE` of every waiter). Go's mutex profile, and contend's holder charge, charge the
//! notify with every waiter's wait: 6 waiters blocked 20 ms = 120 ms.
//!
//! Build: `rustc -O -g examples/waits/notify_all.rs -o notify_all` (std only).
//! Options: `-w WAITERS` (6), `-r ROUNDS` (5), `-s SLEEP_MS` (20: how long the publisher lets
//! the waiters lie blocked before each notify, after all of them are inside `wait()`).
//!
//! Truth line (examples/README.md): `waiters`, `rounds`, `cv.addr` and `cv.size` (the
//! Condvar: its futex word lies inside it), and `wait_ns`: the waiters' total wall time inside
//! `wait()` (CLOCK_MONOTONIC, every waiter and round), `waits`: the `wait()` calls.

use std::sync::{Condvar, Mutex};

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

fn now() -> u64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC (1) exists on every Linux.
    unsafe { clock_gettime(1, &mut ts) };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

/// The round being waited for, and how many waiters are inside `wait()` for it.
struct State {
    round: u64,
    ready: usize,
}

static STATE: Mutex<State> = Mutex::new(State { round: 0, ready: 0 });
static CV: Condvar = Condvar::new();

fn main() {
    let (mut waiters, mut rounds, mut sleep_ms) = (6usize, 5u64, 20u64);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || -> u64 {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("notify_all: {a} takes a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "-w" => waiters = value() as usize,
            "-r" => rounds = value(),
            "-s" => sleep_ms = value(),
            _ => {
                eprintln!("usage: notify_all [-w WAITERS] [-r ROUNDS] [-s SLEEP_MS]");
                std::process::exit(2)
            }
        }
    }
    let (wait_ns, waits) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..waiters)
            .map(|_| {
                s.spawn(move || {
                    let (mut wait_ns, mut waits) = (0u64, 0u64);
                    for r in 1..=rounds {
                        let mut st = STATE.lock().unwrap();
                        st.ready += 1;
                        while st.round < r {
                            let t0 = now();
                            st = CV.wait(st).unwrap();
                            wait_ns += now() - t0;
                            waits += 1;
                        }
                    }
                    (wait_ns, waits)
                })
            })
            .collect();
        for r in 1..=rounds {
            // Every waiter is inside wait() for round r (it counted itself under the lock,
            // and wait() releases the lock only once it waits): let them block, then wake
            // them all at once.
            loop {
                let st = STATE.lock().unwrap();
                if st.ready >= waiters * r as usize {
                    break;
                }
                drop(st);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::thread::sleep(std::time::Duration::from_millis(sleep_ms));
            STATE.lock().unwrap().round = r;
            CV.notify_all(); // the broadcast: charged every waiter it woke
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), |(a, b), (w, n)| (a + w, b + n))
    });
    println!(
        "truth program=notify_all waiters={waiters} rounds={rounds} sleep_ns={} cv.addr={:p} cv.size={} wait_ns={wait_ns} waits={waits}",
        sleep_ms * 1_000_000,
        &CV as *const _,
        std::mem::size_of_val(&CV)
    );
}
