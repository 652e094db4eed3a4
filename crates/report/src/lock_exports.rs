//! The lock analysis in the formats other tools read: a Perfetto timeline (per thread, slices
//! "waiting for" and "holding" each lock, and a flow from each release to the waiter it let
//! in), and a contention profile (pprof with Go's `contentions/count` and `delay/nanoseconds`,
//! and the same as folded stacks for flame graphs).

use crate::locks::Naming;
use analysis::locks::{for_each_hold, previous_owners, HoldId, LockKey, LockReport, LockStream};
use export::perfetto::{
    ArgValue, Flow, ProcessTrack, Slice, StreamedSlice, StreamingTrace, ThreadTrack, Timeline,
};
use export::pprof::{Frame, Profile, Sample};
use std::collections::{BTreeMap, HashMap};

/// The slice ids of hold `i`: its wait (when contended) and its hold.
fn wait_slice(i: usize) -> u64 {
    2 * i as u64
}
fn hold_slice(i: usize) -> u64 {
    2 * i as u64 + 1
}

/// One process track per pid, one thread track per recorded thread, with its holds and waits.
pub fn timeline(r: &LockReport, naming: &Naming, process_name: &str) -> Timeline {
    let mut processes: BTreeMap<u32, ProcessTrack> = BTreeMap::new();
    let mut tracks: Vec<ThreadTrack> = r
        .threads
        .iter()
        .map(|t| ThreadTrack {
            tid: t.tid,
            name: if t.name.is_empty() {
                format!("thread {}", t.tid)
            } else {
                t.name.clone()
            },
            slices: Vec::new(),
            ..Default::default()
        })
        .collect();
    for (i, h) in r.holds.iter().enumerate() {
        let lock = naming.lock(h.lock);
        let site = naming.site(h.site);
        let args = vec![
            ("lock".to_string(), ArgValue::Str(lock.clone())),
            ("call_site".to_string(), ArgValue::Str(site.clone())),
            (
                "on_critical_path".to_string(),
                ArgValue::Bool(h.on_critical_path),
            ),
        ];
        let track = &mut tracks[h.thread];
        if h.contended {
            track.slices.push(Slice {
                id: wait_slice(i),
                start_ns: h.requested_ns,
                dur_ns: h.wait_ns(),
                name: format!("waiting for {lock}"),
                category: "lock wait".into(),
                args: args.clone(),
            });
        }
        track.slices.push(Slice {
            id: hold_slice(i),
            start_ns: h.acquired_ns,
            dur_ns: h.hold_ns(),
            name: format!("holding {lock} ({site})"),
            category: if h.after_cond {
                "lock hold after cond wait"
            } else {
                "lock hold"
            }
            .into(),
            args,
        });
    }
    for (t, track) in r.threads.iter().zip(tracks) {
        processes
            .entry(t.pid)
            .or_insert_with(|| ProcessTrack {
                pid: t.pid,
                name: process_name.to_string(),
                threads: Vec::new(),
                ..Default::default()
            })
            .threads
            .push(track);
    }
    // A release lets the next owner in: from the owner's hold to the waiter's hold.
    let flows = previous_owners(&r.holds)
        .into_iter()
        .enumerate()
        .filter_map(|(i, owner)| {
            owner.map(|o| Flow {
                from_slice: hold_slice(o),
                to_slice: hold_slice(i),
            })
        })
        .collect();
    Timeline {
        processes: processes.into_values().collect(),
        flows,
    }
}

/// What [`write_timeline`] needs of a streamed lock analysis
/// ([`analysis::locks::StreamedLocks`]): the report, and the wake-ups and critical path by
/// hold id.
#[derive(Debug, Clone, Copy)]
pub struct StreamedTimeline<'a> {
    pub report: &'a LockReport,
    pub wakeups: &'a [(HoldId, HoldId)],
    /// Sorted.
    pub path: &'a [HoldId],
}

/// The lock tracks of a Perfetto trace written straight from the streams, as [`timeline`]
/// draws them (per thread, "waiting for" and "holding" slices, a flow from each release to
/// the waiter it let in), in memory independent of the run's length: holds are paired and
/// written one by one ([`analysis::locks::for_each_hold`]); what is kept is the names of each
/// (lock, call site) and the wake-up pairs of the contended holds. Holds the report's filter
/// leaves out are not drawn; flows come from the owners found before the filter.
#[allow(clippy::too_many_arguments)]
pub fn write_timeline<W: std::io::Write>(
    trace: &mut StreamingTrace<W>,
    streams: &[LockStream<'_, '_>],
    clock: &analysis::clock::Conversion,
    locks: &StreamedTimeline<'_>,
    naming: &Naming,
    process_name: &str,
) -> Result<(), export::ExportError> {
    let r = locks.report;
    let mut tracks = Vec::with_capacity(r.threads.len());
    for t in &r.threads {
        let name = if t.name.is_empty() {
            format!("thread {}", t.tid)
        } else {
            t.name.clone()
        };
        tracks.push(trace.thread(t.pid, process_name, t.tid, &name)?);
    }
    let mut flows_out: HashMap<HoldId, Vec<u64>> = HashMap::new();
    let mut flows_in: HashMap<HoldId, u64> = HashMap::new();
    for (n, &(owner, waiter)) in locks.wakeups.iter().enumerate() {
        flows_out.entry(owner).or_default().push(n as u64);
        flows_in.insert(waiter, n as u64);
    }
    // "waiting for L", "holding L (site)", L and the site: made once per (lock, site).
    let mut names: HashMap<(LockKey, Option<u64>), [String; 4]> = HashMap::new();
    let mut last_start = vec![0u64; r.threads.len()];
    let mut failure = None;
    for_each_hold(streams, clock, r.sample_every, r.end_ns, |h, id| {
        if failure.is_some() {
            return;
        }
        let tid = r.threads.get(h.thread).map_or(0, |t| t.tid);
        if !r.filter.keeps(h, tid) {
            return;
        }
        let [waiting, holding, lock, site] = names.entry((h.lock, h.site)).or_insert_with(|| {
            let (lock, site) = (naming.lock(h.lock), naming.site(h.site));
            [
                format!("waiting for {lock}"),
                format!("holding {lock} ({site})"),
                lock,
                site,
            ]
        });
        let args = [
            ("lock", ArgValue::Str(lock.clone())),
            ("call_site", ArgValue::Str(site.clone())),
            (
                "on_critical_path",
                ArgValue::Bool(locks.path.binary_search(&id).is_ok()),
            ),
        ];
        // A track's slices go in order of start; a wait starts after the thread's previous
        // acquisition, so this only guards against a damaged stream.
        let mut slice = |start: u64, end: u64, name: &str, category, out: &[u64], inn: &[u64]| {
            let start = start.max(last_start[h.thread]);
            last_start[h.thread] = start;
            trace.slice(
                tracks[h.thread],
                &StreamedSlice {
                    start_ns: start,
                    dur_ns: end.saturating_sub(start),
                    name,
                    category,
                    args: &args,
                    flows_out: out,
                    flows_in: inn,
                },
            )
        };
        let mut result = Ok(());
        if h.contended {
            result = slice(
                h.requested_ns,
                h.acquired_ns,
                waiting,
                "lock wait",
                &[],
                &[],
            );
        }
        let out = flows_out.get(&id).map_or(&[][..], |v| v.as_slice());
        let inn = flows_in.get(&id).map(std::slice::from_ref).unwrap_or(&[]);
        let category = if h.after_cond {
            "lock hold after cond wait"
        } else {
            "lock hold"
        };
        result =
            result.and_then(|()| slice(h.acquired_ns, h.released_ns, holding, category, out, inn));
        if let Err(e) = result {
            failure = Some(e);
        }
    });
    failure.map_or(Ok(()), Err)
}

/// Contention per call site and lock: one sample per (lock, site) that waited, its stack the
/// site's frames (inlined ones included) under a root frame naming the lock.
pub fn profile(r: &LockReport, naming: &Naming) -> Profile {
    let mut p = Profile::lock_contention();
    p.duration_ns = r.duration_ns();
    p.comments
        .push("contend lock contention: waits from request to acquisition".into());
    for l in &r.locks {
        // pprof reads parentheses in a function name as C++ arguments: the bare name here.
        let lock = naming.lock_label(l.lock);
        for s in l.sites.iter().filter(|s| s.contended > 0) {
            let mut stack: Vec<Frame> = match s.site.and_then(|a| naming.frames.get(&a)) {
                Some(frames) => frames.clone(),
                None => vec![Frame {
                    function: naming.site(s.site),
                    file: None,
                    line: None,
                    address: s.site.unwrap_or(0),
                    module: None,
                }],
            };
            stack.push(Frame {
                function: format!("[lock {lock}]"),
                file: None,
                line: None,
                address: 0,
                module: None,
            });
            p.samples.push(Sample {
                stack,
                values: vec![s.contended as i64, s.wait_ns.min(i64::MAX as u64) as i64],
                labels: vec![("lock".into(), lock.clone())],
            });
        }
    }
    p
}

/// Wait-time histograms of one lock (thesis figures 4.1 and 4.2): all its contended waits and
/// those on the critical path, as an SVG.
pub fn wait_histogram(r: &LockReport, lock: analysis::locks::LockKey, naming: &Naming) -> String {
    let waits = |cp: bool| -> Vec<u64> {
        r.holds
            .iter()
            .filter(|h| h.lock == lock && h.contended && (!cp || h.on_critical_path))
            .map(|h| h.wait_ns())
            .collect()
    };
    let (all, critical) = (waits(false), waits(true));
    crate::svg::wait_histogram(
        &format!("waits for {}", naming.lock(lock)),
        &[
            crate::svg::Series {
                name: "all contended waits",
                durations_ns: &all,
                colour: "#4c78a8",
            },
            crate::svg::Series {
                name: "on the critical path",
                durations_ns: &critical,
                colour: "#e45756",
            },
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::locks::{analyze, Filter, InputEvent, InputThread, LockInput};
    use trace::locks::{CONTENDED, MODE_EXCLUSIVE};
    use trace::{EventKind, ObjectKind};

    fn ev(ts: u64, kind: EventKind, aux: u8) -> InputEvent {
        InputEvent {
            ts_ns: ts,
            kind,
            aux,
            object: Some((ObjectKind::Mutex, 0x1000)),
            site: Some(0xabc),
            value: 0,
        }
    }

    fn report() -> LockReport {
        let t = |tid, events| InputThread {
            pid: 7,
            tid,
            name: format!("w{tid}"),
            events,
            dropped: 0,
        };
        let input = LockInput {
            threads: vec![
                t(
                    1,
                    vec![
                        ev(0, EventKind::LockAcquired, MODE_EXCLUSIVE),
                        ev(100, EventKind::LockReleased, 0),
                    ],
                ),
                t(
                    2,
                    vec![
                        ev(10, EventKind::LockWait, MODE_EXCLUSIVE),
                        ev(100, EventKind::LockAcquired, MODE_EXCLUSIVE | CONTENDED),
                        ev(150, EventKind::LockReleased, 0),
                    ],
                ),
            ],
            span: None,
            sample_every: 1,
        };
        analyze(&input, &Filter::default())
    }

    #[test]
    fn timeline_has_waits_holds_and_the_wake_up_flow() {
        let r = report();
        let t = timeline(&r, &Naming::default(), "app");
        assert_eq!(t.processes.len(), 1);
        let w2 = &t.processes[0].threads[1];
        let names: Vec<&str> = w2.slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["waiting for 0x1000", "holding 0x1000 (0xabc)"]);
        assert_eq!((w2.slices[0].start_ns, w2.slices[0].dur_ns), (10, 90));
        assert_eq!(t.flows.len(), 1);
        assert_eq!((t.flows[0].from_slice, t.flows[0].to_slice), (1, 3));
    }

    #[test]
    fn profile_counts_contentions_and_delay_per_site() {
        let p = profile(&report(), &Naming::default());
        assert_eq!(p.samples.len(), 1);
        assert_eq!(p.samples[0].values, [1, 90]);
        assert_eq!(p.samples[0].stack.last().unwrap().function, "[lock 0x1000]");
    }
}

#[cfg(test)]
mod streamed_tests {
    use super::*;
    use analysis::locks::{
        analyze, analyze_streams, thread_input, Filter, LockInput, StreamOptions,
    };
    use export::perfetto::{proto, Options};
    use trace::locks::{CONTENDED, MODE_EXCLUSIVE};
    use trace::{
        ClockSource, EventKind, Header, ObjectKind, Record, Stream, StreamKind, StreamWriter,
    };

    /// (tid, [(ts, kind, aux, lock)]): T1 and T2 take two locks, nested and hand over hand,
    /// with waits.
    fn streams() -> Vec<Vec<u8>> {
        let (acq, rel, wait) = (
            EventKind::LockAcquired,
            EventKind::LockReleased,
            EventKind::LockWait,
        );
        let c = MODE_EXCLUSIVE | CONTENDED;
        type Events = Vec<(u64, EventKind, u8, u64)>;
        let threads: Vec<(u32, Events)> = vec![
            (
                1,
                vec![
                    (0, acq, 0, 0x10),
                    (5, acq, 0, 0x20),
                    (40, rel, 0, 0x10),
                    (50, rel, 0, 0x20),
                    (60, acq, 0, 0x10),
                    (70, rel, 0, 0x10),
                ],
            ),
            (
                2,
                vec![
                    (10, wait, 0, 0x10),
                    (40, acq, c, 0x10),
                    (45, wait, 0, 0x20),
                    (50, acq, c, 0x20),
                    (55, rel, 0, 0x20),
                    (58, rel, 0, 0x10),
                    (62, wait, 0, 0x10),
                    (70, acq, c, 0x10),
                ],
            ),
        ];
        threads
            .into_iter()
            .map(|(tid, events)| {
                let header = Header {
                    kind: StreamKind::Thread,
                    clock: ClockSource::Monotonic,
                    clock_hz: 1_000_000_000,
                    pid: 7,
                    tid,
                    rank: -1,
                    base_time: 0,
                };
                let mut w = StreamWriter::new(Vec::new(), &header, 4).unwrap();
                for (ts, kind, aux, lock) in events {
                    let obj = w.intern_object(lock, ObjectKind::Mutex);
                    let site = w.intern_site(0xabc);
                    w.push(&Record {
                        ts,
                        kind,
                        aux,
                        site,
                        obj,
                    });
                }
                w.finish_into(80).unwrap()
            })
            .collect()
    }

    /// (ts, begin?, name, tid) of each slice event, sorted, and the number of flows.
    fn events(bytes: &[u8]) -> (Vec<(u64, bool, String, i64)>, usize) {
        let packets = proto::Trace::read(bytes).unwrap().packet;
        let mut tid_of: HashMap<u64, i64> = HashMap::new();
        for p in &packets {
            if let Some(d) = &p.track_descriptor {
                if let Some(t) = &d.thread {
                    tid_of.insert(d.uuid.unwrap(), t.tid.unwrap());
                } else if let Some(parent) = d.parent_uuid {
                    let tid = tid_of[&parent];
                    tid_of.insert(d.uuid.unwrap(), tid);
                }
            }
        }
        let mut out = Vec::new();
        let mut flows = 0;
        for p in &packets {
            if let Some(e) = &p.track_event {
                let begin = e.r#type == Some(proto::TYPE_SLICE_BEGIN);
                flows += e.flow_ids.len();
                out.push((
                    p.timestamp.unwrap(),
                    begin,
                    e.name.clone().unwrap_or_default(),
                    tid_of[&e.track_uuid.unwrap()],
                ));
            }
        }
        out.sort();
        (out, flows)
    }

    #[test]
    fn streamed_lock_tracks_equal_the_in_memory_timeline() {
        let files = streams();
        let parsed: Vec<Stream<'_>> = files.iter().map(|f| Stream::parse(f).unwrap()).collect();
        let clock = analysis::clock::Conversion::nanoseconds();
        let names = ["w1".to_string(), "w2".to_string()];
        let input = LockInput {
            threads: parsed
                .iter()
                .zip(&names)
                .map(|(s, n)| thread_input(s, &clock, n))
                .collect(),
            span: None,
            sample_every: 1,
        };
        let options = Options {
            intern_strings: false,
            ..Options::default()
        };
        let r = analyze(&input, &Filter::default());
        let mut expected = Vec::new();
        export::perfetto::write_with(
            &timeline(&r, &Naming::default(), "app"),
            &options,
            &mut expected,
        )
        .unwrap();

        let lock_streams: Vec<LockStream<'_, '_>> = parsed
            .iter()
            .zip(&names)
            .map(|(stream, name)| LockStream { stream, name })
            .collect();
        let filter = Filter::default();
        let streamed = analyze_streams(
            &lock_streams,
            &StreamOptions {
                clock,
                span: None,
                sample_every: 1,
                filter: &filter,
            },
        );
        let mut got = Vec::new();
        let mut trace = StreamingTrace::new(&mut got, &options).unwrap();
        write_timeline(
            &mut trace,
            &lock_streams,
            &clock,
            &StreamedTimeline {
                report: &streamed.report,
                wakeups: &streamed.wakeups,
                path: &streamed.path,
            },
            &Naming::default(),
            "app",
        )
        .unwrap();
        let written = trace.finish().unwrap();
        assert!(written.flows >= 2, "{written:?}");
        assert_eq!(events(&got), events(&expected));
    }
}
