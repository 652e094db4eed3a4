//! Table style shared by every terminal table, so all commands look alike.

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, ContentArrangement, Table};

/// A table with a header row; numeric columns (given by index) are right-aligned.
pub fn new_table(header: &[&str], numeric_columns: &[usize]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    for &i in numeric_columns {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
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
