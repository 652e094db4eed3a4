//! What a program file says about how it runs, from its ELF headers (the `object` crate reads
//! them, checking every offset): the libraries it needs, whether it is dynamically linked, and
//! whether it carries ThreadSanitizer instrumentation or runtime. Used to pick a program's MPI
//! (`mpi`) and to check a `contend cc` build (`contend c2c record`).

use object::elf;
use object::read::elf::{Dyn, ElfFile64, ProgramHeader};
use object::{Object, ObjectSymbol};

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
}
