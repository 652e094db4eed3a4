//! `contend bench numa [BENCH...] [--policy ...] [--size BYTES] [--repeat R]`: the AUTONUMA
//! benchmarks under placement policies (`bench::numa`), the seed's table of elapsed seconds.

use crate::exit::bad_input;
use analysis::stats::Spread;
use bench::numa::{self, Bench, Cell, NumaResult, Policy};

#[derive(clap::Args)]
pub struct Args {
    /// Benchmarks: numa01, numa01-thread-alloc, numa02, numa02-smt, overcommit, or all.
    #[arg(value_name = "BENCH", default_value = "all", value_delimiter = ',')]
    benches: Vec<String>,
    /// Policies, comma-separated: default, bind, reverse-bind, interleave.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "default,bind,reverse-bind,interleave"
    )]
    policy: Vec<String>,
    /// Bytes of memory per process (numa01: the shared buffer; numa02: split among threads);
    /// suffixes K, M, G. Default: 1/8 of the available memory, at most 256 MiB.
    #[arg(long, value_name = "BYTES", value_parser = crate::args::parse_bytes)]
    size: Option<u64>,
    /// Times each thread writes its memory in one run.
    #[arg(long, value_name = "N", default_value_t = 5)]
    loops: u32,
    /// Runs of each benchmark and policy; the table shows the median.
    #[arg(long, value_name = "R", default_value_t = 3)]
    repeat: u32,
    /// Sample each process's resident memory per node (numa_maps) every MS milliseconds while
    /// it runs (0: do not sample).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    sample_ms: u64,
    /// Write one SVG per benchmark and policy into DIR: each process's resident memory per node
    /// over time (the last repetition).
    #[arg(long, value_name = "DIR")]
    svg: Option<std::path::PathBuf>,
    /// Print the result as JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print the result as CSV.
    #[arg(long)]
    csv: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let machine = topology::Topology::live()?;
    let benches: Vec<Bench> = if args.benches.iter().any(|b| b == "all") {
        Bench::ALL.to_vec()
    } else {
        args.benches
            .iter()
            .map(|b| {
                Bench::parse(b).ok_or_else(|| {
                    bad_input(format!(
                        "`{b}`: not a benchmark (numa01, numa01-thread-alloc, numa02, numa02-smt, overcommit, all)"
                    ))
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    let policies: Vec<Policy> = args
        .policy
        .iter()
        .map(|p| {
            Policy::parse(p).ok_or_else(|| {
                bad_input(format!(
                    "--policy {p}: use default, bind, reverse-bind or interleave"
                ))
            })
        })
        .collect::<anyhow::Result<_>>()?;
    if args.repeat == 0 || args.loops == 0 {
        return Err(bad_input("--repeat and --loops must be at least 1"));
    }
    let avail = bench::mem::available_bytes();
    let bytes = match args.size {
        Some(b) => b,
        None => avail.map_or(256 << 20, |a| (a / 8).min(256 << 20)),
    };
    // overcommit runs numa01's two processes and numa02's at once.
    let need = bytes
        * if benches.contains(&Bench::Overcommit) {
            3
        } else {
            2
        };
    if let Some(a) = avail.filter(|&a| need > a / 10 * 9) {
        return Err(bad_input(format!(
            "--size {} MiB: the benchmarks need {} MiB at once, more than the memory available ({} MiB)",
            bytes >> 20,
            need >> 20,
            a >> 20
        )));
    }
    let differ = numa::policies_differ(&machine);
    let mut notes = Vec::new();
    if !differ {
        notes.push(format!(
            "this machine has one NUMA node: every policy puts the memory on node {} and the threads on its CPUs, so the policies coincide and the columns differ by noise only",
            machine.nodes.first().map_or(0, |n| n.id)
        ));
    }
    let balancing = numa::numa_balancing();
    notes.push(format!(
        "automatic NUMA balancing (kernel.numa_balancing): {balancing}"
    ));
    for n in &notes {
        crate::ui::note(n);
    }
    let total = (benches.len() * policies.len()) as u64 * u64::from(args.repeat);
    let bar = crate::ui::progress_bar(total, "runs");
    let mut cells = Vec::new();
    for &b in &benches {
        for &p in &policies {
            let plan = numa::plan(&machine, b, p);
            let mut runs = Vec::new();
            let mut memory = Vec::new();
            for _ in 0..args.repeat {
                bar.set_message(format!("{} {}", b.name(), p.name()));
                let sample =
                    (args.sample_ms > 0).then(|| std::time::Duration::from_millis(args.sample_ms));
                let (t, samples) =
                    numa::run(&plan, bytes as usize, args.loops, sample).map_err(|e| {
                        bar.abandon();
                        anyhow::anyhow!("{} under {}: {e}", b.name(), p.name())
                    })?;
                runs.push(t.as_secs_f64());
                memory = samples;
                bar.inc(1);
            }
            cells.push(Cell {
                bench: b,
                policy: p,
                elapsed_s: Spread::of(&runs).ok_or_else(|| anyhow::anyhow!("no runs"))?,
                runs_s: runs,
                memory,
                plan,
            });
        }
    }
    bar.finish_and_clear();
    let result = NumaResult {
        bytes_per_process: bytes,
        loops: args.loops,
        repeat: args.repeat,
        nodes: machine.nodes.len(),
        policies_differ: differ,
        numa_balancing: balancing,
        cells,
        notes,
    };
    let view: Vec<report::bench_numa::CellView> = result
        .cells
        .iter()
        .map(|c| report::bench_numa::CellView {
            bench: c.bench.name(),
            policy: c.policy.name(),
            elapsed_s: c.elapsed_s,
        })
        .collect();
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)
            .map_err(|e| bad_input(format!("--svg {}: {e}", dir.display())))?;
        for c in &result.cells {
            let samples: Vec<(f64, usize, u32, u64)> = c
                .memory
                .iter()
                .map(|m| (m.t_s, m.process, m.node, m.kib))
                .collect();
            let title = format!(
                "{} under {}: resident memory per process and node",
                c.bench.name(),
                c.policy.name()
            );
            let path = dir.join(format!("{}-{}.svg", c.bench.name(), c.policy.name()));
            std::fs::write(&path, report::bench_numa::memory_svg(&title, &samples))
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        }
    }
    if args.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(&result))?
        );
    } else if args.csv {
        crate::output::out!("{}", report::bench_numa::csv(&view));
    } else {
        crate::output::out!(
            "{}",
            report::bench_numa::render(&view, bytes, args.loops, args.repeat)
        );
    }
    Ok(())
}
