//! `contend bench mem` as users run it: STREAM's four kernels with validation passing over
//! arrays of at least 4 × the last-level caches; the non-temporal kernels seen as `movnt*` in
//! the built binary's disassembly (and the plain ones without); the generator holding a
//! requested rate below the machine's maximum; the bad-input lines. Ratios only.

use crate::common::{contend, serial, text, CONTEND};
use serde_json::Value;
use std::process::Command;

#[test]
fn stream_validates_over_arrays_four_times_the_llc() {
    let _g = serial();
    for nt in [false, true] {
        let mut args = vec!["bench", "mem", "stream", "--ntimes", "3", "--json"];
        if nt {
            args.push("--nt");
        }
        let out = contend(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        crate::common::schema::conforms("bench-mem-stream", &v);
        assert_eq!(v["validation"]["passed"], true, "{v}");
        assert_eq!(v["nt"], nt);
        let array = v["array_bytes"].as_u64().unwrap();
        if let Some(llc) = v["llc_total_bytes"].as_u64() {
            assert!(array >= 4 * llc, "{array} < 4 × {llc}");
        }
        let kernels = v["kernels"].as_array().unwrap();
        let names: Vec<&str> = kernels
            .iter()
            .map(|k| k["kernel"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Copy", "Scale", "Add", "Triad"]);
        for k in kernels {
            // STREAM's byte counting: 2 arrays for Copy and Scale, 3 for Add and Triad.
            let arrays = if matches!(k["kernel"].as_str(), Some("Copy" | "Scale")) {
                2
            } else {
                3
            };
            assert_eq!(k["bytes"].as_u64().unwrap(), arrays * array);
            let rate = k["best_gb_s"].as_f64().unwrap();
            let min = k["min_s"].as_f64().unwrap();
            assert!(rate > 0.0 && min > 0.0);
            // The rate is the bytes over the fastest run.
            let expect = k["bytes"].as_f64().unwrap() / min / 1e9;
            assert!((rate / expect - 1.0).abs() < 1e-9, "{k}");
        }
    }
    let table = contend(&["bench", "mem", "stream", "--ntimes", "2", "--size", "8M"]);
    let stdout = text(&table.stdout);
    assert!(table.status.success());
    assert!(
        stdout.contains("best rate (GB/s)") && stdout.contains("validation: passed"),
        "{stdout}"
    );
    assert!(text(&table.stderr).contains("under 4 × the last-level caches"));
}

#[test]
fn the_nt_kernels_store_with_movnt_and_the_plain_ones_do_not() {
    let out = match Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", CONTEND])
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("running objdump: {e} (install binutils)"),
    };
    assert!(out.status.success());
    let dis = text(&out.stdout);
    // Each function's instructions, by its `<symbol>` header.
    let mut bodies: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    let mut current = String::new();
    for line in dis.lines() {
        if let Some(sym) = line
            .strip_suffix(">:")
            .and_then(|l| l.split_once(" <"))
            .map(|(_, s)| s)
        {
            current = sym.to_string();
        } else if !current.is_empty() {
            bodies.entry(current.clone()).or_default().push(line);
        }
    }
    let direct: std::collections::BTreeSet<&String> = bodies
        .iter()
        .filter(|(_, b)| b.iter().any(|l| l.contains("movnt")))
        .map(|(s, _)| s)
        .collect();
    // A kernel stores with movnt itself (release: the intrinsic inlined) or calls a function
    // that does (debug: `_mm_stream_pd` not inlined).
    let stores_nt = |sym: &str| {
        bodies[sym].iter().any(|l| {
            l.contains("movnt")
                || (l.contains("call")
                    && direct
                        .iter()
                        .any(|d| l.contains(&format!("<{d}>")) && d.contains("stream")))
        })
    };
    let find = |needle: &str| {
        bodies
            .keys()
            .find(|s| s.contains(needle))
            .unwrap_or_else(|| panic!("no function {needle} in the binary"))
            .clone()
    };
    for kernel in [
        "3mem2nt7copy_nt",
        "3mem2nt8scale_nt",
        "3mem2nt6add_nt",
        "3mem2nt8triad_nt",
    ] {
        let sym = find(kernel);
        assert!(
            stores_nt(&sym),
            "{sym} has no movnt store: {:?}",
            bodies[&sym]
        );
    }
    for plain in [
        "5bench3mem5scale17h",
        "5bench3mem3add17h",
        "5bench3mem5triad17h",
    ] {
        let sym = find(plain);
        assert!(!stores_nt(&sym), "{sym} uses movnt");
    }
}

fn generate(args: &[&str]) -> Value {
    let mut all = vec!["bench", "mem", "generate", "--json"];
    all.extend_from_slice(args);
    let out = contend(&all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("bench-mem-generate", &v);
    v
}

#[test]
fn the_generator_holds_a_rate_below_the_maximum() {
    let _g = serial();
    let flat = generate(&["--duration", "1"])["achieved_gb_s"]
        .as_f64()
        .unwrap();
    assert!(flat > 0.0);
    // A modest rate, well below what this machine reached flat out.
    let target = (0.5 * flat).min(1.0);
    let t = format!("{target}");
    let v = generate(&["--rate", &t, "--duration", "2"]);
    let achieved = v["achieved_gb_s"].as_f64().unwrap();
    let ratio = achieved / target;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "{achieved} GB/s for {target}: {v}"
    );
    assert!(v["seconds"].as_f64().unwrap() >= 1.9);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, expect) in [
        (
            vec!["bench", "mem", "stream", "--cpus", "4095"],
            "not online",
        ),
        (
            vec!["bench", "mem", "stream", "--size", "100000G"],
            "more than the memory",
        ),
        (vec!["bench", "mem", "stream", "--ntimes", "1"], "--ntimes"),
        (
            vec!["bench", "mem", "stream", "--size", "1000"],
            "at least 64K",
        ),
        (vec!["bench", "mem", "generate", "--rate", "0"], "--rate"),
        (
            vec!["bench", "mem", "generate", "--duration=0"],
            "--duration",
        ),
    ] {
        let out = contend(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}
