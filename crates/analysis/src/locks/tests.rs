//! Constructed traces whose answers are worked out by hand.

use super::*;
use trace::locks::{CONTENDED, MODE_EXCLUSIVE};

const M: u64 = 0x1000; // a mutex
const N: u64 = 0x2000; // another mutex

fn ev(ts: u64, kind: EventKind, aux: u8, lock: u64, site: u64) -> InputEvent {
    InputEvent {
        ts_ns: ts,
        kind,
        aux,
        object: Some((ObjectKind::Mutex, lock)),
        site: Some(site),
        value: 0,
    }
}

fn acquire(ts: u64, lock: u64, site: u64) -> InputEvent {
    ev(ts, EventKind::LockAcquired, MODE_EXCLUSIVE, lock, site)
}
fn wait(ts: u64, lock: u64, site: u64) -> InputEvent {
    ev(ts, EventKind::LockWait, MODE_EXCLUSIVE, lock, site)
}
fn acquire_after_wait(ts: u64, lock: u64, site: u64) -> InputEvent {
    ev(
        ts,
        EventKind::LockAcquired,
        MODE_EXCLUSIVE | CONTENDED,
        lock,
        site,
    )
}
fn release(ts: u64, lock: u64) -> InputEvent {
    ev(ts, EventKind::LockReleased, MODE_EXCLUSIVE, lock, 0x99)
}

fn thread(tid: u32, events: Vec<InputEvent>) -> InputThread {
    InputThread {
        pid: 1,
        tid,
        name: format!("t{tid}"),
        events,
        dropped: 0,
    }
}

fn input(threads: Vec<InputThread>) -> LockInput {
    LockInput {
        threads,
        span: None,
        sample_every: 1,
    }
}

/// T1 holds M 0..100; T2 asks at 10, gets it at 100, holds to 150; T3 asks at 20, gets it at
/// 150, holds to 170. Waits: 90 and 130.
fn chain() -> LockInput {
    input(vec![
        thread(1, vec![acquire(0, M, 0xa), release(100, M)]),
        thread(
            2,
            vec![
                wait(10, M, 0xb),
                acquire_after_wait(100, M, 0xb),
                release(150, M),
            ],
        ),
        thread(
            3,
            vec![
                wait(20, M, 0xb),
                acquire_after_wait(150, M, 0xb),
                release(170, M),
            ],
        ),
    ])
}

#[test]
fn summary_of_a_chain_of_waiters() {
    let r = analyze(&chain(), &Filter::default());
    assert_eq!(r.summary.events, 3);
    assert_eq!(r.summary.contended, 2);
    assert_eq!(r.summary.wait_ns, 90 + 130);
    assert_eq!(r.summary.protected_ns, 100 + 50 + 20);
    assert_eq!(r.summary.duration_ns, 100 + 140 + 150);
    assert_eq!((r.start_ns, r.end_ns), (0, 170));
    let m = &r.locks[0];
    assert_eq!((m.acquisitions, m.contended, m.owner_changes), (3, 2, 2));
    assert_eq!(m.wait_p50_ns, Some(90));
    assert_eq!(m.wait_max_ns, Some(130));
    assert_eq!(m.threads, [1, 2, 3]);
    // Sites: 0xb waited 220 over 2 acquisitions; 0xa never waited.
    assert_eq!(m.sites[0].site, Some(0xb));
    assert_eq!((m.sites[0].acquisitions, m.sites[0].wait_ns), (2, 220));
}

#[test]
fn the_critical_path_follows_owners_back() {
    let r = analyze(&chain(), &Filter::default());
    // T3 waited for T2, which waited for T1: all three are on the path.
    assert!(r.holds.iter().all(|h| h.on_critical_path));
    assert_eq!(r.critical.events, 3);
    assert_eq!(r.critical.wait_ns, 220);
    // Waits 10..100 and 20..150 overlap: the path waited on M during 10..150, 140 ns.
    assert_eq!(r.locks[0].what_if_ns, 170 - 140);
}

#[test]
fn contention_off_the_path_is_not_marked() {
    // N is contended early (T4 waits for T5), then M's chain runs later; the last contended
    // event is on M, its chain ends at T1's uncontended hold, and the latest contended event
    // before that is N's: so N's waiter and owner are on the path too. A third lock, held
    // uncontended by T6 meanwhile, is not.
    let mut t = chain();
    for th in &mut t.threads {
        for e in &mut th.events {
            e.ts_ns += 1000;
        }
    }
    t.threads
        .push(thread(5, vec![acquire(0, N, 0xc), release(300, N)]));
    t.threads.push(thread(
        4,
        vec![
            wait(100, N, 0xd),
            acquire_after_wait(300, N, 0xd),
            release(400, N),
        ],
    ));
    t.threads.push(thread(
        6,
        vec![acquire(500, 0x3000, 0xe), release(600, 0x3000)],
    ));
    let r = analyze(&t, &Filter::default());
    let marked: Vec<(u32, bool)> = r
        .holds
        .iter()
        .map(|h| (r.threads[h.thread].tid, h.on_critical_path))
        .collect();
    assert!(marked.contains(&(6, false)), "{marked:?}");
    assert!(
        marked.contains(&(4, true)) && marked.contains(&(5, true)),
        "{marked:?}"
    );
    assert_eq!(r.critical.events, 5);
}

#[test]
fn nested_holds_count_once_in_the_union() {
    // One thread holds M 0..100 and, inside, N 20..50.
    let t = input(vec![thread(
        1,
        vec![
            acquire(0, M, 1),
            acquire(20, N, 2),
            release(50, N),
            release(100, M),
        ],
    )]);
    let r = analyze(&t, &Filter::default());
    assert_eq!(r.summary.protected_ns, 130);
    assert_eq!(r.summary.protected_union_ns, 100);
    assert_eq!(r.critical.events, 0, "no contention, no critical path");
}

#[test]
fn recursive_holds_pair_innermost_first_and_leftovers_are_counted() {
    let t = input(vec![thread(
        1,
        vec![
            acquire(0, M, 1),
            acquire(10, M, 2),
            release(20, M),
            release(40, M),
            release(50, N),
        ],
    )]);
    let r = analyze(&t, &Filter::default());
    let spans: Vec<(u64, u64)> = r
        .holds
        .iter()
        .map(|h| (h.acquired_ns, h.released_ns))
        .collect();
    assert_eq!(spans, [(0, 40), (10, 20)]);
    assert_eq!(r.unmatched.releases, 1, "N was released without being held");
    // A hold left open at the end lasts to the end of the trace.
    let t = input(vec![thread(
        1,
        vec![acquire(0, M, 1), acquire(5, N, 1), release(30, N)],
    )]);
    let r = analyze(&t, &Filter::default());
    assert_eq!(r.unmatched.open_holds, 1);
    assert!(r.holds.iter().any(|h| h.unreleased && h.released_ns == 30));
}

#[test]
fn filters_select_events_but_keep_the_path_computed_on_all() {
    let by_site = Filter {
        sites: vec![0xa],
        ..Filter::default()
    };
    let r = analyze(&chain(), &by_site);
    assert_eq!(r.summary.events, 1);
    assert!(r.holds[0].on_critical_path, "marked on the whole trace");
    let long = Filter {
        min_duration_ns: Some(141),
        ..Filter::default()
    };
    assert_eq!(
        analyze(&chain(), &long).summary.events,
        1,
        "only T3's 150 ns event"
    );
    let by_thread = Filter {
        threads: vec![2],
        ..Filter::default()
    };
    assert_eq!(analyze(&chain(), &by_thread).summary.wait_ns, 90);
}

#[test]
fn condition_waits_and_barriers_are_idle_time_apart_from_locks() {
    let c = |ts, kind, aux| InputEvent {
        ts_ns: ts,
        kind,
        aux,
        object: Some((ObjectKind::Cond, 0x5000)),
        site: Some(0xf),
        value: 0,
    };
    let b = |ts, kind| InputEvent {
        ts_ns: ts,
        kind,
        aux: 0,
        object: Some((ObjectKind::Barrier, 0x6000)),
        site: Some(0xf),
        value: 0,
    };
    let t = input(vec![thread(
        1,
        vec![
            acquire(0, M, 1),
            release(10, M),
            c(10, EventKind::CondWait, 0),
            c(510, EventKind::CondWoken, 0),
            ev(
                510,
                EventKind::LockAcquired,
                MODE_EXCLUSIVE | AFTER_COND,
                M,
                1,
            ),
            release(520, M),
            c(520, EventKind::CondWait, 0),
            c(620, EventKind::CondWoken, 110),
            b(700, EventKind::BarrierWait),
            b(900, EventKind::BarrierDone),
        ],
    )]);
    let r = analyze(&t, &Filter::default());
    assert_eq!(r.conds.len(), 1);
    assert_eq!(
        (r.conds[0].waits, r.conds[0].timeouts, r.conds[0].wait_ns),
        (2, 1, 600)
    );
    assert_eq!((r.barriers[0].waits, r.barriers[0].wait_ns), (1, 200));
    assert_eq!(r.summary.wait_ns, 0, "condition waits are not lock waits");
    assert_eq!(r.summary.events, 2);
    assert!(r.holds.iter().any(|h| h.after_cond));
}

#[test]
fn percentiles_by_nearest_rank() {
    let v: Vec<u64> = (1..=100).collect();
    assert_eq!(percentile(&v, 50.0), Some(50));
    assert_eq!(percentile(&v, 99.0), Some(99));
    assert_eq!(percentile(&[7], 99.0), Some(7));
    assert_eq!(percentile(&[], 50.0), None);
    assert_eq!(union_length(vec![(0, 10), (5, 20), (30, 40)]), 30);
}

#[test]
fn sampled_holds_stand_for_n_acquisitions_and_waits_count_once() {
    let mut t = chain();
    t.sample_every = 16;
    let r = analyze(&t, &Filter::default());
    // T1's uncontended hold stands for 16 acquisitions of 100 ns; the waiters for one each.
    assert_eq!(r.summary.events, 16 + 1 + 1);
    assert_eq!(r.summary.protected_ns, 16 * 100 + 50 + 20);
    assert_eq!(r.summary.wait_ns, 220);
    assert_eq!(r.locks[0].acquisitions, 18);
}
