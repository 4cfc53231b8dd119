//! One line of intervals.jsonl as a type, [`IntervalLine`]: the merged figures of one reporting
//! interval (what the run directory, the live dashboard and the Prometheus endpoint get each
//! interval). Written by headroom-run with sorted keys, as summary.json;
//! schema/interval.schema.json is generated from it. Read as tolerantly as the summary: a key
//! missing from an older line is its default, an unknown key is ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::summary::{Errors, ProtocolSection, StatusClasses};

/// One line of intervals.jsonl. Counters are the interval's own (they add up to the summary's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct IntervalLine {
    /// 0, 1, 2, ... in order.
    pub index: u64,
    /// The interval's start, seconds from the run's start.
    pub t_s: f64,
    pub length_s: f64,
    pub requests: u64,
    pub responses: u64,
    /// responses / length_s.
    pub rps: f64,
    pub errors: Errors,
    pub status: StatusClasses,
    /// The interval's codes seen.
    pub status_codes: BTreeMap<u16, u64>,
    pub latency_us: IntervalLatency,
    pub latency_uncorrected_us: IntervalLatency,
    pub connect_us: IntervalLatency,
    pub tls_us: IntervalLatency,
    /// TLS handshakes finished in the interval, and how many of them resumed a session (0 in a
    /// plain run; absent from older files, read as 0).
    #[serde(default)]
    pub tls_handshakes: u64,
    #[serde(default)]
    pub tls_resumed: u64,
    pub connects: u64,
    pub disconnects: u64,
    /// Served connections (the server sent a byte on them) open at the interval's end.
    pub connections_open: u64,
    pub connections_peak: u64,
    /// TCP connections established, served or not (accept queue included): open at the
    /// interval's end, and their peak.
    #[serde(default)]
    pub tcp_connected_open: u64,
    #[serde(default)]
    pub tcp_connected_peak: u64,
    /// Connections the server closed while idle, and reconnects after them.
    #[serde(default)]
    pub idle_closed: u64,
    #[serde(default)]
    pub reconnects: u64,
    pub users_active: u64,
    pub users_started: u64,
    pub users_finished: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The generator's workers' CPU, mean percent of one core per worker, and how many of
    /// them used at least 90% of a core in the interval (absent from older files, read as 0).
    #[serde(default)]
    pub generator_cpu_pct: f64,
    #[serde(default)]
    pub generator_busy_workers: u64,
    /// How long the workers waited runnable for a CPU, mean percent of the interval each.
    #[serde(default)]
    pub generator_wait_pct: f64,
    /// How late timers and arrivals were handled in the interval (µs).
    #[serde(default)]
    pub lag_us: IntervalLatency,
    /// Scenario runs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<IntervalScenario>,
    /// The sampled server (`--server-pid`), while it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerFigures>,
}

/// An interval's latency figures in microseconds (mean rounded to 0.1 µs; 0 without samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct IntervalLatency {
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

/// Compact per-name figures of a scenario run's interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct IntervalScenario {
    /// By request name, and `tx:NAME` for a transaction.
    pub names: BTreeMap<String, IntervalName>,
    pub sessions_completed: u64,
    pub sessions_aborted: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolSection>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct IntervalName {
    pub count: u64,
    pub errors: u64,
    pub p50: u64,
    pub p99: u64,
}

/// The server's process tree over the interval (see headroom-monitor).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
#[cfg_attr(feature = "schema", schemars(!default, deny_unknown_fields))]
pub struct ServerFigures {
    /// Percent of one core (200 = two cores busy).
    pub cpu_user_pct: f64,
    pub cpu_sys_pct: f64,
    pub rss_bytes: u64,
    pub threads: u64,
    pub fds: u64,
    pub processes: u32,
    /// The busiest thread's CPU over the interval, percent of one core.
    #[serde(default)]
    pub busiest_thread_cpu_pct: f64,
    /// Connections in the accept queue of the server's listener at the sample (the target's
    /// port, on loopback), and its backlog; 0 when not read.
    #[serde(default)]
    pub accept_queue: u64,
    #[serde(default)]
    pub accept_backlog: u64,
    /// Threads running or runnable at the sample, and blocked (D).
    #[serde(default)]
    pub threads_running: u64,
    #[serde(default)]
    pub threads_blocked: u64,
    /// The process with the most descriptors: how many, and its soft RLIMIT_NOFILE.
    #[serde(default)]
    pub fds_max_process: u64,
    #[serde(default)]
    pub fd_limit: u64,
    /// The machine's CPU (percent of all cores) and memory available.
    #[serde(default)]
    pub machine_cpu_user_pct: f64,
    #[serde(default)]
    pub machine_cpu_sys_pct: f64,
    #[serde(default)]
    pub machine_mem_available_bytes: u64,
    /// The kernel's TCP counters over the interval (network namespace-wide): connections a
    /// full accept queue dropped, SYNs dropped, segments retransmitted, resets sent; and
    /// sockets in TIME_WAIT, the run queue at the sample.
    #[serde(default)]
    pub listen_overflows: u64,
    #[serde(default)]
    pub syn_drops: u64,
    #[serde(default)]
    pub retransmits: u64,
    #[serde(default)]
    pub resets_sent: u64,
    #[serde(default)]
    pub tcp_time_wait: u64,
    #[serde(default)]
    pub procs_running: u64,
}
