//! `contend bench ...`: the generators, one module per benchmark (`bench_ctx`, `bench_mem`).

use super::{bench_ctx, bench_mem, bench_numa};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Context switch time in a ring of processes (or threads) connected by pipes, lmbench's
    /// lat_ctx: per ring size the median switch time with the overhead subtracted.
    ///
    /// Example: `contend bench ctx 2 4 8 16`, `contend bench ctx --cpus 0 -s 0,64 2 4 8
    /// --format lmbench`, `contend bench ctx --threads --cpus 0,1 --svg ctx.svg 2 4`.
    Ctx(bench_ctx::Args),
    /// Memory bandwidth and memory contention: STREAM (`stream`) and the thesis's memory
    /// contention generator (`generate`).
    ///
    /// Example: `contend bench mem stream`, `contend bench mem stream --nt --cpus 0,1`,
    /// `contend bench mem generate --cpus 1 --rate 1 --duration 10`.
    Mem(bench_mem::Args),
    /// NUMA placement, the AUTONUMA benchmarks (numa01, numa01-thread-alloc, numa02,
    /// numa02-smt, overcommit) under the policies default, bind, reverse-bind and interleave:
    /// elapsed seconds, lower is better.
    ///
    /// Example: `contend bench numa`, `contend bench numa numa01,numa02 --policy default,bind`.
    Numa(bench_numa::Args),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Ctx(a) => bench_ctx::run(a),
        BenchCommand::Mem(a) => bench_mem::run(a),
        BenchCommand::Numa(a) => bench_numa::run(a),
    }
}
