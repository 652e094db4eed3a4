//! `contend bench numa` on this machine: the table of benchmarks × policies, the JSON with each
//! cell's plan, the one-node note, and bad input. The placement itself is tested on NUMA
//! fixture machines in crates/bench/src/numa.rs.

use crate::common::{contend, text};
use serde_json::Value;

fn nodes_with_cpus() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("node"))
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("cpulist"))
                        .is_ok_and(|s| !s.trim().is_empty())
                })
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

#[test]
fn the_table_has_every_benchmark_and_policy() {
    let out = contend(&[
        "bench", "numa", "--size", "8M", "--loops", "1", "--repeat", "1",
    ]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for b in [
        "numa01",
        "numa01-thread-alloc",
        "numa02",
        "numa02-smt",
        "overcommit",
    ] {
        assert!(
            stdout.lines().any(|l| l.contains(&format!(" {b} "))),
            "{b}: {stdout}"
        );
    }
    for p in [
        "default (s)",
        "bind (s)",
        "reverse-bind (s)",
        "interleave (s)",
    ] {
        assert!(stdout.contains(p), "{p}: {stdout}");
    }
    assert!(stderr.contains("numa_balancing"), "{stderr}");
    if nodes_with_cpus() == 1 {
        assert!(stderr.contains("the policies coincide"), "{stderr}");
    }
}

#[test]
fn json_has_each_cell_s_plan() {
    let out = contend(&[
        "bench",
        "numa",
        "numa01,numa02",
        "--policy",
        "bind,reverse-bind",
        "--size",
        "8M",
        "--loops",
        "1",
        "--repeat",
        "2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("bench-numa", &v);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let online = std::thread::available_parallelism().unwrap().get();
    for c in cells {
        assert_eq!(c["runs_s"].as_array().unwrap().len(), 2);
        assert!(c["elapsed_s"]["median"].as_f64().unwrap() > 0.0);
        // numa_maps was sampled while it ran: some node held resident memory.
        let memory = c["memory"].as_array().unwrap();
        assert!(memory.iter().any(|m| m["kib"].as_u64().unwrap() > 0), "{c}");
        let threads: usize = c["plan"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["threads"].as_array().unwrap().len())
            .sum();
        match c["bench"].as_str().unwrap() {
            // 2 processes × CPUs/2 threads, or one thread per CPU.
            "numa01" => assert_eq!(threads, 2 * (online.max(2) / 2)),
            "numa02" => assert!(threads >= online),
            other => panic!("{other}"),
        }
    }
    assert_eq!(v["policies_differ"], nodes_with_cpus() > 1);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, expect) in [
        (vec!["bench", "numa", "numa03"], "not a benchmark"),
        (vec!["bench", "numa", "--policy", "local"], "--policy local"),
        (
            vec!["bench", "numa", "--size", "100000G"],
            "more than the memory",
        ),
    ] {
        let out = contend(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}
