//! The binary's source keeps the shape docs/architecture.md promises: commands are thin (they
//! parse options, call the libraries, print), no command reaches into another, the modules
//! form no circle, and nothing inside the binary reads JSON back by string keys (the report is
//! a typed model; `--json` is its serde form).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The budget for the whole binary crate. The logic lives in library crates with their own
/// tests; what stays here is option parsing, calls and printing.
const MAX_LINES: usize = 4500;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, with its module path (`cmd::bench::ctx`, `ui`, `main`).
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("src/ is readable")
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut p = prefix.to_vec();
                if name != "mod" {
                    p.push(name);
                }
                let module = if p.is_empty() {
                    "main".to_string()
                } else {
                    p.join("::")
                };
                out.insert(module, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&src(), &[], &mut out);
    // main.rs is the crate root: its module path is empty.
    if let Some(main) = out.remove("main") {
        out.insert(String::new(), main);
    }
    out
}

/// The code of a file without its `#[cfg(test)]` module and comments, so that a doc comment
/// or a test naming another module does not count as an import.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal (a URL) is rare in this crate; cutting there only
            // hides code from the checks, never invents an import.
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules of this crate that `module`'s code names, resolved to module paths.
fn references(module: &str, text: &str, all: &BTreeSet<String>) -> BTreeSet<String> {
    let own: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    let mut found = BTreeSet::new();
    for (start, _) in text
        .match_indices("crate::")
        .chain(text.match_indices("super::"))
    {
        // Only paths that begin here (not `foo::super::`).
        if start > 0 {
            let before = text[..start].chars().last().unwrap();
            if before.is_alphanumeric() || before == '_' || before == ':' {
                continue;
            }
        }
        let path: String = text[start..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let mut parts: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let mut base: Vec<&str> = if parts[0] == "crate" {
            parts.remove(0);
            Vec::new()
        } else {
            // Each `super` is one step up: from `cmd::bench::ctx`, `super::` is `cmd::bench`.
            let mut b = own.clone();
            while parts.first() == Some(&"super") {
                parts.remove(0);
                b.pop();
            }
            b
        };
        // The longest prefix that names a module of this crate (`super::f()` names the parent).
        let mut best =
            (!base.is_empty() && all.contains(&base.join("::"))).then(|| base.join("::"));
        for part in parts {
            base.push(part);
            let candidate = base.join("::");
            if all.contains(&candidate) {
                best = Some(candidate);
            }
        }
        if let Some(m) = best {
            if m != module {
                found.insert(m);
            }
        }
    }
    found
}

#[test]
fn the_binary_stays_under_its_line_budget() {
    let lines: usize = modules().values().map(|t| t.lines().count()).sum();
    assert!(
        lines < MAX_LINES,
        "crates/contend/src has {lines} lines, over {MAX_LINES}: move logic into a library crate with its own tests"
    );
}

#[test]
fn no_command_module_imports_another() {
    let modules = modules();
    let all: BTreeSet<String> = modules.keys().cloned().collect();
    let command_of = |m: &str| -> Option<String> {
        let mut parts = m.split("::");
        (parts.next() == Some("cmd")).then(|| parts.next().map(str::to_string))?
    };
    let mut offences = Vec::new();
    for (module, text) in &modules {
        let Some(own) = command_of(module) else {
            continue;
        };
        for r in references(module, &code(text), &all) {
            if let Some(other) = command_of(&r) {
                if other != own {
                    offences.push(format!("{module} uses {r}"));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "commands importing commands: {offences:#?}"
    );
}

#[test]
fn the_modules_form_no_circle() {
    let modules = modules();
    let all: BTreeSet<String> = modules.keys().cloned().collect();
    let graph: BTreeMap<&String, BTreeSet<String>> = modules
        .iter()
        .map(|(m, t)| {
            // A module's own submodules (declared with `mod x;`) are part of it, not an import.
            let refs = references(m, &code(t), &all)
                .into_iter()
                .filter(|r| !r.starts_with(&format!("{m}::")) && !m.is_empty())
                .collect();
            (m, refs)
        })
        .collect();
    // Depth-first search for a back edge.
    fn visit<'a>(
        m: &'a String,
        graph: &'a BTreeMap<&'a String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a String, u8>,
        stack: &mut Vec<&'a String>,
    ) -> Option<Vec<String>> {
        state.insert(m, 1);
        stack.push(m);
        for r in graph.get(m).into_iter().flatten() {
            let Some((key, _)) = graph.get_key_value(r) else {
                continue;
            };
            match state.get(key) {
                Some(1) => {
                    let from = stack.iter().position(|s| *s == *key).unwrap();
                    let mut circle: Vec<String> =
                        stack[from..].iter().map(|s| s.to_string()).collect();
                    circle.push(r.clone());
                    return Some(circle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(key, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(m, 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if !state.contains_key(*m) {
            let mut stack = Vec::new();
            if let Some(circle) = visit(m, &graph, &mut state, &mut stack) {
                panic!(
                    "a circle of modules in crates/contend/src: {}",
                    circle.join(" -> ")
                );
            }
        }
    }
}

/// Lines (1-based, trimmed) that index a value by a string: `value["key"]`, `v[0]["key"]`,
/// `f()["key"]`; an array literal (`vec!["a"]`, `= ["a"]`, `(["a"]`) is not indexing.
fn keyed_reads(code: &str) -> Vec<(usize, String)> {
    code.lines()
        .enumerate()
        .filter(|(_, line)| {
            let bytes = line.as_bytes();
            line.match_indices("[\"").any(|(i, _)| {
                i > 0 && {
                    let b = bytes[i - 1];
                    b.is_ascii_alphanumeric() || b == b'_' || b == b']' || b == b')'
                }
            })
        })
        .map(|(n, line)| (n + 1, line.trim().to_string()))
        .collect()
}

#[test]
fn nothing_reads_json_back_by_string_key() {
    let offences: Vec<String> = modules()
        .iter()
        .flat_map(|(module, text)| {
            keyed_reads(&code(text))
                .into_iter()
                .map(move |(n, line)| format!("{module}:{n}: {line}"))
        })
        .collect();
    assert!(
        offences.is_empty(),
        "string-keyed JSON reads inside the binary (deserialize into the typed model instead): {offences:#?}"
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    // The checks above pass on a clean tree; make sure they would fail on a dirty one.
    let all: BTreeSet<String> = ["cmd::a", "cmd::b", "cmd::b::x", "ui"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let refs = references("cmd::a", "use super::b::run; crate::ui::note(x);", &all);
    assert_eq!(
        refs,
        ["cmd::b", "ui"].iter().map(|s| s.to_string()).collect()
    );
    let refs = references("cmd::b::x", "super::helper(); super::super::a::f()", &all);
    assert_eq!(
        refs,
        ["cmd::a", "cmd::b"].iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(code("a // super::b\n#[cfg(test)]\nsuper::c"), "a ");
    let reads = keyed_reads(
        "let a = v[\"locks\"];\nlet b = vec![\"x\"];\nf(&[\"y\"]);\nlet c = g()[\"k\"][0];",
    );
    assert_eq!(reads.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 4]);
}
