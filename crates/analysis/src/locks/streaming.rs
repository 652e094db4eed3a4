//! The lock analysis straight from the recorded streams, without an event list in memory:
//! the same [`LockReport`] as [`analyze`](super::analyze) over [`thread_input`](super::thread_input)
//! of every stream, for memory bounded by what is reported rather than by the run's length.
//!
//! # How
//!
//! One pass. Each stream is paired into holds as [`pair`](super::pair) does (a per-thread
//! state: the open holds, the pending waits), and its holds come out in acquisition order
//! through a reorder buffer as deep as the thread's nesting.
//!
//! * Where a stream is paired (a thread of its own), every hold kept by the filter is added
//!   to that stream's sums per lock, per call site and in total, and to the thread's union of
//!   protected time (intervals arrive in start order); the streams' sums are added up when
//!   they end. Uncontended acquisitions are not kept.
//! * The holds that need the other threads' holds in order — the contended ones, and all
//!   holds of a lock that more than one stream names — are merged by `(acquired, thread,
//!   production order)`: exactly the order of `LockReport::holds` after `analyze`'s sort.
//!   Over that merged sequence a lock's owner changes are counted, and
//! * a contended hold is kept ([`KeptContended`]), with the previous owner of its lock
//!   ([`previous_owners`](super::previous_owners)): per lock and thread, the hold released
//!   last by the time of the acquisition is remembered (a few holds per lock and thread, as
//!   many as its nested holds), so owners are found without keeping the holds they were found
//!   among; an uncontended owner is copied once into a side table.
//!
//! After the pass, Chen & Stenström's walk ([`mark_critical_path`](super::mark_critical_path),
//! docs/methodology.md §4) runs over the kept contended holds and owners only, since a walk
//! only steps to a contended hold or to a contended hold's owner; the critical-path sums are
//! made from the path's holds.
//!
//! # Memory
//!
//! Per contended acquisition: [`KEPT_BYTES_PER_CONTENDED`] bytes, 200 on x86-64 (the hold
//! with its owner reference, 104; its wait for exact percentiles, 8; at most one copied
//! owner, 88), and in the result 32 bytes for its wake-up pair and 16 per hold on the
//! critical path. Per lock, call site and thread: a fixed set of sums, and per lock and
//! thread the few holds that may still become an owner. Per stream while it is read: its
//! open holds and a batch of 1024 paired holds (96 bytes each) in flight. Nothing per
//! uncontended acquisition.

use super::*;
use crate::allocs::{Block, Home};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// One recorded thread's stream and the thread's name.
#[derive(Clone, Copy)]
pub struct LockStream<'s, 'a> {
    pub stream: &'s Stream<'a>,
    pub name: &'s str,
}

/// What [`analyze_streams`] needs besides the streams.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions<'f> {
    pub clock: Conversion,
    /// The run's wall-clock span (CLOCK_MONOTONIC ns), when known.
    pub span: Option<(u64, u64)>,
    /// 1 in this many uncontended acquisitions was recorded (0 or 1: all).
    pub sample_every: u32,
    pub filter: &'f Filter,
}

/// The lock report and the heap allocation each lock lives in (runs recorded with
/// `--alloc-sites`), from one pass over the streams.
#[derive(Debug, Clone)]
pub struct StreamedLocks {
    /// `holds` has only the contended holds and those on the critical path (kept by the
    /// filter), by acquisition: what wait histograms and the critical path need. Timelines of
    /// every hold are written from the streams ([`for_each_hold`]).
    pub report: LockReport,
    pub homes: HashMap<LockKey, Home>,
    /// The critical path's holds (all, before the filter), sorted.
    pub path: Vec<HoldId>,
    /// Each contended hold with an owner: (owner, waiter), as `previous_owners` pairs them
    /// over every hold (before the filter), by the waiter's acquisition.
    pub wakeups: Vec<(HoldId, HoldId)>,
}

/// A hold's identity in [`for_each_hold`]'s sequence: its thread (index into the streams)
/// and its place among that thread's holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HoldId {
    pub thread: usize,
    pub seq: u64,
}

/// Bytes kept per contended acquisition: its [`KeptContended`] record, its wait (for the
/// percentiles) and at most one copied owner hold.
pub const KEPT_BYTES_PER_CONTENDED: usize = std::mem::size_of::<KeptContended>()
    + std::mem::size_of::<u64>()
    + std::mem::size_of::<SeqHold>();

/// The lock analysis of `streams` (one per recorded thread, in the order `LockReport::threads`
/// lists them): the same report as `analyze(&LockInput { threads: streams read by
/// thread_input, span, sample_every }, filter)`, with `holds` reduced as [`StreamedLocks`]
/// says.
pub fn analyze_streams(
    streams: &[LockStream<'_, '_>],
    options: &StreamOptions<'_>,
) -> StreamedLocks {
    let mut clock = FastClock::new(&options.clock);
    let (first, last) = streams
        .iter()
        .filter_map(|s| Some((s.stream.first_ts?, s.stream.last_ts?)))
        .fold((u64::MAX, 0), |(a, b), (f, l)| {
            (a.min(clock.ns(f)), b.max(clock.ns(l)))
        });
    let (start_ns, end_ns) = match options.span {
        Some((a, b)) if a <= first.min(b) && b >= last => (a, b),
        _ if first <= last => (first, last),
        _ => (0, 0),
    };
    let every = options.sample_every;
    let filter = options.filter;
    let ids = LockIds::of(streams);
    let sources: Vec<Summing<'_, '_, '_>> = streams
        .iter()
        .enumerate()
        .map(|(i, s)| Summing {
            pairer: Pairer::new(i, s.stream, clock, every, end_ns, true),
            sums: LocalSums::default(),
            filter,
            keep_all: filter.is_empty(),
            tid: s.stream.header.tid,
            ids: &ids,
        })
        .collect();
    let mut sink = Sink::new(streams.len(), filter, &ids);
    let sources = pair_and_merge(sources, |m| sink.add(m));
    let mut pairers = Vec::with_capacity(sources.len());
    for source in sources {
        sink.absorb(source.pairer.thread, source.sums);
        pairers.push(source.pairer);
    }

    // Per-thread results, merged in thread order as `pair` would have made them.
    let mut conds: BTreeMap<(u32, u64), CondStats> = BTreeMap::new();
    let mut barriers: BTreeMap<(u32, u64), BarrierStats> = BTreeMap::new();
    let mut failed: BTreeMap<LockKey, u64> = BTreeMap::new();
    let mut unmatched = Unmatched::default();
    let mut blocks = Vec::new();
    let mut first_seen: HashMap<LockKey, u64> = HashMap::new();
    for p in pairers {
        let pid = p.pid;
        for (address, c) in p.conds {
            let all = conds.entry((pid, address)).or_insert(CondStats {
                pid,
                address,
                waits: 0,
                timeouts: 0,
                wait_ns: 0,
                max_wait_ns: 0,
                sites: Vec::new(),
            });
            all.waits += c.waits;
            all.timeouts += c.timeouts;
            all.wait_ns = all.wait_ns.saturating_add(c.wait_ns);
            all.max_wait_ns = all.max_wait_ns.max(c.max_wait_ns);
            for s in c.sites {
                if !all.sites.contains(&s) {
                    all.sites.push(s);
                }
            }
        }
        for (address, b) in p.barriers {
            let all = barriers.entry((pid, address)).or_insert(BarrierStats {
                pid,
                address,
                waits: 0,
                wait_ns: 0,
                max_wait_ns: 0,
            });
            all.waits += b.waits;
            all.wait_ns = all.wait_ns.saturating_add(b.wait_ns);
            all.max_wait_ns = all.max_wait_ns.max(b.max_wait_ns);
        }
        for (address, n) in p.failed {
            *failed.entry(LockKey { pid, address }).or_default() += n;
        }
        unmatched.releases += p.unmatched.releases;
        unmatched.open_holds += p.unmatched.open_holds;
        unmatched.open_waits += p.unmatched.open_waits;
        unmatched.backwards += p.unmatched.backwards;
        blocks.extend(p.blocks);
        for (address, ts) in p.first_seen {
            let v = first_seen.entry(LockKey { pid, address }).or_insert(ts);
            *v = (*v).min(ts);
        }
    }
    let homes = crate::allocs::homes_of(blocks, first_seen);

    let threads: Vec<(u32, u32, String, u64)> = streams
        .iter()
        .map(|s| {
            (
                s.stream.header.pid,
                s.stream.header.tid,
                s.name.to_string(),
                s.stream.dropped,
            )
        })
        .collect();
    let id = |s: &SeqHold| HoldId {
        thread: s.hold.thread,
        seq: s.seq,
    };
    let mut path: Vec<HoldId> = sink
        .critical_path()
        .into_iter()
        .map(|n| id(sink.seq_hold(n)))
        .collect();
    path.sort_unstable();
    let wakeups = sink
        .contended
        .iter()
        .filter_map(|c| Some((id(sink.seq_hold(c.owner?)), id(&c.hold))))
        .collect();
    let report = sink.finish(SinkEnd {
        sample_every: every.max(1),
        start_ns,
        end_ns,
        threads,
        conds: conds.into_values().collect(),
        barriers: barriers.into_values().collect(),
        unmatched,
        failed,
    });
    StreamedLocks {
        report,
        homes,
        path,
        wakeups,
    }
}

/// Calls `f` with every hold of `streams` (paired as [`analyze_streams`] pairs them) and its
/// id, in acquisition order, `thread` indexing `streams`, `on_critical_path` false (see
/// [`StreamedLocks::path`]), before the filter: for exports
/// (Perfetto timelines) written as they are produced, in memory independent of the run's
/// length. `end_ns` is the report's end (the release time of holds still open at the end).
pub fn for_each_hold(
    streams: &[LockStream<'_, '_>],
    clock: &Conversion,
    sample_every: u32,
    end_ns: u64,
    mut f: impl FnMut(&Hold, HoldId),
) {
    let clock = FastClock::new(clock);
    let pairers: Vec<Pairer<'_, '_>> = streams
        .iter()
        .enumerate()
        .map(|(i, s)| Pairer::new(i, s.stream, clock, sample_every, end_ns, false))
        .collect();
    pair_and_merge(pairers, |h| {
        f(
            &h.hold,
            HoldId {
                thread: h.hold.thread,
                seq: h.seq,
            },
        )
    });
}

/// One thread's recorded schedule as [`whatif::Step`](super::whatif::Step)s, from its stream
/// paired as [`analyze_streams`] pairs it (every hold, before any filter): its own time
/// between lock calls, each call of a lock `keep` names (the wait dropped) and each release,
/// from the stream's first event to its last. The calls of the other locks (a lock only this
/// thread takes, which excludes no one; the lock whose waits a what-if removes) are left out
/// and the time around them joined into one step, and so are their waits. Memory: the
/// thread's open holds. With `to_last_event`, the steps end at the thread's last lock event:
/// what a thread does after it is the caller's to account for (the main thread joining the
/// others: a wait contend does not trace, which would otherwise replay as a sleep).
pub fn schedule_steps<'s, 'a, K: Fn(LockKey) -> bool>(
    stream: &LockStream<'s, 'a>,
    clock: &Conversion,
    sample_every: u32,
    end_ns: u64,
    keep: K,
    to_last_event: bool,
) -> Steps<'s, 'a, K> {
    let mut fast = FastClock::new(clock);
    let start = stream.stream.first_ts.map_or(0, |t| fast.ns(t));
    let last = stream.stream.last_ts.map_or(start, |t| fast.ns(t));
    Steps {
        pairer: Pairer::new(0, stream.stream, fast, sample_every, end_ns, false),
        keep,
        cursor: start,
        last,
        run: 0,
        releases: BinaryHeap::new(),
        order: 0,
        out: VecDeque::new(),
        finished: false,
        to_last_event,
    }
}

/// The iterator [`schedule_steps`] returns.
pub struct Steps<'s, 'a, K> {
    pairer: Pairer<'s, 'a>,
    keep: K,
    /// The time up to which steps were made.
    cursor: u64,
    last: u64,
    /// Own time since the last step given, not yet given.
    run: u64,
    /// Releases of kept locks still to come, by time (then production order).
    releases: BinaryHeap<Reverse<(u64, u64, LockKey)>>,
    order: u64,
    out: VecDeque<super::whatif::Step>,
    finished: bool,
    to_last_event: bool,
}

impl<K: Fn(LockKey) -> bool> Steps<'_, '_, K> {
    fn run_to(&mut self, t: u64) {
        if t > self.cursor {
            self.run += t - self.cursor;
            self.cursor = t;
        }
    }

    /// `step`, after the own time before it.
    fn emit(&mut self, step: super::whatif::Step) {
        if self.run > 0 {
            self.out.push_back(super::whatif::Step::Run {
                wall_ns: std::mem::take(&mut self.run),
            });
        }
        self.out.push_back(step);
    }

    /// Releases at or before `t`, each after the time that led to it.
    fn release_until(&mut self, t: u64) {
        while let Some(&Reverse((at, _, lock))) = self.releases.peek() {
            if at > t {
                break;
            }
            self.releases.pop();
            self.run_to(at);
            self.emit(super::whatif::Step::Release { lock });
        }
    }
}

impl<K: Fn(LockKey) -> bool> Iterator for Steps<'_, '_, K> {
    type Item = super::whatif::Step;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(s) = self.out.pop_front() {
                return Some(s);
            }
            if self.finished {
                return None;
            }
            match self.pairer.next_hold() {
                Some(SeqHold { hold: h, .. }) => {
                    self.release_until(h.requested_ns);
                    self.run_to(h.requested_ns);
                    // The wait is not own time: the replay makes its own (or none).
                    self.cursor = self.cursor.max(h.acquired_ns);
                    if (self.keep)(h.lock) {
                        self.emit(super::whatif::Step::Acquire {
                            lock: h.lock,
                            shared: h.shared,
                        });
                        self.releases
                            .push(Reverse((h.released_ns, self.order, h.lock)));
                        self.order += 1;
                    }
                }
                None => {
                    self.finished = true;
                    self.release_until(u64::MAX);
                    if !self.to_last_event {
                        let last = self.last;
                        self.run_to(last);
                    }
                    if self.run > 0 {
                        self.out.push_back(super::whatif::Step::Run {
                            wall_ns: std::mem::take(&mut self.run),
                        });
                    }
                }
            }
        }
    }
}

/// A hold with its place among its thread's holds (production order: by release, those
/// still open at the end last), which breaks ties of `(acquired, thread)` as `analyze`'s
/// stable sort does.
#[derive(Debug, Clone, Copy)]
pub struct SeqHold {
    hold: Hold,
    seq: u64,
}

impl SeqHold {
    fn key(&self) -> (u64, usize, u64) {
        (self.hold.acquired_ns, self.hold.thread, self.seq)
    }
}

/// Every object the streams name, numbered (the report's per-lock entries are a vector in
/// this order, so the merge finds a lock without hashing), and which of them more than one
/// stream names. Only the holds of those shared locks can own another thread's acquisition or
/// change owners, so only they (and contended ones) need the merged order; every other hold
/// is summed where its stream is paired.
struct LockIds {
    ids: FxMap<LockKey, u32>,
    keys: Vec<LockKey>,
    shared: Vec<bool>,
}

impl LockIds {
    fn of(streams: &[LockStream<'_, '_>]) -> LockIds {
        let mut ids = LockIds {
            ids: FxMap::default(),
            keys: Vec::new(),
            shared: Vec::new(),
        };
        let mut named_by: Vec<usize> = Vec::new();
        for (i, s) in streams.iter().enumerate() {
            let pid = s.stream.header.pid;
            for (_, address) in s.stream.objects() {
                let key = LockKey { pid, address };
                let next = ids.keys.len() as u32;
                let id = *ids.ids.entry(key).or_insert(next) as usize;
                if id == ids.keys.len() {
                    ids.keys.push(key);
                    ids.shared.push(false);
                    named_by.push(i);
                } else if named_by[id] != i {
                    ids.shared[id] = true;
                }
            }
        }
        ids
    }

    /// The number of `key`, which every hold's lock has: holds are made from their stream's
    /// object table, which [`LockIds::of`] numbered.
    fn id(&self, key: LockKey) -> u32 {
        *self
            .ids
            .get(&key)
            .expect("a hold's lock is in its stream's object table")
    }
}

/// Ordered by `(acquired, thread, seq)` in the merge.
trait Ordered {
    fn key(&self) -> (u64, usize, u64);
}

impl Ordered for SeqHold {
    #[inline]
    fn key(&self) -> (u64, usize, u64) {
        SeqHold::key(self)
    }
}

/// A hold that needs the merged order, its lock's number in [`LockIds`], and whether the
/// filter keeps it (decided where its stream is paired).
#[derive(Debug, Clone, Copy)]
struct Merged {
    hold: SeqHold,
    lock: u32,
    kept: bool,
}

impl Ordered for Merged {
    #[inline]
    fn key(&self) -> (u64, usize, u64) {
        self.hold.key()
    }
}

/// A stream's pairer that sums every hold the filter keeps (per lock, call site and thread,
/// in its own order) and hands on only the holds the merge needs: the contended ones and
/// those of shared locks. On a pairing thread, so the sums are made in parallel.
struct Summing<'s, 'a, 'f> {
    pairer: Pairer<'s, 'a>,
    sums: LocalSums,
    filter: &'f Filter,
    keep_all: bool,
    tid: u32,
    ids: &'f LockIds,
}

impl HoldSource for Summing<'_, '_, '_> {
    type Item = Merged;

    #[inline]
    fn next_hold(&mut self) -> Option<Merged> {
        loop {
            let s = self.pairer.next_hold()?;
            let kept = self.keep_all || self.filter.keeps(&s.hold, self.tid);
            let (lock, shared) = self.sums.add(&s, kept, self.ids);
            if s.hold.contended || shared {
                return Some(Merged {
                    hold: s,
                    lock,
                    kept,
                });
            }
        }
    }
}

/// Streams paired on threads of their own when there are at most this many (and more than
/// one CPU): pairing and the merged analysis then overlap.
const MAX_PAIRING_THREADS: usize = 64;
/// Holds handed from a pairing thread at a time, and batches in flight per stream: what it
/// costs in memory is `streams * (BATCHES_IN_FLIGHT + 2) * BATCH * size_of::<SeqHold>()`.
const BATCH: usize = 1024;
const BATCHES_IN_FLIGHT: usize = 4;

/// Pairs each stream and calls `f` with all holds the sources hand on, in
/// `(acquired, thread, seq)` order; gives the sources back for what they gathered on the way.
fn pair_and_merge<S>(mut pairers: Vec<S>, f: impl FnMut(S::Item)) -> Vec<S>
where
    S: HoldSource + Send,
    S::Item: Send,
{
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if pairers.len() < 2 || pairers.len() > MAX_PAIRING_THREADS || cpus < 2 {
        merge(&mut pairers, f);
        return pairers;
    }
    std::thread::scope(|scope| {
        let mut sources = Vec::with_capacity(pairers.len());
        let mut workers = Vec::with_capacity(pairers.len());
        for mut p in pairers {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<S::Item>>(BATCHES_IN_FLIGHT);
            workers.push(scope.spawn(move || {
                loop {
                    let mut batch = Vec::with_capacity(BATCH);
                    while batch.len() < BATCH {
                        match p.next_hold() {
                            Some(h) => batch.push(h),
                            None => break,
                        }
                    }
                    let last = batch.len() < BATCH;
                    if (!batch.is_empty() && tx.send(batch).is_err()) || last {
                        break;
                    }
                }
                p
            }));
            sources.push(Received {
                rx,
                batch: Vec::new().into_iter(),
            });
        }
        merge(&mut sources, f);
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// A sequence of holds in `(acquired, seq)` order, of one thread.
trait HoldSource {
    type Item: Ordered;
    fn next_hold(&mut self) -> Option<Self::Item>;
}

impl HoldSource for Pairer<'_, '_> {
    type Item = SeqHold;
    fn next_hold(&mut self) -> Option<SeqHold> {
        Pairer::next_hold(self)
    }
}

/// The holds a pairing thread sends.
struct Received<T> {
    rx: std::sync::mpsc::Receiver<Vec<T>>,
    batch: std::vec::IntoIter<T>,
}

impl<T: Ordered> HoldSource for Received<T> {
    type Item = T;
    #[inline]
    fn next_hold(&mut self) -> Option<T> {
        loop {
            if let Some(h) = self.batch.next() {
                return Some(h);
            }
            self.batch = self.rx.recv().ok()?.into_iter();
        }
    }
}

/// Merges the sources' hold sequences by `(acquired, thread, seq)`.
fn merge<S: HoldSource>(pairers: &mut [S], mut f: impl FnMut(S::Item)) {
    let mut heads: Vec<Option<S::Item>> = pairers.iter_mut().map(|p| p.next_hold()).collect();
    let mut heap: BinaryHeap<Reverse<(u64, usize, u64)>> =
        heads.iter().flatten().map(|h| Reverse(h.key())).collect();
    while let Some(Reverse((_, t, _))) = heap.pop() {
        // Take from this thread while it stays first: no heap work in runs of one thread.
        let bound = heap.peek().map(|r| r.0);
        while let Some(h) = heads[t].take() {
            f(h);
            heads[t] = pairers[t].next_hold();
            match &heads[t] {
                Some(next) if bound.is_none_or(|b| next.key() < b) => continue,
                Some(next) => {
                    heap.push(Reverse(next.key()));
                    break;
                }
                None => break,
            }
        }
    }
}

/// `Conversion::ns` without a 128-bit division per event. The exact quotient at an anchor
/// tick is kept, `(anchor - base) * 1e9 = q * hz + r`; for a later tick `t` the rest,
/// `(r + (t - anchor) * 1e9) / hz`, fits 64 bits and is estimated by a multiplication with
/// `2^64 / hz`, then corrected to the exact quotient. The anchor moves (one exact division) when `t` is more
/// than 2^63 / 1e9 ticks past it or before it.
#[derive(Debug, Clone, Copy)]
struct FastClock {
    conversion: Conversion,
    hz: u64,
    /// floor((2^64 - 1) / hz).
    reciprocal: u64,
    anchor: Option<Anchor>,
}

#[derive(Debug, Clone, Copy)]
struct Anchor {
    ticks: u64,
    q: u64,
    r: u64,
}

/// Ticks past an anchor whose scaled rest stays below 2^63.
const ANCHOR_REACH: u64 = (1 << 63) / 1_000_000_000 - 1;

impl FastClock {
    fn new(c: &Conversion) -> FastClock {
        let hz = c.hz.max(1);
        FastClock {
            conversion: *c,
            hz,
            reciprocal: u64::MAX / hz,
            anchor: None,
        }
    }

    #[inline]
    fn ns(&mut self, ticks: u64) -> u64 {
        let c = &self.conversion;
        if ticks < c.base_ticks {
            return c.ns(ticks);
        }
        if self.hz == 1_000_000_000 {
            return c.base_ns.saturating_add(ticks - c.base_ticks);
        }
        let anchor = match self.anchor {
            Some(a) if ticks >= a.ticks && ticks - a.ticks <= ANCHOR_REACH => a,
            _ => {
                let scaled = u128::from(ticks - c.base_ticks) * 1_000_000_000;
                let hz = u128::from(self.hz);
                let Ok(q) = u64::try_from(scaled / hz) else {
                    return c.ns(ticks); // past u64 nanoseconds: the exact path clamps
                };
                let a = Anchor {
                    ticks,
                    q,
                    r: (scaled % hz) as u64,
                };
                self.anchor = Some(a);
                a
            }
        };
        // Below 2^63 + hz: no overflow. The reciprocal's product is at most two below the
        // quotient, never above it.
        let x = anchor.r + (ticks - anchor.ticks) * 1_000_000_000;
        let mut q = ((u128::from(x) * u128::from(self.reciprocal)) >> 64) as u64;
        let mut product = q * self.hz;
        while x - product >= self.hz {
            q += 1;
            product += self.hz;
        }
        c.base_ns.saturating_add(anchor.q).saturating_add(q)
    }
}

/// A fast hash for lock addresses and small integer keys (FxHash's multiply).
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Per-thread totals of condition waits and barriers (merged in thread order at the end).
#[derive(Default)]
struct Waits {
    waits: u64,
    timeouts: u64,
    wait_ns: u64,
    max_wait_ns: u64,
    sites: Vec<u64>,
}

/// One stream paired into holds, as `pair` pairs one thread's events.
struct Pairer<'s, 'a> {
    thread: usize,
    pid: u32,
    stream: &'s Stream<'a>,
    events: trace::reader::Events<'a, 's>,
    clock: FastClock,
    every: u32,
    end_ns: u64,
    /// Collect what only the report needs (conds, barriers, allocation blocks).
    collect: bool,
    /// The last object looked up: loops take the same lock again and again.
    cached_object: Option<(u32, Option<(ObjectKind, u64)>)>,
    open: Vec<Open>,
    waiting: FxMap<u64, u64>,
    in_cond: FxMap<u64, (u64, Option<u64>)>,
    in_barrier: FxMap<u64, u64>,
    /// Released holds not yet handed out (an earlier-acquired hold is still open), earliest
    /// acquisition first.
    done: BinaryHeap<Reverse<Waiting>>,
    ready: VecDeque<SeqHold>,
    seq: u64,
    finished: bool,
    conds: BTreeMap<u64, Waits>,
    barriers: BTreeMap<u64, Waits>,
    failed: BTreeMap<u64, u64>,
    unmatched: Unmatched,
    first_seen: FxMap<u64, u64>,
    blocks: Vec<Block>,
    /// The previous record (ts in ns, resolved site), for alloc + alloc-address pairs.
    previous: Option<(trace::Record, u64, Option<u64>)>,
}

impl<'s, 'a> Pairer<'s, 'a> {
    fn new(
        thread: usize,
        stream: &'s Stream<'a>,
        clock: FastClock,
        every: u32,
        end_ns: u64,
        collect: bool,
    ) -> Self {
        Pairer {
            thread,
            pid: stream.header.pid,
            stream,
            events: stream.events(),
            clock,
            every,
            end_ns,
            collect,
            cached_object: None,
            open: Vec::new(),
            waiting: FxMap::default(),
            in_cond: FxMap::default(),
            in_barrier: FxMap::default(),
            done: BinaryHeap::new(),
            ready: VecDeque::new(),
            seq: 0,
            finished: false,
            conds: BTreeMap::new(),
            barriers: BTreeMap::new(),
            failed: BTreeMap::new(),
            unmatched: Unmatched::default(),
            first_seen: FxMap::default(),
            blocks: Vec::new(),
            previous: None,
        }
    }

    fn next_hold(&mut self) -> Option<SeqHold> {
        loop {
            if let Some(h) = self.ready.pop_front() {
                return Some(h);
            }
            if self.finished {
                return None;
            }
            match self.events.next() {
                Some(r) => {
                    if let Some(h) = self.event(r) {
                        return Some(h);
                    }
                }
                None => self.finish(),
            }
        }
    }

    fn object(&mut self, id: u32, ts_ns: u64) -> Option<(ObjectKind, u64)> {
        match self.cached_object {
            Some((cached, o)) if cached == id => o,
            _ => {
                let o = self.stream.object(id);
                self.cached_object = Some((id, o));
                if let (Some((_, address)), true) = (o, self.collect) {
                    // First sight on this thread (file order is time order): looked up only
                    // when the object changes, not per event.
                    self.first_seen.entry(address).or_insert(ts_ns);
                }
                o
            }
        }
    }

    /// Pairs one event; returns the hold it ends when that hold can be handed out at once
    /// (nothing else open or waiting: the common case), else queues what is ready.
    #[inline]
    fn event(&mut self, r: trace::Record) -> Option<SeqHold> {
        let ts_ns = self.clock.ns(r.ts);
        if self.collect {
            if r.kind == EventKind::AllocAddress {
                if let Some((a, a_ns, a_site)) = self.previous {
                    if a.kind == EventKind::Alloc && a_ns == ts_ns {
                        self.blocks.push(Block {
                            pid: self.pid,
                            ts_ns,
                            site: a_site,
                            address: (u64::from(a.aux) << 40)
                                | (u64::from(r.aux) << 32)
                                | u64::from(r.obj),
                            size: u64::from(a.obj),
                        });
                    }
                }
            }
            if r.kind == EventKind::Alloc || r.kind == EventKind::AllocAddress {
                let site = (r.site != NO_SITE)
                    .then(|| self.stream.site_address(r.site))
                    .flatten();
                self.previous = Some((r, ts_ns, site));
            } else {
                self.previous = None;
            }
        }
        if !r.kind.refers_to_object() || r.obj == NO_OBJECT {
            return None;
        }
        let (kind, address) = self.object(r.obj, ts_ns)?;
        let key = LockKey {
            pid: self.pid,
            address,
        };
        match r.kind {
            EventKind::LockWait => {
                self.waiting.insert(address, ts_ns);
            }
            EventKind::LockAcquired => {
                let contended = locks::has(r.aux, CONTENDED);
                let requested_ns = if self.waiting.is_empty() {
                    ts_ns
                } else {
                    match self.waiting.remove(&address) {
                        Some(w) if contended && w > ts_ns => {
                            self.unmatched.backwards += 1;
                            ts_ns
                        }
                        Some(w) if contended => w,
                        _ => ts_ns,
                    }
                };
                let site = if r.site == NO_SITE {
                    None
                } else {
                    self.stream.site_address(r.site)
                };
                self.open.push(Open {
                    lock: key,
                    kind,
                    site,
                    requested_ns,
                    acquired_ns: ts_ns,
                    aux: r.aux,
                });
            }
            EventKind::LockFailed => {
                self.waiting.remove(&address);
                *self.failed.entry(address).or_default() += 1;
            }
            EventKind::LockReleased => {
                return match self.open.iter().rposition(|o| o.lock == key) {
                    Some(i) => {
                        // Built in place: copying the open hold out of the vector first stalls
                        // a store forwarding on every release.
                        let o = &self.open[i];
                        self.unmatched.backwards += u64::from(ts_ns < o.acquired_ns);
                        let hold =
                            make_hold(self.thread, o, ts_ns.max(o.acquired_ns), false, self.every);
                        if i + 1 == self.open.len() {
                            self.open.pop();
                        } else {
                            self.open.remove(i);
                        }
                        return self.released(hold);
                    }
                    None => {
                        self.unmatched.releases += 1;
                        None
                    }
                };
            }
            EventKind::CondWait if self.collect => {
                self.in_cond
                    .insert(address, (ts_ns, site_of(self.stream, r.site)));
            }
            EventKind::CondWoken if self.collect => {
                if let Some((start, site)) = self.in_cond.remove(&address) {
                    let c = self.conds.entry(address).or_default();
                    let w = ts_ns.saturating_sub(start);
                    self.unmatched.backwards += u64::from(ts_ns < start);
                    c.waits += 1;
                    c.timeouts += u64::from(i32::from(r.aux) == libc_etimedout());
                    c.wait_ns = c.wait_ns.saturating_add(w);
                    c.max_wait_ns = c.max_wait_ns.max(w);
                    if let Some(s) = site {
                        if !c.sites.contains(&s) {
                            c.sites.push(s);
                        }
                    }
                }
            }
            EventKind::BarrierWait if self.collect => {
                self.in_barrier.insert(address, ts_ns);
            }
            EventKind::BarrierDone if self.collect => {
                if let Some(start) = self.in_barrier.remove(&address) {
                    let b = self.barriers.entry(address).or_default();
                    let w = ts_ns.saturating_sub(start);
                    self.unmatched.backwards += u64::from(ts_ns < start);
                    b.waits += 1;
                    b.wait_ns = b.wait_ns.saturating_add(w);
                    b.max_wait_ns = b.max_wait_ns.max(w);
                }
            }
            _ => {}
        }
        None
    }

    /// A hold is handed out once no open hold was acquired before it: open holds get a later
    /// `seq`, and holds acquired later come after it anyway.
    fn released(&mut self, hold: Hold) -> Option<SeqHold> {
        let h = SeqHold {
            hold,
            seq: self.seq,
        };
        self.seq += 1;
        if self.open.is_empty() && self.done.is_empty() {
            if self.ready.is_empty() {
                return Some(h);
            }
            self.ready.push_back(h);
            return None;
        }
        let now_ns = h.hold.released_ns;
        self.done.push(Reverse(Waiting(h)));
        // A hold whose release never comes (lost with dropped events) would keep every later
        // hold of the thread waiting: past MAX_WAITING, the oldest open hold is closed as
        // unreleased, held at least until now, and counted with the holds left open.
        while self.done.len() > MAX_WAITING && !self.open.is_empty() {
            let (i, _) = self
                .open
                .iter()
                .enumerate()
                .min_by_key(|(_, o)| o.acquired_ns)
                .expect("not empty");
            let o = self.open.remove(i);
            self.unmatched.open_holds += 1;
            let hold = make_hold(self.thread, &o, now_ns.max(o.acquired_ns), true, self.every);
            self.done.push(Reverse(Waiting(SeqHold {
                hold,
                seq: self.seq,
            })));
            self.seq += 1;
        }
        let oldest_open = self.open.iter().map(|o| o.acquired_ns).min();
        while let Some(Reverse(w)) = self.done.peek() {
            if oldest_open.is_some_and(|t| w.0.hold.acquired_ns > t) {
                break;
            }
            let Some(Reverse(w)) = self.done.pop() else {
                break;
            };
            self.ready.push_back(w.0);
        }
        None
    }

    fn finish(&mut self) {
        self.finished = true;
        self.unmatched.open_waits += self.waiting.len() as u64;
        self.unmatched.open_holds += self.open.len() as u64;
        // In acquisition order, each still counting the others as open.
        while !self.open.is_empty() {
            let o = self.open.remove(0);
            let hold = make_hold(
                self.thread,
                &o,
                self.end_ns.max(o.acquired_ns),
                true,
                self.every,
            );
            if let Some(h) = self.released(hold) {
                self.ready.push_back(h);
            }
        }
        while let Some(Reverse(w)) = self.done.pop() {
            self.ready.push_back(w.0);
        }
    }
}

fn site_of(stream: &Stream<'_>, site: u16) -> Option<u64> {
    if site == NO_SITE {
        None
    } else {
        stream.site_address(site)
    }
}

/// How many released holds of one thread may wait behind one of its open holds (about 100
/// bytes each) before that open hold is taken to have lost its release.
pub const MAX_WAITING: usize = 1 << 20;

/// A released hold waiting to be handed out, ordered by acquisition (then `seq`).
#[derive(Debug, Clone, Copy)]
struct Waiting(SeqHold);

impl Waiting {
    fn order(&self) -> (u64, u64) {
        (self.0.hold.acquired_ns, self.0.seq)
    }
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.order() == other.order()
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order().cmp(&other.order())
    }
}

/// Where a hold on the critical path is kept: among the contended ones, or among the
/// uncontended owners copied aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Contended(u32),
    Owner(u32),
}

/// A contended hold kept for the critical path and the wait percentiles.
#[derive(Debug, Clone, Copy)]
pub struct KeptContended {
    hold: SeqHold,
    /// The hold whose release let it in (see `previous_owners`).
    owner: Option<Node>,
    kept_by_filter: bool,
}

/// A hold of a lock by one thread that may become a later contended acquisition's owner.
#[derive(Clone, Copy)]
struct Candidate {
    hold: SeqHold,
    /// Its index among the contended holds, when it is one.
    contended: Option<u32>,
}

impl Candidate {
    /// `previous_owners` takes the latest release, ties broken by the later place in the
    /// sorted holds.
    fn rank(&self) -> (u64, u64, usize, u64) {
        let h = &self.hold;
        (h.hold.released_ns, h.hold.acquired_ns, h.hold.thread, h.seq)
    }
}

/// Per lock and thread: the best owner candidate for acquisitions from now on, and the holds
/// not yet released by now (nested holds; usually the one just taken).
struct Slot {
    thread: usize,
    best: Option<Candidate>,
    /// Index in the owner table once `best` (uncontended) was copied there.
    best_copied: Option<u32>,
    pending: Vec<Candidate>,
}

impl Slot {
    /// Holds released at or before `now` and acquired before it can own acquisitions at
    /// `now` and later.
    fn promote(&mut self, now: u64) {
        let mut i = 0;
        while i < self.pending.len() {
            let c = self.pending[i];
            if c.hold.hold.released_ns <= now && c.hold.hold.acquired_ns < now {
                self.pending.swap_remove(i);
                if self.best.is_none_or(|b| c.rank() > b.rank()) {
                    self.best = Some(c);
                    self.best_copied = None;
                }
            } else {
                i += 1;
            }
        }
    }
}

/// Entries per lock, found by key with the last one cached: loops take the same lock again
/// and again.
struct LockTable<T> {
    entries: Vec<(LockKey, T)>,
    index: FxMap<LockKey, usize>,
    last: Option<(LockKey, usize)>,
}

impl<T> Default for LockTable<T> {
    fn default() -> Self {
        LockTable {
            entries: Vec::new(),
            index: FxMap::default(),
            last: None,
        }
    }
}

impl<T> LockTable<T> {
    /// The entry of `key`, made by `new` at first sight.
    #[inline]
    fn entry(&mut self, key: LockKey, new: impl FnOnce() -> T) -> &mut T {
        let i = match self.last {
            Some((k, i)) if k == key => i,
            _ => {
                let next = self.entries.len();
                let i = *self.index.entry(key).or_insert(next);
                if i == next {
                    self.entries.push((key, new()));
                }
                self.last = Some((key, i));
                i
            }
        };
        &mut self.entries[i].1
    }
}

/// One lock's sums over the holds one thread's filter kept, in that thread's order.
struct LocalLock {
    /// Its number in [`LockIds`], and whether other threads name it.
    id: u32,
    shared: bool,
    /// The first kept hold, `(acquired, seq)`, and its kind: the report's kind is that of the
    /// first kept hold of all threads.
    first: Option<(u64, u64, ObjectKind)>,
    acquisitions: u64,
    wait_ns: u64,
    hold_ns: u64,
    /// Each contended hold's wait, for the percentiles.
    waits: Vec<u64>,
    /// The first call site's sums in place (most locks are taken from one site per thread,
    /// and a lookup per hold in a vector of its own was a cache miss per hold on a program
    /// taking thousands of locks at random), the others after it.
    site: SiteStats,
    more_sites: Vec<SiteStats>,
}

/// What one thread's kept holds add up to: summed on its pairing thread, merged into the
/// [`Sink`] once its stream is done (sums commute, so the result is the merged order's).
#[derive(Default)]
struct LocalSums {
    summary: Summary,
    thread: ThreadAgg,
    locks: LockTable<LocalLock>,
}

impl LocalSums {
    /// Adds `s` when the filter `kept` it; gives its lock's number and whether it is shared.
    #[inline]
    fn add(&mut self, s: &SeqHold, kept: bool, ids: &LockIds) -> (u32, bool) {
        let h = &s.hold;
        let l = self.locks.entry(h.lock, || {
            let id = ids.id(h.lock);
            LocalLock {
                id,
                shared: ids.shared[id as usize],
                first: None,
                acquisitions: 0,
                wait_ns: 0,
                hold_ns: 0,
                waits: Vec::new(),
                site: SiteStats {
                    site: h.site,
                    ..SiteStats::default()
                },
                more_sites: Vec::new(),
            }
        });
        let found = (l.id, l.shared);
        if !kept {
            return found;
        }
        l.first.get_or_insert((h.acquired_ns, s.seq, h.kind));
        let w = u64::from(h.weight);
        let (wait, hold) = (h.wait_ns(), h.hold_ns());
        let sum = &mut self.summary;
        sum.events = sum.events.saturating_add(w);
        sum.contended += u64::from(h.contended);
        sum.protected_ns = sum.protected_ns.saturating_add(w.saturating_mul(hold));
        sum.wait_ns = sum.wait_ns.saturating_add(wait);
        sum.duration_ns = sum
            .duration_ns
            .saturating_add(w.saturating_mul(hold).saturating_add(wait));
        let t = &mut self.thread;
        t.holds = t.holds.saturating_add(w);
        t.wait_ns = t.wait_ns.saturating_add(wait);
        t.current = match t.current {
            Some((a, b)) if h.acquired_ns <= b => Some((a, b.max(h.released_ns))),
            Some((a, b)) => {
                t.union_ns = t.union_ns.saturating_add(b - a);
                Some((h.acquired_ns, h.released_ns))
            }
            None => Some((h.acquired_ns, h.released_ns)),
        };
        l.acquisitions = l.acquisitions.saturating_add(w);
        l.wait_ns = l.wait_ns.saturating_add(wait);
        l.hold_ns = l.hold_ns.saturating_add(w.saturating_mul(hold));
        if h.contended {
            l.waits.push(wait);
        }
        let st = if l.site.site == h.site {
            &mut l.site
        } else {
            let i = match l.more_sites.iter().position(|x| x.site == h.site) {
                Some(i) => i,
                None => {
                    l.more_sites.push(SiteStats {
                        site: h.site,
                        ..SiteStats::default()
                    });
                    l.more_sites.len() - 1
                }
            };
            &mut l.more_sites[i]
        };
        st.acquisitions = st.acquisitions.saturating_add(w);
        st.contended += u64::from(h.contended);
        st.wait_ns = st.wait_ns.saturating_add(wait);
        st.hold_ns = st.hold_ns.saturating_add(w.saturating_mul(hold));
        found
    }
}

#[derive(Default)]
struct LockAgg {
    /// The first kept hold's `(acquired, thread, seq)` and kind.
    first: Option<(u64, usize, u64)>,
    kind: Option<ObjectKind>,
    acquisitions: u64,
    wait_ns: u64,
    hold_ns: u64,
    waits: Vec<u64>,
    owner_changes: u64,
    last_thread: Option<usize>,
    threads: Vec<usize>,
    /// Per call site and thread until `finish` adds up each site's rows.
    sites: Vec<SiteStats>,
    slots: Vec<Slot>,
    last_slot: usize,
}

#[derive(Default, Clone, Copy)]
struct ThreadAgg {
    holds: u64,
    wait_ns: u64,
    /// The union of protected intervals so far: the current merged interval, and the total
    /// of those closed (intervals arrive by start).
    current: Option<(u64, u64)>,
    union_ns: u64,
}

struct Sink<'f> {
    filter: &'f Filter,
    /// Indexed by [`LockIds`] number.
    locks: Vec<(LockKey, LockAgg)>,
    threads: Vec<ThreadAgg>,
    summary: Summary,
    contended: Vec<KeptContended>,
    owners: Vec<SeqHold>,
}

struct SinkEnd {
    sample_every: u32,
    start_ns: u64,
    end_ns: u64,
    /// pid, tid, name, dropped per thread.
    threads: Vec<(u32, u32, String, u64)>,
    conds: Vec<CondStats>,
    barriers: Vec<BarrierStats>,
    unmatched: Unmatched,
    failed: BTreeMap<LockKey, u64>,
}

impl<'f> Sink<'f> {
    fn new(threads: usize, filter: &'f Filter, ids: &LockIds) -> Self {
        Sink {
            filter,
            locks: ids.keys.iter().map(|&k| (k, LockAgg::default())).collect(),
            threads: vec![ThreadAgg::default(); threads],
            summary: Summary::default(),
            contended: Vec::new(),
            owners: Vec::new(),
        }
    }

    /// A hold in the merged order (contended, or of a shared lock): its owner, its lock's
    /// owner candidates and owner changes. Its sums are made by [`LocalSums`].
    fn add(&mut self, m: Merged) {
        let s = m.hold;
        let h = s.hold;
        let li = m.lock as usize;
        // The owner, over all holds (the walk runs before the filter, as in `analyze`).
        let contended_index = if h.contended {
            let owner = self.owner_of(li, &s);
            let i = self.contended.len() as u32;
            self.contended.push(KeptContended {
                hold: s,
                owner,
                kept_by_filter: m.kept,
            });
            Some(i)
        } else {
            None
        };
        let agg = &mut self.locks[li].1;
        let slot = match agg.slots.get(agg.last_slot) {
            Some(slot) if slot.thread == h.thread => agg.last_slot,
            _ => match agg.slots.iter().position(|slot| slot.thread == h.thread) {
                Some(i) => i,
                None => {
                    agg.slots.push(Slot {
                        thread: h.thread,
                        best: None,
                        best_copied: None,
                        pending: Vec::new(),
                    });
                    agg.slots.len() - 1
                }
            },
        };
        agg.last_slot = slot;
        let slot = &mut agg.slots[slot];
        slot.promote(h.acquired_ns);
        slot.pending.push(Candidate {
            hold: s,
            contended: contended_index,
        });
        // Owner changes among kept holds: a lock only one thread names never changes owner,
        // so the holds not merged lose none.
        if m.kept && agg.last_thread != Some(h.thread) {
            if agg.last_thread.is_some() {
                agg.owner_changes += 1;
            }
            agg.last_thread = Some(h.thread);
        }
    }

    /// Adds thread `thread`'s sums, once its stream is done.
    fn absorb(&mut self, thread: usize, sums: LocalSums) {
        let (sum, mine) = (&mut self.summary, &sums.summary);
        sum.events = sum.events.saturating_add(mine.events);
        sum.contended = sum.contended.saturating_add(mine.contended);
        sum.protected_ns = sum.protected_ns.saturating_add(mine.protected_ns);
        sum.wait_ns = sum.wait_ns.saturating_add(mine.wait_ns);
        sum.duration_ns = sum.duration_ns.saturating_add(mine.duration_ns);
        self.threads[thread] = sums.thread;
        for (_, l) in sums.locks.entries {
            let Some((acquired, seq, kind)) = l.first else {
                continue; // no hold kept by the filter
            };
            let agg = &mut self.locks[l.id as usize].1;
            let first = (acquired, thread, seq);
            if agg.first.is_none_or(|f| first < f) {
                agg.first = Some(first);
                agg.kind = Some(kind);
            }
            agg.acquisitions = agg.acquisitions.saturating_add(l.acquisitions);
            agg.wait_ns = agg.wait_ns.saturating_add(l.wait_ns);
            agg.hold_ns = agg.hold_ns.saturating_add(l.hold_ns);
            agg.waits.extend(l.waits);
            agg.threads.push(thread);
            // A site row of no kept hold (the first hold seen was not kept) adds nothing.
            agg.sites.extend(
                std::iter::once(l.site)
                    .chain(l.more_sites)
                    .filter(|s| s.acquisitions > 0),
            );
        }
    }

    /// `previous_owners` for the contended hold `s` of lock `li`.
    fn owner_of(&mut self, li: usize, s: &SeqHold) -> Option<Node> {
        let now = s.hold.acquired_ns;
        let agg = &mut self.locks[li].1;
        let mut best: Option<(usize, Candidate)> = None;
        for (i, slot) in agg.slots.iter_mut().enumerate() {
            if slot.thread == s.hold.thread {
                continue;
            }
            slot.promote(now);
            if let Some(c) = slot.best {
                if best.is_none_or(|(_, b)| c.rank() > b.rank()) {
                    best = Some((i, c));
                }
            }
        }
        let (i, c) = best?;
        if let Some(ci) = c.contended {
            return Some(Node::Contended(ci));
        }
        let slot = &mut agg.slots[i];
        let oi = match slot.best_copied {
            Some(oi) => oi,
            None => {
                self.owners.push(c.hold);
                let oi = (self.owners.len() - 1) as u32;
                slot.best_copied = Some(oi);
                oi
            }
        };
        Some(Node::Owner(oi))
    }

    fn seq_hold(&self, n: Node) -> &SeqHold {
        match n {
            Node::Contended(i) => &self.contended[i as usize].hold,
            Node::Owner(i) => &self.owners[i as usize],
        }
    }

    fn hold(&self, n: Node) -> &Hold {
        &self.seq_hold(n).hold
    }

    /// `mark_critical_path` over the kept holds: the path's nodes, latest first.
    fn critical_path(&self) -> Vec<Node> {
        let Some(last) = self.contended.len().checked_sub(1) else {
            return Vec::new();
        };
        let previous_contended = |before_ns: u64| -> Option<Node> {
            let k = self
                .contended
                .partition_point(|c| c.hold.hold.acquired_ns < before_ns);
            k.checked_sub(1).map(|k| Node::Contended(k as u32))
        };
        let mut current = Node::Contended(last as u32);
        let mut path = vec![current];
        loop {
            let h = self.hold(current);
            let next = match current {
                Node::Contended(i) => self.contended[i as usize]
                    .owner
                    .or_else(|| previous_contended(h.requested_ns)),
                Node::Owner(_) => previous_contended(h.acquired_ns),
            };
            match next {
                Some(n) if self.hold(n).acquired_ns < h.acquired_ns => {
                    current = n;
                    path.push(n);
                }
                _ => break,
            }
        }
        path
    }

    fn finish(mut self, end: SinkEnd) -> LockReport {
        let path = self.critical_path();
        let tid = |t: usize| end.threads[t].1;
        let mut on_path: Vec<SeqHold> = path
            .iter()
            .map(|&n| match n {
                Node::Contended(i) => self.contended[i as usize].hold,
                Node::Owner(i) => self.owners[i as usize],
            })
            .filter(|s| self.filter.keeps(&s.hold, tid(s.hold.thread)))
            .collect();
        for s in &mut on_path {
            s.hold.on_critical_path = true;
        }
        on_path.reverse();
        let critical = Summary::of(on_path.iter().map(|s| &s.hold));

        let duration = end.end_ns - end.start_ns;
        let mut sorted: Vec<usize> = (0..self.locks.len()).collect();
        sorted.sort_by_key(|&i| self.locks[i].0);
        let mut locks: Vec<LockStats> = Vec::new();
        for i in sorted {
            let (key, agg) = &mut self.locks[i];
            let Some(kind) = agg.kind else {
                continue; // no hold kept by the filter
            };
            // One row per site: the threads' rows added up.
            agg.sites.sort_by_key(|s| s.site);
            agg.sites.dedup_by(|next, kept| {
                if next.site != kept.site {
                    return false;
                }
                kept.acquisitions = kept.acquisitions.saturating_add(next.acquisitions);
                kept.contended = kept.contended.saturating_add(next.contended);
                kept.wait_ns = kept.wait_ns.saturating_add(next.wait_ns);
                kept.hold_ns = kept.hold_ns.saturating_add(next.hold_ns);
                true
            });
            let mine: Vec<&Hold> = on_path
                .iter()
                .map(|s| &s.hold)
                .filter(|h| h.lock == *key)
                .collect();
            for h in &mine {
                if let Some(st) = agg.sites.iter_mut().find(|x| x.site == h.site) {
                    st.critical_events += 1;
                    st.critical_wait_ns = st.critical_wait_ns.saturating_add(h.wait_ns());
                }
            }
            let mut sites = std::mem::take(&mut agg.sites);
            sites.sort_by_key(|s| s.site);
            sites.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(b.hold_ns.cmp(&a.hold_ns)));
            let critical_wait_span = union_length(
                mine.iter()
                    .filter(|h| h.contended)
                    .map(|h| (h.requested_ns, h.acquired_ns))
                    .collect(),
            );
            let mut waits = std::mem::take(&mut agg.waits);
            waits.sort_unstable();
            let mut threads: Vec<u32> = agg.threads.iter().map(|&t| tid(t)).collect();
            threads.sort_unstable();
            threads.dedup();
            let acquisitions = agg.acquisitions;
            locks.push(LockStats {
                lock: *key,
                kind,
                acquisitions,
                contended: waits.len() as u64,
                failed_waits: end.failed.get(key).copied().unwrap_or(0),
                wait_ns: agg.wait_ns,
                mean_wait_ns: agg.wait_ns as f64 / acquisitions.max(1) as f64,
                wait_p50_ns: percentile(&waits, 50.0),
                wait_p99_ns: percentile(&waits, 99.0),
                wait_max_ns: waits.last().copied(),
                hold_ns: agg.hold_ns,
                mean_hold_ns: agg.hold_ns as f64 / acquisitions.max(1) as f64,
                owner_changes: agg.owner_changes,
                threads,
                sites,
                critical: Summary::of(mine.iter().copied()),
                what_if_ns: duration.saturating_sub(critical_wait_span),
            });
        }
        locks.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(b.hold_ns.cmp(&a.hold_ns)));

        let mut summary = self.summary;
        summary.protected_union_ns = self
            .threads
            .iter()
            .map(|t| {
                t.union_ns
                    .saturating_add(t.current.map_or(0, |(a, b)| b - a))
            })
            .fold(0, u64::saturating_add);
        summary.mean_hold_ns = if summary.events == 0 {
            0.0
        } else {
            summary.protected_ns as f64 / summary.events as f64
        };
        let threads = end
            .threads
            .into_iter()
            .zip(&self.threads)
            .map(|((pid, tid, name, dropped), t)| ThreadInfo {
                pid,
                tid,
                name,
                holds: t.holds,
                wait_ns: t.wait_ns,
                dropped,
            })
            .collect();

        // Kept holds: the contended ones kept by the filter and the path's, by acquisition.
        // Both lists are in key order (the path's acquisitions strictly increase): merged in
        // one pass, since inserting each path hold into a vector was quadratic on a run of
        // 300 000 contended holds.
        let mut holds: Vec<SeqHold> = Vec::with_capacity(self.contended.len() + on_path.len());
        let mut path = on_path.iter().peekable();
        for c in self.contended.iter().filter(|c| c.kept_by_filter) {
            let mut h = c.hold;
            while let Some(p) = path.next_if(|p| p.key() <= h.key()) {
                if p.key() == h.key() {
                    h.hold.on_critical_path = true;
                } else {
                    holds.push(*p);
                }
            }
            holds.push(h);
        }
        holds.extend(path);
        LockReport {
            sample_every: end.sample_every,
            start_ns: end.start_ns,
            end_ns: end.end_ns,
            threads,
            filter: self.filter.clone(),
            summary,
            critical,
            locks,
            conds: end.conds,
            barriers: end.barriers,
            unmatched: end.unmatched,
            what_if: None,
            holds: holds.into_iter().map(|s| s.hold).collect(),
        }
    }
}

#[cfg(test)]
mod tests;
