//! The contend binary as users run it: one test binary for every command (one module per
//! command or theme, `common` for what they share), so the tests link once instead of once per
//! file. Run one module with `cargo test -p contend --test cli locks::`; a test's full name
//! (`locks::planted_hold_is_found_with_its_call_site_and_amounts`) is what `testkit`'s skip
//! lines and libtest print.

mod common;

mod activity;
mod architecture;
mod bench;
mod bench_ctx;
#[cfg(target_arch = "x86_64")]
mod bench_disasm;
mod bench_mem;
mod bench_numa;
mod c2c_pmu;
mod cc;
mod demo;
mod diff;
mod fake_cluster;
mod fixtures;
mod hostile_input;
mod hostile_private;
mod hostile_probe;
mod hostile_sharing;
mod hostile_topology;
mod html;
mod installed;
mod interfere;
mod locks;
mod many_threads;
mod mpi;
mod mpi_failures;
mod report;
mod scale;
mod scale_truth;
mod schema;
mod sharing;
mod shell;
mod terminal;
mod topo;
mod waits;
mod waits_runtimes;
mod whatif;
mod r#where;
