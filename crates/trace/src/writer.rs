//! Writes one event stream. Fit to run inside a preloaded probe: the event buffer is allocated
//! once; pushing an event copies 16 bytes; interning a string or call site allocates only the
//! first time it is seen; every flush is one `write(2)` of whole chunks, tables first, so a
//! process killed at any moment leaves a file whose complete chunks are all readable.
//!
//! The writer never blocks on a full buffer by waiting: a push into a full buffer flushes it;
//! if that write fails, or the stream has reached its byte limit, the buffered events are
//! counted as dropped and recording goes on. Drops are stored in the next events chunk and in
//! the trailer, and returned by [`StreamWriter::finish`] even when the trailer cannot be written
//! (for the recorder to put in meta.json).
//!
//! A failed write may leave part of a chunk behind (a disk that fills mid-write); the writer
//! then cuts the sink back to its last complete chunk ([`StreamSink::rewind_to`]) and tries
//! again at the next flush. A sink that cannot be cut stops the stream for good.

use crate::format::{
    ChunkHeader, ChunkKind, Header, ObjectKind, Record, Trailer, CHUNK_HEADER_LEN, HEADER_LEN,
    NO_SITE, OBJECT_ENTRY_LEN, RECORD_LEN, SITE_ENTRY_LEN, TRAILER_LEN,
};
use std::collections::HashMap;
use std::io::{self, Write};

/// Default events per chunk: 4096 × 16 B = 64 KiB, a good `write(2)` size.
pub const DEFAULT_CHUNK_EVENTS: usize = 4096;

/// Where a stream is written: a `Write` that can also be cut back to a length, to undo a
/// partial write.
pub trait StreamSink: Write {
    /// Cuts the written data back to `len` bytes, the end of the last complete chunk.
    fn rewind_to(&mut self, len: u64) -> io::Result<()>;
}

impl StreamSink for std::fs::File {
    fn rewind_to(&mut self, len: u64) -> io::Result<()> {
        use std::io::Seek;
        self.set_len(len)?;
        self.seek(io::SeekFrom::Start(len)).map(|_| ())
    }
}

impl StreamSink for Vec<u8> {
    fn rewind_to(&mut self, len: u64) -> io::Result<()> {
        self.truncate(usize::try_from(len).map_err(io::Error::other)?);
        Ok(())
    }
}

impl StreamSink for io::Sink {
    fn rewind_to(&mut self, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

impl<T: StreamSink + ?Sized> StreamSink for &mut T {
    fn rewind_to(&mut self, len: u64) -> io::Result<()> {
        (**self).rewind_to(len)
    }
}

/// A stream that could not be closed properly; the counts are still known.
#[derive(Debug, thiserror::Error)]
#[error("{error} ({} events written, {} dropped)", summary.events, summary.dropped)]
pub struct FinishError {
    pub summary: WriteSummary,
    #[source]
    pub error: io::Error,
}

/// Totals of a finished stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSummary {
    pub events: u64,
    pub dropped: u64,
    pub bytes: u64,
}

pub struct StreamWriter<S: StreamSink> {
    sink: S,
    /// `CHUNK_HEADER_LEN` bytes reserved for the chunk header, then the records.
    buffer: Vec<u8>,
    chunk_events: usize,
    buffered: usize,
    /// Table entries not yet written, and counts of those already in the file.
    string_table: Table,
    site_table: Table,
    object_table: Table,
    /// Reused to assemble table chunks and the events chunk into one write.
    scratch: Vec<u8>,
    strings: HashMap<Box<str>, u32>,
    sites: HashMap<u64, u16>,
    objects: HashMap<u64, u32>,
    /// Call sites seen after the table was full (recorded as `NO_SITE`).
    sites_overflowed: u64,
    dropped_since_chunk: u32,
    events: u64,
    dropped: u64,
    bytes: u64,
    byte_limit: u64,
    /// Set once a write failed and the sink could not be cut back: nothing more is written.
    broken: bool,
    /// The first write error, reported at close.
    first_error: Option<io::Error>,
    /// Set once the byte limit is reached: later events are dropped, the trailer still written.
    full: bool,
}

impl<S: StreamSink> StreamWriter<S> {
    /// Writes the header at once and prepares a buffer of `chunk_events` events.
    pub fn new(mut sink: S, header: &Header, chunk_events: usize) -> io::Result<Self> {
        let chunk_events = chunk_events.clamp(1, crate::format::MAX_CHUNK_PAYLOAD / RECORD_LEN);
        sink.write_all(&header.encode())?;
        let mut buffer = Vec::with_capacity(CHUNK_HEADER_LEN + chunk_events * RECORD_LEN);
        buffer.resize(CHUNK_HEADER_LEN, 0);
        Ok(StreamWriter {
            sink,
            buffer,
            chunk_events,
            buffered: 0,
            string_table: Table::default(),
            site_table: Table::default(),
            object_table: Table::default(),
            scratch: Vec::new(),
            strings: HashMap::new(),
            sites: HashMap::new(),
            objects: HashMap::new(),
            sites_overflowed: 0,
            dropped_since_chunk: 0,
            events: 0,
            dropped: 0,
            bytes: HEADER_LEN as u64,
            byte_limit: u64::MAX,
            broken: false,
            first_error: None,
            full: false,
        })
    }

    /// Stops writing once the file would exceed `bytes`; later events are counted as dropped.
    pub fn with_byte_limit(mut self, bytes: u64) -> Self {
        self.byte_limit = bytes;
        self
    }

    /// The table id of `s`, adding it on first use. Strings longer than the format allows are
    /// cut at a character boundary.
    pub fn intern_string(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let mut end = s.len().min(crate::format::MAX_STRING_LEN);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        if self.string_table.pending.len() + 8 + end + 3 > crate::format::MAX_CHUNK_PAYLOAD {
            // Keep every table chunk within the size a reader accepts.
            let _ = self.flush();
        }
        let id = self.strings.len() as u32;
        let t = &mut self.string_table;
        t.pending.extend_from_slice(&id.to_le_bytes());
        t.pending.extend_from_slice(&(end as u32).to_le_bytes());
        t.pending.extend_from_slice(&s.as_bytes()[..end]);
        t.pending.resize(t.pending.len().next_multiple_of(4), 0);
        t.count += 1;
        self.strings.insert(s.into(), id);
        id
    }

    /// The table index of a call-site address, adding it on first use; [`NO_SITE`] once the
    /// table's 65535 entries are used up (counted in [`Self::sites_overflowed`]).
    pub fn intern_site(&mut self, address: u64) -> u16 {
        if let Some(&id) = self.sites.get(&address) {
            return id;
        }
        if self.sites.len() >= usize::from(NO_SITE) {
            self.sites_overflowed += 1;
            return NO_SITE;
        }
        let id = self.sites.len() as u16;
        let t = &mut self.site_table;
        t.pending.extend_from_slice(&u32::from(id).to_le_bytes());
        t.pending.extend_from_slice(&0u32.to_le_bytes());
        t.pending.extend_from_slice(&address.to_le_bytes());
        debug_assert_eq!(t.pending.len() % SITE_ENTRY_LEN, 0);
        t.count += 1;
        self.sites.insert(address, id);
        id
    }

    /// The table id of a lock, condition variable or barrier at `address`, adding it on first
    /// use. Objects are keyed by address; the kind of the first use is kept.
    pub fn intern_object(&mut self, address: u64, kind: ObjectKind) -> u32 {
        if let Some(&id) = self.objects.get(&address) {
            return id;
        }
        if self.object_table.pending.len() + OBJECT_ENTRY_LEN > crate::format::MAX_CHUNK_PAYLOAD {
            let _ = self.flush();
        }
        let id = self.objects.len() as u32;
        let t = &mut self.object_table;
        t.pending.extend_from_slice(&id.to_le_bytes());
        t.pending.extend_from_slice(&[kind as u8, 0, 0, 0]);
        t.pending.extend_from_slice(&address.to_le_bytes());
        t.count += 1;
        self.objects.insert(address, id);
        id
    }

    /// Appends one event; flushes first if the buffer is full. Never fails: an event that cannot
    /// be kept is counted as dropped.
    pub fn push(&mut self, record: &Record) {
        if self.buffered == self.chunk_events {
            // Every outcome of a flush empties the buffer (written, or counted as dropped).
            let _ = self.flush();
        }
        self.buffer.extend_from_slice(&record.encode());
        self.buffered += 1;
    }

    /// Counts events lost before they reached this writer (a probe's full ring, say); they are
    /// reported like the writer's own drops.
    pub fn count_dropped(&mut self, n: u64) {
        self.note_dropped(n);
    }

    fn note_dropped(&mut self, n: u64) {
        self.dropped += n;
        let n32 = u32::try_from(n).unwrap_or(u32::MAX);
        self.dropped_since_chunk = self.dropped_since_chunk.saturating_add(n32);
    }

    /// Writes pending tables, then the buffered events, as whole chunks. If the stream is at
    /// its byte limit, the buffered events are counted as dropped instead (and `Ok` returned:
    /// that is the limit working). On a write error they are counted as dropped, the sink is cut
    /// back to its last complete chunk (pending table entries stay pending for the next try),
    /// and the error is returned.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.broken && !self.full {
            // Room for these chunks and, always, the trailer.
            let need = (self.string_table.pending.len()
                + self.site_table.pending.len()
                + self.object_table.pending.len()
                + self.buffered * RECORD_LEN
                + 5 * CHUNK_HEADER_LEN
                + TRAILER_LEN) as u64;
            if self.bytes + need > self.byte_limit {
                self.full = true;
            }
        }
        if self.broken || self.full {
            let lost = self.buffered as u64;
            self.discard_buffer();
            self.note_dropped(lost);
            return if self.broken {
                Err(io::Error::other("the stream was cut after a failed write"))
            } else {
                Ok(())
            };
        }
        let result = self.write_pending();
        if let Err(e) = &result {
            if self.first_error.is_none() {
                self.first_error = Some(copy_error(e));
            }
            if self.sink.rewind_to(self.bytes).is_err() {
                self.broken = true;
            }
            let lost = self.buffered as u64;
            self.discard_buffer();
            self.note_dropped(lost);
        }
        result
    }

    fn discard_buffer(&mut self) {
        self.buffer.truncate(CHUNK_HEADER_LEN);
        self.buffered = 0;
    }

    /// Writes pending tables and the buffered events in one `write(2)`: the events chunk alone
    /// (encoded in place, no copy) when no table entry is new, else tables and events assembled
    /// in the reused scratch buffer. Either way a kill leaves whole chunks or nothing.
    fn write_pending(&mut self) -> io::Result<()> {
        let has_events = self.buffered > 0 || self.dropped_since_chunk > 0;
        if has_events {
            // The events chunk's header slot precedes its records.
            let header = ChunkHeader {
                kind: ChunkKind::Events,
                payload_len: (self.buffered * RECORD_LEN) as u32,
                count: self.buffered as u32,
                dropped: self.dropped_since_chunk,
            }
            .encode(&self.buffer[CHUNK_HEADER_LEN..]);
            self.buffer[..CHUNK_HEADER_LEN].copy_from_slice(&header);
        }
        let tables_pending =
            self.string_table.count + self.site_table.count + self.object_table.count;
        let written = if tables_pending == 0 {
            if !has_events {
                return self.sink.flush();
            }
            self.sink.write_all(&self.buffer)?;
            self.buffer.len()
        } else {
            self.scratch.clear();
            for (kind, table) in [
                (ChunkKind::Strings, &self.string_table),
                (ChunkKind::Sites, &self.site_table),
                (ChunkKind::Objects, &self.object_table),
            ] {
                if table.count > 0 {
                    append_chunk(&mut self.scratch, kind, table.count, &table.pending);
                }
            }
            if has_events {
                self.scratch.extend_from_slice(&self.buffer);
            }
            self.sink.write_all(&self.scratch)?;
            for table in [
                &mut self.string_table,
                &mut self.site_table,
                &mut self.object_table,
            ] {
                table.mark_written();
            }
            self.scratch.len()
        };
        self.bytes += written as u64;
        if has_events {
            self.events += self.buffered as u64;
            self.discard_buffer();
            self.dropped_since_chunk = 0;
        }
        self.sink.flush()
    }

    /// Events written so far (not counting those still buffered).
    pub fn events_written(&self) -> u64 {
        self.events
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn sites_overflowed(&self) -> u64 {
        self.sites_overflowed
    }

    /// Flushes and writes the trailer. `end_time` is the clock value at close. A stream at its
    /// byte limit still ends with a trailer counting the drops; a flush that failed is counted in
    /// the drops and the trailer still written if the sink takes it. Otherwise the error carries
    /// the counts, and the file ends at its last complete chunk (readable, unterminated).
    pub fn finish(self, end_time: u64) -> Result<WriteSummary, FinishError> {
        self.close(end_time).map(|(summary, _)| summary)
    }

    /// [`Self::finish`], handing back the sink (an in-memory buffer, say).
    pub fn finish_into(self, end_time: u64) -> Result<S, FinishError> {
        self.close(end_time).map(|(_, sink)| sink)
    }

    fn close(mut self, end_time: u64) -> Result<(WriteSummary, S), FinishError> {
        let flushed = self.flush();
        let closed = if self.broken {
            Err(io::Error::other("the stream was cut after a failed write"))
        } else {
            self.write_trailer(end_time)
        };
        let summary = WriteSummary {
            events: self.events,
            dropped: self.dropped,
            bytes: self.bytes,
        };
        match closed {
            Ok(()) => Ok((summary, self.sink)),
            Err(error) => Err(FinishError {
                summary,
                error: self.first_error.or(flushed.err()).unwrap_or(error),
            }),
        }
    }

    fn write_trailer(&mut self, end_time: u64) -> io::Result<()> {
        let trailer = Trailer {
            events: self.events,
            dropped: self.dropped,
            end_time,
            strings: self.string_table.written,
            sites: self.site_table.written,
            objects: self.object_table.written,
        }
        .encode();
        self.scratch.clear();
        append_chunk(&mut self.scratch, ChunkKind::Trailer, 0, &trailer);
        let written = self
            .sink
            .write_all(&self.scratch)
            .and_then(|()| self.sink.flush());
        match written {
            Ok(()) => {
                self.bytes += self.scratch.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.sink.rewind_to(self.bytes);
                Err(e)
            }
        }
    }
}

/// Entries of one table not yet in the file, and how many are.
#[derive(Default)]
struct Table {
    pending: Vec<u8>,
    count: u32,
    written: u32,
}

impl Table {
    fn mark_written(&mut self) {
        // Cleared, not replaced: the capacity serves the next new entries.
        self.pending.clear();
        self.written += self.count;
        self.count = 0;
    }
}

/// io::Error is not Clone: keep the OS error code where there is one, else kind and text.
fn copy_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Appends a table or trailer chunk (header, then payload) to `out`.
fn append_chunk(out: &mut Vec<u8>, kind: ChunkKind, count: u32, payload: &[u8]) {
    let header = ChunkHeader {
        kind,
        payload_len: payload.len() as u32,
        count,
        dropped: 0,
    }
    .encode(payload);
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
}
