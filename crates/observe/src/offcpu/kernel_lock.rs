//! The kernel lock a block waited for, named from its kernel call chain at record time
//! (issue 22, slice 5): pure, tested on chains recorded on this project's kernel (6.18).
//!
//! A thread that sleeps on a kernel lock switches out from the lock's slow path
//! (`rwsem_down_write_slowpath`, `__mutex_lock`, `percpu_rwsem_wait`, `rt_mutex_slowlock`,
//! the per-VMA lock's `__vma_start_write`, ...). Which lock it is shows in the frames that
//! called the lock's code: `vm_mmap_pgoff`, `__vm_munmap` or `lock_mm_and_find_vma` (a page
//! fault) take the process's `mmap_lock`; `generic_file_write_iter` or `filename_create` an
//! inode's `i_rwsem`; `pipe_write` the pipe's mutex. Elsewhere the lock is named by its kind
//! and taker (`rwsem in filemap_fault`). The lock's address is not known here (the
//! `lock:contention_*` tracepoints would give it: docs/methodology.md says why they are not
//! used), so two inodes' `i_rwsem` taken by the same function are one row.
//!
//! Spinning waits (spinlocks, a mutex's or rwsem's optimistic spin) do not switch out and are
//! not seen: they are CPU time, which a CPU profile shows.

use trace::kernel_lock::KernelLock;

/// The sleeping slow path a frame is, as the lock's kind and mode, if it is one.
fn slow_path(name: &str) -> Option<&'static str> {
    Some(match name {
        "rwsem_down_read_slowpath" => "rwsem read",
        "rwsem_down_write_slowpath" => "rwsem write",
        "__mutex_lock"
        | "__mutex_lock_common"
        | "__mutex_lock_slowpath"
        | "__mutex_lock_killable_slowpath"
        | "__mutex_lock_interruptible_slowpath"
        | "mutex_lock_killable"
        | "mutex_lock_interruptible"
        | "mutex_lock_io"
        | "mutex_lock"
        | "__ww_mutex_lock"
        | "__ww_mutex_lock_slowpath"
        | "__ww_mutex_lock_interruptible_slowpath" => "mutex",
        "percpu_rwsem_wait" | "__percpu_down_read" | "percpu_down_write" => "percpu rwsem",
        "__down"
        | "__down_common"
        | "__down_killable"
        | "__down_interruptible"
        | "__down_timeout" => "semaphore",
        "__vma_start_write" | "__vma_enter_locked" => "vma write",
        n if n.starts_with("rt_mutex_slowlock")
            || n.starts_with("__rt_mutex_slowlock")
            || n.starts_with("rtlock_slowlock")
            || n.starts_with("rt_mutex_lock") =>
        {
            "rt_mutex"
        }
        _ => return None,
    })
}

/// A frame of the lock's own code between the slow path and the function that took the lock
/// (`down_write_killable`, `mutex_lock`, the `mmap_write_lock_killable` wrapper, ...).
fn is_lock_code(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "down_",
        "__down",
        "rwsem_",
        "mutex_lock",
        "__mutex_lock",
        "ww_mutex",
        "__ww_mutex",
        "percpu_down",
        "__percpu_down",
        "percpu_rwsem",
        "rt_mutex",
        "__rt_mutex",
        "rtlock",
        "mmap_read_lock",
        "mmap_write_lock",
        "inode_lock",
        "__vma_start_write",
        "__vma_enter_locked",
        "vma_start_write",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Functions that take the process's `mmap_lock` (mm->mmap_lock): the memory-map system calls
/// and the page fault's fallback when the per-VMA lock could not be taken.
const MMAP_LOCK_TAKERS: &[&str] = &[
    "lock_mm_and_find_vma",
    "do_user_addr_fault",
    "exc_page_fault",
    "do_page_fault",
    "vm_mmap_pgoff",
    "vm_mmap",
    "ksys_mmap_pgoff",
    "__vm_munmap",
    "vm_munmap",
    "do_madvise",
    "madvise_lock",
    "madvise_do_behavior",
    "do_mprotect_pkey",
    "__do_sys_brk",
    "__x64_sys_brk",
    "__arm64_sys_brk",
    "vm_brk_flags",
    "__do_sys_mremap",
    "__x64_sys_mremap",
    "__arm64_sys_mremap",
    "do_mlock",
    "__mm_populate",
    "apply_mlockall_flags",
    "__x64_sys_mlockall",
    "__x64_sys_munlockall",
    "__x64_sys_munlock",
    "__x64_sys_mincore",
    "__x64_sys_msync",
    "get_user_pages_unlocked",
    "__access_remote_vm",
    "access_remote_vm",
    "expand_stack",
    "dup_mmap",
    "exit_mmap",
];

/// Functions that take an inode's `i_rwsem` (`inode_lock`, inlined into them).
const I_RWSEM_TAKERS: &[&str] = &[
    "generic_file_write_iter",
    "ext4_buffered_write_iter",
    "ext4_file_write_iter",
    "ext4_dio_write_iter",
    "ext4_dax_write_iter",
    "ext4_fallocate",
    "shmem_file_write_iter",
    "btrfs_inode_lock",
    "xfs_ilock",
    "xfs_ilock_iocb",
    "xfs_ilock_iocb_for_write",
    "xfs_file_buffered_write",
    "f2fs_file_write_iter",
    "fuse_file_write_iter",
    "filename_create",
    "do_unlinkat",
    "do_rmdir",
    "open_last_lookups",
    "lookup_slow",
    "lock_rename",
    "lock_two_directories",
    "do_truncate",
    "chmod_common",
    "chown_common",
    "iterate_dir",
    "__generic_file_fsync",
    "vfs_setxattr",
];

/// The function name without a compiler suffix (`.constprop.0`, `.isra.0`, `.cold`).
fn base(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// The kernel lock a block's chain (function names, innermost first) waited for, if its
/// innermost frame outside the scheduler is a sleeping lock's slow path.
pub fn kernel_lock(
    names: &[&str],
    is_scheduler_frame: impl Fn(&str) -> bool,
) -> Option<KernelLock> {
    let at = names.iter().position(|n| !is_scheduler_frame(n))?;
    let mode = slow_path(base(names[at]))?;
    let outer = &names[at + 1..];
    let api: Vec<&str> = outer
        .iter()
        .map(|n| base(n))
        .take_while(|n| is_lock_code(n))
        .collect();
    let taker = outer
        .get(api.len())
        .map_or_else(|| base(names[at]), |n| base(n))
        .to_string();
    let via = |p: &str| api.iter().any(|n| n.starts_with(p));
    let kind = mode.split(' ').next().unwrap_or(mode);
    let name = if mode == "vma write" {
        "vma_lock".to_string()
    } else if via("mmap_read_lock")
        || via("mmap_write_lock")
        || (kind == "rwsem" && MMAP_LOCK_TAKERS.contains(&taker.as_str()))
    {
        "mmap_lock".to_string()
    } else if via("inode_lock") || (kind == "rwsem" && I_RWSEM_TAKERS.contains(&taker.as_str())) {
        "i_rwsem".to_string()
    } else if kind == "mutex" && matches!(taker.as_str(), "fdget_pos" | "__fdget_pos") {
        // Threads sharing one open file: its position lock (`read`/`write` on one fd).
        "f_pos_lock".to_string()
    } else if kind == "mutex" && matches!(taker.as_str(), "pipe_write" | "pipe_read") {
        "pipe mutex".to_string()
    } else if mode == "percpu rwsem"
        && (taker.contains("sb_start_write") || taker.starts_with("mnt_want_write"))
    {
        "sb_writers".to_string()
    } else if mode == "percpu rwsem" {
        format!("percpu rwsem in {taker}")
    } else {
        format!("{kind} in {taker}")
    };
    let syscall = names
        .iter()
        .find(|n| n.contains("_sys_") && !n.starts_with("do_syscall"))
        .map(|s| s.to_string());
    Some(KernelLock {
        name,
        mode: mode.to_string(),
        taker,
        syscall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(chain: &str) -> Option<KernelLock> {
        let names: Vec<&str> = chain.split(" <- ").collect();
        kernel_lock(&names, super::super::is_scheduler_frame)
    }

    /// Chains seen with `perf record -e sched:sched_switch -g` on examples/waits/mmap_lock.c
    /// (kernel 6.18.44), innermost first, user frames cut.
    #[test]
    fn mmap_and_munmap_and_page_faults_wait_for_mmap_lock() {
        let munmap = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_write_slowpath <- down_write_killable <- __vm_munmap <- __x64_sys_munmap <- do_syscall_64 <- entry_SYSCALL_64_after_hwframe").unwrap();
        assert_eq!(
            munmap.to_reason(),
            "kernel lock mmap_lock, rwsem write, in __vm_munmap (__x64_sys_munmap)"
        );
        // The mmap system call's own frame is inlined: no syscall frame, vm_mmap_pgoff took it.
        let mmap = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_write_slowpath <- down_write_killable <- vm_mmap_pgoff <- do_syscall_64 <- entry_SYSCALL_64_after_hwframe").unwrap();
        assert_eq!(
            (mmap.name.as_str(), mmap.taker.as_str(), mmap.syscall),
            ("mmap_lock", "vm_mmap_pgoff", None)
        );
        let fault = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_read_slowpath <- down_read_killable <- lock_mm_and_find_vma <- exc_page_fault <- asm_exc_page_fault").unwrap();
        assert_eq!(
            (
                fault.name.as_str(),
                fault.mode.as_str(),
                fault.taker.as_str()
            ),
            ("mmap_lock", "rwsem read", "lock_mm_and_find_vma")
        );
        // munmap splitting a VMA waits for the page faults reading it (the per-VMA lock).
        let vma = named("__schedule <- schedule <- __vma_start_write <- __split_vma <- vms_gather_munmap_vmas <- do_vmi_align_munmap <- do_vmi_munmap <- __vm_munmap <- __x64_sys_munmap <- do_syscall_64").unwrap();
        assert_eq!(
            (vma.name.as_str(), vma.mode.as_str(), vma.taker.as_str()),
            ("vma_lock", "vma write", "__split_vma")
        );
        assert_eq!(vma.syscall.as_deref(), Some("__x64_sys_munmap"));
        // glibc's madvise(MADV_DONTNEED) of a thread's stack at its exit.
        let madvise = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_read_slowpath <- down_read_killable <- madvise_do_behavior <- do_madvise <- __x64_sys_madvise").unwrap();
        assert_eq!(madvise.name, "mmap_lock");
    }

    #[test]
    fn inode_and_other_locks_are_named_by_their_taker() {
        let write = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_write_slowpath <- down_write <- generic_file_write_iter <- vfs_write <- ksys_write <- __x64_sys_write <- do_syscall_64").unwrap();
        assert_eq!(
            write.to_reason(),
            "kernel lock i_rwsem, rwsem write, in generic_file_write_iter (__x64_sys_write)"
        );
        let other = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_read_slowpath <- down_read <- filemap_fault <- __do_fault <- do_fault <- handle_mm_fault <- exc_page_fault").unwrap();
        assert_eq!(other.name, "rwsem in filemap_fault");
        let pipe = named("__schedule <- schedule <- schedule_preempt_disabled <- __mutex_lock.constprop.0 <- __mutex_lock_slowpath <- mutex_lock <- pipe_write <- vfs_write").unwrap();
        assert_eq!(
            (pipe.name.as_str(), pipe.mode.as_str(), pipe.taker.as_str()),
            ("pipe mutex", "mutex", "pipe_write")
        );
        // Seen with 4 threads writing through one shared descriptor, then each its own.
        let pos = named("__schedule <- schedule <- schedule_preempt_disabled <- __mutex_lock.constprop.0 <- fdget_pos <- ksys_write <- do_syscall_64").unwrap();
        assert_eq!(
            (pos.name.as_str(), pos.taker.as_str()),
            ("f_pos_lock", "fdget_pos")
        );
        let ext4 = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_write_slowpath <- down_write <- ext4_buffered_write_iter <- vfs_write <- ksys_write <- do_syscall_64").unwrap();
        assert_eq!(ext4.name, "i_rwsem");
        let truncate = named("__schedule <- schedule <- schedule_preempt_disabled <- rwsem_down_write_slowpath <- down_write_killable <- do_truncate <- do_ftruncate <- do_sys_ftruncate <- __x64_sys_ftruncate").unwrap();
        assert_eq!(truncate.name, "i_rwsem");
        let m = named("__schedule <- schedule <- __mutex_lock <- mutex_lock <- some_driver_ioctl")
            .unwrap();
        assert_eq!(m.name, "mutex in some_driver_ioctl");
        // A chain cut inside the lock's code: the slow path stands for the taker.
        let cut =
            named("__schedule <- schedule <- rwsem_down_write_slowpath <- down_write").unwrap();
        assert_eq!(cut.name, "rwsem in rwsem_down_write_slowpath");
    }

    #[test]
    fn other_blocks_are_not_kernel_locks() {
        for chain in [
            "__schedule <- schedule <- futex_do_wait <- __futex_wait <- futex_wait <- do_futex <- __x64_sys_futex",
            "__schedule <- schedule <- do_nanosleep <- hrtimer_nanosleep <- __x64_sys_clock_nanosleep",
            "__schedule <- schedule <- io_schedule <- folio_wait_bit_common <- filemap_fault",
            "__schedule <- schedule",
            "",
        ] {
            assert_eq!(named(chain), None, "{chain}");
        }
    }
}
