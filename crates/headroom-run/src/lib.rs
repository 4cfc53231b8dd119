//! One run, from its spec to its summary: the library that `headroom run`, `headroom demo`,
//! `headroom lab` and the agents all go through.
//!
//! - a spec (URL flags or a compiled scenario) becomes a [`headroom_core::Plan`] by one builder;
//! - a driver runs the plan: this process's engine, or a controller over agents;
//! - sinks see every merged interval, then the finish: the progress line, the run directory,
//!   the server sampler, the live dashboard and the Prometheus endpoint;
//! - the result is a typed `RunSummary`, which *is* summary.json.

pub mod agent;
pub mod files;
pub mod preflight;
pub mod spec;
pub use spec::{build, Built, UsageError};
