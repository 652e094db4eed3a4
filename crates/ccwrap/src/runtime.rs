//! Where the sharing runtime that programs are linked with is.

use crate::Error;
use std::path::{Path, PathBuf};

/// The file name of the sharing runtime.
pub const RUNTIME_FILE: &str = "libcontend_sharing.so";

/// Where an installed contend finds the runtime it carries (the binary embeds it and writes
/// it to the user's cache on first use): set once by the binary, asked only when no runtime is
/// beside the executable.
type Embedded = fn() -> Result<PathBuf, String>;
static EMBEDDED: std::sync::OnceLock<Embedded> = std::sync::OnceLock::new();

/// Gives the runtime an installed contend carries (see `EMBEDDED`).
pub fn set_embedded(provider: Embedded) {
    let _ = EMBEDDED.set(provider);
}

/// Where the sharing runtime is: `$CONTEND_SHARING_LIB`, else the newest of
/// `libcontend_sharing.so` beside the running executable (contend), in `deps/` beside it (where
/// cargo builds it) and in `../lib/contend/` (an installation).
pub fn find_sharing_runtime() -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os("CONTEND_SHARING_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(std::fs::canonicalize(&p).unwrap_or(p));
        }
        return Err(Error::RuntimeVariableNotAFile(p));
    }
    let exe = std::env::current_exe().map_err(Error::CurrentExe)?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if let Some(found) = newest_beside(&dir) {
        return Ok(found);
    }
    match EMBEDDED.get() {
        Some(provider) => provider().map_err(Error::EmbeddedRuntime),
        None => Err(Error::RuntimeNotInstalled { dir }),
    }
}

/// The newest runtime of those beside an executable in `dir`. Cargo leaves a copy beside the
/// binary (workspace builds) and in deps/: the newest, so a stale copy never shadows a fresh
/// build.
fn newest_beside(dir: &Path) -> Option<PathBuf> {
    let candidates = [
        dir.join(RUNTIME_FILE),
        dir.join("deps").join(RUNTIME_FILE),
        dir.join("../lib/contend").join(RUNTIME_FILE),
    ];
    let modified = |p: &&PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let found = candidates
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(modified)
        .cloned()?;
    Some(std::fs::canonicalize(&found).unwrap_or(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn the_newest_copy_wins_and_none_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(bin.join("deps")).unwrap();
        assert_eq!(newest_beside(&bin), None);
        let beside = bin.join(RUNTIME_FILE);
        let deps = bin.join("deps").join(RUNTIME_FILE);
        let set_age = |p: &Path, secs_ago: u64| {
            let f = std::fs::File::create(p).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
                .unwrap();
        };
        set_age(&beside, 100);
        set_age(&deps, 10);
        assert_eq!(newest_beside(&bin), Some(deps.canonicalize().unwrap()));
        set_age(&beside, 1);
        assert_eq!(newest_beside(&bin), Some(beside.canonicalize().unwrap()));
    }
}
