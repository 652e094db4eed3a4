//! The waits section of `contend report` (issue 22): the program's blocked futex waits, of any
//! runtime, per futex word (named as the global it lies in) and per thread; the futex waits
//! the lock probe already counted; and the other blocks by the kernel function that blocked.
//! With user stacks (slice 2): each futex word's waits by kind (lock, condition, ...) and by
//! the program's own frame that waited.
//! Blame (slice 3): what ended the waits; who made whom wait (waiter site → waker site); and
//! the critical sections charged with the wait they caused (Go's mutex profile).

pub mod runtime;

use crate::table::new_table;
use analysis::waits::WaitReport;
use std::collections::HashMap;
use std::fmt::Write;

fn s(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// How many rows of each table, and whether the waits' ends were traced.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    pub top: usize,
    /// The sched tracepoints recorded the threads' switches in: without them no wait has a
    /// length, and the section counts waits instead of printing zeros.
    pub ends_traced: bool,
}

/// The section when no wait has a length: counts per futex word, no times.
fn render_untimed(
    r: &WaitReport,
    names: &HashMap<(u32, u64), String>,
    opts: RenderOptions,
) -> String {
    let mut out = String::new();
    let words = r.addresses.iter().filter(|a| a.unmeasured > 0).count();
    let _ = writeln!(
        out,
        "Waits: {} block(s) of the program's threads recorded, {} of them futex waits on {words} futex word(s); how long they lasted is not known: the sched tracepoints did not record the threads' switches back in (record with sampling on, not --interval 0, as root)",
        r.unmeasured, r.futex_unmeasured
    );
    if words > 0 {
        out.push('\n');
        let mut t = new_table(&["futex word", "waits (not timed)"], &[1]);
        for a in r
            .addresses
            .iter()
            .filter(|a| a.unmeasured > 0)
            .take(opts.top)
        {
            t.add_row(vec![
                word_label(names, a.pid, a.uaddr),
                a.unmeasured.to_string(),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    out
}

/// The futex word's label: its global's name and address, or the address.
pub fn word_label(names: &HashMap<(u32, u64), String>, pid: u32, uaddr: u64) -> String {
    match names.get(&(pid, uaddr)) {
        Some(n) => format!("{n} ({uaddr:#x})"),
        None => format!("{uaddr:#x}"),
    }
}

/// The section as text.
pub fn render(
    r: &WaitReport,
    names: &HashMap<(u32, u64), String>,
    thread_names: &HashMap<u32, String>,
    opts: RenderOptions,
) -> String {
    if !opts.ends_traced {
        return render_untimed(r, names, opts);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Waits (every block of the program's threads, from the scheduler): {} futex wait(s), {} s off CPU; {} other block(s), {} s",
        r.futex_waits,
        s(r.futex_ns),
        r.other_blocks,
        s(r.other_ns)
    );
    if r.probe_counted > 0 {
        let _ = writeln!(
            out,
            "  {} futex wait(s), {} s, were inside pthread calls the lock probe recorded: already counted as lock, condition or barrier waits (above), not again here.",
            r.probe_counted,
            s(r.probe_counted_ns)
        );
    }
    if r.unmeasured > 0 {
        let _ = writeln!(
            out,
            "  {} block(s) have no length: the thread's switch back in was not traced.",
            r.unmeasured
        );
    }
    if !r.kinds.is_empty() {
        let kinds: Vec<String> = r
            .kinds
            .iter()
            .map(|k| format!("{} {} wait(s) {} s", k.kind, k.waits, s(k.total_ns)))
            .collect();
        let _ = writeln!(
            out,
            "  By kind (from the user stacks): {}.",
            kinds.join("; ")
        );
    }
    if r.without_stack > 0 {
        let _ = writeln!(
            out,
            "  {} futex wait(s) have no user stack (recorded past the stack budget, --stack-budget; or the stack copy was empty or unreadable): their kind and the program's frame are not known.",
            r.without_stack
        );
    }
    let shown: Vec<_> = r.addresses.iter().filter(|a| a.waits > 0).collect();
    if !shown.is_empty() {
        out.push('\n');
        let mut t = new_table(
            &[
                "futex word",
                "waits",
                "total (s)",
                "max (ms)",
                "run queue (ms)",
                "threads",
            ],
            &[1, 2, 3, 4, 5],
        );
        for a in shown.iter().take(opts.top) {
            t.add_row(vec![
                word_label(names, a.pid, a.uaddr),
                a.waits.to_string(),
                s(a.total_ns),
                ms(a.max_ns),
                ms(a.runqueue_ns),
                a.threads.len().to_string(),
            ]);
        }
        let _ = writeln!(out, "{t}");
        if shown.len() > opts.top {
            let _ = writeln!(
                out,
                "  ({} more futex words not shown)",
                shown.len() - opts.top
            );
        }
    }
    let with_sites: Vec<_> = shown
        .iter()
        .filter(|a| a.sites.iter().any(|st| st.kind.is_some()))
        .take(opts.top)
        .collect();
    if !with_sites.is_empty() {
        out.push('\n');
        let mut t = new_table(
            &[
                "futex word",
                "kind",
                "the program waited at",
                "waits",
                "total (s)",
                "max (ms)",
            ],
            &[3, 4, 5],
        );
        for a in with_sites {
            for st in a.sites.iter().take(opts.top) {
                t.add_row(vec![
                    word_label(names, a.pid, a.uaddr),
                    st.kind.map_or("(no stack)".into(), |k| k.to_string()),
                    st.site.clone().unwrap_or_else(|| "?".into()),
                    st.waits.to_string(),
                    s(st.total_ns),
                    ms(st.max_ns),
                ]);
            }
        }
        let _ = writeln!(out, "{t}");
    }
    render_blame(&mut out, r, opts);
    let threads: Vec<_> = r
        .threads
        .iter()
        .filter(|t| t.futex_waits + t.other_blocks + t.probe_counted > 0)
        .collect();
    if !threads.is_empty() {
        out.push('\n');
        let mut t = new_table(
            &[
                "thread",
                "futex waits",
                "futex (s)",
                "max (ms)",
                "counted as lock waits (s)",
                "other blocks (s)",
            ],
            &[1, 2, 3, 4, 5],
        );
        for th in &threads {
            let name = thread_names
                .get(&th.tid)
                .map_or(String::new(), |n| format!(" {n}"));
            t.add_row(vec![
                format!("{}{name}", th.tid),
                th.futex_waits.to_string(),
                s(th.futex_ns),
                ms(th.futex_max_ns),
                s(th.probe_counted_ns),
                s(th.other_ns),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    if !r.reasons.is_empty() {
        out.push('\n');
        let mut t = new_table(
            &["other blocks, by kernel function", "blocks", "total (s)"],
            &[1, 2],
        );
        for w in r.reasons.iter().take(opts.top) {
            t.add_row(vec![w.reason.clone(), w.blocks.to_string(), s(w.total_ns)]);
        }
        let _ = writeln!(out, "{t}");
    }
    out.push_str(&crate::kernel_locks::render(&r.kernel_locks, opts.top));
    out
}

/// A site's label in the blame tables.
fn site_label(site: &Option<String>) -> String {
    site.clone()
        .unwrap_or_else(|| "? (no stack or no program frame)".into())
}

/// What ended the waits, who made whom wait, and the critical sections charged.
fn render_blame(out: &mut String, r: &WaitReport, opts: RenderOptions) {
    let measured = r.futex_waits + r.probe_counted;
    if measured == 0 {
        return;
    }
    if !r.wakes_recorded {
        let _ = writeln!(
            out,
            "\n  Who woke whom: not recorded (wakes not traced in this run): no wait is charged to a holder."
        );
        return;
    }
    let w = &r.woken_by;
    let parts: Vec<String> = [
        ("a futex wake by the program", w.futex_wake),
        ("a timer", w.timer),
        ("an interrupt", w.interrupt),
        ("the program by another path", w.other_path),
        ("a task outside the program", w.other_task),
        ("not traced", w.unknown),
    ]
    .iter()
    .filter(|(_, c)| c.waits > 0)
    .map(|(what, c)| format!("{what} {} ({} s)", c.waits, s(c.total_ns)))
    .collect();
    let _ = writeln!(
        out,
        "\n  Woken by: {} (of {measured} futex wait(s), those the probe counted included).",
        parts.join("; ")
    );
    if !r.blame.is_empty() {
        out.push('\n');
        let _ = writeln!(
            out,
            "Who made whom wait (the waiter's line, and the waker's: where the holder's critical section ended):"
        );
        // The times first: the sites are long and wrap, the figures never drop.
        let mut t = new_table(&["total (s)", "waits", "waiter", "woken at"], &[0, 1]);
        t.keep(&[1, 2, 3]);
        for p in r.blame.iter().take(opts.top) {
            let kind = p.waiter_kind.map_or(String::new(), |k| format!("{k} at "));
            t.add_row(vec![
                s(p.total_ns),
                p.waits.to_string(),
                format!("{kind}{}", site_label(&p.waiter_site)),
                site_label(&p.waker_site),
            ]);
        }
        let _ = writeln!(out, "{t}");
        let probe: u64 = r.blame.iter().map(|p| p.probe_counted).sum();
        if probe > 0 {
            let _ = writeln!(
                out,
                "  {probe} of these wait(s) lay inside pthread calls the lock probe recorded: counted in its lock section, shown here for their waker."
            );
        }
    }
    if !r.holders.is_empty() {
        out.push('\n');
        let _ = writeln!(
            out,
            "Critical sections by wait caused (each waiter counted, as Go's mutex profile):"
        );
        let mut t = new_table(
            &[
                "charged (s)",
                "waits",
                "waiters",
                "critical section ended at",
            ],
            &[0, 1, 2],
        );
        t.keep(&[1, 2, 3]);
        for h in r.holders.iter().take(opts.top) {
            t.add_row(vec![
                s(h.total_ns),
                h.waits.to_string(),
                h.waiters.to_string(),
                site_label(&h.waker_site),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
}

/// The measured futex waits with stacks as profile samples (`contentions`, `delay`), one per
/// (futex word, stack): the stack's frames, under a root frame naming the word and the kind,
/// so that a lock profile (`report --pprof`, `--folded`) carries them beside the probe's.
pub fn profile_samples(
    r: &WaitReport,
    stacks: &[analysis::waits::WaitStack],
    names: &HashMap<(u32, u64), String>,
) -> Vec<export::pprof::Sample> {
    r.stack_waits
        .iter()
        .filter_map(|sw| {
            let st = stacks.get(sw.stack as usize)?;
            // pprof reads parentheses in a function name as C++ arguments: the bare name.
            let word = names
                .get(&(sw.pid, sw.uaddr))
                .cloned()
                .unwrap_or_else(|| format!("{:#x}", sw.uaddr));
            let mut stack: Vec<export::pprof::Frame> = st
                .frames
                .iter()
                .map(|f| export::pprof::Frame {
                    function: f.function.clone(),
                    file: f.file.clone(),
                    line: f.line,
                    address: f.address,
                    module: f.module.clone(),
                })
                .collect();
            stack.push(export::pprof::Frame {
                function: format!("[futex wait {word} {}]", st.kind),
                ..Default::default()
            });
            Some(export::pprof::Sample {
                stack,
                values: vec![
                    sw.waits.min(i64::MAX as u64) as i64,
                    sw.total_ns.min(i64::MAX as u64) as i64,
                ],
                labels: vec![
                    ("futex_word".into(), word),
                    ("kind".into(), st.kind.to_string()),
                ],
            })
        })
        .collect()
}

/// The paired futex waits as a Perfetto timeline: on the waiter's thread the wait ("futex
/// wait", from its block to its switch in) with, inside it, the time from its wake-up to the
/// switch in ("woken"); on the waker's thread a zero-length "wakes" slice where it woke it;
/// and a flow from the waker's slice to the waiter's "woken" slice. The "woken" slice starts
/// 1 ns after the wake, so the trace processor sees the flow's source first.
pub fn timeline(
    r: &WaitReport,
    stacks: &[analysis::waits::WaitStack],
    thread_names: &HashMap<u32, String>,
    process_name: &str,
) -> export::perfetto::Timeline {
    use export::perfetto::{ArgValue, Flow, ProcessTrack, Slice, ThreadTrack, Timeline};
    use std::collections::BTreeMap;
    let site = |i: Option<u32>| {
        i.and_then(|i| stacks.get(i as usize))
            .and_then(|s| s.site.clone())
            .unwrap_or_else(|| "?".into())
    };
    let mut threads: BTreeMap<(u32, u32), Vec<Slice>> = BTreeMap::new();
    let mut flows = Vec::new();
    let mut id = 0u64;
    let mut next = || {
        id += 1;
        id
    };
    for p in &r.paired {
        let (waker_site, waiter_site) = (site(p.waker_stack), site(p.waiter_stack));
        let args = vec![
            ("waiter".to_string(), ArgValue::Uint(u64::from(p.waiter))),
            (
                "waiter_site".to_string(),
                ArgValue::Str(waiter_site.clone()),
            ),
            ("waker".to_string(), ArgValue::Uint(u64::from(p.waker))),
            ("waker_site".to_string(), ArgValue::Str(waker_site.clone())),
        ];
        let wake = next();
        threads.entry((p.pid, p.waker)).or_default().push(Slice {
            id: wake,
            start_ns: p.woken_at,
            dur_ns: 0,
            name: format!("wakes {} ({waker_site})", p.waiter),
            category: "futex wake".into(),
            args: args.clone(),
        });
        let waiter = threads.entry((p.pid, p.waiter)).or_default();
        waiter.push(Slice {
            id: next(),
            start_ns: p.start,
            dur_ns: p.end.saturating_sub(p.start),
            name: format!("futex wait ({waiter_site})"),
            category: "futex wait".into(),
            args: args.clone(),
        });
        let woken_from = (p.woken_at + 1).clamp(p.start, p.end);
        let woken = next();
        waiter.push(Slice {
            id: woken,
            start_ns: woken_from,
            dur_ns: p.end - woken_from,
            name: format!("woken by {} ({waker_site})", p.waker),
            category: "futex wait".into(),
            args,
        });
        flows.push(Flow {
            from_slice: wake,
            to_slice: woken,
        });
    }
    let mut processes: BTreeMap<u32, ProcessTrack> = BTreeMap::new();
    for ((pid, tid), slices) in threads {
        processes
            .entry(pid)
            .or_insert_with(|| ProcessTrack {
                pid,
                name: process_name.to_string(),
                ..Default::default()
            })
            .threads
            .push(ThreadTrack {
                tid,
                name: thread_names.get(&tid).cloned().unwrap_or_default(),
                slices,
                ..Default::default()
            });
    }
    Timeline {
        processes: processes.into_values().collect(),
        flows,
    }
}

/// The section for a run that asked for waits and could not record them.
pub fn render_not_measured(why: &str) -> String {
    format!("Waits: not measured ({why})\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::waits::{waits_with_stacks, BlockIn, StackIn, ThreadBlocks, WaitKind, WaitStack};
    use trace::offcpu::FutexArgs;
    use trace::sched::{State, StateChange};

    #[test]
    fn the_section_names_the_word_and_says_what_the_probe_counted() {
        let threads = [ThreadBlocks {
            pid: 1,
            tid: 10,
            blocks: vec![
                BlockIn {
                    ts: 1_000_000,
                    reason: None,
                    futex: Some(FutexArgs {
                        uaddr: 0x5000,
                        op: 0x80,
                    }),
                    stack: StackIn::At(0),
                },
                BlockIn {
                    ts: 5_000_000,
                    reason: None,
                    futex: Some(FutexArgs {
                        uaddr: 0x6000,
                        op: 0x80,
                    }),
                    stack: StackIn::Missing,
                },
            ],
        }];
        let run = |ts| StateChange {
            ts,
            state: State::Running,
            cpu: None,
            waker: 0,
        };
        let states = [(10, vec![run(3_000_000), run(6_000_000)])];
        let probe = [analysis::waits::ProbeWait {
            tid: 10,
            start: 4_900_000,
            end: 6_100_000,
            obj: 0x6000,
            size: 40,
        }];
        let stacks = [WaitStack {
            kind: WaitKind::Lock,
            site: Some("m::main::{{closure}} (m.rs:27)".into()),
            frames: Vec::new(),
            unknown: false,
        }];
        let r = waits_with_stacks(&threads, &states, &probe, &stacks);
        let names = HashMap::from([((1, 0x5000), "HOT".to_string())]);
        let opts = RenderOptions {
            top: 10,
            ends_traced: true,
        };
        let text = render(&r, &names, &HashMap::new(), opts);
        assert!(text.contains("1 futex wait(s), 0.002 s off CPU"), "{text}");
        assert!(text.contains("HOT (0x5000)"), "{text}");
        assert!(
            text.contains("1 futex wait(s), 0.001 s, were inside pthread calls"),
            "{text}"
        );
        assert!(
            !text.contains("0x6000"),
            "the probe's wait has no row: {text}"
        );
        assert!(
            text.contains("By kind (from the user stacks): lock 1 wait(s) 0.002 s"),
            "{text}"
        );
        assert!(text.contains("m::main::{{closure}} (m.rs:27)"), "{text}");
        assert!(
            text.contains("1 futex wait(s) have no user stack"),
            "{text}"
        );
        let samples = profile_samples(&r, &stacks, &names);
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].values, [1, 2_000_000]);
        assert_eq!(
            samples[0].stack.last().unwrap().function,
            "[futex wait HOT lock]"
        );
    }

    #[test]
    fn the_blame_tables_name_the_waker_and_charge_it() {
        use analysis::waits::{waits_and_blame, WakingIn};
        use trace::offcpu::{WakeFutex, WakeHow};
        let futex = Some(FutexArgs {
            uaddr: 0x5000,
            op: 0x80,
        });
        let threads: Vec<ThreadBlocks> = [10, 11]
            .iter()
            .map(|&tid| ThreadBlocks {
                pid: 1,
                tid,
                blocks: vec![BlockIn {
                    ts: 1_000_000,
                    reason: None,
                    futex,
                    stack: StackIn::At(0),
                }],
            })
            .collect();
        let wakings: Vec<WakingIn> = [10, 11]
            .iter()
            .map(|&woken| WakingIn {
                pid: 1,
                tid: 12,
                ts: 3_000_000,
                woken,
                how: WakeHow::Futex,
                futex: Some(WakeFutex {
                    uaddr: 0x5000,
                    op: 0x81,
                    uaddr2: None,
                }),
                stack: StackIn::At(1),
            })
            .collect();
        let run = |ts| StateChange {
            ts,
            state: State::Running,
            cpu: None,
            waker: 0,
        };
        let states = [(10, vec![run(3_000_100)]), (11, vec![run(3_000_200)])];
        let stacks = [
            WaitStack {
                kind: WaitKind::Condition,
                site: Some("m::wait (m.rs:5)".into()),
                frames: Vec::new(),
                unknown: false,
            },
            WaitStack {
                kind: WaitKind::Unknown,
                site: Some("m::publish (m.rs:9)".into()),
                frames: Vec::new(),
                unknown: false,
            },
        ];
        let r = waits_and_blame(&threads, &wakings, &states, &[], &stacks);
        let opts = RenderOptions {
            top: 10,
            ends_traced: true,
        };
        let text = render(&r, &HashMap::new(), &HashMap::new(), opts);
        assert!(
            text.contains("Woken by: a futex wake by the program 2 (0.004 s)"),
            "{text}"
        );
        assert!(text.contains("condition at m::wait (m.rs:5)"), "{text}");
        // One notify woke both: charged both waits, 2.0001 + 2.0002 ms.
        let row = text
            .lines()
            .find(|l| l.contains("m::publish (m.rs:9)") && !l.contains("condition"))
            .unwrap_or_else(|| panic!("{text}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[1..4], ["0.004", "2", "2"], "{row}");
        let without = waits_and_blame(&threads, &[], &states, &[], &stacks);
        let text = render(&without, &HashMap::new(), &HashMap::new(), opts);
        assert!(text.contains("Who woke whom: not recorded"), "{text}");
    }

    #[test]
    fn the_timeline_has_a_flow_from_the_waker_to_the_waiter() {
        use analysis::waits::PairedWait;
        let r = WaitReport {
            paired: vec![PairedWait {
                pid: 1,
                waiter: 10,
                start: 1_000,
                end: 5_000,
                waker: 11,
                woken_at: 4_000,
                waiter_stack: Some(0),
                waker_stack: None,
            }],
            ..WaitReport::default()
        };
        let stacks = [WaitStack {
            kind: WaitKind::Lock,
            site: Some("m::work (m.rs:10)".into()),
            frames: Vec::new(),
            unknown: false,
        }];
        let t = timeline(&r, &stacks, &HashMap::new(), "m");
        assert_eq!(t.flows.len(), 1);
        let slice = |id: u64| {
            t.processes[0]
                .threads
                .iter()
                .find_map(|th| th.slices.iter().find(|s| s.id == id).map(|s| (th.tid, s)))
                .unwrap()
        };
        let (from_tid, from) = slice(t.flows[0].from_slice);
        let (to_tid, to) = slice(t.flows[0].to_slice);
        assert_eq!((from_tid, from.start_ns, from.dur_ns), (11, 4_000, 0));
        assert_eq!((to_tid, to.start_ns, to.dur_ns), (10, 4_001, 999));
        assert!(to.name.starts_with("woken by 11"), "{}", to.name);
        // The writer keeps the flow: its source begins first.
        let mut out = Vec::new();
        let written = export::perfetto::write(&t, &mut out).unwrap();
        assert_eq!((written.flows, written.flows_skipped), (1, 0));
        assert_eq!(written.slices, 3);
    }
}
