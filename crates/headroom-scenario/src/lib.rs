//! The native headroom scenario format: a YAML file of `servers`, `load` (open arrival phases and
//! closed user populations), weighted `sessions` of steps, and CI `thresholds`. See
//! `docs/scenario.md` for the format and `schema/scenario.schema.json` for editors.
//!
//! Why a hand-written walker over a span-keeping node tree instead of `#[derive(Deserialize)]`:
//! the promise of this crate is that *every* error, syntactic or semantic, names
//! `file:line:column` and what was expected. Serde loses positions as soon as a value has been
//! deserialised, so checks like "weights must be 0 or more" or "`${user}` is not defined" could
//! not be located. Walking [`marked_yaml::Node`]s keeps a span at hand for every check, and lets
//! us report all errors of a file at once rather than the first.
//!
//! ```
//! let s = headroom_scenario::parse_str(
//!     "load: {phases: [{duration: 10s, arrival_rate: 5}]}\n\
//!      sessions: [{name: home, steps: [{request: GET /}]}]\n",
//!     "x.yaml",
//! ).unwrap();
//! assert_eq!(s.sessions[0].steps.len(), 1);
//! ```

pub mod bounded;
pub mod compile;
pub mod emit;
pub mod har;
pub mod httperf;
pub mod model;
mod parse;
pub mod tsung;

pub use bounded::{
    read_bounded, read_bounded_string, MAX_DATA_BYTES, MAX_SCENARIO_BYTES, MAX_SCENARIO_TEXT,
};
pub use compile::{compile, compile_with, files_below, Compiled, FileSource};

pub use emit::to_yaml;
pub use har::{import_har, load_har, HarOptions};
pub use httperf::{import_httperf, HttperfOptions};
pub use model::Scenario;
use std::path::Path;
pub use tsung::{import_tsung, Imported};

/// One located problem in a scenario file. Displays as `file:line:column: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ScenarioError {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
}

/// Reads, parses and validates the scenario at `path`; `include`s resolve relative to the
/// including file. Returns every error found, in file order.
pub fn load(path: impl AsRef<Path>) -> Result<Scenario, Vec<ScenarioError>> {
    let path = path.as_ref();
    let name = path.display().to_string();
    match read_bounded_string(path, MAX_SCENARIO_BYTES, "scenario file") {
        Ok(text) => parse::Parser::new().scenario(&text, &name),
        Err(e) => Err(vec![ScenarioError {
            file: name,
            line: 1,
            column: 1,
            message: e,
        }]),
    }
}

/// Parses and validates scenario `text`. `file_name` is used in errors and as the base for
/// `include`s (relative to its directory).
pub fn parse_str(text: &str, file_name: &str) -> Result<Scenario, Vec<ScenarioError>> {
    parse::Parser::new().scenario(text, file_name)
}
