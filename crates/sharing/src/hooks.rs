//! The plain access hooks of ThreadSanitizer instrumentation (gcc and clang, see HOOKS.md):
//! each a trampoline passing the instrumented access's code address, then the model.
//! Annotations and events the model does not need are no-ops.

use crate::access::{self, Kind};
use crate::trampoline::{access_entry, entry, nothing};

macro_rules! sized {
    ($($read:ident $write:ident $work_r:ident $work_w:ident $n:literal;)*) => {$(
        extern "C" fn $work_r(addr: usize, pc: usize) {
            access::active_access(addr, $n, Kind::Read, pc);
        }
        extern "C" fn $work_w(addr: usize, pc: usize) {
            access::active_access(addr, $n, Kind::Write, pc);
        }
        access_entry!($read, $work_r, "rsi", "x1");
        access_entry!($write, $work_w, "rsi", "x1");
    )*};
}

sized! {
    __tsan_read1 __tsan_write1 read1 write1 1;
    __tsan_read2 __tsan_write2 read2 write2 2;
    __tsan_read4 __tsan_write4 read4 write4 4;
    __tsan_read8 __tsan_write8 read8 write8 8;
    __tsan_read16 __tsan_write16 read16 write16 16;
}

/// Other names for the same accesses: unaligned (clang), volatile (`-mllvm
/// -tsan-distinguish-volatile=1`, gcc `--param tsan-distinguish-volatile=1`).
macro_rules! alias {
    ($($name:ident => $work:ident;)*) => {$( access_entry!($name, $work, "rsi", "x1"); )*};
}

alias! {
    __tsan_unaligned_read2 => read2;
    __tsan_unaligned_read4 => read4;
    __tsan_unaligned_read8 => read8;
    __tsan_unaligned_read16 => read16;
    __tsan_unaligned_write2 => write2;
    __tsan_unaligned_write4 => write4;
    __tsan_unaligned_write8 => write8;
    __tsan_unaligned_write16 => write16;
    __tsan_volatile_read1 => read1;
    __tsan_volatile_read2 => read2;
    __tsan_volatile_read4 => read4;
    __tsan_volatile_read8 => read8;
    __tsan_volatile_read16 => read16;
    __tsan_volatile_write1 => write1;
    __tsan_volatile_write2 => write2;
    __tsan_volatile_write4 => write4;
    __tsan_volatile_write8 => write8;
    __tsan_volatile_write16 => write16;
    __tsan_unaligned_volatile_read2 => read2;
    __tsan_unaligned_volatile_read4 => read4;
    __tsan_unaligned_volatile_read8 => read8;
    __tsan_unaligned_volatile_read16 => read16;
    __tsan_unaligned_volatile_write2 => write2;
    __tsan_unaligned_volatile_write4 => write4;
    __tsan_unaligned_volatile_write8 => write8;
    __tsan_unaligned_volatile_write16 => write16;
}

/// A read followed by a write of the same bytes (clang `-mllvm
/// -tsan-compound-read-before-write=1`, for `x += ...`).
macro_rules! read_write {
    ($($name:ident $uname:ident $work:ident $n:literal;)*) => {$(
        extern "C" fn $work(addr: usize, pc: usize) {
            access::active_access(addr, $n, Kind::Read, pc);
            access::active_access(addr, $n, Kind::Write, pc);
        }
        access_entry!($name, $work, "rsi", "x1");
        access_entry!($uname, $work, "rsi", "x1");
    )*};
}

read_write! {
    __tsan_read_write1 __tsan_unaligned_read_write1 read_write1 1;
    __tsan_read_write2 __tsan_unaligned_read_write2 read_write2 2;
    __tsan_read_write4 __tsan_unaligned_read_write4 read_write4 4;
    __tsan_read_write8 __tsan_unaligned_read_write8 read_write8 8;
    __tsan_read_write16 __tsan_unaligned_read_write16 read_write16 16;
}

// Accesses with the code address given by the caller (libtsan's interface).
macro_rules! with_pc {
    ($($name:ident $n:literal $kind:expr;)*) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(addr: usize, pc: usize) {
            access::access(addr, $n, $kind, pc);
        }
    )*};
}

with_pc! {
    __tsan_read1_pc 1 Kind::Read;
    __tsan_read2_pc 2 Kind::Read;
    __tsan_read4_pc 4 Kind::Read;
    __tsan_read8_pc 8 Kind::Read;
    __tsan_read16_pc 16 Kind::Read;
    __tsan_write1_pc 1 Kind::Write;
    __tsan_write2_pc 2 Kind::Write;
    __tsan_write4_pc 4 Kind::Write;
    __tsan_write8_pc 8 Kind::Write;
    __tsan_write16_pc 16 Kind::Write;
}

extern "C" fn read_range(addr: usize, size: usize, pc: usize) {
    access::range(addr, size, Kind::Read, pc);
}
extern "C" fn write_range(addr: usize, size: usize, pc: usize) {
    access::range(addr, size, Kind::Write, pc);
}
// gcc: struct copies and unaligned or odd-sized accesses.
access_entry!(__tsan_read_range, read_range, "rdx", "x2");
access_entry!(__tsan_write_range, write_range, "rdx", "x2");

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_read_range_pc(addr: usize, size: usize, pc: usize) {
    access::range(addr, size, Kind::Read, pc);
}
#[unsafe(no_mangle)]
pub extern "C" fn __tsan_write_range_pc(addr: usize, size: usize, pc: usize) {
    access::range(addr, size, Kind::Write, pc);
}

/// A C++ object's vtable pointer set (construction, destruction): a write when it changes.
extern "C" fn vptr_update(slot: *mut usize, value: usize, pc: usize) {
    // SAFETY: the instrumented code passes the address of a vtable pointer it is about to set.
    if crate::active() && unsafe { slot.read_volatile() } != value {
        access::access(slot as usize, 8, Kind::Write, pc);
    }
}
extern "C" fn vptr_read(slot: usize, pc: usize) {
    access::active_access(slot, 8, Kind::Read, pc);
}
entry!(__tsan_vptr_update, vptr_update, "rdx", "x2");
access_entry!(__tsan_vptr_read, vptr_read, "rsi", "x1");

/// Called by every instrumented module's constructor: the runtime starts then if its own
/// constructor has not run yet.
#[unsafe(no_mangle)]
pub extern "C" fn __tsan_init() {
    crate::init();
}

nothing! {
    __tsan_func_entry,
    __tsan_func_exit,
    __tsan_ignore_thread_begin,
    __tsan_ignore_thread_end,
    __tsan_acquire,
    __tsan_release,
    __tsan_flush_memory,
    __tsan_mutex_create,
    __tsan_mutex_destroy,
    __tsan_mutex_pre_lock,
    __tsan_mutex_post_lock,
    __tsan_mutex_pre_unlock,
    __tsan_mutex_post_unlock,
    __tsan_mutex_pre_signal,
    __tsan_mutex_post_signal,
    __tsan_mutex_pre_divert,
    __tsan_mutex_post_divert,
    __tsan_external_read,
    __tsan_external_write,
    AnnotateHappensBefore,
    AnnotateHappensAfter,
    AnnotateBenignRace,
    AnnotateBenignRaceSized,
    AnnotateIgnoreReadsBegin,
    AnnotateIgnoreReadsEnd,
    AnnotateIgnoreWritesBegin,
    AnnotateIgnoreWritesEnd,
    AnnotateIgnoreSyncBegin,
    AnnotateIgnoreSyncEnd,
    AnnotateNewMemory,
    AnnotateThreadName,
    AnnotateRWLockCreate,
    AnnotateRWLockDestroy,
    AnnotateRWLockAcquired,
    AnnotateRWLockReleased,
}
