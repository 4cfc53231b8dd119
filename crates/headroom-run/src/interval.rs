//! Building one line of intervals.jsonl, the typed [`IntervalLine`] of headroom-format (the
//! merged figures of one reporting interval: what the run directory, the live dashboard and the
//! Prometheus endpoint get each interval), re-exported here. Written with sorted keys, as
//! summary.json; schema/interval.schema.json is generated from it.

use headroom_core::session::NameKind;
use headroom_core::{Plan, ProtoCounter};
use headroom_engine::Interval;
pub use headroom_format::interval::*;
use headroom_metrics::{LatencyStats, Recorder};

use crate::summary::{errors_of, protocol_of, round3, status_of};

/// A histogram's figures as an interval line writes them.
pub fn interval_latency_of(h: &hdrhistogram::Histogram<u64>) -> IntervalLatency {
    let s = LatencyStats::of(h);
    IntervalLatency {
        mean: s.mean,
        p50: s.p50,
        p90: s.p90,
        p99: s.p99,
        max: s.max,
    }
}

/// What the run library adds to [`IntervalLine`]: building it from an interval, and its JSON.
pub trait IntervalLineExt {
    /// The line of `iv`; `server` is the sampled server process's figures for the interval.
    fn of(
        iv: &Interval<'_>,
        plan: &Plan,
        server: Option<&headroom_monitor::Sample>,
    ) -> IntervalLine;
    /// The line as JSON, keys sorted at every level.
    fn to_json(&self) -> serde_json::Value;
}

impl IntervalLineExt for IntervalLine {
    fn of(
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
            errors: errors_of(c),
            status: status_of(c),
            status_codes: c.codes_seen().collect(),
            latency_us: interval_latency_of(&r.latency),
            latency_uncorrected_us: interval_latency_of(&r.latency_uncorrected),
            connect_us: interval_latency_of(&r.connect),
            tls_us: interval_latency_of(&r.tls),
            tls_handshakes: c.proto[ProtoCounter::TlsHandshakes.index()],
            tls_resumed: c.proto[ProtoCounter::TlsResumed.index()],
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
            generator_cpu_pct: round3(
                c.worker_cpu_us as f64 / 1e4 / len / c.worker_intervals.max(1) as f64,
            ),
            generator_busy_workers: c.worker_busy_intervals,
            generator_wait_pct: round3(
                c.worker_wait_us as f64 / 1e4 / len / c.worker_intervals.max(1) as f64,
            ),
            lag_us: interval_latency_of(&r.lag),
            scenario: interval_scenario_of(plan, r),
            server: server.map(|sm| ServerFigures {
                cpu_user_pct: round3(sm.cpu_user_pct),
                cpu_sys_pct: round3(sm.cpu_sys_pct),
                rss_bytes: sm.rss_bytes,
                threads: sm.threads,
                fds: sm.fds,
                processes: sm.processes,
                busiest_thread_cpu_pct: round3(sm.busiest_thread_cpu_pct),
                accept_queue: sm.accept_queue,
                accept_backlog: sm.accept_backlog,
                threads_running: sm.threads_running,
                threads_blocked: sm.threads_blocked,
                fds_max_process: sm.fds_max_process,
                fd_limit: sm.fd_limit,
                machine_cpu_user_pct: round3(sm.machine.cpu_user_pct),
                machine_cpu_sys_pct: round3(sm.machine.cpu_sys_pct),
                machine_mem_available_bytes: sm.machine.mem_available_bytes,
                listen_overflows: sm.kernel.listen_overflows,
                syn_drops: sm.kernel.syn_drops,
                retransmits: sm.kernel.retransmits,
                resets_sent: sm.kernel.resets_sent,
                tcp_time_wait: sm.kernel.tcp_time_wait,
                procs_running: sm.kernel.procs_running,
            }),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an IntervalLine is plain data")
    }
}

/// An interval's `scenario` section; `None` for a URL run.
pub fn interval_scenario_of(plan: &Plan, r: &Recorder) -> Option<IntervalScenario> {
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
        protocol: protocol_of(w, &r.counters),
    })
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
