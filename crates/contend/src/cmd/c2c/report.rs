//! `contend c2c report`: a run's sharing results (`explain::sharing`: the `sharing/PID.json`
//! files a `contend cc` build wrote, analysed and named) rendered as perf c2c's two tables, or
//! printed as JSON.

use crate::exit::bad_input;
use std::path::PathBuf;

/// Options of `contend c2c report`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// The run directory.
    #[arg(default_value = "contend.data")]
    pub run: PathBuf,
    /// How many of the most transferred lines to show in detail.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// What one cross-thread transfer costs, for the estimated-cost column (ns; e.g. half the
    /// round trip `contend bench latency` measures between the CPUs involved).
    #[arg(long, value_name = "NS", default_value_t = explain::DEFAULT_TRANSFER_NS, value_parser = explain::sharing::parse_transfer_ns)]
    pub transfer_ns: f64,
    /// Write an SVG heat strip of each of the top lines (which thread touches which bytes) into
    /// this directory, as `line-N.svg`.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Write the sharing results as one self-contained HTML page (inline charts, no network):
    /// a new file, never one that exists.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `contend c2c report`.
pub fn report(args: ReportArgs) -> anyhow::Result<()> {
    let mut notices = Vec::new();
    let loaded = explain::sharing::load(&args.run, args.transfer_ns, &mut notices)
        .map_err(|e| bad_input(e.to_string()))?;
    for notice in &notices {
        crate::ui::note(notice);
    }
    let Some(loaded) = loaded else {
        return Err(bad_input(format!(
            "{}: no sharing results (no sharing/*.json): record a program built with `contend cc` using `contend c2c record -- PROGRAM`",
            args.run.display()
        )));
    };
    let html_file = args
        .html
        .as_deref()
        .map(crate::output::Page::create)
        .transpose()?;
    if args.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&explain::Versioned::new(
                &explain::json::SharingJson::of(&loaded)
            ))?
        );
    } else {
        crate::output::out!(
            "{}",
            report::sharing::render(
                &loaded.report,
                &loaded.processes,
                &loaded.naming,
                args.top,
                args.transfer_ns
            )
        );
    }
    if let Some(page) = html_file {
        let (run, sharing) = (args.run.display().to_string(), loaded.page());
        let o = report::html::Options {
            sharing_top: args.top,
            transfer_ns: args.transfer_ns,
            ..Default::default()
        };
        page.write(&report::html::render_sharing(&run, &sharing, &o))?;
    }
    if let Some(dir) = &args.svg {
        crate::output::write_strips(&loaded, dir, args.top)?;
    }
    Ok(())
}
