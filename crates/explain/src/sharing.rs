//! The sharing section: a run's `sharing/PID.json` + `PID.hist` files (what the sharing
//! runtime of a `contend cc` build wrote), analysed (`analysis::sharing`), with lines, objects
//! and code named from each process's `maps/sharing-PID.maps`, and each process's concurrency
//! measured from the run's sampler streams.

use crate::error::{damaged, Error};
use crate::names::CallSite;
use crate::Notice;
use analysis::concurrency::Concurrency;
use analysis::sharing::SharingReport;
use report::sharing::{code_key, line_key, CodeName, Naming, ProcessLine};
use std::collections::BTreeMap;
use std::path::Path;
use trace::sharing::{HotLine, ProcessSharing};

/// A run's sharing results, analysed and named.
pub struct Sharing {
    pub report: SharingReport,
    pub processes: Vec<ProcessLine>,
    pub naming: Naming,
}

/// Reads and analyses `run`'s sharing results; `None` when it has none.
pub fn load(
    run: &Path,
    transfer_ns: f64,
    notices: &mut Vec<Notice>,
) -> Result<Option<Sharing>, Error> {
    let dir = run.join(trace::layout::SHARING_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(None);
    };
    // Names relative to the run: read inside it, never through a link (`trace::files`).
    let mut files: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .map(|n| format!("{}/{n}", trace::layout::SHARING_DIR))
        .collect();
    if files.is_empty() {
        return Ok(None);
    }
    files.sort();
    let mut lines = Vec::new();
    let mut processes = Vec::new();
    let mut naming = Naming {
        node_of_cpu: node_of_cpu(run),
        ..Default::default()
    };
    let mut transfers_total = 0;
    let mut multi_threaded = false;
    let mut hot_after = 0;
    let together = concurrency(run, notices);
    // The verdict needs every process that could share (two threads or more) measured; the
    // least concurrent of them decides.
    let mut least: Option<Option<analysis::concurrency::Concurrency>> = None;
    for file in files {
        let shown = run.join(&file).display().to_string();
        let bytes =
            trace::files::read_in_run(run, Path::new(&file), &trace::files::SHARING_RESULTS)
                .map_err(|e| damaged(format!("cannot read the sharing results: {e}")))?;
        let process =
            ProcessSharing::from_json(&bytes).map_err(|e| damaged(format!("{shown}: {e}")))?;
        let hist = format!("{}.hist", file.strip_suffix(".json").unwrap_or(&file));
        let histories = histories(run, &hist, &process)?;
        transfers_total += process.totals.transfers;
        let measured = together.as_ref().and_then(|c| c.get(&process.pid).copied());
        if process.threads.len() >= 2 {
            multi_threaded = true;
            hot_after = hot_after.max(process.hot_after);
            least = Some(match (least, measured) {
                (None, m) => m,
                (Some(Some(a)), Some(b)) => Some(a.least(b)),
                _ => None,
            });
        }
        processes.push(ProcessLine {
            pid: process.pid,
            program: process.program.clone(),
            line_size: process.line_size,
            hot_after: process.hot_after,
            sample_every: process.sample_every,
            threads: process.threads.len(),
            reads: process.totals.reads,
            writes: process.totals.writes,
            transfers: process.totals.transfers,
            hot_lines: process.totals.hot_lines,
            hot_lines_dropped: process.totals.hot_lines_dropped,
            history_dropped: process.totals.history_dropped,
            pmu: process.pmu.clone(),
            concurrency: measured,
        });
        name_process(run, &process, &mut naming, notices)?;
        lines.extend(analysis::sharing::analyse_process(
            &process,
            &histories,
            transfer_ns,
        ));
    }
    let mut report = analysis::sharing::rank(lines, transfers_total);
    report.judge(least.flatten(), multi_threaded, hot_after);
    Ok(Some(Sharing {
        report,
        processes,
        naming,
    }))
}

/// Each process's concurrent on-CPU time, from the run's sampler streams (`None`: the run has
/// none: recorded with `--interval 0`, or imported).
fn concurrency(run: &Path, notices: &mut Vec<Notice>) -> Option<BTreeMap<u32, Concurrency>> {
    let (dir, mut meta) = trace::rundir::RunDir::open(run).ok()?;
    // The loader said it already; said again here, the notice would be twice.
    crate::plausible::check_span(&mut meta, "", &mut Vec::new());
    let sampling = meta.sampling.as_ref()?;
    let mut streams = Vec::new();
    let index = meta.stream_index();
    for file in dir.stream_files().ok()? {
        if !crate::activity::is_sampler_stream(&index, &file) {
            continue;
        }
        match dir.map_stream(&file) {
            Ok(m) => streams.push((file, m)),
            Err(e) => {
                notices.push(Notice(format!(
                    "{e}: the threads' concurrency is not measured"
                )));
                return None;
            }
        }
    }
    let crate::activity::SamplerThreads {
        threads: samples,
        states,
    } = match crate::activity::sampler_threads(&meta, &streams, &mut Vec::new()) {
        Ok(d) => d,
        Err(e) => {
            notices.push(Notice(format!(
                "{e}: the threads' concurrency is not measured"
            )));
            return None;
        }
    };
    if samples.is_empty() {
        return None;
    }
    // Exact only when the tracepoint reader lost nothing.
    let states_complete = sampling.sched_trace.as_ref().is_some_and(|t| {
        t.lost == 0 && t.unparsed == 0 && t.switch_gaps == 0 && t.unsampled_threads == 0
    });
    let last_sample = samples
        .iter()
        .flat_map(|t| t.samples.last().map(|s| s.ts))
        .max()
        .unwrap_or(0);
    let [start, end] = meta.monotonic_span.unwrap_or([0, last_sample]);
    let pus = meta.online_cpus();
    let cpus = meta.cpus.as_ref().map(|c| c.len() as u32).or(pus);
    Some(analysis::concurrency::per_process(
        &analysis::concurrency::Recorded {
            samples: &samples,
            states: &states,
            states_complete,
            start,
            end: end.max(last_sample),
            cpus,
        },
    ))
}

/// Each line's history from `hist` (absent: none were kept, which a line referring to one
/// makes an error).
fn histories(
    run: &Path,
    hist: &str,
    process: &ProcessSharing,
) -> Result<Vec<Vec<trace::sharing::HistoryEntry>>, Error> {
    let wanted = process.lines.iter().any(|l| l.history.is_some());
    if !wanted {
        return Ok(vec![Vec::new(); process.lines.len()]);
    }
    let shown = run.join(hist).display().to_string();
    let bytes = trace::files::read_in_run(run, Path::new(hist), &trace::files::SHARING_HISTORY)
        .map_err(|e| {
            damaged(format!(
                "cannot read the sharing history ({e}), but its results refer to it: copy the whole run directory"
            ))
        })?;
    let entries =
        trace::sharing::history_entries(&bytes).map_err(|e| damaged(format!("{shown}: {e}")))?;
    process
        .lines
        .iter()
        .map(|l| {
            trace::sharing::line_history(entries, l, process)
                .map_err(|e| damaged(format!("{shown}: {e}")))
        })
        .collect()
}

/// CPU → node from the run's meta.json topology.
fn node_of_cpu(run: &Path) -> std::collections::BTreeMap<u32, u32> {
    trace::rundir::RunDir::open(run)
        .map(|(_, meta)| meta.node_of_cpu())
        .unwrap_or_default()
}

/// Names every line (the heap block or global it lies in) and every code address of `process`.
fn name_process(
    run: &Path,
    process: &ProcessSharing,
    naming: &mut Naming,
    notices: &mut Vec<Notice>,
) -> Result<(), Error> {
    let maps = trace::layout::sharing_maps(process.pid);
    let mut symbolizer = match crate::names::read_maps(run, &maps)? {
        Some(maps) => Some(symbolize::Symbolizer::new(maps)),
        None => {
            notices.push(Notice(format!(
                "{}: no such file: process {}'s lines and code are shown as addresses",
                run.join(&maps).display(),
                process.pid
            )));
            None
        }
    };
    for line in &process.lines {
        let name = match symbolizer.as_mut() {
            Some(sym) => line_name(sym, line, process.line_size),
            None => format!("{:#x}", line.address),
        };
        naming.lines.insert(line_key(process.pid, line.id), name);
        for a in &line.accesses {
            let key = code_key(process.pid, a.pc);
            if naming.code.contains_key(&key) {
                continue;
            }
            let code = match symbolizer.as_mut() {
                Some(sym) => {
                    // The hook's return address: the access is the call just before it.
                    let f = sym.resolve_call_site(a.pc);
                    let site = CallSite::innermost(&f);
                    CodeName {
                        symbol: site.function.unwrap_or_else(|| f.to_string()),
                        source: site.location,
                    }
                }
                None => CodeName {
                    symbol: format!("{:#x}", a.pc),
                    source: None,
                },
            };
            naming.code.insert(key, code);
        }
    }
    Ok(())
}

/// What a line belongs to: the heap blocks over it (with where they were allocated), else the
/// global it is in, else the mapping.
fn line_name(sym: &mut symbolize::Symbolizer, line: &HotLine, line_size: u32) -> String {
    let end = line.address + u64::from(line_size);
    if !line.objects.is_empty() {
        let parts: Vec<String> = line
            .objects
            .iter()
            .map(|o| {
                let site = crate::names::site_name(&sym.resolve_call_site(o.site));
                let from = line.address.max(o.address) - o.address;
                let to = end.min(o.address + o.size) - o.address;
                format!(
                    "{} B {} at {site}, bytes {from:#x}..{to:#x}{}",
                    o.size,
                    o.allocator,
                    if o.freed_ns.is_some() {
                        " (freed since)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        return parts.join("; ");
    }
    if let Some(d) = sym.resolve_data(line.address) {
        return format!("{d} (global)");
    }
    // A line that starts in padding or an unnamed area may hold the start of a global.
    if let Some((o, d)) = (1..u64::from(line_size)).find_map(|o| {
        sym.resolve_data(line.address + o)
            .filter(|d| d.offset < o)
            .map(|d| (o - d.offset, d))
    }) {
        return format!("{} (global, from line +{o:#x})", d.name);
    }
    match sym.maps().find(line.address) {
        Some(m) => m.short_name(),
        None => "unmapped".into(),
    }
}

impl Sharing {
    /// The heat strip (SVG) of each of the `top` most transferred lines, as `line-N.svg` and its
    /// text: which thread touches which bytes.
    pub fn strips(&self, top: usize) -> Vec<(String, String)> {
        self.report
            .lines
            .iter()
            .take(top)
            .enumerate()
            .map(|(i, l)| {
                let belongs = self
                    .naming
                    .lines
                    .get(&line_key(l.pid, l.id))
                    .cloned()
                    .unwrap_or_default();
                let title = format!(
                    "Line #{} {:#x} ({belongs}): {} transfers, {}",
                    i + 1,
                    l.address,
                    l.transfers,
                    l.class.map_or("no transfers since hot", |c| c.title())
                );
                (
                    format!("line-{}.svg", i + 1),
                    report::sharing::heat_strip(l, &title),
                )
            })
            .collect()
    }
}

/// `--transfer-ns`: a cost in ns, finite and not negative.
pub fn parse_transfer_ns(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?}: give a cost in ns, 0 or more (e.g. 100)")),
    }
}
