//! The sharing section, modelled on perf c2c's two tables: the shared cache lines by
//! cross-thread transfers (what each line belongs to, accesses, loads, stores, threads, the
//! kind of sharing, the estimated cost, what separating its fields would save), then for the
//! top lines the distribution over offsets (share of transfers, loads, stores, thread, code
//! address, symbol, source line, CPUs and nodes), the fix hint, and an SVG heat strip of which
//! thread touches which bytes.

use crate::table::new_table;
use analysis::concurrency::Concurrency;
use analysis::sharing::{Class, LineReport, SharingReport, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use trace::sharing::{AccessKind, PmuAccess, PmuSummary};

/// What the caller resolved for the report: names of lines and code.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Naming {
    /// Per (pid, line id): what the line belongs to (`stats+0x0 (global)`, `malloc'd at main
    /// (accumulators.c:41), +0x40`, `[stack]`).
    pub lines: BTreeMap<String, String>,
    /// Per (pid, code address): `function (file:line)`.
    pub code: BTreeMap<String, CodeName>,
    /// CPU → NUMA node, from the run's topology.
    pub node_of_cpu: BTreeMap<u32, u32>,
}

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct CodeName {
    pub symbol: String,
    pub source: Option<String>,
}

/// Keys of [`Naming`] maps.
pub fn line_key(pid: u32, id: u32) -> String {
    format!("{pid}/{id}")
}
pub fn code_key(pid: u32, pc: u64) -> String {
    format!("{pid}/{pc:#x}")
}

/// Per-process facts shown above the tables.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ProcessLine {
    pub pid: u32,
    pub program: String,
    pub line_size: u32,
    pub hot_after: u32,
    pub sample_every: u32,
    pub threads: usize,
    pub reads: u64,
    pub writes: u64,
    pub transfers: u64,
    pub hot_lines: u64,
    pub hot_lines_dropped: u64,
    pub history_dropped: u64,
    /// Present for results of the PMU back end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pmu: Option<PmuSummary>,
    /// How long two or more of its threads were on a CPU at once (`None`: not measured).
    pub concurrency: Option<Concurrency>,
}

/// One process's header line for the PMU back end: what the samples were and what they showed.
fn pmu_header(p: &ProcessLine, s: &PmuSummary) -> String {
    let mut losses = Vec::new();
    if s.lost > 0 {
        losses.push(format!("{} sample(s) lost by the kernel", s.lost));
    }
    if s.without_address > 0 {
        losses.push(format!("{} without a data address", s.without_address));
    }
    if s.malformed > 0 {
        losses.push(format!("{} record(s) not decodable", s.malformed));
    }
    if s.threads_folded > 0 {
        losses.push(format!(
            "{} thread(s) past the 65535th counted as the last",
            s.threads_folded
        ));
    }
    if s.other_samples > 0 {
        losses.push(format!("{} sample(s) of other events", s.other_samples));
    }
    format!(
        "Sharing: process {} ({}), from the PMU ({}): {} memory samples ({} loads, {} stores) by {} thread(s); HITM {} local, {} remote{}; {} line(s) shown (line size {} B){}\n  (counts are estimates: each sample stands for its sampling period; HITM and latency columns are raw samples)",
        p.pid,
        p.program,
        s.events.join(", "),
        s.samples,
        s.load_samples,
        s.store_samples,
        p.threads,
        s.hitm_local,
        s.hitm_remote,
        if s.peer > 0 { format!(", {} from a peer cache", s.peer) } else { String::new() },
        p.hot_lines,
        p.line_size,
        if losses.is_empty() { String::new() } else { format!("; file-wide: {}", losses.join(", ")) },
    )
}

/// Raw sample counts: local HITM, remote HITM, peer-cache hits.
fn transfer_cells(p: &Option<PmuAccess>) -> [String; 3] {
    match p {
        Some(p) => [
            p.hitm_local.to_string(),
            p.hitm_remote.to_string(),
            p.peer.to_string(),
        ],
        None => ["n/a".into(), "n/a".into(), "n/a".into()],
    }
}

fn latency_cell(p: &Option<PmuAccess>) -> String {
    match p {
        Some(p) if p.latency_samples > 0 => format!(
            "{:.0} (max {})",
            p.latency_cycles as f64 / p.latency_samples as f64,
            p.latency_max
        ),
        _ => "-".into(),
    }
}

fn class_cell(l: &LineReport) -> String {
    match l.class {
        Some(c) => c.title().to_string(),
        None if l.pmu.is_some() => "no transfer sampled".to_string(),
        None => "none after hot".to_string(),
    }
}

fn kind_name(k: AccessKind) -> &'static str {
    match k {
        AccessKind::Read => "load",
        AccessKind::Write => "store",
        AccessKind::AtomicRead => "atomic load",
        AccessKind::AtomicWrite => "atomic rmw/store",
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The whole section as text. `top` lines get their distribution table.
pub fn render(
    report: &SharingReport,
    processes: &[ProcessLine],
    naming: &Naming,
    top: usize,
    transfer_ns: f64,
) -> String {
    let mut out = String::new();
    for p in processes {
        if let Some(s) = &p.pmu {
            let _ = writeln!(out, "{}", pmu_header(p, s));
            continue;
        }
        let _ = writeln!(
            out,
            "Sharing: process {} ({}): {} thread(s), {} reads and {} writes instrumented, {} transfers on all lines; {} line(s) became hot (after {}; line size {} B){}{}",
            p.pid,
            p.program,
            p.threads,
            p.reads,
            p.writes,
            p.transfers,
            p.hot_lines,
            if p.hot_after == 0 {
                "every access: --exhaustive".to_string()
            } else {
                format!("{} transfers", p.hot_after)
            },
            p.line_size,
            if p.hot_lines_dropped > 0 {
                format!("; {} hot line(s) not tracked: table full", p.hot_lines_dropped)
            } else {
                String::new()
            },
            if p.history_dropped > 0 {
                format!("; {} history entries not kept: budget spent", p.history_dropped)
            } else {
                String::new()
            },
        );
        if p.threads >= 2 {
            let _ = writeln!(
                out,
                "  threads on a CPU together: {}",
                match &p.concurrency {
                    Some(c) => together_ms(c.on_cpu_together_ns, c.exact),
                    None => "not measured (no sampler data)".to_string(),
                }
            );
        }
        if p.sample_every > 1 && p.hot_lines > 0 {
            let _ = writeln!(
                out,
                "  (after a hot line's history window, 1 in {} of each thread's accesses to it was modelled and counted {} times: its counts and transfers are estimates)",
                p.sample_every, p.sample_every
            );
        }
    }
    if report.lines.is_empty() {
        out.push('\n');
        out.push_str(&no_hot_line(report));
        return out;
    }
    let _ = writeln!(
        out,
        "\nShared cache lines, by cross-thread transfers (est. cost at {transfer_ns:.0} ns a transfer)"
    );
    let with_pmu = report.lines.iter().any(|l| l.pmu.is_some());
    let mut headers = vec![
        "#",
        "LINE",
        "BELONGS TO",
        "TRANSFERS",
        "EST. COST (µs)",
        "LOADS",
        "STORES",
        "THREADS",
        "SHARING",
        "FIXING SAVES",
    ];
    if with_pmu {
        headers.extend(["HITM LCL", "HITM RMT", "PEER", "LOAD LAT (cycles)"]);
    }
    let mut t = new_table(&headers, &[0, 3, 4, 5, 6, 7, 9, 10, 11, 12]);
    for (i, l) in report.lines.iter().enumerate() {
        let belongs = naming
            .lines
            .get(&line_key(l.pid, l.id))
            .cloned()
            .unwrap_or_else(|| "?".into());
        let mut cells: Vec<String> = vec![
            (i + 1).to_string(),
            format!("{:#x}", l.address),
            belongs,
            l.transfers.to_string(),
            format!("{:.1}", l.estimated_cost_ns / 1000.0),
            l.loads.to_string(),
            l.stores.to_string(),
            l.threads.len().to_string(),
            class_cell(l),
            l.hint.as_ref().map_or_else(
                || "-".into(),
                |h| format!("{} ({})", h.transfers_removed, pct(h.reduction)),
            ),
        ];
        if with_pmu {
            cells.extend(transfer_cells(&l.pmu));
            cells.push(latency_cell(&l.pmu));
        }
        t.add_row(cells);
    }
    let _ = writeln!(out, "{t}");
    for (i, l) in report.lines.iter().take(top).enumerate() {
        out.push_str(&render_line(i + 1, l, naming));
    }
    out
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// A concurrency figure with how it was measured, for the text.
fn together_ms(ns: u64, exact: bool) -> String {
    if exact {
        format!("{} (exact, from the sched tracepoints)", ms(ns))
    } else if ns == 0 {
        // A lower bound of nothing says nothing: samples too coarse to see the overlap.
        "not seen by the schedstat samples (too coarse for this run: a lower bound of 0)".into()
    } else {
        format!(
            "at least {} (a lower bound, from schedstat samples)",
            ms(ns)
        )
    }
}

/// What a run without hot lines allows to say: no sharing only when the threads ran together
/// long enough for it to show.
fn no_hot_line(report: &SharingReport) -> String {
    let c = &report.concurrency;
    match (report.verdict, c.on_cpu_together_ns) {
        (Verdict::Unknown, Some(ns)) => format!(
            "No cache line became hot, but the threads were on a CPU together for {}, less than the {} sharing needs to show: the verdict is unknown, not \"no sharing\".\n  Rerun on a quieter machine, with more work (a longer run), or with --exhaustive (every line tracked from its first access).\n",
            if c.exact == Some(true) {
                format!("only {} (exact, from the sched tracepoints)", ms(ns))
            } else {
                format!(
                    "at least {} by the schedstat samples (a lower bound: perhaps longer)",
                    ms(ns)
                )
            },
            ms(c.threshold_ns)
        ),
        _ if !c.multi_threaded => "No cache line was shared: no process had two threads.\n".to_string(),
        (_, Some(ns)) => format!(
            "No cache line was shared between threads enough to become hot: no false or true sharing found (the threads were on a CPU together for {}, more than the {} sharing needs to show).\n",
            together_ms(ns, c.exact == Some(true)),
            ms(c.threshold_ns)
        ),
        (_, None) => format!(
            "No cache line was shared between threads enough to become hot: none found, but how long the threads ran at the same time was not measured (no sampler data: recorded with --interval 0, or imported), so this holds only if they were on a CPU together for at least {}; record again with sampling on to know.\n",
            ms(c.threshold_ns)
        ),
    }
}

fn render_line(rank: usize, l: &LineReport, naming: &Naming) -> String {
    let mut out = String::new();
    let belongs = naming
        .lines
        .get(&line_key(l.pid, l.id))
        .cloned()
        .unwrap_or_else(|| "?".into());
    let _ = writeln!(
        out,
        "\nLine #{rank} {:#x} ({belongs}), pid {}: {} transfers{}, {}",
        l.address,
        l.pid,
        l.transfers,
        if l.pmu.is_some() {
            " (estimated from HITM samples)".to_string()
        } else {
            format!(" ({} before it became hot)", l.transfers_before_hot)
        },
        match l.class {
            Some(Class::FalseSharing) => format!(
                "false sharing: threads touch disjoint bytes ({} false, {} true transfers)",
                l.false_transfers, l.true_transfers
            ),
            Some(Class::TrueSharing) => format!(
                "true sharing: threads touch the same bytes ({} true transfers)",
                l.true_transfers
            ),
            Some(Class::Mixed) => format!(
                "mixed: {} transfers from disjoint bytes, {} from shared ones",
                l.false_transfers, l.true_transfers
            ),
            None => "no transfers since it became hot".into(),
        }
    );
    let mut fields = new_table(
        &[
            "FIELD (bytes)",
            "READ BY",
            "WRITTEN BY",
            "LOADS",
            "STORES",
            "TRANSFERS",
            "SHARED DATA",
        ],
        &[3, 4, 5],
    );
    for f in &l.fields {
        let list = |s: &std::collections::BTreeSet<u16>| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.iter()
                    .map(|t| format!("T{t}"))
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        fields.add_row(vec![
            format!("+{:#x}..+{:#x}", f.offset, f.end()),
            list(&f.readers),
            list(&f.writers),
            f.loads.to_string(),
            f.stores.to_string(),
            f.transfers.to_string(),
            if f.truly_shared { "yes" } else { "no" }.into(),
        ]);
    }
    let _ = writeln!(out, "{fields}");
    let with_pmu = l.pmu.is_some();
    let mut headers = vec![
        "OFFSET",
        "SIZE",
        "ACCESS",
        "TRANSFERS %",
        "TRANSFERS",
        "COUNT",
        "THREAD",
        "CODE ADDRESS",
        "SYMBOL",
        "SOURCE:LINE",
        "CPUS",
        "NODES",
    ];
    if with_pmu {
        headers.extend([
            "SAMPLES",
            "HITM LCL",
            "HITM RMT",
            "PEER",
            "LOAD LAT (cycles)",
        ]);
    }
    let mut t = new_table(&headers, &[1, 3, 4, 5, 12, 13, 14, 15]);
    for r in &l.rows {
        let code = naming.code.get(&code_key(l.pid, r.pc));
        let nodes: std::collections::BTreeSet<u32> = r
            .cpus
            .iter()
            .filter_map(|c| naming.node_of_cpu.get(c).copied())
            .collect();
        let mut cells: Vec<String> = vec![
            format!("+{:#x}", r.offset),
            r.size.to_string(),
            kind_name(r.kind).into(),
            pct(r.transfer_share),
            r.transfers.to_string(),
            r.count.to_string(),
            format!("T{} ({})", r.thread, r.tid),
            format!("{:#x}", r.pc),
            code.map_or_else(|| "?".into(), |c| c.symbol.clone()),
            code.and_then(|c| c.source.clone())
                .unwrap_or_else(|| "-".into()),
            join(&r.cpus),
            if nodes.is_empty() {
                "-".into()
            } else {
                join(&nodes.into_iter().collect::<Vec<_>>())
            },
        ];
        if with_pmu {
            cells.push(r.pmu.as_ref().map_or(0, |p| p.samples).to_string());
            cells.extend(transfer_cells(&r.pmu));
            cells.push(latency_cell(&r.pmu));
        }
        t.add_row(cells);
    }
    let _ = writeln!(out, "{t}");
    if let Some(fix) = fix_hint(l) {
        let _ = writeln!(out, "{fix}");
    }
    out
}

/// What to do about a line, in one sentence: which field groups to put on separate lines and
/// what that saves, or why no layout fix helps (true sharing); `None` when neither is known.
pub fn fix_hint(l: &LineReport) -> Option<String> {
    if let Some(h) = &l.hint {
        let groups: Vec<String> = h
            .groups
            .iter()
            .map(|g| {
                let ranges: Vec<String> = g
                    .ranges
                    .iter()
                    .map(|(s, e)| format!("+{s:#x}..+{e:#x}"))
                    .collect();
                let threads: Vec<String> = g.threads.iter().map(|t| format!("T{t}")).collect();
                format!("[{}] ({})", ranges.join(" "), threads.join(","))
            })
            .collect();
        Some(format!(
            "Fix: put {} on separate cache lines (pad or align each to {} B): {} {} fewer transfers ({}){}",
            groups.join(", "),
            l.line_size,
            if h.from_replay { "the replay of the line's history predicts" } else { "an estimate from which bytes each thread touches:" },
            h.transfers_removed,
            pct(h.reduction),
            match &l.replay {
                Some(r) => format!(
                    "; replayed {} accesses: {} transfers as laid out, {} with these groups apart, {} with every field on its own line",
                    r.entries, r.as_is, r.grouped, r.padded
                ),
                None => String::new(),
            }
        ))
    } else if l.class == Some(Class::TrueSharing) {
        Some("No layout fix: the threads share the data itself; fewer writes to it (per-thread copies combined at the end) would remove the transfers.".to_string())
    } else {
        None
    }
}

fn join<T: ToString>(v: &[T]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// An SVG heat strip of one line: a row per thread, a cell per byte, coloured by what the
/// thread did to the byte (read, write, both) and shaded by how often.
pub fn heat_strip(l: &LineReport, title: &str) -> String {
    let cell = 12.0;
    let left = 60.0;
    let top = 40.0;
    let size = l.line_size as usize;
    let rows = l.byte_use.len().max(1);
    let width = left + cell * size as f64 + 20.0;
    let height = top + cell * 1.6 * rows as f64 + 50.0;
    // Accesses per (thread, byte), for the shading.
    let mut counts: BTreeMap<(u16, usize), u64> = BTreeMap::new();
    for r in &l.rows {
        for b in usize::from(r.offset)..(usize::from(r.offset) + usize::from(r.size)).min(size) {
            *counts.entry((r.thread, b)).or_default() += r.count;
        }
    }
    let max = counts.values().copied().max().unwrap_or(1).max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="16" font-size="13">{}</text>"#,
        xml(title)
    );
    for b in (0..size).step_by(8) {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" fill="rgb(85,85,85)">+{b}</text>"#,
            left + cell * b as f64,
            top - 6.0
        );
    }
    for (row, (thread, bytes)) in l.byte_use.iter().enumerate() {
        let y = top + cell * 1.6 * row as f64;
        let _ = write!(
            s,
            r#"<text x="4" y="{:.1}">T{thread}</text>"#,
            y + cell * 0.85
        );
        for (b, &u) in bytes.iter().enumerate() {
            let x = left + cell * b as f64;
            let colour = match u {
                1 => (40, 110, 220),
                2 => (220, 60, 40),
                3 => (150, 50, 170),
                _ => (240, 240, 240),
            };
            let n = counts.get(&(*thread, b)).copied().unwrap_or(0) as f64;
            // Log shading so rare accesses stay visible next to hot ones.
            let opacity = if u == 0 {
                1.0
            } else {
                0.3 + 0.7 * (1.0 + n).ln() / (1.0 + max).ln()
            };
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{cell:.1}" fill="rgb({},{},{})" fill-opacity="{opacity:.2}" stroke="white" stroke-width="0.5"><title>T{thread} byte +{b}: {} accesses</title></rect>"#,
                cell, colour.0, colour.1, colour.2, n as u64
            );
        }
    }
    let ly = top + cell * 1.6 * rows as f64 + 16.0;
    for (i, (label, c)) in [
        ("read", "rgb(40,110,220)"),
        ("written", "rgb(220,60,40)"),
        ("both", "rgb(150,50,170)"),
    ]
    .iter()
    .enumerate()
    {
        let x = left + 110.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="{:.1}" width="{cell}" height="{cell}" fill="{c}"/><text x="{:.1}" y="{:.1}">{label}</text>"#,
            ly,
            x + cell + 4.0,
            ly + cell - 2.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::sharing::{analyse_process, rank};
    use trace::sharing::*;

    fn line_report() -> (SharingReport, Naming) {
        let history: Vec<HistoryEntry> = (0..20)
            .flat_map(|_| {
                [
                    HistoryEntry {
                        offset: 0,
                        size: 8,
                        write: true,
                        atomic: false,
                        thread: 0,
                    },
                    HistoryEntry {
                        offset: 8,
                        size: 8,
                        write: true,
                        atomic: false,
                        thread: 1,
                    },
                ]
            })
            .collect();
        let access = |offset, thread, transfers| AccessStat {
            offset,
            size: 8,
            kind: AccessKind::Write,
            thread,
            pc: 0x401000 + u64::from(offset),
            count: 20,
            transfers,
            cpus: vec![u32::from(thread)],
            pmu: None,
        };
        let p = ProcessSharing {
            version: SHARING_VERSION,
            pid: 7,
            parent_pid: None,
            program: "/t/reader_writer".into(),
            line_size: 64,
            hot_after: 64,
            sample_every: 1,
            started_ns: 0,
            ended_ns: 1,
            threads: (0..2)
                .map(|i| ThreadInfo {
                    index: i,
                    tid: 70 + u32::from(i),
                    created_by: None,
                    start_routine: None,
                    first_ns: 0,
                })
                .collect(),
            totals: Totals::default(),
            lines: vec![HotLine {
                id: 3,
                address: 0x4040,
                hot_since_ns: 0,
                ended_ns: 1,
                end: LineEnd::Exit,
                transfers_before_hot: 64,
                objects: vec![],
                accesses: vec![access(0, 0, 19), access(8, 1, 20)],
                history: Some(HistoryRef {
                    first: 0,
                    entries: 40,
                    beyond: 0,
                }),
            }],
            pmu: None,
        };
        let lines = analyse_process(&p, &[history], 100.0);
        let mut naming = Naming::default();
        naming
            .lines
            .insert(line_key(7, 3), "shared (global)".into());
        naming.code.insert(
            code_key(7, 0x401008),
            CodeName {
                symbol: "writer".into(),
                source: Some("rw.c:20".into()),
            },
        );
        naming.node_of_cpu.insert(1, 0);
        (rank(lines, 103), naming)
    }

    #[test]
    fn the_tables_show_the_line_its_offsets_and_the_fix() {
        let (r, naming) = line_report();
        let text = render(&r, &[], &naming, 5, 100.0);
        assert!(text.contains("0x4040"), "{text}");
        assert!(text.contains("shared (global)"));
        // 39 attributed + 64 before hot = 103 transfers, 10.3 µs at 100 ns.
        assert!(text.contains("103"), "{text}");
        assert!(text.contains("10.3"), "{text}");
        assert!(text.contains("false sharing"));
        assert!(text.contains("writer"));
        assert!(text.contains("rw.c:20"));
        assert!(text.contains("T1 (71)"));
        assert!(
            text.contains("[+0x0..+0x8] (T0), [+0x8..+0x10] (T1)"),
            "{text}"
        );
        assert!(text.contains("103 fewer transfers (100.0%)"), "{text}");
    }

    #[test]
    fn the_heat_strip_has_a_row_per_thread_and_a_cell_per_byte() {
        let (r, _) = line_report();
        let svg = heat_strip(&r.lines[0], "a <line>");
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("a &lt;line&gt;"));
        assert_eq!(svg.matches("<title>T0 byte").count(), 64);
        assert_eq!(svg.matches("<title>T1 byte").count(), 64);
        assert!(svg.contains("<title>T1 byte +8: 20 accesses</title>"));
        assert!(svg.contains("<title>T1 byte +0: 0 accesses</title>"));
    }

    fn together(ns: u64, exact: bool) -> Option<analysis::concurrency::Concurrency> {
        Some(analysis::concurrency::Concurrency {
            on_cpu_together_ns: ns,
            exact,
            method: if exact {
                analysis::concurrency::Method::SchedTracepoints
            } else {
                analysis::concurrency::Method::SchedstatBound
            },
        })
    }

    #[test]
    fn a_zero_lower_bound_of_threads_together_is_not_printed_as_a_figure() {
        assert!(together_ms(0, false).starts_with("not seen by the schedstat samples"));
        assert_eq!(
            together_ms(1_200_000, false),
            "at least 1.2 ms (a lower bound, from schedstat samples)"
        );
        assert_eq!(
            together_ms(0, true),
            "0.0 ms (exact, from the sched tracepoints)"
        );
    }

    #[test]
    fn nothing_hot_after_enough_concurrency_is_no_sharing() {
        let mut r = rank(vec![], 0);
        r.judge(together(45_000_000, true), true, 64);
        let text = render(&r, &[], &Naming::default(), 5, 100.0);
        assert!(text.contains("no false or true sharing found"), "{text}");
        assert!(
            text.contains("45.0 ms (exact, from the sched tracepoints)"),
            "{text}"
        );
        assert!(text.contains("more than the 3.0 ms"), "{text}");
    }

    #[test]
    fn nothing_hot_after_too_little_concurrency_is_unknown_never_no_sharing() {
        let mut r = rank(vec![], 0);
        r.judge(together(1_200_000, false), true, 64);
        let text = render(&r, &[], &Naming::default(), 5, 100.0);
        assert!(!text.contains("no false or true sharing found"), "{text}");
        assert!(
            text.contains(
                "on a CPU together for at least 1.2 ms by the schedstat samples (a lower bound"
            ),
            "{text}"
        );
        assert!(
            text.contains("less than the 3.0 ms sharing needs"),
            "{text}"
        );
        assert!(text.contains("the verdict is unknown"), "{text}");
        assert!(text.contains("--exhaustive"), "{text}");
    }

    #[test]
    fn nothing_hot_without_a_measure_says_it_was_not_measured_and_prints_no_zero() {
        let mut r = rank(vec![], 0);
        r.judge(None, true, 64);
        let text = render(&r, &[], &Naming::default(), 5, 100.0);
        assert!(text.contains("was not measured"), "{text}");
        assert!(!text.contains(" 0.0 ms"), "{text}");
        assert!(!text.contains("no false or true sharing found"), "{text}");
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["concurrency"]["on_cpu_together_ns"].is_null(), "{v}");
        assert_eq!(v["verdict"], "no-sharing");
        // One thread: nothing to share, whatever was measured.
        r.judge(together(0, true), false, 64);
        let text = render(&r, &[], &Naming::default(), 5, 100.0);
        assert!(text.contains("no process had two threads"), "{text}");
    }
}
