//! Reading an MPI run: the rank streams of a run directory (and of other hosts' directories
//! given with `--mpi-from`) decoded into the analysis's input, each rank's call sites named from
//! its own `maps/rank-R.maps` (ranks have different address spaces), so that the same line of
//! code is one call site across ranks.

use crate::exit::bad_input;
use analysis::mpi::RankInput;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use trace::StreamFile;

/// `streams/rank-R.cst`.
pub fn is_rank_stream(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.starts_with("rank-") && name.ends_with(".cst")
}

/// The rank streams of `dirs`, decoded; a rank found in two directories is an error (the same
/// job merged twice). Call-site ids index the returned names.
pub fn load(dirs: &[PathBuf]) -> anyhow::Result<Option<(Vec<RankInput>, Vec<String>)>> {
    let mut files: BTreeMap<u32, PathBuf> = BTreeMap::new();
    for dir in dirs {
        let streams = dir.join("streams");
        let Ok(entries) = std::fs::read_dir(&streams) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(rank) = name
                .strip_prefix("rank-")
                .and_then(|n| n.strip_suffix(".cst"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(old) = files.insert(rank, e.path()) {
                return Err(bad_input(format!(
                    "rank {rank} has two traces, {} and {}: give each host's run directory once",
                    old.display(),
                    e.path().display()
                )));
            }
        }
    }
    if files.is_empty() {
        return Ok(None);
    }
    let mut names: Vec<String> = Vec::new();
    let mut ids: HashMap<String, u64> = HashMap::new();
    let mut ranks = Vec::new();
    for (rank, path) in files {
        let shown = path.display().to_string();
        let mapped = StreamFile::open(&path)
            .map_err(|e| bad_input(format!("{shown}: cannot read the stream: {e}")))?;
        let stream = mapped
            .parse()
            .map_err(|e| bad_input(format!("{shown}: {e} (the stream is damaged)")))?;
        let (items, malformed) = trace::mpi::decode(stream.events());
        let mut input = RankInput {
            rank,
            pid: stream.header.pid,
            closed: stream.is_complete(),
            malformed,
            ..Default::default()
        };
        // Strings the items refer to.
        for item in &items {
            let id = match item {
                trace::mpi::MpiItem::CommDefined { members, .. } => *members,
                trace::mpi::MpiItem::Mark { label, .. } => *label,
                _ => continue,
            };
            if let Some(s) = stream.string(id) {
                input.strings.insert(id, s.to_string());
            }
        }
        // Call sites, named with this rank's address space.
        let maps_dir = path.parent().and_then(Path::parent).map(|d| d.join("maps"));
        let mut symbolizer = maps_dir.and_then(|d| rank_symbolizer(&d, rank));
        for item in &items {
            let trace::mpi::MpiItem::Call(g) = item else {
                continue;
            };
            if input.sites.contains_key(&g.site) {
                continue;
            }
            let Some(address) = stream.site_address(g.site) else {
                continue;
            };
            let name = match symbolizer.as_mut() {
                Some(sym) => super::report::site_name(&sym.resolve_call_site(address)),
                None => format!("{address:#x}"),
            };
            let next = names.len() as u64;
            let id = *ids.entry(name.clone()).or_insert_with(|| {
                names.push(name);
                next
            });
            input.sites.insert(g.site, id);
        }
        input.items = items;
        ranks.push(input);
    }
    Ok(Some((ranks, names)))
}

fn rank_symbolizer(maps_dir: &Path, rank: u32) -> Option<symbolize::Symbolizer> {
    let path = maps_dir.join(format!("rank-{rank}.maps"));
    let (maps, _) = symbolize::Maps::read(&path).ok()?;
    Some(symbolize::Symbolizer::new(maps))
}
