//! The bundled example with known amounts of each kind of memory, seen through `contend where`,
//! and the demo as a whole.

use crate::common::{build, serial, KillOnDrop, CONTEND};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn where_finds_the_memory_the_example_made_resident() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build("examples/threads_memory.c", dir.path()) else {
        return;
    };
    let mut child = Command::new(&exe)
        .arg("30")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let child = KillOnDrop(child);
    assert!(line.starts_with("ready"), "{line}");
    let pid = child.0.id().to_string();

    let out = Command::new(CONTEND)
        .args(["where", "--json", &pid])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let mut names: Vec<&str> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["sleeper-1", "sleeper-2", "spinner", "threads_memory"]
    );

    // The example's own amounts (KiB), with room for what libc and the loader add.
    let total = &v["memory"]["total"];
    let kib = |k: &str| total[k].as_u64().unwrap();
    let within = |k: &str, made: u64, slack: u64| {
        assert!(
            (made..=made + slack).contains(&kib(k)),
            "{k}: {} KiB, expected {made} KiB (+{slack})",
            kib(k)
        )
    };
    within("heap_kib", 64 * 64, 1024); // 64 mallocs of 64 KiB from the brk heap
    within("stack_kib", 256, 512); // the touched 256 KiB stack array
    within("anon_kib", 16 * 1024 + 3 * 8 * 1024, 8 * 1024); // private mapping + 3 thread buffers
    within("shared_kib", 4 * 1024, 512); // the MAP_SHARED anonymous mapping
    assert!(
        kib("file_kib") > 0,
        "the executable and libc are file-backed"
    );
    let node_sum: u64 = v["memory"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["total_kib"].as_u64().unwrap())
        .sum();
    assert_eq!(
        node_sum,
        kib("total_kib"),
        "per-node rows must add up to the total"
    );
}

#[test]
fn demo_runs_every_section_and_cleans_up() {
    // The demo loads every CPU on purpose: no measuring test may run beside it.
    let _one_at_a_time = serial();
    let out = Command::new(CONTEND).arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "1. Topology",
        "$ contend topo",
        "2. Where a process runs",
        "$ contend where",
        "spinner",
        "3. Lock contention",
        "update_shared_counter (planted_hold.c:",
        "--top 2 --html ",
        "wrote this section's page: ",
        "5. One lock or two?",
        "11. Contention made on purpose",
        "$ contend bench atomic",
        "avg ns/op",
        "12. Context switches in a ring",
        "$ contend bench ctx --cpus",
        "\"size=0k ovr=",
        "13. Memory bandwidth",
        "14. NUMA placement",
        "reverse-bind (s)",
        "validation: passed",
        "achieved",
        "Demo finished.",
    ] {
        assert!(stdout.contains(needle), "demo output lacks {needle:?}");
    }
    // A page per section with a run (locks, waits, activity, sharing; MPI where installed), said.
    let pages = stdout
        .lines()
        .find_map(|l| l.strip_prefix("The sections' "))
        .and_then(|l| l.split_once(" pages were written in "))
        .map(|(n, _)| n.parse::<usize>().unwrap())
        .expect("the demo says where its pages are");
    assert!(pages >= 4, "{pages} pages");
    let build_dir = stdout
        .lines()
        .find(|l| l.starts_with("Examples are built with"))
        .and_then(|l| l.rsplit(" in ").next())
        .map(|p| p.trim_end_matches('.'))
        .expect("the demo names its build directory");
    assert!(
        !Path::new(&build_dir).exists(),
        "{build_dir} was not removed"
    );
}
