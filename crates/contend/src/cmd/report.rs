//! `contend report [RUN]`: the run explained (`explain::open`: the run summary, then the
//! activity, locks, MPI and sharing sections the run has), rendered as text by the `report`
//! crate or printed as the model's JSON; and the exports (Perfetto, pprof, folded stacks,
//! histograms, the timeline and heat strips) and the self-contained HTML page (`--html`),
//! written from the same model.

use crate::exit::bad_input;
use explain::Explained;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The run directory to read.
    #[arg(value_name = "RUN", default_value = trace::DEFAULT_RUN_DIR)]
    run: PathBuf,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write the whole report as one self-contained HTML page (inline charts, no network):
    /// a new file, never one that exists.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
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
    #[arg(long, value_name = "NS", default_value_t = explain::DEFAULT_TRANSFER_NS,
          value_parser = explain::sharing::parse_transfer_ns)]
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
    #[arg(long, value_name = "DURATION", value_parser = analysis::units::parse_duration, default_value = "0")]
    mpi_p2p_threshold: u64,
    /// Keep collective wait states of at least this long.
    #[arg(long, value_name = "DURATION", value_parser = analysis::units::parse_duration, default_value = "0")]
    mpi_collective_threshold: u64,
    /// Treat a standard-mode MPI_Send lasting at least this long as synchronous (rendezvous)
    /// and look for a Late Receiver there too (MPI_Ssend always is).
    #[arg(long, value_name = "DURATION", value_parser = analysis::units::parse_duration)]
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
    #[arg(long, value_name = "DURATION", value_parser = analysis::units::parse_duration)]
    min_duration: Option<u64>,
    /// Keep mutex events at most this long.
    #[arg(long, value_name = "DURATION", value_parser = analysis::units::parse_duration)]
    max_duration: Option<u64>,
    /// Keep only this lock (its address, e.g. 0x55d0c0a4b040); repeatable.
    #[arg(long = "lock", value_name = "ADDR", value_parser = analysis::units::parse_address)]
    locks: Vec<u64>,
    /// Keep only acquisitions from this call site (its address); repeatable.
    #[arg(long = "site", value_name = "ADDR", value_parser = analysis::units::parse_address)]
    sites: Vec<u64>,
    /// Keep only this thread (its tid); repeatable.
    #[arg(long = "thread", value_name = "TID")]
    threads: Vec<u32>,
    /// Write a Perfetto trace (open it in ui.perfetto.dev): each thread's CPU share and
    /// run-queue wait over time, its scheduler states when recorded, and its lock waits and
    /// holds with wake-up flows.
    #[arg(long, value_name = "FILE")]
    perfetto: Option<PathBuf>,
    /// Write a lock-contention profile for `go tool pprof` (contentions/count, delay/nanoseconds):
    /// the probe's lock waits and, with user stacks, the blocked futex waits.
    #[arg(long, value_name = "FILE")]
    pprof: Option<PathBuf>,
    /// Write folded stacks of lock wait time (ns) for flame graphs (`-` for stdout), futex
    /// waits with stacks included.
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// Write wait-time histograms (SVG, log-binned) of the shown locks into this directory.
    #[arg(long, value_name = "DIR")]
    histograms: Option<PathBuf>,
}

impl Args {
    /// The loader's options these arguments stand for.
    fn options(&self) -> explain::Options {
        explain::Options {
            lock_filter: analysis::locks::Filter {
                min_duration_ns: self.locks.min_duration,
                max_duration_ns: self.locks.max_duration,
                locks: self.locks.locks.clone(),
                sites: self.locks.sites.clone(),
                threads: self.locks.threads.clone(),
            },
            lock_sort: self.locks.sort,
            mpi_thresholds: analysis::waitstates::Thresholds {
                p2p_min_ns: self.mpi.mpi_p2p_threshold,
                collective_min_ns: self.mpi.mpi_collective_threshold,
                rendezvous_send_ns: self.mpi.mpi_rendezvous,
            },
            mpi_from: self.mpi.mpi_from.clone(),
            mpi_job: self.mpi.mpi_job,
            transfer_ns: self.sharing.transfer_ns,
            what_if_locks: self.locks.top,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let explained =
        explain::open_any(&args.run, &args.options()).map_err(|e| bad_input(e.to_string()))?;
    // The page's file is made before anything is printed: a path that cannot be a new file
    // is one line and exit 2, not a report followed by an error.
    let html_file = args
        .html
        .as_deref()
        .map(crate::output::Page::create)
        .transpose()?;
    for notice in explained.notices() {
        crate::ui::note(notice);
    }
    if args.json {
        crate::output::outln!("{}", serde_json::to_string_pretty(&explained)?);
    }
    let loaded = match explained {
        // A `contend scale` directory: its runs are run directories; itself, the model.
        Explained::Scale(model) => {
            let view = model.view();
            if !args.json {
                crate::output::out!("{}", report::scale::render(&view));
            }
            if let Some(page) = html_file {
                page.write(&report::html::render_scale(
                    &args.run.display().to_string(),
                    &view,
                ))?;
            }
            return Ok(());
        }
        Explained::Run(run) => run,
    };
    if !args.json {
        crate::output::out!("{}", report::run_summary::render(&loaded.summary));
        if let Some(line) = loaded
            .locks
            .as_ref()
            .and_then(|l| report::locks::headline(&l.report, &l.naming))
        {
            crate::output::outln!("\n{line}");
        }
        if let Some(a) = &loaded.activity {
            crate::output::outln!();
            crate::output::out!("{}", report::activity::render(&a.view, args.top_threads));
            if let Some(l) = &loaded.locks {
                crate::output::out!(
                    "{}",
                    report::activity::blocked_explained(
                        &a.view,
                        &l.report,
                        loaded.off_cpu_blocked()
                    )
                );
            }
        }
        if let Some(l) = &loaded.locks {
            crate::output::outln!();
            let opts = report::locks::RenderOptions {
                top: args.locks.top,
                sites_per_lock: 5,
            };
            crate::output::out!(
                "{}",
                report::locks::render(&l.report, &l.naming, &l.coverage, &opts)
            );
        } else if let Some(why) = loaded.locks_not_measured() {
            crate::output::outln!();
            crate::output::out!("{}", report::locks::render_not_measured(why));
        }
        if let Some(w) = &loaded.waits {
            crate::output::outln!();
            crate::output::out!(
                "{}",
                report::waits::render(
                    &w.report,
                    &w.names,
                    &w.thread_names,
                    report::waits::RenderOptions {
                        top: args.locks.top,
                        ends_traced: w.ends_traced,
                    }
                )
            );
            crate::output::out!(
                "{}",
                report::waits::runtime::render_call_sites(
                    &analysis::waits::call_sites(&w.report, &w.stacks),
                    args.locks.top
                )
            );
            crate::output::out!(
                "{}",
                report::waits::runtime::render_runtimes(&analysis::waits::runtimes(
                    &w.report, &w.stacks
                ))
            );
        } else if let Some(why) = loaded.waits_not_measured() {
            crate::output::outln!();
            crate::output::out!("{}", report::waits::render_not_measured(why));
        }
        if let Some(m) = &loaded.mpi {
            crate::output::outln!();
            crate::output::out!("{}", report::mpi::render(&m.run, &m.site_names));
        }
        if let Some(s) = &loaded.sharing {
            crate::output::outln!();
            crate::output::out!(
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
        crate::output::outln!();
        crate::output::out!("{}", report::run_summary::render_streams(&loaded.summary));
    }
    if let Some(page) = html_file {
        page.write(&report::html::render(&loaded.page(report::html::Options {
            sharing_top: args.sharing.sharing_top,
            transfer_ns: args.sharing.transfer_ns,
            ..Default::default()
        })))?;
    }
    if let Some(dir) = &args.sharing.sharing_svg {
        match &loaded.sharing {
            Some(s) => crate::output::write_strips(s, dir, args.sharing.sharing_top)?,
            None => crate::ui::note("--sharing-svg: this run has no sharing results"),
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
        crate::ui::status(format_args!("wrote {}", path.display()));
    } else if args.timeline.is_some() {
        crate::ui::note(
            "--timeline: this run has no service-time samples (record it without --interval 0)",
        );
    }
    if let Some(path) = &args.locks.perfetto {
        let written = explain::perfetto::write(&args.run, &loaded, create(path)?)?;
        crate::ui::status(format_args!(
            "wrote {} slices, {} flows and {} counter tracks to {} (open in ui.perfetto.dev)",
            written.slices,
            written.flows,
            written.counters,
            path.display()
        ));
    }
    if let Some(l) = &loaded.locks {
        for note in report::locks::unmatched_notes(&l.report) {
            crate::ui::note(note);
        }
    }
    let wait_samples = loaded.waits.as_ref().map_or_else(Vec::new, |w| {
        report::waits::profile_samples(&w.report, &w.stacks, &w.names)
    });
    if loaded.locks.is_some() || !wait_samples.is_empty() {
        let mut profile = match &loaded.locks {
            Some(l) => report::lock_exports::profile(&l.report, &l.naming),
            None => export::pprof::Profile::lock_contention(),
        };
        if !wait_samples.is_empty() {
            profile.comments.push(
                "contend futex waits: blocked futex waits from their user stacks, rooted at [futex wait WORD KIND]".into(),
            );
            profile.samples.extend(wait_samples);
        }
        write_lock_exports(
            loaded.locks.as_ref().map(|l| (&l.report, &l.naming)),
            &profile,
            &args.locks,
        )?;
    }
    Ok(())
}

/// Creates an export file (or stdout for `-`), with the error naming the file.
fn create(path: &std::path::Path) -> anyhow::Result<Box<dyn std::io::Write>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(crate::output::Stdout));
    }
    let f = std::fs::File::create(path)
        .map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
    Ok(Box::new(std::io::BufWriter::new(f)))
}

/// An export that failed: data the format cannot hold (read from a damaged run) is the input's
/// fault (exit 2); a write that failed is the machine's (exit 1).
fn export_error(e: export::ExportError) -> anyhow::Error {
    match e {
        export::ExportError::Invalid(_) => bad_input(format!(
            "{e} (the run's data is damaged: re-record the run)"
        )),
        export::ExportError::Io(_) => e.into(),
    }
}

/// The lock exports: the profile (the probe's lock waits and the futex waits with stacks) as
/// pprof and folded stacks, and the probe's locks' histograms.
fn write_lock_exports(
    locks: Option<(&analysis::locks::LockReport, &report::locks::Naming)>,
    profile: &export::pprof::Profile,
    args: &LockArgs,
) -> anyhow::Result<()> {
    if let Some(path) = &args.pprof {
        export::pprof::write(profile, create(path)?).map_err(export_error)?;
        crate::ui::status(format_args!(
            "wrote a lock-contention profile of {} call site(s) to {} (go tool pprof -top {})",
            profile.samples.len(),
            path.display(),
            path.display()
        ));
    }
    if let (Some(dir), Some((r, naming))) = (&args.histograms, locks) {
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
            crate::ui::status(format_args!("wrote {}", path.display()));
        }
    }
    if let Some(path) = &args.folded {
        let options = export::folded::Options {
            value_index: profile.value_index("delay").unwrap_or(1),
            module: false,
            file_line: true,
        };
        export::folded::write(profile, &options, create(path)?).map_err(export_error)?;
    }
    Ok(())
}
