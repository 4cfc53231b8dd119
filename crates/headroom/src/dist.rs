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
pub use headroom_dist::launch::{AgentsSpec, Started};

use crate::parse::UsageError;

/// Where `headroom agent` listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";

pub const AGENT_LONG: &str = "\
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
    // SIGINT/SIGTERM end the agent (a run in progress is stopped first).
    headroom_dist::serve_agent(a.listen, token, headroom_run::agent::runner(), |addr| {
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

// ---- the controller (its launchers are headroom_dist::launch) -------------------------------

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
    #[arg(long, value_parser = crate::parse::parse_duration, value_name = "DURATION", help_heading = "Distributed")]
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

/// Start (local, ssh) or list (file) the agents with [`headroom_dist::launch`]: local agents
/// are child processes of this very binary (`headroom agent`, so of the controller's version);
/// a bad `file:` list is a usage error (exit 2).
pub fn start_agents(spec: &AgentsSpec, token: &str) -> anyhow::Result<Started> {
    let exe = std::env::current_exe()?;
    launch::start_agents(spec, token, &exe).map_err(|e| match e {
        launch::LaunchError::Usage(m) => UsageError(m).into(),
        e => e.into(),
    })
}
