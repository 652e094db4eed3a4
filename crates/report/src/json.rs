//! What every `--json` output of contend shares: `schema_version` at its top. The outputs are
//! the serde form of typed values, and their JSON Schemas (`contend schema`) are derived from
//! the same types.

use schemars::JsonSchema;
use serde::Serialize;

/// The version of the layout of contend's `--json` outputs (`contend report`, `c2c report`,
/// `diff`, `scale`, `topo`, `where`, `bench`): raised when a key changes meaning or goes away
/// (new keys alone do not raise it).
pub const SCHEMA_VERSION: u32 = 1;

/// `inner` with `schema_version` before its own keys, in their order.
#[derive(Serialize, JsonSchema)]
pub struct Versioned<'a, T: Serialize + JsonSchema + ?Sized> {
    /// The layout's version ([`SCHEMA_VERSION`]): a reader refuses a newer one; within a
    /// version fields are only added.
    pub schema_version: u32,
    #[serde(flatten)]
    pub inner: &'a T,
}

impl<'a, T: Serialize + JsonSchema + ?Sized> Versioned<'a, T> {
    pub fn new(inner: &'a T) -> Self {
        Versioned {
            schema_version: SCHEMA_VERSION,
            inner,
        }
    }
}
