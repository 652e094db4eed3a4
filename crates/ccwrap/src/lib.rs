//! The compiler driver behind `contend cc -- COMPILER ARGS...`: builds a program for the sharing
//! detector (`contend c2c record`). Also usable as `CC="contend cc --" make`.
//!
//! It keeps the user's command and changes two things:
//! - every C/C++ source is compiled with the compiler's ThreadSanitizer instrumentation
//!   (`-fsanitize=thread`, compile time only), which turns each load and store into a call of
//!   `__tsan_readN`/`__tsan_writeN` (and atomics, ranges, function entry/exit into their hooks);
//! - a link is done without `-fsanitize=thread`, so libtsan is never linked, and with contend's
//!   own sharing runtime (`libcontend_sharing.so`, found by [`find_sharing_runtime`]) instead:
//!   `-Wl,--push-state,--no-as-needed -L<dir> -lcontend_sharing -Wl,--pop-state` first (so its
//!   interposers come first and it is needed even under `--as-needed`), `-Wl,-rpath,<dir>
//!   -pthread` last.
//!
//! A command that compiles and links at once (`gcc -O2 x.c -o x`) is split: each source is
//! compiled to a temporary object with the user's compile flags plus `-fsanitize=thread -c`,
//! then the objects are linked in the sources' places with the user's other arguments. A
//! preprocessing command (`-E`, `-M`, `-MM`) or one with no input file (`--version`,
//! `-print-file-name=...`) runs unchanged. Debug information is whatever the user asked for:
//! with `-g` the report shows source lines, without it code addresses and symbols.
//!
//! gcc and clang (any version, any target prefix: `x86_64-linux-gnu-gcc-12`, `clang++-14`) are
//! known; `cc` and `c++` are resolved through their symlinks, else through `--version`.
//!
//! Limits: `-static` is refused (the runtime is a shared library). gcc instruments at link time
//! under `-flto`, which would need `-fsanitize=thread` (and so libtsan) at the link: with gcc,
//! instrumented compiles get `-fno-lto` after the user's flags (clang instruments before LTO and
//! keeps it). In a split compile-and-link, `-MD` without `-MF` writes its `.d` file beside the
//! temporary object, not beside the output. The run path is a `DT_RUNPATH`, so
//! `LD_LIBRARY_PATH` can point a built program at another copy of the runtime (an empty-hooks
//! build for overhead measurements, say).
//!
//! The pieces are pure where they can be ([`parse`], [`link_plan`], [`compile_plan`] only
//! compute commands); [`run`] is the one entry point that runs them.

mod compiler;
mod parse;
mod plan;
mod runtime;

pub use compiler::{family_of_name, identify, Compiler, Family};
pub use parse::{
    expand_response_files, is_source_name, parse, split_command, Arg, Kind, Mode, Parsed,
};
pub use plan::{compile_plan, instrument_flags, link_plan, shell_words, Plan};
pub use runtime::{find_sharing_runtime, set_embedded, RUNTIME_FILE};

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::Command;

/// Why a build could not be done. [`Error::is_bad_input`] tells the user's mistakes (exit code
/// 2 in contend) from failures of this machine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no compiler command was given (`contend cc -- gcc -O2 x.c -o x`)")]
    NoCommand,
    /// A compiler named by its family (`gcc-12`) that is neither a file nor on PATH.
    #[error("the compiler `{0}` was not found (not an executable file, nor on PATH)")]
    CompilerNotFound(String),
    /// `cc` or `c++` (named, or the default when none is) is not on PATH.
    #[error(
        "the compiler `{0}` was not found on PATH: name gcc or clang (`contend cc -- gcc ...`)"
    )]
    DefaultCompilerNotFound(String),
    #[error("`{0}` is not a compiler `contend cc` knows: it supports {known}", known = compiler::KNOWN)]
    UnknownCompiler(String),
    /// `-static` or `-static-pie` on a link.
    #[error("contend cc: {0} cannot be used: the sharing runtime is a shared library, so the program must be linked dynamically")]
    StaticLink(String),
    #[error("CONTEND_SHARING_LIB names {}, which is not a file", .0.display())]
    RuntimeVariableNotAFile(PathBuf),
    /// `dir` is the directory of the running executable, where the runtime was looked for.
    #[error("the sharing runtime {RUNTIME_FILE} is not installed beside contend (looked in {0}, {0}/deps and {0}/../lib/contend): build it with `cargo build -p sharing` (`--release` for a release contend), or set CONTEND_SHARING_LIB to its path", .dir.display())]
    RuntimeNotInstalled { dir: PathBuf },
    /// The runtime contend carries could not be written to its cache.
    #[error("{0}")]
    EmbeddedRuntime(String),
    /// The compiler could not be started (the error is part of the message: it says why).
    #[error("contend cc: cannot run the compiler {program}: {reason}")]
    CannotRun {
        program: String,
        reason: std::io::Error,
    },
    #[error("finding the contend executable")]
    CurrentExe(#[source] std::io::Error),
    #[error("creating a temporary directory for the instrumented objects")]
    TempDir(#[source] std::io::Error),
}

impl Error {
    /// The user's command or set-up is wrong (as opposed to this machine failing).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, Error::CurrentExe(_) | Error::TempDir(_))
    }
}

/// What [`run`] is about to do, for a caller that shows it (`contend cc --verbose`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The compiler and what the command does with it.
    Identified { compiler: Compiler, mode: Mode },
    /// A command about to run, as shell words.
    Running(String),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Identified { compiler, mode } => write!(
                f,
                "{} ({}), {}",
                compiler.program,
                compiler.family.name(),
                match mode {
                    Mode::PassThrough => "nothing to instrument: run unchanged",
                    Mode::Compile => "compile with instrumentation",
                    Mode::Link => "compile with instrumentation, link with the sharing runtime",
                }
            ),
            Step::Running(words) => f.write_str(words),
        }
    }
}

/// Runs the user's compiler command (`command`: the compiler, or none, and its arguments) the
/// way the crate documentation says, telling `on_step` each step before it is taken.
///
/// A pass-through or compile-only command replaces this process with the compiler (so the
/// exit status is the compiler's); this returns only if the compiler could not be started. A
/// link returns 0 when every command succeeded, else the exit status of the first that failed
/// (128+N when it was killed by signal N), with the temporary objects already removed.
pub fn run(command: &[String], on_step: &mut dyn FnMut(&Step)) -> Result<i32, Error> {
    let (program, rest) = split_command(command).ok_or(Error::NoCommand)?;
    let compiler = identify(&program)?;
    let argv = expand_response_files(rest);
    let parsed = parse(&argv);
    on_step(&Step::Identified {
        compiler: compiler.clone(),
        mode: parsed.mode,
    });
    match parsed.mode {
        Mode::PassThrough => {
            let mut cmd: Vec<OsString> = vec![compiler.program.clone().into()];
            cmd.extend(rest.iter().map(OsString::from));
            Err(exec(&cmd, on_step))
        }
        Mode::Compile => Err(exec(
            &compile_plan(&compiler.program, compiler.family, rest),
            on_step,
        )),
        Mode::Link => {
            if let Some(a) = parsed
                .args
                .iter()
                .find(|a| matches!(a.words[0].as_str(), "-static" | "-static-pie"))
            {
                return Err(Error::StaticLink(a.words[0].clone()));
            }
            let runtime = find_sharing_runtime()?;
            let tmp = tempfile::Builder::new()
                .prefix("contend-cc.")
                .tempdir()
                .map_err(Error::TempDir)?;
            let plan = link_plan(
                &compiler.program,
                compiler.family,
                &parsed,
                &runtime,
                tmp.path(),
            );
            for cmd in &plan.commands {
                let code = run_one(cmd, on_step)?;
                if code != 0 {
                    return Ok(code);
                }
            }
            Ok(0)
        }
    }
}

/// The compiler's exit status as ours (128+N when it was killed by signal N).
fn status_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .or(status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

fn cannot_run(cmd: &[OsString], reason: std::io::Error) -> Error {
    Error::CannotRun {
        program: cmd[0].to_string_lossy().into_owned(),
        reason,
    }
}

/// Runs `cmd` (never empty: every plan starts with the compiler) and returns its status.
fn run_one(cmd: &[OsString], on_step: &mut dyn FnMut(&Step)) -> Result<i32, Error> {
    on_step(&Step::Running(shell_words(cmd)));
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .map_err(|e| cannot_run(cmd, e))?;
    Ok(status_code(status))
}

/// Replaces this process with `cmd` (its exit status is then the compiler's); returns only
/// when it could not.
fn exec(cmd: &[OsString], on_step: &mut dyn FnMut(&Step)) -> Error {
    on_step(&Step::Running(shell_words(cmd)));
    let e = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    cannot_run(cmd, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_command_is_bad_input_not_a_panic() {
        let e = run(&[], &mut |_| {}).unwrap_err();
        assert!(matches!(e, Error::NoCommand) && e.is_bad_input());
    }

    #[test]
    fn an_unknown_compiler_is_refused_before_anything_runs() {
        let mut steps = 0;
        let e = run(
            &["/nonexistent/contend-no-such-compiler".into(), "x.c".into()],
            &mut |_| steps += 1,
        )
        .unwrap_err();
        assert!(matches!(e, Error::UnknownCompiler(_)), "{e}");
        assert!(e.is_bad_input());
        assert_eq!(steps, 0);
    }

    #[test]
    fn only_the_machines_failures_are_not_bad_input() {
        let io = || std::io::Error::other("x");
        assert!(!Error::TempDir(io()).is_bad_input());
        assert!(!Error::CurrentExe(io()).is_bad_input());
        assert!(Error::StaticLink("-static".into()).is_bad_input());
        assert!(Error::CannotRun {
            program: "gcc".into(),
            reason: io()
        }
        .is_bad_input());
    }

    #[test]
    fn steps_read_as_contend_cc_prints_them() {
        let step = Step::Identified {
            compiler: Compiler {
                program: "gcc".into(),
                family: Family::Gcc,
            },
            mode: Mode::Compile,
        };
        assert_eq!(step.to_string(), "gcc (gcc), compile with instrumentation");
    }
}
