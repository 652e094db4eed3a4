//! The user's compiler command: which arguments are sources, outputs, link-only or compile-only
//! options, and what the command does as a whole.

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

/// Expands `@file` response files (whitespace-separated, with '', "" and \ quoting), once. An
/// unreadable `@file` stays as it is, as the compiler treats it; so does one that is not a
/// regular file or is beyond `trace::files::RESPONSE_FILE`'s size (a FIFO would block here,
/// `/dev/zero` be read forever).
pub fn expand_response_files(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for a in argv {
        let Some(file) = a.strip_prefix('@').filter(|f| !f.is_empty()) else {
            out.push(a.clone());
            continue;
        };
        let Ok(text) = trace::files::read_regular_to_string(
            std::path::Path::new(file),
            &trace::files::RESPONSE_FILE,
        ) else {
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
    out
}

/// Splits the command into the compiler and its arguments: a first word that looks like an
/// option or an input file means no compiler was named (`CC="contend cc --"`), and then
/// `$CONTEND_CC` is used, else `cc` (`c++` for C++ sources). `None` for an empty command.
pub fn split_command(command: &[String]) -> Option<(String, &[String])> {
    let first = command.first()?;
    let named = !(first.starts_with('-')
        || first.starts_with('@')
        || is_source_name(first)
        || first.ends_with(".o")
        || first.ends_with(".a")
        || first.ends_with(".so"));
    if named {
        return Some((first.clone(), &command[1..]));
    }
    let cxx = command.iter().any(|a| {
        is_source_name(a) && !a.ends_with(".c") && !a.ends_with(".i") && !a.starts_with('-')
    });
    let default = std::env::var("CONTEND_CC")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| if cxx { "c++" } else { "cc" }.to_string());
    Some((default, command))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
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
    }

    #[test]
    fn no_compiler_named_means_cc() {
        let cmd = v("-c x.c");
        let (program, rest) = split_command(&cmd).unwrap();
        assert!(program == "cc" || std::env::var("CONTEND_CC").is_ok());
        assert_eq!(rest.len(), 2);
        let cmd = v("gcc -c x.c");
        assert_eq!(split_command(&cmd).unwrap().0, "gcc");
        assert!(split_command(&[]).is_none());
    }

    #[test]
    fn response_files_are_expanded_with_their_quoting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("args");
        std::fs::write(&file, "-O2 'a b.c' \"-DX=\\\"y\\\"\"\n  -o\tout\\ put ''").unwrap();
        let at = format!("@{}", file.display());
        assert_eq!(
            expand_response_files(&[at, "-g".into(), "@/nonexistent/contend-args".into()]),
            [
                "-O2",
                "a b.c",
                "-DX=\"y\"",
                "-o",
                "out put",
                "",
                "-g",
                "@/nonexistent/contend-args"
            ]
        );
    }
}
