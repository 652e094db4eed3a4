//! `contend bench mem stream|generate`: STREAM's four kernels (`bench::mem::stream`) and the
//! thesis's memory contention generator (`bench::mem::generate`).

use crate::exit::bad_input;
use bench::mem::{self, GenerateConfig, StreamConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use topology::CpuSet;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: MemCommand,
}

#[derive(clap::Subcommand)]
enum MemCommand {
    /// STREAM: Copy, Scale, Add, Triad over arrays of at least 4 × the last-level caches,
    /// threads pinned; the best rate of each (GB/s, bytes counted as STREAM does) and the
    /// validation of the results.
    ///
    /// Example: `contend bench mem stream`, `contend bench mem stream --nt --cpus 0,1`.
    Stream(StreamArgs),
    /// The memory contention generator (thesis §4.1.4): threads on the given CPUs copying
    /// with non-temporal stores, flat out or at `--rate`, for `--duration` or until Ctrl-C;
    /// reports the achieved rate.
    ///
    /// Example: `contend bench mem generate --cpus 1 --rate 1 --duration 10`.
    Generate(GenerateArgs),
}

#[derive(clap::Args)]
struct StreamArgs {
    /// Threads, one per CPU of --cpus in order, round robin (default: one per CPU of --cpus).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// CPUs to pin the threads to (default: every CPU contend may run on).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Bytes per array (each of the three); suffixes K, M, G (binary). Default: 4 × the sum
    /// of the last-level caches, at least 64 MiB.
    #[arg(long, value_name = "BYTES", value_parser = crate::args::parse_bytes)]
    size: Option<u64>,
    /// Store with explicit non-temporal stores (x86-64 movntpd), bypassing the caches.
    #[arg(long)]
    nt: bool,
    /// Runs of each kernel (STREAM's NTIMES); the first is not counted.
    #[arg(long, value_name = "N", default_value_t = 10)]
    ntimes: u32,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// CPUs to run the generator's threads on, one thread each (default: the last CPU contend
    /// may run on).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Target rate over all threads, GB/s (10⁹ bytes/s, read + written); default flat out.
    #[arg(long, value_name = "GB/S")]
    rate: Option<f64>,
    /// Seconds to run (default: until Ctrl-C).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Each thread's buffers (source and destination, each), bytes; suffixes K, M, G.
    /// Default: 2 × the sum of the last-level caches, at least 64 MiB.
    #[arg(long, value_name = "BYTES", value_parser = crate::args::parse_bytes)]
    size: Option<u64>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// The user's CPU list checked against the online CPUs and the affinity mask; `None` when
/// not given.
fn cpus_of(text: Option<&str>, machine: &topology::Topology) -> anyhow::Result<Option<Vec<u32>>> {
    let Some(text) = text else { return Ok(None) };
    let set = CpuSet::parse_list(text).map_err(|e| bad_input(format!("--cpus {text}: {e}")))?;
    if set.is_empty() {
        return Err(bad_input(format!("--cpus {text}: no CPU given")));
    }
    machine
        .check_cpus(&set)
        .map_err(|e| bad_input(format!("--cpus {text}: {e}")))?;
    let allowed = CpuSet::from_iter_u32(bench::ctx::allowed_cpus());
    let outside = set.difference(&allowed);
    if !outside.is_empty() {
        return Err(bad_input(format!(
            "--cpus {text}: CPU(s) {} are outside contend's affinity mask ({})",
            outside.to_list(),
            allowed.to_list()
        )));
    }
    Ok(Some(set.iter().collect()))
}

fn check_memory(bytes: u64, what: &str) -> anyhow::Result<()> {
    if let Some(avail) = bench::mem::available_bytes() {
        if bytes > avail / 10 * 9 {
            return Err(bad_input(format!(
                "{what}: {} MiB needed, more than the memory available ({} MiB)",
                bytes >> 20,
                avail >> 20
            )));
        }
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        MemCommand::Stream(a) => stream(a),
        MemCommand::Generate(a) => generate(a),
    }
}

fn stream(args: StreamArgs) -> anyhow::Result<()> {
    let machine = topology::Topology::live()?;
    if args.nt && !mem::NT_AVAILABLE {
        return Err(bad_input(
            "--nt: explicit non-temporal stores are built for x86-64 only",
        ));
    }
    if args.ntimes < 2 {
        return Err(bad_input(
            "--ntimes must be at least 2 (the first run is not counted)",
        ));
    }
    if args.threads == Some(0) {
        return Err(bad_input("--threads must be at least 1"));
    }
    let cpus = cpus_of(args.cpus.as_deref(), &machine)?.unwrap_or_else(bench::ctx::allowed_cpus);
    let threads = args.threads.unwrap_or(cpus.len());
    let placed: Vec<u32> = (0..threads).map(|t| cpus[t % cpus.len()]).collect();
    let llc = mem::llc_total_kib(&machine);
    let mut notes = Vec::new();
    let bytes = match args.size {
        Some(b) if b < 64 << 10 => {
            return Err(bad_input(format!(
                "--size {b}: give at least 64K per array (8 192 elements)"
            )));
        }
        Some(b) => {
            if let Some(l) = llc.filter(|&l| b < 4 * l * 1024) {
                notes.push(format!(
                    "--size {} MiB is under 4 × the last-level caches ({} KiB): the rates include cache hits",
                    b >> 20,
                    l
                ));
            }
            b
        }
        None => (4 * llc.unwrap_or(0) * 1024).max(64 << 20),
    };
    check_memory(3 * bytes, "--size (three arrays)")?;
    let elements = (bytes / 8) as usize;
    let bar = crate::ui::progress_bar(u64::from(args.ntimes) * 4, "kernel runs");
    let cfg = StreamConfig {
        elements,
        cpus: placed,
        nt: args.nt,
        ntimes: args.ntimes,
    };
    let result = mem::stream(&cfg, &mut |k| {
        bar.set_message(k.to_string());
        bar.inc(1);
    });
    bar.finish_and_clear();
    let mut result = result.map_err(|e| anyhow::anyhow!("{e}"))?;
    for n in &notes {
        crate::ui::note(n);
    }
    result.notes = notes;
    result.llc_total_bytes = llc.map(|l| l * 1024);
    if args.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(&result))?
        );
    } else {
        crate::output::out!("{}", report::bench_mem::render_stream(&result));
    }
    if !result.validation.passed {
        anyhow::bail!(
            "STREAM validation failed: mean relative errors a {:e}, b {:e}, c {:e} (limit {:e})",
            result.validation.relative_error[0],
            result.validation.relative_error[1],
            result.validation.relative_error[2],
            result.validation.epsilon
        );
    }
    Ok(())
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    let machine = topology::Topology::live()?;
    if !mem::NT_AVAILABLE {
        return Err(bad_input(
            "the generator's non-temporal stores are built for x86-64 only",
        ));
    }
    if let Some(r) = args.rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(bad_input(format!("--rate {r}: give a rate above 0 GB/s")));
    }
    if let Some(d) = args.duration.filter(|d| !(d.is_finite() && *d > 0.0)) {
        return Err(bad_input(format!("--duration {d}: give seconds above 0")));
    }
    let cpus = match cpus_of(args.cpus.as_deref(), &machine)? {
        Some(c) => c,
        None => bench::ctx::allowed_cpus()
            .last()
            .map(|&c| vec![c])
            .ok_or_else(|| anyhow::anyhow!("no CPU in contend's affinity mask"))?,
    };
    let llc = mem::llc_total_kib(&machine);
    let bytes = args
        .size
        .unwrap_or_else(|| (2 * llc.unwrap_or(0) * 1024).max(64 << 20));
    check_memory(
        2 * bytes * cpus.len() as u64,
        "--size (two buffers per thread)",
    )?;
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    let cfg = GenerateConfig {
        cpus: cpus.clone(),
        rate_gb_s: args.rate,
        duration: args.duration.map(Duration::from_secs_f64),
        elements_per_thread: (bytes / 8) as usize,
    };
    crate::ui::status(format_args!(
        "generating memory traffic on CPU(s) {} ({}), {}",
        CpuSet::list_in_order(&cpus),
        args.rate
            .map_or("flat out".to_string(), |r| format!("target {r} GB/s")),
        args.duration
            .map_or("until Ctrl-C".to_string(), |d| format!("for {d} s"))
    ));
    let bar = crate::ui::progress_bar(
        args.duration.map_or(0, |d| (d * 10.0).ceil() as u64),
        "× 0.1 s",
    );
    let result = mem::generate(&cfg, &STOP, &mut |t, b| {
        bar.set_position((t * 10.0) as u64);
        bar.set_message(format!("{:.2} GB/s so far", b as f64 / t.max(1e-9) / 1e9));
    });
    bar.finish_and_clear();
    let result = result.map_err(|e| anyhow::anyhow!("{e}"))?;
    if args.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report::json::Versioned::new(&result))?
        );
    } else {
        crate::output::out!("{}", report::bench_mem::render_generate(&result));
    }
    Ok(())
}
