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
    fn human_sizes() {
        assert_eq!(super::human_kib(512), "512 KiB");
        assert_eq!(super::human_kib(16 * 1024 * 1024), "16.0 GiB");
        assert_eq!(super::human_kib(1536), "1.5 MiB");
    }
}
