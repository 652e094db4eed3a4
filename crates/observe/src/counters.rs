//! Per-program counters through `perf_event_open(2)`: cycles, instructions, last-level-cache
//! references and misses and a memory-stall event where the CPU has a hardware PMU, and the
//! software events task-clock and context-switches everywhere.
//!
//! # Launched programs ([`CounterSet::for_children`])
//!
//! The counters are opened on the *calling thread* (pid 0, cpu -1) just before the program is
//! spawned, with `disabled`, `inherit` and `enable_on_exec` set and one fd per event (no group
//! reads: older kernels refuse `inherit` with `PERF_FORMAT_GROUP` reads). At fork the child
//! inherits them, still disabled; its `exec` enables them; every thread and process it creates
//! after that inherits enabled copies; and when each of those tasks exits its counts and times
//! are folded into the fds held here. The opening thread never execs, so its own work is never
//! counted, and neither is that of threads it spawns later (they inherit disabled copies that
//! only an `exec` would enable) — see the live test `sibling_thread_not_counted`.
//!
//! So: call it on the thread that spawns the program, spawn at once, and [`CounterSet::read`]
//! only after the program has exited and been reaped. What is not counted: a descendant still
//! running when the read happens (a daemon that outlived its parent), and any other process the
//! opening thread forks and execs while the set is open (open, spawn the program, and spawn
//! nothing else from that thread before the read).
//!
//! # Attached programs ([`CounterSet::for_threads`])
//!
//! One fd per existing thread (pid = tid, `inherit` so threads it creates later are folded in
//! when they exit), enabled at once, summed at read. Not counted:
//! - work done before the attach;
//! - a thread created between the enumeration of `/proc/PID/task` and the opening of its
//!   creator's fd (it is inherited only from a creator that was already open when it was made);
//! - a thread that exits between enumeration and open (`ESRCH`, skipped silently);
//! - threads created after the attach that are still running at the read: `inherit` folds a
//!   task's counts into its creator's fd only when the task exits.
//!
//! # Multiplexing
//!
//! When more events are open than the PMU has counters, the kernel time-slices them and the
//! count covers only `running` of the `enabled` time. [`Reading::value`] is then the estimate
//! `raw × enabled / running` ([`scale`]) and [`Reading::estimated`] says so; a reading that was
//! enabled but never ran has no estimate at all ([`Reading::estimate`] is `None`, shown n/a).
//!
//! # Which event measures what
//!
//! [`event_for`] chooses the event per counter from `/proc/cpuinfo`: the kernel's generic
//! `cache-references`/`cache-misses` are the last-level cache only on Intel (architectural
//! `LONGEST_LAT_CACHE.REFERENCE`/`.MISS`); on AMD they count L2 requests, so there the LLC
//! counters are reported unavailable. [`memory_stall_choice`] documents the stall event per
//! vendor and model. Without a PMU (most VMs) the hardware counters are unavailable with one
//! reason, and the recorder falls back to on-CPU time ([`FALLBACK`]).

use perf_event_open_sys as sys;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

/// A quantity `contend record` can count for a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Counter {
    Cycles,
    Instructions,
    LlcReferences,
    LlcMisses,
    MemoryStalls,
    TaskClock,
    ContextSwitches,
}

impl Counter {
    /// The kebab-case name used in meta.json and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Cycles => "cycles",
            Counter::Instructions => "instructions",
            Counter::LlcReferences => "llc-references",
            Counter::LlcMisses => "llc-misses",
            Counter::MemoryStalls => "memory-stalls",
            Counter::TaskClock => "task-clock",
            Counter::ContextSwitches => "context-switches",
        }
    }

    /// A name for people: the `what` of an [`Unavailable`].
    pub fn label(self) -> &'static str {
        match self {
            Counter::Cycles => "cycles",
            Counter::Instructions => "instructions",
            Counter::LlcReferences => "LLC references",
            Counter::LlcMisses => "LLC misses",
            Counter::MemoryStalls => "memory stalls",
            Counter::TaskClock => "task-clock",
            Counter::ContextSwitches => "context switches",
        }
    }

    /// The unit of [`Reading::value`].
    pub fn unit(self) -> &'static str {
        match self {
            Counter::Cycles | Counter::MemoryStalls => "cycles",
            Counter::Instructions => "instructions",
            Counter::LlcReferences => "references",
            Counter::LlcMisses => "misses",
            Counter::TaskClock => "ns",
            Counter::ContextSwitches => "switches",
        }
    }

    /// Whether it needs a hardware PMU.
    pub fn is_hardware(self) -> bool {
        !matches!(self, Counter::TaskClock | Counter::ContextSwitches)
    }
}

/// The hardware set the recorder asks for: cycles, instructions, LLC refs/misses, memory stalls.
pub const HARDWARE: &[Counter] = &[
    Counter::Cycles,
    Counter::Instructions,
    Counter::LlcReferences,
    Counter::LlcMisses,
    Counter::MemoryStalls,
];

/// The software set, available wherever perf events are: on-CPU time (the measure of work
/// when there is no PMU) and context switches.
pub const FALLBACK: &[Counter] = &[Counter::TaskClock, Counter::ContextSwitches];

/// One counter after the program ran.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Reading {
    pub counter: Counter,
    /// The event in perf's syntax, e.g. `cycles`, `cpu/event=0xa3,umask=0x14,cmask=20/`; a `:u`
    /// suffix when only user space could be counted (perf_event_paranoid).
    pub event: String,
    /// The count, scaled for multiplexing: `raw × enabled_ns / running_ns` ([`scale`]). Zero
    /// and meaningless when [`Reading::estimate`] is `None`.
    pub value: u64,
    /// The count as read.
    pub raw: u64,
    /// Time the event was enabled (summed over the tasks and threads counted), ns.
    pub enabled_ns: u64,
    /// Time the event was actually on a counter, ns; less than `enabled_ns` when multiplexed.
    pub running_ns: u64,
}

impl Reading {
    /// The counter was time-shared with others: [`Reading::value`] is an estimate.
    pub fn estimated(&self) -> bool {
        self.running_ns < self.enabled_ns
    }

    /// The value, or `None` when the event was enabled but never got a counter (n/a).
    pub fn estimate(&self) -> Option<u64> {
        scale(self.raw, self.enabled_ns, self.running_ns)
    }
}

/// A counter that could not be had, and why, in words a user can act on.
pub use trace::meta::Unavailable;

/// Joins entries that share a reason, so a machine without a PMU says so once:
/// `cycles, instructions, LLC references, LLC misses, memory stalls: no hardware PMU ...`.
pub fn merge_unavailable(list: &[Unavailable]) -> Vec<Unavailable> {
    let mut out: Vec<Unavailable> = Vec::new();
    for u in list {
        match out.iter_mut().find(|o| o.why == u.why) {
            Some(o) => {
                o.what.push_str(", ");
                o.what.push_str(&u.what);
            }
            None => out.push(u.clone()),
        }
    }
    out
}

/// Multiplexing scale: `raw × enabled / running`, in 128-bit arithmetic, saturating at
/// `u64::MAX`. `None` when the event was enabled but never ran (nothing to scale); a count that
/// was never enabled is its raw value (zero).
pub fn scale(raw: u64, enabled_ns: u64, running_ns: u64) -> Option<u64> {
    if running_ns == 0 {
        return if enabled_ns == 0 { Some(raw) } else { None };
    }
    if running_ns >= enabled_ns {
        return Some(raw);
    }
    let v = raw as u128 * enabled_ns as u128 / running_ns as u128;
    Some(u64::try_from(v).unwrap_or(u64::MAX))
}

/// A concrete perf event: `type` and `config` of `perf_event_attr`, and its name in perf syntax.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Event {
    pub name: String,
    pub type_: u32,
    pub config: u64,
}

impl Event {
    fn generic_hw(name: &str, id: u32) -> Event {
        Event {
            name: name.into(),
            type_: sys::bindings::PERF_TYPE_HARDWARE,
            config: id as u64,
        }
    }

    fn software(name: &str, id: u32) -> Event {
        Event {
            name: name.into(),
            type_: sys::bindings::PERF_TYPE_SOFTWARE,
            config: id as u64,
        }
    }

    fn ll_cache_read(name: &str, result: u32) -> Event {
        use sys::bindings::*;
        Event {
            name: name.into(),
            type_: PERF_TYPE_HW_CACHE,
            config: PERF_COUNT_HW_CACHE_LL as u64
                | (PERF_COUNT_HW_CACHE_OP_READ as u64) << 8
                | (result as u64) << 16,
        }
    }

    fn is_hardware(&self) -> bool {
        self.type_ != sys::bindings::PERF_TYPE_SOFTWARE
    }
}

/// The memory-stall event a CPU offers, with what it counts and where the encoding comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct StallEvent {
    pub event: Event,
    /// What the event counts, in one line.
    pub counts: String,
    /// Why this event and this encoding (the source).
    pub source: String,
}

/// The vendor, family, model and stepping of the first CPU in `/proc/cpuinfo` (x86 fields;
/// absent elsewhere).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuId {
    pub vendor: String,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub stepping: Option<u32>,
}

impl CpuId {
    pub fn parse(cpuinfo: &str) -> CpuId {
        let mut id = CpuId::default();
        for line in cpuinfo.lines() {
            if line.trim().is_empty() && !id.vendor.is_empty() {
                break; // end of the first processor's block
            }
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "vendor_id" => id.vendor = value.to_string(),
                "cpu family" => id.family = value.parse().ok(),
                "model" => id.model = value.parse().ok(),
                "stepping" => id.stepping = value.parse().ok(),
                _ => {}
            }
        }
        id
    }

    fn is_intel(&self) -> bool {
        self.vendor == "GenuineIntel"
    }

    fn is_amd(&self) -> bool {
        self.vendor == "AuthenticAMD"
    }
}

/// Intel family 6 models whose `CYCLE_ACTIVITY.STALLS_MEM_ANY` encoding was checked against
/// the kernel's perf event tables (tools/perf/pmu-events/arch/x86/{skylake,skylakex}/
/// pipeline.json: EventCode 0xA3, UMask 0x14, CounterMask 20), with perf's model map
/// (mapfile.csv: `GenuineIntel-6-(4E|5E|8E|9E|A5|A6)` → skylake, `GenuineIntel-6-55-[01234]` →
/// skylakex): Skylake, Kaby Lake, Coffee Lake, Comet Lake client parts and Skylake-SP.
fn intel_stalls_mem_any(model: u32, stepping: Option<u32>) -> bool {
    match model {
        0x4e | 0x5e | 0x8e | 0x9e | 0xa5 | 0xa6 => true,
        0x55 => stepping.is_some_and(|s| s <= 4),
        _ => false,
    }
}

/// Which memory-stall event this CPU offers (from /proc/cpuinfo vendor/family/model), or why
/// none is offered. Pure.
///
/// - Intel Skylake-family cores: the raw event `CYCLE_ACTIVITY.STALLS_MEM_ANY`
///   (`cpu/event=0xa3,umask=0x14,cmask=20/`), execution-stall cycles while any load is
///   outstanding — including loads waiting for a line held by another core, which is what
///   contention costs. (`STALLS_L3_MISS` was not chosen: a contended line is usually served from
///   another core's cache, not from DRAM, so it would miss most of it.) Other Intel models: not
///   offered until their encoding is checked.
/// - AMD before Zen 2 (family < 0x17, and Zen 1: family 0x17 models 0x00–0x2f, 0x50–0x5f): the
///   generic `stalled-cycles-backend`, which the kernel maps (arch/x86/events/amd/core.c) to
///   PMCx0D1 "dispatch stalls" before Zen and to PMCx087 umask 1 (instruction-fetch stalls
///   from back-end back-pressure) on Zen 1 — back-end stalls of every cause, a proxy.
/// - AMD Zen 2 and later: not offered. They do not implement PMCx087, and since Linux 6.9
///   (commit c7b2edd8377b) the kernel maps no back-end stall event for them ("no direct
///   replacement"); older kernels still map it, so the choice is made from the model, not
///   from whether the open succeeds.
/// - Other vendors: not offered.
pub fn memory_stall_choice(cpuinfo: &str) -> Result<StallEvent, String> {
    let id = CpuId::parse(cpuinfo);
    let (family, model) = (id.family.unwrap_or(0), id.model.unwrap_or(0));
    if id.is_intel() {
        if family == 6 && intel_stalls_mem_any(model, id.stepping) {
            return Ok(StallEvent {
                event: Event {
                    name: "cpu/event=0xa3,umask=0x14,cmask=20/".into(),
                    type_: sys::bindings::PERF_TYPE_RAW,
                    // IA32_PERFEVTSEL layout: event select 7:0, umask 15:8, counter mask 31:24.
                    config: 0xa3 | 0x14 << 8 | 20 << 24,
                },
                counts: "CYCLE_ACTIVITY.STALLS_MEM_ANY: execution-stall cycles while the \
                         memory subsystem has an outstanding load"
                    .into(),
                source: "Linux tools/perf/pmu-events/arch/x86/skylake and skylakex \
                         pipeline.json (EventCode 0xA3, UMask 0x14, CounterMask 20)"
                    .into(),
            });
        }
        return Err(format!(
            "no memory-stall event is offered for Intel family {family} model {model:#04x}: \
             its encoding has not been checked (checked: Skylake client and Skylake-SP cores)"
        ));
    }
    if id.is_amd() {
        let zen1 = family == 0x17 && matches!(model, 0x00..=0x2f | 0x50..=0x5f);
        if (family > 0 && family < 0x17) || zen1 {
            return Ok(StallEvent {
                event: Event::generic_hw(
                    "stalled-cycles-backend",
                    sys::bindings::PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
                ),
                counts: if zen1 {
                    "stalled-cycles-backend (kernel: PMCx087 umask 1, fetch stalls from \
                     back-end back-pressure): back-end stalls of every cause, a proxy for \
                     memory stalls"
                        .into()
                } else {
                    "stalled-cycles-backend (kernel: PMCx0D1, dispatch stalls): back-end \
                     stalls of every cause, a proxy for memory stalls"
                        .into()
                },
                source: "Linux arch/x86/events/amd/core.c generic event map".into(),
            });
        }
        return Err(format!(
            "no memory-stall event is offered for AMD family {family:#x} model {model:#x} \
             (Zen 2 or later): the CPU lacks PMCx087 and the kernel maps no back-end stall \
             event for it"
        ));
    }
    let vendor = if id.vendor.is_empty() {
        "this CPU (no vendor_id in /proc/cpuinfo)".to_string()
    } else {
        format!("vendor {}", id.vendor)
    };
    Err(format!("no memory-stall event is known for {vendor}"))
}

/// Which memory-stall event this CPU offers (from /proc/cpuinfo vendor/family/model); see
/// [`memory_stall_choice`] for the reason per vendor and for why none is offered.
pub fn memory_stall_event(cpuinfo: &str) -> Option<StallEvent> {
    memory_stall_choice(cpuinfo).ok()
}

/// The event that measures `counter` on this CPU, or why there is none. Pure.
pub fn event_for(counter: Counter, cpuinfo: &str) -> Result<Event, String> {
    use sys::bindings::*;
    let id = CpuId::parse(cpuinfo);
    let amd_llc = "not offered on AMD: the kernel's generic cache events count L2 requests \
                   there, and the L3 is counted only by the per-CCX amd_l3 PMU, which cannot \
                   count one program";
    Ok(match counter {
        Counter::Cycles => Event::generic_hw("cycles", PERF_COUNT_HW_CPU_CYCLES),
        Counter::Instructions => Event::generic_hw("instructions", PERF_COUNT_HW_INSTRUCTIONS),
        // Intel: the kernel maps these to the architectural LONGEST_LAT_CACHE.REFERENCE/.MISS.
        Counter::LlcReferences if id.is_intel() => {
            Event::generic_hw("cache-references", PERF_COUNT_HW_CACHE_REFERENCES)
        }
        Counter::LlcMisses if id.is_intel() => {
            Event::generic_hw("cache-misses", PERF_COUNT_HW_CACHE_MISSES)
        }
        Counter::LlcReferences | Counter::LlcMisses if id.is_amd() => {
            return Err(amd_llc.to_string())
        }
        // Elsewhere: the kernel's last-level-cache read events, where it maps them.
        Counter::LlcReferences => {
            Event::ll_cache_read("LLC-loads", PERF_COUNT_HW_CACHE_RESULT_ACCESS)
        }
        Counter::LlcMisses => {
            Event::ll_cache_read("LLC-load-misses", PERF_COUNT_HW_CACHE_RESULT_MISS)
        }
        Counter::MemoryStalls => memory_stall_choice(cpuinfo)?.event,
        Counter::TaskClock => Event::software("task-clock", PERF_COUNT_SW_TASK_CLOCK),
        Counter::ContextSwitches => {
            Event::software("context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES)
        }
    })
}

/// The hardware (core) PMU the kernel registered, by its name under
/// `/sys/bus/event_source/devices` (`cpu` on x86, `cpu_core`/`cpu_atom` on hybrid Intel,
/// `armv8_*` on Arm), or `None`: then no hardware event can be counted.
pub fn hardware_pmu(sysfs_devices: &Path) -> Option<String> {
    for name in ["cpu", "cpu_core", "cpu_atom"] {
        if sysfs_devices.join(name).exists() {
            return Some(name.to_string());
        }
    }
    let mut arm: Vec<String> = std::fs::read_dir(sysfs_devices)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("armv") || n.starts_with("arm_cortex"))
        .collect();
    arm.sort();
    arm.into_iter().next()
}

const SYSFS_DEVICES: &str = "/sys/bus/event_source/devices";

fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Why `perf_event_open` refused `event`, for a user. `pmu` is [`hardware_pmu`]'s answer,
/// `paranoid` the value of kernel.perf_event_paranoid. Pure.
pub fn open_error_reason(
    errno: i32,
    event: &Event,
    pmu: Option<&str>,
    paranoid: Option<i32>,
) -> String {
    let name = &event.name;
    match errno {
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV if event.is_hardware() && pmu.is_none() => {
            "no PMU on this machine (a VM without a virtual PMU?): the kernel registered no \
             hardware event source"
                .to_string()
        }
        libc::ENOENT => format!("the kernel maps no `{name}` event for this CPU"),
        libc::EOPNOTSUPP | libc::ENODEV => format!(
            "the {} PMU cannot count `{name}` for one program",
            pmu.unwrap_or("hardware")
        ),
        libc::EACCES | libc::EPERM => {
            let mut s = String::from("not permitted");
            if let Some(p) = paranoid {
                let _ = write!(s, " (kernel.perf_event_paranoid = {p})");
            }
            s.push_str(
                ": run as root or with CAP_PERFMON, or set kernel.perf_event_paranoid to 1 or \
                 less (sysctl); attaching also needs ptrace permission on the target",
            );
            s
        }
        libc::EMFILE | libc::ENFILE => "out of file descriptors (one per event and thread): \
                                        raise the limit (ulimit -n)"
            .to_string(),
        libc::ESRCH => "the target exited".to_string(),
        libc::ENOSYS => {
            "this kernel has no perf events (built without CONFIG_PERF_EVENTS)".to_string()
        }
        libc::EINVAL => format!("the kernel rejected `{name}` as configured (EINVAL)"),
        _ => format!(
            "perf_event_open(`{name}`) failed: {}",
            io::Error::from_raw_os_error(errno)
        ),
    }
}

#[derive(Clone, Copy)]
enum Mode {
    /// Disabled, inherited, enabled at the child's exec.
    Children,
    /// Enabled now, inherited by threads the target creates.
    Thread,
}

/// Opens one event; on EACCES/EPERM retries counting user space only, which
/// perf_event_paranoid = 2 still allows. Returns the fd and whether it is user-only.
fn open_event(event: &Event, pid: i32, mode: Mode) -> Result<(OwnedFd, bool), i32> {
    match open_raw(event, pid, mode, false) {
        Ok(fd) => Ok((fd, false)),
        Err(e) if e == libc::EACCES || e == libc::EPERM => {
            open_raw(event, pid, mode, true).map(|fd| (fd, true))
        }
        Err(e) => Err(e),
    }
}

fn open_raw(event: &Event, pid: i32, mode: Mode, user_only: bool) -> Result<OwnedFd, i32> {
    use sys::bindings::*;
    let mut attr = perf_event_attr::default();
    attr.type_ = event.type_;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    attr.config = event.config;
    attr.read_format = (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
    attr.set_inherit(1);
    if let Mode::Children = mode {
        attr.set_disabled(1);
        attr.set_enable_on_exec(1);
    }
    if user_only {
        attr.set_exclude_kernel(1);
        attr.set_exclude_hv(1);
    }
    // SAFETY: `attr` is a fully initialised perf_event_attr whose size field matches its type;
    // the events only count, they neither sample nor map memory.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            pid,
            -1,
            -1,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    // SAFETY: perf_event_open returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

struct Opened {
    counter: Counter,
    event: String,
    fds: Vec<File>,
}

/// Counters open for one program: one fd per event (launched) or per event and thread
/// (attached). Closing happens on drop.
pub struct CounterSet {
    opened: Vec<Opened>,
}

impl CounterSet {
    /// Opens what exists of `wanted` on this thread for the program it will spawn next (see the
    /// module docs). Never fails as a whole: what cannot be opened is returned in the second
    /// value with its reason.
    pub fn for_children(wanted: &[Counter]) -> (CounterSet, Vec<Unavailable>) {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Self::open_all(wanted, &cpuinfo, &[0], Mode::Children)
    }

    /// Opens what exists of `wanted` on each of `tids` (a running program's threads, from
    /// `/proc/PID/task`), counting from now on; see the module docs for what is not counted.
    pub fn for_threads(tids: &[u32], wanted: &[Counter]) -> (CounterSet, Vec<Unavailable>) {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let pids: Vec<i32> = tids.iter().filter_map(|&t| i32::try_from(t).ok()).collect();
        Self::open_all(wanted, &cpuinfo, &pids, Mode::Thread)
    }

    fn open_all(
        wanted: &[Counter],
        cpuinfo: &str,
        pids: &[i32],
        mode: Mode,
    ) -> (CounterSet, Vec<Unavailable>) {
        let pmu = hardware_pmu(Path::new(SYSFS_DEVICES));
        let mut opened = Vec::new();
        let mut missing = Vec::new();
        let mut seen = Vec::new();
        let no_pmu_probe = Event::generic_hw("cycles", sys::bindings::PERF_COUNT_HW_CPU_CYCLES);
        for &counter in wanted {
            if seen.contains(&counter) {
                continue;
            }
            seen.push(counter);
            let unavailable = |why: String| Unavailable {
                what: counter.label().to_string(),
                why,
            };
            let event = match event_for(counter, cpuinfo) {
                Ok(e) => e,
                // No PMU at all is the reason that matters, whatever this model would offer.
                Err(_) if pmu.is_none() => {
                    let why = open_error_reason(libc::ENOENT, &no_pmu_probe, None, None);
                    missing.push(unavailable(why));
                    continue;
                }
                Err(why) => {
                    missing.push(unavailable(why));
                    continue;
                }
            };
            match open_on(&event, pids, mode) {
                Ok((fds, user_only)) => {
                    let mut name = event.name.clone();
                    if user_only {
                        name.push_str(":u");
                    }
                    opened.push(Opened {
                        counter,
                        event: name,
                        fds,
                    });
                }
                Err(errno) => {
                    let why = open_error_reason(errno, &event, pmu.as_deref(), paranoid());
                    missing.push(unavailable(why));
                }
            }
        }
        (CounterSet { opened }, missing)
    }

    /// The counts so far, one [`Reading`] per open counter, in the order asked for. For a
    /// launched program, read after it has exited and been reaped. A counter whose fd cannot be
    /// read is left out.
    pub fn read(&self) -> Vec<Reading> {
        let mut out = Vec::with_capacity(self.opened.len());
        'counters: for o in &self.opened {
            let (mut raw, mut enabled, mut running) = (0u64, 0u64, 0u64);
            for f in &o.fds {
                let Ok([v, e, r]) = read_values(f) else {
                    continue 'counters;
                };
                raw = raw.saturating_add(v);
                enabled = enabled.saturating_add(e);
                running = running.saturating_add(r);
            }
            out.push(Reading {
                counter: o.counter,
                event: o.event.clone(),
                value: scale(raw, enabled, running).unwrap_or(0),
                raw,
                enabled_ns: enabled,
                running_ns: running,
            });
        }
        out
    }

    /// Nothing could be opened.
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty()
    }

    /// The counters that are open.
    pub fn counters(&self) -> Vec<Counter> {
        self.opened.iter().map(|o| o.counter).collect()
    }
}

/// Opens `event` on every pid; threads that exited meanwhile (ESRCH) are skipped. Any other
/// error fails the event as a whole (a partial sum would pass for a whole one).
fn open_on(event: &Event, pids: &[i32], mode: Mode) -> Result<(Vec<File>, bool), i32> {
    let mut fds = Vec::with_capacity(pids.len());
    let mut user_only = false;
    for &pid in pids {
        match open_event(event, pid, mode) {
            Ok((fd, u)) => {
                user_only |= u;
                fds.push(File::from(fd));
            }
            Err(libc::ESRCH) if pids.len() > 1 => continue,
            Err(e) => return Err(e),
        }
    }
    if fds.is_empty() {
        return Err(libc::ESRCH);
    }
    Ok((fds, user_only))
}

/// One read with read_format TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING: value, enabled, running.
fn read_values(mut f: &File) -> io::Result<[u64; 3]> {
    let mut buf = [0u8; 24];
    f.read_exact(&mut buf)?;
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(b)
    };
    Ok([word(0), word(1), word(2)])
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKYLAKE: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
        model\t\t: 94\nmodel name\t: Intel(R) Core(TM) i7-6700K CPU @ 4.00GHz\nstepping\t: 3\n\
        \nprocessor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 1\n";
    const SKYLAKE_SP: &str =
        "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nstepping\t: 4\n";
    const CASCADE_LAKE: &str =
        "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nstepping\t: 7\n";
    const SAPPHIRE_RAPIDS: &str =
        "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nstepping\t: 8\n";
    const ZEN1: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\n\
        model\t\t: 1\nmodel name\t: AMD EPYC 7601 32-Core Processor\nstepping\t: 2\n";
    const ZEN2: &str = "vendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n\
        model name\t: AMD EPYC 7742 64-Core Processor\n";
    const ZEN3: &str = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n";
    const BULLDOZER: &str = "vendor_id\t: AuthenticAMD\ncpu family\t: 21\nmodel\t\t: 1\n";
    const ARM: &str = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\
        CPU architecture: 8\nCPU part\t: 0xd0c\n";
    const OTHER_X86: &str =
        "vendor_id\t: CentaurHauls\ncpu family\t: 6\nmodel\t\t: 15\nstepping\t: 2\n";

    #[test]
    fn cpuid_takes_the_first_processor() {
        let id = CpuId::parse(SKYLAKE);
        assert_eq!(id.vendor, "GenuineIntel");
        assert_eq!(
            (id.family, id.model, id.stepping),
            (Some(6), Some(94), Some(3))
        );
        assert_eq!(CpuId::parse(ARM).vendor, "");
    }

    #[test]
    fn intel_skylake_gets_stalls_mem_any() {
        let s = memory_stall_event(SKYLAKE).expect("Skylake offers a stall event");
        assert_eq!(s.event.type_, sys::bindings::PERF_TYPE_RAW);
        assert_eq!(s.event.config, 0x1400_14a3);
        assert_eq!(s.event.name, "cpu/event=0xa3,umask=0x14,cmask=20/");
        assert!(s.counts.contains("STALLS_MEM_ANY"));
        assert_eq!(
            memory_stall_event(SKYLAKE_SP).unwrap().event.config,
            0x1400_14a3
        );
    }

    #[test]
    fn intel_models_not_checked_are_not_offered() {
        for info in [CASCADE_LAKE, SAPPHIRE_RAPIDS] {
            let why = memory_stall_choice(info).unwrap_err();
            assert!(why.contains("not been checked"), "{why}");
        }
    }

    #[test]
    fn amd_zen1_and_older_get_generic_backend_stalls() {
        for info in [ZEN1, BULLDOZER] {
            let s = memory_stall_event(info).expect("offered");
            assert_eq!(s.event.type_, sys::bindings::PERF_TYPE_HARDWARE);
            assert_eq!(
                s.event.config,
                sys::bindings::PERF_COUNT_HW_STALLED_CYCLES_BACKEND as u64
            );
            assert_eq!(s.event.name, "stalled-cycles-backend");
            assert!(s.counts.contains("proxy"));
        }
    }

    #[test]
    fn amd_zen2_and_later_get_none_with_reason() {
        for info in [ZEN2, ZEN3] {
            assert_eq!(memory_stall_event(info), None);
            let why = memory_stall_choice(info).unwrap_err();
            assert!(why.contains("Zen 2 or later"), "{why}");
        }
    }

    #[test]
    fn unknown_vendors_get_none() {
        assert_eq!(memory_stall_event(ARM), None);
        assert_eq!(memory_stall_event(OTHER_X86), None);
        assert_eq!(memory_stall_event(""), None);
        assert!(memory_stall_choice(OTHER_X86)
            .unwrap_err()
            .contains("CentaurHauls"));
    }

    #[test]
    fn llc_events_per_vendor() {
        use sys::bindings::*;
        let e = event_for(Counter::LlcMisses, SKYLAKE).unwrap();
        assert_eq!(
            (e.type_, e.config),
            (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES as u64)
        );
        assert!(event_for(Counter::LlcReferences, ZEN2)
            .unwrap_err()
            .contains("L2"));
        let e = event_for(Counter::LlcMisses, ARM).unwrap();
        assert_eq!(e.type_, PERF_TYPE_HW_CACHE);
        assert_eq!(e.config, 2 | 1 << 16); // LL, read, miss
        assert_eq!(event_for(Counter::Cycles, "").unwrap().name, "cycles");
        let e = event_for(Counter::TaskClock, "").unwrap();
        assert_eq!(e.type_, PERF_TYPE_SOFTWARE);
    }

    #[test]
    fn scaling_for_multiplexed_readings() {
        // Ran all the time: the raw count.
        assert_eq!(scale(1000, 500, 500), Some(1000));
        // Ran a quarter of the time: four times the count.
        assert_eq!(scale(1000, 400, 100), Some(4000));
        // Rounds down.
        assert_eq!(scale(10, 3, 2), Some(15));
        assert_eq!(scale(7, 3, 2), Some(10));
        // No overflow in the product, saturation in the result.
        assert_eq!(scale(u64::MAX / 2, 1 << 40, 1 << 39), Some(u64::MAX - 1));
        assert_eq!(scale(u64::MAX, 3, 1), Some(u64::MAX));
        // Enabled but never on a counter: no estimate. Never enabled: zero is the truth.
        assert_eq!(scale(0, 1000, 0), None);
        assert_eq!(scale(0, 0, 0), Some(0));
        // running > enabled cannot happen; never scale down.
        assert_eq!(scale(100, 10, 20), Some(100));

        let r = Reading {
            counter: Counter::Cycles,
            event: "cycles".into(),
            value: 4000,
            raw: 1000,
            enabled_ns: 400,
            running_ns: 100,
        };
        assert!(r.estimated());
        assert_eq!(r.estimate(), Some(r.value));
        let full = Reading {
            running_ns: 400,
            value: 1000,
            ..r.clone()
        };
        assert!(!full.estimated());
        let never = Reading {
            running_ns: 0,
            value: 0,
            ..r
        };
        assert!(never.estimated());
        assert_eq!(never.estimate(), None);
    }

    #[test]
    fn reasons_a_user_can_act_on() {
        let cycles = event_for(Counter::Cycles, "").unwrap();
        let tc = event_for(Counter::TaskClock, "").unwrap();
        for errno in [libc::ENOENT, libc::EOPNOTSUPP] {
            let why = open_error_reason(errno, &cycles, None, Some(2));
            assert!(why.contains("no PMU on this machine"), "{why}");
        }
        let why = open_error_reason(libc::ENOENT, &cycles, Some("cpu"), None);
        assert!(why.contains("maps no `cycles`"), "{why}");
        let why = open_error_reason(libc::EACCES, &tc, None, Some(3));
        assert!(why.contains("perf_event_paranoid = 3"), "{why}");
        assert!(why.contains("root"), "{why}");
        let why = open_error_reason(libc::EMFILE, &tc, None, None);
        assert!(why.contains("ulimit"), "{why}");
        let why = open_error_reason(libc::EBUSY, &tc, None, None);
        assert!(why.contains("task-clock"), "{why}");
    }

    #[test]
    fn merged_reasons_are_said_once() {
        let u = |what: &str, why: &str| Unavailable {
            what: what.into(),
            why: why.into(),
        };
        let merged = merge_unavailable(&[
            u("cycles", "no PMU"),
            u("instructions", "no PMU"),
            u("memory stalls", "not offered"),
            u("LLC misses", "no PMU"),
        ]);
        assert_eq!(
            merged,
            vec![
                u("cycles, instructions, LLC misses", "no PMU"),
                u("memory stalls", "not offered")
            ]
        );
    }

    #[test]
    fn hardware_pmu_from_a_sysfs_tree() {
        let dir = std::env::temp_dir().join(format!("contend-pmu-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["software", "tracepoint", "msr"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        assert_eq!(hardware_pmu(&dir), None);
        std::fs::create_dir_all(dir.join("armv8_pmuv3_0")).unwrap();
        assert_eq!(hardware_pmu(&dir).as_deref(), Some("armv8_pmuv3_0"));
        std::fs::create_dir_all(dir.join("cpu")).unwrap();
        assert_eq!(hardware_pmu(&dir).as_deref(), Some("cpu"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
