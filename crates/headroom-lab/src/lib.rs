//! The lab: run a server in each configuration of a factor sweep, load it, sample it, store
//! every run, and print the studies' tables.
//!
//! - `server`: the server's lifecycle per configuration (command template, readiness, stop,
//!   failure reports with the tail of stderr).
//! - `store`: every run in SQLite; a lab started again skips the runs already stored.
//! - `table`: pivot tables (factor levels as rows and columns, mean ± 95% CI).
//! - `runner`: the experiment's runs. Each configuration's load is a `RunSpec` built into its
//!   plan by the run library's one builder (`headroom_run::build`), driven by its drivers (this
//!   process's engine, or agents), and written as a run directory of `headroom run --out`'s
//!   format under `OUTPUT/runs/` with the typed `RunSummary`.

pub mod experiment;
pub mod runner;
pub mod server;
pub mod store;
pub mod table;
