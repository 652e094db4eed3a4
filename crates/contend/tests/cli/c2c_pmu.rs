//! The PMU back end of `contend c2c`: memory samples of a perf.data file (what `perf c2c record`
//! writes on a machine with PEBS or IBS) go through the same model and report as the sharing
//! runtime's. This machine has no memory sampling, so the files are constructed
//! (`observe::perfmem::writer::scenario`: a falsely shared line, a truly shared counter, a quiet
//! line, with known HITM counts); perf's own `perf c2c report` reads the same file and must
//! agree with contend line by line. The record path is exercised with a stand-in `perf` that
//! runs the program and leaves that file, on a sysfs that claims PEBS.

use crate::common::{text, CONTEND};
use observe::perfmem::writer::scenario::{self, FALSE_LINE, PID, QUIET_LINE, TRUE_LINE};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn report_json(run: &Path) -> Value {
    let out = Command::new(CONTEND)
        .args(["c2c", "report", "--json"])
        .arg(run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("c2c-report", &v);
    v
}

fn line(v: &Value, address: u64) -> &Value {
    v["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["address"].as_u64() == Some(address))
        .unwrap_or_else(|| panic!("no line {address:#x} in {v:#}"))
}

/// (local HITM, remote HITM) per line address, from `perf c2c report --stdio`'s Shared Data
/// Cache Line Table.
fn perf_c2c_lines(file: &Path) -> Option<Vec<(u64, u64, u64)>> {
    let out = Command::new("perf")
        .args(["c2c", "report", "--stdio", "--no-source", "-i"])
        .arg(file)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "perf c2c report: {}",
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    let table = stdout
        .split("Shared Data Cache Line Table")
        .nth(1)
        .and_then(|t| t.split("Shared Cache Line Distribution Pareto").next())
        .unwrap_or_else(|| panic!("perf c2c report printed no line table:\n{stdout}"));
    // Columns: Index, Address, Node, PA cnt, Tot Hitm %, Total, LclHitm, RmtHitm, ...
    Some(
        table
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let addr = u64::from_str_radix(f.get(1)?.strip_prefix("0x")?, 16).ok()?;
                Some((addr, f.get(6)?.parse().ok()?, f.get(7)?.parse().ok()?))
            })
            .collect(),
    )
}

#[test]
fn imported_samples_are_classified_and_agree_with_perf_c2c() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("perf.data");
    std::fs::write(&file, scenario::scenario()).unwrap();
    let run = dir.path().join("run");
    let out = Command::new(CONTEND)
        .args(["c2c", "import"])
        .arg(&file)
        .arg("-o")
        .arg(&run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("imported 182 memory samples of 1 process"),
        "{err}"
    );
    assert!(err.contains("lost 7 sample"), "{err}");

    let meta: Value =
        serde_json::from_slice(&std::fs::read(run.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["sharing"]["backend"], "pmu");
    assert_eq!(meta["sharing"]["processes"][0]["pid"], PID);

    let v = report_json(&run);
    let fl = line(&v, FALSE_LINE);
    assert_eq!(fl["class"], "false-sharing", "{fl:#}");
    assert_eq!(fl["pmu"]["hitm_local"], 55);
    assert_eq!(fl["pmu"]["hitm_remote"], 5);
    // Estimated transfers: 60 HITM samples of period 4000.
    assert_eq!(fl["transfers"], 60 * 4000);
    assert!(
        fl["belongs_to"].as_str().unwrap().contains("fs_demo"),
        "{fl:#}"
    );
    let groups = fl["hint"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{fl:#}");
    let tl = line(&v, TRUE_LINE);
    assert_eq!(tl["class"], "true-sharing", "{tl:#}");
    assert_eq!(tl["pmu"]["hitm_local"], 40);
    assert!(tl["hint"].is_null());
    // The quiet line: shown (a writer and a reader), no transfers, ranked last.
    let lines = v["lines"].as_array().unwrap();
    assert_eq!(lines.last().unwrap()["address"], QUIET_LINE);
    assert_eq!(lines[0]["address"], FALSE_LINE);
    // Latency: 40 load samples of 200 cycles on each thread's field.
    assert_eq!(fl["pmu"]["latency_samples"], 80);
    assert_eq!(fl["pmu"]["latency_cycles"], 80 * 200);

    // perf's own reading of the same file, line by line (perf: installed by scripts/test.sh;
    // missing, a failure under CI and a visible skip of this comparison elsewhere).
    if testkit::require_command("perf", "linux-perf") {
        let perf = perf_c2c_lines(&file).expect("perf runs");
        assert_eq!(perf.len(), 2, "{perf:?}");
        for (addr, lcl, rmt) in perf {
            let ours = line(&v, addr);
            assert_eq!(ours["pmu"]["hitm_local"], lcl, "line {addr:#x}");
            assert_eq!(ours["pmu"]["hitm_remote"], rmt, "line {addr:#x}");
        }
    }

    // The tables: HITM and latency columns, and the header names the events and the losses.
    let out = Command::new(CONTEND)
        .args(["c2c", "report"])
        .arg(&run)
        .output()
        .unwrap();
    let table = text(&out.stdout);
    assert!(
        table.contains("from the PMU (cpu/mem-loads,ldlat=30/P, cpu/mem-stores/P)"),
        "{table}"
    );
    assert!(table.contains("HITM 95 local, 5 remote"), "{table}");
    assert!(table.contains("PEER"), "{table}");
    assert!(table.contains("7 sample(s) lost by the kernel"), "{table}");
    assert!(table.contains("LOAD LAT (cycles)"), "{table}");
    assert!(table.contains("200 (max 200)"), "{table}");
}

#[test]
fn a_file_without_memory_samples_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/perf/cpu-clock-no-memory-sampling.data");
    let run = dir.path().join("run");
    let out = Command::new(CONTEND)
        .args(["c2c", "import"])
        .arg(&fixture)
        .arg("-o")
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("has no load or store samples with a data address"),
        "{err}"
    );
    assert!(err.contains("cpu-clock"), "{err}");
    assert!(!run.exists());
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() == 0,
        "scratch left behind"
    );

    std::fs::write(dir.path().join("junk.data"), b"PERFILE2 and then nothing").unwrap();
    let out = Command::new(CONTEND)
        .args(["c2c", "import"])
        .arg(dir.path().join("junk.data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("truncated or corrupt perf.data"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn record_drives_perf_c2c_for_a_program_not_built_with_contend_cc() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("scenario.data");
    std::fs::write(&data, scenario::scenario()).unwrap();
    // A stand-in perf: checks it was asked for `c2c record -o FILE -- CMD`, runs CMD, and
    // leaves the constructed file where perf would have written its samples.
    let perf = dir.path().join("perf");
    let log = dir.path().join("perf.args");
    std::fs::write(
        &perf,
        format!(
            "#!/bin/sh\necho \"$@\" > {log}\n[ \"$1 $2 $3\" = \"c2c record -o\" ] || exit 9\nout=$4\n[ \"$5\" = -- ] || exit 9\nshift 5\n\"$@\"; rc=$?\ncp {data} \"$out\"\nexit $rc\n",
            log = log.display(),
            data = data.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&perf, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A machine whose PMU offers PEBS load sampling.
    let sys = dir.path().join("sys");
    std::fs::create_dir_all(sys.join("bus/event_source/devices/cpu/events")).unwrap();
    std::fs::write(
        sys.join("bus/event_source/devices/cpu/events/mem-loads"),
        "event=0xcd,umask=0x1,ldlat=3\n",
    )
    .unwrap();

    let run = dir.path().join("run");
    let out = Command::new(CONTEND)
        .args([
            "c2c",
            "record",
            "--interval",
            "0",
            "--no-sched-trace",
            "--sysfs",
        ])
        .arg(&sys)
        .arg("-o")
        .arg(&run)
        .args(["--", "true"])
        .env("CONTEND_PERF", &perf)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("using the PMU back end (PEBS mem-loads)"),
        "{err}"
    );
    let args = std::fs::read_to_string(&log).unwrap();
    assert!(
        args.contains("c2c record -o ") && args.ends_with(" -- true\n"),
        "{args}"
    );
    let v = report_json(&run);
    assert_eq!(line(&v, FALSE_LINE)["class"], "false-sharing");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(run.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["sharing"]["backend"], "pmu");

    // Without memory sampling, --backend pmu is refused before anything runs.
    let bare = dir.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let out = Command::new(CONTEND)
        .args(["c2c", "record", "--backend", "pmu", "--sysfs"])
        .arg(&bare)
        .arg("-o")
        .arg(dir.path().join("run2"))
        .args(["--", "true"])
        .env("CONTEND_PERF", &perf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no memory-sampling events"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.path().join("run2").exists());
}
