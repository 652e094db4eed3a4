use std::collections::HashMap;

use super::*;
use proto::Trace;

fn slice(id: u64, start_ns: u64, dur_ns: u64, name: &str) -> Slice {
    Slice {
        id,
        start_ns,
        dur_ns,
        name: name.into(),
        category: "lock".into(),
        args: vec![],
    }
}

fn one_thread(slices: Vec<Slice>) -> Timeline {
    Timeline {
        processes: vec![ProcessTrack {
            pid: 10,
            name: "app".into(),
            threads: vec![ThreadTrack {
                tid: 11,
                name: "worker".into(),
                slices,
                ..Default::default()
            }],
            ..Default::default()
        }],
        flows: vec![],
    }
}

fn encode(t: &Timeline, o: &Options) -> (Vec<u8>, Written) {
    let mut out = Vec::new();
    let w = write_with(t, o, &mut out).expect("write");
    (out, w)
}

fn decode(bytes: &[u8]) -> Trace {
    Trace::decode(bytes).expect("the output decodes as a Trace")
}

/// A decoded slice: (track uuid, name, start, end, depth).
type Decoded = (u64, String, u64, u64, usize);

/// Replays the events the way trace_processor does (a stack per track), checking the
/// incremental-state rules on the way, and returns the slices found.
fn replay(trace: &Trace) -> Vec<Decoded> {
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut stacks: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut last_ts = 0;
    let mut out = Vec::new();
    let mut cleared = false;
    for (i, p) in trace.packet.iter().enumerate() {
        assert_eq!(p.trusted_packet_sequence_id, Some(DEFAULT_SEQUENCE_ID));
        let flags = p.sequence_flags.unwrap_or(0);
        if i == 0 {
            assert_eq!(p.first_packet_on_sequence, Some(true));
            assert_ne!(flags & proto::SEQ_INCREMENTAL_STATE_CLEARED, 0);
        } else {
            assert_eq!(flags & proto::SEQ_INCREMENTAL_STATE_CLEARED, 0);
        }
        cleared |= flags & proto::SEQ_INCREMENTAL_STATE_CLEARED != 0;
        if let Some(d) = &p.interned_data {
            assert!(cleared);
            for n in &d.event_names {
                let old = names.insert(n.iid.unwrap(), n.name.clone().unwrap());
                assert!(old.is_none(), "iid interned twice");
            }
        }
        let Some(e) = &p.track_event else { continue };
        let ts = p.timestamp.expect("events have timestamps");
        assert!(ts >= last_ts, "packets are in time order");
        last_ts = ts;
        let stack = stacks.entry(e.track_uuid.unwrap()).or_default();
        match e.r#type {
            Some(proto::TYPE_SLICE_BEGIN) => {
                let name = match (e.name_iid, &e.name) {
                    (Some(iid), None) => {
                        assert_ne!(flags & proto::SEQ_NEEDS_INCREMENTAL_STATE, 0);
                        names[&iid].clone()
                    }
                    (None, Some(n)) => n.clone(),
                    other => panic!("a name or an iid, not {other:?}"),
                };
                stack.push((name, ts));
            }
            Some(proto::TYPE_SLICE_END) => {
                let (name, start) = stack.pop().expect("END matches an open slice");
                out.push((e.track_uuid.unwrap(), name, start, ts, stack.len()));
            }
            Some(proto::TYPE_COUNTER) => {
                assert!(e.double_counter_value.is_some() && e.counter_value.is_none());
                assert!(e.name.is_none() && e.name_iid.is_none());
            }
            t => panic!("unexpected type {t:?}"),
        }
    }
    assert!(stacks.values().all(|s| s.is_empty()), "every slice ends");
    out.sort();
    out
}

#[test]
fn empty_timeline_is_an_empty_trace() {
    let (bytes, w) = encode(&Timeline::default(), &Options::default());
    assert!(bytes.is_empty());
    assert_eq!(w, Written::default());
    assert!(decode(&bytes).packet.is_empty());
}

#[test]
fn descriptors_come_first_and_name_processes_and_threads() {
    let (bytes, w) = encode(&one_thread(vec![slice(1, 5, 10, "a")]), &Options::default());
    let t = decode(&bytes);
    assert_eq!(w.packets, 4);
    assert_eq!(t.packet.len(), 4);
    let p = t.packet[0].track_descriptor.as_ref().unwrap();
    assert_eq!(p.process.as_ref().unwrap().pid, Some(10));
    assert_eq!(
        p.process.as_ref().unwrap().process_name.as_deref(),
        Some("app")
    );
    let th = t.packet[1].track_descriptor.as_ref().unwrap();
    let td = th.thread.as_ref().unwrap();
    assert_eq!((td.pid, td.tid), (Some(10), Some(11)));
    assert_eq!(td.thread_name.as_deref(), Some("worker"));
    assert_ne!(p.uuid, th.uuid);
    assert_eq!(p.uuid.unwrap() >> 32, u64::from(DEFAULT_SEQUENCE_ID));
    let begin = t.packet[2].track_event.as_ref().unwrap();
    assert_eq!(begin.track_uuid, th.uuid);
    assert_eq!(t.packet[2].timestamp, Some(5));
    assert_eq!(t.packet[3].timestamp, Some(15));
}

#[test]
fn interning_sends_each_string_once() {
    let mut s = vec![];
    for i in 0..5 {
        let mut x = slice(i, i * 100, 50, "holding m");
        x.args = vec![("lock".into(), ArgValue::Pointer(0x1000))];
        s.push(x);
    }
    let t = one_thread(s);
    let (bytes, _) = encode(&t, &Options::default());
    let trace = decode(&bytes);
    let interned: Vec<_> = trace
        .packet
        .iter()
        .filter_map(|p| p.interned_data.as_ref())
        .collect();
    assert_eq!(interned.len(), 1, "only the first event introduces strings");
    assert_eq!(interned[0].event_names.len(), 1);
    assert_eq!(interned[0].event_categories.len(), 1);
    assert_eq!(interned[0].debug_annotation_names.len(), 1);
    assert_eq!(replay(&trace).len(), 5);

    let plain = Options {
        intern_strings: false,
        ..Options::default()
    };
    let (plain_bytes, _) = encode(&t, &plain);
    let plain_trace = decode(&plain_bytes);
    assert!(plain_trace.packet.iter().all(|p| p.interned_data.is_none()));
    assert!(plain_trace.packet[1..]
        .iter()
        .all(|p| p.sequence_flags.is_none()));
    assert!(plain_bytes.len() > bytes.len());
    assert_eq!(replay(&plain_trace), replay(&trace));
}

#[test]
fn nested_adjacent_and_zero_length_slices_share_the_thread_track() {
    let t = one_thread(vec![
        slice(1, 0, 100, "outer"),
        slice(2, 10, 20, "inner"),
        slice(3, 30, 0, "zero at inner's end"),
        slice(4, 100, 10, "adjacent"),
        slice(5, 100, 0, "zero at adjacent's start"),
        slice(6, 110, 0, "zero after"),
    ]);
    let (bytes, w) = encode(&t, &Options::default());
    assert_eq!(w.overlap_tracks, 0);
    let got = replay(&decode(&bytes));
    let names: Vec<(&str, u64, u64, usize)> = got
        .iter()
        .map(|(_, n, s, e, d)| (n.as_str(), *s, *e, *d))
        .collect();
    let mut want = vec![
        ("outer", 0, 100, 0),
        ("inner", 10, 30, 1),
        ("zero at inner's end", 30, 30, 1),
        ("adjacent", 100, 110, 0),
        ("zero at adjacent's start", 100, 100, 1),
        ("zero after", 110, 110, 0),
    ];
    let mut names = names;
    names.sort_by_key(|x| (x.1, x.0));
    want.sort_by_key(|x| (x.1, x.0));
    assert_eq!(names, want);
    assert!(got.iter().all(|g| g.0 == got[0].0), "one track");
}

#[test]
fn partial_overlap_goes_to_a_child_track() {
    let t = one_thread(vec![
        slice(1, 0, 100, "waiting A"),
        slice(2, 50, 100, "holding B"),
        slice(3, 60, 10, "nested (first fit: inside A)"),
        slice(4, 200, 10, "later"),
    ]);
    let (bytes, w) = encode(&t, &Options::default());
    assert_eq!(w.overlap_tracks, 1);
    let trace = decode(&bytes);
    let child = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .find(|d| d.parent_uuid.is_some())
        .expect("an overlap track");
    assert_eq!(child.name.as_deref(), Some("worker (overlap 1)"));
    let thread_uuid = child.parent_uuid.unwrap();
    for (track, name, ..) in replay(&trace) {
        let want = if name == "holding B" {
            child.uuid.unwrap()
        } else {
            thread_uuid
        };
        assert_eq!(track, want, "{name}");
    }
}

#[test]
fn input_order_does_not_matter() {
    let s = vec![
        slice(1, 0, 100, "a"),
        slice(2, 50, 100, "b"),
        slice(3, 10, 5, "c"),
        slice(4, 10, 5, "d"),
        slice(5, 300, 0, "e"),
    ];
    let mut r = s.clone();
    r.reverse();
    let (a, _) = encode(&one_thread(s), &Options::default());
    let (b, _) = encode(&one_thread(r), &Options::default());
    assert_eq!(a, b);
}

#[test]
fn random_slices_all_come_back_properly_nested() {
    // A small LCG keeps the test deterministic without a dependency.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |m: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % m
    };
    let slices: Vec<Slice> = (0..500)
        .map(|i| slice(i, next(10_000), next(4) * next(300), &format!("s{i}")))
        .collect();
    let t = one_thread(slices.clone());
    let (bytes, w) = encode(&t, &Options::default());
    assert_eq!(w.slices, 500);
    let got = replay(&decode(&bytes));
    assert_eq!(got.len(), 500);
    let mut by_name: HashMap<String, (u64, u64)> = HashMap::new();
    for (_, n, s, e, _) in got {
        by_name.insert(n, (s, e));
    }
    for s in &slices {
        assert_eq!(by_name[&s.name], (s.start_ns, s.start_ns + s.dur_ns));
    }
}

#[test]
fn flows_link_source_and_target_and_bad_ones_are_skipped() {
    let mut t = one_thread(vec![
        slice(1, 0, 10, "holding"),
        slice(2, 10, 5, "holding next"),
        slice(3, 20, 5, "x"),
    ]);
    t.flows = vec![
        Flow {
            from_slice: 1,
            to_slice: 2,
        },
        Flow {
            from_slice: 3,
            to_slice: 1,
        }, // backwards
        Flow {
            from_slice: 1,
            to_slice: 99,
        }, // unknown
        Flow {
            from_slice: 2,
            to_slice: 2,
        }, // self
    ];
    let (bytes, w) = encode(&t, &Options::default());
    assert_eq!((w.flows, w.flows_skipped), (1, 3));
    let trace = decode(&bytes);
    let begins: Vec<&TrackEvent> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_event.as_ref())
        .filter(|e| e.r#type == Some(proto::TYPE_SLICE_BEGIN))
        .collect();
    assert_eq!(begins[0].flow_ids.len(), 1);
    assert_ne!(begins[0].flow_ids[0], 0);
    assert_eq!(begins[1].terminating_flow_ids, begins[0].flow_ids);
    assert!(begins[2].flow_ids.is_empty() && begins[2].terminating_flow_ids.is_empty());
}

#[test]
fn unrepresentable_input_is_an_error_not_a_panic() {
    let huge = one_thread(vec![slice(1, u64::MAX - 1, 10, "overflow")]);
    assert!(matches!(
        write(&huge, Vec::new()),
        Err(ExportError::Invalid(_))
    ));
    let beyond_i64 = one_thread(vec![slice(1, i64::MAX as u64, 1, "past i64")]);
    assert!(write(&beyond_i64, Vec::new()).is_err());
    let at_max = one_thread(vec![slice(1, i64::MAX as u64 - 5, 5, "at i64::MAX")]);
    assert!(write(&at_max, Vec::new()).is_ok());
    let dup = one_thread(vec![slice(7, 0, 1, "a"), slice(7, 5, 1, "b")]);
    assert!(write(&dup, Vec::new()).is_err());
    let mut big_pid = one_thread(vec![]);
    big_pid.processes[0].pid = u32::MAX;
    assert!(write(&big_pid, Vec::new()).is_err());
    let zero_seq = Options {
        sequence_id: 0,
        ..Options::default()
    };
    assert!(write_with(&one_thread(vec![]), &zero_seq, Vec::new()).is_err());
}

#[test]
fn odd_but_valid_input_is_written() {
    let mut t = one_thread(vec![Slice {
        id: u64::MAX,
        start_ns: 0,
        dur_ns: 0,
        name: String::new(),
        category: String::new(),
        args: vec![
            ("".into(), ArgValue::Str("semi;colon\nnewline".into())),
            ("nan".into(), ArgValue::Double(f64::NAN)),
            ("max".into(), ArgValue::Uint(u64::MAX)),
            ("min".into(), ArgValue::Int(i64::MIN)),
            ("b".into(), ArgValue::Bool(false)),
        ],
    }]);
    t.processes[0].name.clear();
    t.processes[0].threads[0].name.clear();
    t.processes.push(ProcessTrack {
        pid: 0,
        name: "no threads".into(),
        ..Default::default()
    });
    let (bytes, w) = encode(&t, &Options::default());
    assert_eq!(w.slices, 1);
    let got = replay(&decode(&bytes));
    assert_eq!(got[0].1, "");
}

/// Writes into a sink that fails after a while: the error comes back as `Io`.
#[test]
fn io_errors_are_returned() {
    struct Failing;
    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let t = one_thread(vec![slice(1, 0, 1, "a")]);
    assert!(matches!(write(&t, Failing), Err(ExportError::Io(_))));
}

fn counter(name: &str, unit: &str, points: Vec<(u64, f64)>) -> Counter {
    Counter {
        name: name.into(),
        unit: unit.into(),
        points,
    }
}

/// Counter tracks: (uuid, parent uuid, name, unit name).
fn counter_tracks(trace: &Trace) -> Vec<(u64, u64, String, Option<String>)> {
    trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .filter_map(|d| {
            let c = d.counter.as_ref()?;
            Some((
                d.uuid.unwrap(),
                d.parent_uuid.expect("counters have a parent"),
                d.name.clone().unwrap_or_default(),
                c.unit_name.clone(),
            ))
        })
        .collect()
}

/// Counter values per track uuid, in packet order.
fn counter_values(trace: &Trace) -> HashMap<u64, Vec<(u64, f64)>> {
    let mut out: HashMap<u64, Vec<(u64, f64)>> = HashMap::new();
    for p in &trace.packet {
        let Some(e) = &p.track_event else { continue };
        if e.r#type == Some(proto::TYPE_COUNTER) {
            out.entry(e.track_uuid.unwrap())
                .or_default()
                .push((p.timestamp.unwrap(), e.double_counter_value.unwrap()));
        }
    }
    out
}

#[test]
fn counters_get_tracks_under_their_thread_or_process_and_sorted_points() {
    let mut t = one_thread(vec![slice(1, 10, 20, "a")]);
    t.processes[0].counters = vec![counter("active threads", "threads", vec![(0, 1.0)])];
    t.processes[0].threads[0].counters = vec![
        counter(
            "on CPU (%)",
            "%",
            vec![(30, 0.0), (10, 50.0), (20, 25.5), (20, 26.0)],
        ),
        counter("no unit", "", vec![]),
    ];
    let (bytes, w) = encode(&t, &Options::default());
    assert_eq!((w.counters, w.counter_points, w.slices), (3, 5, 1));
    let trace = decode(&bytes);
    let descriptors: Vec<&TrackDescriptor> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .collect();
    assert_eq!(
        descriptors.len(),
        5,
        "all tracks are described before any event"
    );
    assert!(trace.packet[..5]
        .iter()
        .all(|p| p.track_descriptor.is_some()));
    let (process_uuid, thread_uuid) = (descriptors[0].uuid.unwrap(), descriptors[2].uuid.unwrap());
    assert!(descriptors[2].thread.is_some());
    let tracks = counter_tracks(&trace);
    assert_eq!(
        tracks
            .iter()
            .map(|(_, parent, name, unit)| (*parent, name.as_str(), unit.as_deref()))
            .collect::<Vec<_>>(),
        [
            (process_uuid, "active threads", Some("threads")),
            (thread_uuid, "on CPU (%)", Some("%")),
            (thread_uuid, "no unit", None),
        ]
    );
    let values = counter_values(&trace);
    assert_eq!(values[&tracks[0].0], [(0, 1.0)]);
    // In time order; the two points at 20 in their given order.
    assert_eq!(
        values[&tracks[1].0],
        [(10, 50.0), (20, 25.5), (20, 26.0), (30, 0.0)]
    );
    assert!(!values.contains_key(&tracks[2].0));
    // The slice is unaffected, and the whole stream stays in time order.
    let got = replay(&trace);
    assert_eq!(got, [(thread_uuid, "a".to_string(), 10, 30, 0)]);
}

#[test]
fn counters_are_the_same_with_and_without_interning() {
    let mut t = one_thread(vec![slice(1, 10, 20, "a")]);
    t.processes[0].threads[0].counters = vec![counter("c", "%", vec![(5, 1.0), (15, 2.0)])];
    let plain = Options {
        intern_strings: false,
        ..Options::default()
    };
    let a = decode(&encode(&t, &Options::default()).0);
    let b = decode(&encode(&t, &plain).0);
    assert_eq!(counter_tracks(&a), counter_tracks(&b));
    assert_eq!(counter_values(&a), counter_values(&b));
    assert!(a
        .packet
        .iter()
        .filter(|p| p.track_event.as_ref().and_then(|e| e.r#type) == Some(proto::TYPE_COUNTER))
        .all(|p| p.interned_data.is_none()));
}

#[test]
fn unrepresentable_counter_points_are_errors() {
    for (ts, v) in [
        (i64::MAX as u64 + 1, 1.0),
        (0, f64::NAN),
        (0, f64::INFINITY),
        (0, f64::NEG_INFINITY),
    ] {
        let mut t = one_thread(vec![]);
        t.processes[0].threads[0].counters = vec![counter("c", "", vec![(ts, v)])];
        let e = write(&t, Vec::new()).unwrap_err();
        assert!(e.to_string().contains("tid 11"), "{e}");
        let mut p = one_thread(vec![]);
        p.processes[0].counters = vec![counter("c", "", vec![(ts, v)])];
        assert!(write(&p, Vec::new()).is_err());
    }
    let mut ok = one_thread(vec![]);
    ok.processes[0].threads[0].counters = vec![counter(
        "c",
        "",
        vec![(i64::MAX as u64, -0.0), (0, f64::MAX)],
    )];
    assert!(write(&ok, Vec::new()).is_ok());
}
