//! Per-thread recording state: the thread's ring, its call-site and object tables, and the
//! guard that keeps a signal handler (or the probe's own system calls) from recording into a
//! ring that is half-way through a record.
//!
//! A thread's ring is created on its first event: a file `<pid>-<tid>-<instance>.ring` in the
//! rings directory, mapped shared and pre-faulted, so that recording is a store into memory.
//! Its size is granted by the run's ring budget (`crate::budget`): what was asked for while
//! the budget allows, smaller as it fills, and no ring (the thread counted as not recorded)
//! when it is full. At thread exit the ring is closed and unmapped, so that once the recorder
//! has drained it and given its bytes back, nothing of it is left.

use crate::table::{AddrTable, Lookup};
use crate::{clock, config};
use std::sync::atomic::{AtomicU32, Ordering};
use trace::ring::{self, Producer, RingInfo};
use trace::{EventKind, ObjectKind, Record, NO_OBJECT, NO_SITE};

/// Fresh is 0: the all-zero state is a thread that has not recorded yet.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    /// No ring yet: the next event creates it.
    Fresh = 0,
    /// Recording.
    Active,
    /// Inside the probe's own code: nested calls pass through unrecorded.
    Busy,
    /// Recording is off for this thread (ring creation failed, or the thread has ended).
    Off,
}

/// All-zero is the initial state (it lives in zero-filled thread-local storage, see `tls`).
#[repr(C)]
pub struct ThreadState {
    status: Status,
    /// Attached once the ring exists.
    producer: Producer,
    ring_len: usize,
    sites: AddrTable,
    objects: AddrTable,
    /// The last object and site looked up, with their ids: a lock is usually released right
    /// after it is taken, and a loop takes it from the same site.
    last_object: (u64, u32),
    last_site: (u64, u16),
    /// The pid the ring belongs to (a forked child must not write into its parent's ring).
    pid: u32,
    /// Who created this thread (0 for a process's first thread), for its ThreadStart event.
    pub creator: u32,
}

tlsblock::zeroed_thread_local!(state, ThreadState, "contend_probe_thread_tls", 512);

/// Call-site ids are u16 (NO_SITE excluded); object ids u32 (NO_OBJECT excluded).
const MAX_SITES: u32 = NO_SITE as u32;
const MAX_OBJECTS: u32 = NO_OBJECT - 1;

/// A pthread key whose destructor ends a thread's stream at thread exit. Not a Rust
/// `thread_local!` with a destructor: registering one calls `__cxa_thread_atexit_impl`, which
/// takes the dynamic linker's lock, and a thread started by a library constructor inside
/// `dlopen` (which holds that lock while it waits for the thread) would deadlock.
static EXIT_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

extern "C" fn on_thread_exit(_value: *mut libc::c_void) {
    end_thread();
}

/// Creates the exit key; called from the library's constructor, before threads record.
pub fn create_exit_key() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a valid out-pointer and a plain function as destructor.
    if unsafe { libc::pthread_key_create(&mut key, Some(on_thread_exit)) } == 0 {
        EXIT_KEY.store(key, Ordering::Release);
    }
}

/// Asks for `on_thread_exit` when this thread ends (the key's value must be non-null).
fn register_exit() {
    let key = EXIT_KEY.load(Ordering::Acquire);
    if key != u32::MAX {
        // SAFETY: a key created by create_exit_key; the value is only a marker.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
    }
}

/// Runs `f` with this thread's state if it is recording, marking it busy meanwhile; returns
/// None (recording nothing) when recording is off, the state is busy (a nested call), or the
/// thread-local storage is gone (very late in thread exit).
#[inline]
pub fn with_recording<R>(f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
    if !config::recording() {
        return None;
    }
    // SAFETY: the state is only reached through this function and `end_thread`/
    // `after_fork_in_child`, each of which first moves the status out of Active/Fresh, so no two
    // live &mut exist even when a signal handler re-enters.
    let st = unsafe { &mut *state() };
    match st.status {
        Status::Active => {}
        Status::Fresh => {
            st.status = Status::Busy;
            if !st.open_ring() {
                st.status = Status::Off;
                return None;
            }
        }
        Status::Busy => {
            if st.producer.is_attached() {
                st.producer.count_dropped();
            }
            return None;
        }
        Status::Off => return None,
    }
    st.status = Status::Busy;
    let r = f(st);
    st.status = Status::Active;
    Some(r)
}

impl ThreadState {
    fn open_ring(&mut self) -> bool {
        // The probe's system calls must not change the program's errno.
        let saved = errno();
        let ok = self.open_ring_inner();
        set_errno(saved);
        if ok {
            // Register the exit hook now that there is something to close.
            register_exit();
            let now = clock::now();
            self.emit(EventKind::ThreadStart, 0, self.creator, NO_SITE, now);
        }
        ok
    }

    fn open_ring_inner(&mut self) -> bool {
        let budget = crate::budget::get();
        let capacity = match budget {
            Some(b) => match b.reserve(config::get().ring_bytes) {
                Some(c) => c,
                None => {
                    b.count_refused();
                    return false;
                }
            },
            None => config::get().ring_bytes,
        };
        let made = self.make_ring(capacity);
        if !made {
            if let Some(b) = budget {
                b.release(ring::file_len(capacity));
                b.count_failed();
            }
        }
        made
    }

    /// Creates, maps and publishes a ring of `capacity` bytes for this thread.
    fn make_ring(&mut self, capacity: u64) -> bool {
        let cfg = config::get();
        // SAFETY: getpid/gettid have no preconditions.
        let (pid, tid) = unsafe { (libc::getpid() as u32, libc::gettid() as u32) };
        let mut path = PathBuf::new();
        path.push(cfg.dir());
        path.push(b"/");
        path.push_num(u64::from(pid));
        path.push(b"-");
        path.push_num(u64::from(tid));
        path.push(b"-");
        path.push_num(cfg.instance);
        // Created under a temporary name and renamed once initialised, so the recorder never
        // maps a half-made ring.
        let mut done = PathBuf::new();
        done.push(path.bytes());
        done.push(b".ring\0");
        path.push(b".ring.tmp\0");
        if path.overflowed() || done.overflowed() {
            return false;
        }
        let len = ring::file_len(capacity) as usize;
        // SAFETY: a NUL-terminated path; the fd is closed below on every path.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return false;
        }
        // SAFETY: fd is open; the mapping is checked before use.
        let base = unsafe {
            if libc::ftruncate(fd, len as libc::off_t) != 0 {
                libc::close(fd);
                return false;
            }
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            );
            libc::close(fd);
            p
        };
        if base == libc::MAP_FAILED {
            return false;
        }
        let mut name = [0u8; 16];
        // SAFETY: PR_GET_NAME writes at most 16 bytes.
        unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
        let name_len = name.iter().position(|&b| b == 0).unwrap_or(16);
        let info = RingInfo {
            capacity,
            pid,
            tid,
            clock: if clock::uses_counter() { 2 } else { 1 },
            start: clock::now(),
        };
        // SAFETY: a fresh zero-filled shared mapping of file_len(capacity) bytes; both paths
        // are NUL-terminated.
        unsafe {
            ring::init(base.cast(), &info, &name[..name_len]);
            if libc::rename(path.as_ptr(), done.as_ptr()) != 0 {
                libc::munmap(base, len);
                libc::unlink(path.as_ptr());
                return false;
            }
        }
        // SAFETY: just initialised with this capacity; it stays mapped until this thread's
        // state drops it (after fork in the child) — never while the Producer is in use.
        self.producer = unsafe { Producer::new(base.cast(), capacity) };
        self.ring_len = len;
        self.pid = pid;
        crate::maps::snapshot_once(pid);
        true
    }

    #[inline]
    fn emit(&mut self, kind: EventKind, aux: u8, obj: u32, site: u16, ts: u64) {
        if self.producer.is_attached() {
            self.producer.push(&Record {
                ts,
                kind,
                aux,
                site,
                obj,
            });
        }
    }

    /// The ring's id for a call site, defining it in the ring the first time.
    #[inline]
    fn site(&mut self, address: u64) -> u16 {
        if self.last_site.0 == address {
            return self.last_site.1;
        }
        let id = self.site_slow(address);
        self.last_site = (address, id);
        id
    }

    fn site_slow(&mut self, address: u64) -> u16 {
        match self.sites.get_or_insert(address, MAX_SITES) {
            Lookup::Known(id) => id as u16,
            Lookup::New(id) => {
                let def = Record {
                    ts: address,
                    kind: EventKind::Unknown(ring::DEF_SITE),
                    aux: 0,
                    site: id as u16,
                    obj: 0,
                };
                if self.producer.is_attached() {
                    self.producer.push(&def);
                }
                id as u16
            }
            Lookup::Full => NO_SITE,
        }
    }

    /// The ring's id for a lock, condition variable or barrier, defining it the first time.
    #[inline]
    fn object(&mut self, address: u64, kind: ObjectKind) -> u32 {
        if self.last_object.0 == address {
            return self.last_object.1;
        }
        let id = self.object_slow(address, kind);
        self.last_object = (address, id);
        id
    }

    fn object_slow(&mut self, address: u64, kind: ObjectKind) -> u32 {
        match self.objects.get_or_insert(address, MAX_OBJECTS) {
            Lookup::Known(id) => id,
            Lookup::New(id) => {
                let def = Record {
                    ts: address,
                    kind: EventKind::Unknown(ring::DEF_OBJECT),
                    aux: kind as u8,
                    site: NO_SITE,
                    obj: id,
                };
                if self.producer.is_attached() {
                    self.producer.push(&def);
                }
                id
            }
            Lookup::Full => NO_OBJECT,
        }
    }

    /// Records an event about an object at a call site.
    #[inline]
    pub fn record(
        &mut self,
        kind: EventKind,
        aux: u8,
        object: (*const libc::c_void, ObjectKind),
        call_site: usize,
        ts: u64,
    ) {
        let obj = self.object(object.0 as u64, object.1);
        let site = self.site(call_site as u64);
        self.emit(kind, aux, obj, site, ts);
    }

    /// Records a release: its object, no call site (the acquisition's site names the hold).
    #[inline]
    pub fn record_release(&mut self, aux: u8, object: (*const libc::c_void, ObjectKind), ts: u64) {
        let obj = self.object(object.0 as u64, object.1);
        self.emit(EventKind::LockReleased, aux, obj, NO_SITE, ts);
    }

    /// Records a heap allocation (two records: see `trace::alloc`).
    pub fn record_alloc(&mut self, address: usize, size: usize, call_site: usize, ts: u64) {
        let alloc = trace::alloc::Alloc {
            ts,
            site: self.site(call_site as u64),
            address: address as u64,
            size: trace::alloc::saturated_size(size),
        };
        if let Some([first, second]) = alloc.encode() {
            if self.producer.is_attached() {
                self.producer.push(&first);
                self.producer.push(&second);
            }
        }
    }

    /// Records an event that names no object (thread start, fork).
    pub fn record_plain(&mut self, kind: EventKind, obj: u32, call_site: usize, ts: u64) {
        let site = if call_site == 0 {
            NO_SITE
        } else {
            self.site(call_site as u64)
        };
        self.emit(kind, 0, obj, site, ts);
    }
}

/// Ends this thread's stream: called at thread exit, and for the main thread at process exit.
pub fn end_thread() {
    // SAFETY: see `with_recording`; the status moves to Off before anything else.
    let st = unsafe { &mut *state() };
    if st.status != Status::Active {
        st.status = Status::Off;
        return;
    }
    st.status = Status::Off;
    let now = clock::now();
    st.emit(EventKind::ThreadEnd, 0, 0, NO_SITE, now);
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    let n = name.iter().position(|&b| b == 0).unwrap_or(16);
    if st.producer.is_attached() {
        // SAFETY: the ring is still mapped; the name field is the producer's to write.
        unsafe { ring::set_name(st.producer.base(), &name[..n]) };
        st.producer.close();
        // Unmapped now, so the ring's memory goes once the recorder has drained it (status
        // is Off: nothing records into it any more).
        // SAFETY: the mapping was made in make_ring with this length.
        unsafe { libc::munmap(st.producer.base().cast(), st.ring_len) };
        st.producer = Producer::detached();
    }
}

/// In a forked child: the ring belongs to the parent. Drop it (unmap, never write to it) and
/// start afresh, so the child records into a ring of its own.
pub fn after_fork_in_child() {
    // SAFETY: the child has a single thread, and the handler runs outside any wrapper.
    let st = unsafe { &mut *state() };
    if st.producer.is_attached() {
        // SAFETY: the mapping was made in make_ring with this length.
        unsafe { libc::munmap(st.producer.base().cast(), st.ring_len) };
        st.producer = Producer::detached();
    }
    st.sites.clear();
    st.objects.clear();
    st.last_object = (0, NO_OBJECT);
    st.last_site = (0, NO_SITE);
    st.creator = 0;
    st.status = Status::Fresh;
    crate::maps::forget_snapshot();
}

pub fn set_creator(tid: u32) {
    // SAFETY: called at the start of a new thread, before any recording on it.
    unsafe { (*state()).creator = tid };
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v };
}

/// A file path built on the stack (no malloc).
pub struct PathBuf {
    buf: [u8; config::MAX_DIR + 96],
    len: usize,
    overflowed: bool,
}

impl PathBuf {
    pub fn new() -> PathBuf {
        PathBuf {
            buf: [0; config::MAX_DIR + 96],
            len: 0,
            overflowed: false,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > self.buf.len() {
            self.overflowed = true;
            return;
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    pub fn push_num(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let d = digits;
        self.push(&d[i..]);
    }

    pub fn as_ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn overflowed(&self) -> bool {
        self.overflowed
    }
}

pub(crate) use self::PathBuf as StackPath;
