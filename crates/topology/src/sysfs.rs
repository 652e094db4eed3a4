//! Reads `sys/devices/system/{cpu,node}` and `proc/cpuinfo` under a root directory.
//!
//! Real sysfs trees are inconsistent in ways this reader must survive (see
//! fixtures/topology/README.md): trailing NUL bytes, missing files on old kernels, list and mask
//! forms that disagree (the mask wins: hand edits and hotplug update masks), offline CPUs without
//! `topology/`, sparse node ids, distance rows longer than the node count. Every such repair is
//! recorded in [`Topology::notes`]. Files are read through [`Tree`]: contained in the root,
//! regular files only, bounded.

use crate::cpuset::CpuSet;
use crate::kinds;
use crate::tree::{Found, Tree, MEMINFO, SYSFS_FILE};
use crate::{
    Cache, CacheKind, Cluster, Core, Die, Machine, Node, Package, Pu, Source, Topology,
    TopologyError,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A file holding a CPU or node list (`0-3,8`); `None` when absent or malformed.
fn read_list(tree: &Tree, path: &Path) -> Result<Option<CpuSet>, TopologyError> {
    Ok(tree.text(path)?.and_then(|t| CpuSet::parse_list(&t).ok()))
}

fn read_i64(tree: &Tree, path: &Path) -> Result<Option<i64>, TopologyError> {
    Ok(tree.text(path)?.and_then(|t| t.parse().ok()))
}

/// The error for a file that must hold something usable; the text is quoted, shortened.
fn malformed(path: PathBuf, text: &str, why: impl Into<String>) -> TopologyError {
    const SHOWN: usize = 60;
    let mut shown: String = text.chars().take(SHOWN).collect();
    if text.chars().count() > SHOWN {
        shown.push('…');
    }
    TopologyError::Malformed {
        path,
        text: shown,
        why: why.into(),
    }
}

/// Numbered entries `prefixN` of a directory, ascending.
fn numbered_dirs(tree: &Tree, dir: &Path, prefix: &str) -> Result<Vec<u32>, TopologyError> {
    let mut ids: Vec<u32> = tree
        .list(dir)?
        .into_iter()
        .filter_map(|name| {
            let name = name.into_string().ok()?;
            let rest = name.strip_prefix(prefix)?;
            if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Ids beyond any real machine are a corrupt or hostile tree: skipped.
            rest.parse().ok().filter(|&id| id <= crate::cpuset::MAX_CPU)
        })
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Counts disagreements between the list and mask forms of one kind of file, so that one note
/// per kind is written rather than one per CPU.
#[derive(Default)]
struct Disagreements(BTreeMap<(String, &'static str), CpuSet>);

impl Disagreements {
    /// `unit` names what `id` numbers: "CPU" for per-CPU files, "node" for per-node files.
    fn record(&mut self, what: String, unit: &'static str, id: u32) {
        self.0.entry((what, unit)).or_default().insert(id);
    }
}

/// Reads a CPU set that exists as a mask file and/or a list file; the mask wins. `owner` is the
/// CPU (or node, per `unit`) whose directory `dir` is.
fn read_set(
    tree: &Tree,
    dir: &Path,
    (mask_name, list_name): (&str, &str),
    (owner, unit): (u32, &'static str),
    disagree: &mut Disagreements,
) -> Result<Option<CpuSet>, TopologyError> {
    let parent = dir.file_name().unwrap_or_default().to_string_lossy();
    let mut parse = |name: &str, parser: fn(&str) -> Result<CpuSet, crate::CpuSetError>| {
        let Some(text) = tree.text(&dir.join(name))? else {
            return Ok(None);
        };
        let parsed = parser(&text).ok();
        if parsed.is_none() {
            disagree.record(
                format!("{parent}/{name} is malformed (ignored)"),
                unit,
                owner,
            );
        }
        Ok::<_, TopologyError>(parsed)
    };
    let mask = parse(mask_name, CpuSet::parse_mask)?;
    let list = parse(list_name, CpuSet::parse_list)?;
    Ok(match (mask, list) {
        (Some(m), Some(l)) => {
            if m != l {
                disagree.record(
                    format!("{parent}/{list_name} and {mask_name} disagree (used the mask)"),
                    unit,
                    owner,
                );
            }
            Some(m)
        }
        (Some(m), None) => Some(m),
        (None, l) => l,
    })
}

/// Splits CPUs into disjoint groups given each CPU's own idea of its group. The first CPU of a
/// group (in ascending order) decides it; a later CPU claiming an already-assigned CPU keeps only
/// the unassigned ones, so the result is always a partition of `cpus` even on corrupt input.
fn partition(cpus: &CpuSet, group_of: impl Fn(u32) -> Option<CpuSet>) -> (Vec<CpuSet>, bool) {
    let mut assigned = CpuSet::new();
    let mut groups = Vec::new();
    let mut repaired = false;
    for cpu in cpus.iter() {
        if assigned.contains(cpu) {
            continue;
        }
        let mut g = group_of(cpu)
            .map(|g| g.intersection(cpus))
            .unwrap_or_default();
        if !g.contains(cpu) {
            repaired = true;
            g.insert(cpu);
        }
        let fresh = g.difference(&assigned);
        if fresh.len() != g.len() {
            repaired = true;
        }
        assigned = assigned.union(&fresh);
        groups.push(fresh);
    }
    // Every CPU must agree with the group it landed in; otherwise the input was inconsistent.
    for g in &groups {
        for cpu in g.iter() {
            if group_of(cpu).map(|own| own.intersection(cpus)) != Some(g.clone()) {
                repaired = true;
            }
        }
    }
    (groups, repaired)
}

fn parse_size_kib(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1),
        'M' | 'm' => (&t[..t.len() - 1], 1024),
        'G' | 'g' => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1), // sysfs sizes without suffix are in KiB only on some arches; take as KiB
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

struct CpuFacts {
    package_id: Option<i64>,
    die_id: Option<i64>,
    core_id: Option<i64>,
    cluster_id: Option<i64>,
    threads: Option<CpuSet>,
    package_cpus: Option<CpuSet>,
    cluster_cpus: Option<CpuSet>,
}

pub(crate) fn read(root: &Path) -> Result<Topology, TopologyError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let node_dir = root.join("sys/devices/system/node");
    let not_a_snapshot = |path: PathBuf, why: String| TopologyError::Unreadable {
        path,
        why: format!(
            "{why}; pass the root of a sysfs snapshot \
             (the directory that contains sys/devices/system/cpu)"
        ),
    };
    let tree = Tree::open(root).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => not_a_snapshot(cpu_dir.clone(), "does not exist".into()),
        _ => not_a_snapshot(root.to_path_buf(), e.to_string()),
    })?;
    let cpu_ids = numbered_dirs(&tree, &cpu_dir, "cpu")?;
    if cpu_ids.is_empty() {
        let why = if tree.is_dir(&cpu_dir)? {
            "holds no cpuN directories"
        } else {
            "does not exist"
        };
        return Err(not_a_snapshot(cpu_dir, why.into()));
    }
    let mut notes = Vec::new();
    let mut disagree = Disagreements::default();

    let (online, offline) = read_online(&tree, &cpu_dir, &cpu_ids, &mut notes)?;

    // Per-CPU topology files.
    let mut facts: BTreeMap<u32, CpuFacts> = BTreeMap::new();
    let mut no_topology = CpuSet::new();
    for cpu in online.iter() {
        let t = cpu_dir.join(format!("cpu{cpu}/topology"));
        if !tree.is_dir(&t)? {
            no_topology.insert(cpu);
        }
        let mut set = |forms: (&str, &str)| read_set(&tree, &t, forms, (cpu, "CPU"), &mut disagree);
        // core_cpus is the newer name of thread_siblings, package_cpus of core_siblings.
        let threads = match set(("core_cpus", "core_cpus_list"))? {
            Some(s) => Some(s),
            None => set(("thread_siblings", "thread_siblings_list"))?,
        };
        let package_cpus = match set(("package_cpus", "package_cpus_list"))? {
            Some(s) => Some(s),
            None => set(("core_siblings", "core_siblings_list"))?,
        };
        let cluster_cpus = set(("cluster_cpus", "cluster_cpus_list"))?;
        facts.insert(
            cpu,
            CpuFacts {
                package_id: read_i64(&tree, &t.join("physical_package_id"))?,
                die_id: read_i64(&tree, &t.join("die_id"))?,
                core_id: read_i64(&tree, &t.join("core_id"))?,
                cluster_id: read_i64(&tree, &t.join("cluster_id"))?,
                threads,
                package_cpus,
                cluster_cpus,
            },
        );
    }
    if !no_topology.is_empty() {
        notes.push(format!(
            "online CPU(s) {} have no topology/ directory: each is taken as a core of its own",
            no_topology.to_list()
        ));
    }

    // Packages: physical_package_id where exposed, else core_siblings groups.
    let exposed = facts
        .values()
        .any(|f| f.package_id.is_some_and(|id| id >= 0));
    let mut packages: Vec<Package> = Vec::new();
    if exposed {
        let mut by_id: BTreeMap<i64, CpuSet> = BTreeMap::new();
        for (&cpu, f) in &facts {
            by_id
                .entry(f.package_id.unwrap_or(-1))
                .or_default()
                .insert(cpu);
        }
        if by_id.contains_key(&-1) {
            notes.push(format!(
                "CPU(s) {} have no physical_package_id; grouped into one package of their own",
                by_id[&-1].to_list()
            ));
        }
        packages.extend(by_id.into_iter().map(|(id, cpus)| Package {
            os_id: (id >= 0).then_some(id),
            cpus,
        }));
    } else {
        let (groups, _) = partition(&online, |c| {
            facts.get(&c).and_then(|f| f.package_cpus.clone())
        });
        notes.push(format!(
            "physical_package_id is not exposed (-1 or missing): {} package(s) derived from core_siblings, as hwloc does",
            groups.len()
        ));
        packages.extend(groups.into_iter().map(|cpus| Package { os_id: None, cpus }));
    }
    packages.sort_by_key(|p| p.cpus.first());
    let package_of = |cpu: u32| {
        packages
            .iter()
            .position(|p| p.cpus.contains(cpu))
            .unwrap_or(0)
    };

    // Dies, where die_id exists.
    let mut dies = Vec::new();
    if facts.values().any(|f| f.die_id.is_some()) {
        let mut by_key: BTreeMap<(usize, i64), CpuSet> = BTreeMap::new();
        for (&cpu, f) in &facts {
            by_key
                .entry((package_of(cpu), f.die_id.unwrap_or(-1)))
                .or_default()
                .insert(cpu);
        }
        dies.extend(by_key.into_iter().map(|((package, os_id), cpus)| Die {
            package,
            os_id,
            cpus,
        }));
    }

    // Cores: distinct thread-sibling sets (not (package, core_id): core_id repeats per die on
    // AMD Magny-Cours, see the amd-opteron6134 fixture).
    let (core_sets, repaired) =
        partition(&online, |c| facts.get(&c).and_then(|f| f.threads.clone()));
    if repaired {
        notes.push(
            "thread_siblings sets overlap or omit their own CPU; repaired into disjoint cores"
                .into(),
        );
    }
    let mut cores: Vec<Core> = core_sets
        .into_iter()
        .map(|cpus| {
            let first = cpus.first().unwrap_or(0);
            Core {
                package: package_of(first),
                os_core_id: facts.get(&first).and_then(|f| f.core_id),
                cpus,
                kind: None,
            }
        })
        .collect();
    cores.sort_by_key(|c| (c.package, c.cpus.first()));

    // Clusters (cluster_cpus), kept only when the kernel exposes them.
    let mut clusters = Vec::new();
    if facts.values().any(|f| f.cluster_cpus.is_some()) {
        let (groups, _) = partition(&online, |c| {
            facts.get(&c).and_then(|f| f.cluster_cpus.clone())
        });
        clusters.extend(groups.into_iter().map(|cpus| {
            Cluster {
                os_id: cpus
                    .first()
                    .and_then(|c| facts.get(&c))
                    .and_then(|f| f.cluster_id),
                cpus,
            }
        }));
    }

    let caches = read_caches(&tree, &cpu_dir, &online, &mut disagree)?;
    let (nodes, distances) = read_nodes(&tree, &node_dir, &online, &mut notes, &mut disagree)?;

    for ((what, unit), ids) in &disagree.0 {
        notes.push(format!(
            "{what} for {} {unit}(s): {}",
            ids.len(),
            ids.to_list()
        ));
    }

    let cpuinfo = kinds::CpuInfo::read(&tree, &root.join("proc/cpuinfo"))?;
    let core_kinds = kinds::detect(&tree, &cpu_dir, &online, &cpuinfo)?;
    let machine = Machine {
        model: cpuinfo.model(),
        arch: cpuinfo.arch.clone(),
    };

    // Shown only, so a malformed one is noted, not fatal.
    let mut shown_list = |name: &str| -> Result<Option<CpuSet>, TopologyError> {
        let Some(text) = tree.text(&cpu_dir.join(name))? else {
            return Ok(None);
        };
        let parsed = CpuSet::parse_list(&text).ok();
        if parsed.is_none() {
            notes.push(format!(
                "cpu/{name} holds {:?}: not a CPU list (ignored)",
                text.chars().take(60).collect::<String>()
            ));
        }
        Ok(parsed)
    };
    let possible = shown_list("possible")?;
    let present = shown_list("present")?;

    let mut topo = Topology {
        source: Source::Snapshot {
            root: root.to_path_buf(),
        },
        machine,
        possible,
        present,
        online,
        offline,
        packages,
        dies,
        clusters,
        cores,
        pus: Vec::new(),
        caches,
        nodes,
        distances,
        core_kinds,
        notes,
    };
    finish(&mut topo);
    Ok(topo)
}

/// Which CPUs are online: `cpuN/online` ("1" or "0"), else membership in `cpu/online`, else
/// online. A malformed `cpu/online` is an error (every other fact is filtered through it); an
/// empty or unreadable `cpuN/online` is not "offline" (old ia64 kernels leave them empty; hwloc
/// counts those CPUs as online), and the CPUs so taken are named in a note.
fn read_online(
    tree: &Tree,
    cpu_dir: &Path,
    cpu_ids: &[u32],
    notes: &mut Vec<String>,
) -> Result<(CpuSet, CpuSet), TopologyError> {
    let online_path = cpu_dir.join("online");
    let online_file = match tree.read(&online_path, SYSFS_FILE)? {
        Found::Text(t) if t.is_empty() => {
            notes.push("cpu/online is empty: ignored".into());
            None
        }
        Found::Text(t) => Some(CpuSet::parse_list(&t).map_err(|e| {
            let why = match e {
                crate::CpuSetError::BadList { why, .. }
                | crate::CpuSetError::BadMask { why, .. } => why,
            };
            malformed(
                online_path.clone(),
                &t,
                format!("not a CPU list ({why}; the kernel writes a form like 0-3,8)"),
            )
        })?),
        Found::Absent => None,
        Found::Unreadable(e) => {
            notes.push(format!("cpu/online is unreadable ({e}): ignored"));
            None
        }
    };
    let (mut online, mut offline) = (CpuSet::new(), CpuSet::new());
    let (mut empty, mut unreadable, mut missing) = (CpuSet::new(), CpuSet::new(), CpuSet::new());
    let mut unreadable_why = String::new();
    for &id in cpu_ids {
        let path = cpu_dir.join(format!("cpu{id}/online"));
        let own = match tree.read(&path, SYSFS_FILE)? {
            Found::Text(v) if v == "1" => Some(true),
            Found::Text(v) if v == "0" => Some(false),
            Found::Text(v) if v.is_empty() => {
                empty.insert(id);
                None
            }
            Found::Text(v) => {
                return Err(malformed(path, &v, "not 0 or 1 (a CPU's online state)"));
            }
            Found::Unreadable(e) => {
                unreadable.insert(id);
                unreadable_why = e.to_string();
                None
            }
            Found::Absent => {
                missing.insert(id);
                None
            }
        };
        let is_online = match (own, &online_file) {
            (Some(v), Some(set)) => {
                if v != set.contains(id) {
                    notes.push(format!(
                        "cpu{id}/online says {} but cpu/online says otherwise; used cpu{id}/online",
                        u8::from(v)
                    ));
                }
                v
            }
            (Some(v), None) => v,
            (None, Some(set)) => set.contains(id),
            (None, None) => true,
        };
        if is_online {
            online.insert(id);
        } else {
            offline.insert(id);
        }
    }
    let decided = if online_file.is_some() {
        "used cpu/online"
    } else {
        "taken as online, as hwloc does"
    };
    if !empty.is_empty() {
        notes.push(format!(
            "cpuN/online is empty for CPU(s) {} (old kernels, e.g. ia64, leave it so): {decided}",
            empty.to_list()
        ));
    }
    if !unreadable.is_empty() {
        notes.push(format!(
            "cpuN/online is unreadable for CPU(s) {} ({unreadable_why}): {decided}",
            unreadable.to_list()
        ));
    }
    if online_file.is_none() && !missing.is_empty() {
        notes.push(format!(
            "no cpu/online file (old kernel) and no cpuN/online for CPU(s) {}: taken as online",
            missing.to_list()
        ));
    }
    if online.is_empty() {
        return Err(TopologyError::Unreadable {
            path: cpu_dir.to_path_buf(),
            why: format!(
                "no CPU is online in this tree (offline: CPU(s) {})",
                offline.to_list()
            ),
        });
    }
    Ok((online, offline))
}

/// Fills the derived parts (PUs, core kinds on cores) and checks cross-level consistency.
pub(crate) fn finish(t: &mut Topology) {
    let node_of: std::collections::HashMap<u32, u32> = t
        .nodes
        .iter()
        .flat_map(|n| n.cpus.iter().map(move |c| (c, n.id)))
        .collect();
    let mut pus = Vec::with_capacity(t.online.len());
    for (ci, core) in t.cores.iter().enumerate() {
        for cpu in core.cpus.iter() {
            pus.push(Pu {
                cpu,
                core: ci,
                package: core.package,
                node: node_of.get(&cpu).copied(),
            });
        }
    }
    pus.sort_by_key(|p| p.cpu);
    t.pus = pus;
    for core in &mut t.cores {
        let first = core.cpus.first().unwrap_or(0);
        core.kind = t.core_kinds.iter().position(|k| k.cpus.contains(first));
    }
    let homeless: CpuSet = t
        .pus
        .iter()
        .filter(|p| p.node.is_none())
        .map(|p| p.cpu)
        .collect();
    if !homeless.is_empty() && !t.nodes.is_empty() {
        t.notes.push(format!(
            "online CPU(s) {} belong to no online NUMA node (their node is offline)",
            homeless.to_list()
        ));
    }
}

fn read_caches(
    tree: &Tree,
    cpu_dir: &Path,
    online: &CpuSet,
    disagree: &mut Disagreements,
) -> Result<Vec<Cache>, TopologyError> {
    struct Raw {
        level: u8,
        kind: CacheKind,
        size_kib: Option<u64>,
        line_bytes: Option<u32>,
        ways: Option<u32>,
        shared: Option<CpuSet>,
    }
    // (level, kind) -> per-CPU record
    let mut per_kind: BTreeMap<(u8, CacheKind), BTreeMap<u32, Raw>> = BTreeMap::new();
    for cpu in online.iter() {
        let cache_dir = cpu_dir.join(format!("cpu{cpu}/cache"));
        for idx in numbered_dirs(tree, &cache_dir, "index")? {
            let d = cache_dir.join(format!("index{idx}"));
            let Some(level) = tree
                .text(&d.join("level"))?
                .and_then(|t| t.parse::<u8>().ok())
            else {
                continue;
            };
            let kind = match tree.text(&d.join("type"))?.as_deref() {
                Some("Data") => CacheKind::Data,
                Some("Instruction") => CacheKind::Instruction,
                _ => CacheKind::Unified,
            };
            let shared = read_set(
                tree,
                &d,
                ("shared_cpu_map", "shared_cpu_list"),
                (cpu, "CPU"),
                disagree,
            )?;
            let parse_u32 = |n: &str| -> Result<Option<u32>, TopologyError> {
                Ok(tree.text(&d.join(n))?.and_then(|t| t.parse::<u32>().ok()))
            };
            per_kind.entry((level, kind)).or_default().insert(
                cpu,
                Raw {
                    level,
                    kind,
                    size_kib: tree.text(&d.join("size"))?.and_then(|t| parse_size_kib(&t)),
                    line_bytes: parse_u32("coherency_line_size")?,
                    ways: parse_u32("ways_of_associativity")?,
                    shared,
                },
            );
        }
    }
    let mut caches = Vec::new();
    for raws in per_kind.values() {
        let have: CpuSet = raws.keys().copied().collect();
        let (groups, _) = partition(&have, |c| raws.get(&c).and_then(|r| r.shared.clone()));
        for cpus in groups {
            let Some(r) = cpus.first().and_then(|c| raws.get(&c)) else {
                continue;
            };
            caches.push(Cache {
                level: r.level,
                kind: r.kind,
                size_kib: r.size_kib,
                line_bytes: r.line_bytes,
                ways: r.ways,
                cpus,
            });
        }
    }
    caches.sort_by_key(|c| (c.level, c.kind, c.cpus.first()));
    Ok(caches)
}

/// `MemTotal` and `MemFree` (kB) from a meminfo file: `/proc/meminfo` lines (`MemTotal: 16 kB`)
/// or a node's (`Node 0 MemTotal: 16 kB`), whose first two words are skipped.
fn meminfo(text: &str, skip: usize) -> (Option<u64>, Option<u64>) {
    let (mut total, mut free) = (None, None);
    for line in text.lines() {
        let mut words = line.split_whitespace().skip(skip);
        let (Some(key), Some(val)) = (words.next(), words.next()) else {
            continue;
        };
        let val = val.parse::<u64>().ok();
        match key {
            "MemTotal:" => total = val,
            "MemFree:" => free = val,
            _ => {}
        }
    }
    (total, free)
}

/// A kernel without `node/` (built without CONFIG_NUMA: small Arm boards, some embedded and
/// old builds) still has one node: all CPUs and all memory, the memory from `proc/meminfo`
/// when the tree has it (unknown, never 0, otherwise).
fn the_only_node(
    tree: &Tree,
    online: &CpuSet,
    notes: &mut Vec<String>,
) -> Result<Node, TopologyError> {
    let path = tree.root().join("proc/meminfo");
    let (total, free) = match tree.read(&path, MEMINFO)? {
        Found::Text(t) => meminfo(&t, 0),
        Found::Absent | Found::Unreadable(_) => (None, None),
    };
    let memory = match total {
        Some(kib) => format!("the memory of proc/meminfo ({kib} kB)"),
        None => "memory of unknown size (no proc/meminfo MemTotal)".into(),
    };
    notes.push(format!(
        "no NUMA node directories (a kernel without CONFIG_NUMA): one node 0 taken, holding all \
         CPUs and {memory}"
    ));
    Ok(Node {
        id: 0,
        cpus: online.clone(),
        offline_cpus: CpuSet::new(),
        mem_total_kib: total,
        mem_free_kib: free,
    })
}

/// `distances[i][j]` by node position, when the kernel gave a usable matrix.
type Distances = Option<Vec<Vec<u32>>>;

fn read_nodes(
    tree: &Tree,
    node_dir: &Path,
    online: &CpuSet,
    notes: &mut Vec<String>,
    disagree: &mut Disagreements,
) -> Result<(Vec<Node>, Distances), TopologyError> {
    let ids = numbered_dirs(tree, node_dir, "node")?;
    if ids.is_empty() {
        // No distance matrix: the kernel gives none, and one node has no distances to show.
        return Ok((vec![the_only_node(tree, online, notes)?], None));
    }
    let mut nodes = Vec::new();
    let mut rows: Vec<Option<Vec<u32>>> = Vec::new();
    for &id in &ids {
        let d = node_dir.join(format!("node{id}"));
        let all =
            read_set(tree, &d, ("cpumap", "cpulist"), (id, "node"), disagree)?.unwrap_or_default();
        let cpus = all.intersection(online);
        let offline_cpus = all.difference(online);
        // "Node 0 MemTotal:       16775084 kB"
        let (total, free) = tree
            .text(&d.join("meminfo"))?
            .map(|t| meminfo(&t, 2))
            .unwrap_or((None, None));
        nodes.push(Node {
            id,
            cpus,
            offline_cpus,
            mem_total_kib: total,
            mem_free_kib: free,
        });
        rows.push(tree.text(&d.join("distance"))?.map(|t| {
            t.split_whitespace()
                .map_while(|w| w.parse::<u32>().ok())
                .collect()
        }));
    }

    // Nodes named by has_memory/has_cpu but without a directory are offline: say so.
    for name in ["has_memory", "has_cpu", "online"] {
        if let Some(listed) = read_list(tree, &node_dir.join(name))? {
            let missing: CpuSet = listed.iter().filter(|n| !ids.contains(n)).collect();
            if !missing.is_empty() {
                notes.push(format!(
                    "node/{name} names node(s) {} that have no directory (offline); ignored",
                    missing.to_list()
                ));
            }
        }
    }

    // Distance rows list one entry per node in ascending id order (sparse ids: the k-th entry is
    // the k-th node, not node k). A row may be longer than the number of node directories when a
    // node is offline; then its columns are the possible nodes.
    let distances = if rows
        .iter()
        .all(|r| r.as_ref().is_some_and(|r| r.len() == ids.len()))
    {
        Some(rows.into_iter().flatten().collect::<Vec<_>>())
    } else if let Some(len) = rows.iter().flatten().map(|r| r.len()).next() {
        let mut candidates = None;
        for f in ["possible", "online"] {
            if let Some(set) = read_list(tree, &node_dir.join(f))? {
                let c: Vec<u32> = set.iter().collect();
                if c.len() == len && ids.iter().all(|i| c.contains(i)) {
                    candidates = Some(c);
                    break;
                }
            }
        }
        match candidates {
            Some(cols)
                if rows
                    .iter()
                    .all(|r| r.as_ref().is_some_and(|r| r.len() == len)) =>
            {
                notes.push(format!(
                    "distance rows have {len} entries for {} node directories: columns taken as nodes {}; entries for absent nodes dropped",
                    ids.len(),
                    CpuSet::from_iter_u32(cols.iter().copied()).to_list()
                ));
                let keep: Vec<usize> = ids
                    .iter()
                    .filter_map(|i| cols.iter().position(|c| c == i))
                    .collect();
                Some(
                    rows.into_iter()
                        .flatten()
                        .map(|r| keep.iter().map(|&k| r[k]).collect())
                        .collect(),
                )
            }
            _ => {
                notes.push(
                    "node distance rows are missing or of inconsistent length: no distance matrix"
                        .into(),
                );
                None
            }
        }
    } else {
        notes.push("no nodeN/distance files: no distance matrix".into());
        None
    };
    if let Some(m) = &distances {
        let n = m.len();
        let asymmetric = (0..n).any(|i| (0..n).any(|j| m[i][j] != m[j][i]));
        if asymmetric {
            notes.push("the node distance matrix is not symmetric; shown as the kernel gave it (row = from)".into());
        }
    }
    Ok((nodes, distances))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_repairs_overlaps() {
        let all = CpuSet::parse_list("0-3").unwrap();
        let (g, repaired) = partition(&all, |c| {
            Some(match c {
                0 => CpuSet::parse_list("0-1").unwrap(),
                1 => CpuSet::parse_list("1-2").unwrap(),
                _ => CpuSet::parse_list("2-3").unwrap(),
            })
        });
        assert!(repaired);
        let lists: Vec<String> = g.iter().map(|s| s.to_list()).collect();
        assert_eq!(lists, ["0-1", "2-3"]);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size_kib("32K"), Some(32));
        assert_eq!(parse_size_kib("8M"), Some(8192));
        assert_eq!(parse_size_kib("bogus"), None);
        assert_eq!(parse_size_kib("18446744073709551615G"), None);
    }
}
