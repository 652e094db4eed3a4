use super::*;

const L1: LockKey = LockKey {
    pid: 1,
    address: 0x10,
};
const L2: LockKey = LockKey {
    pid: 1,
    address: 0x20,
};

fn run(ns: u64) -> Step {
    Step::Run { wall_ns: ns }
}
fn acq(lock: LockKey) -> Step {
    Step::Acquire {
        lock,
        shared: false,
    }
}
fn rel(lock: LockKey) -> Step {
    Step::Release { lock }
}

/// A thread that was on a CPU all its own time.
fn busy(steps: Vec<Step>) -> ThreadSchedule<std::vec::IntoIter<Step>> {
    let own: u64 = steps
        .iter()
        .map(|s| match s {
            Step::Run { wall_ns } => *wall_ns,
            _ => 0,
        })
        .sum();
    ThreadSchedule {
        start_ns: 0,
        own_ns: own,
        cpu_ns: Some(own),
        runq_ns: 0,
        steps: steps.into_iter(),
    }
}

/// Lock, 10 ms of work under it, unlock, 2 ms outside: `n` times.
fn holder(n: usize) -> Vec<Step> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.extend([acq(L1), run(10_000_000), rel(L1), run(2_000_000)]);
    }
    v
}

#[test]
fn on_one_cpu_removing_the_lock_leaves_the_work() {
    // 2 threads × 3 × 12 ms of CPU on 1 CPU: 72 ms with or without the lock.
    let threads = || vec![busy(holder(3)), busy(holder(3))];
    let without = replay(threads(), 1, Some(L1));
    assert_eq!(without.end_ns, Some(72_000_000));
    assert_eq!(without.bound_ns, 72_000_000);
    let kept = replay(threads(), 1, None);
    assert_eq!(kept.end_ns, Some(72_000_000));
}

#[test]
fn on_two_cpus_removing_the_lock_runs_the_threads_side_by_side() {
    let threads = || vec![busy(holder(3)), busy(holder(3))];
    // Apart: 36 ms each, in parallel.
    assert_eq!(replay(threads(), 2, Some(L1)).end_ns, Some(36_000_000));
    // Kept, FIFO: the holds (10 ms) alternate and each thread's 2 ms outside overlaps the
    // other's hold: 6 holds back to back, then the last 2 ms outside.
    assert_eq!(replay(threads(), 2, None).end_ns, Some(62_000_000));
    // Four threads on 2 CPUs without the lock: 4 × 36 ms / 2.
    let four = vec![
        busy(holder(3)),
        busy(holder(3)),
        busy(holder(3)),
        busy(holder(3)),
    ];
    let r = replay(four, 2, Some(L1));
    assert_eq!(r.end_ns, Some(72_000_000));
    assert_eq!(r.bound_ns, 72_000_000);
}

#[test]
fn a_sleep_is_kept_as_a_delay_and_the_run_queue_wait_is_not() {
    // Own time 20 ms: 8 ms on a CPU, 2 ms on the run queue, the other 10 ms asleep.
    let t = || ThreadSchedule {
        start_ns: 0,
        own_ns: 20_000_000,
        cpu_ns: Some(8_000_000),
        runq_ns: 2_000_000,
        steps: vec![run(20_000_000)].into_iter(),
    };
    // Alone on 1 CPU: 8 ms of CPU, then 10 ms of delay.
    assert_eq!(replay(vec![t()], 1, None).end_ns, Some(18_000_000));
    // Two on 1 CPU: 16 ms of CPU shared, then each its 10 ms.
    assert_eq!(replay(vec![t(), t()], 1, None).end_ns, Some(26_000_000));
    assert_eq!(replay(vec![t(), t()], 1, None).bound_ns, 18_000_000);
}

#[test]
fn removing_one_of_two_locks_leaves_the_other_serialising() {
    // Both threads take L1 then L2 around 10 ms of work, twice.
    let nested = || {
        let mut v = Vec::new();
        for _ in 0..2 {
            v.extend([acq(L1), acq(L2), run(10_000_000), rel(L2), rel(L1)]);
        }
        busy(v)
    };
    for removed in [Some(L1), Some(L2), None] {
        assert_eq!(
            replay(vec![nested(), nested()], 4, removed).end_ns,
            Some(40_000_000),
            "removed {removed:?}"
        );
    }
    // A third thread under L2 alone: removing L1 does not free it from L2.
    let mut third = Vec::new();
    for _ in 0..2 {
        third.extend([acq(L2), run(10_000_000), rel(L2)]);
    }
    let r = replay(vec![nested(), nested(), busy(third.clone())], 4, Some(L1));
    assert_eq!(r.end_ns, Some(60_000_000));
    // Removing L2 leaves the third thread free and the other two serialised by L1.
    let r = replay(vec![nested(), nested(), busy(third)], 4, Some(L2));
    assert_eq!(r.end_ns, Some(40_000_000));
}

#[test]
fn readers_share_an_rwlock_and_a_writer_waits_for_them() {
    let reader = || {
        busy(vec![
            Step::Acquire {
                lock: L1,
                shared: true,
            },
            run(10_000_000),
            rel(L1),
        ])
    };
    let writer = busy(vec![run(1_000_000), acq(L1), run(5_000_000), rel(L1)]);
    // Readers together 0-10 ms; the writer arrives at 1 ms and gets it at 10.
    assert_eq!(
        replay(vec![reader(), reader(), writer], 4, None).end_ns,
        Some(15_000_000)
    );
}

#[test]
fn a_thread_with_unknown_cpu_time_leaves_only_the_bound() {
    let mut t = busy(holder(2));
    t.cpu_ns = None;
    let r = replay(vec![t, busy(holder(2))], 2, Some(L1));
    assert_eq!(r.unknown_cpu, 1);
    let (predicted, method, why) = predict(&r);
    assert_eq!(method, Method::Bound);
    assert_eq!(predicted, r.bound_ns);
    assert_eq!(predicted, 24_000_000);
    assert!(why.unwrap().contains("CPU time"));
}

#[test]
fn a_replay_that_cannot_go_on_is_stalled_and_leaves_the_bound() {
    // Opposite lock orders (recorded without deadlock thanks to timing): FIFO replay blocks.
    let a = busy(vec![
        acq(L1),
        run(5_000_000),
        acq(L2),
        run(1),
        rel(L2),
        rel(L1),
    ]);
    let b = busy(vec![
        acq(L2),
        run(5_000_000),
        acq(L1),
        run(1),
        rel(L1),
        rel(L2),
    ]);
    let r = replay(vec![a, b], 2, None);
    assert_eq!(r.end_ns, None);
    let (predicted, method, why) = predict(&r);
    assert_eq!((predicted, method), (r.bound_ns, Method::Bound));
    assert!(why.unwrap().contains("stalled"));
}

#[test]
fn threads_start_when_they_started() {
    let mut late = busy(vec![run(10_000_000)]);
    late.start_ns = 30_000_000;
    let r = replay(vec![busy(vec![run(10_000_000)]), late], 1, None);
    assert_eq!(r.end_ns, Some(40_000_000));
    assert_eq!(r.bound_ns, 40_000_000);
}
