//! Pure decoding of perf ring records into [`SchedEvent`]s, given the tracepoint formats.
//!
//! Every length and offset comes from data that could be wrong (a truncated record, a format
//! that does not match the records): each is checked, and a record that does not fit is an
//! error the caller counts, never a panic.

use super::format::{Field, FormatError, PrevState, StateDecoder, TracepointFormat};
use std::fmt;

/// `PERF_RECORD_LOST`: `{ u64 id; u64 lost; }`.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`.
pub const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_LOST_SAMPLES`: `{ u64 lost; }`.
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
/// Size of `struct perf_event_header` (`u32 type; u16 misc; u16 size`).
pub const HEADER_SIZE: usize = 8;

/// One scheduler event, from the `sched_switch`, `sched_wakeup(_new)`, `sched_process_fork`
/// and `sched_process_exit` tracepoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedEvent {
    /// On `cpu` at `ts_ns` (CLOCK_MONOTONIC ns), `prev_tid` stopped running in `prev_state`
    /// and `next_tid` started. Tid 0 is the CPU's idle task.
    Switch {
        ts_ns: u64,
        cpu: u32,
        prev_tid: u32,
        prev_state: PrevState,
        next_tid: u32,
    },
    /// `tid` was made runnable (sched_wakeup and sched_wakeup_new), to run on `target_cpu`;
    /// `waker_tid` the current task on the CPU that raised the event (from the sample's TID
    /// field; 0 when the wakeup came from idle or an interrupt of the idle task). Caveat:
    /// `sched_wakeup` of a wake-up queued to another CPU fires on that CPU, so `waker_tid` is
    /// then not the waker; see `SchedTraceOptions::waker_from_waking`.
    Wakeup {
        ts_ns: u64,
        tid: u32,
        target_cpu: u32,
        waker_tid: u32,
        new_task: bool,
    },
    /// sched_process_fork: `child_tid` created by `parent_tid` (threads too).
    Fork {
        ts_ns: u64,
        parent_tid: u32,
        child_tid: u32,
    },
    /// sched_process_exit.
    Exit { ts_ns: u64, tid: u32 },
}

impl SchedEvent {
    /// The event's time, CLOCK_MONOTONIC ns.
    pub fn ts_ns(&self) -> u64 {
        match *self {
            SchedEvent::Switch { ts_ns, .. }
            | SchedEvent::Wakeup { ts_ns, .. }
            | SchedEvent::Fork { ts_ns, .. }
            | SchedEvent::Exit { ts_ns, .. } => ts_ns,
        }
    }
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

fn err(why: impl Into<String>) -> DecodeError {
    DecodeError(why.into())
}

/// The fixed part of a `PERF_RECORD_SAMPLE` with `sample_type = TID | TIME | CPU | RAW`, and
/// its raw tracepoint data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample<'a> {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub raw: &'a [u8],
}

/// A record from the ring, as far as this reader cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingRecord<'a> {
    Sample(Sample<'a>),
    /// The kernel dropped this many records (ring full).
    Lost(u64),
    /// Any other record type (throttle, …): skipped.
    Other(u32),
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(s.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_ne_bytes(s.try_into().ok()?))
}

/// Parses one whole record, header included (`record.len()` is the header's `size`).
pub fn parse_record(record: &[u8]) -> Result<RingRecord<'_>, DecodeError> {
    let ty = u32_at(record, 0).ok_or_else(|| err("record shorter than its header"))?;
    let body = &record[HEADER_SIZE.min(record.len())..];
    match ty {
        PERF_RECORD_SAMPLE => parse_sample(body).map(RingRecord::Sample),
        PERF_RECORD_LOST => u64_at(body, 8)
            .map(RingRecord::Lost)
            .ok_or_else(|| err("PERF_RECORD_LOST shorter than 16 bytes")),
        PERF_RECORD_LOST_SAMPLES => u64_at(body, 0)
            .map(RingRecord::Lost)
            .ok_or_else(|| err("PERF_RECORD_LOST_SAMPLES shorter than 8 bytes")),
        other => Ok(RingRecord::Other(other)),
    }
}

/// Parses a sample body (after the header): `u32 pid, tid; u64 time; u32 cpu, res; u32 size;
/// u8 data[size]`.
pub fn parse_sample(body: &[u8]) -> Result<Sample<'_>, DecodeError> {
    const FIXED: usize = 4 + 4 + 8 + 4 + 4 + 4;
    if body.len() < FIXED {
        return Err(err(format!(
            "sample of {} bytes is shorter than its {FIXED}-byte fixed part",
            body.len()
        )));
    }
    let pid = u32_at(body, 0).unwrap_or(0);
    let tid = u32_at(body, 4).unwrap_or(0);
    let time = u64_at(body, 8).unwrap_or(0);
    let cpu = u32_at(body, 16).unwrap_or(0);
    let size = u32_at(body, 24).unwrap_or(0) as usize;
    let raw = body.get(FIXED..FIXED.saturating_add(size)).ok_or_else(|| {
        err(format!(
            "raw size {size} exceeds the {} bytes left in the sample",
            body.len() - FIXED
        ))
    })?;
    Ok(Sample {
        pid,
        tid,
        time,
        cpu,
        raw,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Switch,
    Wakeup { new_task: bool },
    Fork,
    Exit,
}

/// Field layouts of the five tracepoints, resolved by name from their formats, and the
/// `prev_state` decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedDecoder {
    common_type: Field,
    ids: [(u64, Kind); 5],
    prev_pid: Field,
    prev_state: Field,
    next_pid: Field,
    /// sched_wakeup and sched_wakeup_new: (pid, target_cpu); target_cpu is absent before 2.6.36.
    wakeup: (Field, Option<Field>),
    wakeup_new: (Field, Option<Field>),
    parent_pid: Field,
    child_pid: Field,
    exit_pid: Field,
    state: StateDecoder,
}

/// The formats `SchedDecoder::new` needs, one per tracepoint.
#[derive(Debug, Clone, Copy)]
pub struct SchedFormats<'a> {
    pub switch: &'a TracepointFormat,
    /// `sched_wakeup`, or `sched_waking` (same fields) for the true waker.
    pub wakeup: &'a TracepointFormat,
    pub wakeup_new: &'a TracepointFormat,
    pub fork: &'a TracepointFormat,
    pub exit: &'a TracepointFormat,
}

impl SchedDecoder {
    /// Resolves every field the decoder reads; an error names the tracepoint and field missing.
    pub fn new(f: SchedFormats<'_>) -> Result<SchedDecoder, FormatError> {
        let common_type = f.switch.int_field("common_type")?;
        for tp in [f.wakeup, f.wakeup_new, f.fork, f.exit] {
            if tp.int_field("common_type")? != common_type {
                return Err(FormatError(format!(
                    "common_type of {} is not where sched_switch has it",
                    tp.name
                )));
            }
        }
        let ids = [
            (f.switch.id, Kind::Switch),
            (f.wakeup.id, Kind::Wakeup { new_task: false }),
            (f.wakeup_new.id, Kind::Wakeup { new_task: true }),
            (f.fork.id, Kind::Fork),
            (f.exit.id, Kind::Exit),
        ];
        for (i, (id, _)) in ids.iter().enumerate() {
            if ids[..i].iter().any(|(other, _)| other == id) {
                return Err(FormatError(format!(
                    "two sched tracepoints share the ID {id}"
                )));
            }
        }
        let wake = |tp: &TracepointFormat| -> Result<(Field, Option<Field>), FormatError> {
            Ok((tp.int_field("pid")?, tp.int_field("target_cpu").ok()))
        };
        Ok(SchedDecoder {
            common_type,
            ids,
            prev_pid: f.switch.int_field("prev_pid")?,
            prev_state: f.switch.int_field("prev_state")?,
            next_pid: f.switch.int_field("next_pid")?,
            wakeup: wake(f.wakeup)?,
            wakeup_new: wake(f.wakeup_new)?,
            parent_pid: f.fork.int_field("parent_pid")?,
            child_pid: f.fork.int_field("child_pid")?,
            exit_pid: f.exit.int_field("pid")?,
            state: StateDecoder::from_print_fmt(&f.switch.print_fmt),
        })
    }

    /// The `prev_state` decoder in use.
    pub fn state_decoder(&self) -> &StateDecoder {
        &self.state
    }

    /// Decodes one sample's raw tracepoint data.
    pub fn decode(&self, s: &Sample<'_>) -> Result<SchedEvent, DecodeError> {
        let ty = self.common_type.read_int(s.raw).ok_or_else(|| {
            err(format!(
                "raw data of {} bytes has no common_type",
                s.raw.len()
            ))
        })?;
        let kind = self
            .ids
            .iter()
            .find(|(id, _)| i128::from(*id) == ty)
            .map(|&(_, k)| k)
            .ok_or_else(|| err(format!("common_type {ty} is none of the sched tracepoints")))?;
        let ts_ns = s.time;
        Ok(match kind {
            Kind::Switch => SchedEvent::Switch {
                ts_ns,
                cpu: s.cpu,
                prev_tid: tid(self.prev_pid, s.raw, "prev_pid")?,
                prev_state: self.state.decode(
                    // prev_state is a `long`: its bits, whatever the sign.
                    self.prev_state
                        .read_int(s.raw)
                        .ok_or_else(|| err("prev_state lies outside the raw data"))?
                        as u64,
                ),
                next_tid: tid(self.next_pid, s.raw, "next_pid")?,
            },
            Kind::Wakeup { new_task } => {
                let (pid, target) = if new_task {
                    self.wakeup_new
                } else {
                    self.wakeup
                };
                let target_cpu = match target {
                    Some(f) => tid(f, s.raw, "target_cpu")?,
                    None => s.cpu,
                };
                SchedEvent::Wakeup {
                    ts_ns,
                    tid: tid(pid, s.raw, "pid")?,
                    target_cpu,
                    waker_tid: s.tid,
                    new_task,
                }
            }
            Kind::Fork => SchedEvent::Fork {
                ts_ns,
                parent_tid: tid(self.parent_pid, s.raw, "parent_pid")?,
                child_tid: tid(self.child_pid, s.raw, "child_pid")?,
            },
            Kind::Exit => SchedEvent::Exit {
                ts_ns,
                tid: tid(self.exit_pid, s.raw, "pid")?,
            },
        })
    }

    /// Parses and decodes one whole ring record: `Ok(None)` for records that carry no event
    /// (lost counts are returned through `lost`).
    pub fn decode_record(
        &self,
        record: &[u8],
        lost: &mut u64,
    ) -> Result<Option<SchedEvent>, DecodeError> {
        match parse_record(record)? {
            RingRecord::Sample(s) => self.decode(&s).map(Some),
            RingRecord::Lost(n) => {
                *lost = lost.saturating_add(n);
                Ok(None)
            }
            RingRecord::Other(_) => Ok(None),
        }
    }
}

/// A pid or CPU field: must be a non-negative value that fits `i32` (pid_t), else hostile.
fn tid(f: Field, raw: &[u8], name: &str) -> Result<u32, DecodeError> {
    let v = f
        .read_int(raw)
        .ok_or_else(|| err(format!("{name} lies outside the raw data")))?;
    if (0..=i128::from(i32::MAX)).contains(&v) {
        Ok(v as u32)
    } else {
        Err(err(format!("{name} {v} is not a valid id")))
    }
}
