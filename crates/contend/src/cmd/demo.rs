//! `contend demo`: the guided tour. Builds the bundled examples with the system's C compiler,
//! runs contend's commands on them as a user would type them, and cleans up.

use crate::examples;
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Keep the build directory (its path is printed) instead of removing it.
    #[arg(long)]
    keep: bool,
}

/// A child process killed when dropped, so no example outlives the demo.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn section(n: usize, title: &str, why: &str) {
    println!("\n━━ {n}. {title} ━━");
    println!("{why}\n");
}

/// Runs this same binary with `args`, echoing the command line the way a user would type it.
fn contend(args: &[&str]) -> anyhow::Result<()> {
    println!("$ contend {}", args.join(" "));
    let exe = std::env::current_exe().context("finding the contend executable")?;
    let status = Command::new(exe).args(args).status()?;
    if !status.success() {
        bail!("`contend {}` failed with {status}", args.join(" "));
    }
    println!();
    Ok(())
}

/// Starts an example and waits for its `ready` line (it prints one when its state is set up).
fn start_until_ready(exe: &Path, args: &[&str]) -> anyhow::Result<(Running, u32)> {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let stdout = child.stdout.take().context("example stdout")?;
    let running = Running(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let line = rx
        .recv_timeout(deadline - Instant::now())
        .with_context(|| format!("{} did not report ready within 20 s", exe.display()))?;
    if !line.starts_with("ready") {
        bail!("{} did not start: {line:?}", exe.display());
    }
    let pid = running.0.id();
    Ok((running, pid))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("contend-demo-")
        .tempdir()
        .context("creating a build directory")?;
    println!("contend demo: a tour of what contend finds on this machine.");
    println!(
        "Examples are built with `{}` in {}.",
        examples::compiler(),
        dir.path().display()
    );

    section(
        1,
        "Topology",
        "Where could contention come from? Packages, NUMA nodes, cores, shared caches and the\n\
         distances between nodes, read from /sys (the same facts lstopo and numactl show).",
    );
    contend(&["topo"])?;
    println!(
        "NUMA logic is tested on machines that are values. An imaginary 2-socket machine with\n\
         2 NUMA nodes per socket, and the order in which `spread` hands its CPUs to threads:"
    );
    contend(&["topo", "--synthetic", "2x2x2:n2"])?;
    contend(&["topo", "--synthetic", "2x2x2:n2", "--order", "spread"])?;

    section(
        2,
        "Where a process runs and where its memory lives",
        &format!(
            "The first NUMA triage (ps -T -o psr, numastat -p) in one command, on `{}`:\n{}.",
            examples::THREADS_MEMORY.name,
            examples::THREADS_MEMORY.about
        ),
    );
    let exe = examples::build(&examples::THREADS_MEMORY, dir.path())?;
    let (child, pid) = start_until_ready(&exe, &["30"])?;
    contend(&["where", &pid.to_string()])?;
    drop(child);

    if args.keep {
        let kept = dir.keep();
        println!("build directory kept: {}", kept.display());
    }
    println!("Demo finished.");
    Ok(())
}
