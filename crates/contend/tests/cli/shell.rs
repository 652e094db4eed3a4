//! `contend completions` and `contend man`: the script loads in bash and completes what the
//! parser accepts; every manual page renders with man(1).

use crate::common::{contend, stderr, stdout, CONTEND};
use std::process::Command;

/// Completes `words` (the last one being typed) with bash's completion for contend, sourced
/// from `contend completions bash`: the candidates bash would offer.
fn bash_complete(words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let script = format!(
        "source <('{CONTEND}' completions bash) || exit 3\n\
         complete -p contend >/dev/null || exit 4\n\
         COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         _contend contend '{}' '{}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "bash: {}", stderr(&out));
    stdout(&out).lines().map(str::to_string).collect()
}

#[test]
fn bash_completion_loads_and_completes_subcommands_and_options() {
    let subcommands = bash_complete(&["contend", "re"]);
    assert!(
        subcommands.contains(&"record".to_string()) && subcommands.contains(&"report".to_string()),
        "{subcommands:?}"
    );
    assert!(
        !subcommands.contains(&"topo".to_string()),
        "{subcommands:?}"
    );
    let options = bash_complete(&["contend", "record", "--lo"]);
    assert!(options.contains(&"--locks".to_string()), "{options:?}");
    let nested = bash_complete(&["contend", "bench", "at"]);
    assert_eq!(nested, vec!["atomic".to_string()]);
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_one_is_refused() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = contend(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        // Every subcommand is in every script.
        for sub in [
            "record",
            "report",
            "scale",
            "c2c",
            "bench",
            "man",
            "completions",
        ] {
            assert!(stdout(&out).contains(sub), "{shell} lacks {sub}");
        }
    }
    let out = contend(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("tcsh"), "{}", stderr(&out));
}

/// Renders roff with man(1) as a user's `contend man | man -l -` does; returns the text.
fn render(roff: &[u8]) -> String {
    use std::io::Write;
    let mut man = Command::new("man")
        .args(["-l", "-"])
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    man.stdin.take().unwrap().write_all(roff).unwrap();
    let out = man.wait_with_output().unwrap();
    assert!(out.status.success(), "man -l -: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn manual_pages_render_for_contend_and_every_subcommand() {
    if !testkit::require_command("man", "man-db") {
        return;
    }
    let out = contend(&["man"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = render(&out.stdout);
    for section in ["NAME", "SYNOPSIS", "SUBCOMMANDS", "contend-record(1)"] {
        assert!(page.contains(section), "{section} not in:\n{page}");
    }
    let out = contend(&["man", "record"]);
    let page = render(&out.stdout);
    assert!(
        page.contains("contend-record") && page.contains("--locks"),
        "{page}"
    );

    // --out-dir: one page per subcommand, nested ones included, each rendering.
    let dir = tempfile::tempdir().unwrap();
    let out = contend(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for want in [
        "contend.1",
        "contend-record.1",
        "contend-bench-atomic.1",
        "contend-c2c-report.1",
    ] {
        assert!(pages.contains(&want.to_string()), "{want} not in {pages:?}");
    }
    for p in &pages {
        let text = render(&std::fs::read(dir.path().join(p)).unwrap());
        assert!(text.contains("SYNOPSIS"), "{p}:\n{text}");
    }
    let out = contend(&["man", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no subcommand `nope`"),
        "{}",
        stderr(&out)
    );
}
