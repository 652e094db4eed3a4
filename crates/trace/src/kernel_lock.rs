//! A kernel lock that a block waited for, as its reason string says it (docs/formats.md §2.3a).
//!
//! The off-CPU recorder names a block's kernel call chain at record time (KASLR addresses mean
//! nothing after the run) and keeps only a reason string. When the chain shows a sleeping
//! lock's slow path (`observe::offcpu::kernel_lock`), that string names the lock:
//!
//! `kernel lock NAME, MODE, in TAKER` with ` (SYSCALL)` when a system call entered the kernel,
//! e.g. `kernel lock mmap_lock, rwsem write, in __vm_munmap (__x64_sys_munmap)`.
//!
//! Kernel symbols hold neither `, ` nor spaces, and names of lock kinds have no comma, so the
//! three fields split at `, ` without ambiguity. A reason of another form is not a kernel lock.

/// The prefix of a kernel lock's reason string.
pub const PREFIX: &str = "kernel lock ";

/// Names of the locks recognised by what took them. A lock outside this list is named by its
/// kind and taker (`rwsem in filemap_fault`); [`KernelLock::static_name`] gives these as
/// `&'static str` for summaries that must stay `Copy`.
pub const KNOWN: &[&str] = &[
    "mmap_lock",
    "vma_lock",
    "i_rwsem",
    "f_pos_lock",
    "pipe mutex",
    "sb_writers",
];

/// A kernel lock wait, as named at record time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelLock {
    /// `mmap_lock`, `vma_lock`, `i_rwsem`, `f_pos_lock`, ... or `rwsem in FUNC` / `mutex in FUNC`.
    pub name: String,
    /// The lock's kind and how it was taken: `rwsem read`, `rwsem write`, `mutex`,
    /// `percpu rwsem`, `rt_mutex`, `vma write`.
    pub mode: String,
    /// The kernel function that took the lock (the first frame outside the lock's code).
    pub taker: String,
    /// The system call that entered the kernel, when one did (not for a page fault).
    pub syscall: Option<String>,
}

impl KernelLock {
    /// The reason string that carries it.
    pub fn to_reason(&self) -> String {
        let mut s = format!(
            "{PREFIX}{}, {}, in {}",
            clean(&self.name),
            clean(&self.mode),
            clean(&self.taker)
        );
        if let Some(sc) = &self.syscall {
            s.push_str(&format!(" ({})", clean(sc)));
        }
        s
    }

    /// The lock a reason string names, or `None` when it names none.
    pub fn from_reason(reason: &str) -> Option<KernelLock> {
        let rest = reason.strip_prefix(PREFIX)?;
        let mut it = rest.splitn(3, ", ");
        let name = it.next().filter(|s| !s.is_empty())?;
        let mode = it.next().filter(|s| !s.is_empty())?;
        let taken = it.next()?.strip_prefix("in ")?;
        let (taker, syscall) = match taken.split_once(" (") {
            Some((t, sc)) => (t, Some(sc.strip_suffix(')')?.to_string())),
            None => (taken, None),
        };
        if taker.is_empty() || taker.contains(' ') {
            return None;
        }
        Some(KernelLock {
            name: name.to_string(),
            mode: mode.to_string(),
            taker: taker.to_string(),
            syscall,
        })
    }

    /// The name as one of [`KNOWN`], if it is one.
    pub fn static_name(&self) -> Option<&'static str> {
        KNOWN.iter().copied().find(|k| *k == self.name)
    }
}

/// A field without the separators of the format (a symbol never has them; a hostile one is
/// cut rather than allowed to shift the fields).
fn clean(s: &str) -> String {
    s.replace(", ", " ").replace(" (", " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_round_trips() {
        let l = KernelLock {
            name: "mmap_lock".into(),
            mode: "rwsem write".into(),
            taker: "__vm_munmap".into(),
            syscall: Some("__x64_sys_munmap".into()),
        };
        let r = l.to_reason();
        assert_eq!(
            r,
            "kernel lock mmap_lock, rwsem write, in __vm_munmap (__x64_sys_munmap)"
        );
        assert_eq!(KernelLock::from_reason(&r), Some(l.clone()));
        assert_eq!(l.static_name(), Some("mmap_lock"));
        let fault = KernelLock {
            name: "rwsem in filemap_fault".into(),
            syscall: None,
            ..l
        };
        assert_eq!(
            KernelLock::from_reason(&fault.to_reason()),
            Some(fault.clone())
        );
        assert_eq!(fault.static_name(), None);
    }

    #[test]
    fn other_reasons_are_not_kernel_locks() {
        for r in [
            "do_nanosleep (__x64_sys_clock_nanosleep)",
            "rwsem_down_write_slowpath (__x64_sys_munmap)",
            "kernel lock ",
            "kernel lock mmap_lock",
            "kernel lock mmap_lock, rwsem write",
            "kernel lock mmap_lock, rwsem write, at x",
            "kernel lock mmap_lock, rwsem write, in x (y",
            "kernel lock , rwsem write, in x",
        ] {
            assert_eq!(KernelLock::from_reason(r), None, "{r}");
        }
    }
}
