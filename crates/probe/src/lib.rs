//! contend's probe: a library loaded into an unmodified program with `LD_PRELOAD` by
//! `contend record --locks`. It interposes the pthread lock, condition-variable and barrier
//! functions, thread creation and fork, and records what happens to each lock into a
//! shared-memory ring per thread (`trace::ring`), which the recorder drains into the run
//! directory.
//!
//! Rules it keeps (DESIGN.md §3): identical behaviour (every hook returns what the real function
//! returned, errno untouched); no malloc, lock or system call on the hot path (the tables and
//! rings are mmap'd, a record is a store into shared memory); per-thread state with a guard so
//! a signal handler that interrupts a record passes through (counted as dropped); a forked child
//! records into rings of its own; a panic aborts (Rust aborts rather than unwind out of an
//! `extern "C"` function).
//!
//! Without `CONTEND_RINGS` in the environment the probe only passes calls on.

mod trampoline;

mod alloc;
mod announce;
mod budget;
mod clock;
mod config;
pub mod hooks;
mod maps;
mod real;
mod sampler;
mod table;
mod thread;

extern "C" fn on_load() {
    config::load();
    real::resolve_all();
    alloc::resolve_all();
    thread::create_exit_key();
    // SAFETY: registering a plain function as the fork child handler.
    unsafe { libc::pthread_atfork(None, None, Some(child_after_fork)) };
    announce::announce();
}

extern "C" fn child_after_fork() {
    thread::after_fork_in_child();
    announce::announce_fork();
}

extern "C" fn on_unload() {
    if config::recording() {
        // The main thread's stream ends here (its TLS destructors do not run at exit), and the
        // maps are copied again to include libraries loaded with dlopen.
        thread::end_thread();
        // SAFETY: getpid has no preconditions.
        maps::snapshot(unsafe { libc::getpid() } as u32);
        // A forked child that did not exec confirms here that the probe is in it.
        announce::announce();
    }
}

// Run by the dynamic loader when the library is loaded and at exit.
#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[unsafe(link_section = ".fini_array")]
static ON_UNLOAD: extern "C" fn() = on_unload;
