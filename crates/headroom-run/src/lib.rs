//! One run, from its spec to its summary: the library that `headroom run`, `headroom demo`,
//! `headroom lab` and the agents all go through.
//!
//! - a spec (URL flags or a compiled scenario) becomes a [`headroom_core::Plan`] by one builder;
//! - a driver runs the plan: this process's engine, or a controller over agents;
//! - sinks see every merged interval, then the finish: the progress line, the run directory,
//!   the server sampler, the live dashboard and the Prometheus endpoint;
//! - the result is a typed `RunSummary`, which *is* summary.json; it and `IntervalLine` (a line
//!   of intervals.jsonl) are headroom-format's types, re-exported here, which the report and
//!   the live page read.
//!
//! Modules: [`spec`] (the one builder from a `RunSpec` to a plan), [`files`] (reading the
//! user's scenario and its files into a spec: the CLI's and the lab's side, never an agent's),
//! [`agent`] (what an agent does with a job), [`preflight`] (checks before the load),
//! [`summary`] (building the typed summary.json, [`summary::RunSummary`]), [`thresholds`] (a
//! scenario's thresholds checked), [`interval`] (building a line of intervals.jsonl),
//! [`rundir`] (the run directory), [`human`] (the progress line and the human summary),
//! [`repeats`] (the spread of `run --repeat N`), [`usage`] (the [`UsageError`] that the
//! builder and the file reader report) and [`verdict`] (the generator's self-check and why the
//! server stopped scaling).

pub mod agent;
pub mod files;
pub mod human;
pub mod interval;
pub mod pipeline;
pub mod preflight;
pub mod repeats;
pub mod rundir;
pub mod spec;
pub mod summary;
pub mod thresholds;
pub mod usage;
pub mod verdict;

pub use spec::{build, Built};
pub use summary::RunSummary;
pub use usage::UsageError;
