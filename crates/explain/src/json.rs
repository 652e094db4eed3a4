//! The JSON form of the model (`contend report --json`): each section's own serde form, with
//! the names of the addresses it exposes put beside them so that the JSON stands alone (a
//! script reading it need not resolve anything), and `schema_version` at the top.

use crate::{Run, SCHEMA_VERSION};
use serde::Serialize;
use serde_json::Value;

/// `inner` with `schema_version` before its own keys, in their order.
#[derive(Serialize)]
pub(crate) struct Versioned<'a, T: Serialize + ?Sized> {
    pub schema_version: u32,
    #[serde(flatten)]
    pub inner: &'a T,
}

impl<'a, T: Serialize + ?Sized> Versioned<'a, T> {
    pub fn new(inner: &'a T) -> Self {
        Versioned {
            schema_version: SCHEMA_VERSION,
            inner,
        }
    }
}

/// `value`'s JSON with `schema_version` at its top level.
pub(crate) fn with_schema_version<T: Serialize + ?Sized>(
    value: &T,
) -> Result<Value, serde_json::Error> {
    let mut v = serde_json::to_value(value)?;
    if let Value::Object(map) = &mut v {
        map.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    Ok(v)
}

impl Serialize for Run {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl Run {
    fn to_value(&self) -> Result<Value, serde_json::Error> {
        let mut v = with_schema_version(&self.summary)?;
        if let Some(a) = &self.activity {
            v["activity"] = serde_json::to_value(&a.view)?;
        }
        if let Some(l) = &self.locks {
            v["locks"] = locks_value(l)?;
        }
        if let Some(m) = &self.mpi {
            v["mpi"] = mpi_value(m)?;
        }
        if let Some(s) = &self.sharing {
            v["sharing"] = serde_json::to_value(s)?;
        }
        Ok(v)
    }
}

/// The lock report, each lock with its name (the global, or the heap block and its
/// allocation) and each call site with its function and `file:line`.
fn locks_value(l: &crate::locks::Locks) -> Result<Value, serde_json::Error> {
    let r = &l.report;
    let mut v = serde_json::to_value(r)?;
    // A measured zero says where it was measured; what was not measured is listed beside it.
    if let Some(n) = l.coverage.probe_processes {
        v["probe_processes"] = n.into();
    }
    if !l.coverage.not_measured.is_empty() {
        v["not_measured"] = serde_json::to_value(&l.coverage.not_measured)?;
    }
    // A condition variable's sites are a list of addresses: their names in a list beside it.
    if let Some(list) = v.get_mut("conds").and_then(Value::as_array_mut) {
        for (entry, cond) in list.iter_mut().zip(&r.conds) {
            let named = cond
                .sites
                .iter()
                .map(|&s| named_site(s, l.sites.get(&s)))
                .collect::<Result<Vec<_>, _>>()?;
            entry["call_sites"] = Value::Array(named);
        }
    }
    let Some(list) = v.get_mut("locks").and_then(Value::as_array_mut) else {
        return Ok(v);
    };
    for (entry, lock) in list.iter_mut().zip(&r.locks) {
        if let Some(name) = l.naming.locks.get(&lock.lock) {
            entry["lock"]["name"] = name.clone().into();
        }
        // The lock's replayed what-if beside its figures (also in `what_if.locks`).
        if let Some(p) = r
            .what_if
            .as_ref()
            .and_then(|w| w.locks.iter().find(|p| p.lock == lock.lock))
        {
            entry["what_if"] = serde_json::to_value(p)?;
        }
        if let Some(a) = l.naming.allocations.get(&lock.lock) {
            entry["lock"]["allocation"] = serde_json::to_value(a)?;
        }
        let Some(rows) = entry.get_mut("sites").and_then(Value::as_array_mut) else {
            continue;
        };
        for (row, site) in rows.iter_mut().zip(&lock.sites) {
            let named = site.site.and_then(|s| l.sites.get(&s));
            if let (Some(named), Value::Object(row)) = (named, row) {
                if let Value::Object(names) = serde_json::to_value(named)? {
                    row.extend(names);
                }
            }
        }
    }
    Ok(v)
}

/// `{"site": address, "function": ..., "location": ...}` (the names when resolved).
fn named_site(
    address: u64,
    site: Option<&crate::names::CallSite>,
) -> Result<Value, serde_json::Error> {
    let mut v = match site {
        Some(site) => serde_json::to_value(site)?,
        None => Value::Object(Default::default()),
    };
    v["site"] = address.into();
    Ok(v)
}

/// The MPI analysis with its site names, and a name for each call site row (`MPI_Recv at main
/// (app.c:42)`), which `contend diff` matches rows by: site ids are only indices into this
/// run's names.
fn mpi_value(m: &crate::mpi::Mpi) -> Result<Value, serde_json::Error> {
    let site_name = |site: Option<u64>| {
        site.and_then(|i| m.site_names.get(i as usize))
            .map_or("(unknown site)", String::as_str)
    };
    let mut v = serde_json::to_value(&m.run)?;
    v["site_names"] = serde_json::to_value(&m.site_names)?;
    if let Some(calls) = v.get_mut("calls").and_then(Value::as_array_mut) {
        for (entry, call) in calls.iter_mut().zip(&m.run.calls) {
            entry["name"] = format!("{} at {}", call.function, site_name(call.site)).into();
        }
    }
    let sites = v
        .get_mut("waits")
        .and_then(|w| w.get_mut("sites"))
        .and_then(Value::as_array_mut);
    if let Some(sites) = sites {
        for (entry, w) in sites.iter_mut().zip(&m.run.waits.sites) {
            // The pattern as the JSON spells it (`late-sender`).
            let pattern = serde_json::to_value(w.pattern)?;
            entry["name"] = format!(
                "{} at {}",
                pattern.as_str().unwrap_or("?"),
                site_name(w.site)
            )
            .into();
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::CallSite;

    #[test]
    fn a_condition_variables_sites_are_named_beside_their_addresses() {
        let mut report = analysis::locks::analyze(
            &analysis::locks::LockInput::default(),
            &analysis::locks::Filter::default(),
        );
        report.conds.push(analysis::locks::CondStats {
            pid: 1,
            address: 0x5000,
            waits: 3,
            timeouts: 0,
            wait_ns: 300,
            max_wait_ns: 200,
            sites: vec![0x10, 0x20],
        });
        let named = CallSite {
            label: "wait_for_work (pool.c:12)".into(),
            function: Some("wait_for_work".into()),
            location: Some("pool.c:12".into()),
        };
        let locks = crate::locks::Locks {
            report,
            naming: report::locks::Naming::default(),
            sites: [(0x10, named)].into_iter().collect(),
            wakeups: Vec::new(),
            path: Vec::new(),
            files: Vec::new(),
            coverage: report::locks::Coverage::default(),
        };
        let v = locks_value(&locks).unwrap();
        let sites = &v["conds"][0]["call_sites"];
        assert_eq!(
            sites[0],
            serde_json::json!({"site": 0x10, "function": "wait_for_work", "location": "pool.c:12"})
        );
        // Unresolved: the address alone.
        assert_eq!(sites[1], serde_json::json!({"site": 0x20}));
    }
}
