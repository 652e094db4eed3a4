//! `bench atomic`: every operation at every step of a load pattern, one pinned thread per CPU
//! hammering the one shared region; ns per operation per CPU, and their spread per step.

use crate::ops::Op;
use crate::patterns::{NodeCpus, Pattern, Plan};
use crate::placement::{self, SharedRegion};
use crate::stats::Stats;
use crate::BenchError;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct AtomicOptions {
    /// Timed iterations per CPU per run.
    pub iterations: u64,
    /// Untimed iterations per CPU before the start barrier (caches, TLB, frequency).
    pub warmup_iterations: u64,
    /// Runs of the whole pattern.
    pub repeat: u32,
    /// The node the shared region is bound to.
    pub memory_node: u32,
}

impl AtomicOptions {
    /// A tenth of the timed iterations, at least a thousand.
    pub fn default_warmup(iterations: u64) -> u64 {
        (iterations / 10).max(1000)
    }
}

/// One CPU's result in one run of one step.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CpuSample {
    pub cpu: u32,
    pub elapsed_ns: u64,
    /// elapsed_ns / iterations.
    pub ns_per_op: f64,
    /// Wall time from the thread's arrival at the start barrier until every thread had
    /// finished its timed loop: a span that covers every thread's timed loop.
    pub span_ns: u64,
    /// The thread's CPU time over that span: below `span_ns` when something else ran on its
    /// CPU meanwhile.
    pub span_cpu_ns: u64,
}

impl CpuSample {
    /// Share of the span the thread was not running (another process had its CPU). While it
    /// was off, the other threads' timed loops ran without it: less contended than they say.
    pub fn lost_fraction(&self) -> f64 {
        if self.span_ns == 0 {
            return 0.0;
        }
        (1.0 - self.span_cpu_ns as f64 / self.span_ns as f64).max(0.0)
    }
}

/// A run in which a thread lost more than this share of its span is run again: while one
/// thread is off its CPU the others run uncontended, and its own time is inflated.
pub const MAX_LOST_FRACTION: f64 = 0.05;
/// Attempts at a run before the last one is kept, flagged as disturbed.
pub const ATTEMPTS: u32 = 4;

/// One operation at one step, over every repeat.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StepResult {
    pub step: usize,
    pub op: Op,
    pub cpus: Vec<u32>,
    /// ccont's map, one string per node.
    pub map: Vec<String>,
    /// Per repeat, per CPU.
    pub runs: Vec<Vec<CpuSample>>,
    /// Over every CPU of every repeat (ns/op).
    pub stats: Stats,
    /// Each repeat's mean over its CPUs (ns/op): the repeat-to-repeat spread.
    pub repeat_means: Vec<f64>,
    /// Runs kept although a thread lost more than [`MAX_LOST_FRACTION`] of its time to other
    /// processes in every attempt.
    pub disturbed_runs: u32,
    /// Runs done again because a thread lost time to other processes.
    pub rerun: u32,
}

impl StepResult {
    /// max − min of the repeats' means, ns/op; `None` with one repeat.
    pub fn repeat_spread(&self) -> Option<f64> {
        if self.repeat_means.len() < 2 {
            return None;
        }
        let max = self.repeat_means.iter().copied().fold(f64::MIN, f64::max);
        let min = self.repeat_means.iter().copied().fold(f64::MAX, f64::min);
        Some(max - min)
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AtomicReport {
    pub pattern: Pattern,
    pub ops: Vec<Op>,
    pub options: AtomicOptions,
    /// The node the kernel reports the shared page on.
    pub memory_node_found: Option<u32>,
    pub nodes: Vec<NodeCpus>,
    /// Step by step, op by op within a step.
    pub steps: Vec<StepResult>,
    pub notes: Vec<String>,
}

/// Progress: a step of an op in a repeat finished.
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// Runs the plan: for each repeat, each step, each op (ops interleaved so drift and noise hit
/// them alike).
pub fn run(
    plan: &Plan,
    ops: &[Op],
    options: AtomicOptions,
    mut progress: impl FnMut(Progress),
) -> Result<AtomicReport, BenchError> {
    let region = SharedRegion::on_node(options.memory_node).map_err(BenchError::Memory)?;
    let mut notes = plan.notes.clone();
    notes.extend(region.note.clone());
    let mut samples: Vec<Vec<Vec<Vec<CpuSample>>>> =
        vec![vec![Vec::new(); ops.len()]; plan.steps.len()];
    let mut disturbed = vec![vec![0u32; ops.len()]; plan.steps.len()];
    let mut rerun = vec![vec![0u32; ops.len()]; plan.steps.len()];
    let total = plan.steps.len() * ops.len() * options.repeat as usize;
    let mut done = 0;
    for _ in 0..options.repeat {
        for (s, cpus) in plan.steps.iter().enumerate() {
            for (o, &op) in ops.iter().enumerate() {
                let mut attempt = 1;
                let run = loop {
                    let run = run_step(op, cpus, &region, &options)?;
                    let calm = run.iter().all(|c| c.lost_fraction() <= MAX_LOST_FRACTION);
                    if calm || attempt == ATTEMPTS {
                        disturbed[s][o] += u32::from(!calm);
                        break run;
                    }
                    rerun[s][o] += 1;
                    attempt += 1;
                };
                samples[s][o].push(run);
                done += 1;
                progress(Progress { done, total });
            }
        }
    }
    let mut steps = Vec::new();
    for (s, cpus) in plan.steps.iter().enumerate() {
        for (o, &op) in ops.iter().enumerate() {
            let runs = std::mem::take(&mut samples[s][o]);
            let all: Vec<f64> = runs.iter().flatten().map(|c| c.ns_per_op).collect();
            let repeat_means = runs
                .iter()
                .map(|r| r.iter().map(|c| c.ns_per_op).sum::<f64>() / r.len() as f64)
                .collect();
            steps.push(StepResult {
                step: s,
                op,
                cpus: cpus.clone(),
                map: plan.map(cpus),
                stats: Stats::of(&all).expect("a step has at least one CPU"),
                runs,
                repeat_means,
                disturbed_runs: disturbed[s][o],
                rerun: rerun[s][o],
            });
        }
    }
    let kept: u32 = disturbed.iter().flatten().sum();
    if kept > 0 {
        notes.push(format!(
            "{kept} run(s) kept although a thread lost more than {:.0} % of its time to other \
             processes in each of {ATTEMPTS} attempts: the machine is busy, figures are noisy",
            MAX_LOST_FRACTION * 100.0
        ));
    }
    Ok(AtomicReport {
        pattern: plan.pattern,
        ops: ops.to_vec(),
        options,
        memory_node_found: region.node,
        nodes: plan.nodes.clone(),
        steps,
        notes,
    })
}

/// Iterations run at a time by a thread that finished its timed part, while it waits for the
/// others: keeps the line as contended for the slowest thread as for the fastest.
const KEEP_BUSY_CHUNK: u64 = 256;

/// One run of `op` on `cpus`: a thread pinned to each, warm-up, a spinning start barrier, the
/// timed loop, then untimed loops until every thread has finished its timed part.
pub fn run_step(
    op: Op,
    cpus: &[u32],
    region: &SharedRegion,
    options: &AtomicOptions,
) -> Result<Vec<CpuSample>, BenchError> {
    op.available().map_err(BenchError::Unavailable)?;
    region.zero();
    let n = cpus.len();
    let arrived = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let line = region.ptr() as usize;
    let results: Vec<Result<(CpuSample, u64), BenchError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let (arrived, finished, abort) = (&arrived, &finished, &abort);
                scope.spawn(move || {
                    let line = line as *mut u64;
                    if let Err(e) = placement::pin_current_thread(cpu) {
                        abort.store(true, Ordering::SeqCst);
                        return Err(BenchError::Pin { cpu, source: e });
                    }
                    // SAFETY: the region is SHARED_BYTES, page aligned, alive for the scope.
                    unsafe { op.burn(line, options.warmup_iterations) };
                    let mut executed = options.warmup_iterations;
                    let span_cpu_start = crate::placement::thread_cpu_ns();
                    let span_start = Instant::now();
                    arrived.fetch_add(1, Ordering::SeqCst);
                    while arrived.load(Ordering::Acquire) < n {
                        if abort.load(Ordering::Relaxed) {
                            return Err(BenchError::Aborted);
                        }
                        std::hint::spin_loop();
                    }
                    let start = Instant::now();
                    // SAFETY: as above.
                    unsafe { op.burn(line, options.iterations) };
                    let elapsed = start.elapsed();
                    executed += options.iterations;
                    finished.fetch_add(1, Ordering::SeqCst);
                    while finished.load(Ordering::Acquire) < n {
                        // SAFETY: as above.
                        unsafe { op.burn(line, KEEP_BUSY_CHUNK) };
                        executed += KEEP_BUSY_CHUNK;
                    }
                    let span_ns = span_start.elapsed().as_nanos() as u64;
                    let span_cpu_ns =
                        crate::placement::thread_cpu_ns().saturating_sub(span_cpu_start);
                    let elapsed_ns = elapsed.as_nanos() as u64;
                    Ok((
                        CpuSample {
                            cpu,
                            elapsed_ns,
                            ns_per_op: elapsed_ns as f64 / options.iterations as f64,
                            span_ns,
                            span_cpu_ns,
                        },
                        executed,
                    ))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(BenchError::Aborted)))
            .collect()
    });
    let mut out = Vec::with_capacity(n);
    let mut executed = 0u64;
    let mut first_error = None;
    for r in results {
        match r {
            Ok((sample, count)) => {
                executed += count;
                out.push(sample);
            }
            // The thread that failed says why; the others only stopped because of it.
            Err(BenchError::Aborted) => {}
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    op.check_effect(&region.read(), executed)
        .map_err(BenchError::Unchecked)?;
    Ok(out)
}
