//! Reading one ELF module from disk: load segments, symbol tables, build-id, debug link and
//! DWARF. Everything is copied out of the file while it is open, so nothing here keeps a file
//! mapped, and every length read from the file is checked before it is used.

use crate::maps::Perms;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};
use std::borrow::Cow;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Largest page size we allow for when relating a mapping's file offset to a segment.
const MAX_PAGE: u64 = 64 * 1024;
/// How far back a symbol lookup walks past non-containing symbols (nested symbols are rare).
const MAX_WALK: usize = 64;

/// A file's bytes, mapped or read.
pub(crate) enum FileData {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for FileData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileData::Map(m) => m,
            FileData::Owned(v) => v,
        }
    }
}

/// Opens a regular file (never a FIFO, device or directory; at most [`trace::files::ELF`]'s
/// size) and maps it. Links are followed: modules are named by the maps, and debug files are
/// reached through the build-id links.
pub(crate) fn open_regular(path: &Path) -> Result<(FileData, Metadata), String> {
    let kind = &trace::files::ELF;
    let opened = trace::files::open_regular(path, kind).map_err(|e| e.reason())?;
    let meta = opened.file.metadata().map_err(|e| e.to_string())?;
    if opened.size == 0 {
        return Ok((FileData::Owned(Vec::new()), meta));
    }
    // SAFETY: the mapping is read-only and private; it lives only while this module is being
    // parsed (everything needed is copied out). A file truncated by another process during
    // those milliseconds could raise SIGBUS; files under analysis are not expected to be
    // rewritten in place (package managers and linkers replace them).
    match unsafe { memmap2::Mmap::map(&opened.file) } {
        Ok(m) => Ok((FileData::Map(m), meta)),
        Err(_) => opened
            .read(kind)
            .map(|v| (FileData::Owned(v), meta))
            .map_err(|e| e.reason()),
    }
}

/// A PT_LOAD program header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadSeg {
    pub vaddr: u64,
    pub memsz: u64,
    pub offset: u64,
    pub filesz: u64,
    pub flags: u32,
}

const PF_X: u32 = 1;
const PF_W: u32 = 2;

/// A symbol copied out of `.symtab` / `.dynsym`.
#[derive(Debug, Clone)]
pub(crate) struct Sym {
    pub addr: u64,
    pub size: u64,
    pub name: Box<str>,
    /// 0 global, 1 weak, 2 local: lower is preferred among aliases.
    rank: u8,
    from_symtab: bool,
}

impl Sym {
    fn end(&self) -> u64 {
        self.addr.saturating_add(self.size)
    }
    /// Preference among symbols at one address: sized, then global, then fewer leading
    /// underscores, then shorter, then by name (deterministic).
    fn key(&self) -> (bool, u8, usize, usize, &str) {
        let underscores = self.name.bytes().take_while(|&b| b == b'_').count();
        (
            self.size == 0,
            self.rank,
            underscores,
            self.name.len(),
            &self.name,
        )
    }
}

/// Symbols of one kind, sorted by address.
#[derive(Debug, Default)]
pub(crate) struct SymTable {
    syms: Vec<Sym>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SymUse {
    Code,
    Data,
}

impl SymTable {
    fn build(mut syms: Vec<Sym>) -> SymTable {
        syms.sort_by(|a, b| {
            (a.addr, a.size, &a.name, !a.from_symtab).cmp(&(
                b.addr,
                b.size,
                &b.name,
                !b.from_symtab,
            ))
        });
        syms.dedup_by(|b, a| a.addr == b.addr && a.size == b.size && a.name == b.name);
        SymTable { syms }
    }

    /// The symbol containing `vaddr`: the innermost sized symbol that contains it; failing
    /// that, for code, a size-less `.symtab` symbol that is the nearest one below it; a
    /// size-less symbol always matches its own address exactly.
    pub fn lookup(&self, vaddr: u64, usage: SymUse) -> Option<&Sym> {
        let n = self.syms.partition_point(|s| s.addr <= vaddr);
        if n == 0 {
            return None;
        }
        let mut best: Option<&Sym> = None;
        for s in self.syms[..n].iter().rev().take(MAX_WALK) {
            if let Some(b) = best {
                if s.addr != b.addr {
                    break;
                }
            }
            if s.size > 0 && vaddr < s.end() && best.is_none_or(|b| s.key() < b.key()) {
                best = Some(s);
            }
        }
        if best.is_some() {
            return best;
        }
        let nearest = self.syms[n - 1].addr;
        self.syms[..n]
            .iter()
            .rev()
            .take_while(|s| s.addr == nearest)
            .filter(|s| {
                s.size == 0 && (s.addr == vaddr || (usage == SymUse::Code && s.from_symtab))
            })
            .min_by(|a, b| a.key().cmp(&b.key()))
    }
}

/// What one ELF file yields.
pub(crate) struct ParsedElf {
    pub loads: Vec<LoadSeg>,
    pub funcs: Vec<Sym>,
    pub objects: Vec<Sym>,
    pub has_symtab: bool,
    pub build_id: Option<Vec<u8>>,
    pub debuglink: Option<(Vec<u8>, u32)>,
    /// `None`: no DWARF in this file. `Some(Err)`: DWARF present but unusable.
    pub dwarf: Option<Result<gimli::Dwarf<Reader>, String>>,
    /// Problems that did not stop the parse (a bad compressed section, ...).
    pub warnings: Vec<String>,
    /// The call frame information, for `crate::unwind`.
    pub unwind: UnwindSections,
}

/// The sections an unwinder needs (link-time addresses and bytes), copied out of the file.
#[derive(Debug, Default, Clone)]
pub(crate) struct UnwindSections {
    pub text: Option<std::ops::Range<u64>>,
    pub got: Option<std::ops::Range<u64>>,
    pub eh_frame: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    pub eh_frame_hdr: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    pub debug_frame: Option<Arc<[u8]>>,
}

impl UnwindSections {
    fn read(file: &object::File<'_>) -> UnwindSections {
        let range = |name: &str| {
            let s = file.section_by_name(name)?;
            Some(s.address()..s.address().checked_add(s.size())?)
        };
        let bytes = |name: &str| -> Option<Arc<[u8]>> {
            let s = file.section_by_name(name)?;
            if s.kind() == SectionKind::UninitializedData {
                return None;
            }
            section_data(&s).ok().map(|d| Arc::from(&*d))
        };
        let both = |name: &str| Some((range(name)?, bytes(name)?));
        UnwindSections {
            text: range(".text"),
            got: range(".got"),
            eh_frame: both(".eh_frame"),
            eh_frame_hdr: both(".eh_frame_hdr"),
            debug_frame: bytes(".debug_frame"),
        }
    }

    /// No call frame information at all.
    pub fn is_empty(&self) -> bool {
        self.eh_frame.is_none() && self.debug_frame.is_none()
    }
}

pub(crate) fn is_elf(data: &[u8]) -> bool {
    data.starts_with(b"\x7fELF")
}

/// Parses an ELF file's bytes. Never panics on malformed input: every failure is an `Err`
/// or a warning.
pub(crate) fn parse_elf(data: &[u8]) -> Result<ParsedElf, String> {
    if !is_elf(data) {
        return Err("not an ELF file".to_string());
    }
    let file = object::File::parse(data).map_err(|e| format!("malformed ELF: {e}"))?;
    let mut warnings = Vec::new();

    let loads = file
        .segments()
        .filter_map(|seg| {
            let (offset, filesz) = seg.file_range();
            let flags = match seg.flags() {
                object::SegmentFlags::Elf { p_flags } => p_flags,
                _ => 0,
            };
            (seg.size() > 0).then_some(LoadSeg {
                vaddr: seg.address(),
                memsz: seg.size(),
                offset,
                filesz,
                flags,
            })
        })
        .collect();

    let mut funcs = Vec::new();
    let mut objects = Vec::new();
    let mut has_symtab = false;
    for (from_symtab, symbols) in [(true, file.symbols()), (false, file.dynamic_symbols())] {
        for sym in symbols {
            has_symtab |= from_symtab;
            if sym.is_undefined() || !matches!(sym.section(), object::SymbolSection::Section(_)) {
                continue;
            }
            let dest = match sym.kind() {
                SymbolKind::Text => &mut funcs,
                SymbolKind::Data => &mut objects,
                _ => continue,
            };
            let name = match sym.name_bytes() {
                Ok(n) if !n.is_empty() => String::from_utf8_lossy(n),
                _ => continue,
            };
            let rank = if sym.is_global() {
                0
            } else if sym.is_weak() {
                1
            } else {
                2
            };
            dest.push(Sym {
                addr: sym.address(),
                size: sym.size(),
                name: name.into(),
                rank,
                from_symtab,
            });
        }
    }

    let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
    let debuglink = file
        .gnu_debuglink()
        .ok()
        .flatten()
        .map(|(name, crc)| (name.to_vec(), crc));

    let has_debug_info = file
        .section_by_name(".debug_info")
        .or_else(|| file.section_by_name(".zdebug_info"))
        .is_some_and(|s| s.kind() != SectionKind::UninitializedData && s.size() > 0);
    let dwarf = has_debug_info.then(|| load_dwarf(&file, &mut warnings));
    let unwind = UnwindSections::read(&file);

    Ok(ParsedElf {
        loads,
        funcs,
        objects,
        has_symtab,
        build_id,
        debuglink,
        dwarf,
        warnings,
        unwind,
    })
}

/// Copies the DWARF sections out (decompressing where needed) into a `gimli::Dwarf`.
fn load_dwarf(
    file: &object::File<'_>,
    warnings: &mut Vec<String>,
) -> Result<gimli::Dwarf<Reader>, String> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut load = |id: gimli::SectionId| -> Result<Reader, String> {
        let data: Cow<'_, [u8]> = match file.section_by_name(id.name()) {
            None => Cow::Borrowed(&[]),
            Some(s) if s.kind() == SectionKind::UninitializedData => Cow::Borrowed(&[]),
            Some(s) => section_data(&s).unwrap_or_else(|why| {
                warnings.push(format!("section {}: {why}", id.name()));
                Cow::Borrowed(&[])
            }),
        };
        Ok(Reader::new(Arc::from(&*data), endian))
    };
    gimli::Dwarf::load(&mut load)
}

/// A section's contents, decompressed, refusing decompression bombs.
fn section_data<'data>(s: &object::Section<'data, '_>) -> Result<Cow<'data, [u8]>, String> {
    let range = s.compressed_file_range().map_err(|e| e.to_string())?;
    if range.format != object::CompressionFormat::None {
        // zlib cannot exceed ~1032:1; zstd can in theory, but real debug sections do not.
        let limit = range
            .compressed_size
            .saturating_mul(2048)
            .saturating_add(1 << 20);
        if range.uncompressed_size > limit {
            return Err(format!(
                "claims {} bytes uncompressed from {} compressed; ignored",
                range.uncompressed_size, range.compressed_size
            ));
        }
    }
    s.uncompressed_data().map_err(|e| e.to_string())
}

/// A loaded module: everything needed to resolve addresses in it.
pub(crate) struct ElfModule {
    pub loads: Vec<LoadSeg>,
    pub funcs: SymTable,
    pub objects: SymTable,
    pub dwarf: Option<addr2line::Context<Reader>>,
    pub unwind: Arc<UnwindSections>,
}

impl ElfModule {
    pub fn new(
        loads: Vec<LoadSeg>,
        funcs: Vec<Sym>,
        objects: Vec<Sym>,
        dwarf: Option<addr2line::Context<Reader>>,
        unwind: UnwindSections,
    ) -> ElfModule {
        ElfModule {
            loads,
            funcs: SymTable::build(funcs),
            objects: SymTable::build(objects),
            dwarf,
            unwind: Arc::new(unwind),
        }
    }

    /// The link-time virtual address that file offset `off` of a mapping with `perms` was
    /// loaded from, using the PT_LOAD headers (never assuming offset == vaddr). Where segments
    /// share a page, the one whose file range really contains `off` and whose flags match the
    /// mapping's permissions wins.
    pub fn vaddr_of(&self, off: u64, perms: Perms) -> Option<u64> {
        let mut best: Option<(u32, &LoadSeg)> = None;
        for seg in &self.loads {
            let lower = seg.offset & !(MAX_PAGE - 1);
            let upper = seg.offset.saturating_add(seg.memsz.max(seg.filesz));
            if off < lower || off >= upper {
                continue;
            }
            let mut score = 0;
            if off >= seg.offset && off < seg.offset.saturating_add(seg.filesz) {
                score += 4;
            }
            if (seg.flags & PF_X != 0) == perms.execute {
                score += 2;
            }
            if (seg.flags & PF_W != 0) == perms.write {
                score += 1;
            }
            // Equal scores: the segment starting nearest below `off` (lld packs a RELRO segment
            // whose zero tail runs into the next RW segment's first page: a .bss address there
            // is the later segment's).
            let nearer = |b: &LoadSeg| seg.offset <= off && seg.offset > b.offset;
            if best.is_none_or(|(s, b)| score > s || (score == s && nearer(b))) {
                best = Some((score, seg));
            }
        }
        let (_, seg) = best?;
        Some(seg.vaddr.wrapping_add(off.wrapping_sub(seg.offset)))
    }

    /// Whether `vaddr` lies in the memory image of some PT_LOAD segment.
    pub fn in_image(&self, vaddr: u64) -> bool {
        self.loads
            .iter()
            .any(|s| s.vaddr <= vaddr && vaddr < s.vaddr.saturating_add(s.memsz))
    }
}

/// Candidate separate debug files, best first: by build-id under each debug directory, then
/// by `.gnu_debuglink` next to the binary, in its `.debug/`, and under each debug directory.
pub(crate) fn debug_candidates(
    debug_dirs: &[PathBuf],
    binary: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<&[u8]>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let hex = to_hex(id);
        for dir in debug_dirs {
            out.push(
                dir.join(".build-id")
                    .join(&hex[..2])
                    .join(format!("{}.debug", &hex[2..])),
            );
        }
    }
    if let Some(link) = debuglink {
        use std::os::unix::ffi::OsStrExt;
        let name = Path::new(std::ffi::OsStr::from_bytes(link));
        // A debug link is a bare file name; refuse anything that would leave the directory.
        if name.components().count() == 1 && name.file_name().is_some() {
            if let Some(dir) = binary.parent() {
                out.push(dir.join(name));
                out.push(dir.join(".debug").join(name));
                let rel = dir.strip_prefix("/").unwrap_or(dir);
                for d in debug_dirs {
                    out.push(d.join(rel).join(name));
                }
            }
        }
    }
    out
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(data);
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, vaddr: u64, filesz: u64, memsz: u64, flags: u32) -> LoadSeg {
        LoadSeg {
            vaddr,
            memsz,
            offset,
            filesz,
            flags,
        }
    }

    /// rustc 1.95 + lld's layout of examples/waits/std_condvar.rs: a RELRO segment whose zero
    /// tail reaches the page of the RW segment after it. A .bss static just past the RW
    /// segment's file bytes (`READY` at 0x61e6c, file offset 0x5ee6c of the `rw-p 0005e000`
    /// mapping) is the RW segment's.
    #[test]
    fn a_bss_address_in_a_page_two_segments_share_is_the_later_ones() {
        let m = ElfModule::new(
            vec![
                seg(0, 0, 0x16e10, 0x16e10, 4),
                seg(0x16e10, 0x17e10, 0x447c0, 0x447c0, 4 | PF_X),
                seg(0x5b5d0, 0x5d5d0, 0x2ea0, 0x3a30, 4 | PF_W),
                seg(0x5e470, 0x61470, 0x9f8, 0xae2, 4 | PF_W),
            ],
            Vec::new(),
            Vec::new(),
            None,
            UnwindSections::default(),
        );
        let rw = Perms {
            read: true,
            write: true,
            ..Perms::default()
        };
        assert_eq!(m.vaddr_of(0x5ee6c, rw), Some(0x61e6c));
        assert_eq!(m.vaddr_of(0x5e480, rw), Some(0x61480), ".data");
        assert_eq!(
            m.vaddr_of(0x5c000, rw),
            Some(0x5e000),
            "the RELRO segment's own bytes"
        );
    }
}
