//! "How long would the run take if this lock never made anyone wait?" by replaying the
//! recorded schedule with the lock's waits removed, keeping the work the program did, the
//! CPUs it had and the other locks' exclusion. docs/methodology.md §4 ("Lock what-if")
//! gives the model, its assumptions and its sources.
//!
//! # The model
//!
//! Each thread is its recorded sequence of [`Step`]s: its own time between lock calls
//! ([`Step::Run`]: work, holds, sleeps, I/O, as recorded on the wall clock), lock calls
//! ([`Step::Acquire`], the recorded wait dropped) and releases. A thread's measured CPU time
//! is spread over its `Run` time in proportion to wall length (rate `cpu / own`, `own` = its
//! lifetime less its lock waits); of each `Run`, the share that was neither on a CPU nor on
//! the run queue (`1 − (cpu + runq) / own`) is a fixed delay (sleeps and I/O kept as they
//! were). The run-queue wait is not replayed: the CPUs re-create it.
//!
//! The replay is an event-driven simulation. `cpus` CPUs are shared by processor sharing
//! (Kleinrock 1967): with `n` threads runnable each progresses at `min(1, cpus / n)` of a CPU,
//! what CFS's fairness approximates; a virtual-time clock makes each event O(log threads).
//! The chosen lock never excludes. Every other lock keeps mutual exclusion, handed over in
//! FIFO order of arrival in the replay (not the recorded order: a recorded successor that has
//! not yet arrived would leave the lock idle). Shared (read) holds of an rwlock share it.
//! A replay that can go no further (a try-lock that avoided a deadlock now blocks on it) is
//! reported as stalled and only the bound stands.
//!
//! The bound beside it is what no schedule can beat with the same demand: the longest thread
//! alone (its start, CPU time and delays), or all CPU time spread over the CPUs.

use super::LockKey;
use serde::Serialize;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// One step of a thread's recorded schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The thread's own time between lock calls, as recorded (wall ns).
    Run {
        wall_ns: u64,
    },
    /// A lock call; its recorded wait is not replayed.
    Acquire {
        lock: LockKey,
        shared: bool,
    },
    Release {
        lock: LockKey,
    },
}

/// One thread to replay.
#[derive(Debug, Clone)]
pub struct ThreadSchedule<I> {
    /// When the thread started, ns after the run's start.
    pub start_ns: u64,
    /// Its recorded lifetime less its lock waits: the `Run` steps' total.
    pub own_ns: u64,
    /// On-CPU time (schedstat), `None` when unknown.
    pub cpu_ns: Option<u64>,
    /// Time runnable but waiting for a CPU.
    pub runq_ns: u64,
    pub steps: I,
}

/// How a prediction was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The replay on the CPUs (processor sharing).
    Replay,
    /// The bound only: a thread's CPU time is unknown, or the replay stalled.
    Bound,
}

/// The replay of one run with one lock (or none) removed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Replayed {
    /// When the last thread ends, ns after the run's start (`None`: stalled).
    pub end_ns: Option<u64>,
    /// max(longest thread's own demand, all CPU demand / CPUs), ns after the run's start.
    pub bound_ns: u64,
    /// Threads whose CPU time is unknown (their whole own time taken as CPU demand).
    pub unknown_cpu: usize,
}

const EPS: f64 = 1e-3;

/// A thread's rates: CPU ns and fixed-delay ns per ns of recorded own time.
fn rates<I>(t: &ThreadSchedule<I>) -> (f64, f64) {
    let own = t.own_ns as f64;
    match t.cpu_ns {
        Some(_) | None if own <= 0.0 => (0.0, 0.0),
        Some(cpu) => {
            let c = (cpu as f64 / own).min(1.0);
            let q = t.runq_ns as f64 / own;
            (c, (1.0 - c - q).max(0.0))
        }
        None => (1.0, 0.0),
    }
}

/// The bound for `threads` on `cpus` CPUs (ns after the run's start).
pub fn bound<I>(threads: &[ThreadSchedule<I>], cpus: u32) -> u64 {
    let mut longest = 0.0f64;
    let mut total = 0.0f64;
    let mut first = f64::MAX;
    for t in threads {
        let (c, d) = rates(t);
        let own = t.own_ns as f64;
        longest = longest.max(t.start_ns as f64 + own * (c + d));
        total += own * c;
        first = first.min(t.start_ns as f64);
    }
    if threads.is_empty() {
        return 0;
    }
    longest.max(first + total / f64::from(cpus.max(1))).round() as u64
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    /// On the CPUs, finishing at this virtual time; then a delay.
    Runnable,
    Delayed,
    Blocked,
    Done,
}

struct Sim<I> {
    steps: I,
    cpu_rate: f64,
    delay_rate: f64,
    state: State,
    /// Delay to serve after the current CPU part.
    delay: f64,
}

#[derive(Default)]
struct LockState {
    holder: Option<usize>,
    depth: u32,
    readers: u32,
    queue: VecDeque<(usize, bool)>,
}

/// Heap entry ordered by time, then thread (deterministic ties).
#[derive(Clone, Copy, PartialEq)]
struct At(f64, usize);

impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for At {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

/// Replays `threads` on `cpus` CPUs with `removed`'s waits gone (`None`: every lock kept,
/// the recorded run as the model sees it).
pub fn replay<I: Iterator<Item = Step>>(
    threads: Vec<ThreadSchedule<I>>,
    cpus: u32,
    removed: Option<LockKey>,
) -> Replayed {
    let bound_ns = bound(&threads, cpus);
    let unknown_cpu = threads.iter().filter(|t| t.cpu_ns.is_none()).count();
    let mut timers: BinaryHeap<Reverse<At>> = BinaryHeap::new();
    let mut sims: Vec<Sim<I>> = Vec::with_capacity(threads.len());
    for (i, t) in threads.into_iter().enumerate() {
        let (cpu_rate, delay_rate) = rates(&t);
        timers.push(Reverse(At(t.start_ns as f64, i)));
        sims.push(Sim {
            steps: t.steps,
            cpu_rate,
            delay_rate,
            state: State::NotStarted,
            delay: 0.0,
        });
    }
    let cpus = f64::from(cpus.max(1));
    let mut locks: HashMap<LockKey, LockState> = HashMap::new();
    let mut running: BinaryHeap<Reverse<At>> = BinaryHeap::new();
    let mut ready: Vec<usize> = Vec::new();
    let (mut now, mut virt, mut end) = (0.0f64, 0.0f64, 0.0f64);
    let mut done = 0;
    loop {
        // Threads free to take their next step now (started, delay over, lock handed over).
        while let Some(i) = ready.pop() {
            advance(
                i,
                now,
                virt,
                &mut sims,
                &mut locks,
                removed,
                &mut running,
                &mut timers,
                &mut ready,
            );
            if sims[i].state == State::Done {
                done += 1;
                end = end.max(now);
            }
        }
        let rate = if running.is_empty() {
            0.0
        } else {
            (cpus / running.len() as f64).min(1.0)
        };
        let next_finish = running
            .peek()
            .map(|Reverse(At(tag, _))| now + (tag - virt).max(0.0) / rate);
        let next_timer = timers.peek().map(|Reverse(At(t, _))| *t);
        let t = match (next_finish, next_timer) {
            (None, None) => break,
            (Some(f), Some(t)) => f.min(t),
            (Some(f), None) => f,
            (None, Some(t)) => t,
        };
        virt += (t - now).max(0.0) * rate;
        now = now.max(t);
        while let Some(&Reverse(At(tag, i))) = running.peek() {
            if tag > virt + EPS {
                break;
            }
            running.pop();
            let delay = std::mem::take(&mut sims[i].delay);
            if delay > EPS {
                sims[i].state = State::Delayed;
                timers.push(Reverse(At(now + delay, i)));
            } else {
                ready.push(i);
            }
        }
        while let Some(&Reverse(At(at, i))) = timers.peek() {
            if at > now + EPS {
                break;
            }
            timers.pop();
            ready.push(i);
        }
        // Deterministic order among threads freed at the same time: lowest index first.
        ready.sort_unstable_by(|a, b| b.cmp(a));
    }
    Replayed {
        end_ns: (done == sims.len()).then(|| end.round() as u64),
        bound_ns,
        unknown_cpu,
    }
}

/// Takes thread `i`'s steps from time `now` until it needs a CPU, a delay or a lock.
#[allow(clippy::too_many_arguments)]
fn advance<I: Iterator<Item = Step>>(
    i: usize,
    now: f64,
    virt: f64,
    sims: &mut [Sim<I>],
    locks: &mut HashMap<LockKey, LockState>,
    removed: Option<LockKey>,
    running: &mut BinaryHeap<Reverse<At>>,
    timers: &mut BinaryHeap<Reverse<At>>,
    ready: &mut Vec<usize>,
) {
    loop {
        let Some(step) = sims[i].steps.next() else {
            sims[i].state = State::Done;
            return;
        };
        match step {
            Step::Run { wall_ns } => {
                let s = &mut sims[i];
                let cpu = wall_ns as f64 * s.cpu_rate;
                let delay = wall_ns as f64 * s.delay_rate;
                if cpu > EPS {
                    s.state = State::Runnable;
                    s.delay = delay;
                    running.push(Reverse(At(virt + cpu, i)));
                    return;
                }
                if delay > EPS {
                    s.state = State::Delayed;
                    timers.push(Reverse(At(now + delay, i)));
                    return;
                }
            }
            Step::Acquire { lock, .. } if Some(lock) == removed => {}
            Step::Acquire { lock, shared } => {
                let l = locks.entry(lock).or_default();
                let free = l.holder.is_none() && l.queue.is_empty();
                if l.holder == Some(i) {
                    l.depth += 1; // recursive
                } else if free && shared {
                    l.readers += 1;
                } else if free && l.readers == 0 {
                    l.holder = Some(i);
                    l.depth = 1;
                } else {
                    l.queue.push_back((i, shared));
                    sims[i].state = State::Blocked;
                    return;
                }
            }
            Step::Release { lock } if Some(lock) == removed => {}
            Step::Release { lock } => {
                let Some(l) = locks.get_mut(&lock) else {
                    continue;
                };
                if l.holder == Some(i) {
                    l.depth -= 1;
                    if l.depth == 0 {
                        l.holder = None;
                    }
                } else if l.readers > 0 {
                    l.readers -= 1;
                }
                // Hand over, first come first served: one writer, or every reader in a row.
                while l.holder.is_none() {
                    match l.queue.front() {
                        Some(&(w, true)) => {
                            l.readers += 1;
                            l.queue.pop_front();
                            ready.push(w);
                        }
                        Some(&(w, false)) if l.readers == 0 => {
                            l.holder = Some(w);
                            l.depth = 1;
                            l.queue.pop_front();
                            ready.push(w);
                        }
                        _ => break,
                    }
                }
            }
        }
    }
}

/// The predicted run time for one lock, and what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct WhatIf {
    pub lock: LockKey,
    /// The predicted run time without this lock's waits: the replay's, or the bound when
    /// `method` is `bound`.
    pub predicted_ns: u64,
    /// max(longest thread's own demand, all CPU demand / CPUs), as a run time.
    pub bound_ns: u64,
    pub method: Method,
    /// Why only the bound stands (`method` = `bound`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_bound: Option<String>,
}

/// The what-if of a run: the CPUs, the model's own replay of the run as recorded (its error
/// against the measured run time says how far to trust it), and each replayed lock.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct WhatIfs {
    pub method: &'static str,
    pub cpus: u32,
    /// Where `cpus` comes from: "placement" (the CPUs the run was confined to) or "online".
    pub cpus_from: &'static str,
    pub assumptions: Vec<&'static str>,
    /// The run as recorded, replayed with every lock kept (None: stalled or bound only).
    pub replayed_as_recorded_ns: Option<u64>,
    pub measured_ns: u64,
    pub locks: Vec<WhatIf>,
}

/// What the report states beside the predictions.
pub const ASSUMPTIONS: [&str; 4] = [
    "each thread needs the CPU time it used (schedstat), spread over its own time",
    "the CPUs the run had, shared fairly (processor sharing)",
    "the other locks unchanged, handed over first come first served",
    "sleeps and I/O kept as recorded",
];

pub const METHOD: &str = "replay of the recorded schedule on processor-shared CPUs";

/// The prediction a replay supports: its end, or the bound (and why) when a thread's CPU time
/// was unknown or the replay stalled.
pub fn predict(r: &Replayed) -> (u64, Method, Option<String>) {
    match r.end_ns {
        _ if r.unknown_cpu > 0 => (
            r.bound_ns,
            Method::Bound,
            Some(format!(
                "the CPU time of {} thread(s) is unknown (no schedstat samples)",
                r.unknown_cpu
            )),
        ),
        None => (
            r.bound_ns,
            Method::Bound,
            Some("the replay stalled: its first-come-first-served hand-over blocks where the recorded run did not".into()),
        ),
        Some(end) => (end.max(r.bound_ns), Method::Replay, None),
    }
}

/// A run time from a replay's end: `tail_ns` is what the run did after its last replayed
/// thread ended (the main thread's exit), kept as recorded.
pub fn run_time(end_ns: u64, tail_ns: u64) -> u64 {
    end_ns.saturating_add(tail_ns)
}

#[cfg(test)]
mod tests;
