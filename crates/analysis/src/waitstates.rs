//! MPI wait states: Scalasca's patterns over per-rank MPI call records.
//!
//! The input is every rank's MPI calls in program order, already converted to nanoseconds on a
//! common clock and to world ranks ([`MpiEvent`]), plus the communicators' members. Messages are
//! matched by (communicator, source, destination, tag) in order, which is MPI's non-overtaking
//! rule; collectives by their sequence number on each communicator. The patterns are those of
//! Scalasca (Geimer et al., "The Scalasca performance toolset architecture", Concurrency and
//! Computation: Practice and Experience 22(6), 2010, and the Scalasca pattern documentation),
//! each defined on the pattern it computes; the thesis's "delay time" (waiting suffered) and
//! "late time" (waiting caused), its thresholds (MPITool.conf) and its per-location summary are
//! from §3.2.2.3 and tables 4.13–4.15. docs/methodology.md §6 gives every formula.
//!
//! Pure: no file, process or clock is touched, so everything is tested with constructed inputs.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

pub type Rank = u32;
pub type Tag = i32;
pub type CommId = u32;
pub type RequestId = u64;

/// What a completed receive request reported (`MPI_Status`), source as a world rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct RecvStatus {
    pub source: Rank,
    pub tag: Tag,
    pub bytes: u64,
}

/// One MPI call. Ranks (peers, roots) are world ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub enum Call {
    /// A blocking send; `synchronous` for `MPI_Ssend` (it completes only once the receive has
    /// started).
    Send {
        dest: Rank,
        tag: Tag,
        comm: CommId,
        bytes: u64,
        synchronous: bool,
    },
    /// A blocking receive; source and tag are the matched ones (from the status).
    Recv {
        source: Rank,
        tag: Tag,
        comm: CommId,
        bytes: u64,
    },
    Isend {
        dest: Rank,
        tag: Tag,
        comm: CommId,
        bytes: u64,
        request: RequestId,
    },
    /// A non-blocking receive as posted; `None` for `MPI_ANY_SOURCE` / `MPI_ANY_TAG`. It is
    /// matched at the [`Call::Wait`] that completes it, with the status given there.
    Irecv {
        source: Option<Rank>,
        tag: Option<Tag>,
        comm: CommId,
        request: RequestId,
    },
    /// Completion of requests (`MPI_Wait`, `Waitall`, a successful `Test`...): each request,
    /// and for a receive its status when known.
    Wait {
        requests: Vec<(RequestId, Option<RecvStatus>)>,
    },
    Barrier {
        comm: CommId,
    },
    /// One-to-N rooted: `MPI_Bcast`.
    Bcast {
        comm: CommId,
        root: Rank,
    },
    /// One-to-N rooted: `MPI_Scatter(v)`.
    Scatter {
        comm: CommId,
        root: Rank,
    },
    /// N-to-one rooted: `MPI_Reduce`.
    Reduce {
        comm: CommId,
        root: Rank,
    },
    /// N-to-one rooted: `MPI_Gather(v)`.
    Gather {
        comm: CommId,
        root: Rank,
    },
    Allreduce {
        comm: CommId,
    },
    /// The other N-to-N collectives: `MPI_Allgather(v)`, `Alltoall(v,w)`,
    /// `Reduce_scatter(_block)`.
    NxN {
        comm: CommId,
    },
    Scan {
        comm: CommId,
    },
    Exscan {
        comm: CommId,
    },
    /// Any other call: kept out of every pattern.
    Other,
}

/// One MPI call by one rank, times in ns on the common clock, `site` the call-site address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct MpiEvent {
    pub rank: Rank,
    pub enter_ns: u64,
    pub exit_ns: u64,
    pub site: Option<u64>,
    pub call: Call,
}

/// The thesis's MPITool.conf filters (§3.2.2.3): a wait state counts only if its waiting time is
/// at least the threshold for its kind. Waits of 0 never count.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema, Deserialize,
)]
pub struct Thresholds {
    /// Minimum waiting for point-to-point patterns (Late Sender, Wrong Order, Late Receiver).
    pub p2p_min_ns: u64,
    /// Minimum waiting for collective patterns.
    pub collective_min_ns: u64,
    /// A standard-mode blocking send lasting at least this long is treated as rendezvous and
    /// checked for Late Receiver (standard sends may be buffered, so they are not checked by
    /// default). Synchronous sends are always checked.
    pub rendezvous_send_ns: Option<u64>,
}

/// Scalasca's wait-state patterns. Each instance belongs to exactly one: Scalasca's inclusive
/// "Late Sender" is `LateSender` + `LateSenderWrongOrder`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    schemars::JsonSchema,
    Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    LateSender,
    LateSenderWrongOrder,
    LateReceiver,
    WaitAtBarrier,
    BarrierCompletion,
    #[serde(rename = "wait-at-nxn")]
    WaitAtNxN,
    #[serde(rename = "nxn-completion")]
    NxNCompletion,
    LateBroadcast,
    EarlyReduce,
    EarlyScan,
}

impl Pattern {
    pub const ALL: [Pattern; 10] = [
        Pattern::LateSender,
        Pattern::LateSenderWrongOrder,
        Pattern::LateReceiver,
        Pattern::WaitAtBarrier,
        Pattern::BarrierCompletion,
        Pattern::WaitAtNxN,
        Pattern::NxNCompletion,
        Pattern::LateBroadcast,
        Pattern::EarlyReduce,
        Pattern::EarlyScan,
    ];

    /// Scalasca's name.
    pub fn title(self) -> &'static str {
        match self {
            Pattern::LateSender => "Late Sender",
            Pattern::LateSenderWrongOrder => "Late Sender, Wrong Order",
            Pattern::LateReceiver => "Late Receiver",
            Pattern::WaitAtBarrier => "Wait at Barrier",
            Pattern::BarrierCompletion => "Barrier Completion",
            Pattern::WaitAtNxN => "Wait at N x N",
            Pattern::NxNCompletion => "N x N Completion",
            Pattern::LateBroadcast => "Late Broadcast",
            Pattern::EarlyReduce => "Early Reduce",
            Pattern::EarlyScan => "Early Scan",
        }
    }

    /// A name for JSON keys and options: `late-sender`, `wait-at-nxn`, ...
    pub fn slug(self) -> &'static str {
        match self {
            Pattern::LateSender => "late-sender",
            Pattern::LateSenderWrongOrder => "late-sender-wrong-order",
            Pattern::LateReceiver => "late-receiver",
            Pattern::WaitAtBarrier => "wait-at-barrier",
            Pattern::BarrierCompletion => "barrier-completion",
            Pattern::WaitAtNxN => "wait-at-nxn",
            Pattern::NxNCompletion => "nxn-completion",
            Pattern::LateBroadcast => "late-broadcast",
            Pattern::EarlyReduce => "early-reduce",
            Pattern::EarlyScan => "early-scan",
        }
    }

    pub fn is_collective(self) -> bool {
        !matches!(
            self,
            Pattern::LateSender | Pattern::LateSenderWrongOrder | Pattern::LateReceiver
        )
    }
}

/// One wait state found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Instance {
    pub pattern: Pattern,
    /// The rank that waited.
    pub rank: Rank,
    /// The rank whose lateness caused the wait (none for the completion patterns, which are
    /// the operation's own cost).
    pub cause: Option<Rank>,
    /// For `LateSenderWrongOrder`: the sender of the earlier message that was already
    /// available while this rank waited.
    pub available_from: Option<Rank>,
    pub wait_ns: u64,
    /// When the waiting began.
    pub start_ns: u64,
    /// Call site of the waiting call (for a non-blocking receive, its `Wait`).
    pub site: Option<u64>,
    pub comm: CommId,
}

/// Count, total and maximum of one pattern's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PatternTotal {
    pub pattern: Pattern,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// One rank's share of one pattern: waiting suffered and waiting caused in others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RankPattern {
    pub pattern: Pattern,
    pub suffered_ns: u64,
    pub caused_ns: u64,
}

/// Per rank: the thesis's "delay time" (`suffered_ns`, time this rank was idle waiting for
/// others) and "late time" (`caused_ns`, time others waited because this rank was late).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RankWaits {
    pub rank: Rank,
    pub suffered_ns: u64,
    pub caused_ns: u64,
    pub by_pattern: Vec<RankPattern>,
}

/// Per call site and pattern: the thesis's per-location tables 4.14/4.15.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SiteWaits {
    pub site: Option<u64>,
    pub pattern: Pattern,
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub enum UnmatchedKind {
    Send,
    Receive,
}

/// A message with no counterpart in the traces: shown, never guessed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Unmatched {
    pub kind: UnmatchedKind,
    pub rank: Rank,
    pub peer: Rank,
    pub comm: CommId,
    pub tag: Tag,
    pub enter_ns: u64,
    pub site: Option<u64>,
}

/// What could not be used, and why. Nothing is dropped without being counted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
pub struct Counts {
    pub messages_matched: u64,
    pub unmatched_sends: u64,
    pub unmatched_receives: u64,
    /// Receives completed with no status and a wildcard source or tag: cannot be matched.
    pub unresolved_receives: u64,
    /// Requests completed by a `Wait` but never started on that rank.
    pub unknown_requests: u64,
    /// Requests started but never completed.
    pub uncompleted_requests: u64,
    pub collectives_matched: u64,
    /// Collective instances that some member of the communicator never reached.
    pub collectives_incomplete: u64,
    /// Collective instances whose members disagree on the operation or the root.
    pub collectives_mismatched: u64,
    /// Collective calls on a communicator missing from the table, or by a non-member.
    pub collective_calls_unknown_comm: u64,
    /// Events whose exit precedes their enter.
    pub invalid_events: u64,
    /// Clock-condition violations (a wait that ended before its cause began) larger than the
    /// two ranks' clock alignment error, each clamped to 0.
    pub clock_violations_p2p: u64,
    pub clock_violations_collective: u64,
    /// Clock-condition violations within the two ranks' clock alignment error: the cause began,
    /// as far as the clocks can tell, when the wait ended, so the wait is taken to end there
    /// (Scalasca's controlled logical clock moves the receive the same way).
    pub clock_violations_within_error: u64,
    /// Wait states with positive waiting below their threshold.
    pub below_threshold_p2p: u64,
    pub below_threshold_collective: u64,
}

/// Everything found.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct WaitStates {
    pub thresholds: Thresholds,
    /// Instances at or above their threshold, by rank then start time.
    pub instances: Vec<Instance>,
    pub patterns: Vec<PatternTotal>,
    /// Every rank that has events, in rank order.
    pub ranks: Vec<RankWaits>,
    /// By site then pattern.
    pub sites: Vec<SiteWaits>,
    pub unmatched: Vec<Unmatched>,
    pub counts: Counts,
}

#[derive(Debug, Clone, Copy)]
struct SendRec {
    rank: Rank,
    enter: u64,
    exit: u64,
    comm: CommId,
    /// Blocking and synchronous, or blocking and at least the rendezvous threshold long.
    check_late_receiver: bool,
    synchronous: bool,
    site: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct RecvRec {
    rank: Rank,
    source: Rank,
    tag: Tag,
    comm: CommId,
    /// Position of the posting call in the rank's program order.
    post_seq: usize,
    post_ns: u64,
    wait_enter: u64,
    wait_exit: u64,
    /// The blocking call that completed it (a `Recv` or a `Wait`): one id per call.
    group: usize,
    site: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CollKind {
    Barrier,
    Bcast,
    Scatter,
    Reduce,
    Gather,
    Allreduce,
    NxN,
    Scan,
    Exscan,
}

#[derive(Debug, Clone, Copy)]
struct CollRec {
    kind: CollKind,
    root: Option<Rank>,
    enter: u64,
    exit: u64,
    site: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
enum Pending {
    Send,
    Recv {
        source: Option<Rank>,
        tag: Option<Tag>,
        comm: CommId,
        post_seq: usize,
        post_ns: u64,
    },
}

type Channel = (CommId, Rank, Rank, Tag); // comm, source, dest, tag

/// Collects instances, applying the thresholds.
struct Found<'a> {
    thresholds: Thresholds,
    instances: Vec<Instance>,
    counts: Counts,
    clock_error_ns: &'a HashMap<Rank, u64>,
}

impl Found<'_> {
    /// Where a wait of `waiter` ends, given that its cause (on `cause`'s clock) came at
    /// `cause_at` and the wait was over at `exit`: `cause_at`, or `exit` when the cause came
    /// after it by no more than the two ranks' alignment error (a violation the clocks cannot
    /// tell from none); `None` for a larger violation, counted by the caller's kind.
    fn wait_end(&mut self, waiter: Rank, cause: Rank, cause_at: u64, exit: u64) -> Option<u64> {
        if cause_at <= exit {
            return Some(cause_at);
        }
        let error = |r| self.clock_error_ns.get(&r).copied().unwrap_or(0);
        if cause_at - exit <= error(waiter) + error(cause) {
            self.counts.clock_violations_within_error += 1;
            Some(exit)
        } else {
            None
        }
    }

    fn push(&mut self, i: Instance) {
        if i.wait_ns == 0 {
            return;
        }
        let collective = i.pattern.is_collective();
        let min = if collective {
            self.thresholds.collective_min_ns
        } else {
            self.thresholds.p2p_min_ns
        };
        if i.wait_ns < min {
            if collective {
                self.counts.below_threshold_collective += 1;
            } else {
                self.counts.below_threshold_p2p += 1;
            }
            return;
        }
        self.instances.push(i);
    }
}

/// Finds every wait state in `events` (all ranks, each rank's calls in program order; ranks
/// may be interleaved). `comms` maps each communicator to its members' world ranks, in
/// communicator rank order (which Early Scan needs).
pub fn analyse(
    events: &[MpiEvent],
    comms: &HashMap<CommId, Vec<Rank>>,
    thresholds: Thresholds,
) -> WaitStates {
    analyse_aligned(events, comms, thresholds, &HashMap::new())
}

/// [`analyse`] on clocks aligned to rank 0's with a known error: `clock_error_ns` gives, per
/// rank, how far its aligned time may be from rank 0's (half the round trip its offset came
/// from; absent means 0). A wait that ends before its cause began by no more than the two
/// ranks' errors is taken to end at its exit instead of being dropped.
pub fn analyse_aligned(
    events: &[MpiEvent],
    comms: &HashMap<CommId, Vec<Rank>>,
    thresholds: Thresholds,
    clock_error_ns: &HashMap<Rank, u64>,
) -> WaitStates {
    let mut found = Found {
        thresholds,
        instances: Vec::new(),
        counts: Counts::default(),
        clock_error_ns,
    };
    let mut by_rank: BTreeMap<Rank, Vec<&MpiEvent>> = BTreeMap::new();
    for e in events {
        let list = by_rank.entry(e.rank).or_default();
        if e.exit_ns < e.enter_ns {
            found.counts.invalid_events += 1;
        } else {
            list.push(e);
        }
    }

    let mut sends: HashMap<Channel, Vec<SendRec>> = HashMap::new();
    let mut recvs: Vec<RecvRec> = Vec::new();
    // comm -> rank -> that rank's collectives on comm, in order
    let mut colls: HashMap<CommId, HashMap<Rank, Vec<CollRec>>> = HashMap::new();
    let mut group = 0usize;
    for (&rank, list) in &by_rank {
        let mut pending: HashMap<RequestId, Pending> = HashMap::new();
        for (seq, e) in list.iter().enumerate() {
            let (enter, exit, site) = (e.enter_ns, e.exit_ns, e.site);
            let coll = |kind, root| CollRec {
                kind,
                root,
                enter,
                exit,
                site,
            };
            let mut add_coll = |comm: CommId, rec: CollRec| {
                if comms.get(&comm).is_some_and(|m| m.contains(&rank)) {
                    colls
                        .entry(comm)
                        .or_default()
                        .entry(rank)
                        .or_default()
                        .push(rec);
                } else {
                    found.counts.collective_calls_unknown_comm += 1;
                }
            };
            match &e.call {
                &Call::Send {
                    dest,
                    tag,
                    comm,
                    synchronous,
                    ..
                } => {
                    let long = thresholds
                        .rendezvous_send_ns
                        .is_some_and(|t| exit - enter >= t);
                    sends
                        .entry((comm, rank, dest, tag))
                        .or_default()
                        .push(SendRec {
                            rank,
                            enter,
                            exit,
                            comm,
                            check_late_receiver: synchronous || long,
                            synchronous,
                            site,
                        });
                }
                &Call::Isend {
                    dest,
                    tag,
                    comm,
                    request,
                    ..
                } => {
                    sends
                        .entry((comm, rank, dest, tag))
                        .or_default()
                        .push(SendRec {
                            rank,
                            enter,
                            exit,
                            comm,
                            check_late_receiver: false,
                            synchronous: false,
                            site,
                        });
                    if pending.insert(request, Pending::Send).is_some() {
                        found.counts.uncompleted_requests += 1;
                    }
                }
                &Call::Recv {
                    source, tag, comm, ..
                } => {
                    recvs.push(RecvRec {
                        rank,
                        source,
                        tag,
                        comm,
                        post_seq: seq,
                        post_ns: enter,
                        wait_enter: enter,
                        wait_exit: exit,
                        group,
                        site,
                    });
                    group += 1;
                }
                &Call::Irecv {
                    source,
                    tag,
                    comm,
                    request,
                } => {
                    let p = Pending::Recv {
                        source,
                        tag,
                        comm,
                        post_seq: seq,
                        post_ns: enter,
                    };
                    if pending.insert(request, p).is_some() {
                        found.counts.uncompleted_requests += 1;
                    }
                }
                Call::Wait { requests } => {
                    for &(request, status) in requests {
                        match pending.remove(&request) {
                            None => found.counts.unknown_requests += 1,
                            Some(Pending::Send) => {}
                            Some(Pending::Recv {
                                source,
                                tag,
                                comm,
                                post_seq,
                                post_ns,
                            }) => {
                                let resolved = match (status, source, tag) {
                                    (Some(s), _, _) => Some((s.source, s.tag)),
                                    (None, Some(s), Some(t)) => Some((s, t)),
                                    _ => None,
                                };
                                let Some((source, tag)) = resolved else {
                                    found.counts.unresolved_receives += 1;
                                    continue;
                                };
                                recvs.push(RecvRec {
                                    rank,
                                    source,
                                    tag,
                                    comm,
                                    post_seq,
                                    post_ns,
                                    wait_enter: enter,
                                    wait_exit: exit,
                                    group,
                                    site,
                                });
                            }
                        }
                    }
                    group += 1;
                }
                &Call::Barrier { comm } => add_coll(comm, coll(CollKind::Barrier, None)),
                &Call::Bcast { comm, root } => add_coll(comm, coll(CollKind::Bcast, Some(root))),
                &Call::Scatter { comm, root } => {
                    add_coll(comm, coll(CollKind::Scatter, Some(root)))
                }
                &Call::Reduce { comm, root } => add_coll(comm, coll(CollKind::Reduce, Some(root))),
                &Call::Gather { comm, root } => add_coll(comm, coll(CollKind::Gather, Some(root))),
                &Call::Allreduce { comm } => add_coll(comm, coll(CollKind::Allreduce, None)),
                &Call::NxN { comm } => add_coll(comm, coll(CollKind::NxN, None)),
                &Call::Scan { comm } => add_coll(comm, coll(CollKind::Scan, None)),
                &Call::Exscan { comm } => add_coll(comm, coll(CollKind::Exscan, None)),
                Call::Other => {}
            }
        }
        found.counts.uncompleted_requests += pending.len() as u64;
    }

    let unmatched = point_to_point(&mut found, sends, recvs);
    collectives(&mut found, &colls, comms);
    summarise(found, by_rank.keys().copied().collect(), unmatched)
}

/// Matches messages and finds Late Sender (with Wrong Order) and Late Receiver.
fn point_to_point(
    found: &mut Found,
    sends: HashMap<Channel, Vec<SendRec>>,
    mut recvs: Vec<RecvRec>,
) -> Vec<Unmatched> {
    // Non-overtaking: on one channel the k-th send matches the k-th receive in posting order.
    recvs.sort_by_key(|r| (r.rank, r.post_seq));
    let mut recv_ch: HashMap<Channel, Vec<RecvRec>> = HashMap::new();
    for r in recvs {
        recv_ch
            .entry((r.comm, r.source, r.rank, r.tag))
            .or_default()
            .push(r);
    }
    let mut unmatched = Vec::new();
    let mut pairs: Vec<(SendRec, RecvRec)> = Vec::new();
    let unmatched_recv = |ch: &Channel, r: &RecvRec| Unmatched {
        kind: UnmatchedKind::Receive,
        rank: ch.2,
        peer: ch.1,
        comm: ch.0,
        tag: ch.3,
        enter_ns: r.post_ns,
        site: r.site,
    };
    for (ch, ss) in &sends {
        let rs = recv_ch.remove(ch).unwrap_or_default();
        let n = ss.len().min(rs.len());
        pairs.extend(ss[..n].iter().copied().zip(rs[..n].iter().copied()));
        for s in &ss[n..] {
            unmatched.push(Unmatched {
                kind: UnmatchedKind::Send,
                rank: ch.1,
                peer: ch.2,
                comm: ch.0,
                tag: ch.3,
                enter_ns: s.enter,
                site: s.site,
            });
        }
        unmatched.extend(rs[n..].iter().map(|r| unmatched_recv(ch, r)));
    }
    for (ch, rs) in &recv_ch {
        unmatched.extend(rs.iter().map(|r| unmatched_recv(ch, r)));
    }
    unmatched.sort_by_key(|u| (u.rank, u.enter_ns, u.peer, u.tag));
    for u in &unmatched {
        match u.kind {
            UnmatchedKind::Send => found.counts.unmatched_sends += 1,
            UnmatchedKind::Receive => found.counts.unmatched_receives += 1,
        }
    }
    found.counts.messages_matched = pairs.len() as u64;

    // Late Receiver (Scalasca): a send blocked because the receive was posted later;
    // waiting = recv.enter − send.enter, at most the send's duration.
    for (s, r) in &pairs {
        if !s.check_late_receiver || r.post_ns <= s.enter {
            continue;
        }
        // A synchronous send cannot complete before its receive starts: where it seems to, the
        // clocks are wrong. A long standard send that did so was simply not waiting for it.
        let end = if s.synchronous {
            found.wait_end(s.rank, r.rank, r.post_ns, s.exit)
        } else {
            (r.post_ns <= s.exit).then_some(r.post_ns)
        };
        let Some(end) = end else {
            if s.synchronous {
                found.counts.clock_violations_p2p += 1;
            }
            continue;
        };
        found.push(Instance {
            pattern: Pattern::LateReceiver,
            rank: s.rank,
            cause: Some(r.rank),
            available_from: None,
            wait_ns: end - s.enter,
            start_ns: s.enter,
            site: s.site,
            comm: s.comm,
        });
    }

    // Late Sender: a receive waiting for a send entered later. Each receiver's messages in
    // posting order, with the earliest send among those posted at or after each position
    // (for Wrong Order).
    pairs.sort_by_key(|(_, r)| (r.rank, r.post_seq));
    let n = pairs.len();
    let mut earliest_after: Vec<(u64, Rank)> = vec![(u64::MAX, 0); n];
    for i in (0..n).rev() {
        let own = (pairs[i].0.enter, pairs[i].0.rank);
        earliest_after[i] = if i + 1 < n && pairs[i + 1].1.rank == pairs[i].1.rank {
            own.min(earliest_after[i + 1])
        } else {
            own
        };
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, (_, r)) in pairs.iter().enumerate() {
        groups.entry(r.group).or_default().push(i);
    }
    for members in groups.values_mut() {
        let rank = pairs[members[0]].1.rank;
        let last_post = members.iter().map(|&i| pairs[i].1.post_seq).max();
        // First message of this receiver posted after every receive this call completes.
        let lo = pairs.partition_point(|(_, r)| r.rank < rank);
        let hi = pairs.partition_point(|(_, r)| r.rank <= rank);
        let j = lo + pairs[lo..hi].partition_point(|(_, r)| Some(r.post_seq) <= last_post);
        let later = (j < hi).then(|| earliest_after[j]);
        // Several receives completed by one Wait: the waiting interval [wait enter, latest
        // send enter] is shared out in send order, so it is never counted twice.
        members.sort_by_key(|&i| (pairs[i].0.enter, i));
        let mut covered = pairs[members[0]].1.wait_enter;
        for &i in members.iter() {
            let (s, r) = pairs[i];
            let Some(end) = found.wait_end(r.rank, s.rank, s.enter, r.wait_exit) else {
                found.counts.clock_violations_p2p += 1;
                continue;
            };
            if end <= covered {
                continue;
            }
            let wrong_order = later.filter(|&(e, _)| e < end).map(|(_, from)| from);
            found.push(Instance {
                pattern: if wrong_order.is_some() {
                    Pattern::LateSenderWrongOrder
                } else {
                    Pattern::LateSender
                },
                rank: r.rank,
                cause: Some(s.rank),
                available_from: wrong_order,
                wait_ns: end - covered,
                start_ns: covered,
                site: r.site,
                comm: r.comm,
            });
            covered = end;
        }
    }
    unmatched
}

/// Matches collectives by sequence number on each communicator and finds their patterns.
fn collectives(
    found: &mut Found,
    colls: &HashMap<CommId, HashMap<Rank, Vec<CollRec>>>,
    comms: &HashMap<CommId, Vec<Rank>>,
) {
    let mut ids: Vec<CommId> = colls.keys().copied().collect();
    ids.sort_unstable();
    for comm in ids {
        let per = &colls[&comm];
        let members = &comms[&comm];
        let lists: Vec<&[CollRec]> = members
            .iter()
            .map(|m| per.get(m).map_or(&[][..], Vec::as_slice))
            .collect();
        let n = lists.iter().map(|l| l.len()).min().unwrap_or(0);
        let most = lists.iter().map(|l| l.len()).max().unwrap_or(0);
        found.counts.collectives_incomplete += (most - n) as u64;
        for k in 0..n {
            let recs: Vec<(Rank, CollRec)> = members
                .iter()
                .zip(&lists)
                .map(|(m, l)| (*m, l[k]))
                .collect();
            let first = recs[0].1;
            let agree = recs
                .iter()
                .all(|(_, c)| c.kind == first.kind && c.root == first.root);
            let root_ok = first.root.is_none_or(|root| members.contains(&root));
            if !agree || !root_ok {
                found.counts.collectives_mismatched += 1;
                continue;
            }
            found.counts.collectives_matched += 1;
            match (first.kind, first.root) {
                (CollKind::Barrier, _) => synchronising(
                    found,
                    comm,
                    &recs,
                    Pattern::WaitAtBarrier,
                    Pattern::BarrierCompletion,
                ),
                (CollKind::Allreduce | CollKind::NxN, _) => synchronising(
                    found,
                    comm,
                    &recs,
                    Pattern::WaitAtNxN,
                    Pattern::NxNCompletion,
                ),
                (CollKind::Bcast | CollKind::Scatter, Some(root)) => {
                    late_broadcast(found, comm, &recs, root)
                }
                (CollKind::Reduce | CollKind::Gather, Some(root)) => {
                    early_reduce(found, comm, &recs, root)
                }
                (CollKind::Scan | CollKind::Exscan, _) => early_scan(found, comm, &recs),
                (
                    CollKind::Bcast | CollKind::Scatter | CollKind::Reduce | CollKind::Gather,
                    None,
                ) => {}
            }
        }
    }
}

/// Waiting of `rank` (record `c`) for a cause that arrived at `until`; a wait that ended
/// before its cause began is a clock-condition violation: within the clocks' error the wait
/// ends at the call's exit, beyond it it is counted and clamped to 0.
fn collective_wait(
    found: &mut Found,
    pattern: Pattern,
    comm: CommId,
    rank: Rank,
    c: &CollRec,
    cause: Rank,
    until: u64,
) {
    if until <= c.enter {
        return;
    }
    let Some(until) = found.wait_end(rank, cause, until, c.exit) else {
        found.counts.clock_violations_collective += 1;
        return;
    };
    found.push(Instance {
        pattern,
        rank,
        cause: Some(cause),
        available_from: None,
        wait_ns: until - c.enter,
        start_ns: c.enter,
        site: c.site,
        comm,
    });
}

/// The member that entered last (the first of them in communicator order on a tie).
fn last_enter(recs: &[(Rank, CollRec)]) -> (Rank, u64) {
    recs.iter()
        .fold((recs[0].0, recs[0].1.enter), |best, (r, c)| {
            if c.enter > best.1 {
                (*r, c.enter)
            } else {
                best
            }
        })
}

/// Wait at Barrier / Wait at N×N (Scalasca): each member waits for the last to enter,
/// waiting = max(enter) − own enter. Barrier / N×N Completion: the time spent in the
/// operation after the first member has left it, own exit − min(exit) (equivalently, the
/// time from the last enter to own exit, less the least such time).
fn synchronising(
    found: &mut Found,
    comm: CommId,
    recs: &[(Rank, CollRec)],
    wait: Pattern,
    completion: Pattern,
) {
    let (last, last_enter) = last_enter(recs);
    for (rank, c) in recs {
        collective_wait(found, wait, comm, *rank, c, last, last_enter);
    }
    let first_exit = recs.iter().map(|(_, c)| c.exit).min().unwrap_or(0);
    for (rank, c) in recs {
        found.push(Instance {
            pattern: completion,
            rank: *rank,
            cause: None,
            available_from: None,
            wait_ns: c.exit - first_exit,
            start_ns: first_exit,
            site: c.site,
            comm,
        });
    }
}

/// Late Broadcast (Scalasca, 1-to-N operations): a non-root member entering before the root
/// waits root.enter − own enter.
fn late_broadcast(found: &mut Found, comm: CommId, recs: &[(Rank, CollRec)], root: Rank) {
    let Some(root_enter) = recs.iter().find(|(r, _)| *r == root).map(|(_, c)| c.enter) else {
        return;
    };
    for (rank, c) in recs.iter().filter(|(r, _)| *r != root) {
        collective_wait(
            found,
            Pattern::LateBroadcast,
            comm,
            *rank,
            c,
            root,
            root_enter,
        );
    }
}

/// Early Reduce (Scalasca, N-to-1 operations): the root entering "before any data could have
/// been sent" waits until the first non-root member enters: min(non-root enter) − root enter.
fn early_reduce(found: &mut Found, comm: CommId, recs: &[(Rank, CollRec)], root: Rank) {
    let Some((_, root_rec)) = recs.iter().find(|(r, _)| *r == root) else {
        return;
    };
    let first =
        recs.iter()
            .filter(|(r, _)| *r != root)
            .fold(None, |best: Option<(Rank, u64)>, (r, c)| match best {
                Some((_, e)) if e <= c.enter => best,
                _ => Some((*r, c.enter)),
            });
    if let Some((cause, first_enter)) = first {
        collective_wait(
            found,
            Pattern::EarlyReduce,
            comm,
            root,
            root_rec,
            cause,
            first_enter,
        );
    }
}

/// Early Scan (Scalasca, `MPI_Scan`/`MPI_Exscan`): member i (in communicator order) waits for
/// the last of members 0..i to enter: max(enter of 0..i−1) − own enter.
fn early_scan(found: &mut Found, comm: CommId, recs: &[(Rank, CollRec)]) {
    for i in 1..recs.len() {
        let (cause, latest) = last_enter(&recs[..i]);
        let (rank, c) = &recs[i];
        collective_wait(found, Pattern::EarlyScan, comm, *rank, c, cause, latest);
    }
}

#[derive(Default)]
struct Agg {
    count: u64,
    total: u64,
    max: u64,
}

impl Agg {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total += ns;
        self.max = self.max.max(ns);
    }
}

fn summarise(found: Found, ranks: Vec<Rank>, unmatched: Vec<Unmatched>) -> WaitStates {
    let Found {
        thresholds,
        mut instances,
        counts,
        ..
    } = found;
    instances.sort_by_key(|i| (i.rank, i.start_ns, i.pattern));
    let mut patterns: BTreeMap<Pattern, Agg> = BTreeMap::new();
    let mut sites: BTreeMap<(Option<u64>, Pattern), Agg> = BTreeMap::new();
    let mut per_rank: BTreeMap<Rank, BTreeMap<Pattern, (u64, u64)>> =
        ranks.into_iter().map(|r| (r, BTreeMap::new())).collect();
    for i in &instances {
        patterns.entry(i.pattern).or_default().add(i.wait_ns);
        sites.entry((i.site, i.pattern)).or_default().add(i.wait_ns);
        let me = per_rank.entry(i.rank).or_default().entry(i.pattern);
        me.or_default().0 += i.wait_ns;
        if let Some(cause) = i.cause {
            let them = per_rank.entry(cause).or_default().entry(i.pattern);
            them.or_default().1 += i.wait_ns;
        }
    }
    WaitStates {
        thresholds,
        patterns: patterns
            .into_iter()
            .map(|(pattern, a)| PatternTotal {
                pattern,
                count: a.count,
                total_ns: a.total,
                max_ns: a.max,
            })
            .collect(),
        ranks: per_rank
            .into_iter()
            .map(|(rank, by)| RankWaits {
                rank,
                suffered_ns: by.values().map(|v| v.0).sum(),
                caused_ns: by.values().map(|v| v.1).sum(),
                by_pattern: by
                    .into_iter()
                    .map(|(pattern, (suffered_ns, caused_ns))| RankPattern {
                        pattern,
                        suffered_ns,
                        caused_ns,
                    })
                    .collect(),
            })
            .collect(),
        sites: sites
            .into_iter()
            .map(|((site, pattern), a)| SiteWaits {
                site,
                pattern,
                count: a.count,
                total_ns: a.total,
                mean_ns: a.total as f64 / a.count as f64,
                max_ns: a.max,
            })
            .collect(),
        instances,
        unmatched,
        counts,
    }
}

#[cfg(test)]
mod tests;
