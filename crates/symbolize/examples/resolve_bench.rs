//! Resolution speed on a module with DWARF: this example's own executable (Rust, with the
//! standard library's line tables). Resolves 10 000 distinct code addresses spread over its
//! text, twice (different addresses each time), and prints the time of each pass: the first
//! includes loading the module (ELF, symbols, DWARF), the second is the steady state.
//!
//!     cargo run --release -p symbolize --example resolve_bench

use std::time::Instant;
use symbolize::{Maps, Precision, Symbolizer};

fn main() {
    let maps = Maps::parse(std::fs::read("/proc/self/maps").expect("read maps")).expect("parse");
    let exe = std::env::current_exe().expect("current_exe");
    let text = maps
        .entries()
        .iter()
        .filter(|e| e.perms.execute && e.path() == Some(exe.as_path()))
        .max_by_key(|e| e.end - e.start)
        .expect("executable text mapping");
    let n = 10_000u64;
    let span = text.end - text.start;
    let addrs = |shift: u64| -> Vec<u64> {
        (0..n)
            .map(|i| text.start + (span * i / n + shift) % span)
            .collect()
    };

    let mut s = Symbolizer::new(maps.clone());
    for (label, set) in [("first (includes load)", addrs(0)), ("second", addrs(7))] {
        let t = Instant::now();
        let frames: Vec<_> = set.iter().map(|&a| s.resolve_code(a)).collect();
        let dt = t.elapsed();
        let lines = frames
            .iter()
            .filter(|f| f.precision == Precision::Line)
            .count();
        println!(
            "{label}: {n} addresses in {:.1} ms ({:.2} µs each), {lines} with file:line",
            dt.as_secs_f64() * 1e3,
            dt.as_secs_f64() * 1e6 / n as f64
        );
    }
    for note in s.notes() {
        println!("note: {note}");
    }
}
