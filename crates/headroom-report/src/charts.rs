//! The report's charts, built from a [`RunData`]. Each function returns one [`Chart`]; every
//! chart is returned even when its data is missing (with a note), so a report always has the
//! same six charts in the same order (the first four the key ones), plus the TLS handshake chart in runs that timed one and
//! the server's charts in runs that sampled it.
//!
//! x is the interval's end since the run start (`t_s + length_s`): a point stands for what
//! happened up to that instant. It is in seconds, or in minutes for runs over 20 minutes. Every
//! time chart's axis runs from 0 to the run's duration ([`run_span_s`]), whatever its series
//! hold: connections that all opened in the first second are one early instant of the run.

use crate::data::{Figures, Interval, RunData};
use crate::svg::{Chart, Series};

/// The `data-chart` names of [`all`], in order.
/// The first four are a page's key charts, shown two by two on its first screen.
pub const NAMES: [&str; 6] = [
    "throughput",
    "latency",
    "errors",
    "users",
    "connect",
    "percentiles",
];

/// The TLS handshake chart, after `connect`, in runs that timed a handshake (TLS runs).
pub const TLS_NAME: &str = "tls";

/// The charts of the server under test, after [`NAMES`], in runs that sampled it
/// (`run --server-pid`).
pub const SERVER_NAMES: [&str; 3] = ["server-cpu", "server-memory", "server-queue"];

/// Every chart of the report: [`NAMES`] in order (with [`TLS_NAME`] after `connect` when the
/// run timed a TLS handshake), then [`SERVER_NAMES`] when any interval holds a server sample.
pub fn all(data: &RunData) -> Vec<Chart> {
    let mut charts = vec![
        throughput(&data.intervals),
        latency(&data.intervals),
        errors(&data.intervals),
        users(&data.intervals),
        connect(&data.intervals),
    ];
    if has_tls(&data.intervals) {
        charts.push(tls(&data.intervals));
    }
    charts.push(percentiles(data));
    if data.intervals.iter().any(|i| i.server.is_some()) {
        charts.push(server_cpu(&data.intervals));
        charts.push(server_memory(&data.intervals));
        charts.push(server_queue(&data.intervals));
    }
    // Every time chart on the run's own axis: 0 to its duration, whatever the series hold.
    if let Some(span) = run_span_s(data) {
        let unit = time_scale(&data.intervals).0;
        for c in charts.iter_mut().filter(|c| c.x_from_zero) {
            c.x_max = Some(span / unit);
        }
    }
    charts
}

/// How long the run lasted, in seconds: summary.json's `duration_s`, or the last interval's end
/// when that is later (or the run has no summary).
pub fn run_span_s(data: &RunData) -> Option<f64> {
    let from_summary = data.summary.as_ref().and_then(|s| s.duration_s);
    let from_intervals = data
        .intervals
        .iter()
        .filter_map(Interval::t_end)
        .reduce(f64::max);
    match (from_summary, from_intervals) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
    .filter(|s| s.is_finite() && *s > 0.0)
}

/// The server's CPU, user and system, in percent of one core.
pub fn server_cpu(intervals: &[Interval]) -> Chart {
    let mut c = time_chart("server-cpu", "Server CPU", "% of one core", intervals);
    c.series = vec![
        Series::new(
            "user",
            over_time(intervals, |i| i.server.as_ref()?.cpu_user_pct),
        ),
        Series::new(
            "system",
            over_time(intervals, |i| i.server.as_ref()?.cpu_sys_pct),
        ),
    ];
    c
}

/// The server's resident memory in MB (10^6 bytes).
pub fn server_memory(intervals: &[Interval]) -> Chart {
    let mut c = time_chart("server-memory", "Server memory", "MB", intervals);
    c.series = vec![Series::new(
        "rss",
        over_time(intervals, |i| {
            Some(i.server.as_ref()?.rss_bytes? as f64 / 1e6)
        }),
    )];
    c
}

/// Connections waiting for the server: in its listener's accept queue at each sample, and
/// those the kernel dropped at a full queue in each interval (docs/verdicts.md).
pub fn server_queue(intervals: &[Interval]) -> Chart {
    let mut c = time_chart(
        "server-queue",
        "Connections waiting for the server",
        "connections",
        intervals,
    );
    c.series = vec![
        Series::new(
            "in its accept queue",
            over_time(intervals, |i| Some(i.server.as_ref()?.accept_queue? as f64)),
        ),
        Series::new(
            "dropped at a full queue",
            over_time(intervals, |i| {
                Some(i.server.as_ref()?.listen_overflows? as f64)
            }),
        ),
    ];
    c
}

/// Runs longer than this are charted in minutes: an hour reads 0, 10, ... 60 rather than
/// 0, 500, ... 4k seconds.
const MINUTES_AFTER_S: f64 = 1200.0;

/// The x unit for these intervals: (seconds per unit, axis label).
fn time_scale(intervals: &[Interval]) -> (f64, &'static str) {
    let end = intervals
        .iter()
        .filter_map(Interval::t_end)
        .fold(0.0, f64::max);
    if end > MINUTES_AFTER_S {
        (60.0, "minutes since start")
    } else {
        (1.0, "seconds since start")
    }
}

fn time_chart(name: &str, title: &str, y_label: &str, intervals: &[Interval]) -> Chart {
    let mut c = Chart::new(name, title, time_scale(intervals).1, y_label);
    c.x_from_zero = true;
    c
}

/// (x, f(interval)) for every interval with both, x in the unit of [`time_scale`].
fn over_time(intervals: &[Interval], f: impl Fn(&Interval) -> Option<f64>) -> Vec<(f64, f64)> {
    let unit = time_scale(intervals).0;
    intervals
        .iter()
        .filter_map(|iv| Some((iv.t_end()? / unit, f(iv)?)))
        .collect()
}

fn no_interval_note(c: &mut Chart, intervals: &[Interval]) {
    if intervals.is_empty() {
        c.note = Some("no intervals recorded".to_string());
    }
}

/// Simultaneous users and open connections (Tsung's "simultaneous users").
pub fn users(intervals: &[Interval]) -> Chart {
    let mut c = time_chart("users", "Users and connections", "count", intervals);
    c.series = vec![
        Series::new(
            "users_active",
            over_time(intervals, |i| i.users_active.map(|v| v as f64)),
        ),
        Series::new(
            "connections_open",
            over_time(intervals, |i| i.connections_open.map(|v| v as f64)),
        ),
    ];
    no_interval_note(&mut c, intervals);
    c
}

/// Responses per second.
pub fn throughput(intervals: &[Interval]) -> Chart {
    let mut c = time_chart("throughput", "Throughput", "responses/s", intervals);
    let rps = over_time(intervals, |i| {
        i.rps.or(match (i.responses, i.length_s) {
            (Some(r), Some(l)) if l > 0.0 => Some(r as f64 / l),
            _ => None,
        })
    });
    c.series = vec![Series::new("rps", rps)];
    no_interval_note(&mut c, intervals);
    c
}

/// The latency figures of an interval that had something to measure. An interval without a
/// response (or connect) has all-zero figures: it is left out rather than drawn as a dip to 0.
fn measured(count: Option<u64>, f: &Figures) -> bool {
    let all_zero = [f.p50, f.p90, f.p99, f.max]
        .iter()
        .all(|v| v.unwrap_or(0.0) == 0.0);
    !(count == Some(0) && all_zero)
}

fn ms(us: Option<f64>) -> Option<f64> {
    us.map(|v| v / 1000.0)
}

/// One figure (`f`) of each interval's latency figures (`of`: the count measured and the
/// figures) in ms, leaving out intervals that measured nothing.
fn figure_ms(
    intervals: &[Interval],
    name: &str,
    of: fn(&Interval) -> (Option<u64>, &Figures),
    f: fn(&Figures) -> Option<f64>,
) -> Series {
    Series::new(
        name,
        over_time(intervals, |i| {
            let (count, figs) = of(i);
            if measured(count, figs) {
                ms(f(figs))
            } else {
                None
            }
        }),
    )
}

/// Corrected latency p50, p90, p99 and max per interval, in ms.
pub fn latency(intervals: &[Interval]) -> Chart {
    let mut c = time_chart("latency", "Latency (corrected)", "ms", intervals);
    let pick = |name: &str, f: fn(&Figures) -> Option<f64>| {
        figure_ms(intervals, name, |i| (i.responses, &i.latency_us), f)
    };
    c.series = vec![
        pick("p50", |f| f.p50),
        pick("p90", |f| f.p90),
        pick("p99", |f| f.p99),
        pick("max", |f| f.max),
    ];
    no_interval_note(&mut c, intervals);
    c
}

/// Errors per second, one series per kind that is non-zero in some interval. Without any error
/// the chart still has one all-zero series and says so.
pub fn errors(intervals: &[Interval]) -> Chart {
    let mut c = time_chart("errors", "Errors", "errors/s", intervals);
    let mut kinds: Vec<&str> = intervals
        .iter()
        .flat_map(|i| {
            i.errors
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, _)| k.as_str())
        })
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let per_second = |iv: &Interval, n: u64| match iv.length_s {
        Some(l) if l > 0.0 => Some(n as f64 / l),
        _ => None,
    };
    c.series = kinds
        .iter()
        .map(|k| {
            Series::new(
                *k,
                over_time(intervals, |i| {
                    per_second(i, i.errors.get(*k).copied().unwrap_or(0))
                }),
            )
        })
        .collect();
    if c.series.is_empty() {
        c.series = vec![Series::new(
            "errors",
            over_time(intervals, |i| per_second(i, 0)),
        )];
        c.note = Some("no errors".to_string());
    }
    no_interval_note(&mut c, intervals);
    c
}

/// TCP connect time p50 and p99 per interval, in ms; a series with no non-zero value is left
/// out (keep-alive runs connect once), the chart stays.
pub fn connect(intervals: &[Interval]) -> Chart {
    let mut c = time_chart("connect", "Connect time", "ms", intervals);
    let pick = |name: &str, f: fn(&Figures) -> Option<f64>| {
        figure_ms(intervals, name, |i| (i.connects, &i.connect_us), f)
    };
    c.series = [pick("p50", |f| f.p50), pick("p99", |f| f.p99)]
        .into_iter()
        .filter(|s| s.points.iter().any(|p| p.1 != 0.0))
        .collect();
    if c.series.is_empty() {
        c.note = Some("no connect times measured".to_string());
    }
    no_interval_note(&mut c, intervals);
    c
}

/// Whether any interval timed a TLS handshake: a plain run's `tls_us` is all zeros (or, from
/// an older headroom, missing).
pub fn has_tls(intervals: &[Interval]) -> bool {
    intervals.iter().any(|i| {
        [i.tls_us.p50, i.tls_us.p99, i.tls_us.max]
            .iter()
            .any(|v| v.is_some_and(|v| v > 0.0))
    })
}

/// TLS handshake time p50 and p99 per interval, in ms (from the TCP connection's establishment
/// to the handshake's end, beside [`connect`]). An interval without a handshake has all-zero
/// figures and is left out: a keep-alive run shakes hands once per connection.
pub fn tls(intervals: &[Interval]) -> Chart {
    let mut c = time_chart(TLS_NAME, "TLS handshake time", "ms", intervals);
    let pick = |name: &str, f: fn(&Figures) -> Option<f64>| {
        figure_ms(intervals, name, |i| (Some(0), &i.tls_us), f)
    };
    c.series = [pick("p50", |f| f.p50), pick("p99", |f| f.p99)]
        .into_iter()
        .filter(|s| s.points.iter().any(|p| p.1 != 0.0))
        .collect();
    if c.series.is_empty() {
        c.note = Some("no TLS handshakes measured".to_string());
    }
    no_interval_note(&mut c, intervals);
    c
}

/// Where a percentile sits on the "1/(1-q)" axis: 50% at 2, 90% at 10, 99% at 100, 99.9% at
/// 1000, and the maximum one decade further.
const PERCENTILE_X: [(f64, &str); 5] = [
    (2.0, "50%"),
    (10.0, "90%"),
    (100.0, "99%"),
    (1000.0, "99.9%"),
    (10000.0, "max"),
];

/// Ticks of the full distribution's axis: x = 1/(1-q).
const HLOG_X: [(f64, &str); 6] = [
    (2.0, "50%"),
    (10.0, "90%"),
    (100.0, "99%"),
    (1000.0, "99.9%"),
    (10000.0, "99.99%"),
    (100000.0, "99.999%"),
];

fn percentile_points(f: &Figures) -> Vec<(f64, f64)> {
    let values = [f.p50, f.p90, f.p99, f.p999, f.max];
    PERCENTILE_X
        .iter()
        .zip(values)
        .filter_map(|((x, _), v)| Some((*x, v? / 1000.0)))
        .collect()
}

/// The corrected (and uncorrected) latency distribution over the whole run, on the usual log
/// "1/(1-q)" axis: every percentile step of the merged histograms in latency.hlog (as
/// HdrHistogram's plotter draws it), else summary.json's five figures.
pub fn percentiles(data: &RunData) -> Chart {
    let mut c = Chart::new("percentiles", "Latency by percentile", "percentile", "ms");
    c.log_x = true;
    c.x_ticks = PERCENTILE_X
        .iter()
        .map(|(x, l)| (*x, l.to_string()))
        .collect();
    if let Some(d) = &data.distributions {
        let series: Vec<Series> = [("corrected", &d.corrected), ("uncorrected", &d.uncorrected)]
            .into_iter()
            .filter_map(|(name, dist)| {
                let dist = dist.as_ref()?;
                let points = dist
                    .points
                    .iter()
                    .map(|(q, us)| (1.0 / (1.0 - q), us / 1000.0))
                    .collect();
                Some(Series::new(name, points))
            })
            .collect();
        if !series.is_empty() {
            let x_max = series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
                .fold(1.0, f64::max);
            c.x_ticks = HLOG_X
                .iter()
                .filter(|(x, _)| *x <= x_max * 1.0001)
                .map(|(x, l)| (*x, l.to_string()))
                .collect();
            c.series = series;
            return c;
        }
    }
    match &data.summary {
        Some(s) => {
            let mut series = Vec::new();
            for (name, f) in [
                ("corrected", &s.latency_us),
                ("uncorrected", &s.latency_uncorrected_us),
            ] {
                let points = percentile_points(f);
                if f.count != Some(0) && !points.is_empty() {
                    series.push(Series::new(name, points));
                }
            }
            if series.is_empty() {
                c.note = Some("no responses: no latency".to_string());
            }
            c.series = series;
        }
        None => {
            c.series = vec![Series::new("corrected", Vec::new())];
            c.note = Some("no summary.json: percentiles not available".to_string());
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{parse_intervals, Summary};
    use std::path::Path;

    /// Issue 27: a 5 s run whose connections all opened in the first second.
    fn early_connects() -> RunData {
        let mut text = String::new();
        for i in 0..5 {
            let connect = if i == 0 {
                r#""connects":10,"connect_us":{"p50":300,"p99":900,"max":950}"#
            } else {
                r#""connects":0,"connect_us":{"p50":0,"p99":0,"max":0}"#
            };
            text.push_str(&format!(
                "{{\"index\":{i},\"t_s\":{i},\"length_s\":1,\"responses\":100,\"connections_open\":10,{connect}}}\n"
            ));
        }
        let (intervals, _) = parse_intervals(&text, Path::new("intervals.jsonl")).unwrap();
        RunData {
            summary: Some(Summary {
                duration_s: Some(5.02),
                ..Summary::default()
            }),
            intervals,
            ..RunData::default()
        }
    }

    #[test]
    fn every_time_chart_spans_the_run() {
        let charts = all(&early_connects());
        for c in &charts {
            if c.name == "percentiles" {
                assert_eq!(c.x_max, None, "not a time chart");
            } else {
                assert_eq!(c.x_max, Some(5.02), "{}", c.name);
            }
        }
        let connect = charts.iter().find(|c| c.name == "connect").unwrap();
        assert_eq!(connect.series[0].points, [(1.0, 0.3)]);
        let svg = connect.render();
        assert!(svg.contains("data-instant=\"p50\""), "{svg}");
        assert!(
            svg.contains(">6</text>"),
            "the axis reaches past 5.02 s: {svg}"
        );
    }

    #[test]
    fn a_run_without_summary_spans_its_intervals() {
        let mut data = early_connects();
        data.summary = None;
        assert_eq!(run_span_s(&data), Some(5.0));
        data.intervals.clear();
        assert_eq!(run_span_s(&data), None);
    }
}
