//! Kernel locks the program waited for (issue 22, slice 5): the blocks whose reason names a
//! kernel lock (`trace::kernel_lock`, named at record time from the kernel chain), each lasting
//! to the thread's switch back in as the futex waits do, grouped per (process, lock, mode, the
//! kernel function that took it, the system call, the program's frame that entered the
//! kernel).
//!
//! The program's frame is the innermost frame of the block's user stack that is not the
//! runtime's (`is_runtime_frame`): for a system call, the caller of libc's wrapper
//! (`hammer (mmap_lock.c:97)`); for a page fault, the faulting instruction's own frame, which
//! is the innermost one (there is no call into the kernel to step over).
//!
//! These blocks stay "other blocks" in the totals (`WaitReport::other_ns`, the reasons table):
//! this table details them, it does not count them again.

use super::{end_of, BlockIn, StackIn, ThreadBlocks, WaitStack};
use serde::Serialize;
use std::collections::BTreeMap;
use trace::kernel_lock::KernelLock;
use trace::sched::StateChange;

/// Waits for one kernel lock, taken by one kernel function, entered from one program frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct KernelLockWaits {
    pub pid: u32,
    /// `mmap_lock`, `vma_lock`, `i_rwsem`, `f_pos_lock`, `pipe mutex`, `sb_writers`, or
    /// `rwsem in FUNC` (docs/formats.md §2.3a).
    pub lock: String,
    /// `rwsem read`, `rwsem write`, `mutex`, `percpu rwsem`, `semaphore`, `rt_mutex`,
    /// `vma write`.
    pub mode: String,
    /// The kernel function that took the lock (`__vm_munmap`, `lock_mm_and_find_vma`).
    pub taker: String,
    /// The system call that entered the kernel (`__x64_sys_munmap`); absent for a page fault
    /// or where the call's frame was inlined.
    pub syscall: Option<String>,
    /// The program's frame that entered the kernel, `function (file:line)`; absent without a
    /// user stack or when no frame of the program was found.
    pub site: Option<String>,
    /// Waits whose end was traced: count, total and longest time off CPU, ns.
    pub waits: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Of `total_ns`, the time from the wake-up to the switch in (run queue), where traced.
    pub runqueue_ns: u64,
    /// Waits whose end was not traced (no length).
    pub unmeasured: u64,
    /// Threads that waited, with their total, ns.
    pub threads: BTreeMap<u32, u64>,
}

impl KernelLockWaits {
    /// The time blocked: to the wake-up (the run-queue time after it is not blocked time).
    pub fn blocked_ns(&self) -> u64 {
        self.total_ns.saturating_sub(self.runqueue_ns)
    }
}

/// Whether a frame is contend's own lock probe (`libcontend_probe.so`, preloaded with
/// `--locks`): its hooks (`pthread_create`'s, mapping its ring) enter the kernel for the
/// program, whose own call is the frame outside them.
fn is_probe_frame(module: Option<&str>) -> bool {
    module.is_some_and(|m| {
        m.rsplit('/')
            .next()
            .is_some_and(|f| f.starts_with("libcontend_probe"))
    })
}

/// The label of a stack's program frame that entered the kernel.
pub fn entry_site(stack: &WaitStack) -> Option<String> {
    let f = stack.frames.iter().find(|f| {
        f.function != "[unknown]"
            && !super::is_runtime_frame(Some(&f.function), f.module.as_deref())
            && !is_probe_frame(f.module.as_deref())
    })?;
    Some(match (&f.file, f.line) {
        (Some(file), Some(line)) => {
            let base = file.rsplit('/').next().unwrap_or(file);
            format!("{} ({base}:{line})", f.function)
        }
        _ => f.function.clone(),
    })
}

type Key = (u32, KernelLock, Option<String>);

/// The kernel-lock waits of `threads`, ended by `states` (per tid, each sorted by time), most
/// time first.
pub(super) fn kernel_locks(
    threads: &[ThreadBlocks],
    by_tid: &BTreeMap<u32, Vec<StateChange>>,
    stacks: &[WaitStack],
) -> Vec<KernelLockWaits> {
    let mut rows: BTreeMap<Key, KernelLockWaits> = BTreeMap::new();
    let no_states = Vec::new();
    for t in threads {
        let states = by_tid.get(&t.tid).unwrap_or(&no_states);
        let mut blocks: Vec<&BlockIn> = t.blocks.iter().collect();
        blocks.sort_by_key(|b| b.ts);
        for (i, b) in blocks.iter().enumerate() {
            if b.futex.is_some() {
                continue;
            }
            let Some(lock) = b.reason.as_deref().and_then(KernelLock::from_reason) else {
                continue;
            };
            let site = match b.stack {
                StackIn::At(s) => stacks.get(s as usize).and_then(entry_site),
                _ => None,
            };
            let row = rows
                .entry((t.pid, lock.clone(), site.clone()))
                .or_insert_with(|| KernelLockWaits {
                    pid: t.pid,
                    lock: lock.name,
                    mode: lock.mode,
                    taker: lock.taker,
                    syscall: lock.syscall,
                    site,
                    ..KernelLockWaits::default()
                });
            let limit = blocks.get(i + 1).map(|n| n.ts);
            let end = end_of(states, b.ts, limit);
            let Some(len) = end.and_then(|e| e.at()).map(|at| at.saturating_sub(b.ts)) else {
                row.unmeasured += 1;
                continue;
            };
            let runq = end.and_then(|e| Some(e.running?.saturating_sub(e.woken?)));
            row.waits += 1;
            row.total_ns += len;
            row.max_ns = row.max_ns.max(len);
            row.runqueue_ns += runq.unwrap_or(0);
            *row.threads.entry(t.tid).or_default() += len;
        }
    }
    let mut out: Vec<KernelLockWaits> = rows.into_values().collect();
    out.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.unmeasured.cmp(&a.unmeasured))
            .then_with(|| (&a.lock, &a.taker, &a.site).cmp(&(&b.lock, &b.taker, &b.site)))
    });
    out
}

/// The time blocked per lock name over all rows, most first.
pub fn blocked_by_lock(rows: &[KernelLockWaits]) -> Vec<(&str, u64)> {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for r in rows {
        *by.entry(r.lock.as_str()).or_default() += r.blocked_ns();
    }
    let mut v: Vec<(&str, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::super::{waits_with_stacks, WaitFrame, WaitKind};
    use super::*;
    use trace::sched::State;

    fn change(ts: u64, state: State) -> StateChange {
        StateChange {
            ts,
            state,
            cpu: None,
            waker: 0,
        }
    }

    fn frame(function: &str, file: Option<&str>, line: Option<u32>, module: &str) -> WaitFrame {
        WaitFrame {
            function: function.into(),
            file: file.map(String::from),
            line,
            module: Some(module.into()),
            address: 0x1000,
        }
    }

    #[test]
    fn kernel_lock_blocks_are_grouped_by_lock_taker_and_program_frame() {
        let munmap = "kernel lock mmap_lock, rwsem write, in __vm_munmap (__x64_sys_munmap)";
        let fault = "kernel lock mmap_lock, rwsem read, in lock_mm_and_find_vma";
        let block = |ts, reason: &str, stack| BlockIn {
            ts,
            reason: Some(reason.into()),
            futex: None,
            stack,
        };
        let threads = [
            ThreadBlocks {
                pid: 1,
                tid: 10,
                blocks: vec![
                    block(1_000, munmap, StackIn::At(0)),
                    block(10_000, munmap, StackIn::At(0)),
                    block(20_000, fault, StackIn::At(1)),
                    block(30_000, "do_nanosleep (__x64_sys_nanosleep)", StackIn::At(0)),
                    // Its end is not traced: counted, no length.
                    block(40_000, munmap, StackIn::Missing),
                ],
            },
            ThreadBlocks {
                pid: 1,
                tid: 11,
                blocks: vec![block(2_000, munmap, StackIn::At(0))],
            },
        ];
        let states = [
            (
                10,
                vec![
                    change(3_000, State::Runnable),
                    change(4_000, State::Running),
                    change(12_000, State::Running),
                    change(25_000, State::Runnable),
                    change(25_500, State::Running),
                    change(31_000, State::Running),
                ],
            ),
            (11, vec![change(7_000, State::Running)]),
        ];
        let stacks = [
            // A system call: libc's wrapper first, then the program's caller.
            WaitStack {
                kind: WaitKind::Unknown,
                site: None,
                frames: vec![
                    frame(
                        "__munmap",
                        None,
                        None,
                        "/usr/lib/x86_64-linux-gnu/libc.so.6",
                    ),
                    frame(
                        "hammer",
                        Some("/src/mmap_lock.c"),
                        Some(97),
                        "/tmp/mmap_lock",
                    ),
                    frame(
                        "start_thread",
                        None,
                        None,
                        "/usr/lib/x86_64-linux-gnu/libc.so.6",
                    ),
                ],
                unknown: false,
            },
            // A page fault: the program's own frame is the innermost.
            WaitStack {
                kind: WaitKind::Unknown,
                site: None,
                frames: vec![frame(
                    "hammer",
                    Some("/src/mmap_lock.c"),
                    Some(93),
                    "/tmp/mmap_lock",
                )],
                unknown: false,
            },
        ];
        // The probe's pthread_create hook mapping a thread's stack: the program's call is
        // outside it.
        let hooked = WaitStack {
            kind: WaitKind::Unknown,
            site: None,
            frames: vec![
                frame("__mmap", None, None, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
                frame(
                    "pthread_create",
                    Some("/src/probe/hooks.rs"),
                    Some(647),
                    "/x/target/debug/deps/libcontend_probe.so",
                ),
                frame(
                    "main",
                    Some("/src/mmap_lock.c"),
                    Some(170),
                    "/tmp/mmap_lock",
                ),
            ],
            unknown: false,
        };
        assert_eq!(
            entry_site(&hooked).as_deref(),
            Some("main (mmap_lock.c:170)")
        );
        let r = waits_with_stacks(&threads, &states, &[], &stacks);
        let k = &r.kernel_locks;
        assert_eq!(k.len(), 3, "{k:#?}");
        let m = &k[0];
        assert_eq!(
            (m.lock.as_str(), m.taker.as_str(), m.site.as_deref()),
            ("mmap_lock", "__vm_munmap", Some("hammer (mmap_lock.c:97)"))
        );
        assert_eq!(m.syscall.as_deref(), Some("__x64_sys_munmap"));
        // 1000 -> 4000 (1000 of run queue), 10000 -> 12000, and thread 11's 2000 -> 7000.
        assert_eq!((m.waits, m.total_ns, m.max_ns), (3, 10_000, 5_000));
        assert_eq!((m.runqueue_ns, m.blocked_ns()), (1_000, 9_000));
        assert_eq!(m.threads, BTreeMap::from([(10, 5_000), (11, 5_000)]));
        let f = &k[1];
        assert_eq!(
            (
                f.mode.as_str(),
                f.site.as_deref(),
                f.total_ns,
                f.runqueue_ns
            ),
            ("rwsem read", Some("hammer (mmap_lock.c:93)"), 5_500, 500)
        );
        assert_eq!((k[2].site.as_deref(), k[2].unmeasured), (None, 1));
        assert_eq!(
            blocked_by_lock(k),
            vec![("mmap_lock", 9_000 + 5_000)],
            "per lock name, blocked time only"
        );
        // They remain other blocks in the totals: the sleep and the three timed lock waits.
        assert_eq!(r.other_blocks, 5);
    }
}
