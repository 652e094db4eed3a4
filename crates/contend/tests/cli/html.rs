//! `contend report RUN --html FILE`: one self-contained page per run. On the bundled fixture
//! runs (fixtures/runs/*) the page names what the text report names (locks, call sites with
//! file:line, ranks, line addresses) and says which sections the run lacks; names from the
//! program are shown as text, never run; a path that cannot be a new file is refused; and in
//! a real headless Chromium the page's DOM holds the same and its script raises no error.

use crate::common::{assert_one_line_error, contend_in, output_within, serial, stderr};
use crate::fixtures::staged;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// `contend report NAME --html page.html` in `dir`, which must succeed: the page.
fn page_of(dir: &Path, name: &str) -> String {
    let out = contend_in(dir, &["report", name, "--html", "page.html"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("wrote the report page page.html"),
        "{}",
        stderr(&out)
    );
    let path = dir.join("page.html");
    let page = std::fs::read_to_string(&path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "the page is private, mode {mode:o}");
    page
}

/// The critical-path waits the timeline outlines: the sum of its marks' `data-waits`.
fn critical_marks(page: &str) -> u64 {
    page.split("<rect class=\"critical\" data-waits=\"")
        .skip(1)
        .map(|r| r[..r.find('"').unwrap()].parse::<u64>().unwrap())
        .sum()
}

/// What every page is: one HTML5 document, its scripts inline, nothing fetched.
fn assert_self_contained(page: &str) {
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..100]);
    assert!(page.trim_end().ends_with("</html>"));
    // Its own two scripts (the error catcher in the head, the sorting at the end), inline.
    assert_eq!(page.matches("<script").count(), 2, "two scripts");
    assert_eq!(page.matches("<script>").count(), 2, "inline scripts only");
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import", "<link"] {
        assert!(!page.contains(fetch), "the page fetches something: {fetch}");
    }
    for id in [
        "overview", "timeline", "locks", "flame", "waits", "activity", "mpi", "sharing", "streams",
    ] {
        assert!(
            page.contains(&format!("<section id=\"{id}\">")),
            "no {id} section"
        );
    }
}

#[test]
fn the_locks_fixture_page_names_its_lock_call_site_threads_and_findings() {
    let tmp = staged("locks");
    let page = page_of(tmp.path(), "locks");
    assert_self_contained(&page);
    // The overview: command, what was captured and not, and the top lock in words.
    assert!(page.contains("./planted_hold -t 3 -k 20 -H 500 -w 100 -c 5"));
    assert!(page.contains("schedstat, locks, sched-tracepoints"));
    assert!(page.contains("no PMU on this machine"));
    assert!(page.contains(
        "Top lock: hot_lock (0x564956446200) waited 50.544 ms in 14 contended acquisition(s)"
    ));
    assert!(page.contains("most at update_shared_counter (planted_hold.c:147) (50.544 ms)"));
    // The locks section: the lock's row and its call site's, sortable by their values.
    assert!(page.contains("<table class=\"sortable\" id=\"lock-table\">"));
    assert!(page.contains("<td>hot_lock (0x564956446200)</td>"));
    assert!(page.contains("<td>update_shared_counter (planted_hold.c:147)</td>"));
    assert!(
        page.contains("<td class=\"num\" data-v=\"50543937\">50.544</td>"),
        "the wait is shown in ms and sorts by its ns"
    );
    assert!(page.contains("<h3>Wait histograms</h3>"));
    // The timeline: the threads' lanes with the waits' tooltips naming lock and site.
    assert!(page.contains("id=\"timeline-threads\""));
    assert!(page.contains(
        "waited for hot_lock (0x564956446200) at update_shared_counter (planted_hold.c:147):"
    ));
    assert!(page.contains("mostly running in"), "scheduler states drawn");
    // The critical path on the timeline: its lock waits outlined, as many as the report's
    // critical-path events that waited (14 of its 21), and their share said above it.
    let json = crate::common::report_json(tmp.path(), &["locks"]);
    let critical = &json["locks"]["critical"];
    assert_eq!(
        (critical["events"].as_u64(), critical["contended"].as_u64()),
        (Some(21), Some(14))
    );
    assert_eq!(critical_marks(&page), 14);
    assert!(page.contains(
        "<p id=\"critical-path\"><strong>The critical path</strong> (the chain of lock holds that set the run's length) has 21 event(s); 14 of them waited, 50.544 ms (91.7 % of all lock waiting)"
    ));
    assert!(page.contains("a wait on the critical path (outlined in black)"));
    assert!(page.contains(
        "On the critical path, the most waiting was for hot_lock (0x564956446200): 50.544 ms in 21 event(s), most at update_shared_counter (planted_hold.c:147) (50.544 ms)"
    ));
    // Who made whom wait: the 14 contended acquisitions of hot_lock charged to the three
    // holders in turn (never a thread to itself); warm_lock's one has no holder recorded.
    let who = &page[page.find("id=\"who-table\"").unwrap()..];
    let who = &who[..who.find("</table>").unwrap()];
    let rows: Vec<&str> = who.split("<tr><td>").skip(1).collect();
    let waits: u64 = rows
        .iter()
        .map(|r| {
            let at = r.find("class=\"num\" data-v=\"").unwrap() + 20;
            r[at..at + r[at..].find('"').unwrap()]
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(waits, 14, "{who}");
    assert!(
        rows.iter().all(|r| r.contains("hot_lock (0x564956446200)")),
        "{who}"
    );
    for r in &rows {
        let cells: Vec<&str> = r.split("</td><td>").take(2).collect();
        assert_ne!(cells[0], cells[1], "a thread waited for itself: {r}");
    }
    assert!(page.contains("1 contended acquisition(s) have no recorded holder before them"));
    // The flame graph of its lock waits (what --folded writes): each lock's root frame with
    // its call site under it, as wide as its share of the wait time (50.544 ms of 55.120).
    let flame = section_of(&page, "flame");
    assert!(
        flame.contains("<title>[lock hot_lock]\n50.544 ms, 91.70 % of the wait time</title>"),
        "{flame}"
    );
    assert!(
        flame.contains("<title>update_shared_counter (./examples/locks/planted_hold.c:147)\n50.544 ms, 91.70 %"),
        "{flame}"
    );
    assert!(
        flame.contains("<title>[lock warm_lock]\n4.576 ms, 8.30 %"),
        "{flame}"
    );
    // The sections this run lacks say so.
    assert!(page.contains("Blocked futex waits were not recorded in this run"));
    assert!(page.contains("MPI was not recorded in this run"));
    assert!(page.contains("Cache-line sharing was not recorded"));
    assert!(page.len() < 2 << 20, "{} bytes", page.len());
}

#[test]
fn the_heap_locks_page_names_the_heap_block_a_lock_lives_in() {
    let tmp = staged("heap-locks");
    let page = page_of(tmp.path(), "heap-locks");
    assert_self_contained(&page);
    assert!(
        page.contains("block of 72 B from open_account (heap_locks.cpp:75), +16 (0x55985218aec0)")
    );
    assert!(page.contains("transfer (heap_locks.cpp:100)"));
}

#[test]
fn the_mpi_fixture_page_has_ranks_patterns_and_call_sites() {
    let tmp = staged("mpi");
    let page = page_of(tmp.path(), "mpi");
    assert_self_contained(&page);
    assert!(page.contains("2 rank(s) recorded of 2 in MPI_COMM_WORLD"));
    assert!(page.contains(
        "MPI: Late Sender cost the most delay, 64.133 ms in 3 wait state(s); rank 1 waited most (64.133 ms); rank 0 caused most of it by being late (64.133 ms); most at main (late_sender.c:174)"
    ));
    assert!(page.contains("id=\"rank-bars\""));
    assert!(page.contains("<title>rank 1: Late Sender: 64.133 ms</title>"));
    assert!(page.contains("id=\"timeline-ranks\""));
    assert!(page.contains(">rank 0</text>") && page.contains(">rank 1</text>"));
    assert!(page.contains("<td>main (late_sender.c:174)</td>"));
    assert!(page.contains("<td>MPI_Recv</td>"));
    assert!(page.contains("Locks were not recorded in this run"));
    assert!(page.contains("Cache-line sharing was not recorded"));
}

#[test]
fn the_sharing_fixture_page_lays_out_the_hot_line_and_its_fix() {
    let tmp = staged("sharing");
    let page = page_of(tmp.path(), "sharing");
    assert_self_contained(&page);
    assert!(page.contains("<td>0x55f0258ae1c0</td>"));
    assert!(page.contains("<td>rw (global)</td>"));
    assert!(page.contains(
        "Hottest shared cache line: 0x55f0258ae1c0 (rw (global)) in pid 12258: 144 transfers"
    ));
    assert!(page.contains("false sharing"));
    assert!(page.contains("Fix: put ["), "the fix hint");
    assert!(page.contains("class=\"byte-layout\""));
    assert!(page.contains("Bytes of 0x55f0258ae1c0 by the thread that touched them"));
    // The layout's two rows: the bytes read, the bytes written, each by its threads' colours.
    let layout = &page[page.find("class=\"byte-layout\"").unwrap()..];
    let layout = &layout[..layout.find("</svg>").unwrap()];
    assert!(layout.contains(">read</text>") && layout.contains(">written</text>"));
    assert_eq!(
        layout.matches("<rect x=").count() - layout.matches("fill=\"none\"").count(),
        2 * 64 + 3,
        "two rows of 64 bytes and a legend of 3 colours"
    );
    assert!(page.contains("Locks were not recorded in this run"));
    assert!(page.contains("MPI was not recorded in this run"));
}

#[test]
fn the_activity_fixture_page_has_threads_and_says_no_locks_were_recorded() {
    let tmp = staged("activity");
    let page = page_of(tmp.path(), "activity");
    assert_self_contained(&page);
    assert!(page.contains("./serialised -t 2 -w 100 -c 25"));
    assert!(page.contains("<table class=\"sortable\" id=\"thread-table\">"));
    assert!(page.contains("Locks were not recorded in this run"));
    assert!(page.contains("id=\"timeline-threads\""));
}

#[test]
fn a_page_is_only_written_as_a_new_file() {
    let tmp = staged("locks");
    let dir = tmp.path();
    // A directory that does not exist.
    let out = contend_in(dir, &["report", "locks", "--html", "no/such/dir/page.html"]);
    assert_one_line_error(&out, 2, &["cannot write", "no/such/dir/page.html"]);
    // An existing file is never overwritten.
    std::fs::write(dir.join("kept.html"), "mine").unwrap();
    let out = contend_in(dir, &["report", "locks", "--html", "kept.html"]);
    assert_one_line_error(&out, 2, &["kept.html", "exists"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("kept.html")).unwrap(),
        "mine"
    );
    // Nor a symlink followed to another file.
    std::fs::write(dir.join("target"), "theirs").unwrap();
    std::os::unix::fs::symlink(dir.join("target"), dir.join("link.html")).unwrap();
    let out = contend_in(dir, &["report", "locks", "--html", "link.html"]);
    assert_one_line_error(&out, 2, &["link.html"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("target")).unwrap(),
        "theirs"
    );
    // Nor for the other page kinds, which make their file the same way.
    let out = contend_in(dir, &["diff", "locks", "locks", "--html", "kept.html"]);
    assert_one_line_error(&out, 2, &["kept.html", "exists"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("kept.html")).unwrap(),
        "mine"
    );
}

/// `args` in `dir`, which must succeed and write `page.html`: the page, private, and one
/// HTML5 document with its two inline scripts and nothing fetched, with these sections.
fn other_page(dir: &Path, args: &[&str], sections: &[&str]) -> String {
    let out = contend_in(dir, args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("wrote the report page page.html"),
        "{}",
        stderr(&out)
    );
    let path = dir.join("page.html");
    let page = std::fs::read_to_string(&path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "the page is private, mode {mode:o}");
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..100]);
    assert!(page.trim_end().ends_with("</html>"));
    assert_eq!(page.matches("<script>").count(), 2, "two inline scripts");
    assert_eq!(page.matches("<script").count(), 2, "two scripts");
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import", "<link"] {
        assert!(!page.contains(fetch), "the page fetches something: {fetch}");
    }
    for id in sections {
        assert!(
            page.contains(&format!("<section id=\"{id}\">")),
            "no {id} section"
        );
    }
    page
}

const SCALE_SECTIONS: &[&str] = &["overview", "speedup", "loss", "configurations"];
const DIFF_SECTIONS: &[&str] = &["overview", "worse", "better", "changed", "same"];

#[test]
fn the_scale_fixture_page_plots_the_speed_up_and_splits_the_loss() {
    let tmp = staged("scale");
    let page = other_page(
        tmp.path(),
        &["report", "scale", "--html", "page.html"],
        SCALE_SECTIONS,
    );
    assert!(page.contains("<code id=\"command\">./independent -t {threads} -w 100</code>"));
    // The verdict in words, as the text report says it.
    assert!(page.contains(
        "<li>2 threads on 2 cores: speed-up 1.00 measured, 1.64 predicted (A/(1+ω)), 2 ideal. Of the 0.36 threads&#39; worth of speed-up lost: 0.00 (0 %) to memory/hardware contention"
    ));
    assert!(page.contains("0.88 threads still waited for a CPU on average"));
    // The speed-up curve measured against modelled, and its figures.
    assert!(page.contains("<title>measured</title>"));
    assert!(page.contains("<title>predicted A/(1+ω) (loss between: memory/hardware)</title>"));
    assert!(page.contains("<td class=\"num\" data-v=\"1.00455037"));
    // The loss split: blocked (D) 0.36 threads' worth, drawn and in the table; this file
    // predates the intervals and the page says so.
    assert!(page.contains("id=\"loss-bars\""));
    assert!(page.contains(
        "<title>m=2 n=2: blocked: locks, sleeps, I/O, joins (D): 0.36 threads' worth</title>"
    ));
    assert!(page.contains(
        "<td>blocked: locks, sleeps, I/O, joins (D)</td><td class=\"num\" data-v=\"0.355271"
    ));
    assert!(page.contains("this file has no intervals"));
    // Both configurations measured.
    assert!(page.contains("<td>0,1</td><td class=\"num\" data-v=\"265261114\">0.265</td>"));
    assert!(page.contains("<td>0</td><td class=\"num\" data-v=\"266468151\">0.266</td>"));
}

#[test]
fn the_diff_page_says_what_got_worse_and_what_got_better() {
    // The scale fixture's two runs of the same program: 2 threads on 1 core, then on 2.
    let tmp = staged("scale");
    let page = other_page(
        tmp.path(),
        &[
            "diff",
            "scale/m2-n1-r1",
            "scale/m2-n2-r1",
            "--html",
            "page.html",
        ],
        DIFF_SECTIONS,
    );
    assert!(page.contains("<code class=\"input\">scale/m2-n1-r1</code>"));
    assert!(page.contains(
        "<code>scale/m2-n2-r1</code> against <code>scale/m2-n1-r1</code>: <span class=\"worse\">5 worse</span>, <span class=\"better\">7 better</span>, 16 changed without a direction"
    ));
    let section = |id: &str| {
        let start = page.find(&format!("<section id=\"{id}\">")).unwrap();
        let end = start + page[start..].find("</section>").unwrap();
        page[start..end].to_string()
    };
    // worker-1 waited longer on two cores, worker-0 shorter; waits are worse higher.
    let worse = section("worse");
    assert!(worse.contains("<td>activity.threads[name=worker-1].runq_wait_ns</td>"));
    assert!(!worse.contains("worker-0].runq_wait_ns"));
    let better = section("better");
    assert!(better.contains("<td>activity.threads[name=worker-0].runq_wait_ns</td>"));
    assert!(better.contains("<td>activity.runq_wait_ns</td>"));
    assert!(
        !better.contains("coverage_pct"),
        "coverage has no direction"
    );
    // Counts have no direction; each row has both figures and the change.
    assert!(section("changed").contains("voluntary_switches</td>"));
    assert!(page.contains("id=\"change-bars\""));
    assert!(
        worse.matches("<tr><td>").count() == 5,
        "five rows worse: {worse}"
    );
}

#[test]
fn the_c2c_page_is_the_sharing_section_alone() {
    let tmp = staged("sharing");
    let page = other_page(
        tmp.path(),
        &["c2c", "report", "sharing", "--html", "page.html"],
        &["sharing"],
    );
    assert!(page.contains("<td>0x55f0258ae1c0</td>"));
    assert!(page.contains("<td>rw (global)</td>"));
    assert!(page.contains("false sharing"));
    assert!(page.contains("Fix: put ["));
    assert!(page.contains("Bytes of 0x55f0258ae1c0 by the thread that touched them"));
    assert!(
        !page.contains("<section id=\"locks\">"),
        "the sharing page alone"
    );
    // A run without sharing results makes no page.
    let locks = staged("locks");
    let out = contend_in(
        locks.path(),
        &["c2c", "report", "locks", "--html", "c.html"],
    );
    assert_one_line_error(&out, 2, &["no sharing results"]);
    assert!(!locks.path().join("c.html").exists());
}

/// A thread named as markup that would run if the page did not escape it (`onload` runs as
/// the element is parsed, and `Z`, unlike `x`, is no property of an SVG element, so it throws
/// a ReferenceError the page's error catcher records; 14 bytes, within the 15 of a thread
/// name), and an argument that would run too: the page shows both as text.
const HOSTILE_THREAD: &str = "<svg onload=Z>";
const HOSTILE_ARG: &str = "<script>alert(1)</script>";

const NAMED_THREADS_C: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *work(void *name) {
    pthread_setname_np(pthread_self(), (const char *)name);
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&lock);
        struct timespec t = {0, 300000};
        nanosleep(&t, 0);
        pthread_mutex_unlock(&lock);
    }
    return 0;
}
int main(int argc, char **argv) {
    (void)argc; (void)argv;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, work, (void *)"<svg onload=Z>");
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    printf("truth threads=2\n");
    return 0;
}
"#;

/// Records the program above (threads named [`HOSTILE_THREAD`], run with [`HOSTILE_ARG`]) and
/// writes its page: the page's path, or `None` without a C compiler (a visible skip).
fn hostile_page(dir: &Path) -> Option<PathBuf> {
    if !testkit::require_command("cc", "gcc") {
        return None;
    }
    let src = dir.join("named.c");
    std::fs::write(&src, NAMED_THREADS_C).unwrap();
    let exe = dir.join("named");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "building the named-threads program");
    crate::common::record(dir, &["--locks"], &exe, &[HOSTILE_ARG]);
    let out = contend_in(dir, &["report", "run", "--html", "page.html"]);
    assert!(out.status.success(), "{}", stderr(&out));
    Some(dir.join("page.html"))
}

#[test]
fn names_from_the_program_are_shown_as_text_never_run() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(path) = hostile_page(tmp.path()) else {
        return;
    };
    let page = std::fs::read_to_string(path).unwrap();
    assert!(
        !page.contains(HOSTILE_THREAD),
        "the thread name is unescaped"
    );
    assert!(!page.contains(HOSTILE_ARG), "the argument is unescaped");
    assert!(
        page.contains("&lt;svg onload=Z&gt;"),
        "the thread name is not on the page at all"
    );
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

/// Debian's `chromium`, or `None` (a skip; a failure under CI, where scripts/test.sh
/// installs it).
fn chromium() -> bool {
    testkit::require_command("chromium", "chromium")
}

/// The page's DOM after Chromium loaded it and ran its script, and Chromium's log.
fn dump_dom(page: &Path) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg("--dump-dom")
    .arg(page);
    let out = output_within(&mut cmd, Duration::from_secs(120))
        .expect("chromium did not finish within 120 s");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {log}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), log)
}

/// What a page that loaded cleanly in the browser shows: its script ran through, raised
/// nothing, and the load event came.
fn assert_ran_cleanly(dom: &str, log: &str) {
    assert!(
        dom.contains("data-js=\"ok\""),
        "the page's script did not finish: {}",
        &dom[..dom.len().min(400)]
    );
    assert!(!dom.contains("data-js-error=\""), "a script error: {dom}");
    assert!(
        dom.contains("data-load-ms=\""),
        "the page never reached its load event"
    );
    assert!(
        !log.contains("Uncaught"),
        "a JavaScript error in the console: {log}"
    );
}

#[test]
fn chromium_shows_every_fixture_page_with_no_script_error() {
    if !chromium() {
        return;
    }
    for (name, expected) in [
        (
            "locks",
            &[
                "hot_lock (0x564956446200)",
                "update_shared_counter (planted_hold.c:147)",
            ][..],
        ),
        (
            "mpi",
            &["main (late_sender.c:174)", ">rank 1</text>", "Late Sender"][..],
        ),
        (
            "sharing",
            &["0x55f0258ae1c0", "rw (global)", "false sharing"][..],
        ),
        (
            "heap-locks",
            &["block of 72 B from open_account (heap_locks.cpp:75), +16"][..],
        ),
        ("activity", &["./serialised -t 2 -w 100 -c 25"][..]),
    ] {
        let tmp = staged(name);
        let _ = page_of(tmp.path(), name);
        let (dom, log) = dump_dom(&tmp.path().join("page.html"));
        assert_ran_cleanly(&dom, &log);
        for e in expected {
            assert!(dom.contains(e), "{name}: {e:?} not in the DOM");
        }
        if name == "locks" {
            assert_eq!(
                critical_marks(&dom),
                14,
                "the critical path's waits in the DOM"
            );
        }
        // The tables and charts are there after the script ran (it sorts, never removes).
        assert!(dom.contains("<section id=\"overview\">"), "{name}");
        assert!(
            dom.contains("<svg") || name == "heap-locks",
            "{name}: no chart"
        );
    }
}

#[test]
fn chromium_shows_a_hostile_thread_name_as_text() {
    if !chromium() {
        return;
    }
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(path) = hostile_page(tmp.path()) else {
        return;
    };
    let (dom, log) = dump_dom(&path);
    assert_ran_cleanly(&dom, &log);
    // Had the name become markup, the DOM would hold an <svg onload="Z"> element and the
    // page's `data-js-error` the ReferenceError of `Z`; as text it serialises escaped.
    assert!(
        !dom.contains("onload=\"Z\""),
        "the thread name became an element"
    );
    assert!(dom.contains("&lt;svg onload=Z&gt;"));
    assert!(!dom.contains("<script>alert(1)</script>"));
}

#[test]
fn chromium_shows_the_scale_diff_and_c2c_pages_with_no_script_error() {
    if !chromium() {
        return;
    }
    for (fixture, args, expected) in [
        (
            "scale",
            &["report", "scale", "--html", "page.html"][..],
            &[
                "id=\"loss-bars\"",
                "2 threads on 2 cores: speed-up 1.00 measured",
            ][..],
        ),
        (
            "scale",
            &[
                "diff",
                "scale/m2-n1-r1",
                "scale/m2-n2-r1",
                "--html",
                "page.html",
            ][..],
            &["activity.threads[name=worker-1].runq_wait_ns", "5 worse"][..],
        ),
        (
            "sharing",
            &["c2c", "report", "sharing", "--html", "page.html"][..],
            &["0x55f0258ae1c0", "false sharing"][..],
        ),
    ] {
        let tmp = staged(fixture);
        let out = contend_in(tmp.path(), args);
        assert!(out.status.success(), "{}", stderr(&out));
        let (dom, log) = dump_dom(&tmp.path().join("page.html"));
        assert_ran_cleanly(&dom, &log);
        for e in expected {
            assert!(dom.contains(e), "{args:?}: {e:?} not in the DOM");
        }
        assert!(dom.contains("<svg"), "{args:?}: no chart");
    }
}

/// Presses the timeline's zoom buttons, turns the wheel and drags over it, as a reader would,
/// writing the SVG's viewBox after each step into `data-steps` on `<html>` (run after the
/// page's own script, at the end of a copy of the page).
const ZOOM_PROBE: &str = r#"<script>
(function(){
var svg=document.getElementById("timeline-threads");
var box=document.querySelector('[data-zoom="timeline-threads"]');
var steps=[svg.getAttribute("viewBox")];
function press(z){box.querySelector('button[data-z="'+z+'"]').click();steps.push(svg.getAttribute("viewBox"));}
press("in");
var r=svg.getBoundingClientRect();
var at={clientX:r.left+r.width/2,clientY:r.top+r.height/2,bubbles:true,cancelable:true};
svg.dispatchEvent(new WheelEvent("wheel",Object.assign({deltaY:-100},at)));
steps.push(svg.getAttribute("viewBox"));
svg.dispatchEvent(new PointerEvent("pointerdown",Object.assign({button:0,pointerId:1},at)));
svg.dispatchEvent(new PointerEvent("pointermove",Object.assign({},at,{clientX:at.clientX-100,pointerId:1})));
svg.dispatchEvent(new PointerEvent("pointerup",Object.assign({pointerId:1},at)));
steps.push(svg.getAttribute("viewBox"));
press("reset");
press("out");
document.documentElement.setAttribute("data-steps",steps.join("|"));
})();
</script>"#;

#[test]
fn chromium_zooms_and_pans_the_timeline_and_draws_it_whole_without_scripts() {
    if !chromium() {
        return;
    }
    let tmp = staged("locks");
    let page = page_of(tmp.path(), "locks");
    // Drawn whole as written: the viewBox is the SVG's own size, the buttons hidden unless
    // the script ran.
    let svg_start = page.find("id=\"timeline-threads\"").unwrap();
    let svg_tag = &page[svg_start..svg_start + page[svg_start..].find('>').unwrap()];
    let attr = |name: &str| -> f64 {
        let at = svg_tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        svg_tag[at..at + svg_tag[at..].find('"').unwrap()]
            .parse()
            .unwrap()
    };
    let (w, h) = (attr("width"), attr("height"));
    assert!(
        svg_tag.contains(&format!("viewBox=\"0 0 {w} {h}\"")),
        "{svg_tag}"
    );
    assert!(page.contains("<div class=\"zoom js-only\" data-zoom=\"timeline-threads\">"));

    let probed = tmp.path().join("probed.html");
    std::fs::write(
        &probed,
        page.replace("</body>", &format!("{ZOOM_PROBE}</body>")),
    )
    .unwrap();
    let (dom, log) = dump_dom(&probed);
    assert_ran_cleanly(&dom, &log);
    let at = dom.find("data-steps=\"").expect("the probe did not run") + 12;
    let steps: Vec<Vec<f64>> = dom[at..at + dom[at..].find('"').unwrap()]
        .split('|')
        .map(|s| s.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect();
    let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    assert_eq!(steps.len(), 6, "{steps:?}");
    assert!(close(&steps[0], &[0.0, 0.0, w, h]), "{steps:?}");
    // "+" halves the view about its middle.
    assert!(
        close(&steps[1], &[w / 4.0, h / 4.0, w / 2.0, h / 2.0]),
        "{steps:?}"
    );
    // The wheel up zooms 1.25 times more about the pointer (the middle here).
    assert!(
        (steps[2][2] - w / 2.0 / 1.25).abs() < 1e-6 && steps[2][0] > steps[1][0],
        "{steps:?}"
    );
    // Dragging left by 100 px moves the view right, same zoom, same height.
    assert!(
        steps[3][0] > steps[2][0] && close(&steps[3][1..], &steps[2][1..]),
        "{steps:?}"
    );
    // Reset draws it whole; "−" cannot zoom out past the whole.
    assert!(close(&steps[4], &[0.0, 0.0, w, h]), "{steps:?}");
    assert!(close(&steps[5], &[0.0, 0.0, w, h]), "{steps:?}");

    // With scripts off (a copy whose policy forbids them: --dump-dom itself needs script)
    // the chart is there whole and the page's script did not run.
    let off = tmp.path().join("off.html");
    std::fs::write(
        &off,
        page.replacen(
            "<head>",
            "<head><meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">",
            1,
        ),
    )
    .unwrap();
    let (dom, _) = dump_dom(&off);
    assert!(!dom.contains("data-js=\"ok\""), "scripts ran");
    assert!(dom.contains(&format!("viewBox=\"0 0 {w} {h}\"")));
    assert!(dom.contains("update_shared_counter (planted_hold.c:147)"));
}

/// Records examples/waits/std_mutex.rs (`--locks`: the probe and the off-CPU recorder, with
/// user stacks) in `dir` and writes its page: the line of its `hot.lock()`, or `None` (a
/// visible skip) when not root (the futex waits are recorded through perf tracepoints), no
/// Rust compiler, or the sched tracepoints did not record (the waits have no end).
fn std_mutex_page(dir: &Path) -> Option<u32> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip("needs root: the futex waits are recorded through perf tracepoints");
        return None;
    }
    let exe = crate::common::build("examples/waits/std_mutex.rs", dir)?;
    crate::common::record(dir, &["--locks"], &exe, &["-n", "30"]);
    let meta = crate::common::meta(&dir.join("run"));
    if !meta["captured"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "sched-tracepoints")
    {
        testkit::skip("the sched tracepoints did not record: the waits have no end here");
        return None;
    }
    let out = contend_in(dir, &["report", "run", "--html", "page.html"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let src = std::fs::read_to_string(crate::common::repo("examples/waits/std_mutex.rs")).unwrap();
    let line = src
        .lines()
        .position(|l| l.contains("hot.lock()"))
        .expect("std_mutex.rs takes hot.lock()");
    Some(line as u32 + 1)
}

/// The text between `<section id="ID">` and its end.
fn section_of<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no {id} section"));
    &page[start..start + page[start..].find("</section>").unwrap()]
}

/// Issue 22's futex waits on the page: a Rust `std::sync::Mutex` the lock probe cannot see,
/// found by its futex waits, named as the static `HOT` and placed at the program's
/// `hot.lock()` line, in the DOM Chromium built.
#[test]
fn chromium_shows_a_std_mutexs_waits_at_its_line() {
    let _one = serial();
    if !chromium() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(line) = std_mutex_page(tmp.path()) else {
        return;
    };
    let (dom, log) = dump_dom(&tmp.path().join("page.html"));
    assert_ran_cleanly(&dom, &log);
    let waits = section_of(&dom, "waits");
    assert!(waits.contains("futex wait(s),"), "{waits}");
    // The kind table has the Mutex's lock waits; the site table the Mutex's line, as a lock
    // wait on the word named HOT.
    assert!(waits.contains("<tr><td>lock</td>"), "{waits}");
    let at = format!("(std_mutex.rs:{line})</td><td>lock</td><td>std_mutex::HOT (0x");
    let row = waits
        .split("<tr>")
        .find(|r| r.contains(&at))
        .unwrap_or_else(|| panic!("no lock wait at std_mutex.rs:{line} on HOT: {waits}"));
    // The row's waits are the word's: the JSON's count of its lock waits at that line.
    let json = crate::common::report_json(tmp.path(), &["run"]);
    let hot = json["waits"]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"].as_str().is_some_and(|n| n.ends_with("HOT")))
        .expect("the word HOT in the JSON");
    let waited: u64 = hot["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["kind"] == "lock"
                && s["site"]
                    .as_str()
                    .is_some_and(|l| l.ends_with(&format!("std_mutex.rs:{line})")))
        })
        .map(|s| s["waits"].as_u64().unwrap())
        .sum();
    assert!(waited > 0, "{hot}");
    assert!(
        row.contains(&format!(
            "<td class=\"num\" data-v=\"{waited}\">{waited}</td>"
        )),
        "{row} against {waited} waits"
    );
    // The overview's findings say it in words.
    assert!(
        section_of(&dom, "overview")
            .contains("Futex waits (of any runtime, from the scheduler): the longest on "),
        "{}",
        section_of(&dom, "overview")
    );
    // The other blocks by the kernel function the scheduler named, and the threads.
    assert!(waits.contains("id=\"wait-thread-table\""), "{waits}");
    // Who made whom wait: the critical section charged most is the one the JSON names, ended
    // at the guard's drop, with as many waits as the JSON says.
    let src = std::fs::read_to_string(crate::common::repo("examples/waits/std_mutex.rs")).unwrap();
    let drop_line = 1 + src
        .lines()
        .position(|l| l.contains("drop(guard)"))
        .expect("std_mutex.rs drops its guard");
    let top = &json["waits"]["holders"][0];
    let site = top["waker_site"]
        .as_str()
        .unwrap_or_else(|| panic!("{top}"));
    assert!(
        site.ends_with(&format!("(std_mutex.rs:{drop_line})")),
        "{top}"
    );
    let holders = waits
        .split("id=\"holder-table\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no holder table: {waits}"));
    let n = top["waits"].as_u64().unwrap();
    let row = holders
        .split("<tr>")
        .find(|r| {
            r.contains(&format!(
                "<td>{}</td>",
                site.replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            ))
        })
        .unwrap_or_else(|| panic!("no row for {site}: {holders}"));
    assert!(
        row.contains(&format!("<td class=\"num\" data-v=\"{n}\">{n}</td>")),
        "{row} against {n} waits"
    );
    assert!(waits.contains("id=\"blame-table\""), "{waits}");
    // The timeline draws the paired futex waits on the waiting threads' lanes, each hover
    // naming where it waited and who woke it.
    let timeline = section_of(&dom, "timeline");
    assert!(
        timeline.contains(" waited on a futex at ")
            && timeline.contains(&format!("(std_mutex.rs:{line}), woken by thread ")),
        "{timeline}"
    );
    assert!(
        timeline.contains("a futex wait ended by a thread of the program"),
        "{timeline}"
    );
    // And the overview names that critical section among its findings.
    let overview = section_of(&dom, "overview");
    assert!(
        overview.contains(&format!(
            "The critical section that made others wait most ended at {}",
            site.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        )),
        "{overview}"
    );
}

/// The wait time by call stack, drawn from the folded stacks: the program's closure that took
/// the Mutex is as wide as its share of the wait time in `--folded`; names with `<` (Rust
/// generics) are text; a click zooms to a frame's subtree.
#[test]
fn chromium_draws_the_flame_graph_of_a_std_mutex_run() {
    let _one = serial();
    if !chromium() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(line) = std_mutex_page(tmp.path()) else {
        return;
    };
    let out = contend_in(tmp.path(), &["report", "run", "--folded", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The folded lines (after the text report, also on stdout): rooted at `[lock` or `[futex`.
    let folded: Vec<(String, u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("[lock ") || l.starts_with("[futex wait "))
        .map(|l| {
            let (stack, ns) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), ns.parse().unwrap())
        })
        .collect();
    let total: u64 = folded.iter().map(|(_, ns)| ns).sum();
    // The program's frame that took the Mutex: its closure, at the hot.lock() line.
    let is_closure = |frame: &str| {
        frame.starts_with("std_mutex::main::") && frame.ends_with(&format!("/std_mutex.rs:{line})"))
    };
    let through: Vec<u64> = folded
        .iter()
        .filter(|(s, _)| s.split(';').any(is_closure))
        .map(|&(_, ns)| ns)
        .collect();
    let expected = through.iter().sum::<u64>() as f64 / total as f64;
    assert!(
        expected > 0.1,
        "the Mutex's waits are a good share: {expected}"
    );

    let (dom, log) = dump_dom(&tmp.path().join("page.html"));
    assert_ran_cleanly(&dom, &log);
    let flame = section_of(&dom, "flame");
    // Each frame: its depth, the first line of its title (its full name) and its width.
    let frames: Vec<(u32, String, f64)> = flame
        .split("<g class=\"f\" ")
        .skip(1)
        .map(|g| {
            let depth = g["data-d=\"".len()..]
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let title = &g[g.find("<title>").unwrap() + 7..];
            let name = title[..title.find('\n').unwrap()].to_string();
            let at = g.find(" width=\"").unwrap() + 8;
            let width = g[at..at + g[at..].find('"').unwrap()].parse().unwrap();
            (depth, name, width)
        })
        .collect();
    let root = frames.iter().find(|f| f.0 == 0).expect("the root frame");
    assert_eq!(root.1, "all");
    let drawn: f64 = frames
        .iter()
        .filter(|f| is_closure(&f.1))
        .map(|f| f.2)
        .sum::<f64>()
        / root.2;
    // Widths are written to 0.01 px of 1200 (5e-5 a frame at most, with the root's); a stack
    // through the closure that is under 0.5 % of the wait time may be merged away under its
    // caller, so the drawn share may be short by those stacks' shares, never long.
    let mergeable: f64 = through
        .iter()
        .map(|&ns| ns as f64 / total as f64)
        .filter(|&s| s < 0.005)
        .sum();
    assert!(
        drawn <= expected + 1e-4 && drawn >= expected - mergeable - 1e-4,
        "the closure is drawn {drawn:.5} wide, its share of the folded wait time is {expected:.5} (up to {mergeable:.5} mergeable)"
    );
    // A Rust generic is text: escaped in the serialised DOM, never an element.
    assert!(flame.contains("Mutex&lt;T&gt;::lock"), "{flame}");
    assert!(!dom.contains("Mutex<T>"));

    // A click on the closure zooms to it: it spans the graph, the root is a dimmed path.
    let page = std::fs::read_to_string(tmp.path().join("page.html")).unwrap();
    let end = format!("/std_mutex.rs:{line})");
    let probe = format!(
        "<script>(function(){{var g=Array.prototype.filter.call(document.querySelectorAll('#flame-graph g.f'),function(g){{var n=g.querySelector('title').textContent.split('\\n')[0];return n.indexOf('std_mutex::main::')===0&&n.slice(-{len})==='{end}';}})[0];g.dispatchEvent(new MouseEvent('click',{{bubbles:true}}));document.documentElement.setAttribute('data-zoomed-width',g.querySelector('rect').getAttribute('width'));}})();</script></body>",
        len = end.len(),
    );
    let probed = tmp.path().join("probed.html");
    std::fs::write(&probed, page.replace("</body>", &probe)).unwrap();
    let (dom, log) = dump_dom(&probed);
    assert_ran_cleanly(&dom, &log);
    assert!(
        dom.contains("data-zoomed-width=\"1200.00\""),
        "{}",
        section_of(&dom, "flame")
    );
    assert!(
        dom.contains("data-zoomed=\"std_mutex::main::"),
        "the graph names its zoom"
    );

    // With scripts off (a copy whose policy forbids them) the graph is there whole, its
    // frames' names and tooltips as written, the reset button hidden.
    let off = tmp.path().join("off.html");
    std::fs::write(
        &off,
        page.replacen(
            "<head>",
            "<head><meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">",
            1,
        ),
    )
    .unwrap();
    let (dom, _) = dump_dom(&off);
    assert!(!dom.contains("data-js=\"ok\""), "scripts ran");
    let flame = section_of(&dom, "flame");
    assert!(!flame.contains("data-zoomed"));
    assert!(
        flame.contains(&format!("/std_mutex.rs:{line})\n")),
        "{flame}"
    );
    assert!(flame.contains(
        "<div class=\"zoom js-only\"><button type=\"button\" data-flame-reset=\"flame-graph\">"
    ));
}
