//! The plan of a `contend scale` experiment: which thread counts run on which core counts, and
//! on which CPUs, as a pure function of the topology (so NUMA plans are tested on machines
//! this one is not).

/// `command` with every `{threads}` replaced by the thread count `m`.
pub fn substitute(command: &[String], m: u32) -> Vec<String> {
    command
        .iter()
        .map(|a| a.replace("{threads}", &m.to_string()))
        .collect()
}

/// The core counts for thread count `m`: the user's list (`m` replaced) or 1, one socket's
/// cores (NUMA, when m exceeds them) and m; capped at the CPUs there are.
fn core_counts(
    spec: &[String],
    m: u32,
    cores_per_socket: u32,
    numa: bool,
    available: u32,
) -> Result<Vec<u32>, String> {
    let mut out: Vec<u32> = if spec.is_empty() {
        let mut v = vec![1, m.min(available)];
        if numa && m > cores_per_socket && cores_per_socket > 1 {
            v.push(cores_per_socket);
        }
        v
    } else {
        spec.iter()
            .map(|s| {
                let t = s.trim();
                if t == "m" || t == "M" {
                    Ok(m)
                } else {
                    t.parse::<u32>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                        format!("--cores: `{t}` is not a core count (a number ≥ 1, or m)")
                    })
                }
            })
            .collect::<Result<_, _>>()?
    };
    if let Some(&n) = out.iter().find(|&&n| n > available) {
        return Err(format!(
            "--cores: {n} cores asked for, but this machine has {available} core(s) to give one thread each"
        ));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// What `scale` will run on a machine: for each thread count, its core counts; the CPUs are
/// the first n of `order`.
#[derive(Debug)]
pub struct Planned {
    /// The order CPUs are handed out in; a configuration of n cores runs on the first n.
    pub order: Vec<u32>,
    pub cores_per_socket: u32,
    pub numa: bool,
    /// Each thread count with its core counts.
    pub counts: Vec<(u32, Vec<u32>)>,
    pub notes: Vec<String>,
}

/// Plans the runs from the topology (a value, so NUMA plans are tested on machines this one
/// is not). One thread per core: the fill order's first CPUs are one per core.
/// The most threads `contend scale` runs per online CPU. The model compares M threads on 1 core
/// with M on M cores; past 64 threads a CPU the runs measure the scheduler's time slicing more
/// than the program's scaling, and every thread costs the recorder a stream (and, with
/// --locks, a 4 MiB event ring: 64 a CPU is already 256 MiB a CPU). A bound that follows the
/// machine, so a big machine is not refused what it can hold.
pub const MAX_THREADS_PER_CPU: u32 = 64;

pub fn plan_runs(
    machine: &topology::Topology,
    fill: topology::FillOrder,
    threads: &[u32],
    cores: &[String],
) -> Result<Planned, String> {
    let order = machine.fill_order(fill);
    // One thread per core: socket-first and spread give out one CPU of every core before any
    // core's second; compact gives siblings first, so there every online CPU counts.
    let available = if fill == topology::FillOrder::Compact {
        order.len() as u32
    } else {
        (machine.cores.len().max(1)).min(order.len()) as u32
    };
    let first_package = machine.cores.first().map(|c| c.package);
    let cores_per_socket = machine
        .cores
        .iter()
        .filter(|c| Some(c.package) == first_package)
        .count() as u32;
    let numa = machine.nodes.len() > 1;
    let online = u32::try_from(order.len().max(1)).unwrap_or(u32::MAX);
    let most = MAX_THREADS_PER_CPU.saturating_mul(online);
    if let Some(&m) = threads.iter().find(|&&m| m > most) {
        return Err(format!(
            "--threads {m}: at most {most} on this machine ({MAX_THREADS_PER_CPU} per online CPU, {online} online): more would measure the scheduler's time slicing, not the program's scaling"
        ));
    }
    let mut counts: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut notes = Vec::new();
    for &m in threads {
        counts.push((m, core_counts(cores, m, cores_per_socket, numa, available)?));
        if m > available {
            notes.push(format!(
                "{m} threads but {available} core(s): the m-core configuration runs on {available} cores (more threads than cores)"
            ));
        }
    }
    // The one-thread baseline (1 thread on 1 core) is in every plan: one short run a round,
    // checking the m-threads-on-one-core baseline. Asked for already, it runs once.
    match counts.iter_mut().find(|(m, _)| *m == 1) {
        Some((_, c)) if !c.contains(&1) => {
            c.insert(0, 1);
        }
        Some(_) => {}
        None => counts.push((1, vec![1])),
    }
    Ok(Planned {
        order,
        cores_per_socket,
        numa,
        counts,
        notes,
    })
}

/// One CPU's times from a `/proc/stat` `cpuN` line, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    /// Time the hypervisor gave this virtual CPU's physical CPU to another guest.
    pub steal: u64,
}

/// The per-CPU lines of `/proc/stat` (`cpu0 …`, not the `cpu ` total), by CPU number.
pub fn per_cpu_ticks(text: &str) -> std::collections::BTreeMap<u32, CpuTicks> {
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        // `cpu0 …`, not the machine's total `cpu  …`.
        let Some(rest) = line
            .strip_prefix("cpu")
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let Some(cpu) = fields.next().and_then(|c| c.parse::<u32>().ok()) else {
            continue;
        };
        let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal …
        out.insert(
            cpu,
            CpuTicks {
                busy: at(0) + at(1) + at(2) + at(5) + at(6),
                steal: at(7),
            },
        );
    }
    out
}

/// What else used `cpus` during a run, from `/proc/stat` before and after: (steal ns, CPU ns
/// taken by other processes). Others = the CPUs' busy time − the program's CPU time (it is
/// pinned to `cpus`) − the recorder's own (`own_ns`, wherever it ran), never below 0: an
/// upper bound on what other processes took (ticks are coarse: ±1 tick per CPU).
pub fn disturbance(
    before: &std::collections::BTreeMap<u32, CpuTicks>,
    after: &std::collections::BTreeMap<u32, CpuTicks>,
    cpus: &[u32],
    tick_ns: f64,
    program_ns: f64,
    own_ns: f64,
) -> (f64, f64) {
    let (mut busy, mut steal) = (0u64, 0u64);
    for cpu in cpus {
        if let (Some(b), Some(a)) = (before.get(cpu), after.get(cpu)) {
            busy += a.busy.saturating_sub(b.busy);
            steal += a.steal.saturating_sub(b.steal);
        }
    }
    let others = (busy as f64 * tick_ns - program_ns - own_ns).max(0.0);
    (steal as f64 * tick_ns, others)
}

/// `--repeat N` or `MIN..MAX`: the fewest and most rounds.
pub fn parse_repeat(text: &str) -> Result<(u32, u32), String> {
    // Each round is a recorded run of every configuration: beyond this is no measurement plan.
    const MOST_ROUNDS: u32 = 10_000;
    let bad = || {
        format!("--repeat `{text}`: give a number of rounds (5) or a range MIN..MAX (3..10), each 1 to {MOST_ROUNDS}")
    };
    let number = |t: &str| {
        t.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MOST_ROUNDS).contains(n))
            .ok_or_else(bad)
    };
    match text.split_once("..") {
        Some((lo, hi)) => {
            let (lo, hi) = (number(lo)?, number(hi)?);
            if lo > hi {
                return Err(format!("--repeat `{text}`: MIN is above MAX"));
            }
            Ok((lo, hi))
        }
        None => number(text).map(|n| (n, n)),
    }
}

/// CPU time this process has used so far (every thread: the recorder's sampler and drainers).
pub fn own_cpu_ns() -> f64 {
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a pointer to a local.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The per-CPU lines of /proc/stat; None when it cannot be read (the disturbance is then not
/// measured). Bounded: a machine's /proc/stat is a few KiB per CPU.
pub fn proc_stat() -> Option<std::collections::BTreeMap<u32, CpuTicks>> {
    use std::io::Read;
    const LIMIT: u64 = 16 << 20;
    let mut text = String::new();
    std::fs::File::open("/proc/stat")
        .ok()?
        .take(LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    Some(per_cpu_ticks(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_work_and_steal_are_read_from_per_cpu_ticks() {
        let before = per_cpu_ticks(
            "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 100 0 10 500 0 0 0 5 0 0\ncpu1 200 0 20 400 0 0 0 0 0 0\nintr 1 2\n",
        );
        let after = per_cpu_ticks(
            "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 150 0 20 500 0 1 1 9 0 0\ncpu1 290 5 25 400 0 0 0 0 0 0\n",
        );
        assert_eq!(before.len(), 2);
        assert_eq!(
            after[&0],
            CpuTicks {
                busy: 172,
                steal: 9
            }
        );
        // CPU 0 busy 62 ticks, CPU 1 100; at 10 ms a tick, 1.62 s; the program took 1.2 s and
        // the recorder 0.1 s: 0.32 s by others. Steal 4 ticks = 40 ms.
        let (steal, others) = disturbance(&before, &after, &[0, 1], 1e7, 1.2e9, 0.1e9);
        assert!((steal - 4e7).abs() < 1.0, "{steal}");
        assert!((others - 0.32e9).abs() < 1.0, "{others}");
        // Only CPU 0: 0.62 s busy, less than the program's: 0, never negative.
        let (_, others) = disturbance(&before, &after, &[0], 1e7, 1.2e9, 0.0);
        assert_eq!(others, 0.0);
    }

    #[test]
    fn core_counts_default_and_given() {
        assert_eq!(core_counts(&[], 4, 8, false, 8).unwrap(), vec![1, 4]);
        assert_eq!(core_counts(&[], 16, 8, true, 16).unwrap(), vec![1, 8, 16]);
        // More threads than CPUs: the m-core run uses every CPU.
        assert_eq!(core_counts(&[], 4, 2, false, 2).unwrap(), vec![1, 2]);
        let given = ["1".to_string(), "m".to_string()];
        assert_eq!(core_counts(&given, 2, 2, false, 2).unwrap(), vec![1, 2]);
        assert!(core_counts(&["3".to_string()], 2, 2, false, 2)
            .unwrap_err()
            .contains("2 core(s)"));
        assert!(core_counts(&["x".to_string()], 2, 2, false, 2)
            .unwrap_err()
            .contains("`x`"));
    }

    #[test]
    fn a_two_socket_numa_machine_adds_one_socket_and_fills_cores_first() {
        // 2 packages × 4 cores × 2 threads, one node per package: CPUs 0-7 on package 0.
        let machine = topology::Topology::synthetic("2x4x2").unwrap();
        let p = plan_runs(&machine, topology::FillOrder::SocketFirst, &[8, 2], &[]).unwrap();
        assert!(p.numa);
        assert_eq!(p.cores_per_socket, 4);
        assert_eq!(
            p.counts,
            vec![(8, vec![1, 4, 8]), (2, vec![1, 2]), (1, vec![1])]
        );
        // One thread per core: the first 8 CPUs handed out are on 8 different cores, the
        // first 4 of them on package 0.
        let first: Vec<u32> = p.order[..8].to_vec();
        let core_of = |cpu: u32| {
            machine
                .cores
                .iter()
                .position(|c| c.cpus.contains(cpu))
                .unwrap()
        };
        let mut cores: Vec<usize> = first.iter().map(|&c| core_of(c)).collect();
        cores.sort_unstable();
        cores.dedup();
        assert_eq!(cores.len(), 8, "{first:?}");
        assert!(first[..4]
            .iter()
            .all(|&c| machine.cores[core_of(c)].package == machine.cores[0].package));
        assert!(p.notes.is_empty());
    }

    #[test]
    fn a_uma_machine_runs_one_and_m_cores_and_says_when_threads_exceed_cpus() {
        let machine = topology::Topology::synthetic("1x2x1").unwrap();
        let p = plan_runs(&machine, topology::FillOrder::SocketFirst, &[4], &[]).unwrap();
        assert!(!p.numa);
        assert_eq!(p.counts, vec![(4, vec![1, 2]), (1, vec![1])]);
        // One thread asked for: its one-core run is the one-thread baseline, run once.
        let fill = topology::FillOrder::SocketFirst;
        let one = plan_runs(&machine, fill, &[1, 2], &[]).unwrap();
        assert_eq!(one.counts, vec![(1, vec![1]), (2, vec![1, 2])]);
        let given = ["2".to_string()];
        let one = plan_runs(&machine, fill, &[1, 2], &given).unwrap();
        assert_eq!(one.counts, vec![(1, vec![1, 2]), (2, vec![2])]);
        assert!(
            p.notes[0].contains("4 threads but 2 core(s)"),
            "{:?}",
            p.notes
        );
        let err = plan_runs(
            &machine,
            topology::FillOrder::SocketFirst,
            &[2],
            &["1".into(), "3".into()],
        )
        .unwrap_err();
        assert!(err.contains("3 cores asked for"), "{err}");
    }

    #[test]
    fn thread_counts_are_bounded_by_the_machine() {
        let machine = topology::Topology::synthetic("1x2x1").unwrap();
        let fill = topology::FillOrder::SocketFirst;
        assert!(plan_runs(&machine, fill, &[128], &[]).is_ok());
        let err = plan_runs(&machine, fill, &[2, 129], &[]).unwrap_err();
        assert!(
            err.starts_with(
                "--threads 129: at most 128 on this machine (64 per online CPU, 2 online)"
            ),
            "{err}"
        );
        let err = plan_runs(&machine, fill, &[u32::MAX], &[]).unwrap_err();
        assert!(
            err.starts_with("--threads 4294967295: at most 128"),
            "{err}"
        );
    }

    #[test]
    fn the_placeholder_is_replaced_everywhere() {
        let cmd: Vec<String> = ["./app", "-t", "{threads}", "--name=run{threads}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(substitute(&cmd, 4), vec!["./app", "-t", "4", "--name=run4"]);
    }

    #[test]
    fn repeat_is_a_count_or_a_range() {
        assert_eq!(parse_repeat("5"), Ok((5, 5)));
        assert_eq!(parse_repeat("3..10"), Ok((3, 10)));
        assert_eq!(parse_repeat(" 2 .. 2 "), Ok((2, 2)));
        for bad in ["0", "x", "3..", "..4", "1..10001", "-1", "3...5"] {
            let e = parse_repeat(bad).unwrap_err();
            assert!(e.starts_with(&format!("--repeat `{bad}`: give")), "{e}");
        }
        assert_eq!(
            parse_repeat("5..3"),
            Err("--repeat `5..3`: MIN is above MAX".to_string())
        );
    }
}
