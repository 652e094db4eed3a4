//! Writes a few valid streams into a directory, to seed the stream-reader fuzzer's corpus.
//! Run by scripts/fuzz.sh: `cargo run -p trace --example fuzz_seeds -- DIR`.

use trace::{ClockSource, EventKind, Header, Record, StreamKind, StreamWriter};

fn stream(events: u32, chunk: usize) -> Vec<u8> {
    let header = Header {
        kind: StreamKind::Thread,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 100,
        tid: 101,
        rank: -1,
        base_time: 1_000,
    };
    let mut w = StreamWriter::new(Vec::new(), &header, chunk).expect("in memory");
    for i in 0..events {
        let label = w.intern_string(if i % 2 == 0 { "even" } else { "odd" });
        let site = w.intern_site(0x400000 + u64::from(i % 3) * 16);
        w.push(&Record {
            ts: 1_000 + u64::from(i) * 10,
            kind: EventKind::Mark,
            aux: (i % 256) as u8,
            site,
            obj: label,
        });
    }
    w.finish_into(99_999).expect("in memory")
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: fuzz_seeds DIR");
    for (name, events, chunk) in [("small", 3, 2), ("tables", 40, 8), ("empty", 0, 4)] {
        std::fs::write(std::path::Path::new(&dir).join(name), stream(events, chunk))
            .expect("writing a seed");
    }
}
