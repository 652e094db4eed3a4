//! Which heap allocation a lock lives in (runs recorded with `--alloc-sites`): the latest
//! allocation in the lock's process that covers the lock's address and was made before the
//! lock's first event. Frees are not needed: memory handed out again must have been freed
//! first, so the latest covering allocation before the lock was used is the live one.
//! docs/methodology.md §4 states the rule.

use crate::locks::{LockInput, LockKey};
use std::collections::HashMap;
use trace::EventKind;

/// One recorded allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub pid: u32,
    pub ts_ns: u64,
    /// The allocation's call site, when it was recorded.
    pub site: Option<u64>,
    pub address: u64,
    /// Bytes (`u32::MAX`: at least that many).
    pub size: u64,
}

/// Where a lock lives: its block and its offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Home {
    pub block: Block,
    pub offset: u64,
}

/// The allocations recorded in `input`, from each `alloc` + `alloc-address` pair; a pair cut in
/// two (a full ring dropped its second half) is skipped.
pub fn blocks(input: &LockInput) -> Vec<Block> {
    let mut out = Vec::new();
    for t in &input.threads {
        for pair in t.events.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.kind != EventKind::Alloc || b.kind != EventKind::AllocAddress || a.ts_ns != b.ts_ns
            {
                continue;
            }
            out.push(Block {
                pid: t.pid,
                ts_ns: a.ts_ns,
                site: a.site,
                address: (u64::from(a.aux) << 40) | (u64::from(b.aux) << 32) | u64::from(b.value),
                size: u64::from(a.value),
            });
        }
    }
    out
}

/// Each lock's first event time, per (pid, address).
fn first_seen(input: &LockInput) -> HashMap<LockKey, u64> {
    let mut first: HashMap<LockKey, u64> = HashMap::new();
    for t in &input.threads {
        for e in &t.events {
            if let Some((_, address)) = e.object {
                let key = LockKey {
                    pid: t.pid,
                    address,
                };
                let v = first.entry(key).or_insert(e.ts_ns);
                *v = (*v).min(e.ts_ns);
            }
        }
    }
    first
}

/// The block each object of `input` lives in, for those that live in a recorded allocation.
pub fn homes(input: &LockInput) -> HashMap<LockKey, Home> {
    homes_of(blocks(input), first_seen(input))
}

/// [`homes`] from the recorded blocks and each lock's first event time (what
/// [`crate::locks::analyze_streams`] gathers while it reads the streams).
pub fn homes_of(mut all: Vec<Block>, first_seen: HashMap<LockKey, u64>) -> HashMap<LockKey, Home> {
    if all.is_empty() {
        return HashMap::new();
    }
    all.sort_by_key(|b| (b.pid, b.ts_ns));
    let mut out = HashMap::new();
    for (key, seen) in first_seen {
        // Latest first: the covering allocation nearest before the first use.
        let home = all
            .iter()
            .rev()
            .filter(|b| b.pid == key.pid && b.ts_ns <= seen)
            .find(|b| key.address >= b.address && key.address - b.address < b.size)
            .map(|b| Home {
                block: *b,
                offset: key.address - b.address,
            });
        if let Some(h) = home {
            out.insert(key, h);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::{InputEvent, InputThread};
    use trace::ObjectKind;

    fn alloc(ts: u64, site: u64, address: u64, size: u32) -> [InputEvent; 2] {
        let a = trace::alloc::Alloc {
            ts,
            site: 0,
            address,
            size,
        };
        let [r1, r2] = a.encode().unwrap();
        let ev = |r: trace::Record, site| InputEvent {
            ts_ns: r.ts,
            kind: r.kind,
            aux: r.aux,
            object: None,
            site,
            value: r.obj,
        };
        [ev(r1, Some(site)), ev(r2, None)]
    }

    fn lock_event(ts: u64, address: u64) -> InputEvent {
        InputEvent {
            ts_ns: ts,
            kind: EventKind::LockAcquired,
            aux: 0,
            object: Some((ObjectKind::Mutex, address)),
            site: Some(0x1000),
            value: 0,
        }
    }

    fn thread(pid: u32, events: Vec<InputEvent>) -> InputThread {
        InputThread {
            pid,
            tid: pid,
            name: String::new(),
            events,
            dropped: 0,
        }
    }

    #[test]
    fn a_lock_lives_in_the_latest_covering_allocation_before_its_first_use() {
        let high = 0x7f00_0000_1000;
        let mut t1 = Vec::new();
        t1.extend(alloc(10, 0xA, high, 64)); // freed and reused later
        t1.extend(alloc(20, 0xB, high, 128)); // the live one when the lock is first used
        t1.push(lock_event(30, high + 40));
        t1.extend(alloc(40, 0xC, high, 256)); // after first use: not the lock's home
                                              // Another thread's earlier lock event on the same lock sets the first use at 25.
        let t2 = vec![lock_event(25, high + 40)];
        let input = LockInput {
            threads: vec![thread(7, t1), thread(7, t2)],
            ..Default::default()
        };
        assert_eq!(blocks(&input).len(), 3);
        let homes = homes(&input);
        let h = homes[&LockKey {
            pid: 7,
            address: high + 40,
        }];
        assert_eq!(h.block.site, Some(0xB));
        assert_eq!(h.block.size, 128);
        assert_eq!(h.offset, 40);
    }

    #[test]
    fn no_home_outside_blocks_in_other_processes_or_for_cut_pairs() {
        let mut t = Vec::new();
        t.extend(alloc(10, 0xA, 0x1000, 16));
        t.push(lock_event(20, 0x1010)); // one past the end
        t.push(alloc(21, 0xB, 0x2000, 64)[0]); // second half lost
        t.push(lock_event(30, 0x2000));
        let other = vec![lock_event(40, 0x1008)]; // pid 8: the block is pid 7's
        let input = LockInput {
            threads: vec![thread(7, t), thread(8, other)],
            ..Default::default()
        };
        assert_eq!(blocks(&input).len(), 1);
        assert!(homes(&input).is_empty());
    }
}
