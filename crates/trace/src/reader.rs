//! Validating reader for event streams.
//!
//! [`Stream::parse`] checks a whole stream in one pass before anything is handed out: header,
//! every chunk's bounds and CRC, table entries, and every record's references. Lengths are
//! checked against the bytes that remain and against format maxima before they are used, so a
//! hostile file cannot make the reader allocate or index out of bounds; nothing here panics.
//! Strings are borrowed from the input (zero-copy), which suits a memory-mapped file.
//!
//! A stream that ends exactly at a chunk boundary without a trailer was cut short by its writer
//! (a killed process): it is readable and marked incomplete. A stream that ends inside a chunk
//! is truncated and rejected, as is any checksum mismatch.

use crate::files::{self, ReadFileError};
use crate::format::{
    chunk_crc, ChunkKind, ClockSource, EventKind, Header, ObjectKind, Record, StreamKind, Trailer,
    BYTE_ORDER_MARK, CHUNK_HEADER_LEN, CHUNK_MAGIC, HEADER_LEN, MAGIC, MAX_CHUNK_PAYLOAD,
    MAX_STRING_LEN, NO_OBJECT, NO_SITE, NO_STRING, OBJECT_ENTRY_LEN, RECORD_LEN, SITE_ENTRY_LEN,
    TRAILER_LEN, VERSION,
};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What is wrong with a stream, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {problem}")]
pub struct ReadError {
    pub offset: u64,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("the file is {len} bytes, shorter than the {HEADER_LEN}-byte stream header (empty or truncated)")]
    TooShort { len: usize },
    #[error("not a contend event stream (it does not start with CNTDSTRM)")]
    BadMagic,
    #[error("stream format version {found}, but this contend reads version {VERSION}: read it with the contend that wrote it")]
    UnsupportedVersion { found: u16 },
    #[error(
        "the stream was written in the opposite byte order, which this reader does not convert"
    )]
    ByteOrder,
    #[error("header checksum mismatch: the header is corrupt")]
    HeaderChecksum,
    #[error("header declares {what} = {value}, which this format does not allow")]
    BadHeaderField { what: &'static str, value: u64 },
    #[error("truncated inside chunk {chunk}: it needs {needed} bytes but only {available} remain")]
    Truncated {
        chunk: u64,
        needed: u64,
        available: u64,
    },
    #[error("chunk {chunk} does not start with the chunk marker: the file is corrupt")]
    BadChunkMarker { chunk: u64 },
    #[error("chunk {chunk} declares a payload of {len} bytes, more than the {MAX_CHUNK_PAYLOAD} allowed: the file is corrupt")]
    ChunkTooLarge { chunk: u64, len: u64 },
    #[error("chunk {chunk} checksum mismatch: the file is corrupt")]
    ChunkChecksum { chunk: u64 },
    #[error("chunk {chunk} has unknown kind {kind}: the file is corrupt or from a newer contend")]
    UnknownChunkKind { chunk: u64, kind: u16 },
    #[error("chunk {chunk} ({kind}) is malformed: {why}")]
    MalformedChunk {
        chunk: u64,
        kind: &'static str,
        why: String,
    },
    #[error("event {event} refers to call site {site}, which no earlier site table defines")]
    UndefinedSite { event: u64, site: u16 },
    #[error("event {event} refers to string {id}, which no earlier string table defines")]
    UndefinedString { event: u64, id: u32 },
    #[error("event {event} refers to object {id}, which no earlier object table defines")]
    UndefinedObject { event: u64, id: u32 },
    #[error("the trailer counts {declared} events but the stream holds {found}")]
    TrailerMismatch { declared: u64, found: u64 },
    #[error("{extra} bytes follow the trailer")]
    DataAfterTrailer { extra: u64 },
}

impl ReadError {
    fn at(offset: usize, problem: Problem) -> ReadError {
        ReadError {
            offset: offset as u64,
            problem,
        }
    }
}

/// A validated stream. Records are decoded on demand by [`Stream::events`].
#[derive(Debug)]
pub struct Stream<'a> {
    pub header: Header,
    bytes: &'a [u8],
    /// The file mapping `bytes` is, when read from a [`StreamFile`]: pages read through are
    /// handed back to the page cache ([`MappedPages`]).
    map: Option<&'a memmap2::Mmap>,
    /// (offset of the first record, number of records) of each events chunk.
    event_chunks: Vec<(usize, usize)>,
    strings: HashMap<u32, &'a str>,
    /// Object id -> (kind, address).
    objects: HashMap<u32, (ObjectKind, u64)>,
    /// The same indexed by id, when the ids are dense (writers number them from 1): a lookup
    /// per lock event without hashing.
    dense_objects: Vec<Option<(ObjectKind, u64)>>,
    /// Indexed by site id (ids are below 65535, so this is bounded at 1 MiB).
    sites: Vec<Option<u64>>,
    site_count: usize,
    /// Events per kind byte while validating; folded into `counts` at the end.
    kind_counts: Box<[u64; 256]>,
    pub trailer: Option<Trailer>,
    /// Events in the file.
    pub events: u64,
    /// Events the writer could not keep (from the trailer, or the chunks' counts if none).
    pub dropped: u64,
    pub counts: BTreeMap<EventKind, u64>,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Parses and checks the 64-byte header.
pub fn parse_header(bytes: &[u8]) -> Result<Header, ReadError> {
    if bytes.len() < HEADER_LEN {
        return Err(ReadError::at(
            bytes.len(),
            Problem::TooShort { len: bytes.len() },
        ));
    }
    let b = &bytes[..HEADER_LEN];
    if b[0..8] != MAGIC {
        return Err(ReadError::at(0, Problem::BadMagic));
    }
    if le32(b, 60) != crc32fast::hash(&b[..60]) {
        return Err(ReadError::at(60, Problem::HeaderChecksum));
    }
    let version = le16(b, 8);
    if version != VERSION {
        return Err(ReadError::at(
            8,
            Problem::UnsupportedVersion { found: version },
        ));
    }
    if le16(b, 10) != BYTE_ORDER_MARK {
        return Err(ReadError::at(10, Problem::ByteOrder));
    }
    let field = |at: usize, what: &'static str, value: u64| {
        ReadError::at(at, Problem::BadHeaderField { what, value })
    };
    if usize::from(le16(b, 12)) != HEADER_LEN {
        return Err(field(12, "header size", le16(b, 12).into()));
    }
    if usize::from(le16(b, 14)) != RECORD_LEN {
        return Err(field(14, "record size", le16(b, 14).into()));
    }
    let kind =
        StreamKind::from_u16(le16(b, 16)).ok_or(field(16, "stream kind", le16(b, 16).into()))?;
    let clock =
        ClockSource::from_u16(le16(b, 18)).ok_or(field(18, "clock source", le16(b, 18).into()))?;
    let clock_hz = le64(b, 24);
    if clock_hz == 0 {
        return Err(field(24, "clock rate", 0));
    }
    Ok(Header {
        kind,
        clock,
        clock_hz,
        pid: le32(b, 32),
        tid: le32(b, 36),
        rank: le32(b, 40) as i32,
        base_time: le64(b, 48),
    })
}

impl<'a> Stream<'a> {
    /// Reads a memory-mapped or in-memory stream, validating all of it.
    pub fn parse(bytes: &'a [u8]) -> Result<Stream<'a>, ReadError> {
        Stream::parse_in(bytes, None)
    }

    fn parse_in(bytes: &'a [u8], map: Option<&'a memmap2::Mmap>) -> Result<Stream<'a>, ReadError> {
        let header = parse_header(bytes)?;
        let mut pages = MappedPages::new(map);
        let mut s = Stream {
            header,
            bytes,
            map,
            event_chunks: Vec::new(),
            strings: HashMap::new(),
            objects: HashMap::new(),
            dense_objects: Vec::new(),
            sites: Vec::new(),
            site_count: 0,
            kind_counts: Box::new([0; 256]),
            trailer: None,
            events: 0,
            dropped: 0,
            counts: BTreeMap::new(),
            first_ts: None,
            last_ts: None,
        };
        let mut pos = HEADER_LEN;
        let mut chunk = 0u64;
        let mut chunk_drops = 0u64;
        while pos < bytes.len() {
            if s.trailer.is_some() {
                return Err(ReadError::at(
                    pos,
                    Problem::DataAfterTrailer {
                        extra: (bytes.len() - pos) as u64,
                    },
                ));
            }
            let remaining = bytes.len() - pos;
            if remaining < CHUNK_HEADER_LEN {
                return Err(ReadError::at(
                    pos,
                    Problem::Truncated {
                        chunk,
                        needed: CHUNK_HEADER_LEN as u64,
                        available: remaining as u64,
                    },
                ));
            }
            let h = &bytes[pos..pos + CHUNK_HEADER_LEN];
            if le32(h, 0) != CHUNK_MAGIC {
                return Err(ReadError::at(pos, Problem::BadChunkMarker { chunk }));
            }
            let payload_len = le32(h, 8) as usize;
            if payload_len > MAX_CHUNK_PAYLOAD {
                return Err(ReadError::at(
                    pos + 8,
                    Problem::ChunkTooLarge {
                        chunk,
                        len: payload_len as u64,
                    },
                ));
            }
            let body = pos + CHUNK_HEADER_LEN;
            if bytes.len() - body < payload_len {
                return Err(ReadError::at(
                    pos,
                    Problem::Truncated {
                        chunk,
                        needed: (CHUNK_HEADER_LEN + payload_len) as u64,
                        available: remaining as u64,
                    },
                ));
            }
            let payload = &bytes[body..body + payload_len];
            if chunk_crc(&h[0..20], payload) != le32(h, 20) {
                return Err(ReadError::at(pos, Problem::ChunkChecksum { chunk }));
            }
            let kind_value = le16(h, 4);
            let kind = ChunkKind::from_u16(kind_value).ok_or(ReadError::at(
                pos + 4,
                Problem::UnknownChunkKind {
                    chunk,
                    kind: kind_value,
                },
            ))?;
            let count = le32(h, 12) as usize;
            let malformed = |kind: &'static str, why: String| {
                ReadError::at(pos, Problem::MalformedChunk { chunk, kind, why })
            };
            match kind {
                ChunkKind::Events => {
                    if count.checked_mul(RECORD_LEN) != Some(payload_len) {
                        return Err(malformed(
                            "events",
                            format!(
                                "{payload_len} bytes is not {count} records of {RECORD_LEN} bytes"
                            ),
                        ));
                    }
                    chunk_drops += u64::from(le32(h, 16));
                    s.check_events(body, count)?;
                    s.event_chunks.push((body, count));
                    pages.read_up_to(body + payload_len);
                }
                ChunkKind::Strings => s
                    .read_strings(payload, count)
                    .map_err(|why| malformed("strings", why))?,
                ChunkKind::Sites => s
                    .read_sites(payload, count)
                    .map_err(|why| malformed("call sites", why))?,
                ChunkKind::Objects => s
                    .read_objects(payload, count)
                    .map_err(|why| malformed("objects", why))?,
                ChunkKind::Trailer => {
                    if payload_len != TRAILER_LEN {
                        return Err(malformed(
                            "trailer",
                            format!("{payload_len} bytes instead of {TRAILER_LEN}"),
                        ));
                    }
                    let t = Trailer {
                        events: le64(payload, 0),
                        dropped: le64(payload, 8),
                        end_time: le64(payload, 16),
                        strings: le32(payload, 24),
                        sites: le32(payload, 28),
                        objects: le32(payload, 32),
                    };
                    if t.events != s.events {
                        return Err(ReadError::at(
                            body,
                            Problem::TrailerMismatch {
                                declared: t.events,
                                found: s.events,
                            },
                        ));
                    }
                    let declared = (t.strings as usize, t.sites as usize, t.objects as usize);
                    let defined = (s.strings.len(), s.site_count, s.objects.len());
                    if declared != defined {
                        return Err(malformed(
                            "trailer",
                            format!(
                                "it counts {declared:?} strings, call sites and objects but the tables define {defined:?}"
                            ),
                        ));
                    }
                    if t.dropped < chunk_drops {
                        return Err(malformed(
                            "trailer",
                            format!(
                                "it counts {} dropped events but the chunks already count {chunk_drops}",
                                t.dropped
                            ),
                        ));
                    }
                    s.trailer = Some(t);
                }
            }
            pos = body + payload_len;
            chunk += 1;
        }
        s.dropped = s.trailer.map_or(chunk_drops, |t| t.dropped);
        // Dense when the largest id is within a few times the count: the table is then
        // bounded by the file's own object table, whatever ids a hostile file declares.
        let top = s.objects.keys().max().map_or(0, |&id| id as usize);
        if top < 4 * s.objects.len() + 1024 {
            s.dense_objects = vec![None; top + 1];
            for (&id, &o) in &s.objects {
                s.dense_objects[id as usize] = Some(o);
            }
        }
        for (kind, &n) in s.kind_counts.iter().enumerate() {
            if n > 0 {
                s.counts.insert(EventKind::from_u8(kind as u8), n);
            }
        }
        Ok(s)
    }

    /// Checks every record of an events chunk and accumulates counts and time span.
    fn check_events(&mut self, at: usize, count: usize) -> Result<(), ReadError> {
        // Lock loops name the same object event after event: one table lookup per change.
        let mut known_object = None;
        for i in 0..count {
            let off = at + i * RECORD_LEN;
            let r = decode_at(self.bytes, off);
            let event = self.events;
            if r.site != NO_SITE
                && r.kind.site_is_call_site()
                && self.site_address(r.site).is_none()
            {
                return Err(ReadError::at(
                    off + 10,
                    Problem::UndefinedSite {
                        event,
                        site: r.site,
                    },
                ));
            }
            if matches!(
                r.kind,
                EventKind::Mark | EventKind::MpiCommMembers | EventKind::OffCpuBlock
            ) && r.obj != NO_STRING
                && !self.strings.contains_key(&r.obj)
            {
                return Err(ReadError::at(
                    off + 12,
                    Problem::UndefinedString { event, id: r.obj },
                ));
            }
            if r.kind.refers_to_object() && r.obj != NO_OBJECT && known_object != Some(r.obj) {
                if !self.objects.contains_key(&r.obj) {
                    return Err(ReadError::at(
                        off + 12,
                        Problem::UndefinedObject { event, id: r.obj },
                    ));
                }
                known_object = Some(r.obj);
            }
            self.kind_counts[usize::from(r.kind.to_u8())] += 1;
            self.first_ts = Some(self.first_ts.map_or(r.ts, |t| t.min(r.ts)));
            self.last_ts = Some(self.last_ts.map_or(r.ts, |t| t.max(r.ts)));
            self.events += 1;
        }
        Ok(())
    }

    fn read_strings(&mut self, payload: &'a [u8], count: usize) -> Result<(), String> {
        let mut pos = 0;
        for n in 0..count {
            if payload.len() - pos < 8 {
                return Err(format!("entry {n} runs past the chunk"));
            }
            let id = le32(payload, pos);
            let len = le32(payload, pos + 4) as usize;
            if len > MAX_STRING_LEN {
                return Err(format!(
                    "entry {n} declares {len} bytes, over the {MAX_STRING_LEN}-byte limit"
                ));
            }
            let start = pos + 8;
            if payload.len() - start < len {
                return Err(format!("entry {n} runs past the chunk"));
            }
            let text = std::str::from_utf8(&payload[start..start + len])
                .map_err(|_| format!("entry {n} is not UTF-8"))?;
            if id == NO_STRING || self.strings.insert(id, text).is_some() {
                return Err(format!("string id {id} is reserved or defined twice"));
            }
            pos = (start + len).next_multiple_of(4).min(payload.len());
        }
        if pos != payload.len() {
            return Err(format!(
                "{} bytes after the last entry",
                payload.len() - pos
            ));
        }
        Ok(())
    }

    fn read_objects(&mut self, payload: &[u8], count: usize) -> Result<(), String> {
        if count.checked_mul(OBJECT_ENTRY_LEN) != Some(payload.len()) {
            return Err(format!(
                "{} bytes is not {count} entries of {OBJECT_ENTRY_LEN} bytes",
                payload.len()
            ));
        }
        for n in 0..count {
            let at = n * OBJECT_ENTRY_LEN;
            let id = le32(payload, at);
            let kind = ObjectKind::from_u8(payload[at + 4]).ok_or(format!(
                "entry {n} has unknown object kind {}",
                payload[at + 4]
            ))?;
            if id == NO_OBJECT {
                return Err(format!("object id {id} is reserved"));
            }
            if self
                .objects
                .insert(id, (kind, le64(payload, at + 8)))
                .is_some()
            {
                return Err(format!("object id {id} is defined twice"));
            }
        }
        Ok(())
    }

    fn read_sites(&mut self, payload: &[u8], count: usize) -> Result<(), String> {
        if count.checked_mul(SITE_ENTRY_LEN) != Some(payload.len()) {
            return Err(format!(
                "{} bytes is not {count} entries of {SITE_ENTRY_LEN} bytes",
                payload.len()
            ));
        }
        for n in 0..count {
            let id = le32(payload, n * SITE_ENTRY_LEN);
            let address = le64(payload, n * SITE_ENTRY_LEN + 8);
            let id = u16::try_from(id)
                .ok()
                .filter(|&i| i != NO_SITE)
                .ok_or(format!("site id {id} is out of range"))?;
            let slot = usize::from(id);
            if self.sites.len() <= slot {
                self.sites.resize(slot + 1, None);
            }
            if self.sites[slot].replace(address).is_some() {
                return Err(format!("site id {id} is defined twice"));
            }
            self.site_count += 1;
        }
        Ok(())
    }

    /// True when the writer closed the stream (a trailer was found).
    pub fn is_complete(&self) -> bool {
        self.trailer.is_some()
    }

    /// The validated records, in file order.
    pub fn events(&self) -> Events<'a, '_> {
        Events {
            bytes: self.bytes,
            chunks: &self.event_chunks,
            next: 0,
            end: 0,
            pages: MappedPages::new(self.map),
        }
    }

    pub fn string(&self, id: u32) -> Option<&'a str> {
        self.strings.get(&id).copied()
    }

    pub fn site_address(&self, id: u16) -> Option<u64> {
        self.sites.get(usize::from(id)).copied().flatten()
    }

    /// The kind and address of an object (lock, condition variable, barrier).
    #[inline]
    pub fn object(&self, id: u32) -> Option<(ObjectKind, u64)> {
        if self.dense_objects.is_empty() {
            self.objects.get(&id).copied()
        } else {
            self.dense_objects.get(id as usize).copied().flatten()
        }
    }

    /// Every object the stream defines (kind, address), in no particular order.
    pub fn objects(&self) -> impl Iterator<Item = (ObjectKind, u64)> + '_ {
        self.objects.values().copied()
    }

    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    pub fn string_count(&self) -> usize {
        self.strings.len()
    }

    pub fn site_count(&self) -> usize {
        self.site_count
    }
}

/// The records of a stream, chunk after chunk ([`Stream::events`]).
pub struct Events<'a, 's> {
    bytes: &'a [u8],
    /// The chunks not started yet.
    chunks: &'s [(usize, usize)],
    /// Offsets of the next record and of the end of the current chunk's records.
    next: usize,
    end: usize,
    pages: MappedPages<'a>,
}

/// Reading a mapped stream once from start to end: every [`MappedPages::WINDOW`] bytes, the
/// pages behind are handed back, so that the process's resident memory stays a window per
/// stream read at once instead of growing to the size of the run directory (a 50 M-event
/// run is 800 MB of streams). Reading them again faults them back in from the page cache.
struct MappedPages<'a> {
    map: Option<&'a memmap2::Mmap>,
    released: usize,
}

impl<'a> MappedPages<'a> {
    const WINDOW: usize = 8 << 20;

    fn new(map: Option<&'a memmap2::Mmap>) -> Self {
        MappedPages { map, released: 0 }
    }

    #[inline]
    fn read_up_to(&mut self, offset: usize) {
        let Some(map) = self.map else { return };
        if offset < self.released + Self::WINDOW {
            return;
        }
        let len = offset - self.released;
        // SAFETY: `map` is a read-only shared mapping of a file (StreamFile::open).
        // MADV_DONTNEED on it only drops this process's page-table entries; the next access
        // to those bytes reads the same file contents from the page cache again, so every
        // slice borrowed from the mapping keeps its contents. A failure only means the pages
        // stay resident.
        #[allow(unsafe_code)]
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, self.released, len)
        };
        self.released = offset;
    }
}

impl Iterator for Events<'_, '_> {
    type Item = Record;

    #[inline]
    fn next(&mut self) -> Option<Record> {
        while self.next >= self.end {
            let (&(at, count), rest) = self.chunks.split_first()?;
            self.chunks = rest;
            self.pages.read_up_to(at);
            self.next = at;
            self.end = at + count * RECORD_LEN;
        }
        let r = decode_at(self.bytes, self.next);
        self.next += RECORD_LEN;
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.end - self.next) / RECORD_LEN
            + self.chunks.iter().map(|&(_, c)| c).sum::<usize>();
        (n, Some(n))
    }
}

#[inline]
fn decode_at(bytes: &[u8], off: usize) -> Record {
    let mut b = [0u8; RECORD_LEN];
    b.copy_from_slice(&bytes[off..off + RECORD_LEN]);
    Record::decode(&b)
}

/// A stream file mapped into memory.
pub struct StreamFile {
    map: memmap2::Mmap,
}

impl StreamFile {
    /// Maps the stream file `path` the user named (links followed): a regular file only (a
    /// FIFO or device is refused, never opened for reading), within [`files::STREAM`]'s size.
    pub fn open(path: &Path) -> Result<StreamFile, ReadFileError> {
        StreamFile::map(files::open_regular(path, &files::STREAM)?)
    }

    /// Maps `rel` of the run directory `run` (no link followed, nothing outside the run).
    pub fn open_in_run(run: &Path, rel: &Path) -> Result<StreamFile, ReadFileError> {
        StreamFile::map(files::open_in_run(run, rel, &files::STREAM)?)
    }

    /// Maps a file [`files`] opened (a regular file, checked).
    fn map(opened: files::Opened) -> Result<StreamFile, ReadFileError> {
        // SAFETY: sound only while nobody modifies the file during the mapping, which we cannot
        // enforce: a writer still running, or another process, may change or truncate it under
        // us. We accept that risk, as every mmap-based reader does, because (1) contend reads
        // finished run directories, where neither happens; (2) the reader validates every byte
        // it uses (lengths, CRCs, references) and all indexing is bounds-checked, so changed
        // bytes give an error or wrong values, never an out-of-bounds access; (3) a truncation makes reads past the new end raise SIGBUS, which
        // stops the process instead of returning wrong data. The mapping is read-only, of a
        // regular file (`files` checked it on the open descriptor mapped here).
        #[allow(unsafe_code)]
        let map =
            unsafe { memmap2::Mmap::map(&opened.file) }.map_err(|source| ReadFileError::Io {
                path: opened.path.clone(),
                source,
            })?;
        Ok(StreamFile { map })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn parse(&self) -> Result<Stream<'_>, ReadError> {
        Stream::parse_in(&self.map, Some(&self.map))
    }
}
