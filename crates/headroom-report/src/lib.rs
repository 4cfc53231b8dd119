//! HTML reports from stored runs.
//!
//! A run directory (written by `headroom run --out DIR`, see `docs/summary-json.md`) becomes one
//! self-contained HTML file: settings and headline tables from `summary.json`, line charts over
//! time from `intervals.jsonl`, and the per-name tables of scenario runs. The file needs nothing
//! else to be read: CSS is inline, charts are inline SVG drawn by [`svg`], there is no script
//! and no external URL, so it can be mailed, archived next to the run, or opened offline.
//!
//! This crate reads files and never touches the engine: a report can be made from a run done
//! on another machine or by another version (unknown fields are ignored, missing ones shown as
//! "–"). A run killed before `summary.json` was written still gives a report from its
//! intervals.
//!
//! ```no_run
//! let html = headroom_report::render_run(std::path::Path::new("headroom-runs/some-run"))?;
//! std::fs::write("headroom-runs/some-run/report.html", html)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The pieces are public for other reports (comparisons, lab reports): [`load_run`] gives the
//! plain [`RunData`], [`charts`] builds the charts from it, [`render`] the page.
//!
//! A set of repeats (`headroom run --repeat N`, see [`repeats`]) has its own page: the spread of
//! its runs. A comparison of runs ([`compare`]) puts a 95% interval on each run's throughput and
//! p99 ([`noise`]) and says "within noise" rather than naming a winner when they overlap.
//!
//! Beside the reports, [`live_server`] serves a run while it goes: the live dashboard (the
//! page of [`live`], fed interval by interval) and a Prometheus `/metrics` endpoint. It takes
//! the typed interval lines of headroom-format, the lines `intervals.jsonl` holds, so it too
//! never sees the engine.
//!
//! The files are read through headroom-format's types (`RunSummary`, `IntervalLine`), the ones
//! the run library writes them from: this crate depends on core and format (metrics in its
//! tests), never on the run library or the engine.

pub mod bars;
pub mod charts;
pub mod compare;
mod csv;
pub mod data;
pub mod export;
pub mod hlog;
mod html;
pub mod lab;
pub mod live;
pub mod live_server;
pub mod noise;
mod numbers;
pub mod repeats;
pub mod svg;

use std::path::{Path, PathBuf};

pub use compare::render_compare;
pub use data::{load_run, Figures, Interval, NameStats, RunData, Scenario, Summary, Threshold};
pub use lab::{is_lab_dir, load_lab, render_lab, LabData};
pub use repeats::{is_repeats_dir, render_repeats};
pub use svg::{escape, Chart, Series};

/// Why a run directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file (or the directory) could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file is not valid JSON (JSON lines) at `line` (1-based) and `column`.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A CSV file (a lab's intervals.csv, samples.csv...) is bad at `line` (1-based).
    #[error("{}:{line}: {message}", path.display())]
    Csv {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// A lab directory with neither tables.json nor tables.csv.
    #[error("{}: not a lab's output (no tables.json and no tables.csv)", dir.display())]
    NotALab { dir: PathBuf },
    /// Neither summary.json nor intervals.jsonl is in the directory.
    #[error("{}: not a run directory (no summary.json and no intervals.jsonl)", dir.display())]
    NotARun { dir: PathBuf },
}

/// The report of one run as a whole HTML document.
pub fn render(data: &RunData) -> String {
    html::page(data)
}

/// Reads the run directory `dir` and renders its report; the caller writes it (usually to
/// `DIR/report.html`).
pub fn render_run(dir: &Path) -> Result<String, ReportError> {
    Ok(render(&load_run(dir)?))
}
