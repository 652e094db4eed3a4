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

/// Runs `f` on a thread without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (capabilities are
/// per thread), so that a mode-000 file is unreadable even when the tests run as root.
fn without_file_permission_override<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut header = Header {
                version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
                pid: 0,
            };
            let mut data = [Data::default(); 2];
            // SAFETY: header and data are the layout capget/capset take for version 3.
            unsafe {
                assert_eq!(
                    libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
                    0
                );
                data[0].effective = 0;
                data[1].effective = 0;
                assert_eq!(libc::syscall(libc::SYS_capset, &header, data.as_ptr()), 0);
            }
            f()
        })
        .join()
        .unwrap()
    })
}

fn note_with<'a>(t: &'a Topology, words: &str) -> &'a str {
    t.notes
        .iter()
        .find(|n| n.contains(words))
        .unwrap_or_else(|| panic!("no note with `{words}` in {:?}", t.notes))
}

#[test]
fn no_node_directory_is_one_node_with_all_cpus_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 4);
    put(
        root,
        "proc/meminfo",
        "MemTotal:        8056372 kB\nMemFree:         6000000 kB\nMemAvailable:    7000000 kB\n",
    );
    let t = Topology::from_root(root).unwrap();
    assert_eq!(t.nodes.len(), 1);
    let n = &t.nodes[0];
    assert_eq!((n.id, n.cpus.to_list()), (0, "0-3".to_string()));
    assert_eq!(
        (n.mem_total_kib, n.mem_free_kib),
        (Some(8056372), Some(6000000))
    );
    assert_eq!(t.summary().mem_total_kib, Some(8056372));
    assert_eq!(t.node_of_cpu(3), Some(0));
    assert!(note_with(&t, "no NUMA node directories").contains("8056372 kB"));

    // Without proc/meminfo the size is unknown, not 0.
    fs::remove_file(root.join("proc/meminfo")).unwrap();
    let t = Topology::from_root(root).unwrap();
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].mem_total_kib, None);
    assert_eq!(t.summary().mem_total_kib, None);
    assert!(note_with(&t, "no NUMA node directories").contains("unknown size"));
}

/// A 128-CPU ia64 machine as old kernels show it (hwloc's 128ia64-17n4s2c snapshot): no
/// cpu/online, present or possible; every cpuN/online empty, cpu0 without one; 64 dual-core
/// packages with sparse ids, 16 nodes of 8 CPUs and a memory-only 17th.
#[test]
fn old_ia64_tree_with_empty_online_files_has_128_online_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for c in 0..128u32 {
        let d = format!("sys/devices/system/cpu/cpu{c}");
        if c != 0 {
            put(root, &format!("{d}/online"), "");
        }
        let package = c / 2;
        // Package ids as that machine's: node << 16 | board << 8 | socket.
        let id = ((package / 4) << 16) | ((package % 4 / 2) << 8) | (package % 2);
        put(
            root,
            &format!("{d}/topology/physical_package_id"),
            &format!("{id}\n"),
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
        let first = c & !1;
        put(
            root,
            &format!("{d}/topology/core_siblings_list"),
            &format!("{first}-{}\n", first + 1),
        );
    }
    for n in 0..17u32 {
        let cpulist = if n < 16 {
            format!("{}-{}", n * 8, n * 8 + 7)
        } else {
            String::new()
        };
        let row: Vec<String> = (0..17u32)
            .map(|m| match (n, m) {
                _ if n == m => "10",
                (16, _) | (_, 16) => "14",
                _ if n / 4 == m / 4 => "17",
                _ => "20",
            })
            .map(String::from)
            .collect();
        node(root, n, &cpulist, 95, &row.join(" "));
    }
    let t = Topology::from_root(root).unwrap();
    assert_eq!(t.online.len(), 128);
    assert_eq!(t.online, CpuSet::parse_list("0-127").unwrap());
    assert!(t.offline.is_empty());
    let s = t.summary();
    assert_eq!(
        (s.packages, s.cores, s.pus, s.nodes, s.memory_only_nodes),
        (64, 128, 128, 17, 1)
    );
    assert_eq!(t.distance(0, 5), Some(20));
    assert!(note_with(&t, "cpuN/online is empty").contains("CPU(s) 1-127"));
    assert!(note_with(&t, "no cpuN/online").contains("CPU(s) 0:"));
}

#[test]
fn unreadable_cpu_online_files_mean_online_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 4);
    fs::remove_file(root.join("sys/devices/system/cpu/online")).unwrap();
    for c in 0..4 {
        put(
            root,
            &format!("sys/devices/system/cpu/cpu{c}/online"),
            "1\n",
        );
    }
    put(root, "sys/devices/system/cpu/cpu3/online", "0\n");
    use std::os::unix::fs::PermissionsExt;
    let locked = root.join("sys/devices/system/cpu/cpu1/online");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let t = without_file_permission_override(|| Topology::from_root(root).unwrap());
    assert_eq!(t.online, CpuSet::parse_list("0-2").unwrap());
    assert_eq!(t.offline, CpuSet::parse_list("3").unwrap());
    let note = note_with(&t, "unreadable");
    assert!(
        note.contains("CPU(s) 1 (") && note.contains("taken as online"),
        "{note}"
    );
}

#[test]
fn a_malformed_online_file_is_an_error_that_quotes_it() {
    for (file, text, why) in [
        ("online", "0-", "not a CPU list"),
        ("online", "abc", "not a CPU list"),
        ("online", "3-1", "runs backwards"),
        ("cpu2/online", "yes", "not 0 or 1"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        cpus(root, 4);
        put(
            root,
            &format!("sys/devices/system/cpu/{file}"),
            &format!("{text}\n"),
        );
        let e = Topology::from_root(root).unwrap_err().to_string();
        assert!(
            e.contains(&format!("cpu/{file} holds \"{text}\": ")) && e.contains(why),
            "{file} = {text}: {e}"
        );
    }
    // Shown-only lists are noted, not fatal.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 4);
    put(root, "sys/devices/system/cpu/possible", "0-x\n");
    let t = Topology::from_root(root).unwrap();
    assert_eq!(t.possible, None);
    note_with(&t, "cpu/possible holds \"0-x\": not a CPU list");
}

#[test]
fn hostile_files_are_refused_by_name() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    cpus(root, 2);
    node(root, 0, "0-1", 1, "10");
    let meminfo = root.join("sys/devices/system/node/node0/meminfo");

    fs::remove_file(&meminfo).unwrap();
    symlink("/dev/zero", &meminfo).unwrap();
    let e = Topology::from_root(root).unwrap_err().to_string();
    assert!(
        e.contains("node0/meminfo: leads out of the tree") && e.contains("/dev/zero"),
        "{e}"
    );

    // A sparse file: no disk used, yet 1 GiB if read whole.
    fs::remove_file(&meminfo).unwrap();
    fs::File::create(&meminfo)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let e = Topology::from_root(root).unwrap_err().to_string();
    assert!(
        e.contains("node0/meminfo: holds more than 1 MiB, the limit for a sysfs file"),
        "{e}"
    );

    // Symlinks that stay inside are followed, as sysfs's own are.
    fs::remove_file(&meminfo).unwrap();
    put(root, "elsewhere/meminfo", "Node 0 MemTotal: 2048 kB\n");
    symlink("../../../../../elsewhere/meminfo", &meminfo).unwrap();
    let t = Topology::from_root(root).unwrap();
    assert_eq!(t.nodes[0].mem_total_kib, Some(2048));
}
