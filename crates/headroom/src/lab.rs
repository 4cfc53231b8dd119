//! `headroom lab EXPERIMENT.yaml`: sweep server configurations, load and sample each, store every
//! run, print the tables (see docs/lab.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::Args;

use crate::parse::UsageError;
use headroom_core::spec::RunSpec;
use headroom_lab::runner::Driven;
use headroom_run::pipeline::{self, Driver as _};

pub(crate) const LAB_LONG: &str = "\
Run an experiment: for each configuration of the factors (full factorial, or the listed
combinations) and each repetition, start the server from its command template, wait until it is
ready, warm up, load it with the scenario while sampling the server's process tree (CPU user and
system, memory, threads, descriptors), check it survived, stop it, and store the run in
OUTPUT/lab.sqlite. Then print the tables (mean ± 95% CI over repetitions) and write them to
OUTPUT/tables.md, tables.csv and tables.json; every load interval goes to OUTPUT/intervals.csv
and every server sample to OUTPUT/samples.csv. Last, the lab's HTML report (each table as a
table and a bar chart with 95% CIs, the capacity curves, the server's CPU and memory over time;
inline SVG, no network) goes to OUTPUT/report.html, also when some runs failed; --no-report
skips it, and `headroom report OUTPUT` writes it again.

With `capacity: {rate: ...}` each run is a search for the max sustainable rate instead: sessions
arrive at a rate that doubles from `from` while the SLO (p99, mean, error rate) holds, then
bisects to the highest rate that holds it. The figure is `capacity_rate`; every probe (the
curve that shows it) goes to OUTPUT/rate-curve.csv and to the progress lines.

With --agents local:N|ssh://...|file:F every load (warm-ups, measured runs, rate probes) runs on
agents and their measurements are merged exactly, as `headroom run --agents` does; the server is
still started, sampled and stopped here. Agents are started once for the whole lab; each load
ships them the configuration's scenario and CSV files. load.threads is then per agent. With
--on-agent-loss continue a lost agent is a warning and the run keeps the others' figures; with
stop the run is stored as failed and the lab goes on.

With --ports LO-HI (or HEADROOM_PORTS=LO-HI), {port} and the ports of local:N agents come from
that range, for machines where only some ports are open (default: any free port).

A lab started again skips the runs already stored: an interrupted lab resumes where it stopped.
A server that fails to start, never becomes ready or dies mid-run is reported with the tail of
its output, stored as a failed run, and the lab goes on.

Examples:
  headroom lab experiments/rudy.yaml --quick
  headroom lab experiments/kernel-poll.yaml --output runs/kp
  headroom lab experiments/rudy.yaml --quick --agents local:2

Exit codes: 0 the lab ran (failed configurations are results, shown in the tables); 1 it could
not run (bad scenario, store error); 2 bad command line or experiment file; 130 interrupted.";

#[derive(Args, Debug)]
#[command(long_about = LAB_LONG)]
pub struct LabArgs {
    /// The experiment file.
    pub experiment: PathBuf,
    /// Output directory (default: the file's `output`, else headroom-runs/lab-NAME, which the
    /// repository ignores).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// The short variant from the file's `quick:` section (default output: OUTPUT-quick).
    #[arg(long)]
    pub quick: bool,
    /// Forget this experiment's stored runs and start over.
    #[arg(long)]
    pub fresh: bool,
    /// No progress lines.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Do not write OUTPUT/report.html.
    #[arg(long)]
    pub no_report: bool,
    #[command(flatten)]
    pub dist: crate::dist::AgentsArgs,
}

pub fn cmd_lab(
    a: &LabArgs,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<ExitCode> {
    let loaded = headroom_lab::experiment::load(&a.experiment, a.quick).map_err(UsageError)?;
    let ports = a.dist.ports(true)?;
    // Started once for the whole lab; stopped when this returns.
    let agents = match a.dist.resolve()? {
        None => None,
        Some((spec, token)) => Some(start_agents(spec, token, &a.dist, ports)?),
    };
    let opts = headroom_lab::runner::LabOptions {
        output: a.output.clone(),
        fresh: a.fresh,
        headroom_bin: std::env::current_exe()?,
        progress: !a.quiet,
        driver: agents.as_ref().map(|(_, d)| d.clone()),
        ports,
    };
    if !a.quiet {
        eprintln!(
            "headroom lab: {} — {} configuration(s) x {} repetition(s)",
            loaded.exp.name,
            loaded.configurations.len(),
            loaded.exp.repeat
        );
        if let Some((started, _)) = &agents {
            for ag in &started.addrs {
                eprintln!("headroom lab: agent {} at {}", ag.name, ag.endpoint);
            }
        }
    }
    let out = headroom_lab::runner::run(&loaded, &opts, stop).map_err(|e| anyhow::anyhow!(e))?;
    for t in &out.tables {
        outln!("{}", t.text());
    }
    if !out.curves.is_empty() {
        let of = loaded
            .rate_search
            .as_ref()
            .and_then(|r| r.slo.of.as_deref())
            .map(|n| format!("'{n}'"))
            .unwrap_or_else(|| "request".into());
        outln!("rate curves (probed rate: mean {of} latency, or broke)");
        for c in &out.curves {
            outln!("  {c}");
        }
        outln!();
    }
    outln!(
        "{} run(s) now, {} found stored, {} failed; results in {}",
        out.ran,
        out.skipped,
        out.failed,
        out.output.display()
    );
    if out.interrupted {
        eprintln!("headroom lab: interrupted; run the same command again to resume");
        return Ok(ExitCode::from(130));
    }
    if !a.no_report {
        // The results are stored and written already: a report that fails is a warning.
        let path = out.output.join("report.html");
        match headroom_report::render_lab(&out.output)
            .map_err(|e| e.to_string())
            .and_then(|html| std::fs::write(&path, html).map_err(|e| e.to_string()))
        {
            Ok(()) => outln!("  Report       {}", path.display()),
            Err(e) => eprintln!(
                "headroom lab: warning: no report written to {}: {e}",
                path.display()
            ),
        }
    }
    // A lab of failures only measured nothing: a script that runs it must see it.
    if out.failed > 0 && out.failed == out.ran && out.skipped == 0 {
        eprintln!(
            "headroom lab: every run failed ({} of {}); see the messages above",
            out.failed, out.ran
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Parses `--agents`, starts (or lists) the agents and makes the driver that runs each of the
/// lab's loads on them.
fn start_agents(
    spec: crate::dist::AgentsSpec,
    token: String,
    dist: &crate::dist::AgentsArgs,
    ports: Option<crate::dist::PortRange>,
) -> anyhow::Result<(crate::dist::Started, headroom_lab::runner::LoadDriver)> {
    // Agents on this machine build a small plan in milliseconds; remote ones get the
    // controller's usual margin.
    let lead = match spec {
        crate::dist::AgentsSpec::Local(_) => Duration::from_secs(1),
        _ => Duration::from_secs(2),
    };
    let started = crate::dist::start_agents(&spec, &token, ports)?;
    let addrs = started.addrs.clone();
    let dist = dist.clone();
    let run = move |plan: &headroom_core::Plan,
                    load: &RunSpec,
                    start_at: SystemTime,
                    stop: Arc<AtomicBool>,
                    sink: &mut dyn FnMut(&headroom_engine::Interval<'_>)|
          -> Result<Driven, String> {
        let job = lab_job(load);
        let opts = headroom_dist::ControllerOpts {
            // The controller starts the load this long after it reached every agent.
            start_delay: start_at
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO),
            ..dist.controller_opts(plan.interval)
        };
        let mut agents = pipeline::OnAgents {
            addrs: &addrs,
            token: &token,
            job: &job,
            opts,
        };
        let driven = agents.drive(plan, stop, sink).map_err(|e| e.to_string())?;
        if driven.agents.as_ref().is_some_and(|a| a.stopped_by_loss) {
            return Err(format!(
                "{}; the load was stopped (--on-agent-loss stop)",
                driven.warnings.join("; ")
            ));
        }
        Ok(driven)
    };
    let driver = headroom_lab::runner::LoadDriver {
        run: Arc::new(run),
        lead,
    };
    Ok((started, driver))
}

/// The job that makes every agent build the lab's plan of `load`: its spec, as the lab built
/// its own plan from it (the scenario with this configuration's values, a probe's load in
/// place, its CSV files inside). No preflight: the lab checked the server is ready, and the
/// load must open no connection of its own.
fn lab_job(load: &RunSpec) -> headroom_dist::Job {
    headroom_dist::Job {
        spec: load.clone(),
        preflight: false,
        segment_index: 0,
        segment_count: 1,
        start_at: SystemTime::now(),
    }
}

#[cfg(test)]
mod tests {
    use super::lab_job;
    use headroom_core::Plan;
    use headroom_lab::runner::load_for;
    use std::time::Duration;

    /// Every field of the plan that decides the load, as text (Plan is not PartialEq).
    fn load_fields(p: &Plan) -> Vec<(&'static str, String)> {
        let w = p.workload.as_ref().expect("a scenario's workload");
        vec![
            ("model", format!("{:?}", p.model)),
            ("stop", format!("{:?}", p.stop)),
            ("threads", p.threads.to_string()),
            ("target", p.target.to_string()),
            ("timeout", format!("{:?}", p.timeout)),
            ("connect_timeout", format!("{:?}", p.connect_timeout)),
            ("interval", format!("{:?}", p.interval)),
            ("keepalive", p.keepalive.to_string()),
            ("pipeline", p.pipeline.to_string()),
            ("socket", format!("{:?}", p.socket)),
            ("request", format!("{:?}", p.request)),
            ("names", format!("{:?}", w.names)),
            ("sessions", format!("{:?}", w.sessions)),
            ("cumulative", format!("{:?}", w.cumulative)),
            ("vars", format!("{:?}", w.vars)),
            ("feeders", format!("{:?}", w.feeders)),
            ("link", format!("{:?}", w.link)),
        ]
    }

    /// The plan an agent builds from the lab's job (as `headroom agent` does, segment 0 of 1)
    /// is the lab's own plan: for closed users, arrival phases, a rate probe and its warm-up.
    #[test]
    fn an_agent_builds_the_labs_plan_from_its_job() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("data")).unwrap();
        std::fs::write(d.join("data/users.csv"), "ann\nbob\ncid\n").unwrap();
        std::fs::write(
            d.join("s.yaml"),
            "load: {users: [{count: {n}}], phases: [{phases}]}\n\
             sessions:\n\
             \x20 - name: one\n\
             \x20   steps:\n\
             \x20     - set: {var: user, csv: {file: data/users.csv, column: 0}}\n\
             \x20     - transaction:\n\
             \x20         name: tx\n\
             \x20         steps:\n\
             \x20           - request: GET /hello/${user}\n\
             \x20           - think: 10ms\n",
        )
        .unwrap();
        let experiment = |extra: &str| {
            let e = d.join("e.yaml");
            std::fs::write(
                &e,
                format!(
                    "name: eq\n\
                     server: {{command: \"exec {{headroom}} serve --listen 127.0.0.1:{{port}}\", ready: {{port: \"127.0.0.1:{{port}}\"}}}}\n\
                     factors: {{n: [\"1\", \"3\"], phases: [\"\", \"{{duration: 1500ms, ramp: {{from: 2, to: 7.25}}}}\"]}}\n\
                     load: {{scenario: s.yaml, duration: 2s, threads: 2, timeout: 3s}}\n{extra}"
                ),
            )
            .unwrap();
            headroom_lab::experiment::load(&e, false).unwrap()
        };
        let check = |l: &headroom_lab::experiment::Loaded,
                     duration: Option<Duration>,
                     rate: Option<f64>| {
            for config in &l.configurations {
                let mut values = config.clone();
                values.insert("port".into(), "4711".into());
                let what = format!("{config:?} {duration:?} {rate:?}");
                let rate = rate.map(|r| (r, l.rate_search.as_ref().unwrap()));
                let (plan, spec) = load_for(l, &values, duration, rate).expect(&what);
                let job = lab_job(&spec);
                let headroom_core::spec::Target::Scenario(sc) = &job.spec.target else {
                    panic!("{what}: a scenario job")
                };
                assert_eq!(sc.files.len(), 1, "{what}: the CSV file, as bytes");
                assert_eq!(sc.files[0].data, b"ann\nbob\ncid\n", "{what}");
                let agent = headroom_run::agent::plan_from_job(&job).expect(&what);
                let (ours, theirs) = (load_fields(&plan), load_fields(&agent));
                for (a, b) in ours.iter().zip(&theirs) {
                    assert_eq!(a, b, "{what}");
                }
            }
        };
        let plain = experiment("");
        assert_eq!(plain.configurations.len(), 4);
        check(&plain, plain.duration, None);
        // The warm-up: the same load, shorter.
        check(&plain, Some(Duration::from_millis(700)), None);
        let search = experiment(
            "capacity: {rate: {from: 10, to: 80, max_users: 50, arrival: constant, slo: {p99: 1s}}}\n",
        );
        // Probes (a rate from a bisection too) and the warm-up at `from`.
        check(&search, search.duration, Some(56.25));
        check(&search, Some(Duration::from_millis(500)), Some(10.0));
        let poisson = experiment("capacity: {rate: {from: 3.3, to: 9, slo: {of: tx, mean: 1s}}}\n");
        check(&poisson, Some(Duration::from_secs(3)), Some(3.3));
    }
}
