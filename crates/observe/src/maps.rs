//! Parser for `/proc/PID/maps`, used for the one fact `numa_maps` lacks: whether a mapping was
//! made `MAP_SHARED` (the fourth permission letter, `s` rather than `p`).

use crate::error::ParseError;
use std::collections::HashMap;

/// One line of `maps`: `start-end perms offset dev inode [path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    /// `s` in the permissions: writes are seen by every process mapping the same object.
    pub shared: bool,
    /// The path or pseudo-name (`[heap]`, `[stack]`, `/memfd:x (deleted)`); spaces are kept
    /// as is (this file escapes only newlines).
    pub path: Option<String>,
}

/// Parses one line of `maps`.
pub fn parse_maps_line(line: &str) -> Result<MapsEntry, ParseError> {
    // The first five fields are separated by single spaces; the path follows padding.
    let mut fields = line.splitn(6, ' ');
    let range = fields.next().unwrap_or("");
    let perms = fields
        .next()
        .ok_or_else(|| ParseError::new("maps: no permissions"))?;
    let (start, end) = range
        .split_once('-')
        .and_then(|(s, e)| Some((hex(s)?, hex(e)?)))
        .ok_or_else(|| ParseError::new(format!("maps: bad address range `{range}`")))?;
    let shared = match perms.as_bytes().get(3) {
        Some(b's') => true,
        Some(b'p') => false,
        _ => return Err(ParseError::new(format!("maps: bad permissions `{perms}`"))),
    };
    let path = fields
        .nth(3)
        .map(|p| p.trim_start_matches(' ').trim_end_matches('\n'))
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    Ok(MapsEntry {
        start,
        end,
        shared,
        path,
    })
}

/// The `MAP_SHARED` bit of every mapping, by start address; lines that do not parse are left
/// out (the caller then falls back to guessing from the file name).
pub fn shared_by_start(text: &str) -> HashMap<u64, bool> {
    text.lines()
        .filter_map(|l| parse_maps_line(l).ok())
        .map(|e| (e.start, e.shared))
        .collect()
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_file_shared_memfd_and_anonymous() {
        let e = parse_maps_line(
            "556a4b2e9000-556a4b2eb000 r--p 00000000 fe:00 247278                     /usr/bin/head",
        )
        .unwrap();
        assert_eq!(
            (e.start, e.end, e.shared),
            (0x556a4b2e9000, 0x556a4b2eb000, false)
        );
        assert_eq!(e.path.as_deref(), Some("/usr/bin/head"));

        let e = parse_maps_line(
            "7f0000000000-7f0000100000 rw-s 00000000 00:01 1035   /memfd:ring buffer (deleted)",
        )
        .unwrap();
        assert!(e.shared);
        assert_eq!(e.path.as_deref(), Some("/memfd:ring buffer (deleted)"));

        let e = parse_maps_line("7f1c2d3e4000-7f1c2d3e8000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(e.path, None);
        let e = parse_maps_line("7f1c2d3e4000-7f1c2d3e8000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(e.path, None);
    }

    #[test]
    fn malformed_lines() {
        assert!(parse_maps_line("").is_err());
        assert!(parse_maps_line("zz-10 rw-p 0 0 0").is_err());
        assert!(parse_maps_line("10-20 rw").is_err());
        let map = shared_by_start("10-20 rw-s 0 00:00 0\nbroken\n30-40 r--p 0 00:00 0 /x\n");
        assert_eq!(map.len(), 2);
        assert!(map[&0x10]);
        assert!(!map[&0x30]);
    }
}
