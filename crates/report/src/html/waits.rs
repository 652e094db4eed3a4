//! The waits section of the run's page (issue 22's futex waits): the program's blocked futex
//! waits of any runtime by kind, by futex word (named as the global or heap block it lies in)
//! and by the program's frame that waited (file:line, from the user stacks); per thread; what
//! ended the waits, who made whom wait and the critical sections by wait caused (the wakes
//! paired with the waits); the kernel locks slept on; the other blocks by the kernel function
//! the scheduler named; and what was not recorded and why. Rendered from the [`WaitReport`](analysis::waits::WaitReport) the text report's waits
//! section renders.

use super::{escape, int, missing, ms_cell, section_start, table, text, Cell, Page, WaitsPage};
use std::fmt::Write;

fn s(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

pub(super) fn section(out: &mut String, p: &Page<'_>) {
    section_start(out, "waits", "Waits");
    let max_rows = p.options.max_rows;
    let Some(w) = &p.waits else {
        match p.waits_not_measured {
            Some(why) => missing(
                out,
                &format!("Blocked waits were asked for but not recorded: {why}"),
            ),
            None => missing(
                out,
                "Blocked futex waits were not recorded in this run (contend record --locks records them, unless --no-waits).",
            ),
        }
        out.push_str("</section>\n");
        return;
    };
    let r = w.report;
    if !w.ends_traced {
        untimed(out, w, max_rows);
        out.push_str("</section>\n");
        return;
    }
    let _ = writeln!(
        out,
        "<p id=\"waits-summary\">Every block of the program's threads, from the scheduler: <strong>{} futex wait(s), {} s off CPU</strong>; {} other block(s), {} s.</p>",
        r.futex_waits,
        s(r.futex_ns),
        r.other_blocks,
        s(r.other_ns)
    );
    let mut notes: Vec<String> = Vec::new();
    if r.probe_counted > 0 {
        notes.push(format!(
            "{} futex wait(s), {} s, were inside pthread calls the lock probe recorded: they are counted as lock, condition or barrier waits (the Locks section), not again here.",
            r.probe_counted,
            s(r.probe_counted_ns)
        ));
    }
    if r.unmeasured > 0 {
        notes.push(format!(
            "{} block(s) have no length: the thread's switch back in was not traced.",
            r.unmeasured
        ));
    }
    if !w.stacks_recorded {
        notes.push("No user stack was recorded with the waits (a run recorded before stacks, or with a stack budget of 0): their kind and the program's file:line are not known.".into());
    }
    if r.without_stack > 0 {
        notes.push(format!(
            "{} futex wait(s) have no user stack (recorded past the stack budget, --stack-budget; or the stack copy was empty or unreadable): their kind and the program's frame are not known.",
            r.without_stack
        ));
    }
    if r.unknown_stacks > 0 {
        notes.push(format!(
            "{} futex wait(s) have a stack that did not unwind past its first frame (code without call frame information, the vDSO, or a module changed since the run): shown as [unknown].",
            r.unknown_stacks
        ));
    }
    if !notes.is_empty() {
        out.push_str("<ul id=\"waits-not-recorded\">\n");
        for n in &notes {
            let _ = writeln!(out, "<li class=\"note\">{}</li>", escape(n));
        }
        out.push_str("</ul>\n");
    }
    if !r.kinds.is_empty() {
        let rows = r
            .kinds
            .iter()
            .map(|k| {
                vec![
                    text(k.kind.to_string()),
                    int(k.waits),
                    ms_cell(k.total_ns),
                    share(k.total_ns, r.futex_ns),
                ]
            })
            .collect();
        table(
            out,
            "wait-kind-table",
            "Futex waits by kind (from the user stacks)",
            &[
                "kind",
                "waits",
                "total (ms)",
                "share of the futex wait time",
            ],
            &[1, 2, 3],
            rows,
            max_rows,
        );
    }
    let words: Vec<_> = r.addresses.iter().filter(|a| a.waits > 0).collect();
    if !words.is_empty() {
        let rows = words
            .iter()
            .map(|a| {
                vec![
                    text(crate::waits::word_label(w.names, a.pid, a.uaddr)),
                    int(u64::from(a.pid)),
                    int(a.waits),
                    ms_cell(a.total_ns),
                    ms_cell(a.max_ns),
                    ms_cell(a.runqueue_ns),
                    int(a.threads.len() as u64),
                ]
            })
            .collect();
        table(
            out,
            "futex-word-table",
            "Per futex word (most waited first)",
            &[
                "futex word",
                "pid",
                "waits",
                "total (ms)",
                "longest (ms)",
                "of it on a run queue (ms)",
                "threads",
            ],
            &[1, 2, 3, 4, 5, 6],
            rows,
            max_rows,
        );
    }
    let mut sites: Vec<Vec<Cell>> = Vec::new();
    for a in &words {
        for st in a.sites.iter().filter(|st| st.kind.is_some()) {
            sites.push(vec![
                text(st.site.clone().unwrap_or_else(|| "?".into())),
                text(st.kind.map_or_else(String::new, |k| k.to_string())),
                text(crate::waits::word_label(w.names, a.pid, a.uaddr)),
                int(st.waits),
                ms_cell(st.total_ns),
                ms_cell(st.max_ns),
            ]);
        }
    }
    if !sites.is_empty() {
        sites.sort_by(|a, b| {
            b[4].sort
                .unwrap_or(0.0)
                .total_cmp(&a[4].sort.unwrap_or(0.0))
        });
        table(
            out,
            "futex-site-table",
            "Where the program waited: its own frame nearest the wait (most waiting first)",
            &[
                "the program waited at",
                "kind",
                "futex word",
                "waits",
                "total (ms)",
                "longest (ms)",
            ],
            &[3, 4, 5],
            sites,
            max_rows,
        );
    }
    let threads: Vec<_> = r
        .threads
        .iter()
        .filter(|t| t.futex_waits + t.other_blocks + t.probe_counted > 0)
        .collect();
    if !threads.is_empty() {
        let rows = threads
            .iter()
            .map(|t| {
                vec![
                    text(w.thread_names.get(&t.tid).cloned().unwrap_or_default()),
                    int(u64::from(t.tid)),
                    int(t.futex_waits),
                    ms_cell(t.futex_ns),
                    ms_cell(t.futex_max_ns),
                    ms_cell(t.probe_counted_ns),
                    int(t.other_blocks),
                    ms_cell(t.other_ns),
                ]
            })
            .collect();
        table(
            out,
            "wait-thread-table",
            "Per thread",
            &[
                "thread",
                "tid",
                "futex waits",
                "futex (ms)",
                "longest (ms)",
                "counted as lock waits (ms)",
                "other blocks",
                "other blocks (ms)",
            ],
            &[1, 2, 3, 4, 5, 6, 7],
            rows,
            max_rows,
        );
    }
    blame(out, r, max_rows);
    if !r.kernel_locks.is_empty() {
        let rows = r
            .kernel_locks
            .iter()
            .map(|k| {
                vec![
                    text(&k.lock),
                    text(&k.mode),
                    text(&k.taker),
                    text(k.site.clone().unwrap_or_else(|| "?".into())),
                    int(u64::from(k.pid)),
                    int(k.waits),
                    ms_cell(k.total_ns),
                    ms_cell(k.max_ns),
                ]
            })
            .collect();
        table(
            out,
            "kernel-lock-table",
            "Kernel locks the program slept on, with its frame that entered the kernel",
            &[
                "kernel lock",
                "mode",
                "taken in",
                "the program entered the kernel at",
                "pid",
                "waits",
                "total (ms)",
                "longest (ms)",
            ],
            &[4, 5, 6, 7],
            rows,
            max_rows,
        );
    }
    if !r.reasons.is_empty() {
        let rows = r
            .reasons
            .iter()
            .map(|b| vec![text(&b.reason), int(b.blocks), ms_cell(b.total_ns)])
            .collect();
        table(
            out,
            "block-reason-table",
            "Other blocks, by the kernel function the scheduler named",
            &["kernel function", "blocks", "total (ms)"],
            &[1, 2],
            rows,
            max_rows,
        );
    }
    out.push_str("</section>\n");
}

/// What ended the futex waits, who made whom wait (waiter's frame → waker's frame) and the
/// critical sections charged with the waits they ended, each waiter counted (Go's mutex
/// profile), from the wakes paired with the waits.
fn blame(out: &mut String, r: &analysis::waits::WaitReport, max_rows: usize) {
    if !r.wakes_recorded {
        missing(
            out,
            "The program's wakes were not recorded (a run from before them, or sched_waking could not be opened): who made whom wait is not known.",
        );
        return;
    }
    let b = &r.woken_by;
    let ended = [
        ("a futex wake by a thread of the program", &b.futex_wake),
        ("a timer (a timed wait's timeout)", &b.timer),
        ("an interrupt", &b.interrupt),
        (
            "the program by another path (a signal, a thread's exit)",
            &b.other_path,
        ),
        ("a task outside the program", &b.other_task),
        ("not traced", &b.unknown),
    ];
    let rows = ended
        .iter()
        .filter(|(_, c)| c.waits > 0)
        .map(|(what, c)| vec![text(*what), int(c.waits), ms_cell(c.total_ns)])
        .collect::<Vec<_>>();
    if !rows.is_empty() {
        table(
            out,
            "woken-by-table",
            "What ended the futex waits",
            &["woken by", "waits", "total (ms)"],
            &[1, 2],
            rows,
            max_rows,
        );
    }
    let site = |s: &Option<String>| text(s.clone().unwrap_or_else(|| "?".into()));
    if !r.blame.is_empty() {
        let rows = r
            .blame
            .iter()
            .map(|p| {
                vec![
                    site(&p.waiter_site),
                    text(p.waiter_kind.map_or_else(String::new, |k| k.to_string())),
                    site(&p.waker_site),
                    int(p.waits),
                    ms_cell(p.total_ns),
                    ms_cell(p.max_ns),
                    int(p.probe_counted),
                ]
            })
            .collect();
        table(
            out,
            "blame-table",
            "Who made whom wait: the waiter's frame, and the waker's (where the holder's critical section ended)",
            &[
                "waited at",
                "kind",
                "woken from",
                "waits",
                "total (ms)",
                "longest (ms)",
                "of them counted by the lock probe",
            ],
            &[3, 4, 5, 6],
            rows,
            max_rows,
        );
    }
    if !r.holders.is_empty() {
        let rows = r
            .holders
            .iter()
            .map(|h| {
                vec![
                    site(&h.waker_site),
                    int(h.waits),
                    ms_cell(h.total_ns),
                    ms_cell(h.max_ns),
                    int(h.wakers),
                    int(h.waiters),
                ]
            })
            .collect();
        table(
            out,
            "holder-table",
            "Critical sections by the wait they caused (each waiter counted, as Go's mutex profile)",
            &[
                "critical section ended at",
                "waits ended",
                "wait caused (ms)",
                "longest (ms)",
                "waking threads",
                "waiting threads",
            ],
            &[1, 2, 3, 4, 5],
            rows,
            max_rows,
        );
    }
}

/// A run whose blocks have no end (no sched tracepoints): counts per futex word, no times.
fn untimed(out: &mut String, w: &WaitsPage<'_>, max_rows: usize) {
    let r = w.report;
    let words: Vec<_> = r.addresses.iter().filter(|a| a.unmeasured > 0).collect();
    let _ = writeln!(
        out,
        "<p class=\"note\" id=\"waits-summary\">{} block(s) of the program's threads recorded, {} of them futex waits on {} futex word(s); how long they lasted is not known: the sched tracepoints did not record the threads' switches back in (record with sampling on, not --interval 0, as root).</p>",
        r.unmeasured,
        r.futex_unmeasured,
        words.len()
    );
    if words.is_empty() {
        return;
    }
    let rows = words
        .iter()
        .map(|a| {
            vec![
                text(crate::waits::word_label(w.names, a.pid, a.uaddr)),
                int(a.unmeasured),
            ]
        })
        .collect();
    table(
        out,
        "futex-word-table",
        "Per futex word",
        &["futex word", "waits (not timed)"],
        &[1],
        rows,
        max_rows,
    );
}

/// `part` of `whole` in per cent, sorted by the fraction.
fn share(part: u64, whole: u64) -> Cell {
    if whole == 0 {
        return text("n/a");
    }
    let f = part as f64 / whole as f64;
    super::num(f, format!("{:.1} %", f * 100.0))
}

/// The futex word waited on longest, in words with its time and where, for the overview's
/// findings; `None` without timed futex waits.
pub(super) fn headline(w: &WaitsPage<'_>) -> Option<String> {
    if !w.ends_traced {
        return None;
    }
    let top = w
        .report
        .addresses
        .iter()
        .filter(|a| a.total_ns > 0)
        .max_by_key(|a| a.total_ns)?;
    let site = top
        .sites
        .iter()
        .filter(|st| st.kind.is_some())
        .max_by_key(|st| st.total_ns)
        .map_or(String::new(), |st| {
            format!(
                ", most as {} waits at {}",
                st.kind.map_or_else(String::new, |k| k.to_string()),
                st.site.as_deref().unwrap_or("?")
            )
        });
    Some(format!(
        "Futex waits (of any runtime, from the scheduler): the longest on {}, {} ms in {} wait(s) by {} thread(s){site}; {} ms in {} futex wait(s) in all.",
        crate::waits::word_label(w.names, top.pid, top.uaddr),
        super::ms(top.total_ns),
        top.waits,
        top.threads.len(),
        super::ms(w.report.futex_ns),
        w.report.futex_waits
    ))
}
