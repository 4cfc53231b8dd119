//! The experiment file (`headroom lab EXPERIMENT.yaml`): which server to start and how, the
//! factors to sweep, the load, repetitions and the tables to print. See `docs/lab.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::intervals::BreakRule;
use crate::server::{Factors, Ready, ServerSpec, DEFAULT_BEFORE_RUN_TIMEOUT};
pub use crate::setup::expand_known;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    pub server: ServerSection,
    /// Factor name -> levels, in the order they are swept and shown.
    #[serde(default)]
    pub factors: BTreeMap<String, Vec<String>>,
    /// An explicit list of configurations instead of the full factorial.
    #[serde(default)]
    pub combinations: Option<Vec<BTreeMap<String, String>>>,
    /// Most configurations an experiment may have (default [`MAX_CONFIGURATIONS`]); counted
    /// before the factorial is expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_configurations: Option<u64>,
    pub load: LoadSection,
    /// Load run before each measured run and discarded (e.g. `2s`).
    #[serde(default)]
    pub warmup: Option<String>,
    /// Measured runs per configuration (mean and 95% CI over them).
    #[serde(default = "one")]
    pub repeat: u32,
    #[serde(default)]
    pub tables: Vec<TableSpec>,
    /// Output directory, relative to the experiment file (`--output` overrides it).
    #[serde(default)]
    pub output: Option<String>,
    /// Overrides for `--quick` (a short version for tests and a first look).
    #[serde(default)]
    pub quick: Option<Quick>,
    /// How capacity figures decide that the server broke.
    #[serde(default)]
    pub capacity: Option<Capacity>,
    /// Extra server series.
    #[serde(default)]
    pub monitor: Option<MonitorSection>,
    /// Where the full variant's loads run when the command line gives no `--agents`:
    /// `local:N` (N child processes, past one process's descriptors). `quick.agents` is the
    /// quick variant's (default: none, one process).
    #[serde(default)]
    pub agents: Option<String>,
}

/// `monitor`: series beside the /proc samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorSection {
    /// A Prometheus / OpenMetrics text endpoint (template, e.g.
    /// `http://127.0.0.1:{port}/metrics`), scraped at every server sample.
    #[serde(default)]
    pub prometheus: Option<String>,
    /// Metric names to keep (default: every series, at most 64).
    #[serde(default)]
    pub series: Vec<String>,
}

/// `capacity_connections` is the peak of connections open at once before the first interval
/// whose error rate exceeds `max_error_rate` (default 1%) or that has a connect timeout, or
/// (with `p99:`) the first of `p99_intervals` intervals in a row whose p99 passes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// A fraction (0.01) or a percentage ("1%").
    #[serde(default)]
    pub max_error_rate: Option<String>,
    /// A response time: the server is broken once the p99 of `p99_intervals` intervals in a row
    /// passes it (a server that still answers, but too slowly, as the study's saturated one).
    #[serde(default)]
    pub p99: Option<String>,
    /// How many intervals in a row (default 3), so a single slow second does not end it.
    #[serde(default)]
    pub p99_intervals: Option<u32>,
    /// Max sustainable rate: search the arrival rate instead of running the scenario's load.
    #[serde(default)]
    pub rate: Option<RateSection>,
}

/// `capacity.rate`: each run probes arrival rates (sessions per second of the scenario's
/// sessions, arriving as an open phase) and bisects to the highest one that keeps the SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSection {
    /// The first rate probed.
    pub from: f64,
    /// The highest rate probed.
    pub to: f64,
    /// Stop when the gap between the best good and the worst bad rate is this fraction of the
    /// good one ("10%" or 0.1; default 10%).
    #[serde(default)]
    pub precision: Option<String>,
    /// At most this many probes per run (default 10).
    #[serde(default)]
    pub max_probes: Option<u32>,
    /// `poisson` (default) or `constant` arrivals.
    #[serde(default)]
    pub arrival: Option<String>,
    /// Most sessions alive at once during a probe; arrivals beyond it are dropped and fail the
    /// probe (default 10000, well under one process's descriptor limit).
    #[serde(default)]
    pub max_users: Option<u64>,
    /// Pause between probes, so the server drains what the last one left (default 1s).
    #[serde(default)]
    pub pause: Option<String>,
    pub slo: SloSection,
}

/// What a probe must keep to count as sustained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloSection {
    /// Highest p99 latency (e.g. `50ms`): of requests, or of the transaction named by `of`.
    #[serde(default)]
    pub p99: Option<String>,
    /// Highest mean latency, of requests or of `of`.
    #[serde(default)]
    pub mean: Option<String>,
    /// Highest error rate (default `capacity.max_error_rate`, else 1%).
    #[serde(default)]
    pub error_rate: Option<String>,
    /// A transaction name: `p99` and `mean` then apply to it (e.g. a whole session's time).
    #[serde(default)]
    pub of: Option<String>,
}

/// `capacity.rate`, checked and in units.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSearch {
    pub from: f64,
    pub to: f64,
    pub precision: f64,
    pub max_probes: u32,
    pub poisson: bool,
    pub max_users: u64,
    pub pause: Duration,
    pub slo: Slo,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    pub p99: Option<Duration>,
    pub mean: Option<Duration>,
    pub error_rate: f64,
    pub of: Option<String>,
}

/// A fraction (0.01) or a percentage ("1%").
fn fraction(field: &str, v: &str) -> Result<f64, String> {
    let t = v.trim();
    let x = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    };
    match x {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!(
            "{field}: '{v}' is not a fraction (0.01) or a percentage (1%)"
        )),
    }
}

impl RateSection {
    fn check(&self, default_error_rate: f64) -> Result<RateSearch, String> {
        if !(self.from.is_finite() && self.from > 0.0) {
            return Err("capacity.rate.from must be a rate above 0".into());
        }
        if !(self.to.is_finite() && self.to >= self.from) {
            return Err("capacity.rate.to must be at least capacity.rate.from".into());
        }
        let precision = match &self.precision {
            Some(p) => fraction("capacity.rate.precision", p)?,
            None => 0.1,
        };
        if precision <= 0.0 {
            return Err("capacity.rate.precision must be above 0".into());
        }
        let poisson = match self.arrival.as_deref().unwrap_or("poisson") {
            "poisson" => true,
            "constant" => false,
            other => {
                return Err(format!(
                    "capacity.rate.arrival: '{other}'; expected poisson or constant"
                ))
            }
        };
        let s = &self.slo;
        let slo = Slo {
            p99: dur("capacity.rate.slo.p99", &s.p99)?,
            mean: dur("capacity.rate.slo.mean", &s.mean)?,
            error_rate: match &s.error_rate {
                Some(e) => fraction("capacity.rate.slo.error_rate", e)?,
                None => default_error_rate,
            },
            of: s.of.clone(),
        };
        Ok(RateSearch {
            from: self.from,
            to: self.to,
            precision,
            max_probes: self.max_probes.unwrap_or(10).max(1),
            poisson,
            max_users: self.max_users.unwrap_or(10_000).max(1),
            pause: dur("capacity.rate.pause", &self.pause)?.unwrap_or(Duration::from_secs(1)),
            slo,
        })
    }
}

impl Experiment {
    /// The error rate above which the server counts as broken (default 1%).
    pub fn capacity_error_rate(&self) -> f64 {
        self.capacity
            .as_ref()
            .and_then(|c| c.max_error_rate.as_deref())
            .and_then(|v| fraction("capacity.max_error_rate", v).ok())
            .unwrap_or(0.01)
    }

    /// When an interval of a load counts as the server's break (`capacity:`).
    pub fn break_rule(&self) -> BreakRule {
        let c = self.capacity.as_ref();
        BreakRule {
            max_error_rate: self.capacity_error_rate(),
            p99: c
                .and_then(|c| dur("capacity.p99", &c.p99).ok().flatten())
                .map(|d| d.as_micros().min(u128::from(u64::MAX)) as u64),
            p99_intervals: c.and_then(|c| c.p99_intervals).unwrap_or(3).max(1),
        }
    }
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// `sh -c` template; `{factor}`, `{port}` (a free port per run) and `{headroom}` (this
    /// binary) are replaced.
    pub command: String,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub cwd: Option<String>,
    pub ready: ReadySection,
    #[serde(default)]
    pub ready_timeout: Option<String>,
    /// TERM (default), INT, QUIT, HUP, USR1, USR2 or KILL.
    #[serde(default)]
    pub stop_signal: Option<String>,
    #[serde(default)]
    pub grace: Option<String>,
    /// `taskset -c` CPU list for the server, e.g. "0".
    #[serde(default)]
    pub cpus: Option<String>,
    /// Programs the server needs, each with the Debian package that installs it
    /// (`{nginx: nginx-light}`): one missing stops the lab before its first run, naming the
    /// package.
    #[serde(default)]
    pub requires: BTreeMap<String, String>,
    /// Configuration files rendered from templates before each start: the template's text
    /// with the factors' and built-ins' `{name}`s replaced, written to `path`.
    #[serde(default)]
    pub files: Vec<FileSection>,
    /// A `sh -c` template run before each start of the server (a settle step: wait out a
    /// previous run's sockets, prepare a data directory); it must exit 0.
    #[serde(default)]
    pub before_run: Option<String>,
    /// How long `before_run` may take (default 120s).
    #[serde(default)]
    pub before_run_timeout: Option<String>,
}

/// A configuration file of the server, rendered from a template per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSection {
    /// The template (relative to the experiment file; itself a template, e.g.
    /// `servers/{server}.conf`).
    pub template: String,
    /// Where the rendered file goes (a template, e.g. `{output}/conf/nginx-{port}.conf`).
    pub path: String,
}

/// Exactly one of `port`, `http` (with `path`), `line`, `xmpp` (with `domain`), `command`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadySection {
    #[serde(default)]
    pub port: Option<String>,
    #[serde(default)]
    pub http: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub line: Option<String>,
    /// An XMPP server: a client stream opened to `domain` is answered with its features.
    #[serde(default)]
    pub xmpp: Option<String>,
    #[serde(default)]
    pub domain: Option<String>,
    /// A `sh -c` template that exits 0 once the server is ready (`psql -c 'SELECT 1'`).
    #[serde(default)]
    pub command: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSection {
    /// A scenario file (relative to the experiment file); `{factor}` placeholders in its text
    /// are replaced per configuration.
    pub scenario: String,
    /// Where the load goes (template); default `127.0.0.1:{port}`.
    #[serde(default)]
    pub target: Option<String>,
    /// Length of each measured run (default: the scenario's own, else 10s).
    #[serde(default)]
    pub duration: Option<String>,
    /// Generator threads (default: the cores not pinned to the server, at least 1).
    #[serde(default)]
    pub threads: Option<usize>,
    #[serde(default)]
    pub timeout: Option<String>,
    /// Keep connections open between requests (template, `true` by default). `false` sends
    /// `Connection: close` and opens a connection (and, over TLS, a handshake) per request, so
    /// a factor such as `keepalive: ["true", "false"]` sweeps it.
    #[serde(default)]
    pub keepalive: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    pub metric: String,
    #[serde(default)]
    pub rows: Vec<String>,
    #[serde(default)]
    pub cols: Vec<String>,
    #[serde(default)]
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    #[serde(default)]
    pub factors: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    pub repeat: Option<u32>,
    #[serde(default)]
    pub warmup: Option<String>,
    #[serde(default)]
    pub duration: Option<String>,
    /// Overrides `capacity.rate.max_probes`.
    #[serde(default)]
    pub max_probes: Option<u32>,
    /// The quick variant's agents (`local:N`), as `agents:` is the full one's.
    #[serde(default)]
    pub agents: Option<String>,
    /// The quick variant's own list of configurations, in place of `combinations:` (levels a
    /// full run does not use, such as fewer clients).
    #[serde(default)]
    pub combinations: Option<Vec<BTreeMap<String, String>>>,
}

/// A loaded experiment with its location and what `--quick` changed already applied.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub exp: Experiment,
    pub path: PathBuf,
    pub dir: PathBuf,
    pub warmup: Duration,
    pub duration: Option<Duration>,
    pub server: ServerSpec,
    /// Every configuration to run, in order.
    pub configurations: Vec<Factors>,
    /// `capacity.rate`: each run is a search for the max sustainable rate.
    pub rate_search: Option<RateSearch>,
    /// Loaded with `--quick`.
    pub quick: bool,
    /// The file's agents for this variant (`local:N`), used when the command line gives none.
    pub agents: Option<String>,
}

impl Loaded {
    /// The first program of `server.requires` that is not installed, as the one-line error
    /// that names its package; `None` when all are found (on `PATH`, `/usr/sbin`, `/sbin`).
    pub fn missing_program(&self) -> Option<String> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
        for d in ["/usr/local/sbin", "/usr/sbin", "/sbin"] {
            dirs.push(PathBuf::from(d));
        }
        self.exp
            .server
            .requires
            .iter()
            .find_map(|(program, package)| {
                let found = dirs.iter().any(|d| is_executable(&d.join(program)));
                (!found).then(|| {
                    format!(
                    "{}: the server needs `{program}`, which is not installed: install Debian's \
                     package {package} (apt-get install {package})",
                    self.exp.name
                )
                })
            })
    }
}

/// The server's templates expand with every factor and built-in: a typo, or a shell `{ ...; }`
/// group written without doubling its braces, is one error at load, not a failed run per
/// configuration.
fn check_templates(
    server: &ServerSpec,
    factors: &BTreeMap<String, Vec<String>>,
) -> Result<(), String> {
    let values: Factors = factors
        .keys()
        .map(String::as_str)
        .chain(BUILTINS)
        .map(|k| (k.to_string(), "x".to_string()))
        .collect();
    let check = |what: &str, t: &str| {
        crate::server::expand(t, &values)
            .map(drop)
            .map_err(|e| format!("server.{what}: {e}"))
    };
    check("command", &server.command)?;
    if let Some(b) = &server.before_run {
        check("before_run", b)?;
    }
    for (k, v) in &server.env {
        check(&format!("env.{k}"), v)?;
    }
    if let Some(c) = &server.cpus {
        check("cpus", c)?;
    }
    match &server.ready {
        Ready::Port(a) => check("ready.port", a),
        Ready::Http { addr, path } => check("ready.http", addr).and(check("ready.path", path)),
        Ready::Line(l) => check("ready.line", l),
        Ready::Xmpp { addr, domain } => {
            check("ready.xmpp", addr).and(check("ready.domain", domain))
        }
        Ready::Command(c) => check("ready.command", c),
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `local:N` with 1 <= N <= 64: the only agents an experiment file may name (others need a
/// token, which belongs on the command line or in HEADROOM_TOKEN).
fn check_agents(field: &str, v: &str) -> Result<(), String> {
    match v.trim().strip_prefix("local:").map(str::parse::<u32>) {
        Some(Ok(n)) if (1..=64).contains(&n) => Ok(()),
        _ => Err(format!(
            "{field}: '{v}' is not local:N (N from 1 to 64); other agents go on the command line \
             (--agents)"
        )),
    }
}

/// The placeholders every template may use besides the factors.
pub const BUILTINS: [&str; 3] = ["port", "headroom", "output"];

fn dur(field: &str, v: &Option<String>) -> Result<Option<Duration>, String> {
    match v {
        None => Ok(None),
        Some(s) => {
            let t = s.trim();
            if let Ok(secs) = t.parse::<f64>() {
                if secs.is_finite() && secs >= 0.0 {
                    return Ok(Some(Duration::from_secs_f64(secs)));
                }
            }
            humantime::parse_duration(t)
                .map(Some)
                .map_err(|_| format!("{field}: '{s}' is not a duration (e.g. 500ms, 10s, 1m)"))
        }
    }
}

fn signal(name: &Option<String>) -> Result<i32, String> {
    let n = name.as_deref().unwrap_or("TERM").trim();
    let n = n.strip_prefix("SIG").unwrap_or(n);
    Ok(match n.to_ascii_uppercase().as_str() {
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "HUP" => libc::SIGHUP,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "KILL" => libc::SIGKILL,
        other => {
            return Err(format!(
                "server.stop_signal: unknown signal '{other}'; expected TERM, INT, QUIT, HUP, USR1, USR2 or KILL"
            ))
        }
    })
}

/// Most configurations (the factorial of `factors:`, or the `combinations:` listed) an experiment
/// may have unless it says `max_configurations:`. 12 factors of 10 levels would be 10^12
/// configurations, which no lab could run and whose list alone would not fit in memory.
pub const MAX_CONFIGURATIONS: u64 = 10_000;

/// The highest `max_configurations:` accepted.
pub const MAX_CONFIGURATIONS_CEILING: u64 = 1_000_000;

/// Most memory the list of configurations may take (estimated before it is built): each
/// configuration is a map holding a copy of every factor's name and level.
pub const MAX_CONFIGURATIONS_BYTES: u64 = 256 << 20;

/// Estimated bytes of the expanded factorial (saturating): per configuration a map node per 11
/// entries, and per entry the name and the level (each a heap allocation).
fn factorial_bytes(factors: &BTreeMap<String, Vec<String>>, count: u64) -> u64 {
    let per_config = 600u64.saturating_mul(factors.len().div_ceil(11).max(1) as u64);
    let mut total = count.saturating_mul(per_config);
    for (k, levels) in factors {
        let n = levels.len().max(1) as u64;
        let level_bytes: u64 = levels.iter().map(|l| l.len() as u64 + 32).sum();
        total = total
            .saturating_add(count.saturating_mul(k.len() as u64 + 32))
            .saturating_add((count / n).saturating_mul(level_bytes));
    }
    total
}

/// How many configurations the experiment has, without expanding them (saturating).
pub fn count_configurations(exp: &Experiment) -> u64 {
    match &exp.combinations {
        Some(c) => c.len() as u64,
        None => exp
            .factors
            .values()
            .fold(1u64, |n, l| n.saturating_mul(l.len() as u64)),
    }
}

/// Reads and checks an experiment file. Errors name `file:line:column` where the YAML reader
/// knows it, and say what was expected.
pub fn load(path: &Path, quick: bool) -> Result<Loaded, String> {
    let text = headroom_scenario::read_bounded_string(
        path,
        headroom_scenario::MAX_SCENARIO_BYTES,
        "experiment file",
    )?;
    load_str(&text, path, quick)
}

/// [`load`] of `text`, as if read from `path` (which is not read; it names the file in errors
/// and is the base of relative paths).
pub fn load_str(text: &str, path: &Path, quick: bool) -> Result<Loaded, String> {
    let name = path.display().to_string();
    let exp: Experiment = marked_yaml::from_yaml(0, text).map_err(|e| locate(&name, text, e))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut exp = exp;
    let mut duration = dur("load.duration", &exp.load.duration)?;
    let mut warmup = dur("warmup", &exp.warmup)?.unwrap_or(Duration::ZERO);
    if quick {
        let Some(q) = exp.quick.clone() else {
            return Err(format!(
                "{name}: --quick needs a `quick:` section (factors, repeat, warmup, duration)"
            ));
        };
        if let Some(f) = q.factors {
            for (k, v) in f {
                if !exp.factors.contains_key(&k) {
                    return Err(format!(
                        "{name}: quick.factors names '{k}', which is no factor"
                    ));
                }
                exp.factors.insert(k, v);
            }
            if exp.combinations.is_some() {
                // Keep only the combinations whose levels survive the quick factor lists.
                let f = exp.factors.clone();
                if let Some(c) = exp.combinations.as_mut() {
                    c.retain(|m| {
                        m.iter()
                            .all(|(k, v)| f.get(k).is_none_or(|l| l.contains(v)))
                    });
                }
            }
        }
        if let Some(c) = q.combinations {
            exp.combinations = Some(c);
        }
        if let Some(r) = q.repeat {
            exp.repeat = r;
        }
        if let Some(w) = dur("quick.warmup", &q.warmup)? {
            warmup = w;
        }
        if let Some(d) = dur("quick.duration", &q.duration)? {
            duration = Some(d);
        }
    }
    if let Some(v) = exp
        .capacity
        .as_ref()
        .and_then(|c| c.max_error_rate.as_deref())
    {
        fraction("capacity.max_error_rate", v).map_err(|e| format!("{name}: {e}"))?;
    }
    if let Some(c) = &exp.capacity {
        dur("capacity.p99", &c.p99).map_err(|e| format!("{name}: {e}"))?;
        if c.p99_intervals.is_some() && c.p99.is_none() {
            return Err(format!(
                "{name}: capacity.p99_intervals goes with capacity.p99"
            ));
        }
        if c.p99_intervals.is_some_and(|n| n == 0 || n > 3600) {
            return Err(format!("{name}: capacity.p99_intervals is from 1 to 3600"));
        }
    }
    let mut rate_search = match exp.capacity.as_ref().and_then(|c| c.rate.as_ref()) {
        Some(r) => Some(
            r.check(exp.capacity_error_rate())
                .map_err(|e| format!("{name}: {e}"))?,
        ),
        None => None,
    };
    if quick {
        if let (Some(r), Some(n)) = (
            rate_search.as_mut(),
            exp.quick.as_ref().and_then(|q| q.max_probes),
        ) {
            r.max_probes = n.max(1);
        }
    }
    if exp.repeat == 0 {
        return Err(format!("{name}: repeat must be at least 1"));
    }
    for (k, levels) in &exp.factors {
        if BUILTINS.contains(&k.as_str()) {
            return Err(format!(
                "{name}: factor '{k}' clashes with the builtin placeholder {{{k}}}"
            ));
        }
        if levels.is_empty() {
            return Err(format!("{name}: factor '{k}' has no levels"));
        }
    }
    let limit = exp.max_configurations.unwrap_or(MAX_CONFIGURATIONS);
    if limit > MAX_CONFIGURATIONS_CEILING {
        return Err(format!(
            "{name}: max_configurations: {limit} is above {MAX_CONFIGURATIONS_CEILING}"
        ));
    }
    let count = count_configurations(&exp);
    if count > limit {
        let sizes = exp
            .factors
            .iter()
            .map(|(k, l)| format!("{k} {}", l.len()))
            .collect::<Vec<_>>()
            .join(" x ");
        let count = if count == u64::MAX {
            "more than 18446744073709551614".to_string()
        } else {
            count.to_string()
        };
        let how = if exp.combinations.is_some() {
            format!("{count} combinations are listed")
        } else {
            format!("the factors ({sizes}) make {count} configurations")
        };
        return Err(format!(
            "{name}: {how}, more than the limit of {limit}: list the configurations to run under \
             `combinations:` (see docs/lab.md), use fewer levels, or raise `max_configurations:`"
        ));
    }
    if exp.combinations.is_none() {
        let bytes = factorial_bytes(&exp.factors, count);
        if bytes > MAX_CONFIGURATIONS_BYTES {
            return Err(format!(
                "{name}: the {count} configurations would take about {} MiB to list (long \
                 levels or many factors), more than {} MiB: list the configurations to run under \
                 `combinations:` (see docs/lab.md)",
                bytes >> 20,
                MAX_CONFIGURATIONS_BYTES >> 20
            ));
        }
    }
    let configurations = match &exp.combinations {
        Some(c) => {
            for m in c {
                for k in m.keys() {
                    if !exp.factors.contains_key(k) {
                        return Err(format!(
                            "{name}: a combination names '{k}', which is no factor (factors: {})",
                            exp.factors.keys().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
                if let Some(k) = exp.factors.keys().find(|k| !m.contains_key(*k)) {
                    return Err(format!(
                        "{name}: a combination gives no level for factor '{k}' (each combination \
                         names every factor)"
                    ));
                }
            }
            c.clone()
        }
        None => factorial(&exp.factors),
    };
    if configurations.is_empty() {
        return Err(format!("{name}: no configuration to run"));
    }
    let r = &exp.server.ready;
    let given = [
        r.port.is_some(),
        r.http.is_some(),
        r.line.is_some(),
        r.xmpp.is_some(),
        r.command.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(format!(
            "{name}: server.ready: give exactly one of port: HOST:PORT, http: HOST:PORT (with \
             path), line: TEXT, xmpp: HOST:PORT (with domain), command: CMD"
        ));
    }
    if r.path.is_some() && r.http.is_none() {
        return Err(format!(
            "{name}: server.ready.path goes with http: HOST:PORT"
        ));
    }
    if r.domain.is_some() && r.xmpp.is_none() {
        return Err(format!(
            "{name}: server.ready.domain goes with xmpp: HOST:PORT"
        ));
    }
    let ready = if let Some(p) = &r.port {
        Ready::Port(p.clone())
    } else if let Some(a) = &r.http {
        Ready::Http {
            addr: a.clone(),
            path: r.path.clone().unwrap_or_else(|| "/".into()),
        }
    } else if let Some(l) = &r.line {
        Ready::Line(l.clone())
    } else if let Some(a) = &r.xmpp {
        Ready::Xmpp {
            addr: a.clone(),
            domain: r.domain.clone().unwrap_or_else(|| "localhost".into()),
        }
    } else {
        Ready::Command(r.command.clone().unwrap_or_default())
    };
    for (program, package) in &exp.server.requires {
        if program.trim().is_empty() || package.trim().is_empty() || program.contains('/') {
            return Err(format!(
                "{name}: server.requires: '{program}: {package}' wants a program name (no path) \
                 and the Debian package that installs it"
            ));
        }
    }
    let files = exp
        .server
        .files
        .iter()
        .map(|f| (f.template.clone(), f.path.clone()))
        .collect();
    let server = ServerSpec {
        command: exp.server.command.clone(),
        env: exp
            .server
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        cwd: exp.server.cwd.as_ref().map(|c| dir.join(c)),
        ready,
        ready_timeout: dur("server.ready_timeout", &exp.server.ready_timeout)?
            .unwrap_or(Duration::from_secs(10)),
        stop_signal: signal(&exp.server.stop_signal)?,
        grace: dur("server.grace", &exp.server.grace)?.unwrap_or(Duration::from_secs(5)),
        cpus: exp.server.cpus.clone(),
        files,
        template_dir: dir.clone(),
        before_run: exp.server.before_run.clone(),
        before_run_timeout: dur("server.before_run_timeout", &exp.server.before_run_timeout)?
            .unwrap_or(DEFAULT_BEFORE_RUN_TIMEOUT),
    };
    let agents = if quick {
        exp.quick.as_ref().and_then(|q| q.agents.clone())
    } else {
        exp.agents.clone()
    };
    if let Some(a) = &exp.agents {
        check_agents("agents", a).map_err(|e| format!("{name}: {e}"))?;
    }
    if let Some(a) = exp.quick.as_ref().and_then(|q| q.agents.as_ref()) {
        check_agents("quick.agents", a).map_err(|e| format!("{name}: {e}"))?;
    }
    check_templates(&server, &exp.factors).map_err(|e| format!("{name}: {e}"))?;
    for t in &exp.tables {
        for f in t.rows.iter().chain(t.cols.iter()) {
            if !exp.factors.contains_key(f) {
                return Err(format!(
                    "{name}: table '{}' groups by '{f}', which is no factor",
                    t.metric
                ));
            }
        }
    }
    Ok(Loaded {
        path: path.to_path_buf(),
        dir,
        warmup,
        duration,
        server,
        configurations,
        rate_search,
        quick,
        agents,
        exp,
    })
}

fn locate(file: &str, text: &str, e: marked_yaml::FromYamlError) -> String {
    match &e {
        marked_yaml::FromYamlError::FromNode(n) => match n.start_mark() {
            Some(m) => format!("{file}:{}:{}: {e}", m.line(), m.column()),
            // The reader gives no position for an unknown key: find the key in the text.
            None => match unknown_key_position(text, &e.to_string()) {
                Some((line, col)) => format!("{file}:{line}:{col}: {e}"),
                None => format!("{file}: {e}"),
            },
        },
        marked_yaml::FromYamlError::ParseYaml(_) => format!("{file}: {e}"),
    }
}

/// Line and column (1-based) of the first `KEY:` for an "Unknown field `KEY`" message.
fn unknown_key_position(text: &str, message: &str) -> Option<(usize, usize)> {
    let key = message.split("field `").nth(1)?.split('`').next()?;
    if key.is_empty() {
        return None; // `find("")` matches everywhere: the loop below would never advance
    }
    for (i, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find(key) {
            let col = from + at;
            let before = line[..col].chars().last();
            let after = line[col + key.len()..].trim_start();
            if before.is_none_or(|c| c == ' ' || c == '{' || c == ',') && after.starts_with(':') {
                return Some((i + 1, col + 1));
            }
            from = col + key.len();
        }
    }
    None
}

/// Every combination of the factors' levels, the first factor varying slowest.
pub fn factorial(factors: &BTreeMap<String, Vec<String>>) -> Vec<Factors> {
    let mut out = vec![Factors::new()];
    for (k, levels) in factors {
        let mut next = Vec::with_capacity(out.len() * levels.len());
        for base in &out {
            for l in levels {
                let mut m = base.clone();
                m.insert(k.clone(), l.clone());
                next.push(m);
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factorial_orders_first_factor_slowest() {
        let mut f = BTreeMap::new();
        f.insert("a".to_string(), vec!["1".to_string(), "2".to_string()]);
        f.insert("b".to_string(), vec!["x".to_string(), "y".to_string()]);
        let c = factorial(&f);
        let flat: Vec<String> = c.iter().map(|m| format!("{}{}", m["a"], m["b"])).collect();
        assert_eq!(flat, ["1x", "1y", "2x", "2y"]);
    }

    #[test]
    fn known_placeholders_only() {
        let mut v = Factors::new();
        v.insert("port".into(), "8080".into());
        assert_eq!(
            expand_known("GET /u/${user} on {port} {other}", &v),
            "GET /u/${user} on 8080 {other}"
        );
    }

    #[test]
    fn files_load_and_errors_are_located() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.yaml");
        std::fs::write(
            &p,
            "name: t\nserver: {command: 'x --port {port}', ready: {port: '127.0.0.1:{port}'}}\n\
             factors: {w: ['1', '2'], s: [a]}\nload: {scenario: s.yaml, duration: 2s}\n\
             repeat: 2\nquick: {factors: {w: ['1']}, repeat: 1, duration: 500ms}\n",
        )
        .unwrap();
        let l = load(&p, false).unwrap();
        assert_eq!(l.configurations.len(), 2);
        assert_eq!(l.exp.repeat, 2);
        assert_eq!(l.duration, Some(Duration::from_secs(2)));
        let q = load(&p, true).unwrap();
        assert_eq!(q.configurations.len(), 1);
        assert_eq!(q.exp.repeat, 1);
        assert_eq!(q.duration, Some(Duration::from_millis(500)));
        std::fs::write(
            &p,
            "name: t\nserver: {command: x, ready: {port: 'h:1'}}\nload: {scenario: s.yaml}\nrepat: 3\n",
        )
        .unwrap();
        let e = load(&p, false).unwrap_err();
        assert!(e.contains("e.yaml:4:1") && e.contains("repat"), "{e}");
        std::fs::write(
            &p,
            "name: t\nserver: {command: x, ready: {port: 'h:1', line: ok}}\nload: {scenario: s.yaml}\n",
        )
        .unwrap();
        assert!(load(&p, false).unwrap_err().contains("exactly one of"));
    }

    #[test]
    fn real_server_keys_load_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.yaml");
        let write = |server: &str, extra: &str| {
            std::fs::write(
                &p,
                format!(
                    "name: t\nserver: {server}\nload: {{scenario: s.yaml}}\n{extra}\
                     quick: {{repeat: 1}}\n"
                ),
            )
            .unwrap();
        };
        write(
            "{command: x, ready: {xmpp: '127.0.0.1:{port}', domain: lab.test}, \
             requires: {sh: dash}, files: [{template: 'a-{port}.conf', path: '{output}/a.conf'}], \
             before_run: 'sleep 0', before_run_timeout: 3s}",
            "agents: local:2\n",
        );
        let l = load(&p, false).unwrap();
        assert_eq!(
            l.server.ready,
            Ready::Xmpp {
                addr: "127.0.0.1:{port}".into(),
                domain: "lab.test".into()
            }
        );
        assert_eq!(l.server.files.len(), 1);
        assert_eq!(l.server.template_dir, dir.path());
        assert_eq!(l.server.before_run.as_deref(), Some("sleep 0"));
        assert_eq!(l.server.before_run_timeout, Duration::from_secs(3));
        // The full variant's agents; the quick one runs in one process unless it says.
        assert_eq!(l.agents.as_deref(), Some("local:2"));
        assert_eq!(load(&p, true).unwrap().agents, None);
        // No `p99:`: errors alone break the server, as before.
        assert_eq!(l.exp.break_rule(), BreakRule::errors(0.01));
        // `sh` is installed everywhere: nothing missing.
        assert_eq!(l.missing_program(), None);

        write(
            "{command: x, ready: {port: 'h:1'}}",
            "capacity: {max_error_rate: 2%, p99: 10ms}\n",
        );
        let rule = load(&p, false).unwrap().exp.break_rule();
        assert_eq!(
            rule,
            BreakRule {
                max_error_rate: 0.02,
                p99: Some(10_000),
                p99_intervals: 3
            }
        );
        write(
            "{command: x, ready: {command: 'true'}, requires: {headroom-no-such-server: nginx-light}}",
            "",
        );
        let l = load(&p, false).unwrap();
        assert_eq!(l.server.ready, Ready::Command("true".into()));
        let e = l.missing_program().unwrap();
        assert!(
            e.contains("headroom-no-such-server") && e.contains("apt-get install nginx-light"),
            "{e}"
        );
        assert!(!e.contains('\n'));

        for (server, extra, want) in [
            (
                "{command: x, ready: {xmpp: 'h:1', port: 'h:1'}}",
                "",
                "exactly one of",
            ),
            ("{command: x, ready: {}}", "", "exactly one of"),
            (
                "{command: x, ready: {port: 'h:1', domain: d}}",
                "",
                "domain goes with xmpp",
            ),
            (
                "{command: x, ready: {port: 'h:1', path: /}}",
                "",
                "path goes with http",
            ),
            (
                "{command: x, ready: {port: 'h:1'}, requires: {/usr/sbin/nginx: nginx}}",
                "",
                "no path",
            ),
            (
                "{command: x, ready: {port: 'h:1'}}",
                "agents: ssh://me@host\n",
                "local:N",
            ),
            (
                "{command: x, ready: {port: 'h:1'}}",
                "agents: local:0\n",
                "local:N",
            ),
            (
                "{command: x, ready: {port: 'h:1'}, before_run: 'test -f a || { echo no; }'}",
                "",
                "server.before_run: unknown factor ` echo no; `",
            ),
            (
                "{command: 'x --port {prot}', ready: {port: 'h:1'}}",
                "",
                "server.command: unknown factor `prot`",
            ),
            (
                "{command: x, ready: {port: 'h:1'}}",
                "capacity: {p99_intervals: 2}\n",
                "goes with capacity.p99",
            ),
            (
                "{command: x, ready: {port: 'h:1'}}",
                "capacity: {p99: soon}\n",
                "capacity.p99: 'soon' is not a duration",
            ),
            (
                "{command: x, ready: {port: 'h:1'}}",
                "capacity: {p99: 10ms, p99_intervals: 0}\n",
                "from 1 to 3600",
            ),
        ] {
            write(server, extra);
            let e = load(&p, false).unwrap_err();
            assert!(e.contains(want), "{server} {extra}: {e}");
        }
    }

    #[test]
    fn configurations_are_counted_before_expanding_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.yaml");
        let exp = |factors: usize, levels: usize, extra: &str| {
            let mut s = String::from(
                "name: t\nserver: {command: x, ready: {port: 'h:1'}}\nload: {scenario: s.yaml}\n",
            );
            s.push_str(extra);
            s.push_str("factors:\n");
            for f in 0..factors {
                let l: Vec<String> = (0..levels).map(|i| format!("'{i}'")).collect();
                s.push_str(&format!("  f{f}: [{}]\n", l.join(", ")));
            }
            std::fs::write(&p, s).unwrap();
        };
        // 10^12 would take terabytes to list: refused at once, naming the count.
        exp(12, 10, "");
        let start = std::time::Instant::now();
        let e = load(&p, false).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(e.contains("1000000000000 configurations"), "{e}");
        assert!(
            e.contains("limit of 10000") && e.contains("`combinations:`"),
            "{e}"
        );
        // 40 factors of 10 levels overflow u64: still refused.
        exp(40, 10, "");
        assert!(load(&p, false).unwrap_err().contains("more than 1844"));
        // At the limit: accepted.
        exp(4, 10, "");
        assert_eq!(load(&p, false).unwrap().configurations.len(), 10_000);
        // A lower limit of the experiment's own, and a listed combination counts one.
        exp(2, 3, "max_configurations: 4\n");
        assert!(load(&p, false).unwrap_err().contains("9 configurations"));
        exp(
            2,
            3,
            "max_configurations: 4\ncombinations: [{f0: '0', f1: '0'}, {f0: '1', f1: '2'}]\n",
        );
        assert_eq!(load(&p, false).unwrap().configurations.len(), 2);
        // Long levels: 8192 configurations each holding a 1 MiB level would be 8 GiB.
        let mut s = String::from(
            "name: t\nserver: {command: x, ready: {port: 'h:1'}}\nload: {scenario: s.yaml}\n\
             factors:\n",
        );
        s.push_str(&format!("  big: ['{}', b]\n", "a".repeat(1 << 20)));
        for f in 0..12 {
            s.push_str(&format!("  f{f}: ['0', '1']\n"));
        }
        std::fs::write(&p, s).unwrap();
        let e = load(&p, false).unwrap_err();
        assert!(e.contains("8192 configurations would take about"), "{e}");
        exp(2, 3, "max_configurations: 99999999\n");
        assert!(load(&p, false).unwrap_err().contains("is above 1000000"));
        // The file must be a regular file.
        let e = load(Path::new("/dev/zero"), false).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    /// Found by the `experiment` fuzz target: an empty unknown key (`"": x`) hung the locator.
    #[test]
    fn an_empty_unknown_key_is_located_without_hanging() {
        assert_eq!(
            unknown_key_position("a: 1\n\"\": 2\n", "unknown field ``, x"),
            None
        );
        let p = Path::new("/nonexistent/e.yaml");
        let e = load_str("name: t\n\"\": 1\n", p, false).unwrap_err();
        assert!(e.contains("Unknown field ``"), "{e}");
    }

    #[test]
    fn rate_search_sections_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.yaml");
        let with = |rate: &str| {
            std::fs::write(
                &p,
                format!(
                    "name: t\nserver: {{command: x, ready: {{port: 'h:1'}}}}\nload: {{scenario: s.yaml}}\n\
                     capacity: {{max_error_rate: 2%, rate: {rate}}}\nquick: {{max_probes: 2}}\n"
                ),
            )
            .unwrap();
        };
        with("{from: 10, to: 100, slo: {p99: 50ms, of: session}}");
        let l = load(&p, false).unwrap();
        let r = l.rate_search.unwrap();
        assert_eq!(
            (r.from, r.to, r.max_probes, r.poisson),
            (10.0, 100.0, 10, true)
        );
        assert_eq!(r.precision, 0.1);
        assert_eq!(r.slo.p99, Some(Duration::from_millis(50)));
        assert_eq!(
            r.slo.error_rate, 0.02,
            "defaults to capacity.max_error_rate"
        );
        assert_eq!(r.slo.of.as_deref(), Some("session"));
        assert_eq!(load(&p, true).unwrap().rate_search.unwrap().max_probes, 2);
        for (bad, says) in [
            ("{from: 0, to: 100, slo: {}}", "from must be"),
            ("{from: 10, to: 5, slo: {}}", "to must be"),
            (
                "{from: 1, to: 5, arrival: burst, slo: {}}",
                "poisson or constant",
            ),
            ("{from: 1, to: 5, precision: lots, slo: {}}", "precision"),
            ("{from: 1, to: 5, slo: {p99: soon}}", "slo.p99"),
            ("{from: 1, to: 5, slo: {error_rate: 1x}}", "slo.error_rate"),
        ] {
            with(bad);
            let e = load(&p, false).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
