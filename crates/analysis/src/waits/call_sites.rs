//! Locks named by their call site (design §3.2): parking_lot parks a waiting thread on a word
//! of the thread's own (its `ThreadData`'s futex), so the per-word table shows one row per
//! waiting thread, none of them the lock. Those waits are summed here per (process, kind,
//! the program's frame that waited) over every word, which is how the lock is named.

use super::{keyed_by_call_site, WaitKind, WaitReport, WaitStack};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Measured futex waits of a lock named by its call site.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CallSiteWaits {
    pub pid: u32,
    pub kind: WaitKind,
    /// The program's frame that waited, `function (file:line)`; absent when none was found.
    pub site: Option<String>,
    pub waits: u64,
    /// Time off CPU (blocked, then on a run queue), ns.
    pub total_ns: u64,
    /// The futex words the waits were on (one per waiting thread, for parking_lot).
    pub words: u64,
}

/// The measured waits of `r` whose stacks (`stacks`, as given to
/// [`super::waits_with_stacks`]) name their lock by call site, per (pid, kind, site), most
/// time first.
pub fn call_sites(r: &WaitReport, stacks: &[WaitStack]) -> Vec<CallSiteWaits> {
    type Key = (u32, WaitKind, Option<String>);
    let mut out: BTreeMap<Key, (CallSiteWaits, BTreeSet<u64>)> = BTreeMap::new();
    for sw in &r.stack_waits {
        let Some(st) = stacks.get(sw.stack as usize) else {
            continue;
        };
        if !keyed_by_call_site(st.frames.iter().map(|f| f.function.as_str())) {
            continue;
        }
        let key = (sw.pid, st.kind, st.site.clone());
        let (c, words) = out.entry(key).or_insert_with(|| {
            (
                CallSiteWaits {
                    pid: sw.pid,
                    kind: st.kind,
                    site: st.site.clone(),
                    ..CallSiteWaits::default()
                },
                BTreeSet::new(),
            )
        });
        c.waits += sw.waits;
        c.total_ns += sw.total_ns;
        words.insert(sw.uaddr);
    }
    let mut v: Vec<CallSiteWaits> = out
        .into_values()
        .map(|(mut c, words)| {
            c.words = words.len() as u64;
            c
        })
        .collect();
    v.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.site.cmp(&b.site))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waits::{StackWaits, WaitFrame};

    fn stack(kind: WaitKind, site: &str, frames: &[&str]) -> WaitStack {
        WaitStack {
            kind,
            site: Some(site.into()),
            frames: frames
                .iter()
                .map(|f| WaitFrame {
                    function: f.to_string(),
                    ..WaitFrame::default()
                })
                .collect(),
            unknown: false,
        }
    }

    #[test]
    fn parking_lot_waits_on_each_threads_word_are_one_lock_at_its_call_site() {
        let parking = [
            "<parking_lot_core::thread_parker::imp::ThreadParker>::futex_wait",
            "parking_lot_core::parking_lot::park",
            "<parking_lot::raw_mutex::RawMutex>::lock_slow",
            "app::work",
        ];
        let stacks = [
            stack(WaitKind::Lock, "app::work (app.rs:9)", &parking),
            stack(
                WaitKind::Lock,
                "app::main (app.rs:3)",
                &[
                    "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
                    "app::main",
                ],
            ),
        ];
        let sw = |uaddr, stack, waits, total_ns| StackWaits {
            pid: 7,
            uaddr,
            stack,
            waits,
            total_ns,
        };
        let r = WaitReport {
            stack_waits: vec![
                sw(0x1000, 0, 3, 300),
                sw(0x2000, 0, 2, 500),
                sw(0x3000, 1, 9, 900),
            ],
            ..WaitReport::default()
        };
        let c = call_sites(&r, &stacks);
        assert_eq!(
            c,
            [CallSiteWaits {
                pid: 7,
                kind: WaitKind::Lock,
                site: Some("app::work (app.rs:9)".into()),
                waits: 5,
                total_ns: 800,
                words: 2,
            }],
            "the std Mutex is named by its word, not here"
        );
    }
}
