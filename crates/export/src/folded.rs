//! Folded stacks, the input of flame graphs: one line per distinct stack,
//! `root;caller;…;leaf VALUE`, as Brendan Gregg's `stackcollapse-*.pl` scripts produce and
//! `flamegraph.pl`, `inferno-flamegraph` and speedscope read.
//!
//! # What is produced
//!
//! From a [`Profile`]'s samples and one chosen value (e.g. `delay` in a lock profile):
//! frames root first, joined by `;`, a space, and the sum of that value over every sample
//! with the same folded stack (saturating at `i64::MAX`). Lines are sorted bytewise (what
//! `sort` does after `stackcollapse`), so the output is deterministic. Stacks whose total is
//! zero or negative are left out, since a flame graph has no width for them.
//!
//! A frame is its function name (`[unknown]` when empty, as `stackcollapse-perf.pl` writes),
//! optionally prefixed with the module's file name and a backquote (`libc.so.6`pthread_mutex_lock`,
//! the DTrace convention `stackcollapse.pl` keeps) and followed by ` (file:line)`. Names are
//! made safe the way `stackcollapse-perf.pl` does it: `;` becomes `:`; line breaks and other
//! control characters become spaces.
//!
//! No SVG is drawn here: `inferno` (the Rust flame-graph renderer) is CDDL-1.0 licensed and
//! brings a dozen crates; pipe the output into `inferno-flamegraph` or `flamegraph.pl`.
//!
//! # Verified with
//!
//! A golden string in this module's tests, in the format `flamegraph.pl` documents.

use std::collections::BTreeMap;
use std::io::Write;

use crate::pprof::{Frame, Profile};
use crate::ExportError;

/// How to fold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Which of the samples' values to sum (see [`Profile::value_index`]).
    pub value_index: usize,
    /// Prefix frames with their module's file name: `libc.so.6`pthread_mutex_lock`.
    pub module: bool,
    /// Suffix frames with their source position: `worker (planted.c:42)`.
    pub file_line: bool,
}

/// Writes the folded stacks of `profile`'s samples for value `options.value_index`.
/// Returns the number of lines written. Fails when the profile has no such value.
pub fn write(
    profile: &Profile,
    options: &Options,
    mut out: impl Write,
) -> Result<usize, ExportError> {
    let stacks = fold(profile, options)?;
    let mut buf = Vec::new();
    for (stack, total) in &stacks {
        buf.extend_from_slice(stack.as_bytes());
        writeln!(buf, " {total}")?;
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.flush()?;
    Ok(stacks.len())
}

/// The folded stacks [`write`] writes, as `(stack, total)`: frames root first joined by `;`,
/// sorted bytewise, totals above zero only (what a flame graph drawn elsewhere reads, e.g.
/// the report page's). Fails when the profile has no such value.
pub fn fold(profile: &Profile, options: &Options) -> Result<Vec<(String, i64)>, ExportError> {
    let n = profile.sample_types.len();
    if options.value_index >= n && !profile.samples.is_empty() {
        return Err(ExportError::invalid(format!(
            "value index {} is out of range: the profile has {n} sample types",
            options.value_index
        )));
    }
    let mut stacks: BTreeMap<String, i64> = BTreeMap::new();
    for (i, s) in profile.samples.iter().enumerate() {
        let Some(&v) = s.values.get(options.value_index) else {
            return Err(ExportError::invalid(format!(
                "sample {i} has no value {}",
                options.value_index
            )));
        };
        let key = s
            .stack
            .iter()
            .rev()
            .map(|f| label(f, options))
            .collect::<Vec<_>>()
            .join(";");
        let total = stacks.entry(key).or_insert(0);
        *total = total.saturating_add(v);
    }
    Ok(stacks
        .into_iter()
        .filter(|&(_, total)| total > 0)
        // A sample without frames still has its width; name it like perf does.
        .map(|(stack, total)| {
            if stack.is_empty() {
                ("[unknown]".to_string(), total)
            } else {
                (stack, total)
            }
        })
        .collect())
}

/// The folded name of one frame.
fn label(f: &Frame, o: &Options) -> String {
    let mut s = String::new();
    if o.module {
        if let Some(m) = &f.module {
            let base = m.rsplit('/').next().unwrap_or(m);
            if !base.is_empty() {
                s.push_str(base);
                s.push('`');
            }
        }
    }
    if f.function.is_empty() {
        s.push_str("[unknown]");
    } else {
        s.push_str(&f.function);
    }
    if o.file_line {
        if let Some(file) = &f.file {
            s.push_str(" (");
            s.push_str(file);
            if let Some(line) = f.line {
                s.push(':');
                s.push_str(&line.to_string());
            }
            s.push(')');
        }
    }
    sanitize(&s)
}

/// `;` separates frames and a line break ends the record: neither may appear in a name.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pprof::{Profile, Sample};

    fn f(function: &str) -> Frame {
        Frame {
            function: function.into(),
            ..Frame::default()
        }
    }

    fn sample(stack: &[&str], values: [i64; 2]) -> Sample {
        Sample {
            stack: stack.iter().map(|s| f(s)).collect(),
            values: values.to_vec(),
            labels: vec![],
        }
    }

    fn profile() -> Profile {
        let mut p = Profile::lock_contention();
        p.samples = vec![
            // leaf first, as in pprof
            sample(
                &["pthread_mutex_lock", "worker", "start_thread"],
                [10, 1000],
            ),
            sample(&["pthread_mutex_lock", "other", "start_thread"], [1, 5]),
            sample(&["pthread_mutex_lock", "worker", "start_thread"], [2, 500]),
            sample(&["a;b", "line\nbreak", "main"], [1, 7]),
            sample(&["", "main"], [1, 3]),
            sample(&["never waited", "main"], [4, 0]),
            sample(&[], [1, 9]),
        ];
        p
    }

    fn fold(p: &Profile, o: &Options) -> String {
        let mut out = Vec::new();
        write(p, o, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn golden_delay() {
        let p = profile();
        let o = Options {
            value_index: p.value_index("delay").unwrap(),
            ..Options::default()
        };
        assert_eq!(
            fold(&p, &o),
            "[unknown] 9\n\
             main;[unknown] 3\n\
             main;line break;a:b 7\n\
             start_thread;other;pthread_mutex_lock 5\n\
             start_thread;worker;pthread_mutex_lock 1500\n"
        );
    }

    #[test]
    fn golden_contentions_with_modules_and_lines() {
        let mut p = Profile::lock_contention();
        p.samples = vec![Sample {
            stack: vec![
                Frame {
                    function: "pthread_mutex_lock".into(),
                    module: Some("/usr/lib/x86_64-linux-gnu/libc.so.6".into()),
                    ..Frame::default()
                },
                Frame {
                    function: "worker".into(),
                    file: Some("planted.c".into()),
                    line: Some(42),
                    module: Some("/tmp/planted".into()),
                    address: 0x401136,
                },
            ],
            values: vec![12, 34],
            labels: vec![],
        }];
        let o = Options {
            value_index: 0,
            module: true,
            file_line: true,
        };
        assert_eq!(
            fold(&p, &o),
            "planted`worker (planted.c:42);libc.so.6`pthread_mutex_lock 12\n"
        );
    }

    #[test]
    fn odd_input() {
        // Empty profile: nothing, even with no sample types.
        assert_eq!(fold(&Profile::default(), &Options::default()), "");
        // Out-of-range value index.
        let p = profile();
        let o = Options {
            value_index: 2,
            ..Options::default()
        };
        assert!(write(&p, &o, Vec::new()).is_err());
        // Totals saturate instead of overflowing.
        let mut big = Profile::lock_contention();
        big.samples = vec![sample(&["x"], [i64::MAX, 0]), sample(&["x"], [i64::MAX, 0])];
        assert_eq!(fold(&big, &Options::default()), format!("x {}\n", i64::MAX));
        // A sample with fewer values than types is an error, not a panic.
        big.samples.push(Sample::default());
        assert!(write(&big, &Options::default(), Vec::new()).is_err());
    }
}
