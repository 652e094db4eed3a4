//! Programs that crash after their sharing work (Phoenix's histogram-pthread aborts in `free()`
//! after printing its results): built with `contend cc`, recorded with `contend c2c record`,
//! their results must still be written (by the sharing runtime's fatal-signal handler), the
//! exit status must be the signal's, and `contend c2c report` must name the false sharing.

use crate::common::{output_within, serial, sharing_runtime, show, stderr, stdout, CONTEND};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Two threads taking turns writing adjacent fields of one 64-byte-aligned struct for 200 ms
/// and at least 10 000 turns each (turns, so the line moves between them whatever the
/// machine's load; counted, because at a load of 50 two threads that yield got too few turns
/// in 200 ms for the sampler to see the line; 30 s at most), then an abort from
/// inside `free()` (an invalid pointer, as a heap bug would give; `abort()` should it return)
/// or a write through a null pointer.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static struct counters {
    long left;
    long right;
} pair __attribute__((aligned(64)));

static volatile int turn __attribute__((aligned(64)));
static volatile int stop __attribute__((aligned(64)));

struct job { int me; long *field; };

static void *worker(void *arg) {
    struct job *j = arg;
    for (;;) {
        while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != j->me) {
            if (stop)
                return NULL;
            sched_yield();
        }
        if (!stop)
            for (int i = 0; i < 16; i++)
                (*(volatile long *)j->field)++;
        __atomic_store_n(&turn, 1 - j->me, __ATOMIC_RELEASE);
        if (stop)
            return NULL;
    }
}

int main(int argc, char **argv) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct job l = {0, &pair.left}, r = {1, &pair.right};
    pthread_t a, b;
    pthread_create(&a, NULL, worker, &l);
    pthread_create(&b, NULL, worker, &r);
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int ticks = 1; ticks <= 3000; ticks++) {
        nanosleep(&tick, NULL);
        if (ticks >= 20 && __atomic_load_n(&pair.left, __ATOMIC_RELAXED) >= 16 * 10000 &&
            __atomic_load_n(&pair.right, __ATOMIC_RELAXED) >= 16 * 10000)
            break;
    }
    stop = 1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("pair %p left %ld right %ld\n", (void *)&pair, pair.left, pair.right);
    fflush(stdout);
    if (argc > 1 && !strcmp(argv[1], "segv"))
        *(volatile int *)(argc > 99 ? (void *)argv : NULL) = 1;
    long not_from_malloc[4];
    free(argc > 99 ? NULL : (void *)&not_from_malloc[1]);
    abort();
}
"#;

/// Builds the program with `contend cc` in `dir`; None (a visible skip) without gcc.
fn build(dir: &Path) -> Option<std::path::PathBuf> {
    if !testkit::require_command("gcc", "gcc") {
        return None;
    }
    sharing_runtime();
    std::fs::write(dir.join("crash.c"), PROGRAM).unwrap();
    let out = Command::new(CONTEND)
        .args(["cc", "--", "gcc", "-O1", "-g", "crash.c", "-o", "crash"])
        .current_dir(dir)
        .env_remove("CONTEND_SHARING_LIB")
        .output()
        .unwrap();
    assert!(out.status.success(), "contend cc: {}", show(&out));
    Some(dir.join("crash"))
}

fn records_and_reports(mode: &str, signal: i32, says: &str) {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let Some(exe) = build(d) else {
        return;
    };
    let run = d.join("run");
    let mut record = Command::new(CONTEND);
    record
        .args(["c2c", "record", "-o"])
        .arg(&run)
        .arg("--")
        .arg(&exe)
        .arg(mode)
        .current_dir(d);
    // A runtime that deadlocked in its handler (a lock taken inside free) would hang here.
    let out = output_within(&mut record, Duration::from_secs(120))
        .expect("contend c2c record of a crashing program did not end within 120 s");
    assert_eq!(out.status.code(), Some(128 + signal), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("killed by signal {signal} ({says})"))
            && err.contains("recorded sharing of 1 process(es)"),
        "{err}"
    );
    let printed = stdout(&out);
    let pair = printed
        .lines()
        .find_map(|l| l.strip_prefix("pair 0x"))
        .and_then(|l| l.split_whitespace().next())
        .map(|a| u64::from_str_radix(a, 16).unwrap())
        .unwrap_or_else(|| panic!("no `pair` line in {printed}"));

    let report = Command::new(CONTEND)
        .args(["c2c", "report", "--json"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", show(&report));
    let v: Value = serde_json::from_slice(&report.stdout).unwrap();
    let lines = v["lines"].as_array().unwrap();
    let line = lines
        .iter()
        .find(|l| l["address"] == pair)
        .unwrap_or_else(|| panic!("{mode}: no hot line at {pair:#x}: {lines:#?}"));
    assert_eq!(line["class"], "false-sharing", "{mode}: {line:#}");
    assert!(
        line["belongs_to"]
            .as_str()
            .unwrap()
            .contains("pair (global"),
        "{mode}: {}",
        line["belongs_to"]
    );
    let rows = line["rows"].as_array().unwrap();
    for offset in [0, 8] {
        assert!(
            rows.iter()
                .any(|r| r["offset"] == offset && r["kind"] == "write"),
            "{mode}: no write at +{offset}: {rows:#?}"
        );
    }
    assert!(
        line["transfers"].as_u64().unwrap() >= 64,
        "{mode}: {line:#}"
    );

    let text = Command::new(CONTEND)
        .args(["c2c", "report"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(text.status.success(), "{}", show(&text));
    let shown = stdout(&text);
    let described = shown
        .lines()
        .find(|l| l.starts_with("Line #") && l.contains("(pair (global))"))
        .unwrap_or_else(|| panic!("{mode}: the pair line is not described: {shown}"));
    assert!(described.contains("false sharing"), "{described}");
    assert!(
        shown.contains("+0x0..+0x8") && shown.contains("+0x8..+0x10"),
        "{mode}: both fields of the pair: {shown}"
    );
}

#[test]
fn a_program_aborting_in_free_after_its_work_keeps_its_sharing_results() {
    records_and_reports("abort", libc::SIGABRT, "Aborted");
}

#[test]
fn a_program_segfaulting_after_its_work_keeps_its_sharing_results() {
    records_and_reports("segv", libc::SIGSEGV, "Segmentation fault");
}
