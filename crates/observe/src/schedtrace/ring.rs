//! One CPU's perf ring buffer: the mmap'd control page plus `2^n` data pages, read as the
//! kernel's `perf_event_mmap_page` protocol says: load `data_head` with acquire ordering,
//! read the records between our tail and that head (a record may wrap around the end of the
//! data area), then store `data_tail` with release ordering so the kernel may reuse the space.
//!
//! The mapping is read-write, so the kernel never overwrites unread data: when the ring is
//! full it drops records and later writes a `PERF_RECORD_LOST` with their count.

use perf_event_open_sys::bindings::perf_event_mmap_page;
use std::io;
use std::mem::offset_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::decode::HEADER_SIZE;

pub(crate) struct Ring {
    pub cpu: u32,
    base: NonNull<u8>,
    map_len: usize,
    data_off: usize,
    /// Bytes in the data area; a power of two.
    data_size: usize,
    /// The events writing into this ring; `fds[0]` owns the mapping, the others were
    /// redirected to it with `PERF_EVENT_IOC_SET_OUTPUT`. Closed after the unmap (field order
    /// in `Drop`).
    pub fds: Vec<OwnedFd>,
}

// SAFETY: the mapping is owned by this value alone (no other userspace reference exists), and
// every access goes through `&self`/`&mut self` methods; moving it to another thread is fine.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps one control page and `data_pages` (a power of two) data pages of `fd`.
    pub fn map(cpu: u32, fd: OwnedFd, data_pages: usize, page_size: usize) -> io::Result<Ring> {
        Ring::mapped(cpu, Some(fd), data_pages, page_size)
    }

    /// A ring over anonymous shared memory, for tests that play the kernel's part.
    #[cfg(test)]
    pub fn anonymous(data_pages: usize, page_size: usize) -> io::Result<Ring> {
        Ring::mapped(0, None, data_pages, page_size)
    }

    fn mapped(
        cpu: u32,
        fd: Option<OwnedFd>,
        data_pages: usize,
        page_size: usize,
    ) -> io::Result<Ring> {
        if !data_pages.is_power_of_two() || !page_size.is_power_of_two() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let map_len = data_pages
            .checked_add(1)
            .and_then(|p| p.checked_mul(page_size))
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let (raw_fd, flags) = match &fd {
            Some(fd) => (fd.as_raw_fd(), libc::MAP_SHARED),
            None => (-1, libc::MAP_SHARED | libc::MAP_ANONYMOUS),
        };
        // SAFETY: a fresh shared mapping; no Rust reference aliases it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw_fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        let mut ring = Ring {
            cpu,
            base,
            map_len,
            data_off: page_size,
            data_size: data_pages * page_size,
            fds: fd.into_iter().collect(),
        };
        // Kernels since 4.1 say where the data area is; older ones leave 0 and use page 1.
        let off = ring.page_u64(offset_of!(perf_event_mmap_page, data_offset));
        let size = ring.page_u64(offset_of!(perf_event_mmap_page, data_size));
        if let (Ok(off), Ok(size)) = (usize::try_from(off), usize::try_from(size)) {
            if size != 0
                && size.is_power_of_two()
                && off.checked_add(size).is_some_and(|end| end <= map_len)
            {
                ring.data_off = off;
                ring.data_size = size;
            }
        }
        Ok(ring)
    }

    fn atomic(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: `offset` is a field offset of perf_event_mmap_page, 8-byte aligned, inside the
        // first (control) page, which stays mapped for `self`'s lifetime. The kernel updates
        // these words concurrently, hence atomics.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    fn page_u64(&self, offset: usize) -> u64 {
        self.atomic(offset).load(Ordering::Relaxed)
    }

    /// Bytes in the data area.
    pub fn capacity(&self) -> u64 {
        self.data_size as u64
    }

    /// Bytes written by the kernel and not yet consumed.
    pub fn pending(&self) -> u64 {
        let head = self
            .atomic(offset_of!(perf_event_mmap_page, data_head))
            .load(Ordering::Acquire);
        head.wrapping_sub(self.page_u64(offset_of!(perf_event_mmap_page, data_tail)))
    }

    /// `len` bytes of the data area starting at ring position `pos`, as one slice: borrowed
    /// when contiguous, copied into `scratch` when the range wraps around the end.
    fn bytes<'a>(&'a self, pos: u64, len: usize, scratch: &'a mut Vec<u8>) -> &'a [u8] {
        debug_assert!(len <= self.data_size);
        let start = (pos as usize) & (self.data_size - 1);
        let first = len.min(self.data_size - start);
        // SAFETY: [data_off, data_off + data_size) is inside the mapping; start < data_size and
        // start + first <= data_size, and len - first < data_size. The range lies between the
        // tail we have not yet released and the head the kernel published, so the kernel does
        // not write it while we read.
        unsafe {
            let data = self.base.as_ptr().add(self.data_off);
            if first == len {
                return std::slice::from_raw_parts(data.add(start), len);
            }
            scratch.clear();
            scratch.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            scratch.extend_from_slice(std::slice::from_raw_parts(data, len - first));
        }
        scratch
    }

    /// Hands every whole record between the tail and the head seen on entry to `f` (header
    /// included), then releases them to the kernel. Returns how many times the ring's contents
    /// could not be framed (a header with an impossible size); the rest of the ring is then
    /// skipped, so that one bad header cannot make the reader loop or read out of bounds.
    pub fn drain(&mut self, scratch: &mut Vec<u8>, mut f: impl FnMut(&[u8])) -> u64 {
        let head_word = offset_of!(perf_event_mmap_page, data_head);
        let tail_word = offset_of!(perf_event_mmap_page, data_tail);
        let head = self.atomic(head_word).load(Ordering::Acquire);
        // Only this reader writes data_tail.
        let mut tail = self.page_u64(tail_word);
        let mut broken = 0;
        if head.wrapping_sub(tail) > self.data_size as u64 {
            // Cannot happen with a read-write mapping; do not trust either pointer.
            broken += 1;
            tail = head;
        }
        while tail != head {
            let left = head.wrapping_sub(tail);
            if left < HEADER_SIZE as u64 {
                broken += 1;
                tail = head;
                break;
            }
            let hdr = self.bytes(tail, HEADER_SIZE, scratch);
            let size = u64::from(u16::from_ne_bytes([hdr[6], hdr[7]]));
            if size < HEADER_SIZE as u64 || size > left {
                broken += 1;
                tail = head;
                break;
            }
            f(self.bytes(tail, size as usize, scratch));
            tail = tail.wrapping_add(size);
        }
        self.atomic(tail_word).store(tail, Ordering::Release);
        broken
    }
}

#[cfg(test)]
impl Ring {
    /// Test side of the protocol: writes `bytes` at ring position `pos` (wrapping) and
    /// publishes `head`.
    pub fn kernel_write(&mut self, pos: u64, bytes: &[u8], head: u64) {
        for (i, b) in bytes.iter().enumerate() {
            let at = (pos as usize + i) & (self.data_size - 1);
            // SAFETY: at < data_size, inside the data area.
            unsafe { *self.base.as_ptr().add(self.data_off + at) = *b };
        }
        self.atomic(offset_of!(perf_event_mmap_page, data_head))
            .store(head, Ordering::Release);
    }

    pub fn tail(&self) -> u64 {
        self.page_u64(offset_of!(perf_event_mmap_page, data_tail))
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/map_len are exactly what mmap returned; no reference into the mapping
        // outlives `self` (every borrow is tied to `&self`).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
        // `fds` are closed when the fields drop, after this.
    }
}
