//! `headroom lab EXPERIMENT.yaml`: sweep server configurations, load and sample each, store every
//! run, print the tables (see docs/lab.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::parse::UsageError;
use headroom_lab::measure::LabAgents;

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
    // A real server that is not installed fails here, before any run, naming its package.
    if let Some(missing) = loaded.missing_program() {
        anyhow::bail!(missing);
    }
    let ports = a.dist.ports(true)?;
    // The file's agents (`agents:`, `quick.agents`) unless the command line names some.
    let mut dist = a.dist.clone();
    if dist.agents.is_none() {
        dist.agents = loaded.agents.clone();
    }
    // Started once for the whole lab; stopped when this returns.
    let agents = match dist.resolve()? {
        None => None,
        Some((spec, token)) => Some(start_agents(spec, token, &dist, ports)?),
    };
    let opts = headroom_lab::runner::LabOptions {
        output: a.output.clone(),
        fresh: a.fresh,
        headroom_bin: std::env::current_exe()?,
        progress: !a.quiet,
        agents: agents.as_ref().map(|(_, a)| a.clone()),
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

/// Parses `--agents`, starts (or lists) the agents and says where the lab's loads run.
fn start_agents(
    spec: crate::dist::AgentsSpec,
    token: String,
    dist: &crate::dist::AgentsArgs,
    ports: Option<crate::dist::PortRange>,
) -> anyhow::Result<(crate::dist::Started, LabAgents)> {
    // Agents on this machine build a small plan in milliseconds; remote ones get the
    // controller's usual margin.
    let lead = match spec {
        crate::dist::AgentsSpec::Local(_) => Duration::from_secs(1),
        _ => Duration::from_secs(2),
    };
    let started = crate::dist::start_agents(&spec, &token, ports)?;
    let agents = LabAgents {
        addrs: started.addrs.clone(),
        token,
        // Each load sets the interval its plan has.
        opts: dist.controller_opts(Duration::from_secs(1)),
        lead,
    };
    Ok((started, agents))
}
