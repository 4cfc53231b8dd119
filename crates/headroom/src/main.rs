//! The `headroom` binary: argument types and wiring, nothing else. `run` turns its flags into a
//! `RunSpec` (files read into it) and hands it to the run library (`headroom_run`: the one
//! builder to a plan, the drivers, the sinks, the typed summary); `lab`, `serve`, `report`,
//! `import`, `k8s` and `agent` map their flags onto their crates the same way. `parse` is the
//! leaf every module takes its usage error and small parsers from.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use headroom_core::spec::{RunSpec, Target};
use headroom_core::Plan;

/// `print!` to stdout through [`write_stdout`]: a closed stdout is not a panic.
macro_rules! out {
    ($($t:tt)*) => { $crate::write_stdout(format_args!($($t)*)) };
}

/// `println!` to stdout through [`write_stdout`].
macro_rules! outln {
    () => { $crate::write_stdout(format_args!("\n")) };
    ($($t:tt)*) => { $crate::write_stdout(format_args!("{}\n", format_args!($($t)*))) };
}

mod args;
mod dist;
mod import;
mod k8s;
mod lab;
mod manpages;
mod parse;
mod report;
mod serve;
mod surge;

use args::{Cli, Command, DemoArgs, RunArgs};
use parse::UsageError;
// The live server lives in headroom-report; the run code below names it `live::LiveServer`.
use headroom_report::live_server as live;
use headroom_run::summary::RunSummaryExt;
use headroom_run::{human, pipeline};

/// Exit code of a usage error (like clap's own).
const EXIT_USAGE: u8 = 2;
/// Exit code of a run that failed a check or could not reach its target.
const EXIT_FAILED: u8 = 1;
/// Exit code of a run that completed but whose run directory could not be written whole (a
/// full disk): its summary was printed; what was written is whole lines.
const EXIT_INCOMPLETE: u8 = 3;

/// Stack of the thread that parses the command line (virtual: only what it uses is touched).
const ARGS_STACK: usize = 16 << 20;

/// The command line, parsed on a short-lived thread: clap's builders for every subcommand's
/// arguments take ~500 KiB of stack here (this crate builds at opt-level 0), pages the main
/// thread would keep resident for the whole run (its VmStk was 616 KiB in a `headroom run`);
/// a thread's stack goes back to the system when it ends.
fn parse_args() -> Result<Cli, clap::Error> {
    match std::thread::Builder::new()
        .name("headroom-args".into())
        .stack_size(ARGS_STACK)
        .spawn(Cli::try_parse)
    {
        Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
        Err(_) => Cli::try_parse(),
    }
}

fn main() -> ExitCode {
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    raise_fd_limit();
    let result = match cli.command {
        Command::Run(a) => cmd_run(&a),
        Command::Demo(a) => cmd_demo(&a),
        Command::Serve(a) => serve::cmd_serve(&a),
        Command::Import(a) => import::cmd_import(&a),
        Command::Surge(a) => Ok(surge::main(a)),
        Command::Lab(a) => lab::cmd_lab(&a, stop_flag()),
        Command::Report(a) => report::cmd_report(&a),
        Command::K8s(a) => k8s::cmd_k8s(&a),
        Command::Agent(a) => dist::cmd_agent(&a),
        Command::Completions(a) => manpages::cmd_completions(&a),
        Command::Man(a) => manpages::cmd_man(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if let Some(u) = e.downcast_ref::<UsageError>() {
                eprintln!("headroom: {u}");
                ExitCode::from(EXIT_USAGE)
            } else {
                eprintln!("headroom: {e:#}");
                ExitCode::from(EXIT_FAILED)
            }
        }
    }
}

/// Help and version go out as clap renders them; a bad command line becomes one line on stderr
/// (what is wrong, and where to look) and exit code 2.
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind as K;
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("headroom: {}", clap_line(&e.render().to_string()));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// clap's rendered error as one line: its message (sometimes over two lines), then clap's
/// suggestion ("a similar argument exists: '--connections'") as "did you mean", other tips after
/// a semicolon, and the help of the subcommand its usage line names.
fn clap_line(text: &str) -> String {
    let mut paras: Vec<Vec<&str>> = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    for l in text.lines().map(str::trim) {
        if l.is_empty() {
            if !cur.is_empty() {
                paras.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(l);
        }
    }
    if !cur.is_empty() {
        paras.push(cur);
    }
    let mut line = paras
        .first()
        .map(|p| p.join(" "))
        .unwrap_or_default()
        .trim_start_matches("error:")
        .trim()
        .to_string();
    let mut help = "headroom".to_string();
    for p in paras.iter().skip(1) {
        for l in p {
            if let Some(tip) = l.strip_prefix("tip:").map(str::trim) {
                match tip.split_once("exists: ") {
                    Some((_, what))
                        if tip.starts_with("a similar") || tip.starts_with("some similar") =>
                    {
                        line.push_str(&format!("; did you mean {what}?"))
                    }
                    _ => line.push_str(&format!("; {tip}")),
                }
            } else if let Some(usage) = l.strip_prefix("Usage: headroom") {
                for w in usage.split_whitespace() {
                    if w.starts_with(['[', '<', '-']) {
                        break;
                    }
                    help.push(' ');
                    help.push_str(w);
                }
            }
        }
    }
    format!("{line} (see '{help} --help')")
}

/// Lift the soft descriptor limit to the hard one: every connection is a descriptor.
fn raise_fd_limit() {
    // SAFETY: get/setrlimit on a zeroed struct we own.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// Ctrl-C sets the stop flag (the run ends cleanly and still reports); a second Ctrl-C exits.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if s.swap(true, Ordering::SeqCst) {
            eprintln!("\nheadroom: interrupted twice, exiting now");
            std::process::exit(130);
        }
        eprintln!("\nheadroom: stopping (Ctrl-C again to quit at once)…");
    });
    stop
}

/// Write to stdout. A reader that went away (`headroom run ... | head -1`) makes the write fail
/// with EPIPE (SIGPIPE is ignored, as Rust sets it: a load generator writes to sockets that
/// servers close, and must never die of it); `print!` would panic on that (exit 101). Here the
/// rest of the output is dropped quietly and the command ends as it would have, with its own
/// exit code (so `set -o pipefail` still sees a broken threshold). Another write error (a full
/// disk behind `> file`) is warned once.
fn write_stdout(args: std::fmt::Arguments<'_>) {
    static CLOSED: AtomicBool = AtomicBool::new(false);
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("headroom: warning: could not write to stdout: {e}");
        }
    }
}

/// The command line as recorded in summary.json, latency.hlog's header and report.html: files
/// people share, so the agents' token (`--token T`, `--token=T`) is written `***`. (The
/// environment variable HEADROOM_TOKEN is not in argv.)
fn command_line() -> String {
    redact_token(std::env::args()).join(" ")
}

fn redact_token(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut next_is_token = false;
    for a in args {
        if std::mem::take(&mut next_is_token) {
            out.push("***".into());
        } else if a == "--token" {
            next_is_token = true;
            out.push(a);
        } else if a.starts_with("--token=") {
            out.push("--token=***".into());
        } else {
            out.push(a);
        }
    }
    out
}

/// Why `--repeat` cannot go with the other flags given, if it cannot (a usage error, exit 2).
fn repeat_refusal(a: &RunArgs) -> Option<String> {
    a.repeat?;
    let with = |flag: &str, why: &str| Some(format!("--repeat cannot go with {flag}: {why}"));
    if a.out.is_none() {
        return Some(
            "--repeat needs --out DIR: the repeats go into DIR/1 ... DIR/N, their spread into \
             DIR/repeats.json and DIR/report.html"
                .into(),
        );
    }
    if a.dist.agents.is_some() {
        return with(
            "--agents",
            "agents are started and stopped per run; repeat a distributed run with a lab \
             experiment (`repeat:`) or a shell loop",
        );
    }
    if a.json {
        return with(
            "--json",
            "it prints one run's summary.json; read DIR/repeats.json",
        );
    }
    if a.dashboard.is_some() || a.metrics_listen.is_some() {
        return with(
            if a.dashboard.is_some() {
                "--dashboard"
            } else {
                "--metrics-listen"
            },
            "the live server shows one run",
        );
    }
    None
}

fn cmd_run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(why) = repeat_refusal(a) {
        return Err(UsageError(why).into());
    }
    // The flags become a spec (files read into it) and the spec a plan, as every agent and the
    // lab build theirs.
    let run_spec = a.spec()?;
    let headroom_run::Built {
        mut plan,
        thresholds,
    } = headroom_run::build(&run_spec)?;
    let ports = a.dist.ports(false)?;
    let agents = match a.dist.resolve()? {
        Some((spec, token)) => {
            // Threads are per agent; one each unless -t says otherwise.
            if a.threads.is_none() {
                plan.threads = 1;
            }
            Some((spec, token))
        }
        None => {
            headroom_run::preflight::check_fd_budget(&plan)?;
            None
        }
    };
    if a.linger > Duration::ZERO && a.dashboard.is_none() && a.metrics_listen.is_none() {
        return Err(UsageError("--linger needs --dashboard or --metrics-listen".into()).into());
    }
    // Bound before the preflight and the load: a bad address fails at once, nothing else done.
    let mut live = start_live(a.dashboard, a.metrics_listen, &plan.target_name)?;
    if !a.no_preflight {
        headroom_run::preflight::preflight(&plan)?;
        headroom_run::preflight::protocol_probe(&plan)?;
    }
    // One Ctrl-C handler for the whole command: a second would not be installed.
    let stop = stop_flag();
    let Some(n) = a.repeat else {
        let outputs = Outputs {
            out: a.out.clone(),
            quiet: a.quiet,
            json: a.json,
            report: !a.no_report,
            live,
            linger: a.linger,
            server_pid: a.server_pid,
        };
        let (summary, broken, incomplete, nothing_succeeded) = match agents {
            None => run_plan(
                &plan,
                &thresholds,
                outputs,
                &mut pipeline::LocalEngine::now(),
                stop,
            )?,
            Some((spec, token)) => {
                let job = headroom_run::agent::job_for(&run_spec, &plan, !a.no_preflight);
                let started = dist::start_agents(&spec, &token, ports)?;
                if !a.quiet {
                    for ag in &started.addrs {
                        eprintln!("headroom: agent {} at {}", ag.name, ag.endpoint);
                    }
                }
                let mut driver = pipeline::OnAgents {
                    addrs: &started.addrs,
                    token: &token,
                    job: &job,
                    opts: a.dist.controller_opts(plan.interval),
                    start: None,
                };
                run_plan(&plan, &thresholds, outputs, &mut driver, stop)?
            }
        };
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&summary.to_json())?);
        }
        return Ok(ExitCode::from(exit_code(
            a,
            &summary,
            broken,
            incomplete,
            nothing_succeeded,
        )));
    };

    // --repeat N: the same plan N times, each into its own run directory, then the spread.
    let dir = a.out.clone().expect("repeat_refusal: --repeat has --out");
    let mut summaries: Vec<(String, headroom_run::RunSummary)> = Vec::new();
    let mut code = 0u8;
    // repeats.json lists the repeats that finished, rewritten after each: the report of a set
    // killed half way (or of DIR used before by a longer set) takes those and no other.
    let write_repeats = |summaries: &[(String, headroom_run::RunSummary)]| {
        let runs: Vec<(String, &headroom_run::RunSummary)> =
            summaries.iter().map(|(d, s)| (d.clone(), s)).collect();
        let repeats = headroom_run::repeats::Repeats::build(n, &runs);
        let path = dir.join("repeats.json");
        let written = std::fs::create_dir_all(&dir).and_then(|()| {
            let json = serde_json::to_string_pretty(&repeats).map_err(std::io::Error::other)?;
            std::fs::write(&path, json + "\n")
        });
        if let Err(e) = &written {
            eprintln!("headroom: warning: cannot write {}: {e}", path.display());
        }
        (repeats, written.is_ok())
    };
    write_repeats(&summaries);
    for k in 1..=n {
        if !a.quiet {
            eprintln!(
                "headroom: repeat {k} of {n} into {}",
                dir.join(k.to_string()).display()
            );
        }
        let outputs = Outputs {
            out: Some(dir.join(k.to_string())),
            quiet: a.quiet,
            json: false,
            report: !a.no_report,
            live: live.take(),
            linger: a.linger,
            server_pid: a.server_pid,
        };
        let (summary, broken, incomplete, nothing_succeeded) = run_plan(
            &plan,
            &thresholds,
            outputs,
            &mut pipeline::LocalEngine::now(),
            stop.clone(),
        )?;
        // A failed repeat fails the set (1); an incomplete directory is next (3).
        code = match (
            code,
            exit_code(a, &summary, broken, incomplete, nothing_succeeded),
        ) {
            (EXIT_FAILED, _) | (_, EXIT_FAILED) => EXIT_FAILED,
            (0, c) => c,
            (c, _) => c,
        };
        let interrupted = summary.interrupted;
        summaries.push((k.to_string(), summary));
        let last = k == n || interrupted || stop.load(Ordering::SeqCst);
        if !last {
            write_repeats(&summaries);
            continue;
        }
        if k < n {
            eprintln!("headroom: interrupted: {k} of {n} repeats ran");
        }
        break;
    }
    let (repeats, written) = write_repeats(&summaries);
    if !written && code == 0 {
        code = EXIT_INCOMPLETE;
    }
    out!("{}", repeats.human());
    if !a.no_report {
        let page = dir.join("report.html");
        match headroom_report::render_repeats(&dir)
            .map_err(|e| e.to_string())
            .and_then(|html| std::fs::write(&page, html).map_err(|e| e.to_string()))
        {
            Ok(()) => outln!("  Report       {}", page.display()),
            Err(e) => eprintln!("headroom: warning: cannot write {}: {e}", page.display()),
        }
    }
    Ok(ExitCode::from(code))
}

/// The exit code of one run: 1 when the error rate passed --max-error-rate, an agent was lost,
/// a threshold broke or nothing succeeded (each said on stderr), 3 when the run directory is
/// incomplete, else 0.
fn exit_code(
    a: &RunArgs,
    summary: &headroom_run::RunSummary,
    broken: usize,
    incomplete: bool,
    nothing_succeeded: Option<String>,
) -> u8 {
    if let Some(max) = a.max_error_rate {
        let rate = summary.error_rate;
        if rate > max {
            eprintln!(
                "headroom: error rate {:.2}% exceeds --max-error-rate {:.2}%",
                rate * 100.0,
                max * 100.0
            );
            return EXIT_FAILED;
        }
    }
    if summary.agents.as_ref().is_some_and(|g| g.stopped_by_loss) {
        eprintln!("headroom: the run stopped because an agent was lost (--on-agent-loss stop)");
        return EXIT_FAILED;
    }
    if broken > 0 {
        eprintln!("headroom: {broken} threshold(s) broken (listed in the summary)");
        return EXIT_FAILED;
    }
    // A run in which nothing succeeded tested nothing: exit 1, whatever else held.
    if let Some(line) = nothing_succeeded {
        eprintln!("headroom: {line}");
        return EXIT_FAILED;
    }
    if incomplete {
        return EXIT_INCOMPLETE;
    }
    0
}

/// Where a run's figures go besides the engine.
struct Outputs {
    /// The run directory (`--out`).
    out: Option<PathBuf>,
    /// No progress line.
    quiet: bool,
    /// summary.json on stdout instead of the human summary.
    json: bool,
    /// report.html at the end of the run directory.
    report: bool,
    /// The dashboard and metrics server, already listening.
    live: Option<live::LiveServer>,
    /// How long `live` keeps serving after the run.
    linger: Duration,
    /// The server's process to sample each interval (`--server-pid`).
    server_pid: Option<u32>,
}

/// The live server when either address is given. An address that is not this machine's is a
/// usage error (exit 2).
fn start_live(
    dashboard: Option<std::net::SocketAddr>,
    metrics: Option<std::net::SocketAddr>,
    title: &str,
) -> anyhow::Result<Option<live::LiveServer>> {
    if dashboard.is_none() && metrics.is_none() {
        return Ok(None);
    }
    match live::LiveServer::start(dashboard, metrics, title) {
        Ok(server) => Ok(Some(server)),
        Err(live::StartError::NotLocal(msg)) => Err(UsageError(msg).into()),
        Err(e) => Err(e.into()),
    }
}

/// Runs a plan through the run library's pipeline with the sinks `outputs` asks for (progress,
/// run directory, live server, server sampler); prints the human summary unless `json`; returns
/// the summary, how many thresholds broke, and whether the run directory is incomplete (a write
/// failed: warned as it happened, and summed up here after the summary).
fn run_plan(
    plan: &Plan,
    thresholds: &[headroom_scenario::model::Threshold],
    outputs: Outputs,
    driver: &mut dyn pipeline::Driver,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(headroom_run::RunSummary, usize, bool, Option<String>)> {
    let Outputs {
        out,
        quiet,
        json,
        report,
        live,
        linger,
        server_pid,
    } = outputs;
    let mut sampler = server_pid
        .map(|pid| pipeline::ServerSampler::start(pid, plan.target))
        .transpose()?;
    let command = command_line();
    let interrupt = stop.clone();
    let mut dir = match &out {
        Some(p) => Some(pipeline::DirSink::create(p, &command, report)?),
        None => None,
    };
    let mut progress = (!quiet)
        .then(|| pipeline::ProgressSink(headroom_run::human::Progress::new(plan.stop.duration)));
    let mut live_sink = live.as_ref().map(pipeline::LiveSink);
    let mut sinks: Vec<&mut dyn pipeline::Sink> = Vec::new();
    if let Some(p) = progress.as_mut() {
        sinks.push(p);
    }
    if let Some(d) = dir.as_mut() {
        sinks.push(d);
    }
    if let Some(l) = live_sink.as_mut() {
        sinks.push(l);
    }
    let done = pipeline::execute(
        plan,
        thresholds,
        driver,
        sampler.as_mut(),
        &mut sinks,
        stop,
        &command,
    )?;
    drop(sinks);
    if let Some(w) = dir.as_ref().and_then(|d| d.warning.as_ref()) {
        eprintln!("headroom: warning: {w}");
    }
    if !json {
        out!("{}", human::human_summary(plan, &done.outcome, &done.usage));
        out!("{}", human::verdict_human(&done.summary));
        out!(
            "{}",
            human::scenario_human(plan, &done.outcome.total, &done.checked)
        );
        if let Some(d) = &dir {
            outln!("  Run dir      {}", d.path().display());
            if let Some(p) = &d.report_path {
                outln!("  Report       {}", p.display());
            }
        }
    }
    if let Some(l) = live {
        let _ = std::io::stdout().flush();
        l.finish(linger, &interrupt);
    }
    let incomplete = !done.write_errors.is_empty();
    if incomplete {
        eprintln!(
            "headroom: the run directory {} is incomplete: {} write(s) failed (warned above); \
             the summary above is the whole run's",
            dir.as_ref()
                .map_or_else(String::new, |d| d.path().display().to_string()),
            done.write_errors.len()
        );
    }
    Ok((
        done.summary,
        done.broken,
        incomplete,
        done.nothing_succeeded,
    ))
}

fn cmd_demo(a: &DemoArgs) -> anyhow::Result<ExitCode> {
    if a.connections == 0 {
        return Err(UsageError("bad -c/--connections 0: at least 1 is needed".into()).into());
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    // Half the cores serve, half load (at least one each), so neither starves the other.
    let server_workers = (cores / 2).max(1);
    let server = headroom_serve::start(headroom_serve::ServerConfig {
        workers: server_workers,
        ..Default::default()
    })?;
    let addr = server.local_addr();
    let url = format!("http://{addr}/");
    eprintln!(
        "headroom demo: serving {url} with the embedded reactor server ({server_workers} worker(s)); \
         loading it with {} users for {:.0}s",
        a.connections,
        a.duration.as_secs_f64()
    );
    // The demo's run is a spec like any other, built by the same builder.
    let mut spec = RunSpec::new(Target::Url(url));
    spec.connections = Some(a.connections);
    spec.duration = Some(a.duration);
    spec.threads = Some((cores - server_workers).max(1).min(a.connections as usize));
    let plan = match headroom_run::build(&spec) {
        Ok(b) => b.plan,
        Err(e) => {
            server.stop();
            return Err(e.into());
        }
    };
    let out = a.out.clone().unwrap_or_else(|| {
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace(':', "");
        PathBuf::from("headroom-runs").join(format!("demo-{stamp}"))
    });
    let live = match start_live(a.dashboard, None, &plan.target_name) {
        Ok(l) => l,
        Err(e) => {
            server.stop();
            return Err(e);
        }
    };
    let result = run_plan(
        &plan,
        &[],
        Outputs {
            out: Some(out),
            quiet: false,
            json: false,
            report: !a.no_report,
            live,
            linger: Duration::ZERO,
            server_pid: None,
        },
        &mut pipeline::LocalEngine::now(),
        stop_flag(),
    );
    let stats = server.stats();
    server.stop();
    let (_, _, incomplete, nothing_succeeded) = result?;
    outln!(
        "  Server       {} requests answered, {} connections accepted",
        human::thousands(stats.requests),
        human::thousands(stats.accepted)
    );
    if let Some(line) = nothing_succeeded {
        eprintln!("headroom: {line}");
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    if incomplete {
        return Ok(ExitCode::from(EXIT_INCOMPLETE));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_token_is_redacted_from_the_command_line() {
        let args = [
            "headroom",
            "run",
            "--token",
            "s3cret",
            "--token=s3cret2",
            "-c",
            "2",
        ];
        let got = super::redact_token(args.iter().map(|s| s.to_string())).join(" ");
        assert_eq!(got, "headroom run --token *** --token=*** -c 2");
    }
}
