//! Polling runs keep the wait states (issue 20): the rank streams of a run recorded with
//! `CONTEND_MPI_POLL_RUNS=0` (every unsuccessful `Test*`/`Iprobe`/`Improbe` its own group)
//! analysed as recorded, and again after turning their polls into polling runs as the wrapper
//! writes them (docs/formats.md §2.4: consecutive unsuccessful polls of one function at one
//! call site and communicator are one group from the first poll's enter to the enter of the
//! next other call, with `polls` N; a successful poll that ends a run has enter = exit). The
//! wait-state instances and counts of the two analyses must be identical; the example prints
//! both recordings' sizes in groups and exits 1 on any difference.
//!
//! ```text
//! CONTEND_MPI_POLL_RUNS=0 contend record --mpi -o RUN -- mpirun -np 2 PROGRAM
//! cargo run --release -p analysis --example mpi_poll_runs -- RUN
//! ```
//!
//! The wrapper keys a run by the requests it polls too, per thread, with at most 4 open; the
//! streams carry neither for a single unsuccessful poll, so this keys by function, site and
//! communicator, which is the same for a single-threaded rank polling one request set per
//! call site (hpcc's loops).

use analysis::mpi::{analyse, RankInput};
use analysis::waitstates::Thresholds;
use std::collections::BTreeMap;
use std::path::PathBuf;
use trace::mpi::{arg, decode, CallGroup, MpiItem};
use trace::Stream;

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

/// The rank's items with its unsuccessful polls turned into runs, as the wrapper writes them.
fn compress(items: &[MpiItem]) -> Vec<MpiItem> {
    let mut out = Vec::with_capacity(items.len());
    // Open runs in order of their first poll: (function, site, comm) -> the run's group.
    let mut open: Vec<CallGroup> = Vec::new();
    for item in items {
        let MpiItem::Call(g) = item else {
            out.push(item.clone());
            continue;
        };
        if g.unsuccessful_polls() > 0 {
            let same =
                |r: &&mut CallGroup| (r.function, r.site, r.comm) == (g.function, g.site, g.comm);
            match open.iter_mut().find(|r| same(r)) {
                Some(run) => {
                    let n = run.arg(arg::POLLS).unwrap_or(1) + g.arg(arg::POLLS).unwrap_or(1);
                    run.args.retain(|&(c, _)| c != arg::POLLS);
                    run.args.push((arg::POLLS, n));
                }
                None => {
                    let mut run = g.clone();
                    if run.arg(arg::FLAG).is_none() {
                        run.args.push((arg::FLAG, 0));
                    }
                    if run.arg(arg::POLLS).is_none() {
                        run.args.push((arg::POLLS, 1));
                    }
                    open.push(run);
                }
            }
            continue;
        }
        // Any other call ends the open runs at its enter; the one of its own kind and site
        // (it is the successful poll) is written last, and its own group then starts at its
        // return.
        let own = open
            .iter()
            .position(|r| (r.function, r.site, r.comm) == (g.function, g.site, g.comm));
        let mut g = g.clone();
        let end = g.enter;
        let mut last = None;
        for (i, mut run) in open.drain(..).enumerate() {
            run.exit = end.max(run.enter);
            if Some(i) == own {
                last = Some(run);
            } else {
                out.push(MpiItem::Call(run));
            }
        }
        if let Some(run) = last {
            out.push(MpiItem::Call(run));
            g.enter = g.exit;
        }
        out.push(MpiItem::Call(g));
    }
    out
}

fn main() {
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: mpi_poll_runs RUN_DIR   (recorded with CONTEND_MPI_POLL_RUNS=0)");
        std::process::exit(2);
    };
    let mut files: BTreeMap<u32, PathBuf> = BTreeMap::new();
    for e in std::fs::read_dir(dir.join("streams"))
        .expect("a run directory")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some((r, 1)) = trace::mpi::rank_stream_name(&name) {
            files.insert(r, e.path());
        }
    }
    assert!(!files.is_empty(), "no rank streams in {}", dir.display());
    let each: Vec<RankInput> = files
        .iter()
        .map(|(r, p)| rank_input(*r, &Stream::parse(&std::fs::read(p).unwrap()).unwrap()))
        .collect();
    let runs: Vec<RankInput> = each
        .iter()
        .map(|r| RankInput {
            items: compress(&r.items),
            ..r.clone()
        })
        .collect();
    let groups = |inputs: &[RankInput]| -> usize {
        inputs
            .iter()
            .map(|r| {
                r.items
                    .iter()
                    .filter(|i| matches!(i, MpiItem::Call(_)))
                    .count()
            })
            .sum()
    };
    let a = analyse(&each, Thresholds::default());
    let b = analyse(&runs, Thresholds::default());
    println!(
        "calls recorded one by one: {} groups; as polling runs: {} groups",
        groups(&each),
        groups(&runs)
    );
    let mut by: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for i in &a.waits.instances {
        let e = by.entry(i.pattern.slug()).or_default();
        e.0 += 1;
        e.1 += i.wait_ns;
    }
    for (p, (n, ns)) in &by {
        println!("  {p}: {n} instances, {:.1} ms", *ns as f64 / 1e6);
    }
    let same = a.waits.instances == b.waits.instances
        && serde_json::to_string(&a.waits.counts).unwrap()
            == serde_json::to_string(&b.waits.counts).unwrap();
    if same {
        println!(
            "same wait states with and without polling runs: {} instances",
            a.waits.instances.len()
        );
    } else {
        println!(
            "DIFFERENT: {} instances one by one, {} with runs",
            a.waits.instances.len(),
            b.waits.instances.len()
        );
        std::process::exit(1);
    }
}
