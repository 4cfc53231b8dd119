//! Reading a run directory into plain types.
//!
//! The files are read as the format's types, headroom-format's [`RunSummary`] and
//! [`IntervalLine`] (the types the run library writes them from), then mapped into the plain
//! types the charts and tables use. The format reads tolerantly: a field an older headroom did
//! not write is its default (0, empty), an unknown field (a newer headroom's) is ignored, and a
//! load model this headroom does not know is shown as such. Text that is not JSON, or a field of
//! the wrong type, is an error that names the file, line and column.
//!
//! The fields of [`Summary`] and [`Interval`] stay optional: a run killed before summary.json
//! has only what its intervals add up to ([`Summary::from_intervals`]), and the rest is "–".

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use headroom_format::{IntervalLatency, IntervalLine, Latency, Load, RunSummary, Stage};
use serde::Serialize;
use serde_json::Value;

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
    /// Why the server stopped scaling: the verdict's name and its sentence (`None` in files
    /// of earlier versions).
    pub why: Option<(String, String)>,
    /// Each reason the generator, not the server, was the limit (its self-check).
    pub generator_limits: Vec<String>,
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
    /// Responses by exact code, the codes seen only (empty in a line of a headroom that did not
    /// count them); `None` only for an interval that was not read from a line.
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
    /// Connections in its listener's accept queue at the sample, and those the kernel dropped
    /// at a full queue over the interval (the namespace's count); `None` in older files.
    pub accept_queue: Option<u64>,
    pub listen_overflows: Option<u64>,
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

/// Parses summary.json's text as the format's [`RunSummary`].
pub fn parse_summary(text: &str, path: &Path) -> Result<Summary, ReportError> {
    let s: RunSummary = serde_json::from_str(text).map_err(|e| json_error(path, 1, &e))?;
    Ok(summary_from(&s))
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
        match serde_json::from_str::<IntervalLine>(line) {
            Ok(l) => out.push(interval_from_line(&l, number)),
            // `split` yields a final piece after the last newline; only that piece can be torn.
            Err(e) if number == last && e.is_eof() => return Ok((out, Some(number))),
            Err(e) => return Err(json_error(path, number, &e)),
        }
    }
    Ok((out, None))
}

fn summary_from(s: &RunSummary) -> Summary {
    // A load model this headroom does not know (or none in the file) is unknown, shown as "–"
    // and never "different" from another run's. The parameters are listed by the names the
    // file gives them.
    let load = match s.load {
        Load::Other => Value::Null,
        _ => json_of(&s.load),
    };
    Summary {
        format_version: Some(u64::from(s.format_version)),
        headroom_version: Some(s.headroom_version.clone()),
        command: Some(s.command.clone()),
        target: Some(s.target.clone()),
        model: Some(s.model.clone()),
        load: pairs_of(Some(&load)),
        load_text: load_words(&s.load),
        environment: pairs_of(Some(&json_of(&s.environment))),
        threads: Some(s.threads),
        keepalive: Some(s.keepalive),
        pipeline: Some(u64::from(s.pipeline)),
        started_at: Some(s.started_at.clone()),
        duration_s: finite(s.duration_s),
        interrupted: Some(s.interrupted),
        stopped: s.stopped.clone(),
        requests: Some(s.requests),
        responses: Some(s.responses),
        in_flight: Some(s.in_flight),
        errors: counts(&s.errors),
        errors_total: Some(s.errors_total),
        error_rate: finite(s.error_rate),
        status: counts(&s.status),
        status_codes: codes(&s.status_codes),
        expect_status: s.expect_status.clone(),
        users_started: Some(s.users_started),
        users_finished: Some(s.users_finished),
        throughput_rps: finite(s.throughput_rps),
        latency_us: figures(&s.latency_us),
        latency_uncorrected_us: figures(&s.latency_uncorrected_us),
        connect_us: figures(&s.connect_us),
        tls_us: figures(&s.tls_us),
        tls: s.tls.as_ref().map(|t| TlsSummary {
            handshakes: Some(t.handshakes),
            resumed: Some(t.resumed),
            settings: pairs_of(Some(&json_of(t)))
                .into_iter()
                .filter(|(k, _)| {
                    !["handshakes", "resumed", "negotiated", "negotiated_other"]
                        .contains(&k.as_str())
                })
                .collect(),
            negotiated: t
                .negotiated
                .iter()
                .map(|n| (n.words(), n.handshakes))
                .collect(),
            negotiated_other: Some(t.negotiated_other),
        }),
        protocol: Some(s.protocol.clone()),
        streams: s.streams.map(u64::from),
        http2: s.http2.as_ref().map(counts).unwrap_or_default(),
        connects: Some(s.connects),
        connections_peak: Some(s.connections_peak),
        tcp_connected_peak: Some(s.tcp_connected_peak),
        served_us: figures(&s.served_us),
        idle_closed: Some(s.idle_closed),
        reconnects: Some(s.reconnects),
        bytes_sent: Some(s.bytes_sent),
        bytes_received: Some(s.bytes_received),
        cpu_user_s: finite(s.cpu_user_s),
        cpu_sys_s: finite(s.cpu_sys_s),
        max_rss_kb: Some(s.max_rss_kb),
        scenario: s.scenario.as_ref().map(|sc| {
            let names = |m: &BTreeMap<String, headroom_format::NameFigures>| -> Vec<NameStats> {
                m.iter()
                    .map(|(name, f)| NameStats {
                        name: name.clone(),
                        count: Some(f.count),
                        errors: Some(f.errors),
                        latency_us: figures(&f.latency_us),
                    })
                    .collect()
            };
            Scenario {
                by_request: names(&sc.by_request),
                by_transaction: names(&sc.by_transaction),
                matches: sc
                    .matches
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect(),
                sessions: pairs_of(Some(&json_of(&sc.sessions)))
                    .into_iter()
                    .filter(|(k, _)| k != "duration")
                    .collect(),
                session_length_us: figures(&sc.sessions.duration),
            }
        }),
        thresholds: s
            .thresholds
            .iter()
            .flatten()
            .map(|t| Threshold {
                threshold: t.threshold.clone(),
                condition: t.condition.clone(),
                value: t.value.and_then(finite),
                unit: json_of(&t.unit).as_str().map(str::to_string),
                ok: Some(t.ok),
            })
            .collect(),
        thresholds_ok: s.thresholds_ok,
        why: s.verdict.as_ref().map(|v| (v.name.clone(), v.says.clone())),
        generator_limits: s.generator.limits.clone(),
    }
}

/// A section of the format as JSON, keys sorted: the report lists some sections by the names
/// the file gives their members (errors by kind, TLS settings, the load's parameters), so a
/// member added to the format shows up without a change here.
fn json_of<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("the format's types are plain data")
}

/// A counter section (every member a count) by member name.
fn counts<T: Serialize>(t: &T) -> BTreeMap<String, u64> {
    counts_of(Some(&json_of(t)))
}

/// Responses by exact code, the code as text (`"404"`), as the file's keys read.
fn codes(m: &BTreeMap<u16, u64>) -> BTreeMap<String, u64> {
    m.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn figures(l: &Latency) -> Figures {
    Figures {
        count: Some(l.count),
        mean: finite(l.mean),
        stdev: finite(l.stdev),
        min: Some(l.min as f64),
        p50: Some(l.p50 as f64),
        p90: Some(l.p90 as f64),
        p99: Some(l.p99 as f64),
        p999: Some(l.p999 as f64),
        max: Some(l.max as f64),
    }
}

/// An interval line's figures: `count`, `stdev`, `min` and `p999` exist in summary.json only.
fn interval_figures(l: &IntervalLatency) -> Figures {
    Figures {
        mean: finite(l.mean),
        p50: Some(l.p50 as f64),
        p90: Some(l.p90 as f64),
        p99: Some(l.p99 as f64),
        max: Some(l.max as f64),
        ..Figures::default()
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
fn arrivals(v: &str) -> String {
    match v {
        "poisson" | "" => "Poisson arrivals".to_string(),
        "constant" => "evenly spaced arrivals".to_string(),
        other => format!("{other} arrivals"),
    }
}

/// How a closed population came and went (`load.ramp`), to follow "N closed users":
/// " ramped up over 10 s" (one stage: `--ramp-up`), or every stage (`--stage`,
/// `load.stages`): " in stages: 0 → 100 over 10 s, 100 for 30 s, 100 → 0 over 10 s". Empty
/// without a ramp (every user at once, or a summary from before issue 27).
fn ramp_words(ramp: &[Stage]) -> String {
    let secs = |d: f64| format!("{} s", plain(d));
    match ramp {
        [] => String::new(),
        [s] => format!(" ramped up over {}", secs(s.duration_s)),
        _ => {
            let mut from = 0;
            let steps: Vec<String> = ramp
                .iter()
                .map(|s| {
                    let to = s.users;
                    let t = if from == to {
                        format!("{} for {}", plain(to.into()), secs(s.duration_s))
                    } else {
                        format!(
                            "{} → {} over {}",
                            plain(from.into()),
                            plain(to.into()),
                            secs(s.duration_s)
                        )
                    };
                    from = to;
                    t
                })
                .collect();
            format!(" in stages: {}", steps.join(", "))
        }
    }
}

/// summary.json's `load` in words, for the report: "50 closed users, back to back", "500
/// closed users ramped up over 10 s, back to back", "constant rate 1,000 requests/s over 10
/// connections", "Poisson arrivals, 3 → 10 users/s over 3 s". `None` for a load model this
/// headroom does not know ([`Load::Other`]).
pub fn load_words(load: &Load) -> Option<String> {
    let think = |t: &Option<String>| {
        t.as_deref()
            .map(|t| format!(", think time {}", think_words(t)))
            .unwrap_or_default()
    };
    let text = match load {
        Load::Closed {
            users,
            per_user,
            think: t,
            ramp,
        } => {
            let each = match per_user {
                Some(n) => format!(", {} each", count_of(*n as f64, "request")),
                None => ", back to back".to_string(),
            };
            format!(
                "{} closed users{}{each}{}",
                plain((*users).into()),
                ramp_words(ramp),
                think(t)
            )
        }
        Load::Rate { connections, rate } => format!(
            "constant rate {} requests/s over {} connections",
            plain(*rate),
            plain((*connections).into())
        ),
        Load::Open {
            arrival_rate,
            arrival,
            per_user,
            think: t,
            max_users,
        } => {
            let mut text = format!(
                "{}, {} users/s, {} each{}",
                arrivals(arrival),
                plain(*arrival_rate),
                count_of(*per_user as f64, "request"),
                think(t)
            );
            if let Some(m) = max_users {
                text.push_str(&format!(", at most {} users", plain(*m as f64)));
            }
            text
        }
        Load::Sessions {
            users,
            phases,
            sessions,
            ramp,
        } => {
            let parts: Vec<String> = phases
                .iter()
                .map(|p| {
                    let rate = if p.from != p.to {
                        format!("{} → {}", plain(p.from), plain(p.to))
                    } else {
                        plain(p.from)
                    };
                    let mut t = format!(
                        "{}, {rate} users/s over {} s",
                        arrivals(&p.arrival),
                        plain(p.duration_s)
                    );
                    if let Some(m) = p.max_users {
                        t.push_str(&format!(" (at most {} users)", plain(m as f64)));
                    }
                    t
                })
                .collect();
            // Closed users run beside the phases, which follow one another.
            let users = (*users > 0).then(|| {
                format!(
                    "{} closed users{}",
                    plain((*users).into()),
                    ramp_words(ramp)
                )
            });
            let phases = (!parts.is_empty()).then(|| parts.join("; then "));
            let mut t = match (users, phases) {
                (Some(u), Some(p)) => format!("{u}, beside {p}"),
                (Some(u), None) => u,
                (None, Some(p)) => p,
                (None, None) => "no users".to_string(),
            };
            if let Some(names) = sessions.as_ref().filter(|n| !n.is_empty()) {
                t.push_str(&format!(", running session(s) {}", names.join(", ")));
            }
            t
        }
        Load::Other => return None,
    };
    Some(text)
}

/// One interval line (as `headroom run` writes it to intervals.jsonl and pushes it to the live
/// page), numbered `line`.
pub fn interval_from_line(l: &IntervalLine, line: usize) -> Interval {
    Interval {
        line,
        index: Some(l.index),
        t_s: finite(l.t_s),
        length_s: finite(l.length_s),
        requests: Some(l.requests),
        responses: Some(l.responses),
        rps: finite(l.rps),
        errors: counts(&l.errors),
        status: counts(&l.status),
        status_codes: Some(codes(&l.status_codes)),
        latency_us: interval_figures(&l.latency_us),
        latency_uncorrected_us: interval_figures(&l.latency_uncorrected_us),
        connect_us: interval_figures(&l.connect_us),
        tls_us: interval_figures(&l.tls_us),
        connects: Some(l.connects),
        disconnects: Some(l.disconnects),
        connections_open: Some(l.connections_open),
        connections_peak: Some(l.connections_peak),
        users_active: Some(l.users_active),
        users_started: Some(l.users_started),
        users_finished: Some(l.users_finished),
        bytes_sent: Some(l.bytes_sent),
        bytes_received: Some(l.bytes_received),
        server: l.server.as_ref().map(|m| ServerSample {
            cpu_user_pct: finite(m.cpu_user_pct),
            cpu_sys_pct: finite(m.cpu_sys_pct),
            rss_bytes: Some(m.rss_bytes),
            threads: Some(m.threads),
            fds: Some(m.fds),
            accept_queue: Some(m.accept_queue),
            listen_overflows: Some(m.listen_overflows),
        }),
    }
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

/// An object's members as (key, value text); nulls are left out, strings shown bare, anything
/// else as compact JSON.
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
        // Each as summary.json holds it, read as the format's type.
        let load = |j: &str| serde_json::from_str::<headroom_format::Load>(j).unwrap();
        let w = |j: &str| super::load_words(&load(j)).unwrap();
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
        // A kind this headroom does not know: unknown, not a guess.
        let future = r#"{"name":"future","speed":3,"shape":"wave"}"#;
        assert_eq!(load(future), headroom_format::Load::Other);
        assert_eq!(super::load_words(&load(future)), None);
    }

    use super::*;

    #[test]
    fn unknown_fields_ignored_missing_are_defaults_and_a_wrong_type_is_an_error() {
        let s = parse_summary(
            r#"{"requests": 5, "brand_new": [1,2], "latency_us": {"p50": 7}}"#,
            Path::new("summary.json"),
        )
        .unwrap();
        assert_eq!(s.requests, Some(5));
        assert_eq!(s.latency_us.p50, Some(7.0));
        // A key an older headroom did not write reads as the format's default.
        assert_eq!(s.latency_us.p99, Some(0.0));
        assert_eq!(s.responses, Some(0));
        let e = parse_summary(
            r#"{"requests": 5, "threads": "two"}"#,
            Path::new("/x/summary.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("summary.json:1:") && e.contains("expected u64"),
            "{e}"
        );
    }

    /// Issue 28: the report reads what the run library writes, through the same type. A
    /// summary with every section filled, serialized as the writer does (a JSON value, keys
    /// sorted), reads back into the figures it was made of.
    #[test]
    fn a_summary_written_by_this_code_reads_back_equal() {
        use headroom_format as f;
        let lat = |p99: u64| f::Latency {
            count: 1000,
            mean: 812.5,
            stdev: 40.25,
            min: 100,
            p50: 800,
            p90: 900,
            p99,
            p999: 2000,
            max: 3000,
        };
        let mut by_request = BTreeMap::new();
        by_request.insert(
            "home".to_string(),
            f::NameFigures {
                count: 7,
                errors: 1,
                latency_us: lat(950),
            },
        );
        let written = f::RunSummary {
            format_version: f::FORMAT_VERSION,
            headroom_version: "9.9.9".into(),
            command: "headroom run x".into(),
            target: "https://h/".into(),
            model: "closed".into(),
            load: f::Load::Closed {
                users: 50,
                per_user: None,
                think: None,
                ramp: vec![f::Stage {
                    duration_s: 10.0,
                    users: 50,
                }],
            },
            threads: 2,
            keepalive: true,
            pipeline: 1,
            protocol: "h2".into(),
            streams: Some(8),
            http2: Some(f::Http2Section {
                goaway: 1,
                rst_cancel: 3,
                ..Default::default()
            }),
            tls: Some(f::TlsSection {
                server_name: "h".into(),
                min_version: "1.2".into(),
                max_version: "1.3".into(),
                alpn: vec!["h2".into()],
                handshakes: 4,
                resumed: 1,
                negotiated: vec![f::NegotiatedFigures {
                    protocol: "TLSv1.3".into(),
                    cipher_suite: "TLS_AES_128_GCM_SHA256".into(),
                    key_exchange: Some("X25519".into()),
                    alpn: Some("h2".into()),
                    http: Some("HTTP/2".into()),
                    handshakes: 4,
                }],
                ..Default::default()
            }),
            started_at: "2026-11-28T06:00:00.000Z".into(),
            duration_s: 2.5,
            requests: 1010,
            responses: 1000,
            errors: f::Errors {
                reset: 3,
                ..Default::default()
            },
            errors_total: 3,
            error_rate: 0.002997,
            status: f::StatusClasses {
                s2xx: 990,
                s4xx: 10,
                ..Default::default()
            },
            status_codes: [(200, 990), (404, 10)].into_iter().collect(),
            expect_status: Some("200".into()),
            throughput_rps: 400.0,
            latency_us: lat(1200),
            tls_us: lat(5000),
            served_us: lat(90),
            tcp_connected_peak: 51,
            environment: f::Environment {
                cores: Some(2),
                ..Default::default()
            },
            scenario: Some(f::ScenarioSection {
                by_request,
                ..Default::default()
            }),
            thresholds: Some(vec![f::Checked {
                threshold: "p99".into(),
                condition: "< 1s".into(),
                value: Some(1200.0),
                unit: f::Unit::Micros,
                ok: true,
            }]),
            thresholds_ok: Some(true),
            ..Default::default()
        };
        let text = serde_json::to_string_pretty(&serde_json::to_value(&written).unwrap()).unwrap();
        let s = parse_summary(&text, Path::new("summary.json")).unwrap();
        assert_eq!(
            s,
            summary_from(&written),
            "the file reads as the type it was written from"
        );
        assert_eq!(s.format_version, Some(1));
        assert_eq!(s.responses, Some(1000));
        assert_eq!(s.status_codes.get("404"), Some(&10));
        assert_eq!(s.errors.get("reset"), Some(&3));
        assert_eq!(s.errors.len(), 25, "every kind, zeros included");
        assert_eq!(s.latency_us.p99, Some(1200.0));
        assert_eq!(s.latency_us.count, Some(1000));
        assert_eq!(s.served_us.p99, Some(90.0));
        assert_eq!(s.tcp_connected_peak, Some(51));
        assert_eq!(s.streams, Some(8));
        assert_eq!(s.http2.get("rst_cancel"), Some(&3));
        assert_eq!(
            s.load_text.as_deref(),
            Some("50 closed users ramped up over 10 s, back to back")
        );
        assert!(s
            .environment
            .contains(&("cores".to_string(), "2".to_string())));
        let tls = s.tls.as_ref().unwrap();
        assert_eq!(
            tls.negotiated,
            [(
                "TLSv1.3 TLS_AES_128_GCM_SHA256 X25519 h2 HTTP/2".to_string(),
                4
            )]
        );
        assert!(tls
            .settings
            .contains(&("alpn".to_string(), "[\"h2\"]".to_string())));
        let sc = s.scenario.as_ref().unwrap();
        assert_eq!(sc.by_request[0].name, "home");
        assert_eq!(sc.by_request[0].latency_us.p99, Some(950.0));
        assert_eq!(s.thresholds[0].unit.as_deref(), Some("us"));
        assert_eq!(s.thresholds_ok, Some(true));
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
        // Lines without `requests` (an older headroom's, or cut down by hand) count none.
        assert_eq!(s.requests, Some(0));
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
        assert_eq!(
            ivs[2].status_codes,
            Some(BTreeMap::new()),
            "a line of an older headroom"
        );
        let s = Summary::from_intervals(&ivs);
        assert_eq!(
            s.status_codes.into_iter().collect::<Vec<_>>(),
            [("200".to_string(), 7), ("503".to_string(), 1)]
        );
    }
}
