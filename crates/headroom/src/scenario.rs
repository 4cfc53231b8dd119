//! `headroom run FILE.yaml|FILE.xml|FILE.har` after the run: its thresholds checked and its
//! per-name figures reported. (The scenario becomes a plan in `headroom_run::spec`.)

// The thresholds and the scenario's summary figures live in headroom-run (issue 17).
pub use headroom_run::human::scenario_human as human;
pub use headroom_run::thresholds::check;
