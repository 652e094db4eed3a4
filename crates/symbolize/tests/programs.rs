//! End-to-end: compile small C/C++ programs, run them so that they print addresses and copy
//! their /proc/self/maps, then resolve those addresses offline.

mod fixture;

use fixture::{fixture, line_of, Run};
use std::path::Path;
use symbolize::{
    Backing, Frame, Maps, ModuleIdentity, NoteKind, Precision, Symbolizer, SymbolizerOptions,
};

fn symbolizer(run: &Run) -> Symbolizer {
    Symbolizer::new(run.maps())
}

fn file_name(frame: &Frame) -> &str {
    let f = frame
        .file
        .as_deref()
        .unwrap_or_else(|| panic!("no file in {frame:?}"));
    Path::new(f).file_name().unwrap().to_str().unwrap()
}

/// The call sites and functions of prog.c, for any build with DWARF.
fn check_prog_with_dwarf(run: &Run) {
    let mut s = symbolizer(run);

    let f = s.resolve_code(run.addr("worker"));
    assert_eq!(f.function.as_deref(), Some("worker"), "{f:?}");
    assert_eq!(f.module.as_deref(), Some(run.exe.as_path()));
    assert_eq!(f.precision, Precision::Line);

    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.function.as_deref(), Some("worker"), "{f:?}");
    assert_eq!(file_name(&f), "prog.c");
    assert_eq!(f.line, Some(line_of("prog.c", "call_in_worker")), "{f}");
    assert!(f.inlined.is_empty(), "{f:?}");
    assert!(f.symbol_offset.unwrap() > 0, "{f:?}");
    assert!(f.to_string().starts_with("worker ("), "{f}");

    // A call inside an inlined function: the innermost frame is the inlined function at the
    // call's line; the function it was inlined into follows with the line of that call.
    let f = s.resolve_call_site(run.addr("call_in_helper"));
    assert_eq!(f.function.as_deref(), Some("inner_helper"), "{f:?}");
    assert_eq!(f.line, Some(line_of("prog.c", "call_in_helper")), "{f}");
    assert_eq!(f.inlined.len(), 1, "{f:?}");
    assert_eq!(f.inlined[0].function.as_deref(), Some("outer"));
    assert_eq!(f.inlined[0].line, Some(line_of("prog.c", "call_of_helper")));
    assert_eq!(f.outer_function(), Some("outer"));
    assert!(f.to_string().contains(" inlined into outer ("), "{f}");

    let f = s.resolve_call_site(run.addr("call_in_static"));
    assert_eq!(f.function.as_deref(), Some("static_fn"), "{f:?}");
    assert_eq!(f.line, Some(line_of("prog.c", "call_in_static")), "{f}");

    // resolve_code on a return address names the instruction after the call, whose line is
    // (at best) the same and never earlier; resolve_call_site is the one to use.
    let after = s.resolve_code(run.addr("call_in_worker"));
    assert_eq!(after.function.as_deref(), Some("worker"));

    check_prog_data(run, &mut s, true);
    assert!(
        !s.notes().iter().any(|n| n.module == run.exe),
        "{:?}",
        s.notes()
    );
}

fn check_prog_data(run: &Run, s: &mut Symbolizer, has_symtab: bool) {
    let d = s
        .resolve_data(run.addr("global_lock"))
        .expect("global_lock");
    assert_eq!((d.name.as_str(), d.offset), ("global_lock", 0));
    assert_eq!(d.size, 40);
    assert_eq!(d.module, run.exe);

    let d = s.resolve_data(run.addr("queue_lock")).expect("queue.lock");
    assert_eq!((d.name.as_str(), d.offset), ("queue", 0x40));
    assert_eq!(d.to_string(), "queue+0x40");

    if has_symtab {
        // A static (local symbol, only in .symtab), which lies in the part of .bss past the
        // end of the file: an anonymous mapping after the module's writable one.
        let d = s.resolve_data(run.addr("hot_lock")).expect("hot_lock");
        assert_eq!((d.name.as_str(), d.offset, d.size), ("hot_lock", 0, 40));
        let d = s.resolve_data(run.addr("big_bss_end")).expect("big_bss");
        assert_eq!(d.name, "big_bss");
        assert_eq!(d.offset, (1 << 20) - 8);
    }

    assert_eq!(s.resolve_data(run.addr("heap")), None);
    assert_eq!(s.resolve_data(run.addr("stack")), None);
    assert_eq!(s.resolve_data(8), None);
}

#[test]
fn pie_o2() {
    let run = &fixture().o2;
    // Debian's gcc builds PIE: the executable is mapped high, not at its link address.
    let maps = run.maps();
    let first = maps
        .entries()
        .iter()
        .find(|e| e.path() == Some(run.exe.as_path()))
        .unwrap();
    assert!(first.start > 0x1000_0000, "{first:?}");
    check_prog_with_dwarf(run);
}

#[test]
fn o0() {
    check_prog_with_dwarf(&fixture().o0);
}

#[test]
fn non_pie() {
    let run = &fixture().nopie;
    let maps = run.maps();
    let first = maps
        .entries()
        .iter()
        .find(|e| e.path() == Some(run.exe.as_path()))
        .unwrap();
    assert_eq!(first.start, 0x400000, "{first:?}");
    check_prog_with_dwarf(run);
}

#[test]
fn stripped_falls_back_to_dynsym_then_module_offset() {
    let run = &fixture().stripped;
    let mut s = symbolizer(run);

    // -rdynamic kept `worker` in .dynsym: symbol + offset, no line.
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Symbol, "{f:?}");
    assert_eq!(f.function.as_deref(), Some("worker"));
    assert_eq!(f.line, None);
    let off = f.symbol_offset.unwrap();
    assert!(off > 0 && off < 0x100, "{f:?}");
    assert_eq!(f.to_string(), format!("worker+{off:#x} [prog_stripped]"));

    // A static function is in no table: module + file offset.
    let ret = run.addr("call_in_static");
    let f = s.resolve_call_site(ret);
    assert_eq!(f.precision, Precision::Module, "{f:?}");
    assert_eq!(f.function, None);
    let entry = run.maps().module_of(ret).unwrap().file_offset;
    assert_eq!(f.module_offset, Some(entry));
    assert_eq!(f.to_string(), format!("prog_stripped+{entry:#x}"));

    // Exported data is still named from .dynsym; statics are not.
    let d = s
        .resolve_data(run.addr("global_lock"))
        .expect("global_lock");
    assert_eq!(d.name, "global_lock");
    assert_eq!(s.resolve_data(run.addr("hot_lock")), None);

    let notes: Vec<_> = s.notes().iter().filter(|n| n.module == run.exe).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].kind, NoteKind::NoDebugInfo);
    assert!(
        notes[0].message.contains("dynamic symbol table"),
        "{}",
        notes[0]
    );
}

#[test]
fn separate_debug_file_by_build_id() {
    let fx = fixture();
    let run = &fx.split;
    // Without the debug directory: symbols from .symtab only.
    let mut s = symbolizer(run);
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Symbol, "{f:?}");
    assert_eq!(f.function.as_deref(), Some("worker"));

    let opts = SymbolizerOptions {
        debug_dirs: vec![fx.debug_dir.clone()],
        ..SymbolizerOptions::default()
    };
    let mut s = Symbolizer::with_options(run.maps(), opts);
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Line, "{f:?}");
    assert_eq!(f.line, Some(line_of("prog.c", "call_in_worker")));
    let f = s.resolve_call_site(run.addr("call_in_helper"));
    assert_eq!(f.function.as_deref(), Some("inner_helper"));
    assert_eq!(f.outer_function(), Some("outer"));
    let note = s.notes().iter().find(|n| n.module == run.exe).unwrap();
    assert_eq!(note.kind, NoteKind::DebugFile);
    assert!(note.message.contains(".build-id"), "{note}");
}

#[test]
fn separate_debug_file_by_debuglink() {
    let run = &fixture().linked;
    let mut s = symbolizer(run);
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Line, "{f:?}");
    assert_eq!(f.function.as_deref(), Some("worker"));
    assert_eq!(f.line, Some(line_of("prog.c", "call_in_worker")));
    // .symtab was stripped too: statics come from the debug file's symbol table.
    let d = s.resolve_data(run.addr("hot_lock")).expect("hot_lock");
    assert_eq!(d.name, "hot_lock");
    assert!(s
        .notes()
        .iter()
        .any(|n| n.kind == NoteKind::DebugFile && n.message.contains("prog_linked.debug")));
}

#[test]
fn dlopen_library_from_later_snapshot() {
    let fx = fixture();
    let run = &fx.o2;
    assert_eq!(run.maps_text.len(), 2);
    let call = run.addr("plugin_call_site");

    // The first snapshot predates dlopen: the address is unknown there.
    let mut early = Symbolizer::new(Maps::parse(&run.maps_text[0]).unwrap());
    let f = early.resolve_call_site(call);
    assert_eq!(f.precision, Precision::Address);
    assert_eq!(f.to_string(), format!("{call:#x}"));

    let mut s = symbolizer(run);
    let f = s.resolve_call_site(call);
    assert_eq!(f.module.as_deref(), Some(fx.plugin.as_path()));
    assert_eq!(f.function.as_deref(), Some("plugin_call"), "{f:?}");
    assert_eq!(file_name(&f), "plugin.c");
    assert_eq!(f.line, Some(line_of("plugin.c", "plugin_call_site")));

    let d = s
        .resolve_data(run.addr("plugin_lock"))
        .expect("plugin_lock");
    assert_eq!(d.name, "plugin_lock");
    assert_eq!(d.module, fx.plugin);
    // The executable still resolves with the merged maps.
    check_prog_with_dwarf(run);
}

#[test]
fn cpp_template_in_namespace() {
    let run = &fixture().cpp;
    let mut s = symbolizer(run);
    let f = s.resolve_call_site(run.addr("cpp_call"));
    assert_eq!(
        f.function.as_deref(),
        Some("contend_test::Box<int>::get(int)"),
        "{f:?}"
    );
    assert_eq!(file_name(&f), "prog.cpp");
    assert_eq!(f.line, Some(line_of("prog.cpp", "cpp_call")));
    let d = s.resolve_data(run.addr("registry_mutex")).expect("mutex");
    assert_eq!(d.name, "contend_test::registry_mutex");
    assert_eq!(d.offset, 0);
}

#[test]
fn shared_libraries_without_debug_info_give_symbols() {
    // libc has no DWARF here (no libc6-dbg): names from its symbol tables, one note.
    let run = &fixture().o2;
    let maps = run.maps();
    let libc = maps
        .entries()
        .iter()
        .find(|e| {
            e.perms.execute
                && e.path()
                    .and_then(|p| p.file_name())
                    .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
        })
        .expect("libc mapped");
    let mut s = symbolizer(run);
    let mut named = 0;
    for i in 0..200u64 {
        let addr = libc.start + (libc.end - libc.start) * i / 200;
        let f = s.resolve_code(addr);
        assert_eq!(f.module.as_deref(), libc.path());
        if f.function.is_some() {
            named += 1;
        }
    }
    assert!(named > 150, "{named} of 200 libc addresses named");
    let libc_notes = s
        .notes()
        .iter()
        .filter(|n| Some(n.module.as_path()) == libc.path())
        .count();
    assert!(libc_notes <= 2, "{:?}", s.notes());
}

#[test]
fn unknown_and_special_mappings() {
    let run = &fixture().o2;
    let maps = run.maps();
    let mut s = symbolizer(run);
    let f = s.resolve_code(0x10);
    assert_eq!(f.precision, Precision::Address);
    assert_eq!(f.to_string(), "0x10");
    if let Some(vdso) = maps
        .entries()
        .iter()
        .find(|e| e.backing == Backing::Special("[vdso]".into()))
    {
        let f = s.resolve_code(vdso.start + 0x10);
        assert_eq!(f.to_string(), "[vdso]+0x10");
    }
    // Anonymous memory (heap is [heap], this is e.g. the .bss continuation) is not code.
    let f = s.resolve_code(run.addr("heap"));
    assert_eq!(f.precision, Precision::Module);
    assert_eq!(f.function, None);
}

/// Copies a program into a directory of its own, runs it, and returns the run.
fn private_copy(name: &str, from: &Path) -> Run {
    let dir = fixture().dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(from, dir.join("prog")).unwrap();
    fixture::run(&dir, "prog", None)
}

/// Replaces a file by another one (a new inode, as linkers and package managers do).
fn replace(path: &Path, with: &Path) {
    std::fs::remove_file(path).unwrap();
    std::fs::copy(with, path).unwrap();
}

#[test]
fn replaced_file_is_detected_by_inode() {
    let fx = fixture();
    let run = private_copy("replaced_inode", &fx.o2.exe);
    // Something still holds the old file (as a running process would), so the replacement
    // gets a new inode.
    std::fs::hard_link(&run.exe, run.exe.with_extension("old")).unwrap();
    replace(&run.exe, &fx.o0.exe);
    let mut s = symbolizer(&run);
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Module, "{f:?}");
    assert_eq!(f.function, None);
    assert_eq!(s.resolve_data(run.addr("hot_lock")), None);
    let notes: Vec<_> = s.notes().iter().filter(|n| n.module == run.exe).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].kind, NoteKind::Changed);
    assert!(notes[0].message.contains("inode"), "{}", notes[0]);
}

#[test]
fn replaced_file_is_detected_by_ctime() {
    let fx = fixture();
    let run = private_copy("replaced_ctime", &fx.o2.exe);
    let recorded_at = std::time::SystemTime::now();
    let opts = SymbolizerOptions {
        recorded_at: Some(recorded_at),
        ..SymbolizerOptions::default()
    };
    // Untouched since the run: used.
    let mut s = Symbolizer::with_options(run.maps(), opts.clone());
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.function.as_deref(), Some("worker"), "{:?}", s.notes());

    // Rewritten in place after the run: the same inode (as when a freed inode number is
    // reused, which a test cannot force: it was seen not to be, on a busy filesystem), so only
    // ctime tells. (File timestamps come from a coarse clock: step past its tick first.)
    std::thread::sleep(std::time::Duration::from_millis(30));
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&run.exe);
    std::fs::write(&run.exe, std::fs::read(&fx.o0.exe).unwrap()).unwrap();
    assert_eq!(inode(&run.exe), before, "rewritten in place");
    let mut s = Symbolizer::with_options(run.maps(), opts);
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Module, "{f:?}");
    let n = s.notes().iter().find(|n| n.module == run.exe).unwrap();
    assert_eq!(n.kind, NoteKind::Changed);
    assert!(n.message.contains("ctime"), "{n}");
}

#[test]
fn replaced_file_is_detected_by_build_id() {
    let fx = fixture();
    let run = private_copy("replaced_build_id", &fx.o2.exe);
    let identity = ModuleIdentity::of_file(&run.exe).unwrap();
    assert!(identity.build_id.is_some());

    // Same file, identity recorded: names, even with the inode check off.
    let opts = SymbolizerOptions {
        check_inode: false,
        ..SymbolizerOptions::default()
    };
    let mut s = Symbolizer::with_options(run.maps(), opts.clone());
    s.set_identity(&run.exe, identity.clone());
    assert_eq!(
        s.resolve_call_site(run.addr("call_in_worker"))
            .function
            .as_deref(),
        Some("worker")
    );

    replace(&run.exe, &fx.o0.exe);
    let mut s = Symbolizer::with_options(run.maps(), opts);
    s.set_identity(&run.exe, identity);
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Module, "{f:?}");
    let n = s.notes().iter().find(|n| n.module == run.exe).unwrap();
    assert_eq!(n.kind, NoteKind::Changed);
    assert!(n.message.contains("build-id"), "{n}");
}

#[test]
fn deleted_mapping_is_not_trusted_without_build_id() {
    let fx = fixture();
    let run = &fx.o2;
    let exe = run.exe.to_str().unwrap();
    let text = run.maps_text[0]
        .lines()
        .map(|l| {
            if l.ends_with(exe) {
                format!("{l} (deleted)\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect::<String>();
    let maps = Maps::parse(&text).unwrap();
    assert!(maps.module_of(run.addr("worker")).unwrap().entry.deleted());

    let mut s = Symbolizer::new(maps.clone());
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.precision, Precision::Module);
    assert_eq!(s.notes()[0].kind, NoteKind::Changed);

    // With the build-id recorded at run time, the file now at the path is checked and used.
    let mut s = Symbolizer::new(maps);
    s.set_identity(&run.exe, ModuleIdentity::of_file(&run.exe).unwrap());
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.function.as_deref(), Some("worker"));
}

#[test]
fn missing_file_gives_one_note_and_offsets() {
    let fx = fixture();
    let run = private_copy("missing", &fx.o2.exe);
    std::fs::remove_file(&run.exe).unwrap();
    let mut s = symbolizer(&run);
    for name in ["worker", "call_in_worker", "call_in_static"] {
        let f = s.resolve_code(run.addr(name));
        assert_eq!(f.precision, Precision::Module);
        assert!(f.to_string().starts_with("prog+0x"), "{f}");
    }
    assert_eq!(s.resolve_data(run.addr("global_lock")), None);
    let notes: Vec<_> = s.notes().iter().filter(|n| n.module == run.exe).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].kind, NoteKind::Unreadable);
}

#[test]
fn sysroot_prefixes_module_paths() {
    let fx = fixture();
    let run = &fx.o2;
    let root = fx.dir.join("sysroot");
    let inside = root.join(run.exe.strip_prefix("/").unwrap());
    std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
    std::fs::copy(&run.exe, &inside).unwrap();
    let opts = SymbolizerOptions {
        sysroot: Some(root),
        check_inode: false,
        ..SymbolizerOptions::default()
    };
    let mut s = Symbolizer::with_options(run.maps(), opts);
    let f = s.resolve_call_site(run.addr("call_in_worker"));
    assert_eq!(f.function.as_deref(), Some("worker"));
    assert_eq!(f.module.as_deref(), Some(run.exe.as_path()));
}

/// Truncated and bit-flipped copies of a binary with DWARF never make the symbolizer panic;
/// whatever is still readable is used and the rest is noted.
#[test]
fn damaged_elf_files_never_panic() {
    let fx = fixture();
    let run = private_copy("damaged", &fx.o2.exe);
    let good = std::fs::read(&run.exe).unwrap();
    let addrs: Vec<u64> = [
        "worker",
        "call_in_worker",
        "call_in_helper",
        "call_in_static",
    ]
    .iter()
    .map(|n| run.addr(n))
    .collect();
    let data: Vec<u64> = ["hot_lock", "global_lock", "queue_lock", "big_bss_end"]
        .iter()
        .map(|n| run.addr(n))
        .collect();
    let opts = SymbolizerOptions {
        check_inode: false,
        ..SymbolizerOptions::default()
    };

    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let len = good.len();
    let mut variants: Vec<Vec<u8>> = Vec::new();
    for cut in [
        0,
        1,
        4,
        16,
        52,
        63,
        64,
        200,
        1000,
        len / 4,
        len / 2,
        len - 100,
        len - 1,
    ] {
        variants.push(good[..cut.min(len)].to_vec());
    }
    for _ in 0..150 {
        let mut v = good.clone();
        let flips = 1 + next() % 16;
        for _ in 0..flips {
            // Half the flips land in the headers and tables at the start, half anywhere.
            let pos = if next() % 2 == 0 {
                (next() % 4096) as usize
            } else {
                (next() % len as u64) as usize
            };
            v[pos.min(len - 1)] ^= 1 << (next() % 8);
        }
        variants.push(v);
    }
    // Damage inside the sections the symbolizer reads: DWARF, symbol and string tables, notes.
    let sections: Vec<(usize, usize)> = {
        use object::{Object, ObjectSection};
        let file = object::File::parse(&*good).unwrap();
        file.sections()
            .filter(|s| {
                let n = s.name().unwrap_or("");
                n.starts_with(".debug")
                    || n.contains("sym")
                    || n.contains("str")
                    || n.starts_with(".note")
            })
            .filter_map(|s| s.file_range())
            .map(|(o, l)| (o as usize, l.max(1) as usize))
            .collect()
    };
    assert!(sections.len() >= 8, "{sections:?}");
    for _ in 0..300 {
        let mut v = good.clone();
        let (start, size) = sections[(next() % sections.len() as u64) as usize];
        for _ in 0..1 + next() % 8 {
            let pos = (start + (next() % size as u64) as usize).min(len - 1);
            v[pos] = match next() % 3 {
                0 => v[pos] ^ (1 << (next() % 8)),
                1 => 0xff,
                _ => 0,
            };
        }
        variants.push(v);
    }
    for _ in 0..30 {
        // Overwrite a run of bytes with 0xff (huge lengths and offsets).
        let mut v = good.clone();
        let pos = (next() % len as u64) as usize;
        let n = (1 + next() % 64) as usize;
        for b in v.iter_mut().skip(pos).take(n) {
            *b = 0xff;
        }
        variants.push(v);
    }

    for (i, bytes) in variants.iter().enumerate() {
        std::fs::write(&run.exe, bytes).unwrap();
        let mut s = Symbolizer::with_options(run.maps(), opts.clone());
        for &a in &addrs {
            let f = s.resolve_call_site(a);
            assert_eq!(f.module.as_deref(), Some(run.exe.as_path()), "variant {i}");
            let _ = f.to_string();
        }
        for &a in &data {
            let _ = s.resolve_data(a);
        }
        let mine = s.notes().iter().filter(|n| n.module == run.exe).count();
        assert!(mine <= 8, "variant {i}: {:?}", s.notes());
    }
    std::fs::write(&run.exe, &good).unwrap();
}

#[test]
fn symbolizer_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Symbolizer>();
}

#[test]
fn data_files_are_not_modules() {
    // A program may map a data file holding process-shared mutexes (a database lock file):
    // no symbol, and no note about it not being ELF. Executable non-ELF mappings are noted.
    let file = fixture::c_dir().join("prog.c");
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
    let text = format!(
        "10000-11000 rw-s 00000000 fe:00 {inode} {0}\n20000-21000 r-xp 00000000 fe:00 {inode} {0}\n",
        file.display()
    );
    let mut s = Symbolizer::new(Maps::parse(text).unwrap());
    assert_eq!(s.resolve_data(0x10040), None);
    assert!(s.notes().is_empty(), "{:?}", s.notes());
    let f = s.resolve_code(0x20010);
    assert_eq!(f.precision, Precision::Module);
    let mut s = Symbolizer::new(s.maps().clone());
    let _ = s.resolve_code(0x20010);
    assert_eq!(s.notes().len(), 1, "{:?}", s.notes());
    assert_eq!(s.notes()[0].kind, NoteKind::Malformed);
}
