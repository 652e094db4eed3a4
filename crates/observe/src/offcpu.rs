//! The target's voluntary switches out ("blocks"), with the reason from the kernel call chain
//! and, for a futex wait, the futex's address and operation (issue 22, design §1.2).
//!
//! One `sched:sched_switch` event per online CPU, filtered to voluntary switches
//! (`prev_state & 255`: a preempted task is 0 or 0x100), opened on the launching thread
//! (`pid = 0`, `cpu = N`) with `inherit` and `enable_on_exec`, as `counters::CounterSet::
//! for_children` does: the program inherits the events at fork and they start at its exec;
//! contend's own threads inherit disabled copies that nothing enables, and the launching
//! thread never execs. A per-task `sched_switch` fires in the switched-out task's context, so
//! only the program's blocks are recorded. Samples carry TID TIME CPU CALLCHAIN (kernel only)
//! RAW REGS_USER: the system call's argument registers (`di` the futex word, `si` the op) and
//! the unwinder's (ip sp bp); and STACK_USER, a copy of the top [`STACK_BYTES`] of the user
//! stack, of which only the `dyn_size` bytes in use go to the process's stack file
//! (`stacks/offcpu-PID.ustk`, `trace::ustack`), within the run's stack budget. The stacks are
//! unwound at load (`symbolize::unwind`).
//!
//! Wakes (slice 3): one `sched:sched_waking` event per CPU, opened the same way and redirected
//! into the same ring (`PERF_EVENT_IOC_SET_OUTPUT`), fires in the waker's context: a thread of
//! the program that wakes another gives the woken tid (raw field `pid`), how
//! ([`wake_how`]: a futex wake, with its word `di`, op `si` and second word `r8` for a
//! requeue; an interrupt or timer that came while it ran; another kernel path) and, except for
//! interrupts and timers (whose registers are the interrupted thread's), its user stack: the
//! end of the holder's critical section. The two events' samples are told apart by the raw
//! record's `common_type`. `CONTEND_WAKES=0` in the environment leaves the wakes out: a
//! measurement knob for `scripts/bench-waits.sh` (their cost against none), not an option.
//!
//! Kernel addresses mean nothing after the run (KASLR): the chain is named now, from
//! `/proc/kallsyms` read once (bounded), and only the reason is kept. Where the addresses read
//! as 0 (no root, `kptr_restrict`), blocks are kept with no reason and no futex is recognised,
//! and a note says so.
//!
//! Layers: [`parse_sample`], [`Kallsyms`] and [`reason`] are pure (unit-tested with recorded
//! bytes); [`OffCpuRecorder`] opens, drains into `streams/offcpu-PID.cst` (one stream per
//! process: see `trace::offcpu`) and closes.

pub mod kernel_lock;

use crate::reopen::ReopeningFile;
use crate::schedtrace::format::{Field, TracepointFormat};
use crate::schedtrace::ring::Ring;
use crate::schedtrace::{self as st, decode::HEADER_SIZE};
use perf_event_open_sys as sys;
use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trace::format::{Header, StreamKind};
use trace::meta::{StreamEntry, Unavailable};
use trace::offcpu::{Block, BlockStack, FutexArgs, NoStack, WakeFutex, WakeHow, Waking, NO_REASON};
use trace::{ClockSource, StreamWriter};

/// What [`Unavailable::what`] says when the recorder cannot run.
pub const WHAT: &str = trace::offcpu::UNAVAILABLE_WHAT;

/// x86-64 `sample_regs_user`: DX SI DI BP SP IP R8 R10 (`asm/perf_regs.h` bits 3 4 5 6 7 8 16
/// 18). Samples list them in bit order.
#[cfg(target_arch = "x86_64")]
pub const REGS_MASK: u64 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 16) | (1 << 18);
/// Positions of the arguments in a sample's registers (bit order of [`REGS_MASK`]).
#[cfg(target_arch = "x86_64")]
const ARG0: usize = 2; // di
#[cfg(target_arch = "x86_64")]
const ARG1: usize = 1; // si
#[cfg(target_arch = "x86_64")]
const ARG4: usize = 6; // r8
/// Positions of the unwinder's registers: ip sp bp, and no link register.
#[cfg(target_arch = "x86_64")]
const UNWIND_REGS: [Option<usize>; 4] = [Some(5), Some(4), Some(3), None];

/// aarch64: x0 x1 x2 x3 x4 x29 lr sp pc (bits 0-4, 29, 30, 31, 32).
#[cfg(target_arch = "aarch64")]
pub const REGS_MASK: u64 = 0x1f | (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32);
#[cfg(target_arch = "aarch64")]
const ARG0: usize = 0;
#[cfg(target_arch = "aarch64")]
const ARG1: usize = 1;
#[cfg(target_arch = "aarch64")]
const ARG4: usize = 4;
/// pc sp x29 lr.
#[cfg(target_arch = "aarch64")]
const UNWIND_REGS: [Option<usize>; 4] = [Some(8), Some(7), Some(5), Some(6)];

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const REGS_MASK: u64 = 0;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARG0: usize = usize::MAX;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARG1: usize = usize::MAX;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARG4: usize = usize::MAX;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const UNWIND_REGS: [Option<usize>; 4] = [None; 4];

const NREGS: usize = REGS_MASK.count_ones() as usize;

/// Kernel frames kept per sample: enough to pass the scheduler and reach the system call.
const MAX_STACK: u16 = 32;

/// Data pages per CPU ring: 4 MiB with 4 KiB pages, ~480 samples of ~8.5 KiB (the stack copy
/// is most of it), drained at a quarter full and at least every 10 ms. Where the locked-memory
/// limit refuses it (no CAP_IPC_LOCK: `perf_event_mlock_kb`), halved down to
/// [`MIN_RING_PAGES`], with a note.
pub const RING_PAGES: usize = 1024;
pub const MIN_RING_PAGES: usize = 16;
/// Without stacks (budget 0): 512 KiB, ~1500 samples of ~350 bytes.
pub const RING_PAGES_NO_STACKS: usize = 128;

/// Bytes of user stack the kernel copies per sample: perf's `--call-graph dwarf` default.
/// Deeper stacks are cut there (the unwinder then stops early, counted).
pub const STACK_BYTES: u32 = 8192;

/// The run's stack budget by default: past it, blocks are recorded without stacks (counted).
pub const DEFAULT_STACK_BUDGET: u64 = 256 << 20;

/// Bytes of stack entries buffered per process between writes to its stack file.
const STACK_FLUSH_BYTES: usize = 64 << 10;

/// The longest `/proc/kallsyms` read (a distribution kernel's is ~15 MB with modules).
const MAX_KALLSYMS: u64 = 64 << 20;

/// A sample of `sched_switch` with TID TIME CPU CALLCHAIN RAW REGS_USER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchSample<'a> {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    /// Kernel addresses, innermost first, context markers removed.
    pub chain: Vec<u64>,
    pub raw: &'a [u8],
    /// The user registers of [`REGS_MASK`], in bit order; `None` when the sample has none
    /// (a kernel thread: `abi` 0).
    pub regs: Option<[u64; NREGS]>,
    /// The user stack bytes in use (`dyn_size` of the copy), from the stack pointer up.
    pub stack: &'a [u8],
}

impl SwitchSample<'_> {
    /// The registers an unwinder starts from.
    pub fn unwind_regs(&self) -> Option<trace::ustack::Regs> {
        let r = self.regs?;
        let get = |i: Option<usize>| i.and_then(|i| r.get(i).copied()).unwrap_or(0);
        Some(trace::ustack::Regs {
            ip: get(UNWIND_REGS[0]),
            sp: get(UNWIND_REGS[1]),
            fp: get(UNWIND_REGS[2]),
            lr: get(UNWIND_REGS[3]),
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Parses a sample body (after the 8-byte header), with STACK_USER when `with_stack`. Every
/// length is checked against the body.
pub fn parse_sample(body: &[u8], with_stack: bool) -> Result<SwitchSample<'_>, String> {
    let short = |what: &str| format!("sample of {} bytes ends inside its {what}", body.len());
    let pid = u32_at(body, 0).ok_or_else(|| short("tid"))?;
    let tid = u32_at(body, 4).ok_or_else(|| short("tid"))?;
    let time = u64_at(body, 8).ok_or_else(|| short("time"))?;
    let cpu = u32_at(body, 16).ok_or_else(|| short("cpu"))?;
    let nr = u64_at(body, 24).ok_or_else(|| short("callchain"))?;
    let mut at = 32usize;
    let nr = usize::try_from(nr)
        .ok()
        .filter(|&n| n <= (body.len() - at) / 8)
        .ok_or_else(|| format!("callchain of {nr} entries exceeds the sample"))?;
    let mut chain = Vec::with_capacity(nr);
    for i in 0..nr {
        let ip = u64_at(body, at + 8 * i).ok_or_else(|| short("callchain"))?;
        // PERF_CONTEXT_* markers sit at the top of the address space.
        if ip < sys::bindings::PERF_CONTEXT_MAX {
            chain.push(ip);
        }
    }
    at += 8 * nr;
    let size = u32_at(body, at).ok_or_else(|| short("raw size"))? as usize;
    at += 4;
    let raw = body
        .get(at..at.saturating_add(size))
        .ok_or_else(|| format!("raw size {size} exceeds the sample"))?;
    at += size;
    let abi = u64_at(body, at).ok_or_else(|| short("register abi"))?;
    at += 8;
    let regs = if abi == 0 {
        None
    } else {
        let mut regs = [0u64; NREGS];
        for (i, r) in regs.iter_mut().enumerate() {
            *r = u64_at(body, at + 8 * i).ok_or_else(|| short("registers"))?;
        }
        at += 8 * NREGS;
        Some(regs)
    };
    // STACK_USER: size, size bytes, and dyn_size when size is not 0.
    let stack: &[u8] = if !with_stack {
        &[]
    } else {
        let size = u64_at(body, at).ok_or_else(|| short("user stack size"))?;
        at += 8;
        let size = usize::try_from(size)
            .ok()
            .filter(|&n| n <= body.len() - at)
            .ok_or_else(|| format!("user stack of {size} bytes exceeds the sample"))?;
        let copy = &body[at..at + size];
        if size == 0 {
            copy
        } else {
            let used = u64_at(body, at + size).ok_or_else(|| short("user stack dyn_size"))?;
            &copy[..usize::try_from(used).map_or(size, |u| u.min(size))]
        }
    };
    Ok(SwitchSample {
        pid,
        tid,
        time,
        cpu,
        chain,
        raw,
        regs,
        stack,
    })
}

/// Kernel text symbols from `/proc/kallsyms`, sorted by address.
#[derive(Debug, Default)]
pub struct Kallsyms {
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` text; symbols that read as address 0 (hidden) are left out.
    pub fn parse(text: &str) -> Kallsyms {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let ty = it.next()?;
                let name = it.next()?;
                (addr != 0 && matches!(ty, "t" | "T" | "w" | "W")).then(|| (addr, name.to_string()))
            })
            .collect();
        symbols.sort_unstable();
        Kallsyms { symbols }
    }

    /// Reads `/proc/kallsyms` (bounded).
    pub fn live() -> Kallsyms {
        let mut text = String::new();
        let ok = std::fs::File::open("/proc/kallsyms")
            .and_then(|f| f.take(MAX_KALLSYMS).read_to_string(&mut text))
            .is_ok();
        if ok {
            Kallsyms::parse(&text)
        } else {
            Kallsyms::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The function `ip` is in (the nearest symbol at or below it).
    pub fn name(&self, ip: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|(a, _)| *a <= ip);
        let (_, name) = self.symbols.get(i.checked_sub(1)?)?;
        Some(name)
    }
}

/// Which futex system call a chain passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutexCall {
    /// `futex(2)`: `di` uaddr, `si` op.
    Futex,
    /// futex2 `futex_wait(2)`: `di` uaddr (the op is a plain wait).
    FutexWait,
    /// `futex_waitv(2)`: `di` an array of waiters (not read in this slice).
    Waitv,
    /// futex2 `futex_wake(2)`: `di` uaddr.
    FutexWake,
}

/// Scheduler and tracing frames, which say nothing about why the task blocked.
fn is_scheduler_frame(name: &str) -> bool {
    name.starts_with("__schedule")
        || name.starts_with("schedule")
        || name.starts_with("preempt_schedule")
        || name.starts_with("__traceiter")
        || name.starts_with("perf_")
        || name.starts_with("__perf")
        || name.starts_with("trace_")
}

/// The futex call the chain (names, innermost first) passes, if any.
pub fn futex_call<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<FutexCall> {
    for n in names {
        let sys = n
            .strip_prefix("__x64_sys_")
            .or_else(|| n.strip_prefix("__arm64_sys_"))
            .or_else(|| n.strip_prefix("__ia32_sys_"))
            .or_else(|| n.strip_prefix("__se_sys_"))
            .or_else(|| n.strip_prefix("__do_sys_"));
        match sys {
            Some("futex") | Some("futex_time32") => return Some(FutexCall::Futex),
            Some("futex_wait") => return Some(FutexCall::FutexWait),
            Some("futex_waitv") => return Some(FutexCall::Waitv),
            Some("futex_wake") => return Some(FutexCall::FutexWake),
            _ => {}
        }
    }
    None
}

/// Kernel entries of an interrupt (or of the softirqs run on its exit): a waking under one is
/// not the interrupted thread's doing.
fn is_interrupt_frame(name: &str) -> bool {
    name.starts_with("asm_sysvec_")
        || name.starts_with("sysvec_")
        || name.starts_with("asm_common_interrupt")
        || name == "common_interrupt"
        || name.starts_with("irq_exit")
        || name.starts_with("__irq_exit")
        || name == "handle_softirqs"
        || name == "__do_softirq"
        || name.starts_with("el1_interrupt")
        || name.starts_with("el0_interrupt")
        || name.starts_with("gic_handle_irq")
}

/// How a `sched_waking` came about, from its chain (names, innermost first): a timer's
/// expiry (`hrtimer_wakeup`), another interrupt, a futex call that wakes, or another path.
pub fn wake_how<'a>(names: impl IntoIterator<Item = &'a str>) -> WakeHow {
    for n in names {
        if n == "hrtimer_wakeup" {
            return WakeHow::Timer;
        }
        if is_interrupt_frame(n) {
            return WakeHow::Interrupt;
        }
        if futex_call(std::iter::once(n)).is_some() {
            return WakeHow::Futex;
        }
    }
    WakeHow::Other
}

/// The reason a chain (names, innermost first) gives: the kernel lock it waited for
/// ([`kernel_lock`]), else the innermost frame that is not the scheduler's, and the system
/// call when it is another frame (`do_nanosleep (__x64_sys_clock_nanosleep)`).
pub fn reason(names: &[&str]) -> Option<String> {
    if let Some(lock) = kernel_lock::kernel_lock(names, is_scheduler_frame) {
        return Some(lock.to_reason());
    }
    let inner = names.iter().find(|n| !is_scheduler_frame(n))?;
    let syscall = names
        .iter()
        .find(|n| n.contains("_sys_") && !n.starts_with("do_syscall"));
    Some(match syscall {
        Some(s) if s != inner => format!("{inner} ({s})"),
        _ => inner.to_string(),
    })
}

/// A block from a sample: the state letter from `prev_state`, the reason, the futex args.
pub fn block(
    sample: &SwitchSample<'_>,
    prev_state: Field,
    symbols: &Kallsyms,
) -> (u8, Option<String>, Option<FutexArgs>) {
    let (why, call) = chain_meaning(&sample.chain, symbols);
    let (state, futex) = state_and_futex(sample, prev_state, call);
    (state, why, futex)
}

/// What a kernel chain says: the reason, and the futex call it passes.
pub fn chain_meaning(chain: &[u64], symbols: &Kallsyms) -> (Option<String>, Option<FutexCall>) {
    let names: Vec<&str> = chain.iter().filter_map(|&ip| symbols.name(ip)).collect();
    (reason(&names), futex_call(names.iter().copied()))
}

/// The state letter, and the futex arguments when the chain passed a futex call.
fn state_and_futex(
    sample: &SwitchSample<'_>,
    prev_state: Field,
    call: Option<FutexCall>,
) -> (u8, Option<FutexArgs>) {
    let state = prev_state
        .read_int(sample.raw)
        .map_or(b'?', |v| state_letter(v as u64));
    let futex = match (call, sample.regs) {
        (Some(FutexCall::Futex), Some(r)) if ARG1 < NREGS => Some(FutexArgs {
            uaddr: r[ARG0],
            op: r[ARG1] as u8,
        }),
        // FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG: what futex2's wait is.
        (Some(FutexCall::FutexWait), Some(r)) if ARG0 < NREGS => Some(FutexArgs {
            uaddr: r[ARG0],
            op: 0x89,
        }),
        _ => None,
    };
    (state, futex)
}

/// Chains seen, with what they say: a blocked thread's chain repeats (the same wait path, the
/// same return addresses), so it is named once. Cleared when full.
#[derive(Default)]
struct ChainMemo {
    known: HashMap<Vec<u64>, Meaning>,
}

/// What a chain says: its reason, the futex call it passes, and how a waking under it came
/// about.
type Meaning = (Option<Arc<str>>, Option<FutexCall>, WakeHow);

const MAX_MEMO: usize = 4096;

impl ChainMemo {
    fn meaning(&mut self, chain: &[u64], symbols: &Kallsyms) -> Meaning {
        if let Some(m) = self.known.get(chain) {
            return m.clone();
        }
        let names: Vec<&str> = chain.iter().filter_map(|&ip| symbols.name(ip)).collect();
        let m = (
            reason(&names).map(Arc::from),
            futex_call(names.iter().copied()),
            wake_how(names.iter().copied()),
        );
        if self.known.len() >= MAX_MEMO {
            self.known.clear();
        }
        self.known.insert(chain.to_vec(), m.clone());
        m
    }
}

/// The letter `ps` shows for a blocked task's `prev_state` (low byte).
pub fn state_letter(prev_state: u64) -> u8 {
    match prev_state & 0xff {
        s if s & 0x01 != 0 => b'S',
        s if s & 0x02 != 0 => b'D',
        s if s & 0x04 != 0 => b'T',
        s if s & 0x08 != 0 => b't',
        s if s & 0x10 != 0 => b'X',
        s if s & 0x20 != 0 => b'Z',
        s if s & 0x40 != 0 => b'P',
        _ => b'?',
    }
}

/// What the recorder did, for meta.json.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffCpuStats {
    pub blocks: u64,
    pub futex_waits: u64,
    /// Samples the kernel dropped (ring full): `PERF_RECORD_LOST`.
    pub lost: u64,
    /// Times the kernel throttled the event (`PERF_RECORD_THROTTLE`): samples missing.
    pub throttled: u64,
    pub unparsed: u64,
    /// Blocks not written because their stream could not be created.
    pub unwritten: u64,
    /// Blocks kept with their user stack, and the bytes of the stack files.
    pub stacks: u64,
    pub stack_bytes: u64,
    /// Blocks kept without a stack: the budget was spent; the copy was empty; the stack file
    /// could not be written.
    pub stacks_over_budget: u64,
    pub stacks_empty: u64,
    pub stacks_unwritten: u64,
    /// Kernel symbols were readable (else no reason, no futex recognised).
    pub kernel_symbols: bool,
    /// Wakings by the program's threads written; of those, futex wakes with their word;
    /// wakings kept with the waker's stack.
    pub wakings: u64,
    pub futex_wakes: u64,
    pub waking_stacks: u64,
    /// `sched_waking` could not be opened (no wakes recorded), and why.
    pub wakings_unavailable: Option<String>,
}

/// What [`OffCpuRecorder::finish`] returns.
pub struct OffCpuOutcome {
    pub streams: Vec<StreamEntry>,
    pub stats: OffCpuStats,
    pub notes: Vec<String>,
}

/// A sample decoded from a ring, before it is written.
struct Drained {
    pid: u32,
    tid: u32,
    ts: u64,
    what: DrainedKind,
    /// The unwinder's registers and the stack bytes in use (empty: none copied).
    stack: Option<(trace::ustack::Regs, Vec<u8>)>,
}

enum DrainedKind {
    Block {
        state: u8,
        why: Option<Arc<str>>,
        futex: Option<FutexArgs>,
    },
    Waking {
        woken: u32,
        how: WakeHow,
        futex: Option<WakeFutex>,
    },
}

/// The futex arguments of a waking whose chain passed a waking futex call.
fn wake_futex(sample: &SwitchSample<'_>, call: Option<FutexCall>) -> Option<WakeFutex> {
    let r = sample.regs?;
    let get = |i: usize| r.get(i).copied();
    match call? {
        FutexCall::Futex => {
            let op = get(ARG1)? as u8;
            Some(WakeFutex {
                uaddr: get(ARG0)?,
                op,
                uaddr2: if trace::offcpu::has_second_word(op) {
                    get(ARG4)
                } else {
                    None
                },
            })
        }
        // FUTEX_WAKE | FUTEX_PRIVATE_FLAG: what futex2's wake is.
        FutexCall::FutexWake => Some(WakeFutex {
            uaddr: get(ARG0)?,
            op: 0x81,
            uaddr2: None,
        }),
        _ => None,
    }
}

/// Streams kept open at once: the least recently written is closed past this (its process
/// gets `offcpu-PID.2.cst` should a thread of it block again), so the recorder's memory stays
/// bounded (about 4 KiB each) however many processes the program starts.
pub const MAX_OPEN_STREAMS: usize = 512;

/// Records buffered per stream between writes.
const CHUNK_EVENTS: usize = 256;

struct ProcessStream {
    writer: StreamWriter<ReopeningFile>,
    file: String,
    /// The thread whose blocks were written last (a thread record is written when it changes).
    tid: u32,
    /// When it was last written (the recorder's write count), for closing the oldest.
    last_write: u64,
    /// Its stack file, created at the first stack; `Err` once it could not be written.
    stacks: Option<Result<trace::ustack::StackWriter<ReopeningFile>, ()>>,
}

/// The live recorder; see the module docs. Dropping it closes the events.
pub struct OffCpuRecorder {
    rings: Vec<Ring>,
    prev_state: Field,
    /// `sched_waking`'s id (its samples' `common_type`) and its woken `pid` field; `None`
    /// when it could not be opened.
    waking: Option<(u16, Field)>,
    symbols: Kallsyms,
    memo: ChainMemo,
    streams_dir: PathBuf,
    /// Open streams, by process.
    processes: HashMap<u32, ProcessStream>,
    /// `maps/` of the run, and the processes whose memory map was saved there.
    maps_dir: PathBuf,
    maps_saved: std::collections::HashSet<u32>,
    /// Streams already closed (oldest first out, or at the end).
    closed: Vec<StreamEntry>,
    writes: u64,
    /// `stacks/` of the run, and the stack bytes the budget still allows.
    stacks_dir: PathBuf,
    stack_budget_left: u64,
    /// The samples carry a stack copy (a budget was given).
    with_stacks: bool,
    stats: OffCpuStats,
    first_error: Option<String>,
    notes: Vec<String>,
    scratch: Vec<u8>,
}

fn unavailable(why: impl Into<String>) -> Unavailable {
    Unavailable {
        what: WHAT.into(),
        why: why.into(),
    }
}

/// What to set, for a refusal of an unprivileged contend.
const WHAT_TO_SET: &str = "run contend as root, or grant it CAP_PERFMON (and read access to tracefs), or set kernel.perf_event_paranoid=-1";

/// Why an unprivileged contend is refused, and what to set.
fn unprivileged() -> String {
    let paranoid = st::read_small("/proc/sys/kernel/perf_event_paranoid")
        .map_or_else(|_| "unknown".to_string(), |s| s.trim().to_string());
    format!(
        "kernel.perf_event_paranoid is {paranoid} and contend has no CAP_PERFMON: {WHAT_TO_SET}"
    )
}

impl OffCpuRecorder {
    /// Opens the events on the calling thread, to be inherited by the program it starts next
    /// (enabled at its exec); the streams go to `run_dir/streams/`, the memory maps of the
    /// processes seen to `run_dir/maps/`, their user stacks to `run_dir/stacks/` until
    /// `stack_budget` bytes are written (0: no stacks kept).
    pub fn open(run_dir: &Path, stack_budget: u64) -> Result<OffCpuRecorder, Unavailable> {
        let streams_dir = run_dir.join(trace::rundir::STREAMS_DIR);
        std::fs::create_dir_all(&streams_dir)
            .map_err(|e| unavailable(format!("{}: {e}", streams_dir.display())))?;
        if REGS_MASK == 0 {
            return Err(unavailable(
                "this architecture's registers are not known to contend",
            ));
        }
        let (tracefs, _) = st::find_tracefs().map_err(|u| {
            unavailable(if privileged() {
                u.why
            } else {
                format!(
                    "{}; {}",
                    u.why.trim_end_matches("; run as root"),
                    unprivileged()
                )
            })
        })?;
        let path = tracefs.join("events/sched/sched_switch/format");
        let text = st::read_small(&path).map_err(|e| {
            unavailable(format!(
                "reading {}: {e}; {}",
                path.display(),
                unprivileged()
            ))
        })?;
        let format = TracepointFormat::parse(&text)
            .map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        let prev_state = format
            .int_field("prev_state")
            .map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        // The wakes: without them the blocks are still recorded (the report says who woke
        // whom is not known).
        let waking_path = tracefs.join("events/sched/sched_waking/format");
        let mut waking_error: Option<String> = None;
        let wakes_off = std::env::var_os("CONTEND_WAKES").is_some_and(|v| v == "0");
        let mut waking = (!wakes_off)
            .then_some(())
            .ok_or_else(|| "left out (CONTEND_WAKES=0)".to_string())
            .and_then(|()| st::read_small(&waking_path).map_err(|e| e.to_string()))
            .and_then(|text| TracepointFormat::parse(&text).map_err(|e| e.to_string()))
            .and_then(|f| {
                let id = u16::try_from(f.id).map_err(|_| format!("id {} too large", f.id))?;
                Ok((id, f.int_field("pid").map_err(|e| e.to_string())?))
            })
            .map_err(|e| {
                waking_error = Some(format!("{}: {e}", waking_path.display()));
            })
            .ok();
        let online = st::read_small("/sys/devices/system/cpu/online")
            .map_err(|e| unavailable(format!("reading /sys/devices/system/cpu/online: {e}")))?;
        let cpus = topology::CpuSet::parse_list(&online)
            .map_err(|e| unavailable(format!("/sys/devices/system/cpu/online: {e}")))?;
        // SAFETY: sysconf has no memory-safety preconditions.
        let page_size = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            n if n > 0 => n as usize,
            _ => 4096,
        };
        let mut rings: Vec<Ring> = Vec::new();
        let mut notes = Vec::new();
        let with_stacks = stack_budget > 0;
        let mut pages = if with_stacks {
            RING_PAGES
        } else {
            RING_PAGES_NO_STACKS
        };
        let full = pages;
        for cpu in cpus.iter() {
            // A ring the locked-memory limit refuses is halved (the event reopened: a failed
            // map gives its descriptor back to nobody).
            let ring = loop {
                let fd = match open_event(format.id, cpu, pages * page_size / 4, with_stacks) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ENODEV) => break None,
                    Err(e) => return Err(unavailable(explain_open(&e, cpu))),
                };
                let filter = c"prev_state & 255";
                // SAFETY: a perf event we own; the filter is a NUL-terminated string.
                if unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), filter.as_ptr() as *mut _) }
                    != 0
                {
                    let e = io::Error::last_os_error();
                    return Err(unavailable(format!(
                        "PERF_EVENT_IOC_SET_FILTER(prev_state & 255) on CPU {cpu}: {e}"
                    )));
                }
                match Ring::map(cpu, fd, pages, page_size) {
                    Ok(r) => break Some(r),
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOMEM))
                            && pages > MIN_RING_PAGES =>
                    {
                        pages /= 2;
                    }
                    Err(e) => return Err(unavailable(st::explain_mmap(&e, pages * page_size))),
                }
            };
            match ring {
                Some(mut r) => {
                    if let Some((id, _)) = waking {
                        if let Err(e) =
                            add_waking(&mut r, id, cpu, pages * page_size / 4, with_stacks)
                        {
                            // All CPUs or none: wakes seen on some CPUs only would read as
                            // waits nobody ended.
                            for earlier in rings.iter_mut() {
                                earlier.fds.truncate(1);
                            }
                            r.fds.truncate(1);
                            waking = None;
                            waking_error = Some(e);
                        }
                    }
                    rings.push(r)
                }
                None => notes.push(format!(
                    "CPU {cpu} went offline while opening: its blocks are not recorded"
                )),
            }
        }
        if pages < full {
            notes.push(format!(
                "off-CPU rings cut to {} KiB per CPU by the locked-memory limit (kernel.perf_event_mlock_kb; contend has no CAP_IPC_LOCK): blocks with stacks may be lost when many threads block at once (counted)",
                pages * page_size / 1024
            ));
        }
        if rings.is_empty() {
            return Err(unavailable("no online CPU could be traced"));
        }
        if let Some(e) = &waking_error {
            notes.push(format!(
                "off-CPU waits: the wakes (sched:sched_waking) are not recorded ({e}): who woke whom is not known"
            ));
        }
        let symbols = Kallsyms::live();
        if symbols.is_empty() {
            notes.push("kernel symbols are hidden (/proc/kallsyms reads 0: not root, or kernel.kptr_restrict): off-CPU blocks are recorded without their reason and futex waits are not recognised".into());
        }
        Ok(OffCpuRecorder {
            rings,
            prev_state,
            waking,
            stats: OffCpuStats {
                kernel_symbols: !symbols.is_empty(),
                wakings_unavailable: waking_error,
                ..OffCpuStats::default()
            },
            symbols,
            memo: ChainMemo::default(),
            streams_dir,
            processes: HashMap::new(),
            maps_dir: run_dir.join(trace::layout::MAPS_DIR),
            maps_saved: std::collections::HashSet::new(),
            closed: Vec::new(),
            writes: 0,
            stacks_dir: run_dir.join(trace::ustack::STACKS_DIR),
            stack_budget_left: stack_budget,
            with_stacks,
            first_error: None,
            notes,
            scratch: Vec::with_capacity(1 << 14),
        })
    }

    /// Moves what the rings hold into the streams; returns the bytes read.
    pub fn drain(&mut self) -> u64 {
        let mut moved = 0;
        let mut samples: Vec<Drained> = Vec::new();
        let OffCpuRecorder {
            rings,
            prev_state,
            waking,
            symbols,
            memo,
            stats,
            first_error,
            scratch,
            with_stacks,
            ..
        } = self;
        for ring in rings.iter_mut() {
            moved += ring.pending();
            let broken = ring.drain(scratch, |record| {
                let ty = u32_at(record, 0).unwrap_or(0);
                let body = &record[HEADER_SIZE.min(record.len())..];
                match ty {
                    st::decode::PERF_RECORD_SAMPLE => match parse_sample(body, *with_stacks) {
                        Ok(s) => {
                            let (why, call, how) = memo.meaning(&s.chain, symbols);
                            let common_type =
                                s.raw.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
                            let what = match *waking {
                                Some((id, pid_field)) if common_type == Some(id) => {
                                    let Some(woken) = pid_field.read_int(s.raw) else {
                                        stats.unparsed += 1;
                                        return;
                                    };
                                    DrainedKind::Waking {
                                        woken: woken as u32,
                                        how,
                                        futex: if how == WakeHow::Futex {
                                            wake_futex(&s, call)
                                        } else {
                                            None
                                        },
                                    }
                                }
                                _ => {
                                    let (state, futex) = state_and_futex(&s, *prev_state, call);
                                    DrainedKind::Block { state, why, futex }
                                }
                            };
                            // An interrupt's or timer's registers and stack are the
                            // interrupted thread's: not kept.
                            let stack = match what {
                                DrainedKind::Waking {
                                    how: WakeHow::Interrupt | WakeHow::Timer,
                                    ..
                                } => None,
                                _ => s.unwind_regs().map(|r| (r, s.stack.to_vec())),
                            };
                            samples.push(Drained {
                                pid: s.pid,
                                tid: s.tid,
                                ts: s.time,
                                what,
                                stack,
                            });
                        }
                        Err(e) => {
                            stats.unparsed += 1;
                            first_error.get_or_insert(e);
                        }
                    },
                    sys::bindings::PERF_RECORD_LOST => {
                        stats.lost += u64_at(body, 8).unwrap_or(0);
                    }
                    sys::bindings::PERF_RECORD_THROTTLE => stats.throttled += 1,
                    _ => {}
                }
            });
            stats.unparsed += broken;
        }
        samples.sort_by_key(|s| s.ts);
        for d in samples {
            self.write(d);
        }
        moved
    }

    fn write(&mut self, d: Drained) {
        let Drained {
            pid,
            tid,
            ts,
            what,
            stack,
        } = d;
        if self.maps_saved.insert(pid) {
            match save_maps(pid, &self.maps_dir) {
                // Ended before this drain: its futex words are shown by address (the report
                // says so).
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    self.first_error
                        .get_or_insert_with(|| format!("memory map of process {pid}: {e}"));
                }
                Ok(()) => {}
            }
        }
        if !self.processes.contains_key(&pid) {
            let name = trace::layout::offcpu_stream(pid);
            // The header names the process's main thread; a thread record precedes the blocks
            // of any other (`trace::offcpu`).
            let header = Header {
                kind: StreamKind::Process,
                clock: ClockSource::Monotonic,
                clock_hz: 1_000_000_000,
                pid,
                tid: pid,
                rank: -1,
                base_time: ts,
            };
            let opened =
                ReopeningFile::create_unique(&self.streams_dir, &name, trace::rundir::STREAM_EXT)
                    .and_then(|(f, file)| {
                        StreamWriter::new(f, &header, CHUNK_EVENTS)
                            .map(|w| (w, format!("{}/{file}", trace::rundir::STREAMS_DIR)))
                    });
            match opened {
                Ok((writer, file)) => {
                    if self.processes.len() >= MAX_OPEN_STREAMS {
                        self.close_oldest();
                    }
                    self.processes.insert(
                        pid,
                        ProcessStream {
                            writer,
                            file,
                            tid: pid,
                            last_write: 0,
                            stacks: None,
                        },
                    );
                }
                Err(e) => {
                    self.stats.unwritten += 1;
                    self.first_error
                        .get_or_insert_with(|| format!("{name}: {e}"));
                    return;
                }
            }
        }
        let Some(t) = self.processes.get_mut(&pid) else {
            return;
        };
        self.writes += 1;
        t.last_write = self.writes;
        if t.tid != tid {
            t.writer.push(&trace::offcpu::thread_record(ts, tid));
            t.tid = tid;
        }
        let (state, why, futex) = match what {
            DrainedKind::Block { state, why, futex } => (state, why, futex),
            DrainedKind::Waking { woken, how, futex } => {
                let with_stack = self.with_stacks && matches!(how, WakeHow::Futex | WakeHow::Other);
                let stack = with_stack.then(|| {
                    keep_stack(
                        t,
                        stack,
                        tid,
                        ts,
                        &self.stacks_dir,
                        &mut self.stack_budget_left,
                        &mut self.stats,
                        &mut self.first_error,
                    )
                });
                self.stats.wakings += 1;
                self.stats.futex_wakes += u64::from(futex.is_some());
                self.stats.waking_stacks += u64::from(matches!(stack, Some(BlockStack::Entry(_))));
                for r in (Waking {
                    ts,
                    woken,
                    how,
                    futex,
                    stack,
                })
                .encode()
                {
                    t.writer.push(&r);
                }
                return;
            }
        };
        let reason = why
            .as_deref()
            .map_or(NO_REASON, |w| t.writer.intern_string(w));
        self.stats.blocks += 1;
        self.stats.futex_waits += u64::from(futex.is_some());
        let stack = keep_stack(
            t,
            stack,
            tid,
            ts,
            &self.stacks_dir,
            &mut self.stack_budget_left,
            &mut self.stats,
            &mut self.first_error,
        );
        for r in (Block {
            ts,
            state,
            reason,
            futex,
            stack: Some(stack),
        })
        .encode()
        {
            t.writer.push(&r);
        }
    }

    fn close(&mut self, pid: u32, mut t: ProcessStream, end_time: u64) {
        if let Some(Ok(w)) = t.stacks.take() {
            if let Err(e) = w.into_inner() {
                self.notes.push(format!(
                    "stack file of {}: {e}: its last stacks are lost",
                    t.file
                ));
            }
        }
        let (events, dropped) = match t.writer.finish(end_time) {
            Ok(s) => (s.events, s.dropped),
            Err(e) => {
                self.notes.push(format!("{}: {}", t.file, e.error));
                (e.summary.events, e.summary.dropped)
            }
        };
        self.closed.push(StreamEntry {
            file: t.file,
            kind: StreamKind::Process,
            pid,
            tid: pid,
            rank: None,
            events,
            dropped,
            name: String::new(),
            role: Some(trace::StreamRole::OffCpu),
        });
    }

    /// Streams open now (at most [`MAX_OPEN_STREAMS`]).
    pub fn open_streams(&self) -> usize {
        self.processes.len()
    }

    /// Closes the stream written longest ago.
    fn close_oldest(&mut self) {
        let Some(pid) = self
            .processes
            .iter()
            .min_by_key(|(_, t)| t.last_write)
            .map(|(&pid, _)| pid)
        else {
            return;
        };
        if let Some(t) = self.processes.remove(&pid) {
            self.close(pid, t, crate::clock::monotonic_ns());
        }
    }

    /// Disables the events, drains what is left and closes the streams.
    pub fn finish(mut self, end_time: u64) -> OffCpuOutcome {
        for fd in self.rings.iter().flat_map(|r| &r.fds) {
            // SAFETY: ioctl on a perf event we own.
            unsafe { sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
        }
        self.drain();
        for (pid, t) in std::mem::take(&mut self.processes) {
            self.close(pid, t, end_time);
        }
        let mut streams = std::mem::take(&mut self.closed);
        let mut notes = std::mem::take(&mut self.notes);
        streams.sort_by(|a, b| a.file.cmp(&b.file));
        if let Some(e) = self.first_error.take() {
            notes.push(format!("off-CPU recording: {e}"));
        }
        OffCpuOutcome {
            streams,
            stats: self.stats.clone(),
            notes,
        }
    }
}

/// Writes a block's stack to its process's stack file (created at the first), within the
/// budget; what the stream's record says of it.
#[allow(clippy::too_many_arguments)]
fn keep_stack(
    t: &mut ProcessStream,
    stack: Option<(trace::ustack::Regs, Vec<u8>)>,
    tid: u32,
    ts: u64,
    stacks_dir: &Path,
    budget_left: &mut u64,
    stats: &mut OffCpuStats,
    first_error: &mut Option<String>,
) -> BlockStack {
    use trace::ustack::StackWriter;
    if *budget_left == 0 && t.stacks.is_none() {
        // No budget at all (none asked for, or spent before this process's first stack).
        stats.stacks_over_budget += 1;
        return BlockStack::Missing(NoStack::OverBudget);
    }
    let Some((regs, bytes)) = stack.filter(|(_, b)| !b.is_empty()) else {
        stats.stacks_empty += 1;
        return BlockStack::Missing(NoStack::Empty);
    };
    let size = StackWriter::<ReopeningFile>::entry_size(bytes.len());
    let header = if t.stacks.is_none() {
        trace::ustack::HEADER_SIZE as u64
    } else {
        0
    };
    if size + header > *budget_left {
        stats.stacks_over_budget += 1;
        return BlockStack::Missing(NoStack::OverBudget);
    }
    let writer = t.stacks.get_or_insert_with(|| {
        let arch = trace::ustack::Arch::native().ok_or(())?;
        let name = trace::ustack::sidecar_of(&t.file).ok_or(())?;
        std::fs::create_dir_all(stacks_dir)
            .and_then(|()| {
                let file = name.rsplit('/').next().unwrap_or(&name);
                ReopeningFile::create_new(&stacks_dir.join(file))
            })
            .map(|f| StackWriter::new(f, arch, STACK_FLUSH_BYTES))
            .map_err(|e| {
                first_error.get_or_insert_with(|| format!("{name}: {e}"));
            })
    });
    let Ok(w) = writer else {
        stats.stacks_unwritten += 1;
        return BlockStack::Missing(NoStack::Unwritten);
    };
    let before = w.bytes;
    match w.push(tid, ts, regs, &bytes) {
        Ok(index) => {
            let used = w.bytes - before + header;
            *budget_left = budget_left.saturating_sub(used);
            stats.stacks += 1;
            stats.stack_bytes += used;
            BlockStack::Entry(index)
        }
        Err(e) => {
            // The entries buffered with it are lost too: their blocks' references then name
            // nothing, which the reader counts.
            first_error.get_or_insert_with(|| format!("stack file of {}: {e}", t.file));
            t.stacks = Some(Err(()));
            stats.stacks_unwritten += 1;
            BlockStack::Missing(NoStack::Unwritten)
        }
    }
}

/// The longest memory map saved (a process with a hundred thousand mappings has ~10 MB).
const MAX_MAPS_BYTES: u64 = 64 << 20;

/// Saves `/proc/PID/maps` as `maps/PID-offcpu.maps` in the run directory (created new, never
/// through a link), so that the futex words of a process the lock probe did not enter
/// (statically linked, or the probe refused) are named too; where the probe saved maps, the
/// reader merges both. A snapshot at the process's first block: libraries loaded after it are
/// not in it.
fn save_maps(pid: u32, maps_dir: &Path) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut text = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/maps"))?
        .take(MAX_MAPS_BYTES)
        .read_to_end(&mut text)?;
    if text.is_empty() {
        // An exited process (a zombie) has no mappings: nothing worth a file.
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    std::fs::create_dir_all(maps_dir)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(maps_dir.join(format!("{pid}-offcpu.maps")))?
        .write_all(&text)
}

fn privileged() -> bool {
    let caps = st::effective_caps();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    root || caps & (1 << st::CAP_PERFMON) != 0 || caps & (1 << st::CAP_SYS_ADMIN) != 0
}

/// Why a per-task tracepoint could not be opened, and what to set.
fn explain_open(e: &io::Error, cpu: u32) -> String {
    let what = format!(
        "perf_event_open(sched:sched_switch, this task and its children) on CPU {cpu}: {}",
        st::errno_name(e)
    );
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) if !privileged() => {
            format!("{what}: {}", unprivileged())
        }
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "{what}: refused although contend is privileged: a seccomp filter, container or security module denies perf events"
        ),
        Some(libc::EINVAL) | Some(libc::E2BIG) | Some(libc::EOPNOTSUPP) => format!(
            "{what}: the kernel rejected the event (user registers and kernel call chains with inherit need Linux 4.8 or later)"
        ),
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            format!("{what}: out of file descriptors (one per CPU is needed); raise `ulimit -n`")
        }
        _ => format!("{what}: {e}"),
    }
}

/// Opens `sched_waking` (tracepoint `id`) on `cpu` like the ring's `sched_switch`, and
/// redirects it into the ring.
fn add_waking(
    ring: &mut Ring,
    id: u16,
    cpu: u32,
    wakeup_bytes: usize,
    with_stack: bool,
) -> Result<(), String> {
    let fd = open_event(u64::from(id), cpu, wakeup_bytes, with_stack).map_err(|e| {
        format!(
            "perf_event_open(sched:sched_waking) on CPU {cpu}: {}",
            st::errno_name(&e)
        )
    })?;
    // SAFETY: both descriptors are perf events we own, on the same CPU, same clock.
    if unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), ring.fds[0].as_raw_fd()) } != 0 {
        let e = io::Error::last_os_error();
        return Err(format!(
            "PERF_EVENT_IOC_SET_OUTPUT(sched:sched_waking) on CPU {cpu}: {e}"
        ));
    }
    ring.fds.push(fd);
    Ok(())
}

fn open_event(id: u64, cpu: u32, wakeup_bytes: usize, with_stack: bool) -> io::Result<OwnedFd> {
    let mut attr = sys::bindings::perf_event_attr::default();
    attr.type_ = sys::bindings::PERF_TYPE_TRACEPOINT;
    attr.size = std::mem::size_of::<sys::bindings::perf_event_attr>() as u32;
    attr.config = id;
    attr.sample_type = u64::from(
        sys::bindings::PERF_SAMPLE_TID
            | sys::bindings::PERF_SAMPLE_TIME
            | sys::bindings::PERF_SAMPLE_CPU
            | sys::bindings::PERF_SAMPLE_CALLCHAIN
            | sys::bindings::PERF_SAMPLE_RAW
            | sys::bindings::PERF_SAMPLE_REGS_USER,
    );
    if with_stack {
        attr.sample_type |= u64::from(sys::bindings::PERF_SAMPLE_STACK_USER);
        attr.sample_stack_user = STACK_BYTES;
    }
    attr.sample_regs_user = REGS_MASK;
    attr.sample_max_stack = MAX_STACK;
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.sample_period = 1;
    attr.wakeup_watermark = u32::try_from(wakeup_bytes).unwrap_or(u32::MAX);
    attr.set_watermark(1);
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_exclude_callchain_user(1);
    attr.set_use_clockid(1);
    let cpu = libc::c_int::try_from(cpu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: attr is a fully initialised perf_event_attr of the size it declares.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            0,
            cpu,
            -1,
            libc::c_ulong::from(sys::bindings::PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_bytes(chain: &[u64], raw: &[u8], regs: Option<&[u64]>) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&8u32.to_ne_bytes());
        b.extend_from_slice(&1234u64.to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&(chain.len() as u64).to_ne_bytes());
        for ip in chain {
            b.extend_from_slice(&ip.to_ne_bytes());
        }
        b.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        b.extend_from_slice(raw);
        match regs {
            Some(r) => {
                b.extend_from_slice(&2u64.to_ne_bytes());
                for v in r {
                    b.extend_from_slice(&v.to_ne_bytes());
                }
            }
            None => b.extend_from_slice(&0u64.to_ne_bytes()),
        }
        // An 8-byte stack copy, 4 bytes of it in use.
        b.extend_from_slice(&8u64.to_ne_bytes());
        b.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        b.extend_from_slice(&4u64.to_ne_bytes());
        b
    }

    const SYMS: &str = "\
0000000000000000 T hidden
ffffffff81000100 T __schedule
ffffffff81000200 T schedule
ffffffff81000300 t futex_do_wait
ffffffff81000400 T __x64_sys_futex
ffffffff81000500 T do_syscall_64
ffffffff81000600 T do_nanosleep
ffffffff81000700 T __x64_sys_clock_nanosleep
ffffffff81000800 D some_data
";

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_futex_wait_is_recognised_with_its_address_and_op() {
        let syms = Kallsyms::parse(SYMS);
        let chain = [
            sys::bindings::PERF_CONTEXT_KERNEL,
            0xffffffff81000110,
            0xffffffff81000210,
            0xffffffff81000310,
            0xffffffff81000410,
            0xffffffff81000510,
        ];
        let mut raw = vec![0u8; 64];
        raw[24..32].copy_from_slice(&1u64.to_ne_bytes());
        // DX SI DI BP SP IP R8 R10
        let regs = [2, 0x89, 0x5555_0000_1000, 0, 0, 0, 0, 0];
        let bytes = sample_bytes(&chain, &raw, Some(&regs));
        let s = parse_sample(&bytes, true).unwrap();
        assert_eq!((s.pid, s.tid, s.time, s.cpu), (7, 8, 1234, 1));
        assert_eq!(s.chain.len(), 5, "the context marker is dropped");
        assert_eq!(s.stack, [1, 2, 3, 4], "only dyn_size bytes");
        let r = s.unwind_regs().unwrap();
        assert_eq!((r.ip, r.sp, r.fp), (0, 0, 0));
        let field = Field {
            offset: 24,
            size: 8,
            signed: true,
        };
        let (state, why, futex) = block(&s, field, &syms);
        assert_eq!(state, b'S');
        assert_eq!(why.as_deref(), Some("futex_do_wait (__x64_sys_futex)"));
        let f = futex.unwrap();
        assert_eq!((f.uaddr, f.op, f.cmd()), (0x5555_0000_1000, 0x89, 9));
    }

    #[test]
    fn a_sleep_is_not_a_futex_wait() {
        let syms = Kallsyms::parse(SYMS);
        let names: Vec<&str> = [
            0xffffffff81000110u64,
            0xffffffff81000610,
            0xffffffff81000710,
        ]
        .iter()
        .filter_map(|&ip| syms.name(ip))
        .collect();
        assert_eq!(futex_call(names.iter().copied()), None);
        assert_eq!(
            reason(&names).as_deref(),
            Some("do_nanosleep (__x64_sys_clock_nanosleep)")
        );
        assert_eq!(
            syms.name(0xffffffff81000050),
            None,
            "below the first symbol"
        );
        assert_eq!(
            syms.name(0xffffffff81000810),
            Some("__x64_sys_clock_nanosleep"),
            "data is not text"
        );
        assert!(Kallsyms::parse("0000000000000000 T a\n").is_empty());
    }

    #[test]
    fn hostile_lengths_are_refused() {
        let good = sample_bytes(&[1, 2], &[0; 16], Some(&[0; NREGS]));
        for cut in 0..good.len() {
            assert!(parse_sample(&good[..cut], true).is_err(), "cut at {cut}");
        }
        let mut huge = good.clone();
        huge[24..32].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(parse_sample(&huge, true).is_err());
        // A stack size past the sample; a dyn_size past the copy is cut to the copy.
        let at = good.len() - 24;
        let mut huge = good.clone();
        huge[at..at + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(parse_sample(&huge, true).is_err());
        let mut big_dyn = good.clone();
        let n = big_dyn.len();
        big_dyn[n - 8..].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(parse_sample(&big_dyn, true).unwrap().stack.len(), 8);
        // Without STACK_USER the stack bytes are not read (nor required).
        let plain = &good[..good.len() - 24];
        assert!(parse_sample(plain, false).unwrap().stack.is_empty());
        let no_regs = sample_bytes(&[], &[0; 4], None);
        assert_eq!(parse_sample(&no_regs, true).unwrap().regs, None);
    }

    #[test]
    fn a_waking_says_how_it_came_about() {
        let how = |names: &[&str]| wake_how(names.iter().copied());
        assert_eq!(
            how(&[
                "try_to_wake_up",
                "futex_wake",
                "do_futex",
                "__x64_sys_futex"
            ]),
            WakeHow::Futex
        );
        assert_eq!(how(&["wake_up_q", "__x64_sys_futex_wake"]), WakeHow::Futex);
        // A timeout fires in an interrupt that came while a futex call ran: the timer, not
        // the call.
        assert_eq!(
            how(&[
                "try_to_wake_up",
                "hrtimer_wakeup",
                "__hrtimer_run_queues",
                "sysvec_apic_timer_interrupt",
                "__x64_sys_futex"
            ]),
            WakeHow::Timer
        );
        assert_eq!(
            how(&["try_to_wake_up", "handle_softirqs", "__x64_sys_futex"]),
            WakeHow::Interrupt
        );
        assert_eq!(how(&["try_to_wake_up", "pipe_write"]), WakeHow::Other);
        assert_eq!(how(&[]), WakeHow::Other);
    }

    #[test]
    fn state_letters() {
        assert_eq!(state_letter(1), b'S');
        assert_eq!(state_letter(2), b'D');
        assert_eq!(state_letter(0x402), b'D');
        assert_eq!(state_letter(0x100), b'?');
    }
}
