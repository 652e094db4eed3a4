use super::*;

fn futex(ts: u64, uaddr: u64) -> BlockIn {
    BlockIn {
        ts,
        reason: Some("futex_do_wait (__x64_sys_futex)".into()),
        futex: Some(FutexArgs { uaddr, op: 0x80 }),
    }
}

fn sleep(ts: u64) -> BlockIn {
    BlockIn {
        ts,
        reason: Some("do_nanosleep".into()),
        futex: None,
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
