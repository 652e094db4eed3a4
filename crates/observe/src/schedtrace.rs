//! Exact per-thread scheduler states from the kernel's sched tracepoints.
//!
//! Where perf may sample tracepoints system-wide (root, `CAP_PERFMON`, or
//! `kernel.perf_event_paranoid` = -1), [`SchedTracer`] opens `sched_switch`, `sched_wakeup`,
//! `sched_wakeup_new`, `sched_process_fork` and `sched_process_exit` on every online CPU and
//! turns their raw records into [`SchedEvent`]s: each thread's running / runnable / blocked
//! intervals to the nanosecond, where `/proc` schedstat sampling only sees totals every 10 ms.
//! Where it may not, [`SchedTracer::open`] says why in an [`Unavailable`], and the recorder
//! falls back to sampling (DESIGN §3: capabilities are detected, not assumed).
//!
//! Layers:
//! - [`format`](mod@format): pure parser of tracefs `format` files (field name -> offset, size, signed) and
//!   the `prev_state` decoder read from `sched_switch`'s `print fmt`.
//! - [`decode`](mod@decode): pure decoding of perf ring records into events; every length is checked, and a
//!   record that does not fit is counted as unparsed, never a panic.
//! - `ring` (private): the mmap'd perf ring of one CPU.
//! - [`SchedTracer`]: the live reader.
//!
//! Per CPU there is one ring: the four other tracepoints' events are redirected into
//! `sched_switch`'s with `PERF_EVENT_IOC_SET_OUTPUT`, so one CPU's events come out in the order
//! the kernel wrote them. Timestamps are CLOCK_MONOTONIC (`use_clockid`), comparable with
//! `clock_gettime(CLOCK_MONOTONIC)` in any process.
//!
//! What the stream can lack, and how the tracer says so:
//! - records the kernel dropped because a ring was full: [`SchedTracer::lost`] (reported late,
//!   once the ring has room) and [`SchedTracer::full_rings_seen`];
//! - events the kernel never delivered: some kernels drop tracepoints raised while certain
//!   tasks are current (this project's 6.18 Firecracker guest drops those of the idle task on
//!   some CPUs, and of its sandbox agent's threads; plain ftrace shows the same). A thread's
//!   switch in is then missing. [`SchedTracer::switch_gaps`] counts the breaks in each CPU's
//!   switch chain and [`SchedTracer::idle_exits_untraced`] names CPUs that never show a
//!   switch out of idle;
//! - the true waker: `sched_wakeup` of a wake-up queued to another CPU fires there, so
//!   `waker_tid` is what ran on that CPU; [`SchedTraceOptions::waker_from_waking`] uses
//!   `sched_waking`, which fires in the waker.
//!
//! Switch timestamps are wall time: on a VM a thread's running interval includes time the
//! hypervisor stole from its vCPU, which its schedstat CPU time does not.

pub mod decode;
pub mod format;
pub(crate) mod ring;

pub use decode::{SchedDecoder, SchedEvent, SchedFormats};
pub use format::{Field, PrevState, StateDecoder, TracepointFormat};

use perf_event_open_sys as sys;
use std::fmt;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use ring::Ring;

/// The tracepoints opened, in the order of [`SchedFormats`]; the first owns each CPU's ring.
pub const TRACEPOINTS: [&str; 5] = [
    "sched_switch",
    "sched_wakeup",
    "sched_wakeup_new",
    "sched_process_fork",
    "sched_process_exit",
];

/// What [`SchedTraceOptions::waker_from_waking`] opens instead of `sched_wakeup`.
pub const WAKING: &str = "sched_waking";

/// Largest ring accepted, in data pages per CPU (256 MiB with 4 KiB pages).
pub const MAX_RING_PAGES: usize = 1 << 16;

/// What one CPU's switches say about the completeness of its stream.
#[derive(Debug, Clone, Copy, Default)]
struct RingHealth {
    to_idle: u64,
    from_idle: u64,
    /// `next_tid` of the last switch seen on this CPU.
    last_next: Option<u32>,
    /// Switches whose `prev_tid` is not the previous switch's `next_tid`.
    gaps: u64,
}

/// Switches into idle seen, with none out of it, before a CPU counts as not tracing idle exits.
const IDLE_EVIDENCE: u64 = 16;

/// Free bytes under which a ring counts as full: more than the largest sched record (~110 B).
const FULL_SLACK: u64 = 512;

/// How to open a [`SchedTracer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedTraceOptions {
    /// Data pages per CPU ring, a power of two. 256 (1 MiB per CPU with 4 KiB pages) holds
    /// about 10 000 events (~100 bytes each): some 90 ms of the worst context-switch storm
    /// measured on the 2-vCPU dev machine (~110 000 events/s per CPU).
    pub ring_pages: usize,
    /// Open `sched_waking` (Linux 4.3+) instead of `sched_wakeup` for [`SchedEvent::Wakeup`]
    /// with `new_task: false`. `sched_waking` always fires in the waker's context, so
    /// `waker_tid` is the thread that did the wake-up; `sched_wakeup` fires where the task is
    /// queued, which for a wake-up queued to another CPU (TTWU_QUEUE) is that CPU, so
    /// `waker_tid` is then whatever ran there. The price: `ts_ns` is when the wake-up began
    /// (microseconds before the task is on a run queue), and `target_cpu` is the CPU the task
    /// last ran on (the kernel picks the final CPU after this event).
    pub waker_from_waking: bool,
}

impl Default for SchedTraceOptions {
    fn default() -> Self {
        SchedTraceOptions {
            ring_pages: 256,
            waker_from_waking: false,
        }
    }
}

/// Why sched tracepoints cannot be used here; `why` is one line a user can act on.
pub use trace::meta::Unavailable;

fn unavailable(why: impl Into<String>) -> Unavailable {
    Unavailable {
        what: "sched tracepoints".into(),
        why: why.into(),
    }
}

/// The live reader: per online CPU, one perf event per tracepoint, all writing into one
/// mmap'd ring. Dropping it disables the events, unmaps the rings and closes the descriptors.
pub struct SchedTracer {
    rings: Vec<Ring>,
    /// Per ring: continuity of its switch chain.
    health: Vec<RingHealth>,
    decoder: SchedDecoder,
    scratch: Vec<u8>,
    lost: u64,
    unparsed: u64,
    full: u64,
    last_error: Option<String>,
    tracefs: PathBuf,
    mounted_tracefs: bool,
    notes: Vec<String>,
    ring_pages: usize,
    page_size: usize,
    tracepoints: [&'static str; 5],
}

impl fmt::Debug for SchedTracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedTracer")
            .field("cpus", &self.cpus())
            .field("ring_pages", &self.ring_pages)
            .field("tracefs", &self.tracefs)
            .field("lost", &self.lost)
            .field("unparsed", &self.unparsed)
            .finish_non_exhaustive()
    }
}

impl SchedTracer {
    /// Opens the five tracepoints (`sched_switch`, `sched_wakeup`, `sched_wakeup_new`,
    /// `sched_process_fork`, `sched_process_exit`) system-wide on every online CPU (pid = -1,
    /// cpu = N), with `use_clockid` = CLOCK_MONOTONIC, `sample_type` TID|TIME|CPU|RAW,
    /// `sample_period` 1, and a ring of `ring_pages` data pages per CPU (a power of two). The
    /// kernel never blocks on a full ring: it drops records and reports them (see
    /// [`lost`](Self::lost)); poll wake-ups come at a quarter full ([`ring_fds`](Self::ring_fds)).
    ///
    /// Field offsets come from the tracepoints' `format` files under tracefs (a tracefs mount
    /// from `/proc/self/mounts`, `/sys/kernel/tracing`, or `/sys/kernel/debug/tracing`; when
    /// none is mounted, tracefs is mounted at `/sys/kernel/tracing` if permitted, and left
    /// mounted: see [`mounted_tracefs`](Self::mounted_tracefs)).
    ///
    /// The events are enabled only once every CPU is set up, so a failure leaves nothing open.
    pub fn open(ring_pages: usize) -> Result<SchedTracer, Unavailable> {
        SchedTracer::open_with(SchedTraceOptions {
            ring_pages,
            ..SchedTraceOptions::default()
        })
    }

    /// [`open`](Self::open) with options.
    pub fn open_with(opts: SchedTraceOptions) -> Result<SchedTracer, Unavailable> {
        let ring_pages = opts.ring_pages;
        if !ring_pages.is_power_of_two() || ring_pages > MAX_RING_PAGES {
            return Err(unavailable(format!(
                "ring_pages must be a power of two from 1 to {MAX_RING_PAGES}, not {ring_pages}"
            )));
        }
        // SAFETY: sysconf has no memory-safety preconditions.
        let page_size = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            n if n > 0 => n as usize,
            _ => 4096,
        };
        let (tracefs, mounted_tracefs) = find_tracefs()?;
        let mut tracepoints = TRACEPOINTS;
        if opts.waker_from_waking {
            tracepoints[1] = WAKING;
        }
        let (decoder, ids) = load_decoder(&tracefs, tracepoints)?;
        let online = read_small("/sys/devices/system/cpu/online")
            .map_err(|e| unavailable(format!("reading /sys/devices/system/cpu/online: {e}")))?;
        let cpus = topology::CpuSet::parse_list(&online)
            .map_err(|e| unavailable(format!("/sys/devices/system/cpu/online: {e}")))?;
        if cpus.is_empty() {
            return Err(unavailable("/sys/devices/system/cpu/online lists no CPU"));
        }
        let mut tracer = SchedTracer {
            rings: Vec::with_capacity(cpus.len()),
            health: Vec::new(),
            decoder,
            scratch: Vec::with_capacity(1 << 16),
            lost: 0,
            unparsed: 0,
            full: 0,
            last_error: None,
            tracefs,
            mounted_tracefs,
            notes: Vec::new(),
            ring_pages,
            page_size,
            tracepoints,
        };
        if mounted_tracefs {
            tracer.notes.push(format!(
                "mounted tracefs at {} (it was not mounted)",
                tracer.tracefs.display()
            ));
        }
        let wakeup_bytes = (ring_pages * page_size / 4).max(1);
        for cpu in cpus.iter() {
            let leader = match open_event(ids[0], cpu, wakeup_bytes) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                    // Went offline since we read the list: its events are not recorded.
                    tracer
                        .notes
                        .push(format!("CPU {cpu} went offline while opening; not traced"));
                    continue;
                }
                Err(e) => return Err(unavailable(explain_open(&e, tracepoints[0], cpu))),
            };
            let leader_fd = leader.as_raw_fd();
            let mut ring = Ring::map(cpu, leader, ring_pages, page_size)
                .map_err(|e| unavailable(explain_mmap(&e, ring_pages * page_size)))?;
            for (i, &id) in ids.iter().enumerate().skip(1) {
                let fd = open_event(id, cpu, wakeup_bytes)
                    .map_err(|e| unavailable(explain_open(&e, tracepoints[i], cpu)))?;
                // SAFETY: both descriptors are perf events we own, on the same CPU, same clock.
                let rc = unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), leader_fd) };
                if rc != 0 {
                    let e = io::Error::last_os_error();
                    return Err(unavailable(format!(
                        "PERF_EVENT_IOC_SET_OUTPUT(sched:{}) on CPU {cpu}: {e}",
                        tracepoints[i]
                    )));
                }
                ring.fds.push(fd);
            }
            tracer.rings.push(ring);
        }
        if tracer.rings.is_empty() {
            return Err(unavailable("no online CPU could be traced"));
        }
        tracer.health = vec![RingHealth::default(); tracer.rings.len()];
        for ring in &tracer.rings {
            for fd in &ring.fds {
                // SAFETY: ioctl on a perf event descriptor we own.
                if unsafe { sys::ioctls::ENABLE(fd.as_raw_fd(), 0) } != 0 {
                    let e = io::Error::last_os_error();
                    return Err(unavailable(format!(
                        "PERF_EVENT_IOC_ENABLE on CPU {}: {e}",
                        ring.cpu
                    )));
                }
            }
        }
        Ok(tracer)
    }

    /// Non-blocking: moves every record now in the rings into `out`, CPU after CPU; each CPU's
    /// events of one call are in time order (stable-sorted by `ts_ns`, which only reorders the
    /// rare record that an interrupt's event overtook). The caller merges CPUs by `ts_ns`.
    /// Such an overtaken record can also arrive one drain late, microseconds older than the
    /// last event of the previous drain: a merge across drains should allow that (sort a
    /// window, or the whole run, rather than assume each drain starts after the last).
    pub fn drain(&mut self, out: &mut Vec<SchedEvent>) {
        let SchedTracer {
            rings,
            health,
            decoder,
            scratch,
            lost,
            unparsed,
            full,
            last_error,
            ..
        } = self;
        for (ring, health) in rings.iter_mut().zip(health.iter_mut()) {
            if ring.pending().saturating_add(FULL_SLACK) >= ring.capacity() {
                *full += 1;
            }
            let start = out.len();
            let broken = ring.drain(scratch, |record| {
                match decoder.decode_record(record, lost) {
                    Ok(Some(ev)) => out.push(ev),
                    Ok(None) => {}
                    Err(e) => {
                        *unparsed += 1;
                        if last_error.is_none() {
                            *last_error = Some(e.0);
                        }
                    }
                }
            });
            if broken > 0 {
                *unparsed += broken;
                if last_error.is_none() {
                    *last_error = Some(format!(
                        "CPU {}: a record header had an impossible size; rest of the ring skipped",
                        ring.cpu
                    ));
                }
            }
            out[start..].sort_by_key(SchedEvent::ts_ns);
            for ev in &out[start..] {
                if let SchedEvent::Switch {
                    prev_tid, next_tid, ..
                } = *ev
                {
                    health.to_idle += u64::from(next_tid == 0);
                    health.from_idle += u64::from(prev_tid == 0);
                    if health.last_next.is_some_and(|n| n != prev_tid) {
                        health.gaps += 1;
                    }
                    health.last_next = Some(next_tid);
                }
            }
        }
    }

    /// Records the kernel said it lost (`PERF_RECORD_LOST`: the ring was full).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// How many times a drain found a ring (nearly) full: records were then probably dropped.
    /// The kernel reports their number with `PERF_RECORD_LOST` only once it can write again
    /// after a drain, so [`lost`](Self::lost) lags; a loss just before the tracer is dropped
    /// shows up only here.
    pub fn full_rings_seen(&self) -> u64 {
        self.full
    }

    /// Records this reader could not parse (counted, skipped).
    pub fn unparsed(&self) -> u64 {
        self.unparsed
    }

    /// Why the first unparsed record was rejected, for a note in the run's metadata.
    pub fn first_unparsed_reason(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// CPUs whose switches *out of* the idle task are evidently not traced: at least 16
    /// switches into idle seen and none out. Some kernels do not deliver tracepoints raised
    /// while a CPU's idle task is current (seen on a 6.18 Firecracker guest kernel with the
    /// haltpoll cpuidle driver, where plain ftrace shows the same); on those CPUs a thread's
    /// switch in after idle, and wake-ups raised by interrupts of the idle CPU, are missing:
    /// its running interval starts somewhere between the CPU's previous switch (into idle)
    /// and the thread's next event.
    pub fn idle_exits_untraced(&self) -> Vec<u32> {
        self.rings
            .iter()
            .zip(&self.health)
            .filter(|(_, i)| i.to_idle >= IDLE_EVIDENCE && i.from_idle == 0)
            .map(|(r, _)| r.cpu)
            .collect()
    }

    /// Breaks in the CPUs' switch chains so far: switches whose `prev_tid` is not the
    /// `next_tid` of the switch before it on the same CPU, so at least one switch between them
    /// was not delivered. Lost records (ring full) cause them, and so do kernels that drop
    /// tracepoints raised in some tasks' context (see
    /// [`idle_exits_untraced`](Self::idle_exits_untraced); this project's 6.18 Firecracker
    /// guest also drops those of its sandbox agent's threads). Where a chain breaks, the
    /// `prev_tid` task ran from some time after the previous switch on that CPU.
    pub fn switch_gaps(&self) -> u64 {
        self.health.iter().map(|h| h.gaps).sum()
    }

    /// The CPUs traced, ascending.
    pub fn cpus(&self) -> Vec<u32> {
        self.rings.iter().map(|r| r.cpu).collect()
    }

    /// Data pages per CPU ring, and the page size in bytes.
    pub fn ring_size(&self) -> (usize, usize) {
        (self.ring_pages, self.page_size)
    }

    /// Bytes waiting in the fullest ring: drain sooner when this nears the ring size.
    pub fn pending_bytes(&self) -> u64 {
        self.rings.iter().map(Ring::pending).max().unwrap_or(0)
    }

    /// One descriptor per CPU ring, readable (POLLIN) when the ring is a quarter full.
    pub fn ring_fds(&self) -> Vec<RawFd> {
        self.rings
            .iter()
            .filter_map(|r| r.fds.first().map(AsRawFd::as_raw_fd))
            .collect()
    }

    /// The tracepoints opened, in [`SchedFormats`] order.
    pub fn tracepoints(&self) -> [&'static str; 5] {
        self.tracepoints
    }

    /// The tracefs directory the formats were read from.
    pub fn tracefs(&self) -> &Path {
        &self.tracefs
    }

    /// True when `open` mounted tracefs itself (it stays mounted).
    pub fn mounted_tracefs(&self) -> bool {
        self.mounted_tracefs
    }

    /// How `prev_state` is decoded on this kernel, one line for the run's metadata.
    pub fn state_decoding(&self) -> &str {
        self.decoder.state_decoder().source()
    }

    /// Things worth telling the user once (tracefs mounted, a CPU skipped).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

impl Drop for SchedTracer {
    fn drop(&mut self) {
        for ring in &self.rings {
            for fd in &ring.fds {
                // SAFETY: ioctl on a perf event descriptor we own; failure is harmless here.
                unsafe {
                    sys::ioctls::DISABLE(fd.as_raw_fd(), 0);
                }
            }
        }
        // Each Ring unmaps in its Drop, then its descriptors close.
        self.rings.clear();
    }
}

/// Reads the five formats `names` (in [`SchedFormats`] order: [`TRACEPOINTS`], or with
/// [`WAKING`] second) under `tracefs/events/sched/` and builds the decoder; also returns
/// the tracepoint IDs in that order.
pub fn load_decoder(
    tracefs: &Path,
    names: [&str; 5],
) -> Result<(SchedDecoder, [u64; 5]), Unavailable> {
    let mut formats = Vec::with_capacity(names.len());
    for name in names {
        let path = tracefs.join("events/sched").join(name).join("format");
        let text = read_small(&path).map_err(|e| {
            unavailable(match e.kind() {
                io::ErrorKind::NotFound => format!(
                    "tracepoint sched:{name} is missing ({} does not exist; kernel built without it?)",
                    path.display()
                ),
                io::ErrorKind::PermissionDenied => format!(
                    "reading {}: permission denied (tracefs is root-only by default); run as root",
                    path.display()
                ),
                _ => format!("reading {}: {e}", path.display()),
            })
        })?;
        let f = TracepointFormat::parse(&text)
            .map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        formats.push(f);
    }
    let decoder = SchedDecoder::new(SchedFormats {
        switch: &formats[0],
        wakeup: &formats[1],
        wakeup_new: &formats[2],
        fork: &formats[3],
        exit: &formats[4],
    })
    .map_err(|e| unavailable(e.0))?;
    let ids = [
        formats[0].id,
        formats[1].id,
        formats[2].id,
        formats[3].id,
        formats[4].id,
    ];
    Ok((decoder, ids))
}

/// Reads a small pseudo-file (at most 1 MiB).
pub(crate) fn read_small(path: impl AsRef<Path>) -> io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(1 << 20)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Tracefs mount points listed in a mounts table (`/proc/self/mounts` text), in order.
pub fn tracefs_mounts(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_dev, dir, fstype) = (it.next()?, it.next()?, it.next()?);
            (fstype == "tracefs").then(|| PathBuf::from(unescape_mount(dir)))
        })
        .collect()
}

/// Undoes the octal escapes (`\040` for a space) of a mounts-table path.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if let Some(&[a, b1, c]) = b.get(i + 1..i + 4) {
                let oct = |d: u8| (b'0'..=b'7').contains(&d).then(|| u32::from(d - b'0'));
                if let (Some(a), Some(b1), Some(c)) = (oct(a), oct(b1), oct(c)) {
                    if let Ok(v) = u8::try_from(a * 64 + b1 * 8 + c) {
                        out.push(v);
                        i += 4;
                        continue;
                    }
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Finds a tracefs with the sched events, mounting one at /sys/kernel/tracing if none is
/// mounted and we may. Returns the directory and whether we mounted it.
pub(crate) fn find_tracefs() -> Result<(PathBuf, bool), Unavailable> {
    let mut candidates = read_small("/proc/self/mounts")
        .map(|m| tracefs_mounts(&m))
        .unwrap_or_default();
    candidates.push(PathBuf::from("/sys/kernel/tracing"));
    candidates.push(PathBuf::from("/sys/kernel/debug/tracing"));
    let mut denied = None;
    for dir in &candidates {
        match std::fs::metadata(dir.join("events/sched/sched_switch")) {
            Ok(_) => return Ok((dir.clone(), false)),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                denied.get_or_insert_with(|| dir.clone());
            }
            Err(_) => {}
        }
    }
    if let Some(dir) = denied {
        return Err(unavailable(format!(
            "tracefs at {} is not readable (root-only by default); run as root",
            dir.display()
        )));
    }
    let target = Path::new("/sys/kernel/tracing");
    if !target.is_dir() {
        return Err(unavailable(
            "no tracefs: /sys/kernel/tracing does not exist and no tracefs is mounted (kernel built without CONFIG_TRACING?)",
        ));
    }
    // SAFETY: all arguments are NUL-terminated C strings; data is NULL, as tracefs allows.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                "contend may not mount it (needs CAP_SYS_ADMIN in the initial namespace)"
                    .to_string()
            }
            Some(libc::ENODEV) => {
                "the kernel has no tracefs (built without CONFIG_TRACING)".to_string()
            }
            _ => format!("mount failed: {e}"),
        };
        return Err(unavailable(format!(
            "tracefs is not mounted and {why}; as root run `mount -t tracefs nodev /sys/kernel/tracing`"
        )));
    }
    if target.join("events/sched/sched_switch").exists() {
        Ok((target.to_path_buf(), true))
    } else {
        Err(unavailable(
            "tracefs has no events/sched/sched_switch (kernel built without sched tracepoints?)",
        ))
    }
}

/// Opens one tracepoint event on one CPU for all tasks, disabled.
fn open_event(id: u64, cpu: u32, wakeup_bytes: usize) -> io::Result<OwnedFd> {
    let mut attr = sys::bindings::perf_event_attr::default();
    attr.type_ = sys::bindings::PERF_TYPE_TRACEPOINT;
    attr.size = std::mem::size_of::<sys::bindings::perf_event_attr>() as u32;
    attr.config = id;
    attr.sample_type = u64::from(
        sys::bindings::PERF_SAMPLE_TID
            | sys::bindings::PERF_SAMPLE_TIME
            | sys::bindings::PERF_SAMPLE_CPU
            | sys::bindings::PERF_SAMPLE_RAW,
    );
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.sample_period = 1;
    attr.wakeup_watermark = u32::try_from(wakeup_bytes).unwrap_or(u32::MAX);
    attr.set_watermark(1);
    attr.set_disabled(1);
    attr.set_use_clockid(1);
    let cpu = libc::c_int::try_from(cpu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: attr is a fully initialised perf_event_attr of the size it declares.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            -1,
            cpu,
            -1,
            libc::c_ulong::from(sys::bindings::PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: perf_event_open returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn errno_name(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENFILE) => "ENFILE",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::ENODEV) => "ENODEV",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::E2BIG) => "E2BIG",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        _ => return e.to_string(),
    };
    name.to_string()
}

/// Effective capabilities of this process, from `/proc/self/status` (`CapEff:`).
pub(crate) fn effective_caps() -> u64 {
    read_small("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

pub(crate) const CAP_SYS_ADMIN: u32 = 21;
const CAP_IPC_LOCK: u32 = 14;
pub(crate) const CAP_PERFMON: u32 = 38;

/// Explains a perf_event_open failure in words a user can act on.
fn explain_open(e: &io::Error, tracepoint: &str, cpu: u32) -> String {
    let what = format!(
        "perf_event_open(sched:{tracepoint}) on CPU {cpu}: {}",
        errno_name(e)
    );
    let paranoid = read_small("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .map(|s| s.trim().to_string());
    let caps = effective_caps();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let privileged = root || caps & (1 << CAP_PERFMON) != 0 || caps & (1 << CAP_SYS_ADMIN) != 0;
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) if !privileged => format!(
            "{what}: perf_event_paranoid is {} and contend is not root (no CAP_PERFMON); run as root, grant CAP_PERFMON, or set kernel.perf_event_paranoid=-1",
            paranoid.as_deref().unwrap_or("unknown")
        ),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "{what}: refused although contend is privileged: a seccomp filter, container or security module (lockdown, SELinux) denies system-wide perf events"
        ),
        Some(libc::ENOSYS) => format!(
            "{what}: the kernel has no perf events (CONFIG_PERF_EVENTS off) or a seccomp filter hides the syscall"
        ),
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => format!(
            "{what}: the kernel does not offer this tracepoint to perf (CONFIG_EVENT_TRACING?)"
        ),
        Some(libc::EINVAL) | Some(libc::E2BIG) => format!(
            "{what}: the kernel rejected the event attributes (a CLOCK_MONOTONIC clockid needs Linux 4.1 or later)"
        ),
        Some(libc::EMFILE) | Some(libc::ENFILE) => format!(
            "{what}: out of file descriptors (5 per CPU are needed); raise `ulimit -n`"
        ),
        _ => format!("{what}: {e}"),
    }
}

/// Explains an mmap failure of a perf ring.
pub(crate) fn explain_mmap(e: &io::Error, bytes: usize) -> String {
    let limit = read_small("/proc/sys/kernel/perf_event_mlock_kb")
        .ok()
        .map(|s| s.trim().to_string());
    let caps = effective_caps();
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOMEM) if caps & (1 << CAP_IPC_LOCK) == 0 => format!(
            "mapping a {} KiB perf ring: {}: more than kernel.perf_event_mlock_kb ({} KiB) allows without CAP_IPC_LOCK; use fewer ring pages or raise the limit",
            bytes / 1024,
            errno_name(e),
            limit.as_deref().unwrap_or("unknown")
        ),
        _ => format!("mapping a {} KiB perf ring: {e}", bytes / 1024),
    }
}

#[cfg(test)]
mod tests;
