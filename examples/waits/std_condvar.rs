//! A Rust `std::sync::Condvar` producer/consumer: one producer hands out items, one every
//! ~0.5 ms (a sleep), to consumers that wait on the Condvar while the queue is empty. The
//! consumers' waits are condition waits, not lock waits: the Mutex is held for a few
//! instructions only. The lock probe cannot see either (no pthread call).
//!
//! Build: `rustc -O -g examples/waits/std_condvar.rs -o std_condvar` (std only).
//! Options: `-c CONSUMERS` (2), `-n ITEMS` (200), `-u GAP_US` (500, the producer's sleep).
//!
//! Truth line (examples/README.md): `cond.addr`/`cond.size` and `queue.addr`/`queue.size`
//! (the Condvar and the Mutex; their futex words lie inside them), and per consumer `cN.tid`,
//! `cN.waits` (calls of `Condvar::wait`), `cN.wait_ns` (wall time inside them,
//! CLOCK_MONOTONIC), `cN.items` (items taken).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

static QUEUE: Mutex<(VecDeque<u64>, bool)> = Mutex::new((VecDeque::new(), false));
static READY: Condvar = Condvar::new();

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
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC exists on every Linux.
    unsafe { clock_gettime(1, &mut ts) };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

fn tid() -> u32 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

struct Consumed {
    tid: u32,
    waits: u64,
    wait_ns: u64,
    items: u64,
}

fn consume() -> Consumed {
    let mut c = Consumed {
        tid: tid(),
        waits: 0,
        wait_ns: 0,
        items: 0,
    };
    let mut q = QUEUE.lock().unwrap();
    loop {
        if let Some(_item) = q.0.pop_front() {
            c.items += 1;
            continue;
        }
        if q.1 {
            return c;
        }
        let t0 = now();
        q = READY.wait(q).unwrap(); // the condition wait
        c.wait_ns += now() - t0;
        c.waits += 1;
    }
}

fn main() {
    let (mut consumers, mut items, mut gap_us) = (2usize, 200u64, 500u64);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || -> u64 {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("std_condvar: {a} takes a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "-c" => consumers = value() as usize,
            "-n" => items = value(),
            "-u" => gap_us = value(),
            _ => {
                eprintln!("usage: std_condvar [-c CONSUMERS] [-n ITEMS] [-u GAP_US]");
                std::process::exit(2)
            }
        }
    }
    let results: Vec<Consumed> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..consumers).map(|_| s.spawn(consume)).collect();
        for i in 0..items {
            std::thread::sleep(Duration::from_micros(gap_us));
            QUEUE.lock().unwrap().0.push_back(i);
            READY.notify_one();
        }
        QUEUE.lock().unwrap().1 = true;
        READY.notify_all();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut line = format!(
        "truth program=std_condvar consumers={consumers} items={items} gap_ns={} cond.addr={:p} cond.size={} queue.addr={:p} queue.size={}",
        gap_us * 1000,
        &READY as *const _,
        std::mem::size_of_val(&READY),
        &QUEUE as *const _,
        std::mem::size_of_val(&QUEUE)
    );
    for (i, c) in results.iter().enumerate() {
        line.push_str(&format!(
            " c{i}.tid={} c{i}.waits={} c{i}.wait_ns={} c{i}.items={}",
            c.tid, c.waits, c.wait_ns, c.items
        ));
    }
    println!("{line}");
}
