//! The two MPIs the MPI tests run every example with, and the `exits:` lines the MPI examples
//! print (examples/mpi/README.md): when each rank left the barrier starting each round, and
//! how long it spent in the rounds' barriers, which bound how much scheduling on a loaded
//! machine can move a planted wait; their `truth:` lines, and the check that a report found
//! each planted wait (shared by the one-machine tests and those on the fake cluster).

use super::repo;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// An MPI implementation as Debian installs it beside the other (its tools carry a suffix).
pub struct Mpi {
    /// As the wrapper and contend name it.
    pub name: &'static str,
    pub mpicc: &'static str,
    pub mpif90: &'static str,
    /// The Debian packages that provide it (scripts/test.sh installs them).
    pub packages: &'static str,
    /// The launcher and the options each job gets.
    pub launcher: &'static [&'static str],
}

pub const OPEN_MPI: Mpi = Mpi {
    name: "Open MPI",
    mpicc: "mpicc.openmpi",
    mpif90: "mpif90.openmpi",
    packages: "openmpi-bin libopenmpi-dev",
    // 4 ranks on 2 CPUs need --oversubscribe; run-as-root is handled by contend.
    launcher: &[
        "mpirun.openmpi",
        "--oversubscribe",
        "--mca",
        "btl",
        "self,vader",
    ],
};

pub const MPICH: Mpi = Mpi {
    name: "MPICH",
    mpicc: "mpicc.mpich",
    mpif90: "mpif90.mpich",
    packages: "mpich libmpich-dev",
    launcher: &["mpirun.mpich"],
};

/// The MPI (its compiler and launcher) is installed (true); missing, the test fails under CI
/// and is skipped visibly elsewhere (false: the caller returns).
pub fn require(mpi: &Mpi) -> bool {
    [mpi.mpicc, mpi.launcher[0]]
        .iter()
        .all(|tool| testkit::require_command(tool, mpi.packages))
}

/// One rank's `exits:` line (examples/mpi).
#[derive(Debug)]
pub struct Exits {
    pub rank: u64,
    /// When it left the barrier starting each round, and the last one (CLOCK_MONOTONIC).
    pub moments: Vec<i64>,
    /// Its time inside the rounds' barriers.
    pub barrier_ns: u64,
}

/// Every rank's `exits:` line, in the order they appear. mpirun may join one rank's line to
/// another's, so entries are found anywhere in the text, not only at line starts.
pub fn exits(stdout: &str) -> Vec<Exits> {
    stdout
        .split("exits: rank=")
        .skip(1)
        .filter_map(|entry| {
            let (rank, rest) = entry.split_once(" ns=")?;
            let list: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ',')
                .collect();
            let moments = list
                .split(',')
                .map(|v| v.parse().ok())
                .collect::<Option<_>>()?;
            let after = rest[list.len()..].strip_prefix(" barrier_ns=")?;
            let barrier_ns: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
            Some(Exits {
                rank: rank.parse().ok()?,
                moments,
                barrier_ns: barrier_ns.parse().ok()?,
            })
        })
        .collect()
}

/// The planted rounds (0..count) in which a rank other than the planted cause left the round's
/// barrier no earlier than 5 % of the per-round delay before the planted rank would call:
/// that rank may have been the last to arrive.
fn displaced_rounds(t: &Truth, exits: &[Exits]) -> Vec<usize> {
    let Some(cause) = exits.iter().find(|e| e.rank == t.cause) else {
        return Vec::new();
    };
    let per_round = t.delay_ns as f64 / t.count.max(1) as f64;
    (0..t.count as usize)
        .filter(|&i| {
            let Some(&planted) = cause.moments.get(i) else {
                return false;
            };
            let calls_at = planted as f64 + 0.95 * per_round;
            exits
                .iter()
                .filter(|e| e.rank != t.cause)
                .any(|e| e.moments.get(i).is_some_and(|&m| m as f64 >= calls_at))
        })
        .collect()
}

/// Per barrier, how far apart the ranks left it (ns).
pub fn spreads(exits: &[Exits]) -> Vec<u64> {
    let n = exits.iter().map(|e| e.moments.len()).min().unwrap_or(0);
    (0..n)
        .map(|i| {
            let at = exits.iter().map(|e| e.moments[i]);
            (at.clone().max().unwrap() - at.min().unwrap()) as u64
        })
        .collect()
}

/// The wrapper `contend record --mpi` said every rank preloads (its notice `recording MPI calls
/// of every rank (IMPL; wrapper PATH[, built for this run only])` on stderr).
pub fn preloaded_wrapper(stderr: &str) -> std::path::PathBuf {
    let line = stderr
        .lines()
        .find(|l| l.contains("recording MPI calls of every rank"))
        .unwrap_or_else(|| panic!("no notice naming the wrapper in {stderr}"));
    let path = line
        .split_once("; wrapper ")
        .and_then(|(_, rest)| rest.split([',', ')']).next())
        .unwrap_or_else(|| panic!("no wrapper path in {line}"));
    std::path::PathBuf::from(path)
}

/// Builds the six MPI examples (examples/mpi/build.sh) with `mpi`'s compiler into `out`.
pub fn build_examples(mpi: &Mpi, out: &Path) {
    let status = Command::new("sh")
        .arg(repo("examples/mpi/build.sh"))
        .arg(mpi.mpicc)
        .arg(out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "building the examples with {}: {}",
        mpi.mpicc,
        String::from_utf8_lossy(&status.stderr)
    );
}

/// A `truth:` line of an MPI example: a wait it planted, as the program measured it.
#[derive(Debug)]
pub struct Truth {
    pub pattern: String,
    pub rank: u64,
    pub cause: u64,
    pub delay_ns: u64,
    pub count: u64,
    pub function: String,
}

/// How far the found total of a planted wait may be from the truth: the larger of `relative`
/// of it and `floor_ns`, plus how far apart the ranks left the barriers that started the
/// planted rounds (see [`check`]).
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    pub relative: f64,
    pub floor_ns: u64,
}

impl Tolerance {
    /// Ranks on one machine, on one clock.
    pub const ONE_HOST: Tolerance = Tolerance {
        relative: 0.05,
        floor_ns: 0,
    };
    /// Ranks on hosts of their own, clocks hours apart and aligned by the analysis (issue 20).
    pub const HOSTS: Tolerance = Tolerance {
        relative: 0.10,
        floor_ns: 2_000_000,
    };
}

/// The `truth:` lines of an example's output.
pub fn truths(stdout: &str) -> Vec<Truth> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("truth: "))
        .map(|l| {
            let field = |k: &str| {
                l.split(' ')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                    .unwrap_or_else(|| panic!("no {k} in truth line `{l}`"))
                    .to_string()
            };
            Truth {
                pattern: field("pattern"),
                rank: field("rank").parse().unwrap(),
                cause: field("cause").parse().unwrap(),
                delay_ns: field("delay_ns").parse().unwrap(),
                count: field("count").parse().unwrap(),
                function: field("function"),
            }
        })
        .collect()
}

/// The source an example is built from (examples/mpi/build.sh): poll_testany is poll_test.c
/// built with -DPOLL_TESTANY; the others are their own.
pub fn source_of(example: &str) -> &str {
    match example {
        "poll_testany" => "poll_test",
        other => other,
    }
}

/// Every planted wait found as planted, at a call site in the example's source and in the
/// function it was planted in; an `Err` says what was off.
///
/// How much: within `tolerance` of what the program measured ([`Tolerance::ONE_HOST`]: 5 %),
/// plus how far apart the ranks left the
/// barriers that started the planted rounds (`exits`). A planted wait is the time from one
/// rank's call to another's, both made right after such a barrier: a rank kept off the CPU
/// there (busy-polling ranks beside other load on 2 CPUs) leaves the barrier late, and the
/// wait it causes or suffers grows or shrinks by as much, which the programs' own sleep
/// measurement cannot see. Unplanted waiting: under 10 % of the planted, plus the time the
/// ranks spent in the rounds' barriers (as they measured it), where all of it happens; on a
/// loaded machine a polling rank that yields its CPU may need many time slices of other
/// programs to get through a call.
pub fn check(
    mpi: &Mpi,
    example: &str,
    stdout: &str,
    exits: &[Exits],
    report: &Value,
    tolerance: Tolerance,
) -> Result<(), String> {
    let truths = truths(stdout);
    let spreads = spreads(exits);
    if truths.is_empty() {
        return Err(format!("{example}: no truth lines in\n{stdout}"));
    }
    let m = &report["mpi"];
    let instances = m["waits"]["instances"].as_array().unwrap();
    let names = m["site_names"].as_array().unwrap();
    let planted: u64 = truths.iter().map(|t| t.delay_ns).sum();
    let mut unplanted = 0u64;
    let name = mpi.name;
    // Waiting before the first planted wait is the start-up skew of MPI_Init (absorbed by each
    // example's first barrier), not part of the measured loop.
    let mut loop_start = u64::MAX;
    let mut excused_starts: Vec<u64> = Vec::new();
    for t in &truths {
        // The planted instances are the count largest of this pattern, waiter and cause; any
        // others (the start-up barrier's microseconds) are unplanted.
        let mut found: Vec<&Value> = instances
            .iter()
            .filter(|i| {
                i["pattern"] == t.pattern.as_str() && i["rank"] == t.rank && i["cause"] == t.cause
            })
            .collect();
        found.sort_by_key(|i| std::cmp::Reverse(i["wait_ns"].as_u64().unwrap()));
        // Rounds where another rank may have come later than the planted one: kept off the CPU
        // after the barrier that started the round (busy-polling ranks beside other load on 2
        // CPUs), it left that barrier no earlier than the planted rank's delay after it, by the
        // programs' own clocks. There the analysis rightly names that rank; such a round's
        // instance may carry either cause.
        let displaced = displaced_rounds(t, exits);
        let need = t.count.saturating_sub(displaced.len() as u64);
        if (found.len() as u64) < need {
            // Every instance of this waiter and pattern, whatever its cause, and the exits:
            // what a failure under load needs to be read.
            let any_cause: Vec<(u64, u64, u64)> = instances
                .iter()
                .filter(|i| i["pattern"] == t.pattern.as_str() && i["rank"] == t.rank)
                .map(|i| {
                    let n = |k: &str| i[k].as_u64().unwrap_or(u64::MAX);
                    (n("cause"), n("start_ns"), n("wait_ns"))
                })
                .collect();
            return Err(format!(
                "{name} {example}: {t:?}: only {} instance(s) (rounds another rank may have \
                 caused: {displaced:?}; this waiter's instances as (cause, start, wait): \
                 {any_cause:?}; exits: {exits:?}): {found:?}",
                found.len()
            ));
        }
        let used = (found.len() as u64).min(t.count);
        let rest = found.split_off(used as usize);
        // The displaced rounds' instances named another cause: neither planted nor unplanted.
        let mut excused: Vec<&Value> = instances
            .iter()
            .filter(|i| {
                i["pattern"] == t.pattern.as_str() && i["rank"] == t.rank && i["cause"] != t.cause
            })
            .collect();
        excused.sort_by_key(|i| std::cmp::Reverse(i["wait_ns"].as_u64().unwrap()));
        excused.truncate((t.count - used) as usize);
        excused_starts.extend(excused.iter().map(|i| i["start_ns"].as_u64().unwrap()));
        for i in &found {
            loop_start = loop_start.min(i["start_ns"].as_u64().unwrap());
        }
        unplanted += rest
            .iter()
            .map(|i| i["wait_ns"].as_u64().unwrap())
            .sum::<u64>();
        let total: u64 = found.iter().map(|i| i["wait_ns"].as_u64().unwrap()).sum();
        // Planted in every round, so in the rounds started by barriers 0..count.
        let skew: u64 = spreads.iter().take(t.count as usize).sum();
        let delay = t.delay_ns as f64 * used as f64 / t.count as f64;
        let off = (total as f64 - delay).abs();
        let own = (tolerance.relative * delay).max(tolerance.floor_ns as f64);
        let allowed = own + skew as f64;
        if off > allowed {
            return Err(format!(
                "{name} {example}: {t:?}: the {} largest instances total {total} ns ({:.1} % \
                 off; allowed {own:.0} ns ({tolerance:?}) + {skew} ns the ranks left the \
                 rounds' barriers apart: {spreads:?})",
                t.count,
                off / t.delay_ns as f64 * 100.0
            ));
        }
        for i in found {
            let site = names[i["site"].as_u64().unwrap() as usize]
                .as_str()
                .unwrap();
            if !site.contains(&format!("{}.c:", source_of(example))) {
                return Err(format!("{name} {example}: wait at `{site}`"));
            }
            // The call the rank waited in, at that site.
            let calls = m["calls"].as_array().unwrap();
            if !calls
                .iter()
                .any(|c| c["function"] == t.function.as_str() && c["site"] == i["site"])
            {
                return Err(format!("{name} {example}: no {} at `{site}`", t.function));
            }
        }
    }
    // Nothing else of any size: the remaining instances are barriers' microseconds (and, on
    // a VM, the odd time slice the hypervisor took).
    let others: Vec<&Value> = instances
        .iter()
        .filter(|i| {
            !truths.iter().any(|t| {
                i["pattern"] == t.pattern.as_str() && i["rank"] == t.rank && i["cause"] == t.cause
            })
        })
        .filter(|i| !i["pattern"].as_str().unwrap().ends_with("completion"))
        .filter(|i| i["start_ns"].as_u64().unwrap() >= loop_start)
        .filter(|i| !excused_starts.contains(&i["start_ns"].as_u64().unwrap()))
        .collect();
    unplanted += others
        .iter()
        .map(|i| i["wait_ns"].as_u64().unwrap())
        .sum::<u64>();
    let in_barriers: u64 = exits.iter().map(|e| e.barrier_ns).sum();
    if unplanted as f64 >= 0.10 * planted as f64 + in_barriers as f64 {
        return Err(format!(
            "{name} {example}: {unplanted} ns of unplanted waiting vs {planted} planted \
             (allowed 10 % + the {in_barriers} ns the ranks spent in the rounds' barriers): \
             {others:?}"
        ));
    }
    if m["missing_ranks"] != Value::Array(vec![]) {
        return Err(format!(
            "{name} {example}: missing ranks {}",
            m["missing_ranks"]
        ));
    }
    let counts = &m["waits"]["counts"];
    if counts["unmatched_sends"] != 0 || counts["unmatched_receives"] != 0 {
        return Err(format!("{name} {example}: unmatched messages: {counts}"));
    }
    Ok(())
}
