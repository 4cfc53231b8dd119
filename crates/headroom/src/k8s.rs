//! `headroom k8s manifest SCENARIO --agents N`: the Kubernetes objects of a distributed run, as
//! multi-document YAML on stdout, for `kubectl apply -f -`.
//!
//! The command line only: the flags, and [`cmd_k8s`], which reads the scenario, maps the flags to
//! a [`ManifestOpts`] and prints what [`headroom_dist::k8s::manifest`] makes of it (the objects,
//! the naming rules and their tests live there, in `crates/headroom-dist/src/k8s.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use headroom_dist::k8s::{file_name, manifest, ManifestOpts, DEFAULT_AGENT_PORT, DEFAULT_IMAGE};

use crate::parse::UsageError;

const MANIFEST_LONG: &str = "\
Print the Kubernetes objects of a distributed run as YAML, to apply with kubectl:

  Secret     NAME-token       the token agents and controller share (a placeholder: replace it)
  ConfigMap  NAME-config      the scenario file, byte for byte, and agents.txt (N endpoints)
  Service    NAME-agents      headless: agent i is NAME-agents-i.NAME-agents.NAMESPACE.svc...
  NetworkPolicy NAME-agents   only the controller may reach the agents' port
  Job        NAME-agents      Indexed, N completions: `headroom agent --listen 0.0.0.0:PORT`
  Service    NAME-controller  the controller's live dashboard (8089) and /metrics (9464)
  Job        NAME-controller  `headroom run SCENARIO --agents file:/etc/headroom/agents.txt`

The image (--image, default headroom:latest) is yours to build and push where the cluster pulls
from; `kind load docker-image` or `minikube image load` for a local cluster. The scenario's
servers are what the agents load, from inside the cluster: point it at a Service there
(--target HOST:PORT), not at 127.0.0.1. Arguments after `--` go to the controller's
`headroom run` (e.g. -- --on-agent-loss stop -d 5m). Only the scenario file goes into the
ConfigMap: a scenario that reads CSV or included files needs them added by hand.";

const MANIFEST_AFTER_HELP: &str = "\
Examples:
  headroom k8s manifest scenarios/mix.yaml --agents 4 --target web.shop.svc:8080 > run.yaml
  kubectl create secret generic mix-token --from-literal=token=\"$(openssl rand -hex 32)\"
  headroom k8s manifest scenarios/mix.yaml --agents 4 --no-secret | kubectl apply -f -
  kubectl logs -f job/mix-controller          # the run's progress and summary
  kubectl delete -f run.yaml                  # agents keep listening until deleted

Checked against Kubernetes 1.35, 1.36 and 1.37's own schemas (strictly: an unknown field is an
error, as in kubectl's strict validation; tests/k8s_schema.rs); not yet applied to a live cluster.

Exit codes: 0 written; 1 I/O error; 2 bad command line or unreadable scenario.";

#[derive(Args, Debug)]
pub struct K8sArgs {
    #[command(subcommand)]
    pub cmd: K8sCmd,
}

#[derive(Subcommand, Debug)]
pub enum K8sCmd {
    /// Print the Kubernetes objects (Indexed Job of agents, controller Job, Services, ConfigMap,
    /// Secret template) of a distributed run of SCENARIO, for `kubectl apply -f -`.
    #[command(long_about = MANIFEST_LONG, after_help = MANIFEST_AFTER_HELP)]
    Manifest(ManifestArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ManifestArgs {
    /// The scenario file the controller runs (its text is embedded in the ConfigMap).
    #[arg(value_name = "SCENARIO")]
    pub scenario: PathBuf,
    /// Number of agents (pods of the Indexed Job).
    #[arg(long, value_name = "N")]
    pub agents: u32,
    /// Namespace of every object.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Prefix of the objects' names (default: the scenario's file name, made a valid DNS label).
    #[arg(long)]
    pub name: Option<String>,
    /// Container image holding the headroom binary (build and push it yourself).
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Port the agents listen on.
    #[arg(long, default_value_t = DEFAULT_AGENT_PORT)]
    pub port: u16,
    /// CPU of each agent, request = limit (e.g. 2, 500m).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Memory of each agent, request = limit (e.g. 1Gi, 512Mi).
    #[arg(long)]
    pub memory: Option<String>,
    /// Server the agents load (HOST:PORT, passed as `headroom run --target`).
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,
    /// Leave the Secret out (create it with `kubectl create secret generic NAME-token ...`).
    #[arg(long)]
    pub no_secret: bool,
    /// Write the YAML here instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// More arguments of the controller's `headroom run`, after `--`.
    #[arg(last = true, value_name = "RUN-ARGS")]
    pub run_args: Vec<String>,
}

/// After `headroom k8s --help`.
pub const K8S_AFTER_HELP: &str = "\
Example:
  headroom k8s manifest scenarios/mix.yaml --agents 4 --target web.shop.svc:8080 | kubectl apply -f -

See `headroom k8s manifest --help` and docs/distributed.md.";

pub fn cmd_k8s(args: &K8sArgs) -> anyhow::Result<ExitCode> {
    match &args.cmd {
        K8sCmd::Manifest(a) => cmd_manifest(a),
    }
}

fn cmd_manifest(a: &ManifestArgs) -> anyhow::Result<ExitCode> {
    let path = &a.scenario;
    let bytes = std::fs::read(path).map_err(|e| {
        UsageError(format!(
            "cannot read scenario {}: {}",
            path.display(),
            e.to_string().to_lowercase()
        ))
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        UsageError(format!(
            "scenario {} is not UTF-8 text; a ConfigMap holds text",
            path.display()
        ))
    })?;
    let file = file_name(path);
    let opts = ManifestOpts {
        name: a.name.clone(),
        namespace: a.namespace.clone(),
        image: a.image.clone(),
        port: a.port,
        cpu: a.cpu.clone(),
        memory: a.memory.clone(),
        target: a.target.clone(),
        secret: !a.no_secret,
        run_args: a.run_args.clone(),
        ..ManifestOpts::new(&file, &text, a.agents)
    };
    let yaml = manifest(&opts).map_err(UsageError)?;
    if a.target.is_none() && (text.contains("127.0.0.1") || text.contains("localhost")) {
        eprintln!(
            "headroom: warning: {} names a loopback server; in a pod that is the agent itself \
             (--target HOST:PORT points the agents at a server in the cluster)",
            path.display()
        );
    }
    match &a.output {
        Some(out) => std::fs::write(out, yaml)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?,
        None => out!("{yaml}"),
    }
    Ok(ExitCode::SUCCESS)
}
