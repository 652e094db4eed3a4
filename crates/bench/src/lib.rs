//! The generators: contention made on purpose, under control, to characterise a machine.
//!
//! - [`ops`]: one instruction in a tight loop on a shared line (assembly, so it is what it says).
//! - [`patterns`]: ccont's load patterns computed from a [`topology::Topology`].
//! - [`atomic`]: the `bench atomic` runner (pinned threads, barrier, warm-up, ns/op).
//! - [`latency`]: core-to-core cache-line transfer latency (ping-pong between two CPUs).
//! - [`placement`]: affinity, pinning, memory bound to a node, checks before running.
//! - [`ctx`]: lmbench's lat_ctx, a ring of processes or threads passing a token through pipes.
//! - [`mem`]: STREAM and the memory contention generator (non-temporal streams).
//! - [`numa`]: the AUTONUMA benchmarks under placement policies.

pub mod atomic;
pub mod ctx;
pub mod latency;
pub mod mem;
pub mod numa;
pub mod ops;
pub mod patterns;
pub mod placement;
pub mod stats;

pub use ops::Op;
pub use patterns::{Pattern, Plan};
pub use stats::Stats;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Unavailable(String),
    #[error("could not pin a thread to CPU {cpu}: {source}")]
    Pin { cpu: u32, source: std::io::Error },
    #[error("placing the shared memory: {0}")]
    Memory(std::io::Error),
    #[error("the loops did not do what they say: {0}")]
    Unchecked(String),
    #[error("a measuring thread stopped")]
    Aborted,
}
