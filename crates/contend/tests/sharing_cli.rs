//! Cache-line sharing end to end: the examples of examples/sharing built with `contend cc` (gcc
//! and clang), recorded with `contend c2c record`, explained by `contend c2c report --json`.
//! Each example prints `truth:` lines naming what it planted (object, address, fields, kind of
//! sharing); every planted case must be found at that object, named, and classified as planted,
//! the padded twins must show nothing, the atomic counter must be true sharing, the negligible
//! line must stay out of the top 3, and the fix hint's predicted transfer reduction must match
//! the reduction measured on the padded twin within 20 %.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const CONTEND: &str = env!("CARGO_BIN_EXE_contend");

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn have(compiler: &str) -> bool {
    Command::new(compiler)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The sharing runtime, built with the profile contend was built with, beside contend.
fn build_runtime() {
    let exe_dir = Path::new(CONTEND).parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q", "-p", "sharing"])
        .current_dir(repo(""));
    if exe_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn build_examples(compiler: &str, out: &Path) {
    build_runtime();
    let status = Command::new("sh")
        .arg(repo("examples/sharing/build.sh"))
        .arg(out)
        .arg(compiler)
        .env("CONTEND", CONTEND)
        .env_remove("CONTEND_SHARING_LIB")
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "build.sh {compiler}: {}",
        text(&status.stderr)
    );
}

#[derive(Debug, Clone)]
struct Truth {
    case: String,
    object: String,
    kind: String,
    site: Option<String>,
    allocator: Option<String>,
    size: u64,
    addr: u64,
    /// (name, offset in the object, size)
    fields: Vec<(String, u64, u64)>,
}

fn truths(stdout: &str) -> Vec<Truth> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("truth: "))
        .map(|l| {
            let get = |k: &str| {
                l.split(' ')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                    .map(str::to_string)
            };
            let field = |k: &str| get(k).unwrap_or_else(|| panic!("no {k} in `{l}`"));
            let fields = field("fields")
                .split(',')
                .map(|f| {
                    let (name, rest) = f.split_once('@').unwrap();
                    let (off, size) = rest.split_once('+').unwrap();
                    (
                        name.to_string(),
                        off.parse().unwrap(),
                        size.parse().unwrap(),
                    )
                })
                .collect();
            Truth {
                case: field("case"),
                object: field("object"),
                kind: field("kind"),
                site: get("site"),
                allocator: get("allocator"),
                size: field("size").parse().unwrap(),
                addr: u64::from_str_radix(field("addr").trim_start_matches("0x"), 16).unwrap(),
                fields,
            }
        })
        .collect()
}

struct Recorded {
    truths: Vec<Truth>,
    report: Value,
}

impl Recorded {
    fn lines(&self) -> &Vec<Value> {
        self.report["lines"].as_array().unwrap()
    }
    /// Lines overlapping `[addr, addr + size)`.
    fn lines_over(&self, addr: u64, size: u64) -> Vec<&Value> {
        self.lines()
            .iter()
            .filter(|l| {
                let a = l["address"].as_u64().unwrap();
                let n = l["line_size"].as_u64().unwrap();
                a < addr + size && addr < a + n
            })
            .collect()
    }
    /// Transfers on all lines of all processes.
    fn transfers(&self) -> u64 {
        self.report["transfers_total"].as_u64().unwrap()
    }
}

fn record(dir: &Path, name: &str, args: &[&str]) -> Recorded {
    let run = dir.join(format!("{name}-{}.run", args.join("_")));
    let out = Command::new(CONTEND)
        .args(["c2c", "record", "--interval", "0", "-o"])
        .arg(&run)
        .arg("--")
        .arg(dir.join(name))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        text(&out.stderr)
    );
    let report = Command::new(CONTEND)
        .args(["c2c", "report", "--json"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", text(&report.stderr));
    Recorded {
        truths: truths(&text(&out.stdout)),
        report: serde_json::from_slice(&report.stdout).unwrap(),
    }
}

/// The planted object's line: the most transferred line over the object's planted fields.
fn planted_line<'a>(r: &'a Recorded, t: &Truth) -> Result<&'a Value, String> {
    let first = t.fields.iter().map(|f| f.1).min().unwrap();
    let end = t.fields.iter().map(|f| f.1 + f.2).max().unwrap();
    r.lines_over(t.addr + first, end - first)
        .into_iter()
        .max_by_key(|l| l["transfers"].as_u64().unwrap())
        .ok_or_else(|| {
            format!(
                "{}: no hot line over {:#x}: {:#?}",
                t.object,
                t.addr,
                r.lines()
            )
        })
}

/// The line is named after the object: a global's symbol, or the heap block's allocator and
/// allocation line.
fn check_named(line: &Value, t: &Truth) -> Result<(), String> {
    let name = line["belongs_to"].as_str().unwrap();
    let ok = match t.kind.as_str() {
        "global" => name.contains(&format!("{} (global", t.object)),
        _ => {
            name.contains(t.allocator.as_deref().unwrap())
                && name.contains(t.site.as_deref().unwrap())
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{}: line named `{name}`", t.object))
    }
}

/// Accesses in the line at each planted field's offset, and the offsets the hint separates.
fn check_fields(line: &Value, t: &Truth) -> Result<(), String> {
    let base = line["address"].as_u64().unwrap();
    let size = line["line_size"].as_u64().unwrap();
    let rows = line["rows"].as_array().unwrap();
    for (name, off, _) in &t.fields {
        let at = t.addr + off;
        if at < base || at >= base + size || name == "lock" {
            continue;
        }
        let offset = at - base;
        if !rows.iter().any(|r| r["offset"] == offset) {
            return Err(format!(
                "{}: no access at +{offset} ({name}) in {rows:#?}",
                t.object
            ));
        }
    }
    Ok(())
}

fn check_false_sharing(r: &Recorded, t: &Truth) -> Result<(), String> {
    let line = planted_line(r, t)?;
    check_named(line, t)?;
    check_fields(line, t)?;
    if line["class"] != "false-sharing" {
        return Err(format!("{}: classified {}", t.object, line["class"]));
    }
    let groups = line["hint"]["groups"].as_array().map_or(0, Vec::len);
    if groups < 2 {
        return Err(format!("{}: hint {}", t.object, line["hint"]));
    }
    Ok(())
}

/// The case and its padded twin, with the same work: the twin has no hot line over its object,
/// and the hint's predicted reduction matches the measured one within 20 %.
fn check_twin(dir: &Path, name: &str, iters: &str) -> Result<(), String> {
    let plain = record(dir, name, &["-n", iters]);
    let t = plain
        .truths
        .iter()
        .find(|t| t.case == "false-sharing")
        .ok_or("no false-sharing truth")?
        .clone();
    check_false_sharing(&plain, &t)?;
    let padded = record(dir, name, &["-n", iters, "padded"]);
    let tp = &padded.truths[0];
    if tp.case != "none" {
        return Err(format!("{name} padded: truth {tp:?}"));
    }
    let over = padded.lines_over(tp.addr, tp.size);
    if !over.is_empty() {
        return Err(format!("{name} padded: hot lines {over:#?}"));
    }
    let line = planted_line(&plain, &t)?;
    let predicted = line["hint"]["transfers_removed"].as_u64().unwrap() as f64;
    let measured = plain.transfers() as f64 - padded.transfers() as f64;
    if measured <= 0.0 || (predicted - measured).abs() > 0.2 * measured {
        return Err(format!(
            "{name}: predicted {predicted} fewer transfers, measured {measured} ({} → {})",
            plain.transfers(),
            padded.transfers()
        ));
    }
    eprintln!(
        "{name}: fix predicted −{predicted} transfers, padding measured −{measured} ({:.1} % apart)",
        (predicted - measured).abs() / measured * 100.0
    );
    Ok(())
}

fn with_retry(what: &str, f: impl Fn() -> Result<(), String>) {
    // Instrumented threads on 2 busy CPUs may barely overlap in one run: one retry.
    if let Err(first) = f() {
        eprintln!("{what}: {first}: retrying once");
        if let Err(e) = f() {
            panic!("{what}: {e} (first attempt: {first})");
        }
    }
}

/// One test at a time: each needs both CPUs for its threads to overlap.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn every_planted_case(compiler: &str) {
    let _guard = serial();
    if !have(compiler) {
        panic!("{compiler} is not installed (Debian: apt-get install {compiler}); scripts/test.sh installs it");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build_examples(compiler, d);
    for (name, iters) in [
        ("reader_writer", "2000000"),
        ("accumulators", "200000"),
        ("histograms", "300000"),
        ("lock_and_data", "500000"),
    ] {
        with_retry(&format!("{compiler} {name}"), || check_twin(d, name, iters));
    }
    with_retry(&format!("{compiler} atomic_counter"), || {
        let r = record(d, "atomic_counter", &["-n", "1000000"]);
        let t = r.truths.iter().find(|t| t.case == "true-sharing").unwrap();
        let line = planted_line(&r, t)?;
        check_named(line, t)?;
        if line["class"] != "true-sharing" || !line["hint"].is_null() {
            return Err(format!(
                "counter: {} with hint {}",
                line["class"], line["hint"]
            ));
        }
        Ok(())
    });
    with_retry(&format!("{compiler} negligible"), || {
        let r = record(d, "negligible", &["-n", "1000000", "-r", "10000"]);
        let top3: Vec<u64> = r
            .lines()
            .iter()
            .take(3)
            .map(|l| l["address"].as_u64().unwrap())
            .collect();
        for t in &r.truths {
            let line = planted_line(&r, t);
            match t.case.as_str() {
                "negligible" => {
                    if let Ok(l) = line {
                        if top3.contains(&l["address"].as_u64().unwrap()) {
                            return Err(format!("rare is in the top 3: {:#?}", r.lines()));
                        }
                    }
                }
                _ => {
                    check_false_sharing(&r, t)?;
                    let l = line?;
                    if !top3.contains(&l["address"].as_u64().unwrap()) {
                        return Err(format!("{} not in the top 3", t.object));
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn gcc_builds_every_planted_case_is_found() {
    every_planted_case("gcc");
}

#[test]
fn clang_builds_every_planted_case_is_found() {
    every_planted_case("clang");
}

#[test]
fn the_report_has_tables_and_heat_strips() {
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build_examples("gcc", d);
    let run = d.join("rw.run");
    // Exhaustive: every access counted from the first, so the counts can be checked below.
    let out = Command::new(CONTEND)
        .args(["c2c", "record", "--exhaustive", "--interval", "0", "-o"])
        .arg(&run)
        .arg("--")
        .arg(d.join("reader_writer"))
        .args(["-n", "2000000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let svg = d.join("strips");
    let report = Command::new(CONTEND)
        .args(["report", "--sharing-svg"])
        .arg(&svg)
        .arg(&run)
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", text(&report.stderr));
    let shown = text(&report.stdout);
    for want in [
        "Shared cache lines, by cross-thread transfers",
        "rw (global)",
        "false sharing",
        "read_field",
        "reader_writer.c:",
        "Fix: put",
    ] {
        assert!(shown.contains(want), "no `{want}` in\n{shown}");
    }
    let strip = std::fs::read_to_string(svg.join("line-1.svg")).unwrap();
    assert!(strip.contains("<title>T1 byte +8:"), "{strip}");
    // JSON: the same line, also under `contend report --json`.
    let json = Command::new(CONTEND)
        .args(["report", "--json"])
        .arg(&run)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["sharing"]["lines"][0]["class"], "false-sharing");
    assert_eq!(v["sharing"]["lines"][0]["belongs_to"], "rw (global)");
    // Past the history window, accesses are sampled 1 in 16 and scaled (the default): the
    // counts are estimates, and the reader's 2 000 000 loads and the writer's 2 000 000 stores
    // must come out within 1 %.
    assert_eq!(v["sharing"]["processes"][0]["sample_every"], 16);
    let rows = v["sharing"]["lines"][0]["rows"].as_array().unwrap();
    for (offset, kind) in [(0, "read"), (8, "write")] {
        let n: u64 = rows
            .iter()
            .filter(|r| r["offset"] == offset && r["kind"] == kind)
            .map(|r| r["count"].as_u64().unwrap())
            .sum();
        assert!(
            (1_980_000..=2_020_000).contains(&n),
            "{kind}s at +{offset}: {n} counted for 2 000 000"
        );
    }
}
