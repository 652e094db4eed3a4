//! Event streams written and read back, and every way a stream can be damaged.

use std::io::Write;
use trace::format::{ChunkHeader, ChunkKind, HEADER_LEN, RECORD_LEN};
use trace::{ClockSource, EventKind, Header, Problem, Record, Stream, StreamKind, StreamWriter};

fn header() -> Header {
    Header {
        kind: StreamKind::Thread,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 100,
        tid: 101,
        rank: -1,
        base_time: 1_000,
    }
}

/// Finishes a stream of `events` labelled marks with call sites, in chunks of `chunk` events.
/// Returns the bytes and the offsets where each chunk ends (where a killed writer can stop).
fn sample(events: u32, chunk: usize) -> (Vec<u8>, Vec<usize>) {
    let mut w = StreamWriter::new(Vec::new(), &header(), chunk).unwrap();
    for i in 0..events {
        let label = w.intern_string(if i % 2 == 0 { "even" } else { "odd" });
        let site = w.intern_site(0x400000 + u64::from(i % 3) * 16);
        w.push(&Record {
            ts: 1_000 + u64::from(i) * 10,
            kind: EventKind::Mark,
            aux: (i % 256) as u8,
            site,
            obj: label,
        });
    }
    let bytes = w.finish_into(99_999).unwrap();
    let mut bounds = vec![HEADER_LEN];
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
        pos += 24 + len;
        bounds.push(pos);
    }
    (bytes, bounds)
}

#[test]
fn round_trip_keeps_every_field() {
    let (bytes, _) = sample(10, 4);
    let s = Stream::parse(&bytes).unwrap();
    assert_eq!(s.header, header());
    assert!(s.is_complete());
    assert_eq!((s.events, s.dropped), (10, 0));
    assert_eq!(s.counts[&EventKind::Mark], 10);
    assert_eq!((s.first_ts, s.last_ts), (Some(1_000), Some(1_090)));
    let records: Vec<Record> = s.events().collect();
    assert_eq!(records.len(), 10);
    assert_eq!(s.string(records[3].obj), Some("odd"));
    assert_eq!(s.site_address(records[4].site), Some(0x400010));
    assert_eq!(records[7].aux, 7);
    assert_eq!(s.trailer.unwrap().end_time, 99_999);
    assert_eq!((s.string_count(), s.site_count()), (2, 3));
}

#[test]
fn a_mark_costs_16_bytes_on_disk() {
    let (small, _) = sample(1_000, 4096);
    let (large, _) = sample(2_000, 4096);
    assert_eq!(large.len() - small.len(), 1_000 * RECORD_LEN);
}

#[test]
fn truncation_at_every_offset_is_caught_or_is_a_clean_cut() {
    let (bytes, bounds) = sample(10, 4);
    for len in 0..bytes.len() {
        match Stream::parse(&bytes[..len]) {
            Ok(s) => {
                assert!(
                    bounds.contains(&len),
                    "cut at {len} inside a chunk was accepted"
                );
                assert!(!s.is_complete(), "cut at {len} still has a trailer");
            }
            Err(e) => {
                assert!(!bounds.contains(&len), "clean cut at {len} rejected: {e}");
                assert!(
                    matches!(
                        e.problem,
                        Problem::TooShort { .. } | Problem::Truncated { .. }
                    ),
                    "cut at {len}: {e}"
                );
            }
        }
    }
}

/// Every single-bit error is caught, and named by what the flipped bit belongs to: the magic,
/// the header (its CRC), a chunk's marker, a chunk's length (too large, running past the end,
/// or a CRC mismatch over the wrong bytes), or anything else in a chunk (its CRC).
#[test]
fn every_single_bit_flip_is_rejected_by_name() {
    let (bytes, bounds) = sample(10, 4);
    for bit in 0..bytes.len() * 8 {
        let at = bit / 8;
        let mut damaged = bytes.clone();
        damaged[at] ^= 1 << (bit % 8);
        let Err(e) = Stream::parse(&damaged) else {
            panic!("flipping bit {bit} (byte {at}) went unnoticed");
        };
        let p = &e.problem;
        if at < 8 {
            assert_eq!(*p, Problem::BadMagic, "byte {at}");
            continue;
        }
        if at < HEADER_LEN {
            assert_eq!(*p, Problem::HeaderChecksum, "byte {at}");
            assert_eq!(e.offset, 60);
            continue;
        }
        let k = bounds.iter().rposition(|&b| b <= at).unwrap();
        let start = bounds[k];
        let chunk = k as u64;
        let ok = match at - start {
            0..4 => *p == Problem::BadChunkMarker { chunk },
            8..12 => matches!(p,
                Problem::ChunkTooLarge { chunk: c, .. }
                | Problem::Truncated { chunk: c, .. }
                | Problem::ChunkChecksum { chunk: c } if *c == chunk),
            _ => *p == Problem::ChunkChecksum { chunk } && e.offset == start as u64,
        };
        assert!(ok, "byte {at} (chunk {k} at {start}): {e}");
    }
}

#[test]
fn specific_damage_gives_specific_errors() {
    let (bytes, bounds) = sample(10, 4);
    let mut b = bytes.clone();
    b[0] = b'X';
    assert_eq!(Stream::parse(&b).unwrap_err().problem, Problem::BadMagic);

    let mut b = bytes.clone();
    b[100] ^= 0x40; // inside the first chunk's payload
    assert!(matches!(
        Stream::parse(&b).unwrap_err().problem,
        Problem::ChunkChecksum { chunk: 0 }
    ));

    // A huge declared length is refused before anything is read or allocated.
    let mut b = bytes.clone();
    let at = bounds[1];
    b[at + 8..at + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = Stream::parse(&b).unwrap_err();
    assert!(
        matches!(e.problem, Problem::ChunkTooLarge { chunk: 1, .. }),
        "{e}"
    );
    assert_eq!(e.offset, at as u64 + 8);

    // Garbage after the trailer.
    let mut b = bytes.clone();
    b.extend_from_slice(&[0; 5]);
    assert_eq!(
        Stream::parse(&b).unwrap_err().problem,
        Problem::DataAfterTrailer { extra: 5 }
    );

    assert!(matches!(
        Stream::parse(&[]).unwrap_err().problem,
        Problem::TooShort { len: 0 }
    ));
    assert!(matches!(
        Stream::parse(&bytes[..HEADER_LEN - 1]).unwrap_err().problem,
        Problem::TooShort { len: 63 }
    ));
}

#[test]
fn a_header_alone_is_an_empty_unterminated_stream() {
    let (bytes, _) = sample(3, 4);
    let s = Stream::parse(&bytes[..HEADER_LEN]).unwrap();
    assert_eq!((s.events, s.is_complete()), (0, false));
    assert_eq!((s.first_ts, s.last_ts), (None, None));
}

#[test]
fn a_newer_version_or_swapped_byte_order_is_named() {
    let (bytes, _) = sample(2, 4);
    let fix_crc = |b: &mut Vec<u8>| {
        let crc = crc32(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
    };
    let mut b = bytes.clone();
    b[8] = 2;
    fix_crc(&mut b);
    let e = Stream::parse(&b).unwrap_err();
    assert_eq!(e.problem, Problem::UnsupportedVersion { found: 2 });
    assert!(e.to_string().contains("version 2"));
    let mut b = bytes.clone();
    b.swap(10, 11);
    fix_crc(&mut b);
    assert_eq!(Stream::parse(&b).unwrap_err().problem, Problem::ByteOrder);
}

fn crc32(b: &[u8]) -> u32 {
    // The same CRC-32 (IEEE) the format uses, computed bitwise so the test does not trust the
    // implementation it checks.
    let mut crc = !0u32;
    for &byte in b {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A stream of the header then `chunks`, each (kind, count, payload) with a valid CRC: damage
/// that checksums cannot catch, as a buggy or hostile writer would produce it.
fn hand_built(chunks: &[(ChunkKind, u32, Vec<u8>)]) -> Vec<u8> {
    let mut bytes = header().encode().to_vec();
    for (kind, count, payload) in chunks {
        let h = ChunkHeader {
            kind: *kind,
            payload_len: payload.len() as u32,
            count: *count,
            dropped: 0,
        };
        bytes.extend_from_slice(&h.encode(payload));
        bytes.extend_from_slice(payload);
    }
    bytes
}

fn string_entry(id: u32, declared_len: u32, text: &[u8]) -> Vec<u8> {
    let mut e = id.to_le_bytes().to_vec();
    e.extend_from_slice(&declared_len.to_le_bytes());
    e.extend_from_slice(text);
    e.resize(e.len().next_multiple_of(4), 0);
    e
}

#[test]
fn records_must_not_refer_to_undefined_tables() {
    let on_site = Record { site: 5, ..mark(1) }.encode().to_vec();
    assert_eq!(
        Stream::parse(&hand_built(&[(ChunkKind::Events, 1, on_site)]))
            .unwrap_err()
            .problem,
        Problem::UndefinedSite { event: 0, site: 5 }
    );

    // String 1 is defined, but only after the event that uses it: tables must come first.
    let uses_string_1 = Record { obj: 1, ..mark(2) }.encode().to_vec();
    let bytes = hand_built(&[
        (ChunkKind::Strings, 1, string_entry(0, 1, b"a")),
        (ChunkKind::Events, 1, mark(1).encode().to_vec()),
        (ChunkKind::Events, 1, uses_string_1),
        (ChunkKind::Strings, 1, string_entry(1, 1, b"b")),
    ]);
    let e = Stream::parse(&bytes).unwrap_err();
    assert_eq!(e.problem, Problem::UndefinedString { event: 1, id: 1 });
    assert_eq!(e.offset as usize, HEADER_LEN + 3 * 24 + 12 + 16 + 12);
}

#[test]
fn hostile_lengths_and_kinds_inside_valid_checksums_are_refused() {
    // A string claiming 4 GiB, in a chunk of 12 bytes.
    let e = Stream::parse(&hand_built(&[(
        ChunkKind::Strings,
        1,
        string_entry(0, u32::MAX, b"abcd"),
    )]))
    .unwrap_err();
    assert!(
        matches!(&e.problem, Problem::MalformedChunk { kind: "strings", why, .. } if why.contains("limit")),
        "{e}"
    );
    // A string claiming more than its chunk holds, within the per-string limit.
    let e = Stream::parse(&hand_built(&[(
        ChunkKind::Strings,
        1,
        string_entry(0, 1000, b"abcd"),
    )]))
    .unwrap_err();
    assert!(
        matches!(&e.problem, Problem::MalformedChunk { kind: "strings", why, .. } if why.contains("runs past")),
        "{e}"
    );
    // A count of 4 billion entries in an 8-byte table: refused before any entry is read.
    let e = Stream::parse(&hand_built(&[(ChunkKind::Sites, u32::MAX, vec![0; 16])])).unwrap_err();
    assert!(
        matches!(
            &e.problem,
            Problem::MalformedChunk {
                kind: "call sites",
                ..
            }
        ),
        "{e}"
    );
    // An events chunk whose count disagrees with its length.
    let e = Stream::parse(&hand_built(&[(ChunkKind::Events, 2, vec![0; 16])])).unwrap_err();
    assert!(
        matches!(&e.problem, Problem::MalformedChunk { kind: "events", .. }),
        "{e}"
    );
    // A chunk kind from the future.
    let mut bytes = hand_built(&[(ChunkKind::Events, 0, vec![])]);
    bytes[HEADER_LEN + 4] = 9;
    let crc = crc32_of_chunk(&bytes[HEADER_LEN..HEADER_LEN + 20], &[]);
    bytes[HEADER_LEN + 20..HEADER_LEN + 24].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        Stream::parse(&bytes).unwrap_err().problem,
        Problem::UnknownChunkKind { chunk: 0, kind: 9 }
    );
    // A trailer that disagrees with the tables.
    let trailer = trace::format::Trailer {
        events: 0,
        dropped: 0,
        end_time: 0,
        strings: 3,
        sites: 0,
        objects: 0,
    };
    let e = Stream::parse(&hand_built(&[(
        ChunkKind::Trailer,
        0,
        trailer.encode().to_vec(),
    )]))
    .unwrap_err();
    assert!(
        matches!(
            &e.problem,
            Problem::MalformedChunk {
                kind: "trailer",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn header_fields_out_of_range_are_named() {
    let (bytes, _) = sample(2, 4);
    for (at, value, what) in [
        (14, 32u16, "record size"),
        (16, 77, "stream kind"),
        (18, 0, "clock source"),
    ] {
        let mut b = bytes.clone();
        b[at..at + 2].copy_from_slice(&value.to_le_bytes());
        let crc = crc32(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        let e = Stream::parse(&b).unwrap_err();
        assert_eq!(
            e.problem,
            Problem::BadHeaderField {
                what,
                value: value.into()
            }
        );
        assert_eq!(e.offset, at as u64);
    }
}

fn crc32_of_chunk(front: &[u8], payload: &[u8]) -> u32 {
    let mut all = front.to_vec();
    all.extend_from_slice(payload);
    crc32(&all)
}

#[test]
fn unknown_event_kinds_are_counted_not_refused() {
    let mut w = StreamWriter::new(Vec::new(), &header(), 8).unwrap();
    w.push(&Record {
        kind: EventKind::Unknown(200),
        ..mark(5)
    });
    let bytes = w.finish_into(6).unwrap();
    let s = Stream::parse(&bytes).unwrap();
    assert_eq!(s.counts[&EventKind::Unknown(200)], 1);
}

/// Counts `write` calls, to check that a flush is one `write(2)`.
#[derive(Default)]
struct CountingSink {
    bytes: Vec<u8>,
    writes: usize,
}
impl Write for CountingSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.writes += 1;
        self.bytes.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
impl trace::StreamSink for CountingSink {
    fn rewind_to(&mut self, len: u64) -> std::io::Result<()> {
        self.bytes.truncate(len as usize);
        Ok(())
    }
}

#[test]
fn each_flush_is_one_write_of_whole_chunks() {
    let mut w = StreamWriter::new(CountingSink::default(), &header(), 8).unwrap();
    // First flush: a new string, a new site and events; second: events only; third: a new
    // string and no events; then the trailer.
    let label = w.intern_string("first");
    let site = w.intern_site(0x1234);
    for t in 0..5 {
        w.push(&Record {
            obj: label,
            site,
            ..mark(t)
        });
    }
    w.flush().unwrap();
    for t in 5..8 {
        w.push(&mark(t));
    }
    w.flush().unwrap();
    w.intern_string("second");
    w.flush().unwrap();
    w.flush().unwrap(); // nothing pending: no write
    let sink = w.finish_into(9).unwrap();
    assert_eq!(sink.writes, 1 + 3 + 1, "header, three flushes, trailer");
    let s = Stream::parse(&sink.bytes).unwrap();
    assert_eq!((s.events, s.string_count(), s.site_count()), (8, 2, 1));
    let t = s.trailer.unwrap();
    assert_eq!((t.strings, t.sites), (2, 1));
}

/// A disk of `capacity` bytes: a write that does not fit is written in part and then fails
/// with ENOSPC, as a full file system does; cutting the file frees the space again, unless the
/// sink cannot be cut (a pipe, say).
struct SmallDisk {
    bytes: Vec<u8>,
    capacity: usize,
    can_cut: bool,
}
impl Write for SmallDisk {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let room = self.capacity - self.bytes.len();
        if room == 0 {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let n = room.min(b.len());
        self.bytes.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
impl trace::StreamSink for SmallDisk {
    fn rewind_to(&mut self, len: u64) -> std::io::Result<()> {
        if !self.can_cut {
            return Err(std::io::Error::other("cannot seek a pipe"));
        }
        self.bytes.truncate(len as usize);
        Ok(())
    }
}

/// Room for the header, one chunk of 10 events, and 100 bytes: the next chunks (184 bytes)
/// are torn by ENOSPC, the trailer (56 bytes) fits.
fn small_disk(can_cut: bool) -> SmallDisk {
    SmallDisk {
        bytes: Vec::new(),
        capacity: HEADER_LEN + 24 + 10 * RECORD_LEN + 100,
        can_cut,
    }
}

fn mark(ts: u64) -> Record {
    Record {
        ts,
        kind: EventKind::Mark,
        aux: 0,
        site: trace::NO_SITE,
        obj: trace::NO_STRING,
    }
}

#[test]
fn a_full_disk_tears_no_chunk_and_loses_no_count() {
    let mut w = StreamWriter::new(small_disk(true), &header(), 10).unwrap();
    for t in 0..35 {
        w.push(&mark(t));
    }
    // Chunk 1 written; chunks 2 and 3 torn by ENOSPC, cut back and counted as dropped.
    assert_eq!((w.events_written(), w.dropped()), (10, 20));
    let disk = w
        .finish_into(99)
        .expect("the trailer fits once the torn chunks are cut");
    let s = Stream::parse(&disk.bytes).expect("no torn chunk is left behind");
    assert!(s.is_complete());
    assert_eq!(
        (s.events, s.dropped),
        (10, 25),
        "the last 5 were dropped at close"
    );
}

#[test]
fn a_sink_that_cannot_be_cut_stops_and_still_reports_its_counts() {
    let mut w = StreamWriter::new(small_disk(false), &header(), 10).unwrap();
    for t in 0..35 {
        w.push(&mark(t));
    }
    let err = w.finish(99).unwrap_err();
    assert_eq!((err.summary.events, err.summary.dropped), (10, 25));
    assert_eq!(err.error.raw_os_error(), Some(libc::ENOSPC));
    assert!(
        err.to_string().contains("10 events written, 25 dropped"),
        "{err}"
    );
}

#[test]
fn a_byte_limit_keeps_the_trailer_and_counts_drops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limited.cst");
    let file = std::fs::File::create(&path).unwrap();
    let limit = (HEADER_LEN + 24 + 100 * RECORD_LEN + 24 + 32 + 200) as u64;
    let mut w = StreamWriter::new(file, &header(), 100)
        .unwrap()
        .with_byte_limit(limit);
    for t in 0..1_000 {
        // A string first seen after the limit is never written; the trailer must not count it.
        let obj = if t == 900 {
            w.intern_string("late")
        } else {
            trace::NO_STRING
        };
        w.push(&Record { obj, ..mark(t) });
    }
    let summary = w.finish(2_000).unwrap();
    assert_eq!(summary.events + summary.dropped, 1_000);
    assert!(summary.bytes <= limit);
    let f = trace::StreamFile::open(&path).unwrap();
    let s = f.parse().unwrap();
    assert!(s.is_complete());
    assert_eq!((s.events, s.dropped), (summary.events, summary.dropped));
    assert!(s.dropped >= 800, "{}", s.dropped);
}

const CHILD_ENV: &str = "CONTEND_TRACE_TEST_CHILD_FILE";

/// Not a test on its own: the child process of `a_killed_writer_leaves_what_it_flushed`, which
/// runs it with `--ignored`. It writes a stream, flushes part of it, signals readiness and
/// waits to be killed.
#[test]
#[ignore = "the child process of a_killed_writer_leaves_what_it_flushed, not a test alone"]
fn child_writer_for_kill_test() {
    let path = std::env::var(CHILD_ENV).expect("run by a_killed_writer_leaves_what_it_flushed");
    let mut w = StreamWriter::new(std::fs::File::create(path).unwrap(), &header(), 1_000).unwrap();
    let label = w.intern_string("before the kill");
    for t in 0..10_000u64 {
        w.push(&Record {
            obj: label,
            ..mark(t)
        });
    }
    w.flush().unwrap();
    for t in 0..500u64 {
        w.push(&mark(t)); // buffered, never flushed: lost with the process, as documented
    }
    println!("flushed");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn a_killed_writer_leaves_what_it_flushed() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.cst");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_writer_for_kill_test",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("flushed") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child ended early");
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let f = trace::StreamFile::open(&path).unwrap();
    let s = f.parse().unwrap();
    assert!(!s.is_complete(), "no trailer after SIGKILL");
    assert_eq!(s.events, 10_000);
    assert_eq!(
        s.string(s.events().next().unwrap().obj),
        Some("before the kill")
    );
}

#[test]
fn string_tables_stay_within_what_the_reader_accepts() {
    // 1100 distinct 64 KiB strings between two flushes: 70 MB of table, more than one chunk may
    // hold. The writer must split it so its own reader accepts the stream.
    let mut w = StreamWriter::new(Vec::new(), &header(), 4096).unwrap();
    let mut ids = Vec::new();
    for i in 0..1100u32 {
        let text = format!("{i:08}").repeat(8 << 10);
        ids.push(w.intern_string(&text));
    }
    w.push(&Record {
        obj: ids[1099],
        ..mark(1)
    });
    let bytes = w.finish_into(2).unwrap();
    let s = Stream::parse(&bytes).expect("every chunk within the reader's limit");
    assert_eq!(s.string_count(), 1100);
    assert!(s.string(ids[1099]).unwrap().starts_with("00001099"));
}

#[test]
fn lock_events_name_their_objects() {
    let mut w = StreamWriter::new(Vec::new(), &header(), 16).unwrap();
    let lock = w.intern_object(0x7fff_0000_1000, trace::ObjectKind::Mutex);
    assert_eq!(
        w.intern_object(0x7fff_0000_1000, trace::ObjectKind::Mutex),
        lock
    );
    let cond = w.intern_object(0x7fff_0000_2000, trace::ObjectKind::Cond);
    let site = w.intern_site(0x401234);
    for (ts, kind, obj) in [
        (10, EventKind::LockWait, lock),
        (20, EventKind::LockAcquired, lock),
        (30, EventKind::LockReleased, lock),
        (40, EventKind::CondWait, cond),
        (50, EventKind::CondWoken, cond),
    ] {
        w.push(&Record {
            ts,
            kind,
            aux: 0,
            site,
            obj,
        });
    }
    let bytes = w.finish_into(60).unwrap();
    let s = Stream::parse(&bytes).unwrap();
    assert_eq!(
        s.object(lock),
        Some((trace::ObjectKind::Mutex, 0x7fff_0000_1000))
    );
    assert_eq!(
        s.object(cond),
        Some((trace::ObjectKind::Cond, 0x7fff_0000_2000))
    );
    assert_eq!(s.counts[&EventKind::LockAcquired], 1);
    assert_eq!(s.trailer.unwrap().objects, 2);

    // A lock event naming an object no table defines is refused.
    let mut w = StreamWriter::new(Vec::new(), &header(), 16).unwrap();
    w.push(&Record {
        ts: 1,
        kind: EventKind::LockAcquired,
        aux: 0,
        site: trace::NO_SITE,
        obj: 7,
    });
    let bytes = w.finish_into(2).unwrap();
    assert_eq!(
        Stream::parse(&bytes).unwrap_err().problem,
        Problem::UndefinedObject { event: 0, id: 7 }
    );
}
