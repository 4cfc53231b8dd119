//! The lab: run a server in each configuration of a factor sweep, load it, sample it, store
//! every run, and print the studies' tables.
//!
//! - `server`: the server's lifecycle per configuration (command template, readiness, stop,
//!   failure reports with the tail of stderr).
//! - `store`: every run in SQLite; a lab started again skips the runs already stored.
//! - `table`: pivot tables (factor levels as rows and columns, mean ± 95% CI).

pub mod experiment;
pub mod runner;
pub mod server;
pub mod store;
pub mod table;
