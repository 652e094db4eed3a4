//! The activity section of `contend report`: per-thread service time, run-queue wait and
//! blocked time, the average number of active threads (the scaling model's A), and a timeline
//! of running and waiting threads (SVG).

use crate::table::{new_table, or_na};
use analysis::service::{Service, ThreadService};
use serde::Serialize;
use std::fmt::Write;

/// Listing 3.4's A for one core count.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct ModelledActive {
    pub cores: u32,
    pub active_threads: f64,
}

/// What the activity section shows, for text and JSON alike.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ActivityView {
    /// Wall time of the program (or of the attached recording), ns: T.
    pub elapsed_ns: u64,
    /// The recording did not end properly: T is the samples' span, not the program's.
    pub elapsed_from_samples: bool,
    pub interval_ns: u64,
    /// Σ service (on-CPU) time over threads, ns: τ.
    pub service_ns: u64,
    pub runq_wait_ns: u64,
    pub blocked_ns: u64,
    /// Average threads running: τ / T.
    pub running_threads: f64,
    /// Average active threads, running or waiting for a CPU: (τ + run-queue wait) / T. The
    /// scaling model's A(m, n) (docs/methodology.md §5).
    pub active_threads: f64,
    /// A(m, n) by the thesis's listing 3.3 from the same samples (critical-path weighted).
    pub active_threads_listing_3_3: Option<f64>,
    /// Listing 3.4: A these samples would give on other core counts (1 up to the most
    /// threads alive at once), as predicted from this run; from a one-core run, the
    /// activity the program would have without CPU limits.
    pub modelled_active_threads: Vec<ModelledActive>,
    /// Most threads alive at once.
    pub max_threads: u32,
    /// User + system CPU time of the program from wait4, ns (exact; absent for -p).
    pub cpu_ns: Option<u64>,
    /// The sampled service time as a share of the program's CPU time from wait4, %: below
    /// about 90 % the samples missed much of the program (threads shorter than an interval,
    /// a run of few intervals) and A is underestimated.
    pub coverage_pct: Option<f64>,
    /// The sampler's own CPU use, % of one CPU.
    pub sampler_cpu_pct: Option<f64>,
    /// CPU time the hypervisor took from the machine's CPUs during the run, ns (all CPUs):
    /// threads that had work then show it as blocked time.
    pub steal_ns: Option<u64>,
    /// Where the figures come from, in words (schedstat; sched tracepoints and their gaps).
    pub sources: Vec<String>,
    /// Counter totals over the program (hardware ones only where the machine has a PMU).
    pub counters: Vec<trace::meta::CounterTotal>,
    /// Counters asked for but not counted, with the reason.
    pub counters_unavailable: Vec<trace::meta::Unavailable>,
    pub threads: Vec<ThreadService>,
    #[serde(skip)]
    pub timeline: Vec<analysis::service::IntervalLoad>,
}

impl ActivityView {
    pub fn new(service: Service, meta: &trace::Meta) -> ActivityView {
        // The program's span; a recorder that died before writing it leaves the samples' own
        // span (first interval's start to the last sample), said in `elapsed_from_samples`.
        let from_samples = service
            .timeline
            .first()
            .zip(service.timeline.last())
            .map(|(f, l)| l.ts.saturating_sub(f.ts.saturating_sub(f.length_ns)));
        let elapsed_from_samples = meta.monotonic_span.is_none();
        let elapsed_ns = meta
            .monotonic_span
            .map(|[a, b]| b.saturating_sub(a))
            .or(from_samples)
            .unwrap_or(0)
            .max(1);
        let sampling = meta.sampling.as_ref();
        ActivityView {
            elapsed_ns,
            elapsed_from_samples,
            interval_ns: sampling.map_or(0, |s| s.interval_ns),
            service_ns: service.service_ns,
            runq_wait_ns: service.runq_wait_ns,
            blocked_ns: service.blocked_ns,
            running_threads: service.service_ns as f64 / elapsed_ns as f64,
            active_threads: (service.service_ns as f64 + service.runq_wait_ns as f64)
                / elapsed_ns as f64,
            active_threads_listing_3_3: analysis::activity::measured_active_threads(
                &service.intervals,
            ),
            modelled_active_threads: (1..=service.max_threads.clamp(1, 256))
                .filter_map(|cores| {
                    analysis::activity::modelled_active_threads(&service.intervals, cores).map(
                        |active_threads| ModelledActive {
                            cores,
                            active_threads,
                        },
                    )
                })
                .collect(),
            max_threads: service.max_threads,
            cpu_ns: meta.work.as_ref().and_then(|w| w.cpu_ns),
            steal_ns: sampling.and_then(|s| s.steal_ns),
            coverage_pct: meta
                .work
                .as_ref()
                .and_then(|w| w.cpu_ns)
                .filter(|&c| c > 0)
                .map(|c| 100.0 * service.service_ns as f64 / c as f64),
            sampler_cpu_pct: sampling
                .filter(|s| s.wall_ns > 0)
                .map(|s| 100.0 * s.sampler_cpu_ns as f64 / s.wall_ns as f64),
            sources: sources(meta),
            counters: meta
                .work
                .as_ref()
                .map(|w| w.counters.clone())
                .unwrap_or_default(),
            counters_unavailable: meta
                .unavailable
                .iter()
                .filter(|u| u.what.contains("cycles") || u.what.contains("LLC"))
                .cloned()
                .collect(),
            threads: service.threads,
            timeline: service.timeline,
        }
    }
}

/// The sources of a run's activity figures, one line each.
fn sources(meta: &trace::Meta) -> Vec<String> {
    let mut out = vec![
        "service and run-queue wait: /proc/PID/task/TID/schedstat (ns), each interval".to_string(),
    ];
    match meta.sampling.as_ref().and_then(|s| s.sched_trace.as_ref()) {
        Some(t) => out.push(format!(
            "scheduler states: sched tracepoints, {} state changes ({} records lost, {} gaps in the CPUs' switch chains): in the Perfetto export",
            t.state_changes, t.lost, t.switch_gaps
        )),
        None => {
            let why = meta
                .unavailable
                .iter()
                .find(|u| u.what.contains("sched tracepoints"))
                .map_or("not asked for".to_string(), |u| u.why.clone());
            out.push(format!("scheduler states: not recorded ({why})"));
        }
    }
    out.push(
        match meta
            .work
            .as_ref()
            .map(|w| w.counters.iter().any(|c| c.counter == "cycles"))
        {
            Some(true) => "work: cycles (hardware counters)".to_string(),
            _ => "work: CPU time (wait4, and task-clock); no hardware counters".to_string(),
        },
    );
    out
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// The section as text.
pub fn render(v: &ActivityView, top: usize) -> String {
    let mut out = String::new();
    if v.interval_ns > 0 {
        let _ = writeln!(
            out,
            "Activity (sampled every {:.1} ms from schedstat)",
            v.interval_ns as f64 / 1e6
        );
    } else {
        let _ = writeln!(
            out,
            "Activity (sampled from schedstat; the interval was not recorded: the recorder did not finish)"
        );
    }
    let mut t = new_table(&["", "value"], &[1]);
    t.add_row(vec![
        if v.elapsed_from_samples {
            "elapsed time T (s; from the samples: the recording did not finish)".to_string()
        } else {
            "elapsed time T (s)".to_string()
        },
        format!("{:.3}", v.elapsed_ns as f64 / 1e9),
    ]);
    t.add_row(vec![
        "service time τ, all threads (s)".to_string(),
        format!("{:.3}", v.service_ns as f64 / 1e9),
    ]);
    t.add_row(vec![
        "CPU time from wait4 (s)".to_string(),
        or_na(v.cpu_ns.map(|n| format!("{:.3}", n as f64 / 1e9))),
    ]);
    t.add_row(vec![
        "run-queue wait, all threads (s)".to_string(),
        format!("{:.3}", v.runq_wait_ns as f64 / 1e9),
    ]);
    t.add_row(vec![
        "blocked, all threads (s)".to_string(),
        format!("{:.3}", v.blocked_ns as f64 / 1e9),
    ]);
    if let Some(steal) = v.steal_ns.filter(|&n| n > 0) {
        t.add_row(vec![
            "stolen by the hypervisor, all CPUs (s; shows as blocked)".to_string(),
            format!("{:.3}", steal as f64 / 1e9),
        ]);
    }
    t.add_row(vec![
        "threads running on average (τ / T)".to_string(),
        format!("{:.2}", v.running_threads),
    ]);
    t.add_row(vec![
        "active threads A: running or runnable".to_string(),
        format!("{:.2}", v.active_threads),
    ]);
    t.add_row(vec![
        "active threads, listing 3.3 (critical-path weighted)".to_string(),
        or_na(v.active_threads_listing_3_3.map(|a| format!("{a:.2}"))),
    ]);
    t.add_row(vec![
        "threads, most alive at once".to_string(),
        v.max_threads.to_string(),
    ]);
    t.add_row(vec![
        "sampler's own CPU use (% of one CPU)".to_string(),
        or_na(v.sampler_cpu_pct.map(|p| format!("{p:.2}"))),
    ]);
    for c in &v.counters {
        let estimated = if c.running_ns < c.enabled_ns {
            format!(
                " (estimated: counted {:.0} % of the time)",
                100.0 * c.running_ns as f64 / c.enabled_ns.max(1) as f64
            )
        } else {
            String::new()
        };
        let value = if c.counter == "task-clock" {
            format!("{:.3} s", c.value as f64 / 1e9)
        } else {
            c.value.to_string()
        };
        t.add_row(vec![
            format!("counter {} ({})", c.counter, c.event),
            format!("{value}{estimated}"),
        ]);
    }
    let _ = writeln!(out, "{t}");
    for line in &v.sources {
        let _ = writeln!(out, "source: {line}");
    }
    if let Some(c) = v.coverage_pct.filter(|&c| c < 90.0) {
        let _ = writeln!(
            out,
            "note: the samples cover only {c:.0} % of the program's CPU time (wait4): threads shorter than an interval or too few intervals; A is underestimated (record with a smaller --interval, or a longer run)"
        );
    }
    for u in &v.counters_unavailable {
        let _ = writeln!(out, "{}: n/a ({})", u.what, u.why);
    }

    let mut threads: Vec<&ThreadService> = v.threads.iter().collect();
    threads.sort_by(|a, b| b.service_ns.cmp(&a.service_ns).then(a.tid.cmp(&b.tid)));
    let mut t = new_table(
        &[
            "tid",
            "name",
            "lifetime (ms)",
            "service (ms)",
            "run-queue wait (ms)",
            "blocked (ms)",
            "on CPU (%)",
            "switches vol/invol",
            "CPUs",
        ],
        &[0, 2, 3, 4, 5, 6],
    );
    for th in threads.iter().take(top) {
        t.add_row(vec![
            th.tid.to_string(),
            crate::table::printable(&th.name),
            ms(th.lifetime_ns),
            ms(th.service_ns),
            ms(th.runq_wait_ns),
            ms(th.blocked_ns),
            format!("{:.1}", th.active_pct),
            format!("{}/{}", th.voluntary_switches, th.involuntary_switches),
            topology::CpuSet::list_in_order(&th.cpus),
        ]);
    }
    let _ = writeln!(out, "{t}");
    if threads.len() > top {
        let _ = writeln!(
            out,
            "({} more threads; --top-threads to show more)",
            threads.len() - top
        );
    }
    out
}

/// Where the threads' blocked time went, when locks were recorded in the same run: lock,
/// condition and barrier waits against the blocked time the sampler saw (both summed over
/// threads). A line of text, or nothing without locks.
///
/// `off_cpu`: what the off-CPU recorder found, when it ran: the blocked futex waits besides
/// those the probe counted, and the other blocks it saw (sleeps, I/O, kernel locks, named by
/// kernel function in the Waits section); both are taken out of "the other" share.
pub fn blocked_explained(
    v: &ActivityView,
    locks: &analysis::locks::LockReport,
    off_cpu: Option<OffCpuBlocked>,
) -> String {
    let blocked = v.blocked_ns as f64;
    if blocked <= 0.0 {
        return String::new();
    }
    let lock = locks.summary.wait_ns as f64;
    let cond = locks.conds.iter().map(|c| c.wait_ns).sum::<u64>() as f64;
    let barrier = locks.barriers.iter().map(|b| b.wait_ns).sum::<u64>() as f64;
    let pct = |x: f64| 100.0 * x / blocked;
    let futex = off_cpu.map_or(0, |o| o.futex_ns) as f64;
    let other_blocks = off_cpu.map_or(0, |o| o.other_ns) as f64;
    let rest = blocked - lock - cond - barrier - futex - other_blocks;
    let mut out = format!(
        "Blocked time, all threads: {:.3} s; lock waits {:.3} s ({:.0} %), condition waits {:.3} s ({:.0} %), barrier waits {:.3} s ({:.0} %); ",
        blocked / 1e9,
        lock / 1e9,
        pct(lock),
        cond / 1e9,
        pct(cond),
        barrier / 1e9,
        pct(barrier)
    );
    if off_cpu.is_some() {
        let _ = write!(
            out,
            "futex waits {:.3} s ({:.0} %), other blocks the scheduler named {:.3} s ({:.0} %)",
            futex / 1e9,
            pct(futex),
            other_blocks / 1e9,
            pct(other_blocks)
        );
        let locks: Vec<String> = off_cpu
            .iter()
            .flat_map(|o| o.kernel_locks.iter().flatten())
            .map(|(name, ns)| format!("{name} {:.3} s", *ns as f64 / 1e9))
            .collect();
        if !locks.is_empty() {
            let _ = write!(out, ", of which kernel locks: {}", locks.join(", "));
        }
        out.push_str(" (see Waits); ");
    }
    if rest >= 0.0 && off_cpu.is_some() {
        // Every block was traced: what is left is where the sampler's blocked time and the
        // traced blocks disagree (schedstat's 10 ms samples, blocks of threads not traced).
        let _ = write!(
            out,
            "the other {:.3} s ({:.0} %) is blocked time the scheduler's events did not show.",
            rest / 1e9,
            pct(rest)
        );
    } else if rest >= 0.0 {
        let _ = write!(
            out,
            "the other {:.3} s ({:.0} %) went to sleeps, I/O, thread joins and other waits contend does not trace.",
            rest / 1e9,
            pct(rest)
        );
    } else {
        // A waiter that spins before sleeping is on a CPU, so its wait is not blocked time.
        let _ = write!(
            out,
            "the waits exceed the blocked time by {:.3} s: part of them was spent spinning on a CPU.",
            -rest / 1e9
        );
    }
    if locks.sample_every > 1 {
        out.push_str(" (Lock waits are all recorded in sampled mode; holds are estimated.)");
    }
    out.push('\n');
    out
}

/// What the off-CPU recorder saw of the threads' blocked time (not runnable: the run-queue
/// time after each wake-up is left out), ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffCpuBlocked {
    /// Futex waits the probe did not count.
    pub futex_ns: u64,
    /// Blocks that were not futex waits.
    pub other_ns: u64,
    /// Of `other_ns`, the kernel locks' by name, most first (`kernel_locks::activity_share`).
    pub kernel_locks: [Option<(&'static str, u64)>; 3],
}

/// Running and waiting threads over time (SVG). A running thread's on-CPU time in schedstat
/// advances at scheduler ticks and switches, so single intervals jitter by about a tick
/// (10 ms samples at HZ=250 read 8 or 12 ms): the lines are centred moving averages over
/// `SMOOTH` samples.
pub fn timeline_svg(v: &ActivityView, title: &str) -> String {
    const SMOOTH: usize = 3;
    let start = v
        .timeline
        .first()
        .map_or(0, |i| i.ts.saturating_sub(i.length_ns));
    let at = |ts: u64| ts.saturating_sub(start) as f64 / 1e9;
    let smooth = |f: &dyn Fn(&analysis::service::IntervalLoad) -> f64| -> Vec<(f64, f64)> {
        let n = v.timeline.len();
        (0..n)
            .map(|k| {
                let lo = k.saturating_sub(SMOOTH / 2);
                let hi = (k + SMOOTH / 2 + 1).min(n);
                let window = &v.timeline[lo..hi];
                // Time-weighted: Σ (value × length) / Σ length.
                let total: u64 = window.iter().map(|i| i.length_ns).sum();
                let value = window
                    .iter()
                    .map(|i| f(i) * i.length_ns as f64)
                    .sum::<f64>()
                    / total.max(1) as f64;
                (at(v.timeline[k].ts), value)
            })
            .collect()
    };
    let running = smooth(&|i| i.running);
    let active = smooth(&|i| i.running + i.waiting);
    let alive: Vec<(f64, f64)> = v
        .timeline
        .iter()
        .map(|i| (at(i.ts), f64::from(i.threads)))
        .collect();
    crate::svg::line_chart(
        title,
        "time since start (s)",
        &format!("threads (moving average of {SMOOTH} samples)"),
        &[
            crate::svg::Line {
                name: "threads alive",
                points: &alive,
                colour: "#999999",
                markers: false,
                area: false,
                dashed: true,
            },
            crate::svg::Line {
                name: "active: running or waiting for a CPU",
                points: &active,
                colour: "#ff7f0e",
                markers: false,
                area: true,
                dashed: false,
            },
            crate::svg::Line {
                name: "running",
                points: &running,
                colour: "#1f77b4",
                markers: false,
                area: true,
                dashed: false,
            },
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(blocked_ns: u64) -> ActivityView {
        ActivityView {
            elapsed_ns: 1,
            elapsed_from_samples: false,
            interval_ns: 10_000_000,
            service_ns: 0,
            runq_wait_ns: 0,
            blocked_ns,
            running_threads: 0.0,
            active_threads: 0.0,
            active_threads_listing_3_3: None,
            modelled_active_threads: Vec::new(),
            max_threads: 0,
            cpu_ns: None,
            steal_ns: None,
            coverage_pct: None,
            sampler_cpu_pct: None,
            sources: Vec::new(),
            counters: Vec::new(),
            counters_unavailable: Vec::new(),
            threads: Vec::new(),
            timeline: Vec::new(),
        }
    }

    #[test]
    fn blocked_time_is_split_into_the_waits_that_explain_it() {
        let input = analysis::locks::LockInput::default();
        let mut locks = analysis::locks::analyze(&input, &analysis::locks::Filter::default());
        locks.summary.wait_ns = 600_000_000;
        let line = blocked_explained(&view(1_000_000_000), &locks, None);
        assert!(!line.contains("futex"), "{line}");
        let off_cpu = OffCpuBlocked {
            futex_ns: 250_000_000,
            other_ns: 50_000_000,
            kernel_locks: [None; 3],
        };
        let with_futex = blocked_explained(&view(1_000_000_000), &locks, Some(off_cpu));
        assert!(!with_futex.contains("kernel locks"), "{with_futex}");
        let with_kernel_locks = OffCpuBlocked {
            kernel_locks: [
                Some(("mmap_lock", 30_000_000)),
                Some(("other kernel locks", 5_000_000)),
                None,
            ],
            ..off_cpu
        };
        let line_k = blocked_explained(&view(1_000_000_000), &locks, Some(with_kernel_locks));
        assert!(
            line_k.contains("other blocks the scheduler named 0.050 s (5 %), of which kernel locks: mmap_lock 0.030 s, other kernel locks 0.005 s (see Waits); "),
            "{line_k}"
        );
        assert!(
            with_futex.contains("futex waits 0.250 s (25 %)")
                && with_futex.contains("other blocks the scheduler named 0.050 s (5 %)")
                && with_futex.contains("the other 0.100 s (10 %) is blocked time the scheduler"),
            "{with_futex}"
        );
        assert!(
            line.contains("lock waits 0.600 s (60 %)")
                && line.contains("condition waits 0.000 s (0 %)")
                && line.contains("the other 0.400 s (40 %)"),
            "{line}"
        );
        locks.summary.wait_ns = 1_500_000_000;
        let line = blocked_explained(&view(1_000_000_000), &locks, None);
        assert!(
            line.contains("exceed the blocked time by 0.500 s"),
            "{line}"
        );
        assert_eq!(blocked_explained(&view(0), &locks, None), "");
    }
}
