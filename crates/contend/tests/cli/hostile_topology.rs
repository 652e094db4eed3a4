//! `contend topo --sysfs DIR` on trees that are not what a sysfs snapshot should be (a FIFO, a
//! device behind a symlink, a huge file, a malformed `cpu/online`) and on real but unusual ones
//! (no `node/` directory; an old ia64 kernel's empty per-CPU `online` files).

use crate::common::{assert_one_line_error, contend, output_within, show, stderr, stdout, CONTEND};
use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// `n` single-threaded cores in one package, with `cpu/online` and one node.
fn tree(root: &Path, n: u32) {
    put(
        root,
        "sys/devices/system/cpu/online",
        &format!("0-{}\n", n - 1),
    );
    for c in 0..n {
        let t = format!("sys/devices/system/cpu/cpu{c}/topology");
        put(root, &format!("{t}/physical_package_id"), "0\n");
        put(root, &format!("{t}/core_id"), &format!("{c}\n"));
        put(
            root,
            &format!("{t}/thread_siblings_list"),
            &format!("{c}\n"),
        );
        put(
            root,
            &format!("{t}/core_siblings_list"),
            &format!("0-{}\n", n - 1),
        );
    }
    let node = "sys/devices/system/node/node0";
    put(root, &format!("{node}/cpulist"), &format!("0-{}\n", n - 1));
    put(root, &format!("{node}/distance"), "10\n");
}

/// `contend topo --sysfs root`, killed if it has not ended within 60 s (the reads are of a few
/// files; only a blocked or endless read takes long).
fn topo_within_deadline(root: &Path) -> Output {
    let mut cmd = Command::new(CONTEND);
    cmd.args(["topo", "--sysfs"]).arg(root);
    output_within(&mut cmd, Duration::from_secs(60))
        .expect("contend topo did not end within 60 s on a hostile tree")
}

#[test]
fn a_fifo_in_the_tree_is_refused_by_name_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    tree(root, 2);
    let online = root.join("sys/devices/system/cpu/online");
    fs::remove_file(&online).unwrap();
    let c = std::ffi::CString::new(online.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = topo_within_deadline(root);
    assert_one_line_error(
        &out,
        2,
        &[
            "sys/devices/system/cpu/online: is a FIFO",
            "not a regular file",
        ],
    );
}

#[test]
fn dev_zero_behind_a_symlink_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    tree(root, 2);
    let core_id = root.join("sys/devices/system/cpu/cpu1/topology/core_id");
    fs::remove_file(&core_id).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &core_id).unwrap();
    let out = topo_within_deadline(root);
    assert_one_line_error(
        &out,
        2,
        &[
            "cpu1/topology/core_id: leads out of the tree",
            "a symlink to /dev/zero",
        ],
    );
}

#[test]
fn a_sparse_gigabyte_file_is_refused_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    tree(root, 2);
    let distance = root.join("sys/devices/system/node/node0/distance");
    // set_len makes a sparse file: 1 GiB to read, no disk used.
    fs::File::create(&distance)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let out = topo_within_deadline(root);
    assert_one_line_error(
        &out,
        2,
        &["node0/distance: holds more than 1 MiB, the limit for a sysfs file"],
    );
}

#[test]
fn a_malformed_cpu_online_is_an_error_quoting_it() {
    for (text, why) in [
        ("abc", "not a CPU list"),
        ("0-", "not a CPU list"),
        ("3-1", "runs backwards"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        tree(root, 4);
        put(root, "sys/devices/system/cpu/online", &format!("{text}\n"));
        let out = contend(&["topo", "--sysfs", root.to_str().unwrap()]);
        assert_one_line_error(
            &out,
            2,
            &[&format!("cpu/online holds \"{text}\": not a CPU list"), why],
        );
    }
}

#[test]
fn no_node_directory_is_one_node_holding_every_cpu_and_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    tree(root, 4);
    fs::remove_dir_all(root.join("sys/devices/system/node")).unwrap();
    put(
        root,
        "proc/meminfo",
        "MemTotal:        4194304 kB\nMemFree:         1048576 kB\n",
    );
    let out = contend(&["topo", "--sysfs", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("Machine: 1 package(s), 1 NUMA node(s), 4 core(s), 4 PU(s)"),
        "{text}"
    );
    assert!(text.contains("node 0 cpus: 0 1 2 3\n"), "{text}");
    assert!(text.contains("node 0 size: 4096 MB"), "{text}");
    assert!(
        stderr(&out).contains("note: no NUMA node directories"),
        "{}",
        show(&out)
    );

    // Without proc/meminfo: the size is unknown, never 0.
    fs::remove_file(root.join("proc/meminfo")).unwrap();
    let out = contend(&["topo", "--sysfs", root.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", show(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("topo", &v);
    assert_eq!(v["summary"]["nodes"], 1);
    assert_eq!(v["nodes"][0]["cpus"], "0-3");
    assert!(v["nodes"][0]["mem_total_kib"].is_null(), "{v}");
    assert!(v["summary"]["mem_total_kib"].is_null(), "{v}");
}

/// An old 128-CPU ia64 kernel: no cpu/online, present or possible; cpuN/online files that are
/// empty (cpu0 has none); `topology/` directories.
#[test]
fn an_old_ia64_tree_with_empty_online_files_has_128_online_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for c in 0..128u32 {
        let d = format!("sys/devices/system/cpu/cpu{c}");
        if c != 0 {
            put(root, &format!("{d}/online"), "");
        }
        put(
            root,
            &format!("{d}/topology/physical_package_id"),
            &format!("{}\n", c / 2),
        );
        put(
            root,
            &format!("{d}/topology/core_id"),
            &format!("{}\n", c % 2),
        );
        put(
            root,
            &format!("{d}/topology/thread_siblings_list"),
            &format!("{c}\n"),
        );
    }
    for n in 0..16u32 {
        let d = format!("sys/devices/system/node/node{n}");
        put(
            root,
            &format!("{d}/cpulist"),
            &format!("{}-{}\n", n * 8, n * 8 + 7),
        );
    }
    let out = contend(&["topo", "--sysfs", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("Machine: 64 package(s), 16 NUMA node(s), 128 core(s), 128 PU(s)"),
        "{text}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("note: cpuN/online is empty for CPU(s) 1-127")
            && err.contains("taken as online"),
        "{err}"
    );
    assert!(err.contains("no cpuN/online for CPU(s) 0:"), "{err}");
}
