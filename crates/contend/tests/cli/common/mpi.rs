//! The two MPIs the MPI tests run every example with, and the `exits:` lines the MPI examples
//! print (examples/mpi/README.md): when each rank left the barrier starting each round, and
//! how long it spent in the rounds' barriers, which bound how much scheduling on a loaded
//! machine can move a planted wait.

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
