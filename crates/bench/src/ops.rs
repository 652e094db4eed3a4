//! The operations `bench atomic` burns, each a tight loop of one instruction on the shared
//! line, written in inline assembly so the compiler can neither elide nor rewrite it (ccont's C
//! loops were: `inc` on a stack copy, `test_bit` compiled to `ret`, `set_bit` without `lock`,
//! memset64 collapsed to one store). Each loop is its own `#[inline(never)]` function named
//! `burn_<op>`, so a disassembler finds it (crates/contend/tests/cli/bench_disasm.rs checks them).

use serde::Serialize;

/// Bytes of the shared region every burner may touch: the largest memset.
pub const SHARED_BYTES: usize = 256;
/// The bit `test_bit` and `set_bit` use.
pub const BIT: u32 = 5;
/// The byte the memsets write.
pub const MEMSET_BYTE: u8 = 0xa5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Idle,
    Memset64,
    Memset128,
    Memset256,
    TestBit,
    SetBit,
    Inc,
    Xadd,
    Cmpxchg,
    Xchg,
    Mfence,
    Sfence,
    Lfence,
    Load,
    Store,
}

impl Op {
    pub const ALL: [Op; 15] = [
        Op::Idle,
        Op::Memset64,
        Op::Memset128,
        Op::Memset256,
        Op::TestBit,
        Op::SetBit,
        Op::Inc,
        Op::Xadd,
        Op::Cmpxchg,
        Op::Xchg,
        Op::Mfence,
        Op::Sfence,
        Op::Lfence,
        Op::Load,
        Op::Store,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Idle => "idle",
            Op::Memset64 => "memset64",
            Op::Memset128 => "memset128",
            Op::Memset256 => "memset256",
            Op::TestBit => "test_bit",
            Op::SetBit => "set_bit",
            Op::Inc => "inc",
            Op::Xadd => "xadd",
            Op::Cmpxchg => "cmpxchg",
            Op::Xchg => "xchg",
            Op::Mfence => "mfence",
            Op::Sfence => "sfence",
            Op::Lfence => "lfence",
            Op::Load => "load",
            Op::Store => "store",
        }
    }

    /// What one iteration executes, as documentation and help text say it.
    pub fn instruction(self) -> &'static str {
        match self {
            Op::Idle => "dec/jnz only (calibration: the loop's own cost)",
            Op::Memset64 => "4 x 16-byte movdqa stores (64 bytes)",
            Op::Memset128 => "8 x 16-byte movdqa stores (128 bytes)",
            Op::Memset256 => "16 x 16-byte movdqa stores (256 bytes)",
            Op::TestBit => "bt (test_bit)",
            Op::SetBit => "lock bts (test_and_set_bit)",
            Op::Inc => "lock inc (atomic_inc)",
            Op::Xadd => "lock xadd (fetch_add)",
            Op::Cmpxchg => "load + lock cmpxchg until it succeeds (an atomic update loop)",
            Op::Xchg => "xchg with memory (locked implicitly)",
            Op::Mfence => "mfence (smp_mb)",
            Op::Sfence => "sfence (smp_wmb)",
            Op::Lfence => "lfence (smp_rmb)",
            Op::Load => "mov from the line",
            Op::Store => "mov to the line",
        }
    }

    /// The name of the loop's function, as a demangler prints it.
    pub fn symbol(self) -> String {
        format!("bench::ops::x86::burn_{}", self.name())
    }

    /// Whether the loop reads or writes the shared line (idle and the fences do not).
    pub fn touches_line(self) -> bool {
        !matches!(self, Op::Idle | Op::Mfence | Op::Sfence | Op::Lfence)
    }

    /// Whether each iteration adds one to the shared word (so the final value proves that every
    /// iteration of every thread reached the same line atomically).
    pub fn counts(self) -> bool {
        matches!(self, Op::Inc | Op::Xadd | Op::Cmpxchg)
    }

    /// Bytes a memset writes per iteration.
    pub fn memset_bytes(self) -> Option<usize> {
        match self {
            Op::Memset64 => Some(64),
            Op::Memset128 => Some(128),
            Op::Memset256 => Some(256),
            _ => None,
        }
    }

    pub fn parse(s: &str) -> Result<Op, String> {
        Op::ALL
            .iter()
            .copied()
            .find(|op| op.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
                format!("unknown operation `{s}`: use one of {}", names.join(", "))
            })
    }

    /// Ok on a CPU that has this operation, else the one line that says why not.
    pub fn available(self) -> Result<(), String> {
        if cfg!(target_arch = "x86_64") {
            Ok(())
        } else {
            Err(format!(
                "operation `{}` is not available on this CPU: contend's burners are x86-64 \
                 assembly and this is {}",
                self.name(),
                std::env::consts::ARCH
            ))
        }
    }

    /// Runs `iterations` iterations on the region at `line`.
    ///
    /// # Safety
    /// `line` must point to [`SHARED_BYTES`] writable bytes aligned to 64, that stay mapped for
    /// the call; other threads may only touch them through these burners or atomics.
    pub unsafe fn burn(self, line: *mut u64, iterations: u64) {
        if iterations == 0 {
            return; // the loops test the count after the first iteration
        }
        #[cfg(target_arch = "x86_64")]
        {
            let f: unsafe fn(*mut u64, u64) = match self {
                Op::Idle => x86::burn_idle,
                Op::Memset64 => x86::burn_memset64,
                Op::Memset128 => x86::burn_memset128,
                Op::Memset256 => x86::burn_memset256,
                Op::TestBit => x86::burn_test_bit,
                Op::SetBit => x86::burn_set_bit,
                Op::Inc => x86::burn_inc,
                Op::Xadd => x86::burn_xadd,
                Op::Cmpxchg => x86::burn_cmpxchg,
                Op::Xchg => x86::burn_xchg,
                Op::Mfence => x86::burn_mfence,
                Op::Sfence => x86::burn_sfence,
                Op::Lfence => x86::burn_lfence,
                Op::Load => x86::burn_load,
                Op::Store => x86::burn_store,
            };
            f(line, iterations)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (line, iterations);
            unreachable!("Op::available() is checked before anything runs");
        }
    }

    /// Checks the shared region after a run in which `total` iterations were executed over all
    /// threads: the evidence that the loops really worked on the shared line.
    pub fn check_effect(self, region: &[u8; SHARED_BYTES], total: u64) -> Result<(), String> {
        let word = u64::from_ne_bytes(region[..8].try_into().expect("8 bytes"));
        if self.counts() && word != total {
            return Err(format!(
                "`{}`: the shared word is {word} after {total} operations: some did not reach \
                 the shared line atomically",
                self.name()
            ));
        }
        if self == Op::SetBit && word & (1 << BIT) == 0 {
            return Err("`set_bit`: the bit is not set in the shared word".into());
        }
        if self == Op::Store && word != 1 {
            // The store loop writes its down-counter; every thread's last store is 1.
            return Err(format!(
                "`store`: the shared word is {word}, not the last value stored (1)"
            ));
        }
        if let Some(n) = self.memset_bytes() {
            if let Some(i) = region[..n].iter().position(|&b| b != MEMSET_BYTE) {
                return Err(format!(
                    "`{}`: byte {i} of the shared lines was not written",
                    self.name()
                ));
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The loops. Each keeps its count in a register and addresses memory only through `line`.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use core::arch::asm;

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_idle(_line: *mut u64, iterations: u64) {
        asm!("2:", "dec {n}", "jnz 2b", n = inout(reg) iterations => _, options(nostack, nomem));
    }

    /// Four 16-byte aligned stores per iteration.
    ///
    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_memset64(line: *mut u64, iterations: u64) {
        asm!(
            "movq xmm0, {pattern}",
            "punpcklqdq xmm0, xmm0",
            "2:",
            "movdqa xmmword ptr [{p}], xmm0",
            "movdqa xmmword ptr [{p} + 16], xmm0",
            "movdqa xmmword ptr [{p} + 32], xmm0",
            "movdqa xmmword ptr [{p} + 48], xmm0",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            pattern = in(reg) u64::from_ne_bytes([super::MEMSET_BYTE; 8]),
            n = inout(reg) iterations => _,
            out("xmm0") _,
            options(nostack),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_memset128(line: *mut u64, iterations: u64) {
        asm!(
            "movq xmm0, {pattern}",
            "punpcklqdq xmm0, xmm0",
            "2:",
            "movdqa xmmword ptr [{p}], xmm0",
            "movdqa xmmword ptr [{p} + 16], xmm0",
            "movdqa xmmword ptr [{p} + 32], xmm0",
            "movdqa xmmword ptr [{p} + 48], xmm0",
            "movdqa xmmword ptr [{p} + 64], xmm0",
            "movdqa xmmword ptr [{p} + 80], xmm0",
            "movdqa xmmword ptr [{p} + 96], xmm0",
            "movdqa xmmword ptr [{p} + 112], xmm0",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            pattern = in(reg) u64::from_ne_bytes([super::MEMSET_BYTE; 8]),
            n = inout(reg) iterations => _,
            out("xmm0") _,
            options(nostack),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_memset256(line: *mut u64, iterations: u64) {
        asm!(
            "movq xmm0, {pattern}",
            "punpcklqdq xmm0, xmm0",
            "2:",
            "movdqa xmmword ptr [{p}], xmm0",
            "movdqa xmmword ptr [{p} + 16], xmm0",
            "movdqa xmmword ptr [{p} + 32], xmm0",
            "movdqa xmmword ptr [{p} + 48], xmm0",
            "movdqa xmmword ptr [{p} + 64], xmm0",
            "movdqa xmmword ptr [{p} + 80], xmm0",
            "movdqa xmmword ptr [{p} + 96], xmm0",
            "movdqa xmmword ptr [{p} + 112], xmm0",
            "movdqa xmmword ptr [{p} + 128], xmm0",
            "movdqa xmmword ptr [{p} + 144], xmm0",
            "movdqa xmmword ptr [{p} + 160], xmm0",
            "movdqa xmmword ptr [{p} + 176], xmm0",
            "movdqa xmmword ptr [{p} + 192], xmm0",
            "movdqa xmmword ptr [{p} + 208], xmm0",
            "movdqa xmmword ptr [{p} + 224], xmm0",
            "movdqa xmmword ptr [{p} + 240], xmm0",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            pattern = in(reg) u64::from_ne_bytes([super::MEMSET_BYTE; 8]),
            n = inout(reg) iterations => _,
            out("xmm0") _,
            options(nostack),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_test_bit(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "bt qword ptr [{p}], {bit}",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            bit = const super::BIT,
            n = inout(reg) iterations => _,
            options(nostack, readonly),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_set_bit(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "lock bts qword ptr [{p}], {bit}",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            bit = const super::BIT,
            n = inout(reg) iterations => _,
            options(nostack),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_inc(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "lock inc qword ptr [{p}]",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            n = inout(reg) iterations => _,
            options(nostack),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_xadd(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "mov {v}, 1",
            "lock xadd qword ptr [{p}], {v}",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            v = out(reg) _,
            n = inout(reg) iterations => _,
            options(nostack),
        );
    }

    /// The update loop of `atomic_add` written with cmpxchg: read, compute, try; on failure
    /// cmpxchg leaves the current value in rax and the loop tries again with it.
    ///
    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_cmpxchg(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "mov rax, qword ptr [{p}]",
            "3:",
            "lea {new}, [rax + 1]",
            "lock cmpxchg qword ptr [{p}], {new}",
            "jnz 3b",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            new = out(reg) _,
            n = inout(reg) iterations => _,
            out("rax") _,
            options(nostack),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_xchg(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "mov {v}, {n}",
            "xchg qword ptr [{p}], {v}",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            v = out(reg) _,
            n = inout(reg) iterations => _,
            options(nostack),
        );
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_mfence(_line: *mut u64, iterations: u64) {
        asm!("2:", "mfence", "dec {n}", "jnz 2b", n = inout(reg) iterations => _, options(nostack));
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_sfence(_line: *mut u64, iterations: u64) {
        asm!("2:", "sfence", "dec {n}", "jnz 2b", n = inout(reg) iterations => _, options(nostack));
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_lfence(_line: *mut u64, iterations: u64) {
        asm!("2:", "lfence", "dec {n}", "jnz 2b", n = inout(reg) iterations => _, options(nostack));
    }

    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_load(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "mov {v}, qword ptr [{p}]",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            v = out(reg) _,
            n = inout(reg) iterations => _,
            options(nostack, readonly),
        );
    }

    /// Stores the down-counter, so the last value every thread stores is 1.
    ///
    /// # Safety
    /// See [`super::Op::burn`]; `iterations` ≥ 1.
    #[inline(never)]
    pub unsafe fn burn_store(line: *mut u64, iterations: u64) {
        asm!(
            "2:",
            "mov qword ptr [{p}], {n}",
            "dec {n}",
            "jnz 2b",
            p = in(reg) line,
            n = inout(reg) iterations => _,
            options(nostack),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Region([u8; SHARED_BYTES]);

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for op in Op::ALL {
            assert_eq!(Op::parse(op.name()), Ok(op));
        }
        let e = Op::parse("incr").unwrap_err();
        assert!(e.contains("`incr`") && e.contains("cmpxchg"), "{e}");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_loop_leaves_its_effect_on_the_line() {
        for op in Op::ALL {
            let mut r = Region([0; SHARED_BYTES]);
            unsafe { op.burn(r.0.as_mut_ptr().cast(), 1000) };
            op.check_effect(&r.0, 1000)
                .unwrap_or_else(|e| panic!("{op}: {e}"));
            if !op.touches_line() || op == Op::TestBit || op == Op::Load {
                assert!(r.0.iter().all(|&b| b == 0), "{op} wrote to the line");
            }
        }
    }

    #[test]
    fn a_wrong_count_is_reported() {
        let mut r = [0u8; SHARED_BYTES];
        r[..8].copy_from_slice(&999u64.to_ne_bytes());
        assert!(Op::Xadd.check_effect(&r, 1000).unwrap_err().contains("999"));
        assert!(Op::Memset64.check_effect(&r, 1).is_err());
    }
}
