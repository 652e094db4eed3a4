//! The "Kernel locks" table of the waits section (issue 22, slice 5): the kernel locks the
//! program's threads slept on (`mmap_lock`, `i_rwsem`, ...), the kernel function that took
//! each, and the program's own frame that entered the kernel; and their share for the activity
//! line.
//!
//! Fits 80 columns: the lock and its taker share a cell on two lines, as do the program's
//! function and its file:line; long names are cut with `…` (the JSON has them whole).

use crate::table::new_table;
use analysis::waits::KernelLockWaits;
use std::fmt::Write;

/// The longest line of the lock cell and of the program's frame cell: with the three number
/// columns (18) and the borders (19), 80 columns.
const LOCK_CELL: usize = 22;
const SITE_CELL: usize = 21;

/// `s` cut to `max` characters, the cut marked.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The end of `s` kept when it is too long (a file:line matters more than the function's
/// path before it).
fn cut_front(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - max.saturating_sub(1)));
    out
}

/// The lock cell: the name and how it was taken, then the function that took it.
fn lock_cell(r: &KernelLockWaits) -> String {
    // A lock named after its taker (`rwsem in FUNC`) shows its kind only: the taker follows.
    let name = match r.lock.split_once(" in ") {
        Some((kind, _)) => kind,
        None => r.lock.as_str(),
    };
    let how = match r.mode.as_str() {
        "rwsem read" => " (read)",
        "rwsem write" | "vma write" => " (write)",
        _ => "",
    };
    format!(
        "{}\n{}",
        cut(&format!("{name}{how}"), LOCK_CELL),
        cut(&r.taker, LOCK_CELL)
    )
}

/// The program's frame cell: `function (file:line)` on two lines; `?` when the block had no
/// user stack or none of its frames is the program's (contend's own probe mapping its ring, a
/// stack that did not unwind).
fn site_cell(site: Option<&str>) -> String {
    let Some(site) = site else {
        return "?".into();
    };
    match site.rsplit_once(" (") {
        Some((function, at)) => format!(
            "{}\n({}",
            cut(function, SITE_CELL),
            cut_front(at, SITE_CELL - 1)
        ),
        None => cut(site, SITE_CELL),
    }
}

fn s(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// The table, or nothing when no block waited for a kernel lock. `top` rows at most.
pub fn render(rows: &[KernelLockWaits], top: usize) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let waits: u64 = rows.iter().map(|r| r.waits).sum();
    let total: u64 = rows.iter().map(|r| r.total_ns).sum();
    let _ = writeln!(
        out,
        "\nKernel locks slept on (named from the kernel call chain; part of the other blocks): {waits} wait(s), {} s",
        s(total)
    );
    let mut t = new_table(
        &[
            "kernel lock/taken in",
            "program's call",
            "waits",
            "total s",
            "max ms",
        ],
        &[2, 3, 4],
    );
    for r in rows.iter().take(top) {
        let count = if r.unmeasured > 0 {
            format!("{}+{}?", r.waits, r.unmeasured)
        } else {
            r.waits.to_string()
        };
        t.add_row(vec![
            lock_cell(r),
            site_cell(r.site.as_deref()),
            count,
            s(r.total_ns),
            ms(r.max_ns),
        ]);
    }
    let _ = writeln!(out, "{t}");
    if rows.len() > top {
        let _ = writeln!(out, "  ({} more rows not shown)", rows.len() - top);
    }
    if rows.iter().any(|r| r.unmeasured > 0) {
        let _ = writeln!(
            out,
            "  N+M?: M more waits whose end (the thread's switch back in) was not traced."
        );
    }
    out
}

/// The kernel locks' blocked time for the activity line, by lock name, most first: the names
/// of `trace::kernel_lock::KNOWN`, the others summed as "other kernel locks"; three at most.
pub fn activity_share(rows: &[KernelLockWaits]) -> [Option<(&'static str, u64)>; 3] {
    let mut shares: Vec<(&'static str, u64)> = Vec::new();
    let mut other = 0u64;
    for (name, ns) in analysis::waits::blocked_by_lock(rows) {
        match trace::kernel_lock::KNOWN.iter().find(|k| **k == name) {
            Some(k) => shares.push((k, ns)),
            None => other += ns,
        }
    }
    if other > 0 {
        shares.push(("other kernel locks", other));
    }
    shares.retain(|(_, ns)| *ns > 0);
    shares.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut out = [None; 3];
    for (slot, share) in out.iter_mut().zip(shares) {
        *slot = Some(share);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(lock: &str, mode: &str, taker: &str, site: Option<&str>, total: u64) -> KernelLockWaits {
        KernelLockWaits {
            pid: 1,
            lock: lock.into(),
            mode: mode.into(),
            taker: taker.into(),
            syscall: None,
            site: site.map(String::from),
            waits: 3,
            total_ns: total,
            max_ns: total / 2,
            runqueue_ns: total / 10,
            unmeasured: 0,
            threads: Default::default(),
        }
    }

    #[test]
    fn the_table_names_the_lock_its_taker_and_the_line_within_80_columns() {
        let rows = [
            row(
                "mmap_lock",
                "rwsem read",
                "lock_mm_and_find_vma",
                Some("hammer (mmap_lock.c:97)"),
                200_000_000,
            ),
            row(
                "rwsem in filemap_fault_with_a_very_long_name_indeed",
                "rwsem read",
                "filemap_fault_with_a_very_long_name_indeed",
                Some("my_crate::module::submodule::function::{{closure}} (some/long/path/file.rs:1234)"),
                1_000_000,
            ),
            KernelLockWaits {
                unmeasured: 2,
                ..row("i_rwsem", "rwsem write", "generic_file_write_iter", None, 0)
            },
        ];
        let text = render(&rows, 10);
        for l in text.lines().skip(2) {
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l}\n{text}",
                l.chars().count()
            );
        }
        assert!(text.contains("mmap_lock (read)"), "{text}");
        assert!(text.contains("│ lock_mm_and_find_vma "), "{text}");
        assert!(text.contains("(mmap_lock.c:97)"), "{text}");
        assert!(text.contains("0.200"), "{text}");
        assert!(text.contains("file.rs:1234)"), "the line is kept: {text}");
        assert!(text.contains("3+2?"), "{text}");
        assert!(text.contains("│ i_rwsem (write)          ?  "), "{text}");
        assert!(render(&[], 10).is_empty());
    }

    #[test]
    fn the_activity_share_names_known_locks_and_sums_the_others() {
        let rows = [
            row("mmap_lock", "rwsem write", "__vm_munmap", None, 100),
            row("mmap_lock", "rwsem read", "lock_mm_and_find_vma", None, 50),
            row("rwsem in x", "rwsem read", "x", None, 30),
            row("mutex in y", "mutex", "y", None, 20),
            row("vma_lock", "vma write", "__split_vma", None, 10),
        ];
        // Blocked time: total minus the run queue (a tenth here).
        assert_eq!(
            activity_share(&rows),
            [
                Some(("mmap_lock", 90 + 45)),
                Some(("other kernel locks", 27 + 18)),
                Some(("vma_lock", 9)),
            ]
        );
        assert_eq!(activity_share(&[]), [None; 3]);
    }
}
