//! `contend bench mem`: STREAM's table (best rate GB/s, average/min/max time) and the
//! validation line; the generator's achieved rate.

use crate::table::new_table;
use bench::mem::{GenerateResult, StreamResult};
use std::fmt::Write;

/// STREAM's report: the array size, threads and where, then one row per kernel.
pub fn render_stream(r: &StreamResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "STREAM: 3 arrays of {} elements (f64), {:.1} MiB each{}; {} thread(s) pinned to CPU(s) {}; {} stores; best of {} runs (first not counted)",
        r.elements,
        r.array_bytes as f64 / (1u64 << 20) as f64,
        r.llc_total_bytes.map_or(String::new(), |l| format!(
            " ({:.1} × the last-level caches)",
            r.array_bytes as f64 / l as f64
        )),
        r.threads,
        r.cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        if r.nt { "non-temporal (movntpd)" } else { "ordinary" },
        r.ntimes - 1
    );
    let mut t = new_table(
        &[
            "kernel",
            "best rate (GB/s)",
            "avg time (ms)",
            "min time (ms)",
            "max time (ms)",
            "bytes/iteration",
        ],
        &[1, 2, 3, 4, 5],
    );
    for k in &r.kernels {
        t.add_row(vec![
            k.kernel.name().to_string(),
            format!("{:.2}", k.best_gb_s),
            format!("{:.2}", k.avg_s * 1e3),
            format!("{:.2}", k.min_s * 1e3),
            format!("{:.2}", k.max_s * 1e3),
            k.bytes.to_string(),
        ]);
    }
    let _ = writeln!(out, "{t}");
    let v = &r.validation;
    let _ = writeln!(
        out,
        "validation: {} (mean relative error a {:.1e}, b {:.1e}, c {:.1e}; limit {:.0e})",
        if v.passed { "passed" } else { "FAILED" },
        v.relative_error[0],
        v.relative_error[1],
        v.relative_error[2],
        v.epsilon
    );
    out
}

/// The generator's result: target, achieved, per thread.
pub fn render_generate(r: &GenerateResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "memory contention generator: {} thread(s) on CPU(s) {}, non-temporal stores, {:.1} MiB buffers per thread, {:.2} s",
        r.cpus.len(),
        r.cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        r.buffer_bytes_per_thread as f64 / (1u64 << 20) as f64,
        r.seconds
    );
    let _ = writeln!(
        out,
        "target {}, achieved {:.3} GB/s (read + written, as STREAM's Copy counts){}",
        r.target_gb_s
            .map_or("flat out".to_string(), |t| format!("{t:.3} GB/s")),
        r.achieved_gb_s,
        r.target_gb_s.map_or(String::new(), |t| format!(
            ", {:+.1} % of the target",
            100.0 * (r.achieved_gb_s / t - 1.0)
        ))
    );
    if r.cpus.len() > 1 {
        let mut t = new_table(&["CPU", "achieved (GB/s)"], &[0, 1]);
        for (c, g) in r.cpus.iter().zip(&r.per_thread_gb_s) {
            t.add_row(vec![c.to_string(), format!("{g:.3}")]);
        }
        let _ = writeln!(out, "{t}");
    }
    out
}
