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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use headroom_core::{ErrorKind, Plan, ProtoCounter};
use headroom_engine::{Interval, RunOutcome};
use headroom_metrics::Counters;
use headroom_scenario::model::Threshold;

use crate::human::{thousands, Progress};
use crate::interval::{IntervalLine, IntervalLineExt};
use crate::rundir::{finish_run_dir, RunDir};
use crate::summary::{agents_of, self_usage, Agents, RunSummary, RunSummaryExt, SelfUsage};
use crate::thresholds::{check, Checked};
use crate::verdict::{verdict, Evidence};
use crate::UsageError;

/// How a run's load is driven. Both drivers hand every merged interval to `sink`, in order, and
/// return the merged outcome. A driver holds the instant its load starts (`None`: as soon as it
/// can), so that whoever samples the server beside the load (the lab) starts on the same clock.
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

/// This process's engine, starting its load at `start` (now when `None`, or when that instant
/// has passed).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalEngine {
    pub start: Option<SystemTime>,
}

impl LocalEngine {
    /// The engine starting its load at once.
    pub fn now() -> LocalEngine {
        LocalEngine { start: None }
    }
}

/// Sleeps until `at`, or until `stop` is set; false when stopped first.
fn wait_until(at: SystemTime, stop: &AtomicBool) -> bool {
    while let Ok(left) = at.duration_since(SystemTime::now()) {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(left.min(Duration::from_millis(5)));
    }
    true
}

impl Driver for LocalEngine {
    fn drive(
        &mut self,
        plan: &Plan,
        stop: Arc<AtomicBool>,
        sink: &mut dyn FnMut(&Interval<'_>),
    ) -> anyhow::Result<Driven> {
        if let Some(at) = self.start {
            // Stopped before the start: the engine still runs (and stops at once), so the
            // outcome says the run was interrupted, as any stopped run does.
            wait_until(at, &stop);
        }
        Ok(Driven {
            outcome: headroom_engine::run(plan, stop, sink)?,
            agents: None,
            warnings: Vec::new(),
        })
    }
}

/// A controller over agents: each runs its segment of `job` and streams its intervals; the
/// controller merges them exactly. The load starts `opts.start_delay` after the controller
/// reached every agent, or at `start` when one is given (the lab's: its sampler starts then).
pub struct OnAgents<'a> {
    pub addrs: &'a [headroom_dist::AgentAddr],
    pub token: &'a str,
    pub job: &'a headroom_dist::Job,
    pub opts: headroom_dist::ControllerOpts,
    pub start: Option<SystemTime>,
}

impl Driver for OnAgents<'_> {
    fn drive(
        &mut self,
        plan: &Plan,
        stop: Arc<AtomicBool>,
        sink: &mut dyn FnMut(&Interval<'_>),
    ) -> anyhow::Result<Driven> {
        let mut opts = self.opts.clone();
        if let Some(at) = self.start {
            opts.start_delay = at
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
        }
        let out =
            headroom_dist::run_controller(self.addrs, self.token, self.job, opts, stop, sink)?;
        let warnings = out.lost.iter().map(lost_line).collect();
        let agents = agents_of(&out, plan.threads, self.opts.on_loss);
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
    fn interval(&mut self, iv: &Interval<'_>, line: &IntervalLine) -> std::io::Result<()>;
    /// The run's end. An error is one of [`Finished::write_errors`] (after every sink has
    /// finished).
    fn finish(&mut self, _summary: &RunSummary) -> anyhow::Result<()> {
        Ok(())
    }
    /// False for a sink that reads only the interval (the line is then not made for it).
    fn wants_line(&self) -> bool {
        true
    }
    /// A sink that sampled the server itself (the lab's, on its own thread) ends its sampling
    /// at the run's end and hands over its samples with rates, for the verdict; called once,
    /// before any sink's `finish`.
    fn server_samples(&mut self) -> Option<Vec<headroom_monitor::Sample>> {
        None
    }
}

/// The live progress line on stderr.
pub struct ProgressSink(pub Progress);

impl Sink for ProgressSink {
    fn interval(&mut self, iv: &Interval<'_>, _: &IntervalLine) -> std::io::Result<()> {
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
        DirSink::create_at(path, SystemTime::now(), command, report)
    }

    /// As [`DirSink::create`], for a run that starts at `start` (latency.hlog's start time).
    pub fn create_at(
        path: &Path,
        start: SystemTime,
        command: &str,
        report: bool,
    ) -> anyhow::Result<DirSink> {
        let dir = RunDir::create(path, start, command)
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
    fn interval(&mut self, iv: &Interval<'_>, line: &IntervalLine) -> std::io::Result<()> {
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
    fn interval(&mut self, _: &Interval<'_>, line: &IntervalLine) -> std::io::Result<()> {
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
    /// Starts sampling `pid` (and the accept queue of `target`'s port when it is on this
    /// machine's loopback): its first reading is the baseline of the first interval's CPU.
    pub fn start(pid: u32, target: std::net::SocketAddr) -> Result<ServerSampler, UsageError> {
        let mut sampler = headroom_monitor::Sampler::new(pid);
        if target.ip().is_loopback() {
            sampler = sampler.listen_port(target.port());
        }
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
    /// One line saying what every reply was, when no request succeeded ([`nothing_succeeded`]):
    /// `headroom run` prints it and exits 1.
    pub nothing_succeeded: Option<String>,
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
    // This process's CPU over the run alone: a lab (or `--repeat`) runs many in one process.
    let before = self_usage();
    let mut write_errors: Vec<String> = Vec::new();
    // The first interval with an attempt in it: a plain run that got nothing but failures from
    // a TLS port stops there, with one line (`preflight::tls_port`).
    let stop_early = stop.clone();
    let mut looked = false;
    let mut wrong_port: Option<String> = None;
    // The server's samples, and the intervals that ended with connections left waiting in
    // its accept queue, for the verdict.
    let mut samples: Vec<headroom_monitor::Sample> = Vec::new();
    let (mut intervals, mut waiting) = (0u64, 0u64);
    let driven = driver.drive(plan, stop, &mut |iv| {
        let c = &iv.merged.counters;
        if !looked && (c.responses > 0 || c.errors_total() > 0) {
            looked = true;
            wrong_port = crate::preflight::tls_port(plan, c);
            if wrong_port.is_some() {
                stop_early.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let server = sampler.as_mut().and_then(|s| s.sample());
        samples.extend(server.iter().cloned());
        intervals += 1;
        waiting += u64::from(crate::verdict::waiting_at(
            c.tcp_connected_open,
            c.connections_open,
        ));
        // No sink reads the line when none wants it: an empty one stands in, as cheap as
        // `null` was.
        let line = if lines {
            IntervalLine::of(iv, plan, server.as_ref())
        } else {
            IntervalLine::default()
        };
        for s in sinks.iter_mut() {
            if let Err(e) = s.interval(iv, &line) {
                // Said at once (a sink reports each file's failure once); the run goes on.
                eprintln!("headroom: warning: {e}; the run goes on");
                write_errors.push(e.to_string());
            }
        }
    })?;
    let usage = self_usage().since(&before);
    for w in &driven.warnings {
        eprintln!("headroom: warning: {w}");
    }
    let mut outcome = driven.outcome;
    if wrong_port.is_some() {
        // Our stop, not the user's: the run is not "interrupted", it was stopped, and says why.
        outcome.interrupted = false;
    }
    let mut summary = RunSummary::build(plan, &outcome, &usage, command);
    summary.generator = crate::verdict::generator_of(plan, &outcome);
    summary.agents = driven.agents;
    summary.stopped = wrong_port.clone();
    for s in sinks.iter_mut() {
        if let Some(v) = s.server_samples() {
            samples = v;
        }
    }
    let cores = summary.environment.cores.unwrap_or(1) as f64;
    let waiting_share = waiting as f64 / intervals.max(1) as f64;
    summary.verdict = Some(verdict(&Evidence::gather(
        &summary,
        &samples,
        waiting_share,
        cores,
    )));
    let checked = check(plan, &outcome, thresholds);
    let broken = summary.set_thresholds(&checked);
    for s in sinks.iter_mut() {
        if let Err(e) = s.finish(&summary) {
            write_errors.push(format!("{e:#}"));
        }
    }
    let nothing_succeeded = nothing_succeeded(&outcome.total.counters, outcome.in_flight).map(
        |line| match wrong_port {
            Some(port) => format!("no request succeeded: {port}"),
            None => line,
        },
    );
    Ok(Finished {
        summary,
        outcome,
        usage,
        checked,
        broken,
        write_errors,
        nothing_succeeded,
    })
}

/// The errors that are complete replies (counted among `responses` too): a reply that says the
/// request failed.
const REPLY_ERRORS: [ErrorKind; 7] = [
    ErrorKind::Http4xx,
    ErrorKind::Http5xx,
    ErrorKind::UnexpectedStatus,
    ErrorKind::RedirectLimit,
    ErrorKind::BadLocation,
    ErrorKind::RedirectOffsite,
    ErrorKind::ErrorReply,
];

/// `None` when at least one request succeeded (a reply that is no error); otherwise one line
/// saying what every attempt got: `no request succeeded: 43,685 replies, all 400 Bad Request`,
/// `... 1,204 attempts, all refused`, `... 20 requests, all still awaiting a reply at the end`.
/// A run in which nothing succeeded tested nothing, whatever its error rate says: `headroom
/// run` exits 1 on it (local and distributed runs alike: `counters` is the merged total).
pub fn nothing_succeeded(c: &Counters, in_flight: u64) -> Option<String> {
    let reply_errors: u64 = REPLY_ERRORS.iter().map(|k| c.errors[k.index()]).sum();
    // The browser's hops are replies but no request's end: a redirect it followed, a Digest
    // challenge it answered. A run whose every answer was refused (a wrong password) got one
    // 401 challenge and one 401 refusal per request, and nothing succeeded.
    let hops = c.proto[ProtoCounter::HttpRedirects.index()]
        + c.proto[ProtoCounter::HttpAuthChallenges.index()];
    if c.responses > reply_errors + hops {
        return None;
    }
    let n = thousands;
    let mut parts: Vec<String> = Vec::new();
    if c.responses > 0 {
        let codes: Vec<(u16, u64)> = c.codes_seen().collect();
        let unexpected = if c.errors[ErrorKind::UnexpectedStatus.index()] > 0 {
            " (not in --expect-status)"
        } else {
            ""
        };
        let replies = format!(
            "{} repl{}",
            n(c.responses),
            if c.responses == 1 { "y" } else { "ies" }
        );
        parts.push(match codes.as_slice() {
            [] => {
                let kinds: Vec<&str> = REPLY_ERRORS
                    .iter()
                    .filter(|k| c.errors[k.index()] > 0)
                    .map(|k| k.name())
                    .collect();
                format!("{replies}, all errors ({})", kinds.join(", "))
            }
            [(code, _)] => format!("{replies}, all {code}{}{unexpected}", reason(*code)),
            many => {
                let mut top = many.to_vec();
                top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let mut shown: Vec<String> = top
                    .iter()
                    .take(3)
                    .map(|(code, k)| format!("{} {code}{}", n(*k), reason(*code)))
                    .collect();
                if top.len() > 3 {
                    shown.push(format!("{} other codes", top.len() - 3));
                }
                format!("{replies}, all failures{unexpected}: {}", shown.join(", "))
            }
        });
    }
    let others: Vec<(ErrorKind, u64)> = ErrorKind::ALL
        .iter()
        .filter(|k| !REPLY_ERRORS.contains(k))
        .map(|&k| (k, c.errors[k.index()]))
        .filter(|&(_, v)| v > 0)
        .collect();
    let s = |v: u64| if v == 1 { "" } else { "s" };
    match (parts.is_empty(), others.as_slice(), in_flight) {
        (true, [], 0) => parts.push("no reply and no error: nothing was answered".into()),
        (true, [], f) => parts.push(format!(
            "{} request{}, all still awaiting a reply at the end",
            n(f),
            s(f)
        )),
        (true, [(k, v)], _) => {
            parts.push(format!("{} attempt{}, all {}", n(*v), s(*v), failure(*k)))
        }
        _ => parts.extend(
            others
                .iter()
                .map(|(k, v)| format!("{} {}", n(*v), failure(*k))),
        ),
    }
    if in_flight > 0 && !(parts.len() == 1 && others.is_empty() && c.responses == 0) {
        parts.push(format!(
            "{} still awaiting a reply at the end",
            n(in_flight)
        ));
    }
    Some(format!("no request succeeded: {}", parts.join("; ")))
}

/// An error kind as the end of "all ...".
fn failure(k: ErrorKind) -> String {
    match k {
        ErrorKind::Refused => "refused (nothing listens there)".into(),
        ErrorKind::ConnectTimeout => "connect timeouts".into(),
        ErrorKind::Timeout => "timed out (no reply within --timeout)".into(),
        ErrorKind::Reset => "reset by the server".into(),
        ErrorKind::Closed => "closed by the server before a reply".into(),
        ErrorKind::Protocol => "protocol errors (the reply was not the protocol asked for)".into(),
        k => k.name().replace('_', " "),
    }
}

/// ` Bad Request` for 400: the reason phrase of the common codes (empty for others).
fn reason(code: u16) -> &'static str {
    match code {
        200 => " OK",
        204 => " No Content",
        301 => " Moved Permanently",
        302 => " Found",
        304 => " Not Modified",
        400 => " Bad Request",
        401 => " Unauthorized",
        403 => " Forbidden",
        404 => " Not Found",
        405 => " Method Not Allowed",
        408 => " Request Timeout",
        413 => " Content Too Large",
        421 => " Misdirected Request",
        426 => " Upgrade Required",
        429 => " Too Many Requests",
        500 => " Internal Server Error",
        501 => " Not Implemented",
        502 => " Bad Gateway",
        503 => " Service Unavailable",
        504 => " Gateway Timeout",
        505 => " HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::StatusSet;

    fn replies(codes: &[(u16, u64)]) -> Counters {
        let mut c = Counters::default();
        for &(code, n) in codes {
            for _ in 0..n {
                c.responses += 1;
                c.reply_status(code, &StatusSet::EMPTY);
            }
        }
        c
    }

    #[test]
    fn one_success_is_enough() {
        assert_eq!(nothing_succeeded(&replies(&[(200, 1), (503, 99)]), 0), None);
        let mut c = replies(&[(302, 1)]);
        c.error(ErrorKind::Refused);
        assert_eq!(nothing_succeeded(&c, 0), None, "a 3xx is no error");
    }

    /// A hop (a challenge answered, a redirect followed) is a reply, but no request's end.
    #[test]
    fn the_browsers_hops_are_no_success() {
        // A wrong Digest password: each request's challenge, then its refused answer.
        let mut c = Counters::default();
        for _ in 0..3 {
            c.responses += 1;
            c.status(401);
            c.proto(ProtoCounter::HttpAuthChallenges, 1);
            c.responses += 1;
            c.reply_status(401, &StatusSet::EMPTY);
        }
        assert_eq!(
            nothing_succeeded(&c, 0).unwrap(),
            "no request succeeded: 6 replies, all 401 Unauthorized"
        );
        // Redirects followed to a failing page; then one that ends well.
        let mut c = replies(&[(500, 2)]);
        for _ in 0..2 {
            c.responses += 1;
            c.status(302);
            c.proto(ProtoCounter::HttpRedirects, 1);
        }
        assert!(nothing_succeeded(&c, 0).is_some());
        c.responses += 1;
        c.reply_status(200, &StatusSet::EMPTY);
        assert_eq!(nothing_succeeded(&c, 0), None);
    }

    #[test]
    fn the_line_says_what_every_reply_was() {
        let line = nothing_succeeded(&replies(&[(400, 43_685)]), 0).unwrap();
        assert_eq!(
            line,
            "no request succeeded: 43,685 replies, all 400 Bad Request"
        );
        let line = nothing_succeeded(&replies(&[(404, 5), (503, 7)]), 2).unwrap();
        assert_eq!(
            line,
            "no request succeeded: 12 replies, all failures: 7 503 Service Unavailable, \
             5 404 Not Found; 2 still awaiting a reply at the end"
        );
        let mut c = Counters::default();
        for _ in 0..1204 {
            c.error(ErrorKind::Refused);
        }
        assert_eq!(
            nothing_succeeded(&c, 0).unwrap(),
            "no request succeeded: 1,204 attempts, all refused (nothing listens there)"
        );
        let mut c = replies(&[(400, 3)]);
        c.error(ErrorKind::Timeout);
        assert_eq!(
            nothing_succeeded(&c, 0).unwrap(),
            "no request succeeded: 3 replies, all 400 Bad Request; 1 timed out (no reply within \
             --timeout)"
        );
        assert_eq!(
            nothing_succeeded(&Counters::default(), 20).unwrap(),
            "no request succeeded: 20 requests, all still awaiting a reply at the end"
        );
        let mut c = Counters {
            responses: 4,
            ..Default::default()
        };
        for _ in 0..4 {
            c.error(ErrorKind::ErrorReply);
        }
        assert_eq!(
            nothing_succeeded(&c, 0).unwrap(),
            "no request succeeded: 4 replies, all errors (error_reply)"
        );
    }
}
