//! The run directory's file format as types: one schema in code for the files a run leaves.
//!
//! | file | type | written by | read by |
//! |---|---|---|---|
//! | `summary.json` | [`RunSummary`] | headroom-run | headroom-report |
//! | `intervals.jsonl` (a line) | [`IntervalLine`] | headroom-run | headroom-report, live page |
//!
//! headroom-run writes both for `headroom run`, `headroom demo`, the lab's loads and the agents'
//! controller; it hands each interval line to its sinks typed (the run directory, the live page
//! and the Prometheus endpoint). headroom-report reads them for the report, comparisons and
//! repeats (and the run library's tests read them back to pin the format). The lab still keeps
//! a flat line of its own per interval for its store and intervals.csv.
//!
//! The types are plain data: no JSON, no engine, no metrics. Building them from a run (a plan
//! and the engine's outcome) is headroom-run's; turning them into charts is headroom-report's.
//! So the report depends on this crate, never on the run library or the engine.
//!
//! # Compatibility rule
//!
//! The writer writes every field (keys sorted, as serde_json's map orders them); a reader takes
//! what any earlier headroom wrote. Format 1 grew field by field since its first release (TLS,
//! HTTP/2, status codes, served connections, ramps...) without a version bump, so on read
//! every struct is `#[serde(default)]` (but a checked threshold, whole since it came): a key an older file lacks is its default (0, empty,
//! `null`), and a load model this headroom does not know is [`Load::Other`]. No type denies
//! unknown fields: a newer file's extra keys are ignored. A field is never removed or renamed
//! within a format version; [`FORMAT_VERSION`] changes when one must be.
//!
//! The JSON Schemas (schema/summary.schema.json, schema/interval.schema.json, feature
//! `schema`, off by default) describe what is *written*: every key required, no other key
//! allowed (`schemars(!default, deny_unknown_fields)`).

pub mod interval;
pub mod summary;

pub use interval::{IntervalLatency, IntervalLine, IntervalName, IntervalScenario, ServerFigures};
pub use summary::{
    Agents, AmqpCounters, Checked, Environment, Errors, ExprCounters, FileCounters, Http2Section,
    HttpSection, Latency, LdapCounters, Load, LostAgent, MqttCounters, MysqlCounters, NameFigures,
    NegotiatedFigures, PgsqlCounters, Phase, ProtocolSection, RunSummary, ScenarioSection,
    Sessions, Stage, StatusClasses, TlsSection, Unit, WebSocketCounters, XmppCounters,
    FORMAT_VERSION,
};
