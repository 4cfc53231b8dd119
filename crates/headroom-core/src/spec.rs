//! What a run is, before it is a [`crate::Plan`]: the spec.
//!
//! A `RunSpec` is everything that shapes a run's plan, as plain data: the target (a URL, or a
//! scenario as text with every file it reads inside as bytes) and the load, HTTP, network and
//! TLS settings. The CLI builds one from `headroom run`'s flags (reading `--body @FILE`,
//! `--cacert` and the scenario's CSV files there), the lab builds one per configuration, and a
//! controller sends the same value to its agents in their job. One builder (in `headroom-run`)
//! turns it into a `Plan` for all of them.
//!
//! A spec names no path to open: a field that was a file on the command line holds the file's
//! bytes here, so a job can never make an agent read a file of its own machine.
//!
//! Values that are text on the command line (`--think exp:2s`, `-H 'Name: value'`, `--stage
//! 10s:100`) stay text here and are checked by the builder, so a hand-made spec is refused with
//! the same one-line reason as the flag would be.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::TlsVersion;

/// The version of the spec's layout; a receiver refuses any other. 2: `connections` and
/// `arrival` are `None` unless given, so a scenario can tell `-c 10` from no `-c`.
pub const SPEC_VERSION: u32 = 2;

/// Users of a URL run without `-c` (as `headroom run --help` says).
pub const DEFAULT_CONNECTIONS: u32 = 10;

/// A file a scenario reads (a CSV feeder, a TLS certificate), by the name the scenario gives
/// it, with its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecFile {
    pub name: String,
    pub data: Vec<u8>,
}

/// A scenario as the builder compiles it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSpec {
    /// The name shown for it (the file name the user gave); never opened.
    pub name: String,
    /// The scenario in headroom's native format (a Tsung XML or a HAR already converted,
    /// includes inlined).
    pub yaml: String,
    /// Every file it reads, by its name in the scenario. The builder reads no other.
    pub files: Vec<SpecFile>,
    /// Send to this HOST:PORT instead of the scenario's first server (`--target`).
    pub target: Option<String>,
}

/// What the run loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Target {
    /// An `http://` or `https://` URL (quick mode, as wrk).
    Url(String),
    /// A scenario.
    Scenario(ScenarioSpec),
}

/// The load model's arrival process (`--arrival`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SpecArrival {
    #[default]
    Poisson,
    Constant,
}

/// One run, as plain data. Field names and meanings are `headroom run`'s flags (see
/// docs/cli.md); `None` and `false` are the flag's default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// [`SPEC_VERSION`] of whoever built it.
    pub version: u32,
    pub target: Target,

    // ---- load ----
    /// `-c`: users (closed model) or connections (`--rate`); `None`: not given (a URL run's
    /// default is [`DEFAULT_CONNECTIONS`]; a scenario keeps its own population).
    pub connections: Option<u32>,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub per_user: Option<u64>,
    pub think: Option<String>,
    pub rate: Option<f64>,
    pub arrival_rate: Option<f64>,
    /// `--arrival`; `None`: not given (Poisson, for the open model only).
    pub arrival: Option<SpecArrival>,
    pub max_users: Option<u64>,
    pub ramp_up: Option<Duration>,
    pub stages: Vec<String>,
    /// Worker threads; `None` is one per core of the machine that builds the plan.
    pub threads: Option<usize>,

    // ---- HTTP ----
    pub method: String,
    pub headers: Vec<String>,
    /// The request body's bytes (`--body TEXT` or the contents of `--body @FILE`).
    pub body: Option<Vec<u8>>,
    pub no_keepalive: bool,
    pub pipeline: u32,
    pub http2: bool,
    pub h2c: bool,
    pub streams: Option<u32>,
    /// `--expect-status` as written (`200,204`, `2xx`).
    pub expect_status: Option<String>,
    pub no_cookies: bool,
    pub follow: u32,
    /// `-a USER:PASS`.
    pub auth: Option<String>,
    pub digest: bool,
    pub compressed: bool,

    // ---- network ----
    pub connect_timeout: Duration,
    pub timeout: Duration,
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    pub no_nodelay: bool,
    /// Source addresses to spread connections over (`--bind`).
    pub bind: Vec<IpAddr>,
    pub interval: Duration,
    /// `--timer-slack`; `None`: the default ([`crate::DEFAULT_TIMER_SLACK`]). Absent from a
    /// spec of an earlier headroom.
    #[serde(default)]
    pub timer_slack: Option<Duration>,

    // ---- TLS ----
    pub insecure: bool,
    /// PEM bytes of `--cacert`.
    pub cacert: Option<Vec<u8>>,
    /// PEM bytes of `--cert` and `--key` (both or neither).
    pub cert: Option<Vec<u8>>,
    pub key: Option<Vec<u8>>,
    pub tls_min: TlsVersion,
    pub tls_max: TlsVersion,
    pub no_tls_resume: bool,
}

impl RunSpec {
    /// A spec with `headroom run`'s defaults for `target`.
    pub fn new(target: Target) -> RunSpec {
        RunSpec {
            version: SPEC_VERSION,
            target,
            connections: None,
            duration: None,
            requests: None,
            per_user: None,
            think: None,
            rate: None,
            arrival_rate: None,
            arrival: None,
            max_users: None,
            ramp_up: None,
            stages: Vec::new(),
            threads: None,
            method: "GET".into(),
            headers: Vec::new(),
            body: None,
            no_keepalive: false,
            pipeline: 1,
            http2: false,
            h2c: false,
            streams: None,
            expect_status: None,
            no_cookies: false,
            follow: 0,
            auth: None,
            digest: false,
            compressed: false,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
            sndbuf: None,
            rcvbuf: None,
            no_nodelay: false,
            bind: Vec::new(),
            interval: Duration::from_secs(1),
            timer_slack: None,
            insecure: false,
            cacert: None,
            cert: None,
            key: None,
            tls_min: TlsVersion::Tls12,
            tls_max: TlsVersion::Tls13,
            no_tls_resume: false,
        }
    }

    /// The scenario's name, or the URL: what the run is called.
    pub fn name(&self) -> &str {
        match &self.target {
            Target::Url(u) => u,
            Target::Scenario(s) => &s.name,
        }
    }
}
