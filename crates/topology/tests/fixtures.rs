//! The topology reader against real machines' sysfs snapshots (fixtures/topology, from hwloc's
//! test suite). Each fixture's EXPECTED.txt lists facts derived by hand from its files; the
//! common ones are parsed from it and compared, the special ones are asserted per fixture.

use std::collections::BTreeMap;
use std::path::PathBuf;
use topology::{CacheKind, CpuSet, FillOrder, Topology};

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/topology")
        .join(name)
}

fn load(name: &str) -> Topology {
    Topology::from_root(&fixture_dir(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn set(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

/// The facts EXPECTED.txt states in its machine-generated listing.
#[derive(Debug, Default)]
struct Expected {
    packages: Option<usize>,
    dies: Option<usize>,
    nodes: usize,
    cores: usize,
    pus: usize,
    clusters: Option<usize>,
    online: CpuSet,
    /// node id -> (cpus, MemTotal kB)
    node_cpus: BTreeMap<u32, (CpuSet, u64)>,
    /// (row node, column node) -> distance
    distances: BTreeMap<(u32, u32), u32>,
    /// L3 groups as (cpus, size text); from shared_cpu_map where both views are listed.
    l3: Vec<(CpuSet, String)>,
}

fn first_number(s: &str) -> Option<usize> {
    s.split_whitespace().next()?.parse().ok()
}

fn parse_expected(name: &str) -> Expected {
    let text = std::fs::read_to_string(fixture_dir(name).join("EXPECTED.txt")).unwrap();
    let mut e = Expected::default();
    let mut columns: Vec<u32> = Vec::new();
    let mut in_matrix = false;
    let mut l3_sections: Vec<Vec<(CpuSet, String)>> = Vec::new();
    for line in text.lines() {
        if line.starts_with("## Cross-check") {
            break; // the rest compares with hwloc's views, not facts of the files
        }
        let t = line.trim();
        // Summary keys are unindented; indented lines with the same words are other views.
        let after = |key: &str| line.strip_prefix(key).map(str::trim);
        if let Some(v) = after("packages:") {
            e.packages = first_number(v);
        } else if let Some(v) = after("dies:") {
            e.dies = first_number(v);
        } else if let Some(v) = after("numa_nodes:") {
            e.nodes = first_number(v).unwrap();
        } else if let Some(v) = after("cores:") {
            e.cores = first_number(v).unwrap();
        } else if let Some(v) = after("pus:") {
            e.pus = first_number(v).unwrap();
        } else if let Some(v) = after("clusters:") {
            e.clusters = first_number(v);
        } else if let Some(v) = after("online CPUs (PUs):") {
            e.online = set(v.split_whitespace().next().unwrap());
        } else if t.starts_with("node ") && t.contains("MemTotal") && t.contains(": ") {
            // "node 1: 1,3,...  (12 cpus; MemTotal 67108864 kB)   <-- cpulist=... but cpumap=5,7,..."
            let (head, rest) = t.split_once(": ").unwrap();
            let id: u32 = head["node ".len()..].parse().unwrap();
            let mut cpus = set(rest.split_whitespace().next().unwrap());
            if let Some(map) = rest.split("but cpumap=").nth(1) {
                cpus = set(map.split_whitespace().next().unwrap());
            }
            let mem: u64 = rest
                .split("MemTotal ")
                .nth(1)
                .and_then(|m| m.split_whitespace().next())
                .unwrap()
                .parse()
                .unwrap();
            e.node_cpus.insert(id, (cpus.intersection(&e.online), mem));
        } else if line.starts_with("distance matrix") {
            in_matrix = true;
            columns.clear();
        } else if in_matrix {
            let words: Vec<&str> = t.split_whitespace().collect();
            if !words.is_empty() && words.iter().all(|w| w.starts_with('n')) {
                columns = words.iter().map(|w| w[1..].parse().unwrap()).collect();
            } else if words.first().is_some_and(|w| w.starts_with('n')) {
                let row: u32 = words[0][1..].parse().unwrap();
                for (c, v) in columns.iter().zip(&words[1..]) {
                    e.distances.insert((row, *c), v.parse().unwrap());
                }
            } else {
                in_matrix = false;
            }
        } else if t.starts_with("L3 sharing groups") {
            l3_sections.push(Vec::new());
        } else if let Some(v) = t.strip_prefix("L3 #") {
            // "L3 #0: cpus 0-3  (4 cpus, 5118K)"
            let cpus = v
                .split("cpus ")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            let size = v.rsplit(", ").next().unwrap().trim_end_matches(')');
            l3_sections
                .last_mut()
                .unwrap()
                .push((set(cpus), size.to_string()));
        }
    }
    e.l3 = l3_sections.pop().unwrap_or_default();
    e
}

fn size_text(kib: Option<u64>) -> String {
    format!("{}K", kib.unwrap())
}

/// Compares everything EXPECTED.txt lists; returns the topology for fixture-specific checks.
fn check_common(name: &str) -> Topology {
    let e = parse_expected(name);
    let t = load(name);
    let s = t.summary();
    if let Some(p) = e.packages {
        assert_eq!(s.packages, p, "{name}: packages");
    }
    if let Some(d) = e.dies {
        assert_eq!(s.dies, d, "{name}: dies");
    }
    if let Some(c) = e.clusters {
        assert_eq!(t.clusters.len(), c, "{name}: clusters");
    }
    assert_eq!(s.nodes, e.nodes, "{name}: NUMA nodes");
    assert_eq!(s.cores, e.cores, "{name}: cores");
    assert_eq!(s.pus, e.pus, "{name}: PUs");
    assert_eq!(t.online, e.online, "{name}: online CPUs");
    assert_eq!(e.node_cpus.len(), e.nodes, "{name}: EXPECTED parse");
    for (id, (cpus, mem)) in &e.node_cpus {
        let node = t
            .node(*id)
            .unwrap_or_else(|| panic!("{name}: node {id} missing"));
        assert_eq!(&node.cpus, cpus, "{name}: cpus of node {id}");
        assert_eq!(
            node.mem_total_kib,
            Some(*mem),
            "{name}: memory of node {id}"
        );
    }
    assert!(!e.distances.is_empty(), "{name}: EXPECTED has no distances");
    for (&(a, b), &d) in &e.distances {
        if t.node(a).is_some() && t.node(b).is_some() {
            assert_eq!(t.distance(a, b), Some(d), "{name}: distance {a}->{b}");
        }
    }
    let l3: Vec<(CpuSet, String)> = t
        .caches_at(3)
        .map(|c| (c.cpus.clone(), size_text(c.size_kib)))
        .collect();
    assert_eq!(l3, e.l3, "{name}: L3 groups");
    // Structural invariants every reading must keep.
    let covered: CpuSet = t.cores.iter().fold(CpuSet::new(), |a, c| a.union(&c.cpus));
    assert_eq!(
        covered, t.online,
        "{name}: cores must cover the online CPUs"
    );
    for order in [
        FillOrder::Compact,
        FillOrder::SocketFirst,
        FillOrder::Spread,
    ] {
        let mut v = t.fill_order(order);
        v.sort_unstable();
        assert_eq!(v, t.online.iter().collect::<Vec<_>>(), "{name}: {order:?}");
    }
    t
}

#[test]
fn amd_opteron6134_cores_by_thread_siblings_not_core_id() {
    let t = check_common("amd-opteron6134-4s-8n");
    assert_eq!(
        t.cores.len(),
        32,
        "core_id repeats per die: must not give 16 cores"
    );
    assert_eq!(t.summary().smt, 1);
    assert_eq!(t.nodes_by_distance(0), vec![0, 1, 2, 4, 6, 3, 5, 7]);
    assert_eq!(t.node_of_cpu(13), Some(3));
}

#[test]
fn amd_bulldozer_prefers_masks_over_stale_lists() {
    let t = check_common("amd-opteron6276-4s-8n-bulldozer");
    assert_eq!((t.cores.len(), t.summary().smt), (32, 2));
    let l1i: Vec<_> = t
        .caches
        .iter()
        .filter(|c| c.level == 1 && c.kind == CacheKind::Instruction)
        .collect();
    assert_eq!(l1i.len(), 32, "L1i per compute unit, from shared_cpu_map");
    assert!(l1i.iter().all(|c| c.cpus.len() == 2));
    assert_eq!(t.cache_of_cpu(5, 2).unwrap().cpus, set("4-5"));
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("shared_cpu_list and shared_cpu_map disagree")),
        "the list/mask disagreement must be reported: {:?}",
        t.notes
    );
}

#[test]
fn ibm_power7_sparse_nodes_and_no_package_ids() {
    let t = check_common("ibm-power7-8n-smt4");
    assert_eq!(
        t.packages.len(),
        64,
        "packages from core_siblings, as hwloc"
    );
    assert!(t.packages.iter().all(|p| p.os_id.is_none()));
    assert!(t.notes.iter().any(|n| n.contains("physical_package_id")));
    let ids: Vec<u32> = t.nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 1, 4, 5, 8, 9, 12, 13]);
    assert_eq!(t.distance(4, 5), Some(20));
    assert_eq!(t.distance(4, 13), Some(40));
    assert_eq!(t.nodes_by_distance(12)[..2], [12, 13]);
    assert_eq!(t.siblings(6).unwrap(), &set("4-7"));
    assert_eq!(t.caches_at(3).count(), 64);
}

#[test]
fn intel_haswell_offline_cpus_and_offline_node() {
    let t = check_common("intel-haswell-2s-offline-cpu0-node0");
    assert_eq!(t.offline, set("0-3,21-23"));
    assert_eq!(t.node_of_cpu(4), None, "node 0 is offline");
    assert_eq!(t.node_of_cpu(5), Some(1));
    assert_eq!(t.cpus_of_node(1).unwrap(), &set("5,7,9,11,13,15,17,19"));
    assert_eq!(t.distance(1, 1), Some(10));
    assert!(t
        .notes
        .iter()
        .any(|n| n.contains("belong to no online NUMA node")));
    assert!(t
        .notes
        .iter()
        .any(|n| n.contains("distance rows have 2 entries")));
    assert_eq!(t.possible, Some(set("0-191")));
}

fn kinds_of(t: &Topology) -> Vec<(String, CpuSet)> {
    t.core_kinds
        .iter()
        .map(|k| (k.name.clone(), k.cpus.clone()))
        .collect()
}

#[test]
fn intel_raptorlake_hybrid_core_kinds() {
    let t = check_common("intel-raptorlake-hybrid");
    let kinds = kinds_of(&t);
    assert_eq!(
        kinds,
        [
            ("performance".to_string(), set("0-11")),
            ("efficiency".to_string(), set("12-19"))
        ]
    );
    assert_eq!(t.cores.iter().filter(|c| c.cpus.len() == 2).count(), 6);
    assert_eq!(t.cache_of_cpu(13, 2).unwrap().cpus, set("12-15"));
    assert_eq!(t.cache_of_cpu(13, 2).unwrap().size_kib, Some(2048));
    assert_eq!(t.cores[t.pu(12).unwrap().core].kind, Some(1));
}

#[test]
fn intel_xeon4108_smt_siblings_and_sparse_possible() {
    let t = check_common("intel-xeon4108-2s-ht");
    assert_eq!(t.siblings(0).unwrap(), &set("0,16"));
    assert_eq!(t.possible, Some(set("0-111")));
    assert_eq!(
        t.fill_order(FillOrder::SocketFirst)[..9],
        [0, 1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(t.fill_order(FillOrder::Spread)[..4], [0, 8, 1, 9]);
    assert_eq!(t.fill_order(FillOrder::Compact)[..4], [0, 16, 1, 17]);
    assert!(t.core_kinds.is_empty());
}

#[test]
fn nvidia_gb10_arm_kinds_from_midr() {
    let t = check_common("nvidia-gb10-arm-hybrid");
    assert_eq!(t.packages[0].os_id, Some(36));
    let kinds = kinds_of(&t);
    assert_eq!(
        kinds,
        [
            ("Cortex-A725".to_string(), set("0-4,10-14")),
            ("Cortex-X925".to_string(), set("5-9,15-19"))
        ]
    );
    assert_eq!(t.machine.arch.as_deref(), Some("aarch64"));
}

#[test]
fn every_fixture_has_a_test() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/topology");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    let tested = [
        "amd-opteron6134-4s-8n",
        "amd-opteron6276-4s-8n-bulldozer",
        "ibm-power7-8n-smt4",
        "intel-haswell-2s-offline-cpu0-node0",
        "intel-raptorlake-hybrid",
        "intel-xeon4108-2s-ht",
        "nvidia-gb10-arm-hybrid",
    ];
    assert_eq!(names, tested, "a fixture was added: give it a test");
}

#[test]
fn live_machine_reads() {
    let t = Topology::live().expect("this machine's /sys must be readable");
    assert!(!t.pus.is_empty());
    assert_eq!(t.pus.len(), t.online.len());
}

#[test]
fn missing_root_is_a_clear_error() {
    let err = Topology::from_root(std::path::Path::new("/nonexistent/snapshot"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("sys/devices/system/cpu"), "{err}");
    assert!(err.contains("does not exist"), "{err}");
}
