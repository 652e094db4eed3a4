//! Unwinding a live stack of this test process, copied with `process_vm_readv` as the kernel
//! copies a blocked thread's (`PERF_SAMPLE_STACK_USER`): the frames come back in call order and
//! are named with the symbolizer, and a copy cut short stops the walk as truncated.

#![cfg(target_arch = "x86_64")]

use symbolize::unwind::{StackUnwinder, UnwindEnd};
use symbolize::{Maps, Symbolizer};
use trace::ustack::Regs;

/// Registers and up to `len` bytes of the calling function's stack, from its stack pointer up,
/// copied out of this process with process_vm_readv (a read past the stack's top stops it).
#[inline(never)]
fn capture(len: usize) -> (Regs, Vec<u8>) {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads three registers, touches no memory.
    unsafe {
        std::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
        );
    }
    let mut copy = vec![0u8; len];
    let mut got = 0;
    // Page by page: the last page of the stack may end the readable range.
    while got < len {
        let n = (len - got).min(4096 - ((sp as usize + got) % 4096));
        let local = libc::iovec {
            iov_base: copy[got..].as_mut_ptr().cast(),
            iov_len: n,
        };
        let remote = libc::iovec {
            iov_base: (sp as usize + got) as *mut libc::c_void,
            iov_len: n,
        };
        // SAFETY: the local buffer has n bytes; the remote read is checked by the kernel.
        let r = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if r <= 0 {
            break;
        }
        got += r as usize;
    }
    copy.truncate(got);
    (
        Regs {
            ip,
            sp,
            fp: bp,
            lr: 0,
        },
        copy,
    )
}

#[inline(never)]
fn innermost_frame(len: usize) -> (Regs, Vec<u8>) {
    let r = capture(len);
    std::hint::black_box(r)
}

#[inline(never)]
fn middle_frame(len: usize) -> (Regs, Vec<u8>) {
    let r = innermost_frame(len);
    std::hint::black_box(r)
}

fn symbolizer() -> Symbolizer {
    let maps = Maps::parse(std::fs::read("/proc/self/maps").unwrap()).unwrap();
    Symbolizer::new(maps)
}

fn names(sym: &mut Symbolizer, frames: &[u64]) -> Vec<String> {
    frames
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let f = if i == 0 {
                sym.resolve_code(a)
            } else {
                sym.resolve_call_site(a)
            };
            f.function.unwrap_or_else(|| format!("{a:#x}"))
        })
        .collect()
}

#[test]
fn a_live_stack_unwinds_in_call_order() {
    let (regs, stack) = middle_frame(64 << 10);
    let mut sym = symbolizer();
    let mut u = StackUnwinder::new();
    let w = u.unwind(&mut sym, &regs, &stack, 256);
    let names = names(&mut sym, &w.frames);
    let at = |f: &str| {
        names
            .iter()
            .position(|n| n.ends_with(f))
            .unwrap_or_else(|| panic!("{f} not among {names:#?} ({:?})", w.end))
    };
    let (c, i, m, t) = (
        at("unwind::capture"),
        at("unwind::innermost_frame"),
        at("unwind::middle_frame"),
        at("unwind::a_live_stack_unwinds_in_call_order"),
    );
    assert!(c < i && i < m && m < t, "out of order: {names:#?}");
    assert!(
        matches!(w.end, UnwindEnd::Complete | UnwindEnd::Truncated),
        "{:?} after {names:#?}",
        w.end
    );
    // Past the test function: the test harness's thread, so more than four frames.
    assert!(w.frames.len() > t + 1, "{names:#?}");
}

/// A copy of 256 bytes holds the innermost frames only: the walk stops where it needs bytes
/// past the copy, keeping what it found.
#[test]
fn a_short_copy_is_truncated_not_invented() {
    let (regs, stack) = middle_frame(64 << 10);
    let mut sym = symbolizer();
    let mut u = StackUnwinder::new();
    let whole = u.unwind(&mut sym, &regs, &stack, 256);
    let short = u.unwind(&mut sym, &regs, &stack[..256], 256);
    assert_eq!(short.end, UnwindEnd::Truncated, "{short:?}");
    assert!(short.frames.len() < whole.frames.len());
    assert_eq!(short.frames[..], whole.frames[..short.frames.len()]);
    // No stack at all: only the instruction pointer.
    let none = u.unwind(&mut sym, &regs, &[], 256);
    assert!(none.is_unknown(), "{none:?}");
    // An instruction pointer in no module.
    let lost = u.unwind(&mut sym, &Regs { ip: 8, ..regs }, &stack, 256);
    assert_eq!((lost.frames.len(), lost.end), (1, UnwindEnd::NoModule));
    // The frame limit.
    let deep = u.unwind(&mut sym, &regs, &stack, 2);
    assert_eq!((deep.frames.len(), deep.end), (2, UnwindEnd::TooDeep));
}
