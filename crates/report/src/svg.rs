//! Small SVG charts written directly: a log-binned histogram of wait times (the thesis's
//! figures 4.1 and 4.2). Written by hand rather than with plotters because plotters lays text
//! out with system fonts (fontconfig), which a fresh machine may not have; an SVG's `<text>`
//! is laid out by whatever displays it.

use std::fmt::Write;

/// One series of durations (ns) to bin, with its colour.
pub struct Series<'a> {
    pub name: &'a str,
    pub durations_ns: &'a [u64],
    pub colour: &'a str,
}

/// Bins are powers of two of nanoseconds: [2^k, 2^(k+1)).
fn bin_of(ns: u64) -> usize {
    (64 - ns.max(1).leading_zeros() - 1) as usize
}

fn label_ns(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{}s", n / 1_000_000_000),
        n if n >= 1_000_000 => format!("{}ms", n / 1_000_000),
        n if n >= 1_000 => format!("{}µs", n / 1_000),
        n => format!("{n}ns"),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A histogram of total waiting time per log2 bin, one bar group per bin, one bar per series.
/// Bar height is the summed duration in the bin (ms); the count is written above the bar.
pub fn wait_histogram(title: &str, series: &[Series<'_>]) -> String {
    let bins = 64;
    let mut sums = vec![vec![0u64; bins]; series.len()];
    let mut counts = vec![vec![0u64; bins]; series.len()];
    for (s, data) in series.iter().enumerate() {
        for &d in data.durations_ns {
            let b = bin_of(d);
            sums[s][b] += d;
            counts[s][b] += 1;
        }
    }
    let used: Vec<usize> = (0..bins)
        .filter(|&b| counts.iter().any(|c| c[b] > 0))
        .collect();
    let (lo, hi) = match (used.first(), used.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0, 0),
    };
    let shown: Vec<usize> = (lo..=hi).collect();
    let max = sums.iter().flatten().copied().max().unwrap_or(0).max(1) as f64;

    let (left, top, plot_h, group_w) = (70.0, 50.0, 260.0, 44.0);
    let width = left + group_w * shown.len().max(1) as f64 + 30.0;
    let height = top + plot_h + 80.0;
    let bar_w = (group_w - 8.0) / series.len().max(1) as f64;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="20" font-size="14">{}</text>"#,
        escape(title)
    );
    // Y axis: total wait in the bin, in ms.
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = top + plot_h - plot_h * f64::from(i) / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" x2="{:.0}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{:.3}</text>"##,
            width - 30.0,
            left - 6.0,
            y + 4.0,
            v / 1e6
        );
    }
    let _ = writeln!(
        svg,
        r#"<text transform="translate(16,{:.0}) rotate(-90)" text-anchor="middle">total wait in bin (ms)</text>"#,
        top + plot_h / 2.0
    );
    for (g, &b) in shown.iter().enumerate() {
        let x0 = left + group_w * g as f64 + 4.0;
        for (s, data) in series.iter().enumerate() {
            let h = plot_h * sums[s][b] as f64 / max;
            let x = x0 + bar_w * s as f64;
            let y = top + plot_h - h;
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}: {} waits, {:.3} ms</title></rect>"#,
                bar_w - 1.0,
                data.colour,
                escape(data.name),
                counts[s][b],
                sums[s][b] as f64 / 1e6
            );
            if counts[s][b] > 0 {
                let _ = writeln!(
                    svg,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                    x + bar_w / 2.0,
                    y - 3.0,
                    counts[s][b]
                );
            }
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.0}" text-anchor="middle" font-size="9">≥{}</text>"#,
            x0 + (group_w - 8.0) / 2.0,
            top + plot_h + 14.0,
            label_ns(1u64 << b)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.0}" y="{:.0}" text-anchor="middle">wait time (log2 bins; numbers are waits per bin)</text>"#,
        left + group_w * shown.len().max(1) as f64 / 2.0,
        top + plot_h + 36.0
    );
    for (s, data) in series.iter().enumerate() {
        let y = top + plot_h + 56.0 + 0.0 * s as f64;
        let x = left + 180.0 * s as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.0}" y="{:.0}" width="12" height="12" fill="{}"/><text x="{:.0}" y="{y:.0}">{}</text>"#,
            y - 10.0,
            data.colour,
            x + 16.0,
            escape(data.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_and_bars() {
        assert_eq!(bin_of(1), 0);
        assert_eq!(bin_of(1023), 9);
        assert_eq!(bin_of(1024), 10);
        let all = [1_000u64, 1_010, 2_000_000];
        let cp = [2_000_000u64];
        let svg = wait_histogram(
            "hot_lock",
            &[
                Series {
                    name: "all waits",
                    durations_ns: &all,
                    colour: "#4c78a8",
                },
                Series {
                    name: "on the critical path",
                    durations_ns: &cp,
                    colour: "#e45756",
                },
            ],
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("all waits: 2 waits, 0.002 ms"), "{svg}");
        assert!(svg.contains("on the critical path: 1 waits, 2.000 ms"));
        assert!(svg.contains("≥512ns") && svg.contains("≥1ms"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}

/// One line of a [`line_chart`]: points (x, y) in order, drawn as a polyline with markers when
/// `markers`, and optionally filled down to zero (`area`).
pub struct Line<'a> {
    pub name: &'a str,
    pub points: &'a [(f64, f64)],
    pub colour: &'a str,
    pub markers: bool,
    pub area: bool,
    pub dashed: bool,
}

/// A round number near `span / 5` for axis ticks.
fn tick_step(span: f64) -> f64 {
    let raw = (span / 5.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else {
        let decimals = (-step.log10().floor()) as usize;
        format!("{v:.decimals$}")
    }
}

/// A line chart with linear axes from 0 (or the data's minimum x) to the data's maximum.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, lines: &[Line<'_>]) -> String {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let finite = |v: &f64| v.is_finite();
    let x_min = all()
        .map(|p| p.0)
        .filter(finite)
        .fold(f64::INFINITY, f64::min);
    let x_max = all()
        .map(|p| p.0)
        .filter(finite)
        .fold(f64::NEG_INFINITY, f64::max);
    let y_max = all().map(|p| p.1).filter(finite).fold(0.0, f64::max);
    let (x_min, x_max) = if x_min.is_finite() && x_max > x_min {
        (
            x_min.min(0.0).max(if x_min > 0.0 { 0.0 } else { x_min }),
            x_max,
        )
    } else {
        (0.0, 1.0)
    };
    let y_max = if y_max > 0.0 { y_max * 1.05 } else { 1.0 };
    let (left, top, plot_w, plot_h) = (70.0, 50.0, 560.0, 280.0);
    let width = left + plot_w + 30.0;
    let height = top + plot_h + 60.0 + 18.0 * lines.len() as f64;
    let sx = |x: f64| left + plot_w * (x - x_min) / (x_max - x_min);
    let sy = |y: f64| top + plot_h - plot_h * (y / y_max);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="20" font-size="14">{}</text>"#,
        escape(title)
    );
    let ystep = tick_step(y_max);
    let mut v = 0.0;
    while v <= y_max + 1e-12 {
        let y = sy(v);
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" x2="{:.0}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + plot_w,
            left - 6.0,
            y + 4.0,
            tick_label(v, ystep)
        );
        v += ystep;
    }
    let xstep = tick_step(x_max - x_min);
    let mut v = (x_min / xstep).ceil() * xstep;
    while v <= x_max + 1e-12 {
        let x = sx(v);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{:.0}" stroke="#eee"/><text x="{x:.1}" y="{:.0}" text-anchor="middle">{}</text>"##,
            top + plot_h,
            top + plot_h + 14.0,
            tick_label(v, xstep)
        );
        v += xstep;
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.0}" y="{:.0}" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        top + plot_h + 32.0,
        escape(x_label)
    );
    let _ = writeln!(
        svg,
        r#"<text transform="translate(16,{:.0}) rotate(-90)" text-anchor="middle">{}</text>"#,
        top + plot_h / 2.0,
        escape(y_label)
    );
    for l in lines {
        let pts: Vec<(f64, f64)> = l
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .map(|&(x, y)| (sx(x), sy(y.max(0.0))))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let path: String = pts
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect::<Vec<_>>()
            .join(" ");
        if l.area {
            let base = sy(0.0);
            let _ = writeln!(
                svg,
                r#"<polygon points="{:.1},{base:.1} {path} {:.1},{base:.1}" fill="{}" fill-opacity="0.35" stroke="none"/>"#,
                pts[0].0,
                pts[pts.len() - 1].0,
                l.colour
            );
        }
        let dash = if l.dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r#"<polyline points="{path}" fill="none" stroke="{}" stroke-width="2"{dash}><title>{}</title></polyline>"#,
            l.colour,
            escape(l.name)
        );
        if l.markers {
            for (x, y) in &pts {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{}"/>"#,
                    l.colour
                );
            }
        }
    }
    for (i, l) in lines.iter().enumerate() {
        let y = top + plot_h + 52.0 + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{left}" y="{:.0}" width="12" height="12" fill="{}"/><text x="{:.0}" y="{y:.0}">{}</text>"#,
            y - 10.0,
            l.colour,
            left + 16.0,
            escape(l.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod line_chart_tests {
    use super::*;

    #[test]
    fn a_line_chart_has_its_lines_legend_and_ticks() {
        let pts = [(1.0, 1.0), (2.0, 1.9), (4.0, 3.5)];
        let ideal = [(1.0, 1.0), (4.0, 4.0)];
        let svg = line_chart(
            "speed-up <m>",
            "threads",
            "speed-up",
            &[
                Line {
                    name: "measured",
                    points: &pts,
                    colour: "#1f77b4",
                    markers: true,
                    area: false,
                    dashed: false,
                },
                Line {
                    name: "ideal",
                    points: &ideal,
                    colour: "#999",
                    markers: false,
                    area: true,
                    dashed: true,
                },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("speed-up &lt;m&gt;"));
        assert!(svg.contains(">measured</text>") && svg.contains(">ideal</text>"));
        assert!(svg.contains("stroke-dasharray") && svg.contains("<polygon"));
        assert_eq!(tick_step(4.2), 1.0);
        assert_eq!(tick_step(0.9), 0.2);
    }
}

/// A square heat map: `cells[i][j]` coloured from light (lowest value) to dark red (highest);
/// `None` cells are left grey. Each cell's tooltip gives its value with `unit`.
pub fn heatmap(title: &str, labels: &[String], cells: &[Vec<Option<f64>>], unit: &str) -> String {
    let n = labels.len();
    let cell = if n > 32 { 12.0 } else { 28.0 };
    let (left, top) = (70.0, 60.0);
    let width = left + cell * n as f64 + 110.0;
    let height = top + cell * n as f64 + 40.0;
    let values = || {
        cells
            .iter()
            .flatten()
            .filter_map(|v| *v)
            .filter(|v| v.is_finite())
    };
    let lo = values().fold(f64::INFINITY, f64::min);
    let hi = values().fold(f64::NEG_INFINITY, f64::max);
    let shade = |v: f64| {
        let f = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        // White-yellow to dark red.
        let r = 255.0 - 80.0 * f;
        let g = 240.0 - 200.0 * f;
        let b = 200.0 - 170.0 * f;
        format!("rgb({r:.0},{g:.0},{b:.0})")
    };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="20" font-size="14">{}</text>"#,
        escape(title)
    );
    for (i, l) in labels.iter().enumerate() {
        let c = left + cell * i as f64 + cell / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="{c:.1}" y="{:.0}" text-anchor="middle">{}</text><text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"#,
            top - 6.0,
            escape(l),
            left - 6.0,
            top + cell * i as f64 + cell / 2.0 + 4.0,
            escape(l)
        );
    }
    for (i, row) in cells.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let (x, y) = (left + cell * j as f64, top + cell * i as f64);
            let (fill, tip) = match v {
                Some(v) if v.is_finite() => (
                    shade(*v),
                    format!("{} → {}: {v:.1} {unit}", labels[i], labels[j]),
                ),
                _ => (
                    "#eeeeee".to_string(),
                    format!("{} → {}", labels[i], labels[j]),
                ),
            };
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{cell}" height="{cell}" fill="{fill}" stroke="white"><title>{}</title></rect>"#,
                escape(&tip)
            );
            if let (Some(v), true) = (v, cell >= 28.0) {
                let _ = writeln!(
                    svg,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{v:.0}</text>"#,
                    x + cell / 2.0,
                    y + cell / 2.0 + 3.0
                );
            }
        }
    }
    if lo.is_finite() {
        let x = left + cell * n as f64 + 16.0;
        for (k, v) in [(0, lo), (1, (lo + hi) / 2.0), (2, hi)] {
            let y = top + 22.0 * f64::from(k);
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.0}" y="{y:.0}" width="14" height="14" fill="{}"/><text x="{:.0}" y="{:.0}">{v:.1} {}</text>"#,
                shade(v),
                x + 18.0,
                y + 11.0,
                escape(unit)
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod heatmap_tests {
    #[test]
    fn cells_tooltips_and_legend() {
        let labels = vec!["0".to_string(), "1".to_string()];
        let cells = vec![vec![None, Some(50.0)], vec![Some(50.0), None]];
        let svg = super::heatmap("latency <cas>", &labels, &cells, "ns");
        assert_eq!(svg.matches("<rect x=").count(), 4 + 3);
        assert!(svg.contains("<title>0 → 1: 50.0 ns</title>"));
        assert!(svg.contains("latency &lt;cas&gt;"));
    }
}
