//! Reading a run directory into plain types.
//!
//! The files are parsed into `serde_json::Value` first and picked apart field by field, rather
//! than deserialized into strict structs: a report must come out of a run written by an older or
//! newer headroom, so an unknown field is ignored and a missing (or oddly typed) one becomes
//! `None`, shown as "–". Only text that is not JSON at all is an error, and it names the file
//! and line.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::ReportError;

/// Everything a report is made of: the optional summary and the interval lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunData {
    /// The run directory as given.
    pub dir: PathBuf,
    /// `summary.json`; `None` when the run was killed before writing it.
    pub summary: Option<Summary>,
    /// `intervals.jsonl`, in file order (empty when the file is missing).
    pub intervals: Vec<Interval>,
    /// The whole run's latency distributions from `latency.hlog` (`None` when the file is
    /// missing or unreadable; the percentile plot then uses summary.json's figures).
    pub distributions: Option<crate::hlog::Distributions>,
    /// Things the reader should know about the input (a missing file, a torn last line).
    pub notes: Vec<String>,
}

/// Latency-like figures in microseconds. `count`, `stdev`, `min` and `p999` exist in
/// summary.json only; an interval line carries `mean`, `p50`, `p90`, `p99` and `max`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub count: Option<u64>,
    pub mean: Option<f64>,
    pub stdev: Option<f64>,
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
}

/// Per request or transaction name, from summary.json's `scenario` section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NameStats {
    pub name: String,
    pub count: Option<u64>,
    pub errors: Option<u64>,
    pub latency_us: Figures,
}

/// summary.json's `scenario` section (scenario runs only).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scenario {
    pub by_request: Vec<NameStats>,
    pub by_transaction: Vec<NameStats>,
    /// Named `match` checks and how often each matched; values shown as found.
    pub matches: Vec<(String, String)>,
    /// `sessions`: completed, aborted, users_dropped (and whatever else is there), the
    /// numbers only; the session lengths are [`Scenario::session_length_us`].
    pub sessions: Vec<(String, String)>,
    /// `sessions.duration`: how long the sessions took, in microseconds.
    pub session_length_us: Figures,
}

/// One checked threshold of a scenario run (summary.json's `thresholds`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Threshold {
    /// The metric as written in the scenario: `p99(article)`, `error_rate`.
    pub threshold: String,
    /// The comparison as written: `< 100ms`.
    pub condition: String,
    /// The measured value in `unit` (`us`, `fraction`, `per_s`); `None` when nothing was measured.
    pub value: Option<f64>,
    pub unit: Option<String>,
    pub ok: Option<bool>,
}

/// summary.json. Every field is optional; see `docs/summary-json.md` for their meaning.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub format_version: Option<u64>,
    pub headroom_version: Option<String>,
    pub command: Option<String>,
    pub target: Option<String>,
    pub model: Option<String>,
    /// The load model's parameters as (key, value text), in file order of keys (sorted).
    pub load: Vec<(String, String)>,
    /// The load in words ("Poisson arrivals, 3 → 10 users/s over 3 s"), see [`load_words`];
    /// `None` when the file has no load.
    pub load_text: Option<String>,
    /// Where the run ran (`environment`: kernel, os, cpu, cores, memory_bytes, hostname).
    pub environment: Vec<(String, String)>,
    pub threads: Option<u64>,
    pub keepalive: Option<bool>,
    pub pipeline: Option<u64>,
    pub started_at: Option<String>,
    pub duration_s: Option<f64>,
    pub interrupted: Option<bool>,
    pub stopped: Option<String>,
    pub requests: Option<u64>,
    pub responses: Option<u64>,
    pub in_flight: Option<u64>,
    /// Failures by kind, every kind the file lists (zeros included).
    pub errors: BTreeMap<String, u64>,
    pub errors_total: Option<u64>,
    pub error_rate: Option<f64>,
    pub status: BTreeMap<String, u64>,
    /// Responses by exact code (`"404"`), the codes seen only; empty for a run of a headroom
    /// that did not count them.
    pub status_codes: BTreeMap<String, u64>,
    /// `--expect-status` as given (canonical text such as `200-299,404`); `None` without.
    pub expect_status: Option<String>,
    pub users_started: Option<u64>,
    pub users_finished: Option<u64>,
    pub throughput_rps: Option<f64>,
    pub latency_us: Figures,
    pub latency_uncorrected_us: Figures,
    pub connect_us: Figures,
    /// TLS handshake time (`tls_us`); all zero with a count of 0 in a plain run.
    pub tls_us: Figures,
    /// `tls`: the run's TLS settings and handshake counts; `None` for a plain run (`null`).
    pub tls: Option<TlsSummary>,
    /// The application protocol that ran (`http/1.1`, `h2`, `h2c`, `xmpp`...).
    pub protocol: Option<String>,
    /// HTTP/2 streams per connection (`null` without HTTP/2).
    pub streams: Option<u64>,
    /// `http2`: GOAWAY, RST_STREAM by code and connection errors; empty without HTTP/2.
    pub http2: BTreeMap<String, u64>,
    pub connects: Option<u64>,
    /// Peak *served* connections (the server sent a byte on them).
    pub connections_peak: Option<u64>,
    /// Peak TCP connections, the server's accept queue included (`None` before issue 26).
    pub tcp_connected_peak: Option<u64>,
    /// TCP connect to the server's first byte (`served_us`).
    pub served_us: Figures,
    /// Connections the server closed while idle, and reconnects after them.
    pub idle_closed: Option<u64>,
    pub reconnects: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_received: Option<u64>,
    pub cpu_user_s: Option<f64>,
    pub cpu_sys_s: Option<f64>,
    pub max_rss_kb: Option<u64>,
    pub scenario: Option<Scenario>,
    /// Scenario thresholds and whether each held (empty when the run had none).
    pub thresholds: Vec<Threshold>,
    pub thresholds_ok: Option<bool>,
}

/// summary.json's `tls` section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsSummary {
    pub handshakes: Option<u64>,
    pub resumed: Option<u64>,
    /// The settings (`server_name`, `min_version`, `resume`, `alpn`...) as (key, value text),
    /// the counts left out.
    pub settings: Vec<(String, String)>,
    /// What the handshakes agreed on (`negotiated`): each combination in words
    /// (`TLSv1.3 TLS_AES_256_GCM_SHA384 X25519 h2 HTTP/2`) and its handshakes, as the file
    /// lists them; then the handshakes of the combinations left out (`negotiated_other`).
    pub negotiated: Vec<(String, u64)>,
    pub negotiated_other: Option<u64>,
}

impl Summary {
    /// Whether the run spoke TLS: summary.json says so (`tls` not null), or it timed a
    /// handshake.
    pub fn used_tls(&self) -> bool {
        self.tls.is_some() || self.tls_us.count.is_some_and(|n| n > 0)
    }
}

/// One line of intervals.jsonl.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    /// 1-based line number in intervals.jsonl.
    pub line: usize,
    pub index: Option<u64>,
    /// Interval start, seconds from the run start.
    pub t_s: Option<f64>,
    pub length_s: Option<f64>,
    pub requests: Option<u64>,
    pub responses: Option<u64>,
    pub rps: Option<f64>,
    pub errors: BTreeMap<String, u64>,
    pub status: BTreeMap<String, u64>,
    /// Responses by exact code, the codes seen only; `None` when the line has no
    /// `status_codes` (written by a headroom that did not count them), so a code not seen in
    /// an interval that counted codes is a known 0.
    pub status_codes: Option<BTreeMap<String, u64>>,
    pub latency_us: Figures,
    pub latency_uncorrected_us: Figures,
    pub connect_us: Figures,
    /// TLS handshakes finished in the interval (`tls_us`; zeros in a plain run).
    pub tls_us: Figures,
    pub connects: Option<u64>,
    pub disconnects: Option<u64>,
    pub connections_open: Option<u64>,
    pub connections_peak: Option<u64>,
    pub users_active: Option<u64>,
    pub users_started: Option<u64>,
    pub users_finished: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_received: Option<u64>,
    /// The server's process tree at the interval's end (`run --server-pid`), when sampled.
    pub server: Option<ServerSample>,
}

/// One reading of the server's process tree in an interval line (`server`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSample {
    /// CPU over the interval, percent of one core (200 = two cores busy).
    pub cpu_user_pct: Option<f64>,
    pub cpu_sys_pct: Option<f64>,
    pub rss_bytes: Option<u64>,
    pub threads: Option<u64>,
    pub fds: Option<u64>,
}

impl Interval {
    /// The interval's end in seconds since the run start: the x of every time chart. Falls back
    /// to `(index + 1) * length_s` when `t_s` is missing.
    pub fn t_end(&self) -> Option<f64> {
        match (self.t_s, self.length_s, self.index) {
            (Some(t), Some(l), _) => Some(t + l),
            (Some(t), None, _) => Some(t),
            (None, Some(l), Some(i)) => Some((i as f64 + 1.0) * l),
            _ => None,
        }
    }
}

/// Reads `summary.json` and `intervals.jsonl` from `dir`. Either may be missing, not both.
pub fn load_run(dir: &Path) -> Result<RunData, ReportError> {
    fs::metadata(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut data = RunData {
        dir: dir.to_path_buf(),
        ..RunData::default()
    };
    let summary_path = dir.join("summary.json");
    let summary_text = read_optional(&summary_path)?;
    if let Some(text) = &summary_text {
        data.summary = Some(parse_summary(text, &summary_path)?);
    } else {
        data.notes.push(
            "summary.json is missing (the run did not finish): whole-run figures are summed \
             from intervals.jsonl and the latency percentiles are not available."
                .to_string(),
        );
    }
    let intervals_path = dir.join("intervals.jsonl");
    let intervals_text = read_optional(&intervals_path)?;
    if let Some(text) = &intervals_text {
        let (intervals, torn) = parse_intervals(text, &intervals_path)?;
        data.intervals = intervals;
        if let Some(line) = torn {
            data.notes.push(format!(
                "intervals.jsonl: line {line} is incomplete (the run was stopped while writing \
                 it) and was left out."
            ));
        }
    } else {
        data.notes
            .push("intervals.jsonl is missing: there are no charts over time.".to_string());
    }
    if summary_text.is_none() && intervals_text.is_none() {
        return Err(ReportError::NotARun {
            dir: dir.to_path_buf(),
        });
    }
    match crate::hlog::read(&dir.join("latency.hlog")) {
        Ok(d) => data.distributions = d,
        Err(e) => data.notes.push(format!(
            "latency.hlog cannot be read ({e}): the percentile plot shows summary.json's \
             figures only."
        )),
    }
    Ok(data)
}

fn read_optional(path: &Path) -> Result<Option<String>, ReportError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ReportError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A serde_json error as a located `ReportError`; `first_line` is the file line where the
/// parsed text starts (serde_json counts lines from 1 within the text it was given).
fn json_error(path: &Path, first_line: usize, e: &serde_json::Error) -> ReportError {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
    ReportError::Json {
        path: path.to_path_buf(),
        line: first_line + e.line().max(1) - 1,
        column: e.column(),
        message,
    }
}

/// Parses summary.json's text.
pub fn parse_summary(text: &str, path: &Path) -> Result<Summary, ReportError> {
    let v: Value = serde_json::from_str(text).map_err(|e| json_error(path, 1, &e))?;
    let Value::Object(o) = v else {
        return Err(ReportError::Json {
            path: path.to_path_buf(),
            line: 1,
            column: 1,
            message: "expected a JSON object".to_string(),
        });
    };
    Ok(summary_from(&o))
}

/// Parses intervals.jsonl's text. Blank lines are skipped. A last line without its newline that
/// does not parse is a write cut short by a kill: it is dropped and its number returned.
pub fn parse_intervals(
    text: &str,
    path: &Path,
) -> Result<(Vec<Interval>, Option<usize>), ReportError> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    let last = lines.len();
    for (i, line) in lines.iter().enumerate() {
        let number = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => out.push(interval_from(&o, number)),
            Ok(_) => {
                return Err(ReportError::Json {
                    path: path.to_path_buf(),
                    line: number,
                    column: 1,
                    message: "expected a JSON object".to_string(),
                })
            }
            // `split` yields a final piece after the last newline; only that piece can be torn.
            Err(e) if number == last && e.is_eof() => return Ok((out, Some(number))),
            Err(e) => return Err(json_error(path, number, &e)),
        }
    }
    Ok((out, None))
}

fn summary_from(o: &Map<String, Value>) -> Summary {
    Summary {
        format_version: u64_of(o.get("format_version")),
        headroom_version: str_of(o.get("headroom_version")),
        command: str_of(o.get("command")),
        target: str_of(o.get("target")),
        model: str_of(o.get("model")),
        load: pairs_of(o.get("load")),
        load_text: o.get("load").and_then(load_words),
        environment: pairs_of(o.get("environment")),
        threads: u64_of(o.get("threads")),
        keepalive: o.get("keepalive").and_then(Value::as_bool),
        pipeline: u64_of(o.get("pipeline")),
        started_at: str_of(o.get("started_at")),
        duration_s: f64_of(o.get("duration_s")),
        interrupted: o.get("interrupted").and_then(Value::as_bool),
        stopped: str_of(o.get("stopped")),
        requests: u64_of(o.get("requests")),
        responses: u64_of(o.get("responses")),
        in_flight: u64_of(o.get("in_flight")),
        errors: counts_of(o.get("errors")),
        errors_total: u64_of(o.get("errors_total")),
        error_rate: f64_of(o.get("error_rate")),
        status: counts_of(o.get("status")),
        status_codes: counts_of(o.get("status_codes")),
        expect_status: str_of(o.get("expect_status")),
        users_started: u64_of(o.get("users_started")),
        users_finished: u64_of(o.get("users_finished")),
        throughput_rps: f64_of(o.get("throughput_rps")),
        latency_us: figures_of(o.get("latency_us")),
        latency_uncorrected_us: figures_of(o.get("latency_uncorrected_us")),
        connect_us: figures_of(o.get("connect_us")),
        tls_us: figures_of(o.get("tls_us")),
        tls: o.get("tls").and_then(Value::as_object).map(|t| TlsSummary {
            handshakes: u64_of(t.get("handshakes")),
            resumed: u64_of(t.get("resumed")),
            settings: pairs_of(Some(&Value::Object(t.clone())))
                .into_iter()
                .filter(|(k, _)| {
                    !["handshakes", "resumed", "negotiated", "negotiated_other"]
                        .contains(&k.as_str())
                })
                .collect(),
            negotiated: negotiated_of(t.get("negotiated")),
            negotiated_other: u64_of(t.get("negotiated_other")),
        }),
        protocol: str_of(o.get("protocol")),
        streams: u64_of(o.get("streams")),
        http2: counts_of(o.get("http2")),
        connects: u64_of(o.get("connects")),
        connections_peak: u64_of(o.get("connections_peak")),
        tcp_connected_peak: u64_of(o.get("tcp_connected_peak")),
        served_us: figures_of(o.get("served_us")),
        idle_closed: u64_of(o.get("idle_closed")),
        reconnects: u64_of(o.get("reconnects")),
        bytes_sent: u64_of(o.get("bytes_sent")),
        bytes_received: u64_of(o.get("bytes_received")),
        cpu_user_s: f64_of(o.get("cpu_user_s")),
        cpu_sys_s: f64_of(o.get("cpu_sys_s")),
        max_rss_kb: u64_of(o.get("max_rss_kb")),
        scenario: o
            .get("scenario")
            .and_then(Value::as_object)
            .map(scenario_from),
        thresholds: o
            .get("thresholds")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(threshold_from).collect())
            .unwrap_or_default(),
        thresholds_ok: o.get("thresholds_ok").and_then(Value::as_bool),
    }
}

fn threshold_from(v: &Value) -> Threshold {
    Threshold {
        threshold: str_of(v.get("threshold")).unwrap_or_default(),
        condition: str_of(v.get("condition")).unwrap_or_default(),
        value: f64_of(v.get("value")),
        unit: str_of(v.get("unit")),
        ok: v.get("ok").and_then(Value::as_bool),
    }
}

fn scenario_from(o: &Map<String, Value>) -> Scenario {
    let names = |v: Option<&Value>| -> Vec<NameStats> {
        let Some(Value::Object(m)) = v else {
            return Vec::new();
        };
        m.iter()
            .map(|(name, v)| NameStats {
                name: name.clone(),
                count: u64_of(v.get("count")),
                errors: u64_of(v.get("errors")),
                latency_us: figures_of(v.get("latency_us")),
            })
            .collect()
    };
    Scenario {
        by_request: names(o.get("by_request")),
        by_transaction: names(o.get("by_transaction")),
        matches: pairs_of(o.get("matches")),
        sessions: pairs_of(o.get("sessions"))
            .into_iter()
            .filter(|(k, _)| k != "duration")
            .collect(),
        session_length_us: figures_of(o.get("sessions").and_then(|s| s.get("duration"))),
    }
}

/// A number as people write it: 3, 2.5, 1,000, 1,234.5.
fn plain(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}{}", crate::numbers::thousands(v.abs() as u64))
    } else {
        format!("{v}")
    }
}

/// "1 request", "3 requests".
fn count_of(n: f64, noun: &str) -> String {
    if n == 1.0 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", plain(n))
    }
}

/// A think time as summary.json writes it (the distribution's Rust debug form, such as
/// `Uniform { min: 10ms, max: 20ms }`) in words; anything else as written.
fn think_words(t: &str) -> String {
    let t = t.trim();
    let inner = |prefix: &str| -> Option<&str> {
        t.strip_prefix(prefix)?
            .trim()
            .strip_prefix(['{', '('])?
            .strip_suffix(['}', ')'])
            .map(str::trim)
    };
    let field = |body: &str, name: &str| -> Option<String> {
        body.split(',')
            .find_map(|f| f.trim().strip_prefix(name)?.trim().strip_prefix(':'))
            .map(|v| v.trim().to_string())
    };
    if let Some(v) = inner("Constant") {
        return v.to_string();
    }
    if let Some(b) = inner("Uniform") {
        if let (Some(lo), Some(hi)) = (field(b, "min"), field(b, "max")) {
            return format!("uniform {lo} to {hi}");
        }
    }
    if let Some(b) = inner("Exponential") {
        if let Some(m) = field(b, "mean") {
            return format!("exponential, mean {m}");
        }
    }
    if let Some(b) = inner("Pareto") {
        if let (Some(lo), Some(a)) = (field(b, "min"), field(b, "alpha")) {
            return format!("Pareto from {lo}, alpha {a}");
        }
    }
    t.to_string()
}

/// An arrival process name with a capital: `poisson` -> "Poisson".
fn arrivals(v: Option<&Value>) -> String {
    match v.and_then(Value::as_str) {
        Some("poisson") | None => "Poisson arrivals".to_string(),
        Some("constant") => "evenly spaced arrivals".to_string(),
        Some(other) => format!("{other} arrivals"),
    }
}

/// How a closed population came and went (`load.ramp`), to follow "N closed users":
/// " ramped up over 10 s" (one stage: `--ramp-up`), or every stage (`--stage`,
/// `load.stages`): " in stages: 0 → 100 over 10 s, 100 for 30 s, 100 → 0 over 10 s". Empty
/// without a ramp (every user at once, or a summary from before issue 27).
fn ramp_words(ramp: Option<&Value>) -> String {
    let stages: Vec<(Option<f64>, Option<f64>)> = ramp
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s.get("duration_s").and_then(Value::as_f64),
                s.get("users").and_then(Value::as_f64),
            )
        })
        .collect();
    let secs = |d: Option<f64>| d.map_or("?".to_string(), |d| format!("{} s", plain(d)));
    match stages.as_slice() {
        [] => String::new(),
        [(d, _)] => format!(" ramped up over {}", secs(*d)),
        _ => {
            let mut from = Some(0.0);
            let steps: Vec<String> = stages
                .iter()
                .map(|(d, users)| {
                    let to = users.map_or("?".to_string(), plain);
                    let t = if from == *users {
                        format!("{to} for {}", secs(*d))
                    } else {
                        let f = from.map_or("?".to_string(), plain);
                        format!("{f} → {to} over {}", secs(*d))
                    };
                    from = *users;
                    t
                })
                .collect();
            format!(" in stages: {}", steps.join(", "))
        }
    }
}

/// summary.json's `load` in words, for the report: "50 closed users, back to back", "500
/// closed users ramped up over 10 s, back to back", "constant rate 1,000 requests/s over 10
/// connections", "Poisson arrivals, 3 → 10 users/s over 3 s".
/// A load of a kind this headroom does not know is shown as its fields, `key value`.
pub fn load_words(v: &Value) -> Option<String> {
    let o = v.as_object()?;
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    let ramp = ramp_words(o.get("ramp"));
    let think = || {
        o.get("think")
            .and_then(Value::as_str)
            .map(|t| format!(", think time {}", think_words(t)))
            .unwrap_or_default()
    };
    let text = match o.get("name").and_then(Value::as_str) {
        Some("closed") => {
            let users = num("users").map_or("?".to_string(), plain);
            let each = match num("per_user") {
                Some(n) => format!(", {} each", count_of(n, "request")),
                None => ", back to back".to_string(),
            };
            format!("{users} closed users{ramp}{each}{}", think())
        }
        Some("rate") => format!(
            "constant rate {} requests/s over {} connections",
            num("rate").map_or("?".to_string(), plain),
            num("connections").map_or("?".to_string(), plain)
        ),
        Some("open") => {
            let mut t = format!(
                "{}, {} users/s, {} each{}",
                arrivals(o.get("arrival")),
                num("arrival_rate").map_or("?".to_string(), plain),
                num("per_user").map_or("? requests".to_string(), |n| count_of(n, "request")),
                think()
            );
            if let Some(m) = num("max_users") {
                t.push_str(&format!(", at most {} users", plain(m)));
            }
            t
        }
        Some("sessions") => {
            let mut parts = Vec::new();
            for p in o
                .get("phases")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = |k: &str| p.get(k).and_then(Value::as_f64);
                let rate = match (f("from"), f("to")) {
                    (Some(a), Some(b)) if a != b => format!("{} → {}", plain(a), plain(b)),
                    (Some(a), _) => plain(a),
                    _ => "?".to_string(),
                };
                let mut t = format!(
                    "{}, {rate} users/s over {} s",
                    arrivals(p.get("arrival")),
                    f("duration_s").map_or("?".to_string(), plain)
                );
                if let Some(m) = f("max_users") {
                    t.push_str(&format!(" (at most {} users)", plain(m)));
                }
                parts.push(t);
            }
            // Closed users run beside the phases, which follow one another.
            let users = num("users")
                .filter(|u| *u > 0.0)
                .map(|u| format!("{} closed users{ramp}", plain(u)));
            let phases = (!parts.is_empty()).then(|| parts.join("; then "));
            let mut t = match (users, phases) {
                (Some(u), Some(p)) => format!("{u}, beside {p}"),
                (Some(u), None) => u,
                (None, Some(p)) => p,
                (None, None) => "no users".to_string(),
            };
            if let Some(names) = o.get("sessions").and_then(Value::as_array) {
                let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
                if !names.is_empty() {
                    t.push_str(&format!(", running session(s) {}", names.join(", ")));
                }
            }
            t
        }
        _ => pairs_of(Some(v))
            .into_iter()
            .map(|(k, v)| format!("{} {v}", k.replace('_', " ")))
            .collect::<Vec<_>>()
            .join(", "),
    };
    Some(text)
}

/// One interval line already parsed as JSON (as `headroom run` writes it to intervals.jsonl),
/// numbered `line`; a value that is not an object gives an interval with every field missing.
pub fn interval_from_value(v: &Value, line: usize) -> Interval {
    match v {
        Value::Object(o) => interval_from(o, line),
        _ => Interval {
            line,
            ..Interval::default()
        },
    }
}

fn interval_from(o: &Map<String, Value>, line: usize) -> Interval {
    Interval {
        line,
        index: u64_of(o.get("index")),
        t_s: f64_of(o.get("t_s")),
        length_s: f64_of(o.get("length_s")),
        requests: u64_of(o.get("requests")),
        responses: u64_of(o.get("responses")),
        rps: f64_of(o.get("rps")),
        errors: counts_of(o.get("errors")),
        status: counts_of(o.get("status")),
        status_codes: o
            .get("status_codes")
            .filter(|v| v.is_object())
            .map(|v| counts_of(Some(v))),
        latency_us: figures_of(o.get("latency_us")),
        latency_uncorrected_us: figures_of(o.get("latency_uncorrected_us")),
        connect_us: figures_of(o.get("connect_us")),
        tls_us: figures_of(o.get("tls_us")),
        connects: u64_of(o.get("connects")),
        disconnects: u64_of(o.get("disconnects")),
        connections_open: u64_of(o.get("connections_open")),
        connections_peak: u64_of(o.get("connections_peak")),
        users_active: u64_of(o.get("users_active")),
        users_started: u64_of(o.get("users_started")),
        users_finished: u64_of(o.get("users_finished")),
        bytes_sent: u64_of(o.get("bytes_sent")),
        bytes_received: u64_of(o.get("bytes_received")),
        server: match o.get("server") {
            Some(Value::Object(m)) => Some(ServerSample {
                cpu_user_pct: f64_of(m.get("cpu_user_pct")),
                cpu_sys_pct: f64_of(m.get("cpu_sys_pct")),
                rss_bytes: u64_of(m.get("rss_bytes")),
                threads: u64_of(m.get("threads")),
                fds: u64_of(m.get("fds")),
            }),
            _ => None,
        },
    }
}

fn str_of(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_string)
}

fn f64_of(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// A count; a whole non-negative float (`5.0`) is accepted too.
fn u64_of(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|x| *x >= 0.0 && x.fract() == 0.0 && *x < 1.8e19)
            .map(|x| x as u64)
    })
}

fn counts_of(v: Option<&Value>) -> BTreeMap<String, u64> {
    let Some(Value::Object(m)) = v else {
        return BTreeMap::new();
    };
    m.iter()
        .filter_map(|(k, v)| u64_of(Some(v)).map(|n| (k.clone(), n)))
        .collect()
}

fn figures_of(v: Option<&Value>) -> Figures {
    let Some(Value::Object(m)) = v else {
        return Figures::default();
    };
    Figures {
        count: u64_of(m.get("count")),
        mean: f64_of(m.get("mean")),
        stdev: f64_of(m.get("stdev")),
        min: f64_of(m.get("min")),
        p50: f64_of(m.get("p50")),
        p90: f64_of(m.get("p90")),
        p99: f64_of(m.get("p99")),
        p999: f64_of(m.get("p999")),
        max: f64_of(m.get("max")),
    }
}

/// An object's members as (key, value text); nulls are left out, strings shown bare, anything
/// else as compact JSON.
/// `tls.negotiated`: each entry's values in words, and its handshakes (an entry without a
/// protocol is left out).
fn negotiated_of(v: Option<&Value>) -> Vec<(String, u64)> {
    let Some(Value::Array(a)) = v else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|e| {
            let words: Vec<String> = ["protocol", "cipher_suite", "key_exchange", "alpn", "http"]
                .iter()
                .filter_map(|k| str_of(e.get(k)))
                .collect();
            let protocol_given = e.get("protocol").is_some_and(Value::is_string);
            protocol_given.then(|| (words.join(" "), u64_of(e.get("handshakes")).unwrap_or(0)))
        })
        .collect()
}

fn pairs_of(v: Option<&Value>) -> Vec<(String, String)> {
    let Some(Value::Object(m)) = v else {
        return Vec::new();
    };
    m.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect()
}

impl Summary {
    /// The whole-run counters rebuilt from interval lines, for a run without summary.json. The
    /// counters add up exactly (the lines partition the run); percentiles cannot be added, so
    /// the latency figures stay empty.
    pub fn from_intervals(intervals: &[Interval]) -> Summary {
        fn sum(intervals: &[Interval], f: impl Fn(&Interval) -> Option<u64>) -> Option<u64> {
            intervals
                .iter()
                .filter_map(f)
                .fold(None, |acc, v| Some(acc.unwrap_or(0) + v))
        }
        let mut errors = BTreeMap::new();
        let mut status = BTreeMap::new();
        let mut status_codes = BTreeMap::new();
        for iv in intervals {
            for (k, v) in &iv.errors {
                *errors.entry(k.clone()).or_insert(0) += v;
            }
            for (k, v) in &iv.status {
                *status.entry(k.clone()).or_insert(0) += v;
            }
            for (k, v) in iv.status_codes.iter().flatten() {
                *status_codes.entry(k.clone()).or_insert(0) += v;
            }
        }
        let duration_s = intervals
            .iter()
            .filter_map(Interval::t_end)
            .reduce(f64::max);
        let responses = sum(intervals, |i| i.responses);
        let errors_total = if errors.is_empty() {
            None
        } else {
            Some(errors.values().sum())
        };
        Summary {
            duration_s,
            requests: sum(intervals, |i| i.requests),
            responses,
            errors_total,
            errors,
            status,
            status_codes,
            users_started: sum(intervals, |i| i.users_started),
            users_finished: sum(intervals, |i| i.users_finished),
            throughput_rps: match (responses, duration_s) {
                (Some(r), Some(d)) if d > 0.0 => Some((r as f64 / d * 1000.0).round() / 1000.0),
                _ => None,
            },
            connects: sum(intervals, |i| i.connects),
            connections_peak: intervals.iter().filter_map(|i| i.connections_peak).max(),
            bytes_sent: sum(intervals, |i| i.bytes_sent),
            bytes_received: sum(intervals, |i| i.bytes_received),
            ..Summary::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_load_reads_as_words() {
        let w = |j: &str| super::load_words(&serde_json::from_str(j).unwrap()).unwrap();
        assert_eq!(
            w(r#"{"name":"closed","users":50,"per_user":null,"think":null}"#),
            "50 closed users, back to back"
        );
        assert_eq!(
            w(
                r#"{"name":"closed","users":2000,"per_user":10,"think":"Uniform { min: 10ms, max: 20ms }"}"#
            ),
            "2,000 closed users, 10 requests each, think time uniform 10ms to 20ms"
        );
        assert_eq!(
            w(r#"{"name":"rate","connections":10,"rate":1000.0}"#),
            "constant rate 1,000 requests/s over 10 connections"
        );
        assert_eq!(
            w(r#"{"name":"open","arrival_rate":2.5,"arrival":"constant","per_user":1,"think":"Exponential { mean: 1s }","max_users":100}"#),
            "evenly spaced arrivals, 2.5 users/s, 1 request each, think time exponential, mean 1s, at most 100 users"
        );
        assert_eq!(
            w(r#"{"name":"sessions","users":0,"phases":[
                {"duration_s":3.0,"from":3.0,"to":10.0,"arrival":"poisson","max_users":null},
                {"duration_s":5.0,"from":10.0,"to":10.0,"arrival":"constant","max_users":40}],
                "sessions":["browse","buy"]}"#),
            "Poisson arrivals, 3 → 10 users/s over 3 s; then evenly spaced arrivals, 10 users/s \
             over 5 s (at most 40 users), running session(s) browse, buy"
        );
        assert_eq!(
            w(r#"{"name":"sessions","users":4,"phases":[],"sessions":null}"#),
            "4 closed users"
        );
        // Issue 27: a ramp was invisible (`500 closed users, back to back`).
        assert_eq!(
            w(
                r#"{"name":"closed","users":500,"per_user":null,"think":null,
                "ramp":[{"duration_s":10.0,"users":500}]}"#
            ),
            "500 closed users ramped up over 10 s, back to back"
        );
        assert_eq!(
            w(
                r#"{"name":"closed","users":100,"per_user":null,"think":null,"ramp":[
                {"duration_s":10.0,"users":100},{"duration_s":30.0,"users":100},
                {"duration_s":10.0,"users":0}]}"#
            ),
            "100 closed users in stages: 0 → 100 over 10 s, 100 for 30 s, 100 → 0 over 10 s, \
             back to back"
        );
        assert_eq!(
            w(r#"{"name":"sessions","users":8,"phases":[
                {"duration_s":3.0,"from":1.0,"to":1.0,"arrival":"poisson","max_users":null}],
                "sessions":["s"],"ramp":[{"duration_s":2.5,"users":8}]}"#),
            "8 closed users ramped up over 2.5 s, beside Poisson arrivals, 1 users/s over 3 s, \
             running session(s) s"
        );
        // A kind this headroom does not know: its fields, never braces.
        assert_eq!(
            w(r#"{"name":"future","speed":3,"shape":"wave"}"#),
            "name future, shape wave, speed 3"
        );
    }

    use super::*;

    #[test]
    fn unknown_fields_ignored_and_missing_are_none() {
        let s = parse_summary(
            r#"{"requests": 5, "brand_new": [1,2], "threads": "two", "latency_us": {"p50": 7}}"#,
            Path::new("summary.json"),
        )
        .unwrap();
        assert_eq!(s.requests, Some(5));
        assert_eq!(s.threads, None, "a mistyped field is missing, not an error");
        assert_eq!(s.latency_us.p50, Some(7.0));
        assert_eq!(s.latency_us.p99, None);
        assert_eq!(s.responses, None);
    }

    #[test]
    fn bad_summary_names_file_and_line() {
        let e =
            parse_summary("{\n\"a\": 1,\n\"b\": }\n", Path::new("/x/summary.json")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("summary.json:3:"), "{text}");
    }

    #[test]
    fn torn_last_line_is_dropped() {
        let text = "{\"index\":0,\"t_s\":0,\"length_s\":1}\n{\"index\":1,\"t_s\":1,";
        let (ivs, torn) = parse_intervals(text, Path::new("intervals.jsonl")).unwrap();
        assert_eq!(ivs.len(), 1);
        assert_eq!(torn, Some(2));
        assert_eq!(ivs[0].t_end(), Some(1.0));
    }

    #[test]
    fn totals_from_intervals_add_up() {
        let text = "{\"t_s\":0,\"length_s\":1,\"responses\":10,\"errors\":{\"reset\":1}}\n\
                    {\"t_s\":1,\"length_s\":1,\"responses\":30,\"errors\":{\"reset\":2}}\n";
        let (ivs, _) = parse_intervals(text, Path::new("intervals.jsonl")).unwrap();
        let s = Summary::from_intervals(&ivs);
        assert_eq!(s.responses, Some(40));
        assert_eq!(s.errors.get("reset"), Some(&3));
        assert_eq!(s.errors_total, Some(3));
        assert_eq!(s.duration_s, Some(2.0));
        assert_eq!(s.throughput_rps, Some(20.0));
        assert_eq!(s.requests, None);
    }

    #[test]
    fn status_codes_of_summary_and_intervals() {
        let s = parse_summary(
            r#"{"status": {"2xx": 9, "4xx": 1}, "status_codes": {"200": 9, "404": 1},
                "expect_status": "200"}"#,
            Path::new("summary.json"),
        )
        .unwrap();
        assert_eq!(s.status_codes.get("404"), Some(&1));
        assert_eq!(s.expect_status.as_deref(), Some("200"));
        let text = "{\"status_codes\":{\"200\":3}}\n{\"status_codes\":{\"200\":4,\"503\":1}}\n\
                    {\"status\":{\"2xx\":1}}\n";
        let (ivs, _) = parse_intervals(text, Path::new("intervals.jsonl")).unwrap();
        assert_eq!(ivs[2].status_codes, None, "a line of an older headroom");
        let s = Summary::from_intervals(&ivs);
        assert_eq!(
            s.status_codes.into_iter().collect::<Vec<_>>(),
            [("200".to_string(), 7), ("503".to_string(), 1)]
        );
    }
}
