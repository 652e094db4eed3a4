//! The lock analysis in the formats other tools read: a Perfetto timeline (per thread, slices
//! "waiting for" and "holding" each lock, and a flow from each release to the waiter it let
//! in), and a contention profile (pprof with Go's `contentions/count` and `delay/nanoseconds`,
//! and the same as folded stacks for flame graphs).

use crate::locks::Naming;
use analysis::locks::{previous_owners, LockReport};
use export::perfetto::{ArgValue, Flow, ProcessTrack, Slice, ThreadTrack, Timeline};
use export::pprof::{Frame, Profile, Sample};
use std::collections::BTreeMap;

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
