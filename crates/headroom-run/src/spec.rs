//! The one builder from a [`RunSpec`] to a [`Plan`]: `headroom run`, `headroom demo`, the lab
//! and every agent build their plan here, so the same spec is the same plan everywhere.
//!
//! Nothing here opens a file or parses a command line: a spec carries its files' bytes (see
//! [`headroom_core::spec`]). What is wrong with a spec is a [`UsageError`] naming the flag (or
//! scenario key) and what is allowed; the CLI exits 2 on it.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use headroom_core::spec::{RunSpec, ScenarioSpec, SpecArrival, Target, SPEC_VERSION};
use headroom_core::{
    ArrivalProcess, Distribution, HttpRequest, LoadModel, Plan, RampStage, SocketOptions,
    StopCondition, TlsOptions, TlsVersion,
};
use headroom_scenario::model::{Metric, Threshold};

use crate::usage::usage;
// Where the CLI (and older callers) name them: `headroom_run::spec::UsageError`.
pub use crate::usage::{errors_to_usage, UsageError};

/// `10s`, `500ms`, `1m30s`, `2h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>() {
        if (0.0..1e9).contains(&secs) {
            return Ok(Duration::from_secs_f64(secs));
        }
    }
    humantime::parse_duration(t)
        .map_err(|_| format!("'{s}' is not a duration; use e.g. 500ms, 10s, 5m, 1h30m"))
}

/// Worker threads when the spec names none: one per core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A built run: its plan, and its scenario's thresholds (checked after the run).
#[derive(Debug)]
pub struct Built {
    pub plan: Plan,
    pub thresholds: Vec<Threshold>,
}

/// The plan of `spec`, validated.
pub fn build(spec: &RunSpec) -> Result<Built, UsageError> {
    if spec.version != SPEC_VERSION {
        return usage(format!(
            "a run spec of version {} (this headroom reads version {SPEC_VERSION}): run the same \
             headroom version on the controller and the agents",
            spec.version
        ));
    }
    // A run of no requests would exit 0 having tested nothing: for a URL and a scenario alike.
    if spec.requests == Some(0) {
        return usage("bad -n/--requests 0: at least 1 is needed");
    }
    match &spec.target {
        Target::Url(u) => Ok(Built {
            plan: url_plan(spec, u, spec.duration)?,
            thresholds: Vec::new(),
        }),
        Target::Scenario(sc) => scenario_plan(spec, sc),
    }
}

/// The flags that describe requests of their own, refused with any scenario file (its requests
/// come from the file). The CLI checks them before it reads the file; the load flags are
/// checked against the file's load once it is read ([`apply_load_flags`]).
pub fn scenario_flags(a: &RunSpec) -> Result<(), UsageError> {
    let conflicting = [
        ("--body", a.body.is_some()),
        ("-H/--header", !a.headers.is_empty()),
        (
            "-m/--method (put method: on the scenario's requests)",
            !a.method.eq_ignore_ascii_case("GET"),
        ),
        (
            "-a/--auth (put auth: on the scenario's requests)",
            a.auth.is_some(),
        ),
        (
            "--digest (put auth: {scheme: digest} on the scenario's requests)",
            a.digest,
        ),
        ("--compressed (URL runs only for now)", a.compressed),
    ];
    if let Some((flag, _)) = conflicting.iter().find(|(_, set)| *set) {
        return usage(format!(
            "{flag} does not apply to a scenario file: its requests come from the file"
        ));
    }
    Ok(())
}

/// What kind of file a scenario spec came from, by its name: the words its errors use.
#[derive(Clone, Copy, PartialEq)]
enum FileKind {
    Native,
    Tsung,
    Har,
}

impl FileKind {
    fn of(name: &str) -> FileKind {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".xml") {
            FileKind::Tsung
        } else if lower.ends_with(".har") {
            FileKind::Har
        } else {
            FileKind::Native
        }
    }

    /// Where `name`, of this kind, sets its load `desc` ([`describe_load`]).
    fn setting(self, name: &str, desc: &str) -> String {
        match self {
            FileKind::Native => format!("{name} sets its load in `load:` ({desc})"),
            FileKind::Tsung => format!("{name} sets its load in <load> ({desc})"),
            FileKind::Har => format!("{name} is replayed by {desc} (-c sets how many)"),
        }
    }
}

/// The file's load in a few words: `20 users`, `2 populations of 100 users in all`, `stages
/// peaking at 100 users`, `3 arrival phases`.
fn describe_load(load: &headroom_scenario::model::Load) -> String {
    let mut parts = Vec::new();
    let users: u64 = load.users.iter().map(|u| u.count).sum();
    match load.users.len() {
        0 => {}
        1 => parts.push(format!("{users} closed user{}", plural(users))),
        n => parts.push(format!("{n} closed populations, {users} users in all")),
    }
    if !load.stages.is_empty() {
        let peak = load.stages.iter().map(|s| s.users).max().unwrap_or(0);
        parts.push(format!("stages peaking at {peak} users"));
    }
    if !load.phases.is_empty() {
        let n = load.phases.len();
        parts.push(format!("{n} arrival phase{}", plural(n as u64)));
    }
    if !load.once.is_empty() {
        let n = load.once.len() as u64;
        parts.push(format!("{n} user{} started once", plural(n)));
    }
    if parts.is_empty() {
        "no users".into()
    } else {
        parts.join(" and ")
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The load flags against the file's load: `-c` sets the population of a file whose load is
/// one closed population (a HAR, or `load: {users: [{count: N}]}`), as k6's `--vus` does;
/// `-d`, `-n` and `-t` apply to any file (in [`scenario_plan`]); every other load flag would
/// describe a load of its own, and is refused in one line that names the file's setting, so
/// no flag is ever ignored.
pub fn apply_load_flags(
    a: &RunSpec,
    name: &str,
    scenario: &mut headroom_scenario::Scenario,
) -> Result<(), UsageError> {
    let kind = FileKind::of(name);
    let load = &mut scenario.load;
    let refuse = |flag: &str, fix: &str| -> Result<(), UsageError> {
        usage(format!(
            "{}; {flag} cannot apply: {fix}",
            kind.setting(name, &describe_load(load))
        ))
    };
    let arrivals = match kind {
        FileKind::Har => {
            "for users arriving at a rate, write a scenario with `headroom import har --rate R`"
        }
        FileKind::Tsung => "edit the file's <arrivalphase>s, or convert it (`headroom import tsung`) and edit its `load.phases`",
        FileKind::Native => "edit the file's `load.phases` (arrival_rate, arrival, max_users)",
    };
    let ramp = match kind {
        FileKind::Native => "ramp the users with `load.stages` in the file",
        _ => "convert the file (`headroom import`) and ramp its users with `load.stages`",
    };
    let flags = [
        ("--rate", a.rate.is_some(), arrivals),
        ("--arrival-rate", a.arrival_rate.is_some(), arrivals),
        ("--arrival", a.arrival.is_some(), arrivals),
        ("--max-users", a.max_users.is_some(), arrivals),
        (
            "--per-user",
            a.per_user.is_some(),
            "a user runs the file's sessions (a closed user loops them until the run ends, an \
             arriving one runs one); bound the run with -n or -d",
        ),
        (
            "--think",
            a.think.is_some(),
            match kind {
                FileKind::Tsung => "the file's <thinktime>s say how long users think; edit them",
                _ => "the file's `think` steps say how long users think; edit them",
            },
        ),
        ("--ramp-up", a.ramp_up.is_some(), ramp),
        ("--stage", !a.stages.is_empty(), ramp),
        (
            "--pipeline",
            a.pipeline != 1,
            "a scenario pipelines with its `pipeline` steps",
        ),
        (
            "--streams",
            a.streams.is_some(),
            "a scenario's user sends one request at a time, or a `pipeline` step's batch",
        ),
    ];
    if let Some((flag, _, fix)) = flags.iter().find(|(_, set, _)| *set) {
        return refuse(flag, fix);
    }
    let Some(c) = a.connections else {
        return Ok(());
    };
    if c == 0 {
        return usage("bad -c/--connections 0: at least 1 is needed");
    }
    if load.users.len() == 1 && load.phases.is_empty() && load.stages.is_empty() {
        load.users[0].count = u64::from(c);
        return Ok(());
    }
    let fix = match kind {
        FileKind::Native => {
            "edit the file (-c sets the users of a file whose load is one closed population, \
             without phases or stages)"
        }
        FileKind::Tsung => {
            "edit the file, or convert it (`headroom import tsung`) and edit its `load:`"
        }
        FileKind::Har => "edit the file",
    };
    refuse(&format!("-c {c}"), fix)
}

fn scenario_plan(a: &RunSpec, sc: &ScenarioSpec) -> Result<Built, UsageError> {
    scenario_flags(a)?;
    let name = &sc.name;
    crate::files::check_text(name, &sc.yaml)?;
    let mut scenario = headroom_scenario::parse_str(&sc.yaml, name).map_err(errors_to_usage)?;
    apply_load_flags(a, name, &mut scenario)?;
    // The spec's files, and no other: nothing is read from this machine's disk.
    let source = |f: &str| -> Result<Vec<u8>, String> {
        sc.files
            .iter()
            .find(|x| x.name == f)
            .map(|x| x.data.clone())
            .ok_or_else(|| format!("{f}: not among the run's files"))
    };
    let compiled = headroom_scenario::compile_with(&scenario, &source)
        .map_err(|e| UsageError(format!("{name}: {e}")))?;
    // Thresholds naming no request or transaction would never be checked: refuse them now.
    for t in &scenario.thresholds {
        let tname = match &t.metric {
            Metric::Percentile { name, .. } | Metric::Mean { name } => name.as_ref(),
            _ => None,
        };
        if let Some(n) = tname {
            if !compiled.workload.names.iter().any(|m| &m.name == n) {
                let known: Vec<&str> = compiled
                    .workload
                    .names
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect();
                return usage(format!(
                    "{name}: threshold '{}' names '{n}', which is no request or transaction (names: {})",
                    t.text,
                    known.join(", ")
                ));
            }
        }
    }
    let target_url = match (&sc.target, scenario.servers.first()) {
        (Some(t), _) => {
            if t.starts_with("http://") {
                t.clone()
            } else {
                format!("http://{t}/")
            }
        }
        (None, Some(s)) => {
            if s.host.contains(':') {
                format!("http://[{}]:{}/", s.host, s.port)
            } else {
                format!("http://{}:{}/", s.host, s.port)
            }
        }
        // Only file steps: nothing connects; the plan's target is a placeholder.
        (None, None)
            if compiled.workload.has_file_ops() && !compiled.workload.uses_network() =>
        {
            "http://127.0.0.1:9/".to_string()
        }
        (None, None) => {
            return usage(format!(
                "{name}: the scenario names no server; add servers: [{{host: 127.0.0.1, port: 8080}}] or give --target HOST:PORT"
            ))
        }
    };
    // The URL machinery validates the network and output flags and builds the base plan (from
    // `a` itself: a clone would copy the scenario's files, up to 256 MiB each).
    let mut plan = url_plan(a, &target_url, None)?;
    plan.tls = match &compiled.tls {
        Some(t) => Some(Arc::new(
            add_tls_flags(a, t.clone()).map_err(|e| UsageError(format!("{name}: {e}")))?,
        )),
        None => None,
    };
    let scheme_tls = plan.tls.is_some();
    use headroom_scenario::model::Protocol;
    let shown = match scenario.servers.first().map(|s| s.protocol) {
        Some(Protocol::Raw) => format!("tcp://{}", plan.target),
        Some(p @ Protocol::Xmpp) | Some(p @ Protocol::Pgsql) | Some(p @ Protocol::Mysql) => {
            format!("{}://{}", p.as_str(), plan.target)
        }
        Some(Protocol::Mqtt) if scheme_tls => format!("mqtts://{}", plan.target),
        Some(Protocol::Mqtt) => format!("mqtt://{}", plan.target),
        Some(Protocol::Ldap) if scheme_tls => format!("ldaps://{}", plan.target),
        Some(Protocol::Ldap) => format!("ldap://{}", plan.target),
        Some(Protocol::Amqp) => format!("amqp://{}", plan.target),
        Some(Protocol::WebSocket) if scheme_tls => format!("wss://{}", plan.target),
        Some(Protocol::WebSocket) => format!("ws://{}", plan.target),
        None if scenario.file_root.is_some() && !compiled.workload.uses_network() => format!(
            "files under {}",
            scenario.file_root.as_deref().unwrap_or_default()
        ),
        _ => plan.target_name.clone(),
    };
    plan.target_name = format!("{name} ({shown})");
    // Without a duration the run lasts its phases and its stages, whichever ends later.
    let shaped = compiled
        .phases_duration
        .max(RampStage::total(&compiled.ramp));
    let unshaped = compiled.phases.is_empty() && compiled.ramp.is_empty();
    // Users started once and no closed users: like Tsung, the run lasts until every user has
    // left (the phases' arrivals finish their sessions too), however long that is.
    let until_left = !compiled.workload.once.is_empty() && compiled.users == 0;
    let duration = match (a.duration, unshaped) {
        (Some(d), _) => Some(d),
        (None, _) if until_left => None,
        (None, false) => Some(shaped),
        (None, true) if a.requests.is_some() => None,
        (None, true) => Some(Duration::from_secs(10)),
    };
    plan.stop = StopCondition {
        duration,
        requests: a.requests,
    };
    let mut threads = a.threads.unwrap_or_else(default_threads);
    if compiled.phases.is_empty() {
        let users = compiled.users as usize + compiled.workload.once.len();
        threads = threads.min(users.max(1));
    }
    plan.threads = threads.max(1);
    plan.model = LoadModel::Sessions {
        users: compiled.users,
        phases: compiled.phases.clone(),
    };
    plan.ramp = compiled.ramp.clone();
    if compiled.http2 {
        plan.http2 = Some(headroom_core::Http2Options { streams: 1 });
    }
    // The file says how users behave; --no-cookies and --follow override it.
    plan.browser.cookies = compiled.http.cookies && !a.no_cookies;
    if a.follow == 0 {
        plan.browser.follow = compiled.http.follow;
    }
    plan.workload = Some(Arc::new(compiled.workload));
    plan.validate().map_err(|e| UsageError(e.0))?;
    Ok(Built {
        plan,
        thresholds: scenario.thresholds,
    })
}

/// The parts of an http:// or https:// URL that matter to a client.
#[derive(Debug, PartialEq)]
pub struct Url {
    /// https: TLS on every connection.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, starting with '/'; non-ASCII characters percent-encoded as UTF-8.
    pub path: String,
    /// `user:password@` of the URL, percent-decoded.
    pub userinfo: Option<(String, String)>,
}

/// `%XX` escapes decoded; `None` when one is broken or the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The run's target URL, by core's one URL parser ([`headroom_core::url`]); what it refuses is
/// said in the run's words, quoting the part at fault.
pub fn parse_url(s: &str) -> Result<Url, UsageError> {
    use headroom_core::url::{self, UrlErrorKind as K};
    let fix = "expected e.g. http://127.0.0.1:8080/path";
    let u = match url::Url::parse(s.as_bytes()) {
        Ok(u) => u,
        Err(e) => {
            let part = e.part(s);
            return usage(match e.kind {
                K::NoScheme | K::NoAuthority => format!("bad URL '{s}': no scheme; {fix}"),
                K::UnsupportedScheme => format!(
                    "bad URL '{s}': scheme '{}' is not supported; {fix}",
                    part.to_ascii_lowercase()
                ),
                K::UnclosedBracket => format!("bad URL '{s}': unclosed '[' in the host"),
                K::AfterIpv6 => format!("bad URL '{s}': unexpected '{part}' after the host"),
                K::NoHost => format!("bad URL '{s}': no host; {fix}"),
                K::BadHost => format!(
                    "bad URL '{s}': host '{part}' is not a name or an IP address; {fix}"
                ),
                K::BadPort => format!(
                    "bad URL '{s}': port '{part}' is not a number from 1 to 65535; use e.g. http://127.0.0.1:8080/"
                ),
                K::ControlChar | K::BadUserinfo => format!(
                    "bad URL '{s}': it contains spaces or control characters; percent-encode them"
                ),
                K::TooLong => format!("bad URL: longer than {} bytes", url::MAX_URL_LEN),
            });
        }
    };
    let tls = match u.scheme {
        url::Scheme::Http => false,
        url::Scheme::Https => true,
        other => {
            return usage(format!(
                "bad URL '{s}': scheme '{}' is not supported; {fix}",
                other.as_str()
            ))
        }
    };
    let userinfo = match u.userinfo {
        Some(info) => {
            let info = String::from_utf8_lossy(info);
            let (user, pass) = info.split_once(':').unwrap_or((&info, ""));
            let (Some(user), Some(pass)) = (percent_decode(user), percent_decode(pass)) else {
                return usage(format!(
                    "bad URL '{s}': the user info is not valid percent-encoded UTF-8"
                ));
            };
            if user.is_empty() {
                return usage(format!("bad URL '{s}': empty user name before '@'"));
            }
            Some((user, pass))
        }
        None => None,
    };
    if u.path.contains(&b' ') || u.query.is_some_and(|q| q.contains(&b' ')) {
        return usage(format!(
            "bad URL '{s}': the path contains spaces or control characters; percent-encode them"
        ));
    }
    let mut path = String::with_capacity(u.path.len() + u.query.map_or(0, <[u8]>::len) + 2);
    u.push_target(&mut path, b"");
    Ok(Url {
        tls,
        host: u.host.to_string(),
        port: u.port,
        path,
        userinfo,
    })
}

/// Think time: a bare duration takes `default_exp` to decide its distribution.
pub fn parse_think(s: &str, default_exp: bool) -> Result<Distribution, UsageError> {
    let bad = |why: &str| {
        usage(format!(
            "bad --think '{s}': {why}; use 500ms, exp:2s, const:1s or uniform:1s..3s"
        ))
    };
    let dur = |v: &str| parse_duration(v).map_err(|e| UsageError(format!("bad --think: {e}")));
    let (kind, val) = match s.split_once(':') {
        Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim()),
        None => (String::new(), s.trim()),
    };
    Ok(match kind.as_str() {
        "" if default_exp => Distribution::Exponential { mean: dur(val)? },
        "" | "const" | "constant" => Distribution::Constant(dur(val)?),
        "exp" | "exponential" => Distribution::Exponential { mean: dur(val)? },
        "uniform" => {
            let Some((a, b)) = val.split_once("..") else {
                return bad("uniform needs min..max");
            };
            let (min, max) = (dur(a)?, dur(b)?);
            if max < min {
                return bad("max is below min");
            }
            Distribution::Uniform { min, max }
        }
        _ => return bad("unknown distribution"),
    })
}

fn parse_header(h: &str) -> Result<(String, String), UsageError> {
    let Some((name, value)) = h.split_once(':') else {
        return usage(format!("bad header '{h}': expected 'Name: value'"));
    };
    let name = name.trim();
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid_name {
        return usage(format!(
            "bad header '{h}': '{name}' is not a valid header name"
        ));
    }
    let value = value.trim();
    if value.bytes().any(|b| b == b'\r' || b == b'\n') {
        return usage(format!("bad header '{h}': the value contains a line break"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Validate the flags and build the plan.
/// `duration` stands for `s.duration` (a scenario's base plan is built without one).
fn url_plan(s: &RunSpec, url_text: &str, duration: Option<Duration>) -> Result<Plan, UsageError> {
    let url = parse_url(url_text)?;
    let target = resolve(&url)?;
    let method = s.method.trim().to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return usage(format!(
            "bad --method '{}': expected a word such as GET or POST",
            s.method
        ));
    }
    let headers = s
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let body = s.body.clone().unwrap_or_default();
    let default_port = if url.tls { 443 } else { 80 };
    let host = if url.port == default_port {
        url.host.clone()
    } else if url.host.contains(':') {
        format!("[{}]:{}", url.host, url.port)
    } else {
        format!("{}:{}", url.host, url.port)
    };
    if s.connections == Some(0) {
        return usage("bad -c/--connections 0: at least 1 is needed");
    }
    let connections = s
        .connections
        .unwrap_or(headroom_core::spec::DEFAULT_CONNECTIONS);
    let (ramp, ramp_default) = ramp_stages(s)?;
    let closed_users = match RampStage::peak(&ramp) {
        0 => connections,
        peak => peak,
    };
    if s.pipeline == 0 || s.pipeline > 1024 {
        return usage(format!("bad --pipeline {}: allowed 1 to 1024", s.pipeline));
    }
    if s.rate.is_some() && s.arrival_rate.is_some() {
        return usage("--rate and --arrival-rate are different models; choose one");
    }
    if s.interval < Duration::from_millis(10) {
        return usage("bad --interval: at least 10ms");
    }
    if let Some(d) = s
        .timer_slack
        .filter(|d| *d > headroom_core::MAX_TIMER_SLACK)
    {
        return usage(format!(
            "bad --timer-slack {d:?}: at most {}ms (beyond it a constant rate is bursts)",
            headroom_core::MAX_TIMER_SLACK.as_millis()
        ));
    }
    if s.timeout.is_zero() || s.connect_timeout.is_zero() {
        return usage("--timeout and --connect-timeout must be above zero");
    }
    if s.max_users.is_some() && s.arrival_rate.is_none() {
        return usage("--max-users belongs to the open model: add --arrival-rate U");
    }
    if s.arrival.is_some() && s.arrival_rate.is_none() {
        return usage("--arrival belongs to the open model: add --arrival-rate U");
    }
    if s.arrival_rate.is_some() {
        if let Some(c) = s.connections {
            return usage(format!(
                "-c {c} cannot apply to the open model: its users arrive at --arrival-rate, one \
                 connection each (cap those alive with --max-users)"
            ));
        }
    }
    let positive = |name: &str, v: f64| -> Result<f64, UsageError> {
        if v.is_finite() && v > 0.0 && v <= 10_000_000.0 {
            Ok(v)
        } else {
            usage(format!(
                "bad {name} {v}: a positive number of at most 10,000,000 per second"
            ))
        }
    };
    let model = if let Some(rate) = s.rate {
        if s.think.is_some() || s.per_user.is_some() {
            return usage("--rate sets the pace itself: drop --think and --per-user");
        }
        if s.pipeline > 1 {
            return usage("--rate and --pipeline cannot be combined");
        }
        LoadModel::Rate {
            connections,
            rate: positive("--rate", rate)?,
        }
    } else if let Some(rate) = s.arrival_rate {
        let think = s
            .think
            .as_deref()
            .map(|t| parse_think(t, true))
            .transpose()?;
        LoadModel::Open {
            rate: positive("--arrival-rate", rate)?,
            process: match s.arrival.unwrap_or_default() {
                SpecArrival::Poisson => ArrivalProcess::Poisson,
                SpecArrival::Constant => ArrivalProcess::Constant,
            },
            per_user: s.per_user.unwrap_or(1).max(1),
            think,
            max_users: s.max_users,
        }
    } else {
        let think = s
            .think
            .as_deref()
            .map(|t| parse_think(t, false))
            .transpose()?;
        if s.per_user == Some(0) {
            return usage("bad --per-user 0: at least 1");
        }
        LoadModel::Closed {
            users: closed_users,
            per_user: s.per_user,
            think,
        }
    };
    // A run bounded by counts gets no default duration; otherwise 10s, like wrk.
    let bounded = s.requests.is_some()
        || matches!(
            model,
            LoadModel::Closed {
                per_user: Some(_),
                ..
            }
        )
        || matches!(
            model,
            LoadModel::Open {
                max_users: Some(_),
                ..
            }
        );
    let duration = duration.or(if bounded {
        None
    } else {
        Some(ramp_default.unwrap_or(Duration::from_secs(10)))
    });
    if duration.is_some_and(|d| d.is_zero()) {
        return usage("bad -d/--duration 0: give a positive duration such as 10s");
    }
    let mut threads = s.threads.unwrap_or_else(default_threads);
    if threads == 0 || threads > 1024 {
        return usage(format!("bad -t/--threads {threads}: allowed 1 to 1024"));
    }
    if !matches!(model, LoadModel::Open { .. }) {
        // More threads than users would leave some idle.
        threads = threads.min(closed_users as usize);
    }
    let bind = s.bind.clone();
    if bind.iter().any(|ip| ip.is_ipv4() != target.is_ipv4()) {
        return usage("--bind addresses must be of the same family (IPv4/IPv6) as the target");
    }
    let browser = browser_options(s, &url)?;
    let plan = Plan {
        target,
        target_name: url_text.to_string(),
        request: HttpRequest {
            method,
            path: url.path,
            host,
            headers,
            body,
        },
        model,
        ramp,
        stop: StopCondition {
            duration,
            requests: s.requests,
        },
        threads,
        interval: s.interval,
        connect_timeout: s.connect_timeout,
        timeout: s.timeout,
        expect_status: match &s.expect_status {
            Some(t) => t
                .parse()
                .map_err(|e| UsageError(format!("bad --expect-status: {e}")))?,
            None => Default::default(),
        },
        keepalive: !s.no_keepalive,
        pipeline: s.pipeline,
        socket: SocketOptions {
            sndbuf: s.sndbuf,
            rcvbuf: s.rcvbuf,
            nodelay: !s.no_nodelay,
            bind,
        },
        workload: None,
        segment: Default::default(),
        start_at: None,
        tls: if url.tls {
            let mut o = tls_options(s, &url.host)?;
            if s.http2 {
                o.alpn = vec![b"h2".to_vec()];
            }
            Some(std::sync::Arc::new(o))
        } else {
            None
        },
        http2: http2_options(s, url.tls)?,
        browser,
        timer_slack: s.timer_slack.unwrap_or(headroom_core::DEFAULT_TIMER_SLACK),
    };
    plan.validate().map_err(|e| UsageError(e.0))?;
    Ok(plan)
}

/// Cookies, redirects and credentials (`--no-cookies`, `--follow`, `-a`, `--digest`, the
/// URL's user info).
fn browser_options(s: &RunSpec, url: &Url) -> Result<headroom_core::BrowserOptions, UsageError> {
    if s.follow > headroom_core::MAX_FOLLOW {
        return usage(format!(
            "bad --follow {}: allowed 0 to {}",
            s.follow,
            headroom_core::MAX_FOLLOW
        ));
    }
    // Over HTTP/2 a request that takes several hops (a redirect, a Digest answer) is sent one
    // at a time per connection, as over HTTP/1.1: more streams could not apply.
    let streams = s.streams.unwrap_or(1);
    if s.follow > 0 && streams > 1 {
        return usage(format!(
            "--follow sends each request's hops one at a time per connection: --streams {streams} \
             cannot apply (drop --streams, or use more connections with -c)"
        ));
    }
    let creds = match (&s.auth, &url.userinfo) {
        (Some(_), Some(_)) => {
            return usage("credentials twice: give either -a USER:PASS or user:pass@ in the URL")
        }
        (Some(a), None) => {
            let Some((user, pass)) = a.split_once(':') else {
                return usage(format!(
                    "bad -a/--auth '{a}': expected USER:PASS (the user name cannot hold ':')"
                ));
            };
            if user.is_empty() {
                return usage("bad -a/--auth: empty user name before ':'");
            }
            Some((user.to_string(), pass.to_string()))
        }
        (None, Some((u, p))) => Some((u.clone(), p.clone())),
        (None, None) => None,
    };
    if s.digest && creds.is_none() {
        return usage("--digest needs credentials: add -a USER:PASS");
    }
    if s.digest && streams > 1 {
        return usage(format!(
            "--digest answers each challenge before the request goes on, one at a time per \
             connection: --streams {streams} cannot apply (drop --streams, or use more \
             connections with -c)"
        ));
    }
    Ok(headroom_core::BrowserOptions {
        cookies: !s.no_cookies,
        follow: s.follow,
        credentials: creds.map(|(user, password)| headroom_core::Credentials {
            scheme: if s.digest {
                headroom_core::AuthScheme::Digest
            } else {
                headroom_core::AuthScheme::Basic
            },
            user,
            password,
        }),
        compressed: s.compressed,
    })
}

/// `--ramp-up` / `--stage`: the closed population's stages, and the run's length when no
/// -d is given (the ramp and 10s more; the stages alone).
fn ramp_stages(s: &RunSpec) -> Result<(Vec<RampStage>, Option<Duration>), UsageError> {
    let flag = match (s.ramp_up.is_some(), !s.stages.is_empty()) {
        (false, false) => return Ok((Vec::new(), None)),
        (true, true) => {
            return usage("--ramp-up and --stage both shape the ramp; choose one (--ramp-up D is --stage D:USERS)")
        }
        (true, false) => "--ramp-up",
        (false, true) => "--stage",
    };
    if s.rate.is_some() {
        return usage(format!(
            "{flag} ramps the closed model's users; --rate paces its connections from the start"
        ));
    }
    if s.arrival_rate.is_some() {
        return usage(format!(
            "{flag} ramps the closed model's users; open arrivals come at --arrival-rate (ramp them with a scenario's phases)"
        ));
    }
    if let Some(d) = s.ramp_up {
        if d.is_zero() {
            return usage("bad --ramp-up 0: give a positive duration such as 10s");
        }
        let stage = RampStage {
            duration: d,
            users: s
                .connections
                .unwrap_or(headroom_core::spec::DEFAULT_CONNECTIONS),
        };
        return Ok((vec![stage], Some(d + Duration::from_secs(10))));
    }
    if s.stages.len() > headroom_core::MAX_RAMP_STAGES {
        return usage(format!(
            "{} --stage flags: at most {}",
            s.stages.len(),
            headroom_core::MAX_RAMP_STAGES
        ));
    }
    let mut stages = Vec::with_capacity(s.stages.len());
    for s in &s.stages {
        let bad = || {
            UsageError(format!(
                "bad --stage '{s}': expected DURATION:USERS such as 30s:100"
            ))
        };
        let (d, u) = s.rsplit_once(':').ok_or_else(bad)?;
        let duration = parse_duration(d).map_err(|_| bad())?;
        let users: u32 = u.trim().parse().map_err(|_| bad())?;
        stages.push(RampStage { duration, users });
    }
    let peak = RampStage::peak(&stages);
    if peak == 0 {
        return usage("the --stage users never rise above 0: give a stage such as 10s:100");
    }
    if let Some(c) = s.connections.filter(|&c| c != peak) {
        return usage(format!(
            "-c {c} contradicts the stages, which peak at {peak} users: drop -c"
        ));
    }
    let total = RampStage::total(&stages);
    Ok((stages, Some(total.max(Duration::from_millis(1)))))
}

/// `--http2` / `--h2c` / `--streams`, checked against the URL's scheme.
fn http2_options(
    s: &RunSpec,
    tls: bool,
) -> Result<Option<headroom_core::Http2Options>, UsageError> {
    if s.http2 && !tls {
        return usage("--http2 speaks HTTP/2 over TLS (an https:// URL); for clear text use --h2c");
    }
    if s.h2c && tls {
        return usage("--h2c is HTTP/2 in clear text (an http:// URL); over TLS use --http2");
    }
    if !(s.http2 || s.h2c) {
        if s.streams.is_some() {
            return usage("--streams needs HTTP/2: add --http2 (https) or --h2c (http)");
        }
        return Ok(None);
    }
    let streams = s.streams.unwrap_or(1);
    if streams == 0 || streams > 10_000 {
        return usage(format!("bad --streams {streams}: allowed 1 to 10,000"));
    }
    Ok(Some(headroom_core::Http2Options { streams }))
}

/// The TLS settings of the flags, for a server called `host` (SNI and the name checked).
fn tls_options(s: &RunSpec, host: &str) -> Result<TlsOptions, UsageError> {
    let mut o = TlsOptions::new(host);
    o.alpn = vec![b"http/1.1".to_vec()];
    add_tls_flags(s, o)
}

/// `o` (a URL's defaults, or a scenario server's `tls:`) with the TLS flags added: `-k`,
/// `--cacert`, `--cert/--key`, `--tls-min/--tls-max` (when not at their defaults) and
/// `--no-tls-resume`. Files are read here, once: the plan carries their bytes. The result
/// is checked now, so a bad CA or key is a usage error, not a run of failures.
fn add_tls_flags(s: &RunSpec, mut o: TlsOptions) -> Result<TlsOptions, UsageError> {
    o.insecure |= s.insecure;
    if let Some(p) = &s.cacert {
        o.ca_pem = Some(p.clone());
    }
    if let (Some(c), Some(k)) = (&s.cert, &s.key) {
        o.client_cert_pem = Some(c.clone());
        o.client_key_pem = Some(k.clone());
    }
    if s.tls_min != TlsVersion::Tls12 {
        o.min_version = s.tls_min;
    }
    if s.tls_max != TlsVersion::Tls13 {
        o.max_version = s.tls_max;
    }
    o.resume &= !s.no_tls_resume;
    if o.min_version > o.max_version {
        return usage(format!(
            "bad --tls-min {} with --tls-max {}: the lowest version is above the highest",
            o.min_version.name(),
            o.max_version.name()
        ));
    }
    headroom_engine::tls::TlsClient::new(&o).map_err(UsageError)?;
    Ok(o)
}

fn resolve(url: &Url) -> Result<SocketAddr, UsageError> {
    if let Ok(ip) = url.host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, url.port));
    }
    match (url.host.as_str(), url.port).to_socket_addrs() {
        Ok(mut addrs) => match addrs.next() {
            Some(a) => Ok(a),
            None => usage(format!("cannot resolve host '{}': no addresses", url.host)),
        },
        Err(e) => usage(format!(
            "cannot resolve host '{}': {e}; check the spelling or use an IP address",
            url.host
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(
            u,
            Url {
                tls: false,
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/a/b?x=1".into(),
                userinfo: None,
            }
        );
        let u = parse_url("http://localhost").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        let u = parse_url("https://localhost").unwrap();
        assert_eq!((u.tls, u.port, u.path.as_str()), (true, 443, "/"));
        let u = parse_url("HTTPS://h:8443/x").unwrap();
        assert_eq!((u.tls, u.port), (true, 8443));
        let u = parse_url("http://[::1]:9000?q").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 9000, "/?q")
        );
        for bad in [
            "127.0.0.1:80",
            "ftp://x/",
            "http://:80/",
            "http://h:99999/",
            "http://h:0/",
        ] {
            let e = parse_url(bad).unwrap_err().0;
            assert!(e.contains("bad URL"), "{bad}: {e}");
        }
        // Each refusal says what is wrong, quoting the part at fault.
        for (bad, says) in [
            ("localhost:8080", "no scheme"),
            ("ws://h/", "scheme 'ws' is not supported"),
            ("FTP://h/", "scheme 'ftp' is not supported"),
            ("http://h:99999/", "port '99999' is not a number"),
            ("http://a b/", "host 'a b' is not a name"),
            ("http://[::1]x/", "unexpected 'x' after the host"),
            ("http://[::1/", "unclosed '['"),
            ("http:///p", "no host"),
            ("http://h/a b", "the path contains spaces"),
            ("http://h/?q=a b", "the path contains spaces"),
            ("http://h/a\r\nX: 1", "control characters"),
            ("http://:pw@h/", "empty user name"),
            ("http://u:%zz@h/", "not valid percent-encoded UTF-8"),
        ] {
            let e = parse_url(bad).unwrap_err().0;
            assert!(e.contains(says), "{bad}: {e}");
        }
        let u = parse_url("http://Us%65r:p%40ss:x@H/\u{e9}#a b").unwrap();
        assert_eq!(
            (u.userinfo, u.host.as_str(), u.path.as_str()),
            (Some(("User".into(), "p@ss:x".into())), "H", "/%C3%A9")
        );
    }

    #[test]
    fn think() {
        let one = Duration::from_secs(1);
        assert_eq!(
            parse_think("1s", false).unwrap(),
            Distribution::Constant(one)
        );
        assert_eq!(
            parse_think("1s", true).unwrap(),
            Distribution::Exponential { mean: one }
        );
        assert!(matches!(
            parse_think("uniform:1s..2s", false).unwrap(),
            Distribution::Uniform { .. }
        ));
        assert!(parse_think("gauss:1s", false).is_err());
    }

    /// `--timer-slack`: the default when not given, any value up to the bound, and a one-line
    /// refusal (a usage error: exit 2) past it.
    #[test]
    fn timer_slack_has_a_default_and_a_bound() {
        let mut s = RunSpec::new(Target::Url("http://127.0.0.1:9/".into()));
        assert_eq!(
            build(&s).unwrap().plan.timer_slack,
            headroom_core::DEFAULT_TIMER_SLACK
        );
        for ok in [Duration::ZERO, headroom_core::MAX_TIMER_SLACK] {
            s.timer_slack = Some(ok);
            assert_eq!(build(&s).unwrap().plan.timer_slack, ok);
        }
        s.timer_slack = Some(headroom_core::MAX_TIMER_SLACK + Duration::from_micros(1));
        let e = build(&s).unwrap_err().0;
        assert!(
            e.starts_with("bad --timer-slack") && !e.contains('\n'),
            "{e}"
        );
    }
}
