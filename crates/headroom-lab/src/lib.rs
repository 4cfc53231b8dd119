//! The lab: run a server in each configuration of a factor sweep, load it, sample it, store
//! every run, and print the studies' tables.
//!
//! - `server`: the server's lifecycle per configuration (command template, readiness, stop,
//!   failure reports with the tail of stderr).
//! - `setup`: around a server's start: configuration files from templates, the `before_run`
//!   settle command, and the readiness probes that run a command or open an XMPP stream.
//! - `store`: every run in SQLite; a lab started again skips the runs already stored.
//! - `table`: pivot tables (factor levels as rows and columns, mean ± 95% CI).
//! - `runner`: the experiment's runs. Each configuration's load is a `RunSpec` built into its
//!   plan by the run library's one builder (`headroom_run::build`).
//! - `measure`: one load through the run pipeline (`headroom_run::pipeline::execute`, with this
//!   process's engine or agents as its driver), with three sinks: the run directory of `headroom
//!   run --out`'s format under `OUTPUT/runs/`, the server's sampler and the kept intervals.
//! - `intervals`: the intervals the lab stores (headroom-format's typed line, older stores' flat
//!   line read too), the connection capacity and intervals.csv's rows.

pub mod experiment;
pub mod intervals;
pub mod measure;
pub mod runner;
pub mod server;
pub mod setup;
pub mod store;
pub mod table;
