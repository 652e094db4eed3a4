//! Private directories and files, for places other users can write to (`/dev/shm`, `$TMPDIR`)
//! and for anything contend later loads or copies: what contend makes there gets a random name
//! and is created atomically by this process only (`mkdtemp`, `O_CREAT|O_EXCL|O_NOFOLLOW`), and
//! what it reads back is checked (a regular file, not a symlink, owned by the user, bounded in
//! size). A directory, symlink or file another user planted is never used, written through,
//! copied or deleted.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The effective user id: the owner everything contend creates has, and the only one it trusts.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

const STICKY: u32 = 0o1000;

/// A directory this process made: a random name, created atomically (`mkdtemp`: never an
/// existing directory), mode 0700, owned by the effective user. Removed with its contents when
/// dropped, but only while its path still names the directory that was made (same device and
/// inode), so what another user put in its place is left alone.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl PrivateDir {
    /// Makes `parent/PREFIXxxxxxx` (six random characters). The parent must be owned by the
    /// user or root and, when others may write to it, sticky (`/tmp`, `/dev/shm`): otherwise
    /// another user could rename the new directory away and put theirs in its place.
    pub fn new_in(parent: &Path, prefix: &str) -> io::Result<PrivateDir> {
        let context = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", parent.display()));
        // Followed: /dev/shm may be a symlink to /run/shm, and the parent's own safety is what
        // is checked here.
        let meta = std::fs::metadata(parent).map_err(context)?;
        if !meta.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                parent.display()
            )));
        }
        if let Err(why) = parent_is_safe(&meta) {
            return Err(io::Error::other(format!(
                "{} {why}: a private directory cannot be made safely there",
                parent.display()
            )));
        }
        let mut template = parent
            .join(format!("{prefix}XXXXXX"))
            .into_os_string()
            .into_vec();
        template.push(0);
        // SAFETY: a NUL-terminated, writable template ending in XXXXXX, which mkdtemp fills in.
        if unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) }.is_null() {
            return Err(context(io::Error::last_os_error()));
        }
        template.pop();
        let path = PathBuf::from(OsString::from_vec(template));
        match check_made(&path) {
            Ok((dev, ino)) => Ok(PrivateDir { path, dev, ino }),
            Err(e) => {
                // Empty if it is the one mkdtemp made; anything else is not removed by rmdir.
                let _ = std::fs::remove_dir(&path);
                Err(e)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `path` still names the directory that was made (not a symlink, same inode).
    pub fn is_intact(&self) -> bool {
        std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.is_dir() && m.dev() == self.dev && m.ino() == self.ino)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if self.is_intact() {
            // std's remove_dir_all walks with openat and O_NOFOLLOW: a symlink inside is
            // removed, never followed.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Why a directory above something private is unsafe, or `Ok`: owned by the user or root, and
/// writable by no one else unless sticky (then others cannot rename or delete what is ours).
pub(crate) fn parent_is_safe(meta: &Metadata) -> Result<(), String> {
    if meta.uid() != euid() && meta.uid() != 0 {
        return Err(format!("is owned by uid {}", meta.uid()));
    }
    let mode = meta.mode();
    if mode & 0o022 != 0 && mode & STICKY == 0 {
        return Err(format!(
            "is writable by others without the sticky bit (mode {:o})",
            mode & 0o7777
        ));
    }
    Ok(())
}

/// The device and inode of a directory mkdtemp just made, checked through a descriptor that
/// cannot follow a symlink: a directory, owned by the user, mode 0700 (a umask could only take
/// bits away; a filesystem that ignores modes is refused).
fn check_made(path: &Path) -> io::Result<(u64, u64)> {
    let dir = open_dir(path)?;
    let meta = dir.metadata()?;
    if meta.uid() != euid() {
        return Err(io::Error::other(format!(
            "{} was created owned by uid {}, not {}",
            path.display(),
            meta.uid(),
            euid()
        )));
    }
    dir.set_permissions(std::fs::Permissions::from_mode(0o700))?;
    if dir.metadata()?.mode() & 0o7777 != 0o700 {
        return Err(io::Error::other(format!(
            "{}: the filesystem does not keep mode 0700",
            path.display()
        )));
    }
    Ok((meta.dev(), meta.ino()))
}

/// A directory opened for `flock` or `fstat`, never through a symlink.
pub(crate) fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| explain(path, e))
}

/// Creates `path` for writing only if nothing of that name exists (`O_EXCL`: not a file, not
/// even a dangling symlink), with `mode` (less the umask).
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| explain(path, e))
}

/// A new file `dir/PREFIXxxxxxx` (random, created `O_EXCL` by `mkostemp`, mode 0600) and its
/// path: a temporary name no one else can have made or linked.
pub fn create_temp_in(dir: &Path, prefix: &str) -> io::Result<(File, PathBuf)> {
    let mut template = dir
        .join(format!("{prefix}XXXXXX"))
        .into_os_string()
        .into_vec();
    template.push(0);
    // SAFETY: a NUL-terminated, writable template ending in XXXXXX, which mkostemp fills in.
    let fd = unsafe { libc::mkostemp(template.as_mut_ptr().cast(), libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(explain(dir, io::Error::last_os_error()));
    }
    template.pop();
    // SAFETY: mkstemp returned a descriptor that nothing else owns.
    let file = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Ok((file, PathBuf::from(OsString::from_vec(template))))
}

/// Opens `path` for reading if it is a regular file owned by `owner`: not a symlink (not
/// followed), nor a FIFO or device (opened without blocking, then refused).
pub fn open_owned_file(path: &Path, owner: u32) -> io::Result<(File, Metadata)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| explain(path, e))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.uid() != owner {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is owned by uid {}, not {owner}",
                path.display(),
                meta.uid()
            ),
        ));
    }
    Ok((file, meta))
}

/// All of `file`, or an error if it holds more than `limit` bytes (never unbounded memory).
pub fn read_bounded(file: &mut File, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::other(format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

/// Copies `from` (a regular file owned by `owner`, at most `limit` bytes) into a new file `to`
/// (mode 0600, created `O_EXCL|O_NOFOLLOW`); the bytes copied.
pub fn copy_owned_file(from: &Path, to: &Path, owner: u32, limit: u64) -> io::Result<u64> {
    let (mut src, _) = open_owned_file(from, owner)?;
    let bytes = read_bounded(&mut src, limit)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", from.display())))?;
    let mut dst = create_new(to, 0o600)?;
    io::Write::write_all(&mut dst, &bytes)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", to.display())))?;
    Ok(bytes.len() as u64)
}

/// An open error with the path, and ELOOP (what O_NOFOLLOW answers) in words.
fn explain(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return io::Error::other(format!(
            "{} is a symbolic link (not followed)",
            path.display()
        ));
    }
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// `path` as a C string (for the few calls std has no wrapper for).
#[cfg(test)]
pub(crate) fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other(format!("{}: a NUL byte in the path", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_private_dir_has_a_random_name_mode_0700_and_is_removed_when_dropped() {
        let parent = scratch();
        let a = PrivateDir::new_in(parent.path(), "contend-rings-").unwrap();
        let b = PrivateDir::new_in(parent.path(), "contend-rings-").unwrap();
        assert_ne!(a.path(), b.path());
        for d in [&a, &b] {
            let name = d.path().file_name().unwrap().to_str().unwrap();
            let random = name.strip_prefix("contend-rings-").unwrap();
            assert_eq!(random.len(), 6, "{name}");
            assert_ne!(random, "XXXXXX");
            let m = std::fs::symlink_metadata(d.path()).unwrap();
            assert!(m.is_dir());
            assert_eq!(m.mode() & 0o7777, 0o700);
            assert_eq!(m.uid(), euid());
        }
        std::fs::write(a.path().join("x.ring"), b"r").unwrap();
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        drop(b);
        assert!(!pa.exists() && !pb.exists());
    }

    #[test]
    fn a_private_dir_replaced_by_another_is_not_removed() {
        let parent = scratch();
        let made = PrivateDir::new_in(parent.path(), "p-").unwrap();
        let path = made.path().to_path_buf();
        // Someone swaps ours for theirs (possible only where the parent allows it).
        std::fs::rename(&path, parent.path().join("moved")).unwrap();
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("theirs"), b"t").unwrap();
        assert!(!made.is_intact());
        drop(made);
        assert!(
            path.join("theirs").is_file(),
            "another's directory was deleted"
        );
        // A symlink in its place is not followed either.
        std::fs::remove_dir_all(&path).unwrap();
        let made = PrivateDir::new_in(parent.path(), "p-").unwrap();
        let target = parent.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"k").unwrap();
        std::fs::remove_dir(made.path()).unwrap();
        symlink(&target, made.path()).unwrap();
        drop(made);
        assert!(target.join("keep").is_file());
    }

    #[test]
    fn a_parent_others_may_write_to_without_the_sticky_bit_is_refused() {
        let parent = scratch();
        let open = parent.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = PrivateDir::new_in(&open, "p-").unwrap_err().to_string();
        assert!(
            e.contains("writable by others without the sticky bit"),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
        // Sticky, as /tmp and /dev/shm are: others cannot move ours.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(PrivateDir::new_in(&open, "p-").is_ok());
    }

    #[test]
    fn files_are_created_only_when_new_and_never_through_a_symlink() {
        let dir = scratch();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = dir.path().join("x.maps.tmp");
        symlink(&victim, &link).unwrap();
        assert!(create_new(&link, 0o600).is_err());
        assert!(create_new(&victim, 0o600).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let fresh = dir.path().join("fresh");
        create_new(&fresh, 0o600).unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().mode() & 0o077, 0);
    }

    #[test]
    fn only_bounded_regular_files_of_the_owner_are_copied() {
        let dir = scratch();
        let src = dir.path().join("1-2.maps");
        std::fs::write(&src, b"00400000-00401000 r-xp").unwrap();
        let n = copy_owned_file(&src, &dir.path().join("copy"), euid(), 1 << 20).unwrap();
        assert_eq!(n, 22);
        assert_eq!(
            std::fs::read(dir.path().join("copy")).unwrap(),
            b"00400000-00401000 r-xp"
        );
        // A symlink to a secret, a FIFO, too large, another owner, an existing destination.
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"root:x:0:0").unwrap();
        let link = dir.path().join("3-4.maps");
        symlink(&secret, &link).unwrap();
        let e = copy_owned_file(&link, &dir.path().join("c2"), euid(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!dir.path().join("c2").exists());
        let fifo = dir.path().join("5-6.maps");
        let c = c_path(&fifo).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = copy_owned_file(&fifo, &dir.path().join("c3"), euid(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = copy_owned_file(&src, &dir.path().join("c4"), euid(), 10).unwrap_err();
        assert!(e.to_string().contains("larger than 10 bytes"), "{e}");
        assert!(!dir.path().join("c4").exists());
        let e = copy_owned_file(&src, &dir.path().join("c5"), euid() + 1, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("owned by uid"), "{e}");
        assert!(copy_owned_file(&src, &dir.path().join("copy"), euid(), 1 << 20).is_err());
    }
}
