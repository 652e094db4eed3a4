//! What the CLI tests share.

pub mod mpi;
