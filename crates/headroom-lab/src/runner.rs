//! The lab's loop: for each configuration and repetition, start the server, warm up, load it
//! while sampling its process tree, check it survived, stop it, store the run; then print the
//! tables. Runs already in the store are skipped, so an interrupted lab resumes where it stopped.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use headroom_core::spec::{RunSpec, Target};
use headroom_core::{ErrorKind, Plan, ProtoCounter};
use headroom_dist::launch::PortRange;
use headroom_engine::RunOutcome;
use headroom_metrics::LatencyStats;
use headroom_monitor::prom::Scraper;
use headroom_monitor::Sample;
use headroom_run::interval::IntervalLine;
use headroom_run::summary::RunSummaryExt;
use headroom_run::verdict::{verdict, Evidence};

use crate::experiment::{expand_known, Loaded, RateSearch};
use crate::intervals::{connection_break, kept, LabInterval, CSV_COLUMNS};
use crate::measure::{measure, warm_up};
use crate::measure::{LabAgents, PromSource};
use crate::server::{self, Factors, RunningServer};
use crate::store::{RunRecord, RunStatus, Store};
use crate::table::{csv_field, fmt_value, pivot, Table, VERDICT};

/// How `headroom lab` was asked to run.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Overrides the experiment's `output`.
    pub output: Option<PathBuf>,
    /// Forget the stored runs of this experiment first.
    pub fresh: bool,
    /// This binary, for `{headroom}` in server commands.
    pub headroom_bin: PathBuf,
    /// Progress lines on stderr.
    pub progress: bool,
    /// The agents the loads run on; this process's engine when `None`.
    pub agents: Option<LabAgents>,
    /// Where `{port}` is taken from (`--ports LO-HI`, `HEADROOM_PORTS`); any free port when
    /// `None`.
    pub ports: Option<PortRange>,
}

/// What a lab produced.
#[derive(Debug)]
pub struct LabOutcome {
    pub output: PathBuf,
    /// Runs done now (not counting those found in the store).
    pub ran: usize,
    pub skipped: usize,
    pub failed: usize,
    pub tables: Vec<Table>,
    /// One line per searched run: each probed rate with its mean latency, by rate.
    pub curves: Vec<String>,
    pub interrupted: bool,
}

/// A port on 127.0.0.1 nobody listens on now, for `{port}`: any (the kernel's pick) without a
/// range; with one, the first free one from `*next` on, and `*next` moves past it, so that
/// consecutive runs go round the range rather than reuse a port the last server just left.
fn free_port(range: Option<PortRange>, next: &mut u16) -> Result<u16, String> {
    let Some(range) = range else {
        return std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port on 127.0.0.1: {e}"));
    };
    let p = range.free_port(std::net::Ipv4Addr::LOCALHOST.into(), *next)?;
    *next = p.wrapping_add(1);
    Ok(p)
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The plan of one run: the experiment's scenario with this configuration's values.
/// With `rate`, the load is instead one open phase of the scenario's sessions arriving at that
/// rate for `duration` (a probe of the max-sustainable-rate search).
fn plan_for(
    l: &Loaded,
    values: &Factors,
    duration: Option<Duration>,
    rate: Option<(f64, &RateSearch)>,
) -> Result<Plan, String> {
    load_for(l, values, duration, rate).map(|(plan, _)| plan)
}

/// [`plan_for`]'s plan, and the [`RunSpec`] it was built from (what an agent receives to
/// build the same plan). `values` holds the configuration's factors and the builtins (`port`...).
/// The plan comes from the run library's one builder, as `headroom run SCENARIO --target
/// HOST:PORT` would build it: interval 1s, connect timeout 5s, keep-alive unless
/// `load.keepalive` says otherwise, TCP_NODELAY.
pub fn load_for(
    l: &Loaded,
    values: &Factors,
    duration: Option<Duration>,
    rate: Option<(f64, &RateSearch)>,
) -> Result<(Plan, RunSpec), String> {
    let file = l.dir.join(expand_known(&l.exp.load.scenario, values));
    let name = file.display().to_string();
    let text = headroom_scenario::read_bounded_string(
        &file,
        headroom_scenario::MAX_SCENARIO_BYTES,
        "load.scenario",
    )?;
    let text = expand_known(&text, values);
    let mut s = headroom_scenario::parse_str(&text, &name).map_err(|errs| {
        errs.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let base = file.parent().unwrap_or(Path::new("."));
    let target_text = expand_known(
        l.exp.load.target.as_deref().unwrap_or("127.0.0.1:{port}"),
        values,
    );
    let _: SocketAddr = target_text
        .parse()
        .map_err(|_| format!("load.target '{target_text}' is not IP:PORT"))?;
    // Without a duration the run lasts its phases and its stages, whichever ends later.
    let duration = match duration {
        Some(d) => d,
        None => {
            let c = headroom_scenario::compile(&s, base)?;
            let shaped = c
                .phases_duration
                .max(headroom_core::RampStage::total(&c.ramp));
            if !c.phases.is_empty() || !c.ramp.is_empty() {
                shaped
            } else {
                Duration::from_secs(10)
            }
        }
    };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let pinned = l
        .exp
        .server
        .cpus
        .as_deref()
        .map(|c| c.split(',').count())
        .unwrap_or(0);
    let threads = l
        .exp
        .load
        .threads
        .unwrap_or_else(|| cores.saturating_sub(pinned).max(1));
    let timeout = match &l.exp.load.timeout {
        Some(t) => humantime::parse_duration(t)
            .map_err(|_| format!("load.timeout '{t}' is not a duration"))?,
        None => Duration::from_secs(10),
    };
    let keepalive = match l
        .exp
        .load
        .keepalive
        .as_deref()
        .map(|k| expand_known(k, values))
    {
        None => true,
        Some(k) => match k.trim() {
            "true" | "yes" | "on" => true,
            "false" | "no" | "off" => false,
            other => return Err(format!("load.keepalive '{other}' is not true or false")),
        },
    };
    // A probe at a rate replaces the scenario's load (and its closed population and ramp) by
    // one open phase of its sessions arriving at that rate.
    if let Some((r, rs)) = rate {
        s.load = headroom_scenario::model::Load {
            phases: vec![headroom_scenario::model::Phase {
                duration,
                rate: headroom_scenario::model::Rate::Fixed(r),
                arrival: if rs.poisson {
                    headroom_scenario::model::Arrival::Poisson
                } else {
                    headroom_scenario::model::Arrival::Constant
                },
                max_users: Some(rs.max_users),
            }],
            users: Vec::new(),
            stages: Vec::new(),
            once: Vec::new(),
        };
    }
    // TLS comes from the scenario's first server (`tls:`), as `headroom run SCENARIO` takes
    // it; a factor in its text (`resume: {resume}`) varies it per configuration.
    let scenario =
        headroom_run::files::scenario_spec(&name, &s, base, Some(target_text)).map_err(|e| e.0)?;
    let mut spec = RunSpec::new(Target::Scenario(scenario));
    spec.duration = Some(duration);
    spec.threads = Some(threads);
    spec.timeout = timeout;
    spec.no_keepalive = !keepalive;
    let plan = headroom_run::build(&spec).map_err(|e| e.0)?.plan;
    // Agents build it with exactly the threads it has here.
    spec.threads = Some(plan.threads);
    Ok((plan, spec))
}

/// Figures of a run that tables can use.
fn metrics(plan: &Plan, out: &RunOutcome, samples: &[Sample]) -> BTreeMap<String, f64> {
    let t = &out.total;
    let c = &t.counters;
    let secs = out.elapsed.as_secs_f64().max(1e-9);
    let lat = LatencyStats::of(&t.latency);
    let conn = LatencyStats::of(&t.connect);
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: f64| {
        m.insert(k.to_string(), v);
    };
    put("throughput_rps", c.responses as f64 / secs);
    put("requests", c.requests as f64);
    put("responses", c.responses as f64);
    put("latency_mean_ms", lat.mean / 1000.0);
    put("latency_p50_ms", lat.p50 as f64 / 1000.0);
    put("latency_p99_ms", lat.p99 as f64 / 1000.0);
    put("connect_mean_ms", conn.mean / 1000.0);
    put("connect_p99_ms", conn.p99 as f64 / 1000.0);
    // TLS figures only for a TLS load, so a plain run's table cell reads "-" rather than 0.
    if plan.tls.is_some() {
        let tls = LatencyStats::of(&t.tls);
        let handshakes = c.proto[ProtoCounter::TlsHandshakes.index()];
        let resumed = c.proto[ProtoCounter::TlsResumed.index()];
        put("tls_mean_ms", tls.mean / 1000.0);
        put("tls_p50_ms", tls.p50 as f64 / 1000.0);
        put("tls_p99_ms", tls.p99 as f64 / 1000.0);
        put("tls_handshakes", handshakes as f64);
        put("tls_resumed", resumed as f64);
        put("tls_handshakes_per_s", handshakes as f64 / secs);
        put(
            "tls_resumed_pct",
            resumed as f64 / handshakes.max(1) as f64 * 100.0,
        );
    }
    put("errors_total", c.errors_total() as f64);
    let attempts = (c.responses + c.errors_total()).max(1);
    put("error_rate", c.errors_total() as f64 / attempts as f64);
    for k in ErrorKind::ALL {
        put(&format!("errors_{}", k.name()), c.errors[k.index()] as f64);
    }
    // Served connections (the server sent a byte); TCP handshakes in its accept queue apart.
    put("connections_peak", out.connections_peak as f64);
    put("tcp_connected_peak", out.tcp_connected_peak as f64);
    put("idle_closed", c.idle_closed as f64);
    put("sessions_completed", c.sessions_completed as f64);
    put("sessions_per_s", c.sessions_completed as f64 / secs);
    // Per transaction: its mean wall time (e.g. the duration of a 500-operation session).
    if let Some(w) = &plan.workload {
        for (name, stats) in w.names.iter().zip(t.names.iter()) {
            if name.kind == headroom_core::session::NameKind::Transaction && stats.count > 0 {
                put(
                    &format!("tx_{}_mean_ms", name.name),
                    stats.latency.mean() / 1000.0,
                );
            }
        }
    }
    if let (Some(first), Some(last)) = (samples.first(), samples.last()) {
        let dt = (last.t_s - first.t_s).max(1e-9);
        if samples.len() >= 2 {
            put(
                "server_cpu_user_pct",
                (last.cpu_user_s - first.cpu_user_s) / dt * 100.0,
            );
            put(
                "server_cpu_sys_pct",
                (last.cpu_sys_s - first.cpu_sys_s) / dt * 100.0,
            );
            let n = (samples.len() - 1) as f64;
            put(
                "machine_cpu_user_pct",
                samples[1..]
                    .iter()
                    .map(|s| s.machine.cpu_user_pct)
                    .sum::<f64>()
                    / n,
            );
            put(
                "machine_cpu_sys_pct",
                samples[1..]
                    .iter()
                    .map(|s| s.machine.cpu_sys_pct)
                    .sum::<f64>()
                    / n,
            );
        }
        let max = |f: fn(&Sample) -> u64| samples.iter().map(f).max().unwrap_or(0) as f64;
        put("server_rss_max_mb", max(|s| s.rss_bytes) / (1 << 20) as f64);
        put("server_threads_max", max(|s| s.threads));
        put("server_fds_max", max(|s| s.fds));
        for (name, v) in kernel_metrics(samples) {
            put(name, v);
        }
    }
    m
}

/// The figures of the samples' kernel side (issue 31): what says why a server stopped
/// scaling. Counters are summed over the run (each sample holds its interval's increase; the
/// first holds none), gauges are the highest seen, the softirq share is the mean.
fn kernel_metrics(samples: &[Sample]) -> Vec<(&'static str, f64)> {
    let sum = |f: fn(&Sample) -> u64| samples.iter().map(f).sum::<u64>() as f64;
    let max = |f: fn(&Sample) -> u64| samples.iter().map(f).max().unwrap_or(0) as f64;
    let mut out = vec![
        ("server_fd_limit", max(|s| s.fd_limit)),
        ("server_threads_running_max", max(|s| s.threads_running)),
        ("server_threads_blocked_max", max(|s| s.threads_blocked)),
        (
            "kernel_listen_overflows",
            sum(|s| s.kernel.listen_overflows),
        ),
        ("kernel_listen_drops", sum(|s| s.kernel.listen_drops)),
        ("kernel_syncookies_sent", sum(|s| s.kernel.syncookies_sent)),
        ("kernel_syn_drops", sum(|s| s.kernel.syn_drops)),
        ("kernel_retransmits", sum(|s| s.kernel.retransmits)),
        ("kernel_resets_sent", sum(|s| s.kernel.resets_sent)),
        ("kernel_estab_resets", sum(|s| s.kernel.estab_resets)),
        ("kernel_tcp_orphan_max", max(|s| s.kernel.tcp_orphan)),
        ("kernel_tcp_time_wait_max", max(|s| s.kernel.tcp_time_wait)),
        ("kernel_procs_running_max", max(|s| s.kernel.procs_running)),
    ];
    if samples.len() >= 2 {
        let n = (samples.len() - 1) as f64;
        let softirq: f64 = samples[1..].iter().map(|s| s.machine.cpu_softirq_pct).sum();
        out.push(("machine_cpu_softirq_pct", softirq / n));
    }
    out
}

/// A scraped series key as part of a figure name: `prom_` + its name and label values, with
/// every other character made `_`.
fn prom_figure(key: &str) -> String {
    let mut out = String::from("prom_");
    let mut last_us = true;
    for c in key.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
            last_us = false;
        } else if !last_us {
            out.push('_');
            last_us = true;
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    out
}

/// Figures of the scraped series: the last value and the highest; for counters (`_total`), the
/// rate per second over the run.
fn prom_metrics(m: &mut BTreeMap<String, f64>, samples: &[Sample], prom: &[BTreeMap<String, f64>]) {
    let keys: std::collections::BTreeSet<&String> = prom.iter().flat_map(|p| p.keys()).collect();
    for key in keys {
        let points: Vec<(f64, f64)> = samples
            .iter()
            .zip(prom)
            .filter_map(|(s, p)| p.get(key).map(|v| (s.t_s, *v)))
            .collect();
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            continue;
        };
        let name = prom_figure(key);
        m.insert(name.clone(), last.1);
        m.insert(
            format!("{name}_max"),
            points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max),
        );
        let base = key.split('{').next().unwrap_or(key);
        if base.ends_with("_total") && last.0 > first.0 {
            m.insert(
                format!("{name}_per_s"),
                (last.1 - first.1) / (last.0 - first.0),
            );
        }
    }
}

fn label(f: &Factors) -> String {
    f.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A run's figures: the load's, the server's, and the scraped series'.
fn figures(
    plan: &Plan,
    out: &RunOutcome,
    samples: &[Sample],
    prom: &[BTreeMap<String, f64>],
) -> BTreeMap<String, f64> {
    let mut m = metrics(plan, out, samples);
    prom_metrics(&mut m, samples, prom);
    m
}

/// The outcome of a max-sustainable-rate search (see [`search_rate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RateResult {
    /// The highest rate that kept the SLO (None: not even `from`).
    pub sustained: Option<f64>,
    /// The lowest rate that broke it (None: none did up to `to`; `sustained` is a lower bound).
    pub broke: Option<f64>,
    pub probes: u32,
}

/// Why a search stopped before it converged.
#[derive(Debug)]
pub enum Abort {
    Interrupted,
    Server(server::ServerFailure),
    Plan(String),
    /// A probe's load could not run or was cut short (agents lost with `--on-agent-loss
    /// stop`): it says nothing of the server, so the run fails.
    Load(String),
}

/// The max-sustainable-rate search: probe `from`, double while the SLO holds (up to `to`), then
/// bisect between the best good rate and the lowest bad one until their gap is within
/// `precision` of the good one, or `max_probes` ran. `probe(rate)` answers whether the SLO held.
pub fn search_rate(
    s: &RateSearch,
    mut probe: impl FnMut(f64) -> Result<bool, Abort>,
) -> Result<RateResult, Abort> {
    let (mut good, mut bad): (Option<f64>, Option<f64>) = (None, None);
    let mut rate = s.from;
    let mut probes = 0;
    while probes < s.max_probes {
        probes += 1;
        if probe(rate)? {
            good = Some(good.map_or(rate, |g: f64| g.max(rate)));
        } else {
            bad = Some(bad.map_or(rate, |b: f64| b.min(rate)));
        }
        rate = match (good, bad) {
            (None, Some(_)) => break, // below `from`
            (Some(g), None) if g >= s.to => break,
            (Some(g), None) => (g * 2.0).min(s.to),
            (Some(g), Some(b)) if (b - g) / g <= s.precision => break,
            (Some(g), Some(b)) => (g + b) / 2.0,
            (None, None) => unreachable!("a probe was judged"),
        };
    }
    Ok(RateResult {
        sustained: good,
        broke: bad,
        probes,
    })
}

/// Whether a probe kept the SLO; the reason when it did not.
fn judge(
    plan: &Plan,
    out: &RunOutcome,
    generator_limits: &[String],
    rs: &RateSearch,
) -> Result<(), String> {
    let t = &out.total;
    let c = &t.counters;
    let attempts = (c.responses + c.errors_total()).max(1);
    let error_rate = c.errors_total() as f64 / attempts as f64;
    if error_rate > rs.slo.error_rate {
        return Err(format!(
            "error rate {:.2}% > {:.2}%",
            error_rate * 100.0,
            rs.slo.error_rate * 100.0
        ));
    }
    if c.users_dropped > 0 {
        return Err(format!(
            "{} arrivals dropped at {} sessions alive (max_users)",
            c.users_dropped, rs.max_users
        ));
    }
    // A generator that was the limit (flat out, sending late, short of the users it meant to
    // start) is no server limit, but the probe did not offer its rate either: the rule of
    // every run's `generator.limits` (the probe's summary has them).
    if !generator_limits.is_empty() {
        return Err(format!(
            "the load generator was the limit (client-bound): {}",
            generator_limits.join("; ")
        ));
    }
    let (what, hist) = match &rs.slo.of {
        None => ("request".to_string(), &t.latency),
        Some(name) => {
            let i = of_index(plan, name).ok_or_else(|| format!("no transaction '{name}'"))?;
            match t.names.get(i) {
                Some(n) if n.count > 0 => (format!("'{name}'"), &n.latency),
                _ => return Err(format!("no '{name}' transaction completed")),
            }
        }
    };
    if hist.is_empty() {
        return Err("no response".into());
    }
    let ms = |us: f64| us / 1000.0;
    if let Some(p99) = rs.slo.p99 {
        let v = hist.value_at_quantile(0.99) as f64;
        if v > p99.as_micros() as f64 {
            return Err(format!(
                "{what} p99 {:.1} ms > {:.1} ms",
                ms(v),
                p99.as_secs_f64() * 1000.0
            ));
        }
    }
    if let Some(mean) = rs.slo.mean {
        let v = hist.mean();
        if v > mean.as_micros() as f64 {
            return Err(format!(
                "{what} mean {:.1} ms > {:.1} ms",
                ms(v),
                mean.as_secs_f64() * 1000.0
            ));
        }
    }
    Ok(())
}

/// Index of transaction `name` among the workload's names.
fn of_index(plan: &Plan, name: &str) -> Option<usize> {
    plan.workload
        .as_ref()?
        .names
        .iter()
        .position(|n| n.kind == headroom_core::session::NameKind::Transaction && n.name == name)
}

/// The curve row of one probe.
fn probe_line(
    index: u32,
    rate: f64,
    verdict: &Result<(), String>,
    m: &BTreeMap<String, f64>,
    of: Option<&str>,
) -> serde_json::Value {
    let g = |k: &str| m.get(k).copied();
    let mut v = serde_json::json!({
        "probe": index,
        "rate": rate,
        "ok": verdict.is_ok(),
        "reason": verdict.as_ref().err(),
        "throughput_rps": g("throughput_rps"),
        "sessions_per_s": g("sessions_per_s"),
        "latency_mean_ms": g("latency_mean_ms"),
        "latency_p99_ms": g("latency_p99_ms"),
        "error_rate": g("error_rate"),
        "server_cpu_user_pct": g("server_cpu_user_pct"),
        "server_cpu_sys_pct": g("server_cpu_sys_pct"),
    });
    if let Some(name) = of {
        v["of_mean_ms"] = serde_json::json!(g(&format!("tx_{name}_mean_ms")));
        v["of_p99_ms"] = serde_json::json!(g(&format!("tx_{name}_p99_ms")));
    }
    v
}

/// Tag each JSON object with the probe it belongs to.
fn tagged(items: Vec<serde_json::Value>, probe: u32) -> impl Iterator<Item = serde_json::Value> {
    items.into_iter().map(move |mut v| {
        v["probe"] = serde_json::json!(probe);
        v
    })
}

/// Runs the experiment. `stop` (Ctrl-C) ends it after stopping the current server; the run under
/// way is not stored, so the next start redoes only that one.
pub fn run(l: &Loaded, opts: &LabOptions, stop: Arc<AtomicBool>) -> Result<LabOutcome, String> {
    // A quick variant keeps its runs apart from the full experiment's: NAME-quick.
    let default = |p: PathBuf| {
        if l.quick {
            let mut s = p.into_os_string();
            s.push("-quick");
            PathBuf::from(s)
        } else {
            p
        }
    };
    let output = match (&opts.output, &l.exp.output) {
        (Some(o), _) => o.clone(),
        (None, Some(o)) => default(l.dir.join(o)),
        (None, None) => default(PathBuf::from("headroom-runs").join(format!("lab-{}", l.exp.name))),
    };
    std::fs::create_dir_all(&output)
        .map_err(|e| format!("cannot create {}: {e}", output.display()))?;
    // `{output}` is absolute: a server's configuration (Apache's `-f`, nginx's `-p`) reads it
    // from its own directory, not the lab's.
    let output = std::fs::canonicalize(&output)
        .map_err(|e| format!("cannot resolve {}: {e}", output.display()))?;
    let db = output.join("lab.sqlite");
    let mut store = Store::open(&db).map_err(|e| format!("{}: {e}", db.display()))?;
    if opts.fresh {
        store.reset(&l.exp.name).map_err(|e| e.to_string())?;
    }
    // The spec is the file as loaded plus what `--quick` changed outside it, so runs of another
    // length are never mixed into the same tables.
    let mut spec = serde_json::to_value(&l.exp).map_err(|e| e.to_string())?;
    spec["run"] = serde_json::json!({
        "quick": l.quick,
        "duration_s": l.duration.map(|d| d.as_secs_f64()),
        "warmup_s": l.warmup.as_secs_f64(),
        "max_probes": l.rate_search.as_ref().map(|r| r.max_probes),
    });
    let exp_id = store
        .experiment(&l.exp.name, &spec)
        .map_err(|e| e.to_string())?;
    let total = l.configurations.len() * l.exp.repeat as usize;
    let (mut ran, mut skipped, mut failed, mut n) = (0, 0, 0, 0);
    let mut interrupted = false;
    let mut next_port = opts.ports.map_or(0, PortRange::lo);
    'configs: for config in &l.configurations {
        for rep in 1..=l.exp.repeat {
            n += 1;
            let tag = format!("[{n}/{total}] {} rep {rep}", label(config));
            if store
                .has_run(exp_id, config, rep)
                .map_err(|e| e.to_string())?
            {
                skipped += 1;
                if opts.progress {
                    eprintln!("{tag}: stored, skipped");
                }
                continue;
            }
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'configs;
            }
            let mut values = config.clone();
            values.insert(
                "port".into(),
                free_port(opts.ports, &mut next_port)?.to_string(),
            );
            values.insert("headroom".into(), opts.headroom_bin.display().to_string());
            values.insert("output".into(), output.display().to_string());
            // Its run directory, as `headroom run --out` writes one (a search: one per probe).
            let run_path = output.join("runs").join(run_dir_name(config, rep));
            let started_at = now_rfc3339();
            let t0 = Instant::now();
            let record = |status: RunStatus, metrics, summary, intervals, samples| RunRecord {
                factors: config.clone(),
                repetition: rep,
                status,
                started_at: started_at.clone(),
                duration_s: t0.elapsed().as_secs_f64(),
                metrics,
                summary,
                intervals,
                samples,
            };
            let server_failed = |what: &str, f: server::ServerFailure, intervals, samples| {
                if opts.progress {
                    eprintln!("{tag}: {what}: {}\n{}", f.message, indent(&f.stderr_tail));
                }
                record(
                    RunStatus::ServerFailed {
                        reason: f.message,
                        stderr_tail: f.stderr_tail,
                    },
                    BTreeMap::new(),
                    serde_json::Value::Null,
                    intervals,
                    samples,
                )
            };
            let rec = if let Some(rs) = &l.rate_search {
                match search_run(l, rs, &values, &stop, opts, &tag, &run_path) {
                    Ok(r) => record(RunStatus::Ok, r.metrics, r.summary, r.intervals, r.samples),
                    Err(Abort::Interrupted) => {
                        interrupted = true;
                        break 'configs;
                    }
                    Err(Abort::Plan(e)) => return Err(format!("{}: {e}", label(config))),
                    Err(Abort::Load(e)) => {
                        if opts.progress {
                            eprintln!("{tag}: load failed: {e}");
                        }
                        record(
                            RunStatus::LoadFailed { reason: e },
                            BTreeMap::new(),
                            serde_json::Value::Null,
                            Vec::new(),
                            Vec::new(),
                        )
                    }
                    Err(Abort::Server(f)) => {
                        server_failed("server failed", f, Vec::new(), Vec::new())
                    }
                }
            } else {
                let (plan, spec) = load_for(l, &values, l.duration, None)
                    .map_err(|e| format!("{}: {e}", label(config)))?;
                let agents = opts.agents.as_ref();
                match server::start_until(&l.server, &values, &stop) {
                    // Stopped while the server came up: not a run, redone on the next start.
                    Err(f) if f.kind == server::FailureKind::Interrupted => {
                        interrupted = true;
                        break 'configs;
                    }
                    Err(f) => server_failed("server failed", f, Vec::new(), Vec::new()),
                    Ok(mut srv) => {
                        if !l.warmup.is_zero() {
                            let w = load_for(l, &values, Some(l.warmup), None)
                                .map_err(|e| format!("{}: {e}", label(config)))?;
                            warm_up(agents, (&w.0, &w.1), &stop, opts.progress, &tag);
                        }
                        let prom = prom_source(l, &values)
                            .map_err(|e| format!("{}: {e}", label(config)))?;
                        let m = measure(
                            (&plan, &spec),
                            agents,
                            &mut srv,
                            &stop,
                            prom,
                            Some(&run_path),
                        );
                        let stopped = srv.stop();
                        if stop.load(Ordering::Relaxed) {
                            interrupted = true;
                            break 'configs;
                        }
                        if let (Some(e), true) = (&m.prom_error, opts.progress) {
                            eprintln!("{tag}: warning: scraping {e}");
                        }
                        let sample_json = m.samples_json();
                        let intervals = kept(m.intervals, None);
                        match (m.outcome, m.alive) {
                            (_, Err(f)) => server_failed(
                                "server died during the run",
                                f,
                                intervals,
                                sample_json,
                            ),
                            (Err(e), Ok(())) => {
                                if opts.progress {
                                    eprintln!("{tag}: load failed: {e}");
                                }
                                record(
                                    RunStatus::LoadFailed { reason: e },
                                    BTreeMap::new(),
                                    serde_json::Value::Null,
                                    intervals,
                                    sample_json,
                                )
                            }
                            (Ok(done), Ok(())) => {
                                let mut mx = figures(&plan, &done.outcome, &m.samples, &m.prom);
                                let (cap, at) = connection_break(
                                    intervals.iter().map(|i| &i.line),
                                    &l.exp.break_rule(),
                                );
                                let reached = at.is_some();
                                mx.insert("capacity_connections".into(), cap);
                                mx.insert(
                                    "capacity_reached".into(),
                                    if reached { 1.0 } else { 0.0 },
                                );
                                let mut summary = done.summary.to_json();
                                summary["server_stop"] = serde_json::json!(stopped);
                                // The verdict at the capacity point: the run up to its break,
                                // not what the broken server did after (the run directory's
                                // summary.json keeps the whole run's).
                                if let Some(k) = at {
                                    let lines: Vec<IntervalLine> =
                                        intervals[..=k].iter().map(|i| i.line.clone()).collect();
                                    let rated = m.samples.get(1..).unwrap_or(&[]);
                                    let cores = done.summary.environment.cores.unwrap_or(1);
                                    let v = verdict(&Evidence::gather_until(
                                        &done.summary,
                                        rated,
                                        &lines,
                                        cores as f64,
                                    ));
                                    let t = lines.last().map_or(0.0, |l| l.t_s + l.length_s);
                                    summary["verdict_whole_run"] = summary["verdict"].take();
                                    summary["verdict"] = serde_json::json!(v);
                                    summary["verdict_until_s"] = serde_json::json!(t);
                                }
                                if opts.progress {
                                    let why = match summary["verdict"]["name"].as_str() {
                                        Some(v) if at.is_some() => format!("; at its break: {v}"),
                                        Some(v) => format!("; {v}"),
                                        None => String::new(),
                                    };
                                    eprintln!("{tag}: {}{why} ({stopped})", brief(&mx));
                                }
                                if let (Some(e), true) = (m.dir_error, opts.progress) {
                                    eprintln!("{tag}: warning: run directory: {e}");
                                }
                                record(RunStatus::Ok, mx, summary, intervals, sample_json)
                            }
                        }
                    }
                }
            };
            if !rec.status.is_ok() {
                failed += 1;
            }
            store.save_run(exp_id, &rec).map_err(|e| e.to_string())?;
            ran += 1;
        }
    }
    let runs = store.runs(exp_id).map_err(|e| e.to_string())?;
    let mut specs = l.exp.tables.clone();
    if specs.is_empty() {
        // Default: the search's figure, else throughput, with the last factor across, the
        // others down.
        let names: Vec<String> = l.exp.factors.keys().cloned().collect();
        let (rows, cols) = match names.split_last() {
            Some((last, rest)) => (rest.to_vec(), vec![last.clone()]),
            None => (Vec::new(), Vec::new()),
        };
        let metric = if l.rate_search.is_some() {
            "capacity_rate"
        } else {
            "throughput_rps"
        };
        specs.push(crate::experiment::TableSpec {
            metric: metric.into(),
            rows,
            cols,
            title: None,
        });
    }
    // Why each configuration broke, laid out as the first table, unless the file asks for it.
    if !specs.iter().any(|t| t.metric == VERDICT) {
        let first = specs[0].clone();
        specs.push(crate::experiment::TableSpec {
            metric: VERDICT.into(),
            rows: first.rows,
            cols: first.cols,
            title: None,
        });
    }
    let order = l.exp.factors.clone();
    let mut tables = Vec::new();
    let (mut md, mut csv) = (String::new(), String::new());
    for t in &specs {
        let mut table = pivot(&runs, &t.rows, &t.cols, &t.metric, &order);
        if let Some(title) = &t.title {
            table.title = title.clone();
        }
        md.push_str(&table.markdown());
        md.push('\n');
        csv.push_str(&format!("# {}\n", table.title));
        csv.push_str(&table.csv());
        tables.push(table);
    }
    let write = |name: &str, text: &str| {
        std::fs::write(output.join(name), text)
            .map_err(|e| format!("cannot write {}/{name}: {e}", output.display()))
    };
    write("tables.md", &md)?;
    write("tables.csv", &csv)?;
    let json = serde_json::to_string_pretty(&tables).map_err(|e| e.to_string())?;
    write("tables.json", &format!("{json}\n"))?;
    let factor_names: Vec<String> = l.exp.factors.keys().cloned().collect();
    write(
        "intervals.csv",
        &curve_csv(&runs, &factor_names, Curve::Intervals),
    )?;
    write(
        "samples.csv",
        &curve_csv(&runs, &factor_names, Curve::Samples),
    )?;
    let mut curves = Vec::new();
    if let Some(rs) = &l.rate_search {
        write(
            "rate-curve.csv",
            &curve_csv(&runs, &factor_names, Curve::Probes),
        )?;
        curves = rate_curves(&runs, rs.slo.of.as_deref());
    }
    Ok(LabOutcome {
        output,
        ran,
        skipped,
        failed,
        tables,
        curves,
        interrupted,
    })
}

/// The experiment's `monitor.prometheus` endpoint for this run, if it has one.
fn prom_source(l: &Loaded, values: &Factors) -> Result<Option<PromSource>, String> {
    let Some(mon) = &l.exp.monitor else {
        return Ok(None);
    };
    let Some(url) = &mon.prometheus else {
        return Ok(None);
    };
    let url = expand_known(url, values);
    let scraper = Scraper::new(&url, Duration::from_secs(2))
        .map_err(|e| format!("monitor.prometheus: {e}"))?;
    Ok(Some(PromSource {
        scraper,
        keep: mon.series.clone(),
    }))
}

/// The name of a configuration's run directory under `OUTPUT/runs/`: its factors as
/// `name-value` pairs joined by `_` (characters outside `[A-Za-z0-9.-]` become `-`), then the
/// repetition, e.g. `poller-epoll_workers-4_rep1`.
pub fn run_dir_name(config: &Factors, rep: u32) -> String {
    let clean = |t: &str| -> String {
        t.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .take(40)
            .collect()
    };
    let mut parts: Vec<String> = config
        .iter()
        .map(|(k, v)| format!("{}-{}", clean(k), clean(v)))
        .collect();
    parts.push(format!("rep{rep}"));
    parts.join("_")
}

/// A run's headline figures for a progress line.
fn brief(m: &BTreeMap<String, f64>) -> String {
    let g = |k: &str| m.get(k).copied().unwrap_or(0.0);
    let mut line = format!(
        "{:.0} req/s, p99 {:.2} ms, errors {}, server CPU {:.0}% user {:.0}% sys",
        g("throughput_rps"),
        g("latency_p99_ms"),
        g("errors_total"),
        g("server_cpu_user_pct"),
        g("server_cpu_sys_pct"),
    );
    if m.contains_key("tls_handshakes") {
        line.push_str(&format!(
            ", TLS {} handshakes ({} resumed) p50 {:.2} ms p99 {:.2} ms",
            g("tls_handshakes"),
            g("tls_resumed"),
            g("tls_p50_ms"),
            g("tls_p99_ms"),
        ));
    }
    line
}

/// What one search run stores.
struct SearchRun {
    metrics: BTreeMap<String, f64>,
    summary: serde_json::Value,
    intervals: Vec<LabInterval>,
    samples: Vec<serde_json::Value>,
}

/// One repetition of one configuration as a max-sustainable-rate search. The server starts
/// once; a probe that breaks the SLO (or kills the server) gets a fresh server for the next
/// one, so an overload's backlog does not spill into it.
fn search_run(
    l: &Loaded,
    rs: &RateSearch,
    values: &Factors,
    stop: &Arc<AtomicBool>,
    opts: &LabOptions,
    tag: &str,
    run_path: &Path,
) -> Result<SearchRun, Abort> {
    let (progress, agents) = (opts.progress, opts.agents.as_ref());
    let probe_len = l.duration.unwrap_or(Duration::from_secs(10));
    let of = rs.slo.of.as_deref();
    if let Some(name) = of {
        let plan =
            plan_for(l, values, Some(probe_len), Some((rs.from, rs))).map_err(Abort::Plan)?;
        if of_index(&plan, name).is_none() {
            return Err(Abort::Plan(format!(
                "capacity.rate.slo.of: the scenario has no transaction '{name}'"
            )));
        }
    }
    let mut srv: Option<RunningServer> = None;
    let mut warmed = false;
    let mut probes = Vec::new();
    let mut intervals = Vec::new();
    let mut samples = Vec::new();
    let mut best: Option<(f64, BTreeMap<String, f64>, serde_json::Value)> = None;
    // The verdict of the lowest rate that broke: why the server stopped there.
    let mut broke_verdict: Option<(f64, serde_json::Value)> = None;
    // How each of the search's servers ended (one per broken probe, and the last one).
    let mut stops: Vec<String> = Vec::new();
    let mut index = 0u32;
    let result = search_rate(rs, |rate| {
        if stop.load(Ordering::Relaxed) {
            return Err(Abort::Interrupted);
        }
        index += 1;
        let (plan, spec) =
            load_for(l, values, Some(probe_len), Some((rate, rs))).map_err(Abort::Plan)?;
        if srv.is_none() {
            srv = Some(server::start_until(&l.server, values, stop).map_err(|f| {
                if f.kind == server::FailureKind::Interrupted {
                    Abort::Interrupted
                } else {
                    Abort::Server(f)
                }
            })?);
        }
        let s = srv.as_mut().expect("started above");
        if !warmed && !l.warmup.is_zero() {
            // The warm-up is a probe at `from` as long as the warm-up.
            let w =
                load_for(l, values, Some(l.warmup), Some((rs.from, rs))).map_err(Abort::Plan)?;
            warm_up(agents, (&w.0, &w.1), stop, progress, tag);
            warmed = true;
        }
        let prom = prom_source(l, values).map_err(Abort::Plan)?;
        let probe_dir = run_path.join(format!("probe-{index:02}"));
        let m = measure((&plan, &spec), agents, s, stop, prom, Some(&probe_dir));
        if stop.load(Ordering::Relaxed) {
            return Err(Abort::Interrupted);
        }
        if let (Some(e), true) = (&m.prom_error, progress) {
            eprintln!("{tag}: warning: scraping {e}");
        }
        let (verdict, mx, summary) = match (&m.outcome, &m.alive) {
            (_, Err(f)) => (
                Err(format!("server died: {}", f.message)),
                BTreeMap::new(),
                serde_json::Value::Null,
            ),
            // Agents that could not run the probe, or were lost with `stop`: no verdict on the
            // server.
            (Err(e), Ok(())) if agents.is_some() => {
                return Err(Abort::Load(format!("probe {index} at {rate:.1}/s: {e}")))
            }
            (Err(e), Ok(())) => (
                Err(format!("load failed: {e}")),
                BTreeMap::new(),
                serde_json::Value::Null,
            ),
            (Ok(done), Ok(())) => {
                let out = &done.outcome;
                let mut mx = figures(&plan, out, &m.samples, &m.prom);
                if let Some(name) = of {
                    if let Some(n) = of_index(&plan, name).and_then(|i| out.total.names.get(i)) {
                        if n.count > 0 {
                            mx.insert(
                                format!("tx_{name}_p99_ms"),
                                n.latency.value_at_quantile(0.99) as f64 / 1000.0,
                            );
                        }
                    }
                }
                let summary = done.summary.to_json();
                if let (Some(e), true) = (&m.dir_error, progress) {
                    eprintln!("{tag}: probe {index}: warning: run directory: {e}");
                }
                let limits = &done.summary.generator.limits;
                (judge(&plan, out, limits, rs), mx, summary)
            }
        };
        if progress {
            match &verdict {
                Ok(()) => eprintln!("{tag}: probe {index} at {rate:.1}/s: {}: held", brief(&mx)),
                Err(why) => eprintln!("{tag}: probe {index} at {rate:.1}/s: broke ({why})"),
            }
        }
        probes.push(probe_line(index, rate, &verdict, &mx, of));
        samples.extend(tagged(m.samples_json(), index));
        intervals.extend(kept(m.intervals, Some(index)));
        let held = verdict.is_ok();
        if held {
            if best.as_ref().is_none_or(|(r, _, _)| rate > *r) {
                best = Some((rate, mx, summary));
            }
            std::thread::sleep(rs.pause);
        } else {
            if summary["verdict"].is_object()
                && broke_verdict.as_ref().is_none_or(|(r, _)| rate < *r)
            {
                broke_verdict = Some((rate, summary["verdict"].clone()));
            }
            if let Some(s) = srv.take() {
                let stopped = s.stop();
                if progress {
                    eprintln!(
                        "{tag}: probe {index}: server {stopped}; the next probe starts a fresh one"
                    );
                }
                stops.push(stopped);
            }
        }
        Ok(held)
    });
    if let Some(s) = srv.take() {
        let stopped = s.stop();
        if progress {
            eprintln!("{tag}: server {stopped}");
        }
        stops.push(stopped);
    }
    let r = result?;
    let (mut metrics, mut summary) = match best {
        Some((_, m, s)) => (m, s),
        None => (BTreeMap::new(), serde_json::json!({})),
    };
    metrics.insert("capacity_rate".into(), r.sustained.unwrap_or(0.0));
    metrics.insert(
        "capacity_rate_reached".into(),
        if r.broke.is_some() { 1.0 } else { 0.0 },
    );
    metrics.insert("probes".into(), r.probes as f64);
    summary["probes"] = serde_json::Value::Array(probes);
    summary["capacity_rate"] = serde_json::json!(r.sustained);
    summary["broke_at"] = serde_json::json!(r.broke);
    summary["server_stops"] = serde_json::json!(stops);
    // A search's verdict is why it broke: its lowest broken probe's (the best held probe's
    // when none broke, or when the broken probes' servers left no summary).
    if let Some((rate, v)) = broke_verdict {
        if progress {
            eprintln!(
                "{tag}: at {rate:.1}/s: {}: {}",
                v["name"].as_str().unwrap_or("?"),
                v["says"].as_str().unwrap_or("")
            );
        }
        summary["verdict"] = v;
    }
    if progress {
        match (r.sustained, r.broke) {
            (Some(g), Some(b)) => eprintln!("{tag}: sustains {g:.1}/s (broke at {b:.1}/s)"),
            (Some(g), None) if g >= rs.to => {
                eprintln!("{tag}: sustains {g:.1}/s, the top of the range")
            }
            (Some(g), None) => eprintln!(
                "{tag}: sustains {g:.1}/s; no probe broke within {} (a lower bound)",
                r.probes
            ),
            (None, _) => eprintln!("{tag}: broke at the lowest rate {:.1}/s", rs.from),
        }
    }
    Ok(SearchRun {
        metrics,
        summary,
        intervals,
        samples,
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Curve {
    /// Every load interval of every good run (the connection-capacity curve).
    Intervals,
    /// Every probe of every search (the rate curve).
    Probes,
    /// Every server sample of every run, failed ones too (a server's memory before it died is
    /// worth seeing); `run_ok` tells them apart.
    Samples,
}

/// A CSV of per-interval, per-probe or per-sample rows, one per line, with the factors first.
fn curve_csv(runs: &[RunRecord], factors: &[String], kind: Curve) -> String {
    let cols: &[&str] = match kind {
        Curve::Intervals => &CSV_COLUMNS,
        Curve::Probes => &[
            "probe",
            "rate",
            "ok",
            "throughput_rps",
            "sessions_per_s",
            "latency_mean_ms",
            "latency_p99_ms",
            "of_mean_ms",
            "of_p99_ms",
            "error_rate",
            "server_cpu_user_pct",
            "server_cpu_sys_pct",
            "reason",
        ],
        // A name with '/' is a path into the sample (the kernel's counters); its header is the
        // last part.
        Curve::Samples => &[
            "probe",
            "t_s",
            "cpu_user_pct",
            "cpu_sys_pct",
            "rss_bytes",
            "fds",
            "threads",
            "threads_running",
            "threads_blocked",
            "busiest_thread_cpu_pct",
            "fds_max_process",
            "fd_limit",
            "accept_queue",
            "accept_backlog",
            "machine/cpu_softirq_pct",
            "kernel/listen_overflows",
            "kernel/listen_drops",
            "kernel/syncookies_sent",
            "kernel/syn_drops",
            "kernel/retransmits",
            "kernel/resets_sent",
            "kernel/estab_resets",
            "kernel/tcp_inuse",
            "kernel/tcp_orphan",
            "kernel/tcp_time_wait",
            "kernel/tcp_mem_pages",
            "kernel/procs_running",
            "kernel/procs_blocked",
            "run_ok",
        ],
    };
    let mut out = String::new();
    let header: Vec<&str> = factors
        .iter()
        .map(|s| s.as_str())
        .chain(["repetition"])
        .chain(cols.iter().map(|c| c.rsplit('/').next().unwrap_or(c)))
        .collect();
    out.push_str(&header.join(","));
    out.push('\n');
    for r in runs
        .iter()
        .filter(|r| kind == Curve::Samples || r.status.is_ok())
    {
        let prefix = || {
            let mut cells: Vec<String> = factors
                .iter()
                .map(|f| csv_field(r.factors.get(f).map(String::as_str).unwrap_or("")))
                .collect();
            cells.push(r.repetition.to_string());
            cells
        };
        let mut line = |cells: Vec<String>| {
            out.push_str(&cells.join(","));
            out.push('\n');
        };
        if kind == Curve::Intervals {
            for i in &r.intervals {
                let mut cells = prefix();
                cells.extend(i.csv_cells());
                line(cells);
            }
            continue;
        }
        let rows: Vec<&serde_json::Value> = match kind {
            Curve::Samples => r.samples.iter().collect(),
            _ => r.summary["probes"]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default(),
        };
        for row in rows {
            let mut cells = prefix();
            for c in cols {
                if *c == "run_ok" {
                    cells.push(r.status.is_ok().to_string());
                    continue;
                }
                let value = if c.contains('/') {
                    row.pointer(&format!("/{c}"))
                } else {
                    row.get(*c)
                };
                cells.push(match value.unwrap_or(&serde_json::Value::Null) {
                    serde_json::Value::Null => String::new(),
                    serde_json::Value::String(s) => csv_field(s),
                    v => v.to_string(),
                });
            }
            line(cells);
        }
    }
    out
}

/// Each searched run's probes by rate: "RATE/s MEAN ms" for a probe that held, "RATE/s broke"
/// for one that did not. The mean is of the SLO's transaction when it names one.
fn rate_curves(runs: &[RunRecord], of: Option<&str>) -> Vec<String> {
    let key = if of.is_some() {
        "of_mean_ms"
    } else {
        "latency_mean_ms"
    };
    let mut out = Vec::new();
    for r in runs.iter().filter(|r| r.status.is_ok()) {
        let Some(probes) = r.summary["probes"].as_array() else {
            continue;
        };
        let mut points: Vec<(f64, String)> = probes
            .iter()
            .filter_map(|p| {
                let rate = p["rate"].as_f64()?;
                let text = match (p["ok"].as_bool(), p[key].as_f64()) {
                    (Some(true), Some(ms)) => {
                        format!("{}/s {} ms", fmt_value(rate), fmt_value(ms))
                    }
                    _ => format!("{}/s broke", fmt_value(rate)),
                };
                Some((rate, text))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let texts: Vec<String> = points.into_iter().map(|(_, t)| t).collect();
        out.push(format!(
            "{} rep {}: {}",
            label(&r.factors),
            r.repetition,
            texts.join(" · ")
        ));
    }
    out
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::{search_rate, Abort};
    use crate::experiment::{RateSearch, Slo};
    use serde_json::json;
    use std::time::Duration;

    fn spec(from: f64, to: f64, precision: f64, max_probes: u32) -> RateSearch {
        RateSearch {
            from,
            to,
            precision,
            max_probes,
            poisson: true,
            max_users: 100,
            pause: Duration::ZERO,
            slo: Slo {
                p99: None,
                mean: None,
                error_rate: 0.01,
                of: None,
            },
        }
    }

    /// Search a server that holds any rate up to `cap`; returns the result and the rates probed.
    fn against(cap: f64, s: &RateSearch) -> (super::RateResult, Vec<f64>) {
        let mut seen = Vec::new();
        let r = search_rate(s, |rate| {
            seen.push(rate);
            Ok::<bool, Abort>(rate <= cap)
        })
        .unwrap_or_else(|_| panic!("no abort"));
        (r, seen)
    }

    #[test]
    fn rate_search_doubles_then_bisects_to_the_precision() {
        let s = spec(10.0, 1000.0, 0.05, 20);
        let (r, seen) = against(137.0, &s);
        assert_eq!(&seen[..5], &[10.0, 20.0, 40.0, 80.0, 160.0]);
        let (good, bad) = (r.sustained.unwrap(), r.broke.unwrap());
        assert!(good <= 137.0 && bad > 137.0, "{r:?}");
        assert!((bad - good) / good <= 0.05, "{r:?} {seen:?}");
        assert_eq!(r.probes as usize, seen.len());
        // Every probe is inside the range, and no rate is probed twice.
        let mut sorted = seen.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.dedup();
        assert_eq!(sorted.len(), seen.len());
        assert!(seen.iter().all(|&x| (10.0..=1000.0).contains(&x)));
    }

    #[test]
    fn rate_search_reports_bounds_and_stops_at_its_budget() {
        // Never breaks: the top of the range is a lower bound.
        let (r, seen) = against(1e9, &spec(10.0, 100.0, 0.05, 20));
        assert_eq!((r.sustained, r.broke), (Some(100.0), None));
        assert_eq!(seen, [10.0, 20.0, 40.0, 80.0, 100.0]);
        // Breaks at once: below the range.
        let (r, seen) = against(5.0, &spec(10.0, 100.0, 0.05, 20));
        assert_eq!((r.sustained, r.broke, seen.len()), (None, Some(10.0), 1));
        // The probe budget ends it early, with the best known bracket.
        let (r, seen) = against(137.0, &spec(10.0, 1000.0, 0.001, 6));
        assert_eq!(seen.len(), 6);
        assert_eq!((r.sustained, r.broke), (Some(120.0), Some(160.0)));
    }

    #[test]
    fn kernel_figures_sum_counters_and_keep_the_highest_gauges() {
        use headroom_monitor::Sample;
        let at = |overflows: u64, tw: u64, limit: u64, softirq: f64| {
            let mut s = Sample::default();
            s.kernel.listen_overflows = overflows;
            s.kernel.listen_drops = overflows + 1;
            s.kernel.tcp_time_wait = tw;
            s.fd_limit = limit;
            s.threads_running = overflows;
            s.machine.cpu_softirq_pct = softirq;
            s
        };
        let m: std::collections::BTreeMap<&str, f64> = super::kernel_metrics(&[
            at(0, 5, 1024, 99.0),
            at(3, 9, 1024, 10.0),
            at(4, 2, 1024, 20.0),
        ])
        .into_iter()
        .collect();
        assert_eq!(m["kernel_listen_overflows"], 7.0);
        assert_eq!(m["kernel_listen_drops"], 10.0);
        assert_eq!(m["kernel_tcp_time_wait_max"], 9.0);
        assert_eq!(m["server_fd_limit"], 1024.0);
        assert_eq!(m["server_threads_running_max"], 4.0);
        // The first sample's share covers no interval.
        assert_eq!(m["machine_cpu_softirq_pct"], 15.0);
        assert_eq!(m["kernel_resets_sent"], 0.0);
        // One sample: no interval, no softirq share; nothing: zeros, no panic.
        assert!(!super::kernel_metrics(&[at(1, 1, 1, 1.0)])
            .iter()
            .any(|(k, _)| *k == "machine_cpu_softirq_pct"));
        assert!(super::kernel_metrics(&[]).iter().all(|(_, v)| *v == 0.0));
    }

    #[test]
    fn samples_csv_has_every_runs_samples_with_its_status() {
        use super::{curve_csv, Curve};
        use crate::store::{RunRecord, RunStatus};
        let run = |level: &str, status: RunStatus, samples: Vec<serde_json::Value>| RunRecord {
            factors: [("poller".to_string(), level.to_string())].into(),
            repetition: 1,
            status,
            started_at: String::new(),
            duration_s: 1.0,
            metrics: Default::default(),
            summary: serde_json::Value::Null,
            intervals: vec![crate::intervals::LabInterval::default()],
            samples,
        };
        let sample = |t: f64, sys: f64| json!({"t_s": t, "cpu_user_pct": 1.5, "cpu_sys_pct": sys, "rss_bytes": 4096, "fds": 7, "threads": 2, "machine": {}});
        // A sample of this headroom: the threads' states, the descriptor limit and the kernel's
        // counters too (a sample stored by an older one leaves their cells empty).
        let mut full = sample(2.0, 61.0);
        full["threads_running"] = json!(1);
        full["threads_blocked"] = json!(0);
        full["fds_max_process"] = json!(7);
        full["fd_limit"] = json!(1024);
        full["busiest_thread_cpu_pct"] = json!(55.5);
        full["accept_queue"] = json!(12);
        full["accept_backlog"] = json!(128);
        full["machine"]["cpu_softirq_pct"] = json!(2.5);
        full["kernel"] = json!({"listen_overflows": 9, "listen_drops": 10, "syncookies_sent": 0,
            "syn_drops": 0, "retransmits": 3, "resets_sent": 4, "estab_resets": 5, "tcp_inuse": 6,
            "tcp_orphan": 0, "tcp_time_wait": 8, "tcp_mem_pages": 11, "procs_running": 2,
            "procs_blocked": 0});
        let runs = [
            run("poll", RunStatus::Ok, vec![sample(1.0, 60.0), full]),
            run(
                "epoll",
                RunStatus::LoadFailed { reason: "x".into() },
                vec![sample(1.0, 3.0)],
            ),
        ];
        let csv = curve_csv(&runs, &["poller".to_string()], Curve::Samples);
        assert_eq!(
            csv,
            "poller,repetition,probe,t_s,cpu_user_pct,cpu_sys_pct,rss_bytes,fds,threads,\
             threads_running,threads_blocked,busiest_thread_cpu_pct,fds_max_process,fd_limit,\
             accept_queue,accept_backlog,cpu_softirq_pct,\
             listen_overflows,listen_drops,syncookies_sent,syn_drops,retransmits,resets_sent,\
             estab_resets,tcp_inuse,tcp_orphan,tcp_time_wait,tcp_mem_pages,procs_running,\
             procs_blocked,run_ok\n\
             poll,1,,1.0,1.5,60.0,4096,7,2,,,,,,,,,,,,,,,,,,,,,,true\n\
             poll,1,,2.0,1.5,61.0,4096,7,2,1,0,55.5,7,1024,12,128,2.5,9,10,0,0,3,4,5,6,0,8,11,2,0,\
             true\n\
             epoll,1,,1.0,1.5,3.0,4096,7,2,,,,,,,,,,,,,,,,,,,,,,false\n"
        );
        // Intervals keep to the good runs.
        let iv = curve_csv(&runs, &["poller".to_string()], Curve::Intervals);
        assert_eq!(iv.lines().count(), 2, "{iv}");
    }
}
