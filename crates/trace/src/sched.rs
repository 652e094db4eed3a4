//! Scheduler records: what `contend record`'s sampler and the sched-tracepoint reader write
//! into thread streams, and how they are read back. One definition for both sides.
//!
//! A sample of one thread is three records with the same time: [`EventKind::CpuSample`],
//! [`EventKind::WaitSample`] and [`EventKind::SwitchSample`]; durations are 40-bit
//! nanoseconds (about 18 minutes between two samples) split over `obj` and `aux`.

use crate::format::{EventKind, Record};

/// Largest duration a sample record holds: 2^40 - 1 ns.
pub const MAX_SAMPLE_NS: u64 = (1 << 40) - 1;
/// A count or CPU that does not fit 16 bits is stored as this (0xFFFF means "unknown").
pub const SATURATED_U16: u16 = 0xFFFE;
/// `site` of a sample whose CPU is unknown.
pub const NO_CPU: u16 = 0xFFFF;

/// One thread's scheduler statistics since its previous sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadSample {
    /// The sample's time (the stream's clock).
    pub ts: u64,
    /// On-CPU time since the previous sample, ns.
    pub on_cpu_ns: u64,
    /// Runnable but waiting on a run queue since the previous sample, ns.
    pub runq_wait_ns: u64,
    pub voluntary_switches: u32,
    pub involuntary_switches: u32,
    /// The CPU it last ran on.
    pub last_cpu: Option<u32>,
    /// The state letter at the sample (`R`, `S`, `D`, ...), or 0 when unknown.
    pub state: u8,
}

fn split40(ns: u64) -> (u32, u8) {
    let v = ns.min(MAX_SAMPLE_NS);
    (v as u32, (v >> 32) as u8)
}

fn join40(obj: u32, aux: u8) -> u64 {
    u64::from(obj) | (u64::from(aux) << 32)
}

fn saturate16(v: u64) -> u16 {
    v.min(u64::from(SATURATED_U16)) as u16
}

impl ThreadSample {
    /// The three records of this sample, in order.
    pub fn encode(&self) -> [Record; 3] {
        let (cpu_lo, cpu_hi) = split40(self.on_cpu_ns);
        let (wait_lo, wait_hi) = split40(self.runq_wait_ns);
        [
            Record {
                ts: self.ts,
                kind: EventKind::CpuSample,
                aux: cpu_hi,
                site: self.last_cpu.map_or(NO_CPU, |c| saturate16(u64::from(c))),
                obj: cpu_lo,
            },
            Record {
                ts: self.ts,
                kind: EventKind::WaitSample,
                aux: wait_hi,
                site: saturate16(u64::from(self.involuntary_switches)),
                obj: wait_lo,
            },
            Record {
                ts: self.ts,
                kind: EventKind::SwitchSample,
                aux: self.state,
                site: crate::format::NO_SITE,
                obj: self.voluntary_switches,
            },
        ]
    }
}

/// Reassembles samples from a stream's records (other kinds are ignored). A `CpuSample` starts
/// a sample; the `WaitSample` and `SwitchSample` of the same time complete it. A sample whose
/// companions were dropped keeps what it has (their fields stay 0).
#[derive(Debug, Default)]
pub struct SampleDecoder {
    current: Option<ThreadSample>,
}

impl SampleDecoder {
    /// Feeds one record; returns a finished sample when `r` starts the next one.
    pub fn push(&mut self, r: &Record) -> Option<ThreadSample> {
        match r.kind {
            EventKind::CpuSample => {
                let done = self.current.take();
                self.current = Some(ThreadSample {
                    ts: r.ts,
                    on_cpu_ns: join40(r.obj, r.aux),
                    last_cpu: (r.site != NO_CPU).then_some(u32::from(r.site)),
                    ..Default::default()
                });
                done
            }
            EventKind::WaitSample => {
                if let Some(s) = self.current.as_mut().filter(|s| s.ts == r.ts) {
                    s.runq_wait_ns = join40(r.obj, r.aux);
                    s.involuntary_switches = u32::from(r.site);
                }
                None
            }
            EventKind::SwitchSample => {
                if let Some(s) = self.current.as_mut().filter(|s| s.ts == r.ts) {
                    s.voluntary_switches = r.obj;
                    s.state = r.aux;
                }
                None
            }
            _ => None,
        }
    }

    /// The last sample, at the end of the stream.
    pub fn finish(&mut self) -> Option<ThreadSample> {
        self.current.take()
    }
}

/// The system's load at a sample (the system stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnableSample {
    pub ts: u64,
    /// Tasks running or waiting for a CPU, system-wide (`procs_running`).
    pub runnable: u32,
    /// Tasks in uninterruptible sleep (`procs_blocked`).
    pub blocked: u32,
}

impl RunnableSample {
    pub fn encode(&self) -> Record {
        Record {
            ts: self.ts,
            kind: EventKind::RunnableSample,
            aux: 0,
            site: saturate16(u64::from(self.blocked)),
            obj: self.runnable,
        }
    }

    pub fn decode(r: &Record) -> Option<RunnableSample> {
        (r.kind == EventKind::RunnableSample).then_some(RunnableSample {
            ts: r.ts,
            runnable: r.obj,
            blocked: u32::from(r.site),
        })
    }
}

/// A thread's scheduler state, from the sched tracepoints.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// On a CPU.
    Running,
    /// Ready to run, waiting for a CPU (preempted or woken).
    Runnable,
    /// Blocked: interruptible sleep (a lock, a condition, a timer, I/O readiness).
    Sleeping,
    /// Blocked: uninterruptible sleep (usually disk I/O).
    DiskSleep,
    /// Stopped or traced.
    Stopped,
    /// Exited.
    Dead,
}

impl State {
    pub fn to_u8(self) -> u8 {
        match self {
            State::Running => 0,
            State::Runnable => 1,
            State::Sleeping => 2,
            State::DiskSleep => 3,
            State::Stopped => 4,
            State::Dead => 5,
        }
    }

    pub fn from_u8(v: u8) -> Option<State> {
        Some(match v {
            0 => State::Running,
            1 => State::Runnable,
            2 => State::Sleeping,
            3 => State::DiskSleep,
            4 => State::Stopped,
            5 => State::Dead,
            _ => return None,
        })
    }

    /// Blocked (idle in the thesis's sense): neither running nor waiting for a CPU.
    pub fn is_blocked(self) -> bool {
        matches!(self, State::Sleeping | State::DiskSleep | State::Stopped)
    }
}

/// A state change of the stream's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    pub ts: u64,
    pub state: State,
    /// The CPU, when the thread starts running.
    pub cpu: Option<u32>,
    /// The thread that woke it, for a wake-up (0 when unknown).
    pub waker: u32,
}

impl StateChange {
    pub fn encode(&self) -> Record {
        Record {
            ts: self.ts,
            kind: EventKind::SchedState,
            aux: self.state.to_u8(),
            site: self.cpu.map_or(NO_CPU, |c| saturate16(u64::from(c))),
            obj: self.waker,
        }
    }

    /// `None` for other kinds and for state numbers this build does not know.
    pub fn decode(r: &Record) -> Option<StateChange> {
        if r.kind != EventKind::SchedState {
            return None;
        }
        Some(StateChange {
            ts: r.ts,
            state: State::from_u8(r.aux)?,
            cpu: (r.site != NO_CPU).then_some(u32::from(r.site)),
            waker: r.obj,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_round_trips_and_pins_its_bytes() {
        let s = ThreadSample {
            ts: 1_000,
            on_cpu_ns: 0x12_3456_789A,
            runq_wait_ns: 5_000_000,
            voluntary_switches: 7,
            involuntary_switches: 70_000,
            last_cpu: Some(3),
            state: b'S',
        };
        let records = s.encode();
        let bytes = records[0].encode();
        // ts, kind 15, aux = bits 32..39, site = CPU 3, obj = bits 0..31.
        assert_eq!(
            bytes,
            [0xE8, 0x03, 0, 0, 0, 0, 0, 0, 15, 0x12, 3, 0, 0x9A, 0x78, 0x56, 0x34]
        );
        let mut d = SampleDecoder::default();
        let mut out = Vec::new();
        for r in &records {
            out.extend(d.push(r));
        }
        out.extend(d.finish());
        let expected = ThreadSample {
            involuntary_switches: u32::from(SATURATED_U16),
            ..s
        };
        assert_eq!(out, vec![expected]);
    }

    #[test]
    fn durations_saturate_and_missing_companions_leave_zeros() {
        let s = ThreadSample {
            ts: 5,
            on_cpu_ns: u64::MAX,
            last_cpu: None,
            ..Default::default()
        };
        let [cpu, _, _] = s.encode();
        let next = ThreadSample {
            ts: 6,
            on_cpu_ns: 1,
            ..Default::default()
        }
        .encode();
        let mut d = SampleDecoder::default();
        assert_eq!(d.push(&cpu), None);
        let first = d.push(&next[0]).unwrap();
        assert_eq!(first.on_cpu_ns, MAX_SAMPLE_NS);
        assert_eq!(first.last_cpu, None);
        assert_eq!(first.runq_wait_ns, 0);
        assert_eq!(d.finish().unwrap().on_cpu_ns, 1);
    }

    #[test]
    fn state_changes_and_load_round_trip() {
        for state in [
            State::Running,
            State::Runnable,
            State::Sleeping,
            State::DiskSleep,
            State::Stopped,
            State::Dead,
        ] {
            let c = StateChange {
                ts: 9,
                state,
                cpu: Some(1),
                waker: 42,
            };
            assert_eq!(StateChange::decode(&c.encode()), Some(c));
        }
        let mut r = StateChange {
            ts: 9,
            state: State::Dead,
            cpu: None,
            waker: 0,
        }
        .encode();
        r.aux = 200;
        assert_eq!(StateChange::decode(&r), None);
        let l = RunnableSample {
            ts: 3,
            runnable: 5,
            blocked: 2,
        };
        assert_eq!(RunnableSample::decode(&l.encode()), Some(l));
    }
}
