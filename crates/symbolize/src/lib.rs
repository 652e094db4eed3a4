//! Offline symbolization: turning addresses recorded in a process into names after it exited.
//!
//! # Model
//!
//! A recorded run keeps, for each process, one or more snapshots of `/proc/PID/maps` (one at
//! start, one after each `dlopen`). [`Maps`] parses and merges them (a later snapshot wins
//! where it overlaps an earlier one) into a map from address to mapping; for a file-backed
//! mapping, the address becomes a *file offset* in a *module* (`Maps::module_of`).
//!
//! A [`Symbolizer`] reads the modules from disk at analysis time, each once, and caches what
//! it needs: the PT_LOAD program headers (to turn the file offset into the ELF virtual address
//! the symbol tables and DWARF use — this is what handles PIE executables, shared libraries
//! and non-PIE executables alike, without assuming offset == address), the function and
//! data-object symbols of `.symtab` and `.dynsym`, and DWARF line and inlining information,
//! from the file itself or from a separate debug file found by build-id
//! (`/usr/lib/debug/.build-id/xx/yyyy.debug`) or `.gnu_debuglink`.
//!
//! * [`Symbolizer::resolve_code`] names an instruction address; [`Symbolizer::resolve_call_site`]
//!   names the call instruction before a *return address* (it looks up `addr - 1`), which is
//!   what a recorded caller of `pthread_mutex_lock` is.
//! * [`Symbolizer::resolve_data`] names the global or static object containing a data address
//!   (`hot_lock`, `queue+0x40`), or `None` for heap, stack and other anonymous memory.
//!
//! A [`Frame`] is as precise as the files allow ([`Precision`]): `function (file:line)` with
//! DWARF, `symbol+0x1a` from the symbol tables of a stripped binary, `module+0x1234` when the
//! module has no usable symbol, and the raw address when no mapping contains it.
//!
//! Files on disk may have changed since the run. A module whose build-id (or size and mtime),
//! recorded at run time with [`ModuleIdentity::of_file`] and given to
//! [`Symbolizer::set_identity`], differs from the file now on disk — or, without a recorded
//! identity, whose inode differs from the one in the maps snapshot, whose ctime is later than
//! the snapshot ([`SymbolizerOptions::recorded_at`]), or which the kernel had marked
//! `(deleted)` — is not used: its frames are `module+offset` and a [`Note`] says why,
//! rather than printing names from another build. Every problem with a module (missing,
//! changed, malformed, no debug information) is reported once as a note ([`Symbolizer::notes`]),
//! never as a per-address error, and malformed files never cause a panic.

mod elf;
pub mod maps;
pub mod unwind;

pub use maps::{Backing, MapEntry, Maps, MapsError, ModuleAddr, Perms};

use elf::{ElfModule, ParsedElf, SymUse};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How precisely a [`Frame`] could be resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
pub enum Precision {
    /// Function and source location from DWARF.
    Line,
    /// Function from the ELF symbol tables (`func+0x1a`), no source location.
    Symbol,
    /// Only the module and the offset in it (`libfoo.so+0x1234`).
    Module,
    /// No mapping contains the address (or only anonymous memory, such as JIT code).
    Address,
}

/// A function that inlined the code of the previous one, with the location of that call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct InlinedCaller {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// A resolved code address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Frame {
    /// The address as given (for a call site, the return address).
    pub address: u64,
    /// Path of the mapped file as recorded, or a special mapping's name (`[vdso]`).
    pub module: Option<PathBuf>,
    /// File offset of `address` in `module` (for special mappings, offset from its start).
    pub module_offset: Option<u64>,
    /// The innermost function at the address (an inlined function if the code was inlined),
    /// demangled (C++ and Rust). From DWARF where available, else from the symbol tables.
    pub function: Option<String>,
    /// Offset of `address` from the start of the function's symbol, when a symbol was found.
    pub symbol_offset: Option<u64>,
    /// Source file of the innermost location (as DWARF names it, usually absolute).
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// When `function` was inlined: the functions it was inlined into, innermost first, each
    /// with the location of the inlined call; the last one is the out-of-line function.
    pub inlined: Vec<InlinedCaller>,
    pub precision: Precision,
}

impl Frame {
    fn raw(address: u64) -> Frame {
        Frame {
            address,
            module: None,
            module_offset: None,
            function: None,
            symbol_offset: None,
            file: None,
            line: None,
            column: None,
            inlined: Vec::new(),
            precision: Precision::Address,
        }
    }

    /// The module's base name, if any.
    pub fn module_name(&self) -> Option<String> {
        self.module.as_ref().map(|m| {
            m.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| m.to_string_lossy().into_owned())
        })
    }

    /// The out-of-line function containing the address (the outermost inlining caller, or
    /// `function` when nothing was inlined).
    pub fn outer_function(&self) -> Option<&str> {
        match self.inlined.last() {
            Some(c) => c.function.as_deref(),
            None => self.function.as_deref(),
        }
    }
}

impl fmt::Display for Frame {
    /// `func (file:line:col) inlined into outer (file:line)`, `func+0x1a (module)`,
    /// `module+0x1234` or `0x7f…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn loc(file: &Option<String>, line: Option<u32>, col: Option<u32>) -> String {
            let mut s = file.clone().unwrap_or_else(|| "??".into());
            if let Some(l) = line {
                s.push_str(&format!(":{l}"));
                if let Some(c) = col.filter(|&c| c > 0) {
                    s.push_str(&format!(":{c}"));
                }
            }
            s
        }
        let module = self.module_name();
        match (&self.function, self.precision) {
            (Some(func), Precision::Line) => {
                write!(f, "{func} ({})", loc(&self.file, self.line, self.column))?;
                for c in &self.inlined {
                    write!(
                        f,
                        " inlined into {} ({})",
                        c.function.as_deref().unwrap_or("??"),
                        loc(&c.file, c.line, c.column)
                    )?;
                }
                Ok(())
            }
            (func, Precision::Line | Precision::Symbol) => {
                match (func, self.symbol_offset) {
                    (Some(func), Some(0) | None) => write!(f, "{func}")?,
                    (Some(func), Some(off)) => write!(f, "{func}+{off:#x}")?,
                    (None, _) => write!(f, "??")?,
                }
                if self.line.is_some() {
                    write!(f, " ({})", loc(&self.file, self.line, self.column))?;
                }
                if let Some(m) = module {
                    write!(f, " [{m}]")?;
                }
                Ok(())
            }
            _ => match (module, self.module_offset) {
                (Some(m), Some(off)) => write!(f, "{m}+{off:#x}"),
                _ => write!(f, "{:#x}", self.address),
            },
        }
    }
}

/// The global or static object containing a data address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DataSymbol {
    /// Demangled symbol name (`hot_lock`, `ns::queue`; gcc names function-local statics
    /// `name.N`).
    pub name: String,
    /// Offset of the address inside the object.
    pub offset: u64,
    /// Size of the object in bytes (0 if the symbol table does not say).
    pub size: u64,
    /// Path of the module that defines it, as recorded.
    pub module: PathBuf,
}

impl fmt::Display for DataSymbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.offset == 0 {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{}+{:#x}", self.name, self.offset)
        }
    }
}

/// What a [`Note`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
pub enum NoteKind {
    /// The file could not be read (missing, not a regular file, no permission).
    Unreadable,
    /// The file on disk is not the one that was mapped (build-id, size/mtime or inode
    /// differ, or it was deleted); its addresses are shown as module+offset.
    Changed,
    /// The file is not a well-formed ELF file.
    Malformed,
    /// No symbol tables and no DWARF: addresses are shown as module+offset.
    NoSymbols,
    /// Symbols but no DWARF: no source lines.
    NoDebugInfo,
    /// DWARF is present but (partly) unusable, or a section could not be decompressed.
    DebugInfoError,
    /// A separate debug file was used (informational).
    DebugFile,
    /// A recorded mapping does not fit the file's program headers.
    Layout,
}

/// Something about one module that limits what could be resolved, reported once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Note {
    pub module: PathBuf,
    pub kind: NoteKind,
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.module.display(), self.message)
    }
}

/// What identifies the exact file that was mapped, recorded at run time so that analysis can
/// tell whether the file now on disk is the same one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct ModuleIdentity {
    /// GNU build-id, lower-case hex.
    pub build_id: Option<String>,
    /// File size in bytes.
    pub size: Option<u64>,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: Option<i64>,
}

impl ModuleIdentity {
    /// Reads a file's identity (for the recorder, while the process runs).
    pub fn of_file(path: impl AsRef<Path>) -> std::io::Result<ModuleIdentity> {
        let (data, meta) = elf::open_regular(path.as_ref()).map_err(std::io::Error::other)?;
        let build_id = elf::is_elf(&data)
            .then(|| object::File::parse(&*data).ok())
            .flatten()
            .and_then(|f| {
                use object::Object;
                f.build_id().ok().flatten().map(elf::to_hex)
            });
        Ok(ModuleIdentity {
            build_id,
            size: Some(meta.len()),
            mtime_ns: Some(mtime_ns(&meta)),
        })
    }

    /// Why the file on disk (with these metadata and build-id) is not this one, if it is not.
    fn mismatch(&self, meta: &std::fs::Metadata, build_id: Option<&[u8]>) -> Option<String> {
        if let (Some(want), Some(have)) = (&self.build_id, build_id) {
            let have = elf::to_hex(have);
            return (!want.eq_ignore_ascii_case(&have))
                .then(|| format!("build-id {want} at the run, {have} on disk"));
        }
        if let Some(want) = self.size.filter(|&s| s != meta.len()) {
            return Some(format!("{want} bytes at the run, {} on disk", meta.len()));
        }
        if let Some(want) = self.mtime_ns.filter(|&t| t != mtime_ns(meta)) {
            return Some(format!(
                "modified since the run (mtime {} ns at the run, {} ns on disk)",
                want,
                mtime_ns(meta)
            ));
        }
        None
    }
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// How a [`Symbolizer`] finds files.
#[derive(Debug, Clone)]
pub struct SymbolizerOptions {
    /// Prefix for module paths, to analyse a run whose files live under another root
    /// (a container image, a copy of the target's file system). `None`: paths as recorded.
    pub sysroot: Option<PathBuf>,
    /// Where to look for separate debug files (by build-id and by debug link).
    /// Default: `/usr/lib/debug`. Not prefixed with `sysroot`.
    pub debug_dirs: Vec<PathBuf>,
    /// Without a recorded [`ModuleIdentity`], refuse a file whose inode differs from the one in
    /// the maps snapshot (it was replaced since the run). Turn off when analysing on another
    /// machine or from a copy, where inodes differ anyway. Default: on.
    pub check_inode: bool,
    /// When the last maps snapshot was taken (the end of the run). Without a recorded
    /// [`ModuleIdentity`], a file whose status changed (ctime) after this instant is treated as
    /// replaced: this catches a file rebuilt or upgraded after the process exited that reused
    /// the freed inode number (replacements while the process lived change the inode, which
    /// `check_inode` catches). `None`: no check.
    pub recorded_at: Option<std::time::SystemTime>,
}

impl Default for SymbolizerOptions {
    fn default() -> Self {
        SymbolizerOptions {
            sysroot: None,
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            check_inode: true,
            recorded_at: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ModuleKey {
    path: PathBuf,
    inode: u64,
    deleted: bool,
}

/// Resolves addresses of one process, offline. See the crate documentation for the model.
pub struct Symbolizer {
    maps: Maps,
    options: SymbolizerOptions,
    identities: HashMap<PathBuf, ModuleIdentity>,
    index: HashMap<ModuleKey, usize>,
    modules: Vec<Option<ElfModule>>,
    notes: Vec<Note>,
    noted: HashSet<(PathBuf, NoteKind)>,
}

impl Symbolizer {
    /// A symbolizer for the process whose (merged) maps are `maps`, with default options.
    pub fn new(maps: Maps) -> Symbolizer {
        Symbolizer::with_options(maps, SymbolizerOptions::default())
    }

    pub fn with_options(maps: Maps, options: SymbolizerOptions) -> Symbolizer {
        Symbolizer {
            maps,
            options,
            identities: HashMap::new(),
            index: HashMap::new(),
            modules: Vec::new(),
            notes: Vec::new(),
            noted: HashSet::new(),
        }
    }

    /// Declares the identity the file at `path` (as in the maps) had at run time. A module
    /// whose file on disk no longer matches is not used for names. Call before resolving.
    pub fn set_identity(&mut self, path: impl Into<PathBuf>, identity: ModuleIdentity) {
        self.identities.insert(path.into(), identity);
    }

    /// The address space being resolved.
    pub fn maps(&self) -> &Maps {
        &self.maps
    }

    /// Problems found so far, at most one of each kind per module, in the order found.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// Resolves an instruction address.
    pub fn resolve_code(&mut self, addr: u64) -> Frame {
        self.resolve(addr, addr)
    }

    /// Resolves the call instruction that a return address follows: the lookup uses
    /// `return_addr - 1`, so the line is that of the call, not of the next statement.
    /// The frame's `address`, `module_offset` and `symbol_offset` refer to `return_addr`.
    pub fn resolve_call_site(&mut self, return_addr: u64) -> Frame {
        self.resolve(return_addr, return_addr.saturating_sub(1))
    }

    /// The global or static object (ELF `STT_OBJECT` symbol, including local statics from
    /// `.symtab`) containing a data address, or `None` for heap, stack, anonymous memory,
    /// unknown addresses and modules that cannot be used.
    pub fn resolve_data(&mut self, addr: u64) -> Option<DataSymbol> {
        let i = self.maps.index_of(addr)?;
        let entries = self.maps.entries();
        let e = &entries[i];
        // The part of a module's .bss past the end of its file is an anonymous mapping right
        // after the module's writable mapping.
        let entry = match &e.backing {
            Backing::File { .. } if e.is_module() => e.clone(),
            Backing::Anonymous => {
                let prev = &entries[i.checked_sub(1)?];
                if prev.end != e.start || !prev.is_module() || !prev.perms.write {
                    return None;
                }
                prev.clone()
            }
            _ => return None,
        };
        let idx = self.module_for(&entry)?;
        let m = self.modules[idx].as_ref()?;
        // Translate from the address's own file offset where it has one; for the anonymous
        // continuation, from the last byte of the writable mapping before it.
        let anchor = if entry.contains(addr) {
            addr
        } else {
            entry.end - 1
        };
        let base = m.vaddr_of(entry.file_offset(anchor), entry.perms)?;
        let vaddr = base.wrapping_add(addr.wrapping_sub(anchor));
        if !m.in_image(vaddr) {
            return None;
        }
        let sym = m.objects.lookup(vaddr, SymUse::Data)?;
        Some(DataSymbol {
            name: demangle(&sym.name),
            offset: vaddr.wrapping_sub(sym.addr),
            size: sym.size,
            module: entry.path()?.to_path_buf(),
        })
    }

    /// The module of the executable mapping holding `addr`, for the unwinder: the mapping's
    /// range, the address link-time address 0 is at, and the call frame information. Loaded
    /// (and checked against the run) as [`Symbolizer::resolve_code`] loads it.
    pub(crate) fn unwind_module(&mut self, addr: u64) -> Option<unwind::ModuleCfi> {
        let i = self.maps.index_of(addr)?;
        let entry = self.maps.entries()[i].clone();
        if !entry.is_module() || !entry.perms.execute {
            return None;
        }
        let idx = self.module_for(&entry)?;
        let m = self.modules[idx].as_ref()?;
        // From `addr`, not the mapping's start: the start's page may also hold the end of the
        // segment before (lld aligns segments' offsets to their addresses, not to pages).
        let svma = m.vaddr_of(entry.file_offset(addr), entry.perms)?;
        Some(unwind::ModuleCfi {
            name: entry.short_name(),
            avma: entry.start..entry.end,
            base_avma: addr.wrapping_sub(svma),
            sections: m.unwind.clone(),
        })
    }

    fn resolve(&mut self, address: u64, probe: u64) -> Frame {
        let mut frame = Frame::raw(address);
        let Some(i) = self.maps.index_of(probe) else {
            return frame;
        };
        let entry = self.maps.entries()[i].clone();
        match &entry.backing {
            Backing::Anonymous => return frame,
            Backing::Special(name) => {
                frame.module = Some(PathBuf::from(name));
                frame.module_offset = Some(address.wrapping_sub(entry.start));
                frame.precision = Precision::Module;
                return frame;
            }
            Backing::File { path, .. } => {
                frame.module = Some(path.clone());
                frame.module_offset = Some(entry.file_offset(address));
                frame.precision = Precision::Module;
            }
        }
        if !entry.is_module() {
            return frame;
        }
        let Some(idx) = self.module_for(&entry) else {
            return frame;
        };
        let Some(m) = self.modules[idx].as_ref() else {
            return frame;
        };
        let Some(vprobe) = m.vaddr_of(entry.file_offset(probe), entry.perms) else {
            let msg = format!(
                "mapping {:x}-{:x} at file offset {:#x} lies in no PT_LOAD segment of the file \
                 on disk (changed since the run?); its addresses are shown as module+offset",
                entry.start, entry.end, entry.offset
            );
            self.note(entry.path().unwrap_or(Path::new("")), NoteKind::Layout, msg);
            return frame;
        };
        let vaddr = vprobe.wrapping_add(address.wrapping_sub(probe));

        if let Some(sym) = m.funcs.lookup(vprobe, SymUse::Code) {
            frame.function = Some(demangle(&sym.name));
            frame.symbol_offset = Some(vaddr.wrapping_sub(sym.addr));
            frame.precision = Precision::Symbol;
        }
        let mut dwarf_error = None;
        if let Some(ctx) = &m.dwarf {
            match dwarf_frames(ctx, vprobe) {
                Ok(frames) => apply_dwarf(&mut frame, frames),
                Err(e) => dwarf_error = Some(e),
            }
        }
        if let Some(e) = dwarf_error {
            let msg = format!("DWARF error at {vprobe:#x}: {e}; some frames lack source lines");
            self.note(
                entry.path().unwrap_or(Path::new("")),
                NoteKind::DebugInfoError,
                msg,
            );
        }
        frame
    }

    fn note(&mut self, module: &Path, kind: NoteKind, message: String) {
        if self.noted.insert((module.to_path_buf(), kind)) {
            self.notes.push(Note {
                module: module.to_path_buf(),
                kind,
                message,
            });
        }
    }

    fn disk_path(&self, path: &Path) -> PathBuf {
        match &self.options.sysroot {
            Some(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
            None => path.to_path_buf(),
        }
    }

    /// The index of the loaded module for a file-backed entry, loading it on first use.
    fn module_for(&mut self, entry: &MapEntry) -> Option<usize> {
        let path = entry.path()?.to_path_buf();
        let key = ModuleKey {
            path,
            inode: entry.inode,
            deleted: entry.deleted(),
        };
        if let Some(&i) = self.index.get(&key) {
            return Some(i);
        }
        let module = self.load(entry);
        let i = self.modules.len();
        self.modules.push(module);
        self.index.insert(key, i);
        Some(i)
    }

    fn load(&mut self, entry: &MapEntry) -> Option<ElfModule> {
        let path = entry.path()?.to_path_buf();
        let disk = self.disk_path(&path);
        let expected = self.identities.get(&path).cloned();
        let has_expected_id = expected.as_ref().is_some_and(|e| e.build_id.is_some());

        if entry.deleted() && !has_expected_id {
            self.note(
                &path,
                NoteKind::Changed,
                "the mapped file had been deleted or replaced when the maps were recorded \
                 (`(deleted)`), and no build-id was recorded to check the file now there; \
                 addresses are shown as module+offset"
                    .into(),
            );
            return None;
        }
        let (data, meta) = match elf::open_regular(&disk) {
            Ok(x) => x,
            Err(why) => {
                self.note(
                    &path,
                    NoteKind::Unreadable,
                    format!(
                        "cannot read {}: {why}; addresses are shown as module+offset",
                        disk.display()
                    ),
                );
                return None;
            }
        };
        if !elf::is_elf(&data) && !entry.perms.execute {
            // A data file mapped by the program (a database's lock file holding
            // process-shared mutexes, a locale archive): not a module, nothing to say.
            return None;
        }
        let parsed = match elf::parse_elf(&data) {
            Ok(p) => p,
            Err(why) => {
                self.note(
                    &path,
                    NoteKind::Malformed,
                    format!("{why}; addresses are shown as module+offset"),
                );
                return None;
            }
        };
        drop(data);

        if let Some(why) = expected
            .as_ref()
            .and_then(|e| e.mismatch(&meta, parsed.build_id.as_deref()))
        {
            self.note(
                &path,
                NoteKind::Changed,
                format!(
                    "the file on disk is not the one that was mapped ({why}); addresses are \
                     shown as module+offset"
                ),
            );
            return None;
        }
        if expected.is_none()
            && self.options.check_inode
            && entry.inode != 0
            && meta.ino() != entry.inode
        {
            self.note(
                &path,
                NoteKind::Changed,
                format!(
                    "the file on disk is not the one that was mapped (inode {} at the run, \
                     {} now: replaced since, or analysed from a copy — record build-ids or \
                     turn off check_inode); addresses are shown as module+offset",
                    entry.inode,
                    meta.ino()
                ),
            );
            return None;
        }
        if expected.is_none() {
            if let Some(at) = self.options.recorded_at {
                let at_ns = match at.duration_since(std::time::UNIX_EPOCH) {
                    Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
                    Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
                };
                let ctime = meta
                    .ctime()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(meta.ctime_nsec());
                if ctime > at_ns {
                    self.note(
                        &path,
                        NoteKind::Changed,
                        format!(
                            "the file on disk changed after the maps were recorded (ctime {:.3} s \
                             later); it may not be the one that was mapped, so addresses are \
                             shown as module+offset (record build-ids to be sure)",
                            ctime.saturating_sub(at_ns) as f64 / 1e9
                        ),
                    );
                    return None;
                }
            }
        }
        Some(self.finish_load(&path, &disk, parsed))
    }

    /// Adds a separate debug file where the binary lacks DWARF or a symbol table, and builds
    /// the DWARF context.
    fn finish_load(&mut self, path: &Path, disk: &Path, mut bin: ParsedElf) -> ElfModule {
        for w in std::mem::take(&mut bin.warnings) {
            self.note(path, NoteKind::DebugInfoError, w);
        }
        let mut funcs = std::mem::take(&mut bin.funcs);
        let mut objects = std::mem::take(&mut bin.objects);
        let mut dwarf = bin.dwarf.take();
        let mut has_symtab = bin.has_symtab;

        if dwarf.is_none() || !has_symtab {
            if let Some((dpath, mut dbg)) = self.find_debug_file(disk, &bin) {
                for w in std::mem::take(&mut dbg.warnings) {
                    self.note(path, NoteKind::DebugInfoError, w);
                }
                self.note(
                    path,
                    NoteKind::DebugFile,
                    format!("using separate debug file {}", dpath.display()),
                );
                if dwarf.is_none() {
                    dwarf = dbg.dwarf.take();
                }
                if !has_symtab {
                    has_symtab = dbg.has_symtab;
                }
                funcs.append(&mut dbg.funcs);
                objects.append(&mut dbg.objects);
            }
        }

        let context = match dwarf {
            Some(Ok(d)) => match addr2line::Context::from_dwarf(d) {
                Ok(c) => Some(c),
                Err(e) => {
                    self.note(
                        path,
                        NoteKind::DebugInfoError,
                        format!("unusable DWARF ({e}); no source lines"),
                    );
                    None
                }
            },
            Some(Err(e)) => {
                self.note(
                    path,
                    NoteKind::DebugInfoError,
                    format!("unusable DWARF ({e}); no source lines"),
                );
                None
            }
            None => {
                if funcs.is_empty() && objects.is_empty() {
                    self.note(
                        path,
                        NoteKind::NoSymbols,
                        "stripped: no symbol table and no debug information (none found in \
                         the debug directories either); addresses are shown as module+offset"
                            .into(),
                    );
                } else {
                    self.note(
                        path,
                        NoteKind::NoDebugInfo,
                        format!(
                            "no DWARF (no separate debug file found either): names from the \
                             {} symbol table, no source lines",
                            if has_symtab { "full" } else { "dynamic" }
                        ),
                    );
                }
                None
            }
        };
        ElfModule::new(
            bin.loads,
            funcs,
            objects,
            context,
            std::mem::take(&mut bin.unwind),
        )
    }

    /// A separate debug file that belongs to `bin`: same build-id, or (without one) the CRC
    /// that `.gnu_debuglink` names.
    fn find_debug_file(&self, disk: &Path, bin: &ParsedElf) -> Option<(PathBuf, ParsedElf)> {
        let link = bin.debuglink.as_ref();
        let candidates = elf::debug_candidates(
            &self.options.debug_dirs,
            disk,
            bin.build_id.as_deref(),
            link.map(|(n, _)| n.as_slice()),
        );
        let own = std::fs::canonicalize(disk).ok();
        for cand in candidates {
            if own.is_some() && std::fs::canonicalize(&cand).ok() == own {
                continue;
            }
            let Ok((data, _)) = elf::open_regular(&cand) else {
                continue;
            };
            let matches = match (&bin.build_id, link) {
                (Some(_), _) => true, // checked after parsing
                (None, Some((_, crc))) => elf::crc32(&data) == *crc,
                (None, None) => false,
            };
            if !matches {
                continue;
            }
            let Ok(parsed) = elf::parse_elf(&data) else {
                continue;
            };
            if bin.build_id.is_some() && parsed.build_id != bin.build_id {
                continue;
            }
            return Some((cand, parsed));
        }
        None
    }
}

/// One DWARF frame: function, file, line, column.
type DwarfFrame = (Option<String>, Option<String>, Option<u32>, Option<u32>);

/// The DWARF frames at `vaddr`, innermost first (at most 64, against malformed input).
fn dwarf_frames(
    ctx: &addr2line::Context<elf::Reader>,
    vaddr: u64,
) -> Result<Vec<DwarfFrame>, String> {
    let mut iter = ctx
        .find_frames(vaddr)
        .skip_all_loads()
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(f) = iter.next().map_err(|e| e.to_string())? {
        let name = f
            .function
            .as_ref()
            .and_then(|n| n.demangle().ok())
            .map(|n| n.into_owned());
        let (file, line, col) = match &f.location {
            Some(l) => (l.file.map(str::to_owned), l.line, l.column),
            None => (None, None, None),
        };
        out.push((name, file, line, col));
        if out.len() >= 64 {
            break;
        }
    }
    Ok(out)
}

fn apply_dwarf(frame: &mut Frame, frames: Vec<DwarfFrame>) {
    let mut it = frames.into_iter();
    let Some((name, file, line, col)) = it.next() else {
        return;
    };
    if file.is_none() && line.is_none() && name.is_none() {
        return;
    }
    if name.is_some() {
        frame.function = name;
    }
    frame.file = file;
    frame.line = line;
    frame.column = col;
    frame.inlined = it
        .map(|(function, file, line, column)| InlinedCaller {
            function,
            file,
            line,
            column,
        })
        .collect();
    if frame.line.is_some() {
        frame.precision = Precision::Line;
    } else if frame.function.is_some() {
        frame.precision = Precision::Symbol;
    }
}

/// Demangles a symbol-table name (C++ Itanium or Rust), leaving other names as they are.
fn demangle(name: &str) -> String {
    if name.starts_with("_Z") || name.starts_with("_R") || name.starts_with("__Z") {
        addr2line::demangle_auto(std::borrow::Cow::Borrowed(name), None).into_owned()
    } else {
        name.to_owned()
    }
}
