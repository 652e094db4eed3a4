//! Finding the lock probe library.

use crate::RecordError;
use std::path::PathBuf;

/// The probe library: `$CONTEND_PROBE`, else beside this executable (where cargo builds it).
pub fn find_probe() -> Result<PathBuf, RecordError> {
    if let Some(p) = std::env::var_os("CONTEND_PROBE") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(RecordError::bad(format!(
            "CONTEND_PROBE names {}, which is not a file",
            p.display()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|e| RecordError::Failed(format!("finding the contend executable: {e}")))?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let candidates = [
        dir.join("libcontend_probe.so"),
        dir.join("deps/libcontend_probe.so"),
        dir.join("../lib/contend/libcontend_probe.so"),
    ];
    // Cargo leaves a copy both beside the binary (workspace builds) and in deps/ (builds of
    // contend alone): take the newest, so a stale copy never shadows a fresh build.
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    candidates
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| modified(p))
        .cloned()
        .ok_or_else(|| {
            RecordError::Failed(format!(
                "the lock probe libcontend_probe.so is not installed beside contend (looked in {}): build it with `cargo build --release -p probe`, or set CONTEND_PROBE to its path",
                dir.display()
            ))
        })
}
