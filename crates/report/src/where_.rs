//! `contend where`: where a process's threads run and where its memory lives, per NUMA node —
//! `ps -T -o pid,tid,psr,comm` and `numastat -p` in one view.
//!
//! [`WhereView::new`] joins what `observe` read with the topology (CPU → node); the view is
//! what `--json` prints and what [`render`] lays out as text.

use crate::table::{human_kib, new_table, or_na, printable, NA};
use observe::{MemoryKind, MemoryTotals, NodeMemory, NumaMemory, ProcessInfo, ThreadSample};
use serde::Serialize;
use std::fmt::Write;
use std::time::SystemTime;
use topology::Topology;

/// Every fact `contend where` shows, as `--json` prints it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct WhereView {
    pub pid: u32,
    pub comm: String,
    /// Empty for kernel threads.
    pub cmdline: Vec<String>,
    /// When the snapshot was taken, RFC 3339 UTC with milliseconds.
    pub time_utc: String,
    pub thread_count: usize,
    /// Resident KiB: the sum over `numa_maps` when read, else `VmRSS` from `status`.
    pub resident_kib: Option<u64>,
    /// `numa_maps` or `VmRSS`.
    pub resident_source: &'static str,
    /// The machine's NUMA nodes (empty when the topology could not be read).
    pub machine_nodes: Vec<u32>,
    pub threads: Vec<ThreadView>,
    /// Threads by the node of the CPU they last ran on; `node: null` for unknown.
    pub threads_per_node: Vec<NodeThreads>,
    /// Resident memory per node and kind, with a column for every node of the machine.
    pub memory: Option<NumaMemory>,
    /// Why `memory` is absent, when it was asked for.
    pub memory_unavailable: Option<String>,
}

/// One thread, joined with its node.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ThreadView {
    pub tid: u32,
    pub name: String,
    /// The `stat` letter (`R`, `S`, `D`, …) and the state spelled out.
    pub state: char,
    pub state_name: &'static str,
    /// The CPU it last ran on, and that CPU's node.
    pub cpu: Option<u32>,
    pub node: Option<u32>,
    /// User + system CPU time, in s (clock-tick resolution).
    pub cpu_time_s: f64,
    /// From schedstat, in ns; `null` when the kernel keeps no scheduler statistics.
    pub on_cpu_ns: Option<u64>,
    pub runq_wait_ns: Option<u64>,
    pub timeslices: Option<u64>,
    pub voluntary_switches: Option<u64>,
    pub nonvoluntary_switches: Option<u64>,
    /// CPUs it may run on (`Cpus_allowed_list`).
    pub cpus_allowed: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct NodeThreads {
    pub node: Option<u32>,
    pub threads: usize,
}

/// What was found about memory.
#[derive(Debug, Clone)]
pub enum MemoryRead {
    Read(NumaMemory),
    /// Asked for but not readable; the one-line reason.
    Unavailable(String),
    /// Not asked for (`--threads-only`).
    Skipped,
}

impl WhereView {
    pub fn new(
        info: &ProcessInfo,
        threads: &[ThreadSample],
        memory: MemoryRead,
        topo: Option<&Topology>,
        taken_at: SystemTime,
    ) -> WhereView {
        let node_of = |cpu: Option<u32>| cpu.and_then(|c| topo?.node_of_cpu(c));
        let threads: Vec<ThreadView> = threads
            .iter()
            .map(|t| ThreadView {
                tid: t.tid,
                name: t.name.clone(),
                state: t.state.letter(),
                state_name: t.state.name(),
                cpu: t.last_cpu,
                node: node_of(t.last_cpu),
                cpu_time_s: t.cpu_time_s(),
                on_cpu_ns: t.sched.map(|s| s.on_cpu_ns),
                runq_wait_ns: t.sched.map(|s| s.runq_wait_ns),
                timeslices: t.sched.map(|s| s.timeslices),
                voluntary_switches: t.voluntary_switches,
                nonvoluntary_switches: t.nonvoluntary_switches,
                cpus_allowed: t.cpus_allowed.clone(),
            })
            .collect();
        let machine_nodes: Vec<u32> = topo
            .map(|t| t.nodes.iter().map(|n| n.id).collect())
            .unwrap_or_default();
        let (memory, memory_unavailable) = match memory {
            MemoryRead::Read(m) => (Some(with_every_node(m, &machine_nodes)), None),
            MemoryRead::Unavailable(why) => (None, Some(why)),
            MemoryRead::Skipped => (None, None),
        };
        let (resident_kib, resident_source) = match &memory {
            Some(m) => (Some(m.total.total_kib), "numa_maps"),
            None => (info.vm_rss_kib, "VmRSS"),
        };
        // Nodes with CPUs are listed even when no thread is there: an idle node is a finding.
        let cpu_nodes: Vec<u32> = topo
            .map(|t| {
                t.nodes
                    .iter()
                    .filter(|n| !n.cpus.is_empty())
                    .map(|n| n.id)
                    .collect()
            })
            .unwrap_or_default();
        WhereView {
            pid: info.pid,
            comm: info.comm.clone(),
            cmdline: info.cmdline.clone(),
            time_utc: utc_timestamp(taken_at),
            thread_count: threads.len(),
            resident_kib,
            resident_source,
            machine_nodes,
            threads_per_node: count_per_node(&threads, &cpu_nodes),
            threads,
            memory,
            memory_unavailable,
        }
    }
}

/// Adds zero columns for the machine's nodes the process has nothing on.
fn with_every_node(mut m: NumaMemory, machine_nodes: &[u32]) -> NumaMemory {
    for &node in machine_nodes {
        if m.node(node).is_none() {
            m.nodes.push(NodeMemory {
                node,
                memory: MemoryTotals::default(),
            });
        }
    }
    m.nodes.sort_by_key(|n| n.node);
    m
}

fn count_per_node(threads: &[ThreadView], cpu_nodes: &[u32]) -> Vec<NodeThreads> {
    let mut counts: Vec<NodeThreads> = cpu_nodes
        .iter()
        .map(|&n| NodeThreads {
            node: Some(n),
            threads: 0,
        })
        .collect();
    for t in threads {
        match counts.iter_mut().find(|c| c.node == t.node) {
            Some(c) => c.threads += 1,
            None => counts.push(NodeThreads {
                node: t.node,
                threads: 1,
            }),
        }
    }
    // Known nodes ascending, unknown last.
    counts.sort_by_key(|c| c.node.unwrap_or(u32::MAX));
    counts
}

/// `--json` without `--watch`: one pretty object.
pub fn to_json(v: &WhereView) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&crate::json::Versioned::new(v))
}

/// `--json --watch`: one object per line (JSON Lines), each as `to_json`'s.
pub fn to_json_line(v: &WhereView) -> serde_json::Result<String> {
    serde_json::to_string(&crate::json::Versioned::new(v))
}

fn ms(ns: Option<u64>) -> String {
    ns.map_or_else(|| NA.to_string(), |ns| format!("{:.1}", ns as f64 / 1e6))
}

fn mib(kib: u64) -> String {
    format!("{:.2}", kib as f64 / 1024.0)
}

/// The command line as a shell would read it, cut to `max` characters.
fn command_text(v: &WhereView, max: usize) -> String {
    if v.cmdline.is_empty() {
        return format!("[{}]", printable(&v.comm));
    }
    let words: Vec<String> = v
        .cmdline
        .iter()
        .map(|w| {
            if w.is_empty() || w.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                format!("'{}'", w.replace('\'', r"'\''"))
            } else {
                w.clone()
            }
        })
        .collect();
    let text = printable(&words.join(" ").replace(['\n', '\t'], " "));
    if text.chars().count() > max {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// The view as text: header, thread table, memory table, threads per node.
pub fn render(v: &WhereView) -> String {
    let mut out = String::new();
    let resident = v
        .resident_kib
        .map(|k| format!("{} resident", human_kib(k)))
        .unwrap_or_else(|| "resident size n/a".into());
    let _ = writeln!(
        out,
        "PID {} ({}): {} thread(s), {}; command: {}",
        v.pid,
        printable(&v.comm),
        v.thread_count,
        resident,
        command_text(v, 72)
    );
    out.push('\n');
    out.push_str(&thread_table(v));
    out.push('\n');

    match (&v.memory, &v.memory_unavailable) {
        (Some(m), _) => {
            out.push('\n');
            let _ = writeln!(
                out,
                "Resident memory per NUMA node (from /proc/{}/numa_maps, like numastat -p):",
                v.pid
            );
            out.push_str(&memory_table(m));
            out.push('\n');
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "\nmemory per node: not shown: {why}");
        }
        (None, None) => {}
    }
    let _ = writeln!(out, "\n{}", threads_per_node_line(v));
    out
}

fn thread_table(v: &WhereView) -> String {
    let first_allowed = v.threads.first().and_then(|t| t.cpus_allowed.as_ref());
    let same_affinity = v
        .threads
        .iter()
        .all(|t| t.cpus_allowed.as_ref() == first_allowed);
    let mut header = vec![
        "TID",
        "NAME",
        "STATE",
        "CPU",
        "NODE",
        "CPU TIME (s)",
        "ON-CPU (ms)",
        "RUNQ WAIT (ms)",
        "VCSW",
        "NVCSW",
    ];
    if !same_affinity {
        header.push("ALLOWED CPUS");
    }
    let mut table = new_table(&header, &[0, 3, 4, 5, 6, 7, 8, 9]);
    for t in &v.threads {
        let mut row = vec![
            t.tid.to_string(),
            printable(&t.name),
            t.state_name.to_string(),
            or_na(t.cpu),
            or_na(t.node),
            format!("{:.2}", t.cpu_time_s),
            ms(t.on_cpu_ns),
            ms(t.runq_wait_ns),
            or_na(t.voluntary_switches),
            or_na(t.nonvoluntary_switches),
        ];
        if !same_affinity {
            row.push(or_na(t.cpus_allowed.clone()));
        }
        table.add_row(row);
    }
    let mut text = table.to_string();
    if let (true, Some(cpus)) = (same_affinity, first_allowed) {
        let _ = write!(text, "\nevery thread may run on CPUs {cpus}");
    }
    if v.threads.iter().all(|t| t.on_cpu_ns.is_none()) && !v.threads.is_empty() {
        text.push_str("\nON-CPU and RUNQ WAIT: n/a, this kernel keeps no scheduler statistics");
    }
    text
}

fn memory_table(m: &NumaMemory) -> String {
    let columns: Vec<String> = m.nodes.iter().map(|n| format!("NODE {}", n.node)).collect();
    let mut header = vec!["MEMORY (MiB)"];
    header.extend(columns.iter().map(String::as_str));
    header.push("TOTAL");
    let numeric: Vec<usize> = (1..header.len()).collect();
    let mut table = new_table(&header, &numeric);
    let row = |label: &str, get: &dyn Fn(&MemoryTotals) -> u64| {
        let mut cells = vec![label.to_string()];
        cells.extend(m.nodes.iter().map(|n| mib(get(&n.memory))));
        cells.push(mib(get(&m.total)));
        cells
    };
    for kind in MemoryKind::ALL {
        table.add_row(row(kind.name(), &|t| t.get(kind)));
    }
    if m.total.hugetlb_kib > 0 {
        table.add_row(row("(of which hugetlb)", &|t| t.hugetlb_kib));
    }
    table.add_row(row("total", &|t| t.total_kib));
    table.to_string()
}

/// `threads per node: N0: 3, N1: 1`.
pub fn threads_per_node_line(v: &WhereView) -> String {
    let parts: Vec<String> = v
        .threads_per_node
        .iter()
        .map(|c| match c.node {
            Some(n) => format!("N{n}: {}", c.threads),
            None => format!("unknown node: {}", c.threads),
        })
        .collect();
    format!("threads per node (by last CPU): {}", parts.join(", "))
}

/// `2026-05-01T12:00:00.250Z` (milliseconds, since `--watch` may refresh faster than 1 s).
pub fn utc_timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use observe::numa_maps;
    use observe::{SchedStat, ThreadState};
    use std::collections::HashMap;
    use std::time::{Duration, UNIX_EPOCH};

    fn thread(tid: u32, name: &str, cpu: u32, sched: bool, allowed: &str) -> ThreadSample {
        ThreadSample {
            tid,
            name: name.into(),
            state: ThreadState::Sleeping,
            last_cpu: Some(cpu),
            cpu_ticks: 250,
            sched: sched.then_some(SchedStat {
                on_cpu_ns: 2_500_000_000,
                runq_wait_ns: 1_250_000,
                timeslices: 10,
            }),
            voluntary_switches: Some(7),
            nonvoluntary_switches: Some(1),
            cpus_allowed: Some(allowed.into()),
        }
    }

    fn info() -> ProcessInfo {
        ProcessInfo {
            pid: 4242,
            comm: "server".into(),
            cmdline: vec!["./server".into(), "--name".into(), "big one".into()],
            state: ThreadState::Sleeping,
            num_threads: 3,
            vm_rss_kib: Some(9000),
        }
    }

    fn memory() -> NumaMemory {
        let maps = numa_maps::parse(
            "1000 default heap anon=300 N0=200 N1=100 kernelpagesize_kB=4\n\
             2000 default file=/usr/lib/libc.so.6 mapped=10 N0=10 kernelpagesize_kB=4\n",
        )
        .unwrap();
        numa_maps::summarize(&maps, &HashMap::new(), 4)
    }

    fn view(threads: &[ThreadSample], mem: MemoryRead) -> WhereView {
        let topo = Topology::synthetic("1x4x1:n2").unwrap(); // CPUs 0-1 on node 0, 2-3 on node 1
        WhereView::new(
            &info(),
            threads,
            mem,
            Some(&topo),
            UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        )
    }

    #[test]
    fn joins_threads_with_nodes() {
        let v = view(
            &[
                thread(10, "main", 0, true, "0-3"),
                thread(11, "worker", 3, true, "0-3"),
                thread(12, "io", 1, true, "0-3"),
                thread(13, "ghost", 99, true, "0-3"),
            ],
            MemoryRead::Read(memory()),
        );
        assert_eq!(
            v.threads.iter().map(|t| t.node).collect::<Vec<_>>(),
            [Some(0), Some(1), Some(0), None]
        );
        assert_eq!(
            threads_per_node_line(&v),
            "threads per node (by last CPU): N0: 2, N1: 1, unknown node: 1"
        );
        assert_eq!(v.resident_source, "numa_maps");
        assert_eq!(v.resident_kib, Some(1240));
        assert_eq!(v.time_utc, "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn text_has_units_na_and_every_node() {
        let v = view(
            &[
                thread(10, "main", 0, false, "0-1"),
                thread(11, "w", 2, false, "2-3"),
            ],
            MemoryRead::Read(memory()),
        );
        let text = render(&v);
        assert!(text.starts_with(
            "PID 4242 (server): 2 thread(s), 1.2 MiB resident; command: ./server --name 'big one'\n"
        ), "{text}");
        for needle in [
            "CPU TIME (s)",
            "ON-CPU (ms)",
            "RUNQ WAIT (ms)",
            "ALLOWED CPUS",
            "sleeping",
            "NODE 0",
            "NODE 1",
            "TOTAL",
            "heap",
            "shared",
            "0.78", // heap on node 0: 800 KiB
            "threads per node (by last CPU): N0: 1, N1: 1",
            "no scheduler statistics",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        // Unmeasured schedstat is n/a, never 0.
        let main_row = text.lines().find(|l| l.contains(" main ")).unwrap();
        assert_eq!(main_row.matches("n/a").count(), 2, "{main_row}");
        assert!(!text.contains("hugetlb"));
    }

    #[test]
    fn memory_unavailable_and_skipped() {
        let threads = [thread(10, "main", 0, true, "0-3")];
        let v = view(
            &threads,
            MemoryRead::Unavailable("permission denied".into()),
        );
        assert_eq!((v.resident_kib, v.resident_source), (Some(9000), "VmRSS"));
        let text = render(&v);
        assert!(text.contains("memory per node: not shown: permission denied"));
        assert!(text.contains("every thread may run on CPUs 0-3"));
        assert!(!text.contains("ALLOWED CPUS"));
        let v = view(&threads, MemoryRead::Skipped);
        assert!(!render(&v).contains("memory"));
        let json: serde_json::Value = serde_json::from_str(&to_json(&v).unwrap()).unwrap();
        assert!(json["memory"].is_null());
        assert!(json["memory_unavailable"].is_null());
    }

    #[test]
    fn json_has_the_same_facts() {
        let v = view(
            &[thread(10, "main", 2, true, "0-3")],
            MemoryRead::Read(memory()),
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&v).unwrap()).unwrap();
        assert_eq!(json["pid"], 4242);
        assert_eq!(json["threads"][0]["state"], "S");
        assert_eq!(json["threads"][0]["state_name"], "sleeping");
        assert_eq!(json["threads"][0]["node"], 1);
        assert_eq!(json["threads"][0]["on_cpu_ns"], 2_500_000_000u64);
        assert_eq!(json["machine_nodes"], serde_json::json!([0, 1]));
        let nodes = json["memory"]["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1]["heap_kib"], 400);
        assert_eq!(json["memory"]["total"]["file_kib"], 40);
        assert!(!to_json_line(&v).unwrap().contains('\n'));
    }

    #[test]
    fn zero_columns_for_nodes_without_pages() {
        let maps = numa_maps::parse("1000 default anon=1 N1=1 kernelpagesize_kB=4\n").unwrap();
        let mem = numa_maps::summarize(&maps, &HashMap::new(), 4);
        let v = view(&[], MemoryRead::Read(mem));
        let m = v.memory.as_ref().unwrap();
        assert_eq!(m.nodes.iter().map(|n| n.node).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(m.nodes[0].memory.total_kib, 0);
    }

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_millis((951_782_400 + 3661) * 1000 + 42);
        assert_eq!(utc_timestamp(leap), "2000-02-29T01:01:01.042Z");
    }
}
