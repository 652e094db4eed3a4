//! Service time per thread from the sampler's records (`trace::sched`): what each thread got
//! from the CPUs, how long it waited for one, how long it was blocked, and the per-interval
//! matrix the scaling model's listings 3.3/3.4 take (`activity`). Pure: streams are decoded by
//! the caller.

use serde::Serialize;
use std::collections::BTreeMap;
use trace::sched::ThreadSample;

/// One thread's samples, in time order (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Default)]
pub struct ThreadSamples {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// When the sampler first saw the thread.
    pub first_seen: u64,
    /// The first look at the thread was a baseline (it was running before the recording).
    pub baseline: bool,
    /// When the sampler found it gone (or the recording ended).
    pub last_seen: Option<u64>,
    pub samples: Vec<ThreadSample>,
}

/// One thread's totals.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ThreadService {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// Time the thread existed while recorded (sampling intervals it was part of), ns.
    pub lifetime_ns: u64,
    /// On a CPU.
    pub service_ns: u64,
    /// Runnable, waiting on a run queue.
    pub runq_wait_ns: u64,
    /// Neither: sleeping or blocked (lifetime − service − wait, never below 0).
    pub blocked_ns: u64,
    /// service / lifetime, %.
    pub active_pct: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// CPUs the thread was seen on, ascending.
    pub cpus: Vec<u32>,
}

/// One sampling interval across all threads.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct IntervalLoad {
    /// End of the interval.
    pub ts: u64,
    pub length_ns: u64,
    /// Average threads on a CPU during it (Σ service / length).
    pub running: f64,
    /// Average threads waiting for a CPU (Σ run-queue wait / length).
    pub waiting: f64,
    /// Threads alive.
    pub threads: u32,
}

/// The service-time view of a run.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Service {
    pub threads: Vec<ThreadService>,
    /// Σ service over threads, ns (τ).
    pub service_ns: u64,
    pub runq_wait_ns: u64,
    pub blocked_ns: u64,
    /// Largest number of threads alive at once.
    pub max_threads: u32,
    /// Per sampling round, in time order.
    pub timeline: Vec<IntervalLoad>,
    /// Per round k, `[max_j τ_kj, Σ_j τ_kj − max_j τ_kj]`: listings 3.3 and 3.4 use only each
    /// interval's total service and its largest (the critical-path time), so two numbers per
    /// round give exactly what the full rounds × threads matrix would, in memory that does
    /// not grow with the number of threads.
    #[serde(skip)]
    pub intervals: Vec<Vec<u64>>,
}

/// Builds the service view. `start` is when the recording started (the first interval of a
/// thread born during the recording begins at the previous round, or at `start`).
pub fn service(threads: &[ThreadSamples], start: u64) -> Service {
    // Every round's time, from every thread's samples.
    let mut rounds: Vec<u64> = threads
        .iter()
        .flat_map(|t| t.samples.iter().map(|s| s.ts))
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    let index: BTreeMap<u64, usize> = rounds.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let round_start = |k: usize| if k == 0 { start } else { rounds[k - 1] };

    let mut sums = vec![0u64; rounds.len()];
    let mut maxes = vec![0u64; rounds.len()];
    let mut waits = vec![0u64; rounds.len()];
    let mut alive = vec![0u32; rounds.len()];
    let round_len = |k: usize| rounds[k].saturating_sub(round_start(k));
    let mut thread_waits: Vec<(usize, u64, u64)> = Vec::new();
    let mut out = Vec::with_capacity(threads.len());
    for t in threads {
        let mut row = ThreadService {
            pid: t.pid,
            tid: t.tid,
            name: t.name.clone(),
            lifetime_ns: 0,
            service_ns: 0,
            runq_wait_ns: 0,
            blocked_ns: 0,
            active_pct: 0.0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            cpus: Vec::new(),
        };
        for s in &t.samples {
            let Some(&k) = index.get(&s.ts) else { continue };
            let begin = if t.baseline || k > 0 {
                round_start(k).max(if t.baseline { t.first_seen } else { 0 })
            } else {
                start
            };
            // Saturating: the samples come from a file, which may be hostile.
            row.lifetime_ns = row.lifetime_ns.saturating_add(s.ts.saturating_sub(begin));
            row.service_ns = row.service_ns.saturating_add(s.on_cpu_ns);
            row.runq_wait_ns = row.runq_wait_ns.saturating_add(s.runq_wait_ns);
            row.voluntary_switches += u64::from(s.voluntary_switches);
            row.involuntary_switches += u64::from(s.involuntary_switches);
            if let Some(c) = s.last_cpu {
                if !row.cpus.contains(&c) {
                    row.cpus.push(c);
                }
            }
            sums[k] = sums[k].saturating_add(s.on_cpu_ns);
            maxes[k] = maxes[k].max(s.on_cpu_ns);
            thread_waits.push((k, s.runq_wait_ns, s.on_cpu_ns));
            alive[k] += 1;
        }
        // The kernel adds a run-queue wait to `schedstat` when the thread gets the CPU, so a
        // long wait lands in one interval: give each interval at most what is left of its
        // length after the thread's service and carry the rest back to the intervals before
        // (the totals do not change).
        let mut carry = 0u64;
        for &(k, wait, on_cpu) in thread_waits.iter().rev() {
            let room = round_len(k).saturating_sub(on_cpu);
            let total = wait.saturating_add(carry);
            let here = total.min(room);
            waits[k] = waits[k].saturating_add(here);
            carry = total - here;
        }
        if let Some(&(k, _, _)) = thread_waits.first() {
            waits[k] = waits[k].saturating_add(carry);
        }
        thread_waits.clear();
        row.cpus.sort_unstable();
        // A thread born inside its first interval is credited the whole interval: its
        // lifetime is at least what it was seen to use.
        let used = row.service_ns.saturating_add(row.runq_wait_ns);
        row.lifetime_ns = row.lifetime_ns.max(used);
        row.blocked_ns = row.lifetime_ns - used;
        row.active_pct = if row.lifetime_ns > 0 {
            100.0 * row.service_ns as f64 / row.lifetime_ns as f64
        } else {
            0.0
        };
        out.push(row);
    }
    let timeline = rounds
        .iter()
        .enumerate()
        .map(|(k, &ts)| {
            let length = ts.saturating_sub(round_start(k)).max(1);
            IntervalLoad {
                ts,
                length_ns: length,
                running: sums[k] as f64 / length as f64,
                waiting: waits[k] as f64 / length as f64,
                threads: alive[k],
            }
        })
        .collect();
    Service {
        service_ns: saturating_sum(out.iter().map(|t| t.service_ns)),
        runq_wait_ns: saturating_sum(out.iter().map(|t| t.runq_wait_ns)),
        blocked_ns: saturating_sum(out.iter().map(|t| t.blocked_ns)),
        max_threads: alive.iter().copied().max().unwrap_or(0),
        threads: out,
        timeline,
        intervals: sums
            .iter()
            .zip(&maxes)
            .map(|(&sum, &max)| vec![max, sum - max])
            .collect(),
    }
}

fn saturating_sum(values: impl Iterator<Item = u64>) -> u64 {
    values.fold(0, u64::saturating_add)
}

/// A sampler stream's samples (thread streams holding `trace::sched` records; the clock must
/// be nanoseconds, as the sampler writes). `None` for a stream with no sampler records.
pub fn thread_samples(stream: &trace::Stream<'_>, name: &str) -> Option<ThreadSamples> {
    use trace::format::EventKind;
    let mut decoder = trace::sched::SampleDecoder::default();
    let mut t = ThreadSamples {
        pid: stream.header.pid,
        tid: stream.header.tid,
        name: name.to_string(),
        first_seen: stream.header.base_time,
        ..Default::default()
    };
    let mut any = false;
    for r in stream.events() {
        match r.kind {
            EventKind::ThreadStart => {
                t.first_seen = r.ts;
                t.baseline = r.aux == 1;
                any = true;
            }
            EventKind::ThreadEnd => t.last_seen = Some(r.ts),
            _ => {}
        }
        if let Some(s) = decoder.push(&r) {
            t.samples.push(s);
        }
    }
    if let Some(s) = decoder.finish() {
        t.samples.push(s);
    }
    (any || !t.samples.is_empty()).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ts: u64, on_cpu_ns: u64, runq_wait_ns: u64) -> ThreadSample {
        ThreadSample {
            ts,
            on_cpu_ns,
            runq_wait_ns,
            last_cpu: Some((ts / 10 % 2) as u32),
            ..Default::default()
        }
    }

    #[test]
    fn two_threads_sharing_one_cpu() {
        // Rounds at 10, 20, 30 from a start at 0: thread A runs 6 of every 10, waits 4;
        // thread B (born in the second interval) runs 4, waits 3, sleeps the rest.
        let a = ThreadSamples {
            tid: 1,
            name: "a".into(),
            samples: vec![sample(10, 6, 4), sample(20, 6, 4), sample(30, 6, 4)],
            ..Default::default()
        };
        let b = ThreadSamples {
            tid: 2,
            name: "b".into(),
            first_seen: 20,
            samples: vec![sample(20, 4, 3), sample(30, 4, 3)],
            ..Default::default()
        };
        let s = service(&[a, b], 0);
        // Per round: the largest service, and the rest of the total.
        assert_eq!(s.intervals, vec![vec![6, 0], vec![6, 4], vec![6, 4]]);
        // Listing 3.3 on the compact rounds equals the listing on the full matrix:
        // (6 + 10 + 10) / (6 + 6 + 6).
        let a33 = crate::activity::measured_active_threads(&s.intervals).unwrap();
        assert!((a33 - 26.0 / 18.0).abs() < 1e-12, "{a33}");
        assert_eq!(s.service_ns, 26);
        let ta = &s.threads[0];
        assert_eq!(
            (
                ta.lifetime_ns,
                ta.service_ns,
                ta.runq_wait_ns,
                ta.blocked_ns
            ),
            (30, 18, 12, 0)
        );
        assert!((ta.active_pct - 60.0).abs() < 1e-9);
        let tb = &s.threads[1];
        assert_eq!((tb.lifetime_ns, tb.blocked_ns), (20, 6));
        assert_eq!(tb.cpus, vec![0, 1]);
        assert_eq!(s.timeline.len(), 3);
        assert!((s.timeline[1].running - 1.0).abs() < 1e-9);
        assert!((s.timeline[1].waiting - 0.7).abs() < 1e-9);
        assert_eq!(s.max_threads, 2);
    }

    #[test]
    fn a_long_run_queue_wait_is_spread_back_over_the_intervals_it_covered() {
        // The kernel reports 25 of wait when the thread finally runs (5) in the third
        // interval: 5 fit there, the other 20 go to the two intervals before.
        let a = ThreadSamples {
            tid: 1,
            samples: vec![sample(10, 0, 0), sample(20, 0, 0), sample(30, 5, 25)],
            ..Default::default()
        };
        let s = service(&[a], 0);
        let waiting: Vec<f64> = s.timeline.iter().map(|i| i.waiting).collect();
        assert_eq!(waiting, vec![1.0, 1.0, 0.5]);
        assert_eq!(s.runq_wait_ns, 25);
    }

    #[test]
    fn a_baseline_thread_counts_from_when_it_was_first_seen() {
        let a = ThreadSamples {
            tid: 1,
            baseline: true,
            first_seen: 100,
            samples: vec![sample(110, 10, 0), sample(120, 5, 0)],
            ..Default::default()
        };
        let s = service(&[a], 100);
        assert_eq!(s.threads[0].lifetime_ns, 20);
        assert_eq!(s.threads[0].blocked_ns, 5);
    }
}
