//! Finding a program as the shell would.

use std::path::{Path, PathBuf};

/// `name` as the shell would find it: a path as is (if it is an executable file), else the
/// first executable of that name on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    })
}

/// A regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_taken_as_given_and_names_looked_up() {
        assert_eq!(which("/bin/sh"), Some(PathBuf::from("/bin/sh")));
        assert_eq!(which("/nonexistent/x"), None);
        assert!(which("sh").is_some_and(|p| p.is_absolute() || p.components().count() > 1));
        assert_eq!(which("no-such-program-anywhere-1234"), None);
    }
}
