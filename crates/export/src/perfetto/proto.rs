//! The subset of Perfetto's trace protos that the writer produces, as hand-written prost
//! messages (no protoc at build time).
//!
//! Field numbers and types are those of Perfetto's `protos/perfetto/trace/` (Apache-2.0,
//! Copyright The Android Open Source Project), files named on each message, checked
//! against the descriptor shipped in the `perfetto` Python package (v0.59). The protos are
//! proto2: every scalar has explicit presence (`optional` here) and repeated scalars are
//! *not* packed (`packed = "false"`), which is what Perfetto's own protozero decoder expects.
//! Oneof members are plain optional fields: on the wire a oneof is just its fields.

/// `trace.proto`: `message Trace { repeated TracePacket packet = 1; }`. The writer streams
/// packets instead of building this message; it is used to decode in tests.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

impl Trace {
    /// Reads a written trace back (for tests of the crates that write one).
    pub fn read(bytes: &[u8]) -> Result<Trace, prost::DecodeError> {
        prost::Message::decode(bytes)
    }
}

/// Tag byte of `Trace.packet` (field 1, length-delimited): `(1 << 3) | 2`.
pub const TRACE_PACKET_TAG: u8 = 0x0a;

/// `trace_packet.proto` `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `trace_packet.proto` `TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `trace_packet.proto` `TracePacket`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// `optional uint64 timestamp = 8;` (default clock: BUILTIN_CLOCK_BOOTTIME)
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// `uint32 trusted_packet_sequence_id = 10;` (in oneof optional_trusted_packet_sequence_id)
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// `TrackEvent track_event = 11;` (in oneof data)
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// `optional InternedData interned_data = 12;`
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// `optional uint32 sequence_flags = 13;`
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// `TrackDescriptor track_descriptor = 60;` (in oneof data)
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    /// `optional bool first_packet_on_sequence = 87;`
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
}

/// `track_event/track_descriptor.proto` `TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// `optional uint64 uuid = 1;`
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// `string name = 2;` (in oneof static_or_dynamic_name)
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// `optional ProcessDescriptor process = 3;`
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// `optional ThreadDescriptor thread = 4;`
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// `optional uint64 parent_uuid = 5;`
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// `optional CounterDescriptor counter = 8;` (present: the track is a counter track)
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

/// `track_event/counter_descriptor.proto` `CounterDescriptor`: an empty message makes a
/// counter track whose values come in `TrackEvent`s of [`TYPE_COUNTER`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {
    /// `optional string unit_name = 6;` (free text, e.g. "%"; the typed `Unit unit = 3`
    /// only knows ns, counts and bytes)
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
}

/// `track_event/process_descriptor.proto` `ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// `optional int32 pid = 1;`
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `optional string process_name = 6;`
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `track_event/thread_descriptor.proto` `ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// `optional int32 pid = 1;`
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `optional int64 tid = 2;` (int32 in older Perfetto; same varint on the wire)
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    /// `optional string thread_name = 5;`
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `track_event/track_event.proto` `TrackEvent.Type.TYPE_SLICE_BEGIN`.
pub const TYPE_SLICE_BEGIN: i32 = 1;
/// `track_event/track_event.proto` `TrackEvent.Type.TYPE_SLICE_END`.
pub const TYPE_SLICE_END: i32 = 2;
/// `track_event/track_event.proto` `TrackEvent.Type.TYPE_COUNTER`.
pub const TYPE_COUNTER: i32 = 4;

/// `track_event/track_event.proto` `TrackEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// `repeated uint64 category_iids = 3;`
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    /// `repeated DebugAnnotation debug_annotations = 4;`
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `optional Type type = 9;`
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// `uint64 name_iid = 10;` (in oneof name_field)
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    /// `optional uint64 track_uuid = 11;`
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// `repeated string categories = 22;`
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// `string name = 23;` (in oneof name_field)
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// `int64 counter_value = 30;` (in oneof counter_value_field; for [`TYPE_COUNTER`]).
    /// Not written (the writer sends doubles); decoded in tests to check it stays unset.
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
    /// `double double_counter_value = 44;` (in oneof counter_value_field)
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    /// `repeated fixed64 flow_ids = 47;`
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// `repeated fixed64 terminating_flow_ids = 48;`
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `track_event/debug_annotation.proto` `DebugAnnotation` (the value is a oneof).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// `uint64 name_iid = 1;` (in oneof name_field)
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    /// `bool bool_value = 2;`
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    /// `uint64 uint_value = 3;`
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    /// `int64 int_value = 4;`
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    /// `double double_value = 5;`
    #[prost(double, optional, tag = "5")]
    pub double_value: Option<f64>,
    /// `string string_value = 6;`
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    /// `uint64 pointer_value = 7;`
    #[prost(uint64, optional, tag = "7")]
    pub pointer_value: Option<u64>,
    /// `string name = 10;` (in oneof name_field)
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

/// `interned_data/interned_data.proto` `InternedData`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// `repeated EventCategory event_categories = 1;`
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<InternedString>,
    /// `repeated EventName event_names = 2;`
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedString>,
    /// `repeated DebugAnnotationName debug_annotation_names = 3;`
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedString>,
}

/// `EventCategory`, `EventName` and `DebugAnnotationName` (track_event.proto,
/// debug_annotation.proto) share one shape: `optional uint64 iid = 1; optional string name = 2;`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}
