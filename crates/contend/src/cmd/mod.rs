//! One module per command: parse options, call the libraries, render.

pub mod demo;
pub mod record;
pub mod report;
pub mod topo;
pub mod where_;
