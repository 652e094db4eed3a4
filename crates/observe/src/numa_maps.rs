//! Parser and per-node summary of `/proc/PID/numa_maps`: where a process's resident memory
//! lives, per NUMA node and per kind, like `numastat -p`.
//!
//! A line is `START POLICY [file=PATH] [heap|stack] [huge] [anon=N] [dirty=N] [mapped=N]
//! [mapmax=N] [swapcache=N] [active=N] [writeback=N] [N<node>=PAGES]... [kernelpagesize_kB=K]`.
//! A mapping with nothing resident has no `N<node>=` at all.
//!
//! # Kinds
//!
//! Each mapping is given one kind, first match wins:
//! 1. **heap**: marked `heap` (the `brk` area; big `malloc` blocks are `mmap`ed and count as anon).
//! 2. **stack**: marked `stack`, `stack:TID` or `[stack:TID]` (kernels before 4.5 also marked
//!    thread stacks; newer ones only the main thread's, so thread stacks count as anon).
//! 3. **shared**: created `MAP_SHARED` — shmem, SysV shm, memfd, `MAP_SHARED` files and
//!    shared anonymous memory — whose pages other processes write and may have placed.
//!    `numa_maps` has no shared flag, so the bit comes from `/proc/PID/maps` (`s` vs `p`),
//!    joined by start address. When `maps` lacks the mapping (it changed between the two
//!    reads) the name decides: `/dev/shm/…`, `/SYSV…`, `/memfd:…`, `/dev/zero`.
//!    `mapmax` is *not* used: it counts the processes mapping the busiest page, so it is above
//!    1 for every shared library's text (private, read-only page cache) and for anonymous
//!    pages after `fork()` until they are written — "pages shared right now", not shared memory.
//! 4. **file**: has `file=` (executables, libraries, private file mappings, including their
//!    copied-on-write pages, which `numa_maps` does not split per node).
//! 5. **anon**: everything else, and the anonymous pseudo-files `/anon_hugepage` and
//!    `/dev/zero` when mapped private.
//!
//! Hugetlb mappings (`huge`) keep their kind and are also summed as `hugetlb_kib`, an "of
//! which" figure. Sizes are pages × `kernelpagesize_kB` (transparent huge pages are counted in
//! base pages by the kernel, hugetlb pages in huge pages; both come out right).

use crate::error::ParseError;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One line of `numa_maps`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaMapping {
    pub start: u64,
    /// The memory policy as printed: `default`, `bind:0-1`, `interleave:0-1`, `prefer:1`,
    /// `prefer (many):0-1`, `weighted interleave:0-3`, `local`, with `=static`-style flags.
    pub policy: String,
    /// The mapped file, with the kernel's `\ooo` escapes (space, tab, newline, `=`) decoded;
    /// a deleted file ends in ` (deleted)`.
    pub file: Option<String>,
    pub heap: bool,
    pub stack: bool,
    /// The thread whose stack this is, on kernels that said (`stack:TID`).
    pub stack_tid: Option<u32>,
    /// A hugetlbfs mapping.
    pub huge: bool,
    pub anon: Option<u64>,
    pub dirty: Option<u64>,
    pub mapped: Option<u64>,
    pub mapmax: Option<u64>,
    pub swapcache: Option<u64>,
    pub active: Option<u64>,
    pub writeback: Option<u64>,
    /// Resident pages per node, `(node, pages)` in the order printed (ascending node).
    pub pages_per_node: Vec<(u32, u64)>,
    /// `kernelpagesize_kB`; absent on kernels before 2.6.37.
    pub page_size_kib: Option<u64>,
}

/// What a mapping holds; see the module documentation for the rule.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    Heap,
    Stack,
    Anon,
    File,
    Shared,
}

impl MemoryKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [MemoryKind; 5] = [
        MemoryKind::Heap,
        MemoryKind::Stack,
        MemoryKind::Anon,
        MemoryKind::File,
        MemoryKind::Shared,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Heap => "heap",
            MemoryKind::Stack => "stack",
            MemoryKind::Anon => "anon",
            MemoryKind::File => "file",
            MemoryKind::Shared => "shared",
        }
    }
}

/// Parses one line.
pub fn parse_line(line: &str) -> Result<NumaMapping, ParseError> {
    let mut tokens = line.split_ascii_whitespace().peekable();
    let start = tokens
        .next()
        .and_then(|t| u64::from_str_radix(t, 16).ok())
        .ok_or_else(|| ParseError::new("no start address"))?;
    let mut policy = tokens
        .next()
        .ok_or_else(|| ParseError::new("no memory policy"))?
        .to_string();
    // Two policy names contain a space: `prefer (many)` and `weighted interleave`.
    if let Some(second) = tokens.peek() {
        if (policy == "prefer" && second.starts_with("(many)"))
            || (policy == "weighted" && second.starts_with("interleave"))
        {
            policy.push(' ');
            policy.push_str(second);
            tokens.next();
        }
    }

    let mut m = NumaMapping {
        start,
        policy,
        ..NumaMapping::default()
    };
    // Set while the previous token was the file name, so that a name printed with raw spaces
    // (not by any kernel we know of, which escape them as `\040`) still reads whole.
    let mut in_file_name = false;
    for token in tokens {
        let was_in_file_name = std::mem::take(&mut in_file_name);
        if let Some(path) = token.strip_prefix("file=") {
            m.file = Some(unescape_octal(path));
            in_file_name = true;
            continue;
        }
        match token {
            "heap" => m.heap = true,
            "stack" => m.stack = true,
            "huge" => m.huge = true,
            _ => {
                if let Some(tid) = stack_tid(token) {
                    m.stack = true;
                    m.stack_tid = Some(tid);
                } else if let Some((key, value)) = token.split_once('=') {
                    parse_counter(&mut m, key, value)?;
                } else if was_in_file_name {
                    let file = m.file.get_or_insert_with(String::new);
                    file.push(' ');
                    file.push_str(&unescape_octal(token));
                    in_file_name = true;
                }
                // Any other bare word is a flag from a newer kernel: ignored.
            }
        }
    }
    Ok(m)
}

/// `stack:123` (numa_maps before 4.5) or `[stack:123]` (maps of the same era).
fn stack_tid(token: &str) -> Option<u32> {
    let inner = token
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(token);
    inner.strip_prefix("stack:")?.parse().ok()
}

fn parse_counter(m: &mut NumaMapping, key: &str, value: &str) -> Result<(), ParseError> {
    let number = || {
        value
            .parse::<u64>()
            .map_err(|_| ParseError::new(format!("`{key}={value}`: not a number")))
    };
    let slot = match key {
        "anon" => &mut m.anon,
        "dirty" => &mut m.dirty,
        "mapped" => &mut m.mapped,
        "mapmax" => &mut m.mapmax,
        "swapcache" => &mut m.swapcache,
        "active" => &mut m.active,
        "writeback" => &mut m.writeback,
        "kernelpagesize_kB" => &mut m.page_size_kib,
        _ => {
            if let Some(node) = key.strip_prefix('N').and_then(|n| n.parse::<u32>().ok()) {
                m.pages_per_node.push((node, number()?));
            }
            // Other `key=value` tokens come from newer kernels: ignored.
            return Ok(());
        }
    };
    *slot = Some(number()?);
    Ok(())
}

/// Decodes the `\ooo` escapes the kernel writes for space, tab, newline and `=` in paths.
fn unescape_octal(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| {
            bytes[i] == b'\\' && d[0] <= b'3' && d.iter().all(|c| (b'0'..=b'7').contains(c))
        });
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a whole `numa_maps` file; the error names the first bad line.
pub fn parse(text: &str) -> Result<Vec<NumaMapping>, ParseError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_line(l).map_err(|e| ParseError::new(format!("line {}: {e}", i + 1))))
        .collect()
}

/// The kind of a mapping. `shared` is the `MAP_SHARED` bit from `/proc/PID/maps`, `None` when
/// `maps` did not have the mapping.
pub fn classify(m: &NumaMapping, shared: Option<bool>) -> MemoryKind {
    if m.heap {
        return MemoryKind::Heap;
    }
    if m.stack {
        return MemoryKind::Stack;
    }
    let file = m.file.as_deref();
    let shared = shared.unwrap_or_else(|| file.is_some_and(looks_shared));
    if shared {
        MemoryKind::Shared
    } else if file.is_some_and(|f| !is_anonymous_pseudo_file(f)) {
        MemoryKind::File
    } else {
        MemoryKind::Anon
    }
}

/// Names of objects that are shared memory whenever they are mapped (the guess used when
/// `maps` could not say).
fn looks_shared(path: &str) -> bool {
    ["/dev/shm/", "/SYSV", "/memfd:"]
        .iter()
        .any(|p| path.starts_with(p))
        || path == "/dev/zero (deleted)"
}

/// Files the kernel names for anonymous memory: hugetlb `MAP_ANONYMOUS` and shared anonymous.
fn is_anonymous_pseudo_file(path: &str) -> bool {
    let name = path.strip_suffix(" (deleted)").unwrap_or(path);
    name == "/anon_hugepage" || name == "/dev/zero"
}

/// Resident KiB by kind; `hugetlb_kib` is included in the kinds, `total_kib` is their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MemoryTotals {
    pub heap_kib: u64,
    pub stack_kib: u64,
    pub anon_kib: u64,
    pub file_kib: u64,
    pub shared_kib: u64,
    /// Of the above, KiB in hugetlb pages.
    pub hugetlb_kib: u64,
    pub total_kib: u64,
}

impl MemoryTotals {
    pub fn get(&self, kind: MemoryKind) -> u64 {
        match kind {
            MemoryKind::Heap => self.heap_kib,
            MemoryKind::Stack => self.stack_kib,
            MemoryKind::Anon => self.anon_kib,
            MemoryKind::File => self.file_kib,
            MemoryKind::Shared => self.shared_kib,
        }
    }

    fn add(&mut self, kind: MemoryKind, kib: u64, hugetlb: bool) {
        let slot = match kind {
            MemoryKind::Heap => &mut self.heap_kib,
            MemoryKind::Stack => &mut self.stack_kib,
            MemoryKind::Anon => &mut self.anon_kib,
            MemoryKind::File => &mut self.file_kib,
            MemoryKind::Shared => &mut self.shared_kib,
        };
        *slot = slot.saturating_add(kib);
        if hugetlb {
            self.hugetlb_kib = self.hugetlb_kib.saturating_add(kib);
        }
        self.total_kib = self.total_kib.saturating_add(kib);
    }
}

/// One node's column of the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct NodeMemory {
    pub node: u32,
    #[serde(flatten)]
    pub memory: MemoryTotals,
}

/// A process's resident memory per node and kind: what `numastat -p PID` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct NumaMemory {
    /// Nodes that hold at least one page of the process, ascending.
    pub nodes: Vec<NodeMemory>,
    /// All nodes together.
    pub total: MemoryTotals,
    /// Mappings in `numa_maps`, and how many of them had resident pages.
    pub mappings: usize,
    pub resident_mappings: usize,
}

impl NumaMemory {
    /// The totals of `node`, or `None` when the process has nothing there.
    pub fn node(&self, node: u32) -> Option<&MemoryTotals> {
        self.nodes
            .iter()
            .find(|n| n.node == node)
            .map(|n| &n.memory)
    }
}

/// Sums the mappings per node and kind. `shared_by_start` is the `MAP_SHARED` bit per start
/// address from `/proc/PID/maps` (empty when unavailable); `base_page_kib` is the size used
/// when a line lacks `kernelpagesize_kB`.
pub fn summarize(
    mappings: &[NumaMapping],
    shared_by_start: &HashMap<u64, bool>,
    base_page_kib: u64,
) -> NumaMemory {
    let mut per_node: BTreeMap<u32, MemoryTotals> = BTreeMap::new();
    let mut total = MemoryTotals::default();
    let mut resident_mappings = 0;
    for m in mappings {
        if m.pages_per_node.iter().any(|&(_, pages)| pages > 0) {
            resident_mappings += 1;
        }
        let kind = classify(m, shared_by_start.get(&m.start).copied());
        let page_kib = m.page_size_kib.unwrap_or(base_page_kib);
        for &(node, pages) in &m.pages_per_node {
            let kib = pages.saturating_mul(page_kib);
            per_node.entry(node).or_default().add(kind, kib, m.huge);
            total.add(kind, kib, m.huge);
        }
    }
    NumaMemory {
        nodes: per_node
            .into_iter()
            .map(|(node, memory)| NodeMemory { node, memory })
            .collect(),
        total,
        mappings: mappings.len(),
        resident_mappings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from a process on a two-node machine (Linux 6.x), with hand-made lines for
    /// the cases a small machine does not show.
    const SAMPLE: &str = "\
55abffd61000 default file=/usr/bin/python3.11 mapped=2 N0=2 kernelpagesize_kB=4
55abffd6c000 default file=/usr/bin/python3.11 anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
55ac00316000 default heap anon=300 dirty=300 active=0 N0=200 N1=100 kernelpagesize_kB=4
7f0000000000 interleave:0-1 anon=512 dirty=512 N0=256 N1=256 kernelpagesize_kB=4
7f1000000000 default file=/dev/shm/ring mapped=8 mapmax=3 N1=8 kernelpagesize_kB=4
7f2000000000 bind:1 file=/anon_hugepage\\040(deleted) huge anon=2 dirty=2 N1=2 kernelpagesize_kB=2048
7faa92c2b000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=38 mapmax=40 N0=38 kernelpagesize_kB=4
7faa92e18000 default
7faa92e1c000 prefer:1 file=/tmp/my\\040data\\040file.bin
7ffd1c000000 default stack anon=33 dirty=33 N0=33 kernelpagesize_kB=4
";

    #[test]
    fn parses_every_field() {
        let maps = parse(SAMPLE).unwrap();
        assert_eq!(maps.len(), 10);
        let heap = &maps[2];
        assert_eq!(heap.start, 0x55ac00316000);
        assert!(heap.heap && !heap.stack && heap.file.is_none());
        assert_eq!(heap.anon, Some(300));
        assert_eq!(heap.active, Some(0));
        assert_eq!(heap.pages_per_node, vec![(0, 200), (1, 100)]);
        assert_eq!(heap.page_size_kib, Some(4));
        assert_eq!(maps[3].policy, "interleave:0-1");
        assert_eq!(maps[4].mapmax, Some(3));
        let huge = &maps[5];
        assert!(huge.huge);
        assert_eq!(huge.policy, "bind:1");
        assert_eq!(huge.file.as_deref(), Some("/anon_hugepage (deleted)"));
        assert_eq!(huge.page_size_kib, Some(2048));
    }

    #[test]
    fn line_with_nothing_resident() {
        let m = parse_line("7faa92e18000 default").unwrap();
        assert!(m.pages_per_node.is_empty());
        assert_eq!(m.page_size_kib, None);
        let sum = summarize(&[m], &HashMap::new(), 4);
        assert_eq!(sum.total, MemoryTotals::default());
        assert_eq!((sum.mappings, sum.resident_mappings), (1, 0));
        assert!(sum.nodes.is_empty());
    }

    #[test]
    fn file_names_with_spaces_escaped_or_raw() {
        let m =
            parse_line("7f00 prefer:1 file=/tmp/my\\040data\\075x\\012.bin mapped=1 N1=1").unwrap();
        assert_eq!(m.file.as_deref(), Some("/tmp/my data=x\n.bin"));
        assert_eq!(m.pages_per_node, vec![(1, 1)]);
        // A name printed with raw spaces still reads whole.
        let m = parse_line("7f00 default file=/tmp/a b (deleted) mapped=3 N0=3").unwrap();
        assert_eq!(m.file.as_deref(), Some("/tmp/a b (deleted)"));
        assert_eq!(m.mapped, Some(3));
        // Backslashes that are not escapes stay.
        let m = parse_line("7f00 default file=/tmp/a\\b\\9").unwrap();
        assert_eq!(m.file.as_deref(), Some("/tmp/a\\b\\9"));
    }

    #[test]
    fn policies_with_spaces() {
        let m = parse_line("7f00 prefer (many):0-1 anon=1 N0=1").unwrap();
        assert_eq!(m.policy, "prefer (many):0-1");
        assert_eq!(m.anon, Some(1));
        let m = parse_line("7f00 weighted interleave:0-3 N2=5 N3=5").unwrap();
        assert_eq!(m.policy, "weighted interleave:0-3");
        assert_eq!(m.pages_per_node, vec![(2, 5), (3, 5)]);
        let m = parse_line("7f00 bind=static:0-1 N0=1").unwrap();
        assert_eq!(m.policy, "bind=static:0-1");
        let m = parse_line("7f00 local N0=1").unwrap();
        assert_eq!(m.policy, "local");
    }

    #[test]
    fn old_kernel_stack_forms() {
        let m =
            parse_line("7f3c default stack:4242 anon=3 dirty=3 N0=3 kernelpagesize_kB=4").unwrap();
        assert!(m.stack);
        assert_eq!(m.stack_tid, Some(4242));
        let m = parse_line("7f3c default [stack:4243] anon=3 N1=3").unwrap();
        assert_eq!((m.stack, m.stack_tid), (true, Some(4243)));
        assert_eq!(classify(&m, Some(false)), MemoryKind::Stack);
        // Without `kernelpagesize_kB` (before 2.6.37) the base page size is used.
        let sum = summarize(&[m], &HashMap::new(), 4);
        assert_eq!(sum.node(1).unwrap().stack_kib, 12);
    }

    #[test]
    fn classification_rule() {
        let line = |l: &str| parse_line(l).unwrap();
        let libc = line("1000 default file=/usr/lib/libc.so.6 mapped=38 mapmax=40 N0=38");
        assert_eq!(
            classify(&libc, Some(false)),
            MemoryKind::File,
            "mapmax is not sharing"
        );
        assert_eq!(classify(&libc, None), MemoryKind::File);
        let mapped_shared = line("1000 default file=/data/table mapped=4 N0=4");
        assert_eq!(classify(&mapped_shared, Some(true)), MemoryKind::Shared);
        let shm = line("1000 default file=/dev/shm/ring mapped=8 N1=8");
        assert_eq!(
            classify(&shm, None),
            MemoryKind::Shared,
            "guessed from the name"
        );
        let sysv = line("1000 default file=/SYSV00000000\\040(deleted) N0=1");
        assert_eq!(classify(&sysv, None), MemoryKind::Shared);
        let shared_anon = line("1000 default file=/dev/zero\\040(deleted) dirty=1 N0=1");
        assert_eq!(classify(&shared_anon, Some(true)), MemoryKind::Shared);
        let hugetlb = line("1000 default file=/anon_hugepage\\040(deleted) huge N0=1");
        assert_eq!(classify(&hugetlb, Some(false)), MemoryKind::Anon);
        let after_fork = line("1000 default anon=9 dirty=9 mapmax=2 N0=9");
        assert_eq!(classify(&after_fork, Some(false)), MemoryKind::Anon);
        let heap_in_shared = line("1000 default heap anon=1 N0=1");
        assert_eq!(classify(&heap_in_shared, Some(true)), MemoryKind::Heap);
    }

    #[test]
    fn summary_per_node_and_kind() {
        let maps = parse(SAMPLE).unwrap();
        // maps says the /dev/shm file is shared; nothing else is.
        let mut shared: HashMap<u64, bool> = maps.iter().map(|m| (m.start, false)).collect();
        shared.insert(0x7f1000000000, true);
        let sum = summarize(&maps, &shared, 4);
        assert_eq!(sum.nodes.iter().map(|n| n.node).collect::<Vec<_>>(), [0, 1]);
        let n0 = sum.node(0).unwrap();
        let n1 = sum.node(1).unwrap();
        assert_eq!(n0.heap_kib, 800);
        assert_eq!(n1.heap_kib, 400);
        assert_eq!(n0.stack_kib, 132);
        assert_eq!(n0.anon_kib, 1024);
        assert_eq!(
            n1.anon_kib,
            1024 + 4096,
            "interleaved anon plus 2 huge pages"
        );
        assert_eq!(n1.hugetlb_kib, 4096);
        assert_eq!(n0.file_kib, (2 + 1 + 38) * 4);
        assert_eq!(n1.shared_kib, 32);
        assert_eq!(n0.total_kib, 800 + 132 + 1024 + 164);
        assert_eq!(sum.total.total_kib, n0.total_kib + n1.total_kib);
        assert_eq!(sum.total.heap_kib, 1200);
        for kind in MemoryKind::ALL {
            assert_eq!(sum.total.get(kind), n0.get(kind) + n1.get(kind));
        }
        assert_eq!((sum.mappings, sum.resident_mappings), (10, 8));
    }

    #[test]
    fn sparse_node_ids() {
        let sum = summarize(
            &[parse_line("1000 default anon=3 N0=1 N8=2 kernelpagesize_kB=4").unwrap()],
            &HashMap::new(),
            4,
        );
        assert_eq!(sum.nodes.iter().map(|n| n.node).collect::<Vec<_>>(), [0, 8]);
        assert_eq!(sum.node(8).unwrap().anon_kib, 8);
        assert!(sum.node(1).is_none());
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        assert!(parse_line("").is_err());
        assert!(parse_line("xyz default").is_err());
        assert!(parse_line("1000").is_err());
        assert!(parse_line("1000 default N0=abc").is_err());
        assert!(parse_line("1000 default anon=-1").is_err());
        let err = parse("1000 default N0=1\n1000 default mapped=x\n").unwrap_err();
        assert!(err.0.starts_with("line 2:"), "{err}");
        // Unknown tokens from newer kernels are tolerated.
        let m = parse_line("1000 default newflag future=7 N0=1").unwrap();
        assert_eq!(m.pages_per_node, vec![(0, 1)]);
        // Huge counts saturate instead of overflowing.
        let m = parse_line(&format!(
            "1000 default N0={} kernelpagesize_kB=2048",
            u64::MAX
        ))
        .unwrap();
        assert_eq!(
            summarize(&[m], &HashMap::new(), 4).total.total_kib,
            u64::MAX
        );
        for cut in 0..SAMPLE.len() {
            let _ = parse(&SAMPLE[..cut]);
        }
    }
}
