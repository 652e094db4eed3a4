//! `bench latency`: how long a cache line takes to go from one CPU to another. Two threads,
//! pinned to the two CPUs, pass a line back and forth; a round trip is two transfers, so one
//! transfer is half a round trip. The method of the `core-to-core-latency` crate (CAS on one
//! line), plus a read/write variant on two lines that uses no locked instruction.

use crate::placement;
use crate::stats::Stats;
use crate::BenchError;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// One line; each side compare-and-swaps it from the other side's value to its own.
    Cas,
    /// Two lines; each side stores the round number into its own line and spins reading the
    /// other's.
    Rw,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cas" => Ok(Mode::Cas),
            "rw" => Ok(Mode::Rw),
            _ => Err(format!("unknown latency mode `{s}`: use cas or rw")),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct LatencyOptions {
    pub mode: Mode,
    /// Samples kept per pair.
    pub samples: u32,
    /// Round trips timed together as one sample.
    pub round_trips: u32,
    /// Samples run first and discarded.
    pub warmup_samples: u32,
}

impl Default for LatencyOptions {
    /// core-to-core-latency's defaults: 300 samples of 1000 round trips.
    fn default() -> Self {
        LatencyOptions {
            mode: Mode::Cas,
            samples: 300,
            round_trips: 1000,
            warmup_samples: 30,
        }
    }
}

/// One pair of CPUs.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PairLatency {
    /// The CPU that times (ping).
    pub from: u32,
    pub to: u32,
    /// One transfer, ns: the mean over samples of elapsed / round trips / 2.
    pub mean_ns: f64,
    /// Standard error of that mean, ns.
    pub stderr_ns: Option<f64>,
    pub min_ns: f64,
    pub max_ns: f64,
    /// Samples the mean is over.
    pub samples: usize,
    /// The mean over every sample after the warm-up, disturbed ones included: what the
    /// core-to-core-latency crate reports, for comparison.
    pub mean_all_ns: f64,
    /// Samples in which either thread was off its CPU for more than 5 % of the sample (another
    /// process ran there: the sample timed a scheduling delay, not a transfer). Left out of
    /// the mean unless they are more than half.
    pub disturbed_samples: usize,
    /// True when the disturbed samples were more than half and are in the mean.
    pub disturbed_kept: bool,
}

/// A CPU's place, for grouping the matrix.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CpuPlace {
    pub cpu: u32,
    pub node: Option<u32>,
    /// Which L3 it uses, numbered among the topology's L3 instances (0, 1, ...).
    pub l3: Option<usize>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LatencyReport {
    pub options: LatencyOptions,
    /// Ordered by node, then L3, then CPU number.
    pub cpus: Vec<CpuPlace>,
    /// Every unordered pair once.
    pub pairs: Vec<PairLatency>,
}

impl LatencyReport {
    pub fn pair(&self, a: u32, b: u32) -> Option<&PairLatency> {
        self.pairs
            .iter()
            .find(|p| (p.from, p.to) == (a, b) || (p.from, p.to) == (b, a))
    }
}

/// Places `cpus` on the topology and orders them by node, L3, CPU.
pub fn places(t: &topology::Topology, cpus: &[u32]) -> Vec<CpuPlace> {
    let mut out: Vec<CpuPlace> = cpus
        .iter()
        .map(|&cpu| CpuPlace {
            cpu,
            node: t.node_of_cpu(cpu),
            l3: t.caches_at(3).position(|c| c.cpus.contains(cpu)),
        })
        .collect();
    out.sort_by_key(|p| {
        (
            p.node.unwrap_or(u32::MAX),
            p.l3.unwrap_or(usize::MAX),
            p.cpu,
        )
    });
    out
}

#[repr(C, align(128))]
struct Padded(AtomicU64);

/// Measures every pair of `cpus` (ordered by `places`).
pub fn matrix(
    cpus: Vec<CpuPlace>,
    options: LatencyOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<LatencyReport, BenchError> {
    let total = cpus.len() * cpus.len().saturating_sub(1) / 2;
    let mut pairs = Vec::with_capacity(total);
    for (i, a) in cpus.iter().enumerate() {
        for b in &cpus[i + 1..] {
            pairs.push(measure_pair(a.cpu, b.cpu, &options)?);
            progress(pairs.len(), total);
        }
    }
    Ok(LatencyReport {
        options,
        cpus,
        pairs,
    })
}

/// One pair: `from` times, `to` answers.
pub fn measure_pair(
    from: u32,
    to: u32,
    options: &LatencyOptions,
) -> Result<PairLatency, BenchError> {
    let lines = [Padded(AtomicU64::new(0)), Padded(AtomicU64::new(0))];
    let abort = AtomicBool::new(false);
    let ready = AtomicBool::new(false);
    let total_samples = options.samples + options.warmup_samples;
    let mode = options.mode;
    let round_trips = options.round_trips;
    // Per sample: (one-way latency, share of the sample's wall time the thread was off its
    // CPU). Pong keeps its own shares, sample for sample, in the same rounds.
    type Samples = Vec<(f64, f64)>;
    let measured: Result<(Samples, Vec<f64>), BenchError> = std::thread::scope(|scope| {
        let (lines, abort, ready) = (&lines, &abort, &ready);
        let pong = scope.spawn(move || {
            if let Err(e) = placement::pin_current_thread(to) {
                abort.store(true, Ordering::SeqCst);
                return Err(BenchError::Pin { cpu: to, source: e });
            }
            ready.store(true, Ordering::SeqCst);
            let mut lost = Vec::with_capacity(total_samples as usize);
            let mut k = 0u64;
            for _ in 0..total_samples {
                let (cpu, start) = (crate::placement::thread_cpu_ns(), Instant::now());
                for _ in 0..round_trips {
                    if !answer(mode, lines, k, abort) {
                        return Err(BenchError::Aborted);
                    }
                    k += 1;
                }
                lost.push(lost_share(start, cpu));
            }
            Ok(lost)
        });
        let ping = scope.spawn(move || {
            if let Err(e) = placement::pin_current_thread(from) {
                abort.store(true, Ordering::SeqCst);
                return Err(BenchError::Pin {
                    cpu: from,
                    source: e,
                });
            }
            while !ready.load(Ordering::Acquire) {
                if abort.load(Ordering::Relaxed) {
                    return Err(BenchError::Aborted);
                }
                std::hint::spin_loop();
            }
            let mut k = 0u64;
            let mut out = Vec::with_capacity(total_samples as usize);
            for _ in 0..total_samples {
                let (cpu, start) = (crate::placement::thread_cpu_ns(), Instant::now());
                for _ in 0..round_trips {
                    if !serve(mode, lines, k, abort) {
                        return Err(BenchError::Aborted);
                    }
                    k += 1;
                }
                let ns = start.elapsed().as_nanos() as f64;
                out.push((ns / f64::from(round_trips) / 2.0, lost_share(start, cpu)));
            }
            Ok(out)
        });
        let ping = ping.join().unwrap_or(Err(BenchError::Aborted));
        if ping.is_err() {
            abort.store(true, Ordering::SeqCst);
        }
        let pong = pong.join().unwrap_or(Err(BenchError::Aborted));
        match (ping, pong) {
            (Ok(v), Ok(l)) => Ok((v, l)),
            (Err(BenchError::Aborted), Err(e)) | (Err(e), _) | (_, Err(e)) => Err(e),
        }
    });
    let (ping, pong_lost) = measured?;
    let kept: Vec<(f64, bool)> = ping
        .iter()
        .zip(&pong_lost)
        .skip(options.warmup_samples as usize)
        .map(|(&(ns, lost), &pong)| (ns, lost <= MAX_LOST_FRACTION && pong <= MAX_LOST_FRACTION))
        .collect();
    let calm: Vec<f64> = kept.iter().filter(|k| k.1).map(|k| k.0).collect();
    let disturbed_samples = kept.len() - calm.len();
    // Too few calm samples to stand for the pair: keep them all, and say how many were not.
    let values: Vec<f64> = if calm.len() * 2 >= kept.len() && !calm.is_empty() {
        calm
    } else {
        kept.iter().map(|k| k.0).collect()
    };
    let stats = Stats::of(&values).ok_or(BenchError::Aborted)?;
    let mean_all_ns = kept.iter().map(|k| k.0).sum::<f64>() / kept.len() as f64;
    Ok(PairLatency {
        from,
        to,
        mean_ns: stats.mean,
        stderr_ns: stats.standard_error(),
        min_ns: stats.min,
        max_ns: stats.max,
        samples: stats.n,
        mean_all_ns,
        disturbed_samples,
        disturbed_kept: disturbed_samples > 0 && stats.n == kept.len(),
    })
}

/// A sample in which a thread was off its CPU for more than this share is left out.
pub const MAX_LOST_FRACTION: f64 = 0.05;

/// Share of the wall time since `start` the calling thread was not running.
fn lost_share(start: Instant, cpu_start: u64) -> f64 {
    let wall = start.elapsed().as_nanos() as f64;
    let cpu = crate::placement::thread_cpu_ns().saturating_sub(cpu_start) as f64;
    if wall <= 0.0 {
        0.0
    } else {
        (1.0 - cpu / wall).max(0.0)
    }
}

/// Checks for an abort every this many spins (a relaxed load of a line nobody writes).
const ABORT_CHECK_EVERY: u32 = 1 << 16;

/// Ping's half of round `k`: CAS the line from 2k to 2k+1 (CAS mode), or store k+1 to line 0
/// and wait for line 1 to say k+1 (rw mode). False when aborted.
fn serve(mode: Mode, lines: &[Padded; 2], k: u64, abort: &AtomicBool) -> bool {
    match mode {
        Mode::Cas => spin_until(abort, || {
            lines[0]
                .0
                .compare_exchange(2 * k, 2 * k + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        }),
        Mode::Rw => {
            lines[0].0.store(k + 1, Ordering::Release);
            spin_until(abort, || lines[1].0.load(Ordering::Acquire) == k + 1)
        }
    }
}

/// Pong's half: CAS from 2k+1 to 2k+2, or wait for line 0 to say k+1 and answer on line 1.
fn answer(mode: Mode, lines: &[Padded; 2], k: u64, abort: &AtomicBool) -> bool {
    match mode {
        Mode::Cas => spin_until(abort, || {
            lines[0]
                .0
                .compare_exchange(2 * k + 1, 2 * k + 2, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        }),
        Mode::Rw => {
            let ok = spin_until(abort, || lines[0].0.load(Ordering::Acquire) == k + 1);
            lines[1].0.store(k + 1, Ordering::Release);
            ok
        }
    }
}

fn spin_until(abort: &AtomicBool, mut done: impl FnMut() -> bool) -> bool {
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(ABORT_CHECK_EVERY) && abort.load(Ordering::Relaxed) {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_group_by_node_then_l3() {
        let t = topology::Topology::synthetic("2x2x1").unwrap();
        let p = places(&t, &[3, 0, 2, 1]);
        let order: Vec<u32> = p.iter().map(|c| c.cpu).collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert_eq!(p[2].node, Some(1));
        assert_ne!(p[0].l3, p[2].l3);
    }

    #[test]
    fn a_pair_on_this_machine_gives_a_positive_latency_with_its_error() {
        let cpus: Vec<u32> = placement::affinity().unwrap().iter().collect();
        if cpus.len() < 2 {
            testkit::skip("this process may run on one CPU only");
            return;
        }
        let (a, b) = (cpus[0], cpus[1]);
        for mode in [Mode::Cas, Mode::Rw] {
            let opts = LatencyOptions {
                mode,
                samples: 20,
                round_trips: 200,
                warmup_samples: 2,
            };
            let p = measure_pair(a, b, &opts).unwrap();
            // Disturbed samples are left out of the mean unless they are most of them.
            if p.disturbed_kept {
                assert_eq!(p.samples, 20);
            } else {
                assert_eq!(p.samples + p.disturbed_samples, 20);
                assert!(p.samples >= 10);
            }
            assert!(p.mean_ns > 0.0 && p.min_ns <= p.mean_ns && p.mean_ns <= p.max_ns);
            assert!(p.stderr_ns.unwrap() >= 0.0);
        }
    }

    #[test]
    fn a_cpu_that_cannot_be_pinned_is_an_error_not_a_hang() {
        let e = measure_pair(0, 60_000, &LatencyOptions::default()).unwrap_err();
        assert!(matches!(e, BenchError::Pin { cpu: 60_000, .. }), "{e}");
    }
}
