//! Scaling loss after Tudor & Teo, as Venter's thesis applies it (§3.1.1, §3.2.2.1; equations
//! 3.1–3.8; listings 3.1, 3.3, 3.4; tables 4.1, 4.5, 4.8, 4.11).
//!
//! A program of m threads is run on one core (no memory contention) and on n cores. From the
//! service time each thread received per sampling interval we get the average number of
//! active threads A(m, n) (listing 3.3); from the work C(n) (cycles, or on-CPU time when
//! there are no hardware counters) the ratio ω of contention work to useful work (eq. 3.5).
//! Then A splits into useful activity P = A/(1+ω), activity lost to memory contention
//! R = A − P and idleness from dependencies D = m − A (eqs. 3.2, 3.3, 3.8).
//!
//! Everything here is a pure function of numbers the caller measured; nothing is read from a
//! file, a process or a clock. docs/methodology.md ("Scaling loss: the Tudor & Teo model")
//! gives every formula, how the garbled ones were read, and the assumptions.

use serde::{Deserialize, Serialize};
use std::fmt;

// ---------------------------------------------------------------------------------------------
// Active threads (listings 3.3 and 3.4)
// ---------------------------------------------------------------------------------------------

/// Sum of service and critical-path time of one interval: (Σ_j τ_j, max_j τ_j).
fn interval_sums(interval: &[u64]) -> (u128, u64) {
    let mut sum: u128 = 0;
    let mut tcp: u64 = 0;
    for &s in interval {
        sum += u128::from(s);
        tcp = tcp.max(s);
    }
    (sum, tcp)
}

/// Listing 3.3: measured average active threads A(m, n) from service-time samples.
///
/// `intervals[k][j]` = service (on-CPU) time in ns thread j received during interval k
/// (threads absent in an interval have 0). Intervals where every thread got 0 are skipped
/// (as the listing's `if tcp > 0`). None when no interval has service.
///
/// A(m, n) = Σ_k Σ_j τ_kj / Σ_k max_j τ_kj: each interval's A(m, n, t) = τ/ΔT_cp weighted by
/// its critical-path time ΔT_cp, over the total critical-path time T_cp.
pub fn measured_active_threads(intervals: &[Vec<u64>]) -> Option<f64> {
    let mut sum: u128 = 0;
    let mut tcp_total: u128 = 0;
    for interval in intervals {
        let (s, tcp) = interval_sums(interval);
        if tcp > 0 {
            sum += s;
            tcp_total += u128::from(tcp);
        }
    }
    if tcp_total == 0 {
        return None;
    }
    Some(sum as f64 / tcp_total as f64)
}

/// Listing 3.4: modelled A(m, n) for `cores` cores from the same samples.
///
/// Each interval with service contributes its service Σ_j τ_j to the numerator and
/// Σ_j τ_j / min(cores, A(m, ∞, t)) to the denominator, where A(m, ∞, t) = Σ_j τ_j / max_j τ_j:
/// the interval would take its critical-path time if there were cores for all its active
/// threads, else its service spread over `cores` cores. Typically the samples come from the
/// one-core run (thesis §3.2.2.1). None when no interval has service or `cores` is 0.
pub fn modelled_active_threads(intervals: &[Vec<u64>], cores: u32) -> Option<f64> {
    if cores == 0 {
        return None;
    }
    let n = f64::from(cores);
    let mut above = 0.0_f64;
    let mut below = 0.0_f64;
    let mut any = false;
    for interval in intervals {
        let (s, tcp) = interval_sums(interval);
        if tcp == 0 {
            continue;
        }
        any = true;
        let s_f = s as f64;
        let tcp_f = tcp as f64;
        above += s_f;
        // s / min(n, s/tcp) == max(tcp, s/n); the integer comparison keeps the exact case exact.
        below += if s <= u128::from(tcp) * u128::from(cores) {
            tcp_f
        } else {
            s_f / n
        };
    }
    if !any || below <= 0.0 {
        return None;
    }
    Some(above / below)
}

// ---------------------------------------------------------------------------------------------
// Line of best fit (listing 3.1)
// ---------------------------------------------------------------------------------------------

/// A straight line y = slope·x + intercept.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Line {
    pub slope: f64,
    pub intercept: f64,
}

impl Line {
    /// y at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.slope * x + self.intercept
    }
}

/// Listing 3.1 (least squares). None for < 2 points, all x equal, or a non-finite coordinate.
///
/// slope = (Σxy − Σx·ȳ) / (Σx² − Σx·x̄), intercept = ȳ − slope·x̄. Computed in the equivalent
/// centred form Σ(x−x̄)(y−ȳ) / Σ(x−x̄)², which loses less precision when x is large.
pub fn line_best_fit(points: &[(f64, f64)]) -> Option<Line> {
    if points.len() < 2
        || points
            .iter()
            .any(|&(x, y)| !x.is_finite() || !y.is_finite())
    {
        return None;
    }
    let x0 = points[0].0;
    if points.iter().all(|&(x, _)| x == x0) {
        return None;
    }
    let count = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / count;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / count;
    let mut sxy = 0.0;
    let mut sxx = 0.0;
    for &(x, y) in points {
        sxy += (x - mean_x) * (y - mean_y);
        sxx += (x - mean_x) * (x - mean_x);
    }
    if sxx <= 0.0 || !sxx.is_finite() {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    if !slope.is_finite() || !intercept.is_finite() {
        return None;
    }
    Some(Line { slope, intercept })
}

// ---------------------------------------------------------------------------------------------
// Configurations and the scaling model (eqs. 3.2–3.5, 3.8; tables 4.1, 4.5, 4.8, 4.11)
// ---------------------------------------------------------------------------------------------

/// What "work" C(n) was measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkUnit {
    /// CPU cycles from the PMU (the thesis's measure).
    Cycles,
    /// On-CPU (service) time in ns: user + system, the fallback in files written before
    /// [`WorkUnit::UserNs`]. Includes memory stalls, spinning and kernel time, so ω from it
    /// also counts spin-waiting.
    OnCpuNs,
    /// User CPU time in ns (wait4's ru_utime): the fallback without hardware counters. Memory
    /// stall cycles are inside it (and spinning); system time (page faults, system calls) is
    /// left out of ω.
    UserNs,
}

impl fmt::Display for WorkUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WorkUnit::Cycles => "cycles",
            WorkUnit::OnCpuNs => "on-CPU ns",
            WorkUnit::UserNs => "user CPU ns",
        })
    }
}

/// One measured configuration: m threads on n cores (values averaged over repeats by the
/// caller).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Configuration {
    /// m
    pub threads: u32,
    /// n
    pub cores: u32,
    /// Wall time T(n).
    pub elapsed_ns: f64,
    /// τ: total service time, summed over threads.
    pub service_ns: f64,
    /// A(m, n), measured: `contend scale` gives (service + run-queue wait)/T from schedstat
    /// (docs/methodology.md §5.1 says why rather than listing 3.3, which also works here).
    pub active_threads: f64,
    /// W: threads runnable but waiting for a CPU on average (Σ run-queue wait / T), part of
    /// `active_threads`: A_run = A − W were on a CPU. 0 in files written before the split.
    #[serde(default)]
    pub waiting_threads: f64,
    /// C(n) in `unit`.
    pub work: f64,
    pub unit: WorkUnit,
    /// r(n), when hardware counters exist.
    pub llc_misses: Option<f64>,
    pub llc_references: Option<f64>,
    /// Summed lock wait over all threads, when locks were recorded.
    pub lock_wait_ns: Option<f64>,
}

/// Table 4.11 for one configuration: how much of the time lost to dependencies the recorded
/// lock waits explain. All times in thread-ns (summed over threads).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct LockExplanation {
    /// D·T(n): idleness from all dependencies (table 4.11 column 3).
    pub dependency_loss_thread_ns: f64,
    /// Σ lock wait over all threads (table 4.11 column 4).
    pub lock_wait_ns: f64,
    /// min(lock wait, D·T(n)), and never below 0: the part of the dependency loss the lock
    /// waits can account for.
    pub explained_thread_ns: f64,
    /// explained / (D·T(n)) × 100; None when D·T(n) ≤ 0 (nothing to explain).
    pub explained_pct: Option<f64>,
    /// D·T(n) − lock wait (table 4.11 column 5), signed and not clamped: negative when the
    /// recorded lock waits exceed the dependency loss (see `lock_wait_exceeds_dependency_loss`).
    pub unexplained_thread_ns: f64,
    /// True when lock wait > D·T(n): waits overlapped with time the thread was runnable or
    /// spinning (counted as active in A), or the samples and the lock trace disagree. A
    /// renderer should mark `unexplained_thread_ns` rather than show it as a plain number.
    pub lock_wait_exceeds_dependency_loss: bool,
}

/// Eq. 3.2–3.5, 3.8, tables 4.1, 4.5, 4.8, 4.11 for one target configuration (m threads on n
/// cores) against the one-core baseline with the same m.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct ScalingModel {
    /// m
    pub threads: u32,
    /// n (the target's cores)
    pub cores: u32,
    /// What C(1) and C(n) are measured in.
    pub unit: WorkUnit,
    /// C(1) = U, the "useful" work (includes stalls that are not contention).
    pub baseline_work: f64,
    /// C(n).
    pub work: f64,
    /// A(m, n), the target's measured average active threads (listing 3.3): on a CPU or
    /// waiting for one.
    pub active_threads: f64,
    /// A_run = A − W: threads on a CPU on average (None in files written before the split).
    #[serde(default)]
    pub running_threads: Option<f64>,
    /// W: threads waiting for a CPU on average (more threads than CPUs, or other processes).
    #[serde(default)]
    pub waiting_threads: Option<f64>,
    /// ω = C(n)/C(1) − 1 (eq. 3.5); negative values are kept as measured.
    pub omega: f64,
    /// P = A_run/(1+ω): threads doing useful work (eq. 3.2, with the thesis's A narrowed to
    /// the threads on a CPU: a thread waiting for one does no work, useful or not).
    pub useful_active_threads: f64,
    /// R = A_run − P: speed-up loss to memory (hardware) contention (eq. 3.3).
    pub memory_loss_threads: f64,
    /// D = m − A: speed-up loss to dependencies (eq. 3.8). When n < m this includes the m − n
    /// threads that cannot run for want of cores.
    pub dependency_loss_threads: f64,
    /// S = P = A_run/(1+ω) (eq. 3.4).
    pub predicted_speedup: f64,
    /// T(1)/T(n), measured.
    pub measured_speedup: f64,
    /// T(1), the baseline's wall time.
    pub baseline_elapsed_ns: f64,
    /// T(n), the target's wall time.
    pub elapsed_ns: f64,
    /// Table 4.5, as contend reports it: R·T(n), thread-ns of activity spent on memory
    /// contention.
    pub memory_loss_thread_ns: f64,
    /// D·T(n), thread-ns of idleness from dependencies.
    pub dependency_loss_thread_ns: f64,
    /// R/m·T(n): the memory loss as a share of the wall time.
    pub memory_loss_wall_ns: f64,
    /// D/m·T(n): the dependency loss as a share of the wall time.
    pub dependency_loss_wall_ns: f64,
    /// Table 4.8: τ(1), total service time of the m threads on one core.
    pub baseline_service_ns: f64,
    /// τ(n), total service time on n cores.
    pub service_ns: f64,
    /// (τ(n) − τ(1))/τ(1) × 100.
    pub service_change_pct: f64,
    /// τ(1)/min(m, n): the running time with ideal speed-up.
    pub ideal_running_ns: f64,
    /// T(n): the actual running time.
    pub actual_running_ns: f64,
    /// (T(n) − ideal)/ideal × 100.
    pub running_change_pct: f64,
    /// Table 4.11; None when no lock data was recorded for the target.
    pub locks: Option<LockExplanation>,
    /// Table 4.1: CCM = C(n)/r(n), cycles per LLC miss. None unless the work is in cycles and
    /// r(n) was measured and is > 0.
    pub cycles_per_llc_miss: Option<f64>,
    /// Table 4.1: miss rate = r(n)/T(n), LLC misses per second of wall time. None when r(n)
    /// was not measured.
    pub llc_misses_per_s: Option<f64>,
    /// r(n)/references(n); None unless both were measured and references > 0.
    pub llc_miss_ratio: Option<f64>,
    /// Table 4.3: (r(n) − r(1))/r(1) × 100. The model assumes r stays about constant across n;
    /// a large change means U = C(1) is under- or over-estimated. None unless both measured
    /// and r(1) > 0.
    pub llc_misses_change_pct: Option<f64>,
}

/// Why a model could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    /// The baseline and the target ran different thread counts m.
    ThreadsMismatch { baseline: u32, target: u32 },
    /// The baseline must be the one-core run (n = 1).
    BaselineNotOneCore { cores: u32 },
    /// Work measured in different units cannot be compared.
    UnitMismatch {
        baseline: WorkUnit,
        target: WorkUnit,
    },
    /// C(n) must be > 0 (ω divides by C(1); eq. 3.6 inverts C(n)).
    NonPositiveWork { cores: u32, work: f64 },
    /// A field out of its domain (0 threads, a negative or non-finite time, …).
    InvalidInput {
        field: &'static str,
        value: f64,
        requirement: &'static str,
    },
    /// A regression lacks configurations: `needs` names them, `have` lists the core counts
    /// given.
    TooFewConfigurations {
        model: &'static str,
        needs: String,
        have: Vec<u32>,
    },
}

fn list_cores(have: &[u32]) -> String {
    if have.is_empty() {
        return "none".to_string();
    }
    have.iter()
        .map(|n| format!("n={n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::ThreadsMismatch { baseline, target } => write!(
                f,
                "baseline and target must run the same number of threads: baseline m={baseline}, target m={target}"
            ),
            ModelError::BaselineNotOneCore { cores } => write!(
                f,
                "the baseline must run on one core (n=1) to measure work without memory contention: it ran on n={cores}"
            ),
            ModelError::UnitMismatch { baseline, target } => write!(
                f,
                "work measured in different units: baseline in {baseline}, target in {target}"
            ),
            ModelError::NonPositiveWork { cores, work } => {
                write!(f, "work C({cores}) is {work}: it must be greater than 0")
            }
            ModelError::InvalidInput {
                field,
                value,
                requirement,
            } => write!(f, "{field} is {value}: it must be {requirement}"),
            ModelError::TooFewConfigurations { model, needs, have } => {
                let have_s = list_cores(have);
                let only = if have.is_empty() { "" } else { "only " };
                write!(f, "{model} needs {needs}: have {only}{have_s}")
            }
        }
    }
}

impl std::error::Error for ModelError {}

fn check(
    field: &'static str,
    value: f64,
    ok: bool,
    requirement: &'static str,
) -> Result<(), ModelError> {
    if ok {
        Ok(())
    } else {
        Err(ModelError::InvalidInput {
            field,
            value,
            requirement,
        })
    }
}

fn check_positive(field: &'static str, value: f64) -> Result<(), ModelError> {
    check(
        field,
        value,
        value.is_finite() && value > 0.0,
        "finite and greater than 0",
    )
}

fn check_non_negative(field: &'static str, value: f64) -> Result<(), ModelError> {
    check(
        field,
        value,
        value.is_finite() && value >= 0.0,
        "finite and at least 0",
    )
}

fn check_work(cores: u32, work: f64) -> Result<(), ModelError> {
    if work.is_finite() && work > 0.0 {
        Ok(())
    } else {
        Err(ModelError::NonPositiveWork { cores, work })
    }
}

fn pct_change(from: f64, to: f64) -> f64 {
    (to - from) / from * 100.0
}

/// Eq. 3.2–3.5, 3.8 and tables 4.1, 4.5, 4.8, 4.11 for `target` (m threads on n cores) against
/// `baseline` (the same m threads on one core).
pub fn scaling_model(
    baseline: &Configuration,
    target: &Configuration,
) -> Result<ScalingModel, ModelError> {
    if baseline.threads != target.threads {
        return Err(ModelError::ThreadsMismatch {
            baseline: baseline.threads,
            target: target.threads,
        });
    }
    if baseline.threads == 0 {
        return Err(ModelError::InvalidInput {
            field: "threads",
            value: 0.0,
            requirement: "at least 1",
        });
    }
    if baseline.cores != 1 {
        return Err(ModelError::BaselineNotOneCore {
            cores: baseline.cores,
        });
    }
    if target.cores == 0 {
        return Err(ModelError::InvalidInput {
            field: "target.cores",
            value: 0.0,
            requirement: "at least 1",
        });
    }
    if baseline.unit != target.unit {
        return Err(ModelError::UnitMismatch {
            baseline: baseline.unit,
            target: target.unit,
        });
    }
    check_work(baseline.cores, baseline.work)?;
    check_work(target.cores, target.work)?;
    check_positive("baseline.elapsed_ns", baseline.elapsed_ns)?;
    check_positive("target.elapsed_ns", target.elapsed_ns)?;
    check_positive("baseline.service_ns", baseline.service_ns)?;
    check_non_negative("target.service_ns", target.service_ns)?;
    check_non_negative("target.active_threads", target.active_threads)?;
    check_non_negative("target.waiting_threads", target.waiting_threads)?;
    for (field, v) in [
        ("baseline.llc_misses", baseline.llc_misses),
        ("target.llc_misses", target.llc_misses),
        ("target.llc_references", target.llc_references),
        ("target.lock_wait_ns", target.lock_wait_ns),
    ] {
        if let Some(v) = v {
            check_non_negative(field, v)?;
        }
    }

    let m = f64::from(target.threads);
    let n = f64::from(target.cores);
    let a = target.active_threads;
    let w = target.waiting_threads.clamp(0.0, a);
    let a_run = a - w;
    let t_n = target.elapsed_ns;

    // Eq. 3.5, 3.2, 3.3, 3.4, 3.8, with the loss split three ways: m − P = R + W + D.
    let omega = target.work / baseline.work - 1.0;
    let p = a_run / (1.0 + omega);
    let r = a_run - p;
    let d = m - a;
    let s = p;

    // Table 4.8.
    let ideal_running_ns = baseline.service_ns / m.min(n);

    // Table 4.11.
    let dependency_loss_thread_ns = d * t_n;
    let locks = target.lock_wait_ns.map(|wait| {
        let explained = wait.min(dependency_loss_thread_ns).max(0.0);
        LockExplanation {
            dependency_loss_thread_ns,
            lock_wait_ns: wait,
            explained_thread_ns: explained,
            explained_pct: (dependency_loss_thread_ns > 0.0)
                .then(|| explained / dependency_loss_thread_ns * 100.0),
            unexplained_thread_ns: dependency_loss_thread_ns - wait,
            lock_wait_exceeds_dependency_loss: wait > dependency_loss_thread_ns,
        }
    });

    // Table 4.1 (and 4.3).
    let misses = target.llc_misses;
    let cycles_per_llc_miss = match (target.unit, misses) {
        (WorkUnit::Cycles, Some(r_n)) if r_n > 0.0 => Some(target.work / r_n),
        _ => None,
    };
    let llc_misses_per_s = misses.map(|r_n| r_n / (t_n / 1e9));
    let llc_miss_ratio = match (misses, target.llc_references) {
        (Some(r_n), Some(refs)) if refs > 0.0 => Some(r_n / refs),
        _ => None,
    };
    let llc_misses_change_pct = match (baseline.llc_misses, misses) {
        (Some(r_1), Some(r_n)) if r_1 > 0.0 => Some(pct_change(r_1, r_n)),
        _ => None,
    };

    Ok(ScalingModel {
        threads: target.threads,
        cores: target.cores,
        unit: target.unit,
        baseline_work: baseline.work,
        work: target.work,
        active_threads: a,
        running_threads: Some(a_run),
        waiting_threads: Some(w),
        omega,
        useful_active_threads: p,
        memory_loss_threads: r,
        dependency_loss_threads: d,
        predicted_speedup: s,
        measured_speedup: baseline.elapsed_ns / t_n,
        baseline_elapsed_ns: baseline.elapsed_ns,
        elapsed_ns: t_n,
        memory_loss_thread_ns: r * t_n,
        dependency_loss_thread_ns,
        memory_loss_wall_ns: r / m * t_n,
        dependency_loss_wall_ns: d / m * t_n,
        baseline_service_ns: baseline.service_ns,
        service_ns: target.service_ns,
        service_change_pct: pct_change(baseline.service_ns, target.service_ns),
        ideal_running_ns,
        actual_running_ns: t_n,
        running_change_pct: pct_change(ideal_running_ns, t_n),
        locks,
        cycles_per_llc_miss,
        llc_misses_per_s,
        llc_miss_ratio,
        llc_misses_change_pct,
    })
}

// ---------------------------------------------------------------------------------------------
// Memory queue (eq. 3.6) and NUMA delay (eq. 3.7)
// ---------------------------------------------------------------------------------------------

/// One measured (n, C(n), r(n)) for the regressions of eqs. 3.6 and 3.7.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct WorkPoint {
    /// n
    pub cores: u32,
    /// C(n) in `unit`.
    pub work: f64,
    pub unit: WorkUnit,
    /// r(n): LLC misses (memory requests), when counters exist.
    pub llc_misses: Option<f64>,
}

impl From<&Configuration> for WorkPoint {
    fn from(c: &Configuration) -> Self {
        WorkPoint {
            cores: c.cores,
            work: c.work,
            unit: c.unit,
            llc_misses: c.llc_misses,
        }
    }
}

/// Checks points share one unit, have n ≥ 1, C > 0 and r ≥ 0; returns the unit.
fn check_points(points: &[WorkPoint]) -> Result<Option<WorkUnit>, ModelError> {
    let unit = points.first().map(|p| p.unit);
    for p in points {
        if let Some(u) = unit {
            if p.unit != u {
                return Err(ModelError::UnitMismatch {
                    baseline: u,
                    target: p.unit,
                });
            }
        }
        if p.cores == 0 {
            return Err(ModelError::InvalidInput {
                field: "cores",
                value: 0.0,
                requirement: "at least 1",
            });
        }
        check_work(p.cores, p.work)?;
        if let Some(r) = p.llc_misses {
            check_positive("llc_misses", r)?;
        }
    }
    Ok(unit)
}

fn distinct_cores(points: &[WorkPoint]) -> Vec<u32> {
    let mut v: Vec<u32> = points.iter().map(|p| p.cores).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Eq. 3.6 fitted: C(n) = r/(μ − n·L), an M/M/1 memory controller serving n cores.
///
/// Linearised as r(n)/C(n) = μ − L·n (with counters) or 1/C(n) = μ/r − (L/r)·n (without), and
/// fitted with listing 3.1. μ and L are in memory requests per unit of work (per cycle when
/// `unit` is cycles). Without r(n) only μ/r and L/r are known, which still predict C(n) and ω
/// for other n under the model's assumption that r does not change with n.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct MemoryQueue {
    pub unit: WorkUnit,
    /// The distinct core counts n the fit used.
    pub cores_used: Vec<u32>,
    /// The regression line: y = r(n)/C(n) when every point had r(n), else y = 1/C(n); x = n.
    pub fit: Line,
    /// r: the mean of the measured r(n) (the model takes r as constant); None without counters.
    pub llc_misses: Option<f64>,
    /// μ, service rate of the memory controller; None without r(n).
    pub mu: Option<f64>,
    /// L, arrival rate of memory requests from one core; None without r(n).
    pub l: Option<f64>,
    /// μ/r (always known).
    pub mu_over_r: f64,
    /// L/r (always known).
    pub l_over_r: f64,
    /// Core counts whose point had no r(n): why μ and L are None.
    pub missing_llc_misses_at: Vec<u32>,
}

/// The core counts a fit's extrapolation is checked at.
const EXTRAPOLATED_CORES: [u32; 4] = [2, 4, 8, 16];

impl MemoryQueue {
    /// Why this fit must not be reported, if it must not: negative parameters (a memory
    /// controller serving a negative rate, or cores taking requests away), or a negative ω at
    /// some extrapolated core count (work shrinking as cores are added). Noise in C(n), not
    /// the memory system, gives such fits.
    pub fn failure(&self) -> Option<String> {
        let named = |v: Option<f64>, name: &str| {
            v.filter(|x| *x < 0.0)
                .map(|x| format!("{name} = {x:.3e} < 0"))
        };
        let negative: Vec<String> = [
            named(self.mu, "μ"),
            named(self.l, "L"),
            named(Some(self.mu_over_r), "μ/r"),
            named(Some(self.l_over_r), "L/r"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !negative.is_empty() {
            return Some(format!(
                "the fit failed: {} (work fell as cores were added: noise or time-slicing, not a memory queue)",
                negative.join(", ")
            ));
        }
        EXTRAPOLATED_CORES.iter().find_map(|&n| {
            self.predicted_omega(n).filter(|w| *w < 0.0).map(|w| {
                format!("the fit failed: it extrapolates ω({n}) = {w:+.3} < 0 (work shrinking with cores)")
            })
        })
    }

    /// λ = n·L, the arrival rate at the controller with n cores; None without r(n).
    pub fn lambda(&self, cores: u32) -> Option<f64> {
        self.l.map(|l| f64::from(cores) * l)
    }

    /// Modelled C(n) = r/(μ − n·L) = 1/(μ/r − n·L/r) (eq. 3.6). None when n = 0 or μ ≤ n·L
    /// (the queue would not be stable: the M/M/1 model predicts no finite response time).
    pub fn predicted_work(&self, cores: u32) -> Option<f64> {
        if cores == 0 {
            return None;
        }
        let denom = self.mu_over_r - f64::from(cores) * self.l_over_r;
        (denom > 0.0 && denom.is_finite()).then(|| 1.0 / denom)
    }

    /// Modelled ω(m, n) = Ĉ(n)/Ĉ(1) − 1 (eq. 3.5 on eq. 3.6's predictions; thesis §3.1.1.1
    /// uses the ratio of the predictions for n = 1 and n = m).
    pub fn predicted_omega(&self, cores: u32) -> Option<f64> {
        Some(self.predicted_work(cores)? / self.predicted_work(1)? - 1.0)
    }
}

/// Eq. 3.6: μ and L (and λ = n·L) from ≥ 2 configurations' (n, C(n), r(n)) with different n,
/// by regression on n (listing 3.1). When any point lacks r(n) the fit is of 1/C(n) and only
/// μ/r and L/r are given (the points without r are named in `missing_llc_misses_at`).
pub fn memory_queue(points: &[WorkPoint]) -> Result<MemoryQueue, ModelError> {
    let unit = check_points(points)?;
    let cores_used = distinct_cores(points);
    let Some(unit) = unit.filter(|_| cores_used.len() >= 2) else {
        return Err(ModelError::TooFewConfigurations {
            model: "memory_queue (eq. 3.6)",
            needs: "C(n) at two or more core counts, e.g. C(1) and C(m)".to_string(),
            have: cores_used,
        });
    };
    let missing: Vec<u32> = {
        let mut v: Vec<u32> = points
            .iter()
            .filter(|p| p.llc_misses.is_none())
            .map(|p| p.cores)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let degenerate = || ModelError::TooFewConfigurations {
        model: "memory_queue (eq. 3.6)",
        needs: "C(n) at two or more core counts, e.g. C(1) and C(m)".to_string(),
        have: cores_used.clone(),
    };
    if missing.is_empty() {
        let xy: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (f64::from(p.cores), p.llc_misses.unwrap_or(0.0) / p.work))
            .collect();
        let fit = line_best_fit(&xy).ok_or_else(degenerate)?;
        let r_mean = points.iter().filter_map(|p| p.llc_misses).sum::<f64>() / points.len() as f64;
        let mu = fit.intercept;
        let l = -fit.slope;
        Ok(MemoryQueue {
            unit,
            cores_used,
            fit,
            llc_misses: Some(r_mean),
            mu: Some(mu),
            l: Some(l),
            mu_over_r: mu / r_mean,
            l_over_r: l / r_mean,
            missing_llc_misses_at: missing,
        })
    } else {
        let xy: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (f64::from(p.cores), 1.0 / p.work))
            .collect();
        let fit = line_best_fit(&xy).ok_or_else(degenerate)?;
        Ok(MemoryQueue {
            unit,
            cores_used,
            fit,
            llc_misses: None,
            mu: None,
            l: None,
            mu_over_r: fit.intercept,
            l_over_r: -fit.slope,
            missing_llc_misses_at: missing,
        })
    }
}

/// Eq. 3.7 as contend reads it: C(n) = C(c) + δ·r·(n − c)/n for n > c cores filled socket
/// first with c cores per socket: the (n − c)/n of the r memory requests that come from the
/// second socket each take δ more (cycles, or ns) than a local request.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct NumaDelta {
    /// c
    pub cores_per_socket: u32,
    /// Eq. 3.6 fitted on the points with n ≤ c (C(1) and C(c)).
    pub uma: MemoryQueue,
    /// The distinct core counts n ≥ c the δ fit used.
    pub cores_used: Vec<u32>,
    /// The regression line: y = C(n), x = r(n)·(n − c)/n when every point had r(n) (slope δ),
    /// else x = (n − c)/n (slope δ·r); its intercept estimates C(c).
    pub fit: Line,
    /// r: the mean of the measured r(n) over the δ points; None without counters.
    pub llc_misses: Option<f64>,
    /// δ, extra work per remote memory request; None without r(n).
    pub delta: Option<f64>,
    /// δ·r (always known): the extra work if every request were remote.
    pub delta_times_r: f64,
    /// Core counts (n ≥ c) whose point had no r(n).
    pub missing_llc_misses_at: Vec<u32>,
}

impl NumaDelta {
    /// Why this fit must not be reported: its UMA part failed, δ·r < 0 (remote requests
    /// cheaper than local ones), or an extrapolated ω < 0.
    pub fn failure(&self) -> Option<String> {
        if let Some(f) = self.uma.failure() {
            return Some(f);
        }
        if self.delta_times_r < 0.0 {
            return Some(format!(
                "the fit failed: δ·r = {:.3e} < 0 (remote memory requests cannot cost less than local ones: noise)",
                self.delta_times_r
            ));
        }
        EXTRAPOLATED_CORES.iter().find_map(|&n| {
            self.predicted_omega(n).filter(|w| *w < 0.0).map(|w| {
                format!("the fit failed: it extrapolates ω({n}) = {w:+.3} < 0 (work shrinking with cores)")
            })
        })
    }

    /// Modelled C(n): eq. 3.6 (the UMA fit) for n ≤ c, eq. 3.7 for n > c. None when n = 0 or
    /// the UMA queue is not stable at n.
    pub fn predicted_work(&self, cores: u32) -> Option<f64> {
        let c = self.cores_per_socket;
        if cores == 0 {
            return None;
        }
        if cores <= c {
            return self.uma.predicted_work(cores);
        }
        let n = f64::from(cores);
        let remote = (n - f64::from(c)) / n;
        Some(self.fit.intercept + self.delta_times_r * remote)
    }

    /// Modelled ω(m, n) = Ĉ(n)/Ĉ(1) − 1 with Ĉ(1) from the UMA fit.
    pub fn predicted_omega(&self, cores: u32) -> Option<f64> {
        Some(self.predicted_work(cores)? / self.uma.predicted_work(1)? - 1.0)
    }
}

/// Eq. 3.7: δ for a NUMA machine with `cores_per_socket` = c cores per socket, from C(1),
/// C(c) and C(m), m > c (more points allowed). μ and L come from the points with n ≤ c
/// ([`memory_queue`]); δ from the points with n ≥ c by regression of C(n) on r(n)·(n − c)/n
/// (listing 3.1).
pub fn numa_delta(points: &[WorkPoint], cores_per_socket: u32) -> Result<NumaDelta, ModelError> {
    let c = cores_per_socket;
    if c == 0 {
        return Err(ModelError::InvalidInput {
            field: "cores_per_socket",
            value: 0.0,
            requirement: "at least 1",
        });
    }
    check_points(points)?;
    let have = distinct_cores(points);
    let has_c = have.contains(&c);
    let has_above = have.iter().any(|&n| n > c);
    let below = have.iter().filter(|&&n| n <= c).count();
    if !has_c || !has_above || below < 2 {
        return Err(ModelError::TooFewConfigurations {
            model: "numa_delta (eq. 3.7)",
            needs: format!("C(1), C(c) and C(m) with c={c} cores per socket and m > c"),
            have,
        });
    }
    let uma_points: Vec<WorkPoint> = points.iter().copied().filter(|p| p.cores <= c).collect();
    let uma = memory_queue(&uma_points)?;
    let numa_points: Vec<WorkPoint> = points.iter().copied().filter(|p| p.cores >= c).collect();
    let cores_used = distinct_cores(&numa_points);
    let missing: Vec<u32> = {
        let mut v: Vec<u32> = numa_points
            .iter()
            .filter(|p| p.llc_misses.is_none())
            .map(|p| p.cores)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let remote = |n: u32| (f64::from(n) - f64::from(c)) / f64::from(n);
    let degenerate = || ModelError::TooFewConfigurations {
        model: "numa_delta (eq. 3.7)",
        needs: format!("C(c) and C(m) with c={c} and m > c giving different x"),
        have: cores_used.clone(),
    };
    if missing.is_empty() {
        let xy: Vec<(f64, f64)> = numa_points
            .iter()
            .map(|p| (p.llc_misses.unwrap_or(0.0) * remote(p.cores), p.work))
            .collect();
        let fit = line_best_fit(&xy).ok_or_else(degenerate)?;
        let r_mean =
            numa_points.iter().filter_map(|p| p.llc_misses).sum::<f64>() / numa_points.len() as f64;
        Ok(NumaDelta {
            cores_per_socket: c,
            uma,
            cores_used,
            fit,
            llc_misses: Some(r_mean),
            delta: Some(fit.slope),
            delta_times_r: fit.slope * r_mean,
            missing_llc_misses_at: missing,
        })
    } else {
        let xy: Vec<(f64, f64)> = numa_points
            .iter()
            .map(|p| (remote(p.cores), p.work))
            .collect();
        let fit = line_best_fit(&xy).ok_or_else(degenerate)?;
        Ok(NumaDelta {
            cores_per_socket: c,
            uma,
            cores_used,
            fit,
            llc_misses: None,
            delta: None,
            delta_times_r: fit.slope,
            missing_llc_misses_at: missing,
        })
    }
}

#[cfg(test)]
mod tests;
