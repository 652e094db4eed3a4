//! The activity section: the sampler's streams (`sched-*`, `system`) decoded into each
//! thread's service-time samples and scheduler state changes, and their view.

use crate::error::{damaged, Error};
use trace::StreamFile;

/// Streams written by the sampler (`observe::sampler`), not the lock probe: by the role
/// meta.json gives them (or their name, for a stream it does not list).
pub fn is_sampler_stream(index: &trace::meta::StreamIndex<'_>, file: &str) -> bool {
    matches!(
        index.role(file),
        trace::layout::StreamRole::Sampler | trace::layout::StreamRole::System
    )
}

/// The sampler's streams, decoded, and their view.
#[derive(Debug)]
pub struct Activity {
    pub view: report::activity::ActivityView,
    pub threads: Vec<analysis::service::ThreadSamples>,
    pub states: Vec<(u32, Vec<trace::sched::StateChange>)>,
    /// When the recording started (CLOCK_MONOTONIC ns), if meta.json says.
    pub start: Option<u64>,
}

/// The service-time view of the sampler's streams.
pub(crate) fn activity(
    meta: &trace::Meta,
    streams: &[(String, StreamFile)],
    notices: &mut Vec<crate::Notice>,
) -> Result<Activity, Error> {
    let SamplerThreads { threads, states } = sampler_threads(meta, streams, notices)?;
    // Without the run's span, the first round starts one interval before the first sample
    // (from 0 it would credit every thread the machine's uptime).
    let start = meta.monotonic_span.map_or_else(
        || {
            let first = threads
                .iter()
                .filter_map(|t| t.samples.first().map(|s| s.ts))
                .min()
                .unwrap_or(0);
            first.saturating_sub(meta.sampling.as_ref().map_or(0, |s| s.interval_ns))
        },
        |[a, _]| a,
    );
    let service = analysis::service::service(&threads, start);
    Ok(Activity {
        view: report::activity::ActivityView::new(service, meta),
        threads,
        states,
        start: meta.monotonic_span.map(|[a, _]| a),
    })
}

/// The sampler's streams decoded: each thread's samples, and the state changes of those the
/// sched tracepoints followed (also the sharing section's concurrency).
pub(crate) struct SamplerThreads {
    pub threads: Vec<analysis::service::ThreadSamples>,
    pub states: Vec<(u32, Vec<trace::sched::StateChange>)>,
}

/// Samples that cannot be right are left out, with a notice (`plausible::check_samples`).
pub(crate) fn sampler_threads(
    meta: &trace::Meta,
    streams: &[(String, StreamFile)],
    notices: &mut Vec<crate::Notice>,
) -> Result<SamplerThreads, Error> {
    let mut threads = Vec::new();
    let mut states = Vec::new();
    let index = meta.stream_index();
    for (file, mapped) in streams.iter().filter(|(f, _)| is_sampler_stream(&index, f)) {
        let stream = mapped
            .parse()
            .map_err(|e| damaged(format!("{file}: {e}")))?;
        if let Some(t) = analysis::service::thread_samples(&stream, index.name(file)) {
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
    crate::plausible::check_samples(&mut threads, meta, notices);
    threads.retain(|t| !t.samples.is_empty());
    Ok(SamplerThreads { threads, states })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_streams_are_told_by_role_or_by_name_when_unlisted() {
        let mut meta = trace::Meta::new(vec!["prog".into()]);
        // Unlisted streams: the names each recorder has always written.
        assert!(is_sampler_stream(
            &meta.stream_index(),
            "streams/sched-12.cst"
        ));
        assert!(is_sampler_stream(
            &meta.stream_index(),
            "streams/system.cst"
        ));
        assert!(!is_sampler_stream(
            &meta.stream_index(),
            "streams/thread-12.cst"
        ));
        assert!(!is_sampler_stream(
            &meta.stream_index(),
            "streams/rank-0.cst"
        ));
        // A listed stream's role wins over its name.
        meta.streams.push(trace::meta::StreamEntry {
            file: "streams/sched-odd.cst".into(),
            kind: trace::format::StreamKind::Thread,
            pid: 1,
            tid: 1,
            rank: None,
            events: 0,
            dropped: 0,
            name: String::new(),
            role: Some(trace::StreamRole::Lock),
        });
        assert!(!is_sampler_stream(
            &meta.stream_index(),
            "streams/sched-odd.cst"
        ));
    }
}
