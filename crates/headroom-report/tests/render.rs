//! Reports from synthetic run directories written into a temporary directory.

use std::path::Path;
use std::time::Instant;

use headroom_report::{load_run, render, render_run, ReportError};
use serde_json::{json, Value};

const KINDS: [&str; 10] = [
    "connect_timeout",
    "refused",
    "reset",
    "closed",
    "timeout",
    "protocol",
    "http_4xx",
    "http_5xx",
    "local_resource",
    "other",
];

const COMMAND: &str = "headroom run http://127.0.0.1:39555/ -H 'X: <script>alert(1)</script>' & co";
const TARGET: &str = "http://127.0.0.1:39555/";

fn figures(base: u64) -> Value {
    json!({"count": 35990, "mean": base as f64 * 1.1, "stdev": 12.5, "min": base / 2,
           "p50": base, "p90": base * 2, "p99": 12345, "p999": 23456, "max": 45678})
}

fn summary() -> Value {
    let errors: serde_json::Map<String, Value> = KINDS
        .iter()
        .map(|k| (k.to_string(), json!(if *k == "reset" { 7 } else { 0 })))
        .collect();
    // Built apart: one json! this size exceeds the macro recursion limit.
    let scenario = json!({
        "by_request": {
            "login": {"count": 100, "errors": 1, "latency_us": figures(900)},
            "search <b>": {"count": 400, "errors": 0, "latency_us": figures(700)},
        },
        "by_transaction": {
            "checkout": {"count": 50, "errors": 2, "latency_us": figures(5000)},
        },
        "matches": {"logged_in": 99},
        "sessions": {"completed": 48, "aborted": 2, "users_dropped": 0,
                     "duration": figures(250_000)},
    });
    let thresholds = json!([
        {"threshold": "p99(login)", "condition": "< 10ms", "value": 12345.0, "unit": "us",
         "ok": false},
        {"threshold": "error_rate", "condition": "< 1%", "value": 0.000194,
         "unit": "fraction", "ok": true},
    ]);
    json!({
        "format_version": 1,
        "headroom_version": "0.1.0",
        "command": COMMAND,
        "target": TARGET,
        "model": "closed",
        "load": {"name": "closed", "users": 10, "per_user": null, "think": null},
        "threads": 2,
        "keepalive": true,
        "pipeline": 1,
        "started_at": "2026-11-22T13:00:00.000Z",
        "duration_s": 30.001,
        "interrupted": false,
        "requests": 36000,
        "responses": 35990,
        "in_flight": 3,
        "errors": errors,
        "errors_total": 7,
        "error_rate": 0.000194,
        "status": {"other": 0, "1xx": 0, "2xx": 35990, "3xx": 0, "4xx": 0, "5xx": 0},
        "users_started": 10,
        "users_finished": 10,
        "throughput_rps": 1199.627,
        "latency_us": figures(812),
        "latency_uncorrected_us": figures(790),
        "connect_us": {"count": 10, "mean": 80.0, "stdev": 3.0, "min": 70, "p50": 81,
                       "p90": 90, "p99": 95, "p999": 95, "max": 95},
        "connects": 10,
        "connections_peak": 10,
        "bytes_sent": 3_600_000,
        "bytes_received": 7_654_321,
        "cpu_user_s": 1.25,
        "cpu_sys_s": 4.5,
        "max_rss_kb": 51200,
        "a_field_from_the_future": {"x": 1},
        "thresholds": thresholds,
        "thresholds_ok": false,
        "scenario": scenario,
    })
}

/// One interval line; `errors` lists the non-zero kinds.
fn interval(i: u64, errors: &[(&str, u64)]) -> Value {
    let errs: serde_json::Map<String, Value> = KINDS
        .iter()
        .map(|k| {
            let n = errors.iter().find(|e| e.0 == *k).map_or(0, |e| e.1);
            (k.to_string(), json!(n))
        })
        .collect();
    let lat = |base: u64| {
        json!({"mean": base as f64 + 0.5, "p50": base, "p90": base * 2, "p99": base * 4,
               "max": base * 9 + i % 17 * 100})
    };
    let connects = if i == 0 { 10 } else { 0 };
    json!({
        "index": i,
        "t_s": i as f64,
        "length_s": 1.0,
        "requests": 1200,
        "responses": 1199,
        "rps": 1199.0 + (i % 7) as f64,
        "errors": errs,
        "status": {"other": 0, "1xx": 0, "2xx": 1199, "3xx": 0, "4xx": 0, "5xx": 0},
        "latency_us": lat(800 + i % 50),
        "latency_uncorrected_us": lat(780),
        // An interval without a connect has all-zero connect figures, as headroom writes them.
        "connect_us": if i == 0 { lat(80) } else {
            json!({"mean": 0.0, "p50": 0, "p90": 0, "p99": 0, "max": 0})
        },
        "connects": connects,
        "disconnects": 0,
        "connections_open": 10,
        "connections_peak": 10,
        "users_active": 10 - (i % 3),
        "users_started": connects,
        "users_finished": 0,
        "bytes_sent": 120_000,
        "bytes_received": 255_000,
    })
}

fn write_run(dir: &Path, summary: Option<&Value>, lines: &[Value]) {
    if let Some(s) = summary {
        std::fs::write(
            dir.join("summary.json"),
            serde_json::to_string_pretty(s).unwrap(),
        )
        .unwrap();
    }
    let mut text = String::new();
    for l in lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    std::fs::write(dir.join("intervals.jsonl"), text).unwrap();
}

fn thirty_lines() -> Vec<Value> {
    (0..30)
        .map(|i| {
            if i == 12 {
                interval(i, &[("reset", 7)])
            } else {
                interval(i, &[])
            }
        })
        .collect()
}

/// (chart name, the `data-points` of each series) for every chart in the page.
fn charts(html: &str) -> Vec<(String, Vec<usize>)> {
    let marker = "<svg class=\"chart\" data-chart=\"";
    html.match_indices(marker)
        .map(|(at, _)| {
            let rest = &html[at + marker.len()..];
            let name = rest[..rest.find('"').unwrap()].to_string();
            let body = &rest[..rest.find("</svg>").expect("svg closed")];
            let points = body
                .match_indices("data-points=\"")
                .map(|(p, m)| {
                    let v = &body[p + m.len()..];
                    v[..v.find('"').unwrap()].parse().unwrap()
                })
                .collect();
            (name, points)
        })
        .collect()
}

#[test]
fn every_chart_is_present_once_and_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), Some(&summary()), &thirty_lines());
    let html = render_run(dir.path()).unwrap();
    let found = charts(&html);
    let names: Vec<&str> = found.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, headroom_report::charts::NAMES);
    for (name, points) in &found {
        assert!(
            points.iter().any(|n| *n > 0),
            "chart {name} has no non-empty series: {points:?}"
        );
    }
    // 30 intervals drawn in each time series; the connect chart has the one interval that
    // connected; the percentile chart five points per series.
    let by_name = |n: &str| found.iter().find(|c| c.0 == n).unwrap().1.clone();
    assert_eq!(by_name("users"), [30, 30]);
    assert_eq!(by_name("throughput"), [30]);
    assert_eq!(by_name("latency"), [30, 30, 30, 30]);
    assert_eq!(
        by_name("errors"),
        [30],
        "one series: the only kind that occurred"
    );
    assert!(html.contains("data-series=\"reset\""));
    assert_eq!(by_name("connect"), [1, 1]);
    assert_eq!(by_name("percentiles"), [5, 5]);
}

#[test]
fn summary_figures_appear_in_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), Some(&summary()), &thirty_lines());
    let html = render_run(dir.path()).unwrap();
    for expected in [
        "36000",                                // requests
        "35990",                                // responses
        "1199.627 responses/s",                 // throughput
        "0.000194 (0.0194%)",                   // error rate
        "<td>reset</td><td class=\"n\">7</td>", // errors by kind
        "12.345",                               // p99 in ms
        "23.456",                               // p99.9 in ms
        "45.678",                               // max in ms
        "0.812",                                // p50 in ms
        "51200 KiB",                            // RSS
        "1.25 s user, 4.5 s system",            // CPU
        "30.001 s",                             // duration
        "10 closed users, back to back",        // load
        "2026-11-22T13:00:00.000Z",             // started_at
        "checkout",                             // by transaction
        "<td>login</td>",                       // by request
        "logged_in",                            // matches
        "Thresholds (some failed)",
        "<td>p99(login)</td><td>&lt; 10ms</td><td class=\"n\">12.345 ms</td><td><strong>FAILED",
    ] {
        assert!(html.contains(expected), "missing {expected:?}");
    }
    assert!(
        !html.contains("per_user=null"),
        "null load parameters are left out"
    );
}

/// The page answers first: the verdict, the six tiles, the four key charts, then the rest.
/// No raw JSON anywhere: the load in words, the sessions as columns.
#[test]
fn the_page_leads_with_the_verdict_tiles_and_key_charts() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), Some(&summary()), &thirty_lines());
    let html = render_run(dir.path()).unwrap();
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("missing {needle:?}"))
    };
    // A broken threshold makes the verdict bad and names it with what was measured.
    let verdict = &html[at("<section class=\"verdict")..at("</section>")];
    assert!(verdict.contains("data-verdict=\"bad\""), "{verdict}");
    assert!(verdict.contains("1 of 2 threshold(s) broken"), "{verdict}");
    assert!(
        verdict.contains("<strong>p99(login) &lt; 10ms</strong>: measured 12.345 ms"),
        "{verdict}"
    );
    assert!(
        verdict.contains("7 error(s), 0.0194%: reset 7"),
        "{verdict}"
    );
    let tiles = [
        ("throughput", "1,200"),
        ("p50", "0.812"),
        ("p99", "12.3"),
        ("error-rate", "0.0194%"),
        ("connections", "10"),
        // 5.75 s of CPU over 30.001 s.
        ("cpu", "19.2"),
    ];
    let mut last = at("</section>");
    for (tile, value) in tiles {
        let start = at(&format!("data-tile=\"{tile}\""));
        assert!(start > last, "tile {tile} out of order");
        let body = &html[start..start + html[start..].find("</div>\n").unwrap()];
        assert!(
            body.contains(&format!("<div class=\"v\">{value}")),
            "{body}"
        );
        last = start;
    }
    for chart in ["throughput", "latency", "errors", "users"] {
        let start = at(&format!("data-chart=\"{chart}\""));
        assert!(start > last, "chart {chart} out of order");
        last = start;
    }
    assert!(last < at("<h2>More charts</h2>"));
    assert!(at("<h2>More charts</h2>") < at("<h2>Run settings</h2>"));
    assert!(at("<h2>Run settings</h2>") < at("<h2>All figures</h2>"));
    // Sessions: a row of columns, lengths in ms.
    let sessions = &html[at("<table class=\"sessions\">")..];
    let sessions = &sessions[..sessions.find("</table>").unwrap()];
    assert!(
        sessions.contains("<th class=\"n\">users dropped</th>"),
        "{sessions}"
    );
    assert!(sessions.contains("<td class=\"n\">48</td>"), "{sessions}");
    assert!(
        sessions.contains("<td class=\"n\">250.000</td>"),
        "{sessions}"
    );
    // No JSON object or array printed as text.
    for raw in ["{&quot;", "{\"", "[{", "&quot;:"] {
        assert!(!html.contains(raw), "raw JSON {raw:?} in the page");
    }
}

/// Why the server stopped scaling leads the page with the verdict box; a generator that was
/// the limit turns a clean run's box to a warning.
#[test]
fn the_verdict_box_says_why_and_warns_of_a_generator_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = summary();
    s["thresholds"] = Value::Null;
    s["thresholds_ok"] = Value::Null;
    s["errors_total"] = 0.into();
    s["verdict"] = serde_json::json!({
        "name": "pool_exhausted",
        "says": "the server's workers were all taken: 46 connection(s) waited <here>",
        "candidates": [], "evidence": {"accept_queue_max": 46.0}
    });
    write_run(dir.path(), Some(&s), &thirty_lines());
    let html = render_run(dir.path()).unwrap();
    let box_ = |html: &str| {
        let v = &html[html.find("<section class=\"verdict").unwrap()..];
        v[..v.find("</section>").unwrap()].to_string()
    };
    let v = box_(&html);
    assert!(v.contains("data-verdict=\"good\""), "{v}");
    assert!(
        v.contains("<span data-why=\"pool_exhausted\"><strong>Why:</strong> the server&#39;s workers were all taken: 46 connection(s) waited &lt;here&gt;</span>"),
        "{v}"
    );
    s["generator"] = serde_json::json!({"limits": ["its workers ran at least 90% of the time"]});
    write_run(dir.path(), Some(&s), &thirty_lines());
    let v = box_(&render_run(dir.path()).unwrap());
    assert!(v.contains("data-verdict=\"warn\""), "{v}");
    assert!(
        v.contains("The load generator was the limit: its workers ran at least 90% of the time."),
        "{v}"
    );
}

#[test]
fn strings_from_the_files_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), Some(&summary()), &thirty_lines());
    let html = render_run(dir.path()).unwrap();
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&amp; co"));
    assert!(!html.contains("<script"), "no script element at all");
    assert!(html.contains("search &lt;b&gt;"));
    assert!(!html.contains("search <b>"));
}

#[test]
fn no_external_urls() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), Some(&summary()), &thirty_lines());
    let html = render_run(dir.path()).unwrap();
    let stripped = html
        .replace("xmlns=\"http://www.w3.org/2000/svg\"", "")
        .replace(&headroom_report::escape(TARGET), "");
    assert!(!stripped.contains("http://"), "an http:// URL crept in");
    assert!(!stripped.contains("https://"), "an https:// URL crept in");
    assert!(
        !stripped.contains("src="),
        "nothing is loaded from elsewhere"
    );
}

#[test]
fn render_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), Some(&summary()), &thirty_lines());
    let data = load_run(dir.path()).unwrap();
    assert_eq!(render(&data), render(&data));
}

#[test]
fn no_errors_still_draws_the_errors_chart() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<Value> = (0..5).map(|i| interval(i, &[])).collect();
    write_run(dir.path(), Some(&summary()), &lines);
    let html = render_run(dir.path()).unwrap();
    let errors = charts(&html).into_iter().find(|c| c.0 == "errors").unwrap();
    assert_eq!(errors.1, [5], "one all-zero series");
    assert!(html.contains(">no errors</text>"));
}

#[test]
fn one_hour_run_is_small_and_fast() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<Value> = (0..3600)
        .map(|i| {
            interval(
                i,
                &[
                    ("reset", i % 5),
                    ("timeout", u64::from(i % 600 == 0)),
                    ("http_5xx", i % 3),
                ],
            )
        })
        .collect();
    write_run(dir.path(), Some(&summary()), &lines);
    // And the hour's latency.hlog: 3,600 intervals of corrected, uncorrected and connect
    // histograms of ~1,000 samples each, as `headroom run --out` writes them.
    {
        let file = std::fs::File::create(dir.path().join("latency.hlog")).unwrap();
        let mut w = headroom_metrics::hlog::HlogWriter::new(
            std::io::BufWriter::new(file),
            std::time::SystemTime::now(),
            "one hour",
        )
        .unwrap();
        let mut h = headroom_metrics::new_histogram();
        for i in 0..3600u64 {
            h.reset();
            for k in 0..1000u64 {
                h.record(200 + (k * k * (i % 7 + 1)) % 50_000).unwrap();
            }
            let at = std::time::Duration::from_secs(i);
            let len = std::time::Duration::from_secs(1);
            w.write(None, at, len, &h).unwrap();
            w.write(Some("uncorrected"), at, len, &h).unwrap();
            w.write(Some("connect"), at, len, &h).unwrap();
        }
    }
    let started = Instant::now();
    let html = render_run(dir.path()).unwrap();
    let took = started.elapsed();
    let pct = charts(&html)
        .into_iter()
        .find(|c| c.0 == "percentiles")
        .unwrap();
    assert!(
        pct.1.iter().all(|n| *n > 50),
        "the full distribution from latency.hlog: {pct:?}"
    );
    eprintln!(
        "one-hour report: {} bytes ({:.2} MB), rendered in {:?}",
        html.len(),
        html.len() as f64 / 1e6,
        took
    );
    assert!(html.len() < 5_000_000, "report is {} bytes", html.len());
    if !cfg!(debug_assertions) {
        assert!(took.as_secs_f64() < 2.0, "took {took:?}");
    }
    assert!(
        html.contains(">minutes since start<"),
        "an hour is charted in minutes"
    );
    let found = charts(&html);
    assert_eq!(found.len(), 6);
    for (name, points) in &found {
        assert!(
            points
                .iter()
                .all(|n| *n <= headroom_report::svg::MAX_POINTS),
            "{name}: {points:?}"
        );
    }
    let errors = found.iter().find(|c| c.0 == "errors").unwrap();
    assert_eq!(errors.1.len(), 3, "one series per error kind that occurred");
    // The rare timeouts (one interval in 600) survive downsampling.
    let timeout_at = html.find("data-series=\"timeout\"").unwrap();
    let points = &html[timeout_at..timeout_at + html[timeout_at..].find("/>").unwrap()];
    let ys: std::collections::BTreeSet<&str> = points
        .split(" points=\"")
        .nth(1)
        .unwrap()
        .trim_end_matches('"')
        .split(' ')
        .map(|p| p.split(',').nth(1).unwrap())
        .collect();
    assert!(ys.len() >= 2, "spikes kept: {ys:?}");
}

#[test]
fn missing_summary_renders_from_intervals() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), None, &thirty_lines());
    let html = render_run(dir.path()).unwrap();
    assert!(html.contains("summary.json is missing"));
    let found = charts(&html);
    assert_eq!(found.len(), 6);
    for (name, points) in &found {
        if name != "percentiles" {
            assert!(points.iter().any(|n| *n > 0), "{name}: {points:?}");
        }
    }
    // Counters summed from the 30 lines: 30 x 1199 responses, 30 x 1200 requests.
    assert!(html.contains("35970"));
    assert!(html.contains("36000"));
    assert!(html.contains("no summary.json: percentiles not available"));
}

#[test]
fn bad_json_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), Some(&summary()), &thirty_lines()[..5]);
    let path = dir.path().join("intervals.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{\"index\": 2, \"t_s\": oops}";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = render_run(dir.path()).unwrap_err();
    assert!(matches!(err, ReportError::Json { line: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("intervals.jsonl:3"), "{err}");
}

#[test]
fn torn_last_line_is_left_out_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), None, &thirty_lines()[..4]);
    let path = dir.path().join("intervals.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"index\": 4, \"t_s\": 4.0, \"len");
    std::fs::write(&path, text).unwrap();
    let data = load_run(dir.path()).unwrap();
    assert_eq!(data.intervals.len(), 4);
    assert!(render(&data).contains("line 5 is incomplete"));
}

#[test]
fn empty_directory_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let err = render_run(dir.path()).unwrap_err();
    assert!(matches!(err, ReportError::NotARun { .. }), "{err:?}");
    let err = render_run(&dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, ReportError::Io { .. }), "{err:?}");
}

/// A TLS run over HTTP/2: its handshake time beside connect time (the latency table and a `tls`
/// chart after `connect`), the protocol, streams and TLS settings, the handshake counts and the
/// HTTP/2 counters. The same run without them (a plain HTTP/1.1 run) shows none of it.
#[test]
fn tls_and_http2_parts_appear_only_for_a_run_that_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = summary();
    s["protocol"] = json!("h2");
    s["streams"] = json!(8);
    s["tls_us"] = figures(2100);
    s["tls"] = json!({"server_name": "localhost", "min_version": "1.2", "max_version": "1.3",
                      "alpn": ["h2"], "insecure": true, "ca": "system",
                      "client_certificate": false, "resume": true,
                      "handshakes": 40, "resumed": 36});
    s["http2"] = json!({"goaway": 1, "rst_cancel": 3, "rst_refused_stream": 0,
                        "connection_errors": 0});
    let lines: Vec<Value> = thirty_lines()
        .into_iter()
        .map(|mut l| {
            let i = l["index"].as_u64().unwrap();
            // Handshakes in the first two intervals only (keep-alive); zeros after.
            l["tls_us"] = if i < 2 {
                json!({"mean": 2000.5, "p50": 2000, "p90": 2500, "p99": 3100, "max": 3300})
            } else {
                json!({"mean": 0.0, "p50": 0, "p90": 0, "p99": 0, "max": 0})
            };
            l
        })
        .collect();
    write_run(dir.path(), Some(&s), &lines);
    let html = render_run(dir.path()).unwrap();
    let found = charts(&html);
    let names: Vec<&str> = found.iter().map(|c| c.0.as_str()).collect();
    let at = |n: &str| names.iter().position(|c| *c == n).unwrap();
    assert_eq!(at("tls"), at("connect") + 1, "{names:?}");
    assert_eq!(names.len(), headroom_report::charts::NAMES.len() + 1);
    assert_eq!(
        found[at("tls")].1,
        [2, 2],
        "p50 and p99 of the two intervals"
    );
    for expected in [
        "<tr><th>protocol</th><td>h2</td></tr>",
        "<tr><th>streams per connection</th><td>8</td></tr>",
        "server_name=localhost",
        "resume=true",
        "<tr><th>TLS handshakes</th><td class=\"n\">40</td></tr>",
        "<tr><th>TLS handshakes resumed</th><td class=\"n\">36</td></tr>",
        "<tr><th>TLS handshake</th><td class=\"n\">35990</td>",
        "2.100", // the handshake p50 in ms
        "HTTP/2 frames and errors",
        "<td>rst_cancel</td><td class=\"n\">3</td>",
        "<td>goaway</td><td class=\"n\">1</td>",
    ] {
        assert!(html.contains(expected), "missing {expected:?}");
    }

    // Plain HTTP/1.1, as headroom writes it: tls null, tls_us zeros, http2 null.
    let plain = tempfile::tempdir().unwrap();
    let mut s = summary();
    s["protocol"] = json!("http/1.1");
    s["streams"] = Value::Null;
    s["tls"] = Value::Null;
    s["http2"] = Value::Null;
    s["tls_us"] = json!({"count": 0, "mean": 0.0, "p50": 0, "p99": 0, "max": 0});
    let lines: Vec<Value> = thirty_lines()
        .into_iter()
        .map(|mut l| {
            l["tls_us"] = json!({"mean": 0.0, "p50": 0, "p90": 0, "p99": 0, "max": 0});
            l
        })
        .collect();
    write_run(plain.path(), Some(&s), &lines);
    let html = render_run(plain.path()).unwrap();
    let names: Vec<String> = charts(&html).into_iter().map(|c| c.0).collect();
    assert_eq!(names, headroom_report::charts::NAMES);
    assert!(html.contains("<tr><th>protocol</th><td>http/1.1</td></tr>"));
    for absent in [
        "streams per connection",
        "<tr><th>TLS",
        "HTTP/2 frames",
        "data-chart=\"tls\"",
    ] {
        assert!(!html.contains(absent), "a plain run shows {absent:?}");
    }
}
