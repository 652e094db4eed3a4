//! The results written when the process ends other than by `exit`: from a fatal signal's
//! handler, from `_exit` and before `exec` (see `ending`). The same three files as `output`
//! writes at exit, in the same format, but made without allocating and without a lock another
//! thread (or the interrupted code of this one) may hold: the signal may come from inside
//! `malloc` or `free`. So: raw system calls, numbers formatted by hand into a static buffer,
//! memory for sorting taken with mmap, a heap-block list read only if its lock is free.
//!
//! A snapshot does not end the runtime: statistics resume after it (an `exec` may fail, a
//! handled signal may let the program go on), and the exit writer, if it runs later, replaces
//! the files (they are renamed into place, so a reader sees one or the other, whole).
//!
//! One writer at a time, process-wide: a snapshot waits for one in progress in another thread
//! (which then ends the process, or finishes), and gives way to the exit writer; the exit
//! writer waits for a snapshot in progress (see `exit_writer_starts`).

use crate::access::Kind;
use crate::hot::{self, Object, MAX_OBJECTS};
use crate::live::ALLOCATORS;
use crate::stats::{Entry, CPUS};
use crate::{config, sys, threads};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use trace::sharing::{HISTORY_MAGIC, SHARING_VERSION};

/// A snapshot is being written.
static SNAPSHOT: AtomicBool = AtomicBool::new(false);
/// The thread (tid) writing the results at exit, once it started; 0 before.
static EXIT_WRITER: AtomicU32 = AtomicU32::new(0);
/// The exit writer has finished.
static EXIT_DONE: AtomicBool = AtomicBool::new(false);
/// The thread writing a snapshot (0: none), for `no_allocation_here`.
static WRITER: AtomicU32 = AtomicU32::new(0);

/// Called by the runtime's allocator in debug builds (the tests'): an allocation by the
/// snapshot writer's thread while it writes would break its promise (the signal may have come
/// from inside malloc). Ends the process with status 99 and a message, which a test sees.
#[cfg(debug_assertions)]
pub fn no_allocation_here() {
    let writer = WRITER.load(Ordering::Relaxed);
    if writer != 0 && writer == sys::gettid() {
        sys::say_parts(&[b"bug: the signal-safe writer allocated memory"]);
        loop {
            // SAFETY: ends the process.
            unsafe { libc::syscall(libc::SYS_exit_group, 99) };
        }
    }
}

/// How long a writer waits for another one, at most (a writer is never blocked by anything
/// but the disk; this only bounds a wait on a thread that died while writing).
const WAIT_MS: u32 = 10_000;

/// In a forked child: no writer runs here.
pub fn renew_in_child() {
    SNAPSHOT.store(false, Ordering::Relaxed);
    EXIT_WRITER.store(0, Ordering::Relaxed);
    EXIT_DONE.store(false, Ordering::Relaxed);
}

/// Called by the exit writer before it writes: from now on snapshots give way to it; a
/// snapshot in progress is waited for.
pub fn exit_writer_starts() {
    let _ = EXIT_WRITER.compare_exchange(0, sys::gettid(), Ordering::SeqCst, Ordering::SeqCst);
    wait_until(|| !SNAPSHOT.load(Ordering::SeqCst));
}

/// Called by the exit writer when it has written.
pub fn exit_writer_done() {
    EXIT_DONE.store(true, Ordering::SeqCst);
}

fn sleep_ms(ms: u32) {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: i64::from(ms) * 1_000_000,
    };
    // SAFETY: a valid timespec; nanosleep is async-signal-safe.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

fn wait_until(done: impl Fn() -> bool) {
    for _ in 0..WAIT_MS {
        if done() {
            return;
        }
        sleep_ms(1);
    }
}

/// Why the snapshot is written, for its error message.
#[derive(Clone, Copy)]
pub enum Why {
    Signal(libc::c_int),
    Exit,
    Exec,
}

/// Writes the results gathered so far (async-signal-safe). Nothing happens when the runtime is
/// inactive, in a `vfork` child (it shares the parent's memory, and its pid is not the one the
/// results are for), in a forked child that `exec`s or `_exit`s with no hot line, or when the
/// exit writer already wrote or writes them.
pub fn write(why: Why) {
    if !crate::active() {
        return;
    }
    let Some(cfg) = config::get() else {
        return;
    };
    let pid = sys::getpid();
    if pid != crate::PID.load(Ordering::Relaxed) {
        return;
    }
    // A forked child that execs (or fails to and calls _exit) before any line became hot is a
    // launcher's fork-then-exec: it writes nothing, as before these ends were covered.
    let forked = crate::PARENT_PID.load(Ordering::Relaxed) != 0;
    if forked && hot::used() == 0 && !matches!(why, Why::Signal(_)) {
        return;
    }
    let _keep = sys::KeepErrno::new();
    if SNAPSHOT.swap(true, Ordering::SeqCst) {
        // Another thread is writing (its own crash, exit or exec): let it finish.
        wait_until(|| !SNAPSHOT.load(Ordering::SeqCst));
        return;
    }
    let exit_writer = EXIT_WRITER.load(Ordering::SeqCst);
    if exit_writer != 0 {
        SNAPSHOT.store(false, Ordering::SeqCst);
        // The exit writer is at work (or done): its results are the complete ones. Wait for
        // it unless it is this very thread (a crash inside it: nothing to wait for).
        if exit_writer != sys::gettid() {
            wait_until(|| EXIT_DONE.load(Ordering::SeqCst));
        }
        return;
    }
    let me = {
        // SAFETY: this thread's own block.
        let l = unsafe { &*threads::local() };
        (!l.rec.is_null()).then_some(l.index)
    };
    hot::stop(me);
    WRITER.store(sys::gettid(), Ordering::Relaxed);
    let written = write_files(cfg, pid);
    WRITER.store(0, Ordering::Relaxed);
    if let Err(errno) = written {
        let dir = cfg.dir.as_os_str().as_encoded_bytes();
        let (mut n, mut e, mut s) = (Num::new(), Num::new(), Num::new());
        let (when, sig): (&[u8], &[u8]) = match why {
            Why::Signal(sig) => (b" at signal ", s.decimal(sig as u64)),
            Why::Exit => (b" at _exit", b""),
            Why::Exec => (b" before exec", b""),
        };
        sys::say_parts(&[
            b"cannot write the sharing results of process ",
            n.decimal(u64::from(pid)),
            b" into ",
            dir,
            when,
            sig,
            b": errno ",
            e.decimal(errno as u64),
        ]);
    }
    hot::resume();
    SNAPSHOT.store(false, Ordering::SeqCst);
}

/// A path under the run directory, NUL-terminated, in a fixed buffer.
struct CPath {
    buf: [u8; libc::PATH_MAX as usize],
    len: usize,
}

impl CPath {
    fn new(parts: &[&[u8]]) -> Result<CPath, i32> {
        let mut p = CPath {
            buf: [0; libc::PATH_MAX as usize],
            len: 0,
        };
        for part in parts {
            if p.len + part.len() >= p.buf.len() {
                return Err(libc::ENAMETOOLONG);
            }
            p.buf[p.len..p.len + part.len()].copy_from_slice(part);
            p.len += part.len();
        }
        p.buf[p.len] = 0;
        Ok(p)
    }

    fn ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }
}

fn errno() -> i32 {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn check(r: libc::c_int) -> Result<libc::c_int, i32> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn mkdir(path: &CPath) -> Result<(), i32> {
    // SAFETY: a NUL-terminated path.
    match check(unsafe { libc::mkdir(path.ptr(), 0o777) }) {
        Err(libc::EEXIST) | Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `path` afresh for writing: a stale one (an earlier snapshot's, interrupted) is
/// removed first; never follows a symlink.
fn create(path: &CPath) -> Result<libc::c_int, i32> {
    // SAFETY: NUL-terminated paths.
    unsafe {
        libc::unlink(path.ptr());
        check(libc::open(
            path.ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o666,
        ))
    }
}

fn rename(from: &CPath, to: &CPath) -> Result<(), i32> {
    // SAFETY: NUL-terminated paths.
    check(unsafe { libc::rename(from.ptr(), to.ptr()) }).map(|_| ())
}

/// Writes all of `bytes` to `fd`.
fn write_all(fd: libc::c_int, mut bytes: &[u8]) -> Result<(), i32> {
    while !bytes.is_empty() {
        // SAFETY: a valid buffer.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return Err(errno());
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// The output buffer: one snapshot at a time (SNAPSHOT), so one user.
struct Buffer(UnsafeCell<[u8; 1 << 16]>);
// SAFETY: only the thread that set SNAPSHOT uses it.
unsafe impl Sync for Buffer {}
static BUFFER: Buffer = Buffer(UnsafeCell::new([0; 1 << 16]));

/// A buffered writer to a file descriptor; the first error is kept and later writes dropped.
struct Out {
    fd: libc::c_int,
    buf: &'static mut [u8; 1 << 16],
    len: usize,
    error: Option<i32>,
}

impl Out {
    /// # Safety
    /// The caller holds SNAPSHOT (the buffer's only user).
    unsafe fn new(fd: libc::c_int) -> Out {
        Out {
            fd,
            // SAFETY: see above.
            buf: unsafe { &mut *BUFFER.0.get() },
            len: 0,
            error: None,
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        for chunk in b.chunks(self.buf.len() / 2) {
            if self.len + chunk.len() > self.buf.len() {
                self.flush_keeping_last();
            }
            self.buf[self.len..self.len + chunk.len()].copy_from_slice(chunk);
            self.len += chunk.len();
        }
    }

    /// Writes the buffer but its last byte, which `close` may still replace.
    fn flush_keeping_last(&mut self) {
        if self.len < 2 {
            return;
        }
        if self.error.is_none() {
            self.error = write_all(self.fd, &self.buf[..self.len - 1]).err();
        }
        self.buf[0] = self.buf[self.len - 1];
        self.len = 1;
    }

    fn flush(&mut self) {
        if self.error.is_none() {
            self.error = write_all(self.fd, &self.buf[..self.len]).err();
        }
        self.len = 0;
    }

    fn u64(&mut self, v: u64) {
        let mut n = Num::new();
        let digits = n.decimal(v);
        self.bytes(digits);
    }

    /// `"key":` (keys are plain ASCII).
    fn key(&mut self, key: &str) {
        self.bytes(b"\"");
        self.bytes(key.as_bytes());
        self.bytes(b"\":");
    }

    /// `"key":N,`
    fn field(&mut self, key: &str, v: u64) {
        self.key(key);
        self.u64(v);
        self.bytes(b",");
    }

    /// `"key":N,` or `"key":null,`
    fn option(&mut self, key: &str, v: Option<u64>) {
        match v {
            Some(v) => self.field(key, v),
            None => {
                self.key(key);
                self.bytes(b"null,");
            }
        }
    }

    /// A JSON string, escaped.
    fn string(&mut self, s: &str) {
        self.bytes(b"\"");
        for &b in s.as_bytes() {
            match b {
                b'"' => self.bytes(b"\\\""),
                b'\\' => self.bytes(b"\\\\"),
                0..=0x1f => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.bytes(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[usize::from(b >> 4)],
                        HEX[usize::from(b & 15)],
                    ]);
                }
                _ => self.bytes(&[b]),
            }
        }
        self.bytes(b"\"");
    }

    /// Replaces a trailing comma (the last member written) with `close`.
    fn close(&mut self, close: u8) {
        if self.len > 0 && self.buf[self.len - 1] == b',' {
            self.buf[self.len - 1] = close;
        } else {
            self.bytes(&[close]);
        }
    }

    /// Flushes and closes the file; the first error, if any.
    fn finish(mut self) -> Result<(), i32> {
        self.flush();
        // SAFETY: our own descriptor.
        let closed = check(unsafe { libc::close(self.fd) });
        match self.error {
            Some(e) => Err(e),
            None => closed.map(|_| ()),
        }
    }
}

/// Decimal digits of a number, formatted by hand.
struct Num([u8; 20]);

impl Num {
    fn new() -> Num {
        Num([0; 20])
    }

    fn decimal(&mut self, mut v: u64) -> &[u8] {
        let mut at = self.0.len();
        loop {
            at -= 1;
            self.0[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        &self.0[at..]
    }
}

/// Memory for sorting, from mmap (given back when dropped).
struct Scratch<T> {
    at: *mut T,
    len: usize,
}

impl<T: Copy> Scratch<T> {
    fn new(len: usize) -> Result<Scratch<T>, i32> {
        if len == 0 {
            return Ok(Scratch {
                at: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            });
        }
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(libc::ENOMEM)?;
        let at = sys::reserve(bytes, None).ok_or(libc::ENOMEM)?;
        Ok(Scratch {
            at: at as *mut T,
            len,
        })
    }

    fn slice(&mut self) -> &mut [T] {
        // SAFETY: `len` elements of zero-filled mmap memory (T is plain data here, for which
        // zero is a valid value), or a dangling pointer with length 0.
        unsafe { std::slice::from_raw_parts_mut(self.at, self.len) }
    }
}

impl<T> Drop for Scratch<T> {
    fn drop(&mut self) {
        if self.len > 0 {
            sys::release(self.at as usize, self.len * std::mem::size_of::<T>());
        }
    }
}

/// One access statistic of one thread, for sorting into lines.
#[derive(Clone, Copy)]
struct Ref {
    /// (slot, offset, size, kind, thread, pc): the order `output` writes them in.
    key: (u32, u8, u8, u8, u16, u64),
    entry: *const Entry,
}

/// Where a line's history is in the `.hist` file: its first entry's index and how many, when
/// the line has a window.
#[derive(Clone, Copy)]
struct Window {
    at: u64,
    entries: u64,
    kept: bool,
}

fn write_files(cfg: &config::Config, pid: u32) -> Result<(), i32> {
    let dir = cfg.dir.as_os_str().as_encoded_bytes();
    let mut n = Num::new();
    let pid_text = n.decimal(u64::from(pid));
    let maps = trace::layout::MAPS_DIR.as_bytes();
    mkdir(&CPath::new(&[dir, b"/sharing"])?)?;
    mkdir(&CPath::new(&[dir, b"/", maps])?)?;
    let now = sys::now_ns();
    let used = hot::used();

    // The history first: a reader that sees the JSON finds its history complete.
    let mut windows = Scratch::<Window>::new(used)?;
    let windows = windows.slice();
    let hist_tmp = CPath::new(&[dir, b"/sharing/", pid_text, b".hist.tmp"])?;
    // SAFETY: this thread holds SNAPSHOT.
    let mut out = unsafe { Out::new(create(&hist_tmp)?) };
    out.bytes(&HISTORY_MAGIC);
    let mut at = 0;
    for (i, w) in windows.iter_mut().enumerate() {
        let s = hot::slot(i);
        let window = u64::from(s.window.load(Ordering::Relaxed));
        let entries = s.next.load(Ordering::Relaxed).min(window);
        let first = s.first.load(Ordering::Relaxed);
        *w = Window {
            at,
            entries,
            kept: window > 0,
        };
        for k in 0..entries {
            out.bytes(&hot::history_word(first + k).to_le_bytes());
        }
        at += entries;
    }
    out.finish()?;
    rename(
        &hist_tmp,
        &CPath::new(&[dir, b"/sharing/", pid_text, b".hist"])?,
    )?;

    copy_maps(dir, maps, pid_text)?;

    let json_tmp = CPath::new(&[dir, b"/sharing/", pid_text, b".json.tmp"])?;
    // SAFETY: this thread holds SNAPSHOT.
    let mut out = unsafe { Out::new(create(&json_tmp)?) };
    write_json(&mut out, cfg, pid, now, windows)?;
    out.finish()?;
    rename(
        &json_tmp,
        &CPath::new(&[dir, b"/sharing/", pid_text, b".json"])?,
    )
}

/// `/proc/self/maps` copied to `maps/sharing-PID.maps`.
fn copy_maps(dir: &[u8], maps: &[u8], pid_text: &[u8]) -> Result<(), i32> {
    // SAFETY: a NUL-terminated path.
    let Ok(from) = check(unsafe {
        libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    }) else {
        // As the exit writer: no /proc, no maps (the reader names less).
        return Ok(());
    };
    let tmp = CPath::new(&[dir, b"/", maps, b"/sharing-", pid_text, b".maps.tmp"])?;
    let result = (|| {
        // SAFETY: this thread holds SNAPSHOT.
        let mut out = unsafe { Out::new(create(&tmp)?) };
        let mut chunk = [0u8; 4096];
        loop {
            // SAFETY: a valid buffer.
            let n = unsafe { libc::read(from, chunk.as_mut_ptr().cast(), chunk.len()) };
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            out.bytes(&chunk[..n as usize]);
        }
        out.finish()
    })();
    // SAFETY: our own descriptor.
    unsafe { libc::close(from) };
    result?;
    rename(
        &tmp,
        &CPath::new(&[dir, b"/", maps, b"/sharing-", pid_text, b".maps"])?,
    )
}

fn kind_name(k: u8) -> &'static str {
    match Kind::from_u8(k) {
        Kind::Read => "read",
        Kind::Write => "write",
        Kind::AtomicRead => "atomic-read",
        Kind::AtomicWrite => "atomic-write",
    }
}

/// A `trace::sharing::ProcessSharing` as serde writes it (member order aside).
fn write_json(
    out: &mut Out,
    cfg: &config::Config,
    pid: u32,
    now: u64,
    windows: &[Window],
) -> Result<(), i32> {
    let parent = crate::PARENT_PID.load(Ordering::Relaxed);
    out.bytes(b"{");
    out.field("version", u64::from(SHARING_VERSION));
    out.field("pid", u64::from(pid));
    out.option("parent_pid", (parent != 0).then_some(u64::from(parent)));
    out.key("program");
    out.string(crate::PROGRAM.get().map_or("", String::as_str));
    out.bytes(b",");
    out.field("line_size", u64::from(cfg.line_size));
    let hot_after = if cfg.exhaustive { 0 } else { cfg.hot_after };
    out.field("hot_after", u64::from(hot_after));
    out.field("sample_every", u64::from(cfg.sample_every));
    out.field("started_ns", crate::STARTED_NS.load(Ordering::Relaxed));
    out.field("ended_ns", now);

    // Threads, their totals, and how many statistics they hold.
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let mut totals = [0u64; 7];
    let mut entries = 0usize;
    out.key("threads");
    out.bytes(b"[");
    for i in 0..threads::count() {
        let Some((tid, created_by, start_routine, first_ns)) = threads::info(i) else {
            continue;
        };
        out.bytes(b"{");
        out.field("index", u64::from(i));
        out.field("tid", u64::from(tid));
        out.option("created_by", created_by.map(u64::from));
        out.option("start_routine", start_routine);
        out.field("first_ns", first_ns);
        out.close(b'}');
        out.bytes(b",");
        let r = threads::record(i);
        for (t, c) in totals.iter_mut().zip([
            &r.reads,
            &r.writes,
            &r.atomics,
            &r.transfers,
            &r.history_dropped,
            &r.allocations,
            &r.frees,
        ]) {
            *t += get(c);
        }
        // SAFETY: every thread is stopped from changing its table (hot::stop).
        entries += unsafe { (*r.stats.get()).iter().count() };
    }
    out.close(b']');
    out.bytes(b",");

    // Every statistic, sorted by line and then as `output` orders a line's accesses.
    let mut refs = Scratch::<Ref>::new(entries)?;
    let refs = refs.slice();
    let mut n = 0;
    for i in 0..threads::count() {
        if threads::info(i).is_none() {
            continue;
        }
        // SAFETY: as above.
        let table = unsafe { &*threads::record(i).stats.get() };
        for e in table.iter() {
            if n == refs.len() {
                break;
            }
            refs[n] = Ref {
                key: (e.slot, e.offset, e.size, e.kind, i, e.pc),
                entry: e,
            };
            n += 1;
        }
    }
    let refs = &mut refs[..n];
    refs.sort_unstable_by_key(|r| r.key);

    let mut beyond_window = 0u64;
    let mut next = 0;
    out.key("lines");
    out.bytes(b"[");
    for (i, w) in windows.iter().enumerate() {
        let s = hot::slot(i);
        let freed = s.end.load(Ordering::Acquire) == hot::FREED;
        out.bytes(b"{");
        out.field("id", i as u64 + 1);
        out.field("address", s.line.load(Ordering::Relaxed));
        out.field("hot_since_ns", s.hot_since.load(Ordering::Relaxed));
        out.field(
            "ended_ns",
            if freed {
                s.ended_ns.load(Ordering::Relaxed)
            } else {
                now
            },
        );
        out.key("end");
        out.bytes(if freed { b"\"freed\"," } else { b"\"exit\"," });
        out.field(
            "transfers_before_hot",
            s.transfers_before_hot.load(Ordering::Relaxed),
        );
        let mut objects = [Object::default(); MAX_OBJECTS];
        let count = hot::objects_into(i, &mut objects);
        let objects = &mut objects[..count];
        objects.sort_unstable_by_key(|o| (o.block.allocated_ns, o.block.address));
        out.key("objects");
        out.bytes(b"[");
        for o in objects.iter() {
            out.bytes(b"{");
            out.field("address", o.block.address);
            out.field("size", o.block.size);
            out.field("site", o.block.site);
            out.key("allocator");
            out.string(
                ALLOCATORS
                    .get(usize::from(o.block.allocator))
                    .copied()
                    .unwrap_or("malloc"),
            );
            out.bytes(b",");
            out.field("thread", u64::from(o.block.thread));
            out.field("allocated_ns", o.block.allocated_ns);
            out.option("freed_ns", (o.freed_ns != 0).then_some(o.freed_ns));
            out.close(b'}');
            out.bytes(b",");
        }
        out.close(b']');
        out.bytes(b",");
        // Statistics of slots beyond `used` (promoted meanwhile) are left out, as by `output`.
        let slot = i as u32 + 1;
        while next < refs.len() && refs[next].key.0 < slot {
            next += 1;
        }
        let mut counted = 0u64;
        out.key("accesses");
        out.bytes(b"[");
        while next < refs.len() && refs[next].key.0 == slot {
            let r = refs[next];
            next += 1;
            // SAFETY: an entry of a table nobody changes (hot::stop).
            let e = unsafe { &*r.entry };
            counted += e.count;
            out.bytes(b"{");
            out.field("offset", u64::from(e.offset));
            out.field("size", u64::from(e.size));
            out.key("kind");
            out.string(kind_name(e.kind));
            out.bytes(b",");
            out.field("thread", u64::from(r.key.4));
            out.field("pc", e.pc);
            out.field("count", e.count);
            out.field("transfers", e.transfers);
            let mut cpus = [0u16; CPUS];
            let c = e.cpus();
            cpus[..c.len()].copy_from_slice(c);
            let cpus = &mut cpus[..c.len()];
            cpus.sort_unstable();
            out.key("cpus");
            out.bytes(b"[");
            for &cpu in cpus.iter() {
                out.u64(u64::from(cpu));
                out.bytes(b",");
            }
            out.close(b']');
            out.close(b'}');
            out.bytes(b",");
        }
        out.close(b']');
        out.bytes(b",");
        out.key("history");
        if w.kept {
            let beyond = counted.saturating_sub(w.entries);
            beyond_window += beyond;
            out.bytes(b"{");
            out.field("first", w.at);
            out.field("entries", w.entries);
            out.field("beyond", beyond);
            out.close(b'}');
        } else {
            out.bytes(b"null");
        }
        out.bytes(b"}");
        out.bytes(b",");
    }
    out.close(b']');
    out.bytes(b",");

    let [reads, writes, atomics, transfers, history_dropped, allocations, frees] = totals;
    out.key("totals");
    out.bytes(b"{");
    out.field("reads", reads);
    out.field("writes", writes);
    out.field("atomics", atomics);
    out.field("transfers", transfers);
    out.field("hot_lines", windows.len() as u64);
    out.field("hot_lines_dropped", hot::dropped());
    out.field("history_beyond_window", beyond_window);
    out.field("history_dropped", history_dropped);
    out.field("allocations", allocations);
    out.field("frees", frees);
    out.close(b'}');
    out.bytes(b"}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_formatted_by_hand() {
        let mut n = Num::new();
        assert_eq!(n.decimal(0), b"0");
        assert_eq!(n.decimal(7), b"7");
        assert_eq!(n.decimal(1234567890), b"1234567890");
        assert_eq!(n.decimal(u64::MAX), u64::MAX.to_string().as_bytes());
    }

    #[test]
    fn json_members_strings_and_lists_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = CPath::new(&[dir.path().as_os_str().as_encoded_bytes(), b"/out.json"]).unwrap();
        // The buffer's one user: this test (SNAPSHOT held for it).
        assert!(!SNAPSHOT.swap(true, Ordering::SeqCst));
        // SAFETY: see above.
        let mut out = unsafe { Out::new(create(&path).unwrap()) };
        out.bytes(b"{");
        out.field("n", u64::MAX);
        out.option("none", None);
        out.option("some", Some(3));
        out.key("s");
        out.string("a \"quoted\" \\ path\n\u{1}é");
        out.bytes(b",");
        out.key("empty");
        out.bytes(b"[");
        out.close(b']');
        out.bytes(b",");
        out.key("list");
        out.bytes(b"[");
        // More than the buffer holds, to cross a flush.
        for i in 0..20_000u64 {
            out.u64(i);
            out.bytes(b",");
        }
        out.close(b']');
        out.bytes(b",");
        out.close(b'}');
        out.finish().unwrap();
        SNAPSHOT.store(false, Ordering::SeqCst);
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("out.json")).unwrap()).unwrap();
        assert_eq!(v["n"], u64::MAX);
        assert!(v["none"].is_null());
        assert_eq!(v["some"], 3);
        assert_eq!(v["s"], "a \"quoted\" \\ path\n\u{1}é");
        assert_eq!(v["empty"], serde_json::json!([]));
        assert_eq!(v["list"].as_array().unwrap().len(), 20_000);
        assert_eq!(v["list"][19_999], 19_999);
    }

    #[test]
    fn files_are_created_afresh_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let target = d.join("target");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, d.join("link")).unwrap();
        let link = CPath::new(&[d.as_os_str().as_encoded_bytes(), b"/link"]).unwrap();
        // The stale name is removed, so the symlink goes and a new file is made in its place.
        let fd = create(&link).unwrap();
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(d.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
