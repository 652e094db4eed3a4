//! `contend bench atomic`: ccont's table (node maps, CPUs, operation, min/max/avg/stdev), CSV,
//! and the plot of ns/op against the number of CPUs.

use crate::table::{new_table, or_na};
use bench::atomic::AtomicReport;
use std::fmt::Write;

fn ns(v: f64) -> String {
    format!("{v:.3}")
}

/// The ccont table with units in the header, one row per step and operation.
pub fn render(r: &AtomicReport) -> String {
    let repeated = r.options.repeat > 1;
    let mut header: Vec<String> = vec!["Nodes".into()];
    header.extend(r.nodes.iter().map(|n| n.label()));
    header.extend(
        [
            "CPUs",
            "operation",
            "min ns/op",
            "max ns/op",
            "avg ns/op",
            "stdev ns/op",
        ]
        .map(String::from),
    );
    if repeated {
        header.push("repeat spread ns/op".into());
    }
    let first_number = 1 + r.nodes.len();
    let numeric: Vec<usize> = (first_number..header.len())
        .filter(|&i| i != first_number + 1)
        .collect();
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = new_table(&header_refs, &numeric);
    for s in &r.steps {
        let mut row: Vec<String> = vec!["CPUs".into()];
        row.extend(s.map.iter().cloned());
        row.push(s.cpus.len().to_string());
        row.push(s.op.name().into());
        row.push(ns(s.stats.min));
        row.push(ns(s.stats.max));
        row.push(ns(s.stats.mean));
        row.push(or_na(s.stats.stdev.map(ns)));
        if repeated {
            row.push(or_na(s.repeat_spread().map(ns)));
        }
        t.add_row(row);
    }
    let mut out =
        format!(
        "bench atomic: {} pattern, memory on node {}, {} iterations per CPU after {} warm-up{}\n",
        r.pattern.name(),
        r.memory_node_found
            .map_or_else(|| format!("{} (asked)", r.options.memory_node), |n| n.to_string()),
        r.options.iterations,
        r.options.warmup_iterations,
        if repeated {
            format!(
                ", {} runs of the pattern (min/max/avg/stdev over every CPU of every run)",
                r.options.repeat
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(out, "{t}");
    out
}

/// One line per step and operation: the table's figures plus the CPU list.
pub fn to_csv(r: &AtomicReport) -> String {
    let mut out = String::from(
        "step,operation,cpus,cpu_list,map,min_ns_per_op,max_ns_per_op,avg_ns_per_op,stdev_ns_per_op,runs,repeat_spread_ns_per_op\n",
    );
    let opt = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.4}"));
    for s in &r.steps {
        let list: Vec<String> = s.cpus.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "{},{},{},\"{}\",{},{:.4},{:.4},{:.4},{},{},{}",
            s.step + 1,
            s.op.name(),
            s.cpus.len(),
            list.join(","),
            s.map.join(" "),
            s.stats.min,
            s.stats.max,
            s.stats.mean,
            opt(s.stats.stdev),
            s.runs.len(),
            opt(s.repeat_spread()),
        );
    }
    out
}

const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// ns/op (the step's mean over CPUs) against the number of CPUs, a line per operation.
pub fn svg(r: &AtomicReport) -> String {
    let points: Vec<Vec<(f64, f64)>> = r
        .ops
        .iter()
        .map(|op| {
            r.steps
                .iter()
                .filter(|s| s.op == *op)
                .map(|s| (s.cpus.len() as f64, s.stats.mean))
                .collect()
        })
        .collect();
    let names: Vec<String> = r.ops.iter().map(|o| o.name().to_string()).collect();
    let lines: Vec<crate::svg::Line<'_>> = points
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (p, name))| crate::svg::Line {
            name,
            points: p,
            colour: COLOURS[i % COLOURS.len()],
            markers: true,
            area: false,
            dashed: false,
        })
        .collect();
    crate::svg::line_chart(
        &format!(
            "bench atomic, {} (memory on node {})",
            r.pattern.name(),
            r.options.memory_node
        ),
        "CPUs burning",
        "ns per operation (mean over CPUs)",
        &lines,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench::atomic::{AtomicOptions, CpuSample, StepResult};
    use bench::patterns::{plan, Pattern};
    use bench::{Op, Stats};

    /// A report made by hand on ccont's 2-node machine with its first two published rows.
    fn report(repeat: u32) -> AtomicReport {
        let t = topology::Topology::synthetic("2x4x1").unwrap();
        let p = plan(&t, Pattern::CpuIncrease, &t.online).unwrap();
        let rows = [vec![8.938], vec![36.114, 36.119]];
        let steps = rows
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let run: Vec<CpuSample> = v
                    .iter()
                    .enumerate()
                    .map(|(c, &x)| CpuSample {
                        cpu: c as u32,
                        elapsed_ns: (x * 1000.0) as u64,
                        ns_per_op: x,
                        span_ns: (x * 1000.0) as u64,
                        span_cpu_ns: (x * 1000.0) as u64,
                    })
                    .collect();
                StepResult {
                    step: i,
                    op: Op::Cmpxchg,
                    cpus: p.steps[i].clone(),
                    map: p.map(&p.steps[i]),
                    runs: vec![run; repeat as usize],
                    stats: Stats::of(v).unwrap(),
                    repeat_means: vec![v.iter().sum::<f64>() / v.len() as f64; repeat as usize],
                    disturbed_runs: 0,
                    rerun: 0,
                }
            })
            .collect();
        AtomicReport {
            pattern: Pattern::CpuIncrease,
            ops: vec![Op::Cmpxchg],
            options: AtomicOptions {
                iterations: 1000,
                warmup_iterations: 1000,
                repeat,
                memory_node: 0,
            },
            memory_node_found: Some(0),
            nodes: p.nodes.clone(),
            steps,
            notes: vec![],
        }
    }

    #[test]
    fn the_table_has_cconts_columns_with_units() {
        let text = render(&report(1));
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().find(|l| l.contains("Nodes")).unwrap();
        for col in ["N0", "N1", "CPUs", "operation", "min ns/op", "stdev ns/op"] {
            assert!(header.contains(col), "{header}");
        }
        assert!(!header.contains("spread"));
        let row1 = lines.iter().find(|l| l.contains("*---")).expect(&text);
        assert!(row1.contains("cmpxchg") && row1.contains("8.938"), "{row1}");
        // One CPU has no standard deviation: n/a, not 0.
        assert!(row1.contains("n/a"), "{row1}");
        let row2 = lines.iter().find(|l| l.contains("**--")).expect(&text);
        assert!(row2.contains("36.114") && row2.contains("36.119") && row2.contains("0.004"));
        assert!(render(&report(3)).contains("repeat spread ns/op"));
    }

    #[test]
    fn csv_and_svg() {
        let r = report(2);
        let csv = to_csv(&r);
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows.len(), 3);
        assert!(
            rows[1].starts_with("1,cmpxchg,1,\"0\",*--- ----,8.9380"),
            "{}",
            rows[1]
        );
        assert!(rows[2].contains(",2,0.0000"), "{}", rows[2]);
        let svg = svg(&r);
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains(">cmpxchg</text>"));
    }
}
