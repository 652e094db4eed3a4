//! The C stream writer of the MPI wrapper (`mpi/cst_writer.h`) against the Rust one.
//!
//! `mpi/test_vectors.c` checks the MPI records' bytes against the vectors of docs/formats.md
//! §2.4 and writes a whole stream; this test compiles and runs it, reads that stream with the
//! Rust reader and compares it byte for byte with the same content written by
//! `trace::StreamWriter`. It also builds the wrapper itself (`mpi/contend_mpi.c`) with every
//! MPI compiler present, warnings as errors.

use std::path::{Path, PathBuf};
use std::process::Command;
use trace::{
    ClockSource, EventKind, Header, Record, Stream, StreamKind, StreamWriter, DEFAULT_CHUNK_EVENTS,
    NO_SITE,
};

fn mpi_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../mpi")
}

fn compile(compiler: &str, args: &[&str], source: &Path, output: &Path) {
    let out = Command::new(compiler)
        .args(args)
        .arg("-o")
        .arg(output)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {args:?} {} failed:\n{}{}",
        source.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A record from the 16 bytes written as hex in docs/formats.md's vectors.
fn from_hex(hex: &str) -> Record {
    assert_eq!(hex.len(), 32);
    let mut b = [0u8; 16];
    for (i, byte) in b.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    Record::decode(&b)
}

fn mpi(ts: u64, kind: EventKind, aux: u8, site: u16, obj: u32) -> Record {
    Record {
        ts,
        kind,
        aux,
        site,
        obj,
    }
}

/// An `mpi-arg` of a 48-bit value (two's complement for negative values).
fn arg(ts: u64, code: u8, value: i64) -> Record {
    let bits = (value as u64) & ((1 << 48) - 1);
    mpi(
        ts,
        EventKind::MpiArg,
        code,
        (bits >> 32) as u16,
        bits as u32,
    )
}

/// Groups A, B and C of docs/formats.md §2.4's vectors, built from their meaning.
fn groups() -> Vec<Record> {
    vec![
        // A: MPI_Send of 4096 bytes to world rank 1, tag 7, comm 0, site 3.
        mpi(1000, EventKind::MpiEnter, 10, 3, 0),
        arg(1000, 1, 1),
        arg(1000, 2, 7),
        arg(1000, 3, 4096),
        mpi(1500, EventKind::MpiExit, 10, NO_SITE, 0),
        // B: MPI_Irecv(ANY_SOURCE, ANY_TAG) on comm 2, request 5, site 4.
        mpi(2000, EventKind::MpiEnter, 24, 4, 2),
        arg(2000, 4, -1),
        arg(2000, 5, -1),
        arg(2000, 7, 5),
        mpi(2100, EventKind::MpiExit, 24, NO_SITE, 0),
        // C: clock at Init, 10 round trips, best 2400 ns, offset -123456789012 ns.
        mpi(5000, EventKind::MpiClock, 0, 10, 2400),
        mpi(
            5000,
            EventKind::MpiClockOffset,
            0,
            NO_SITE,
            (-123_456_789_012i64) as u64 as u32,
        ),
        mpi(
            5000,
            EventKind::MpiClockOffset,
            1,
            NO_SITE,
            ((-123_456_789_012i64) as u64 >> 32) as u32,
        ),
    ]
}

const VECTORS: [&str; 13] = [
    "e803000000000000140a030000000000",
    "e8030000000000001501000001000000",
    "e8030000000000001502000007000000",
    "e8030000000000001503000000100000",
    "dc05000000000000160affff00000000",
    "d0070000000000001418040002000000",
    "d0070000000000001504ffffffffffff",
    "d0070000000000001505ffffffffffff",
    "d0070000000000001507000005000000",
    "34080000000000001618ffff00000000",
    "881300000000000019000a0060090000",
    "88130000000000001a00ffffece56641",
    "88130000000000001a01ffffe3ffffff",
];

/// The stream test_vectors.c writes, written by the Rust writer.
fn rust_stream() -> Vec<u8> {
    let header = Header {
        kind: StreamKind::Rank,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 4242,
        tid: 0,
        rank: 1,
        base_time: 1000,
    };
    let mut w = StreamWriter::new(Vec::new(), &header, DEFAULT_CHUNK_EVENTS).unwrap();
    let world = w.intern_string("world 0 1");
    w.push(&mpi(1000, EventKind::MpiComm, 0, NO_SITE, 0));
    w.push(&mpi(1000, EventKind::MpiCommMembers, 0, NO_SITE, world));
    for (i, address) in (0x401000u64..=0x401040).step_by(0x10).enumerate() {
        assert_eq!(usize::from(w.intern_site(address)), i);
    }
    for r in groups() {
        w.push(&r);
    }
    let host = w.intern_string("mpi.host=test");
    w.push(&mpi(5100, EventKind::Mark, 0, NO_SITE, host));
    w.flush().unwrap();
    w.finish_into(6000).unwrap()
}

#[test]
fn the_vectors_mean_what_the_spec_says() {
    for (record, hex) in groups().iter().zip(VECTORS) {
        assert_eq!(&from_hex(hex), record, "{hex}");
        assert_eq!(record.encode(), from_hex(hex).encode());
    }
}

#[test]
fn the_c_writer_writes_the_rust_writers_bytes() {
    if !testkit::require_command("cc", "gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("test_vectors");
    compile(
        "cc",
        &["-O2", "-Wall", "-Wextra", "-Werror"],
        &mpi_dir().join("test_vectors.c"),
        &exe,
    );
    let path = dir.path().join("rank-1.cst");
    let many = dir.path().join("rank-3.cst");
    let out = Command::new(&exe).arg(&path).arg(&many).output().unwrap();
    assert!(
        out.status.success(),
        "test_vectors failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let c_bytes = std::fs::read(&path).unwrap();

    let s = Stream::parse(&c_bytes).unwrap_or_else(|e| panic!("the C stream does not read: {e}"));
    assert!(s.is_complete());
    assert_eq!(s.header.kind, StreamKind::Rank);
    assert_eq!(s.header.rank, 1);
    assert_eq!(s.header.pid, 4242);
    assert_eq!(s.header.base_time, 1000);
    assert_eq!(s.dropped, 0);
    let events: Vec<Record> = s.events().collect();
    let kinds: Vec<u8> = events.iter().map(|r| r.kind.to_u8()).collect();
    assert_eq!(
        kinds,
        [23, 24, 20, 21, 21, 21, 22, 20, 21, 21, 21, 22, 25, 26, 26, 1]
    );
    assert_eq!(s.events, 16);
    assert_eq!(s.string(events[1].obj), Some("world 0 1"));
    assert_eq!(s.string(events[15].obj), Some("mpi.host=test"));
    assert_eq!(s.site_address(events[2].site), Some(0x401030));
    assert_eq!(s.site_address(events[7].site), Some(0x401040));
    assert_eq!(&events[2..15], groups().as_slice());
    assert_eq!(s.trailer.unwrap().end_time, 6000);

    same_bytes("vectors", &c_bytes, &rust_stream());

    let c_many = std::fs::read(&many).unwrap();
    let s = Stream::parse(&c_many).unwrap_or_else(|e| panic!("the C stream does not read: {e}"));
    assert_eq!(
        (s.events, s.string_count(), s.site_count()),
        (10_000, 9, 11)
    );
    same_bytes("many chunks", &c_many, &rust_many());
}

fn same_bytes(what: &str, c: &[u8], rust: &[u8]) {
    if let Some(at) = c.iter().zip(rust).position(|(c, r)| c != r) {
        panic!(
            "{what}: the C and Rust streams differ first at byte {at}: C {:#04x}, Rust {:#04x}",
            c[at], rust[at]
        );
    }
    assert_eq!(c.len(), rust.len(), "{what}: the stream lengths differ");
}

/// What test_vectors.c's `write_many` writes: several chunks, tables growing between them.
fn rust_many() -> Vec<u8> {
    let header = Header {
        kind: StreamKind::Rank,
        clock: ClockSource::Monotonic,
        clock_hz: 1_000_000_000,
        pid: 4242,
        tid: 0,
        rank: 3,
        base_time: 1000,
    };
    let mut w = StreamWriter::new(Vec::new(), &header, DEFAULT_CHUNK_EVENTS).unwrap();
    for i in 0u32..10_000 {
        let label = if i < 5000 {
            (if i % 2 == 1 { "odd" } else { "even" }).to_string()
        } else {
            format!("late {}", i % 7)
        };
        let s = w.intern_string(&label);
        let modulus = if i < 6000 { 3 } else { 11 };
        let site = w.intern_site(0x400000 + u64::from(i % modulus) * 16);
        w.push(&Record {
            ts: 1000 + u64::from(i) * 10,
            kind: EventKind::Mark,
            aux: (i % 256) as u8,
            site,
            obj: s,
        });
        if i == 7000 {
            w.flush().unwrap();
        }
    }
    w.finish_into(99_999).unwrap()
}

#[test]
fn the_wrapper_builds_with_every_mpi_present() {
    // Each MPI scripts/test.sh installs: a missing one fails under CI, is a visible skip
    // elsewhere.
    for (compiler, packages) in [
        ("mpicc.openmpi", "openmpi-bin libopenmpi-dev"),
        ("mpicc.mpich", "mpich libmpich-dev"),
    ] {
        if !testkit::require_command(compiler, packages) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libcontend-mpi.so");
        compile(
            compiler,
            &["-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared"],
            &mpi_dir().join("contend_mpi.c"),
            &lib,
        );
        assert!(std::fs::metadata(&lib).unwrap().len() > 0);
    }
}
