//! The experiment file (`headroom lab EXPERIMENT.yaml`): which server to start and how, the
//! factors to sweep, the load, repetitions and the tables to print. See `docs/lab.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::server::{Factors, Ready, ServerSpec};

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
}

/// `capacity_connections` is the peak of connections open at once before the first interval
/// whose error rate exceeds `max_error_rate` (default 1%) or that has a connect timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// A fraction (0.01) or a percentage ("1%").
    #[serde(default)]
    pub max_error_rate: Option<String>,
}

impl Experiment {
    /// The error rate above which the server counts as broken (default 1%).
    pub fn capacity_error_rate(&self) -> f64 {
        self.capacity
            .as_ref()
            .and_then(|c| c.max_error_rate.as_deref())
            .and_then(|v| {
                let v = v.trim();
                match v.strip_suffix('%') {
                    Some(p) => p.trim().parse::<f64>().ok().map(|p| p / 100.0),
                    None => v.parse::<f64>().ok(),
                }
            })
            .unwrap_or(0.01)
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
}

/// Exactly one of `port`, `http` (with `path`), `line`.
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

/// Reads and checks an experiment file. Errors name `file:line:column` where the YAML reader
/// knows it, and say what was expected.
pub fn load(path: &Path, quick: bool) -> Result<Loaded, String> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let exp: Experiment = marked_yaml::from_yaml(0, &text).map_err(|e| locate(&name, &text, e))?;
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
            }
            c.clone()
        }
        None => factorial(&exp.factors),
    };
    if configurations.is_empty() {
        return Err(format!("{name}: no configuration to run"));
    }
    let r = &exp.server.ready;
    let ready = match (&r.port, &r.http, &r.line) {
        (Some(p), None, None) => Ready::Port(p.clone()),
        (None, Some(a), None) => Ready::Http {
            addr: a.clone(),
            path: r.path.clone().unwrap_or_else(|| "/".into()),
        },
        (None, None, Some(l)) => Ready::Line(l.clone()),
        _ => {
            return Err(format!(
                "{name}: server.ready: give exactly one of port: HOST:PORT, http: HOST:PORT (with path), line: TEXT"
            ))
        }
    };
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
    };
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

/// Replace `{name}` for the names in `values` only, leaving anything else (such as a scenario's
/// own `${var}`) as it is.
pub fn expand_known(text: &str, values: &Factors) -> String {
    let mut out = text.to_string();
    for (k, v) in values {
        out = out.replace(&format!("{{{k}}}"), v);
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
}
