//! Why reading a process from `/proc` failed, in words a user can act on.

use std::io;
use std::path::PathBuf;

/// A failure to read a process. The `Display` text is one line, meant to be shown as is.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// Nothing with this PID exists (never did, or was gone before we looked).
    #[error("no process with PID {pid}")]
    NoSuchProcess { pid: u32 },
    /// The PID names a thread, not a process; `pid` is its process.
    #[error("{tid} is a thread of process {pid}, not a process")]
    IsThread { tid: u32, pid: u32 },
    /// The process existed when attached and is gone now (or is a zombie, or its PID was reused).
    #[error("process {pid} exited")]
    Exited { pid: u32 },
    /// The kernel refused a read; usually another user's process read without root.
    #[error("permission denied reading {}: run as root or as the process's owner", path.display())]
    PermissionDenied { path: PathBuf },
    /// The kernel lacks the file (for example `numa_maps` on a kernel built without NUMA).
    #[error("{} does not exist on this kernel", path.display())]
    Unsupported { path: PathBuf },
    /// A file did not have the layout the kernel documents.
    #[error("{}: unexpected format: {why}", path.display())]
    Malformed { path: PathBuf, why: String },
    /// Any other I/O failure.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// A line or file whose text could not be parsed; `ProcError::Malformed` adds the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    pub(crate) fn new(why: impl Into<String>) -> ParseError {
        ParseError(why.into())
    }
}

/// True when an I/O error means "the task is gone": the file vanished, or the task died
/// between `open` and `read` (the kernel then answers `ESRCH`).
pub(crate) fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

pub(crate) fn is_denied(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
}
