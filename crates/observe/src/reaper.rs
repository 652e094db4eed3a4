//! Leaves nothing in the rings directory when the recorder dies, however it dies (SIGKILL
//! included, when no code of its own runs).
//!
//! The recorder re-executes itself (`/proc/self/exe` with the hidden argument [`SUBCOMMAND`]:
//! a threaded process never forks without exec) as a tiny *reaper*, in a session of its own
//! (so a Ctrl-C or hang-up meant for the recorder does not reach it), holding the read end of
//! a pipe whose write end only the recorder holds (close-on-exec: no program the recorder
//! starts inherits it). When the recorder ends, the kernel closes the write end; the reaper
//! reads end-of-file, removes the directory if it is still the one the recorder made (same
//! device and inode, never through a symlink), and exits. A recorder that ends normally has
//! removed the directory already: the reaper finds nothing and exits.
//!
//! Only a binary that answers [`SUBCOMMAND`] may spawn a reaper: it calls [`enable`] first
//! (contend's `main`); elsewhere (library tests) [`watch`] does nothing.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The hidden first argument that makes contend a reaper: `contend SUBCOMMAND DIR DEV INO`.
pub const SUBCOMMAND: &str = "__contend-rings-reaper";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Declares that this executable runs [`main`] when given [`SUBCOMMAND`].
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// A running reaper; dropping it (the directory already removed) lets it exit and reaps it.
pub struct Reaper {
    write_end: Option<OwnedFd>,
    child: Child,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        drop(self.write_end.take());
        // It exits at once on end-of-file.
        let _ = self.child.wait();
    }
}

/// Starts a reaper for `dir` (which must exist); `None` when reapers are not enabled in this
/// executable or it could not be started (the recorder still removes the directory itself
/// when it ends normally).
pub fn watch(dir: &Path) -> Option<Reaper> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let meta = std::fs::symlink_metadata(dir).ok()?;
    let mut fds = [0; 2];
    // SAFETY: a valid out-array; both ends close-on-exec.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: pipe2 just returned these descriptors, owned by nobody else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(SUBCOMMAND)
        .arg(dir)
        .arg(meta.dev().to_string())
        .arg(meta.ino().to_string())
        // The read end becomes its stdin (dup2 clears close-on-exec there only).
        .stdin(Stdio::from(read_end))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().ok()?;
    // `cmd` (and the read end it holds) is dropped here: only the reaper reads the pipe.
    Some(Reaper {
        write_end: Some(write_end),
        child,
    })
}

/// The reaper's body, for `contend SUBCOMMAND DIR DEV INO` (the arguments after SUBCOMMAND);
/// returns the exit code.
pub fn main(args: &[OsString]) -> i32 {
    let [dir, dev, ino] = args else {
        return 2;
    };
    let (Some(dev), Some(ino)) = (
        dev.to_str().and_then(|d| d.parse::<u64>().ok()),
        ino.to_str().and_then(|i| i.parse::<u64>().ok()),
    ) else {
        return 2;
    };
    // Out of reach of the terminal's and the recorder's process group's signals already
    // (setsid); ignore the polite ones too, so that only the pipe ends it.
    // SAFETY: setting dispositions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reading stdin into a local buffer.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    remove_if_same(Path::new(dir), dev, ino);
    0
}

/// Removes `dir` and what it holds if it is still the directory (`dev`, `ino`): opened
/// without following symlinks, emptied through its descriptor (a few levels deep at most),
/// then removed.
pub fn remove_if_same(dir: &Path, dev: u64, ino: u64) {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let Some(parent_fd) = open_dir(libc::AT_FDCWD, parent.as_os_str(), false) else {
        return;
    };
    let Some(fd) = open_dir(parent_fd.as_raw_fd(), name, true) else {
        return;
    };
    if !same(fd.as_raw_fd(), dev, ino) {
        return;
    }
    empty(&fd, 4);
    let Ok(c_name) = CString::new(name.as_bytes()) else {
        return;
    };
    // SAFETY: a NUL-terminated name relative to an open directory; a zeroed stat is valid.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(
            parent_fd.as_raw_fd(),
            c_name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
            && st.st_dev == dev
            && st.st_ino == ino
        {
            libc::unlinkat(parent_fd.as_raw_fd(), c_name.as_ptr(), libc::AT_REMOVEDIR);
        }
    }
}

fn open_dir(at: libc::c_int, name: &OsStr, no_follow: bool) -> Option<OwnedFd> {
    let c = CString::new(name.as_bytes()).ok()?;
    let flags = libc::O_RDONLY
        | libc::O_DIRECTORY
        | libc::O_CLOEXEC
        | if no_follow { libc::O_NOFOLLOW } else { 0 };
    // SAFETY: a NUL-terminated path; the descriptor is owned by the result.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags) };
    // SAFETY: a descriptor we just opened.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn same(fd: libc::c_int, dev: u64, ino: u64) -> bool {
    // SAFETY: a zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat of an open descriptor.
    unsafe { libc::fstat(fd, &mut st) == 0 && st.st_dev == dev && st.st_ino == ino }
}

/// Unlinks everything in the open directory `fd`; subdirectories (never followed symlinks)
/// emptied and removed down to `depth` levels.
fn empty(fd: &OwnedFd, depth: u32) {
    // The directory's own listing, through its descriptor (not its path, which could change).
    let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
        return;
    };
    let names: Vec<OsString> = entries.flatten().map(|e| e.file_name()).collect();
    for name in names {
        let Ok(c) = CString::new(name.as_bytes()) else {
            continue;
        };
        // SAFETY: a NUL-terminated name relative to an open directory.
        if unsafe { libc::unlinkat(fd.as_raw_fd(), c.as_ptr(), 0) } == 0 || depth == 0 {
            continue;
        }
        if let Some(sub) = open_dir(fd.as_raw_fd(), &name, true) {
            empty(&sub, depth - 1);
            // SAFETY: as above.
            unsafe { libc::unlinkat(fd.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_its_directory_only() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("rings");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("1-2-3.ring"), b"x").unwrap();
        std::fs::write(dir.join("sub/a"), b"x").unwrap();
        let outside = top.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
        let meta = std::fs::metadata(&dir).unwrap();
        // Another directory of the same name is not removed.
        remove_if_same(&dir, meta.dev(), meta.ino() + 1);
        assert!(dir.join("1-2-3.ring").exists());
        remove_if_same(&dir, meta.dev(), meta.ino());
        assert!(!dir.exists());
        assert!(outside.join("keep").exists(), "a symlink is not followed");
    }
}
