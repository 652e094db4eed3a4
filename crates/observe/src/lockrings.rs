//! Drains the probe's shared-memory rings (`trace::ring`) into the run directory's event
//! streams: one stream per ring, i.e. per thread of each process image.
//!
//! The probe's in-band definitions (call sites, objects) become the stream's tables; its ids
//! are translated to the stream's. A ring that turns out corrupt (the target scribbled on it)
//! is dropped with a note rather than trusted.
//!
//! What the recorder holds stays bounded whatever the number of threads a program creates
//! over its life: a ring file is unlinked as soon as it is mapped (the mapping keeps it alive,
//! and a recorder killed then leaves nothing behind); a ring whose thread has ended is drained
//! to the end, its stream finished, the mapping dropped and its bytes given back to the run's
//! ring budget (`trace::ringbudget`, created here), from which new threads' rings are granted;
//! stream files are opened only to write a chunk (`crate::reopen`), so no descriptor is held
//! per thread.
//!
//! [`announced`] lists the processes the probe was loaded in (its `<pid>-<instance>.probe`
//! marks), whether or not they took a lock.

use crate::reopen::ReopeningFile;
use memmap2::MmapMut;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use trace::meta::StreamEntry;
use trace::ring::{self, Consumer};
use trace::ringbudget::{self, Budget, BUDGET_FILE, BUDGET_LEN};
use trace::{ClockSource, EventKind, Header, ObjectKind, Record, RunDir, StreamKind, StreamWriter};
use trace::{NO_OBJECT, NO_SITE};

/// One ring being drained into one stream.
struct RingStream {
    map: MmapMut,
    writer: StreamWriter<ReopeningFile>,
    file: String,
    pid: u32,
    tid: u32,
    /// Probe id -> stream id.
    sites: Vec<u16>,
    objects: Vec<u32>,
    dropped_seen: u64,
    /// The latest event time seen: the stream's end when its thread ends before the run.
    last_ts: u64,
    broken: bool,
}

/// Notes of one kind beyond this many are counted, not listed (a program of thousands of
/// threads must not bury the user in identical lines).
const MAX_NOTES: usize = 20;

pub struct RingDrainer {
    rings_dir: PathBuf,
    run: RunDir,
    clock: ClockSource,
    clock_hz: u64,
    rings: Vec<RingStream>,
    /// Streams of rings already finished (their threads ended).
    done: Vec<StreamEntry>,
    /// The recorder's mapping of the run's ring budget; `None` if it could not be made (the
    /// probes then give every ring the size asked for).
    budget: Option<MmapMut>,
    /// Problems worth telling the user, once each.
    pub notes: Vec<String>,
    notes_left_out: u64,
}

impl RingDrainer {
    /// A drainer for `rings_dir`, which must exist and be empty: the ring budget, and `marks/`
    /// for the probe's announcements ([`announced`]), are made in it here, before the program
    /// starts.
    pub fn new(run: &RunDir, rings_dir: &Path, clock: ClockSource, clock_hz: u64) -> RingDrainer {
        let _ = std::fs::create_dir(rings_dir.join(ring::MARKS_DIR));
        let mut d = RingDrainer {
            rings_dir: rings_dir.to_path_buf(),
            run: run.clone(),
            clock,
            clock_hz,
            rings: Vec::new(),
            done: Vec::new(),
            budget: None,
            notes: Vec::new(),
            notes_left_out: 0,
        };
        match create_budget(&rings_dir.join(BUDGET_FILE), budget_limit()) {
            Ok(map) => d.budget = Some(map),
            Err(e) => d.note(format!(
                "the ring budget could not be created in {}: {e}; every thread's ring takes \
                 the size asked for",
                rings_dir.display()
            )),
        }
        d
    }

    pub fn rings_dir(&self) -> &Path {
        &self.rings_dir
    }

    fn budget(&self) -> Option<Budget> {
        let map = self.budget.as_ref()?;
        // SAFETY: our own mapping of BUDGET_LEN bytes, page-aligned, alive as long as `self`.
        unsafe { Budget::new(map.as_ptr().cast_mut()) }
    }

    fn note(&mut self, note: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(note);
        } else {
            self.notes_left_out += 1;
        }
    }

    /// Maps rings that appeared since the last call, and unlinks their files.
    pub fn discover(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.rings_dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".ring") {
                continue;
            }
            let path = e.path();
            let opened = self.open(&path, &name);
            // Mapped (or refused): the name is no longer needed, and a recorder killed from
            // now on leaves nothing of this ring behind.
            let _ = std::fs::remove_file(&path);
            match opened {
                Ok(r) => self.rings.push(r),
                Err(why) => self.note(format!("ring {name}: {why}; not recorded")),
            }
        }
    }

    fn open(&mut self, path: &Path, name: &str) -> Result<RingStream, String> {
        // Only the user's own regular files, never through a symlink: the recorder writes
        // into what it maps.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
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
        drop(file);
        let info = Consumer::new(&mut map[..])
            .map_err(|e| e.to_string())?
            .info();
        let stem = name.trim_end_matches(".ring");
        let streams = self.run.path().join(trace::rundir::STREAMS_DIR);
        let created = ReopeningFile::create_unique(&streams, stem, trace::rundir::STREAM_EXT);
        let header = Header {
            kind: StreamKind::Thread,
            clock: self.clock,
            clock_hz: self.clock_hz,
            pid: info.pid,
            tid: info.tid,
            rank: -1,
            base_time: info.start,
        };
        let made = created.and_then(|(out, file_name)| {
            let writer = StreamWriter::new(out, &header, trace::DEFAULT_CHUNK_EVENTS)?;
            Ok((writer, file_name))
        });
        let (writer, file_name) = match made {
            Ok(m) => m,
            Err(e) => {
                // Never drained: its bytes go back to the budget now.
                if let Some(b) = self.budget() {
                    b.release(map.len() as u64);
                }
                return Err(format!("{}/{stem}: {e}", streams.display()));
            }
        };
        Ok(RingStream {
            map,
            writer,
            file: format!("{}/{file_name}", trace::rundir::STREAMS_DIR),
            pid: info.pid,
            tid: info.tid,
            sites: Vec::new(),
            objects: Vec::new(),
            dropped_seen: 0,
            last_ts: info.start,
            broken: false,
        })
    }

    /// Moves everything the probes wrote since the last call into the streams, and finishes
    /// the streams of rings whose threads have ended. Returns the number of records moved.
    pub fn drain(&mut self) -> u64 {
        let mut moved = 0;
        let mut i = 0;
        while i < self.rings.len() {
            let r = &mut self.rings[i];
            let (n, finished, problem) = drain_one(r);
            moved += n;
            if let Some(p) = problem {
                self.note(p);
            }
            if finished {
                let r = self.rings.swap_remove(i);
                let end = r.last_ts;
                self.close(r, end);
            } else {
                i += 1;
            }
        }
        moved
    }

    /// Finishes a ring's stream, drops the ring and gives its bytes back to the budget.
    fn close(&mut self, mut r: RingStream, end_time: u64) {
        let thread_name = Consumer::new(&mut r.map[..])
            .map(|c| c.name())
            .unwrap_or_default();
        let (events, dropped) = match r.writer.finish(end_time) {
            Ok(s) => (s.events, s.dropped),
            Err(e) => {
                self.note(format!("stream {}: {e}", r.file));
                (e.summary.events, e.summary.dropped)
            }
        };
        self.done.push(StreamEntry {
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
        let bytes = r.map.len() as u64;
        drop(r.map);
        if let Some(b) = self.budget() {
            b.release(bytes);
        }
    }

    /// Drains one last time, closes every stream and returns their entries for meta.json (in
    /// file order), with the notes. Ring files were unlinked when mapped; `.maps` copies and
    /// the budget file are left to the caller.
    pub fn finish(mut self, end_time: u64) -> (Vec<StreamEntry>, Vec<String>) {
        self.discover();
        self.drain();
        for r in std::mem::take(&mut self.rings) {
            self.close(r, end_time);
        }
        let mut notes = std::mem::take(&mut self.notes);
        if self.notes_left_out > 0 {
            notes.push(format!(
                "{} more problem(s) with rings, like those above",
                self.notes_left_out
            ));
        }
        if let Some(b) = self.budget() {
            if b.refused() > 0 {
                notes.push(format!(
                    "{} thread(s) not recorded: the ring budget ({} MiB for the rings of all \
                     threads alive at once) was full",
                    b.refused(),
                    b.limit() >> 20
                ));
            }
            if b.failed() > 0 {
                notes.push(format!(
                    "{} thread(s) not recorded: their ring could not be created (out of \
                     memory, descriptors or space in the rings directory?)",
                    b.failed()
                ));
            }
        }
        let mut entries = std::mem::take(&mut self.done);
        entries.sort_by(|a, b| a.file.cmp(&b.file));
        (entries, notes)
    }
}

/// The ring budget: `CONTEND_RING_BUDGET_MIB` (1 to 65536; for tests and tuning), else
/// [`ringbudget::DEFAULT_LIMIT`].
fn budget_limit() -> u64 {
    std::env::var("CONTEND_RING_BUDGET_MIB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|mib| mib.clamp(1, 65536) << 20)
        .unwrap_or(ringbudget::DEFAULT_LIMIT)
}

/// Creates the ring budget's control file (never an existing one) and maps it.
fn create_budget(path: &Path, limit: u64) -> std::io::Result<MmapMut> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_len(BUDGET_LEN as u64)?;
    // SAFETY: a file we just created; the probes only change its counters, atomically.
    let mut map = unsafe { MmapMut::map_mut(&file) }?;
    // SAFETY: a fresh zero-filled mapping of BUDGET_LEN bytes no probe reads yet.
    unsafe { ringbudget::init(map.as_mut_ptr(), limit) };
    Ok(map)
}

/// Drains one ring: (records moved, whether its stream is complete — thread ended and
/// everything drained, or the ring is corrupt —, a problem to tell).
fn drain_one(r: &mut RingStream) -> (u64, bool, Option<String>) {
    let Ok(mut c) = Consumer::new(&mut r.map[..]) else {
        r.broken = true;
        return (0, true, None);
    };
    // Read before draining: a ring closed then holds nothing more after this drain.
    let closed = c.is_closed();
    let dropped = c.dropped();
    let writer = &mut r.writer;
    let (sites, objects, last_ts) = (&mut r.sites, &mut r.objects, &mut r.last_ts);
    let (moved, problem) = match c.drain(|rec| translate(rec, writer, sites, objects, last_ts)) {
        Ok(n) => (n, None),
        Err(e) => {
            r.broken = true;
            (
                0,
                Some(format!(
                    "ring of thread {} (pid {}): {e}; the rest of this thread is lost",
                    r.tid, r.pid
                )),
            )
        }
    };
    if dropped > r.dropped_seen {
        r.writer.count_dropped(dropped - r.dropped_seen);
        r.dropped_seen = dropped;
    }
    (moved, closed || r.broken, problem)
}

/// Turns one ring record into a stream record (or a table entry).
fn translate(
    rec: Record,
    w: &mut StreamWriter<ReopeningFile>,
    sites: &mut Vec<u16>,
    objects: &mut Vec<u32>,
    last_ts: &mut u64,
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
            *last_ts = (*last_ts).max(rec.ts);
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
