//! Command-line flags, in two levels (ripgrep's LowArgs/HiArgs): clap parses typed flags here,
//! and [`RunArgs::to_plan`] turns them into a validated [`Plan`] or a [`UsageError`] that says
//! which value is wrong and what is allowed. The engine never sees clap types.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use headroom_core::{
    ArrivalProcess, Distribution, HttpRequest, LoadModel, Plan, RampStage, SocketOptions,
    StatusSet, StopCondition, TlsOptions, TlsVersion,
};

use crate::parse::{
    parse_bind, parse_duration, parse_expect_status, parse_listen, parse_rate, parse_size, usage,
};
// Re-exported for scenario.rs until its run-building part moves (issue 17): every other module
// takes these from `crate::parse`.
pub use crate::parse::{default_threads, UsageError};

const ABOUT: &str = "Load generator and server-scalability lab.";

const RUN_LONG: &str = "\
Load an HTTP/1.1 server at URL and report throughput, latency (corrected for coordinated \
omission), connect time and errors by kind.

Three load models:
  closed (default)  -c users, each looping requests on a keep-alive connection
                    (add --per-user N for the C x N run: each user does N requests, then leaves)
  constant rate     --rate R requests/s over -c connections; latency measured from the
                    intended send time, with the uncorrected figure beside it (like wrk2)
  open arrivals     --arrival-rate U new users/s (Poisson; --arrival constant), each doing
                    --per-user N requests with --think T between them, then leaving

Scenario files: instead of URL give FILE.yaml (sessions, arrival phases, thresholds; see
docs/scenario.md), a Tsung FILE.xml or a browser's FILE.har (docs/import.md); --target HOST:PORT
overrides the file's server.

Examples:
  headroom run http://127.0.0.1:8080/ -c 50 -d 30s
  headroom run http://127.0.0.1:8080/ -c 20 --per-user 500
  headroom run http://127.0.0.1:8080/ -c 1000 --ramp-up 10s -d 1m
  headroom run http://127.0.0.1:8080/ --rate 2000 -c 20 -d 1m --out runs/r2000
  headroom run http://127.0.0.1:8080/ --arrival-rate 50 --per-user 10 --think 2s -d 5m
  headroom run http://127.0.0.1:8080/api -m POST -H 'Content-Type: application/json' --body @req.json
  headroom run scenarios/login.yaml --target 127.0.0.1:8080 --out runs/login
  headroom run http://127.0.0.1:8080/ -c 50 -d 10m --dashboard 8089 --metrics-listen 9464
  headroom run http://127.0.0.1:8080/ -c 100000 --think 1h -d 1m --agents local:8 \\
      --bind 127.1.0.1-127.1.0.20     (past 20,000 connections: several agent processes)

Exit codes: 0 done; 1 the run failed a check (--max-error-rate, a scenario threshold, an agent
lost under --on-agent-loss stop) or could
not reach the target; 2 bad command line or scenario file.";

#[derive(Parser, Debug)]
#[command(name = "headroom", version, about = ABOUT, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Load a server at a URL (quick mode, like wrk or hey).
    #[command(long_about = RUN_LONG)]
    Run(Box<RunArgs>),
    /// Start a small server inside headroom, load it for a few seconds and print the report.
    Demo(DemoArgs),
    /// Run a reference server (thread-per-conn, pool, reactor over select/poll/epoll, async).
    Serve(Box<crate::serve::ServeArgs>),
    /// Convert a Tsung XML, httperf wsesslog or HAR file into a native scenario (YAML on stdout).
    Import(crate::import::ImportArgs),
    /// SURGE web workload tools: `headroom surge fileset DIR` writes a file set to serve.
    Surge(crate::surge::SurgeArgs),
    /// Sweep server configurations: start, load and sample the server per configuration, store
    /// every run, print the tables.
    #[command(long_about = crate::lab::LAB_LONG)]
    Lab(crate::lab::LabArgs),
    /// Write a self-contained HTML report (inline SVG charts) of a run directory.
    Report(crate::report::ReportArgs),
    /// Kubernetes: `headroom k8s manifest SCENARIO --agents N` prints the objects of a
    /// distributed run (Indexed Job of agents, controller Job) for `kubectl apply -f -`.
    #[command(after_help = crate::k8s::K8S_AFTER_HELP)]
    K8s(crate::k8s::K8sArgs),
    /// Wait for a controller's run and run its share (needs a token; loopback unless --listen).
    Agent(crate::dist::AgentArgs),
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// How long to load the embedded server.
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Concurrent users.
    #[arg(short = 'c', long, default_value_t = 50)]
    pub connections: u32,
    /// Run directory (default: headroom-runs/demo-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not write report.html into the run directory.
    #[arg(long)]
    pub no_report: bool,
    /// Serve a live dashboard of the demo at ADDR: PORT (on 127.0.0.1) or HOST:PORT.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub dashboard: Option<SocketAddr>,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Target URL, e.g. http://127.0.0.1:8080/path or https://localhost:8443/, or a scenario file:
    /// FILE.yaml (see docs/scenario.md), a Tsung FILE.xml or a HAR (FILE.har, or FILE.json with
    /// log.entries; see docs/import.md).
    #[arg(value_name = "URL|SCENARIO")]
    pub url: String,
    /// Scenario files: send to this server (HOST:PORT) instead of the file's `servers`.
    #[arg(long, value_name = "HOST:PORT", help_heading = "Load")]
    pub target: Option<String>,

    // ---- load model ----
    /// Users (closed model) or connections (--rate).
    #[arg(short = 'c', long, default_value_t = 10, help_heading = "Load")]
    pub connections: u32,
    /// How long to run, e.g. 30s, 5m, 1h30m (default 10s unless -n or --per-user bounds the run).
    #[arg(short = 'd', long, value_parser = parse_duration, help_heading = "Load")]
    pub duration: Option<Duration>,
    /// Stop after this many requests in total.
    #[arg(short = 'n', long, help_heading = "Load")]
    pub requests: Option<u64>,
    /// Requests per user, after which the user leaves (closed: the C x N run; open: per arrival).
    #[arg(long, help_heading = "Load")]
    pub per_user: Option<u64>,
    /// Think time between a user's requests: 500ms, or exp:2s, const:1s, uniform:1s..3s.
    /// A bare value is constant in the closed model and exponential in the open model.
    #[arg(long, value_name = "T", help_heading = "Load")]
    pub think: Option<String>,
    /// Constant throughput: total requests per second over the -c connections.
    #[arg(long, value_name = "R", help_heading = "Load")]
    pub rate: Option<f64>,
    /// Open model: new users per second.
    #[arg(long, value_name = "U", help_heading = "Load")]
    pub arrival_rate: Option<f64>,
    /// Arrival process of the open model.
    #[arg(long, value_enum, default_value = "poisson", help_heading = "Load")]
    pub arrival: ArrivalArg,
    /// Open model: stop admitting users after this many have arrived.
    #[arg(long, help_heading = "Load")]
    pub max_users: Option<u64>,
    /// Closed model: start the -c users evenly over D instead of all in the same millisecond
    /// (k6's ramping-vus): user g of N starts at D·g/N, counted over every thread and agent,
    /// so -c 1000 --ramp-up 10s starts 100 users a second. Without -d the run lasts D + 10s.
    #[arg(long, value_name = "D", value_parser = parse_duration, help_heading = "Load")]
    pub ramp_up: Option<Duration>,
    /// Closed model: a stage DURATION:USERS (repeat the flag, as k6's --stage): the number of
    /// users moves linearly to USERS over DURATION, from 0 before the first stage; a user above
    /// the number leaves before its next request. The population is the highest USERS (no -c
    /// needed). Without -d the run ends with the last stage.
    /// E.g. --stage 10s:100 --stage 30s:100 --stage 10s:0
    #[arg(long = "stage", value_name = "DUR:USERS", help_heading = "Load")]
    pub stages: Vec<String>,
    /// Worker threads, one event loop each (default: the number of cores).
    #[arg(short = 't', long, help_heading = "Load")]
    pub threads: Option<usize>,

    // ---- HTTP ----
    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET", help_heading = "HTTP")]
    pub method: String,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(
        short = 'H',
        long = "header",
        value_name = "HEADER",
        help_heading = "HTTP"
    )]
    pub headers: Vec<String>,
    /// Request body: a string, or @FILE to read it from a file.
    #[arg(long, help_heading = "HTTP")]
    pub body: Option<String>,
    /// Open a new connection for every request (sends Connection: close).
    #[arg(long, help_heading = "HTTP")]
    pub no_keepalive: bool,
    /// Requests written back to back on a connection before reading the replies.
    #[arg(long, default_value_t = 1, value_name = "K", help_heading = "HTTP")]
    pub pipeline: u32,
    /// Speak HTTP/2 over TLS (https:// URLs; ALPN h2).
    #[arg(long, help_heading = "HTTP")]
    pub http2: bool,
    /// Speak HTTP/2 in clear text with prior knowledge (http:// URLs; h2c).
    #[arg(long, conflicts_with = "http2", help_heading = "HTTP")]
    pub h2c: bool,
    /// HTTP/2: requests in flight at once on each connection (-c connections x S streams),
    /// never more than the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    #[arg(long, value_name = "S", help_heading = "HTTP")]
    pub streams: Option<u32>,
    /// The statuses a reply should have, e.g. 200,204 or 200-299,404 or 2xx: any other status
    /// is an `unexpected_status` error, and an expected 4xx or 5xx is no error. Without it a
    /// 4xx or 5xx is an error (http_4xx, http_5xx) and anything else is not.
    #[arg(long, value_name = "CODES", value_parser = parse_expect_status, help_heading = "HTTP")]
    pub expect_status: Option<StatusSet>,
    /// Keep no cookies. By default each user (connection) keeps a cookie jar, as a browser,
    /// Tsung and k6 do: what the server sets with Set-Cookie is sent back on later requests.
    #[arg(long, help_heading = "HTTP")]
    pub no_cookies: bool,
    /// Follow up to N redirects per request (301, 302, 303, 307, 308 to the same server), each
    /// hop timed and counted as a request; a longer chain counts as `redirect_limit`. Default 0
    /// (as wrk): a 3xx is the reply.
    #[arg(long, default_value_t = 0, value_name = "N", help_heading = "HTTP")]
    pub follow: u32,
    /// Credentials, sent with Basic auth on every request (or with --digest, answering the
    /// server's Digest challenge). A URL's user:pass@ does the same.
    #[arg(short = 'a', long, value_name = "USER:PASS", help_heading = "HTTP")]
    pub auth: Option<String>,
    /// Use HTTP Digest auth (RFC 7616, MD5 or SHA-256) for the credentials of -a or the URL:
    /// each user's first request gets the server's 401 challenge and is sent again with the
    /// answer; later requests answer it at once.
    #[arg(long, help_heading = "HTTP")]
    pub digest: bool,
    /// Ask for compressed replies, as a browser does: send `Accept-Encoding: gzip, br` (unless
    /// -H gives one), decode gzip, deflate and br bodies as they arrive (without keeping them)
    /// and count compressed responses and body bytes as sent and as decoded. A body that does
    /// not decode fails its request as a `protocol` error. HTTP/1.1 only.
    #[arg(long, help_heading = "HTTP")]
    pub compressed: bool,

    // ---- timeouts and sockets ----
    /// Give up on a connect after this long.
    #[arg(long, default_value = "5s", value_parser = parse_duration, help_heading = "Network")]
    pub connect_timeout: Duration,
    /// Give up on a response after this long from sending the request.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Network")]
    pub timeout: Duration,
    /// SO_SNDBUF per connection, e.g. 8k, 6m (the TCP window factor).
    #[arg(long, value_parser = parse_size, help_heading = "Network")]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF per connection, e.g. 8k, 6m.
    #[arg(long, value_parser = parse_size, help_heading = "Network")]
    pub rcvbuf: Option<u32>,
    /// Disable TCP_NODELAY (on by default).
    #[arg(long, help_heading = "Network")]
    pub no_nodelay: bool,
    /// Source addresses to spread connections over: 127.0.0.2-127.0.0.50 or a,b,c
    /// (each gives ~28k ports towards one target).
    #[arg(long, value_name = "ADDRS", help_heading = "Network")]
    pub bind: Option<String>,
    /// Skip the initial connect check (load the target even if it refuses connections).
    #[arg(long, help_heading = "Network")]
    pub no_preflight: bool,

    // ---- TLS ----
    /// Accept any server certificate (self-signed, expired, another name); the handshake is
    /// still done and timed.
    #[arg(short = 'k', long, help_heading = "TLS")]
    pub insecure: bool,
    /// Trust the CA certificates in FILE (PEM) instead of the system's store.
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub cacert: Option<PathBuf>,
    /// Client certificate chain (PEM) for mutual TLS; needs --key.
    #[arg(long, value_name = "FILE", requires = "key", help_heading = "TLS")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM) of --cert.
    #[arg(long, value_name = "FILE", requires = "cert", help_heading = "TLS")]
    pub key: Option<PathBuf>,
    /// Lowest TLS version to offer.
    #[arg(
        long,
        value_enum,
        default_value = "1.2",
        value_name = "VERSION",
        help_heading = "TLS"
    )]
    pub tls_min: TlsVersionArg,
    /// Highest TLS version to offer.
    #[arg(
        long,
        value_enum,
        default_value = "1.3",
        value_name = "VERSION",
        help_heading = "TLS"
    )]
    pub tls_max: TlsVersionArg,
    /// A full TLS handshake on every new connection (resumption, by session ticket or id, is on
    /// by default: the handshake's cost is a factor to study both ways).
    #[arg(long, help_heading = "TLS")]
    pub no_tls_resume: bool,

    // ---- output ----
    /// Reporting interval.
    #[arg(long, default_value = "1s", value_parser = parse_duration, help_heading = "Output")]
    pub interval: Duration,
    /// Write a run directory: summary.json, intervals.jsonl, latency.hlog (as the run goes),
    /// then intervals.csv and report.html (see docs/report.md).
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub out: Option<PathBuf>,
    /// With --out: do not write report.html at the end.
    #[arg(long, help_heading = "Output")]
    pub no_report: bool,
    /// Print summary.json to stdout instead of the human summary.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// No live progress.
    #[arg(short = 'q', long, help_heading = "Output")]
    pub quiet: bool,
    /// Exit 1 if the error rate exceeds this: a fraction (0.01) or a percentage (1%).
    #[arg(long, value_parser = parse_rate, value_name = "X", help_heading = "Output")]
    pub max_error_rate: Option<f64>,
    /// Serve a live dashboard of the run at ADDR: PORT (on 127.0.0.1) or HOST:PORT
    /// (0.0.0.0:PORT is reachable from the network). Its URL is printed on stderr.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen, help_heading = "Output")]
    pub dashboard: Option<SocketAddr>,
    /// Serve the run's counters for Prometheus at http://ADDR/metrics (ADDR as for --dashboard).
    #[arg(long, value_name = "ADDR", value_parser = parse_listen, help_heading = "Output")]
    pub metrics_listen: Option<SocketAddr>,
    /// Keep --dashboard and --metrics-listen up this long after the run, so a browser or a
    /// scraper gets the final figures (Ctrl-C ends it sooner).
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION", help_heading = "Output")]
    pub linger: Duration,
    /// Sample this process and its children (the server under test, e.g. `$(pgrep -o nginx)`)
    /// each interval: CPU user/system and memory go into intervals.jsonl and the report.
    #[arg(long, value_name = "PID", help_heading = "Output")]
    pub server_pid: Option<u32>,

    // ---- distributed ----
    #[command(flatten)]
    pub dist: crate::dist::AgentsArgs,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersionArg {
    #[value(name = "1.2")]
    Tls12,
    #[value(name = "1.3")]
    Tls13,
}

impl From<TlsVersionArg> for TlsVersion {
    fn from(v: TlsVersionArg) -> TlsVersion {
        match v {
            TlsVersionArg::Tls12 => TlsVersion::Tls12,
            TlsVersionArg::Tls13 => TlsVersion::Tls13,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum ArrivalArg {
    Poisson,
    Constant,
}

/// The parts of an http:// or https:// URL that matter to a client.
#[derive(Debug, PartialEq)]
pub struct Url {
    /// https: TLS on every connection.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, starting with '/'.
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

pub fn parse_url(s: &str) -> Result<Url, UsageError> {
    let fix = "expected e.g. http://127.0.0.1:8080/path";
    let Some((scheme, rest)) = s.split_once("://") else {
        return usage(format!("bad URL '{s}': no scheme; {fix}"));
    };
    let tls = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        other => {
            return usage(format!(
                "bad URL '{s}': scheme '{other}' is not supported; {fix}"
            ))
        }
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let path = path.split('#').next().unwrap_or("/").to_string();
    let (userinfo, authority) = match authority.rsplit_once('@') {
        Some((info, host)) => {
            let (user, pass) = info.split_once(':').unwrap_or((info, ""));
            let (Some(user), Some(pass)) = (percent_decode(user), percent_decode(pass)) else {
                return usage(format!(
                    "bad URL '{s}': the user info is not valid percent-encoded UTF-8"
                ));
            };
            if user.is_empty() {
                return usage(format!("bad URL '{s}': empty user name before '@'"));
            }
            (Some((user, pass)), host)
        }
        None => (None, authority),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((h, after)) = v6.split_once(']') else {
            return usage(format!("bad URL '{s}': unclosed '[' in the host"));
        };
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => {
                return usage(format!(
                    "bad URL '{s}': unexpected '{after}' after the host"
                ))
            }
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return usage(format!("bad URL '{s}': no host; {fix}"));
    }
    let port = match port {
        None if tls => 443,
        None => 80,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return usage(format!(
                    "bad URL '{s}': port '{p}' is not a number from 1 to 65535; use e.g. http://127.0.0.1:8080/"
                ))
            }
        },
    };
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return usage(format!(
            "bad URL '{s}': the path contains spaces or control characters; percent-encode them"
        ));
    }
    Ok(Url {
        tls,
        host,
        port,
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

impl RunArgs {
    /// Validate the flags and build the plan.
    pub fn to_plan(&self) -> Result<Plan, UsageError> {
        let url = parse_url(&self.url)?;
        let target = resolve(&url)?;
        let method = self.method.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return usage(format!(
                "bad --method '{}': expected a word such as GET or POST",
                self.method
            ));
        }
        let headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let body = match &self.body {
            None => Vec::new(),
            Some(b) => match b.strip_prefix('@') {
                Some(path) => std::fs::read(path)
                    .map_err(|e| UsageError(format!("cannot read --body file '{path}': {e}")))?,
                None => b.as_bytes().to_vec(),
            },
        };
        let default_port = if url.tls { 443 } else { 80 };
        let host = if url.port == default_port {
            url.host.clone()
        } else if url.host.contains(':') {
            format!("[{}]:{}", url.host, url.port)
        } else {
            format!("{}:{}", url.host, url.port)
        };
        if self.connections == 0 {
            return usage("bad -c/--connections 0: at least 1 is needed");
        }
        let (ramp, ramp_default) = self.ramp_stages()?;
        let closed_users = match RampStage::peak(&ramp) {
            0 => self.connections,
            peak => peak,
        };
        if self.pipeline == 0 || self.pipeline > 1024 {
            return usage(format!(
                "bad --pipeline {}: allowed 1 to 1024",
                self.pipeline
            ));
        }
        if self.rate.is_some() && self.arrival_rate.is_some() {
            return usage("--rate and --arrival-rate are different models; choose one");
        }
        if self.interval < Duration::from_millis(10) {
            return usage("bad --interval: at least 10ms");
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return usage("--timeout and --connect-timeout must be above zero");
        }
        if self.max_users.is_some() && self.arrival_rate.is_none() {
            return usage("--max-users belongs to the open model: add --arrival-rate U");
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
        let model = if let Some(rate) = self.rate {
            if self.think.is_some() || self.per_user.is_some() {
                return usage("--rate sets the pace itself: drop --think and --per-user");
            }
            if self.pipeline > 1 {
                return usage("--rate and --pipeline cannot be combined");
            }
            LoadModel::Rate {
                connections: self.connections,
                rate: positive("--rate", rate)?,
            }
        } else if let Some(rate) = self.arrival_rate {
            let think = self
                .think
                .as_deref()
                .map(|t| parse_think(t, true))
                .transpose()?;
            LoadModel::Open {
                rate: positive("--arrival-rate", rate)?,
                process: match self.arrival {
                    ArrivalArg::Poisson => ArrivalProcess::Poisson,
                    ArrivalArg::Constant => ArrivalProcess::Constant,
                },
                per_user: self.per_user.unwrap_or(1).max(1),
                think,
                max_users: self.max_users,
            }
        } else {
            let think = self
                .think
                .as_deref()
                .map(|t| parse_think(t, false))
                .transpose()?;
            if self.per_user == Some(0) {
                return usage("bad --per-user 0: at least 1");
            }
            LoadModel::Closed {
                users: closed_users,
                per_user: self.per_user,
                think,
            }
        };
        // A run bounded by counts gets no default duration; otherwise 10s, like wrk.
        let bounded = self.requests.is_some()
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
        let duration = self.duration.or(if bounded {
            None
        } else {
            Some(ramp_default.unwrap_or(Duration::from_secs(10)))
        });
        if duration.is_some_and(|d| d.is_zero()) {
            return usage("bad -d/--duration 0: give a positive duration such as 10s");
        }
        let mut threads = self.threads.unwrap_or_else(default_threads);
        if threads == 0 || threads > 1024 {
            return usage(format!("bad -t/--threads {threads}: allowed 1 to 1024"));
        }
        if !matches!(model, LoadModel::Open { .. }) {
            // More threads than users would leave some idle.
            threads = threads.min(closed_users as usize);
        }
        let bind = self
            .bind
            .as_deref()
            .map(parse_bind)
            .transpose()?
            .unwrap_or_default();
        if bind.iter().any(|ip| ip.is_ipv4() != target.is_ipv4()) {
            return usage("--bind addresses must be of the same family (IPv4/IPv6) as the target");
        }
        let agent = self.user_agent(&url)?;
        let plan = Plan {
            target,
            target_name: self.url.clone(),
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
                requests: self.requests,
            },
            threads,
            interval: self.interval,
            connect_timeout: self.connect_timeout,
            timeout: self.timeout,
            expect_status: self.expect_status.unwrap_or_default(),
            keepalive: !self.no_keepalive,
            pipeline: self.pipeline,
            socket: SocketOptions {
                sndbuf: self.sndbuf,
                rcvbuf: self.rcvbuf,
                nodelay: !self.no_nodelay,
                bind,
            },
            workload: None,
            segment: Default::default(),
            start_at: None,
            tls: if url.tls {
                let mut o = self.tls_options(&url.host)?;
                if self.http2 {
                    o.alpn = vec![b"h2".to_vec()];
                }
                Some(std::sync::Arc::new(o))
            } else {
                None
            },
            http2: self.http2_options(url.tls)?,
            agent,
        };
        plan.validate().map_err(|e| UsageError(e.0))?;
        Ok(plan)
    }

    /// Cookies, redirects and credentials (`--no-cookies`, `--follow`, `-a`, `--digest`, the
    /// URL's user info).
    pub fn user_agent(&self, url: &Url) -> Result<headroom_core::UserAgent, UsageError> {
        if self.follow > headroom_core::MAX_FOLLOW {
            return usage(format!(
                "bad --follow {}: allowed 0 to {}",
                self.follow,
                headroom_core::MAX_FOLLOW
            ));
        }
        let h2 = self.http2 || self.h2c;
        if h2 && self.follow > 0 {
            return usage("--follow works over HTTP/1.1 only: drop --http2/--h2c or --follow");
        }
        let creds = match (&self.auth, &url.userinfo) {
            (Some(_), Some(_)) => {
                return usage(
                    "credentials twice: give either -a USER:PASS or user:pass@ in the URL",
                )
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
        if self.digest && creds.is_none() {
            return usage("--digest needs credentials: add -a USER:PASS");
        }
        if self.digest && h2 {
            return usage("--digest works over HTTP/1.1 only: drop --http2/--h2c or --digest");
        }
        if self.compressed && h2 {
            return usage(
                "--compressed works over HTTP/1.1 only: drop --http2/--h2c or --compressed",
            );
        }
        Ok(headroom_core::UserAgent {
            cookies: !self.no_cookies,
            follow: self.follow,
            credentials: creds.map(|(user, password)| headroom_core::Credentials {
                scheme: if self.digest {
                    headroom_core::AuthScheme::Digest
                } else {
                    headroom_core::AuthScheme::Basic
                },
                user,
                password,
            }),
            compressed: self.compressed,
        })
    }

    /// `--ramp-up` / `--stage`: the closed population's stages, and the run's length when no
    /// -d is given (the ramp and 10s more; the stages alone).
    fn ramp_stages(&self) -> Result<(Vec<RampStage>, Option<Duration>), UsageError> {
        let flag = match (self.ramp_up.is_some(), !self.stages.is_empty()) {
            (false, false) => return Ok((Vec::new(), None)),
            (true, true) => {
                return usage("--ramp-up and --stage both shape the ramp; choose one (--ramp-up D is --stage D:USERS)")
            }
            (true, false) => "--ramp-up",
            (false, true) => "--stage",
        };
        if self.rate.is_some() {
            return usage(format!(
                "{flag} ramps the closed model's users; --rate paces its connections from the start"
            ));
        }
        if self.arrival_rate.is_some() {
            return usage(format!(
                "{flag} ramps the closed model's users; open arrivals come at --arrival-rate (ramp them with a scenario's phases)"
            ));
        }
        if let Some(d) = self.ramp_up {
            if d.is_zero() {
                return usage("bad --ramp-up 0: give a positive duration such as 10s");
            }
            let stage = RampStage {
                duration: d,
                users: self.connections,
            };
            return Ok((vec![stage], Some(d + Duration::from_secs(10))));
        }
        if self.stages.len() > headroom_core::MAX_RAMP_STAGES {
            return usage(format!(
                "{} --stage flags: at most {}",
                self.stages.len(),
                headroom_core::MAX_RAMP_STAGES
            ));
        }
        let mut stages = Vec::with_capacity(self.stages.len());
        for s in &self.stages {
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
        if self.connections != 10 && self.connections != peak {
            return usage(format!(
                "-c {} contradicts the stages, which peak at {peak} users: drop -c",
                self.connections
            ));
        }
        let total = RampStage::total(&stages);
        Ok((stages, Some(total.max(Duration::from_millis(1)))))
    }

    /// `--http2` / `--h2c` / `--streams`, checked against the URL's scheme.
    fn http2_options(&self, tls: bool) -> Result<Option<headroom_core::Http2Options>, UsageError> {
        if self.http2 && !tls {
            return usage(
                "--http2 speaks HTTP/2 over TLS (an https:// URL); for clear text use --h2c",
            );
        }
        if self.h2c && tls {
            return usage("--h2c is HTTP/2 in clear text (an http:// URL); over TLS use --http2");
        }
        if !(self.http2 || self.h2c) {
            if self.streams.is_some() {
                return usage("--streams needs HTTP/2: add --http2 (https) or --h2c (http)");
            }
            return Ok(None);
        }
        let streams = self.streams.unwrap_or(1);
        if streams == 0 || streams > 10_000 {
            return usage(format!("bad --streams {streams}: allowed 1 to 10,000"));
        }
        Ok(Some(headroom_core::Http2Options { streams }))
    }

    /// The TLS settings of the flags, for a server called `host` (SNI and the name checked).
    pub fn tls_options(&self, host: &str) -> Result<TlsOptions, UsageError> {
        let mut o = TlsOptions::new(host);
        o.alpn = vec![b"http/1.1".to_vec()];
        self.add_tls_flags(o)
    }

    /// `o` (a URL's defaults, or a scenario server's `tls:`) with the TLS flags added: `-k`,
    /// `--cacert`, `--cert/--key`, `--tls-min/--tls-max` (when not at their defaults) and
    /// `--no-tls-resume`. Files are read here, once: the plan carries their bytes. The result
    /// is checked now, so a bad CA or key is a usage error, not a run of failures.
    pub fn add_tls_flags(&self, mut o: TlsOptions) -> Result<TlsOptions, UsageError> {
        let read = |flag: &str, p: &PathBuf| {
            std::fs::read(p)
                .map_err(|e| UsageError(format!("cannot read {flag} file '{}': {e}", p.display())))
        };
        o.insecure |= self.insecure;
        if let Some(p) = &self.cacert {
            o.ca_pem = Some(read("--cacert", p)?);
        }
        if let (Some(c), Some(k)) = (&self.cert, &self.key) {
            o.client_cert_pem = Some(read("--cert", c)?);
            o.client_key_pem = Some(read("--key", k)?);
        }
        if self.tls_min != TlsVersionArg::Tls12 {
            o.min_version = self.tls_min.into();
        }
        if self.tls_max != TlsVersionArg::Tls13 {
            o.max_version = self.tls_max.into();
        }
        o.resume &= !self.no_tls_resume;
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
    }

    #[test]
    fn think_and_bind() {
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
        assert_eq!(parse_bind("127.0.0.2-127.0.0.50").unwrap().len(), 49);
        assert_eq!(parse_bind("127.0.0.2, 127.0.0.3").unwrap().len(), 2);
        assert!(parse_bind("127.0.0.9-127.0.0.2").is_err());
    }

    fn args(extra: &[&str]) -> Result<Plan, UsageError> {
        let mut v = vec!["headroom", "run", "http://127.0.0.1:8080/"];
        v.extend_from_slice(extra);
        let cli = Cli::try_parse_from(v).expect("clap");
        let Command::Run(r) = cli.command else {
            unreachable!()
        };
        r.to_plan()
    }

    #[test]
    fn models_from_flags() {
        let p = args(&["-c", "20", "--per-user", "500"]).unwrap();
        assert_eq!(
            p.model,
            LoadModel::Closed {
                users: 20,
                per_user: Some(500),
                think: None
            }
        );
        assert_eq!(p.stop.duration, None, "a C x N run is bounded by its count");
        let p = args(&["-c", "5"]).unwrap();
        assert_eq!(p.stop.duration, Some(Duration::from_secs(10)));
        let p = args(&["--rate", "1000", "-c", "10", "-d", "5s"]).unwrap();
        assert!(matches!(
            p.model,
            LoadModel::Rate {
                connections: 10,
                ..
            }
        ));
        let p = args(&["--arrival-rate", "50", "--per-user", "3", "--think", "1s"]).unwrap();
        let LoadModel::Open {
            think, per_user, ..
        } = p.model
        else {
            panic!()
        };
        assert_eq!(per_user, 3);
        assert!(matches!(think, Some(Distribution::Exponential { .. })));
        assert!(args(&["--rate", "10", "--arrival-rate", "5"]).is_err());
        assert!(args(&["--rate", "10", "--pipeline", "4"]).is_err());
        assert!(args(&["-c", "0"]).is_err());
        assert!(args(&["--max-users", "5"]).is_err());
    }

    #[test]
    fn ramp_flags() {
        let p = args(&["-c", "1000", "--ramp-up", "10s"]).unwrap();
        let ten = Duration::from_secs(10);
        assert_eq!(
            p.ramp,
            vec![RampStage {
                duration: ten,
                users: 1000
            }]
        );
        assert_eq!(
            p.stop.duration,
            Some(ten * 2),
            "the ramp and 10s at full strength"
        );
        let p = args(&["-c", "1000", "--ramp-up", "10s", "-d", "12s"]).unwrap();
        assert_eq!(p.stop.duration, Some(Duration::from_secs(12)));
        let p = args(&[
            "--stage", "10s:100", "--stage", "30s:100", "--stage", "10s:0",
        ])
        .unwrap();
        assert_eq!(p.ramp.len(), 3);
        assert!(matches!(p.model, LoadModel::Closed { users: 100, .. }));
        assert_eq!(p.stop.duration, Some(Duration::from_secs(50)));
        assert!(args(&[]).unwrap().ramp.is_empty(), "no ramp unless asked");
        for (bad, says) in [
            (&["--ramp-up", "10s", "--rate", "100"][..], "--rate"),
            (
                &["--ramp-up", "10s", "--arrival-rate", "5"][..],
                "--arrival-rate",
            ),
            (&["--ramp-up", "0s"][..], "positive"),
            (&["--ramp-up", "1s", "--stage", "1s:5"][..], "choose one"),
            (&["--stage", "10s"][..], "DURATION:USERS"),
            (&["--stage", "10s:-1"][..], "DURATION:USERS"),
            (&["--stage", "10s:0"][..], "above 0"),
            (&["-c", "50", "--stage", "10s:100"][..], "drop -c"),
        ] {
            let e = args(bad).unwrap_err().0;
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn expect_status_flag() {
        let p = args(&[]).unwrap();
        assert!(p.expect_status.is_empty(), "no expectation by default");
        let p = args(&["--expect-status", "200,204,3xx"]).unwrap();
        assert!(p.expect_status.contains(204) && p.expect_status.contains(302));
        assert!(!p.expect_status.contains(404));
        for bad in ["", "600", "20o", "4xx,"] {
            let mut v = vec![
                "headroom",
                "run",
                "http://127.0.0.1:8080/",
                "--expect-status",
            ];
            v.push(bad);
            let e = Cli::try_parse_from(v).unwrap_err().to_string();
            assert!(e.contains("--expect-status"), "{bad}: {e}");
        }
    }
}
