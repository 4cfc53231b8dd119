//! The lab's loop: for each configuration and repetition, start the server, warm up, load it
//! while sampling its process tree, check it survived, stop it, store the run; then print the
//! tables. Runs already in the store are skipped, so an interrupted lab resumes where it stopped.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use headroom_core::{ErrorKind, HttpRequest, LoadModel, Plan, SocketOptions, StopCondition};
use headroom_engine::RunOutcome;
use headroom_metrics::LatencyStats;
use headroom_monitor::{Sample, Sampler};

use crate::experiment::{expand_known, Loaded};
use crate::server::{self, Factors};
use crate::store::{RunRecord, RunStatus, Store};
use crate::table::{pivot, Table};

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
    pub interrupted: bool,
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The plan of one run: the experiment's scenario with this configuration's values.
fn plan_for(l: &Loaded, values: &Factors, duration: Option<Duration>) -> Result<Plan, String> {
    let file = l.dir.join(expand_known(&l.exp.load.scenario, values));
    let name = file.display().to_string();
    let text = std::fs::read_to_string(&file).map_err(|e| format!("load.scenario {name}: {e}"))?;
    let text = expand_known(&text, values);
    let s = headroom_scenario::parse_str(&text, &name).map_err(|errs| {
        errs.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let base = file.parent().unwrap_or(Path::new("."));
    let c = headroom_scenario::compile(&s, base)?;
    let target_text = expand_known(
        l.exp.load.target.as_deref().unwrap_or("127.0.0.1:{port}"),
        values,
    );
    let target: SocketAddr = target_text
        .parse()
        .map_err(|_| format!("load.target '{target_text}' is not IP:PORT"))?;
    let duration = duration
        .or((!c.phases.is_empty()).then_some(c.phases_duration))
        .unwrap_or(Duration::from_secs(10));
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
    let plan = Plan {
        target,
        target_name: format!("http://{target}/"),
        request: HttpRequest {
            method: "GET".into(),
            path: "/".into(),
            host: target_text,
            headers: Vec::new(),
            body: Vec::new(),
        },
        model: LoadModel::Sessions {
            users: c.users,
            phases: c.phases,
        },
        stop: StopCondition {
            duration: Some(duration),
            requests: None,
        },
        threads: if c.users > 0 {
            threads.min(c.users as usize).max(1)
        } else {
            threads
        },
        interval: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(5),
        timeout,
        keepalive: true,
        pipeline: 1,
        socket: SocketOptions {
            nodelay: true,
            ..Default::default()
        },
        workload: Some(Arc::new(c.workload)),
    };
    plan.validate().map_err(|e| e.0)?;
    Ok(plan)
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
    put("errors_total", c.errors_total() as f64);
    let attempts = (c.responses + c.errors_total()).max(1);
    put("error_rate", c.errors_total() as f64 / attempts as f64);
    for k in ErrorKind::ALL {
        put(&format!("errors_{}", k.name()), c.errors[k.index()] as f64);
    }
    put("connections_peak", out.connections_peak as f64);
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
    }
    m
}

fn interval_line(iv: &headroom_engine::Interval<'_>) -> serde_json::Value {
    let c = &iv.merged.counters;
    let lat = LatencyStats::of(&iv.merged.latency);
    serde_json::json!({
        "index": iv.index,
        "t_s": iv.start.as_secs_f64(),
        "length_s": iv.length.as_secs_f64(),
        "responses": c.responses,
        "errors": c.errors_total(),
        "latency_p50_us": lat.p50,
        "latency_p99_us": lat.p99,
        "connections_open": c.connections_open,
        "connections_peak": c.connections_peak,
        "connect_timeouts": c.errors[ErrorKind::ConnectTimeout.index()],
        "sessions_completed": c.sessions_completed,
    })
}

/// Concurrent-connection capacity (seed 000): the most connections open at once before the first
/// interval whose error rate passes `max_error_rate` or that has a connect timeout. Returns the
/// capacity and whether such a break was reached (otherwise the load never found the limit and
/// the figure is a lower bound).
pub fn connection_capacity(intervals: &[serde_json::Value], max_error_rate: f64) -> (f64, bool) {
    let mut best = 0u64;
    for iv in intervals {
        let n = |k: &str| iv[k].as_u64().unwrap_or(0);
        let (ok, errors) = (n("responses"), n("errors"));
        let rate = errors as f64 / (ok + errors).max(1) as f64;
        if rate > max_error_rate || n("connect_timeouts") > 0 {
            return (best as f64, true);
        }
        best = best.max(n("connections_peak"));
    }
    (best as f64, false)
}

/// Samples `pid`'s tree every `every` on its own thread until `stop` is set (or it exits).
fn sample_in_background(
    pid: u32,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Sample>> {
    std::thread::spawn(move || {
        let mut s = Sampler::new(pid);
        let mut out = Vec::new();
        while let Ok(x) = s.sample() {
            out.push(x);
            let until = Instant::now() + every;
            while Instant::now() < until {
                if stop.load(Ordering::Relaxed) {
                    if let Ok(x) = s.sample() {
                        out.push(x);
                    }
                    return out;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        out
    })
}

fn label(f: &Factors) -> String {
    f.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the experiment. `stop` (Ctrl-C) ends it after stopping the current server; the run under
/// way is not stored, so the next start redoes only that one.
pub fn run(l: &Loaded, opts: &LabOptions, stop: Arc<AtomicBool>) -> Result<LabOutcome, String> {
    let output = match (&opts.output, &l.exp.output) {
        (Some(o), _) => o.clone(),
        (None, Some(o)) => l.dir.join(o),
        (None, None) => PathBuf::from("lab-runs").join(&l.exp.name),
    };
    std::fs::create_dir_all(&output)
        .map_err(|e| format!("cannot create {}: {e}", output.display()))?;
    let db = output.join("lab.sqlite");
    let mut store = Store::open(&db).map_err(|e| format!("{}: {e}", db.display()))?;
    if opts.fresh {
        store.reset(&l.exp.name).map_err(|e| e.to_string())?;
    }
    let spec = serde_json::to_value(&l.exp).map_err(|e| e.to_string())?;
    let exp_id = store
        .experiment(&l.exp.name, &spec)
        .map_err(|e| e.to_string())?;
    let total = l.configurations.len() * l.exp.repeat as usize;
    let (mut ran, mut skipped, mut failed, mut n) = (0, 0, 0, 0);
    let mut interrupted = false;
    'configs: for config in &l.configurations {
        for rep in 1..=l.exp.repeat {
            n += 1;
            if store
                .has_run(exp_id, config, rep)
                .map_err(|e| e.to_string())?
            {
                skipped += 1;
                if opts.progress {
                    eprintln!("[{n}/{total}] {} rep {rep}: stored, skipped", label(config));
                }
                continue;
            }
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'configs;
            }
            let mut values = config.clone();
            values.insert("port".into(), free_port()?.to_string());
            values.insert("headroom".into(), opts.headroom_bin.display().to_string());
            values.insert("output".into(), output.display().to_string());
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
            let plan = match plan_for(l, &values, l.duration) {
                Ok(p) => p,
                Err(e) => return Err(format!("{}: {e}", label(config))),
            };
            let mut srv = match server::start(&l.server, &values) {
                Ok(s) => s,
                Err(f) => {
                    failed += 1;
                    if opts.progress {
                        eprintln!(
                            "[{n}/{total}] {} rep {rep}: server failed: {}\n{}",
                            label(config),
                            f.message,
                            indent(&f.stderr_tail)
                        );
                    }
                    let rec = record(
                        RunStatus::ServerFailed {
                            reason: f.message.clone(),
                            stderr_tail: f.stderr_tail.clone(),
                        },
                        BTreeMap::new(),
                        serde_json::Value::Null,
                        Vec::new(),
                        Vec::new(),
                    );
                    store.save_run(exp_id, &rec).map_err(|e| e.to_string())?;
                    ran += 1;
                    continue;
                }
            };
            if !l.warmup.is_zero() {
                let mut w = plan.clone();
                w.stop.duration = Some(l.warmup);
                let _ = headroom_engine::run(&w, stop.clone(), &mut |_| {});
            }
            let sampling = Arc::new(AtomicBool::new(false));
            let sampler = sample_in_background(srv.pid(), plan.interval, sampling.clone());
            let mut intervals = Vec::new();
            let outcome = headroom_engine::run(&plan, stop.clone(), &mut |iv| {
                intervals.push(interval_line(iv))
            });
            sampling.store(true, Ordering::Relaxed);
            let samples = sampler.join().unwrap_or_default();
            let alive = srv.check_alive();
            let stopped = srv.stop();
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'configs;
            }
            let sample_json: Vec<serde_json::Value> = samples
                .iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect();
            let rec = match (outcome, alive) {
                (_, Err(f)) => {
                    failed += 1;
                    if opts.progress {
                        eprintln!(
                            "[{n}/{total}] {} rep {rep}: server died during the run: {}\n{}",
                            label(config),
                            f.message,
                            indent(&f.stderr_tail)
                        );
                    }
                    record(
                        RunStatus::ServerFailed {
                            reason: f.message,
                            stderr_tail: f.stderr_tail,
                        },
                        BTreeMap::new(),
                        serde_json::Value::Null,
                        intervals,
                        sample_json,
                    )
                }
                (Err(e), Ok(())) => {
                    failed += 1;
                    record(
                        RunStatus::LoadFailed {
                            reason: e.to_string(),
                        },
                        BTreeMap::new(),
                        serde_json::Value::Null,
                        intervals,
                        sample_json,
                    )
                }
                (Ok(out), Ok(())) => {
                    let mut m = metrics(&plan, &out, &samples);
                    let (cap, reached) =
                        connection_capacity(&intervals, l.exp.capacity_error_rate());
                    m.insert("capacity_connections".into(), cap);
                    m.insert("capacity_reached".into(), if reached { 1.0 } else { 0.0 });
                    if opts.progress {
                        eprintln!(
                            "[{n}/{total}] {} rep {rep}: {:.0} req/s, p99 {:.2} ms, errors {}, server CPU {:.0}% user {:.0}% sys ({stopped})",
                            label(config),
                            m["throughput_rps"],
                            m["latency_p99_ms"],
                            m["errors_total"],
                            m.get("server_cpu_user_pct").copied().unwrap_or(0.0),
                            m.get("server_cpu_sys_pct").copied().unwrap_or(0.0),
                        );
                    }
                    let summary = serde_json::json!({
                        "elapsed_s": out.elapsed.as_secs_f64(),
                        "requests": out.total.counters.requests,
                        "responses": out.total.counters.responses,
                        "latency_us": LatencyStats::of(&out.total.latency),
                        "connect_us": LatencyStats::of(&out.total.connect),
                        "in_flight": out.in_flight,
                        "server_stop": stopped,
                    });
                    record(RunStatus::Ok, m, summary, intervals, sample_json)
                }
            };
            store.save_run(exp_id, &rec).map_err(|e| e.to_string())?;
            ran += 1;
        }
    }
    let runs = store.runs(exp_id).map_err(|e| e.to_string())?;
    let mut specs = l.exp.tables.clone();
    if specs.is_empty() {
        // Default: throughput with the last factor across, the others down.
        let names: Vec<String> = l.exp.factors.keys().cloned().collect();
        let (rows, cols) = match names.split_last() {
            Some((last, rest)) => (rest.to_vec(), vec![last.clone()]),
            None => (Vec::new(), Vec::new()),
        };
        specs.push(crate::experiment::TableSpec {
            metric: "throughput_rps".into(),
            rows,
            cols,
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
    Ok(LabOutcome {
        output,
        ran,
        skipped,
        failed,
        tables,
        interrupted,
    })
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::connection_capacity;
    use serde_json::json;

    #[test]
    fn capacity_is_the_peak_before_the_first_bad_interval() {
        let iv = |peak: u64, ok: u64, err: u64, ct: u64| json!({"connections_peak": peak, "responses": ok, "errors": err, "connect_timeouts": ct});
        let good = [iv(100, 50, 0, 0), iv(250, 80, 0, 0), iv(240, 90, 0, 0)];
        assert_eq!(connection_capacity(&good, 0.01), (250.0, false));
        let errors = [
            iv(100, 50, 0, 0),
            iv(300, 80, 0, 0),
            iv(350, 90, 10, 0),
            iv(400, 1, 0, 0),
        ];
        assert_eq!(connection_capacity(&errors, 0.01), (300.0, true));
        assert_eq!(connection_capacity(&errors, 0.2), (400.0, false));
        let timeouts = [iv(100, 50, 0, 0), iv(200, 80, 0, 1)];
        assert_eq!(connection_capacity(&timeouts, 0.5), (100.0, true));
    }
}
