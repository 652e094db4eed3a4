//! JIT frames named from the perf maps the recorder copied into the run directory
//! (`maps/perf-PID.map`, see `recorder::perfmap`): a frame in no file (generated code) whose
//! address a map line covers takes that line's name, and the first such frame of a stack
//! whose program frame was not found becomes it (for a JVM, the Java method or the stub that
//! entered the runtime). The walk stops at such a frame (JIT code has no call frame
//! information), so it is the innermost Java frame only.

use analysis::waits::WaitStack;
use std::collections::HashMap;
use std::path::Path;

/// A perf map read from a run: at most this big (the recorder copies at most as much).
const PERF_MAP: trace::files::Kind = trace::files::Kind {
    what: "a perf map (maps/perf-PID.map)",
    limit: 64 << 20,
};

/// One process's generated code: (start, end, name), sorted by start.
type CodeMap = Vec<(u64, u64, String)>;

/// The perf maps of a run's processes, read on first use.
#[derive(Default)]
pub(crate) struct PerfMaps {
    maps: HashMap<u32, Option<CodeMap>>,
    /// The maps that could not be read, with why.
    pub unreadable: Vec<String>,
}

/// The lines of a perf map: `START SIZE NAME`, hexadecimal, with or without `0x`; lines that
/// do not parse are skipped.
fn parse(text: &str) -> CodeMap {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let mut out: CodeMap = text
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let start = hex(parts.next()?)?;
            let size = hex(parts.next()?)?;
            let name = parts.next()?.trim();
            (size > 0 && !name.is_empty())
                .then(|| (start, start.saturating_add(size), name.to_string()))
        })
        .collect();
    out.sort_by_key(|e| e.0);
    out
}

/// The name of the code at `address`: the latest-starting entry that covers it (a JVM
/// reuses code cache space; later entries of the same start are kept in file order, the last
/// one written wins).
fn lookup(map: &CodeMap, address: u64) -> Option<&str> {
    let i = map.partition_point(|e| e.0 <= address);
    map[..i]
        .iter()
        .rev()
        .take(64)
        .find(|e| address < e.1)
        .map(|e| e.2.as_str())
}

impl PerfMaps {
    fn of(&mut self, run_dir: &Path, pid: u32) -> Option<&CodeMap> {
        if !self.maps.contains_key(&pid) {
            let rel = format!("{}/perf-{pid}.map", trace::layout::MAPS_DIR);
            let map = if trace::files::is_file_in_run(run_dir, Path::new(&rel)) {
                match trace::files::read_in_run(run_dir, Path::new(&rel), &PERF_MAP) {
                    Ok(b) => Some(parse(&String::from_utf8_lossy(&b))),
                    Err(e) => {
                        self.unreadable.push(e.to_string());
                        None
                    }
                }
            } else {
                None
            };
            self.maps.insert(pid, map);
        }
        self.maps.get(&pid).and_then(Option::as_ref)
    }

    /// Names the frames of `stack` (process `pid`) that lie in no file, from its perf map.
    pub(crate) fn name(&mut self, run_dir: &Path, pid: u32, stack: &mut WaitStack) {
        if !stack.frames.iter().any(analysis::waits::is_jit_frame) {
            return;
        }
        let Some(map) = self.of(run_dir, pid) else {
            return;
        };
        for f in stack.frames.iter_mut() {
            if !analysis::waits::is_jit_frame(f) {
                continue;
            }
            // A return address points after its call: the call is at address − 1.
            if let Some(name) = lookup(map, f.address.saturating_sub(1)) {
                f.function = name.to_string();
                if stack.site.is_none() {
                    stack.site = Some(name.to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines_name_addresses_and_junk_is_skipped() {
        let map = parse(
            "0x00007f2b58ed2a20 0x0000000000000418 void JvmMonitor.lambda$main$0(long[], long)\n\
             7f2b58940b80 17de0 Interpreter\n\
             not a line\n\
             7f2b5894 0 empty\n",
        );
        assert_eq!(map.len(), 2);
        assert_eq!(lookup(&map, 0x7f2b58940b80), Some("Interpreter"));
        assert_eq!(
            lookup(&map, 0x7f2b58ed2a20 + 0x417),
            Some("void JvmMonitor.lambda$main$0(long[], long)")
        );
        assert_eq!(lookup(&map, 0x7f2b58ed2a20 + 0x418), None);
        assert_eq!(lookup(&map, 0x1000), None);
    }
}
