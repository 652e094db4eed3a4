//! `contend topo`: the machine's topology.

use crate::exit::bad_input;
use std::path::PathBuf;
use topology::{FillOrder, Topology};

#[derive(clap::Args)]
pub struct Args {
    /// Read a sysfs snapshot instead of this machine: the directory that contains
    /// `sys/devices/system/{cpu,node}` (and optionally `proc/cpuinfo`), laid out as under `/`.
    #[arg(long, value_name = "DIR", conflicts_with = "synthetic")]
    sysfs: Option<PathBuf>,
    /// Describe an imaginary machine, e.g. `2x8x2` (packages x cores x threads) or `2x8x2:n2`
    /// (2 NUMA nodes per package). See `contend topo --help-synthetic` for the grammar.
    #[arg(long, value_name = "SPEC")]
    synthetic: Option<String>,
    /// Print the synthetic-spec grammar and exit.
    #[arg(long)]
    help_synthetic: bool,
    /// Print every fact as JSON on stdout instead of the tree.
    #[arg(long)]
    json: bool,
    /// Print the order in which contend hands CPUs to threads (compact, socket-first or spread)
    /// instead of the tree.
    #[arg(long, value_name = "ORDER")]
    order: Option<FillOrder>,
}

/// Builds the topology the options ask for; shared by every command taking `--sysfs`/`--synthetic`.
pub fn load(sysfs: Option<&PathBuf>, synthetic: Option<&str>) -> anyhow::Result<Topology> {
    match (sysfs, synthetic) {
        (Some(root), _) => Topology::from_root(root).map_err(|e| bad_input(e.to_string())),
        (None, Some(spec)) => Topology::synthetic(spec).map_err(|e| bad_input(e.to_string())),
        // Not the user's input: this machine could not be read (exit 1).
        (None, None) => Ok(Topology::live()?),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.help_synthetic {
        println!("{}", topology::SYNTHETIC_GRAMMAR);
        return Ok(());
    }
    let t = load(args.sysfs.as_ref(), args.synthetic.as_deref())?;
    for note in &t.notes {
        eprintln!("contend: note: {note}");
    }
    if let Some(order) = args.order {
        let cpus = t.fill_order(order);
        if args.json {
            println!("{}", serde_json::json!({ "order": order, "cpus": cpus }));
        } else {
            println!("{}", topology::CpuSet::list_in_order(&cpus));
        }
        return Ok(());
    }
    if args.json {
        println!("{}", report::topo::to_json(&t)?);
    } else {
        print!("{}", report::topo::render(&t));
    }
    Ok(())
}
