//! summary.json as a type: [`RunSummary`] *is* its schema (schema/summary.schema.json is
//! generated from it, docs/summary-json.md describes it; tests keep both in step).
//!
//! Built from a [`Plan`] and the engine's [`RunOutcome`] only (no command-line types), so
//! `headroom run`, `headroom demo`, the lab and the agents' controller write the same file.
//!
//! Written through [`RunSummary::to_json`]: serde_json's map sorts keys, so the file's keys are
//! in alphabetical order at every level, as they have always been. `Option` fields are `null`
//! when absent unless marked `skip_serializing_if` (the sections that only some runs have:
//! `scenario`, `agents`, `thresholds`, `thresholds_ok`, and environment values that could not be
//! read). Counter sections list every counter of their group, zeros included; they are built by
//! name from [`ErrorKind`] and [`ProtoCounter`], and a unit test fails when a kind or counter is
//! added there without a field here.

use std::collections::BTreeMap;

use headroom_core::session::{LinkSpec, NameKind, Workload};
use headroom_core::{ArrivalProcess, ErrorKind, LoadModel, Plan, ProtoCounter};
use headroom_engine::RunOutcome;
use headroom_metrics::{Counters, LatencyStats, NegotiatedSet, Recorder};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::thresholds::Checked;

/// Version of the summary.json / intervals.jsonl layout.
pub const FORMAT_VERSION: u32 = 1;

/// One run's summary.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunSummary {
    /// Layout version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    pub headroom_version: String,
    /// The command line that made the run.
    pub command: String,
    /// The target as given (URL, or the scenario's server).
    pub target: String,
    /// `closed`, `rate`, `open` or `sessions` (the same as `load.name`).
    pub model: String,
    pub load: Load,
    /// Worker threads (per agent in a distributed run).
    pub threads: u64,
    pub keepalive: bool,
    pub pipeline: u32,
    /// `http/1.1`, `h2`, `h2c`, `xmpp`, `pgsql` or `websocket`.
    pub protocol: String,
    /// HTTP/2 streams per connection; `null` for other protocols.
    pub streams: Option<u32>,
    /// HTTP/2 frames that matter; `null` unless HTTP/2.
    pub http2: Option<Http2Section>,
    /// What users did besides their requests, over HTTP/1.1 and HTTP/2 alike (older files
    /// have `null` for HTTP/2).
    pub http: Option<HttpSection>,
    /// TLS settings and handshake counts; `null` for a plain run.
    pub tls: Option<TlsSection>,
    /// When the load started, RFC 3339 with milliseconds.
    pub started_at: String,
    pub duration_s: f64,
    /// True when Ctrl-C (or a lost agent) ended the run early.
    pub interrupted: bool,
    /// Why headroom itself ended the run early (a plain-HTTP URL whose port speaks TLS: every
    /// attempt failed, so the rest of the run would have tested nothing); `null` otherwise.
    pub stopped: Option<String>,
    pub requests: u64,
    pub responses: u64,
    /// Requests awaiting a reply at the stop (neither answered nor failed).
    pub in_flight: u64,
    pub errors: Errors,
    pub errors_total: u64,
    /// Failed attempts over attempts (see [`error_rate`]), rounded to 1e-6.
    pub error_rate: f64,
    pub status: StatusClasses,
    /// Responses by exact code, the codes seen only (`{"200": 995, "404": 5}`).
    pub status_codes: BTreeMap<u16, u64>,
    /// `--expect-status` as given; `null` without it.
    pub expect_status: Option<String>,
    pub users_started: u64,
    pub users_finished: u64,
    pub throughput_rps: f64,
    /// Coordinated-omission-corrected latency.
    pub latency_us: Latency,
    pub latency_uncorrected_us: Latency,
    pub connect_us: Latency,
    pub tls_us: Latency,
    /// From TCP connect to the server's first byte on the connection (its accept-queue wait
    /// plus its first answer); connections closed before any byte are not in it.
    #[serde(default)]
    pub served_us: Latency,
    /// TCP handshakes completed.
    pub connects: u64,
    /// The most connections the server held at once: *served* ones, on which it sent a byte.
    pub connections_peak: u64,
    /// The most TCP connections established at once, served or not: those waiting in the
    /// server's accept queue too. Above `connections_peak` when the server fell behind.
    #[serde(default)]
    pub tcp_connected_peak: u64,
    /// Connections the server closed while their user had nothing in flight (keep-alive or
    /// idle timeouts); not errors.
    #[serde(default)]
    pub idle_closed: u64,
    /// Connections opened again after such a close.
    #[serde(default)]
    pub reconnects: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The generator's own CPU and memory (getrusage of this process).
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub max_rss_kb: u64,
    pub environment: Environment,
    /// Per name, matches and sessions: scenario runs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<ScenarioSection>,
    /// Distributed runs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Agents>,
    /// The scenario's thresholds, when it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Vec<Checked>>,
    /// True when every threshold held; present with `thresholds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds_ok: Option<bool>,
}

/// Figures of a latency histogram in microseconds (mean and stdev rounded to 0.1 µs; all 0 when
/// there are no samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Latency {
    pub count: u64,
    pub mean: f64,
    pub stdev: f64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl From<LatencyStats> for Latency {
    fn from(s: LatencyStats) -> Latency {
        let LatencyStats {
            count,
            mean,
            stdev,
            min,
            p50,
            p90,
            p99,
            p999,
            max,
        } = s;
        Latency {
            count,
            mean,
            stdev,
            min,
            p50,
            p90,
            p99,
            p999,
            max,
        }
    }
}

impl Latency {
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Latency {
        LatencyStats::of(h).into()
    }
}

/// The load model and its parameters, tagged by `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "name", rename_all = "lowercase", deny_unknown_fields)]
pub enum Load {
    /// Users that send back to back (each with its think time).
    Closed {
        users: u32,
        per_user: Option<u64>,
        /// The think-time distribution (Rust debug form); `null` for none.
        think: Option<String>,
        /// How the users came and went (`--ramp-up`, `--stage`); absent when they all started
        /// at once and stayed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ramp: Vec<Stage>,
    },
    /// A constant request rate over a fixed set of connections.
    Rate { connections: u32, rate: f64 },
    /// New users per second, each sending `per_user` requests.
    Open {
        arrival_rate: f64,
        /// `poisson` or `constant`.
        arrival: String,
        per_user: u64,
        think: Option<String>,
        max_users: Option<u64>,
    },
    /// A scenario's closed users and arrival phases.
    Sessions {
        users: u32,
        phases: Vec<Phase>,
        /// The scenario's session names.
        sessions: Option<Vec<String>>,
        /// How the closed users came and went (`load.stages`, `--ramp-up`, `--stage`); absent
        /// when they all started at once and stayed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ramp: Vec<Stage>,
    },
}

/// One stage of a closed population's ramp: the users alive move linearly from the previous
/// stage's number (0 before the first) to `users` over `duration_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Stage {
    pub duration_s: f64,
    pub users: u32,
}

/// One arrival phase of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Phase {
    pub duration_s: f64,
    /// Users per second at the phase's start and end.
    pub from: f64,
    pub to: f64,
    pub arrival: String,
    pub max_users: Option<u64>,
}

/// Failures by kind, every kind always present (see docs/errors.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Errors {
    pub connect_timeout: u64,
    pub refused: u64,
    pub reset: u64,
    pub closed: u64,
    pub timeout: u64,
    pub protocol: u64,
    pub http_4xx: u64,
    pub http_5xx: u64,
    pub local_resource: u64,
    pub other: u64,
    pub login: u64,
    pub error_reply: u64,
    pub tls_untrusted: u64,
    pub tls_expired: u64,
    pub tls_wrong_name: u64,
    pub tls_certificate: u64,
    pub tls_version: u64,
    pub tls_alert: u64,
    pub tls_malformed: u64,
    pub unexpected_status: u64,
    pub redirect_limit: u64,
    pub bad_location: u64,
    pub redirect_offsite: u64,
    pub stream_reset: u64,
    pub flood: u64,
}

impl Errors {
    pub fn of(c: &Counters) -> Errors {
        by_name(
            ErrorKind::ALL
                .iter()
                .map(|k| (k.name(), serde_json::json!(c.errors[k.index()]))),
            "ErrorKind",
        )
    }
}

/// Responses by status class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusClasses {
    /// A status outside 100..=599.
    pub other: u64,
    #[serde(rename = "1xx")]
    pub s1xx: u64,
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    #[serde(rename = "5xx")]
    pub s5xx: u64,
}

impl StatusClasses {
    pub fn of(c: &Counters) -> StatusClasses {
        let [other, s1xx, s2xx, s3xx, s4xx, s5xx] = c.status;
        StatusClasses {
            other,
            s1xx,
            s2xx,
            s3xx,
            s4xx,
            s5xx,
        }
    }
}

/// What users did besides their requests, and how they were told to behave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct HttpSection {
    pub redirects_followed: u64,
    pub cookies_stored: u64,
    pub cookies_malformed: u64,
    pub cookies_rejected: u64,
    pub cookies_evicted: u64,
    pub auth_challenges: u64,
    pub auth_failed: u64,
    pub compressed_responses: u64,
    pub body_bytes_encoded: u64,
    pub body_bytes_decoded: u64,
    /// A cookie jar per user.
    pub cookies: bool,
    /// Redirects followed per request at most.
    pub follow: u32,
    /// Compressed replies asked for.
    pub compressed: bool,
    /// `basic` or `digest`; `null` without credentials.
    pub auth: Option<String>,
}

/// HTTP/2: GOAWAY frames, RST_STREAM by code, connection errors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Http2Section {
    pub goaway: u64,
    pub rst_no_error: u64,
    pub rst_protocol_error: u64,
    pub rst_internal_error: u64,
    pub rst_flow_control_error: u64,
    pub rst_settings_timeout: u64,
    pub rst_stream_closed: u64,
    pub rst_frame_size_error: u64,
    pub rst_refused_stream: u64,
    pub rst_cancel: u64,
    pub rst_compression_error: u64,
    pub rst_connect_error: u64,
    pub rst_enhance_your_calm: u64,
    pub rst_inadequate_security: u64,
    pub rst_http_1_1_required: u64,
    pub rst_other: u64,
    pub connection_errors: u64,
    /// Requests the server refused unprocessed (a GOAWAY's unprocessed streams, REFUSED_STREAM)
    /// that went again, once; a second refusal is a `stream_reset` error.
    pub resent: u64,
}

/// The run's TLS settings and handshake counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub server_name: String,
    /// `1.2` or `1.3`.
    pub min_version: String,
    pub max_version: String,
    pub alpn: Vec<String>,
    pub insecure: bool,
    /// `file` (--cacert) or `system`.
    pub ca: String,
    pub client_certificate: bool,
    pub resume: bool,
    pub handshakes: u64,
    pub resumed: u64,
    /// What the handshakes agreed on: one entry per distinct combination, the most frequent
    /// first, at most 16 (`headroom_metrics::NEGOTIATED_MAX`); the handshakes of any further
    /// combinations are `negotiated_other`.
    #[serde(default)]
    pub negotiated: Vec<NegotiatedFigures>,
    #[serde(default)]
    pub negotiated_other: u64,
}

/// One combination the TLS handshakes agreed on, and how many did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NegotiatedFigures {
    /// `TLSv1.3` or `TLSv1.2` (OpenSSL's names, as nginx's `$ssl_protocol`).
    pub protocol: String,
    /// The IANA name: `TLS_AES_256_GCM_SHA384`, `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`.
    pub cipher_suite: String,
    /// The key exchange group (`X25519`, `secp256r1`); absent when the handshake made none
    /// (a resumed TLS 1.2 session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_exchange: Option<String>,
    /// The protocol the server chose by ALPN (`h2`, `http/1.1`); absent if none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
    /// The HTTP version spoken over it (`HTTP/1.1`, `HTTP/2`); absent for XMPP, PostgreSQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    pub handshakes: u64,
}

impl NegotiatedFigures {
    /// The combination in words: `TLSv1.3 TLS_AES_256_GCM_SHA384 X25519 h2 HTTP/2`.
    pub fn words(&self) -> String {
        [
            Some(self.protocol.as_str()),
            Some(self.cipher_suite.as_str()),
            self.key_exchange.as_deref(),
            self.alpn.as_deref(),
            self.http.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ")
    }

    /// The combinations of `set`, the most frequent first.
    pub fn of(set: &NegotiatedSet) -> Vec<NegotiatedFigures> {
        let mut v: Vec<NegotiatedFigures> = set
            .iter()
            .map(|(k, n)| NegotiatedFigures {
                protocol: k.version_name(),
                cipher_suite: k.suite_name(),
                key_exchange: k.group_name(),
                alpn: k.alpn_name(),
                http: k.http_name().map(Into::into),
                handshakes: n,
            })
            .collect();
        v.sort_by_key(|f| std::cmp::Reverse(f.handshakes));
        v
    }
}

/// Where the run ran (a value that cannot be read is left out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Environment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// `Linux 6.1.0-...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// /etc/os-release's PRETTY_NAME.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// The CPU model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// A scenario run's figures per request and transaction name, its matches and sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ScenarioSection {
    pub by_request: BTreeMap<String, NameFigures>,
    pub by_transaction: BTreeMap<String, NameFigures>,
    /// How often each named match fired.
    pub matches: BTreeMap<String, u64>,
    pub sessions: Sessions,
    /// The counters of the scenario's protocol (XMPP, PostgreSQL, WebSocket); absent for HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolSection>,
}

/// One request or transaction name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NameFigures {
    pub count: u64,
    pub errors: u64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    pub completed: u64,
    pub aborted: u64,
    /// Arrivals not started because of a phase's max_users.
    pub users_dropped: u64,
    /// Session lengths.
    pub duration: Latency,
}

/// The counters of one protocol, all of them, zeros included: exactly one field is present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProtocolSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xmpp: Option<XmppCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgsql: Option<PgsqlCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WebSocketCounters>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct XmppCounters {
    pub sent_message: u64,
    pub sent_presence: u64,
    pub sent_iq: u64,
    pub sent_other: u64,
    pub received_message: u64,
    pub received_presence: u64,
    pub received_iq: u64,
    pub received_other: u64,
    pub chat_sent: u64,
    pub chat_received: u64,
    pub logins: u64,
    pub error_replies: u64,
    pub stream_errors: u64,
    pub no_destination: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PgsqlCounters {
    pub queries: u64,
    pub rows: u64,
    pub sql_errors: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WebSocketCounters {
    pub messages_sent: u64,
    pub messages_received: u64,
    pub pings_received: u64,
    pub pongs_received: u64,
    pub closes_received: u64,
}

impl ProtocolSection {
    /// The section of the workload's protocol; `None` for HTTP.
    pub fn of(w: &Workload, c: &Counters) -> Option<ProtocolSection> {
        let mut p = ProtocolSection::default();
        match &w.link {
            LinkSpec::Plain => return None,
            LinkSpec::Xmpp(_) => p.xmpp = Some(counters_of("xmpp", c)),
            LinkSpec::Pgsql(_) => p.pgsql = Some(counters_of("pgsql", c)),
            LinkSpec::WebSocket(_) => p.websocket = Some(counters_of("websocket", c)),
        }
        Some(p)
    }
}

/// A distributed run's agents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Agents {
    pub count: u64,
    /// Worker threads of each agent.
    pub threads_each: u64,
    /// Agents lost during the run (their data up to then is kept).
    pub lost: Vec<LostAgent>,
    /// True when a loss stopped the run (`--on-agent-loss stop`).
    pub stopped_by_loss: bool,
}

impl Agents {
    /// The section of a controller's run: `threads_each` as the job asked, `on_loss` as the
    /// controller was told.
    pub fn of(
        out: &headroom_dist::DistOutcome,
        threads_each: usize,
        on_loss: headroom_dist::OnLoss,
    ) -> Agents {
        Agents {
            count: out.agents as u64,
            threads_each: threads_each as u64,
            lost: out
                .lost
                .iter()
                .map(|l| LostAgent {
                    name: l.name.clone(),
                    after_interval: l.after_interval,
                    why: l.why.clone(),
                })
                .collect(),
            stopped_by_loss: !out.lost.is_empty() && on_loss == headroom_dist::OnLoss::Stop,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LostAgent {
    pub name: String,
    /// Last interval it reported; `null` when it reported none.
    pub after_interval: Option<u64>,
    pub why: String,
}

/// A typed struct filled by field name: `(name, value)` pairs that must name every field, and
/// nothing else (the structs are `deny_unknown_fields` and have no defaults). What ties a
/// counter section to [`ErrorKind`] / [`ProtoCounter`]; the tests build each one.
fn by_name<'a, T: DeserializeOwned>(
    fields: impl Iterator<Item = (&'a str, serde_json::Value)>,
    what: &str,
) -> T {
    let m: serde_json::Map<String, serde_json::Value> =
        fields.map(|(k, v)| (k.to_string(), v)).collect();
    serde_json::from_value(serde_json::Value::Object(m)).unwrap_or_else(|e| {
        panic!("summary.rs: a {what} and its summary field disagree ({e}); add the field")
    })
}

fn proto_fields<'a>(
    group: &'a str,
    c: &'a Counters,
) -> impl Iterator<Item = (&'static str, serde_json::Value)> + 'a {
    ProtoCounter::ALL
        .iter()
        .filter(move |k| k.name().0 == group)
        .map(|k| (k.name().1, serde_json::json!(c.proto[k.index()])))
}

/// Every [`ProtoCounter`] of `group` as its typed section.
fn counters_of<T: DeserializeOwned>(group: &str, c: &Counters) -> T {
    by_name(proto_fields(group, c), "ProtoCounter")
}

/// The generator's own resource use (getrusage of this process).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SelfUsage {
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub max_rss_kb: u64,
}

pub fn self_usage() -> SelfUsage {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    SelfUsage {
        cpu_user_s: tv(ru.ru_utime),
        cpu_sys_s: tv(ru.ru_stime),
        max_rss_kb: ru.ru_maxrss.max(0) as u64,
    }
}

fn process_name(p: ArrivalProcess) -> String {
    match p {
        ArrivalProcess::Poisson => "poisson",
        ArrivalProcess::Constant => "constant",
    }
    .into()
}

impl Load {
    pub fn of(plan: &Plan) -> Load {
        let think = |t: &Option<headroom_core::Distribution>| t.map(|d| format!("{d:?}"));
        let ramp = || {
            plan.ramp
                .iter()
                .map(|s| Stage {
                    duration_s: s.duration.as_secs_f64(),
                    users: s.users,
                })
                .collect()
        };
        match &plan.model {
            LoadModel::Closed {
                users,
                per_user,
                think: t,
            } => Load::Closed {
                users: *users,
                per_user: *per_user,
                think: think(t),
                ramp: ramp(),
            },
            LoadModel::Rate { connections, rate } => Load::Rate {
                connections: *connections,
                rate: *rate,
            },
            LoadModel::Open {
                rate,
                process,
                per_user,
                think: t,
                max_users,
            } => Load::Open {
                arrival_rate: *rate,
                arrival: process_name(*process),
                per_user: *per_user,
                think: think(t),
                max_users: *max_users,
            },
            LoadModel::Sessions { users, phases } => Load::Sessions {
                users: *users,
                phases: phases
                    .iter()
                    .map(|p| Phase {
                        duration_s: p.duration.as_secs_f64(),
                        from: p.from,
                        to: p.to,
                        arrival: process_name(p.process),
                        max_users: p.max_users,
                    })
                    .collect(),
                sessions: plan
                    .workload
                    .as_ref()
                    .map(|w| w.sessions.iter().map(|s| s.name.clone()).collect()),
                ramp: ramp(),
            },
        }
    }
}

/// The application protocol a run spoke, as summary.json says it: `http/1.1`, `h2` (HTTP/2 over
/// TLS) or `h2c` for URL runs, or the scenario's (`xmpp`, `pgsql`, `websocket`, `http/1.1`).
pub fn protocol_name(plan: &Plan) -> &'static str {
    if plan.http2.is_some() {
        return if plan.tls.is_some() { "h2" } else { "h2c" };
    }
    match plan.workload.as_deref().map(|w| &w.link) {
        Some(LinkSpec::Xmpp(_)) => "xmpp",
        Some(LinkSpec::Pgsql(_)) => "pgsql",
        Some(LinkSpec::WebSocket(_)) => "websocket",
        _ => "http/1.1",
    }
}

impl HttpSection {
    /// Every HTTP run's, over HTTP/1.1 and HTTP/2 alike (the browser is the same).
    pub fn of(plan: &Plan, c: &Counters) -> Option<HttpSection> {
        let a = &plan.agent;
        let config = [
            ("cookies", serde_json::json!(a.cookies)),
            ("follow", serde_json::json!(a.follow)),
            ("compressed", serde_json::json!(a.compressed)),
            (
                "auth",
                serde_json::json!(a.credentials.as_ref().map(|c| c.scheme.as_str())),
            ),
        ];
        Some(by_name(
            proto_fields("http", c).chain(config),
            "ProtoCounter",
        ))
    }
}

impl TlsSection {
    pub fn of(plan: &Plan, total: &Recorder) -> Option<TlsSection> {
        let t = plan.tls.as_ref()?;
        let c = &total.counters;
        Some(TlsSection {
            server_name: t.server_name.clone(),
            min_version: t.min_version.name().into(),
            max_version: t.max_version.name().into(),
            alpn: t
                .alpn
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            insecure: t.insecure,
            ca: if t.ca_pem.is_some() { "file" } else { "system" }.into(),
            client_certificate: t.client_cert_pem.is_some(),
            resume: t.resume,
            handshakes: c.proto[ProtoCounter::TlsHandshakes.index()],
            resumed: c.proto[ProtoCounter::TlsResumed.index()],
            negotiated: NegotiatedFigures::of(&total.negotiated),
            negotiated_other: total.negotiated.other,
        })
    }
}

impl ScenarioSection {
    /// `None` for a URL run.
    pub fn of(plan: &Plan, total: &Recorder) -> Option<ScenarioSection> {
        let w = plan.workload.as_ref()?;
        let mut s = ScenarioSection::default();
        for (m, n) in w.names.iter().zip(total.names.iter()) {
            let figures = NameFigures {
                count: n.count,
                errors: n.errors,
                latency_us: Latency::of(&n.latency),
            };
            match m.kind {
                NameKind::Request => s.by_request.insert(m.name.clone(), figures),
                NameKind::Transaction => s.by_transaction.insert(m.name.clone(), figures),
            };
        }
        s.matches = w
            .matches
            .iter()
            .cloned()
            .zip(total.matches.iter().copied())
            .collect();
        let c = &total.counters;
        s.sessions = Sessions {
            completed: c.sessions_completed,
            aborted: c.sessions_aborted,
            users_dropped: c.users_dropped,
            duration: Latency::of(&total.sessions),
        };
        s.protocol = ProtocolSection::of(w, c);
        Some(s)
    }
}

impl Environment {
    /// Where this process runs: kernel, OS, CPU model and count, memory, host name (read from
    /// /proc and /etc).
    pub fn here() -> Environment {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        Environment {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease").map(|r| {
                format!(
                    "{} {r}",
                    read("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into())
                )
            }),
            os: read("/etc/os-release").and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            }),
            cpu: read("/proc/cpuinfo").and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            }),
            cores: std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u64),
            memory_bytes: read("/proc/meminfo").and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .map(|kb| kb * 1024)
            }),
        }
    }
}

pub(crate) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

impl RunSummary {
    /// The summary of `plan`'s run: everything but the driver's `agents` section and the
    /// thresholds (see [`RunSummary::set_thresholds`]).
    pub fn build(plan: &Plan, out: &RunOutcome, usage: &SelfUsage, command: &str) -> RunSummary {
        let t = &out.total;
        let c = &t.counters;
        let secs = out.elapsed.as_secs_f64().max(1e-9);
        RunSummary {
            format_version: FORMAT_VERSION,
            headroom_version: env!("CARGO_PKG_VERSION").into(),
            command: command.into(),
            target: plan.target_name.clone(),
            model: plan.model.name().into(),
            load: Load::of(plan),
            threads: plan.threads as u64,
            keepalive: plan.keepalive,
            pipeline: plan.pipeline,
            protocol: protocol_name(plan).into(),
            streams: plan.http2.map(|h| h.streams),
            http2: plan.http2.map(|_| counters_of("http2", c)),
            http: HttpSection::of(plan, c),
            tls: TlsSection::of(plan, t),
            started_at: humantime::format_rfc3339_millis(out.started_at).to_string(),
            duration_s: round3(secs),
            interrupted: out.interrupted,
            stopped: None,
            requests: c.requests,
            responses: c.responses,
            in_flight: out.in_flight,
            errors: Errors::of(c),
            errors_total: c.errors_total(),
            error_rate: round6(c.error_rate()),
            status: StatusClasses::of(c),
            status_codes: c.codes_seen().collect(),
            expect_status: (!plan.expect_status.is_empty()).then(|| plan.expect_status.to_string()),
            users_started: c.users_started,
            users_finished: c.users_finished,
            throughput_rps: round3(c.responses as f64 / secs),
            latency_us: Latency::of(&t.latency),
            latency_uncorrected_us: Latency::of(&t.latency_uncorrected),
            connect_us: Latency::of(&t.connect),
            tls_us: Latency::of(&t.tls),
            served_us: Latency::of(&t.served),
            connects: c.connects,
            connections_peak: out.connections_peak,
            tcp_connected_peak: out.tcp_connected_peak,
            idle_closed: c.idle_closed,
            reconnects: c.reconnects,
            bytes_sent: c.bytes_sent,
            bytes_received: c.bytes_received,
            cpu_user_s: round3(usage.cpu_user_s),
            cpu_sys_s: round3(usage.cpu_sys_s),
            max_rss_kb: usage.max_rss_kb,
            environment: Environment::here(),
            scenario: ScenarioSection::of(plan, t),
            agents: None,
            thresholds: None,
            thresholds_ok: None,
        }
    }

    /// Records the checked thresholds (none: no `thresholds` key); returns how many broke.
    pub fn set_thresholds(&mut self, checked: &[Checked]) -> usize {
        let broken = checked.iter().filter(|c| !c.ok).count();
        if checked.is_empty() {
            self.thresholds = None;
            self.thresholds_ok = None;
        } else {
            self.thresholds = Some(checked.to_vec());
            self.thresholds_ok = Some(broken == 0);
        }
        broken
    }

    /// summary.json as a JSON value, keys sorted at every level (serde_json's map): what
    /// `--json` prints and the run directory holds.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a RunSummary is plain data")
    }

    /// Reads a summary.json (for instance a run directory's).
    pub fn from_json(text: &str) -> serde_json::Result<RunSummary> {
        serde_json::from_str(text)
    }
}

/// JSON Schema (draft 2020-12) of summary.json, as schema/summary.schema.json holds it. Made
/// for what is written (serde's serialize side): a field that is `null` when absent is required,
/// one that is left out is not, and no other key is allowed.
#[cfg(feature = "schema")]
pub fn schema() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<RunSummary>();
    serde_json::to_value(schema).expect("a schema is JSON")
}

#[cfg(test)]
pub(crate) fn test_plan() -> Plan {
    use headroom_core::{HttpRequest, SocketOptions, StopCondition};
    use std::time::Duration;
    let addr: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    Plan {
        target: addr,
        target_name: "http://127.0.0.1:8080/".into(),
        request: HttpRequest {
            method: "GET".into(),
            path: "/".into(),
            host: addr.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        },
        model: LoadModel::Closed {
            users: 2,
            per_user: None,
            think: None,
        },
        ramp: Vec::new(),
        stop: StopCondition {
            duration: Some(Duration::from_secs(1)),
            requests: None,
        },
        threads: 1,
        interval: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(10),
        expect_status: Default::default(),
        keepalive: true,
        pipeline: 1,
        socket: SocketOptions::default(),
        workload: None,
        segment: Default::default(),
        start_at: None,
        tls: None,
        http2: None,
        agent: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_group_fills_its_section() {
        // Each panics when ErrorKind / ProtoCounter and the struct disagree.
        let c = Counters::default();
        let _: Errors = Errors::of(&c);
        let _: Http2Section = counters_of("http2", &c);
        let _: XmppCounters = counters_of("xmpp", &c);
        let _: PgsqlCounters = counters_of("pgsql", &c);
        let _: WebSocketCounters = counters_of("websocket", &c);
        let plan = test_plan();
        assert!(HttpSection::of(&plan, &c).is_some());
        // Every group of ProtoCounter has a home here (tls's two are TlsSection's fields).
        for k in ProtoCounter::ALL {
            assert!(
                ["http", "http2", "tls", "xmpp", "pgsql", "websocket"].contains(&k.name().0),
                "{:?} belongs to no summary section",
                k
            );
        }
    }

    #[test]
    fn error_rate_counts_attempts() {
        let mut c = Counters {
            responses: 90,
            ..Default::default()
        };
        c.errors[ErrorKind::Http5xx.index()] = 10; // among the 90 responses
        c.errors[ErrorKind::Refused.index()] = 10; // no response
        assert!((c.error_rate() - 20.0 / 100.0).abs() < 1e-12);
        assert_eq!(Counters::default().error_rate(), 0.0);
    }

    #[test]
    fn unexpected_statuses_are_responses_in_the_error_rate() {
        let mut c = Counters::default();
        let expect: headroom_core::StatusSet = "200".parse().unwrap();
        for code in [200, 200, 404, 503] {
            c.responses += 1;
            c.reply_status(code, &expect);
        }
        assert!(
            (c.error_rate() - 0.5).abs() < 1e-12,
            "2 of 4 attempts failed"
        );
        let m: BTreeMap<u16, u64> = c.codes_seen().collect();
        assert_eq!(
            serde_json::to_value(m).unwrap(),
            serde_json::json!({"200": 2, "404": 1, "503": 1})
        );
    }
}
