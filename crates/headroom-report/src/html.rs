//! The HTML page: settings and headline tables, the charts, the scenario tables.
//!
//! One self-contained file: inline CSS, inline SVG, no script, no external URL. Every string
//! that comes from the run directory goes through [`escape`]. The output depends only on the
//! input (no clock), so the same run gives the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::charts;
use crate::data::{Figures, NameStats, RunData, Summary};
use crate::svg::escape;

/// Shown for a missing value.
pub const MISSING: &str = "–";

const STYLE: &str = "\
body{font-family:system-ui,sans-serif;margin:1.2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{margin:0 0 0.1em}
h2{margin-top:1.6em}
.sub{color:#555;margin-top:0}
.note{background:#fff6d5;border:1px solid #e6d38a;padding:0.5em 0.8em}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
th,td{border-bottom:1px solid #ddd;padding:0.25em 0.8em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th.n{text-align:right}
tr.zero td{color:#999}
figure{margin:1em 0}
figcaption{color:#666;font-size:0.9em}
svg.chart{width:100%;max-width:720px;height:auto;display:block}
code{font-size:0.95em;word-break:break-all}
footer{color:#777;font-size:0.85em;margin-top:3em}
.verdict{border-left:6px solid #888;background:#f4f4f4;padding:0.45em 1em;margin:0.6em 0}
.verdict.good{border-color:#2ca02c;background:#eef8ee}
.verdict.warn{border-color:#e6a100;background:#fff6e0}
.verdict.bad{border-color:#d62728;background:#fdecec}
.verdict .answer{font-size:1.2em;font-weight:600;margin:0}
.verdict .detail{margin:0.2em 0 0;color:#333}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:0.6em;margin:0.6em 0}
.tile{border:1px solid #ddd;border-radius:6px;padding:0.35em 0.8em;min-width:0;overflow-wrap:anywhere}
.tile .v{font-size:1.5em;font-weight:600;font-variant-numeric:tabular-nums}
.tile .u{font-size:0.6em;font-weight:400;color:#555;display:inline-block}
.tile .k{color:#555;font-size:0.9em}
.tile .d{color:#777;font-size:0.8em}
.tile .v table{font-size:0.62em;margin:0.15em 0 0}
.tile .v td{border:0;padding:0 0.5em 0 0;white-space:nowrap}
.tile .v td.ratio{color:#555;font-weight:400}
.tile span.swatch{width:0.7em;height:0.7em;margin-right:0.35em;border-radius:2px}
.key{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,460px),1fr));gap:0 1.5em}
.key figure{margin:0.3em 0;display:flex;flex-direction:column}
.key svg.chart{max-width:none;flex:none}
.key h3{margin:0.6em 0 0}
.key .finding{margin:0.2em 0;flex-grow:1}
.wide{overflow-x:auto}
@media (max-width:700px){body{margin:0.6em auto;padding:0 0.5em}.tile .v{font-size:1.25em}
table{display:block;overflow-x:auto}th,td{padding:0.2em 0.5em}}
@media print{body{max-width:none;margin:0;font-size:11pt}.key{grid-template-columns:1fr 1fr}
th,td{padding:0.2em 0.4em}
figure,table,.tile,.verdict{break-inside:avoid}h2,h3{break-after:avoid}
.verdict,.tile{-webkit-print-color-adjust:exact;print-color-adjust:exact}footer{display:none}}
";

/// The whole page for one run: the answer first (verdict, headline tiles, the four key
/// charts), then the other charts, the settings and environment, every figure, and the
/// scenario's tables.
pub fn page(data: &RunData) -> String {
    let derived;
    let summary = match &data.summary {
        Some(s) => s,
        None => {
            derived = Summary::from_intervals(&data.intervals);
            &derived
        }
    };
    let target = summary.target.as_deref().unwrap_or("");
    let title = if target.is_empty() {
        "headroom report".to_string()
    } else {
        format!("headroom report – {target}")
    };
    let mut sub = format!("<code>{}</code>", text(summary.target.as_deref()));
    if let Some(load) = &summary.load_text {
        let _ = write!(sub, " &middot; {}", escape(load));
    }
    if let Some(d) = summary.duration_s {
        let _ = write!(sub, " &middot; {} s", short(d));
    }
    let _ = write!(sub, " &middot; {}", text(summary.started_at.as_deref()));
    let mut out = open_page(&title, "headroom report", &sub);
    for note in &data.notes {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(note));
    }

    let (tone, answer, details) = run_verdict(summary);
    verdict(&mut out, tone, &answer, &details);
    tiles(&mut out, &run_tiles(summary));

    // charts::all begins with the key charts.
    let charts = charts::all(data);
    let key = 4.min(charts.len());
    out.push_str("<div class=\"key\">\n");
    for chart in &charts[..key] {
        let _ = write!(out, "<figure>\n{}</figure>\n", chart.render());
    }
    out.push_str("</div>\n<h2>More charts</h2>\n");
    for chart in &charts[key..] {
        let _ = write!(out, "<figure>\n{}</figure>\n", chart.render());
    }

    settings(&mut out, summary);
    headline(&mut out, summary);

    if summary.scenario.is_some() || !summary.thresholds.is_empty() {
        out.push_str("<h2>Scenario</h2>\n");
    }
    thresholds(&mut out, summary);
    if let Some(sc) = &summary.scenario {
        names_table(&mut out, "By request", &sc.by_request);
        names_table(&mut out, "By transaction", &sc.by_transaction);
        sessions_table(&mut out, sc);
        pairs_table(&mut out, "Matches", &sc.matches);
    }

    close_page(&mut out, &data.dir.display().to_string());
    out
}

/// How a verdict reads: all good, something to look at, or a failed run (in that order: the
/// worse of two is their `max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Tone {
    Good,
    Warn,
    Bad,
}

impl Tone {
    fn class(self) -> &'static str {
        match self {
            Tone::Good => "good",
            Tone::Warn => "warn",
            Tone::Bad => "bad",
        }
    }
    fn mark(self) -> &'static str {
        match self {
            Tone::Good => "✓",
            Tone::Warn => "⚠",
            Tone::Bad => "✗",
        }
    }
}

/// The verdict box: one answer line (plain text, escaped here) and detail lines (HTML).
pub(crate) fn verdict(out: &mut String, tone: Tone, answer: &str, details: &[String]) {
    let _ = writeln!(
        out,
        "<section class=\"verdict {c}\" data-verdict=\"{c}\">\n<p class=\"answer\">{} {}</p>",
        tone.mark(),
        escape(answer),
        c = tone.class()
    );
    for d in details {
        let _ = writeln!(out, "<p class=\"detail\">{d}</p>");
    }
    out.push_str("</section>\n");
}

/// One headline tile: `key` names it for tests (`data-tile`), `value_html` is the big figure
/// (or a small table, on the comparison page), `unit` follows it, `detail` is a line below.
pub(crate) struct Tile {
    pub key: &'static str,
    pub label: String,
    pub value_html: String,
    pub unit: String,
    pub detail: Option<String>,
}

impl Tile {
    pub(crate) fn new(key: &'static str, label: &str, value: String, unit: &str) -> Tile {
        Tile {
            key,
            label: label.to_string(),
            value_html: escape(&value),
            unit: unit.to_string(),
            detail: None,
        }
    }
}

pub(crate) fn tiles(out: &mut String, tiles: &[Tile]) {
    out.push_str("<div class=\"tiles\">\n");
    for t in tiles {
        let unit = if t.unit.is_empty() {
            String::new()
        } else {
            // The space lets a long unit go under its figure in a narrow tile
            // (`35,325 responses/s` at 1280 px) instead of out of the box.
            format!(" <span class=\"u\">{}</span>", escape(&t.unit))
        };
        let _ = write!(
            out,
            "<div class=\"tile\" data-tile=\"{}\"><div class=\"k\">{}</div>\
             <div class=\"v\">{}{unit}</div>",
            t.key,
            escape(&t.label),
            t.value_html
        );
        if let Some(d) = &t.detail {
            let _ = write!(out, "<div class=\"d\">{}</div>", escape(d));
        }
        out.push_str("</div>\n");
    }
    out.push_str("</div>\n");
}

/// A figure for a tile or a verdict: three significant digits, thousands separated.
pub(crate) fn short(v: f64) -> String {
    crate::numbers::fmt_value(v)
}

pub(crate) use crate::numbers::thousands;

/// Microseconds as milliseconds for a tile: "1.23", "412".
pub(crate) fn short_ms(us: f64) -> String {
    short(us / 1000.0)
}

/// An error rate (a fraction) as a percentage: "0%", "1.23%", "< 0.01%".
pub(crate) fn percent(rate: f64) -> String {
    if rate == 0.0 {
        "0%".to_string()
    } else if rate < 1e-4 {
        "< 0.01%".to_string()
    } else {
        format!("{}%", short(rate * 100.0))
    }
}

/// The generator's CPU over the run, in percent of one core; `None` without a duration.
pub(crate) fn cpu_percent(s: &Summary) -> Option<f64> {
    let busy = match (s.cpu_user_s, s.cpu_sys_s) {
        (None, None) => return None,
        (u, y) => u.unwrap_or(0.0) + y.unwrap_or(0.0),
    };
    let d = s.duration_s.filter(|d| *d > 0.0)?;
    Some(busy / d * 100.0)
}

/// The measured latency figures, or `None` when the run measured no response.
pub(crate) fn measured(f: &Figures) -> Option<&Figures> {
    f.count.is_none_or(|c| c > 0).then_some(f)
}

/// The largest error kinds, "http_4xx 120, reset 3" (at most three, then "and N more").
fn top_errors(s: &Summary) -> String {
    let mut kinds: Vec<(&String, &u64)> = s.errors.iter().filter(|(_, n)| **n > 0).collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut t = kinds
        .iter()
        .take(3)
        .map(|(k, n)| format!("{k} {}", thousands(**n)))
        .collect::<Vec<_>>()
        .join(", ");
    if kinds.len() > 3 {
        let _ = write!(t, " and {} more kind(s)", kinds.len() - 3);
    }
    t
}

/// The run's verdict: its tone, the answer line and the detail lines (HTML).
pub(crate) fn run_verdict(s: &Summary) -> (Tone, String, Vec<String>) {
    let responses = s.responses.unwrap_or(0);
    let errors = s.errors_total.unwrap_or(0);
    let broken: Vec<&crate::data::Threshold> = s
        .thresholds
        .iter()
        .filter(|t| t.ok == Some(false))
        .collect();
    let mut details = Vec::new();
    let rate = s.error_rate.map(percent).unwrap_or_else(|| MISSING.into());
    let (tone, answer) = if !broken.is_empty() {
        (
            Tone::Bad,
            format!(
                "{} of {} threshold(s) broken",
                broken.len(),
                s.thresholds.len()
            ),
        )
    } else if responses == 0 && (s.requests.unwrap_or(0) > 0 || errors > 0) {
        (
            Tone::Bad,
            format!(
                "No response: {} request(s) sent, {} error(s)",
                thousands(s.requests.unwrap_or(0)),
                thousands(errors)
            ),
        )
    } else if errors > 0 {
        let held = if s.thresholds.is_empty() {
            String::new()
        } else {
            format!(" (all {} threshold(s) held)", s.thresholds.len())
        };
        (Tone::Warn, format!("{rate} of requests failed{held}"))
    } else if responses == 0 {
        (Tone::Warn, "Nothing was measured".to_string())
    } else if s.thresholds.is_empty() {
        (
            Tone::Good,
            format!("No errors in {} responses", thousands(responses)),
        )
    } else {
        (
            Tone::Good,
            format!(
                "All {} threshold(s) held, no errors in {} responses",
                s.thresholds.len(),
                thousands(responses)
            ),
        )
    };
    for t in &broken {
        details.push(format!(
            "<strong>{} {}</strong>: measured {}",
            escape(&t.threshold),
            escape(&t.condition),
            threshold_value(t)
        ));
    }
    let mut line = String::new();
    if let Some(rps) = s.throughput_rps {
        let _ = write!(line, "{} responses/s", short(rps));
    }
    if let Some(f) = measured(&s.latency_us) {
        if let (Some(p50), Some(p99)) = (f.p50, f.p99) {
            let _ = write!(
                line,
                "{}latency p50 {} ms, p99 {} ms (corrected for coordinated omission)",
                if line.is_empty() { "" } else { "; " },
                short_ms(p50),
                short_ms(p99)
            );
        }
    }
    if !line.is_empty() {
        details.push(escape(&line));
    }
    if errors > 0 {
        details.push(escape(&format!(
            "{} error(s), {rate}: {}",
            thousands(errors),
            top_errors(s)
        )));
    }
    if s.interrupted == Some(true) {
        details.push(format!(
            "The run was interrupted (Ctrl-C){}.",
            s.duration_s
                .map(|d| format!(" after {} s", short(d)))
                .unwrap_or_default()
        ));
    }
    if let Some(why) = &s.stopped {
        details.push(escape(&format!("headroom stopped the run early: {why}.")));
    }
    // Why the server stopped scaling (docs/verdicts.md), and a generator that was the limit:
    // then every figure above measured headroom, and the page says so.
    if let Some((name, says)) = &s.why {
        details.push(format!(
            "<span data-why=\"{}\"><strong>Why:</strong> {}</span>",
            escape(name),
            escape(says)
        ));
    }
    if !s.generator_limits.is_empty() {
        details.push(escape(&format!(
            "The load generator was the limit: {}.",
            s.generator_limits.join("; ")
        )));
    }
    let tone =
        if s.interrupted == Some(true) || s.stopped.is_some() || !s.generator_limits.is_empty() {
            tone.max(Tone::Warn)
        } else {
            tone
        };
    (tone, answer, details)
}

/// The six headline tiles of a run.
fn run_tiles(s: &Summary) -> Vec<Tile> {
    let lat = measured(&s.latency_us);
    let or_missing = |v: Option<String>| v.unwrap_or_else(|| MISSING.to_string());
    let mut cpu = Tile::new(
        "cpu",
        "generator CPU",
        or_missing(cpu_percent(s).map(short)),
        "% of a core",
    );
    if let (Some(u), Some(y)) = (s.cpu_user_s, s.cpu_sys_s) {
        cpu.detail = Some(format!("{} s user, {} s system", short(u), short(y)));
    }
    let mut errors = Tile::new(
        "error-rate",
        "error rate",
        or_missing(s.error_rate.map(percent)),
        "",
    );
    errors.detail = s.errors_total.map(|n| format!("{} error(s)", thousands(n)));
    let mut throughput = Tile::new(
        "throughput",
        "throughput",
        or_missing(s.throughput_rps.map(short)),
        "responses/s",
    );
    throughput.detail = s.responses.map(|n| format!("{} responses", thousands(n)));
    vec![
        throughput,
        Tile::new(
            "p50",
            "latency p50",
            or_missing(lat.and_then(|f| f.p50).map(short_ms)),
            "ms",
        ),
        Tile::new(
            "p99",
            "latency p99",
            or_missing(lat.and_then(|f| f.p99).map(short_ms)),
            "ms",
        ),
        errors,
        Tile::new(
            "connections",
            "peak connections",
            or_missing(s.connections_peak.map(thousands)),
            // Served ones; TCP handshakes still in the server's accept queue are not its.
            &match (s.connections_peak, s.tcp_connected_peak) {
                (Some(served), Some(tcp)) if tcp > served => {
                    format!("served, of {} TCP-connected", thousands(tcp))
                }
                _ => String::new(),
            },
        ),
        cpu,
    ]
}

/// A threshold's measured value in its unit (summary.json writes microseconds, a fraction, or
/// per second).
fn threshold_value(t: &crate::data::Threshold) -> String {
    match (t.value, t.unit.as_deref()) {
        (None, _) => MISSING.to_string(),
        (Some(v), Some("us")) => format!("{:.3} ms", v / 1000.0),
        (Some(v), Some("fraction")) => format!("{}%", num((v * 1e6).round() / 1e4)),
        (Some(v), Some("per_s")) => format!("{} /s", num(v)),
        (Some(v), Some(u)) => format!("{} {}", num(v), escape(u)),
        (Some(v), None) => num(v),
    }
}

/// The scenario's sessions as one row of columns: counts, then the lengths in ms.
fn sessions_table(out: &mut String, sc: &crate::data::Scenario) {
    if sc.sessions.is_empty() && sc.session_length_us.count.is_none() {
        return;
    }
    out.push_str(
        "<h3>Sessions (lengths in ms)</h3>\n<div class=\"wide\"><table class=\"sessions\">\n<tr>",
    );
    for (k, _) in &sc.sessions {
        let _ = write!(out, "<th class=\"n\">{}</th>", escape(&k.replace('_', " ")));
    }
    let f = &sc.session_length_us;
    for h in ["mean", "p50", "p90", "p99", "max"] {
        let _ = write!(out, "<th class=\"n\">{h}</th>");
    }
    out.push_str("</tr>\n<tr>");
    for (_, v) in &sc.sessions {
        let _ = write!(out, "<td class=\"n\">{}</td>", escape(v));
    }
    for v in [f.mean, f.p50, f.p90, f.p99, f.max] {
        let _ = write!(out, "<td class=\"n\">{}</td>", ms(v));
    }
    out.push_str("</tr>\n</table></div>\n");
}

/// The start of a report page: doctype, head with the inline style, `<h1>` and a subtitle line.
/// `title` and `h1` are plain text (escaped here); `sub_html` is HTML the caller escaped.
pub(crate) fn open_page(title: &str, h1: &str, sub_html: &str) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <h1>{}</h1>\n<p class=\"sub\">{sub_html}</p>\n",
        escape(title),
        escape(h1),
    );
    out
}

/// The end of a report page: a footer naming the directory, `</body></html>`.
pub(crate) fn close_page(out: &mut String, dir: &str) {
    let _ = write!(
        out,
        "<footer>headroom-report {} &middot; <code>{}</code></footer>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(dir)
    );
}

pub(crate) fn settings(out: &mut String, s: &Summary) {
    out.push_str("<h2>Run settings</h2>\n<table class=\"settings\">\n");
    let load = text(s.load_text.as_deref());
    let duration = match (s.duration_s, s.interrupted) {
        (Some(d), Some(true)) => format!("{} s (interrupted)", num(d)),
        (Some(d), _) => format!("{} s", num(d)),
        (None, _) => MISSING.to_string(),
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("headroom version", text(s.headroom_version.as_deref())),
        (
            "command",
            format!("<code>{}</code>", text(s.command.as_deref())),
        ),
        (
            "target",
            format!("<code>{}</code>", text(s.target.as_deref())),
        ),
        ("model", text(s.model.as_deref())),
        ("load", load),
        ("threads", int(s.threads)),
        ("keepalive", boolean(s.keepalive)),
        ("pipeline", int(s.pipeline)),
        ("started at", text(s.started_at.as_deref())),
        ("duration", duration),
    ];
    // Beside the model: what ran on the wire. Only files that say it (newer headroom).
    if s.protocol.is_some() {
        rows.insert(4, ("protocol", text(s.protocol.as_deref())));
    }
    if let Some(n) = s.streams {
        rows.insert(5, ("streams per connection", n.to_string()));
    }
    if let Some(e) = &s.expect_status {
        rows.push(("expected statuses", escape(e)));
    }
    if let Some(t) = &s.tls {
        let settings = t
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        rows.push(("TLS", escape(&settings)));
        // What the handshakes agreed on, one combination a line.
        let mut lines: Vec<String> = t
            .negotiated
            .iter()
            .map(|(words, n)| format!("{} ({} handshakes)", escape(words), int(Some(*n))))
            .collect();
        if let Some(n) = t.negotiated_other.filter(|&n| n > 0) {
            lines.push(format!("other combinations ({} handshakes)", int(Some(n))));
        }
        if !lines.is_empty() {
            rows.push(("TLS negotiated", lines.join("<br>")));
        }
    }
    for (k, v) in rows {
        let _ = writeln!(out, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    out.push_str("</table>\n");
    if !s.environment.is_empty() {
        out.push_str("<h3>Environment</h3>\n<table class=\"environment\">\n");
        for (k, v) in &s.environment {
            let v = match (k.as_str(), v.parse::<f64>()) {
                ("memory_bytes", Ok(b)) => format!("{:.1} GiB", b / (1u64 << 30) as f64),
                _ => v.clone(),
            };
            let _ = writeln!(
                out,
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(&k.replace('_', " ")),
                escape(&v)
            );
        }
        out.push_str("</table>\n");
    }
}

pub(crate) fn headline(out: &mut String, s: &Summary) {
    out.push_str("<h2>All figures</h2>\n<table class=\"headline\">\n");
    let error_rate = match s.error_rate {
        Some(r) => format!("{} ({}%)", num(r), num((r * 1e6).round() / 1e4)),
        None => MISSING.to_string(),
    };
    let cpu = match (s.cpu_user_s, s.cpu_sys_s) {
        (None, None) => MISSING.to_string(),
        (u, y) => format!("{} s user, {} s system", opt_num(u), opt_num(y)),
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("requests", int(s.requests)),
        ("responses", int(s.responses)),
        ("in flight at the end", int(s.in_flight)),
        (
            "throughput",
            s.throughput_rps
                .map_or(MISSING.to_string(), |v| format!("{} responses/s", num(v))),
        ),
        ("errors", int(s.errors_total)),
        ("error rate", error_rate),
        ("users started", int(s.users_started)),
        ("users finished", int(s.users_finished)),
        ("connects", int(s.connects)),
        (
            "peak connections (served: the server sent a byte)",
            int(s.connections_peak),
        ),
        (
            "peak TCP connections (accept queue included)",
            int(s.tcp_connected_peak),
        ),
        ("closed by the server while idle", int(s.idle_closed)),
        ("reconnects after an idle close", int(s.reconnects)),
        ("bytes sent", bytes(s.bytes_sent)),
        ("bytes received", bytes(s.bytes_received)),
        ("generator CPU", cpu),
        (
            "generator max RSS",
            s.max_rss_kb.map_or(MISSING.to_string(), |kb| {
                format!("{kb} KiB ({} MiB)", num((kb as f64 / 102.4).round() / 10.0))
            }),
        ),
        ("latency samples", int(s.latency_us.count)),
        ("format version", int(s.format_version)),
    ];
    if let Some(t) = &s.tls {
        rows.insert(13, ("TLS handshakes", int(t.handshakes)));
        rows.insert(14, ("TLS handshakes resumed", int(t.resumed)));
    }
    for (k, v) in rows {
        let _ = writeln!(out, "<tr><th>{k}</th><td class=\"n\">{v}</td></tr>");
    }
    out.push_str("</table>\n");

    out.push_str("<h3>Latency (ms)</h3>\n");
    let mut figures: Vec<(&str, &Figures)> = vec![
        ("corrected", &s.latency_us),
        ("uncorrected", &s.latency_uncorrected_us),
        ("connect", &s.connect_us),
    ];
    if s.used_tls() {
        figures.push(("TLS handshake", &s.tls_us));
    }
    if s.served_us.count.is_some_and(|n| n > 0) {
        figures.push(("connect to the server's first byte", &s.served_us));
    }
    figures_table(out, &figures);
    counts_table(
        out,
        "Errors by kind",
        "kind",
        &s.errors,
        "no error kinds recorded",
    );
    if !s.http2.is_empty() {
        counts_table(
            out,
            "HTTP/2 frames and errors",
            "counter",
            &s.http2,
            "no HTTP/2 counters recorded",
        );
    }
    counts_table(
        out,
        "Responses by status",
        "status",
        &s.status,
        "no status recorded",
    );
    // Beside the classes, every exact code seen (files of a headroom that counted them).
    if !s.status_codes.is_empty() {
        counts_table(
            out,
            "Responses by status code",
            "code",
            &s.status_codes,
            "no status code recorded",
        );
    }
}

const FIGURE_COLUMNS: &str = "<th class=\"n\">count</th><th class=\"n\">mean</th>\
<th class=\"n\">stdev</th><th class=\"n\">min</th><th class=\"n\">p50</th><th class=\"n\">p90</th>\
<th class=\"n\">p99</th><th class=\"n\">p99.9</th><th class=\"n\">max</th>";

pub(crate) fn figure_cells(f: &Figures) -> String {
    let mut row = format!("<td class=\"n\">{}</td>", int(f.count));
    for v in [f.mean, f.stdev, f.min, f.p50, f.p90, f.p99, f.p999, f.max] {
        let _ = write!(row, "<td class=\"n\">{}</td>", ms(v));
    }
    row
}

pub(crate) fn figures_table(out: &mut String, rows: &[(&str, &Figures)]) {
    let _ = writeln!(
        out,
        "<table class=\"latency\">\n<tr><th></th>{FIGURE_COLUMNS}</tr>"
    );
    for (name, f) in rows {
        let _ = writeln!(out, "<tr><th>{name}</th>{}</tr>", figure_cells(f));
    }
    out.push_str("</table>\n");
}

pub(crate) fn counts_table(
    out: &mut String,
    title: &str,
    key: &str,
    m: &BTreeMap<String, u64>,
    empty: &str,
) {
    let _ = writeln!(out, "<h3>{title}</h3>");
    if m.is_empty() {
        let _ = writeln!(out, "<p>{empty}</p>");
        return;
    }
    let _ = writeln!(
        out,
        "<table>\n<tr><th>{key}</th><th class=\"n\">count</th></tr>"
    );
    for (k, v) in m {
        let class = if *v == 0 { " class=\"zero\"" } else { "" };
        let _ = writeln!(
            out,
            "<tr{class}><td>{}</td><td class=\"n\">{v}</td></tr>",
            escape(k)
        );
    }
    out.push_str("</table>\n");
}

pub(crate) fn thresholds(out: &mut String, s: &Summary) {
    if s.thresholds.is_empty() {
        return;
    }
    let verdict = match s.thresholds_ok {
        Some(true) => " (all held)",
        Some(false) => " (some failed)",
        None => "",
    };
    let _ = writeln!(
        out,
        "<h3>Thresholds{verdict}</h3>\n<table class=\"thresholds\">\n<tr><th>threshold</th>\
         <th>condition</th><th class=\"n\">measured</th><th>result</th></tr>"
    );
    for t in &s.thresholds {
        let measured = threshold_value(t);
        let result = match t.ok {
            Some(true) => "ok",
            Some(false) => "<strong>FAILED</strong>",
            None => MISSING,
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{measured}</td><td>{result}</td></tr>",
            escape(&t.threshold),
            escape(&t.condition)
        );
    }
    out.push_str("</table>\n");
}

pub(crate) fn names_table(out: &mut String, title: &str, rows: &[NameStats]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>{title} (latency in ms)</h3>\n<table class=\"names\">\n<tr><th>name</th>\
         <th class=\"n\">errors</th>{FIGURE_COLUMNS}</tr>"
    );
    for r in rows {
        // The count column holds the name's own `count`; the latency histogram's count only
        // when that is missing.
        let f = Figures {
            count: r.count.or(r.latency_us.count),
            ..r.latency_us.clone()
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td>{}</tr>",
            escape(&r.name),
            int(r.errors),
            figure_cells(&f)
        );
    }
    out.push_str("</table>\n");
}

pub(crate) fn pairs_table(out: &mut String, title: &str, rows: &[(String, String)]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h3>{title}</h3>\n<table>");
    for (k, v) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td class=\"n\">{}</td></tr>",
            escape(k),
            escape(v)
        );
    }
    out.push_str("</table>\n");
}

/// Escaped text or the missing mark.
pub(crate) fn text(s: Option<&str>) -> String {
    s.map_or(MISSING.to_string(), escape)
}

pub(crate) fn int(v: Option<u64>) -> String {
    v.map_or(MISSING.to_string(), |v| v.to_string())
}

pub(crate) fn boolean(v: Option<bool>) -> String {
    v.map_or(MISSING.to_string(), |v| {
        if v { "yes" } else { "no" }.to_string()
    })
}

/// A float as written in the file (shortest round-trip form): 1234.567, 0.000123.
pub(crate) fn num(v: f64) -> String {
    format!("{v}")
}

pub(crate) fn opt_num(v: Option<f64>) -> String {
    v.map_or(MISSING.to_string(), num)
}

/// Microseconds shown as milliseconds with three decimals (exact for whole microseconds).
pub(crate) fn ms(us: Option<f64>) -> String {
    us.map_or(MISSING.to_string(), |v| format!("{:.3}", v / 1000.0))
}

pub(crate) fn bytes(v: Option<u64>) -> String {
    v.map_or(MISSING.to_string(), |b| {
        let mib = b as f64 / (1024.0 * 1024.0);
        if mib >= 0.1 {
            format!("{b} ({} MiB)", num((mib * 10.0).round() / 10.0))
        } else {
            b.to_string()
        }
    })
}
