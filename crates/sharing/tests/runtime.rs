//! The sharing runtime in real programs: small C (and C++) programs in tests/c/, compiled with
//! gcc and clang's ThreadSanitizer instrumentation and linked against libcontend_sharing.so
//! instead of libtsan, as `contend cc` does. They check that programs behave exactly as
//! without the runtime, and that the results name what the programs plant.

use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use trace::sharing::{self, AccessKind, HotLine, LineEnd, ProcessSharing};

/// Where cargo put libcontend_sharing.so: beside this test (target/<profile>/deps/).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    assert!(
        deps.join("libcontend_sharing.so").is_file(),
        "libcontend_sharing.so not built in {}",
        deps.display()
    );
    deps
}

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

/// The C compilers to test with. scripts/test.sh installs both: a missing one fails the test
/// under CI and is skipped visibly elsewhere (testkit).
fn compilers() -> Vec<&'static str> {
    ["gcc", "clang"]
        .into_iter()
        .filter(|cc| testkit::require_command(cc, cc))
        .collect()
}

/// The Debian package of a C++ compiler.
fn cxx_package(cxx: &str) -> &'static str {
    if cxx == "g++" {
        "g++"
    } else {
        "clang"
    }
}

fn cxx_of(cc: &str) -> &'static str {
    if cc == "gcc" {
        "g++"
    } else {
        "clang++"
    }
}

/// Built programs, by compiler, source and kind, in a directory of cargo's (emptied by the first
/// build of each test run).
static BUILDS: Mutex<Option<(PathBuf, HashMap<String, PathBuf>)>> = Mutex::new(None);

fn builds_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sharing-runtime-tests");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn check(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `src` with `cc`: instrumented and linked with the runtime, or (`plain`) an ordinary
/// build for reference. Cached for the test binary's life.
fn build(cc: &str, src: &str, plain: bool) -> PathBuf {
    let key = format!("{cc}-{src}-{}", if plain { "plain" } else { "tsan" });
    let mut guard = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, done) = guard.get_or_insert_with(|| (builds_dir(), HashMap::new()));
    if let Some(p) = done.get(&key) {
        return p.clone();
    }
    let exe = dir.join(key.replace('.', "_"));
    let obj = exe.with_extension("o");
    // -mcx16: 128-bit atomics as instructions (clang otherwise calls libatomic).
    let common = ["-g", "-O1", "-mcx16", "-pthread"];
    if plain {
        check(
            Command::new(cc)
                .args(common)
                .arg(source(src))
                .arg("-o")
                .arg(&exe)
                .arg("-latomic"),
        );
    } else {
        check(
            Command::new(cc)
                .args(common)
                .arg("-fsanitize=thread")
                .arg("-c")
                .arg(source(src))
                .arg("-o")
                .arg(&obj),
        );
        let lib = lib_dir();
        check(
            Command::new(cc)
                .arg(&obj)
                .arg("-pthread")
                .arg("-o")
                .arg(&exe)
                .arg(format!("-L{}", lib.display()))
                .arg("-lcontend_sharing")
                .arg(format!("-Wl,-rpath,{}", lib.display())),
        );
    }
    done.insert(key, exe.clone());
    exe
}

/// Longest a test program may run (a broken runtime can make a program spin forever, e.g. a
/// compare-exchange loop that never sees the current value).
const DEADLINE: Duration = Duration::from_secs(120);

fn run(exe: &Path, args: &[&str], env: &[(&str, &str)], cwd: &Path) -> Output {
    let mut cmd = Command::new(exe);
    // cargo's LD_LIBRARY_PATH would win over the rpath and may name a stale copy of the
    // library (target/<profile>/ is only refreshed by `cargo build`).
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("LD_LIBRARY_PATH");
    for v in [
        "CONTEND_SHARING_DIR",
        "CONTEND_SHARING_LINE",
        "CONTEND_SHARING_HOT_AFTER",
        "CONTEND_SHARING_EXHAUSTIVE",
        "CONTEND_SHARING_WINDOW",
    ] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    with_deadline(cmd, &format!("{} {args:?}", exe.display()))
}

/// Runs `cmd` to completion, killing it (and failing the test) after DEADLINE.
fn with_deadline(mut cmd: Command, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    // Drain the pipes meanwhile, so a talkative program cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).ok();
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        err.read_to_end(&mut v).ok();
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > DEADLINE {
            child.kill().ok();
            child.wait().ok();
            panic!("{what}: still running after {DEADLINE:?}, killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `name 0x...` lines of a program's output.
fn address(stdout: &str, name: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {stdout}"));
    let v = line.split_whitespace().nth(1).unwrap();
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

/// `name N` lines of a program's output.
fn decimal(stdout: &str, name: &str) -> u32 {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {stdout}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A run's results: every process's PID.json (validated) with its history entries.
struct Results {
    processes: Vec<(ProcessSharing, Vec<u8>)>,
    dir: PathBuf,
    /// Keeps a run directory made for the run alive as long as the results.
    _keep: Option<tempfile::TempDir>,
}

fn results(dir: &Path) -> Results {
    let mut processes = Vec::new();
    let sdir = dir.join("sharing");
    for e in std::fs::read_dir(&sdir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let s = ProcessSharing::from_json(&std::fs::read(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let hist = std::fs::read(sdir.join(format!("{}.hist", s.pid))).unwrap();
            let entries = sharing::history_entries(&hist).unwrap().to_vec();
            for line in &s.lines {
                sharing::line_history(&entries, line, &s).unwrap();
            }
            assert!(dir.join(format!("maps/sharing-{}.maps", s.pid)).is_file());
            processes.push((s, entries));
        }
    }
    assert!(
        !std::fs::read_dir(&sdir).unwrap().any(|e| e
            .unwrap()
            .path()
            .to_string_lossy()
            .ends_with(".tmp")),
        "temporary files left"
    );
    Results {
        processes,
        dir: dir.to_path_buf(),
        _keep: None,
    }
}

impl Results {
    fn only(&self) -> &(ProcessSharing, Vec<u8>) {
        assert_eq!(self.processes.len(), 1, "one process expected");
        &self.processes[0]
    }
}

fn lines_at(s: &ProcessSharing, address: u64) -> Vec<&HotLine> {
    s.lines.iter().filter(|l| l.address == address).collect()
}

fn writers_of(line: &HotLine) -> BTreeSet<u16> {
    line.accesses
        .iter()
        .filter(|a| a.kind.is_write())
        .map(|a| a.thread)
        .collect()
}

fn offsets_of(line: &HotLine) -> BTreeSet<u8> {
    line.accesses.iter().map(|a| a.offset).collect()
}

fn transfers_of(line: &HotLine) -> u64 {
    line.transfers_before_hot + line.accesses.iter().map(|a| a.transfers).sum::<u64>()
}

/// Replays a history with the model's definition (written out here, independently of the
/// runtime's packed state): the transfers it implies.
fn replay(entries: &[sharing::HistoryEntry]) -> u64 {
    let mut writer: Option<u16> = None;
    let mut holders = BTreeSet::new();
    let mut transfers = 0;
    for e in entries {
        let foreign = matches!(writer, Some(w) if w != e.thread);
        if e.write {
            transfers += u64::from(foreign);
            writer = Some(e.thread);
            holders = [e.thread].into();
        } else if !holders.contains(&e.thread) {
            transfers += u64::from(foreign);
            holders.insert(e.thread);
        }
    }
    transfers
}

fn active(dir: &Path) -> Vec<(&'static str, String)> {
    vec![("CONTEND_SHARING_DIR", dir.display().to_string())]
}

fn run_active(exe: &Path, args: &[&str], extra: &[(&str, &str)]) -> (String, Results, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut env: Vec<(&str, &str)> = extra.to_vec();
    let d = dir.path().display().to_string();
    env.push(("CONTEND_SHARING_DIR", &d));
    let out = run(exe, args, &env, dir.path());
    let stdout = ok(&out, &format!("{} {args:?}", exe.display()));
    let mut r = results(dir.path());
    r._keep = Some(dir);
    (stdout, r, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn atomics_copies_and_errno_are_exactly_as_without_the_runtime() {
    for cc in compilers() {
        let reference = build(cc, "atomics.c", true);
        let cwd = tempfile::tempdir().unwrap();
        let expected = ok(&run(&reference, &[], &[], cwd.path()), "uninstrumented");
        assert!(expected.contains("fails 0"), "{expected}");
        let exe = build(cc, "atomics.c", false);
        let inactive = ok(&run(&exe, &[], &[], cwd.path()), "runtime inactive");
        assert_eq!(inactive, expected, "{cc}, runtime inactive");
        let dir = tempfile::tempdir().unwrap();
        // Exhaustive, so every access also goes through the hot-line path.
        let out = run(
            &exe,
            &[],
            &[
                ("CONTEND_SHARING_DIR", &dir.path().display().to_string()),
                ("CONTEND_SHARING_EXHAUSTIVE", "1"),
            ],
            cwd.path(),
        );
        assert_eq!(ok(&out, "runtime active"), expected, "{cc}, runtime active");
        let r = results(dir.path());
        let (s, _) = r.only();
        assert!(s.totals.atomics > 4 * 20000 * 4, "{:?}", s.totals);
        assert!(s.threads.len() >= 5);
    }
}

#[test]
fn false_sharing_makes_one_hot_line_with_both_threads() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        let (stdout, r, _) = run_active(&exe, &["together"], &[]);
        let (s, entries) = r.only();
        assert_eq!((s.line_size, s.hot_after), (64, 64));
        let at = address(&stdout, "struct");
        let lines = lines_at(s, at);
        assert_eq!(
            lines.len(),
            1,
            "{cc}: one hot line at {at:#x}: {:#?}",
            s.lines
        );
        let line = lines[0];
        // Threads 1 and 2 (the workers) write; 0 (main) reads the sum at the end.
        assert_eq!(writers_of(line), [1, 2].into(), "{cc}: {line:#?}");
        assert_eq!(offsets_of(line), [0, 8].into(), "{cc}");
        assert!(line
            .accesses
            .iter()
            .all(|a| a.size == 8 && !a.kind.is_atomic()));
        assert!(line.accesses.iter().any(|a| a.kind == AccessKind::Write));
        assert!(transfers_of(line) > 64, "{cc}: {line:#?}");
        assert_eq!(line.end, LineEnd::Exit);
        assert!(line.objects.is_empty(), "a global has no heap block");
        // Each worker's thread record says who made it and where it started.
        for t in [1u16, 2] {
            let info = s.threads.iter().find(|i| i.index == t).unwrap();
            assert_eq!(info.created_by, Some(0));
            assert!(info.start_routine.is_some());
        }
        let h = line.history.as_ref().expect("a history");
        assert!(h.entries > 100, "{h:?}");
        let hist = sharing::line_history(entries, line, s).unwrap();
        assert!(hist.iter().all(|e| e.thread <= 2));
        assert!(replay(&hist) > 50, "{cc}: the history replays to transfers");
        assert_eq!(h.beyond, 0);
        // The whole hot life is in the window: the replay from the first hot access differs
        // from the statistics only by the first access of each thread (unknown state before).
        let itemised: u64 = line.accesses.iter().map(|a| a.transfers).sum();
        assert!(
            replay(&hist).abs_diff(itemised) <= 3,
            "{} vs {itemised}",
            replay(&hist)
        );
        assert!(s.totals.transfers >= transfers_of(line));
        assert_eq!(s.totals.hot_lines as usize, s.lines.len());
    }
}

#[test]
fn fields_a_line_apart_share_nothing() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        let (stdout, r, _) = run_active(&exe, &["apart"], &[]);
        let (s, _) = r.only();
        let at = address(&stdout, "struct");
        assert!(lines_at(s, at).is_empty(), "{cc}: {:#?}", s.lines);
        assert!(lines_at(s, at + 64).is_empty(), "{cc}: {:#?}", s.lines);
    }
}

#[test]
fn lines_of_128_bytes_join_fields_64_apart() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        let (stdout, r, _) = run_active(&exe, &["apart"], &[("CONTEND_SHARING_LINE", "128")]);
        let (s, _) = r.only();
        assert_eq!(s.line_size, 128);
        let at = address(&stdout, "struct");
        let lines = lines_at(s, at);
        assert_eq!(lines.len(), 1, "{cc}: {:#?}", s.lines);
        assert_eq!(offsets_of(lines[0]), [0, 64].into());
        assert_eq!(writers_of(lines[0]), [1, 2].into());
        assert!(transfers_of(lines[0]) > 64);
    }
}

/// The program's executable mappings, from the maps copy.
fn program_code(dir: &Path, s: &ProcessSharing) -> Vec<(u64, u64)> {
    let maps = std::fs::read_to_string(dir.join(format!("maps/sharing-{}.maps", s.pid))).unwrap();
    maps.lines()
        .filter(|l| l.ends_with(&s.program) && l.split_whitespace().nth(1).unwrap().contains('x'))
        .map(|l| {
            let (a, b) = l
                .split_whitespace()
                .next()
                .unwrap()
                .split_once('-')
                .unwrap();
            (
                u64::from_str_radix(a, 16).unwrap(),
                u64::from_str_radix(b, 16).unwrap(),
            )
        })
        .collect()
}

#[test]
fn heap_lines_name_their_block_and_start_over_when_it_is_freed() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        let (stdout, r, _) = run_active(&exe, &["heap"], &[]);
        let (s, _) = r.only();
        let code = program_code(&r.dir, s);
        assert!(!code.is_empty());
        let in_program = |pc: u64| code.iter().any(|&(a, b)| pc >= a && pc < b);
        let (block1, line1) = (address(&stdout, "block1"), address(&stdout, "struct1"));
        let (block2, line2) = (address(&stdout, "block2"), address(&stdout, "struct2"));
        // The first block's line ended when it was freed; the second block (often at the same
        // address) is a new lifetime of its line.
        let first: Vec<&HotLine> = lines_at(s, line1)
            .into_iter()
            .filter(|l| l.end == LineEnd::Freed)
            .collect();
        assert_eq!(first.len(), 1, "{cc}: {:#?}", s.lines);
        let l = first[0];
        assert_eq!(l.objects.len(), 1, "{:#?}", l.objects);
        assert_eq!(l.objects[0].address, block1);
        let o = &l.objects[0];
        assert_eq!((o.size, o.allocator.as_str(), o.thread), (256, "malloc", 0));
        assert!(
            in_program(o.site),
            "{cc}: site {:#x} not in {code:x?}",
            o.site
        );
        assert_eq!(l.end, LineEnd::Freed, "{cc}: the block was freed");
        assert!(o.freed_ns.is_some_and(|f| f >= o.allocated_ns));
        assert_eq!(offsets_of(l), [0, 8].into());
        // The second block: a new line lifetime with its own object, live at exit.
        let second: Vec<&HotLine> = lines_at(s, line2)
            .into_iter()
            .filter(|l| l.end == LineEnd::Exit)
            .collect();
        assert_eq!(second.len(), 1, "{cc}: {:#?}", s.lines);
        let l2 = second[0];
        assert_eq!(l2.objects.len(), 1, "{:#?}", l2.objects);
        assert_eq!(l2.objects[0].address, block2);
        assert_eq!(l2.objects[0].freed_ns, None);
        assert_eq!(l2.objects[0].size, 256);
        assert!(l2.id > l.id && l2.hot_since_ns >= l.ended_ns);
        // A fresh lifetime: its transfers start from zero again (threshold reached anew).
        assert_eq!(l2.transfers_before_hot, 64);
        assert!(s.totals.allocations >= 2 && s.totals.frees >= 1);
    }
}

#[test]
fn a_lock_in_the_line_is_an_atomic_write_of_its_word() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        let (stdout, r, _) = run_active(&exe, &["lock"], &[]);
        let (s, _) = r.only();
        let at = address(&stdout, "struct");
        let lines = lines_at(s, at);
        assert_eq!(lines.len(), 1, "{cc}: {:#?}", s.lines);
        let l = lines[0];
        let lock: Vec<_> = l
            .accesses
            .iter()
            .filter(|a| a.offset == 0 && a.size == 4 && a.kind == AccessKind::AtomicWrite)
            .collect();
        assert_eq!(
            lock.iter().map(|a| a.thread).collect::<BTreeSet<_>>(),
            [1, 2].into(),
            "{cc}: {l:#?}"
        );
        // lock and unlock: two code addresses per thread.
        assert!(lock.iter().filter(|a| a.thread == 1).count() >= 2);
        let counter = std::mem::size_of::<libc::pthread_mutex_t>() as u8;
        assert!(l
            .accesses
            .iter()
            .any(|a| a.offset == counter && a.kind.is_write()));
    }
}

#[test]
fn without_a_directory_nothing_is_written() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        for env in [vec![], vec![("CONTEND_SHARING_DIR", "")]] {
            let cwd = tempfile::tempdir().unwrap();
            let out = run(&exe, &["heap"], &env, cwd.path());
            ok(&out, "inactive");
            assert!(
                out.stderr.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
        }
    }
}

#[test]
fn a_forked_child_writes_its_own_results() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        let (stdout, r, _) = run_active(&exe, &["fork"], &[]);
        let (parent, child) = (decimal(&stdout, "parent"), decimal(&stdout, "child"));
        assert_eq!(r.processes.len(), 2, "{cc}");
        let find = |pid: u32| &r.processes.iter().find(|(s, _)| s.pid == pid).unwrap().0;
        let (p, c) = (find(parent), find(child));
        assert_eq!(p.parent_pid, None);
        assert_eq!(c.parent_pid, Some(parent));
        assert_eq!(c.threads[0].index, 0);
        assert_eq!(c.threads[0].tid, child);
        assert!(c.started_ns > p.started_ns);
        let at = address(&stdout, "struct");
        // Both ran the false sharing; the child's line is its own, from its own threads.
        for s in [p, c] {
            let lines = lines_at(s, at);
            assert_eq!(lines.len(), 1, "{cc}: {}: {:#?}", s.pid, s.lines);
            assert_eq!(writers_of(lines[0]), [1, 2].into());
            assert!(lines[0].hot_since_ns >= s.started_ns);
        }
        assert!(
            c.threads.iter().all(|t| t.first_ns >= c.started_ns),
            "{cc}: {c:?}"
        );
    }
}

#[test]
fn exhaustive_mode_tracks_every_line_from_its_first_access() {
    for cc in compilers() {
        let exe = build(cc, "sharing.c", false);
        let (stdout, r, _) = run_active(&exe, &["apart"], &[("CONTEND_SHARING_EXHAUSTIVE", "1")]);
        let (s, entries) = r.only();
        assert_eq!(s.hot_after, 0);
        let at = address(&stdout, "struct");
        for (addr, thread) in [(at, 1u16), (at + 64, 2)] {
            let lines = lines_at(s, addr);
            assert_eq!(lines.len(), 1, "{cc}: {addr:#x}");
            let l = lines[0];
            assert_eq!(writers_of(l), [thread].into());
            // Private to its worker: no transfers, until main reads the result at the end.
            let worker: u64 = l
                .accesses
                .iter()
                .filter(|a| a.thread == thread)
                .map(|a| a.transfers)
                .sum();
            assert_eq!(worker, 0, "{cc}: {l:#?}");
            assert!(transfers_of(l) <= 1);
            assert_eq!(l.transfers_before_hot, 0);
            let hist = sharing::line_history(entries, l, s).unwrap();
            let counted: u64 = l.accesses.iter().map(|a| a.count).sum();
            assert_eq!(hist.len() as u64, counted, "every access is in the history");
            // From the line's first access, the history replays to exactly the transfers.
            assert_eq!(replay(&hist), transfers_of(l));
        }
    }
}

#[test]
fn bad_options_are_named_and_the_defaults_used() {
    let Some(cc) = compilers().into_iter().next() else {
        return;
    };
    let exe = build(cc, "sharing.c", false);
    let (_, r, stderr) = run_active(
        &exe,
        &["together"],
        &[
            ("CONTEND_SHARING_LINE", "96"),
            ("CONTEND_SHARING_HOT_AFTER", "lots"),
        ],
    );
    let (s, _) = r.only();
    assert_eq!((s.line_size, s.hot_after), (64, 64));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].starts_with("contend sharing: CONTEND_SHARING_LINE=\"96\""));
    assert!(lines[0].contains("64 or 128"));
    assert!(lines[1].contains("CONTEND_SHARING_HOT_AFTER"));
}

#[test]
fn a_small_window_keeps_the_first_entries_and_counts_the_rest() {
    let Some(cc) = compilers().into_iter().next() else {
        return;
    };
    let exe = build(cc, "sharing.c", false);
    let (stdout, r, _) = run_active(&exe, &["together"], &[("CONTEND_SHARING_WINDOW", "100")]);
    let (s, _) = r.only();
    let l = lines_at(s, address(&stdout, "struct"))[0];
    let h = l.history.as_ref().unwrap();
    assert_eq!(h.entries, 100);
    let counted: u64 = l.accesses.iter().map(|a| a.count).sum();
    assert_eq!(h.beyond, counted - 100);
    assert!(s.totals.history_beyond_window >= h.beyond);
}

#[test]
fn cxx_programs_link_and_behave_the_same() {
    for cc in compilers() {
        let cxx = cxx_of(cc);
        if !testkit::require_command(cxx, cxx_package(cxx)) {
            continue;
        }
        let reference = build(cxx, "cxx.cc", true);
        let cwd = tempfile::tempdir().unwrap();
        let expected = ok(&run(&reference, &[], &[], cwd.path()), "uninstrumented");
        let exe = build(cxx, "cxx.cc", false);
        assert_eq!(ok(&run(&exe, &[], &[], cwd.path()), "inactive"), expected);
        let dir = tempfile::tempdir().unwrap();
        let env = active(dir.path());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(ok(&run(&exe, &[], &env, cwd.path()), "active"), expected);
        let r = results(dir.path());
        let (s, _) = r.only();
        assert!(s.threads.len() >= 4 && s.totals.allocations >= 3000);
    }
}

/// The conformance programs (conformance/: locks of every kind, condition variables,
/// cancellation, signals, threads with fork and exec, a constructor starting a thread inside
/// dlopen) give identical output with the runtime preloaded and active: they are not
/// instrumented, but every allocation, lock, thread creation, copy and fork goes through it.
#[test]
fn conformance_programs_behave_identically_with_the_runtime_preloaded() {
    if !testkit::require_command("cc", "gcc") {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/run.sh");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("sh");
    cmd.arg(&script)
        .arg(lib_dir().join("libcontend_sharing.so"))
        .env("CONTEND_SHARING_DIR", dir.path())
        .env_remove("LD_LIBRARY_PATH");
    let out = with_deadline(cmd, "conformance/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.lines().filter(|l| l.starts_with("PASS ")).count() >= 12,
        "{stdout}"
    );
    // Every process the runtime ran in (forks included) left valid results.
    let r = results(dir.path());
    assert!(r.processes.len() >= 12);
}

/// Runs endings.c in `mode` with the runtime active; its status and results.
fn run_ending(exe: &Path, mode: &str) -> (Output, String, Results) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let out = run(exe, &[mode], &[("CONTEND_SHARING_DIR", &d)], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dir.path().join("sharing").is_dir(),
        "{mode}: no results written; {:?}, stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut r = results(dir.path());
    r._keep = Some(dir);
    (out, stdout, r)
}

/// The false sharing endings.c did before it ended (`rounds` times, each with two new worker
/// threads): one hot line at its struct, written by the workers at offsets 0 and 8, with a
/// history that replays to transfers. Returns the writes counted in the process.
fn check_the_sharing(what: &str, stdout: &str, r: &Results, rounds: u16) -> u64 {
    let (s, entries) = r.only();
    let at = address(stdout, "struct");
    let lines = lines_at(s, at);
    assert_eq!(
        lines.len(),
        1,
        "{what}: one hot line at {at:#x}: {:#?}",
        s.lines
    );
    let line = lines[0];
    assert_eq!(
        writers_of(line),
        (1..=2 * rounds).collect(),
        "{what}: {line:#?}"
    );
    assert_eq!(offsets_of(line), [0, 8].into(), "{what}");
    assert!(transfers_of(line) > 64, "{what}: {line:#?}");
    assert_eq!(line.end, LineEnd::Exit);
    let hist = sharing::line_history(entries, line, s).unwrap();
    assert!(hist.len() > 100, "{what}: {} history entries", hist.len());
    assert!(
        replay(&hist) > 50,
        "{what}: the history replays to transfers"
    );
    assert_eq!(s.totals.hot_lines as usize, s.lines.len());
    assert!(
        s.threads.len() > usize::from(2 * rounds),
        "{what}: {:?}",
        s.threads
    );
    s.totals.writes
}

#[test]
fn fatal_signals_write_the_results_and_end_the_process_as_without_the_runtime() {
    use std::os::unix::process::ExitStatusExt;
    for cc in compilers() {
        let exe = build(cc, "endings.c", false);
        let plain = build(cc, "endings.c", true);
        for (mode, signal) in [
            ("abort", libc::SIGABRT),
            ("segv", libc::SIGSEGV),
            ("term", libc::SIGTERM),
            ("reraise", libc::SIGSEGV),
        ] {
            let what = format!("{cc} {mode}");
            let cwd = tempfile::tempdir().unwrap();
            let reference = run(&plain, &[mode], &[], cwd.path()).status;
            assert_eq!(reference.signal(), Some(signal), "{what}: uninstrumented");
            let (out, stdout, r) = run_ending(&exe, mode);
            assert_eq!(
                out.status.signal(),
                Some(signal),
                "{what}: {:?}",
                out.status
            );
            assert_eq!(out.status.into_raw(), reference.into_raw(), "{what}");
            check_the_sharing(&what, &stdout, &r, 1);
        }
    }
}

#[test]
fn exit_and_exec_write_the_results_first() {
    for cc in compilers() {
        let exe = build(cc, "endings.c", false);
        // handler: the program's own SIGSEGV handler runs (not the runtime's) and calls _exit.
        for (mode, code) in [
            ("_exit", 3),
            ("_Exit", 4),
            ("execv", 5),
            ("execl", 6),
            ("handler", 7),
        ] {
            let what = format!("{cc} {mode}");
            let (out, stdout, r) = run_ending(&exe, mode);
            assert_eq!(
                out.status.code(),
                Some(code),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            check_the_sharing(&what, &stdout, &r, 1);
        }
    }
}

#[test]
fn after_a_failed_exec_a_handled_signal_or_a_vfork_child_the_program_goes_on_measured() {
    for cc in compilers() {
        let exe = build(cc, "endings.c", false);
        let (_, stdout, once) = run_ending(&exe, "abort");
        let writes_once = check_the_sharing(&format!("{cc} abort"), &stdout, &once, 1);
        // The sharing twice: a snapshot before the failed exec must not stop the statistics,
        // and the exit writer's results replace it. A vfork child shares the memory: its exec
        // must write nothing and stop nothing.
        for mode in ["execfail", "vfork"] {
            let what = format!("{cc} {mode}");
            let (out, stdout, r) = run_ending(&exe, mode);
            ok(&out, &what);
            let writes = check_the_sharing(&what, &stdout, &r, 2);
            assert!(
                writes > writes_once * 3 / 2,
                "{what}: {writes} writes counted, {writes_once} for one round of sharing"
            );
        }
        let (out, stdout, r) = run_ending(&exe, "handled");
        ok(
            &out,
            &format!("{cc} handled: the program's SIGTERM handler ran"),
        );
        check_the_sharing(&format!("{cc} handled"), &stdout, &r, 1);
        // A forked child that execs at once (a launcher's fork-then-exec) writes nothing: the
        // only results are the parent's (`only` checks there is one process).
        let (out, stdout, r) = run_ending(&exe, "forkexec");
        ok(&out, &format!("{cc} forkexec"));
        check_the_sharing(&format!("{cc} forkexec"), &stdout, &r, 1);
    }
}
