//! `contend bench ...`: the generators. Each subcommand parses its options, checks everything
//! it can before anything runs (bad input exits 2), calls `crates/bench` and renders with
//! `report::bench_*`.

mod ctx;
mod mem;
mod numa;

use crate::exit::bad_input;
use bench::atomic::{AtomicOptions, AtomicReport};
use bench::latency::{LatencyOptions, Mode};
use bench::patterns::{self, Pattern};
use bench::{placement, Op};
use std::path::PathBuf;
use topology::{CpuSet, Topology};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Bench,
}

#[derive(clap::Subcommand)]
enum Bench {
    /// Burn CPUs with one instruction on one shared cache line in a load pattern (ccont):
    /// ns per operation per CPU, min/max/avg/stdev per step.
    ///
    /// Example: `contend bench atomic --op xadd,cmpxchg --load cpu-increase`,
    /// `contend bench atomic --op inc --load one --cpus 0,1 --repeat 5 --json`,
    /// `contend bench atomic --op cmpxchg --load cpu-rollover --synthetic 2x4x1` (the plan).
    Atomic(AtomicArgs),
    /// Core-to-core cache-line transfer latency for every pair of CPUs (ping-pong, half the
    /// round trip), as a matrix grouped by node and L3.
    ///
    /// Example: `contend bench latency`, `contend bench latency --cpus 0-3 --mode rw --svg m.svg`.
    Latency(LatencyArgs),
    /// Context switch time in a ring of processes (or threads) connected by pipes, lmbench's
    /// lat_ctx: per ring size the median switch time with the overhead subtracted.
    ///
    /// Example: `contend bench ctx 2 4 8 16`, `contend bench ctx --cpus 0 -s 0,64 2 4 8
    /// --format lmbench`, `contend bench ctx --threads --cpus 0,1 --svg ctx.svg 2 4`.
    Ctx(ctx::Args),
    /// Memory bandwidth and memory contention: STREAM (`stream`) and the thesis's memory
    /// contention generator (`generate`).
    ///
    /// Example: `contend bench mem stream`, `contend bench mem stream --nt --cpus 0,1`,
    /// `contend bench mem generate --cpus 1 --rate 1 --duration 10`.
    Mem(mem::Args),
    /// NUMA placement, the AUTONUMA benchmarks (numa01, numa01-thread-alloc, numa02,
    /// numa02-smt, overcommit) under the policies default, bind, reverse-bind and interleave:
    /// elapsed seconds, lower is better.
    ///
    /// Example: `contend bench numa`, `contend bench numa numa01,numa02 --policy default,bind`.
    Numa(numa::Args),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Bench::Atomic(a) => run_atomic(a),
        Bench::Latency(a) => run_latency(a),
        Bench::Ctx(a) => ctx::run(a),
        Bench::Mem(a) => mem::run(a),
        Bench::Numa(a) => numa::run(a),
    }
}

#[derive(clap::Args)]
struct AtomicArgs {
    /// Operations: idle, memset64, memset128, memset256, test_bit, set_bit, inc, xadd, cmpxchg,
    /// xchg, mfence, sfence, lfence, load, store.
    #[arg(long, value_name = "OP[,OP...]", value_delimiter = ',', required = true, value_parser = Op::parse)]
    op: Vec<Op>,
    /// Load pattern: cpu-increase (one more CPU per step, node by node), node-cascade (one
    /// node's CPUs per step), cpu-rollover (one node's worth of CPUs, one moving to the next
    /// node per step), one (the --cpus list).
    #[arg(long, value_name = "PATTERN", default_value = "cpu-increase")]
    load: Pattern,
    /// The NUMA node the shared line lives on.
    #[arg(long, value_name = "N", default_value_t = 0)]
    memory_node: u32,
    /// Timed iterations per CPU per step.
    #[arg(long, value_name = "N", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    iterations: u64,
    /// Untimed iterations per CPU before the start (default: a tenth of --iterations, at
    /// least 1000).
    #[arg(long, value_name = "N")]
    warmup: Option<u64>,
    /// Runs of the whole pattern; the table pools them and adds their spread.
    #[arg(long, value_name = "R", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// The CPUs the pattern may use (default: every online CPU this process may run on).
    #[arg(long, value_name = "LIST")]
    cpus: Option<CpuSet>,
    /// Print everything (every CPU of every run) as JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print the table as CSV.
    #[arg(long)]
    csv: bool,
    /// Also write the plot of ns/op against CPUs to FILE.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Plan on a sysfs snapshot instead of this machine: print the steps, measure nothing.
    #[arg(long, value_name = "DIR", conflicts_with = "synthetic")]
    sysfs: Option<PathBuf>,
    /// Plan on a synthetic machine (e.g. 2x4x1): print the steps, measure nothing.
    #[arg(long, value_name = "SPEC")]
    synthetic: Option<String>,
}

/// Prints every problem but the last as an error line and returns the last as the error, so
/// each gets one line and the exit code is 2.
fn refuse(mut problems: Vec<String>) -> anyhow::Result<()> {
    match problems.pop() {
        None => Ok(()),
        Some(last) => {
            for p in problems {
                crate::ui::error(p);
            }
            Err(bad_input(last))
        }
    }
}

/// The CPUs to use on this machine: the user's list after checks, or every online CPU in the
/// affinity mask.
fn usable_cpus(
    t: &Topology,
    asked: Option<&CpuSet>,
    problems: &mut Vec<String>,
) -> anyhow::Result<CpuSet> {
    let allowed = placement::affinity()?;
    Ok(match asked {
        Some(cpus) => {
            problems.extend(placement::cpu_problems(t, cpus, &allowed));
            cpus.clone()
        }
        None => {
            let usable = t.online.intersection(&allowed);
            let left_out = t.online.difference(&allowed);
            if !left_out.is_empty() {
                crate::ui::note(format_args!(
                    "CPU(s) {} are outside this process's affinity mask and are left out",
                    left_out.to_list()
                ));
            }
            usable
        }
    })
}

fn run_atomic(a: AtomicArgs) -> anyhow::Result<()> {
    let described = a.sysfs.is_some() || a.synthetic.is_some();
    let t = crate::args::topology(a.sysfs.as_deref(), a.synthetic.as_deref())?;
    if a.load == Pattern::One && a.cpus.is_none() {
        return Err(bad_input("--load one runs on the --cpus list: give --cpus"));
    }
    let mut problems: Vec<String> = Vec::new();
    let usable = if described {
        if let Some(cpus) = &a.cpus {
            if let Err(e) = t.check_cpus(cpus) {
                problems.push(e);
            }
        }
        a.cpus.clone().unwrap_or_else(|| t.online.clone())
    } else {
        for op in &a.op {
            if let Err(e) = op.available() {
                problems.push(e);
            }
        }
        let usable = usable_cpus(&t, a.cpus.as_ref(), &mut problems)?;
        if let Err(e) = placement::check_memory_node(&t, a.memory_node) {
            problems.push(e);
        }
        usable
    };
    refuse(problems)?;
    let plan = patterns::plan(&t, a.load, &usable).map_err(bad_input)?;
    for note in &plan.notes {
        crate::ui::note(note);
    }
    if described {
        return print_plan(&plan, &a);
    }
    let options = AtomicOptions {
        iterations: a.iterations,
        warmup_iterations: a
            .warmup
            .unwrap_or_else(|| AtomicOptions::default_warmup(a.iterations)),
        repeat: a.repeat,
        memory_node: a.memory_node,
    };
    let total = plan.steps.len() * a.op.len() * a.repeat as usize;
    let bar = crate::ui::progress_bar(total as u64, "step runs");
    let report = bench::atomic::run(&plan, &a.op, options, |p| bar.set_position(p.done as u64));
    bar.finish_and_clear();
    let report = report?;
    for note in report.notes.iter().skip(plan.notes.len()) {
        crate::ui::note(note);
    }
    write_atomic(&report, &a)
}

fn write_atomic(r: &AtomicReport, a: &AtomicArgs) -> anyhow::Result<()> {
    if a.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(r))?
        );
    } else if a.csv {
        crate::output::out!("{}", report::bench_atomic::to_csv(r));
    } else {
        crate::output::out!("{}", report::bench_atomic::render(r));
    }
    if let Some(path) = &a.svg {
        std::fs::write(path, report::bench_atomic::svg(r))
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        crate::ui::note(format_args!("plot written to {}", path.display()));
    }
    Ok(())
}

/// The steps of a pattern on a described machine, without measurements.
fn print_plan(plan: &patterns::Plan, a: &AtomicArgs) -> anyhow::Result<()> {
    crate::ui::note("a described machine: showing the plan, nothing is measured");
    if a.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(plan))?
        );
        return Ok(());
    }
    let mut header: Vec<String> = vec!["Nodes".into()];
    header.extend(plan.nodes.iter().map(|n| n.label()));
    header.extend(["CPUs".to_string(), "operation".into(), "CPU list".into()]);
    let refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = report::table::new_table(&refs, &[1 + plan.nodes.len()]);
    for step in &plan.steps {
        for op in &a.op {
            let mut row = vec!["CPUs".to_string()];
            row.extend(plan.map(step));
            row.push(step.len().to_string());
            row.push(op.name().to_string());
            row.push(CpuSet::list_in_order(step));
            t.add_row(row);
        }
    }
    crate::output::outln!("{t}");
    Ok(())
}

#[derive(clap::Args)]
struct LatencyArgs {
    /// The CPUs to measure between (default: every online CPU this process may run on).
    #[arg(long, value_name = "LIST")]
    cpus: Option<CpuSet>,
    /// cas: one line passed by compare-and-swap (core-to-core-latency's method); rw: two lines,
    /// a store answered by a store, no locked instruction.
    #[arg(long, value_name = "MODE", default_value = "cas")]
    mode: Mode,
    /// Samples kept per pair (each is --round-trips round trips).
    #[arg(long, value_name = "N", default_value_t = 300,
          value_parser = clap::value_parser!(u32).range(2..))]
    samples: u32,
    /// Round trips per sample.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..))]
    round_trips: u32,
    /// Samples run first per pair and discarded.
    #[arg(long, value_name = "N", default_value_t = 30)]
    warmup_samples: u32,
    /// Print the pairs as JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print the pairs as CSV.
    #[arg(long)]
    csv: bool,
    /// Also write the heat map to FILE.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

fn run_latency(a: LatencyArgs) -> anyhow::Result<()> {
    let t = Topology::live()?;
    let mut problems = Vec::new();
    let usable = usable_cpus(&t, a.cpus.as_ref(), &mut problems)?;
    if usable.len() < 2 {
        problems.push(format!(
            "latency needs at least 2 CPUs; {} given",
            usable.len()
        ));
    }
    refuse(problems)?;
    let cpus: Vec<u32> = usable.iter().collect();
    let places = bench::latency::places(&t, &cpus);
    let options = LatencyOptions {
        mode: a.mode,
        samples: a.samples,
        round_trips: a.round_trips,
        warmup_samples: a.warmup_samples,
    };
    let pairs = cpus.len() * (cpus.len() - 1) / 2;
    let bar = crate::ui::progress_bar(pairs as u64, "pairs");
    let r = bench::latency::matrix(places, options, |done, _| bar.set_position(done as u64));
    bar.finish_and_clear();
    let r = r?;
    if a.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(&r))?
        );
    } else if a.csv {
        crate::output::out!("{}", report::bench_latency::to_csv(&r));
    } else {
        crate::output::out!("{}", report::bench_latency::render(&r));
    }
    if let Some(path) = &a.svg {
        std::fs::write(path, report::bench_latency::svg(&r))
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        crate::ui::note(format_args!("heat map written to {}", path.display()));
    }
    Ok(())
}
