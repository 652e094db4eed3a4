//! `contend c2c record|report`: cache-line sharing (false and true sharing), perf c2c's job.
//!
//! `record` runs a program built with `contend cc` (the instrumentation back end: its sharing
//! runtime writes `sharing/PID.json`, `sharing/PID.hist` and `maps/sharing-PID.maps` into the
//! run directory when each process exits) and registers what was written in meta.json.
//! `report` is `cmd::sharing::report`.
//!
//! Before running, `record` checks that the program is instrumented: its ELF `DT_NEEDED`
//! entries (or those of a library it loads) name `libcontend_sharing.so`. A program that is not
//! can only be observed through the hardware's memory-sampling events (PEBS, IBS, SPE); without
//! them `record` refuses and says how to rebuild.

use crate::exit::bad_input;
use observe::launch::{self, Plan};
use observe::sampler::SamplerOptions;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use trace::meta::{Meta, Unavailable};
use trace::RunDir;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Run a program built with `contend cc` and record which threads share which cache lines.
    ///
    /// Example: `contend cc -- gcc -O2 -g app.c -o app && contend c2c record -- ./app`, then
    /// `contend c2c report`.
    Record(RecordArgs),
    /// Show the shared cache lines of a run: perf c2c's line table and per-line distribution.
    ///
    /// Example: `contend c2c report`, `contend c2c report contend.data.1 --json`.
    Report(super::sharing::ReportArgs),
    /// Read the memory samples of a perf.data file (`perf c2c record` or `perf mem record` on
    /// a machine with Intel PEBS or AMD IBS) into a run directory, for `contend c2c report`.
    ///
    /// Example: `perf c2c record -o perf.data -- ./app && contend c2c import perf.data`.
    Import(ImportArgs),
}

/// Which back end `c2c record` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The sharing runtime of a `contend cc` build, else the PMU when the machine has
    /// memory-sampling events.
    Auto,
    /// The sharing runtime (the program must be built with `contend cc`).
    Instrumentation,
    /// The PMU's memory samples through `perf c2c record` (any program; needs PEBS or IBS).
    Pmu,
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The perf.data file.
    #[arg(value_name = "PERF_DATA")]
    file: PathBuf,
    /// The run directory to create (an existing one is kept and the new run numbered).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = trace::DEFAULT_RUN_DIR)]
    output: PathBuf,
    /// The cache-line size, in bytes: 64, or 128 (adjacent-line prefetch).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = parse_line)]
    line: u32,
}

#[derive(clap::Args)]
pub struct RecordArgs {
    /// Where the samples come from: `instrumentation` (a `contend cc` build), `pmu` (the
    /// hardware's memory sampling through `perf c2c record`), or `auto` (the first that fits).
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// The run directory to create (an existing one is kept and the new run numbered).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = trace::DEFAULT_RUN_DIR)]
    output: PathBuf,
    /// The cache-line size to model, in bytes: 64, or 128 to model adjacent-line prefetch
    /// (two lines move together).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = parse_line)]
    line: u32,
    /// Track a line in detail (who touches which bytes, history) once this many transfers
    /// (accesses to the line by a thread other than the one that wrote it last) were counted
    /// on it: 1 to 4294967295 (the runtime's default: 64).
    #[arg(long, value_name = "N", conflicts_with = "exhaustive", value_parser = clap::value_parser!(u32).range(1..))]
    hot_after: Option<u32>,
    /// Track every line in detail from its first access (slower; finds lines with few
    /// transfers too).
    #[arg(long)]
    exhaustive: bool,
    /// How many accesses of each hot line's history to keep, for the fix hint's replay: 0 to
    /// 16777216 (the runtime's default: 65536).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=16_777_216))]
    window: Option<u32>,
    /// Once a hot line's history window is full, model and itemise 1 in N of each thread's
    /// accesses to it, each counting for N (its counts become estimates; the totals of reads
    /// and writes stay exact): 1 to 65536, 1 for every access (slowest; the runtime's
    /// default: 16).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    sample: Option<u32>,
    /// Run the program on these CPUs only (a list such as 0-3,8).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Service-time sampling interval, in ms (as `contend record`); 0 turns it off.
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    interval: f64,
    /// Do not record scheduler states from the sched tracepoints.
    #[arg(long)]
    no_sched_trace: bool,
    /// Read the machine's PMU capabilities under this directory instead of /sys (for tests).
    #[arg(long, value_name = "DIR", hide = true)]
    sysfs: Option<PathBuf>,
    /// The program to run and its arguments (after `--`).
    #[arg(last = true, value_name = "CMD", required = true)]
    command: Vec<String>,
}

fn parse_line(s: &str) -> Result<u32, String> {
    match s {
        "64" => Ok(64),
        "128" => Ok(128),
        _ => Err(format!(
            "`{s}` is not a line size contend models: use 64 or 128"
        )),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Record(a) => record(a),
        Command::Report(a) => super::sharing::report(a),
        Command::Import(a) => import(a),
    }
}

/// What a program file says about its instrumentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instrumentation {
    /// Linked with contend's sharing runtime (itself, or through a library it loads).
    Contend,
    /// Built with `-fsanitize=thread` and ThreadSanitizer's own runtime.
    Tsan,
    /// Neither.
    None,
    /// Not an ELF file contend can read (a script, another format): why.
    Unknown(String),
}

/// The instrumentation of the program file `path`. A dynamically linked program that does not
/// need the runtime itself may load it through a library: the dynamic loader lists what it
/// would load (`LD_TRACE_LOADED_OBJECTS`, as `ldd` does; nothing of the program runs).
pub fn instrumentation(path: &Path) -> Instrumentation {
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => return Instrumentation::Unknown(format!("cannot read it: {e}")),
    };
    if data.starts_with(b"#!") {
        return Instrumentation::Unknown("it is a script".into());
    }
    let Some(facts) = observe::elf::facts(&data) else {
        return Instrumentation::Unknown("it is not a 64-bit ELF file contend can read".into());
    };
    if facts.needed.iter().any(|n| n.contains("contend_sharing")) {
        return Instrumentation::Contend;
    }
    if facts.defines_tsan_init || facts.needed.iter().any(|n| n.starts_with("libtsan")) {
        return Instrumentation::Tsan;
    }
    if facts.dynamic {
        if let Ok(out) = std::process::Command::new(path)
            .env("LD_TRACE_LOADED_OBJECTS", "1")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("contend_sharing") {
                return Instrumentation::Contend;
            }
            if text.lines().any(|l| l.trim_start().starts_with("libtsan")) {
                return Instrumentation::Tsan;
            }
        }
    }
    Instrumentation::None
}

/// The program a command runs, with its instrumentation: the command itself, else (a launcher
/// such as `env`, `taskset`, `numactl`, `time`) the first later argument that is an
/// instrumented program.
fn program_of(command: &[String]) -> (String, Option<PathBuf>, Instrumentation) {
    let first = command[0].clone();
    let Some(path) = super::cc::which(&first) else {
        return (
            first,
            None,
            Instrumentation::Unknown("it was not found".into()),
        );
    };
    let own = instrumentation(&path);
    if own == Instrumentation::Contend {
        return (first, Some(path), own);
    }
    for a in &command[1..] {
        if a.starts_with('-') || !a.contains('/') && super::cc::which(a).is_none() {
            continue;
        }
        if let Some(p) = super::cc::which(a).filter(|p| p.is_file()) {
            if instrumentation(&p) == Instrumentation::Contend {
                return (a.clone(), Some(p), Instrumentation::Contend);
            }
        }
    }
    let base = first.rsplit('/').next().unwrap_or(&first);
    if own == Instrumentation::None && LAUNCHERS.contains(&base) {
        let why = format!(
            "{base} starts another program, which contend did not find among its arguments"
        );
        return (first, Some(path), Instrumentation::Unknown(why));
    }
    (first, Some(path), own)
}

/// Programs that start the program of interest (shells, wrappers, build tools): when the
/// program they start is not found among their arguments, it is run unchecked.
const LAUNCHERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "env", "taskset", "numactl", "nice", "chrt", "time",
    "timeout", "stdbuf", "setarch", "xargs", "make", "ctest", "mpirun", "mpiexec", "srun",
];

/// The memory-sampling events this machine's PMU offers (under `sys`, normally `/sys`).
pub fn memory_sampling(sys: &Path) -> Vec<&'static str> {
    let devices = sys.join("bus/event_source/devices");
    let mut found = Vec::new();
    if devices.join("cpu/events/mem-loads").exists()
        || devices.join("cpu_core/events/mem-loads").exists()
    {
        found.push("PEBS mem-loads");
    }
    if devices.join("ibs_op").exists() {
        found.push("AMD IBS");
    }
    if std::fs::read_dir(&devices).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("arm_spe"))
    }) {
        found.push("Arm SPE");
    }
    found
}

const REBUILD: &str = "rebuild with `CC=\"contend cc --\" make` (or `contend cc -- gcc ...`)";

/// Checks the program before anything is created and picks the back end: an instrumented
/// program runs with its runtime; any other program goes to the PMU when the machine has
/// memory sampling, and is refused with what to do when it has not. Returns the program's name
/// as the command gives it.
fn check_program(args: &RecordArgs) -> anyhow::Result<(String, Backend)> {
    let (name, _, inst) = program_of(&args.command);
    let sys = args.sysfs.clone().unwrap_or_else(|| PathBuf::from("/sys"));
    let events = memory_sampling(&sys);
    if args.backend == Backend::Pmu {
        if events.is_empty() {
            return Err(bad_input(format!(
                "--backend pmu: this machine has no memory-sampling events (PEBS mem-loads, AMD IBS, Arm SPE): {REBUILD} and use the instrumentation back end"
            )));
        }
        if events == ["Arm SPE"] {
            return Err(bad_input(
                "--backend pmu: this machine samples memory with Arm SPE, whose samples perf keeps in an AUX trace that contend does not decode: use the instrumentation back end (`contend cc`)",
            ));
        }
        return Ok((name, Backend::Pmu));
    }
    match inst {
        Instrumentation::Contend => Ok((name, Backend::Instrumentation)),
        Instrumentation::Unknown(why) => {
            eprintln!(
                "contend: note: cannot tell whether {name} was built with `contend cc` ({why}); running it: without the sharing runtime nothing is recorded"
            );
            Ok((name, Backend::Instrumentation))
        }
        Instrumentation::Tsan => Err(bad_input(format!(
            "{name} was built with -fsanitize=thread and ThreadSanitizer's own runtime, not with `contend cc`: {REBUILD}"
        ))),
        Instrumentation::None if args.backend == Backend::Instrumentation => Err(bad_input(format!(
            "--backend instrumentation: {name} was not built with `contend cc`: {REBUILD}"
        ))),
        Instrumentation::None => {
            if events.is_empty() {
                Err(bad_input(format!(
                    "{name} was not built with `contend cc` and this machine has no memory-sampling events (PEBS mem-loads, AMD IBS, Arm SPE): {REBUILD}, or run on a machine with one"
                )))
            } else if events == ["Arm SPE"] {
                Err(bad_input(format!(
                    "{name} was not built with `contend cc`, and this machine's memory sampling (Arm SPE) keeps its samples in an AUX trace that contend does not decode: {REBUILD}"
                )))
            } else {
                eprintln!(
                    "contend: {name} was not built with `contend cc`; using the PMU back end ({}) through `perf c2c record`",
                    events.join(", ")
                );
                Ok((name, Backend::Pmu))
            }
        }
    }
}

/// The perf program: `$CONTEND_PERF`, else `perf` on the PATH.
fn perf_program() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("CONTEND_PERF") {
        return Ok(PathBuf::from(p));
    }
    super::cc::which("perf").ok_or_else(|| {
        bad_input(
            "the PMU back end runs `perf c2c record`, and perf is not installed: install it (Debian: `apt-get install linux-perf`; Fedora: `dnf install perf`) or set CONTEND_PERF",
        )
    })
}

/// Reads `data` (a perf.data file) and writes each sampled process's results into `run` as
/// the instrumentation back end would (`sharing/PID.json`, `maps/sharing-PID.maps`). Returns
/// what was read.
pub fn import_perf_data(
    run: &Path,
    data: &Path,
    line: u32,
    program: &str,
) -> anyhow::Result<observe::perfmem::PerfMem> {
    let shown = data.display();
    let bytes =
        std::fs::read(data).map_err(|e| bad_input(format!("{shown}: cannot read it: {e}")))?;
    let mem = observe::perfmem::read(&bytes).map_err(|e| bad_input(format!("{shown}: {e}")))?;
    if mem.samples.is_empty() {
        return Err(bad_input(format!(
            "{shown} has no load or store samples with a data address ({} sample(s) of other events, {} without an address; events: {}): record it with `perf c2c record` or `perf mem record` on a machine with memory sampling (Intel PEBS, AMD IBS)",
            mem.other_samples,
            mem.without_address,
            mem.events.join(", ")
        )));
    }
    let sdir = run.join("sharing");
    let mdir = run.join("maps");
    std::fs::create_dir_all(&sdir)?;
    std::fs::create_dir_all(&mdir)?;
    for p in observe::perfmem::to_sharing(&mem, line, program) {
        std::fs::write(
            sdir.join(format!("{}.json", p.pid)),
            serde_json::to_vec_pretty(&p)?,
        )?;
        if let Some(maps) = mem.mappings.get(&p.pid) {
            std::fs::write(
                mdir.join(format!("sharing-{}.maps", p.pid)),
                observe::perfmem::maps_text(maps),
            )?;
        }
    }
    Ok(mem)
}

fn pmu_meta(line: u32) -> trace::meta::SharingMeta {
    trace::meta::SharingMeta {
        backend: "pmu".into(),
        line_size: line,
        hot_after: None,
        exhaustive: false,
        window: None,
        processes: Vec::new(),
    }
}

fn import(args: ImportArgs) -> anyhow::Result<()> {
    if !args.file.is_file() {
        return Err(bad_input(format!(
            "{}: no such file (give the perf.data file `perf c2c record -o FILE` wrote)",
            args.file.display()
        )));
    }
    // Read before creating anything: a file that is not usable leaves no empty run behind.
    let probe = std::fs::read(&args.file)
        .map_err(|e| bad_input(format!("{}: cannot read it: {e}", args.file.display())))?;
    observe::perfmem::check_sections(&probe)
        .map_err(|e| bad_input(format!("{}: {e}", args.file.display())))?;
    drop(probe);
    let staging = tempdir_for(&args.output)?;
    let program = args.file.display().to_string();
    let mem = import_perf_data(staging.path(), &args.file, args.line, &program)?;
    let run = RunDir::create(&args.output).map_err(|e| anyhow::anyhow!("{e}"))?;
    for sub in ["sharing", "maps"] {
        let from = staging.path().join(sub);
        if from.is_dir() {
            std::fs::rename(&from, run.path().join(sub))?;
        }
    }
    drop(staging);
    let mut meta = Meta::new(
        mem.cmdline
            .clone()
            .unwrap_or_else(|| vec![format!("perf.data {}", args.file.display())]),
    );
    meta.recorded_by = std::env::args().collect();
    meta.captured.push("sharing".into());
    let mut sharing = pmu_meta(args.line);
    sharing.processes = collect_sharing(run.path());
    meta.sharing = Some(sharing.clone());
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;
    report_losses(&mem);
    eprintln!(
        "contend: imported {} memory samples of {} process(es) from {} into {3}; see contend c2c report {3}",
        mem.samples.len(),
        sharing.processes.len(),
        args.file.display(),
        run.path().display()
    );
    Ok(())
}

/// A scratch directory beside the run directory-to-be (removed when dropped).
fn tempdir_for(output: &Path) -> anyhow::Result<tempfile::TempDir> {
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    tempfile::Builder::new()
        .prefix(".contend-import-")
        .tempdir_in(parent)
        .map_err(|e| {
            bad_input(format!(
                "cannot create the run directory in {}: {e}",
                parent.display()
            ))
        })
}

fn report_losses(mem: &observe::perfmem::PerfMem) {
    if mem.lost > 0 {
        eprintln!(
            "contend: warning: the kernel lost {} sample(s) while perf recorded (raise perf's buffer with -m, or sample less often)",
            mem.lost
        );
    }
    if mem.without_address > 0 {
        eprintln!(
            "contend: note: {} memory sample(s) had no data address and are not in the model",
            mem.without_address
        );
    }
    if mem.malformed > 0 {
        eprintln!(
            "contend: warning: {} record(s) of the perf.data file could not be decoded and were skipped",
            mem.malformed
        );
    }
}

/// The sharing results in `run`'s `sharing/` directory, checked with the format's reader.
pub fn collect_sharing(run: &Path) -> Vec<trace::meta::SharingFile> {
    let mut found: Vec<(u32, String)> = std::fs::read_dir(run.join("sharing"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = name.strip_suffix(".json")?.parse::<u32>().ok()?;
                    Some((pid, name))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
        .into_iter()
        .map(|(pid, name)| {
            let file = format!("sharing/{name}");
            let hist = format!("sharing/{pid}.hist");
            let maps = format!("maps/sharing-{pid}.maps");
            let mut entry = trace::meta::SharingFile {
                file: file.clone(),
                pid,
                parent_pid: None,
                program: String::new(),
                history: run.join(&hist).is_file().then_some(hist),
                maps: run.join(&maps).is_file().then_some(maps),
                accesses: 0,
                transfers: 0,
                hot_lines: 0,
                error: None,
            };
            match std::fs::read(run.join(&file))
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    trace::sharing::ProcessSharing::from_json(&b).map_err(|e| e.to_string())
                }) {
                Ok(s) => {
                    entry.parent_pid = s.parent_pid;
                    entry.program = s.program;
                    entry.accesses = s.totals.reads + s.totals.writes;
                    entry.transfers = s.totals.transfers;
                    entry.hot_lines = s.lines.len() as u64;
                }
                Err(e) => entry.error = Some(e),
            }
            entry
        })
        .collect()
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

fn record(args: RecordArgs) -> anyhow::Result<()> {
    if args.interval != 0.0 && !(0.1..=60_000.0).contains(&args.interval) {
        return Err(bad_input(format!(
            "--interval {}: give 0.1 ms to 60000 ms (0 turns sampling off)",
            args.interval
        )));
    }
    let machine = topology::Topology::live().ok();
    let cpus = match &machine {
        Some(m) => super::record::placement(args.cpus.as_deref(), None, None, None, m)?,
        None if args.cpus.is_some() => {
            return Err(anyhow::anyhow!(
                "cannot read this machine's topology to place the program"
            ))
        }
        None => None,
    };
    let (program, backend) = check_program(&args)?;
    let perf = match backend {
        Backend::Pmu => {
            if args.hot_after.is_some()
                || args.exhaustive
                || args.window.is_some()
                || args.sample.is_some()
            {
                eprintln!("contend: note: --hot-after, --exhaustive, --window and --sample shape the sharing runtime; the PMU back end ignores them");
            }
            Some(perf_program()?)
        }
        _ => None,
    };

    let run = RunDir::create(&args.output).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut meta = Meta::new(args.command.clone());
    meta.recorded_by = std::env::args().collect();
    meta.topology = machine
        .as_ref()
        .map_or(serde_json::Value::Null, super::record::topology_json);
    meta.cpus = cpus.clone();
    let sampling = (args.interval > 0.0).then(|| SamplerOptions {
        interval: Duration::from_secs_f64(args.interval / 1000.0),
        attached: false,
        follow_children: true,
        sched_trace: !args.no_sched_trace,
    });
    if sampling.is_some() {
        meta.captured.push("schedstat".into());
    }
    meta.captured.push("sharing".into());
    let mut sharing = match backend {
        Backend::Pmu => pmu_meta(args.line),
        _ => trace::meta::SharingMeta {
            backend: "instrumentation".into(),
            line_size: args.line,
            hot_after: args.hot_after,
            exhaustive: args.exhaustive,
            window: args.window,
            processes: Vec::new(),
        },
    };
    meta.sharing = Some(sharing.clone());
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;

    let dir = absolute(run.path());
    // The runtime's settings, for the instrumentation back end only: under the PMU back end
    // a `contend cc` build's runtime stays inactive, so that one back end writes the results.
    let mut env = Vec::new();
    if perf.is_none() {
        env.push((
            "CONTEND_SHARING_DIR".to_string(),
            dir.to_string_lossy().into_owned(),
        ));
        env.push(("CONTEND_SHARING_LINE".to_string(), args.line.to_string()));
    }
    if let Some(n) = args.hot_after {
        env.push(("CONTEND_SHARING_HOT_AFTER".into(), n.to_string()));
    }
    if args.exhaustive {
        env.push(("CONTEND_SHARING_EXHAUSTIVE".into(), "1".into()));
    }
    if let Some(n) = args.window {
        env.push(("CONTEND_SHARING_WINDOW".into(), n.to_string()));
    }
    if let Some(n) = args.sample {
        env.push(("CONTEND_SHARING_SAMPLE".into(), n.to_string()));
    }
    // The PMU back end runs the program under `perf c2c record`, into the run directory.
    let perf_data = dir.join("sharing").join("perf.data");
    let command: Vec<String> = match &perf {
        Some(perf) => {
            std::fs::create_dir_all(dir.join("sharing"))?;
            let mut c = vec![
                perf.to_string_lossy().into_owned(),
                "c2c".into(),
                "record".into(),
                "-o".into(),
                perf_data.to_string_lossy().into_owned(),
                "--".into(),
            ];
            c.extend(args.command.iter().cloned());
            c
        }
        None => args.command.clone(),
    };
    eprintln!(
        "contend: recording cache-line sharing of {} into {} ({}-byte lines, {})",
        program,
        run.path().display(),
        args.line,
        if perf.is_some() {
            "memory samples of the PMU through `perf c2c record`".to_string()
        } else if args.exhaustive {
            "every line tracked".to_string()
        } else if let Some(n) = args.hot_after {
            format!("lines tracked in detail after {n} transfers")
        } else {
            "lines tracked in detail once hot".to_string()
        }
    );

    let outcome = launch::run(Plan {
        command: &command,
        run: &run,
        locks: None,
        poll: Duration::from_millis(1),
        sampling: sampling.clone(),
        cpus,
        capture_output: false,
        env,
        // Hardware counters would compete with perf's PEBS/IBS events for the PMU.
        counters: if perf.is_some() {
            Vec::new()
        } else {
            super::record::counters_wanted()
        },
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e @ launch::LaunchError::Spawn { .. }) => {
            let code = match &e {
                launch::LaunchError::Spawn { source, .. }
                    if source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    126
                }
                _ => 127,
            };
            meta.outcome = Some(format!("could not start: {e}"));
            meta.exit_status = Some(code);
            meta.sharing = Some(sharing.clone());
            let _ = run.write_meta(&meta);
            eprintln!(
                "contend: error: {e} (the empty run is kept in {})",
                run.path().display()
            );
            std::process::exit(code);
        }
        Err(other) => return Err(anyhow::Error::new(other)),
    };
    super::record::fill_meta(
        &mut meta,
        &outcome,
        sampling.as_ref().map(|o| o.interval),
        true,
    );
    meta.streams = outcome.streams;
    let perf_failed = perf.is_some() && meta.exit_status.is_some_and(|c| c != 0);
    if perf.is_some() {
        let empty = std::fs::metadata(&perf_data).map_or(true, |m| m.len() == 0);
        if empty {
            let why = format!(
                "`perf c2c record` wrote no samples{} (see its messages above; memory sampling may need root or a lower kernel.perf_event_paranoid)",
                match meta.exit_status {
                    Some(c) if perf_failed => format!(" and exited with {c}"),
                    _ => String::new(),
                }
            );
            eprintln!("contend: warning: {why}");
            meta.unavailable.push(Unavailable {
                what: "sharing".into(),
                why,
            });
        } else {
            match import_perf_data(run.path(), &perf_data, args.line, &program) {
                Ok(mem) => report_losses(&mem),
                Err(e) => {
                    eprintln!("contend: warning: {e}");
                    meta.unavailable.push(Unavailable {
                        what: "sharing".into(),
                        why: e.to_string(),
                    });
                }
            }
        }
    }
    sharing.processes = collect_sharing(run.path());
    for p in sharing.processes.iter().filter(|p| p.error.is_some()) {
        let why = p.error.clone().unwrap_or_default();
        eprintln!("contend: warning: {}: {why}", p.file);
        meta.unavailable.push(Unavailable {
            what: format!("sharing of process {}", p.pid),
            why: format!("{}: {why}", p.file),
        });
    }
    let good = sharing
        .processes
        .iter()
        .filter(|p| p.error.is_none())
        .count();
    if sharing.processes.is_empty() && perf.is_none() {
        meta.unavailable.push(Unavailable {
            what: "sharing".into(),
            why: "the program wrote no sharing results: it was not built with `contend cc`, or it did not exit normally".into(),
        });
    }
    meta.sharing = Some(sharing.clone());
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;
    for note in &outcome.notes {
        eprintln!("contend: note: {note}");
    }
    if let Some(sig) = outcome.status.signal() {
        eprintln!(
            "contend: the program was killed by signal {sig}; what was recorded is kept in {}",
            run.path().display()
        );
    }
    if sharing.processes.is_empty() && perf.is_some() {
        eprintln!(
            "contend: warning: no memory samples were imported into {} (see above)",
            run.path().display()
        );
    } else if sharing.processes.is_empty() {
        eprintln!(
            "contend: warning: no sharing results were written into {}: the program was not built with `contend cc` ({REBUILD}), or it did not exit normally (killed, or ended by _exit)",
            run.path().display()
        );
    } else {
        eprintln!(
            "contend: recorded sharing of {good} process(es) into {0}; see contend c2c report {0}",
            run.path().display()
        );
    }
    match meta.exit_status {
        Some(0) | None => Ok(()),
        Some(code) => std::process::exit(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sampling_events_are_found_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        assert!(memory_sampling(dir.path()).is_empty());
        let d = dir.path().join("bus/event_source/devices");
        std::fs::create_dir_all(d.join("ibs_op")).unwrap();
        std::fs::create_dir_all(d.join("arm_spe_0")).unwrap();
        std::fs::create_dir_all(d.join("cpu/events")).unwrap();
        std::fs::write(
            d.join("cpu/events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n",
        )
        .unwrap();
        assert_eq!(
            memory_sampling(dir.path()),
            ["PEBS mem-loads", "AMD IBS", "Arm SPE"]
        );
    }
}
