//! One module per command: parse options, call the libraries, render.

pub mod bench;
pub mod c2c;
pub mod cc;
pub mod demo;
pub mod diff;
pub mod record;
pub mod report;
pub mod scale;
pub mod schema;
pub mod shell;
pub mod topo;
pub mod where_;
