//! The service-time sampler of `contend record`: every interval, each thread of the target
//! (and of the processes it starts) is read from `/proc/PID/task/TID/{stat,status,schedstat}`
//! and what changed since the previous sample goes into that thread's stream
//! (`streams/sched-TID.cst`, [`trace::sched::ThreadSample`]); the system's runnable and blocked
//! task counts go into `streams/system.cst`. It runs on its own thread so that its cadence
//! does not depend on how busy the lock-ring drainer is.
//!
//! This is the thesis's General Metrics Gathering service-time trace (§3.2.1.1), with
//! schedstat's nanoseconds instead of `stat`'s 10 ms ticks.

use crate::clock::{monotonic_ns, thread_cpu_ns};
use crate::process::ProcReader;
use crate::reopen::ReopeningFile;
use crate::schedtrace::{PrevState, SchedEvent, SchedTraceOptions, SchedTracer};
use crate::task::SchedStat;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use trace::format::{EventKind, Header, Record, StreamKind, NO_SITE};
use trace::meta::StreamEntry;
use trace::sched::{RunnableSample, ThreadSample};
use trace::sched::{State as SchedState, StateChange};
use trace::{ClockSource, StreamWriter};

/// What the sampler needs to know.
#[derive(Debug, Clone)]
pub struct SamplerOptions {
    /// Time between samples.
    pub interval: Duration,
    /// The target was already running: the first look at each thread is a baseline, not a
    /// sample (its CPU time so far was not spent while recording).
    pub attached: bool,
    /// Follow the processes the target starts (their threads get streams too).
    pub follow_children: bool,
    /// Also record exact state changes from the sched tracepoints, where permitted.
    pub sched_trace: bool,
}

/// What the sched-tracepoint reader saw, when it ran.
#[derive(Debug, Default, Clone)]
pub struct SchedTraceStats {
    /// State changes written into the target's thread streams.
    pub state_changes: u64,
    /// Records the kernel lost (rings full) and records that could not be parsed.
    pub lost: u64,
    pub unparsed: u64,
    /// Breaks in a CPU's chain of switches: at least one switch was not delivered.
    pub switch_gaps: u64,
    /// CPUs whose switches out of idle are not delivered by this kernel.
    pub idle_exits_untraced: Vec<u32>,
    /// State changes of threads that ended before the sampler first saw them (not kept).
    pub unsampled_threads: u64,
    /// How `prev_state` is decoded on this kernel, and other notes of the reader.
    pub notes: Vec<String>,
}

/// What the sampler recorded, when stopped.
#[derive(Debug, Default)]
pub struct SamplerOutcome {
    pub streams: Vec<StreamEntry>,
    pub notes: Vec<String>,
    /// Sampling rounds taken.
    pub rounds: u64,
    /// CPU time the sampler's own thread used, ns (its cost to the machine).
    pub own_cpu_ns: u64,
    /// Wall time it ran, ns.
    pub wall_ns: u64,
    /// Rounds that came more than one interval late (the machine was too busy to sample).
    pub late_rounds: u64,
    /// The sched-tracepoint reader's figures, when it ran.
    pub sched: Option<SchedTraceStats>,
    /// Why the sched tracepoints could not be used, when asked for.
    pub sched_unavailable: Option<(String, String)>,
    /// CPU time the hypervisor took from this machine's CPUs while sampling, ns, all CPUs
    /// (schedstat counts it neither as on-CPU time nor as run-queue wait).
    pub steal_ns: Option<u64>,
    /// CLOCK_MONOTONIC ns of the last round: when the sampler last saw the program.
    pub last_round_ns: u64,
}

/// A running sampler; [`Sampler::stop`] ends it and returns what it wrote.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<SamplerOutcome>,
}

impl Sampler {
    /// Starts sampling `pid` (and, if asked, its descendants) into `run_dir`'s streams.
    pub fn start(run_dir: &Path, pid: u32, options: SamplerOptions) -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let streams_dir = run_dir.join(trace::rundir::STREAMS_DIR);
        raise_fd_limit();
        let (tracer, unavailable) = if options.sched_trace {
            match SchedTracer::open_with(SchedTraceOptions {
                ring_pages: 256,
                // The waker is the thread that did the wake-up (sched_waking), not whatever
                // ran on the CPU the wake-up was queued to.
                waker_from_waking: true,
            }) {
                Ok(t) => (Some(t), None),
                Err(e) => (None, Some((e.what, e.why))),
            }
        } else {
            (None, None)
        };
        let handle = std::thread::Builder::new()
            .name("contend-sampler".into())
            .spawn(move || {
                let mut s = State::new(streams_dir, pid, options);
                s.tracer = tracer;
                s.sched_unavailable = unavailable;
                s.run(&flag);
                s.finish()
            })?;
        Ok(Sampler { stop, handle })
    }

    /// Whether the sampler stopped by itself (every sampled process is gone).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Takes a last sample, closes the streams and returns what was recorded.
    pub fn stop(self) -> SamplerOutcome {
        self.stop.store(true, Ordering::Release);
        self.handle.join().unwrap_or_else(|_| SamplerOutcome {
            notes: vec!["the sampler thread failed; its streams may be incomplete".into()],
            ..Default::default()
        })
    }
}

/// Cheap insurance (the recorder's descriptors are bounded without it: a few per sampler, none
/// per thread): the soft limit on open files goes up to the hard limit (contend's own; a
/// program already started keeps its limits).
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit out-parameter; setrlimit only raises the soft limit to the hard.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// One thread at its previous look: cumulative counters, and the details read less often.
#[derive(Debug, Clone, Default)]
struct Last {
    sched: Option<SchedStat>,
    voluntary: u64,
    involuntary: u64,
    cpu: Option<u32>,
    state: u8,
    name: String,
}

struct ThreadStream {
    pid: u32,
    writer: StreamWriter<ReopeningFile>,
    file: String,
    name: String,
    last: Last,
    files: TaskFiles,
}

fn delta(a: Option<SchedStat>, b: Option<SchedStat>, f: fn(&SchedStat) -> u64) -> u64 {
    a.map_or(0, |a| f(&a))
        .saturating_sub(b.map_or(0, |b| f(&b)))
}

/// At most this many threads keep their `schedstat` open between rounds; the others' is
/// opened, read and closed each round. The recorder's descriptors stay bounded whatever the
/// number of threads (a round over thousands of threads may then come late: counted).
const MAX_OPEN_SCHEDSTAT: usize = 16;

/// A thread's `/proc` files: `schedstat`, read every round, kept open for the first
/// [`MAX_OPEN_SCHEDSTAT`] threads; `stat` and `status`, read every fifth round, opened when
/// needed.
struct TaskFiles {
    dir: String,
    schedstat: Option<File>,
}

/// One read of a thread's files.
struct Now {
    sched: Option<SchedStat>,
    voluntary: u64,
    involuntary: u64,
    cpu: Option<u32>,
    state: u8,
    name: String,
}

impl Now {
    fn counters(&self) -> Last {
        Last {
            sched: self.sched,
            voluntary: self.voluntary,
            involuntary: self.involuntary,
            cpu: self.cpu,
            state: self.state,
            name: self.name.clone(),
        }
    }
}

impl TaskFiles {
    /// The thread's files; `keep_open`: its `schedstat` descriptor is kept between rounds.
    fn open(pid: u32, tid: u32, keep_open: bool) -> std::io::Result<TaskFiles> {
        let dir = format!("/proc/{pid}/task/{tid}");
        // Opened even when not kept: a thread already gone is found out here.
        let schedstat = File::open(format!("{dir}/schedstat"))?;
        Ok(TaskFiles {
            schedstat: keep_open.then_some(schedstat),
            dir,
        })
    }

    /// `stat` or `status` of the thread, opened, read and closed.
    fn read_once<'b>(&self, file: &str, buf: &'b mut Vec<u8>) -> Option<Cow<'b, str>> {
        let f = File::open(format!("{}/{file}", self.dir)).ok()?;
        Self::pread(&f, buf)
    }

    /// The file's whole text, read from offset 0; `None` once the thread is gone (ESRCH, or
    /// an empty read).
    fn pread<'b>(f: &File, buf: &'b mut Vec<u8>) -> Option<Cow<'b, str>> {
        use std::os::unix::fs::FileExt;
        buf.clear();
        buf.resize(4096, 0);
        let mut len = 0;
        loop {
            match f.read_at(&mut buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    if len == buf.len() {
                        buf.resize(buf.len() * 2, 0);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        buf.truncate(len);
        if len == 0 {
            return None;
        }
        // A thread's name may hold any bytes but NUL and `/`.
        Some(String::from_utf8_lossy(buf))
    }

    /// Reads `schedstat`, and `stat` and `status` when asked (else the state, CPU, name and
    /// switch counts are carried over from `last`).
    fn read(&self, buf: &mut Vec<u8>, with_status: bool, last: &Last) -> Option<Now> {
        let text = match &self.schedstat {
            Some(f) => Self::pread(f, buf)?,
            None => self.read_once("schedstat", buf)?,
        };
        let sched = crate::task::parse_schedstat(&text).ok().flatten();
        if !with_status {
            return Some(Now {
                sched: sched.or(last.sched),
                voluntary: last.voluntary,
                involuntary: last.involuntary,
                cpu: last.cpu,
                state: last.state,
                name: last.name.clone(),
            });
        }
        let stat = crate::task::parse_stat(&self.read_once("stat", buf)?).ok()?;
        let (voluntary, involuntary) = if with_status {
            let st = crate::task::parse_status(&self.read_once("status", buf)?);
            (
                st.voluntary_switches.unwrap_or(last.voluntary),
                st.nonvoluntary_switches.unwrap_or(last.involuntary),
            )
        } else {
            (last.voluntary, last.involuntary)
        };
        Some(Now {
            sched: sched.or(last.sched),
            voluntary,
            involuntary,
            cpu: stat.last_cpu,
            state: stat.state.letter() as u8,
            name: stat.name,
        })
    }
}

struct State {
    streams_dir: PathBuf,
    root: u32,
    options: SamplerOptions,
    reader: ProcReader,
    /// Processes being sampled (the target and, when followed, its descendants).
    processes: BTreeSet<u32>,
    live: BTreeMap<u32, ThreadStream>,
    done: Vec<StreamEntry>,
    system: Option<(StreamWriter<ReopeningFile>, String)>,
    notes: Vec<String>,
    rounds: u64,
    late: u64,
    first_round: bool,
    proc_stat: Option<File>,
    read_buf: Vec<u8>,
    wall_ns: u64,
    tracer: Option<SchedTracer>,
    sched_unavailable: Option<(String, String)>,
    /// `/proc/stat` steal ticks at the first round, and at the latest.
    steal: Option<u64>,
    steal_last: u64,
    /// Threads that could not be recorded for want of file descriptors.
    unrecorded: BTreeSet<u32>,
    /// Live threads whose `schedstat` is kept open (at most MAX_OPEN_SCHEDSTAT).
    open_schedstat: usize,
    /// When the last round was taken.
    last_round: u64,
    /// Threads of the target the tracer has seen (forked from a known thread) before the
    /// sampler first read them, with their state changes so far.
    pending: BTreeMap<u32, Vec<StateChange>>,
    events: Vec<SchedEvent>,
    sched: SchedTraceStats,
}

impl State {
    fn new(streams_dir: PathBuf, root: u32, options: SamplerOptions) -> State {
        let mut processes = BTreeSet::new();
        processes.insert(root);
        State {
            streams_dir,
            root,
            options,
            reader: ProcReader::new(),
            processes,
            live: BTreeMap::new(),
            done: Vec::new(),
            system: None,
            notes: Vec::new(),
            rounds: 0,
            late: 0,
            first_round: true,
            proc_stat: None,
            read_buf: Vec::with_capacity(4096),
            wall_ns: 0,
            tracer: None,
            sched_unavailable: None,
            steal: None,
            steal_last: 0,
            unrecorded: BTreeSet::new(),
            open_schedstat: 0,
            last_round: 0,
            pending: BTreeMap::new(),
            events: Vec::new(),
            sched: SchedTraceStats::default(),
        }
    }

    fn header(kind: StreamKind, pid: u32, tid: u32, base: u64) -> Header {
        Header {
            kind,
            clock: ClockSource::Monotonic,
            clock_hz: 1_000_000_000,
            pid,
            tid,
            rank: -1,
            base_time: base,
        }
    }

    fn open(
        &mut self,
        name: &str,
        header: &Header,
    ) -> Option<(StreamWriter<ReopeningFile>, String)> {
        // A tid the kernel hands out again (a program that creates threads by the tens of
        // thousands) gets a new file, `sched-TID.2.cst`, never the earlier thread's. The file
        // is opened only to write a chunk: no descriptor per thread.
        let ext = trace::rundir::STREAM_EXT;
        match ReopeningFile::create_unique(&self.streams_dir, name, ext) {
            Ok((f, file_name)) => {
                let rel = format!("{}/{file_name}", trace::rundir::STREAMS_DIR);
                match StreamWriter::new(f, header, 1024) {
                    Ok(w) => Some((w, rel)),
                    Err(e) => {
                        self.notes.push(format!("{rel}: {e}; not recorded"));
                        None
                    }
                }
            }
            Err(e) => {
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    self.unrecorded.insert(header.tid);
                } else {
                    self.notes.push(format!(
                        "{}/{name}.{ext}: {e}; not recorded",
                        self.streams_dir.display()
                    ));
                }
                None
            }
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        let start = monotonic_ns();
        let interval = self.options.interval.as_nanos() as u64;
        let mut next = start;
        loop {
            let stopping = stop.load(Ordering::Acquire);
            let ts = monotonic_ns();
            if ts > next + interval {
                self.late += 1;
            }
            let alive = self.round(ts);
            self.rounds += 1;
            if stopping || !alive {
                break;
            }
            next += interval;
            let now = monotonic_ns();
            if next <= now {
                // Late: sample again at once but do not try to catch up on missed rounds.
                next = now;
            } else {
                // Sleep in short steps so that a stop is noticed within a few ms.
                let mut left = next - now;
                while left > 0 && !stop.load(Ordering::Acquire) {
                    let step = left.min(5_000_000);
                    std::thread::sleep(Duration::from_nanos(step));
                    left = next.saturating_sub(monotonic_ns());
                }
            }
        }
        self.wall_ns = monotonic_ns() - start;
    }

    /// One sampling round at `ts`; false once every sampled process is gone.
    fn round(&mut self, ts: u64) -> bool {
        if self.options.follow_children {
            // Every round the processes' main threads (where most programs start theirs), every
            // fifth round all threads: a child is then counted from its first interval, not
            // with all it did before it was found lumped into one.
            self.find_children(!(self.first_round || self.rounds.is_multiple_of(5)));
        }
        let mut seen: BTreeSet<u32> = BTreeSet::new();
        let processes: Vec<u32> = self.processes.iter().copied().collect();
        for pid in processes {
            let tids = match self.reader.thread_ids(pid) {
                Ok(Some(t)) => t,
                _ => {
                    self.processes.remove(&pid);
                    continue;
                }
            };
            for tid in tids {
                if self.sample_thread(pid, tid, ts) {
                    seen.insert(tid);
                }
            }
        }
        self.trace_states();
        // Threads not seen this round have ended.
        let ended: Vec<u32> = self
            .live
            .keys()
            .filter(|t| !seen.contains(t))
            .copied()
            .collect();
        for tid in ended {
            if let Some(t) = self.live.remove(&tid) {
                self.close(tid, t, ts);
            }
        }
        self.sample_system(ts);
        self.first_round = false;
        self.last_round = ts;
        // About once a second, what was sampled goes to disk: a recorder killed with SIGKILL
        // leaves its streams readable up to then.
        if self.rounds % 100 == 99 {
            for t in self.live.values_mut() {
                let _ = t.writer.flush();
            }
            if let Some((w, _)) = self.system.as_mut() {
                let _ = w.flush();
            }
        }
        !self.processes.is_empty()
    }

    /// Adds the descendants of the sampled processes (from the threads' `children` files;
    /// only the main thread's when `main_only`).
    fn find_children(&mut self, main_only: bool) {
        let mut queue: Vec<u32> = self.processes.iter().copied().collect();
        while let Some(pid) = queue.pop() {
            let tids = if main_only {
                vec![pid]
            } else {
                match self.reader.thread_ids(pid) {
                    Ok(Some(tids)) => tids,
                    _ => continue,
                }
            };
            for tid in tids {
                let path = format!("/proc/{pid}/task/{tid}/children");
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                for child in text.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
                    if self.processes.insert(child) {
                        queue.push(child);
                    }
                }
            }
        }
    }

    /// Samples one thread; false when it has gone. Its `schedstat` stays open between rounds
    /// and is re-read with `pread` (one system call instead of three);
    /// `schedstat` every round, `stat` and `status` (state, CPU, name, switch counts) every
    /// fifth: at 10 ms, a round costs about 2 µs per thread.
    fn sample_thread(&mut self, pid: u32, tid: u32, ts: u64) -> bool {
        if !self.live.contains_key(&tid) {
            return self.start_thread(pid, tid, ts);
        }
        let with_status = self.rounds.is_multiple_of(5);
        let buf = &mut self.read_buf;
        let Some(t) = self.live.get_mut(&tid) else {
            return false;
        };
        let Some(now) = t.files.read(buf, with_status, &t.last) else {
            return false;
        };
        let sample = ThreadSample {
            ts,
            on_cpu_ns: delta(now.sched, t.last.sched, |s| s.on_cpu_ns),
            runq_wait_ns: delta(now.sched, t.last.sched, |s| s.runq_wait_ns),
            voluntary_switches: now.voluntary.saturating_sub(t.last.voluntary) as u32,
            involuntary_switches: now.involuntary.saturating_sub(t.last.involuntary) as u32,
            last_cpu: now.cpu,
            state: now.state,
        };
        for r in sample.encode() {
            t.writer.push(&r);
        }
        t.last = now.counters();
        if t.name != now.name {
            t.name = now.name;
        }
        true
    }

    /// A thread seen for the first time: its stream, its files, and its first sample (or, for
    /// a thread already running when an attached recording starts, a baseline).
    fn start_thread(&mut self, pid: u32, tid: u32, ts: u64) -> bool {
        let keep_open = self.open_schedstat < MAX_OPEN_SCHEDSTAT;
        let files = match TaskFiles::open(pid, tid, keep_open) {
            Ok(f) => f,
            Err(e)
                if e.raw_os_error() == Some(libc::EMFILE)
                    || e.raw_os_error() == Some(libc::ENFILE) =>
            {
                // Counted and said once at the end, not once per thread per round.
                self.unrecorded.insert(tid);
                return true;
            }
            Err(_) => return false,
        };
        let Some(now) = files.read(&mut self.read_buf, true, &Last::default()) else {
            return false;
        };
        let header = Self::header(StreamKind::Thread, pid, tid, ts);
        let Some((mut writer, file)) = self.open(&trace::layout::sampler_stream(tid), &header)
        else {
            return true;
        };
        // A thread already there when an attached recording starts is a baseline (aux 1);
        // one that appears later was born while recording, and counts from zero.
        let baseline = self.options.attached && self.first_round;
        writer.push(&Record {
            ts,
            kind: EventKind::ThreadStart,
            aux: u8::from(baseline),
            site: NO_SITE,
            obj: 0,
        });
        if !baseline {
            let sample = ThreadSample {
                ts,
                on_cpu_ns: delta(now.sched, None, |s| s.on_cpu_ns),
                runq_wait_ns: delta(now.sched, None, |s| s.runq_wait_ns),
                voluntary_switches: now.voluntary as u32,
                involuntary_switches: now.involuntary as u32,
                last_cpu: now.cpu,
                state: now.state,
            };
            for r in sample.encode() {
                writer.push(&r);
            }
        }
        if let Some(changes) = self.pending.remove(&tid) {
            for c in changes {
                writer.push(&c.encode());
                self.sched.state_changes += 1;
            }
        }
        if files.schedstat.is_some() {
            self.open_schedstat += 1;
        }
        self.live.insert(
            tid,
            ThreadStream {
                pid,
                writer,
                file,
                name: now.name.clone(),
                last: now.counters(),
                files,
            },
        );
        true
    }

    /// Moves the tracer's events for the target's threads into their streams as state
    /// changes (threads not sampled yet keep theirs pending until they are).
    fn trace_states(&mut self) {
        let Some(tracer) = self.tracer.as_mut() else {
            return;
        };
        self.events.clear();
        tracer.drain(&mut self.events);
        // Each CPU's events come in order; across CPUs they are merged here.
        self.events.sort_by_key(|e| e.ts_ns());
        let events = std::mem::take(&mut self.events);
        for e in &events {
            let mut change = |tid: u32, c: StateChange| {
                if let Some(t) = self.live.get_mut(&tid) {
                    t.writer.push(&c.encode());
                    self.sched.state_changes += 1;
                } else if let Some(p) = self.pending.get_mut(&tid) {
                    p.push(c);
                }
            };
            match *e {
                SchedEvent::Switch {
                    ts_ns,
                    cpu,
                    prev_tid,
                    prev_state,
                    next_tid,
                } => {
                    let state = match prev_state {
                        PrevState::Runnable => SchedState::Runnable,
                        PrevState::Sleeping | PrevState::Other(_) => SchedState::Sleeping,
                        PrevState::DiskSleep => SchedState::DiskSleep,
                        PrevState::Stopped => SchedState::Stopped,
                        PrevState::Dead => SchedState::Dead,
                    };
                    change(
                        prev_tid,
                        StateChange {
                            ts: ts_ns,
                            state,
                            cpu: None,
                            waker: 0,
                        },
                    );
                    change(
                        next_tid,
                        StateChange {
                            ts: ts_ns,
                            state: SchedState::Running,
                            cpu: Some(cpu),
                            waker: 0,
                        },
                    );
                }
                SchedEvent::Wakeup {
                    ts_ns,
                    tid,
                    waker_tid,
                    ..
                } => change(
                    tid,
                    StateChange {
                        ts: ts_ns,
                        state: SchedState::Runnable,
                        cpu: None,
                        waker: waker_tid,
                    },
                ),
                SchedEvent::Exit { ts_ns, tid } => change(
                    tid,
                    StateChange {
                        ts: ts_ns,
                        state: SchedState::Dead,
                        cpu: None,
                        waker: 0,
                    },
                ),
                SchedEvent::Fork {
                    parent_tid,
                    child_tid,
                    ..
                } => {
                    if (self.live.contains_key(&parent_tid)
                        || self.pending.contains_key(&parent_tid))
                        && !self.live.contains_key(&child_tid)
                    {
                        self.pending.entry(child_tid).or_default();
                        // A new process (not a thread) is sampled from the next round on.
                        if self.options.follow_children && is_process(child_tid) {
                            self.processes.insert(child_tid);
                        }
                    }
                }
            }
        }
        self.events = events;
    }

    fn close(&mut self, tid: u32, mut t: ThreadStream, ts: u64) {
        if t.files.schedstat.take().is_some() {
            self.open_schedstat -= 1;
        }
        t.writer.push(&Record {
            ts,
            kind: EventKind::ThreadEnd,
            aux: 0,
            site: NO_SITE,
            obj: 0,
        });
        let (events, dropped) = match t.writer.finish(ts) {
            Ok(s) => (s.events, s.dropped),
            Err(e) => {
                self.notes.push(format!("{}: {}", t.file, e.error));
                (e.summary.events, e.summary.dropped)
            }
        };
        self.done.push(StreamEntry {
            file: t.file,
            kind: StreamKind::Thread,
            pid: t.pid,
            tid,
            rank: None,
            events,
            dropped,
            name: t.name,
            role: Some(trace::StreamRole::Sampler),
        });
    }

    /// `procs_running` and `procs_blocked` from `/proc/stat`.
    fn sample_system(&mut self, ts: u64) {
        if self.proc_stat.is_none() {
            self.proc_stat = File::open("/proc/stat").ok();
        }
        let Some(text) = self
            .proc_stat
            .as_ref()
            .and_then(|f| TaskFiles::pread(f, &mut self.read_buf))
        else {
            return;
        };
        let text: &str = &text;
        if let Some(steal) = parse_proc_stat_steal(text) {
            self.steal.get_or_insert(steal);
            self.steal_last = steal;
        }
        let Some((runnable, blocked)) = parse_proc_stat_load(text) else {
            return;
        };
        if self.system.is_none() {
            let header = Self::header(StreamKind::System, self.root, 0, ts);
            self.system = self.open(trace::layout::SYSTEM_STREAM, &header);
        }
        if let Some((w, _)) = self.system.as_mut() {
            w.push(
                &RunnableSample {
                    ts,
                    runnable,
                    blocked,
                }
                .encode(),
            );
        }
    }

    fn finish(mut self) -> SamplerOutcome {
        // Lost counts reach the rings only after a drain makes room: drain once more.
        self.trace_states();
        let end = monotonic_ns();
        let live: Vec<(u32, ThreadStream)> = std::mem::take(&mut self.live).into_iter().collect();
        for (tid, t) in live {
            self.close(tid, t, end);
        }
        if let Some((w, file)) = self.system.take() {
            let (events, dropped) = match w.finish(end) {
                Ok(s) => (s.events, s.dropped),
                Err(e) => (e.summary.events, e.summary.dropped),
            };
            self.done.push(StreamEntry {
                file,
                kind: StreamKind::System,
                pid: self.root,
                tid: 0,
                rank: None,
                events,
                dropped,
                name: String::new(),
                role: Some(trace::StreamRole::System),
            });
        }
        self.done.sort_by(|a, b| a.file.cmp(&b.file));
        let sched = self.tracer.take().map(|t| {
            let mut stats = std::mem::take(&mut self.sched);
            stats.lost = t.lost();
            stats.unparsed = t.unparsed();
            stats.switch_gaps = t.switch_gaps();
            stats.idle_exits_untraced = t.idle_exits_untraced();
            stats.unsampled_threads =
                self.pending.values().filter(|p| !p.is_empty()).count() as u64;
            stats.notes = std::iter::once(t.state_decoding().to_string())
                .chain(t.notes().iter().cloned())
                .collect();
            stats
        });
        let tick_ns = 1_000_000_000 / crate::process::clock_ticks_per_second().max(1);
        if !self.unrecorded.is_empty() {
            self.notes.push(format!(
                "{} thread(s) not sampled: out of file descriptors (raise `ulimit -n`)",
                self.unrecorded.len()
            ));
        }
        SamplerOutcome {
            last_round_ns: self.last_round,
            steal_ns: self
                .steal
                .map(|first| (self.steal_last - first.min(self.steal_last)) * tick_ns),
            sched,
            sched_unavailable: self.sched_unavailable.take(),
            streams: self.done,
            notes: self.notes,
            rounds: self.rounds,
            own_cpu_ns: thread_cpu_ns(),
            wall_ns: self.wall_ns,
            late_rounds: self.late,
        }
    }
}

/// Whether `tid` leads its thread group (a process, not another thread of one).
fn is_process(tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .map(|t| crate::task::parse_status(&t))
        .and_then(|s| s.tgid)
        == Some(tid)
}

/// The steal time of all CPUs from `/proc/stat`'s `cpu` line (its 8th value), in clock
/// ticks: time the hypervisor ran something else while a CPU of this machine had work.
pub fn parse_proc_stat_steal(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    line.split_ascii_whitespace().nth(8)?.parse().ok()
}

/// `procs_running` and `procs_blocked` of `/proc/stat`.
pub fn parse_proc_stat_load(text: &str) -> Option<(u32, u32)> {
    let mut running = None;
    let mut blocked = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("procs_running ") {
            running = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("procs_blocked ") {
            blocked = v.trim().parse().ok();
        }
    }
    Some((running?, blocked?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_is_read_from_proc_stat() {
        let text = "cpu  1 2 3\ncpu0 1 2 3\nintr 5\nctxt 77\nbtime 1\nprocesses 9\nprocs_running 3\nprocs_blocked 1\nsoftirq 0\n";
        assert_eq!(parse_proc_stat_load(text), Some((3, 1)));
        assert_eq!(parse_proc_stat_load("cpu 1 2\n"), None);
        let stat = "cpu  10 0 5 900 1 0 2 37 0 0\ncpu0 5 0 2 450 1 0 1 20 0 0\n";
        assert_eq!(parse_proc_stat_steal(stat), Some(37));
        assert_eq!(parse_proc_stat_steal("cpu  1 2 3\n"), None);
    }

    /// Samples this test process's own busy thread until it has used 200 ms of CPU time and
    /// checks the stream: a sample per round, on-CPU time adding up to the CPU time the
    /// thread measured itself (its own clock, published as it spins) while it was sampled.
    #[test]
    fn a_busy_thread_is_sampled_with_its_cpu_time() {
        use std::sync::atomic::AtomicU64;
        const WANT_NS: u64 = 200_000_000;
        let dir = tempfile_dir();
        std::fs::create_dir_all(dir.join("streams")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let cpu = Arc::new(AtomicU64::new(0));
        let (flag, published) = (stop.clone(), cpu.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let busy = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let mut x = 0u64;
            while !flag.load(Ordering::Relaxed) {
                for _ in 0..1000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                published.store(testkit::thread_cpu_ns(), Ordering::Relaxed);
            }
            published.store(testkit::thread_cpu_ns(), Ordering::Relaxed);
        });
        let busy_tid = rx.recv().unwrap();
        let pid = std::process::id();
        while cpu.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let cpu_before = cpu.load(Ordering::Relaxed);
        let sampler = Sampler::start(
            &dir,
            pid,
            SamplerOptions {
                interval: Duration::from_millis(10),
                attached: true,
                follow_children: false,
                sched_trace: false,
            },
        )
        .unwrap();
        // Sized by the busy thread's CPU time, not by wall time: however loaded the machine,
        // there is 200 ms of CPU to sample (and so ≥ 200 ms of wall time, ≥ 20 rounds).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while cpu.load(Ordering::Relaxed) - cpu_before < WANT_NS {
            assert!(
                std::time::Instant::now() < deadline,
                "the busy thread got only {} ns of CPU in 30 s",
                cpu.load(Ordering::Relaxed) - cpu_before
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let outcome = sampler.stop();
        let cpu_after = cpu.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        // Its CPU time from just before the sampler started to just after it stopped.
        let truth = cpu_after - cpu_before;
        assert!(outcome.rounds >= 10, "{} rounds", outcome.rounds);
        let entry = outcome
            .streams
            .iter()
            .find(|s| s.tid == busy_tid)
            .expect("the busy thread has a stream");
        let bytes = std::fs::read(dir.join(&entry.file)).unwrap();
        let stream = trace::Stream::parse(&bytes).unwrap();
        let mut decoder = trace::sched::SampleDecoder::default();
        let mut samples = Vec::new();
        for r in stream.events() {
            samples.extend(decoder.push(&r));
        }
        samples.extend(decoder.finish());
        assert!(samples.len() >= 10, "{} samples", samples.len());
        let on_cpu: u64 = samples.iter().map(|s| s.on_cpu_ns).sum();
        eprintln!(
            "sampled on CPU {on_cpu} ns in {} samples ({} rounds, {} late); the thread's own \
             clock {truth} ns",
            samples.len(),
            outcome.rounds,
            outcome.late_rounds
        );
        // Attached: the first look is a baseline, so the samples cover the thread's CPU time
        // from the first round to the last, inside [cpu_before, cpu_after]. schedstat is
        // brought up to date at ticks and switches, so the baseline may lag by a tick (10 ms
        // at HZ=100, the coarsest): never more than the truth plus that.
        assert!(
            on_cpu <= truth + 10_000_000,
            "{on_cpu} ns sampled on CPU, more than the thread's own {truth} ns"
        );
        // What falls outside: the thread's CPU while the sampler thread starts and makes its
        // first round, and while it makes its last; on a loaded 2-CPU machine each can wait
        // for a CPU up to ~2 scheduler slices (~25 ms), plus a tick of schedstat lag at the
        // end: ~60 ms of ≥ 200 ms. A ratio, so the thread's share of the CPU cancels out.
        assert!(
            on_cpu as f64 >= 0.7 * truth as f64,
            "{on_cpu} ns sampled on CPU, under 70 % of the thread's own {truth} ns"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        std::env::temp_dir().join(format!(
            "contend-sampler-test-{}-{}",
            std::process::id(),
            monotonic_ns()
        ))
    }
}
