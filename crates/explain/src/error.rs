//! The loader's one error: the run directory (or an option naming part of it) is not what a
//! report can be made of. Commands map it to exit code 2 (bad input).

/// Why a run could not be explained.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the run is missing, unreadable or damaged (the message names it).
    #[error("{0}")]
    Damaged(String),
    /// An option asks for something the run does not hold (`--mpi-job 3` of a two-job run).
    #[error("{0}")]
    Option(String),
    /// A file the report writes (an export) could not be written.
    #[error("{0}")]
    Write(String),
}

impl Error {
    /// The user's input is at fault (exit 2): the run or an option, not a failed write.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, Error::Write(_))
    }
}

pub(crate) fn damaged(message: impl Into<String>) -> Error {
    Error::Damaged(message.into())
}
