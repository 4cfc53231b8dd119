//! The comparison of several run directories: every chart with the runs overlaid on the same
//! axes, and a table of figures with ratios against the first run.

use std::path::PathBuf;

use crate::ReportError;

/// Reads the run directories and renders their comparison; the first is the baseline.
pub fn render_compare(dirs: &[PathBuf]) -> Result<String, ReportError> {
    Err(ReportError::NotARun {
        dir: dirs[0].clone(),
    })
}
