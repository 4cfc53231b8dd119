//! `headroom run FILE.yaml|FILE.xml|FILE.har` after the run: its thresholds checked and its
//! per-name figures reported. (The scenario becomes a plan in `headroom_run::spec`.)

use headroom_core::session::{LinkSpec, NameKind, Workload};
use headroom_core::{Plan, ProtoCounter};
use headroom_engine::RunOutcome;
use headroom_metrics::{Counters, LatencyStats, Recorder};
use headroom_scenario::model::{CmpOp, Metric, Threshold, ThresholdValue};


/// One checked threshold.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Checked {
    pub threshold: String,
    pub condition: String,
    /// The measured value (µs for latencies, a fraction for error_rate, per second for rps).
    pub value: f64,
    pub unit: &'static str,
    pub ok: bool,
}

fn histogram_of<'a>(
    plan: &Plan,
    total: &'a Recorder,
    name: Option<&String>,
) -> Option<&'a hdrhistogram::Histogram<u64>> {
    let Some(name) = name else {
        return Some(&total.latency);
    };
    let w = plan.workload.as_ref()?;
    // A request name first, then a transaction of that name.
    let idx = w
        .names
        .iter()
        .position(|m| &m.name == name && m.kind == NameKind::Request)
        .or_else(|| w.names.iter().position(|m| &m.name == name))?;
    total.names.get(idx).map(|n| &n.latency)
}

/// Checks every threshold against the run's totals.
pub fn check(plan: &Plan, out: &RunOutcome, thresholds: &[Threshold]) -> Vec<Checked> {
    let c = &out.total.counters;
    let secs = out.elapsed.as_secs_f64().max(1e-9);
    thresholds
        .iter()
        .map(|t| {
            let (value, unit) = match &t.metric {
                Metric::Percentile { p, name } => {
                    let v = histogram_of(plan, &out.total, name.as_ref())
                        .filter(|h| !h.is_empty())
                        .map(|h| h.value_at_quantile(p / 100.0) as f64);
                    (v, "us")
                }
                Metric::Mean { name } => {
                    let v = histogram_of(plan, &out.total, name.as_ref())
                        .filter(|h| !h.is_empty())
                        .map(|h| h.mean());
                    (v, "us")
                }
                Metric::ErrorRate => (Some(crate::output::error_rate(c)), "fraction"),
                Metric::Rps => (Some(c.responses as f64 / secs), "per_s"),
            };
            let limit = match t.value {
                ThresholdValue::Duration(d) => d.as_secs_f64() * 1e6,
                ThresholdValue::Ratio(r) => r,
                ThresholdValue::Number(n) => n,
            };
            // Nothing measured (no such reply ever came) fails the threshold: a check that
            // cannot be made must not pass silently.
            let ok = value.is_some_and(|v| match t.op {
                CmpOp::Lt => v < limit,
                CmpOp::Le => v <= limit,
                CmpOp::Gt => v > limit,
                CmpOp::Ge => v >= limit,
            });
            let op = match t.op {
                CmpOp::Lt => "<",
                CmpOp::Le => "<=",
                CmpOp::Gt => ">",
                CmpOp::Ge => ">=",
            };
            let shown = match t.value {
                ThresholdValue::Duration(d) => format!("{d:?}"),
                ThresholdValue::Ratio(r) => format!("{}%", r * 100.0),
                ThresholdValue::Number(n) => format!("{n}"),
            };
            Checked {
                threshold: t.text.clone(),
                condition: format!("{op} {shown}"),
                value: value.map(|v| (v * 1e6).round() / 1e6).unwrap_or(f64::NAN),
                unit,
                ok,
            }
        })
        .collect()
}

fn name_json(n: &headroom_metrics::NameStats) -> serde_json::Value {
    serde_json::json!({
        "count": n.count,
        "errors": n.errors,
        "latency_us": LatencyStats::of(&n.latency),
    })
}

/// The scenario sections of summary.json: per request and transaction name, matches, sessions.
pub fn summary_sections(plan: &Plan, total: &Recorder) -> Option<serde_json::Value> {
    let w = plan.workload.as_ref()?;
    let mut requests = serde_json::Map::new();
    let mut transactions = serde_json::Map::new();
    for (m, n) in w.names.iter().zip(total.names.iter()) {
        let target = match m.kind {
            NameKind::Request => &mut requests,
            NameKind::Transaction => &mut transactions,
        };
        target.insert(m.name.clone(), name_json(n));
    }
    let matches: serde_json::Map<String, serde_json::Value> = w
        .matches
        .iter()
        .zip(total.matches.iter())
        .map(|(m, c)| (m.clone(), serde_json::json!(c)))
        .collect();
    let c = &total.counters;
    let mut out = serde_json::json!({
        "by_request": requests,
        "by_transaction": transactions,
        "matches": matches,
        "sessions": {
            "completed": c.sessions_completed,
            "aborted": c.sessions_aborted,
            "users_dropped": c.users_dropped,
            "duration": LatencyStats::of(&total.sessions),
        },
    });
    if let Some(p) = protocol_json(w, c) {
        out["protocol"] = p;
    }
    Some(out)
}

/// The protocol counters of the scenario's protocol (`{"xmpp": {"chat_sent": N, ...}}`), all
/// of them, zeros included, so a missing figure means "not this protocol".
fn protocol_json(w: &Workload, c: &Counters) -> Option<serde_json::Value> {
    let proto = match &w.link {
        LinkSpec::Plain => return None,
        LinkSpec::Xmpp(_) => "xmpp",
        LinkSpec::Pgsql(_) => "pgsql",
        LinkSpec::WebSocket(_) => "websocket",
    };
    let figures: serde_json::Map<String, serde_json::Value> = ProtoCounter::ALL
        .iter()
        .filter(|k| k.name().0 == proto)
        .map(|k| {
            (
                k.name().1.to_string(),
                serde_json::json!(c.proto[k.index()]),
            )
        })
        .collect();
    Some(serde_json::json!({ proto: figures }))
}

/// The protocol counters as a few human lines.
fn protocol_human(w: &Workload, c: &Counters) -> Option<String> {
    use crate::output::thousands;
    let p = |k: ProtoCounter| thousands(c.proto[k.index()]);
    use ProtoCounter::*;
    Some(match &w.link {
        LinkSpec::Plain => return None,
        LinkSpec::Xmpp(_) => {
            let sent = c.proto[XmppChatSent.index()];
            let got = c.proto[XmppChatReceived.index()];
            let ratio = if sent > 0 {
                format!(" ({:.1}% of sent)", got as f64 * 100.0 / sent as f64)
            } else {
                String::new()
            };
            format!(
                "  XMPP         {} logins; chats sent {}, received {}{ratio}\n\
                 \x20              stanzas sent: message {}, presence {}, iq {}, other {}\n\
                 \x20              received: message {}, presence {}, iq {}, other {}\n\
                 \x20              iq errors {}, stream errors {}, no destination {}\n",
                p(XmppLogins),
                p(XmppChatSent),
                p(XmppChatReceived),
                p(XmppSentMessage),
                p(XmppSentPresence),
                p(XmppSentIq),
                p(XmppSentOther),
                p(XmppReceivedMessage),
                p(XmppReceivedPresence),
                p(XmppReceivedIq),
                p(XmppReceivedOther),
                p(XmppErrorReplies),
                p(XmppStreamErrors),
                p(XmppNoDestination),
            )
        }
        LinkSpec::Pgsql(_) => format!(
            "  PostgreSQL   {} statements, {} rows, {} SQL errors\n",
            p(PgQueries),
            p(PgRows),
            p(PgSqlErrors)
        ),
        LinkSpec::WebSocket(_) => format!(
            "  WebSocket    messages sent {}, received {}; pings {}, pongs {}, closes {} received\n",
            p(WsMessagesSent),
            p(WsMessagesReceived),
            p(WsPingsReceived),
            p(WsPongsReceived),
            p(WsClosesReceived)
        ),
    })
}

/// Compact per-name figures for one interval line.
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
                serde_json::json!({"count": n.count, "errors": n.errors, "p50": s.p50, "p99": s.p99}),
            )
        })
        .collect();
    let mut out = serde_json::json!({
        "names": names,
        "sessions_completed": r.counters.sessions_completed,
        "sessions_aborted": r.counters.sessions_aborted,
    });
    if let Some(p) = protocol_json(w, &r.counters) {
        out["protocol"] = p;
    }
    Some(out)
}

/// Human lines: one per name, then sessions and thresholds.
pub fn human(plan: &Plan, total: &Recorder, checked: &[Checked]) -> String {
    use crate::output::{fmt_us, thousands};
    use std::fmt::Write as _;
    let mut s = String::new();
    let Some(w) = plan.workload.as_ref() else {
        return s;
    };
    let width = w.names.iter().map(|m| m.name.len() + 3).max().unwrap_or(4);
    let _ = writeln!(
        s,
        "  {:<width$}  {:>9} {:>7} {:>9} {:>9} {:>9}",
        "Name", "count", "errors", "p50", "p99", "max"
    );
    for (m, n) in w.names.iter().zip(total.names.iter()) {
        let label = match m.kind {
            NameKind::Request => m.name.clone(),
            NameKind::Transaction => format!("tx {}", m.name),
        };
        let st = LatencyStats::of(&n.latency);
        let _ = writeln!(
            s,
            "  {label:<width$}  {:>9} {:>7} {:>9} {:>9} {:>9}",
            thousands(n.count),
            thousands(n.errors),
            fmt_us(st.p50),
            fmt_us(st.p99),
            fmt_us(st.max)
        );
    }
    for (m, c) in w.matches.iter().zip(total.matches.iter()) {
        let _ = writeln!(s, "  match '{m}' fired {}", thousands(*c));
    }
    let c = &total.counters;
    let mean = if total.sessions.is_empty() {
        String::new()
    } else {
        format!(" (mean {})", fmt_us(total.sessions.mean().round() as u64))
    };
    let _ = writeln!(
        s,
        "  Sessions     {} completed{mean}, {} aborted{}",
        thousands(c.sessions_completed),
        thousands(c.sessions_aborted),
        if c.users_dropped > 0 {
            format!(
                ", {} arrivals dropped (max_users)",
                thousands(c.users_dropped)
            )
        } else {
            String::new()
        }
    );
    if let Some(line) = protocol_human(w, c) {
        s.push_str(&line);
    }
    for t in checked {
        let shown = match t.unit {
            "us" if t.value.is_finite() => fmt_us(t.value as u64),
            "fraction" => format!("{:.3}%", t.value * 100.0),
            _ => format!("{:.1}", t.value),
        };
        let _ = writeln!(
            s,
            "  Threshold    {} {}: {} ({})",
            t.threshold,
            t.condition,
            if t.ok { "ok" } else { "BROKEN" },
            shown
        );
    }
    s
}
