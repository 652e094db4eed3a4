//! ccont's load patterns, computed from a [`Topology`] value so NUMA patterns are tested on
//! machines this one is not: which CPUs burn at each step.

use serde::Serialize;
use topology::{CpuSet, Topology};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// One more CPU per step, node 0's CPUs first, then node 1's, ...
    CpuIncrease,
    /// All CPUs of one node per step, node after node.
    NodeCascade,
    /// A constant number of CPUs (one node's worth), one moving per step to the next node.
    CpuRollover,
    /// One configuration: the `--cpus` list.
    One,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::CpuIncrease => "cpu-increase",
            Pattern::NodeCascade => "node-cascade",
            Pattern::CpuRollover => "cpu-rollover",
            Pattern::One => "one",
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Pattern::CpuIncrease,
            Pattern::NodeCascade,
            Pattern::CpuRollover,
            Pattern::One,
        ]
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| {
            format!(
                "unknown load pattern `{s}`: use cpu-increase, node-cascade, cpu-rollover or one"
            )
        })
    }
}

/// A node's online CPUs, ascending: the positions of its part of a CPU map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct NodeCpus {
    /// `None` for CPUs whose node the kernel does not say.
    pub node: Option<u32>,
    pub cpus: Vec<u32>,
}

impl NodeCpus {
    pub fn label(&self) -> String {
        self.node
            .map_or_else(|| "N?".to_string(), |n| format!("N{n}"))
    }
}

/// The steps of a pattern on a machine.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Plan {
    pub pattern: Pattern,
    /// Every node with online CPUs (the map's columns), whether used or not.
    pub nodes: Vec<NodeCpus>,
    /// The CPUs of each step, ascending.
    pub steps: Vec<Vec<u32>>,
    /// What could not be done as asked (a 2-node pattern on a 1-node machine, ...).
    pub notes: Vec<String>,
}

impl Plan {
    /// The ccont map of a step: per node, `*` for a burning CPU and `-` for an idle one.
    pub fn map(&self, step: &[u32]) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| {
                n.cpus
                    .iter()
                    .map(|c| if step.contains(c) { '*' } else { '-' })
                    .collect()
            })
            .collect()
    }
}

/// Groups the online CPUs by node, nodes ascending, CPUs of unknown node last.
pub fn nodes_of(t: &Topology) -> Vec<NodeCpus> {
    let mut out: Vec<NodeCpus> = t
        .nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| NodeCpus {
            node: Some(n.id),
            cpus: n.cpus.iter().collect(),
        })
        .collect();
    let unknown: Vec<u32> = t
        .online
        .iter()
        .filter(|&c| t.node_of_cpu(c).is_none())
        .collect();
    if !unknown.is_empty() {
        out.push(NodeCpus {
            node: None,
            cpus: unknown,
        });
    }
    out
}

/// The steps of `pattern` over `usable` CPUs (the `--cpus` list, or every online CPU).
pub fn plan(t: &Topology, pattern: Pattern, usable: &CpuSet) -> Result<Plan, String> {
    let nodes = nodes_of(t);
    // Per node, the usable CPUs in order: what the patterns hand out.
    let groups: Vec<Vec<u32>> = nodes
        .iter()
        .map(|n| {
            n.cpus
                .iter()
                .copied()
                .filter(|&c| usable.contains(c))
                .collect::<Vec<u32>>()
        })
        .filter(|g| !g.is_empty())
        .collect();
    if groups.is_empty() {
        return Err("no usable CPU: none of the CPUs asked for is online".into());
    }
    let mut notes = Vec::new();
    let needs_two = |notes: &mut Vec<String>| {
        if groups.len() < 2 {
            notes.push(format!(
                "{} needs CPUs on 2 NUMA nodes and these CPUs are on 1 node: running its only step",
                pattern.name()
            ));
        }
    };
    let steps: Vec<Vec<u32>> = match pattern {
        Pattern::One => vec![groups.concat()],
        Pattern::CpuIncrease => {
            let order = groups.concat();
            (1..=order.len()).map(|k| order[..k].to_vec()).collect()
        }
        Pattern::NodeCascade => {
            needs_two(&mut notes);
            groups.clone()
        }
        Pattern::CpuRollover => {
            needs_two(&mut notes);
            let width = groups.iter().map(Vec::len).min().unwrap_or(0);
            if groups.iter().any(|g| g.len() != width) {
                notes.push(format!(
                    "cpu-rollover: the nodes have different numbers of CPUs; {width} CPU(s) of each roll over"
                ));
            }
            let mut steps = vec![groups[0][..width].to_vec()];
            for pair in groups.windows(2) {
                for moved in 1..=width {
                    let mut step = pair[0][..width - moved].to_vec();
                    step.extend_from_slice(&pair[1][..moved]);
                    step.sort_unstable();
                    steps.push(step);
                }
            }
            steps
        }
    };
    Ok(Plan {
        pattern,
        nodes,
        steps,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps(spec: &str, pattern: Pattern) -> Vec<String> {
        let t = Topology::synthetic(spec).unwrap();
        let p = plan(&t, pattern, &t.online).unwrap();
        p.steps.iter().map(|s| p.map(s).join(" ")).collect()
    }

    /// ccont's published tables for its 2-node, 8-CPU machine, map for map.
    #[test]
    fn a_two_node_eight_cpu_machine_gives_cconts_maps() {
        for spec in ["2x4x1", "1x8x1:n2"] {
            assert_eq!(
                maps(spec, Pattern::CpuIncrease),
                [
                    "*--- ----",
                    "**-- ----",
                    "***- ----",
                    "**** ----",
                    "**** *---",
                    "**** **--",
                    "**** ***-",
                    "**** ****"
                ],
                "{spec}"
            );
            assert_eq!(maps(spec, Pattern::NodeCascade), ["**** ----", "---- ****"]);
            assert_eq!(
                maps(spec, Pattern::CpuRollover),
                [
                    "**** ----",
                    "***- *---",
                    "**-- **--",
                    "*--- ***-",
                    "---- ****"
                ]
            );
        }
    }

    #[test]
    fn step_sizes_follow_the_pattern() {
        let t = Topology::synthetic("2x4x1").unwrap();
        let p = plan(&t, Pattern::CpuIncrease, &t.online).unwrap();
        assert_eq!(
            p.steps.iter().map(Vec::len).collect::<Vec<_>>(),
            (1..=8).collect::<Vec<_>>()
        );
        let p = plan(&t, Pattern::CpuRollover, &t.online).unwrap();
        assert!(p.steps.iter().all(|s| s.len() == 4));
        assert!(p.notes.is_empty());
    }

    #[test]
    fn hyperthreads_and_four_nodes() {
        // 2x2x2:n2 = 4 nodes of one 2-thread core each; rollover walks node 0 -> 1 -> 2 -> 3.
        let t = Topology::synthetic("2x2x2:n2").unwrap();
        let p = plan(&t, Pattern::CpuRollover, &t.online).unwrap();
        assert_eq!(p.nodes.len(), 4);
        assert_eq!(p.steps.len(), 1 + 2 * 3);
        assert_eq!(p.map(&p.steps[0]).join(" "), "** -- -- --");
        assert_eq!(p.map(&p.steps[6]).join(" "), "-- -- -- **");
        let p = plan(&t, Pattern::NodeCascade, &t.online).unwrap();
        assert_eq!(p.steps.len(), 4);
        // Node 0 holds CPU 0 and its sibling 4.
        assert_eq!(p.steps[0], vec![0, 4]);
    }

    #[test]
    fn one_node_patterns_say_so_and_keep_what_can_run() {
        let t = Topology::synthetic("1x2x1").unwrap();
        let p = plan(&t, Pattern::NodeCascade, &t.online).unwrap();
        assert_eq!(p.steps, vec![vec![0, 1]]);
        assert!(p.notes[0].contains("2 NUMA nodes"), "{:?}", p.notes);
        let p = plan(&t, Pattern::CpuRollover, &t.online).unwrap();
        assert_eq!(p.steps, vec![vec![0, 1]]);
        assert_eq!(p.notes.len(), 1);
        let p = plan(&t, Pattern::CpuIncrease, &t.online).unwrap();
        assert_eq!(p.steps, vec![vec![0], vec![0, 1]]);
        assert!(p.notes.is_empty());
    }

    #[test]
    fn a_cpu_list_restricts_the_pattern_but_not_the_map() {
        let t = Topology::synthetic("2x4x1").unwrap();
        let usable = CpuSet::parse_list("1,2,5").unwrap();
        let p = plan(&t, Pattern::CpuIncrease, &usable).unwrap();
        assert_eq!(p.steps, vec![vec![1], vec![1, 2], vec![1, 2, 5]]);
        assert_eq!(p.map(&p.steps[2]).join(" "), "-**- -*--");
        let p = plan(&t, Pattern::One, &usable).unwrap();
        assert_eq!(p.steps, vec![vec![1, 2, 5]]);
        // Uneven nodes: 2 CPUs on node 0, 1 on node 1 -> one CPU rolls.
        let p = plan(&t, Pattern::CpuRollover, &usable).unwrap();
        assert_eq!(p.steps, vec![vec![1], vec![5]]);
        assert!(p.notes[0].contains("different numbers"));
        assert!(plan(&t, Pattern::One, &CpuSet::parse_list("99").unwrap()).is_err());
    }

    fn fixture(name: &str) -> Topology {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/topology")
            .join(name);
        Topology::from_root(&dir).unwrap()
    }

    #[test]
    fn real_machines() {
        // 4 sockets x 2 nodes of Opteron 6134: 8 nodes of 4 CPUs.
        let t = fixture("amd-opteron6134-4s-8n");
        let p = plan(&t, Pattern::NodeCascade, &t.online).unwrap();
        assert_eq!(p.steps.len(), 8);
        assert!(p.steps.iter().all(|s| s.len() == 4));
        let p = plan(&t, Pattern::CpuIncrease, &t.online).unwrap();
        assert_eq!(p.steps.len(), t.online.len());
        // Node by node: the 5th CPU handed out is the first of the second node.
        assert_eq!(p.steps[4][4], p.nodes[1].cpus[0]);
        let p = plan(&t, Pattern::CpuRollover, &t.online).unwrap();
        assert_eq!(p.steps.len(), 1 + 4 * 7);
        // Xeon 4108, 2 sockets with hyperthreads: node 0 holds CPU 0 and its sibling.
        let t = fixture("intel-xeon4108-2s-ht");
        let p = plan(&t, Pattern::NodeCascade, &t.online).unwrap();
        assert_eq!(p.steps.len(), 2);
        assert!(p.steps[0].contains(&0));
        let sib = t.siblings(0).unwrap();
        assert!(sib.iter().all(|c| p.steps[0].contains(&c)));
        // Offline CPU 0 on node 0: the maps leave it out, the pattern never hands it out.
        let t = fixture("intel-haswell-2s-offline-cpu0-node0");
        let p = plan(&t, Pattern::CpuIncrease, &t.online).unwrap();
        assert!(p.steps.iter().all(|s| !s.contains(&0)));
        assert!(p.nodes.iter().all(|n| !n.cpus.contains(&0)));
    }
}
