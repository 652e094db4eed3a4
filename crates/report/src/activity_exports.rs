//! Thread activity as a Perfetto timeline: from the sampler's service-time samples, per
//! thread a counter of its share of a CPU and one of its time waiting for a CPU, and per
//! process the number of active threads; from the sched tracepoints, where recorded, each
//! thread's exact states as slices. [`merge`] puts this next to the lock timeline
//! (`lock_exports::timeline`) in one trace.
//!
//! # Counters
//!
//! A sample covers the interval since the thread's previous sample: on-CPU and run-queue
//! time over the interval's length, in %, drawn from the interval's start (Perfetto holds a
//! counter's value until its next point). The first sample's interval starts when the
//! thread was first seen. A thread born during the recording is first seen at the round of
//! its first sample, which holds all it used since birth: its interval then starts at the
//! previous sampling round (of any thread), as `analysis::service` counts it; in the very
//! first round, at the recording's start where that is known ([`timeline_since`]), and
//! otherwise that sample is left out. Each counter ends with a 0 at the thread's last
//! sample, so that the last step ends there.
//!
//! "active threads" (per process) is, per sampling round, Σ (on CPU + waiting for a CPU)
//! over the process's threads divided by the time since the previous round: the average
//! number of threads that were running or runnable. It ends with a 0 at the last round.
//!
//! # States
//!
//! Each state change starts a slice that lasts until the thread's next change, category
//! "sched": "Running" (argument `cpu` when known), "Runnable" (argument `woken_by`, the
//! waker's tid, when known), "Sleeping", "Disk sleep", "Stopped"; nothing after "Dead".
//! A thread's last state lasts until it was last seen (its last sample or when it was
//! found gone) or, when that is not later, until the last time anything was recorded.
//! Zero-length states (two changes at one instant) are left out. The state changes of a
//! thread that has no samples go to the one process when there is only one, and are left
//! out otherwise (their process is unknown).

use analysis::service::ThreadSamples;
use export::perfetto::{ArgValue, Counter, Flow, ProcessTrack, Slice, ThreadTrack, Timeline};
use std::collections::{BTreeMap, HashMap, HashSet};
use trace::sched::{State, StateChange};

/// Name of each thread's on-CPU counter.
pub const ON_CPU: &str = "on CPU (%)";
/// Name of each thread's run-queue counter.
pub const WAITING: &str = "waiting for a CPU (%)";
/// Name of each process's counter of running or runnable threads.
pub const ACTIVE_THREADS: &str = "active threads";
/// Category of the state slices.
pub const CATEGORY: &str = "sched";

/// A thread's track name: "name (tid)".
fn thread_name(name: &str, tid: u32) -> String {
    if name.is_empty() {
        format!("thread ({tid})")
    } else {
        format!("{name} ({tid})")
    }
}

/// The slice name of a state, `None` for "Dead" (nothing follows it).
fn state_name(s: State) -> Option<&'static str> {
    Some(match s {
        State::Running => "Running",
        State::Runnable => "Runnable",
        State::Sleeping => "Sleeping",
        State::DiskSleep => "Disk sleep",
        State::Stopped => "Stopped",
        State::Dead => return None,
    })
}

/// Builds the processes in ascending pid order, each named `program`, their threads in the
/// order first met (samples first, then state changes).
#[derive(Default)]
struct Builder {
    processes: BTreeMap<u32, ProcessTrack>,
    /// tid → pid of the thread's track.
    pid_of: HashMap<u32, u32>,
}

impl Builder {
    fn thread(&mut self, pid: u32, tid: u32, name: &str, program: &str) -> &mut ThreadTrack {
        self.pid_of.entry(tid).or_insert(pid);
        let process = self.processes.entry(pid).or_insert_with(|| ProcessTrack {
            pid,
            name: program.to_string(),
            ..Default::default()
        });
        let i = match process.threads.iter().position(|t| t.tid == tid) {
            Some(i) => i,
            None => {
                process.threads.push(ThreadTrack {
                    tid,
                    name: thread_name(name, tid),
                    ..Default::default()
                });
                process.threads.len() - 1
            }
        };
        &mut process.threads[i]
    }
}

/// Adds `points` to the counter `name` of `counters` (creating it), unless there are none.
fn add_points(counters: &mut Vec<Counter>, name: &str, unit: &str, points: Vec<(u64, f64)>) {
    if points.is_empty() {
        return;
    }
    match counters
        .iter_mut()
        .find(|c| c.name == name && c.unit == unit)
    {
        Some(c) => c.points.extend(points),
        None => counters.push(Counter {
            name: name.to_string(),
            unit: unit.to_string(),
            points,
        }),
    }
}

/// The activity timeline: one process track per pid (named `program`), one thread track per
/// tid ("name (tid)") with its "on CPU (%)" and "waiting for a CPU (%)" counters and, where
/// `states` has its changes, its state slices; per process an "active threads" counter. See
/// the module documentation for the rules. Slice ids are 0, 1, 2, ... in track order; there
/// are no flows.
pub fn timeline(
    threads: &[ThreadSamples],
    states: &[(u32, Vec<StateChange>)],
    program: &str,
) -> Timeline {
    timeline_since(threads, states, program, None)
}

/// [`timeline`] of a recording that started at `start` (CLOCK_MONOTONIC ns, as meta.json's
/// `monotonic_span`): a thread first seen in the first sampling round (already running when
/// a late first round came) has that sample's interval start there, as `analysis::service`
/// counts it, instead of being left out of its counters.
pub fn timeline_since(
    threads: &[ThreadSamples],
    states: &[(u32, Vec<StateChange>)],
    program: &str,
    start: Option<u64>,
) -> Timeline {
    // The sampling rounds: every sample's time, and each baseline's first look.
    let mut rounds: Vec<u64> = threads
        .iter()
        .flat_map(|t| {
            let baseline = t.baseline.then_some(t.first_seen);
            t.samples.iter().map(|s| s.ts).chain(baseline)
        })
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    let previous_round = |ts: u64| {
        let i = rounds.partition_point(|&r| r < ts);
        i.checked_sub(1)
            .map(|i| rounds[i])
            .or(start.filter(|&s| s < ts))
    };

    let mut b = Builder::default();
    // Per pid, per round: Σ (on CPU + waiting), ns.
    let mut active: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
    // Per tid, when it was last seen.
    let mut seen_until: HashMap<u32, u64> = HashMap::new();
    for t in threads {
        let mut samples: Vec<_> = t.samples.iter().collect();
        samples.sort_by_key(|s| s.ts);
        let (mut on, mut waiting) = (Vec::new(), Vec::new());
        let mut previous: Option<u64> = None;
        for s in &samples {
            let start = match previous {
                Some(p) => Some(p),
                None if t.first_seen < s.ts => Some(t.first_seen),
                None => previous_round(s.ts),
            };
            previous = Some(s.ts);
            let Some(start) = start.filter(|&p| p < s.ts) else {
                continue;
            };
            let length = (s.ts - start) as f64;
            on.push((start, 100.0 * s.on_cpu_ns as f64 / length));
            waiting.push((start, 100.0 * s.runq_wait_ns as f64 / length));
            let used = active.entry(t.pid).or_default().entry(s.ts).or_default();
            *used = used.saturating_add(s.on_cpu_ns.saturating_add(s.runq_wait_ns));
        }
        if let (Some(last), false) = (samples.last(), on.is_empty()) {
            on.push((last.ts, 0.0));
            waiting.push((last.ts, 0.0));
        }
        let until = samples.last().map(|s| s.ts).max(t.last_seen);
        if let Some(u) = until {
            let e = seen_until.entry(t.tid).or_insert(u);
            *e = (*e).max(u);
        }
        let track = b.thread(t.pid, t.tid, &t.name, program);
        add_points(&mut track.counters, ON_CPU, "%", on);
        add_points(&mut track.counters, WAITING, "%", waiting);
    }
    for (pid, per_round) in active {
        let mut points: Vec<(u64, f64)> = per_round
            .iter()
            .filter_map(|(&ts, &ns)| {
                let start = previous_round(ts)?;
                Some((start, ns as f64 / (ts - start) as f64))
            })
            .collect();
        if let (Some((&last, _)), false) = (per_round.last_key_value(), points.is_empty()) {
            points.push((last, 0.0));
        }
        let process = b
            .processes
            .get_mut(&pid)
            .expect("a process of sampled threads");
        add_points(&mut process.counters, ACTIVE_THREADS, "threads", points);
    }

    // States: the last time anything was recorded ends what nothing else ends.
    let recording_end = threads
        .iter()
        .flat_map(|t| {
            let last = t.samples.iter().map(|s| s.ts).max();
            [Some(t.first_seen), t.last_seen, last]
        })
        .chain(
            states
                .iter()
                .flat_map(|(_, c)| c.iter().map(|c| Some(c.ts))),
        )
        .flatten()
        .max()
        .unwrap_or(0);
    let only_pid = {
        let pids: HashSet<u32> = threads.iter().map(|t| t.pid).collect();
        (pids.len() == 1).then(|| *pids.iter().next().unwrap())
    };
    let mut next_id = 0u64;
    for (tid, changes) in states {
        let Some(pid) = b.pid_of.get(tid).copied().or(only_pid) else {
            continue;
        };
        let end_of_thread = seen_until.get(tid).copied();
        let mut changes: Vec<&StateChange> = changes.iter().collect();
        changes.sort_by_key(|c| c.ts); // stable: changes at one instant keep their order
        let track = b.thread(pid, *tid, "", program);
        for (i, c) in changes.iter().enumerate() {
            let Some(name) = state_name(c.state) else {
                continue;
            };
            let end = match changes.get(i + 1) {
                Some(n) => n.ts,
                None => end_of_thread.filter(|&e| e > c.ts).unwrap_or(recording_end),
            };
            if end <= c.ts {
                continue;
            }
            let mut args = Vec::new();
            match (c.state, c.cpu) {
                (State::Running, Some(cpu)) => {
                    args.push(("cpu".to_string(), ArgValue::Uint(u64::from(cpu))))
                }
                (State::Runnable, _) if c.waker != 0 => {
                    args.push(("woken_by".to_string(), ArgValue::Uint(u64::from(c.waker))))
                }
                _ => {}
            }
            track.slices.push(Slice {
                id: 0, // numbered below, in track order
                start_ns: c.ts,
                dur_ns: end - c.ts,
                name: name.to_string(),
                category: CATEGORY.to_string(),
                args,
            });
        }
    }
    let mut processes: Vec<ProcessTrack> = b.processes.into_values().collect();
    for s in processes
        .iter_mut()
        .flat_map(|p| p.threads.iter_mut())
        .flat_map(|t| t.slices.iter_mut())
    {
        s.id = next_id;
        next_id += 1;
    }
    Timeline {
        processes,
        flows: Vec::new(),
    }
}

/// One timeline with everything of `a` and `b`: processes merged by pid and, within one,
/// threads by tid (slices and counters of both; a counter of the same name and unit in both
/// becomes one with the points of both); names from `a` unless empty there. `a`'s slice ids
/// and flows are kept as they are; `b`'s slices are renumbered to ids `a` does not use
/// (counting up from `a`'s largest id + 1: an offset when `b`'s ids are 0, 1, 2, ...) and
/// its flows follow them. A flow of `b` naming a slice `b` does not have is dropped (the
/// writer would skip it anyway).
pub fn merge(mut a: Timeline, b: Timeline) -> Timeline {
    let used: HashSet<u64> = a
        .processes
        .iter()
        .flat_map(|p| p.threads.iter())
        .flat_map(|t| t.slices.iter().map(|s| s.id))
        .collect();
    let mut next = used.iter().max().map_or(0, |m| m.wrapping_add(1));
    let mut renumbered: HashMap<u64, u64> = HashMap::new();
    let mut fresh = |old: u64| {
        while used.contains(&next) {
            next = next.wrapping_add(1);
        }
        let id = next;
        next = next.wrapping_add(1);
        renumbered.entry(old).or_insert(id);
        id
    };
    let mut b_processes = b.processes;
    for s in b_processes
        .iter_mut()
        .flat_map(|p| p.threads.iter_mut())
        .flat_map(|t| t.slices.iter_mut())
    {
        s.id = fresh(s.id);
    }
    a.flows.extend(b.flows.iter().filter_map(|f| {
        Some(Flow {
            from_slice: *renumbered.get(&f.from_slice)?,
            to_slice: *renumbered.get(&f.to_slice)?,
        })
    }));
    for pb in b_processes {
        let Some(pa) = a.processes.iter_mut().find(|p| p.pid == pb.pid) else {
            a.processes.push(pb);
            continue;
        };
        if pa.name.is_empty() {
            pa.name = pb.name;
        }
        for c in pb.counters {
            add_points(&mut pa.counters, &c.name, &c.unit, c.points);
        }
        for tb in pb.threads {
            let Some(ta) = pa.threads.iter_mut().find(|t| t.tid == tb.tid) else {
                pa.threads.push(tb);
                continue;
            };
            if ta.name.is_empty() {
                ta.name = tb.name;
            }
            ta.slices.extend(tb.slices);
            for c in tb.counters {
                add_points(&mut ta.counters, &c.name, &c.unit, c.points);
            }
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::sched::ThreadSample;

    fn sample(ts: u64, on_cpu_ns: u64, runq_wait_ns: u64) -> ThreadSample {
        ThreadSample {
            ts,
            on_cpu_ns,
            runq_wait_ns,
            ..Default::default()
        }
    }

    fn change(ts: u64, state: State, cpu: Option<u32>, waker: u32) -> StateChange {
        StateChange {
            ts,
            state,
            cpu,
            waker,
        }
    }

    /// Rounds at 100 (a baseline look), 110, 120 and 140 (130 missed). Thread 1 was there
    /// before; thread 2 is born in the round at 110; thread 3 (another process) is seen
    /// first at 100, with no round before.
    fn threads() -> Vec<ThreadSamples> {
        vec![
            ThreadSamples {
                pid: 1,
                tid: 1,
                name: "main".into(),
                first_seen: 100,
                baseline: true,
                last_seen: Some(150),
                samples: vec![sample(110, 5, 2), sample(120, 10, 0), sample(140, 4, 6)],
            },
            ThreadSamples {
                pid: 1,
                tid: 2,
                name: String::new(),
                first_seen: 110,
                samples: vec![sample(120, 10, 10), sample(110, 3, 1)], // out of order
                ..Default::default()
            },
            ThreadSamples {
                pid: 8,
                tid: 8,
                name: "other".into(),
                first_seen: 100,
                samples: vec![sample(100, 50, 50), sample(110, 10, 0)],
                ..Default::default()
            },
        ]
    }

    fn counter<'a>(counters: &'a [Counter], name: &str) -> &'a Counter {
        counters.iter().find(|c| c.name == name).unwrap()
    }

    fn close(got: &[(u64, f64)], want: &[(u64, f64)]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(
                g.0 == w.0 && (g.1 - w.1).abs() < 1e-9,
                "{got:?} vs {want:?}"
            );
        }
    }

    #[test]
    fn counters_are_shares_of_each_interval_from_its_start() {
        let t = timeline(&threads(), &[], "app");
        assert_eq!(t.processes.len(), 2);
        let p = &t.processes[0];
        assert_eq!((p.pid, p.name.as_str()), (1, "app"));
        let names: Vec<&str> = p.threads.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["main (1)", "thread (2)"]);

        let main = &p.threads[0];
        assert_eq!(main.counters.len(), 2);
        assert_eq!(counter(&main.counters, ON_CPU).unit, "%");
        // [100,110): 5 of 10 ns; [110,120): 10 of 10; [120,140): 4 of 20; ends at 140.
        close(
            &counter(&main.counters, ON_CPU).points,
            &[(100, 50.0), (110, 100.0), (120, 20.0), (140, 0.0)],
        );
        close(
            &counter(&main.counters, WAITING).points,
            &[(100, 20.0), (110, 0.0), (120, 30.0), (140, 0.0)],
        );
        // Born during [100,110): its first sample covers that round.
        let born = &p.threads[1];
        close(
            &counter(&born.counters, ON_CPU).points,
            &[(100, 30.0), (110, 100.0), (120, 0.0)],
        );
        close(
            &counter(&born.counters, WAITING).points,
            &[(100, 10.0), (110, 100.0), (120, 0.0)],
        );
        // Σ (on + waiting) / round length: (7 + 4) / 10, (10 + 20) / 10, 10 / 20.
        let active = counter(&p.counters, ACTIVE_THREADS);
        assert_eq!(active.unit, "threads");
        close(
            &active.points,
            &[(100, 1.1), (110, 3.0), (120, 0.5), (140, 0.0)],
        );

        // Seen first in the first round: that sample has no interval and is left out.
        let other = &t.processes[1];
        close(
            &counter(&other.threads[0].counters, ON_CPU).points,
            &[(100, 100.0), (110, 0.0)],
        );
        close(
            &counter(&other.counters, ACTIVE_THREADS).points,
            &[(100, 1.0), (110, 0.0)],
        );
        assert!(t.flows.is_empty());
        assert!(t
            .processes
            .iter()
            .flat_map(|p| &p.threads)
            .all(|t| t.slices.is_empty()));
    }

    #[test]
    fn with_the_recording_start_a_first_round_sample_covers_the_time_since() {
        let t = timeline_since(&threads(), &[], "app", Some(50));
        // [50,100): 50 of 50 ns, then [100,110): 10 of 10.
        let other = &t.processes[1];
        close(
            &counter(&other.threads[0].counters, ON_CPU).points,
            &[(50, 100.0), (100, 100.0), (110, 0.0)],
        );
        close(
            &counter(&other.counters, ACTIVE_THREADS).points,
            &[(50, 2.0), (100, 1.0), (110, 0.0)],
        );
        // Nothing else changes.
        assert_eq!(
            t.processes[0],
            timeline(&threads(), &[], "app").processes[0]
        );
    }

    #[test]
    fn a_thread_without_usable_samples_has_no_counters() {
        let t = timeline(
            &[ThreadSamples {
                pid: 3,
                tid: 3,
                name: "t".into(),
                first_seen: 100,
                samples: vec![sample(100, 1, 1)],
                ..Default::default()
            }],
            &[],
            "app",
        );
        assert!(t.processes[0].counters.is_empty());
        assert!(t.processes[0].threads[0].counters.is_empty());
        assert_eq!(timeline(&[], &[], "app"), Timeline::default());
    }

    /// A slice's name, start, duration and arguments.
    type Brief<'a> = (&'a str, u64, u64, Vec<(String, ArgValue)>);

    /// A thread's slices, by start.
    fn slices(t: &ThreadTrack) -> Vec<Brief<'_>> {
        let mut v: Vec<_> = t
            .slices
            .iter()
            .map(|s| (s.name.as_str(), s.start_ns, s.dur_ns, s.args.clone()))
            .collect();
        v.sort_by_key(|s| s.1);
        v
    }

    #[test]
    fn state_changes_become_slices_until_the_next_change() {
        let changes = vec![
            change(100, State::Running, Some(2), 0),
            change(104, State::Runnable, None, 7),
            change(105, State::Running, Some(3), 0),
            change(108, State::Sleeping, None, 0),
            change(112, State::Runnable, None, 0), // zero-length: left out
            change(112, State::DiskSleep, None, 0),
            change(115, State::Running, None, 0),
            change(118, State::Stopped, None, 0),
            change(130, State::Dead, None, 0),
        ];
        let mut shuffled = changes.clone();
        shuffled.swap(0, 3);
        let states = vec![
            (1, shuffled),
            // The last state lasts until the thread was last seen (150).
            (2, vec![change(135, State::Sleeping, None, 0)]),
        ];
        let mut ts = threads();
        ts[1].last_seen = Some(150);
        let t = timeline(&ts, &states, "app");
        let main = &t.processes[0].threads[0];
        let uint = |k: &str, v: u64| vec![(k.to_string(), ArgValue::Uint(v))];
        assert_eq!(
            slices(main),
            vec![
                ("Running", 100, 4, uint("cpu", 2)),
                ("Runnable", 104, 1, uint("woken_by", 7)),
                ("Running", 105, 3, uint("cpu", 3)),
                ("Sleeping", 108, 4, vec![]),
                ("Disk sleep", 112, 3, vec![]),
                ("Running", 115, 3, vec![]),
                ("Stopped", 118, 12, vec![]),
            ]
        );
        assert!(main.slices.iter().all(|s| s.category == "sched"));
        assert_eq!(
            slices(&t.processes[0].threads[1]),
            vec![("Sleeping", 135, 15, vec![])]
        );
        // Ids are unique.
        let ids: HashSet<u64> = t
            .processes
            .iter()
            .flat_map(|p| &p.threads)
            .flat_map(|t| t.slices.iter().map(|s| s.id))
            .collect();
        assert_eq!(ids.len(), 8);
    }

    #[test]
    fn states_of_an_unsampled_thread_go_to_the_only_process() {
        let mut ts = threads();
        ts.truncate(2); // only pid 1
        let states = vec![(
            9,
            vec![
                change(100, State::Running, Some(0), 0),
                change(101, State::Sleeping, None, 0),
            ],
        )];
        let t = timeline(&ts, &states, "app");
        let unsampled = t.processes[0].threads.iter().find(|t| t.tid == 9).unwrap();
        assert_eq!(unsampled.name, "thread (9)");
        assert!(unsampled.counters.is_empty());
        // Its last state lasts until the last time anything was recorded (150).
        assert_eq!(
            slices(unsampled),
            vec![
                (
                    "Running",
                    100,
                    1,
                    vec![("cpu".to_string(), ArgValue::Uint(0))]
                ),
                ("Sleeping", 101, 49, vec![]),
            ]
        );
        // With two processes, its process is unknown: left out.
        let t = timeline(&threads(), &states, "app");
        assert!(t
            .processes
            .iter()
            .all(|p| p.threads.iter().all(|t| t.tid != 9)));
    }

    fn locks() -> Timeline {
        let slice = |id, start_ns, name: &str| Slice {
            id,
            start_ns,
            dur_ns: 5,
            name: name.into(),
            category: "lock hold".into(),
            args: vec![],
        };
        Timeline {
            processes: vec![ProcessTrack {
                pid: 1,
                name: "app".into(),
                threads: vec![
                    ThreadTrack {
                        tid: 1,
                        name: "main".into(),
                        slices: vec![slice(1, 100, "holding m")],
                        ..Default::default()
                    },
                    ThreadTrack {
                        tid: 5,
                        name: "w5".into(),
                        slices: vec![slice(0, 102, "waiting for m"), slice(3, 105, "holding m")],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            flows: vec![Flow {
                from_slice: 1,
                to_slice: 3,
            }],
        }
    }

    fn all_slices(t: &Timeline) -> HashMap<u64, (u32, String, u64)> {
        t.processes
            .iter()
            .flat_map(|p| &p.threads)
            .flat_map(|th| {
                th.slices
                    .iter()
                    .map(move |s| (s.id, (th.tid, s.name.clone(), s.start_ns)))
            })
            .collect()
    }

    #[test]
    fn merge_keeps_ids_unique_and_flows_pointing_at_the_same_slices() {
        let states = vec![(
            1,
            vec![
                change(100, State::Running, Some(0), 0),
                change(110, State::Sleeping, None, 0),
            ],
        )];
        let activity = timeline(&threads(), &states, "app");
        let mut activity_with_flow = activity.clone();
        activity_with_flow.flows = vec![
            Flow {
                from_slice: 0,
                to_slice: 1,
            },
            Flow {
                from_slice: 0,
                to_slice: 99, // not a slice of the activity timeline: dropped
            },
        ];
        let (a, b) = (locks(), activity_with_flow);
        let merged = merge(a.clone(), b.clone());

        // Processes by pid, threads by tid: pid 1 has main (lock and state slices, counters),
        // w5 and the activity's thread 2; pid 8 comes from the activity timeline.
        let pids: Vec<u32> = merged.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [1, 8]);
        let p1 = &merged.processes[0];
        let tids: Vec<u32> = p1.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, [1, 5, 2]);
        assert_eq!(p1.threads[0].name, "main", "the first timeline's name");
        assert_eq!(p1.threads[0].slices.len(), 3);
        assert_eq!(p1.threads[0].counters.len(), 2);
        assert_eq!(p1.counters, activity.processes[0].counters);

        // Every slice kept, ids unique; the lock timeline's ids unchanged.
        let (sa, sb, sm) = (all_slices(&a), all_slices(&b), all_slices(&merged));
        assert_eq!(sm.len(), sa.len() + sb.len());
        for (id, s) in &sa {
            assert_eq!(&sm[id], s);
        }
        // Flows of both still join the same slices.
        assert_eq!(merged.flows.len(), 2);
        assert_eq!(merged.flows[0], a.flows[0]);
        let f = merged.flows[1];
        assert_eq!(sm[&f.from_slice], sb[&0]);
        assert_eq!(sm[&f.to_slice], sb[&1]);
        // The activity's ids were 0.. : offset past the lock timeline's largest (3).
        assert_eq!((f.from_slice, f.to_slice), (4, 5));

        // And the writer takes it: no duplicate ids, every flow written.
        let w = export::perfetto::write(&merged, Vec::new()).unwrap();
        assert_eq!((w.flows, w.flows_skipped), (2, 0));
        assert_eq!(w.counters, 8);

        // The other way round works as well; the first timeline's flows are kept as they
        // are, so its dangling one is now the writer's to skip.
        let w = export::perfetto::write(&merge(b, a), Vec::new()).unwrap();
        assert_eq!((w.flows, w.flows_skipped), (2, 1));
    }

    #[test]
    fn merge_with_a_real_lock_timeline() {
        use analysis::locks::{analyze, Filter, InputEvent, InputThread, LockInput};
        use trace::locks::{CONTENDED, MODE_EXCLUSIVE};
        use trace::{EventKind, ObjectKind};
        let ev = |ts_ns, kind, aux| InputEvent {
            ts_ns,
            kind,
            aux,
            object: Some((ObjectKind::Mutex, 0x1000)),
            site: Some(0xabc),
            value: 0,
        };
        let input = LockInput {
            threads: vec![
                InputThread {
                    pid: 1,
                    tid: 1,
                    name: "main".into(),
                    events: vec![
                        ev(100, EventKind::LockAcquired, MODE_EXCLUSIVE),
                        ev(110, EventKind::LockReleased, 0),
                    ],
                    dropped: 0,
                },
                InputThread {
                    pid: 1,
                    tid: 2,
                    name: "w2".into(),
                    events: vec![
                        ev(105, EventKind::LockWait, MODE_EXCLUSIVE),
                        ev(110, EventKind::LockAcquired, MODE_EXCLUSIVE | CONTENDED),
                        ev(115, EventKind::LockReleased, 0),
                    ],
                    dropped: 0,
                },
            ],
            span: None,
            sample_every: 1,
        };
        let report = analyze(&input, &Filter::default());
        let locks = crate::lock_exports::timeline(&report, &crate::locks::Naming::default(), "app");
        assert_eq!(locks.flows.len(), 1);
        let states = vec![(2, vec![change(100, State::Running, Some(1), 0)])];
        let merged = merge(locks.clone(), timeline(&threads(), &states, "app"));
        let p1 = &merged.processes[0];
        assert_eq!(p1.threads.len(), 2, "threads 1 and 2 merged by tid");
        assert_eq!(p1.threads[1].slices.len(), 3, "wait, hold, and its state");
        assert_eq!(merged.flows, locks.flows);
        let w = export::perfetto::write(&merged, Vec::new()).unwrap();
        assert_eq!((w.flows, w.flows_skipped), (1, 0));
    }
}
