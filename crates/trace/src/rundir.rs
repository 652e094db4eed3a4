//! The run directory: `meta.json` plus `streams/*.cst`. Creating one never overwrites: when the
//! requested name exists, the run is numbered (`contend.data.1`, `.2`, ...).

use crate::meta::Meta;
use std::io;
use std::path::{Path, PathBuf};

pub use crate::layout::{DEFAULT_RUN_DIR, META_FILE, STREAMS_DIR, STREAM_EXT};

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{path}: no such run directory (record one first, or name an existing one)")]
    Missing { path: PathBuf },
    #[error("{path}: not a run directory (no meta.json)")]
    NoMeta { path: PathBuf },
    #[error("{path}: {why}")]
    BadMeta { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates a new run directory at `requested`, or at `requested.N` with the first free N
    /// when it exists. Creation is atomic (mkdir), so concurrent recorders never share one.
    pub fn create(requested: &Path) -> Result<RunDir, RunDirError> {
        let io_err = |path: &Path, source| RunDirError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Rebuilt from its components to drop a trailing `/`, which would otherwise put the
        // numbered run inside the existing one (`contend.data/.1`).
        let requested: PathBuf = requested.components().collect();
        let mut candidate = requested.clone();
        for n in 1..=100_000u32 {
            match std::fs::create_dir(&candidate) {
                Ok(()) => {
                    let streams = candidate.join(STREAMS_DIR);
                    std::fs::create_dir(&streams).map_err(|e| io_err(&streams, e))?;
                    return Ok(RunDir { path: candidate });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let mut name = requested.as_os_str().to_owned();
                    name.push(format!(".{n}"));
                    candidate = PathBuf::from(name);
                }
                Err(e) => return Err(io_err(&candidate, e)),
            }
        }
        Err(io_err(
            &requested,
            io::Error::other("100000 numbered run directories already exist"),
        ))
    }

    /// Opens an existing run directory and reads its meta.json.
    pub fn open(path: &Path) -> Result<(RunDir, Meta), RunDirError> {
        if !path.is_dir() {
            return Err(RunDirError::Missing {
                path: path.to_path_buf(),
            });
        }
        let meta_path = path.join(META_FILE);
        let text = match std::fs::read_to_string(&meta_path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RunDirError::NoMeta {
                    path: path.to_path_buf(),
                })
            }
            Err(e) => {
                return Err(RunDirError::Io {
                    path: meta_path,
                    source: e,
                })
            }
        };
        let meta = Meta::from_json(&text).map_err(|why| RunDirError::BadMeta {
            path: meta_path,
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
