//! Constructed inputs whose answers are worked out by hand (in the comments).

use super::*;

/// |a − b| ≤ 1e-12·max(1, |b|).
#[track_caller]
fn close(a: f64, b: f64) {
    let tol = 1e-12 * b.abs().max(1.0);
    assert!((a - b).abs() <= tol, "{a} != {b} (tolerance {tol})");
}

#[track_caller]
fn close_opt(a: Option<f64>, b: f64) {
    close(a.expect("expected a value, got None"), b);
}

const X: u64 = 1_000_000; // one time quantum x of the thesis example, in ns

// ---------------------------------------------------------------------------------------------
// 1. Listings 3.3 and 3.4
// ---------------------------------------------------------------------------------------------

/// Thesis §3.1.2: four threads on one core, ΔT = 32x; interval 1 gives thread service
/// 8x, 7x, 7x, 8x (τ = 30x, ΔT_cp = 8x), interval 2 gives 7x, 8x, 6x, 4x (τ = 25x,
/// ΔT_cp = 8x): A(4, 1) = (30x + 25x)/(8x + 8x) = 55/16 = 3.4375, exactly representable.
fn thesis_intervals() -> Vec<Vec<u64>> {
    vec![
        vec![8 * X, 7 * X, 7 * X, 8 * X],
        vec![7 * X, 8 * X, 6 * X, 4 * X],
    ]
}

#[test]
fn measured_active_threads_thesis_example_is_3_4375() {
    assert_eq!(measured_active_threads(&thesis_intervals()), Some(3.4375));
}

#[test]
fn measured_active_threads_skips_idle_intervals() {
    // An interval where every thread got 0 (and one with no threads at all) changes nothing.
    let mut iv = thesis_intervals();
    iv.insert(1, vec![0, 0, 0, 0]);
    iv.push(vec![]);
    assert_eq!(measured_active_threads(&iv), Some(3.4375));
}

#[test]
fn measured_active_threads_none_without_service() {
    assert_eq!(measured_active_threads(&[]), None);
    assert_eq!(measured_active_threads(&[vec![0, 0], vec![0]]), None);
}

#[test]
fn measured_active_threads_weights_by_critical_path() {
    // Interval 1: [10, 10] → τ = 20, cp = 10 (A = 2). Interval 2: [30, 0] → τ = 30, cp = 30
    // (A = 1). Weighted: 50/40 = 1.25 (the unweighted mean of 2 and 1 would be 1.5).
    assert_eq!(
        measured_active_threads(&[vec![10, 10], vec![30, 0]]),
        Some(1.25)
    );
}

#[test]
fn modelled_active_threads_thesis_example() {
    let iv = thesis_intervals();
    // Per interval A(m, ∞, t): 30x/8x = 3.75 and 25x/8x = 3.125; numerator Σs = 55x.
    // cores = 1: min(1, A) = 1 → denominator 30x + 25x = 55x → A = 1.
    assert_eq!(modelled_active_threads(&iv, 1), Some(1.0));
    // cores = 2: denominator 30x/2 + 25x/2 = 27.5x → 55/27.5 = 2.
    assert_eq!(modelled_active_threads(&iv, 2), Some(2.0));
    // cores = 3: denominator 30x/3 + 25x/3 = 55x/3 → 3.
    close_opt(modelled_active_threads(&iv, 3), 3.0);
    // cores = 4: both A(t) < 4 → denominator 8x + 8x = 16x → 55/16 = 3.4375 (= listing 3.3).
    assert_eq!(modelled_active_threads(&iv, 4), Some(3.4375));
    assert_eq!(modelled_active_threads(&iv, 64), Some(3.4375));
    assert_eq!(modelled_active_threads(&iv, 0), None);
    assert_eq!(modelled_active_threads(&[vec![0, 0]], 2), None);
}

#[test]
fn modelled_active_threads_mixed_intervals() {
    // cores = 3. Interval [3, 3, 0, 0]: s = 6, cp = 3, A = 2 ≤ 3 → contributes cp = 3.
    // Interval [8, 7, 7, 8]: s = 30, cp = 8, A = 3.75 > 3 → contributes 30/3 = 10.
    // A = (6 + 30)/(3 + 10) = 36/13.
    let iv = vec![vec![3, 3, 0, 0], vec![8, 7, 7, 8]];
    close_opt(modelled_active_threads(&iv, 3), 36.0 / 13.0);
}

// ---------------------------------------------------------------------------------------------
// 2. Listing 3.1
// ---------------------------------------------------------------------------------------------

#[test]
fn line_best_fit_exact_line() {
    // y = 2x + 1 through x = 0..3.
    let pts = [(0.0, 1.0), (1.0, 3.0), (2.0, 5.0), (3.0, 7.0)];
    assert_eq!(
        line_best_fit(&pts),
        Some(Line {
            slope: 2.0,
            intercept: 1.0
        })
    );
    // Two points: the line through them.
    let l = line_best_fit(&[(1.0, 10.0), (5.0, 2.0)]).unwrap();
    close(l.slope, -2.0);
    close(l.intercept, 12.0);
    close(l.at(3.0), 6.0);
}

#[test]
fn line_best_fit_noisy_points() {
    // (0,1), (1,3), (2,2), (3,5): Σx = 6, Σy = 11, Σx² = 14, Σxy = 0 + 3 + 4 + 15 = 22,
    // x̄ = 1.5, ȳ = 2.75. Listing 3.1: slope = (22 − 6·2.75)/(14 − 6·1.5) = 5.5/5 = 1.1,
    // intercept = 2.75 − 1.1·1.5 = 1.1.
    let l = line_best_fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 2.0), (3.0, 5.0)]).unwrap();
    close(l.slope, 1.1);
    close(l.intercept, 1.1);
}

#[test]
fn line_best_fit_degenerate() {
    assert_eq!(line_best_fit(&[]), None);
    assert_eq!(line_best_fit(&[(1.0, 2.0)]), None);
    assert_eq!(line_best_fit(&[(2.0, 1.0), (2.0, 5.0), (2.0, 3.0)]), None);
    assert_eq!(line_best_fit(&[(0.0, 1.0), (f64::NAN, 2.0)]), None);
    assert_eq!(line_best_fit(&[(0.0, 1.0), (1.0, f64::INFINITY)]), None);
}

// ---------------------------------------------------------------------------------------------
// 3. The scaling model
// ---------------------------------------------------------------------------------------------

const S: f64 = 1e9; // ns per second

/// m = 2 threads: one core, C(1) = 100e9 cycles, T(1) = 18 s, τ(1) = 17 s, r(1) = 0.8e9.
fn baseline() -> Configuration {
    Configuration {
        threads: 2,
        cores: 1,
        elapsed_ns: 18.0 * S,
        service_ns: 17.0 * S,
        active_threads: 1.0,
        waiting_threads: 0.0,
        work: 100e9,
        unit: WorkUnit::Cycles,
        llc_misses: Some(0.8e9),
        llc_references: Some(3e9),
        lock_wait_ns: None,
    }
}

/// m = 2 threads on n = 2 cores: C(2) = 125e9, A = 1.8, T(2) = 10 s, τ(2) = 18.7 s,
/// r(2) = 1e9 misses of 4e9 references.
fn target() -> Configuration {
    Configuration {
        threads: 2,
        cores: 2,
        elapsed_ns: 10.0 * S,
        service_ns: 18.7 * S,
        active_threads: 1.8,
        waiting_threads: 0.0,
        work: 125e9,
        unit: WorkUnit::Cycles,
        llc_misses: Some(1e9),
        llc_references: Some(4e9),
        lock_wait_ns: None,
    }
}

#[test]
fn scaling_model_hand_computed() {
    let m = scaling_model(&baseline(), &target()).unwrap();
    assert_eq!((m.threads, m.cores, m.unit), (2, 2, WorkUnit::Cycles));
    assert_eq!((m.baseline_work, m.work), (100e9, 125e9));
    assert_eq!(m.active_threads, 1.8);
    // Eq. 3.5: ω = 125/100 − 1 = 0.25.
    close(m.omega, 0.25);
    // Eq. 3.2: P = 1.8/1.25 = 1.44. Eq. 3.3: R = 1.8 − 1.44 = 0.36. Eq. 3.8: D = 2 − 1.8 = 0.2.
    // Eq. 3.4: S = 1.8/1.25 = 1.44.
    close(m.useful_active_threads, 1.44);
    close(m.memory_loss_threads, 0.36);
    close(m.dependency_loss_threads, 0.2);
    close(m.predicted_speedup, 1.44);
    // T(1)/T(2) = 18/10 = 1.8.
    close(m.measured_speedup, 1.8);
    assert_eq!((m.baseline_elapsed_ns, m.elapsed_ns), (18.0 * S, 10.0 * S));
    // Table 4.5 (contend's reading): R·T(n) = 0.36·10 s = 3.6 thread-s, D·T(n) = 2 thread-s;
    // as wall-clock shares R/m·T(n) = 1.8 s, D/m·T(n) = 1 s.
    close(m.memory_loss_thread_ns, 3.6 * S);
    close(m.dependency_loss_thread_ns, 2.0 * S);
    close(m.memory_loss_wall_ns, 1.8 * S);
    close(m.dependency_loss_wall_ns, 1.0 * S);
    // Table 4.8: τ(1) = 17 s, τ(2) = 18.7 s, +10 %; ideal = 17/2 = 8.5 s, actual = T(2) = 10 s,
    // (10 − 8.5)/8.5 = +300/17 %.
    assert_eq!((m.baseline_service_ns, m.service_ns), (17.0 * S, 18.7 * S));
    close(m.service_change_pct, 10.0);
    close(m.ideal_running_ns, 8.5 * S);
    assert_eq!(m.actual_running_ns, 10.0 * S);
    close(m.running_change_pct, 300.0 / 17.0);
    // Table 4.1: CCM = 125e9/1e9 = 125 cycles per miss; miss rate = 1e9/10 s = 1e8 /s;
    // miss ratio 1e9/4e9 = 0.25; table 4.3: misses (1e9 − 0.8e9)/0.8e9 = +25 %.
    close_opt(m.cycles_per_llc_miss, 125.0);
    close_opt(m.llc_misses_per_s, 1e8);
    close_opt(m.llc_miss_ratio, 0.25);
    close_opt(m.llc_misses_change_pct, 25.0);
    // No lock data: no table 4.11.
    assert_eq!(m.locks, None);
}

#[test]
fn scaling_model_fewer_cores_than_threads() {
    // m = 4 on n = 2: ideal running time is τ(1)/min(m, n) = 17/2 s; D = m − A = 4 − 1.9 = 2.1
    // includes the two threads that have no core.
    let mut b = baseline();
    b.threads = 4;
    let mut t = target();
    t.threads = 4;
    t.active_threads = 1.9;
    let m = scaling_model(&b, &t).unwrap();
    close(m.ideal_running_ns, 8.5 * S);
    close(m.dependency_loss_threads, 2.1);
    // Wall-clock share D/m·T(n) = 2.1/4·10 s = 5.25 s.
    close(m.dependency_loss_wall_ns, 5.25 * S);
}

#[test]
fn scaling_model_lock_explanation() {
    // D·T(n) = 0.2 · 10 s = 2 thread-s.
    let mut t = target();
    // Lock wait 1.5 thread-s: explained 1.5 (75 %), unexplained 0.5.
    t.lock_wait_ns = Some(1.5 * S);
    let l = scaling_model(&baseline(), &t).unwrap().locks.unwrap();
    close(l.dependency_loss_thread_ns, 2.0 * S);
    assert_eq!(l.lock_wait_ns, 1.5 * S);
    close(l.explained_thread_ns, 1.5 * S);
    close_opt(l.explained_pct, 75.0);
    close(l.unexplained_thread_ns, 0.5 * S);
    assert!(!l.lock_wait_exceeds_dependency_loss);

    // Lock wait 2.5 thread-s > D·T(n): explained is capped at 2 (100 %), unexplained stays
    // signed at −0.5 thread-s and the flag says so.
    t.lock_wait_ns = Some(2.5 * S);
    let l = scaling_model(&baseline(), &t).unwrap().locks.unwrap();
    close(l.explained_thread_ns, 2.0 * S);
    close_opt(l.explained_pct, 100.0);
    close(l.unexplained_thread_ns, -0.5 * S);
    assert!(l.lock_wait_exceeds_dependency_loss);

    // No dependency loss at all (A = m): nothing to explain, share is None, not 0 or NaN.
    t.active_threads = 2.0;
    t.lock_wait_ns = Some(0.0);
    let l = scaling_model(&baseline(), &t).unwrap().locks.unwrap();
    assert_eq!(l.explained_pct, None);
    assert_eq!(l.explained_thread_ns, 0.0);
}

#[test]
fn scaling_model_on_cpu_time_has_no_counter_figures() {
    // Without a PMU the work is on-CPU time and there are no LLC counts: CCM, miss rate,
    // miss ratio and miss change are None, never 0.
    let mut b = baseline();
    let mut t = target();
    for c in [&mut b, &mut t] {
        c.unit = WorkUnit::OnCpuNs;
        c.llc_misses = None;
        c.llc_references = None;
    }
    b.work = 17.0 * S;
    t.work = 18.7 * S;
    let m = scaling_model(&b, &t).unwrap();
    assert_eq!(m.unit, WorkUnit::OnCpuNs);
    close(m.omega, 0.1);
    assert_eq!(m.cycles_per_llc_miss, None);
    assert_eq!(m.llc_misses_per_s, None);
    assert_eq!(m.llc_miss_ratio, None);
    assert_eq!(m.llc_misses_change_pct, None);

    // Misses counted but work in on-CPU ns: CCM (cycles per miss) is still None; the miss rate
    // needs no cycles and is given: 1e9 misses / 10 s.
    t.llc_misses = Some(1e9);
    let m = scaling_model(&b, &t).unwrap();
    assert_eq!(m.cycles_per_llc_miss, None);
    close_opt(m.llc_misses_per_s, 1e8);
}

#[test]
fn scaling_model_keeps_negative_omega() {
    // The thesis's EP at m = 2: ω = −0.008. C(2) = 99.2e9 → ω = −0.008, P = 1.8/0.992,
    // R = 1.8 − 1.8/0.992 < 0 (kept, not clamped).
    let mut t = target();
    t.work = 99.2e9;
    let m = scaling_model(&baseline(), &t).unwrap();
    close(m.omega, -0.008);
    close(m.useful_active_threads, 1.8 / 0.992);
    close(m.memory_loss_threads, 1.8 - 1.8 / 0.992);
    assert!(m.memory_loss_threads < 0.0);
    assert!(m.memory_loss_thread_ns < 0.0);
}

#[test]
fn scaling_model_errors() {
    let mut t = target();
    t.threads = 4;
    let e = scaling_model(&baseline(), &t).unwrap_err();
    assert_eq!(
        e,
        ModelError::ThreadsMismatch {
            baseline: 2,
            target: 4
        }
    );
    assert!(e.to_string().contains("baseline m=2, target m=4"), "{e}");

    let mut b = baseline();
    b.cores = 2;
    let e = scaling_model(&b, &target()).unwrap_err();
    assert_eq!(e, ModelError::BaselineNotOneCore { cores: 2 });
    assert!(e.to_string().contains("one core (n=1)"), "{e}");

    let mut b = baseline();
    b.work = 0.0;
    let e = scaling_model(&b, &target()).unwrap_err();
    assert_eq!(
        e,
        ModelError::NonPositiveWork {
            cores: 1,
            work: 0.0
        }
    );
    assert_eq!(e.to_string(), "work C(1) is 0: it must be greater than 0");

    let mut t = target();
    t.work = 0.0;
    assert_eq!(
        scaling_model(&baseline(), &t).unwrap_err(),
        ModelError::NonPositiveWork {
            cores: 2,
            work: 0.0
        }
    );

    let mut t = target();
    t.unit = WorkUnit::OnCpuNs;
    let e = scaling_model(&baseline(), &t).unwrap_err();
    assert_eq!(
        e,
        ModelError::UnitMismatch {
            baseline: WorkUnit::Cycles,
            target: WorkUnit::OnCpuNs
        }
    );
    assert!(e.to_string().contains("cycles") && e.to_string().contains("on-CPU ns"));

    let mut t = target();
    t.elapsed_ns = 0.0;
    assert!(matches!(
        scaling_model(&baseline(), &t),
        Err(ModelError::InvalidInput {
            field: "target.elapsed_ns",
            ..
        })
    ));

    let mut t = target();
    t.lock_wait_ns = Some(f64::NAN);
    assert!(matches!(
        scaling_model(&baseline(), &t),
        Err(ModelError::InvalidInput {
            field: "target.lock_wait_ns",
            ..
        })
    ));

    let mut b = baseline();
    let mut t = target();
    b.threads = 0;
    t.threads = 0;
    assert!(matches!(
        scaling_model(&b, &t),
        Err(ModelError::InvalidInput {
            field: "threads",
            ..
        })
    ));
}

// ---------------------------------------------------------------------------------------------
// 4. Eq. 3.6 (μ, L) and eq. 3.7 (δ)
// ---------------------------------------------------------------------------------------------

const MU: f64 = 0.02; // requests per cycle
const L: f64 = 0.001; // requests per cycle per core
const R: f64 = 1e6; // LLC misses

/// Eq. 3.6: C(n) = r/(μ − n·L).
fn c_of(n: u32, r: f64) -> f64 {
    r / (MU - f64::from(n) * L)
}

fn point(n: u32, r: Option<f64>) -> WorkPoint {
    WorkPoint {
        cores: n,
        work: c_of(n, r.unwrap_or(R)),
        unit: WorkUnit::Cycles,
        llc_misses: r,
    }
}

#[track_caller]
fn rel(a: f64, b: f64, tol: f64) {
    assert!(
        ((a - b) / b).abs() <= tol,
        "{a} != {b} (relative tolerance {tol})"
    );
}

#[test]
fn memory_queue_recovers_mu_and_l() {
    // C(1) = 1e6/0.019, C(8) = 1e6/0.012: r/C(n) = 0.02 − 0.001·n exactly.
    let q = memory_queue(&[point(1, Some(R)), point(8, Some(R))]).unwrap();
    assert_eq!(q.cores_used, vec![1, 8]);
    rel(q.mu.unwrap(), MU, 1e-12);
    rel(q.l.unwrap(), L, 1e-12);
    rel(q.lambda(8).unwrap(), 8.0 * L, 1e-12);
    rel(q.llc_misses.unwrap(), R, 1e-12);
    rel(q.mu_over_r, MU / R, 1e-12);
    rel(q.l_over_r, L / R, 1e-12);
    assert!(q.missing_llc_misses_at.is_empty());
    // Modelled C(n) for unmeasured n, and ω(m, 4) = C(4)/C(1) − 1 = 0.019/0.016 − 1.
    rel(q.predicted_work(4).unwrap(), c_of(4, R), 1e-12);
    rel(q.predicted_omega(4).unwrap(), 0.019 / 0.016 - 1.0, 1e-10);
    // μ = 20·L: the queue saturates at n = 20; no finite prediction there or beyond.
    assert_eq!(q.predicted_work(20), None);
    assert_eq!(q.predicted_work(25), None);
    assert_eq!(q.predicted_work(0), None);

    // Three points on the curve: the regression is still exact.
    let q = memory_queue(&[point(1, Some(R)), point(4, Some(R)), point(8, Some(R))]).unwrap();
    rel(q.mu.unwrap(), MU, 1e-12);
    rel(q.l.unwrap(), L, 1e-12);
}

#[test]
fn memory_queue_with_varying_misses() {
    // r(n) = 1e6·(1 + 0.1n) and C(n) = r(n)/(μ − nL): r(n)/C(n) is still μ − nL exactly, so
    // μ and L are recovered though r changes with n.
    let pts: Vec<WorkPoint> = [1, 2, 8]
        .iter()
        .map(|&n| point(n, Some(R * (1.0 + 0.1 * f64::from(n)))))
        .collect();
    let q = memory_queue(&pts).unwrap();
    rel(q.mu.unwrap(), MU, 1e-12);
    rel(q.l.unwrap(), L, 1e-12);
}

#[test]
fn memory_queue_without_counters_gives_ratios() {
    // No r(n): 1/C(n) = μ/r − (L/r)·n. μ and L are unknown; μ/r, L/r and the predictions are.
    let q = memory_queue(&[point(1, None), point(8, None)]).unwrap();
    assert_eq!((q.mu, q.l, q.llc_misses), (None, None, None));
    assert_eq!(q.lambda(8), None);
    assert_eq!(q.missing_llc_misses_at, vec![1, 8]);
    rel(q.mu_over_r, MU / R, 1e-12);
    rel(q.l_over_r, L / R, 1e-12);
    rel(q.predicted_work(4).unwrap(), c_of(4, R), 1e-12);

    // One point without r is enough to fall back, and it is named.
    let q = memory_queue(&[point(1, Some(R)), point(8, None)]).unwrap();
    assert_eq!(q.mu, None);
    assert_eq!(q.missing_llc_misses_at, vec![8]);
}

#[test]
fn memory_queue_too_few_configurations() {
    let e = memory_queue(&[point(1, Some(R))]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "memory_queue (eq. 3.6) needs C(n) at two or more core counts, e.g. C(1) and C(m): \
         have only n=1"
    );
    // Repeats of the same n do not make a regression.
    let e = memory_queue(&[point(1, Some(R)), point(1, Some(R))]).unwrap_err();
    assert!(matches!(e, ModelError::TooFewConfigurations { ref have, .. } if have == &[1]));
    let e = memory_queue(&[]).unwrap_err();
    assert!(e.to_string().ends_with("have none"), "{e}");
    // Zero work and mixed units are refused.
    let mut p = point(8, Some(R));
    p.work = 0.0;
    assert_eq!(
        memory_queue(&[point(1, Some(R)), p]).unwrap_err(),
        ModelError::NonPositiveWork {
            cores: 8,
            work: 0.0
        }
    );
    let mut p = point(8, Some(R));
    p.unit = WorkUnit::OnCpuNs;
    assert!(matches!(
        memory_queue(&[point(1, Some(R)), p]),
        Err(ModelError::UnitMismatch { .. })
    ));
}

const C: u32 = 4; // cores per socket
const DELTA: f64 = 50.0; // extra cycles per remote request

/// Eq. 3.7 as read here: C(n) = C(c) + δ·r·(n − c)/n for n > c, with C(c) from eq. 3.6.
fn numa_points(r: Option<f64>) -> Vec<WorkPoint> {
    // C(4) = 1e6/0.016 = 62.5e6. C(6) = 62.5e6 + 50·1e6·2/6. C(8) = 62.5e6 + 50·1e6·4/8
    // = 87.5e6.
    let numa = |n: u32| WorkPoint {
        cores: n,
        work: c_of(C, R) + DELTA * R * (f64::from(n - C) / f64::from(n)),
        unit: WorkUnit::Cycles,
        llc_misses: r,
    };
    vec![point(1, r), point(C, r), numa(6), numa(8)]
}

#[test]
fn numa_delta_recovers_delta() {
    let d = numa_delta(&numa_points(Some(R)), C).unwrap();
    assert_eq!(d.cores_per_socket, C);
    assert_eq!(d.cores_used, vec![4, 6, 8]);
    assert_eq!(d.uma.cores_used, vec![1, 4]);
    rel(d.uma.mu.unwrap(), MU, 1e-12);
    rel(d.uma.l.unwrap(), L, 1e-12);
    rel(d.delta.unwrap(), DELTA, 1e-9);
    rel(d.delta_times_r, DELTA * R, 1e-9);
    // The fit's intercept is C(c) = 62.5e6.
    rel(d.fit.intercept, 62.5e6, 1e-12);
    // C(16) = 62.5e6 + 50e6·12/16 = 100e6; ω(16) = 100e6/(1e6/0.019) − 1 = 0.9.
    rel(d.predicted_work(16).unwrap(), 100e6, 1e-12);
    rel(d.predicted_omega(16).unwrap(), 0.9, 1e-10);
    // n ≤ c goes through eq. 3.6.
    rel(d.predicted_work(2).unwrap(), c_of(2, R), 1e-12);
    assert_eq!(d.predicted_work(0), None);
}

#[test]
fn numa_delta_without_counters_gives_delta_times_r() {
    let d = numa_delta(&numa_points(None), C).unwrap();
    assert_eq!(d.delta, None);
    assert_eq!(d.llc_misses, None);
    assert_eq!(d.missing_llc_misses_at, vec![4, 6, 8]);
    rel(d.delta_times_r, DELTA * R, 1e-9);
    rel(d.predicted_work(16).unwrap(), 100e6, 1e-12);
}

#[test]
fn numa_delta_too_few_configurations() {
    // Only n = 1 and n = c: no C(m) with m > c.
    let pts = &numa_points(Some(R))[..2];
    let e = numa_delta(pts, C).unwrap_err();
    assert_eq!(
        e.to_string(),
        "numa_delta (eq. 3.7) needs C(1), C(c) and C(m) with c=4 cores per socket and m > c: \
         have only n=1, n=4"
    );
    // No C(c).
    let pts: Vec<WorkPoint> = numa_points(Some(R))
        .into_iter()
        .filter(|p| p.cores != C)
        .collect();
    assert!(matches!(
        numa_delta(&pts, C),
        Err(ModelError::TooFewConfigurations { .. })
    ));
    // No point below c for μ and L.
    let pts = &numa_points(Some(R))[1..];
    assert!(matches!(
        numa_delta(pts, C),
        Err(ModelError::TooFewConfigurations { .. })
    ));
    assert!(matches!(
        numa_delta(&numa_points(Some(R)), 0),
        Err(ModelError::InvalidInput { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// 5. Ground-truth shapes
// ---------------------------------------------------------------------------------------------

const INTERVAL: u64 = 10_000_000; // 10 ms sampling interval

fn on_two_cores(active_threads: f64) -> (Configuration, Configuration) {
    // Same work on 1 and 2 cores (ω = 0), so every loss is dependency loss.
    let b = Configuration {
        threads: 2,
        cores: 1,
        elapsed_ns: 2.0 * S,
        service_ns: 2.0 * S,
        active_threads: 1.0,
        waiting_threads: 0.0,
        work: 2.0 * S,
        unit: WorkUnit::OnCpuNs,
        llc_misses: None,
        llc_references: None,
        lock_wait_ns: None,
    };
    let t = Configuration {
        cores: 2,
        elapsed_ns: 2.0 * S / active_threads,
        active_threads,
        ..b.clone()
    };
    (b, t)
}

#[test]
fn independent_threads_on_two_cores_are_both_active() {
    // Each of two threads gets the full interval in every interval.
    let iv = vec![vec![INTERVAL, INTERVAL]; 100];
    let a = measured_active_threads(&iv).unwrap();
    assert_eq!(a, 2.0);
    let (b, t) = on_two_cores(a);
    let m = scaling_model(&b, &t).unwrap();
    close(m.dependency_loss_threads, 0.0);
    close(m.memory_loss_threads, 0.0);
    close(m.predicted_speedup, 2.0);
    close(m.measured_speedup, 2.0);
    // The same threads sampled on one core (half an interval each) model to 2 on two cores.
    let one_core = vec![vec![INTERVAL / 2, INTERVAL / 2]; 100];
    assert_eq!(modelled_active_threads(&one_core, 2), Some(2.0));
}

#[test]
fn serialised_threads_on_two_cores_are_one_active() {
    // Two threads take turns: one gets the full interval, the other nothing.
    let iv: Vec<Vec<u64>> = (0..100)
        .map(|k| {
            if k % 2 == 0 {
                vec![INTERVAL, 0]
            } else {
                vec![0, INTERVAL]
            }
        })
        .collect();
    let a = measured_active_threads(&iv).unwrap();
    assert_eq!(a, 1.0);
    let (b, mut t) = on_two_cores(a);
    // All of D·T(n) = 1·2 s is lock wait here: fully explained.
    t.lock_wait_ns = Some(2.0 * S);
    let m = scaling_model(&b, &t).unwrap();
    close(m.dependency_loss_threads, 1.0);
    close(m.memory_loss_threads, 0.0);
    close(m.predicted_speedup, 1.0);
    let l = m.locks.unwrap();
    close_opt(l.explained_pct, 100.0);
    close(l.unexplained_thread_ns, 0.0);
    // Modelled from the same samples for two cores: still 1 (the samples never overlap).
    assert_eq!(modelled_active_threads(&iv, 2), Some(1.0));
}

#[test]
fn the_loss_splits_three_ways_when_threads_wait_for_a_cpu() {
    // A = 1.8 of which W = 0.3 waited for a CPU: A_run = 1.5, ω = 0.25, P = 1.2, R = 0.3,
    // D = 0.2, loss m − P = 0.8 = R + W + D.
    let t = Configuration {
        waiting_threads: 0.3,
        ..target()
    };
    let m = scaling_model(&baseline(), &t).unwrap();
    close_opt(m.running_threads, 1.5);
    close_opt(m.waiting_threads, 0.3);
    close(m.useful_active_threads, 1.2);
    close(m.memory_loss_threads, 0.3);
    close(m.dependency_loss_threads, 0.2);
    close(m.predicted_speedup, 1.2);
    close(
        m.memory_loss_threads + m.waiting_threads.unwrap() + m.dependency_loss_threads,
        2.0 - m.useful_active_threads,
    );
}

#[test]
fn fits_with_negative_parameters_or_omega_are_refused() {
    // C(1) = 1.0, C(2) = 0.8: work falling with cores (time-slicing inflated C(1)).
    let falling = [
        WorkPoint {
            cores: 1,
            work: 1.0,
            unit: WorkUnit::OnCpuNs,
            llc_misses: None,
        },
        WorkPoint {
            cores: 2,
            work: 0.8,
            unit: WorkUnit::OnCpuNs,
            llc_misses: None,
        },
    ];
    let q = memory_queue(&falling).unwrap();
    let why = q.failure().unwrap();
    assert!(why.starts_with("the fit failed: L/r = "), "{why}");
    // A queue that fits: no failure.
    let rising = [
        point(1, Some(1e6)),
        point(2, Some(1e6)),
        point(4, Some(1e6)),
    ];
    assert_eq!(memory_queue(&rising).unwrap().failure(), None);
    assert_eq!(numa_delta(&numa_points(None), C).unwrap().failure(), None);
    // δ·r < 0 on NUMA points (the second socket's C(6), C(8) below C(4)): refused.
    let mut points = numa_points(None);
    points[2].work = points[1].work * 0.9;
    points[3].work = points[1].work * 0.8;
    let d = numa_delta(&points, C).unwrap();
    let why = d.failure().unwrap();
    assert!(why.starts_with("the fit failed: δ·r = "), "{why}");
}
