//! One line of intervals.jsonl as a type, [`IntervalLine`]: the merged figures of one reporting
//! interval (what the run directory, the live dashboard and the Prometheus endpoint get each
//! interval). Written with sorted keys, as summary.json; schema/interval.schema.json is
//! generated from it.

use std::collections::BTreeMap;

use headroom_core::session::NameKind;
use headroom_core::Plan;
use headroom_engine::Interval;
use headroom_metrics::{LatencyStats, Recorder};
use serde::{Deserialize, Serialize};

use crate::summary::{round3, Errors, ProtocolSection, StatusClasses};

/// One line of intervals.jsonl. Counters are the interval's own (they add up to the summary's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
pub struct IntervalLatency {
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl IntervalLatency {
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> IntervalLatency {
        let s = LatencyStats::of(h);
        IntervalLatency {
            mean: s.mean,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
            max: s.max,
        }
    }
}

/// Compact per-name figures of a scenario run's interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
pub struct IntervalName {
    pub count: u64,
    pub errors: u64,
    pub p50: u64,
    pub p99: u64,
}

/// The server's process tree over the interval (see headroom-monitor).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServerFigures {
    /// Percent of one core (200 = two cores busy).
    pub cpu_user_pct: f64,
    pub cpu_sys_pct: f64,
    pub rss_bytes: u64,
    pub threads: u64,
    pub fds: u64,
    pub processes: u32,
}

impl IntervalLine {
    /// The line of `iv`; `server` is the sampled server process's figures for the interval.
    pub fn of(
        iv: &Interval<'_>,
        plan: &Plan,
        server: Option<&headroom_monitor::Sample>,
    ) -> IntervalLine {
        let r = iv.merged;
        let c = &r.counters;
        let len = iv.length.as_secs_f64().max(1e-9);
        IntervalLine {
            index: iv.index,
            t_s: round3(iv.start.as_secs_f64()),
            length_s: round3(iv.length.as_secs_f64()),
            requests: c.requests,
            responses: c.responses,
            rps: round3(c.responses as f64 / len),
            errors: Errors::of(c),
            status: StatusClasses::of(c),
            status_codes: c.codes_seen().collect(),
            latency_us: IntervalLatency::of(&r.latency),
            latency_uncorrected_us: IntervalLatency::of(&r.latency_uncorrected),
            connect_us: IntervalLatency::of(&r.connect),
            tls_us: IntervalLatency::of(&r.tls),
            connects: c.connects,
            disconnects: c.disconnects,
            connections_open: c.connections_open,
            connections_peak: c.connections_peak,
            tcp_connected_open: c.tcp_connected_open,
            tcp_connected_peak: c.tcp_connected_peak,
            idle_closed: c.idle_closed,
            reconnects: c.reconnects,
            users_active: c.users_active,
            users_started: c.users_started,
            users_finished: c.users_finished,
            bytes_sent: c.bytes_sent,
            bytes_received: c.bytes_received,
            scenario: IntervalScenario::of(plan, r),
            server: server.map(|sm| ServerFigures {
                cpu_user_pct: round3(sm.cpu_user_pct),
                cpu_sys_pct: round3(sm.cpu_sys_pct),
                rss_bytes: sm.rss_bytes,
                threads: sm.threads,
                fds: sm.fds,
                processes: sm.processes,
            }),
        }
    }

    /// The line as JSON, keys sorted at every level.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an IntervalLine is plain data")
    }
}

impl IntervalScenario {
    /// `None` for a URL run.
    pub fn of(plan: &Plan, r: &Recorder) -> Option<IntervalScenario> {
        let w = plan.workload.as_ref()?;
        let names = w
            .names
            .iter()
            .zip(r.names.iter())
            .map(|(m, n)| {
                let key = match m.kind {
                    NameKind::Request => m.name.clone(),
                    NameKind::Transaction => format!("tx:{}", m.name),
                };
                let s = LatencyStats::of(&n.latency);
                let figures = IntervalName {
                    count: n.count,
                    errors: n.errors,
                    p50: s.p50,
                    p99: s.p99,
                };
                (key, figures)
            })
            .collect();
        Some(IntervalScenario {
            names,
            sessions_completed: r.counters.sessions_completed,
            sessions_aborted: r.counters.sessions_aborted,
            protocol: ProtocolSection::of(w, &r.counters),
        })
    }
}

/// One line of intervals.jsonl as JSON (the name `headroom run` has always called it by).
pub fn interval_json(
    iv: &Interval<'_>,
    plan: &Plan,
    server: Option<&headroom_monitor::Sample>,
) -> serde_json::Value {
    IntervalLine::of(iv, plan, server).to_json()
}

/// JSON Schema (draft 2020-12) of one intervals.jsonl line, as schema/interval.schema.json
/// holds it.
#[cfg(feature = "schema")]
pub fn schema() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<IntervalLine>();
    serde_json::to_value(schema).expect("a schema is JSON")
}
