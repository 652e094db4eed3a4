//! `contend bench ctx`: the table, lmbench's lat_ctx format, CSV and the SVG plot of switch
//! time against ring size, one line per array size.

use crate::svg::{line_chart, Line};
use crate::table::new_table;
use bench::ctx::CtxResult;
use std::fmt::Write;

fn us(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        crate::table::NA.to_string()
    }
}

/// The human view: where the ring ran, then per array size the overhead and a table.
pub fn render(r: &CtxResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Context switch time (lmbench lat_ctx): rings of {} connected by pipes, {} ring(s) at once, median of {} repetition(s) after {} warm-up",
        r.mode, r.parallel, r.repetitions, r.warmup
    );
    let _ = writeln!(out, "where: {}", r.placement);
    for s in &r.sizes {
        let _ = writeln!(
            out,
            "\nsize {} KiB per member: overhead {} µs per hop (median; min {}, max {}; one {} doing the pipe write and read and the summing with hot caches), subtracted",
            s.size_kib,
            us(s.overhead.median),
            us(s.overhead.min),
            us(s.overhead.max),
            if r.mode == "threads" { "thread" } else { "process" },
        );
        let mut t = new_table(
            &[
                if r.mode == "threads" {
                    "threads"
                } else {
                    "processes"
                },
                "switch median (µs)",
                "min (µs)",
                "max (µs)",
                "stdev (µs)",
                "hop median (µs)",
                "hop CoV (%)",
                "round trips/rep",
            ],
            &[0, 1, 2, 3, 4, 5, 6, 7],
        );
        for p in &s.points {
            t.add_row(vec![
                p.procs.to_string(),
                us(p.switch.median),
                us(p.switch.min),
                us(p.switch.max),
                us(p.switch.stdev),
                us(p.hop.median),
                p.hop
                    .cov_pct()
                    .map_or_else(|| crate::table::NA.into(), |c| format!("{c:.1}")),
                p.round_trips.to_string(),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    out
}

/// lat_ctx's own output: per size a title line `"size=Nk ovr=X` and then `procs time` lines,
/// microseconds, as input to xgraph.
pub fn lmbench(r: &CtxResult) -> String {
    let mut out = String::new();
    for (i, s) in r.sizes.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "\"size={}k ovr={:.2}", s.size_kib, s.overhead.median);
        for p in &s.points {
            let _ = writeln!(out, "{} {:.2}", p.procs, p.switch.median);
        }
    }
    out
}

/// One row per (size, ring size); times in µs.
pub fn csv(r: &CtxResult) -> String {
    let mut out = String::from(
        "mode,parallel,size_kib,processes,overhead_us,switch_median_us,switch_min_us,switch_max_us,switch_stdev_us,hop_median_us,repetitions,round_trips\n",
    );
    for s in &r.sizes {
        for p in &s.points {
            let _ = writeln!(
                out,
                "{},{},{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{},{}",
                r.mode,
                r.parallel,
                s.size_kib,
                p.procs,
                s.overhead.median,
                p.switch.median,
                p.switch.min,
                p.switch.max,
                p.switch.stdev,
                p.hop.median,
                p.switch.n,
                p.round_trips
            );
        }
    }
    out
}

const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// Switch time (median, µs) against ring size, one line per array size.
pub fn svg(r: &CtxResult) -> String {
    let names: Vec<String> = r
        .sizes
        .iter()
        .map(|s| {
            format!(
                "size {} KiB (overhead {} µs)",
                s.size_kib,
                us(s.overhead.median)
            )
        })
        .collect();
    let points: Vec<Vec<(f64, f64)>> = r
        .sizes
        .iter()
        .map(|s| {
            s.points
                .iter()
                .map(|p| (f64::from(p.procs), p.switch.median))
                .collect()
        })
        .collect();
    let lines: Vec<Line<'_>> = names
        .iter()
        .zip(&points)
        .enumerate()
        .map(|(i, (name, pts))| Line {
            name,
            points: pts,
            colour: COLOURS[i % COLOURS.len()],
            markers: true,
            area: false,
            dashed: false,
        })
        .collect();
    let place = match r.cpus.as_deref() {
        None => "not pinned".to_string(),
        Some([one]) => format!("all on CPU {one}"),
        Some(list) => format!(
            "alternating over CPUs {}",
            list.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    line_chart(
        &format!(
            "Context switch time (lat_ctx), rings of {}, {place}",
            r.mode
        ),
        if r.mode == "threads" {
            "threads in the ring"
        } else {
            "processes in the ring"
        },
        "switch time, median (µs)",
        &lines,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::stats::Spread;
    use bench::ctx::{Point, SizeResult};

    fn sample() -> CtxResult {
        let hop = Spread::of(&[3.0, 3.5, 4.0]).unwrap();
        CtxResult {
            mode: "processes",
            parallel: 1,
            warmup: 1,
            repetitions: 3,
            cpus: Some(vec![0]),
            placement: "pinned: every member on CPU 0".into(),
            sizes: vec![SizeResult {
                size_kib: 0,
                overhead_us: vec![1.0, 1.25, 1.5],
                overhead: Spread::of(&[1.0, 1.25, 1.5]).unwrap(),
                overhead_ops: 1000,
                points: vec![Point {
                    procs: 2,
                    round_trips: 500,
                    hop_us: vec![3.0, 3.5, 4.0],
                    hop,
                    switch: Spread::of(&[1.75, 2.25, 2.75]).unwrap(),
                }],
            }],
            notes: vec![],
        }
    }

    #[test]
    fn lmbench_format_is_lat_ctx_s() {
        assert_eq!(lmbench(&sample()), "\"size=0k ovr=1.25\n2 2.25\n");
    }

    #[test]
    fn table_csv_and_svg_carry_units_and_values() {
        let r = sample();
        let t = render(&r);
        assert!(
            t.contains("switch median (µs)") && t.contains("2.25"),
            "{t}"
        );
        assert!(t.contains("overhead 1.25 µs"), "{t}");
        assert!(t.contains("every member on CPU 0"), "{t}");
        let c = csv(&r);
        assert!(c
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("processes,1,0,2,1.2500,2.2500"));
        let s = svg(&r);
        assert!(s.starts_with("<svg") && s.contains("size 0 KiB"));
    }
}
