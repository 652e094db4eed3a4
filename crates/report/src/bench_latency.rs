//! `contend bench latency`: the core-to-core matrix (CPUs grouped by node and L3), CSV and an
//! SVG heat map.

use crate::table::new_table;
use bench::latency::{LatencyReport, Mode};
use std::fmt::Write;

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Cas => "cas (one line, compare-and-swap round trips)",
        Mode::Rw => "rw (two lines, store and spin-read round trips)",
    }
}

fn group(node: Option<u32>, l3: Option<usize>) -> String {
    let n = node.map_or_else(|| "N?".to_string(), |n| format!("N{n}"));
    match l3 {
        Some(i) => format!("{n} L3#{i}"),
        None => n,
    }
}

/// The matrix: one row per CPU, its node and L3, then the one-way latency (ns) to each CPU
/// before it (the lower triangle; each pair is measured once).
pub fn render(r: &LatencyReport) -> String {
    let mut header: Vec<String> = vec!["CPU".into(), "node / L3".into()];
    header.extend(r.cpus.iter().map(|c| c.cpu.to_string()));
    let refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let numeric: Vec<usize> = (2..header.len()).collect();
    let mut t = new_table(&refs, &numeric);
    for (i, a) in r.cpus.iter().enumerate() {
        let mut row = vec![a.cpu.to_string(), group(a.node, a.l3)];
        for (j, b) in r.cpus.iter().enumerate() {
            row.push(if j < i {
                r.pair(a.cpu, b.cpu)
                    .map_or_else(String::new, |p| format!("{:.1}", p.mean_ns))
            } else {
                String::new()
            });
        }
        t.add_row(row);
    }
    let mut out = format!(
        "bench latency: one-way cache-line transfer, ns (half a round trip), mode {}; \
         mean of {} samples of {} round trips after {} discarded\n{t}\n",
        mode_name(r.options.mode),
        r.options.samples,
        r.options.round_trips,
        r.options.warmup_samples
    );
    let means: Vec<f64> = r.pairs.iter().map(|p| p.mean_ns).collect();
    if let Some(s) = bench::Stats::of(&means) {
        let worst_se = r
            .pairs
            .iter()
            .filter_map(|p| p.stderr_ns)
            .fold(f64::NAN, f64::max);
        let _ = writeln!(
            out,
            "pairs: {}; min {:.1} ns, mean {:.1} ns, max {:.1} ns; largest standard error {} ns",
            s.n,
            s.min,
            s.mean,
            s.max,
            if worst_se.is_nan() {
                "n/a".to_string()
            } else {
                format!("{worst_se:.2}")
            }
        );
    }
    let disturbed: usize = r.pairs.iter().map(|p| p.disturbed_samples).sum();
    if disturbed > 0 {
        let kept = r.pairs.iter().filter(|p| p.disturbed_kept).count();
        let _ = writeln!(
            out,
            "{disturbed} sample(s) left out: a thread was off its CPU for more than 5 % of the sample{}",
            if kept > 0 {
                format!(" (kept in {kept} pair(s) where they were most samples: those means include scheduling delays)")
            } else {
                String::new()
            }
        );
    }
    out
}

pub fn to_csv(r: &LatencyReport) -> String {
    let place = |cpu: u32| r.cpus.iter().find(|c| c.cpu == cpu);
    let opt = |v: Option<String>| v.unwrap_or_default();
    let mut out = String::from(
        "from_cpu,to_cpu,from_node,to_node,same_l3,mean_ns,stderr_ns,min_ns,max_ns,samples,disturbed_samples\n",
    );
    for p in &r.pairs {
        let (a, b) = (place(p.from), place(p.to));
        let same_l3 = match (a.and_then(|c| c.l3), b.and_then(|c| c.l3)) {
            (Some(x), Some(y)) => (x == y).to_string(),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{:.3},{},{:.3},{:.3},{},{}",
            p.from,
            p.to,
            opt(a.and_then(|c| c.node).map(|n| n.to_string())),
            opt(b.and_then(|c| c.node).map(|n| n.to_string())),
            same_l3,
            p.mean_ns,
            opt(p.stderr_ns.map(|v| format!("{v:.3}"))),
            p.min_ns,
            p.max_ns,
            p.samples,
            p.disturbed_samples
        );
    }
    out
}

/// The heat map, symmetric (each pair measured once, shown both ways).
pub fn svg(r: &LatencyReport) -> String {
    let labels: Vec<String> = r.cpus.iter().map(|c| c.cpu.to_string()).collect();
    let cells: Vec<Vec<Option<f64>>> = r
        .cpus
        .iter()
        .map(|a| {
            r.cpus
                .iter()
                .map(|b| {
                    (a.cpu != b.cpu)
                        .then(|| r.pair(a.cpu, b.cpu).map(|p| p.mean_ns))
                        .flatten()
                })
                .collect()
        })
        .collect();
    crate::svg::heatmap(
        &format!(
            "Core-to-core latency, one way ({})",
            match r.options.mode {
                Mode::Cas => "cas",
                Mode::Rw => "rw",
            }
        ),
        &labels,
        &cells,
        "ns",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench::latency::{places, LatencyOptions, PairLatency};

    fn report() -> LatencyReport {
        let t = topology::Topology::synthetic("2x2x1").unwrap();
        let cpus = places(&t, &[0, 1, 2]);
        let pair = |from, to, mean_ns| PairLatency {
            from,
            to,
            mean_ns,
            stderr_ns: Some(0.5),
            min_ns: mean_ns - 1.0,
            max_ns: mean_ns + 1.0,
            samples: 300,
            mean_all_ns: mean_ns,
            disturbed_samples: 0,
            disturbed_kept: false,
        };
        LatencyReport {
            options: LatencyOptions::default(),
            cpus,
            pairs: vec![pair(0, 1, 40.0), pair(0, 2, 120.0), pair(1, 2, 121.0)],
        }
    }

    #[test]
    fn the_matrix_is_grouped_and_lower_triangular() {
        let text = render(&report());
        let row2 = text.lines().find(|l| l.contains("N1 L3")).unwrap();
        assert!(row2.contains("120.0") && row2.contains("121.0"), "{row2}");
        let row1 = text.lines().find(|l| l.contains("40.0")).unwrap();
        assert!(row1.contains("N0 L3"), "{row1}");
        assert!(text.contains("pairs: 3; min 40.0 ns"), "{text}");
        assert!(text.contains("largest standard error 0.50 ns"));
    }

    #[test]
    fn csv_and_heatmap() {
        let r = report();
        let csv = to_csv(&r);
        assert!(
            csv.lines()
                .any(|l| l == "0,2,0,1,false,120.000,0.500,119.000,121.000,300,0"),
            "{csv}"
        );
        assert!(csv.lines().any(|l| l.starts_with("0,1,0,0,true,")));
        let svg = svg(&r);
        assert!(svg.contains("0 → 2: 120.0 ns") && svg.contains("2 → 0: 120.0 ns"));
    }
}
