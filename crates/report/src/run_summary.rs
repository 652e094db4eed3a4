//! What a run directory holds: the run's facts from meta.json and, per stream, its events by
//! kind, time span, drops and whether it was closed properly. The opening section of
//! `contend report`; later issues add their sections after it.

use crate::table::{new_table, or_na, printable};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use trace::meta::{Meta, Unavailable};
use trace::Stream;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunSummary {
    pub run: String,
    pub command: Vec<String>,
    pub started_utc: String,
    pub started_unix_ns: u64,
    pub ended_utc: Option<String>,
    /// Wall-clock duration from meta.json, in s (`None` when it cannot be right).
    pub duration_s: Option<f64>,
    /// meta.json's end is before its start: no duration is shown, and this says why.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub duration_invalid: bool,
    pub host: String,
    pub kernel: String,
    pub clock: ClockSummary,
    pub captured: Vec<String>,
    pub unavailable: Vec<Unavailable>,
    pub streams: Vec<StreamSummary>,
    pub events: u64,
    pub events_dropped: u64,
    pub exit_status: Option<i32>,
    /// A generator run beside the program (`record --interfere`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interference: Option<trace::meta::Interference>,
}

/// The clock the streams' timestamps count.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ClockSummary {
    pub source: trace::ClockSource,
    /// Ticks per second.
    pub hz: u64,
    /// Pairs (ticks, CLOCK_MONOTONIC ns) recorded to convert and check the clock.
    pub calibration_points: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StreamSummary {
    pub file: String,
    pub kind: trace::StreamKind,
    pub pid: u32,
    pub tid: u32,
    pub rank: Option<i32>,
    pub events: u64,
    pub events_by_kind: BTreeMap<String, u64>,
    /// From the first to the last event, in s (null without events).
    pub span_s: Option<f64>,
    pub dropped: u64,
    /// False when the writer never closed the stream (killed, or still running).
    pub complete: bool,
}

impl StreamSummary {
    pub fn new(file: &str, s: &Stream<'_>) -> StreamSummary {
        let hz = s.header.clock_hz as f64;
        StreamSummary {
            file: file.to_string(),
            kind: s.header.kind,
            pid: s.header.pid,
            tid: s.header.tid,
            rank: (s.header.rank >= 0).then_some(s.header.rank),
            events: s.events,
            events_by_kind: s.counts.iter().map(|(k, n)| (k.name(), *n)).collect(),
            span_s: match (s.first_ts, s.last_ts) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / hz),
                _ => None,
            },
            dropped: s.dropped,
            complete: s.is_complete(),
        }
    }
}

impl RunSummary {
    pub fn new(run: &str, meta: &Meta, streams: Vec<StreamSummary>) -> RunSummary {
        RunSummary {
            run: run.to_string(),
            command: meta.command.clone(),
            started_utc: meta.started.utc.clone(),
            started_unix_ns: meta.started.unix_ns,
            ended_utc: meta.ended.as_ref().map(|e| e.utc.clone()),
            duration_s: meta
                .ended
                .as_ref()
                .and_then(|e| e.unix_ns.checked_sub(meta.started.unix_ns))
                .map(|ns| ns as f64 / 1e9),
            duration_invalid: meta
                .ended
                .as_ref()
                .is_some_and(|e| e.unix_ns < meta.started.unix_ns),
            host: meta.host.hostname.clone(),
            kernel: meta.host.kernel.clone(),
            clock: ClockSummary {
                source: meta.clock.source,
                hz: meta.clock.hz,
                calibration_points: meta.clock.calibration.len(),
            },
            captured: meta.captured.iter().map(|c| c.to_string()).collect(),
            unavailable: meta.unavailable.clone(),
            // Saturating: the counts come from files, which may be hostile.
            events: streams.iter().fold(0u64, |a, s| a.saturating_add(s.events)),
            events_dropped: streams
                .iter()
                .fold(0u64, |a, s| a.saturating_add(s.dropped)),
            streams,
            exit_status: meta.exit_status,
            interference: meta.interference.clone(),
        }
    }
}

/// The run's header: command, times, host, clock, what was captured and what not, events.
pub fn render(r: &RunSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Run {}", r.run);
    let command = if r.command.is_empty() {
        "n/a".to_string()
    } else {
        printable(&r.command.join(" "))
    };
    let _ = writeln!(out, "  command:     {command}");
    let _ = writeln!(
        out,
        "  started:     {} ({}){}",
        r.started_utc,
        match (r.duration_s, r.duration_invalid) {
            (_, true) => "duration invalid: meta.json ends before it starts".into(),
            (Some(d), false) => format!("{d:.3} s"),
            (None, false) => "duration n/a".into(),
        },
        r.exit_status
            .map(|s| format!(", exit status {s}"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "  host:        {} (Linux {})", r.host, r.kernel);
    let c = &r.clock;
    let _ = writeln!(
        out,
        "  clock:       {} ({} Hz{})",
        c.source.name(),
        c.hz,
        match c.calibration_points {
            0 => String::new(),
            n => format!(", {n} calibration points"),
        }
    );
    let captured = if r.captured.is_empty() {
        "nothing".to_string()
    } else {
        r.captured.join(", ")
    };
    let _ = writeln!(out, "  captured:    {captured}");
    for u in &r.unavailable {
        let _ = writeln!(out, "  unavailable: {}: {}", u.what, u.why);
    }
    if let Some(i) = &r.interference {
        let what = i
            .command
            .get(1..3)
            .map_or("generator".into(), |w| w.join(" "));
        let rate = match (i.achieved_gb_s, i.target_gb_s, &i.error) {
            (Some(a), Some(t), _) => format!("{a:.2} GB/s achieved (target {t:.2} GB/s)"),
            (Some(a), None, _) => format!("{a:.2} GB/s achieved (flat out)"),
            (None, _, Some(e)) => format!("no result: {e}"),
            (None, _, None) => "no result".into(),
        };
        let _ = writeln!(
            out,
            "  interfered:  {what} on CPU(s) {} beside the program: {rate}",
            topology::CpuSet::list_in_order(&i.cpus)
        );
    }
    let _ = writeln!(
        out,
        "  events:      {} in {} stream(s), {} dropped",
        r.events,
        r.streams.len(),
        r.events_dropped
    );
    out
}

/// The streams of the run, one row each: printed last (a server's thousands of threads would
/// push every finding off the screen).
pub fn render_streams(r: &RunSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Streams");
    let mut table = new_table(
        &[
            "STREAM", "KIND", "PID", "TID/RANK", "EVENTS", "BY KIND", "SPAN (s)", "DROPPED",
            "CLOSED",
        ],
        &[2, 3, 4, 6, 7],
    );
    // DROPPED stays: nothing lost goes unsaid.
    table.drop_first(&[5, 6, 8, 1, 3]);
    for s in &r.streams {
        let by_kind: Vec<String> = s
            .events_by_kind
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        table.add_row(vec![
            s.file.clone(),
            s.kind.name().to_string(),
            s.pid.to_string(),
            match s.rank {
                Some(r) => format!("rank {r}"),
                None => s.tid.to_string(),
            },
            s.events.to_string(),
            by_kind.join(", "),
            or_na(s.span_s.map(|x| format!("{x:.6}"))),
            s.dropped.to_string(),
            if s.complete { "yes" } else { "NO" }.to_string(),
        ]);
    }
    out.push_str(&table.to_string());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_and_unavailable() {
        let mut meta = Meta::new(vec!["./app".into()]);
        meta.captured = vec!["mark".into()];
        meta.unavailable = vec![Unavailable {
            what: "hardware counters".into(),
            why: "no PMU".into(),
        }];
        let stream = StreamSummary {
            file: "streams/t1.cst".into(),
            kind: trace::StreamKind::Thread,
            pid: 1,
            tid: 2,
            rank: None,
            events: 5,
            events_by_kind: [("mark".to_string(), 5)].into_iter().collect(),
            span_s: Some(0.5),
            dropped: 3,
            complete: false,
        };
        let r = RunSummary::new("contend.data", &meta, vec![stream]);
        let text = render(&r) + &render_streams(&r);
        assert!(
            text.contains("unavailable: hardware counters: no PMU"),
            "{text}"
        );
        assert!(
            text.contains("events:      5 in 1 stream(s), 3 dropped"),
            "{text}"
        );
        assert!(text.contains("mark: 5"));
        assert!(text.contains(" NO "), "{text}");
    }
}
