//! Worst case for the off-CPU recorder: two threads hand a token back and forth through a
//! std Mutex + Condvar (futex waits, no pthread call), so every hand-over is a block and a
//! wake-up. Prints `ns_per_round_trip N` (two blocks per round trip). `scripts/bench-waits.sh`
//! runs it with and without the recorder.
//!
//! Build: `rustc -O --edition 2021 benches/futex_pingpong.rs`; argument: round trips (20000).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let pair = Arc::new((Mutex::new(0u64), Condvar::new()));
    let other = Arc::clone(&pair);
    let start = Instant::now();
    let t = std::thread::spawn(move || {
        let (m, c) = &*other;
        let mut turn = m.lock().unwrap();
        for i in 0..rounds {
            while *turn != 2 * i + 1 {
                turn = c.wait(turn).unwrap();
            }
            *turn += 1;
            c.notify_one();
        }
    });
    let (m, c) = &*pair;
    let mut turn = m.lock().unwrap();
    for i in 0..rounds {
        while *turn != 2 * i {
            turn = c.wait(turn).unwrap();
        }
        *turn += 1;
        c.notify_one();
    }
    while *turn != 2 * rounds {
        turn = c.wait(turn).unwrap();
    }
    drop(turn);
    t.join().unwrap();
    println!(
        "ns_per_round_trip {:.0}",
        start.elapsed().as_nanos() as f64 / rounds as f64
    );
}
