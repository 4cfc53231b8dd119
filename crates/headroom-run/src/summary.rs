//! Building summary.json, the typed [`RunSummary`] of headroom-format, from a run: a [`Plan`]
//! and the engine's [`RunOutcome`] only (no command-line types), so `headroom run`,
//! `headroom demo`, the lab and the agents' controller write the same file. The types are
//! re-exported here, so `headroom_run::summary::RunSummary` is the format crate's.
//!
//! Counter sections list every counter of their group, zeros included; they are built by name
//! from [`ErrorKind`] and [`ProtoCounter`], and a unit test fails when a kind or counter is
//! added there without a field in the format's struct.

use headroom_core::session::{LinkSpec, NameKind, Workload};
use headroom_core::{ArrivalProcess, ErrorKind, LoadModel, Plan, ProtoCounter};
use headroom_engine::RunOutcome;
use headroom_metrics::{Counters, LatencyStats, NegotiatedSet, Recorder};
use serde::{de::DeserializeOwned, Serialize};

pub use headroom_format::summary::*;

/// A histogram's figures as summary.json writes them.
pub fn latency_of(h: &hdrhistogram::Histogram<u64>) -> Latency {
    latency_from(LatencyStats::of(h))
}

fn latency_from(s: LatencyStats) -> Latency {
    let LatencyStats {
        count,
        mean,
        stdev,
        min,
        p50,
        p90,
        p99,
        p999,
        max,
    } = s;
    Latency {
        count,
        mean,
        stdev,
        min,
        p50,
        p90,
        p99,
        p999,
        max,
    }
}

/// Failures by kind: every [`ErrorKind`] by its name.
pub fn errors_of(c: &Counters) -> Errors {
    by_name(
        ErrorKind::ALL
            .iter()
            .map(|k| (k.name(), serde_json::json!(c.errors[k.index()]))),
        "ErrorKind",
    )
}

pub fn status_of(c: &Counters) -> StatusClasses {
    let [other, s1xx, s2xx, s3xx, s4xx, s5xx] = c.status;
    StatusClasses {
        other,
        s1xx,
        s2xx,
        s3xx,
        s4xx,
        s5xx,
    }
}

/// The combinations of `set`, the most frequent first.
pub fn negotiated_of(set: &NegotiatedSet) -> Vec<NegotiatedFigures> {
    let mut v: Vec<NegotiatedFigures> = set
        .iter()
        .map(|(k, n)| NegotiatedFigures {
            protocol: k.version_name(),
            cipher_suite: k.suite_name(),
            key_exchange: k.group_name(),
            alpn: k.alpn_name(),
            http: k.http_name().map(Into::into),
            handshakes: n,
        })
        .collect();
    v.sort_by_key(|f| std::cmp::Reverse(f.handshakes));
    v
}

/// The section of the workload's protocol; `None` for HTTP.
pub fn protocol_of(w: &Workload, c: &Counters) -> Option<ProtocolSection> {
    let mut p = ProtocolSection::default();
    if w.has_file_ops() {
        p.file = Some(counters_of("file", c));
    }
    if w.has_expr_sets() {
        p.expr = Some(counters_of("expr", c));
    }
    match &w.link {
        LinkSpec::Plain if p.file.is_some() || p.expr.is_some() => {}
        LinkSpec::Plain => return None,
        LinkSpec::Xmpp(_) => p.xmpp = Some(counters_of("xmpp", c)),
        LinkSpec::Pgsql(_) => p.pgsql = Some(counters_of("pgsql", c)),
        LinkSpec::WebSocket(_) => p.websocket = Some(counters_of("websocket", c)),
        LinkSpec::Mqtt(_) => p.mqtt = Some(counters_of("mqtt", c)),
        LinkSpec::Ldap => p.ldap = Some(counters_of("ldap", c)),
        LinkSpec::Mysql(_) => p.mysql = Some(counters_of("mysql", c)),
        LinkSpec::Amqp(_) => p.amqp = Some(counters_of("amqp", c)),
    }
    Some(p)
}

/// The section of a controller's run: `threads_each` as the job asked, `on_loss` as the
/// controller was told.
pub fn agents_of(
    out: &headroom_dist::DistOutcome,
    threads_each: usize,
    on_loss: headroom_dist::OnLoss,
) -> Agents {
    Agents {
        count: out.agents as u64,
        threads_each: threads_each as u64,
        lost: out
            .lost
            .iter()
            .map(|l| LostAgent {
                name: l.name.clone(),
                after_interval: l.after_interval,
                why: l.why.clone(),
            })
            .collect(),
        stopped_by_loss: !out.lost.is_empty() && on_loss == headroom_dist::OnLoss::Stop,
    }
}

/// A typed struct filled by field name: `(name, value)` pairs that must name every field, and
/// nothing else. The format's structs read tolerantly (a missing field is its default, an
/// unknown one ignored), so the struct is written back and compared with the pairs: what ties
/// a counter section to [`ErrorKind`] / [`ProtoCounter`]; the tests build each one.
fn by_name<'a, T: DeserializeOwned + Serialize>(
    fields: impl Iterator<Item = (&'a str, serde_json::Value)>,
    what: &str,
) -> T {
    let m: serde_json::Map<String, serde_json::Value> =
        fields.map(|(k, v)| (k.to_string(), v)).collect();
    let given = serde_json::Value::Object(m);
    let t: T = serde_json::from_value(given.clone()).unwrap_or_else(|e| {
        panic!("summary.rs: a {what} and its summary field disagree ({e}); add the field")
    });
    let back = serde_json::to_value(&t).expect("a section is plain data");
    assert!(
        back == given,
        "summary.rs: a {what} and its summary fields disagree: {given} became {back}; add the \
         field to headroom-format"
    );
    t
}

fn proto_fields<'a>(
    group: &'a str,
    c: &'a Counters,
) -> impl Iterator<Item = (&'static str, serde_json::Value)> + 'a {
    ProtoCounter::ALL
        .iter()
        .filter(move |k| k.name().0 == group)
        .map(|k| (k.name().1, serde_json::json!(c.proto[k.index()])))
}

/// Every [`ProtoCounter`] of `group` as its typed section.
fn counters_of<T: DeserializeOwned + Serialize>(group: &str, c: &Counters) -> T {
    by_name(proto_fields(group, c), "ProtoCounter")
}

/// The generator's own resource use (getrusage of this process).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
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

impl SelfUsage {
    /// The CPU time used since `before` (a reading of this process earlier); the peak memory is
    /// the process's, so far.
    pub fn since(&self, before: &SelfUsage) -> SelfUsage {
        SelfUsage {
            cpu_user_s: (self.cpu_user_s - before.cpu_user_s).max(0.0),
            cpu_sys_s: (self.cpu_sys_s - before.cpu_sys_s).max(0.0),
            max_rss_kb: self.max_rss_kb,
        }
    }
}

fn process_name(p: ArrivalProcess) -> String {
    match p {
        ArrivalProcess::Poisson => "poisson",
        ArrivalProcess::Constant => "constant",
    }
    .into()
}

/// The plan's load model as summary.json's `load`.
pub fn load_of(plan: &Plan) -> Load {
    let think = |t: &Option<headroom_core::Distribution>| t.map(|d| format!("{d:?}"));
    let ramp = || {
        plan.ramp
            .iter()
            .map(|s| Stage {
                duration_s: s.duration.as_secs_f64(),
                users: s.users,
            })
            .collect()
    };
    match &plan.model {
        LoadModel::Closed {
            users,
            per_user,
            think: t,
        } => Load::Closed {
            users: *users,
            per_user: *per_user,
            think: think(t),
            ramp: ramp(),
        },
        LoadModel::Rate { connections, rate } => Load::Rate {
            connections: *connections,
            rate: *rate,
        },
        LoadModel::Open {
            rate,
            process,
            per_user,
            think: t,
            max_users,
        } => Load::Open {
            arrival_rate: *rate,
            arrival: process_name(*process),
            per_user: *per_user,
            think: think(t),
            max_users: *max_users,
        },
        LoadModel::Sessions { users, phases } => Load::Sessions {
            users: *users,
            phases: phases
                .iter()
                .map(|p| Phase {
                    duration_s: p.duration.as_secs_f64(),
                    from: p.from,
                    to: p.to,
                    arrival: process_name(p.process),
                    max_users: p.max_users,
                })
                .collect(),
            sessions: plan
                .workload
                .as_ref()
                .map(|w| w.sessions.iter().map(|s| s.name.clone()).collect()),
            ramp: ramp(),
        },
    }
}

/// The application protocol a run spoke, as summary.json says it: `http/1.1`, `h2` (HTTP/2 over
/// TLS) or `h2c` for URL runs, or the scenario's (`xmpp`, `pgsql`, `websocket`, `mqtt`,
/// `ldap`, `mysql`, `amqp`, `file` for only file steps, `http/1.1`).
pub fn protocol_name(plan: &Plan) -> &'static str {
    if plan.http2.is_some() {
        return if plan.tls.is_some() { "h2" } else { "h2c" };
    }
    match plan.workload.as_deref().map(|w| &w.link) {
        Some(LinkSpec::Xmpp(_)) => "xmpp",
        Some(LinkSpec::Pgsql(_)) => "pgsql",
        Some(LinkSpec::WebSocket(_)) => "websocket",
        Some(LinkSpec::Mqtt(_)) => "mqtt",
        Some(LinkSpec::Ldap) => "ldap",
        Some(LinkSpec::Mysql(_)) => "mysql",
        Some(LinkSpec::Amqp(_)) => "amqp",
        // Only `file` steps: no connection at all.
        Some(LinkSpec::Plain)
            if plan
                .workload
                .as_deref()
                .is_some_and(|w| w.has_file_ops() && !w.uses_network()) =>
        {
            "file"
        }
        _ => "http/1.1",
    }
}

/// The `http` section: every HTTP run's, over HTTP/1.1 and HTTP/2 alike (the browser is the
/// same).
pub fn http_of(plan: &Plan, c: &Counters) -> Option<HttpSection> {
    let a = &plan.browser;
    let config = [
        ("cookies", serde_json::json!(a.cookies)),
        ("follow", serde_json::json!(a.follow)),
        ("compressed", serde_json::json!(a.compressed)),
        (
            "auth",
            serde_json::json!(a.credentials.as_ref().map(|c| c.scheme.as_str())),
        ),
    ];
    Some(by_name(
        proto_fields("http", c).chain(config),
        "ProtoCounter",
    ))
}

/// The `tls` section; `None` for a plain run.
pub fn tls_of(plan: &Plan, total: &Recorder) -> Option<TlsSection> {
    let t = plan.tls.as_ref()?;
    let c = &total.counters;
    Some(TlsSection {
        server_name: t.server_name.clone(),
        min_version: t.min_version.name().into(),
        max_version: t.max_version.name().into(),
        alpn: t
            .alpn
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
        insecure: t.insecure,
        ca: if t.ca_pem.is_some() { "file" } else { "system" }.into(),
        client_certificate: t.client_cert_pem.is_some(),
        resume: t.resume,
        handshakes: c.proto[ProtoCounter::TlsHandshakes.index()],
        resumed: c.proto[ProtoCounter::TlsResumed.index()],
        negotiated: negotiated_of(&total.negotiated),
        negotiated_other: total.negotiated.other,
    })
}

/// The `scenario` section; `None` for a URL run.
pub fn scenario_of(plan: &Plan, total: &Recorder) -> Option<ScenarioSection> {
    let w = plan.workload.as_ref()?;
    let mut s = ScenarioSection::default();
    for (m, n) in w.names.iter().zip(total.names.iter()) {
        let figures = NameFigures {
            count: n.count,
            errors: n.errors,
            latency_us: latency_of(&n.latency),
        };
        match m.kind {
            NameKind::Request => s.by_request.insert(m.name.clone(), figures),
            NameKind::Transaction => s.by_transaction.insert(m.name.clone(), figures),
        };
    }
    s.matches = w
        .matches
        .iter()
        .cloned()
        .zip(total.matches.iter().copied())
        .collect();
    let c = &total.counters;
    s.sessions = Sessions {
        completed: c.sessions_completed,
        aborted: c.sessions_aborted,
        users_dropped: c.users_dropped,
        duration: latency_of(&total.sessions),
    };
    s.protocol = protocol_of(w, c);
    Some(s)
}

/// Where this process runs: kernel, OS, CPU model and count, memory, host name (read from
/// /proc and /etc).
pub fn environment_here() -> Environment {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    Environment {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease").map(|r| {
            format!(
                "{} {r}",
                read("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into())
            )
        }),
        os: read("/etc/os-release").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        }),
        cpu: read("/proc/cpuinfo").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        }),
        cores: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u64),
        memory_bytes: read("/proc/meminfo").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| kb * 1024)
        }),
    }
}

pub(crate) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// What the run library adds to [`RunSummary`]: building it from a run, and its JSON (the
/// format crate has no JSON dependency).
pub trait RunSummaryExt: Sized {
    /// The summary of `plan`'s run: everything but the driver's `agents` section and the
    /// thresholds (see [`RunSummary::set_thresholds`]).
    fn build(plan: &Plan, out: &RunOutcome, usage: &SelfUsage, command: &str) -> RunSummary;
    /// summary.json as a JSON value, keys sorted at every level (serde_json's map): what
    /// `--json` prints and the run directory holds.
    fn to_json(&self) -> serde_json::Value;
    /// Reads a summary.json (for instance a run directory's).
    fn from_json(text: &str) -> serde_json::Result<RunSummary>;
}

impl RunSummaryExt for RunSummary {
    fn build(plan: &Plan, out: &RunOutcome, usage: &SelfUsage, command: &str) -> RunSummary {
        let t = &out.total;
        let c = &t.counters;
        let secs = out.elapsed.as_secs_f64().max(1e-9);
        RunSummary {
            format_version: FORMAT_VERSION,
            headroom_version: env!("CARGO_PKG_VERSION").into(),
            command: command.into(),
            target: plan.target_name.clone(),
            model: plan.model.name().into(),
            load: load_of(plan),
            threads: plan.threads as u64,
            keepalive: plan.keepalive,
            pipeline: plan.pipeline,
            timer_slack_us: plan.timer_slack.as_micros() as u64,
            protocol: protocol_name(plan).into(),
            streams: plan.http2.map(|h| h.streams),
            http2: plan.http2.map(|_| counters_of("http2", c)),
            http: http_of(plan, c),
            tls: tls_of(plan, t),
            started_at: humantime::format_rfc3339_millis(out.started_at).to_string(),
            duration_s: round3(secs),
            interrupted: out.interrupted,
            stopped: None,
            requests: c.requests,
            responses: c.responses,
            in_flight: out.in_flight,
            errors: errors_of(c),
            errors_total: c.errors_total(),
            error_rate: round6(c.error_rate()),
            status: status_of(c),
            status_codes: c.codes_seen().collect(),
            expect_status: (!plan.expect_status.is_empty()).then(|| plan.expect_status.to_string()),
            users_started: c.users_started,
            users_finished: c.users_finished,
            throughput_rps: round3(c.responses as f64 / secs),
            latency_us: latency_of(&t.latency),
            latency_uncorrected_us: latency_of(&t.latency_uncorrected),
            connect_us: latency_of(&t.connect),
            tls_us: latency_of(&t.tls),
            served_us: latency_of(&t.served),
            connects: c.connects,
            connections_peak: out.connections_peak,
            tcp_connected_peak: out.tcp_connected_peak,
            idle_closed: c.idle_closed,
            reconnects: c.reconnects,
            bytes_sent: c.bytes_sent,
            bytes_received: c.bytes_received,
            cpu_user_s: round3(usage.cpu_user_s),
            cpu_sys_s: round3(usage.cpu_sys_s),
            max_rss_kb: usage.max_rss_kb,
            environment: environment_here(),
            scenario: scenario_of(plan, t),
            agents: None,
            thresholds: None,
            thresholds_ok: None,
            // Both are the pipeline's (the verdict module reads this one: no import back).
            generator: Default::default(),
            verdict: None,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a RunSummary is plain data")
    }

    fn from_json(text: &str) -> serde_json::Result<RunSummary> {
        serde_json::from_str(text)
    }
}

/// JSON Schema (draft 2020-12) of summary.json, as schema/summary.schema.json holds it. Made
/// for what is written (serde's serialize side): a field that is `null` when absent is required,
/// one that is left out is not, and no other key is allowed.
#[cfg(feature = "schema")]
pub fn schema() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<RunSummary>();
    serde_json::to_value(schema).expect("a schema is JSON")
}

#[cfg(test)]
pub(crate) fn test_plan() -> Plan {
    use headroom_core::{HttpRequest, SocketOptions, StopCondition};
    use std::time::Duration;
    let addr: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    Plan {
        target: addr,
        target_name: "http://127.0.0.1:8080/".into(),
        request: HttpRequest {
            method: "GET".into(),
            path: "/".into(),
            host: addr.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        },
        model: LoadModel::Closed {
            users: 2,
            per_user: None,
            think: None,
        },
        ramp: Vec::new(),
        stop: StopCondition {
            duration: Some(Duration::from_secs(1)),
            requests: None,
        },
        threads: 1,
        interval: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(10),
        expect_status: Default::default(),
        keepalive: true,
        pipeline: 1,
        socket: SocketOptions::default(),
        workload: None,
        segment: Default::default(),
        start_at: None,
        tls: None,
        http2: None,
        browser: Default::default(),
        timer_slack: headroom_core::DEFAULT_TIMER_SLACK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_group_fills_its_section() {
        // Each panics when ErrorKind / ProtoCounter and the struct disagree.
        let c = Counters::default();
        let _: Errors = errors_of(&c);
        let _: Http2Section = counters_of("http2", &c);
        let _: XmppCounters = counters_of("xmpp", &c);
        let _: PgsqlCounters = counters_of("pgsql", &c);
        let _: WebSocketCounters = counters_of("websocket", &c);
        let _: MqttCounters = counters_of("mqtt", &c);
        let _: LdapCounters = counters_of("ldap", &c);
        let _: MysqlCounters = counters_of("mysql", &c);
        let _: AmqpCounters = counters_of("amqp", &c);
        let _: FileCounters = counters_of("file", &c);
        let _: ExprCounters = counters_of("expr", &c);
        let plan = test_plan();
        assert!(http_of(&plan, &c).is_some());
        // Every group of ProtoCounter has a home here (tls's two are TlsSection's fields).
        for k in ProtoCounter::ALL {
            assert!(
                [
                    "http",
                    "http2",
                    "tls",
                    "xmpp",
                    "pgsql",
                    "websocket",
                    "mqtt",
                    "ldap",
                    "mysql",
                    "amqp",
                    "file",
                    "expr"
                ]
                .contains(&k.name().0),
                "{:?} belongs to no summary section",
                k
            );
        }
    }

    #[test]
    fn error_rate_counts_attempts() {
        let mut c = Counters {
            responses: 90,
            ..Default::default()
        };
        c.errors[ErrorKind::Http5xx.index()] = 10; // among the 90 responses
        c.errors[ErrorKind::Refused.index()] = 10; // no response
        assert!((c.error_rate() - 20.0 / 100.0).abs() < 1e-12);
        assert_eq!(Counters::default().error_rate(), 0.0);
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
            (c.error_rate() - 0.5).abs() < 1e-12,
            "2 of 4 attempts failed"
        );
        let m: std::collections::BTreeMap<u16, u64> = c.codes_seen().collect();
        assert_eq!(
            serde_json::to_value(m).unwrap(),
            serde_json::json!({"200": 2, "404": 1, "503": 1})
        );
    }
}
