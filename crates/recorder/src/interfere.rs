//! A contention generator running beside the program for the whole run (`record --interfere`),
//! on CPUs the program does not use, so that a run with induced contention can be compared with
//! one without (`contend diff`), as the thesis's tables 4.6 and 4.7 compare work and service
//! time with and without its memory contention generator.
//!
//! The generator is `contend bench mem generate` started as a child process; it is stopped
//! with SIGINT when the program ends and reports its achieved rate as JSON.

use crate::RecordError;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use topology::{CpuSet, Topology};
use trace::meta::Interference;

/// A checked `--interfere` spec: the generator's arguments and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Everything after `mem generate`.
    pub args: Vec<String>,
    pub cpus: Vec<u32>,
}

/// Parses `mem generate --cpus LIST [--rate GB/S] [--size BYTES]`.
pub fn parse(spec: &str, machine: &Topology) -> Result<Spec, RecordError> {
    let words: Vec<String> = spec.split_whitespace().map(str::to_string).collect();
    let usage = "give `mem generate --cpus LIST [--rate GB/S] [--size BYTES]` (the memory contention generator, on CPUs the program does not use)";
    if words.len() < 2 || words[0] != "mem" || words[1] != "generate" {
        return Err(RecordError::bad(format!("--interfere {spec:?}: {usage}")));
    }
    let args = words[2..].to_vec();
    if let Some(w) = args
        .iter()
        .find(|w| matches!(w.as_str(), "--duration" | "--json"))
    {
        return Err(RecordError::bad(format!(
            "--interfere {spec:?}: {w} is set by contend (the generator runs as long as the program)"
        )));
    }
    let cpus_text = args
        .iter()
        .position(|w| w == "--cpus")
        .and_then(|i| args.get(i + 1))
        .ok_or_else(|| {
            RecordError::bad(format!(
                "--interfere {spec:?}: name the generator's CPUs with --cpus; {usage}"
            ))
        })?;
    let set = CpuSet::parse_list(cpus_text)
        .map_err(|e| RecordError::bad(format!("--interfere: --cpus {cpus_text}: {e}")))?;
    machine
        .check_cpus(&set)
        .map_err(|e| RecordError::bad(format!("--interfere: --cpus {cpus_text}: {e}")))?;
    Ok(Spec {
        args,
        cpus: set.iter().collect(),
    })
}

/// The program's CPUs beside the generator: the ones asked for, which must not include the
/// generator's, or else every allowed CPU but the generator's.
pub fn program_cpus(
    asked: Option<Vec<u32>>,
    allowed: &[u32],
    generator: &[u32],
) -> Result<Vec<u32>, RecordError> {
    match asked {
        Some(cpus) => {
            let shared: Vec<u32> = cpus
                .iter()
                .filter(|c| generator.contains(c))
                .copied()
                .collect();
            if shared.is_empty() {
                Ok(cpus)
            } else {
                Err(RecordError::bad(format!(
                    "--interfere: the generator's CPU(s) {} are also the program's: give the program other CPUs (--cpus) or the generator others",
                    CpuSet::list_in_order(&shared)
                )))
            }
        }
        None => {
            let rest: Vec<u32> = allowed
                .iter()
                .filter(|c| !generator.contains(c))
                .copied()
                .collect();
            if rest.is_empty() {
                Err(RecordError::bad(format!(
                    "--interfere: the generator takes every CPU contend may use ({}): leave the program at least one",
                    CpuSet::list_in_order(allowed)
                )))
            } else {
                Ok(rest)
            }
        }
    }
}

/// What `bench mem generate --json` prints when stopped.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct GeneratorResult {
    #[serde(default)]
    achieved_gb_s: Option<f64>,
    #[serde(default)]
    target_gb_s: Option<f64>,
    #[serde(default)]
    seconds: Option<f64>,
}

/// The running generator.
pub struct Running {
    child: Child,
    command: Vec<String>,
    cpus: Vec<u32>,
}

/// Starts the generator (`contend`, the executable `exe`, with `bench mem generate ARGS`) and
/// waits until its traffic has begun (its buffers allocated).
pub fn start(spec: &Spec, exe: &Path) -> Result<Running, RecordError> {
    let mut command = vec!["bench".to_string(), "mem".into(), "generate".into()];
    command.extend(spec.args.iter().cloned());
    command.push("--json".into());
    let mut child = Command::new(exe)
        .args(&command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| RecordError::Failed(format!("starting the generator: {e}")))?;
    // It announces itself on stderr just before it allocates and starts copying.
    let Some(stderr) = child.stderr.take() else {
        return Err(RecordError::Failed(
            "starting the generator: no stderr pipe".into(),
        ));
    };
    let mut err = BufReader::new(stderr);
    let mut line = String::new();
    let mut said = String::new();
    while err.read_line(&mut line).unwrap_or(0) > 0 {
        said.push_str(&line);
        if line.contains("generating memory traffic") {
            break;
        }
        line.clear();
    }
    if !said.contains("generating memory traffic") {
        let status = child.wait()?;
        return Err(RecordError::Failed(format!(
            "the generator did not start ({status}): {}",
            said.trim()
        )));
    }
    // Drain the rest of its stderr in the background so it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = err.read_to_end(&mut sink);
    });
    // Let the buffers be touched and the streams reach their rate.
    std::thread::sleep(Duration::from_millis(300));
    Ok(Running {
        child,
        command,
        cpus: spec.cpus.clone(),
    })
}

impl Running {
    /// Stops the generator (SIGINT) and returns what it did.
    pub fn stop(mut self) -> Interference {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
        let mut out = String::new();
        if let Some(mut s) = self.child.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        let status = self.child.wait();
        interference(self.command, self.cpus, status, &out)
    }
}

/// The generator's part of meta.json from how it ended and what it printed.
fn interference(
    command: Vec<String>,
    cpus: Vec<u32>,
    status: std::io::Result<std::process::ExitStatus>,
    out: &str,
) -> Interference {
    let parsed: Option<GeneratorResult> = serde_json::from_str(out).ok();
    let error = match (&status, &parsed) {
        (Ok(s), Some(_)) if s.success() => None,
        (Ok(s), _) => Some(format!("the generator ended with {s} and no result")),
        (Err(e), _) => Some(format!("waiting for the generator: {e}")),
    };
    Interference {
        command,
        cpus,
        achieved_gb_s: parsed.as_ref().and_then(|r| r.achieved_gb_s),
        target_gb_s: parsed.as_ref().and_then(|r| r.target_gb_s),
        seconds: parsed.as_ref().and_then(|r| r.seconds),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn specs_are_checked_and_cpus_kept_apart() {
        let m = Topology::synthetic("1x4x1").unwrap();
        let s = parse("mem generate --cpus 3 --rate 1", &m).unwrap();
        assert_eq!(s.cpus, [3]);
        assert_eq!(s.args, ["--cpus", "3", "--rate", "1"]);
        for bad in [
            "mem stream --cpus 1",
            "ctx 2",
            "mem generate",
            "mem generate --cpus 1 --duration 5",
            "mem generate --cpus 9",
        ] {
            assert!(
                matches!(parse(bad, &m), Err(RecordError::BadInput(_))),
                "{bad}"
            );
        }
        assert_eq!(program_cpus(None, &[0, 1, 2, 3], &[3]).unwrap(), [0, 1, 2]);
        assert_eq!(
            program_cpus(Some(vec![0, 1]), &[0, 1, 2, 3], &[3]).unwrap(),
            [0, 1]
        );
        assert!(program_cpus(Some(vec![2, 3]), &[0, 1, 2, 3], &[3]).is_err());
        assert!(program_cpus(None, &[3], &[3]).is_err());
    }

    #[test]
    fn the_generators_result_is_read_by_its_fields() {
        let ok = || Ok(std::process::ExitStatus::from_raw(0));
        let i = interference(
            vec!["bench".into()],
            vec![3],
            ok(),
            r#"{"achieved_gb_s": 2.5, "target_gb_s": null, "seconds": 1.0, "other": 1}"#,
        );
        assert_eq!(i.achieved_gb_s, Some(2.5));
        assert_eq!(i.target_gb_s, None);
        assert_eq!(i.seconds, Some(1.0));
        assert_eq!(i.error, None);
        let garbled = interference(vec![], vec![], ok(), "not json");
        assert!(garbled.error.is_some_and(|e| e.contains("no result")));
        assert_eq!(garbled.achieved_gb_s, None);
        let failed = interference(
            vec![],
            vec![],
            Ok(std::process::ExitStatus::from_raw(1 << 8)),
            r#"{"achieved_gb_s": 1}"#,
        );
        assert!(failed.error.is_some());
    }
}
