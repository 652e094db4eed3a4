//! Cost of recording one event with `StreamWriter`, and of validating it with the reader.
//! Run: `cargo run --release -p trace --example writer_cost`. Prints ns and bytes per event;
//! the figures go to docs/benchmarks.md.

use std::time::Instant;
use trace::{ClockSource, EventKind, Header, Record, Stream, StreamKind, StreamWriter};

const EVENTS: u64 = 20_000_000;

fn mark(ts: u64) -> Record {
    Record {
        ts,
        kind: EventKind::Mark,
        aux: 0,
        site: 0,
        obj: trace::NO_STRING,
    }
}

/// Writes `EVENTS` marks into `sink`; returns ns per event and the sink.
fn write_all<S: trace::StreamSink>(sink: S) -> (f64, S) {
    let header = Header {
        kind: StreamKind::Thread,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 1,
        tid: 1,
        rank: -1,
        base_time: 0,
    };
    let mut w = StreamWriter::new(sink, &header, trace::DEFAULT_CHUNK_EVENTS).unwrap();
    assert_eq!(w.intern_site(0x401000), 0);
    let t0 = Instant::now();
    for i in 0..EVENTS {
        w.push(&mark(i));
    }
    let sink = w.finish_into(EVENTS).unwrap();
    (t0.elapsed().as_nanos() as f64 / EVENTS as f64, sink)
}

fn best_of_5(mut run: impl FnMut() -> f64) -> f64 {
    (0..5).map(|_| run()).fold(f64::MAX, f64::min)
}

fn main() {
    // Reference: the same 16-byte stores into a reused buffer, with no writer at all.
    let reference = best_of_5(|| {
        let mut v: Vec<u8> = Vec::with_capacity(65536 + 64);
        let t0 = Instant::now();
        for i in 0..EVENTS {
            if v.len() >= 65536 {
                std::hint::black_box(&v);
                v.clear();
            }
            v.extend_from_slice(&mark(i).encode());
        }
        t0.elapsed().as_nanos() as f64 / EVENTS as f64
    });
    let null_sink = best_of_5(|| write_all(std::io::sink()).0);
    // A real file, as the probe writes: one write(2) per 64 KiB chunk into the page cache.
    let file_path =
        std::env::temp_dir().join(format!("contend-writer-cost-{}.cst", std::process::id()));
    let to_file = best_of_5(|| write_all(std::fs::File::create(&file_path).unwrap()).0);
    let _ = std::fs::remove_file(&file_path);
    let mut bytes = Vec::new();
    let growing = best_of_5(|| {
        let (ns, out) = write_all(Vec::with_capacity(EVENTS as usize * 17));
        bytes = out;
        ns
    });
    let t0 = Instant::now();
    let s = Stream::parse(&bytes).unwrap();
    let sum: u64 = s.events().map(|r| r.ts).sum();
    let read = t0.elapsed().as_nanos() as f64 / EVENTS as f64;
    assert_eq!(sum, EVENTS * (EVENTS - 1) / 2);

    println!("reference (bare stores): {reference:.2} ns/event");
    println!("write, null sink:        {null_sink:.2} ns/event");
    println!("write, file in $TMPDIR:  {to_file:.2} ns/event");
    println!("write, growing Vec:      {growing:.2} ns/event (includes its page faults)");
    println!(
        "validate + iterate:      {read:.2} ns/event ({:.0} M events/s)",
        1e3 / read
    );
    println!(
        "bytes per event:         {:.3} ({EVENTS} events; best of 5 runs each)",
        bytes.len() as f64 / EVENTS as f64
    );
}
