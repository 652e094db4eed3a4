//! `contend record --mpi` and `contend report` when things go wrong (issue 5, "Bad input and
//! failure"), and Fortran programs:
//!
//! - no MPI installed: the Debian packages that provide one are named (exit 2);
//! - a program launched by the other MPI's mpirun: refused before it runs (exit 2);
//! - a wrapper built for another MPI than the one the ranks load (preloaded by hand): the job
//!   runs as without it, each rank leaves `mpi-refused-PID.txt`, and `contend report` says the
//!   ranks were not recorded;
//! - a rank killed (SIGKILL) or a job aborted (MPI_Abort) under both MPIs: the report analyses
//!   what every rank did up to then and names the ranks that ended early;
//! - messages whose partner is not in the traces: counted and listed, never paired by guess;
//! - rank traces in two hosts' run directories merged with `--mpi-from`; a rank given twice is
//!   refused;
//! - an MPMD job (`mpirun ... ./a : ... ./b`) with its second rank in a time namespace 1 s
//!   ahead (issue 20): it completes, both ranks are recorded and aligned, the late sender found;
//! - examples/mpi/late_sender.f90 with Open MPI (the wrapper's Fortran entry points) and MPICH
//!   (the C symbols): the late sender found within 5 %, at its line of the Fortran source.
//!
//! Needs Open MPI, MPICH and gfortran (`apt-get install openmpi-bin libopenmpi-dev mpich
//! libmpich-dev gfortran`). The machine has 2 CPUs: jobs run one at a time, at most 2 ranks, and
//! no absolute time is asserted (only the planted delays, against what the programs measured).
//!

use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::mpi::{exits, preloaded_wrapper, require, spreads, Mpi, MPICH, OPEN_MPI};
use crate::common::{output_within, repo, serial, show, text, CONTEND};
use std::time::Duration;

const PACKAGES: [&str; 4] = ["openmpi-bin", "libopenmpi-dev", "mpich", "libmpich-dev"];

/// The wrapper cache of these tests (kept between runs: contend rebuilds it when the sources
/// change).
fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mpi-failures-cache")
}

fn contend() -> Command {
    let mut c = Command::new(CONTEND);
    c.env("CONTEND_CACHE", cache());
    c
}

/// Compiles `src` (relative to the repository) with `compiler` into `out`.
fn build(compiler: &str, flags: &[&str], src: &str, out: &Path) -> PathBuf {
    let result = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(repo(src))
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(
        result.status.success(),
        "{compiler} {src}: {}",
        text(&result.stderr)
    );
    out.to_path_buf()
}

/// examples/mpi/NAME.c built with `mpi`'s mpicc, as examples/mpi/build.sh does.
fn build_example(mpi: &Mpi, name: &str, dir: &Path) -> PathBuf {
    let out = dir.join(format!("{name}-{}", mpi.mpicc));
    build(
        mpi.mpicc,
        &["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror"],
        &format!("examples/mpi/{name}.c"),
        &out,
    )
}

/// `contend record --mpi` of `program args` on 2 ranks.
fn record(mpi: &Mpi, run: &Path, program: &Path, args: &[&str]) -> Output {
    contend()
        .args(["record", "--mpi", "--interval", "0", "-o"])
        .arg(run)
        .arg("--")
        .args(mpi.launcher)
        .args(["-np", "2"])
        .arg(program)
        .args(args)
        .output()
        .unwrap()
}

fn report_json<S: AsRef<OsStr>>(args: &[S]) -> Value {
    let out = contend()
        .args(["report", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "contend report --json: {}",
        show(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn report_text<S: AsRef<OsStr>>(args: &[S]) -> String {
    let out = contend().arg("report").args(args).output().unwrap();
    assert!(out.status.success(), "contend report: {}", show(&out));
    text(&out.stdout)
}

/// The rank streams a run directory holds.
fn rank_streams(run: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(run.join("streams"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("rank-"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The `truth:` line a program printed: (delay_ns, count).
fn truth(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("truth: pattern=late-sender rank=1 cause=0 "))
        .unwrap_or_else(|| panic!("no late-sender truth line in\n{stdout}"));
    let field = |k: &str| -> u64 {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in `{line}`"))
            .parse()
            .unwrap()
    };
    (field("delay_ns"), field("count"))
}

fn site_name(m: &Value, site: &Value) -> String {
    site.as_u64()
        .and_then(|s| m["site_names"][s as usize].as_str())
        .unwrap_or("(no site)")
        .to_string()
}

/// The planted Late Sender (rank 1 waiting for rank 0 in MPI_Recv): the `count` largest such
/// instances total the truth within 5 % plus how far apart the ranks left the barriers that
/// started the planted rounds (the programs' `exits:` lines: a rank kept off the CPU there
/// moves the wait by as much, unseen by the sleeper's own measurement), each at a line of
/// `source`.
fn check_late_sender(report: &Value, stdout: &str, source: &str) -> Result<(), String> {
    check_late_sender_ahead(report, stdout, source, 0)
}

/// [`check_late_sender`] for a job whose rank 1 reads CLOCK_MONOTONIC `rank1_ahead_ns` ahead
/// of rank 0's (a time namespace): its `exits:` moments are moved back by as much.
///
/// A planted round in which rank 1 left the barrier no earlier than 95 % of the per-round
/// delay after rank 0 did (kept off its CPU that long) posted its receive after the send: the
/// program's own clocks say it waited for nothing, so fewer instances are required.
fn check_late_sender_ahead(
    report: &Value,
    stdout: &str,
    source: &str,
    rank1_ahead_ns: i64,
) -> Result<(), String> {
    let (delay_ns, count) = truth(stdout);
    let mut exits = exits(stdout);
    for e in exits.iter_mut().filter(|e| e.rank == 1) {
        for m in &mut e.moments {
            *m -= rank1_ahead_ns;
        }
    }
    let per_round = delay_ns as f64 / count.max(1) as f64;
    let moments = |rank: u64| exits.iter().find(|e| e.rank == rank).map(|e| &e.moments);
    let displaced: Vec<usize> = match (moments(0), moments(1)) {
        (Some(sender), Some(receiver)) => (0..count as usize)
            .filter(|&i| match (sender.get(i), receiver.get(i)) {
                (Some(&s), Some(&r)) => (r - s) as f64 >= 0.95 * per_round,
                _ => false,
            })
            .collect(),
        _ => Vec::new(),
    };
    let m = &report["mpi"];
    let mut found: Vec<&Value> = m["waits"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["pattern"] == "late-sender" && i["rank"] == 1 && i["cause"] == 0)
        .collect();
    found.sort_by_key(|i| std::cmp::Reverse(i["wait_ns"].as_u64().unwrap()));
    let required = count - displaced.len() as u64;
    if (found.len() as u64) < required {
        return Err(format!(
            "{count} late senders planted ({} of them displaced: rounds {displaced:?} rank 1 \
             started at least the delay late), {} found: {found:?}; exits: {exits:?}",
            displaced.len(),
            found.len()
        ));
    }
    found.truncate(count as usize);
    let total: u64 = found.iter().map(|i| i["wait_ns"].as_u64().unwrap()).sum();
    let spreads = spreads(&exits);
    let skew: u64 = spreads.iter().take(count as usize).sum();
    let off = (total as f64 - delay_ns as f64).abs();
    if !displaced.is_empty() {
        // The planted total no longer describes what the program waited: the rounds' count
        // and sites are still checked.
        eprintln!(
            "late senders total not compared: rounds {displaced:?} were displaced ({spreads:?})"
        );
    } else if off > 0.05 * delay_ns as f64 + skew as f64 {
        return Err(format!(
            "late senders total {total} ns, planted {delay_ns} ns ({:.1} % off; allowed 5 % + \
             {skew} ns the ranks left the rounds' barriers apart: {spreads:?})",
            off / delay_ns as f64 * 100.0
        ));
    }
    for i in found {
        let site = site_name(m, &i["site"]);
        if !site.contains(&format!("{source}:")) {
            return Err(format!("a late sender at `{site}`, not in {source}"));
        }
        let recv_there = m["calls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["function"] == "MPI_Recv" && c["site"] == i["site"]);
        if !recv_there {
            return Err(format!("no MPI_Recv at `{site}`"));
        }
    }
    Ok(())
}

/// The line of `src` (relative to the repository) that contains `needle`, 1-based.
fn line_of(src: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(repo(src)).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in {src}"))
        + 1
}

// ---------------------------------------------------------------------------------- no MPI

/// A PATH without any MPI (an empty directory): contend cannot build its wrapper and says
/// which Debian packages provide an MPI, before starting anything.
#[test]
fn without_mpi_record_names_the_packages_that_provide_one() {
    if !require(&OPEN_MPI) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    // A program built where Open MPI was installed (its packages must be named; naming
    // MPICH's too is allowed), and one without MPI at all (both MPIs' packages).
    let linked = build_example(&OPEN_MPI, "late_sender", dir.path());
    for (what, program, packages) in [
        (
            "a program linked with Open MPI",
            linked.as_path(),
            &PACKAGES[..2],
        ),
        (
            "a program without MPI",
            Path::new("/bin/true"),
            &PACKAGES[..],
        ),
    ] {
        let run = dir.path().join("run");
        let out = Command::new(CONTEND)
            .env("PATH", &empty)
            .env("CONTEND_CACHE", dir.path().join("cache"))
            .args(["record", "--mpi", "--interval", "0", "-o"])
            .arg(&run)
            .args(["--", "mpirun", "-np", "2"])
            .arg(program)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", show(&out));
        for package in packages {
            assert!(
                err.contains(package),
                "{what}: the error does not name {package}: {err}"
            );
        }
        assert!(err.contains("install"), "{what}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{what}: something ran: {}",
            show(&out)
        );
        assert!(rank_streams(&run).is_empty());
        let _ = std::fs::remove_dir_all(&run);
    }
}

/// What contend should say when the launcher itself is missing, or when only the MPI's
/// compiler is installed; and that a refused recording leaves no run directory behind.
#[test]
fn without_an_mpi_launcher_record_names_the_launcher_and_its_package() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    // Only the compiler (and what it runs): openmpi's runtime without its mpirun.
    let compiler_only = dir.path().join("compiler-only-path");
    std::fs::create_dir(&compiler_only).unwrap();
    for tool in ["mpicc.openmpi", "gcc", "cc", "as", "ld"] {
        let real = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("no {tool}"));
        std::os::unix::fs::symlink(
            std::fs::canonicalize(real).unwrap(),
            compiler_only.join(tool),
        )
        .unwrap();
    }
    let ompi = build_example(&OPEN_MPI, "late_sender", dir.path());
    let mpich = build_example(&MPICH, "late_sender", dir.path());
    for (what, path, program, package) in [
        ("MPICH program, no MPI", &empty, &mpich, "mpich"),
        ("Open MPI program, no MPI", &empty, &ompi, "openmpi-bin"),
        (
            "Open MPI program, no mpirun",
            &compiler_only,
            &ompi,
            "openmpi-bin",
        ),
    ] {
        let run = dir.path().join("run");
        let out = Command::new(CONTEND)
            .env("PATH", path)
            .env("CONTEND_CACHE", dir.path().join("cache"))
            .args(["record", "--mpi", "--interval", "0", "-o"])
            .arg(&run)
            .args(["--", "mpirun", "-np", "2"])
            .arg(program)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", show(&out));
        assert!(err.contains("`mpirun`"), "{what}: {err}");
        assert!(err.contains(package), "{what}: {err}");
        assert!(
            !err.contains("launched by"),
            "{what}: a missing launcher is not another MPI's: {err}"
        );
        assert!(
            !run.exists(),
            "{what}: a refused recording left {}",
            run.display()
        );
    }
}

// ------------------------------------------------------------------ the other MPI's mpirun

/// A program built with one MPI started by the other's mpirun would run as N singletons:
/// contend refuses before starting anything, naming both MPIs.
#[test]
fn a_program_launched_by_the_other_mpis_mpirun_is_refused_before_it_runs() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    for (built, launched) in [(&MPICH, &OPEN_MPI), (&OPEN_MPI, &MPICH)] {
        let program = build_example(built, "late_sender", dir.path());
        let run = dir.path().join(format!("run-{}", built.mpicc));
        let out = record(launched, &run, &program, &["20", "1"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", show(&out));
        assert!(
            err.contains(&format!("linked with {}", built.name))
                && err.contains(&format!("launched by {}", launched.name))
                && err.contains(launched.launcher[0]),
            "the error should name both MPIs and the launcher: {err}"
        );
        assert!(
            !text(&out.stdout).contains("truth:"),
            "the program ran: {}",
            show(&out)
        );
        assert!(rank_streams(&run).is_empty());
    }
}

// ------------------------------------------------------- a wrapper built for the other MPI

/// The wrapper compiled by hand with `mpi`'s mpicc, as contend builds it.
fn build_wrapper(mpi: &Mpi, dir: &Path) -> PathBuf {
    build(
        mpi.mpicc,
        &["-O2", "-g", "-fPIC", "-shared", "-pthread"],
        "mpi/contend_mpi.c",
        &dir.join(format!("libcontend-mpi-{}.so", mpi.mpicc)),
    )
}

/// Runs `program args` on `ranks` ranks with `mpi`'s launcher, with `wrapper` preloaded into
/// every rank and recording into `out_dir` when given.
fn run_job(
    mpi: &Mpi,
    ranks: u32,
    program: &Path,
    args: &[&str],
    wrapper: Option<(&Path, &Path)>,
    extra_env: &[(&str, &str)],
) -> Output {
    let mut cmd = Command::new(mpi.launcher[0]);
    cmd.args(&mpi.launcher[1..])
        // As root, Open MPI's mpirun refuses without these (contend sets them itself).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let mut vars: Vec<(String, String)> = extra_env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some((lib, dir)) = wrapper {
        vars.push(("LD_PRELOAD".into(), lib.display().to_string()));
        vars.push(("CONTEND_MPI_DIR".into(), dir.display().to_string()));
    }
    for (k, v) in vars {
        if mpi.name == "Open MPI" {
            cmd.args(["-x", &format!("{k}={v}")]);
        } else {
            cmd.args(["-genv", &k, &v]);
        }
    }
    cmd.args(["-np", &ranks.to_string()])
        .arg(program)
        .args(args)
        .output()
        .unwrap()
}

/// The examples' output with what varies from run to run masked: the measured times, and
/// the order of lines from different ranks (the `exits:` lines of every rank).
fn masked(stdout: &[u8]) -> String {
    let mut lines: Vec<String> = text(stdout)
        .lines()
        .map(|line| {
            line.split(' ')
                .map(|w| match w.split_once('=') {
                    Some((k @ ("delay_ns" | "ns" | "barrier_ns"), _)) => format!("{k}=N"),
                    _ => w.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

/// The `mpi-refused-*.txt` files of `dir`, their text.
fn refusals(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("mpi-refused-"))
                .map(|e| std::fs::read_to_string(e.path()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// An MPICH job with the Open MPI build of the wrapper preloaded by hand, and the reverse:
/// the job's output and exit status are what they are without the wrapper, and each rank
/// says why it is not recorded, on stderr and in `mpi-refused-PID.txt`. Both ways the wrapper
/// notices: by default it finds the other MPI's library in the process at load time and starts
/// the rank again without itself; with that disabled (CONTEND_MPI_REEXECUTED=1) it checks the
/// loaded library at MPI_Init and passes every call through.
#[test]
fn a_wrapper_built_for_the_other_mpi_refuses_and_leaves_the_job_unchanged() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    for (job, foreign) in [(&MPICH, &OPEN_MPI), (&OPEN_MPI, &MPICH)] {
        let program = build_example(job, "late_sender", dir.path());
        let wrapper = build_wrapper(foreign, dir.path());
        let plain = run_job(job, 2, &program, &["20", "2"], None, &[]);
        assert!(plain.status.success(), "{}", show(&plain));
        for (how, env) in [
            ("re-executed without the wrapper", &[][..]),
            (
                "checked at MPI_Init",
                &[("CONTEND_MPI_REEXECUTED", "1")][..],
            ),
        ] {
            let what = format!("{} job, {} wrapper, {how}", job.name, foreign.name);
            let out_dir = dir.path().join(format!("out-{}-{}", job.mpicc, env.len()));
            let wrapped = run_job(
                job,
                2,
                &program,
                &["20", "2"],
                Some((&wrapper, &out_dir)),
                env,
            );
            assert_eq!(
                wrapped.status.code(),
                plain.status.code(),
                "{what}: {}",
                show(&wrapped)
            );
            assert_eq!(
                masked(&wrapped.stdout),
                masked(&plain.stdout),
                "{what}: the job's output changed"
            );
            let why = refusals(&out_dir);
            assert_eq!(why.len(), 2, "{what}: one refusal per rank: {why:?}");
            for w in &why {
                assert!(
                    w.contains(&format!("built for {}", foreign.name))
                        && w.contains(&format!("loaded {}", job.name))
                        && w.contains("unrecorded"),
                    "{what}: {w}"
                );
                assert!(!w.starts_with("contend:"), "{what}: {w}");
            }
            assert_eq!(
                text(&wrapped.stderr)
                    .matches("contend: the MPI wrapper was built for")
                    .count(),
                2,
                "{what}: each rank says it on stderr: {}",
                show(&wrapped)
            );
            assert!(rank_streams(&out_dir).is_empty(), "{what}");
        }
        // A job that fails (the example needs 2 ranks): the same failure, the same status.
        let plain = run_job(job, 1, &program, &[], None, &[]);
        let out_dir = dir.path().join(format!("out-{}-one-rank", job.mpicc));
        let wrapped = run_job(job, 1, &program, &[], Some((&wrapper, &out_dir)), &[]);
        assert_ne!(plain.status.code(), Some(0), "{}", show(&plain));
        assert_eq!(
            wrapped.status.code(),
            plain.status.code(),
            "{}",
            show(&wrapped)
        );
        assert!(text(&wrapped.stderr).contains("needs exactly 2 MPI ranks"));
        assert_eq!(refusals(&out_dir).len(), 1);
    }
}

/// A private cache holding the MPICH wrapper's name (as contend built it for these sources) with
/// an Open MPI build of the wrapper in its place: a recording whose ranks all refuse it. The
/// cache is the user's own, and the user put the swapped file there through the cache, so its
/// manifest vouches for it (contend rebuilds a wrapper that differs from what it recorded).
fn cache_with_the_wrong_wrapper(dir: &Path, program: &Path) -> PathBuf {
    // Make sure the shared cache holds the current MPICH wrapper, and learn its name.
    let out = record(&MPICH, &dir.join("warm-up"), program, &["0", "1"]);
    assert!(out.status.success(), "{}", show(&out));
    let library = preloaded_wrapper(&text(&out.stderr));
    let name = library.file_name().unwrap().to_str().unwrap();
    assert!(name.contains("-mpich-"), "{name}");
    let private = dir.join("wrong-cache");
    let cache = observe::cache::Cache::open_at(&private, &mut |n| panic!("{n}")).unwrap();
    let wrong = std::fs::read(build_wrapper(&OPEN_MPI, dir)).unwrap();
    cache.put(name, &wrong).unwrap();
    private
}

/// Recorded through contend with a wrapper for the wrong MPI (a cache entry swapped): the job
/// runs, contend warns once per distinct reason, and the report says the ranks were not
/// recorded and why.
#[test]
fn a_recording_whose_ranks_refused_the_wrapper_reports_why() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let program = build_example(&MPICH, "late_sender", dir.path());
    let wrong = cache_with_the_wrong_wrapper(dir.path(), &program);
    let run = dir.path().join("run");
    let out = Command::new(CONTEND)
        .env("CONTEND_CACHE", &wrong)
        .args(["record", "--mpi", "--interval", "0", "-o"])
        .arg(&run)
        .args(["--", "mpirun.mpich", "-np", "2"])
        .arg(&program)
        .args(["20", "2"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}", show(&out));
    assert!(text(&out.stdout).contains("truth: pattern=late-sender"));
    assert!(
        err.contains("contend: warning: the MPI wrapper was built for Open MPI")
            && err.contains("loaded MPICH"),
        "{err}"
    );
    assert!(!err.contains("contend: warning: contend:"), "{err}");
    assert!(rank_streams(&run).is_empty());

    let shown = report_text(&[&run]);
    let line = shown
        .lines()
        .find(|l| l.contains("unavailable: MPI calls of a rank"))
        .unwrap_or_else(|| panic!("no line on the refused ranks in\n{shown}"));
    assert!(
        line.contains("built for Open MPI") && line.contains("loaded MPICH"),
        "{line}"
    );
    let json = report_json(&[&run]);
    assert!(json.get("mpi").is_none(), "{}", json["mpi"]);
    let unavailable = json["unavailable"].as_array().unwrap();
    assert!(
        unavailable
            .iter()
            .any(|u| u["what"] == "MPI calls of a rank"
                && u["why"].as_str().unwrap().contains("built for Open MPI")),
        "{unavailable:?}"
    );
}

/// What the report's note should say when the ranks refused the wrapper (today it says they
/// "did not call MPI_Init with the wrapper loaded", which is not what happened).
#[test]
fn the_report_of_a_run_whose_ranks_refused_the_wrapper_says_so() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let program = build_example(&MPICH, "late_sender", dir.path());
    let wrong = cache_with_the_wrong_wrapper(dir.path(), &program);
    let run = dir.path().join("run");
    let out = Command::new(CONTEND)
        .env("CONTEND_CACHE", &wrong)
        .args(["record", "--mpi", "--interval", "0", "-o"])
        .arg(&run)
        .args(["--", "mpirun.mpich", "-np", "2"])
        .arg(&program)
        .args(["20", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    // Neither record nor report blames the launcher or MPI_Init: the ranks refused.
    let err = text(&out.stderr);
    assert!(!err.contains("did not call MPI_Init"), "{err}");
    let report = contend().arg("report").arg(&run).output().unwrap();
    let err = text(&report.stderr);
    assert!(
        err.contains("2 rank(s) refused the MPI wrapper"),
        "the note should count the refusing ranks: {err}"
    );
    assert!(!err.contains("did not call MPI_Init"), "{err}");
}

// -------------------------------------------------------------- a rank dies, a job aborts

/// examples/mpi/rank_dies.c: two planted late senders, 200 quick ping-pongs, then rank 1 is
/// killed (or calls MPI_Abort) while rank 0 waits in a receive that never completes, until the
/// launcher kills it. Everything both ranks did before is analysed: every call (406 per rank),
/// every message (402) and barrier (3), the late senders within 5 % at their line; both ranks
/// are named as ended early; no rank is missing.
#[test]
fn a_rank_that_dies_leaves_the_others_analysed_and_is_named() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    for mpi in [&OPEN_MPI, &MPICH] {
        let program = build_example(mpi, "rank_dies", dir.path());
        for mode in ["kill", "abort"] {
            let what = format!("{} {mode}", mpi.name);
            let mut first_error = None;
            for attempt in 0..2 {
                let run = dir.path().join(format!("{}-{mode}-{attempt}", mpi.mpicc));
                // The job takes seconds; its launcher has been seen to hang after the abort
                // (Open MPI's mpirun, its main thread waiting on a lock forever): bounded, and
                // retried once like the timing below.
                let mut command = contend();
                command
                    .args(["record", "--mpi", "--interval", "0", "-o"])
                    .arg(&run)
                    .arg("--")
                    .args(mpi.launcher)
                    .args(["-np", "2"])
                    .arg(&program)
                    .args([mode, "100", "2", "200"]);
                let Some(out) = output_within(&mut command, Duration::from_secs(180)) else {
                    let e = format!("{what}: the job had not ended after 180 s: killed");
                    assert_eq!(attempt, 0, "{e} (twice)");
                    testkit::attempt_failed(&format!("{e}; retrying once"));
                    continue;
                };
                let stdout = text(&out.stdout);
                // The job failed, with MPI_Abort's error code when aborted.
                match mode {
                    "abort" => assert_eq!(out.status.code(), Some(3), "{what}: {}", show(&out)),
                    _ => assert!(!out.status.success(), "{what}: {}", show(&out)),
                }
                assert!(stdout.contains("done: pingpongs=200"), "{what}: {stdout}");

                let json = report_json(&[&run]);
                let m = &json["mpi"];
                assert_eq!(m["world_size"], 2, "{what}");
                assert_eq!(m["missing_ranks"], serde_json::json!([]), "{what}");
                let ranks = m["ranks"].as_array().unwrap();
                assert_eq!(ranks.len(), 2, "{what}: {ranks:?}");
                for r in ranks {
                    assert_eq!(r["closed"], false, "{what}: {r}");
                    assert_eq!(r["finalized"], false, "{what}: {r}");
                    // Init, the start barrier, 2 rounds of (send or receive, barrier), 400
                    // ping-pong calls: all of it written before the rank was killed.
                    assert_eq!(r["calls"], 406, "{what}: rank {} lost calls", r["rank"]);
                }
                let counts = &m["waits"]["counts"];
                assert_eq!(counts["messages_matched"], 402, "{what}: {counts}");
                assert_eq!(counts["unmatched_sends"], 0, "{what}: {counts}");
                assert_eq!(counts["unmatched_receives"], 0, "{what}: {counts}");
                assert_eq!(counts["collectives_matched"], 3, "{what}: {counts}");
                assert_eq!(counts["collectives_incomplete"], 0, "{what}: {counts}");

                let shown = report_text(&[&run]);
                assert!(
                    shown.contains("ended early: rank(s) 0, 1"),
                    "{what}: {shown}"
                );
                assert!(!shown.contains("missing: rank"), "{what}: {shown}");
                if mode == "abort" {
                    assert_eq!(ranks[1]["aborted"], 3, "{what}: {}", ranks[1]);
                    assert_eq!(ranks[0]["aborted"], Value::Null, "{what}");
                    assert!(
                        shown.contains("rank 1 called MPI_Abort with error code 3"),
                        "{what}: {shown}"
                    );
                }

                // One retry, for what no measurement of the programs bounds: a rank preempted between
                // its own clock read and the MPI call it times (a few hundred ns), or a time slice the
                // hypervisor steals mid-wait. Each failed attempt is logged (stderr); an error of the
                // analysis fails both times, and the second failure reports the first.
                match check_late_sender(&json, &stdout, "rank_dies.c") {
                    Ok(()) => break,
                    Err(e) if attempt == 0 => {
                        testkit::attempt_failed(&format!("{what}: {e}: retrying once"));
                        first_error = Some(e);
                    }
                    Err(e) => panic!("{what}: {e} (first attempt: {first_error:?})"),
                }
            }
        }
    }
}

// ------------------------------------------------------------------- unmatched messages

/// examples/mpi/unmatched.c: a send nobody receives, and a receive whose send the wrapper
/// never saw (PMPI_Send) and which waits for it: both counted and listed where they were
/// made, and no wait state made up for them.
#[test]
fn messages_without_a_partner_are_counted_and_listed_not_guessed() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let src = "examples/mpi/unmatched.c";
    let send_line = line_of(src, "/* never received */");
    let recv_line = line_of(src, "MPI_Recv(&msg, 1, MPI_INT, 0, 6");
    for mpi in [&OPEN_MPI, &MPICH] {
        let program = build_example(mpi, "unmatched", dir.path());
        let run = dir.path().join(format!("run-{}", mpi.mpicc));
        let out = record(mpi, &run, &program, &["100"]);
        assert!(out.status.success(), "{}: {}", mpi.name, show(&out));
        let json = report_json(&[&run]);
        let m = &json["mpi"];
        let counts = &m["waits"]["counts"];
        assert_eq!(counts["unmatched_sends"], 1, "{}: {counts}", mpi.name);
        assert_eq!(counts["unmatched_receives"], 1, "{}: {counts}", mpi.name);
        assert_eq!(counts["messages_matched"], 0, "{}: {counts}", mpi.name);
        let listed = m["waits"]["unmatched"].as_array().unwrap();
        assert_eq!(listed.len(), 2, "{}: {listed:?}", mpi.name);
        let send = listed.iter().find(|u| u["kind"] == "Send").unwrap();
        assert_eq!(
            (&send["rank"], &send["peer"], &send["tag"]),
            (&Value::from(0), &Value::from(1), &Value::from(5)),
            "{}: {send}",
            mpi.name
        );
        assert!(
            site_name(m, &send["site"]).ends_with(&format!("unmatched.c:{send_line})")),
            "{}: {}",
            mpi.name,
            site_name(m, &send["site"])
        );
        let recv = listed.iter().find(|u| u["kind"] == "Receive").unwrap();
        assert_eq!(
            (&recv["rank"], &recv["peer"], &recv["tag"]),
            (&Value::from(1), &Value::from(0), &Value::from(6)),
            "{}: {recv}",
            mpi.name
        );
        assert!(
            site_name(m, &recv["site"]).ends_with(&format!("unmatched.c:{recv_line})")),
            "{}: {}",
            mpi.name,
            site_name(m, &recv["site"])
        );
        // The receive waited ~100 ms for its unseen send: no Late Sender is made of it.
        let p2p: Vec<&Value> = m["waits"]["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| {
                let p = i["pattern"].as_str().unwrap();
                p.starts_with("late-sender") || p == "late-receiver"
            })
            .collect();
        assert!(p2p.is_empty(), "{}: guessed: {p2p:?}", mpi.name);
        let shown = report_text(&[&run]);
        assert!(
            shown.contains(
                "note: 1 send(s) and 1 receive(s) have no partner in the traces (first: a send by rank 0 with rank 1, tag 5): counted, not guessed"
            ),
            "{}: {shown}",
            mpi.name
        );
    }
}

// ---------------------------------------------------------------------- several hosts

/// The instances of a report, comparable across reports: (pattern, rank, cause, ns, site).
fn instances(json: &Value) -> Vec<(String, u64, Option<u64>, u64, String)> {
    let m = &json["mpi"];
    let mut v: Vec<_> = m["waits"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["pattern"].as_str().unwrap().to_string(),
                i["rank"].as_u64().unwrap(),
                i["cause"].as_u64(),
                i["wait_ns"].as_u64().unwrap(),
                site_name(m, &i["site"]),
            )
        })
        .collect();
    v.sort();
    v
}

/// Splits a recorded 2-rank run as two hosts would have left it: `host1` (where mpirun and
/// contend ran: meta.json and rank 0) and `host2` (rank 1's stream and maps only). When
/// `meta_lists_rank_1` is false, meta.json no longer lists rank 1's stream, as a recording on
/// host 1 writes it when rank 1 ran elsewhere.
fn split_hosts(original: &Path, host1: &Path, host2: &Path, meta_lists_rank_1: bool) {
    for sub in ["", "streams", "maps"] {
        std::fs::create_dir_all(host1.join(sub)).unwrap();
        std::fs::create_dir_all(host2.join(sub)).unwrap();
    }
    for sub in ["streams", "maps"] {
        for e in std::fs::read_dir(original.join(sub)).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let to = if name.starts_with("rank-1.") {
                host2
            } else {
                host1
            };
            std::fs::copy(e.path(), to.join(sub).join(&name)).unwrap();
        }
    }
    let mut meta: Value =
        serde_json::from_slice(&std::fs::read(original.join("meta.json")).unwrap()).unwrap();
    if !meta_lists_rank_1 {
        meta["streams"]
            .as_array_mut()
            .unwrap()
            .retain(|s| s["file"] != "streams/rank-1.cst");
    }
    std::fs::write(
        host1.join("meta.json"),
        serde_json::to_vec_pretty(&meta).unwrap(),
    )
    .unwrap();
}

/// A 2-rank run split over two hosts' directories: `contend report HOST1 --mpi-from HOST2`
/// finds exactly the wait states of the whole run, at the same call sites; HOST1 alone names
/// rank 1 as missing and still analyses rank 0; a rank given twice is refused, naming both
/// files.
#[test]
fn rank_traces_from_two_hosts_directories_are_merged() {
    if !require(&OPEN_MPI) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let program = build_example(&OPEN_MPI, "late_sender", dir.path());
    let original = dir.path().join("original");
    let out = record(&OPEN_MPI, &original, &program, &["100", "2"]);
    assert!(out.status.success(), "{}", show(&out));
    let whole = report_json(&[&original]);
    check_late_sender(&whole, &text(&out.stdout), "late_sender.c").unwrap();

    let (host1, host2) = (dir.path().join("host1"), dir.path().join("host2"));
    split_hosts(&original, &host1, &host2, false);

    let alone = report_json(&[&host1]);
    assert_eq!(alone["mpi"]["missing_ranks"], serde_json::json!([1]));
    assert_eq!(alone["mpi"]["ranks"].as_array().unwrap().len(), 1);
    assert!(report_text(&[&host1]).contains("missing: rank(s) 1 left no trace"));

    let merged = report_json(&[
        host1.as_os_str(),
        OsStr::new("--mpi-from"),
        host2.as_os_str(),
    ]);
    assert_eq!(merged["mpi"]["missing_ranks"], serde_json::json!([]));
    assert_eq!(merged["mpi"]["ranks"].as_array().unwrap().len(), 2);
    assert_eq!(instances(&merged), instances(&whole));
    assert_eq!(
        merged["mpi"]["waits"]["counts"],
        whole["mpi"]["waits"]["counts"]
    );

    // Rank 0 twice (host 1's and the original's).
    let twice = contend()
        .arg("report")
        .arg(&host1)
        .arg("--mpi-from")
        .arg(&original)
        .output()
        .unwrap();
    let err = text(&twice.stderr);
    assert_eq!(twice.status.code(), Some(2), "{}", show(&twice));
    assert!(
        err.contains("rank 0 has two traces")
            && err.contains(&host1.join("streams/rank-0.cst").display().to_string())
            && err.contains(&original.join("streams/rank-0.cst").display().to_string()),
        "{err}"
    );
}

/// The same, with rank 1's stream moved out of a run directory whose meta.json still lists it
/// (the files moved by hand): the report should take rank 1 from --mpi-from rather than fail
/// on the listed file.
#[test]
fn a_rank_stream_moved_to_another_directory_is_found_there() {
    if !require(&OPEN_MPI) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let program = build_example(&OPEN_MPI, "late_sender", dir.path());
    let original = dir.path().join("original");
    let out = record(&OPEN_MPI, &original, &program, &["100", "2"]);
    assert!(out.status.success(), "{}", show(&out));
    let whole = report_json(&[&original]);
    let (host1, host2) = (dir.path().join("host1"), dir.path().join("host2"));
    split_hosts(&original, &host1, &host2, true);
    let merged = report_json(&[
        host1.as_os_str(),
        OsStr::new("--mpi-from"),
        host2.as_os_str(),
    ]);
    assert_eq!(instances(&merged), instances(&whole));
    let alone = contend().arg("report").arg(&host1).output().unwrap();
    assert!(alone.status.success(), "{}", show(&alone));
    assert!(text(&alone.stdout).contains("missing: rank(s) 1"));
}

// ------------------------------------------------------------------------------- Fortran

/// examples/mpi/late_sender.f90 under Open MPI (whose Fortran bindings bypass the C symbols:
/// the wrapper's Fortran entry points record them) and MPICH (whose bindings call the C
/// symbols: the wrapper's Fortran stubs give the program's return address as call site): the
/// planted late sender found within 5 %, and every call at its line of late_sender.f90.
#[test]
fn fortran_late_sender_is_found_at_its_fortran_line() {
    if !(testkit::require_command("gfortran", "gfortran") && require(&OPEN_MPI) && require(&MPICH))
    {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let recv_line = line_of("examples/mpi/late_sender.f90", "! the wait");
    for mpi in [&OPEN_MPI, &MPICH] {
        let program = build(
            mpi.mpif90,
            &["-O2", "-g"],
            "examples/mpi/late_sender.f90",
            &dir.path().join(format!("late_sender_f-{}", mpi.mpif90)),
        );
        // One retry, for what no measurement of the programs bounds: a rank preempted between
        // its own clock read and the MPI call it times (a few hundred ns), or a time slice the
        // hypervisor steals mid-wait. Each failed attempt is logged (stderr); an error of the
        // analysis fails both times, and the second failure reports the first.
        let mut first_error = None;
        for attempt in 0..2 {
            let run = dir.path().join(format!("{}-{attempt}", mpi.mpif90));
            let out = record(mpi, &run, &program, &["100", "3"]);
            assert!(out.status.success(), "{}: {}", mpi.name, show(&out));
            let json = report_json(&[&run]);
            let m = &json["mpi"];
            for c in m["calls"].as_array().unwrap() {
                let site = site_name(m, &c["site"]);
                assert!(
                    site.contains("late_sender.f90:"),
                    "{}: {} at `{site}`",
                    mpi.name,
                    c["function"]
                );
            }
            let recv = m["calls"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["function"] == "MPI_Recv")
                .unwrap_or_else(|| panic!("{}: no MPI_Recv recorded", mpi.name));
            assert_eq!(recv["count"], 3, "{}", mpi.name);
            assert!(
                site_name(m, &recv["site"]).ends_with(&format!("late_sender.f90:{recv_line})")),
                "{}: {}",
                mpi.name,
                site_name(m, &recv["site"])
            );
            match check_late_sender(&json, &text(&out.stdout), "late_sender.f90") {
                Ok(()) => break,
                Err(e) if attempt == 0 => {
                    testkit::attempt_failed(&format!("{}: {e}: retrying once", mpi.name));
                    first_error = Some(e);
                }
                Err(e) => panic!("{}: {e} (first attempt: {first_error:?})", mpi.name),
            }
        }
    }
}

// ------------------------------------------------------------------ MPMD and own clocks

/// Whether this kernel and util-linux make time namespaces (`unshare --time`), said if not.
fn time_namespaces() -> bool {
    let made = Command::new("unshare")
        .args(["--time", "--fork", "--monotonic", "3600", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        eprintln!("skipped: no time namespaces here (`unshare --time` failed)");
    }
    made
}

/// `contend record --mpi -o RUN -- LAUNCHER -np 1 [RANK0...] PROGRAM : -np 1 [RANK1...]
/// PROGRAM`, an MPMD job whose two ranks start through the given prefixes (a time namespace,
/// `env -u LD_PRELOAD`, ...), bounded at 120 s: a job that hangs fails the test.
fn mpmd_job(mpi: &Mpi, run: &Path, program: &Path, rank0: &[&str], rank1: &[&str]) -> Output {
    let mut command = contend();
    command
        .args(["record", "--mpi", "--interval", "0", "-o"])
        .arg(run)
        .arg("--")
        .args(mpi.launcher)
        .args(["-np", "1"])
        .args(rank0)
        .arg(program)
        .args([":", "-np", "1"])
        .args(rank1)
        .arg(program);
    output_within(&mut command, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("{}: the job had not ended after 120 s", mpi.name))
}

/// Issue 20: `mpirun -np 1 ./ls : -np 1 unshare --time ... ./ls`, the second rank in a time
/// namespace whose CLOCK_MONOTONIC is 1 s or an hour ahead (as on another host), on rank 0's
/// host. Open MPI's `-x` once reached the first application context only: the job hung for
/// good. Now it completes as without contend, both ranks are recorded, and the late sender is
/// found once rank 1's offset is applied (the same hostname no longer means the same clock).
#[test]
fn an_mpmd_job_with_a_rank_in_a_time_namespace_completes_and_is_aligned() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    if !time_namespaces() {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    // 1 s and an hour ahead: the offset is measured, whatever its size.
    for (mpi, ahead_s) in [
        (&OPEN_MPI, 1i64),
        (&MPICH, 1),
        (&OPEN_MPI, 3600),
        (&MPICH, 3600),
    ] {
        let program = build_example(mpi, "late_sender", dir.path());
        let run = dir.path().join(format!("{}-mpmd-{ahead_s}", mpi.mpicc));
        let ahead = ahead_s.to_string();
        let namespace = ["unshare", "--time", "--fork", "--monotonic", &ahead];
        let out = mpmd_job(mpi, &run, &program, &[], &namespace);
        assert!(out.status.success(), "{}: {}", mpi.name, show(&out));
        assert_eq!(
            rank_streams(&run),
            vec!["rank-0.cst", "rank-1.cst"],
            "{}: {}",
            mpi.name,
            show(&out)
        );
        let json = report_json(&[&run]);
        let rank1 = &json["mpi"]["ranks"][1];
        assert_eq!(rank1["clock"]["applied"], true, "{}: {rank1}", mpi.name);
        let offset = rank1["clock"]["at_init_ns"].as_i64().unwrap();
        // Ahead: add about −ahead_s, within half the round trip it came from (1 ms at least).
        let trip = rank1["clock"]["round_trip_at_init_ns"].as_i64().unwrap();
        assert!(
            (offset + ahead_s * 1_000_000_000).abs() <= (trip / 2).max(1_000_000),
            "{}: offset {offset}, round trip {trip}",
            mpi.name
        );
        // Measured by round trips; CLOCK_REALTIME, which a time namespace does not move,
        // agrees within the round trip.
        assert_eq!(
            rank1["clock"]["source"], "exchange",
            "{}: {rank1}",
            mpi.name
        );
        let disagreement = rank1["clock"]["realtime_disagreement_ns"].as_i64().unwrap();
        assert!(
            disagreement.abs() <= (trip / 2).max(1_000_000),
            "{}: {rank1}",
            mpi.name
        );
        // The planted waits: beside a CPU hog a receiver kept off its CPU for the planted
        // 100 ms posts its receive after the send and waits for nothing, which no clock of
        // the program bounds: one logged retry, as in tests/cli/mpi.rs.
        let ahead_ns = ahead_s * 1_000_000_000;
        if let Err(e) =
            check_late_sender_ahead(&json, &text(&out.stdout), "late_sender.c", ahead_ns)
        {
            testkit::attempt_failed(&format!("{}: {e}: retrying once", mpi.name));
            let again = run.with_extension("again");
            let out = mpmd_job(mpi, &again, &program, &[], &namespace);
            assert!(out.status.success(), "{}: {}", mpi.name, show(&out));
            let json = report_json(&[&again]);
            check_late_sender_ahead(&json, &text(&out.stdout), "late_sender.c", ahead_ns)
                .unwrap_or_else(|e2| panic!("{}: {e2} (first attempt: {e})", mpi.name));
        }
    }
}

/// Issue 20: a rank started without the wrapper (`env -u LD_PRELOAD`, as a wrapper script or
/// container does) once left the wrapped ranks waiting in MPI_Init for good. The job now
/// completes with its own exit status, the wrapped rank is recorded and analysed, and the
/// other is named as missing, with the likely reason.
#[test]
fn a_rank_without_the_wrapper_does_not_hang_the_job_and_is_named() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    for mpi in [&OPEN_MPI, &MPICH] {
        let program = build_example(mpi, "late_sender", dir.path());
        let run = dir.path().join(format!("{}-unwrapped", mpi.mpicc));
        let out = mpmd_job(mpi, &run, &program, &[], &["env", "-u", "LD_PRELOAD"]);
        assert!(out.status.success(), "{}: {}", mpi.name, show(&out));
        let stdout = text(&out.stdout);
        assert!(stdout.contains("rank=0"), "{}: {stdout}", mpi.name);
        assert!(stdout.contains("rank=1"), "{}: {stdout}", mpi.name);
        assert!(
            text(&out.stderr).contains("1 of 2 ranks did not announce themselves"),
            "{}: {}",
            mpi.name,
            show(&out)
        );
        assert!(
            text(&out.stderr).contains(
                "rank(s) 1 did not announce themselves to the MPI wrapper in this run directory"
            ),
            "{}: {}",
            mpi.name,
            show(&out)
        );
        assert_eq!(rank_streams(&run), vec!["rank-0.cst"], "{}", mpi.name);
        let json = report_json(&[&run]);
        assert_eq!(json["mpi"]["world_size"], 2, "{}", mpi.name);
        assert_eq!(
            json["mpi"]["missing_ranks"],
            serde_json::json!([1]),
            "{}",
            mpi.name
        );
        let shown = report_text(&[&run]);
        assert!(
            shown.contains("missing: rank(s) 1 left no trace (started without the MPI wrapper"),
            "{}: {shown}",
            mpi.name
        );
    }
}

/// Issue 20: a rank that cannot see rank 0's start-up decision (its host does not share the
/// run directory; here a directory of its own, and a clock an hour ahead) records on its own
/// after a bounded wait, and is put on rank 0's clock by CLOCK_REALTIME: `report --mpi-from`
/// finds the late sender as on a shared directory. A rank 0 without the wrapper leaves the
/// others recording on their own, and record says so.
#[test]
fn ranks_that_cannot_reach_rank_0s_decision_record_on_their_own() {
    if !(require(&OPEN_MPI) && require(&MPICH)) {
        return;
    }
    if !time_namespaces() {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    for mpi in [&OPEN_MPI, &MPICH] {
        let program = build_example(mpi, "late_sender", dir.path());
        let run = dir.path().join(format!("{}-host1", mpi.mpicc));
        let other = dir.path().join(format!("{}-host2", mpi.mpicc));
        let own_dir = format!("CONTEND_MPI_DIR={}", other.display());
        let rank1 = [
            "unshare",
            "--time",
            "--fork",
            "--monotonic",
            "3600",
            "env",
            &own_dir,
        ];
        let out = mpmd_job(mpi, &run, &program, &[], &rank1);
        assert!(out.status.success(), "{}: {}", mpi.name, show(&out));
        assert!(
            text(&out.stderr).contains("rank 1 saw no decision from rank 0"),
            "{}: {}",
            mpi.name,
            show(&out)
        );
        assert_eq!(rank_streams(&run), vec!["rank-0.cst"], "{}", mpi.name);
        assert_eq!(rank_streams(&other), vec!["rank-1.cst"], "{}", mpi.name);
        let json = report_json(&[run.as_os_str(), OsStr::new("--mpi-from"), other.as_os_str()]);
        let rank1 = &json["mpi"]["ranks"][1];
        assert_eq!(
            rank1["clock"]["source"], "realtime",
            "{}: {rank1}",
            mpi.name
        );
        // An hour ahead: add −3600 s. Both clocks are read together on each rank (a few µs
        // apart), and the realtime clock is this machine's on both.
        let offset = rank1["clock"]["at_init_ns"].as_i64().unwrap();
        assert!(
            (offset + 3_600_000_000_000).abs() < 1_000_000,
            "{}: offset {offset}",
            mpi.name
        );
        assert_eq!(json["mpi"]["missing_ranks"], serde_json::json!([]));
        check_late_sender(&json, &text(&out.stdout), "late_sender.c")
            .unwrap_or_else(|e| panic!("{}: {e}", mpi.name));
        let shown = report_text(&[run.as_os_str(), OsStr::new("--mpi-from"), other.as_os_str()]);
        assert!(
            shown.contains("rank(s) 1 by CLOCK_REALTIME (they recorded on their own"),
            "{}: {shown}",
            mpi.name
        );

        // Rank 0 without the wrapper: rank 1 records on its own in the shared directory.
        let run = dir.path().join(format!("{}-rank0-unwrapped", mpi.mpicc));
        let out = mpmd_job(mpi, &run, &program, &["env", "-u", "LD_PRELOAD"], &[]);
        assert!(out.status.success(), "{}: {}", mpi.name, show(&out));
        let err = text(&out.stderr);
        assert!(
            err.contains("rank(s) 0 did not announce themselves")
                && err.contains("rank(s) 1 recorded on their own: rank 0 was not recorded"),
            "{}: {}",
            mpi.name,
            show(&out)
        );
        assert_eq!(rank_streams(&run), vec!["rank-1.cst"], "{}", mpi.name);
        let json = report_json(&[&run]);
        assert_eq!(json["mpi"]["missing_ranks"], serde_json::json!([0]));
    }
}

/// Issue 20: a launcher contend does not know (a job script that calls mpirun itself): the
/// wrapper reaches the ranks through the environment contend can set (the script's), the job
/// completes as without contend, and the rank the environment did not reach is named.
#[test]
fn a_job_script_gets_the_wrapper_through_its_environment_and_unreached_ranks_are_named() {
    if !require(&OPEN_MPI) {
        return;
    }
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let program = build_example(&OPEN_MPI, "late_sender", dir.path());
    let script = dir.path().join("job.sh");
    std::fs::write(
        &script,
        format!(
            // Root's permission is the script's to give: contend sets it for the launchers
            // it knows only.
            "#!/bin/sh\nexec {} --allow-run-as-root -np 1 '{p}' : -np 1 env -u LD_PRELOAD '{p}'\n",
            OPEN_MPI.launcher.join(" "),
            p = program.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = dir.path().join("run");
    let mut command = contend();
    command
        .args([
            "record",
            "--mpi",
            "--mpi-impl",
            "openmpi",
            "--interval",
            "0",
            "-o",
        ])
        .arg(&run)
        .arg("--")
        .arg(&script);
    let out = output_within(&mut command, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("the job had not ended after 120 s"));
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("rank(s) 1 did not announce themselves to the MPI wrapper"),
        "{}",
        show(&out)
    );
    assert_eq!(rank_streams(&run), vec!["rank-0.cst"]);
    let json = report_json(&[&run]);
    assert_eq!(json["mpi"]["missing_ranks"], serde_json::json!([1]));
}
