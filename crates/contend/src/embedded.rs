//! The lock probe and the sharing runtime that contend loads into other programs, built into
//! the executable (build.rs) so that an installed contend needs no source checkout. On first
//! use each is written to the user's cache (`observe::cache`: owned by the user, mode 0700,
//! checked before every use, each file recorded with its sha256), under a name that carries
//! its content hash, so that two versions of contend never load each other's library. A
//! library beside the executable (a development build) or named by `CONTEND_PROBE` /
//! `CONTEND_SHARING_LIB` is preferred (recorder::probe, ccwrap::runtime).

use observe::cache::{Cache, Lookup};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::OnceLock;

static PROBE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libcontend_probe.so"));
static SHARING: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libcontend_sharing.so"));

/// The cache, opened once and kept for the process: a temporary one (the user's refused) is
/// removed when dropped, and the programs this run starts load from it.
static CACHE: OnceLock<Result<Cache, String>> = OnceLock::new();

/// Makes the two libraries available to the commands that load them.
pub fn install() {
    recorder::probe::set_embedded(|| extract("libcontend_probe", PROBE));
    ccwrap::set_embedded(|| extract("libcontend_sharing", SHARING));
}

/// `STEM-HASH.so` in the cache, written there unless it already is, unchanged.
fn extract(stem: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let cache = CACHE
        .get_or_init(|| {
            Cache::open(&mut |why| crate::ui::warning(why)).map_err(|e| {
                format!("contend cannot open a cache for the {stem}.so it carries: {e}")
            })
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{stem}-{hex}.so");
    match cache.get(&name) {
        Lookup::Found(path) => return Ok(path),
        Lookup::Absent => {}
        Lookup::Changed(why) => crate::ui::warning(format!("{why}: written again")),
    }
    cache.put(&name, bytes).map_err(|e| {
        format!(
            "cannot write {name} into contend's cache {}: {e} (free some space, or set \
             CONTEND_CACHE to a directory of yours)",
            cache.path().display()
        )
    })
}
