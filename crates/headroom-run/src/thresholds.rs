//! A scenario's thresholds checked against a run's totals: summary.json's `thresholds`, the
//! human summary's `Threshold` lines and `headroom run`'s exit status.

use headroom_core::session::NameKind;
use headroom_core::Plan;
use headroom_engine::RunOutcome;
use headroom_metrics::Recorder;
use headroom_scenario::model::{CmpOp, Metric, Threshold, ThresholdValue};

pub use headroom_format::summary::{Checked, Unit};

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
                    (v, Unit::Micros)
                }
                Metric::Mean { name } => {
                    let v = histogram_of(plan, &out.total, name.as_ref())
                        .filter(|h| !h.is_empty())
                        .map(|h| h.mean());
                    (v, Unit::Micros)
                }
                Metric::ErrorRate => (Some(c.error_rate()), Unit::Fraction),
                Metric::Rps => (Some(c.responses as f64 / secs), Unit::PerSecond),
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
                value: value.map(|v| (v * 1e6).round() / 1e6),
                unit,
                ok,
            }
        })
        .collect()
}
