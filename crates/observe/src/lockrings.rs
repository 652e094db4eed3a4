//! Drains the probe's shared-memory rings (`trace::ring`) into the run directory's event
//! streams: one stream per ring, i.e. per thread of each process image.
//!
//! The probe's in-band definitions (call sites, objects) become the stream's tables; its ids
//! are translated to the stream's. A ring that turns out corrupt (the target scribbled on it)
//! is dropped with a note rather than trusted.
//!
//! [`announced`] lists the processes the probe was loaded in (its `<pid>-<instance>.probe`
//! marks), whether or not they took a lock.

use memmap2::MmapMut;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use trace::meta::StreamEntry;
use trace::ring::{self, Consumer};
use trace::{ClockSource, EventKind, Header, ObjectKind, Record, RunDir, StreamKind, StreamWriter};
use trace::{NO_OBJECT, NO_SITE};

/// One ring being drained into one stream.
struct RingStream {
    map: MmapMut,
    writer: StreamWriter<File>,
    file: String,
    pid: u32,
    tid: u32,
    /// Probe id -> stream id.
    sites: Vec<u16>,
    objects: Vec<u32>,
    dropped_seen: u64,
    closed: bool,
    broken: bool,
}

pub struct RingDrainer {
    rings_dir: PathBuf,
    run: RunDir,
    clock: ClockSource,
    clock_hz: u64,
    rings: BTreeMap<String, RingStream>,
    /// Problems worth telling the user, once each.
    pub notes: Vec<String>,
}

impl RingDrainer {
    /// A drainer of the rings in `rings_dir`, which exists. Makes its `marks/` for the probe's
    /// announcements ([`announced`]): the program is not started yet.
    pub fn new(run: &RunDir, rings_dir: &Path, clock: ClockSource, clock_hz: u64) -> RingDrainer {
        let _ = std::fs::create_dir(rings_dir.join(ring::MARKS_DIR));
        RingDrainer {
            rings_dir: rings_dir.to_path_buf(),
            run: run.clone(),
            clock,
            clock_hz,
            rings: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    pub fn rings_dir(&self) -> &Path {
        &self.rings_dir
    }

    /// Maps rings that appeared since the last call.
    pub fn discover(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.rings_dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".ring") || self.rings.contains_key(&name) {
                continue;
            }
            match self.open(&e.path(), &name) {
                Ok(r) => {
                    self.rings.insert(name, r);
                }
                Err(why) => self.notes.push(format!("ring {name}: {why}; not recorded")),
            }
        }
    }

    fn open(&self, path: &Path, name: &str) -> Result<RingStream, String> {
        // Only the user's own regular files, never through a symlink: the recorder writes
        // into what it maps.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| e.to_string())?;
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() || meta.uid() != crate::private::euid() {
            return Err(format!(
                "not a regular file of uid {}",
                crate::private::euid()
            ));
        }
        // SAFETY: the ring is shared with the target by design; every value read from it is
        // validated by `Consumer` before use, and only atomics are written.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| e.to_string())?;
        let info = Consumer::new(&mut map[..])
            .map_err(|e| e.to_string())?
            .info();
        let stem = name.trim_end_matches(".ring");
        let (stream_path, rel) = self.run.stream_path(stem);
        let header = Header {
            kind: StreamKind::Thread,
            clock: self.clock,
            clock_hz: self.clock_hz,
            pid: info.pid,
            tid: info.tid,
            rank: -1,
            base_time: info.start,
        };
        let out =
            File::create(&stream_path).map_err(|e| format!("{}: {e}", stream_path.display()))?;
        let writer = StreamWriter::new(out, &header, trace::DEFAULT_CHUNK_EVENTS)
            .map_err(|e| format!("{}: {e}", stream_path.display()))?;
        Ok(RingStream {
            map,
            writer,
            file: rel,
            pid: info.pid,
            tid: info.tid,
            sites: Vec::new(),
            objects: Vec::new(),
            dropped_seen: 0,
            closed: false,
            broken: false,
        })
    }

    /// Moves everything the probes wrote since the last call into the streams. Returns the
    /// number of records moved.
    pub fn drain(&mut self) -> u64 {
        let mut moved = 0;
        for (name, r) in self.rings.iter_mut() {
            if r.closed || r.broken {
                continue;
            }
            let Ok(mut c) = Consumer::new(&mut r.map[..]) else {
                r.broken = true;
                continue;
            };
            let closed = c.is_closed();
            let dropped = c.dropped();
            let writer = &mut r.writer;
            let (sites, objects) = (&mut r.sites, &mut r.objects);
            match c.drain(|rec| translate(rec, writer, sites, objects)) {
                Ok(n) => moved += n,
                Err(e) => {
                    self.notes
                        .push(format!("ring {name}: {e}; the rest of this thread is lost"));
                    r.broken = true;
                }
            }
            if dropped > r.dropped_seen {
                r.writer.count_dropped(dropped - r.dropped_seen);
                r.dropped_seen = dropped;
            }
            r.closed = closed;
        }
        moved
    }

    /// Drains one last time, closes every stream and returns their entries for meta.json. Ring
    /// files are removed (their data now lives in the streams); `.maps` copies are kept.
    pub fn finish(mut self, end_time: u64) -> (Vec<StreamEntry>, Vec<String>) {
        self.discover();
        self.drain();
        let mut entries = Vec::new();
        for (name, mut r) in std::mem::take(&mut self.rings) {
            let thread_name = Consumer::new(&mut r.map[..])
                .map(|c| c.name())
                .unwrap_or_default();
            let (events, dropped) = match r.writer.finish(end_time) {
                Ok(s) => (s.events, s.dropped),
                Err(e) => {
                    self.notes.push(format!("stream {}: {e}", r.file));
                    (e.summary.events, e.summary.dropped)
                }
            };
            entries.push(StreamEntry {
                file: r.file,
                kind: StreamKind::Thread,
                pid: r.pid,
                tid: r.tid,
                rank: None,
                events,
                dropped,
                name: thread_name,
                role: Some(trace::StreamRole::Lock),
            });
            drop(r.map);
            let _ = std::fs::remove_file(self.rings_dir.join(&name));
        }
        (entries, self.notes)
    }
}

/// Turns one ring record into a stream record (or a table entry).
fn translate(
    rec: Record,
    w: &mut StreamWriter<File>,
    sites: &mut Vec<u16>,
    objects: &mut Vec<u32>,
) {
    match rec.kind {
        EventKind::Unknown(ring::DEF_SITE) => {
            let id = usize::from(rec.site);
            if id < usize::from(NO_SITE) {
                if sites.len() <= id {
                    sites.resize(id + 1, NO_SITE);
                }
                sites[id] = w.intern_site(rec.ts);
            }
        }
        EventKind::Unknown(ring::DEF_OBJECT) => {
            let id = rec.obj as usize;
            // Ids are dense from 0; a bound keeps a scribbled id from allocating gigabytes.
            if id <= objects.len() + 1_000_000 {
                if let Some(kind) = ObjectKind::from_u8(rec.aux) {
                    if objects.len() <= id {
                        objects.resize(id + 1, NO_OBJECT);
                    }
                    objects[id] = w.intern_object(rec.ts, kind);
                }
            }
        }
        kind => {
            let site = sites.get(usize::from(rec.site)).copied().unwrap_or(NO_SITE);
            let obj = if kind.refers_to_object() {
                objects.get(rec.obj as usize).copied().unwrap_or(NO_OBJECT)
            } else {
                rec.obj
            };
            w.push(&Record { site, obj, ..rec });
        }
    }
}

/// The processes the probe announced itself in, from the marks it leaves in the rings
/// directory (see the probe's `announce`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Announced {
    /// Pids of process images the probe was loaded in (`<pid>-<instance>.probe`).
    pub pids: BTreeSet<u32>,
    /// Forked children, with their name at the fork (`<pid>-<instance>.fork`): the probe was
    /// in them then, and still is unless they exec'd a program it cannot enter.
    pub forked: BTreeMap<u32, String>,
    /// More processes announced themselves than these hold ([`MAX_ANNOUNCED`]).
    pub truncated: bool,
}

/// Pids kept in [`Announced`]: a bound on the recorder's memory whatever the program starts.
pub const MAX_ANNOUNCED: usize = 1 << 20;

/// The probe's announcements in `rings_dir`'s `marks/` (read once the program has ended).
pub fn announced(rings_dir: &Path) -> Announced {
    let mut found = Announced::default();
    let Ok(entries) = std::fs::read_dir(rings_dir.join(ring::MARKS_DIR)) else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let (stem, fork) = match (name.strip_suffix(".probe"), name.strip_suffix(".fork")) {
            (Some(stem), _) => (stem, false),
            (_, Some(stem)) => (stem, true),
            _ => continue,
        };
        let Some(pid) = stem
            .split_once('-')
            .and_then(|(pid, _instance)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if found.pids.len() + found.forked.len() >= MAX_ANNOUNCED {
            found.truncated = true;
            break;
        }
        if fork {
            found.forked.insert(pid, fork_name(&e.path()));
        } else {
            found.pids.insert(pid);
        }
    }
    found
}

/// The name in a fork mark: at most 16 bytes of a regular file, never following a link.
fn fork_name(path: &Path) -> String {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return String::new();
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return String::new();
    }
    let mut name = Vec::with_capacity(16);
    let _ = f.take(16).read_to_end(&mut name);
    String::from_utf8_lossy(&name).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_are_counted_by_process_and_nothing_else_is() {
        let rings = tempfile::tempdir().unwrap();
        let dir = rings.path().join(ring::MARKS_DIR);
        std::fs::create_dir(&dir).unwrap();
        // A mark outside marks/ is not one.
        std::fs::write(rings.path().join("140-1.probe"), b"").unwrap();
        for name in [
            "123-456.probe",
            // The same process after an exec: another image, the same pid.
            "123-789.probe",
            "124-1.probe",
            // Not announcements: a ring, a maps copy, names that are not `<pid>-<instance>`.
            "125-125-1.ring",
            "126-1.maps",
            "x.probe",
            "bad-1.probe",
            "127.probe",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        std::fs::write(dir.join("130-456.fork"), b"server").unwrap();
        // A name is at most 16 bytes: no more is read.
        std::fs::write(dir.join("131-456.fork"), [b'x'; 4096]).unwrap();
        let found = announced(rings.path());
        assert_eq!(found.pids.into_iter().collect::<Vec<_>>(), [123, 124]);
        assert_eq!(
            found.forked.into_iter().collect::<Vec<_>>(),
            [(130, "server".to_string()), (131, "x".repeat(16))]
        );
        assert!(!found.truncated);
        assert_eq!(
            announced(&rings.path().join("missing")),
            Announced::default()
        );
    }
}
