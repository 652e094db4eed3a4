//! The page of `contend diff A B --html FILE`: the [`Diff`] model the text, CSV and JSON
//! outputs render, sorted into what got worse, what got better, what changed without a
//! direction, and what one side lacks; each row with both figures, the change and, for a
//! figure saved with its 95 % interval (scale.json's `estimate`/`low`/`high`), the intervals
//! (a change inside overlapping intervals is not called worse or better).

use super::{chart, escape, missing, num, page_end, page_start, section_start, table, text, Cell};
use crate::diff::{Change, Diff, Row, Unit};
use std::collections::HashMap;
use std::fmt::Write;

/// Changes smaller than this (in % of the first value) are "unchanged".
const UNCHANGED_PCT: f64 = 1.0;

/// Rows per table before it is cut (the JSON has them all).
const MAX_ROWS: usize = 500;

/// Changes drawn in the chart of the biggest changes.
const CHART_ROWS: usize = 20;

/// Whether a larger value of a metric is worse, better, or neither (a count of events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sense {
    HigherWorse,
    HigherBetter,
    Neutral,
}

/// What a metric's name says about it: speed-ups and throughputs are better higher; times,
/// waits, losses, transfers and misses worse higher; any other number has no direction.
pub fn sense(metric: &str, unit: Unit) -> Sense {
    let m = metric.to_ascii_lowercase();
    // The last field names the measure; the path before it (a lock named `speedup_lock`)
    // does not.
    let last = m
        .rsplit('.')
        .find(|f| !matches!(*f, "estimate" | "median" | "mean" | "min" | "max"))
        .unwrap_or(&m);
    // Matched on whole words of the field (`coverage_pct` is no `cov`).
    let words: Vec<&str> = last.split(['_', '[', ']', '=']).collect();
    // Short stems only whole (`cov`), longer ones as a prefix (`waiting`, `transfers`).
    let word = |w: &str| {
        words
            .iter()
            .any(|x| *x == w || (w.len() >= 4 && x.starts_with(w)))
    };
    const BETTER: [&str; 3] = ["speedup", "throughput", "useful"];
    const WORSE: [&str; 12] = [
        "wait",
        "contended",
        "transfer",
        "miss",
        "loss",
        "lost",
        "blocked",
        "delay",
        "stall",
        "hitm",
        "cov",
        "omega",
    ];
    if BETTER.iter().any(|w| word(w)) || last.contains("ops_per") {
        Sense::HigherBetter
    } else if WORSE.iter().any(|w| word(w))
        || matches!(unit, Unit::Ns | Unit::Us | Unit::Ms | Unit::S)
    {
        Sense::HigherWorse
    } else {
        Sense::Neutral
    }
}

/// Where a row lands on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Worse,
    Better,
    /// Changed, but the name gives no direction.
    Changed,
    /// Changed inside overlapping intervals.
    WithinIntervals,
    Unchanged,
    Missing,
}

struct Classified<'a> {
    row: &'a Row,
    /// The figure's interval per input, when it was saved with one.
    intervals: Vec<Option<(f64, f64)>>,
    change: Change,
    verdict: Verdict,
}

/// The `low` and `high` rows beside an `estimate` row, by the estimate's path.
fn intervals_of(d: &Diff) -> HashMap<&str, (&Row, &Row)> {
    let by_path: HashMap<&str, &Row> = d.rows.iter().map(|r| (r.metric.as_str(), r)).collect();
    d.rows
        .iter()
        .filter_map(|r| {
            let stem = r.metric.strip_suffix(".estimate")?;
            let low = by_path.get(format!("{stem}.low").as_str())?;
            let high = by_path.get(format!("{stem}.high").as_str())?;
            Some((r.metric.as_str(), (*low, *high)))
        })
        .collect()
}

fn classify(d: &Diff) -> Vec<Classified<'_>> {
    let intervals = intervals_of(d);
    let bounds: std::collections::HashSet<&str> = intervals
        .values()
        .flat_map(|(l, h)| [l.metric.as_str(), h.metric.as_str()])
        .collect();
    let last = d.inputs.len() - 1;
    d.rows
        .iter()
        .filter(|r| !bounds.contains(r.metric.as_str()))
        .map(|row| {
            let iv: Vec<Option<(f64, f64)>> = (0..d.inputs.len())
                .map(|i| {
                    let (l, h) = intervals.get(row.metric.as_str())?;
                    Some((l.values[i]?, h.values[i]?))
                        .filter(|(a, b)| a.is_finite() && b.is_finite())
                })
                .collect();
            let change = row.change(last);
            let overlap = match (iv[0], iv[last]) {
                (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
                _ => false,
            };
            let up = match change {
                Change::Missing => None,
                Change::New => Some(true),
                Change::Pct(p) if p.abs() < UNCHANGED_PCT => None,
                Change::Pct(p) => Some(p > 0.0),
            };
            let verdict = match (change, up) {
                (Change::Missing, _) => Verdict::Missing,
                (_, None) => Verdict::Unchanged,
                (_, Some(_)) if overlap => Verdict::WithinIntervals,
                (_, Some(up)) => match (sense(&row.metric, row.unit), up) {
                    (Sense::HigherWorse, true) | (Sense::HigherBetter, false) => Verdict::Worse,
                    (Sense::HigherWorse, false) | (Sense::HigherBetter, true) => Verdict::Better,
                    (Sense::Neutral, _) => Verdict::Changed,
                },
            };
            Classified {
                row,
                intervals: iv,
                change,
                verdict,
            }
        })
        .collect()
}

/// `|change|` for sorting, biggest first; new values first of all.
fn size(c: &Classified<'_>) -> f64 {
    match c.change {
        Change::Pct(p) => p.abs(),
        Change::New => f64::INFINITY,
        Change::Missing => 0.0,
    }
}

/// The whole page comparing `d`'s inputs (the first is the baseline).
pub fn render_diff(d: &Diff) -> String {
    let mut out = String::with_capacity(32 * 1024);
    let subject = d.inputs.join(" → ");
    page_start(
        &mut out,
        &format!("contend diff: {subject}"),
        "contend diff",
        &subject,
        &[
            ("overview", "Overview"),
            ("worse", "Worse"),
            ("better", "Better"),
            ("changed", "Changed"),
            ("same", "Unchanged"),
        ],
    );
    let rows = classify(d);
    let count = |v: Verdict| rows.iter().filter(|c| c.verdict == v).count();
    section_start(&mut out, "overview", "Overview");
    out.push_str("<dl class=\"facts\">\n");
    for (i, input) in d.inputs.iter().enumerate() {
        let _ = writeln!(
            out,
            "<dt>{}</dt><dd><code class=\"input\">{}</code></dd>",
            if i == 0 { "baseline" } else { "compared" },
            escape(input)
        );
    }
    out.push_str("</dl>\n");
    let last = escape(&d.inputs[d.inputs.len() - 1]);
    let _ = writeln!(
        out,
        "<p id=\"counts\"><code>{last}</code> against <code>{}</code>: <span class=\"worse\">{} worse</span>, <span class=\"better\">{} better</span>, {} changed without a direction, {} within their intervals, {} unchanged (under {UNCHANGED_PCT} %), {} on one side only.</p>",
        escape(&d.inputs[0]),
        count(Verdict::Worse),
        count(Verdict::Better),
        count(Verdict::Changed),
        count(Verdict::WithinIntervals),
        count(Verdict::Unchanged),
        count(Verdict::Missing),
    );
    out.push_str("<p class=\"note\">Change = (value − baseline) / |baseline| × 100. Worse or better comes from the metric's name: times, waits, losses, transfers and misses are worse higher; speed-ups and throughputs better higher; other counts have no direction. A figure saved with its 95 % interval is called worse or better only when the two intervals do not overlap.</p>\n");
    if d.rows.is_empty() {
        missing(&mut out, "No metrics to compare.");
    } else {
        chart(&mut out, &changes_svg(d, &rows));
    }
    out.push_str("</section>\n");
    let mut by = |id: &str, title: &str, what: &[Verdict], empty: &str, open: bool| {
        section_start(&mut out, id, title);
        let mut picked: Vec<&Classified<'_>> =
            rows.iter().filter(|c| what.contains(&c.verdict)).collect();
        picked.sort_by(|a, b| size(b).total_cmp(&size(a)));
        if picked.is_empty() {
            missing(&mut out, empty);
        } else {
            if !open {
                let _ = writeln!(
                    out,
                    "<details><summary>{} metric(s)</summary>",
                    picked.len()
                );
            }
            rows_table(&mut out, d, id, &picked);
            if !open {
                out.push_str("</details>\n");
            }
        }
        out.push_str("</section>\n");
    };
    by(
        "worse",
        "Got worse",
        &[Verdict::Worse],
        "Nothing got worse.",
        true,
    );
    by(
        "better",
        "Got better",
        &[Verdict::Better],
        "Nothing got better.",
        true,
    );
    by(
        "changed",
        "Changed, without a direction, or within the intervals",
        &[Verdict::Changed, Verdict::WithinIntervals],
        "Nothing else changed.",
        true,
    );
    by(
        "same",
        "Unchanged, or on one side only",
        &[Verdict::Unchanged, Verdict::Missing],
        "Every metric changed.",
        false,
    );
    let from = d
        .inputs
        .iter()
        .map(|i| format!("<code>{}</code>", escape(i)))
        .collect::<Vec<_>>()
        .join(" and ");
    page_end(&mut out, &from);
    out
}

fn figure(c: &Classified<'_>, i: usize) -> Cell {
    let disp = c.row.display();
    let Some(v) = c.row.values[i] else {
        return text("—");
    };
    let shown = match c.intervals[i] {
        Some((l, h)) => format!("{} [{}–{}]", disp.format(v), disp.format(l), disp.format(h)),
        None => disp.format(v),
    };
    num(v, shown)
}

fn rows_table(out: &mut String, d: &Diff, id: &str, picked: &[&Classified<'_>]) {
    let mut headers = vec!["metric".to_string(), "unit".to_string()];
    for (i, input) in d.inputs.iter().enumerate() {
        headers.push(input.clone());
        if i > 0 {
            headers.push(format!("change (%) {input}"));
        }
    }
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let numeric: Vec<usize> = (2..refs.len()).collect();
    let rows = picked
        .iter()
        .map(|c| {
            let mut cells = vec![text(c.row.metric.clone()), text(c.row.display().unit)];
            for i in 0..d.inputs.len() {
                cells.push(figure(c, i));
                if i > 0 {
                    let change = c.row.change(i);
                    let sort = match change {
                        Change::Pct(p) => p,
                        Change::New => f64::INFINITY,
                        Change::Missing => f64::NAN,
                    };
                    cells.push(num(sort, change.text()));
                }
            }
            cells
        })
        .collect();
    table(
        out,
        &format!("{id}-table"),
        "Biggest change first",
        &refs,
        &numeric,
        rows,
        MAX_ROWS,
    );
}

/// The biggest changes (worse and better first) as bars left (down) and right (up) of zero, red when worse and green
/// when better, grey without a direction; each bar's figures in its tooltip.
fn changes_svg(d: &Diff, rows: &[Classified<'_>]) -> String {
    let mut top: Vec<&Classified<'_>> = rows
        .iter()
        .filter(|c| matches!(c.change, Change::Pct(_)) && c.verdict != Verdict::Unchanged)
        .collect();
    // What got worse or better first (the reader's question), then the biggest of the rest.
    let directed = |c: &Classified<'_>| matches!(c.verdict, Verdict::Worse | Verdict::Better);
    top.sort_by(|a, b| {
        directed(b)
            .cmp(&directed(a))
            .then(size(b).total_cmp(&size(a)))
    });
    top.truncate(CHART_ROWS);
    const W: f64 = 960.0;
    const LABEL: f64 = 420.0;
    const ROW: f64 = 18.0;
    let h = 30.0 + ROW * top.len().max(1) as f64;
    // Changes over 100 % are drawn at 100 % (their figure is in the tooltip and the table).
    let widest = top
        .iter()
        .map(|c| size(c).min(100.0))
        .fold(1.0_f64, f64::max);
    let zero = LABEL + (W - LABEL) / 2.0;
    let scale = (W - LABEL) / 2.0 / widest;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"change-bars\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"11\"><title>The biggest changes of {} against {}</title>",
        escape(&d.inputs[d.inputs.len() - 1]),
        escape(&d.inputs[0])
    );
    if top.is_empty() {
        let _ = write!(
            svg,
            "<text x=\"10\" y=\"20\">No metric changed by {UNCHANGED_PCT} % or more.</text>"
        );
    }
    for (i, c) in top.iter().enumerate() {
        let Change::Pct(p) = c.change else { continue };
        let y = 8.0 + ROW * i as f64;
        let w = p.abs().min(100.0) * scale;
        let x = if p < 0.0 { zero - w } else { zero };
        let colour = match c.verdict {
            Verdict::Worse => "#c62828",
            Verdict::Better => "#2e7d32",
            _ => "#9e9e9e",
        };
        // Long paths keep their end (the measure); cut before escaping, never inside `&lt;`.
        let chars: Vec<char> = c.row.metric.chars().collect();
        let label = match chars.len().checked_sub(63) {
            Some(cut) if cut > 1 => format!("…{}", chars[cut..].iter().collect::<String>()),
            _ => c.row.metric.clone(),
        };
        let (metric, label) = (escape(&c.row.metric), escape(&label));
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{label}</text><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{}\" fill=\"{colour}\"><title>{metric}: {}</title></rect>",
            LABEL - 6.0,
            y + 11.0,
            ROW - 4.0,
            escape(&c.change.text())
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{zero}\" y1=\"4\" x2=\"{zero}\" y2=\"{}\" stroke=\"#333\"/><text x=\"{zero}\" y=\"{}\" text-anchor=\"middle\">0 % (bars reach ±{widest:.0} %)</text>",
        h - 18.0,
        h - 6.0
    );
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_name_says_which_way_is_worse() {
        use Sense::*;
        assert_eq!(sense("locks.summary.wait_ns", Unit::Ns), HigherWorse);
        assert_eq!(
            sense("sharing.lines[address=1].transfers", Unit::Count),
            HigherWorse
        );
        assert_eq!(sense("elapsed_ns.median", Unit::Ns), HigherWorse);
        assert_eq!(
            sense("models[threads=2,cores=2].measured_speedup", Unit::None),
            HigherBetter
        );
        assert_eq!(
            sense("verdicts[threads=2].measured_speedup.estimate", Unit::None),
            HigherBetter
        );
        // A lock named after a speed-up is still measured by its wait.
        assert_eq!(
            sense("locks.locks[name=speedup_lock].wait_ns", Unit::Ns),
            HigherWorse
        );
        // `coverage` is no coefficient of variation; events have no direction.
        assert_eq!(sense("activity.coverage_pct", Unit::Pct), Neutral);
        assert_eq!(sense("elapsed_cov_pct", Unit::Pct), HigherWorse);
        assert_eq!(sense("streams[tid=1].events", Unit::Count), Neutral);
    }

    #[test]
    fn a_change_inside_overlapping_intervals_is_neither_worse_nor_better() {
        let leaves = |est: f64, low: f64, high: f64, wait: f64| {
            [
                ("v.omega.estimate", "estimate", est),
                ("v.omega.low", "low", low),
                ("v.omega.high", "high", high),
                ("wait_ns", "wait_ns", wait),
            ]
            .iter()
            .map(|(path, key, v)| crate::diff::Leaf {
                path: path.to_string(),
                key: key.to_string(),
                value: Some(*v),
            })
            .collect::<Vec<_>>()
        };
        let hostile = |mut leaves: Vec<crate::diff::Leaf>, v: f64| {
            leaves.push(crate::diff::Leaf {
                path: format!("threads[name=<svg onload=Z>{}].wait_ns", "x".repeat(80)),
                key: "wait_ns".into(),
                value: Some(v),
            });
            leaves
        };
        let d = Diff::new(vec![
            ("a".into(), hostile(leaves(0.10, 0.05, 0.15, 100.0), 1.0)),
            ("b".into(), hostile(leaves(0.12, 0.08, 0.20, 50.0), 2.0)),
        ]);
        let rows = classify(&d);
        // The low and high rows are shown as the estimate's interval, not as metrics.
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].row.metric, "v.omega.estimate");
        assert_eq!(rows[0].verdict, Verdict::WithinIntervals);
        assert_eq!(rows[0].intervals[1], Some((0.08, 0.20)));
        assert_eq!(rows[1].verdict, Verdict::Better);
        let page = render_diff(&d);
        assert!(
            page.contains("<td class=\"num\" data-v=\"0.12\">0.120 [0.0800–0.200]</td>"),
            "{page}"
        );
        assert!(page.contains(
            "<span class=\"worse\">1 worse</span>, <span class=\"better\">1 better</span>"
        ));
    }
}
