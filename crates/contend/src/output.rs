//! What the commands write: results on stdout, through one writer that knows when the reader
//! has gone (`contend report | head -1`), and files beside them (created one way, named in a
//! status line, a failure the user's error: exit 2, the path they gave).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe returns EPIPE, on which `println!` would
//! panic. Here the first EPIPE marks the reader gone: later output is dropped, the command
//! finishes what it does besides printing (files it was asked to write), and contend exits 0,
//! as `head` expects of a writer it has stopped reading (not 141, the status of a process
//! killed by SIGPIPE: under `set -o pipefail` a script would fail for a report it read). Any
//! other write error (a full disk behind `>`) is kept and reported at the end (exit 1).

use crate::exit::bad_input;
use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The reader of stdout has gone (EPIPE seen).
static READER_GONE: AtomicBool = AtomicBool::new(false);
/// The first write error on stdout that was not EPIPE.
static FAILED: Mutex<Option<io::Error>> = Mutex::new(None);

/// `print!` that ends quietly when the reader has gone.
macro_rules! out {
    ($($arg:tt)*) => {{
        $crate::output::print(format_args!($($arg)*));
    }};
}

/// `println!` that ends quietly when the reader has gone.
macro_rules! outln {
    () => {{
        $crate::output::print(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        $crate::output::print(format_args!("{}\n", format_args!($($arg)*)));
    }};
}

pub(crate) use {out, outln};

/// Text not yet ended by a newline, when lines are wrapped to a width.
static PENDING: Mutex<String> = Mutex::new(String::new());

/// Writes to stdout; false once the reader has gone (or stdout failed). With a width to fit
/// (a terminal, `COLUMNS`), whole lines wider than it are wrapped first
/// (`report::table::wrap_line`).
pub fn print(args: fmt::Arguments<'_>) -> bool {
    if READER_GONE.load(Ordering::Relaxed) {
        return false;
    }
    let Some(width) = report::table::fit_width() else {
        return write_out(args);
    };
    let mut pending = PENDING.lock().unwrap_or_else(|p| p.into_inner());
    let _ = fmt::Write::write_fmt(&mut *pending, args);
    let Some(end) = pending.rfind('\n') else {
        return true;
    };
    let whole: String = pending.drain(..=end).collect();
    drop(pending);
    let mut wrapped = String::with_capacity(whole.len());
    for line in whole.lines() {
        report::table::wrap_line(line, width, &mut wrapped);
    }
    write_out(format_args!("{wrapped}"))
}

fn write_out(args: fmt::Arguments<'_>) -> bool {
    let mut stdout = io::stdout().lock();
    match stdout.write_fmt(args) {
        Ok(()) => true,
        Err(e) => {
            failed(e);
            false
        }
    }
}

/// Marks stdout gone; keeps an error that is not a closed pipe for [`finish`].
fn failed(e: io::Error) {
    READER_GONE.store(true, Ordering::Relaxed);
    if e.kind() != io::ErrorKind::BrokenPipe {
        let mut kept = FAILED.lock().unwrap_or_else(|p| p.into_inner());
        kept.get_or_insert(e);
    }
}

/// Whether stdout's reader has gone: a command with more to print than to do stops.
pub fn reader_gone() -> bool {
    READER_GONE.load(Ordering::Relaxed)
}

/// The error a command returns to stop once its reader has gone: contend then exits 0, saying
/// nothing (see the module's notes).
#[derive(Debug)]
pub struct ReaderGone;

impl fmt::Display for ReaderGone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the reader of stdout has gone")
    }
}

impl std::error::Error for ReaderGone {}

/// `Err(ReaderGone)` once the reader has gone: for commands that would go on working only to
/// print (the demo's next section).
pub fn still_read() -> anyhow::Result<()> {
    if reader_gone() {
        Err(ReaderGone.into())
    } else {
        Ok(())
    }
}

/// Flushes stdout at the end of a command: a write error other than a closed pipe is the
/// command's failure (exit 1), said once.
pub fn finish() -> anyhow::Result<()> {
    let rest = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|p| p.into_inner()));
    if let (false, Some(width)) = (rest.is_empty() || reader_gone(), report::table::fit_width()) {
        let mut wrapped = String::new();
        report::table::wrap_line(&rest, width, &mut wrapped);
        wrapped.pop(); // the text did not end its line
        write_out(format_args!("{wrapped}"));
    }
    if !reader_gone() {
        if let Err(e) = io::stdout().lock().flush() {
            failed(e);
        }
    }
    match FAILED.lock().unwrap_or_else(|p| p.into_inner()).take() {
        Some(e) => Err(anyhow::anyhow!("cannot write to stdout: {e}")),
        None => Ok(()),
    }
}

/// stdout as an `io::Write` for the exports written to `-`: a closed pipe swallows what is
/// left (the export ends as if written; contend exits 0), another error is the export's.
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if reader_gone() {
            return Ok(buf.len());
        }
        match io::stdout().lock().write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                failed(e);
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if reader_gone() {
            return Ok(());
        }
        match io::stdout().lock().flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                failed(e);
                Ok(())
            }
            other => other,
        }
    }
}

/// `line-N.svg` for the top lines of a run's sharing results, in `dir`.
pub fn write_strips(
    sharing: &explain::sharing::Sharing,
    dir: &std::path::Path,
    top: usize,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| bad_input(format!("cannot create {}: {e}", dir.display())))?;
    let strips = sharing.strips(top);
    for (name, svg) in &strips {
        let path = dir.join(name);
        std::fs::write(&path, svg)
            .map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
    }
    crate::ui::status(format_args!(
        "wrote {} heat strip(s) into {}",
        strips.len(),
        dir.display()
    ));
    Ok(())
}

/// A page's file (`--html`), made before anything is printed so that a path that cannot be a
/// new file is one line and exit 2, not a report followed by an error.
pub struct Page {
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl Page {
    /// A new file (mode 0600 less the umask; `O_EXCL|O_NOFOLLOW`: never an existing file, nor
    /// through a symlink someone planted).
    pub fn create(path: &std::path::Path) -> anyhow::Result<Page> {
        let file = observe::private::create_new(path, 0o600).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => bad_input(format!(
                "cannot write {}: it exists (give a new file name; an existing file is never overwritten)",
                path.display()
            )),
            _ => bad_input(format!("cannot write {e}")),
        })?;
        let path = path.to_path_buf();
        Ok(Page { path, file })
    }

    /// Writes the page and says where; a write that fails is the machine's (exit 1), and the
    /// half-written file (ours, made a moment ago) is removed rather than left to be opened.
    pub fn write(mut self, page: &str) -> anyhow::Result<()> {
        let written = self.file.write_all(page.as_bytes());
        written.and_then(|()| self.file.sync_all()).map_err(|e| {
            let _ = std::fs::remove_file(&self.path);
            anyhow::anyhow!("writing {}: {e}", self.path.display())
        })?;
        let (path, kib) = (self.path.display(), page.len().div_ceil(1024));
        crate::ui::status(format_args!(
            "wrote the report page {path} ({kib} KiB; open it in a browser)"
        ));
        Ok(())
    }
}
