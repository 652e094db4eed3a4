//! The event-stream container, byte by byte (docs/formats.md §2 describes the same layout).
//!
//! ```text
//! file    = header chunk*
//! header  = 64 bytes, little-endian, CRC32 of bytes 0..60 at 60
//! chunk   = chunk header (24 bytes) + payload (payload_len bytes, CRC32 in the chunk header)
//! ```
//!
//! Everything here is pure encoding and decoding of fixed layouts; no I/O.

/// First 8 bytes of every stream file.
pub const MAGIC: [u8; 8] = *b"CNTDSTRM";
/// Container version; a reader rejects any other.
pub const VERSION: u16 = 1;
/// Written little-endian as bytes `02 01`; read back as 0x0201 on a byte-swapped file.
pub const BYTE_ORDER_MARK: u16 = 0x0102;
pub const HEADER_LEN: usize = 64;
pub const CHUNK_HEADER_LEN: usize = 24;
/// `"CHNK"` little-endian: marks the start of every chunk.
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"CHNK");
/// Size of one event record.
pub const RECORD_LEN: usize = 16;
/// Largest payload a chunk may declare; a reader refuses larger ones before reading them.
pub const MAX_CHUNK_PAYLOAD: usize = 64 << 20;
/// Longest string a string table may hold.
pub const MAX_STRING_LEN: usize = 64 << 10;
/// The site index meaning "no call site recorded".
pub const NO_SITE: u16 = u16::MAX;
/// The string id meaning "no string".
pub const NO_STRING: u32 = u32::MAX;
/// Size of one call-site table entry: `id u32 | reserved u32 | address u64`, the address being
/// a return address in the target (symbolised at analysis time).
pub const SITE_ENTRY_LEN: usize = 16;
/// Size of the trailer payload.
pub const TRAILER_LEN: usize = 40;
/// Size of one object table entry (locks, condition variables, barriers).
pub const OBJECT_ENTRY_LEN: usize = 16;
/// The object id meaning "no object recorded" (the table was full).
pub const NO_OBJECT: u32 = u32::MAX;

/// What a stream describes.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u16)]
pub enum StreamKind {
    /// One thread of a process (the lock probe writes one per thread).
    Thread = 1,
    /// A whole process.
    Process = 2,
    /// One MPI rank.
    Rank = 3,
    /// Machine-wide events (scheduler tracepoints, samplers).
    System = 4,
}

impl StreamKind {
    pub fn name(self) -> &'static str {
        match self {
            StreamKind::Thread => "thread",
            StreamKind::Process => "process",
            StreamKind::Rank => "rank",
            StreamKind::System => "system",
        }
    }

    pub fn from_u16(v: u16) -> Option<StreamKind> {
        Some(match v {
            1 => StreamKind::Thread,
            2 => StreamKind::Process,
            3 => StreamKind::Rank,
            4 => StreamKind::System,
            _ => return None,
        })
    }
}

/// What the timestamps count.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u16)]
pub enum ClockSource {
    /// CLOCK_MONOTONIC nanoseconds.
    Monotonic = 1,
    /// The x86 time-stamp counter; `clock_hz` is its calibrated rate and meta.json holds the
    /// calibration pairs that map it to CLOCK_MONOTONIC.
    Tsc = 2,
    /// CLOCK_REALTIME nanoseconds (for streams merged across hosts).
    Realtime = 3,
}

impl ClockSource {
    pub fn name(self) -> &'static str {
        match self {
            ClockSource::Monotonic => "monotonic",
            ClockSource::Tsc => "tsc",
            ClockSource::Realtime => "realtime",
        }
    }

    pub fn from_u16(v: u16) -> Option<ClockSource> {
        Some(match v {
            1 => ClockSource::Monotonic,
            2 => ClockSource::Tsc,
            3 => ClockSource::Realtime,
            _ => return None,
        })
    }
}

/// The fixed stream header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: StreamKind,
    pub clock: ClockSource,
    /// Clock ticks per second (1e9 for the nanosecond clocks).
    pub clock_hz: u64,
    pub pid: u32,
    /// Thread id for thread streams, else 0.
    pub tid: u32,
    /// MPI rank for rank streams, else -1.
    pub rank: i32,
    /// Clock value when the stream was opened.
    pub base_time: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&BYTE_ORDER_MARK.to_le_bytes());
        b[12..14].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        b[14..16].copy_from_slice(&(RECORD_LEN as u16).to_le_bytes());
        b[16..18].copy_from_slice(&(self.kind as u16).to_le_bytes());
        b[18..20].copy_from_slice(&(self.clock as u16).to_le_bytes());
        // 20..24 flags, reserved (0)
        b[24..32].copy_from_slice(&self.clock_hz.to_le_bytes());
        b[32..36].copy_from_slice(&self.pid.to_le_bytes());
        b[36..40].copy_from_slice(&self.tid.to_le_bytes());
        b[40..44].copy_from_slice(&self.rank.to_le_bytes());
        // 44..48 reserved
        b[48..56].copy_from_slice(&self.base_time.to_le_bytes());
        // 56..60 reserved
        let crc = crc32fast::hash(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }
}

/// Chunk kinds. Tables come before the events that use them, so a file cut at any chunk
/// boundary is self-consistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ChunkKind {
    Events = 1,
    Strings = 2,
    Sites = 3,
    Trailer = 4,
    Objects = 5,
}

impl ChunkKind {
    pub fn from_u16(v: u16) -> Option<ChunkKind> {
        Some(match v {
            1 => ChunkKind::Events,
            2 => ChunkKind::Strings,
            3 => ChunkKind::Sites,
            4 => ChunkKind::Trailer,
            5 => ChunkKind::Objects,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    pub kind: ChunkKind,
    pub payload_len: u32,
    /// Records (events) or entries (tables); 0 for the trailer.
    pub count: u32,
    /// Events dropped since the previous events chunk (events chunks only).
    pub dropped: u32,
}

impl ChunkHeader {
    /// The 24-byte chunk header for `payload`. The CRC32 at bytes 20..24 covers header bytes
    /// 0..20 and the payload, so every single-bit error in a chunk is detected.
    pub fn encode(&self, payload: &[u8]) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&(self.kind as u16).to_le_bytes());
        // 6..8 flags, reserved
        b[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.count.to_le_bytes());
        b[16..20].copy_from_slice(&self.dropped.to_le_bytes());
        let crc = chunk_crc(&b[0..20], payload);
        b[20..24].copy_from_slice(&crc.to_le_bytes());
        b
    }
}

/// CRC32 of a chunk header's first 20 bytes followed by its payload.
pub fn chunk_crc(header_front: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header_front);
    h.update(payload);
    h.finalize()
}

/// Event kinds. Discriminants are the on-disk values and never change meaning; new kinds take
/// new numbers. Kinds this build does not know are read as [`EventKind::Unknown`] and counted,
/// so a newer writer's stream still opens.
///
/// Adding a kind: a variant and its `const` number, its arms in `from_u8`, `to_u8` and `name`,
/// a row in docs/formats.md §2.3, and, if its `obj` or `aux` names a table entry, the check in
/// `reader::Stream::check_events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A labelled point in time: `obj` is the string-table id of its label (or [`NO_STRING`]),
    /// `aux` a byte of the writer's choosing, `site` the call site.
    Mark,
    /// A thread started waiting for a lock (its try failed): `obj` the lock (object table),
    /// `site` the call site, `aux` [`crate::locks::LockFlags`].
    LockWait,
    /// A lock was acquired: `obj`, `site`, `aux` as for `LockWait`; the `contended` flag says a
    /// `LockWait` of this thread precedes it.
    LockAcquired,
    /// A wait for a lock ended without it (timeout or error): `obj` the lock, `aux` the error
    /// number (e.g. ETIMEDOUT).
    LockFailed,
    /// A lock was released: `obj`, `site` (the unlock's call site), `aux` flags.
    LockReleased,
    /// A wait on a condition variable began (its mutex was released just before): `obj` the
    /// condition variable, `site` the call site.
    CondWait,
    /// A condition wait returned (its mutex is re-acquired just after): `obj` the condition
    /// variable, `aux` the error number returned (0, or ETIMEDOUT).
    CondWoken,
    /// A thread arrived at a barrier: `obj` the barrier, `site` the call site.
    BarrierWait,
    /// A thread left a barrier: `obj` the barrier, `aux` 1 for the serial thread.
    BarrierDone,
    /// The stream's thread started: `obj` the creating thread's id (0 for a process's first
    /// thread), `site` the start routine's address.
    ThreadStart,
    /// The stream's thread ended.
    ThreadEnd,
    /// The thread forked: `obj` the child's pid.
    Fork,
    /// A heap block was allocated (recorded with `--alloc-sites`): `site` the allocation's call
    /// site, `obj` its size in bytes (saturated at 2^32 - 1), `aux` bits 40..47 of its address.
    /// Always followed by an [`EventKind::AllocAddress`] of the same time; see [`crate::alloc`].
    Alloc,
    /// The rest of the preceding `Alloc`'s address: `obj` bits 0..31, `aux` bits 32..39.
    AllocAddress,
    /// A sample of the stream's thread (`contend record`'s sampler): on-CPU time since its
    /// previous sample, in ns (`obj` bits 0..31, `aux` bits 32..39); `site` the CPU it last ran
    /// on (not a call site). See [`crate::sched`].
    CpuSample,
    /// Run-queue wait since the previous sample, in ns (`obj`, `aux` as for `CpuSample`); `site`
    /// the involuntary context switches since then (saturated at 0xFFFE). Same time as its
    /// `CpuSample`.
    WaitSample,
    /// Voluntary context switches since the previous sample (`obj`); `aux` the state letter
    /// (`R`, `S`, `D`, ...) at the sample. Same time as its `CpuSample`.
    SwitchSample,
    /// The system's runnable tasks at a sample (system stream): `obj` running or runnable,
    /// `site` blocked in uninterruptible sleep (saturated at 0xFFFE).
    RunnableSample,
    /// The stream's thread changed scheduler state (sched tracepoints): `aux` the new state
    /// ([`crate::sched::State`]), `site` the CPU (when running, else 0xFFFF), `obj` the waking
    /// thread for a wake-up, else 0.
    SchedState,
    /// An MPI call began (the first record of a call group, see [`crate::mpi`]): `aux` the
    /// function code, `site` the call site, `obj` the communicator's local id.
    MpiEnter,
    /// An argument of the current MPI call group: `aux` the argument code, `site` and `obj`
    /// bits 32..47 and 0..31 of its 48-bit value.
    MpiArg,
    /// The MPI call returned (the group's last record): `aux` the function code, `obj` the
    /// return value.
    MpiExit,
    /// A communicator was defined (`aux` 0) or freed (1): `obj` its local id.
    MpiComm,
    /// The defining `MpiComm`'s identity and members: `obj` a string id.
    MpiCommMembers,
    /// A clock comparison with rank 0: `aux` the phase, `site` the round trips, `obj` the best
    /// round trip in ns.
    MpiClock,
    /// Half of the preceding `MpiClock`'s offset: `aux` 0 bits 0..31, 1 bits 32..63.
    MpiClockOffset,
    /// The stream's thread blocked voluntarily (a per-task `sched_switch`, see
    /// [`crate::offcpu`]): `aux` the state letter (`S`, `D`, ...), `obj` the string id of the
    /// reason named from its kernel call chain (or [`NO_STRING`]), `site` flags
    /// ([`crate::offcpu::FUTEX`]: the chain passes a futex wait system call).
    OffCpuBlock,
    /// The futex arguments of the preceding `OffCpuBlock` (same time): `aux` the operation
    /// (`si & 0xff`), `site` and `obj` bits 32..47 and 0..31 of the address (`di`).
    OffCpuFutex,
    /// In a process's off-CPU stream, the blocks that follow (until the next such record) are
    /// thread `obj`'s; `aux` and `site` are 0.
    OffCpuThread,
    /// The user stack of the preceding `OffCpuBlock` (same time), after its `OffCpuFutex` if
    /// any: `obj` the entry's index in the process's stack file (`stacks/offcpu-PID.ustk`, see
    /// [`crate::ustack`]), or [`NO_OBJECT`] when the block has none; `aux` then says why
    /// ([`crate::ustack::NoStack`]).
    OffCpuStack,
    /// The stream's thread woke thread `obj` (a per-task `sched_waking`, see
    /// [`crate::offcpu`]): `aux` how ([`crate::offcpu::WakeHow`]), `site` the futex operation
    /// (`si & 0xff`) when `aux` says a futex wake, else 0.
    OffCpuWaking,
    /// An address of the preceding `OffCpuWaking` (same time): `aux` 0 the futex word (`di`),
    /// 1 the second word of a requeue or wake-op (`r8`); `site` and `obj` bits 32..47 and
    /// 0..31 of the address.
    OffCpuWakeAddr,
    /// The user stack of the preceding `OffCpuWaking` (same time), its last record: as
    /// `OffCpuStack`.
    OffCpuWakeStack,
    Unknown(u8),
}

impl EventKind {
    pub const MARK: u8 = 1;
    pub const LOCK_WAIT: u8 = 2;
    pub const LOCK_ACQUIRED: u8 = 3;
    pub const LOCK_FAILED: u8 = 4;
    pub const LOCK_RELEASED: u8 = 5;
    pub const COND_WAIT: u8 = 6;
    pub const COND_WOKEN: u8 = 7;
    pub const BARRIER_WAIT: u8 = 8;
    pub const BARRIER_DONE: u8 = 9;
    pub const THREAD_START: u8 = 10;
    pub const THREAD_END: u8 = 11;
    pub const FORK: u8 = 12;
    pub const ALLOC: u8 = 13;
    pub const ALLOC_ADDRESS: u8 = 14;
    pub const CPU_SAMPLE: u8 = 15;
    pub const WAIT_SAMPLE: u8 = 16;
    pub const SWITCH_SAMPLE: u8 = 17;
    pub const RUNNABLE_SAMPLE: u8 = 18;
    pub const SCHED_STATE: u8 = 19;
    pub const MPI_ENTER: u8 = 20;
    pub const MPI_ARG: u8 = 21;
    pub const MPI_EXIT: u8 = 22;
    pub const MPI_COMM: u8 = 23;
    pub const MPI_COMM_MEMBERS: u8 = 24;
    pub const MPI_CLOCK: u8 = 25;
    pub const MPI_CLOCK_OFFSET: u8 = 26;
    pub const OFFCPU_BLOCK: u8 = 27;
    pub const OFFCPU_FUTEX: u8 = 28;
    pub const OFFCPU_THREAD: u8 = 29;
    pub const OFFCPU_STACK: u8 = 30;
    pub const OFFCPU_WAKING: u8 = 31;
    pub const OFFCPU_WAKE_ADDR: u8 = 32;
    pub const OFFCPU_WAKE_STACK: u8 = 33;

    #[inline]
    pub fn from_u8(v: u8) -> EventKind {
        match v {
            Self::MARK => EventKind::Mark,
            Self::LOCK_WAIT => EventKind::LockWait,
            Self::LOCK_ACQUIRED => EventKind::LockAcquired,
            Self::LOCK_FAILED => EventKind::LockFailed,
            Self::LOCK_RELEASED => EventKind::LockReleased,
            Self::COND_WAIT => EventKind::CondWait,
            Self::COND_WOKEN => EventKind::CondWoken,
            Self::BARRIER_WAIT => EventKind::BarrierWait,
            Self::BARRIER_DONE => EventKind::BarrierDone,
            Self::THREAD_START => EventKind::ThreadStart,
            Self::THREAD_END => EventKind::ThreadEnd,
            Self::FORK => EventKind::Fork,
            Self::ALLOC => EventKind::Alloc,
            Self::ALLOC_ADDRESS => EventKind::AllocAddress,
            Self::CPU_SAMPLE => EventKind::CpuSample,
            Self::WAIT_SAMPLE => EventKind::WaitSample,
            Self::SWITCH_SAMPLE => EventKind::SwitchSample,
            Self::RUNNABLE_SAMPLE => EventKind::RunnableSample,
            Self::SCHED_STATE => EventKind::SchedState,
            Self::MPI_ENTER => EventKind::MpiEnter,
            Self::MPI_ARG => EventKind::MpiArg,
            Self::MPI_EXIT => EventKind::MpiExit,
            Self::MPI_COMM => EventKind::MpiComm,
            Self::MPI_COMM_MEMBERS => EventKind::MpiCommMembers,
            Self::MPI_CLOCK => EventKind::MpiClock,
            Self::MPI_CLOCK_OFFSET => EventKind::MpiClockOffset,
            Self::OFFCPU_BLOCK => EventKind::OffCpuBlock,
            Self::OFFCPU_FUTEX => EventKind::OffCpuFutex,
            Self::OFFCPU_THREAD => EventKind::OffCpuThread,
            Self::OFFCPU_STACK => EventKind::OffCpuStack,
            Self::OFFCPU_WAKING => EventKind::OffCpuWaking,
            Self::OFFCPU_WAKE_ADDR => EventKind::OffCpuWakeAddr,
            Self::OFFCPU_WAKE_STACK => EventKind::OffCpuWakeStack,
            other => EventKind::Unknown(other),
        }
    }

    #[inline]
    pub fn to_u8(self) -> u8 {
        match self {
            EventKind::Mark => Self::MARK,
            EventKind::LockWait => Self::LOCK_WAIT,
            EventKind::LockAcquired => Self::LOCK_ACQUIRED,
            EventKind::LockFailed => Self::LOCK_FAILED,
            EventKind::LockReleased => Self::LOCK_RELEASED,
            EventKind::CondWait => Self::COND_WAIT,
            EventKind::CondWoken => Self::COND_WOKEN,
            EventKind::BarrierWait => Self::BARRIER_WAIT,
            EventKind::BarrierDone => Self::BARRIER_DONE,
            EventKind::ThreadStart => Self::THREAD_START,
            EventKind::ThreadEnd => Self::THREAD_END,
            EventKind::Fork => Self::FORK,
            EventKind::Alloc => Self::ALLOC,
            EventKind::AllocAddress => Self::ALLOC_ADDRESS,
            EventKind::CpuSample => Self::CPU_SAMPLE,
            EventKind::WaitSample => Self::WAIT_SAMPLE,
            EventKind::SwitchSample => Self::SWITCH_SAMPLE,
            EventKind::RunnableSample => Self::RUNNABLE_SAMPLE,
            EventKind::SchedState => Self::SCHED_STATE,
            EventKind::MpiEnter => Self::MPI_ENTER,
            EventKind::MpiArg => Self::MPI_ARG,
            EventKind::MpiExit => Self::MPI_EXIT,
            EventKind::MpiComm => Self::MPI_COMM,
            EventKind::MpiCommMembers => Self::MPI_COMM_MEMBERS,
            EventKind::MpiClock => Self::MPI_CLOCK,
            EventKind::MpiClockOffset => Self::MPI_CLOCK_OFFSET,
            EventKind::OffCpuBlock => Self::OFFCPU_BLOCK,
            EventKind::OffCpuFutex => Self::OFFCPU_FUTEX,
            EventKind::OffCpuThread => Self::OFFCPU_THREAD,
            EventKind::OffCpuStack => Self::OFFCPU_STACK,
            EventKind::OffCpuWaking => Self::OFFCPU_WAKING,
            EventKind::OffCpuWakeAddr => Self::OFFCPU_WAKE_ADDR,
            EventKind::OffCpuWakeStack => Self::OFFCPU_WAKE_STACK,
            EventKind::Unknown(v) => v,
        }
    }

    pub fn name(self) -> String {
        match self {
            EventKind::Mark => "mark",
            EventKind::LockWait => "lock-wait",
            EventKind::LockAcquired => "lock-acquired",
            EventKind::LockFailed => "lock-failed",
            EventKind::LockReleased => "lock-released",
            EventKind::CondWait => "cond-wait",
            EventKind::CondWoken => "cond-woken",
            EventKind::BarrierWait => "barrier-wait",
            EventKind::BarrierDone => "barrier-done",
            EventKind::ThreadStart => "thread-start",
            EventKind::ThreadEnd => "thread-end",
            EventKind::Fork => "fork",
            EventKind::Alloc => "alloc",
            EventKind::AllocAddress => "alloc-address",
            EventKind::CpuSample => "cpu-sample",
            EventKind::WaitSample => "wait-sample",
            EventKind::SwitchSample => "switch-sample",
            EventKind::RunnableSample => "runnable-sample",
            EventKind::SchedState => "sched-state",
            EventKind::MpiEnter => "mpi-enter",
            EventKind::MpiArg => "mpi-arg",
            EventKind::MpiExit => "mpi-exit",
            EventKind::MpiComm => "mpi-comm",
            EventKind::MpiCommMembers => "mpi-comm-members",
            EventKind::MpiClock => "mpi-clock",
            EventKind::MpiClockOffset => "mpi-clock-offset",
            EventKind::OffCpuBlock => "offcpu-block",
            EventKind::OffCpuFutex => "offcpu-futex",
            EventKind::OffCpuThread => "offcpu-thread",
            EventKind::OffCpuStack => "offcpu-stack",
            EventKind::OffCpuWaking => "offcpu-waking",
            EventKind::OffCpuWakeAddr => "offcpu-wake-addr",
            EventKind::OffCpuWakeStack => "offcpu-wake-stack",
            EventKind::Unknown(v) => return format!("unknown kind {v}"),
        }
        .to_string()
    }

    /// Kinds whose `site` is a call-site index (else it carries data, e.g. a CPU number).
    /// Unknown kinds are not checked, so a newer writer's kinds still open.
    pub fn site_is_call_site(self) -> bool {
        !matches!(
            self,
            EventKind::CpuSample
                | EventKind::WaitSample
                | EventKind::SwitchSample
                | EventKind::RunnableSample
                | EventKind::SchedState
                | EventKind::MpiArg
                | EventKind::MpiExit
                | EventKind::MpiComm
                | EventKind::MpiCommMembers
                | EventKind::MpiClock
                | EventKind::MpiClockOffset
                | EventKind::OffCpuBlock
                | EventKind::OffCpuFutex
                | EventKind::OffCpuThread
                | EventKind::OffCpuStack
                | EventKind::OffCpuWaking
                | EventKind::OffCpuWakeAddr
                | EventKind::OffCpuWakeStack
                | EventKind::Unknown(_)
        )
    }

    /// Kinds whose `obj` is an object-table id.
    pub fn refers_to_object(self) -> bool {
        matches!(
            self,
            EventKind::LockWait
                | EventKind::LockAcquired
                | EventKind::LockFailed
                | EventKind::LockReleased
                | EventKind::CondWait
                | EventKind::CondWoken
                | EventKind::BarrierWait
                | EventKind::BarrierDone
        )
    }
}

/// What an object-table entry is.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ObjectKind {
    Mutex = 1,
    RwLock = 2,
    SpinLock = 3,
    Cond = 4,
    Barrier = 5,
}

impl ObjectKind {
    pub fn from_u8(v: u8) -> Option<ObjectKind> {
        Some(match v {
            1 => ObjectKind::Mutex,
            2 => ObjectKind::RwLock,
            3 => ObjectKind::SpinLock,
            4 => ObjectKind::Cond,
            5 => ObjectKind::Barrier,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Mutex => "mutex",
            ObjectKind::RwLock => "rwlock",
            ObjectKind::SpinLock => "spinlock",
            ObjectKind::Cond => "condvar",
            ObjectKind::Barrier => "barrier",
        }
    }
}

/// One 16-byte event: `ts u64 | kind u8 | aux u8 | site u16 | obj u32`, little-endian.
/// What `aux` and `obj` mean depends on the kind (for locks: flags and the lock's table index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Clock value (see the header's clock source).
    pub ts: u64,
    pub kind: EventKind,
    pub aux: u8,
    /// Call-site table index, or [`NO_SITE`].
    pub site: u16,
    pub obj: u32,
}

impl Record {
    #[inline]
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&self.ts.to_le_bytes());
        b[8] = self.kind.to_u8();
        b[9] = self.aux;
        b[10..12].copy_from_slice(&self.site.to_le_bytes());
        b[12..16].copy_from_slice(&self.obj.to_le_bytes());
        b
    }

    #[inline]
    pub fn decode(b: &[u8; RECORD_LEN]) -> Record {
        Record {
            ts: u64::from_le_bytes(b[0..8].try_into().unwrap_or_default()),
            kind: EventKind::from_u8(b[8]),
            aux: b[9],
            site: u16::from_le_bytes([b[10], b[11]]),
            obj: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }
}

/// End-of-stream totals, written by a writer that was closed properly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    pub events: u64,
    pub dropped: u64,
    /// Clock value at close.
    pub end_time: u64,
    pub strings: u32,
    pub sites: u32,
    pub objects: u32,
}

impl Trailer {
    /// `events u64 | dropped u64 | end_time u64 | strings u32 | sites u32 | objects u32 |
    /// reserved u32`.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut b = [0u8; TRAILER_LEN];
        b[0..8].copy_from_slice(&self.events.to_le_bytes());
        b[8..16].copy_from_slice(&self.dropped.to_le_bytes());
        b[16..24].copy_from_slice(&self.end_time.to_le_bytes());
        b[24..28].copy_from_slice(&self.strings.to_le_bytes());
        b[28..32].copy_from_slice(&self.sites.to_le_bytes());
        b[32..36].copy_from_slice(&self.objects.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_is_16_bytes_and_round_trips() {
        let r = Record {
            ts: 0x0102_0304_0506_0708,
            kind: EventKind::Mark,
            aux: 9,
            site: 0x0a0b,
            obj: 0x0c0d_0e0f,
        };
        let b = r.encode();
        assert_eq!(
            b,
            [8, 7, 6, 5, 4, 3, 2, 1, 1, 9, 0x0b, 0x0a, 0x0f, 0x0e, 0x0d, 0x0c]
        );
        assert_eq!(Record::decode(&b), r);
    }

    #[test]
    fn header_layout_is_pinned() {
        let h = Header {
            kind: StreamKind::Thread,
            clock: ClockSource::Monotonic,
            clock_hz: 1_000_000_000,
            pid: 7,
            tid: 8,
            rank: -1,
            base_time: 42,
        };
        let b = h.encode();
        assert_eq!(&b[0..8], b"CNTDSTRM");
        assert_eq!(&b[8..16], &[1, 0, 2, 1, 64, 0, 16, 0]);
        assert_eq!(&b[40..44], &[0xff; 4]);
        assert_eq!(
            u32::from_le_bytes(b[60..64].try_into().unwrap()),
            crc32fast::hash(&b[..60])
        );
    }
}
