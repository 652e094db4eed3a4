//! The example programs bundled into contend, so `contend demo` works from any directory: their
//! sources (embedded from `examples/`) and how to build them with the user's own toolchain.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Example {
    pub name: &'static str,
    pub source: &'static str,
    pub language: Language,
    /// What the program does, for the demo's narration.
    pub about: &'static str,
}

/// What an example is written in: what builds it.
#[derive(Clone, Copy)]
pub enum Language {
    C,
    /// Rust with std alone, built by `rustc` (no crates to download).
    Rust,
}

impl Language {
    fn extension(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Rust => "rs",
        }
    }
}

pub const THREADS_MEMORY: Example = Example {
    name: "threads_memory",
    language: Language::C,
    source: include_str!("../../../examples/threads_memory.c"),
    about: "3 named threads (one spinning, two sleeping) with 4 MiB of heap, 256 KiB of stack, 40 MiB of anonymous memory (thread buffers and a private mapping), 4 MiB shared and its own executable mapped",
};

pub const PLANTED_HOLD: Example = Example {
    name: "planted_hold",
    language: Language::C,
    source: include_str!("../../../examples/locks/planted_hold.c"),
    about: "4 threads take `hot_lock` 100 times each and hold it 1 ms, from one call site; one thread alone takes `cold_lock`",
};

pub const SHAREQUEUE_SINGLE: Example = Example {
    name: "sharequeue_single",
    language: Language::C,
    source: include_str!("../../../examples/locks/sharequeue_single.c"),
    about: "the thesis's Sharequeue: 4 threads take items from a shared queue and put new ones back, one mutex for head and tail",
};

pub const SHAREQUEUE_TWO: Example = Example {
    name: "sharequeue_two",
    language: Language::C,
    source: include_str!("../../../examples/locks/sharequeue_two.c"),
    about: "the same work with two mutexes, one for the head and one for the tail",
};

/// A Rust program's lock, which no pthread call shows (examples/waits).
pub const STD_MUTEX: Example = Example {
    name: "std_mutex",
    language: Language::Rust,
    source: include_str!("../../../examples/waits/std_mutex.rs"),
    about: "4 Rust threads take one `std::sync::Mutex` 50 times each and hold it 1 ms; std's lock calls no pthread function, it waits on a futex",
};

/// The scaling examples (examples/scaling), for the demo of `record` and `scale`.
pub const INDEPENDENT: Example = Example {
    name: "independent",
    language: Language::C,
    source: include_str!("../../../examples/scaling/independent.c"),
    about: "2 threads each compute for 400 ms and never wait for each other: about 2 threads active on 2 CPUs",
};

pub const SERIALISED: Example = Example {
    name: "serialised",
    language: Language::C,
    source: include_str!("../../../examples/scaling/serialised.c"),
    about: "the same compute done under one mutex, `big_lock`, 25 ms at a time: one thread active at a time, the other waiting for the lock",
};

/// The MPI examples (examples/mpi), for the demo's MPI section.
pub const MPI_LATE_SENDER: Example = Example {
    name: "late_sender",
    language: Language::C,
    source: include_str!("../../../examples/mpi/late_sender.c"),
    about: "2 ranks; rank 0 sleeps 100 ms before each MPI_Send, so rank 1 waits in MPI_Recv",
};

pub const MPI_NXN: Example = Example {
    name: "nxn",
    language: Language::C,
    source: include_str!("../../../examples/mpi/nxn.c"),
    about: "3 ranks; rank 2 sleeps 100 ms before each MPI_Allreduce, the others wait for it",
};

/// An MPI compiler wrapper on PATH (Open MPI's first) and its launcher, if any is installed.
pub fn mpi_toolchain() -> Option<(&'static str, &'static str)> {
    let on_path = |c: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(c).is_file()))
    };
    [
        ("mpicc.openmpi", "mpirun.openmpi"),
        ("mpicc.mpich", "mpirun.mpich"),
        ("mpicc", "mpirun"),
    ]
    .into_iter()
    .find(|(cc, run)| on_path(cc) && on_path(run))
}

/// Writes `example`'s source into `dir` and runs `compiler` (its name shown as `shown`) with
/// `-o EXE SOURCE` appended; returns the executable's path.
fn compile(
    example: &Example,
    dir: &Path,
    mut compiler: Command,
    shown: &str,
) -> anyhow::Result<PathBuf> {
    let src = dir.join(format!("{}.{}", example.name, example.language.extension()));
    let exe = dir.join(example.name);
    std::fs::write(&src, example.source).with_context(|| format!("writing {}", src.display()))?;
    let out = compiler
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .with_context(|| format!("running {shown}"))?;
    if !out.status.success() {
        bail!(
            "{shown} failed to build {}:\n{}",
            example.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(exe)
}

/// Compiles an MPI example with `mpicc` into `dir`.
pub fn build_mpi(example: &Example, mpicc: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    let mut cmd = Command::new(mpicc);
    cmd.args(["-O2", "-g"]);
    compile(example, dir, cmd, mpicc)
}

/// The sharing examples (examples/sharing), for the demo of `contend cc` and `contend c2c`.
pub const SHARING_READER_WRITER: Example = Example {
    name: "reader_writer",
    language: Language::C,
    source: include_str!("../../../examples/sharing/reader_writer.c"),
    about: "the perf c2c slides' struct: one thread writes `writer` (+8) while another reads `reader` (+0), on one 64-byte line; `padded` puts them 64 bytes apart",
};

pub const SHARING_ATOMIC_COUNTER: Example = Example {
    name: "atomic_counter",
    language: Language::C,
    source: include_str!("../../../examples/sharing/atomic_counter.c"),
    about:
        "every thread increments one `_Atomic long`: true sharing, which no layout change removes",
};

/// Compiles a sharing example with `contend cc -- CC -O2 -g` (this contend) into `dir`.
pub fn build_instrumented(example: &Example, dir: &Path) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding the contend executable")?;
    let cc = compiler();
    let mut cmd = Command::new(me);
    cmd.args(["cc", "--", &cc, "-O2", "-g"]);
    compile(example, dir, cmd, &format!("contend cc -- {cc}"))
}

/// The C compiler to use: `$CC`, else `cc`.
pub fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

/// Compiles an example into `dir` with the user's toolchain (`$CC`, or `rustc` for Rust) and
/// returns the executable's path.
pub fn build(example: &Example, dir: &Path) -> anyhow::Result<PathBuf> {
    let (tool, flags, install): (String, &[&str], &str) = match example.language {
        Language::C => (
            compiler(),
            &["-O2", "-g", "-pthread"],
            "Debian: `apt-get install gcc`) or set CC",
        ),
        Language::Rust => (
            "rustc".into(),
            &["-O", "-g"],
            "https://rustup.rs, or Debian: `apt-get install rustc`)",
        ),
    };
    let mut cmd = Command::new(&tool);
    cmd.args(flags);
    match compile(example, dir, cmd, &tool) {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
        {
            bail!("no compiler `{tool}` found: install one ({install}")
        }
        built => built,
    }
}
