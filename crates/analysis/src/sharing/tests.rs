use super::*;
use trace::sharing::{AccessStat, Allocation, LineEnd, ThreadInfo, Totals, SHARING_VERSION};

fn w(thread: u16, offset: u8, size: u8) -> HistoryEntry {
    HistoryEntry {
        offset,
        size,
        write: true,
        atomic: false,
        thread,
    }
}

fn r(thread: u16, offset: u8, size: u8) -> HistoryEntry {
    HistoryEntry {
        write: false,
        ..w(thread, offset, size)
    }
}

/// Accesses summarised from a history, with transfers counted by the model as the runtime
/// does (whole line), so the statistics and the history agree.
fn stats(history: &[HistoryEntry]) -> Vec<AccessStat> {
    let mut state = LineState::default();
    let mut out: Vec<AccessStat> = Vec::new();
    for e in history {
        let transfer = state.access(e.thread, e.write);
        let kind = match (e.write, e.atomic) {
            (true, true) => AccessKind::AtomicWrite,
            (true, false) => AccessKind::Write,
            (false, true) => AccessKind::AtomicRead,
            (false, false) => AccessKind::Read,
        };
        match out
            .iter_mut()
            .find(|a| a.offset == e.offset && a.thread == e.thread && a.kind == kind)
        {
            Some(a) => {
                a.count += 1;
                a.transfers += u64::from(transfer);
            }
            None => out.push(AccessStat {
                offset: e.offset,
                size: e.size,
                kind,
                thread: e.thread,
                pc: 0x401000 + u64::from(e.offset),
                count: 1,
                transfers: u64::from(transfer),
                cpus: vec![u32::from(e.thread)],
                pmu: None,
            }),
        }
    }
    out
}

fn process(history: &[HistoryEntry], with_history: bool) -> ProcessSharing {
    ProcessSharing {
        version: SHARING_VERSION,
        pid: 42,
        parent_pid: None,
        program: "/x".into(),
        line_size: 64,
        hot_after: 0,
        sample_every: 1,
        started_ns: 0,
        ended_ns: 1,
        threads: (0..3)
            .map(|i| ThreadInfo {
                index: i,
                tid: 100 + u32::from(i),
                created_by: None,
                start_routine: None,
                first_ns: 0,
            })
            .collect(),
        totals: Totals::default(),
        lines: vec![HotLine {
            id: 1,
            address: 0x5000,
            hot_since_ns: 0,
            ended_ns: 1,
            end: LineEnd::Exit,
            transfers_before_hot: 5,
            objects: vec![Allocation {
                address: 0x4ff0,
                size: 0x30,
                site: 0x401234,
                allocator: "malloc".into(),
                thread: 0,
                allocated_ns: 0,
                freed_ns: None,
            }],
            accesses: stats(history),
            history: with_history.then_some(trace::sharing::HistoryRef {
                first: 0,
                entries: history.len() as u32,
                beyond: 0,
            }),
        }],
        pmu: None,
    }
}

fn one(history: &[HistoryEntry], with_history: bool) -> LineReport {
    let p = process(history, with_history);
    let h = if with_history {
        history.to_vec()
    } else {
        Vec::new()
    };
    analyse_process(&p, &[h], 100.0).remove(0)
}

/// Two threads each writing its own 8-byte field, alternately, n times each.
fn ping_pong(n: usize) -> Vec<HistoryEntry> {
    (0..n).flat_map(|_| [w(0, 0, 8), w(1, 8, 8)]).collect()
}

#[test]
fn the_model_counts_a_transfer_per_access_to_another_threads_version() {
    let mut s = LineState::default();
    assert!(!s.access(0, true), "first write: from memory");
    assert!(!s.access(0, false), "own version");
    assert!(s.access(1, false), "thread 1 reads thread 0's version");
    assert!(!s.access(1, false), "it holds it now");
    assert!(
        !s.access(0, true),
        "a write by the current writer is not a transfer"
    );
    assert!(s.access(1, false), "the new version moves again");
    assert!(s.access(1, true), "a write to a line another thread wrote");
    assert!(s.access(0, true));
}

#[test]
fn alternating_writes_to_two_fields_are_false_sharing_that_padding_removes() {
    let l = one(&ping_pong(100), true);
    // 200 writes alternating: every one but the first is a transfer.
    let r = l.replay.clone().unwrap();
    assert_eq!((r.entries, r.as_is, r.grouped, r.padded), (200, 199, 0, 0));
    assert_eq!(l.class, Some(Class::FalseSharing));
    assert_eq!(l.transfers, 199 + 5);
    assert_eq!((l.false_transfers, l.true_transfers), (199, 0));
    let hint = l.hint.unwrap();
    assert_eq!(hint.groups.len(), 2);
    assert_eq!(hint.groups[0].ranges, vec![(0, 8)]);
    assert_eq!(hint.groups[1].ranges, vec![(8, 16)]);
    assert_eq!(hint.reduction, 1.0);
    assert_eq!(hint.transfers_removed, 199 + 5);
    assert!(hint.from_replay);
    assert_eq!(l.estimated_cost_ns, 204.0 * 100.0);
    assert_eq!(l.fields.len(), 2);
    assert!(l.fields.iter().all(|f| !f.truly_shared));
    // Rows: 2, each half the transfers (thread 0's first write was not one).
    assert_eq!(l.rows.len(), 2);
    assert_eq!(l.rows[0].transfers, 100);
    assert_eq!(l.rows[0].thread, 1);
    assert_eq!(l.rows[0].tid, 101);
    assert!((l.rows[0].transfer_share - 100.0 / 199.0).abs() < 1e-12);
    // Offset 8 at 0x5008 lies in the block 0x4ff0 + 0x30.
    assert_eq!(l.rows[0].object, Some(0));
    assert_eq!(l.byte_use[0].1[0..8], [2; 8]);
    assert_eq!(l.byte_use[0].1[8], 0);
    assert_eq!(l.byte_use[1].1[8..16], [2; 8]);
}

#[test]
fn without_a_history_the_classification_comes_from_the_fields() {
    let l = one(&ping_pong(100), false);
    assert_eq!(l.replay, None);
    assert_eq!(l.class, Some(Class::FalseSharing));
    let hint = l.hint.unwrap();
    assert!(!hint.from_replay);
    assert_eq!(hint.reduction, 1.0);
}

#[test]
fn a_counter_all_threads_increment_is_true_sharing_with_no_hint() {
    let h: Vec<HistoryEntry> = (0..300)
        .map(|i| HistoryEntry {
            atomic: true,
            ..w((i % 3) as u16, 16, 8)
        })
        .collect();
    for with in [true, false] {
        let l = one(&h, with);
        assert_eq!(l.class, Some(Class::TrueSharing), "history: {with}");
        assert_eq!(l.hint, None);
        assert_eq!(l.false_transfers, 0);
        assert_eq!(l.true_transfers, 299);
        assert_eq!(l.atomics, 300);
    }
}

#[test]
fn a_reader_of_one_field_and_a_writer_of_another() {
    // The perf c2c slides' case: thread 0 writes `writes`, thread 1 reads `reads`.
    let h: Vec<HistoryEntry> = (0..50).flat_map(|_| [w(0, 0, 8), r(1, 8, 8)]).collect();
    let l = one(&h, true);
    let r = l.replay.clone().unwrap();
    // Every read fetches thread 0's new version; thread 0's writes stay its own.
    assert_eq!((r.as_is, r.padded), (50, 0));
    assert_eq!(l.class, Some(Class::FalseSharing));
    assert_eq!(l.hint.unwrap().transfers_removed, 50 + 5);
}

#[test]
fn mixed_sharing_keeps_what_the_shared_field_costs() {
    // Threads 0 and 1 write their own fields; every 4th round both also write a shared flag.
    let mut h = Vec::new();
    for i in 0..100 {
        h.push(w(0, 0, 8));
        h.push(w(1, 8, 8));
        if i % 4 == 0 {
            h.push(w(0, 32, 4));
            h.push(w(1, 32, 4));
        }
    }
    let l = one(&h, true);
    let r = l.replay.clone().unwrap();
    assert_eq!(r.as_is, h.len() as u64 - 1);
    // With every field apart only the flag moves: 50 writes alternating, 49 transfers.
    assert_eq!(r.padded, 49);
    // The hint keeps the flag apart from both private fields: groups by thread set.
    assert_eq!(l.hint.as_ref().unwrap().groups.len(), 3);
    assert_eq!(r.grouped, 49);
    assert_eq!(l.class, Some(Class::Mixed), "{} of {}", r.padded, r.as_is);
    assert_eq!(l.true_transfers + l.false_transfers, r.as_is);
}

#[test]
fn an_access_spanning_two_parts_counts_in_each() {
    // Thread 0 writes bytes 0..16 at once, thread 1 reads 8..16: with bytes 8.. on another
    // line, thread 0's write touches both lines.
    let h = vec![w(0, 0, 16), r(1, 8, 8), w(0, 0, 16), r(1, 8, 8)];
    let mut part_of = vec![0; 64];
    for p in &mut part_of[8..] {
        *p = 1;
    }
    assert_eq!(replay(&h, &vec![0; 64]), 2);
    assert_eq!(replay(&h, &part_of), 2);
}

#[test]
fn lines_rank_by_transfers() {
    let a = one(&ping_pong(10), true);
    let mut b = one(&ping_pong(50), true);
    b.address = 0x6000;
    let ranked = rank(vec![a, b], 1000);
    assert_eq!(ranked.lines[0].address, 0x6000);
    assert_eq!(ranked.transfers_total, 1000);
}

#[test]
fn no_hot_line_is_no_sharing_only_when_the_threads_ran_together_long_enough() {
    use crate::concurrency::{Concurrency, Method};
    let measured = |ns| {
        Some(Concurrency {
            on_cpu_together_ns: ns,
            exact: true,
            method: Method::SchedTracepoints,
        })
    };
    let mut r = rank(vec![], 0);
    // Short: unknown, with the figures kept.
    r.judge(measured(TOGETHER_NEEDED_NS - 1), true, 64);
    assert_eq!(r.verdict, Verdict::Unknown);
    assert_eq!(
        r.concurrency.on_cpu_together_ns,
        Some(TOGETHER_NEEDED_NS - 1)
    );
    assert_eq!(r.concurrency.threshold_ns, TOGETHER_NEEDED_NS);
    assert_eq!(r.concurrency.exact, Some(true));
    // Long enough: no sharing.
    r.judge(measured(TOGETHER_NEEDED_NS), true, 64);
    assert_eq!(r.verdict, Verdict::NoSharing);
    // Not measured: no sharing, and nothing pretends to be a measurement.
    r.judge(None, true, 64);
    assert_eq!(r.verdict, Verdict::NoSharing);
    assert_eq!(r.concurrency.on_cpu_together_ns, None);
    assert_eq!(r.concurrency.exact, None);
    // One thread per process: nothing could be shared, whatever the concurrency.
    r.judge(measured(0), false, 64);
    assert_eq!(r.verdict, Verdict::NoSharing);
    // The threshold follows hot_after: 4 times the transfers, 4 times the time.
    r.judge(measured(2 * TOGETHER_NEEDED_NS), true, 256);
    assert_eq!(r.concurrency.threshold_ns, 4 * TOGETHER_NEEDED_NS);
    assert_eq!(r.verdict, Verdict::Unknown);
    // --exhaustive (0): one transfer shows, so 1/64 of the default.
    assert_eq!(together_needed_ns(0), TOGETHER_NEEDED_NS / 64);
    // A hot line is sharing found, however short the concurrency.
    assert_eq!(
        verdict(true, true, Some(0), TOGETHER_NEEDED_NS),
        Verdict::SharingFound
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["verdict"], "unknown");
    assert_eq!(v["concurrency"]["method"], "sched-tracepoints");
}
