//! Finalising meta.json from what the launch and the sampler report.

use crate::notice::{note, About, Notice};
use observe::launch;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;
use trace::meta::{Clock, Meta, Unavailable};
use trace::Captured;

/// The sampler's part of meta.json; what could not be had goes to `unavailable`, and the
/// tracepoint reader's caveats to the sink.
pub fn sampling_meta(
    interval: Duration,
    s: &launch::SamplerStats,
    meta: &mut Meta,
    notices: &mut dyn FnMut(Notice),
) {
    if let Some((what, why)) = &s.sched_unavailable {
        note(
            notices,
            About::Sampling,
            format!("{what} not recorded: {why}"),
        );
        meta.unavailable.push(Unavailable {
            what: what.clone(),
            why: why.clone(),
        });
    }
    let sched_trace = s.sched.as_ref().map(|t| {
        for n in t.notes.iter().filter(|n| n.starts_with("mounted")) {
            note(notices, About::Sampling, n.clone());
        }
        if t.lost > 0 || t.switch_gaps > 0 || !t.idle_exits_untraced.is_empty() {
            note(
                notices,
                About::Sampling,
                format!(
                    "sched tracepoints: {} records lost, {} gaps in the CPUs' switch chains{}: some state intervals are approximate",
                    t.lost,
                    t.switch_gaps,
                    if t.idle_exits_untraced.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ", switches out of idle not delivered by this kernel on CPU(s) {}",
                            topology::CpuSet::list_in_order(&t.idle_exits_untraced)
                        )
                    }
                ),
            );
        }
        trace::meta::SchedTrace {
            state_changes: t.state_changes,
            lost: t.lost,
            unparsed: t.unparsed,
            switch_gaps: t.switch_gaps,
            idle_exits_untraced: t.idle_exits_untraced.clone(),
            unsampled_threads: t.unsampled_threads,
            notes: t.notes.clone(),
        }
    });
    meta.sampling = Some(trace::meta::Sampling {
        interval_ns: interval.as_nanos() as u64,
        source: "schedstat".into(),
        rounds: s.rounds,
        late_rounds: s.late_rounds,
        sampler_cpu_ns: s.own_cpu_ns,
        wall_ns: s.wall_ns,
        sched_tracepoints: sched_trace.is_some(),
        sched_trace,
        steal_ns: s.steal_ns,
    });
    if s.sched.is_some() {
        meta.capture(Captured::SchedTracepoints);
    }
}

/// Everything a launched run puts in meta.json but its streams: clock, times, exit status
/// and outcome, work and counters (what the machine lacks goes to `unavailable`, and to the
/// sink), sampling.
/// The off-CPU recorder's counts and captured tag, or why it could not run (the lock probe
/// records regardless).
pub fn offcpu_meta(meta: &mut Meta, outcome: &launch::Outcome, notices: &mut dyn FnMut(Notice)) {
    match &outcome.offcpu {
        None => {}
        Some(Ok(stats)) => {
            meta.capture(trace::Captured::OffCpu);
            meta.offcpu = Some(trace::meta::OffCpuMeta {
                blocks: stats.blocks,
                futex_waits: stats.futex_waits,
                lost: stats.lost,
                throttled: stats.throttled,
                unparsed: stats.unparsed + stats.unwritten,
                kernel_symbols: stats.kernel_symbols,
                stacks: stats.stacks,
                stack_bytes: stats.stack_bytes,
                stacks_over_budget: stats.stacks_over_budget,
                // Absent when not recorded: a reader then tells "none" from "not traced".
                wakings: stats.wakings_unavailable.is_none().then_some(stats.wakings),
                futex_wakes: stats.futex_wakes,
                waking_stacks: stats.waking_stacks,
                wakings_unavailable: stats.wakings_unavailable.is_some(),
            });
            if stats.stacks_over_budget > 0 {
                note(
                    notices,
                    About::Outcome,
                    format!(
                        "off-CPU waits: the stack budget ({} MiB of stacks) was spent: {} later wait(s) were recorded without their stack (raise --stack-budget)",
                        stats.stack_bytes >> 20,
                        stats.stacks_over_budget
                    ),
                );
            }
            if stats.lost > 0 || stats.throttled > 0 {
                note(
                    notices,
                    About::Outcome,
                    format!(
                        "off-CPU waits: the kernel dropped {} sample(s) and throttled {} time(s): some waits are missing",
                        stats.lost, stats.throttled
                    ),
                );
            }
        }
        Some(Err(u)) => {
            note(
                notices,
                About::Setup,
                format!("futex waits not recorded: {}", u.why),
            );
            meta.unavailable.push(u.clone());
        }
    }
}

pub fn fill_meta(
    meta: &mut Meta,
    outcome: &launch::Outcome,
    sampling_interval: Option<Duration>,
    notices: &mut dyn FnMut(Notice),
) {
    meta.clock = Clock {
        source: outcome.clock,
        hz: outcome.clock_hz,
        calibration: outcome.calibration.clone(),
    };
    meta.started = outcome.started.clone();
    meta.ended = Some(outcome.ended.clone());
    meta.monotonic_span = Some(outcome.monotonic_span);
    meta.events_dropped = outcome.streams.iter().map(|s| s.dropped).sum();
    meta.exit_status = outcome
        .status
        .code()
        .or(outcome.status.signal().map(|s| 128 + s));
    meta.outcome = Some(match (outcome.status.code(), outcome.status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("killed by signal {}", signal_name(sig)),
        _ => "ended".into(),
    });
    meta.work = Some(trace::meta::Work {
        cpu_ns: outcome.cpu_ns,
        user_ns: outcome.user_ns,
        system_ns: outcome.system_ns,
        counters: counter_totals(&outcome.counters),
    });
    for u in &outcome.counters_unavailable {
        meta.unavailable.push(Unavailable {
            what: u.what.clone(),
            why: u.why.clone(),
        });
        note(
            notices,
            About::Counters,
            format!("{} not counted: {}", u.what, u.why),
        );
    }
    if let (Some(interval), Some(stats)) = (sampling_interval, &outcome.sampler) {
        sampling_meta(interval, stats, meta, notices);
    }
}

/// A signal's number and name, for people: `9 (Killed)`.
pub fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a static or thread-local string for any number.
    let text = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) };
    format!("{sig} ({})", text.to_string_lossy())
}

/// The counters recordings ask for: the hardware set for the model, and task-clock and
/// context switches, which every Linux has.
pub fn counters_wanted() -> Vec<observe::counters::Counter> {
    observe::counters::HARDWARE
        .iter()
        .chain(observe::counters::FALLBACK)
        .copied()
        .collect()
}

/// Counter totals as meta.json keeps them: only what was counted (`n/a` is absence).
pub fn counter_totals(readings: &[observe::counters::Reading]) -> Vec<trace::meta::CounterTotal> {
    readings
        .iter()
        .filter_map(|r| {
            r.estimate().map(|value| trace::meta::CounterTotal {
                counter: r.counter.name().to_string(),
                event: r.event.clone(),
                value,
                enabled_ns: r.enabled_ns,
                running_ns: r.running_ns,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named() {
        assert!(signal_name(9).starts_with("9 ("), "{}", signal_name(9));
    }

    #[test]
    fn sampling_records_what_was_unavailable_and_tells() {
        let mut meta = Meta::new(vec!["x".into()]);
        let stats = launch::SamplerStats {
            rounds: 3,
            late_rounds: 0,
            own_cpu_ns: 1,
            wall_ns: 2,
            sched: None,
            sched_unavailable: Some(("sched tracepoints".into(), "no permission".into())),
            steal_ns: None,
        };
        let mut told = Vec::new();
        sampling_meta(Duration::from_millis(10), &stats, &mut meta, &mut |n| {
            told.push(n)
        });
        assert_eq!(
            meta.sampling.as_ref().map(|s| s.interval_ns),
            Some(10_000_000)
        );
        assert_eq!(meta.unavailable.len(), 1);
        assert!(!meta.has(Captured::SchedTracepoints));
        assert_eq!(told.len(), 1);
        assert_eq!(
            told[0].to_string(),
            "note: sched tracepoints not recorded: no permission"
        );
    }
}
