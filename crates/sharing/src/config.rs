//! The options, read from the environment once in the library's constructor, before the
//! program's threads exist:
//!
//! - `CONTEND_SHARING_DIR=DIR`: the run directory to write into; unset or empty, the runtime is
//!   inactive (hooks do only what the program needs: atomics, copies, allocations);
//! - `CONTEND_SHARING_LINE=64|128` (default 64; 128 models adjacent-line prefetch);
//! - `CONTEND_SHARING_HOT_AFTER=N` (default 64): transfers after which a line is tracked in
//!   detail, 1 to 4294967295;
//! - `CONTEND_SHARING_EXHAUSTIVE=1`: every line in detail from its first access (0: off);
//! - `CONTEND_SHARING_WINDOW=N` (default 65536): history entries kept per hot line, 0 to
//!   16777216;
//! - `CONTEND_SHARING_SAMPLE=N` (default 16): once a hot line's window is full (or it has
//!   none), 1 in N of each thread's accesses to it run the model and are itemised, counting N
//!   each; 1 to 65536 (1: every access, exact and slowest).
//!
//! A value outside those is reported on stderr (`contend sharing: ...`) and the default used.

use std::sync::OnceLock;

pub const DEFAULT_LINE: u32 = 64;
pub const DEFAULT_HOT_AFTER: u32 = 64;
pub const DEFAULT_WINDOW: u32 = 65536;
pub const MAX_WINDOW: u32 = 1 << 24;
pub const DEFAULT_SAMPLE: u32 = 16;
pub const MAX_SAMPLE: u32 = 65536;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub dir: std::path::PathBuf,
    pub line_size: u32,
    pub hot_after: u32,
    pub exhaustive: bool,
    pub window: u32,
    pub sample_every: u32,
}

static CONFIG: OnceLock<Option<Config>> = OnceLock::new();

/// Builds the configuration from a lookup of variables; complaints go to `warn`. None: inactive.
pub fn parse(var: impl Fn(&str) -> Option<String>, mut warn: impl FnMut(String)) -> Option<Config> {
    let dir = var("CONTEND_SHARING_DIR").filter(|d| !d.is_empty())?;
    let mut number = |name: &str, allowed: &str, ok: &dyn Fn(u64) -> bool, default: u32| {
        let Some(v) = var(name) else {
            return default;
        };
        match v.trim().parse::<u64>() {
            Ok(n) if ok(n) => n as u32,
            _ => {
                warn(format!(
                    "{name}={v:?} is not allowed: use {allowed}; using {default}"
                ));
                default
            }
        }
    };
    let line_size = number(
        "CONTEND_SHARING_LINE",
        "64 or 128",
        &|n| n == 64 || n == 128,
        DEFAULT_LINE,
    );
    let hot_after = number(
        "CONTEND_SHARING_HOT_AFTER",
        "a whole number from 1 to 4294967295",
        &|n| (1..=u64::from(u32::MAX)).contains(&n),
        DEFAULT_HOT_AFTER,
    );
    let window = number(
        "CONTEND_SHARING_WINDOW",
        "a whole number from 0 to 16777216",
        &|n| n <= u64::from(MAX_WINDOW),
        DEFAULT_WINDOW,
    );
    let sample_every = number(
        "CONTEND_SHARING_SAMPLE",
        "a whole number from 1 to 65536",
        &|n| (1..=u64::from(MAX_SAMPLE)).contains(&n),
        DEFAULT_SAMPLE,
    );
    let exhaustive = match var("CONTEND_SHARING_EXHAUSTIVE").as_deref().map(str::trim) {
        None | Some("") | Some("0") => false,
        Some("1") => true,
        Some(other) => {
            warn(format!(
                "CONTEND_SHARING_EXHAUSTIVE={other:?} is not allowed: use 1 or 0; using 0"
            ));
            false
        }
    };
    Some(Config {
        dir: dir.into(),
        line_size,
        hot_after,
        exhaustive,
        window,
        sample_every,
    })
}

/// Reads the environment (once).
pub fn load() -> Option<&'static Config> {
    CONFIG
        .get_or_init(|| {
            parse(
                |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()),
                |m| crate::sys::say(&m),
            )
        })
        .as_ref()
}

/// The configuration when active (after `load`).
#[inline]
pub fn get() -> Option<&'static Config> {
    CONFIG.get().and_then(Option::as_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> (Option<Config>, Vec<String>) {
        let mut warnings = Vec::new();
        let c = parse(
            |n| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            },
            |w| warnings.push(w),
        );
        (c, warnings)
    }

    #[test]
    fn inactive_without_a_directory() {
        assert_eq!(with(&[]).0, None);
        assert_eq!(with(&[("CONTEND_SHARING_DIR", "")]).0, None);
        assert_eq!(with(&[("CONTEND_SHARING_LINE", "128")]).0, None);
    }

    #[test]
    fn defaults_and_values() {
        let (c, w) = with(&[("CONTEND_SHARING_DIR", "/tmp/r")]);
        let c = c.unwrap();
        assert!(w.is_empty());
        assert_eq!(
            (c.line_size, c.hot_after, c.exhaustive, c.window),
            (64, 64, false, 65536)
        );
        assert_eq!(c.sample_every, 16);
        let (c, w) = with(&[
            ("CONTEND_SHARING_DIR", "/tmp/r"),
            ("CONTEND_SHARING_LINE", "128"),
            ("CONTEND_SHARING_HOT_AFTER", "5"),
            ("CONTEND_SHARING_EXHAUSTIVE", "1"),
            ("CONTEND_SHARING_WINDOW", "0"),
            ("CONTEND_SHARING_SAMPLE", "1"),
        ]);
        let c = c.unwrap();
        assert!(w.is_empty());
        assert_eq!(
            (c.line_size, c.hot_after, c.exhaustive, c.window),
            (128, 5, true, 0)
        );
        assert_eq!(c.sample_every, 1);
    }

    #[test]
    fn bad_values_are_named_and_replaced_by_the_default() {
        let (c, w) = with(&[
            ("CONTEND_SHARING_DIR", "/tmp/r"),
            ("CONTEND_SHARING_LINE", "96"),
            ("CONTEND_SHARING_HOT_AFTER", "0"),
            ("CONTEND_SHARING_EXHAUSTIVE", "yes"),
            ("CONTEND_SHARING_WINDOW", "-1"),
            ("CONTEND_SHARING_SAMPLE", "0"),
        ]);
        let c = c.unwrap();
        assert_eq!(
            (c.line_size, c.hot_after, c.exhaustive, c.window),
            (64, 64, false, 65536)
        );
        assert_eq!(c.sample_every, 16);
        assert_eq!(w.len(), 5, "{w:?}");
        assert!(w[0].contains("CONTEND_SHARING_LINE=\"96\"") && w[0].contains("64 or 128"));
        assert!(w[1].contains("CONTEND_SHARING_HOT_AFTER") && w[1].contains("from 1"));
        assert!(w[2].contains("CONTEND_SHARING_WINDOW"));
        assert!(w[3].contains("CONTEND_SHARING_SAMPLE") && w[3].contains("from 1 to 65536"));
        assert!(w[4].contains("CONTEND_SHARING_EXHAUSTIVE"));
    }
}
