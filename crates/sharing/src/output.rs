//! The results, written once when the process exits (or a forked child does): into
//! `$CONTEND_SHARING_DIR`,
//! - `sharing/PID.json`: a `trace::sharing::ProcessSharing` (through a temporary name, renamed
//!   into place, so a reader never sees half of it);
//! - `sharing/PID.hist`: `HISTORY_MAGIC`, then the history entries (little-endian u32) of every
//!   line with a history, one after another; each line's `HistoryRef.first` is the index of
//!   its first entry;
//! - `maps/sharing-PID.maps`: a copy of /proc/self/maps, to name code and globals.

use crate::access::Kind;
use crate::live::ALLOCATORS;
use crate::threads;
use crate::{hot, sys};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use trace::sharing::{
    AccessKind, AccessStat, Allocation, HistoryRef, HotLine, LineEnd, ProcessSharing, ThreadInfo,
    Totals, HISTORY_MAGIC, SHARING_VERSION,
};

static WRITTEN: AtomicBool = AtomicBool::new(false);

/// In a forked child: its own results are still to be written.
pub fn renew_in_child() {
    WRITTEN.store(false, Ordering::Relaxed);
}

/// What the process was started as, and by whom (set at start and in a forked child).
pub struct Process {
    pub pid: u32,
    pub parent_pid: Option<u32>,
    pub program: String,
    pub started_ns: u64,
}

fn kind(k: u8) -> AccessKind {
    match Kind::from_u8(k) {
        Kind::Read => AccessKind::Read,
        Kind::Write => AccessKind::Write,
        Kind::AtomicRead => AccessKind::AtomicRead,
        Kind::AtomicWrite => AccessKind::AtomicWrite,
    }
}

/// Writes the results (once per process).
pub fn write(process: &Process, cfg: &crate::config::Config, hot_after: u32) {
    let (dir, line_size) = (cfg.dir.as_path(), cfg.line_size);
    if WRITTEN.swap(true, Ordering::AcqRel) {
        return;
    }
    let _keep = sys::KeepErrno::new();
    let me = {
        // SAFETY: this thread's own block.
        let l = unsafe { &*threads::local() };
        (!l.rec.is_null()).then_some(l.index)
    };
    hot::stop(me);
    let now = sys::now_ns();
    let (mut sharing, history) = collect(process, line_size, hot_after, now);
    sharing.sample_every = cfg.sample_every;
    let pid = process.pid;
    let result = (|| -> std::io::Result<()> {
        let sdir = dir.join("sharing");
        std::fs::create_dir_all(&sdir)?;
        let mdir = dir.join(trace::layout::MAPS_DIR);
        std::fs::create_dir_all(&mdir)?;
        // The history first: a reader that sees the JSON finds its history complete.
        let hist = sdir.join(format!("{pid}.hist"));
        let tmp = sdir.join(format!("{pid}.hist.tmp"));
        {
            let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
            f.write_all(&HISTORY_MAGIC)?;
            for w in &history {
                f.write_all(&w.to_le_bytes())?;
            }
            f.flush()?;
        }
        std::fs::rename(&tmp, &hist)?;
        if let Ok(maps) = std::fs::read("/proc/self/maps") {
            // Created new and never through a symlink (a stale one of a reused pid is removed
            // first, itself, not what it points to).
            use std::os::unix::fs::OpenOptionsExt;
            let tmp = mdir.join(format!("sharing-{pid}.maps.tmp"));
            let _ = std::fs::remove_file(&tmp);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?
                .write_all(&maps)?;
            std::fs::rename(&tmp, mdir.join(format!("sharing-{pid}.maps")))?;
        }
        let json = serde_json::to_vec(&sharing).map_err(std::io::Error::other)?;
        let tmp = sdir.join(format!("{pid}.json.tmp"));
        std::fs::write(&tmp, json)?;
        std::fs::rename(&tmp, sdir.join(format!("{pid}.json")))?;
        Ok(())
    })();
    if let Err(e) = result {
        sys::say(&format!(
            "cannot write the sharing results of process {pid} into {}: {e}",
            dir.display()
        ));
    }
    let dropped: u64 = (0..threads::count())
        .map(|i| {
            // SAFETY: every thread is stopped from changing its table (hot::stop).
            unsafe { (*threads::record(i).stats.get()).dropped }
        })
        .sum();
    if dropped > 0 {
        sys::say(&format!(
            "{dropped} accesses to hot lines of process {pid} are counted but not itemised \
             (a thread's statistics table was full)"
        ));
    }
}

/// The results and the history words, from every thread's record and every hot slot.
fn collect(
    process: &Process,
    line_size: u32,
    hot_after: u32,
    now: u64,
) -> (ProcessSharing, Vec<u32>) {
    let mut totals = Totals::default();
    let mut threads_info = Vec::new();
    let used = hot::used();
    let mut accesses: Vec<Vec<AccessStat>> = vec![Vec::new(); used];
    for i in 0..threads::count() {
        let Some((tid, created_by, start_routine, first_ns)) = threads::info(i) else {
            continue;
        };
        threads_info.push(ThreadInfo {
            index: i,
            tid,
            created_by,
            start_routine,
            first_ns,
        });
        let r = threads::record(i);
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        totals.reads += get(&r.reads);
        totals.writes += get(&r.writes);
        totals.atomics += get(&r.atomics);
        totals.transfers += get(&r.transfers);
        totals.history_dropped += get(&r.history_dropped);
        totals.allocations += get(&r.allocations);
        totals.frees += get(&r.frees);
        // SAFETY: every thread is stopped from changing its table (hot::stop).
        let table = unsafe { &*r.stats.get() };
        for e in table.iter() {
            let slot = e.slot as usize - 1;
            if slot < used {
                let mut cpus: Vec<u32> = e.cpus().iter().map(|&c| u32::from(c)).collect();
                cpus.sort_unstable();
                accesses[slot].push(AccessStat {
                    offset: e.offset,
                    size: e.size,
                    kind: kind(e.kind),
                    thread: i,
                    pc: e.pc,
                    count: e.count,
                    transfers: e.transfers,
                    cpus,
                    pmu: None,
                });
            }
        }
    }
    let mut history = Vec::new();
    let mut lines = Vec::with_capacity(used);
    for (i, mut acc) in accesses.into_iter().enumerate() {
        let s = hot::slot(i);
        acc.sort_by(|a, b| {
            (a.offset, a.size, a.kind, a.thread, a.pc)
                .cmp(&(b.offset, b.size, b.kind, b.thread, b.pc))
        });
        let freed = s.end.load(Ordering::Acquire) == hot::FREED;
        let window = u64::from(s.window.load(Ordering::Relaxed));
        let hist = (window > 0).then(|| {
            let entries = s.next.load(Ordering::Relaxed).min(window);
            let first = s.first.load(Ordering::Relaxed);
            let at = history.len() as u64;
            history.extend((0..entries).map(|n| hot::history_word(first + n)));
            let counted: u64 = acc.iter().map(|a| a.count).sum();
            HistoryRef {
                first: at,
                entries: entries as u32,
                beyond: counted.saturating_sub(entries),
            }
        });
        totals.history_beyond_window += hist.as_ref().map_or(0, |h| h.beyond);
        let objects = hot::objects(i)
            .into_iter()
            .map(|o| Allocation {
                address: o.block.address,
                size: o.block.size,
                site: o.block.site,
                allocator: ALLOCATORS
                    .get(usize::from(o.block.allocator))
                    .copied()
                    .unwrap_or("malloc")
                    .to_string(),
                thread: o.block.thread,
                allocated_ns: o.block.allocated_ns,
                freed_ns: (o.freed_ns != 0).then_some(o.freed_ns),
            })
            .collect();
        lines.push(HotLine {
            id: i as u32 + 1,
            address: s.line.load(Ordering::Relaxed),
            hot_since_ns: s.hot_since.load(Ordering::Relaxed),
            ended_ns: if freed {
                s.ended_ns.load(Ordering::Relaxed)
            } else {
                now
            },
            end: if freed { LineEnd::Freed } else { LineEnd::Exit },
            transfers_before_hot: s.transfers_before_hot.load(Ordering::Relaxed),
            objects,
            accesses: acc,
            history: hist,
        });
    }
    totals.hot_lines = used as u64;
    totals.hot_lines_dropped = hot::dropped();
    let sharing = ProcessSharing {
        version: SHARING_VERSION,
        pid: process.pid,
        parent_pid: process.parent_pid,
        program: process.program.clone(),
        line_size,
        hot_after,
        sample_every: 1,
        started_ns: process.started_ns,
        ended_ns: now,
        threads: threads_info,
        totals,
        lines,
        pmu: None,
    };
    (sharing, history)
}
