//! The run pipeline: a plan, a driver and sinks in, the typed summary out.
//!
//! [`execute`] runs a plan with a [`Driver`] (this process's engine, [`LocalEngine`], or a
//! controller over agents, [`OnAgents`]); every merged interval becomes one intervals.jsonl line
//! (with the server's sample when a [`ServerSampler`] is given) and goes to each [`Sink`] (the
//! progress line, the run directory, the live dashboard and the Prometheus endpoint); at the end
//! the [`RunSummary`] is built, the thresholds checked, and each sink finishes with it.
//! `headroom run` and `headroom demo` go through here; the lab's loads are driven by the same
//! drivers and write the same run directories.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::SystemTime;

use headroom_core::Plan;
use headroom_engine::{Interval, RunOutcome};
use headroom_scenario::model::Threshold;

use crate::human::Progress;
use crate::interval::interval_json;
use crate::rundir::{finish_run_dir, RunDir};
use crate::summary::{self_usage, Agents, RunSummary, SelfUsage};
use crate::thresholds::{check, Checked};
use crate::UsageError;

/// How a run's load is driven. Both drivers hand every merged interval to `sink`, in order, and
/// return the merged outcome.
pub trait Driver {
    fn drive(
        &mut self,
        plan: &Plan,
        stop: Arc<AtomicBool>,
        sink: &mut dyn FnMut(&Interval<'_>),
    ) -> anyhow::Result<Driven>;
}

/// What a driver measured: the merged outcome, the agents' section of summary.json (a
/// distributed run), and warnings for stderr.
#[derive(Debug)]
pub struct Driven {
    pub outcome: RunOutcome,
    pub agents: Option<Agents>,
    pub warnings: Vec<String>,
}

/// This process's engine.
pub struct LocalEngine;

impl Driver for LocalEngine {
    fn drive(
        &mut self,
        plan: &Plan,
        stop: Arc<AtomicBool>,
        sink: &mut dyn FnMut(&Interval<'_>),
    ) -> anyhow::Result<Driven> {
        Ok(Driven {
            outcome: headroom_engine::run(plan, stop, sink)?,
            agents: None,
            warnings: Vec::new(),
        })
    }
}

/// A controller over agents: each runs its segment of `job` and streams its intervals; the
/// controller merges them exactly.
pub struct OnAgents<'a> {
    pub addrs: &'a [headroom_dist::AgentAddr],
    pub token: &'a str,
    pub job: &'a headroom_dist::Job,
    pub opts: headroom_dist::ControllerOpts,
}

impl Driver for OnAgents<'_> {
    fn drive(
        &mut self,
        plan: &Plan,
        stop: Arc<AtomicBool>,
        sink: &mut dyn FnMut(&Interval<'_>),
    ) -> anyhow::Result<Driven> {
        let out = headroom_dist::run_controller(
            self.addrs,
            self.token,
            self.job,
            self.opts.clone(),
            stop,
            sink,
        )?;
        let warnings = out.lost.iter().map(lost_line).collect();
        let agents = Agents::of(&out, plan.threads, self.opts.on_loss);
        Ok(Driven {
            outcome: out.outcome,
            agents: Some(agents),
            warnings,
        })
    }
}

/// One line for a lost agent: who, when, why, and that its data is kept.
pub fn lost_line(l: &headroom_dist::LostAgent) -> String {
    format!(
        "agent {} was lost {}: {}; its data up to then is kept",
        l.name,
        match l.after_interval {
            Some(i) => format!("after interval {i}"),
            None => "before its first interval".into(),
        },
        l.why
    )
}

/// What sees a run as it goes: each interval with its intervals.jsonl line, then the summary.
pub trait Sink {
    /// One merged interval and its line. An error is warned at once and kept for the end; the
    /// run goes on. A sink reports each failing file once.
    fn interval(&mut self, iv: &Interval<'_>, line: &serde_json::Value) -> std::io::Result<()>;
    /// The run's end. An error is one of [`Finished::write_errors`] (after every sink has
    /// finished).
    fn finish(&mut self, _summary: &RunSummary) -> anyhow::Result<()> {
        Ok(())
    }
    /// False for a sink that reads only the interval (the line is then not made for it).
    fn wants_line(&self) -> bool {
        true
    }
}

/// The live progress line on stderr.
pub struct ProgressSink(pub Progress);

impl Sink for ProgressSink {
    fn interval(&mut self, iv: &Interval<'_>, _: &serde_json::Value) -> std::io::Result<()> {
        self.0.interval(iv);
        Ok(())
    }
    fn finish(&mut self, _: &RunSummary) -> anyhow::Result<()> {
        self.0.finish();
        Ok(())
    }
    fn wants_line(&self) -> bool {
        false
    }
}

/// The run directory: intervals.jsonl and latency.hlog as the run goes; summary.json, then
/// intervals.csv and (if `report`) report.html at the end.
pub struct DirSink {
    pub dir: RunDir,
    report: bool,
    /// report.html once written.
    pub report_path: Option<PathBuf>,
    /// A failure of the derived files (the run's data is on disk; a warning).
    pub warning: Option<String>,
}

impl DirSink {
    pub fn create(path: &Path, command: &str, report: bool) -> anyhow::Result<DirSink> {
        let dir = RunDir::create(path, SystemTime::now(), command)
            .map_err(|e| anyhow::anyhow!("cannot create run directory {}: {e}", path.display()))?;
        Ok(DirSink {
            dir,
            report,
            report_path: None,
            warning: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir.path
    }
}

impl Sink for DirSink {
    fn interval(&mut self, iv: &Interval<'_>, line: &serde_json::Value) -> std::io::Result<()> {
        self.dir.interval(iv, line)
    }
    fn finish(&mut self, summary: &RunSummary) -> anyhow::Result<()> {
        self.dir.write_summary(summary).map_err(|e| {
            anyhow::anyhow!("cannot write {}/summary.json: {e}", self.dir.path.display())
        })?;
        // The run's data is on disk; the derived files must not fail the run.
        match finish_run_dir(&self.dir.path, self.report) {
            Ok(p) => self.report_path = p,
            Err(e) => self.warning = Some(e.to_string()),
        }
        Ok(())
    }
}

/// The live dashboard and Prometheus endpoint: every line pushed as it comes.
pub struct LiveSink<'a>(pub &'a headroom_report::live_server::LiveServer);

impl Sink for LiveSink<'_> {
    fn interval(&mut self, _: &Interval<'_>, line: &serde_json::Value) -> std::io::Result<()> {
        self.0.push(line);
        Ok(())
    }
}

/// The server under test sampled each interval (`--server-pid`): CPU and memory go into each
/// intervals.jsonl line. A server that goes away is warned about once; the run goes on.
pub struct ServerSampler {
    sampler: headroom_monitor::Sampler,
    lost: bool,
}

impl ServerSampler {
    /// Starts sampling `pid`: its first reading is the baseline of the first interval's CPU.
    pub fn start(pid: u32) -> Result<ServerSampler, UsageError> {
        let mut sampler = headroom_monitor::Sampler::new(pid);
        sampler
            .sample()
            .map_err(|e| UsageError(format!("--server-pid {pid}: cannot sample it ({e})")))?;
        Ok(ServerSampler {
            sampler,
            lost: false,
        })
    }

    fn sample(&mut self) -> Option<headroom_monitor::Sample> {
        if self.lost {
            return None;
        }
        match self.sampler.sample() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("headroom: warning: --server-pid: {e}; no more server samples");
                self.lost = true;
                None
            }
        }
    }
}

/// A finished run.
pub struct Finished {
    pub summary: RunSummary,
    pub outcome: RunOutcome,
    pub usage: SelfUsage,
    pub checked: Vec<Checked>,
    /// Thresholds broken.
    pub broken: usize,
    /// What the sinks could not write (the run directory's disk full...), one message per
    /// failure, each already warned on stderr as it happened: the caller prints the summary,
    /// then says the output is incomplete (exit 3 for `headroom run`).
    pub write_errors: Vec<String>,
}

/// Runs `plan` with `driver`, feeding `sinks` (and sampling the server with `sampler`); checks
/// `thresholds`; returns the summary. `command` is recorded in summary.json and latency.hlog.
/// Warnings (an agent lost, a file that cannot be written) go to stderr as they are known. What
/// a sink could not write, during the run or at its end (summary.json), is
/// [`Finished::write_errors`]: the run's figures are still returned.
pub fn execute(
    plan: &Plan,
    thresholds: &[Threshold],
    driver: &mut dyn Driver,
    mut sampler: Option<&mut ServerSampler>,
    sinks: &mut [&mut dyn Sink],
    stop: Arc<AtomicBool>,
    command: &str,
) -> anyhow::Result<Finished> {
    let lines = sinks.iter().any(|s| s.wants_line());
    let mut write_errors: Vec<String> = Vec::new();
    let driven = driver.drive(plan, stop, &mut |iv| {
        let server = sampler.as_mut().and_then(|s| s.sample());
        let line = if lines {
            interval_json(iv, plan, server.as_ref())
        } else {
            serde_json::Value::Null
        };
        for s in sinks.iter_mut() {
            if let Err(e) = s.interval(iv, &line) {
                // Said at once (a sink reports each file's failure once); the run goes on.
                eprintln!("headroom: warning: {e}; the run goes on");
                write_errors.push(e.to_string());
            }
        }
    })?;
    let usage = self_usage();
    for w in &driven.warnings {
        eprintln!("headroom: warning: {w}");
    }
    let outcome = driven.outcome;
    let mut summary = RunSummary::build(plan, &outcome, &usage, command);
    summary.agents = driven.agents;
    let checked = check(plan, &outcome, thresholds);
    let broken = summary.set_thresholds(&checked);
    for s in sinks.iter_mut() {
        if let Err(e) = s.finish(&summary) {
            write_errors.push(format!("{e:#}"));
        }
    }
    Ok(Finished {
        summary,
        outcome,
        usage,
        checked,
        broken,
        write_errors,
    })
}
