//! `contend topo` as a user runs it: output streams, JSON, exit codes.

use crate::common::contend;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/topology")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn synthetic_json_describes_the_machine() {
    let out = contend(&["topo", "--synthetic", "2x4x2:n2", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("topo", &v);
    let s = &v["summary"];
    assert_eq!(
        (&s["packages"], &s["nodes"], &s["cores"], &s["pus"]),
        (&2.into(), &4.into(), &8.into(), &16.into())
    );
    assert_eq!(v["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(v["distances"][0][3], 21);
}

#[test]
fn fixture_tree_and_notes_go_to_the_right_streams() {
    let out = contend(&[
        "topo",
        "--sysfs",
        &fixture("intel-haswell-2s-offline-cpu0-node0"),
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stdout.starts_with("Machine: 2 package(s), 1 NUMA node(s), 17 core(s), 17 PU(s)"),
        "{stdout}"
    );
    assert!(stdout.contains("offline CPUs: 0-3,21-23"));
    assert!(
        stdout.contains("node 1 cpus: 5 7 9 11 13 15 17 19\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("note:"));
    assert!(
        stderr.lines().all(|l| l.starts_with("contend: note: ")),
        "{stderr}"
    );
    assert!(stderr.contains("belong to no online NUMA node"));
}

#[test]
fn order_lists_every_cpu_once() {
    let out = contend(&[
        "topo",
        "--sysfs",
        &fixture("intel-xeon4108-2s-ht"),
        "--order",
        "socket-first",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let cpus: Vec<u32> = text.trim().split(',').map(|c| c.parse().unwrap()).collect();
    assert_eq!(cpus[..3], [0, 1, 2]);
    assert_eq!(cpus.len(), 32);
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    for (args, needle) in [
        (vec!["topo", "--sysfs", "/nonexistent"], "does not exist"),
        (vec!["topo", "--synthetic", "2x4"], "three numbers"),
        (
            vec!["topo", "--order", "sideways"],
            "compact, socket-first or spread",
        ),
    ] {
        let out = contend(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} wrote results on failure");
    }
}

#[test]
fn version_and_help() {
    let out = contend(&["--version"]);
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("contend "));
    let out = contend(&["--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    for cmd in ["topo", "where", "report", "demo", "Exit codes"] {
        assert!(help.contains(cmd), "help lacks {cmd}");
    }
}
