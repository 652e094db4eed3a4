//! Writes one event stream. Fit to run inside a preloaded probe: the event buffer is allocated
//! once; pushing an event copies 16 bytes; interning a string or call site allocates only the
//! first time it is seen; every flush writes whole chunks, tables first, so a process killed at
//! any moment leaves a file whose complete chunks are all readable.
//!
//! The writer never blocks on a full buffer by waiting: a push into a full buffer flushes it
//! (one `write(2)` per chunk); if that write fails, or the stream has reached its byte limit,
//! the buffered events are counted as dropped and recording goes on. Drops are stored in the
//! next events chunk and in the trailer, so a reader always knows how many are missing.

use crate::format::{
    ChunkHeader, ChunkKind, Header, Record, Trailer, CHUNK_HEADER_LEN, HEADER_LEN, NO_SITE,
    RECORD_LEN, SITE_ENTRY_LEN, TRAILER_LEN,
};
use std::collections::HashMap;
use std::io::{self, Write};

/// Default events per chunk: 4096 × 16 B = 64 KiB, a good `write(2)` size.
pub const DEFAULT_CHUNK_EVENTS: usize = 4096;

/// Totals of a finished stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSummary {
    pub events: u64,
    pub dropped: u64,
    pub bytes: u64,
}

pub struct StreamWriter<S: Write> {
    sink: S,
    /// `CHUNK_HEADER_LEN` bytes reserved for the chunk header, then the records.
    buffer: Vec<u8>,
    chunk_events: usize,
    buffered: usize,
    /// Encoded table entries not yet written, with their counts.
    pending_strings: (Vec<u8>, u32),
    pending_sites: (Vec<u8>, u32),
    strings: HashMap<Box<str>, u32>,
    sites: HashMap<u64, u16>,
    /// Call sites seen after the table was full (recorded as `NO_SITE`).
    sites_overflowed: u64,
    dropped_since_chunk: u32,
    events: u64,
    dropped: u64,
    bytes: u64,
    byte_limit: u64,
    /// Set once a write failed: the stream is then cut at its last complete chunk.
    broken: bool,
    /// Set once the byte limit is reached: later events are dropped, the trailer still written.
    full: bool,
}

impl<S: Write> StreamWriter<S> {
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
            pending_strings: (Vec::new(), 0),
            pending_sites: (Vec::new(), 0),
            strings: HashMap::new(),
            sites: HashMap::new(),
            sites_overflowed: 0,
            dropped_since_chunk: 0,
            events: 0,
            dropped: 0,
            bytes: HEADER_LEN as u64,
            byte_limit: u64::MAX,
            broken: false,
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
        let id = self.strings.len() as u32;
        let (buf, count) = &mut self.pending_strings;
        buf.extend_from_slice(&id.to_le_bytes());
        buf.extend_from_slice(&(end as u32).to_le_bytes());
        buf.extend_from_slice(&s.as_bytes()[..end]);
        buf.resize(buf.len().next_multiple_of(4), 0);
        *count += 1;
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
        let (buf, count) = &mut self.pending_sites;
        buf.extend_from_slice(&u32::from(id).to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&address.to_le_bytes());
        debug_assert_eq!(buf.len() % SITE_ENTRY_LEN, 0);
        *count += 1;
        self.sites.insert(address, id);
        id
    }

    /// Appends one event; flushes first if the buffer is full. Never fails: an event that cannot
    /// be kept is counted as dropped.
    pub fn push(&mut self, record: &Record) {
        if self.buffered == self.chunk_events {
            let _ = self.flush();
        }
        if self.buffered == self.chunk_events {
            // The flush could not empty the buffer (see `flush`): this event is lost.
            self.note_dropped(1);
            return;
        }
        self.buffer.extend_from_slice(&record.encode());
        self.buffered += 1;
    }

    fn note_dropped(&mut self, n: u64) {
        self.dropped += n;
        self.dropped_since_chunk = self.dropped_since_chunk.saturating_add(n as u32);
    }

    /// Writes pending tables, then the buffered events, as whole chunks. If the stream is at
    /// its byte limit, the buffered events are counted as dropped instead (and `Ok` returned:
    /// that is the limit working). On a write error they are counted as dropped, the writer stops
    /// writing for good, and the error is returned.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.broken && !self.full {
            // Room for these chunks and, always, the trailer.
            let need = (self.pending_strings.0.len()
                + self.pending_sites.0.len()
                + self.buffered * RECORD_LEN
                + 4 * CHUNK_HEADER_LEN
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
        if result.is_err() {
            self.broken = true;
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

    fn write_chunk(
        &mut self,
        kind: ChunkKind,
        count: u32,
        dropped: u32,
        payload: &[u8],
    ) -> io::Result<()> {
        let header = ChunkHeader {
            kind,
            payload_len: payload.len() as u32,
            count,
            dropped,
        }
        .encode(payload);
        // One write per chunk where possible: a kill between writes leaves whole chunks.
        let mut chunk = Vec::with_capacity(CHUNK_HEADER_LEN + payload.len());
        chunk.extend_from_slice(&header);
        chunk.extend_from_slice(payload);
        self.sink.write_all(&chunk)?;
        self.bytes += chunk.len() as u64;
        Ok(())
    }

    fn write_pending(&mut self) -> io::Result<()> {
        let (strings, n_strings) = std::mem::take(&mut self.pending_strings);
        if n_strings > 0 {
            self.write_chunk(ChunkKind::Strings, n_strings, 0, &strings)?;
        }
        let (sites, n_sites) = std::mem::take(&mut self.pending_sites);
        if n_sites > 0 {
            self.write_chunk(ChunkKind::Sites, n_sites, 0, &sites)?;
        }
        if self.buffered > 0 || self.dropped_since_chunk > 0 {
            // The events chunk is written in place: its header slot precedes the records.
            let header = ChunkHeader {
                kind: ChunkKind::Events,
                payload_len: (self.buffered * RECORD_LEN) as u32,
                count: self.buffered as u32,
                dropped: self.dropped_since_chunk,
            }
            .encode(&self.buffer[CHUNK_HEADER_LEN..]);
            self.buffer[..CHUNK_HEADER_LEN].copy_from_slice(&header);
            self.sink.write_all(&self.buffer)?;
            self.bytes += self.buffer.len() as u64;
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

    /// Flushes and writes the trailer. `end_time` is the clock value at close. Fails only if
    /// the sink failed; a stream at its byte limit still ends with a trailer counting the drops.
    pub fn finish(self, end_time: u64) -> io::Result<WriteSummary> {
        self.close(end_time).map(|(summary, _)| summary)
    }

    /// [`Self::finish`], handing back the sink (an in-memory buffer, say).
    pub fn finish_into(self, end_time: u64) -> io::Result<S> {
        self.close(end_time).map(|(_, sink)| sink)
    }

    fn close(mut self, end_time: u64) -> io::Result<(WriteSummary, S)> {
        self.flush()?;
        let trailer = Trailer {
            events: self.events,
            dropped: self.dropped,
            end_time,
            strings: self.strings.len() as u32,
            sites: self.sites.len() as u32,
        }
        .encode();
        self.write_chunk(ChunkKind::Trailer, 0, 0, &trailer)?;
        self.sink.flush()?;
        let summary = WriteSummary {
            events: self.events,
            dropped: self.dropped,
            bytes: self.bytes,
        };
        Ok((summary, self.sink))
    }
}
