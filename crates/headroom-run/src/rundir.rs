//! The run directory (`run --out`): intervals.jsonl and latency.hlog grow as the run goes,
//! summary.json is written at the end, then the derived intervals.csv and report.html. The
//! format is docs/report.md's; `headroom report` reads it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use headroom_engine::Interval;
use headroom_metrics::hlog::HlogWriter;
use headroom_metrics::Recorder;

use crate::summary::RunSummary;

/// Derived files of a finished run directory: intervals.csv always, report.html when `report`
/// (returns its path). Both are made from the files on disk, as `headroom report` would.
pub fn finish_run_dir(dir: &Path, report: bool) -> anyhow::Result<Option<PathBuf>> {
    let data = headroom_report::load_run(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let csv = dir.join("intervals.csv");
    std::fs::write(
        &csv,
        headroom_report::export::intervals_csv(&data.intervals),
    )
    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", csv.display()))?;
    if !report {
        return Ok(None);
    }
    let page = dir.join("report.html");
    std::fs::write(&page, headroom_report::render(&data))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", page.display()))?;
    Ok(Some(page))
}

/// A run directory being written: intervals.jsonl and latency.hlog grow (and are flushed) each
/// interval; summary.json is written at the end.
pub struct RunDir {
    pub path: PathBuf,
    intervals: BufWriter<File>,
    hlog: HlogWriter<BufWriter<File>>,
}

impl RunDir {
    pub fn create(path: &Path, started: SystemTime, command: &str) -> std::io::Result<RunDir> {
        std::fs::create_dir_all(path)?;
        let intervals = BufWriter::new(File::create(path.join("intervals.jsonl"))?);
        let hlog = HlogWriter::new(
            BufWriter::new(File::create(path.join("latency.hlog"))?),
            started,
            &format!("headroom {} — {command}\nlatency in microseconds; untagged = corrected, Tag=uncorrected, Tag=connect, Tag=tls", env!("CARGO_PKG_VERSION")),
        )?;
        Ok(RunDir {
            path: path.to_path_buf(),
            intervals,
            hlog,
        })
    }

    /// Append one interval: its line (from [`crate::interval::interval_json`]) and its
    /// histograms.
    pub fn interval(&mut self, iv: &Interval<'_>, line: &serde_json::Value) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.intervals, line)?;
        self.intervals.write_all(b"\n")?;
        self.intervals.flush()?;
        let r: &Recorder = iv.merged;
        self.hlog.write(None, iv.start, iv.length, &r.latency)?;
        self.hlog.write(
            Some("uncorrected"),
            iv.start,
            iv.length,
            &r.latency_uncorrected,
        )?;
        if !r.connect.is_empty() {
            self.hlog
                .write(Some("connect"), iv.start, iv.length, &r.connect)?;
        }
        if !r.tls.is_empty() {
            self.hlog.write(Some("tls"), iv.start, iv.length, &r.tls)?;
        }
        Ok(())
    }

    /// summary.json, written whole (to a temporary file renamed over it).
    pub fn write_summary(&self, summary: &RunSummary) -> std::io::Result<()> {
        write_summary(&self.path, summary)
    }
}

/// `dir`/summary.json from `summary`, pretty-printed with sorted keys, written to a temporary
/// file then renamed, so a reader never sees half of it.
pub fn write_summary(dir: &Path, summary: &RunSummary) -> std::io::Result<()> {
    let tmp = dir.join("summary.json.tmp");
    let mut f = File::create(&tmp)?;
    serde_json::to_writer_pretty(&mut f, &summary.to_json())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(tmp, dir.join("summary.json"))
}
