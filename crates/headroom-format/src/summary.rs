//! summary.json as a type: [`RunSummary`] *is* its schema (schema/summary.schema.json is
//! generated from it, docs/summary-json.md describes it; headroom-run's tests keep both in step).
//!
//! Written by headroom-run (`RunSummary::build` there, from a plan and the engine's outcome), so
//! `headroom run`, `headroom demo`, the lab and the agents' controller write the same file; read
//! by the report, the CLI and the lab.
//!
//! The writer's serde_json map sorts keys, so the file's keys are in alphabetical order at every
//! level, as they have always been. `Option` fields are `null` when absent unless marked
//! `skip_serializing_if` (the sections that only some runs have: `scenario`, `agents`,
//! `thresholds`, `thresholds_ok`, and environment values that could not be read).
//!
//! Read tolerantly (see the crate's compatibility rule): every struct is `#[serde(default)]`, so
//! a key missing from an older file reads as its default, and an unknown key is ignored. The
//! schema is generated for what is *written*: `schemars(!default, deny_unknown_fields)` keeps it
//! strict (every key required, no other key allowed).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Version of the summary.json / intervals.jsonl layout.
pub const FORMAT_VERSION: u32 = 1;

/// One run's summary.json.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
    /// `--timer-slack` in µs: how early a paced send or a think time's end may fire to share
    /// a wake-up with others (0 in files of earlier headroom versions, which had none).
    pub timer_slack_us: u64,
    /// `http/1.1`, `h2`, `h2c`, `xmpp`, `pgsql`, `websocket`, `mqtt`, `ldap`, `mysql` or `amqp`.
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
    /// The generator's self-check: its workers' CPU, how late it sent, what it could not
    /// start, and whether it (not the server) was the run's limit.
    #[serde(default)]
    pub generator: GeneratorSection,
    /// Why the server stopped scaling, or that nothing did, with the figures that say so
    /// (docs/verdicts.md); `null` in files of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// The generator's self-check (summary.json's `generator`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct GeneratorSection {
    /// Worker threads, over every agent.
    pub workers: u64,
    /// The workers' CPU (user and system), mean percent of one core per worker.
    pub worker_cpu_pct: f64,
    /// How long the workers waited runnable for a CPU (the scheduler's run delay), mean percent
    /// of the run per worker: a machine too busy to run the generator when it had work.
    pub worker_wait_pct: f64,
    /// Of the worker-intervals, the percentage in which the worker ran or waited to run at
    /// least 90% of the time: near 100, the generator never idled and its figures measure
    /// itself.
    pub busy_intervals_pct: f64,
    /// How late the generator handled each timer (a send after think time or at a rate, a
    /// session's next step) and each arrival against its intended instant, in µs.
    pub lag_us: Latency,
    /// Of the worker-intervals, the percentage in which 1% of the worker's timed sends went
    /// out 10 ms late or more: a generator behind its schedule, not one burst of starts.
    pub late_intervals_pct: f64,
    /// Arrivals not started because a phase's `max_users` were alive.
    pub arrivals_dropped: u64,
    /// Connection attempts that failed for want of a local port or descriptor.
    pub local_resource_errors: u64,
    /// Why the generator, not the server, was the limit: one line each. Empty when it was not.
    pub limits: Vec<String>,
}

/// Why the server stopped scaling (summary.json's `verdict`, a lab's verdict column).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct Verdict {
    /// `cpu_user`, `cpu_kernel`, `pool_exhausted`, `backlog_overflow`, `descriptor_limit`,
    /// `memory`, `network`, `client_bound`, `no_limit`, `mixed` (two or more held at once:
    /// `candidates`) or `unknown` (the server was not sampled).
    pub name: String,
    /// One sentence with its figures.
    pub says: String,
    /// With `mixed`: the verdicts whose evidence held, strongest first.
    pub candidates: Vec<String>,
    /// The figures the rules read, by name (docs/verdicts.md).
    pub evidence: BTreeMap<String, f64>,
}

/// Figures of a latency histogram in microseconds (mean and stdev rounded to 0.1 µs; all 0 when
/// there are no samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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

/// The load model and its parameters, tagged by `name`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "name", rename_all = "lowercase")]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
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
    /// A load model this headroom does not know (a file of a newer headroom), or none at all
    /// (a file cut down by hand); never written.
    #[default]
    #[serde(other)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    Other,
}

/// One stage of a closed population's ramp: the users alive move linearly from the previous
/// stage's number (0 before the first) to `users` over `duration_s`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct Stage {
    pub duration_s: f64,
    pub users: u32,
}

/// One arrival phase of a scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
    /// Every failure, whatever its kind (the run's `errors_total`).
    pub fn total(&self) -> u64 {
        let Errors {
            connect_timeout,
            refused,
            reset,
            closed,
            timeout,
            protocol,
            http_4xx,
            http_5xx,
            local_resource,
            other,
            login,
            error_reply,
            tls_untrusted,
            tls_expired,
            tls_wrong_name,
            tls_certificate,
            tls_version,
            tls_alert,
            tls_malformed,
            unexpected_status,
            redirect_limit,
            bad_location,
            redirect_offsite,
            stream_reset,
            flood,
        } = self;
        [
            *connect_timeout,
            *refused,
            *reset,
            *closed,
            *timeout,
            *protocol,
            *http_4xx,
            *http_5xx,
            *local_resource,
            *other,
            *login,
            *error_reply,
            *tls_untrusted,
            *tls_expired,
            *tls_wrong_name,
            *tls_certificate,
            *tls_version,
            *tls_alert,
            *tls_malformed,
            *unexpected_status,
            *redirect_limit,
            *bad_location,
            *redirect_offsite,
            *stream_reset,
            *flood,
        ]
        .iter()
        .sum()
    }
}

/// Responses by status class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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

/// What users did besides their requests, and how they were told to behave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
}

/// Where the run ran (a value that cannot be read is left out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct NameFigures {
    pub count: u64,
    pub errors: u64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct ProtocolSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xmpp: Option<XmppCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgsql: Option<PgsqlCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WebSocketCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mqtt: Option<MqttCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldap: Option<LdapCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mysql: Option<MysqlCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amqp: Option<AmqpCounters>,
    /// `file` steps (Tsung's fs plugin), with whatever protocol the servers speak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileCounters>,
    /// `set: {expr}` steps, with whatever protocol the servers speak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<ExprCounters>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
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
    /// Over BOSH: HTTP requests written, of them empty polls, responses read, of them empty.
    pub bosh_requests: u64,
    pub bosh_polls: u64,
    pub bosh_responses: u64,
    pub bosh_empty: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct PgsqlCounters {
    pub queries: u64,
    pub rows: u64,
    pub sql_errors: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct WebSocketCounters {
    pub messages_sent: u64,
    pub messages_received: u64,
    pub pings_received: u64,
    pub pongs_received: u64,
    pub closes_received: u64,
}

/// MQTT, as the users counted it (the publish-to-receive latency is the `mqtt:delivery`
/// transaction of the scenario section).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct MqttCounters {
    /// CONNACKs that accepted the connection.
    pub connects: u64,
    /// PUBLISH packets sent, any QoS.
    pub published: u64,
    /// QoS 1 and 2 publishes completed with success (PUBACK, PUBCOMP).
    pub publish_acked: u64,
    /// QoS 1 and 2 publishes refused (MQTT 5 reason code 0x80 and above).
    pub publish_refused: u64,
    /// Messages received from the broker.
    pub received: u64,
    /// Received messages flagged DUP (sent again by the broker).
    pub received_dup: u64,
    pub subscribed: u64,
    pub subscribe_refused: u64,
    /// PINGREQs sent: ping and wait steps, and the keep-alive's own.
    pub pings: u64,
    /// MQTT 5 DISCONNECTs from the broker.
    pub server_disconnects: u64,
}

/// LDAP, as the users counted it: requests, search entries, and every result by its RFC 4511
/// name (the common ones; the rest in `other_results`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct LdapCounters {
    /// Requests sent: binds, searches, adds, modifies, deletes, unbinds.
    pub requests: u64,
    /// Search entries (and continuation references) received.
    pub entries: u64,
    pub success: u64,
    pub no_such_object: u64,
    pub invalid_credentials: u64,
    pub entry_already_exists: u64,
    pub insufficient_access_rights: u64,
    pub size_limit_exceeded: u64,
    /// `busy` and `unavailable`.
    pub busy: u64,
    pub unwilling_to_perform: u64,
    pub other_results: u64,
    /// Notices of disconnection from the server.
    pub notices: u64,
}

/// MySQL/MariaDB, as the users counted it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct MysqlCounters {
    /// Statements sent: queries, and executions of prepared statements.
    pub queries: u64,
    /// Result rows received.
    pub rows: u64,
    /// Rows changed, as the server's OK packets say.
    pub affected: u64,
    /// Statements answered with an ERR packet.
    pub sql_errors: u64,
    /// Statements prepared (once per connection and statement).
    pub prepares: u64,
}

/// AMQP 0-9-1, as the users counted it (the publish-to-receive latency is the
/// `amqp:delivery` transaction of the scenario section).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct AmqpCounters {
    /// Messages published.
    pub published: u64,
    /// Publishes the broker confirmed (a multiple confirm counted per message).
    pub confirmed: u64,
    /// Publishes the broker refused (Basic.Nack).
    pub nacked: u64,
    /// Mandatory publishes returned unroutable.
    pub returned: u64,
    /// Messages delivered to the users' consumers.
    pub delivered: u64,
    /// Deliveries the users acknowledged.
    pub acked: u64,
    /// Channels the broker closed (an error of the method that caused it).
    pub channels_closed: u64,
}

/// `file` steps, as the users counted them: operations, bytes, and failures by why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct FileCounters {
    /// Operations run, whatever their end.
    pub ops: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Failed: the path (or a directory on it) does not exist.
    pub not_found: u64,
    pub permission_denied: u64,
    /// Failed: it exists already (a directory made twice, a link over a file).
    pub already_exists: u64,
    /// Failed: the file system is full.
    pub no_space: u64,
    /// A chunk or a close with no file open.
    pub not_open: u64,
    /// Not run: the path with its variables in left the file root (absolute, or `..`).
    pub escapes: u64,
    pub other_errors: u64,
}

/// `set: {expr}` steps: evaluations, and the failures that ended a session, by why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct ExprCounters {
    /// Evaluations, whatever their end.
    pub evaluated: u64,
    /// Failed: a result beyond a 64-bit signed integer.
    pub overflow: u64,
    /// Failed: a `div` or `rem` by zero.
    pub division_by_zero: u64,
    /// Failed: a variable read held no integer (empty, not digits, beyond 64 bits).
    pub not_integer: u64,
}

/// A distributed run's agents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct Agents {
    pub count: u64,
    /// Worker threads of each agent.
    pub threads_each: u64,
    /// Agents lost during the run (their data up to then is kept).
    pub lost: Vec<LostAgent>,
    /// True when a loss stopped the run (`--on-agent-loss stop`).
    pub stopped_by_loss: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct LostAgent {
    pub name: String,
    /// Last interval it reported; `null` when it reported none.
    pub after_interval: Option<u64>,
    pub why: String,
}

/// The unit of a checked value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Unit {
    /// Microseconds (percentiles, means).
    #[serde(rename = "us")]
    Micros,
    /// A fraction of attempts (error_rate).
    #[serde(rename = "fraction")]
    Fraction,
    /// Per second (rps).
    #[serde(rename = "per_s")]
    PerSecond,
}

/// One checked threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
// No defaults: a checked threshold has always had every field.
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct Checked {
    /// The metric as the scenario wrote it, e.g. `p99(sign-in)`.
    pub threshold: String,
    /// E.g. `< 300ms`.
    pub condition: String,
    /// The measured value (µs for latencies, a fraction for error_rate, per second for rps),
    /// rounded to 1e-6; `null` when nothing was measured (which breaks the threshold).
    pub value: Option<f64>,
    pub unit: Unit,
    pub ok: bool,
}

impl RunSummary {
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
}
