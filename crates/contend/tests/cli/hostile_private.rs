//! Another user of the machine against contend running as root (issue 18, items 1 and 2). An
//! unprivileged user (`nobody`, through `setpriv`) plants what contend once trusted: directories
//! and symlinks in `/dev/shm` and `$TMPDIR` at the names its rings directory had, and a
//! `libcontend-mpi.so` (with a manifest vouching for it) where it looked for its MPI wrapper.
//! Each test asserts that root wrote nothing outside its own private directories (the planted
//! trees and a root-only victim file are unchanged, nothing of contend's is left behind) and
//! preloaded nothing it did not build (the planted library's constructor would leave a marker).

use crate::common::mpi::{preloaded_wrapper, require, OPEN_MPI};
use crate::common::{serial, show, text, CONTEND};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

const NOBODY: u32 = 65534;

/// contend runs as root and `setpriv` can act as nobody: true; else a visible skip.
fn attacker_available() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip("needs root: contend runs as root, the attacker as nobody");
        return false;
    }
    testkit::require_command("setpriv", "util-linux")
}

/// `program args` run as nobody (`setpriv`, no supplementary groups), which must succeed.
fn as_nobody<S: AsRef<OsStr>>(program: &[&str], args: &[S]) -> Output {
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .args(program)
        .args(args)
        .current_dir("/")
        .output()
        .expect("running setpriv");
    assert!(out.status.success(), "as nobody: {}", show(&out));
    out
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A scratch directory nobody may pass through but not list or write (0711), with `tmp` in it:
/// a `$TMPDIR` like /tmp (1777), where nobody plants.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o711);
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    chmod(&tmp, 0o1777);
    (dir, tmp)
}

/// What a path is, never followed: owner, mode, size, mtime, a symlink's target, a small
/// file's bytes.
#[derive(Debug, PartialEq, Eq)]
struct Node {
    uid: u32,
    mode: u32,
    len: u64,
    mtime: (i64, i64),
    link: Option<PathBuf>,
    bytes: Option<Vec<u8>>,
}

/// Every path under `root` (itself included), as it is.
fn tree(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
        let node = Node {
            uid: m.uid(),
            mode: m.mode(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            link: m.is_symlink().then(|| std::fs::read_link(&p).unwrap()),
            bytes: (m.is_file() && m.len() < 1 << 20).then(|| std::fs::read(&p).unwrap()),
        };
        out.insert(p, node);
    }
    out
}

/// What nobody planted, removed when the test ends (only what nobody still owns).
struct Planted(Vec<PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for p in &self.0 {
            match std::fs::symlink_metadata(p) {
                Ok(m) if m.uid() == NOBODY && m.is_dir() => {
                    let _ = std::fs::remove_dir_all(p);
                }
                Ok(m) if m.uid() == NOBODY => {
                    let _ = std::fs::remove_file(p);
                }
                _ => {}
            }
        }
    }
}

fn read_number(path: &str) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The `i`th PID after `first`, as the kernel hands them out (after pid_max - 1 they start
/// again at 300).
fn nth_pid(first: u32, i: u32, pid_max: u32) -> u32 {
    let p = first + i;
    if p >= pid_max {
        p - pid_max + 300
    } else {
        p
    }
}

/// Run as nobody: for the next `count` PIDs from `first`, every name the rings directory had
/// (`/dev/shm/contend-PID-RUN` and `$TMPDIR/contend-rings-PID`) made a directory everyone may
/// write (what `create_dir_all` accepted), holding symlinks to the victim at the names of the
/// probe's snapshot files, and a symlink farm `/dev/shm/contend-PID` to it. One process, no
/// forks, so planting takes none of the PIDs it plants for. Prints each path it made.
const PLANT_RINGS: &str = r#"
my ($first, $count, $max, $victim, $tmp, @runs) = @ARGV;
for my $i (0 .. $count - 1) {
    my $p = $first + $i;
    $p = $p - $max + 300 if $p >= $max;
    for my $run (@runs) {
        my $d = "/dev/shm/contend-$p-$run";
        next unless mkdir $d;
        chmod 0777, $d;
        symlink $victim, "$d/$p-1.maps" or die "$d: $!";
        symlink $victim, "$d/$p-1.maps.tmp" or die "$d: $!";
        print "$d\n";
    }
    my $l = "/dev/shm/contend-$p";
    print "$l\n" if symlink $victim, $l;
    my $t = "$tmp/contend-rings-$p";
    if (mkdir $t) {
        chmod 0777, $t;
        symlink $victim, "$t/$p-1.maps" or die "$t: $!";
        print "$t\n";
    }
}
"#;

/// Item 1: the rings directory. The program prints where its rings are and what that directory
/// is, from inside (`CONTEND_RINGS`, `stat`).
#[test]
fn the_rings_directory_is_random_private_and_never_one_another_user_planted() {
    if !attacker_available() || !testkit::require_command("perl", "perl-base") {
        return;
    }
    let _one = serial();
    let (dir, tmp) = scratch();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"root only: a secret\n").unwrap();
    chmod(&victim, 0o600);
    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(&victim)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    let victim_before = tree(&victim);

    let runs = ["hostile-a", "hostile-b"];
    let first = read_number("/proc/sys/kernel/ns_last_pid") + 1;
    let pid_max = read_number("/proc/sys/kernel/pid_max");
    let count = 400;
    let mut args: Vec<String> = vec![
        "-e".into(),
        PLANT_RINGS.into(),
        first.to_string(),
        count.to_string(),
        pid_max.to_string(),
        victim.display().to_string(),
        tmp.display().to_string(),
    ];
    args.extend(runs.iter().map(|r| r.to_string()));
    let planted_out = as_nobody(&["perl"], &args);
    let planted: Vec<PathBuf> = text(&planted_out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect();
    let _cleanup = Planted(planted.clone());
    // Most names are free (another run may hold a few): the farm covers the PIDs to come.
    assert!(
        planted.len() > count as usize * 2,
        "only {} planted: {}",
        planted.len(),
        show(&planted_out)
    );
    let planted_before: Vec<_> = planted.iter().map(|p| tree(p)).collect();

    let shm = Path::new("/dev/shm");
    let mut rings_seen = Vec::new();
    for run in runs {
        let child = Command::new(CONTEND)
            .current_dir(dir.path())
            .env("TMPDIR", &tmp)
            .args(["record", "--locks", "-o", run, "--", "sh", "-c"])
            .arg(
                "printf 'rings=%s\\n' \"$CONTEND_RINGS\"; \
                 stat -c 'mode=%a uid=%u type=%F' \"$CONTEND_RINGS\"",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", show(&out));
        if !(0..count).any(|i| nth_pid(first, i, pid_max) == pid) {
            testkit::check_not_made(&format!(
                "contend ran as PID {pid}, outside the {count} PIDs planted for from {first}: \
                 the old names were not in its way this time"
            ));
        }
        let stdout = text(&out.stdout);
        let field = |k: &str| {
            stdout
                .split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .unwrap_or_else(|| panic!("no {k} in {stdout}"))
                .to_string()
        };
        let rings = PathBuf::from(field("rings="));
        // Private: a directory of root's only, made for this run.
        assert_eq!(
            (field("mode=").as_str(), field("uid=").as_str()),
            ("700", "0"),
            "{stdout}"
        );
        assert!(stdout.contains("type=directory"), "{stdout}");
        // Where the rings belong, under a name with a random part: not the PID, not the run.
        let parent = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::fs::canonicalize(dir.path().join(run)).unwrap()
        };
        assert_eq!(
            rings.parent(),
            Some(parent.as_path()),
            "{}",
            rings.display()
        );
        let name = rings.file_name().unwrap().to_str().unwrap();
        let random = name
            .strip_prefix("contend-rings-")
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(random.len(), 6, "{name}");
        assert!(
            !name.contains(&pid.to_string()) && !name.contains(run),
            "{name}"
        );
        assert!(!planted.contains(&rings), "{name} is one nobody planted");
        // Removed at the end.
        assert!(!rings.exists(), "{} left behind", rings.display());
        // The program's own memory maps are kept, and only they: the shell's and its child
        // stat's (the off-CPU recorder saves a process's map at its first block, which for stat
        // can come before the loader mapped the probe).
        let maps: Vec<PathBuf> = std::fs::read_dir(dir.path().join(run).join("maps"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(!maps.is_empty(), "no memory map kept for {run}");
        for m in &maps {
            let bytes = std::fs::read(m).unwrap();
            assert!(
                !bytes.starts_with(b"root only"),
                "{} is the victim's content",
                m.display()
            );
            assert!(
                text(&bytes).lines().any(|l| l.ends_with("/sh")
                    || l.ends_with("/dash")
                    || l.ends_with("/bash")
                    || l.ends_with("/stat")
                    || l.contains("libcontend_probe")),
                "{} is not a memory map of the program: {}",
                m.display(),
                text(&bytes)
            );
        }
        rings_seen.push(rings);
    }
    assert_ne!(
        rings_seen[0], rings_seen[1],
        "the same rings directory twice"
    );
    assert_eq!(tree(&victim), victim_before, "the victim was written");
    for (p, before) in planted.iter().zip(&planted_before) {
        assert_eq!(&tree(p), before, "{} changed", p.display());
    }
}

/// An MPI program of 2 ranks, each passing a barrier.
const MPI_PROGRAM: &str = r#"
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d done\n", rank);
    MPI_Finalize();
    return 0;
}
"#;

/// What nobody plants as `libcontend-mpi.so`: loaded, it appends to MARKER.
const PLANTED_LIBRARY: &str = r#"
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        (void)write(fd, "preloaded\n", 10);
        close(fd);
    }
}
"#;

fn compile(compiler: &str, source: &str, flags: &[String], out: &Path) {
    let src = out.with_extension("c");
    std::fs::write(&src, source).unwrap();
    let result = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(result.status.success(), "{compiler}: {}", show(&result));
}

/// The MPI program and the planted library (readable by nobody, who copies it), in `dir`.
fn mpi_program_and_planted_library(dir: &Path, marker: &Path) -> (PathBuf, PathBuf) {
    let program = dir.join("ranks");
    compile(OPEN_MPI.mpicc, MPI_PROGRAM, &["-O2".into()], &program);
    let planted = dir.join("planted.so");
    compile(
        "cc",
        PLANTED_LIBRARY,
        &[
            "-shared".into(),
            "-fPIC".into(),
            format!("-DMARKER=\"{}\"", marker.display()),
        ],
        &planted,
    );
    chmod(&planted, 0o644);
    (program, planted)
}

/// `contend record --mpi` of the program on 2 Open MPI ranks in `dir`, with `tmp` as TMPDIR,
/// HOME, XDG_CACHE_HOME and CONTEND_CACHE unset, then `cache` as CONTEND_CACHE if given. Must
/// succeed with both ranks recorded (so the wrapper contend built was preloaded).
fn record_mpi(dir: &Path, run: &str, program: &Path, tmp: &Path, cache: Option<&Path>) -> Output {
    let mut cmd = Command::new(CONTEND);
    cmd.current_dir(dir)
        .env("TMPDIR", tmp)
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("CONTEND_CACHE");
    if let Some(cache) = cache {
        cmd.env("CONTEND_CACHE", cache);
    }
    cmd.args(["record", "--mpi", "--interval", "0", "-o", run, "--"])
        .args(OPEN_MPI.launcher)
        .args(["-np", "2"])
        .arg(program);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let mut ranks: Vec<String> = std::fs::read_dir(dir.join(run).join("streams"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("rank-"))
        .collect();
    ranks.sort();
    assert_eq!(ranks, ["rank-0.cst", "rank-1.cst"], "{}", show(&out));
    out
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
    text(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The entries of `dir` whose names start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Item 2: with no cache location (HOME, XDG_CACHE_HOME, CONTEND_CACHE unset) the wrapper went
/// to `$TMPDIR/contend-cache`, and with CONTEND_CACHE naming another user's directory, there;
/// whatever `libcontend-mpi.so` was found was preloaded into every rank, as root.
#[test]
fn a_planted_mpi_wrapper_is_never_preloaded() {
    if !attacker_available()
        || !require(&OPEN_MPI)
        || !testkit::require_command("cc", "gcc")
        || !testkit::require_command("sha256sum", "coreutils")
    {
        return;
    }
    let _one = serial();
    let (dir, tmp) = scratch();
    let marker = dir.path().join("marker");
    let (program, planted) = mpi_program_and_planted_library(dir.path(), &marker);

    // The wrapper's name for this MPI and these sources, from a cache of root's own.
    let good = dir.path().join("good-cache");
    let out = record_mpi(dir.path(), "run-good", &program, &tmp, Some(&good));
    let built = preloaded_wrapper(&text(&out.stderr));
    let good_real = std::fs::canonicalize(&good).unwrap();
    assert_eq!(built.parent(), Some(good_real.as_path()), "{}", show(&out));
    let name = built.file_name().unwrap().to_str().unwrap().to_string();
    let key = name
        .strip_prefix("libcontend-mpi-openmpi-")
        .and_then(|k| k.strip_suffix(".so"))
        .unwrap_or_else(|| panic!("{name}"))
        .to_string();
    // A manifest vouching for the planted library under that name.
    let manifest = format!(
        r#"{{"files":{{"{name}":{{"sha256":"{}","size":{}}}}}}}"#,
        sha256(&planted),
        std::fs::metadata(&planted).unwrap().len()
    );
    let plant = r#"set -e
c="$1"; mkdir -p "$c/mpi/openmpi-$2"
cp "$3" "$c/mpi/openmpi-$2/libcontend-mpi.so"
cp "$3" "$c/$4"
printf '%s' "$5" > "$c/manifest.json"
chmod -R a+rwX "$c""#;
    let old_default = tmp.join("contend-cache");
    let theirs = tmp.join("theirs");
    let _cleanup = Planted(vec![old_default.clone(), theirs.clone()]);
    for c in [&old_default, &theirs] {
        as_nobody(
            &["sh", "-c", plant, "plant"],
            &[
                c.as_os_str(),
                OsStr::new(&key),
                planted.as_os_str(),
                OsStr::new(&name),
                OsStr::new(&manifest),
            ],
        );
    }
    let planted_before = [tree(&old_default), tree(&theirs)];
    let contend_cache_dirs = || named(&tmp, "contend-cache-");

    // No cache location: the old default in TMPDIR is not even looked at.
    let out = record_mpi(dir.path(), "run-unset", &program, &tmp, None);
    let err = text(&out.stderr);
    assert!(
        err.contains("contend: warning: no cache directory ($CONTEND_CACHE, $XDG_CACHE_HOME and $HOME are unset)"),
        "{err}"
    );
    let used = preloaded_wrapper(&err);
    assert!(err.contains(", built for this run only)"), "{err}");
    let temporary = used.parent().unwrap();
    assert_eq!(temporary.parent(), Some(tmp.as_path()), "{err}");
    assert!(
        temporary
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("contend-cache-"),
        "{err}"
    );
    assert!(!marker.exists(), "the planted library was preloaded: {err}");
    assert!(!temporary.exists(), "{} left behind", temporary.display());

    // CONTEND_CACHE naming a directory of nobody's, mode 777: refused, with its name.
    let out = record_mpi(dir.path(), "run-theirs", &program, &tmp, Some(&theirs));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "contend: warning: cache {} not used: it is owned by uid 65534, not by uid 0",
            theirs.display()
        )),
        "{err}"
    );
    let used = preloaded_wrapper(&err);
    assert!(!used.starts_with(&theirs), "{err}");
    assert!(err.contains(", built for this run only)"), "{err}");
    assert!(!marker.exists(), "the planted library was preloaded: {err}");

    // Nothing written into what nobody planted, nothing of root's left in TMPDIR.
    assert_eq!(tree(&old_default), planted_before[0]);
    assert_eq!(tree(&theirs), planted_before[1]);
    assert_eq!(contend_cache_dirs(), Vec::<PathBuf>::new());
}

/// Item 2, the manifest: a wrapper in root's own cache that is no longer what contend built
/// (other bytes, or a symlink to other bytes) is built again, never preloaded.
#[test]
fn a_cached_wrapper_that_changed_is_built_again_not_preloaded() {
    if !require(&OPEN_MPI)
        || !testkit::require_command("cc", "gcc")
        || !testkit::require_command("sha256sum", "coreutils")
    {
        return;
    }
    let _one = serial();
    let (dir, tmp) = scratch();
    let marker = dir.path().join("marker");
    let (program, planted) = mpi_program_and_planted_library(dir.path(), &marker);
    let cache = dir.path().join("cache");
    let recorded = |library: &Path| -> (String, u64) {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(cache.join("manifest.json")).unwrap()).unwrap();
        let e = &m["files"][library.file_name().unwrap().to_str().unwrap()];
        (
            e["sha256"].as_str().unwrap_or_default().to_string(),
            e["size"].as_u64().unwrap_or_default(),
        )
    };

    let out = record_mpi(dir.path(), "run-1", &program, &tmp, Some(&cache));
    let library = preloaded_wrapper(&text(&out.stderr));
    let cache_real = std::fs::canonicalize(&cache).unwrap();
    assert_eq!(library.parent(), Some(cache_real.as_path()));
    let built = (sha256(&library), std::fs::metadata(&library).unwrap().len());
    assert_eq!(recorded(&library), built);

    let changes: [(&str, &dyn Fn()); 2] = [
        ("other bytes", &|| {
            std::fs::copy(&planted, &library).unwrap();
        }),
        ("a symlink", &|| {
            std::fs::remove_file(&library).unwrap();
            std::os::unix::fs::symlink(&planted, &library).unwrap();
        }),
    ];
    for (i, (what, change)) in changes.iter().enumerate() {
        change();
        let out = record_mpi(
            dir.path(),
            &format!("run-{}", i + 2),
            &program,
            &tmp,
            Some(&cache),
        );
        let err = text(&out.stderr);
        assert!(
            err.contains("contend: note: the cached MPI wrapper is not used ("),
            "{what}: {err}"
        );
        assert!(err.contains("): built again"), "{what}: {err}");
        assert_eq!(preloaded_wrapper(&err), library, "{what}");
        assert!(
            !marker.exists(),
            "{what}: the changed library was preloaded: {err}"
        );
        let meta = std::fs::symlink_metadata(&library).unwrap();
        assert!(meta.is_file(), "{what}: not rebuilt as a file");
        let now = (sha256(&library), meta.len());
        assert_ne!(now.0, sha256(&planted), "{what}");
        assert_eq!(
            recorded(&library),
            now,
            "{what}: the manifest and the file disagree"
        );
    }
    // The cache holds the wrapper and the manifest, no scratch left.
    let mut names: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            library.file_name().unwrap().to_str().unwrap(),
            "manifest.json"
        ]
    );
}
