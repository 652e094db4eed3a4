//! `contend cc -- COMPILER ARGS...`: a compiler driver that builds a program for the sharing
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

use crate::exit::bad_input;
use anyhow::Context;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Args)]
pub struct Args {
    /// Print the compiler commands contend runs, on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// The compiler and its arguments, after `--` (`contend cc -- gcc -O2 -g x.c -o x`).
    /// Without a compiler name (`CC="contend cc --"`), `$CONTEND_CC` or else `cc` (`c++` for
    /// C++ sources) is used.
    #[arg(last = true, value_name = "COMPILER ARGS", required = true)]
    command: Vec<String>,
}

/// The file name of the sharing runtime.
pub const RUNTIME_FILE: &str = "libcontend_sharing.so";

/// The compilers `contend cc` knows, for messages.
const KNOWN: &str = "gcc and clang (as gcc, g++, clang, clang++, cc or c++, versioned names such as gcc-12 or clang-14, and target-prefixed names such as x86_64-linux-gnu-gcc)";

/// A compiler family: their drivers take the same options, but their instrumentation calls
/// partly different hooks (gcc: `__tsan_read_range`/`__tsan_write_range` and named
/// compare-exchange hooks; clang: `__tsan_memcpy`/`__tsan_memset`, unaligned accesses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Gcc,
    Clang,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Gcc => "gcc",
            Family::Clang => "clang",
        }
    }
}

/// The compiler a command names.
#[derive(Clone, Debug)]
pub struct Compiler {
    /// As the user wrote it (run as such, so PATH lookup is the shell's).
    pub program: String,
    pub family: Family,
}

/// The family of a compiler's file name: `gcc`, `x86_64-linux-gnu-g++-12`, `clang-14`, ...;
/// `None` for `cc`, `c++` and names it does not know.
pub fn family_of_name(name: &str) -> Option<Family> {
    let base = name.rsplit('/').next().unwrap_or(name);
    // Version suffix: `-12`, `-14.0`, or digits glued on (`gcc12`).
    let mut stem = base;
    if let Some((head, tail)) = stem.rsplit_once('-') {
        if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit() || c == '.') {
            stem = head;
        }
    }
    let stem = stem.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    // Target prefix: `x86_64-linux-gnu-gcc`.
    let tool = stem.rsplit('-').next().unwrap_or(stem);
    match tool {
        "gcc" | "g++" => Some(Family::Gcc),
        "clang" | "clang++" => Some(Family::Clang),
        _ => None,
    }
}

fn is_generic_name(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    matches!(base, "cc" | "c++" | "CC")
}

/// `name` as the shell would find it: a path as is, else the first executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return executable(&p).then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| executable(p))
    })
}

/// Identifies the compiler `program` names: by its name, else by the file its symlinks lead to,
/// else (for `cc` and `c++` only) by what `--version` prints.
pub fn identify(program: &str) -> anyhow::Result<Compiler> {
    let compiler = |family| Compiler {
        program: program.to_string(),
        family,
    };
    let found = which(program);
    if let Some(f) = family_of_name(program) {
        if found.is_none() {
            return Err(bad_input(format!(
                "the compiler `{program}` was not found (not an executable file, nor on PATH)"
            )));
        }
        return Ok(compiler(f));
    }
    let unknown = || {
        bad_input(format!(
            "`{program}` is not a compiler `contend cc` knows: it supports {KNOWN}"
        ))
    };
    let Some(path) = found else {
        if is_generic_name(program) {
            return Err(bad_input(format!(
                "the compiler `{program}` was not found on PATH: name gcc or clang (`contend cc -- gcc ...`)"
            )));
        }
        return Err(unknown());
    };
    if let Ok(real) = std::fs::canonicalize(&path) {
        if let Some(f) = real.to_str().and_then(family_of_name) {
            return Ok(compiler(f));
        }
    }
    if is_generic_name(program) {
        if let Ok(out) = Command::new(&path).arg("--version").output() {
            let text = String::from_utf8_lossy(&out.stdout);
            let first = text.lines().next().unwrap_or_default();
            if first.contains("clang") {
                return Ok(compiler(Family::Clang));
            }
            if first.contains("gcc")
                || first.contains("GCC")
                || text.contains("Free Software Foundation")
            {
                return Ok(compiler(Family::Gcc));
            }
        }
    }
    Err(unknown())
}

/// What a compiler command does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Preprocessing only, dependency generation only, or no input: run unchanged.
    PassThrough,
    /// `-c` or `-S` (or precompiled headers only): compile with instrumentation.
    Compile,
    /// Everything else: compile the sources with instrumentation, link with the runtime.
    Link,
}

/// What one argument (with its separate value, if it takes one) is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A C or C++ source file (by extension, or by the `-x` language in effect).
    Source,
    /// Any other input: objects, archives, libraries, assembler, linker scripts.
    Input,
    /// `-o FILE` (or `-oFILE`).
    Output,
    /// `-x LANG`: the language of the inputs after it (`none`: by extension again).
    Language(String),
    /// Options only the link uses (`-l`, `-L`, `-Wl,`, `-shared`, ...): not given to compiles.
    LinkOnly,
    /// Options only a compile uses, which a link of objects does not need (dependency output).
    CompileOnly,
    /// `-fsanitize=...` naming thread (possibly among others).
    Sanitize,
    /// Everything else: given to both.
    Other,
}

/// One argument of the user's command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The option and, when it takes a separate value, the value.
    pub words: Vec<String>,
    pub kind: Kind,
    /// For sources: the `-x` language in effect, if one was given.
    pub language: Option<String>,
}

/// Options whose value is the next argument when it is not glued on.
const WITH_VALUE: &[&str] = &[
    "-o",
    "-I",
    "-D",
    "-U",
    "-A",
    "-include",
    "-imacros",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-iprefix",
    "-iwithprefix",
    "-iwithprefixbefore",
    "-isysroot",
    "-imultilib",
    "-ivfsoverlay",
    "-L",
    "-l",
    "-x",
    "-MF",
    "-MT",
    "-MQ",
    "-Xlinker",
    "-Xassembler",
    "-Xpreprocessor",
    "-Xclang",
    "-mllvm",
    "-u",
    "-T",
    "-z",
    "-e",
    "-aux-info",
    "--param",
    "-target",
    "-arch",
    "-B",
    "-gcc-toolchain",
    "-dumpbase",
    "-dumpbase-ext",
    "-dumpdir",
    "-specs",
    "--sysroot",
];

/// Options that only the link step takes, exactly.
const LINK_ONLY: &[&str] = &[
    "-shared",
    "-static",
    "-static-pie",
    "-rdynamic",
    "-pie",
    "-no-pie",
    "-s",
    "-r",
    "-nostdlib",
    "-nostartfiles",
    "-nodefaultlibs",
    "-nolibc",
    "-static-libgcc",
    "-shared-libgcc",
    "-static-libstdc++",
    "-static-libasan",
    "-static-libtsan",
    "-symbolic",
    "-Xlinker",
    "-u",
    "-T",
    "-z",
    "-e",
];

/// C and C++ sources by extension (as gcc's driver decides the language), preprocessed ones
/// included.
pub fn is_source_name(name: &str) -> bool {
    let Some((_, ext)) = name.rsplit_once('.') else {
        return false;
    };
    if name.ends_with('/') {
        return false;
    }
    matches!(
        ext,
        "c" | "i" | "cc" | "cp" | "cxx" | "cpp" | "CPP" | "c++" | "C" | "ii"
    )
}

fn is_header_name(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(_, ext)| {
        matches!(
            ext,
            "h" | "hh" | "H" | "hp" | "hxx" | "hpp" | "HPP" | "h++" | "tcc"
        )
    })
}

fn is_source_language(lang: &str) -> bool {
    matches!(
        lang,
        "c" | "c++" | "cpp-output" | "c++-cpp-output" | "c-cpp-output"
    )
}

fn is_header_language(lang: &str) -> bool {
    matches!(
        lang,
        "c-header" | "c++-header" | "cpp-header" | "c++-system-header" | "c++-user-header"
    )
}

/// The user's command split into arguments with their kinds, and what it does.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub args: Vec<Arg>,
    pub mode: Mode,
}

/// Classifies a compiler command's arguments (without the compiler itself).
pub fn parse(argv: &[String]) -> Parsed {
    let mut args = Vec::new();
    let mut language: Option<String> = None;
    let (mut compile_only, mut pass_through) = (false, false);
    let (mut inputs, mut headers) = (0usize, 0usize);
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        i += 1;
        let mut words = vec![a.clone()];
        if WITH_VALUE.contains(&a.as_str()) && i < argv.len() {
            words.push(argv[i].clone());
            i += 1;
        }
        let value = words.get(1).cloned();
        let kind = if a == "-" || !a.starts_with('-') {
            inputs += 1;
            match &language {
                Some(l) if is_source_language(l) => Kind::Source,
                Some(l) if is_header_language(l) => {
                    headers += 1;
                    Kind::Input
                }
                Some(_) => Kind::Input,
                None if is_source_name(a) => Kind::Source,
                None => {
                    if is_header_name(a) {
                        headers += 1;
                    }
                    Kind::Input
                }
            }
        } else if a == "-x" || (a.starts_with("-x") && a.len() > 2) {
            let l = value.unwrap_or_else(|| a[2..].to_string());
            language = (l != "none").then(|| l.clone());
            Kind::Language(l)
        } else if a == "-o" || (a.starts_with("-o") && a.len() > 2) {
            Kind::Output
        } else if a == "-c" || a == "-S" {
            compile_only = true;
            Kind::Other
        } else if matches!(a.as_str(), "-E" | "-M" | "-MM" | "-fsyntax-only") {
            pass_through = true;
            Kind::Other
        } else if a.starts_with("-fsanitize=") {
            Kind::Sanitize
        } else if LINK_ONLY.contains(&a.as_str())
            || a.starts_with("-l")
            || a.starts_with("-L")
            || a.starts_with("-Wl,")
            || a.starts_with("-fuse-ld=")
            || a.starts_with("--ld-path=")
        {
            Kind::LinkOnly
        } else if matches!(
            a.as_str(),
            "-MD" | "-MMD" | "-MF" | "-MT" | "-MQ" | "-MP" | "-MG"
        ) || a.starts_with("-MF")
            || a.starts_with("-MT")
            || a.starts_with("-MQ")
        {
            Kind::CompileOnly
        } else {
            Kind::Other
        };
        args.push(Arg {
            words,
            language: if kind == Kind::Source {
                language.clone()
            } else {
                None
            },
            kind,
        });
    }
    let mode = if pass_through || inputs == 0 {
        Mode::PassThrough
    } else if compile_only || headers == inputs {
        Mode::Compile
    } else {
        Mode::Link
    };
    Parsed { args, mode }
}

/// `-fsanitize=LIST` without `thread` (`None` when nothing is left).
fn without_thread(arg: &str) -> Option<String> {
    let list = arg.strip_prefix("-fsanitize=")?;
    let rest: Vec<&str> = list.split(',').filter(|s| *s != "thread").collect();
    (!rest.is_empty()).then(|| format!("-fsanitize={}", rest.join(",")))
}

/// Where the sharing runtime is: `$CONTEND_SHARING_LIB`, else the newest of
/// `libcontend_sharing.so` beside the contend executable, in `deps/` beside it (where cargo
/// builds it) and in `../lib/contend/` (an installation).
pub fn find_sharing_runtime() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("CONTEND_SHARING_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(std::fs::canonicalize(&p).unwrap_or(p));
        }
        return Err(bad_input(format!(
            "CONTEND_SHARING_LIB names {}, which is not a file",
            p.display()
        )));
    }
    let exe = std::env::current_exe().context("finding the contend executable")?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let candidates = [
        dir.join(RUNTIME_FILE),
        dir.join("deps").join(RUNTIME_FILE),
        dir.join("../lib/contend").join(RUNTIME_FILE),
    ];
    // Cargo leaves a copy beside the binary (workspace builds) and in deps/: take the newest,
    // so a stale copy never shadows a fresh build.
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let found = candidates
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| modified(p))
        .cloned()
        .ok_or_else(|| {
            bad_input(format!(
                "the sharing runtime {RUNTIME_FILE} is not installed beside contend (looked in {0}, {0}/deps and {0}/../lib/contend): build it with `cargo build -p sharing` (`--release` for a release contend), or set CONTEND_SHARING_LIB to its path",
                dir.display()
            ))
        })?;
    Ok(std::fs::canonicalize(&found).unwrap_or(found))
}

/// The arguments that link the runtime in: first (so that its allocator and thread-creation
/// interposers come before any library's, and it is needed even by a program whose own code
/// is not instrumented, under `--as-needed` too), and at the end (where to find it at run time).
fn runtime_args(runtime: &Path) -> (Vec<OsString>, Vec<OsString>) {
    let dir = runtime.parent().unwrap_or(Path::new("."));
    let mut head: Vec<OsString> = vec!["-Wl,--push-state,--no-as-needed".into()];
    if runtime.file_name() == Some(std::ffi::OsStr::new(RUNTIME_FILE)) {
        let mut l = OsString::from("-L");
        l.push(dir);
        head.push(l);
        head.push("-lcontend_sharing".into());
    } else {
        head.push(runtime.as_os_str().to_owned());
    }
    head.push("-Wl,--pop-state".into());
    let mut rpath = OsString::from("-Wl,-rpath,");
    rpath.push(dir);
    (head, vec![rpath, "-pthread".into()])
}

/// The plan: the commands to run, in order.
#[derive(Debug)]
pub struct Plan {
    pub commands: Vec<Vec<OsString>>,
}

/// The commands for a link: one instrumented compile per source (into `tmp`), then the link.
pub fn link_plan(
    compiler: &str,
    family: Family,
    parsed: &Parsed,
    runtime: &Path,
    tmp: &Path,
) -> Plan {
    let argv: Vec<String> = parsed.args.iter().flat_map(|a| a.words.clone()).collect();
    let instrument = instrument_flags(family, &argv);
    let mut commands = Vec::new();
    // Flags every compile gets: everything but inputs, output, language switches and what only
    // the link takes.
    let compile_flags: Vec<&String> = parsed
        .args
        .iter()
        .filter(|a| matches!(a.kind, Kind::Other | Kind::CompileOnly | Kind::Sanitize))
        .filter(|a| a.words[0] != "-fsanitize=thread")
        .flat_map(|a| a.words.iter())
        .collect();
    let relocatable = parsed.args.iter().any(|a| a.words[0] == "-r");
    let (head, tail) = if relocatable {
        (Vec::new(), Vec::new())
    } else {
        runtime_args(runtime)
    };
    let mut link: Vec<OsString> = vec![compiler.into()];
    link.extend(head);
    let mut sources = 0usize;
    let mut language_in_effect: Option<&str> = None;
    for a in &parsed.args {
        match &a.kind {
            Kind::Source => {
                let src = &a.words[0];
                let stem = Path::new(src)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .filter(|s| !s.is_empty() && s != "-")
                    .unwrap_or_else(|| "stdin".into());
                let obj = tmp.join(format!("{sources}-{stem}.o"));
                sources += 1;
                let mut c: Vec<OsString> = vec![compiler.into()];
                c.extend(compile_flags.iter().map(|s| OsString::from(s.as_str())));
                c.extend(instrument.iter().cloned());
                c.push("-c".into());
                if let Some(l) = &a.language {
                    c.push("-x".into());
                    c.push(l.into());
                }
                c.push(src.into());
                c.push("-o".into());
                c.push(obj.clone().into());
                commands.push(c);
                if let Some(l) = language_in_effect {
                    link.extend([
                        "-x".into(),
                        "none".into(),
                        obj.into(),
                        "-x".into(),
                        l.into(),
                    ]);
                } else {
                    link.push(obj.into());
                }
            }
            Kind::Language(l) => {
                language_in_effect = (l != "none").then_some(l.as_str());
                link.extend(a.words.iter().map(OsString::from));
            }
            Kind::Sanitize => {
                if let Some(kept) = without_thread(&a.words[0]) {
                    link.push(kept.into());
                }
            }
            Kind::CompileOnly => {}
            _ => link.extend(a.words.iter().map(OsString::from)),
        }
    }
    link.extend(tail);
    commands.push(link);
    Plan { commands }
}

/// The command for a compile-only command: the user's, plus `-fsanitize=thread`.
pub fn compile_plan(compiler: &str, family: Family, argv: &[String]) -> Vec<OsString> {
    let mut c: Vec<OsString> = vec![compiler.into()];
    c.extend(argv.iter().map(OsString::from));
    c.extend(instrument_flags(family, argv));
    c
}

/// What a compile adds: `-fsanitize=thread`, and with gcc under `-flto` also `-fno-lto` (gcc
/// instruments at link time under LTO, which would need `-fsanitize=thread` at the link and so
/// libtsan: the objects are compiled without LTO instead).
pub fn instrument_flags(family: Family, argv: &[String]) -> Vec<OsString> {
    let mut flags = vec![OsString::from("-fsanitize=thread")];
    let lto = argv
        .iter()
        .rfind(|a| a.starts_with("-flto") || a.as_str() == "-fno-lto")
        .is_some_and(|a| a != "-fno-lto" && a != "-flto=none");
    if family == Family::Gcc && lto {
        flags.push("-fno-lto".into());
    }
    flags
}

/// Expands `@file` response files (whitespace-separated, with '', "" and \ quoting), once.
fn expand_response_files(argv: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for a in argv {
        let Some(file) = a.strip_prefix('@').filter(|f| !f.is_empty()) else {
            out.push(a.clone());
            continue;
        };
        let Ok(text) = std::fs::read_to_string(file) else {
            // The compiler treats an unreadable @file as a plain argument too.
            out.push(a.clone());
            continue;
        };
        let (mut word, mut in_word, mut quote) = (String::new(), false, None::<char>);
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (_, '\\') => {
                    if let Some(n) = chars.next() {
                        word.push(n);
                        in_word = true;
                    }
                }
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    in_word = true;
                }
                (None, c) if c.is_whitespace() => {
                    if in_word {
                        out.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                (None, c) => {
                    word.push(c);
                    in_word = true;
                }
            }
        }
        if in_word {
            out.push(word);
        }
    }
    Ok(out)
}

fn shell_words(cmd: &[OsString]) -> String {
    cmd.iter()
        .map(|w| {
            let s = w.to_string_lossy();
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,+:@%".contains(c))
            {
                s.into_owned()
            } else {
                format!("'{}'", s.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The compiler's exit status as ours (128+N when it was killed by signal N).
fn status_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .or(status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

fn run_one(cmd: &[OsString], verbose: bool) -> anyhow::Result<i32> {
    if verbose {
        eprintln!("contend cc: {}", shell_words(cmd));
    }
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .map_err(|e| {
            bad_input(format!(
                "contend cc: cannot run the compiler {}: {e}",
                cmd[0].to_string_lossy()
            ))
        })?;
    Ok(status_code(status))
}

/// Replaces this process with `cmd` (its exit status is then the compiler's).
fn exec(cmd: &[OsString], verbose: bool) -> anyhow::Error {
    if verbose {
        eprintln!("contend cc: {}", shell_words(cmd));
    }
    let e = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    bad_input(format!(
        "contend cc: cannot run the compiler {}: {e}",
        cmd[0].to_string_lossy()
    ))
}

/// Splits the command into the compiler and its arguments: a first word that looks like an
/// option or an input file means no compiler was named (`CC="contend cc --"`).
fn compiler_and_args(command: &[String]) -> (String, &[String]) {
    let first = &command[0];
    let named = !(first.starts_with('-')
        || first.starts_with('@')
        || is_source_name(first)
        || first.ends_with(".o")
        || first.ends_with(".a")
        || first.ends_with(".so"));
    if named {
        return (first.clone(), &command[1..]);
    }
    let cxx = command.iter().any(|a| {
        is_source_name(a) && !a.ends_with(".c") && !a.ends_with(".i") && !a.starts_with('-')
    });
    let default = std::env::var("CONTEND_CC")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| if cxx { "c++" } else { "cc" }.to_string());
    (default, command)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (program, rest) = compiler_and_args(&args.command);
    let compiler = identify(&program)?;
    let argv = expand_response_files(rest)?;
    let parsed = parse(&argv);
    if args.verbose {
        eprintln!(
            "contend cc: {} ({}), {}",
            compiler.program,
            compiler.family.name(),
            match parsed.mode {
                Mode::PassThrough => "nothing to instrument: run unchanged",
                Mode::Compile => "compile with instrumentation",
                Mode::Link => "compile with instrumentation, link with the sharing runtime",
            }
        );
    }
    match parsed.mode {
        Mode::PassThrough => {
            let mut cmd: Vec<OsString> = vec![compiler.program.clone().into()];
            cmd.extend(rest.iter().map(OsString::from));
            Err(exec(&cmd, args.verbose))
        }
        Mode::Compile => Err(exec(
            &compile_plan(&compiler.program, compiler.family, rest),
            args.verbose,
        )),
        Mode::Link => {
            if let Some(a) = parsed
                .args
                .iter()
                .find(|a| matches!(a.words[0].as_str(), "-static" | "-static-pie"))
            {
                return Err(bad_input(format!(
                    "contend cc: {} cannot be used: the sharing runtime is a shared library, so the program must be linked dynamically",
                    a.words[0]
                )));
            }
            let runtime = find_sharing_runtime()?;
            let tmp = tempfile::Builder::new()
                .prefix("contend-cc.")
                .tempdir()
                .context("creating a temporary directory for the instrumented objects")?;
            let plan = link_plan(
                &compiler.program,
                compiler.family,
                &parsed,
                &runtime,
                tmp.path(),
            );
            for cmd in &plan.commands {
                let code = run_one(cmd, args.verbose)?;
                if code != 0 {
                    drop(tmp);
                    std::process::exit(code);
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn names_and_versions() {
        assert_eq!(family_of_name("gcc"), Some(Family::Gcc));
        assert_eq!(family_of_name("/usr/bin/g++-12"), Some(Family::Gcc));
        assert_eq!(family_of_name("x86_64-linux-gnu-gcc-12"), Some(Family::Gcc));
        assert_eq!(family_of_name("gcc12"), Some(Family::Gcc));
        assert_eq!(family_of_name("clang-14"), Some(Family::Clang));
        assert_eq!(family_of_name("clang++-14.0"), Some(Family::Clang));
        assert_eq!(family_of_name("cc"), None);
        assert_eq!(family_of_name("c++"), None);
        assert_eq!(family_of_name("icc"), None);
        assert_eq!(family_of_name("tcc"), None);
    }

    #[test]
    fn modes() {
        assert_eq!(parse(&v("-O2 -c x.c")).mode, Mode::Compile);
        assert_eq!(parse(&v("-S x.c -o x.s")).mode, Mode::Compile);
        assert_eq!(parse(&v("-E x.c")).mode, Mode::PassThrough);
        assert_eq!(parse(&v("-MM x.c")).mode, Mode::PassThrough);
        assert_eq!(parse(&v("--version")).mode, Mode::PassThrough);
        assert_eq!(
            parse(&v("-print-file-name=libc.so")).mode,
            Mode::PassThrough
        );
        assert_eq!(parse(&v("-O2 x.c -o x")).mode, Mode::Link);
        assert_eq!(parse(&v("x.o y.o -o x -lm")).mode, Mode::Link);
        assert_eq!(parse(&v("-x c-header x.h")).mode, Mode::Compile);
        // -MD goes with a compile; it does not make the command dependency-only.
        assert_eq!(parse(&v("-MD -MF x.d -c x.c")).mode, Mode::Compile);
    }

    #[test]
    fn kinds() {
        let p = parse(&v(
            "-O1 -I inc -DX=1 x.c -o out lib.a -L. -lm -Wl,-z,now -x c noext -x none y.cpp -fsanitize=thread,undefined",
        ));
        let kinds: Vec<(String, Kind)> = p
            .args
            .iter()
            .map(|a| (a.words.join(" "), a.kind.clone()))
            .collect();
        let kind = |w: &str| kinds.iter().find(|(x, _)| x == w).unwrap().1.clone();
        assert_eq!(kind("-I inc"), Kind::Other);
        assert_eq!(kind("x.c"), Kind::Source);
        assert_eq!(kind("-o out"), Kind::Output);
        assert_eq!(kind("lib.a"), Kind::Input);
        assert_eq!(kind("-L."), Kind::LinkOnly);
        assert_eq!(kind("-lm"), Kind::LinkOnly);
        assert_eq!(kind("-Wl,-z,now"), Kind::LinkOnly);
        assert_eq!(kind("noext"), Kind::Source);
        assert_eq!(kind("y.cpp"), Kind::Source);
        assert_eq!(kind("-fsanitize=thread,undefined"), Kind::Sanitize);
        assert_eq!(
            without_thread("-fsanitize=thread,undefined").as_deref(),
            Some("-fsanitize=undefined")
        );
        assert_eq!(without_thread("-fsanitize=thread"), None);
    }

    #[test]
    fn link_plan_compiles_each_source_and_links_the_runtime() {
        let p = parse(&v(
            "-O1 -g -MD -x c noext -x none y.c -o prog z.o -lm -fsanitize=thread",
        ));
        let plan = link_plan(
            "gcc",
            Family::Gcc,
            &p,
            Path::new("/opt/contend/libcontend_sharing.so"),
            Path::new("/tmp/t"),
        );
        let words: Vec<String> = plan.commands.iter().map(|c| shell_words(c)).collect();
        assert_eq!(
            words,
            [
                "gcc -O1 -g -MD -fsanitize=thread -c -x c noext -o /tmp/t/0-noext.o",
                "gcc -O1 -g -MD -fsanitize=thread -c y.c -o /tmp/t/1-y.o",
                "gcc -Wl,--push-state,--no-as-needed -L/opt/contend -lcontend_sharing -Wl,--pop-state -O1 -g -x c -x none /tmp/t/0-noext.o -x c -x none /tmp/t/1-y.o -o prog z.o -lm -Wl,-rpath,/opt/contend -pthread",
            ]
        );
    }

    #[test]
    fn gcc_under_lto_compiles_without_it() {
        let f = |family, s: &str| {
            instrument_flags(family, &v(s))
                .iter()
                .map(|o| o.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            f(Family::Gcc, "-O2 -flto -c x.c"),
            "-fsanitize=thread -fno-lto"
        );
        assert_eq!(
            f(Family::Gcc, "-flto=auto -fno-lto -c x.c"),
            "-fsanitize=thread"
        );
        assert_eq!(f(Family::Clang, "-flto=thin -c x.c"), "-fsanitize=thread");
    }

    #[test]
    fn no_compiler_named_means_cc() {
        let cmd = v("-c x.c");
        let (program, rest) = compiler_and_args(&cmd);
        assert!(program == "cc" || std::env::var("CONTEND_CC").is_ok());
        assert_eq!(rest.len(), 2);
        let cmd = v("gcc -c x.c");
        assert_eq!(compiler_and_args(&cmd).0, "gcc");
    }
}
