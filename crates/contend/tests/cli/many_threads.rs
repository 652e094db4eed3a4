//! Recording with `--locks` stays bounded whatever the number of threads a program creates
//! (issue 18 item 6): every thread recorded, the rings' shared memory and the recorder's
//! descriptors measured from outside while it runs, under `ulimit -n 256` (so no raised limit
//! helps). And a recorder killed with SIGKILL leaves neither its program nor its rings behind
//! (item 7).

use crate::common::{serial, CONTEND};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// TOTAL threads in waves of ALIVE alive at once; the threads of a wave meet at a barrier, then
/// all take one mutex and hold it briefly (so the lock is contended). With a third argument
/// the threads go on taking the lock every millisecond, forever.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;
static volatile unsigned long counter;
static int linger;

static void *work(void *arg) {
    (void)arg;
    pthread_barrier_wait(&barrier);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 2000; i++)
        counter++;
    pthread_mutex_unlock(&lock);
    while (linger) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
        usleep(1000);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    int total = atoi(argv[1]), alive = atoi(argv[2]);
    linger = argc > 3;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t *t = malloc(sizeof *t * alive);
    for (int done = 0; done < total; done += alive) {
        int n = total - done < alive ? total - done : alive;
        pthread_barrier_init(&barrier, 0, n);
        for (int i = 0; i < n; i++)
            if (pthread_create(&t[i], &attr, work, 0) != 0) {
                perror("pthread_create");
                return 1;
            }
        for (int i = 0; i < n; i++)
            pthread_join(t[i], 0);
        pthread_barrier_destroy(&barrier);
    }
    printf("truth threads=%d counter=%lu\n", total, counter);
    return 0;
}
"#;

/// The required bounds: /dev/shm use of one run, and the recorder's open descriptors.
const MAX_RING_BYTES: u64 = 256 << 20;
const MAX_RECORDER_FDS: usize = 64;

fn build(dir: &Path) -> Option<PathBuf> {
    if !testkit::require_command("cc", "gcc") {
        return None;
    }
    let src = dir.join("many_threads.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("many_threads");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("running cc");
    assert!(status.success(), "building many_threads.c");
    Some(exe)
}

/// The children of `pid` (its main thread's: contend starts its children from it).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect()
}

/// The rings directory a process was given (`CONTEND_RINGS` in its environment): only the
/// program contend launched has one.
fn rings_dir_of(pid: u32) -> Option<PathBuf> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(b"CONTEND_RINGS="))
        .map(|v| PathBuf::from(String::from_utf8_lossy(v).into_owned()))
}

/// What one look at a running recording found.
#[derive(Default)]
struct Look {
    recorder_fds: usize,
    /// Of which the sched tracepoints' (a few per CPU, however many threads).
    recorder_perf_fds: usize,
    /// Bytes of this run's ring files: every file in its rings directory, and every ring file
    /// (unlinked ones included) mapped by the recorder or the program, each counted once.
    ring_bytes: u64,
    rings_dir: Option<PathBuf>,
    target: Option<u32>,
}

fn look(recorder: u32) -> Look {
    let mut l = Look::default();
    for e in std::fs::read_dir(format!("/proc/{recorder}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        l.recorder_fds += 1;
        let target = std::fs::read_link(e.path()).unwrap_or_default();
        if target.to_string_lossy().contains("perf_event") {
            l.recorder_perf_fds += 1;
        }
    }
    let mut files: HashMap<String, u64> = HashMap::new();
    for pid in std::iter::once(recorder).chain(children(recorder)) {
        if pid != recorder {
            if let Some(dir) = rings_dir_of(pid) {
                l.rings_dir = Some(dir);
                l.target = Some(pid);
            }
        }
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        for line in maps.lines().filter(|l| l.contains(".ring")) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(range), Some(inode)) = (fields.first(), fields.get(4)) else {
                continue;
            };
            let Some((a, b)) = range.split_once('-') else {
                continue;
            };
            let len = u64::from_str_radix(b, 16).unwrap() - u64::from_str_radix(a, 16).unwrap();
            let e = files.entry(format!("ino {inode}")).or_default();
            *e = (*e).max(len);
        }
    }
    if let Some(dir) = &l.rings_dir {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            use std::os::unix::fs::MetadataExt;
            if let Ok(m) = e.metadata() {
                let entry = files.entry(format!("ino {}", m.ino())).or_default();
                *entry = (*entry).max(m.len());
            }
        }
    }
    l.ring_bytes = files.values().sum();
    l
}

/// What a watched recording did.
struct Watched {
    ok: bool,
    stderr: String,
    peak_fds: usize,
    peak_perf_fds: usize,
    peak_ring_bytes: u64,
    looks: u64,
    rings_dir: Option<PathBuf>,
    wall: Duration,
}

/// `contend record -o run --locks -- EXE ARGS` in `dir` under `ulimit -n 256`, looked at every
/// couple of milliseconds until it ends.
fn record_watched(dir: &Path, exe: &Path, args: &[&str]) -> Watched {
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 256 && exec "$0" "$@""#)
        .arg(CONTEND)
        .args(["record", "-o", "run", "--locks", "--"])
        .arg(exe)
        .args(args)
        .current_dir(dir)
        .stdout(std::fs::File::create(dir.join("stdout.txt")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
        .spawn()
        .expect("starting contend");
    // `exec`: the shell's pid is contend's.
    let pid = child.id();
    let (mut peak_fds, mut peak_perf_fds, mut peak_ring_bytes, mut looks) = (0, 0, 0, 0);
    let mut rings_dir = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "contend record did not end within 120 s"
        );
        let l = look(pid);
        peak_fds = peak_fds.max(l.recorder_fds);
        peak_perf_fds = peak_perf_fds.max(l.recorder_perf_fds);
        peak_ring_bytes = peak_ring_bytes.max(l.ring_bytes);
        if l.rings_dir.is_some() {
            rings_dir = l.rings_dir;
            looks += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Watched {
        ok: status.success(),
        stderr: std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default(),
        peak_fds,
        peak_perf_fds,
        peak_ring_bytes,
        looks,
        rings_dir,
        wall: started.elapsed(),
    }
}

/// Records `total` threads, `alive` at once, and checks the bounds and that every thread is in
/// the report.
fn every_thread_recorded_within_bounds(total: usize, alive: usize) {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build(tmp.path()) else {
        return;
    };
    let w = record_watched(tmp.path(), &exe, &[&total.to_string(), &alive.to_string()]);
    let figures = format!(
        "{total} threads, {alive} at once: peak {} recorder descriptors ({} for the sched \
         tracepoints), peak {:.1} MiB of rings, {} looks, {:.2} s",
        w.peak_fds,
        w.peak_perf_fds,
        w.peak_ring_bytes as f64 / (1 << 20) as f64,
        w.looks,
        w.wall.as_secs_f64()
    );
    eprintln!("{figures}");
    assert!(w.ok, "contend record failed: {}", w.stderr);
    assert!(!w.stderr.contains("not recorded"), "{}", w.stderr);
    assert!(
        !w.stderr.contains("not sampled"),
        "threads not sampled: {}",
        w.stderr
    );
    // The measurement saw the recording at work (else the bounds below prove nothing).
    assert!(w.looks > 0 && w.peak_ring_bytes > 0, "{figures}");
    assert!(w.peak_fds >= 3, "{figures}");
    // The tracepoints take a few descriptors per CPU (12 on 2 CPUs), whatever the threads:
    // the bound holds for the rest on any machine, and for all of them on a small one.
    assert!(w.peak_fds - w.peak_perf_fds < MAX_RECORDER_FDS, "{figures}");
    if w.peak_perf_fds <= 12 {
        assert!(w.peak_fds < MAX_RECORDER_FDS, "{figures}");
    }
    assert!(w.peak_ring_bytes < MAX_RING_BYTES, "{figures}");
    let dir = w.rings_dir.unwrap();
    assert!(!dir.exists(), "{} is left behind", dir.display());

    let report = crate::common::report_json(tmp.path(), &["run"]);
    let threads = report["locks"]["threads"].as_array().unwrap();
    let holding: BTreeSet<u64> = threads
        .iter()
        .filter(|t| t["holds"].as_u64().unwrap_or(0) >= 1)
        .map(|t| t["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(
        holding.len(),
        total,
        "worker threads with a lock hold in the report"
    );
    assert_eq!(report["events_dropped"], 0);
}

#[test]
fn two_thousand_threads_in_waves_are_all_recorded_within_bounds() {
    every_thread_recorded_within_bounds(2000, 200);
}

#[test]
fn twelve_hundred_threads_alive_at_once_are_all_recorded_within_bounds() {
    every_thread_recorded_within_bounds(1200, 1200);
}

#[test]
fn threads_beyond_the_ring_budget_are_counted_and_shown() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build(tmp.path()) else {
        return;
    };
    // 1 MiB: half of it for rings of any size, the rest for 64 KiB rings (68 KiB files with
    // their header): at most 15 threads alive at once get a ring; 40 are alive at once.
    let out = Command::new(CONTEND)
        .args(["record", "-o", "run", "--locks", "--"])
        .arg(&exe)
        .args(["40", "40"])
        .env("CONTEND_RING_BUDGET_MIB", "1")
        .current_dir(tmp.path())
        .output()
        .expect("running contend");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("not recorded: the ring budget (1 MiB"))
        .unwrap_or_else(|| panic!("no note of threads not recorded in {stderr}"));
    let refused: usize = line
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"));
    let report = crate::common::report_json(tmp.path(), &["run"]);
    let recorded = report["locks"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["holds"].as_u64().unwrap_or(0) >= 1)
        .count();
    // Every worker is either recorded or counted (the main thread may be either too).
    assert!((1..=15).contains(&recorded), "{recorded} recorded");
    assert!(
        (40..=41).contains(&(recorded + refused)),
        "{recorded} recorded + {refused} not recorded: {line}"
    );
}

/// A process's state letter, `None` once it is gone (a zombie is `Z`).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn gone(pid: u32) -> bool {
    matches!(state(pid), None | Some('Z') | Some('X'))
}

fn wait_until(deadline: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

/// Kills the process when dropped, if the test ended before it did.
struct KillPid(u32);

impl Drop for KillPid {
    fn drop(&mut self) {
        if !gone(self.0) {
            // SAFETY: signalling a process this test started (directly or through contend).
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
}

#[test]
fn sigkill_of_record_kills_the_program_and_leaves_no_rings() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build(tmp.path()) else {
        return;
    };
    let mut contend: Child = Command::new(CONTEND)
        .args(["record", "-o", "run", "--locks", "--"])
        .arg(&exe)
        .args(["8", "8", "linger"])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting contend");
    let pid = contend.id();
    let _contend = KillPid(pid);
    // Recording: the program runs, and its threads' rings exist.
    let mut seen = Look::default();
    let recording = wait_until(Duration::from_secs(30), || {
        seen = look(pid);
        seen.target.is_some() && seen.ring_bytes > 0
    });
    assert!(recording, "the program never started recording");
    let target = seen.target.unwrap();
    let _target = KillPid(target);
    let rings = seen.rings_dir.unwrap();
    let helpers: Vec<u32> = children(pid).into_iter().filter(|&c| c != target).collect();
    assert!(rings.exists());

    // SAFETY: killing the contend this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    contend.wait().unwrap();

    // Documented: the program gets SIGKILL when contend dies.
    assert!(
        wait_until(Duration::from_secs(10), || gone(target)),
        "the program (pid {target}) outlived contend: state {:?}",
        state(target)
    );
    // Nothing of the run is left in /dev/shm (the rings directory and every ring in it).
    assert!(
        wait_until(Duration::from_secs(10), || !rings.exists()),
        "{} is left behind: {:?}",
        rings.display(),
        std::fs::read_dir(&rings).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    // And contend's helper (the reaper) is gone too.
    for h in helpers {
        assert!(
            wait_until(Duration::from_secs(10), || gone(h)),
            "contend's child {h} outlived it"
        );
    }
}
