//! Language runtimes recognised from the waits' stacks (issue 22, item 7), so the report can
//! say what it sees of them and what it does not:
//!
//! - **Go**: a frame of Go's runtime (`runtime.futexsleep`: Go names hold a dot, which C and
//!   Rust names cannot). Goroutines park in Go's scheduler, so a `sync.Mutex` wait is no
//!   futex wait; the futex waits left are the runtime's threads (Ms) parking.
//! - **JVM** (HotSpot): a frame in `libjvm.so`. Its threads block through pthread and futex
//!   calls; the frames say whether in a monitor (`synchronized`) or a parker.

use super::{KindWaits, WaitKind, WaitReport, WaitStack};
use serde::Serialize;
use std::collections::BTreeMap;

/// A language runtime with waits of its own kind.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    Go,
    Jvm,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Go => "go",
            Runtime::Jvm => "jvm",
        }
    }
}

/// A runtime's waits of one kind at one program frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RuntimeSite {
    pub kind: WaitKind,
    /// The program's frame that waited, when one was found.
    pub site: Option<String>,
    pub waits: u64,
    pub total_ns: u64,
}

/// The measured futex waits of one process of a runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RuntimeWaits {
    pub runtime: Runtime,
    pub pid: u32,
    /// Measured futex waits whose stack shows the runtime, and their time off CPU, ns: the
    /// Waits section's and those the probe counted.
    pub waits: u64,
    pub total_ns: u64,
    /// Of those, the waits inside the probe's pthread waits (the lock section shows them, as
    /// waits on the runtime's own pthread objects), and their time, ns.
    pub probe_counted: u64,
    pub probe_counted_ns: u64,
    /// Of those, per kind, most time first.
    pub kinds: Vec<KindWaits>,
    /// Of those, per kind and the program's frame that waited (for a JVM, the innermost Java
    /// frame, named from its perf map), most time first.
    pub sites: Vec<RuntimeSite>,
    /// Of those, waits whose stack holds a frame in no file (JIT code) and of those, waits
    /// where such a frame has no name (the JVM wrote no `perf-PID.map`).
    pub with_jit_frames: u64,
    pub with_unnamed_jit_frames: u64,
}

/// The runtime a stack shows, if any.
pub fn runtime_of(stack: &WaitStack) -> Option<Runtime> {
    let module_is = |f: &super::WaitFrame, prefix: &str| {
        f.module
            .as_deref()
            .map(|m| m.rsplit('/').next().unwrap_or(m))
            .is_some_and(|m| m.starts_with(prefix))
    };
    if stack.frames.iter().any(|f| module_is(f, "libjvm.so")) {
        return Some(Runtime::Jvm);
    }
    if stack
        .frames
        .iter()
        .any(|f| f.function.starts_with("runtime.") && !f.function.contains("::"))
    {
        return Some(Runtime::Go);
    }
    None
}

/// A frame of code in no file: JIT-compiled (or interpreter) code of a runtime.
pub fn is_jit_frame(f: &super::WaitFrame) -> bool {
    f.module.is_none() && f.function != "[unknown]"
}

/// The runtimes `r`'s measured waits show (their stacks given to
/// [`super::waits_with_stacks`]), per process, with the waits whose stacks pass through code
/// in no file (JIT code), named (from a perf map) or not.
pub fn runtimes(r: &WaitReport, stacks: &[WaitStack]) -> Vec<RuntimeWaits> {
    type Kinds = BTreeMap<WaitKind, KindWaits>;
    type Sites = BTreeMap<(WaitKind, Option<String>), RuntimeSite>;
    let mut out: BTreeMap<(Runtime, u32), (RuntimeWaits, Kinds, Sites)> = BTreeMap::new();
    let covered = r.probe_stack_waits.iter().map(|sw| (sw, true));
    for (sw, by_probe) in r.stack_waits.iter().map(|sw| (sw, false)).chain(covered) {
        let Some(st) = stacks.get(sw.stack as usize) else {
            continue;
        };
        let Some(rt) = runtime_of(st) else {
            continue;
        };
        let (w, kinds, sites) = out.entry((rt, sw.pid)).or_insert_with(|| {
            (
                RuntimeWaits {
                    runtime: rt,
                    pid: sw.pid,
                    waits: 0,
                    total_ns: 0,
                    probe_counted: 0,
                    probe_counted_ns: 0,
                    kinds: Vec::new(),
                    sites: Vec::new(),
                    with_jit_frames: 0,
                    with_unnamed_jit_frames: 0,
                },
                BTreeMap::new(),
                BTreeMap::new(),
            )
        });
        w.waits += sw.waits;
        w.total_ns += sw.total_ns;
        if by_probe {
            w.probe_counted += sw.waits;
            w.probe_counted_ns += sw.total_ns;
        }
        let jit: Vec<_> = st.frames.iter().filter(|f| is_jit_frame(f)).collect();
        if !jit.is_empty() {
            w.with_jit_frames += sw.waits;
            if jit.iter().any(|f| f.function.starts_with("0x")) {
                w.with_unnamed_jit_frames += sw.waits;
            }
        }
        let k = kinds.entry(st.kind).or_insert_with(|| KindWaits {
            kind: st.kind,
            ..KindWaits::default()
        });
        k.waits += sw.waits;
        k.total_ns += sw.total_ns;
        let site = sites
            .entry((st.kind, st.site.clone()))
            .or_insert_with(|| RuntimeSite {
                kind: st.kind,
                site: st.site.clone(),
                ..RuntimeSite::default()
            });
        site.waits += sw.waits;
        site.total_ns += sw.total_ns;
    }
    out.into_values()
        .map(|(mut w, kinds, sites)| {
            w.kinds = kinds.into_values().collect();
            w.sites = sites.into_values().collect();
            w.sites
                .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.site.cmp(&b.site)));
            w.kinds
                .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.kind.cmp(&b.kind)));
            w
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waits::{StackWaits, WaitFrame};

    fn frame(function: &str, module: Option<&str>) -> WaitFrame {
        WaitFrame {
            function: function.into(),
            module: module.map(String::from),
            ..WaitFrame::default()
        }
    }

    #[test]
    fn go_and_the_jvm_are_told_by_their_frames() {
        let go = WaitStack {
            kind: WaitKind::GoPark,
            site: None,
            frames: vec![
                frame("runtime.futex", Some("/tmp/go_mutex")),
                frame("runtime.futexsleep", Some("/tmp/go_mutex")),
            ],
            unknown: false,
        };
        let jvm = WaitStack {
            kind: WaitKind::JvmMonitor,
            site: None,
            frames: vec![
                frame(
                    "__futex_abstimed_wait_common",
                    Some("/usr/lib/x86_64-linux-gnu/libc.so.6"),
                ),
                frame(
                    "ObjectMonitor::EnterI(JavaThread*)",
                    Some("/usr/lib/jvm/java-17/lib/server/libjvm.so"),
                ),
                frame("0x7f00dead", None),
            ],
            unknown: false,
        };
        let rust = WaitStack {
            kind: WaitKind::Lock,
            site: None,
            frames: vec![frame(
                "std::sys::pal::unix::futex::futex_wait",
                Some("/tmp/m"),
            )],
            unknown: false,
        };
        assert_eq!(runtime_of(&go), Some(Runtime::Go));
        assert_eq!(runtime_of(&jvm), Some(Runtime::Jvm));
        assert_eq!(runtime_of(&rust), None);
        let sw = |pid, stack, waits, total_ns| StackWaits {
            pid,
            uaddr: 0x10,
            stack,
            waits,
            total_ns,
        };
        let r = WaitReport {
            stack_waits: vec![sw(1, 0, 3, 30), sw(2, 1, 1, 5), sw(2, 2, 9, 90)],
            probe_stack_waits: vec![sw(2, 1, 1, 15)],
            ..WaitReport::default()
        };
        let seen = runtimes(&r, &[go, jvm, rust]);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(
            (seen[0].runtime, seen[0].pid, seen[0].waits),
            (Runtime::Go, 1, 3)
        );
        assert_eq!(seen[0].kinds[0].kind, WaitKind::GoPark);
        assert_eq!((seen[1].runtime, seen[1].total_ns), (Runtime::Jvm, 20));
        assert_eq!((seen[1].probe_counted, seen[1].probe_counted_ns), (1, 15));
        assert_eq!(
            (seen[1].with_jit_frames, seen[1].with_unnamed_jit_frames),
            (2, 2)
        );
    }
}
