//! The locks section of `contend report`: the summary (thesis table 4.9) beside the same figures
//! on the critical path (table 4.10), the per-lock table (4.12) with call sites, condition waits
//! and barriers as idle time, and what could not be paired.

use crate::table::new_table;
use analysis::locks::whatif::{Method, WhatIfs};
use analysis::locks::{LockKey, LockReport, LockStats, Summary};
use std::collections::HashMap;
use std::fmt::Write;

/// Names for addresses, from symbolisation (absent names are shown as hex addresses).
#[derive(Debug, Clone, Default)]
pub struct Naming {
    /// Call site address -> `function (file:line)`.
    pub sites: HashMap<u64, String>,
    /// Lock -> the global it is, e.g. `hot_lock` or `queue+0x40`.
    pub locks: HashMap<LockKey, String>,
    /// Call site address -> its frames, innermost first (inlined functions, then the function
    /// the call is written in), for profiles.
    pub frames: HashMap<u64, Vec<export::pprof::Frame>>,
    /// Lock -> the heap allocation it lives in (runs recorded with `--alloc-sites`).
    pub allocations: HashMap<LockKey, Allocation>,
}

/// The heap block a lock lives in, for people and for JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Allocation {
    /// The allocation's call site address, and its name.
    pub site: Option<u64>,
    pub site_name: String,
    pub block_address: u64,
    /// Bytes (4294967295: at least that many).
    pub size: u64,
    /// The lock's offset in the block.
    pub offset: u64,
}

impl Allocation {
    /// `block of 72 B from open_account (heap_locks.cpp:71), +16`.
    pub fn describe(&self) -> String {
        format!(
            "block of {} B from {}, +{}",
            self.size, self.site_name, self.offset
        )
    }
}

impl Naming {
    pub fn site(&self, site: Option<u64>) -> String {
        match site {
            Some(a) => self
                .sites
                .get(&a)
                .cloned()
                .unwrap_or_else(|| format!("{a:#x}")),
            None => "(unknown site)".into(),
        }
    }

    /// The lock's name alone (its address where it has none): for stack frames and labels.
    pub fn lock_label(&self, key: LockKey) -> String {
        self.locks
            .get(&key)
            .cloned()
            .unwrap_or_else(|| format!("{:#x}", key.address))
    }

    pub fn lock(&self, key: LockKey) -> String {
        match self.locks.get(&key) {
            Some(n) => format!("{n} ({:#x})", key.address),
            None => format!("{:#x}", key.address),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Wait,
    Hold,
    Acquisitions,
    Contended,
    Critical,
}

impl std::str::FromStr for SortKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "wait" => SortKey::Wait,
            "hold" => SortKey::Hold,
            "acquisitions" => SortKey::Acquisitions,
            "contended" => SortKey::Contended,
            "critical" => SortKey::Critical,
            _ => {
                return Err(format!(
                    "unknown sort key `{s}`: use wait, hold, acquisitions, contended or critical"
                ))
            }
        })
    }
}

pub fn sort_locks(locks: &mut [LockStats], key: SortKey) {
    locks.sort_by(|a, b| {
        let k = |l: &LockStats| match key {
            SortKey::Wait => l.wait_ns,
            SortKey::Hold => l.hold_ns,
            SortKey::Acquisitions => l.acquisitions,
            SortKey::Contended => l.contended,
            SortKey::Critical => l.critical.wait_ns,
        };
        k(b).cmp(&k(a)).then(b.wait_ns.cmp(&a.wait_ns))
    });
}

pub fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

pub fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

fn pct(part: u64, whole: u64) -> String {
    Summary::share(part, whole)
        .map(|p| format!("{p:.2} %"))
        .unwrap_or_else(|| "n/a".into())
}

/// The summary table: each figure for all selected events and for those on the critical path.
fn summary_table(r: &LockReport) -> String {
    let all = &r.summary;
    let cp = &r.critical;
    let run = r.duration_ns();
    let mut t = new_table(&["", "ALL EVENTS", "ON THE CRITICAL PATH"], &[1, 2]);
    t.keep(&[1]);
    t.add_row(vec![
        "mutex events (acquisition to release)".to_string(),
        all.events.to_string(),
        format!("{} ({} of events)", cp.events, pct(cp.events, all.events)),
    ]);
    t.add_row(vec![
        "contended acquisitions".to_string(),
        format!(
            "{} ({} of events)",
            all.contended,
            pct(all.contended, all.events)
        ),
        cp.contended.to_string(),
    ]);
    t.add_row(vec![
        "time in protected sections, every event (ms)".to_string(),
        format!(
            "{} ({} of run)",
            ms(all.protected_ns),
            pct(all.protected_ns, run)
        ),
        format!(
            "{} ({} of run)",
            ms(cp.protected_ns),
            pct(cp.protected_ns, run)
        ),
    ]);
    t.add_row(vec![
        "time in protected sections, overlaps once (ms)".to_string(),
        format!(
            "{} ({} of run)",
            ms(all.protected_union_ns),
            pct(all.protected_union_ns, run)
        ),
        format!(
            "{} ({} of run)",
            ms(cp.protected_union_ns),
            pct(cp.protected_union_ns, run)
        ),
    ]);
    t.add_row(vec![
        "time waiting to acquire (ms)".to_string(),
        format!(
            "{} ({} of event time)",
            ms(all.wait_ns),
            pct(all.wait_ns, all.duration_ns)
        ),
        format!(
            "{} ({} of event time)",
            ms(cp.wait_ns),
            pct(cp.wait_ns, all.duration_ns)
        ),
    ]);
    t.add_row(vec![
        "mean hold (µs)".to_string(),
        us(all.mean_hold_ns),
        us(cp.mean_hold_ns),
    ]);
    t.to_string()
}

/// The what-if cell of a lock: the replay's run time (the bound beside it), or the bound alone.
fn what_if_cell(l: &LockStats, what_if: Option<&WhatIfs>) -> String {
    if l.contended == 0 {
        return "no waits".into();
    }
    match what_if.and_then(|w| w.locks.iter().find(|p| p.lock == l.lock)) {
        Some(p) if p.method == Method::Replay => {
            format!("{} (bound {})", ms(p.predicted_ns), ms(p.bound_ns))
        }
        Some(p) => format!("{} (bound only)", ms(p.bound_ns)),
        None => "n/a".into(),
    }
}

/// The footnote under the lock table: what the what-if column assumed, in lines that fit
/// a 100-column terminal.
fn what_if_note(w: Option<&WhatIfs>, naming: &Naming) -> String {
    let Some(w) = w else {
        return "* not replayed (see the notes above)\n".into();
    };
    let mut text = format!(
        "* the run's time if that lock never made a thread wait: the recorded schedule replayed on {} CPUs ({}), assuming: {}.",
        w.cpus,
        if w.cpus_from == "placement" {
            "the CPUs the run was confined to"
        } else {
            "online"
        },
        w.assumptions.join("; ")
    );
    if let Some(r) = w.replayed_as_recorded_ns {
        let err = 100.0 * (r as f64 - w.measured_ns as f64) / w.measured_ns.max(1) as f64;
        let _ = write!(
            text,
            " Check: replayed with every lock kept, the model gives {} ms for the {} ms measured ({:+.1} %).",
            ms(r),
            ms(w.measured_ns),
            err
        );
    }
    text.push_str(" Bound: no schedule is shorter than its longest thread alone or than all the CPU time shared by the CPUs.");
    let width = crate::table::fit_width().map_or(98, |w| w.min(98));
    let mut out = wrap(&text, width, "  ");
    for p in w.locks.iter().filter(|p| p.why_bound.is_some()) {
        let _ = writeln!(
            out,
            "  {}: bound only: {}",
            naming.lock(p.lock),
            p.why_bound.as_deref().unwrap_or_default()
        );
    }
    out
}

/// `text` in lines of at most `width` characters (a longer word alone on its line), the
/// lines after the first indented.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.trim().is_empty() {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// One line naming the lock waited on longest, its waits and its call site with the most
/// waiting: printed right after the run's header, so that the first screen of a terminal says
/// it whatever follows.
pub fn headline(r: &LockReport, naming: &Naming) -> Option<String> {
    let top = r
        .locks
        .iter()
        .filter(|l| l.wait_ns > 0)
        .max_by_key(|l| l.wait_ns)?;
    let site = top.sites.iter().max_by_key(|s| s.wait_ns);
    let run_ns = r.end_ns.saturating_sub(r.start_ns);
    Some(format!(
        "Top lock: {} waited {} ms in {} contended acquisition(s){}{}",
        naming.lock(top.lock),
        ms(top.wait_ns),
        top.contended,
        if run_ns > 0 {
            format!(
                " ({:.1} thread-s per s of run)",
                top.wait_ns as f64 / run_ns as f64
            )
        } else {
            String::new()
        },
        site.map_or(String::new(), |s| format!(
            ", most at {} ({} ms)",
            naming.site(s.site),
            ms(s.wait_ns)
        ))
    ))
}

/// The per-lock table, and whether its what-if column (the one the footnote explains) is shown.
fn lock_table(locks: &[LockStats], naming: &Naming, what_if: Option<&WhatIfs>) -> (String, bool) {
    let mut t = new_table(
        &[
            "LOCK",
            "KIND",
            "ACQUIRED",
            "CONTENDED",
            "WAIT (ms)",
            "WAIT MEAN (µs)",
            "P50 (µs)",
            "P99 (µs)",
            "MAX (µs)",
            "HOLD (ms)",
            "HOLD MEAN (µs)",
            "OWNER CHANGES",
            "THREADS",
            "CP EVENTS",
            "CP WAIT (ms)",
            "RUN IF ITS WAITS WERE 0 (ms)*",
        ],
        &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    );
    // Kept to the last: the lock, how often and how long it was waited for, and the what-if.
    t.drop_first(&[10, 6, 7, 8, 11, 12, 13, 1, 5, 9, 14, 2]);
    let opt = |v: Option<u64>| v.map(|x| us(x as f64)).unwrap_or_else(|| "n/a".into());
    for l in locks {
        t.add_row(vec![
            naming.lock(l.lock),
            l.kind.name().to_string(),
            l.acquisitions.to_string(),
            l.contended.to_string(),
            ms(l.wait_ns),
            us(l.mean_wait_ns),
            opt(l.wait_p50_ns),
            opt(l.wait_p99_ns),
            opt(l.wait_max_ns),
            ms(l.hold_ns),
            us(l.mean_hold_ns),
            l.owner_changes.to_string(),
            l.threads.len().to_string(),
            l.critical.events.to_string(),
            ms(l.critical.wait_ns),
            what_if_cell(l, what_if),
        ]);
    }
    // Column 15: RUN IF ITS WAITS WERE 0 (ms)*.
    (t.to_string(), t.shows(15))
}

fn site_table(l: &LockStats, naming: &Naming, top: usize) -> String {
    let mut t = new_table(
        &[
            "CALL SITE",
            "ACQUIRED",
            "CONTENDED",
            "WAIT (ms)",
            "HOLD (ms)",
            "CP EVENTS",
            "CP WAIT (ms)",
        ],
        &[1, 2, 3, 4, 5, 6],
    );
    t.drop_first(&[5, 6, 4, 2, 1]);
    for s in l.sites.iter().take(top) {
        t.add_row(vec![
            naming.site(s.site),
            s.acquisitions.to_string(),
            s.contended.to_string(),
            ms(s.wait_ns),
            ms(s.hold_ns),
            s.critical_events.to_string(),
            ms(s.critical_wait_ns),
        ]);
    }
    t.to_string()
}

pub struct RenderOptions {
    /// Locks shown (after sorting), and call sites per lock.
    pub top: usize,
    pub sites_per_lock: usize,
}

/// Where the probe measured, from meta.json: a zero it measured is not a zero it never saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Coverage {
    /// The processes the probe was loaded in (absent: a run recorded before contend counted
    /// them).
    pub probe_processes: Option<u64>,
    /// What the probe could not measure (`unavailable` entries about locks: a static program
    /// a launcher ran, processes it never entered).
    pub not_measured: Vec<trace::meta::Unavailable>,
}

impl Coverage {
    /// `meta.json`'s account of the probe.
    pub fn of(meta: &trace::Meta) -> Coverage {
        Coverage {
            probe_processes: meta.lock_probe_processes,
            not_measured: meta
                .unavailable
                .iter()
                .filter(|u| u.what.starts_with("locks "))
                .cloned()
                .collect(),
        }
    }
}

/// The locks section of a run whose locks were asked for but not measured: the reason, never
/// a table of zeros.
pub fn render_not_measured(why: &str) -> String {
    format!("Locks: not measured ({why})\n")
}

/// The whole locks section as text.
pub fn render(
    r: &LockReport,
    naming: &Naming,
    coverage: &Coverage,
    opts: &RenderOptions,
) -> String {
    let mut out = String::new();
    let threads = r.threads.iter().filter(|t| t.holds > 0).count();
    let _ = writeln!(
        out,
        "Locks: {} mutex events on {} lock(s) by {} thread(s) over {} ms",
        r.summary.events,
        r.locks.len(),
        threads,
        ms(r.duration_ns())
    );
    // Which sources the figures come from (the issue asks the report to say): only the
    // interposed pthread calls; futex waits of locks that bypass pthread are not traced.
    let _ = writeln!(
        out,
        "  source: pthread calls (LD_PRELOAD probe); locks that never call pthread (Rust std, parking_lot, Go, Java) are not seen here: their blocked futex waits are in the Waits section (recorded with --locks)"
    );
    if !r.filter.is_empty() {
        let _ = writeln!(out, "  filtered: {}", describe_filter(&r.filter));
    }
    if r.sample_every > 1 {
        let _ = writeln!(
            out,
            "  sampled: 1 in {} uncontended acquisitions recorded, every contended one; counts and hold times are estimates",
            r.sample_every
        );
    }
    if let Some(n) = coverage.probe_processes {
        let _ = writeln!(out, "  probe: loaded in {n} process(es)");
    }
    for u in &coverage.not_measured {
        let _ = writeln!(out, "  not measured: {}: {}", u.what, u.why);
    }
    out.push('\n');
    out.push_str(&summary_table(r));
    out.push_str("\n\n");
    if r.locks.is_empty() {
        match coverage.probe_processes {
            Some(n) if coverage.not_measured.is_empty() => {
                let _ = writeln!(
                    out,
                    "No lock was acquired: the probe, loaded in {n} process(es), saw no pthread lock taken (a measured 0)."
                );
            }
            Some(n) => {
                let _ = writeln!(
                    out,
                    "No lock was acquired in the {n} process(es) the probe was loaded in (a measured 0); the rest were not measured (above)."
                );
            }
            None => out.push_str("No lock was acquired.\n"),
        }
    } else {
        let shown = r.locks.len().min(opts.top);
        let _ = writeln!(
            out,
            "Per lock ({} of {}; CP = critical path; waits are from request to acquisition):",
            shown,
            r.locks.len()
        );
        let (table, what_if_shown) = lock_table(&r.locks[..shown], naming, r.what_if.as_ref());
        out.push_str(&table);
        out.push('\n');
        // The footnote explains the starred column: none when it was left out to fit.
        if what_if_shown && r.locks[..shown].iter().any(|l| l.contended > 0) {
            out.push_str(&what_if_note(r.what_if.as_ref(), naming));
        }
        for l in &r.locks[..shown] {
            let _ = writeln!(out, "\n{} — call sites:", naming.lock(l.lock));
            out.push_str(&site_table(l, naming, opts.sites_per_lock));
            out.push('\n');
        }
    }
    if !r.conds.is_empty() {
        out.push_str("\nCondition waits (idle time, not lock contention):\n");
        let mut t = new_table(
            &[
                "CONDITION VARIABLE",
                "WAITS",
                "TIMED OUT",
                "WAIT (ms)",
                "MAX (ms)",
                "CALL SITES",
            ],
            &[1, 2, 3, 4],
        );
        for c in &r.conds {
            let sites: Vec<String> = c.sites.iter().map(|&s| naming.site(Some(s))).collect();
            t.add_row(vec![
                format!("{:#x}", c.address),
                c.waits.to_string(),
                c.timeouts.to_string(),
                ms(c.wait_ns),
                ms(c.max_wait_ns),
                sites.join(", "),
            ]);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    if !r.barriers.is_empty() {
        out.push_str("\nBarrier waits (idle time):\n");
        let mut t = new_table(&["BARRIER", "WAITS", "WAIT (ms)", "MAX (ms)"], &[1, 2, 3]);
        for b in &r.barriers {
            t.add_row(vec![
                format!("{:#x}", b.address),
                b.waits.to_string(),
                ms(b.wait_ns),
                ms(b.max_wait_ns),
            ]);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    out
}

/// One line per pairing problem, for stderr.
pub fn unmatched_notes(r: &LockReport) -> Vec<String> {
    let u = &r.unmatched;
    let mut notes = Vec::new();
    if u.releases > 0 {
        notes.push(format!(
            "{} lock release(s) had no matching acquisition on their thread (dropped events, or a lock released by a thread that does not hold it)",
            u.releases
        ));
    }
    if u.open_holds > 0 {
        notes.push(format!(
            "{} hold(s) were still open when the trace ended; counted until its end",
            u.open_holds
        ));
    }
    if u.open_waits > 0 {
        notes.push(format!(
            "{} wait(s) never ended before the trace did",
            u.open_waits
        ));
    }
    if u.backwards > 0 {
        notes.push(format!(
            "{} lock event(s) are timed before the event they end (an acquisition before its wait, a release before its acquisition): the stream is damaged; those waits and holds are counted as 0",
            u.backwards
        ));
    }
    notes
}

fn describe_filter(f: &analysis::locks::Filter) -> String {
    let mut parts = Vec::new();
    if let Some(m) = f.min_duration_ns {
        parts.push(format!("events of at least {} µs", us(m as f64)));
    }
    if let Some(m) = f.max_duration_ns {
        parts.push(format!("events of at most {} µs", us(m as f64)));
    }
    if !f.locks.is_empty() {
        parts.push(format!("{} lock(s)", f.locks.len()));
    }
    if !f.sites.is_empty() {
        parts.push(format!("{} call site(s)", f.sites.len()));
    }
    if !f.threads.is_empty() {
        parts.push(format!("threads {:?}", f.threads));
    }
    parts.join(", ")
}

#[cfg(test)]
mod coverage_tests {
    use super::*;

    fn no_locks() -> LockReport {
        analysis::locks::analyze(
            &analysis::locks::LockInput {
                span: Some((0, 1_000_000)),
                ..Default::default()
            },
            &analysis::locks::Filter::default(),
        )
    }

    fn render_with(coverage: &Coverage) -> String {
        render(
            &no_locks(),
            &Naming::default(),
            coverage,
            &RenderOptions {
                top: 10,
                sites_per_lock: 5,
            },
        )
    }

    #[test]
    fn a_measured_zero_says_where_it_was_measured() {
        let text = render_with(&Coverage {
            probe_processes: Some(1),
            not_measured: Vec::new(),
        });
        assert!(
            text.contains("  probe: loaded in 1 process(es)\n"),
            "{text}"
        );
        assert!(
            text.contains("No lock was acquired: the probe, loaded in 1 process(es), saw no pthread lock taken (a measured 0)."),
            "{text}"
        );
        // A run recorded before the probe announced itself: as it always read.
        let old = render_with(&Coverage::default());
        assert!(old.contains("\nNo lock was acquired.\n") && !old.contains("probe: loaded"));
    }

    #[test]
    fn what_was_not_measured_is_listed_and_the_zero_is_qualified() {
        let text = render_with(&Coverage {
            probe_processes: Some(1),
            not_measured: vec![trace::meta::Unavailable {
                what: "locks of ./static".into(),
                why: "./static is statically linked".into(),
            }],
        });
        assert!(
            text.contains("  not measured: locks of ./static: ./static is statically linked\n"),
            "{text}"
        );
        assert!(
            text.contains("No lock was acquired in the 1 process(es) the probe was loaded in (a measured 0); the rest were not measured (above)."),
            "{text}"
        );
        assert_eq!(
            render_not_measured("prog is statically linked"),
            "Locks: not measured (prog is statically linked)\n"
        );
    }

    #[test]
    fn coverage_is_read_from_meta() {
        let mut meta = trace::Meta::new(vec!["x".into()]);
        meta.lock_probe_processes = Some(3);
        meta.unavailable = vec![
            trace::meta::Unavailable {
                what: "locks in 2 process(es)".into(),
                why: "w".into(),
            },
            trace::meta::Unavailable {
                what: "hardware counters".into(),
                why: "no PMU".into(),
            },
        ];
        let c = Coverage::of(&meta);
        assert_eq!(c.probe_processes, Some(3));
        assert_eq!(c.not_measured.len(), 1);
        assert_eq!(c.not_measured[0].what, "locks in 2 process(es)");
    }
}
