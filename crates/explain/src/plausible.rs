//! Values read from a run that cannot be right, caught before any analysis adds or subtracts
//! them: a run span that ends before it starts or lasts longer than a machine has been up,
//! samples whose times run backwards or leave the run, a thread given more CPU time than time
//! passed. A release build would otherwise wrap a negative interval to 18 446 744 073 709 ms
//! (and a debug build panic). What is left out is said in a notice that calls it invalid.

use crate::Notice;
use analysis::service::ThreadSamples;

/// No CLOCK_MONOTONIC reading (ns since boot) can be past a century of uptime; a time or a
/// span beyond it is invalid (and far below where u64 arithmetic wraps).
pub(crate) const MAX_MONOTONIC_NS: u64 = 100 * 365 * 24 * 3600 * 1_000_000_000;

/// How far past the end of the run the sampler's last round may come, and how much more CPU
/// time than time passed a thread may be credited (the sampler's own timing jitter), besides
/// one sampling interval.
const SLACK_NS: u64 = 100_000_000;

/// meta.json's monotonic span, if it can be right: otherwise `None`, with a notice.
pub(crate) fn check_span(meta: &mut trace::Meta, run: &str, notices: &mut Vec<Notice>) {
    let Some([start, end]) = meta.monotonic_span else {
        return;
    };
    let why = if end < start {
        "it ends before it starts"
    } else if end > MAX_MONOTONIC_NS {
        "it ends more than a century after the machine started"
    } else {
        return;
    };
    notices.push(Notice(format!(
        "{run}/meta.json: the run's monotonic_span [{start}, {end}] is invalid ({why}): the samples' own times are used"
    )));
    meta.monotonic_span = None;
}

/// Leaves out the samples that cannot be right (times out of order, outside the run's span,
/// more CPU and run-queue time than time passed), with one notice per thread that had any.
pub(crate) fn check_samples(
    threads: &mut [ThreadSamples],
    meta: &trace::Meta,
    notices: &mut Vec<Notice>,
) {
    let interval = meta
        .sampling
        .as_ref()
        .map_or(0, |s| s.interval_ns)
        .min(MAX_MONOTONIC_NS);
    let slack = interval.saturating_add(SLACK_NS);
    for t in threads {
        let before = t.samples.len();
        // Time the thread can have used: from the run's start (or, without one, what its first
        // sample says it used) to each sample.
        let origin = match (meta.monotonic_span, t.samples.first()) {
            (Some([start, _]), _) => Some(start),
            (None, Some(first)) => Some(
                first
                    .ts
                    .saturating_sub(first.on_cpu_ns.saturating_add(first.runq_wait_ns)),
            ),
            (None, None) => None,
        };
        let end = meta
            .monotonic_span
            .map(|[_, end]| end.saturating_add(slack));
        let mut last: Option<u64> = None;
        let mut used = 0u64;
        t.samples.retain(|s| {
            let in_order = last.is_none_or(|l| s.ts > l) && s.ts <= MAX_MONOTONIC_NS;
            let in_run = origin.is_none_or(|o| s.ts.saturating_add(slack) >= o)
                && end.is_none_or(|e| s.ts <= e);
            let total = used
                .saturating_add(s.on_cpu_ns)
                .saturating_add(s.runq_wait_ns);
            let possible =
                origin.is_none_or(|o| total <= s.ts.saturating_sub(o).saturating_add(slack));
            let keep = in_order && in_run && possible;
            if keep {
                last = Some(s.ts);
                used = total;
            }
            keep
        });
        let dropped = before - t.samples.len();
        if dropped > 0 {
            notices.push(Notice(format!(
                "{dropped} of {before} service-time samples of thread {} are invalid (times out of order or outside the run, or more CPU time than time passed: a damaged stream) and were left out",
                t.tid
            )));
        }
    }
}

/// Leaves out an MPI rank's calls timed past a century of uptime and clock comparisons whose
/// offset is that large (the correction would move every call there); a call that exits
/// before it enters is kept (the job's matching needs it) with a duration of 0. Each is said
/// in a notice.
pub(crate) fn check_mpi_items(
    items: &mut Vec<trace::mpi::MpiItem>,
    stream: &str,
    notices: &mut Vec<Notice>,
) {
    use trace::mpi::MpiItem;
    let before = items.len();
    items.retain(|item| match item {
        MpiItem::Call(g) => g.enter <= MAX_MONOTONIC_NS && g.exit <= MAX_MONOTONIC_NS,
        MpiItem::Clock(c) => {
            c.ts <= MAX_MONOTONIC_NS && c.offset_ns.unsigned_abs() <= MAX_MONOTONIC_NS
        }
        _ => true,
    });
    let dropped = before - items.len();
    let mut backwards = 0;
    for item in items.iter_mut() {
        if let MpiItem::Call(g) = item {
            if g.exit < g.enter {
                g.exit = g.enter;
                backwards += 1;
            }
        }
    }
    if dropped > 0 {
        notices.push(Notice(format!(
            "{stream}: {dropped} MPI call(s) or clock comparison(s) are invalid (times or clock offsets past a century: a damaged stream) and were left out"
        )));
    }
    if backwards > 0 {
        notices.push(Notice(format!(
            "{stream}: {backwards} MPI call(s) exit before they enter (invalid: a damaged stream); their durations are counted as 0"
        )));
    }
}
