//! A stream file that holds no descriptor between writes: the recorder keeps a stream per
//! thread of the target, and a program may create thousands of threads; with a descriptor
//! each, the recorder would run out of them (`ulimit -n`) and lose threads. The stream writer
//! buffers a whole chunk (thousands of events) between writes, so opening the file for each
//! write costs little.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use trace::StreamSink;

/// A [`StreamSink`] that opens its file (append-only, never through a symlink) for each write
/// and closes it again.
#[derive(Debug)]
pub struct ReopeningFile {
    path: PathBuf,
}

impl ReopeningFile {
    /// Creates `path`, which must not exist yet (never a file someone else put there).
    pub fn create_new(path: &Path) -> io::Result<ReopeningFile> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        Ok(ReopeningFile {
            path: path.to_path_buf(),
        })
    }

    /// Creates `DIR/STEM.EXT`, or `DIR/STEM.2.EXT`, `.3`… when taken (a thread id the kernel
    /// handed out again); returns the sink and the file name chosen.
    pub fn create_unique(dir: &Path, stem: &str, ext: &str) -> io::Result<(ReopeningFile, String)> {
        let mut name = format!("{stem}.{ext}");
        for n in 2u32..1000 {
            match Self::create_new(&dir.join(&name)) {
                Ok(f) => return Ok((f, name)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    name = format!("{stem}.{n}.{ext}");
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{stem}.{ext} and 998 numbered variants already exist"),
        ))
    }

    fn open(&self, append: bool) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .append(append)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Write for ReopeningFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // All of it or an error: the writer then cuts the file back to its last whole chunk.
        self.open(true)?.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl StreamSink for ReopeningFile {
    fn rewind_to(&mut self, len: u64) -> io::Result<()> {
        // Appends go to the new end.
        self.open(false)?.set_len(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_append_hold_no_descriptor_and_rewind() {
        let dir = tempfile::tempdir().unwrap();
        let (mut f, name) = ReopeningFile::create_unique(dir.path(), "s", "cst").unwrap();
        assert_eq!(name, "s.cst");
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = fds();
        f.write_all(b"abc").unwrap();
        f.write_all(b"def").unwrap();
        assert_eq!(fds(), before);
        assert_eq!(std::fs::read(f.path()).unwrap(), b"abcdef");
        f.rewind_to(2).unwrap();
        f.write_all(b"Z").unwrap();
        assert_eq!(std::fs::read(f.path()).unwrap(), b"abZ");
        // A second stream of the same name gets a number; an existing file is never reused.
        let (_, again) = ReopeningFile::create_unique(dir.path(), "s", "cst").unwrap();
        assert_eq!(again, "s.2.cst");
        assert_eq!(std::fs::read(f.path()).unwrap(), b"abZ");
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("s.cst");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(ReopeningFile::create_new(&link).is_err());
        let mut f = ReopeningFile { path: link.clone() };
        assert!(f.write_all(b"x").is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }
}
