//! Protobuf messages of the agent protocol, written by hand (no `protoc` at build time) and the
//! gRPC stubs generated from them by `build.rs`.
//!
//! The equivalent `.proto` (package `headroom.dist`), for other clients:
//!
//! ```proto
//! service Agent {
//!   rpc Run(RunRequest) returns (stream AgentEvent);
//!   rpc Stop(StopRequest) returns (StopReply);
//! }
//! message StopRequest {}
//! message StopReply { bool running = 1; }
//! message RunRequest {
//!   reserved 1, 2;  // a command line and files by name, before the typed spec
//!   uint32 segment_index = 3; uint32 segment_count = 4;
//!   uint64 start_at_unix_ns = 5; string controller_version = 6;
//!   bytes spec = 7;  // headroom_core::spec::RunSpec as JSON, its files inside as bytes
//!   bool preflight = 8;
//! }
//! message AgentEvent { oneof event { Ready ready = 1; IntervalMsg interval = 2; Done done = 3; Failed failed = 4; } }
//! message Ready { string agent_version = 1; uint32 pid = 2; uint32 threads = 3; }
//! message IntervalMsg {
//!   uint64 index = 1; uint64 start_us = 2; uint64 length_us = 3;
//!   uint64 workers_done = 4; uint64 workers = 5; RecorderMsg recorder = 6;
//! }
//! message Done {
//!   uint64 elapsed_us = 1; uint64 in_flight = 2; uint64 connections_peak = 3;
//!   uint64 intervals = 4; bool interrupted = 5; uint64 started_at_unix_ns = 6;
//! }
//! message Failed { string message = 1; }
//! // Histograms are HdrHistogram V2 serialized bytes (not deflated).
//! message RecorderMsg {
//!   bytes latency = 1; bytes latency_uncorrected = 2; bytes connect = 3; bytes sessions = 4;
//!   CountersMsg counters = 5; repeated NameStatsMsg names = 6; repeated uint64 matches = 7;
//!   bytes tls = 8; bytes served = 9;
//!   repeated NegotiatedMsg negotiated = 10; uint64 negotiated_other = 11; bytes lag = 12;
//! }
//! // What TLS handshakes agreed on (headroom_metrics::Negotiated) and how many did.
//! message NegotiatedMsg {
//!   uint32 version = 1; uint32 suite = 2; uint32 group = 3; bytes alpn = 4; uint32 http = 5;
//!   uint64 count = 6;
//! }
//! message CountersMsg {
//!   uint64 requests = 1; uint64 responses = 2; repeated uint64 errors = 3; repeated uint64 status = 4;
//!   uint64 bytes_sent = 5; uint64 bytes_received = 6; uint64 users_started = 7;
//!   uint64 users_finished = 8; uint64 connects = 9; uint64 disconnects = 10;
//!   uint64 connections_open = 11; uint64 connections_peak = 12; uint64 users_active = 13;
//!   uint64 sessions_completed = 14; uint64 sessions_aborted = 15; uint64 users_dropped = 16;
//!   repeated uint64 proto = 17; repeated uint64 status_codes = 18;
//!   uint64 tcp_connected_open = 19; uint64 tcp_connected_peak = 20; uint64 idle_closed = 21;
//!   uint64 reconnects = 22; uint64 worker_cpu_us = 23; uint64 worker_intervals = 24;
//!   uint64 worker_busy_intervals = 25; uint64 worker_wait_us = 26;
//!   uint64 worker_late_intervals = 27;
//! }
//! message NameStatsMsg { uint64 count = 1; uint64 errors = 2; bytes latency = 3; }
//! ```

#![allow(missing_docs)]

/// Start of a job: what to run and which share of it.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RunRequest {
    #[prost(uint32, tag = "3")]
    pub segment_index: u32,
    #[prost(uint32, tag = "4")]
    pub segment_count: u32,
    /// When the load starts (all agents alike), nanoseconds since the Unix epoch.
    #[prost(uint64, tag = "5")]
    pub start_at_unix_ns: u64,
    #[prost(string, tag = "6")]
    pub controller_version: String,
    /// The run: `headroom_core::spec::RunSpec` as JSON, with every file it needs inside as
    /// bytes (tags 1 and 2, a command line and files by name, are retired).
    #[prost(bytes = "vec", tag = "7")]
    pub spec: Vec<u8>,
    /// Check the target is reachable before the load (`headroom run`'s default).
    #[prost(bool, tag = "8")]
    pub preflight: bool,
}

/// One message of the agent's stream: `Ready` first, then intervals, then `Done` or `Failed`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AgentEvent {
    #[prost(oneof = "agent_event::Event", tags = "1, 2, 3, 4")]
    pub event: Option<agent_event::Event>,
}

pub mod agent_event {
    // As prost-build would generate it: an interval is by far the largest event and the most
    // frequent one, so boxing it would only add an allocation.
    #[allow(clippy::large_enum_variant)]
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Event {
        #[prost(message, tag = "1")]
        Ready(super::Ready),
        #[prost(message, tag = "2")]
        Interval(super::IntervalMsg),
        #[prost(message, tag = "3")]
        Done(super::Done),
        #[prost(message, tag = "4")]
        Failed(super::Failed),
    }
}

/// The agent built its plan and waits for the start.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Ready {
    #[prost(string, tag = "1")]
    pub agent_version: String,
    #[prost(uint32, tag = "2")]
    pub pid: u32,
    /// Worker threads the agent's engine will run.
    #[prost(uint32, tag = "3")]
    pub threads: u32,
}

/// One interval of the agent's segment, its workers merged.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct IntervalMsg {
    #[prost(uint64, tag = "1")]
    pub index: u64,
    #[prost(uint64, tag = "2")]
    pub start_us: u64,
    #[prost(uint64, tag = "3")]
    pub length_us: u64,
    #[prost(uint64, tag = "4")]
    pub workers_done: u64,
    #[prost(uint64, tag = "5")]
    pub workers: u64,
    #[prost(message, optional, tag = "6")]
    pub recorder: Option<RecorderMsg>,
}

/// The agent's run ended.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Done {
    #[prost(uint64, tag = "1")]
    pub elapsed_us: u64,
    #[prost(uint64, tag = "2")]
    pub in_flight: u64,
    #[prost(uint64, tag = "3")]
    pub connections_peak: u64,
    #[prost(uint64, tag = "4")]
    pub intervals: u64,
    #[prost(bool, tag = "5")]
    pub interrupted: bool,
    #[prost(uint64, tag = "6")]
    pub started_at_unix_ns: u64,
}

/// Ask the agent to end its run now, as Ctrl-C would: it stops, reports its last (partial)
/// interval and `Done` on the run's stream.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct StopRequest {}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct StopReply {
    /// A run was in progress (and is now stopping).
    #[prost(bool, tag = "1")]
    pub running: bool,
}

/// The agent could not run (bad plan, engine error).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Failed {
    #[prost(string, tag = "1")]
    pub message: String,
}

/// A [`headroom_metrics::Recorder`]; see [`crate::wire`].
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RecorderMsg {
    #[prost(bytes = "vec", tag = "1")]
    pub latency: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub latency_uncorrected: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub connect: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    pub sessions: Vec<u8>,
    #[prost(message, optional, tag = "5")]
    pub counters: Option<CountersMsg>,
    #[prost(message, repeated, tag = "6")]
    pub names: Vec<NameStatsMsg>,
    #[prost(uint64, repeated, tag = "7")]
    pub matches: Vec<u64>,
    #[prost(bytes = "vec", tag = "8")]
    pub tls: Vec<u8>,
    #[prost(bytes = "vec", tag = "9")]
    pub served: Vec<u8>,
    /// At most `headroom_metrics::NEGOTIATED_MAX` entries.
    #[prost(message, repeated, tag = "10")]
    pub negotiated: Vec<NegotiatedMsg>,
    #[prost(uint64, tag = "11")]
    pub negotiated_other: u64,
    #[prost(bytes = "vec", tag = "12")]
    pub lag: Vec<u8>,
}

/// [`headroom_metrics::Negotiated`] and its count; the codes are 16-bit values on the wire's
/// 32-bit integers.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct NegotiatedMsg {
    #[prost(uint32, tag = "1")]
    pub version: u32,
    #[prost(uint32, tag = "2")]
    pub suite: u32,
    #[prost(uint32, tag = "3")]
    pub group: u32,
    #[prost(bytes = "vec", tag = "4")]
    pub alpn: Vec<u8>,
    #[prost(uint32, tag = "5")]
    pub http: u32,
    #[prost(uint64, tag = "6")]
    pub count: u64,
}

/// [`headroom_metrics::Counters`], field for field.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CountersMsg {
    #[prost(uint64, tag = "1")]
    pub requests: u64,
    #[prost(uint64, tag = "2")]
    pub responses: u64,
    #[prost(uint64, repeated, tag = "3")]
    pub errors: Vec<u64>,
    #[prost(uint64, repeated, tag = "4")]
    pub status: Vec<u64>,
    #[prost(uint64, tag = "5")]
    pub bytes_sent: u64,
    #[prost(uint64, tag = "6")]
    pub bytes_received: u64,
    #[prost(uint64, tag = "7")]
    pub users_started: u64,
    #[prost(uint64, tag = "8")]
    pub users_finished: u64,
    #[prost(uint64, tag = "9")]
    pub connects: u64,
    #[prost(uint64, tag = "10")]
    pub disconnects: u64,
    #[prost(uint64, tag = "11")]
    pub connections_open: u64,
    #[prost(uint64, tag = "12")]
    pub connections_peak: u64,
    #[prost(uint64, tag = "13")]
    pub users_active: u64,
    #[prost(uint64, tag = "14")]
    pub sessions_completed: u64,
    #[prost(uint64, tag = "15")]
    pub sessions_aborted: u64,
    #[prost(uint64, tag = "16")]
    pub users_dropped: u64,
    #[prost(uint64, repeated, tag = "17")]
    pub proto: Vec<u64>,
    /// Responses by exact status, codes 100..=599 (500 entries, packed: the zeros of unseen codes
    /// take a byte each).
    #[prost(uint64, repeated, tag = "18")]
    pub status_codes: Vec<u64>,
    #[prost(uint64, tag = "19")]
    pub tcp_connected_open: u64,
    #[prost(uint64, tag = "20")]
    pub tcp_connected_peak: u64,
    #[prost(uint64, tag = "21")]
    pub idle_closed: u64,
    #[prost(uint64, tag = "22")]
    pub reconnects: u64,
    #[prost(uint64, tag = "23")]
    pub worker_cpu_us: u64,
    #[prost(uint64, tag = "24")]
    pub worker_intervals: u64,
    #[prost(uint64, tag = "25")]
    pub worker_busy_intervals: u64,
    #[prost(uint64, tag = "26")]
    pub worker_wait_us: u64,
    #[prost(uint64, tag = "27")]
    pub worker_late_intervals: u64,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct NameStatsMsg {
    #[prost(uint64, tag = "1")]
    pub count: u64,
    #[prost(uint64, tag = "2")]
    pub errors: u64,
    #[prost(bytes = "vec", tag = "3")]
    pub latency: Vec<u8>,
}

// Generated by build.rs: `agent_client::AgentClient` and `agent_server::{Agent, AgentServer}`.
include!(concat!(env!("OUT_DIR"), "/headroom.dist.Agent.rs"));
