//! Writes perf.data files of memory samples laid out as `perf record` lays them out (header,
//! attributes with their ids, data records, an EVENT_DESC feature section), so that the
//! reader can be tested on files whose every sample is known, and checked against perf's own
//! `perf c2c report` on the same file. Test support only (feature `perf-writer`).

/// An event of the file.
#[derive(Debug, Clone)]
pub struct Event {
    pub name: String,
    /// `perf_event_attr.type` and `.config` (e.g. 4 and 0x1cd for Intel's `mem-loads`).
    pub attr_type: u32,
    pub config: u64,
}

/// A sample to write.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Index into the writer's events.
    pub event: usize,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub cpu: u32,
    pub period: u64,
    pub weight: u64,
    pub data_src: u64,
}

/// IDENTIFIER | IP | TID | TIME | ADDR | CPU | PERIOD | WEIGHT | DATA_SRC, as `perf c2c record`
/// asks for (it adds PHYS_ADDR, which the reader does not need).
pub const SAMPLE_TYPE: u64 =
    (1 << 16) | 1 | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 7) | (1 << 8) | (1 << 14) | (1 << 15);
const ATTR_SIZE: usize = 128;
const RECORD_MMAP2: u32 = 10;
const RECORD_COMM: u32 = 3;
const RECORD_FORK: u32 = 7;
const RECORD_SAMPLE: u32 = 9;
const RECORD_LOST: u32 = 2;
const MISC_USER: u16 = 2;
const FEATURE_NRCPUS: u32 = 7;
const FEATURE_EVENT_DESC: u32 = 12;
const FEATURE_NUMA_TOPOLOGY: u32 = 14;
const FEATURE_MEM_TOPOLOGY: u32 = 22;

/// The two events `perf c2c record` opens on Intel (PEBS load latency above 30 cycles, and
/// precise stores), with their `perf_event_attr` type (the `cpu` PMU, 4) and config.
pub fn intel_mem_events() -> Vec<Event> {
    vec![
        Event {
            name: "cpu/mem-loads,ldlat=30/P".into(),
            attr_type: 4,
            config: 0x1cd,
        },
        Event {
            name: "cpu/mem-stores/P".into(),
            attr_type: 4,
            config: 0x82d0,
        },
    ]
}

/// A perf.data file being built in memory.
#[derive(Debug, Clone)]
pub struct PerfDataWriter {
    events: Vec<Event>,
    data: Vec<u8>,
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
/// A NUL-terminated string padded with NULs to a multiple of `align`.
fn put_padded(out: &mut Vec<u8>, s: &str, align: usize) {
    let len = (s.len() + 1).div_ceil(align) * align;
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + len - s.len(), 0);
}

impl PerfDataWriter {
    pub fn new(events: Vec<Event>) -> PerfDataWriter {
        PerfDataWriter {
            events,
            data: Vec::new(),
        }
    }

    /// The sample id of event `i` (what PERF_SAMPLE_IDENTIFIER carries).
    fn id_of(i: usize) -> u64 {
        1000 + i as u64
    }

    fn record(&mut self, kind: u32, body: &[u8]) {
        self.record_misc(kind, MISC_USER, body);
    }

    /// A record of any kind with the given body (for damaged and unusual files).
    pub fn record_misc(&mut self, kind: u32, misc: u16, body: &[u8]) {
        put_u32(&mut self.data, kind);
        put_u16(&mut self.data, misc);
        put_u16(&mut self.data, (8 + body.len()) as u16);
        self.data.extend_from_slice(body);
    }

    pub fn comm(&mut self, pid: u32, tid: u32, name: &str) {
        self.comm_misc(pid, tid, name, MISC_USER);
    }

    /// The COMM record of an exec (PERF_RECORD_MISC_COMM_EXEC).
    pub fn comm_exec(&mut self, pid: u32, name: &str) {
        self.comm_misc(pid, pid, name, MISC_USER | 0x2000);
    }

    fn comm_misc(&mut self, pid: u32, tid: u32, name: &str, misc: u16) {
        let mut b = Vec::new();
        put_u32(&mut b, pid);
        put_u32(&mut b, tid);
        put_padded(&mut b, name, 8);
        self.record_misc(RECORD_COMM, misc, &b);
    }

    pub fn fork(&mut self, pid: u32, ppid: u32, time: u64) {
        let mut b = Vec::new();
        for v in [pid, ppid, pid, ppid] {
            put_u32(&mut b, v);
        }
        put_u64(&mut b, time);
        self.record(RECORD_FORK, &b);
    }

    /// A mapping; `prot` as PROT_* bits.
    #[allow(clippy::too_many_arguments)]
    pub fn mmap2(
        &mut self,
        pid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        prot: u32,
        inode: u64,
        path: &str,
    ) {
        let mut b = Vec::new();
        put_u32(&mut b, pid);
        put_u32(&mut b, pid);
        put_u64(&mut b, start);
        put_u64(&mut b, len);
        put_u64(&mut b, pgoff);
        put_u32(&mut b, 8); // major
        put_u32(&mut b, 1); // minor
        put_u64(&mut b, inode);
        put_u64(&mut b, 0); // inode generation
        put_u32(&mut b, prot);
        put_u32(&mut b, 2); // MAP_PRIVATE
        put_padded(&mut b, path, 8);
        self.record(RECORD_MMAP2, &b);
    }

    pub fn lost(&mut self, count: u64) {
        let mut b = Vec::new();
        put_u64(&mut b, Self::id_of(0));
        put_u64(&mut b, count);
        self.record(RECORD_LOST, &b);
    }

    pub fn sample(&mut self, s: &Sample) {
        let mut b = Vec::new();
        put_u64(&mut b, Self::id_of(s.event));
        put_u64(&mut b, s.ip);
        put_u32(&mut b, s.pid);
        put_u32(&mut b, s.tid);
        put_u64(&mut b, s.time);
        put_u64(&mut b, s.addr);
        put_u32(&mut b, s.cpu);
        put_u32(&mut b, 0);
        put_u64(&mut b, s.period);
        put_u64(&mut b, s.weight);
        put_u64(&mut b, s.data_src);
        self.record(RECORD_SAMPLE, &b);
    }

    fn attr(&self, e: &Event) -> Vec<u8> {
        let mut a = Vec::with_capacity(ATTR_SIZE);
        put_u32(&mut a, e.attr_type);
        put_u32(&mut a, ATTR_SIZE as u32);
        put_u64(&mut a, e.config);
        put_u64(&mut a, 4000); // sample_period
        put_u64(&mut a, SAMPLE_TYPE);
        put_u64(&mut a, 0); // read_format
                            // mmap, comm, precise_ip = 2, mmap_data, mmap2, comm_exec
        let flags: u64 = (1 << 8) | (1 << 9) | (2 << 15) | (1 << 17) | (1 << 23) | (1 << 24);
        put_u64(&mut a, flags);
        a.resize(ATTR_SIZE, 0);
        a
    }

    /// The whole file.
    pub fn finish(self) -> Vec<u8> {
        const HEADER: usize = 104;
        let n = self.events.len();
        // Layout: header, ids, attrs (each attr + its ids section), data, feature table, features.
        let ids_at = HEADER;
        let attrs_at = ids_at + 8 * n;
        let attr_entry = ATTR_SIZE + 16;
        let data_at = attrs_at + attr_entry * n;
        let data_end = data_at + self.data.len();
        let mut desc = Vec::new();
        put_u32(&mut desc, n as u32);
        put_u32(&mut desc, ATTR_SIZE as u32);
        for (i, e) in self.events.iter().enumerate() {
            desc.extend_from_slice(&self.attr(e));
            put_u32(&mut desc, 1);
            let len = (e.name.len() + 1).div_ceil(64) * 64;
            put_u32(&mut desc, len as u32);
            put_padded(&mut desc, &e.name, 64);
            put_u64(&mut desc, Self::id_of(i));
        }
        // Two CPUs on one node, as perf writes NRCPUS and NUMA_TOPOLOGY (perf c2c report
        // needs both to set up its node and CPU columns).
        let mut nrcpus = Vec::new();
        put_u32(&mut nrcpus, 2);
        put_u32(&mut nrcpus, 2);
        let mut numa = Vec::new();
        put_u32(&mut numa, 1);
        put_u32(&mut numa, 0);
        put_u64(&mut numa, 1 << 20);
        put_u64(&mut numa, 1 << 19);
        put_u32(&mut numa, 8);
        put_padded(&mut numa, "0-1", 8);
        // One memory node of 16 blocks of 128 MiB (perf c2c maps data addresses to nodes).
        let mut memory = Vec::new();
        for v in [1u64, 128 << 20, 1, 0, 16, 16, 0xffff] {
            put_u64(&mut memory, v);
        }
        let features = [
            (FEATURE_NRCPUS, nrcpus),
            (FEATURE_EVENT_DESC, desc),
            (FEATURE_NUMA_TOPOLOGY, numa),
            (FEATURE_MEM_TOPOLOGY, memory),
        ];
        let mut out = Vec::new();
        out.extend_from_slice(b"PERFILE2");
        put_u64(&mut out, HEADER as u64);
        put_u64(&mut out, attr_entry as u64);
        put_u64(&mut out, attrs_at as u64);
        put_u64(&mut out, (attr_entry * n) as u64);
        put_u64(&mut out, data_at as u64);
        put_u64(&mut out, self.data.len() as u64);
        put_u64(&mut out, 0); // event types
        put_u64(&mut out, 0);
        let bits: u64 = features.iter().map(|(bit, _)| 1u64 << bit).sum();
        for f in [bits, 0, 0, 0] {
            put_u64(&mut out, f);
        }
        for i in 0..n {
            put_u64(&mut out, Self::id_of(i));
        }
        for (i, e) in self.events.iter().enumerate() {
            out.extend_from_slice(&self.attr(e));
            put_u64(&mut out, (ids_at + 8 * i) as u64);
            put_u64(&mut out, 8);
        }
        out.extend_from_slice(&self.data);
        let mut at = data_end + 16 * features.len();
        for (_, bytes) in &features {
            put_u64(&mut out, at as u64);
            put_u64(&mut out, bytes.len() as u64);
            at += bytes.len();
        }
        for (_, bytes) in &features {
            out.extend_from_slice(bytes);
        }
        out
    }
}

/// A known file: the reader's unit tests and the CLI's comparison with `perf c2c report` use it.
pub mod scenario {
    use super::{PerfDataWriter, Sample};
    use crate::perfmem::data_source::*;

    pub const PID: u32 = 4242;
    pub const FALSE_LINE: u64 = 0x60_1040;
    pub const TRUE_LINE: u64 = 0x60_1080;
    pub const QUIET_LINE: u64 = 0x60_10c0;

    fn load(lvl: u64, snoop: u64, remote: bool) -> u64 {
        DataSource::encode(OP_LOAD, LVL_HIT | lvl, snoop, 0, 0, remote, 0).0
    }

    /// A process with three threads: a falsely shared line (threads 1 and 2 each load and store
    /// their own 8 bytes; their loads hit lines the other modified), a truly shared counter (locked
    /// read-modify-writes by both at offset 0), and a quiet line (one store, one load, no HITM).
    /// Local HITM 95, remote HITM 5, as asserted below and by perf c2c report in the CLI test.
    pub fn scenario() -> Vec<u8> {
        let mut w = PerfDataWriter::new(super::intel_mem_events());
        w.comm(PID, PID, "fs_demo");
        w.mmap2(PID, 0x40_0000, 0x1000, 0, 5, 77, "/opt/fs_demo");
        w.mmap2(PID, 0x60_1000, 0x1000, 0x1000, 3, 77, "/opt/fs_demo");
        let mut time = 1_000;
        let mut put = |w: &mut PerfDataWriter, event, tid, ip, addr, data_src, weight| {
            time += 10;
            w.sample(&Sample {
                event,
                ip,
                pid: PID,
                tid,
                time,
                addr,
                cpu: (tid + 1) % 2,
                period: 4000,
                weight,
                data_src,
            });
        };
        let store = DataSource::encode(OP_STORE, LVL_HIT | LVL_L1, 0, 0, 0, false, 0).0;
        for (tid, offset, local, remote) in [(PID + 1, 0u64, 30, 0), (PID + 2, 8, 25, 5)] {
            for i in 0..40 {
                let src = if i < local {
                    load(LVL_L3, SNOOP_HITM, false)
                } else if i < local + remote {
                    load(LVL_REM_CCE1, SNOOP_HITM, true)
                } else {
                    load(LVL_L1, 0, false)
                };
                put(
                    &mut w,
                    0,
                    tid,
                    0x40_0100 + offset,
                    FALSE_LINE + offset,
                    src,
                    200,
                );
            }
            for _ in 0..20 {
                put(
                    &mut w,
                    1,
                    tid,
                    0x40_0110 + offset,
                    FALSE_LINE + offset,
                    store,
                    0,
                );
            }
        }
        let locked = |snoop| {
            DataSource::encode(OP_LOAD, LVL_HIT | LVL_L3, snoop, LOCK_LOCKED, 0, false, 0).0
        };
        for tid in [PID + 1, PID + 2] {
            for i in 0..30 {
                let src = if i < 20 {
                    locked(SNOOP_HITM)
                } else {
                    locked(0)
                };
                put(&mut w, 0, tid, 0x40_0200, TRUE_LINE, src, 150);
            }
        }
        put(&mut w, 1, PID + 1, 0x40_0300, QUIET_LINE + 16, store, 0);
        put(
            &mut w,
            0,
            PID + 2,
            0x40_0310,
            QUIET_LINE + 24,
            load(LVL_L1, 0, false),
            5,
        );
        // A load the PMU gave no address for, and lost samples.
        put(&mut w, 0, PID, 0x40_0400, 0, load(LVL_L1, 0, false), 5);
        w.lost(7);
        w.finish()
    }
}
