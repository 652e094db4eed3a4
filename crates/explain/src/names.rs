//! Naming code addresses, the one way every section does it: a call site as people read it,
//! `function (file:line)` of the program's own frame (library wrappers skipped), and the same
//! split into its function and `file:line` for JSON.

use serde::Serialize;

/// A resolved call site: its name as the text report shows it, and its parts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CallSite {
    /// `update_shared_counter (planted_hold.c:117)`, or symbol+offset / module+offset where
    /// there is no line.
    #[serde(skip)]
    pub label: String,
    /// The function of the frame shown (absent when the address has no symbol).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// `file:line` of the frame shown, the file's base name (absent without line tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl CallSite {
    /// The first frame of `f`, innermost first, that is not a library wrapper.
    pub fn of(f: &symbolize::Frame) -> CallSite {
        let mut frames: Vec<(Option<&str>, Option<&str>, Option<u32>)> =
            vec![(f.function.as_deref(), f.file.as_deref(), f.line)];
        frames.extend(
            f.inlined
                .iter()
                .map(|c| (c.function.as_deref(), c.file.as_deref(), c.line)),
        );
        let chosen = frames
            .iter()
            .find(|(func, file, _)| !is_wrapper(*func, *file))
            .or(frames.first())
            .copied();
        let (function, file, line) = chosen.unwrap_or((None, None, None));
        CallSite::from_parts(f, function, file, line)
    }

    /// The innermost frame of `f`, wrappers included (a memory access is named where it is,
    /// even inside a library's inline function).
    pub fn innermost(f: &symbolize::Frame) -> CallSite {
        CallSite::from_parts(f, f.function.as_deref(), f.file.as_deref(), f.line)
    }

    fn from_parts(
        f: &symbolize::Frame,
        function: Option<&str>,
        file: Option<&str>,
        line: Option<u32>,
    ) -> CallSite {
        let location = match (file, line) {
            (Some(file), Some(line)) => Some(format!("{}:{line}", base_name(file))),
            _ => None,
        };
        let label = match (function, &location) {
            (Some(func), Some(loc)) => format!("{func} ({loc})"),
            _ => f.to_string(),
        };
        CallSite {
            label,
            function: function.map(str::to_string),
            location,
        }
    }
}

/// Frames of library code that a lock call comes through (`std::mutex::lock`, libstdc++'s
/// `__gthread_mutex_lock`, anything compiled from a system header): the call site shown is
/// the first frame outside them, i.e. the program's own line.
fn is_wrapper(function: Option<&str>, file: Option<&str>) -> bool {
    let f = function.unwrap_or("");
    file.is_some_and(|p| p.starts_with("/usr/include/") || p.starts_with("/usr/lib/gcc/"))
        || ["std::", "__gthread", "__glibcxx", "__gnu_cxx::"]
            .iter()
            .any(|prefix| f.starts_with(prefix))
}

/// The last component of a source path (`/src/app/main.c` → `main.c`).
pub fn base_name(file: &str) -> String {
    std::path::Path::new(file)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.to_string())
}

/// A call site as people read it: `function (file:line)` (see [`CallSite`]).
pub fn site_name(f: &symbolize::Frame) -> String {
    CallSite::of(f).label
}

/// A call site's frames for a profile, innermost first: the inlined functions, then the
/// function the call is written in.
pub fn profile_frames(f: &symbolize::Frame) -> Vec<export::pprof::Frame> {
    let module = f.module_name();
    let mut frames = vec![export::pprof::Frame {
        function: f.function.clone().unwrap_or_else(|| f.to_string()),
        file: f.file.clone(),
        line: f.line,
        address: f.address,
        module: module.clone(),
    }];
    for c in &f.inlined {
        frames.push(export::pprof::Frame {
            function: c.function.clone().unwrap_or_else(|| "??".into()),
            file: c.file.clone(),
            line: c.line,
            address: f.address,
            module: module.clone(),
        });
    }
    frames
}

/// A memory-map snapshot of the run (`rel`, e.g. `maps/PID-N.maps`), parsed lossily; `None`
/// when the run has none. A file there that is not one a recorder writes (a FIFO, a device, a
/// link, beyond [`trace::files::MAPS`]'s size) is a damaged run: an error, never a silent
/// report without names.
pub(crate) fn read_maps(
    run: &std::path::Path,
    rel: &str,
) -> Result<Option<symbolize::Maps>, crate::Error> {
    match trace::files::read_in_run(run, std::path::Path::new(rel), &trace::files::MAPS) {
        Ok(bytes) => Ok(Some(symbolize::Maps::parse_lossy(bytes).0)),
        Err(e) if e.is_missing() => Ok(None),
        Err(e) => Err(crate::error::damaged(format!(
            "{e} (the run's memory maps are damaged: re-record the run, or remove the file)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str, line: u32) -> symbolize::Frame {
        symbolize::Frame {
            address: 0x1000,
            module: None,
            module_offset: None,
            function: Some(function.into()),
            symbol_offset: None,
            file: Some(file.into()),
            line: Some(line),
            column: None,
            inlined: Vec::new(),
            precision: symbolize::Precision::Line,
        }
    }

    #[test]
    fn a_site_is_named_by_its_function_and_line() {
        let s = CallSite::of(&frame("update_shared_counter", "/src/planted_hold.c", 117));
        assert_eq!(s.label, "update_shared_counter (planted_hold.c:117)");
        assert_eq!(s.function.as_deref(), Some("update_shared_counter"));
        assert_eq!(s.location.as_deref(), Some("planted_hold.c:117"));
    }

    #[test]
    fn library_wrappers_are_skipped_for_the_programs_own_frame() {
        assert!(is_wrapper(Some("std::mutex::lock"), None));
        assert!(is_wrapper(Some("f"), Some("/usr/include/c++/13/mutex")));
        assert!(!is_wrapper(Some("worker"), Some("/src/app.cpp")));
    }
}
