//! contend's private cache: files contend builds once and later loads into programs (the MPI
//! wrapper now; the embedded libraries of an installed contend later), kept where only this
//! user can write, and checked before every use. Running as root on a machine shared with
//! other users, contend must never preload a library someone else put where it looks.
//!
//! - **Where**: `$CONTEND_CACHE`, else `$XDG_CACHE_HOME/contend`, else `$HOME/.cache/contend`
//!   ([`location`]); never a shared place such as `/tmp`.
//! - **Trusted** only when it is a real directory (not a symlink), owned by the effective user
//!   and not writable by group or others, and every directory above it is owned by that user
//!   or root and writable by no one else unless sticky, as ssh checks `~/.ssh` ([`check`]).
//!   Created 0700 when absent.
//! - **Files**: each one contend puts there is written in a private scratch directory of the
//!   cache, then renamed into place and recorded in `manifest.json` (name → sha256 and size)
//!   under a lock ([`Cache::adopt`], [`Cache::put`]). [`Cache::get`] returns a file only while
//!   it is a regular file of the user whose content still matches the manifest; anything else
//!   is for the caller to build again.
//! - **Refused**: a cache that fails the checks, or no location at all, is not used. The
//!   caller's notice sink gets one line saying why, and a private temporary directory
//!   (`mkdtemp` in `$TMPDIR`, removed when the [`Cache`] is dropped) serves this run instead.
//!
//! This crate does not print: warnings go through the `notice` function the caller gives.

use crate::private::{self, euid, open_owned_file, PrivateDir};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The manifest's file name in the cache directory.
pub const MANIFEST: &str = "manifest.json";

/// The largest file the cache holds (the MPI wrapper is about 200 KB): hashing is bounded.
pub const MAX_FILE: u64 = 256 << 20;

const MAX_MANIFEST: u64 = 1 << 20;

/// The cache directory a run uses: the user's, checked, or a private temporary one.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    /// Set when this run's files go to a temporary directory, removed on drop.
    temporary: Option<PrivateDir>,
}

/// Why a cache directory is not trusted (the `Display` text completes "cache DIR not used: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it is a symbolic link")]
    Symlink,
    #[error("it is not a directory")]
    NotDirectory,
    #[error("it is owned by uid {owner}, not by uid {me}, who runs contend")]
    Owner { owner: u32, me: u32 },
    #[error("it is writable by group or others (mode {mode:o})")]
    Writable { mode: u32 },
    #[error("{} above it {why}", path.display())]
    Parent { path: PathBuf, why: String },
    #[error("{0}")]
    Io(String),
}

/// What [`Cache::get`] found under a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The file contend built, unchanged.
    Found(PathBuf),
    /// Nothing of that name.
    Absent,
    /// Something is there but it is not what contend built (why, one line): build it again.
    Changed(String),
}

#[derive(Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
struct Manifest {
    files: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
struct Entry {
    /// Lower-case hex.
    sha256: String,
    size: u64,
}

/// The user's cache directory from the environment: `$CONTEND_CACHE`, else
/// `$XDG_CACHE_HOME/contend` (an absolute one, as the XDG specification asks), else
/// `$HOME/.cache/contend`; `None` when none is set.
pub fn location() -> Option<PathBuf> {
    location_in(|name| std::env::var_os(name))
}

/// [`location`] from the variables `env` gives.
fn location_in(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("CONTEND_CACHE")
        .map(|d| std::path::absolute(&d).unwrap_or(d))
        .or_else(|| {
            var("XDG_CACHE_HOME")
                .filter(|d| d.is_absolute())
                .map(|d| d.join("contend"))
        })
        .or_else(|| var("HOME").map(|h| h.join(".cache/contend")))
}

/// Checks an existing cache directory (see the module's documentation); its real path (the
/// directories above it resolved, itself not) is what the cache then uses, so a symlink above it
/// that changes later cannot redirect it.
pub fn check(dir: &Path) -> Result<PathBuf, Refusal> {
    let io = |p: &Path, e: io::Error| Refusal::Io(format!("{}: {e}", p.display()));
    let dir = std::path::absolute(dir).map_err(|e| io(dir, e))?;
    let (Some(name), Some(parent)) = (dir.file_name(), dir.parent()) else {
        return Err(Refusal::NotDirectory);
    };
    let parent = std::fs::canonicalize(parent).map_err(|e| io(parent, e))?;
    let real = parent.join(name);
    let meta = std::fs::symlink_metadata(&real).map_err(|e| io(&real, e))?;
    if meta.file_type().is_symlink() {
        return Err(Refusal::Symlink);
    }
    if !meta.is_dir() {
        return Err(Refusal::NotDirectory);
    }
    if meta.uid() != euid() {
        return Err(Refusal::Owner {
            owner: meta.uid(),
            me: euid(),
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Refusal::Writable {
            mode: meta.mode() & 0o7777,
        });
    }
    for above in parent.ancestors() {
        let m = std::fs::metadata(above).map_err(|e| io(above, e))?;
        private::parent_is_safe(&m).map_err(|why| Refusal::Parent {
            path: above.to_path_buf(),
            why,
        })?;
    }
    Ok(real)
}

impl Cache {
    /// The user's cache ([`location`]), created if absent and checked; or, with a one-line
    /// `notice` saying why, a private temporary directory for this run. An error only when not
    /// even that can be made.
    pub fn open(notice: &mut dyn FnMut(String)) -> io::Result<Cache> {
        match location() {
            Some(dir) => Cache::open_at(&dir, notice),
            None => {
                notice(
                    "no cache directory ($CONTEND_CACHE, $XDG_CACHE_HOME and $HOME are unset): \
                     contend builds what it needs in a private temporary directory for this run \
                     (set CONTEND_CACHE to keep it; for MPI jobs on several hosts, on a file \
                     system they all see)"
                        .into(),
                );
                Cache::temporary()
            }
        }
    }

    /// `dir` as the cache, created (0700, with the missing directories above it) if absent and
    /// checked; or, with a one-line `notice` naming it and why, a private temporary directory.
    pub fn open_at(dir: &Path, notice: &mut dyn FnMut(String)) -> io::Result<Cache> {
        if std::fs::symlink_metadata(dir).is_err() {
            // Errors show in the check that follows.
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
        match check(dir) {
            Ok(real) => Ok(Cache {
                dir: real,
                temporary: None,
            }),
            Err(why) => {
                notice(format!(
                    "cache {} not used: {why}; contend builds what it needs in a private \
                     temporary directory for this run (to keep a cache: make that directory \
                     yours alone, `chown $(id -u) DIR && chmod 700 DIR`, or set CONTEND_CACHE \
                     to one that is)",
                    dir.display()
                ));
                Cache::temporary()
            }
        }
    }

    /// A private temporary directory in `$TMPDIR` (mode 0700, random name), removed when the
    /// cache is dropped.
    pub fn temporary() -> io::Result<Cache> {
        let dir = PrivateDir::new_in(&std::env::temp_dir(), "contend-cache-")?;
        Ok(Cache {
            dir: dir.path().to_path_buf(),
            temporary: Some(dir),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Whether this is a temporary directory for this run only.
    pub fn is_temporary(&self) -> bool {
        self.temporary.is_some()
    }

    /// The file contend stored as `name`, if it is still exactly that: a regular file (not a
    /// symlink) of the user, writable by no one else, whose size and sha256 are the manifest's.
    pub fn get(&self, name: &str) -> Lookup {
        if let Err(why) = valid_name(name) {
            return Lookup::Changed(why);
        }
        let _lock = match self.lock(false) {
            Ok(l) => l,
            Err(e) => return Lookup::Changed(e.to_string()),
        };
        let path = self.dir.join(name);
        let (mut file, meta) = match open_owned_file(&path, euid()) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Lookup::Absent,
            Err(e) => return Lookup::Changed(e.to_string()),
        };
        if meta.mode() & 0o022 != 0 {
            return Lookup::Changed(format!(
                "{} is writable by group or others (mode {:o})",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        let manifest = match self.read_manifest() {
            Ok(m) => m,
            Err(why) => return Lookup::Changed(why),
        };
        let Some(entry) = manifest.files.get(name) else {
            return Lookup::Changed(format!(
                "{} is not one contend built (not in {MANIFEST})",
                path.display()
            ));
        };
        match hash(&mut file) {
            Ok(found) if found == *entry => Lookup::Found(path),
            Ok(found) => Lookup::Changed(format!(
                "{} changed since contend built it ({} bytes, sha256 {}; {MANIFEST} says {} \
                 bytes, sha256 {})",
                path.display(),
                found.size,
                found.sha256,
                entry.size,
                entry.sha256
            )),
            Err(e) => Lookup::Changed(format!("{}: {e}", path.display())),
        }
    }

    /// A private scratch directory inside the cache (mode 0700, removed when dropped), to build
    /// a file in before [`Cache::adopt`] moves it into place.
    pub fn scratch(&self) -> io::Result<PrivateDir> {
        PrivateDir::new_in(&self.dir, ".build-")
    }

    /// Moves `built` (a file made in one of this cache's [`Cache::scratch`] directories) into
    /// place as `name`, never writable by group or others, and records its size and sha256 in
    /// the manifest; its path in the cache.
    pub fn adopt(&self, built: &Path, name: &str) -> io::Result<PathBuf> {
        valid_name(name).map_err(io::Error::other)?;
        let (mut file, meta) = open_owned_file(built, euid())?;
        file.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o755))?;
        let entry = hash(&mut file)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", built.display())))?;
        let _lock = self.lock(true)?;
        let path = self.dir.join(name);
        std::fs::rename(built, &path)?;
        // What was hashed is what now has the name (nothing else writes in a scratch directory,
        // but a recorded hash must be of the file in place).
        let placed = std::fs::symlink_metadata(&path)?;
        if (placed.dev(), placed.ino()) != (meta.dev(), meta.ino()) {
            return Err(io::Error::other(format!(
                "{} was replaced while it was moved into place",
                path.display()
            )));
        }
        // A manifest that cannot be read is started again: what it listed gets rebuilt.
        let mut manifest = self.read_manifest().unwrap_or_default();
        manifest.files.insert(name.to_string(), entry);
        self.write_manifest(&manifest)?;
        Ok(path)
    }

    /// Stores `bytes` as `name` (written in a scratch directory, then [`Cache::adopt`]ed).
    pub fn put(&self, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
        let scratch = self.scratch()?;
        let tmp = scratch.path().join("file");
        private::create_new(&tmp, 0o644)?.write_all(bytes)?;
        self.adopt(&tmp, name)
    }

    /// The directory locked (`flock`) for reading the manifest (shared) or changing it
    /// (exclusive), so that concurrent contends never see a file and a manifest that disagree.
    fn lock(&self, exclusive: bool) -> io::Result<File> {
        let dir = private::open_dir(&self.dir)?;
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        // SAFETY: a descriptor we own; the lock goes with it when it is closed.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&dir), op) } != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("locking {}: {e}", self.dir.display()),
            ));
        }
        Ok(dir)
    }

    fn read_manifest(&self) -> Result<Manifest, String> {
        let path = self.dir.join(MANIFEST);
        let mut file = match open_owned_file(&path, euid()) {
            Ok((f, _)) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Manifest::default()),
            Err(e) => return Err(e.to_string()),
        };
        let bytes = private::read_bounded(&mut file, MAX_MANIFEST)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn write_manifest(&self, manifest: &Manifest) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(manifest).map_err(io::Error::other)?;
        let (mut file, tmp) = private::create_temp_in(&self.dir, ".manifest-")?;
        let written = file
            .write_all(&json)
            .and_then(|()| file.sync_data())
            .and_then(|()| std::fs::rename(&tmp, self.dir.join(MANIFEST)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// A name the cache stores under: one plain file name, not hidden (names starting with `.` are
/// the cache's own temporaries), not the manifest.
fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 200
        || name.contains('/')
        || name.contains('\0')
        || name.starts_with('.')
        || name == MANIFEST
    {
        return Err(format!(
            "{name:?} is not a name the cache stores files under"
        ));
    }
    Ok(())
}

/// Size and sha256 of what is left to read of `file`, at most [`MAX_FILE`] bytes.
fn hash(file: &mut File) -> io::Result<Entry> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        if size > MAX_FILE {
            return Err(io::Error::other(format!("larger than {MAX_FILE} bytes")));
        }
        hasher.update(&buf[..n]);
    }
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Entry { sha256, size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const NOBODY: u32 = 65534;

    /// Opens `dir` as the cache; the notices it gave.
    fn open(dir: &Path) -> (Cache, Vec<String>) {
        let mut said = Vec::new();
        let cache = Cache::open_at(dir, &mut |n| said.push(n)).unwrap();
        (cache, said)
    }

    fn mode(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    fn chown(p: &Path, uid: u32) -> bool {
        let c = private::c_path(p).unwrap();
        // SAFETY: a NUL-terminated path; -1 leaves the group.
        unsafe { libc::lchown(c.as_ptr(), uid, u32::MAX) == 0 }
    }

    #[test]
    fn an_absent_cache_is_created_0700_and_used() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("home/.cache/contend");
        let (cache, said) = open(&dir);
        assert!(said.is_empty(), "{said:?}");
        assert!(!cache.is_temporary());
        assert_eq!(cache.path(), std::fs::canonicalize(&dir).unwrap());
        let m = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!((m.mode() & 0o7777, m.uid()), (0o700, euid()));
    }

    #[test]
    fn a_symlinked_or_open_or_foreign_cache_is_refused_for_a_temporary_one() {
        let top = tempfile::tempdir().unwrap();
        let real = top.path().join("real");
        std::fs::create_dir(&real).unwrap();
        mode(&real, 0o700);
        let link = top.path().join("link");
        symlink(&real, &link).unwrap();
        assert_eq!(check(&link), Err(Refusal::Symlink));
        let (cache, said) = open(&link);
        assert!(cache.is_temporary());
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains(&link.display().to_string()), "{said:?}");
        assert!(said[0].contains("symbolic link"), "{said:?}");
        let temporary = cache.path().to_path_buf();
        let m = std::fs::symlink_metadata(&temporary).unwrap();
        assert_eq!((m.mode() & 0o7777, m.uid()), (0o700, euid()));
        drop(cache);
        assert!(!temporary.exists(), "the temporary cache is removed");

        mode(&real, 0o777);
        assert_eq!(check(&real), Err(Refusal::Writable { mode: 0o777 }));
        mode(&real, 0o770);
        assert_eq!(check(&real), Err(Refusal::Writable { mode: 0o770 }));
        mode(&real, 0o755);
        assert!(check(&real).is_ok());

        // The directory above it writable by others (no sticky bit): it could be swapped.
        let open_parent = top.path().join("open");
        std::fs::create_dir(&open_parent).unwrap();
        let inner = open_parent.join("contend");
        std::fs::create_dir(&inner).unwrap();
        mode(&inner, 0o700);
        mode(&open_parent, 0o777);
        match check(&inner) {
            Err(Refusal::Parent { path, why }) => {
                assert_eq!(path, std::fs::canonicalize(&open_parent).unwrap());
                assert!(why.contains("without the sticky bit"), "{why}");
            }
            other => panic!("{other:?}"),
        }

        let file = top.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(check(&file), Err(Refusal::NotDirectory));

        if euid() != 0 {
            testkit::skip("the owner check needs root (to give a directory to nobody)");
            return;
        }
        let theirs = top.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        mode(&theirs, 0o755);
        assert!(chown(&theirs, NOBODY));
        assert_eq!(
            check(&theirs),
            Err(Refusal::Owner {
                owner: NOBODY,
                me: 0
            })
        );
        // A directory above owned by another user (who could rename ours away).
        let inside = theirs.join("contend");
        std::fs::create_dir(&inside).unwrap();
        mode(&inside, 0o700);
        match check(&inside) {
            Err(Refusal::Parent { why, .. }) => assert!(why.contains("owned by uid 65534")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_is_found_only_while_it_matches_the_manifest() {
        let top = tempfile::tempdir().unwrap();
        let (cache, _) = open(&top.path().join("c"));
        assert_eq!(cache.get("lib.so"), Lookup::Absent);
        let path = cache.put("lib.so", b"the library").unwrap();
        assert_eq!(cache.get("lib.so"), Lookup::Found(path.clone()));
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(cache.path().join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(manifest["files"]["lib.so"]["size"], 11);
        assert_eq!(
            manifest["files"]["lib.so"]["sha256"],
            // sha256("the library")
            hash(&mut File::open(&path).unwrap()).unwrap().sha256
        );
        assert_eq!(
            manifest["files"]["lib.so"]["sha256"]
                .as_str()
                .unwrap()
                .len(),
            64
        );
        // No scratch directory or temporary manifest left behind.
        let names: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");

        // Same size, other bytes: the hash tells.
        std::fs::write(&path, b"THE LIBRARY").unwrap();
        match cache.get("lib.so") {
            Lookup::Changed(why) => assert!(why.contains("changed since contend built it")),
            other => panic!("{other:?}"),
        }
        // Stored again, it is found again.
        cache.put("lib.so", b"the library").unwrap();
        assert!(matches!(cache.get("lib.so"), Lookup::Found(_)));

        // A file contend did not record.
        std::fs::write(cache.path().join("planted.so"), b"x").unwrap();
        match cache.get("planted.so") {
            Lookup::Changed(why) => assert!(why.contains("not in manifest.json"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A symlink to a file with the recorded content is not followed.
        let elsewhere = top.path().join("elsewhere.so");
        std::fs::write(&elsewhere, b"the library").unwrap();
        std::fs::remove_file(&path).unwrap();
        symlink(&elsewhere, &path).unwrap();
        match cache.get("lib.so") {
            Lookup::Changed(why) => assert!(why.contains("symbolic link"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Writable by others: not trusted whatever its content.
        std::fs::remove_file(&path).unwrap();
        cache.put("lib.so", b"the library").unwrap();
        mode(&path, 0o666);
        match cache.get("lib.so") {
            Lookup::Changed(why) => assert!(why.contains("writable by group or others")),
            other => panic!("{other:?}"),
        }
        // Names outside the cache, or its own, are refused.
        for bad in ["../x", "", ".build-1", MANIFEST] {
            assert!(matches!(cache.get(bad), Lookup::Changed(_)), "{bad}");
            assert!(cache.put(bad, b"x").is_err(), "{bad}");
        }
    }

    #[test]
    fn an_adopted_file_is_never_left_writable_by_others() {
        let top = tempfile::tempdir().unwrap();
        let (cache, _) = open(&top.path().join("c"));
        let scratch = cache.scratch().unwrap();
        let built = scratch.path().join("out.so");
        std::fs::write(&built, b"elf").unwrap();
        mode(&built, 0o777);
        let placed = cache.adopt(&built, "out.so").unwrap();
        assert_eq!(std::fs::metadata(&placed).unwrap().mode() & 0o777, 0o755);
        assert!(matches!(cache.get("out.so"), Lookup::Found(_)));
        // A symlink handed in as the built file is refused.
        let link = scratch.path().join("link.so");
        symlink(&placed, &link).unwrap();
        assert!(cache.adopt(&link, "other.so").is_err());
        assert_eq!(cache.get("other.so"), Lookup::Absent);
    }

    #[test]
    fn a_foreign_file_in_the_cache_is_refused_even_with_a_matching_manifest() {
        if euid() != 0 {
            testkit::skip("needs root (to give a file to nobody)");
            return;
        }
        let top = tempfile::tempdir().unwrap();
        let (cache, _) = open(&top.path().join("c"));
        let path = cache.put("lib.so", b"the library").unwrap();
        assert!(chown(&path, NOBODY));
        match cache.get("lib.so") {
            Lookup::Changed(why) => assert!(why.contains("owned by uid 65534"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_location_follows_the_environment_in_order() {
        let at = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            location_in(move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into()))
        };
        let all = [
            ("CONTEND_CACHE", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(at(&all), Some("/c".into()));
        assert_eq!(at(&all[1..]), Some("/x/contend".into()));
        assert_eq!(at(&all[2..]), Some("/h/.cache/contend".into()));
        // Empty is unset; a relative XDG_CACHE_HOME is ignored, as the specification asks.
        assert_eq!(
            at(&[
                ("CONTEND_CACHE", ""),
                ("XDG_CACHE_HOME", "rel"),
                ("HOME", "/h")
            ]),
            Some("/h/.cache/contend".into())
        );
        // Nothing set: no location (the caller uses a private temporary directory, never a
        // shared one).
        assert_eq!(at(&[]), None);
        assert_eq!(at(&[("HOME", "")]), None);
    }
}
