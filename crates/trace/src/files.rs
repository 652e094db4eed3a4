//! The one way contend reads a file it did not just write: a run directory's files (meta.json,
//! streams, memory maps, sharing results, scale.json) and the files a user names (a perf.data
//! to import, a report to compare, an ELF module to symbolize).
//!
//! Every read here is bounded and never blocks:
//! - only regular files: a FIFO, device, socket or directory is refused before it is opened
//!   (opening some devices does something), by what it is ("is a FIFO, not a regular file");
//!   the open itself is `O_NONBLOCK`, and the opened file is checked again (the same inode as
//!   the one checked), so a file swapped for a FIFO in between cannot block either;
//! - a size limit per [`Kind`], named in the error ("is 3.1 GiB, more than the 64 MiB a
//!   meta.json may be"), checked on the size before reading and on what is read (at most the
//!   limit + 1 bytes: a size that lies cannot make it read more);
//! - inside a run directory ([`open_in_run`], [`read_in_run`]), no symbolic link is followed
//!   and no `..` is taken: each component is opened with `O_NOFOLLOW` from the one before,
//!   starting at the run directory, so a link planted there (to `/dev/zero`, to `/etc`) is
//!   refused by its name, and a run directory that was changed while it is read cannot lead
//!   out of it. Recorders never write links into a run directory, and copying one keeps none.
//!
//! A path the user names (and an ELF module a memory map names) is opened following links: the
//! user chose it (and system libraries are reached through links such as the build-id ones);
//! what it leads to must still be a regular file within the limit.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// What a file is, for the size limit and the errors that name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// The kind with its article, as an error says it: "a meta.json", "an ELF file".
    pub what: &'static str,
    /// The largest such file contend reads, bytes.
    pub limit: u64,
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// meta.json: about 300 bytes per stream, so 64 MiB holds hundreds of thousands of threads.
pub const META: Kind = Kind {
    what: "a meta.json",
    limit: 64 * MIB,
};
/// A saved `/proc/PID/maps` (`maps/*.maps`): a large process's is a few MiB.
pub const MAPS: Kind = Kind {
    what: "a memory map (maps/*.maps)",
    limit: 64 * MIB,
};
/// An event stream (`streams/*.cst`): mapped, not read into memory; 16 bytes an event, so the
/// limit is billions of events (hours of a busy lock).
pub const STREAM: Kind = Kind {
    what: "an event stream (.cst)",
    limit: 256 * GIB,
};
/// `sharing/PID.json`: at most 65536 hot lines (the runtime's table), each a few KiB.
pub const SHARING_RESULTS: Kind = Kind {
    what: "a sharing results file (sharing/PID.json)",
    limit: GIB,
};
/// `sharing/PID.hist`: the runtime keeps at most 2^28 entries of 4 bytes (1 GiB).
pub const SHARING_HISTORY: Kind = Kind {
    what: "a sharing history (sharing/PID.hist)",
    limit: GIB + MIB,
};
/// A `contend scale` directory's scale.json: a few KiB a run.
pub const SCALE: Kind = Kind {
    what: "a scale.json",
    limit: 64 * MIB,
};
/// A perf.data file to import: read into memory whole.
pub const PERF_DATA: Kind = Kind {
    what: "a perf.data file",
    limit: 4 * GIB,
};
/// An ELF module (a program, a library, its debug file): mapped, read only where it cannot be.
pub const ELF: Kind = Kind {
    what: "an ELF file",
    limit: 16 * GIB,
};
/// A program file read whole to see how it was built (`contend c2c record`'s check).
pub const PROGRAM: Kind = Kind {
    what: "a program file",
    limit: 2 * GIB,
};
/// A saved `contend report --json` (or a scale.json) to compare with `contend diff`.
pub const REPORT_JSON: Kind = Kind {
    what: "a report (JSON)",
    limit: GIB,
};
/// A compiler's `@file` of arguments (`contend cc`): a long link line is a few MiB.
pub const RESPONSE_FILE: Kind = Kind {
    what: "a response file",
    limit: 64 * MIB,
};
/// A small text file a user names for an option (a CPU layout).
/// The user stacks of a process's off-CPU blocks (`stacks/offcpu-PID.ustk`): the recorder's
/// budget is 256 MiB per run by default; a run recorded with a larger one reads up to this.
pub const USER_STACKS: Kind = Kind {
    what: "a user stack file",
    limit: 1024 * MIB,
};

pub const OPTION_FILE: Kind = Kind {
    what: "an option file",
    limit: MIB,
};

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadFileError {
    #[error("{}: no such file", path.display())]
    Missing { path: PathBuf },
    #[error("{} is {is}, not a regular file", path.display())]
    NotRegular { path: PathBuf, is: &'static str },
    #[error("{} is {}, more than the {} {what} may be", path.display(), human_size(*size), human_size(*limit))]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
        what: &'static str,
    },
    #[error("{} is a symbolic link{}: contend does not follow links inside a run directory", link.display(), link_target(target.as_deref(), *escapes))]
    Link {
        link: PathBuf,
        target: Option<PathBuf>,
        /// The target is out of the run directory.
        escapes: bool,
    },
    #[error("{}: `{}` is not a path inside the run directory", run.display(), rel.display())]
    Outside { run: PathBuf, rel: PathBuf },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl ReadFileError {
    /// The file is not there (often not an error: an optional file).
    pub fn is_missing(&self) -> bool {
        matches!(self, ReadFileError::Missing { .. })
    }

    /// The message without the path, for a sentence that names the file already ("cannot
    /// read /usr/lib/x.so: it is a FIFO, not a regular file").
    pub fn reason(&self) -> String {
        match self {
            ReadFileError::Missing { .. } => "no such file".into(),
            ReadFileError::NotRegular { is, .. } => format!("it is {is}, not a regular file"),
            ReadFileError::TooLarge {
                size, limit, what, ..
            } => format!(
                "it is {}, more than the {} {what} may be",
                human_size(*size),
                human_size(*limit)
            ),
            ReadFileError::Link { .. } | ReadFileError::Outside { .. } => self.to_string(),
            ReadFileError::Io { source, .. } => source.to_string(),
        }
    }
}

fn link_target(target: Option<&Path>, escapes: bool) -> String {
    match target {
        Some(t) if escapes => format!(" to {}, out of the run directory", t.display()),
        Some(t) => format!(" to {}", t.display()),
        None => String::new(),
    }
}

/// `100 bytes`, `12 KiB`, `3.1 GiB`, `64 MiB` (one decimal unless whole).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let rounded = (value * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0} {}", UNITS[unit])
    } else {
        format!("{rounded:.1} {}", UNITS[unit])
    }
}

/// What a file is, in words: "a FIFO", "a directory", "a regular file".
pub fn file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "of an unknown type"
    }
}

/// A regular file opened for reading, and its size when opened.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    pub size: u64,
    /// The path errors name.
    pub path: PathBuf,
}

impl Opened {
    /// Its bytes, at most `kind`'s limit (an error beyond).
    pub fn read(self, kind: &Kind) -> Result<Vec<u8>, ReadFileError> {
        let Opened { file, size, path } = self;
        let mut bytes = Vec::with_capacity(usize::try_from(size.min(kind.limit)).unwrap_or(0));
        file.take(kind.limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|source| ReadFileError::Io {
                path: path.clone(),
                source,
            })?;
        if bytes.len() as u64 > kind.limit {
            // Grown since it was opened, or a size that was not true.
            return Err(ReadFileError::TooLarge {
                path,
                size: size.max(bytes.len() as u64),
                limit: kind.limit,
                what: kind.what,
            });
        }
        Ok(bytes)
    }
}

fn io_error(path: &Path, source: io::Error) -> ReadFileError {
    if source.kind() == io::ErrorKind::NotFound {
        ReadFileError::Missing {
            path: path.to_path_buf(),
        }
    } else {
        ReadFileError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Checks what `before` (looked at without opening) and `opened` (its open file) are: the same
/// regular file within the limit.
fn check_opened(
    path: &Path,
    before: &std::fs::Metadata,
    file: File,
    kind: &Kind,
) -> Result<Opened, ReadFileError> {
    let now = file.metadata().map_err(|e| io_error(path, e))?;
    if !now.file_type().is_file() {
        return Err(ReadFileError::NotRegular {
            path: path.to_path_buf(),
            is: file_kind(now.file_type()),
        });
    }
    if (now.dev(), now.ino()) != (before.dev(), before.ino()) {
        return Err(ReadFileError::Io {
            path: path.to_path_buf(),
            source: io::Error::other("the file was replaced while it was being opened"),
        });
    }
    check_size(path, now.len(), kind)?;
    Ok(Opened {
        file,
        size: now.len(),
        path: path.to_path_buf(),
    })
}

fn check_size(path: &Path, size: u64, kind: &Kind) -> Result<(), ReadFileError> {
    if size > kind.limit {
        return Err(ReadFileError::TooLarge {
            path: path.to_path_buf(),
            size,
            limit: kind.limit,
            what: kind.what,
        });
    }
    Ok(())
}

fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<(), ReadFileError> {
    if meta.file_type().is_file() {
        Ok(())
    } else {
        Err(ReadFileError::NotRegular {
            path: path.to_path_buf(),
            is: file_kind(meta.file_type()),
        })
    }
}

/// Opens a file the user named (links followed): a regular file within `kind`'s limit.
pub fn open_regular(path: &Path, kind: &Kind) -> Result<Opened, ReadFileError> {
    let before = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    check_regular(path, &before)?;
    check_size(path, before.len(), kind)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| io_error(path, e))?;
    check_opened(path, &before, file, kind)
}

/// Reads a file the user named (links followed): a regular file within `kind`'s limit.
pub fn read_regular(path: &Path, kind: &Kind) -> Result<Vec<u8>, ReadFileError> {
    open_regular(path, kind)?.read(kind)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path, kind: &Kind) -> Result<String, ReadFileError> {
    let bytes = read_regular(path, kind)?;
    text(path, bytes)
}

fn text(path: &Path, bytes: Vec<u8>) -> Result<String, ReadFileError> {
    String::from_utf8(bytes).map_err(|_| ReadFileError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

/// Opens `rel` inside the run directory `run`: no link followed, no `..`, a regular file within
/// `kind`'s limit.
pub fn open_in_run(run: &Path, rel: &Path, kind: &Kind) -> Result<Opened, ReadFileError> {
    let shown = run.join(rel);
    let outside = || ReadFileError::Outside {
        run: run.to_path_buf(),
        rel: rel.to_path_buf(),
    };
    let mut names: Vec<&OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            _ => return Err(outside()),
        }
    }
    let Some((last, parents)) = names.split_last() else {
        return Err(outside());
    };
    // The run directory itself is the user's to name: reached through links if they are.
    let mut dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK)
        .open(run)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTDIR) => ReadFileError::NotRegular {
                path: run.to_path_buf(),
                is: "not a directory",
            },
            _ => io_error(run, e),
        })?;
    let mut walked = run.to_path_buf();
    for name in parents {
        walked.push(name);
        let st = lstat_at(&dir, name).map_err(|e| io_error(&walked, e))?;
        if st.file_type().is_symlink() {
            return Err(link_error(run, &walked, &dir, name));
        }
        if !st.file_type().is_dir() {
            return Err(ReadFileError::NotRegular {
                path: walked,
                is: file_kind(st.file_type()),
            });
        }
        dir = open_at(&dir, name, libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .map_err(|e| io_error(&walked, e))?;
    }
    let st = lstat_at(&dir, last).map_err(|e| io_error(&shown, e))?;
    if st.file_type().is_symlink() {
        return Err(link_error(run, &shown, &dir, last));
    }
    check_regular(&shown, &st.meta)?;
    check_size(&shown, st.meta.len(), kind)?;
    let file = open_at(
        &dir,
        last,
        libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
    )
    .map_err(|e| io_error(&shown, e))?;
    check_opened(&shown, &st.meta, file, kind)
}

/// Reads `rel` inside the run directory `run` (see [`open_in_run`]).
pub fn read_in_run(run: &Path, rel: &Path, kind: &Kind) -> Result<Vec<u8>, ReadFileError> {
    open_in_run(run, rel, kind)?.read(kind)
}

/// [`read_in_run`] as UTF-8 text.
pub fn read_in_run_to_string(run: &Path, rel: &Path, kind: &Kind) -> Result<String, ReadFileError> {
    let bytes = read_in_run(run, rel, kind)?;
    text(&run.join(rel), bytes)
}

/// Whether `rel` inside `run` is a regular file (no link followed on the way).
pub fn is_file_in_run(run: &Path, rel: &Path) -> bool {
    let unbounded = Kind {
        what: "a file",
        limit: u64::MAX,
    };
    open_in_run(run, rel, &unbounded).is_ok()
}

/// The error for the link `name` in `dir` (shown as `link`), saying where it leads and whether
/// that is out of the run directory (lexically: an absolute target, or more `..` than depth).
fn link_error(run: &Path, link: &Path, dir: &File, name: &OsStr) -> ReadFileError {
    let target = read_link_at(dir, name);
    let escapes = target.as_ref().is_none_or(|t| {
        let depth = link
            .strip_prefix(run)
            .map(|r| r.components().count().saturating_sub(1))
            .unwrap_or(0) as i64;
        let mut level = depth;
        for c in t.components() {
            match c {
                Component::Normal(_) => level += 1,
                Component::ParentDir => level -= 1,
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return true,
            }
            if level < 0 {
                return true;
            }
        }
        false
    });
    ReadFileError::Link {
        link: link.to_path_buf(),
        target,
        escapes,
    }
}

/// A file's metadata without following a link (fstatat with AT_SYMLINK_NOFOLLOW), as std's
/// `Metadata` so the checks are the same as for a user's path.
struct LStat {
    meta: std::fs::Metadata,
}

impl LStat {
    fn file_type(&self) -> std::fs::FileType {
        self.meta.file_type()
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// `name` in `dir`, opened read-only with `flags` (and O_CLOEXEC).
fn open_at(dir: &File, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    let c = c_name(name)?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; `dir` is an open
    // descriptor; the returned descriptor is new and owned only by the File made from it.
    #[allow(unsafe_code)]
    unsafe {
        let fd: RawFd = libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | flags,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(fd))
    }
}

/// The metadata of `name` in `dir`, not following a link. Taken through an `O_PATH` descriptor
/// (which opens nothing: no device is touched, no FIFO waited on).
fn lstat_at(dir: &File, name: &OsStr) -> io::Result<LStat> {
    let path_only = open_at(dir, name, libc::O_PATH | libc::O_NOFOLLOW)?;
    Ok(LStat {
        meta: path_only.metadata()?,
    })
}

/// Where the link `name` in `dir` points.
fn read_link_at(dir: &File, name: &OsStr) -> Option<PathBuf> {
    let c = c_name(name).ok()?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `buf` is writable for its length; `c` is NUL-terminated; `dir` is open.
    #[allow(unsafe_code)]
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    buf.truncate(n);
    Some(PathBuf::from(OsStr::from_bytes(&buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("maps")).unwrap();
        d
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human_size(100), "100 bytes");
        assert_eq!(human_size(64 << 20), "64 MiB");
        assert_eq!(human_size(3_328_599_654), "3.1 GiB");
        assert_eq!(human_size(1536), "1.5 KiB");
    }

    #[test]
    fn a_regular_file_is_read_whole() {
        let d = run_dir();
        std::fs::write(d.path().join("maps/1.maps"), "abc").unwrap();
        let bytes = read_in_run(d.path(), Path::new("maps/1.maps"), &MAPS).unwrap();
        assert_eq!(bytes, b"abc");
        let bytes = read_regular(&d.path().join("maps/1.maps"), &MAPS).unwrap();
        assert_eq!(bytes, b"abc");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = run_dir();
        let fifo = d.path().join("maps/1.maps");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path string.
        #[allow(unsafe_code)]
        let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(made, 0);
        let e = read_in_run(d.path(), Path::new("maps/1.maps"), &MAPS).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{} is a FIFO, not a regular file", fifo.display())
        );
        let e = read_regular(&fifo, &MAPS).unwrap_err();
        assert!(
            e.to_string().ends_with("is a FIFO, not a regular file"),
            "{e}"
        );
    }

    #[test]
    fn a_directory_and_a_device_say_what_they_are() {
        let d = run_dir();
        let e = read_in_run(d.path(), Path::new("maps"), &MAPS).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("maps is a directory, not a regular file"),
            "{e}"
        );
        let e = read_regular(Path::new("/dev/zero"), &META).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero is a character device, not a regular file"
        );
    }

    #[test]
    fn a_file_over_its_limit_is_refused_by_its_size() {
        let d = run_dir();
        let big = d.path().join("meta.json");
        // Sparse: no disk used.
        File::create(&big).unwrap().set_len(3_328_599_654).unwrap();
        let e = read_in_run(d.path(), Path::new("meta.json"), &META).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is 3.1 GiB, more than the 64 MiB a meta.json may be",
                big.display()
            )
        );
        let small = Kind {
            what: "a test file",
            limit: 2,
        };
        std::fs::write(&big, "abc").unwrap();
        let e = read_regular(&big, &small).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("is 3 bytes, more than the 2 bytes a test file may be"),
            "{e}"
        );
    }

    #[test]
    fn links_in_a_run_directory_are_refused_by_name() {
        let d = run_dir();
        std::os::unix::fs::symlink("/dev/zero", d.path().join("maps/1.maps")).unwrap();
        let e = read_in_run(d.path(), Path::new("maps/1.maps"), &MAPS).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}/maps/1.maps is a symbolic link to /dev/zero, out of the run directory: contend does not follow links inside a run directory",
                d.path().display()
            )
        );
        // A directory of the run that leads out.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("2.maps"), "x").unwrap();
        std::fs::remove_dir_all(d.path().join("maps")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("maps")).unwrap();
        let e = read_in_run(d.path(), Path::new("maps/2.maps"), &MAPS).unwrap_err();
        assert!(
            matches!(&e, ReadFileError::Link { link, escapes: true, .. } if link.ends_with("maps")),
            "{e}"
        );
        // A link that stays inside is still a link.
        std::fs::write(d.path().join("real"), "x").unwrap();
        std::os::unix::fs::symlink("real", d.path().join("alias")).unwrap();
        let e = read_in_run(d.path(), Path::new("alias"), &MAPS).unwrap_err();
        assert!(
            matches!(&e, ReadFileError::Link { escapes: false, .. }),
            "{e}"
        );
        // The user's own path is followed.
        assert_eq!(read_regular(&d.path().join("alias"), &MAPS).unwrap(), b"x");
    }

    #[test]
    fn paths_that_leave_the_run_are_refused() {
        let d = run_dir();
        for rel in ["../x", "/etc/passwd", "maps/../../x", ""] {
            let e = read_in_run(d.path(), Path::new(rel), &MAPS).unwrap_err();
            assert!(matches!(e, ReadFileError::Outside { .. }), "{rel}: {e}");
        }
        let e = read_in_run(d.path(), Path::new("maps/none.maps"), &MAPS).unwrap_err();
        assert!(e.is_missing(), "{e}");
    }
}
