//! `contend cc` (the compiler driver that instruments a build for the sharing detector) and
//! `contend c2c record`, end to end with gcc and clang and the real sharing runtime
//! (`crates/sharing`, built here with `cargo build -p sharing` when it is not beside contend).

use crate::common::{meta, repo, sharing_runtime, text, CONTEND};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs contend in `dir`, with the runtime found the way a user's contend finds it.
fn contend(args: &[&str], dir: &Path) -> Output {
    sharing_runtime();
    Command::new(CONTEND)
        .args(args)
        .current_dir(dir)
        .env_remove("CONTEND_SHARING_LIB")
        .env_remove("CONTEND_CC")
        .output()
        .unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// gcc and clang, which scripts/test.sh installs: a missing one fails under CI and is skipped
/// visibly elsewhere.
fn compilers() -> Vec<&'static str> {
    ["gcc", "clang"]
        .into_iter()
        .filter(|c| testkit::require_command(c, c))
        .collect()
}

/// `readelf -d`'s shared libraries and run path.
fn dynamic(file: &Path) -> (Vec<String>, String) {
    let out = Command::new("readelf")
        .arg("-dW")
        .arg(file)
        .output()
        .expect("running readelf (apt-get install binutils)");
    let d = text(&out.stdout);
    let needed = d
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split('[').nth(1)?.trim_end_matches(']').to_string()))
        .collect();
    let runpath = d
        .lines()
        .filter(|l| l.contains("(RUNPATH)") || l.contains("(RPATH)"))
        .filter_map(|l| Some(l.split('[').nth(1)?.trim_end_matches(']').to_string()))
        .collect::<Vec<_>>()
        .join(":");
    (needed, runpath)
}

/// The `__tsan_*` symbols a file refers to without defining them.
fn tsan_refs(file: &Path) -> Vec<String> {
    let out = Command::new("readelf")
        .arg("-sW")
        .arg(file)
        .output()
        .unwrap();
    let mut refs: Vec<String> = text(&out.stdout)
        .lines()
        .filter(|l| l.contains(" UND "))
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|s| s.starts_with("__tsan_"))
        .map(|s| s.split('@').next().unwrap_or(s).to_string())
        .collect();
    refs.sort();
    refs.dedup();
    refs
}

fn assert_instrumented(exe: &Path, objects: &[&Path]) {
    let (needed, runpath) = dynamic(exe);
    assert!(
        needed.iter().any(|n| n == "libcontend_sharing.so"),
        "{} does not need libcontend_sharing.so: {needed:?}",
        exe.display()
    );
    assert!(
        !needed.iter().any(|n| n.contains("tsan")),
        "{} needs libtsan: {needed:?}",
        exe.display()
    );
    let rt_dir = std::fs::canonicalize(sharing_runtime().parent().unwrap()).unwrap();
    assert!(
        runpath.split(':').any(|p| Path::new(p) == rt_dir),
        "run path {runpath:?} does not name {}",
        rt_dir.display()
    );
    for o in objects.iter().copied().chain([exe]) {
        let refs = tsan_refs(o);
        for hook in ["__tsan_init", "__tsan_func_entry"] {
            assert!(
                refs.iter().any(|r| r == hook),
                "{} has no {hook}: {refs:?}",
                o.display()
            );
        }
        assert!(
            refs.iter()
                .any(|r| r.starts_with("__tsan_read") || r.starts_with("__tsan_write")),
            "{} has no access hooks: {refs:?}",
            o.display()
        );
    }
}

/// The example's `truth:` lines as key=value maps.
fn truths(stdout: &str) -> Vec<std::collections::HashMap<String, String>> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("truth: "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn one_step_and_two_step_builds_link_the_sharing_runtime_not_libtsan() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let counter = repo("examples/sharing/atomic_counter.c");
    let accumulators = repo("examples/sharing/accumulators.c");
    for cc in compilers() {
        // One step: compile and link.
        let exe = d.join(format!("counter-{cc}"));
        let out = contend(
            &[
                "cc",
                "--",
                cc,
                "-O1",
                "-g",
                counter.to_str().unwrap(),
                "-o",
                exe.to_str().unwrap(),
            ],
            d,
        );
        ok(&out, &format!("contend cc -- {cc} -O1 -g atomic_counter.c"));
        assert_instrumented(&exe, &[]);
        let run = Command::new(&exe).args(["-n", "2000"]).output().unwrap();
        let stdout = ok(&run, &format!("the {cc} build of atomic_counter"));
        // Two threads, 2000 increments each: every one of them counted.
        assert!(stdout.contains("total=4000 iters=2000,2000"), "{stdout}");
        // Sized by CPU time instead: the total is what the threads report they did.
        let run = Command::new(&exe).args(["-c", "20"]).output().unwrap();
        let stdout = ok(&run, &format!("the {cc} build of atomic_counter -c 20"));
        assert_eq!(truths(&stdout)[0]["cpu_ms"], "20");
        let done = stdout
            .lines()
            .find_map(|l| l.strip_prefix("done: "))
            .unwrap();
        let field = |k: &str| {
            done.split(' ')
                .find_map(|kv| kv.strip_prefix(k))
                .unwrap_or_else(|| panic!("no {k} in {done}"))
                .to_string()
        };
        let iters: Vec<u64> = field("iters=")
            .split(',')
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(iters.len(), 2, "{done}");
        assert!(iters.iter().all(|&n| n > 0), "{done}");
        assert_eq!(
            field("total=").parse::<u64>().unwrap(),
            iters.iter().sum::<u64>()
        );
        assert_eq!(truths(&stdout)[0]["case"], "true-sharing");

        // Two steps: -c, then a link of the object (with a library of the user's).
        let obj = d.join(format!("acc-{cc}.o"));
        let exe = d.join(format!("acc-{cc}"));
        ok(
            &contend(
                &[
                    "cc",
                    "--",
                    cc,
                    "-O1",
                    "-g",
                    "-c",
                    accumulators.to_str().unwrap(),
                    "-o",
                    obj.to_str().unwrap(),
                ],
                d,
            ),
            &format!("contend cc -- {cc} -c accumulators.c"),
        );
        ok(
            &contend(
                &[
                    "cc",
                    "--",
                    cc,
                    obj.to_str().unwrap(),
                    "-o",
                    exe.to_str().unwrap(),
                    "-lm",
                ],
                d,
            ),
            &format!("contend cc -- {cc} acc.o -o acc"),
        );
        assert_instrumented(&exe, &[&obj]);
        let run = Command::new(&exe).args(["-n", "1000"]).output().unwrap();
        let stdout = ok(&run, &format!("the {cc} build of accumulators"));
        assert!(stdout.contains("done: "), "{stdout}");
        assert_eq!(truths(&stdout)[0]["case"], "false-sharing");
    }
}

#[test]
fn shared_libraries_are_instrumented_and_need_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("lib.c"),
        "long shared_total;\nvoid add(long n) { shared_total += n; }\n",
    )
    .unwrap();
    for cc in compilers() {
        let lib = d.join(format!("libadd-{cc}.so"));
        ok(
            &contend(
                &[
                    "cc",
                    "--",
                    cc,
                    "-O1",
                    "-fPIC",
                    "-shared",
                    "lib.c",
                    "-o",
                    lib.to_str().unwrap(),
                ],
                d,
            ),
            "building a shared library",
        );
        let (needed, _) = dynamic(&lib);
        assert!(
            needed.iter().any(|n| n == "libcontend_sharing.so"),
            "{needed:?}"
        );
        assert!(!needed.iter().any(|n| n.contains("tsan")), "{needed:?}");
        assert!(tsan_refs(&lib).iter().any(|r| r == "__tsan_write8"));
    }
    // A program built without contend cc that loads the instrumented library: c2c record finds
    // the runtime through the library (as ldd would) and records it.
    std::fs::write(
        d.join("main.c"),
        "void add(long);\nint main(void) { for (int i = 0; i < 100; i++) add(i); return 0; }\n",
    )
    .unwrap();
    let status = Command::new("gcc")
        .args([
            "main.c",
            "-o",
            "main",
            "-L.",
            "-ladd-gcc",
            "-Wl,-rpath,$ORIGIN",
        ])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(status.success());
    let out = contend(&["c2c", "record", "-o", "run", "--", "./main"], d);
    ok(
        &out,
        "contend c2c record -- ./main (plain, with an instrumented library)",
    );
    assert!(
        text(&out.stderr).contains("recorded sharing of 1 process(es)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn without_a_compiler_name_cc_is_used() {
    // CC="contend cc --" make: the command starts with the compiler's arguments.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("x.c"),
        "int g;\nint main(void) { g++; return g - 1; }\n",
    )
    .unwrap();
    ok(
        &contend(&["cc", "--", "-O1", "-c", "x.c"], d),
        "contend cc -- -c x.c",
    );
    assert!(tsan_refs(&d.join("x.o")).iter().any(|r| r == "__tsan_init"));
    ok(
        &contend(&["cc", "--", "x.o", "-o", "x"], d),
        "contend cc -- x.o -o x",
    );
    assert_instrumented(&d.join("x"), &[&d.join("x.o")]);
    ok(&Command::new(d.join("x")).output().unwrap(), "x");
    // The default output name is the compiler's.
    ok(&contend(&["cc", "--", "x.c"], d), "contend cc -- x.c");
    assert!(d.join("a.out").is_file());
}

#[test]
fn a_compiler_named_through_a_symlink_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gcc = Command::new("sh")
        .args(["-c", "command -v gcc"])
        .output()
        .unwrap();
    let gcc = text(&gcc.stdout).trim().to_string();
    std::os::unix::fs::symlink(&gcc, d.join("mycc")).unwrap();
    std::fs::write(d.join("x.c"), "int g;\nint main(void) { return g; }\n").unwrap();
    let out = contend(&["cc", "--", "./mycc", "-c", "x.c", "-o", "x.o"], d);
    ok(&out, "contend cc -- ./mycc (a symlink to gcc)");
    assert!(tsan_refs(&d.join("x.o")).iter().any(|r| r == "__tsan_init"));
}

#[test]
fn an_unknown_compiler_is_refused_with_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("x.c"), "int main(void) { return 0; }\n").unwrap();
    // A real program that is no compiler contend knows, and a name that is nowhere.
    for compiler in ["true", "icc"] {
        let out = contend(&["cc", "--", compiler, "-c", "x.c"], d);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "`{compiler}` is not a compiler `contend cc` knows"
            )) && err.contains("gcc and clang"),
            "{err}"
        );
    }
    assert!(!d.join("x.o").exists());
}

#[test]
fn preprocessing_passes_through_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("x.c"), "#include \"x.h\"\n#define N 3\nint a[N];\n").unwrap();
    std::fs::write(d.join("x.h"), "int h;\n").unwrap();
    for cc in compilers() {
        for args in [&["-E", "x.c"][..], &["-M", "x.c"], &["-MM", "x.c"]] {
            let direct = Command::new(cc).args(args).current_dir(d).output().unwrap();
            let mut through = vec!["cc", "--", cc];
            through.extend(args);
            let out = contend(&through, d);
            assert_eq!(
                ok(&out, &format!("contend cc -- {cc} {args:?}")),
                ok(&direct, &format!("{cc} {args:?}")),
                "{cc} {args:?}"
            );
        }
        // No input: --version and friends run as they are.
        let out = contend(&["cc", "--", cc, "--version"], d);
        assert!(ok(&out, "--version").to_lowercase().contains(cc));
    }
}

#[test]
fn the_compilers_errors_and_exit_status_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("bad.c"),
        "int main(void) { return undeclared_thing; }\n",
    )
    .unwrap();
    for cc in compilers() {
        for args in [&["-c", "bad.c"][..], &["bad.c", "-o", "bad"]] {
            let direct = Command::new(cc).args(args).current_dir(d).output().unwrap();
            let mut through = vec!["cc", "--", cc];
            through.extend(args);
            let out = contend(&through, d);
            assert_eq!(out.status.code(), direct.status.code(), "{cc} {args:?}");
            assert!(
                text(&out.stderr).contains("undeclared_thing"),
                "{}",
                text(&out.stderr)
            );
        }
    }
    assert!(!d.join("bad").exists());
}

#[test]
fn the_examples_build_warning_free_with_gcc_and_clang() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for cc in compilers() {
        for e in std::fs::read_dir(repo("examples/sharing"))
            .unwrap()
            .flatten()
        {
            let src = e.path();
            if src.extension().is_none_or(|x| x != "c") {
                continue;
            }
            let name = src.file_stem().unwrap().to_string_lossy().into_owned();
            let exe = d.join(format!("{name}-{cc}"));
            let out = contend(
                &[
                    "cc",
                    "--",
                    cc,
                    "-O2",
                    "-g",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    src.to_str().unwrap(),
                    "-o",
                    exe.to_str().unwrap(),
                ],
                d,
            );
            ok(
                &out,
                &format!("contend cc -- {cc} -Wall -Wextra -Werror {name}.c"),
            );
            assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
            let plain = Command::new(cc)
                .args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"])
                .arg(&src)
                .arg("-o")
                .arg(d.join(format!("{name}-{cc}.plain")))
                .output()
                .unwrap();
            ok(&plain, &format!("{cc} {name}.c (uninstrumented)"));
        }
    }
}

/// Builds an example with `contend cc -- gcc -O1 -g`.
fn build_example(name: &str, d: &Path) -> PathBuf {
    let exe = d.join(name);
    let src = repo(&format!("examples/sharing/{name}.c"));
    ok(
        &contend(
            &[
                "cc",
                "--",
                "gcc",
                "-O1",
                "-g",
                src.to_str().unwrap(),
                "-o",
                exe.to_str().unwrap(),
            ],
            d,
        ),
        &format!("building {name}"),
    );
    exe
}

#[test]
fn c2c_record_writes_and_registers_the_runtimes_results() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let exe = build_example("reader_writer", d);
    let out = contend(
        &[
            "c2c",
            "record",
            "-o",
            "run",
            "--",
            exe.to_str().unwrap(),
            "-n",
            "20000",
        ],
        d,
    );
    let stdout = ok(&out, "contend c2c record -- reader_writer");
    assert_eq!(truths(&stdout)[0]["object"], "rw");
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "contend: recorded sharing of 1 process(es) into run; see contend c2c report run"
        ),
        "{err}"
    );
    let run = d.join("run");
    let m = meta(&run);
    assert!(m["captured"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "sharing"));
    assert_eq!(m["exit_status"], 0);
    let sharing = &m["sharing"];
    assert_eq!(sharing["backend"], "instrumentation");
    assert_eq!(sharing["line_size"], 64);
    let processes = sharing["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 1, "{sharing}");
    let p = &processes[0];
    let file = p["file"].as_str().unwrap();
    assert!(run.join(file).is_file(), "{file}");
    assert_eq!(file, format!("sharing/{}.json", p["pid"]));
    assert!(
        p.get("error").is_none(),
        "the runtime's results did not read back: {p}"
    );
    assert!(p["accesses"].as_u64().unwrap() > 0, "{p}");

    // Options reach the runtime; the program's exit status is contend's.
    let out = contend(
        &[
            "c2c",
            "record",
            "-o",
            "run2",
            "--line",
            "128",
            "--exhaustive",
            "--",
            exe.to_str().unwrap(),
            "-n",
            "2000",
            "padded",
        ],
        d,
    );
    ok(&out, "contend c2c record --line 128 --exhaustive");
    let m = meta(&d.join("run2"));
    assert_eq!(m["sharing"]["line_size"], 128);
    let file = m["sharing"]["processes"][0]["file"].as_str().unwrap();
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("run2").join(file)).unwrap()).unwrap();
    assert_eq!(
        written["line_size"], 128,
        "the runtime did not get --line 128"
    );
    assert_eq!(
        written["hot_after"], 0,
        "the runtime did not get --exhaustive"
    );

    let out = contend(
        &[
            "c2c",
            "record",
            "-o",
            "run3",
            "--",
            exe.to_str().unwrap(),
            "-t",
            "1",
        ],
        d,
    );
    // reader_writer refuses -t 1 with its usage message and status 2.
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn c2c_record_says_when_the_program_wrote_nothing() {
    // Killed before its runtime could write: the run is kept, the status passed on, and the
    // missing results said.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("killed.c"),
        "#include <signal.h>\nint g;\nint main(void) { g = 1; raise(SIGKILL); return g; }\n",
    )
    .unwrap();
    ok(
        &contend(&["cc", "--", "gcc", "-O1", "killed.c", "-o", "killed"], d),
        "building killed.c",
    );
    let out = contend(&["c2c", "record", "-o", "run", "--", "./killed"], d);
    assert_eq!(out.status.code(), Some(128 + 9), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("no sharing results were written into run")
            && err.contains("did not exit normally"),
        "{err}"
    );
    let m = meta(&d.join("run"));
    assert!(m["unavailable"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["what"] == "sharing"));
    assert_eq!(m["sharing"]["processes"].as_array().unwrap().len(), 0);
}

#[test]
fn c2c_record_refuses_a_program_not_built_with_contend_cc() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plain = d.join("plain");
    let status = Command::new("gcc")
        .args(["-O1", "-pthread"])
        .arg(repo("examples/sharing/reader_writer.c"))
        .arg("-o")
        .arg(&plain)
        .status()
        .unwrap();
    assert!(status.success());
    let out = contend(&["c2c", "record", "-o", "run", "--", "./plain"], d);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(
        "./plain was not built with `contend cc` and this machine has no memory-sampling events (PEBS mem-loads, AMD IBS, Arm SPE): rebuild with `CC=\"contend cc --\" make` (or `contend cc -- gcc ...`), or run on a machine with one"
    ), "{}", text(&out.stderr));
    assert!(
        !d.join("run").exists(),
        "a refused recording leaves no run directory"
    );

    // A machine with memory sampling: the PMU back end would take the program; asked for the
    // instrumentation back end, it is refused with what to do.
    let sys = d.join("sys");
    std::fs::create_dir_all(sys.join("bus/event_source/devices/ibs_op")).unwrap();
    let out = contend(
        &[
            "c2c",
            "record",
            "--backend",
            "instrumentation",
            "-o",
            "run",
            "--sysfs",
            sys.to_str().unwrap(),
            "--",
            "./plain",
        ],
        d,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--backend instrumentation: ./plain was not built with `contend cc`"),
        "{err}"
    );
    // Arm SPE only: its samples live in an AUX trace contend does not decode.
    let spe = d.join("spe");
    std::fs::create_dir_all(spe.join("bus/event_source/devices/arm_spe_0")).unwrap();
    let out = contend(
        &[
            "c2c",
            "record",
            "-o",
            "run",
            "--sysfs",
            spe.to_str().unwrap(),
            "--",
            "./plain",
        ],
        d,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("(Arm SPE)") && err.contains("AUX trace"),
        "{err}"
    );
    assert!(!d.join("run").exists());

    // Built with ThreadSanitizer's own runtime: not contend's.
    let tsan = d.join("tsan");
    let status = Command::new("gcc")
        .args(["-O1", "-fsanitize=thread"])
        .arg(repo("examples/sharing/reader_writer.c"))
        .arg("-o")
        .arg(&tsan)
        .status()
        .unwrap();
    if status.success() {
        let out = contend(&["c2c", "record", "-o", "run", "--", "./tsan"], d);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).contains("ThreadSanitizer's own runtime"),
            "{}",
            text(&out.stderr)
        );
    }
}
