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
    let result = match (sysfs, synthetic) {
        (Some(root), _) => Topology::from_root(root),
        (None, Some(spec)) => Topology::synthetic(spec),
        (None, None) => Topology::live(),
    };
    result.map_err(|e| bad_input(e.to_string()))
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
        let cpus: Vec<String> = t.fill_order(order).iter().map(|c| c.to_string()).collect();
        if args.json {
            println!(
                "{}",
                serde_json::json!({ "order": order, "cpus": t.fill_order(order) })
            );
        } else {
            println!("{}", cpus.join(","));
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
