//! Writes a perf.data file of N memory samples (loads and stores of 4 threads over 1024 lines,
//! a quarter of the loads HITMs), to measure how fast `contend c2c import` and `contend c2c
//! report` go through a large file (docs/benchmarks.md).
//!
//! usage: cargo run --release -p observe --features perf-writer --example perf_data_synth -- N OUT

use observe::perfmem::data_source::*;
use observe::perfmem::writer::{intel_mem_events, PerfDataWriter, Sample};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(n), Some(out)) = (args.get(1).and_then(|s| s.parse::<u64>().ok()), args.get(2))
    else {
        eprintln!("usage: perf_data_synth N OUT");
        std::process::exit(2);
    };
    let mut w = PerfDataWriter::new(intel_mem_events());
    let pid = 1000;
    w.comm(pid, pid, "synth");
    w.mmap2(pid, 0x40_0000, 0x10000, 0, 5, 1, "/opt/synth");
    let hitm = DataSource::encode(OP_LOAD, LVL_HIT | LVL_L3, SNOOP_HITM, 0, 0, false, 0).0;
    let l1 = DataSource::encode(OP_LOAD, LVL_HIT | LVL_L1, 0, 0, 0, false, 0).0;
    let store = DataSource::encode(OP_STORE, LVL_HIT | LVL_L1, 0, 0, 0, false, 0).0;
    // A small deterministic generator: the file is the same for the same N.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let thread = (x % 4) as u32;
        let line = (x >> 8) % 1024;
        let store_sample = (x >> 20).is_multiple_of(3);
        let data_src = if store_sample {
            store
        } else if (x >> 24).is_multiple_of(4) {
            hitm
        } else {
            l1
        };
        w.sample(&Sample {
            event: usize::from(store_sample),
            ip: 0x40_0100 + u64::from(thread) * 16 + u64::from(store_sample),
            pid,
            tid: pid + thread,
            time: 1_000_000 + i * 100,
            addr: 0x100_0000 + line * 64 + u64::from(thread) * 8,
            cpu: thread % 2,
            period: 1000,
            weight: if store_sample {
                0
            } else {
                30 + (x >> 32) % 300
            },
            data_src,
        });
    }
    std::fs::write(out, w.finish()).expect("write the file");
}
