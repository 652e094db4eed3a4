//! JIT code names: a JVM run with `-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit`
//! (or a perf map agent) writes `/tmp/perf-PID.map`, one `START SIZE NAME` line per piece of
//! generated code. After the program ends, each recorded process's map is copied into the run
//! directory (`maps/perf-PID.map`), so that the report names JIT frames long after `/tmp` has
//! been cleaned or the pid reused.
//!
//! `/tmp` is shared with every user: the map is trusted only when it is a regular file (opened
//! with `O_NOFOLLOW`: a planted link is refused, not followed), owned by the uid the program
//! ran as (this process's: contend starts the program itself), writable by no one else, and at
//! most [`MAX_PERF_MAP_BYTES`]; what is read stops at that size whatever the file claims.

use crate::notice::{note, About, Notice};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The largest perf map copied: a big JVM's (tens of thousands of methods) is a few MiB.
pub const MAX_PERF_MAP_BYTES: u64 = 64 << 20;

/// Why a perf map was not trusted.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    Absent,
    Unsafe(String),
}

/// The bytes of `path` if it is a perf map that can be trusted (see the module's doc), owned
/// by `uid`.
fn read_trusted(path: &Path, uid: u32) -> Result<Vec<u8>, Refused> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Refused::Absent,
            _ if e.raw_os_error() == Some(libc::ELOOP) => {
                Refused::Unsafe("is a symbolic link".into())
            }
            _ => Refused::Unsafe(format!("cannot be opened: {e}")),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Refused::Unsafe(format!("cannot be examined: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(Refused::Unsafe(format!(
            "is {}, not a regular file",
            trace::files::file_kind(meta.file_type())
        )));
    }
    if meta.uid() != uid {
        return Err(Refused::Unsafe(format!(
            "is owned by uid {}, not by the program's uid {uid}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Refused::Unsafe(format!(
            "is writable by others (mode {:o})",
            meta.mode() & 0o7777
        )));
    }
    if meta.len() > MAX_PERF_MAP_BYTES {
        return Err(Refused::Unsafe(format!(
            "is {}, more than the {} a perf map may be",
            trace::files::human_size(meta.len()),
            trace::files::human_size(MAX_PERF_MAP_BYTES)
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PERF_MAP_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| Refused::Unsafe(format!("cannot be read: {e}")))?;
    Ok(bytes)
}

/// Copies `/tmp/perf-PID.map` of each of `pids` into `run_dir/maps/perf-PID.map` (created
/// new, never through a link), where it can be trusted; says which were refused and why.
/// Returns how many were copied.
pub fn save(
    run_dir: &Path,
    pids: impl IntoIterator<Item = u32>,
    notices: &mut dyn FnMut(Notice),
) -> usize {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    save_from(Path::new("/tmp"), run_dir, pids, uid, notices)
}

fn save_from(
    tmp: &Path,
    run_dir: &Path,
    pids: impl IntoIterator<Item = u32>,
    uid: u32,
    notices: &mut dyn FnMut(Notice),
) -> usize {
    let mut saved = 0;
    for pid in pids {
        let name = format!("perf-{pid}.map");
        let source = tmp.join(&name);
        let bytes = match read_trusted(&source, uid) {
            Ok(b) => b,
            Err(Refused::Absent) => continue,
            Err(Refused::Unsafe(why)) => {
                note(
                    notices,
                    About::Outcome,
                    format!(
                        "JIT code names: {} {why}: not used (a perf map in a shared directory is trusted only as a regular file of the program's own, writable by it alone)",
                        source.display()
                    ),
                );
                continue;
            }
        };
        let dir = run_dir.join(trace::layout::MAPS_DIR);
        let written = std::fs::create_dir_all(&dir).and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(dir.join(&name))?
                .write_all(&bytes)
        });
        match written {
            Ok(()) => saved += 1,
            Err(e) => note(
                notices,
                About::Outcome,
                format!("JIT code names: {name} could not be saved in the run directory: {e}"),
            ),
        }
    }
    saved
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn uid() -> u32 {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn a_trusted_map_is_copied_and_links_and_shared_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let map = tmp.path().join("perf-10.map");
        std::fs::write(&map, "7f0000001000 20 void App.run()\n").unwrap();
        std::fs::set_permissions(&map, std::fs::Permissions::from_mode(0o644)).unwrap();
        // A link to it, as another user could plant one.
        std::os::unix::fs::symlink(&map, tmp.path().join("perf-11.map")).unwrap();
        // Writable by others.
        let shared = tmp.path().join("perf-12.map");
        std::fs::write(&shared, "x").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o666)).unwrap();
        // A FIFO: never opened for reading in a way that blocks.
        let fifo = tmp.path().join("perf-13.map");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mut said = Vec::new();
        let n = save_from(
            tmp.path(),
            run.path(),
            [10, 11, 12, 13, 14],
            uid(),
            &mut |n| said.push(n.text),
        );
        assert_eq!(n, 1, "{said:?}");
        let copied = run.path().join("maps/perf-10.map");
        assert_eq!(
            std::fs::read_to_string(&copied).unwrap(),
            "7f0000001000 20 void App.run()\n"
        );
        assert_eq!(
            std::fs::metadata(&copied).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[0].contains("symbolic link"), "{said:?}");
        assert!(said[1].contains("writable by others"), "{said:?}");
        assert!(said[2].contains("not a regular file"), "{said:?}");
        // Another owner.
        let mut said = Vec::new();
        let n = save_from(tmp.path(), run.path(), [10], uid() + 1, &mut |n| {
            said.push(n.text)
        });
        assert_eq!(n, 0);
        assert!(said[0].contains("owned by uid"), "{said:?}");
    }
}
