//! `contend where` as a user runs it, on a real multithreaded process: a Python child with
//! three named threads (python3 is needed; the first test says so if it is missing).

use crate::common::{assert_one_line_error, contend, text, CONTEND};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use topology::Topology;

const THREAD_NAMES: [&str; 3] = ["where-alpha", "where-beta", "where-gamma"];

/// Names three threads (prctl PR_SET_NAME), says `ready`, then waits until its stdin closes,
/// so it also ends if the test process dies without killing it.
const CHILD: &str = r#"
import ctypes, sys, threading
libc = ctypes.CDLL(None)
names = sys.argv[1:]
ready = threading.Barrier(len(names) + 1)
def work(name):
    libc.prctl(15, name.encode(), 0, 0, 0)
    ready.wait()
    threading.Event().wait()
for n in names:
    threading.Thread(target=work, args=(n,), daemon=True).start()
ready.wait()
print("ready", flush=True)
sys.stdin.read()
"#;

/// The child process, killed and reaped when dropped.
struct Target {
    child: Child,
    _stdout: BufReader<ChildStdout>,
}

impl Target {
    fn start(names: &[&str]) -> Target {
        // Missing python3 fails (never skips), naming the package scripts/test.sh installs.
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(CHILD)
            .args(names)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("these tests need python3 (apt-get install python3)");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the python child did not start");
        Target {
            child,
            _stdout: stdout,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn lists_threads_with_cpu_node_and_memory_per_node() {
    let target = Target::start(&THREAD_NAMES);
    let pid = target.pid().to_string();
    let out = contend(&["where", &pid]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));

    assert!(
        stdout.starts_with(&format!("PID {pid} (python3): 4 thread(s), ")),
        "{stdout}"
    );
    for name in THREAD_NAMES {
        assert_eq!(stdout.matches(name).count(), 1, "{name} in\n{stdout}");
    }
    for header in [
        "TID",
        "CPU TIME (s)",
        "RUNQ WAIT (ms)",
        "MEMORY (MiB)",
        "TOTAL",
        "heap",
    ] {
        assert!(stdout.contains(header), "{header} in\n{stdout}");
    }
    assert!(
        stdout.contains("threads per node (by last CPU): N"),
        "{stdout}"
    );
}

#[test]
fn json_has_the_same_threads_on_online_cpus_and_existing_nodes() {
    let target = Target::start(&THREAD_NAMES);
    let pid = target.pid();
    let out = contend(&["where", &pid.to_string(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("where", &v);
    let topo = Topology::live().unwrap();

    assert_eq!(v["pid"], pid);
    assert_eq!(v["thread_count"], 4);
    let threads = v["threads"].as_array().unwrap();
    let tids: BTreeSet<u64> = threads.iter().map(|t| t["tid"].as_u64().unwrap()).collect();
    let on_disk: BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(tids, on_disk);
    let names: BTreeSet<&str> = threads
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in THREAD_NAMES {
        assert!(names.contains(name), "{names:?}");
    }
    for t in threads {
        let cpu = t["cpu"].as_u64().expect("every thread has a last CPU") as u32;
        assert!(topo.online.contains(cpu), "CPU {cpu} is not online");
        let node = t["node"].as_u64().expect("every thread has a node") as u32;
        assert!(topo.node(node).is_some(), "node {node} does not exist");
        assert_eq!(Some(node), topo.node_of_cpu(cpu));
        assert!(t["state_name"].is_string());
    }
    let counted: u64 = v["threads_per_node"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["threads"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 4);

    let memory = &v["memory"];
    let nodes = memory["nodes"].as_array().unwrap();
    assert_eq!(
        nodes.len(),
        topo.nodes.len(),
        "one column per node of the machine"
    );
    let sum = |kind: &str| -> u64 { nodes.iter().map(|n| n[kind].as_u64().unwrap()).sum() };
    assert!(sum("heap_kib") > 0, "{memory}");
    assert!(sum("file_kib") > 0, "{memory}");
    assert_eq!(
        sum("total_kib"),
        memory["total"]["total_kib"].as_u64().unwrap()
    );
    assert_eq!(v["resident_kib"], memory["total"]["total_kib"]);
}

#[test]
fn a_thread_id_means_its_process() {
    let target = Target::start(&THREAD_NAMES);
    let pid = target.pid();
    let tid = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .parse::<u32>()
                .unwrap()
        })
        .find(|&t| t != pid)
        .unwrap();
    let out = contend(&["where", &tid.to_string(), "--threads-only", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("where", &v);
    assert_eq!(v["pid"], pid);
    assert!(v["memory"].is_null());
    assert!(text(&out.stderr).contains(&format!("is a thread of process {pid}")));
}

#[test]
fn missing_pid_is_one_line_and_exit_2() {
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let missing = (pid_max + 1).to_string();
    let out = contend(&["where", &missing]);
    assert_one_line_error(&out, 2, &[&format!("no process with PID {missing}")]);
    assert!(out.stdout.is_empty());

    let out = contend(&["where", "not-a-pid"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_exited_process_is_said_so() {
    // Killed but not reaped: a zombie, which has exited.
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    child.kill().unwrap();
    let stat = format!("/proc/{}/stat", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&stat).unwrap().contains(") Z ") {
        assert!(
            Instant::now() < deadline,
            "the killed child never became a zombie"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = contend(&["where", &child.id().to_string()]);
    let _ = child.wait();
    assert_one_line_error(&out, 2, &[&format!("process {} exited", child.id())]);
}

#[test]
fn watch_ends_with_0_when_the_process_exits() {
    let mut target = Target::start(&THREAD_NAMES[..1]);
    let pid = target.pid();
    let mut watch = Command::new(CONTEND)
        .args(["where", &pid.to_string(), "--watch", "0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the watcher's output as it comes; kill the target only after two snapshots, however
    // slow the machine.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let watch_out = BufReader::new(watch.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in watch_out.lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut snapshots = 0;
    while snapshots < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with("--- ") => snapshots += 1,
            Ok(_) => {}
            Err(_) => {
                let _ = watch.kill();
                panic!("contend where --watch printed {snapshots} snapshot(s) in 20 s");
            }
        }
    }
    target.child.kill().unwrap();
    target.child.wait().unwrap();

    while watch.try_wait().unwrap().is_none() {
        if Instant::now() > deadline + Duration::from_secs(20) {
            let _ = watch.kill();
            panic!("contend where --watch did not notice the exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = watch.wait_with_output().unwrap();
    let stdout = reader.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).trim(),
        format!("contend: process {pid} exited")
    );
    // Not a terminal: snapshots after timestamp lines, no escape codes.
    assert!(stdout.starts_with("--- "), "{stdout}");
    assert!(
        stdout.matches("\n--- ").count() >= 1,
        "more than one snapshot"
    );
    assert!(!stdout.contains('\x1b'));
}

#[test]
fn permission_denied_on_numa_maps_still_shows_threads() {
    let target;
    let mut cmd = Command::new(CONTEND);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Root reads everything: look as `nobody` at a process of root's.
        target = Target::start(&THREAD_NAMES[..1]);
        cmd.arg("where").arg(target.pid().to_string());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    } else if std::fs::read_to_string("/proc/1/numa_maps").is_err() {
        cmd.args(["where", "1"]);
    } else {
        testkit::skip("cannot arrange an unreadable numa_maps here");
        return;
    }
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => {
            testkit::skip(&format!("cannot run contend as another user: {e}"));
            return;
        }
    };
    if out.status.code() == Some(126) || text(&out.stderr).contains("Permission denied (os") {
        testkit::skip("`nobody` cannot execute the test binary");
        return;
    }
    // One error line, and the threads are still shown on stdout.
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("numa_maps: run as root or as the process's owner (or pass --threads-only)"),
        "{err}"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("CPU TIME (s)"),
        "threads still shown:\n{stdout}"
    );
    assert!(stdout.contains("memory per node: not shown: permission denied"));
}
