//! Reads written profiles with `go tool pprof` (-raw, -top, -traces) and checks that the
//! functions, files, lines, modules, labels and values come back. Needs Go (`go` on PATH or
//! $GO); fails naming it when missing.

use std::path::Path;
use std::process::Command;

use export::pprof::{write, Frame, Profile, Sample};

fn frame(function: &str, file: &str, line: u32, module: &str, address: u64) -> Frame {
    Frame {
        function: function.into(),
        file: Some(file.into()),
        line: Some(line),
        address,
        module: Some(module.into()),
    }
}

/// A lock profile like the planted-hold example's: one hot call site, one cold one.
fn lock_profile() -> Profile {
    let lock = frame(
        "pthread_mutex_lock",
        "./nptl/pthread_mutex_lock.c",
        80,
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        0x7f00_0000_1234,
    );
    let start = frame(
        "start_thread",
        "./nptl/pthread_create.c",
        447,
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        0x7f00_0000_5678,
    );
    let hot = frame(
        "hot_worker",
        "planted_hold.c",
        42,
        "/tmp/planted_hold",
        0x40_1136,
    );
    let cold = frame(
        "cold_worker",
        "planted_hold.c",
        61,
        "/tmp/planted_hold",
        0x40_1200,
    );
    let mut p = Profile::lock_contention();
    p.duration_ns = 3_000_000_000;
    p.comments = vec!["contend report --pprof".into()];
    p.samples = vec![
        Sample {
            stack: vec![lock.clone(), hot, start.clone()],
            values: vec![1200, 2_400_000_000],
            labels: vec![("lock".into(), "0x55550000a000".into())],
        },
        Sample {
            stack: vec![lock, cold, start],
            values: vec![7, 3500],
            labels: vec![("lock".into(), "0x55550000b000".into())],
        },
    ];
    p
}

fn go() -> String {
    std::env::var("GO").unwrap_or_else(|_| "go".into())
}

fn pprof(file: &Path, args: &[&str]) -> String {
    let go = go();
    let out = Command::new(&go)
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("PPROF_TMPDIR", file.parent().unwrap())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `{go} tool pprof` ({e}): install Go (Debian: apt-get install golang-go) or set GO")
        });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed ({}):\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains("symboliz"),
        "pprof tried to symbolize what was already symbolized:\n{stderr}"
    );
    stdout
}

/// The whitespace-separated columns of `-top`'s row for function `name`.
fn row(top: &str, name: &str) -> Vec<String> {
    top.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|cols| cols.len() == 6 && cols[5] == name)
        .unwrap_or_else(|| panic!("-top lacks {name}:\n{top}"))
}

fn written(p: &Profile) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.pb.gz");
    write(p, std::fs::File::create(&path).unwrap()).unwrap();
    (dir, path)
}

#[test]
fn go_pprof_reads_the_lock_profile() {
    let (_dir, path) = written(&lock_profile());

    let raw = pprof(&path, &["-raw"]);
    eprintln!("{raw}");
    let main = raw
        .lines()
        .skip_while(|l| *l != "Mappings")
        .nth(1)
        .unwrap_or("");
    assert!(
        main.ends_with("/tmp/planted_hold  [FN][FL][LN]"),
        "main binary first:\n{raw}"
    );
    for want in [
        "PeriodType: contentions count",
        "Period: 1",
        "Duration: 3s",
        "contentions/count delay/nanoseconds",
        "1200 2400000000: 1 2 3",
        "7       3500: 1 4 3",
        "pthread_mutex_lock ./nptl/pthread_mutex_lock.c:80",
        "hot_worker planted_hold.c:42",
        "cold_worker planted_hold.c:61",
        "start_thread ./nptl/pthread_create.c:447",
        "lock:[0x55550000a000]",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/tmp/planted_hold",
    ] {
        assert!(raw.contains(want), "-raw lacks {want:?}:\n{raw}");
    }

    // Delay (the default sample type, the last one) by function, in exact nanoseconds.
    // Columns: flat flat% sum% cum cum% name; the lock function is the leaf of both stacks.
    let top = pprof(&path, &["-top", "-unit=ns", "-nodefraction=0"]);
    eprintln!("{top}");
    assert!(top.contains("Type: delay"), "{top}");
    assert_eq!(
        row(&top, "pthread_mutex_lock")[..4],
        ["2400003500ns", "100%", "100%", "2400003500ns"]
    );
    assert_eq!(
        row(&top, "hot_worker")[..4],
        ["0", "0%", "100%", "2400000000ns"]
    );
    assert_eq!(row(&top, "cold_worker")[3], "3500ns");
    assert_eq!(row(&top, "start_thread")[3], "2400003500ns");

    let top = pprof(
        &path,
        &["-top", "-sample_index=contentions", "-nodefraction=0"],
    );
    assert!(top.contains("Type: contentions"), "{top}");
    assert_eq!(
        row(&top, "pthread_mutex_lock")[..4],
        ["1207", "100%", "100%", "1207"]
    );
    assert_eq!(row(&top, "hot_worker")[3], "1200");
    assert_eq!(row(&top, "cold_worker")[3], "7");

    // Each sample's stack, leaf first, with its value.
    let traces = pprof(&path, &["-traces", "-unit=ns"]);
    eprintln!("{traces}");
    let hot = traces
        .split("-----------+-------------------------------------------------------")
        .find(|t| t.contains("hot_worker"))
        .unwrap_or_else(|| panic!("-traces lacks the hot stack:\n{traces}"));
    let words: Vec<Vec<&str>> = hot
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| !w.is_empty())
        .collect();
    assert_eq!(words[0], ["lock:", "0x55550000a000"], "{hot}");
    assert_eq!(words[1], ["2400000000ns", "pthread_mutex_lock"], "{hot}");
    assert_eq!(words[2..], [["hot_worker"], ["start_thread"]], "{hot}");
}

#[test]
fn go_pprof_reads_an_empty_profile() {
    let (_dir, path) = written(&Profile::lock_contention());
    let raw = pprof(&path, &["-raw"]);
    assert!(raw.contains("contentions/count delay/nanoseconds"), "{raw}");
    // pprof refuses profiles without sample types, so the writer does too.
    assert!(write(&Profile::default(), Vec::new()).is_err());
}
