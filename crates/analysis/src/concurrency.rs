//! Concurrent on-CPU time: how long at least two threads of a process were on a CPU at the
//! same moment (docs/methodology.md §7.6). Sharing between threads only shows when they run
//! together; a run in which they took turns on a busy machine can show no shared line for a
//! program that has one, so the sharing report needs this figure before it can say "none".
//!
//! Two sources, as the sampler recorded them:
//!
//! - **sched tracepoints** (exact): each thread's Running intervals from its state changes,
//!   swept together; time with two or more intervals open is counted. A thread's time before
//!   its first recorded change is not counted (its state is unknown there), so the figure can
//!   only be short, never long, by that.
//! - **schedstat samples** (a lower bound): over a span of length L in which threads got
//!   service s_i and at most p of them could run at once (p = min(CPUs, threads with
//!   service)), let t_k be the time with exactly k running; Σ s_i = Σ k t_k ≤ (L − T₂) + p T₂
//!   where T₂ is the time with two or more, so T₂ ≥ (Σ s_i − L)/(p − 1) (0 when negative).
//!   The span is the whole recording, not each sampling interval: the sampler reads the
//!   threads one after another and stamps them with the round's time, and a sampler delayed
//!   on a busy machine puts one thread's service of a later moment into an interval, which
//!   per interval made threads that took turns on one CPU look concurrent (seen: 1.3 ms
//!   "together" in a run whose line had no transfer once hot). Over the whole run each
//!   thread's total is exact but for the CPU time after its last read, which is missed and
//!   only lowers the bound.
//!
//! Pure: the caller decodes the streams (`service::thread_samples`, `trace::sched`).

use crate::service::ThreadSamples;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use trace::sched::{State, StateChange};

/// Where a concurrency figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Running intervals from the sched tracepoints: exact.
    SchedTracepoints,
    /// Per-interval service from `schedstat` samples: a lower bound.
    SchedstatBound,
}

/// One process's concurrent on-CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Concurrency {
    /// Time during which at least two of its threads were on a CPU at once, ns.
    pub on_cpu_together_ns: u64,
    /// Exact (from the sched tracepoints), or else a lower bound (from schedstat samples).
    pub exact: bool,
    pub method: Method,
}

impl Concurrency {
    /// The figure of several processes together, for a verdict that needs each of them to have
    /// run together long enough: the least time, exact only when both are.
    pub fn least(self, other: Concurrency) -> Concurrency {
        let exact = self.exact && other.exact;
        Concurrency {
            on_cpu_together_ns: self.on_cpu_together_ns.min(other.on_cpu_together_ns),
            exact,
            method: if exact {
                Method::SchedTracepoints
            } else {
                Method::SchedstatBound
            },
        }
    }
}

/// A thread's Running intervals `[start, end)` from its state changes (in time order); a
/// thread still Running at its last change runs until `end`.
pub fn running_intervals(changes: &[StateChange], end: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut since: Option<u64> = None;
    for c in changes {
        match (c.state == State::Running, since) {
            (true, None) => since = Some(c.ts),
            (false, Some(s)) => {
                if c.ts > s {
                    out.push((s, c.ts));
                }
                since = None;
            }
            // Running again while running (a migration), or not running again: no change.
            _ => {}
        }
    }
    if let Some(s) = since {
        if end > s {
            out.push((s, end));
        }
    }
    out
}

/// Exact concurrent on-CPU time of threads given by their Running intervals: a sweep over
/// the interval ends, counting the time with two or more open.
pub fn together_from_intervals(threads: &[Vec<(u64, u64)>]) -> u64 {
    // (time, +1 opens / −1 closes); at one instant closes come first, so intervals that
    // only touch do not count as overlapping.
    let mut edges: Vec<(u64, i32)> = threads
        .iter()
        .flatten()
        .flat_map(|&(a, b)| [(a, 1), (b, -1)])
        .collect();
    edges.sort_unstable();
    let mut open = 0i32;
    let mut last = 0u64;
    let mut together = 0u64;
    for (ts, d) in edges {
        if open >= 2 {
            together = together.saturating_add(ts - last);
        }
        open += d;
        last = ts;
    }
    together
}

/// Lower bound on concurrent on-CPU time from one process's schedstat samples over the
/// recording `[start, end]` (see the module documentation). `cpus` is how many CPUs the
/// process could use (`None`: unknown, then the number of threads with service bounds it,
/// which keeps the bound valid).
pub fn together_lower_bound<'a>(
    threads: impl IntoIterator<Item = &'a ThreadSamples>,
    start: u64,
    end: u64,
    cpus: Option<u32>,
) -> u64 {
    let span = end.saturating_sub(start);
    // No thread can have run longer than the span (an attached thread's first figure may hold
    // CPU time from before it: not beyond the span either).
    let service: Vec<u64> = threads
        .into_iter()
        .map(|t| t.samples.iter().map(|s| s.on_cpu_ns).sum::<u64>().min(span))
        .filter(|&s| s > 0)
        .collect();
    let running = service.len() as u32;
    let p = u64::from(cpus.map_or(running, |c| c.min(running)));
    if p < 2 {
        return 0;
    }
    service.iter().sum::<u64>().saturating_sub(span) / (p - 1)
}

/// What the sampler recorded of a run, for [`per_process`].
pub struct Recorded<'a> {
    /// Every sampled thread (all processes).
    pub samples: &'a [ThreadSamples],
    /// State changes by tid, from the sched tracepoints.
    pub states: &'a [(u32, Vec<StateChange>)],
    /// The tracepoint reader lost nothing (no lost records, no gaps in the switch chains):
    /// without that, the states are not exact and the bound is used.
    pub states_complete: bool,
    /// When the recording started and ended (CLOCK_MONOTONIC ns).
    pub start: u64,
    pub end: u64,
    /// CPUs the program could use, when known.
    pub cpus: Option<u32>,
}

/// Each process's concurrent on-CPU time: exact where every thread of it that got service
/// has recorded state changes and the tracepoints lost nothing, else the schedstat bound.
pub fn per_process(r: &Recorded<'_>) -> BTreeMap<u32, Concurrency> {
    let states: BTreeMap<u32, &Vec<StateChange>> = r.states.iter().map(|(t, c)| (*t, c)).collect();
    let pids: BTreeSet<u32> = r.samples.iter().map(|t| t.pid).collect();
    let mut out = BTreeMap::new();
    for pid in pids {
        let threads: Vec<&ThreadSamples> = r.samples.iter().filter(|t| t.pid == pid).collect();
        let traced = r.states_complete
            && threads
                .iter()
                .all(|t| states.contains_key(&t.tid) || t.samples.iter().all(|s| s.on_cpu_ns == 0));
        let c = if traced {
            let intervals: Vec<Vec<(u64, u64)>> = threads
                .iter()
                .filter_map(|t| {
                    let end = t.last_seen.unwrap_or(r.end).max(r.start);
                    states.get(&t.tid).map(|c| running_intervals(c, end))
                })
                .collect();
            Concurrency {
                on_cpu_together_ns: together_from_intervals(&intervals),
                exact: true,
                method: Method::SchedTracepoints,
            }
        } else {
            Concurrency {
                on_cpu_together_ns: together_lower_bound(
                    threads.iter().copied(),
                    r.start,
                    r.end,
                    r.cpus,
                ),
                exact: false,
                method: Method::SchedstatBound,
            }
        };
        out.insert(pid, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::sched::ThreadSample;

    fn change(ts: u64, state: State) -> StateChange {
        StateChange {
            ts,
            state,
            cpu: (state == State::Running).then_some(0),
            waker: 0,
        }
    }

    #[test]
    fn running_intervals_follow_the_state_changes() {
        let c = [
            change(10, State::Runnable),
            change(12, State::Running),
            change(20, State::Runnable),
            change(25, State::Running),
            // A migration: still running.
            change(27, State::Running),
            change(30, State::Sleeping),
            change(40, State::Running),
        ];
        assert_eq!(
            running_intervals(&c, 50),
            vec![(12, 20), (25, 30), (40, 50)]
        );
        // Ended before the last Running began: nothing after it.
        assert_eq!(running_intervals(&c[..6], 35), vec![(12, 20), (25, 30)]);
    }

    #[test]
    fn the_sweep_counts_time_with_two_or_more_running() {
        // A: 0..100; B: 50..150; C: 90..95 and 200..300 (alone).
        let a = vec![(0, 100)];
        let b = vec![(50, 150)];
        let c = vec![(90, 95), (200, 300)];
        // Two or more: 50..100 from A and B (C inside adds nothing) = 50.
        assert_eq!(together_from_intervals(&[a.clone(), b.clone(), c]), 50);
        // Touching intervals do not overlap.
        assert_eq!(together_from_intervals(&[vec![(0, 10)], vec![(10, 20)]]), 0);
        // Taking turns on one CPU: never together.
        let turns_a: Vec<(u64, u64)> = (0..10).map(|i| (i * 20, i * 20 + 10)).collect();
        let turns_b: Vec<(u64, u64)> = (0..10).map(|i| (i * 20 + 10, i * 20 + 20)).collect();
        assert_eq!(together_from_intervals(&[turns_a, turns_b]), 0);
        assert_eq!(together_from_intervals(&[a]), 0);
        assert_eq!(together_from_intervals(&[]), 0);
    }

    fn samples(pid: u32, tid: u32, per_round: &[u64]) -> ThreadSamples {
        ThreadSamples {
            pid,
            tid,
            samples: per_round
                .iter()
                .enumerate()
                .map(|(k, &on)| ThreadSample {
                    ts: 10 * (k as u64 + 1),
                    on_cpu_ns: on,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn several_processes_are_judged_by_the_least_and_exact_only_when_all_are() {
        let exact = |ns| Concurrency {
            on_cpu_together_ns: ns,
            exact: true,
            method: Method::SchedTracepoints,
        };
        let bound = Concurrency {
            on_cpu_together_ns: 7,
            exact: false,
            method: Method::SchedstatBound,
        };
        assert_eq!(exact(5).least(exact(9)), exact(5));
        let mixed = exact(3).least(bound);
        assert_eq!(mixed.on_cpu_together_ns, 3);
        assert!(!mixed.exact);
        assert_eq!(mixed.method, Method::SchedstatBound);
    }

    #[test]
    fn the_schedstat_bound_is_what_service_beyond_the_span_forces() {
        // 30 ns recorded on 2 CPUs; each thread ran 10 + 6 + 5 = 21: Σ 42 > 30, so at least
        // 12 of it together.
        let t = [samples(1, 1, &[10, 6, 5]), samples(1, 2, &[10, 6, 5])];
        assert_eq!(together_lower_bound(&t, 0, 30, Some(2)), 12);
        // CPUs unknown: the two threads bound it the same way.
        assert_eq!(together_lower_bound(&t, 0, 30, None), 12);
        // Three threads on 4 CPUs with 10 each in 10: Σ = 30, (30 − 10)/(3 − 1) = 10.
        let t3 = [
            samples(1, 1, &[10]),
            samples(1, 2, &[10]),
            samples(1, 3, &[10]),
        ];
        assert_eq!(together_lower_bound(&t3, 0, 10, Some(4)), 10);
        // ... and on 8 CPUs the same: p is at most the threads that ran.
        assert_eq!(together_lower_bound(&t3, 0, 10, Some(8)), 10);
        // One CPU: never together.
        assert_eq!(together_lower_bound(&t3, 0, 10, Some(1)), 0);
        // Taking turns (Σ ≤ span): nothing can be said.
        assert_eq!(together_lower_bound(&t, 0, 42, Some(2)), 0);
    }

    #[test]
    fn a_late_sampler_read_does_not_make_turns_look_concurrent() {
        // Two threads took turns on one CPU, 10 each in 20 ns, but the sampler read thread 2
        // late in the first round: its rounds say 5 + 5 against thread 1's 10 + 0. Per
        // interval that would look like 10 + 5 > 10; over the run, 20 ≤ 20: nothing forced.
        let t = [samples(1, 1, &[10, 0]), samples(1, 2, &[5, 5])];
        assert_eq!(together_lower_bound(&t, 0, 20, Some(2)), 0);
        // A figure longer than the span (an attached thread's past) counts as the span.
        let t = [samples(1, 1, &[50]), samples(1, 2, &[4])];
        assert_eq!(together_lower_bound(&t, 0, 10, Some(2)), 4);
    }

    #[test]
    fn exact_where_every_thread_that_ran_was_traced_else_the_bound() {
        let t = vec![
            samples(1, 1, &[10, 10]),
            samples(1, 2, &[10, 10]),
            samples(2, 3, &[5, 0]),
            samples(2, 4, &[5, 0]),
            // Never ran: its lack of states does not matter.
            samples(1, 5, &[0, 0]),
        ];
        let states = vec![
            (1, vec![change(0, State::Running), change(20, State::Dead)]),
            (2, vec![change(5, State::Running), change(20, State::Dead)]),
            // Process 2's thread 4 has no states: its process falls back to the bound.
            (
                3,
                vec![change(0, State::Running), change(5, State::Sleeping)],
            ),
        ];
        let r = Recorded {
            samples: &t,
            states: &states,
            states_complete: true,
            start: 0,
            end: 20,
            cpus: Some(2),
        };
        let c = per_process(&r);
        assert_eq!(
            c[&1],
            Concurrency {
                on_cpu_together_ns: 15,
                exact: true,
                method: Method::SchedTracepoints
            }
        );
        assert_eq!(c[&2].method, Method::SchedstatBound);
        assert!(!c[&2].exact);
        // 5 + 5 in 20: they may have taken turns.
        assert_eq!(c[&2].on_cpu_together_ns, 0);
        // Lost tracepoint records: the bound, for every process (20 + 20 in 20: all of it).
        let lossy = Recorded {
            states_complete: false,
            ..r
        };
        let c = per_process(&lossy);
        assert_eq!(c[&1].method, Method::SchedstatBound);
        assert_eq!(c[&1].on_cpu_together_ns, 20);
    }
}
