//! `contend bench ctx` as users run it: lat_ctx's format with the overhead line and a positive
//! switch time for a ring of 2, JSON, threads, the bad-input lines, and a member killed
//! mid-run taking the ring down without leaving processes behind. No absolute times: only
//! signs and ratios of figures from one run.

use crate::common::{contend, serial, text, CONTEND};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_ring_of_two_at_size_zero_gives_the_overhead_line_and_a_positive_switch() {
    let _g = serial();
    let out = contend(&[
        "bench", "ctx", "--cpus", "0", "-N", "7", "--rep-ms", "20", "--format", "lmbench", "2",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let mut lines = stdout.lines();
    let title = lines.next().unwrap();
    let ovr: f64 = title
        .strip_prefix("\"size=0k ovr=")
        .unwrap_or_else(|| panic!("title line: {title}"))
        .parse()
        .unwrap();
    assert!(ovr > 0.0, "{stdout}");
    let point: Vec<&str> = lines.next().unwrap().split(' ').collect();
    assert_eq!(point[0], "2", "{stdout}");
    let switch: f64 = point[1].parse().unwrap();
    assert!(switch > 0.0, "the switch time must be positive: {stdout}");
    assert!(text(&out.stderr).contains("every member on CPU 0"));
}

#[test]
fn json_has_every_repetition_and_the_subtraction_adds_up() {
    let _g = serial();
    let out = contend(&[
        "bench",
        "ctx",
        "--threads",
        "--cpus",
        "0",
        "-N",
        "3",
        "-W",
        "0",
        "--rep-ms",
        "10",
        "--json",
        "2",
        "3",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::common::schema::conforms("bench-ctx", &v);
    assert_eq!(v["mode"], "threads");
    assert_eq!(v["cpus"], serde_json::json!([0]));
    let size = &v["sizes"][0];
    let ovr = size["overhead"]["median"].as_f64().unwrap();
    let points = size["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        assert_eq!(p["hop_us"].as_array().unwrap().len(), 3);
        let hop = p["hop"]["median"].as_f64().unwrap();
        let switch = p["switch"]["median"].as_f64().unwrap();
        // switch = hop − overhead, repetition by repetition: the medians agree.
        assert!(
            (hop - ovr - switch).abs() <= 1e-9 * hop.abs().max(1.0),
            "{p}"
        );
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, expect) in [
        (vec!["bench", "ctx", "1"], "at least 2"),
        (vec!["bench", "ctx", "--cpus", "4095", "2"], "not online"),
        (vec!["bench", "ctx", "--cpus", "x", "2"], "--cpus x"),
        (
            vec!["bench", "ctx", "-s", "1000000000", "2"],
            "more than the memory",
        ),
        (vec!["bench", "ctx", "-P", "100000", "20"], "limit"),
        (
            vec!["bench", "ctx", "--svg", "/nonexistent/dir/ctx.svg", "2"],
            "--svg /nonexistent",
        ),
    ] {
        let out = contend(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
}

/// The processes whose parent is `pid` (from /proc/*/stat; the `children` file needs a kernel
/// option this machine may not have).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: the fields after the last ')'.
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        if after
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u32>().ok())
            == Some(pid)
        {
            out.push(p);
        }
    }
    out.sort_unstable();
    out
}

#[test]
fn a_member_killed_mid_run_takes_the_ring_down_with_a_message() {
    let _g = serial();
    let mut child = Command::new(CONTEND)
        // The overhead first, then the ring. Each phase is 1 + 100 repetitions, each
        // calibrated to last ≥ 20 ms of wall time (a loaded machine makes a repetition
        // longer, never shorter), so the ring exists for ≥ 2 s on any machine: ample for the
        // 20 ms polling below to find it.
        .args(["bench", "ctx", "-N", "100", "--rep-ms", "20", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // No deadline for how long the overhead takes (its wall time grows with the load): wait
    // until the ring's members exist, or contend has ended without them; 120 s only guards
    // against a hang.
    let deadline = Instant::now() + Duration::from_secs(120);
    let members = loop {
        let members = children_of(pid);
        if members.len() == 3 {
            break members;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "contend bench ctx ended ({status}) before the ring's 3 forked members were \
                 seen (last seen {members:?}): {}",
                text(&out.stderr)
            );
        }
        if Instant::now() > deadline {
            // SAFETY: stopping the contend this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("no ring of 3 forked members within 120 s (last seen {members:?})");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: signalling a process this test started (a child of contend).
    unsafe { libc::kill(members[1] as i32, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("was killed by signal 9"), "{err}");
    assert!(err.contains(&format!("pid {}", members[1])), "{err}");
    for m in members {
        assert!(
            !std::path::Path::new(&format!("/proc/{m}")).exists(),
            "member {m} outlived the ring"
        );
    }
}
