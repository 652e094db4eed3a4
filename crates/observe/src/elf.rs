//! What a program file says about how it runs, from its ELF headers (the `object` crate reads
//! them, checking every offset): the libraries it needs, whether it is dynamically linked, and
//! whether it carries ThreadSanitizer instrumentation or runtime. Used to pick a program's MPI
//! (`mpi`) and to check a `contend cc` build (`contend c2c record`).
//!
//! [`inspect`] reads only a file's first bytes and program headers (a bounded read, however
//! large the file): what the kernel and the dynamic loader would make of it, to tell before a
//! launch whether the lock probe can be preloaded into a program, and whether a file is a
//! shared library of this machine at all.

use object::elf;
use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
use object::{Object, ObjectSymbol};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The facts of a 64-bit ELF file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ElfFacts {
    /// Has a program interpreter (dynamically linked).
    pub dynamic: bool,
    /// Its `DT_NEEDED` entries, in order.
    pub needed: Vec<String>,
    /// Defines `__tsan_init` (ThreadSanitizer's runtime is linked in statically).
    pub defines_tsan_init: bool,
    /// References `__tsan_*` hooks it does not define (instrumented code).
    pub uses_tsan_hooks: bool,
}

/// The facts of `data`, or `None` when it is not a 64-bit ELF file `object` can read (a
/// truncated or hostile file gives `None`, never a panic).
pub fn facts(data: &[u8]) -> Option<ElfFacts> {
    let file = ElfFile64::<object::Endianness>::parse(data).ok()?;
    let endian = file.endian();
    let mut facts = ElfFacts {
        dynamic: file
            .elf_program_headers()
            .iter()
            .any(|p| p.p_type(endian) == elf::PT_INTERP),
        ..Default::default()
    };
    let sections = file.elf_section_table();
    if let Ok(Some((entries, link))) = sections.dynamic(endian, data) {
        if let Ok(strings) = sections.strings(endian, data, link) {
            facts.needed = entries
                .iter()
                .filter(|d| d.d_tag(endian) == u64::from(elf::DT_NEEDED))
                .filter_map(|d| strings.get(d.d_val(endian) as u32).ok())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect();
        }
    }
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        let Ok(name) = sym.name_bytes() else {
            continue;
        };
        if !name.starts_with(b"__tsan_") {
            continue;
        }
        if sym.is_undefined() {
            facts.uses_tsan_hooks = true;
        } else if name == b"__tsan_init" {
            facts.defines_tsan_init = true;
        }
    }
    Some(facts)
}

/// How a file would be run or loaded, from its first bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadKind {
    /// A script: the interpreter its `#!` line names.
    Script {
        interpreter: PathBuf,
    },
    Elf(ElfHeader),
    /// Neither, in words: "empty", "text", "data".
    Other(&'static str),
}

/// What an ELF file's header and program headers say about loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfHeader {
    /// 32 or 64.
    pub bits: u8,
    pub little_endian: bool,
    /// `e_machine` (`EM_X86_64`, `EM_AARCH64`, ...).
    pub machine: u16,
    /// `e_type` (`ET_EXEC`, `ET_DYN`, ...).
    pub file_type: u16,
    /// Has a program interpreter (`PT_INTERP`): the dynamic loader runs it, and honours
    /// LD_PRELOAD. A static program (static-pie too) has none.
    pub interpreter: bool,
    /// Marked a position-independent executable (`DF_1_PIE`): the loader refuses to preload it.
    pub pie: bool,
}

/// The `e_machine` of the architecture contend was built for (`None`: one it does not name).
pub const HOST_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(elf::EM_X86_64)
} else if cfg!(target_arch = "aarch64") {
    Some(elf::EM_AARCH64)
} else if cfg!(target_arch = "riscv64") {
    Some(elf::EM_RISCV)
} else if cfg!(target_arch = "powerpc64") {
    Some(elf::EM_PPC64)
} else if cfg!(target_arch = "s390x") {
    Some(elf::EM_S390)
} else if cfg!(target_arch = "loongarch64") {
    Some(elf::EM_LOONGARCH)
} else {
    None
};

impl ElfHeader {
    /// Built for this machine: contend's word size, byte order and architecture.
    pub fn is_host(&self) -> bool {
        usize::from(self.bits) == usize::BITS as usize
            && self.little_endian == cfg!(target_endian = "little")
            && HOST_MACHINE.is_none_or(|m| m == self.machine)
    }

    /// A shared library the dynamic loader would preload (not a position-independent
    /// executable, which is `ET_DYN` too).
    pub fn is_shared_library(&self) -> bool {
        self.file_type == elf::ET_DYN && !self.pie
    }

    /// The architecture's name, for messages.
    pub fn machine_name(&self) -> String {
        match self.machine {
            elf::EM_X86_64 => "x86-64".into(),
            elf::EM_386 => "i386".into(),
            elf::EM_AARCH64 => "AArch64".into(),
            elf::EM_ARM => "32-bit Arm".into(),
            elf::EM_RISCV => "RISC-V".into(),
            elf::EM_PPC64 => "POWER".into(),
            elf::EM_S390 => "s390x".into(),
            elf::EM_LOONGARCH => "LoongArch".into(),
            m => format!("machine {m}"),
        }
    }

    /// `a 64-bit x86-64 ELF shared library`, `a 32-bit i386 ELF executable`.
    pub fn describe(&self) -> String {
        let what = match self.file_type {
            elf::ET_REL => "object file",
            elf::ET_EXEC => "executable",
            elf::ET_DYN if self.pie => "executable (position-independent)",
            elf::ET_DYN => "shared library",
            elf::ET_CORE => "core dump",
            _ => "file",
        };
        let order = if self.little_endian {
            ""
        } else {
            " big-endian"
        };
        format!(
            "a {}-bit{order} {} ELF {what}",
            self.bits,
            self.machine_name()
        )
    }
}

/// Bytes read from the start of a file: the ELF header and, in every file a linker writes,
/// the program headers that follow it.
const HEAD: usize = 64 * 1024;

/// What `path` is, by its first bytes and program headers. Only a regular file is read (a FIFO
/// or device is an error, never a blocked open), at most [`HEAD`] bytes and the dynamic
/// segment up to as much again.
pub fn inspect(path: &Path) -> io::Result<LoadKind> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let head = read_aligned(&file, 0, HEAD)?;
    let data = head.bytes();
    if data.is_empty() {
        return Ok(LoadKind::Other("empty"));
    }
    if let Some(line) = data.strip_prefix(b"#!") {
        let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
        let interpreter = String::from_utf8_lossy(line)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        return Ok(LoadKind::Script {
            interpreter: PathBuf::from(interpreter),
        });
    }
    if !data.starts_with(&elf::ELFMAG) {
        let text = data
            .iter()
            .take(4096)
            .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace() || b >= 0x80);
        return Ok(LoadKind::Other(if text { "text" } else { "data" }));
    }
    // e_ident[EI_CLASS], the byte after the magic.
    let header = match data.get(4).copied() {
        Some(elf::ELFCLASS64) => header_of::<elf::FileHeader64<object::Endianness>>(&file, data),
        Some(elf::ELFCLASS32) => header_of::<elf::FileHeader32<object::Endianness>>(&file, data),
        _ => None,
    };
    Ok(header.map_or(LoadKind::Other("data"), LoadKind::Elf))
}

/// The facts of an ELF header of class `H`; `None` when its headers cannot be read (truncated,
/// hostile, or program headers beyond the head).
fn header_of<H: FileHeader<Endian = object::Endianness>>(
    file: &std::fs::File,
    data: &[u8],
) -> Option<ElfHeader> {
    let h = H::parse(data).ok()?;
    let endian = h.endian().ok()?;
    let phdrs = h.program_headers(endian, data).ok()?;
    let interpreter = phdrs.iter().any(|p| p.p_type(endian) == elf::PT_INTERP);
    let file_type = h.e_type(endian);
    let mut pie = false;
    if file_type == elf::ET_DYN {
        if let Some(p) = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_DYNAMIC) {
            let (offset, size) = (p.p_offset(endian).into(), p.p_filesz(endian).into());
            let len = usize::try_from(size).unwrap_or(usize::MAX).min(HEAD);
            if let Ok(segment) = read_aligned(file, offset, len) {
                let entries: &[H::Dyn] = object::pod::slice_from_all_bytes(
                    &segment.bytes()[..segment.len - segment.len % std::mem::size_of::<H::Dyn>()],
                )
                .unwrap_or(&[]);
                pie = entries.iter().any(|d| {
                    d.d_tag(endian).into() == u64::from(elf::DT_FLAGS_1)
                        && d.d_val(endian).into() & u64::from(elf::DF_1_PIE) != 0
                });
            }
        }
    }
    Some(ElfHeader {
        bits: if h.is_type_64() { 64 } else { 32 },
        little_endian: endian == object::Endianness::Little,
        machine: h.e_machine(endian),
        file_type,
        interpreter,
        pie,
    })
}

/// Bytes read from a file into 8-byte-aligned memory (`object` reads headers in place and
/// checks their alignment).
struct Aligned {
    words: Vec<u64>,
    len: usize,
}

impl Aligned {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes of `words` were filled; u8 has no alignment or validity needs.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
}

/// Up to `max` bytes of `file` from `offset` (fewer at its end).
fn read_aligned(file: &std::fs::File, offset: u64, max: usize) -> io::Result<Aligned> {
    let mut words = vec![0u64; max.div_ceil(8)];
    // SAFETY: the Vec's buffer is at least `max` bytes, viewed as bytes while nothing else
    // borrows it.
    let buf = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), max) };
    let mut len = 0;
    while len < max {
        match file.read_at(&mut buf[len..], offset.saturating_add(len as u64)) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Aligned { words, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_files_give_no_facts() {
        assert_eq!(facts(b""), None);
        assert_eq!(facts(b"\x7fELF\x02\x01"), None);
        let mut d = vec![0u8; 64];
        d[..6].copy_from_slice(b"\x7fELF\x02\x01");
        // Huge counts and offsets: nothing can be read, and nothing panics.
        d[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        d[0x28..0x30].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        for at in [0x36, 0x38, 0x3a, 0x3c] {
            d[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        }
        assert!(matches!(
            facts(&d),
            None | Some(ElfFacts { dynamic: false, .. })
        ));
    }

    #[test]
    fn this_test_binary_is_dynamic_needs_libc_and_is_not_instrumented() {
        let f = facts(&std::fs::read(std::env::current_exe().unwrap()).unwrap()).unwrap();
        assert!(f.dynamic);
        assert!(f.needed.iter().any(|n| n.starts_with("libc.so")), "{f:?}");
        assert!(!f.uses_tsan_hooks && !f.defines_tsan_init);
    }

    /// An ELF header alone (no program headers): class, type and machine as given.
    fn bare_elf(class: u8, file_type: u16, machine: u16) -> Vec<u8> {
        let mut d = vec![0u8; 64];
        d[..4].copy_from_slice(&elf::ELFMAG);
        d[4] = class;
        d[5] = elf::ELFDATA2LSB;
        d[6] = elf::EV_CURRENT;
        d[16..18].copy_from_slice(&file_type.to_le_bytes());
        d[18..20].copy_from_slice(&machine.to_le_bytes());
        d
    }

    fn inspect_bytes(bytes: &[u8]) -> LoadKind {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, bytes).unwrap();
        inspect(&path).unwrap()
    }

    #[test]
    fn inspect_tells_scripts_text_and_data_apart() {
        assert_eq!(inspect_bytes(b""), LoadKind::Other("empty"));
        assert_eq!(inspect_bytes(b"not a library\n"), LoadKind::Other("text"));
        assert_eq!(inspect_bytes(&[0, 1, 2, 0xff]), LoadKind::Other("data"));
        assert_eq!(
            inspect_bytes(b"#! /usr/bin/python3 -u\nprint(1)\n"),
            LoadKind::Script {
                interpreter: PathBuf::from("/usr/bin/python3")
            }
        );
        // The magic alone, or a class that is neither 32 nor 64 bits: not an ELF file to load.
        assert_eq!(inspect_bytes(b"\x7fELF"), LoadKind::Other("data"));
        assert_eq!(inspect_bytes(&bare_elf(9, 2, 62)), LoadKind::Other("data"));
    }

    #[test]
    fn inspect_reads_class_type_and_machine_from_the_header() {
        let LoadKind::Elf(h) = inspect_bytes(&bare_elf(elf::ELFCLASS32, elf::ET_EXEC, elf::EM_386))
        else {
            panic!("a 32-bit ELF header");
        };
        assert_eq!(
            (h.bits, h.file_type, h.machine),
            (32, elf::ET_EXEC, elf::EM_386)
        );
        // No program headers: no interpreter, so a static program.
        assert!(!h.interpreter && !h.is_host() && !h.is_shared_library());
        assert_eq!(h.describe(), "a 32-bit i386 ELF executable");
        let LoadKind::Elf(h) =
            inspect_bytes(&bare_elf(elf::ELFCLASS64, elf::ET_DYN, elf::EM_AARCH64))
        else {
            panic!("a 64-bit ELF header");
        };
        assert!(h.is_shared_library());
        assert_eq!(h.describe(), "a 64-bit AArch64 ELF shared library");
        assert_eq!(h.is_host(), cfg!(target_arch = "aarch64"));
    }

    #[test]
    fn this_test_binary_is_a_dynamic_pie_and_libc_a_shared_library() {
        let LoadKind::Elf(me) = inspect(&std::env::current_exe().unwrap()).unwrap() else {
            panic!("this test binary is an ELF file");
        };
        assert!(me.is_host() && me.interpreter, "{me:?}");
        // Rust links executables as PIE on Linux: ET_DYN, but not a library to preload.
        if me.file_type == elf::ET_DYN {
            assert!(me.pie && !me.is_shared_library(), "{me:?}");
        }
        // The C library this binary runs with, from its memory map.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc_path = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
            .expect("libc is mapped");
        let LoadKind::Elf(libc_header) = inspect(Path::new(libc_path)).unwrap() else {
            panic!("{libc_path} is an ELF file");
        };
        assert!(
            libc_header.is_host() && libc_header.is_shared_library(),
            "{libc_path}: {libc_header:?}"
        );
    }

    #[test]
    fn inspect_refuses_what_is_not_a_regular_file_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = inspect(&fifo).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(inspect(dir.path()).is_err());
        assert!(inspect(&dir.path().join("missing")).is_err());
    }
}
