//! Stack files (`stacks/offcpu-PID.ustk`) written and read back, cut anywhere, bit-flipped,
//! and with hostile lengths: every entry read is one that was written, and what is not read is
//! counted.

use trace::ustack::{
    encode_entry, Arch, Regs, StackEntry, StackFile, StackFileError, StackWriter, ENTRY_PREFIX,
    HEADER_SIZE, MAX_STACK_BYTES,
};

/// What was written: (tid, ts, registers, stack).
type Written = Vec<(u32, u64, Regs, Vec<u8>)>;

/// `n` entries with stacks of varied lengths (0 included), written with a small flush size.
fn sample(n: u32) -> (Written, Vec<u8>) {
    let mut w = StackWriter::new(Vec::new(), Arch::X86_64, 100);
    let mut written = Vec::new();
    for i in 0..n {
        let stack: Vec<u8> = (0..(i as usize * 37) % 300)
            .map(|b| (b as u8) ^ (i as u8))
            .collect();
        let regs = Regs {
            ip: 0x5555_0000_1000 + u64::from(i),
            sp: 0x7ffd_0000_0000 - u64::from(i) * 64,
            fp: u64::from(i),
            lr: 0,
        };
        let index = w
            .push(100 + i % 3, 1_000 + u64::from(i), regs, &stack)
            .unwrap();
        assert_eq!(index, i);
        written.push((100 + i % 3, 1_000 + u64::from(i), regs, stack));
    }
    let bytes = w.into_inner().unwrap();
    (written, bytes)
}

fn check_prefix(f: &StackFile<'_>, written: &Written, what: &str) {
    for (i, e) in &f.entries {
        let (tid, ts, regs, stack) = &written[*i as usize];
        assert_eq!(
            (e.index, e.tid, e.ts, e.regs, e.stack),
            (*i, *tid, *ts, *regs, stack.as_slice()),
            "{what}: entry {i} differs from what was written"
        );
    }
}

#[test]
fn entries_round_trip() {
    let (written, bytes) = sample(12);
    let f = StackFile::parse(&bytes).unwrap();
    assert_eq!(f.arch, Some(Arch::X86_64));
    assert_eq!(f.entries.len(), 12);
    assert_eq!((f.bad_entries, f.unread_bytes), (0, 0));
    check_prefix(&f, &written, "whole file");
    let empty = StackWriter::new(Vec::new(), Arch::Aarch64, 1)
        .into_inner()
        .unwrap();
    let f = StackFile::parse(&empty).unwrap();
    assert_eq!((f.arch, f.entries.len()), (Some(Arch::Aarch64), 0));
}

/// Cut anywhere: the header refused, or a prefix of the entries read and the cut entry
/// counted with its bytes.
#[test]
fn a_cut_file_reads_a_prefix_and_counts_the_rest() {
    let (written, bytes) = sample(6);
    let mut ends = vec![HEADER_SIZE];
    let mut at = HEADER_SIZE;
    while at < bytes.len() {
        at += ENTRY_PREFIX + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        ends.push(at);
    }
    for len in 0..bytes.len() {
        match StackFile::parse(&bytes[..len]) {
            Ok(f) => {
                let whole = ends.iter().filter(|&&e| e <= len).count() - 1;
                assert_eq!(f.entries.len(), whole, "cut at {len}");
                check_prefix(&f, &written, &format!("cut at {len}"));
                let cut = !ends.contains(&len);
                assert_eq!(f.bad_entries, u64::from(cut), "cut at {len}");
                let last = ends[whole];
                assert_eq!(f.unread_bytes, (len - last) as u64, "cut at {len}");
            }
            Err(e) => {
                assert!(len < HEADER_SIZE, "cut at {len} refused: {e}");
                assert_eq!(e, StackFileError::Short);
            }
        }
    }
}

/// Every single bit flip: the file refused (header), or an entry counted bad and never an
/// entry that differs from what was written.
#[test]
fn every_single_bit_flip_is_refused_or_counted() {
    let (written, bytes) = sample(5);
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        match StackFile::parse(&b) {
            Err(_) => assert!(bit / 8 < HEADER_SIZE, "bit {bit}: whole file refused"),
            Ok(f) => {
                assert!(f.bad_entries >= 1, "bit {bit} flipped went unnoticed");
                assert!(f.entries.len() < written.len(), "bit {bit}");
                check_prefix(&f, &written, &format!("bit {bit}"));
            }
        }
    }
}

/// Lengths past the bound or past the file: refused without allocating what they claim.
#[test]
fn hostile_lengths_are_counted_not_followed() {
    let (_, bytes) = sample(2);
    for hostile in [u32::MAX, (MAX_STACK_BYTES + 57) as u32, 0, 55, 1 << 20] {
        let mut b = bytes.clone();
        b[HEADER_SIZE..HEADER_SIZE + 4].copy_from_slice(&hostile.to_le_bytes());
        let f = StackFile::parse(&b).unwrap();
        assert_eq!(f.entries.len(), 0, "length {hostile}");
        assert_eq!(f.bad_entries, 1);
        assert_eq!(f.unread_bytes, (b.len() - HEADER_SIZE) as u64);
    }
    // An inner stack length that disagrees with the entry's, its CRC made right.
    let e = StackEntry {
        index: 0,
        tid: 1,
        ts: 2,
        regs: Regs::default(),
        stack: &[1, 2, 3, 4],
    };
    let mut entry = encode_entry(&e).unwrap();
    let p = ENTRY_PREFIX + 48;
    entry[p..p + 4].copy_from_slice(&1000u32.to_le_bytes());
    let crc = crc32fast::hash(&entry[ENTRY_PREFIX..]);
    entry[4..8].copy_from_slice(&crc.to_le_bytes());
    let mut b = StackWriter::new(Vec::new(), Arch::X86_64, 1)
        .into_inner()
        .unwrap();
    b.extend_from_slice(&entry);
    let f = StackFile::parse(&b).unwrap();
    assert_eq!((f.entries.len(), f.bad_entries), (0, 1));
    // Too long to write.
    let big = vec![0u8; MAX_STACK_BYTES + 1];
    let mut w = StackWriter::new(Vec::new(), Arch::X86_64, 1);
    assert!(w.push(1, 1, Regs::default(), &big).is_err());
    assert_eq!(
        w.push(1, 1, Regs::default(), &[]).unwrap(),
        0,
        "a refused stack takes no index"
    );
}

#[test]
fn a_duplicate_index_is_counted() {
    let e = StackEntry {
        index: 3,
        tid: 1,
        ts: 2,
        regs: Regs::default(),
        stack: &[9; 16],
    };
    let mut b = StackWriter::new(Vec::new(), Arch::X86_64, 1)
        .into_inner()
        .unwrap();
    b.extend_from_slice(&encode_entry(&e).unwrap());
    b.extend_from_slice(&encode_entry(&e).unwrap());
    let f = StackFile::parse(&b).unwrap();
    assert_eq!((f.entries.len(), f.bad_entries), (1, 1));
}

#[test]
fn a_foreign_header_is_refused() {
    let (_, bytes) = sample(1);
    let mut b = bytes.clone();
    b[0] = b'X';
    assert_eq!(StackFile::parse(&b).unwrap_err(), StackFileError::Magic);
    let mut b = bytes.clone();
    b[8] = 2;
    assert_eq!(StackFile::parse(&b).unwrap_err(), StackFileError::HeaderCrc);
}
