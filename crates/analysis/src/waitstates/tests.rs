//! Constructed MPI traces whose wait states are worked out by hand.

use super::*;

const W: CommId = 0; // MPI_COMM_WORLD

fn world(n: u32) -> HashMap<CommId, Vec<Rank>> {
    HashMap::from([(W, (0..n).collect())])
}

fn ev(rank: Rank, enter: u64, exit: u64, site: u64, call: Call) -> MpiEvent {
    MpiEvent {
        rank,
        enter_ns: enter,
        exit_ns: exit,
        site: Some(site),
        call,
    }
}

fn send(rank: Rank, enter: u64, exit: u64, site: u64, dest: Rank, tag: Tag) -> MpiEvent {
    let call = Call::Send {
        dest,
        tag,
        comm: W,
        bytes: 8,
        synchronous: false,
    };
    ev(rank, enter, exit, site, call)
}

fn ssend(rank: Rank, enter: u64, exit: u64, site: u64, dest: Rank, tag: Tag) -> MpiEvent {
    let call = Call::Send {
        dest,
        tag,
        comm: W,
        bytes: 1 << 20,
        synchronous: true,
    };
    ev(rank, enter, exit, site, call)
}

fn recv(rank: Rank, enter: u64, exit: u64, site: u64, source: Rank, tag: Tag) -> MpiEvent {
    let call = Call::Recv {
        source,
        tag,
        comm: W,
        bytes: 8,
    };
    ev(rank, enter, exit, site, call)
}

fn coll(rank: Rank, enter: u64, exit: u64, call: Call) -> MpiEvent {
    ev(rank, enter, exit, 0x500 + rank as u64, call)
}

fn run(events: &[MpiEvent], n: u32) -> WaitStates {
    analyse(events, &world(n), Thresholds::default())
}

fn of(ws: &WaitStates, p: Pattern) -> Vec<&Instance> {
    ws.instances.iter().filter(|i| i.pattern == p).collect()
}

fn rank(ws: &WaitStates, r: Rank) -> &RankWaits {
    ws.ranks.iter().find(|x| x.rank == r).unwrap()
}

#[test]
fn late_sender_two_ranks() {
    // Rank 1 enters its receive at 40; rank 0 sends at 100: 60 ns lost at rank 1.
    let ws = run(
        &[send(0, 100, 110, 0xA0, 1, 7), recv(1, 40, 120, 0xB0, 0, 7)],
        2,
    );
    assert_eq!(
        ws.instances,
        vec![Instance {
            pattern: Pattern::LateSender,
            rank: 1,
            cause: Some(0),
            available_from: None,
            wait_ns: 60,
            start_ns: 40,
            site: Some(0xB0),
            comm: W,
        }]
    );
    assert_eq!(ws.counts.messages_matched, 1);
    assert_eq!(ws.counts.unmatched_sends + ws.counts.unmatched_receives, 0);
    assert_eq!(ws.counts.clock_violations_p2p, 0);
}

#[test]
fn early_sender_is_no_wait_state() {
    let ws = run(&[send(0, 10, 20, 1, 1, 0), recv(1, 50, 60, 2, 0, 0)], 2);
    assert!(ws.instances.is_empty());
    assert_eq!(ws.counts.messages_matched, 1);
}

#[test]
fn late_sender_via_irecv_and_wait() {
    // Irecv posted at 10, Wait entered at 50, Isend at 80: waiting counts from the Wait.
    let ws = run(
        &[
            ev(
                0,
                80,
                85,
                0xA0,
                Call::Isend {
                    dest: 1,
                    tag: 3,
                    comm: W,
                    bytes: 8,
                    request: 11,
                },
            ),
            ev(
                0,
                86,
                90,
                0xA1,
                Call::Wait {
                    requests: vec![(11, None)],
                },
            ),
            ev(
                1,
                10,
                12,
                0xB0,
                Call::Irecv {
                    source: None,
                    tag: None,
                    comm: W,
                    request: 5,
                },
            ),
            ev(
                1,
                50,
                100,
                0xB1,
                Call::Wait {
                    requests: vec![(
                        5,
                        Some(RecvStatus {
                            source: 0,
                            tag: 3,
                            bytes: 8,
                        }),
                    )],
                },
            ),
        ],
        2,
    );
    let ls = of(&ws, Pattern::LateSender);
    assert_eq!(ls.len(), 1);
    assert_eq!((ls[0].rank, ls[0].cause), (1, Some(0)));
    assert_eq!((ls[0].wait_ns, ls[0].start_ns), (30, 50));
    assert_eq!(ls[0].site, Some(0xB1), "attributed to the Wait's site");
    assert_eq!(ws.instances.len(), 1);
    assert_eq!(
        ws.counts.uncompleted_requests + ws.counts.unknown_requests,
        0
    );
}

#[test]
fn waitall_shares_the_interval_without_double_counting() {
    // Two Irecvs completed by one Wait entered at 0; sends at 30 (rank 2) and 50 (rank 0):
    // 30 ns charged to rank 2, the next 20 ns to rank 0, 50 in all.
    let irecv = |src: Rank, req| {
        ev(
            3,
            0,
            0,
            0xC0,
            Call::Irecv {
                source: Some(src),
                tag: Some(0),
                comm: W,
                request: req,
            },
        )
    };
    let ws = run(
        &[
            send(0, 50, 51, 1, 3, 0),
            send(2, 30, 31, 2, 3, 0),
            irecv(0, 1),
            irecv(2, 2),
            ev(
                3,
                0,
                60,
                0xC1,
                Call::Wait {
                    requests: vec![(1, None), (2, None)],
                },
            ),
        ],
        4,
    );
    let ls = of(&ws, Pattern::LateSender);
    let got: Vec<_> = ls
        .iter()
        .map(|i| (i.cause, i.start_ns, i.wait_ns))
        .collect();
    assert_eq!(got, vec![(Some(2), 0, 30), (Some(0), 30, 20)]);
    assert_eq!(rank(&ws, 3).suffered_ns, 50);
    assert!(of(&ws, Pattern::LateSenderWrongOrder).is_empty());
}

#[test]
fn wrong_order() {
    // Rank 2 receives from rank 0 first (sent late, at 100) then from rank 1 (sent at 20).
    // While waiting 10..100 for rank 0, rank 1's message was already there.
    let ws = run(
        &[
            send(0, 100, 101, 0xA0, 2, 0),
            send(1, 20, 21, 0xA1, 2, 0),
            recv(2, 10, 105, 0xB0, 0, 0),
            recv(2, 106, 107, 0xB1, 1, 0),
        ],
        3,
    );
    assert_eq!(
        ws.instances,
        vec![Instance {
            pattern: Pattern::LateSenderWrongOrder,
            rank: 2,
            cause: Some(0),
            available_from: Some(1),
            wait_ns: 90,
            start_ns: 10,
            site: Some(0xB0),
            comm: W,
        }]
    );
    // Rank 1's message arriving only at 100 would not be wrong order.
    let ws = run(
        &[
            send(0, 100, 101, 0xA0, 2, 0),
            send(1, 100, 101, 0xA1, 2, 0),
            recv(2, 10, 105, 0xB0, 0, 0),
            recv(2, 106, 107, 0xB1, 1, 0),
        ],
        3,
    );
    assert_eq!(of(&ws, Pattern::LateSender).len(), 1);
    assert!(of(&ws, Pattern::LateSenderWrongOrder).is_empty());
}

#[test]
fn late_receiver_for_synchronous_send() {
    // Ssend entered at 10, receive entered at 70, send leaves at 80: 60 ns at rank 0.
    let ws = run(
        &[ssend(0, 10, 80, 0xA0, 1, 0), recv(1, 70, 85, 0xB0, 0, 0)],
        2,
    );
    assert_eq!(
        ws.instances,
        vec![Instance {
            pattern: Pattern::LateReceiver,
            rank: 0,
            cause: Some(1),
            available_from: None,
            wait_ns: 60,
            start_ns: 10,
            site: Some(0xA0),
            comm: W,
        }]
    );
    // The same timing with a standard send: not checked by default (it may be buffered) ...
    let events = [send(0, 10, 80, 0xA0, 1, 0), recv(1, 70, 85, 0xB0, 0, 0)];
    assert!(run(&events, 2).instances.is_empty());
    // ... but checked once sends of 50 ns or more are taken to be rendezvous.
    let th = Thresholds {
        rendezvous_send_ns: Some(50),
        ..Thresholds::default()
    };
    let ws = analyse(&events, &world(2), th);
    assert_eq!(of(&ws, Pattern::LateReceiver)[0].wait_ns, 60);
}

#[test]
fn non_overtaking_matching_same_tag() {
    // Two messages 0→1 with the same tag: the first send (at 10) matches the first receive
    // (at 0), the second send (at 200) the second receive (at 50). A wrong pairing would
    // find no wait at the first receive and 150 at the second; the right one 10 and 150.
    let ws = run(
        &[
            send(0, 10, 11, 0xA0, 1, 4),
            send(0, 200, 201, 0xA1, 1, 4),
            recv(1, 0, 20, 0xB0, 0, 4),
            recv(1, 50, 210, 0xB1, 0, 4),
        ],
        2,
    );
    let got: Vec<_> = of(&ws, Pattern::LateSender)
        .iter()
        .map(|i| (i.site, i.wait_ns))
        .collect();
    assert_eq!(got, vec![(Some(0xB0), 10), (Some(0xB1), 150)]);
    assert_eq!(ws.counts.messages_matched, 2);
}

#[test]
fn barrier_of_four() {
    // Enters 10, 20, 30, 70; exits 75, 76, 78, 80.
    let b = Call::Barrier { comm: W };
    let ws = run(
        &[
            coll(0, 10, 75, b.clone()),
            coll(1, 20, 76, b.clone()),
            coll(2, 30, 78, b.clone()),
            coll(3, 70, 80, b),
        ],
        4,
    );
    let wait: Vec<_> = of(&ws, Pattern::WaitAtBarrier)
        .iter()
        .map(|i| (i.rank, i.wait_ns, i.cause))
        .collect();
    assert_eq!(
        wait,
        vec![(0, 60, Some(3)), (1, 50, Some(3)), (2, 40, Some(3))]
    );
    // Completion: exit − first exit (75) = 0, 1, 3, 5.
    let comp: Vec<_> = of(&ws, Pattern::BarrierCompletion)
        .iter()
        .map(|i| (i.rank, i.wait_ns, i.cause))
        .collect();
    assert_eq!(comp, vec![(1, 1, None), (2, 3, None), (3, 5, None)]);
    assert_eq!(rank(&ws, 3).caused_ns, 150);
    assert_eq!(ws.counts.collectives_matched, 1);
}

#[test]
fn nxn_allreduce_and_alltoall() {
    let a = Call::Allreduce { comm: W };
    let x = Call::NxN { comm: W };
    let ws = run(
        &[
            coll(0, 0, 50, a.clone()),
            coll(1, 40, 52, a.clone()),
            coll(2, 10, 51, a),
            coll(0, 100, 130, x.clone()),
            coll(1, 110, 130, x.clone()),
            coll(2, 125, 130, x),
        ],
        3,
    );
    let wait: Vec<_> = of(&ws, Pattern::WaitAtNxN)
        .iter()
        .map(|i| (i.rank, i.wait_ns, i.cause))
        .collect();
    assert_eq!(
        wait,
        vec![
            (0, 40, Some(1)),
            (0, 25, Some(2)),
            (1, 15, Some(2)),
            (2, 30, Some(1)),
        ]
    );
    let comp: Vec<_> = of(&ws, Pattern::NxNCompletion)
        .iter()
        .map(|i| (i.rank, i.wait_ns))
        .collect();
    assert_eq!(comp, vec![(1, 2), (2, 1)]);
    assert_eq!(ws.counts.collectives_matched, 2);
}

#[test]
fn late_broadcast_root_late() {
    // Root 2 enters at 100; ranks 0 and 1 at 20 and 60; rank 3 after the root.
    let b = Call::Bcast { comm: W, root: 2 };
    let ws = run(
        &[
            coll(0, 20, 110, b.clone()),
            coll(1, 60, 110, b.clone()),
            coll(2, 100, 105, b.clone()),
            coll(3, 120, 125, b),
        ],
        4,
    );
    let got: Vec<_> = ws
        .instances
        .iter()
        .map(|i| (i.pattern, i.rank, i.wait_ns, i.cause))
        .collect();
    assert_eq!(
        got,
        vec![
            (Pattern::LateBroadcast, 0, 80, Some(2)),
            (Pattern::LateBroadcast, 1, 40, Some(2)),
        ]
    );
}

#[test]
fn early_reduce() {
    // Root 0 enters at 10; senders at 50, 30, 90: it waits for the first (rank 2, at 30).
    let r = Call::Reduce { comm: W, root: 0 };
    let ws = run(
        &[
            coll(0, 10, 100, r.clone()),
            coll(1, 50, 55, r.clone()),
            coll(2, 30, 35, r.clone()),
            coll(3, 90, 95, r),
        ],
        4,
    );
    let got: Vec<_> = ws
        .instances
        .iter()
        .map(|i| (i.pattern, i.rank, i.wait_ns, i.cause, i.site))
        .collect();
    assert_eq!(
        got,
        vec![(Pattern::EarlyReduce, 0, 20, Some(2), Some(0x500))]
    );
}

#[test]
fn early_scan_of_three() {
    // Enters 50, 10, 30: rank 1 waits 40 for rank 0; rank 2 waits 20 for max(50, 10).
    let s = Call::Scan { comm: W };
    let ws = run(
        &[
            coll(0, 50, 60, s.clone()),
            coll(1, 10, 61, s.clone()),
            coll(2, 30, 62, s),
        ],
        3,
    );
    let got: Vec<_> = ws
        .instances
        .iter()
        .map(|i| (i.pattern, i.rank, i.wait_ns, i.cause))
        .collect();
    assert_eq!(
        got,
        vec![
            (Pattern::EarlyScan, 1, 40, Some(0)),
            (Pattern::EarlyScan, 2, 20, Some(0)),
        ]
    );
}

#[test]
fn scan_order_is_communicator_order() {
    // A communicator {3, 1}: comm rank 0 is world rank 3, so world rank 1 waits for it.
    let comms = HashMap::from([(9, vec![3, 1])]);
    let s = Call::Scan { comm: 9 };
    let ws = analyse(
        &[coll(1, 10, 50, s.clone()), coll(3, 40, 45, s)],
        &comms,
        Thresholds::default(),
    );
    let got: Vec<_> = ws
        .instances
        .iter()
        .map(|i| (i.rank, i.wait_ns, i.cause))
        .collect();
    assert_eq!(got, vec![(1, 30, Some(3))]);
}

#[test]
fn thresholds_filter_separately() {
    // A 60 ns late sender and a barrier with waits 60, 50, 40.
    let b = Call::Barrier { comm: W };
    let events = [
        send(0, 100, 110, 0xA0, 1, 0),
        recv(1, 40, 120, 0xB0, 0, 0),
        coll(0, 200, 270, b.clone()),
        coll(1, 210, 270, b.clone()),
        coll(2, 220, 270, b.clone()),
        coll(3, 260, 270, b),
    ];
    let th = Thresholds {
        p2p_min_ns: 61,
        collective_min_ns: 50,
        rendezvous_send_ns: None,
    };
    let ws = analyse(&events, &world(4), th);
    assert!(of(&ws, Pattern::LateSender).is_empty());
    let kept: Vec<_> = of(&ws, Pattern::WaitAtBarrier)
        .iter()
        .map(|i| i.wait_ns)
        .collect();
    assert_eq!(kept, vec![60, 50]);
    assert_eq!(ws.counts.below_threshold_p2p, 1);
    assert_eq!(ws.counts.below_threshold_collective, 1);
    // At 60 the late sender counts (a threshold is a minimum, inclusive).
    let th = Thresholds {
        p2p_min_ns: 60,
        ..th
    };
    assert_eq!(
        of(&analyse(&events, &world(4), th), Pattern::LateSender).len(),
        1
    );
}

#[test]
fn clock_violation_counted_and_clamped() {
    // The receive ends at 90, before the matching send begins at 100: the clocks disagree.
    let ws = run(&[send(0, 100, 110, 1, 1, 0), recv(1, 40, 90, 2, 0, 0)], 2);
    assert!(ws.instances.is_empty());
    assert_eq!(ws.counts.clock_violations_p2p, 1);
    assert_eq!(ws.counts.messages_matched, 1);
    assert_eq!(rank(&ws, 1).suffered_ns, 0);
    // In a barrier: rank 0 leaves at 50, before rank 1 enters at 60.
    let b = Call::Barrier { comm: W };
    let ws = run(&[coll(0, 10, 50, b.clone()), coll(1, 60, 70, b)], 2);
    assert!(of(&ws, Pattern::WaitAtBarrier).is_empty());
    assert_eq!(ws.counts.clock_violations_collective, 1);
}

#[test]
fn a_violation_within_the_clocks_error_ends_the_wait_at_the_exit() {
    // Rank 1 waits in its receive from 40 to 90; rank 0's send begins at 100 on the aligned
    // clocks. Each clock within 6 of rank 0's: the 10 apart is within their 12, so the send
    // began, as far as the clocks tell, when the receive ended: a late sender of 50.
    let events = [send(0, 100, 110, 1, 1, 0), recv(1, 40, 90, 2, 0, 0)];
    let error: HashMap<Rank, u64> = [(0, 6), (1, 6)].into();
    let ws = analyse_aligned(&events, &world(2), Thresholds::default(), &error);
    let late = of(&ws, Pattern::LateSender);
    assert_eq!(late.len(), 1);
    assert_eq!((late[0].start_ns, late[0].wait_ns), (40, 50));
    assert_eq!(ws.counts.clock_violations_p2p, 0);
    assert_eq!(ws.counts.clock_violations_within_error, 1);
    // Each within 4: 10 apart is beyond their 8, a violation, given no wait.
    let error: HashMap<Rank, u64> = [(0, 4), (1, 4)].into();
    let ws = analyse_aligned(&events, &world(2), Thresholds::default(), &error);
    assert!(ws.instances.is_empty());
    assert_eq!(ws.counts.clock_violations_p2p, 1);
    assert_eq!(ws.counts.clock_violations_within_error, 0);
    // A barrier rank 0 leaves at 50, 10 before rank 1 enters at 60: within 6 + 6, rank 0
    // waited from 10 to its exit.
    let b = Call::Barrier { comm: W };
    let events = [coll(0, 10, 50, b.clone()), coll(1, 60, 70, b)];
    let error: HashMap<Rank, u64> = [(0, 6), (1, 6)].into();
    let ws = analyse_aligned(&events, &world(2), Thresholds::default(), &error);
    let waits = of(&ws, Pattern::WaitAtBarrier);
    assert_eq!(waits.len(), 1);
    assert_eq!((waits[0].rank, waits[0].wait_ns), (0, 40));
    assert_eq!(ws.counts.clock_violations_collective, 0);
}

#[test]
fn unmatched_messages_counted_and_shown() {
    // Two sends 0→1, one receive: the second send is unmatched. A receive from rank 2,
    // which sent nothing: unmatched too.
    let ws = run(
        &[
            send(0, 10, 11, 0xA0, 1, 0),
            send(0, 20, 21, 0xA1, 1, 0),
            recv(1, 30, 31, 0xB0, 0, 0),
            recv(1, 40, 41, 0xB1, 2, 5),
        ],
        3,
    );
    assert_eq!(ws.counts.messages_matched, 1);
    assert_eq!(ws.counts.unmatched_sends, 1);
    assert_eq!(ws.counts.unmatched_receives, 1);
    assert_eq!(
        ws.unmatched,
        vec![
            Unmatched {
                kind: UnmatchedKind::Send,
                rank: 0,
                peer: 1,
                comm: W,
                tag: 0,
                enter_ns: 20,
                site: Some(0xA1),
            },
            Unmatched {
                kind: UnmatchedKind::Receive,
                rank: 1,
                peer: 2,
                comm: W,
                tag: 5,
                enter_ns: 40,
                site: Some(0xB1),
            },
        ]
    );
}

#[test]
fn bad_requests_and_collectives_counted() {
    let irecv = ev(
        1,
        0,
        1,
        1,
        Call::Irecv {
            source: None,
            tag: None,
            comm: W,
            request: 1,
        },
    );
    let wait = ev(
        1,
        2,
        3,
        1,
        Call::Wait {
            requests: vec![(1, None), (99, None)],
        },
    );
    let never = ev(
        1,
        4,
        5,
        1,
        Call::Irecv {
            source: Some(0),
            tag: Some(0),
            comm: W,
            request: 2,
        },
    );
    let b = Call::Barrier { comm: W };
    let events = [
        irecv,
        wait,
        never,
        coll(0, 10, 20, b.clone()),
        coll(0, 30, 40, b.clone()),
        coll(1, 10, 20, Call::Allreduce { comm: W }),
        coll(1, 50, 51, Call::Barrier { comm: 77 }),
        ev(0, 9, 8, 1, Call::Other),
    ];
    let ws = run(&events, 2);
    assert_eq!(ws.counts.unresolved_receives, 1);
    assert_eq!(ws.counts.unknown_requests, 1);
    assert_eq!(ws.counts.uncompleted_requests, 1);
    assert_eq!(ws.counts.collectives_mismatched, 1);
    assert_eq!(ws.counts.collectives_incomplete, 1);
    assert_eq!(ws.counts.collective_calls_unknown_comm, 1);
    assert_eq!(ws.counts.invalid_events, 1);
    assert!(ws.instances.is_empty());
}

#[test]
fn per_rank_suffered_and_caused() {
    // Rank 1 waits 60 for rank 0 (late sender); in a barrier ranks 0 and 1 wait 30 and 20
    // for rank 2, and rank 2 leaves 5 after the others (completion, caused by nobody).
    let b = Call::Barrier { comm: W };
    let ws = run(
        &[
            send(0, 100, 110, 0xA0, 1, 0),
            recv(1, 40, 120, 0xB0, 0, 0),
            coll(0, 200, 240, b.clone()),
            coll(1, 210, 240, b.clone()),
            coll(2, 230, 245, b),
        ],
        3,
    );
    let sums: Vec<_> = ws
        .ranks
        .iter()
        .map(|r| (r.rank, r.suffered_ns, r.caused_ns))
        .collect();
    assert_eq!(sums, vec![(0, 30, 60), (1, 80, 0), (2, 5, 50)]);
    let r1 = rank(&ws, 1);
    assert_eq!(
        r1.by_pattern,
        vec![
            RankPattern {
                pattern: Pattern::LateSender,
                suffered_ns: 60,
                caused_ns: 0,
            },
            RankPattern {
                pattern: Pattern::WaitAtBarrier,
                suffered_ns: 20,
                caused_ns: 0,
            },
        ]
    );
    let totals: Vec<_> = ws
        .patterns
        .iter()
        .map(|p| (p.pattern, p.count, p.total_ns, p.max_ns))
        .collect();
    assert_eq!(
        totals,
        vec![
            (Pattern::LateSender, 1, 60, 60),
            (Pattern::WaitAtBarrier, 2, 50, 30),
            (Pattern::BarrierCompletion, 1, 5, 5),
        ]
    );
}

#[test]
fn per_site_aggregation() {
    // Three late-sender receives at site 0xB0 (waits 10, 20, 60) and one at 0xB1 (5).
    let ws = run(
        &[
            send(0, 20, 21, 1, 1, 0),
            send(0, 120, 121, 1, 1, 0),
            send(0, 260, 261, 1, 1, 0),
            send(0, 310, 311, 1, 1, 0),
            recv(1, 10, 30, 0xB0, 0, 0),
            recv(1, 100, 130, 0xB0, 0, 0),
            recv(1, 200, 270, 0xB0, 0, 0),
            recv(1, 305, 320, 0xB1, 0, 0),
        ],
        2,
    );
    assert_eq!(
        ws.sites,
        vec![
            SiteWaits {
                site: Some(0xB0),
                pattern: Pattern::LateSender,
                count: 3,
                total_ns: 90,
                mean_ns: 30.0,
                max_ns: 60,
            },
            SiteWaits {
                site: Some(0xB1),
                pattern: Pattern::LateSender,
                count: 1,
                total_ns: 5,
                mean_ns: 5.0,
                max_ns: 5,
            },
        ]
    );
}
