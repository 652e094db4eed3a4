//! Error classification into the documented exit codes.

use std::fmt;
use std::process::ExitCode;

/// Exit code for a failed measurement or a measured program that failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code for bad input or usage (the same code clap uses for usage errors).
pub const EXIT_BAD_INPUT: u8 = 2;

/// Marks an error as the user's input being wrong (exit code 2). Wrap with `bad_input(...)`.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// An error that exits with code 2.
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

/// Prints `contend: error: ...` (with causes on one line) and picks the exit code.
pub fn report_error(e: &anyhow::Error) -> ExitCode {
    use recorder::RecordError;
    let recorded = e.chain().find_map(|c| c.downcast_ref::<RecordError>());
    let code = match recorded {
        // The shell's codes for a program that could not start: 126, 127.
        Some(RecordError::CouldNotStart(s)) => u8::try_from(s.exit_code()).unwrap_or(EXIT_FAILED),
        Some(RecordError::BadInput(_)) => EXIT_BAD_INPUT,
        // A damaged run directory or a bad option of the loader is the user's input.
        _ if e.chain().any(|c| {
            c.is::<BadInput>()
                || c.downcast_ref::<explain::Error>()
                    .is_some_and(|e| e.is_bad_input())
        }) =>
        {
            EXIT_BAD_INPUT
        }
        _ => EXIT_FAILED,
    };
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        msg.push_str(": ");
        msg.push_str(&cause.to_string());
    }
    crate::ui::error(msg);
    ExitCode::from(code)
}
