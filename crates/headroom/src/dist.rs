//! Distributed runs, the command-line side: the `headroom agent` command and the `--agents`
//! flags of `run` and `lab`.
//!
//! The transport, the exact merge and the launchers (`headroom_dist::launch`: local child
//! processes, ssh) live in `headroom-dist`; what an agent does with a job (build the plan from
//! the job's typed spec with the one builder, take its segment, start at the controller's
//! instant) lives in `headroom_run::agent`. An agent parses no command line and opens no path a
//! controller names: the spec carries the scenario and every file as bytes. See
//! docs/distributed.md.

use std::io::{BufRead, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use headroom_dist::launch::{self, parse_agents, random_token, LISTENING};
pub use headroom_dist::launch::{AgentsSpec, PortRange, Started};

use crate::parse::UsageError;

/// Where `headroom agent` listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";

pub const AGENT_LONG: &str = "\
Run as an agent: wait for a controller (`headroom run ... --agents ...`) to send a run, run its
share of it, and stream every interval's measurements back (gRPC). One run at a time.

An agent sends traffic where it is told, so it refuses every controller without its token
(--token, --token-file, or the environment variable HEADROOM_TOKEN; there is no default) and
listens on 127.0.0.1 unless --listen opens it wider.

Beyond loopback it speaks TLS, so the token never crosses the network in clear: with a
certificate it is given (--tls-cert, --tls-key) or a new self-signed one (--tls-self-signed);
the controller pins the certificate's SHA-256 fingerprint as ssh pins a host key. Only
--insecure-plaintext makes it listen beyond loopback without TLS. --allow-targets limits the
networks it will load.

On start it prints `headroom agent listening on ADDR` on stdout (with --listen HOST:0 the port
is the one the system chose), followed over TLS by ` sha256:FINGERPRINT`: the rest of that line
is the agent's line for the controller's `--agents file:` list. Ctrl-C ends it; a run in
progress is stopped first.

Examples:
  HEADROOM_TOKEN=s3cret headroom agent
  headroom agent --listen 0.0.0.0:7070 --token-file /etc/headroom/token \\
      --tls-cert /etc/headroom/agent.crt --tls-key /etc/headroom/agent.key \\
      --allow-targets 10.20.0.0/16
  (then, on the controller, with agents.txt holding `HOST:7070 sha256:...` lines)
  HEADROOM_TOKEN=s3cret headroom run scenario.yaml --agents file:agents.txt";

#[derive(Args, Debug, Clone)]
// The text is given on the subcommand (args.rs): a variant's doc comment would replace it here.
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
    /// Serve TLS with this certificate (PEM; the first one is the agent's, any others its
    /// chain). Its SHA-256 fingerprint is printed at start for the controller to pin.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        help_heading = "Security"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_cert",
        help_heading = "Security"
    )]
    pub tls_key: Option<PathBuf>,
    /// Serve TLS with a self-signed certificate made at start (a new fingerprint each start:
    /// for agents a launcher starts, which reads and pins it; long-lived agents are better
    /// given --tls-cert so their pin stays).
    #[arg(long, conflicts_with = "tls_cert", help_heading = "Security")]
    pub tls_self_signed: bool,
    /// Listen beyond loopback without TLS: the token and every job then cross the network in
    /// clear (a network you trust entirely, e.g. a cluster's pod network under a policy).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_self_signed"], help_heading = "Security")]
    pub insecure_plaintext: bool,
    /// Load only targets in these networks (CIDR,...: 10.0.0.0/8,192.0.2.7,fd00::/8): a job
    /// whose target resolves outside them is refused before any connection, and the controller
    /// is told why. Default: any target.
    #[arg(long, value_name = "CIDR,...", value_parser = parse_allow, help_heading = "Security")]
    pub allow_targets: Option<AllowTargets>,
}

/// `--allow-targets`: the networks, parsed.
#[derive(Debug, Clone)]
pub struct AllowTargets(pub Vec<headroom_dist::allow::Cidr>);

fn parse_allow(s: &str) -> Result<AllowTargets, String> {
    headroom_dist::allow::parse_networks(s).map(AllowTargets)
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
    let min = headroom_dist::agent::MIN_TOKEN_BYTES;
    if !a.listen.ip().is_loopback() && token.len() < min {
        return Err(UsageError(format!(
            "the agent listens on {} (beyond loopback), so its token needs at least {min} bytes \
             (it has {}); e.g. `openssl rand -hex 16`",
            a.listen,
            token.len()
        ))
        .into());
    }
    if token == headroom_dist::k8s::TOKEN_PLACEHOLDER {
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
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => {
            Some(headroom_dist::AgentIdentity::from_files(c, k).map_err(UsageError)?)
        }
        _ if a.tls_self_signed => {
            Some(headroom_dist::AgentIdentity::self_signed().map_err(|e| anyhow::anyhow!(e))?)
        }
        _ => None,
    };
    if tls.is_none() && !a.insecure_plaintext && !a.listen.ip().is_loopback() {
        return Err(UsageError(format!(
            "the agent listens on {} (beyond loopback), so it needs TLS: --tls-cert FILE \
             --tls-key FILE, or --tls-self-signed (the controller pins the fingerprint it \
             prints), or --insecure-plaintext to send the token in clear",
            a.listen
        ))
        .into());
    }
    let fingerprint = tls.as_ref().map(|t| format!(" {}", t.fingerprint));
    let serving = headroom_dist::Serving {
        tls,
        insecure_plaintext: a.insecure_plaintext,
    };
    // SIGINT/SIGTERM end the agent (a run in progress is stopped first).
    headroom_dist::serve_agent(
        a.listen,
        token,
        agent_runner(a.allow_targets.clone().map(|a| a.0)),
        serving,
        |addr| {
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "{LISTENING}{addr}{}", fingerprint.unwrap_or_default());
            let _ = o.flush();
        },
    )?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The agent's runner: `headroom_run::agent`'s, with the `--allow-targets` check between
/// building the plan (which resolves the target) and the first connection (the preflight, if
/// the controller asked for one, or the load).
fn agent_runner(allow: Option<Vec<headroom_dist::allow::Cidr>>) -> headroom_dist::Runner {
    let Some(allow) = allow else {
        return headroom_run::agent::runner();
    };
    std::sync::Arc::new(move |job, stop, ready, sink| {
        let preflight = job.preflight;
        let plan = headroom_run::agent::plan_from_job(&headroom_dist::Job {
            preflight: false,
            ..job
        })
        .map_err(|e| format!("{e:#}"))?;
        // Redirects stay on the target's origin (the engine refuses others), so the target
        // is the one address this job connects to.
        headroom_dist::allow::check_target(&allow, plan.target.ip(), &plan.target_name)?;
        if preflight {
            headroom_run::preflight::preflight(&plan).map_err(|e| format!("{e:#}"))?;
        }
        ready(plan.threads as u32);
        headroom_engine::run(&plan, stop, sink).map_err(|e| format!("{e:#}"))
    })
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

// ---- the controller (its launchers are headroom_dist::launch) -------------------------------

/// The distributed-run flags of `headroom run` and `headroom lab`.
#[derive(Args, Debug, Clone)]
pub struct AgentsArgs {
    /// Run the load on agents and merge their measurements exactly: local:N (N child processes
    /// here, past one process's 20,000 descriptors), ssh://user@host,... (started over SSH) or
    /// file:agents.txt (running agents, `HOST:PORT [sha256:FINGERPRINT]` per line). Threads (run's -t, the lab's
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
    #[arg(long, value_parser = crate::parse::parse_duration, value_name = "DURATION", help_heading = "Distributed")]
    pub agent_timeout: Option<Duration>,
    /// The SHA-256 fingerprint (sha256:HEX, as an agent prints it) of the certificate of every
    /// file: agent whose line gives none: agents that share one certificate. ssh:// agents
    /// are pinned from what they print at start.
    #[arg(long, value_name = "sha256:HEX", value_parser = parse_fingerprint, help_heading = "Distributed")]
    pub agent_fingerprint: Option<headroom_dist::Fingerprint>,
    /// Talk to agents beyond loopback that have no pinned fingerprint in plain HTTP/2 (the
    /// token then crosses the network in clear). Without it such an agent fails the run
    /// before the token is sent.
    #[arg(long, help_heading = "Distributed")]
    pub insecure_plaintext: bool,
    /// The ports local:N agents listen on (and, for `lab`, the server's {port}), LO-HI, for
    /// machines where only some ports are open (default: HEADROOM_PORTS, else any free port).
    #[arg(long, value_name = "LO-HI", value_parser = parse_ports, help_heading = "Distributed")]
    pub ports: Option<PortRange>,
}

/// The environment variable read when `--ports` is not given.
pub const PORTS_ENV: &str = "HEADROOM_PORTS";

fn parse_ports(s: &str) -> Result<PortRange, String> {
    s.parse()
}

fn parse_fingerprint(s: &str) -> Result<headroom_dist::Fingerprint, String> {
    s.parse()
}

impl AgentsArgs {
    /// The agents and their token, `None` without `--agents`. ssh:// and file: agents need the
    /// token given; local ones get a random one.
    pub fn resolve(&self) -> anyhow::Result<Option<(AgentsSpec, String)>> {
        let Some(spec) = &self.agents else {
            return Ok(None);
        };
        let spec = parse_agents(spec).map_err(UsageError)?;
        if self.agent_fingerprint.is_some() && !matches!(spec, AgentsSpec::File(_)) {
            return Err(UsageError(
                "--agent-fingerprint pins file: agents (ssh:// agents are pinned from what they \
                 print, local: ones listen on loopback)"
                    .into(),
            )
            .into());
        }
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

    /// `--ports`, else `HEADROOM_PORTS` (set but empty: unset); a bad value of either is a
    /// usage error. `run` (`lab: false`) refuses `--ports` without `--agents local:N`, the only
    /// thing it would apply to there (the environment variable is ambient: never refused).
    pub fn ports(&self, lab: bool) -> anyhow::Result<Option<PortRange>> {
        if let Some(r) = self.ports {
            let local = self
                .agents
                .as_deref()
                .is_some_and(|a| a.starts_with("local:"));
            if !lab && !local {
                return Err(UsageError(
                    "--ports sets the ports local agents listen on: it needs --agents local:N \
                     (in `headroom lab` it sets the server's {port} too)"
                        .into(),
                )
                .into());
            }
            return Ok(Some(r));
        }
        match std::env::var(PORTS_ENV) {
            Ok(v) if !v.trim().is_empty() => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|e| UsageError(format!("{PORTS_ENV}: {e}")).into()),
            _ => Ok(None),
        }
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
            fingerprint: self.agent_fingerprint,
            insecure_plaintext: self.insecure_plaintext,
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

/// Start (local, ssh) or list (file) the agents with [`headroom_dist::launch`]: local agents
/// are child processes of this very binary (`headroom agent`, so of the controller's version);
/// a bad `file:` list is a usage error (exit 2). Local agents listen on a port of `ports` when
/// given ([`AgentsArgs::ports`]).
pub fn start_agents(
    spec: &AgentsSpec,
    token: &str,
    ports: Option<PortRange>,
) -> anyhow::Result<Started> {
    let exe = std::env::current_exe()?;
    launch::start_agents(spec, token, &exe, ports).map_err(|e| match e {
        launch::LaunchError::Usage(m) => UsageError(m).into(),
        e => e.into(),
    })
}
