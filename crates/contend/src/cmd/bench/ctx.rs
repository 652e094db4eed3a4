//! `contend bench ctx [-P N] [-W N] [-N N] [-s KB] [--threads] [--cpus LIST] PROCS...`:
//! lmbench's lat_ctx (`bench::ctx`), with its output format, a table, JSON, CSV and a plot.

use crate::exit::bad_input;
use bench::ctx::{self, Config};
use std::path::PathBuf;
use std::time::Duration;
use topology::CpuSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table per array size, with the overhead and the spread.
    Table,
    /// lat_ctx's own output: `"size=Nk ovr=X` then `procs µs` lines.
    Lmbench,
}

#[derive(clap::Args)]
pub struct Args {
    /// Rings running at once (lmbench's -P), each timed on its own; the figure is their mean.
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1)]
    parallel: u32,
    /// Repetitions run first and not counted (lmbench's -W).
    #[arg(short = 'W', long = "warmup", value_name = "N", default_value_t = 1)]
    warmup: u32,
    /// Counted repetitions (lmbench's -N); the figure is their median, as lmbench's.
    #[arg(
        short = 'N',
        long = "repetitions",
        value_name = "N",
        default_value_t = 11
    )]
    repetitions: u32,
    /// Private array each member sums between receiving and passing the token, KiB (lmbench's
    /// -s); several sizes as `0,16,64` (or -s repeated).
    #[arg(
        short = 's',
        long = "size",
        value_name = "KB",
        value_delimiter = ',',
        default_value = "0"
    )]
    sizes: Vec<u32>,
    /// Threads of one process instead of processes (fork).
    #[arg(long)]
    threads: bool,
    /// Pin the ring: member i on the i-th CPU of LIST, round robin (`0`: all on CPU 0; `0,1`:
    /// consecutive members on different CPUs). Default: not pinned.
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Target duration of one repetition, ms (the round trips per repetition are calibrated
    /// to it).
    #[arg(long, value_name = "MS", default_value_t = 50)]
    rep_ms: u64,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Print the result as JSON.
    #[arg(long, conflicts_with_all = ["format", "csv"])]
    json: bool,
    /// Print the result as CSV (one row per size and ring size).
    #[arg(long, conflicts_with = "format")]
    csv: bool,
    /// Also write an SVG plot of switch time against ring size, one line per size.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Ring sizes (members per ring), e.g. `2 4 8 16 20`.
    #[arg(required = true, value_name = "PROCS")]
    procs: Vec<u32>,
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The checks of everything the user gave, before anything runs: one line each.
fn checks(args: &Args, machine: &topology::Topology) -> anyhow::Result<Option<Vec<u32>>> {
    if let Some(&n) = args.procs.iter().find(|&&n| n < 2) {
        return Err(bad_input(format!(
            "PROCS: a ring needs at least 2 members (got {n})"
        )));
    }
    if args.parallel == 0 || args.repetitions == 0 {
        return Err(bad_input("-P and -N must be at least 1"));
    }
    if !(1..=60_000).contains(&args.rep_ms) {
        return Err(bad_input(format!(
            "--rep-ms {}: give 1 to 60000 ms",
            args.rep_ms
        )));
    }
    let cpus = match &args.cpus {
        None => None,
        Some(text) => {
            let set =
                CpuSet::parse_list(text).map_err(|e| bad_input(format!("--cpus {text}: {e}")))?;
            if set.is_empty() {
                return Err(bad_input(format!("--cpus {text}: no CPU given")));
            }
            machine
                .check_cpus(&set)
                .map_err(|e| bad_input(format!("--cpus {text}: {e}")))?;
            let allowed = CpuSet::from_iter_u32(ctx::allowed_cpus());
            let outside = set.difference(&allowed);
            if !outside.is_empty() {
                return Err(bad_input(format!(
                    "--cpus {text}: CPU(s) {} are outside contend's affinity mask ({})",
                    outside.to_list(),
                    allowed.to_list()
                )));
            }
            Some(set.iter().collect::<Vec<u32>>())
        }
    };
    let max_procs = u64::from(*args.procs.iter().max().unwrap_or(&2));
    let members = max_procs * u64::from(args.parallel);
    // Descriptors: two per member plus ours; raise the soft limit if the hard one allows.
    let fds_needed = 2 * members + 64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid rlimit to fill and then pass back.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < fds_needed {
            if lim.rlim_max < fds_needed {
                return Err(bad_input(format!(
                    "{} rings of {max_procs} need {fds_needed} file descriptors, but the limit is {} (ulimit -Hn): fewer processes or -P",
                    args.parallel, lim.rlim_max
                )));
            }
            lim.rlim_cur = fds_needed;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    // Processes (or threads): the user's limit and the system's.
    let mut nproc = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as above.
    let nproc_limit = (unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut nproc) } == 0
        && nproc.rlim_cur != libc::RLIM_INFINITY)
        .then_some(nproc.rlim_cur);
    let system_limit = [
        read_number("/proc/sys/kernel/pid_max"),
        read_number("/proc/sys/kernel/threads-max"),
    ]
    .into_iter()
    .flatten()
    .min();
    for (limit, what) in [
        (nproc_limit, "your process limit (ulimit -u)"),
        (system_limit, "the system's (kernel.pid_max, threads-max)"),
    ] {
        if let Some(l) = limit.filter(|&l| members + 64 > l) {
            return Err(bad_input(format!(
                "{} rings of {max_procs} {} exceed {what}: {l}",
                args.parallel,
                if args.threads { "threads" } else { "processes" }
            )));
        }
    }
    let max_size = u64::from(*args.sizes.iter().max().unwrap_or(&0));
    if let Some(avail) = bench::mem::available_bytes().map(|b| b / 1024) {
        let need = max_size * (members + 1);
        if need > avail / 10 * 9 {
            return Err(bad_input(format!(
                "-s {max_size}: {members} members × {max_size} KiB = {need} KiB, more than the memory available ({avail} KiB)"
            )));
        }
    }
    Ok(cpus)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let machine = topology::Topology::live()?;
    let cpus = checks(&args, &machine)?;
    if let Some(path) = &args.svg {
        // Checked before the measurement, which may take minutes.
        std::fs::File::create(path)
            .map_err(|e| bad_input(format!("--svg {}: {e}", path.display())))?;
    }
    let allowed = CpuSet::from_iter_u32(ctx::allowed_cpus());
    let placement = ctx::placement_text(cpus.as_deref(), &allowed.to_list());
    let ring_cpus: Vec<u32> = cpus.clone().unwrap_or_else(|| allowed.iter().collect());
    let mut notes = ctx::working_set_notes(
        &machine,
        &ring_cpus,
        &args.sizes,
        &args.procs,
        args.parallel,
    );
    for n in &notes {
        crate::ui::note(n);
    }
    crate::ui::status(format_args!("ring {placement}"));
    let cfg = Config {
        procs: args.procs.clone(),
        sizes_kib: args.sizes.clone(),
        parallel: args.parallel,
        warmup: args.warmup,
        repetitions: args.repetitions,
        threads: args.threads,
        cpus,
        rep_time: Duration::from_millis(args.rep_ms),
    };
    let bar = crate::ui::progress_bar(cfg.steps(), "repetitions");
    let result = ctx::run(&cfg, &mut |msg: &str| {
        bar.set_message(msg.to_string());
        bar.inc(1);
    });
    bar.finish_and_clear();
    // A ring that broke or could not be built is a failed measurement (exit 1).
    let mut result = result.map_err(|e| anyhow::anyhow!("{e}"))?;
    for n in &result.notes {
        crate::ui::note(n);
    }
    result.placement = placement;
    notes.append(&mut result.notes);
    result.notes = notes;
    if let Some(path) = &args.svg {
        std::fs::write(path, report::bench_ctx::svg(&result))
            .map_err(|e| anyhow::anyhow!("--svg {}: {e}", path.display()))?;
    }
    if args.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(&result))?
        );
    } else if args.csv {
        crate::output::out!("{}", report::bench_ctx::csv(&result));
    } else {
        match args.format {
            Format::Table => crate::output::out!("{}", report::bench_ctx::render(&result)),
            Format::Lmbench => crate::output::out!("{}", report::bench_ctx::lmbench(&result)),
        }
    }
    Ok(())
}
