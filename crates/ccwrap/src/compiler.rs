//! Which compiler a command names, and its family.

use crate::Error;
use std::process::Command;

/// The compilers `contend cc` knows, for messages.
pub(crate) const KNOWN: &str = "gcc and clang (as gcc, g++, clang, clang++, cc or c++, versioned names such as gcc-12 or clang-14, and target-prefixed names such as x86_64-linux-gnu-gcc)";

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
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// Identifies the compiler `program` names: by its name, else by the file its symlinks lead to,
/// else (for `cc` and `c++` only) by what `--version` prints.
pub fn identify(program: &str) -> Result<Compiler, Error> {
    let compiler = |family| Compiler {
        program: program.to_string(),
        family,
    };
    let found = ::which::which(program).ok();
    if let Some(f) = family_of_name(program) {
        if found.is_none() {
            return Err(Error::CompilerNotFound(program.to_string()));
        }
        return Ok(compiler(f));
    }
    let Some(path) = found else {
        if is_generic_name(program) {
            return Err(Error::DefaultCompilerNotFound(program.to_string()));
        }
        return Err(Error::UnknownCompiler(program.to_string()));
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
    Err(Error::UnknownCompiler(program.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
