//! `headroom run FILE.yaml|FILE.xml|FILE.har`: a scenario file (or a Tsung XML or a HAR,
//! converted on the fly) becomes a sessions plan; after the run its thresholds are checked and its per-name figures
//! reported.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use headroom_core::{LoadModel, Plan, StopCondition};
use headroom_scenario::model::{Metric, Threshold};
use headroom_scenario::Scenario;

use crate::args::{default_threads, RunArgs, UsageError};

/// True when the positional argument names a scenario file rather than a URL.
pub fn is_scenario(arg: &str) -> bool {
    let lower = arg.to_ascii_lowercase();
    !lower.starts_with("http://")
        && !lower.starts_with("https://")
        && [".yaml", ".yml", ".xml", ".har", ".json"]
            .iter()
            .any(|ext| lower.ends_with(ext))
}

/// A scenario run: the plan and the thresholds to check afterwards.
pub struct ScenarioRun {
    pub plan: Plan,
    pub thresholds: Vec<Threshold>,
}

/// Every located error of a file, one `headroom: file:line:col: message` line each.
pub fn errors_to_usage(errs: Vec<headroom_scenario::ScenarioError>) -> UsageError {
    let lines: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    UsageError(lines.join("\nheadroom: "))
}

/// Reads the scenario (or Tsung XML), compiles it and builds the plan; flags that describe a
/// load of their own are refused, since the file describes the load.
pub fn plan(a: &RunArgs) -> Result<ScenarioRun, UsageError> {
    let path = Path::new(&a.url);
    if !path.exists() {
        return Err(UsageError(format!(
            "scenario file '{}' not found (a URL must start with http://)",
            a.url
        )));
    }
    let conflicting = [
        ("--rate", a.rate.is_some()),
        ("--arrival-rate", a.arrival_rate.is_some()),
        ("--per-user", a.per_user.is_some()),
        ("--think", a.think.is_some()),
        ("--max-users", a.max_users.is_some()),
        ("--ramp-up (use load.stages)", a.ramp_up.is_some()),
        ("--stage (use load.stages)", !a.stages.is_empty()),
        ("--body", a.body.is_some()),
        ("-H/--header", !a.headers.is_empty()),
        ("--pipeline", a.pipeline != 1),
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
        return Err(UsageError(format!(
            "{flag} does not apply to a scenario file: its load and requests come from the file"
        )));
    }
    let scenario = read(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let compiled = headroom_scenario::compile(&scenario, base)
        .map_err(|e| UsageError(format!("{}: {e}", a.url)))?;
    // Thresholds naming no request or transaction would never be checked: refuse them now.
    for t in &scenario.thresholds {
        let name = match &t.metric {
            Metric::Percentile { name, .. } | Metric::Mean { name } => name.as_ref(),
            _ => None,
        };
        if let Some(n) = name {
            if !compiled.workload.names.iter().any(|m| &m.name == n) {
                let known: Vec<&str> = compiled
                    .workload
                    .names
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect();
                return Err(UsageError(format!(
                    "{}: threshold '{}' names '{n}', which is no request or transaction (names: {})",
                    a.url,
                    t.text,
                    known.join(", ")
                )));
            }
        }
    }
    let target_url = match (&a.target, scenario.servers.first()) {
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
        (None, None) => {
            return Err(UsageError(format!(
                "{}: the scenario names no server; add servers: [{{host: 127.0.0.1, port: 8080}}] or give --target HOST:PORT",
                a.url
            )))
        }
    };
    // The URL machinery validates the network and output flags and builds the base plan.
    let mut base_args = a.clone();
    base_args.url = target_url.clone();
    base_args.duration = None;
    let mut plan = base_args.to_plan()?;
    plan.tls = match &compiled.tls {
        Some(t) => Some(Arc::new(
            a.add_tls_flags(t.clone())
                .map_err(|e| UsageError(format!("{}: {e}", a.url)))?,
        )),
        None => None,
    };
    let scheme_tls = plan.tls.is_some();
    let shown = match scenario.servers.first().map(|s| s.protocol) {
        Some(headroom_scenario::model::Protocol::Raw) => format!("tcp://{}", plan.target),
        Some(p @ headroom_scenario::model::Protocol::Xmpp)
        | Some(p @ headroom_scenario::model::Protocol::Pgsql) => {
            format!("{}://{}", p.as_str(), plan.target)
        }
        Some(headroom_scenario::model::Protocol::WebSocket) if scheme_tls => {
            format!("wss://{}", plan.target)
        }
        Some(headroom_scenario::model::Protocol::WebSocket) => {
            format!("ws://{}", plan.target)
        }
        _ => plan.target_name.clone(),
    };
    plan.target_name = format!("{} ({shown})", a.url);
    // Without -d the run lasts its phases and its stages, whichever ends later.
    let shaped = compiled
        .phases_duration
        .max(headroom_core::RampStage::total(&compiled.ramp));
    let unshaped = compiled.phases.is_empty() && compiled.ramp.is_empty();
    let duration = match (a.duration, unshaped) {
        (Some(d), _) => Some(d),
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
        threads = threads.min(compiled.users.max(1) as usize);
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
    plan.agent.cookies = compiled.http.cookies && !a.no_cookies;
    if a.follow == 0 {
        plan.agent.follow = compiled.http.follow;
    }
    plan.workload = Some(Arc::new(compiled.workload));
    plan.validate().map_err(|e| UsageError(e.0))?;
    Ok(ScenarioRun {
        plan,
        thresholds: scenario.thresholds,
    })
}

/// A native scenario, or a Tsung XML or a HAR converted (their warnings go to stderr, one per
/// line). A HAR is a `.har` file, or a `.json` one holding `log.entries` (other `.json` files are
/// scenarios written in JSON, which YAML reads).
pub fn read(path: &Path) -> Result<Scenario, UsageError> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let name = path.display().to_string();
    let imported = match ext.as_str() {
        "xml" => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| UsageError(format!("cannot read {name}: {e}")))?;
            headroom_scenario::import_tsung(&text, &name).map_err(errors_to_usage)?
        }
        "har" | "json" => {
            let text = headroom_scenario::har::read_har_file(path)
                .map_err(|e| UsageError(format!("{name}: {e}")))?;
            if ext == "json" && !headroom_scenario::har::looks_like_har(&text) {
                return headroom_scenario::parse_str(&text, &name).map_err(errors_to_usage);
            }
            let opts = headroom_scenario::HarOptions::default();
            headroom_scenario::import_har(&text, &name, &opts).map_err(errors_to_usage)?
        }
        _ => return headroom_scenario::load(path).map_err(errors_to_usage),
    };
    for w in &imported.warnings {
        eprintln!("headroom: warning: {w}");
    }
    Ok(imported.scenario)
}

// The thresholds and the scenario's summary figures live in headroom-run (issue 17).
pub use headroom_run::human::scenario_human as human;
pub use headroom_run::thresholds::check;
