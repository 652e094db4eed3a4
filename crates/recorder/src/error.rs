//! The recorder's one error type, and the one for "the program could not start".

use std::path::PathBuf;

/// Why a recording did not happen or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// What was asked for is wrong or impossible here (the command exits 2).
    #[error("{0}")]
    BadInput(String),
    /// The program could not be started (the command exits 126 or 127).
    #[error(transparent)]
    CouldNotStart(#[from] CouldNotStart),
    /// The machine failed the recording (a file that cannot be written, a launch that broke).
    #[error("{0}")]
    Failed(String),
}

impl RecordError {
    pub(crate) fn bad(msg: impl Into<String>) -> RecordError {
        RecordError::BadInput(msg.into())
    }

    pub(crate) fn failed(e: impl std::fmt::Display) -> RecordError {
        RecordError::Failed(e.to_string())
    }
}

impl From<trace::RunDirError> for RecordError {
    /// A path that cannot be a run directory (`-o /`, `-o /proc/x`, an existing file) is the
    /// user's input; a disk that fails is not.
    fn from(e: trace::RunDirError) -> RecordError {
        if e.is_bad_input() {
            RecordError::bad(e.to_string())
        } else {
            RecordError::failed(e)
        }
    }
}

impl From<std::io::Error> for RecordError {
    fn from(e: std::io::Error) -> RecordError {
        RecordError::failed(e)
    }
}

/// The program could not be started: not found, or not executable. The run directory is kept,
/// with meta.json saying so, so that what was asked for is on record.
#[derive(Debug, thiserror::Error)]
#[error("cannot start `{program}`: {why} (the empty run is kept in {})", run.display())]
pub struct CouldNotStart {
    pub program: String,
    pub why: std::io::Error,
    /// The run directory that was created for it.
    pub run: PathBuf,
}

impl CouldNotStart {
    /// The shell's code: 126 when the program is there but cannot be executed, else 127.
    pub fn exit_code(&self) -> i32 {
        if self.why.kind() == std::io::ErrorKind::PermissionDenied {
            126
        } else {
            127
        }
    }
}
