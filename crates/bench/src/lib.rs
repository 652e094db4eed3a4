//! The generators: microbenchmarks that create one kind of contention under control and
//! measure what it costs. Each module is one benchmark; the commands in `contend bench` parse
//! options, call these and render.

pub mod ctx;
pub mod mem;
pub mod numa;
