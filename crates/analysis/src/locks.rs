//! Lock contention from recorded lock events: mutex events (an acquisition and its release,
//! with the wait before it), the thesis's summary and per-lock tables (§3.2.2.2, tables 4.9,
//! 4.10, 4.12), and the critical path by Chen & Stenström's marking algorithm (listing 3.5).
//!
//! Everything here is a pure function of [`LockInput`]; building that input from streams is
//! [`thread_input`]. docs/methodology.md §4 gives each definition and formula.

use crate::clock::Conversion;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use trace::locks::{self, AFTER_COND, CONTENDED, TRY};
use trace::{EventKind, ObjectKind, Stream, NO_OBJECT, NO_SITE};

/// One recorded event, in nanoseconds, with its object and call site resolved to addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputEvent {
    pub ts_ns: u64,
    pub kind: EventKind,
    pub aux: u8,
    pub object: Option<(ObjectKind, u64)>,
    pub site: Option<u64>,
    /// `obj` for kinds that name no object (creator tid, child pid).
    pub value: u32,
}

#[derive(Debug, Clone, Default)]
pub struct InputThread {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    pub events: Vec<InputEvent>,
    /// Events the recorder could not keep for this thread.
    pub dropped: u64,
}

#[derive(Debug, Clone, Default)]
pub struct LockInput {
    pub threads: Vec<InputThread>,
    /// The run's wall-clock span, in CLOCK_MONOTONIC ns, when known (else the events' span).
    pub span: Option<(u64, u64)>,
    /// Sampled recording: one in this many uncontended acquisitions was recorded (0 or 1: all).
    pub sample_every: u32,
}

/// Reads one stream into an [`InputThread`] (events in file order, which is time order).
pub fn thread_input(stream: &Stream<'_>, clock: &Conversion, name: &str) -> InputThread {
    let events = stream
        .events()
        .map(|r| InputEvent {
            ts_ns: clock.ns(r.ts),
            kind: r.kind,
            aux: r.aux,
            object: if r.kind.refers_to_object() && r.obj != NO_OBJECT {
                stream.object(r.obj)
            } else {
                None
            },
            site: if r.site == NO_SITE {
                None
            } else {
                stream.site_address(r.site)
            },
            value: r.obj,
        })
        .collect();
    InputThread {
        pid: stream.header.pid,
        tid: stream.header.tid,
        name: name.to_string(),
        events,
        dropped: stream.dropped,
    }
}

/// A lock is its address in its process.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
pub struct LockKey {
    pub pid: u32,
    pub address: u64,
}

/// A mutex event (thesis §3.2.2.2): one acquisition of a lock and its release.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Hold {
    /// Index into [`LockReport::threads`].
    pub thread: usize,
    pub lock: LockKey,
    pub kind: ObjectKind,
    /// Call site of the acquisition.
    pub site: Option<u64>,
    /// When the program asked for the lock (= `acquired_ns` when it was free).
    pub requested_ns: u64,
    pub acquired_ns: u64,
    pub released_ns: u64,
    pub contended: bool,
    /// Shared (read) hold of an rwlock.
    pub shared: bool,
    /// Re-acquired on return from a condition wait.
    pub after_cond: bool,
    /// Acquired by a try-lock call of the program.
    pub tried: bool,
    /// Still held when the trace ended (release time = end of the trace).
    pub unreleased: bool,
    pub on_critical_path: bool,
    /// How many acquisitions this recorded one stands for: N for an uncontended acquisition
    /// recorded in sampled mode (1 in N), else 1.
    pub weight: u32,
}

impl Hold {
    // Saturating: the pairing keeps request <= acquisition <= release (and counts the events
    // whose times ran backwards, `Unmatched::backwards`); a hold built otherwise must still
    // never show a u64 wrapped below zero.
    pub fn wait_ns(&self) -> u64 {
        self.acquired_ns.saturating_sub(self.requested_ns)
    }
    pub fn hold_ns(&self) -> u64 {
        self.released_ns.saturating_sub(self.acquired_ns)
    }
    /// The whole event: from request to release.
    pub fn duration_ns(&self) -> u64 {
        self.released_ns.saturating_sub(self.requested_ns)
    }
}

/// Which mutex events an analysis looks at (thesis §3.2.2.2 "filters").
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Filter {
    /// Keep events whose duration (request to release) is at least / at most this.
    pub min_duration_ns: Option<u64>,
    pub max_duration_ns: Option<u64>,
    /// Keep only these locks (addresses), call sites (addresses) or threads (tids).
    pub locks: Vec<u64>,
    pub sites: Vec<u64>,
    pub threads: Vec<u32>,
}

impl Filter {
    pub fn keeps(&self, h: &Hold, tid: u32) -> bool {
        let d = h.duration_ns();
        self.min_duration_ns.is_none_or(|m| d >= m)
            && self.max_duration_ns.is_none_or(|m| d <= m)
            && (self.locks.is_empty() || self.locks.contains(&h.lock.address))
            && (self.sites.is_empty() || h.site.is_some_and(|s| self.sites.contains(&s)))
            && (self.threads.is_empty() || self.threads.contains(&tid))
    }

    pub fn is_empty(&self) -> bool {
        self.min_duration_ns.is_none()
            && self.max_duration_ns.is_none()
            && self.locks.is_empty()
            && self.sites.is_empty()
            && self.threads.is_empty()
    }
}

/// Table 4.9 (and, over critical-path events only, table 4.10).
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Summary {
    /// Mutex events (holds).
    pub events: u64,
    pub contended: u64,
    /// Time in protected sections, each event counted (nested holds on a thread add up).
    pub protected_ns: u64,
    /// Time in protected sections with overlaps on the same thread counted once (recorded
    /// holds only: a lower bound in sampled mode).
    pub protected_union_ns: u64,
    /// Time spent waiting to acquire.
    pub wait_ns: u64,
    /// Sum of event durations (request to release): the base of the thesis's percentages.
    pub duration_ns: u64,
    pub mean_hold_ns: f64,
}

impl Summary {
    fn of<'a>(holds: impl Iterator<Item = &'a Hold>) -> Summary {
        let mut s = Summary::default();
        let mut per_thread: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
        for h in holds {
            let w = u64::from(h.weight);
            s.events = s.events.saturating_add(w);
            s.contended += u64::from(h.contended);
            s.protected_ns = s.protected_ns.saturating_add(w.saturating_mul(h.hold_ns()));
            s.wait_ns = s.wait_ns.saturating_add(h.wait_ns());
            s.duration_ns = s
                .duration_ns
                .saturating_add(w.saturating_mul(h.hold_ns()).saturating_add(h.wait_ns()));
            per_thread
                .entry(h.thread)
                .or_default()
                .push((h.acquired_ns, h.released_ns));
        }
        s.protected_union_ns = per_thread.into_values().map(union_length).sum();
        s.mean_hold_ns = if s.events == 0 {
            0.0
        } else {
            s.protected_ns as f64 / s.events as f64
        };
        s
    }

    /// Share of `part` in `whole` in %, None when `whole` is 0.
    pub fn share(part: u64, whole: u64) -> Option<f64> {
        (whole > 0).then(|| 100.0 * part as f64 / whole as f64)
    }
}

/// Total length of a set of intervals, overlaps counted once.
fn union_length(mut v: Vec<(u64, u64)>) -> u64 {
    v.sort_unstable();
    let mut total = 0;
    let mut current: Option<(u64, u64)> = None;
    for (a, b) in v {
        match current {
            Some((ca, cb)) if a <= cb => current = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                current = Some((a, b));
            }
            None => current = Some((a, b)),
        }
    }
    total + current.map_or(0, |(a, b)| b - a)
}

/// Waiting and holding at one call site of one lock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SiteStats {
    pub site: Option<u64>,
    pub acquisitions: u64,
    pub contended: u64,
    pub wait_ns: u64,
    pub hold_ns: u64,
    pub critical_events: u64,
    pub critical_wait_ns: u64,
}

/// Table 4.12: one lock.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LockStats {
    pub lock: LockKey,
    pub kind: ObjectKind,
    pub acquisitions: u64,
    pub contended: u64,
    /// Waits that ended without the lock (timeouts, errors).
    pub failed_waits: u64,
    pub wait_ns: u64,
    /// Mean wait over all acquisitions.
    pub mean_wait_ns: f64,
    /// Over contended acquisitions only (None without any).
    pub wait_p50_ns: Option<u64>,
    pub wait_p99_ns: Option<u64>,
    pub wait_max_ns: Option<u64>,
    pub hold_ns: u64,
    pub mean_hold_ns: f64,
    /// Consecutive acquisitions by different threads.
    pub owner_changes: u64,
    pub threads: Vec<u32>,
    pub sites: Vec<SiteStats>,
    pub critical: Summary,
    /// The run's length minus the time during which a critical-path event waited for this lock
    /// (overlaps once). Not a prediction: it forgets that the held work still needs the CPUs
    /// (9× too short on 4 threads on 2 CPUs); the report shows the replay
    /// ([`LockReport::what_if`]) instead, this stays in `--json` for older readers.
    pub what_if_ns: u64,
}

/// Time threads spent in condition waits: idle time, reported apart from lock contention.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CondStats {
    pub pid: u32,
    pub address: u64,
    pub waits: u64,
    pub timeouts: u64,
    pub wait_ns: u64,
    pub max_wait_ns: u64,
    pub sites: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct BarrierStats {
    pub pid: u32,
    pub address: u64,
    pub waits: u64,
    pub wait_ns: u64,
    pub max_wait_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ThreadInfo {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    pub holds: u64,
    pub wait_ns: u64,
    pub dropped: u64,
}

/// What could not be paired: a sign of dropped events or of a program misusing its locks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Unmatched {
    /// Releases of a lock the thread was not seen to hold.
    pub releases: u64,
    /// Holds still open when the trace ended, or whose release never came while a million
    /// later holds of their thread were released (`streaming::MAX_WAITING`: a lost release).
    pub open_holds: u64,
    /// Waits with no acquisition or failure after them.
    pub open_waits: u64,
    /// Events timed before the event they end (an acquisition before its wait, a release
    /// before its acquisition, a wake-up before its wait): a damaged stream. Their wait or
    /// hold is counted as 0, never as a negative time wrapped to 584 years.
    #[serde(skip_serializing_if = "is_zero")]
    pub backwards: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LockReport {
    /// 1 when every acquisition was recorded, N for 1 in N uncontended ones.
    pub sample_every: u32,
    /// First to last event (or the run's span), in ns.
    pub start_ns: u64,
    pub end_ns: u64,
    pub threads: Vec<ThreadInfo>,
    pub filter: Filter,
    pub summary: Summary,
    /// Over the critical path's events only (table 4.10).
    pub critical: Summary,
    pub locks: Vec<LockStats>,
    pub conds: Vec<CondStats>,
    pub barriers: Vec<BarrierStats>,
    pub unmatched: Unmatched,
    /// The replayed what-if of the locks shown (`whatif`), when the caller made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<whatif::WhatIfs>,
    /// Every mutex event kept by the filter, by acquisition time (for timelines and exports).
    #[serde(skip)]
    pub holds: Vec<Hold>,
}

impl LockReport {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// `repr(C)` with the two times apart: the pushed hold is read back a few events later, and a
/// 16-byte load of both times across the two 8-byte stores that wrote them stalls the store
/// forwarding (a fifth of `analyze_streams`' time before).
#[repr(C)]
struct Open {
    lock: LockKey,
    requested_ns: u64,
    site: Option<u64>,
    acquired_ns: u64,
    kind: ObjectKind,
    aux: u8,
}

/// What pairing a trace's events yields.
struct Paired {
    holds: Vec<Hold>,
    conds: Vec<CondStats>,
    barriers: Vec<BarrierStats>,
    unmatched: Unmatched,
    /// Waits that ended without the lock, per lock.
    failed: BTreeMap<LockKey, u64>,
}

/// Pairs each thread's events into holds, waits and idle periods.
fn pair(input: &LockInput, end_ns: u64) -> Paired {
    let every = input.sample_every;
    let mut holds = Vec::new();
    let mut unmatched = Unmatched::default();
    let mut conds: BTreeMap<(u32, u64), CondStats> = BTreeMap::new();
    let mut barriers: BTreeMap<(u32, u64), BarrierStats> = BTreeMap::new();
    let mut failed: BTreeMap<LockKey, u64> = BTreeMap::new();
    for (ti, t) in input.threads.iter().enumerate() {
        let mut open: Vec<Open> = Vec::new();
        let mut waiting: HashMap<LockKey, u64> = HashMap::new();
        let mut in_cond: HashMap<u64, (u64, Option<u64>)> = HashMap::new();
        let mut in_barrier: HashMap<u64, u64> = HashMap::new();
        for e in &t.events {
            let Some((kind, address)) = e.object else {
                continue;
            };
            let key = LockKey {
                pid: t.pid,
                address,
            };
            match e.kind {
                EventKind::LockWait => {
                    waiting.insert(key, e.ts_ns);
                }
                EventKind::LockAcquired => {
                    let contended = locks::has(e.aux, CONTENDED);
                    let requested_ns = match waiting.remove(&key) {
                        Some(w) if contended && w > e.ts_ns => {
                            unmatched.backwards += 1;
                            e.ts_ns
                        }
                        Some(w) if contended => w,
                        _ => e.ts_ns,
                    };
                    open.push(Open {
                        lock: key,
                        kind,
                        site: e.site,
                        requested_ns,
                        acquired_ns: e.ts_ns,
                        aux: e.aux,
                    });
                }
                EventKind::LockFailed => {
                    waiting.remove(&key);
                    *failed.entry(key).or_default() += 1;
                }
                EventKind::LockReleased => {
                    // The most recent hold of this lock on this thread (recursive mutexes and
                    // read holds nest).
                    match open.iter().rposition(|o| o.lock == key) {
                        Some(i) => {
                            let o = open.remove(i);
                            unmatched.backwards += u64::from(e.ts_ns < o.acquired_ns);
                            holds.push(make_hold(ti, &o, e.ts_ns.max(o.acquired_ns), false, every));
                        }
                        None => unmatched.releases += 1,
                    }
                }
                EventKind::CondWait => {
                    in_cond.insert(address, (e.ts_ns, e.site));
                }
                EventKind::CondWoken => {
                    if let Some((start, site)) = in_cond.remove(&address) {
                        let c = conds.entry((t.pid, address)).or_insert(CondStats {
                            pid: t.pid,
                            address,
                            waits: 0,
                            timeouts: 0,
                            wait_ns: 0,
                            max_wait_ns: 0,
                            sites: Vec::new(),
                        });
                        let w = e.ts_ns.saturating_sub(start);
                        unmatched.backwards += u64::from(e.ts_ns < start);
                        c.waits += 1;
                        c.timeouts += u64::from(i32::from(e.aux) == libc_etimedout());
                        c.wait_ns = c.wait_ns.saturating_add(w);
                        c.max_wait_ns = c.max_wait_ns.max(w);
                        if let Some(s) = site {
                            if !c.sites.contains(&s) {
                                c.sites.push(s);
                            }
                        }
                    }
                }
                EventKind::BarrierWait => {
                    in_barrier.insert(address, e.ts_ns);
                }
                EventKind::BarrierDone => {
                    if let Some(start) = in_barrier.remove(&address) {
                        let b = barriers.entry((t.pid, address)).or_insert(BarrierStats {
                            pid: t.pid,
                            address,
                            waits: 0,
                            wait_ns: 0,
                            max_wait_ns: 0,
                        });
                        let w = e.ts_ns.saturating_sub(start);
                        unmatched.backwards += u64::from(e.ts_ns < start);
                        b.waits += 1;
                        b.wait_ns = b.wait_ns.saturating_add(w);
                        b.max_wait_ns = b.max_wait_ns.max(w);
                    }
                }
                _ => {}
            }
        }
        unmatched.open_waits += waiting.len() as u64;
        unmatched.open_holds += open.len() as u64;
        for o in open {
            holds.push(make_hold(ti, &o, end_ns.max(o.acquired_ns), true, every));
        }
    }
    holds.sort_by_key(|h| (h.acquired_ns, h.thread));
    Paired {
        holds,
        conds: conds.into_values().collect(),
        barriers: barriers.into_values().collect(),
        unmatched,
        failed,
    }
}

/// ETIMEDOUT on Linux (all architectures contend runs on).
const fn libc_etimedout() -> i32 {
    110
}

fn make_hold(thread: usize, o: &Open, released_ns: u64, unreleased: bool, every: u32) -> Hold {
    let contended = locks::has(o.aux, CONTENDED);
    let after_cond = locks::has(o.aux, AFTER_COND);
    Hold {
        thread,
        lock: o.lock,
        kind: o.kind,
        site: o.site,
        requested_ns: o.requested_ns,
        acquired_ns: o.acquired_ns,
        released_ns,
        contended,
        shared: locks::mode(o.aux) == locks::MODE_SHARED,
        after_cond,
        tried: locks::has(o.aux, TRY),
        unreleased,
        on_critical_path: false,
        // Contended and after-cond acquisitions are always recorded; the others 1 in N.
        weight: if contended || after_cond {
            1
        } else {
            every.max(1)
        },
    }
}

/// Chen & Stenström's marking algorithm (thesis listing 3.5), over holds sorted by acquisition:
/// start at the last contended event; from a contended event go to the previous owner of its
/// lock (the hold whose release let it in); from an uncontended one go to the latest contended
/// event acquired before it. Every event visited is on the critical path. The listing stops on
/// reaching the first contended event; this walk also takes the step from it to the owner it
/// waited for (that hold delayed the program too), and stops when no earlier event qualifies.
/// Each step moves strictly back in time, so the walk ends.
pub fn mark_critical_path(holds: &mut [Hold]) {
    let contended: Vec<usize> = (0..holds.len()).filter(|&i| holds[i].contended).collect();
    let Some(&last) = contended.last() else {
        return;
    };
    let owners = previous_owners(holds);
    let view: &[Hold] = holds;
    // Latest contended event acquired strictly before `before_ns`.
    let previous_contended = |before_ns: u64| -> Option<usize> {
        let k = contended.partition_point(|&i| view[i].acquired_ns < before_ns);
        k.checked_sub(1).map(|k| contended[k])
    };
    let mut path = vec![last];
    let mut current = last;
    loop {
        let h = &view[current];
        let next = if h.contended {
            owners[current].or_else(|| previous_contended(h.requested_ns))
        } else {
            previous_contended(h.acquired_ns)
        };
        match next {
            Some(n) if view[n].acquired_ns < h.acquired_ns => {
                current = n;
                path.push(n);
            }
            _ => break,
        }
    }
    for i in path {
        holds[i].on_critical_path = true;
    }
}

/// For each contended hold, the hold it waited for: of the same lock, by another thread,
/// acquired earlier, released last at or before this acquisition. `holds` sorted by
/// acquisition; the result is indexed like it.
pub fn previous_owners(holds: &[Hold]) -> Vec<Option<usize>> {
    let mut by_lock: HashMap<LockKey, Vec<(u64, usize)>> = HashMap::new();
    for (i, h) in holds.iter().enumerate() {
        by_lock.entry(h.lock).or_default().push((h.released_ns, i));
    }
    for v in by_lock.values_mut() {
        v.sort_unstable();
    }
    holds
        .iter()
        .enumerate()
        .map(|(current, h)| {
            if !h.contended {
                return None;
            }
            let v = by_lock.get(&h.lock)?;
            let k = v.partition_point(|&(rel, _)| rel <= h.acquired_ns);
            v[..k].iter().rev().map(|&(_, i)| i).find(|&i| {
                i != current && holds[i].acquired_ns < h.acquired_ns && holds[i].thread != h.thread
            })
        })
        .collect()
}

fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The whole lock analysis.
pub fn analyze(input: &LockInput, filter: &Filter) -> LockReport {
    let (first, last) = input
        .threads
        .iter()
        .flat_map(|t| t.events.iter().map(|e| e.ts_ns))
        .fold((u64::MAX, 0), |(a, b), t| (a.min(t), b.max(t)));
    let (start_ns, end_ns) = match input.span {
        Some((a, b)) if a <= first.min(b) && b >= last => (a, b),
        _ if first <= last => (first, last),
        _ => (0, 0),
    };
    let Paired {
        mut holds,
        conds,
        barriers,
        unmatched,
        failed,
    } = pair(input, end_ns);
    mark_critical_path(&mut holds);
    let tid_of = |h: &Hold| input.threads[h.thread].tid;
    holds.retain(|h| filter.keeps(h, tid_of(h)));

    let duration = end_ns - start_ns;
    let summary = Summary::of(holds.iter());
    let critical = Summary::of(holds.iter().filter(|h| h.on_critical_path));

    let mut per_lock: BTreeMap<LockKey, Vec<&Hold>> = BTreeMap::new();
    for h in &holds {
        per_lock.entry(h.lock).or_default().push(h);
    }
    let mut locks: Vec<LockStats> = per_lock
        .into_iter()
        .map(|(key, hs)| {
            lock_stats(
                key,
                &hs,
                failed.get(&key).copied().unwrap_or(0),
                duration,
                input,
            )
        })
        .collect();
    locks.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(b.hold_ns.cmp(&a.hold_ns)));

    let threads = input
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mine = holds.iter().filter(|h| h.thread == i);
            let (n, w) = mine.fold((0, 0), |(n, w), h| {
                (n + u64::from(h.weight), w + h.wait_ns())
            });
            ThreadInfo {
                pid: t.pid,
                tid: t.tid,
                name: t.name.clone(),
                holds: n,
                wait_ns: w,
                dropped: t.dropped,
            }
        })
        .collect();
    LockReport {
        sample_every: input.sample_every.max(1),
        start_ns,
        end_ns,
        threads,
        filter: filter.clone(),
        summary,
        critical,
        locks,
        conds,
        barriers,
        unmatched,
        what_if: None,
        holds,
    }
}

fn lock_stats(
    key: LockKey,
    hs: &[&Hold],
    failed_waits: u64,
    duration: u64,
    input: &LockInput,
) -> LockStats {
    let acquisitions: u64 = hs.iter().map(|h| u64::from(h.weight)).sum();
    let wait_ns: u64 = hs.iter().map(|h| h.wait_ns()).sum();
    let hold_ns: u64 = hs.iter().map(|h| u64::from(h.weight) * h.hold_ns()).sum();
    let mut waits: Vec<u64> = hs
        .iter()
        .filter(|h| h.contended)
        .map(|h| h.wait_ns())
        .collect();
    waits.sort_unstable();
    let owner_changes = hs.windows(2).filter(|w| w[0].thread != w[1].thread).count() as u64;
    let mut threads: Vec<u32> = hs.iter().map(|h| input.threads[h.thread].tid).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut sites: BTreeMap<Option<u64>, SiteStats> = BTreeMap::new();
    for h in hs {
        let s = sites.entry(h.site).or_insert_with(|| SiteStats {
            site: h.site,
            ..SiteStats::default()
        });
        s.acquisitions += u64::from(h.weight);
        s.contended += u64::from(h.contended);
        s.wait_ns += h.wait_ns();
        s.hold_ns += u64::from(h.weight) * h.hold_ns();
        if h.on_critical_path {
            s.critical_events += 1;
            s.critical_wait_ns += h.wait_ns();
        }
    }
    let mut sites: Vec<SiteStats> = sites.into_values().collect();
    sites.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(b.hold_ns.cmp(&a.hold_ns)));
    let critical = Summary::of(hs.iter().copied().filter(|h| h.on_critical_path));
    // Waits of different threads overlap in time; the run would be shorter by at most the time
    // during which some critical-path event waited for this lock.
    let critical_wait_span = union_length(
        hs.iter()
            .filter(|h| h.on_critical_path && h.contended)
            .map(|h| (h.requested_ns, h.acquired_ns))
            .collect(),
    );
    LockStats {
        lock: key,
        kind: hs[0].kind,
        acquisitions,
        contended: waits.len() as u64,
        failed_waits,
        wait_ns,
        mean_wait_ns: wait_ns as f64 / acquisitions.max(1) as f64,
        wait_p50_ns: percentile(&waits, 50.0),
        wait_p99_ns: percentile(&waits, 99.0),
        wait_max_ns: waits.last().copied(),
        hold_ns,
        mean_hold_ns: hold_ns as f64 / acquisitions.max(1) as f64,
        owner_changes,
        threads,
        sites,
        what_if_ns: duration.saturating_sub(critical_wait_span),
        critical,
    }
}

mod streaming;
pub mod whatif;
pub use streaming::{
    analyze_streams, for_each_hold, schedule_steps, HoldId, LockStream, Steps, StreamOptions,
    StreamedLocks, KEPT_BYTES_PER_CONTENDED,
};

#[cfg(test)]
mod tests;
