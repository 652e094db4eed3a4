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
    let mut counts = Vec::new();
    let mut notes = Vec::new();
    for &m in threads {
        counts.push((m, core_counts(cores, m, cores_per_socket, numa, available)?));
        if m > available {
            notes.push(format!(
                "{m} threads but {available} core(s): the m-core configuration runs on {available} cores (more threads than cores)"
            ));
        }
    }
    Ok(Planned {
        order,
        cores_per_socket,
        numa,
        counts,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(p.counts, vec![(8, vec![1, 4, 8]), (2, vec![1, 2])]);
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
        assert_eq!(p.counts, vec![(4, vec![1, 2])]);
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
}
