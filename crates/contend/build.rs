//! Embeds the two libraries contend loads into other programs, the lock probe
//! (`libcontend_probe.so`) and the sharing runtime (`libcontend_sharing.so`), so that an
//! installed contend (`cargo install`, a package) has every command without a source checkout:
//! they are built here by a nested cargo (cdylibs cannot be artifact dependencies on stable
//! Rust) into `target/embedded`, with the same profile, and included with `include_bytes!`
//! (src/embedded.rs), written on first use to the user's checked cache.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest.join("../..");
    for dir in [
        "crates/probe",
        "crates/sharing",
        "crates/tlsblock",
        "crates/trace",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("Cargo.lock").display()
    );
    println!("cargo:rerun-if-env-changed=CONTEND_EMBED_FROM");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");

    // Prebuilt libraries (a distribution's build that made them already).
    let built = if let Some(from) = std::env::var_os("CONTEND_EMBED_FROM") {
        PathBuf::from(from)
    } else {
        // OUT_DIR is TARGET/PROFILE/build/contend-HASH/out: the nested build shares TARGET, in
        // a directory of its own (a cargo holds a lock on each target directory it builds in).
        let target = out
            .ancestors()
            .nth(4)
            .map(Path::to_path_buf)
            .unwrap_or_else(|| out.clone());
        let nested = target.join("embedded");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args([
                "build",
                "--lib",
                "-p",
                "probe",
                "-p",
                "sharing",
                "--manifest-path",
            ])
            .arg(workspace.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&nested);
        if release {
            build.arg("--release");
        }
        // What cargo tells this script about contend's own build is not for the nested one.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().into_owned();
            if key.starts_with("CARGO_PKG_")
                || key.starts_with("CARGO_CFG_")
                || key.starts_with("CARGO_FEATURE_")
                || key == "CARGO_MANIFEST_DIR"
                || key == "CARGO_MANIFEST_PATH"
                || key == "CARGO_PRIMARY_PACKAGE"
                || key == "OUT_DIR"
            {
                build.env_remove(&key);
            }
        }
        let status = build
            .status()
            .expect("running cargo for the embedded libraries");
        assert!(
            status.success(),
            "building libcontend_probe.so and libcontend_sharing.so for embedding failed"
        );
        nested.join(if release { "release" } else { "debug" })
    };
    for lib in ["libcontend_probe.so", "libcontend_sharing.so"] {
        let from = built.join(lib);
        std::fs::copy(&from, out.join(lib)).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
}
