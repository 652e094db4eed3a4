use super::*;

fn futex(ts: u64, uaddr: u64) -> BlockIn {
    BlockIn {
        ts,
        reason: Some("futex_do_wait (__x64_sys_futex)".into()),
        futex: Some(FutexArgs { uaddr, op: 0x80 }),
        stack: StackIn::NotRecorded,
    }
}

fn sleep(ts: u64) -> BlockIn {
    BlockIn {
        ts,
        reason: Some("do_nanosleep".into()),
        futex: None,
        stack: StackIn::NotRecorded,
    }
}

fn change(ts: u64, state: State) -> StateChange {
    StateChange {
        ts,
        state,
        cpu: None,
        waker: 0,
    }
}

fn thread(tid: u32, blocks: Vec<BlockIn>) -> ThreadBlocks {
    ThreadBlocks {
        pid: 1,
        tid,
        blocks,
    }
}

#[test]
fn a_futex_wait_lasts_to_the_switch_in_and_counts_its_run_queue_time() {
    let threads = [
        thread(10, vec![futex(1_000, 0x5000), sleep(5_000)]),
        thread(11, vec![futex(2_000, 0x5000)]),
    ];
    let states = [
        (
            10,
            vec![
                change(1_000, State::Sleeping),
                change(1_700, State::Runnable),
                change(2_000, State::Running),
                change(5_000, State::Sleeping),
                change(9_000, State::Running),
            ],
        ),
        (
            11,
            vec![
                change(2_500, State::Runnable),
                change(2_600, State::Running),
            ],
        ),
    ];
    let r = waits(&threads, &states, &[]);
    assert_eq!((r.futex_waits, r.futex_ns), (2, 1_000 + 600));
    assert_eq!(r.futex_runqueue_ns, 300 + 100);
    assert_eq!((r.other_blocks, r.other_ns), (1, 4_000));
    assert_eq!(r.addresses.len(), 1);
    let a = &r.addresses[0];
    assert_eq!(
        (a.uaddr, a.waits, a.total_ns, a.max_ns),
        (0x5000, 2, 1_600, 1_000)
    );
    assert_eq!(a.runqueue_ns, 300 + 100);
    assert_eq!(a.threads, BTreeMap::from([(10, 1_000), (11, 600)]));
    assert_eq!(a.ops, BTreeSet::from([0]));
    assert_eq!(r.threads[0].futex_ns, 1_000);
    assert_eq!(r.threads[0].other_ns, 4_000);
    assert_eq!(r.reasons[0].reason, "do_nanosleep");
}

#[test]
fn a_wait_whose_switch_in_was_not_traced_has_no_length() {
    // The switch in after the first block is missing: the next Running comes after the
    // thread's next block, so it cannot be the first block's end.
    let threads = [thread(10, vec![futex(1_000, 0x5000), futex(3_000, 0x5000)])];
    let states = [(10, vec![change(4_000, State::Running)])];
    let r = waits(&threads, &states, &[]);
    assert_eq!((r.unmeasured, r.futex_unmeasured), (1, 1));
    assert_eq!((r.futex_waits, r.futex_ns), (1, 1_000));
    assert_eq!(r.addresses[0].unmeasured, 1);
}

#[test]
fn a_probe_wait_on_the_same_object_takes_the_futex_wait() {
    let threads = [thread(
        10,
        vec![
            futex(1_000, 0x5010),
            futex(10_000, 0x5010),
            futex(20_000, 0x9000),
        ],
    )];
    let states = [(
        10,
        vec![
            change(2_000, State::Running),
            change(12_000, State::Running),
            change(21_000, State::Running),
        ],
    )];
    let probe = [
        // Covers the first wait (the word at +16 inside a 40-byte mutex), the clocks 500 ns apart.
        ProbeWait {
            tid: 10,
            start: 1_500,
            end: 2_300,
            obj: 0x5000,
            size: 40,
        },
        // Same time as the third wait, another object: not the same wait.
        ProbeWait {
            tid: 10,
            start: 19_000,
            end: 22_000,
            obj: 0x7000,
            size: 40,
        },
        // Another thread's wait on the object of the second.
        ProbeWait {
            tid: 11,
            start: 9_000,
            end: 13_000,
            obj: 0x5000,
            size: 40,
        },
    ];
    let r = waits(&threads, &states, &probe);
    assert_eq!((r.probe_counted, r.probe_counted_ns), (1, 1_000));
    assert_eq!((r.futex_waits, r.futex_ns), (2, 2_000 + 1_000));
    let a = r.addresses.iter().find(|a| a.uaddr == 0x5010).unwrap();
    assert_eq!((a.waits, a.probe_counted), (1, 1));
}

#[test]
fn no_blocks_no_waits() {
    let r = waits(&[], &[], &[]);
    assert_eq!(r, WaitReport::default());
}

#[test]
fn a_missed_switch_in_ends_the_wait_at_its_wake_up() {
    // Woken at 1_500, switched in untraced; preempted at 2_500 (runnable again), back at
    // 3_000: the wait ends at the wake-up, not at 3_000.
    let threads = [thread(10, vec![futex(1_000, 0x5000), futex(8_000, 0x5000)])];
    let states = [(
        10,
        vec![
            change(1_000, State::Sleeping),
            change(1_500, State::Runnable),
            change(2_500, State::Runnable),
            change(3_000, State::Running),
            // The second wait: woken, then nothing before the run ends.
            change(8_000, State::Sleeping),
            change(8_400, State::Runnable),
        ],
    )];
    let r = waits(&threads, &states, &[]);
    assert_eq!((r.futex_waits, r.futex_ns, r.unmeasured), (2, 500 + 400, 0));
    assert_eq!(r.futex_runqueue_ns, 0, "unknown, not invented");
}

fn stack(kind: WaitKind, site: &str) -> WaitStack {
    WaitStack {
        kind,
        site: Some(site.into()),
        frames: ["futex_wait", site, "main"]
            .iter()
            .map(|f| WaitFrame {
                function: f.to_string(),
                ..WaitFrame::default()
            })
            .collect(),
        unknown: false,
    }
}

#[test]
fn waits_are_counted_per_kind_and_program_frame() {
    let with = |ts, at| BlockIn {
        stack: at,
        ..futex(ts, 0x5000)
    };
    let threads = [
        thread(
            10,
            vec![
                with(1_000, StackIn::At(0)),
                with(3_000, StackIn::At(1)),
                with(5_000, StackIn::Missing),
            ],
        ),
        thread(11, vec![with(1_000, StackIn::At(0))]),
    ];
    let states = [
        (
            10,
            vec![
                change(1_000, State::Sleeping),
                change(1_100, State::Running),
                change(3_000, State::Sleeping),
                change(3_300, State::Running),
                change(5_000, State::Sleeping),
                change(5_050, State::Running),
            ],
        ),
        (
            11,
            vec![
                change(1_000, State::Sleeping),
                change(1_200, State::Running),
            ],
        ),
    ];
    let stacks = [
        stack(WaitKind::Lock, "m::work (m.rs:27)"),
        stack(WaitKind::Condition, "m::take (m.rs:40)"),
    ];
    let r = waits_with_stacks(&threads, &states, &[], &stacks);
    assert_eq!((r.with_stack, r.without_stack, r.unknown_stacks), (3, 1, 0));
    let a = &r.addresses[0];
    let sites: Vec<_> = a
        .sites
        .iter()
        .map(|s| (s.kind, s.site.as_deref(), s.waits, s.total_ns))
        .collect();
    assert_eq!(
        sites,
        [
            // Equal times: by kind (lock first).
            (Some(WaitKind::Lock), Some("m::work (m.rs:27)"), 2, 300),
            (Some(WaitKind::Condition), Some("m::take (m.rs:40)"), 1, 300),
            (None, None, 1, 50),
        ]
    );
    let kinds: Vec<_> = r
        .kinds
        .iter()
        .map(|k| (k.kind, k.waits, k.total_ns))
        .collect();
    assert_eq!(
        kinds,
        [(WaitKind::Lock, 2, 300), (WaitKind::Condition, 1, 300)]
    );
    let per_stack: Vec<_> = r
        .stack_waits
        .iter()
        .map(|s| (s.stack, s.waits, s.total_ns))
        .collect();
    assert_eq!(per_stack, [(0, 2, 300), (1, 1, 300)]);
    // The stacks not given (unreadable): nothing per kind, every wait counted without one.
    let plain = waits(&threads, &states, &[]);
    assert!(plain.kinds.is_empty());
    assert_eq!((plain.with_stack, plain.without_stack), (0, 4));
}
