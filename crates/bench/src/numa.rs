//! `contend bench numa`: the AUTONUMA benchmarks (seed 003: numa01, numa01 THREAD_ALLOC,
//! numa02, numa02 SMT, and the ×2 overcommit), each under a placement policy. Planning is a
//! pure function of the [`Topology`](topology::Topology) (tested on snapshots of NUMA
//! machines); running forks one process per planned process, each applying its memory policy
//! (`mbind`) and pinning its threads, every thread writing its memory `loops` times.

use serde::Serialize;
use std::time::{Duration, Instant};
use topology::{CpuSet, Topology};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Bench {
    Numa01,
    Numa01ThreadAlloc,
    Numa02,
    Numa02Smt,
    Overcommit,
}

impl Bench {
    pub const ALL: [Bench; 5] = [
        Bench::Numa01,
        Bench::Numa01ThreadAlloc,
        Bench::Numa02,
        Bench::Numa02Smt,
        Bench::Overcommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bench::Numa01 => "numa01",
            Bench::Numa01ThreadAlloc => "numa01-thread-alloc",
            Bench::Numa02 => "numa02",
            Bench::Numa02Smt => "numa02-smt",
            Bench::Overcommit => "overcommit",
        }
    }

    pub fn parse(s: &str) -> Option<Bench> {
        Bench::ALL.into_iter().find(|b| b.name() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// The kernel decides (automatic NUMA balancing if on).
    Default,
    /// Threads and their memory on the same nodes.
    Bind,
    /// Threads on their nodes, memory deliberately on other nodes (for every process).
    ReverseBind,
    /// Memory interleaved over all nodes, threads not bound.
    Interleave,
}

impl Policy {
    pub const ALL: [Policy; 4] = [
        Policy::Default,
        Policy::Bind,
        Policy::ReverseBind,
        Policy::Interleave,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Default => "default",
            Policy::Bind => "bind",
            Policy::ReverseBind => "reverse-bind",
            Policy::Interleave => "interleave",
        }
    }

    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Where a memory region goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "mode", content = "nodes", rename_all = "kebab-case")]
pub enum Memory {
    /// No policy: first touch decides.
    Default,
    /// `MPOL_BIND` to these nodes.
    Bind(CpuSet),
    /// `MPOL_INTERLEAVE` over these nodes.
    Interleave(CpuSet),
}

/// One thread: the CPUs it may run on (`None`: not bound) and, when it has its own slice of
/// the process's memory, where that slice goes.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ThreadPlan {
    pub cpus: Option<CpuSet>,
    /// Its own slice's placement (`None`: the thread writes the whole shared buffer).
    pub slice: Option<Memory>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ProcessPlan {
    /// The benchmark this process belongs to (overcommit runs two).
    pub bench: Bench,
    /// The shared buffer's placement (when threads share it).
    pub shared: Option<Memory>,
    /// First-touch the shared buffer on this node's CPUs (numa01's NO_BIND_FORCE_SAME_NODE).
    pub first_touch_node: Option<u32>,
    pub threads: Vec<ThreadPlan>,
}

/// The nodes that have CPUs, split into two halves (the first half has the extra node); on a
/// one-node machine both halves are that node.
pub fn halves(machine: &Topology) -> (CpuSet, CpuSet) {
    let nodes: Vec<u32> = machine
        .nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| n.id)
        .collect();
    if nodes.len() < 2 {
        let one = CpuSet::from_iter_u32(nodes.first().copied().or(Some(0)));
        return (one.clone(), one);
    }
    let mid = nodes.len().div_ceil(2);
    (
        CpuSet::from_iter_u32(nodes[..mid].iter().copied()),
        CpuSet::from_iter_u32(nodes[mid..].iter().copied()),
    )
}

fn cpus_of_nodes(machine: &Topology, nodes: &CpuSet) -> CpuSet {
    let mut set = CpuSet::new();
    for n in nodes.iter() {
        if let Some(c) = machine.cpus_of_node(n) {
            set = set.union(c);
        }
    }
    set
}

fn all_nodes(machine: &Topology) -> CpuSet {
    let set = CpuSet::from_iter_u32(machine.nodes.iter().map(|n| n.id));
    if set.is_empty() {
        CpuSet::from_iter_u32([0])
    } else {
        set
    }
}

/// The node farthest from `node` that has memory (the reverse of local), or `node` itself on a
/// one-node machine.
fn remote_of(machine: &Topology, node: u32) -> u32 {
    machine
        .nodes_by_distance(node)
        .into_iter()
        .rfind(|&n| n != node)
        .unwrap_or(node)
}

/// numa01 (and its THREAD_ALLOC variant): 2 processes × (CPUs / 2) threads.
fn numa01(
    machine: &Topology,
    policy: Policy,
    thread_alloc: bool,
    bench: Bench,
) -> Vec<ProcessPlan> {
    let online = machine.online.len().max(2);
    let threads = online / 2;
    let (h0, h1) = halves(machine);
    let first_node = h0.first().unwrap_or(0);
    [(h0.clone(), h1.clone()), (h1, h0)]
        .into_iter()
        .map(|(mine, other)| {
            let (cpus, mem) = match policy {
                Policy::Default => (None, Memory::Default),
                Policy::Bind => (Some(cpus_of_nodes(machine, &mine)), Memory::Bind(mine)),
                Policy::ReverseBind => (Some(cpus_of_nodes(machine, &mine)), Memory::Bind(other)),
                Policy::Interleave => (None, Memory::Interleave(all_nodes(machine))),
            };
            ProcessPlan {
                bench,
                shared: (!thread_alloc).then(|| mem.clone()),
                first_touch_node: (policy == Policy::Default && !thread_alloc)
                    .then_some(first_node),
                threads: (0..threads)
                    .map(|_| ThreadPlan {
                        cpus: cpus.clone(),
                        slice: thread_alloc.then(|| mem.clone()),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// numa02 (one thread per CPU) and numa02-smt (one per core): one process, each thread on its
/// own slice.
fn numa02(machine: &Topology, policy: Policy, smt: bool, bench: Bench) -> Vec<ProcessPlan> {
    let cpus: Vec<u32> = if smt {
        machine
            .cores
            .iter()
            .filter_map(|c| c.cpus.first())
            .collect()
    } else {
        machine.online.iter().collect()
    };
    let threads = cpus
        .into_iter()
        .map(|cpu| {
            let node = machine.node_of_cpu(cpu).unwrap_or(0);
            let (cpus, slice) = match policy {
                Policy::Default => (None, Memory::Default),
                Policy::Bind => (
                    Some(CpuSet::from_iter_u32([cpu])),
                    Memory::Bind(CpuSet::from_iter_u32([node])),
                ),
                Policy::ReverseBind => (
                    Some(CpuSet::from_iter_u32([cpu])),
                    Memory::Bind(CpuSet::from_iter_u32([remote_of(machine, node)])),
                ),
                Policy::Interleave => (None, Memory::Interleave(all_nodes(machine))),
            };
            ThreadPlan {
                cpus,
                slice: Some(slice),
            }
        })
        .collect();
    vec![ProcessPlan {
        bench,
        shared: None,
        first_touch_node: None,
        threads,
    }]
}

/// Every process of `bench` under `policy` on `machine`.
pub fn plan(machine: &Topology, bench: Bench, policy: Policy) -> Vec<ProcessPlan> {
    match bench {
        Bench::Numa01 => numa01(machine, policy, false, bench),
        Bench::Numa01ThreadAlloc => numa01(machine, policy, true, bench),
        Bench::Numa02 => numa02(machine, policy, false, bench),
        Bench::Numa02Smt => numa02(machine, policy, true, bench),
        Bench::Overcommit => {
            let mut v = numa01(machine, policy, false, Bench::Numa01);
            v.extend(numa02(machine, policy, false, Bench::Numa02));
            v
        }
    }
}

/// Whether the policies can differ on this machine (more than one node with CPUs).
pub fn policies_differ(machine: &Topology) -> bool {
    machine.nodes.iter().filter(|n| !n.cpus.is_empty()).count() > 1
}

/// `on`, `off`, or `absent` (no /proc/sys/kernel/numa_balancing: a kernel without it).
pub fn numa_balancing() -> &'static str {
    match std::fs::read_to_string("/proc/sys/kernel/numa_balancing") {
        Ok(s) if s.trim() == "0" => "off",
        Ok(_) => "on",
        Err(_) => "absent",
    }
}

const MPOL_BIND: i32 = 2;
const MPOL_INTERLEAVE: i32 = 3;

fn mbind(ptr: *mut u8, len: usize, mem: &Memory) -> Result<(), String> {
    let (mode, nodes) = match mem {
        Memory::Default => return Ok(()),
        Memory::Bind(n) => (MPOL_BIND, n),
        Memory::Interleave(n) => (MPOL_INTERLEAVE, n),
    };
    let mut mask = [0u64; 16];
    for n in nodes.iter() {
        if (n as usize) < 64 * mask.len() {
            mask[n as usize / 64] |= 1 << (n % 64);
        }
    }
    // SAFETY: mbind on a mapping we own, with a mask of 1024 bits.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr,
            len,
            mode,
            mask.as_ptr(),
            64 * mask.len() as u64 + 1,
            0u32,
        )
    };
    if r != 0 {
        return Err(format!(
            "mbind to nodes {}: {}",
            nodes.to_list(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn set_affinity(cpus: &CpuSet) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in cpus.iter() {
            if (c as usize) < 8 * std::mem::size_of::<libc::cpu_set_t>() {
                libc::CPU_SET(c as usize, &mut set);
            }
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "pinning to CPUs {}: {}",
                cpus.to_list(),
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn map(len: usize) -> Result<*mut u8, String> {
    // SAFETY: an anonymous private mapping; checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len.max(1),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!(
            "mapping {len} bytes: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(p.cast())
}

struct SendPtr(*mut u8);
// SAFETY: threads write disjoint slices, or the whole shared buffer as the benchmark intends
// (plain byte stores, the racing writes are the point of numa01).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// One process of a plan, run in the current (forked) process: maps and places its memory,
/// starts its threads, each writing its memory `loops` times; returns when all are done.
fn run_process(p: &ProcessPlan, bytes: usize, loops: u32) -> Result<(), String> {
    let page = 4096;
    let n = p.threads.len().max(1);
    if let Some(mem) = &p.shared {
        let buf = map(bytes)?;
        mbind(buf, bytes, mem)?;
        if let Some(node) = p.first_touch_node {
            // NO_BIND_FORCE_SAME_NODE: the buffer is first touched on one node.
            // SAFETY: our mapping of `bytes` bytes.
            let cpus = cpus_from_node(node);
            if let Some(c) = cpus {
                let _ = set_affinity(&c);
            }
            unsafe { std::ptr::write_bytes(buf, 1, bytes) };
            let _ = set_affinity(&CpuSet::from_iter_u32(crate::ctx::allowed_cpus()));
        }
        let ptr = SendPtr(buf);
        std::thread::scope(|s| -> Result<(), String> {
            let handles: Vec<_> = p
                .threads
                .iter()
                .map(|t| {
                    let ptr = &ptr;
                    s.spawn(move || -> Result<(), String> {
                        if let Some(c) = &t.cpus {
                            set_affinity(c)?;
                        }
                        for _ in 0..loops {
                            // SAFETY: within the mapping (see SendPtr).
                            unsafe { std::ptr::write_bytes(ptr.0, 0, bytes) };
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "a thread panicked".to_string())??;
            }
            Ok(())
        })
    } else {
        let slice = (bytes / n).div_ceil(page) * page;
        std::thread::scope(|s| -> Result<(), String> {
            let handles: Vec<_> = p
                .threads
                .iter()
                .map(|t| {
                    s.spawn(move || -> Result<(), String> {
                        if let Some(c) = &t.cpus {
                            set_affinity(c)?;
                        }
                        let buf = map(slice)?;
                        if let Some(mem) = &t.slice {
                            mbind(buf, slice, mem)?;
                        }
                        for _ in 0..loops {
                            // SAFETY: this thread's own mapping.
                            unsafe { std::ptr::write_bytes(buf, 0, slice) };
                        }
                        // SAFETY: unmapping our own mapping.
                        unsafe { libc::munmap(buf.cast(), slice) };
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "a thread panicked".to_string())??;
            }
            Ok(())
        })
    }
}

fn cpus_from_node(node: u32) -> Option<CpuSet> {
    let text =
        std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/cpulist")).ok()?;
    CpuSet::parse_list(text.trim()).ok()
}

/// One sample of one process's resident memory on one node.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemorySample {
    /// Seconds since the benchmark started.
    pub t_s: f64,
    /// Index into the plan's processes.
    pub process: usize,
    pub node: u32,
    pub kib: u64,
}

/// A process's resident KiB per node, from its numa_maps (`None` once it is gone).
fn resident_per_node(pid: libc::pid_t) -> Option<Vec<(u32, u64)>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/numa_maps")).ok()?;
    let maps = observe::numa_maps::parse(&text).ok()?;
    let mut per: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for m in &maps {
        let page = m.page_size_kib.unwrap_or(4);
        for &(node, pages) in &m.pages_per_node {
            *per.entry(node).or_default() += pages * page;
        }
    }
    Some(per.into_iter().collect())
}

/// Runs every process of `plans` at once (forked), each with `bytes` of memory written
/// `loops` times per thread; the elapsed time until the last exits, and, every `sample`
/// (if any), each process's resident memory per node (numa_maps, as the original's nmstat).
pub fn run(
    plans: &[ProcessPlan],
    bytes: usize,
    loops: u32,
    sample: Option<Duration>,
) -> Result<(Duration, Vec<MemorySample>), String> {
    let start = Instant::now();
    let mut pids = Vec::new();
    for p in plans {
        // SAFETY: the child runs its process plan (allocating, spawning threads: glibc's fork
        // leaves malloc usable) and leaves with _exit, never returning into the parent's code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: see above.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            let code = match run_process(p, bytes, loops) {
                Ok(()) => 0,
                Err(e) => {
                    // Dropped if stderr is closed: a panic here would unwind in a forked child.
                    let _ = std::io::Write::write_fmt(
                        &mut std::io::stderr(),
                        format_args!("contend: error: {} process: {e}\n", p.bench.name()),
                    );
                    1
                }
            };
            // SAFETY: leaving the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        pids.push((pid, None::<i32>));
    }
    let mut samples = Vec::new();
    let mut elapsed = Duration::ZERO;
    let mut next_sample = Instant::now();
    while pids.iter().any(|p| p.1.is_none()) {
        for p in pids.iter_mut().filter(|p| p.1.is_none()) {
            let mut status = 0;
            // SAFETY: reaping our own child without blocking.
            if unsafe { libc::waitpid(p.0, &mut status, libc::WNOHANG) } == p.0 {
                p.1 = Some(status);
                elapsed = start.elapsed();
            }
        }
        if let Some(every) = sample {
            if Instant::now() >= next_sample {
                next_sample += every;
                let t_s = start.elapsed().as_secs_f64();
                for (i, p) in pids.iter().enumerate().filter(|(_, p)| p.1.is_none()) {
                    for (node, kib) in resident_per_node(p.0).unwrap_or_default() {
                        samples.push(MemorySample {
                            t_s,
                            process: i,
                            node,
                            kib,
                        });
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    for &(_, status) in &pids {
        let status = status.unwrap_or(0);
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            return Err(if libc::WIFSIGNALED(status) {
                format!(
                    "a benchmark process was killed by signal {}",
                    libc::WTERMSIG(status)
                )
            } else {
                "a benchmark process failed".to_string()
            });
        }
    }
    Ok((elapsed, samples))
}

/// One benchmark under one policy: `contend bench numa`'s table cell.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Cell {
    pub bench: Bench,
    pub policy: Policy,
    pub elapsed_s: analysis::stats::Spread,
    pub runs_s: Vec<f64>,
    /// The last run's resident memory per process and node over time.
    pub memory: Vec<MemorySample>,
    /// The plan: processes, their threads' CPUs and memory placement.
    pub plan: Vec<ProcessPlan>,
}

/// What `contend bench numa --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NumaResult {
    pub bytes_per_process: u64,
    pub loops: u32,
    pub repeat: u32,
    pub nodes: usize,
    pub policies_differ: bool,
    pub numa_balancing: &'static str,
    pub cells: Vec<Cell>,
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture(name: &str) -> Topology {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/topology")
            .join(name);
        Topology::from_root(&root).unwrap()
    }

    fn node_set(m: &Topology, cpus: &CpuSet) -> CpuSet {
        CpuSet::from_iter_u32(cpus.iter().filter_map(|c| m.node_of_cpu(c)))
    }

    #[test]
    fn numa01_bind_and_reverse_bind_on_eight_nodes() {
        let m = fixture("amd-opteron6134-4s-8n");
        let (h0, h1) = halves(&m);
        assert_eq!(h0.to_list(), "0-3");
        assert_eq!(h1.to_list(), "4-7");
        let bind = plan(&m, Bench::Numa01, Policy::Bind);
        assert_eq!(bind.len(), 2);
        assert_eq!(bind[0].threads.len(), m.online.len() / 2);
        // Process 0: threads on nodes 0-3, memory bound to 0-3; process 1 the other half.
        let t0 = bind[0].threads[0].cpus.as_ref().unwrap();
        assert_eq!(node_set(&m, t0), h0);
        assert_eq!(bind[0].shared, Some(Memory::Bind(h0.clone())));
        assert_eq!(
            node_set(&m, bind[1].threads[0].cpus.as_ref().unwrap()),
            h1.clone()
        );
        assert_eq!(bind[1].shared, Some(Memory::Bind(h1.clone())));
        // Reverse bind: memory on the other half, for both processes (not only one, as the
        // original's INVERSE_BIND).
        let rev = plan(&m, Bench::Numa01, Policy::ReverseBind);
        assert_eq!(rev[0].shared, Some(Memory::Bind(h1.clone())));
        assert_eq!(rev[1].shared, Some(Memory::Bind(h0.clone())));
        assert_eq!(node_set(&m, rev[0].threads[0].cpus.as_ref().unwrap()), h0);
        // Default: nothing bound, the buffer first touched on node 0.
        let def = plan(&m, Bench::Numa01, Policy::Default);
        assert!(def
            .iter()
            .all(|p| p.threads.iter().all(|t| t.cpus.is_none())));
        assert_eq!(def[0].first_touch_node, Some(0));
        // Interleave over every node.
        let il = plan(&m, Bench::Numa01ThreadAlloc, Policy::Interleave);
        assert!(il[0].shared.is_none());
        assert_eq!(
            il[0].threads[0].slice,
            Some(Memory::Interleave(CpuSet::from_iter_u32(0..8)))
        );
    }

    #[test]
    fn numa02_threads_follow_their_cpu_s_node() {
        let m = fixture("intel-xeon4108-2s-ht");
        let bind = plan(&m, Bench::Numa02, Policy::Bind);
        assert_eq!(bind.len(), 1);
        assert_eq!(bind[0].threads.len(), m.online.len());
        for t in &bind[0].threads {
            let cpu = t.cpus.as_ref().unwrap().first().unwrap();
            assert_eq!(t.cpus.as_ref().unwrap().len(), 1);
            let node = m.node_of_cpu(cpu).unwrap();
            assert_eq!(t.slice, Some(Memory::Bind(CpuSet::from_iter_u32([node]))));
        }
        for t in &plan(&m, Bench::Numa02, Policy::ReverseBind)[0].threads {
            let cpu = t.cpus.as_ref().unwrap().first().unwrap();
            let node = m.node_of_cpu(cpu).unwrap();
            let Some(Memory::Bind(mem)) = &t.slice else {
                panic!("{t:?}")
            };
            assert!(!mem.contains(node), "cpu {cpu} node {node} memory {mem:?}");
        }
        // SMT: one thread per core, no two on one core.
        let smt = plan(&m, Bench::Numa02Smt, Policy::Bind);
        assert_eq!(smt[0].threads.len(), m.cores.len());
        assert!(m.cores.len() < m.online.len());
        // Overcommit: numa01 and numa02 together, twice as many threads as CPUs.
        let over = plan(&m, Bench::Overcommit, Policy::Default);
        let threads: usize = over.iter().map(|p| p.threads.len()).sum();
        assert_eq!(threads, 2 * m.online.len());
    }

    #[test]
    fn one_node_machines_make_every_policy_coincide() {
        let m = Topology::synthetic("1x2x1").unwrap();
        assert!(!policies_differ(&m));
        let (h0, h1) = halves(&m);
        assert_eq!(h0, h1);
        let rev = plan(&m, Bench::Numa02, Policy::ReverseBind);
        let bind = plan(&m, Bench::Numa02, Policy::Bind);
        for (a, b) in rev[0].threads.iter().zip(&bind[0].threads) {
            assert_eq!(a.slice, b.slice);
        }
        assert!(policies_differ(&fixture("intel-xeon4108-2s-ht")));
    }
}
