//! `contend demo`: the guided tour. Builds the bundled examples with the system's C compiler,
//! runs contend's commands on them as a user would type them, and cleans up.

use anyhow::{bail, Context};
use bundled as examples;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Keep the build directory (its path is printed), with each section's HTML page, instead
    /// of removing it.
    #[arg(long)]
    keep: bool,
}

/// A child process killed when dropped, so no example outlives the demo.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A section's heading; `Err(ReaderGone)` (a quiet exit 0) once nobody reads the tour.
fn section(n: usize, title: &str, why: &str) -> anyhow::Result<()> {
    crate::output::still_read()?;
    crate::output::outln!("\n━━ {n}. {title} ━━");
    crate::output::outln!("{why}\n");
    Ok(())
}

/// Runs this same binary with `args`, echoing the command line the way a user would type it.
fn contend(args: &[&str]) -> anyhow::Result<()> {
    crate::output::still_read()?;
    crate::output::outln!("$ contend {}", args.join(" "));
    let exe = std::env::current_exe().context("finding the contend executable")?;
    let status = Command::new(exe).args(args).status()?;
    if !status.success() {
        bail!("`contend {}` failed with {status}", args.join(" "));
    }
    crate::output::outln!();
    Ok(())
}

/// Starts an example and waits for its `ready` line (it prints one when its state is set up).
fn start_until_ready(exe: &Path, args: &[&str]) -> anyhow::Result<(Running, u32)> {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let stdout = child.stdout.take().context("example stdout")?;
    let running = Running(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let line = rx
        .recv_timeout(deadline - Instant::now())
        .with_context(|| format!("{} did not report ready within 20 s", exe.display()))?;
    if !line.starts_with("ready") {
        bail!("{} did not start: {line:?}", exe.display());
    }
    let pid = running.0.id();
    Ok((running, pid))
}

/// Runs `contend record --locks` on `exe` into `run_dir`, showing the command; returns the
/// program's own `truth` line (its fields), which the demo compares with contend's findings.
fn record_quietly(exe: &Path, run_dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    crate::output::outln!(
        "$ contend record --locks -- ./{}",
        exe.file_name().unwrap_or_default().to_string_lossy()
    );
    let me = std::env::current_exe().context("finding the contend executable")?;
    let out = Command::new(me)
        .args(["record", "--locks", "-o"])
        .arg(run_dir)
        .arg("--")
        .arg(exe)
        .output()?;
    if !out.status.success() {
        bail!(
            "`contend record` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Dropped if stderr is closed, as every line contend writes there.
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), &out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(stdout
        .lines()
        .find(|l| l.starts_with("truth "))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

fn truth_ms(truth: &[(String, String)], key: &str) -> String {
    truth
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.parse::<f64>().ok())
        .map(ms)
        .unwrap_or_else(|| "n/a".into())
}

fn ms(ns: f64) -> String {
    format!("{:.1}", ns / 1e6)
}

/// The page `contend report RUN --html PATH` writes, written here without printing the text
/// report a second time (for runs whose section showed another command's report).
fn write_page(run_dir: &Path, path: &Path) -> anyhow::Result<()> {
    let run = explain::open(run_dir, &explain::Options::default())
        .map_err(|e| anyhow::anyhow!("`contend report` failed: {e}"))?;
    let page = report::html::render(&run.page(report::html::Options::default()));
    // The build directory is the demo's own (mkdtemp, 0700): nothing else can be there.
    std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
    crate::output::outln!("wrote this section's page: {}\n", path.display());
    Ok(())
}

/// Total lock wait and critical-path wait of a run, as `contend report` finds them.
fn lock_waits(run_dir: &Path) -> anyhow::Result<(f64, f64)> {
    let run = explain::open(run_dir, &explain::Options::default())
        .map_err(|e| anyhow::anyhow!("`contend report` failed: {e}"))?;
    Ok(run.locks.as_ref().map_or((0.0, 0.0), |l| {
        (
            l.report.summary.wait_ns as f64,
            l.report.critical.wait_ns as f64,
        )
    }))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("contend-demo-")
        .tempdir()
        .context("creating a build directory")?;
    crate::output::outln!("contend demo: a tour of what contend finds on this machine.");
    crate::output::outln!(
        "Examples are built with `{}` in {}.",
        examples::compiler(),
        dir.path().display()
    );

    // One page per section with a run (`contend report RUN --html`), in the build directory.
    let pages_dir = dir.path().join("pages");
    std::fs::create_dir(&pages_dir).context("creating the pages directory")?;
    let page = |name: &str| pages_dir.join(name).to_string_lossy().into_owned();
    let mut pages: Vec<String> = Vec::new();

    section(
        1,
        "Topology",
        "Where could contention come from? Packages, NUMA nodes, cores, shared caches and the\n\
         distances between nodes, read from /sys (the same facts lstopo and numactl show).",
    )?;
    contend(&["topo"])?;
    crate::output::outln!(
        "NUMA logic is tested on machines that are values. An imaginary 2-socket machine with\n\
         2 NUMA nodes per socket, and the order in which `spread` hands its CPUs to threads:"
    );
    contend(&["topo", "--synthetic", "2x2x2:n2"])?;
    contend(&["topo", "--synthetic", "2x2x2:n2", "--order", "spread"])?;

    section(
        2,
        "Where a process runs and where its memory lives",
        &format!(
            "The first NUMA triage (ps -T -o psr, numastat -p) in one command, on `{}`:\n{}.",
            examples::THREADS_MEMORY.name,
            examples::THREADS_MEMORY.about
        ),
    )?;
    let exe = examples::build(&examples::THREADS_MEMORY, dir.path())?;
    let (child, pid) = start_until_ready(&exe, &["30"])?;
    contend(&["where", &pid.to_string()])?;
    drop(child);

    section(
        3,
        "Lock contention in an unmodified program",
        &format!(
            "`contend record --locks` preloads the probe; `contend report` explains the run. On\n\
             `{}`: {}.\nThe program measures its own waits and holds, to compare with what contend found.",
            examples::PLANTED_HOLD.name,
            examples::PLANTED_HOLD.about
        ),
    )?;
    let planted = examples::build(&examples::PLANTED_HOLD, dir.path())?;
    let run_dir = dir.path().join("planted.data");
    let truth = record_quietly(&planted, &run_dir)?;
    let run_dir_s = run_dir.to_string_lossy().into_owned();
    let locks_page = page("3-locks.html");
    contend(&["report", &run_dir_s, "--top", "2", "--html", &locks_page])?;
    pages.push(locks_page);
    crate::output::outln!(
        "The program's own measurement: hot_lock held {} ms and waited for {} ms in total.",
        truth_ms(&truth, "hot_lock.hold_ns_total"),
        truth_ms(&truth, "hot_lock.wait_ns_total")
    );

    section(
        4,
        "Locks that call no pthread function: a Rust std::sync::Mutex",
        &format!(
            "Rust's, C++ libraries' and runtimes' own locks wait on a futex directly. With --locks,\n\
             contend also records every futex wait of the program, with its user stack (unwound\n\
             from the binary's .eh_frame, no frame pointers needed). On `{}`: {}.",
            examples::STD_MUTEX.name,
            examples::STD_MUTEX.about
        ),
    )?;
    match examples::build(&examples::STD_MUTEX, dir.path()) {
        Err(e) => crate::output::outln!("This section is skipped: {e:#}."),
        Ok(exe) => {
            let run_dir = dir.path().join("std_mutex.data");
            let truth = record_quietly(&exe, &run_dir)?;
            let run_dir_s = run_dir.to_string_lossy().into_owned();
            let waits_page = page("4-waits.html");
            contend(&["report", &run_dir_s, "--top", "2", "--html", &waits_page])?;
            pages.push(waits_page);
            // The program times each `lock()` call: the wall time inside it, and the part of
            // it the thread spent off its CPU (what a futex wait is).
            let total = |field: &str| -> f64 {
                truth
                    .iter()
                    .filter(|(k, _)| k.starts_with('t') && k.ends_with(field))
                    .filter_map(|(_, v)| v.parse::<f64>().ok())
                    .sum()
            };
            crate::output::outln!(
                "The program's own measurement: its threads spent {} ms inside lock(), {} ms of it off their CPUs.",
                ms(total(".lock_ns")),
                ms(total(".offcpu_ns"))
            );
        }
    }

    section(
        5,
        "One lock or two? The thesis's Sharequeue",
        &format!(
            "{}; then {}.",
            examples::SHAREQUEUE_SINGLE.about,
            examples::SHAREQUEUE_TWO.about
        ),
    )?;
    let mut waits = Vec::new();
    for ex in [&examples::SHAREQUEUE_SINGLE, &examples::SHAREQUEUE_TWO] {
        let exe = examples::build(ex, dir.path())?;
        let run_dir = dir.path().join(format!("{}.data", ex.name));
        record_quietly(&exe, &run_dir)?;
        let (wait, critical) = lock_waits(&run_dir)?;
        crate::output::outln!(
            "  contend report: {} ms waiting to acquire, {} ms of it on the critical path",
            ms(wait),
            ms(critical)
        );
        waits.push(wait);
    }
    if waits[1] > 0.0 {
        crate::output::outln!(
            "\nWith two locks the threads waited {:.1}x less for their locks ({} ms against {} ms):\nthe head and the tail no longer exclude each other.",
            waits[0] / waits[1],
            ms(waits[1]),
            ms(waits[0])
        );
    }

    section(
        6,
        "Who is active, and for how long",
        &format!(
            "`contend record` samples every thread's service time, run-queue wait and context\n\
             switches (schedstat, every 10 ms) and counts the program's work. On `{}`: {}.",
            examples::INDEPENDENT.name,
            examples::INDEPENDENT.about
        ),
    )?;
    let independent = examples::build(&examples::INDEPENDENT, dir.path())?;
    let serialised = examples::build(&examples::SERIALISED, dir.path())?;
    let run_dir = dir.path().join("independent.data");
    let run_dir_s = run_dir.to_string_lossy().into_owned();
    let independent_s = independent.to_string_lossy().into_owned();
    let serialised_s = serialised.to_string_lossy().into_owned();
    let timeline = dir.path().join("independent-threads.svg");
    contend(&["record", "-o", &run_dir_s, "--", &independent_s, "-t", "2"])?;
    let activity_page = page("5-activity.html");
    contend(&[
        "report",
        &run_dir_s,
        "--timeline",
        &timeline.to_string_lossy(),
        "--html",
        &activity_page,
    ])?;
    pages.push(activity_page);

    section(
        7,
        "Where did the speed-up go? (Tudor & Teo)",
        &format!(
            "`contend scale` runs a program on one core, on as many cores as threads and as one\n\
             thread, in interleaved rounds, and splits the speed-up it lost into memory/hardware\n\
             contention (its work grew), waiting for a CPU and being blocked (its threads were\n\
             idle), each share with a 95 % interval. First `{}`; then `{}`: {},\n\
             with --locks so that contend can say how much of the idleness the lock explains.",
            examples::INDEPENDENT.name,
            examples::SERIALISED.name,
            examples::SERIALISED.about
        ),
    )?;
    let scale_a = dir.path().join("independent.scale");
    let scale_b = dir.path().join("serialised.scale");
    let (scale_a_s, scale_b_s) = (
        scale_a.to_string_lossy().into_owned(),
        scale_b.to_string_lossy().into_owned(),
    );
    contend(&[
        "scale",
        "--threads",
        "2",
        "--repeat",
        "3",
        "-o",
        &scale_a_s,
        "--",
        &independent_s,
        "-t",
        "{threads}",
    ])?;
    contend(&[
        "scale",
        "--threads",
        "2",
        "--repeat",
        "3",
        "--locks",
        "-o",
        &scale_b_s,
        "--",
        &serialised_s,
        "-t",
        "{threads}",
    ])?;

    section(
        8,
        "Comparing runs",
        "`contend diff` puts runs or reports side by side, metric by metric, with the change\n\
         against the first; `--fail-if` turns it into a CI gate.",
    )?;
    contend(&[
        "diff",
        &scale_a_s,
        &scale_b_s,
        "--metric",
        "*models*active_threads",
        "--metric",
        "*models*loss_threads",
        "--metric",
        "*models*speedup",
    ])?;

    section(
        9,
        "MPI wait states",
        "`contend record --mpi` builds a PMPI wrapper with the program's own mpicc and has the\n\
         launcher preload it into every rank; `contend report` finds Scalasca's wait states\n\
         (late sender, late receiver, waits at barriers and collectives), who suffered them and\n\
         who caused them, and where in the code.",
    )?;
    match examples::mpi_toolchain() {
        None => crate::output::outln!(
            "No MPI is installed, so this section is skipped. Install one to see it:\n  \
             apt-get install openmpi-bin libopenmpi-dev   (Open MPI), or\n  \
             apt-get install mpich libmpich-dev           (MPICH)"
        ),
        Some((mpicc, mpirun)) => {
            crate::output::outln!(
                "On `{}`: {}; then on `{}`: {}.\nBuilt with {mpicc}; the examples print what they planted (`truth:`).\n",
                examples::MPI_LATE_SENDER.name,
                examples::MPI_LATE_SENDER.about,
                examples::MPI_NXN.name,
                examples::MPI_NXN.about
            );
            let late = examples::build_mpi(&examples::MPI_LATE_SENDER, mpicc, dir.path())?;
            let nxn = examples::build_mpi(&examples::MPI_NXN, mpicc, dir.path())?;
            let late_run = dir.path().join("late_sender.data");
            let late_run_s = late_run.to_string_lossy().into_owned();
            let mut launcher = vec![mpirun];
            if mpirun.contains("openmpi") {
                launcher.push("--oversubscribe");
            }
            let mut record = vec![
                "record",
                "--mpi",
                "--interval",
                "0",
                "-o",
                &late_run_s,
                "--",
            ];
            record.extend(&launcher);
            let late_s = late.to_string_lossy().into_owned();
            record.extend(["-np", "2", &late_s, "100", "3"]);
            contend(&record)?;
            let mpi_page = page("8-mpi.html");
            contend(&["report", &late_run_s, "--html", &mpi_page])?;
            pages.push(mpi_page);
            let nxn_s = nxn.to_string_lossy().into_owned();
            let mut runs = Vec::new();
            for (name, delay) in [("nxn.data", "100"), ("nxn-balanced.data", "10")] {
                let run = dir.path().join(name).to_string_lossy().into_owned();
                let mut record = vec!["record", "--mpi", "--interval", "0", "-o", &run, "--"];
                record.extend(&launcher);
                record.extend(["-np", "3", &nxn_s, delay, "3"]);
                contend(&record)?;
                runs.push(run);
            }
            crate::output::outln!(
                "The same job before and after rank 2's imbalance was cut from 100 ms to 10 ms per\n\
                 round, compared as the thesis's tables 4.16–4.18 compare two rank placements:"
            );
            contend(&[
                "diff",
                &runs[0],
                &runs[1],
                "--metric",
                "mpi.summary*.count",
                "--metric",
                "mpi.summary*.total_ns",
                "--metric",
                "mpi.summary*.delay_total_ns",
                "--metric",
                "mpi.summary*.late_total_ns",
            ])?;
        }
    }

    section(
        10,
        "Cache-line sharing",
        "`contend cc` builds a program with the compiler's ThreadSanitizer instrumentation and\n\
         links contend's sharing runtime instead of libtsan; `contend c2c record` runs it and\n\
         `contend c2c report` shows perf c2c's tables (lines by cross-thread transfers, then who\n\
         touched which bytes from where), tells false from true sharing, and predicts what\n\
         separating the fields would save by replaying the line's history. No PMU needed.",
    )?;
    crate::output::outln!(
        "On `{}`: {}.\nThen on `{}`: {}.\n",
        examples::SHARING_READER_WRITER.name,
        examples::SHARING_READER_WRITER.about,
        examples::SHARING_ATOMIC_COUNTER.name,
        examples::SHARING_ATOMIC_COUNTER.about
    );
    crate::output::outln!(
        "$ contend cc -- {} -O2 -g reader_writer.c -o reader_writer",
        examples::compiler()
    );
    let rw = examples::build_instrumented(&examples::SHARING_READER_WRITER, dir.path())?;
    let counter = examples::build_instrumented(&examples::SHARING_ATOMIC_COUNTER, dir.path())?;
    let rw_s = rw.to_string_lossy().into_owned();
    let counter_s = counter.to_string_lossy().into_owned();
    let mut sharing_runs = Vec::new();
    for (name, extra) in [("rw.data", None), ("rw-padded.data", Some("padded"))] {
        let run = dir.path().join(name).to_string_lossy().into_owned();
        // Sized by CPU time, with the sampler on: the report then knows how long the threads
        // ran together, and says "unknown" rather than "none" when a busy machine kept them apart.
        let mut cmd = vec!["c2c", "record", "-o", &run, "--", &rw_s, "-c", "100"];
        cmd.extend(extra);
        contend(&cmd)?;
        sharing_runs.push(run);
    }
    contend(&["c2c", "report", "--top", "1", &sharing_runs[0]])?;
    let sharing_page = page("9-sharing.html");
    write_page(Path::new(&sharing_runs[0]), Path::new(&sharing_page))?;
    pages.push(sharing_page);
    crate::output::outln!("The padded twin, the same work with `writer` on its own line:");
    contend(&["c2c", "report", &sharing_runs[1]])?;
    let counter_run = dir
        .path()
        .join("counter.data")
        .to_string_lossy()
        .into_owned();
    contend(&[
        "c2c",
        "record",
        "-o",
        &counter_run,
        "--",
        &counter_s,
        "-c",
        "100",
    ])?;
    contend(&["c2c", "report", "--top", "1", &counter_run])?;

    section(
        11,
        "Contention made on purpose: atomics and cache-line transfers",
        "`contend bench atomic` burns CPUs with one instruction on one shared cache line (ccont's\n\
         method) and prints what each operation costs as CPUs join: a locked xadd pays for the\n\
         line's trips between cores, a plain load of a line nobody writes does not.\n\
         `contend bench latency` times the trip itself, between every pair of CPUs.",
    )?;
    // Two CPUs for the atomics (1 then 2), at most four for the matrix: a few hundred ms.
    let cpus: Vec<String> = bench::placement::affinity()?
        .iter()
        .map(|c| c.to_string())
        .collect();
    let atomic_cpus = cpus[..cpus.len().min(2)].join(",");
    contend(&[
        "bench",
        "atomic",
        "--op",
        "xadd,load",
        "--load",
        "cpu-increase",
        "--cpus",
        &atomic_cpus,
        "--iterations",
        "200000",
    ])?;
    if cpus.len() >= 2 {
        let latency_cpus = cpus[..cpus.len().min(4)].join(",");
        contend(&[
            "bench",
            "latency",
            "--cpus",
            &latency_cpus,
            "--samples",
            "50",
        ])?;
    } else {
        crate::output::outln!(
            "One CPU only: no pair of CPUs to pass a line between, so no latency matrix.\n"
        );
    }

    section(
        12,
        "Context switches in a ring (lmbench lat_ctx)",
        "`contend bench ctx` passes a token around a ring of processes connected by pipes; each\n\
         sums a private array before passing it on. The same work without switching (one\n\
         process, hot caches) is the overhead, subtracted: what is left is the switch, first with\n\
         the whole ring on one CPU, then with consecutive members on different CPUs (a wake-up\n\
         on the other CPU each hop).",
    )?;
    let allowed = bench::ctx::allowed_cpus();
    let one = allowed.first().copied().unwrap_or(0).to_string();
    contend(&[
        "bench", "ctx", "--cpus", &one, "-N", "5", "--rep-ms", "20", "-s", "0,16", "2", "4",
    ])?;
    if let [a, b, ..] = allowed[..] {
        let two = format!("{a},{b}");
        contend(&[
            "bench", "ctx", "--cpus", &two, "-N", "5", "--rep-ms", "20", "--format", "lmbench",
            "2", "4",
        ])?;
    }

    section(
        13,
        "Memory bandwidth and the memory contention generator",
        "`contend bench mem stream` is STREAM: four kernels over arrays four times the last-level\n\
         caches, best rate in GB/s and the results validated; `--nt` uses non-temporal stores.\n\
         `contend bench mem generate` is the thesis's generator: it streams to memory beside a\n\
         program at a chosen rate, to see what memory contention does to it.",
    )?;
    contend(&["bench", "mem", "stream", "--ntimes", "3"])?;
    contend(&[
        "bench",
        "mem",
        "generate",
        "--cpus",
        &one,
        "--rate",
        "1",
        "--duration",
        "1",
    ])?;

    section(
        14,
        "NUMA placement (AUTONUMA benchmarks)",
        "`contend bench numa` runs numa01 (two processes sharing a buffer), numa02 (a thread per\n\
         CPU on its own memory) and their variants with threads and memory bound together, bound\n\
         apart, interleaved, or left to the kernel. On a one-node machine the policies coincide.",
    )?;
    contend(&[
        "bench",
        "numa",
        "numa01,numa02",
        "--size",
        "32M",
        "--loops",
        "2",
        "--repeat",
        "1",
    ])?;

    if args.keep {
        let kept = dir.keep();
        crate::output::outln!("build directory kept: {}", kept.display());
        crate::output::outln!("the sections' pages, to open in a browser:");
        for p in &pages {
            crate::output::outln!("  {p}");
        }
    } else {
        crate::output::outln!(
            "The sections' {} pages were written in {} and go with the build directory: `contend demo --keep` keeps them.",
            pages.len(),
            pages_dir.display()
        );
    }
    crate::output::outln!("Demo finished.");
    Ok(())
}
