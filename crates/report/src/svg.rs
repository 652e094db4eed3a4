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
