//! Pure parsers of tracefs `format` files: field layout, and the `prev_state` encoding that
//! `sched_switch`'s `print fmt` documents.
//!
//! Nothing here touches the file system; `SchedTracer::open` reads the files and hands the
//! text in, and the tests hand in recorded text.

use std::collections::BTreeMap;
use std::fmt;

/// Largest offset or size a field may declare: a raw tracepoint record is at most 64 KiB.
const MAX_FIELD_END: usize = 1 << 16;

/// Where one field sits in a tracepoint's raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

impl Field {
    /// Reads this field as an integer (sign-extended when the format says `signed:1`), or
    /// `None` when it is not a 1, 2, 4 or 8 byte integer or does not fit inside `raw`.
    pub fn read_int(&self, raw: &[u8]) -> Option<i128> {
        let end = self.offset.checked_add(self.size)?;
        let bytes = raw.get(self.offset..end)?;
        let v = match self.size {
            1 => {
                let b = [bytes[0]];
                if self.signed {
                    i128::from(i8::from_ne_bytes(b))
                } else {
                    i128::from(u8::from_ne_bytes(b))
                }
            }
            2 => {
                let b: [u8; 2] = bytes.try_into().ok()?;
                if self.signed {
                    i128::from(i16::from_ne_bytes(b))
                } else {
                    i128::from(u16::from_ne_bytes(b))
                }
            }
            4 => {
                let b: [u8; 4] = bytes.try_into().ok()?;
                if self.signed {
                    i128::from(i32::from_ne_bytes(b))
                } else {
                    i128::from(u32::from_ne_bytes(b))
                }
            }
            8 => {
                let b: [u8; 8] = bytes.try_into().ok()?;
                if self.signed {
                    i128::from(i64::from_ne_bytes(b))
                } else {
                    i128::from(u64::from_ne_bytes(b))
                }
            }
            _ => return None,
        };
        Some(v)
    }
}

/// One tracepoint's `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracepointFormat {
    /// `name:` line, e.g. `sched_switch`.
    pub name: String,
    /// `ID:` line: the value for `perf_event_attr.config` and the raw record's `common_type`.
    pub id: u64,
    /// Field name (without type or array suffix) -> layout.
    pub fields: BTreeMap<String, Field>,
    /// The text after `print fmt: `, empty when the file has none.
    pub print_fmt: String,
}

/// A `format` file that could not be understood; the text says which line and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError(pub String);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

impl TracepointFormat {
    /// Parses a tracefs `format` file. Field lines are read by name (`field:TYPE NAME;
    /// offset:N; size:N; signed:N;`, `signed:` optional as on kernels before 2.6.32), so any
    /// layout works; a field line without a readable offset or size is an error, and so is a
    /// missing `name:` or `ID:`.
    pub fn parse(text: &str) -> Result<TracepointFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields = BTreeMap::new();
        let mut print_fmt = String::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            let bad = |why: &str| FormatError(format!("format line {}: {why}: `{line}`", n + 1));
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_string());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                id = Some(
                    rest.trim()
                        .parse::<u64>()
                        .map_err(|_| bad("ID is not a number"))?,
                );
            } else if let Some(rest) = line.strip_prefix("print fmt:") {
                print_fmt = rest.trim().to_string();
            } else if line.starts_with("field:") {
                let (fname, field) = parse_field_line(line).map_err(|why| bad(&why))?;
                fields.insert(fname, field);
            }
        }
        let name = name.ok_or_else(|| FormatError("format has no `name:` line".into()))?;
        let id = id.ok_or_else(|| FormatError(format!("format of {name} has no `ID:` line")))?;
        Ok(TracepointFormat {
            name,
            id,
            fields,
            print_fmt,
        })
    }

    /// The field `name`, or an error naming the tracepoint and the field.
    pub fn field(&self, name: &str) -> Result<Field, FormatError> {
        self.fields.get(name).copied().ok_or_else(|| {
            FormatError(format!(
                "tracepoint {} has no field `{name}` in its format",
                self.name
            ))
        })
    }

    /// Like [`field`](Self::field) but also requires an integer of 1, 2, 4 or 8 bytes.
    pub fn int_field(&self, name: &str) -> Result<Field, FormatError> {
        let f = self.field(name)?;
        if matches!(f.size, 1 | 2 | 4 | 8) {
            Ok(f)
        } else {
            Err(FormatError(format!(
                "field `{name}` of {} has size {}, not an integer",
                self.name, f.size
            )))
        }
    }
}

/// `field:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;`
fn parse_field_line(line: &str) -> Result<(String, Field), String> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = Some(parse_small(v, "offset")?);
        } else if let Some(v) = part.strip_prefix("size:") {
            size = Some(parse_small(v, "size")?);
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl.ok_or("no declaration")?;
    let offset = offset.ok_or("no offset")?;
    let size = size.ok_or("no size")?;
    if offset + size > MAX_FIELD_END {
        return Err(format!(
            "field ends at byte {}, past the 64 KiB record limit",
            offset + size
        ));
    }
    // The name is the declaration's last word without an array suffix: `char prev_comm[16]`,
    // `__data_loc char[] parent_comm`, `pid_t pid`.
    let last = decl.split_whitespace().last().ok_or("empty declaration")?;
    let name = last
        .split('[')
        .next()
        .unwrap_or(last)
        .trim_start_matches('*');
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("cannot find the field name in `{decl}`"));
    }
    Ok((
        name.to_string(),
        Field {
            offset,
            size,
            signed,
        },
    ))
}

fn parse_small(v: &str, what: &str) -> Result<usize, String> {
    let n: usize = v
        .trim()
        .parse()
        .map_err(|_| format!("{what} `{}` is not a number", v.trim()))?;
    if n > MAX_FIELD_END {
        return Err(format!("{what} {n} exceeds the 64 KiB record limit"));
    }
    Ok(n)
}

/// How a task stopped running, from `sched_switch`'s `prev_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrevState {
    /// Preempted, or yielded: still runnable (`R` / `R+`).
    Runnable,
    /// Interruptible sleep (`S`), and idle waits (`I`, or `D|N` on old kernels) that do not
    /// count toward load.
    Sleeping,
    /// Uninterruptible sleep (`D`, with or without `K`).
    DiskSleep,
    /// Stopped by a signal or traced (`T`, `t`).
    Stopped,
    /// Exiting (`X`, `Z`, and `x` on old kernels).
    Dead,
    /// Anything else (parked kthread `P`, `W`, `N` alone, …), with the raw value.
    Other(u32),
}

/// Decodes `sched_switch.prev_state` the way this kernel's `print fmt` says it is encoded.
///
/// The kernel has used two encodings: before 4.14 the raw `task->state` bits, with
/// `TASK_STATE_MAX` (1024, 2048 or 4096) or-ed in for a preempted task; since 4.14 one
/// `TASK_REPORT` bit (S=0x1 D=0x2 T=0x4 t=0x8 X=0x10 Z=0x20 P=0x40 I=0x80) or 0 for
/// running, and `TASK_REPORT_MAX` (0x100; 0x80 on the few kernels without `I`) for
/// preempted. Both are spelt out in the `print fmt`: the letter of each bit in the
/// `__print_flags(…)` table, and the preempted bit in the `REC->prev_state & EXPR ? "+" : ""`
/// clause. This decoder reads both from the text; when the `+` clause cannot be evaluated it
/// takes the next power of two above the largest flag (true of every layout so far), and
/// when there is no usable table at all it assumes the 4.14+ layout and says so in
/// [`source`](Self::source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDecoder {
    /// (bit value, letter) pairs from the `__print_flags` table.
    flags: Vec<(u64, char)>,
    /// The bit that marks a preempted task.
    preempt_bit: u64,
    source: String,
}

impl StateDecoder {
    /// The 4.14+ layout (`TASK_REPORT` bits, `TASK_REPORT_MAX` = 0x100).
    pub fn modern() -> StateDecoder {
        StateDecoder {
            flags: vec![
                (0x1, 'S'),
                (0x2, 'D'),
                (0x4, 'T'),
                (0x8, 't'),
                (0x10, 'X'),
                (0x20, 'Z'),
                (0x40, 'P'),
                (0x80, 'I'),
            ],
            preempt_bit: 0x100,
            source: "assumed Linux 4.14+ layout (S=0x1 D=0x2 T=0x4 t=0x8 X=0x10 Z=0x20 P=0x40 I=0x80, preempted=0x100)".into(),
        }
    }

    /// Reads the encoding from `sched_switch`'s `print fmt` text; falls back as described on
    /// the type. Never fails.
    pub fn from_print_fmt(print_fmt: &str) -> StateDecoder {
        let flags = parse_flag_table(print_fmt);
        if flags.is_empty() {
            let mut d = StateDecoder::modern();
            d.source = format!(
                "{}: sched_switch print fmt has no readable __print_flags table",
                d.source
            );
            return d;
        }
        let max_flag = flags.iter().map(|&(v, _)| v).max().unwrap_or(0);
        let (preempt_bit, how) = match parse_preempt_bit(print_fmt) {
            Some(bit) if bit != 0 => (bit, "the `+` clause"),
            _ => (
                max_flag
                    .checked_add(1)
                    .and_then(u64::checked_next_power_of_two)
                    .unwrap_or(0),
                "the next power of two above the largest flag (no readable `+` clause)",
            ),
        };
        let table = flags
            .iter()
            .map(|(v, c)| format!("{c}={v:#x}"))
            .collect::<Vec<_>>()
            .join(" ");
        StateDecoder {
            source: format!(
                "from sched_switch print fmt: {table}, preempted={preempt_bit:#x} (from {how})"
            ),
            flags,
            preempt_bit,
        }
    }

    /// How this decoder was derived, one line for a run's metadata.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The bit that marks "preempted, still runnable".
    pub fn preempt_bit(&self) -> u64 {
        self.preempt_bit
    }

    fn has(&self, state: u64, letter: char) -> bool {
        self.flags
            .iter()
            .any(|&(v, c)| c == letter && v != 0 && state & v == v)
    }

    /// Decodes one raw `prev_state` value.
    pub fn decode(&self, raw: u64) -> PrevState {
        if self.preempt_bit != 0 && raw & self.preempt_bit != 0 {
            return PrevState::Runnable;
        }
        let state = if self.preempt_bit.is_power_of_two() {
            raw & (self.preempt_bit - 1)
        } else {
            raw
        };
        if state == 0 {
            return PrevState::Runnable;
        }
        if self.has(state, 'D') {
            // D|N is TASK_IDLE on kernels before 4.14: an idle wait, not I/O.
            return if self.has(state, 'N') {
                PrevState::Sleeping
            } else {
                PrevState::DiskSleep
            };
        }
        if self.has(state, 'S') || self.has(state, 'I') {
            return PrevState::Sleeping;
        }
        if self.has(state, 'T') || self.has(state, 't') {
            return PrevState::Stopped;
        }
        if self.has(state, 'X') || self.has(state, 'Z') || self.has(state, 'x') {
            return PrevState::Dead;
        }
        PrevState::Other(u32::try_from(raw).unwrap_or(u32::MAX))
    }
}

/// Finds `__print_flags(…, "|", { V, "L" }, …)` and returns the (V, L) pairs with a one-letter
/// L and an evaluable V.
fn parse_flag_table(fmt: &str) -> Vec<(u64, char)> {
    let Some(start) = fmt.find("__print_flags(") else {
        return Vec::new();
    };
    let body_start = start + "__print_flags(".len();
    let Some(body) = balanced_body(&fmt[body_start..]) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let entry = &after[..close];
        rest = &after[close + 1..];
        let Some((expr, label)) = entry.rsplit_once(',') else {
            continue;
        };
        let label = label.trim();
        let Some(label) = label.strip_prefix('"').and_then(|l| l.strip_suffix('"')) else {
            continue;
        };
        let mut chars = label.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            continue;
        };
        if let Some(v) = eval_const(expr) {
            if v != 0 && !out.iter().any(|&(_, l)| l == c) {
                out.push((v, c));
            }
        }
    }
    out
}

/// The text up to the `)` that closes an already-opened `(`, skipping string literals.
fn balanced_body(s: &str) -> Option<&str> {
    let mut depth = 1usize;
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_str {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&s[..i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Finds `REC->prev_state & EXPR ? "+"` and evaluates EXPR.
fn parse_preempt_bit(fmt: &str) -> Option<u64> {
    let q = fmt
        .match_indices('?')
        .find(|(i, _)| fmt[i + 1..].trim_start().starts_with("\"+\""))?
        .0;
    let before = &fmt[..q];
    let at = before.rfind("REC->prev_state")?;
    let expr = before[at + "REC->prev_state".len()..].trim_start();
    let expr = expr.strip_prefix('&')?;
    eval_const(expr)
}

/// Evaluates a C integer constant expression made of literals and `| ^ & << >> + - * ~ ( )`,
/// as the kernel prints them in `print fmt` after macro expansion. `None` for anything else
/// (identifiers, overflow, shifts of 64 or more, nesting deeper than 64).
pub fn eval_const(expr: &str) -> Option<u64> {
    let tokens = tokenize(expr)?;
    let mut p = ExprParser {
        tokens: &tokens,
        pos: 0,
        depth: 0,
    };
    let v = p.binary(0)?;
    (p.pos == tokens.len()).then_some(v)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Num(u64),
    Op(&'static str),
    Open,
    Close,
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    const OPS: [&str; 9] = ["<<", ">>", "|", "^", "&", "+", "-", "*", "~"];
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'(' {
            out.push(Tok::Open);
            i += 1;
        } else if c == b')' {
            out.push(Tok::Close);
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let lit = s[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(hex) = lit.strip_prefix("0x").or_else(|| lit.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16).ok()?
            } else if lit.len() > 1 && lit.starts_with('0') {
                u64::from_str_radix(&lit[1..], 8).ok()?
            } else {
                lit.parse().ok()?
            };
            out.push(Tok::Num(v));
        } else {
            let op = OPS.iter().find(|op| s[i..].starts_with(**op))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
        if out.len() > 4096 {
            return None;
        }
    }
    Some(out)
}

struct ExprParser<'a> {
    tokens: &'a [Tok],
    pos: usize,
    depth: usize,
}

/// C precedence of the binary operators we accept (higher binds tighter).
fn precedence(op: &str) -> Option<u8> {
    Some(match op {
        "|" => 1,
        "^" => 2,
        "&" => 3,
        "<<" | ">>" => 4,
        "+" | "-" => 5,
        "*" => 6,
        _ => return None,
    })
}

impl ExprParser<'_> {
    fn peek(&self) -> Option<Tok> {
        self.tokens.get(self.pos).copied()
    }

    fn binary(&mut self, min_prec: u8) -> Option<u64> {
        let mut lhs = self.unary()?;
        while let Some(Tok::Op(op)) = self.peek() {
            let Some(prec) = precedence(op) else { break };
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            let rhs = self.binary(prec + 1)?;
            lhs = match op {
                "|" => lhs | rhs,
                "^" => lhs ^ rhs,
                "&" => lhs & rhs,
                "<<" => lhs.checked_shl(u32::try_from(rhs).ok()?)?,
                ">>" => lhs.checked_shr(u32::try_from(rhs).ok()?)?,
                "+" => lhs.checked_add(rhs)?,
                "-" => lhs.checked_sub(rhs)?,
                "*" => lhs.checked_mul(rhs)?,
                _ => return None,
            };
        }
        Some(lhs)
    }

    fn unary(&mut self) -> Option<u64> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        let v = match self.peek()? {
            Tok::Num(v) => {
                self.pos += 1;
                v
            }
            Tok::Op("~") => {
                self.pos += 1;
                !self.unary()?
            }
            Tok::Open => {
                self.pos += 1;
                let v = self.binary(0)?;
                if self.peek()? != Tok::Close {
                    return None;
                }
                self.pos += 1;
                v
            }
            _ => return None,
        };
        self.depth -= 1;
        Some(v)
    }
}
