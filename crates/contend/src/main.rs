//! `contend`: generate, observe and explain contention in concurrent programs.
//!
//! Exit codes: 0 success; 1 the measured program or the measurement failed; 2 bad input or
//! usage (unknown option, unreadable snapshot, corrupt run directory, missing process).

mod args;
mod cmd;
mod embedded;
mod exit;
mod output;
mod ui;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Exit codes: 0 success; 1 the measured program or the measurement failed; 2 bad input or usage.
`record` and `scale` pass a failing program's exit status through (128+N if killed by signal N,
127 if it could not be started).
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
    /// Print tables whole, however wide (as when stdout is not a terminal). On a terminal, or
    /// with COLUMNS set, tables drop their least important columns to fit and say which.
    #[arg(long, global = true)]
    wide: bool,
    /// The table columns to show, by their headers, comma-separated (the first column always
    /// shows): e.g. `--columns "STREAM,EVENTS,BY KIND"`.
    #[arg(long, global = true, value_delimiter = ',', value_name = "NAMES")]
    columns: Vec<String>,
}

/// The width output is fitted to: COLUMNS when set (a number of at least 20), else the
/// terminal's when stdout is one; none with --wide, or when piped (scripts get every column).
fn output_width(wide: bool) -> Option<usize> {
    use std::io::IsTerminal;
    if wide {
        return None;
    }
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n >= 20)
    {
        return Some(n);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills a winsize; stdout is a terminal.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col >= 20).then_some(usize::from(size.ws_col))
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
    /// Run a program (or watch a running one) into a run directory: every thread's service
    /// time, run-queue wait and context switches; `--locks`: its pthread locks too.
    ///
    /// Example: `contend record -- ./server --threads 8`, `contend record --locks --cpus 0-3
    /// -- ./app`, `contend record -p 4242 --duration 10`, then `contend report`.
    ///
    /// If contend is killed (even with SIGKILL), the program it started gets SIGKILL too
    /// (not the processes that program started), and nothing of the recording is left in
    /// /dev/shm.
    Record(cmd::record::Args),
    /// Explain a run directory: activity (service time, active threads), locks, streams.
    ///
    /// Example: `contend report contend.data`, `contend report --timeline threads.svg`.
    Report(Box<cmd::report::Args>),
    /// Run a program at 1 core and at n cores, repeated, and split its speed-up loss into
    /// memory/hardware contention and other dependencies (Tudor & Teo).
    ///
    /// Example: `contend scale --threads 2 -- ./app -t {threads}`, `contend scale --threads
    /// 1,2,4,8 --repeat 3 --locks -- ./app -t {threads}`.
    Scale(cmd::scale::Args),
    /// Compare runs or saved reports metric by metric: values and % change against the first.
    ///
    /// Example: `contend diff before.json after.json`, `contend diff a.json b.json c.json
    /// --format latex`, `contend diff base.data new.data --metric 'locks.*wait*'
    /// --fail-if 'locks.summary.wait_ns>+5%'`.
    Diff(cmd::diff::Args),
    /// The guided tour: builds the bundled examples and runs contend's commands on them.
    ///
    /// Example: `contend demo`.
    Demo(cmd::demo::Args),
    /// Build a program for the sharing detector: a compiler driver for gcc and clang that
    /// instruments every load and store and links contend's sharing runtime.
    ///
    /// Example: `contend cc -- gcc -O2 -g app.c -o app`, `make CC="contend cc --"`,
    /// `make CC="contend cc -- clang" CXX="contend cc -- clang++"`.
    Cc(cmd::cc::Args),
    /// Cache-line sharing: which threads read and write which bytes of which lines (false and
    /// true sharing), recorded from a program built with `contend cc`, reported like perf c2c.
    ///
    /// Example: `contend c2c record -- ./app`, `contend c2c report`.
    C2c(cmd::c2c::Args),
    /// Generate contention under control to characterise a machine: `atomic` (one instruction
    /// on one shared line across CPUs and nodes, in load patterns), `latency` (core-to-core
    /// cache-line transfer matrix), `ctx` (context switches in a ring of processes, lat_ctx),
    /// `mem` (STREAM and the memory contention generator), `numa` (the AUTONUMA benchmarks).
    ///
    /// Example: `contend bench atomic --op xadd,load --load cpu-increase`, `contend bench
    /// latency --svg latency.svg`, `contend bench ctx --cpus 0 2 4 8`, `contend bench mem
    /// stream --nt`, `contend bench numa numa01,numa02`.
    Bench(cmd::bench::Args),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    ///
    /// Example: `source <(contend completions bash)`, `contend completions zsh > ~/.zfunc/_contend`.
    Completions(cmd::shell::CompletionsArgs),
    /// Print the manual page (roff), or write one per subcommand with --out-dir.
    ///
    /// Example: `contend man | man -l -`, `contend man --out-dir /usr/share/man/man1`.
    Man(cmd::shell::ManArgs),
    /// Print the JSON Schema of a --json output (`report`, `c2c report`, `bench atomic`, ...),
    /// or list them.
    ///
    /// Example: `contend schema report`, `contend schema --out-dir schemas/`.
    Schema(cmd::schema::Args),
}

fn main() -> ExitCode {
    // contend re-executes itself as the reaper of a recording's rings directory (hidden).
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .get(1)
        .is_some_and(|a| a == observe::reaper::SUBCOMMAND)
    {
        return ExitCode::from(observe::reaper::main(&argv[2..]) as u8);
    }
    observe::reaper::enable();
    embedded::install();
    let cli = Cli::parse();
    report::table::set_fit(report::table::Fit {
        width: output_width(cli.wide),
        columns: cli.columns.clone(),
    });
    let result = match cli.command {
        Command::Topo(a) => cmd::topo::run(a),
        Command::Where(a) => cmd::where_::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Report(a) => cmd::report::run(*a),
        Command::Scale(a) => cmd::scale::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Cc(a) => cmd::cc::run(a),
        Command::C2c(a) => cmd::c2c::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Completions(a) => cmd::shell::completions(a, Cli::command()),
        Command::Man(a) => cmd::shell::man(a, Cli::command()),
        Command::Schema(a) => cmd::schema::run(a),
    };
    // The reader of stdout gone (`| head`) ends a command quietly, with 0 (output.rs says why).
    match result.and_then(|()| output::finish()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<output::ReaderGone>() => ExitCode::SUCCESS,
        Err(e) => exit::report_error(&e),
    }
}
