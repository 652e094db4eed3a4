//! Models over recorded traces. Pure functions: no file, process or clock is touched here, so
//! every model is tested with constructed inputs whose answers are known.

pub mod activity;
pub mod allocs;
pub mod clock;
pub mod concurrency;
pub mod locks;
pub mod mpi;
pub mod service;
pub mod sharing;
pub mod split;
pub mod stats;
pub mod units;
pub mod waits;
pub mod waitstates;
