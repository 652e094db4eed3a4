//! Option parsers and option-driven loaders shared by several commands.

use crate::exit::bad_input;
use std::path::Path;
use topology::Topology;

/// The topology `--sysfs DIR` or `--synthetic SPEC` asks for, else this machine's.
pub fn topology(sysfs: Option<&Path>, synthetic: Option<&str>) -> anyhow::Result<Topology> {
    match (sysfs, synthetic) {
        (Some(root), _) => Topology::from_root(root).map_err(|e| bad_input(e.to_string())),
        (None, Some(spec)) => Topology::synthetic(spec).map_err(|e| bad_input(e.to_string())),
        // Not the user's input: this machine could not be read (exit 1).
        (None, None) => Ok(Topology::live()?),
    }
}

/// contend's own command line, for meta.json's `recorded_by`: `args_os`, shown lossily (a
/// path that is not UTF-8 is kept as far as it reads; `std::env::args` would panic on it).
pub fn command_line() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// `123`, `64K`, `256M`, `2G` (binary multiples).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'B' => 1,
                _ => return Err(format!("`{s}`: use bytes with K, M or G")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a size in bytes (e.g. 256M)"))?;
    v.checked_mul(mult)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("`{s}`: give a size above 0"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(super::parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(super::parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(super::parse_bytes("1000"), Ok(1000));
        assert!(super::parse_bytes("0").is_err());
        assert!(super::parse_bytes("12X").is_err());
        assert!(super::parse_bytes("99999999999G").is_err());
    }
}
