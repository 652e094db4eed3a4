//! `/proc/PID/maps` parsing and merging, on constructed snapshots.

use std::path::Path;
use symbolize::{Backing, Maps, Perms};

const SNAPSHOT: &str = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:00 1234                       /opt/my app/bin/server
55d0c0a01000-55d0c0a03000 r-xp 00001000 fe:00 1234                       /opt/my app/bin/server
55d0c0a03000-55d0c0a04000 rw-p 00003000 fe:00 1234                       /opt/my app/bin/server
55d0c0a04000-55d0c0b04000 rw-p 00000000 00:00 0 
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000001000 r-xp 00000000 08:01 99                         /tmp/libgone.so (deleted)
7f0000001000-7f0000002000 rw-s 00000000 00:05 77                         /dev/zero (deleted)
7f0000002000-7f0000003000 rw-p 00000000 00:00 0                          [anon:arena]
7f0000003000-7f0000004000 r--p 00000000 08:01 100                        /tmp/new\\012line.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd001f0000-7ffd001f2000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

#[test]
fn parses_every_kind_of_line() {
    let maps = Maps::parse(SNAPSHOT).unwrap();
    let e = maps.entries();
    assert_eq!(e.len(), 12);

    assert_eq!(e[1].start, 0x55d0c0a01000);
    assert_eq!(e[1].end, 0x55d0c0a03000);
    assert_eq!(
        e[1].perms,
        Perms {
            read: true,
            write: false,
            execute: true,
            shared: false
        }
    );
    assert_eq!(e[1].perms.to_string(), "r-xp");
    assert_eq!(e[1].offset, 0x1000);
    assert_eq!(e[1].dev, (0xfe, 0));
    assert_eq!(e[1].inode, 1234);
    assert_eq!(e[1].path(), Some(Path::new("/opt/my app/bin/server")));
    assert!(!e[1].deleted());
    assert!(e[1].is_module());

    assert_eq!(e[3].backing, Backing::Anonymous);
    assert_eq!(e[4].backing, Backing::Special("[heap]".into()));

    assert_eq!(e[5].path(), Some(Path::new("/tmp/libgone.so")));
    assert!(e[5].deleted());
    assert!(e[5].is_module());

    assert!(e[6].perms.shared);
    assert!(!e[6].is_module(), "shared memory is not a module");
    assert_eq!(e[7].backing, Backing::Special("[anon:arena]".into()));
    assert_eq!(e[8].path(), Some(Path::new("/tmp/new\nline.so")));
    assert_eq!(e[10].short_name(), "[vdso]");
    assert_eq!(e[11].end, 0xffffffffff601000);
}

#[test]
fn module_of_gives_path_and_file_offset() {
    let maps = Maps::parse(SNAPSHOT).unwrap();
    let m = maps.module_of(0x55d0c0a01234).unwrap();
    assert_eq!(m.path(), Path::new("/opt/my app/bin/server"));
    assert_eq!(m.file_offset, 0x1234);
    assert_eq!(m.entry.start, 0x55d0c0a01000);

    // Last byte of a mapping, first byte past it, anonymous, special, unmapped.
    assert_eq!(maps.module_of(0x55d0c0a02fff).unwrap().file_offset, 0x2fff);
    assert_eq!(maps.module_of(0x55d0c0a03000).unwrap().file_offset, 0x3000);
    assert!(maps.module_of(0x55d0c0a04000).is_none());
    assert!(maps.find(0x55d0c0a04000).is_some());
    assert!(maps.module_of(0x55d0c1000010).is_none());
    assert!(maps.find(0x1000).is_none());
    assert!(maps.find(u64::MAX).is_none());
}

#[test]
fn strict_parse_reports_the_bad_line() {
    let text = format!("{SNAPSHOT}zzzz-1000 r-xp 00000000 00:00 0\n");
    let err = Maps::parse(&text).unwrap_err();
    assert_eq!(err.line, 13);
    assert!(err.to_string().contains("start address"), "{err}");

    for bad in [
        "1000-2000 r-xq 00000000 00:00 0",
        "1000-2000 r-x 00000000 00:00 0",
        "2000-1000 r-xp 00000000 00:00 0",
        "1000-1000 r-xp 00000000 00:00 0",
        "1000 r-xp 00000000 00:00 0",
        "1000-2000 r-xp 00000000 0000 0",
        "1000-2000 r-xp 00000000 00:00 x",
        "1000-2000 r-xp 00000000 00:00",
        "1000-2000 r-xp zz 00:00 0",
        "1000-2000 r-xp 00000000 fffffffff:00 0",
        "10000000000000000-10000000000000001 r-xp 00000000 00:00 0",
    ] {
        assert!(Maps::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn lossy_parse_keeps_what_is_readable() {
    // A snapshot cut short in the middle of a line, with a blank line and a CRLF.
    let text =
        "1000-2000 r-xp 00000000 08:01 5 /bin/a\r\n\n3000-4000 rw-p 00000000 00:00 0\n5000-60";
    let (maps, errors) = Maps::parse_lossy(text);
    assert_eq!(maps.entries().len(), 2);
    assert_eq!(maps.entries()[0].path(), Some(Path::new("/bin/a")));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, 4);

    // Binary garbage never panics.
    let junk: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let _ = Maps::parse_lossy(&junk);
}

#[test]
fn overlapping_lines_of_one_snapshot_are_reported() {
    let text = "1000-3000 r-xp 00000000 08:01 5 /bin/a\n2000-4000 r-xp 00000000 08:01 6 /bin/b\n";
    let (maps, errors) = Maps::parse_lossy(text);
    assert_eq!(maps.entries().len(), 1);
    assert_eq!(errors.len(), 1);
    assert!(Maps::parse(text).is_err());
}

#[test]
fn later_snapshots_win_where_they_overlap() {
    let first = Maps::parse(
        "1000-5000 r-xp 00010000 08:01 5 /lib/old.so\n\
         9000-a000 rw-p 00000000 00:00 0\n\
         10000-11000 r-xp 00000000 08:01 7 /lib/kept.so\n",
    )
    .unwrap();
    let later = Maps::parse(
        "2000-3000 r-xp 00000000 08:01 6 /lib/new.so\n\
         8000-9800 r--p 00000000 08:01 8 /lib/other.so\n",
    )
    .unwrap();
    let merged = Maps::from_snapshots([&first, &later]);
    let spans: Vec<(u64, u64, u64, String)> = merged
        .entries()
        .iter()
        .map(|e| (e.start, e.end, e.offset, e.short_name()))
        .collect();
    assert_eq!(
        spans,
        vec![
            (0x1000, 0x2000, 0x10000, "old.so".into()),
            (0x2000, 0x3000, 0x0, "new.so".into()),
            // The rest of old.so keeps its file offsets.
            (0x3000, 0x5000, 0x12000, "old.so".into()),
            (0x8000, 0x9800, 0x0, "other.so".into()),
            (0x9800, 0xa000, 0x0, "[anon]".into()),
            (0x10000, 0x11000, 0x0, "kept.so".into()),
        ]
    );
    assert_eq!(merged.module_of(0x3010).unwrap().file_offset, 0x12010);
    assert_eq!(
        merged.module_of(0x2010).unwrap().path(),
        Path::new("/lib/new.so")
    );

    // Merging the same snapshot again changes nothing; merging nothing changes nothing.
    let mut again = merged.clone();
    again.merge(&later);
    assert_eq!(again, merged);
    again.merge(&Maps::new());
    assert_eq!(again, merged);
}

#[test]
fn a_later_mapping_spanning_several_earlier_ones_replaces_them() {
    let first = Maps::parse(
        "1000-2000 r-xp 00000000 08:01 5 /a\n\
         2000-3000 r-xp 00000000 08:01 5 /b\n\
         3000-4000 r-xp 00000000 08:01 5 /c\n",
    )
    .unwrap();
    let later = Maps::parse("1800-3800 rw-p 00000000 00:00 0 [heap]\n").unwrap();
    let mut m = first;
    m.merge(&later);
    let spans: Vec<(u64, u64)> = m.entries().iter().map(|e| (e.start, e.end)).collect();
    assert_eq!(
        spans,
        vec![(0x1000, 0x1800), (0x1800, 0x3800), (0x3800, 0x4000)]
    );
    assert_eq!(m.entries()[2].offset, 0x800);
}
