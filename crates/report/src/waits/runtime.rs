//! What the waits section adds for locks and runtimes that a futex word does not name: locks
//! named by their call site (parking_lot parks each waiting thread on its own word).

use crate::table::new_table;
use analysis::waits::CallSiteWaits;
use std::fmt::Write;

/// The table of locks named by call site, or nothing when there is none.
pub fn render_call_sites(sites: &[CallSiteWaits], top: usize) -> String {
    let mut out = String::new();
    if sites.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "Locks named by their call site (parking_lot and parks wait on a word of the waiting thread, not of the lock; the futex words above are those threads'):"
    );
    let mut t = new_table(
        &[
            "kind",
            "the program waited at",
            "waits",
            "total (s)",
            "words",
        ],
        &[2, 3, 4],
    );
    for c in sites.iter().take(top) {
        t.add_row(vec![
            c.kind.to_string(),
            c.site.clone().unwrap_or_else(|| "?".into()),
            c.waits.to_string(),
            format!("{:.3}", c.total_ns as f64 / 1e9),
            c.words.to_string(),
        ]);
    }
    let _ = writeln!(out, "{t}");
    if sites.len() > top {
        let _ = writeln!(out, "  ({} more call sites not shown)", sites.len() - top);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::waits::WaitKind;

    #[test]
    fn call_sites_are_a_table_and_none_is_nothing() {
        assert_eq!(render_call_sites(&[], 10), "");
        let text = render_call_sites(
            &[CallSiteWaits {
                pid: 1,
                kind: WaitKind::Lock,
                site: Some("app::work (app.rs:9)".into()),
                waits: 5,
                total_ns: 800_000_000,
                words: 4,
            }],
            10,
        );
        assert!(text.contains("Locks named by their call site"), "{text}");
        assert!(text.contains("app::work (app.rs:9)"), "{text}");
        assert!(text.contains("0.800"), "{text}");
    }
}
