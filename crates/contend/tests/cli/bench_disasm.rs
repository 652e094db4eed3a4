//! The burners of `contend bench atomic` do what they say: the built contend binary is
//! disassembled (binutils' nm and objdump) and each op's loop is checked for its instruction
//! (with `lock` where the op needs it), inside a loop, addressing the shared line through the
//! pointer it was given (the first argument, %rdi, or a register copied from it), never the
//! stack. ccont's own loops failed exactly these checks; `the_checker_catches_cconts_bugs` feeds
//! it listings with those bugs to show it would.

use std::collections::HashSet;
use std::process::Command;

/// One decoded line: address, mnemonic (with prefixes), operands.
#[derive(Debug, Clone)]
struct Insn {
    addr: u64,
    mnemonic: String,
    operands: String,
}

fn parse_listing(text: &str) -> Vec<Insn> {
    text.lines()
        .filter_map(|l| {
            let (addr, rest) = l.trim().split_once(":\t")?;
            let addr = u64::from_str_radix(addr.trim(), 16).ok()?;
            let rest = rest.trim();
            // `lock cmpxchg %rcx,(%rdi)`: the prefix belongs to the mnemonic.
            let mut words = rest.split_whitespace();
            let mut mnemonic = words.next()?.to_string();
            if mnemonic == "lock" {
                mnemonic = format!("lock {}", words.next()?);
            }
            let operands = words.collect::<Vec<_>>().join(" ");
            Some(Insn {
                addr,
                mnemonic,
                operands,
            })
        })
        .collect()
}

/// The binary's symbol table, demangled, with sizes.
fn symbols(binary: &str) -> String {
    let nm = Command::new("nm")
        .args(["-C", "-S", binary])
        .output()
        .expect("nm (binutils) must be installed: apt-get install binutils");
    String::from_utf8_lossy(&nm.stdout).into_owned()
}

/// The function's instructions from objdump, found by its demangled name in `nm`'s output.
fn disassemble(binary: &str, nm: &str, symbol: &str) -> Vec<Insn> {
    let line = nm
        .lines()
        .find(|l| l.ends_with(&format!(" {symbol}")))
        .unwrap_or_else(|| panic!("{symbol} is not in {binary}: inlined or renamed?"));
    let mut f = line.split_whitespace();
    let start = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
    let size = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
    let out = Command::new("objdump")
        .args([
            "-d",
            "--no-show-raw-insn",
            &format!("--start-address={start:#x}"),
            &format!("--stop-address={:#x}", start + size),
            binary,
        ])
        .output()
        .expect("objdump (binutils) must be installed");
    parse_listing(&String::from_utf8_lossy(&out.stdout))
}

/// What an op's loop must contain: the mnemonic's prefix (`lock xadd` matches `lock xadd`,
/// `bt` matches `btq`) and whether it must address the shared line.
fn expectation(op: &str) -> (&'static str, bool) {
    match op {
        "idle" => ("dec", false),
        "memset64" | "memset128" | "memset256" => ("movdqa", true),
        "test_bit" => ("bt", true),
        "set_bit" => ("lock bts", true),
        "inc" => ("lock inc", true),
        "xadd" => ("lock xadd", true),
        "cmpxchg" => ("lock cmpxchg", true),
        "xchg" => ("xchg", true),
        "mfence" => ("mfence", false),
        "sfence" => ("sfence", false),
        "lfence" => ("lfence", false),
        "load" | "store" => ("mov", true),
        other => panic!("no expectation for op `{other}`: add one"),
    }
}

/// The memory operand of `operands`, e.g. `0x10(%rdi)`: (offset, base register).
fn memory_operand(operands: &str) -> Option<(i64, String)> {
    let open = operands.find('(')?;
    let close = operands[open..].find(')')? + open;
    let base = operands[open + 1..close]
        .split(',')
        .next()?
        .trim()
        .to_string();
    let before = &operands[..open];
    let disp = before.rsplit(',').next().unwrap_or("").trim();
    let offset = if disp.is_empty() {
        0
    } else if let Some(h) = disp.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if let Some(h) = disp.strip_prefix("-0x") {
        -i64::from_str_radix(h, 16).ok()?
    } else {
        disp.parse().ok()?
    };
    Some((offset, base))
}

/// Checks one op's function; Err says what is wrong.
fn check(op: &str, insns: &[Insn]) -> Result<(), String> {
    if insns.is_empty() {
        return Err(format!("{op}: no instructions"));
    }
    // The loop: a backward conditional jump; its body runs from the target to the jump.
    let (body_start, body_end) = insns
        .iter()
        .filter(|i| i.mnemonic.starts_with('j') && i.mnemonic != "jmp")
        .filter_map(|i| {
            let target = u64::from_str_radix(i.operands.split_whitespace().next()?, 16).ok()?;
            (target <= i.addr).then_some((target, i.addr))
        })
        .min_by_key(|(t, _)| *t)
        .ok_or_else(|| format!("{op}: no loop (no backward jump): the loop was collapsed"))?;
    let body: Vec<&Insn> = insns
        .iter()
        .filter(|i| i.addr >= body_start && i.addr <= body_end)
        .collect();
    // Inside the loop nothing may touch the stack: that would be working on a copy. (Outside
    // it, an unoptimised build spills its arguments, which is harmless.)
    if let Some(i) = body
        .iter()
        .find(|i| i.operands.contains("%rsp") || i.operands.contains("%rbp"))
    {
        return Err(format!(
            "{op}: the loop touches the stack ({} {}): a copy, not the shared line",
            i.mnemonic, i.operands
        ));
    }
    // Where the shared line's address is before each instruction: %rdi at entry, then every
    // register or stack slot a mov copies it to; anything else written there forgets it, and
    // a call clobbers the argument registers.
    let mut pointer: HashSet<String> = HashSet::from(["%rdi".to_string()]);
    let mut pointer_at = Vec::with_capacity(insns.len());
    for i in insns {
        pointer_at.push(pointer.clone());
        if i.mnemonic.starts_with("call") {
            for r in [
                "%rax", "%rcx", "%rdx", "%rsi", "%rdi", "%r8", "%r9", "%r10", "%r11",
            ] {
                pointer.remove(r);
            }
            continue;
        }
        let Some((src, dst)) = i.operands.rsplit_once(',') else {
            continue;
        };
        if i.mnemonic.starts_with("mov") && pointer.contains(src) {
            pointer.insert(dst.to_string());
        } else if !dst.starts_with('(') {
            pointer.remove(dst);
        }
    }
    let (want, on_line) = expectation(op);
    let hits: Vec<(usize, &Insn)> = insns
        .iter()
        .enumerate()
        .filter(|(_, i)| i.addr >= body_start && i.addr <= body_end)
        .filter(|(_, i)| {
            i.mnemonic == want
                || (i.mnemonic.starts_with(want)
                    && i.mnemonic.len() <= want.len() + 1
                    && want.starts_with("lock") == i.mnemonic.starts_with("lock"))
        })
        .filter(|(_, i)| !on_line || i.operands.contains('('))
        .collect();
    if hits.is_empty() {
        let listing: Vec<String> = body
            .iter()
            .map(|i| format!("{} {}", i.mnemonic, i.operands))
            .collect();
        return Err(format!(
            "{op}: the loop has no `{want}`{}: {listing:?}",
            if on_line { " on memory" } else { "" }
        ));
    }
    if !on_line {
        if let Some(i) = body.iter().find(|i| i.operands.contains('(')) {
            return Err(format!(
                "{op}: touches memory ({} {})",
                i.mnemonic, i.operands
            ));
        }
        return Ok(());
    }
    let mut offsets = Vec::new();
    for (k, i) in &hits {
        let (offset, base) = memory_operand(&i.operands).ok_or("unparsable operand")?;
        if !pointer_at[*k].contains(&base) {
            return Err(format!(
                "{op}: `{} {}` addresses through {base}, not the pointer to the shared line",
                i.mnemonic, i.operands
            ));
        }
        offsets.push(offset);
    }
    match op {
        "load" if !hits.iter().any(|(_, i)| i.operands.starts_with('(')) => {
            Err(format!("load: no load from the line: {hits:?}"))
        }
        "store" if !hits.iter().any(|(_, i)| i.operands.ends_with(')')) => {
            Err(format!("store: no store to the line: {hits:?}"))
        }
        _ => {
            if let Some(bytes) = op.strip_prefix("memset") {
                let bytes: i64 = bytes.parse().unwrap();
                offsets.sort_unstable();
                offsets.dedup();
                let wanted: Vec<i64> = (0..bytes / 16).map(|k| k * 16).collect();
                if offsets != wanted {
                    return Err(format!(
                        "{op}: stores at offsets {offsets:?}, not every 16 bytes of {bytes}"
                    ));
                }
            }
            Ok(())
        }
    }
}

#[test]
fn every_op_loop_is_what_it_says() {
    // CONTEND_DISASM_BINARY checks another build (a release binary, an installed one).
    let binary = std::env::var("CONTEND_DISASM_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_contend").into());
    let binary = binary.as_str();
    let nm = symbols(binary);
    let mut failures = Vec::new();
    for op in bench::Op::ALL {
        let insns = disassemble(binary, &nm, &op.symbol());
        if let Err(e) = check(op.name(), &insns) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_checker_catches_cconts_bugs() {
    let listing = |body: &str| parse_listing(body);
    // `inc` on a stack copy.
    let inc = listing(
        "  10:\tmov    (%rdi),%rax\n  13:\tmov    %rax,0x8(%rsp)\n  18:\tlock incq 0x8(%rsp)\n  1e:\tdec    %rsi\n  21:\tjne    18 <x>\n  23:\tret",
    );
    assert!(check("inc", &inc).unwrap_err().contains("stack"));
    // `inc` through some other register.
    let inc =
        listing("  10:\tlock incq (%rax)\n  14:\tdec    %rsi\n  17:\tjne    10 <x>\n  19:\tret");
    assert!(check("inc", &inc).unwrap_err().contains("%rax"));
    // `test_bit` compiled to a bare `ret`.
    let tb = listing("  10:\tret");
    assert!(check("test_bit", &tb).unwrap_err().contains("no loop"));
    // `set_bit` without lock.
    let sb =
        listing("  10:\tbtsq   $0x5,(%rdi)\n  15:\tdec    %rsi\n  18:\tjne    10 <x>\n  1a:\tret");
    assert!(check("set_bit", &sb).unwrap_err().contains("lock bts"));
    // memset64 collapsed to one store before a loop that does nothing.
    let ms =
        listing("  10:\tmovdqa %xmm0,(%rdi)\n  14:\tdec    %rsi\n  17:\tjne    14 <x>\n  19:\tret");
    assert!(check("memset64", &ms).is_err());
    // And the right shapes pass, with the pointer copied to another register.
    let ok = listing(
        "  10:\tmov    %rdi,%rcx\n  13:\tlock xadd %rax,(%rcx)\n  18:\tdec    %rsi\n  1b:\tjne    13 <x>\n  1d:\tret",
    );
    check("xadd", &ok).unwrap();
}
