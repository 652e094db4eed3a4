//! `contend topo`: the machine's topology.

use std::path::PathBuf;
use topology::FillOrder;

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

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.help_synthetic {
        crate::output::outln!("{}", topology::SYNTHETIC_GRAMMAR);
        return Ok(());
    }
    let t = crate::args::topology(args.sysfs.as_deref(), args.synthetic.as_deref())?;
    for note in &t.notes {
        crate::ui::note(note);
    }
    if let Some(order) = args.order {
        if args.json {
            crate::output::outln!("{}", report::topo::fill_order_json(&t, order)?);
        } else {
            crate::output::outln!("{}", topology::CpuSet::list_in_order(&t.fill_order(order)));
        }
        return Ok(());
    }
    if args.json {
        crate::output::outln!("{}", report::topo::to_json(&t)?);
    } else {
        crate::output::out!("{}", report::topo::render(&t));
    }
    Ok(())
}
