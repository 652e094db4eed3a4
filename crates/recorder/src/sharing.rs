//! Cache-line sharing (`c2c record`, `c2c import`): which back end records it, checking that a
//! program is instrumented, reading perf.data files, and listing the results in meta.json.
//!
//! The instrumentation back end is the sharing runtime of a program built with `contend cc`: it
//! writes `sharing/PID.json`, `sharing/PID.hist` and `maps/sharing-PID.maps` into the run
//! directory when each process exits. A program that is not instrumented can only be observed
//! through the hardware's memory-sampling events (PEBS, IBS), through `perf c2c record`.

use crate::notice::{info, note, warn, About, Notice};
use crate::RecordError;
use std::path::{Path, PathBuf};
use trace::layout;
use trace::meta::{Meta, SharingFile, SharingMeta};
use trace::{Captured, RunDir};

/// Which back end records sharing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backend {
    /// The sharing runtime of a `contend cc` build, else the PMU when the machine has
    /// memory-sampling events.
    #[default]
    Auto,
    /// The sharing runtime (the program must be built with `contend cc`).
    Instrumentation,
    /// The PMU's memory samples through `perf c2c record` (any program; needs PEBS or IBS).
    Pmu,
}

/// How sharing is recorded (`c2c record`'s options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharingOptions {
    pub backend: Backend,
    /// The cache-line size to model, bytes (64 or 128).
    pub line: u32,
    /// The runtime's settings (the PMU back end ignores them): track a line in detail after
    /// this many transfers, every line from the start, history kept, sampling of hot lines.
    pub hot_after: Option<u32>,
    pub exhaustive: bool,
    pub window: Option<u32>,
    pub sample: Option<u32>,
    /// Where the machine's PMU capabilities are read (`/sys`; another root for tests).
    pub sysfs: PathBuf,
}

impl Default for SharingOptions {
    fn default() -> Self {
        SharingOptions {
            backend: Backend::Auto,
            line: 64,
            hot_after: None,
            exhaustive: false,
            window: None,
            sample: None,
            sysfs: PathBuf::from("/sys"),
        }
    }
}

/// What a program file says about its instrumentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instrumentation {
    /// Linked with contend's sharing runtime (itself, or through a library it loads).
    Contend,
    /// Built with `-fsanitize=thread` and ThreadSanitizer's own runtime.
    Tsan,
    /// Neither.
    None,
    /// Not an ELF file contend can read (a script, another format): why.
    Unknown(String),
}

/// The instrumentation of the program file `path`. A dynamically linked program that does not
/// need the runtime itself may load it through a library: the dynamic loader lists what it
/// would load (`LD_TRACE_LOADED_OBJECTS`, as `ldd` does; nothing of the program runs).
pub fn instrumentation(path: &Path) -> Instrumentation {
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => return Instrumentation::Unknown(format!("cannot read it: {e}")),
    };
    if data.starts_with(b"#!") {
        return Instrumentation::Unknown("it is a script".into());
    }
    let Some(facts) = observe::elf::facts(&data) else {
        return Instrumentation::Unknown("it is not a 64-bit ELF file contend can read".into());
    };
    if facts.needed.iter().any(|n| n.contains("contend_sharing")) {
        return Instrumentation::Contend;
    }
    if facts.defines_tsan_init || facts.needed.iter().any(|n| n.starts_with("libtsan")) {
        return Instrumentation::Tsan;
    }
    if facts.dynamic {
        if let Ok(out) = std::process::Command::new(path)
            .env("LD_TRACE_LOADED_OBJECTS", "1")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("contend_sharing") {
                return Instrumentation::Contend;
            }
            if text.lines().any(|l| l.trim_start().starts_with("libtsan")) {
                return Instrumentation::Tsan;
            }
        }
    }
    Instrumentation::None
}

/// The program a command runs, with its instrumentation: the command itself, else (a launcher
/// such as `env`, `taskset`, `numactl`, `time`) the first later argument that is an
/// instrumented program.
pub fn program_of(command: &[String]) -> (String, Option<PathBuf>, Instrumentation) {
    let Some(first) = command.first().cloned() else {
        return (
            String::new(),
            None,
            Instrumentation::Unknown("no program was given".into()),
        );
    };
    let Some(path) = which::which(&first).ok() else {
        return (
            first,
            None,
            Instrumentation::Unknown("it was not found".into()),
        );
    };
    let own = instrumentation(&path);
    if own == Instrumentation::Contend {
        return (first, Some(path), own);
    }
    for a in &command[1..] {
        if a.starts_with('-') || !a.contains('/') && which::which(a).is_err() {
            continue;
        }
        if let Some(p) = which::which(a).ok().filter(|p| p.is_file()) {
            if instrumentation(&p) == Instrumentation::Contend {
                return (a.clone(), Some(p), Instrumentation::Contend);
            }
        }
    }
    let base = first.rsplit('/').next().unwrap_or(&first);
    if own == Instrumentation::None && LAUNCHERS.contains(&base) {
        let why = format!(
            "{base} starts another program, which contend did not find among its arguments"
        );
        return (first, Some(path), Instrumentation::Unknown(why));
    }
    (first, Some(path), own)
}

/// Programs that start the program of interest (shells, wrappers, build tools): when the
/// program they start is not found among their arguments, it is run unchecked.
pub(crate) const LAUNCHERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "env", "taskset", "numactl", "nice", "chrt", "time",
    "timeout", "stdbuf", "setarch", "xargs", "make", "ctest", "mpirun", "mpiexec", "srun",
];

/// The memory-sampling events this machine's PMU offers (under `sys`, normally `/sys`).
pub fn memory_sampling(sys: &Path) -> Vec<&'static str> {
    let devices = sys.join("bus/event_source/devices");
    let mut found = Vec::new();
    if devices.join("cpu/events/mem-loads").exists()
        || devices.join("cpu_core/events/mem-loads").exists()
    {
        found.push("PEBS mem-loads");
    }
    if devices.join("ibs_op").exists() {
        found.push("AMD IBS");
    }
    if std::fs::read_dir(&devices).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("arm_spe"))
    }) {
        found.push("Arm SPE");
    }
    found
}

/// How to get an instrumented build.
pub const REBUILD: &str = "rebuild with `CC=\"contend cc --\" make` (or `contend cc -- gcc ...`)";

/// Checks the program before anything is created and picks the back end: an instrumented
/// program runs with its runtime; any other program goes to the PMU when the machine has
/// memory sampling, and is refused with what to do when it has not. Returns the program's name
/// as the command gives it.
pub fn check_program(
    command: &[String],
    options: &SharingOptions,
    notices: &mut dyn FnMut(Notice),
) -> Result<(String, Backend), RecordError> {
    let (name, _, inst) = program_of(command);
    let events = memory_sampling(&options.sysfs);
    if options.backend == Backend::Pmu {
        if events.is_empty() {
            return Err(RecordError::bad(format!(
                "--backend pmu: this machine has no memory-sampling events (PEBS mem-loads, AMD IBS, Arm SPE): {REBUILD} and use the instrumentation back end"
            )));
        }
        if events == ["Arm SPE"] {
            return Err(RecordError::bad(
                "--backend pmu: this machine samples memory with Arm SPE, whose samples perf keeps in an AUX trace that contend does not decode: use the instrumentation back end (`contend cc`)",
            ));
        }
        return Ok((name, Backend::Pmu));
    }
    match inst {
        Instrumentation::Contend => Ok((name, Backend::Instrumentation)),
        Instrumentation::Unknown(why) => {
            note(
                notices,
                About::Setup,
                format!("cannot tell whether {name} was built with `contend cc` ({why}); running it: without the sharing runtime nothing is recorded"),
            );
            Ok((name, Backend::Instrumentation))
        }
        Instrumentation::Tsan => Err(RecordError::bad(format!(
            "{name} was built with -fsanitize=thread and ThreadSanitizer's own runtime, not with `contend cc`: {REBUILD}"
        ))),
        Instrumentation::None if options.backend == Backend::Instrumentation => Err(RecordError::bad(format!(
            "--backend instrumentation: {name} was not built with `contend cc`: {REBUILD}"
        ))),
        Instrumentation::None => {
            if events.is_empty() {
                Err(RecordError::bad(format!(
                    "{name} was not built with `contend cc` and this machine has no memory-sampling events (PEBS mem-loads, AMD IBS, Arm SPE): {REBUILD}, or run on a machine with one"
                )))
            } else if events == ["Arm SPE"] {
                Err(RecordError::bad(format!(
                    "{name} was not built with `contend cc`, and this machine's memory sampling (Arm SPE) keeps its samples in an AUX trace that contend does not decode: {REBUILD}"
                )))
            } else {
                info(
                    notices,
                    About::Setup,
                    format!(
                        "{name} was not built with `contend cc`; using the PMU back end ({}) through `perf c2c record`",
                        events.join(", ")
                    ),
                );
                Ok((name, Backend::Pmu))
            }
        }
    }
}

/// The perf program: `$CONTEND_PERF`, else `perf` on the PATH.
pub fn perf_program() -> Result<PathBuf, RecordError> {
    if let Some(p) = std::env::var_os("CONTEND_PERF") {
        return Ok(PathBuf::from(p));
    }
    which::which("perf").ok().ok_or_else(|| {
        RecordError::bad(
            "the PMU back end runs `perf c2c record`, and perf is not installed: install it (Debian: `apt-get install linux-perf`; Fedora: `dnf install perf`) or set CONTEND_PERF",
        )
    })
}

/// Reads `data` (a perf.data file) and writes each sampled process's results into `run` as
/// the instrumentation back end would (`sharing/PID.json`, `maps/sharing-PID.maps`). Returns
/// what was read.
pub fn import_perf_data(
    run: &Path,
    data: &Path,
    line: u32,
    program: &str,
) -> Result<observe::perfmem::PerfMem, RecordError> {
    let shown = data.display();
    let bytes = std::fs::read(data)
        .map_err(|e| RecordError::bad(format!("{shown}: cannot read it: {e}")))?;
    let mem =
        observe::perfmem::read(&bytes).map_err(|e| RecordError::bad(format!("{shown}: {e}")))?;
    if mem.samples.is_empty() {
        return Err(RecordError::bad(format!(
            "{shown} has no load or store samples with a data address ({} sample(s) of other events, {} without an address; events: {}): record it with `perf c2c record` or `perf mem record` on a machine with memory sampling (Intel PEBS, AMD IBS)",
            mem.other_samples,
            mem.without_address,
            mem.events.join(", ")
        )));
    }
    std::fs::create_dir_all(run.join(layout::SHARING_DIR))?;
    std::fs::create_dir_all(run.join(layout::MAPS_DIR))?;
    for p in observe::perfmem::to_sharing(&mem, line, program) {
        let json = serde_json::to_vec_pretty(&p).map_err(RecordError::failed)?;
        std::fs::write(run.join(layout::sharing_results(p.pid)), json)?;
        if let Some(maps) = mem.mappings.get(&p.pid) {
            std::fs::write(
                run.join(layout::sharing_maps(p.pid)),
                observe::perfmem::maps_text(maps),
            )?;
        }
    }
    Ok(mem)
}

/// The sharing part of meta.json for the PMU back end.
pub fn pmu_meta(line: u32) -> SharingMeta {
    SharingMeta {
        backend: "pmu".into(),
        line_size: line,
        hot_after: None,
        exhaustive: false,
        window: None,
        processes: Vec::new(),
    }
}

/// The sharing part of meta.json before the program runs.
pub(crate) fn meta_for(backend: Backend, options: &SharingOptions) -> SharingMeta {
    match backend {
        Backend::Pmu => pmu_meta(options.line),
        _ => SharingMeta {
            backend: "instrumentation".into(),
            line_size: options.line,
            hot_after: options.hot_after,
            exhaustive: options.exhaustive,
            window: options.window,
            processes: Vec::new(),
        },
    }
}

/// The runtime's settings, for the instrumentation back end only: under the PMU back end a
/// `contend cc` build's runtime stays inactive, so that one back end writes the results.
pub(crate) fn runtime_env(
    dir: &Path,
    pmu: bool,
    options: &SharingOptions,
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if !pmu {
        env.push((
            "CONTEND_SHARING_DIR".to_string(),
            dir.to_string_lossy().into_owned(),
        ));
        env.push(("CONTEND_SHARING_LINE".to_string(), options.line.to_string()));
    }
    if let Some(n) = options.hot_after {
        env.push(("CONTEND_SHARING_HOT_AFTER".into(), n.to_string()));
    }
    if options.exhaustive {
        env.push(("CONTEND_SHARING_EXHAUSTIVE".into(), "1".into()));
    }
    if let Some(n) = options.window {
        env.push(("CONTEND_SHARING_WINDOW".into(), n.to_string()));
    }
    if let Some(n) = options.sample {
        env.push(("CONTEND_SHARING_SAMPLE".into(), n.to_string()));
    }
    env
}

/// Tells what the kernel and perf lost.
pub fn report_losses(mem: &observe::perfmem::PerfMem, notices: &mut dyn FnMut(Notice)) {
    if mem.lost > 0 {
        warn(
            notices,
            About::Outcome,
            format!(
                "the kernel lost {} sample(s) while perf recorded (raise perf's buffer with -m, or sample less often)",
                mem.lost
            ),
        );
    }
    if mem.without_address > 0 {
        note(
            notices,
            About::Outcome,
            format!(
                "{} memory sample(s) had no data address and are not in the model",
                mem.without_address
            ),
        );
    }
    if mem.malformed > 0 {
        warn(
            notices,
            About::Outcome,
            format!(
                "{} record(s) of the perf.data file could not be decoded and were skipped",
                mem.malformed
            ),
        );
    }
}

/// The sharing results in `run`'s `sharing/` directory, checked with the format's reader.
pub fn collect_sharing(run: &Path) -> Vec<SharingFile> {
    let mut found: Vec<u32> = std::fs::read_dir(run.join(layout::SHARING_DIR))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| layout::sharing_results_pid(&e.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
        .into_iter()
        .map(|pid| {
            let file = layout::sharing_results(pid);
            let hist = layout::sharing_history(pid);
            let maps = layout::sharing_maps(pid);
            let mut entry = SharingFile {
                file: file.clone(),
                pid,
                parent_pid: None,
                program: String::new(),
                history: run.join(&hist).is_file().then_some(hist),
                maps: run.join(&maps).is_file().then_some(maps),
                accesses: 0,
                transfers: 0,
                hot_lines: 0,
                error: None,
            };
            match std::fs::read(run.join(&file))
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    trace::sharing::ProcessSharing::from_json(&b).map_err(|e| e.to_string())
                }) {
                Ok(s) => {
                    entry.parent_pid = s.parent_pid;
                    entry.program = s.program;
                    entry.accesses = s.totals.reads + s.totals.writes;
                    entry.transfers = s.totals.transfers;
                    entry.hot_lines = s.lines.len() as u64;
                }
                Err(e) => entry.error = Some(e),
            }
            entry
        })
        .collect()
}

/// `c2c import`'s options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// The perf.data file.
    pub file: PathBuf,
    /// The run directory to create (numbered if it exists).
    pub output: PathBuf,
    /// The cache-line size, bytes.
    pub line: u32,
    /// The contend command line, for meta.json.
    pub recorded_by: Vec<String>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            file: PathBuf::from("perf.data"),
            output: PathBuf::from(trace::DEFAULT_RUN_DIR),
            line: 64,
            recorded_by: Vec::new(),
        }
    }
}

/// Reads a perf.data file's memory samples into a new run directory. Nothing is created when
/// the file is not usable.
pub fn import(
    options: &ImportOptions,
    notices: &mut dyn FnMut(Notice),
) -> Result<(RunDir, Meta), RecordError> {
    let shown = options.file.display();
    if !options.file.is_file() {
        return Err(RecordError::bad(format!(
            "{shown}: no such file (give the perf.data file `perf c2c record -o FILE` wrote)"
        )));
    }
    // Read before creating anything: a file that is not usable leaves no empty run behind.
    let probe = std::fs::read(&options.file)
        .map_err(|e| RecordError::bad(format!("{shown}: cannot read it: {e}")))?;
    observe::perfmem::check_sections(&probe)
        .map_err(|e| RecordError::bad(format!("{shown}: {e}")))?;
    drop(probe);
    let staging = tempdir_for(&options.output)?;
    let program = shown.to_string();
    let mem = import_perf_data(staging.path(), &options.file, options.line, &program)?;
    let run = RunDir::create(&options.output)?;
    for sub in [layout::SHARING_DIR, layout::MAPS_DIR] {
        let from = staging.path().join(sub);
        if from.is_dir() {
            std::fs::rename(&from, run.path().join(sub))?;
        }
    }
    drop(staging);
    let mut meta = crate::new_meta(
        mem.cmdline
            .clone()
            .unwrap_or_else(|| vec![format!("perf.data {shown}")]),
        &options.recorded_by,
    );
    meta.capture(Captured::Sharing);
    let mut sharing = pmu_meta(options.line);
    sharing.processes = collect_sharing(run.path());
    let processes = sharing.processes.len();
    meta.sharing = Some(sharing);
    run.write_meta(&meta)?;
    report_losses(&mem, notices);
    info(
        notices,
        About::Outcome,
        format!(
            "imported {} memory samples of {processes} process(es) from {shown} into {1}; see contend c2c report {1}",
            mem.samples.len(),
            run.path().display()
        ),
    );
    Ok((run, meta))
}

/// A scratch directory beside the run directory-to-be (removed when dropped).
fn tempdir_for(output: &Path) -> Result<tempfile::TempDir, RecordError> {
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    tempfile::Builder::new()
        .prefix(".contend-import-")
        .tempdir_in(parent)
        .map_err(|e| {
            RecordError::bad(format!(
                "cannot create the run directory in {}: {e}",
                parent.display()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sampling_events_are_found_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        assert!(memory_sampling(dir.path()).is_empty());
        let d = dir.path().join("bus/event_source/devices");
        std::fs::create_dir_all(d.join("ibs_op")).unwrap();
        std::fs::create_dir_all(d.join("arm_spe_0")).unwrap();
        std::fs::create_dir_all(d.join("cpu/events")).unwrap();
        std::fs::write(
            d.join("cpu/events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n",
        )
        .unwrap();
        assert_eq!(
            memory_sampling(dir.path()),
            ["PEBS mem-loads", "AMD IBS", "Arm SPE"]
        );
    }

    #[test]
    fn a_program_that_is_not_instrumented_is_refused_without_memory_sampling() {
        let sys = tempfile::tempdir().unwrap();
        let options = SharingOptions {
            sysfs: sys.path().to_path_buf(),
            ..SharingOptions::default()
        };
        let mut told = Vec::new();
        let r = check_program(&["/bin/true".into()], &options, &mut |n| told.push(n));
        assert!(matches!(r, Err(RecordError::BadInput(m)) if m.contains("contend cc")));
        let pmu = SharingOptions {
            backend: Backend::Pmu,
            ..options.clone()
        };
        assert!(matches!(
            check_program(&["/bin/true".into()], &pmu, &mut |_| {}),
            Err(RecordError::BadInput(_))
        ));
        // A program that is not there is run anyway (and fails to start), with a note.
        let r = check_program(&["./no-such-program".into()], &options, &mut |n| {
            told.push(n)
        });
        assert!(matches!(r, Ok((_, Backend::Instrumentation))));
        assert!(told.iter().any(|n| n.text.contains("not found")));
    }

    #[test]
    fn results_are_listed_with_their_files_and_errors() {
        let run = tempfile::tempdir().unwrap();
        assert!(collect_sharing(run.path()).is_empty());
        std::fs::create_dir_all(run.path().join("sharing")).unwrap();
        std::fs::create_dir_all(run.path().join("maps")).unwrap();
        std::fs::write(run.path().join("sharing/12.json"), "{").unwrap();
        std::fs::write(run.path().join("maps/sharing-12.maps"), "").unwrap();
        std::fs::write(run.path().join("sharing/notes.txt"), "").unwrap();
        let found = collect_sharing(run.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].file, "sharing/12.json");
        assert_eq!(found[0].maps.as_deref(), Some("maps/sharing-12.maps"));
        assert_eq!(found[0].history, None);
        assert!(found[0].error.is_some());
    }

    #[test]
    fn runtime_settings_go_to_the_instrumentation_back_end_only() {
        let options = SharingOptions {
            hot_after: Some(3),
            ..SharingOptions::default()
        };
        let env = runtime_env(Path::new("/r"), false, &options);
        assert!(env.contains(&("CONTEND_SHARING_DIR".into(), "/r".into())));
        assert!(env.contains(&("CONTEND_SHARING_HOT_AFTER".into(), "3".into())));
        let env = runtime_env(Path::new("/r"), true, &options);
        assert!(!env.iter().any(|(k, _)| k == "CONTEND_SHARING_DIR"));
    }
}
