//! Reading a live process from `/proc`: who it is, its threads (one [`ThreadSample`] each) and
//! its memory per NUMA node. Parsing is in `task`, `numa_maps` and `maps`; this module only
//! opens files and turns the kernel's ways of saying "gone" or "not yours" into [`ProcError`].
//!
//! A thread that disappears while being read is skipped (threads come and go); the process
//! disappearing — or turning into a zombie, or its PID being reused — is [`ProcError::Exited`].

use crate::error::{is_denied, is_gone, ProcError};
use crate::task::{self, SchedStat, TaskStat, TaskStatus, ThreadState};
use crate::{maps, numa_maps};
use serde::Serialize;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Clock ticks per second, the unit of `stat`'s CPU times (`sysconf(_SC_CLK_TCK)`, 100 on
/// nearly every Linux).
pub fn clock_ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 {
            t as u64
        } else {
            100
        }
    })
}

/// The base page size in KiB.
pub fn page_size_kib() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if bytes >= 1024 {
        bytes as u64 / 1024
    } else {
        4
    }
}

/// One thread at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ThreadSample {
    pub tid: u32,
    /// The thread's name (`comm`, as `pthread_setname_np` or `prctl(PR_SET_NAME)` set it).
    pub name: String,
    pub state: ThreadState,
    /// The CPU it last ran on (`ps -o psr`); `None` when the kernel did not say.
    pub last_cpu: Option<u32>,
    /// User plus system CPU time, in clock ticks; see [`ThreadSample::cpu_time_s`].
    pub cpu_ticks: u64,
    /// From `schedstat`; `None` when the kernel keeps no scheduler statistics.
    pub sched: Option<SchedStat>,
    pub voluntary_switches: Option<u64>,
    pub nonvoluntary_switches: Option<u64>,
    /// The CPUs it may run on (`Cpus_allowed_list`), e.g. `0-3`.
    pub cpus_allowed: Option<String>,
}

impl ThreadSample {
    /// User plus system CPU time in seconds (tick resolution, usually 10 ms).
    pub fn cpu_time_s(&self) -> f64 {
        self.cpu_ticks as f64 / clock_ticks_per_second() as f64
    }

    fn from_parts(stat: TaskStat, status: TaskStatus, sched: Option<SchedStat>) -> ThreadSample {
        ThreadSample {
            tid: stat.id,
            name: stat.name,
            state: stat.state,
            last_cpu: stat.last_cpu,
            cpu_ticks: stat.utime_ticks.saturating_add(stat.stime_ticks),
            sched,
            voluntary_switches: status.voluntary_switches,
            nonvoluntary_switches: status.nonvoluntary_switches,
            cpus_allowed: status.cpus_allowed,
        }
    }
}

/// Facts about the process as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ProcessInfo {
    pub pid: u32,
    /// The main thread's name.
    pub comm: String,
    /// The command line; empty for kernel threads and zombies.
    pub cmdline: Vec<String>,
    pub state: ThreadState,
    pub num_threads: u32,
    /// `VmRSS` from `status` in KiB (readable even when `numa_maps` is not).
    pub vm_rss_kib: Option<u64>,
}

/// Reads `/proc` files into one reused buffer, so that sampling every few milliseconds does
/// not allocate per file. `root` is `/proc` except in tests.
#[derive(Debug)]
pub struct ProcReader {
    root: PathBuf,
    buf: String,
}

impl Default for ProcReader {
    fn default() -> Self {
        ProcReader::new()
    }
}

impl ProcReader {
    pub fn new() -> ProcReader {
        ProcReader::with_root("/proc")
    }

    /// A reader of a `/proc`-like tree elsewhere (recorded files, tests).
    pub fn with_root(root: impl Into<PathBuf>) -> ProcReader {
        ProcReader {
            root: root.into(),
            buf: String::with_capacity(4096),
        }
    }

    /// `ROOT/PID/task/TID/FILE`.
    fn task_path(&self, pid: u32, tid: u32, file: &str) -> PathBuf {
        let mut p = self.root.join(pid.to_string());
        p.push("task");
        p.push(tid.to_string());
        p.push(file);
        p
    }

    /// Reads a file into the buffer: `Ok(false)` if it vanished (the task is gone).
    fn load(&mut self, path: &Path) -> Result<bool, ProcError> {
        self.buf.clear();
        let result = File::open(path).and_then(|mut f| f.read_to_string(&mut self.buf));
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_gone(&e) => Ok(false),
            Err(e) => Err(io_error(path, e)),
        }
    }

    /// The thread ids of `pid`, ascending; `Ok(None)` if the process is gone.
    pub fn thread_ids(&self, pid: u32) -> Result<Option<Vec<u32>>, ProcError> {
        let dir = self.root.join(pid.to_string()).join("task");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(io_error(&dir, e)),
        };
        let mut tids: Vec<u32> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        Ok(Some(tids))
    }

    /// `stat` of one thread; `Ok(None)` if the thread is gone.
    pub fn thread_stat(&mut self, pid: u32, tid: u32) -> Result<Option<TaskStat>, ProcError> {
        let path = self.task_path(pid, tid, "stat");
        if !self.load(&path)? {
            return Ok(None);
        }
        task::parse_stat(&self.buf)
            .map(Some)
            .map_err(|e| malformed(&path, e))
    }

    /// `schedstat` of one thread: `Ok(None)` if the thread is gone, the file does not exist
    /// (kernel without `CONFIG_SCHED_INFO`) or the statistics are switched off.
    pub fn thread_schedstat(&mut self, pid: u32, tid: u32) -> Result<Option<SchedStat>, ProcError> {
        let path = self.task_path(pid, tid, "schedstat");
        if !self.load(&path)? {
            return Ok(None);
        }
        task::parse_schedstat(&self.buf).map_err(|e| malformed(&path, e))
    }

    /// `status` of one thread; `Ok(None)` if the thread is gone.
    pub fn thread_status(&mut self, pid: u32, tid: u32) -> Result<Option<TaskStatus>, ProcError> {
        let path = self.task_path(pid, tid, "status");
        Ok(self.load(&path)?.then(|| task::parse_status(&self.buf)))
    }

    /// Everything about one thread (three reads: `stat`, `status`, `schedstat`); `Ok(None)`
    /// if the thread is gone. A sampler that needs less can call the single-file readers.
    pub fn thread(&mut self, pid: u32, tid: u32) -> Result<Option<ThreadSample>, ProcError> {
        let Some(stat) = self.thread_stat(pid, tid)? else {
            return Ok(None);
        };
        let Some(status) = self.thread_status(pid, tid)? else {
            return Ok(None);
        };
        let sched = self.thread_schedstat(pid, tid)?;
        Ok(Some(ThreadSample::from_parts(stat, status, sched)))
    }

    /// Every live thread of `pid`, ascending by tid; `Ok(None)` if the process is gone.
    /// Threads that exit while being read are left out.
    pub fn threads(&mut self, pid: u32) -> Result<Option<Vec<ThreadSample>>, ProcError> {
        let Some(tids) = self.thread_ids(pid)? else {
            return Ok(None);
        };
        let mut threads = Vec::with_capacity(tids.len());
        for tid in tids {
            if let Some(t) = self.thread(pid, tid)? {
                threads.push(t);
            }
        }
        Ok(Some(threads))
    }

    /// A process-level file (`ROOT/PID/FILE`) as text; `Ok(None)` if it is gone.
    fn process_file(&mut self, pid: u32, file: &str) -> Result<Option<(PathBuf, &str)>, ProcError> {
        let path = self.root.join(pid.to_string()).join(file);
        Ok(self.load(&path)?.then_some((path, self.buf.as_str())))
    }
}

/// A process being observed. Attaching checks that it exists and remembers its start time, so
/// that a later reader notices when the PID has been reused by another process.
#[derive(Debug)]
pub struct Process {
    pid: u32,
    start_ticks: u64,
    reader: ProcReader,
}

impl Process {
    /// Attaches to `pid` under `/proc`.
    pub fn attach(pid: u32) -> Result<Process, ProcError> {
        Process::attach_with(ProcReader::new(), pid)
    }

    /// Attaches with a given reader (for another `/proc` root).
    pub fn attach_with(mut reader: ProcReader, pid: u32) -> Result<Process, ProcError> {
        let Some((path, text)) = reader.process_file(pid, "stat")? else {
            return Err(missing_process(pid));
        };
        let stat = task::parse_stat(text).map_err(|e| malformed(&path, e))?;
        // `/proc/TID` also exists (unlisted) for threads that are not the main thread.
        if let Some((_, text)) = reader.process_file(pid, "status")? {
            if let Some(tgid) = task::parse_status(text).tgid.filter(|&t| t != pid) {
                return Err(ProcError::IsThread {
                    tid: pid,
                    pid: tgid,
                });
            }
        }
        Ok(Process {
            pid,
            start_ticks: stat.start_ticks,
            reader,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn exited(&self) -> ProcError {
        ProcError::Exited { pid: self.pid }
    }

    /// The process's main `stat`, checked to be still the same process.
    fn stat(&mut self) -> Result<TaskStat, ProcError> {
        let pid = self.pid;
        let Some((path, text)) = self.reader.process_file(pid, "stat")? else {
            return Err(self.exited());
        };
        let stat = task::parse_stat(text).map_err(|e| malformed(&path, e))?;
        if stat.start_ticks != self.start_ticks {
            return Err(self.exited()); // the PID now names another process
        }
        Ok(stat)
    }

    /// Name, command line, thread count and resident size.
    pub fn info(&mut self) -> Result<ProcessInfo, ProcError> {
        let stat = self.stat()?;
        let pid = self.pid;
        let cmdline = match self.reader.process_file(pid, "cmdline")? {
            Some((_, text)) => text.split_terminator('\0').map(str::to_string).collect(),
            None => return Err(self.exited()),
        };
        let vm_rss_kib = match self.reader.process_file(pid, "status")? {
            Some((_, text)) => task::parse_status(text).vm_rss_kib,
            None => return Err(self.exited()),
        };
        Ok(ProcessInfo {
            pid,
            comm: stat.name,
            cmdline,
            state: stat.state,
            num_threads: stat.num_threads,
            vm_rss_kib,
        })
    }

    /// Every thread, ascending by tid. `Exited` when no thread is left alive (all zombie or
    /// gone) — a process whose main thread has exited but whose other threads run is alive.
    pub fn threads(&mut self) -> Result<Vec<ThreadSample>, ProcError> {
        self.stat()?;
        let threads = self
            .reader
            .threads(self.pid)?
            .ok_or_else(|| self.exited())?;
        if threads.iter().all(|t| t.state.has_exited()) {
            return Err(self.exited());
        }
        Ok(threads)
    }

    /// Resident memory per node and kind from `numa_maps`, joined with `maps` for the
    /// `MAP_SHARED` bit. `PermissionDenied` for another user's process without root;
    /// `Unsupported` on kernels without NUMA support.
    pub fn memory(&mut self) -> Result<numa_maps::NumaMemory, ProcError> {
        self.stat()?;
        let pid = self.pid;
        let path = self.reader.root.join(pid.to_string()).join("numa_maps");
        if !self.reader.load(&path)? {
            // The file vanishes with the process, or never existed (no CONFIG_NUMA).
            self.stat()?;
            return Err(ProcError::Unsupported { path });
        }
        let mappings = numa_maps::parse(&self.reader.buf).map_err(|e| malformed(&path, e))?;
        // `maps` passes the same permission check; if it fails now, fall back to names.
        let shared = match self.reader.process_file(pid, "maps") {
            Ok(Some((_, text))) => maps::shared_by_start(text),
            _ => Default::default(),
        };
        // A zombie or a process torn down mid-read has an empty numa_maps: not "no memory".
        if mappings.is_empty() {
            self.threads()?;
        }
        Ok(numa_maps::summarize(&mappings, &shared, page_size_kib()))
    }
}

/// `/proc/PID` is missing: either there is no such process, or `hidepid` hides another user's
/// process from us, which `kill(pid, 0)` tells apart (`EPERM`: it exists).
fn missing_process(pid: u32) -> ProcError {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return ProcError::NoSuchProcess { pid };
    };
    if raw <= 0 {
        return ProcError::NoSuchProcess { pid };
    }
    // SAFETY: signal 0 only checks existence and permission; pid > 0 names one process.
    let r = unsafe { libc::kill(raw, 0) };
    if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
        ProcError::PermissionDenied {
            path: PathBuf::from(format!("/proc/{pid}")),
        }
    } else {
        ProcError::NoSuchProcess { pid }
    }
}

fn io_error(path: &Path, e: io::Error) -> ProcError {
    if is_denied(&e) {
        ProcError::PermissionDenied {
            path: path.to_path_buf(),
        }
    } else {
        ProcError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

fn malformed(path: &Path, e: crate::error::ParseError) -> ProcError {
    ProcError::Malformed {
        path: path.to_path_buf(),
        why: e.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_and_its_threads() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::Builder::new()
            .name("observe-helper".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() } as u32).unwrap();
                let _ = stop_rx.recv();
            })
            .unwrap();
        let helper_tid = rx.recv().unwrap();

        let pid = std::process::id();
        let mut p = Process::attach(pid).unwrap();
        let info = p.info().unwrap();
        assert_eq!(info.pid, pid);
        assert!(info.num_threads >= 2);
        assert!(info.vm_rss_kib.unwrap() > 0);
        let threads = p.threads().unwrap();
        let helper_sample = threads.iter().find(|t| t.tid == helper_tid).unwrap();
        assert_eq!(helper_sample.name, "observe-helper");
        assert!(helper_sample.last_cpu.is_some());
        assert!(helper_sample.voluntary_switches.is_some());
        assert!(threads.windows(2).all(|w| w[0].tid < w[1].tid));

        stop_tx.send(()).unwrap();
        helper.join().unwrap();
        // The joined thread is gone: reading it is "gone", not an error. `join` returns when the
        // kernel clears the thread's tid word, a moment before its /proc entry goes: wait for it.
        let mut reader = ProcReader::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while reader.thread(pid, helper_tid).unwrap().is_some()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(reader.thread(pid, helper_tid).unwrap(), None);

        if Path::new("/proc/self/numa_maps").exists() {
            let mem = p.memory().unwrap();
            assert!(mem.total.total_kib > 0);
            assert!(mem.total.file_kib > 0);
        }
    }

    #[test]
    fn missing_and_thread_pids() {
        // Above the largest pid_max Linux allows (2^22), so never a process.
        let missing = 5_000_000;
        assert!(matches!(
            Process::attach(missing),
            Err(ProcError::NoSuchProcess { pid: 5_000_000 })
        ));
        assert!(matches!(
            Process::attach(0),
            Err(ProcError::NoSuchProcess { pid: 0 })
        ));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            tx.send(tid).unwrap();
            // Alive until the attach below has looked at it, however slow the machine.
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let attached = Process::attach(tid);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        match attached {
            Err(ProcError::IsThread { tid: t, pid }) => {
                assert_eq!((t, pid), (tid, std::process::id()))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn recorded_proc_tree() {
        let dir = std::env::temp_dir().join(format!("observe-proc-{}", std::process::id()));
        let task = dir.join("77/task/78");
        std::fs::create_dir_all(&task).unwrap();
        std::fs::create_dir_all(dir.join("77/task/77")).unwrap();
        let stat = "77 (my app) S 1 77 77 0 -1 0 0 0 0 0 250 50 0 0 20 0 2 0 5000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0";
        let write = |p: &str, s: &str| std::fs::write(dir.join(p), s).unwrap();
        write("77/stat", stat);
        write("77/status", "Tgid:\t77\nVmRSS:\t  1024 kB\n");
        write("77/cmdline", "my app\0--fast\0");
        write("77/task/77/stat", stat);
        write("77/task/77/status", "voluntary_ctxt_switches:\t5\n");
        write("77/task/77/schedstat", "0 0 0\n");
        write(
            "77/task/78/stat",
            &stat.replace("77 (my app) S", "78 (worker) R"),
        );
        write("77/task/78/status", "Cpus_allowed_list:\t2-3\n");
        write("77/task/78/schedstat", "3000000 1000 7\n");
        write(
            "77/numa_maps",
            "1000 default heap anon=2 N0=2 kernelpagesize_kB=4\n",
        );
        write("77/maps", "1000-3000 rw-p 00000000 00:00 0  [heap]\n");

        let mut p = Process::attach_with(ProcReader::with_root(&dir), 77).unwrap();
        let info = p.info().unwrap();
        assert_eq!(info.comm, "my app");
        assert_eq!(info.cmdline, ["my app", "--fast"]);
        assert_eq!(info.vm_rss_kib, Some(1024));
        let threads = p.threads().unwrap();
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[0].sched, None, "0 0 0 means not measured");
        assert_eq!(threads[0].voluntary_switches, Some(5));
        assert_eq!(threads[0].cpu_ticks, 300);
        assert_eq!(threads[0].last_cpu, Some(3));
        assert_eq!(threads[1].name, "worker");
        assert_eq!(threads[1].sched.unwrap().timeslices, 7);
        assert_eq!(threads[1].cpus_allowed.as_deref(), Some("2-3"));
        assert_eq!(threads[1].voluntary_switches, None);
        assert_eq!(p.memory().unwrap().total.heap_kib, 8);

        // All threads zombie: the process has exited.
        let zombie = stat.replace(") S ", ") Z ");
        write("77/task/77/stat", &zombie);
        write(
            "77/task/78/stat",
            &zombie.replace("77 (my app)", "78 (worker)"),
        );
        assert!(matches!(p.threads(), Err(ProcError::Exited { pid: 77 })));

        // Same PID, different start time: another process.
        write("77/stat", &stat.replace(" 5000 ", " 6000 "));
        assert!(matches!(p.info(), Err(ProcError::Exited { pid: 77 })));

        // The whole directory gone.
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(p.threads(), Err(ProcError::Exited { pid: 77 })));
        assert!(matches!(p.memory(), Err(ProcError::Exited { pid: 77 })));
    }
}
