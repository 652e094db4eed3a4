//! CPU sets in the two forms the kernel prints them: lists (`0-3,8,10-11`) and hex masks
//! (`00000000,0000ff0f`, 32-bit words, most significant first).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// Largest CPU number accepted from any input: guards against `0-4294967295` in a hostile file
/// (Linux's own limit, CONFIG_NR_CPUS, is 8192).
pub const MAX_CPU: u32 = 65_535;

/// An ordered set of CPU (or NUMA node) numbers.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(BTreeSet<u32>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    #[error("`{text}` is not a CPU list: {why} (expected a form like `0-3,8,10-11`)")]
    BadList { text: String, why: String },
    #[error("`{text}` is not a CPU mask: {why} (expected comma-separated hex words like `0000ff0f,00000001`)")]
    BadMask { text: String, why: String },
}

/// Removes what real sysfs files carry around the value: newlines, spaces, and the trailing NUL
/// bytes some kernels leave in node and CPU-set files.
pub fn trim_sysfs(s: &str) -> &str {
    s.trim_matches(|c: char| c == '\0' || c.is_whitespace())
}

impl CpuSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the kernel's list form. Also accepts a stride (`0-15:2`, as taskset does).
    pub fn parse_list(text: &str) -> Result<Self, CpuSetError> {
        let bad = |why: &str| CpuSetError::BadList {
            text: text.to_string(),
            why: why.to_string(),
        };
        let mut set = CpuSet::new();
        let body = trim_sysfs(text);
        if body.is_empty() {
            return Ok(set);
        }
        for part in body.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad("empty element"));
            }
            let (range, stride) = match part.split_once(':') {
                Some((r, s)) => {
                    let s: u32 = s.parse().map_err(|_| bad("stride is not a number"))?;
                    if s == 0 {
                        return Err(bad("stride must be at least 1"));
                    }
                    (r, s)
                }
                None => (part, 1),
            };
            let num = |s: &str| -> Result<u32, CpuSetError> {
                let n: u32 = s
                    .trim()
                    .parse()
                    .map_err(|_| bad(&format!("`{s}` is not a number")))?;
                if n > MAX_CPU {
                    return Err(bad(&format!(
                        "{n} exceeds the largest CPU number {MAX_CPU}"
                    )));
                }
                Ok(n)
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    let n = num(range)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(bad(&format!("range {lo}-{hi} runs backwards")));
            }
            set.0.extend((lo..=hi).step_by(stride as usize));
        }
        Ok(set)
    }

    /// Parses the kernel's mask form: comma-separated 32-bit hex words, most significant first.
    pub fn parse_mask(text: &str) -> Result<Self, CpuSetError> {
        let bad = |why: &str| CpuSetError::BadMask {
            text: text.to_string(),
            why: why.to_string(),
        };
        let body = trim_sysfs(text);
        let mut set = CpuSet::new();
        if body.is_empty() {
            return Ok(set);
        }
        let words: Vec<&str> = body.split(',').collect();
        if words.len() as u64 * 32 > u64::from(MAX_CPU) + 1 {
            return Err(bad("more words than any machine has CPUs"));
        }
        for (i, word) in words.iter().rev().enumerate() {
            let word = word.trim();
            if word.is_empty() || word.len() > 8 {
                return Err(bad("each word must be 1 to 8 hex digits"));
            }
            let value = u32::from_str_radix(word, 16).map_err(|_| bad("not hexadecimal"))?;
            for bit in 0..32 {
                if value & (1 << bit) != 0 {
                    set.0.insert(i as u32 * 32 + bit);
                }
            }
        }
        Ok(set)
    }

    pub fn from_iter_u32(iter: impl IntoIterator<Item = u32>) -> Self {
        CpuSet(iter.into_iter().collect())
    }

    pub fn insert(&mut self, cpu: u32) -> bool {
        self.0.insert(cpu)
    }
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
    pub fn first(&self) -> Option<u32> {
        self.0.first().copied()
    }
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }
    pub fn is_disjoint(&self, other: &CpuSet) -> bool {
        self.0.is_disjoint(&other.0)
    }

    /// CPUs in a given order (not a set: the order matters), comma-separated: `0,8,1,9`.
    pub fn list_in_order(cpus: &[u32]) -> String {
        cpus.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The kernel's list form, e.g. `0-3,8,10-11`; empty string for the empty set.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while end
                .checked_add(1)
                .is_some_and(|next| iter.peek() == Some(&next))
            {
                end = iter.next().unwrap_or(end);
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse_list(s)
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(none)")
        } else {
            f.write_str(&self.to_list())
        }
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list())
    }
}

/// Serialised as the list string, which is what people paste into taskset and numactl.
impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list())
    }
}

/// The list string's schema: what `Serialize` writes.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for CpuSet {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CpuSet".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "CPU list as taskset and numactl take it (\"0-3,8\"; \"\" is the empty set)",
            "pattern": "^([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?$"
        })
    }
}

/// Read back from the list string (`""` is the empty set).
impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        let text = String::deserialize(d)?;
        CpuSet::parse_list(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip() {
        let s = CpuSet::parse_list("0-3,8,10-11\n\0").unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse_list("").unwrap().len(), 0);
        assert_eq!(CpuSet::parse_list("0-7:2").unwrap().to_list(), "0,2,4,6");
    }

    #[test]
    fn list_rejects_garbage() {
        for bad in ["3-1", "a", "1,,2", "0-99999999", "0-3:0", "-"] {
            assert!(CpuSet::parse_list(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn mask_words_are_most_significant_first() {
        let s = CpuSet::parse_mask("00000001,0000000f\n").unwrap();
        assert_eq!(s.to_list(), "0-3,32");
        let s = CpuSet::parse_mask("00aa00aa").unwrap();
        assert_eq!(s.to_list(), "1,3,5,7,17,19,21,23");
        assert!(CpuSet::parse_mask("xyz").is_err());
        assert!(CpuSet::parse_mask("123456789").is_err());
    }
}
