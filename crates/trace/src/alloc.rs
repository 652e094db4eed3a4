//! Heap allocations in a stream (`contend record --locks --alloc-sites`): each is a pair of
//! records, [`EventKind::Alloc`] then [`EventKind::AllocAddress`], because an address (48 bits
//! on x86-64 and AArch64 user space) and a size do not fit one 16-byte record beside its time
//! and call site. They name heap locks by the allocation they live in.

use crate::format::{EventKind, Record, NO_SITE};

/// One allocation, as the two records carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alloc {
    pub ts: u64,
    /// The call-site id in the writer's site table, or [`NO_SITE`].
    pub site: u16,
    pub address: u64,
    /// Bytes; `u32::MAX` means that many or more.
    pub size: u32,
}

/// Addresses this format can carry: below 2^48.
pub const ADDRESS_LIMIT: u64 = 1 << 48;

impl Alloc {
    /// The two records, in order. `None` for an address at or above [`ADDRESS_LIMIT`].
    pub fn encode(&self) -> Option<[Record; 2]> {
        if self.address >= ADDRESS_LIMIT {
            return None;
        }
        Some([
            Record {
                ts: self.ts,
                kind: EventKind::Alloc,
                aux: (self.address >> 40) as u8,
                site: self.site,
                obj: self.size,
            },
            Record {
                ts: self.ts,
                kind: EventKind::AllocAddress,
                aux: (self.address >> 32) as u8,
                site: NO_SITE,
                obj: self.address as u32,
            },
        ])
    }

    /// The allocation that `first` (an `Alloc`) and `second` (the record after it) describe;
    /// `None` when they are not such a pair.
    pub fn decode(first: &Record, second: &Record) -> Option<Alloc> {
        if first.kind != EventKind::Alloc
            || second.kind != EventKind::AllocAddress
            || second.ts != first.ts
        {
            return None;
        }
        Some(Alloc {
            ts: first.ts,
            site: first.site,
            address: (u64::from(first.aux) << 40)
                | (u64::from(second.aux) << 32)
                | u64::from(second.obj),
            size: first.obj,
        })
    }
}

/// A size as the format keeps it.
pub fn saturated_size(bytes: usize) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_round_trips_and_pins_its_bytes() {
        let a = Alloc {
            ts: 0x1122_3344_5566_7788,
            site: 7,
            address: 0x7f12_3456_789a,
            size: 48,
        };
        let [r1, r2] = a.encode().unwrap();
        assert_eq!(Alloc::decode(&r1, &r2), Some(a));
        // Byte-level: kind 13 then 14; the address split 0x7f | 0x12 | 0x3456789a.
        let b1 = r1.encode();
        let b2 = r2.encode();
        assert_eq!(&b1[8..16], &[13, 0x7f, 7, 0, 48, 0, 0, 0]);
        assert_eq!(&b2[8..16], &[14, 0x12, 0xff, 0xff, 0x9a, 0x78, 0x56, 0x34]);
    }

    #[test]
    fn addresses_past_48_bits_and_unpaired_records_are_refused() {
        let a = Alloc {
            ts: 1,
            site: NO_SITE,
            address: ADDRESS_LIMIT,
            size: 1,
        };
        assert!(a.encode().is_none());
        let [r1, mut r2] = Alloc { address: 64, ..a }.encode().unwrap();
        assert!(Alloc::decode(&r2, &r1).is_none(), "order matters");
        r2.ts += 1;
        assert!(Alloc::decode(&r1, &r2).is_none(), "a pair shares its time");
        assert_eq!(saturated_size(usize::MAX), u32::MAX);
    }
}
