//! The commands a build becomes: instrumented compiles, and a link with the sharing runtime.

use crate::parse::{Kind, Parsed};
use crate::runtime::RUNTIME_FILE;
use crate::Family;
use std::ffi::OsString;
use std::path::Path;

/// `-fsanitize=LIST` without `thread` (`None` when nothing is left).
fn without_thread(arg: &str) -> Option<String> {
    let list = arg.strip_prefix("-fsanitize=")?;
    let rest: Vec<&str> = list.split(',').filter(|s| *s != "thread").collect();
    (!rest.is_empty()).then(|| format!("-fsanitize={}", rest.join(",")))
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

/// `cmd` as a shell would take it (for `--verbose` and messages).
pub fn shell_words(cmd: &[OsString]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn thread_is_taken_out_of_a_sanitizer_list() {
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
    fn a_relocatable_link_gets_no_runtime() {
        let p = parse(&v("-r a.o b.o -o ab.o"));
        let plan = link_plan(
            "gcc",
            Family::Gcc,
            &p,
            Path::new("/opt/contend/libcontend_sharing.so"),
            Path::new("/tmp/t"),
        );
        let words: Vec<String> = plan.commands.iter().map(|c| shell_words(c)).collect();
        assert_eq!(words, ["gcc -r a.o b.o -o ab.o"]);
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
    fn shell_words_quote_only_what_needs_it() {
        let cmd: Vec<OsString> = ["gcc", "-DX=1", "a b.c", "it's", ""]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(shell_words(&cmd), r#"gcc -DX=1 'a b.c' 'it'\''s' ''"#);
    }
}
