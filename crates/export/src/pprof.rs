//! pprof profiles: a [`Profile`] of stack [`Sample`]s written as gzipped `profile.proto`,
//! the format of `go tool pprof`, the pprof web UI and many other profilers' viewers.
//!
//! # What is produced
//!
//! The `perftools.profiles.Profile` message of pprof's `proto/profile.proto` (fields 1-14;
//! field 15, a documentation link, is not written), gzip-compressed as pprof expects (`.pb.gz`):
//! `sample_type`, `sample` (location ids leaf first, values, string labels), deduplicated
//! `mapping` (one per [`Frame::module`], with `has_functions`, `has_filenames` and
//! `has_line_numbers` saying what the frames carry), `location` (one per distinct module,
//! address, function and line), `function` (one per distinct name and file), the
//! `string_table` (entry 0 is `""`), `time_nanos`, `duration_nanos`, `period_type`, `period`,
//! `comment` and `default_sample_type`. The first mapping is the first module that is not a
//! shared library (pprof reports the first mapping as the main binary). Frames without a module get no mapping (mapping id
//! 0), which pprof accepts; nothing is left for pprof to symbolize when every frame has a
//! function name.
//!
//! # Lock profiles
//!
//! [`Profile::lock_contention`] uses the sample types of Go's own mutex and block profiles,
//! `contentions/count` then `delay/nanoseconds`, with period type `contentions/count` and
//! period 1, so `go tool pprof` shows contended acquisitions and time waited per call stack
//! exactly as it does for a Go program (`-sample_index=contentions` or `=delay`, the default
//! being the last type, `delay`).
//!
//! # Verified with
//!
//! `go tool pprof -raw`, `-top` and `-traces` (Go 1.26) on written profiles in
//! `tests/pprof_go.rs`, and a prost round trip of the decompressed bytes in this module's
//! unit tests.

use std::collections::HashMap;
use std::io::Write;

use flate2::write::GzEncoder;
use prost::Message;

use crate::ExportError;

/// A sample type or the period type: what a value counts and in which unit, e.g.
/// `("delay", "nanoseconds")`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// pprof's `type`, e.g. `contentions`; what `-sample_index=` selects.
    pub name: String,
    /// e.g. `count`, `nanoseconds`, `bytes`.
    pub unit: String,
}

impl ValueType {
    pub fn new(name: impl Into<String>, unit: impl Into<String>) -> Self {
        ValueType {
            name: name.into(),
            unit: unit.into(),
        }
    }
}

/// A profile: samples of call stacks, each with one value per sample type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    pub sample_types: Vec<ValueType>,
    pub samples: Vec<Sample>,
    /// Wall-clock start of the profile, nanoseconds since the Unix epoch; 0 if unknown.
    pub time_ns: i64,
    /// How long the profile covers (written saturated at `i64::MAX`).
    pub duration_ns: u64,
    /// What one sampling period counts, with `period` the sampling period.
    pub period_type: Option<ValueType>,
    pub period: i64,
    /// Free-form lines shown by `pprof -comments`.
    pub comments: Vec<String>,
    /// The sample type pprof shows by default (by name); `None` leaves pprof's default,
    /// the last sample type.
    pub default_sample_type: Option<String>,
}

/// One sampled stack with its values (one per sample type, same order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Innermost (leaf) frame first, like pprof.
    pub stack: Vec<Frame>,
    pub values: Vec<i64>,
    /// String labels, e.g. `("lock", "0x7f3a…")`; pprof filters and groups by them
    /// (`-tagfocus`, `-tags`).
    pub labels: Vec<(String, String)>,
}

/// One stack frame, symbolized as far as it could be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Frame {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Instruction address; 0 when unknown. Part of the location's identity.
    pub address: u64,
    /// The shared object or executable, e.g. `/usr/lib/x86_64-linux-gnu/libc.so.6`.
    pub module: Option<String>,
}

/// Go's name for the number of contended acquisitions: `("contentions", "count")`.
pub fn contentions() -> ValueType {
    ValueType::new("contentions", "count")
}

/// Go's name for the time spent waiting: `("delay", "nanoseconds")`.
pub fn delay() -> ValueType {
    ValueType::new("delay", "nanoseconds")
}

impl Profile {
    /// An empty lock-contention profile in Go's layout: values are
    /// `[contentions, delay_ns]`.
    pub fn lock_contention() -> Self {
        Profile {
            sample_types: vec![contentions(), delay()],
            period_type: Some(contentions()),
            period: 1,
            ..Profile::default()
        }
    }

    /// The index of the sample type called `name`, for [`Sample::values`] and
    /// [`crate::folded::Options::value_index`].
    pub fn value_index(&self, name: &str) -> Option<usize> {
        self.sample_types.iter().position(|t| t.name == name)
    }
}

/// Writes `profile` as gzipped `profile.proto`. Fails, writing nothing, when the profile has
/// no sample types (pprof rejects such profiles), a sample's value count differs from the
/// number of sample types, or `default_sample_type` names no sample type.
pub fn write(profile: &Profile, out: impl Write) -> Result<(), ExportError> {
    let bytes = to_proto(profile)?.encode_to_vec();
    let mut gz = GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?.flush()?;
    Ok(())
}

/// Builds the `profile.proto` message (uncompressed) that [`write()`] writes.
pub fn to_proto(profile: &Profile) -> Result<proto::Profile, ExportError> {
    if profile.sample_types.is_empty() {
        return Err(ExportError::invalid(
            "a pprof profile needs at least one sample type (pprof rejects profiles without)",
        ));
    }
    let mut b = Builder::default();
    b.string(""); // index 0 must be the empty string
    let n_types = profile.sample_types.len();
    let mut out = proto::Profile {
        sample_type: profile
            .sample_types
            .iter()
            .map(|t| b.value_type(t))
            .collect(),
        ..Default::default()
    };
    for (i, s) in profile.samples.iter().enumerate() {
        if s.values.len() != n_types {
            return Err(ExportError::invalid(format!(
                "sample {i} has {} values but the profile has {n_types} sample types",
                s.values.len()
            )));
        }
        let location_id = s.stack.iter().map(|f| b.location(f)).collect();
        let label = s
            .labels
            .iter()
            .map(|(k, v)| proto::Label {
                key: b.string(k),
                str: b.string(v),
                ..Default::default()
            })
            .collect();
        out.sample.push(proto::Sample {
            location_id,
            value: s.values.clone(),
            label,
        });
    }
    if let Some(name) = &profile.default_sample_type {
        if profile.value_index(name).is_none() {
            return Err(ExportError::invalid(format!(
                "default sample type {name:?} is not one of the profile's sample types"
            )));
        }
        out.default_sample_type = b.string(name);
    }
    out.time_nanos = profile.time_ns;
    out.duration_nanos = i64::try_from(profile.duration_ns).unwrap_or(i64::MAX);
    out.period_type = profile.period_type.as_ref().map(|t| b.value_type(t));
    out.period = profile.period;
    out.comment = profile.comments.iter().map(|c| b.string(c)).collect();
    out.mapping = b.mappings;
    // pprof takes the first mapping for the main binary (its "File:" line): put the first
    // module that is not a shared library there. Ids stay as they are.
    if let Some(i) = out.mapping.iter().position(|m| {
        let name = &b.strings[m.filename as usize];
        !name.starts_with('[') && !is_shared_library(name)
    }) {
        out.mapping[..=i].rotate_right(1);
    }
    out.location = b.locations;
    out.function = b.functions;
    out.string_table = b.strings;
    Ok(out)
}

/// `libc.so.6`, `libfoo.so`, `libbar.so.1.2`: what pprof's own main-binary guess skips.
fn is_shared_library(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.ends_with(".so") || base.contains(".so.")
}

/// Deduplicating tables of a profile under construction. Ids start at 1 (0 is reserved).
#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: HashMap<String, u64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<(String, Option<String>), u64>,
    locations: Vec<proto::Location>,
    location_ids: HashMap<(u64, u64, u64, Option<u32>), u64>,
}

impl Builder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), i);
        i
    }

    fn value_type(&mut self, t: &ValueType) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(&t.name),
            unit: self.string(&t.unit),
        }
    }

    fn mapping(&mut self, f: &Frame) -> u64 {
        let Some(module) = &f.module else { return 0 };
        let id = match self.mapping_ids.get(module) {
            Some(&id) => id,
            None => {
                let filename = self.string(module);
                let id = self.mappings.len() as u64 + 1;
                self.mappings.push(proto::Mapping {
                    id,
                    filename,
                    has_functions: true,
                    has_filenames: true,
                    has_line_numbers: true,
                    ..Default::default()
                });
                self.mapping_ids.insert(module.clone(), id);
                id
            }
        };
        // A mapping claims what *all* its frames have.
        let m = &mut self.mappings[id as usize - 1];
        m.has_functions &= !f.function.is_empty();
        m.has_filenames &= f.file.is_some();
        m.has_line_numbers &= f.line.is_some();
        id
    }

    fn function(&mut self, f: &Frame) -> u64 {
        let key = (f.function.clone(), f.file.clone());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let name = self.string(&f.function);
        let filename = f.file.as_deref().map_or(0, |s| self.string(s));
        let id = self.functions.len() as u64 + 1;
        self.functions.push(proto::Function {
            id,
            name,
            system_name: name,
            filename,
            start_line: 0,
        });
        self.function_ids.insert(key, id);
        id
    }

    fn location(&mut self, f: &Frame) -> u64 {
        let mapping_id = self.mapping(f);
        let function_id = self.function(f);
        let key = (mapping_id, f.address, function_id, f.line);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id,
            address: f.address,
            line: vec![proto::Line {
                function_id,
                line: f.line.map_or(0, i64::from),
                column: 0,
            }],
            is_folded: false,
        });
        self.location_ids.insert(key, id);
        id
    }
}

/// pprof's `profile.proto` (package `perftools.profiles`, proto3, Apache-2.0, Copyright
/// Google Inc.) as hand-written prost messages; field numbers as in the .proto and in
/// Go's decoder (`cmd/vendor/github.com/google/pprof/profile/encode.go`).
pub mod proto {
    /// `message Profile`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        /// `repeated ValueType sample_type = 1;`
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        /// `repeated Sample sample = 2;`
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        /// `repeated Mapping mapping = 3;`
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        /// `repeated Location location = 4;`
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        /// `repeated Function function = 5;`
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        /// `repeated string string_table = 6;`
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        /// `int64 drop_frames = 7;`
        #[prost(int64, tag = "7")]
        pub drop_frames: i64,
        /// `int64 keep_frames = 8;`
        #[prost(int64, tag = "8")]
        pub keep_frames: i64,
        /// `int64 time_nanos = 9;`
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        /// `int64 duration_nanos = 10;`
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        /// `ValueType period_type = 11;`
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        /// `int64 period = 12;`
        #[prost(int64, tag = "12")]
        pub period: i64,
        /// `repeated int64 comment = 13;`
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        /// `int64 default_sample_type = 14;`
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    /// `message ValueType`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        /// `int64 type = 1;` (string table index)
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        /// `int64 unit = 2;` (string table index)
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    /// `message Sample`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        /// `repeated uint64 location_id = 1;` (leaf first)
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        /// `repeated int64 value = 2;`
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        /// `repeated Label label = 3;`
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    /// `message Label`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        /// `int64 key = 1;`
        #[prost(int64, tag = "1")]
        pub key: i64,
        /// `int64 str = 2;`
        #[prost(int64, tag = "2")]
        pub str: i64,
        /// `int64 num = 3;`
        #[prost(int64, tag = "3")]
        pub num: i64,
        /// `int64 num_unit = 4;`
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    /// `message Mapping`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        /// `uint64 id = 1;`
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// `uint64 memory_start = 2;`
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        /// `uint64 memory_limit = 3;`
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        /// `uint64 file_offset = 4;`
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        /// `int64 filename = 5;`
        #[prost(int64, tag = "5")]
        pub filename: i64,
        /// `int64 build_id = 6;`
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        /// `bool has_functions = 7;`
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        /// `bool has_filenames = 8;`
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        /// `bool has_line_numbers = 9;`
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        /// `bool has_inline_frames = 10;`
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    /// `message Location`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        /// `uint64 id = 1;`
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// `uint64 mapping_id = 2;`
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        /// `uint64 address = 3;`
        #[prost(uint64, tag = "3")]
        pub address: u64,
        /// `repeated Line line = 4;`
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        /// `bool is_folded = 5;`
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    /// `message Line`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        /// `uint64 function_id = 1;`
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        /// `int64 line = 2;`
        #[prost(int64, tag = "2")]
        pub line: i64,
        /// `int64 column = 3;`
        #[prost(int64, tag = "3")]
        pub column: i64,
    }

    /// `message Function`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        /// `uint64 id = 1;`
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// `int64 name = 2;`
        #[prost(int64, tag = "2")]
        pub name: i64,
        /// `int64 system_name = 3;`
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        /// `int64 filename = 4;`
        #[prost(int64, tag = "4")]
        pub filename: i64,
        /// `int64 start_line = 5;`
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn frame(function: &str, file: &str, line: u32, module: Option<&str>) -> Frame {
        Frame {
            function: function.into(),
            file: Some(file.into()),
            line: Some(line),
            address: 0,
            module: module.map(Into::into),
        }
    }

    fn lock_profile() -> Profile {
        let lock = frame(
            "pthread_mutex_lock",
            "pthread_mutex_lock.c",
            80,
            Some("libc.so.6"),
        );
        let worker = frame("worker", "planted.c", 42, Some("planted"));
        let main = frame("start_thread", "pthread_create.c", 447, Some("libc.so.6"));
        let other = frame("other", "planted.c", 60, Some("planted"));
        let mut p = Profile::lock_contention();
        p.duration_ns = 2_000_000_000;
        p.time_ns = 1_700_000_000_000_000_000;
        p.comments = vec!["contend record --locks".into()];
        p.samples = vec![
            Sample {
                stack: vec![lock.clone(), worker.clone(), main.clone()],
                values: vec![120, 1_500_000_000],
                labels: vec![("lock".into(), "0x5555deadbeef".into())],
            },
            Sample {
                stack: vec![lock, other, main],
                values: vec![3, 2_500],
                labels: vec![],
            },
        ];
        p
    }

    /// Decodes a written profile back into the model (leaf-first stacks).
    fn round_trip(bytes: &[u8]) -> (proto::Profile, Profile) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut raw)
            .expect("gzip");
        let p = proto::Profile::decode(raw.as_slice()).expect("profile.proto");
        let s = |i: i64| p.string_table[i as usize].clone();
        let vt = |v: &proto::ValueType| ValueType::new(s(v.r#type), s(v.unit));
        let loc: HashMap<u64, &proto::Location> = p.location.iter().map(|l| (l.id, l)).collect();
        let fun: HashMap<u64, &proto::Function> = p.function.iter().map(|f| (f.id, f)).collect();
        let map: HashMap<u64, &proto::Mapping> = p.mapping.iter().map(|m| (m.id, m)).collect();
        let model = Profile {
            sample_types: p.sample_type.iter().map(vt).collect(),
            samples: p
                .sample
                .iter()
                .map(|x| Sample {
                    stack: x
                        .location_id
                        .iter()
                        .map(|id| {
                            let l = loc[id];
                            assert_eq!(l.line.len(), 1);
                            let f = fun[&l.line[0].function_id];
                            Frame {
                                function: s(f.name),
                                file: (f.filename != 0).then(|| s(f.filename)),
                                line: (l.line[0].line != 0).then_some(l.line[0].line as u32),
                                address: l.address,
                                module: (l.mapping_id != 0).then(|| s(map[&l.mapping_id].filename)),
                            }
                        })
                        .collect(),
                    values: x.value.clone(),
                    labels: x.label.iter().map(|l| (s(l.key), s(l.str))).collect(),
                })
                .collect(),
            time_ns: p.time_nanos,
            duration_ns: p.duration_nanos as u64,
            period_type: p.period_type.as_ref().map(vt),
            period: p.period,
            comments: p.comment.iter().map(|&c| s(c)).collect(),
            default_sample_type: (p.default_sample_type != 0).then(|| s(p.default_sample_type)),
        };
        (p, model)
    }

    #[test]
    fn round_trips_through_prost() {
        let profile = lock_profile();
        let mut bytes = Vec::new();
        write(&profile, &mut bytes).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip magic");
        let (raw, back) = round_trip(&bytes);
        assert_eq!(back, profile);
        assert_eq!(raw.string_table[0], "");
        // Deduplicated: 4 distinct frames, 4 functions, 2 modules; each string once.
        assert_eq!(raw.location.len(), 4);
        assert_eq!(raw.function.len(), 4);
        assert_eq!(raw.mapping.len(), 2);
        let mut strings = raw.string_table.clone();
        strings.sort();
        strings.dedup();
        assert_eq!(strings.len(), raw.string_table.len());
        // The executable comes first (pprof's main binary), the library after it.
        assert_eq!(
            raw.string_table[raw.mapping[0].filename as usize],
            "planted"
        );
        assert_eq!(raw.mapping[0].id, 2);
        // Ids are 1-based and dense.
        assert!(raw
            .location
            .iter()
            .enumerate()
            .all(|(i, l)| l.id == i as u64 + 1));
        assert!(raw
            .mapping
            .iter()
            .all(|m| m.has_functions && m.has_line_numbers));
    }

    #[test]
    fn empty_and_odd_profiles_are_written() {
        assert!(
            write(&Profile::default(), Vec::new()).is_err(),
            "no sample types"
        );
        let mut bytes = Vec::new();
        write(&Profile::lock_contention(), &mut bytes).unwrap();
        let (raw, back) = round_trip(&bytes);
        assert_eq!(back, Profile::lock_contention());
        assert_eq!(
            raw.string_table,
            ["", "contentions", "count", "delay", "nanoseconds"]
        );

        let odd = Profile {
            sample_types: vec![ValueType::new("", "")],
            samples: vec![
                Sample::default_with(vec![i64::MAX]),
                Sample {
                    stack: vec![Frame::default(), Frame::default()],
                    values: vec![i64::MIN],
                    labels: vec![(String::new(), String::new())],
                },
            ],
            duration_ns: u64::MAX,
            ..Profile::default()
        };
        let mut bytes = Vec::new();
        write(&odd, &mut bytes).unwrap();
        let (raw, back) = round_trip(&bytes);
        assert_eq!(raw.duration_nanos, i64::MAX);
        assert_eq!(back.samples, odd.samples);
        assert_eq!(raw.location.len(), 1, "identical frames share a location");
    }

    #[test]
    fn mismatched_values_are_an_error() {
        let mut p = lock_profile();
        p.samples[1].values.pop();
        let err = write(&p, Vec::new()).unwrap_err();
        assert!(err.to_string().contains("sample 1 has 1 values"), "{err}");
        let mut p = lock_profile();
        p.default_sample_type = Some("cycles".into());
        assert!(write(&p, Vec::new()).is_err());
        p.default_sample_type = Some("contentions".into());
        assert!(write(&p, Vec::new()).is_ok());
    }

    #[test]
    fn mapping_flags_say_what_all_frames_have() {
        let mut p = Profile {
            sample_types: vec![contentions()],
            ..Profile::default()
        };
        p.samples.push(Sample {
            stack: vec![
                frame("a", "a.c", 1, Some("lib.so")),
                Frame {
                    function: "b".into(),
                    address: 0x1234,
                    module: Some("lib.so".into()),
                    ..Frame::default()
                },
            ],
            values: vec![1],
            labels: vec![],
        });
        let raw = to_proto(&p).unwrap();
        let m = &raw.mapping[0];
        assert!(m.has_functions);
        assert!(!m.has_filenames && !m.has_line_numbers);
    }

    impl Sample {
        fn default_with(values: Vec<i64>) -> Self {
            Sample {
                values,
                ..Sample::default()
            }
        }
    }
}
