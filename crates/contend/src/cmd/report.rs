//! `contend report [RUN]`: validates a run directory and explains it. For now the run summary
//! (what was recorded, per stream); the lock, activity, MPI and sharing sections are added by
//! the analyses that produce them.

use crate::exit::bad_input;
use report::run_summary::{RunSummary, StreamSummary};
use std::path::PathBuf;
use trace::{RunDir, StreamFile};

#[derive(clap::Args)]
pub struct Args {
    /// The run directory to read.
    #[arg(value_name = "RUN", default_value = trace::DEFAULT_RUN_DIR)]
    run: PathBuf,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write the activity timeline (running and waiting threads over time) as SVG.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Threads shown in the activity section (busiest first).
    #[arg(long, value_name = "N", default_value_t = 20)]
    top_threads: usize,
    #[command(flatten)]
    locks: LockArgs,
    #[command(flatten)]
    mpi: MpiArgs,
    #[command(flatten)]
    sharing: SharingArgs,
}

/// The sharing section (a program built with `contend cc`; also `contend c2c report`).
#[derive(clap::Args)]
struct SharingArgs {
    /// Cache lines shown in detail in the sharing section (most transferred first).
    #[arg(long, value_name = "N", default_value_t = 5)]
    sharing_top: usize,
    /// What one cross-thread cache-line transfer costs, for the estimated-cost column (ns).
    #[arg(long, value_name = "NS", default_value_t = super::sharing::DEFAULT_TRANSFER_NS,
          value_parser = super::sharing::parse_transfer_ns)]
    transfer_ns: f64,
    /// Write an SVG heat strip of each top shared line into this directory.
    #[arg(long, value_name = "DIR")]
    sharing_svg: Option<PathBuf>,
}

/// The MPI section's thresholds (the thesis's MPITool.conf) and other hosts' traces.
#[derive(clap::Args)]
struct MpiArgs {
    /// Keep point-to-point wait states (Late Sender, Late Receiver) of at least this long,
    /// e.g. 5ms.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0")]
    mpi_p2p_threshold: u64,
    /// Keep collective wait states of at least this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0")]
    mpi_collective_threshold: u64,
    /// Treat a standard-mode MPI_Send lasting at least this long as synchronous (rendezvous)
    /// and look for a Late Receiver there too (MPI_Ssend always is).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    mpi_rendezvous: Option<u64>,
    /// Also read the rank traces in this run directory (another host's, when the run
    /// directory was not on a shared file system); repeatable.
    #[arg(long, value_name = "DIR")]
    mpi_from: Vec<PathBuf>,
    /// Which MPI job to show when the recorded command ran several (`mpirun` twice): 1 is the
    /// first; the report names the jobs there are.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    mpi_job: Option<u32>,
}

/// Selecting and ordering what the locks section shows.
#[derive(clap::Args)]
struct LockArgs {
    /// Locks shown, after sorting.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
    /// Sort locks by: wait, hold, acquisitions, contended or critical (wait on the critical path).
    #[arg(long, value_name = "KEY", default_value = "wait")]
    sort: report::locks::SortKey,
    /// Keep mutex events (request to release) at least this long, e.g. 10us, 1.5ms, 2s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    min_duration: Option<u64>,
    /// Keep mutex events at most this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    max_duration: Option<u64>,
    /// Keep only this lock (its address, e.g. 0x55d0c0a4b040); repeatable.
    #[arg(long = "lock", value_name = "ADDR", value_parser = parse_address)]
    locks: Vec<u64>,
    /// Keep only acquisitions from this call site (its address); repeatable.
    #[arg(long = "site", value_name = "ADDR", value_parser = parse_address)]
    sites: Vec<u64>,
    /// Keep only this thread (its tid); repeatable.
    #[arg(long = "thread", value_name = "TID")]
    threads: Vec<u32>,
    /// Write a Perfetto trace (open it in ui.perfetto.dev): each thread's CPU share and
    /// run-queue wait over time, its scheduler states when recorded, and its lock waits and
    /// holds with wake-up flows.
    #[arg(long, value_name = "FILE")]
    perfetto: Option<PathBuf>,
    /// Write a lock-contention profile for `go tool pprof` (contentions/count, delay/nanoseconds).
    #[arg(long, value_name = "FILE")]
    pprof: Option<PathBuf>,
    /// Write folded stacks of lock wait time (ns) for flame graphs (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// Write wait-time histograms (SVG, log-binned) of the shown locks into this directory.
    #[arg(long, value_name = "DIR")]
    histograms: Option<PathBuf>,
}

/// `10us`, `1.5ms`, `2s`, `250ns` or a plain number of nanoseconds.
fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ]
    .iter()
    .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n, *scale)))
    .unwrap_or((t, 1.0));
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok((v * scale).round() as u64),
        _ => Err(format!(
            "`{text}` is not a duration (examples: 250ns, 10us, 1.5ms, 2s)"
        )),
    }
}

fn parse_address(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not an address (hex like 0x55d0c0a4b040, or decimal)"))
}

/// A run directory read, validated and analysed: what `report` renders and `diff` compares.
struct Loaded {
    meta: trace::Meta,
    summary: RunSummary,
    activity: Option<Activity>,
    locks: Option<(analysis::locks::LockReport, report::locks::Naming)>,
    mpi: Option<(analysis::mpi::MpiRun, report::mpi::SiteNames)>,
    sharing: Option<super::sharing::Loaded>,
}

/// The report of a run directory as `contend report RUN --json` prints it (default options):
/// what `contend diff` compares.
pub fn json_of_run(run: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    #[derive(clap::Parser)]
    struct Defaults {
        #[command(flatten)]
        args: Args,
    }
    let defaults = <Defaults as clap::Parser>::try_parse_from([
        std::ffi::OsStr::new("report"),
        run.as_os_str(),
    ])?;
    to_json(&load(&defaults.args)?)
}

fn load(args: &Args) -> anyhow::Result<Loaded> {
    let (dir, meta) = RunDir::open(&args.run).map_err(|e| bad_input(e.to_string()))?;
    let run_name = args.run.display().to_string();

    // The streams meta.json lists, then any stream file it does not (a recorder that died
    // before rewriting meta.json): every stream in the directory is read and validated.
    let mut files: Vec<String> = Vec::new();
    for s in &meta.streams {
        if files.contains(&s.file) {
            eprintln!(
                "contend: note: meta.json lists {} twice; reading it once",
                s.file
            );
        } else {
            files.push(s.file.clone());
        }
    }
    for f in dir.stream_files().map_err(|e| bad_input(e.to_string()))? {
        if !files.contains(&f) {
            eprintln!("contend: note: {run_name}/{f} is not listed in meta.json; reading it too");
            files.push(f);
        }
    }

    let mut streams = Vec::with_capacity(files.len());
    let mut mapped_streams = Vec::with_capacity(files.len());
    for file in &files {
        let path = dir.path().join(file);
        let shown = format!("{run_name}/{file}");
        if super::mpi_runs::is_rank_stream(file) && !path.exists() {
            eprintln!("contend: note: {shown} is listed in meta.json but not there (moved, or written on another host): give the directory that holds it with --mpi-from");
            continue;
        }
        // Only regular files: opening a FIFO or device planted in a run directory would block.
        match std::fs::metadata(&path) {
            Ok(m) if !m.is_file() => {
                return Err(bad_input(format!("{shown}: not a regular file")));
            }
            _ => {}
        }
        let mapped = StreamFile::open(&path)
            .map_err(|e| bad_input(format!("{shown}: cannot read the stream: {e}")))?;
        let stream = mapped.parse().map_err(|e| {
            bad_input(format!(
                "{shown}: {e} (the stream is damaged; re-record the run)"
            ))
        })?;
        if !stream.is_complete() {
            eprintln!(
                "contend: note: {shown} was not closed by its writer (killed, or still running): {} events read up to its last complete chunk",
                stream.events
            );
        }
        streams.push(StreamSummary::new(file, &stream));
        drop(stream);
        mapped_streams.push((file.clone(), mapped));
    }
    let summary = RunSummary::new(&run_name, &meta, streams);
    if summary.events_dropped > 0 {
        eprintln!(
            "contend: note: {} events were dropped while recording (buffers full or disk too slow); results undercount them",
            summary.events_dropped
        );
    }
    let locks = if meta.captured.iter().any(|c| c == "locks") {
        Some(lock_report(
            dir.path(),
            &meta,
            &mapped_streams,
            &args.locks,
        )?)
    } else {
        None
    };
    let activity = if meta.captured.iter().any(|c| c == "schedstat") {
        Some(activity(&meta, &mapped_streams)?)
    } else {
        None
    };
    let mut mpi_dirs = vec![args.run.clone()];
    mpi_dirs.extend(args.mpi.mpi_from.iter().cloned());
    let mpi = super::mpi_runs::load(&mpi_dirs, args.mpi.mpi_job)?.map(|(ranks, names)| {
        let thresholds = analysis::waitstates::Thresholds {
            p2p_min_ns: args.mpi.mpi_p2p_threshold,
            collective_min_ns: args.mpi.mpi_collective_threshold,
            rendezvous_send_ns: args.mpi.mpi_rendezvous,
        };
        (analysis::mpi::analyse(&ranks, thresholds), names)
    });
    if mpi.is_none() && meta.captured.iter().any(|c| c == "mpi") {
        let refused = std::fs::read_dir(&args.run)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("mpi-refused-"))
                    .count()
            })
            .unwrap_or(0);
        if refused > 0 {
            eprintln!("contend: note: this run was recorded with --mpi but holds no rank traces: {refused} rank(s) refused the MPI wrapper, built for another MPI than the one they loaded (`unavailable` above says which)");
        } else {
            eprintln!("contend: note: this run was recorded with --mpi but holds no rank traces: the ranks did not call MPI_Init with the wrapper loaded (see the notes printed by contend record)");
        }
    }
    let sharing = super::sharing::load(&args.run, args.sharing.transfer_ns)?;
    if sharing.is_none() && meta.captured.iter().any(|c| c == "sharing") {
        eprintln!("contend: note: this run was recorded for sharing but holds no results (sharing/*.json): the program was not built with `contend cc`, or did not exit normally");
    }
    Ok(Loaded {
        meta,
        summary,
        activity,
        locks,
        mpi,
        sharing,
    })
}

/// Streams written by the sampler (`observe::sampler`), not the lock probe.
pub(super) fn is_sampler_stream(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.starts_with("sched-") || name == "system.cst"
}

/// The sampler's streams, decoded, and their view.
struct Activity {
    view: report::activity::ActivityView,
    threads: Vec<analysis::service::ThreadSamples>,
    states: Vec<(u32, Vec<trace::sched::StateChange>)>,
    /// When the recording started (CLOCK_MONOTONIC ns), if meta.json says.
    start: Option<u64>,
}

/// The service-time view of the sampler's streams.
fn activity(meta: &trace::Meta, streams: &[(String, StreamFile)]) -> anyhow::Result<Activity> {
    let (threads, states) = sampler_threads(meta, streams)?;
    let start = meta.monotonic_span.map_or(0, |[a, _]| a);
    let service = analysis::service::service(&threads, start);
    Ok(Activity {
        view: report::activity::ActivityView::new(service, meta),
        threads,
        states,
        start: meta.monotonic_span.map(|[a, _]| a),
    })
}

/// The sampler's streams among `streams`, decoded: each thread's samples, and the state
/// changes of those the sched tracepoints followed (also for the sharing section's
/// concurrency, `cmd::sharing`).
pub(super) type SamplerThreads = (
    Vec<analysis::service::ThreadSamples>,
    Vec<(u32, Vec<trace::sched::StateChange>)>,
);

pub(super) fn sampler_threads(
    meta: &trace::Meta,
    streams: &[(String, StreamFile)],
) -> anyhow::Result<SamplerThreads> {
    let mut threads = Vec::new();
    let mut states = Vec::new();
    for (file, mapped) in streams.iter().filter(|(f, _)| is_sampler_stream(f)) {
        let stream = mapped
            .parse()
            .map_err(|e| bad_input(format!("{file}: {e}")))?;
        let name = meta
            .streams
            .iter()
            .find(|s| &s.file == file)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        if let Some(t) = analysis::service::thread_samples(&stream, &name) {
            threads.push(t);
        }
        let changes: Vec<trace::sched::StateChange> = stream
            .events()
            .filter_map(|r| trace::sched::StateChange::decode(&r))
            .collect();
        if !changes.is_empty() {
            states.push((stream.header.tid, changes));
        }
    }
    Ok((threads, states))
}

fn to_json(loaded: &Loaded) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(&loaded.summary)?;
    if let Some(a) = &loaded.activity {
        v["activity"] = serde_json::to_value(&a.view)?;
    }
    if let Some((r, naming)) = &loaded.locks {
        v["locks"] = serde_json::to_value(r)?;
        // Names next to the addresses: the global, or the heap block and its allocation.
        if let Some(list) = v["locks"]["locks"].as_array_mut() {
            for (entry, l) in list.iter_mut().zip(&r.locks) {
                if let Some(name) = naming.locks.get(&l.lock) {
                    entry["lock"]["name"] = name.clone().into();
                }
                if let Some(a) = naming.allocations.get(&l.lock) {
                    entry["lock"]["allocation"] = serde_json::to_value(a)?;
                }
            }
        }
    }
    if let Some((run, names)) = &loaded.mpi {
        let mut m = serde_json::to_value(run)?;
        m["site_names"] = serde_json::to_value(names)?;
        // A name for each call site row (`MPI_Recv at main (app.c:42)`), which `contend diff`
        // matches rows by: site ids are only indices into this run's names.
        let site_name = |v: &serde_json::Value| {
            v.as_u64()
                .and_then(|i| names.get(i as usize))
                .cloned()
                .unwrap_or_else(|| "(unknown site)".into())
        };
        if let Some(calls) = m["calls"].as_array_mut() {
            for c in calls {
                c["name"] = format!(
                    "{} at {}",
                    c["function"].as_str().unwrap_or("?"),
                    site_name(&c["site"])
                )
                .into();
            }
        }
        if let Some(sites) = m["waits"]["sites"].as_array_mut() {
            for w in sites {
                w["name"] = format!(
                    "{} at {}",
                    w["pattern"].as_str().unwrap_or("?"),
                    site_name(&w["site"])
                )
                .into();
            }
        }
        v["mpi"] = m;
    }
    if let Some(s) = &loaded.sharing {
        v["sharing"] = s.to_json()?;
    }
    Ok(v)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // A `contend scale` directory: its runs are run directories; itself, the model.
    if !args.run.join(trace::rundir::META_FILE).exists() && args.run.join("scale.json").is_file() {
        return super::scale::show_saved(&args.run, args.json);
    }
    let loaded = load(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&loaded)?)?);
    } else {
        print!("{}", report::run_summary::render(&loaded.summary));
        if let Some(a) = &loaded.activity {
            println!();
            print!("{}", report::activity::render(&a.view, args.top_threads));
            if let Some((r, _)) = &loaded.locks {
                print!("{}", report::activity::blocked_explained(&a.view, r));
            }
        }
        if let Some((r, naming)) = &loaded.locks {
            println!();
            let opts = report::locks::RenderOptions {
                top: args.locks.top,
                sites_per_lock: 5,
            };
            print!("{}", report::locks::render(r, naming, &opts));
        }
        if let Some((run, names)) = &loaded.mpi {
            println!();
            print!("{}", report::mpi::render(run, names));
        }
        if let Some(s) = &loaded.sharing {
            println!();
            print!(
                "{}",
                report::sharing::render(
                    &s.report,
                    &s.processes,
                    &s.naming,
                    args.sharing.sharing_top,
                    args.sharing.transfer_ns
                )
            );
        }
    }
    if let Some(dir) = &args.sharing.sharing_svg {
        match &loaded.sharing {
            Some(s) => super::sharing::write_strips(s, dir, args.sharing.sharing_top)?,
            None => eprintln!("contend: note: --sharing-svg: this run has no sharing results"),
        }
    }
    if let (Some(path), Some(a)) = (&args.timeline, &loaded.activity) {
        let title = format!(
            "Threads of {} over time",
            loaded
                .meta
                .command
                .first()
                .map(String::as_str)
                .unwrap_or("the program")
        );
        std::fs::write(path, report::activity::timeline_svg(&a.view, &title))
            .map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
        eprintln!("contend: wrote {}", path.display());
    } else if args.timeline.is_some() {
        eprintln!("contend: note: --timeline: this run has no service-time samples (record it without --interval 0)");
    }
    if let Some(path) = &args.locks.perfetto {
        let name = loaded
            .meta
            .command
            .first()
            .map(String::as_str)
            .unwrap_or("program");
        let locks = loaded
            .locks
            .as_ref()
            .map(|(r, naming)| report::lock_exports::timeline(r, naming, name));
        let activity = loaded.activity.as_ref().map(|a| {
            report::activity_exports::timeline_since(&a.threads, &a.states, name, a.start)
        });
        let mpi = loaded
            .mpi
            .as_ref()
            .map(|(run, names)| report::mpi::timeline(run, names));
        let timeline = [locks, activity, mpi]
            .into_iter()
            .flatten()
            .reduce(report::activity_exports::merge)
            .ok_or_else(|| {
                bad_input(
                    "--perfetto: this run has no service-time samples, locks or MPI calls to show",
                )
            })?;
        let written = export::perfetto::write(&timeline, create(path)?)?;
        eprintln!(
            "contend: wrote {} slices, {} flows and {} counter tracks to {} (open in ui.perfetto.dev)",
            written.slices,
            written.flows,
            written.counters,
            path.display()
        );
    }
    if let Some((r, naming)) = &loaded.locks {
        for note in report::locks::unmatched_notes(r) {
            eprintln!("contend: note: {note}");
        }
        write_lock_exports(r, naming, &args.locks)?;
    }
    Ok(())
}

/// Creates an export file (or stdout for `-`), with the error naming the file.
fn create(path: &std::path::Path) -> anyhow::Result<Box<dyn std::io::Write>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdout().lock()));
    }
    let f = std::fs::File::create(path)
        .map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
    Ok(Box::new(std::io::BufWriter::new(f)))
}

fn write_lock_exports(
    r: &analysis::locks::LockReport,
    naming: &report::locks::Naming,
    args: &LockArgs,
) -> anyhow::Result<()> {
    let profile = report::lock_exports::profile(r, naming);
    if let Some(path) = &args.pprof {
        export::pprof::write(&profile, create(path)?)?;
        eprintln!(
            "contend: wrote a lock-contention profile of {} call site(s) to {} (go tool pprof -top {})",
            profile.samples.len(),
            path.display(),
            path.display()
        );
    }
    if let Some(dir) = &args.histograms {
        std::fs::create_dir_all(dir)
            .map_err(|e| bad_input(format!("cannot create {}: {e}", dir.display())))?;
        for (i, l) in r.locks.iter().take(args.top).enumerate() {
            let label: String = naming
                .lock_label(l.lock)
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            let path = dir.join(format!("{:02}-{label}.svg", i + 1));
            let svg = report::lock_exports::wait_histogram(r, l.lock, naming);
            std::fs::write(&path, svg)
                .map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
            eprintln!("contend: wrote {}", path.display());
        }
    }
    if let Some(path) = &args.folded {
        let options = export::folded::Options {
            value_index: profile.value_index("delay").unwrap_or(1),
            module: false,
            file_line: true,
        };
        export::folded::write(&profile, &options, create(path)?)?;
    }
    Ok(())
}

/// The lock analysis of the run's streams, and names for its addresses.
fn lock_report(
    run_dir: &std::path::Path,
    meta: &trace::Meta,
    streams: &[(String, StreamFile)],
    args: &LockArgs,
) -> anyhow::Result<(analysis::locks::LockReport, report::locks::Naming)> {
    let clock = analysis::clock::Conversion::from_meta(&meta.clock);
    // Only the lock probe's streams: the sampler's (`sched-*`, `system`) carry no lock events
    // and count another clock.
    let mut parsed = Vec::new();
    for (file, mapped) in streams
        .iter()
        .filter(|(file, _)| !is_sampler_stream(file) && !super::mpi_runs::is_rank_stream(file))
    {
        // Already validated above; a second parse of a mapped file costs a few ns per event.
        let stream = mapped
            .parse()
            .map_err(|e| bad_input(format!("{file}: {e}")))?;
        let name = meta
            .streams
            .iter()
            .find(|s| &s.file == file)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        parsed.push((stream, name));
    }
    let lock_streams: Vec<analysis::locks::LockStream<'_, '_>> = parsed
        .iter()
        .map(|(stream, name)| analysis::locks::LockStream { stream, name })
        .collect();
    let filter = analysis::locks::Filter {
        min_duration_ns: args.min_duration,
        max_duration_ns: args.max_duration,
        locks: args.locks.clone(),
        sites: args.sites.clone(),
        threads: args.threads.clone(),
    };
    let streamed = analysis::locks::analyze_streams(
        &lock_streams,
        &analysis::locks::StreamOptions {
            clock,
            span: meta.monotonic_span.map(|[a, b]| (a, b)),
            sample_every: meta.lock_sample_every.unwrap_or(1),
            filter: &filter,
        },
    );
    let mut r = streamed.report;
    if args.perfetto.is_some() {
        // Until the loader writes the Perfetto trace from the streams
        // (report::lock_exports::write_timeline), the in-memory timeline needs every hold.
        let mut holds = Vec::new();
        analysis::locks::for_each_hold(&lock_streams, &clock, r.sample_every, r.end_ns, |h, id| {
            let tid = lock_streams[h.thread].stream.header.tid;
            if filter.keeps(h, tid) {
                holds.push(analysis::locks::Hold {
                    on_critical_path: streamed.path.binary_search(&id).is_ok(),
                    ..*h
                });
            }
        });
        r.holds = holds;
    }
    let homes = streamed.homes;
    report::locks::sort_locks(&mut r.locks, args.sort);
    let naming = name_addresses(run_dir, &r, &homes);
    Ok((r, naming))
}

/// Frames of library code that a lock call comes through (`std::mutex::lock`, libstdc++'s
/// `__gthread_mutex_lock`, anything compiled from a system header): the call site shown is
/// the first frame outside them, i.e. the program's own line.
fn is_wrapper(function: Option<&str>, file: Option<&str>) -> bool {
    let f = function.unwrap_or("");
    file.is_some_and(|p| p.starts_with("/usr/include/") || p.starts_with("/usr/lib/gcc/"))
        || ["std::", "__gthread", "__glibcxx", "__gnu_cxx::"]
            .iter()
            .any(|prefix| f.starts_with(prefix))
}

fn base_name(file: &str) -> String {
    std::path::Path::new(file)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.to_string())
}

/// A call site as people read it: `function (file:line)` of the first frame, innermost first,
/// that is not a library wrapper (the JSON keeps full frames); symbol+offset or module+offset
/// where there is no line.
pub(super) fn site_name(f: &symbolize::Frame) -> String {
    let mut frames: Vec<(Option<&str>, Option<&str>, Option<u32>)> =
        vec![(f.function.as_deref(), f.file.as_deref(), f.line)];
    frames.extend(
        f.inlined
            .iter()
            .map(|c| (c.function.as_deref(), c.file.as_deref(), c.line)),
    );
    let chosen = frames
        .iter()
        .find(|(func, file, _)| !is_wrapper(*func, *file))
        .or(frames.first());
    match chosen {
        Some((Some(func), Some(file), Some(line))) => {
            format!("{func} ({}:{line})", base_name(file))
        }
        _ => f.to_string(),
    }
}

/// A call site's frames for a profile, innermost first: the inlined functions, then the
/// function the call is written in.
fn profile_frames(f: &symbolize::Frame) -> Vec<export::pprof::Frame> {
    let module = f.module_name();
    let mut frames = vec![export::pprof::Frame {
        function: f.function.clone().unwrap_or_else(|| f.to_string()),
        file: f.file.clone(),
        line: f.line,
        address: f.address,
        module: module.clone(),
    }];
    for c in &f.inlined {
        frames.push(export::pprof::Frame {
            function: c.function.clone().unwrap_or_else(|| "??".into()),
            file: c.file.clone(),
            line: c.line,
            address: f.address,
            module: module.clone(),
        });
    }
    frames
}

/// Names for the report's call sites and locks, from the memory maps the probe saved in the
/// run directory's `maps/` (one symboliser per process). Problems are notes, not errors.
fn name_addresses(
    run_dir: &std::path::Path,
    r: &analysis::locks::LockReport,
    homes: &std::collections::HashMap<analysis::locks::LockKey, analysis::allocs::Home>,
) -> report::locks::Naming {
    let mut naming = report::locks::Naming::default();
    let mut snapshots: std::collections::BTreeMap<u32, Vec<std::path::PathBuf>> =
        Default::default();
    if let Ok(entries) = std::fs::read_dir(run_dir.join("maps")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_suffix(".maps")
                .and_then(|stem| stem.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            {
                snapshots.entry(pid).or_default().push(e.path());
            }
        }
    }
    let recorded_at = std::fs::metadata(run_dir.join("meta.json"))
        .and_then(|m| m.modified())
        .ok();
    for (pid, mut files) in snapshots {
        files.sort();
        let mut maps = symbolize::Maps::new();
        for f in &files {
            if let Ok((m, _)) = symbolize::Maps::read(f) {
                maps.merge(&m);
            }
        }
        let options = symbolize::SymbolizerOptions {
            recorded_at,
            ..Default::default()
        };
        let mut sym = symbolize::Symbolizer::with_options(maps, options);
        let lock_sites = r
            .locks
            .iter()
            .filter(|l| l.lock.pid == pid)
            .flat_map(|l| l.sites.iter().filter_map(|s| s.site));
        let cond_sites = r
            .conds
            .iter()
            .filter(|c| c.pid == pid)
            .flat_map(|c| c.sites.iter().copied());
        for s in lock_sites.chain(cond_sites) {
            if let std::collections::hash_map::Entry::Vacant(slot) = naming.sites.entry(s) {
                let frame = sym.resolve_call_site(s);
                slot.insert(site_name(&frame));
                naming.frames.insert(s, profile_frames(&frame));
            }
        }
        for l in r.locks.iter().filter(|l| l.lock.pid == pid) {
            if let Some(d) = sym.resolve_data(l.lock.address) {
                naming.locks.insert(l.lock, d.to_string());
            } else if let Some(home) = homes.get(&l.lock) {
                let site_name = match home.block.site {
                    Some(s) => site_name(&sym.resolve_call_site(s)),
                    None => "an unknown call site".to_string(),
                };
                let allocation = report::locks::Allocation {
                    site: home.block.site,
                    site_name,
                    block_address: home.block.address,
                    size: home.block.size,
                    offset: home.offset,
                };
                naming.locks.insert(l.lock, allocation.describe());
                naming.allocations.insert(l.lock, allocation);
            }
        }
        for note in sym.notes() {
            eprintln!(
                "contend: note: symbols: {}: {}",
                note.module.display(),
                note.message
            );
        }
    }
    naming
}
