//! Output that fits the terminal (issue 21): each command run in a real terminal (a pty made by
//! script(1)) of 80, 100 and 120 columns prints no line wider than it, and `report`'s first
//! screen names the top lock, its wait and its call site. Piped output keeps every column (the
//! golden reports in `fixtures`, compared byte for byte, are piped).

use crate::common::CONTEND;
use crate::fixtures::staged;
use std::path::Path;
use std::process::Command;

/// `contend ARGS` in `dir`, on a terminal `cols` wide (COLUMNS unset: the width comes from
/// the terminal itself); its lines, without the pty's carriage returns. stderr goes to the
/// terminal too, but for progress bars (redrawn in place with escape sequences, which the
/// captured text shows as one line): those runs are checked on stdout alone.
fn on_terminal(dir: &Path, cols: usize, args: &[&str]) -> Vec<String> {
    let stderr = if args[0] == "bench" {
        "2>/dev/null"
    } else {
        ""
    };
    let command = format!(
        "stty cols {cols} rows 50; exec '{CONTEND}' {} {stderr}",
        args.iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .current_dir(dir)
        .env_remove("COLUMNS")
        .env_remove("LINES")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(
        out.status.success(),
        "contend {args:?} at {cols} columns:\n{text}"
    );
    text.lines().map(str::to_string).collect()
}

fn assert_fits(lines: &[String], cols: usize, what: &str) {
    assert!(lines.len() > 3, "{what}: no output: {lines:?}");
    for l in lines {
        assert!(
            l.chars().count() <= cols,
            "{what} at {cols} columns: a line of {} characters:\n{l}\n\n{}",
            l.chars().count(),
            lines.join("\n")
        );
    }
}

#[test]
fn reports_fit_80_100_and_120_columns_and_name_the_top_lock_first() {
    if !testkit::require_command("script", "bsdutils") {
        return;
    }
    for cols in [80, 100, 120] {
        let locks = staged("locks");
        let lines = on_terminal(locks.path(), cols, &["report", "locks"]);
        assert_fits(&lines, cols, "report (locks)");
        // The first screen: the top lock, its wait and its call site (wrapped lines joined).
        let first = lines[..24.min(lines.len())].join(" ").replace("   ", " ");
        assert!(
            first.contains("Top lock: hot_lock")
                && first.contains("waited 50.544 ms")
                && first.contains("update_shared_counter (planted_hold.c:147)"),
            "first 24 lines at {cols} columns:\n{}",
            lines[..24.min(lines.len())].join("\n")
        );
        for (name, args) in [
            ("mpi", vec!["report", "mpi"]),
            ("sharing", vec!["report", "sharing"]),
            ("sharing", vec!["c2c", "report", "sharing"]),
            ("scale", vec!["report", "scale"]),
            ("activity", vec!["report", "activity"]),
        ] {
            let dir = staged(name);
            let lines = on_terminal(dir.path(), cols, &args);
            assert_fits(&lines, cols, &args.join(" "));
        }
        let lines = on_terminal(
            Path::new("/"),
            cols,
            &[
                "bench",
                "latency",
                "--samples",
                "10",
                "--round-trips",
                "100",
            ],
        );
        assert_fits(&lines, cols, "bench latency");
    }
}

#[test]
fn wide_keeps_every_column_on_a_terminal_and_a_dropped_column_is_named() {
    if !testkit::require_command("script", "bsdutils") {
        return;
    }
    let locks = staged("locks");
    let fitted = on_terminal(locks.path(), 80, &["report", "locks"]).join("\n");
    assert!(
        fitted.contains("(left out to fit: ") && fitted.contains("BY KIND"),
        "{fitted}"
    );
    let wide = on_terminal(locks.path(), 80, &["report", "--wide", "locks"]).join("\n");
    assert!(!wide.contains("left out to fit"), "{wide}");
    assert!(wide.lines().any(|l| l.chars().count() > 200), "{wide}");
    // The what-if footnote explains the starred column: under it when shown, gone with it.
    let footnote = "* the run's time if that lock never made a thread wait";
    assert!(
        wide.contains("WAITS WERE 0 (ms)*") && wide.contains(footnote),
        "{wide}"
    );
    assert!(
        fitted.contains("left out to fit: ") && fitted.contains("RUN IF ITS WAITS WERE 0 (ms)*"),
        "the precondition: at 80 columns the what-if column is left out\n{fitted}"
    );
    assert!(!fitted.contains(footnote), "{fitted}");
    // --columns picks the columns by header; the first always shows.
    let picked = on_terminal(
        locks.path(),
        200,
        &["report", "--columns", "events,dropped", "locks"],
    )
    .join("\n");
    let header = picked
        .lines()
        .find(|l| l.contains("STREAM"))
        .unwrap_or_else(|| panic!("{picked}"));
    assert!(
        header.contains("EVENTS") && header.contains("DROPPED") && !header.contains("BY KIND"),
        "{header}"
    );
    // A table with none of those columns stays whole.
    assert!(
        picked
            .lines()
            .any(|l| l.contains("CONTENDED") && l.contains("WAIT (ms)")),
        "{picked}"
    );
}

/// Colour only on a terminal, and never with `NO_COLOR` set (no-color.org): contend's own
/// output has none; the help and usage errors (clap's) are coloured on a terminal.
#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    if !testkit::require_command("script", "bsdutils") {
        return;
    }
    let run = |no_color: bool, args: &str| {
        let mut cmd = Command::new("script");
        cmd.args([
            "--quiet",
            "--command",
            &format!("exec '{CONTEND}' {args}"),
            "/dev/null",
        ])
        .env_remove("NO_COLOR");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    };
    for args in ["--help", "recrod"] {
        assert!(
            run(false, args).contains('\x1b'),
            "`contend {args}` on a terminal: no colour at all (the precondition)"
        );
        let plain = run(true, args);
        assert!(
            !plain.contains('\x1b'),
            "`contend {args}` with NO_COLOR=1: {plain:?}"
        );
        assert!(
            plain.contains("Usage") || plain.contains("error"),
            "{plain}"
        );
    }
    // Piped: no escape either.
    let piped = Command::new(CONTEND).arg("--help").output().unwrap();
    assert!(!piped.stdout.contains(&0x1b), "piped --help has escapes");
}
