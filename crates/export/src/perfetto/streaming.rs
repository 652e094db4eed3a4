//! A Perfetto trace written as it is produced: thread tracks whose slices are handed over one
//! by one (each track's in order of start) and written at once, for timelines too long to
//! hold (every lock hold of a long run). Memory is per track: its open slices and lanes.
//!
//! The packets are those [`write_with`](super::write_with) writes (same descriptors,
//! interning, flags, overlap tracks), but not sorted by time across tracks: a slice's end
//! is written when a later slice of its track starts or at [`StreamingTrace::finish`].
//! trace_processor sorts a trace's events by time when it loads it, so the result is the
//! same trace. In-memory timelines (activity, MPI) can be written into the same trace with
//! [`StreamingTrace::timeline`].

use super::*;

/// A thread track of a [`StreamingTrace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackId(usize);

/// One slice handed to [`StreamingTrace::slice`].
#[derive(Debug, Clone, Default)]
pub struct StreamedSlice<'s> {
    pub start_ns: u64,
    pub dur_ns: u64,
    pub name: &'s str,
    pub category: &'s str,
    pub args: &'s [(&'s str, ArgValue)],
    /// Flows (arrows) leaving this slice and arriving at it, by the caller's numbers: a flow
    /// is drawn from the slice naming it in `flows_out` to the one naming it in `flows_in`.
    /// The source must start first. Numbers below 2^31.
    pub flows_out: &'s [u64],
    pub flows_in: &'s [u64],
}

struct Track {
    uuid: u64,
    tid: u32,
    name: String,
    /// Per lane: its uuid and the ends of its open slices, innermost last.
    lanes: Vec<(u64, Vec<u64>)>,
    last_start: u64,
}

/// A Perfetto trace being written; see the module documentation.
pub struct StreamingTrace<W: Write> {
    w: PacketWriter<W>,
    options: Options,
    interner: Interner,
    next_uuid: u64,
    processes: HashMap<u32, u64>,
    tracks: Vec<Track>,
    written: Written,
}

impl<W: Write> StreamingTrace<W> {
    pub fn new(out: W, options: &Options) -> Result<Self, ExportError> {
        if options.sequence_id == 0 {
            return Err(ExportError::invalid("the packet sequence id must not be 0"));
        }
        Ok(StreamingTrace {
            w: PacketWriter::new(out, options.sequence_id),
            options: options.clone(),
            interner: Interner::default(),
            next_uuid: 0,
            processes: HashMap::new(),
            tracks: Vec::new(),
            written: Written::default(),
        })
    }

    fn new_uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        (u64::from(self.options.sequence_id) << 32) | self.next_uuid
    }

    /// Writes a whole in-memory timeline into the trace, as [`write_with`] would.
    pub fn timeline(&mut self, timeline: &Timeline) -> Result<(), ExportError> {
        let written = encode_timeline(
            timeline,
            &self.options,
            &mut self.w,
            &mut self.interner,
            &mut self.next_uuid,
        )?;
        let all = &mut self.written;
        all.slices += written.slices;
        all.overlap_tracks += written.overlap_tracks;
        all.flows += written.flows;
        all.flows_skipped += written.flows_skipped;
        all.counters += written.counters;
        all.counter_points += written.counter_points;
        Ok(())
    }

    /// Declares a thread's track (and its process's, the first time that pid is seen).
    pub fn thread(
        &mut self,
        pid: u32,
        process_name: &str,
        tid: u32,
        thread_name: &str,
    ) -> Result<TrackId, ExportError> {
        let pid32 = to_i32(pid, "pid")?;
        let tid32 = to_i32(tid, "tid")?;
        if !self.processes.contains_key(&pid) {
            let uuid = self.new_uuid();
            self.processes.insert(pid, uuid);
            self.w.write(TracePacket {
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(uuid),
                    process: Some(ProcessDescriptor {
                        pid: Some(pid32),
                        process_name: non_empty(process_name),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })?;
        }
        let uuid = self.new_uuid();
        self.w.write(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid32),
                    tid: Some(i64::from(tid32)),
                    thread_name: non_empty(thread_name),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        self.tracks.push(Track {
            uuid,
            tid,
            name: thread_name.to_string(),
            lanes: vec![(uuid, Vec::new())],
            last_start: 0,
        });
        Ok(TrackId(self.tracks.len() - 1))
    }

    /// Writes a slice of `track`. A track's slices must come in order of start; one that
    /// partially overlaps an open slice goes to an overlap track, as [`write_with`] lays out.
    pub fn slice(&mut self, track: TrackId, s: &StreamedSlice<'_>) -> Result<(), ExportError> {
        let end = s.start_ns.checked_add(s.dur_ns);
        let Some(end) = end.filter(|&e| e <= i64::MAX as u64) else {
            return Err(ExportError::invalid(format!(
                "slice {:?} ends after {} ns, beyond Perfetto's signed 64-bit timestamps",
                s.name,
                i64::MAX
            )));
        };
        let t = self
            .tracks
            .get(track.0)
            .ok_or_else(|| ExportError::invalid("no such track"))?;
        if s.start_ns < t.last_start {
            return Err(ExportError::invalid(format!(
                "slice {:?} on tid {} starts before the previous one",
                s.name, t.tid
            )));
        }
        // Close what ended by now, on every lane; then the first lane it nests in.
        let mut ends: Vec<(u64, u64)> = Vec::new();
        let mut lane = None;
        for (i, (uuid, stack)) in self.tracks[track.0].lanes.iter_mut().enumerate() {
            while let Some(&top) = stack.last() {
                if top > s.start_ns {
                    break;
                }
                stack.pop();
                ends.push((*uuid, top));
            }
            if lane.is_none() && stack.last().is_none_or(|&top| top >= end) {
                lane = Some(i);
            }
        }
        for (uuid, ts) in ends {
            self.end(uuid, ts)?;
        }
        let lane = match lane {
            Some(i) => i,
            None => self.new_lane(track.0)?,
        };
        let t = &mut self.tracks[track.0];
        t.last_start = s.start_ns;
        t.lanes[lane].1.push(end);
        let uuid = t.lanes[lane].0;
        self.begin(uuid, s)
    }

    fn new_lane(&mut self, track: usize) -> Result<usize, ExportError> {
        let uuid = self.new_uuid();
        let t = &mut self.tracks[track];
        let n = t.lanes.len();
        let name = format!(
            "{} (overlap {n})",
            if t.name.is_empty() {
                format!("thread {}", t.tid)
            } else {
                t.name.clone()
            }
        );
        let parent = t.uuid;
        t.lanes.push((uuid, Vec::new()));
        self.written.overlap_tracks += 1;
        self.w.write(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                name: Some(name),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        Ok(n)
    }

    fn flow_id(&self, n: u64) -> u64 {
        // Above the ids of in-memory timelines' flows (their index + 1).
        (u64::from(self.options.sequence_id) << 32) | 0x8000_0000 | (n & 0x7fff_ffff)
    }

    fn begin(&mut self, uuid: u64, s: &StreamedSlice<'_>) -> Result<(), ExportError> {
        let mut te = TrackEvent {
            track_uuid: Some(uuid),
            r#type: Some(proto::TYPE_SLICE_BEGIN),
            ..Default::default()
        };
        let mut interned = InternedData::default();
        let intern = self.options.intern_strings;
        if intern {
            te.name_iid = Some(self.interner.name(s.name, &mut interned));
            if !s.category.is_empty() {
                te.category_iids = vec![self.interner.category(s.category, &mut interned)];
            }
        } else {
            te.name = Some(s.name.to_string());
            if !s.category.is_empty() {
                te.categories = vec![s.category.to_string()];
            }
        }
        te.debug_annotations = s
            .args
            .iter()
            .map(|(name, value)| {
                let mut a = annotation(value);
                if intern {
                    a.name_iid = Some(self.interner.arg_name(name, &mut interned));
                } else {
                    a.name = Some(name.to_string());
                }
                a
            })
            .collect();
        te.flow_ids = s.flows_out.iter().map(|&n| self.flow_id(n)).collect();
        te.terminating_flow_ids = s.flows_in.iter().map(|&n| self.flow_id(n)).collect();
        self.written.slices += 1;
        self.written.flows += s.flows_in.len();
        let has_interned = interned != InternedData::default();
        self.w.write(TracePacket {
            timestamp: Some(s.start_ns),
            track_event: Some(te),
            interned_data: has_interned.then_some(interned),
            sequence_flags: intern.then_some(proto::SEQ_NEEDS_INCREMENTAL_STATE),
            ..Default::default()
        })
    }

    fn end(&mut self, uuid: u64, ts: u64) -> Result<(), ExportError> {
        self.w.write(TracePacket {
            timestamp: Some(ts),
            track_event: Some(TrackEvent {
                track_uuid: Some(uuid),
                r#type: Some(proto::TYPE_SLICE_END),
                ..Default::default()
            }),
            sequence_flags: self
                .options
                .intern_strings
                .then_some(proto::SEQ_NEEDS_INCREMENTAL_STATE),
            ..Default::default()
        })
    }

    /// Ends the open slices and the trace.
    pub fn finish(mut self) -> Result<Written, ExportError> {
        let mut ends = Vec::new();
        for t in &mut self.tracks {
            for (uuid, stack) in &mut t.lanes {
                while let Some(top) = stack.pop() {
                    ends.push((*uuid, top));
                }
            }
        }
        for (uuid, ts) in ends {
            self.end(uuid, ts)?;
        }
        let mut written = self.written;
        written.packets = self.w.finish()?;
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Vec<TracePacket> {
        let trace = proto::Trace::decode(bytes).expect("a Trace");
        trace.packet
    }

    #[test]
    fn slices_nest_overlaps_get_a_lane_and_flows_join() {
        let mut out = Vec::new();
        let mut t = StreamingTrace::new(&mut out, &Options::default()).unwrap();
        let a = t.thread(7, "app", 8, "w8").unwrap();
        let b = t.thread(7, "app", 9, "w9").unwrap();
        let slice = |start, dur, name, out: &'static [u64], inn: &'static [u64]| StreamedSlice {
            start_ns: start,
            dur_ns: dur,
            name,
            category: "lock hold",
            args: &[],
            flows_out: out,
            flows_in: inn,
        };
        t.slice(a, &slice(0, 100, "outer", &[1], &[])).unwrap();
        t.slice(a, &slice(10, 20, "inner", &[], &[])).unwrap();
        t.slice(a, &slice(50, 100, "crossing", &[], &[])).unwrap(); // ends after outer
        t.slice(b, &slice(100, 10, "woken", &[], &[1])).unwrap();
        assert!(t.slice(a, &slice(5, 1, "late", &[], &[])).is_err());
        let written = t.finish().unwrap();
        assert_eq!(
            (written.slices, written.overlap_tracks, written.flows),
            (4, 1, 1)
        );
        let packets = decode(&out);
        let begins = packets
            .iter()
            .filter(|p| {
                p.track_event
                    .as_ref()
                    .is_some_and(|e| e.r#type == Some(proto::TYPE_SLICE_BEGIN))
            })
            .count();
        let ends = packets
            .iter()
            .filter(|p| {
                p.track_event
                    .as_ref()
                    .is_some_and(|e| e.r#type == Some(proto::TYPE_SLICE_END))
            })
            .count();
        assert_eq!((begins, ends), (4, 4));
        let flow_out = packets
            .iter()
            .find_map(|p| p.track_event.as_ref().filter(|e| !e.flow_ids.is_empty()))
            .unwrap();
        let flow_in = packets
            .iter()
            .find_map(|p| {
                p.track_event
                    .as_ref()
                    .filter(|e| !e.terminating_flow_ids.is_empty())
            })
            .unwrap();
        assert_eq!(flow_out.flow_ids, flow_in.terminating_flow_ids);
    }
}
