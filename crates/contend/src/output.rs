//! Files the commands write beside what they print: one way to create them, name them in a
//! status line, and turn a failure into the user's error (exit 2: the path they gave).

use crate::exit::bad_input;

/// `line-N.svg` for the top lines of a run's sharing results, in `dir`.
pub fn write_strips(
    sharing: &explain::sharing::Sharing,
    dir: &std::path::Path,
    top: usize,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| bad_input(format!("cannot create {}: {e}", dir.display())))?;
    let strips = sharing.strips(top);
    for (name, svg) in &strips {
        let path = dir.join(name);
        std::fs::write(&path, svg)
            .map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
    }
    crate::ui::status(format_args!(
        "wrote {} heat strip(s) into {}",
        strips.len(),
        dir.display()
    ));
    Ok(())
}
