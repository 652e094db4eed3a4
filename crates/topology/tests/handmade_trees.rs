//! Sysfs trees written by hand for what no real fixture shows: memory-only (CPU-less) nodes,
//! sub-NUMA clustering with interleaved CPU numbering, and hostile file contents.

use std::fs;
use std::path::Path;
use topology::{CpuSet, FillOrder, Topology};

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// One package of `cpus` single-threaded cores.
fn cpus(root: &Path, n: u32) {
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
}

fn node(root: &Path, id: u32, cpulist: &str, gib: u64, distance: &str) {
    let d = format!("sys/devices/system/node/node{id}");
    put(root, &format!("{d}/cpulist"), &format!("{cpulist}\n"));
    put(
        root,
        &format!("{d}/meminfo"),
        &format!(
            "Node {id} MemTotal:       {} kB\nNode {id} MemFree:        1024 kB\n",
            gib << 20
        ),
    );
    put(root, &format!("{d}/distance"), &format!("{distance}\n"));
}

#[test]
fn sub_numa_clustering_with_interleaved_cpus_and_a_memory_only_node() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 4);
    // SNC-2 with interleaved numbering: even CPUs on node 0, odd on node 1; node 2 is CXL memory.
    node(root, 0, "0,2", 16, "10 11 20");
    node(root, 1, "1,3", 16, "11 10 20");
    node(root, 2, "", 64, "20 20 10");
    put(root, "sys/devices/system/node/online", "0-2\n");
    let t = Topology::from_root(root).unwrap();
    let s = t.summary();
    assert_eq!(
        (s.packages, s.nodes, s.nodes_with_cpus, s.memory_only_nodes),
        (1, 3, 2, 1)
    );
    assert!(t.node(2).unwrap().is_memory_only());
    assert_eq!(t.node(2).unwrap().mem_total_kib, Some(64 << 20));
    assert_eq!(t.node_of_cpu(2), Some(0));
    assert_eq!(t.node_of_cpu(3), Some(1));
    assert_eq!(t.nodes_by_distance(1), vec![1, 0, 2]);
    // Socket-first keeps a node's cores together; spread alternates nodes.
    assert_eq!(t.fill_order(FillOrder::SocketFirst), vec![0, 2, 1, 3]);
    assert_eq!(t.fill_order(FillOrder::Spread), vec![0, 1, 2, 3]);
    assert!(t.notes.is_empty(), "{:?}", t.notes);
}

#[test]
fn hostile_contents_are_noted_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 2);
    node(root, 0, "0-4294967295", 1, "10");
    let t = Topology::from_root(root).unwrap();
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("node0/cpulist is malformed")),
        "{:?}",
        t.notes
    );
    // The node is still there, with no CPUs it could vouch for; the CPUs are homeless.
    assert_eq!(t.node(0).unwrap().cpus, CpuSet::new());
    assert!(t
        .notes
        .iter()
        .any(|n| n.contains("belong to no online NUMA node")));
}

#[test]
fn missing_distance_files_give_no_matrix_and_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 2);
    node(root, 0, "0-1", 1, "10");
    fs::remove_file(root.join("sys/devices/system/node/node0/distance")).unwrap();
    let t = Topology::from_root(root).unwrap();
    assert!(t.distances.is_none());
    assert_eq!(t.distance(0, 0), None);
    assert!(t.notes.iter().any(|n| n.contains("no distance matrix")));
}

#[test]
fn absurd_numbers_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 2);
    put(
        root,
        "sys/devices/system/cpu/cpu0/cache/index0/level",
        "1\n",
    );
    put(
        root,
        "sys/devices/system/cpu/cpu0/cache/index0/size",
        "18446744073709551615G\n",
    );
    put(root, "sys/devices/system/cpu/cpu4294967295/online", "1\n");
    node(root, 0, "0-1", 1, "10 20");
    node(root, 1, "", 1, "20 10");
    let max = u64::MAX.to_string();
    for id in [0, 1] {
        put(
            root,
            &format!("sys/devices/system/node/node{id}/meminfo"),
            &format!("Node {id} MemTotal: {max} kB\n"),
        );
    }
    put(
        root,
        "sys/devices/system/node/node4294967295/cpulist",
        "0\n",
    );
    let t = Topology::from_root(root).unwrap();
    assert_eq!(
        t.online,
        CpuSet::parse_list("0-1").unwrap(),
        "cpu4294967295 must be skipped"
    );
    assert_eq!(t.nodes.len(), 2, "node4294967295 must be skipped");
    assert_eq!(
        t.summary().mem_total_kib,
        Some(u64::MAX),
        "saturates, never overflows"
    );
    assert_eq!(t.cache_of_cpu(0, 1).unwrap().size_kib, None);
}

#[test]
fn a_node_whose_cpus_are_offline_is_not_memory_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 2);
    put(root, "sys/devices/system/cpu/online", "0\n");
    node(root, 0, "0", 1, "10 20");
    node(root, 1, "1", 1, "20 10");
    let t = Topology::from_root(root).unwrap();
    let n1 = t.node(1).unwrap();
    assert!(n1.cpus.is_empty());
    assert_eq!(n1.offline_cpus, CpuSet::parse_list("1").unwrap());
    assert!(!n1.is_memory_only());
    assert_eq!(t.summary().memory_only_nodes, 0);
}
