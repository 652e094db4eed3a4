//! `contend schema`: a JSON Schema per `--json` output, shipped in docs/schema/ and equal to
//! what the binary prints; the outputs no other test reads are checked here against theirs
//! (the others are checked where their tests read them, `common::schema::conforms`).

use crate::common::schema::conforms;
use crate::common::{assert_one_line_error, contend, repo, stderr, stdout};
use serde_json::Value;

/// Every output `contend schema` lists.
fn listed() -> Vec<String> {
    let out = contend(&["schema"]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn every_json_output_has_a_schema_and_docs_ship_them_as_printed() {
    let names = listed();
    for want in [
        "report",
        "c2c-report",
        "scale",
        "diff",
        "topo",
        "where",
        "bench-atomic",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = contend(&["schema", "--out-dir", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let docs = repo("docs/schema");
    let updating = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    for name in &names {
        let file = format!("{name}.json");
        let printed = std::fs::read_to_string(dir.path().join(&file)).unwrap();
        // `contend schema NAME` prints what --out-dir writes.
        let one = contend(&["schema", name]);
        assert_eq!(stdout(&one), printed, "contend schema {name}");
        let schema: Value = serde_json::from_str(&printed).unwrap();
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        assert!(
            schema["description"]
                .as_str()
                .unwrap()
                .contains("schema_version 1"),
            "{name}: {}",
            schema["description"]
        );
        if updating {
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(&file), &printed).unwrap();
            continue;
        }
        let shipped = std::fs::read_to_string(docs.join(&file)).unwrap_or_else(|e| {
            panic!("docs/schema/{file}: {e}: write it with UPDATE_GOLDEN=1 cargo test -p contend --test cli schema::")
        });
        assert!(
            shipped == printed,
            "docs/schema/{file} is not what `contend schema {name}` prints: rerun with UPDATE_GOLDEN=1 cargo test -p contend --test cli schema::"
        );
    }
    // And nothing shipped that contend no longer prints.
    if !updating {
        for entry in std::fs::read_dir(&docs).unwrap() {
            let file = entry.unwrap().file_name().into_string().unwrap();
            let name = file.trim_end_matches(".json");
            assert!(
                names.iter().any(|n| n == name),
                "docs/schema/{file}: no such output"
            );
        }
    }
}

#[test]
fn a_command_spelled_in_words_names_its_schema_and_an_unknown_one_is_refused() {
    let words = contend(&["schema", "c2c", "report"]);
    assert!(words.status.success(), "{}", stderr(&words));
    assert_eq!(stdout(&words), stdout(&contend(&["schema", "c2c-report"])));
    assert_one_line_error(
        &contend(&["schema", "recrod"]),
        2,
        &["no --json output is called `recrod`", "report"],
    );
}

/// The schema is not a formality: an output with a figure of the wrong type, or missing a key
/// every output has, is refused.
#[test]
fn a_schema_refuses_outputs_that_break_it() {
    let out = contend(&["topo", "--synthetic", "2x2x1:n2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let good: Value = serde_json::from_slice(&out.stdout).unwrap();
    conforms("topo", &good);
    let schema: Value = serde_json::from_slice(&contend(&["schema", "topo"]).stdout).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut wrong_type = good.clone();
    wrong_type["summary"]["pus"] = "four".into();
    assert!(
        !validator.is_valid(&wrong_type),
        "a string where a count belongs passed"
    );
    let mut no_version = good.clone();
    no_version.as_object_mut().unwrap().remove("schema_version");
    assert!(
        !validator.is_valid(&no_version),
        "an output without schema_version passed"
    );
}

#[test]
fn outputs_no_other_test_reads_conform() {
    let order = contend(&[
        "topo",
        "--synthetic",
        "2x4x2:n2",
        "--order",
        "spread",
        "--json",
    ]);
    assert!(order.status.success(), "{}", stderr(&order));
    let v: Value = serde_json::from_slice(&order.stdout).unwrap();
    conforms("topo-order", &v);
    assert_eq!(v["cpus"].as_array().unwrap().len(), 16, "{v}");

    // `bench atomic` on a described machine prints its plan.
    let plan = contend(&[
        "bench",
        "atomic",
        "--op",
        "cmpxchg",
        "--load",
        "cpu-increase",
        "--synthetic",
        "2x4x1",
        "--json",
    ]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let v: Value = serde_json::from_slice(&plan.stdout).unwrap();
    conforms("bench-atomic-plan", &v);
    assert_eq!(v["schema_version"], 1);

    // `where --watch --json`: JSON Lines, each object as `where --json`'s; the watch ends
    // when the process does.
    let mut target = std::process::Command::new("sleep")
        .arg("1")
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    // Reaped as soon as it ends (a zombie would still be a process to watch).
    let reaper = std::thread::spawn(move || target.wait());
    let watch = crate::common::output_within(
        std::process::Command::new(crate::common::CONTEND).args([
            "where",
            &pid,
            "--json",
            "--watch",
            "0.2",
            "--threads-only",
        ]),
        std::time::Duration::from_secs(60),
    );
    let _ = reaper.join();
    let watch = watch.expect("where --watch ended when its process did");
    assert!(watch.status.success(), "{}", stderr(&watch));
    let lines: Vec<&str> = std::str::from_utf8(&watch.stdout)
        .unwrap()
        .lines()
        .collect();
    assert!(!lines.is_empty(), "no line from where --watch");
    for line in lines {
        conforms("where", &serde_json::from_str(line).unwrap());
    }
}
