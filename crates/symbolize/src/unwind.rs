//! Unwinding a recorded user stack without frame pointers (issue 22, design §2): the
//! registers and the stack bytes the kernel copied at a block (`trace::ustack`), walked with
//! the modules' call frame information (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`) by
//! `framehop`, as samply does for `perf --call-graph dwarf` recordings.
//!
//! The modules come from the [`Symbolizer`]: the run's memory maps, each file read once,
//! bounded, and checked against the run (build-id, inode, time) as for naming; a module that
//! changed since the run, is unreadable, or has no call frame information stops the walk there
//! (the frames found so far are kept). Code that is not in a file (`[vdso]`, JIT code) is not
//! unwound through: the walk stops at it, and the caller counts it.
//!
//! A walk that reads past the bytes copied (a stack deeper than the copy) stops there: the
//! stack is [`UnwindEnd::Truncated`], its outer frames unknown.

use crate::Symbolizer;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use trace::ustack::Regs;

/// One module's call frame information, placed in the process (see
/// `Symbolizer::unwind_module`).
pub(crate) struct ModuleCfi {
    pub name: String,
    /// The executable mapping's addresses.
    pub avma: Range<u64>,
    /// The address link-time address 0 of the file is at.
    pub base_avma: u64,
    pub sections: Arc<crate::elf::UnwindSections>,
}

/// How a walk ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UnwindEnd {
    /// At the outermost frame (the call frame information says there is no caller).
    Complete,
    /// The walk needed stack bytes past the copy.
    Truncated,
    /// `max_frames` reached.
    TooDeep,
    /// An address in no module with call frame information (`[vdso]`, JIT code, a module
    /// unreadable or changed since the run).
    NoModule,
    /// The call frame information did not give a caller (or gave a nonsensical one).
    Failed(String),
    /// This architecture's unwinding is not built in.
    Unsupported,
}

/// A walked stack: the instruction pointer, then return addresses, innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    pub frames: Vec<u64>,
    pub end: UnwindEnd,
}

impl Unwound {
    /// No caller was found: only the instruction pointer is known.
    pub fn is_unknown(&self) -> bool {
        self.frames.len() <= 1
    }
}

#[cfg(target_arch = "x86_64")]
type NativeUnwinder = framehop::x86_64::UnwinderX86_64<Arc<[u8]>>;
#[cfg(target_arch = "x86_64")]
type NativeCache = framehop::x86_64::CacheX86_64;
#[cfg(target_arch = "aarch64")]
type NativeUnwinder = framehop::aarch64::UnwinderAarch64<Arc<[u8]>>;
#[cfg(target_arch = "aarch64")]
type NativeCache = framehop::aarch64::CacheAarch64;

/// Walks stacks of one process; modules are added as the walks reach them.
pub struct StackUnwinder {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    unwinder: NativeUnwinder,
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    cache: NativeCache,
    /// Mappings looked at (by start address): whether a module with call frame information was
    /// added for it.
    seen: HashMap<u64, bool>,
}

impl Default for StackUnwinder {
    fn default() -> Self {
        StackUnwinder::new()
    }
}

impl StackUnwinder {
    pub fn new() -> StackUnwinder {
        StackUnwinder {
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            unwinder: NativeUnwinder::new(),
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            cache: NativeCache::new(),
            seen: HashMap::new(),
        }
    }

    /// Adds the module holding `addr`, once; whether one with call frame information is there.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn ensure_module(&mut self, sym: &mut Symbolizer, addr: u64) -> bool {
        use framehop::Unwinder;
        let Some(i) = sym.maps.index_of(addr) else {
            return false;
        };
        let start = sym.maps.entries()[i].start;
        if let Some(&known) = self.seen.get(&start) {
            return known;
        }
        let module = sym.unwind_module(addr).filter(|m| !m.sections.is_empty());
        let found = module.is_some();
        if let Some(m) = module {
            let s = &*m.sections;
            let info = framehop::ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: s.text.clone(),
                got_svma: s.got.clone(),
                eh_frame_svma: s.eh_frame.as_ref().map(|(r, _)| r.clone()),
                eh_frame: s.eh_frame.as_ref().map(|(_, d)| d.clone()),
                eh_frame_hdr_svma: s.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
                eh_frame_hdr: s.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
                debug_frame: s.debug_frame.clone(),
                ..Default::default()
            };
            self.unwinder
                .add_module(framehop::Module::new(m.name, m.avma, m.base_avma, info));
        }
        self.seen.insert(start, found);
        found
    }

    /// Walks the stack of a block: `regs` at the switch out, `stack` the bytes from `regs.sp`
    /// up. At most `max_frames` frames.
    pub fn unwind(
        &mut self,
        sym: &mut Symbolizer,
        regs: &Regs,
        stack: &[u8],
        max_frames: usize,
    ) -> Unwound {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            self.walk(sym, regs, stack, max_frames)
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            let _ = (sym, stack, max_frames);
            Unwound {
                frames: vec![regs.ip],
                end: UnwindEnd::Unsupported,
            }
        }
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn walk(
        &mut self,
        sym: &mut Symbolizer,
        regs: &Regs,
        stack: &[u8],
        max_frames: usize,
    ) -> Unwound {
        use framehop::{FrameAddress, Unwinder};
        #[cfg(target_arch = "x86_64")]
        let mut uregs = framehop::x86_64::UnwindRegsX86_64::new(regs.ip, regs.sp, regs.fp);
        #[cfg(target_arch = "aarch64")]
        let mut uregs = framehop::aarch64::UnwindRegsAarch64::new(regs.lr, regs.sp, regs.fp);
        let sp = regs.sp;
        let mut past_copy = false;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = addr.checked_sub(sp).ok_or(())? as usize;
            match stack.get(at..at.checked_add(8).ok_or(())?) {
                Some(b) => Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?)),
                None => {
                    past_copy = true;
                    Err(())
                }
            }
        };
        let mut frames = vec![regs.ip];
        let mut address = FrameAddress::from_instruction_pointer(regs.ip);
        let end = loop {
            if frames.len() >= max_frames {
                break UnwindEnd::TooDeep;
            }
            if !self.ensure_module(sym, address.address_for_lookup()) {
                break UnwindEnd::NoModule;
            }
            match self
                .unwinder
                .unwind_frame(address, &mut uregs, &mut self.cache, &mut read_stack)
            {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(a) => {
                        frames.push(ra);
                        address = a;
                    }
                    None => break UnwindEnd::Complete,
                },
                Ok(None) => break UnwindEnd::Complete,
                Err(e) => {
                    break if past_copy {
                        UnwindEnd::Truncated
                    } else {
                        UnwindEnd::Failed(e.to_string())
                    }
                }
            }
        };
        Unwound { frames, end }
    }
}
