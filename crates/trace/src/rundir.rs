//! The run directory: `meta.json` plus `streams/*.cst`. Creating one never overwrites: when the
//! requested name exists, the run is numbered (`contend.data.1`, `.2`, ...).

use crate::files::{self, ReadFileError};
use crate::meta::Meta;
use std::io;
use std::path::{Component, Path, PathBuf};

pub use crate::layout::{DEFAULT_RUN_DIR, META_FILE, STREAMS_DIR, STREAM_EXT};

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{path}: no such run directory (record one first, or name an existing one)", path = path.display())]
    Missing { path: PathBuf },
    #[error("{path} is {is}, not a run directory", path = path.display())]
    NotADirectory { path: PathBuf, is: &'static str },
    #[error("{path}: not a run directory (no meta.json)", path = path.display())]
    NoMeta { path: PathBuf },
    #[error("{path}: {why}", path = path.display())]
    BadMeta { path: PathBuf, why: String },
    /// meta.json (or another file of the run) cannot be read as it is: not a regular file,
    /// too large, a link.
    #[error(transparent)]
    Unreadable(#[from] ReadFileError),
    /// The directory asked for cannot be created there: the user's path (bad input).
    #[error("{path}: {why}", path = path.display())]
    CannotCreate { path: PathBuf, why: String },
    #[error("{path}: {source}", path = path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl RunDirError {
    /// The user's input is at fault (a path that cannot be a run directory, a damaged run),
    /// not the machine (a full disk, an I/O error).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, RunDirError::Io { .. })
    }
}

#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates a new run directory at `requested`, or at `requested.N` with the first free N
    /// when a directory of that name exists. Creation is atomic (mkdir), so concurrent
    /// recorders never share one. A path that cannot name a new directory (`/`, `..`, an
    /// existing file, a parent that is not a directory or takes no new directory) is
    /// [`RunDirError::CannotCreate`], saying why.
    pub fn create(requested: &Path) -> Result<RunDir, RunDirError> {
        let cannot = |path: &Path, why: String| RunDirError::CannotCreate {
            path: path.to_path_buf(),
            why,
        };
        // Rebuilt from its components to drop a trailing `/`, which would otherwise put the
        // numbered run inside the existing one (`contend.data/.1`).
        let requested: PathBuf = requested.components().collect();
        // `/`, `.`, `..`, `x/..`: no new name to create (and `/` would be numbered `/.1`).
        if !matches!(
            requested.components().next_back(),
            Some(Component::Normal(_))
        ) {
            return Err(cannot(
                &requested,
                "names no new directory: give the path of a directory to create, such as ./contend.data".into(),
            ));
        }
        let parent = match requested.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        match std::fs::metadata(&parent) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                return Err(cannot(
                    &requested,
                    format!(
                        "{} is {}, not a directory to create the run in",
                        parent.display(),
                        files::file_kind(m.file_type())
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(cannot(
                    &requested,
                    format!(
                        "{} does not exist (create it first, or give another path)",
                        parent.display()
                    ),
                ))
            }
            Err(e) => return Err(cannot(&requested, format!("{}: {e}", parent.display()))),
        }
        let mut candidate = requested.clone();
        for n in 1..=100_000u32 {
            match std::fs::create_dir(&candidate) {
                Ok(()) => {
                    let streams = candidate.join(STREAMS_DIR);
                    std::fs::create_dir(&streams).map_err(|e| RunDirError::Io {
                        path: streams,
                        source: e,
                    })?;
                    return Ok(RunDir { path: candidate });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // An existing directory is kept and the run numbered; anything else of that
                    // name is not where the user meant a run to go.
                    match std::fs::symlink_metadata(&candidate) {
                        Ok(m)
                            if candidate == requested
                                && !m.is_dir()
                                && !m.file_type().is_symlink() =>
                        {
                            return Err(cannot(
                                &requested,
                                format!(
                                    "exists and is {}, not a directory: give another path",
                                    files::file_kind(m.file_type())
                                ),
                            ))
                        }
                        _ => {}
                    }
                    let mut name = requested.as_os_str().to_owned();
                    name.push(format!(".{n}"));
                    candidate = PathBuf::from(name);
                }
                Err(e) => {
                    let why = match e.raw_os_error() {
                        // The parent exists (checked above), yet "no such file": a kernel file
                        // system such as /proc or /sys.
                        Some(libc::ENOENT) => format!(
                            "cannot create a directory in {}: it takes no new directories (a kernel file system such as /proc or /sys?)",
                            parent.display()
                        ),
                        Some(libc::EACCES | libc::EPERM) => format!(
                            "cannot create a directory in {}: permission denied (give a directory you can write to)",
                            parent.display()
                        ),
                        Some(libc::EROFS) => format!(
                            "cannot create a directory in {}: a read-only file system",
                            parent.display()
                        ),
                        Some(libc::ENAMETOOLONG) => "the name is too long".to_string(),
                        // Disk full, I/O error: the machine, not the path.
                        _ => return Err(RunDirError::Io {
                            path: candidate,
                            source: e,
                        }),
                    };
                    return Err(cannot(&candidate, why));
                }
            }
        }
        Err(RunDirError::Io {
            path: requested,
            source: io::Error::other("100000 numbered run directories already exist"),
        })
    }

    /// Opens an existing run directory and reads its meta.json (a regular file within
    /// [`files::META`]'s size, not a link).
    pub fn open(path: &Path) -> Result<(RunDir, Meta), RunDirError> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                return Err(RunDirError::NotADirectory {
                    path: path.to_path_buf(),
                    is: files::file_kind(m.file_type()),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RunDirError::Missing {
                    path: path.to_path_buf(),
                })
            }
            Err(e) => {
                return Err(RunDirError::Io {
                    path: path.to_path_buf(),
                    source: e,
                })
            }
        }
        let text = match files::read_in_run_to_string(path, Path::new(META_FILE), &files::META) {
            Ok(t) => t,
            Err(e) if e.is_missing() => {
                return Err(RunDirError::NoMeta {
                    path: path.to_path_buf(),
                })
            }
            Err(e) => return Err(e.into()),
        };
        let meta = Meta::from_json(&text).map_err(|why| RunDirError::BadMeta {
            path: path.join(META_FILE),
            why,
        })?;
        Ok((
            RunDir {
                path: path.to_path_buf(),
            },
            meta,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where a stream named `name` lives, and its path relative to the run directory (as
    /// listed in meta.json).
    pub fn stream_path(&self, name: &str) -> (PathBuf, String) {
        let rel = format!("{STREAMS_DIR}/{name}.{STREAM_EXT}");
        (self.path.join(&rel), rel)
    }

    /// Stream files present in `streams/`, relative paths, sorted.
    pub fn stream_files(&self) -> Result<Vec<String>, RunDirError> {
        let dir = self.path.join(STREAMS_DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(RunDirError::Io {
                    path: dir,
                    source: e,
                })
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(&format!(".{STREAM_EXT}")))
            .map(|n| format!("{STREAMS_DIR}/{n}"))
            .collect();
        names.sort();
        Ok(names)
    }

    /// A stream of this run mapped (`rel` as meta.json lists it: inside the run, no link).
    pub fn map_stream(&self, rel: &str) -> Result<crate::StreamFile, ReadFileError> {
        crate::StreamFile::open_in_run(&self.path, Path::new(rel))
    }

    /// Writes meta.json atomically (temporary file, then rename), so a reader never sees half.
    pub fn write_meta(&self, meta: &Meta) -> Result<(), RunDirError> {
        let tmp = self.path.join(".meta.json.tmp");
        let text = serde_json::to_string_pretty(meta).map_err(|e| RunDirError::Io {
            path: tmp.clone(),
            source: io::Error::other(e),
        })?;
        std::fs::write(&tmp, text + "\n").map_err(|e| RunDirError::Io {
            path: tmp.clone(),
            source: e,
        })?;
        let dest = self.path.join(META_FILE);
        std::fs::rename(&tmp, &dest).map_err(|e| RunDirError::Io {
            path: dest,
            source: e,
        })
    }
}
