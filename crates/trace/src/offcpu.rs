//! Off-CPU blocks of a target process's threads (`streams/offcpu-PID.cst`, written by
//! `observe::offcpu`): each voluntary switch out of a thread of the program, with the reason
//! named from its kernel call chain and, for a futex wait, the futex's address and operation
//! read from the system call's argument registers.
//!
//! One stream per process, not per thread: a program that starts thousands of threads costs
//! the recorder one file per process (creating a file is the recorder's largest cost on a
//! file system with many recently deleted inodes, and a starved recorder gives the lock
//! probe's rings back late).
//!
//! Records (docs/formats.md §2.3a):
//! - [`EventKind::OffCpuThread`]: `obj` the thread the blocks that follow belong to (written
//!   whenever the thread changes; blocks before the first belong to the header's `tid`).
//! - [`EventKind::OffCpuBlock`]: `ts` when the thread left the CPU; `aux` the state letter
//!   (`S` interruptible, `D` uninterruptible, ...); `obj` the string id of the reason (the
//!   innermost kernel function that says why, e.g. `futex_wait`, `do_nanosleep`), or
//!   [`NO_STRING`] when unknown; `site` flags ([`FUTEX`]).
//! - [`EventKind::OffCpuFutex`], right after a block with [`FUTEX`] set, same `ts`: `aux` the
//!   futex operation (`si & 0xff`, `FUTEX_PRIVATE_FLAG` included), `site` and `obj` bits
//!   32..47 and 0..31 of the futex word's address (`di`).
//! - [`EventKind::OffCpuStack`], last of a block's records, same `ts`: `obj` the index of the
//!   block's user stack in the process's stack file ([`crate::ustack`]), or [`NO_OBJECT`] and
//!   `aux` the reason there is none ([`NoStack`]). Runs recorded without stacks have no such
//!   record.
//!
//! - [`EventKind::OffCpuWaking`] (slice 3): the thread woke thread `obj` (a per-task
//!   `sched_waking` raised in its context); `aux` how ([`WakeHow`]: a futex wake, an interrupt,
//!   a timer, another kernel path), `site` the futex operation for a futex wake.
//! - [`EventKind::OffCpuWakeAddr`], after its waking, same `ts`: `aux` 0 the futex word, 1 the
//!   second word of a requeue or wake-op; `site` and `obj` bits 32..47 and 0..31.
//! - [`EventKind::OffCpuWakeStack`], the waking's last record, same `ts`: its user stack, as
//!   [`EventKind::OffCpuStack`]. Wakings by an interrupt or a timer have none (the registers
//!   and stack are the interrupted thread's, not the waker's).
//!
//! Wakings are new kinds: a reader from before them skips them (it counts unknown kinds).
//!
//! The end of a block is not here: it is the thread's next switch in, which the system-wide
//! sched tracepoints record (`sched-TID.cst`).

use crate::format::{EventKind, Record, NO_OBJECT, NO_STRING};
pub use crate::ustack::NoStack;

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
    /// The user stack: `None` when the run recorded no stacks.
    pub stack: Option<BlockStack>,
}

/// A block's user stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockStack {
    /// The entry's index in the process's stack file.
    Entry(u32),
    /// None kept, and why.
    Missing(NoStack),
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
            out.push(address_record(
                self.ts,
                EventKind::OffCpuFutex,
                f.op,
                f.uaddr,
            ));
        }
        if let Some(st) = self.stack {
            out.push(stack_record(self.ts, EventKind::OffCpuStack, st));
        }
        out
    }
}

/// The record that says the blocks after it are thread `tid`'s.
pub fn thread_record(ts: u64, tid: u32) -> Record {
    Record {
        ts,
        kind: EventKind::OffCpuThread,
        aux: 0,
        site: 0,
        obj: tid,
    }
}

/// How a waking came about, from the kernel chain of the `sched_waking` raised in a target
/// thread's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WakeHow {
    /// Another kernel path (a pipe write, a signal, an exit...), or a chain without names.
    Other,
    /// A futex system call that wakes (`FUTEX_WAKE`, `_WAKE_OP`, `_REQUEUE`, `_UNLOCK_PI`, futex2
    /// `futex_wake`).
    Futex,
    /// An interrupt that came while the thread ran (the wake is not the thread's doing).
    Interrupt,
    /// A timer expiring (`hrtimer_wakeup`): a timed wait's timeout, a sleep's end.
    Timer,
}

impl WakeHow {
    pub fn to_u8(self) -> u8 {
        match self {
            WakeHow::Other => 0,
            WakeHow::Futex => 1,
            WakeHow::Interrupt => 2,
            WakeHow::Timer => 3,
        }
    }

    /// Unknown values (a newer writer's) read as [`WakeHow::Other`].
    pub fn from_u8(v: u8) -> WakeHow {
        match v {
            1 => WakeHow::Futex,
            2 => WakeHow::Interrupt,
            3 => WakeHow::Timer,
            _ => WakeHow::Other,
        }
    }
}

/// The futex arguments of a waking: the word woken, and for a requeue or wake-op the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WakeFutex {
    pub uaddr: u64,
    pub op: u8,
    pub uaddr2: Option<u64>,
}

/// `FUTEX_WAKE_OP`, `FUTEX_REQUEUE`, `FUTEX_CMP_REQUEUE`, `FUTEX_CMP_REQUEUE_PI`: the commands
/// whose `r8` (`uaddr2`) is a second futex word.
pub fn has_second_word(op: u8) -> bool {
    matches!(op & FUTEX_CMD_MASK, 3 | 4 | 5 | 12)
}

/// One waking by the stream's thread, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waking {
    pub ts: u64,
    /// The thread woken.
    pub woken: u32,
    pub how: WakeHow,
    /// For [`WakeHow::Futex`] with its registers.
    pub futex: Option<WakeFutex>,
    /// The waker's user stack: `None` when the run recorded no stacks, or the waking has none
    /// by nature (interrupt, timer).
    pub stack: Option<BlockStack>,
}

fn address_record(ts: u64, kind: EventKind, aux: u8, address: u64) -> Record {
    let a = address & ADDRESS_BITS;
    Record {
        ts,
        kind,
        aux,
        site: (a >> 32) as u16,
        obj: a as u32,
    }
}

fn stack_record(ts: u64, kind: EventKind, st: BlockStack) -> Record {
    let (aux, obj) = match st {
        BlockStack::Entry(i) => (0, i),
        BlockStack::Missing(why) => (why.to_u8(), NO_OBJECT),
    };
    Record {
        ts,
        kind,
        aux,
        site: 0,
        obj,
    }
}

fn stack_of(r: &Record) -> BlockStack {
    if r.obj == NO_OBJECT {
        BlockStack::Missing(NoStack::from_u8(r.aux))
    } else {
        BlockStack::Entry(r.obj)
    }
}

impl Waking {
    /// The waking's records: the waking, its addresses, its stack.
    pub fn encode(&self) -> Vec<Record> {
        let mut out = vec![Record {
            ts: self.ts,
            kind: EventKind::OffCpuWaking,
            aux: self.how.to_u8(),
            site: self.futex.map_or(0, |f| u16::from(f.op)),
            obj: self.woken,
        }];
        if let Some(f) = self.futex {
            out.push(address_record(
                self.ts,
                EventKind::OffCpuWakeAddr,
                0,
                f.uaddr,
            ));
            if let Some(a2) = f.uaddr2 {
                out.push(address_record(self.ts, EventKind::OffCpuWakeAddr, 1, a2));
            }
        }
        if let Some(st) = self.stack {
            out.push(stack_record(self.ts, EventKind::OffCpuWakeStack, st));
        }
        out
    }
}

/// A waking and the thread that did it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadWaking {
    pub tid: u32,
    pub waking: Waking,
}

/// A block and the thread it is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadBlock {
    pub tid: u32,
    pub block: Block,
}

/// Decodes a stream's blocks in order. A futex or stack record without its block, or a block
/// flagged futex without its arguments, is counted in [`BlockDecoder::unpaired`]; the block is
/// kept, without arguments.
#[derive(Debug, Default)]
pub struct BlockDecoder {
    /// The thread the blocks being read are of.
    tid: u32,
    /// The block being read, until a record that is not one of its own.
    pending: Option<Block>,
    /// Its `site` said futex.
    pending_futex: bool,
    /// The futex operation of the waking being read, until its address comes.
    pending_op: Option<u8>,
    /// The waking being read, until a record that is not one of its own.
    pending_waking: Option<Waking>,
    /// The complete wakings, in order.
    pub wakings: Vec<ThreadWaking>,
    /// Records that did not pair as the format says.
    pub unpaired: u64,
}

impl BlockDecoder {
    /// A decoder for a stream whose header names thread `tid`.
    pub fn new(tid: u32) -> BlockDecoder {
        BlockDecoder {
            tid,
            ..BlockDecoder::default()
        }
    }

    /// Feeds one record; complete blocks are appended to `out`.
    pub fn push(&mut self, r: &Record, out: &mut Vec<ThreadBlock>) {
        if !matches!(
            r.kind,
            EventKind::OffCpuWakeAddr | EventKind::OffCpuWakeStack
        ) {
            self.finish_waking();
        }
        match r.kind {
            EventKind::OffCpuThread => {
                out.extend(self.finish());
                self.tid = r.obj;
            }
            EventKind::OffCpuWaking => {
                out.extend(self.finish());
                self.pending_waking = Some(Waking {
                    ts: r.ts,
                    woken: r.obj,
                    how: WakeHow::from_u8(r.aux),
                    futex: None,
                    stack: None,
                });
                if self.pending_waking.is_some_and(|w| w.how == WakeHow::Futex) {
                    // The op waits for its address.
                    self.pending_op = Some(r.site as u8);
                }
            }
            EventKind::OffCpuWakeAddr => {
                let address = (u64::from(r.site) << 32) | u64::from(r.obj);
                match (self.pending_waking.as_mut(), self.pending_op) {
                    (Some(w), Some(op)) if w.ts == r.ts && w.stack.is_none() => {
                        match (r.aux, w.futex.as_mut()) {
                            (0, None) => {
                                w.futex = Some(WakeFutex {
                                    uaddr: address,
                                    op,
                                    uaddr2: None,
                                })
                            }
                            (1, Some(f)) if f.uaddr2.is_none() => f.uaddr2 = Some(address),
                            _ => self.unpaired += 1,
                        }
                    }
                    _ => {
                        out.extend(self.finish());
                        self.finish_waking();
                        self.unpaired += 1;
                    }
                }
            }
            EventKind::OffCpuWakeStack => match self.pending_waking.as_mut() {
                Some(w) if w.ts == r.ts && w.stack.is_none() => w.stack = Some(stack_of(r)),
                _ => {
                    out.extend(self.finish());
                    self.finish_waking();
                    self.unpaired += 1;
                }
            },
            EventKind::OffCpuBlock => {
                out.extend(self.finish());
                self.pending = Some(Block {
                    ts: r.ts,
                    state: r.aux,
                    reason: r.obj,
                    futex: None,
                    stack: None,
                });
                self.pending_futex = r.site & FUTEX != 0;
            }
            EventKind::OffCpuFutex => match self.pending.as_mut() {
                Some(b)
                    if b.ts == r.ts
                        && self.pending_futex
                        && b.futex.is_none()
                        && b.stack.is_none() =>
                {
                    b.futex = Some(FutexArgs {
                        uaddr: (u64::from(r.site) << 32) | u64::from(r.obj),
                        op: r.aux,
                    });
                }
                _ => {
                    out.extend(self.finish());
                    self.unpaired += 1;
                }
            },
            EventKind::OffCpuStack => match self.pending.as_mut() {
                Some(b) if b.ts == r.ts && b.stack.is_none() => b.stack = Some(stack_of(r)),
                _ => {
                    out.extend(self.finish());
                    self.unpaired += 1;
                }
            },
            _ => {}
        }
    }

    fn of_thread(&self, block: Block) -> ThreadBlock {
        ThreadBlock {
            tid: self.tid,
            block,
        }
    }

    /// Ends the waking being read (a futex wake without its address: counted, kept without).
    fn finish_waking(&mut self) {
        if let Some(w) = self.pending_waking.take() {
            if self.pending_op.take().is_some() && w.futex.is_none() {
                self.unpaired += 1;
            }
            self.wakings.push(ThreadWaking {
                tid: self.tid,
                waking: w,
            });
        }
    }

    /// The block being read, complete or not (flagged futex without its arguments: counted).
    pub fn finish(&mut self) -> Option<ThreadBlock> {
        let b = self.pending.take()?;
        if self.pending_futex && b.futex.is_none() {
            self.unpaired += 1;
        }
        self.pending_futex = false;
        Some(self.of_thread(b))
    }
}

/// All blocks of a stream's records, with their threads (`tid`: the header's, for blocks
/// before the first thread record), and how many records did not pair.
pub fn blocks(records: impl IntoIterator<Item = Record>, tid: u32) -> (Vec<ThreadBlock>, u64) {
    let d = decode(records, tid);
    (d.blocks, d.unpaired)
}

/// A stream's blocks and wakings, with their threads, and the records that did not pair.
#[derive(Debug, Default)]
pub struct Decoded {
    pub blocks: Vec<ThreadBlock>,
    pub wakings: Vec<ThreadWaking>,
    pub unpaired: u64,
}

/// All blocks and wakings of a stream's records (see [`blocks`]).
pub fn decode(records: impl IntoIterator<Item = Record>, tid: u32) -> Decoded {
    let mut d = BlockDecoder::new(tid);
    let mut blocks = Vec::new();
    for r in records {
        d.push(&r, &mut blocks);
    }
    blocks.extend(d.finish());
    d.finish_waking();
    Decoded {
        blocks,
        wakings: std::mem::take(&mut d.wakings),
        unpaired: d.unpaired,
    }
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
            stack: None,
        }
    }

    fn only_blocks(out: Vec<ThreadBlock>) -> Vec<Block> {
        out.into_iter().map(|b| b.block).collect()
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
        let (out, unpaired) = blocks(records, 7);
        assert!(
            out.iter().all(|b| b.tid == 7),
            "the header's thread: {out:?}"
        );
        let out = only_blocks(out);
        assert_eq!(out, input);
        assert_eq!(unpaired, 0);
        assert_eq!(out[0].futex.unwrap().cmd(), 9);
    }

    #[test]
    fn thread_records_say_whose_blocks_follow() {
        let mut records = block(10, None).encode();
        records.push(thread_record(20, 8));
        records.extend(block(20, Some((0x1000, 0x80))).encode());
        records.extend(block(25, None).encode());
        records.push(thread_record(30, 7));
        records.extend(block(30, None).encode());
        let (out, unpaired) = blocks(records, 7);
        assert_eq!(unpaired, 0);
        let seen: Vec<(u32, u64)> = out.iter().map(|b| (b.tid, b.block.ts)).collect();
        assert_eq!(seen, [(7, 10), (8, 20), (8, 25), (7, 30)]);
        assert_eq!(out[1].block.futex.unwrap().uaddr, 0x1000);
    }

    /// A futex block whose arguments never came, cut by a thread record, stays its thread's.
    #[test]
    fn a_pair_cut_by_a_thread_record_stays_with_its_thread() {
        let mut records = block(10, Some((0x1000, 0x89))).encode();
        records.pop();
        records.push(thread_record(20, 9));
        records.extend(block(20, None).encode());
        let (out, unpaired) = blocks(records, 4);
        assert_eq!(unpaired, 1);
        let seen: Vec<(u32, u64)> = out.iter().map(|b| (b.tid, b.block.ts)).collect();
        assert_eq!(seen, [(4, 10), (9, 20)]);
        assert_eq!(out[0].block.futex, None);
    }

    #[test]
    fn stack_records_follow_their_block_and_strays_are_counted() {
        let mut with = block(10, Some((0x1000, 0x89)));
        with.stack = Some(BlockStack::Entry(4));
        let mut none = block(20, None);
        none.stack = Some(BlockStack::Missing(NoStack::OverBudget));
        let mut records = with.encode();
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].kind, EventKind::OffCpuStack);
        records.extend(none.encode());
        // A stack record of another time: no block of its own.
        let mut stray = block(30, None);
        stray.stack = Some(BlockStack::Entry(5));
        records.push(stray.encode()[1]);
        let (out, unpaired) = blocks(records, 1);
        assert_eq!(only_blocks(out), [with, none]);
        assert_eq!(unpaired, 1);
    }

    #[test]
    fn addresses_keep_48_bits() {
        let b = block(1, Some((0xffff_1234_5678_9abc, 0)));
        let (out, _) = blocks(b.encode(), 1);
        assert_eq!(out[0].block.futex.unwrap().uaddr, 0x1234_5678_9abc);
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
        let (out, unpaired) = blocks(records, 1);
        let out = only_blocks(out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].futex, None);
        assert_eq!(out[1].ts, 20);
        assert_eq!(unpaired, 2);
    }

    fn waking(ts: u64, woken: u32, how: WakeHow, futex: Option<WakeFutex>) -> Waking {
        Waking {
            ts,
            woken,
            how,
            futex,
            stack: None,
        }
    }

    #[test]
    fn wakings_round_trip_between_blocks_with_their_threads() {
        let wake = waking(
            15,
            9,
            WakeHow::Futex,
            Some(WakeFutex {
                uaddr: 0x5555_0000_1000,
                op: 0x81,
                uaddr2: None,
            }),
        );
        let mut requeue = waking(
            35,
            10,
            WakeHow::Futex,
            Some(WakeFutex {
                uaddr: 0x1000,
                op: 0x84,
                uaddr2: Some(0x2000),
            }),
        );
        requeue.stack = Some(BlockStack::Entry(3));
        let mut irq = waking(40, 11, WakeHow::Interrupt, None);
        irq.stack = Some(BlockStack::Missing(NoStack::Empty));
        let mut records = block(10, Some((0x1000, 0x89))).encode();
        records.extend(wake.encode());
        records.extend(block(20, None).encode());
        records.push(thread_record(30, 8));
        records.extend(requeue.encode());
        records.extend(irq.encode());
        assert_eq!(records.len(), 2 + 2 + 1 + 1 + 4 + 2);
        let d = decode(records.clone(), 7);
        assert_eq!(d.unpaired, 0);
        let seen: Vec<(u32, Waking)> = d.wakings.iter().map(|w| (w.tid, w.waking)).collect();
        assert_eq!(seen, [(7, wake), (8, requeue), (8, irq)]);
        assert_eq!(
            d.blocks.len(),
            2,
            "the wakings cut no block: {:?}",
            d.blocks
        );
        assert!(has_second_word(0x84) && !has_second_word(0x81));
        // A reader of blocks only still gets the blocks, nothing unpaired.
        let (b, unpaired) = blocks(records, 7);
        assert_eq!((b.len(), unpaired), (2, 0));
    }

    #[test]
    fn a_futex_waking_cut_before_its_address_is_counted() {
        let wake = waking(
            15,
            9,
            WakeHow::Futex,
            Some(WakeFutex {
                uaddr: 0x1000,
                op: 0x81,
                uaddr2: None,
            }),
        );
        let mut records = vec![wake.encode()[0]];
        records.extend(block(20, None).encode());
        // An address and a stack with no waking before them.
        records.extend(wake.encode().into_iter().skip(1));
        records.push(stack_record(
            15,
            EventKind::OffCpuWakeStack,
            BlockStack::Entry(1),
        ));
        let d = decode(records, 1);
        assert_eq!(d.unpaired, 3);
        assert_eq!(d.wakings.len(), 1);
        assert_eq!(d.wakings[0].waking.futex, None);
        assert_eq!(d.blocks.len(), 1);
    }
}
