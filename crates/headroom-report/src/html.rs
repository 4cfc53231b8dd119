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
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;padding:0 1em;color:#222}
h1{margin-bottom:0.2em}
.sub{color:#555;margin-top:0}
.note{background:#fff6d5;border:1px solid #e6d38a;padding:0.5em 0.8em}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
th,td{border-bottom:1px solid #ddd;padding:0.25em 0.8em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th.n{text-align:right}
tr.zero td{color:#999}
figure{margin:1em 0}
svg.chart{width:100%;max-width:720px;height:auto;display:block}
code{font-size:0.95em;word-break:break-all}
footer{color:#777;font-size:0.85em;margin-top:3em}
";

/// The whole page for one run.
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
    let mut out = open_page(
        &title,
        "headroom report",
        &format!(
            "{} &middot; {}",
            text(summary.target.as_deref()),
            text(summary.started_at.as_deref())
        ),
    );
    for note in &data.notes {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(note));
    }
    if summary.interrupted == Some(true) {
        out.push_str("<p class=\"note\">The run was interrupted (Ctrl-C).</p>\n");
    }

    settings(&mut out, summary);
    headline(&mut out, summary);

    out.push_str("<h2>Charts</h2>\n");
    for chart in charts::all(data) {
        let _ = write!(out, "<figure>\n{}</figure>\n", chart.render());
    }

    if summary.scenario.is_some() || !summary.thresholds.is_empty() {
        out.push_str("<h2>Scenario</h2>\n");
    }
    thresholds(&mut out, summary);
    if let Some(sc) = &summary.scenario {
        names_table(&mut out, "By request", &sc.by_request);
        names_table(&mut out, "By transaction", &sc.by_transaction);
        pairs_table(&mut out, "Sessions", &sc.sessions);
        pairs_table(&mut out, "Matches", &sc.matches);
    }

    close_page(&mut out, &data.dir.display().to_string());
    out
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
    let load = if s.load.is_empty() {
        MISSING.to_string()
    } else {
        escape(
            &s.load
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
        )
    };
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
    out.push_str("<h2>Headline figures</h2>\n<table class=\"headline\">\n");
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
        ("peak connections", int(s.connections_peak)),
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
        rows.insert(10, ("TLS handshakes", int(t.handshakes)));
        rows.insert(11, ("TLS handshakes resumed", int(t.resumed)));
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
        // Units as summary.json writes them: microseconds, a fraction, or per second.
        let measured = match (t.value, t.unit.as_deref()) {
            (None, _) => MISSING.to_string(),
            (Some(v), Some("us")) => format!("{:.3} ms", v / 1000.0),
            (Some(v), Some("fraction")) => format!("{}%", num((v * 1e6).round() / 1e4)),
            (Some(v), Some("per_s")) => format!("{} /s", num(v)),
            (Some(v), Some(u)) => format!("{} {}", num(v), escape(u)),
            (Some(v), None) => num(v),
        };
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
