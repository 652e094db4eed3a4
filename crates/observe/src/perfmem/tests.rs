//! The reader on files whose every sample is known (written by [`super::writer`]), on a file
//! perf itself recorded on this machine, and on damaged files.

use super::writer::scenario::*;
use super::*;

#[test]
fn a_constructed_file_reads_back_sample_by_sample() {
    let mem = read(&scenario()).unwrap();
    assert_eq!(mem.events, ["cpu/mem-loads,ldlat=30/P", "cpu/mem-stores/P"]);
    assert_eq!(mem.samples.len(), 2 * 60 + 60 + 2);
    assert_eq!(mem.without_address, 1);
    assert_eq!(mem.lost, 7);
    assert_eq!(mem.malformed, 0);
    assert_eq!(mem.commands[&PID], "fs_demo");
    assert_eq!(mem.mappings[&PID].len(), 2);
    let first = &mem.samples[0];
    assert_eq!((first.pid, first.tid, first.cpu), (PID, PID + 1, Some(0)));
    assert_eq!(
        (first.addr, first.ip, first.period, first.weight),
        (FALSE_LINE, 0x40_0100, 4000, Some(200))
    );
    assert_eq!(first.source.transfer(), Transfer::LocalHitm);
    let maps = maps_text(&mem.mappings[&PID]);
    assert!(
        maps.starts_with("400000-401000 r-xp 00000000 08:01 77 /opt/fs_demo\n"),
        "{maps}"
    );
    assert!(
        maps.contains("601000-602000 rw-p 00001000 08:01 77 /opt/fs_demo"),
        "{maps}"
    );
}

#[test]
fn samples_become_the_sharing_model() {
    let mem = read(&scenario()).unwrap();
    let procs = to_sharing(&mem, 64, "fallback");
    assert_eq!(procs.len(), 1);
    let p = &procs[0];
    p.validate().unwrap();
    assert_eq!(p.program, "fs_demo");
    // Threads in order of first sample; the main thread (no memory sample with an address) absent.
    assert_eq!(
        p.threads.iter().map(|t| t.tid).collect::<Vec<_>>(),
        [PID + 1, PID + 2]
    );
    let pmu = p.pmu.as_ref().unwrap();
    assert_eq!((pmu.hitm_local, pmu.hitm_remote, pmu.peer), (95, 5, 0));
    assert_eq!((pmu.load_samples, pmu.store_samples), (141, 41));
    // Two lines: the quiet one has a writer and another thread, so it is kept too.
    let addrs: Vec<u64> = p.lines.iter().map(|l| l.address).collect();
    assert_eq!(addrs, [FALSE_LINE, TRUE_LINE, QUIET_LINE]);
    let fl = &p.lines[0];
    let t1_loads = fl
        .accesses
        .iter()
        .find(|a| a.thread == 0 && a.kind == AccessKind::Read)
        .unwrap();
    assert_eq!(
        (t1_loads.offset, t1_loads.count, t1_loads.transfers),
        (0, 40 * 4000, 30 * 4000)
    );
    let raw = t1_loads.pmu.as_ref().unwrap();
    assert_eq!(
        (
            raw.samples,
            raw.hitm_local,
            raw.latency_samples,
            raw.latency_cycles
        ),
        (40, 30, 40, 8000)
    );
    let tl = &p.lines[1];
    assert!(tl
        .accesses
        .iter()
        .all(|a| a.kind == AccessKind::AtomicWrite && a.offset == 0));
    assert_eq!(p.totals.transfers, 100 * 4000);
}

use trace::sharing::AccessKind;

#[test]
fn a_perf_record_file_of_this_machine_has_no_memory_samples() {
    // `perf record -e cpu-clock -c 100000 -d -W --sample-cpu` on this KVM guest (no PEBS): real
    // samples with ADDR, WEIGHT and DATA_SRC, the data source "not available".
    let bytes = include_bytes!("../../../../fixtures/perf/cpu-clock-no-memory-sampling.data");
    let mem = read(bytes).unwrap();
    assert!(mem.samples.is_empty());
    assert!(mem.other_samples > 100, "{}", mem.other_samples);
    assert_eq!(mem.malformed, 0);
    assert_eq!(mem.events.len(), 1);
    assert!(mem.events[0].contains("cpu-clock"), "{:?}", mem.events);
}

#[test]
fn damaged_files_are_refused_or_counted_never_a_panic() {
    let good = scenario();
    assert!(matches!(read(b"hello"), Err(PerfDataError::NotPerfData)));
    assert!(matches!(read(&good[..60]), Err(PerfDataError::Corrupt(_))));
    // Cut inside the data section: the data section runs past the end.
    let e = read(&good[..good.len() / 2]).unwrap_err().to_string();
    assert!(e.contains("runs past the end"), "{e}");
    // A huge data section size.
    let mut huge = good.clone();
    huge[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(read(&huge), Err(PerfDataError::Corrupt(_))));
    // Found by fuzzing: attribute entries of 0 bytes (a division by zero in the parser), and
    // an EVENT_DESC section claiming 4 billion events (an allocation of that many).
    let mut zero = good.clone();
    zero[16..24].copy_from_slice(&0u64.to_le_bytes());
    assert!(read(&zero)
        .unwrap_err()
        .to_string()
        .contains("attribute entries of 0 bytes"));
    let desc_at = {
        let data_end = (u64::from_le_bytes(good[40..48].try_into().unwrap())
            + u64::from_le_bytes(good[48..56].try_into().unwrap())) as usize;
        // The second feature (NRCPUS is first) is EVENT_DESC.
        u64::from_le_bytes(good[data_end + 16..data_end + 24].try_into().unwrap()) as usize
    };
    let mut many = good.clone();
    many[desc_at..desc_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(read(&many)
        .unwrap_err()
        .to_string()
        .contains("feature section 12"));
    let mut pipe = good.clone();
    pipe[8..16].copy_from_slice(&16u64.to_le_bytes());
    assert!(matches!(read(&pipe), Err(PerfDataError::Pipe)));
    // Every single-byte flip of the first 4 KiB: an error or a result, never a panic.
    for i in 0..good.len().min(4096) {
        let mut b = good.clone();
        b[i] ^= 0xff;
        let _ = read(&b);
    }
}

#[test]
fn sample_bodies_follow_the_sample_type() {
    // IP | TID | ADDR | WEIGHT_STRUCT | DATA_SRC: var1_dw is the latency.
    let st = 1 | (1 << 1) | (1 << 3) | (1 << 24) | (1 << 15);
    let mut body = Vec::new();
    for v in [
        0x1234u64,
        (7u64 << 32) | 5,
        0xdead,
        (9u64 << 32) | 321,
        0x42,
    ] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    let f = parse_sample(&body, st, 0, 0, false).unwrap();
    assert_eq!(
        (f.ip, f.pid, f.tid, f.addr),
        (Some(0x1234), Some(5), Some(7), Some(0xdead))
    );
    assert_eq!((f.weight, f.data_src), (Some(321), Some(0x42)));
    assert_eq!(parse_sample(&body[..32], st, 0, 0, false), None);
    // READ with a group of 2 values and ids, then DATA_SRC.
    let st = (1 << 4) | (1 << 15);
    let mut body = Vec::new();
    for v in [2u64, 10, 1, 20, 2, 0x99] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(
        parse_sample(&body, st, 8 | 4, 0, false).unwrap().data_src,
        Some(0x99)
    );
}

use super::writer::{Event, PerfDataWriter, Sample};

fn one_event() -> PerfDataWriter {
    PerfDataWriter::new(vec![Event {
        name: "ibs_op//".into(),
        attr_type: 11,
        config: 0,
    }])
}

#[test]
fn aux_traces_and_compressed_records_are_refused_by_name() {
    let mut w = one_event();
    w.record_misc(71, 0, &[0u8; 40]); // PERF_RECORD_AUXTRACE
    assert!(matches!(read(&w.finish()), Err(PerfDataError::AuxTrace)));
    let mut w = one_event();
    w.record_misc(81, 0, &[0u8; 8]); // PERF_RECORD_COMPRESSED
    assert!(matches!(read(&w.finish()), Err(PerfDataError::Compressed)));
    // A record header claiming more than the data section holds.
    let mut w = one_event();
    w.comm(1, 1, "x");
    let mut bytes = w.finish();
    let data_at = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    bytes[data_at + 6..data_at + 8].copy_from_slice(&4000u16.to_le_bytes());
    assert!(read(&bytes)
        .unwrap_err()
        .to_string()
        .contains("does not fit the data section"));
}

#[test]
fn a_sample_skipping_past_its_end_is_malformed_not_an_overflow() {
    // CALLCHAIN of 2^61 - 2 entries, then REGS_USER: found by review, an add overflow.
    let body = ((1u64 << 61) - 2).to_le_bytes();
    assert_eq!(parse_sample(&body, (1 << 5) | (1 << 12), 0, 0, false), None);
    let body = (u64::MAX / 8).to_le_bytes();
    assert_eq!(parse_sample(&body, 1 << 5, 0, 0, false), None);
}

#[test]
fn read_format_bits_the_crate_drops_are_read_from_the_file() {
    // perf 6.1 asks for PERF_FORMAT_ID | PERF_FORMAT_LOST (0x14); a sample with READ has one
    // more word per value with LOST.
    let bytes = include_bytes!("../../../../fixtures/perf/cpu-clock-no-memory-sampling.data");
    let formats = raw_formats(bytes);
    assert_eq!(formats.len(), 1);
    assert_eq!(formats[0].1, 0x14);
    assert_eq!(
        formats[0].0 & (1 << 15),
        1 << 15,
        "DATA_SRC in the sample type"
    );
}

#[test]
fn children_inherit_their_parents_mappings_and_exec_replaces_them() {
    let mut w = one_event();
    w.mmap2(10, 0x40_0000, 0x1000, 0, 5, 1, "/usr/bin/perf");
    w.comm_exec(10, "app");
    w.mmap2(10, 0x50_0000, 0x1000, 0, 5, 2, "/opt/app");
    w.fork(11, 10, 5);
    let mem = read(&w.finish()).unwrap();
    let paths =
        |pid: u32| -> Vec<String> { mem.mappings[&pid].iter().map(|m| m.path.clone()).collect() };
    assert_eq!(paths(10), ["/opt/app"]);
    assert_eq!(paths(11), ["/opt/app"]);
    assert_eq!(mem.parents[&11], 10);
    assert_eq!(mem.commands[&10], "app");
}

#[test]
fn more_threads_than_indices_share_the_last_one_and_are_counted() {
    let mut w = one_event();
    let load = DataSource::encode(
        data_source::OP_LOAD,
        data_source::LVL_HIT | data_source::LVL_L1,
        0,
        0,
        0,
        false,
        0,
    )
    .0;
    for t in 0..70_000u32 {
        w.sample(&Sample {
            ip: 1,
            pid: 7,
            tid: 100 + t,
            time: u64::from(t),
            addr: 0x1000 + u64::from(t % 2) * 8,
            period: 1,
            data_src: load,
            ..Default::default()
        });
    }
    let mem = read(&w.finish()).unwrap();
    let p = &to_sharing(&mem, 64, "x")[0];
    p.validate().unwrap();
    assert_eq!(p.threads.len(), 65_535);
    assert_eq!(p.pmu.as_ref().unwrap().threads_folded, 70_000 - 65_535);
}
