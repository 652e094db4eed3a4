//! The off-CPU recorder on this machine: only the program it starts is recorded (never the
//! recorder's own threads), and a futex wait comes with its address and operation.

use observe::offcpu::OffCpuRecorder;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use trace::offcpu::blocks;
use trace::{Stream, StreamFile};

/// perf tracepoints are a machine-wide resource: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The environment variable that makes this test binary the futex-waiting child.
const CHILD: &str = "CONTEND_OFFCPU_LIVE_CHILD";

fn open_or_skip(dir: &std::path::Path) -> Option<OffCpuRecorder> {
    open_with_budget(dir, observe::offcpu::DEFAULT_STACK_BUDGET)
}

fn open_with_budget(dir: &std::path::Path, stack_budget: u64) -> Option<OffCpuRecorder> {
    match OffCpuRecorder::open(dir, stack_budget) {
        Ok(r) => Some(r),
        Err(e) => {
            // Not root, perf_event_paranoid, no tracefs: a capability of the kernel and the
            // user, not a package, so a visible skip even under CI.
            testkit::skip(&format!("off-CPU recording unavailable: {e}"));
            None
        }
    }
}

/// Every thread's (pid, tid, blocks) in the run directory `dir`'s streams (one per process).
fn read_streams(dir: &std::path::Path) -> Vec<(u32, u32, Vec<trace::offcpu::Block>)> {
    read_processes(dir)
        .into_iter()
        .flat_map(|(pid, threads)| {
            threads
                .into_iter()
                .map(move |(tid, blocks)| (pid, tid, blocks))
        })
        .collect()
}

type ThreadsBlocks = BTreeMap<u32, Vec<trace::offcpu::Block>>;

/// Each stream's process and its threads' blocks, in the run directory `dir`.
fn read_processes(dir: &std::path::Path) -> Vec<(u32, ThreadsBlocks)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join(trace::rundir::STREAMS_DIR)).unwrap() {
        let path = e.unwrap().path();
        let file = StreamFile::open(&path).unwrap();
        let s: Stream = file.parse().unwrap();
        let (read, unpaired) = blocks(s.events(), s.header.tid);
        assert_eq!(unpaired, 0, "{}", path.display());
        let mut threads = ThreadsBlocks::new();
        for b in read {
            threads.entry(b.tid).or_default().push(b.block);
        }
        out.push((s.header.pid, threads));
    }
    out
}

#[test]
fn only_the_program_is_traced() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(mut rec) = open_or_skip(dir.path()) else {
        return;
    };
    // A thread of ours started after the events were opened inherits them disabled: its sleeps
    // must leave no record.
    let sibling = std::thread::spawn(|| {
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    });
    let mut child = Command::new("sh")
        .args(["-c", "sleep 0.05; sleep 0.05"])
        .spawn()
        .expect("spawn sh");
    let pid = child.id();
    // Drained while it runs, as the launcher does: its memory map is read at its first block.
    let status = loop {
        rec.drain();
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(status.success());
    // And this thread's own blocks (the wait above, these sleeps) neither.
    std::thread::sleep(std::time::Duration::from_millis(10));
    sibling.join().unwrap();
    rec.drain();
    let done = rec.finish(u64::MAX);
    let streams = read_streams(dir.path());
    assert!(!streams.is_empty(), "no block of the child recorded");
    let me = std::process::id();
    for (p, t, b) in &streams {
        assert_ne!(
            *p, me,
            "a thread of the recorder's process was recorded ({t}: {b:?})"
        );
    }
    // sh, then its sleep children (they inherit it too): each block is of the child or its
    // descendants, and the child's sleeps show as sleeps.
    assert!(streams.iter().any(|(p, _, _)| *p == pid), "{streams:?}");
    let sleeps = streams
        .iter()
        .flat_map(|(_, _, b)| b)
        .filter(|b| b.futex.is_none())
        .count();
    assert!(sleeps >= 2, "{streams:?}");
    assert_eq!(done.stats.lost, 0);
    assert_eq!(done.streams.len(), streams.len());
    // The child's memory map, for naming its futex words, in the run's maps/ only.
    let maps = std::fs::read_to_string(dir.path().join(format!("maps/{pid}-offcpu.maps")))
        .expect("the child's memory map saved");
    assert!(
        maps.lines()
            .any(|l| l.ends_with("/sh") || l.contains("/dash") || l.contains("/bash")),
        "{maps}"
    );
}

#[test]
fn a_blocked_futex_wait_has_its_address() {
    if std::env::var_os(CHILD).is_some() {
        // The child: one futex wait of 20 ms on a word nobody wakes (it times out).
        static WORD: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        println!("word={:p}", &WORD);
        // SAFETY: a futex wait on a live, aligned u32 with a valid timeout.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                WORD.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                0u32,
                &timeout,
            );
        }
        return;
    }
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(rec) = open_or_skip(dir.path()) else {
        return;
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_blocked_futex_wait_has_its_address",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let word = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("word=0x"))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .unwrap_or_else(|| panic!("no word in {text}"));
    let done = rec.finish(u64::MAX);
    if !done.stats.kernel_symbols {
        testkit::skip("kernel symbols hidden: futex waits are not recognised without them");
        return;
    }
    let waits: Vec<_> = read_streams(dir.path())
        .into_iter()
        .flat_map(|(pid, tid, b)| b.into_iter().map(move |b| (pid, tid, b)))
        .filter(|(_, _, b)| b.futex.is_some_and(|f| f.uaddr == word))
        .collect();
    assert_eq!(
        waits.len(),
        1,
        "the wait on {word:#x}: {:?}",
        read_streams(dir.path())
    );
    let (pid, tid, b) = &waits[0];
    assert_eq!(b.futex.unwrap().op, 0x80, "FUTEX_WAIT | FUTEX_PRIVATE_FLAG");
    // Its user stack is in the process's stack file: the wait's thread, registers that point
    // into the stack copied, and no more than the copy's size.
    let Some(trace::offcpu::BlockStack::Entry(i)) = b.stack else {
        panic!("the wait has no stack: {b:?}");
    };
    let bytes = std::fs::read(dir.path().join(format!("stacks/offcpu-{pid}.ustk"))).unwrap();
    let file = trace::ustack::StackFile::parse(&bytes).unwrap();
    assert_eq!((file.bad_entries, file.unread_bytes), (0, 0));
    let e = &file.entries[&i];
    assert_eq!((e.tid, e.ts), (*tid, b.ts));
    assert!(
        !e.stack.is_empty() && e.stack.len() <= observe::offcpu::STACK_BYTES as usize,
        "{} bytes",
        e.stack.len()
    );
    assert!(e.regs.ip != 0 && e.regs.sp != 0, "{:?}", e.regs);
}

/// The environment variable that makes this test binary the many-threads child.
const MANY: &str = "CONTEND_OFFCPU_LIVE_MANY";

/// Threads of one process share its stream: many threads cost one file, and every thread's
/// blocks come back as its own.
#[test]
fn many_threads_share_their_process_stream() {
    const THREADS: usize = 600;
    if std::env::var_os(MANY).is_some() {
        // The child: THREADS threads, 50 alive at once, each sleeping twice.
        for _ in 0..THREADS / 50 {
            let handles: Vec<_> = (0..50)
                .map(|_| {
                    std::thread::spawn(|| {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        }
        return;
    }
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(mut rec) = open_or_skip(dir.path()) else {
        return;
    };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "many_threads_share_their_process_stream"])
        .env(MANY, "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut most = 0;
    let status = loop {
        rec.drain();
        most = most.max(rec.open_streams());
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(status.success());
    let done = rec.finish(u64::MAX);
    // The test binary is one process (libtest's threads included).
    assert_eq!(most, 1, "{most} streams open at once");
    let processes = read_processes(dir.path());
    assert_eq!(processes.len(), 1, "one stream for one process");
    let (p, threads) = &processes[0];
    assert_eq!(*p, pid);
    // Every worker slept twice (a sleep of 1 ms always blocks); libtest's threads are there too.
    // A block the kernel dropped (its ring full: each block and each waking copies an 8 KiB
    // stack, and a busy machine delays the drain) is counted, never silent: each lost or
    // throttled sample may be one worker's block.
    let sleepers = threads.values().filter(|b| b.len() >= 2).count();
    let missed = done.stats.lost + done.stats.throttled;
    assert!(
        sleepers as u64 + missed >= THREADS as u64,
        "{sleepers} threads blocked twice or more; {} samples lost, {} throttled",
        done.stats.lost,
        done.stats.throttled
    );
    eprintln!(
        "{sleepers} of {THREADS} workers blocked twice or more; {} samples lost, {} throttled",
        done.stats.lost, done.stats.throttled
    );
    let blocks: usize = threads.values().map(Vec::len).sum();
    assert_eq!(
        blocks as u64, done.stats.blocks,
        "every block written is read back"
    );
    assert_eq!(done.streams.len(), 1);
}

/// The environment variable that makes this test binary the child that starts processes.
const FORKS: &str = "CONTEND_OFFCPU_LIVE_FORKS";

/// However many processes the program starts, the streams open at once stay bounded: past
/// [`observe::offcpu::MAX_OPEN_STREAMS`] the oldest is closed, and a process that blocks again
/// gets a second stream, read back as the same process.
#[test]
fn many_processes_keep_the_open_streams_bounded() {
    const PROCESSES: usize = observe::offcpu::MAX_OPEN_STREAMS + 60;
    if std::env::var_os(FORKS).is_some() {
        // The child: PROCESSES shells alive at once, each blocking (in its sleep's wait, then
        // in `read`), and again only once every shell said it is ready: by then more than
        // MAX_OPEN_STREAMS processes have blocked since the first shell last did.
        // Two pipes shared by all the shells, so the child holds no descriptor per shell: each
        // says "ready" on one and reads its own "go" line from the other (`read` takes one line).
        use std::io::{BufRead, BufReader, Write};
        let (ready_r, ready_w) = std::io::pipe().unwrap();
        let (go_r, mut go_w) = std::io::pipe().unwrap();
        let mut children = Vec::new();
        for _ in 0..PROCESSES {
            let c = Command::new("sh")
                .args(["-c", "sleep 0.01; echo ready; read x; sleep 0.01"])
                .stdin(go_r.try_clone().unwrap())
                .stdout(ready_w.try_clone().unwrap())
                .spawn()
                .unwrap();
            children.push(c);
        }
        drop((ready_w, go_r));
        let mut ready = BufReader::new(ready_r);
        for _ in 0..PROCESSES {
            let mut line = String::new();
            ready.read_line(&mut line).unwrap();
            assert_eq!(line, "ready\n");
        }
        go_w.write_all(&b"go\n".repeat(PROCESSES)).unwrap();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        return;
    }
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    // The streams are the subject: no stack copies, so that a thousand shells starting at once
    // do not fill the rings (stacks make samples 25 times larger).
    let Some(mut rec) = open_with_budget(dir.path(), 0) else {
        return;
    };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "many_processes_keep_the_open_streams_bounded"])
        .env(FORKS, "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut most = 0;
    let status = loop {
        rec.drain();
        most = most.max(rec.open_streams());
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(status.success());
    let done = rec.finish(u64::MAX);
    assert!(
        most <= observe::offcpu::MAX_OPEN_STREAMS,
        "{most} streams open at once"
    );
    let processes = read_processes(dir.path());
    let distinct: std::collections::HashSet<u32> = processes.iter().map(|p| p.0).collect();
    // The shells (and their sleeps, each its own process).
    assert!(
        distinct.len() > PROCESSES,
        "{} processes recorded",
        distinct.len()
    );
    assert!(
        processes.len() > distinct.len(),
        "no process was given a second stream: {} streams, {} processes",
        processes.len(),
        distinct.len()
    );
    let blocks: usize = processes
        .iter()
        .flat_map(|p| p.1.values())
        .map(Vec::len)
        .sum();
    assert_eq!(
        blocks as u64, done.stats.blocks,
        "every block written is read back"
    );
    assert_eq!(done.streams.len(), processes.len());
}

/// The environment variable that makes this test binary the waking child.
const WAKER: &str = "CONTEND_OFFCPU_LIVE_WAKER";

/// A thread of the program that wakes another through a futex leaves a waking: the woken
/// thread, the word, the op, and the waker's stack; the waiter's block is on the same word.
#[test]
fn a_futex_wake_names_the_woken_thread_and_the_word() {
    use std::sync::atomic::{AtomicU32, Ordering};
    if std::env::var_os(WAKER).is_some() {
        static WORD: AtomicU32 = AtomicU32::new(0);
        let waiter = std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            println!("waiter={}", unsafe { libc::gettid() });
            while WORD.load(Ordering::Acquire) == 0 {
                // SAFETY: a futex wait on a live, aligned u32, no timeout.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        WORD.as_ptr(),
                        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                        0u32,
                        std::ptr::null::<libc::timespec>(),
                    );
                }
            }
        });
        // Long enough for the waiter to block (the test only asserts when it did).
        std::thread::sleep(std::time::Duration::from_millis(50));
        WORD.store(1, Ordering::Release);
        // SAFETY: as above; wakes every waiter.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                WORD.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
        println!("word={:p} waker={}", &WORD, unsafe { libc::gettid() });
        waiter.join().unwrap();
        return;
    }
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(rec) = open_or_skip(dir.path()) else {
        return;
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_futex_wake_names_the_woken_thread_and_the_word",
            "--nocapture",
        ])
        .env(WAKER, "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .to_string()
    };
    let word = u64::from_str_radix(field("word=0x").as_str(), 16).unwrap();
    let waiter: u32 = field("waiter=").parse().unwrap();
    let waker: u32 = field("waker=").parse().unwrap();
    let done = rec.finish(u64::MAX);
    if !done.stats.kernel_symbols {
        testkit::skip("kernel symbols hidden: futex wakes are not recognised without them");
        return;
    }
    if done.stats.wakings_unavailable.is_some() {
        panic!("sched_waking did not open: {:?}", done.notes);
    }
    let waited = read_streams(dir.path()).into_iter().any(|(_, tid, b)| {
        tid == waiter && b.iter().any(|b| b.futex.is_some_and(|f| f.uaddr == word))
    });
    assert!(waited, "the waiter blocked on the word (50 ms to do so)");
    let mut wakings = Vec::new();
    for e in std::fs::read_dir(dir.path().join(trace::rundir::STREAMS_DIR)).unwrap() {
        let path = e.unwrap().path();
        let file = StreamFile::open(&path).unwrap();
        let s: Stream = file.parse().unwrap();
        let d = trace::offcpu::decode(s.events(), s.header.tid);
        assert_eq!(d.unpaired, 0, "{}", path.display());
        wakings.extend(d.wakings);
    }
    let ours: Vec<_> = wakings
        .iter()
        .filter(|w| w.waking.woken == waiter && w.waking.futex.is_some_and(|f| f.uaddr == word))
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "one wake of the waiter on {word:#x}: {wakings:?}"
    );
    let w = ours[0];
    assert_eq!(w.tid, waker);
    assert_eq!(w.waking.how, trace::offcpu::WakeHow::Futex);
    assert_eq!(
        w.waking.futex.unwrap().op,
        0x81,
        "FUTEX_WAKE | FUTEX_PRIVATE_FLAG"
    );
    assert!(
        matches!(w.waking.stack, Some(trace::offcpu::BlockStack::Entry(_))),
        "the waker's stack is kept: {w:?}"
    );
}
