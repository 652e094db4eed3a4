//! Cost of recording one event with `StreamWriter`, and of validating it with the reader.
//! Run: `cargo run --release -p trace --example writer_cost`. Prints ns per event and bytes per
//! event; the figures go to docs/benchmarks.md.

use std::time::Instant;
use trace::{ClockSource, EventKind, Header, Record, Stream, StreamKind, StreamWriter};

fn main() {
    let n: u64 = 20_000_000;
    let header = Header {
        kind: StreamKind::Thread,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 1,
        tid: 1,
        rank: -1,
        base_time: 0,
    };
    let mut best_write = f64::MAX;
    let mut bytes = Vec::new();
    for _ in 0..5 {
        let mut out = Vec::with_capacity((n as usize) * 17);
        let mut w = StreamWriter::new(&mut out, &header, trace::DEFAULT_CHUNK_EVENTS).unwrap();
        let site = w.intern_site(0x401000);
        let t0 = Instant::now();
        for i in 0..n {
            w.push(&Record {
                ts: i,
                kind: EventKind::Mark,
                aux: 0,
                site,
                obj: trace::NO_STRING,
            });
        }
        w.finish(n).unwrap();
        best_write = best_write.min(t0.elapsed().as_nanos() as f64 / n as f64);
        bytes = out;
    }
    // The same into a sink that discards: the writer's own cost, without memory growth.
    let mut best_sink = f64::MAX;
    for _ in 0..5 {
        let mut w =
            StreamWriter::new(std::io::sink(), &header, trace::DEFAULT_CHUNK_EVENTS).unwrap();
        let t0 = Instant::now();
        for i in 0..n {
            w.push(&Record {
                ts: i,
                kind: EventKind::Mark,
                aux: 0,
                site: 0,
                obj: trace::NO_STRING,
            });
        }
        w.finish(n).unwrap();
        best_sink = best_sink.min(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    // Reference: the same 16-byte stores into a reused buffer, with no writer at all.
    let mut v: Vec<u8> = Vec::with_capacity(65536 + 64);
    let t0 = Instant::now();
    for i in 0..n {
        if v.len() >= 65536 {
            std::hint::black_box(&v);
            v.clear();
        }
        let r = Record {
            ts: i,
            kind: EventKind::Mark,
            aux: 0,
            site: 0,
            obj: trace::NO_STRING,
        };
        v.extend_from_slice(&r.encode());
    }
    println!(
        "reference (bare stores): {:.2} ns/event",
        t0.elapsed().as_nanos() as f64 / n as f64
    );
    println!("write, null sink:       {best_sink:.2} ns/event (best of 5)");
    let t0 = Instant::now();
    let s = Stream::parse(&bytes).unwrap();
    let sum: u64 = s.events().map(|r| r.ts).sum();
    let read = t0.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(sum, n * (n - 1) / 2);
    println!("write, growing Vec:    {best_write:.2} ns/event (best of 5; includes page faults)");
    println!(
        "validate + iterate:    {read:.2} ns/event ({:.0} M events/s)",
        1e3 / read
    );
    println!(
        "bytes per event:       {:.3} ({n} events)",
        bytes.len() as f64 / n as f64
    );
}
