//! Golden reports: `contend report` (and `contend c2c report`) on run directories recorded once
//! and committed under fixtures/runs/ (scripts/record-fixtures.sh says how each was recorded),
//! compared byte for byte with what they printed then, `expected/*.txt`, and as JSON values
//! with `expected/*.json`. They guard the moves of the loading and report code (issue 17): a
//! report may change only on purpose, with `UPDATE_GOLDEN=1` rewriting the expected files.
//!
//! Nothing here depends on the machine running the test, only on the committed files and the
//! built contend. Each fixture's maps name its own programs as `/proc/self/cwd/NAME/bin/PROG`
//! (inode 0), and every other module under `/nonexistent-contend-fixture/`, so that libc and
//! friends print as module+offset everywhere; the test copies the fixture into a temporary
//! directory and runs contend there on the relative name `NAME`, which is also the run name
//! the report prints (an absolute temporary path would differ at each run).

use crate::common::contend_in;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where the maps of a fixture put every module that is not one of its own programs.
const ABSENT: &str = "/nonexistent-contend-fixture/";

fn fixtures() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/runs");
    p.canonicalize().unwrap_or(p)
}

fn updating() -> bool {
    std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1")
}

/// Copies `from` into `to` (directories, regular files), leaving out `expected/`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != "expected" {
                copy_tree(&src, &dst);
            }
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The fixture `name` copied to a fresh temporary directory, as `DIR/name`.
pub fn staged(name: &str) -> tempfile::TempDir {
    let src = fixtures().join(name);
    assert!(
        src.is_dir(),
        "{} is missing: record it with scripts/record-fixtures.sh {name}",
        src.display()
    );
    let tmp = tempfile::Builder::new()
        .prefix("contend-fixture-")
        .tempdir()
        .unwrap();
    copy_tree(&src, &tmp.path().join(name));
    // The lock report takes meta.json's mtime as the end of the run and does not trust a
    // module whose ctime is later (rebuilt since): the copies are all new, so meta.json is
    // made the newest file (a scale directory has none: its report reads scale.json).
    let meta = tmp.path().join(name).join("meta.json");
    if meta.is_file() {
        std::fs::File::options()
            .write(true)
            .open(&meta)
            .unwrap()
            .set_modified(std::time::SystemTime::now())
            .unwrap();
    }
    tmp
}

/// `contend ARGS` in `dir`: its stdout, after checking that it succeeded and that no note says
/// a fixture's own program could not be used for names.
fn contend(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = contend_in(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "contend {} failed ({}):\n{stderr}",
        args.join(" "),
        out.status
    );
    assert!(
        !stderr.contains("/proc/self/cwd/"),
        "contend {}: a fixture's program was not used for names (the report would show \
         addresses where names belong):\n{stderr}",
        args.join(" ")
    );
    out.stdout
}

/// Where `expected` and `actual` first differ, with a few lines of context: unified-diff-like.
fn line_diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.split('\n').collect();
    let a: Vec<&str> = actual.split('\n').collect();
    let prefix = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let suffix = e[prefix..]
        .iter()
        .rev()
        .zip(a[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut out = format!("first difference at line {}:\n", prefix + 1);
    for l in &e[prefix.saturating_sub(3)..prefix] {
        out.push_str(&format!("  {l}\n"));
    }
    const MAX: usize = 40;
    for (sign, lines) in [
        ('-', &e[prefix..e.len() - suffix]),
        ('+', &a[prefix..a.len() - suffix]),
    ] {
        for l in lines.iter().take(MAX) {
            out.push_str(&format!("{sign} {l}\n"));
        }
        if lines.len() > MAX {
            out.push_str(&format!("{sign} ... {} more lines\n", lines.len() - MAX));
        }
    }
    for l in e[e.len() - suffix..].iter().take(3) {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

/// The first place (a JSON path) where two values differ.
fn json_difference(path: &str, e: &Value, a: &Value) -> Option<String> {
    match (e, a) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => json_difference(&format!("{path}.{k}"), p, q),
                (Some(_), None) => Some(format!("{path}.{k}: expected, missing")),
                _ => Some(format!("{path}.{k}: not expected, present")),
            })
        }
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| json_difference(&format!("{path}[{i}]"), p, q))
            .or_else(|| {
                (x.len() != y.len())
                    .then(|| format!("{path}: {} elements expected, {} present", x.len(), y.len()))
            }),
        _ => (e != a).then(|| format!("{path}: expected {e}, got {a}")),
    }
}

fn parse_json(bytes: &[u8], what: &str) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{what} is not JSON: {e}"))
}

/// Runs `contend ARGS NAME` and `contend ARGS NAME --json` twice each on a copy of the fixture
/// `name` and compares them with `expected/GOLDEN.txt` and `expected/GOLDEN.json`.
fn golden(name: &str, args: &[&str], golden: &str) {
    let tmp = staged(name);
    let root = tmp.path();
    let shown = format!("contend {} {name}", args.join(" "));
    let run = |json: bool| {
        let mut all: Vec<&str> = args.to_vec();
        all.push(name);
        if json {
            all.push("--json");
        }
        contend(root, &all)
    };

    let text = run(false);
    let again = run(false);
    assert!(
        text == again,
        "{shown} printed something else the second time (not deterministic):\n{}",
        line_diff(
            &String::from_utf8_lossy(&text),
            &String::from_utf8_lossy(&again)
        )
    );
    let json = run(true);
    let json_again = run(true);
    let value = parse_json(&json, &format!("{shown} --json"));
    crate::common::schema::conforms(&args.join("-"), &value);
    if let Some(d) = json_difference("", &value, &parse_json(&json_again, "the second run")) {
        panic!("{shown} --json printed something else the second time (not deterministic): {d}");
    }

    let expected = fixtures().join(name).join("expected");
    let (text_file, json_file) = (
        expected.join(format!("{golden}.txt")),
        expected.join(format!("{golden}.json")),
    );
    if updating() {
        std::fs::create_dir_all(&expected).unwrap();
        std::fs::write(&text_file, &text).unwrap();
        std::fs::write(&json_file, &json).unwrap();
        eprintln!(
            "UPDATE_GOLDEN: wrote {} and {}",
            text_file.display(),
            json_file.display()
        );
        return;
    }
    let read = |f: &Path| {
        std::fs::read(f).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: write it with UPDATE_GOLDEN=1 cargo test -p contend --test cli fixtures::",
                f.display()
            )
        })
    };
    let want = read(&text_file);
    assert!(
        text == want,
        "{shown} differs from {} (if the change is meant, rerun with UPDATE_GOLDEN=1):\n{}",
        text_file.display(),
        line_diff(
            &String::from_utf8_lossy(&want),
            &String::from_utf8_lossy(&text)
        )
    );
    let want_json = read(&json_file);
    if let Some(d) = json_difference(
        "",
        &parse_json(&want_json, &json_file.display().to_string()),
        &value,
    ) {
        panic!(
            "{shown} --json differs from {} at {d} (if the change is meant, rerun with \
             UPDATE_GOLDEN=1):\n{}",
            json_file.display(),
            line_diff(
                &String::from_utf8_lossy(&want_json),
                &String::from_utf8_lossy(&json)
            )
        );
    }
}

/// The golden text must show the names the fixture's program gives, not just addresses: a
/// golden written while symbolization was broken would guard nothing.
fn names(name: &str, golden: &str, wanted: &[&str]) {
    let file = fixtures()
        .join(name)
        .join("expected")
        .join(format!("{golden}.txt"));
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    for w in wanted {
        assert!(
            text.contains(w),
            "{} does not name {w}:\n{text}",
            file.display()
        );
    }
}

#[test]
fn locks() {
    golden("locks", &["report"], "report");
    names(
        "locks",
        "report",
        &["hot_lock", "update_shared_counter (planted_hold.c:"],
    );
}

#[test]
fn heap_locks() {
    golden("heap-locks", &["report"], "report");
    names(
        "heap-locks",
        "report",
        &[
            "open_account (heap_locks.cpp:",
            "make_table (heap_locks.cpp:",
        ],
    );
}

#[test]
fn activity() {
    golden("activity", &["report"], "report");
    names("activity", "report", &["worker-0", "worker-1"]);
}

#[test]
fn mpi() {
    golden("mpi", &["report"], "report");
    names("mpi", "report", &["late_sender.c:"]);
}

#[test]
fn sharing() {
    golden("sharing", &["c2c", "report"], "c2c-report");
    golden("sharing", &["report"], "report");
    names(
        "sharing",
        "c2c-report",
        &["rw (global)", "write_field", "reader_writer.c:"],
    );
}

#[test]
fn scale() {
    golden("scale", &["report"], "report");
}

/// Each fixture's maps name only its own programs (present in its bin/) and modules no machine
/// has: a re-recording that skipped the rewriting would make the reports depend on the libc of
/// the machine running the test.
#[test]
fn fixtures_name_only_their_own_files() {
    let mut seen = 0;
    for fixture in std::fs::read_dir(fixtures()).unwrap() {
        let fixture = fixture.unwrap().path();
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let own = format!("/proc/self/cwd/{name}/bin/");
        let mut stack = vec![fixture.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "maps") {
                    continue;
                }
                seen += 1;
                let text = std::fs::read_to_string(&p).unwrap();
                for line in text.lines() {
                    let Some(at) = line.find(" /") else { continue };
                    let path = &line[at + 1..];
                    let fields: Vec<&str> = line[..at].split_whitespace().collect();
                    assert_eq!(
                        fields.get(4),
                        Some(&"0"),
                        "{}: inode not 0 in {line}",
                        p.display()
                    );
                    if let Some(prog) = path.strip_prefix(&own) {
                        assert!(
                            fixture.join("bin").join(prog).is_file(),
                            "{}: {path} is not in the fixture",
                            p.display()
                        );
                    } else {
                        assert!(
                            path.starts_with(ABSENT),
                            "{}: {path} is a file of the machine running the test",
                            p.display()
                        );
                    }
                }
            }
        }
    }
    assert!(seen > 0, "no maps in {}", fixtures().display());
}
