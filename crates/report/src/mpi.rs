//! The MPI section of `contend report`: the thesis's summary (table 4.13, all times in µs as
//! there), the ranks' delay and late time, the call sites (tables 4.14/4.15) with the wait
//! states found at each, and everything that could not be matched or was kept out.

use crate::table::new_table;
use analysis::mpi::{MpiRun, RankTotal};
use analysis::waitstates::UnmatchedKind;
use std::fmt::Write;

/// Names of the call-site ids in an [`MpiRun`] (`function (file:line)`), by id.
pub type SiteNames = Vec<String>;

fn site(names: &SiteNames, id: Option<u64>) -> String {
    match id.and_then(|i| names.get(i as usize)) {
        Some(n) => n.clone(),
        None => "(unknown site)".into(),
    }
}

fn us(ns: u64) -> String {
    group_thousands(ns as f64 / 1e3, 0)
}

fn us_f(ns: f64) -> String {
    group_thousands(ns / 1e3, 2)
}

/// `1 009 775` as the thesis prints its µs: thin groups of three.
fn group_thousands(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    if frac.is_empty() {
        format!("{sign}{out}")
    } else {
        format!("{sign}{out}.{frac}")
    }
}

/// A row of the summary: its label and how to show one column's value.
type SummaryRow = (
    &'static str,
    Box<dyn Fn(&analysis::mpi::SummaryColumn) -> String>,
);

fn per_rank(t: Option<RankTotal>) -> String {
    t.map_or_else(
        || "n/a".into(),
        |t| format!("{} (rank {})", us(t.ns), t.rank),
    )
}

pub fn render(run: &MpiRun, names: &SiteNames) -> String {
    let mut out = String::new();
    let hosts: std::collections::BTreeSet<&str> =
        run.ranks.iter().filter_map(|r| r.host.as_deref()).collect();
    let _ = writeln!(
        out,
        "MPI: {} rank(s) recorded{} on {} host(s){}",
        run.ranks.len(),
        run.world_size
            .map_or(String::new(), |n| format!(" of {n} in MPI_COMM_WORLD")),
        hosts.len().max(1),
        run.ranks
            .iter()
            .find_map(|r| r.library.as_deref())
            .map_or(String::new(), |l| format!("; {l}"))
    );
    if !run.missing_ranks.is_empty() {
        let _ = writeln!(
            out,
            "  missing: rank(s) {} left no trace (started without the MPI wrapper, e.g. a script or container that dropped LD_PRELOAD; ran on a host that does not share this run directory: give its directory with --mpi-from; died before MPI_Init; or their trace was lost); the others are analysed",
            list(&run.missing_ranks)
        );
    }
    if let Some(line) = clocks(run) {
        let _ = writeln!(out, "  {line}");
    }
    // The agreement's wait is the tool's, not the program's: say it where it shows (waits at
    // the first calls after MPI_Init).
    let held: Vec<String> = run
        .ranks
        .iter()
        .filter_map(|r| r.startup_wait_ns.map(|ns| (r.rank, ns)))
        .filter(|&(_, ns)| ns >= 100_000_000)
        .map(|(rank, ns)| format!("{rank} ({:.1} s)", ns as f64 / 1e9))
        .collect();
    if !held.is_empty() {
        let _ = writeln!(
            out,
            "  the MPI wrapper's start-up agreement kept rank(s) {} in MPI_Init, waiting for ranks without the wrapper or without this run directory: waits at the first calls after MPI_Init are contend's, not the program's",
            held.join(", ")
        );
    }
    let unclosed: Vec<u32> = run
        .ranks
        .iter()
        .filter(|r| !r.closed || !r.finalized)
        .map(|r| r.rank)
        .collect();
    for r in &run.ranks {
        if let Some(code) = r.aborted {
            let _ = writeln!(
                out,
                "  rank {} called MPI_Abort with error code {code}",
                r.rank
            );
        }
    }
    if !unclosed.is_empty() {
        let _ = writeln!(
            out,
            "  ended early: rank(s) {} did not reach MPI_Finalize (killed, aborted or exited): their traces end at their last flush",
            list(&unclosed)
        );
    }

    // Table 4.13.
    let _ = writeln!(out, "\nTrace summary (all times in µs)");
    let mut header = vec!["".to_string()];
    header.extend(run.summary.iter().map(|c| c.title.clone()));
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let numeric: Vec<usize> = (1..hdr.len()).collect();
    let mut t = new_table(&hdr, &numeric);
    let rows: [SummaryRow; 15] = [
        ("Number of events", Box::new(|c| c.count.to_string())),
        ("Total duration of events", Box::new(|c| us(c.total_ns))),
        (
            "Duration as % of all ranks' running time",
            Box::new(|c| format!("{:.3}%", c.percent_of_running)),
        ),
        (
            "Running time, all ranks",
            Box::new(|c| us(c.running_total_ns)),
        ),
        ("Avg duration per event", Box::new(|c| us_f(c.mean_ns))),
        ("Min duration", Box::new(|c| us(c.min_ns))),
        ("Max duration", Box::new(|c| us(c.max_ns))),
        (
            "Total delay (waiting suffered)",
            Box::new(|c| us(c.delay_total_ns)),
        ),
        (
            "Avg delay per wait state",
            Box::new(|c| us_f(c.delay_mean_ns)),
        ),
        (
            "Least total delay of a rank",
            Box::new(|c| per_rank(c.least_delayed)),
        ),
        (
            "Most total delay of a rank",
            Box::new(|c| per_rank(c.most_delayed)),
        ),
        (
            "Total late time (waiting caused)",
            Box::new(|c| us(c.late_total_ns)),
        ),
        (
            "Avg late time per wait state",
            Box::new(|c| us_f(c.late_mean_ns)),
        ),
        (
            "Least late time of a rank",
            Box::new(|c| per_rank(c.least_late)),
        ),
        (
            "Most late time of a rank",
            Box::new(|c| per_rank(c.most_late)),
        ),
    ];
    for (label, f) in &rows {
        let mut row = vec![label.to_string()];
        row.extend(run.summary.iter().map(f));
        t.add_row(row);
    }
    let _ = writeln!(out, "{t}");
    let th = &run.waits.thresholds;
    if th.p2p_min_ns > 0 || th.collective_min_ns > 0 {
        let _ = writeln!(
            out,
            "  thresholds: point-to-point wait states of at least {} µs ({} shorter left out), collective of at least {} µs ({} left out)",
            us(th.p2p_min_ns),
            run.waits.counts.below_threshold_p2p,
            us(th.collective_min_ns),
            run.waits.counts.below_threshold_collective
        );
    }

    // Ranks: delay and late time.
    let _ = writeln!(out, "\nRanks (ms)");
    let mut t = new_table(
        &[
            "rank",
            "host",
            "running",
            "in MPI",
            "p2p",
            "collective",
            "delay",
            "late",
            "worst wait state",
        ],
        &[0, 2, 3, 4, 5, 6, 7],
    );
    for r in &run.ranks {
        let w = run.waits.ranks.iter().find(|w| w.rank == r.rank);
        let worst = w
            .and_then(|w| w.by_pattern.iter().max_by_key(|p| p.suffered_ns))
            .filter(|p| p.suffered_ns > 0)
            .map_or(String::new(), |p| {
                format!("{} {}", p.pattern.title(), ms(p.suffered_ns))
            });
        t.add_row(vec![
            r.rank.to_string(),
            r.host.clone().unwrap_or_default(),
            ms(r.running_ns),
            ms(r.mpi_ns),
            ms(r.p2p_ns),
            ms(r.collective_ns),
            ms(w.map_or(0, |w| w.suffered_ns)),
            ms(w.map_or(0, |w| w.caused_ns)),
            worst,
        ]);
    }
    let _ = writeln!(out, "{t}");

    // Wait states by call site (tables 4.14/4.15, with the waiting found there).
    if !run.waits.sites.is_empty() {
        let _ = writeln!(out, "\nWait states by call site (ms)");
        let mut t = new_table(
            &["pattern", "call site", "count", "total", "mean", "max"],
            &[2, 3, 4, 5],
        );
        let mut sites = run.waits.sites.clone();
        sites.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
        for s in sites.iter().take(20) {
            t.add_row(vec![
                s.pattern.title().to_string(),
                site(names, s.site),
                s.count.to_string(),
                ms(s.total_ns),
                ms(s.mean_ns.round() as u64),
                ms(s.max_ns),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    let _ = writeln!(out, "\nMPI calls by call site (ms)");
    let mut t = new_table(
        &[
            "function",
            "call site",
            "count",
            "total",
            "mean",
            "min",
            "max",
        ],
        &[2, 3, 4, 5, 6],
    );
    let mut calls = run.calls.clone();
    calls.sort_by_key(|c| std::cmp::Reverse(c.total_ns));
    for c in calls.iter().take(20) {
        t.add_row(vec![
            c.function.clone(),
            site(names, c.site),
            c.count.to_string(),
            ms(c.total_ns),
            format!("{:.3}", c.mean_ns / 1e6),
            ms(c.min_ns),
            ms(c.max_ns),
        ]);
    }
    let _ = writeln!(out, "{t}");
    if calls.len() > 20 {
        let _ = writeln!(out, "  ({} more call sites in --json)", calls.len() - 20);
    }
    for line in notes(run) {
        let _ = writeln!(out, "  note: {line}");
    }
    out
}

/// How the ranks' clocks were put on rank 0's, when any was not simply shared: which ranks by
/// round trips, which by `CLOCK_REALTIME` (and what that assumes), which not at all, and how
/// far the realtime clocks disagree with the round trips (a cross-check of NTP/PTP).
fn clocks(run: &MpiRun) -> Option<String> {
    use analysis::mpi::ClockSource;
    let with = |source: ClockSource| -> Vec<u32> {
        run.ranks
            .iter()
            .filter(|r| r.clock.source == source)
            .map(|r| r.rank)
            .collect()
    };
    let (exchange, realtime, unaligned) = (
        with(ClockSource::Exchange),
        with(ClockSource::Realtime),
        with(ClockSource::Unaligned),
    );
    if exchange.is_empty() && realtime.is_empty() && unaligned.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !exchange.is_empty() {
        let worst = run
            .ranks
            .iter()
            .filter_map(|r| r.clock.realtime_disagreement_ns)
            .max_by_key(|d| d.unsigned_abs());
        parts.push(format!(
            "rank(s) {} by round trips with rank 0{}",
            list(&exchange),
            worst.map_or(String::new(), |d| format!(
                " (their CLOCK_REALTIME disagrees by up to {:.3} ms)",
                d as f64 / 1e6
            ))
        ));
    }
    if !realtime.is_empty() {
        parts.push(format!(
            "rank(s) {} by CLOCK_REALTIME (they recorded on their own; this assumes the hosts' realtime clocks agree, by NTP or PTP)",
            list(&realtime)
        ));
    }
    if !unaligned.is_empty() {
        parts.push(format!(
            "rank(s) {} not at all (no comparison with rank 0 recorded: their times are their own clocks')",
            list(&unaligned)
        ));
    }
    Some(format!("clocks aligned to rank 0's: {}", parts.join("; ")))
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn list(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What was not matched, kept out, or suspicious, one line each (also for stderr).
pub fn notes(run: &MpiRun) -> Vec<String> {
    let c = &run.waits.counts;
    let v = &run.conversion;
    let mut out = Vec::new();
    if c.unmatched_sends + c.unmatched_receives > 0 {
        let first = run.waits.unmatched.first().map_or(String::new(), |u| {
            format!(
                " (first: a {} by rank {} with rank {}, tag {})",
                match u.kind {
                    UnmatchedKind::Send => "send",
                    UnmatchedKind::Receive => "receive",
                },
                u.rank,
                u.peer,
                u.tag
            )
        });
        out.push(format!(
            "{} send(s) and {} receive(s) have no partner in the traces{first}: counted, not guessed",
            c.unmatched_sends, c.unmatched_receives
        ));
    }
    let pairs = [
        (c.unresolved_receives, "receive(s) with a wildcard source or tag and no status: not matched"),
        (c.unknown_requests, "completion(s) of requests this rank's trace never created"),
        (c.uncompleted_requests, "request(s) never completed in the trace"),
        (c.collectives_incomplete, "collective call(s) that not every member of the communicator recorded"),
        (c.collectives_mismatched, "collective call(s) whose kinds or roots differ between ranks"),
        (c.clock_violations_p2p, "message(s) received before they were sent on the aligned clocks by more than the clocks' alignment error (clock condition violated): given no wait"),
        (c.clock_violations_collective, "collective(s) that ended before their last member entered on the aligned clocks by more than the clocks' alignment error: given no wait"),
        (c.clock_violations_within_error, "wait(s) that ended before their cause began on the aligned clocks, by less than the clocks' alignment error (half a round trip per rank): taken to end when the waiting call returned"),
        (v.intercomm_calls, "call(s) on intercommunicators: not analysed"),
        (v.undefined_comm_calls, "call(s) on communicators the trace never defined: not analysed"),
        (v.unknown_functions, "call(s) of functions this contend does not know (a newer wrapper)"),
        (v.met_comms, "communicator(s) created by calls the wrapper does not intercept: identified by their members and order"),
        (v.cancelled, "cancelled request(s)"),
        (v.broken_groups + v.stray_records, "malformed MPI record(s) skipped"),
    ];
    for (n, what) in pairs {
        if n > 0 {
            out.push(format!("{n} {what}"));
        }
    }
    out
}

/// The job as a Perfetto timeline: one process per rank (named `rank R`), its MPI calls as
/// slices named by function with their call site, each wait state as a slice nested in the
/// call it happened in (`Late Sender (rank 0 late)`). Times are on the aligned clock of the
/// analysis (rank 0's CLOCK_MONOTONIC unless alignment needed a shift).
pub fn timeline(run: &MpiRun, names: &SiteNames) -> export::perfetto::Timeline {
    use export::perfetto::{ArgValue, ProcessTrack, Slice, ThreadTrack, Timeline};
    let mut next_id = 0u64;
    let mut id = || {
        next_id += 1;
        next_id
    };
    // Process ids must be distinct: a rank's pid, or one made up beyond the pid range.
    let pid_of = |rank: u32| {
        run.ranks
            .iter()
            .find(|r| r.rank == rank && r.pid != 0)
            .map_or(0x4000_0000 + rank, |r| r.pid)
    };
    let mut processes: Vec<ProcessTrack> = Vec::new();
    for r in &run.ranks {
        let pid = pid_of(r.rank);
        let mut slices = Vec::new();
        for c in run.spans.iter().filter(|c| c.rank == r.rank) {
            let mut args = vec![("call site".into(), ArgValue::Str(site(names, c.site)))];
            // A polling run is one slice, from its first poll to its end, with its count.
            let name = if c.polls > 0 {
                args.push(("unsuccessful polls".into(), ArgValue::Uint(c.polls)));
                format!("{} ×{} (nothing yet)", c.function, c.polls)
            } else {
                c.function.to_string()
            };
            slices.push(Slice {
                id: id(),
                start_ns: c.enter_ns,
                dur_ns: c.exit_ns.saturating_sub(c.enter_ns),
                name,
                category: "mpi".into(),
                args,
            });
        }
        processes.push(ProcessTrack {
            pid,
            name: format!(
                "rank {}{}",
                r.rank,
                r.host
                    .as_deref()
                    .map_or(String::new(), |h| format!(" ({h})"))
            ),
            threads: vec![ThreadTrack {
                tid: pid,
                name: format!("rank {}", r.rank),
                slices,
                counters: Vec::new(),
            }],
            counters: Vec::new(),
        });
    }
    for i in &run.waits.instances {
        let Some(p) = run.ranks.iter().position(|r| r.rank == i.rank) else {
            continue;
        };
        let mut args = vec![("wait state".into(), ArgValue::Str(i.pattern.slug().into()))];
        let name = match i.cause {
            Some(c) => {
                args.push(("caused by rank".into(), ArgValue::Uint(c.into())));
                format!("{} (rank {c} late)", i.pattern.title())
            }
            None => i.pattern.title().to_string(),
        };
        processes[p].threads[0].slices.push(Slice {
            id: id(),
            start_ns: i.start_ns,
            dur_ns: i.wait_ns,
            name,
            category: "mpi-wait".into(),
            args,
        });
    }
    // No arrows: a wait begins before the call that ends it, and Perfetto's flows only go
    // forward in time; the causing rank is in the slice's name and arguments.
    Timeline {
        processes,
        flows: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_are_grouped_as_in_the_thesis() {
        assert_eq!(us(1_009_775_000), "1 009 775");
        assert_eq!(us(43_000), "43");
        assert_eq!(us_f(137_620.0), "137.62");
        assert_eq!(group_thousands(1_674.59, 2), "1 674.59");
    }
}
