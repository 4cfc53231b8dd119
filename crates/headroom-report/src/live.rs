//! The live dashboard of a running load: the page, and the updates it is sent.
//!
//! `headroom run --dashboard ADDR` serves [`dashboard_page`] and a stream of server-sent events
//! (`/events`); each event's data is [`Live::update_json`]: the run's current figures and the
//! five time charts of the report ([`LIVE_CHARTS`]) drawn from the whole run so far. The page
//! is the report's look (same style, same charts, same `data-chart` / `data-series` /
//! `data-points` attributes) plus one small inline script, the only script headroom ever
//! serves: it opens `new EventSource('/events')`, puts each message's charts into their
//! `data-slot` and its figures into the headline block, and says when the run has finished
//! (an `end` event) or the connection is lost.
//!
//! This module holds no socket: the HTTP side is the binary's. The charts are drawn from at most
//! [`LIVE_MAX_POINTS`] points (neighbours merged as the run grows), so an update and the memory
//! behind it stay small however long the run is.

use std::fmt::Write;

use serde_json::{json, Value};

use crate::charts;
use crate::data::{interval_from_line, Interval};
use crate::html::{close_page, open_page, MISSING};
use crate::svg::escape;
use headroom_format::IntervalLine;

/// The charts of the dashboard, in page order: the report's time charts (the percentile plot
/// needs the whole run's histograms, so it waits for the report).
pub const LIVE_CHARTS: [&str; 5] = ["users", "throughput", "latency", "errors", "connect"];

/// The headline figures: (element id suffix and `figures` key, label). The element of `NAME`
/// has the id `fig-NAME`.
pub const FIGURES: [(&str, &str); 6] = [
    ("elapsed", "elapsed"),
    ("throughput", "throughput"),
    ("p99", "p99 latency"),
    ("errors", "errors"),
    ("connections", "connections"),
    ("users", "users"),
];

/// Styles of the dashboard's own elements, added to the report's.
const STYLE: &str = "\
.figs{display:grid;grid-template-columns:repeat(auto-fill,minmax(9.5em,1fr));gap:0.6em;margin:1em 0}
.fig{border:1px solid #ddd;border-radius:4px;padding:0.4em 0.8em}
.fig .k{color:#555;font-size:0.85em}
.fig .v{font-size:1.5em;font-variant-numeric:tabular-nums;white-space:nowrap}
#status{display:inline-block;padding:0.15em 0.6em;border-radius:4px;background:#eee}
#status.live{background:#d8f0d8}
#status.done{background:#dde6f5}
#status.lost{background:#f8d7d7}
.slot{min-height:2em}
.slot .wait{color:#777}
";

/// The script: everything the page does. Plain ES5, no external URL, nothing stored.
const SCRIPT: &str = r#"(function () {
  var status = document.getElementById('status');
  var done = false;
  function say(text, cls) { status.textContent = text; status.className = cls; }
  if (!window.EventSource) { say('connection lost (this browser has no EventSource)', 'lost'); return; }
  var es = new EventSource('/events');
  es.onopen = function () { if (!done) { say('live', 'live'); } };
  es.onmessage = function (e) {
    var m;
    try { m = JSON.parse(e.data); } catch (err) { return; }
    var f = m.figures || {};
    for (var k in f) {
      var el = document.getElementById('fig-' + k);
      if (el) { el.textContent = f[k]; }
    }
    var c = m.charts || {};
    for (var n in c) {
      var slot = document.querySelector('[data-slot="' + n + '"]');
      if (slot) { slot.innerHTML = c[n]; }
    }
    if (!done) { say('live', 'live'); }
  };
  es.addEventListener('end', function () {
    done = true;
    es.close();
    say('run finished', 'done');
  });
  es.onerror = function () {
    if (done) { return; }
    say(es.readyState === 2 ? 'connection lost' : 'connection lost (retrying…)', 'lost');
  };
})();
"#;

/// The dashboard page: the report's chrome, a status line (`#status`: "connecting…", "live",
/// "run finished", "connection lost"), the headline figures (`#fig-elapsed`, `#fig-throughput`,
/// `#fig-p99`, `#fig-errors`, `#fig-connections`, `#fig-users`), one `<div data-slot="NAME">`
/// per chart of [`LIVE_CHARTS`], and the script that fills them from `/events`. `title` is
/// plain text (the target, say); it is escaped here.
pub fn dashboard_page(title: &str) -> String {
    let page_title = if title.is_empty() {
        "headroom live".to_string()
    } else {
        format!("headroom live – {title}")
    };
    let mut out = open_page(
        &page_title,
        "headroom live",
        &format!(
            "{} &middot; <span id=\"status\">connecting…</span>",
            if title.is_empty() {
                MISSING.to_string()
            } else {
                escape(title)
            }
        ),
    );
    // The dashboard's styles go with the report's; the empty icon spares the browser a
    // /favicon.ico request (and its 404).
    out = out.replacen(
        "</style>\n</head>",
        &format!("{STYLE}</style>\n<link rel=\"icon\" href=\"data:,\">\n</head>"),
        1,
    );
    out.push_str("<div class=\"figs\">\n");
    for (id, label) in FIGURES {
        let _ = writeln!(
            out,
            "<div class=\"fig\"><div class=\"k\">{label}</div>\
             <div class=\"v\" id=\"fig-{id}\">{MISSING}</div></div>"
        );
    }
    out.push_str("</div>\n<h2>Charts</h2>\n");
    for name in LIVE_CHARTS {
        let _ = writeln!(
            out,
            "<figure class=\"slot\" data-slot=\"{name}\"><p class=\"wait\">waiting for the \
             first interval…</p></figure>"
        );
    }
    let _ = write!(out, "<script>\n{SCRIPT}</script>\n");
    close_page(&mut out, "live dashboard");
    out
}

/// Most points [`Live`] keeps for its charts. Past that, every two neighbours are merged into
/// one and each point covers twice as many intervals from then on, so the charts keep one
/// resolution over the whole run and the dashboard's memory stays bounded however long the run
/// (with 1 s intervals, full resolution for the first 2 minutes, 2 s a point up to 4, and so
/// on: a 10-minute run in 75 points of 8 s, an hour in 71 of 512 s — 120 points draw a line as
/// smooth on a screen-wide chart, and their memory stops growing early in a run). The
/// headline figures and `/metrics` use every interval as it comes; the run directory keeps
/// every interval.
pub const LIVE_MAX_POINTS: usize = 120;

/// The intervals of a running load, as they come (merged into at most [`LIVE_MAX_POINTS`]
/// points), and the dashboard update they make.
#[derive(Debug, Clone)]
pub struct Live {
    /// The charts' points: each covers `width` intervals, the last one `tail` of them so far.
    points: Vec<Interval>,
    width: usize,
    tail: usize,
    /// The last interval as it came.
    last: Option<Interval>,
    /// Lines pushed so far.
    pushed: usize,
}

impl Default for Live {
    fn default() -> Live {
        Live {
            points: Vec::new(),
            width: 1,
            tail: 0,
            last: None,
            pushed: 0,
        }
    }
}

impl Live {
    pub fn new() -> Live {
        Live::default()
    }

    /// Adds one interval line (as written to intervals.jsonl).
    pub fn push(&mut self, line: &IntervalLine) {
        self.pushed += 1;
        let iv = interval_from_line(line, self.pushed);
        match self.points.last_mut() {
            Some(p) if self.tail < self.width => {
                *p = merge(p, &iv);
                self.tail += 1;
            }
            _ => {
                if self.points.len() >= LIVE_MAX_POINTS {
                    // Every point is whole here: merge neighbours, double the width.
                    self.points = self
                        .points
                        .chunks(2)
                        .map(|c| match c {
                            [a, b] => merge(a, b),
                            [a] => a.clone(),
                            _ => unreachable!("chunks(2)"),
                        })
                        .collect();
                    self.width *= 2;
                }
                self.points.push(iv.clone());
                self.tail = 1;
            }
        }
        self.last = Some(iv);
    }

    /// The charts' points so far: one per interval, or each over several intervals past
    /// [`LIVE_MAX_POINTS`].
    pub fn intervals(&self) -> &[Interval] {
        &self.points
    }

    /// The last interval pushed, as it came.
    pub fn last(&self) -> Option<&Interval> {
        self.last.as_ref()
    }

    /// The time charts of [`LIVE_CHARTS`] from every interval so far, in that order.
    pub fn charts(&self) -> Vec<crate::svg::Chart> {
        let ivs = &self.points;
        vec![
            charts::users(ivs),
            charts::throughput(ivs),
            charts::latency(ivs),
            charts::errors(ivs),
            charts::connect(ivs),
        ]
    }

    /// One update of the dashboard as compact JSON on one line (no newline, so it is one SSE
    /// `data:` line): `{"t_s", "intervals", "figures": {NAME: text}, "values": {NAME: number or
    /// null}, "charts": {NAME: "<svg…>"}}`. `t_s` is the last interval's end (seconds since the
    /// start; null before the first interval); the figures are the last interval's.
    pub fn update_json(&self) -> String {
        let last = self.last.as_ref();
        let t_s = last.and_then(Interval::t_end);
        let rps = last.and_then(|i| {
            i.rps.or(match (i.responses, i.length_s) {
                (Some(r), Some(l)) if l > 0.0 => Some(r as f64 / l),
                _ => None,
            })
        });
        let p99_ms = last.and_then(|i| {
            if i.responses == Some(0) {
                None
            } else {
                i.latency_us.p99.map(|us| us / 1000.0)
            }
        });
        let errors_per_s = last.and_then(|i| match i.length_s {
            Some(l) if l > 0.0 => Some(i.errors.values().sum::<u64>() as f64 / l),
            _ => None,
        });
        let connections = last.and_then(|i| i.connections_open);
        let users = last.and_then(|i| i.users_active);
        let figures = json!({
            "elapsed": t_s.map_or(MISSING.to_string(), elapsed_text),
            "throughput": rps.map_or(MISSING.to_string(), |r| format!("{} /s", per_second(r))),
            "p99": p99_ms.map_or(MISSING.to_string(), |ms| format!("{ms:.3} ms")),
            "errors": errors_per_s.map_or(MISSING.to_string(), |e| format!("{} /s", per_second(e))),
            "connections": connections.map_or(MISSING.to_string(), crate::html::thousands),
            "users": users.map_or(MISSING.to_string(), crate::html::thousands),
        });
        let values = json!({
            "elapsed_s": t_s,
            "throughput_rps": rps,
            "p99_ms": p99_ms,
            "errors_per_s": errors_per_s,
            "connections": connections,
            "users": users,
        });
        let charts: serde_json::Map<String, Value> = LIVE_CHARTS
            .iter()
            .zip(self.charts())
            .map(|(name, chart)| (name.to_string(), Value::String(chart.render())))
            .collect();
        json!({
            "t_s": t_s,
            "intervals": self.pushed,
            "figures": figures,
            "values": values,
            "charts": charts,
        })
        .to_string()
    }
}

/// Two consecutive intervals as one over both: counts and lengths add up, throughput is the
/// sum of responses over the sum of lengths, the latency mean is weighted by responses and each
/// percentile and maximum is the larger of the two (a spike stays visible), the gauges
/// (connections open, users active, the server's sample) are the later one's.
fn merge(a: &Interval, b: &Interval) -> Interval {
    fn add(x: Option<u64>, y: Option<u64>) -> Option<u64> {
        match (x, y) {
            (Some(x), Some(y)) => Some(x + y),
            (x, y) => x.or(y),
        }
    }
    fn addf(x: Option<f64>, y: Option<f64>) -> Option<f64> {
        match (x, y) {
            (Some(x), Some(y)) => Some(x + y),
            (x, y) => x.or(y),
        }
    }
    fn maxf(x: Option<f64>, y: Option<f64>) -> Option<f64> {
        match (x, y) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        }
    }
    fn maps(
        x: &std::collections::BTreeMap<String, u64>,
        y: &std::collections::BTreeMap<String, u64>,
    ) -> std::collections::BTreeMap<String, u64> {
        let mut m = x.clone();
        for (k, v) in y {
            *m.entry(k.clone()).or_insert(0) += v;
        }
        m
    }
    let weights = (
        a.responses.unwrap_or(0) as f64,
        b.responses.unwrap_or(0) as f64,
    );
    let figures = |x: &crate::data::Figures, y: &crate::data::Figures| crate::data::Figures {
        count: add(x.count, y.count),
        mean: match (x.mean, y.mean) {
            (Some(m), Some(n)) if weights.0 + weights.1 > 0.0 => {
                Some((m * weights.0 + n * weights.1) / (weights.0 + weights.1))
            }
            (m, n) => maxf(m, n),
        },
        stdev: None,
        min: match (x.min, y.min) {
            (Some(m), Some(n)) => Some(m.min(n)),
            (m, n) => m.or(n),
        },
        p50: maxf(x.p50, y.p50),
        p90: maxf(x.p90, y.p90),
        p99: maxf(x.p99, y.p99),
        p999: maxf(x.p999, y.p999),
        max: maxf(x.max, y.max),
    };
    let length_s = addf(a.length_s, b.length_s);
    let responses = add(a.responses, b.responses);
    Interval {
        line: a.line,
        index: a.index,
        t_s: a.t_s,
        length_s,
        requests: add(a.requests, b.requests),
        responses,
        rps: match (responses, length_s) {
            (Some(r), Some(l)) if l > 0.0 => Some(r as f64 / l),
            _ => maxf(a.rps, b.rps),
        },
        errors: maps(&a.errors, &b.errors),
        status: maps(&a.status, &b.status),
        status_codes: match (&a.status_codes, &b.status_codes) {
            (Some(x), Some(y)) => Some(maps(x, y)),
            (x, y) => x.clone().or_else(|| y.clone()),
        },
        latency_us: figures(&a.latency_us, &b.latency_us),
        latency_uncorrected_us: figures(&a.latency_uncorrected_us, &b.latency_uncorrected_us),
        connect_us: figures(&a.connect_us, &b.connect_us),
        tls_us: figures(&a.tls_us, &b.tls_us),
        connects: add(a.connects, b.connects),
        disconnects: add(a.disconnects, b.disconnects),
        connections_open: b.connections_open.or(a.connections_open),
        connections_peak: a.connections_peak.max(b.connections_peak),
        users_active: b.users_active.or(a.users_active),
        users_started: add(a.users_started, b.users_started),
        users_finished: add(a.users_finished, b.users_finished),
        bytes_sent: add(a.bytes_sent, b.bytes_sent),
        bytes_received: add(a.bytes_received, b.bytes_received),
        server: b.server.clone().or_else(|| a.server.clone()),
    }
}

/// Seconds since the start as read on a clock: `4 s`, `12.5 s`, `2 min 05 s`, `1 h 02 min 05 s`.
pub fn elapsed_text(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return MISSING.to_string();
    }
    if s < 60.0 {
        let t = format!("{s:.1}");
        return format!("{} s", t.strip_suffix(".0").unwrap_or(&t));
    }
    let whole = s.round() as u64;
    let (h, m, sec) = (whole / 3600, whole / 60 % 60, whole % 60);
    if h > 0 {
        format!("{h} h {m:02} min {sec:02} s")
    } else {
        format!("{m} min {sec:02} s")
    }
}

/// A rate: whole with thousands separators from 100 up (`12,345`), one decimal below
/// (`12.5`, `0`).
fn per_second(v: f64) -> String {
    if v >= 100.0 {
        crate::html::thousands(v.round() as u64)
    } else {
        let t = format!("{v:.1}");
        t.strip_suffix(".0").unwrap_or(&t).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: u64, responses: u64, reset: u64) -> IntervalLine {
        typed(&line_json(i, responses, reset))
    }

    /// A line as JSON, as intervals.jsonl holds it, read back as the format's type.
    fn typed(v: &Value) -> IntervalLine {
        serde_json::from_value(v.clone()).expect("an interval line")
    }

    fn line_json(i: u64, responses: u64, reset: u64) -> Value {
        json!({
            "index": i, "t_s": i as f64, "length_s": 1.0,
            "requests": responses, "responses": responses, "rps": responses as f64,
            "errors": {"reset": reset, "refused": 0},
            "status": {"2xx": responses},
            "latency_us": {"mean": 900.0, "p50": 800, "p90": 1500, "p99": 2345 + i, "max": 9000},
            "latency_uncorrected_us": {"mean": 900.0, "p50": 800, "p90": 1500, "p99": 2000, "max": 9000},
            "connect_us": {"mean": 0, "p50": 0, "p90": 0, "p99": 0, "max": 0},
            "connects": if i == 0 { 4 } else { 0 },
            "connections_open": 4, "connections_peak": 4,
            "users_active": 4 + i, "users_started": if i == 0 { 4 } else { 0 }, "users_finished": 0,
            "bytes_sent": 100 * responses, "bytes_received": 200 * responses,
        })
    }

    /// The value of `attr="..."` in the tag of `svg` that holds `marker`.
    fn attr_after<'a>(svg: &'a str, marker: &str, attr: &str) -> Option<&'a str> {
        let at = svg.find(marker)?;
        let tag_end = svg[at..].find('>')? + at;
        let tag = &svg[at..tag_end];
        let key = format!("{attr}=\"");
        let v = tag.find(&key)? + key.len();
        let end = tag[v..].find('"')? + v;
        Some(&tag[v..end])
    }

    #[test]
    fn update_after_three_intervals_has_every_chart_and_the_last_figures() {
        let mut live = Live::new();
        live.push(&line(0, 1000, 0));
        live.push(&line(1, 1200, 3));
        live.push(&line(2, 12345, 2));
        let text = live.update_json();
        assert!(!text.contains('\n'), "one line, so one SSE data: line");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["t_s"], json!(3.0));
        assert_eq!(v["intervals"], json!(3));
        let charts = v["charts"].as_object().unwrap();
        assert_eq!(charts.len(), 5);
        for name in LIVE_CHARTS {
            let svg = charts[name].as_str().unwrap();
            assert!(
                svg.starts_with(&format!("<svg class=\"chart\" data-chart=\"{name}\"")),
                "{name}: {}",
                &svg[..80.min(svg.len())]
            );
        }
        let tp = charts["throughput"].as_str().unwrap();
        assert_eq!(
            attr_after(tp, "data-series=\"rps\"", "data-points"),
            Some("3")
        );
        let users = charts["users"].as_str().unwrap();
        assert_eq!(
            attr_after(users, "data-series=\"users_active\"", "data-points"),
            Some("3")
        );
        // Figures are the last interval's.
        let f = &v["figures"];
        assert_eq!(f["elapsed"], "3 s");
        assert_eq!(f["throughput"], "12,345 /s");
        assert_eq!(f["p99"], "2.347 ms");
        assert_eq!(f["errors"], "2 /s");
        assert_eq!(f["connections"], "4");
        assert_eq!(f["users"], "6");
        let n = &v["values"];
        assert_eq!(n["elapsed_s"], json!(3.0));
        assert_eq!(n["throughput_rps"], json!(12345.0));
        assert_eq!(n["p99_ms"], json!(2.347));
        assert_eq!(n["errors_per_s"], json!(2.0));
        assert_eq!(n["users"], json!(6));
        // The error chart has the kind that occurred, not the one that never did.
        let errors = charts["errors"].as_str().unwrap();
        assert!(errors.contains("data-series=\"reset\""), "{errors}");
        assert!(!errors.contains("data-series=\"refused\""));
    }

    #[test]
    fn empty_update_has_the_charts_and_missing_figures() {
        let v: Value = serde_json::from_str(&Live::new().update_json()).unwrap();
        assert_eq!(v["t_s"], Value::Null);
        assert_eq!(v["charts"].as_object().unwrap().len(), 5);
        assert_eq!(v["figures"]["p99"], MISSING);
        assert_eq!(v["values"]["throughput_rps"], Value::Null);
    }

    #[test]
    fn an_interval_without_responses_has_no_p99() {
        let mut live = Live::new();
        let mut l = line_json(0, 0, 0);
        l["latency_us"] = json!({"mean": 0, "p50": 0, "p90": 0, "p99": 0, "max": 0});
        live.push(&typed(&l));
        let v: Value = serde_json::from_str(&live.update_json()).unwrap();
        assert_eq!(v["figures"]["p99"], MISSING);
        assert_eq!(v["figures"]["throughput"], "0 /s");
    }

    #[test]
    fn text_from_the_run_is_escaped() {
        // The lines are typed (error kinds are the format's field names), so the text a run
        // puts on the page is the target in the title.
        let mut live = Live::new();
        live.push(&line(0, 10, 1));
        let text = live.update_json();
        assert!(!text.contains('\n'));
        let page = dashboard_page("http://h/<b>&\"");
        assert!(page.contains("headroom live – http://h/&lt;b&gt;&amp;&quot;"));
        assert!(!page.contains("<b>&"));
    }

    #[test]
    fn page_has_slots_figures_status_and_one_inline_script() {
        let page = dashboard_page("http://127.0.0.1:8080/");
        for name in LIVE_CHARTS {
            assert_eq!(
                page.matches(&format!("data-slot=\"{name}\"")).count(),
                1,
                "{name}"
            );
        }
        for (id, _) in FIGURES {
            assert!(page.contains(&format!("id=\"fig-{id}\"")), "{id}");
        }
        assert!(page.contains("<span id=\"status\">connecting…</span>"));
        assert!(page.contains("<link rel=\"icon\" href=\"data:,\">"));
        assert!(page.contains("new EventSource('/events')"));
        assert_eq!(page.matches("<script").count(), 1);
        assert_eq!(page.matches("<style>").count(), 1, "one style element");
        assert!(page.contains(".figs{"), "the dashboard's styles are in it");
        for bad in ["src=", "http://", "https://"] {
            let outside_title = page.replace("http://127.0.0.1:8080/", "");
            assert!(!outside_title.contains(bad), "{bad}");
        }
    }

    #[test]
    fn an_hours_update_stays_small() {
        let mut live = Live::new();
        for i in 0..3600 {
            live.push(&line(i, 1000 + (i * 7919) % 500, i % 3));
        }
        let t = std::time::Instant::now();
        let text = live.update_json();
        let took = t.elapsed();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["intervals"], json!(3600));
        // Four latency series of at most 2,000 points are the bulk.
        assert!(text.len() < 400_000, "{} bytes", text.len());
        eprintln!(
            "one hour: update of {} bytes in {took:?}; an interval is {} bytes plus its maps",
            text.len(),
            std::mem::size_of::<Interval>()
        );
    }

    /// Ten hours of 1 s intervals: at most LIVE_MAX_POINTS points kept, every response still
    /// counted, time covered from 0 to the end without gap, every point but the last over the
    /// same number of intervals, the figures from the last interval as it came.
    #[test]
    fn a_long_run_keeps_a_bounded_number_of_points_and_every_count() {
        let mut live = Live::new();
        let n = 36_000u64;
        let mut responses = 0;
        let mut resets = 0;
        for i in 0..n {
            let r = 1000 + (i * 7919) % 500;
            responses += r;
            resets += i % 3;
            live.push(&line(i, r, i % 3));
            assert!(live.intervals().len() <= LIVE_MAX_POINTS, "at {i}");
        }
        let ivs = live.intervals();
        assert!(ivs.len() > LIVE_MAX_POINTS / 2, "{}", ivs.len());
        assert_eq!(
            ivs.iter().map(|i| i.responses.unwrap()).sum::<u64>(),
            responses
        );
        assert_eq!(ivs.iter().map(|i| i.errors["reset"]).sum::<u64>(), resets);
        assert_eq!(ivs[0].t_s, Some(0.0));
        let width = ivs[0].length_s.unwrap();
        let mut want = 1u64;
        while n.div_ceil(want) > LIVE_MAX_POINTS as u64 {
            want *= 2;
        }
        assert_eq!(width, want as f64, "36,000 s in at most 120 points");
        for (k, iv) in ivs[..ivs.len() - 1].iter().enumerate() {
            assert_eq!(iv.length_s, Some(width), "point {k}");
            // The larger p99 of those merged: the last interval's of the point.
            assert_eq!(
                iv.latency_us.p99,
                Some(2345.0 + width * (k + 1) as f64 - 1.0)
            );
        }
        for w in ivs.windows(2) {
            assert!((w[0].t_end().unwrap() - w[1].t_s.unwrap()).abs() < 1e-6);
        }
        assert_eq!(ivs.last().unwrap().t_end(), Some(n as f64));
        let last = live.last().unwrap();
        assert_eq!(last.t_s, Some((n - 1) as f64));
        let v: Value = serde_json::from_str(&live.update_json()).unwrap();
        assert_eq!(v["intervals"], json!(n));
        assert_eq!(
            v["values"]["p99_ms"],
            json!((2345.0 + (n - 1) as f64) / 1000.0)
        );
    }

    #[test]
    fn clock_and_rates_read_well() {
        assert_eq!(elapsed_text(4.0), "4 s");
        assert_eq!(elapsed_text(12.5), "12.5 s");
        assert_eq!(elapsed_text(125.0), "2 min 05 s");
        assert_eq!(elapsed_text(3725.0), "1 h 02 min 05 s");
        assert_eq!(per_second(0.0), "0");
        assert_eq!(per_second(12.34), "12.3");
        assert_eq!(per_second(1234567.4), "1,234,567");
        assert_eq!(crate::html::thousands(999), "999");
        assert_eq!(crate::html::thousands(1000), "1,000");
    }
}
