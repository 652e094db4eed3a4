//! Where the generators run and where their memory lives: affinity, pinning, the shared region
//! bound to a NUMA node (mbind), and the checks done before anything runs.

use crate::ops::SHARED_BYTES;
use std::io;
use topology::{CpuSet, Topology};

/// The CPUs this process may run on (`sched_getaffinity`).
pub fn affinity() -> io::Result<CpuSet> {
    // SAFETY: cpu_set_t is plain bits; the kernel fills at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        let max = (std::mem::size_of::<libc::cpu_set_t>() * 8) as u32;
        Ok(CpuSet::from_iter_u32(
            (0..max).filter(|&c| libc::CPU_ISSET(c as usize, &set)),
        ))
    }
}

/// Pins the calling thread to `cpu` and checks it now runs there.
pub fn pin_current_thread(cpu: u32) -> io::Result<()> {
    if cpu as usize >= std::mem::size_of::<libc::cpu_set_t>() * 8 {
        return Err(io::Error::other(format!(
            "CPU {cpu} is beyond the CPU set size"
        )));
    }
    // SAFETY: as above; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
        let now = libc::sched_getcpu();
        if now >= 0 && now as u32 != cpu {
            return Err(io::Error::other(format!(
                "pinned to CPU {cpu} but running on CPU {now}"
            )));
        }
    }
    Ok(())
}

/// One line per CPU problem (offline, absent, outside the affinity mask), empty when all can
/// be used.
pub fn cpu_problems(t: &Topology, cpus: &CpuSet, allowed: &CpuSet) -> Vec<String> {
    let mut problems = Vec::new();
    let offline = cpus.intersection(&t.offline);
    if !offline.is_empty() {
        problems.push(format!("CPU(s) {} are offline", offline.to_list()));
    }
    let absent = cpus.difference(&t.online).difference(&t.offline);
    if !absent.is_empty() {
        problems.push(format!(
            "CPU(s) {} do not exist on this machine (online: {})",
            absent.to_list(),
            t.online.to_list()
        ));
    }
    let outside = cpus.intersection(&t.online).difference(allowed);
    if !outside.is_empty() {
        problems.push(format!(
            "CPU(s) {} are not in this process's affinity mask ({}): see taskset or the cgroup's cpuset",
            outside.to_list(),
            allowed.to_list()
        ));
    }
    problems
}

/// Ok when `node` exists and has memory, else the line that says why not.
pub fn check_memory_node(t: &Topology, node: u32) -> Result<(), String> {
    let ids: Vec<String> = t.nodes.iter().map(|n| n.id.to_string()).collect();
    match t.node(node) {
        None => Err(format!(
            "memory node {node} does not exist on this machine (nodes: {})",
            if ids.is_empty() {
                "none listed".to_string()
            } else {
                ids.join(", ")
            }
        )),
        Some(n) if n.mem_total_kib == Some(0) => Err(format!(
            "memory node {node} has no memory (its CPUs' memory comes from other nodes)"
        )),
        Some(_) => Ok(()),
    }
}

const MPOL_BIND: libc::c_int = 2;
const MPOL_MF_STRICT: libc::c_uint = 1;
const MPOL_F_NODE: libc::c_int = 1;
const MPOL_F_ADDR: libc::c_int = 2;
/// Nodes the mask can name (1024, as libnuma's default).
const MASK_WORDS: usize = 16;

/// The shared region: one page, bound to a node, zeroed between runs.
pub struct SharedRegion {
    ptr: *mut u8,
    len: usize,
    /// The node the kernel says the page is on, when it says.
    pub node: Option<u32>,
    /// Why binding was not possible, when it was not (a kernel without NUMA support).
    pub note: Option<String>,
}

// SAFETY: the region is only reached through raw pointers by the burners and through
// `read`/`zero`, which the runner calls between runs, never during one.
unsafe impl Send for SharedRegion {}
unsafe impl Sync for SharedRegion {}

impl SharedRegion {
    /// Maps one page, binds it to `node` with `mbind(MPOL_BIND, STRICT)` before it is touched,
    /// then faults it in and asks the kernel where it landed.
    pub fn on_node(node: u32) -> io::Result<SharedRegion> {
        if node as usize >= MASK_WORDS * 64 {
            return Err(io::Error::other(format!("node {node} is beyond node 1023")));
        }
        // SAFETY: an anonymous private mapping of one page; checked for MAP_FAILED.
        let len = 4096usize.max(SHARED_BYTES);
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut region = SharedRegion {
            ptr: ptr.cast(),
            len,
            node: None,
            note: None,
        };
        let mut mask = [0 as libc::c_ulong; MASK_WORDS];
        mask[node as usize / 64] |= 1 << (node % 64);
        // SAFETY: mbind on our own mapping with a mask of MASK_WORDS words; the kernel reads
        // maxnode - 1 bits (its historical off-by-one, which libnuma also passes for).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                region.ptr,
                len,
                MPOL_BIND,
                mask.as_ptr(),
                (MASK_WORDS * 64 + 1) as libc::c_ulong,
                MPOL_MF_STRICT,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOSYS) && node == 0 {
                region.note = Some(
                    "the kernel has no NUMA support (mbind: ENOSYS): memory is wherever it is"
                        .into(),
                );
            } else {
                return Err(io::Error::other(format!(
                    "binding the shared line to node {node} (mbind): {e}"
                )));
            }
        }
        region.zero();
        let mut where_: libc::c_int = -1;
        // SAFETY: get_mempolicy with MPOL_F_NODE|MPOL_F_ADDR writes the node of the page at
        // `ptr` into `where_`; no mask is asked for.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut where_ as *mut libc::c_int,
                std::ptr::null_mut::<libc::c_ulong>(),
                0 as libc::c_ulong,
                region.ptr,
                (MPOL_F_NODE | MPOL_F_ADDR) as libc::c_ulong,
            )
        };
        if rc == 0 && where_ >= 0 {
            region.node = Some(where_ as u32);
            if where_ as u32 != node {
                return Err(io::Error::other(format!(
                    "the shared line was bound to node {node} but the kernel put it on node {where_}"
                )));
            }
        }
        Ok(region)
    }

    /// The first [`SHARED_BYTES`] bytes, 64-byte aligned (page aligned).
    pub fn ptr(&self) -> *mut u64 {
        self.ptr.cast()
    }

    pub fn zero(&self) {
        // SAFETY: our mapping, not used by any thread while the runner zeroes it.
        unsafe { std::ptr::write_bytes(self.ptr, 0, SHARED_BYTES) };
    }

    pub fn read(&self) -> [u8; SHARED_BYTES] {
        let mut out = [0u8; SHARED_BYTES];
        // SAFETY: as `zero`; read after the threads were joined.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr(), SHARED_BYTES) };
        out
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `on_node`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The calling thread's CPU time, ns (to tell whether a timed thread kept its CPU).
pub use observe::clock::thread_cpu_ns;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_each_kind_of_bad_cpu() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/topology/intel-haswell-2s-offline-cpu0-node0");
        let t = Topology::from_root(&dir).unwrap();
        let off = t.offline.first().expect("the fixture has an offline CPU");
        let on: Vec<u32> = t.online.iter().take(2).collect();
        let allowed = CpuSet::from_iter_u32([on[0]]);
        let asked = CpuSet::from_iter_u32([off, on[0], on[1], 9999]);
        let p = cpu_problems(&t, &asked, &allowed);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].starts_with(&format!("CPU(s) {off}")) && p[0].ends_with("offline"));
        assert!(p[1].contains("9999") && p[1].contains("do not exist"));
        assert!(p[2].contains(&format!("CPU(s) {} ", on[1])) && p[2].contains("affinity"));
        assert!(cpu_problems(&t, &allowed, &allowed).is_empty());
    }

    #[test]
    fn memory_nodes_must_exist_and_have_memory() {
        let t = Topology::synthetic("2x2x1").unwrap();
        assert!(check_memory_node(&t, 1).is_ok());
        let e = check_memory_node(&t, 7).unwrap_err();
        assert!(
            e.contains("node 7 does not exist") && e.contains("0, 1"),
            "{e}"
        );
        let mut t = t;
        t.nodes[1].mem_total_kib = Some(0);
        assert!(check_memory_node(&t, 1).unwrap_err().contains("no memory"));
    }

    #[test]
    fn the_region_lands_on_node_0_and_pinning_works() {
        let r = SharedRegion::on_node(0).expect("node 0 exists everywhere");
        assert_eq!(r.node.unwrap_or(0), 0);
        assert_eq!(r.ptr() as usize % 4096, 0);
        assert!(r.read().iter().all(|&b| b == 0));
        let allowed = affinity().unwrap();
        let cpu = allowed.first().unwrap();
        std::thread::spawn(move || pin_current_thread(cpu))
            .join()
            .unwrap()
            .unwrap();
        // A node beyond this machine: mbind refuses it.
        assert!(SharedRegion::on_node(1000).is_err());
    }
}
