//! MPI records (kinds 20–26, docs/formats.md §2.4): what the MPI wrapper (`mpi/contend_mpi.c`)
//! writes into each rank's stream, encoded and decoded here. The C writer is pinned to the same
//! bytes by the vectors in the tests below and by `tests/mpi_c_writer.rs`.
//!
//! A call is a *group*: `mpi-enter`, its `mpi-arg`s, `mpi-exit`. A 48-bit argument value sits in
//! `site` (bits 32..47) and `obj` (bits 0..31); signed values are two's complement in 48 bits.

use crate::format::{EventKind, Record, NO_SITE};

/// Local communicator id of an intercommunicator (not resolved by the wrapper).
pub const INTERCOMM: u32 = 0xFFFF_FFFE;
/// Local communicator id for calls without a communicator.
pub const NO_COMM: u32 = u32::MAX;
/// World rank value of `MPI_ANY_SOURCE`, and tag value of `MPI_ANY_TAG`.
pub const ANY: i64 = -1;
/// World rank value of `MPI_PROC_NULL`.
pub const PROC_NULL: i64 = -2;

const VALUE_BITS: u32 = 48;
const VALUE_MAX: i64 = (1 << (VALUE_BITS - 1)) - 1;
const VALUE_MIN: i64 = -(1 << (VALUE_BITS - 1));

/// Which rank and which job a rank stream's file name (`rank-R.cst`, `rank-R.N.cst`; the
/// directory part is ignored) belongs to: `(R, N)`, N = 1 for the unnumbered first job. Every
/// rank of a job writes the same N (agreed at `MPI_Init`), and its maps file is named alike
/// (`maps/rank-R.maps`, `maps/rank-R.N.maps`).
pub fn rank_stream_name(file: &str) -> Option<(u32, u32)> {
    let name = file.rsplit('/').next().unwrap_or(file);
    let stem = name.strip_prefix("rank-")?.strip_suffix(".cst")?;
    let number = |s: &str| -> Option<u32> {
        // Digits only: "+1" or " 1" are not names the wrapper writes.
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    match stem.split_once('.') {
        None => Some((number(stem)?, 1)),
        Some((rank, job)) => {
            let job = number(job)?;
            // The wrapper never writes rank-R.1.cst: job 1 is unnumbered.
            (job >= 2).then_some((number(rank)?, job))
        }
    }
}

/// The maps file name (under `maps/`) of rank `rank` in job `job` (see [`rank_stream_name`]).
pub fn rank_maps_name(rank: u32, job: u32) -> String {
    if job <= 1 {
        format!("rank-{rank}.maps")
    } else {
        format!("rank-{rank}.{job}.maps")
    }
}

/// The MPI functions the wrapper records, by their code in `aux` (formats.md §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Function {
    Init = 1,
    InitThread = 2,
    Finalize = 3,
    Send = 10,
    Ssend = 11,
    Bsend = 12,
    Rsend = 13,
    Recv = 14,
    Sendrecv = 15,
    SendrecvReplace = 16,
    Isend = 20,
    Issend = 21,
    Ibsend = 22,
    Irsend = 23,
    Irecv = 24,
    SendInit = 30,
    SsendInit = 31,
    BsendInit = 32,
    RsendInit = 33,
    RecvInit = 34,
    Start = 35,
    Startall = 36,
    RequestFree = 37,
    Wait = 40,
    Waitall = 41,
    Waitany = 42,
    Waitsome = 43,
    Test = 44,
    Testall = 45,
    Testany = 46,
    Testsome = 47,
    Cancel = 48,
    Probe = 50,
    Iprobe = 51,
    Mprobe = 52,
    Improbe = 53,
    Mrecv = 54,
    Imrecv = 55,
    Barrier = 60,
    Bcast = 61,
    Scatter = 62,
    Scatterv = 63,
    Gather = 64,
    Gatherv = 65,
    Reduce = 66,
    Allreduce = 67,
    Allgather = 68,
    Allgatherv = 69,
    Alltoall = 70,
    Alltoallv = 71,
    Alltoallw = 72,
    ReduceScatter = 73,
    ReduceScatterBlock = 74,
    Scan = 75,
    Exscan = 76,
    CommDup = 80,
    CommDupWithInfo = 81,
    CommSplit = 82,
    CommSplitType = 83,
    CommCreate = 84,
    CartCreate = 85,
    CommFree = 86,
}

/// How a function is counted in the report's summary (the thesis's table 4.13 columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FunctionClass {
    /// Sends, receives, their requests' completions and probes.
    PointToPoint,
    Collective,
    /// Init, Finalize, communicator management.
    Other,
}

impl Function {
    /// The calls that poll (`Test*`, `Iprobe`, `Improbe`): the wrapper's polling runs are made
    /// of their unsuccessful calls.
    pub fn is_poll(self) -> bool {
        matches!(
            self,
            Function::Test
                | Function::Testall
                | Function::Testany
                | Function::Testsome
                | Function::Iprobe
                | Function::Improbe
        )
    }

    pub const ALL: [Function; 62] = {
        use Function::*;
        [
            Init,
            InitThread,
            Finalize,
            Send,
            Ssend,
            Bsend,
            Rsend,
            Recv,
            Sendrecv,
            SendrecvReplace,
            Isend,
            Issend,
            Ibsend,
            Irsend,
            Irecv,
            SendInit,
            SsendInit,
            BsendInit,
            RsendInit,
            RecvInit,
            Start,
            Startall,
            RequestFree,
            Wait,
            Waitall,
            Waitany,
            Waitsome,
            Test,
            Testall,
            Testany,
            Testsome,
            Cancel,
            Probe,
            Iprobe,
            Mprobe,
            Improbe,
            Mrecv,
            Imrecv,
            Barrier,
            Bcast,
            Scatter,
            Scatterv,
            Gather,
            Gatherv,
            Reduce,
            Allreduce,
            Allgather,
            Allgatherv,
            Alltoall,
            Alltoallv,
            Alltoallw,
            ReduceScatter,
            ReduceScatterBlock,
            Scan,
            Exscan,
            CommDup,
            CommDupWithInfo,
            CommSplit,
            CommSplitType,
            CommCreate,
            CartCreate,
            CommFree,
        ]
    };

    pub fn from_u8(code: u8) -> Option<Function> {
        Function::ALL.iter().copied().find(|f| *f as u8 == code)
    }

    /// The C name, e.g. `MPI_Send`.
    pub fn name(self) -> &'static str {
        use Function::*;
        match self {
            Init => "MPI_Init",
            InitThread => "MPI_Init_thread",
            Finalize => "MPI_Finalize",
            Send => "MPI_Send",
            Ssend => "MPI_Ssend",
            Bsend => "MPI_Bsend",
            Rsend => "MPI_Rsend",
            Recv => "MPI_Recv",
            Sendrecv => "MPI_Sendrecv",
            SendrecvReplace => "MPI_Sendrecv_replace",
            Isend => "MPI_Isend",
            Issend => "MPI_Issend",
            Ibsend => "MPI_Ibsend",
            Irsend => "MPI_Irsend",
            Irecv => "MPI_Irecv",
            SendInit => "MPI_Send_init",
            SsendInit => "MPI_Ssend_init",
            BsendInit => "MPI_Bsend_init",
            RsendInit => "MPI_Rsend_init",
            RecvInit => "MPI_Recv_init",
            Start => "MPI_Start",
            Startall => "MPI_Startall",
            RequestFree => "MPI_Request_free",
            Wait => "MPI_Wait",
            Waitall => "MPI_Waitall",
            Waitany => "MPI_Waitany",
            Waitsome => "MPI_Waitsome",
            Test => "MPI_Test",
            Testall => "MPI_Testall",
            Testany => "MPI_Testany",
            Testsome => "MPI_Testsome",
            Cancel => "MPI_Cancel",
            Probe => "MPI_Probe",
            Iprobe => "MPI_Iprobe",
            Mprobe => "MPI_Mprobe",
            Improbe => "MPI_Improbe",
            Mrecv => "MPI_Mrecv",
            Imrecv => "MPI_Imrecv",
            Barrier => "MPI_Barrier",
            Bcast => "MPI_Bcast",
            Scatter => "MPI_Scatter",
            Scatterv => "MPI_Scatterv",
            Gather => "MPI_Gather",
            Gatherv => "MPI_Gatherv",
            Reduce => "MPI_Reduce",
            Allreduce => "MPI_Allreduce",
            Allgather => "MPI_Allgather",
            Allgatherv => "MPI_Allgatherv",
            Alltoall => "MPI_Alltoall",
            Alltoallv => "MPI_Alltoallv",
            Alltoallw => "MPI_Alltoallw",
            ReduceScatter => "MPI_Reduce_scatter",
            ReduceScatterBlock => "MPI_Reduce_scatter_block",
            Scan => "MPI_Scan",
            Exscan => "MPI_Exscan",
            CommDup => "MPI_Comm_dup",
            CommDupWithInfo => "MPI_Comm_dup_with_info",
            CommSplit => "MPI_Comm_split",
            CommSplitType => "MPI_Comm_split_type",
            CommCreate => "MPI_Comm_create",
            CartCreate => "MPI_Cart_create",
            CommFree => "MPI_Comm_free",
        }
    }

    pub fn class(self) -> FunctionClass {
        match self as u8 {
            10..=55 => FunctionClass::PointToPoint,
            60..=76 => FunctionClass::Collective,
            _ => FunctionClass::Other,
        }
    }
}

/// Argument codes (`aux` of `mpi-arg`, formats.md §2.4).
pub mod arg {
    pub const DEST: u8 = 1;
    pub const SEND_TAG: u8 = 2;
    pub const BYTES_SENT: u8 = 3;
    pub const SOURCE: u8 = 4;
    pub const RECV_TAG: u8 = 5;
    pub const ROOT: u8 = 6;
    pub const REQUEST_CREATED: u8 = 7;
    pub const REQUEST_STARTED: u8 = 8;
    pub const REQUEST_COMPLETED: u8 = 9;
    pub const STATUS_SOURCE: u8 = 10;
    pub const STATUS_TAG: u8 = 11;
    pub const STATUS_BYTES: u8 = 12;
    pub const STATUS_CANCELLED: u8 = 13;
    pub const REQUEST_FREED: u8 = 14;
    pub const REQUEST_CANCELLED: u8 = 15;
    pub const FLAG: u8 = 16;
    pub const MESSAGE: u8 = 17;
    pub const CREATED_COMM: u8 = 18;
    /// A polling run (a group of `Test*`, `Iprobe` or `Improbe` with `flag` 0): how many
    /// unsuccessful polls it stands for.
    pub const POLLS: u8 = 19;
    /// A request a polling run of `Test*` polled (the first 8 of the array), by id.
    pub const REQUEST_POLLED: u8 = 20;
}

/// One recorded MPI call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallGroup {
    pub enter: u64,
    pub exit: u64,
    /// The function code as written (see [`Function::from_u8`]; a newer wrapper's codes are kept).
    pub function: u8,
    /// Call-site index in the stream's table, or [`NO_SITE`].
    pub site: u16,
    /// Local communicator id, [`NO_COMM`] or [`INTERCOMM`].
    pub comm: u32,
    /// `(argument code, value)` in the order written.
    pub args: Vec<(u8, i64)>,
    /// The call's return value.
    pub ret: u32,
}

impl CallGroup {
    /// How many unsuccessful polls this group stands for: its `polls` argument for a polling
    /// run, 1 for a single `Test*`/`Iprobe`/`Improbe` that found nothing (flag 0, or no
    /// completion for `Testsome`, which carries no flag), 0 for any other call.
    pub fn unsuccessful_polls(&self) -> u64 {
        let polling = Function::from_u8(self.function).is_some_and(Function::is_poll);
        if !polling || self.ret != 0 {
            return 0;
        }
        if let Some(n) = self.arg(arg::POLLS) {
            return n.max(0) as u64;
        }
        let completed = self.args.iter().any(|&(c, _)| c == arg::REQUEST_COMPLETED);
        let found = match self.arg(arg::FLAG) {
            Some(flag) => flag != 0,
            None => self.function != Function::Testsome as u8 || completed,
        };
        u64::from(!found && !completed)
    }

    /// The value of the first argument with this code.
    pub fn arg(&self, code: u8) -> Option<i64> {
        self.args.iter().find(|(c, _)| *c == code).map(|&(_, v)| v)
    }

    /// The group's records, in order.
    pub fn encode(&self) -> Vec<Record> {
        let mut out = Vec::with_capacity(self.args.len() + 2);
        out.push(Record {
            ts: self.enter,
            kind: EventKind::MpiEnter,
            aux: self.function,
            site: self.site,
            obj: self.comm,
        });
        for &(code, value) in &self.args {
            let (hi, lo) = split_value(value);
            out.push(Record {
                ts: self.enter,
                kind: EventKind::MpiArg,
                aux: code,
                site: hi,
                obj: lo,
            });
        }
        out.push(Record {
            ts: self.exit,
            kind: EventKind::MpiExit,
            aux: self.function,
            site: NO_SITE,
            obj: self.ret,
        });
        out
    }
}

/// A 48-bit value as `(site, obj)`; values outside the signed 48-bit range are saturated.
pub fn split_value(value: i64) -> (u16, u32) {
    let v = value.clamp(VALUE_MIN, VALUE_MAX) as u64;
    ((v >> 32) as u16, v as u32)
}

/// The value that `(site, obj)` carry, sign-extended from bit 47.
pub fn join_value(site: u16, obj: u32) -> i64 {
    let raw = (u64::from(site) << 32) | u64::from(obj);
    ((raw << 16) as i64) >> 16
}

/// A comparison of this rank's clock with rank 0's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Local time at the middle of the best round trip.
    pub ts: u64,
    /// 0 at `MPI_Init`, 1 at `MPI_Finalize`.
    pub phase: u8,
    pub round_trips: u16,
    pub best_round_trip_ns: u32,
    /// What to add to this rank's clock to read rank 0's.
    pub offset_ns: i64,
}

impl ClockSample {
    pub fn encode(&self) -> [Record; 3] {
        let off = self.offset_ns as u64;
        let half = |aux: u8, obj: u32| Record {
            ts: self.ts,
            kind: EventKind::MpiClockOffset,
            aux,
            site: NO_SITE,
            obj,
        };
        [
            Record {
                ts: self.ts,
                kind: EventKind::MpiClock,
                aux: self.phase,
                site: self.round_trips.min(0xFFFE),
                obj: self.best_round_trip_ns,
            },
            half(0, off as u32),
            half(1, (off >> 32) as u32),
        ]
    }
}

/// What an MPI rank's stream says, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpiItem {
    Call(CallGroup),
    /// A communicator defined: local id and the string id of `GID R0 R1 ...`.
    CommDefined {
        ts: u64,
        local: u32,
        members: u32,
    },
    CommFreed {
        ts: u64,
        local: u32,
    },
    Clock(ClockSample),
    /// A `mark` (e.g. `mpi.host=...`): its label's string id.
    Mark {
        ts: u64,
        label: u32,
    },
}

/// Records that did not fit the grammar of §2.4 (a group cut short, an argument outside a
/// group, ...): counted, never guessed at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Malformed {
    /// Groups that began but did not end with their `mpi-exit` (a rank killed mid-flush
    /// cannot cause this: groups are written whole; a hand-made stream can).
    pub broken_groups: u64,
    /// MPI records outside their place (an argument with no group, a lone offset half...).
    pub stray_records: u64,
}

/// Decodes a rank stream's records into calls, communicator definitions, clock samples and
/// marks; other kinds are skipped.
pub fn decode(records: impl IntoIterator<Item = Record>) -> (Vec<MpiItem>, Malformed) {
    let mut items = Vec::new();
    let mut bad = Malformed::default();
    let mut group: Option<CallGroup> = None;
    let mut pending_comm: Option<(u64, u32)> = None;
    let mut clock: Option<(ClockSample, Option<u32>)> = None;
    for r in records {
        // A group is interrupted by anything but its arguments and exit.
        if group.is_some() && !matches!(r.kind, EventKind::MpiArg | EventKind::MpiExit) {
            group = None;
            bad.broken_groups += 1;
        }
        if pending_comm.is_some() && r.kind != EventKind::MpiCommMembers {
            pending_comm = None;
            bad.stray_records += 1;
        }
        if clock.is_some() && r.kind != EventKind::MpiClockOffset {
            clock = None;
            bad.stray_records += 1;
        }
        match r.kind {
            EventKind::MpiEnter => {
                group = Some(CallGroup {
                    enter: r.ts,
                    exit: r.ts,
                    function: r.aux,
                    site: r.site,
                    comm: r.obj,
                    args: Vec::new(),
                    ret: 0,
                })
            }
            EventKind::MpiArg => match group.as_mut() {
                Some(g) => g.args.push((r.aux, join_value(r.site, r.obj))),
                None => bad.stray_records += 1,
            },
            EventKind::MpiExit => match group.take() {
                Some(mut g) if g.function == r.aux => {
                    g.exit = r.ts;
                    g.ret = r.obj;
                    items.push(MpiItem::Call(g));
                }
                Some(_) => bad.broken_groups += 1,
                None => bad.stray_records += 1,
            },
            EventKind::MpiComm => match r.aux {
                0 => pending_comm = Some((r.ts, r.obj)),
                1 => items.push(MpiItem::CommFreed {
                    ts: r.ts,
                    local: r.obj,
                }),
                _ => bad.stray_records += 1,
            },
            EventKind::MpiCommMembers => match pending_comm.take() {
                Some((ts, local)) => items.push(MpiItem::CommDefined {
                    ts,
                    local,
                    members: r.obj,
                }),
                None => bad.stray_records += 1,
            },
            EventKind::MpiClock => {
                clock = Some((
                    ClockSample {
                        ts: r.ts,
                        phase: r.aux,
                        round_trips: r.site,
                        best_round_trip_ns: r.obj,
                        offset_ns: 0,
                    },
                    None,
                ))
            }
            EventKind::MpiClockOffset => match (clock.take(), r.aux) {
                (Some((c, None)), 0) => clock = Some((c, Some(r.obj))),
                (Some((mut c, Some(lo))), 1) => {
                    c.offset_ns = ((u64::from(r.obj) << 32) | u64::from(lo)) as i64;
                    items.push(MpiItem::Clock(c));
                }
                _ => bad.stray_records += 1,
            },
            EventKind::Mark => items.push(MpiItem::Mark {
                ts: r.ts,
                label: r.obj,
            }),
            _ => {}
        }
    }
    if group.is_some() {
        bad.broken_groups += 1;
    }
    if pending_comm.is_some() || clock.is_some() {
        bad.stray_records += 1;
    }
    (items, bad)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rank_stream_names_give_rank_and_job() {
        assert_eq!(rank_stream_name("streams/rank-0.cst"), Some((0, 1)));
        assert_eq!(rank_stream_name("rank-17.cst"), Some((17, 1)));
        assert_eq!(rank_stream_name("streams/rank-3.2.cst"), Some((3, 2)));
        assert_eq!(rank_stream_name("rank-3.12.cst"), Some((3, 12)));
        for bad in [
            "rank-.cst",
            "rank-1.1.cst",
            "rank-1.0.cst",
            "rank-a.cst",
            "rank-+1.cst",
            "rank-1.2.3.cst",
            "rank-1.cst.tmp",
            "sampler.cst",
            "rank-1..cst",
        ] {
            assert_eq!(rank_stream_name(bad), None, "{bad}");
        }
        assert_eq!(rank_maps_name(4, 1), "rank-4.maps");
        assert_eq!(rank_maps_name(4, 3), "rank-4.3.maps");
    }

    use super::*;

    fn hex(records: &[Record]) -> Vec<String> {
        records
            .iter()
            .map(|r| r.encode().iter().map(|b| format!("{b:02x}")).collect())
            .collect()
    }

    fn send_vector() -> CallGroup {
        CallGroup {
            enter: 1000,
            exit: 1500,
            function: Function::Send as u8,
            site: 3,
            comm: 0,
            args: vec![(arg::DEST, 1), (arg::SEND_TAG, 7), (arg::BYTES_SENT, 4096)],
            ret: 0,
        }
    }

    fn irecv_vector() -> CallGroup {
        CallGroup {
            enter: 2000,
            exit: 2100,
            function: Function::Irecv as u8,
            site: 4,
            comm: 2,
            args: vec![
                (arg::SOURCE, ANY),
                (arg::RECV_TAG, ANY),
                (arg::REQUEST_CREATED, 5),
            ],
            ret: 0,
        }
    }

    fn clock_vector() -> ClockSample {
        ClockSample {
            ts: 5000,
            phase: 0,
            round_trips: 10,
            best_round_trip_ns: 2400,
            offset_ns: -123_456_789_012,
        }
    }

    // The same hex is checked by mpi/test_vectors.c on the C side (formats.md §2.4).
    #[test]
    fn vectors_pin_the_bytes() {
        assert_eq!(
            hex(&send_vector().encode()),
            [
                "e803000000000000140a030000000000",
                "e8030000000000001501000001000000",
                "e8030000000000001502000007000000",
                "e8030000000000001503000000100000",
                "dc05000000000000160affff00000000",
            ]
        );
        assert_eq!(
            hex(&irecv_vector().encode()),
            [
                "d0070000000000001418040002000000",
                "d0070000000000001504ffffffffffff",
                "d0070000000000001505ffffffffffff",
                "d0070000000000001507000005000000",
                "34080000000000001618ffff00000000",
            ]
        );
        assert_eq!(
            hex(&clock_vector().encode()),
            [
                "881300000000000019000a0060090000",
                "88130000000000001a00ffffece56641",
                "88130000000000001a01ffffe3ffffff",
            ]
        );
    }

    #[test]
    fn groups_clocks_and_comms_decode_in_order() {
        let mut recs = vec![
            Record {
                ts: 900,
                kind: EventKind::MpiComm,
                aux: 0,
                site: NO_SITE,
                obj: 0,
            },
            Record {
                ts: 900,
                kind: EventKind::MpiCommMembers,
                aux: 0,
                site: NO_SITE,
                obj: 7,
            },
        ];
        recs.extend(send_vector().encode());
        recs.extend(irecv_vector().encode());
        recs.extend(clock_vector().encode());
        let (items, bad) = decode(recs);
        assert_eq!(bad, Malformed::default());
        assert_eq!(
            items,
            vec![
                MpiItem::CommDefined {
                    ts: 900,
                    local: 0,
                    members: 7
                },
                MpiItem::Call(send_vector()),
                MpiItem::Call(irecv_vector()),
                MpiItem::Clock(clock_vector()),
            ]
        );
    }

    #[test]
    fn a_cut_group_is_counted_not_guessed() {
        let mut recs = send_vector().encode();
        recs.pop(); // no exit
        recs.extend(irecv_vector().encode());
        let (items, bad) = decode(recs);
        assert_eq!(items, vec![MpiItem::Call(irecv_vector())]);
        assert_eq!(bad.broken_groups, 1);
        let mut lone = irecv_vector().encode();
        lone.remove(0); // arguments with no enter
        let (items, bad) = decode(lone);
        assert!(items.is_empty());
        assert_eq!(bad.stray_records, 4);
    }

    #[test]
    fn unsuccessful_polls_are_counted_from_runs_and_single_polls() {
        let poll = |f: Function, args: Vec<(u8, i64)>| CallGroup {
            enter: 1,
            exit: 2,
            function: f as u8,
            site: 0,
            comm: NO_COMM,
            args,
            ret: 0,
        };
        let run = poll(Function::Testany, vec![(arg::FLAG, 0), (arg::POLLS, 12345)]);
        assert_eq!(run.unsuccessful_polls(), 12345);
        assert_eq!(
            poll(Function::Test, vec![(arg::FLAG, 0)]).unsuccessful_polls(),
            1
        );
        assert_eq!(
            poll(Function::Iprobe, vec![(arg::FLAG, 1)]).unsuccessful_polls(),
            0
        );
        assert_eq!(poll(Function::Testsome, vec![]).unsuccessful_polls(), 1);
        let done = poll(Function::Testsome, vec![(arg::REQUEST_COMPLETED, 3)]);
        assert_eq!(done.unsuccessful_polls(), 0);
        assert_eq!(poll(Function::Wait, vec![]).unsuccessful_polls(), 0);
        let mut failed = poll(Function::Test, vec![(arg::FLAG, 0)]);
        failed.ret = 5;
        assert_eq!(failed.unsuccessful_polls(), 0, "an error is not a poll");
    }

    #[test]
    fn values_are_48_bit_twos_complement_and_saturate() {
        for v in [0, 1, -1, -2, 4096, VALUE_MAX, VALUE_MIN, 0x7FFF_0000_1234] {
            let (s, o) = split_value(v);
            assert_eq!(join_value(s, o), v, "{v}");
        }
        let (s, o) = split_value(i64::MAX);
        assert_eq!(join_value(s, o), VALUE_MAX);
    }

    #[test]
    fn every_function_code_is_distinct_and_named() {
        let mut codes: Vec<u8> = Function::ALL.iter().map(|f| *f as u8).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), Function::ALL.len());
        assert_eq!(Function::from_u8(10), Some(Function::Send));
        assert_eq!(Function::from_u8(9), None);
        assert_eq!(Function::Send.class(), FunctionClass::PointToPoint);
        assert_eq!(Function::Allreduce.class(), FunctionClass::Collective);
        assert_eq!(Function::CommFree.class(), FunctionClass::Other);
        assert_eq!(
            Function::ReduceScatterBlock.name(),
            "MPI_Reduce_scatter_block"
        );
    }
}
