//! `contend record [opts] -- CMD...`: run a program under observation into a run directory.
//! With `--locks`, the LD_PRELOAD probe records every pthread lock, condition wait and barrier.

use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The run directory to create (an existing one is kept and the new run numbered).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = trace::DEFAULT_RUN_DIR)]
    output: PathBuf,
    /// Record a process that is already running, instead of starting CMD (Ctrl-C stops).
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with_all = ["locks", "cpus", "layout", "fill"])]
    pid: Option<u32>,
    /// With -p: stop after this many seconds (default: when the process exits, or Ctrl-C).
    #[arg(long, value_name = "S", requires = "pid")]
    duration: Option<f64>,
    /// Service-time sampling interval, in ms: every thread's on-CPU time, run-queue wait,
    /// context switches and CPU from /proc/PID/task/TID/schedstat. 0 turns sampling off.
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    interval: f64,
    /// Do not record exact scheduler states from the sched tracepoints (recorded by default
    /// where permitted; they cost the kernel about 2 µs per context switch, machine-wide).
    #[arg(long)]
    no_sched_trace: bool,
    /// Run the program on these CPUs only (a list such as 0-3,8).
    #[arg(long, value_name = "LIST", conflicts_with_all = ["layout", "fill"])]
    cpus: Option<String>,
    /// Run the program on the CPUs a layout file lists (numbers in the order they are given
    /// out, like the thesis's systemConfig.txt); with --cores, the first N of them.
    #[arg(long, value_name = "FILE", conflicts_with = "fill")]
    layout: Option<PathBuf>,
    /// Run the program on CPUs taken in this order from the machine's topology: socket-first
    /// (fill one package first), spread (alternate packages) or compact; with --cores N.
    #[arg(long, value_name = "ORDER", requires = "cores")]
    fill: Option<topology::FillOrder>,
    /// With --fill or --layout: how many CPUs to use.
    #[arg(long, value_name = "N")]
    cores: Option<usize>,
    /// Record pthread mutexes, rwlocks, spinlocks, condition waits and barriers of an
    /// unmodified program through the LD_PRELOAD probe. `--locks=sampled` (or `sampled:N`)
    /// records one in N uncontended acquisitions (default 64) and every contended one.
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "full", require_equals = true)]
    locks: Option<LockMode>,
    /// With --locks: record the program's heap allocations too (malloc, calloc, realloc, the
    /// aligned allocators, C++ new), so that a lock on the heap is named by the call site that
    /// allocated it. Costs a clock read and two records per allocation.
    #[arg(long, requires = "locks")]
    alloc_sites: bool,
    /// With --locks: do not record the program's blocked futex waits (on by default with
    /// --locks: every voluntary switch out of the program's threads, through a per-task
    /// `sched_switch` tracepoint, which needs root, CAP_PERFMON or
    /// kernel.perf_event_paranoid=-1).
    #[arg(long, requires = "locks")]
    no_waits: bool,
    /// With --locks: the most MiB of user stacks (of the blocked waits) kept in the run
    /// directory; past it, waits are still recorded, without their stacks (counted and
    /// shown). 0 keeps none.
    #[arg(long, requires = "locks", value_name = "MIB", default_value_t = 256)]
    stack_budget: u64,
    /// Each thread's event ring, in KiB: events beyond what fits between two drains are
    /// counted as dropped. The rings of all threads alive at once share 192 MiB: past that,
    /// threads get smaller rings (down to 64 KiB), and a thread that finds no room is not
    /// recorded (counted and shown). `CONTEND_RING_BUDGET_MIB=N` in contend's environment
    /// sets another budget.
    #[arg(long, value_name = "KIB", default_value_t = 4096)]
    ring_kb: u64,
    /// How often the rings are drained, in ms.
    #[arg(long, value_name = "MS", default_value_t = 1)]
    poll_ms: u64,
    /// Record an MPI job's calls in every rank (`contend record --mpi -- mpirun -np 4 ./app`;
    /// also mpiexec, srun, or a single rank): contend builds its PMPI wrapper with the
    /// program's own mpicc (cached) and has the launcher preload it into each rank.
    #[arg(long, conflicts_with = "pid")]
    mpi: bool,
    /// Run a contention generator beside the program for the whole run, on CPUs it does not
    /// use: `mem generate --cpus LIST [--rate GB/S] [--size BYTES]`, the memory contention
    /// generator (the program gets the other CPUs unless --cpus says). Compare with a run
    /// without it: `contend diff`.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["pid", "mpi"])]
    interfere: Option<String>,
    /// With --mpi: the MPI the program uses, when contend cannot tell from the program
    /// (openmpi or mpich).
    #[arg(long, value_name = "IMPL", requires = "mpi", value_parser = parse_mpi_impl)]
    mpi_impl: Option<observe::mpi::Implementation>,
    /// The program to run and its arguments (after `--`).
    #[arg(last = true, value_name = "CMD", required_unless_present = "pid")]
    command: Vec<String>,
}

/// How much of the uncontended lock traffic is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockMode {
    /// Record one in this many uncontended acquisitions (1: all).
    every: u32,
}

impl std::str::FromStr for LockMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(LockMode { every: 1 }),
            "sampled" => Ok(LockMode { every: 64 }),
            _ => s
                .strip_prefix("sampled:")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&n| n >= 1)
                .map(|every| LockMode { every })
                .ok_or_else(|| {
                    format!("`{s}` is not a lock mode: use full, sampled or sampled:N (N >= 1)")
                }),
        }
    }
}

fn parse_mpi_impl(s: &str) -> Result<observe::mpi::Implementation, String> {
    match s.to_ascii_lowercase().as_str() {
        "openmpi" | "open-mpi" | "ompi" => Ok(observe::mpi::Implementation::OpenMpi),
        "mpich" => Ok(observe::mpi::Implementation::Mpich),
        _ => Err(format!(
            "`{s}` is not an MPI contend knows: use openmpi or mpich"
        )),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let interval = recorder::sampling_interval(args.interval)?;
    let recorded_by: Vec<String> = crate::args::command_line();
    let mut tell = |n: recorder::Notice| crate::ui::recorder_notice(&n);
    if let Some(pid) = args.pid {
        recorder::attach(
            &recorder::AttachOptions {
                pid,
                output: args.output,
                recorded_by,
                interval,
                sched_trace: !args.no_sched_trace,
                duration: args.duration,
            },
            &mut tell,
        )?;
        return Ok(());
    }
    let options = recorder::RecordOptions {
        command: args.command,
        output: args.output,
        recorded_by,
        interval,
        sched_trace: !args.no_sched_trace,
        placement: recorder::Placement {
            cpus: args.cpus,
            layout: args.layout,
            fill: args.fill,
            cores: args.cores,
            chosen: None,
        },
        locks: args.locks.map(|mode| recorder::Locks {
            sample_every: mode.every,
            alloc_sites: args.alloc_sites,
            ring_kib: args.ring_kb,
            probe: None,
            waits: !args.no_waits,
            stack_budget: args.stack_budget.saturating_mul(1 << 20),
        }),
        poll: Duration::from_millis(args.poll_ms),
        mpi: args.mpi.then_some(args.mpi_impl),
        interfere: args.interfere,
        ..recorder::RecordOptions::default()
    };
    let recorded = recorder::record(&options, &mut tell)?;
    // The program's own exit status is contend's (as perf record does).
    match recorded.failed_status() {
        None => Ok(()),
        Some(code) => std::process::exit(code),
    }
}
