//! Every `--json` output a test reads is checked against the JSON Schema `contend schema`
//! prints for it: the schemas are derived from the serialised types, and this is where the
//! two are seen to agree on real outputs.

use super::{contend, stderr};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// `contend schema NAME`, parsed, once per name.
fn schema(name: &str) -> Value {
    static SCHEMAS: OnceLock<Mutex<HashMap<String, Value>>> = OnceLock::new();
    let mut known = SCHEMAS.get_or_init(Default::default).lock().unwrap();
    known
        .entry(name.to_string())
        .or_insert_with(|| {
            let out = contend(&["schema", name]);
            assert!(
                out.status.success(),
                "contend schema {name}: {}",
                stderr(&out)
            );
            serde_json::from_slice(&out.stdout).expect("contend schema prints JSON")
        })
        .clone()
}

/// Panics with every violation when `value` does not conform to the schema of output `name`
/// (`report`, `c2c-report`, `bench-atomic`, ...).
pub fn conforms(name: &str, value: &Value) {
    let schema = schema(name);
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("the schema of {name} is not a valid JSON Schema: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(10)
        .map(|e| format!("at {}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "this {name} JSON does not conform to `contend schema {name}`:\n  {}",
        errors.join("\n  ")
    );
}
