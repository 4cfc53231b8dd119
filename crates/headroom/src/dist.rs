//! Distributed runs, the command-line side: `headroom agent`, and the controller that
//! `headroom run --agents SPEC` becomes.
//!
//! The transport and the exact merge live in `headroom-dist`; this module decides *what* an agent
//! runs. The controller sends the run's typed spec (`headroom_core::spec::RunSpec`: the scenario
//! as parsed, includes inlined, written back with `to_yaml`, its CSV and TLS files and any
//! `--body @FILE` inside as bytes); each agent builds the same plan with the same builder as
//! `headroom run` (`headroom_run::build`), takes its execution segment of it (see
//! `headroom_core::Segment`) and starts at the controller's instant. An agent parses no command
//! line and opens no path a controller names. See docs/distributed.md.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use headroom_core::{Plan, Segment};
use headroom_dist::{AgentAddr, Job};

use headroom_core::spec::RunSpec;

use crate::args::UsageError;

/// Where `headroom agent` listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";
/// How long the controller waits for a started agent to say where it listens.
const AGENT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The line an agent prints on stdout once it listens (a parent reads the address from it).
const LISTENING: &str = "headroom agent listening on ";

const AGENT_LONG: &str = "\
Run as an agent: wait for a controller (`headroom run ... --agents ...`) to send a run, run its
share of it, and stream every interval's measurements back (gRPC). One run at a time.

An agent sends traffic where it is told, so it refuses every controller without its token
(--token, --token-file, or the environment variable HEADROOM_TOKEN; there is no default) and
listens on 127.0.0.1 unless --listen opens it wider.

On start it prints `headroom agent listening on ADDR` on stdout (with --listen HOST:0 the port
is the one the system chose). Ctrl-C ends it; a run in progress is stopped first.

Examples:
  HEADROOM_TOKEN=s3cret headroom agent
  headroom agent --listen 0.0.0.0:7070 --token-file /etc/headroom/token
  (then, on the controller) HEADROOM_TOKEN=s3cret headroom run scenario.yaml --agents file:agents.txt";

#[derive(Args, Debug, Clone)]
#[command(long_about = AGENT_LONG)]
pub struct AgentArgs {
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The shared token controllers must present (or HEADROOM_TOKEN).
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the token from this file's first line (`-`: standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// End when standard input reaches end of file (after the token, with --token-file -).
    /// For a parent that starts the agent: it keeps the agent's stdin open and closes it (or
    /// dies, or loses its SSH connection) to end it. The controller starts its agents so.
    #[arg(long)]
    pub stop_on_stdin_eof: bool,
}

/// `headroom agent`.
pub fn cmd_agent(a: &AgentArgs) -> anyhow::Result<std::process::ExitCode> {
    let token = match (&a.token, &a.token_file) {
        (_, Some(f)) => read_token(f)?,
        (Some(t), None) => t.trim().to_string(),
        (None, None) => {
            return Err(UsageError(
                "an agent needs a token: --token, --token-file or HEADROOM_TOKEN (it refuses \
                 every controller without it)"
                    .into(),
            )
            .into())
        }
    };
    if token.is_empty() {
        return Err(UsageError("the agent's token is empty".into()).into());
    }
    if token == crate::k8s::TOKEN_PLACEHOLDER {
        return Err(UsageError(
            "the agent's token is the placeholder of `headroom k8s manifest`'s Secret, which \
             anyone can read; put a long random token in the Secret"
                .into(),
        )
        .into());
    }
    if a.stop_on_stdin_eof {
        // An agent started over SSH without a terminal gets no signal when the connection
        // goes: sshd only closes its pipes. Its stdin reaching end of file is the one sign that
        // the controller (or the connection) is gone, so stop as Ctrl-C would: the signal
        // handler of serve_agent stops a run in progress first.
        std::thread::spawn(|| {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin().lock();
            while !matches!(stdin.read(&mut sink), Ok(0) | Err(_)) {}
            unsafe {
                libc::kill(libc::getpid(), libc::SIGTERM);
            }
        });
    }
    // SIGINT/SIGTERM end the agent (a run in progress is stopped first).
    headroom_dist::serve_agent(a.listen, token, runner(), |addr| {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{LISTENING}{addr}");
        let _ = o.flush();
    })?;
    Ok(std::process::ExitCode::SUCCESS)
}

fn read_token(f: &Path) -> anyhow::Result<String> {
    let mut text = String::new();
    if f == Path::new("-") {
        std::io::stdin().lock().read_line(&mut text)?;
    } else {
        std::fs::File::open(f)
            .and_then(|mut h| h.read_to_string(&mut text))
            .map_err(|e| UsageError(format!("--token-file {}: {e}", f.display())))?;
    }
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

/// What the agent does with a job: build the plan as `headroom run` would, take its segment,
/// check it can run here, say it is ready, wait for the start instant and run.
fn runner() -> headroom_dist::Runner {
    Arc::new(|job, stop, ready, sink| run_job(job, stop, ready, sink).map_err(|e| format!("{e:#}")))
}

fn run_job(
    job: Job,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(u32),
    sink: &mut dyn FnMut(&headroom_engine::Interval<'_>),
) -> anyhow::Result<headroom_engine::RunOutcome> {
    let plan = plan_from_job(&job)?;
    ready(plan.threads as u32);
    Ok(headroom_engine::run(&plan, stop, sink)?)
}

/// The plan an agent runs for `job`: built from the job's spec by the run library's one
/// builder (as `headroom run` builds its own), with its segment and start instant, checked (and
/// preflighted if the controller asks). Nothing is read from this machine's disk: the spec
/// carries the scenario and every file it needs as bytes.
pub(crate) fn plan_from_job(job: &Job) -> anyhow::Result<Plan> {
    let mut plan = headroom_run::build(&job.spec)?.plan;
    plan.segment = Segment {
        index: job.segment_index,
        count: job.segment_count,
    };
    plan.start_at = Some(job.start_at);
    plan.validate()?;
    crate::check_fd_budget_share(&plan)?;
    if job.preflight {
        crate::preflight(&plan)?;
    }
    Ok(plan)
}

// ---- the controller -------------------------------------------------------------------------

/// `--agents`: where the agents are.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentsSpec {
    /// N child processes of this binary on this machine.
    Local(usize),
    /// Started over SSH: `ssh://[user@]host[:port]`, comma-separated.
    Ssh(Vec<SshTarget>),
    /// Already running agents listed in a file: `host:port` per line, `#` comments.
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SshTarget {
    /// `user@host` or `host`, as given to ssh.
    pub dest: String,
    /// The host alone (where the agent is reached).
    pub host: String,
    pub port: Option<u16>,
}

pub fn parse_agents(s: &str) -> Result<AgentsSpec, String> {
    let fix = "use local:N, ssh://user@host[,ssh://...] or file:agents.txt";
    if let Some(n) = s.strip_prefix("local:") {
        let n: usize = n
            .parse()
            .map_err(|_| format!("bad --agents '{s}': N must be a number; {fix}"))?;
        if n == 0 || n > 256 {
            return Err(format!(
                "bad --agents '{s}': between 1 and 256 local agents"
            ));
        }
        return Ok(AgentsSpec::Local(n));
    }
    if let Some(f) = s.strip_prefix("file:") {
        if f.is_empty() {
            return Err(format!("bad --agents '{s}': no file name; {fix}"));
        }
        return Ok(AgentsSpec::File(PathBuf::from(f)));
    }
    if s.starts_with("ssh://") {
        let mut targets = Vec::new();
        for part in s.split(',') {
            let Some(rest) = part.strip_prefix("ssh://") else {
                return Err(format!(
                    "bad --agents '{s}': '{part}' is not ssh://...; {fix}"
                ));
            };
            let rest = rest.trim_end_matches('/');
            let (user, hostport) = match rest.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, rest),
            };
            let (host, port) = match hostport.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
                    h.trim_matches(|c| c == '[' || c == ']'),
                    Some(
                        p.parse::<u16>()
                            .map_err(|_| format!("bad --agents '{s}': bad ssh port in '{part}'"))?,
                    ),
                ),
                _ => (hostport, None),
            };
            if host.is_empty() || user.is_some_and(str::is_empty) {
                return Err(format!("bad --agents '{s}': '{part}' names no host; {fix}"));
            }
            targets.push(SshTarget {
                dest: match user {
                    Some(u) => format!("{u}@{host}"),
                    None => host.to_string(),
                },
                host: host.to_string(),
                port,
            });
        }
        return Ok(AgentsSpec::Ssh(targets));
    }
    Err(format!("bad --agents '{s}'; {fix}"))
}

/// The distributed-run flags of `headroom run` and `headroom lab`.
#[derive(Args, Debug, Clone)]
pub struct AgentsArgs {
    /// Run the load on agents and merge their measurements exactly: local:N (N child processes
    /// here, past one process's 20,000 descriptors), ssh://user@host,... (started over SSH) or
    /// file:agents.txt (running agents, HOST:PORT per line). Threads (run's -t, the lab's
    /// load.threads) are then per agent; run's default is 1.
    #[arg(long, value_name = "SPEC", help_heading = "Distributed")]
    pub agents: Option<String>,
    /// The agents' token (ssh:// and file: agents; local agents get a random one).
    #[arg(
        long,
        env = "HEADROOM_TOKEN",
        hide_env_values = true,
        help_heading = "Distributed"
    )]
    pub token: Option<String>,
    /// When an agent is lost mid-run: continue without it, or stop the run (a lab stores that
    /// run as failed). Either way its data up to then is kept and the loss is reported.
    #[arg(
        long,
        value_enum,
        default_value = "continue",
        help_heading = "Distributed"
    )]
    pub on_agent_loss: OnLossArg,
    /// An agent that sends nothing for this long is lost (default: 3 intervals + 5 s, at least
    /// 60 s; one whose process dies or whose connection breaks is lost at once).
    #[arg(long, value_parser = crate::args::parse_duration, value_name = "DURATION", help_heading = "Distributed")]
    pub agent_timeout: Option<Duration>,
}

impl AgentsArgs {
    /// The agents and their token, `None` without `--agents`. ssh:// and file: agents need the
    /// token given; local ones get a random one.
    pub fn resolve(&self) -> anyhow::Result<Option<(AgentsSpec, String)>> {
        let Some(spec) = &self.agents else {
            return Ok(None);
        };
        let spec = parse_agents(spec).map_err(UsageError)?;
        let token =
            match (&self.token, &spec) {
                (Some(t), _) if !t.trim().is_empty() => t.trim().to_string(),
                (_, AgentsSpec::Local(_)) => random_token()?,
                _ => return Err(UsageError(
                    "--agents ssh:// or file: needs the agents' token: --token or HEADROOM_TOKEN"
                        .into(),
                )
                .into()),
            };
        Ok(Some((spec, token)))
    }

    /// The controller's options for runs of `interval`.
    pub fn controller_opts(&self, interval: Duration) -> headroom_dist::ControllerOpts {
        headroom_dist::ControllerOpts {
            on_loss: match self.on_agent_loss {
                OnLossArg::Continue => headroom_dist::OnLoss::Continue,
                OnLossArg::Stop => headroom_dist::OnLoss::Stop,
            },
            interval,
            lost_after: self.agent_timeout,
            ..Default::default()
        }
    }
}

/// `--on-agent-loss`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLossArg {
    /// Report the lost agent, keep its data up to then, and go on with the others.
    Continue,
    /// Stop the whole run (what was measured until then is kept and reported).
    Stop,
}

/// Agents this controller started: stopped (and waited for) when dropped.
pub struct Started {
    pub addrs: Vec<AgentAddr>,
    children: Vec<Child>,
    /// Each child's stdin, kept open: closing it ends the agent (`--stop-on-stdin-eof`), and for
    /// an agent over SSH it is the only way (see `cmd_agent`).
    stdins: Vec<ChildStdin>,
}

impl Drop for Started {
    fn drop(&mut self) {
        // End of file on each agent's stdin, through ssh for remote ones: the agent stops.
        self.stdins.clear();
        for c in &mut self.children {
            // SIGTERM: the agent's Ctrl-C path stops its run and exits.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        let until = Instant::now() + Duration::from_secs(5);
        for c in &mut self.children {
            while Instant::now() < until {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Start (local, ssh) or list (file) the agents.
pub fn start_agents(spec: &AgentsSpec, token: &str) -> anyhow::Result<Started> {
    let mut started = Started {
        addrs: Vec::new(),
        children: Vec::new(),
        stdins: Vec::new(),
    };
    match spec {
        AgentsSpec::Local(n) => {
            let exe = std::env::current_exe()?;
            for i in 0..*n {
                let mut cmd = Process::new(&exe);
                cmd.args(["agent", "--listen", "127.0.0.1:0", "--token-file", "-"]);
                cmd.arg("--stop-on-stdin-eof");
                // A local agent must not outlive its controller, whatever kills the controller.
                unsafe {
                    use std::os::unix::process::CommandExt;
                    cmd.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                        Ok(())
                    });
                }
                let name = format!("local:{}", i + 1);
                let (child, stdin, addr) = spawn_agent(cmd, token, &name)?;
                started.children.push(child);
                started.stdins.push(stdin);
                started.addrs.push(AgentAddr {
                    name,
                    endpoint: format!("http://{addr}"),
                });
            }
        }
        AgentsSpec::Ssh(targets) => {
            let bin = std::env::var("HEADROOM_REMOTE_BIN").unwrap_or_else(|_| "headroom".into());
            for t in targets {
                let mut cmd = Process::new("ssh");
                cmd.args(["-o", "BatchMode=yes", "-T"]);
                // Extra ssh options (identity, config file, known hosts), split on whitespace.
                if let Ok(opts) = std::env::var("HEADROOM_SSH_OPTS") {
                    cmd.args(opts.split_whitespace());
                }
                if let Some(p) = t.port {
                    cmd.args(["-p", &p.to_string()]);
                }
                // The token goes through ssh's standard input, never onto a command line. The
                // agent ends when that input ends: when this controller closes it or dies, or
                // the connection drops (sshd sends no signal to a command without a terminal).
                cmd.arg(&t.dest).arg(format!(
                    "exec {bin} agent --listen 0.0.0.0:0 --token-file - --stop-on-stdin-eof"
                ));
                let name = match t.port {
                    Some(p) => format!("ssh://{}:{p}", t.dest),
                    None => format!("ssh://{}", t.dest),
                };
                let (child, stdin, addr) = spawn_agent(cmd, token, &name)?;
                started.children.push(child);
                started.stdins.push(stdin);
                let host = if t.host.contains(':') {
                    format!("[{}]", t.host)
                } else {
                    t.host.clone()
                };
                started.addrs.push(AgentAddr {
                    name,
                    endpoint: format!("http://{host}:{}", addr.port()),
                });
            }
        }
        AgentsSpec::File(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| UsageError(format!("--agents file:{}: {e}", f.display())))?;
            for (no, line) in text.lines().enumerate() {
                let line = line.split('#').next().unwrap_or("").trim();
                if line.is_empty() {
                    continue;
                }
                let hostport = line.trim_start_matches("http://");
                if !hostport.contains(':') {
                    return Err(UsageError(format!(
                        "--agents file:{} line {}: '{line}' is not HOST:PORT",
                        f.display(),
                        no + 1
                    ))
                    .into());
                }
                started.addrs.push(AgentAddr {
                    name: hostport.to_string(),
                    endpoint: format!("http://{hostport}"),
                });
            }
            if started.addrs.is_empty() {
                return Err(UsageError(format!(
                    "--agents file:{} lists no agent (one HOST:PORT per line)",
                    f.display()
                ))
                .into());
            }
        }
    }
    Ok(started)
}

/// Start one agent process, hand it the token on stdin and read where it listens. The stdin is
/// returned open: the agent runs until it is closed.
fn spawn_agent(
    mut cmd: Process,
    token: &str,
    name: &str,
) -> anyhow::Result<(Child, ChildStdin, SocketAddr)> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start agent {name}: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    // A process that already exited (ssh refused) closes the pipe: say so below, not here.
    let _ = writeln!(stdin, "{token}").and_then(|_| stdin.flush());
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(a) = line.trim().strip_prefix(LISTENING) {
                let _ = tx.send(a.parse::<SocketAddr>().ok());
                // Keep draining so the agent never blocks on a full pipe.
                let mut sink = Vec::new();
                let _ = r.read_to_end(&mut sink);
                return;
            }
            line.clear();
        }
        let _ = tx.send(None);
    });
    let why = match rx.recv_timeout(AGENT_START_TIMEOUT) {
        Ok(Some(addr)) => return Ok((child, stdin, addr)),
        Ok(None) => {
            // Its stdout ended: it is exiting (ssh could not log in, no such binary...). Give
            // it a moment to, so that its own exit status is the one reported.
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            "it ended before saying where it listens".to_string()
        }
        Err(_) => format!(
            "it did not say where it listens within {}s",
            AGENT_START_TIMEOUT.as_secs()
        ),
    };
    drop(stdin);
    let _ = child.kill();
    let status = child.wait().ok();
    let ssh_hint = if name.starts_with("ssh://") {
        "; its messages and ssh's are above (ssh exits with 255 when it cannot connect or log \
         in without a prompt: check the key, HEADROOM_SSH_OPTS and HEADROOM_REMOTE_BIN)"
    } else {
        ""
    };
    anyhow::bail!(
        "agent {name} did not start: {why}{}{ssh_hint}",
        status.map(|s| format!(" ({s})")).unwrap_or_default()
    )
}

/// A random token for agents this controller starts itself (hex of 16 bytes from the kernel).
pub fn random_token() -> anyhow::Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The job every agent is sent: this run's spec (its files inside as bytes), with the threads
/// this controller chose, since segments are split over agent x thread slots and every agent
/// must run the same number.
pub fn job_for(spec: &RunSpec, plan: &Plan, preflight: bool) -> Job {
    let mut spec = spec.clone();
    spec.threads = Some(plan.threads);
    Job {
        spec,
        preflight,
        segment_index: 0,
        segment_count: 1,
        start_at: SystemTime::now(),
    }
}
