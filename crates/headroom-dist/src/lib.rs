//! Distributed runs: `headroom agent` processes each run a share (an *execution segment*) of a
//! load test and stream their interval snapshots over gRPC to a controller, which merges them
//! exactly (HdrHistogram adds, never averaged percentiles).
//!
//! - [`wire`]: the exact wire form of a [`headroom_metrics::Recorder`];
//! - [`agent`]: the agent's gRPC service and [`agent::serve_agent`]; the engine run itself is a
//!   [`agent::Runner`] given by the caller;
//! - [`tls`]: TLS between them, the agent's certificate pinned by its fingerprint; [`allow`]: the
//!   networks an agent may load (`--allow-targets`);
//! - [`controller`]: [`controller::run_controller`] starts a job on every agent and merges
//!   their streams into one sequence of intervals, like the engine's own collector;
//! - the launchers, which bring agents up for a controller: [`launch`] starts local child
//!   processes or agents over SSH (or lists running ones), [`k8s`] writes the Kubernetes
//!   manifest of a run whose agents a cluster starts.
//!
//! # How intervals align
//!
//! Every agent gets the same `start_at` instant and starts its load then; interval k of every
//! agent covers `[start_at + k·I, start_at + (k+1)·I)` on that agent's own clock, so the
//! controller merges interval k of all agents into the run's interval k. Across machines the
//! clocks are assumed NTP-synchronised (a skew of a few milliseconds shifts that much load
//! between neighbouring intervals); locally they are the same clock.
//!
//! # Hot path
//!
//! The engine's workers never touch gRPC: only the agent's collector sink encodes, once per
//! interval, and hands the message to the RPC runtime through a channel.

pub mod agent;
pub mod allow;
pub mod controller;
pub mod k8s;
pub mod launch;
pub mod messages;
pub mod tls;
pub mod wire;

pub use agent::{
    decode_spec, encode_spec, serve_agent, serve_agent_until, AgentService, Job, Runner, Serving,
};
pub use controller::{
    run_controller, AgentAddr, ControllerOpts, DistError, DistOutcome, LostAgent, OnLoss,
};
pub use tls::{AgentIdentity, Fingerprint};
