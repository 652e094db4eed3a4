//! Pure parsers for the per-task files `/proc/PID/task/TID/{stat,status,schedstat}` (the same
//! layouts serve `/proc/PID/*` for the whole process). No I/O here, so every parser is tested
//! with recorded text; `process` does the reading.

use crate::error::ParseError;
use serde::{Serialize, Serializer};

/// A task's scheduler state, the letter in field 3 of `stat` (see proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadState {
    /// `R`: running or on a run queue.
    Running,
    /// `S`: interruptible sleep (waiting for an event, a lock, a timer).
    Sleeping,
    /// `D`: uninterruptible sleep, usually disk or other I/O.
    DiskSleep,
    /// `T`: stopped by a signal.
    Stopped,
    /// `t`: stopped by a debugger.
    TracingStop,
    /// `Z`: exited, not yet reaped.
    Zombie,
    /// `X` (and `x` on old kernels): being torn down.
    Dead,
    /// `I`: idle kernel thread.
    Idle,
    /// `P`: parked kernel thread.
    Parked,
    /// Any other letter (`W`, `K`, … from old kernels), kept verbatim.
    Other(char),
}

impl ThreadState {
    pub fn from_letter(c: char) -> ThreadState {
        match c {
            'R' => ThreadState::Running,
            'S' => ThreadState::Sleeping,
            'D' => ThreadState::DiskSleep,
            'T' => ThreadState::Stopped,
            't' => ThreadState::TracingStop,
            'Z' => ThreadState::Zombie,
            'X' | 'x' => ThreadState::Dead,
            'I' => ThreadState::Idle,
            'P' => ThreadState::Parked,
            other => ThreadState::Other(other),
        }
    }

    /// The letter `ps` shows.
    pub fn letter(self) -> char {
        match self {
            ThreadState::Running => 'R',
            ThreadState::Sleeping => 'S',
            ThreadState::DiskSleep => 'D',
            ThreadState::Stopped => 'T',
            ThreadState::TracingStop => 't',
            ThreadState::Zombie => 'Z',
            ThreadState::Dead => 'X',
            ThreadState::Idle => 'I',
            ThreadState::Parked => 'P',
            ThreadState::Other(c) => c,
        }
    }

    /// The state spelled out, for people.
    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Running => "running",
            ThreadState::Sleeping => "sleeping",
            ThreadState::DiskSleep => "disk sleep",
            ThreadState::Stopped => "stopped",
            ThreadState::TracingStop => "tracing stop",
            ThreadState::Zombie => "zombie",
            ThreadState::Dead => "dead",
            ThreadState::Idle => "idle",
            ThreadState::Parked => "parked",
            ThreadState::Other(_) => "other",
        }
    }

    /// Zombie or dead: the task has exited and only its bookkeeping remains.
    pub fn has_exited(self) -> bool {
        matches!(self, ThreadState::Zombie | ThreadState::Dead)
    }
}

/// Serialised as the letter, as in `stat` and `ps`.
impl Serialize for ThreadState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 4];
        s.serialize_str(self.letter().encode_utf8(&mut buf))
    }
}

/// The letter's schema: what `Serialize` writes.
impl schemars::JsonSchema for ThreadState {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ThreadState".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "the state letter of /proc/PID/stat, as ps shows it",
            "minLength": 1,
            "maxLength": 1
        })
    }
}

/// The fields of `stat` that contend uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TaskStat {
    /// Field 1: the task id (the PID for `/proc/PID/stat`).
    pub id: u32,
    /// Field 2 without its parentheses: the name (`comm`, at most 15 bytes plus a kernel
    /// worker's suffix), with newlines and backslashes escaped by the kernel.
    pub name: String,
    /// Field 3.
    pub state: ThreadState,
    /// Fields 14 and 15: user and system CPU time, in clock ticks (`sysconf(_SC_CLK_TCK)`).
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Field 20: threads in the process.
    pub num_threads: u32,
    /// Field 22: start time after boot, in clock ticks; with the PID it identifies a process
    /// across PID reuse.
    pub start_ticks: u64,
    /// Field 39: the CPU the task last ran on (`ps -o psr`); `None` on kernels before 2.2.8.
    pub last_cpu: Option<u32>,
}

/// Parses one `stat` line.
///
/// The name (field 2) may contain spaces and parentheses, so it runs from the first `(` to the
/// *last* `)`; every later field is free of both.
pub fn parse_stat(text: &str) -> Result<TaskStat, ParseError> {
    let open = text
        .find('(')
        .ok_or_else(|| ParseError::new("no `(` before the name"))?;
    let close = text
        .rfind(')')
        .filter(|&c| c > open)
        .ok_or_else(|| ParseError::new("no `)` after the name"))?;
    let id = text[..open]
        .trim()
        .parse()
        .map_err(|_| ParseError::new("field 1 (pid) is not a number"))?;
    let name = text[open + 1..close].to_string();

    // `rest[0]` is field 3, so field n is `rest[n - 3]`.
    let mut rest = [""; 37];
    let mut count = 0;
    for (slot, field) in rest
        .iter_mut()
        .zip(text[close + 1..].split_ascii_whitespace())
    {
        *slot = field;
        count += 1;
    }
    if count < 20 {
        return Err(ParseError::new(format!(
            "{} fields, expected at least 22",
            count + 2
        )));
    }
    let field = |n: usize| rest[n - 3];
    let number = |n: usize| -> Result<u64, ParseError> {
        field(n)
            .parse()
            .map_err(|_| ParseError::new(format!("field {n} is not a number: `{}`", field(n))))
    };
    let mut letters = field(3).chars();
    let state = match (letters.next(), letters.next()) {
        (Some(c), None) => ThreadState::from_letter(c),
        _ => return Err(ParseError::new(format!("bad state `{}`", field(3)))),
    };
    Ok(TaskStat {
        id,
        name,
        state,
        utime_ticks: number(14)?,
        stime_ticks: number(15)?,
        num_threads: u32::try_from(number(20)?)
            .map_err(|_| ParseError::new("field 20 (num_threads) out of range"))?,
        start_ticks: number(22)?,
        last_cpu: if count > 36 {
            Some(
                u32::try_from(number(39)?)
                    .map_err(|_| ParseError::new("field 39 (processor) out of range"))?,
            )
        } else {
            None
        },
    })
}

/// Run-queue statistics from `schedstat`: `on-CPU-ns run-queue-wait-ns timeslices`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SchedStat {
    /// Time spent running on a CPU, in ns.
    pub on_cpu_ns: u64,
    /// Time spent runnable but waiting on a run queue, in ns.
    pub runq_wait_ns: u64,
    /// Number of times the task was given a CPU.
    pub timeslices: u64,
}

/// Parses `schedstat`. `Ok(None)` for `0 0 0`, which is what kernels whose scheduler
/// statistics are switched off write (`sched_info_on()` false) — never to be shown as zeros.
/// A task that has not run yet also reads `0 0 0`; it is reported as unmeasured too.
pub fn parse_schedstat(text: &str) -> Result<Option<SchedStat>, ParseError> {
    let mut numbers = text.split_ascii_whitespace().map(|f| f.parse::<u64>());
    let mut next = |what: &str| match numbers.next() {
        Some(Ok(v)) => Ok(v),
        _ => Err(ParseError::new(format!("schedstat: missing or bad {what}"))),
    };
    let s = SchedStat {
        on_cpu_ns: next("on-CPU time")?,
        runq_wait_ns: next("run-queue wait")?,
        timeslices: next("timeslice count")?,
    };
    Ok((s
        != SchedStat {
            on_cpu_ns: 0,
            runq_wait_ns: 0,
            timeslices: 0,
        })
    .then_some(s))
}

/// The lines of `status` that contend uses; each is `None` when the kernel did not print it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TaskStatus {
    /// `Tgid`: the process the task belongs to.
    pub tgid: Option<u32>,
    /// `Threads`.
    pub threads: Option<u32>,
    /// `VmRSS`, in KiB (absent for kernel threads and zombies).
    pub vm_rss_kib: Option<u64>,
    /// `Cpus_allowed_list`, e.g. `0-3,8`.
    pub cpus_allowed: Option<String>,
    /// `voluntary_ctxt_switches`: the task gave up the CPU (blocked, slept, yielded).
    pub voluntary_switches: Option<u64>,
    /// `nonvoluntary_ctxt_switches`: the task was preempted.
    pub nonvoluntary_switches: Option<u64>,
}

/// Parses `status` (`Key:\tvalue` lines). Unknown and malformed lines are skipped: this file
/// gains lines with every kernel release.
pub fn parse_status(text: &str) -> TaskStatus {
    let mut s = TaskStatus::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "Tgid" => s.tgid = value.parse().ok(),
            "Threads" => s.threads = value.parse().ok(),
            "VmRSS" => s.vm_rss_kib = value.trim_end_matches("kB").trim().parse().ok(),
            "Cpus_allowed_list" => s.cpus_allowed = Some(value.to_string()),
            "voluntary_ctxt_switches" => s.voluntary_switches = value.parse().ok(),
            "nonvoluntary_ctxt_switches" => s.nonvoluntary_switches = value.parse().ok(),
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded on Linux 6.x from a Python thread.
    const STAT: &str = "9453 (worker-1) S 9442 9442 5441 0 -1 4194304 103 0 0 0 17 4 0 0 20 0 4 0 730444 3133440 418 18446744073709551615 94809950027776 94809950047657 140730909621904 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94809950063664 94809950065280 94810708066304 140730909629122 140730909629142 140730909629142 140730909630443 0\n";

    #[test]
    fn stat_fields() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.id, 9453);
        assert_eq!(s.name, "worker-1");
        assert_eq!(s.state, ThreadState::Sleeping);
        assert_eq!((s.utime_ticks, s.stime_ticks), (17, 4));
        assert_eq!(s.num_threads, 4);
        assert_eq!(s.start_ticks, 730444);
        assert_eq!(s.last_cpu, Some(1));
    }

    #[test]
    fn stat_name_with_spaces_and_parentheses() {
        let line = STAT.replace("(worker-1)", "(a) R (b c) )");
        let s = parse_stat(&line).unwrap();
        assert_eq!(s.name, "a) R (b c) ");
        assert_eq!(s.state, ThreadState::Sleeping);
        assert_eq!(s.last_cpu, Some(1));
    }

    #[test]
    fn stat_of_old_kernel_without_processor() {
        let short: Vec<&str> = STAT.split(' ').take(30).collect();
        let s = parse_stat(&short.join(" ")).unwrap();
        assert_eq!(s.last_cpu, None);
        assert_eq!(s.start_ticks, 730444);
    }

    #[test]
    fn stat_malformed() {
        assert!(parse_stat("").is_err());
        assert!(parse_stat("12 (x").is_err());
        assert!(parse_stat("12 (x) S 1 2 3").is_err());
        assert!(parse_stat(&STAT.replace(" S ", " SS ")).is_err());
        assert!(parse_stat(&STAT.replace(" 17 4 ", " 17 -4 ")).is_err());
        // Truncation anywhere is an error or a shorter valid line, never a panic.
        for cut in 0..STAT.len() {
            let _ = parse_stat(&STAT[..cut]);
        }
    }

    #[test]
    fn state_letters_round_trip() {
        for c in "RSDTtZXIP".chars() {
            assert_eq!(ThreadState::from_letter(c).letter(), c);
        }
        assert_eq!(ThreadState::from_letter('W'), ThreadState::Other('W'));
        assert_eq!(ThreadState::DiskSleep.name(), "disk sleep");
        assert!(ThreadState::from_letter('x').has_exited());
    }

    #[test]
    fn schedstat_values_and_switched_off() {
        assert_eq!(
            parse_schedstat("185839421 7151982 400\n").unwrap(),
            Some(SchedStat {
                on_cpu_ns: 185839421,
                runq_wait_ns: 7151982,
                timeslices: 400
            })
        );
        assert_eq!(parse_schedstat("0 0 0\n").unwrap(), None);
        assert!(parse_schedstat("12 x 3").is_err());
        assert!(parse_schedstat("12 3").is_err());
    }

    #[test]
    fn status_fields() {
        let text = "Name:\tbash\nState:\tS (sleeping)\nTgid:\t5441\nPid:\t5442\n\
                    VmRSS:\t    3900 kB\nThreads:\t3\nCpus_allowed:\t3\n\
                    Cpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t67\n\
                    nonvoluntary_ctxt_switches:\t32\nbroken line\n";
        let s = parse_status(text);
        assert_eq!(s.tgid, Some(5441));
        assert_eq!(s.threads, Some(3));
        assert_eq!(s.vm_rss_kib, Some(3900));
        assert_eq!(s.cpus_allowed.as_deref(), Some("0-1"));
        assert_eq!(s.voluntary_switches, Some(67));
        assert_eq!(s.nonvoluntary_switches, Some(32));
        assert_eq!(parse_status(""), TaskStatus::default());
    }
}
