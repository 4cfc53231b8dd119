//! Command-line flags, in two levels (ripgrep's LowArgs/HiArgs): clap parses typed flags here,
//! and [`RunArgs::spec`] turns `run`'s into a [`RunSpec`] (files read into it), which the run
//! library builds into a validated plan or a [`UsageError`] that says which value is wrong and
//! what is allowed. The engine never sees clap types.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use headroom_core::spec::{RunSpec, SpecArrival, Target};
use headroom_core::TlsVersion;

use crate::parse::UsageError;
use crate::parse::{
    parse_bind, parse_duration, parse_expect_status, parse_listen, parse_rate, parse_size,
};

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
  headroom run http://127.0.0.1:8080/ -c 10 -d 10s --repeat 5 --out runs/c10
      (5 runs into runs/c10/1..5; their spread, mean ± 95% interval, in runs/c10/report.html)
  headroom run http://127.0.0.1:8080/ --arrival-rate 50 --per-user 10 --think 2s -d 5m
  headroom run http://127.0.0.1:8080/api -m POST -H 'Content-Type: application/json' --body @req.json
  headroom run scenarios/login.yaml --target 127.0.0.1:8080 --out runs/login
  headroom run http://127.0.0.1:8080/ -c 50 -d 10m --dashboard 8089 --metrics-listen 9464
  headroom run http://127.0.0.1:8080/ -c 100000 --think 1h -d 1m --agents local:8 \\
      --bind 127.1.0.1-127.1.0.20     (past 20,000 connections: several agent processes)

Exit codes: 0 done (errors alone do not fail a run); 1 no request succeeded (one line says what
every reply was: all refused, all 400...), or the run failed a check (--max-error-rate, a
scenario threshold, an agent lost under --on-agent-loss stop), or the preflight found the target
unreachable or speaking another protocol (http:// to a TLS port, --h2c to HTTP/1.1); 2 bad
command line or scenario file (a load flag the file cannot take included); 3 the run completed
but --out's directory is incomplete (a full disk: warned as it happened, summary printed,
summary.json written into reserved space).";

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
    #[command(long_about = crate::serve::SERVE_LONG)]
    Serve(Box<crate::serve::ServeArgs>),
    /// Convert a Tsung XML, httperf wsesslog or HAR file into a native scenario (YAML on stdout).
    #[command(long_about = crate::import::IMPORT_LONG)]
    Import(crate::import::ImportArgs),
    /// SURGE web workload tools: `headroom surge fileset DIR` writes a file set to serve.
    Surge(crate::surge::SurgeArgs),
    /// Sweep server configurations: start, load and sample the server per configuration, store
    /// every run, print the tables.
    #[command(long_about = crate::lab::LAB_LONG)]
    Lab(crate::lab::LabArgs),
    /// Write a self-contained HTML report (inline SVG charts) of a run directory.
    #[command(long_about = crate::report::REPORT_LONG)]
    Report(crate::report::ReportArgs),
    /// Kubernetes: `headroom k8s manifest SCENARIO --agents N` prints the objects of a
    /// distributed run (Indexed Job of agents, controller Job) for `kubectl apply -f -`.
    #[command(after_help = crate::k8s::K8S_AFTER_HELP)]
    K8s(crate::k8s::K8sArgs),
    /// Wait for a controller's run and run its share (needs a token; loopback unless --listen).
    #[command(long_about = crate::dist::AGENT_LONG)]
    Agent(crate::dist::AgentArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print the man page (or write every subcommand's page into a directory with --dir).
    Man(ManArgs),
}

// The arguments of `completions` and `man`, which manpages.rs runs (from `Cli::command()`).
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  source <(headroom completions bash)                   # this shell
  headroom completions bash > /etc/bash_completion.d/headroom
  headroom completions zsh > \"${fpath[1]}/_headroom\"
  headroom completions fish > ~/.config/fish/completions/headroom.fish")]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  headroom man | man -l -                                # read it now
  headroom man --dir /usr/local/share/man/man1           # headroom.1 and headroom-run.1, ...")]
pub struct ManArgs {
    /// Write headroom.1 and one page per subcommand (headroom-run.1, ...) into DIR instead of
    /// printing headroom.1 on stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
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
    /// Users (closed model) or connections (--rate); default 10. With a HAR or a scenario
    /// whose load is one closed population (`load.users` of one entry), the population
    /// (k6's --vus); refused with any other file (its `load:` says how many users).
    #[arg(short = 'c', long, help_heading = "Load")]
    pub connections: Option<u32>,
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
    /// Sends falling due within D of each other go out in one wake-up of the generator
    /// (paced sends at --rate, think times): up to D early, never late. A request sent early
    /// has its latency measured from when it went, and the schedule never moves, so the rate
    /// is held exactly; the server sees the sends of each D together. Default 1ms (about
    /// wrk2's millisecond timers); at --rate 10000 it halves the generator's CPU per response.
    /// 0: every send wakes the generator at its own instant. At most 100ms.
    #[arg(long, value_name = "D", value_parser = parse_duration, help_heading = "Load")]
    pub timer_slack: Option<Duration>,
    /// Arrival process of the open model (with --arrival-rate); default poisson.
    #[arg(long, value_enum, help_heading = "Load")]
    pub arrival: Option<ArrivalArg>,
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
    pub expect_status: Option<String>,
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
    /// not decode fails its request as a `protocol` error. Over HTTP/2 each stream's body is
    /// decoded on its own.
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
    /// Run the same load N times (2 to 100), one after the other, into DIR/1 ... DIR/N (needs
    /// --out DIR); DIR/repeats.json and DIR/report.html give the spread: each figure's mean and
    /// 95% interval over the repeats. Not with --agents, --json, --dashboard or --metrics-listen.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=i64::from(headroom_run::repeats::MAX_REPEATS)), help_heading = "Output")]
    pub repeat: Option<u32>,
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

impl RunArgs {
    /// The run these flags describe, as a spec: every file a flag names (`--body @FILE`,
    /// `--cacert`, `--cert`, `--key`, the scenario and its CSV files) read here, once, into it.
    /// The plan is built from the spec (`headroom_run::build`), as the lab and agents build
    /// theirs.
    pub fn spec(&self) -> Result<RunSpec, UsageError> {
        let read = |flag: &str, p: &PathBuf| {
            headroom_scenario::read_bounded(
                p,
                headroom_scenario::MAX_DATA_BYTES,
                &format!("{flag} file"),
            )
            .map_err(UsageError)
        };
        let scenario = headroom_run::files::is_scenario(&self.url);
        if !scenario && self.target.is_some() {
            return Err(UsageError("--target applies to scenario files only".into()));
        }
        let body = match &self.body {
            None => None,
            Some(b) => Some(match b.strip_prefix('@') {
                Some(path) => headroom_scenario::read_bounded(
                    std::path::Path::new(path),
                    headroom_scenario::MAX_DATA_BYTES,
                    "--body file",
                )
                .map_err(UsageError)?,
                None => b.as_bytes().to_vec(),
            }),
        };
        let mut spec = RunSpec {
            version: headroom_core::spec::SPEC_VERSION,
            target: Target::Url(self.url.clone()),
            connections: self.connections,
            duration: self.duration,
            requests: self.requests,
            per_user: self.per_user,
            think: self.think.clone(),
            rate: self.rate,
            arrival_rate: self.arrival_rate,
            arrival: self.arrival.map(|a| match a {
                ArrivalArg::Poisson => SpecArrival::Poisson,
                ArrivalArg::Constant => SpecArrival::Constant,
            }),
            max_users: self.max_users,
            ramp_up: self.ramp_up,
            stages: self.stages.clone(),
            threads: self.threads,
            method: self.method.clone(),
            headers: self.headers.clone(),
            body,
            no_keepalive: self.no_keepalive,
            pipeline: self.pipeline,
            http2: self.http2,
            h2c: self.h2c,
            streams: self.streams,
            expect_status: self.expect_status.clone(),
            no_cookies: self.no_cookies,
            follow: self.follow,
            auth: self.auth.clone(),
            digest: self.digest,
            compressed: self.compressed,
            connect_timeout: self.connect_timeout,
            timeout: self.timeout,
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            no_nodelay: self.no_nodelay,
            bind: self
                .bind
                .as_deref()
                .map(parse_bind)
                .transpose()?
                .unwrap_or_default(),
            interval: self.interval,
            timer_slack: self.timer_slack,
            insecure: self.insecure,
            cacert: self
                .cacert
                .as_ref()
                .map(|p| read("--cacert", p))
                .transpose()?,
            cert: self.cert.as_ref().map(|p| read("--cert", p)).transpose()?,
            key: self.key.as_ref().map(|p| read("--key", p)).transpose()?,
            tls_min: self.tls_min.into(),
            tls_max: self.tls_max.into(),
            no_tls_resume: self.no_tls_resume,
        };
        if scenario {
            // A flag the file makes meaningless is one line before the file is even read.
            headroom_run::spec::scenario_flags(&spec)?;
            spec.target = Target::Scenario(headroom_run::files::scenario_file(
                std::path::Path::new(&self.url),
                self.target.clone(),
            )?);
        }
        Ok(spec)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    use headroom_core::{Distribution, LoadModel, Plan, RampStage};

    /// The plan of `headroom run URL EXTRA...`, built from its spec as a run builds it.
    fn args(extra: &[&str]) -> Result<Plan, UsageError> {
        let mut v = vec!["headroom", "run", "http://127.0.0.1:8080/"];
        v.extend_from_slice(extra);
        let cli = Cli::try_parse_from(v).expect("clap");
        let Command::Run(r) = cli.command else {
            unreachable!()
        };
        headroom_run::build(&r.spec()?).map(|b| b.plan)
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
