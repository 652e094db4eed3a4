//! Throughput of the MPI analysis, in records (events) per second: validating a rank stream
//! (`trace::Stream::parse`), decoding it into call groups (`trace::mpi::decode`, plus the
//! string and call-site tables `contend report` attaches) and analysing every rank
//! (`analysis::mpi::analyse`: clock alignment, conversion, message matching, wait states,
//! statistics). Best of 5 of each stage. The figures go to docs/benchmarks.md.
//!
//! ```text
//! cargo run --release -p analysis --example mpi_throughput            # synthetic ranks
//! cargo run --release -p analysis --example mpi_throughput -- 500000  # calls per rank
//! cargo run --release -p analysis --example mpi_throughput -- RUN_DIR # recorded streams
//! cargo run --release -p analysis --example mpi_throughput -- --check RUN_DIR  # counts only
//! ```
//!
//! Synthetic: two workloads of N calls per rank, written with `StreamWriter` into memory as the
//! wrapper writes them: an 8-byte ping-pong between 2 ranks (`MPI_Send`/`MPI_Recv`, a Late
//! Sender in every receive of rank 1, as in a real ping-pong), and a halo exchange among 8 ranks
//! (`MPI_Irecv` ×2, `MPI_Isend` ×2, `MPI_Waitall` of 4 requests, `MPI_Allreduce`; one rank
//! late every 16th iteration).
//!
//! Recorded: the rank streams of a run directory (`streams/rank-R.cst`); call sites stay
//! addresses (contend report also names them from `maps/`, which is not timed here). Also
//! prints, per rank, the records, the groups per function and what was malformed, which
//! scripts/bench-mpi.sh uses to check that a traced run recorded every call (`--check`: only
//! that, untimed).

use analysis::mpi::{analyse, RankInput};
use analysis::waitstates::Thresholds;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use trace::mpi::{arg, decode, CallGroup, ClockSample, Function, MpiItem, NO_COMM};
use trace::{ClockSource, EventKind, Header, Record, Stream, StreamKind, StreamWriter, NO_SITE};

/// One rank's stream under construction.
struct Builder {
    w: StreamWriter<Vec<u8>>,
    site: u16,
    last: u64,
}

impl Builder {
    fn new(rank: u32, size: u32) -> Builder {
        let header = Header {
            kind: StreamKind::Rank,
            clock: ClockSource::Monotonic,
            clock_hz: 1_000_000_000,
            pid: 1000 + rank,
            tid: 0,
            rank: rank as i32,
            base_time: 0,
        };
        let mut w = StreamWriter::new(Vec::new(), &header, trace::DEFAULT_CHUNK_EVENTS).unwrap();
        let site = w.intern_site(0x40_1000 + u64::from(rank));
        let members: String = (0..size).map(|r| format!(" {r}")).collect();
        let world = w.intern_string(&format!("world{members}"));
        let host = w.intern_string("mpi.host=node0");
        let comm = |kind, aux, obj| Record {
            ts: 0,
            kind,
            aux,
            site: NO_SITE,
            obj,
        };
        w.push(&comm(EventKind::MpiComm, 0, 0));
        w.push(&comm(EventKind::MpiCommMembers, 0, world));
        w.push(&comm(EventKind::Mark, 0, host));
        let mut b = Builder { w, site, last: 0 };
        b.call(Function::Init, NO_COMM, 0, 1000, &[]);
        b.clock(0, 1000);
        b
    }

    fn call(&mut self, f: Function, comm: u32, enter: u64, exit: u64, args: &[(u8, i64)]) {
        let g = CallGroup {
            enter,
            exit,
            function: f as u8,
            site: self.site,
            comm,
            args: args.to_vec(),
            ret: 0,
        };
        for r in g.encode() {
            self.w.push(&r);
        }
        self.last = exit;
    }

    fn clock(&mut self, phase: u8, ts: u64) {
        let c = ClockSample {
            ts,
            phase,
            round_trips: 10,
            best_round_trip_ns: 2000,
            offset_ns: 0,
        };
        for r in c.encode() {
            self.w.push(&r);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let t = self.last + 1000;
        self.clock(1, t);
        self.call(Function::Finalize, NO_COMM, t, t + 1000, &[]);
        self.w.finish_into(t + 1000).unwrap()
    }
}

fn send(dest: i64, tag: i64, bytes: i64) -> [(u8, i64); 3] {
    [
        (arg::DEST, dest),
        (arg::SEND_TAG, tag),
        (arg::BYTES_SENT, bytes),
    ]
}

fn status(source: i64, tag: i64, bytes: i64) -> [(u8, i64); 3] {
    [
        (arg::STATUS_SOURCE, source),
        (arg::STATUS_TAG, tag),
        (arg::STATUS_BYTES, bytes),
    ]
}

/// 2 ranks, `n` round trips: `n` sends and `n` receives per rank.
fn pingpong(n: u64) -> Vec<Vec<u8>> {
    let mut r0 = Builder::new(0, 2);
    let mut r1 = Builder::new(1, 2);
    for i in 0..n / 2 {
        let t = 10_000 + i * 4000;
        let late = if i % 8 == 0 { 1500 } else { 0 };
        r0.call(Function::Send, 0, t, t + 200, &send(1, 0, 8));
        let recv = [(arg::SOURCE, 1), (arg::RECV_TAG, 0)];
        let mut a = recv.to_vec();
        a.extend(status(1, 0, 8));
        r0.call(Function::Recv, 0, t + 250, t + 1600 + late, &a);
        let recv1 = [(arg::SOURCE, 0), (arg::RECV_TAG, 0)];
        let mut a1 = recv1.to_vec();
        a1.extend(status(0, 0, 8));
        r1.call(Function::Recv, 0, t - 1500, t + 600, &a1);
        r1.call(
            Function::Send,
            0,
            t + 800 + late,
            t + 1000 + late,
            &send(0, 0, 8),
        );
    }
    vec![r0.finish(), r1.finish()]
}

/// 8 ranks in a ring, `n` calls per rank (6 per iteration).
fn halo(n: u64) -> Vec<Vec<u8>> {
    const RANKS: i64 = 8;
    let mut ranks: Vec<Builder> = (0..RANKS as u32).map(|r| Builder::new(r, 8)).collect();
    for i in 0..n / 6 {
        let t = 10_000 + i * 20_000;
        let slow = (i % 16 == 0).then_some((i / 16) as i64 % RANKS);
        for (r, b) in ranks.iter_mut().enumerate() {
            let r = r as i64;
            let (left, right) = ((r + RANKS - 1) % RANKS, (r + 1) % RANKS);
            let late = if slow == Some(r) { 3000 } else { 0 };
            let s = t + late;
            let req = (i * 4) as i64;
            for (k, peer) in [left, right].into_iter().enumerate() {
                let at = s + 100 * k as u64;
                b.call(
                    Function::Irecv,
                    0,
                    at,
                    at + 50,
                    &[
                        (arg::SOURCE, peer),
                        (arg::RECV_TAG, 1),
                        (arg::REQUEST_CREATED, req + k as i64),
                    ],
                );
            }
            for (k, peer) in [left, right].into_iter().enumerate() {
                let at = s + 200 + 100 * k as u64;
                let mut a = send(peer, 1, 4096).to_vec();
                a.push((arg::REQUEST_CREATED, req + 2 + k as i64));
                b.call(Function::Isend, 0, at, at + 50, &a);
            }
            let mut done = Vec::new();
            for (k, peer) in [left, right].into_iter().enumerate() {
                done.push((arg::REQUEST_COMPLETED, req + k as i64));
                done.extend(status(peer, 1, 4096));
            }
            done.push((arg::REQUEST_COMPLETED, req + 2));
            done.push((arg::REQUEST_COMPLETED, req + 3));
            let waited = t + 3000 + if slow.is_some() { 1000 } else { 0 };
            b.call(
                Function::Waitall,
                NO_COMM,
                s + 400,
                waited.max(s + 500),
                &done,
            );
            let reduced = t + 8000;
            b.call(
                Function::Allreduce,
                0,
                waited.max(s + 500) + 100,
                reduced,
                &[],
            );
        }
    }
    ranks.into_iter().map(Builder::finish).collect()
}

/// A parsed stream as `contend report` turns it into the analysis's input (sites as addresses).
fn rank_input(rank: u32, s: &Stream) -> RankInput {
    let (items, malformed) = decode(s.events());
    let mut input = RankInput {
        rank,
        closed: s.is_complete(),
        malformed,
        ..Default::default()
    };
    for item in &items {
        match item {
            MpiItem::CommDefined { members: id, .. } | MpiItem::Mark { label: id, .. } => {
                if let Some(text) = s.string(*id) {
                    input.strings.insert(*id, text.to_string());
                }
            }
            MpiItem::Call(g) => {
                if let Some(a) = s.site_address(g.site) {
                    input.sites.entry(g.site).or_insert(a);
                }
            }
            _ => {}
        }
    }
    input.items = items;
    input
}

fn best_of_5<T>(mut run: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut out = None;
    for _ in 0..5 {
        let t0 = Instant::now();
        let v = run();
        best = best.min(t0.elapsed().as_secs_f64());
        out = Some(v);
    }
    (best, out.unwrap())
}

/// Times the three stages on `streams` (rank, bytes); returns the records and the inputs.
fn measure(name: &str, streams: &[(u32, &[u8])]) -> Vec<RankInput> {
    let (t_parse, parsed) = best_of_5(|| {
        streams
            .iter()
            .map(|&(r, b)| (r, Stream::parse(b).unwrap()))
            .collect::<Vec<_>>()
    });
    let records: u64 = parsed.iter().map(|(_, s)| s.events).sum();
    let (t_decode, inputs) = best_of_5(|| {
        parsed
            .iter()
            .map(|(r, s)| rank_input(*r, s))
            .collect::<Vec<_>>()
    });
    let groups: usize = inputs.iter().map(|i| i.items.len()).sum();
    let (t_analyse, run) = best_of_5(|| analyse(&inputs, Thresholds::default()));
    let waits: usize = run.waits.instances.len();
    let rate = |t: f64| records as f64 / t / 1e6;
    let per = |t: f64| t * 1e9 / records as f64;
    println!(
        "{name}: {} ranks, {records} records, {groups} items ({:.1} records each), {waits} wait states",
        streams.len(),
        records as f64 / groups as f64
    );
    for (stage, t) in [
        ("parse (validate)", t_parse),
        ("decode", t_decode),
        ("analyse", t_analyse),
        ("all three", t_parse + t_decode + t_analyse),
    ] {
        println!(
            "  {stage:<17} {:>8.1} ms  {:>6.1} ns/record  {:>6.2} M records/s",
            t * 1e3,
            per(t),
            rate(t)
        );
    }
    inputs
}

fn recorded(dir: PathBuf, timed: bool) {
    let streams_dir = if dir.join("streams").is_dir() {
        dir.join("streams")
    } else {
        dir.clone()
    };
    let mut files: BTreeMap<u32, PathBuf> = BTreeMap::new();
    for e in std::fs::read_dir(&streams_dir)
        .expect("a run directory")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        // The first job's streams (rank-R.cst); a later job's are rank-R.N.cst.
        if let Some((r, 1)) = trace::mpi::rank_stream_name(&name) {
            files.insert(r, e.path());
        }
    }
    assert!(!files.is_empty(), "no rank streams in {}", dir.display());
    let bytes: Vec<(u32, Vec<u8>)> = files
        .iter()
        .map(|(r, p)| (*r, std::fs::read(p).unwrap()))
        .collect();
    let views: Vec<(u32, &[u8])> = bytes.iter().map(|(r, b)| (*r, b.as_slice())).collect();
    let inputs = if timed {
        measure(&dir.display().to_string(), &views)
    } else {
        views
            .iter()
            .map(|&(r, b)| rank_input(r, &Stream::parse(b).unwrap()))
            .collect()
    };
    // The check lines scripts/bench-mpi.sh reads.
    for ((r, b), input) in views.iter().zip(&inputs) {
        let s = Stream::parse(b).unwrap();
        let mut per_fn: BTreeMap<&str, u64> = BTreeMap::new();
        for item in &input.items {
            if let MpiItem::Call(g) = item {
                let name = Function::from_u8(g.function).map_or("unknown", Function::name);
                *per_fn.entry(name).or_default() += 1;
            }
        }
        let calls: Vec<String> = per_fn.iter().map(|(f, n)| format!(" {f}={n}")).collect();
        println!(
            "check rank={r} records={} dropped={} complete={} broken={} stray={}{}",
            s.events,
            s.dropped,
            u8::from(s.is_complete()),
            input.malformed.broken_groups,
            input.malformed.stray_records,
            calls.concat()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 2 && args[0] == "--check" {
        recorded(PathBuf::from(&args[1]), false);
        return;
    }
    let arg = args.first().cloned();
    if let Some(a) = arg.as_deref().filter(|a| a.parse::<u64>().is_err()) {
        recorded(PathBuf::from(a), true);
        return;
    }
    let n: u64 = arg.map_or(500_000, |a| a.parse().unwrap());
    for (name, streams) in [
        ("ping-pong, 2 ranks", pingpong(n)),
        ("halo + allreduce, 8 ranks", halo(n)),
    ] {
        let views: Vec<(u32, &[u8])> = streams
            .iter()
            .enumerate()
            .map(|(r, b)| (r as u32, b.as_slice()))
            .collect();
        measure(&format!("{name}, {n} calls per rank"), &views);
    }
}
