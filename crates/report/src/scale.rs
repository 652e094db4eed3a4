//! `contend scale`'s output: the measured configurations with their spread, and the Tudor &
//! Teo model of each thread count (thesis tables 4.5, 4.8 and 4.11), as text and as a
//! speed-up plot (SVG).

use crate::table::new_table;
use analysis::activity::{ScalingModel, WorkUnit};
use analysis::stats::Spread;
use std::fmt::Write;

/// One configuration's figures over its repeats.
pub struct ConfigurationRow<'a> {
    pub threads: u32,
    pub cores: u32,
    pub cpus: &'a [u32],
    pub elapsed_ns: Spread,
    pub work: Spread,
    pub active_threads: Spread,
    pub waiting_threads: Spread,
    /// System (kernel) CPU time, when the work is user time: shown beside it, not in ω.
    pub system_ns: Option<Spread>,
    /// Listing 3.4: A these runs' samples predict for m cores.
    pub modelled_active_threads: Option<f64>,
}

/// What the renderer needs of a scale result.
pub struct ScaleView<'a> {
    pub command: &'a [String],
    pub repeat: u32,
    pub unit: WorkUnit,
    pub configurations: Vec<ConfigurationRow<'a>>,
    pub models: Vec<&'a ScalingModel>,
    /// The memory-queue fit (eq. 3.6) per thread count, where there were enough core counts.
    pub queues: Vec<(u32, &'a analysis::activity::MemoryQueue)>,
    pub missing: Vec<&'a str>,
    pub notes: Vec<&'a str>,
    /// The verdicts with their intervals (none in files written before them).
    pub verdicts: Vec<&'a analysis::split::Verdict>,
    /// Complete rounds counted, and why they stopped there.
    pub rounds: u32,
    pub stopped: &'a str,
}

fn s(ns: f64) -> String {
    format!("{:.3}", ns / 1e9)
}

fn pct(v: f64) -> String {
    format!("{v:+.1}")
}

/// A verdict in words: how the speed-up lost splits between the two causes.
pub fn verdict(m: &ScalingModel) -> String {
    let ideal = f64::from(m.threads.min(m.cores));
    // Negative losses (noise, or less work on n cores) are shown, but shares are of the
    // positive parts.
    let (r, d) = (m.memory_loss_threads, m.dependency_loss_threads);
    let lost = r.max(0.0) + d.max(0.0);
    let mut text = format!(
        "{} threads on {} cores: speed-up {:.2} measured, {:.2} predicted (A/(1+ω)), {:.0} ideal.",
        m.threads, m.cores, m.measured_speedup, m.predicted_speedup, ideal
    );
    if lost > 0.05 {
        let part = |x: f64, what: &str, symbol: &str| {
            if x > 0.0 {
                format!("{x:.2} ({:.0} %) to {what} ({symbol})", 100.0 * x / lost)
            } else {
                format!("none to {what} ({symbol} = {x:+.2})")
            }
        };
        let _ = write!(
            text,
            " Of the {lost:.2} threads' worth of speed-up lost: {} with ω = {:+.3}; {}.",
            part(r, "memory/hardware contention", "R = A − P"),
            m.omega,
            part(d, "waiting on other threads or resources", "D = m − A"),
        );
        if let Some(l) = &m.locks {
            match l.explained_pct {
                Some(p) => {
                    let _ = write!(
                        text,
                        " Lock waits explain {p:.0} % of the waiting ({:.3} of {:.3} thread-s).",
                        l.lock_wait_ns / 1e9,
                        l.dependency_loss_thread_ns / 1e9
                    );
                }
                None => {
                    let _ = write!(text, " Lock waits: {:.3} thread-s.", l.lock_wait_ns / 1e9);
                }
            }
        }
    } else {
        text.push_str(" No measurable loss.");
    }
    text
}

/// With a core per thread, the threads that still waited for a CPU on average (median over
/// rounds), when over 0.1: other work took CPU time, which the model counts as activity.
pub fn waited_with_a_core_each(v: &ScaleView<'_>, m: &ScalingModel) -> Option<f64> {
    let waiting = v
        .configurations
        .iter()
        .find(|c| c.threads == m.threads && c.cores == m.cores)
        .map_or(0.0, |c| c.waiting_threads.median);
    (m.cores >= m.threads && waiting > 0.1).then_some(waiting)
}

pub fn render(v: &ScaleView<'_>) -> String {
    let mut out = String::new();
    let unit = match v.unit {
        WorkUnit::Cycles => "cycles",
        WorkUnit::OnCpuNs => "on-CPU time (no hardware counters: user + system time from wait4)",
        WorkUnit::UserNs => "user CPU time from wait4 (no hardware counters: memory stall cycles are inside it; system time, shown beside it, does not enter ω)",
    };
    let _ = writeln!(
        out,
        "Scaling of {}\n  {} run(s) per configuration, medians shown; work C(n) = {unit}",
        v.command.join(" "),
        v.repeat
    );
    if v.rounds > 0 {
        let _ = writeln!(
            out,
            "  {} round(s) of every configuration, interleaved{}",
            v.rounds,
            if v.stopped.is_empty() {
                String::new()
            } else {
                format!(": {}", v.stopped)
            }
        );
    }
    out.push('\n');
    let work_header = match v.unit {
        WorkUnit::Cycles => "work C (10⁹ cycles)",
        WorkUnit::OnCpuNs => "work C (CPU s)",
        WorkUnit::UserNs => "work C = user time (CPU s, in ω)",
    };
    // System time beside the work, when the work is user time (files before the split: none).
    let system = v.configurations.iter().any(|c| c.system_ns.is_some());
    let mut header = vec![
        "threads m",
        "cores n",
        "CPUs",
        "elapsed T (s)",
        "min–max (s)",
        "CoV (%)",
        work_header,
    ];
    if system {
        header.push("system time (CPU s, not in ω)");
    }
    header.extend([
        "active threads A",
        "of which waiting for a CPU",
        "A modelled for m cores (3.4)",
    ]);
    let numeric: Vec<usize> = (0..header.len()).filter(|&i| i != 2 && i != 4).collect();
    let mut t = new_table(&header, &numeric);
    for c in &v.configurations {
        let mut row = vec![
            c.threads.to_string(),
            c.cores.to_string(),
            topology::CpuSet::list_in_order(c.cpus),
            s(c.elapsed_ns.median),
            format!("{}–{}", s(c.elapsed_ns.min), s(c.elapsed_ns.max)),
            c.elapsed_ns
                .cov_pct()
                .map_or("n/a".into(), |p| format!("{p:.1}")),
            s(c.work.median),
        ];
        if system {
            row.push(c.system_ns.map_or("n/a".into(), |x| s(x.median)));
        }
        row.extend([
            format!("{:.2}", c.active_threads.median),
            format!("{:.2}", c.waiting_threads.median),
            c.modelled_active_threads
                .map_or("n/a".into(), |a| format!("{a:.2}")),
        ]);
        t.add_row(row);
    }
    let _ = writeln!(out, "{t}");
    if !v.models.is_empty() {
        let mut header = vec!["model (thesis eq./table)".to_string()];
        header.extend(
            v.models
                .iter()
                .map(|m| format!("m={} n={}", m.threads, m.cores)),
        );
        let refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let numeric: Vec<usize> = (1..refs.len()).collect();
        let mut t = new_table(&refs, &numeric);
        let row = |t: &mut comfy_table::Table, name: &str, f: &dyn Fn(&ScalingModel) -> String| {
            let mut r = vec![name.to_string()];
            r.extend(v.models.iter().map(|m| f(m)));
            t.add_row(r);
        };
        row(&mut t, "speed-up measured T(1)/T(n)", &|m| {
            format!("{:.2}", m.measured_speedup)
        });
        // Files written before the three-way split name the thesis's A in P and R.
        let split = v.models.iter().any(|m| m.running_threads.is_some());
        let a = if split { "A_run" } else { "A" };
        row(
            &mut t,
            &if split {
                "speed-up predicted S = P (3.4)".to_string()
            } else {
                "speed-up predicted S = A/(1+ω) (3.4)".to_string()
            },
            &|m| format!("{:.2}", m.predicted_speedup),
        );
        if split {
            row(&mut t, "active threads A(m,n) = A_run + W", &|m| {
                format!("{:.2}", m.active_threads)
            });
            row(&mut t, "on a CPU A_run", &|m| {
                m.running_threads
                    .map_or("n/a".into(), |a| format!("{a:.2}"))
            });
            row(&mut t, "waiting for a CPU W", &|m| {
                m.waiting_threads
                    .map_or("n/a".into(), |w| format!("{w:.2}"))
            });
        } else {
            row(&mut t, "active threads A(m,n)", &|m| {
                format!("{:.2}", m.active_threads)
            });
        }
        row(&mut t, "ω = C(n)/C(1) − 1 (3.5)", &|m| {
            format!("{:+.3}", m.omega)
        });
        row(
            &mut t,
            &format!("useful active threads P = {a}/(1+ω) (3.2)"),
            &|m| format!("{:.2}", m.useful_active_threads),
        );
        row(
            &mut t,
            &format!("loss to memory/hardware R = {a} − P (3.3)"),
            &|m| format!("{:.2}", m.memory_loss_threads),
        );
        row(&mut t, "loss to dependencies D = m − A (3.8)", &|m| {
            format!("{:.2}", m.dependency_loss_threads)
        });
        row(&mut t, "time lost, memory/hardware (thread-s, 4.5)", &|m| {
            s(m.memory_loss_thread_ns)
        });
        row(&mut t, "time lost, dependencies (thread-s, 4.5)", &|m| {
            s(m.dependency_loss_thread_ns)
        });
        row(&mut t, "service τ on 1 core (s, 4.8)", &|m| {
            s(m.baseline_service_ns)
        });
        row(&mut t, "service τ on n cores (s, 4.8)", &|m| {
            s(m.service_ns)
        });
        row(&mut t, "service change (%, 4.8)", &|m| {
            pct(m.service_change_pct)
        });
        row(&mut t, "ideal running time (s, 4.8)", &|m| {
            s(m.ideal_running_ns)
        });
        row(&mut t, "actual running time (s, 4.8)", &|m| {
            s(m.actual_running_ns)
        });
        row(&mut t, "actual vs ideal (%, 4.8)", &|m| {
            pct(m.running_change_pct)
        });
        row(&mut t, "lock waits (thread-s, 4.11)", &|m| {
            m.locks
                .as_ref()
                .map_or("n/a (no --locks)".into(), |l| s(l.lock_wait_ns))
        });
        row(
            &mut t,
            "dependency loss unexplained (thread-s, 4.11)",
            &|m| {
                m.locks.as_ref().map_or("n/a (no --locks)".into(), |l| {
                    let mark = if l.lock_wait_exceeds_dependency_loss {
                        " (waits exceed D·T)"
                    } else {
                        ""
                    };
                    format!("{}{mark}", s(l.unexplained_thread_ns))
                })
            },
        );
        row(&mut t, "cycles per LLC miss (4.1)", &|m| {
            m.cycles_per_llc_miss
                .map_or("n/a (no PMU)".into(), |c| format!("{c:.0}"))
        });
        row(&mut t, "LLC misses per s (4.1)", &|m| {
            m.llc_misses_per_s
                .map_or("n/a (no PMU)".into(), |c| format!("{c:.3e}"))
        });
        let _ = writeln!(out, "{t}");
        // Verdicts with intervals replace the point verdicts; files without them keep theirs.
        for m in v.models.iter().filter(|_| v.verdicts.is_empty()) {
            let _ = writeln!(out, "{}", verdict(m));
            if let Some(waiting) = waited_with_a_core_each(v, m) {
                let _ = writeln!(
                    out,
                    "  note: with a core per thread, {waiting:.2} threads still waited for a CPU on average: other work on the machine took CPU time, which the model counts as activity (predicted speed-up above measured)."
                );
            }
        }
    }
    for verdict in &v.verdicts {
        let _ = writeln!(out, "{}", verdict.text);
        for s in &verdict.settle {
            let _ = writeln!(out, "  to settle it: {s}");
        }
    }
    if !v.verdicts.is_empty() {
        let _ = writeln!(
            out,
            "(intervals: 95 %, percentile bootstrap over the {} rounds; shares are of the loss m − P = R + W + D)",
            v.rounds
        );
    }
    for (threads, q) in &v.queues {
        let predicted: Vec<String> = [2u32, 4, 8, 16]
            .iter()
            .filter_map(|&n| q.predicted_omega(n).map(|w| format!("ω({n}) = {w:+.3}")))
            .collect();
        // Rates of memory requests per unit of work: per cycle, or per ns of CPU time.
        let per = match q.unit {
            WorkUnit::Cycles => "per cycle",
            WorkUnit::OnCpuNs => "per CPU ns",
            WorkUnit::UserNs => "per user CPU ns",
        };
        let _ = writeln!(
            out,
            "memory queue (eq. 3.6), {threads} threads, fit over n = {:?}: μ = {}, L = {} per core; μ/r = {:.4e} {per}, L/r = {:.4e} {per}{}",
            q.cores_used,
            q.mu
                .map_or("n/a (no LLC misses counted)".into(), |m| format!("{m:.4e} {per}")),
            q.l.map_or("n/a".into(), |l| format!("{l:.4e} {per}")),
            q.mu_over_r,
            q.l_over_r,
            if predicted.is_empty() {
                String::new()
            } else {
                format!("; modelled {}", predicted.join(", "))
            }
        );
    }
    for m in &v.missing {
        let _ = writeln!(out, "not modelled: {m}");
    }
    for n in &v.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// Speed-up against the number of threads: ideal, measured and predicted (SVG).
pub fn speedup_svg(v: &ScaleView<'_>) -> String {
    // The model against the most cores for each thread count.
    let mut best: Vec<&ScalingModel> = Vec::new();
    for m in &v.models {
        match best.iter_mut().find(|b| b.threads == m.threads) {
            Some(b) if b.cores < m.cores => *b = m,
            Some(_) => {}
            None => best.push(m),
        }
    }
    best.sort_by_key(|m| m.threads);
    let ideal: Vec<(f64, f64)> = best
        .iter()
        .map(|m| (f64::from(m.threads), f64::from(m.threads.min(m.cores))))
        .collect();
    let measured: Vec<(f64, f64)> = best
        .iter()
        .map(|m| (f64::from(m.threads), m.measured_speedup))
        .collect();
    let predicted: Vec<(f64, f64)> = best
        .iter()
        .map(|m| (f64::from(m.threads), m.predicted_speedup))
        .collect();
    let active: Vec<(f64, f64)> = best
        .iter()
        .map(|m| (f64::from(m.threads), m.active_threads))
        .collect();
    let with_one = |pts: Vec<(f64, f64)>| {
        // One thread on one core is speed-up 1 by definition.
        let mut p = vec![(1.0, 1.0)];
        p.extend(pts.into_iter().filter(|p| p.0 > 1.0));
        p
    };
    let (ideal, measured, predicted) = (with_one(ideal), with_one(measured), with_one(predicted));
    crate::svg::line_chart(
        &format!(
            "Speed-up of {}",
            v.command.first().map_or("", String::as_str)
        ),
        "threads m (on m cores)",
        "speed-up T(1)/T(m)",
        &[
            crate::svg::Line {
                name: "ideal",
                points: &ideal,
                colour: "#999999",
                markers: false,
                area: false,
                dashed: true,
            },
            crate::svg::Line {
                name: "active threads A (loss above it: dependencies)",
                points: &active,
                colour: "#ff7f0e",
                markers: true,
                area: false,
                dashed: true,
            },
            crate::svg::Line {
                name: "predicted A/(1+ω) (loss between: memory/hardware)",
                points: &predicted,
                colour: "#2ca02c",
                markers: true,
                area: false,
                dashed: false,
            },
            crate::svg::Line {
                name: "measured",
                points: &measured,
                colour: "#1f77b4",
                markers: true,
                area: false,
                dashed: false,
            },
        ],
    )
}
