//! Contained, bounded reads of the files under a root directory (`/` or a sysfs snapshot).
//!
//! A snapshot given with `--sysfs` may come from anyone, and contend runs as root. So every
//! file is opened beneath the root (`openat2` with `RESOLVE_BENEATH`: a symlink is followed
//! only while it stays inside the tree; snapshots use them as sysfs does), is checked to be a
//! regular file before it is opened for reading (a FIFO would block, `/dev/zero` never ends, a
//! device's `open` can have side effects), and is read up to a limit per kind of file (live
//! sysfs attributes report `st_size` 4096 whatever they hold, so the limit is on bytes read).

use crate::cpuset::trim_sysfs;
use crate::TopologyError;
use std::ffi::{CStr, CString, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The most bytes read from one kind of file; `what` names the kind in the error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    pub bytes: u64,
    pub what: &'static str,
}

/// Sysfs attributes hold a few KiB at most (a mask of 8192 CPUs is 2.3 KiB).
pub(crate) const SYSFS_FILE: Limit = Limit {
    bytes: 1 << 20,
    what: "a sysfs file",
};

/// About 1.7 KiB per x86 CPU with all its flags: 32 MiB covers Linux's largest NR_CPUS (8192)
/// twice over.
pub(crate) const CPUINFO: Limit = Limit {
    bytes: 32 << 20,
    what: "proc/cpuinfo",
};

/// A few KiB in practice.
pub(crate) const MEMINFO: Limit = Limit {
    bytes: 1 << 20,
    what: "proc/meminfo",
};

/// What reading one file gave.
#[derive(Debug)]
pub(crate) enum Found {
    /// The contents, with the whitespace and NUL bytes sysfs leaves around them removed.
    Text(String),
    /// No such file (or a path component is not a directory): sysfs files vanish with hotplug
    /// and old kernels lack many.
    Absent,
    /// The file is there but could not be read (permissions, `EIO` from a sysfs attribute).
    Unreadable(io::Error),
}

/// Set once `openat2` is known to be missing (Linux < 5.6, or filtered by seccomp): later opens
/// go straight to the fallback.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// The root every path is read beneath.
pub(crate) struct Tree {
    root: PathBuf,
    /// The root's real path, for the fallback's containment check.
    canonical: PathBuf,
    dir: OwnedFd,
}

impl Tree {
    /// Opens `root`; the root itself may be a symlink (the user named it).
    pub fn open(root: &Path) -> io::Result<Tree> {
        let c = cstring(root.as_os_str().as_bytes())?;
        // SAFETY: a valid C string; the returned descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by open and is owned by nobody else.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Tree {
            root: root.to_path_buf(),
            canonical: std::fs::canonicalize(root)?,
            dir,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A sysfs attribute's text; `None` when absent or unreadable (both mean "not known").
    pub fn text(&self, path: &Path) -> Result<Option<String>, TopologyError> {
        Ok(match self.read(path, SYSFS_FILE)? {
            Found::Text(t) => Some(t),
            Found::Absent | Found::Unreadable(_) => None,
        })
    }

    /// Reads `path` (a path under the root, as `root.join(...)` gives) up to `limit` bytes.
    /// Anything but a regular file, a file over the limit and a symlink leading out of the tree
    /// are errors naming the file: a tree holding them is not a sysfs snapshot.
    pub fn read(&self, path: &Path, limit: Limit) -> Result<Found, TopologyError> {
        let refuse = |why: String| TopologyError::Unreadable {
            path: path.to_path_buf(),
            why,
        };
        let rel = self.relative(path)?;
        // Look before opening: an O_PATH descriptor opens nothing, so a FIFO or device is
        // described without being touched.
        let look = match self.open_beneath(&rel, libc::O_PATH) {
            Ok(fd) => fd,
            Err(e) => return self.open_failure(path, e),
        };
        let seen = fstat(&look).map_err(|e| refuse(format!("cannot stat: {e}")))?;
        if seen.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(refuse(format!(
                "is {}, not a regular file; a sysfs snapshot holds only regular files, \
                 directories and symlinks inside it",
                file_kind(seen.st_mode)
            )));
        }
        // O_NONBLOCK: should the file be swapped for a FIFO in between, the open does not wait
        // for a writer; the identity check below then refuses it.
        let fd = match self.open_beneath(&rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY) {
            Ok(fd) => fd,
            Err(e) => return self.open_failure(path, e),
        };
        let opened = fstat(&fd).map_err(|e| refuse(format!("cannot stat: {e}")))?;
        if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino) {
            return Err(refuse(
                "was replaced by another file while being opened; read a tree nobody is changing"
                    .into(),
            ));
        }
        let mut bytes = Vec::new();
        if let Err(e) = File::from(fd).take(limit.bytes + 1).read_to_end(&mut bytes) {
            return Ok(Found::Unreadable(e));
        }
        if bytes.len() as u64 > limit.bytes {
            return Err(refuse(format!(
                "holds more than {}, the limit for {}; this is not a sysfs snapshot's file",
                human_bytes(limit.bytes),
                limit.what
            )));
        }
        Ok(Found::Text(
            trim_sysfs(&String::from_utf8_lossy(&bytes)).to_string(),
        ))
    }

    /// Whether `path` is a directory inside the tree (a symlink to one inside counts).
    pub fn is_dir(&self, path: &Path) -> Result<bool, TopologyError> {
        let rel = self.relative(path)?;
        match self.open_beneath(&rel, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(_) => Ok(true),
            Err(e) => match self.open_failure(path, e) {
                Ok(_) => Ok(false),
                Err(refused) => Err(refused),
            },
        }
    }

    /// The names in directory `path`; empty when it is absent or unreadable.
    pub fn list(&self, path: &Path) -> Result<Vec<OsString>, TopologyError> {
        let rel = self.relative(path)?;
        let fd = match self.open_beneath(&rel, libc::O_RDONLY | libc::O_DIRECTORY) {
            Ok(fd) => fd,
            Err(e) => {
                self.open_failure(path, e)?;
                return Ok(Vec::new());
            }
        };
        let raw = fd.into_raw_fd();
        // SAFETY: raw is an open directory descriptor; fdopendir takes it over (closedir closes
        // it), or fails and leaves it to us.
        let dirp = unsafe { libc::fdopendir(raw) };
        if dirp.is_null() {
            // SAFETY: fdopendir failed, so raw is still ours.
            drop(unsafe { OwnedFd::from_raw_fd(raw) });
            return Ok(Vec::new());
        }
        let mut names = Vec::new();
        loop {
            // SAFETY: dirp is a valid DIR* until closedir; the name is copied before the next
            // readdir.
            let entry = unsafe { libc::readdir64(dirp) };
            if entry.is_null() {
                break;
            }
            // SAFETY: d_name is NUL-terminated within the entry.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
            let name = name.to_bytes();
            if name != b"." && name != b".." {
                names.push(OsString::from_vec(name.to_vec()));
            }
        }
        // SAFETY: dirp came from fdopendir and is closed once.
        unsafe { libc::closedir(dirp) };
        Ok(names)
    }

    fn relative(&self, path: &Path) -> Result<PathBuf, TopologyError> {
        let rel = path
            .strip_prefix(&self.root)
            .map_err(|_| TopologyError::Unreadable {
                path: path.to_path_buf(),
                why: format!("is not under {}", self.root.display()),
            })?;
        // openat2 takes "" as an error; the root itself is ".".
        Ok(if rel.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rel.to_path_buf()
        })
    }

    /// Absent and unreadable files are facts of the tree; an escape or a loop is a hostile or
    /// broken tree and an error.
    fn open_failure(&self, path: &Path, e: io::Error) -> Result<Found, TopologyError> {
        let refuse = |why: String| TopologyError::Unreadable {
            path: path.to_path_buf(),
            why,
        };
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => Ok(Found::Absent),
            Some(libc::EXDEV) => {
                let target = std::fs::read_link(path)
                    .map(|t| format!(" (a symlink to {})", t.display()))
                    .unwrap_or_default();
                Err(refuse(format!(
                    "leads out of the tree {}{target}; a snapshot's symlinks must stay inside it",
                    self.root.display()
                )))
            }
            Some(libc::ELOOP) => Err(refuse("is a loop of symlinks".into())),
            _ => Ok(Found::Unreadable(e)),
        }
    }

    /// Opens `rel` beneath the root, following symlinks only while they stay inside it.
    fn open_beneath(&self, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            match openat2_beneath(&self.dir, rel, flags) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                }
                // Some seccomp profiles answer EPERM for syscalls they do not know.
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
                other => return other,
            }
        }
        self.open_by_real_path(rel, flags)
    }

    /// Without openat2: resolve the path, check it is inside the root, open it without following
    /// a final symlink, and check again where the descriptor points (a directory on the way may
    /// have been swapped for a symlink since it was resolved).
    fn open_by_real_path(&self, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        let outside = || io::Error::from_raw_os_error(libc::EXDEV);
        let real = std::fs::canonicalize(self.root.join(rel))?;
        if !real.starts_with(&self.canonical) {
            return Err(outside());
        }
        let c = cstring(real.as_os_str().as_bytes())?;
        // SAFETY: a valid C string; the returned descriptor is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by open and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        if let Ok(now) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
            if !now.starts_with(&self.canonical) {
                return Err(outside());
            }
        }
        Ok(fd)
    }
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn openat2_beneath(dir: &OwnedFd, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstring(rel.as_os_str().as_bytes())?;
    // SAFETY: open_how is plain data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // RESOLVE_BENEATH answers EAGAIN when a rename elsewhere races a ".." lookup: retry.
    for _ in 0..8 {
        // SAFETY: dir is an open descriptor, c a valid C string, how a valid open_how of the
        // size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: the syscall returned a new descriptor owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EAGAIN) {
            return Err(e);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data, filled by fstat on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn file_kind(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "a FIFO (named pipe)",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symlink",
        _ => "of an unknown kind",
    }
}

fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, Tree) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("a/b")).unwrap();
        fs::write(dir.path().join("a/b/f"), "1\n\0").unwrap();
        let t = Tree::open(dir.path()).unwrap();
        (dir, t)
    }

    #[test]
    fn symlinks_inside_are_followed_and_outside_refused() {
        let (dir, t) = tree();
        let root = dir.path();
        symlink("../a/b", root.join("a/inside")).unwrap();
        symlink("/etc", root.join("a/out_abs")).unwrap();
        symlink("../../..", root.join("a/out_rel")).unwrap();
        let text = |p: &str| t.text(&root.join(p));
        assert_eq!(text("a/inside/f").unwrap().as_deref(), Some("1"));
        for escaping in ["a/out_abs/hostname", "a/out_rel/etc/hostname"] {
            let e = text(escaping).unwrap_err().to_string();
            assert!(e.contains("leads out of the tree"), "{escaping}: {e}");
        }
        // The fallback used without openat2 gives the same answers.
        let rel = Path::new("a/inside/f");
        assert!(t.open_by_real_path(rel, libc::O_RDONLY).is_ok());
        let e = t
            .open_by_real_path(Path::new("a/out_rel/etc/hostname"), libc::O_PATH)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
        let e = t
            .open_by_real_path(Path::new("a/nope"), libc::O_PATH)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn fifos_are_refused_without_blocking_and_big_files_by_the_limit() {
        let (dir, t) = tree();
        let root = dir.path();
        let fifo = CString::new(root.join("a/fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = t.text(&root.join("a/fifo")).unwrap_err().to_string();
        assert!(e.contains("a/fifo: is a FIFO"), "{e}");
        let e = t.text(&root.join("a")).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        fs::write(root.join("a/big"), vec![b'1'; 4097]).unwrap();
        let small = Limit {
            bytes: 4096,
            what: "a test file",
        };
        let e = t.read(&root.join("a/big"), small).unwrap_err().to_string();
        assert!(
            e.contains("more than 4 KiB, the limit for a test file"),
            "{e}"
        );
        fs::write(root.join("a/exact"), vec![b'1'; 4096]).unwrap();
        assert!(matches!(
            t.read(&root.join("a/exact"), small).unwrap(),
            Found::Text(s) if s.len() == 4096
        ));
        assert!(matches!(
            t.read(&root.join("a/none"), small).unwrap(),
            Found::Absent
        ));
        assert!(matches!(
            t.read(&root.join("a/b/f/x"), small).unwrap(),
            Found::Absent
        ));
    }

    #[test]
    fn directories_are_listed_inside_only() {
        let (dir, t) = tree();
        let root = dir.path();
        symlink("/", root.join("up")).unwrap();
        let names = t.list(&root.join("a")).unwrap();
        assert_eq!(names, vec![OsString::from("b")]);
        assert!(t.list(&root.join("up")).is_err());
        assert!(t.list(&root.join("none")).unwrap().is_empty());
        assert!(t.is_dir(&root.join("a/b")).unwrap());
        assert!(!t.is_dir(&root.join("a/b/f")).unwrap());
        assert!(t.is_dir(&root.join("up")).is_err());
    }
}
