//! `perf_mem_data_src` (include/uapi/linux/perf_event.h): where a sampled load or store found
//! its data, as the kernel encodes it for Intel PEBS, AMD IBS and Arm SPE samples; and the
//! classification perf c2c applies to it (tools/perf/util/mem-events.c, `c2c_decode_stats`),
//! restated in docs/methodology.md §7.5.

/// The 64-bit `data_src` word of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataSource(pub u64);

// Field positions and widths of the union's bit fields (little-endian layout).
const OP_SHIFT: u32 = 0;
const LVL_SHIFT: u32 = 5;
const SNOOP_SHIFT: u32 = 19;
const LOCK_SHIFT: u32 = 24;
const LVLNUM_SHIFT: u32 = 33;
const REMOTE_SHIFT: u32 = 37;
const SNOOPX_SHIFT: u32 = 38;
const HOPS_SHIFT: u32 = 43;

pub const OP_LOAD: u64 = 0x02;
pub const OP_STORE: u64 = 0x04;
pub const LVL_HIT: u64 = 0x02;
pub const LVL_MISS: u64 = 0x04;
pub const LVL_L1: u64 = 0x08;
pub const LVL_LFB: u64 = 0x10;
pub const LVL_L2: u64 = 0x20;
pub const LVL_L3: u64 = 0x40;
pub const LVL_LOC_RAM: u64 = 0x80;
pub const LVL_REM_RAM1: u64 = 0x100;
pub const LVL_REM_RAM2: u64 = 0x200;
pub const LVL_REM_CCE1: u64 = 0x400;
pub const LVL_REM_CCE2: u64 = 0x800;
pub const SNOOP_HIT: u64 = 0x04;
pub const SNOOP_HITM: u64 = 0x10;
pub const LOCK_LOCKED: u64 = 0x02;
pub const LVLNUM_L3: u64 = 0x03;
pub const LVLNUM_ANY_CACHE: u64 = 0x0b;
pub const LVLNUM_RAM: u64 = 0x0d;
pub const SNOOPX_PEER: u64 = 0x02;

/// What a sample's access was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOp {
    Load,
    Store,
    /// Neither (a prefetch, an instruction fetch, or not available).
    Other,
}

/// Where a load's data came from, as perf c2c counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Not a cache-to-cache transfer of a modified line.
    None,
    /// Modified in another core's cache on this node (HITM at the LLC).
    LocalHitm,
    /// Modified in a cache of another node.
    RemoteHitm,
    /// From a peer core's or cluster's cache (AMD IBS, Arm), not marked modified.
    LocalPeer,
    RemotePeer,
}

impl Transfer {
    pub fn is_transfer(self) -> bool {
        self != Transfer::None
    }
}

impl DataSource {
    /// Builds a word from its fields (for tests and for writing constructed files).
    pub fn encode(
        op: u64,
        lvl: u64,
        snoop: u64,
        lock: u64,
        lvlnum: u64,
        remote: bool,
        snoopx: u64,
    ) -> DataSource {
        DataSource(
            (op << OP_SHIFT)
                | (lvl << LVL_SHIFT)
                | (snoop << SNOOP_SHIFT)
                | (lock << LOCK_SHIFT)
                | (lvlnum << LVLNUM_SHIFT)
                | (u64::from(remote) << REMOTE_SHIFT)
                | (snoopx << SNOOPX_SHIFT),
        )
    }
    fn field(self, shift: u32, bits: u32) -> u64 {
        (self.0 >> shift) & ((1 << bits) - 1)
    }
    pub fn op_bits(self) -> u64 {
        self.field(OP_SHIFT, 5)
    }
    pub fn lvl(self) -> u64 {
        self.field(LVL_SHIFT, 14)
    }
    pub fn snoop(self) -> u64 {
        self.field(SNOOP_SHIFT, 5)
    }
    pub fn lock(self) -> u64 {
        self.field(LOCK_SHIFT, 2)
    }
    pub fn lvlnum(self) -> u64 {
        self.field(LVLNUM_SHIFT, 4)
    }
    pub fn remote(self) -> bool {
        self.field(REMOTE_SHIFT, 1) == 1
    }
    pub fn snoopx(self) -> u64 {
        self.field(SNOOPX_SHIFT, 2)
    }
    pub fn hops(self) -> u64 {
        self.field(HOPS_SHIFT, 3)
    }

    /// A load wins over a store when both bits are set, as in perf.
    pub fn op(self) -> MemOp {
        let op = self.op_bits();
        if op & OP_LOAD != 0 {
            MemOp::Load
        } else if op & OP_STORE != 0 {
            MemOp::Store
        } else {
            MemOp::Other
        }
    }

    /// A locked (atomic read-modify-write) access.
    pub fn locked(self) -> bool {
        self.lock() & LOCK_LOCKED != 0
    }

    /// A load that hit the local LLC or a closer level of this node.
    fn hit_local_llc(self) -> bool {
        let lvl = self.lvl();
        lvl & LVL_HIT != 0
            && (lvl & LVL_L3 != 0
                || self.lvlnum() == LVLNUM_L3
                || (self.lvlnum() == LVLNUM_ANY_CACHE && !self.remote()))
    }

    /// A load served by another node's cache, or marked remote without a hop count (perf's
    /// `mrem`: Skylake's unknown remote level; POWER marks another core of the same node remote
    /// with hops set).
    fn served_remotely(self) -> bool {
        self.lvl() & (LVL_REM_CCE1 | LVL_REM_CCE2) != 0 || (self.remote() && self.hops() == 0)
    }

    /// The cache-to-cache transfer a load sample shows (stores show none: PEBS and IBS do not
    /// report where a store's line came from).
    pub fn transfer(self) -> Transfer {
        if self.op() != MemOp::Load {
            return Transfer::None;
        }
        let hitm = self.snoop() & SNOOP_HITM != 0;
        let peer = self.snoopx() & SNOOPX_PEER != 0;
        // An LLC hit with HITM is local even when a remote level is set too (Zen 2/3 IBS marks
        // an in-CCX transfer L3 | REM_CCE1), where perf counts it as both.
        if self.hit_local_llc() && hitm {
            return Transfer::LocalHitm;
        }
        if self.served_remotely() {
            if self.snoop() & SNOOP_HIT != 0 {
                return Transfer::None;
            }
            if hitm {
                return Transfer::RemoteHitm;
            }
            if peer {
                return Transfer::RemotePeer;
            }
            return Transfer::None;
        }
        if peer && self.lvl() & LVL_HIT != 0 && self.lvl() & (LVL_L2 | LVL_L3) != 0 {
            return Transfer::LocalPeer;
        }
        Transfer::None
    }

    /// A short name of the level a load's data came from, for the distribution table.
    pub fn level_name(self) -> &'static str {
        let lvl = self.lvl();
        match self.transfer() {
            Transfer::LocalHitm => return "local HITM",
            Transfer::RemoteHitm => return "remote HITM",
            Transfer::LocalPeer => return "local peer",
            Transfer::RemotePeer => return "remote peer",
            Transfer::None => {}
        }
        if lvl & LVL_L1 != 0 {
            "L1"
        } else if lvl & LVL_LFB != 0 {
            "LFB"
        } else if lvl & LVL_L2 != 0 {
            "L2"
        } else if lvl & LVL_L3 != 0 || self.lvlnum() == LVLNUM_L3 {
            "LLC"
        } else if lvl & LVL_LOC_RAM != 0 || (self.lvlnum() == LVLNUM_RAM && !self.remote()) {
            "local DRAM"
        } else if lvl & (LVL_REM_RAM1 | LVL_REM_RAM2) != 0 || self.lvlnum() == LVLNUM_RAM {
            "remote DRAM"
        } else if lvl & LVL_MISS != 0 {
            "miss"
        } else {
            "n/a"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Encodings as arch/x86/events/intel/ds.c builds them for PEBS load-latency samples.
    fn pebs_load(lvl: u64, snoop: u64) -> DataSource {
        DataSource::encode(OP_LOAD, LVL_HIT | lvl, snoop, 0, 0, false, 0)
    }

    #[test]
    fn fields_sit_where_the_uapi_header_puts_them() {
        // PERF_MEM_OP_LOAD << 0 | PERF_MEM_LVL_L3|HIT << 5 | PERF_MEM_SNOOP_HITM << 19
        let d = pebs_load(LVL_L3, SNOOP_HITM);
        assert_eq!(d.0, 0x02 | ((0x40 | 0x02) << 5) | (0x10 << 19));
        assert_eq!(DataSource::encode(0, 0, 0, 0, 0, true, 0).0, 1 << 37);
        assert_eq!(
            DataSource::encode(0, 0, 0, 0, 0, false, SNOOPX_PEER).0,
            2 << 38
        );
        assert_eq!(
            DataSource::encode(0, 0, 0, 0, LVLNUM_ANY_CACHE, false, 0).0,
            0xb << 33
        );
        assert_eq!(
            DataSource::encode(0, 0, 0, LOCK_LOCKED, 0, false, 0).0,
            2 << 24
        );
    }

    #[test]
    fn loads_are_classified_as_perf_c2c_does() {
        assert_eq!(
            pebs_load(LVL_L3, SNOOP_HITM).transfer(),
            Transfer::LocalHitm
        );
        assert_eq!(pebs_load(LVL_L3, SNOOP_HIT).transfer(), Transfer::None);
        assert_eq!(pebs_load(LVL_L1, 0).transfer(), Transfer::None);
        assert_eq!(pebs_load(LVL_L1, 0).level_name(), "L1");
        assert_eq!(
            pebs_load(LVL_REM_CCE1, SNOOP_HITM).transfer(),
            Transfer::RemoteHitm
        );
        assert_eq!(
            pebs_load(LVL_REM_CCE1, SNOOP_HIT).transfer(),
            Transfer::None
        );
        // Skylake: any cache, remote bit, HITM (ds.c's 0x0d entry) is a remote HITM.
        let skl = DataSource::encode(OP_LOAD, LVL_HIT, SNOOP_HITM, 0, LVLNUM_ANY_CACHE, true, 0);
        assert_eq!(skl.transfer(), Transfer::RemoteHitm);
        let skl_local =
            DataSource::encode(OP_LOAD, LVL_HIT, SNOOP_HITM, 0, LVLNUM_ANY_CACHE, false, 0);
        assert_eq!(skl_local.transfer(), Transfer::LocalHitm);
        // AMD IBS: a peer cache hit.
        let ibs = DataSource::encode(OP_LOAD, LVL_HIT | LVL_L2, 0, 0, 0, false, SNOOPX_PEER);
        assert_eq!(ibs.transfer(), Transfer::LocalPeer);
        let ibs_rmt =
            DataSource::encode(OP_LOAD, LVL_HIT, 0, 0, LVLNUM_ANY_CACHE, true, SNOOPX_PEER);
        assert_eq!(ibs_rmt.transfer(), Transfer::RemotePeer);
        // Zen 2/3 in-CCX transfer: L3 and REM_CCE1 with HITM, counted once, as local.
        let zen = pebs_load(LVL_L3 | LVL_REM_CCE1, SNOOP_HITM);
        assert_eq!(zen.transfer(), Transfer::LocalHitm);
        // POWER: remote with a hop count is another core of this node, not a remote cache.
        let power = DataSource(
            DataSource::encode(OP_LOAD, LVL_HIT | LVL_L2, SNOOP_HITM, 0, 0, true, 0).0 | (1 << 43),
        );
        assert_eq!(power.transfer(), Transfer::None);
    }

    #[test]
    fn stores_and_unknown_ops_are_never_transfers() {
        let st = DataSource::encode(OP_STORE, LVL_HIT | LVL_L1, SNOOP_HITM, 0, 0, false, 0);
        assert_eq!(st.op(), MemOp::Store);
        assert_eq!(st.transfer(), Transfer::None);
        // PERF_MEM_NA everywhere: what a software event's sample carries.
        let na = DataSource::encode(1, 1, 1, 1, 0xf, false, 0);
        assert_eq!(na.op(), MemOp::Other);
        assert_eq!(na.level_name(), "n/a");
        let locked = DataSource::encode(OP_LOAD, LVL_HIT | LVL_L1, 0, LOCK_LOCKED, 0, false, 0);
        assert!(locked.locked());
    }
}
