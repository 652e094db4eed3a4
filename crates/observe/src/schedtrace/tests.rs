//! Parser tests on recorded and constructed `format` files and on constructed ring records,
//! including truncated and hostile ones; and the ring reader on memory that plays the kernel.

use super::decode::{
    parse_record, parse_sample, RingRecord, PERF_RECORD_LOST, PERF_RECORD_LOST_SAMPLES,
    PERF_RECORD_SAMPLE,
};
use super::format::eval_const;
use super::ring::Ring;
use super::*;

macro_rules! fixture {
    ($dir:literal, $name:literal) => {
        include_str!(concat!("fixtures/", $dir, "/", $name, ".format"))
    };
}

/// The five formats of one fixture directory, in [`TRACEPOINTS`] order.
fn formats(dir: &str) -> [TracepointFormat; 5] {
    let texts = match dir {
        "linux-6.18" => [
            fixture!("linux-6.18", "sched_switch"),
            fixture!("linux-6.18", "sched_wakeup"),
            fixture!("linux-6.18", "sched_wakeup_new"),
            fixture!("linux-6.18", "sched_process_fork"),
            fixture!("linux-6.18", "sched_process_exit"),
        ],
        "old-i386" => [
            fixture!("old-i386", "sched_switch"),
            fixture!("old-i386", "sched_wakeup"),
            fixture!("old-i386", "sched_wakeup_new"),
            fixture!("old-i386", "sched_process_fork"),
            fixture!("old-i386", "sched_process_exit"),
        ],
        _ => unreachable!(),
    };
    texts.map(|t| TracepointFormat::parse(t).unwrap())
}

fn decoder(f: &[TracepointFormat; 5]) -> SchedDecoder {
    SchedDecoder::new(SchedFormats {
        switch: &f[0],
        wakeup: &f[1],
        wakeup_new: &f[2],
        fork: &f[3],
        exit: &f[4],
    })
    .unwrap()
}

fn field(offset: usize, size: usize, signed: bool) -> Field {
    Field {
        offset,
        size,
        signed,
    }
}

// ---- format files -------------------------------------------------------------------------

#[test]
fn parses_this_machines_sched_switch() {
    let [sw, ..] = formats("linux-6.18");
    assert_eq!(sw.name, "sched_switch");
    assert_eq!(sw.id, 372);
    assert_eq!(sw.fields["common_type"], field(0, 2, false));
    assert_eq!(sw.fields["common_pid"], field(4, 4, true));
    assert_eq!(sw.fields["prev_comm"], field(8, 16, false));
    assert_eq!(sw.fields["prev_pid"], field(24, 4, true));
    assert_eq!(sw.fields["prev_state"], field(32, 8, true));
    assert_eq!(sw.fields["next_comm"], field(40, 16, false));
    assert_eq!(sw.fields["next_pid"], field(56, 4, true));
    assert_eq!(sw.fields.len(), 11);
    assert!(sw.print_fmt.starts_with("\"prev_comm=%s"));
}

#[test]
fn parses_data_loc_and_old_layouts() {
    let [_, wake, _, fork, exit] = formats("linux-6.18");
    assert_eq!(fork.fields["parent_comm"], field(8, 4, false)); // __data_loc char[]
    assert_eq!(fork.fields["parent_pid"], field(12, 4, true));
    assert_eq!(fork.fields["child_pid"], field(20, 4, true));
    assert_eq!(wake.fields["target_cpu"], field(32, 4, true));
    assert_eq!(exit.fields["group_dead"], field(32, 1, false));

    let [sw, wake, wnew, fork, exit] = formats("old-i386");
    assert_eq!(sw.fields["common_padding"], field(8, 4, true));
    assert_eq!(sw.fields["prev_pid"], field(28, 4, true));
    assert_eq!(sw.fields["prev_state"], field(36, 4, true));
    assert_eq!(sw.fields["next_pid"], field(56, 4, true));
    assert_eq!(wake.fields["target_cpu"], field(40, 4, true));
    assert_eq!(wnew.id, 59);
    assert_eq!(fork.fields["child_pid"], field(48, 4, true));
    assert_eq!(exit.fields["pid"], field(28, 4, true));
}

#[test]
fn format_errors_say_what_is_wrong() {
    let e = TracepointFormat::parse("ID: 5\nformat:\n").unwrap_err();
    assert!(e.0.contains("name:"), "{e}");
    let e = TracepointFormat::parse("name: x\nformat:\n").unwrap_err();
    assert!(e.0.contains("ID:"), "{e}");
    let e = TracepointFormat::parse("name: x\nID: nope\n").unwrap_err();
    assert!(e.0.contains("line 2"), "{e}");
    for bad in [
        "\tfield:int a;\tsize:4;\tsigned:1;",
        "\tfield:int a;\toffset:0;\tsigned:1;",
        "\tfield:int a;\toffset:-1;\tsize:4;",
        "\tfield:int a;\toffset:99999999999999999999;\tsize:4;",
        "\tfield:int a;\toffset:65535;\tsize:4;",
        "\tfield:;\toffset:0;\tsize:4;",
        "\tfield:int a-b;\toffset:0;\tsize:4;",
    ] {
        let text = format!("name: x\nID: 1\nformat:\n{bad}\n");
        assert!(TracepointFormat::parse(&text).is_err(), "accepted {bad:?}");
    }
    // `signed:` is optional (kernels before 2.6.32).
    let f =
        TracepointFormat::parse("name: x\nID: 1\n\tfield:int a;\toffset:8;\tsize:4;\n").unwrap();
    assert_eq!(f.fields["a"], field(8, 4, false));
}

#[test]
fn decoder_names_the_missing_field() {
    let mut f = formats("linux-6.18");
    f[0].fields.remove("prev_state");
    let e = SchedDecoder::new(SchedFormats {
        switch: &f[0],
        wakeup: &f[1],
        wakeup_new: &f[2],
        fork: &f[3],
        exit: &f[4],
    })
    .unwrap_err();
    assert!(
        e.0.contains("sched_switch") && e.0.contains("prev_state"),
        "{e}"
    );

    let mut f = formats("linux-6.18");
    f[4].id = f[0].id;
    let e = SchedDecoder::new(SchedFormats {
        switch: &f[0],
        wakeup: &f[1],
        wakeup_new: &f[2],
        fork: &f[3],
        exit: &f[4],
    })
    .unwrap_err();
    assert!(e.0.contains("share the ID"), "{e}");

    let mut f = formats("linux-6.18");
    f[1].fields.insert("pid".into(), field(24, 16, false));
    assert!(SchedDecoder::new(SchedFormats {
        switch: &f[0],
        wakeup: &f[1],
        wakeup_new: &f[2],
        fork: &f[3],
        exit: &f[4],
    })
    .unwrap_err()
    .0
    .contains("not an integer"));
}

/// Deterministic xorshift, for mutation tests without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn mangled_format_text_never_panics() {
    let text = fixture!("linux-6.18", "sched_switch").as_bytes().to_vec();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let mut t = text.clone();
        for _ in 0..(rng.next() % 8 + 1) {
            let i = (rng.next() as usize) % t.len();
            match rng.next() % 3 {
                0 => t[i] = rng.next() as u8,
                1 => t.truncate(i),
                _ => t.insert(i, b"();{}|&<~0x\"+?:"[(rng.next() % 15) as usize]),
            }
            if t.is_empty() {
                break;
            }
        }
        let s = String::from_utf8_lossy(&t);
        if let Ok(f) = TracepointFormat::parse(&s) {
            let _ = StateDecoder::from_print_fmt(&f.print_fmt).decode(rng.next());
        }
    }
}

// ---- constant expressions and prev_state ------------------------------------------------

#[test]
fn evaluates_the_kernels_constant_expressions() {
    assert_eq!(eval_const("(2048-1)"), Some(2047));
    assert_eq!(eval_const(" 2048 "), Some(2048));
    assert_eq!(
        eval_const("(((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1)"),
        Some(0x100)
    );
    assert_eq!(
        eval_const("((((0x0000 | 0x0001 | 0x0002 | 0x0004 | 0x0008 | 0x0010 | 0x0020 | 0x0040) + 1) << 1) - 1)"),
        Some(0xff)
    );
    assert_eq!(eval_const("1 | 2 & 3"), Some(3)); // & binds tighter than |
    assert_eq!(eval_const("1 << 2 + 1"), Some(8)); // + binds tighter than <<
    assert_eq!(eval_const("~0"), Some(u64::MAX));
    assert_eq!(eval_const("2048UL"), Some(2048));
    assert_eq!(eval_const("010"), Some(8));
    assert_eq!(eval_const("3 * 4 - 2"), Some(10));
    for bad in [
        "",
        "TASK_REPORT_MAX",
        "1 << 64",
        "0 - 1",
        "0x",
        "(1",
        "1)",
        "1 +",
        "0xffffffffffffffff + 1",
        "99999999999999999999",
        "1 ? 2 : 3",
    ] {
        assert_eq!(eval_const(bad), None, "{bad:?}");
    }
    let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert_eq!(eval_const(&deep), None);
    let tilde = format!("{}0", "~".repeat(10_000));
    assert_eq!(eval_const(&tilde), None);
    let long = vec!["1"; 3000].join(" | ");
    assert_eq!(eval_const(&long), None, "over the token limit");
}

#[test]
fn prev_state_on_this_kernel() {
    let [sw, ..] = formats("linux-6.18");
    let d = StateDecoder::from_print_fmt(&sw.print_fmt);
    assert_eq!(d.preempt_bit(), 0x100);
    assert!(d.source().contains("from the `+` clause"), "{}", d.source());
    assert!(d.source().contains("I=0x80"), "{}", d.source());
    use PrevState::*;
    for (raw, want) in [
        (0, Runnable),
        (0x100, Runnable),
        (0x1, Sleeping),
        (0x2, DiskSleep),
        (0x4, Stopped),
        (0x8, Stopped),
        (0x10, Dead),
        (0x20, Dead),
        (0x40, Other(0x40)),
        (0x80, Sleeping), // TASK_REPORT_IDLE
        (0x101, Runnable),
        (0x200, Runnable), // bits above the report mask: nothing set below it
    ] {
        assert_eq!(d.decode(raw), want, "{raw:#x}");
    }
    // The built-in assumption matches this kernel.
    let m = StateDecoder::modern();
    for raw in 0..0x400 {
        assert_eq!(m.decode(raw), d.decode(raw), "{raw:#x}");
    }
}

#[test]
fn prev_state_on_a_pre_4_14_kernel() {
    let [sw, ..] = formats("old-i386");
    let d = StateDecoder::from_print_fmt(&sw.print_fmt);
    assert_eq!(d.preempt_bit(), 2048);
    use PrevState::*;
    for (raw, want) in [
        (0, Runnable),
        (2048, Runnable), // TASK_RUNNING | TASK_STATE_MAX: preempted
        (1, Sleeping),
        (2, DiskSleep),
        (2 | 128, DiskSleep), // TASK_KILLABLE
        (2 | 1024, Sleeping), // TASK_IDLE = D|N
        (4 | 128, Stopped),   // TASK_STOPPED = T|K
        (8 | 128, Stopped),   // TASK_TRACED = t|K
        (16, Dead),           // EXIT_ZOMBIE
        (32, Dead),           // EXIT_DEAD
        (64, Dead),           // TASK_DEAD
        (512, Other(512)),    // TASK_PARKED
        (256, Other(256)),    // TASK_WAKING
    ] {
        assert_eq!(d.decode(raw), want, "{raw}");
    }
}

#[test]
fn prev_state_when_the_plus_clause_or_table_is_unreadable() {
    // A 4.14-rc style table without `I`, whose preempted bit is 0x80, and no `+` clause we can
    // evaluate: the next power of two above the largest flag.
    let fmt = r#""prev_state=%s%s", REC->prev_state & (TASK_REPORT_MAX - 1) ? __print_flags(REC->prev_state & (TASK_REPORT_MAX - 1), "|", { 0x01, "S" }, { 0x02, "D" }, { 0x04, "T" }, { 0x08, "t" }, { 0x10, "X" }, { 0x20, "Z" }, { 0x40, "P" }) : "R", REC->prev_state & TASK_REPORT_MAX ? "+" : """#;
    let d = StateDecoder::from_print_fmt(fmt);
    assert_eq!(d.preempt_bit(), 0x80);
    assert!(d.source().contains("next power of two"), "{}", d.source());
    assert_eq!(d.decode(0x80), PrevState::Runnable);
    assert_eq!(d.decode(0x1), PrevState::Sleeping);

    for junk in [
        "",
        "\"R\"",
        "__print_flags(",
        "__print_flags(x, \"|\", { zz, \"S\" })",
    ] {
        let d = StateDecoder::from_print_fmt(junk);
        assert!(
            d.source().starts_with("assumed"),
            "{junk:?}: {}",
            d.source()
        );
        assert_eq!(d.preempt_bit(), 0x100);
        assert_eq!(d.decode(0x100), PrevState::Runnable);
        assert_eq!(d.decode(0x2), PrevState::DiskSleep);
    }
}

// ---- records --------------------------------------------------------------------------------

/// Raw tracepoint data for `f` with `values` written at the format's own offsets.
fn raw_for(f: &TracepointFormat, values: &[(&str, i64)]) -> Vec<u8> {
    let len = f.fields.values().map(|x| x.offset + x.size).max().unwrap();
    let mut raw = vec![0u8; len];
    let mut put = |name: &str, v: i64| {
        let fl = f.fields[name];
        let bytes = v.to_ne_bytes();
        raw[fl.offset..fl.offset + fl.size].copy_from_slice(&bytes[..fl.size]);
    };
    put("common_type", f.id as i64);
    for &(n, v) in values {
        put(n, v);
    }
    raw
}

/// A whole PERF_RECORD_SAMPLE (header included) around `raw`, padded to 8 bytes as the
/// kernel does.
fn sample_record(pid: u32, tid: u32, time: u64, cpu: u32, raw: &[u8]) -> Vec<u8> {
    let mut raw = raw.to_vec();
    while !(raw.len() + 4).is_multiple_of(8) {
        raw.push(0);
    }
    let mut r = Vec::new();
    r.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
    r.extend_from_slice(&0u16.to_ne_bytes());
    r.extend_from_slice(&0u16.to_ne_bytes()); // size, patched below
    r.extend_from_slice(&pid.to_ne_bytes());
    r.extend_from_slice(&tid.to_ne_bytes());
    r.extend_from_slice(&time.to_ne_bytes());
    r.extend_from_slice(&cpu.to_ne_bytes());
    r.extend_from_slice(&0u32.to_ne_bytes());
    r.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
    r.extend_from_slice(&raw);
    let size = r.len() as u16;
    r[6..8].copy_from_slice(&size.to_ne_bytes());
    r
}

fn lost_record(n: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&PERF_RECORD_LOST.to_ne_bytes());
    r.extend_from_slice(&0u16.to_ne_bytes());
    r.extend_from_slice(&24u16.to_ne_bytes());
    r.extend_from_slice(&7u64.to_ne_bytes()); // id
    r.extend_from_slice(&n.to_ne_bytes());
    r
}

#[test]
fn decodes_a_hand_built_switch_on_this_kernel() {
    // Offsets written out by hand from the 6.18 format, not through `raw_for`.
    let f = formats("linux-6.18");
    let d = decoder(&f);
    let mut raw = vec![0u8; 64];
    raw[0..2].copy_from_slice(&372u16.to_ne_bytes());
    raw[4..8].copy_from_slice(&1234i32.to_ne_bytes()); // common_pid
    raw[8..12].copy_from_slice(b"work");
    raw[24..28].copy_from_slice(&1234i32.to_ne_bytes());
    raw[32..40].copy_from_slice(&1i64.to_ne_bytes()); // S
    raw[40..44].copy_from_slice(b"idle");
    raw[56..60].copy_from_slice(&0i32.to_ne_bytes());
    let rec = sample_record(1200, 1234, 5_000_000_123, 1, &raw);
    assert_eq!(rec.len(), 8 + 28 + 68);
    let mut lost = 0;
    let ev = d.decode_record(&rec, &mut lost).unwrap().unwrap();
    assert_eq!(
        ev,
        SchedEvent::Switch {
            ts_ns: 5_000_000_123,
            cpu: 1,
            prev_tid: 1234,
            prev_state: PrevState::Sleeping,
            next_tid: 0,
        }
    );
    assert_eq!(ev.ts_ns(), 5_000_000_123);
}

#[test]
fn decodes_every_kind_on_both_layouts() {
    for dir in ["linux-6.18", "old-i386"] {
        let f = formats(dir);
        let d = decoder(&f);
        let preempted = d.state_decoder().preempt_bit() as i64;
        let cases = [
            (
                raw_for(
                    &f[0],
                    &[
                        ("prev_pid", 10),
                        ("prev_state", preempted),
                        ("next_pid", 11),
                    ],
                ),
                SchedEvent::Switch {
                    ts_ns: 100,
                    cpu: 3,
                    prev_tid: 10,
                    prev_state: PrevState::Runnable,
                    next_tid: 11,
                },
            ),
            (
                raw_for(
                    &f[0],
                    &[("prev_pid", 10), ("prev_state", 2), ("next_pid", 11)],
                ),
                SchedEvent::Switch {
                    ts_ns: 100,
                    cpu: 3,
                    prev_tid: 10,
                    prev_state: PrevState::DiskSleep,
                    next_tid: 11,
                },
            ),
            (
                raw_for(&f[1], &[("pid", 20), ("target_cpu", 1)]),
                SchedEvent::Wakeup {
                    ts_ns: 100,
                    tid: 20,
                    target_cpu: 1,
                    waker_tid: 99,
                    new_task: false,
                },
            ),
            (
                raw_for(&f[2], &[("pid", 21), ("target_cpu", 0)]),
                SchedEvent::Wakeup {
                    ts_ns: 100,
                    tid: 21,
                    target_cpu: 0,
                    waker_tid: 99,
                    new_task: true,
                },
            ),
            (
                raw_for(&f[3], &[("parent_pid", 30), ("child_pid", 31)]),
                SchedEvent::Fork {
                    ts_ns: 100,
                    parent_tid: 30,
                    child_tid: 31,
                },
            ),
            (
                raw_for(&f[4], &[("pid", 40)]),
                SchedEvent::Exit {
                    ts_ns: 100,
                    tid: 40,
                },
            ),
        ];
        for (raw, want) in cases {
            let rec = sample_record(98, 99, 100, 3, &raw);
            let mut lost = 0;
            assert_eq!(d.decode_record(&rec, &mut lost), Ok(Some(want)), "{dir}");
        }
        // The layouts really differ: 6.18 raw data read with the old decoder is garbage or
        // refused, never a panic.
        let other = decoder(&formats(if dir == "old-i386" {
            "linux-6.18"
        } else {
            "old-i386"
        }));
        let raw = raw_for(&f[0], &[("prev_pid", 10), ("next_pid", 11)]);
        let _ = other.decode(&parse_sample(&sample_record(1, 1, 1, 0, &raw)[8..]).unwrap());
    }
}

#[test]
fn sched_waking_fills_the_wakeup_slot() {
    let f = formats("linux-6.18");
    let waking = TracepointFormat::parse(fixture!("linux-6.18", "sched_waking")).unwrap();
    assert_eq!(waking.id, 375);
    let d = SchedDecoder::new(SchedFormats {
        switch: &f[0],
        wakeup: &waking,
        wakeup_new: &f[2],
        fork: &f[3],
        exit: &f[4],
    })
    .unwrap();
    let rec = sample_record(
        7,
        8,
        9,
        1,
        &raw_for(&waking, &[("pid", 55), ("target_cpu", 0)]),
    );
    let mut lost = 0;
    assert_eq!(
        d.decode_record(&rec, &mut lost),
        Ok(Some(SchedEvent::Wakeup {
            ts_ns: 9,
            tid: 55,
            target_cpu: 0,
            waker_tid: 8,
            new_task: false,
        }))
    );
    // sched_wakeup's records are not this decoder's.
    let rec = sample_record(7, 8, 9, 1, &raw_for(&f[1], &[("pid", 55)]));
    assert!(d.decode_record(&rec, &mut lost).is_err());
}

#[test]
fn lost_and_other_records() {
    let d = decoder(&formats("linux-6.18"));
    let mut lost = 0;
    assert_eq!(d.decode_record(&lost_record(17), &mut lost), Ok(None));
    assert_eq!(d.decode_record(&lost_record(5), &mut lost), Ok(None));
    assert_eq!(lost, 22);
    let mut ls = Vec::new();
    ls.extend_from_slice(&PERF_RECORD_LOST_SAMPLES.to_ne_bytes());
    ls.extend_from_slice(&[0, 0, 16, 0]);
    ls.extend_from_slice(&3u64.to_ne_bytes());
    assert_eq!(parse_record(&ls), Ok(RingRecord::Lost(3)));
    let mut throttle = lost_record(0);
    throttle[0..4].copy_from_slice(&5u32.to_ne_bytes());
    assert_eq!(parse_record(&throttle), Ok(RingRecord::Other(5)));
    assert!(parse_record(&lost_record(1)[..20]).is_err());
}

#[test]
fn truncated_and_hostile_records_are_errors_not_panics() {
    let f = formats("linux-6.18");
    let d = decoder(&f);
    let good = sample_record(
        1,
        2,
        3,
        0,
        &raw_for(
            &f[0],
            &[("prev_pid", 10), ("prev_state", 1), ("next_pid", 11)],
        ),
    );
    let mut lost = 0;
    assert!(d.decode_record(&good, &mut lost).unwrap().is_some());
    // Every truncation that cuts into the fields read is refused.
    for n in 0..good.len() {
        let r = d.decode_record(&good[..n], &mut lost);
        if n < 8 + 28 + 60 {
            assert!(r.is_err(), "accepted a record cut to {n} bytes");
        }
    }
    // A raw size larger than the record.
    let mut big = good.clone();
    big[8 + 24..8 + 28].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert!(d
        .decode_record(&big, &mut lost)
        .unwrap_err()
        .0
        .contains("exceeds"));
    big[8 + 24..8 + 28].copy_from_slice(&200u32.to_ne_bytes());
    assert!(d.decode_record(&big, &mut lost).is_err());
    // A raw size too small for the fields the format places.
    let mut small = good.clone();
    small[8 + 24..8 + 28].copy_from_slice(&30u32.to_ne_bytes());
    assert!(d
        .decode_record(&small, &mut lost)
        .unwrap_err()
        .0
        .contains("outside"));
    // Unknown tracepoint.
    let mut unknown = good.clone();
    unknown[8 + 28..8 + 30].copy_from_slice(&9999u16.to_ne_bytes());
    assert!(d
        .decode_record(&unknown, &mut lost)
        .unwrap_err()
        .0
        .contains("9999"));
    // Negative pid.
    let neg = sample_record(
        1,
        2,
        3,
        0,
        &raw_for(&f[0], &[("prev_pid", -5), ("next_pid", 1)]),
    );
    assert!(d
        .decode_record(&neg, &mut lost)
        .unwrap_err()
        .0
        .contains("-5"));
    // Random bit flips and garbage: no panic.
    let mut rng = Rng(42);
    for _ in 0..20_000 {
        let mut r = good.clone();
        for _ in 0..(rng.next() % 4 + 1) {
            let i = (rng.next() as usize) % r.len();
            r[i] ^= 1 << (rng.next() % 8);
        }
        let _ = d.decode_record(&r, &mut lost);
        let n = (rng.next() % 80) as usize;
        let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        let _ = d.decode_record(&junk, &mut lost);
    }
}

#[test]
fn field_reads_are_bounded() {
    let raw = [1u8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(field(0, 4, true).read_int(&raw), Some(1));
    assert_eq!(field(4, 4, true).read_int(&raw), Some(-1));
    assert_eq!(field(4, 4, false).read_int(&raw), Some(0xffff_ffff));
    assert_eq!(
        field(0, 8, false).read_int(&raw),
        Some(0xffff_ffff_0000_0001)
    );
    assert_eq!(field(7, 1, true).read_int(&raw), Some(-1));
    assert_eq!(field(6, 2, false).read_int(&raw), Some(0xffff));
    assert_eq!(field(5, 4, true).read_int(&raw), None);
    assert_eq!(field(0, 3, true).read_int(&raw), None);
    assert_eq!(field(usize::MAX, 4, true).read_int(&raw), None);
}

// ---- the ring -----------------------------------------------------------------------------

/// Writes records into an anonymous ring as the kernel would and checks that `drain` frames
/// them across the wrap, releases the tail, and survives a corrupt header.
#[test]
fn ring_frames_records_across_the_wrap() {
    let f = formats("linux-6.18");
    let d = decoder(&f);
    let mut ring = Ring::anonymous(1, 4096).unwrap();
    assert_eq!(ring.capacity(), 4096);
    let mut scratch = Vec::new();
    let mut head = 0u64;
    let mut want = Vec::new();
    let mut got = Vec::new();
    // 200 switch records of 104 bytes: the ring wraps five times, records straddle the end.
    for round in 0..20u64 {
        for i in 0..10u64 {
            let n = round * 10 + i;
            let rec = sample_record(
                1,
                2,
                1000 + n,
                0,
                &raw_for(
                    &f[0],
                    &[("prev_pid", n as i64), ("prev_state", 1), ("next_pid", 0)],
                ),
            );
            ring.kernel_write(head, &rec, head + rec.len() as u64);
            head += rec.len() as u64;
            want.push(n as u32);
        }
        // A LOST record too, as the kernel writes one after an overflow.
        let lr = lost_record(round);
        ring.kernel_write(head, &lr, head + lr.len() as u64);
        head += lr.len() as u64;
        let mut lost = 0;
        let broken = ring.drain(&mut scratch, |rec| {
            if let Some(SchedEvent::Switch { prev_tid, .. }) =
                d.decode_record(rec, &mut lost).unwrap()
            {
                got.push(prev_tid);
            }
        });
        assert_eq!(broken, 0);
        assert_eq!(lost, round);
        assert_eq!(ring.tail(), head, "tail released up to head");
        assert_eq!(ring.pending(), 0);
    }
    assert!(head > 4 * 4096);
    assert_eq!(got, want);

    // A header with size 0 would loop forever; one past the head would read stale bytes.
    for bad_size in [0u16, 4, 4000] {
        let mut rec = sample_record(1, 2, 3, 0, &raw_for(&f[0], &[]));
        rec[6..8].copy_from_slice(&bad_size.to_ne_bytes());
        ring.kernel_write(head, &rec, head + rec.len() as u64);
        head += rec.len() as u64;
        let mut calls = 0;
        assert_eq!(ring.drain(&mut scratch, |_| calls += 1), 1);
        assert_eq!(calls, 0);
        assert_eq!(ring.tail(), head, "skipped to head");
    }
    // A head more than a ring ahead of the tail is not trusted.
    ring.kernel_write(head, &[], head + 10_000);
    assert_eq!(
        ring.drain(&mut scratch, |_| panic!("read past the ring")),
        1
    );
    // A partial header at the end.
    let t = ring.tail();
    ring.kernel_write(t, &[0; 4], t + 4);
    assert_eq!(
        ring.drain(&mut scratch, |_| panic!("partial header framed")),
        1
    );
}

// ---- mounts -----------------------------------------------------------------------------------

#[test]
fn finds_tracefs_mounts() {
    let mounts = "sysfs /sys sysfs rw 0 0\n\
                  nodev /sys/kernel/tracing tracefs rw,relatime 0 0\n\
                  tracefs /mnt/my\\040trace tracefs rw 0 0\n\
                  debugfs /sys/kernel/debug debugfs rw 0 0\n\
                  x /bad\\9 tracefs rw 0 0\n\
                  short\n";
    assert_eq!(
        tracefs_mounts(mounts),
        vec![
            PathBuf::from("/sys/kernel/tracing"),
            PathBuf::from("/mnt/my trace"),
            PathBuf::from("/bad\\9"),
        ]
    );
    assert!(tracefs_mounts("tracefs /é\\3 tracefs").len() == 1);
}

#[test]
fn tracer_can_move_to_a_drain_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<SchedTracer>();
}

#[test]
fn unavailable_reads_as_one_line() {
    let u = unavailable("perf_event_open(sched:sched_switch) on CPU 0: EACCES: …");
    assert_eq!(
        u.to_string(),
        "sched tracepoints unavailable: perf_event_open(sched:sched_switch) on CPU 0: EACCES: …"
    );
    let e = explain_open(
        &io::Error::from_raw_os_error(libc::EMFILE),
        "sched_wakeup",
        1,
    );
    assert!(
        e.starts_with("perf_event_open(sched:sched_wakeup) on CPU 1: EMFILE"),
        "{e}"
    );
    assert!(SchedTracer::open(3)
        .unwrap_err()
        .why
        .contains("power of two"));
    assert!(SchedTracer::open(0).is_err());
}
