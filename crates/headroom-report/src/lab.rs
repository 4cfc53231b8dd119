//! The report of a lab's output directory (written by `headroom lab`, see docs/lab.md).

use std::path::Path;

use crate::ReportError;

/// Whether `dir` looks like a lab's output directory (it holds `lab.sqlite` or `tables.csv`
/// and no `intervals.jsonl`).
pub fn is_lab_dir(dir: &Path) -> bool {
    (dir.join("lab.sqlite").exists() || dir.join("tables.csv").exists())
        && !dir.join("intervals.jsonl").exists()
}

/// Reads the lab directory `dir` and renders its report.
pub fn render_lab(dir: &Path) -> Result<String, ReportError> {
    Err(ReportError::NotARun {
        dir: dir.to_path_buf(),
    })
}
