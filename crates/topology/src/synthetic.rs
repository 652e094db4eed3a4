//! Synthetic machines from a short spec, for testing topology-aware logic on any machine.

use crate::cpuset::CpuSet;
use crate::{
    sysfs, Cache, CacheKind, Core, Machine, Node, Package, Source, Topology, TopologyError,
};

pub const SYNTHETIC_GRAMMAR: &str = "\
synthetic spec grammar:  PACKAGES x CORES x THREADS [:OPTION]...
  PACKAGES x CORES x THREADS   e.g. 2x8x2 = 2 packages, 8 cores each, 2 hardware threads per core
  :nN        N NUMA nodes per package (sub-NUMA clustering), cores split evenly; default 1
  :mN        N extra memory-only (CPU-less) nodes, as CXL memory expanders; default 0
  :mem=G     memory per node in GiB; default 16
CPU numbers follow Linux on x86: first thread of every core, package by package, then the
second threads (so on 2x8x2 the siblings of CPU 0 are 0 and 16). Node ids: package p, sub-node
k is node p*N+k; memory-only node i is node P*N+i, attached to package i mod P.
Distances: 10 local, 12 between nodes of one package, 21 across packages; a memory-only node
is 14 from the nodes of its package, 24 from the others, 28 from other memory-only nodes.
Caches: per core L1d 48K, L1i 32K, L2 2048K; one L3 per node of 1536K per core.";

const MAX_SYNTHETIC_PUS: u64 = 65_536;
const MAX_SYNTHETIC_NODES: u64 = 1024;

struct Spec {
    packages: u32,
    cores: u32,
    threads: u32,
    nodes_per_package: u32,
    memory_only: u32,
    mem_gib: u64,
}

fn parse(spec: &str) -> Result<Spec, TopologyError> {
    let bad = |why: String| TopologyError::BadSpec {
        spec: spec.to_string(),
        why,
    };
    let mut parts = spec.trim().split(':');
    let shape = parts.next().unwrap_or_default();
    let dims: Vec<&str> = shape.split('x').collect();
    if dims.len() != 3 {
        return Err(bad(format!(
            "`{shape}` should be three numbers joined by x, like 2x8x2"
        )));
    }
    let num = |s: &str, what: &str| -> Result<u32, TopologyError> {
        match s.trim().parse::<u32>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(bad(format!(
                "{what} `{s}` must be a whole number of at least 1"
            ))),
        }
    };
    let mut out = Spec {
        packages: num(dims[0], "the package count")?,
        cores: num(dims[1], "the cores per package")?,
        threads: num(dims[2], "the threads per core")?,
        nodes_per_package: 1,
        memory_only: 0,
        mem_gib: 16,
    };
    for opt in parts {
        if let Some(v) = opt.strip_prefix("mem=") {
            out.mem_gib = u64::from(num(v, "mem=")?);
        } else if let Some(v) = opt.strip_prefix('n') {
            out.nodes_per_package = num(v, "nodes per package")?;
        } else if let Some(v) = opt.strip_prefix('m') {
            out.memory_only = v
                .parse()
                .map_err(|_| bad(format!("memory-only node count `{v}` is not a number")))?;
        } else {
            return Err(bad(format!("unknown option `:{opt}`")));
        }
    }
    let pus = u64::from(out.packages) * u64::from(out.cores) * u64::from(out.threads);
    if pus > MAX_SYNTHETIC_PUS {
        return Err(bad(format!(
            "{pus} hardware threads is more than the {MAX_SYNTHETIC_PUS} supported"
        )));
    }
    if !out.cores.is_multiple_of(out.nodes_per_package) {
        return Err(bad(format!(
            "{} cores per package cannot be split evenly into {} nodes",
            out.cores, out.nodes_per_package
        )));
    }
    let nodes =
        u64::from(out.packages) * u64::from(out.nodes_per_package) + u64::from(out.memory_only);
    if nodes > MAX_SYNTHETIC_NODES {
        return Err(bad(format!(
            "{nodes} NUMA nodes is more than the {MAX_SYNTHETIC_NODES} Linux supports (MAX_NUMNODES)"
        )));
    }
    Ok(out)
}

pub(crate) fn build(text: &str) -> Result<Topology, TopologyError> {
    let s = parse(text)?;
    let per_thread = s.packages * s.cores;
    let cpu = |p: u32, c: u32, t: u32| t * per_thread + p * s.cores + c;
    let cores_per_node = s.cores / s.nodes_per_package;
    let mem_kib = s.mem_gib * 1024 * 1024;

    let mut packages = Vec::new();
    let mut cores = Vec::new();
    let mut caches = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    for p in 0..s.packages {
        packages.push(Package {
            os_id: Some(i64::from(p)),
            cpus: (0..s.cores)
                .flat_map(|c| (0..s.threads).map(move |t| cpu(p, c, t)))
                .collect(),
        });
        for k in 0..s.nodes_per_package {
            let node_cpus: CpuSet = (k * cores_per_node..(k + 1) * cores_per_node)
                .flat_map(|c| (0..s.threads).map(move |t| cpu(p, c, t)))
                .collect();
            caches.push(Cache {
                level: 3,
                kind: CacheKind::Unified,
                size_kib: Some(1536 * u64::from(cores_per_node)),
                line_bytes: Some(64),
                ways: Some(12),
                cpus: node_cpus.clone(),
            });
            nodes.push(Node {
                id: p * s.nodes_per_package + k,
                cpus: node_cpus,
                offline_cpus: CpuSet::new(),
                mem_total_kib: Some(mem_kib),
                mem_free_kib: None,
            });
        }
        for c in 0..s.cores {
            let threads: CpuSet = (0..s.threads).map(|t| cpu(p, c, t)).collect();
            for (level, kind, size) in [
                (1, CacheKind::Data, 48),
                (1, CacheKind::Instruction, 32),
                (2, CacheKind::Unified, 2048),
            ] {
                caches.push(Cache {
                    level,
                    kind,
                    size_kib: Some(size),
                    line_bytes: Some(64),
                    ways: Some(if level == 1 { 12 } else { 16 }),
                    cpus: threads.clone(),
                });
            }
            cores.push(Core {
                package: p as usize,
                os_core_id: Some(i64::from(c)),
                cpus: threads,
                kind: None,
            });
        }
    }
    let cpu_nodes = s.packages * s.nodes_per_package;
    for i in 0..s.memory_only {
        nodes.push(Node {
            id: cpu_nodes + i,
            cpus: CpuSet::new(),
            offline_cpus: CpuSet::new(),
            mem_total_kib: Some(mem_kib),
            mem_free_kib: None,
        });
    }
    // The package a node belongs to (memory-only nodes: the one they are attached to).
    let home = |n: u32| {
        if n < cpu_nodes {
            n / s.nodes_per_package
        } else {
            (n - cpu_nodes) % s.packages
        }
    };
    let distance = |a: u32, b: u32| -> u32 {
        let (a_mem, b_mem) = (a >= cpu_nodes, b >= cpu_nodes);
        match () {
            _ if a == b => 10,
            _ if a_mem && b_mem => 28,
            _ if a_mem || b_mem => {
                if home(a) == home(b) {
                    14
                } else {
                    24
                }
            }
            _ if home(a) == home(b) => 12,
            _ => 21,
        }
    };
    let ids: Vec<u32> = nodes.iter().map(|n| n.id).collect();
    let distances = ids
        .iter()
        .map(|&a| ids.iter().map(|&b| distance(a, b)).collect())
        .collect();
    caches.sort_by_key(|c| (c.level, c.kind, c.cpus.first()));
    let online: CpuSet = (0..s.packages * s.cores * s.threads).collect();
    let mut t = Topology {
        source: Source::Synthetic {
            spec: text.to_string(),
        },
        machine: Machine {
            model: Some(format!("synthetic {text}")),
            arch: None,
        },
        possible: Some(online.clone()),
        present: Some(online.clone()),
        online,
        offline: CpuSet::new(),
        packages,
        dies: Vec::new(),
        clusters: Vec::new(),
        cores,
        pus: Vec::new(),
        caches,
        nodes,
        distances: Some(distances),
        core_kinds: Vec::new(),
        notes: Vec::new(),
    };
    sysfs::finish(&mut t);
    Ok(t)
}
