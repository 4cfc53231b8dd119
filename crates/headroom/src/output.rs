//! Everything a run writes: the run directory (as the run goes), summary.json, the human
//! summary and the live progress line. The field names here are the ones documented in
//! `docs/summary-json.md`; change both together.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use headroom_core::{ErrorKind, LoadModel, Plan};
use headroom_engine::{Interval, RunOutcome};
use headroom_metrics::hlog::HlogWriter;
use headroom_metrics::{Counters, LatencyStats, Recorder};

/// Version of the summary.json / intervals.jsonl layout.
pub const FORMAT_VERSION: u32 = 1;

/// Failures by kind, every kind always present.
fn errors_map(c: &Counters) -> serde_json::Map<String, serde_json::Value> {
    ErrorKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), c.errors[k.index()].into()))
        .collect()
}

fn status_map(c: &Counters) -> serde_json::Map<String, serde_json::Value> {
    let names = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"];
    names
        .iter()
        .zip(c.status.iter())
        .map(|(n, v)| (n.to_string(), (*v).into()))
        .collect()
}

/// Responses by exact code, the codes seen only (`{"200": 995, "404": 5}`), ascending.
fn status_codes_map(c: &Counters) -> serde_json::Map<String, serde_json::Value> {
    c.codes_seen()
        .map(|(code, n)| (code.to_string(), n.into()))
        .collect()
}

/// Failed attempts over attempts: (errors) / (responses + failures that produced no response).
pub fn error_rate(c: &Counters) -> f64 {
    // The failures that are complete responses: counted once, as responses.
    let http = c.errors[ErrorKind::Http4xx.index()]
        + c.errors[ErrorKind::Http5xx.index()]
        + c.errors[ErrorKind::UnexpectedStatus.index()]
        + c.errors[ErrorKind::RedirectLimit.index()]
        + c.errors[ErrorKind::BadLocation.index()]
        + c.errors[ErrorKind::RedirectOffsite.index()];
    let attempts = c.responses + (c.errors_total() - http);
    if attempts == 0 {
        0.0
    } else {
        c.errors_total() as f64 / attempts as f64
    }
}

/// The generator's own resource use (getrusage of this process).
pub struct SelfUsage {
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub max_rss_kb: u64,
}

pub fn self_usage() -> SelfUsage {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    SelfUsage {
        cpu_user_s: tv(ru.ru_utime),
        cpu_sys_s: tv(ru.ru_stime),
        max_rss_kb: ru.ru_maxrss.max(0) as u64,
    }
}

fn model_details(plan: &Plan) -> serde_json::Value {
    use serde_json::json;
    match &plan.model {
        LoadModel::Closed {
            users,
            per_user,
            think,
        } => json!({
            "name": "closed", "users": users, "per_user": per_user,
            "think": think.map(|d| format!("{d:?}")),
        }),
        LoadModel::Rate { connections, rate } => json!({
            "name": "rate", "connections": connections, "rate": rate,
        }),
        LoadModel::Open {
            rate,
            process,
            per_user,
            think,
            max_users,
        } => json!({
            "name": "open", "arrival_rate": rate, "arrival": process, "per_user": per_user,
            "think": think.map(|d| format!("{d:?}")), "max_users": max_users,
        }),
        LoadModel::Sessions { users, phases } => json!({
            "name": "sessions", "users": users,
            "phases": phases.iter().map(|p| json!({
                "duration_s": p.duration.as_secs_f64(), "from": p.from, "to": p.to,
                "arrival": p.process, "max_users": p.max_users,
            })).collect::<Vec<_>>(),
            "sessions": plan.workload.as_ref().map(|w| w.sessions.iter().map(|s| s.name.clone()).collect::<Vec<_>>()),
        }),
    }
}

/// The application protocol a run spoke, as summary.json says it: `http/1.1`, `h2` (HTTP/2 over
/// TLS) or `h2c` for URL runs, or the scenario's (`xmpp`, `pgsql`, `websocket`, `http/1.1`).
pub fn protocol_name(plan: &Plan) -> &'static str {
    use headroom_core::session::LinkSpec;
    if plan.http2.is_some() {
        return if plan.tls.is_some() { "h2" } else { "h2c" };
    }
    match plan.workload.as_deref().map(|w| &w.link) {
        Some(LinkSpec::Xmpp(_)) => "xmpp",
        Some(LinkSpec::Pgsql(_)) => "pgsql",
        Some(LinkSpec::WebSocket(_)) => "websocket",
        _ => "http/1.1",
    }
}

/// HTTP/2 frames that matter (GOAWAY, RST_STREAM by code, connection errors); `null` for an
/// HTTP/1.1 run.
fn http2_json(plan: &Plan, c: &headroom_metrics::Counters) -> serde_json::Value {
    use headroom_core::ProtoCounter;
    if plan.http2.is_none() {
        return serde_json::Value::Null;
    }
    let m: serde_json::Map<String, serde_json::Value> = ProtoCounter::ALL
        .iter()
        .filter(|k| k.name().0 == "http2")
        .map(|k| {
            (
                k.name().1.to_string(),
                serde_json::json!(c.proto[k.index()]),
            )
        })
        .collect();
    serde_json::Value::Object(m)
}

/// What users did besides their requests (cookies, redirects, auth; every counter, zeros
/// included) and how they were told to behave; `null` for HTTP/2 runs, where none applies.
fn http_json(plan: &Plan, c: &headroom_metrics::Counters) -> serde_json::Value {
    use headroom_core::ProtoCounter;
    if plan.http2.is_some() {
        return serde_json::Value::Null;
    }
    let mut m: serde_json::Map<String, serde_json::Value> = ProtoCounter::ALL
        .iter()
        .filter(|k| k.name().0 == "http")
        .map(|k| {
            (
                k.name().1.to_string(),
                serde_json::json!(c.proto[k.index()]),
            )
        })
        .collect();
    m.insert("cookies".into(), plan.agent.cookies.into());
    m.insert("follow".into(), plan.agent.follow.into());
    m.insert("compressed".into(), plan.agent.compressed.into());
    m.insert(
        "auth".into(),
        plan.agent
            .credentials
            .as_ref()
            .map(|c| c.scheme.as_str())
            .into(),
    );
    serde_json::Value::Object(m)
}

/// One line of what users did besides their requests, when they did anything.
fn http_line(c: &headroom_metrics::Counters) -> Option<String> {
    use headroom_core::ProtoCounter as P;
    let mut parts: Vec<String> = [
        (P::HttpRedirects, "redirects followed"),
        (P::HttpCookiesStored, "cookies stored"),
        (P::HttpCookiesMalformed, "malformed Set-Cookie"),
        (P::HttpCookiesRejected, "cookies rejected"),
        (P::HttpCookiesEvicted, "cookies evicted"),
        (P::HttpAuthChallenges, "auth challenges answered"),
        (P::HttpAuthFailed, "auth failed"),
    ]
    .iter()
    .filter(|(k, _)| c.proto[k.index()] > 0)
    .map(|(k, what)| format!("{} {what}", thousands(c.proto[k.index()])))
    .collect();
    let compressed = c.proto[P::HttpCompressedResponses.index()];
    if compressed > 0 {
        // Bodies as sent and as decoded: the ratio is what compression saved on the wire.
        let enc = c.proto[P::HttpBodyBytesEncoded.index()];
        let dec = c.proto[P::HttpBodyBytesDecoded.index()];
        let ratio = if enc > 0 {
            dec as f64 / enc as f64
        } else {
            0.0
        };
        parts.push(format!(
            "{} compressed responses ({} sent, {} decoded, {ratio:.1}x)",
            thousands(compressed),
            fmt_bytes(enc as f64),
            fmt_bytes(dec as f64),
        ));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The run's TLS settings and handshake counts; `null` for a plain run.
fn tls_json(plan: &Plan, c: &headroom_metrics::Counters) -> serde_json::Value {
    use headroom_core::ProtoCounter;
    let Some(t) = &plan.tls else {
        return serde_json::Value::Null;
    };
    serde_json::json!({
        "server_name": t.server_name,
        "min_version": t.min_version,
        "max_version": t.max_version,
        "alpn": t.alpn.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect::<Vec<_>>(),
        "insecure": t.insecure,
        "ca": if t.ca_pem.is_some() { "file" } else { "system" },
        "client_certificate": t.client_cert_pem.is_some(),
        "resume": t.resume,
        "handshakes": c.proto[ProtoCounter::TlsHandshakes.index()],
        "resumed": c.proto[ProtoCounter::TlsResumed.index()],
    })
}

/// summary.json as a JSON value.
pub fn summary_json(
    plan: &Plan,
    out: &RunOutcome,
    usage: &SelfUsage,
    command: &str,
) -> serde_json::Value {
    use serde_json::json;
    let t = &out.total;
    let c = &t.counters;
    let secs = out.elapsed.as_secs_f64().max(1e-9);
    let mut summary = json!({
        "format_version": FORMAT_VERSION,
        "headroom_version": env!("CARGO_PKG_VERSION"),
        "command": command,
        "target": plan.target_name,
        "model": plan.model.name(),
        "load": model_details(plan),
        "threads": plan.threads,
        "keepalive": plan.keepalive,
        "pipeline": plan.pipeline,
        "protocol": protocol_name(plan),
        "streams": plan.http2.map(|h| h.streams),
        "http2": http2_json(plan, c),
        "http": http_json(plan, c),
        "tls": tls_json(plan, c),
        "started_at": humantime::format_rfc3339_millis(out.started_at).to_string(),
        "duration_s": round3(secs),
        "interrupted": out.interrupted,
        "requests": c.requests,
        "responses": c.responses,
        "in_flight": out.in_flight,
        "errors": errors_map(c),
        "errors_total": c.errors_total(),
        "error_rate": round6(error_rate(c)),
        "status": status_map(c),
        "status_codes": status_codes_map(c),
        "expect_status": (!plan.expect_status.is_empty()).then(|| plan.expect_status.to_string()),
        "users_started": c.users_started,
        "users_finished": c.users_finished,
        "throughput_rps": round3(c.responses as f64 / secs),
        "latency_us": LatencyStats::of(&t.latency),
        "latency_uncorrected_us": LatencyStats::of(&t.latency_uncorrected),
        "connect_us": LatencyStats::of(&t.connect),
        "tls_us": LatencyStats::of(&t.tls),
        "connects": c.connects,
        "connections_peak": out.connections_peak,
        "bytes_sent": c.bytes_sent,
        "bytes_received": c.bytes_received,
        "cpu_user_s": round3(usage.cpu_user_s),
        "cpu_sys_s": round3(usage.cpu_sys_s),
        "max_rss_kb": usage.max_rss_kb,
        "environment": environment(),
    });
    if let (Some(extra), Some(obj)) = (
        crate::scenario::summary_sections(plan, t),
        summary.as_object_mut(),
    ) {
        obj.insert("scenario".into(), extra);
    }
    summary
}

/// Where the run ran: kernel, OS, CPU model and count, memory, host name (read from /proc and
/// /etc; a value that cannot be read is left out).
pub fn environment() -> serde_json::Value {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let mut env = serde_json::Map::new();
    let mut put = |k: &str, v: Option<serde_json::Value>| {
        if let Some(v) = v {
            env.insert(k.to_string(), v);
        }
    };
    put(
        "hostname",
        read("/proc/sys/kernel/hostname").map(Into::into),
    );
    put(
        "kernel",
        read("/proc/sys/kernel/osrelease").map(|r| {
            format!(
                "{} {r}",
                read("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into())
            )
            .into()
        }),
    );
    put(
        "os",
        read("/etc/os-release").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string().into())
        }),
    );
    put(
        "cpu",
        read("/proc/cpuinfo").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string().into())
        }),
    );
    put(
        "cores",
        std::thread::available_parallelism()
            .ok()
            .map(|n| n.get().into()),
    );
    put(
        "memory_bytes",
        read("/proc/meminfo").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| (kb * 1024).into())
        }),
    );
    serde_json::Value::Object(env)
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// One line of intervals.jsonl.
pub fn interval_json(
    iv: &Interval<'_>,
    plan: &Plan,
    server: Option<&headroom_monitor::Sample>,
) -> serde_json::Value {
    use serde_json::json;
    let r = iv.merged;
    let c = &r.counters;
    let len = iv.length.as_secs_f64().max(1e-9);
    let lat = |h| {
        let s = LatencyStats::of(h);
        json!({"mean": s.mean, "p50": s.p50, "p90": s.p90, "p99": s.p99, "max": s.max})
    };
    let mut line = json!({
        "index": iv.index,
        "t_s": round3(iv.start.as_secs_f64()),
        "length_s": round3(iv.length.as_secs_f64()),
        "requests": c.requests,
        "responses": c.responses,
        "rps": round3(c.responses as f64 / len),
        "errors": errors_map(c),
        "status": status_map(c),
        "status_codes": status_codes_map(c),
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
    if let (Some(extra), Some(obj)) = (
        crate::scenario::interval_sections(plan, r),
        line.as_object_mut(),
    ) {
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

/// Derived files of a finished run directory: intervals.csv always, report.html when `report`
/// (returns its path). Both are made from the files on disk, as `headroom report` would.
pub fn finish_run_dir(dir: &Path, report: bool) -> anyhow::Result<Option<PathBuf>> {
    let data = headroom_report::load_run(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let csv = dir.join("intervals.csv");
    std::fs::write(
        &csv,
        headroom_report::export::intervals_csv(&data.intervals),
    )
    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", csv.display()))?;
    if !report {
        return Ok(None);
    }
    let page = dir.join("report.html");
    std::fs::write(&page, headroom_report::render(&data))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", page.display()))?;
    Ok(Some(page))
}

/// A run directory being written: intervals.jsonl and latency.hlog grow (and are flushed) each
/// interval; summary.json is written at the end.
pub struct RunDir {
    pub path: PathBuf,
    intervals: BufWriter<File>,
    hlog: HlogWriter<BufWriter<File>>,
}

impl RunDir {
    pub fn create(path: &Path, started: SystemTime, command: &str) -> std::io::Result<RunDir> {
        std::fs::create_dir_all(path)?;
        let intervals = BufWriter::new(File::create(path.join("intervals.jsonl"))?);
        let hlog = HlogWriter::new(
            BufWriter::new(File::create(path.join("latency.hlog"))?),
            started,
            &format!("headroom {} — {command}\nlatency in microseconds; untagged = corrected, Tag=uncorrected, Tag=connect, Tag=tls", env!("CARGO_PKG_VERSION")),
        )?;
        Ok(RunDir {
            path: path.to_path_buf(),
            intervals,
            hlog,
        })
    }

    /// Append one interval: its line (from [`interval_json`]) and its histograms.
    pub fn interval(&mut self, iv: &Interval<'_>, line: &serde_json::Value) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.intervals, line)?;
        self.intervals.write_all(b"\n")?;
        self.intervals.flush()?;
        let r: &Recorder = iv.merged;
        self.hlog.write(None, iv.start, iv.length, &r.latency)?;
        self.hlog.write(
            Some("uncorrected"),
            iv.start,
            iv.length,
            &r.latency_uncorrected,
        )?;
        if !r.connect.is_empty() {
            self.hlog
                .write(Some("connect"), iv.start, iv.length, &r.connect)?;
        }
        if !r.tls.is_empty() {
            self.hlog.write(Some("tls"), iv.start, iv.length, &r.tls)?;
        }
        Ok(())
    }

    pub fn write_summary(&self, summary: &serde_json::Value) -> std::io::Result<()> {
        let tmp = self.path.join("summary.json.tmp");
        let mut f = File::create(&tmp)?;
        serde_json::to_writer_pretty(&mut f, summary)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(tmp, self.path.join("summary.json"))
    }
}

/// Live progress on stderr: one rewritten line on a terminal, one plain line per interval
/// otherwise (so logs and CI output stay readable).
pub struct Progress {
    tty: bool,
    total: Option<Duration>,
    responses: u64,
    errors: u64,
}

impl Progress {
    pub fn new(total: Option<Duration>) -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            total,
            responses: 0,
            errors: 0,
        }
    }

    pub fn interval(&mut self, iv: &Interval<'_>) {
        let c = &iv.merged.counters;
        self.responses += c.responses;
        self.errors += c.errors_total();
        let elapsed = iv.start + iv.length;
        let clock = match self.total {
            Some(t) => format!("{:>6.1}s/{:.0}s", elapsed.as_secs_f64(), t.as_secs_f64()),
            None => format!("{:>6.1}s", elapsed.as_secs_f64()),
        };
        let rps = c.responses as f64 / iv.length.as_secs_f64().max(1e-9);
        let p99 = if iv.merged.latency.is_empty() {
            0
        } else {
            iv.merged.latency.value_at_quantile(0.99)
        };
        let line = format!(
            "[{clock}] users {:>6}  conns {:>6}  {:>10} req/s  p99 {:>8}  responses {:>10}  errors {}",
            c.users_active,
            c.connections_open,
            thousands(rps.round() as u64),
            fmt_us(p99),
            thousands(self.responses),
            thousands(self.errors),
        );
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[K{line}");
        } else {
            let _ = writeln!(e, "{line}");
        }
        let _ = e.flush();
    }

    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// 1234567 -> "1,234,567".
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Microseconds as a short human figure: 850µs, 1.25ms, 3.40s.
pub fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

fn fmt_bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

fn lat_line(s: &LatencyStats) -> String {
    if s.count == 0 {
        return "no samples".into();
    }
    format!(
        "mean {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        fmt_us(s.mean.round() as u64),
        fmt_us(s.p50),
        fmt_us(s.p90),
        fmt_us(s.p99),
        fmt_us(s.p999),
        fmt_us(s.max)
    )
}

/// The human summary, like wrk's.
pub fn human_summary(plan: &Plan, out: &RunOutcome, usage: &SelfUsage) -> String {
    let t = &out.total;
    let c = &t.counters;
    let secs = out.elapsed.as_secs_f64().max(1e-9);
    let model = match &plan.model {
        LoadModel::Closed {
            users,
            per_user: Some(n),
            ..
        } => format!("closed model, {users} users x {n} requests"),
        LoadModel::Closed { users, .. } => format!("closed model, {users} users"),
        LoadModel::Rate { connections, rate } => {
            format!("constant rate {rate} req/s over {connections} connections")
        }
        LoadModel::Open {
            rate,
            process,
            per_user,
            ..
        } => {
            format!("open model, {rate} users/s ({process:?}), {per_user} requests each")
        }
        LoadModel::Sessions { users, phases } => {
            let mut parts = Vec::new();
            if *users > 0 {
                parts.push(format!("{users} closed users"));
            }
            if !phases.is_empty() {
                parts.push(format!("{} arrival phase(s)", phases.len()));
            }
            format!("sessions, {}", parts.join(" + "))
        }
    };
    let model = match plan.http2 {
        Some(h) => format!(
            "{}, {model} x {} stream(s)",
            protocol_name(plan).to_uppercase(),
            h.streams
        ),
        None => model,
    };
    let mut s = String::new();
    let w = &mut s;
    use std::fmt::Write as _;
    let _ = writeln!(
        w,
        "{} — {model}, {} thread(s), {:.1}s{}",
        plan.target_name,
        plan.threads,
        secs,
        if out.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        w,
        "  Requests     {} sent, {} answered{}",
        thousands(c.requests),
        thousands(c.responses),
        if out.in_flight > 0 {
            format!(", {} in flight at stop", thousands(out.in_flight))
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        w,
        "  Throughput   {} req/s, {}/s in, {}/s out",
        thousands((c.responses as f64 / secs).round() as u64),
        fmt_bytes(c.bytes_received as f64 / secs),
        fmt_bytes(c.bytes_sent as f64 / secs)
    );
    let _ = writeln!(
        w,
        "  Latency      {}",
        lat_line(&LatencyStats::of(&t.latency))
    );
    let _ = writeln!(
        w,
        "  uncorrected  {}",
        lat_line(&LatencyStats::of(&t.latency_uncorrected))
    );
    let _ = writeln!(
        w,
        "  Connect      {}  ({} connects)",
        lat_line(&LatencyStats::of(&t.connect)),
        thousands(c.connects)
    );
    if !t.tls.is_empty() {
        use headroom_core::ProtoCounter;
        let resumed = c.proto[ProtoCounter::TlsResumed.index()];
        let _ = writeln!(
            w,
            "  TLS          {}  ({} handshakes, {} resumed)",
            lat_line(&LatencyStats::of(&t.tls)),
            thousands(c.proto[ProtoCounter::TlsHandshakes.index()]),
            thousands(resumed)
        );
    }
    let classes: Vec<String> = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"]
        .iter()
        .zip(c.status.iter())
        .filter(|(_, v)| **v > 0)
        .map(|(n, v)| format!("{n} {}", thousands(*v)))
        .collect();
    let _ = writeln!(
        w,
        "  Status       {}{}",
        if classes.is_empty() {
            "none".into()
        } else {
            classes.join(", ")
        },
        if plan.expect_status.is_empty() {
            String::new()
        } else {
            format!("  (expected: {})", plan.expect_status)
        }
    );
    // One line per exact code seen, as hey prints them.
    for (code, n) in c.codes_seen() {
        let _ = writeln!(w, "    [{code}]      {} responses", thousands(n));
    }
    if let Some(line) = http_line(c) {
        let _ = writeln!(w, "  Users        {line}");
    }
    let errs: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| c.errors[k.index()] > 0)
        .map(|k| format!("{} {}", k.name(), thousands(c.errors[k.index()])))
        .collect();
    let _ = writeln!(
        w,
        "  Errors       {}",
        if errs.is_empty() {
            "none".into()
        } else {
            format!(
                "{} ({:.2}%): {}",
                thousands(c.errors_total()),
                100.0 * error_rate(c),
                errs.join(", ")
            )
        }
    );
    let _ = writeln!(
        w,
        "  Connections  peak {}, users started {}, finished {}",
        thousands(out.connections_peak),
        thousands(c.users_started),
        thousands(c.users_finished)
    );
    let cpu = usage.cpu_user_s + usage.cpu_sys_s;
    let _ = writeln!(
        w,
        "  Generator    CPU {:.2}s user + {:.2}s sys ({:.0} req per CPU-second), max RSS {}",
        usage.cpu_user_s,
        usage.cpu_sys_s,
        if cpu > 0.0 {
            c.responses as f64 / cpu
        } else {
            0.0
        },
        fmt_bytes(usage.max_rss_kb as f64 * 1024.0)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(fmt_us(850), "850µs");
        assert_eq!(fmt_us(1250), "1.25ms");
        assert_eq!(fmt_us(3_400_000), "3.40s");
    }

    #[test]
    fn error_rate_counts_attempts() {
        let mut c = Counters {
            responses: 90,
            ..Default::default()
        };
        c.errors[ErrorKind::Http5xx.index()] = 10; // among the 90 responses
        c.errors[ErrorKind::Refused.index()] = 10; // no response
        assert!((error_rate(&c) - 20.0 / 100.0).abs() < 1e-12);
        assert_eq!(error_rate(&Counters::default()), 0.0);
    }

    #[test]
    fn unexpected_statuses_are_responses_in_the_error_rate() {
        let mut c = Counters::default();
        let expect: headroom_core::StatusSet = "200".parse().unwrap();
        for code in [200, 200, 404, 503] {
            c.responses += 1;
            c.reply_status(code, &expect);
        }
        assert!(
            (error_rate(&c) - 0.5).abs() < 1e-12,
            "2 of 4 attempts failed"
        );
        let m = status_codes_map(&c);
        assert_eq!(
            serde_json::Value::Object(m),
            serde_json::json!({"200": 2, "404": 1, "503": 1})
        );
    }
}
