//! Where the program runs: the CPUs asked for by list, layout file or fill order.

use crate::RecordError;
use std::path::PathBuf;

/// The CPUs asked for (`--cpus`, `--layout`, `--fill` with `--cores`); all `None`: anywhere.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// A CPU list such as `0-3,8`.
    pub cpus: Option<String>,
    /// A file listing CPU numbers in the order they are given out.
    pub layout: Option<PathBuf>,
    /// CPUs taken in this order from the machine's topology.
    pub fill: Option<topology::FillOrder>,
    /// With `layout` or `fill`: how many CPUs to take.
    pub cores: Option<usize>,
    /// CPUs already chosen, in the order they are given out (`scale`'s plan).
    pub chosen: Option<Vec<u32>>,
}

impl Placement {
    /// Whether any CPUs were asked for.
    pub fn is_asked(&self) -> bool {
        self.cpus.is_some() || self.layout.is_some() || self.fill.is_some() || self.chosen.is_some()
    }

    /// The CPUs asked for, in the order they are given out, checked against `machine`;
    /// `None` when the program may run anywhere.
    pub fn resolve(&self, machine: &topology::Topology) -> Result<Option<Vec<u32>>, RecordError> {
        let order: Vec<u32> = if let Some(chosen) = &self.chosen {
            chosen.clone()
        } else if let Some(list) = &self.cpus {
            let set: topology::CpuSet = list
                .parse()
                .map_err(|e| RecordError::bad(format!("--cpus {list}: {e}")))?;
            set.iter().collect()
        } else if let Some(path) = &self.layout {
            let text = trace::files::read_regular_to_string(path, &trace::files::OPTION_FILE)
                .map_err(|e| RecordError::bad(format!("--layout: {e}")))?;
            topology::parse_layout(&text)
                .map_err(|e| RecordError::bad(format!("--layout {}: {e}", path.display())))?
        } else if let Some(order) = self.fill {
            machine.fill_order(order)
        } else {
            if self.cores.is_some() {
                return Err(RecordError::bad(
                    "--cores needs --fill or --layout to say which CPUs to take",
                ));
            }
            return Ok(None);
        };
        let order = match self.cores {
            Some(0) => return Err(RecordError::bad("--cores must be at least 1")),
            Some(n) if n > order.len() => {
                return Err(RecordError::bad(format!(
                    "--cores {n}: only {} CPU(s) to choose from ({})",
                    order.len(),
                    topology::CpuSet::list_in_order(&order)
                )))
            }
            Some(n) => order[..n].to_vec(),
            None => order,
        };
        let set: topology::CpuSet = order.iter().copied().collect();
        machine.check_cpus(&set).map_err(RecordError::bad)?;
        Ok(Some(order))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_checked_against_the_machine() {
        let m = topology::Topology::synthetic("1x4x1").unwrap();
        assert_eq!(Placement::default().resolve(&m).unwrap(), None);
        let list = Placement {
            cpus: Some("2,0".into()),
            ..Placement::default()
        };
        assert_eq!(list.resolve(&m).unwrap(), Some(vec![0, 2]));
        let fill = Placement {
            fill: Some(topology::FillOrder::Compact),
            cores: Some(2),
            ..Placement::default()
        };
        assert_eq!(fill.resolve(&m).unwrap().map(|c| c.len()), Some(2));
        let chosen = Placement {
            chosen: Some(vec![3, 1]),
            ..Placement::default()
        };
        assert_eq!(
            chosen.resolve(&m).unwrap(),
            Some(vec![3, 1]),
            "in the order given"
        );
        for bad in [
            Placement {
                cpus: Some("9".into()),
                ..Placement::default()
            },
            Placement {
                cores: Some(2),
                ..Placement::default()
            },
            Placement {
                fill: Some(topology::FillOrder::Compact),
                cores: Some(0),
                ..Placement::default()
            },
            Placement {
                fill: Some(topology::FillOrder::Compact),
                cores: Some(5),
                ..Placement::default()
            },
        ] {
            assert!(
                matches!(bad.resolve(&m), Err(RecordError::BadInput(_))),
                "{bad:?}"
            );
        }
    }
}
