//! Table style shared by every terminal table, so all commands look alike, and fitted to the
//! terminal: when a width is set ([`set_fit`], from the terminal or `COLUMNS`), a table wider
//! than it drops its least important columns (the ones it names with
//! [`Fitted::drop_first`], then from the right; never the first) and says which, and wraps
//! cells only when even that is not enough. Piped output keeps every column.

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};
use std::fmt;
use std::sync::OnceLock;

/// How tables fit the output: `width` None keeps every column (a pipe, `--wide`); `columns`
/// names the columns to show (by header, case-insensitive; the first column always shows).
#[derive(Debug, Clone, Default)]
pub struct Fit {
    pub width: Option<usize>,
    pub columns: Vec<String>,
}

static FIT: OnceLock<Fit> = OnceLock::new();

/// Sets how every table of this process fits (once, before rendering; later calls are ignored).
pub fn set_fit(fit: Fit) {
    let _ = FIT.set(fit);
}

/// The width tables and text are fitted to, if any.
pub fn fit_width() -> Option<usize> {
    FIT.get().and_then(|f| f.width)
}

/// A table that fits itself to the output when displayed. Derefs to the comfy-table it builds.
pub struct Fitted {
    table: Table,
    /// Columns to drop first when the table is too wide, in order.
    drop_first: Vec<usize>,
    /// Right-aligned columns.
    numeric: Vec<usize>,
    /// Columns never dropped (cells wrap instead), besides the first.
    keep: Vec<usize>,
}

impl std::ops::Deref for Fitted {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.table
    }
}

impl std::ops::DerefMut for Fitted {
    fn deref_mut(&mut self) -> &mut Table {
        &mut self.table
    }
}

impl Fitted {
    /// Names the columns (by index) that go first when the table does not fit, in order.
    pub fn drop_first(&mut self, columns: &[usize]) -> &mut Self {
        self.drop_first = columns.to_vec();
        self
    }

    /// Names columns that are never dropped to fit (their cells wrap instead): a table whose
    /// values are the point. The first column is never dropped either.
    pub fn keep(&mut self, columns: &[usize]) -> &mut Self {
        self.keep = columns.to_vec();
        self
    }

    /// The table with only `keep`'s columns (in their order), and cells wrapped to `wrap`.
    fn subset(&self, keep: &[usize], wrap: Option<usize>) -> Table {
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY)
            .set_content_arrangement(ContentArrangement::Disabled);
        if let Some(header) = self.table.header() {
            let cells: Vec<Cell> = header.cell_iter().cloned().collect();
            t.set_header(keep.iter().filter_map(|&i| cells.get(i).cloned()));
        }
        for row in self.table.row_iter() {
            let cells: Vec<&Cell> = row.cell_iter().collect();
            t.add_row(
                keep.iter()
                    .map(|&i| cells.get(i).map_or_else(|| Cell::new(""), |c| (*c).clone())),
            );
        }
        for (to, from) in keep.iter().enumerate() {
            if let (true, Some(col)) = (self.numeric.contains(from), t.column_mut(to)) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        if let Some(w) = wrap {
            t.set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(u16::try_from(w).unwrap_or(u16::MAX));
        }
        t
    }

    fn header_name(&self, i: usize) -> String {
        self.table
            .header()
            .and_then(|h| h.cell_iter().nth(i))
            .map(|c| c.content().trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("column {}", i + 1))
    }
}

/// The widest line of `text`, in characters (the borders and the units used are one column
/// each).
pub fn text_width(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// How a [`Fitted`] table is shown: the columns kept (in order), those dropped to fit, and the
/// width its cells wrap to when even the kept ones do not fit.
struct Layout {
    kept: Vec<usize>,
    dropped: Vec<usize>,
    wrap: Option<usize>,
    /// Fitted to a width at all (piped output is not, and ends without a newline).
    fitted: bool,
}

impl Fitted {
    fn layout(&self) -> Layout {
        let fit = FIT.get().cloned().unwrap_or_default();
        let n = self
            .table
            .row_iter()
            .map(|r| r.cell_count())
            .chain(self.table.header().map(|h| h.cell_count()))
            .max()
            .unwrap_or(0);
        let mut keep: Vec<usize> = (0..n).collect();
        // --columns applies to the tables that have any of the named columns; the others
        // (a report prints several) stay whole.
        let named = |i: usize| {
            fit.columns
                .iter()
                .any(|c| c.eq_ignore_ascii_case(&self.header_name(i)))
        };
        if (1..n).any(named) {
            keep.retain(|&i| i == 0 || named(i));
        }
        let mut dropped = Vec::new();
        let Some(width) = fit.width else {
            return Layout {
                kept: keep,
                dropped,
                wrap: None,
                fitted: false,
            };
        };
        let mut order: Vec<usize> = self.drop_first.clone();
        order.extend((1..n).rev().filter(|i| !self.drop_first.contains(i)));
        order.retain(|i| !self.keep.contains(i));
        let mut shown = self.subset(&keep, None).to_string();
        for i in order {
            // Two columns at least (a name and its value): past that, cells wrap.
            if text_width(&shown) <= width || keep.len() <= 2 {
                break;
            }
            if let Some(at) = keep.iter().position(|&k| k == i) {
                keep.remove(at);
                dropped.push(i);
                shown = self.subset(&keep, None).to_string();
            }
        }
        dropped.sort_unstable();
        let wrap = (text_width(&shown) > width).then_some(width);
        Layout {
            kept: keep,
            dropped,
            wrap,
            fitted: true,
        }
    }

    /// Whether column `i` is shown (not dropped to fit the terminal, nor left out by
    /// `--columns`): what a footnote about it depends on.
    pub fn shows(&self, i: usize) -> bool {
        self.layout().kept.contains(&i)
    }
}

impl fmt::Display for Fitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layout = self.layout();
        let table = self.subset(&layout.kept, layout.wrap);
        if !layout.fitted {
            return write!(f, "{table}");
        }
        writeln!(f, "{table}")?;
        if !layout.dropped.is_empty() {
            let names: Vec<String> = layout
                .dropped
                .iter()
                .map(|&i| self.header_name(i))
                .collect();
            write!(
                f,
                "(left out to fit: {}; --wide shows all)",
                names.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Appends `line` to `out` broken at spaces into lines of at most `width` characters, the
/// continuation lines indented two more than the line's own indent (a word longer than the
/// width stays whole: a path is not cut).
pub fn wrap_line(line: &str, width: usize, out: &mut String) {
    if line.chars().count() <= width {
        out.push_str(line);
        out.push('\n');
        return;
    }
    let indent = line.len() - line.trim_start().len();
    let hang = " ".repeat((indent + 2).min(width / 2));
    let mut current = line[..indent].to_string();
    let mut current_len = indent;
    let mut first_word = true;
    for word in line[indent..].split(' ').filter(|w| !w.is_empty()) {
        let len = word.chars().count();
        if !first_word && current_len + 1 + len > width {
            out.push_str(&current);
            out.push('\n');
            current = hang.clone();
            current_len = hang.len();
            first_word = true;
        }
        if !first_word {
            current.push(' ');
            current_len += 1;
        }
        current.push_str(word);
        current_len += len;
        first_word = false;
    }
    out.push_str(&current);
    out.push('\n');
}

/// A table with a header row; numeric columns (given by index) are right-aligned.
pub fn new_table(header: &[&str], numeric_columns: &[usize]) -> Fitted {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    for &i in numeric_columns {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    Fitted {
        table: t,
        drop_first: Vec::new(),
        numeric: numeric_columns.to_vec(),
        keep: Vec::new(),
    }
}

/// What is shown where a value was not measured (never a zero).
pub const NA: &str = "n/a";

/// The value, or `n/a`.
pub fn or_na<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| NA.to_string(), |v| v.to_string())
}

/// Text from another process (thread names, command lines) made safe for a terminal: control
/// characters, escape sequences included, are shown escaped (`\u{1b}`) instead of acted on.
pub fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Formats KiB as a human size with binary units: `512 KiB`, `16.0 GiB`.
pub fn human_kib(kib: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut v = kib as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{kib} KiB")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(super::printable("worker-1"), "worker-1");
        assert_eq!(super::printable("a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(super::human_kib(512), "512 KiB");
        assert_eq!(super::human_kib(16 * 1024 * 1024), "16.0 GiB");
        assert_eq!(super::human_kib(1536), "1.5 MiB");
    }
}

#[cfg(test)]
mod wrap_tests {
    #[test]
    fn long_lines_wrap_at_spaces_with_a_hanging_indent() {
        let mut out = String::new();
        super::wrap_line(
            "  missing: rank(s) 1 left no trace here at all",
            20,
            &mut out,
        );
        assert_eq!(
            out,
            "  missing: rank(s) 1\n    left no trace\n    here at all\n"
        );
        for line in out.lines() {
            assert!(line.chars().count() <= 20, "{line}");
        }
        let mut out = String::new();
        super::wrap_line("short", 20, &mut out);
        assert_eq!(out, "short\n");
        // A word longer than the width is not cut.
        let mut out = String::new();
        super::wrap_line("see /a/very/long/path/to/a/file now", 10, &mut out);
        assert_eq!(out, "see\n  /a/very/long/path/to/a/file\n  now\n");
    }
}
