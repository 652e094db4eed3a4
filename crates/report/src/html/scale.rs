//! The page of a `contend scale` directory (`contend report SCALE_DIR --html FILE`): the
//! speed-up measured against modelled (the same SVG `contend scale --svg` writes), the
//! configurations measured, where the lost speed-up went (memory/hardware, waiting for a CPU,
//! blocked) with the verdicts' 95 % intervals, and the verdict in words. Rendered from the
//! [`ScaleView`] the text report renders.

use super::{chart, escape, missing, num, page_end, page_start, section_start, table, text, Cell};
use crate::scale::{ConfigurationRow, ScaleView};
use analysis::activity::{ScalingModel, WorkUnit};
use analysis::stats::Interval;
use std::fmt::Write;

/// The three causes of lost speed-up, in the order and colours the page uses.
const CAUSES: [(&str, &str); 3] = [
    ("memory/hardware contention (R)", "#d62728"),
    ("waiting for a CPU (W)", "#ff7f0e"),
    ("blocked: locks, sleeps, I/O, joins (D)", "#1f77b4"),
];

/// Rows of the configuration table the page keeps (a sweep has tens, not thousands).
const MAX_ROWS: usize = 500;

/// The whole page of a scale directory; `dir` names it in the header.
pub fn render_scale(dir: &str, v: &ScaleView<'_>) -> String {
    let mut out = String::with_capacity(32 * 1024);
    let program = v.command.first().map_or("the program", String::as_str);
    page_start(
        &mut out,
        &format!("contend scale: {program} ({dir})"),
        "contend scale",
        dir,
        &[
            ("overview", "Overview"),
            ("speedup", "Speed-up"),
            ("loss", "Loss split"),
            ("configurations", "Configurations"),
        ],
    );
    overview(&mut out, v);
    speedup(&mut out, v);
    loss(&mut out, v);
    configurations(&mut out, v);
    page_end(&mut out, &format!("directory <code>{}</code>", escape(dir)));
    out
}

fn overview(out: &mut String, v: &ScaleView<'_>) {
    section_start(out, "overview", "Overview");
    let unit = match v.unit {
        WorkUnit::Cycles => "cycles",
        WorkUnit::OnCpuNs => "on-CPU time (no hardware counters)",
        WorkUnit::UserNs => "user CPU time (no hardware counters; system time beside it)",
    };
    let _ = writeln!(
        out,
        "<dl class=\"facts\">\n<dt>command</dt><dd><code id=\"command\">{}</code></dd>\n<dt>runs per configuration</dt><dd>{}</dd>\n<dt>configurations</dt><dd>{}</dd>\n<dt>work C(n)</dt><dd>{}</dd>",
        escape(&v.command.join(" ")),
        v.repeat,
        v.configurations.len(),
        escape(unit)
    );
    if v.rounds > 0 {
        let stopped = if v.stopped.is_empty() {
            String::new()
        } else {
            format!(": {}", v.stopped)
        };
        let _ = writeln!(
            out,
            "<dt>rounds</dt><dd>{} of every configuration, interleaved{}</dd>",
            v.rounds,
            escape(&stopped)
        );
    }
    out.push_str("</dl>\n<h3>Verdict</h3>\n<ol class=\"findings\" id=\"verdicts\">\n");
    for line in verdict_lines(v) {
        let _ = writeln!(out, "<li>{}</li>", escape(&line));
    }
    out.push_str("</ol>\n");
    if !v.verdicts.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"note\">Intervals: 95 %, percentile bootstrap over the {} rounds; shares are of the loss m − P = R + W + D.</p>",
            v.rounds
        );
    }
    for m in &v.missing {
        let _ = writeln!(out, "<p class=\"missing\">Not modelled: {}</p>", escape(m));
    }
    for n in &v.notes {
        let _ = writeln!(out, "<p class=\"note\">Note: {}</p>", escape(n));
    }
    out.push_str("</section>\n");
}

/// The verdicts in words, as the text report says them: the verdicts with intervals when
/// the file has them, else each model's point verdict.
fn verdict_lines(v: &ScaleView<'_>) -> Vec<String> {
    if v.verdicts.is_empty() {
        return v
            .models
            .iter()
            .map(|m| {
                let mut line = crate::scale::verdict(m);
                // As the text report notes it: the model counts other work's CPU time as activity.
                if let Some(waiting) = crate::scale::waited_with_a_core_each(v, m) {
                    let _ = write!(
                        line,
                        " With a core per thread, {waiting:.2} threads still waited for a CPU on average: other work on the machine took CPU time, which the model counts as activity (predicted speed-up above measured)."
                    );
                }
                line
            })
            .collect();
    }
    v.verdicts
        .iter()
        .map(|verdict| {
            let mut line = verdict.text.clone();
            for s in &verdict.settle {
                let _ = write!(line, " To settle it: {s}");
            }
            line
        })
        .collect()
}

fn speedup(out: &mut String, v: &ScaleView<'_>) {
    section_start(out, "speedup", "Speed-up: measured against modelled");
    if v.models.is_empty() {
        missing(
            out,
            "No model: the sweep has no configuration with more than one thread measured against one thread on one core.",
        );
    } else {
        chart(out, &crate::scale::speedup_svg(v));
        let rows = v
            .models
            .iter()
            .map(|m| {
                vec![
                    num(m.threads.into(), m.threads.to_string()),
                    num(m.cores.into(), m.cores.to_string()),
                    num(m.measured_speedup, format!("{:.2}", m.measured_speedup)),
                    num(m.predicted_speedup, format!("{:.2}", m.predicted_speedup)),
                    num(m.active_threads, format!("{:.2}", m.active_threads)),
                    num(m.omega, format!("{:+.3}", m.omega)),
                ]
            })
            .collect();
        table(
            out,
            "speedup-table",
            "Speed-up per configuration (thesis eq. 3.4, 3.5)",
            &[
                "threads m",
                "cores n",
                "measured T(1)/T(n)",
                "predicted S",
                "active threads A",
                "ω = C(n)/C(1) − 1",
            ],
            &[0, 1, 2, 3, 4, 5],
            rows,
            MAX_ROWS,
        );
    }
    out.push_str("</section>\n");
}

/// One configuration's loss, in threads' worth, split three ways.
struct Split {
    threads: u32,
    cores: u32,
    /// (threads' worth, its interval when the verdicts have one) per cause of [`CAUSES`].
    parts: [(f64, Option<Interval>, Option<Interval>); 3],
}

fn splits(v: &ScaleView<'_>) -> Vec<Split> {
    if !v.verdicts.is_empty() {
        return v
            .verdicts
            .iter()
            .map(|d| {
                let lost = d.loss_threads.estimate;
                let share = |pct: &Interval, ns: &Interval| {
                    (lost * pct.estimate / 100.0, Some(*pct), Some(*ns))
                };
                Split {
                    threads: d.threads,
                    cores: d.cores,
                    parts: [
                        share(&d.memory_pct, &d.memory_thread_ns),
                        share(&d.cpu_wait_pct, &d.cpu_wait_thread_ns),
                        share(&d.blocked_pct, &d.blocked_thread_ns),
                    ],
                }
            })
            .collect();
    }
    // Files written before the verdicts: the models' point figures. Before the three-way
    // split, waiting for a CPU counted as active (inside A), so W is not separate there.
    v.models
        .iter()
        .map(|m: &&ScalingModel| Split {
            threads: m.threads,
            cores: m.cores,
            parts: [
                (m.memory_loss_threads, None, None),
                (
                    m.running_threads.and(m.waiting_threads).unwrap_or(f64::NAN),
                    None,
                    None,
                ),
                (m.dependency_loss_threads, None, None),
            ],
        })
        .collect()
}

fn interval(i: Option<Interval>, scale: f64, decimals: usize) -> String {
    match i {
        Some(i) if i.low.is_finite() && i.high.is_finite() => format!(
            "{:.decimals$} [{:.decimals$}–{:.decimals$}]",
            i.estimate / scale,
            i.low / scale,
            i.high / scale
        ),
        Some(i) if i.estimate.is_finite() => format!("{:.decimals$}", i.estimate / scale),
        _ => "n/a".into(),
    }
}

fn loss(out: &mut String, v: &ScaleView<'_>) {
    section_start(out, "loss", "Where the speed-up went");
    let splits = splits(v);
    if splits.is_empty() {
        missing(out, "No configuration was modelled, so no loss is split.");
        out.push_str("</section>\n");
        return;
    }
    chart(out, &loss_svg(&splits));
    let mut rows = Vec::new();
    for s in &splits {
        for (i, (threads, pct, ns)) in s.parts.iter().enumerate() {
            rows.push(vec![
                text(format!("m={} n={}", s.threads, s.cores)),
                text(CAUSES[i].0),
                num(
                    *threads,
                    if threads.is_finite() {
                        format!("{threads:.2}")
                    } else {
                        "n/a (inside A in this file)".into()
                    },
                ),
                share_cell(*pct),
                share_cell_ns(*ns),
            ]);
        }
    }
    table(
        out,
        "loss-table",
        if v.verdicts.is_empty() {
            "Lost speed-up by cause (threads' worth; this file has no intervals: written before the verdicts)"
        } else {
            "Lost speed-up by cause (threads' worth; share of the loss and thread-seconds with 95 % intervals)"
        },
        &[
            "configuration",
            "cause",
            "threads' worth",
            "share of the loss (%)",
            "thread-s",
        ],
        &[2, 3, 4],
        rows,
        MAX_ROWS,
    );
    out.push_str("</section>\n");
}

fn share_cell(i: Option<Interval>) -> Cell {
    num(i.map_or(f64::NAN, |i| i.estimate), interval(i, 1.0, 0))
}

fn share_cell_ns(i: Option<Interval>) -> Cell {
    num(i.map_or(f64::NAN, |i| i.estimate), interval(i, 1e9, 3))
}

/// One bar per configuration: the lost threads' worth split by cause (negative parts, noise,
/// drawn as none), each part's figures in its tooltip.
fn loss_svg(splits: &[Split]) -> String {
    const W: f64 = 760.0;
    const LABEL: f64 = 110.0;
    const ROW: f64 = 26.0;
    let widest = splits
        .iter()
        .map(|s| {
            s.parts
                .iter()
                .map(|p| p.0.max(0.0))
                .filter(|x| x.is_finite())
                .sum::<f64>()
        })
        .fold(0.0_f64, f64::max)
        .max(0.01);
    let h = 40.0 + ROW * splits.len() as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"loss-bars\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"12\"><title>Lost speed-up by cause</title>"
    );
    let scale = (W - LABEL - 20.0) / widest;
    for (row, s) in splits.iter().enumerate() {
        let y = 10.0 + ROW * row as f64;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">m={} n={}</text>",
            LABEL - 6.0,
            y + 14.0,
            s.threads,
            s.cores
        );
        let mut x = LABEL;
        for (i, (threads, pct, _)) in s.parts.iter().enumerate() {
            if !threads.is_finite() || *threads <= 0.0 {
                continue;
            }
            let w = threads * scale;
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\"><title>m={} n={}: {}: {threads:.2} threads' worth{}</title></rect>",
                ROW - 6.0,
                CAUSES[i].1,
                s.threads,
                s.cores,
                escape(CAUSES[i].0),
                pct.map_or(String::new(), |p| format!(", {} % of the loss", interval(Some(p), 1.0, 0)))
            );
            x += w;
        }
    }
    let y = h - 12.0;
    let mut x = LABEL;
    for (name, colour) in CAUSES {
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{}\" y=\"{y}\">{}</text>",
            y - 9.0,
            x + 14.0,
            escape(name)
        );
        x += 210.0;
    }
    svg.push_str("</svg>");
    svg
}

fn configurations(out: &mut String, v: &ScaleView<'_>) {
    section_start(out, "configurations", "Configurations measured");
    let s = |ns: f64| format!("{:.3}", ns / 1e9);
    let rows = v
        .configurations
        .iter()
        .map(|c: &ConfigurationRow<'_>| {
            vec![
                num(c.threads.into(), c.threads.to_string()),
                num(c.cores.into(), c.cores.to_string()),
                text(topology::CpuSet::list_in_order(c.cpus)),
                num(c.elapsed_ns.median, s(c.elapsed_ns.median)),
                text(format!("{}–{}", s(c.elapsed_ns.min), s(c.elapsed_ns.max))),
                num(
                    c.elapsed_ns.cov_pct().unwrap_or(f64::NAN),
                    c.elapsed_ns
                        .cov_pct()
                        .map_or("n/a".into(), |p| format!("{p:.1}")),
                ),
                num(
                    c.active_threads.median,
                    format!("{:.2}", c.active_threads.median),
                ),
                num(
                    c.waiting_threads.median,
                    format!("{:.2}", c.waiting_threads.median),
                ),
                num(
                    c.modelled_active_threads.unwrap_or(f64::NAN),
                    c.modelled_active_threads
                        .map_or("n/a".into(), |a| format!("{a:.2}")),
                ),
            ]
        })
        .collect();
    table(
        out,
        "configuration-table",
        "Medians over each configuration's runs",
        &[
            "threads m",
            "cores n",
            "CPUs",
            "elapsed T (s)",
            "min–max (s)",
            "CoV (%)",
            "active threads A",
            "of which waiting for a CPU",
            "A modelled for m cores (3.4)",
        ],
        &[0, 1, 3, 5, 6, 7, 8],
        rows,
        MAX_ROWS,
    );
    out.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict as scale.json holds it: 2 threads on 2 cores lost 0.8 threads' worth, most
    /// of it blocked.
    const VERDICT: &str = r#"{
        "threads": 2, "cores": 2, "baseline": "one-core", "baseline_reason": "the thesis's",
        "cause": "blocked",
        "loss_threads": {"estimate": 0.8, "low": 0.7, "high": 0.9},
        "memory_pct": {"estimate": 10.0, "low": 5.0, "high": 15.0},
        "cpu_wait_pct": {"estimate": 5.0, "low": 2.0, "high": 8.0},
        "blocked_pct": {"estimate": 85.0, "low": 80.0, "high": 90.0},
        "memory_thread_ns": {"estimate": 2e7, "low": 1e7, "high": 3e7},
        "cpu_wait_thread_ns": {"estimate": 1e7, "low": 4e6, "high": 1.6e7},
        "blocked_thread_ns": {"estimate": 1.7e8, "low": 1.6e8, "high": 1.8e8},
        "omega": {"estimate": 0.05, "low": 0.02, "high": 0.08},
        "measured_speedup": {"estimate": 1.2, "low": 1.1, "high": 1.3},
        "predicted_speedup": {"estimate": 1.25, "low": 1.15, "high": 1.35},
        "lock_waits_pct_of_blocked": null, "top_lock": "<b>lock</b>", "rounds": 5,
        "disturbed": [], "settle": ["run 3 more rounds"],
        "text": "2 threads on 2 cores lost 0.80 [0.70–0.90] threads' worth: blocked <b>lock</b>."
    }"#;

    #[test]
    fn the_loss_split_shows_each_cause_with_its_interval() {
        let v: analysis::split::Verdict = serde_json::from_str(VERDICT).unwrap();
        let command = ["./prog".to_string(), "<i>".to_string()];
        let view = ScaleView {
            command: &command,
            repeat: 1,
            unit: WorkUnit::OnCpuNs,
            configurations: Vec::new(),
            models: Vec::new(),
            queues: Vec::new(),
            missing: Vec::new(),
            notes: Vec::new(),
            verdicts: vec![&v],
            rounds: 5,
            stopped: "",
        };
        let page = render_scale("dir", &view);
        // Shares of the loss and thread-seconds, each with its 95 % interval.
        assert!(page.contains("<td>blocked: locks, sleeps, I/O, joins (D)</td><td class=\"num\" data-v=\"0.68\">0.68</td><td class=\"num\" data-v=\"85\">85 [80–90]</td><td class=\"num\" data-v=\"170000000\">0.170 [0.160–0.180]</td>"), "{page}");
        assert!(page.contains("<td>memory/hardware contention (R)</td><td class=\"num\" data-v=\"0.08\">0.08</td><td class=\"num\" data-v=\"10\">10 [5–15]</td>"));
        assert!(page.contains(
            "m=2 n=2: waiting for a CPU (W): 0.04 threads' worth, 5 [2–8] % of the loss"
        ));
        // The verdict in words, escaped, with what would settle it.
        assert!(page.contains("<li>2 threads on 2 cores lost 0.80 [0.70–0.90] threads&#39; worth: blocked &lt;b&gt;lock&lt;/b&gt;. To settle it: run 3 more rounds</li>"));
        assert!(page.contains("percentile bootstrap over the 5 rounds"));
        assert!(page.contains("<code id=\"command\">./prog &lt;i&gt;</code>"));
        assert!(!page.contains("<b>lock") && !page.contains("<i>"));
        // No model: the plot says why instead of drawing nothing.
        assert!(page.contains("No model: the sweep has no configuration"));
    }
}
