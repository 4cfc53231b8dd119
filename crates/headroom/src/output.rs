//! What a run writes lives in headroom-run (issue 17): summary.json as the typed
//! `headroom_run::RunSummary`, the run directory, interval lines, the progress line and the human
//! summary. These names stay for this crate's callers until they call headroom-run directly.

pub use headroom_run::human::{human_summary, thousands, Progress};
pub use headroom_run::interval::interval_json;
pub use headroom_run::rundir::{finish_run_dir, RunDir};
pub use headroom_run::summary::{self_usage, summary_json};
