//! From the MPI wrapper's per-rank records to wait states: communicators given one id across
//! ranks, clocks aligned to rank 0's, calls converted to [`waitstates::Call`]s (persistent
//! requests, `Sendrecv`, matched probes), per-function and per-call-site statistics, and the
//! ranks that are missing or ended early named. Pure: inputs are decoded streams
//! (`trace::mpi::decode`) with their string and call-site tables.
//!
//! Clock alignment (docs/methodology.md §6.3): each rank measured its offset to rank 0 at
//! `MPI_Init` and `MPI_Finalize`; a time `t` is corrected to `t + o(t)` with `o` interpolated
//! linearly between the two measurements (constant when only one exists); if that makes any
//! time negative, every rank is shifted by one common amount.

use crate::waitstates::{self, Call, CommId, MpiEvent, Rank, RecvStatus, RequestId, Thresholds};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use trace::mpi::{arg, CallGroup, ClockSample, Function, FunctionClass, MpiItem};
use trace::mpi::{Malformed, ANY, INTERCOMM, NO_COMM, PROC_NULL};

/// One rank's decoded stream.
#[derive(Debug, Clone, Default)]
pub struct RankInput {
    pub rank: Rank,
    /// The rank's process id (from its stream's header).
    pub pid: u32,
    pub items: Vec<MpiItem>,
    /// The stream's string table (communicator members, marks).
    pub strings: HashMap<u32, String>,
    /// The stream's call-site table: index → return address.
    pub sites: HashMap<u16, u64>,
    /// The stream ended with its trailer (the rank's wrapper closed it).
    pub closed: bool,
    pub malformed: Malformed,
}

/// A rank's clock against rank 0's, as measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ClockFit {
    pub at_init_ns: Option<i64>,
    pub at_finalize_ns: Option<i64>,
    /// Drift between the two measurements, in ns per second.
    pub drift_ns_per_s: Option<f64>,
    /// The best round trip of the measurements (the offset's uncertainty is half of it).
    pub best_round_trip_ns: Option<u32>,
    /// The round trip each of the two offsets came from: each offset is within half of its
    /// own of the truth (Cristian), and on a busy machine the two differ by milliseconds.
    pub round_trip_at_init_ns: Option<u32>,
    pub round_trip_at_finalize_ns: Option<u32>,
    /// The offsets were applied (false for ranks on rank 0's host whose offsets are within
    /// the noise of a shared clock).
    pub applied: bool,
    /// Where the applied offsets came from.
    pub source: ClockSource,
    /// The measured offset at `MPI_Init` less the one `CLOCK_REALTIME` gives (both ranks'
    /// readings of their realtime and monotonic clocks): how far the hosts' realtime clocks
    /// disagree, a cross-check of NTP/PTP; None when either was not recorded.
    pub realtime_disagreement_ns: Option<i64>,
}

/// How a rank's clock was put on rank 0's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// Rank 0 itself.
    Reference,
    /// Round trips with rank 0 at `MPI_Init` and `MPI_Finalize` (the smallest kept).
    Exchange,
    /// The same clock as rank 0's (same host, offset within a round trip's noise): nothing
    /// applied.
    Shared,
    /// The rank recorded on its own (not in rank 0's start-up agreement): its
    /// `CLOCK_REALTIME` against rank 0's, which assumes the hosts' realtime clocks agree
    /// (NTP or PTP).
    Realtime,
    /// Nothing to align with: left on its own clock.
    Unaligned,
}

/// One rank's summary (the thesis's per-process figures).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RankSummary {
    pub rank: Rank,
    pub pid: u32,
    pub host: Option<String>,
    pub library: Option<String>,
    /// From the end of `MPI_Init` to the start of `MPI_Finalize` (or the last call recorded).
    pub running_ns: u64,
    /// Time in MPI calls other than Init and Finalize.
    pub mpi_ns: u64,
    pub p2p_ns: u64,
    pub collective_ns: u64,
    pub calls: u64,
    pub finalized: bool,
    /// The error code the rank passed to `MPI_Abort`, when it called it.
    pub aborted: Option<i64>,
    /// The stream was closed by its wrapper (false: the rank died or was killed).
    pub closed: bool,
    pub clock: ClockFit,
    /// How long the wrapper's start-up agreement kept the rank in `MPI_Init` after the MPI
    /// library's own initialisation (long only when some rank lacked the wrapper or the shared
    /// run directory).
    pub startup_wait_ns: Option<u64>,
}

/// Count and durations of one function at one call site.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CallStat {
    pub function: String,
    pub class: &'static str,
    pub site: Option<u64>,
    pub count: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

/// Calls the conversion kept out of the analysis, and why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Conversion {
    /// Calls on intercommunicators (not resolved by the wrapper).
    pub intercomm_calls: u64,
    /// Calls naming a communicator that the rank's stream never defined.
    pub undefined_comm_calls: u64,
    /// Function codes this contend does not know (a newer wrapper).
    pub unknown_functions: u64,
    /// Communicators first met in a call rather than seen created (`met#K`).
    pub met_comms: u64,
    /// Completions of cancelled requests (no message).
    pub cancelled: u64,
    /// Groups cut short and MPI records out of place in the streams.
    pub broken_groups: u64,
    pub stray_records: u64,
}

/// Everything `contend report` shows for an MPI run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MpiRun {
    /// From `MPI_COMM_WORLD`'s members as any rank recorded them.
    pub world_size: Option<u32>,
    pub ranks: Vec<RankSummary>,
    /// World ranks with no stream at all.
    pub missing_ranks: Vec<Rank>,
    /// Communicators: id, identity, members.
    pub comms: Vec<(CommId, String, Vec<Rank>)>,
    pub calls: Vec<CallStat>,
    /// The thesis's table 4.13: all point-to-point calls, all collective calls, then one
    /// column per wait-state pattern found.
    pub summary: Vec<SummaryColumn>,
    pub waits: waitstates::WaitStates,
    /// For each of `waits.instances`: the duration of the call it happened in.
    pub instance_call_ns: Vec<u64>,
    pub conversion: Conversion,
    #[serde(skip)]
    pub events: Vec<MpiEvent>,
    /// Every recorded call as it was made (aligned times), for timelines.
    #[serde(skip)]
    pub spans: Vec<CallSpan>,
}

/// One MPI call of one rank on the aligned clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSpan {
    pub rank: Rank,
    pub enter_ns: u64,
    pub exit_ns: u64,
    pub function: &'static str,
    pub site: Option<u64>,
    /// Unsuccessful polls this span stands for: a polling run (`Test*`, `Iprobe`, `Improbe`
    /// that found nothing, one span from the first poll to the run's end), else 0.
    pub polls: u64,
}

/// Aligns, converts and analyses every rank's records.
pub fn analyse(ranks: &[RankInput], thresholds: Thresholds) -> MpiRun {
    let mut conv = Conversion::default();
    let mut comm_ids: BTreeMap<String, CommId> = BTreeMap::new();
    let mut comm_members: HashMap<CommId, Vec<Rank>> = HashMap::new();
    let mut world_size = None;

    // Communicator identities first: the same string on every member is one communicator.
    let mut locals: Vec<HashMap<u32, CommId>> = Vec::with_capacity(ranks.len());
    for r in ranks {
        let mut map = HashMap::new();
        for item in &r.items {
            if let MpiItem::CommDefined { local, members, .. } = item {
                let Some(text) = r.strings.get(members) else {
                    conv.stray_records += 1;
                    continue;
                };
                let Some((gid, list)) = parse_members(text) else {
                    conv.stray_records += 1;
                    continue;
                };
                if gid == "world" {
                    world_size = Some(list.len() as u32);
                }
                if gid.starts_with("met#") {
                    conv.met_comms += 1;
                }
                let next = comm_ids.len() as CommId;
                let id = *comm_ids.entry(text.clone()).or_insert(next);
                comm_members.entry(id).or_insert(list);
                map.insert(*local, id);
            }
        }
        locals.push(map);
    }

    // Clocks: ranks on rank 0's host usually share its CLOCK_MONOTONIC, so their measured
    // offsets (noise of half a round trip) are not applied, unless an offset is beyond what
    // a shared clock can measure (a time namespace or container on the same host); a common
    // shift keeps every corrected time non-negative.
    // A rank that recorded on its own (no round trip) is put on rank 0's clock by both ranks'
    // CLOCK_REALTIME, read with their monotonic clocks.
    let rank0 = ranks.iter().find(|r| r.rank == 0);
    let host0 = rank0.and_then(|r| mark(r, "mpi.host="));
    let realtime0 = rank0.map(realtime_pairs).unwrap_or_default();
    let fits: Vec<Alignment> = ranks
        .iter()
        .map(|r| {
            let same_host = host0.is_some() && mark(r, "mpi.host=") == host0;
            Alignment::of(r, !same_host || own_clock(r), &realtime0)
        })
        .collect();
    let mut earliest = i64::MAX;
    for (r, fit) in ranks.iter().zip(&fits) {
        for item in &r.items {
            if let MpiItem::Call(g) = item {
                earliest = earliest.min(fit.correct(g.enter));
            }
        }
    }
    // Kept at 0 when nothing is negative, so that times stay rank 0's CLOCK_MONOTONIC and
    // line up with the run's other streams (sampler, locks).
    let shift = if earliest == i64::MAX || earliest >= 0 {
        0
    } else {
        earliest.saturating_neg()
    };

    let mut events = Vec::new();
    let mut spans = Vec::new();
    let mut summaries = Vec::new();
    let mut stats: BTreeMap<(Function, Option<u64>), Durations> = BTreeMap::new();
    for ((r, fit), local) in ranks.iter().zip(&fits).zip(&locals) {
        conv.broken_groups += r.malformed.broken_groups;
        conv.stray_records += r.malformed.stray_records;
        // Saturating: times and offsets come from the rank's stream, which may be hostile.
        let at = |t: u64| fit.correct(t).saturating_add(shift).max(0) as u64;
        let mut conv_rank = RankConverter::new(r.rank);
        // Open polling runs of this rank by (function, call site, communicator): their first
        // poll (aligned). A successful poll of the same kind at the same site waits from
        // there; any call but an unsuccessful poll ends them (as the wrapper does per thread).
        let mut runs: HashMap<(u8, u16, u32), u64> = HashMap::new();
        let mut summary = RankSummary {
            rank: r.rank,
            pid: r.pid,
            host: mark(r, "mpi.host="),
            library: mark(r, "mpi.library="),
            running_ns: 0,
            mpi_ns: 0,
            p2p_ns: 0,
            collective_ns: 0,
            calls: 0,
            finalized: false,
            aborted: mark(r, "mpi.abort=").and_then(|c| c.parse().ok()),
            closed: r.closed,
            clock: fit.summary,
            startup_wait_ns: mark(r, "mpi.startup_wait_ns=").and_then(|v| v.parse().ok()),
        };
        let (mut begin, mut end) = (None::<u64>, 0u64);
        for item in &r.items {
            let MpiItem::Call(g) = item else { continue };
            // A correction with a steep (hostile) slope could turn the call around: an exit is
            // never before its enter.
            let enter = at(g.enter);
            let exit = at(g.exit.max(g.enter)).max(enter);
            let site = r.sites.get(&g.site).copied();
            let Some(f) = Function::from_u8(g.function) else {
                conv.unknown_functions += 1;
                continue;
            };
            match f {
                Function::Init | Function::InitThread => begin = Some(exit),
                Function::Finalize => summary.finalized = true,
                _ => {}
            }
            if !matches!(f, Function::Init | Function::InitThread) {
                end = end.max(if f == Function::Finalize { enter } else { exit });
            }
            let polls = g.unsuccessful_polls();
            spans.push(CallSpan {
                rank: r.rank,
                enter_ns: enter,
                exit_ns: exit,
                function: f.name(),
                site,
                polls,
            });
            let duration = exit - enter; // exit >= enter, above
            summary.calls += polls.max(1);
            // Time in MPI within the running time, which Init and Finalize bound.
            if !matches!(
                f,
                Function::Init | Function::InitThread | Function::Finalize
            ) {
                summary.mpi_ns = summary.mpi_ns.saturating_add(duration);
            }
            match f.class() {
                FunctionClass::PointToPoint => {
                    summary.p2p_ns = summary.p2p_ns.saturating_add(duration)
                }
                FunctionClass::Collective => {
                    summary.collective_ns = summary.collective_ns.saturating_add(duration)
                }
                FunctionClass::Other => {}
            }
            stats
                .entry((f, site))
                .or_default()
                .add(duration, polls.max(1));
            // A polling run, or the call that ends the rank's runs (a successful poll of a
            // run's kind and site waits from that run's first poll).
            let run_key = (g.function, g.site, g.comm);
            if polls > 0 {
                let first = runs.entry(run_key).or_insert(enter);
                *first = (*first).min(enter);
                continue;
            }
            let polled_from = runs.get(&run_key).copied().filter(|_| f.is_poll());
            runs.clear();
            let comm = match g.comm {
                NO_COMM => None,
                INTERCOMM => {
                    conv.intercomm_calls += 1;
                    continue;
                }
                c => match local.get(&c) {
                    Some(&id) => Some(id),
                    None => {
                        conv.undefined_comm_calls += 1;
                        continue;
                    }
                },
            };
            for call in conv_rank.convert(f, g, comm, polled_from.is_some(), &mut conv) {
                events.push(MpiEvent {
                    rank: r.rank,
                    enter_ns: polled_from.unwrap_or(enter),
                    exit_ns: exit,
                    site,
                    call,
                });
            }
        }
        let begin = begin.unwrap_or_else(|| {
            events
                .iter()
                .filter(|e| e.rank == r.rank)
                .map(|e| e.enter_ns)
                .min()
                .unwrap_or(0)
        });
        summary.running_ns = end.saturating_sub(begin);
        summaries.push(summary);
    }
    summaries.sort_by_key(|s| s.rank);

    let missing_ranks = match world_size {
        Some(n) => (0..n)
            .filter(|k| !summaries.iter().any(|s| s.rank == *k))
            .collect(),
        None => Vec::new(),
    };
    // How far each rank's aligned times may be from rank 0's: half the larger of the round
    // trips its two offsets came from (Cristian), interpolation keeping within both.
    let clock_error_ns: HashMap<Rank, u64> = ranks
        .iter()
        .zip(&fits)
        .filter(|(_, f)| f.summary.applied && f.summary.source == ClockSource::Exchange)
        .map(|(r, f)| {
            let c = &f.summary;
            let worst = c.round_trip_at_init_ns.max(c.round_trip_at_finalize_ns);
            (r.rank, u64::from(worst.unwrap_or(0)) / 2)
        })
        .collect();
    let waits = waitstates::analyse_aligned(&events, &comm_members, thresholds, &clock_error_ns);
    let instance_call_ns = call_durations(&events, &waits.instances);
    let summary = summary_columns(&summaries, &events, &waits, &instance_call_ns);
    let mut comms: Vec<(CommId, String, Vec<Rank>)> = comm_ids
        .into_iter()
        .map(|(text, id)| {
            let gid = text.split(' ').next().unwrap_or("").to_string();
            (id, gid, comm_members.get(&id).cloned().unwrap_or_default())
        })
        .collect();
    comms.sort_by_key(|c| c.0);
    let calls = stats
        .into_iter()
        .map(|((f, site), d)| CallStat {
            class: match f.class() {
                FunctionClass::PointToPoint => "p2p",
                FunctionClass::Collective => "collective",
                FunctionClass::Other => "other",
            },
            function: f.name().to_string(),
            site,
            count: d.count,
            total_ns: d.total,
            min_ns: d.min,
            max_ns: d.max,
            mean_ns: d.total as f64 / d.count.max(1) as f64,
        })
        .collect();
    MpiRun {
        world_size,
        ranks: summaries,
        missing_ranks,
        comms,
        calls,
        summary,
        waits,
        instance_call_ns,
        conversion: conv,
        events,
        spans,
    }
}

/// One column of the summary: a set of calls (or wait states) with their durations, the
/// waiting they are (delay, suffered) and the waiting they caused in other ranks (late time).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SummaryColumn {
    /// `p2p`, `collective`, or a pattern's slug (`late-sender`, ...).
    pub name: String,
    pub title: String,
    /// Calls (for `p2p`/`collective`) or wait-state instances.
    pub count: u64,
    /// Their calls' durations, summed.
    pub total_ns: u64,
    /// `total_ns` over the sum of the ranks' running times, in %.
    pub percent_of_running: f64,
    /// Each rank's running time (Init to Finalize), summed.
    pub running_total_ns: u64,
    pub mean_ns: f64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Waiting in wait states of this column (delay time).
    pub delay_total_ns: u64,
    pub delay_mean_ns: f64,
    /// The ranks that suffered least and most delay, with their totals.
    pub least_delayed: Option<RankTotal>,
    pub most_delayed: Option<RankTotal>,
    /// Waiting caused in others (late time); the completion patterns cause none.
    pub late_total_ns: u64,
    pub late_mean_ns: f64,
    pub least_late: Option<RankTotal>,
    pub most_late: Option<RankTotal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RankTotal {
    pub rank: Rank,
    pub ns: u64,
}

/// The duration of the call each instance waited in: the rank's event that contains its start
/// at its site.
fn call_durations(events: &[MpiEvent], instances: &[waitstates::Instance]) -> Vec<u64> {
    let mut by_rank: HashMap<Rank, Vec<&MpiEvent>> = HashMap::new();
    for e in events {
        by_rank.entry(e.rank).or_default().push(e);
    }
    for list in by_rank.values_mut() {
        list.sort_by_key(|e| e.enter_ns);
    }
    instances
        .iter()
        .map(|i| {
            let Some(list) = by_rank.get(&i.rank) else {
                return i.wait_ns;
            };
            let upto = list.partition_point(|e| e.enter_ns <= i.start_ns);
            list[..upto]
                .iter()
                .rev()
                .find(|e| e.site == i.site && e.exit_ns >= i.start_ns)
                .map_or(i.wait_ns, |e| e.exit_ns.saturating_sub(e.enter_ns))
        })
        .collect()
}

fn summary_columns(
    ranks: &[RankSummary],
    events: &[MpiEvent],
    waits: &waitstates::WaitStates,
    instance_call_ns: &[u64],
) -> Vec<SummaryColumn> {
    let running: u64 = ranks.iter().map(|r| r.running_ns).sum();
    let column = |name: &str, title: &str, durations: &[u64], patterns: &[waitstates::Pattern]| {
        let per_rank = |caused: bool| -> Vec<RankTotal> {
            ranks
                .iter()
                .map(|r| RankTotal {
                    rank: r.rank,
                    ns: waits
                        .ranks
                        .iter()
                        .find(|w| w.rank == r.rank)
                        .map_or(0, |w| {
                            w.by_pattern
                                .iter()
                                .filter(|p| patterns.contains(&p.pattern))
                                .map(|p| if caused { p.caused_ns } else { p.suffered_ns })
                                .sum()
                        }),
                })
                .collect()
        };
        let instances: Vec<&waitstates::Instance> = waits
            .instances
            .iter()
            .filter(|i| patterns.contains(&i.pattern))
            .collect();
        let delay: u64 = instances.iter().map(|i| i.wait_ns).sum();
        let caused: Vec<&&waitstates::Instance> =
            instances.iter().filter(|i| i.cause.is_some()).collect();
        let late: u64 = caused.iter().map(|i| i.wait_ns).sum();
        let (suffered, lateness) = (per_rank(false), per_rank(true));
        let count = durations.len() as u64;
        let total: u64 = durations.iter().sum();
        let mean = |sum: u64, n: usize| if n == 0 { 0.0 } else { sum as f64 / n as f64 };
        SummaryColumn {
            name: name.into(),
            title: title.into(),
            count,
            total_ns: total,
            percent_of_running: if running == 0 {
                0.0
            } else {
                100.0 * total as f64 / running as f64
            },
            running_total_ns: running,
            mean_ns: mean(total, durations.len()),
            min_ns: durations.iter().copied().min().unwrap_or(0),
            max_ns: durations.iter().copied().max().unwrap_or(0),
            delay_total_ns: delay,
            delay_mean_ns: mean(delay, instances.len()),
            least_delayed: suffered.iter().copied().min_by_key(|t| (t.ns, t.rank)),
            most_delayed: suffered
                .iter()
                .copied()
                .max_by_key(|t| (t.ns, u32::MAX - t.rank)),
            late_total_ns: late,
            late_mean_ns: mean(late, caused.len()),
            least_late: lateness.iter().copied().min_by_key(|t| (t.ns, t.rank)),
            most_late: lateness
                .iter()
                .copied()
                .max_by_key(|t| (t.ns, u32::MAX - t.rank)),
        }
    };
    let of_class = |collective: bool| -> Vec<u64> {
        events
            .iter()
            .filter(|e| match e.call {
                Call::Other => false,
                Call::Barrier { .. }
                | Call::Bcast { .. }
                | Call::Scatter { .. }
                | Call::Reduce { .. }
                | Call::Gather { .. }
                | Call::Allreduce { .. }
                | Call::NxN { .. }
                | Call::Scan { .. }
                | Call::Exscan { .. } => collective,
                _ => !collective,
            })
            .map(|e| e.exit_ns.saturating_sub(e.enter_ns))
            .collect()
    };
    let p2p: Vec<_> = waitstates::Pattern::ALL
        .into_iter()
        .filter(|p| !p.is_collective())
        .collect();
    let coll: Vec<_> = waitstates::Pattern::ALL
        .into_iter()
        .filter(|p| p.is_collective())
        .collect();
    let mut out = vec![
        column("p2p", "P2P", &of_class(false), &p2p),
        column("collective", "Collective", &of_class(true), &coll),
    ];
    for p in waitstates::Pattern::ALL {
        let durations: Vec<u64> = waits
            .instances
            .iter()
            .zip(instance_call_ns)
            .filter(|(i, _)| i.pattern == p)
            .map(|(_, &d)| d)
            .collect();
        if !durations.is_empty() {
            out.push(column(p.slug(), p.title(), &durations, &[p]));
        }
    }
    out
}

/// `GID R0 R1 ...` → (GID, members).
fn parse_members(text: &str) -> Option<(&str, Vec<Rank>)> {
    let mut words = text.split(' ');
    let gid = words.next().filter(|g| !g.is_empty())?;
    let list = words
        .map(|w| w.parse().ok())
        .collect::<Option<Vec<Rank>>>()?;
    Some((gid, list))
}

fn mark(r: &RankInput, prefix: &str) -> Option<String> {
    r.items.iter().find_map(|i| match i {
        MpiItem::Mark { label, .. } => r
            .strings
            .get(label)
            .and_then(|s| s.strip_prefix(prefix))
            .map(str::to_string),
        _ => None,
    })
}

#[derive(Debug, Clone, Copy)]
struct Durations {
    count: u64,
    total: u64,
    min: u64,
    max: u64,
}

impl Default for Durations {
    fn default() -> Self {
        Durations {
            count: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Durations {
    /// One span of `ns` standing for `calls` calls (a polling run stands for its polls).
    fn add(&mut self, ns: u64, calls: u64) {
        self.count += calls;
        self.total = self.total.saturating_add(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }
}

/// A rank's clock correction: offset at init and finalize, interpolated in between.
#[derive(Debug, Clone, Copy)]
struct Alignment {
    first: Option<(u64, i64)>,
    last: Option<(u64, i64)>,
    summary: ClockFit,
}

/// Whether a rank's measured offset shows a clock of its own. On a clock shared with rank 0
/// rank 0's reading falls inside the round trip, so the offset is at most half of it; twice
/// that cannot be noise.
fn own_clock(r: &RankInput) -> bool {
    r.items.iter().any(|i| match i {
        MpiItem::Clock(c) => {
            c.round_trips > 0 && c.offset_ns.unsigned_abs() > u64::from(c.best_round_trip_ns)
        }
        _ => false,
    })
}

/// A rank's `mpi.realtime=PHASE MONO REAL` marks: its monotonic and realtime clocks read
/// together at `MPI_Init` (phase 0) and `MPI_Finalize` (1).
#[derive(Debug, Clone, Copy)]
struct RealtimePair {
    phase: u8,
    mono: u64,
    real: u64,
}

fn realtime_pairs(r: &RankInput) -> Vec<RealtimePair> {
    r.items
        .iter()
        .filter_map(|i| match i {
            MpiItem::Mark { label, .. } => r.strings.get(label)?.strip_prefix("mpi.realtime="),
            _ => None,
        })
        .filter_map(|v| {
            let mut f = v.split(' ');
            let pair = RealtimePair {
                phase: f.next()?.parse().ok()?,
                mono: f.next()?.parse().ok()?,
                real: f.next()?.parse().ok()?,
            };
            f.next().is_none().then_some(pair)
        })
        .collect()
}

/// The offset to add to a rank's monotonic clock to read rank 0's, from the two ranks'
/// realtime readings of one phase (rank 0's other phase when it lacks that one).
fn realtime_offset(own: &RealtimePair, rank0: &[RealtimePair]) -> Option<(u64, i64)> {
    let zero = rank0
        .iter()
        .find(|p| p.phase == own.phase)
        .or(rank0.first())?;
    let own_gap = i128::from(own.real) - i128::from(own.mono);
    let zero_gap = i128::from(zero.real) - i128::from(zero.mono);
    i64::try_from(own_gap - zero_gap)
        .ok()
        .map(|o| (own.mono, o))
}

impl Alignment {
    fn of(r: &RankInput, apply: bool, realtime0: &[RealtimePair]) -> Alignment {
        let samples: Vec<ClockSample> = r
            .items
            .iter()
            .filter_map(|i| match i {
                MpiItem::Clock(c) => Some(*c),
                _ => None,
            })
            .collect();
        let realtime: Vec<(u8, (u64, i64))> = realtime_pairs(r)
            .iter()
            .filter_map(|p| realtime_offset(p, realtime0).map(|o| (p.phase, o)))
            .collect();
        let realtime_at = |phase| realtime.iter().find(|(p, _)| *p == phase).map(|&(_, o)| o);
        let exchanged = samples.iter().any(|c| c.round_trips > 0);
        if r.rank != 0 && !exchanged && !realtime.is_empty() {
            // On its own: the realtime readings are the only link to rank 0's clock.
            let init = realtime_at(0);
            let fin = realtime_at(1);
            let first = init.or(fin);
            let last = fin.or(init);
            let drift = match (init, fin) {
                (Some(a), Some(b)) if b.0 > a.0 => {
                    Some(b.1.saturating_sub(a.1) as f64 / ((b.0 - a.0) as f64 / 1e9))
                }
                _ => None,
            };
            return Alignment {
                first,
                last,
                summary: ClockFit {
                    at_init_ns: init.map(|o| o.1),
                    at_finalize_ns: fin.map(|o| o.1),
                    drift_ns_per_s: drift,
                    best_round_trip_ns: None,
                    round_trip_at_init_ns: None,
                    round_trip_at_finalize_ns: None,
                    applied: true,
                    source: ClockSource::Realtime,
                    realtime_disagreement_ns: None,
                },
            };
        }
        let init = samples.iter().find(|c| c.phase == 0);
        let fin = samples.iter().rev().find(|c| c.phase == 1);
        let first = init.or(fin).map(|c| (c.ts, c.offset_ns)).filter(|_| apply);
        let last = fin.or(init).map(|c| (c.ts, c.offset_ns)).filter(|_| apply);
        let drift = match (init, fin) {
            (Some(a), Some(b)) if b.ts > a.ts => {
                Some(b.offset_ns.saturating_sub(a.offset_ns) as f64 / ((b.ts - a.ts) as f64 / 1e9))
            }
            _ => None,
        };
        Alignment {
            first,
            last,
            summary: ClockFit {
                at_init_ns: init.map(|c| c.offset_ns),
                at_finalize_ns: fin.map(|c| c.offset_ns),
                drift_ns_per_s: drift,
                best_round_trip_ns: samples
                    .iter()
                    .filter(|c| c.round_trips > 0)
                    .map(|c| c.best_round_trip_ns)
                    .min(),
                round_trip_at_init_ns: init
                    .filter(|c| c.round_trips > 0)
                    .map(|c| c.best_round_trip_ns),
                round_trip_at_finalize_ns: fin
                    .filter(|c| c.round_trips > 0)
                    .map(|c| c.best_round_trip_ns),
                applied: apply && !samples.is_empty(),
                source: if r.rank == 0 {
                    ClockSource::Reference
                } else if !exchanged {
                    ClockSource::Unaligned
                } else if apply {
                    ClockSource::Exchange
                } else {
                    ClockSource::Shared
                },
                realtime_disagreement_ns: init
                    .filter(|c| c.round_trips > 0)
                    .zip(realtime_at(0))
                    .map(|(c, (_, o))| c.offset_ns.saturating_sub(o)),
            },
        }
    }

    /// `t` on rank 0's clock (before the common shift).
    fn correct(&self, t: u64) -> i64 {
        let offset = match (self.first, self.last) {
            (Some((t1, o1)), Some((t2, o2))) if t2 > t1 => {
                // Interpolate; extrapolate with the same slope outside [t1, t2].
                let slope = o2.saturating_sub(o1) as f64 / (t2 - t1) as f64;
                // `as i64` saturates a float out of range.
                o1.saturating_add((slope * (t as f64 - t1 as f64)).round() as i64)
            }
            (Some((_, o)), _) => o,
            _ => 0,
        };
        i64::try_from(t).unwrap_or(i64::MAX).saturating_add(offset)
    }
}

/// What a wrapper request id stands for on one rank.
#[derive(Debug, Clone, Copy)]
enum Req {
    /// A non-blocking operation, known to the analysis by this id.
    Active(RequestId),
    /// A persistent request: its operation, and the analysis id of its current start.
    Persistent(PersistentOp, Option<RequestId>),
    /// A request the analysis does not match (`Imrecv`: its message was matched at the probe).
    Ignored,
}

#[derive(Debug, Clone, Copy)]
enum PersistentOp {
    Send {
        dest: Rank,
        tag: i32,
        comm: CommId,
        bytes: u64,
    },
    Recv {
        source: Option<Rank>,
        tag: Option<i32>,
        comm: CommId,
    },
}

struct RankConverter {
    requests: HashMap<i64, Req>,
    next: RequestId,
    /// Messages an `Iprobe` found at the end of a polling run, matched there (the wait was in
    /// the probing): the receive that then takes each (same communicator, a source and tag
    /// that select it) is not matched again.
    probed: Vec<(CommId, Rank, i32)>,
}

impl RankConverter {
    fn new(rank: Rank) -> RankConverter {
        RankConverter {
            requests: HashMap::new(),
            // Ids distinct per rank, which makes stray cross-rank use visible in tests.
            next: (u64::from(rank) << 40) + 1,
            probed: Vec::new(),
        }
    }

    fn fresh(&mut self) -> RequestId {
        self.next += 1;
        self.next
    }

    /// The analysis calls that one recorded call stands for (several for `Sendrecv` and
    /// `Startall`, none for a call that names no peer).
    fn convert(
        &mut self,
        f: Function,
        g: &CallGroup,
        comm: Option<CommId>,
        polled: bool,
        conv: &mut Conversion,
    ) -> Vec<Call> {
        use Function::*;
        let rank_of = |code| g.arg(code).filter(|&v| v >= 0).map(|v| v as Rank);
        let tag_of = |code| g.arg(code).map(|v| v as i32);
        let bytes = |code| g.arg(code).unwrap_or(0).max(0) as u64;
        // Starts, completions and frees name requests, not a communicator.
        if matches!(
            f,
            Start
                | Startall
                | RequestFree
                | Wait
                | Waitall
                | Waitany
                | Waitsome
                | Test
                | Testall
                | Testany
                | Testsome
        ) {
            return self.completions(f, g, conv);
        }
        let Some(comm) = comm else {
            return vec![Call::Other];
        };
        let dest = rank_of(arg::DEST);
        let root = rank_of(arg::ROOT);
        match f {
            Send | Ssend | Bsend | Rsend => match (dest, tag_of(arg::SEND_TAG)) {
                (Some(dest), Some(tag)) => vec![Call::Send {
                    dest,
                    tag,
                    comm,
                    bytes: bytes(arg::BYTES_SENT),
                    synchronous: f == Ssend,
                }],
                _ => vec![Call::Other],
            },
            Recv => match status(&g.args) {
                Some(s) if self.take_probed(comm, Some(s.source), Some(s.tag)) => {
                    vec![Call::Other]
                }
                Some(s) => vec![Call::Recv {
                    source: s.source,
                    tag: s.tag,
                    comm,
                    bytes: s.bytes,
                }],
                None => vec![Call::Other],
            },
            // An Iprobe that ended a polling run is where the rank waited for its message.
            Iprobe if polled => match status(&g.args) {
                Some(s) if g.arg(arg::FLAG) != Some(0) => {
                    self.probed.push((comm, s.source, s.tag));
                    vec![Call::Recv {
                        source: s.source,
                        tag: s.tag,
                        comm,
                        bytes: s.bytes,
                    }]
                }
                _ => vec![Call::Other],
            },
            Mprobe | Improbe => match status(&g.args) {
                Some(s) if g.arg(arg::FLAG) != Some(0) => vec![Call::Recv {
                    source: s.source,
                    tag: s.tag,
                    comm,
                    bytes: s.bytes,
                }],
                _ => vec![Call::Other],
            },
            Sendrecv | SendrecvReplace => {
                let mut out = Vec::new();
                let mut wait = Vec::new();
                if let (Some(dest), Some(tag)) = (dest, tag_of(arg::SEND_TAG)) {
                    let request = self.fresh();
                    out.push(Call::Isend {
                        dest,
                        tag,
                        comm,
                        bytes: bytes(arg::BYTES_SENT),
                        request,
                    });
                    wait.push((request, None));
                }
                if let Some(s) = status(&g.args) {
                    let request = self.fresh();
                    out.push(Call::Irecv {
                        source: Some(s.source),
                        tag: Some(s.tag),
                        comm,
                        request,
                    });
                    wait.push((request, Some(s)));
                }
                if !wait.is_empty() {
                    out.push(Call::Wait { requests: wait });
                }
                out
            }
            Isend | Issend | Ibsend | Irsend | Irecv => {
                let Some(id) = g.arg(arg::REQUEST_CREATED) else {
                    return vec![Call::Other];
                };
                let request = self.fresh();
                let call = if f == Irecv {
                    let tag = tag_of(arg::RECV_TAG).filter(|&t| i64::from(t) != ANY);
                    if g.arg(arg::SOURCE) == Some(PROC_NULL)
                        || self.take_probed(comm, rank_of(arg::SOURCE), tag)
                    {
                        self.requests.insert(id, Req::Ignored);
                        return vec![Call::Other];
                    }
                    Call::Irecv {
                        source: rank_of(arg::SOURCE),
                        tag: tag_of(arg::RECV_TAG).filter(|&t| i64::from(t) != ANY),
                        comm,
                        request,
                    }
                } else {
                    match (dest, tag_of(arg::SEND_TAG)) {
                        (Some(dest), Some(tag)) => Call::Isend {
                            dest,
                            tag,
                            comm,
                            bytes: bytes(arg::BYTES_SENT),
                            request,
                        },
                        _ => {
                            self.requests.insert(id, Req::Ignored);
                            return vec![Call::Other];
                        }
                    }
                };
                self.requests.insert(id, Req::Active(request));
                vec![call]
            }
            SendInit | SsendInit | BsendInit | RsendInit | RecvInit => {
                let Some(id) = g.arg(arg::REQUEST_CREATED) else {
                    return vec![Call::Other];
                };
                let op = if f == RecvInit {
                    (g.arg(arg::SOURCE) != Some(PROC_NULL)).then_some(PersistentOp::Recv {
                        source: rank_of(arg::SOURCE),
                        tag: tag_of(arg::RECV_TAG).filter(|&t| i64::from(t) != ANY),
                        comm,
                    })
                } else {
                    match (dest, tag_of(arg::SEND_TAG)) {
                        (Some(dest), Some(tag)) => Some(PersistentOp::Send {
                            dest,
                            tag,
                            comm,
                            bytes: bytes(arg::BYTES_SENT),
                        }),
                        _ => None,
                    }
                };
                let req = op.map_or(Req::Ignored, |op| Req::Persistent(op, None));
                self.requests.insert(id, req);
                vec![Call::Other]
            }
            Imrecv => {
                if let Some(id) = g.arg(arg::REQUEST_CREATED) {
                    self.requests.insert(id, Req::Ignored);
                }
                vec![Call::Other]
            }
            Barrier => vec![Call::Barrier { comm }],
            Bcast | Scatter | Scatterv | Reduce | Gather | Gatherv => match root {
                None => vec![Call::Other],
                Some(root) => vec![match f {
                    Bcast => Call::Bcast { comm, root },
                    Scatter | Scatterv => Call::Scatter { comm, root },
                    Reduce => Call::Reduce { comm, root },
                    _ => Call::Gather { comm, root },
                }],
            },
            Allreduce => vec![Call::Allreduce { comm }],
            Allgather | Allgatherv | Alltoall | Alltoallv | Alltoallw | ReduceScatter
            | ReduceScatterBlock => vec![Call::NxN { comm }],
            Scan => vec![Call::Scan { comm }],
            Exscan => vec![Call::Exscan { comm }],
            _ => vec![Call::Other],
        }
    }

    /// Takes the oldest probed message on `comm` that a receive from `source` with `tag`
    /// (`None`: any) selects; false when there is none.
    fn take_probed(&mut self, comm: CommId, source: Option<Rank>, tag: Option<i32>) -> bool {
        let hit = self.probed.iter().position(|&(c, s, t)| {
            c == comm && source.is_none_or(|x| x == s) && tag.is_none_or(|x| x == t)
        });
        hit.map(|i| self.probed.remove(i)).is_some()
    }

    /// Calls without a communicator: starts, completions, frees.
    fn completions(&mut self, f: Function, g: &CallGroup, conv: &mut Conversion) -> Vec<Call> {
        use Function::*;
        match f {
            Start | Startall => {
                let mut out = Vec::new();
                for &(code, id) in &g.args {
                    if code != arg::REQUEST_STARTED {
                        continue;
                    }
                    let Some(Req::Persistent(op, _)) = self.requests.get(&id).copied() else {
                        continue;
                    };
                    let request = self.fresh();
                    self.requests.insert(id, Req::Persistent(op, Some(request)));
                    out.push(match op {
                        PersistentOp::Send {
                            dest,
                            tag,
                            comm,
                            bytes,
                        } => Call::Isend {
                            dest,
                            tag,
                            comm,
                            bytes,
                            request,
                        },
                        PersistentOp::Recv { source, tag, comm } => Call::Irecv {
                            source,
                            tag,
                            comm,
                            request,
                        },
                    });
                }
                out
            }
            Wait | Waitall | Waitany | Waitsome | Test | Testall | Testany | Testsome => {
                let mut requests = Vec::new();
                let mut i = 0;
                while i < g.args.len() {
                    let (code, id) = g.args[i];
                    i += 1;
                    if code != arg::REQUEST_COMPLETED {
                        continue;
                    }
                    let end = g.args[i..]
                        .iter()
                        .position(|(c, _)| {
                            !matches!(
                                *c,
                                arg::STATUS_SOURCE
                                    | arg::STATUS_TAG
                                    | arg::STATUS_BYTES
                                    | arg::STATUS_CANCELLED
                            )
                        })
                        .map_or(g.args.len(), |p| i + p);
                    let st = &g.args[i..end];
                    i = end;
                    let cancelled = st
                        .iter()
                        .any(|&(c, v)| c == arg::STATUS_CANCELLED && v != 0);
                    let analysis_id = match self.requests.get(&id).copied() {
                        Some(Req::Active(r)) => {
                            self.requests.remove(&id);
                            Some(r)
                        }
                        Some(Req::Persistent(op, Some(r))) => {
                            self.requests.insert(id, Req::Persistent(op, None));
                            Some(r)
                        }
                        Some(Req::Ignored) => {
                            self.requests.remove(&id);
                            None
                        }
                        // Unknown to this rank's records: let the analysis count it.
                        Some(Req::Persistent(_, None)) | None => Some(u64::MAX - id as u64),
                    };
                    if cancelled {
                        conv.cancelled += 1;
                        continue;
                    }
                    if let Some(r) = analysis_id {
                        requests.push((r, status(st)));
                    }
                }
                if requests.is_empty() {
                    vec![Call::Other]
                } else {
                    vec![Call::Wait { requests }]
                }
            }
            RequestFree => {
                if let Some(id) = g.arg(arg::REQUEST_FREED) {
                    if matches!(
                        self.requests.get(&id),
                        Some(Req::Persistent(..)) | Some(Req::Ignored)
                    ) {
                        self.requests.remove(&id);
                    }
                }
                vec![Call::Other]
            }
            _ => vec![Call::Other],
        }
    }
}

/// The status arguments among `args`, when source and tag are both there.
fn status(args: &[(u8, i64)]) -> Option<RecvStatus> {
    let get = |code| args.iter().find(|(c, _)| *c == code).map(|&(_, v)| v);
    let source = get(arg::STATUS_SOURCE).filter(|&s| s >= 0)?;
    Some(RecvStatus {
        source: source as Rank,
        tag: get(arg::STATUS_TAG)? as i32,
        bytes: get(arg::STATUS_BYTES).unwrap_or(0).max(0) as u64,
    })
}

#[cfg(test)]
mod tests;
