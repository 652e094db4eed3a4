//! The machine's topology as a value: packages, dies, clusters, cores, hardware threads (PUs),
//! caches, NUMA nodes and their distances, and core kinds on hybrid CPUs.
//!
//! A [`Topology`] comes from the live `/sys` ([`Topology::live`]), from a sysfs snapshot
//! directory laid out like `/` ([`Topology::from_root`]), or from a synthetic spec such as
//! `2x8x2:n2` ([`Topology::synthetic`]). Everything topology-aware in contend (load patterns,
//! pinning, reports) takes this value, which is how NUMA logic is tested on a one-node machine.

pub mod cpuset;
mod kinds;
mod synthetic;
mod sysfs;
mod tree;

pub use cpuset::{CpuSet, CpuSetError};
pub use synthetic::SYNTHETIC_GRAMMAR;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why a topology could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("{path}: {why}")]
    Unreadable { path: PathBuf, why: String },
    /// A file whose contents cannot be used and cannot be repaired around. `text` is quoted
    /// (shortened when long) in the message.
    #[error("{path} holds {text:?}: {why}")]
    Malformed {
        path: PathBuf,
        text: String,
        why: String,
    },
    #[error(
        "bad synthetic spec `{spec}`: {why} (for the grammar see `contend topo --help-synthetic`)"
    )]
    BadSpec { spec: String, why: String },
}

/// Where the facts came from.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// This machine's own `/sys` and `/proc`.
    Live,
    /// A snapshot directory that holds `sys/devices/system/{cpu,node}` (and maybe `proc/cpuinfo`).
    Snapshot { root: PathBuf },
    /// Made from a spec; no machine was read.
    Synthetic { spec: String },
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    /// `model name` (x86), `cpu` (POWER) or the core names (Arm) from /proc/cpuinfo.
    pub model: Option<String>,
    /// Instruction-set family guessed from /proc/cpuinfo: x86_64, aarch64, ppc64.
    pub arch: Option<String>,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Package {
    /// `physical_package_id`; `None` where the kernel does not expose it (-1) and packages were
    /// derived from `core_siblings`.
    pub os_id: Option<i64>,
    pub cpus: CpuSet,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Die {
    /// Index into [`Topology::packages`].
    pub package: usize,
    pub os_id: i64,
    pub cpus: CpuSet,
}

/// A group of cores sharing something below the package (an L2 on Intel E-cores, a cluster on
/// Arm); from `cluster_cpus`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cluster {
    pub os_id: Option<i64>,
    pub cpus: CpuSet,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Core {
    /// Index into [`Topology::packages`].
    pub package: usize,
    /// `core_id` as the kernel printed it (not unique: it repeats across dies and packages).
    pub os_core_id: Option<i64>,
    /// The hardware threads of this core (its `thread_siblings`, restricted to online CPUs).
    pub cpus: CpuSet,
    /// Index into [`Topology::core_kinds`] on hybrid machines.
    pub kind: Option<usize>,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Pu {
    /// The OS CPU number.
    pub cpu: u32,
    /// Index into [`Topology::cores`].
    pub core: usize,
    /// Index into [`Topology::packages`].
    pub package: usize,
    /// The NUMA node holding this CPU, if any (a CPU whose node is offline has none).
    pub node: Option<u32>,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum CacheKind {
    Data,
    Instruction,
    Unified,
}

impl CacheKind {
    pub fn suffix(self) -> &'static str {
        match self {
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
            CacheKind::Unified => "",
        }
    }
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cache {
    pub level: u8,
    pub kind: CacheKind,
    pub size_kib: Option<u64>,
    pub line_bytes: Option<u32>,
    pub ways: Option<u32>,
    /// The CPUs sharing this cache instance (online CPUs only).
    pub cpus: CpuSet,
}

impl Cache {
    /// `L1d`, `L2`, `L3`...
    pub fn name(&self) -> String {
        format!("L{}{}", self.level, self.kind.suffix())
    }
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Node {
    pub id: u32,
    /// Online CPUs of this node.
    pub cpus: CpuSet,
    /// CPUs of this node that are offline: a node with only offline CPUs is not memory-only.
    pub offline_cpus: CpuSet,
    pub mem_total_kib: Option<u64>,
    pub mem_free_kib: Option<u64>,
}

impl Node {
    /// A node with memory and no CPUs at all (CXL, HBM, persistent memory).
    pub fn is_memory_only(&self) -> bool {
        self.cpus.is_empty() && self.offline_cpus.is_empty()
    }
}

/// A kind of core on a hybrid machine (P/E cores, big/little).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CoreKind {
    pub name: String,
    pub cpus: CpuSet,
    /// Which files decided it, e.g. `/sys/devices/cpu_core/cpus` or `acpi_cppc/highest_perf`.
    pub evidence: String,
}

/// Orders in which CPUs are handed out to threads.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FillOrder {
    /// All hardware threads of a core, then the next core: SMT siblings are used first.
    Compact,
    /// One PU per core, package by package (node by node inside a package), then the second
    /// hardware thread of every core in the same order: stays on one socket as long as there are
    /// free cores there.
    SocketFirst,
    /// One PU per core, round-robin over NUMA nodes (node 0, node 1, ..., node 0 again), then the
    /// second hardware threads likewise: spreads memory bandwidth and caches.
    Spread,
}

impl std::str::FromStr for FillOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "compact" => Ok(FillOrder::Compact),
            "socket-first" => Ok(FillOrder::SocketFirst),
            "spread" => Ok(FillOrder::Spread),
            _ => Err(format!(
                "unknown fill order `{s}`: use compact, socket-first or spread"
            )),
        }
    }
}

// Fields other than `source` and `online` default when absent, so that a topology recorded
// by an older contend (meta.json) still reads.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Topology {
    pub source: Source,
    #[serde(default)]
    pub machine: Machine,
    /// `cpu/possible` and `cpu/present` where the kernel has them.
    #[serde(default)]
    pub possible: Option<CpuSet>,
    #[serde(default)]
    pub present: Option<CpuSet>,
    pub online: CpuSet,
    /// CPUs that have a `cpuN` directory but are offline.
    #[serde(default)]
    pub offline: CpuSet,
    #[serde(default)]
    pub packages: Vec<Package>,
    /// Empty where the kernel has no `die_id`.
    #[serde(default)]
    pub dies: Vec<Die>,
    /// Empty where the kernel has no `cluster_cpus`.
    #[serde(default)]
    pub clusters: Vec<Cluster>,
    #[serde(default)]
    pub cores: Vec<Core>,
    /// One per online CPU, ascending by CPU number.
    #[serde(default)]
    pub pus: Vec<Pu>,
    #[serde(default)]
    pub caches: Vec<Cache>,
    /// Online NUMA nodes, ascending by id (ids may be sparse).
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// `distances[i][j]` from `nodes[i]` to `nodes[j]` (ACPI SLIT units, 10 = local); `None`
    /// when the kernel gave no usable matrix.
    #[serde(default)]
    pub distances: Option<Vec<Vec<u32>>>,
    /// Non-empty only on hybrid machines (more than one kind found).
    #[serde(default)]
    pub core_kinds: Vec<CoreKind>,
    /// Inconsistencies found while reading and how they were resolved.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A topology with its counts: what `contend topo --json` prints and what meta.json keeps
/// under `topology` (the counts first, then every fact at the same level).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Described {
    pub summary: Summary,
    #[serde(flatten)]
    pub topology: Topology,
}

impl Described {
    pub fn of(topology: Topology) -> Described {
        Described {
            summary: topology.summary(),
            topology,
        }
    }
}

/// Counts, for headers and `--json`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Summary {
    pub packages: usize,
    pub dies: usize,
    pub nodes: usize,
    pub nodes_with_cpus: usize,
    pub memory_only_nodes: usize,
    pub cores: usize,
    pub pus: usize,
    pub smt: usize,
    pub l3_groups: usize,
    pub mem_total_kib: Option<u64>,
}

impl Topology {
    /// This machine, from `/sys` and `/proc`.
    pub fn live() -> Result<Topology, TopologyError> {
        let mut t = sysfs::read(Path::new("/"))?;
        t.source = Source::Live;
        Ok(t)
    }

    /// A snapshot whose root holds `sys/devices/system/cpu` (as `/` does).
    pub fn from_root(root: &Path) -> Result<Topology, TopologyError> {
        sysfs::read(root)
    }

    /// A machine built from a spec; see [`SYNTHETIC_GRAMMAR`].
    pub fn synthetic(spec: &str) -> Result<Topology, TopologyError> {
        synthetic::build(spec)
    }

    pub fn summary(&self) -> Summary {
        let mem: Vec<u64> = self.nodes.iter().filter_map(|n| n.mem_total_kib).collect();
        Summary {
            packages: self.packages.len(),
            dies: self.dies.len(),
            nodes: self.nodes.len(),
            nodes_with_cpus: self.nodes.iter().filter(|n| !n.cpus.is_empty()).count(),
            memory_only_nodes: self.nodes.iter().filter(|n| n.is_memory_only()).count(),
            cores: self.cores.len(),
            pus: self.pus.len(),
            smt: self.max_threads_per_core(),
            l3_groups: self.caches_at(3).count(),
            mem_total_kib: (mem.len() == self.nodes.len() && !mem.is_empty())
                .then(|| mem.iter().fold(0u64, |a, &b| a.saturating_add(b))),
        }
    }

    /// The largest number of hardware threads of any core (1 without SMT).
    pub fn max_threads_per_core(&self) -> usize {
        self.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(0)
    }

    pub fn pu(&self, cpu: u32) -> Option<&Pu> {
        self.pus
            .binary_search_by_key(&cpu, |p| p.cpu)
            .ok()
            .map(|i| &self.pus[i])
    }

    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    fn node_index(&self, id: u32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The online CPUs of node `id`.
    pub fn cpus_of_node(&self, id: u32) -> Option<&CpuSet> {
        self.node(id).map(|n| &n.cpus)
    }

    /// The NUMA node of an online CPU (`None` for unknown CPUs and CPUs whose node is offline).
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.pu(cpu).and_then(|p| p.node)
    }

    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        let (i, j) = (self.node_index(from)?, self.node_index(to)?);
        self.distances.as_ref().map(|d| d[i][j])
    }

    /// All nodes, nearest first from `from` (itself first; ties by id). Without a distance
    /// matrix, `from` then ascending ids.
    pub fn nodes_by_distance(&self, from: u32) -> Vec<u32> {
        let mut ids: Vec<u32> = self.nodes.iter().map(|n| n.id).collect();
        ids.sort_by_key(|&id| {
            let d = if id == from {
                0
            } else {
                self.distance(from, id).unwrap_or(u32::MAX)
            };
            (d, id)
        });
        ids
    }

    /// The hardware threads sharing `cpu`'s core, `cpu` included.
    pub fn siblings(&self, cpu: u32) -> Option<&CpuSet> {
        self.pu(cpu).map(|p| &self.cores[p.core].cpus)
    }

    pub fn package_of_cpu(&self, cpu: u32) -> Option<usize> {
        self.pu(cpu).map(|p| p.package)
    }

    /// Cache instances at a level, data or unified (the instruction caches left out).
    pub fn caches_at(&self, level: u8) -> impl Iterator<Item = &Cache> {
        self.caches
            .iter()
            .filter(move |c| c.level == level && c.kind != CacheKind::Instruction)
    }

    /// The data or unified cache at `level` that `cpu` uses.
    pub fn cache_of_cpu(&self, cpu: u32, level: u8) -> Option<&Cache> {
        self.caches_at(level).find(|c| c.cpus.contains(cpu))
    }

    /// Online CPUs in the order threads should be given them. Every online CPU appears once.
    pub fn fill_order(&self, order: FillOrder) -> Vec<u32> {
        match order {
            FillOrder::Compact => self
                .cores_in_place_order()
                .iter()
                .flat_map(|&c| self.cores[c].cpus.iter())
                .collect(),
            FillOrder::SocketFirst => self.by_thread_rank(self.cores_in_place_order()),
            FillOrder::Spread => {
                // Groups of cores sharing a node (their package where the node is unknown), in
                // place order; then the first node of every package, the second of every
                // package, ...: packages alternate before the nodes inside one package do, as
                // hwloc's scatter and OpenMP's spread place threads.
                let mut groups: Vec<(usize, Option<u32>, Vec<usize>)> = Vec::new();
                for c in self.cores_in_place_order() {
                    let core = &self.cores[c];
                    let node = core.cpus.first().and_then(|cpu| self.node_of_cpu(cpu));
                    match groups
                        .iter_mut()
                        .find(|(p, n, _)| *p == core.package && *n == node)
                    {
                        Some((_, _, v)) => v.push(c),
                        None => groups.push((core.package, node, vec![c])),
                    }
                }
                let mut seen_in_package: std::collections::HashMap<usize, usize> =
                    std::collections::HashMap::new();
                let mut ranked: Vec<(usize, usize, Vec<usize>)> = groups
                    .into_iter()
                    .map(|(package, _, cores)| {
                        let rank = seen_in_package.entry(package).or_insert(0);
                        *rank += 1;
                        (*rank, package, cores)
                    })
                    .collect();
                ranked.sort_by_key(|(rank, package, _)| (*rank, *package));
                let longest = ranked.iter().map(|(_, _, v)| v.len()).max().unwrap_or(0);
                let interleaved: Vec<usize> = (0..longest)
                    .flat_map(|i| ranked.iter().filter_map(move |(_, _, v)| v.get(i).copied()))
                    .collect();
                self.by_thread_rank(interleaved)
            }
        }
    }

    /// Cores ordered by package, then node inside the package, then first CPU.
    fn cores_in_place_order(&self) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.cores.len()).collect();
        idx.sort_by_key(|&c| {
            let core = &self.cores[c];
            let first = core.cpus.first().unwrap_or(u32::MAX);
            let node = self.node_of_cpu(first).unwrap_or(u32::MAX);
            (core.package, node, first)
        });
        idx
    }

    /// Thread rank 0 of every core in `cores`' order, then rank 1, and so on.
    fn by_thread_rank(&self, cores: Vec<usize>) -> Vec<u32> {
        let smt = self.max_threads_per_core();
        (0..smt)
            .flat_map(|rank| {
                cores
                    .iter()
                    .filter_map(move |&c| self.cores[c].cpus.iter().nth(rank))
            })
            .collect()
    }

    /// Checks a user's CPU list against the online CPUs; the error names the offenders.
    pub fn check_cpus(&self, cpus: &CpuSet) -> Result<(), String> {
        let missing = cpus.difference(&self.online);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "CPU(s) {} are not online on this machine (online: {})",
                missing.to_list(),
                self.online.to_list()
            ))
        }
    }
}

#[cfg(test)]
mod tests;

/// Parses a layout file (the thesis's `systemConfig.txt`): CPU numbers in the order they are
/// given out, separated by spaces, commas or newlines, ranges (`4-7`) allowed, `#` comments.
/// A CPU listed twice is an error (it would get two threads where one was meant).
pub fn parse_layout(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("");
        for word in body
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
        {
            let bad = || format!("line {}: `{word}` is not a CPU number or range", n + 1);
            let (lo, hi) = match word.split_once('-') {
                Some((a, b)) => (
                    a.parse::<u32>().map_err(|_| bad())?,
                    b.parse::<u32>().map_err(|_| bad())?,
                ),
                None => {
                    let v = word.parse::<u32>().map_err(|_| bad())?;
                    (v, v)
                }
            };
            if lo > hi || hi > cpuset::MAX_CPU {
                return Err(bad());
            }
            for c in lo..=hi {
                if cpus.contains(&c) {
                    return Err(format!("line {}: CPU {c} is listed twice", n + 1));
                }
                cpus.push(c);
            }
        }
    }
    if cpus.is_empty() {
        return Err("the layout lists no CPU".into());
    }
    Ok(cpus)
}

#[cfg(test)]
mod layout_tests {
    use super::parse_layout;

    #[test]
    fn layouts_keep_their_order() {
        assert_eq!(
            parse_layout("# socket 0 first\n0 2\n4-5, 1\n").unwrap(),
            vec![0, 2, 4, 5, 1]
        );
        assert!(parse_layout("0 0").unwrap_err().contains("twice"));
        assert!(parse_layout("0 x").unwrap_err().contains("`x`"));
        assert!(parse_layout("# nothing\n").is_err());
        assert!(parse_layout("7-3").is_err());
    }
}
