//! `/proc/PID/maps` snapshots: parsing, merging, and address → mapping lookup.

use serde::Serialize;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A line of a maps file that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("maps line {line}: {why}")]
pub struct MapsError {
    /// 1-based line number in the snapshot.
    pub line: usize,
    /// What was wrong with it.
    pub why: String,
}

/// Access permissions of a mapping (`r-xp`, `rw-s`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, schemars::JsonSchema)]
pub struct Perms {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
    /// `s` (shared) rather than `p` (private, copy-on-write).
    pub shared: bool,
}

impl fmt::Display for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = |b: bool, ch: char| if b { ch } else { '-' };
        write!(
            f,
            "{}{}{}{}",
            c(self.read, 'r'),
            c(self.write, 'w'),
            c(self.execute, 'x'),
            if self.shared { 's' } else { 'p' }
        )
    }
}

/// What backs a mapping.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
pub enum Backing {
    /// No pathname: anonymous memory (including the part of a module's `.bss` that
    /// lies past the end of its file, and JIT code).
    Anonymous,
    /// A file. `deleted` is set when the kernel appended ` (deleted)`: the file had been
    /// unlinked (or replaced) when the snapshot was taken, so the file now at `path`, if any,
    /// is not the one that was mapped.
    File { path: PathBuf, deleted: bool },
    /// A pseudo-path in brackets, kept with its brackets: `[heap]`, `[stack]`, `[vdso]`,
    /// `[vvar]`, `[vsyscall]`, `[anon:NAME]`, `[stack:TID]`, ...
    Special(String),
}

/// One line of a maps file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MapEntry {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    pub perms: Perms,
    /// File offset mapped at `start` (0 for anonymous mappings).
    pub offset: u64,
    /// Device (major, minor) of the file.
    pub dev: (u32, u32),
    /// Inode of the file (0 for anonymous mappings).
    pub inode: u64,
    pub backing: Backing,
}

impl MapEntry {
    /// Whether `addr` lies in `[start, end)`.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The file's path, for file-backed mappings.
    pub fn path(&self) -> Option<&Path> {
        match &self.backing {
            Backing::File { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Whether the kernel marked the file `(deleted)`.
    pub fn deleted(&self) -> bool {
        matches!(self.backing, Backing::File { deleted: true, .. })
    }

    /// The file offset that `addr` maps (meaningful for file-backed mappings).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.offset)
    }

    /// Whether this mapping is a loadable module (an ELF file mapped from disk) rather than
    /// shared memory that merely has a path (`/dev/zero`, `/SYSV…`, `/memfd:…`, `/dev/shm/…`).
    pub fn is_module(&self) -> bool {
        match &self.backing {
            Backing::File { path, .. } => {
                let b = path.as_os_str().as_bytes();
                !(b.starts_with(b"/dev/") || b.starts_with(b"/SYSV") || b.starts_with(b"/memfd:"))
            }
            _ => false,
        }
    }

    /// A short name for display: the file's base name, the special name, or `[anon]`.
    pub fn short_name(&self) -> String {
        match &self.backing {
            Backing::File { path, .. } => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.to_string_lossy().into_owned()),
            Backing::Special(s) => s.clone(),
            Backing::Anonymous => "[anon]".to_string(),
        }
    }

    /// The piece `[start, end)` of this entry (which must lie inside it), with the file offset
    /// adjusted.
    fn piece(&self, start: u64, end: u64) -> MapEntry {
        let mut e = self.clone();
        if matches!(e.backing, Backing::File { .. }) {
            e.offset = self.offset.wrapping_add(start - self.start);
        }
        e.start = start;
        e.end = end;
        e
    }
}

/// A file-backed mapping found for an address: the entry and the file offset of the address.
#[derive(Debug, Clone, Copy)]
pub struct ModuleAddr<'a> {
    pub entry: &'a MapEntry,
    /// Offset in the file of the address that was looked up.
    pub file_offset: u64,
}

impl<'a> ModuleAddr<'a> {
    /// The module's path as it appeared in the maps file.
    pub fn path(&self) -> &'a Path {
        // A ModuleAddr is only made for file-backed entries.
        self.entry.path().unwrap_or(Path::new(""))
    }
}

/// The address space of a process, from one or more `/proc/PID/maps` snapshots.
///
/// Entries are kept sorted by address and never overlap. When snapshots are merged, a later
/// snapshot wins where its mappings overlap earlier ones; mappings of earlier snapshots that
/// no later one overlaps are kept (a library unloaded with `dlclose` can still name addresses
/// recorded while it was loaded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Maps {
    entries: Vec<MapEntry>,
}

impl Maps {
    /// An empty address space.
    pub fn new() -> Maps {
        Maps::default()
    }

    /// Parses one snapshot strictly: the first malformed line is an error.
    pub fn parse(text: impl AsRef<[u8]>) -> Result<Maps, MapsError> {
        let (maps, errors) = Maps::parse_lossy(text);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(maps),
        }
    }

    /// Parses one snapshot, skipping malformed lines (a snapshot cut short when the recorder was
    /// killed ends in a partial line) and returning them as errors next to what was parsed.
    /// Lines that overlap an earlier line of the same snapshot are dropped and reported too.
    pub fn parse_lossy(text: impl AsRef<[u8]>) -> (Maps, Vec<MapsError>) {
        let mut entries = Vec::new();
        let mut errors = Vec::new();
        for (i, line) in text.as_ref().split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_line(line) {
                Ok(e) => entries.push((i + 1, e)),
                Err(why) => errors.push(MapsError { line: i + 1, why }),
            }
        }
        entries.sort_by_key(|(_, e)| e.start);
        let mut kept: Vec<MapEntry> = Vec::with_capacity(entries.len());
        for (line, e) in entries {
            if let Some(last) = kept.last() {
                if e.start < last.end {
                    errors.push(MapsError {
                        line,
                        why: format!(
                            "{:x}-{:x} overlaps {:x}-{:x} of the same snapshot; line ignored",
                            e.start, e.end, last.start, last.end
                        ),
                    });
                    continue;
                }
            }
            kept.push(e);
        }
        (Maps { entries: kept }, errors)
    }

    /// Reads (a regular file within [`trace::files::MAPS`]'s size) and parses (lossily) a
    /// maps snapshot file the user named; a run directory's are read with
    /// `trace::files::read_in_run` and [`Maps::parse_lossy`].
    pub fn read(
        path: impl AsRef<Path>,
    ) -> Result<(Maps, Vec<MapsError>), trace::files::ReadFileError> {
        let bytes = trace::files::read_regular(path.as_ref(), &trace::files::MAPS)?;
        Ok(Maps::parse_lossy(bytes))
    }

    /// Merges a later snapshot into this one: `later` wins where it overlaps.
    pub fn merge(&mut self, later: &Maps) {
        if later.entries.is_empty() {
            return;
        }
        let top = &later.entries;
        let mut out: Vec<MapEntry> = Vec::with_capacity(self.entries.len() + top.len());
        // Both lists are sorted and non-overlapping: cut each old entry by the new ones.
        let mut j = 0;
        for old in &self.entries {
            // Skip new entries that end before this old one starts.
            while j < top.len() && top[j].end <= old.start {
                j += 1;
            }
            let mut cursor = old.start;
            let mut k = j;
            while k < top.len() && top[k].start < old.end && cursor < old.end {
                let t = &top[k];
                if t.start > cursor {
                    out.push(old.piece(cursor, t.start));
                }
                cursor = cursor.max(t.end);
                k += 1;
            }
            if cursor < old.end {
                out.push(old.piece(cursor, old.end));
            }
        }
        out.extend(top.iter().cloned());
        out.sort_by_key(|e| e.start);
        self.entries = out;
    }

    /// Merges snapshots in the order given (later ones win).
    pub fn from_snapshots<'a>(snapshots: impl IntoIterator<Item = &'a Maps>) -> Maps {
        let mut m = Maps::new();
        for s in snapshots {
            m.merge(s);
        }
        m
    }

    /// All entries, sorted by address.
    pub fn entries(&self) -> &[MapEntry] {
        &self.entries
    }

    /// Index of the entry containing `addr`.
    pub(crate) fn index_of(&self, addr: u64) -> Option<usize> {
        let i = self.entries.partition_point(|e| e.start <= addr);
        let i = i.checked_sub(1)?;
        self.entries[i].contains(addr).then_some(i)
    }

    /// The mapping containing `addr`, whatever backs it.
    pub fn find(&self, addr: u64) -> Option<&MapEntry> {
        self.index_of(addr).map(|i| &self.entries[i])
    }

    /// The file-backed mapping containing `addr`, with the file offset of `addr`.
    pub fn module_of(&self, addr: u64) -> Option<ModuleAddr<'_>> {
        let entry = self.find(addr)?;
        entry.path()?;
        Some(ModuleAddr {
            entry,
            file_offset: entry.file_offset(addr),
        })
    }
}

fn parse_hex(field: &[u8], what: &str) -> Result<u64, String> {
    let s = std::str::from_utf8(field).map_err(|_| format!("{what} is not text"))?;
    u64::from_str_radix(s, 16).map_err(|_| format!("bad {what} `{s}`"))
}

/// Splits off the next space- or tab-separated field, skipping leading blanks.
fn take_field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let s = *rest;
    let begin = s.iter().position(|&b| b != b' ' && b != b'\t')?;
    let s = &s[begin..];
    let len = s
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(s.len());
    *rest = &s[len..];
    Some(&s[..len])
}

fn parse_line(line: &[u8]) -> Result<MapEntry, String> {
    let mut rest = line;
    let range = take_field(&mut rest).ok_or("empty line")?;
    let perms = take_field(&mut rest).ok_or("missing permissions")?;
    let offset = take_field(&mut rest).ok_or("missing offset")?;
    let dev = take_field(&mut rest).ok_or("missing device")?;
    let inode = take_field(&mut rest).ok_or("missing inode")?;

    let dash = range
        .iter()
        .position(|&b| b == b'-')
        .ok_or("address range has no `-`")?;
    let start = parse_hex(&range[..dash], "start address")?;
    let end = parse_hex(&range[dash + 1..], "end address")?;
    if end <= start {
        return Err(format!("empty or reversed range {start:x}-{end:x}"));
    }

    if perms.len() != 4 {
        return Err(format!(
            "bad permissions `{}`",
            String::from_utf8_lossy(perms)
        ));
    }
    let flag = |i: usize, yes: u8| -> Result<bool, String> {
        match perms[i] {
            b'-' => Ok(false),
            b if b == yes => Ok(true),
            _ => Err(format!(
                "bad permissions `{}`",
                String::from_utf8_lossy(perms)
            )),
        }
    };
    let perms = Perms {
        read: flag(0, b'r')?,
        write: flag(1, b'w')?,
        execute: flag(2, b'x')?,
        shared: match perms[3] {
            b's' => true,
            b'p' => false,
            _ => {
                return Err(format!(
                    "bad permissions `{}`",
                    String::from_utf8_lossy(perms)
                ))
            }
        },
    };

    let offset = parse_hex(offset, "offset")?;
    let colon = dev
        .iter()
        .position(|&b| b == b':')
        .ok_or("device has no `:`")?;
    let major = parse_hex(&dev[..colon], "device major")?;
    let minor = parse_hex(&dev[colon + 1..], "device minor")?;
    let dev = (
        u32::try_from(major).map_err(|_| "device major too large")?,
        u32::try_from(minor).map_err(|_| "device minor too large")?,
    );
    let inode = std::str::from_utf8(inode)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| format!("bad inode `{}`", String::from_utf8_lossy(inode)))?;

    // The pathname is everything after the padding; it may contain spaces.
    let name_start = rest
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(rest.len());
    let name = &rest[name_start..];
    let backing = if name.is_empty() {
        Backing::Anonymous
    } else if name[0] == b'/' {
        let (name, deleted) = match name.strip_suffix(b" (deleted)") {
            Some(n) => (n, true),
            None => (name, false),
        };
        Backing::File {
            path: PathBuf::from(OsStr::from_bytes(&unescape(name))),
            deleted,
        }
    } else {
        Backing::Special(String::from_utf8_lossy(name).into_owned())
    };
    Ok(MapEntry {
        start,
        end,
        perms,
        offset,
        dev,
        inode,
        backing,
    })
}

/// The kernel escapes a newline in a path as `\012`.
fn unescape(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut i = 0;
    while i < name.len() {
        if name[i..].starts_with(b"\\012") {
            out.push(b'\n');
            i += 4;
        } else {
            out.push(name[i]);
            i += 1;
        }
    }
    out
}
