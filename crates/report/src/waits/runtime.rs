//! What the waits section adds for locks and runtimes that a futex word does not name: locks
//! named by their call site (parking_lot parks each waiting thread on its own word), and
//! what is and is not seen of a Go program's or a JVM's waits.

use crate::table::new_table;
use analysis::waits::{CallSiteWaits, Runtime, RuntimeWaits, WaitKind};
use std::fmt::Write;

fn s(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

/// The kinds of a runtime's waits, `kind N wait(s) X s; ...`.
fn kinds(r: &RuntimeWaits) -> String {
    r.kinds
        .iter()
        .map(|k| format!("{} {} wait(s) {} s", k.kind, k.waits, s(k.total_ns)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One paragraph per runtime recognised: what its futex waits are, what contend does not
/// see, and where the runtime's own view is.
pub fn render_runtimes(runtimes: &[RuntimeWaits]) -> String {
    let mut out = String::new();
    for r in runtimes {
        match r.runtime {
            Runtime::Go => {
                let lock2 = r
                    .kinds
                    .iter()
                    .find(|k| k.kind == WaitKind::Lock)
                    .map_or(0, |k| k.waits);
                let _ = writeln!(
                    out,
                    "Go program (process {}, recognised by its runtime's frames): {} futex wait(s), {} s: {}.",
                    r.pid,
                    r.waits,
                    s(r.total_ns),
                    kinds(r)
                );
                let _ = writeln!(
                    out,
                    "  Not seen: goroutines waiting for a sync.Mutex, a channel or a WaitGroup park in Go's own scheduler, on no futex of theirs; none of these waits is a sync.Mutex's. What is seen: the runtime's threads (Ms) parking when they have no goroutine to run (go_park: runtime.futexsleep, notesleep){}.",
                    if lock2 > 0 {
                        ", and waits for the runtime's own lock (runtime.lock2, shown as lock)"
                    } else {
                        ""
                    }
                );
                let _ = writeln!(
                    out,
                    "  Go's own mutex profile has the sync.Mutex waits by stack: the program turns it on with runtime.SetMutexProfileFraction(N) and writes it (pprof.Lookup(\"mutex\").WriteTo, or serves net/http/pprof: `go tool pprof http://HOST:PORT/debug/pprof/mutex`). contend cannot read it from outside: it lives in the program's memory, and no environment variable or GODEBUG setting turns it on."
                );
            }
            Runtime::Jvm => {
                let _ = writeln!(
                    out,
                    "JVM (process {}, recognised by libjvm.so's frames): {} futex wait(s), {} s: {}.",
                    r.pid,
                    r.waits,
                    s(r.total_ns),
                    kinds(r)
                );
                let _ = writeln!(
                    out,
                    "  A JVM thread blocks in pthread calls on an event of its own: the libjvm.so frame above says what for (jvm_monitor: entering a contended synchronized, ObjectMonitor::enter; condition: Object.wait; jvm_park: LockSupport.park, Thread.sleep and the VM's own threads). The word is the thread's, so these waits are named by their call site."
                );
                if r.probe_counted > 0 {
                    let _ = writeln!(
                        out,
                        "  {} of them, {} s, lie inside the JVM's own pthread calls, which the lock probe recorded: the lock section's condition and lock waits in libjvm.so (os::PlatformEvent::park, os::PlatformMonitor::wait, Mutex::lock) are these, not waits of the program's.",
                        r.probe_counted,
                        s(r.probe_counted_ns)
                    );
                }
                if r.with_unnamed_jit_frames > 0 {
                    let _ = writeln!(
                        out,
                        "  {} wait(s) pass through JIT-compiled or interpreted Java code, shown by address: the JVM wrote no /tmp/perf-{}.map to name it (run it with -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, or use -XX:+PreserveFramePointer with a perf map agent).",
                        r.with_unnamed_jit_frames, r.pid
                    );
                } else if r.with_jit_frames > 0 {
                    let _ = writeln!(
                        out,
                        "  {} wait(s) pass through Java code, named from the JVM's perf map (/tmp/perf-{}.map, copied into the run as maps/perf-{}.map); the unwinder stops at the first frame of generated code (it has no call frame information), so that frame is the one shown: a runtime stub (_complete_monitor_locking_Java), the interpreter, or a compiled method.",
                        r.with_jit_frames, r.pid, r.pid
                    );
                }
                let monitors: Vec<_> = r
                    .sites
                    .iter()
                    .filter(|x| x.kind == WaitKind::JvmMonitor)
                    .take(5)
                    .collect();
                if !monitors.is_empty() {
                    let _ = writeln!(
                        out,
                        "  Monitor waits (jvm_monitor) by the frame that entered:"
                    );
                    for m in monitors {
                        let _ = writeln!(
                            out,
                            "    {} wait(s) {} s at {}",
                            m.waits,
                            s(m.total_ns),
                            m.site.as_deref().unwrap_or("? (a Java frame not named)")
                        );
                    }
                }
            }
        }
    }
    out
}

/// The table of locks named by call site, or nothing when there is none.
pub fn render_call_sites(sites: &[CallSiteWaits], top: usize) -> String {
    let mut out = String::new();
    if sites.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "Locks named by their call site (parking_lot, parks and a JVM's monitors wait on a word of the waiting thread, not of the lock; the futex words above are those threads'):"
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
    use analysis::waits::KindWaits;

    #[test]
    fn a_go_program_is_explained_and_a_jvm_named() {
        let go = RuntimeWaits {
            runtime: Runtime::Go,
            pid: 42,
            waits: 150,
            total_ns: 700_000_000,
            probe_counted: 0,
            probe_counted_ns: 0,
            kinds: vec![KindWaits {
                kind: WaitKind::GoPark,
                waits: 150,
                total_ns: 700_000_000,
            }],
            sites: Vec::new(),
            with_jit_frames: 0,
            with_unnamed_jit_frames: 0,
        };
        let text = render_runtimes(&[go]);
        assert!(text.starts_with("Go program (process 42"), "{text}");
        assert!(text.contains("go_park 150 wait(s) 0.700 s"), "{text}");
        assert!(
            text.contains("none of these waits is a sync.Mutex's"),
            "{text}"
        );
        assert!(text.contains("SetMutexProfileFraction"), "{text}");
        assert!(!text.contains("runtime.lock2"), "{text}");
        let jvm = RuntimeWaits {
            runtime: Runtime::Jvm,
            pid: 7,
            waits: 3,
            total_ns: 3_000_000,
            probe_counted: 3,
            probe_counted_ns: 3_000_000,
            kinds: Vec::new(),
            sites: vec![analysis::waits::RuntimeSite {
                kind: WaitKind::JvmMonitor,
                site: Some("void App.run()".into()),
                waits: 3,
                total_ns: 3_000_000,
            }],
            with_jit_frames: 3,
            with_unnamed_jit_frames: 2,
        };
        let text = render_runtimes(&[jvm]);
        assert!(text.contains("JVM (process 7"), "{text}");
        assert!(text.contains("/tmp/perf-7.map"), "{text}");
        assert!(
            text.contains("3 wait(s) 0.003 s at void App.run()"),
            "{text}"
        );
        assert_eq!(render_runtimes(&[]), "");
    }

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
