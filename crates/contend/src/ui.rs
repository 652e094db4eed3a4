//! How contend talks on stderr: one prefix for every notice, warning and status line, and one
//! progress bar. Results go to stdout; everything here goes to stderr, so `--json` and piped
//! output stay clean.
//!
//! A line that cannot be written (stderr closed: `contend record ... 2>&1 | true`) is dropped:
//! a note is never worth a recording (`eprintln!` would panic on EPIPE, and the run would be
//! left without its end in meta.json). The progress bar ignores write errors itself.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fmt::Display;
use std::io::Write;

/// One line on stderr, dropped if stderr is closed; wrapped like stdout's lines when stderr
/// is a terminal and a width is set (`COLUMNS`, stdout's terminal).
fn line(prefix: &str, msg: impl Display) {
    use std::io::IsTerminal;
    let text = format!("contend: {prefix}{msg}");
    let mut out = String::new();
    match report::table::fit_width() {
        Some(width) if std::io::stderr().is_terminal() => {
            report::table::wrap_line(&text, width, &mut out)
        }
        _ => {
            out = text;
            out.push('\n');
        }
    }
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// Something the user should know about the result (`contend: note: …`): a measurement left
/// out, a fallback taken, a file that was skipped.
pub fn note(msg: impl Display) {
    line("note: ", msg);
}

/// Something that may make the result wrong (`contend: warning: …`).
pub fn warning(msg: impl Display) {
    line("warning: ", msg);
}

/// What contend is doing or has done (`contend: wrote …`, `contend: recording …`).
pub fn status(msg: impl Display) {
    line("", msg);
}

/// One error line (`contend: error: …`), for errors reported before the command fails.
pub fn error(msg: impl Display) {
    line("error: ", msg);
}

/// A line on stderr without contend's prefix (a step of another tool's output), dropped if
/// stderr is closed.
pub fn plain(msg: impl Display) {
    let _ = writeln!(std::io::stderr().lock(), "{msg}");
}

/// A notice of the recorder, at its level.
pub fn recorder_notice(n: &recorder::Notice) {
    match n.level {
        recorder::Level::Info => status(&n.text),
        recorder::Level::Note => note(&n.text),
        recorder::Level::Warning => warning(&n.text),
    }
}

/// A progress bar of `len` steps of `unit` ("runs", "repetitions"), with room for a message.
/// It draws on stderr and only when stderr is a terminal (indicatif checks), so logs and CI
/// output stay free of control sequences.
pub fn progress_bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit}  {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
