//! User stacks of the off-CPU blocks (`stacks/offcpu-PID.ustk`, beside the process's
//! `streams/offcpu-PID.cst`): the registers an unwinder starts from and the bytes of the user
//! stack the kernel copied at the switch out (`PERF_SAMPLE_STACK_USER`, only the `dyn_size`
//! bytes in use). Unwound at load (`symbolize::unwind`), so recording stays a copy.
//!
//! A separate file, not chunks of the stream: the stream reader refuses chunk kinds it does
//! not know, and stacks are two orders of magnitude larger than the records.
//!
//! Layout (little-endian; docs/formats.md §2.3b):
//! - header, [`HEADER_SIZE`] bytes: `CNTDUSTK`, version u32, architecture u32 ([`Arch`]),
//!   reserved u64, reserved u32, CRC-32 of the 28 bytes before it;
//! - entries: length u32 (of the body), CRC-32 u32 (of the body), body: index u32, tid u32,
//!   ts u64, registers 4 × u64 ([`Regs`]), stack length u32, reserved u32, the stack bytes.
//!
//! The stream's [`crate::format::EventKind::OffCpuStack`] record names an entry by its index
//! (0, 1, 2... in writing order). A reader checks every length against the file and
//! [`MAX_STACK_BYTES`], and each entry's CRC; the first bad or cut entry ends the reading and
//! what is left is counted, never guessed at.

use std::collections::HashMap;
use std::io::{self, Write};

pub const MAGIC: &[u8; 8] = b"CNTDUSTK";
pub const VERSION: u32 = 1;
pub const HEADER_SIZE: usize = 32;
/// Bytes before an entry's body: its length and CRC.
pub const ENTRY_PREFIX: usize = 8;
/// The fixed part of an entry's body, before the stack bytes.
pub const BODY_FIXED: usize = 56;
/// The largest stack copy kept: the kernel copies at most 65528 bytes (`sample_stack_user` is
/// a u32 below 64 KiB, 8-aligned).
pub const MAX_STACK_BYTES: usize = 65536;
/// Directory of the stack files in a run directory.
pub const STACKS_DIR: &str = "stacks";
/// Extension of a stack file.
pub const EXT: &str = "ustk";

/// The stack file of an off-CPU stream: `streams/offcpu-7.2.cst` → `stacks/offcpu-7.2.ustk`.
pub fn sidecar_of(stream_file: &str) -> Option<String> {
    let name = stream_file.rsplit('/').next()?;
    let stem = name.strip_suffix(&format!(".{}", crate::rundir::STREAM_EXT))?;
    Some(format!("{STACKS_DIR}/{stem}.{EXT}"))
}

/// The architecture whose registers an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Arch {
    X86_64 = 1,
    Aarch64 = 2,
}

impl Arch {
    /// The architecture contend runs on, if its registers are known.
    pub fn native() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::Aarch64)
        } else {
            None
        }
    }

    fn from_u32(v: u32) -> Option<Arch> {
        match v {
            1 => Some(Arch::X86_64),
            2 => Some(Arch::Aarch64),
            _ => None,
        }
    }
}

/// The registers an unwinder starts from: x86-64 ip sp bp (and 0); aarch64 pc sp x29 lr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Regs {
    pub ip: u64,
    pub sp: u64,
    pub fp: u64,
    pub lr: u64,
}

/// Why a block has no stack (`aux` of an `OffCpuStack` record whose `obj` is `NO_OBJECT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoStack {
    /// The run's stack budget was spent.
    OverBudget,
    /// The sample had no user stack (a kernel thread, or the copy faulted: `dyn_size` 0).
    Empty,
    /// Writing the stack file failed.
    Unwritten,
    /// A newer writer's reason.
    Other(u8),
}

impl NoStack {
    pub fn to_u8(self) -> u8 {
        match self {
            NoStack::OverBudget => 1,
            NoStack::Empty => 2,
            NoStack::Unwritten => 3,
            NoStack::Other(v) => v,
        }
    }

    pub fn from_u8(v: u8) -> NoStack {
        match v {
            1 => NoStack::OverBudget,
            2 => NoStack::Empty,
            3 => NoStack::Unwritten,
            v => NoStack::Other(v),
        }
    }
}

/// One stack entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackEntry<'a> {
    pub index: u32,
    pub tid: u32,
    pub ts: u64,
    pub regs: Regs,
    pub stack: &'a [u8],
}

fn header(arch: Arch) -> [u8; HEADER_SIZE] {
    let mut b = [0u8; HEADER_SIZE];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(arch as u32).to_le_bytes());
    let crc = crc32fast::hash(&b[0..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Encodes one entry (prefix and body), or `None` when the stack is longer than allowed.
pub fn encode_entry(e: &StackEntry<'_>) -> Option<Vec<u8>> {
    if e.stack.len() > MAX_STACK_BYTES {
        return None;
    }
    let mut body = Vec::with_capacity(BODY_FIXED + e.stack.len());
    body.extend_from_slice(&e.index.to_le_bytes());
    body.extend_from_slice(&e.tid.to_le_bytes());
    body.extend_from_slice(&e.ts.to_le_bytes());
    for r in [e.regs.ip, e.regs.sp, e.regs.fp, e.regs.lr] {
        body.extend_from_slice(&r.to_le_bytes());
    }
    body.extend_from_slice(&(e.stack.len() as u32).to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(e.stack);
    let mut out = Vec::with_capacity(ENTRY_PREFIX + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Some(out)
}

/// Writes a stack file: the header at creation, then entries numbered in order. Buffers up to
/// `flush_at` bytes between writes (the sink may open its file per write).
pub struct StackWriter<W: Write> {
    sink: W,
    buf: Vec<u8>,
    flush_at: usize,
    next: u32,
    /// Bytes written or buffered, header included.
    pub bytes: u64,
}

impl<W: Write> StackWriter<W> {
    pub fn new(sink: W, arch: Arch, flush_at: usize) -> StackWriter<W> {
        let mut buf = Vec::with_capacity(flush_at.min(1 << 20));
        buf.extend_from_slice(&header(arch));
        StackWriter {
            sink,
            buf,
            flush_at,
            next: 0,
            bytes: HEADER_SIZE as u64,
        }
    }

    /// Bytes an entry with `stack_len` bytes of stack takes.
    pub fn entry_size(stack_len: usize) -> u64 {
        (ENTRY_PREFIX + BODY_FIXED + stack_len) as u64
    }

    /// Appends an entry; returns its index. A stack longer than [`MAX_STACK_BYTES`] is refused
    /// (`InvalidInput`) and takes no index.
    pub fn push(&mut self, tid: u32, ts: u64, regs: Regs, stack: &[u8]) -> io::Result<u32> {
        let index = self.next;
        let bytes = encode_entry(&StackEntry {
            index,
            tid,
            ts,
            regs,
            stack,
        })
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.next += 1;
        self.bytes += bytes.len() as u64;
        self.buf.extend_from_slice(&bytes);
        if self.buf.len() >= self.flush_at {
            self.flush()?;
        }
        Ok(index)
    }

    /// Writes what is buffered (all or nothing is dropped from the buffer).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = self.sink.write_all(&self.buf);
        self.buf.clear();
        r
    }

    pub fn into_inner(mut self) -> io::Result<W> {
        self.flush()?;
        Ok(self.sink)
    }
}

/// Why a stack file was refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StackFileError {
    #[error("shorter than its {HEADER_SIZE}-byte header")]
    Short,
    #[error("not a contend stack file (bad magic)")]
    Magic,
    #[error("header checksum mismatch")]
    HeaderCrc,
    #[error("version {0}, this contend reads version {VERSION}")]
    Version(u32),
    #[error("unknown architecture {0}")]
    Arch(u32),
}

/// A stack file read: its entries by index, and what could not be read.
#[derive(Debug, Default)]
pub struct StackFile<'a> {
    pub arch: Option<Arch>,
    pub entries: HashMap<u32, StackEntry<'a>>,
    /// Entries refused (bad CRC, hostile length, duplicate index) and bytes left unread after
    /// the first of them or a cut.
    pub bad_entries: u64,
    pub unread_bytes: u64,
}

impl<'a> StackFile<'a> {
    pub fn parse(b: &'a [u8]) -> Result<StackFile<'a>, StackFileError> {
        let h = b.get(..HEADER_SIZE).ok_or(StackFileError::Short)?;
        if &h[0..8] != MAGIC {
            return Err(StackFileError::Magic);
        }
        let le32 = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().unwrap());
        if crc32fast::hash(&h[0..28]) != le32(h, 28) {
            return Err(StackFileError::HeaderCrc);
        }
        if le32(h, 8) != VERSION {
            return Err(StackFileError::Version(le32(h, 8)));
        }
        let arch = Arch::from_u32(le32(h, 12)).ok_or(StackFileError::Arch(le32(h, 12)))?;
        let mut out = StackFile {
            arch: Some(arch),
            ..StackFile::default()
        };
        let mut at = HEADER_SIZE;
        while at < b.len() {
            let rest = &b[at..];
            match parse_entry(rest) {
                Some((e, used)) => {
                    match out.entries.entry(e.index) {
                        std::collections::hash_map::Entry::Occupied(_) => out.bad_entries += 1,
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(e);
                        }
                    }
                    at += used;
                }
                None => {
                    // Nothing after a bad entry can be trusted to start where it seems to.
                    out.bad_entries += 1;
                    out.unread_bytes = rest.len() as u64;
                    break;
                }
            }
        }
        Ok(out)
    }
}

/// One entry at the start of `b`, and the bytes it takes; `None` when cut, too long, or its
/// CRC or inner length does not hold.
fn parse_entry(b: &[u8]) -> Option<(StackEntry<'_>, usize)> {
    let le32 = |at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
    let le64 = |at: usize| Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?));
    let len = le32(0)? as usize;
    if !(BODY_FIXED..=BODY_FIXED + MAX_STACK_BYTES).contains(&len) {
        return None;
    }
    let body = b.get(ENTRY_PREFIX..ENTRY_PREFIX + len)?;
    if crc32fast::hash(body) != le32(4)? {
        return None;
    }
    let p = ENTRY_PREFIX;
    let stack_len = le32(p + 48)? as usize;
    if BODY_FIXED + stack_len != len {
        return None;
    }
    let e = StackEntry {
        index: le32(p)?,
        tid: le32(p + 4)?,
        ts: le64(p + 8)?,
        regs: Regs {
            ip: le64(p + 16)?,
            sp: le64(p + 24)?,
            fp: le64(p + 32)?,
            lr: le64(p + 40)?,
        },
        stack: &body[BODY_FIXED..],
    };
    Some((e, ENTRY_PREFIX + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_names_follow_their_stream() {
        assert_eq!(
            sidecar_of("streams/offcpu-7.cst").as_deref(),
            Some("stacks/offcpu-7.ustk")
        );
        assert_eq!(
            sidecar_of("streams/offcpu-7.2.cst").as_deref(),
            Some("stacks/offcpu-7.2.ustk")
        );
        assert_eq!(sidecar_of("streams/offcpu-7.json"), None);
    }

    #[test]
    fn no_stack_reasons_round_trip() {
        for r in [NoStack::OverBudget, NoStack::Empty, NoStack::Unwritten] {
            assert_eq!(NoStack::from_u8(r.to_u8()), r);
        }
        assert_eq!(NoStack::from_u8(9), NoStack::Other(9));
    }
}
