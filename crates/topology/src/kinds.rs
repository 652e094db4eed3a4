//! Core kinds on hybrid machines, and the facts taken from /proc/cpuinfo.
//!
//! Evidence is taken in order of reliability: the hybrid PMU directories Intel kernels create
//! (`/sys/devices/cpu_core/cpus`, `/sys/devices/cpu_atom/cpus`); on Arm the core's part number
//! (MIDR, from /proc/cpuinfo or `regs/identification/midr_el1`); then performance hints that
//! separate big from little cores (`acpi_cppc/highest_perf`, `cpu_capacity`,
//! `cpufreq/cpuinfo_max_freq`). Hints are grouped by relative gaps, because favoured cores
//! (Intel Turbo Boost Max 3.0) and per-cluster calibration make values differ slightly within
//! one kind: 64 and 67 are one kind, 39 another.

use crate::cpuset::CpuSet;
use crate::tree::{Found, Tree, CPUINFO};
use crate::{CoreKind, TopologyError};
use std::collections::BTreeMap;
use std::path::Path;

/// Two hint values belong to different kinds when the larger exceeds the smaller by this factor.
const KIND_GAP: f64 = 1.15;

#[derive(Debug, Default, Clone)]
pub(crate) struct CpuInfo {
    pub arch: Option<String>,
    model_names: Vec<String>,
    /// processor number -> (implementer, part) on Arm
    arm_parts: BTreeMap<u32, (u32, u32)>,
}

fn parse_hex(s: &str) -> Option<u32> {
    u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

impl CpuInfo {
    pub fn read(tree: &Tree, path: &Path) -> Result<CpuInfo, TopologyError> {
        Ok(match tree.read(path, CPUINFO)? {
            Found::Text(t) => CpuInfo::parse(&t),
            Found::Absent | Found::Unreadable(_) => CpuInfo::default(),
        })
    }

    pub fn parse(text: &str) -> CpuInfo {
        let mut info = CpuInfo::default();
        let mut processor: Option<u32> = None;
        let mut implementer: Option<u32> = None;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "processor" => {
                    processor = value.parse().ok();
                    implementer = None;
                }
                "vendor_id" => info.arch = Some("x86_64".into()),
                "model name" | "cpu" if !value.is_empty() => {
                    if key == "cpu" && value.starts_with("POWER") {
                        info.arch = Some("ppc64".into());
                    }
                    if !info.model_names.iter().any(|m| m == value) {
                        info.model_names.push(value.to_string());
                    }
                }
                "CPU implementer" => {
                    info.arch = Some("aarch64".into());
                    implementer = parse_hex(value);
                }
                "CPU part" => {
                    if let (Some(p), Some(imp), Some(part)) =
                        (processor, implementer, parse_hex(value))
                    {
                        info.arm_parts.insert(p, (imp, part));
                    }
                }
                _ => {}
            }
        }
        info
    }

    pub fn model(&self) -> Option<String> {
        if !self.model_names.is_empty() {
            return Some(self.model_names.join(" + "));
        }
        let mut names: Vec<String> = Vec::new();
        for &(imp, part) in self.arm_parts.values() {
            let n = arm_core_name(imp, part);
            if !names.contains(&n) {
                names.push(n);
            }
        }
        (!names.is_empty()).then(|| names.join(" + "))
    }
}

/// Names of Arm Ltd. cores by MIDR part number (implementer 0x41).
fn arm_core_name(implementer: u32, part: u32) -> String {
    let name = match (implementer, part) {
        (0x41, 0xd03) => "Cortex-A53",
        (0x41, 0xd05) => "Cortex-A55",
        (0x41, 0xd07) => "Cortex-A57",
        (0x41, 0xd08) => "Cortex-A72",
        (0x41, 0xd09) => "Cortex-A73",
        (0x41, 0xd0a) => "Cortex-A75",
        (0x41, 0xd0b) => "Cortex-A76",
        (0x41, 0xd0c) => "Neoverse-N1",
        (0x41, 0xd0d) => "Cortex-A77",
        (0x41, 0xd40) => "Neoverse-V1",
        (0x41, 0xd41) => "Cortex-A78",
        (0x41, 0xd44) => "Cortex-X1",
        (0x41, 0xd46) => "Cortex-A510",
        (0x41, 0xd47) => "Cortex-A710",
        (0x41, 0xd48) => "Cortex-X2",
        (0x41, 0xd49) => "Neoverse-N2",
        (0x41, 0xd4d) => "Cortex-A715",
        (0x41, 0xd4e) => "Cortex-X3",
        (0x41, 0xd4f) => "Neoverse-V2",
        (0x41, 0xd80) => "Cortex-A520",
        (0x41, 0xd81) => "Cortex-A720",
        (0x41, 0xd82) => "Cortex-X4",
        (0x41, 0xd84) => "Neoverse-V3",
        (0x41, 0xd85) => "Cortex-X925",
        (0x41, 0xd87) => "Cortex-A725",
        (0x41, 0xd8e) => "Neoverse-N3",
        _ => return format!("implementer {implementer:#x} part {part:#x}"),
    };
    name.to_string()
}

/// Finds core kinds; empty unless more than one kind is found.
pub(crate) fn detect(
    tree: &Tree,
    cpu_dir: &Path,
    online: &CpuSet,
    cpuinfo: &CpuInfo,
) -> Result<Vec<CoreKind>, TopologyError> {
    // 1. Intel hybrid PMUs.
    let pmu = |name: &str| -> Result<Option<CpuSet>, TopologyError> {
        Ok(tree
            .text(&tree.root().join(format!("sys/devices/{name}/cpus")))?
            .and_then(|t| CpuSet::parse_list(&t).ok())
            .map(|s| s.intersection(online)))
    };
    if let (Some(p), Some(e)) = (pmu("cpu_core")?, pmu("cpu_atom")?) {
        if !p.is_empty() && !e.is_empty() {
            return Ok(vec![
                CoreKind {
                    name: "P-core".into(),
                    cpus: p,
                    evidence: "/sys/devices/cpu_core/cpus".into(),
                },
                CoreKind {
                    name: "E-core".into(),
                    cpus: e,
                    evidence: "/sys/devices/cpu_atom/cpus".into(),
                },
            ]);
        }
    }

    // 2. Arm part numbers, from /proc/cpuinfo or MIDR_EL1.
    let mut parts: BTreeMap<(u32, u32), CpuSet> = BTreeMap::new();
    let mut evidence = "/proc/cpuinfo CPU part";
    for cpu in online.iter() {
        let from_info = cpuinfo.arm_parts.get(&cpu).copied();
        let from_midr = || -> Result<Option<(u32, u32)>, TopologyError> {
            let path = cpu_dir.join(format!("cpu{cpu}/regs/identification/midr_el1"));
            let Some(midr) = tree.text(&path)? else {
                return Ok(None);
            };
            let Ok(v) = u64::from_str_radix(midr.trim_start_matches("0x"), 16) else {
                return Ok(None);
            };
            Ok(Some((((v >> 24) & 0xff) as u32, ((v >> 4) & 0xfff) as u32)))
        };
        let key = match from_info {
            Some(k) => k,
            None => match from_midr()? {
                Some(k) => {
                    evidence = "regs/identification/midr_el1";
                    k
                }
                None => {
                    parts.clear();
                    break;
                }
            },
        };
        parts.entry(key).or_default().insert(cpu);
    }
    if parts.len() > 1 {
        let mut kinds: Vec<CoreKind> = parts
            .into_iter()
            .map(|((imp, part), cpus)| CoreKind {
                name: arm_core_name(imp, part),
                cpus,
                evidence: evidence.into(),
            })
            .collect();
        kinds.sort_by_key(|k| k.cpus.first());
        return Ok(kinds);
    }

    // 3. Performance hints, grouped by gaps.
    for (file, label) in [
        ("acpi_cppc/highest_perf", "highest_perf"),
        ("cpu_capacity", "cpu_capacity"),
        ("cpufreq/cpuinfo_max_freq", "max_freq_khz"),
    ] {
        let mut values: BTreeMap<u32, u64> = BTreeMap::new();
        for cpu in online.iter() {
            match tree
                .text(&cpu_dir.join(format!("cpu{cpu}/{file}")))?
                .and_then(|t| t.parse().ok())
            {
                Some(v) => {
                    values.insert(cpu, v);
                }
                None => {
                    values.clear();
                    break;
                }
            }
        }
        if values.is_empty() {
            continue;
        }
        let classes = gap_classes(values.values().copied());
        if classes.len() < 2 {
            continue;
        }
        let n = classes.len();
        return Ok(classes
            .iter()
            .enumerate()
            .rev() // fastest class first
            .map(|(i, &(lo, hi))| {
                let cpus: CpuSet = values
                    .iter()
                    .filter(|(_, &v)| v >= lo && v <= hi)
                    .map(|(&c, _)| c)
                    .collect();
                let name = match (n, i) {
                    (2, 1) => "performance".to_string(),
                    (2, 0) => "efficiency".to_string(),
                    _ => format!("class {}", n - i),
                };
                let range = if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                };
                CoreKind {
                    name,
                    cpus,
                    evidence: format!("{file} ({label} {range})"),
                }
            })
            .collect());
    }
    Ok(Vec::new())
}

/// Sorted value ranges, split wherever the next value exceeds the previous by [`KIND_GAP`].
fn gap_classes(values: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut v: Vec<u64> = values.collect();
    v.sort_unstable();
    v.dedup();
    let mut classes: Vec<(u64, u64)> = Vec::new();
    for x in v {
        match classes.last_mut() {
            Some((_, hi)) if (x as f64) <= (*hi as f64) * KIND_GAP => *hi = x,
            _ => classes.push((x, x)),
        }
    }
    classes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_split_big_from_little() {
        assert_eq!(
            gap_classes([64, 67, 39, 64].into_iter()),
            vec![(39, 39), (64, 67)]
        );
        assert_eq!(
            gap_classes([718, 997, 731, 1017, 1024].into_iter()),
            vec![(718, 731), (997, 1024)]
        );
        assert_eq!(gap_classes([100, 100].into_iter()).len(), 1);
    }

    #[test]
    fn cpuinfo_arm_parts() {
        let info = CpuInfo::parse(
            "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd87\n\nprocessor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd85\n",
        );
        assert_eq!(info.arch.as_deref(), Some("aarch64"));
        assert_eq!(info.model().as_deref(), Some("Cortex-A725 + Cortex-X925"));
    }
}
