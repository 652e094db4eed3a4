//! `contend bench numa`: the seed's table (rows benchmarks, columns policies, elapsed seconds,
//! lower is better) and CSV.

use crate::table::new_table;
use analysis::stats::Spread;
use std::fmt::Write;

/// One benchmark under one policy.
pub struct CellView<'a> {
    pub bench: &'a str,
    pub policy: &'a str,
    pub elapsed_s: Spread,
}

fn order<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for i in items {
        if !v.contains(&i) {
            v.push(i);
        }
    }
    v
}

pub fn render(cells: &[CellView<'_>], bytes: u64, loops: u32, repeat: u32) -> String {
    let benches = order(cells.iter().map(|c| c.bench));
    let policies = order(cells.iter().map(|c| c.policy));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "AUTONUMA benchmarks: elapsed seconds, median of {repeat} (min–max); lower is better. {} MiB per process, each thread writing its memory {loops} times",
        bytes >> 20
    );
    let header: Vec<String> = std::iter::once("benchmark".to_string())
        .chain(policies.iter().map(|p| format!("{p} (s)")))
        .collect();
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let numeric: Vec<usize> = (1..header.len()).collect();
    let mut t = new_table(&header_refs, &numeric);
    for b in &benches {
        let mut row = vec![b.to_string()];
        for p in &policies {
            row.push(
                cells
                    .iter()
                    .find(|c| c.bench == *b && c.policy == *p)
                    .map_or_else(
                        || crate::table::NA.to_string(),
                        |c| {
                            format!(
                                "{:.3} ({:.3}–{:.3})",
                                c.elapsed_s.median, c.elapsed_s.min, c.elapsed_s.max
                            )
                        },
                    ),
            );
        }
        t.add_row(row);
    }
    let _ = writeln!(out, "{t}");
    out
}

pub fn csv(cells: &[CellView<'_>]) -> String {
    let mut out = String::from("bench,policy,median_s,min_s,max_s,stdev_s,runs\n");
    for c in cells {
        let s = c.elapsed_s;
        let _ = writeln!(
            out,
            "{},{},{:.6},{:.6},{:.6},{:.6},{}",
            c.bench, c.policy, s.median, s.min, s.max, s.stdev, s.n
        );
    }
    out
}

const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Resident memory (MiB) against time (s), one line per (process, node): samples are
/// `(t_s, process, node, kib)`.
pub fn memory_svg(title: &str, samples: &[(f64, usize, u32, u64)]) -> String {
    let mut keys: Vec<(usize, u32)> = samples.iter().map(|s| (s.1, s.2)).collect();
    keys.sort_unstable();
    keys.dedup();
    let names: Vec<String> = keys
        .iter()
        .map(|(p, n)| format!("process {p}, node {n}"))
        .collect();
    let points: Vec<Vec<(f64, f64)>> = keys
        .iter()
        .map(|k| {
            samples
                .iter()
                .filter(|s| (s.1, s.2) == *k)
                .map(|s| (s.0, s.3 as f64 / 1024.0))
                .collect()
        })
        .collect();
    let lines: Vec<crate::svg::Line<'_>> = names
        .iter()
        .zip(&points)
        .enumerate()
        .map(|(i, (name, pts))| crate::svg::Line {
            name,
            points: pts,
            colour: COLOURS[i % COLOURS.len()],
            markers: false,
            area: false,
            dashed: false,
        })
        .collect();
    crate::svg::line_chart(title, "time (s)", "resident memory (MiB)", &lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_benchmarks_and_columns_policies() {
        let s = Spread::of(&[1.0, 2.0, 3.0]).unwrap();
        let cells = [
            CellView {
                bench: "numa01",
                policy: "default",
                elapsed_s: s,
            },
            CellView {
                bench: "numa01",
                policy: "bind",
                elapsed_s: s,
            },
            CellView {
                bench: "numa02",
                policy: "default",
                elapsed_s: s,
            },
        ];
        let t = render(&cells, 256 << 20, 5, 3);
        assert!(t.contains("default (s)") && t.contains("bind (s)"), "{t}");
        assert!(t.contains("2.000 (1.000–3.000)"), "{t}");
        // numa02 was not run under bind: n/a, not a zero.
        assert!(
            t.lines().any(|l| l.contains("numa02") && l.contains("n/a")),
            "{t}"
        );
        assert_eq!(csv(&cells).lines().count(), 4);
        let svg = memory_svg(
            "t",
            &[(0.1, 0, 0, 1024), (0.2, 0, 0, 2048), (0.2, 1, 0, 512)],
        );
        assert!(svg.contains("process 0, node 0") && svg.contains("process 1, node 0"));
    }
}
