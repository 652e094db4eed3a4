//! Off-CPU streams (`offcpu-PID.cst`) written and read back, cut anywhere, bit-flipped, and
//! with a reason id that names no string.

use trace::format::{HEADER_LEN, NO_STRING};
use trace::offcpu::{blocks, thread_record, Block, BlockStack, FutexArgs, NoStack, ThreadBlock};
use trace::{ClockSource, Header, Problem, Record, Stream, StreamKind, StreamWriter};

fn header() -> Header {
    Header {
        kind: StreamKind::Process,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 100,
        tid: 100,
        rank: -1,
        base_time: 1_000,
    }
}

/// `n` blocks of three threads (100, 101, 102 by turns, two at a time), every other one a
/// futex wait, written in chunks of `chunk` records as the recorder writes them (a thread
/// record whenever the thread changes); the blocks as written and the stream's bytes, with the
/// offsets where chunks end.
fn sample(n: u64, chunk: usize) -> (Vec<ThreadBlock>, Vec<u8>, Vec<usize>) {
    let mut w = StreamWriter::new(Vec::new(), &header(), chunk).unwrap();
    let mut written = Vec::new();
    let mut current = header().tid;
    for i in 0..n {
        let tid = 100 + (i / 2 % 3) as u32;
        let futex = i % 2 == 0;
        let reason = w.intern_string(if futex {
            "futex_do_wait (__x64_sys_futex)"
        } else {
            "do_nanosleep (__x64_sys_clock_nanosleep)"
        });
        let b = Block {
            ts: 2_000 + i * 100,
            state: b'S',
            reason: if i == 3 { NO_STRING } else { reason },
            futex: futex.then_some(FutexArgs {
                uaddr: 0x5555_0000_1000 + i * 8,
                op: 0x89,
            }),
            // Stack records: an entry, or none past the budget.
            stack: Some(if i % 3 == 2 {
                BlockStack::Missing(NoStack::OverBudget)
            } else {
                BlockStack::Entry(i as u32)
            }),
        };
        if tid != current {
            w.push(&thread_record(b.ts, tid));
            current = tid;
        }
        for r in b.encode() {
            w.push(&r);
        }
        written.push(ThreadBlock { tid, block: b });
    }
    let bytes = w.finish_into(99_999).unwrap();
    let mut bounds = vec![HEADER_LEN];
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
        pos += 24 + len;
        bounds.push(pos);
    }
    (written, bytes, bounds)
}

#[test]
fn blocks_round_trip_through_a_stream() {
    let (written, bytes, _) = sample(9, 4);
    let s = Stream::parse(&bytes).unwrap();
    assert!(s.is_complete());
    // 9 blocks, 5 of them futex waits, a stack record each, and 4 changes of thread
    // (100 100 101 101 102 102 100 100 101).
    assert_eq!(s.events, 9 + 5 + 9 + 4);
    let (read, unpaired) = blocks(s.events(), s.header.tid);
    assert_eq!(read, written);
    assert_eq!(unpaired, 0);
    let threads: std::collections::BTreeSet<u32> = read.iter().map(|b| b.tid).collect();
    assert_eq!(threads.into_iter().collect::<Vec<_>>(), [100, 101, 102]);
    assert_eq!(
        s.string(read[0].block.reason),
        Some("futex_do_wait (__x64_sys_futex)")
    );
    assert_eq!(read[3].block.reason, NO_STRING);
}

/// A stream cut anywhere reads as its whole chunks or is refused as cut; what reads decodes to
/// a prefix of what was written (a futex pair split across the cut loses only its arguments,
/// counted).
#[test]
fn a_cut_stream_gives_a_prefix_or_is_refused() {
    let (written, bytes, bounds) = sample(9, 3);
    for len in 0..bytes.len() {
        match Stream::parse(&bytes[..len]) {
            Ok(s) => {
                assert!(
                    bounds.contains(&len),
                    "cut at {len} inside a chunk accepted"
                );
                let (read, unpaired) = blocks(s.events(), s.header.tid);
                for (i, b) in read.iter().enumerate() {
                    let w = &written[i];
                    assert_eq!(b.tid, w.tid, "cut at {len}, block {i}: another thread's");
                    let (b, w) = (&b.block, &w.block);
                    assert_eq!((b.ts, b.state, b.reason), (w.ts, w.state, w.reason));
                    if i + 1 < read.len() || unpaired == 0 {
                        assert_eq!(b.futex, w.futex, "cut at {len}, block {i}");
                    }
                    // The last block read may have lost its stack record to the cut.
                    if i + 1 < read.len() {
                        assert_eq!(b.stack, w.stack, "cut at {len}, block {i}");
                    } else {
                        assert!(b.stack.is_none() || b.stack == w.stack);
                    }
                }
                assert!(unpaired <= 1, "cut at {len}: {unpaired}");
            }
            Err(e) => assert!(
                matches!(
                    e.problem,
                    Problem::TooShort { .. } | Problem::Truncated { .. }
                ),
                "cut at {len}: {e}"
            ),
        }
    }
}

#[test]
fn every_single_bit_flip_is_refused() {
    let (_, bytes, _) = sample(6, 4);
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        assert!(Stream::parse(&b).is_err(), "bit {bit} flipped was accepted");
    }
}

/// A block whose reason names no string in the table is refused by the reader, like a mark's
/// label: a renderer never looks up a string that is not there.
#[test]
fn a_reason_that_names_no_string_is_refused() {
    let mut w = StreamWriter::new(Vec::new(), &header(), 16).unwrap();
    w.push(&Record {
        ts: 5,
        kind: trace::EventKind::OffCpuBlock,
        aux: b'S',
        site: 0,
        obj: 7,
    });
    let bytes = w.finish_into(10).unwrap();
    let e = Stream::parse(&bytes).unwrap_err();
    assert!(
        matches!(e.problem, Problem::UndefinedString { id: 7, .. }),
        "{e}"
    );
}
