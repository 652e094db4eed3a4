use super::*;
use trace::offcpu::{WakeFutex, WakeHow};

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

fn futex_with_stack(ts: u64, uaddr: u64, stack: u32) -> BlockIn {
    BlockIn {
        stack: StackIn::At(stack),
        ..futex(ts, uaddr)
    }
}

fn wake(tid: u32, ts: u64, woken: u32, uaddr: u64, stack: u32) -> WakingIn {
    WakingIn {
        pid: 1,
        tid,
        ts,
        woken,
        how: WakeHow::Futex,
        futex: Some(WakeFutex {
            uaddr,
            op: 0x81,
            uaddr2: None,
        }),
        stack: StackIn::At(stack),
    }
}

fn running(tid: u32, ts: u64) -> (u32, Vec<StateChange>) {
    (tid, vec![change(ts, State::Running)])
}

/// Stack 0: the waiter's lock; 1: the holder's unlock; 2: a notify_all.
fn blame_stacks() -> Vec<WaitStack> {
    vec![
        stack(WaitKind::Lock, "m::work (m.rs:10)"),
        stack(WaitKind::Unknown, "m::work (m.rs:14)"),
        stack(WaitKind::Unknown, "m::publish (m.rs:30)"),
    ]
}

#[test]
fn a_lock_wait_is_charged_to_the_holder_that_woke_it() {
    let threads = [
        thread(10, vec![futex_with_stack(1_000, 0x5000, 0)]),
        thread(11, vec![futex_with_stack(2_000, 0x5000, 0)]),
    ];
    // 11 woke 10 at 1_500 (running at 1_600); 10 woke 11 at 2_900 (running at 3_000). A wake
    // of 10 before its wait began is not its waker.
    let wakings = [
        wake(11, 900, 10, 0x5000, 1),
        wake(11, 1_500, 10, 0x5000, 1),
        wake(10, 2_900, 11, 0x5000, 1),
    ];
    let states = [running(10, 1_600), running(11, 3_000)];
    let r = waits_and_blame(&threads, &wakings, &states, &[], &blame_stacks());
    assert!(r.wakes_recorded);
    assert_eq!(
        r.woken_by.futex_wake,
        WaitCount {
            waits: 2,
            total_ns: 600 + 1_000
        }
    );
    assert_eq!(r.blame.len(), 1, "{:?}", r.blame);
    let p = &r.blame[0];
    assert_eq!(p.waiter_site.as_deref(), Some("m::work (m.rs:10)"));
    assert_eq!(p.waker_site.as_deref(), Some("m::work (m.rs:14)"));
    assert_eq!(p.waiter_kind, Some(WaitKind::Lock));
    assert_eq!((p.waits, p.total_ns, p.max_ns), (2, 1_600, 1_000));
    assert_eq!(r.holders.len(), 1);
    let h = &r.holders[0];
    assert_eq!((h.waits, h.total_ns, h.wakers, h.waiters), (2, 1_600, 2, 2));
    let mut paired: Vec<(u32, u32, u64)> = r
        .paired
        .iter()
        .map(|p| (p.waiter, p.waker, p.woken_at))
        .collect();
    paired.sort();
    assert_eq!(paired, [(10, 11, 1_500), (11, 10, 2_900)]);
}

/// One notify_all wakes three waiters (one waking each, from one stack): the notify is
/// charged the three waits, as Go charges a broadcast.
#[test]
fn a_broadcast_is_charged_every_waiter_it_woke() {
    let threads = [
        thread(20, vec![futex_with_stack(1_000, 0x7000, 0)]),
        thread(21, vec![futex_with_stack(2_000, 0x7000, 0)]),
        thread(22, vec![futex_with_stack(3_000, 0x7000, 0)]),
    ];
    let wakings = [
        wake(30, 10_000, 20, 0x7000, 2),
        wake(30, 10_001, 21, 0x7000, 2),
        wake(30, 10_002, 22, 0x7000, 2),
    ];
    let states = [
        running(20, 10_100),
        running(21, 10_200),
        running(22, 10_300),
    ];
    let r = waits_and_blame(&threads, &wakings, &states, &[], &blame_stacks());
    let h = &r.holders[0];
    assert_eq!(h.waker_site.as_deref(), Some("m::publish (m.rs:30)"));
    assert_eq!(
        (h.waits, h.total_ns, h.wakers, h.waiters),
        (3, 9_100 + 8_200 + 7_300, 1, 3)
    );
    assert_eq!(r.woken_by.futex_wake.waits, 3);
}

#[test]
fn a_timeout_an_interrupt_and_strangers_are_not_blamed_on_a_holder() {
    let threads = [
        thread(10, vec![futex(1_000, 0x5000)]),
        thread(11, vec![futex(1_000, 0x5000)]),
        thread(12, vec![futex(1_000, 0x5000)]),
        thread(13, vec![futex(1_000, 0x5000)]),
        thread(14, vec![futex(1_000, 0x5000)]),
    ];
    let other = |tid, how, woken| WakingIn {
        pid: 1,
        tid,
        ts: 1_500,
        woken,
        how,
        futex: None,
        stack: StackIn::NotRecorded,
    };
    let wakings = [
        other(15, WakeHow::Timer, 10),
        other(15, WakeHow::Interrupt, 11),
        // A futex wake of 12 on another word (not requeued there): another path.
        wake(15, 1_500, 12, 0x9000, 1),
    ];
    let woken_by = |tid: u32, ts: u64, waker: u32| {
        (
            tid,
            vec![
                StateChange {
                    ts,
                    state: State::Runnable,
                    cpu: None,
                    waker,
                },
                change(ts + 100, State::Running),
            ],
        )
    };
    let states = [
        woken_by(10, 1_500, 15),
        woken_by(11, 1_500, 15),
        woken_by(12, 1_500, 15),
        // 13: by a task outside the program; 14: nobody the tracepoints named.
        woken_by(13, 1_500, 999),
        woken_by(14, 1_500, 0),
    ];
    let r = waits_and_blame(&threads, &wakings, &states, &[], &[]);
    let w = &r.woken_by;
    let one = WaitCount {
        waits: 1,
        total_ns: 600,
    };
    assert_eq!(
        (w.timer, w.interrupt, w.other_path, w.other_task, w.unknown),
        (one, one, one, one, one)
    );
    assert_eq!(w.futex_wake.waits, 0);
    assert!(r.blame.is_empty() && r.holders.is_empty() && r.paired.is_empty());
}

/// A condition wait requeued to a mutex's word is paired with the mutex's unlock.
#[test]
fn a_requeued_waiter_is_paired_with_the_wake_on_its_new_word() {
    let threads = [thread(10, vec![futex(1_000, 0x100)])];
    let requeue = WakingIn {
        futex: Some(WakeFutex {
            uaddr: 0x100,
            op: 0x84,
            uaddr2: Some(0x200),
        }),
        // It woke another waiter, and moved 10 to 0x200.
        woken: 12,
        ..wake(11, 1_200, 12, 0x100, 1)
    };
    let wakings = [requeue, wake(11, 1_400, 10, 0x200, 1)];
    let r = waits_and_blame(
        &threads,
        &wakings,
        &[running(10, 1_500)],
        &[],
        &blame_stacks(),
    );
    assert_eq!(r.woken_by.futex_wake.waits, 1, "{:?}", r.woken_by);
    assert_eq!(r.paired[0].woken_at, 1_400);
}

/// A wait inside a pthread call the probe recorded is not counted again, but is paired: the
/// pthread lock gets its waker.
#[test]
fn a_probe_counted_wait_lends_its_waker() {
    let threads = [thread(10, vec![futex_with_stack(1_000, 0x5000, 0)])];
    let probe = [ProbeWait {
        tid: 10,
        start: 900,
        end: 1_700,
        obj: 0x5000,
        size: 40,
    }];
    let wakings = [wake(11, 1_500, 10, 0x5000, 1)];
    let r = waits_and_blame(
        &threads,
        &wakings,
        &[running(10, 1_600)],
        &probe,
        &blame_stacks(),
    );
    assert_eq!((r.futex_waits, r.probe_counted), (0, 1));
    assert_eq!(r.blame[0].probe_counted, 1);
    assert_eq!(r.holders[0].total_ns, 600);
}

/// Without wakes recorded (an older run), every wait is unknown or by the sched waker.
#[test]
fn without_wakes_nothing_is_paired() {
    let threads = [thread(10, vec![futex(1_000, 0x5000)])];
    let r = waits_and_blame(&threads, &[], &[running(10, 1_600)], &[], &[]);
    assert!(!r.wakes_recorded);
    assert_eq!(r.woken_by.unknown.waits, 1);
}
