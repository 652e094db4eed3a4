//! The flame graph of wait time by call stack on the run's page, drawn from the folded stacks
//! `contend report --folded` writes (the probe's lock waits per call site under
//! `[lock NAME]`, the futex waits with their unwound user stacks under
//! `[futex wait WORD KIND]`).
//!
//! An icicle: the root (all the wait time) on top, callers above their callees, so that it
//! reads like the folded lines, root first. A frame's width is its share of the wait time.
//! Each frame's label is cut to fit its width (never inside a character reference: cut, then
//! escaped), and its `<title>` holds the full name, the time and the share. With scripts on,
//! a click on a frame zooms to its subtree (its callers stay as a path on top); with scripts
//! off the whole graph is drawn as written.
//!
//! Aggregated, so that a run of millions of events stays small: the folded stacks are already
//! one line per distinct stack, and the frames under 0.5 % of the wait time are merged into
//! one per caller, drawn without their callees; should that still leave more than
//! [`MAX_FRAMES`] frames, the threshold doubles until it does not.

use super::{escape, ms, section_start};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Frames drawn at most (a frame is about 300 bytes of SVG).
pub(super) const MAX_FRAMES: usize = 3000;
/// The share of the wait time under which frames are merged.
const MERGE_BELOW: f64 = 0.005;
/// The graph's width and a frame's height, px.
const WIDTH: f64 = 1200.0;
const ROW: f64 = 17.0;
/// The width of a character of the labels' monospace font at 11 px, px.
const CHAR_W: f64 = 6.7;

struct Node {
    name: String,
    ns: u64,
    children: BTreeMap<String, usize>,
    /// How many frames were merged into this one (0: a frame of the stacks).
    merged: usize,
}

/// The call tree of the folded stacks, root (`all`) first.
fn tree(folded: &[(String, i64)]) -> Vec<Node> {
    let mut nodes = vec![Node {
        name: "all".into(),
        ns: 0,
        children: BTreeMap::new(),
        merged: 0,
    }];
    for (stack, total) in folded {
        let Ok(ns) = u64::try_from(*total) else {
            continue;
        };
        nodes[0].ns = nodes[0].ns.saturating_add(ns);
        let mut at = 0;
        for frame in stack.split(';') {
            let next = match nodes[at].children.get(frame) {
                Some(&i) => i,
                None => {
                    let i = nodes.len();
                    nodes.push(Node {
                        name: frame.to_string(),
                        ns: 0,
                        children: BTreeMap::new(),
                        merged: 0,
                    });
                    nodes[at].children.insert(frame.to_string(), i);
                    i
                }
            };
            nodes[next].ns = nodes[next].ns.saturating_add(ns);
            at = next;
        }
    }
    nodes
}

/// A frame as drawn: its name (or what was merged), depth, start and width in ns from the
/// left, and how many frames it stands for.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Frame {
    pub name: String,
    pub depth: usize,
    pub start: u64,
    pub ns: u64,
    pub merged: usize,
}

/// The frames to draw: each caller's callees left to right (by name), those under `below` ns
/// merged into one frame per caller without callees.
fn layout(nodes: &[Node], below: u64) -> Vec<Frame> {
    let mut out = Vec::new();
    // (node, depth, start)
    let mut todo = vec![(0usize, 0usize, 0u64)];
    while let Some((i, depth, start)) = todo.pop() {
        let n = &nodes[i];
        out.push(Frame {
            name: n.name.clone(),
            depth,
            start,
            ns: n.ns,
            merged: n.merged,
        });
        if n.merged > 0 {
            continue;
        }
        let mut x = start;
        let (mut small_ns, mut small) = (0u64, 0usize);
        let mut small_name = String::new();
        for &c in n.children.values() {
            let child = &nodes[c];
            if child.ns < below {
                small += 1;
                small_ns = small_ns.saturating_add(child.ns);
                small_name.clone_from(&child.name);
                continue;
            }
            todo.push((c, depth + 1, x));
            x = x.saturating_add(child.ns);
        }
        if small > 0 {
            out.push(Frame {
                name: if small == 1 {
                    small_name
                } else {
                    format!("{small} frames under {:.1} % each", MERGE_BELOW * 100.0)
                },
                depth: depth + 1,
                start: x,
                ns: small_ns,
                merged: small,
            });
        }
    }
    out
}

/// The frames to draw of the folded stacks and the share under which they were merged:
/// 0.5 %, or more when that left over [`MAX_FRAMES`].
pub(super) fn frames(folded: &[(String, i64)]) -> (Vec<Frame>, f64) {
    let nodes = tree(folded);
    let total = nodes[0].ns;
    let mut share = MERGE_BELOW;
    loop {
        let below = (total as f64 * share).ceil() as u64;
        let drawn = layout(&nodes, below);
        if drawn.len() <= MAX_FRAMES || share >= 0.5 {
            return (drawn, share);
        }
        share *= 2.0;
    }
}

/// `name` cut to `chars` characters, with an ellipsis when cut; empty when not even three fit.
fn fit(name: &str, chars: usize) -> String {
    let n = name.chars().count();
    if n <= chars {
        return name.to_string();
    }
    if chars < 3 {
        return String::new();
    }
    let mut s: String = name.chars().take(chars - 1).collect();
    s.push('…');
    s
}

/// A colour for a frame: the roots by what waited (grey for all, blue for lock waits, purple
/// for futex waits), merged frames grey, the others warm by a hash of their name (stable
/// across pages, as flamegraph.pl colours).
fn colour(f: &Frame) -> String {
    if f.depth == 0 {
        return "#bdbdbd".into();
    }
    if f.merged > 1 {
        return "#d9d9d9".into();
    }
    if f.depth == 1 && f.name.starts_with("[lock ") {
        return "#6baed6".into();
    }
    if f.depth == 1 && f.name.starts_with("[futex wait ") {
        return "#b39ddb".into();
    }
    let mut h: u32 = 2166136261;
    for b in f.name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(16777619);
    }
    let r = 205 + (h % 50);
    let g = 90 + ((h >> 8) % 130);
    let b = 40 + ((h >> 16) % 40);
    format!("rgb({r},{g},{b})")
}

/// The flame graph's section: the graph, or why there is none.
pub(super) fn section(out: &mut String, folded: &[(String, i64)]) {
    section_start(out, "flame", "Wait time by call stack");
    let (frames, share) = frames(folded);
    let total = frames.first().map_or(0, |f| f.ns);
    if total == 0 {
        super::missing(
            out,
            "No wait time by call stack: no contended lock was recorded and no futex wait with its user stack (record with contend record --locks).",
        );
        out.push_str("</section>\n");
        return;
    }
    let _ = writeln!(
        out,
        "<p>An icicle graph of the {} ms of wait time (the stacks <code>contend report --folded</code> writes): the root on top, each caller above its callees, a frame as wide as its share of the wait time. Lock waits hang under <code>[lock NAME]</code> at their call site, futex waits under <code>[futex wait WORD KIND]</code> with their whole user stack. Frames under {:.1} % are merged into one per caller; a frame's tooltip has its full name, time and share. <span class=\"js-only\">Click a frame to zoom to it, the root to zoom out.</span></p>",
        ms(total),
        share * 100.0
    );
    let depth = frames.iter().map(|f| f.depth).max().unwrap_or(0);
    let height = ROW * (depth + 1) as f64 + 4.0;
    let _ = write!(
        out,
        "<div class=\"zoom js-only\"><button type=\"button\" data-flame-reset=\"flame-graph\">reset zoom</button></div>\n<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" id=\"flame-graph\" class=\"flame\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH:.0} {height:.0}\" font-family=\"ui-monospace,SFMono-Regular,Menlo,monospace\" font-size=\"11\" data-char-w=\"{CHAR_W}\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    );
    let scale = WIDTH / total as f64;
    for f in &frames {
        let x = f.start as f64 * scale;
        let w = f.ns as f64 * scale;
        let y = ROW * f.depth as f64 + 2.0;
        let pct = f.ns as f64 * 100.0 / total as f64;
        let what = if f.merged > 1 {
            format!(
                "{} frames merged (each under {:.1} %)",
                f.merged,
                share * 100.0
            )
        } else if f.merged == 1 {
            "its callees not drawn (under the merge threshold)".to_string()
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "<g class=\"f\" data-d=\"{}\" data-s=\"{}\" data-ns=\"{}\"><title>{}\n{} ms, {pct:.2} % of the wait time{}{}</title><rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{}\" rx=\"2\"/><text x=\"{:.2}\" y=\"{:.1}\">{}</text></g>",
            f.depth,
            f.start,
            f.ns,
            escape(&f.name),
            ms(f.ns),
            if what.is_empty() { "" } else { "\n" },
            escape(&what),
            ROW - 1.0,
            colour(f),
            x + 3.0,
            y + ROW - 5.0,
            escape(&fit(&f.name, ((w - 6.0) / CHAR_W).max(0.0) as usize))
        );
    }
    out.push_str("</svg></div>\n");
    out.push_str("<p class=\"legend\"><span><i style=\"background:#6baed6\"></i>lock waits (the lock probe)</span><span><i style=\"background:#b39ddb\"></i>futex waits (from the scheduler, with user stacks)</span><span><i style=\"background:#d9d9d9\"></i>merged small frames</span><span><i style=\"background:rgb(230,150,60)\"></i>the stacks' frames</span></p>\n");
    out.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(lines: &[(&str, i64)]) -> Vec<(String, i64)> {
        lines.iter().map(|&(s, n)| (s.to_string(), n)).collect()
    }

    #[test]
    fn frames_are_as_wide_as_their_wait_time_and_callees_sit_under_their_callers() {
        let (f, share) = frames(&folded(&[
            ("[lock A];main;work", 600),
            ("[lock A];main;other", 300),
            ("[futex wait W lock];t;Mutex<T>::lock", 100),
        ]));
        assert_eq!(share, MERGE_BELOW);
        let get = |name: &str| f.iter().find(|x| x.name == name).unwrap().clone();
        assert_eq!(get("all").ns, 1000);
        assert_eq!((get("[lock A]").depth, get("[lock A]").ns), (1, 900));
        let work = get("work");
        let other = get("other");
        assert_eq!((work.depth, work.ns), (3, 600));
        // Roots and callees left to right by name ("[futex" before "[lock"), inside their
        // caller.
        assert_eq!(get("Mutex<T>::lock").start, 0);
        assert_eq!(get("[lock A]").start, 100);
        assert_eq!(other.start, get("main").start);
        assert_eq!(work.start, other.start + 300);
        assert_eq!(f.len(), 8);
    }

    #[test]
    fn frames_under_half_a_per_cent_are_merged_per_caller() {
        let mut lines = vec![("root;big".to_string(), 10_000i64)];
        for i in 0..100 {
            lines.push((format!("root;small{i:03};deeper"), 1));
        }
        let (f, _) = frames(&lines);
        let merged: Vec<_> = f.iter().filter(|x| x.merged > 0).collect();
        assert_eq!(merged.len(), 1, "{f:?}");
        assert_eq!((merged[0].merged, merged[0].ns), (100, 100));
        assert!(
            !f.iter().any(|x| x.name == "deeper"),
            "callees of merged frames"
        );
        // all, root, big, the merged frame.
        assert_eq!(f.len(), 4);
        // A single small frame keeps its name, without its callees.
        let (f, _) = frames(&folded(&[("a;b", 10_000), ("a;c;d", 1)]));
        let c = f.iter().find(|x| x.name == "c").unwrap();
        assert_eq!(c.merged, 1);
        assert!(!f.iter().any(|x| x.name == "d"));
    }

    #[test]
    fn a_huge_number_of_stacks_stays_within_the_budget_of_frames() {
        // 150 callers of 0.67 % each, each 30 frames deep: 4 500 frames at 0.5 %, fewer
        // once the threshold doubles (each caller is then under it, merged).
        let mut lines = Vec::new();
        for i in 0..150 {
            let chain: Vec<String> = (0..30).map(|d| format!("f{i}_{d}")).collect();
            lines.push((format!("r;{}", chain.join(";")), 1));
        }
        let (f, share) = frames(&lines);
        assert!(f.len() <= MAX_FRAMES, "{}", f.len());
        assert!(share > MERGE_BELOW);
    }

    #[test]
    fn labels_are_cut_to_fit_before_they_are_escaped() {
        assert_eq!(fit("Mutex<T>::lock", 40), "Mutex<T>::lock");
        assert_eq!(fit("Mutex<T>::lock", 7), "Mutex<…");
        assert_eq!(fit("Mutex<T>::lock", 2), "");
        let mut out = String::new();
        section(&mut out, &folded(&[("[lock <b>];Vec<T>::push", 5)]));
        assert!(out.contains("Vec&lt;T&gt;::push"), "{out}");
        assert!(!out.contains("<b>") && !out.contains("Vec<T>"), "{out}");
        assert!(out.contains("<title>Vec&lt;T&gt;::push\n0.000 ms, 100.00 % of the wait time"));
    }

    #[test]
    fn no_stacks_say_so() {
        let mut out = String::new();
        section(&mut out, &[]);
        assert!(out.contains("No wait time by call stack"), "{out}");
        assert!(!out.contains("<svg"));
    }
}
