//! Memory samples from a perf.data file: what `perf c2c record` or `perf mem record` wrote on a
//! machine whose PMU samples loads and stores with their data address (Intel PEBS
//! `mem-loads`/`mem-stores`, AMD IBS), read for contend's PMU back end of `contend c2c`.
//!
//! The file's structure (header, attributes, feature sections, record stream) is read by the
//! `linux-perf-data` crate after [`check_sections`] has bounded every section by the file's
//! size; sample bodies are decoded here ([`parse_sample`]), because the weight and `data_src`
//! fields are what this back end is about. [`to_sharing`] turns the samples into the same
//! per-process model the instrumentation back end writes (`trace::sharing`).

pub mod data_source;
mod to_sharing;
#[cfg(any(test, feature = "perf-writer"))]
pub mod writer;

pub use data_source::{DataSource, MemOp, Transfer};
pub use to_sharing::to_sharing;

use linux_perf_data::linux_perf_event_reader::{BranchSampleFormat, RecordType, SampleFormat};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use std::collections::BTreeMap;

/// One sampled load or store with its data address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemSample {
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub cpu: Option<u32>,
    pub ip: u64,
    pub addr: u64,
    /// Events this sample stands for (the sample period), 1 when the file has no period.
    pub period: u64,
    /// The load latency in core cycles (the sample weight), when recorded.
    pub weight: Option<u64>,
    pub source: DataSource,
    /// Index into [`PerfMem::events`].
    pub event: usize,
}

/// A mapping of a process, from an MMAP or MMAP2 record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// `PROT_*` bits (MMAP2), or `PROT_READ|PROT_EXEC` for an executable MMAP record.
    pub prot: u32,
    pub shared: bool,
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
    pub path: String,
}

/// What a perf.data file holds for the sharing model.
#[derive(Debug, Clone, Default)]
pub struct PerfMem {
    /// Event names, in the file's attribute order.
    pub events: Vec<String>,
    /// Loads and stores with a data address.
    pub samples: Vec<MemSample>,
    /// Load and store samples whose data address was 0 (the PMU could not give one).
    pub without_address: u64,
    /// Samples of events that are not memory sampling (no address or `data_src`, or a
    /// `data_src` that is neither a load nor a store).
    pub other_samples: u64,
    /// Samples lost while recording: the larger of the kernel's PERF_RECORD_LOST counts and
    /// perf's LOST_SAMPLES counts (they overlap), a lower bound.
    pub lost: u64,
    /// Records that could not be decoded (counted, skipped).
    pub malformed: u64,
    /// Each process's command name (the last COMM record of its main thread).
    pub commands: BTreeMap<u32, String>,
    /// Each process's parent, from FORK records.
    pub parents: BTreeMap<u32, u32>,
    pub mappings: BTreeMap<u32, Vec<Mapping>>,
    /// `perf record`'s command line, from the file's header.
    pub cmdline: Option<Vec<String>>,
}

/// A perf.data file contend cannot read, in words a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum PerfDataError {
    #[error("not a perf.data file (no PERFILE2 magic)")]
    NotPerfData,
    #[error("a big-endian perf.data file: convert it on the machine that recorded it (`perf script` or `perf inject`) or record on a little-endian one")]
    BigEndian,
    #[error("a pipe-mode perf.data stream: record into a file (`perf c2c record -o FILE`)")]
    Pipe,
    #[error("a compressed perf.data file (recorded with -z): decompress it with `perf inject -i FILE -o PLAIN` and read PLAIN")]
    Compressed,
    #[error("an AUX trace (Intel PT, Arm SPE, CoreSight), which contend does not decode: record PEBS or IBS memory samples with `perf c2c record` or `perf mem record`")]
    AuxTrace,
    #[error("truncated or corrupt perf.data: {0}")]
    Corrupt(String),
    #[error("perf.data: {0}")]
    Unreadable(String),
}

const HEADER_SIZE: usize = 104;

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    bytes
        .get(at..at.checked_add(8)?)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at.checked_add(4)?)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

/// The largest `perf_event_attr` contend accepts (the kernel's is 136 bytes today).
const MAX_ATTR_SIZE: u64 = 4096;
const FEATURE_CMDLINE: u32 = 11;
const FEATURE_EVENT_DESC: u32 = 12;
const FEATURE_COMPRESSED: u32 = 27;
const RECORD_AUXTRACE: u32 = 71;
const RECORD_COMPRESSED: u32 = 81;
const RECORD_COMPRESSED2: u32 = 83;

/// Whether feature `bit` is set, and its section (offset, size) from the table after the data
/// section, unchecked.
fn feature_section(bytes: &[u8], bit: u32) -> Option<(u64, u64)> {
    let word = |at: usize| u64_at(bytes, at).unwrap_or(0);
    let set = |b: u32| word(72 + 8 * (b as usize / 64)) & (1 << (b % 64)) != 0;
    if bit >= 256 || !set(bit) {
        return None;
    }
    let before = (0..bit).filter(|&b| set(b)).count() as u64;
    let at = word(40).checked_add(word(48))?.checked_add(16 * before)?;
    let at = usize::try_from(at).ok()?;
    Some((u64_at(bytes, at)?, u64_at(bytes, at.checked_add(8)?)?))
}

/// Each attribute's raw `sample_type` and `read_format`, in the order linux-perf-data lists the
/// attributes (EVENT_DESC, else the event types section, else the attribute section). The
/// crate drops `read_format` bits it does not know (PERF_FORMAT_LOST), which change a sample's
/// layout; these are read from the bytes. Call after [`check_sections`].
fn raw_formats(bytes: &[u8]) -> Vec<(u64, u64)> {
    let word = |at: usize| u64_at(bytes, at).unwrap_or(0);
    if let Some((offset, size)) = feature_section(bytes, FEATURE_EVENT_DESC) {
        let s = &bytes[offset as usize..(offset + size) as usize];
        let (nr, attr_size) = (
            u32_at(s, 0).unwrap_or(0),
            u32_at(s, 4).unwrap_or(0) as usize,
        );
        let mut at = 8usize;
        let mut out = Vec::new();
        for _ in 0..nr {
            out.push((
                u64_at(s, at + 24).unwrap_or(0),
                u64_at(s, at + 32).unwrap_or(0),
            ));
            let ids = u32_at(s, at + attr_size).unwrap_or(0) as usize;
            let name = u32_at(s, at + attr_size + 4).unwrap_or(0) as usize;
            at += attr_size + 8 + name + 8 * ids;
        }
        return out;
    }
    let entry = word(16) as usize;
    let (section, entry_size) = if word(64) != 0 {
        (56, entry + 16)
    } else {
        (24, entry)
    };
    let (first, size) = (word(section) as usize, word(section + 8) as usize);
    (0..size / entry_size.max(1))
        .map(|i| {
            (
                word(first + i * entry_size + 24),
                word(first + i * entry_size + 32),
            )
        })
        .collect()
}

/// Checks that every section, every attribute's id list and the lengths inside the feature
/// sections the reader parses lie inside the file, so that nothing later allocates or seeks from
/// an unchecked length.
pub fn check_sections(bytes: &[u8]) -> Result<(), PerfDataError> {
    match bytes.get(..8) {
        Some(b"PERFILE2") => {}
        Some(b"2ELIFREP") => return Err(PerfDataError::BigEndian),
        _ => return Err(PerfDataError::NotPerfData),
    }
    let corrupt = |why: String| PerfDataError::Corrupt(why);
    let header_size = u64_at(bytes, 8).ok_or_else(|| corrupt("the header is cut short".into()))?;
    if header_size == 16 {
        return Err(PerfDataError::Pipe);
    }
    if header_size < HEADER_SIZE as u64 || bytes.len() < HEADER_SIZE {
        return Err(corrupt("the header is cut short".into()));
    }
    let len = bytes.len() as u64;
    let within = |offset: u64, size: u64| offset.checked_add(size).is_some_and(|end| end <= len);
    let word = |at: usize| u64_at(bytes, at).unwrap_or(0);
    for (name, at) in [("attributes", 24), ("data", 40), ("event types", 56)] {
        let (offset, size) = (word(at), word(at + 8));
        if !within(offset, size) {
            return Err(corrupt(format!(
                "the {name} section ({size} bytes at {offset}) runs past the end of the {len}-byte file"
            )));
        }
    }
    // Attribute entries (attr_size bytes, ending in the section of their ids), and the event
    // types section's entries (an attribute, then its ids section).
    let entry = word(16);
    if !(16 + 64..=MAX_ATTR_SIZE + 16).contains(&entry) {
        return Err(corrupt(format!("attribute entries of {entry} bytes")));
    }
    for (section, entry_size) in [(24usize, entry), (56, entry + 16)] {
        let size = word(section + 8);
        let first = word(section);
        for i in 0..size / entry_size {
            let ids_at = (first + i * entry_size + entry_size - 16) as usize;
            match (u64_at(bytes, ids_at), u64_at(bytes, ids_at + 8)) {
                (Some(o), Some(s)) if within(o, s) => {}
                _ => {
                    return Err(corrupt(format!(
                        "attribute {i}'s id list runs past the end of the file"
                    )))
                }
            }
        }
    }
    if (2..4).any(|i| word(72 + 8 * i) != 0) {
        return Err(PerfDataError::Unreadable(
            "a simpleperf file (Android): record with Linux perf (`perf c2c record`)".into(),
        ));
    }
    let mut table = word(40) + word(48);
    for bit in 0..128u32 {
        if word(72 + 8 * (bit as usize / 64)) & (1 << (bit % 64)) == 0 {
            continue;
        }
        let at = usize::try_from(table)
            .map_err(|_| corrupt("the feature table is out of range".into()))?;
        table += 16;
        let (offset, size) = match (u64_at(bytes, at), u64_at(bytes, at + 8)) {
            (Some(o), Some(s)) if within(o, s) => (o as usize, s as usize),
            (Some(_), Some(_)) => {
                return Err(corrupt(format!(
                    "feature section {bit} runs past the end of the file"
                )))
            }
            _ => return Err(corrupt("the feature section table is cut short".into())),
        };
        let section = &bytes[offset..offset + size];
        let ok = match bit {
            FEATURE_EVENT_DESC => event_desc_fits(section),
            FEATURE_CMDLINE => string_list_fits(section),
            _ => true,
        };
        if !ok {
            return Err(corrupt(format!(
                "feature section {bit} holds lengths beyond its {size} bytes"
            )));
        }
    }
    if feature_section(bytes, FEATURE_COMPRESSED).is_some() {
        return Err(PerfDataError::Compressed);
    }
    // The data section's records: each header's size inside the section; none of the kinds
    // whose payload lies beyond their header (AUX traces) or must be decompressed.
    let (mut at, end) = (word(40), word(40) + word(48));
    while at < end {
        let kind = u32_at(bytes, at as usize);
        let size = u32_at(bytes, at as usize + 4).map(|w| u64::from(w >> 16));
        let (Some(kind), Some(size)) = (kind, size) else {
            return Err(corrupt("a record header is cut short".into()));
        };
        match kind {
            RECORD_AUXTRACE => return Err(PerfDataError::AuxTrace),
            RECORD_COMPRESSED | RECORD_COMPRESSED2 => return Err(PerfDataError::Compressed),
            _ => {}
        }
        if size < 8 || at + size > end {
            return Err(corrupt(format!(
                "a record of {size} bytes at {at} does not fit the data section"
            )));
        }
        at += size;
    }
    Ok(())
}

/// HEADER_EVENT_DESC: u32 nr, u32 attr_size, then per event the attribute, u32 nr_ids, a
/// length-prefixed name and nr_ids u64 ids.
fn event_desc_fits(s: &[u8]) -> bool {
    let (Some(nr), Some(attr_size)) = (u32_at(s, 0), u32_at(s, 4)) else {
        return false;
    };
    if u64::from(attr_size) > MAX_ATTR_SIZE {
        return false;
    }
    let mut at = 8usize;
    for _ in 0..nr {
        at += attr_size as usize;
        let (Some(ids), Some(name)) = (u32_at(s, at), u32_at(s, at + 4)) else {
            return false;
        };
        at += 8 + name as usize + 8 * ids as usize;
        if at > s.len() {
            return false;
        }
    }
    true
}

/// HEADER_CMDLINE: u32 nr, then nr length-prefixed strings.
fn string_list_fits(s: &[u8]) -> bool {
    let Some(nr) = u32_at(s, 0) else {
        return false;
    };
    let mut at = 4usize;
    for _ in 0..nr {
        let Some(l) = u32_at(s, at) else {
            return false;
        };
        at += 4 + l as usize;
        if at > s.len() {
            return false;
        }
    }
    true
}

/// The fields of a sample body this back end uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SampleFields {
    pub ip: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    pub weight: Option<u64>,
    pub data_src: Option<u64>,
}

/// Reads a little-endian sample body laid out by `sample_type` (perf_event.h's
/// PERF_RECORD_SAMPLE), up to `data_src`; `None` when the body is shorter than its layout.
pub fn parse_sample(
    body: &[u8],
    sample_type: u64,
    read_format: u64,
    user_regs: u32,
    branch_hw_index: bool,
) -> Option<SampleFields> {
    let mut c = Cursor { body, at: 0 };
    let has = |bit: u64| sample_type & bit != 0;
    let mut f = SampleFields::default();
    if has(1 << 16) {
        c.next()?; // IDENTIFIER
    }
    if has(1 << 0) {
        f.ip = Some(c.next()?);
    }
    if has(1 << 1) {
        let v = c.next()?;
        f.pid = Some(v as u32);
        f.tid = Some((v >> 32) as u32);
    }
    if has(1 << 2) {
        f.time = Some(c.next()?);
    }
    if has(1 << 3) {
        f.addr = Some(c.next()?);
    }
    if has(1 << 6) {
        c.next()?; // ID
    }
    if has(1 << 9) {
        c.next()?; // STREAM_ID
    }
    if has(1 << 7) {
        f.cpu = Some(c.next()? as u32);
    }
    if has(1 << 8) {
        f.period = Some(c.next()?);
    }
    if has(1 << 4) {
        // struct read_format: per value, the value and optionally its id and lost count.
        let per_value = 1 + u64::from(read_format & 4 != 0) + u64::from(read_format & 16 != 0);
        let times = u64::from(read_format & 1 != 0) + u64::from(read_format & 2 != 0);
        let words = if read_format & 8 != 0 {
            let nr = c.next()?;
            times.checked_add(nr.checked_mul(per_value)?)?
        } else {
            times + per_value
        };
        c.at =
            c.at.checked_add(usize::try_from(words.checked_mul(8)?).ok()?)?;
    }
    if has(1 << 5) {
        let nr = c.next()?;
        c.at =
            c.at.checked_add(usize::try_from(nr.checked_mul(8)?).ok()?)?;
    }
    if has(1 << 10) {
        let size = u32_at(body, c.at)?;
        c.at = c.at.checked_add(4)?.checked_add(size as usize)?;
    }
    if has(1 << 11) {
        // u64 nr, [u64 hw_idx], nr × {from, to, flags}.
        let nr = c.next()?;
        if branch_hw_index {
            c.next()?;
        }
        c.at =
            c.at.checked_add(usize::try_from(nr.checked_mul(24)?).ok()?)?;
    }
    if has(1 << 12) {
        let abi = c.next()?;
        if abi != 0 {
            c.at = c.at.checked_add(8 * user_regs as usize)?;
        }
    }
    if has(1 << 13) {
        let size = c.next()?;
        c.at = c.at.checked_add(usize::try_from(size).ok()?)?;
        if size != 0 {
            c.next()?; // dyn_size
        }
    }
    if c.at > body.len() {
        return None;
    }
    if has(1 << 14) {
        f.weight = Some(c.next()?);
    } else if has(1 << 24) {
        // union perf_sample_weight: var1_dw (the latency) in the low 32 bits.
        f.weight = Some(c.next()? & 0xffff_ffff);
    }
    if has(1 << 15) {
        f.data_src = Some(c.next()?);
    }
    (c.at <= body.len()).then_some(f)
}

/// Reads little-endian words from a sample body.
struct Cursor<'a> {
    body: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn next(&mut self) -> Option<u64> {
        let v = u64_at(self.body, self.at)?;
        self.at += 8;
        Some(v)
    }
}

/// Replaces what a new mapping covers, as the kernel does for `MAP_FIXED`.
fn add_mapping(list: &mut Vec<Mapping>, m: Mapping) {
    list.retain(|o| o.end <= m.start || o.start >= m.end);
    let at = list.partition_point(|o| o.start < m.start);
    list.insert(at, m);
}

/// A record other than a sample that the model uses.
enum SideRecord {
    /// PERF_RECORD_LOST: records the kernel could not write.
    Lost(u64),
    /// PERF_RECORD_LOST_SAMPLES: samples an event lost (perf ≥ 6.0 adds one per event at the
    /// end, from PERF_FORMAT_LOST, which overlaps the kernel's LOST records).
    LostSamples(u64),
    Comm {
        pid: u32,
        tid: u32,
        name: String,
        exec: bool,
    },
    Fork {
        pid: u32,
        ppid: u32,
    },
    Map {
        pid: u32,
        mapping: Mapping,
    },
    Other,
}

/// Reads a little-endian LOST, LOST_SAMPLES, COMM, FORK, MMAP or MMAP2 body (perf_event.h's
/// layouts); `None` when it is shorter than its layout. Done here rather than by the
/// `linux-perf-event-reader` crate, which asserts on some malformed MMAP2 bodies.
fn side_record(kind: u32, misc: u16, b: &[u8]) -> Option<SideRecord> {
    let cstr = |at: usize| -> Option<String> {
        let rest = b.get(at..)?;
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    Some(match kind {
        2 => SideRecord::Lost(u64_at(b, 8)?),
        13 => SideRecord::LostSamples(u64_at(b, 0)?),
        3 => SideRecord::Comm {
            pid: u32_at(b, 0)?,
            tid: u32_at(b, 4)?,
            name: cstr(8)?,
            // PERF_RECORD_MISC_COMM_EXEC
            exec: misc & 0x2000 != 0,
        },
        7 => SideRecord::Fork {
            pid: u32_at(b, 0)?,
            ppid: u32_at(b, 4)?,
        },
        1 => {
            // PERF_RECORD_MISC_MMAP_DATA: a data mapping, else executable code.
            let data = misc & 0x2000 != 0;
            SideRecord::Map {
                pid: u32_at(b, 0)?,
                mapping: Mapping {
                    start: u64_at(b, 8)?,
                    end: u64_at(b, 8)?.saturating_add(u64_at(b, 16)?),
                    offset: u64_at(b, 24)?,
                    prot: if data { 3 } else { 5 },
                    shared: false,
                    major: 0,
                    minor: 0,
                    inode: 0,
                    path: cstr(32)?,
                },
            }
        }
        10 => {
            // PERF_RECORD_MISC_MMAP_BUILD_ID: a build id where the device and inode would be.
            let build_id = misc & (1 << 14) != 0;
            let (major, minor, inode) = if build_id {
                (0, 0, 0)
            } else {
                (u32_at(b, 32)?, u32_at(b, 36)?, u64_at(b, 40)?)
            };
            SideRecord::Map {
                pid: u32_at(b, 0)?,
                mapping: Mapping {
                    start: u64_at(b, 8)?,
                    end: u64_at(b, 8)?.saturating_add(u64_at(b, 16)?),
                    offset: u64_at(b, 24)?,
                    prot: u32_at(b, 56)?,
                    shared: u32_at(b, 60)? & 1 != 0,
                    major,
                    minor,
                    inode,
                    path: cstr(64)?,
                },
            }
        }
        _ => SideRecord::Other,
    })
}

/// Reads every memory sample, process name and mapping of a perf.data file.
pub fn read(bytes: &[u8]) -> Result<PerfMem, PerfDataError> {
    check_sections(bytes)?;
    let reader = PerfFileReader::parse_file(std::io::Cursor::new(bytes))
        .map_err(|e| PerfDataError::Unreadable(e.to_string()))?;
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = reader;
    let attrs = perf_file.event_attributes().to_vec();
    let raw = raw_formats(bytes);
    let mut mem = PerfMem {
        events: attrs
            .iter()
            .map(|a| {
                a.name
                    .clone()
                    .unwrap_or_else(|| format!("{:?}", a.attr.type_))
            })
            .collect(),
        cmdline: perf_file
            .cmdline()
            .ok()
            .flatten()
            .map(|c| c.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    };
    let (mut lost_records, mut lost_samples) = (0u64, 0u64);
    loop {
        let record = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(PerfDataError::Corrupt(e.to_string())),
        };
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        if record.record_type == RecordType::SAMPLE {
            let info = &record.parse_info;
            let body = record.data.as_slice();
            let (sample_type, read_format) = raw
                .get(attr_index)
                .copied()
                .unwrap_or((info.sample_format.bits(), info.read_format.bits()));
            let Some(f) = parse_sample(
                &body,
                sample_type,
                read_format,
                u32::from(info.user_regs_count),
                info.branch_sample_format
                    .contains(BranchSampleFormat::HW_INDEX),
            ) else {
                mem.malformed += 1;
                continue;
            };
            let wanted = SampleFormat::ADDR | SampleFormat::DATA_SRC;
            let source = DataSource(f.data_src.unwrap_or(0));
            if !info.sample_format.contains(wanted) || source.op() == MemOp::Other {
                mem.other_samples += 1;
                continue;
            }
            let addr = f.addr.unwrap_or(0);
            if addr == 0 {
                mem.without_address += 1;
                continue;
            }
            mem.samples.push(MemSample {
                pid: f.pid.unwrap_or(0),
                tid: f.tid.unwrap_or(0),
                time_ns: f.time.unwrap_or(0),
                cpu: f.cpu,
                ip: f.ip.unwrap_or(0),
                addr,
                period: f.period.unwrap_or(1).max(1),
                weight: f.weight.filter(|&w| w != 0),
                source,
                event: attr_index,
            });
            continue;
        }
        let body = record.data.as_slice();
        match side_record(record.record_type.0, record.misc, &body) {
            Some(SideRecord::Lost(n)) => lost_records = lost_records.saturating_add(n),
            Some(SideRecord::LostSamples(n)) => lost_samples = lost_samples.saturating_add(n),
            Some(SideRecord::Comm {
                pid,
                tid,
                name,
                exec,
            }) => {
                if pid == tid && pid > 0 {
                    mem.commands.insert(pid, name);
                    // A new program: what was mapped before exec is gone (perf's own
                    // mappings, for the workload it started).
                    if exec {
                        mem.mappings.remove(&pid);
                    }
                }
            }
            Some(SideRecord::Fork { pid, ppid }) => {
                if pid != ppid && pid > 0 && ppid > 0 {
                    mem.parents.insert(pid, ppid);
                    // The kernel reports no mappings a child inherits: it has its parent's.
                    if let Some(maps) = mem.mappings.get(&ppid).cloned() {
                        mem.mappings.entry(pid).or_insert(maps);
                    }
                }
            }
            Some(SideRecord::Map { pid, mapping }) => {
                if pid > 0 && pid != u32::MAX {
                    add_mapping(mem.mappings.entry(pid).or_default(), mapping);
                }
            }
            Some(SideRecord::Other) => {}
            None => mem.malformed += 1,
        }
    }
    // The two kinds of loss overlap: the larger is a lower bound of what was lost.
    mem.lost = lost_records.max(lost_samples);
    Ok(mem)
}

/// `mappings` as `/proc/PID/maps` lines, the form contend's symbolizer reads.
pub fn maps_text(mappings: &[Mapping]) -> String {
    let mut out = String::new();
    for m in mappings {
        let perms = format!(
            "{}{}{}{}",
            if m.prot & 1 != 0 { 'r' } else { '-' },
            if m.prot & 2 != 0 { 'w' } else { '-' },
            if m.prot & 4 != 0 { 'x' } else { '-' },
            if m.shared { 's' } else { 'p' },
        );
        // perf names anonymous mappings "//anon"; /proc leaves them unnamed.
        let path = if m.path == "//anon" {
            ""
        } else {
            m.path.as_str()
        };
        out.push_str(&format!(
            "{:x}-{:x} {perms} {:08x} {:02x}:{:02x} {} {path}\n",
            m.start, m.end, m.offset, m.major, m.minor, m.inode
        ));
    }
    out
}
#[cfg(test)]
mod tests;
