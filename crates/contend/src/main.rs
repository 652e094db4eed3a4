//! `contend`: generate, observe and explain contention in concurrent programs.
//!
//! Exit codes: 0 success; 1 the measured program or the measurement failed; 2 bad input or
//! usage (unknown option, unreadable snapshot, corrupt run directory, missing process).

mod cmd;
mod examples;
mod exit;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Exit codes: 0 success; 1 the measured program or the measurement failed; 2 bad input or usage.
Results go to stdout, notices and errors to stderr. Run `contend demo` for a guided tour.";

#[derive(Parser)]
#[command(
    name = "contend",
    version,
    about = "Find, measure and explain contention in concurrent programs on Linux",
    after_help = AFTER_HELP,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the machine's topology: packages, NUMA nodes, cores, PUs, caches, node distances.
    ///
    /// Example: `contend topo`, `contend topo --sysfs fixtures/topology/intel-xeon4108-2s-ht`,
    /// `contend topo --synthetic 2x8x2:n2 --json`.
    Topo(cmd::topo::Args),
    /// Show where a process's threads run (CPU, NUMA node) and where its memory lives, per node.
    ///
    /// Example: `contend where $(pidof mysqld)`, `contend where 1234 --watch 1`.
    Where(cmd::where_::Args),
    /// Run a program under observation into a run directory (`--locks`: its pthread locks).
    ///
    /// Example: `contend record --locks -- ./server --threads 8`, then `contend report`.
    Record(cmd::record::Args),
    /// Explain a run directory: what was recorded, events and drops, per stream.
    ///
    /// Example: `contend report contend.data`.
    Report(cmd::report::Args),
    /// The guided tour: builds the bundled examples and runs contend's commands on them.
    ///
    /// Example: `contend demo`.
    Demo(cmd::demo::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Topo(a) => cmd::topo::run(a),
        Command::Where(a) => cmd::where_::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Demo(a) => cmd::demo::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => exit::report_error(&e),
    }
}
