//! `contend diff A B [C ...]`: runs or saved reports compared metric by metric, with the %
//! change of each against the first (thesis §3.2.3), and `--fail-if` bounds for CI. The
//! flattening, the model and every output format are `report::diff`; this reads the inputs.

use crate::exit::bad_input;
use report::diff::{check, Bound, Diff, Finding};
use serde::Deserialize;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// What to compare, the first being the baseline: run directories (as `contend report`
    /// reads them; one made by `contend scale` is read from its scale.json), or JSON saved from
    /// `contend report --json` (`-` for stdin).
    #[arg(value_name = "RUN_OR_JSON", num_args = 2.., required = true)]
    inputs: Vec<PathBuf>,
    /// Show only metrics whose path matches this glob (`*` any characters, `?` one), e.g.
    /// `locks.*wait*`; repeatable. Default: every metric.
    #[arg(long = "metric", value_name = "GLOB")]
    metrics: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "table")]
    format: Format,
    /// Print JSON (the same as `--format json`).
    #[arg(long, conflicts_with_all = ["format", "csv"])]
    json: bool,
    /// Print CSV (the same as `--format csv`).
    #[arg(long, conflicts_with = "format")]
    csv: bool,
    /// Exit 1 when a later input's change against the first crosses this bound:
    /// `METRIC>+5%`, `METRIC<-5%` (relative), `METRIC>+10` (absolute, in the metric's own unit,
    /// e.g. ns for `*_ns`); METRIC may be a glob, and any match crossing fires. Checked on
    /// every metric, whatever `--metric` shows. Repeatable.
    #[arg(long = "fail-if", value_name = "BOUND", allow_hyphen_values = true)]
    fail_if: Vec<String>,
    /// Also fail when a `--fail-if` metric has no value on one side (else that is a note).
    #[arg(long)]
    fail_if_missing: bool,
    /// Also write the comparison as one self-contained HTML page (what got worse and what
    /// got better, coloured, with the figures): a new file, never one that exists.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Table,
    Markdown,
    Latex,
    Csv,
    Json,
}

const EXPECTED: &str = "expected a run directory (with meta.json, or scale.json from `contend scale`) or a JSON report saved from `contend report --json`";

/// JSON files larger than this are refused rather than read into memory.
const MAX_JSON_BYTES: u64 = 1 << 30;

/// What a saved report says of itself: its layout's version (absent before there was one).
#[derive(serde::Deserialize)]
struct SavedHeader {
    schema_version: Option<u32>,
}

/// A saved report. Its metrics are compared by path whatever its sections (`report::diff`
/// flattens every numeric leaf), so that reports of other versions and scale.json compare too;
/// only a layout newer than this contend reads is refused.
fn parse_json(text: &[u8], shown: &str) -> anyhow::Result<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(text)
        .map_err(|e| bad_input(format!("{shown}: not a JSON report ({e}); {EXPECTED}")))?;
    if !v.is_object() {
        return Err(bad_input(format!(
            "{shown}: not a JSON report (its top level is not an object); {EXPECTED}"
        )));
    }
    let header = SavedHeader::deserialize(&v)
        .map_err(|e| bad_input(format!("{shown}: not a JSON report ({e}); {EXPECTED}")))?;
    if let Some(version) = header
        .schema_version
        .filter(|&v| v > explain::SCHEMA_VERSION)
    {
        return Err(bad_input(format!(
            "{shown}: a report of schema version {version}, newer than this contend reads ({})",
            explain::SCHEMA_VERSION
        )));
    }
    Ok(v)
}

/// A saved report (a regular file within `trace::files::REPORT_JSON`'s size), or `rel` of
/// the directory `dir` (no link followed out of it).
fn read_json_file(path: &Path, in_dir: Option<&Path>) -> anyhow::Result<serde_json::Value> {
    let kind = &trace::files::REPORT_JSON;
    let read = match in_dir {
        Some(dir) => trace::files::read_in_run(dir, path, kind),
        None => trace::files::read_regular(path, kind),
    };
    let text = read.map_err(|e| bad_input(format!("{e}; {EXPECTED}")))?;
    let shown = in_dir.map_or_else(|| path.to_path_buf(), |d| d.join(path));
    parse_json(&text, &shown.display().to_string())
}

/// The JSON an input stands for: a run directory's report, a `contend scale` directory's
/// scale.json, or a saved JSON file.
fn load(path: &Path) -> anyhow::Result<serde_json::Value> {
    let shown = path.display().to_string();
    if path.as_os_str() == "-" {
        let mut text = Vec::new();
        std::io::stdin()
            .take(MAX_JSON_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| bad_input(format!("stdin: cannot read: {e}")))?;
        return parse_json(&text, "stdin");
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(bad_input(format!(
                "{shown}: no such file or directory; {EXPECTED}"
            )));
        }
        Err(e) => return Err(bad_input(format!("{shown}: {e}; {EXPECTED}"))),
    };
    if meta.is_dir() {
        if path.join(trace::rundir::META_FILE).exists() {
            // The model `contend report RUN --json` prints, with its default options.
            let run = explain::open(path, &explain::Options::default())
                .map_err(|e| bad_input(e.to_string()))?;
            for notice in &run.notices {
                crate::ui::note(notice);
            }
            Ok(serde_json::to_value(&run)?)
        } else if explain::scale::is_scale_dir(path) {
            // Compared as saved, whatever contend version wrote it.
            read_json_file(Path::new(explain::scale::SCALE_FILE), Some(path))
        } else {
            Err(bad_input(format!(
                "{shown}: a directory without meta.json or scale.json; {EXPECTED}"
            )))
        }
    } else {
        // A FIFO or device says what it is.
        read_json_file(path, None)
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // Bounds first: a malformed one is a usage error before any work.
    let bounds = args
        .fail_if
        .iter()
        .map(|b| Bound::parse(b).map_err(bad_input))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if args.inputs.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        return Err(bad_input("only one input can be `-` (stdin)"));
    }
    let mut inputs = Vec::with_capacity(args.inputs.len());
    for path in &args.inputs {
        let v = load(path)?;
        let label = if path.as_os_str() == "-" {
            "stdin".to_string()
        } else {
            path.display().to_string()
        };
        inputs.push((label, report::diff::flatten(&v)));
    }
    let all = Diff::new(inputs);
    let mut shown = all.clone();
    let unmatched = shown.select(&args.metrics);
    if !args.metrics.is_empty() && unmatched.len() == args.metrics.len() {
        return Err(bad_input(format!(
            "no metric matches --metric {} (metrics are paths like locks.summary.wait_ns; run without --metric to list them)",
            unmatched.join(", --metric ")
        )));
    }
    for g in &unmatched {
        crate::ui::note(format_args!("--metric {g} matches no metric"));
    }
    let html_file = args
        .html
        .as_deref()
        .map(crate::output::Page::create)
        .transpose()?;

    let format = if args.json {
        Format::Json
    } else if args.csv {
        Format::Csv
    } else {
        args.format
    };
    match format {
        Format::Table => crate::output::out!("{}", report::diff::render_table(&shown)),
        Format::Markdown => crate::output::out!("{}", report::diff::render_markdown(&shown)),
        Format::Latex => crate::output::out!("{}", report::diff::render_latex(&shown)),
        Format::Csv => crate::output::out!("{}", report::diff::render_csv(&shown)),
        Format::Json => crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(&report::diff::to_json(
                &shown
            )))?
        ),
    }

    if let Some(page) = html_file {
        page.write(&report::html::render_diff(&shown))?;
    }

    // Bounds apply to every metric, whatever --metric shows.
    let mut crossed = 0;
    for f in check(&all, &bounds) {
        let line = f.describe(&all, &bounds);
        match f {
            Finding::Crossed { .. } => {
                crossed += 1;
                crate::ui::status(format_args!("bound crossed: {line}"));
            }
            _ if args.fail_if_missing => {
                crossed += 1;
                crate::ui::status(format_args!("bound crossed: {line} (--fail-if-missing)"));
            }
            _ => crate::ui::note(format_args!("{line} (--fail-if-missing to fail on it)")),
        }
    }
    if crossed > 0 {
        anyhow::bail!("{crossed} --fail-if bound(s) crossed");
    }
    Ok(())
}
