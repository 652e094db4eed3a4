//! `contend diff`: runs compared metric by metric (the thesis's comparison tool, §3.2.3).
//!
//! Pure: JSON values in ([`flatten`]), a [`Diff`] model, text out ([`render_table`],
//! [`render_markdown`], [`render_latex`], [`render_csv`], [`to_json`]); the `--fail-if` bounds
//! ([`Bound`], [`check`]) are evaluated on the same model. Reading files is the command's job.
//!
//! **Metrics.** Every numeric leaf of a report's JSON is a metric, named by its dotted path:
//! `locks.summary.wait_ns`. An element of an array of objects is named by the first
//! identifying field ([`KEY_FIELDS`]) it has whose value no other element of the array shares
//! (`locks.locks[name=counter_lock].wait_ns`, `streams[tid=12].events`,
//! `configurations[threads=4,cores=2].work.median`), else by its index (`x[3]`), so the same
//! lock or thread is matched across runs even when the arrays are sorted differently. Booleans and strings are not compared. A `null` leaf is kept as a metric
//! without a value, so a metric that is null on one side and a number on the other is shown as
//! missing on that side; a metric that is null everywhere is not shown.
//!
//! **Identities are not measurements.** A number is left out when [`identity_reason`] says it
//! identifies something instead of measuring it: ids (`pid`, `tid`, `rank`, `id`, `*_id`),
//! addresses and places (`address`, `*_address`, `site`, `offset`), points in time (`unix_ns`,
//! `*_unix_ns`, `start_ns`, `end_ns`, `timestamp`, anything under `started` or `ended`),
//! versions (`version`, `*_version`), status codes (`exit_status`, `*_status`, `signal`,
//! `errno`), and the numbers in lists of ids (`threads: [11, 12]`, `sites: [...]`).

use crate::table::{new_table, printable};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write;

/// Fields that identify an element of an array, in order of preference; a key of several
/// fields needs all of them. `lock.name` is the `name` inside the element's `lock` object;
/// `address` and `site` identify condition variables, barriers and call sites; `threads` and
/// `cores` (m and n) the configurations and models of `contend scale`. A number that served as
/// an element's key is not also compared as a metric of it.
pub const KEY_FIELDS: &[&[&str]] = &[
    &["name"],
    &["lock.name"],
    &["lock.address"],
    &["tid"],
    &["file"],
    &["id"],
    &["run"],
    &["threads", "cores"],
    &["threads"],
    &["address"],
    &["site"],
];

/// One numeric (or null) leaf of a JSON value.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// Dotted path: `locks.locks[name=counter_lock].wait_ns`.
    pub path: String,
    /// The object key the value is under (`wait_ns`), which gives the unit.
    pub key: String,
    /// `None` for a JSON null.
    pub value: Option<f64>,
}

/// One step of a path while flattening.
enum Step<'a> {
    Key(&'a str),
    /// An array element: its label, and the fields that made it.
    Element(String, &'static [&'static str]),
}

/// The numeric and null leaves of `v`, in document order, identities left out.
pub fn flatten(v: &Value) -> Vec<Leaf> {
    let mut out = Vec::new();
    let mut steps = Vec::new();
    walk(v, &mut steps, &mut out);
    out
}

fn walk<'a>(v: &'a Value, steps: &mut Vec<Step<'a>>, out: &mut Vec<Leaf>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                steps.push(Step::Key(k));
                walk(child, steps, out);
                steps.pop();
            }
        }
        Value::Array(items) => {
            let labels = element_labels(items);
            for (item, (label, fields)) in items.iter().zip(labels) {
                steps.push(Step::Element(label, fields));
                walk(item, steps, out);
                steps.pop();
            }
        }
        Value::Number(_) | Value::Null => {
            let keys: Vec<&str> = steps
                .iter()
                .filter_map(|s| match s {
                    Step::Key(k) => Some(*k),
                    Step::Element(..) => None,
                })
                .collect();
            let in_list = matches!(steps.last(), Some(Step::Element(..)));
            if identity_reason(&keys, in_list).is_some() || is_element_key(steps) {
                return;
            }
            out.push(Leaf {
                path: path_of(steps),
                key: keys.last().copied().unwrap_or("").to_string(),
                value: v.as_f64(),
            });
        }
        Value::Bool(_) | Value::String(_) => {}
    }
}

fn path_of(steps: &[Step<'_>]) -> String {
    let mut p = String::new();
    for s in steps {
        match s {
            Step::Key(k) => {
                if !p.is_empty() {
                    p.push('.');
                }
                p.push_str(k);
            }
            Step::Element(label, _) => {
                p.push('[');
                p.push_str(label);
                p.push(']');
            }
        }
    }
    p
}

/// The value of a (possibly dotted) key field in an array element, as a label, when it is a
/// non-empty string or a number. Addresses are shown in hex.
fn key_value(item: &Value, field: &str) -> Option<String> {
    let mut v = item;
    for part in field.split('.') {
        v = v.as_object()?.get(part)?;
    }
    let last = field.rsplit('.').next().unwrap_or(field);
    match v {
        Value::String(s) if !s.is_empty() => Some(printable(s)),
        Value::Number(n) => match n.as_u64() {
            Some(u) if last == "address" || last == "site" => Some(format!("{u:#x}")),
            _ => Some(n.to_string()),
        },
        _ => None,
    }
}

/// Whether the leaf at the end of `steps` is a field its array element is keyed by.
fn is_element_key(steps: &[Step<'_>]) -> bool {
    let Some(at) = steps.iter().rposition(|s| matches!(s, Step::Element(..))) else {
        return false;
    };
    let Step::Element(_, fields) = &steps[at] else {
        return false;
    };
    let inside: Vec<&str> = steps[at + 1..]
        .iter()
        .filter_map(|s| match s {
            Step::Key(k) => Some(*k),
            Step::Element(..) => None,
        })
        .collect();
    inside.len() == steps.len() - at - 1 && fields.contains(&inside.join(".").as_str())
}

/// An element's label under a key (`name=worker`, `threads=4,cores=2`), when it has every
/// field of it.
fn key_label(item: &Value, key: &[&str]) -> Option<String> {
    let parts = key
        .iter()
        .map(|field| {
            let short = field.rsplit('.').next().unwrap_or(field);
            key_value(item, field).map(|v| format!("{short}={v}"))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(parts.join(","))
}

/// Labels for an array's elements: `field=value` for the first key whose value is unique in
/// the array, else the index; with the key's fields (none for an index).
fn element_labels(items: &[Value]) -> Vec<(String, &'static [&'static str])> {
    let mut counts: HashMap<(usize, String), usize> = HashMap::new();
    for item in items {
        for (k, key) in KEY_FIELDS.iter().enumerate() {
            if let Some(label) = key_label(item, key) {
                *counts.entry((k, label)).or_default() += 1;
            }
        }
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            KEY_FIELDS
                .iter()
                .enumerate()
                .find_map(|(k, key)| {
                    let label = key_label(item, key)?;
                    (counts.get(&(k, label.clone())) == Some(&1)).then_some((label, *key))
                })
                .unwrap_or_else(|| (i.to_string(), &[]))
        })
        .collect()
}

/// Keys whose numbers, in a list, are ids (`"threads": [11, 12]` lists tids).
const ID_LISTS: &[&str] = &[
    "threads",
    "tids",
    "pids",
    "sites",
    "locks",
    "addresses",
    "cpus",
    "nodes",
];

/// Why a number at this place identifies something rather than measures it, or `None` for a
/// measurement. `keys` are the object keys on the way to it (array steps left out), the last
/// being the number's own key; `in_list` says the number is an element of an array.
pub fn identity_reason(keys: &[&str], in_list: bool) -> Option<&'static str> {
    let key = keys.last().copied().unwrap_or("");
    if in_list && ID_LISTS.contains(&key) {
        return Some("a list of ids");
    }
    if matches!(
        key,
        "pid" | "tid" | "ppid" | "tgid" | "rank" | "id" | "uid" | "gid"
    ) || ["_id", "_pid", "_tid"].iter().any(|s| key.ends_with(s))
    {
        return Some("an id");
    }
    if matches!(key, "address" | "addr" | "site" | "offset") || key.ends_with("_address") {
        return Some("an address");
    }
    if matches!(
        key,
        "unix_ns" | "start_ns" | "end_ns" | "timestamp" | "ts" | "monotonic_span"
    ) || key.ends_with("_unix_ns")
        || key.ends_with("_unix")
        || key.ends_with("_at")
        || key.starts_with("started")
        || key.starts_with("ended")
        || keys.iter().any(|k| matches!(*k, "started" | "ended"))
    {
        return Some("a point in time");
    }
    if matches!(key, "version" | "schema") || key.ends_with("_version") {
        return Some("a version");
    }
    if matches!(key, "exit_status" | "status" | "signal" | "errno") || key.ends_with("_status") {
        return Some("a status code");
    }
    None
}

/// A metric's unit, from its key's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Ns,
    Us,
    Ms,
    S,
    Bytes,
    Pct,
    Hz,
    /// A whole number without a unit suffix: events, acquisitions, waits.
    Count,
    None,
}

impl Unit {
    /// The unit of a metric under `key` whose values (all inputs) are `values`.
    pub fn infer(key: &str, values: &[Option<f64>]) -> Unit {
        let suffixed = |s: &str| key == s || key.ends_with(&format!("_{s}"));
        if suffixed("ns") {
            Unit::Ns
        } else if suffixed("us") {
            Unit::Us
        } else if suffixed("ms") {
            Unit::Ms
        } else if suffixed("s") || suffixed("secs") || suffixed("seconds") {
            Unit::S
        } else if suffixed("bytes") {
            Unit::Bytes
        } else if suffixed("pct") || suffixed("percent") {
            Unit::Pct
        } else if suffixed("hz") {
            Unit::Hz
        } else if values.iter().flatten().all(|v| v.fract() == 0.0) {
            Unit::Count
        } else {
            Unit::None
        }
    }

    /// The unit the values are in, as the inputs have them (CSV and JSON output).
    pub fn source_name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Bytes => "bytes",
            Unit::Pct => "%",
            Unit::Hz => "Hz",
            Unit::Count => "count",
            Unit::None => "",
        }
    }

    /// Nanoseconds in one of this time unit.
    fn ns_per(self) -> Option<f64> {
        match self {
            Unit::Ns => Some(1.0),
            Unit::Us => Some(1e3),
            Unit::Ms => Some(1e6),
            Unit::S => Some(1e9),
            _ => None,
        }
    }
}

/// How a row's values are shown to people: a unit and the divisor that gets there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Display {
    pub unit: &'static str,
    pub divisor: f64,
    pub decimals: usize,
}

impl Display {
    /// Times as ms, or s when the largest is at least 1 s; sizes in binary units; counts whole.
    pub fn of(unit: Unit, values: &[Option<f64>]) -> Display {
        let max = values.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
        let d = |unit, divisor, decimals| Display {
            unit,
            divisor,
            decimals,
        };
        if let Some(ns) = unit.ns_per() {
            return if max * ns >= 1e9 {
                d("s", 1e9 / ns, 3)
            } else {
                d("ms", 1e6 / ns, 3)
            };
        }
        match unit {
            Unit::Bytes => {
                const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
                let mut i = 0;
                while i + 1 < UNITS.len() && max >= 1024f64.powi(i as i32 + 1) {
                    i += 1;
                }
                d(UNITS[i], 1024f64.powi(i as i32), if i == 0 { 0 } else { 1 })
            }
            Unit::Pct => d("%", 1.0, 2),
            Unit::Hz => d("Hz", 1.0, 0),
            Unit::Count => d("count", 1.0, 0),
            _ => d("", 1.0, 3),
        }
    }

    /// `v` in this unit, without the unit.
    pub fn format(&self, v: f64) -> String {
        let x = v / self.divisor;
        if x == 0.0 {
            return "0".to_string();
        }
        if x.fract() == 0.0 && self.decimals == 0 {
            return format!("{x:.0}");
        }
        // Small values keep three significant digits instead of turning into 0.000.
        let shown = format!("{x:.*}", self.decimals);
        if x.abs() < 0.1 && shown.trim_start_matches('-').trim_matches(['0', '.']).len() < 3 {
            let digits = (-x.abs().log10()).ceil() as usize + 2;
            return format!("{x:.*}", digits.min(12));
        }
        shown
    }

    /// `v` with its unit: `12.500 ms`.
    pub fn with_unit(&self, v: f64) -> String {
        match self.unit {
            "" => self.format(v),
            "count" => self.format(v),
            u => format!("{} {u}", self.format(v)),
        }
    }
}

/// A later input's value against the first's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// `(b - a) / |a| × 100`; 0 → 0 is 0 %, x → 0 is −100 %.
    Pct(f64),
    /// From 0 to something else: no finite percentage.
    New,
    /// The metric has no value on one side.
    Missing,
}

impl Change {
    pub fn of(first: Option<f64>, later: Option<f64>) -> Change {
        let (Some(a), Some(b)) = (first, later) else {
            return Change::Missing;
        };
        if a != 0.0 {
            Change::Pct((b - a) / a.abs() * 100.0)
        } else if b == 0.0 {
            Change::Pct(0.0)
        } else {
            Change::New
        }
    }

    /// As people read it, in %: `+12.5`, `-100.0`, `0.0`, `new`, `missing`.
    pub fn text(self) -> String {
        match self {
            Change::Pct(p) if p.abs() < 0.05 => "0.0".to_string(),
            Change::Pct(p) => format!("{p:+.1}"),
            Change::New => "new".to_string(),
            Change::Missing => "missing".to_string(),
        }
    }
}

/// One metric across the inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub metric: String,
    pub unit: Unit,
    /// One per input; `None` where the input lacks the metric or has null.
    pub values: Vec<Option<f64>>,
}

impl Row {
    pub fn display(&self) -> Display {
        Display::of(self.unit, &self.values)
    }

    /// Change of input `i` (> 0) against the first.
    pub fn change(&self, i: usize) -> Change {
        Change::of(self.values[0], self.values[i])
    }
}

/// Inputs compared metric by metric: what every output format renders.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    /// Labels of the inputs (their paths), the first being the baseline.
    pub inputs: Vec<String>,
    pub rows: Vec<Row>,
}

impl Diff {
    /// The union of the inputs' metrics, in order of first appearance; metrics without a
    /// number in any input are left out.
    pub fn new(inputs: Vec<(String, Vec<Leaf>)>) -> Diff {
        let n = inputs.len();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut rows: Vec<(String, Vec<Option<f64>>)> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        for (i, (_, leaves)) in inputs.iter().enumerate() {
            for leaf in leaves {
                let r = *index.entry(leaf.path.clone()).or_insert_with(|| {
                    rows.push((leaf.path.clone(), vec![None; n]));
                    keys.push(leaf.key.clone());
                    rows.len() - 1
                });
                if rows[r].1[i].is_none() {
                    rows[r].1[i] = leaf.value;
                }
            }
        }
        let rows = rows
            .into_iter()
            .zip(keys)
            .filter(|((_, values), _)| values.iter().any(Option::is_some))
            .map(|((metric, values), key)| Row {
                unit: Unit::infer(&key, &values),
                metric,
                values,
            })
            .collect();
        Diff {
            inputs: inputs.into_iter().map(|(label, _)| label).collect(),
            rows,
        }
    }

    /// Keeps the rows whose metric matches one of `globs` (all of them when `globs` is
    /// empty); returns the globs that matched nothing.
    pub fn select(&mut self, globs: &[String]) -> Vec<String> {
        if globs.is_empty() {
            return Vec::new();
        }
        let unmatched = globs
            .iter()
            .filter(|g| !self.rows.iter().any(|r| glob_match(g, &r.metric)))
            .cloned()
            .collect();
        self.rows
            .retain(|r| globs.iter().any(|g| glob_match(g, &r.metric)));
        unmatched
    }
}

/// Shell-style matching on a whole metric path: `*` any run of characters (dots included),
/// `?` one character; everything else, `[` and `]` too, matches itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The shared explanation printed with human-readable output.
fn legend(d: &Diff) -> String {
    format!(
        "Compared with {} (the first input): CHANGE (%) = (value - first) / |first| x 100; \"new\": from 0; \"—\": no value.",
        printable(&d.inputs[0])
    )
}

/// Header cells: METRIC, UNIT, then each input, each later one followed by its change.
fn header(d: &Diff, change: &str) -> Vec<String> {
    let mut h = vec!["METRIC".to_string(), "UNIT".to_string()];
    for (i, label) in d.inputs.iter().enumerate() {
        h.push(printable(label));
        if i > 0 {
            h.push(change.to_string());
        }
    }
    h
}

/// Display cells of a row after METRIC: unit, values and changes.
fn cells(r: &Row, missing: &str) -> Vec<String> {
    let disp = r.display();
    let mut c = vec![disp.unit.to_string()];
    for (i, v) in r.values.iter().enumerate() {
        c.push(v.map_or_else(|| missing.to_string(), |v| disp.format(v)));
        if i > 0 {
            c.push(r.change(i).text());
        }
    }
    c
}

/// The terminal table.
pub fn render_table(d: &Diff) -> String {
    let head = header(d, "CHANGE (%)");
    let numeric: Vec<usize> = (2..head.len()).collect();
    let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = new_table(&head_refs, &numeric);
    for r in &d.rows {
        let mut row = vec![printable(&r.metric)];
        row.extend(cells(r, "—"));
        t.add_row(row);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", legend(d));
    if d.rows.is_empty() {
        out.push_str("No metrics to compare.\n");
        return out;
    }
    let _ = writeln!(out, "{t}");
    out
}

fn md_escape(s: &str) -> String {
    printable(s).replace('\\', "\\\\").replace('|', "\\|")
}

/// A GitHub-flavoured Markdown table.
pub fn render_markdown(d: &Diff) -> String {
    let head = header(d, "change (%)");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {} |",
        head.iter()
            .enumerate()
            .map(|(i, h)| match i {
                0 => "metric".to_string(),
                1 => "unit".to_string(),
                _ => md_escape(h),
            })
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let align: Vec<&str> = (0..head.len())
        .map(|i| if i < 2 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "| {} |", align.join(" | "));
    for r in &d.rows {
        let metric = printable(&r.metric).replace('|', "\\|");
        let fence = if metric.contains('`') { "``" } else { "`" };
        let mut row = vec![format!("{fence}{metric}{fence}")];
        row.extend(cells(r, "—").iter().map(|c| md_escape(c)));
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// `s` safe in LaTeX text.
pub fn latex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in printable(s).chars() {
        match c {
            '\\' => out.push_str("\\textbackslash{}"),
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '~' => out.push_str("\\textasciitilde{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            '—' => out.push_str("---"),
            _ => out.push(c),
        }
    }
    out
}

/// A LaTeX `tabular` (no packages needed).
pub fn render_latex(d: &Diff) -> String {
    let head = header(d, "Change (%)");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "% contend diff: change = (value - first) / |first| x 100, against {}",
        printable(&d.inputs[0]).replace(['\n', '\r'], " ")
    );
    let _ = writeln!(
        out,
        "\\begin{{tabular}}{{ll{}}}",
        "r".repeat(head.len() - 2)
    );
    out.push_str("\\hline\n");
    let titles: Vec<String> = head
        .iter()
        .enumerate()
        .map(|(i, h)| match i {
            0 => "Metric".to_string(),
            1 => "Unit".to_string(),
            _ => latex_escape(h),
        })
        .collect();
    let _ = writeln!(out, "{} \\\\", titles.join(" & "));
    out.push_str("\\hline\n");
    for r in &d.rows {
        let mut row = vec![latex_escape(&r.metric)];
        row.extend(cells(r, "—").iter().map(|c| latex_escape(c)));
        let _ = writeln!(out, "{} \\\\", row.join(" & "));
    }
    out.push_str("\\hline\n\\end{tabular}\n");
    out
}

/// A CSV field, quoted when it needs to be (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number for machines: shortest text that reads back as the same f64.
fn raw(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        v.to_string()
    }
}

/// `x` rounded to 12 significant digits: computed changes without float noise
/// (`19.999999999999996` → `20`).
fn tidy(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    format!("{x:.11e}").parse().unwrap_or(x)
}

/// CSV: values as the inputs have them (unit column: their unit), empty where missing;
/// changes in % (`new` from 0, empty where missing).
pub fn render_csv(d: &Diff) -> String {
    let mut head = vec!["metric".to_string(), "unit".to_string()];
    for (i, label) in d.inputs.iter().enumerate() {
        head.push(label.clone());
        if i > 0 {
            head.push(format!("{label} change (%)"));
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, fields: &[String]| {
        let f: Vec<String> = fields.iter().map(|s| csv_field(s)).collect();
        let _ = writeln!(out, "{}", f.join(","));
    };
    line(&mut out, &head);
    for r in &d.rows {
        let mut f = vec![r.metric.clone(), r.unit.source_name().to_string()];
        for (i, v) in r.values.iter().enumerate() {
            f.push(v.map(raw).unwrap_or_default());
            if i > 0 {
                f.push(match r.change(i) {
                    Change::Pct(p) => raw(tidy(p)),
                    Change::New => "new".to_string(),
                    Change::Missing => String::new(),
                });
            }
        }
        line(&mut out, &f);
    }
    out
}

/// What `contend diff --json` prints: values as the inputs have them, and each later input's
/// change against the first.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct DiffJson<'a> {
    /// The first input, which the others are compared with.
    pub baseline: &'a str,
    pub inputs: &'a [String],
    pub metrics: Vec<MetricJson<'a>>,
}

/// One metric across the inputs.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct MetricJson<'a> {
    /// Its path in the inputs (`locks.summary.wait_ns`, `locks.locks[name=hot_lock].wait_ns`).
    pub metric: &'a str,
    /// The unit its key names (`ns`, `%`, `count`, ...).
    pub unit: &'static str,
    /// One per input; null where the input lacks the metric or has null.
    pub values: &'a [Option<f64>],
    /// One per input after the first.
    pub changes: Vec<ChangeJson<'a>>,
}

/// A later input's change against the first.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ChangeJson<'a> {
    pub input: &'a str,
    pub status: ChangeStatus,
    /// In percent of the first value (`ok` only).
    pub pct: Option<f64>,
    /// In the metric's unit (both values present).
    pub delta: Option<f64>,
}

/// How a later value stands against the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeStatus {
    /// Both present: `pct` is the change.
    Ok,
    /// From 0 (no percentage).
    New,
    /// One side lacks it.
    Missing,
}

/// The JSON form of `d` (`contend diff --json`, inside `schema_version`).
pub fn to_json(d: &Diff) -> DiffJson<'_> {
    let finite = |x: f64| x.is_finite().then(|| tidy(x));
    let metrics = d
        .rows
        .iter()
        .map(|r| {
            let changes = (1..d.inputs.len())
                .map(|i| {
                    let (status, pct) = match r.change(i) {
                        Change::Pct(p) => (ChangeStatus::Ok, finite(p)),
                        Change::New => (ChangeStatus::New, None),
                        Change::Missing => (ChangeStatus::Missing, None),
                    };
                    let delta = match (r.values[0], r.values[i]) {
                        (Some(a), Some(b)) => finite(b - a),
                        _ => None,
                    };
                    ChangeJson {
                        input: &d.inputs[i],
                        status,
                        pct,
                        delta,
                    }
                })
                .collect();
            MetricJson {
                metric: &r.metric,
                unit: r.unit.source_name(),
                values: &r.values,
                changes,
            }
        })
        .collect();
    DiffJson {
        baseline: &d.inputs[0],
        inputs: &d.inputs,
        metrics,
    }
}

/// Which way a bound is crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `>`: the change is above the amount.
    Above,
    /// `<`: the change is below the amount.
    Below,
}

/// A `--fail-if` bound: `METRIC>+5%`, `METRIC<-5%`, `METRIC>+10`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// As written.
    pub text: String,
    /// A glob on the metric path.
    pub metric: String,
    pub direction: Direction,
    pub amount: f64,
    /// `%`: a change in percent of the first value; else an absolute change in the metric's
    /// own unit (as the inputs have it, e.g. ns for `*_ns`).
    pub relative: bool,
}

/// The forms `--fail-if` accepts, for its error message.
pub const BOUND_FORMS: &str = "expected METRIC>+N% or METRIC<-N% (change in % of the first input), or METRIC>+N or METRIC<-N (absolute change in the metric's own unit, e.g. ns for *_ns); METRIC is a path or a glob with * and ?, e.g. 'locks.summary.wait_ns>+5%', 'locks.*wait*<-10%', 'events>+1000'";

impl Bound {
    pub fn parse(text: &str) -> Result<Bound, String> {
        let err = || format!("--fail-if '{text}': {BOUND_FORMS}");
        let t = text.trim();
        // The amount is at the end; the operator is the last `>` or `<` before it (metric
        // paths may hold `<` and `>` in lock names).
        let at = t.rfind(['>', '<']).ok_or_else(err)?;
        let metric = t[..at].trim();
        let direction = if t.as_bytes()[at] == b'>' {
            Direction::Above
        } else {
            Direction::Below
        };
        let rest = t[at + 1..].trim();
        let (number, relative) = match rest.strip_suffix('%') {
            Some(n) => (n.trim_end(), true),
            None => (rest, false),
        };
        let starts_ok = number
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.'));
        let amount: f64 = number.parse().map_err(|_| err())?;
        if metric.is_empty() || !starts_ok || !amount.is_finite() {
            return Err(err());
        }
        Ok(Bound {
            text: t.to_string(),
            metric: metric.to_string(),
            direction,
            amount,
            relative,
        })
    }

    /// Whether the change from `a` to `b` crosses this bound. From 0, a relative change is
    /// infinite: it crosses `>` when the value rose and `<` when it fell.
    pub fn crossed(&self, a: f64, b: f64) -> bool {
        let change = if self.relative {
            match Change::of(Some(a), Some(b)) {
                Change::Pct(p) => p,
                _ if b > a => f64::INFINITY,
                _ => f64::NEG_INFINITY,
            }
        } else {
            b - a
        };
        match self.direction {
            Direction::Above => change > self.amount,
            Direction::Below => change < self.amount,
        }
    }
}

/// What checking one bound against one metric and one later input found.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The bound was crossed.
    Crossed {
        bound: usize,
        row: usize,
        input: usize,
    },
    /// The metric has no value in the first input or in `input`.
    Missing {
        bound: usize,
        row: usize,
        input: usize,
    },
    /// No metric of any input matches the bound's glob.
    NoMatch { bound: usize },
}

/// Every bound against every matching metric and every later input.
pub fn check(d: &Diff, bounds: &[Bound]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (b, bound) in bounds.iter().enumerate() {
        let mut matched = false;
        for (ri, r) in d.rows.iter().enumerate() {
            if !glob_match(&bound.metric, &r.metric) {
                continue;
            }
            matched = true;
            for i in 1..d.inputs.len() {
                match (r.values[0], r.values[i]) {
                    (Some(a), Some(v)) => {
                        if bound.crossed(a, v) {
                            out.push(Finding::Crossed {
                                bound: b,
                                row: ri,
                                input: i,
                            });
                        }
                    }
                    _ => out.push(Finding::Missing {
                        bound: b,
                        row: ri,
                        input: i,
                    }),
                }
            }
        }
        if !matched {
            out.push(Finding::NoMatch { bound: b });
        }
    }
    out
}

impl Finding {
    pub fn is_missing(&self) -> bool {
        !matches!(self, Finding::Crossed { .. })
    }

    /// One line for people: the metric, its values, the change and the bound.
    pub fn describe(&self, d: &Diff, bounds: &[Bound]) -> String {
        match *self {
            Finding::Crossed { bound, row, input } => {
                let r = &d.rows[row];
                let disp = r.display();
                let (a, b) = (r.values[0].unwrap_or(0.0), r.values[input].unwrap_or(0.0));
                let change = match r.change(input) {
                    Change::New => "new, from 0".to_string(),
                    c => format!("{} %", c.text()),
                };
                format!(
                    "{}: {} -> {} ({change}, {}{}) in {}, bound {}",
                    printable(&r.metric),
                    disp.with_unit(a),
                    disp.with_unit(b),
                    if b - a >= 0.0 { "+" } else { "-" },
                    disp.with_unit((b - a).abs()),
                    printable(&d.inputs[input]),
                    printable(&bounds[bound].text)
                )
            }
            Finding::Missing { bound, row, input } => {
                let r = &d.rows[row];
                let (m, b) = (printable(&r.metric), printable(&bounds[bound].text));
                if r.values[0].is_none() {
                    format!(
                        "{m}: no value in {} (the first input), so bound {b} was not checked for {}",
                        printable(&d.inputs[0]),
                        printable(&d.inputs[input])
                    )
                } else {
                    format!(
                        "{m}: no value in {}, so bound {b} was not checked for it",
                        printable(&d.inputs[input])
                    )
                }
            }
            Finding::NoMatch { bound } => format!(
                "bound {}: no metric matches `{}` in any input",
                printable(&bounds[bound].text),
                printable(&bounds[bound].metric)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn leaves(v: &Value) -> Vec<(String, Option<f64>)> {
        flatten(v).into_iter().map(|l| (l.path, l.value)).collect()
    }

    fn diff_of(inputs: &[(&str, Value)]) -> Diff {
        Diff::new(
            inputs
                .iter()
                .map(|(l, v)| (l.to_string(), flatten(v)))
                .collect(),
        )
    }

    /// A report-shaped value: two locks, one named, threads, streams.
    fn report(wait: u64, named_wait: u64) -> Value {
        json!({
            "run": "r", "started_unix_ns": 1_700_000_000_000_000_000u64,
            "events": 400, "exit_status": 0, "duration_s": 1.5,
            "streams": [
                {"file": "streams/t1.cst", "pid": 10, "tid": 11, "events": 300, "span_s": 0.299, "complete": true},
                {"file": "streams/t2.cst", "pid": 10, "tid": 12, "events": 100, "span_s": null, "complete": false}
            ],
            "locks": {
                "start_ns": 5, "end_ns": 900,
                "summary": {"wait_ns": wait, "mean_hold_ns": 2.5},
                "locks": [
                    {"lock": {"pid": 10, "address": 4096, "name": "counter_lock"}, "wait_ns": named_wait,
                     "threads": [11, 12], "sites": [{"site": 4198400u64, "wait_ns": 7}]},
                    {"lock": {"pid": 10, "address": 8192}, "wait_ns": 3, "threads": [11]}
                ]
            }
        })
    }

    #[test]
    fn flattening_names_leaves_by_path_and_array_elements_by_key() {
        let l = leaves(&report(100, 60));
        let paths: Vec<&str> = l.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "duration_s",
                "events",
                "locks.locks[name=counter_lock].sites[site=0x401000].wait_ns",
                "locks.locks[name=counter_lock].wait_ns",
                "locks.locks[address=0x2000].wait_ns",
                "locks.summary.mean_hold_ns",
                "locks.summary.wait_ns",
                "streams[tid=11].events",
                "streams[tid=11].span_s",
                "streams[tid=12].events",
                "streams[tid=12].span_s",
            ]
        );
        assert_eq!(l[3].1, Some(60.0));
        // null is kept as a metric without a value
        assert_eq!(l[10], ("streams[tid=12].span_s".to_string(), None));
    }

    #[test]
    fn identities_are_not_measurements() {
        let l = leaves(&report(100, 60));
        for (p, _) in &l {
            for skipped in ["pid", "tid", "address", "start_ns", "end_ns", "exit_status"] {
                assert!(!p.ends_with(&format!(".{skipped}")), "{p}");
            }
            assert!(!p.contains("unix_ns"), "{p}");
            assert!(!p.contains("threads["), "tid lists are ids: {p}");
        }
        let cases: &[(&[&str], bool, bool)] = &[
            (&["started", "unix_ns"], false, true),
            (&["started_unix_ns"], false, true),
            (&["meta", "schema_version"], false, true),
            (&["tool_version"], false, true),
            (&["locks", "locks", "lock", "address"], false, true),
            (&["allocation", "block_address"], false, true),
            (&["streams", "tid"], false, true),
            (&["streams", "rank"], false, true),
            (&["exit_status"], false, true),
            (&["locks", "threads"], true, true),
            (&["conds", "sites"], true, true),
            (&["locks", "summary", "wait_ns"], false, false),
            (&["locks", "summary", "duration_ns"], false, false),
            (&["threads"], false, false), // a count of threads is a measurement
            (&["events_by_kind", "mark"], false, false),
        ];
        for (keys, in_list, identity) in cases {
            assert_eq!(
                identity_reason(keys, *in_list).is_some(),
                *identity,
                "{keys:?} in_list={in_list}"
            );
        }
    }

    #[test]
    fn array_keys_fall_back_when_not_unique_and_to_the_index() {
        let v = json!({
            "threads": [
                {"name": "worker", "tid": 5, "wait_ns": 1},
                {"name": "worker", "tid": 6, "wait_ns": 2},
                {"name": "main", "tid": 7, "wait_ns": 3}
            ],
            "plain": [{"x": 1}, {"x": 2}],
            "nums": [4, 5]
        });
        let paths: Vec<String> = leaves(&v).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "nums[0]",
                "nums[1]",
                "plain[0].x",
                "plain[1].x",
                "threads[tid=5].wait_ns",
                "threads[tid=6].wait_ns",
                "threads[name=main].wait_ns",
            ]
        );
    }

    #[test]
    fn scale_rows_are_keyed_by_threads_and_cores() {
        let v = json!({
            "configurations": [
                {"threads": 4, "cores": 1, "elapsed_ns": {"median": 40}},
                {"threads": 4, "cores": 4, "elapsed_ns": {"median": 12}}
            ],
            "thread_counts": [
                {"threads": 4, "models": [{"threads": 4, "cores": 4, "omega": 0.25}]}
            ]
        });
        let paths: Vec<String> = leaves(&v).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "configurations[threads=4,cores=1].elapsed_ns.median",
                "configurations[threads=4,cores=4].elapsed_ns.median",
                "thread_counts[threads=4].models[threads=4,cores=4].omega",
            ]
        );
        // `threads` is compared where it is a measurement, not a key
        let v = json!({"runs": [{"threads": 4, "x": 1}, {"threads": 4, "x": 2}]});
        let paths: Vec<String> = leaves(&v).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "runs[0].threads",
                "runs[0].x",
                "runs[1].threads",
                "runs[1].x"
            ]
        );
    }

    #[test]
    fn the_same_lock_is_matched_when_arrays_are_ordered_differently() {
        let a = report(100, 60);
        let mut b = report(150, 90);
        b["locks"]["locks"].as_array_mut().unwrap().reverse();
        let d = diff_of(&[("a", a), ("b", b)]);
        let r = d
            .rows
            .iter()
            .find(|r| r.metric == "locks.locks[name=counter_lock].wait_ns")
            .unwrap();
        assert_eq!(r.values, [Some(60.0), Some(90.0)]);
        assert_eq!(r.change(1), Change::Pct(50.0));
    }

    #[test]
    fn units_from_suffixes() {
        let some = |v: f64| [Some(v)];
        assert_eq!(Unit::infer("wait_ns", &some(1.0)), Unit::Ns);
        assert_eq!(Unit::infer("span_s", &some(0.5)), Unit::S);
        assert_eq!(Unit::infer("rss_bytes", &some(1.0)), Unit::Bytes);
        assert_eq!(Unit::infer("loss_pct", &some(1.5)), Unit::Pct);
        assert_eq!(Unit::infer("hz", &some(1e9)), Unit::Hz);
        assert_eq!(Unit::infer("events", &some(12.0)), Unit::Count);
        assert_eq!(Unit::infer("speedup", &some(1.7)), Unit::None);
        // `_ns`: ms below a second, s from a second
        let d = Display::of(Unit::Ns, &[Some(2_500_000.0), Some(900_000_000.0)]);
        assert_eq!((d.unit, d.format(2_500_000.0)), ("ms", "2.500".to_string()));
        let d = Display::of(Unit::Ns, &[Some(2_500_000.0), Some(1_500_000_000.0)]);
        assert_eq!(
            (d.unit, d.format(1_500_000_000.0)),
            ("s", "1.500".to_string())
        );
        // small times keep significant digits
        let d = Display::of(Unit::Ns, &[Some(150.0)]);
        assert_eq!(d.format(150.0), "0.000150");
        let d = Display::of(Unit::S, &[Some(0.299)]);
        assert_eq!((d.unit, d.format(0.299)), ("ms", "299.000".to_string()));
        let d = Display::of(Unit::Bytes, &[Some(3.0 * 1024.0 * 1024.0)]);
        assert_eq!(
            (d.unit, d.format(3.0 * 1024.0 * 1024.0)),
            ("MiB", "3.0".to_string())
        );
        let d = Display::of(Unit::Count, &[Some(400.0)]);
        assert_eq!(d.with_unit(400.0), "400");
    }

    #[test]
    fn percent_change_edge_cases() {
        assert_eq!(Change::of(Some(0.0), Some(0.0)), Change::Pct(0.0));
        assert_eq!(Change::of(Some(0.0), Some(5.0)), Change::New);
        assert_eq!(Change::of(Some(8.0), Some(0.0)), Change::Pct(-100.0));
        assert_eq!(Change::of(Some(100.0), Some(105.0)), Change::Pct(5.0));
        assert_eq!(Change::of(Some(-10.0), Some(-5.0)), Change::Pct(50.0));
        assert_eq!(Change::of(None, Some(5.0)), Change::Missing);
        assert_eq!(Change::of(Some(5.0), None), Change::Missing);
        assert_eq!(Change::Pct(0.0).text(), "0.0");
        assert_eq!(Change::Pct(-100.0).text(), "-100.0");
        assert_eq!(Change::Pct(12.345).text(), "+12.3");
        assert_eq!(Change::New.text(), "new");
    }

    #[test]
    fn metrics_on_one_side_only_are_kept() {
        let d = diff_of(&[
            ("a", json!({"x_ns": 1, "only_a": 2, "nulls": null})),
            ("b", json!({"x_ns": 1, "only_b": 3, "nulls": null})),
        ]);
        let names: Vec<&str> = d.rows.iter().map(|r| r.metric.as_str()).collect();
        assert_eq!(names, ["only_a", "x_ns", "only_b"]);
        assert_eq!(d.rows[0].values, [Some(2.0), None]);
        assert_eq!(d.rows[2].values, [None, Some(3.0)]);
        let t = render_table(&d);
        let line = t.lines().find(|l| l.contains("only_b")).unwrap();
        assert!(line.contains('—') && line.contains("missing"), "{t}");
        // null on one side, a number on the other: missing on that side
        let d = diff_of(&[("a", json!({"s": null})), ("b", json!({"s": 2.5}))]);
        assert_eq!(d.rows[0].values, [None, Some(2.5)]);
    }

    #[test]
    fn globs_select_metrics() {
        assert!(glob_match("locks.*wait*", "locks.summary.wait_ns"));
        assert!(glob_match("locks.*wait*", "locks.locks[name=a].wait_ns"));
        assert!(!glob_match("locks.*wait*", "streams[tid=1].events"));
        assert!(glob_match("events", "events"));
        assert!(!glob_match("events", "events_dropped"));
        assert!(glob_match(
            "locks.locks[name=?].wait_ns",
            "locks.locks[name=a].wait_ns"
        ));
        let mut d = diff_of(&[("a", report(1, 2)), ("b", report(3, 4))]);
        let unmatched = d.select(&["locks.*wait*".into(), "nothing*".into()]);
        assert_eq!(unmatched, ["nothing*"]);
        assert!(d.rows.iter().all(|r| r.metric.contains("wait")));
        assert_eq!(d.rows.len(), 4);
    }

    fn three() -> Diff {
        diff_of(&[
            (
                "base.json",
                json!({"wait_ns": 2_000_000, "events": 0, "gone": 8}),
            ),
            (
                "new,1.json",
                json!({"wait_ns": 3_000_000, "events": 0, "gone": 0}),
            ),
            ("n_2%.json", json!({"wait_ns": 1_000_000, "events": 4})),
        ])
    }

    #[test]
    fn table_has_units_values_and_changes() {
        let t = render_table(&three());
        assert!(t.contains("CHANGE (%)") && t.contains("UNIT"), "{t}");
        let row = |name: &str| {
            let l = t.lines().find(|l| l.contains(name)).unwrap();
            l.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        assert_eq!(
            row("wait_ns"),
            "│ wait_ns ms 2.000 3.000 +50.0 1.000 -50.0 │"
        );
        assert_eq!(row("events"), "│ events count 0 0 0.0 4 new │");
        assert_eq!(row("gone"), "│ gone count 8 0 -100.0 — missing │");
    }

    /// A minimal RFC 4180 reader, to check the CSV reads back.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let mut rows = vec![];
        let mut row = vec![];
        let mut field = String::new();
        let mut quoted = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        rows
    }

    #[test]
    fn csv_reads_back() {
        let rows = parse_csv(&render_csv(&three()));
        assert_eq!(
            rows[0],
            [
                "metric",
                "unit",
                "base.json",
                "new,1.json",
                "new,1.json change (%)",
                "n_2%.json",
                "n_2%.json change (%)"
            ]
        );
        // rows in the inputs' key order (serde_json sorts object keys)
        assert_eq!(rows[1], ["events", "count", "0", "0", "0", "4", "new"]);
        assert_eq!(rows[2], ["gone", "count", "8", "0", "-100", "", ""]);
        assert_eq!(
            rows[3],
            ["wait_ns", "ns", "2000000", "3000000", "50", "1000000", "-50"]
        );
        assert!(rows.iter().all(|r| r.len() == 7));
        // changes without float noise: 1.0 -> 1.2 is 20 %, not 19.999999999999996 %
        let d = diff_of(&[("a", json!({"t_s": 1.0})), ("b", json!({"t_s": 1.2}))]);
        assert_eq!(
            parse_csv(&render_csv(&d))[1],
            ["t_s", "s", "1", "1.2", "20"]
        );
        assert_eq!(
            serde_json::to_value(to_json(&d)).unwrap()["metrics"][0]["changes"][0]["delta"],
            0.2
        );
    }

    #[test]
    fn markdown_has_a_header_row_and_alignment() {
        let md = render_markdown(&three());
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            "| metric | unit | base.json | new,1.json | change (%) | n_2%.json | change (%) |"
        );
        assert_eq!(lines[1], "| --- | --- | ---: | ---: | ---: | ---: | ---: |");
        assert_eq!(
            lines[4],
            "| `wait_ns` | ms | 2.000 | 3.000 | +50.0 | 1.000 | -50.0 |"
        );
        assert_eq!(
            lines[3],
            "| `gone` | count | 8 | 0 | -100.0 | — | missing |"
        );
        assert_eq!(lines.len(), 5);
        let d = diff_of(&[("a|b", json!({"x": 1})), ("c", json!({"x": 2}))]);
        assert!(render_markdown(&d).starts_with("| metric | unit | a\\|b | c |"));
    }

    #[test]
    fn latex_escapes_underscores_and_percent() {
        let tex = render_latex(&three());
        assert!(tex.contains("\\begin{tabular}{llrrrrr}"), "{tex}");
        assert!(
            tex.contains("Metric & Unit & base.json & new,1.json & Change (\\%) & n\\_2\\%.json & Change (\\%) \\\\"),
            "{tex}"
        );
        assert!(
            tex.contains("wait\\_ns & ms & 2.000 & 3.000 & +50.0 & 1.000 & -50.0 \\\\"),
            "{tex}"
        );
        assert!(
            tex.contains("gone & count & 8 & 0 & -100.0 & --- & missing \\\\"),
            "{tex}"
        );
        assert!(tex.trim_end().ends_with("\\end{tabular}"));
        assert_eq!(
            latex_escape("a&b$c#{d}~^\\"),
            "a\\&b\\$c\\#\\{d\\}\\textasciitilde{}\\textasciicircum{}\\textbackslash{}"
        );
        // only the comment line holds an unescaped %
        for line in tex.lines().skip(1) {
            assert!(!line.replace("\\%", "").contains('%'), "{line}");
        }
    }

    #[test]
    fn json_has_values_and_changes() {
        let v = serde_json::to_value(to_json(&three())).unwrap();
        assert_eq!(v["baseline"], "base.json");
        let m = &v["metrics"][2];
        assert_eq!(m["metric"], "wait_ns");
        assert_eq!(m["unit"], "ns");
        assert_eq!(m["values"], json!([2_000_000.0, 3_000_000.0, 1_000_000.0]));
        assert_eq!(m["changes"][0]["pct"], 50.0);
        assert_eq!(m["changes"][0]["delta"], 1_000_000.0);
        assert_eq!(m["changes"][1]["input"], "n_2%.json");
        assert_eq!(v["metrics"][0]["changes"][1]["status"], "new");
        assert_eq!(v["metrics"][1]["changes"][1]["status"], "missing");
        assert_eq!(v["metrics"][1]["changes"][1]["pct"], Value::Null);
        assert_eq!(v["metrics"][1]["values"][2], Value::Null);
    }

    #[test]
    fn bounds_parse_and_reject_malformed_ones() {
        let b = Bound::parse("locks.summary.wait_ns>+5%").unwrap();
        assert_eq!(
            (b.metric.as_str(), b.direction, b.amount, b.relative),
            ("locks.summary.wait_ns", Direction::Above, 5.0, true)
        );
        let b = Bound::parse(" locks.*wait* < -5 % ").unwrap();
        assert_eq!(
            (b.metric.as_str(), b.direction, b.amount, b.relative),
            ("locks.*wait*", Direction::Below, -5.0, true)
        );
        let b = Bound::parse("events>+10").unwrap();
        assert_eq!((b.amount, b.relative), (10.0, false));
        let b = Bound::parse("locks.locks[name=map<int>].wait_ns>2.5%").unwrap();
        assert_eq!(b.metric, "locks.locks[name=map<int>].wait_ns");
        assert_eq!(b.amount, 2.5);
        for bad in [
            "",
            "wait_ns",
            "wait_ns>",
            ">+5%",
            "wait_ns=5%",
            "wait_ns>five%",
            "wait_ns>+5%%",
            "wait_ns>inf",
            "wait_ns>+5%x",
        ] {
            let e = Bound::parse(bad).unwrap_err();
            assert!(e.contains("expected METRIC>+N%"), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn bounds_cross_on_relative_absolute_and_from_zero() {
        let above5 = Bound::parse("m>+5%").unwrap();
        assert!(above5.crossed(100.0, 106.0));
        assert!(!above5.crossed(100.0, 105.0));
        assert!(above5.crossed(0.0, 1.0)); // from 0: infinitely more
        assert!(!above5.crossed(0.0, 0.0));
        let below5 = Bound::parse("m<-5%").unwrap();
        assert!(below5.crossed(100.0, 94.0));
        assert!(below5.crossed(8.0, 0.0));
        assert!(!below5.crossed(100.0, 96.0));
        let abs = Bound::parse("m>+10").unwrap();
        assert!(abs.crossed(1000.0, 1011.0));
        assert!(!abs.crossed(1000.0, 1010.0));
    }

    #[test]
    fn check_reports_crossings_missing_metrics_and_globs_matching_nothing() {
        let d = three();
        let bounds = vec![
            Bound::parse("wait*>+5%").unwrap(),
            Bound::parse("gone<-50%").unwrap(),
            Bound::parse("nothing>+1").unwrap(),
        ];
        let f = check(&d, &bounds);
        assert_eq!(
            f,
            [
                Finding::Crossed {
                    bound: 0,
                    row: 2,
                    input: 1
                },
                Finding::Crossed {
                    bound: 1,
                    row: 1,
                    input: 1
                },
                Finding::Missing {
                    bound: 1,
                    row: 1,
                    input: 2
                },
                Finding::NoMatch { bound: 2 },
            ]
        );
        assert_eq!(
            f[0].describe(&d, &bounds),
            "wait_ns: 2.000 ms -> 3.000 ms (+50.0 %, +1.000 ms) in new,1.json, bound wait*>+5%"
        );
        assert_eq!(
            f[2].describe(&d, &bounds),
            "gone: no value in n_2%.json, so bound gone<-50% was not checked for it"
        );
        assert!(f[2].is_missing() && f[3].is_missing() && !f[0].is_missing());
    }
}
