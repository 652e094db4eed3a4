//! What kind of wait a futex wait is, from the names of its user stack's frames (design §3.2):
//! a pure table. Frames match by the end of their demangled path, because std moves its
//! modules between releases (`std::sys::sync::mutex::futex::Mutex::lock_contended` in rustc
//! 1.95, `std::sys::locks::...` before).
//!
//! Order of the rules: HotSpot's monitor frames anywhere, then its park frames (a JVM thread
//! blocks in `pthread_cond_wait` on an event of its own: the JVM frame above says what for);
//! then a barrier's frame anywhere (a barrier waits on a condition
//! variable inside: the barrier is what the program asked for); then the innermost frame that
//! names a lock, condition variable, rwlock, once, join or semaphore; then the innermost park
//! (parking_lot parks its locks' threads, and std's channels park theirs: the lock frame
//! outside the park says more, so park only when nothing else matched); else unknown.

use serde::Serialize;

/// The kind of a wait.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// A mutex: std `Mutex`, pthread mutexes, parking_lot `Mutex`.
    Lock,
    /// A condition variable: std `Condvar`, `pthread_cond_*`, parking_lot `Condvar`.
    Condition,
    RwLock,
    Barrier,
    /// One-time initialisation (`Once`, `OnceLock`, `pthread_once`).
    Once,
    /// A thread parked (`thread::park`, a parker), with nothing more specific above it.
    Park,
    /// Waiting for a thread to end (`pthread_join`, `JoinHandle::join`).
    Join,
    Semaphore,
    /// A Go runtime thread (an M) parked in the runtime (`runtime.futexsleep`, `notesleep`):
    /// idle, or waiting for the runtime. Goroutines waiting for a `sync.Mutex` park in Go's
    /// scheduler, not on a futex: such a wait is not one of them.
    GoPark,
    /// A JVM thread blocked entering a contended `synchronized` monitor
    /// (`ObjectMonitor::enter`/`EnterI` in libjvm.so).
    JvmMonitor,
    /// A JVM thread parked (`Parker::park`: `LockSupport.park`, java.util.concurrent) or
    /// waiting on an event (`PlatformEvent::park`: `Object.wait`, `Thread.sleep`, ...).
    JvmPark,
    /// No frame matched (or no stack).
    #[default]
    Unknown,
}

impl WaitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Lock => "lock",
            WaitKind::Condition => "condition",
            WaitKind::RwLock => "rwlock",
            WaitKind::Barrier => "barrier",
            WaitKind::Once => "once",
            WaitKind::Park => "park",
            WaitKind::Join => "join",
            WaitKind::Semaphore => "semaphore",
            WaitKind::GoPark => "go_park",
            WaitKind::JvmMonitor => "jvm_monitor",
            WaitKind::JvmPark => "jvm_park",
            WaitKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for WaitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a rule matches a normalised name.
#[derive(Clone, Copy)]
enum Pat {
    /// The path ends with this (after a `::` or at the start).
    Suffix(&'static str),
    /// The path ends with this and starts with the crate given.
    CrateSuffix(&'static str, &'static str),
    /// The C symbol, exactly.
    Symbol(&'static str),
    /// The C++ function, exactly as qualified, its parameter list ignored
    /// (`ObjectMonitor::EnterI(JavaThread*)` is `ObjectMonitor::EnterI`).
    Cpp(&'static str),
}

use Pat::*;
use WaitKind::*;

/// A barrier anywhere in the stack.
const OUTER: &[(Pat, WaitKind)] = &[
    (CrateSuffix("std", "Barrier::wait"), Barrier),
    (Symbol("pthread_barrier_wait"), Barrier),
    (Symbol("___pthread_barrier_wait"), Barrier),
];

/// The innermost match of these.
const SPECIFIC: &[(Pat, WaitKind)] = &[
    // Rust std (futex implementations, and the pthread ones of other targets).
    (CrateSuffix("std", "Mutex::lock_contended"), Lock),
    (CrateSuffix("std", "RwLock::read_contended"), RwLock),
    (CrateSuffix("std", "RwLock::write_contended"), RwLock),
    (CrateSuffix("std", "Condvar::wait"), Condition),
    (CrateSuffix("std", "Condvar::wait_timeout"), Condition),
    (
        CrateSuffix("std", "Condvar::wait_optional_timeout"),
        Condition,
    ),
    (CrateSuffix("std", "Condvar::wait_while"), Condition),
    (CrateSuffix("std", "Once::call"), Once),
    (CrateSuffix("std", "OnceLock::initialize"), Once),
    (CrateSuffix("std", "JoinHandle::join"), Join),
    (CrateSuffix("std", "JoinInner::join"), Join),
    // parking_lot.
    (CrateSuffix("parking_lot", "RawMutex::lock_slow"), Lock),
    (CrateSuffix("parking_lot", "RawFairMutex::lock_slow"), Lock),
    (
        CrateSuffix("parking_lot", "RawReentrantMutex::lock_slow"),
        Lock,
    ),
    (
        CrateSuffix("parking_lot", "Condvar::wait_until_internal"),
        Condition,
    ),
    (
        CrateSuffix("parking_lot", "RawRwLock::lock_shared_slow"),
        RwLock,
    ),
    (
        CrateSuffix("parking_lot", "RawRwLock::lock_exclusive_slow"),
        RwLock,
    ),
    (
        CrateSuffix("parking_lot", "RawRwLock::lock_upgradable_slow"),
        RwLock,
    ),
    (CrateSuffix("parking_lot", "Once::call_once_slow"), Once),
    // glibc (names as its symbol tables and debug files give them).
    (Symbol("__lll_lock_wait"), Lock),
    (Symbol("__GI___lll_lock_wait"), Lock),
    (Symbol("__lll_lock_wait_private"), Lock),
    (Symbol("__lll_lock_wake"), Lock),
    (Symbol("pthread_mutex_lock"), Lock),
    (Symbol("___pthread_mutex_lock"), Lock),
    (Symbol("__pthread_mutex_lock"), Lock),
    (Symbol("__pthread_mutex_lock_full"), Lock),
    (Symbol("pthread_mutex_timedlock"), Lock),
    (Symbol("pthread_mutex_clocklock"), Lock),
    (Symbol("__pthread_mutex_clocklock_common"), Lock),
    (Symbol("pthread_cond_wait"), Condition),
    (Symbol("___pthread_cond_wait"), Condition),
    (Symbol("__pthread_cond_wait"), Condition),
    (Symbol("__pthread_cond_wait_common"), Condition),
    (Symbol("pthread_cond_timedwait"), Condition),
    (Symbol("___pthread_cond_timedwait"), Condition),
    (Symbol("___pthread_cond_timedwait64"), Condition),
    (Symbol("pthread_cond_clockwait"), Condition),
    (Symbol("pthread_rwlock_rdlock"), RwLock),
    (Symbol("pthread_rwlock_wrlock"), RwLock),
    (Symbol("___pthread_rwlock_rdlock"), RwLock),
    (Symbol("___pthread_rwlock_wrlock"), RwLock),
    (Symbol("__pthread_rwlock_rdlock_full64"), RwLock),
    (Symbol("__pthread_rwlock_wrlock_full64"), RwLock),
    (Symbol("pthread_rwlock_timedrdlock"), RwLock),
    (Symbol("pthread_rwlock_timedwrlock"), RwLock),
    (Symbol("pthread_rwlock_clockrdlock"), RwLock),
    (Symbol("pthread_rwlock_clockwrlock"), RwLock),
    (Symbol("pthread_once"), Once),
    (Symbol("__pthread_once_slow"), Once),
    (Symbol("___pthread_once"), Once),
    (Symbol("__cxa_guard_acquire"), Once),
    (Symbol("pthread_join"), Join),
    (Symbol("___pthread_join"), Join),
    (Symbol("__pthread_clockjoin_ex"), Join),
    (Symbol("pthread_timedjoin_np"), Join),
    (Symbol("pthread_clockjoin_np"), Join),
    (Symbol("sem_wait"), Semaphore),
    (Symbol("__new_sem_wait"), Semaphore),
    (Symbol("__new_sem_wait_slow64"), Semaphore),
    (Symbol("sem_timedwait"), Semaphore),
    (Symbol("sem_clockwait"), Semaphore),
    // Go's runtime lock (its own futex lock, around the scheduler's and the heap's state).
    (Symbol("runtime.lock2"), Lock),
];

/// The innermost match of these, when nothing above matched.
const PARK: &[(Pat, WaitKind)] = &[
    (CrateSuffix("std", "thread::park"), Park),
    (CrateSuffix("std", "thread::park_timeout"), Park),
    (CrateSuffix("std", "Parker::park"), Park),
    (CrateSuffix("std", "Parker::park_timeout"), Park),
    (Suffix("parking_lot_core::parking_lot::park"), Park),
    (Suffix("ThreadParker::park"), Park),
    (Suffix("ThreadParker::park_until"), Park),
    // Go: a runtime thread (M) parking, with nothing more specific above it.
    (Symbol("runtime.futexsleep"), GoPark),
    (Symbol("runtime.notesleep"), GoPark),
    (Symbol("runtime.notetsleep_internal"), GoPark),
    (Symbol("runtime.notetsleepg"), GoPark),
    (Symbol("runtime.mPark"), GoPark),
    (Symbol("runtime.stopm"), GoPark),
];

/// HotSpot's libjvm.so (C++ names, as its .symtab gives them), anywhere in the stack, before
/// every other rule: a JVM thread blocks in pthread calls (`pthread_cond_wait` on its own
/// event), which say nothing of what the Java code waited for. The innermost of these wins:
/// a contended `synchronized` enters the monitor's slow path; `Object.wait` waits in the
/// monitor, then re-enters it (a monitor wait again).
const JVM_MONITOR: &[(Pat, WaitKind)] = &[
    (Cpp("ObjectMonitor::EnterI"), JvmMonitor),
    (Cpp("ObjectMonitor::ReenterI"), JvmMonitor),
    (Cpp("ObjectMonitor::enter"), JvmMonitor),
    (Cpp("ObjectMonitor::enter_internal"), JvmMonitor),
    (Cpp("ObjectMonitor::wait"), Condition),
];

/// Then a HotSpot park: `LockSupport.park` (java.util.concurrent), or a thread's event with
/// no monitor above it (`Thread.sleep`, the VM's own threads).
const JVM_PARK: &[(Pat, WaitKind)] = &[
    (Cpp("Parker::park"), JvmPark),
    (Cpp("os::PlatformEvent::park"), JvmPark),
    (Cpp("os::PlatformMonitor::wait"), JvmPark),
];

/// A demangled name as the table compares it: a qualified path's brackets dropped
/// (`<std::...::Mutex>::lock` → `std::...::Mutex::lock`), generic arguments left out
/// (`Mutex<T>::lock`, `Condvar>::wait::<std::sync::barrier::BarrierState>` → `...::wait`), no
/// trailing hash, no symbol version (`@@GLIBC_2.3.2`).
fn normalise(name: &str) -> String {
    let name = name.split('@').next().unwrap_or(name);
    let mut out = String::with_capacity(name.len());
    // For each open `<`: whether it opened generic arguments (skipped with their contents).
    let mut open: Vec<bool> = Vec::new();
    let mut skipping = 0usize;
    for c in name.chars() {
        match c {
            '<' => {
                let generic = skipping > 0
                    || out.ends_with(|p: char| p.is_alphanumeric() || p == '_' || p == ':');
                open.push(generic);
                skipping += usize::from(generic);
            }
            '>' => {
                if open.pop() == Some(true) {
                    skipping -= 1;
                }
            }
            _ if skipping > 0 => {}
            _ => out.push(c),
        }
    }
    while out.contains("::::") {
        out = out.replace("::::", "::");
    }
    let mut out = out.trim_end_matches("::").to_string();
    // `<T as Trait>::f` → keep the trait-free path's end; `::h0123abcd` hashes.
    if let Some(i) = out.rfind("::h") {
        let tail = &out[i + 3..];
        if tail.len() == 16 && tail.bytes().all(|b| b.is_ascii_hexdigit()) {
            out.truncate(i);
        }
    }
    out
}

fn matches(pat: Pat, name: &str) -> bool {
    match pat {
        Symbol(s) => name == s,
        Cpp(s) => name.split('(').next() == Some(s),
        Suffix(s) => ends_with_path(name, s),
        CrateSuffix(krate, s) => {
            // The crate may follow an `impl` prefix: `std::...` or `... as std::...`.
            let starts = name.starts_with(krate) && name[krate.len()..].starts_with("::");
            let as_trait = name.contains(&format!(" as {krate}::"));
            (starts || as_trait) && ends_with_path(name, s)
        }
    }
}

/// `name` ends with `suffix` at a path boundary (after `::`, a space, or at the start).
fn ends_with_path(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix)
        .is_some_and(|head| head.is_empty() || head.ends_with("::") || head.ends_with(' '))
}

/// The kind of a wait whose stack's frames (function names, innermost first, inlined frames
/// included) are `frames`.
pub fn classify<'a>(frames: impl IntoIterator<Item = &'a str>) -> WaitKind {
    decide(frames).map_or(Unknown, |(_, kind)| kind)
}

/// The rule that decides a wait's kind, if any: the tiers in the order the module's doc gives.
fn decide<'a>(frames: impl IntoIterator<Item = &'a str>) -> Option<(Pat, WaitKind)> {
    let names: Vec<String> = frames.into_iter().map(normalise).collect();
    let first = |rules: &[(Pat, WaitKind)]| {
        names
            .iter()
            .find_map(|n| rules.iter().find(|(p, _)| matches(*p, n)).copied())
    };
    first(JVM_MONITOR)
        .or_else(|| first(JVM_PARK))
        .or_else(|| first(OUTER))
        .or_else(|| first(SPECIFIC))
        .or_else(|| first(PARK))
}

/// Whether the lock of a wait with these frames (innermost first) is named by its call site
/// rather than by its futex word (design §3.2): parking_lot parks each waiting thread on a
/// word of its own thread data, and a bare park waits on the thread's parker, so the word
/// says which thread waited, not on what. As in [`classify`], the rule that decides the kind
/// decides this.
pub fn keyed_by_call_site<'a>(frames: impl IntoIterator<Item = &'a str>) -> bool {
    decide(frames).is_some_and(|(p, kind)| by_call_site(p, kind))
}

/// A rule whose futex word is not the lock's own (see [`keyed_by_call_site`]): parking_lot's,
/// a bare park's, and HotSpot's (a JVM thread waits on its own event).
fn by_call_site(p: Pat, kind: WaitKind) -> bool {
    match p {
        CrateSuffix("parking_lot", _) => true,
        // Not a Go runtime thread's park (GoPark): no program frame is above it.
        _ if kind == Park => true,
        Cpp(_) => true,
        _ => false,
    }
}

/// Whether a frame is the runtime's rather than the program's: Rust's std, core and alloc,
/// and the C library (by module: libc, libpthread, the dynamic loader, the vDSO). The
/// program's frame that waited is the first, from the innermost, that is not.
pub fn is_runtime_frame(function: Option<&str>, module: Option<&str>) -> bool {
    if let Some(m) = module {
        let m = m.rsplit('/').next().unwrap_or(m);
        if m.starts_with("libc.so")
            || m.starts_with("libc-")
            || m.starts_with("libpthread")
            || m.starts_with("ld-linux")
            || m.starts_with("ld-musl")
            || m == "[vdso]"
            // HotSpot's own code, and contend's probe around the pthread calls it wraps.
            || m.starts_with("libjvm.so")
            || m.starts_with("libcontend_probe")
        {
            return true;
        }
    }
    let Some(f) = function else {
        return false;
    };
    let f = normalise(f);
    let f = f.trim_start();
    [
        "std::",
        "core::",
        "alloc::",
        "__rust",
        "_start",
        "__libc_start",
        "start_thread",
        "clone",
    ]
    .iter()
    .any(|p| f.starts_with(p))
        || f.starts_with("parking_lot::")
        || f.starts_with("parking_lot_core::")
        || f.starts_with("lock_api::")
        // Go's runtime (`runtime.futexsleep`; a C or Rust name cannot hold a dot).
        || f.starts_with("runtime.")
        || f.starts_with("contend_probe::")
        || f.contains(" as core::")
        || f.contains(" as std::")
        || f.contains(" as alloc::")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of rustc 1.95's std `Mutex` slow path, as contend named them on this machine
    /// (examples/waits/std_mutex.rs, inlined frames expanded, innermost first).
    const STD_MUTEX: &[&str] = &[
        "syscall",
        "std::sys::pal::unix::futex::futex_wait",
        "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
        "<std::sys::sync::mutex::futex::Mutex>::lock",
        "std::sync::poison::mutex::Mutex<T>::lock",
        "std_mutex::main::{{closure}}::{{closure}}::{{closure}}",
        "std::sys::backtrace::__rust_begin_short_backtrace",
        "std::thread::lifecycle::spawn_unchecked::{{closure}}::{{closure}}",
        "start_thread",
        "clone3",
    ];

    #[test]
    fn names_are_compared_without_generics() {
        assert_eq!(
            normalise("std::sync::poison::mutex::Mutex<T>::lock"),
            "std::sync::poison::mutex::Mutex::lock"
        );
        assert_eq!(
            normalise("<std::sync::nonpoison::condvar::Condvar>::wait::<std::sync::barrier::BarrierState>"),
            "std::sync::nonpoison::condvar::Condvar::wait"
        );
        assert_eq!(
            normalise("<alloc::boxed::Box<dyn core::ops::function::FnOnce<(), Output = ()>> as core::ops::function::FnOnce<()>>::call_once"),
            "alloc::boxed::Box as core::ops::function::FnOnce::call_once"
        );
        assert_eq!(
            normalise("pthread_cond_wait@@GLIBC_2.3.2"),
            "pthread_cond_wait"
        );
    }

    #[test]
    fn std_mutex_is_a_lock() {
        assert_eq!(classify(STD_MUTEX.iter().copied()), Lock);
    }

    #[test]
    fn std_condvar_is_a_condition_and_its_relock_a_lock() {
        // examples/waits/std_condvar.rs's consumer, as named here.
        let wait = [
            "syscall",
            "std::sys::pal::unix::futex::futex_wait",
            "<std::sys::sync::condvar::futex::Condvar>::wait_optional_timeout",
            "<std::sys::sync::condvar::futex::Condvar>::wait",
            "std::sync::poison::condvar::Condvar::wait",
            "std_condvar::consume",
        ];
        assert_eq!(classify(wait), Condition);
        // Woken, it takes the mutex back: that wait is the mutex's.
        let relock = [
            "syscall",
            "std::sys::pal::unix::futex::futex_wait",
            "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
            "<std::sys::sync::condvar::futex::Condvar>::wait_optional_timeout",
            "std_condvar::consumer",
        ];
        assert_eq!(classify(relock), Lock);
    }

    #[test]
    fn pthread_frames_from_glibc() {
        assert_eq!(
            classify(["__GI___lll_lock_wait", "___pthread_mutex_lock", "w"]),
            Lock
        );
        assert_eq!(
            classify([
                "__futex_abstimed_wait_common",
                "pthread_cond_wait@@GLIBC_2.3.2",
                "f"
            ]),
            Condition
        );
        assert_eq!(
            classify([
                "__futex_abstimed_wait_common",
                "__pthread_clockjoin_ex",
                "main"
            ]),
            Join
        );
        assert_eq!(
            classify(["__futex_abstimed_wait_common", "pthread_rwlock_wrlock", "w"]),
            RwLock
        );
        assert_eq!(
            classify(["do_futex_wait", "__new_sem_wait_slow64", "w"]),
            Semaphore
        );
    }

    #[test]
    fn a_barrier_wins_over_its_inner_condition_and_lock() {
        // std_mutex's start barrier, as named here: the barrier's Condvar re-taking its Mutex.
        let frames = [
            "syscall",
            "std::sys::pal::unix::futex::futex_wait",
            "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
            "<std::sys::sync::mutex::futex::Mutex>::lock",
            "<std::sys::sync::condvar::futex::Condvar>::wait_optional_timeout",
            "<std::sys::sync::condvar::futex::Condvar>::wait",
            "<std::sync::nonpoison::condvar::Condvar>::wait::<std::sync::barrier::BarrierState>",
            "<std::sync::nonpoison::condvar::Condvar>::wait_while::<std::sync::barrier::BarrierState, <std::sync::barrier::Barrier>::wait::{closure#0}>",
            "<std::sync::barrier::Barrier>::wait",
            "std_mutex::main::{{closure}}::{{closure}}::{{closure}}",
        ];
        assert_eq!(classify(frames), Barrier);
    }

    #[test]
    fn parking_lot_lock_beats_its_park_and_a_bare_park_is_a_park() {
        let frames = [
            "syscall",
            "<parking_lot_core::thread_parker::imp::ThreadParker as parking_lot_core::thread_parker::ThreadParkerT>::park",
            "parking_lot_core::parking_lot::park::{{closure}}",
            "parking_lot_core::parking_lot::park",
            "parking_lot::raw_mutex::RawMutex::lock_slow",
            "app::work",
        ];
        assert_eq!(classify(frames), Lock);
        let park = [
            "std::sys::pal::unix::futex::futex_wait",
            "<std::sys::pal::unix::thread_parking::Parker>::park",
            "std::thread::park",
            "app::worker",
        ];
        assert_eq!(classify(park), Park);
    }

    #[test]
    fn parking_lot_and_parks_are_keyed_by_call_site_std_locks_by_word() {
        // examples/waits/parking_lot_mutex.rs's waits, as named here (rustc -g).
        let parking_lot = [
            "syscall",
            "<parking_lot_core::thread_parker::imp::ThreadParker>::futex_wait",
            "<parking_lot_core::thread_parker::imp::ThreadParker as parking_lot_core::thread_parker::ThreadParkerT>::park",
            "parking_lot_core::parking_lot::park::{{closure}}",
            "parking_lot_core::parking_lot::park",
            "<parking_lot::raw_mutex::RawMutex>::lock_slow",
            "<parking_lot::raw_mutex::RawMutex as lock_api::mutex::RawMutex>::lock",
            "lock_api::mutex::Mutex<R,T>::lock",
            "parking_lot_mutex::main::{{closure}}::{{closure}}::{{closure}}",
        ];
        assert_eq!(classify(parking_lot), Lock);
        assert!(keyed_by_call_site(parking_lot));
        assert!(keyed_by_call_site([
            "<std::sys::pal::unix::thread_parking::Parker>::park",
            "std::thread::park",
            "app::worker",
        ]));
        assert!(!keyed_by_call_site(STD_MUTEX.iter().copied()));
        assert!(!keyed_by_call_site(["syscall", "main"]));
        // lock_api's generic Mutex::lock is the library's, not the program's frame.
        assert!(is_runtime_frame(
            Some("lock_api::mutex::Mutex<R,T>::lock"),
            Some("/tmp/parking_lot_mutex")
        ));
    }

    #[test]
    fn go_runtime_parks_and_jvm_monitors() {
        // A Go program's M parking (go1.26, frames as its DWARF names them).
        let go = [
            "runtime.futex",
            "runtime.futexsleep",
            "runtime.notesleep",
            "runtime.stopm",
        ];
        assert_eq!(classify(go), GoPark);
        assert!(
            !keyed_by_call_site(go),
            "no program frame above an M's park"
        );
        assert_eq!(
            classify(["runtime.futex", "runtime.futexsleep", "runtime.lock2"]),
            Lock
        );
        assert!(is_runtime_frame(Some("runtime.futexsleep"), None));
        // OpenJDK 17's libjvm.so as its .symtab names them (Debian's, demangled).
        let monitor = [
            "__futex_abstimed_wait_common",
            "___pthread_cond_wait",
            "os::PlatformEvent::park()",
            "ObjectMonitor::EnterI(JavaThread*)",
            "ObjectMonitor::enter(JavaThread*)",
            "ObjectSynchronizer::enter(Handle, BasicLock*, JavaThread*)",
            "0x7f3b5c0123ab",
        ];
        assert_eq!(classify(monitor), JvmMonitor);
        assert!(keyed_by_call_site(monitor));
        assert_eq!(
            classify(["___pthread_cond_wait", "Parker::park(bool, long)"]),
            JvmPark
        );
        assert_eq!(
            classify(["___pthread_cond_wait", "os::PlatformEvent::park(long)"]),
            JvmPark
        );
        // Rust std's parker is not HotSpot's.
        assert_eq!(
            classify(["<std::sys::pal::unix::thread_parking::Parker>::park"]),
            Park
        );
    }

    #[test]
    fn join_once_and_unknown() {
        // std_mutex's main thread joining its workers, as named here.
        assert_eq!(
            classify([
                "__futex_abstimed_wait_common64",
                "__futex_abstimed_wait_common",
                "__pthread_clockjoin_ex",
                "<std::sys::thread::unix::Thread>::join",
                "std::thread::lifecycle::JoinInner<T>::join",
                "std::thread::scoped::ScopedJoinHandle<T>::join",
                "std_mutex::main::{{closure}}::{{closure}}",
            ]),
            Join
        );
        assert_eq!(
            classify([
                "std::sys::pal::unix::futex::futex_wait",
                "<std::sys::sync::once::futex::Once>::call"
            ]),
            Once
        );
        assert_eq!(classify(["syscall", "my_own_futex_lock", "main"]), Unknown);
        assert_eq!(classify(Vec::<&str>::new()), Unknown);
        // A program's own function named like a std one is not std's.
        assert_eq!(classify(["app::Mutex::lock_contended"]), Unknown);
    }

    #[test]
    fn runtime_frames_are_told_from_the_programs() {
        assert!(is_runtime_frame(
            Some("syscall"),
            Some("/usr/lib/x86_64-linux-gnu/libc.so.6")
        ));
        assert!(is_runtime_frame(
            Some("<std::sys::sync::mutex::futex::Mutex>::lock_contended"),
            Some("/tmp/std_mutex")
        ));
        assert!(is_runtime_frame(
            Some("core::ops::function::FnOnce::call_once"),
            None
        ));
        assert!(!is_runtime_frame(
            Some("std_mutex::main::{{closure}}"),
            Some("/tmp/std_mutex")
        ));
        assert!(!is_runtime_frame(Some("worker"), Some("/tmp/a.out")));
        assert!(!is_runtime_frame(None, Some("/tmp/a.out")));
    }
}
