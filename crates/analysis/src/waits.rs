//! Blocked waits of any runtime (issue 22, slice 1): the program's voluntary switches out
//! (`offcpu-PID` streams), ended by the thread's next switch in (the sched tracepoints'
//! `sched-TID` streams), grouped per futex address and per thread.
//!
//! A **futex wait** is a block whose kernel chain passes a futex wait system call; its key is
//! (pid, the futex word's address `di`). It lasts from the switch out to the thread's next
//! switch in: the time blocked (to the wake-up, when the wake-up was traced) plus the time it
//! then waited for a CPU (run queue). A wait whose switch in was not traced before the
//! thread's next block is counted as unmeasured, never given a length it may not have had.
//!
//! **Not counted twice** (design §3.3): a futex wait of thread T lying inside a lock, condition
//! or barrier wait the LD_PRELOAD probe recorded for T (±1 µs), on an object whose bytes
//! contain the futex word, is the probe's: it is shown as already counted and left out of the
//! totals here.
//!
//! **Stacks** (slice 2): a block may name its user stack, unwound and named by the caller
//! ([`WaitStack`]: the kind from [`classify`], the program's frame that waited, the frames);
//! waits are then also counted per kind and per (kind, program frame) on each futex word.
//!
//! **Blame** (slice 3, design §3.1): each measured futex wait of thread W from t0 to its switch
//! in is paired ([`pair`]) with the first waking of W in (t0, switch in] by a thread of the
//! program whose kernel chain is a futex wake on the same (pid, word) (or on the word a requeue
//! moved W's to); the waker's stack marks the end of the holder's critical section. Otherwise
//! the wait was ended by a timer, by an interrupt, by another kernel path of the program, by a
//! task outside the program (the sched tracepoints' waker), or by what was not traced. The
//! pairs give "who made whom wait" (waiter site → waker site) and, as Go's runtime mutex
//! profile does, the **holder charge**: each waker site is charged the sum of the waits it
//! ended, a broadcast every waiter it woke (100 waiters blocked 10 ms = 1 s). Waits the lock
//! probe already counted are paired too (they are not counted again in the totals, but their
//! waker is shown): pthread locks get blame as well.
//!
//! Pure: plain values in, a [`WaitReport`] out.

mod call_sites;
mod classify;
mod kernel;
mod runtimes;
pub use call_sites::{call_sites, CallSiteWaits};
pub use classify::{classify, is_runtime_frame, keyed_by_call_site, WaitKind};
pub use kernel::{blocked_by_lock, entry_site, KernelLockWaits};
pub use runtimes::{is_jit_frame, runtime_of, runtimes, Runtime, RuntimeSite, RuntimeWaits};

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use trace::offcpu::{FutexArgs, WakeFutex, WakeHow};
use trace::sched::{State, StateChange};

/// A thread's blocks, in time order, their reasons resolved to strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBlocks {
    pub pid: u32,
    pub tid: u32,
    pub blocks: Vec<BlockIn>,
}

/// One voluntary switch out (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockIn {
    pub ts: u64,
    pub reason: Option<String>,
    pub futex: Option<FutexArgs>,
    pub stack: StackIn,
}

/// A block's user stack, as the caller found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StackIn {
    /// The run recorded no stacks (before slice 2, or waits without stacks asked for).
    #[default]
    NotRecorded,
    /// Recorded without one (the budget spent, an empty copy, an entry unreadable).
    Missing,
    /// Index into the stacks given to [`waits_with_stacks`].
    At(u32),
}

/// One waking by a thread of the program (CLOCK_MONOTONIC ns): `tid` of process `pid` woke
/// `woken`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakingIn {
    pub pid: u32,
    pub tid: u32,
    pub ts: u64,
    pub woken: u32,
    pub how: WakeHow,
    pub futex: Option<WakeFutex>,
    /// The waker's stack (indexes the same stacks as the blocks').
    pub stack: StackIn,
}

/// What ended a futex wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WokenBy {
    /// A futex wake on the wait's word by a thread of the program: the index of its waking.
    FutexWake(usize),
    /// A timer's expiry seen in the program's context (a timed wait's timeout).
    Timer,
    /// An interrupt that came while a thread of the program ran.
    Interrupt,
    /// A thread of the program, by another path (a wake on another word, a signal).
    OtherPath(usize),
    /// A thread of the program by a path its events do not see: its exit (a join's wake comes
    /// after the exiting thread's events are closed).
    ProgramUntraced(u32),
    /// A task outside the program (its tid, from the sched tracepoints).
    OtherTask(u32),
    /// Nothing traced says (the wake-up came from an idle CPU's interrupt, or was not traced).
    Unknown,
}

/// The program's wakings, indexed for [`pair`]: by the thread woken, in time order; and the
/// words requeues moved waiters to.
#[derive(Debug, Default)]
pub struct WakingIndex<'a> {
    wakings: &'a [WakingIn],
    by_woken: BTreeMap<u32, Vec<usize>>,
    /// (pid, word) → the words a requeue moved its waiters to.
    requeued: BTreeMap<(u32, u64), BTreeSet<u64>>,
}

impl<'a> WakingIndex<'a> {
    pub fn new(wakings: &'a [WakingIn]) -> WakingIndex<'a> {
        let mut by_woken: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut requeued: BTreeMap<(u32, u64), BTreeSet<u64>> = BTreeMap::new();
        for (i, w) in wakings.iter().enumerate() {
            by_woken.entry(w.woken).or_default().push(i);
            if let Some(WakeFutex {
                uaddr,
                op,
                uaddr2: Some(to),
            }) = w.futex
            {
                // FUTEX_REQUEUE, FUTEX_CMP_REQUEUE(_PI): waiters on `uaddr` now wait on `to`.
                if matches!(op & trace::offcpu::FUTEX_CMD_MASK, 3 | 4 | 12) {
                    requeued.entry((w.pid, uaddr)).or_default().insert(to);
                }
            }
        }
        for v in by_woken.values_mut() {
            v.sort_by_key(|&i| wakings[i].ts);
        }
        WakingIndex {
            wakings,
            by_woken,
            requeued,
        }
    }

    pub fn get(&self, i: usize) -> Option<&'a WakingIn> {
        self.wakings.get(i)
    }

    /// The waking wakes a waiter of `pid` on `uaddr`: the same word, or the word a requeue
    /// moved it to, or the second word of a wake-op.
    fn wakes_word(&self, w: &WakingIn, pid: u32, uaddr: u64) -> bool {
        let Some(f) = w.futex.filter(|_| w.pid == pid && w.how == WakeHow::Futex) else {
            return false;
        };
        f.uaddr == uaddr
            || f.uaddr2 == Some(uaddr)
            || self
                .requeued
                .get(&(pid, uaddr))
                .is_some_and(|to| to.contains(&f.uaddr))
    }
}

/// A futex wait to pair: thread `tid` of `pid` blocked on `uaddr` at `start` and was switched
/// in at `end`; `sched_waker` the waker the sched tracepoints named for its wake-up (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitToPair {
    pub pid: u32,
    pub tid: u32,
    pub uaddr: u64,
    pub start: u64,
    pub end: u64,
    pub sched_waker: u32,
    /// The wait's stack (an index into the stacks given), if any.
    pub stack: Option<u32>,
}

/// Slack past a wait's end for its waking: where the switch in was not traced, the wait ends
/// at the wake-up the system-wide tracepoint saw, which the waker's own event may follow by a
/// few hundred ns (two perf events of one tracepoint hit, each timestamped).
pub const WAKE_SLACK_NS: u64 = 1_000;

/// What ended `w` (design §3.1): the first waking of its thread in (start, end] by the
/// program; a futex wake on its word is its waker. Without one, the sched tracepoints' waker.
pub fn pair(w: &WaitToPair, index: &WakingIndex<'_>) -> WokenBy {
    let Some(mine) = index.by_woken.get(&w.tid) else {
        return by_sched(w);
    };
    let from = mine.partition_point(|&i| index.wakings[i].ts <= w.start);
    let Some(&i) = mine[from..]
        .iter()
        .take_while(|&&i| index.wakings[i].ts <= w.end.saturating_add(WAKE_SLACK_NS))
        .next()
    else {
        return by_sched(w);
    };
    let k = &index.wakings[i];
    match k.how {
        WakeHow::Futex if index.wakes_word(k, w.pid, w.uaddr) => WokenBy::FutexWake(i),
        WakeHow::Timer => WokenBy::Timer,
        WakeHow::Interrupt => WokenBy::Interrupt,
        _ => WokenBy::OtherPath(i),
    }
}

fn by_sched(w: &WaitToPair) -> WokenBy {
    match w.sched_waker {
        0 => WokenBy::Unknown,
        t => WokenBy::OtherTask(t),
    }
}

/// A count of waits and their time, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WaitCount {
    pub waits: u64,
    pub total_ns: u64,
}

impl WaitCount {
    fn add(&mut self, ns: u64) {
        self.waits += 1;
        self.total_ns += ns;
    }
}

/// What ended the measured futex waits (probe-counted ones included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WokenByCounts {
    /// A futex wake on the word by a thread of the program (paired: in the blame tables).
    pub futex_wake: WaitCount,
    /// A timer (a timed wait's timeout).
    pub timer: WaitCount,
    /// An interrupt that came while a thread of the program ran.
    pub interrupt: WaitCount,
    /// A thread of the program by another path (a wake on another word, a signal, its exit).
    pub other_path: WaitCount,
    /// A task outside the program.
    pub other_task: WaitCount,
    /// Not known: no waking was traced (an idle CPU's interrupt, or the wakes not recorded).
    pub unknown: WaitCount,
}

/// Who made whom wait: futex waits at one program frame, ended by wakes at another.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BlamePair {
    pub pid: u32,
    /// The waiter's kind and program frame (absent: no stack, or no program frame found).
    pub waiter_kind: Option<WaitKind>,
    pub waiter_site: Option<String>,
    /// The waker's program frame: where the holder's critical section ended (the unlock, the
    /// guard's drop, the notify).
    pub waker_site: Option<String>,
    pub waits: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Of `waits`, those inside pthread calls the lock probe recorded.
    pub probe_counted: u64,
}

/// A critical section charged with the wait it caused (Go's mutex profile): the waits its
/// wakes ended, each waiter counted (a broadcast to 100 waiters blocked 10 ms = 1 s).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct HolderCharge {
    pub pid: u32,
    /// The waker's program frame (absent: no stack, or no program frame found).
    pub waker_site: Option<String>,
    /// Waits ended, and their total and longest time, ns.
    pub waits: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Distinct threads that woke from here, and that were woken.
    pub wakers: u64,
    pub waiters: u64,
}

/// A paired wait, for timelines (flows from waker to waiter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairedWait {
    pub pid: u32,
    pub waiter: u32,
    pub start: u64,
    pub end: u64,
    pub waker: u32,
    /// When the waker woke it.
    pub woken_at: u64,
    /// The waiter's and the waker's stacks (indexes into the stacks given), if recorded.
    pub waiter_stack: Option<u32>,
    pub waker_stack: Option<u32>,
}

/// A named frame of a wait's stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitFrame {
    /// The function, or the address as `module+0x…` where it has no name.
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub module: Option<String>,
    pub address: u64,
}

/// A distinct user stack, unwound and named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitStack {
    pub kind: WaitKind,
    /// The program's frame that waited (`main::{{closure}} (m.rs:27)`), if one was found.
    pub site: Option<String>,
    /// The frames, innermost first (inlined frames expanded), for profiles and folded stacks.
    pub frames: Vec<WaitFrame>,
    /// It did not unwind past its first frame.
    pub unknown: bool,
}

/// A wait the lock probe recorded (CLOCK_MONOTONIC ns) on an object of `size` bytes at `obj`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeWait {
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub obj: u64,
    pub size: u64,
}

/// Slack allowed between the probe's clock and the tracepoints' when deciding that a probe wait
/// covers a futex wait: the TSC calibration's error over a run is well under this.
pub const COVER_SLACK_NS: u64 = 1_000;

/// Bytes of each pthread object, for "the futex word lies inside it" (x86-64 glibc).
pub fn pthread_object_size(kind: trace::ObjectKind) -> u64 {
    match kind {
        trace::ObjectKind::Mutex => 40,
        trace::ObjectKind::RwLock => 56,
        trace::ObjectKind::SpinLock => 4,
        trace::ObjectKind::Cond => 48,
        trace::ObjectKind::Barrier => 32,
    }
}

/// Waits on one futex word.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AddressWaits {
    pub pid: u32,
    /// The futex word's address.
    pub uaddr: u64,
    /// Futex commands seen (`op & 0x7f`: 0 WAIT, 9 WAIT_BITSET, 6 LOCK_PI, ...).
    pub ops: BTreeSet<u8>,
    /// Waits whose end was traced, their total and longest time off CPU, ns.
    pub waits: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Of `total_ns`, the time between the wake-up and the switch in (run queue), where the
    /// wake-up was traced.
    pub runqueue_ns: u64,
    /// Waits whose end was not traced (no length).
    pub unmeasured: u64,
    /// Threads that waited here, with their total, ns.
    pub threads: BTreeMap<u32, u64>,
    /// Waits inside a probe wait on a pthread object containing this word (not in the above).
    pub probe_counted: u64,
    pub probe_counted_ns: u64,
    /// The measured waits by kind and by the program's frame that waited, most time first.
    pub sites: Vec<SiteWaits>,
}

/// Measured futex waits of one kind at one program frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SiteWaits {
    /// `lock`, `condition`, `rwlock`, `barrier`, `once`, `park`, `join`, `semaphore`, or
    /// `unknown`; absent when the waits had no stack.
    pub kind: Option<WaitKind>,
    /// The program's frame that waited (the first outside std, core, alloc and the C
    /// library), as `function (file:line)`; absent when none was found or no stack was kept.
    pub site: Option<String>,
    pub waits: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// A (kind, program frame) pair of [`SiteWaits`].
type SiteKey = (Option<WaitKind>, Option<String>);

/// Measured futex waits of one kind, over the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct KindWaits {
    pub kind: WaitKind,
    pub waits: u64,
    pub total_ns: u64,
}

/// One thread's blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ThreadWaits {
    pub pid: u32,
    pub tid: u32,
    /// Futex waits not counted by the probe: count, total, longest, run-queue share, ns.
    pub futex_waits: u64,
    pub futex_ns: u64,
    pub futex_max_ns: u64,
    pub futex_runqueue_ns: u64,
    /// Futex waits the probe already counted.
    pub probe_counted: u64,
    pub probe_counted_ns: u64,
    /// Other blocks (sleep, I/O, poll, ...), count and time, ns.
    pub other_blocks: u64,
    pub other_ns: u64,
    /// Blocks whose end was not traced.
    pub unmeasured: u64,
}

/// Other blocks by reason (the kernel function that blocked, e.g. `do_nanosleep`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ReasonWaits {
    pub reason: String,
    pub blocks: u64,
    pub total_ns: u64,
}

/// The waits of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WaitReport {
    /// Futex waits not counted by the probe, and their time, ns.
    pub futex_waits: u64,
    pub futex_ns: u64,
    /// Of `futex_ns`, the time from the wake-up to the switch in (run queue), where traced.
    pub futex_runqueue_ns: u64,
    /// Futex waits the probe already counted as lock, condition or barrier waits.
    pub probe_counted: u64,
    pub probe_counted_ns: u64,
    /// Other blocks and their time, ns.
    pub other_blocks: u64,
    pub other_ns: u64,
    /// Of `other_ns`, the time from the wake-up to the switch in (run queue), where traced.
    pub other_runqueue_ns: u64,
    /// Blocks whose end (the thread's switch in) was not traced.
    pub unmeasured: u64,
    /// Of those, futex waits.
    pub futex_unmeasured: u64,
    /// Per futex word, most waited first (then by address).
    pub addresses: Vec<AddressWaits>,
    /// Per thread, by pid then tid.
    pub threads: Vec<ThreadWaits>,
    /// Other blocks per reason, longest first.
    pub reasons: Vec<ReasonWaits>,
    /// Measured futex waits per kind (those with a stack), most time first.
    pub kinds: Vec<KindWaits>,
    /// Futex waits (measured or not, probe-counted included) with a stack; without one
    /// although stacks were recorded (budget spent, copy empty or unreadable); of those with
    /// one, the stacks that did not unwind past their first frame.
    pub with_stack: u64,
    pub without_stack: u64,
    pub unknown_stacks: u64,
    /// Blocks that waited for a kernel lock (also in the other blocks), per lock, taker and
    /// program frame, most time first.
    pub kernel_locks: Vec<KernelLockWaits>,
    /// The measured futex waits per (process, futex word, stack), for profiles and folded
    /// stacks; empty without stacks.
    #[serde(skip)]
    pub stack_waits: Vec<StackWaits>,
    /// The same for the futex waits the probe counted (not in profiles: the probe's are).
    #[serde(skip)]
    pub probe_stack_waits: Vec<StackWaits>,
    /// The wakes were recorded (some waking was given): without them no wait is paired.
    pub wakes_recorded: bool,
    /// What ended the measured futex waits (probe-counted ones included).
    pub woken_by: WokenByCounts,
    /// Who made whom wait, most time first.
    pub blame: Vec<BlamePair>,
    /// Critical sections by the wait they caused, most first.
    pub holders: Vec<HolderCharge>,
    /// Each paired wait, in no particular order, for timelines.
    #[serde(skip)]
    pub paired: Vec<PairedWait>,
}

/// Measured futex waits on one word with one stack (an index into the stacks given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackWaits {
    pub pid: u32,
    pub uaddr: u64,
    pub stack: u32,
    pub waits: u64,
    pub total_ns: u64,
}

/// Where a block ended: the switch in, and the wake-up before it, when traced, with the
/// waker the sched tracepoints named (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct End {
    running: Option<u64>,
    woken: Option<u64>,
    waker: u32,
}

impl End {
    /// The block's length: to the switch in, else (switch in not traced) to the wake-up.
    fn at(&self) -> Option<u64> {
        self.running.or(self.woken)
    }
}

/// The end of a block at `t0` from the thread's state changes (sorted by time), before
/// `limit` (the thread's next block): the first switch in after the wake-up. Some kernels drop
/// the switch in (this project's Firecracker guest drops the tracepoints of an idle CPU's
/// exit): a second runnable state (a preemption) or a block before any switch in says it was
/// missed, and the wait then ends at its wake-up, its run-queue time unknown. The first
/// runnable state after a block is its wake-up: a blocked task becomes runnable only so.
fn end_of(states: &[StateChange], t0: u64, limit: Option<u64>) -> Option<End> {
    let from = states.partition_point(|c| c.ts <= t0);
    let mut woken = None;
    let mut waker = 0;
    for c in &states[from..] {
        if limit.is_some_and(|l| c.ts > l) {
            break;
        }
        match c.state {
            State::Runnable if woken.is_some() => break,
            State::Runnable => {
                woken = Some(c.ts);
                waker = c.waker;
            }
            State::Running => {
                return Some(End {
                    running: Some(c.ts),
                    woken,
                    waker,
                })
            }
            _ if woken.is_some() => break,
            _ => {}
        }
    }
    woken.map(|w| End {
        running: None,
        woken: Some(w),
        waker,
    })
}

/// The waits of `threads`, ended by `states` (per tid, any order), with the probe's `probe`
/// waits (any order) taking the futex waits they cover.
pub fn waits(
    threads: &[ThreadBlocks],
    states: &[(u32, Vec<StateChange>)],
    probe: &[ProbeWait],
) -> WaitReport {
    waits_with_stacks(threads, states, probe, &[])
}

/// [`waits`], with the blocks' stacks: a block's [`StackIn::At`] indexes `stacks`.
pub fn waits_with_stacks(
    threads: &[ThreadBlocks],
    states: &[(u32, Vec<StateChange>)],
    probe: &[ProbeWait],
    stacks: &[WaitStack],
) -> WaitReport {
    waits_and_blame(threads, &[], states, probe, stacks)
}

/// [`waits_with_stacks`], each measured futex wait paired with what ended it among the
/// program's `wakings` (any order; their [`StackIn::At`] index `stacks` too).
pub fn waits_and_blame(
    threads: &[ThreadBlocks],
    wakings: &[WakingIn],
    states: &[(u32, Vec<StateChange>)],
    probe: &[ProbeWait],
    stacks: &[WaitStack],
) -> WaitReport {
    let index = WakingIndex::new(wakings);
    let mut blame = Blame::default();
    let program_tids: BTreeSet<u32> = threads
        .iter()
        .map(|t| t.tid)
        .chain(wakings.iter().map(|w| w.tid))
        .collect();
    let mut by_tid: BTreeMap<u32, Vec<StateChange>> = BTreeMap::new();
    for (tid, changes) in states {
        by_tid.entry(*tid).or_default().extend_from_slice(changes);
    }
    for v in by_tid.values_mut() {
        v.sort_by_key(|c| c.ts);
    }
    let mut probe_by_tid: BTreeMap<u32, Vec<ProbeWait>> = BTreeMap::new();
    for p in probe {
        probe_by_tid.entry(p.tid).or_default().push(*p);
    }
    let mut report = WaitReport::default();
    let mut addresses: BTreeMap<(u32, u64), AddressWaits> = BTreeMap::new();
    let mut reasons: BTreeMap<String, ReasonWaits> = BTreeMap::new();
    let mut per_thread: BTreeMap<(u32, u32), ThreadWaits> = BTreeMap::new();
    let mut sites: BTreeMap<(u32, u64), BTreeMap<SiteKey, SiteWaits>> = BTreeMap::new();
    let mut kinds: BTreeMap<WaitKind, KindWaits> = BTreeMap::new();
    let mut stack_waits: BTreeMap<(u32, u64, u32), StackWaits> = BTreeMap::new();
    let (no_states, no_probes) = (Vec::new(), Vec::new());
    for t in threads {
        let states = by_tid.get(&t.tid).unwrap_or(&no_states);
        let probes = probe_by_tid.get(&t.tid).unwrap_or(&no_probes);
        let tw = per_thread
            .entry((t.pid, t.tid))
            .or_insert_with(|| ThreadWaits {
                pid: t.pid,
                tid: t.tid,
                ..ThreadWaits::default()
            });
        let mut blocks: Vec<&BlockIn> = t.blocks.iter().collect();
        blocks.sort_by_key(|b| b.ts);
        for (i, b) in blocks.iter().enumerate() {
            let limit = blocks.get(i + 1).map(|n| n.ts);
            let end = end_of(states, b.ts, limit);
            let sched_waker = end_waker(end);
            let len = end.and_then(|e| e.at()).map(|at| at.saturating_sub(b.ts));
            let runq = end.and_then(|e| Some(e.running?.saturating_sub(e.woken?)));
            match b.futex {
                Some(f) => {
                    let a = addresses
                        .entry((t.pid, f.uaddr))
                        .or_insert_with(|| AddressWaits {
                            pid: t.pid,
                            uaddr: f.uaddr,
                            ..AddressWaits::default()
                        });
                    a.ops.insert(f.cmd());
                    let stack = match b.stack {
                        StackIn::At(i) => stacks.get(i as usize),
                        _ => None,
                    };
                    match (b.stack, stack) {
                        (_, Some(st)) => {
                            report.with_stack += 1;
                            report.unknown_stacks += u64::from(st.unknown);
                        }
                        (StackIn::NotRecorded, None) => {}
                        (_, None) => report.without_stack += 1,
                    }
                    let Some(len) = len else {
                        a.unmeasured += 1;
                        tw.unmeasured += 1;
                        report.unmeasured += 1;
                        report.futex_unmeasured += 1;
                        continue;
                    };
                    let end = b.ts + len;
                    let covered = probes.iter().any(|p| {
                        p.start.saturating_sub(COVER_SLACK_NS) <= b.ts
                            && end <= p.end.saturating_add(COVER_SLACK_NS)
                            && (p.obj..p.obj.saturating_add(p.size)).contains(&f.uaddr)
                    });
                    let to_pair = WaitToPair {
                        pid: t.pid,
                        tid: t.tid,
                        uaddr: f.uaddr,
                        start: b.ts,
                        end,
                        sched_waker,
                        stack: match b.stack {
                            StackIn::At(i) if stack.is_some() => Some(i),
                            _ => None,
                        },
                    };
                    let by = match pair(&to_pair, &index) {
                        WokenBy::OtherTask(k) if program_tids.contains(&k) => {
                            WokenBy::ProgramUntraced(k)
                        }
                        by => by,
                    };
                    blame.add(&to_pair, by, stack, covered, &index, stacks);
                    if covered {
                        a.probe_counted += 1;
                        a.probe_counted_ns += len;
                        tw.probe_counted += 1;
                        tw.probe_counted_ns += len;
                        report.probe_counted += 1;
                        report.probe_counted_ns += len;
                        if let (StackIn::At(i), Some(_)) = (b.stack, stack) {
                            report.probe_stack_waits.push(StackWaits {
                                pid: t.pid,
                                uaddr: f.uaddr,
                                stack: i,
                                waits: 1,
                                total_ns: len,
                            });
                        }
                        continue;
                    }
                    a.waits += 1;
                    a.total_ns += len;
                    a.max_ns = a.max_ns.max(len);
                    let key = (stack.map(|s| s.kind), stack.and_then(|s| s.site.clone()));
                    let site = sites
                        .entry((t.pid, f.uaddr))
                        .or_default()
                        .entry(key.clone())
                        .or_insert_with(|| SiteWaits {
                            kind: key.0,
                            site: key.1,
                            ..SiteWaits::default()
                        });
                    site.waits += 1;
                    site.total_ns += len;
                    site.max_ns = site.max_ns.max(len);
                    if let Some(st) = stack {
                        let k = kinds.entry(st.kind).or_insert_with(|| KindWaits {
                            kind: st.kind,
                            ..KindWaits::default()
                        });
                        k.waits += 1;
                        k.total_ns += len;
                    }
                    if let StackIn::At(i) = b.stack {
                        if stack.is_some() {
                            let sw = stack_waits.entry((t.pid, f.uaddr, i)).or_insert_with(|| {
                                StackWaits {
                                    pid: t.pid,
                                    uaddr: f.uaddr,
                                    stack: i,
                                    ..StackWaits::default()
                                }
                            });
                            sw.waits += 1;
                            sw.total_ns += len;
                        }
                    }
                    a.runqueue_ns += runq.unwrap_or(0);
                    *a.threads.entry(t.tid).or_default() += len;
                    tw.futex_waits += 1;
                    tw.futex_ns += len;
                    tw.futex_max_ns = tw.futex_max_ns.max(len);
                    tw.futex_runqueue_ns += runq.unwrap_or(0);
                    report.futex_waits += 1;
                    report.futex_ns += len;
                    report.futex_runqueue_ns += runq.unwrap_or(0);
                }
                None => {
                    let Some(len) = len else {
                        tw.unmeasured += 1;
                        report.unmeasured += 1;
                        continue;
                    };
                    let why = b.reason.clone().unwrap_or_else(|| "unknown".into());
                    let r = reasons.entry(why.clone()).or_insert_with(|| ReasonWaits {
                        reason: why,
                        ..ReasonWaits::default()
                    });
                    r.blocks += 1;
                    r.total_ns += len;
                    tw.other_blocks += 1;
                    tw.other_ns += len;
                    report.other_blocks += 1;
                    report.other_ns += len;
                    report.other_runqueue_ns += runq.unwrap_or(0);
                }
            }
        }
    }
    for (key, a) in addresses.iter_mut() {
        if let Some(s) = sites.remove(key) {
            a.sites = s.into_values().collect();
            a.sites.sort_by(|x, y| {
                y.total_ns
                    .cmp(&x.total_ns)
                    .then_with(|| x.kind.cmp(&y.kind))
                    .then_with(|| x.site.cmp(&y.site))
            });
        }
    }
    report.kernel_locks = kernel::kernel_locks(threads, &by_tid, stacks);
    report.stack_waits = stack_waits.into_values().collect();
    report.wakes_recorded = !wakings.is_empty();
    blame.finish(&mut report);
    report.kinds = kinds.into_values().collect();
    report
        .kinds
        .sort_by(|x, y| y.total_ns.cmp(&x.total_ns).then(x.kind.cmp(&y.kind)));
    report.addresses = addresses.into_values().collect();
    report.addresses.sort_by(|a, b| {
        (b.total_ns + b.probe_counted_ns)
            .cmp(&(a.total_ns + a.probe_counted_ns))
            .then(a.uaddr.cmp(&b.uaddr))
    });
    report.threads = per_thread.into_values().collect();
    report.reasons = reasons.into_values().collect();
    report
        .reasons
        .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.reason.cmp(&b.reason)));
    report
}

fn end_waker(e: Option<End>) -> u32 {
    e.map_or(0, |e| e.waker)
}

/// A blame pair's key: process, the waiter's kind and site, the waker's site.
type PairKey = (u32, Option<WaitKind>, Option<String>, Option<String>);

/// A holder's charge being built, with its distinct waker and waiter threads.
type Charging = (HolderCharge, BTreeSet<u32>, BTreeSet<u32>);

/// The blame tables being built.
#[derive(Default)]
struct Blame {
    woken_by: WokenByCounts,
    pairs: BTreeMap<PairKey, BlamePair>,
    holders: BTreeMap<(u32, Option<String>), Charging>,
    paired: Vec<PairedWait>,
}

impl Blame {
    fn add(
        &mut self,
        w: &WaitToPair,
        by: WokenBy,
        stack: Option<&WaitStack>,
        probe_counted: bool,
        index: &WakingIndex<'_>,
        stacks: &[WaitStack],
    ) {
        let len = w.end.saturating_sub(w.start);
        let c = &mut self.woken_by;
        let k = match by {
            WokenBy::FutexWake(k) => k,
            WokenBy::Timer => return c.timer.add(len),
            WokenBy::Interrupt => return c.interrupt.add(len),
            WokenBy::OtherPath(_) | WokenBy::ProgramUntraced(_) => return c.other_path.add(len),
            WokenBy::OtherTask(_) => return c.other_task.add(len),
            WokenBy::Unknown => return c.unknown.add(len),
        };
        c.futex_wake.add(len);
        let Some(waking) = index.get(k) else {
            return;
        };
        let waker_site = match waking.stack {
            StackIn::At(i) => stacks.get(i as usize).and_then(|s| s.site.clone()),
            _ => None,
        };
        let (kind, site) = (stack.map(|s| s.kind), stack.and_then(|s| s.site.clone()));
        let p = self
            .pairs
            .entry((w.pid, kind, site.clone(), waker_site.clone()))
            .or_insert_with(|| BlamePair {
                pid: w.pid,
                waiter_kind: kind,
                waiter_site: site,
                waker_site: waker_site.clone(),
                ..BlamePair::default()
            });
        p.waits += 1;
        p.total_ns += len;
        p.max_ns = p.max_ns.max(len);
        p.probe_counted += u64::from(probe_counted);
        let (h, wakers, waiters) = self
            .holders
            .entry((w.pid, waker_site.clone()))
            .or_insert_with(|| {
                (
                    HolderCharge {
                        pid: w.pid,
                        waker_site,
                        ..HolderCharge::default()
                    },
                    BTreeSet::new(),
                    BTreeSet::new(),
                )
            });
        h.waits += 1;
        h.total_ns += len;
        h.max_ns = h.max_ns.max(len);
        wakers.insert(waking.tid);
        waiters.insert(w.tid);
        self.paired.push(PairedWait {
            pid: w.pid,
            waiter: w.tid,
            start: w.start,
            end: w.end,
            waker: waking.tid,
            woken_at: waking.ts,
            waiter_stack: w.stack,
            waker_stack: match waking.stack {
                StackIn::At(i) => Some(i),
                _ => None,
            },
        });
    }

    fn finish(self, report: &mut WaitReport) {
        report.woken_by = self.woken_by;
        report.blame = self.pairs.into_values().collect();
        report.blame.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.waiter_site.cmp(&b.waiter_site))
                .then_with(|| a.waker_site.cmp(&b.waker_site))
        });
        report.holders = self
            .holders
            .into_values()
            .map(|(mut h, wakers, waiters)| {
                h.wakers = wakers.len() as u64;
                h.waiters = waiters.len() as u64;
                h
            })
            .collect();
        report.holders.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.waker_site.cmp(&b.waker_site))
        });
        report.paired = self.paired;
    }
}

#[cfg(test)]
mod tests;
