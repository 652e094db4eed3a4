//! Making an MPI job record itself (`contend record --mpi`): which MPI the program and the
//! launcher belong to, the PMPI wrapper (`mpi/contend_mpi.c`) built with that MPI's own `mpicc`
//! and kept in contend's private cache (`crate::cache`, checked before it is preloaded), and
//! the launcher's command line rewritten so that every rank, on every host, preloads it (Open
//! MPI `-x`, MPICH/Hydra `-genv`, Slurm `--export`).

use crate::cache::{Cache, Lookup};
use crate::private::create_new;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The wrapper's sources, compiled into contend so an installed binary can build it.
const WRAPPER_C: &str = include_str!("../../../mpi/contend_mpi.c");
const WRITER_H: &str = include_str!("../../../mpi/cst_writer.h");
const WRAPPER_FORTRAN: &str = include_str!("../../../mpi/contend_mpi_fortran.c");

/// The MPI implementations whose ABI the wrapper is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    OpenMpi,
    Mpich,
}

impl Implementation {
    pub fn name(self) -> &'static str {
        match self {
            Implementation::OpenMpi => "Open MPI",
            Implementation::Mpich => "MPICH",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Implementation::OpenMpi => "openmpi",
            Implementation::Mpich => "mpich",
        }
    }

    /// Compiler wrappers to try, most specific first (Debian installs both side by side).
    fn compilers(self) -> [&'static str; 2] {
        match self {
            Implementation::OpenMpi => ["mpicc.openmpi", "mpicc"],
            Implementation::Mpich => ["mpicc.mpich", "mpicc"],
        }
    }

    /// From a library's soname or a path or version text that names it.
    fn from_text(text: &str) -> Option<Implementation> {
        let t = text.to_ascii_lowercase();
        if t.contains("open mpi")
            || t.contains("openmpi")
            || t.contains("orterun")
            || t.contains("libmpi.so")
        {
            Some(Implementation::OpenMpi)
        } else if t.contains("mpich") || t.contains("hydra") {
            Some(Implementation::Mpich)
        } else {
            None
        }
    }
}

/// How the job is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// `mpirun`/`mpiexec`/`orterun` of Open MPI.
    OpenMpi,
    /// `mpirun`/`mpiexec` of MPICH (Hydra).
    Hydra,
    /// Slurm's `srun`.
    Srun,
    /// The program itself, as a singleton (one rank).
    Direct,
}

/// What went wrong preparing an MPI recording, in words for the user.
#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    #[error("no MPI compiler found ({tried}): install one, e.g. `apt install libopenmpi-dev openmpi-bin` (Open MPI) or `apt install libmpich-dev mpich` (MPICH)")]
    NoCompiler { tried: String },
    #[error("cannot tell which MPI {what} uses: {why}; name it with --mpi-impl openmpi|mpich")]
    Unknown { what: String, why: String },
    #[error("the program {program} is linked with {program_mpi} but is launched by {launcher_mpi}'s {launcher}: its ranks would not form one job. Launch it with {program_mpi}'s mpirun")]
    Mismatch {
        program: String,
        program_mpi: &'static str,
        launcher: String,
        launcher_mpi: &'static str,
    },
    #[error("no MPI launcher `{launcher}` on PATH: {advice}")]
    NoLauncher { launcher: String, advice: String },
    #[error("building the MPI wrapper with {compiler} failed:\n{output}")]
    Build { compiler: String, output: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The recording plan for one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub implementation: Implementation,
    pub launcher: Launcher,
    /// The command to run instead of the user's.
    pub command: Vec<String>,
    /// Environment for the launched command itself.
    pub env: Vec<(String, String)>,
    /// The wrapper every rank preloads (in the cache `prepare` was given).
    pub library: PathBuf,
    /// Things to tell the user (one line each).
    pub notices: Vec<String>,
}

/// The launcher a command starts with, from its name (resolving Debian's alternatives
/// symlinks) and, when the name says nothing, its `--version`.
pub fn launcher_of(argv0: &str) -> Launcher {
    let base = Path::new(argv0)
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or(argv0);
    if base == "srun" {
        return Launcher::Srun;
    }
    let launcher_names = ["mpirun", "mpiexec", "orterun", "prterun", "mpiexec.hydra"];
    if !launcher_names.iter().any(|n| base.starts_with(n)) {
        return Launcher::Direct;
    }
    let resolved = which(argv0)
        .and_then(|p| std::fs::canonicalize(p).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let by_name = Implementation::from_text(base).or(Implementation::from_text(&resolved));
    let implementation = by_name.or_else(|| {
        let out = Command::new(argv0).arg("--version").output().ok()?;
        Implementation::from_text(&String::from_utf8_lossy(&out.stdout)).or(
            Implementation::from_text(&String::from_utf8_lossy(&out.stderr)),
        )
    });
    match implementation {
        Some(Implementation::Mpich) => Launcher::Hydra,
        // An mpirun that names nothing: Open MPI's option syntax is the common one.
        _ => Launcher::OpenMpi,
    }
}

/// The program a launcher command runs: the first argument after the launcher that is an
/// executable file (found on PATH like the launcher would). Options' values ("4" in `-np 4`)
/// are not executables, so they are passed over.
pub fn program_of(command: &[String], launcher: Launcher) -> Option<PathBuf> {
    let start = usize::from(launcher != Launcher::Direct);
    command.get(start..)?.iter().find_map(|a| {
        if a.starts_with('-') || a.contains('=') {
            return None;
        }
        ::which::which(a).ok()
    })
}

/// The MPI a program is dynamically linked with, from its ELF `DT_NEEDED` entries.
pub fn implementation_of_program(path: &Path) -> Option<Implementation> {
    let data = std::fs::read(path).ok()?;
    crate::elf::facts(&data)
        .map(|f| f.needed)
        .unwrap_or_default()
        .iter()
        .find_map(|lib| Implementation::from_text(lib))
}

/// Decides the implementation (program first, then launcher, then `forced`), builds the
/// wrapper or reuses the one contend built in `cache` ([`crate::cache`]), and rewrites the
/// command. The library's path is in `cache`: keep it until the job has ended.
pub fn prepare(
    command: &[String],
    run_dir: &Path,
    forced: Option<Implementation>,
    cache: &Cache,
) -> Result<Prepared, MpiError> {
    let argv0 = command.first().map(String::as_str).unwrap_or_default();
    let launcher = launcher_of(argv0);
    let program = program_of(command, launcher);
    let from_program = program.as_deref().and_then(implementation_of_program);
    // A launcher that is not installed says nothing about which MPI it would be: say so before
    // guessing (launcher_of takes an unknown mpirun for Open MPI's).
    if launcher != Launcher::Direct && which(argv0).is_none() {
        let advice = match (launcher, from_program) {
            (Launcher::Srun, _) => "srun is Slurm's (Debian: `apt install slurm-client`); or start the job with the MPI's mpirun".to_string(),
            (_, Some(Implementation::OpenMpi)) => "the program is linked with Open MPI, whose mpirun is in Debian's `openmpi-bin` (`apt install openmpi-bin libopenmpi-dev`)".to_string(),
            (_, Some(Implementation::Mpich)) => "the program is linked with MPICH, whose mpirun is in Debian's `mpich` (`apt install mpich libmpich-dev`)".to_string(),
            _ => "install an MPI, e.g. `apt install openmpi-bin libopenmpi-dev` (Open MPI) or `apt install mpich libmpich-dev` (MPICH)".to_string(),
        };
        return Err(MpiError::NoLauncher {
            launcher: argv0.to_string(),
            advice,
        });
    }
    let from_launcher = match launcher {
        Launcher::OpenMpi => Some(Implementation::OpenMpi),
        Launcher::Hydra => Some(Implementation::Mpich),
        Launcher::Srun | Launcher::Direct => None,
    };
    if let (Some(p), Some(l), None) = (from_program, from_launcher, forced) {
        if p != l {
            return Err(MpiError::Mismatch {
                program: program
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                program_mpi: p.name(),
                launcher: argv0.to_string(),
                launcher_mpi: l.name(),
            });
        }
    }
    let implementation =
        forced
            .or(from_program)
            .or(from_launcher)
            .ok_or_else(|| MpiError::Unknown {
                what: program
                    .as_ref()
                    .map_or_else(|| command.join(" "), |p| p.display().to_string()),
                why: "it is not dynamically linked with libmpi or libmpich".into(),
            })?;
    let mut notices = Vec::new();
    let library = build_wrapper(implementation, cache, &mut notices)?;
    let (command, mut env, more) = rewrite(command, launcher, &library, run_dir);
    notices.extend(more);
    if launcher == Launcher::OpenMpi && is_root() {
        let allow = ["OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"];
        if allow.iter().any(|v| std::env::var_os(v).is_none()) {
            for v in allow {
                env.push((v.into(), "1".into()));
            }
            notices.push("running as root: set OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 for Open MPI's mpirun, which otherwise refuses (as --allow-run-as-root would)".into());
        }
    }
    Ok(Prepared {
        implementation,
        launcher,
        command,
        env,
        library,
        notices,
    })
}

/// The command with the wrapper preloaded in every rank. Pure, for tests.
pub fn rewrite(
    command: &[String],
    launcher: Launcher,
    library: &Path,
    run_dir: &Path,
) -> (Vec<String>, Vec<(String, String)>, Vec<String>) {
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", library.display()),
        _ => library.display().to_string(),
    };
    let dir = run_dir.display().to_string();
    let mut out = vec![command[0].clone()];
    let mut env = Vec::new();
    match launcher {
        Launcher::OpenMpi => {
            // Open MPI's `-x` reaches only the application context it is given in: in
            // `mpirun -np 1 ./a : -np 1 ./b` the ranks after a `:` would run without the
            // wrapper (and the wrapped ones waited for them for good). Each context gets it.
            let exports = [
                "-x".to_string(),
                format!("LD_PRELOAD={preload}"),
                "-x".to_string(),
                format!("CONTEND_MPI_DIR={dir}"),
            ];
            out.extend(exports.iter().cloned());
            for arg in &command[1..] {
                out.push(arg.clone());
                if arg == ":" {
                    out.extend(exports.iter().cloned());
                }
            }
            return (out, env, Vec::new());
        }
        Launcher::Hydra => out.extend([
            "-genv".into(),
            "LD_PRELOAD".into(),
            preload,
            "-genv".into(),
            "CONTEND_MPI_DIR".into(),
            dir,
        ]),
        Launcher::Srun => out.push(format!(
            "--export=ALL,LD_PRELOAD={preload},CONTEND_MPI_DIR={dir}"
        )),
        Launcher::Direct => {
            env.push(("LD_PRELOAD".into(), preload));
            env.push(("CONTEND_MPI_DIR".into(), dir));
        }
    }
    out.extend(command[1..].iter().cloned());
    (out, env, Vec::new())
}

/// Builds the wrapper with the implementation's `mpicc` into the cache, or reuses the copy
/// contend built from the same sources with the same compiler, if it is unchanged (the cache's
/// manifest); one that changed is built again, with a note in `notices`.
pub fn build_wrapper(
    implementation: Implementation,
    cache: &Cache,
    notices: &mut Vec<String>,
) -> Result<PathBuf, MpiError> {
    let compilers = implementation.compilers();
    let compiler = compilers
        .iter()
        .filter_map(|c| which(c))
        .find(|c| compiler_is(c, implementation))
        .ok_or_else(|| MpiError::NoCompiler {
            tried: compilers.join(", "),
        })?;
    let mut key = Fnv::default();
    key.add(WRAPPER_C.as_bytes());
    key.add(WRITER_H.as_bytes());
    key.add(WRAPPER_FORTRAN.as_bytes());
    key.add(compiler.display().to_string().as_bytes());
    if let Ok(meta) = std::fs::metadata(std::fs::canonicalize(&compiler)?) {
        key.add(format!("{:?}", meta.modified().ok()).as_bytes());
    }
    let name = wrapper_name(implementation, key.0);
    match cache.get(&name) {
        Lookup::Found(library) => return Ok(library),
        Lookup::Absent => {}
        Lookup::Changed(why) => notices.push(format!(
            "the cached MPI wrapper is not used ({why}): built again"
        )),
    }
    // Built in a private scratch directory of the cache, then moved into place and recorded
    // in the manifest.
    let scratch = cache.scratch()?;
    let write = |file: &str, text: &str| -> std::io::Result<PathBuf> {
        let path = scratch.path().join(file);
        std::io::Write::write_all(&mut create_new(&path, 0o600)?, text.as_bytes())?;
        Ok(path)
    };
    let src = write("contend_mpi.c", WRAPPER_C)?;
    write("cst_writer.h", WRITER_H)?;
    write("contend_mpi_fortran.c", WRAPPER_FORTRAN)?;
    let built = scratch.path().join("libcontend-mpi.so");
    let out = Command::new(&compiler)
        .args(["-O2", "-g", "-fPIC", "-shared", "-o"])
        .arg(&built)
        .arg(&src)
        .arg("-lpthread")
        .output()?;
    if !out.status.success() {
        return Err(MpiError::Build {
            compiler: compiler.display().to_string(),
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(cache.adopt(&built, &name)?)
}

/// The wrapper's name in the cache: the implementation and a hash of the sources, the compiler's
/// path and its modification time (an upgraded MPI gets a wrapper of its own).
pub fn wrapper_name(implementation: Implementation, key: u64) -> String {
    format!("libcontend-mpi-{}-{key:016x}.so", implementation.slug())
}

/// The compiler belongs to `implementation` (a plain `mpicc` may be either).
fn compiler_is(compiler: &Path, implementation: Implementation) -> bool {
    let name = compiler.file_name().and_then(OsStr::to_str).unwrap_or("");
    if name.ends_with(".openmpi") || name.ends_with(".mpich") {
        return Implementation::from_text(name) == Some(implementation);
    }
    // Open MPI's wrapper knows -showme, MPICH's -show.
    let flag = match implementation {
        Implementation::OpenMpi => "-showme:version",
        Implementation::Mpich => "-show",
    };
    Command::new(compiler)
        .arg(flag)
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string()
                + &String::from_utf8_lossy(&o.stderr);
            o.status.success() && Implementation::from_text(&text) == Some(implementation)
                || (implementation == Implementation::Mpich
                    && o.status.success()
                    && text.contains("-lmpich"))
        })
        .unwrap_or(false)
}

/// `mpi-refused-PID.txt` files the wrapper left (a rank that loaded another MPI).
pub fn refusals(run_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(trace::layout::MPI_REFUSED_PREFIX))
        })
        // Inside the run directory, no link followed, a regular file of at most 64 KiB (the
        // wrapper writes one line).
        .filter_map(|e| {
            trace::files::read_in_run_to_string(run_dir, Path::new(&e.file_name()), &REFUSAL).ok()
        })
        .map(|t| t.trim().to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A wrapper's refusal note: one line.
const REFUSAL: trace::files::Kind = trace::files::Kind {
    what: "an MPI refusal note",
    limit: 64 << 10,
};

/// A start-up decision `mpi-join/N.members`: one byte per world rank.
const DECISION: trace::files::Kind = trace::files::Kind {
    what: "an MPI start-up decision",
    limit: 16 << 20,
};

/// The ranks the wrapper's start-up agreement did not count in, one line per job and kind:
/// the decision `mpi-join/N.members` holds one `0` or `1` per world rank; a rank left out that
/// announced itself (`N.rank-R`) recorded on its own, one that did not was not recorded.
/// Read inside the run directory only (no link followed, regular files, bounded).
pub fn unannounced(run_dir: &Path) -> Vec<String> {
    let dir = run_dir.join("mpi-join");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut jobs: Vec<(u32, Vec<usize>, Vec<usize>)> = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(job) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".members"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let rel = Path::new("mpi-join").join(&name);
        let Ok(bytes) = trace::files::read_in_run(run_dir, &rel, &DECISION) else {
            continue;
        };
        let (mut alone, mut absent) = (Vec::new(), Vec::new());
        for (rank, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b'0') {
            let announced = Path::new("mpi-join").join(format!("{job}.rank-{rank}"));
            if trace::files::is_file_in_run(run_dir, &announced) {
                alone.push(rank);
            } else {
                absent.push(rank);
            }
        }
        if !alone.is_empty() || !absent.is_empty() {
            jobs.push((job, absent, alone));
        }
    }
    jobs.sort();
    let several = jobs.len() > 1 || jobs.iter().any(|(j, ..)| *j > 1);
    let list = |ranks: &[usize]| {
        let mut list: Vec<String> = ranks.iter().take(20).map(|r| r.to_string()).collect();
        if ranks.len() > 20 {
            list.push(format!("and {} more", ranks.len() - 20));
        }
        list.join(", ")
    };
    let mut out = Vec::new();
    for (job, absent, alone) in jobs {
        let of_job = if several {
            format!(" of MPI job {job}")
        } else {
            String::new()
        };
        if !absent.is_empty() {
            out.push(format!(
                "rank(s) {}{of_job} did not announce themselves to the MPI wrapper in this run \
                 directory: started without LD_PRELOAD or CONTEND_MPI_DIR (a wrapper script, a \
                 container or a launcher that rebuilt the environment?) and not recorded, or on \
                 a host that does not share this directory (give theirs to `contend report` \
                 with --mpi-from); the job ran as usual",
                list(&absent)
            ));
        }
        if !alone.is_empty() {
            let why = if absent.contains(&0) {
                "rank 0 was not recorded, so there was no clock to compare with"
            } else {
                "they announced themselves after rank 0's deadline (CONTEND_MPI_JOIN_S)"
            };
            out.push(format!(
                "rank(s) {}{of_job} recorded on their own: {why}; their clocks are aligned by \
                 CLOCK_REALTIME",
                list(&alone)
            ));
        }
    }
    out
}

/// As `which::which`, but a path is taken when it is a file at all (a launcher given by path
/// that is not executable is then refused by the launch, with the system's reason).
fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    ::which::which(name).ok()
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// FNV-1a, for the cache key (not security: it names a file; the cache's manifest holds its
/// sha256).
#[derive(Default)]
struct Fnv(u64);

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        if self.0 == 0 {
            self.0 = 0xcbf2_9ce4_8422_2325;
        }
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn open_mpi_ranks_get_the_wrapper_through_dash_x() {
        let (cmd, env, _) = rewrite(
            &s(&["mpirun", "-np", "4", "./app", "arg"]),
            Launcher::OpenMpi,
            Path::new("/c/libcontend-mpi.so"),
            Path::new("/runs/r1"),
        );
        assert!(env.is_empty());
        assert_eq!(cmd[0], "mpirun");
        assert_eq!(cmd[1], "-x");
        assert!(cmd[2].starts_with("LD_PRELOAD=/c/libcontend-mpi.so"));
        assert_eq!(cmd[3..5], s(&["-x", "CONTEND_MPI_DIR=/runs/r1"]));
        assert_eq!(cmd[5..], s(&["-np", "4", "./app", "arg"]));
    }

    #[test]
    fn every_open_mpi_application_context_gets_the_wrapper() {
        let (cmd, _, _) = rewrite(
            &s(&["mpirun", "-np", "1", "./a", ":", "-np", "2", "./b", "x"]),
            Launcher::OpenMpi,
            Path::new("/c/l.so"),
            Path::new("/r"),
        );
        let colon = cmd.iter().position(|a| a == ":").unwrap();
        assert_eq!(cmd[1..5], cmd[colon + 1..colon + 5]);
        assert_eq!(cmd[colon + 3..colon + 5], s(&["-x", "CONTEND_MPI_DIR=/r"]));
        assert_eq!(cmd[colon + 5..], s(&["-np", "2", "./b", "x"]));
        assert_eq!(
            cmd.iter().filter(|a| a.starts_with("LD_PRELOAD=")).count(),
            2
        );
    }

    #[test]
    fn hydra_uses_genv_srun_export_and_a_singleton_its_environment() {
        let lib = Path::new("/c/l.so");
        let dir = Path::new("/r");
        let (cmd, _, _) = rewrite(&s(&["mpiexec", "-n", "2", "a"]), Launcher::Hydra, lib, dir);
        assert_eq!(cmd[1], "-genv");
        assert_eq!(cmd[2], "LD_PRELOAD");
        assert!(cmd[3].starts_with("/c/l.so"));
        assert_eq!(cmd[4..7], s(&["-genv", "CONTEND_MPI_DIR", "/r"]));
        let (cmd, _, _) = rewrite(&s(&["srun", "-n", "2", "a"]), Launcher::Srun, lib, dir);
        assert!(cmd[1].starts_with("--export=ALL,LD_PRELOAD=/c/l.so"));
        assert!(cmd[1].ends_with(",CONTEND_MPI_DIR=/r"));
        let (cmd, env, _) = rewrite(&s(&["./a", "x"]), Launcher::Direct, lib, dir);
        assert_eq!(cmd, s(&["./a", "x"]));
        assert!(env.contains(&("CONTEND_MPI_DIR".into(), "/r".into())));
    }

    #[test]
    fn launchers_are_told_apart_by_name() {
        assert_eq!(launcher_of("srun"), Launcher::Srun);
        assert_eq!(launcher_of("/usr/bin/mpirun.mpich"), Launcher::Hydra);
        assert_eq!(launcher_of("mpirun.openmpi"), Launcher::OpenMpi);
        assert_eq!(launcher_of("orterun"), Launcher::OpenMpi);
        assert_eq!(launcher_of("./app"), Launcher::Direct);
    }

    #[test]
    fn the_program_is_the_first_executable_argument() {
        // /bin/sh stands in for the program: "4" and option words are passed over.
        let cmd = s(&["mpirun", "-np", "4", "--map-by", "core", "sh", "-c", "true"]);
        assert_eq!(
            program_of(&cmd, Launcher::OpenMpi).and_then(|p| p.file_name().map(|f| f.to_owned())),
            Some("sh".into())
        );
        assert_eq!(
            program_of(&s(&["mpirun", "-np", "4"]), Launcher::OpenMpi),
            None
        );
    }

    #[test]
    fn a_program_without_mpi_names_no_implementation() {
        assert_eq!(implementation_of_program(Path::new("/bin/sh")), None);
        assert_eq!(
            Implementation::from_text("libmpich.so.12"),
            Some(Implementation::Mpich)
        );
        assert_eq!(
            Implementation::from_text("libmpi.so.40"),
            Some(Implementation::OpenMpi)
        );
    }

    #[test]
    fn ranks_left_out_of_the_agreement_are_named_per_job() {
        let run = tempfile::tempdir().unwrap();
        assert!(unannounced(run.path()).is_empty());
        let join = run.path().join("mpi-join");
        std::fs::create_dir(&join).unwrap();
        std::fs::write(join.join("1.members"), "1011").unwrap();
        std::fs::write(join.join("1.rank-0"), "1").unwrap();
        let found = unannounced(run.path());
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("rank(s) 1 did not announce"),
            "{found:?}"
        );
        std::fs::write(join.join("2.members"), "100").unwrap();
        // A symlink is not followed.
        std::os::unix::fs::symlink(join.join("2.members"), join.join("3.members")).unwrap();
        let found = unannounced(run.path());
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("rank(s) 1 of MPI job 1 "), "{found:?}");
        assert!(
            found[1].starts_with("rank(s) 1, 2 of MPI job 2 "),
            "{found:?}"
        );
    }

    #[test]
    fn ranks_that_recorded_on_their_own_are_told_from_those_not_recorded() {
        let run = tempfile::tempdir().unwrap();
        let join = run.path().join("mpi-join");
        std::fs::create_dir(&join).unwrap();
        // Rank 0 never announced itself; ranks 1 and 2 did and decided that nobody joins.
        std::fs::write(join.join("1.members"), "000").unwrap();
        std::fs::write(join.join("1.rank-1"), "1").unwrap();
        std::fs::write(join.join("1.rank-2"), "2").unwrap();
        let found = unannounced(run.path());
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("rank(s) 0 did not announce"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("rank(s) 1, 2 recorded on their own: rank 0 was not recorded"),
            "{found:?}"
        );
        // A late rank: rank 0 decided without it.
        std::fs::write(join.join("1.members"), "110").unwrap();
        std::fs::write(join.join("1.rank-0"), "0").unwrap();
        let found = unannounced(run.path());
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .starts_with("rank(s) 2 recorded on their own: they announced themselves after"),
            "{found:?}"
        );
    }

    #[test]
    fn refusal_notes_are_read_bounded_and_not_through_links() {
        let run = tempfile::tempdir().unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "secret").unwrap();
        std::fs::write(run.path().join("mpi-refused-1.txt"), "built for X\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), run.path().join("mpi-refused-2.txt")).unwrap();
        std::fs::write(run.path().join("mpi-refused-3.txt"), vec![b'x'; 100 << 10]).unwrap();
        assert_eq!(refusals(run.path()), vec!["built for X".to_string()]);
    }
}
