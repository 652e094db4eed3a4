//! Off-CPU blocks of a target thread (`streams/offcpu-TID.cst`, written by
//! `observe::offcpu`): each voluntary switch out of a thread of the program, with the reason
//! named from its kernel call chain and, for a futex wait, the futex's address and operation
//! read from the system call's argument registers.
//!
//! Records (docs/formats.md §2.3):
//! - [`EventKind::OffCpuBlock`]: `ts` when the thread left the CPU; `aux` the state letter
//!   (`S` interruptible, `D` uninterruptible, ...); `obj` the string id of the reason (the
//!   innermost kernel function that says why, e.g. `futex_wait`, `do_nanosleep`), or
//!   [`NO_STRING`] when unknown; `site` flags ([`FUTEX`]).
//! - [`EventKind::OffCpuFutex`], right after a block with [`FUTEX`] set, same `ts`: `aux` the
//!   futex operation (`si & 0xff`, `FUTEX_PRIVATE_FLAG` included), `site` and `obj` bits
//!   32..47 and 0..31 of the futex word's address (`di`).
//!
//! The end of a block is not here: it is the thread's next switch in, which the system-wide
//! sched tracepoints record (`sched-TID.cst`).

use crate::format::{EventKind, Record, NO_STRING};

/// What meta.json's `unavailable` entry names when the recorder could not run.
pub const UNAVAILABLE_WHAT: &str = "off-CPU waits (futex waits)";

/// `site` flag of an [`EventKind::OffCpuBlock`]: the kernel chain passes a futex wait.
pub const FUTEX: u16 = 1;

/// The futex operation number without `FUTEX_PRIVATE_FLAG` (0x80) and `FUTEX_CLOCK_REALTIME`
/// (0x100, not in the 8 bits kept).
pub const FUTEX_CMD_MASK: u8 = 0x7f;

/// A futex wait's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FutexArgs {
    /// The futex word's address (48 bits kept: user addresses on x86-64 and aarch64).
    pub uaddr: u64,
    /// `op & 0xff` as passed to the system call.
    pub op: u8,
}

impl FutexArgs {
    /// The command (`FUTEX_WAIT` 0, `FUTEX_WAIT_BITSET` 9, `FUTEX_LOCK_PI` 6, ...).
    pub fn cmd(&self) -> u8 {
        self.op & FUTEX_CMD_MASK
    }
}

/// One voluntary switch out, as written; `reason` is a string-table id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub ts: u64,
    /// The state letter the thread left in (`b'S'`, `b'D'`, ...).
    pub state: u8,
    pub reason: u32,
    pub futex: Option<FutexArgs>,
}

const ADDRESS_BITS: u64 = (1 << 48) - 1;

impl Block {
    /// The block's records: one, or two for a futex wait.
    pub fn encode(&self) -> Vec<Record> {
        let mut out = vec![Record {
            ts: self.ts,
            kind: EventKind::OffCpuBlock,
            aux: self.state,
            site: if self.futex.is_some() { FUTEX } else { 0 },
            obj: self.reason,
        }];
        if let Some(f) = self.futex {
            let a = f.uaddr & ADDRESS_BITS;
            out.push(Record {
                ts: self.ts,
                kind: EventKind::OffCpuFutex,
                aux: f.op,
                site: (a >> 32) as u16,
                obj: a as u32,
            });
        }
        out
    }
}

/// Decodes a stream's blocks in order. A futex record without its block, or a block flagged
/// futex without its arguments, is counted in [`BlockDecoder::unpaired`]; the block is kept,
/// without arguments.
#[derive(Debug, Default)]
pub struct BlockDecoder {
    /// A block flagged futex, waiting for its arguments.
    pending: Option<Block>,
    /// Records that did not pair as the format says.
    pub unpaired: u64,
}

impl BlockDecoder {
    /// Feeds one record; complete blocks are appended to `out`.
    pub fn push(&mut self, r: &Record, out: &mut Vec<Block>) {
        match r.kind {
            EventKind::OffCpuBlock => {
                out.extend(self.finish());
                let block = Block {
                    ts: r.ts,
                    state: r.aux,
                    reason: r.obj,
                    futex: None,
                };
                if r.site & FUTEX != 0 {
                    self.pending = Some(block);
                } else {
                    out.push(block);
                }
            }
            EventKind::OffCpuFutex => match self.pending.take() {
                Some(mut b) if b.ts == r.ts => {
                    b.futex = Some(FutexArgs {
                        uaddr: (u64::from(r.site) << 32) | u64::from(r.obj),
                        op: r.aux,
                    });
                    out.push(b);
                }
                other => {
                    out.extend(other);
                    self.unpaired += 1;
                }
            },
            _ => {}
        }
    }

    /// A block still waiting for its arguments (flagged futex, never completed).
    pub fn finish(&mut self) -> Option<Block> {
        let b = self.pending.take()?;
        self.unpaired += 1;
        Some(b)
    }
}

/// All blocks of a stream's records, and how many records did not pair.
pub fn blocks(records: impl IntoIterator<Item = Record>) -> (Vec<Block>, u64) {
    let mut d = BlockDecoder::default();
    let mut out = Vec::new();
    for r in records {
        d.push(&r, &mut out);
    }
    out.extend(d.finish());
    (out, d.unpaired)
}

/// The reason id of a block whose kernel chain named nothing.
pub const NO_REASON: u32 = NO_STRING;

#[cfg(test)]
mod tests {
    use super::*;

    fn block(ts: u64, futex: Option<(u64, u8)>) -> Block {
        Block {
            ts,
            state: b'S',
            reason: 3,
            futex: futex.map(|(uaddr, op)| FutexArgs { uaddr, op }),
        }
    }

    #[test]
    fn blocks_round_trip_with_and_without_futex_arguments() {
        let input = vec![
            block(10, Some((0x5555_dead_beef, 0x89))),
            block(20, None),
            block(30, None),
            block(40, Some((0x7fff_0000_0010, 0x80))),
        ];
        let records: Vec<Record> = input.iter().flat_map(Block::encode).collect();
        assert_eq!(records.len(), 6);
        let (out, unpaired) = blocks(records);
        assert_eq!(out, input);
        assert_eq!(unpaired, 0);
        assert_eq!(out[0].futex.unwrap().cmd(), 9);
    }

    #[test]
    fn addresses_keep_48_bits() {
        let b = block(1, Some((0xffff_1234_5678_9abc, 0)));
        let (out, _) = blocks(b.encode());
        assert_eq!(out[0].futex.unwrap().uaddr, 0x1234_5678_9abc);
    }

    #[test]
    fn a_cut_pair_is_counted_not_invented() {
        let mut records = block(10, Some((0x1000, 0x89))).encode();
        records.pop();
        records.extend(block(20, None).encode());
        // A futex record with no block before it.
        let mut stray = block(30, Some((0x2000, 0x89))).encode();
        stray.remove(0);
        records.extend(stray);
        let (out, unpaired) = blocks(records);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].futex, None);
        assert_eq!(out[1].ts, 20);
        assert_eq!(unpaired, 2);
    }
}
