//! The JSON form of the model (`contend report --json`): typed views of each section that put
//! the names of the addresses it exposes beside them, so that the JSON stands alone (a script
//! reading it need not resolve anything), with `schema_version` at the top. The views borrow
//! the model; their serde form is the JSON and their `schemars` form its schema, so the two
//! cannot disagree.
//!
//! A view that replaces a list of the analysis with its named form lists the analysis type's
//! other fields again: serde cannot flatten a struct minus one field. The tests below check
//! that each such view still carries every key its analysis type writes.

use crate::{Run, SCHEMA_VERSION};
use analysis::locks::{
    BarrierStats, CondStats, Filter, LockKey, LockReport, LockStats, SiteStats, ThreadInfo,
    Unmatched,
};
use analysis::sharing::{
    Class, ConcurrencyCheck, Field, FixHint, LineReport, OffsetRow, Replay, Verdict,
};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeSet;
use trace::sharing::PmuAccess;

/// `contend report --json` of a recorded run: meta.json's summary, then each section the run
/// holds.
#[derive(Serialize, JsonSchema)]
pub struct RunJson<'a> {
    pub schema_version: u32,
    #[serde(flatten)]
    pub summary: &'a report::run_summary::RunSummary,
    /// The sampler's view (`schedstat` runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity: Option<&'a report::activity::ActivityView>,
    /// Locks, condition variables and barriers (`--locks` runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locks: Option<LocksJson<'a>>,
    /// Blocked futex waits of any runtime and other blocks (`--locks` runs that recorded
    /// `off-cpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<WaitsJson<'a>>,
    /// The MPI job (`--mpi` runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpi: Option<MpiJson<'a>>,
    /// Cache lines shared by threads (programs built with `contend cc`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharing: Option<SharingJson<'a>>,
}

impl<'a> RunJson<'a> {
    pub fn of(run: &'a Run) -> RunJson<'a> {
        RunJson {
            schema_version: SCHEMA_VERSION,
            summary: &run.summary,
            activity: run.activity.as_ref().map(|a| &a.view),
            locks: run.locks.as_ref().map(LocksJson::of),
            waits: run.waits.as_ref().map(WaitsJson::of),
            mpi: run.mpi.as_ref().map(MpiJson::of),
            sharing: run.sharing.as_ref().map(SharingJson::of),
        }
    }
}

impl Serialize for Run {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RunJson::of(self).serialize(s)
    }
}

/// What `contend report DIR --json` prints: a recorded run, or a `contend scale` directory's
/// model.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ExplainedJson<'a> {
    Run(Box<RunJson<'a>>),
    /// scale.json, which carries its own `schema_version`.
    Scale(&'a crate::scale::ScaleResult),
}

/// The waits (`analysis::waits::WaitReport`), each futex word with the global it lies in.
#[derive(Serialize, JsonSchema)]
pub struct WaitsJson<'a> {
    /// The waits' ends came from the sched tracepoints (else none has a length).
    pub ends_traced: bool,
    pub futex_waits: u64,
    pub futex_ns: u64,
    pub futex_runqueue_ns: u64,
    pub probe_counted: u64,
    pub probe_counted_ns: u64,
    pub other_blocks: u64,
    pub other_ns: u64,
    pub other_runqueue_ns: u64,
    pub unmeasured: u64,
    pub futex_unmeasured: u64,
    pub addresses: Vec<FutexWordJson<'a>>,
    pub threads: &'a [analysis::waits::ThreadWaits],
    pub reasons: &'a [analysis::waits::ReasonWaits],
    /// The other blocks that waited for a kernel lock, per lock, the kernel function that took
    /// it and the program's frame that entered the kernel (issue 22 slice 5).
    pub kernel_locks: &'a [analysis::waits::KernelLockWaits],
    /// The run recorded the blocks' user stacks (`stacks/*.ustk`).
    pub stacks_recorded: bool,
    /// Measured futex waits per kind, from their stacks.
    pub kinds: &'a [analysis::waits::KindWaits],
    /// Futex waits with a user stack; without one although stacks were recorded (budget
    /// spent, copy empty or unreadable); with one that did not unwind past its first frame.
    pub with_stack: u64,
    pub without_stack: u64,
    pub unknown_stacks: u64,
    /// Locks named by their call site (parking_lot parks on each thread's own word).
    pub call_sites: Vec<analysis::waits::CallSiteWaits>,
    /// Language runtimes the stacks show (Go, the JVM), per process.
    pub runtimes: Vec<analysis::waits::RuntimeWaits>,
    /// The program's wakes were recorded (else no wait is paired with its waker).
    pub wakes_recorded: bool,
    /// What ended the measured futex waits (those the probe counted included).
    pub woken_by: &'a analysis::waits::WokenByCounts,
    /// Who made whom wait: waiter site → waker site, most time first.
    pub blame: &'a [analysis::waits::BlamePair],
    /// Critical sections by the wait they caused (each waiter counted, as Go's mutex
    /// profile), most first.
    pub holders: &'a [analysis::waits::HolderCharge],
}

/// One futex word's waits and its name.
#[derive(Serialize, JsonSchema)]
pub struct FutexWordJson<'a> {
    #[serde(flatten)]
    pub waits: &'a analysis::waits::AddressWaits,
    /// The global the word lies in (`HOT`, `queue+0x8`), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
}

impl<'a> WaitsJson<'a> {
    pub fn of(w: &'a crate::waits::Waits) -> WaitsJson<'a> {
        let r = &w.report;
        WaitsJson {
            ends_traced: w.ends_traced,
            futex_waits: r.futex_waits,
            futex_ns: r.futex_ns,
            futex_runqueue_ns: r.futex_runqueue_ns,
            probe_counted: r.probe_counted,
            probe_counted_ns: r.probe_counted_ns,
            other_blocks: r.other_blocks,
            other_ns: r.other_ns,
            other_runqueue_ns: r.other_runqueue_ns,
            unmeasured: r.unmeasured,
            futex_unmeasured: r.futex_unmeasured,
            addresses: r
                .addresses
                .iter()
                .map(|a| FutexWordJson {
                    waits: a,
                    name: w.names.get(&(a.pid, a.uaddr)).map(String::as_str),
                })
                .collect(),
            threads: &r.threads,
            reasons: &r.reasons,
            kernel_locks: &r.kernel_locks,
            stacks_recorded: w.stacks_recorded,
            kinds: &r.kinds,
            with_stack: r.with_stack,
            without_stack: r.without_stack,
            unknown_stacks: r.unknown_stacks,
            call_sites: analysis::waits::call_sites(r, &w.stacks),
            runtimes: analysis::waits::runtimes(r, &w.stacks),
            wakes_recorded: r.wakes_recorded,
            woken_by: &r.woken_by,
            blame: &r.blame,
            holders: &r.holders,
        }
    }
}

/// The lock report (`analysis::locks::LockReport`), each lock with its name (the global, or
/// the heap block and its allocation) and each call site with its function and `file:line`.
#[derive(Serialize, JsonSchema)]
pub struct LocksJson<'a> {
    /// 1 when every acquisition was recorded, N for 1 in N uncontended ones.
    pub sample_every: u32,
    /// First to last event (or the run's span), in ns.
    pub start_ns: u64,
    pub end_ns: u64,
    pub threads: &'a [ThreadInfo],
    pub filter: &'a Filter,
    pub summary: &'a analysis::locks::Summary,
    /// Over the critical path's events only (table 4.10).
    pub critical: &'a analysis::locks::Summary,
    pub locks: Vec<LockJson<'a>>,
    pub conds: Vec<CondJson<'a>>,
    pub barriers: &'a [BarrierStats],
    pub unmatched: &'a Unmatched,
    /// The replayed what-if of the locks shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<&'a analysis::locks::whatif::WhatIfs>,
    /// The processes the probe was loaded in: a measured zero says where it was measured
    /// (absent for a run recorded before contend counted them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_processes: Option<u64>,
    /// What the probe could not measure, listed beside what it did.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub not_measured: &'a [trace::meta::Unavailable],
}

impl<'a> LocksJson<'a> {
    pub fn of(l: &'a crate::locks::Locks) -> LocksJson<'a> {
        let r: &'a LockReport = &l.report;
        let site = |s: u64| NamedAddress {
            site: s,
            names: l.sites.get(&s),
        };
        LocksJson {
            sample_every: r.sample_every,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            threads: &r.threads,
            filter: &r.filter,
            summary: &r.summary,
            critical: &r.critical,
            locks: r.locks.iter().map(|lock| LockJson::of(lock, l)).collect(),
            conds: r
                .conds
                .iter()
                .map(|cond| CondJson {
                    cond,
                    call_sites: cond.sites.iter().map(|&s| site(s)).collect(),
                })
                .collect(),
            barriers: &r.barriers,
            unmatched: &r.unmatched,
            what_if: r.what_if.as_ref(),
            probe_processes: l.coverage.probe_processes,
            not_measured: &l.coverage.not_measured,
        }
    }
}

/// One lock (`analysis::locks::LockStats`, table 4.12) with its names and what-if.
#[derive(Serialize, JsonSchema)]
pub struct LockJson<'a> {
    pub lock: NamedLock<'a>,
    pub kind: trace::ObjectKind,
    pub acquisitions: u64,
    pub contended: u64,
    /// Waits that ended without the lock (timeouts, errors).
    pub failed_waits: u64,
    pub wait_ns: u64,
    /// Mean wait over all acquisitions.
    pub mean_wait_ns: f64,
    /// Over contended acquisitions only (null without any).
    pub wait_p50_ns: Option<u64>,
    pub wait_p99_ns: Option<u64>,
    pub wait_max_ns: Option<u64>,
    pub hold_ns: u64,
    pub mean_hold_ns: f64,
    /// Consecutive acquisitions by different threads.
    pub owner_changes: u64,
    pub threads: &'a [u32],
    pub sites: Vec<NamedSiteStats<'a>>,
    pub critical: &'a analysis::locks::Summary,
    /// The run's length minus the time a critical-path event waited for this lock: not a
    /// prediction (it forgets that the held work still needs the CPUs); `what_if` is.
    pub what_if_ns: u64,
    /// The lock's replayed what-if (also in the report's `what_if.locks`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<&'a analysis::locks::whatif::WhatIf>,
}

impl<'a> LockJson<'a> {
    fn of(s: &'a LockStats, l: &'a crate::locks::Locks) -> LockJson<'a> {
        LockJson {
            lock: NamedLock {
                key: &s.lock,
                name: l.naming.locks.get(&s.lock).map(String::as_str),
                allocation: l.naming.allocations.get(&s.lock),
            },
            kind: s.kind,
            acquisitions: s.acquisitions,
            contended: s.contended,
            failed_waits: s.failed_waits,
            wait_ns: s.wait_ns,
            mean_wait_ns: s.mean_wait_ns,
            wait_p50_ns: s.wait_p50_ns,
            wait_p99_ns: s.wait_p99_ns,
            wait_max_ns: s.wait_max_ns,
            hold_ns: s.hold_ns,
            mean_hold_ns: s.mean_hold_ns,
            owner_changes: s.owner_changes,
            threads: &s.threads,
            sites: s
                .sites
                .iter()
                .map(|stats| NamedSiteStats {
                    stats,
                    names: stats.site.and_then(|a| l.sites.get(&a)),
                })
                .collect(),
            critical: &s.critical,
            what_if_ns: s.what_if_ns,
            what_if: l
                .report
                .what_if
                .as_ref()
                .and_then(|w| w.locks.iter().find(|p| p.lock == s.lock)),
        }
    }
}

/// A lock's address in its process, with the global it is or the heap block it lives in.
#[derive(Serialize, JsonSchema)]
pub struct NamedLock<'a> {
    #[serde(flatten)]
    pub key: &'a LockKey,
    /// The global it is (`hot_lock`, `queue+0x40`), when the symbols say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    /// The heap block it lives in (runs recorded with `--alloc-sites`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<&'a report::locks::Allocation>,
}

/// A call site's figures with its function and `file:line` beside `site`.
#[derive(Serialize, JsonSchema)]
pub struct NamedSiteStats<'a> {
    #[serde(flatten)]
    pub stats: &'a SiteStats,
    #[serde(flatten)]
    pub names: Option<&'a crate::names::CallSite>,
}

/// `{"site": address, "function": ..., "location": ...}` (the names when resolved).
#[derive(Serialize, JsonSchema)]
pub struct NamedAddress<'a> {
    pub site: u64,
    #[serde(flatten)]
    pub names: Option<&'a crate::names::CallSite>,
}

/// A condition variable's waits; its sites (addresses) named in `call_sites`, in their order.
#[derive(Serialize, JsonSchema)]
pub struct CondJson<'a> {
    #[serde(flatten)]
    pub cond: &'a CondStats,
    pub call_sites: Vec<NamedAddress<'a>>,
}

/// The MPI analysis (`analysis::mpi::MpiRun`) with its site names, and a name for each call
/// site row (`MPI_Recv at main (app.c:42)`), which `contend diff` matches rows by: site ids are
/// only indices into this run's names.
#[derive(Serialize, JsonSchema)]
pub struct MpiJson<'a> {
    /// From `MPI_COMM_WORLD`'s members as any rank recorded them.
    pub world_size: Option<u32>,
    pub ranks: &'a [analysis::mpi::RankSummary],
    /// World ranks with no stream at all.
    pub missing_ranks: &'a [analysis::waitstates::Rank],
    /// Communicators: id, identity, members.
    pub comms: &'a [(
        analysis::waitstates::CommId,
        String,
        Vec<analysis::waitstates::Rank>,
    )],
    pub calls: Vec<Named<'a, analysis::mpi::CallStat>>,
    /// The thesis's table 4.13: all point-to-point calls, all collective calls, then one
    /// column per wait-state pattern found.
    pub summary: &'a [analysis::mpi::SummaryColumn],
    pub waits: WaitStatesJson<'a>,
    /// For each of `waits.instances`: the duration of the call it happened in.
    pub instance_call_ns: &'a [u64],
    pub conversion: &'a analysis::mpi::Conversion,
    /// `main (app.c:42)` per call-site id (the `site` of calls and wait sites).
    pub site_names: &'a [String],
}

/// `analysis::waitstates::WaitStates` with each site row named.
#[derive(Serialize, JsonSchema)]
pub struct WaitStatesJson<'a> {
    pub thresholds: &'a analysis::waitstates::Thresholds,
    /// Instances at or above their threshold, by rank then start time.
    pub instances: &'a [analysis::waitstates::Instance],
    pub patterns: &'a [analysis::waitstates::PatternTotal],
    /// Every rank that has events, in rank order.
    pub ranks: &'a [analysis::waitstates::RankWaits],
    /// By site then pattern; `name` is `late-sender at main (app.c:42)`.
    pub sites: Vec<Named<'a, analysis::waitstates::SiteWaits>>,
    pub unmatched: &'a [analysis::waitstates::Unmatched],
    pub counts: &'a analysis::waitstates::Counts,
}

/// An analysis row with the name contend diff matches it by.
#[derive(Serialize, JsonSchema)]
pub struct Named<'a, T: Serialize + JsonSchema> {
    #[serde(flatten)]
    pub inner: &'a T,
    pub name: String,
}

impl<'a> MpiJson<'a> {
    pub fn of(m: &'a crate::mpi::Mpi) -> MpiJson<'a> {
        let site_name = |site: Option<u64>| {
            site.and_then(|i| m.site_names.get(i as usize))
                .map_or("(unknown site)", String::as_str)
        };
        let r = &m.run;
        let w = &r.waits;
        MpiJson {
            world_size: r.world_size,
            ranks: &r.ranks,
            missing_ranks: &r.missing_ranks,
            comms: &r.comms,
            calls: r
                .calls
                .iter()
                .map(|call| Named {
                    inner: call,
                    name: format!("{} at {}", call.function, site_name(call.site)),
                })
                .collect(),
            summary: &r.summary,
            waits: WaitStatesJson {
                thresholds: &w.thresholds,
                instances: &w.instances,
                patterns: &w.patterns,
                ranks: &w.ranks,
                sites: w
                    .sites
                    .iter()
                    .map(|s| Named {
                        inner: s,
                        name: format!("{} at {}", pattern_name(s.pattern), site_name(s.site)),
                    })
                    .collect(),
                unmatched: &w.unmatched,
                counts: &w.counts,
            },
            instance_call_ns: &r.instance_call_ns,
            conversion: &r.conversion,
            site_names: &m.site_names,
        }
    }
}

/// A wait-state pattern as the JSON spells it (`late-sender`).
fn pattern_name(p: analysis::waitstates::Pattern) -> String {
    match serde_json::to_value(p) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "?".into(),
    }
}

/// The sharing analysis (`analysis::sharing::SharingReport`), each process, and each line's
/// and row's names beside their numbers.
#[derive(Serialize, JsonSchema)]
pub struct SharingJson<'a> {
    pub lines: Vec<LineJson<'a>>,
    /// Transfers on all lines, hot or not, summed over processes.
    pub transfers_total: u64,
    /// How long the threads were on a CPU together, against what sharing needs to show.
    pub concurrency: &'a ConcurrencyCheck,
    /// What the report can conclude.
    pub verdict: Verdict,
    pub processes: &'a [report::sharing::ProcessLine],
}

/// One hot line (`analysis::sharing::LineReport`) with what it belongs to and each row's code.
#[derive(Serialize, JsonSchema)]
pub struct LineJson<'a> {
    pub pid: u32,
    pub id: u32,
    pub address: u64,
    pub line_size: u32,
    /// Transfers: attributed to accesses since the line became hot, plus those before.
    pub transfers: u64,
    pub transfers_before_hot: u64,
    pub loads: u64,
    pub stores: u64,
    pub atomics: u64,
    pub threads: &'a BTreeSet<u16>,
    pub fields: &'a [Field],
    /// Null when the line had no transfers after it became hot (nothing to classify).
    pub class: Option<Class>,
    /// Transfers caused by true sharing and by false sharing.
    pub true_transfers: u64,
    pub false_transfers: u64,
    pub replay: Option<&'a Replay>,
    pub hint: Option<&'a FixHint>,
    /// transfers × the cost of one transfer, ns.
    pub estimated_cost_ns: f64,
    pub rows: Vec<RowJson<'a>>,
    /// The line's raw sample figures summed over its accesses, from the PMU back end.
    pub pmu: Option<&'a PmuAccess>,
    /// Which threads read (bit 0) and wrote (bit 1) each byte, per thread: `(thread, [u8; line])`.
    pub byte_use: &'a [(u16, Vec<u8>)],
    /// What the line belongs to: `stats+0x0 (global)`, `malloc'd at main (acc.c:41), +0x40`,
    /// `[stack]` ("" when unknown).
    pub belongs_to: &'a str,
}

/// One row of a line (`analysis::sharing::OffsetRow`) with its code's symbol and source.
#[derive(Serialize, JsonSchema)]
pub struct RowJson<'a> {
    #[serde(flatten)]
    pub row: &'a OffsetRow,
    #[serde(flatten)]
    pub code: Option<&'a report::sharing::CodeName>,
}

/// The JSON form of the sharing results: the analysis, each process, and each line's and row's
/// names beside their numbers.
impl Serialize for crate::sharing::Sharing {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SharingJson::of(self).serialize(s)
    }
}

impl<'a> SharingJson<'a> {
    pub fn of(s: &'a crate::sharing::Sharing) -> SharingJson<'a> {
        let r = &s.report;
        SharingJson {
            lines: r.lines.iter().map(|l| LineJson::of(l, s)).collect(),
            transfers_total: r.transfers_total,
            concurrency: &r.concurrency,
            verdict: r.verdict,
            processes: &s.processes,
        }
    }
}

impl<'a> LineJson<'a> {
    fn of(l: &'a LineReport, s: &'a crate::sharing::Sharing) -> LineJson<'a> {
        LineJson {
            pid: l.pid,
            id: l.id,
            address: l.address,
            line_size: l.line_size,
            transfers: l.transfers,
            transfers_before_hot: l.transfers_before_hot,
            loads: l.loads,
            stores: l.stores,
            atomics: l.atomics,
            threads: &l.threads,
            fields: &l.fields,
            class: l.class,
            true_transfers: l.true_transfers,
            false_transfers: l.false_transfers,
            replay: l.replay.as_ref(),
            hint: l.hint.as_ref(),
            estimated_cost_ns: l.estimated_cost_ns,
            rows: l
                .rows
                .iter()
                .map(|row| RowJson {
                    row,
                    code: s.naming.code.get(&report::sharing::code_key(l.pid, row.pc)),
                })
                .collect(),
            pmu: l.pmu.as_ref(),
            byte_use: &l.byte_use,
            belongs_to: s
                .naming
                .lines
                .get(&report::sharing::line_key(l.pid, l.id))
                .map_or("", String::as_str),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::CallSite;
    use serde_json::Value;

    /// Every key `original` writes is in `view`, at the top level.
    fn carries_every_key(original: &Value, view: &Value, what: &str) {
        let (Value::Object(o), Value::Object(v)) = (original, view) else {
            panic!("{what}: not objects: {original} / {view}");
        };
        let missing: Vec<&String> = o.keys().filter(|k| !v.contains_key(*k)).collect();
        assert!(
            missing.is_empty(),
            "{what}'s JSON view lost {missing:?}: list them in the view"
        );
    }

    fn lock_stats() -> LockStats {
        LockStats {
            lock: LockKey {
                pid: 1,
                address: 0x4000,
            },
            kind: trace::ObjectKind::Mutex,
            acquisitions: 3,
            contended: 1,
            failed_waits: 0,
            wait_ns: 10,
            mean_wait_ns: 3.3,
            wait_p50_ns: Some(10),
            wait_p99_ns: Some(10),
            wait_max_ns: Some(10),
            hold_ns: 30,
            mean_hold_ns: 10.0,
            owner_changes: 1,
            threads: vec![1, 2],
            sites: vec![SiteStats {
                site: Some(0x10),
                ..Default::default()
            }],
            critical: Default::default(),
            what_if_ns: 5,
        }
    }

    fn locks() -> crate::locks::Locks {
        let mut report = analysis::locks::analyze(
            &analysis::locks::LockInput::default(),
            &analysis::locks::Filter::default(),
        );
        report.locks.push(lock_stats());
        report.conds.push(CondStats {
            pid: 1,
            address: 0x5000,
            waits: 3,
            timeouts: 0,
            wait_ns: 300,
            max_wait_ns: 200,
            sites: vec![0x10, 0x20],
        });
        let named = CallSite {
            label: "wait_for_work (pool.c:12)".into(),
            function: Some("wait_for_work".into()),
            location: Some("pool.c:12".into()),
        };
        let mut naming = report::locks::Naming::default();
        naming.locks.insert(lock_stats().lock, "hot_lock".into());
        crate::locks::Locks {
            report,
            naming,
            sites: [(0x10, named)].into_iter().collect(),
            wakeups: Vec::new(),
            path: Vec::new(),
            files: Vec::new(),
            coverage: report::locks::Coverage::default(),
        }
    }

    #[test]
    fn a_condition_variables_sites_are_named_beside_their_addresses() {
        let locks = locks();
        let v = serde_json::to_value(LocksJson::of(&locks)).unwrap();
        let sites = &v["conds"][0]["call_sites"];
        assert_eq!(
            sites[0],
            serde_json::json!({"site": 0x10, "function": "wait_for_work", "location": "pool.c:12"})
        );
        // Unresolved: the address alone.
        assert_eq!(sites[1], serde_json::json!({"site": 0x20}));
    }

    #[test]
    fn a_locks_name_and_its_sites_names_stand_beside_their_addresses() {
        let locks = locks();
        let v = serde_json::to_value(LocksJson::of(&locks)).unwrap();
        let lock = &v["locks"][0];
        assert_eq!(
            lock["lock"],
            serde_json::json!({"pid": 1, "address": 0x4000, "name": "hot_lock"})
        );
        assert_eq!(lock["sites"][0]["site"], 0x10);
        assert_eq!(lock["sites"][0]["function"], "wait_for_work");
        assert_eq!(lock["sites"][0]["location"], "pool.c:12");
    }

    #[test]
    fn the_lock_views_carry_every_key_of_the_analysis() {
        let locks = locks();
        let view = serde_json::to_value(LocksJson::of(&locks)).unwrap();
        let original = serde_json::to_value(&locks.report).unwrap();
        carries_every_key(&original, &view, "LockReport");
        carries_every_key(&original["locks"][0], &view["locks"][0], "LockStats");
        carries_every_key(
            &original["locks"][0]["sites"][0],
            &view["locks"][0]["sites"][0],
            "SiteStats",
        );
        carries_every_key(&original["conds"][0], &view["conds"][0], "CondStats");
        // And the figures are the analysis's own.
        for key in [
            "acquisitions",
            "wait_ns",
            "mean_wait_ns",
            "threads",
            "what_if_ns",
        ] {
            assert_eq!(original["locks"][0][key], view["locks"][0][key], "{key}");
        }
    }

    #[test]
    fn the_mpi_view_carries_every_key_of_the_analysis() {
        let run = analysis::mpi::analyse(&[], Default::default());
        let m = crate::mpi::Mpi {
            run,
            site_names: vec!["main (app.c:42)".into()],
        };
        let view = serde_json::to_value(MpiJson::of(&m)).unwrap();
        let original = serde_json::to_value(&m.run).unwrap();
        carries_every_key(&original, &view, "MpiRun");
        carries_every_key(&original["waits"], &view["waits"], "WaitStates");
    }

    #[test]
    fn the_sharing_view_carries_every_key_of_the_analysis() {
        let line = LineReport {
            pid: 1,
            id: 0,
            address: 0x1000,
            line_size: 64,
            transfers: 7,
            transfers_before_hot: 0,
            loads: 1,
            stores: 1,
            atomics: 0,
            threads: [0, 1].into_iter().collect(),
            fields: Vec::new(),
            class: None,
            true_transfers: 0,
            false_transfers: 7,
            replay: None,
            hint: None,
            estimated_cost_ns: 700.0,
            rows: Vec::new(),
            pmu: None,
            byte_use: Vec::new(),
        };
        let s = crate::sharing::Sharing {
            report: analysis::sharing::SharingReport {
                lines: vec![line],
                transfers_total: 7,
                concurrency: ConcurrencyCheck {
                    on_cpu_together_ns: None,
                    exact: None,
                    method: None,
                    threshold_ns: 0,
                    multi_threaded: true,
                },
                verdict: Verdict::SharingFound,
            },
            processes: Vec::new(),
            naming: Default::default(),
        };
        let view = serde_json::to_value(SharingJson::of(&s)).unwrap();
        let original = serde_json::to_value(&s.report).unwrap();
        carries_every_key(&original, &view, "SharingReport");
        carries_every_key(&original["lines"][0], &view["lines"][0], "LineReport");
        assert_eq!(view["lines"][0]["belongs_to"], "");
    }
}
