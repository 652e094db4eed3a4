use super::*;
use crate::waitstates::Pattern;
use trace::mpi::{arg, CallGroup, ClockSample, Function, MpiItem};

const MS: u64 = 1_000_000;

/// A rank stream under construction; times are given on rank 0's clock and written on the
/// rank's own clock, `local = global - offset(global)`.
struct Rank {
    input: RankInput,
    offset_at: fn(u64) -> i64,
}

fn world(size: u32) -> String {
    let mut s = "world".to_string();
    for r in 0..size {
        s.push_str(&format!(" {r}"));
    }
    s
}

impl Rank {
    fn new(rank: u32, size: u32, offset_at: fn(u64) -> i64) -> Rank {
        let mut input = RankInput {
            rank,
            closed: true,
            ..Default::default()
        };
        input.strings.insert(0, world(size));
        input.strings.insert(1, format!("mpi.host=node{rank}"));
        input.sites.insert(0, 0x401000);
        input.sites.insert(1, 0x402000);
        input.items.push(MpiItem::CommDefined {
            ts: 0,
            local: 0,
            members: 0,
        });
        input.items.push(MpiItem::Mark { ts: 0, label: 1 });
        Rank { input, offset_at }
    }

    fn local(&self, global: u64) -> u64 {
        (global as i64 - (self.offset_at)(global)) as u64
    }

    /// A call on `MPI_COMM_WORLD`, or with no communicator for the calls that take none.
    fn call(&mut self, f: Function, enter: u64, exit: u64, args: &[(u8, i64)]) -> &mut Rank {
        use Function::*;
        let comm = match f {
            Init | InitThread | Finalize | Start | Startall | RequestFree | Wait | Waitall
            | Waitany | Waitsome | Test | Testall | Testany | Testsome | Cancel => NO_COMM,
            _ => 0,
        };
        self.call_at(f, enter, exit, args, comm, 0)
    }

    fn call_at(
        &mut self,
        f: Function,
        enter: u64,
        exit: u64,
        args: &[(u8, i64)],
        comm: u32,
        site: u16,
    ) -> &mut Rank {
        let g = CallGroup {
            enter: self.local(enter),
            exit: self.local(exit),
            function: f as u8,
            site,
            comm,
            args: args.to_vec(),
            ret: 0,
        };
        self.input.items.push(MpiItem::Call(g));
        self
    }

    /// A clock measurement at global time `at` (phase 0 init, 1 finalize).
    fn clock(&mut self, phase: u8, at: u64) -> &mut Rank {
        let ts = self.local(at);
        self.input.items.push(MpiItem::Clock(ClockSample {
            ts,
            phase,
            round_trips: 10,
            best_round_trip_ns: 2000,
            offset_ns: (self.offset_at)(at),
        }));
        self
    }
}

fn none(_: u64) -> i64 {
    0
}

fn late_sender_pair(offset_of_rank1: fn(u64) -> i64) -> Vec<RankInput> {
    let mut r0 = Rank::new(0, 2, none);
    r0.call(Function::Init, 0, MS, &[]).clock(0, MS);
    // Rank 0 sends at 300 ms; rank 1 has waited in its receive since 100 ms.
    r0.call(
        Function::Send,
        300 * MS,
        301 * MS,
        &[(arg::DEST, 1), (arg::SEND_TAG, 7), (arg::BYTES_SENT, 64)],
    );
    r0.clock(1, 900 * MS)
        .call(Function::Finalize, 900 * MS, 901 * MS, &[]);
    let mut r1 = Rank::new(1, 2, offset_of_rank1);
    r1.call(Function::Init, 0, MS, &[]).clock(0, MS);
    r1.call_at(
        Function::Recv,
        100 * MS,
        302 * MS,
        &[
            (arg::SOURCE, 0),
            (arg::RECV_TAG, 7),
            (arg::STATUS_SOURCE, 0),
            (arg::STATUS_TAG, 7),
            (arg::STATUS_BYTES, 64),
        ],
        0,
        1,
    );
    r1.clock(1, 900 * MS)
        .call(Function::Finalize, 900 * MS, 901 * MS, &[]);
    vec![r0.input, r1.input]
}

fn late_sender_wait(run: &MpiRun) -> u64 {
    let ls: Vec<_> = run
        .waits
        .instances
        .iter()
        .filter(|i| i.pattern == Pattern::LateSender)
        .collect();
    assert_eq!(ls.len(), 1, "{:?}", run.waits.instances);
    assert_eq!((ls[0].rank, ls[0].cause), (1, Some(0)));
    assert_eq!(ls[0].site, Some(0x402000));
    ls[0].wait_ns
}

#[test]
fn a_late_sender_on_one_clock_is_found_with_its_site() {
    let run = analyse(&late_sender_pair(none), Thresholds::default());
    assert_eq!(late_sender_wait(&run), 200 * MS);
    assert_eq!(run.world_size, Some(2));
    assert!(run.missing_ranks.is_empty());
    assert_eq!(run.ranks[1].host.as_deref(), Some("node1"));
    assert_eq!(run.ranks[1].running_ns, 899 * MS);
    assert!(run.ranks.iter().all(|r| r.finalized && r.closed));
}

fn five_seconds_ahead(_: u64) -> i64 {
    // Rank 1's clock reads 5 s more than rank 0's: add −5 s to it.
    -5_000_000_000
}

fn ahead_and_drifting(global: u64) -> i64 {
    // 3 s ahead of rank 0 at time 0, and gaining 100 µs per second of run (100 ppm).
    -3_000_000_000 - (global / 10_000) as i64
}

#[test]
fn clock_offsets_are_corrected() {
    for offset in [five_seconds_ahead as fn(u64) -> i64, ahead_and_drifting] {
        let run = analyse(&late_sender_pair(offset), Thresholds::default());
        let wait = late_sender_wait(&run);
        // Linear interpolation of a linear drift is exact but for rounding.
        assert!(wait.abs_diff(200 * MS) <= 2, "{wait}");
        assert_eq!(run.waits.counts.clock_violations_p2p, 0);
    }
    let run = analyse(&late_sender_pair(ahead_and_drifting), Thresholds::default());
    let fit = run.ranks[1].clock;
    assert_eq!(fit.at_init_ns, Some(-3_000_000_000 - 100));
    // Per second of the rank's own clock, which runs 100 ppm fast.
    let drift = fit.drift_ns_per_s.unwrap();
    assert!((drift + 100_000.0).abs() < 20.0, "{drift}");
}

#[test]
fn uncorrected_offsets_would_hide_the_wait() {
    // The same trace with the clock samples removed: rank 1's receive appears 5 s after the
    // send, so the 200 ms it waited disappear. The correction is what finds them.
    let mut ranks = late_sender_pair(five_seconds_ahead);
    ranks[1].items.retain(|i| !matches!(i, MpiItem::Clock(_)));
    let run = analyse(&ranks, Thresholds::default());
    assert!(run.waits.instances.is_empty());
    assert_eq!(run.waits.counts.messages_matched, 1);
    assert_eq!(run.ranks[1].clock.at_init_ns, None);
}

#[test]
fn persistent_requests_become_one_message_per_start() {
    let mut r0 = Rank::new(0, 2, none);
    r0.call(
        Function::SendInit,
        MS,
        MS,
        &[
            (arg::DEST, 1),
            (arg::SEND_TAG, 3),
            (arg::BYTES_SENT, 8),
            (arg::REQUEST_CREATED, 1),
        ],
    );
    let mut r1 = Rank::new(1, 2, none);
    r1.call(
        Function::RecvInit,
        MS,
        MS,
        &[
            (arg::SOURCE, 0),
            (arg::RECV_TAG, 3),
            (arg::REQUEST_CREATED, 1),
        ],
    );
    // Two rounds: rank 0 starts its send 50 ms after rank 1 began waiting, each time.
    for round in 0..2u64 {
        let t = 100 * MS + round * 200 * MS;
        r0.call(
            Function::Start,
            t + 50 * MS,
            t + 50 * MS,
            &[(arg::REQUEST_STARTED, 1)],
        )
        .call(
            Function::Wait,
            t + 50 * MS,
            t + 51 * MS,
            &[(arg::REQUEST_COMPLETED, 1)],
        );
        r1.call(Function::Start, t, t, &[(arg::REQUEST_STARTED, 1)])
            .call(
                Function::Wait,
                t,
                t + 51 * MS,
                &[
                    (arg::REQUEST_COMPLETED, 1),
                    (arg::STATUS_SOURCE, 0),
                    (arg::STATUS_TAG, 3),
                    (arg::STATUS_BYTES, 8),
                ],
            );
    }
    r0.call(
        Function::RequestFree,
        600 * MS,
        600 * MS,
        &[(arg::REQUEST_FREED, 1)],
    );
    let run = analyse(&[r0.input, r1.input], Thresholds::default());
    let ls: Vec<u64> = run.waits.instances.iter().map(|i| i.wait_ns).collect();
    assert_eq!(ls, vec![50 * MS, 50 * MS]);
    assert_eq!(run.waits.counts.messages_matched, 2);
    assert_eq!(run.waits.counts.unknown_requests, 0);
    assert_eq!(run.waits.counts.uncompleted_requests, 0);
}

#[test]
fn sendrecv_is_a_send_and_a_receive_in_one_call() {
    // A ring of two: rank 1 enters its Sendrecv 80 ms after rank 0, so rank 0's receive half
    // waits 80 ms; rank 1's message from rank 0 was sent before it entered.
    let mut ranks = Vec::new();
    for (rank, enter) in [(0u32, 100 * MS), (1, 180 * MS)] {
        let peer = 1 - i64::from(rank);
        let mut r = Rank::new(rank, 2, none);
        r.call(
            Function::Sendrecv,
            enter,
            181 * MS,
            &[
                (arg::DEST, peer),
                (arg::SEND_TAG, 0),
                (arg::BYTES_SENT, 8),
                (arg::SOURCE, peer),
                (arg::RECV_TAG, 0),
                (arg::STATUS_SOURCE, peer),
                (arg::STATUS_TAG, 0),
                (arg::STATUS_BYTES, 8),
            ],
        );
        ranks.push(r.input);
    }
    let run = analyse(&ranks, Thresholds::default());
    let found: Vec<(u32, u64)> = run
        .waits
        .instances
        .iter()
        .filter(|i| i.pattern == Pattern::LateSender)
        .map(|i| (i.rank, i.wait_ns))
        .collect();
    assert_eq!(found, vec![(0, 80 * MS)]);
    assert_eq!(run.waits.counts.messages_matched, 2);
}

#[test]
fn a_rank_with_no_stream_is_named_and_the_others_analysed() {
    let mut ranks = late_sender_pair(none);
    for r in &mut ranks {
        r.strings.insert(0, world(3));
    }
    ranks[1].closed = false;
    let run = analyse(&ranks, Thresholds::default());
    assert_eq!(run.world_size, Some(3));
    assert_eq!(run.missing_ranks, vec![2]);
    assert!(!run.ranks[1].closed);
    assert_eq!(late_sender_wait(&run), 200 * MS);
}

#[test]
fn split_communicators_match_by_identity_and_intercomm_calls_are_counted() {
    // Ranks 0..3; {0,1} and {2,3} from one split: a barrier on each, rank 1 late by 40 ms and
    // rank 3 late by 10 ms. The two halves must not be mixed up although both are local id 2.
    let mut ranks = Vec::new();
    for rank in 0..4u32 {
        let mut r = Rank::new(rank, 4, none);
        let (leader, members) = if rank < 2 { (0, "0 1") } else { (2, "2 3") };
        r.input
            .strings
            .insert(5, format!("world/1:{leader} {members}"));
        r.input.items.push(MpiItem::CommDefined {
            ts: 0,
            local: 2,
            members: 5,
        });
        let late = match rank {
            1 => 40 * MS,
            3 => 10 * MS,
            _ => 0,
        };
        r.call_at(Function::Barrier, 100 * MS + late, 141 * MS, &[], 2, 0);
        r.call_at(Function::Barrier, 200 * MS, 201 * MS, &[], INTERCOMM, 0);
        r.call_at(Function::Barrier, 300 * MS, 301 * MS, &[], 9, 0);
        ranks.push(r.input);
    }
    let run = analyse(&ranks, Thresholds::default());
    let mut waits: Vec<(u32, u64, Option<u32>)> = run
        .waits
        .instances
        .iter()
        .filter(|i| i.pattern == Pattern::WaitAtBarrier)
        .map(|i| (i.rank, i.wait_ns, i.cause))
        .collect();
    waits.sort();
    assert_eq!(waits, vec![(0, 40 * MS, Some(1)), (2, 10 * MS, Some(3))]);
    assert_eq!(run.conversion.intercomm_calls, 4);
    assert_eq!(run.conversion.undefined_comm_calls, 4);
    assert_eq!(run.comms.len(), 3);
}

#[test]
fn call_statistics_are_per_function_and_site() {
    let run = analyse(&late_sender_pair(none), Thresholds::default());
    let recv = run.calls.iter().find(|c| c.function == "MPI_Recv").unwrap();
    assert_eq!(
        (recv.site, recv.count, recv.total_ns, recv.class),
        (Some(0x402000), 1, 202 * MS, "p2p")
    );
    let send = run.calls.iter().find(|c| c.function == "MPI_Send").unwrap();
    assert_eq!((send.site, send.total_ns), (Some(0x401000), MS));
    assert_eq!(run.ranks[1].p2p_ns, 202 * MS);
}

#[test]
fn cancelled_and_unknown_completions_are_counted() {
    let mut r0 = Rank::new(0, 1, none);
    r0.call(
        Function::Irecv,
        MS,
        MS,
        &[
            (arg::SOURCE, 0),
            (arg::RECV_TAG, 1),
            (arg::REQUEST_CREATED, 4),
        ],
    )
    .call(
        Function::Cancel,
        2 * MS,
        2 * MS,
        &[(arg::REQUEST_CANCELLED, 4)],
    )
    .call(
        Function::Wait,
        3 * MS,
        3 * MS,
        &[(arg::REQUEST_COMPLETED, 4), (arg::STATUS_CANCELLED, 1)],
    )
    .call(
        Function::Wait,
        4 * MS,
        4 * MS,
        &[(arg::REQUEST_COMPLETED, 99)],
    );
    let run = analyse(&[r0.input], Thresholds::default());
    assert_eq!(run.conversion.cancelled, 1);
    assert_eq!(run.waits.counts.unknown_requests, 1);
    assert!(run.waits.instances.is_empty());
}

#[test]
fn the_summary_has_the_thesis_columns() {
    let run = analyse(&late_sender_pair(none), Thresholds::default());
    let names: Vec<&str> = run.summary.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["p2p", "collective", "late-sender"]);
    let p2p = &run.summary[0];
    assert_eq!((p2p.count, p2p.total_ns), (2, 203 * MS));
    assert_eq!(p2p.running_total_ns, 2 * 899 * MS);
    assert_eq!(p2p.delay_total_ns, 200 * MS);
    let ls = &run.summary[2];
    // The instance's call (the receive) lasted 202 ms, of which 200 ms were waiting.
    assert_eq!(
        (ls.count, ls.total_ns, ls.delay_total_ns),
        (1, 202 * MS, 200 * MS)
    );
    assert_eq!(
        ls.most_delayed,
        Some(RankTotal {
            rank: 1,
            ns: 200 * MS
        })
    );
    assert_eq!(ls.least_delayed, Some(RankTotal { rank: 0, ns: 0 }));
    assert_eq!(
        ls.most_late,
        Some(RankTotal {
            rank: 0,
            ns: 200 * MS
        })
    );
    assert_eq!(ls.late_total_ns, 200 * MS);
    assert_eq!(run.instance_call_ns, vec![202 * MS]);
}

#[test]
fn patterns_are_named_in_json_by_their_slug() {
    for p in Pattern::ALL {
        let json = serde_json::to_value(p).unwrap();
        assert_eq!(json, serde_json::Value::String(p.slug().into()));
    }
}

fn noise_of_a_shared_clock(_: u64) -> i64 {
    // Within half the 2 µs round trip the samples measure: what one clock reads as.
    -900
}

#[test]
fn ranks_on_rank_0s_host_keep_their_clock_unless_the_offset_is_beyond_noise() {
    // Rank 1 says it runs on rank 0's host and measured an offset a shared clock gives:
    // one clock, the measurement is not applied.
    let mut ranks = late_sender_pair(noise_of_a_shared_clock);
    ranks[1].strings.insert(1, "mpi.host=node0".into());
    let run = analyse(&ranks, Thresholds::default());
    assert!(!run.ranks[1].clock.applied);
    assert_eq!(run.waits.instances.len(), 1);
    // The same host but 5 s apart (a time namespace, a container): its own clock, applied,
    // and the late sender is found as on another host.
    let mut ranks = late_sender_pair(five_seconds_ahead);
    ranks[1].strings.insert(1, "mpi.host=node0".into());
    let run = analyse(&ranks, Thresholds::default());
    assert!(run.ranks[1].clock.applied);
    assert_eq!(run.waits.instances.len(), 1);
    assert_eq!(run.waits.instances[0].wait_ns, 200 * MS);
    let run = analyse(&late_sender_pair(five_seconds_ahead), Thresholds::default());
    assert!(run.ranks[1].clock.applied);
}

/// Both clocks read together at global time `at` on a rank whose monotonic clock is `offset_at`
/// behind rank 0's and whose realtime clock is `real_error` ns ahead of the true time (whose
/// epoch here is rank 0's monotonic zero plus 1.7e18 ns).
fn realtime_mark(rank: &mut Rank, id: u32, phase: u8, at: u64, real_error: i64) {
    let mono = rank.local(at);
    let real = (1_700_000_000_000_000_000i64 + at as i64 + real_error) as u64;
    rank.input
        .strings
        .insert(id, format!("mpi.realtime={phase} {mono} {real}"));
    rank.input.items.push(MpiItem::Mark {
        ts: mono,
        label: id,
    });
}

/// A late sender whose rank 1 recorded on its own (no round trip with rank 0: a run directory
/// not shared, or announced too late): its clock 5 s ahead and drifting is aligned by the
/// realtime readings both ranks made, exactly when the realtime clocks agree, and off by
/// their disagreement when they do not.
#[test]
fn a_rank_that_recorded_on_its_own_is_aligned_by_realtime() {
    for (real_error, expected_wait) in [(0i64, 200 * MS), (3 * MS as i64, 197 * MS)] {
        let mut ranks = late_sender_pair(ahead_and_drifting);
        let mut r0 = Rank {
            input: ranks[0].clone(),
            offset_at: none,
        };
        realtime_mark(&mut r0, 90, 0, MS, 0);
        realtime_mark(&mut r0, 91, 1, 900 * MS, 0);
        let mut r1 = Rank {
            input: ranks[1].clone(),
            offset_at: ahead_and_drifting,
        };
        // On its own: its clock records carry no round trip.
        for item in &mut r1.input.items {
            if let MpiItem::Clock(c) = item {
                c.round_trips = 0;
                c.best_round_trip_ns = 0;
                c.offset_ns = 0;
            }
        }
        realtime_mark(&mut r1, 90, 0, MS, real_error);
        realtime_mark(&mut r1, 91, 1, 900 * MS, real_error);
        ranks[0] = r0.input;
        ranks[1] = r1.input;
        let run = analyse(&ranks, Thresholds::default());
        let fit = run.ranks[1].clock;
        assert_eq!(fit.source, ClockSource::Realtime);
        assert!(fit.applied);
        assert_eq!(fit.realtime_disagreement_ns, None);
        let wait = late_sender_wait(&run);
        assert!(
            wait.abs_diff(expected_wait) <= 2,
            "{wait} vs {expected_wait}"
        );
    }
}

/// Ranks that compared clocks keep the exchange's offsets; the realtime readings only
/// cross-check them: how far the hosts' realtime clocks disagree.
#[test]
fn exchanged_offsets_are_cross_checked_against_realtime() {
    let mut ranks = late_sender_pair(five_seconds_ahead);
    let mut r0 = Rank {
        input: ranks[0].clone(),
        offset_at: none,
    };
    realtime_mark(&mut r0, 90, 0, MS, 0);
    let mut r1 = Rank {
        input: ranks[1].clone(),
        offset_at: five_seconds_ahead,
    };
    // Rank 1's host's realtime clock is 4 ms fast.
    realtime_mark(&mut r1, 90, 0, MS, 4 * MS as i64);
    ranks[0] = r0.input;
    ranks[1] = r1.input;
    let run = analyse(&ranks, Thresholds::default());
    let fit = run.ranks[1].clock;
    assert_eq!(fit.source, ClockSource::Exchange);
    assert_eq!(fit.realtime_disagreement_ns, Some(-4 * MS as i64));
    assert_eq!(run.ranks[0].clock.source, ClockSource::Reference);
    assert_eq!(late_sender_wait(&run), 200 * MS);
}

/// Rank 0 sends at 300 ms; rank 1 polls for the message from 100 ms, with MPI_Test on an
/// Irecv (`probe` false) or MPI_Iprobe then MPI_Recv (`probe` true): either every poll as its
/// own group (`runs` false: CONTEND_MPI_POLL_RUNS=0), or the unsuccessful ones as one run
/// group, as the wrapper writes them.
fn polled_late_sender(probe: bool, runs: bool) -> Vec<RankInput> {
    let mut r0 = Rank::new(0, 2, none);
    r0.call(Function::Init, 0, MS, &[]);
    r0.call(
        Function::Send,
        300 * MS,
        301 * MS,
        &[(arg::DEST, 1), (arg::SEND_TAG, 7), (arg::BYTES_SENT, 64)],
    );
    r0.call(Function::Finalize, 900 * MS, 901 * MS, &[]);
    let mut r1 = Rank::new(1, 2, none);
    r1.call(Function::Init, 0, MS, &[]);
    let status = [
        (arg::STATUS_SOURCE, 0),
        (arg::STATUS_TAG, 7),
        (arg::STATUS_BYTES, 64),
    ];
    let (f, comm, polled): (Function, u32, Vec<(u8, i64)>) = if probe {
        (
            Function::Iprobe,
            0,
            vec![(arg::SOURCE, 0), (arg::RECV_TAG, 7)],
        )
    } else {
        r1.call(
            Function::Irecv,
            99 * MS,
            99 * MS + 1000,
            &[
                (arg::SOURCE, 0),
                (arg::RECV_TAG, 7),
                (arg::REQUEST_CREATED, 1),
            ],
        );
        (Function::Test, NO_COMM, vec![(arg::REQUEST_POLLED, 1)])
    };
    // 1000 unsuccessful polls, one every 201 µs, from 100 ms to about 301 ms.
    let polls = 1000u64;
    let step = 201_000u64;
    let last = 100 * MS + (polls - 1) * step;
    if runs {
        let mut args = polled.clone();
        args.extend([(arg::FLAG, 0), (arg::POLLS, polls as i64)]);
        r1.call_at(f, 100 * MS, last + step, &args, comm, 1);
    } else {
        for k in 0..polls {
            let mut args = if probe { polled.clone() } else { Vec::new() };
            args.push((arg::FLAG, 0));
            let t = 100 * MS + k * step;
            r1.call_at(f, t, t + 50, &args, comm, 1);
        }
    }
    let success = last + step;
    let mut args = if probe {
        polled.clone()
    } else {
        vec![(arg::REQUEST_COMPLETED, 1)]
    };
    args.extend(status);
    args.push((arg::FLAG, 1));
    r1.call_at(f, success, success + 50, &args, comm, 1);
    if probe {
        let mut args = vec![(arg::SOURCE, 0), (arg::RECV_TAG, 7)];
        args.extend(status);
        r1.call_at(Function::Recv, success + 100, success + 200, &args, 0, 0);
    }
    r1.call(Function::Finalize, 900 * MS, 901 * MS, &[]);
    vec![r0.input, r1.input]
}

#[test]
fn a_polled_late_sender_is_found_from_the_first_poll_with_and_without_runs() {
    for probe in [false, true] {
        let compressed = analyse(&polled_late_sender(probe, true), Thresholds::default());
        let each = analyse(&polled_late_sender(probe, false), Thresholds::default());
        // The same wait states from both recordings: from the first poll (100 ms) to the send.
        assert_eq!(
            compressed.waits.instances, each.waits.instances,
            "probe {probe}"
        );
        let ls: Vec<_> = compressed
            .waits
            .instances
            .iter()
            .filter(|i| i.pattern == Pattern::LateSender)
            .collect();
        assert_eq!(
            ls.len(),
            1,
            "probe {probe}: {:?}",
            compressed.waits.instances
        );
        assert_eq!((ls[0].rank, ls[0].cause), (1, Some(0)));
        assert_eq!(ls[0].wait_ns, 200 * MS);
        assert_eq!(ls[0].site, Some(0x402000), "at the poll's call site");
        // One message, matched once (the probe's Recv is not a second receive).
        assert_eq!(compressed.waits.counts.messages_matched, 1);
        assert_eq!(compressed.waits.counts.unmatched_receives, 0);
        assert_eq!(compressed.waits.counts.unmatched_sends, 0);
        // Both count every call the program made; the run is one span with its polls.
        let name = if probe { "MPI_Iprobe" } else { "MPI_Test" };
        for run in [&compressed, &each] {
            let stat = run.calls.iter().find(|c| c.function == name).unwrap();
            assert_eq!(stat.count, 1001, "probe {probe}");
        }
        let spans: Vec<_> = compressed
            .spans
            .iter()
            .filter(|s| s.function == name)
            .collect();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].polls, 1000);
        assert_eq!(spans[1].polls, 0);
    }
}

#[test]
fn a_run_ends_at_any_other_call_and_does_not_reach_a_later_success() {
    // Rank 1 polls MPI_Test from 100 ms, gives up and waits in MPI_Wait from 150 ms for the
    // send at 300 ms; later a successful MPI_Test at the same site must not wait from 100 ms.
    let mut inputs = polled_late_sender(false, true);
    let r1 = &mut inputs[1];
    let finalize = r1.items.pop().unwrap();
    let success = r1.items.pop().unwrap();
    let MpiItem::Call(mut run) = r1.items.pop().unwrap() else {
        panic!()
    };
    run.exit = 150 * MS;
    r1.items.push(MpiItem::Call(run));
    r1.items.push(MpiItem::Call(CallGroup {
        enter: 150 * MS,
        exit: 302 * MS,
        function: Function::Wait as u8,
        site: 0,
        comm: NO_COMM,
        args: vec![
            (arg::REQUEST_COMPLETED, 1),
            (arg::STATUS_SOURCE, 0),
            (arg::STATUS_TAG, 7),
            (arg::STATUS_BYTES, 64),
        ],
        ret: 0,
    }));
    let MpiItem::Call(mut late) = success else {
        panic!()
    };
    late.enter = 400 * MS;
    late.exit = 400 * MS;
    late.args = vec![(arg::FLAG, 1)]; // MPI_REQUEST_NULL: nothing completed
    r1.items.push(MpiItem::Call(late));
    r1.items.push(finalize);
    let run = analyse(&inputs, Thresholds::default());
    let ls: Vec<_> = run
        .waits
        .instances
        .iter()
        .filter(|i| i.pattern == Pattern::LateSender)
        .collect();
    assert_eq!(ls.len(), 1, "{:?}", run.waits.instances);
    assert_eq!(ls[0].wait_ns, 150 * MS, "in the MPI_Wait, from 150 ms");
    assert_eq!(ls[0].site, Some(0x401000));
}
