//! The topology as a tree (in the spirit of `lstopo --of console`) followed by the node table
//! and distance matrix (as `numactl --hardware` prints them).

use crate::table::human_kib;
use serde::Serialize;
use std::fmt::Write;
use topology::{CpuSet, Summary, Topology};

/// What `contend topo --json` prints: the counts, then every fact.
#[derive(Serialize, schemars::JsonSchema)]
pub struct TopoJson<'a> {
    pub summary: Summary,
    #[serde(flatten)]
    pub topology: &'a Topology,
}

pub fn to_json(t: &Topology) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&crate::json::Versioned::new(&TopoJson {
        summary: t.summary(),
        topology: t,
    }))
}

/// What `contend topo --order ORDER --json` prints: the CPUs in the order they are filled.
#[derive(Serialize, schemars::JsonSchema)]
pub struct FillOrderJson {
    pub order: topology::FillOrder,
    pub cpus: Vec<u32>,
}

/// `contend topo --order ORDER --json`, on one line.
pub fn fill_order_json(t: &Topology, order: topology::FillOrder) -> serde_json::Result<String> {
    serde_json::to_string(&crate::json::Versioned::new(&FillOrderJson {
        order,
        cpus: t.fill_order(order),
    }))
}

/// Tree levels, outermost first; equal CPU sets nest in this order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Package,
    Die,
    Node,
    Cache3,
    Cluster,
    Cache2,
    Cache1,
    Core,
    Pu,
}

struct Obj {
    level: Level,
    label: String,
    cpus: CpuSet,
    children: Vec<usize>,
}

fn source_text(t: &Topology) -> String {
    match &t.source {
        topology::Source::Live => "this machine".to_string(),
        topology::Source::Snapshot { root } => format!("snapshot {}", root.display()),
        topology::Source::Synthetic { spec } => format!("synthetic {spec}"),
    }
}

/// The one-line description used as the tree's root.
pub fn headline(t: &Topology) -> String {
    let s = t.summary();
    let mut line = format!(
        "Machine: {} package(s), {} NUMA node(s), {} core(s), {} PU(s)",
        s.packages, s.nodes, s.cores, s.pus
    );
    if s.memory_only_nodes > 0 {
        let _ = write!(line, " ({} memory-only node(s))", s.memory_only_nodes);
    }
    if let Some(kib) = s.mem_total_kib {
        let _ = write!(line, ", {} memory", human_kib(kib));
    }
    if let Some(model) = &t.machine.model {
        let _ = write!(line, "\n  model: {model}");
    }
    let _ = write!(line, "\n  source: {}", source_text(t));
    line
}

/// Cache sizes exactly, as the kernel gives them: `48 KiB`, `2 MiB`, `5118 KiB`.
fn cache_size(kib: u64) -> String {
    if kib >= 1024 && kib.is_multiple_of(1024) {
        format!("{} MiB", kib / 1024)
    } else {
        format!("{kib} KiB")
    }
}

fn build_objects(t: &Topology) -> Vec<Obj> {
    let mut objs: Vec<Obj> = Vec::new();
    let mut push = |level, label: String, cpus: &CpuSet| {
        objs.push(Obj {
            level,
            label,
            cpus: cpus.clone(),
            children: Vec::new(),
        })
    };
    for (i, p) in t.packages.iter().enumerate() {
        let id = match p.os_id {
            Some(id) => format!("P#{id}"),
            None => format!("L#{i}"),
        };
        push(
            Level::Package,
            format!("Package {id} (cpus {})", p.cpus),
            &p.cpus,
        );
    }
    for d in &t.dies {
        if t.packages.get(d.package).is_some_and(|p| p.cpus != d.cpus) {
            push(
                Level::Die,
                format!("Die P#{} (cpus {})", d.os_id, d.cpus),
                &d.cpus,
            );
        }
    }
    for n in t.nodes.iter().filter(|n| !n.cpus.is_empty()) {
        let mem = n
            .mem_total_kib
            .map(human_kib)
            .unwrap_or_else(|| "memory n/a".into());
        push(
            Level::Node,
            format!("NUMANode N#{} ({mem}, cpus {})", n.id, n.cpus),
            &n.cpus,
        );
    }
    for c in &t.caches {
        let level = match c.level {
            1 => Level::Cache1,
            2 => Level::Cache2,
            _ => Level::Cache3,
        };
        let size = c
            .size_kib
            .map(cache_size)
            .unwrap_or_else(|| "size n/a".into());
        push(level, format!("{} ({size})", c.name()), &c.cpus);
    }
    // Clusters only where they say something no other level says (on many machines a cluster is
    // just an L2 or L3 group).
    for (i, c) in t.clusters.iter().enumerate() {
        let redundant = t.caches.iter().any(|x| x.cpus == c.cpus)
            || t.cores.iter().any(|x| x.cpus == c.cpus)
            || t.packages.iter().any(|x| x.cpus == c.cpus);
        if !redundant {
            push(Level::Cluster, format!("Cluster L#{i}"), &c.cpus);
        }
    }
    for (i, c) in t.cores.iter().enumerate() {
        let kind = c
            .kind
            .and_then(|k| t.core_kinds.get(k))
            .map(|k| format!(" ({})", k.name))
            .unwrap_or_default();
        push(Level::Core, format!("Core L#{i}{kind}"), &c.cpus);
    }
    for p in &t.pus {
        push(
            Level::Pu,
            format!("PU P#{}", p.cpu),
            &CpuSet::from_iter_u32([p.cpu]),
        );
    }
    objs
}

/// Nests objects by CPU-set inclusion: each goes under the deepest object containing its CPUs.
/// Returns the indices of the top-level objects.
fn nest(objs: &mut [Obj]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..objs.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(objs[i].cpus.len()), objs[i].level));
    let mut roots: Vec<usize> = Vec::new();
    for &i in &order {
        let mut parent: Option<usize> = None;
        loop {
            let candidates = match parent {
                None => &roots,
                Some(p) => &objs[p].children,
            };
            match candidates
                .iter()
                .copied()
                .find(|&c| objs[i].cpus.is_subset(&objs[c].cpus))
            {
                Some(c) => parent = Some(c),
                None => break,
            }
        }
        match parent {
            Some(p) => objs[p].children.push(i),
            None => roots.push(i),
        }
    }
    let firsts: Vec<(Option<u32>, Level)> =
        objs.iter().map(|o| (o.cpus.first(), o.level)).collect();
    for o in objs.iter_mut() {
        o.children.sort_by_key(|&c| firsts[c]);
    }
    roots.sort_by_key(|&r| firsts[r]);
    roots
}

fn render_obj(objs: &[Obj], i: usize, depth: usize, out: &mut String) {
    // Chains of single children covering the same CPUs share a line: "L2 (2 MiB) + Core L#0".
    let mut label = objs[i].label.clone();
    let mut cur = i;
    while objs[cur].children.len() == 1 && objs[objs[cur].children[0]].cpus == objs[cur].cpus {
        cur = objs[cur].children[0];
        label.push_str(" + ");
        label.push_str(&objs[cur].label);
    }
    let _ = writeln!(out, "{}{}", "  ".repeat(depth), label);
    for &c in &objs[cur].children {
        render_obj(objs, c, depth + 1, out);
    }
}

/// The tree, the `numactl --hardware` part, and core kinds.
pub fn render(t: &Topology) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(t));
    let mut objs = build_objects(t);
    let roots = nest(&mut objs);
    for r in roots {
        render_obj(&objs, r, 1, &mut out);
    }
    // Nodes with no online CPU: memory-only ones, and ones whose CPUs are all offline.
    for n in t.nodes.iter().filter(|n| n.cpus.is_empty()) {
        let mem = n
            .mem_total_kib
            .map(human_kib)
            .unwrap_or_else(|| "memory n/a".into());
        let what = if n.is_memory_only() {
            "memory only".to_string()
        } else {
            format!("all its CPUs offline: {}", n.offline_cpus)
        };
        let near = t
            .nodes_by_distance(n.id)
            .into_iter()
            .find(|&o| o != n.id && t.node(o).is_some_and(|x| !x.cpus.is_empty()));
        let near = near
            .map(|o| format!(", nearest CPUs on node {o}"))
            .unwrap_or_default();
        let _ = writeln!(out, "  NUMANode N#{} ({what}, {mem}{near})", n.id);
    }
    if !t.offline.is_empty() {
        let _ = writeln!(out, "  offline CPUs: {}", t.offline);
    }
    out.push('\n');
    out.push_str(&render_numactl(t));
    if !t.core_kinds.is_empty() {
        let _ = writeln!(out, "\ncore kinds:");
        for k in &t.core_kinds {
            let _ = writeln!(
                out,
                "  {:<12} cpus {}  (from {})",
                k.name, k.cpus, k.evidence
            );
        }
    }
    out
}

/// `numactl --hardware`'s layout: nodes with CPUs, size and free memory, then distances.
pub fn render_numactl(t: &Topology) -> String {
    let mut out = String::new();
    if t.nodes.is_empty() {
        out.push_str("no NUMA nodes reported\n");
        return out;
    }
    let ids = CpuSet::from_iter_u32(t.nodes.iter().map(|n| n.id));
    let _ = writeln!(
        out,
        "available: {} nodes ({})",
        t.nodes.len(),
        ids.to_list()
    );
    let mb = |kib: Option<u64>| {
        kib.map(|k| format!("{} MB", k / 1024))
            .unwrap_or_else(|| "n/a".into())
    };
    for n in &t.nodes {
        let cpus: Vec<String> = n.cpus.iter().map(|c| c.to_string()).collect();
        let _ = writeln!(out, "node {} cpus: {}", n.id, cpus.join(" "));
        let _ = writeln!(out, "node {} size: {}", n.id, mb(n.mem_total_kib));
        let _ = writeln!(out, "node {} free: {}", n.id, mb(n.mem_free_kib));
    }
    match &t.distances {
        Some(d) => {
            let _ = writeln!(out, "node distances:");
            let width = t
                .nodes
                .iter()
                .map(|n| n.id.to_string().len())
                .max()
                .unwrap_or(1)
                .max(3);
            let _ = write!(out, "node ");
            for n in &t.nodes {
                let _ = write!(out, " {:>width$}", n.id);
            }
            out.push('\n');
            for (i, n) in t.nodes.iter().enumerate() {
                let _ = write!(out, "{:>4}:", n.id);
                for v in &d[i] {
                    let _ = write!(out, " {v:>width$}");
                }
                out.push('\n');
            }
        }
        None => out.push_str("node distances: n/a (not given by the kernel)\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_nests_nodes_in_packages_and_collapses_chains() {
        let t = Topology::synthetic("2x2x1:n2").unwrap();
        let text = render(&t);
        assert!(
            text.contains("Machine: 2 package(s), 4 NUMA node(s), 4 core(s), 4 PU(s)"),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let pkg = lines
            .iter()
            .position(|l| l.trim_start().starts_with("Package P#0"))
            .unwrap();
        assert!(lines[pkg + 1].starts_with("    NUMANode N#0"), "{text}");
        assert!(
            text.contains("L2 (2 MiB) + L1d (48 KiB) + L1i (32 KiB) + Core L#0 + PU P#0"),
            "{text}"
        );
        assert!(text.contains("node distances:"));
        assert!(text.contains("   0:  10  12  21  21"), "{text}");
    }

    #[test]
    fn memory_only_nodes_are_listed() {
        let t = Topology::synthetic("1x2x1:m1").unwrap();
        let text = render(&t);
        assert!(
            text.contains("NUMANode N#1 (memory only, 16.0 GiB, nearest CPUs on node 0)"),
            "{text}"
        );
        assert!(text.contains("node 1 cpus: \n"), "{text}");
    }

    #[test]
    fn json_has_summary_and_nodes() {
        let t = Topology::synthetic("2x4x2:n2").unwrap();
        let v: serde_json::Value = serde_json::from_str(&to_json(&t).unwrap()).unwrap();
        assert_eq!(v["summary"]["packages"], 2);
        assert_eq!(v["summary"]["nodes"], 4);
        assert_eq!(v["summary"]["cores"], 8);
        assert_eq!(v["summary"]["pus"], 16);
        assert_eq!(v["nodes"][1]["cpus"], "2-3,10-11");
    }
}
