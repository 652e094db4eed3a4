//! The lock probe library: finding it, checking it is one, and telling before a launch
//! whether it can be preloaded into the program at all.

use crate::notice::{warn, About, Notice};
use crate::RecordError;
use observe::elf::{ElfHeader, LoadKind};
use observe::lockrings::Announced;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use trace::layout::StreamRole;
use trace::meta::{Meta, Unavailable};
use trace::Captured;

/// Where an installed contend finds the probe it carries (the binary embeds it and writes it
/// to the user's cache on first use): set once by the binary, asked only when no probe is
/// beside the executable.
type Embedded = fn() -> Result<PathBuf, String>;
static EMBEDDED: std::sync::OnceLock<Embedded> = std::sync::OnceLock::new();

/// Gives the probe an installed contend carries (see `EMBEDDED`).
pub fn set_embedded(provider: Embedded) {
    let _ = EMBEDDED.set(provider);
}

/// The probe library: `$CONTEND_PROBE`, else beside this executable (where cargo builds it),
/// else the one contend carries, from its cache.
pub fn find_probe() -> Result<PathBuf, RecordError> {
    if let Some(p) = std::env::var_os("CONTEND_PROBE") {
        let p = PathBuf::from(p);
        if p.is_file() {
            check_probe(&p, "CONTEND_PROBE names")?;
            return Ok(p);
        }
        return Err(RecordError::bad(format!(
            "CONTEND_PROBE names {}, which is not a file",
            p.display()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|e| RecordError::Failed(format!("finding the contend executable: {e}")))?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let candidates = [
        dir.join("libcontend_probe.so"),
        dir.join("deps/libcontend_probe.so"),
        dir.join("../lib/contend/libcontend_probe.so"),
    ];
    // Cargo leaves a copy both beside the binary (workspace builds) and in deps/ (builds of
    // contend alone): take the newest, so a stale copy never shadows a fresh build.
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    candidates
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| modified(p))
        .cloned()
        .map(Ok)
        .or_else(|| EMBEDDED.get().map(|f| f().map_err(RecordError::Failed)))
        .transpose()?
        .ok_or_else(|| {
            RecordError::Failed(format!(
                "the lock probe libcontend_probe.so is not installed beside contend (looked in {}): build it with `cargo build --release -p probe`, or set CONTEND_PROBE to its path",
                dir.display()
            ))
        })
}

/// Refuses a probe library the dynamic loader would not preload: anything but an ELF shared
/// library built for this machine (a text file, a program, another architecture's library).
/// `origin` says where the path came from, for the message (`CONTEND_PROBE names`).
pub fn check_probe(path: &Path, origin: &str) -> Result<(), RecordError> {
    let shown = path.display();
    let bad = |what: String| {
        RecordError::bad(format!(
            "{origin} {shown}, which is {what}, not an ELF shared library for {}: point it at libcontend_probe.so (cargo build -p probe)",
            host_machine()
        ))
    };
    match observe::elf::inspect(path) {
        Err(e) => Err(RecordError::bad(format!(
            "{origin} {shown}, which cannot be read: {e}"
        ))),
        Ok(LoadKind::Script { .. }) => Err(bad("a script".into())),
        Ok(LoadKind::Other(what)) => Err(bad(match what {
            "empty" => "an empty file".into(),
            "text" => "a text file".into(),
            other => format!("{other} of no format contend knows"),
        })),
        Ok(LoadKind::Elf(h)) if h.is_host() && h.is_shared_library() => Ok(()),
        Ok(LoadKind::Elf(h)) => Err(bad(h.describe())),
    }
}

/// This machine's architecture as messages name it.
fn host_machine() -> String {
    match observe::elf::HOST_MACHINE {
        Some(machine) => {
            let h = observe::elf::ElfHeader {
                bits: usize::BITS as u8,
                little_endian: cfg!(target_endian = "little"),
                machine,
                file_type: 0,
                interpreter: false,
                pie: false,
            };
            format!("{} ({}-bit)", h.machine_name(), h.bits)
        }
        None => "this machine".into(),
    }
}

/// Who contend runs programs as: its real user and group (what the kernel compares a setuid or
/// setgid program's owner with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealIds {
    pub uid: u32,
    pub gid: u32,
}

impl RealIds {
    pub fn current() -> RealIds {
        // SAFETY: getuid and getgid cannot fail.
        unsafe {
            RealIds {
                uid: libc::getuid(),
                gid: libc::getgid(),
            }
        }
    }
}

/// What stands in the way of the probe in a program, seen in its file before the launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obstacle {
    /// The program, as the command names it.
    pub program: String,
    /// A program a launcher in the command starts (`sh -c PROG`, `taskset -c 0 PROG`), not
    /// the command's own: the probe may still be loaded in the launcher.
    pub launched: bool,
    /// Why, in a sentence that names the program.
    pub why: String,
}

/// Why the probe cannot be preloaded into the program `command` runs, when its file says so
/// before it runs: a statically linked program (no dynamic loader to preload anything), one for
/// another architecture or word size, or one the kernel runs in secure-execution mode (setuid
/// or setgid to someone else, file capabilities), for which the loader ignores LD_PRELOAD. A
/// script is judged by its interpreter; a launcher (`sh -c`, `env`, `taskset`, `time`, ...) by
/// the programs among its arguments too. `None`: nothing stands in the way that can be seen (a
/// program not found is left to the launch to report).
pub fn load_obstacle(command: &[String]) -> Option<Obstacle> {
    let name = command.first()?;
    let ids = RealIds::current();
    if let Some(why) = obstacle_of(name, &resolve(name)?, ids) {
        return Some(Obstacle {
            program: name.clone(),
            launched: false,
            why,
        });
    }
    let base = name.rsplit('/').next().unwrap_or(name);
    if !crate::sharing::LAUNCHERS.contains(&base) {
        return None;
    }
    command[1..].iter().find_map(|a| {
        // `sh -c 'prog args; ...'`: the script's first word.
        let word = a
            .split_whitespace()
            .next()?
            .trim_end_matches([';', '&', '|', ')']);
        if word.starts_with('-') || word.contains('=') {
            return None;
        }
        let path = resolve(word).filter(|p| p.is_file())?;
        obstacle_of(word, &path, ids).map(|why| Obstacle {
            program: word.to_string(),
            launched: true,
            why,
        })
    })
}

/// [`load_obstacle`] for the program file `path` (`name` as the command gives it), run by
/// `ids`.
pub fn obstacle_of(name: &str, path: &Path, ids: RealIds) -> Option<String> {
    match observe::elf::inspect(path).ok()? {
        LoadKind::Elf(h) => elf_obstacle(name, path, &h, ids),
        LoadKind::Script { interpreter } => {
            // The kernel runs the interpreter with the script as argument: the interpreter is
            // what the loader sees (a setuid bit on a script is ignored).
            let shown = format!("{name}'s interpreter {}", interpreter.display());
            match observe::elf::inspect(&interpreter).ok()? {
                LoadKind::Elf(h) => elf_obstacle(&shown, &interpreter, &h, ids),
                _ => None,
            }
        }
        LoadKind::Other(_) => None,
    }
}

fn elf_obstacle(name: &str, path: &Path, h: &ElfHeader, ids: RealIds) -> Option<String> {
    if !h.is_host() {
        return Some(format!(
            "{name} is {}: the lock probe, built for {}, cannot be loaded into it",
            h.describe(),
            host_machine()
        ));
    }
    if !h.interpreter {
        return Some(format!(
            "{name} is statically linked: the lock probe cannot be preloaded (LD_PRELOAD needs the dynamic loader)"
        ));
    }
    secure_execution(name, path, ids)
}

/// Whether the kernel will run `path` in secure-execution mode (AT_SECURE) for `ids`, in which
/// the dynamic loader ignores LD_PRELOAD paths: setuid to another user, setgid to another
/// group, or file capabilities given to a user other than root. A `nosuid` mount ignores all
/// three.
fn secure_execution(name: &str, path: &Path, ids: RealIds) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let mode = m.mode();
    let setuid = mode & libc::S_ISUID != 0 && m.uid() != ids.uid;
    // Set-group-ID without group execute marks mandatory locking, not a privilege.
    let setgid = mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0 && m.gid() != ids.gid;
    let capabilities = ids.uid != 0 && has_file_capabilities(path);
    if !(setuid || setgid || capabilities) || mounted_nosuid(path) {
        return None;
    }
    let what = if setuid {
        format!(
            "setuid (owner uid {}, contend runs as uid {})",
            m.uid(),
            ids.uid
        )
    } else if setgid {
        format!(
            "setgid (group gid {}, contend runs as gid {})",
            m.gid(),
            ids.gid
        )
    } else {
        "given file capabilities".to_string()
    };
    Some(format!(
        "{name} is {what}: the kernel runs it in secure-execution mode, where the dynamic loader ignores LD_PRELOAD (run contend as its owner, or record a copy without the bit)"
    ))
}

fn has_file_capabilities(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: NUL-terminated strings; a null buffer of size 0 only asks for the size.
    unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        ) > 0
    }
}

fn mounted_nosuid(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a zeroed statvfs is a valid out-parameter; the path is NUL-terminated.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c.as_ptr(), &mut s) == 0 && s.f_flag & libc::ST_NOSUID != 0
    }
}

/// The file a command's program name runs, as execvp finds it: a name with a slash as given,
/// else the first executable of that name on PATH.
fn resolve(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        Some(PathBuf::from(name))
    } else {
        which::which(name).ok()
    }
}

/// What a `--locks` run learnt about the probe, into meta.json: in how many processes it was
/// loaded (`lock_probe_processes`). Loaded in none, `locks` is not captured: it is unavailable,
/// with the command's `obstacle` (what [`load_obstacle`] saw before the launch) or the possible
/// causes as the reason, so that no report shows zero locks for a program that was not
/// measured. Loaded in some, what was not measured is unavailable too: the program a launcher
/// started that the probe cannot enter, else the processes the sampler saw that the probe never
/// announced itself in (a static program a child exec'd, say). Each is told as a warning.
pub fn account(
    meta: &mut Meta,
    announced: Option<&Announced>,
    obstacle: Option<&Obstacle>,
    notices: &mut dyn FnMut(Notice),
) {
    let none = Announced::default();
    let announced = announced.unwrap_or(&none);
    let mut loaded: BTreeSet<u32> = announced.pids.clone();
    // A probe that took a lock has a stream, announced or not (an older probe does not announce).
    loaded.extend(meta.streams_with(StreamRole::Lock).map(|s| s.pid));
    // Processes the sampler saw, by the name their main thread (else any thread) last had: a
    // child caught between fork and exec still has its parent's.
    let mut seen: BTreeMap<u32, String> = BTreeMap::new();
    for s in meta.streams_with(StreamRole::Sampler) {
        let name = seen.entry(s.pid).or_default();
        if s.tid == s.pid || name.is_empty() {
            *name = s.name.clone();
        }
    }
    // A forked child had the probe at its fork. It still had unless it exec'd a program that
    // did not announce itself: then its name changed (the same name, or a child the sampler
    // never saw, is taken as loaded: a miss, never a false claim).
    for (pid, at_fork) in &announced.forked {
        if seen.get(pid).is_none_or(|last| last == at_fork) {
            loaded.insert(*pid);
        }
    }
    meta.lock_probe_processes = Some(loaded.len() as u64);
    if loaded.is_empty() {
        let why = match obstacle {
            Some(o) if !o.launched => o.why.clone(),
            _ => NOT_ANNOUNCED.to_string(),
        };
        warn(
            notices,
            About::Outcome,
            format!("locks were not measured: {why}"),
        );
        meta.captured
            .retain(|c| *c != Captured::Locks && *c != Captured::AllocSites);
        meta.lock_sample_every = None;
        meta.unavailable.push(Unavailable {
            what: "locks".into(),
            why,
        });
        return;
    }
    if let Some(o) = obstacle.filter(|o| o.launched) {
        warn(
            notices,
            About::Outcome,
            format!("locks of {} were not measured: {}", o.program, o.why),
        );
        meta.unavailable.push(Unavailable {
            what: format!("locks of {}", o.program),
            why: o.why.clone(),
        });
        return;
    }
    // The probe's pids are the sampler's unless the program made a pid namespace: then they
    // cannot be compared, and nothing is claimed. Nor when the marks were cut short, or
    // nothing was sampled.
    if announced.truncated || meta.sampling.is_none() || !seen.keys().any(|p| loaded.contains(p)) {
        return;
    }
    let without: Vec<String> = seen
        .iter()
        .filter(|(pid, _)| !loaded.contains(pid))
        .map(|(pid, name)| format!("{pid} (last seen as {})", printable(name)))
        .collect();
    if without.is_empty() {
        return;
    }
    const LISTED: usize = 8;
    let more = without.len().saturating_sub(LISTED);
    let why = format!(
        "the probe never announced itself in process(es) {}{}: statically linked or setuid programs, or programs started without LD_PRELOAD; their locks are not counted",
        without[..without.len().min(LISTED)].join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    );
    warn(
        notices,
        About::Outcome,
        format!(
            "locks of {} of {} process(es) were not measured: {why}",
            without.len(),
            seen.len()
        ),
    );
    meta.unavailable.push(Unavailable {
        what: format!("locks in {} process(es)", without.len()),
        why,
    });
}

/// Why no process announced the probe, when nothing was seen before the launch.
pub const NOT_ANNOUNCED: &str = "the probe did not announce itself in any process: the program (and what it started) may be statically linked or setuid, may have removed LD_PRELOAD from its environment or run as a user who cannot write the rings directory, or the dynamic loader refused the library (see its `ld.so` message above)";

/// A thread name as a line of text shows it (a name is the program's to choose).
fn printable(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use trace::meta::StreamEntry;
    use trace::StreamKind;

    /// A 64-bit ELF header of this machine with no program headers: no interpreter, so what
    /// the loader sees as a statically linked executable.
    fn static_program() -> Vec<u8> {
        let mut d = vec![0u8; 64];
        d[..4].copy_from_slice(b"\x7fELF");
        d[4] = 2; // ELFCLASS64
        d[5] = if cfg!(target_endian = "little") { 1 } else { 2 };
        d[6] = 1; // EV_CURRENT
        let put = |d: &mut Vec<u8>, at: usize, v: u16| {
            let b = if cfg!(target_endian = "little") {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            };
            d[at..at + 2].copy_from_slice(&b);
        };
        put(&mut d, 16, 2); // ET_EXEC
        put(&mut d, 18, observe::elf::HOST_MACHINE.unwrap_or(0));
        d
    }

    /// The same with one program header, PT_INTERP: a dynamically linked program.
    fn dynamic_program() -> Vec<u8> {
        let mut d = static_program();
        let word = |v: u64| {
            if cfg!(target_endian = "little") {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        d[32..40].copy_from_slice(&word(64)); // e_phoff
        let half = |v: u16| {
            if cfg!(target_endian = "little") {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        d[54..56].copy_from_slice(&half(56)); // e_phentsize
        d[56..58].copy_from_slice(&half(1)); // e_phnum
        let mut phdr = vec![0u8; 56];
        let interp = if cfg!(target_endian = "little") {
            3u32.to_le_bytes()
        } else {
            3u32.to_be_bytes()
        };
        phdr[..4].copy_from_slice(&interp); // PT_INTERP
        d.extend(phdr);
        d
    }

    fn file(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    fn me() -> RealIds {
        RealIds::current()
    }

    #[test]
    fn only_a_shared_library_of_this_machine_is_taken_as_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let text = file(dir.path(), "probe.txt", b"not a library\n", 0o644);
        let e = check_probe(&text, "CONTEND_PROBE names").unwrap_err();
        assert!(matches!(e, RecordError::BadInput(_)), "{e}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!(
                "CONTEND_PROBE names {}, which is a text file, not an ELF shared library for",
                text.display()
            )),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "one line: {msg}");
        let script = file(dir.path(), "probe.sh", b"#!/bin/sh\n", 0o755);
        assert!(check_probe(&script, "x")
            .unwrap_err()
            .to_string()
            .contains("which is a script"));
        let empty = file(dir.path(), "empty.so", b"", 0o644);
        assert!(check_probe(&empty, "x")
            .unwrap_err()
            .to_string()
            .contains("which is an empty file"));
        // A program is not a library, even a position-independent one (ET_DYN).
        let exe = std::env::current_exe().unwrap();
        assert!(check_probe(&exe, "x")
            .unwrap_err()
            .to_string()
            .contains("ELF executable"));
        let missing = check_probe(&dir.path().join("missing.so"), "x").unwrap_err();
        assert!(missing.to_string().contains("cannot be read"), "{missing}");
        // The C library this test runs with is a shared library of this machine.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc_path = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
            .expect("libc is mapped");
        check_probe(Path::new(libc_path), "x").unwrap();
    }

    #[test]
    fn a_static_program_is_seen_before_the_launch_directly_or_as_an_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let exe = file(dir.path(), "static-prog", &static_program(), 0o755);
        let why = obstacle_of("static-prog", &exe, me()).expect("static");
        assert_eq!(
            why,
            "static-prog is statically linked: the lock probe cannot be preloaded (LD_PRELOAD needs the dynamic loader)"
        );
        let script = format!("#!{} -x\n", exe.display());
        let s = file(dir.path(), "run.sh", script.as_bytes(), 0o755);
        let why = obstacle_of("./run.sh", &s, me()).expect("a static interpreter");
        assert!(
            why.starts_with(&format!(
                "./run.sh's interpreter {} is statically linked",
                exe.display()
            )),
            "{why}"
        );
        // A dynamic program, and a script run by one: nothing in the way.
        let dynamic = std::env::current_exe().unwrap();
        assert_eq!(obstacle_of("me", &dynamic, me()), None);
        let s = file(dir.path(), "ok.sh", b"#!/bin/sh\ntrue\n", 0o755);
        assert_eq!(obstacle_of("ok.sh", &s, me()), None);
        // Text is left to the launch (it fails to start with its own message).
        assert_eq!(
            obstacle_of("notes", &file(dir.path(), "notes", b"hi\n", 0o755), me()),
            None
        );
    }

    #[test]
    fn another_architecture_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = vec![0u8; 52];
        d[..4].copy_from_slice(b"\x7fELF");
        d[4] = 1; // ELFCLASS32
        d[5] = 1; // little-endian
        d[6] = 1;
        d[16..18].copy_from_slice(&2u16.to_le_bytes());
        d[18..20].copy_from_slice(&3u16.to_le_bytes()); // EM_386
        let exe = file(dir.path(), "old", &d, 0o755);
        let why = obstacle_of("old", &exe, me()).expect("32-bit");
        assert!(
            why.starts_with("old is a 32-bit i386 ELF executable: the lock probe, built for "),
            "{why}"
        );
    }

    #[test]
    fn setuid_to_another_user_is_secure_execution_and_to_oneself_is_not() {
        let dir = tempfile::tempdir().unwrap();
        // A dynamic program with the set-user-ID bit, owned by whoever runs the test.
        let exe = file(dir.path(), "suid", &dynamic_program(), 0o4755);
        let LoadKind::Elf(h) = observe::elf::inspect(&exe).unwrap() else {
            panic!("an ELF header");
        };
        assert!(h.interpreter && h.is_host(), "{h:?}");
        let owner = std::fs::metadata(&exe).unwrap().uid();
        let gid = std::fs::metadata(&exe).unwrap().gid();
        let other = RealIds {
            uid: owner.wrapping_add(1),
            gid,
        };
        if mounted_nosuid(&exe) {
            // The kernel ignores the bit there: so does the check.
            assert_eq!(obstacle_of("suid", &exe, other), None);
            return;
        }
        let why = obstacle_of("suid", &exe, other).expect("secure execution");
        assert_eq!(
            why,
            format!("suid is setuid (owner uid {owner}, contend runs as uid {}): the kernel runs it in secure-execution mode, where the dynamic loader ignores LD_PRELOAD (run contend as its owner, or record a copy without the bit)", owner.wrapping_add(1))
        );
        let owner_runs = RealIds { uid: owner, gid };
        assert_eq!(obstacle_of("suid", &exe, owner_runs), None);
        // Set-group-ID to another group, with group execute.
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o2755)).unwrap();
        let why = obstacle_of(
            "sgid",
            &exe,
            RealIds {
                uid: owner,
                gid: gid.wrapping_add(1),
            },
        )
        .expect("setgid");
        assert!(why.starts_with("sgid is setgid (group gid "), "{why}");
        // Without group execute it marks mandatory locking: no privilege.
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o2745)).unwrap();
        assert_eq!(
            obstacle_of(
                "sgid",
                &exe,
                RealIds {
                    uid: owner,
                    gid: gid.wrapping_add(1)
                }
            ),
            None
        );
    }

    #[test]
    fn a_launcher_is_looked_through_for_the_program_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let exe = file(dir.path(), "static-prog", &static_program(), 0o755);
        let shown = exe.display().to_string();
        let command: Vec<String> = ["sh", "-c", &format!("{shown} 3; echo done")]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = load_obstacle(&command).expect("the program sh runs is static");
        assert!(o.launched);
        assert_eq!(o.program, shown);
        let direct = load_obstacle(&[shown.clone(), "3".into()]).expect("static");
        assert!(!direct.launched);
        // Not a launcher: its arguments are not looked at.
        assert_eq!(
            load_obstacle(&[
                std::env::current_exe().unwrap().display().to_string(),
                shown
            ]),
            None
        );
    }

    fn stream(pid: u32, tid: u32, role: StreamRole, name: &str) -> StreamEntry {
        StreamEntry {
            file: format!("streams/{pid}-{tid}-{role:?}.cst"),
            kind: StreamKind::Thread,
            pid,
            tid,
            rank: None,
            events: 1,
            dropped: 0,
            name: name.into(),
            role: Some(role),
        }
    }

    fn locks_meta() -> Meta {
        let mut meta = Meta::new(vec!["prog".into()]);
        meta.capture(Captured::Schedstat);
        meta.capture(Captured::Locks);
        meta.capture(Captured::AllocSites);
        meta.sampling = Some(trace::meta::Sampling::default());
        meta
    }

    fn announced(pids: &[u32]) -> Announced {
        Announced {
            pids: pids.iter().copied().collect(),
            ..Announced::default()
        }
    }

    #[test]
    fn a_probe_loaded_nowhere_makes_locks_unavailable_not_zero() {
        let mut meta = locks_meta();
        meta.lock_sample_every = Some(10);
        meta.streams
            .push(stream(10, 10, StreamRole::Sampler, "prog"));
        let obstacle = Obstacle {
            program: "prog".into(),
            launched: false,
            why: "prog is statically linked: ...".into(),
        };
        let mut told = Vec::new();
        account(
            &mut meta,
            Some(&announced(&[])),
            Some(&obstacle),
            &mut |n| told.push(n),
        );
        assert!(!meta.has(Captured::Locks) && !meta.has(Captured::AllocSites));
        assert!(meta.has(Captured::Schedstat));
        assert_eq!(meta.lock_probe_processes, Some(0));
        assert_eq!(meta.lock_sample_every, None);
        assert_eq!(
            meta.unavailable,
            [Unavailable {
                what: "locks".into(),
                why: obstacle.why.clone()
            }]
        );
        assert_eq!(told.len(), 1);
        assert_eq!(
            told[0].to_string(),
            "warning: locks were not measured: prog is statically linked: ..."
        );
        // Nothing seen before the launch: the possible causes.
        let mut meta = locks_meta();
        account(&mut meta, Some(&announced(&[])), None, &mut |_| {});
        assert_eq!(meta.unavailable[0].why, NOT_ANNOUNCED);
    }

    #[test]
    fn a_probe_that_announced_itself_measured_even_without_a_lock() {
        let mut meta = locks_meta();
        meta.streams
            .push(stream(10, 10, StreamRole::Sampler, "prog"));
        let mut told = Vec::new();
        account(&mut meta, Some(&announced(&[10])), None, &mut |n| {
            told.push(n)
        });
        assert!(meta.has(Captured::Locks));
        assert_eq!(meta.lock_probe_processes, Some(1));
        assert!(meta.unavailable.is_empty() && told.is_empty(), "{told:?}");
        // A lock stream is proof enough (a probe from before announcements).
        let mut meta = locks_meta();
        meta.streams
            .push(stream(11, 12, StreamRole::Lock, "worker"));
        account(&mut meta, Some(&announced(&[])), None, &mut |_| {});
        assert!(meta.has(Captured::Locks));
        assert_eq!(meta.lock_probe_processes, Some(1));
    }

    #[test]
    fn processes_the_probe_never_entered_are_counted_and_named() {
        let mut meta = locks_meta();
        meta.streams.push(stream(10, 10, StreamRole::Sampler, "sh"));
        meta.streams
            .push(stream(11, 11, StreamRole::Sampler, "static\nprog"));
        meta.streams
            .push(stream(11, 13, StreamRole::Sampler, "worker"));
        meta.streams
            .push(stream(12, 12, StreamRole::Sampler, "dyn"));
        meta.streams.push(stream(12, 14, StreamRole::Lock, "dyn"));
        let mut told = Vec::new();
        account(&mut meta, Some(&announced(&[10])), None, &mut |n| {
            told.push(n)
        });
        assert!(meta.has(Captured::Locks));
        assert_eq!(meta.lock_probe_processes, Some(2));
        assert_eq!(meta.unavailable.len(), 1, "{:?}", meta.unavailable);
        let u = &meta.unavailable[0];
        assert_eq!(u.what, "locks in 1 process(es)");
        assert!(
            u.why.starts_with(
                "the probe never announced itself in process(es) 11 (last seen as static?prog): "
            ),
            "{}",
            u.why
        );
        assert_eq!(told.len(), 1);
        assert!(told[0]
            .text
            .starts_with("locks of 1 of 3 process(es) were not measured"));
        // Announcements cut short, or no sampler: nothing to compare, nothing claimed.
        let mut meta = locks_meta();
        meta.streams.push(stream(11, 11, StreamRole::Sampler, "x"));
        let cut = Announced {
            pids: [10].into_iter().collect(),
            truncated: true,
            ..Announced::default()
        };
        account(&mut meta, Some(&cut), None, &mut |_| {});
        assert!(meta.unavailable.is_empty());
        // No pid in common (a pid namespace): not comparable, nothing claimed.
        let mut meta = locks_meta();
        meta.streams
            .push(stream(5000, 5000, StreamRole::Sampler, "unshare"));
        meta.streams
            .push(stream(5001, 5001, StreamRole::Sampler, "prog"));
        account(&mut meta, Some(&announced(&[1])), None, &mut |_| {});
        assert!(meta.unavailable.is_empty(), "{:?}", meta.unavailable);
        assert_eq!(meta.lock_probe_processes, Some(1));
    }

    #[test]
    fn a_forked_child_is_loaded_unless_its_name_changed_without_an_announcement() {
        let mut meta = locks_meta();
        meta.streams.push(stream(10, 10, StreamRole::Sampler, "sh"));
        // A subshell that ended with _exit: its parent's name, only the fork mark.
        meta.streams.push(stream(11, 11, StreamRole::Sampler, "sh"));
        // A child that exec'd a static program: a new name, only the fork mark.
        meta.streams
            .push(stream(12, 12, StreamRole::Sampler, "static-prog"));
        // A child that exec'd a dynamic program: a new name, and its image announced itself.
        meta.streams
            .push(stream(13, 13, StreamRole::Sampler, "cat"));
        let mut marks = announced(&[10, 13]);
        for pid in [11, 12, 13, 14] {
            marks.forked.insert(pid, "sh".into());
        }
        let mut told = Vec::new();
        account(&mut meta, Some(&marks), None, &mut |n| told.push(n));
        // 14 was never seen by the sampler: taken as loaded.
        assert_eq!(meta.lock_probe_processes, Some(4));
        assert_eq!(meta.unavailable.len(), 1, "{:?}", meta.unavailable);
        assert!(
            meta.unavailable[0].why.starts_with(
                "the probe never announced itself in process(es) 12 (last seen as static-prog): "
            ),
            "{:?}",
            meta.unavailable
        );
        assert!(told[0]
            .text
            .starts_with("locks of 1 of 4 process(es) were not measured"));
    }

    #[test]
    fn a_launched_program_the_probe_cannot_enter_is_unavailable_beside_the_launcher() {
        let mut meta = locks_meta();
        meta.streams
            .push(stream(10, 10, StreamRole::Sampler, "static"));
        let obstacle = Obstacle {
            program: "./static".into(),
            launched: true,
            why: "./static is statically linked: ...".into(),
        };
        account(
            &mut meta,
            Some(&announced(&[10])),
            Some(&obstacle),
            &mut |_| {},
        );
        assert!(meta.has(Captured::Locks));
        assert_eq!(
            meta.unavailable,
            [Unavailable {
                what: "locks of ./static".into(),
                why: obstacle.why.clone()
            }]
        );
    }
}
