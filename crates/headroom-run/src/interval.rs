//! One line of intervals.jsonl: the merged figures of one reporting interval (what the run
//! directory, the live dashboard and the Prometheus endpoint get each interval).

use headroom_core::session::NameKind;
use headroom_core::Plan;
use headroom_engine::Interval;
use headroom_metrics::{LatencyStats, Recorder};
use serde_json::json;

use crate::summary::{round3, Errors, ProtocolSection, StatusClasses};

/// One line of intervals.jsonl; `server` is the sampled server process's figures for the
/// interval (`--server-pid`).
pub fn interval_json(
    iv: &Interval<'_>,
    plan: &Plan,
    server: Option<&headroom_monitor::Sample>,
) -> serde_json::Value {
    let r = iv.merged;
    let c = &r.counters;
    let len = iv.length.as_secs_f64().max(1e-9);
    let lat = |h| {
        let s = LatencyStats::of(h);
        json!({"mean": s.mean, "p50": s.p50, "p90": s.p90, "p99": s.p99, "max": s.max})
    };
    let codes: std::collections::BTreeMap<u16, u64> = c.codes_seen().collect();
    let mut line = json!({
        "index": iv.index,
        "t_s": round3(iv.start.as_secs_f64()),
        "length_s": round3(iv.length.as_secs_f64()),
        "requests": c.requests,
        "responses": c.responses,
        "rps": round3(c.responses as f64 / len),
        "errors": Errors::of(c),
        "status": StatusClasses::of(c),
        "status_codes": codes,
        "latency_us": lat(&r.latency),
        "latency_uncorrected_us": lat(&r.latency_uncorrected),
        "connect_us": lat(&r.connect),
        "tls_us": lat(&r.tls),
        "connects": c.connects,
        "disconnects": c.disconnects,
        "connections_open": c.connections_open,
        "connections_peak": c.connections_peak,
        "users_active": c.users_active,
        "users_started": c.users_started,
        "users_finished": c.users_finished,
        "bytes_sent": c.bytes_sent,
        "bytes_received": c.bytes_received,
    });
    if let (Some(extra), Some(obj)) = (interval_sections(plan, r), line.as_object_mut()) {
        obj.insert("scenario".into(), extra);
    }
    if let (Some(sm), Some(obj)) = (server, line.as_object_mut()) {
        obj.insert(
            "server".into(),
            json!({
                "cpu_user_pct": round3(sm.cpu_user_pct),
                "cpu_sys_pct": round3(sm.cpu_sys_pct),
                "rss_bytes": sm.rss_bytes,
                "threads": sm.threads,
                "fds": sm.fds,
                "processes": sm.processes,
            }),
        );
    }
    line
}

/// Compact per-name figures for one interval line (`tx:NAME` for a transaction).
pub fn interval_sections(plan: &Plan, r: &Recorder) -> Option<serde_json::Value> {
    let w = plan.workload.as_ref()?;
    let names: serde_json::Map<String, serde_json::Value> = w
        .names
        .iter()
        .zip(r.names.iter())
        .map(|(m, n)| {
            let key = match m.kind {
                NameKind::Request => m.name.clone(),
                NameKind::Transaction => format!("tx:{}", m.name),
            };
            let s = LatencyStats::of(&n.latency);
            (
                key,
                json!({"count": n.count, "errors": n.errors, "p50": s.p50, "p99": s.p99}),
            )
        })
        .collect();
    let mut out = json!({
        "names": names,
        "sessions_completed": r.counters.sessions_completed,
        "sessions_aborted": r.counters.sessions_aborted,
    });
    if let Some(p) = ProtocolSection::of(w, &r.counters) {
        out["protocol"] = json!(p);
    }
    Some(out)
}
