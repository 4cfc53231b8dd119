//! The run directory (`run --out`): intervals.jsonl and latency.hlog grow as the run goes,
//! summary.json is written at the end, then the derived intervals.csv and report.html. The
//! format is docs/report.md's; `headroom report` reads it.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use headroom_engine::Interval;
use headroom_metrics::hlog::HlogWriter;
use headroom_metrics::Recorder;

use crate::interval::{IntervalLine, IntervalLineExt};
use crate::summary::{RunSummary, RunSummaryExt};

/// Derived files of a finished run directory: intervals.csv always, report.html when `report`
/// (returns its path). Both are made from the files on disk, as `headroom report` would, and
/// each is written whole or not at all (a full disk leaves no half a page).
pub fn finish_run_dir(dir: &Path, report: bool) -> anyhow::Result<Option<PathBuf>> {
    let data = headroom_report::load_run(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let csv = dir.join("intervals.csv");
    write_whole(
        &csv,
        headroom_report::export::intervals_csv(&data.intervals).as_bytes(),
    )
    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", csv.display()))?;
    if !report {
        return Ok(None);
    }
    let page = dir.join("report.html");
    write_whole(&page, headroom_report::render(&data).as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", page.display()))?;
    Ok(Some(page))
}

/// `path` with `bytes`, through a temporary file renamed over it; on failure the temporary file
/// is removed and `path` left as it was.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let r = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Space reserved for summary.json when a run directory is created (a summary is a few KiB;
/// one with many named steps or status codes a few tens), so that a disk which fills during the
/// run still takes the summary at its end.
pub const SUMMARY_RESERVE: usize = 64 * 1024;

/// A file of lines (intervals.jsonl, latency.hlog) that stays whole when the disk fills: what
/// is written goes to memory, and each `flush` appends it whole; a failed append is cut back to
/// the last whole line, reported once (the error names the file), and the file takes nothing
/// more. Written by hand: a `BufWriter` on a full disk leaves a line cut where the space ended.
struct LineFile {
    file: File,
    path: PathBuf,
    pending: Vec<u8>,
    /// Length of the file's whole lines.
    good: u64,
    failed: bool,
}

impl LineFile {
    fn create(path: PathBuf) -> std::io::Result<LineFile> {
        Ok(LineFile {
            file: File::create(&path)?,
            path,
            pending: Vec::new(),
            good: 0,
            failed: false,
        })
    }
}

impl Write for LineFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.failed {
            self.pending.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.failed || self.pending.is_empty() {
            self.pending.clear();
            return Ok(());
        }
        let r = self.file.write_all(&self.pending);
        let n = self.pending.len() as u64;
        self.pending.clear();
        match r {
            Ok(()) => {
                self.good += n;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                // Cut back to the last whole line; the position follows.
                let _ = self.file.set_len(self.good);
                let _ = self.file.seek(SeekFrom::Start(self.good));
                Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot write {}: {e}; its later lines are dropped",
                        self.path.display()
                    ),
                ))
            }
        }
    }
}

/// A run directory being written: intervals.jsonl and latency.hlog grow (and are flushed, whole
/// lines only) each interval; summary.json is written at the end into space reserved at the
/// start.
pub struct RunDir {
    pub path: PathBuf,
    intervals: LineFile,
    hlog: HlogWriter<LineFile>,
}

impl RunDir {
    pub fn create(path: &Path, started: SystemTime, command: &str) -> std::io::Result<RunDir> {
        std::fs::create_dir_all(path)?;
        std::fs::write(path.join(SUMMARY_RESERVE_FILE), reserve_bytes())?;
        let intervals = LineFile::create(path.join("intervals.jsonl"))?;
        let hlog = HlogWriter::new(
            LineFile::create(path.join("latency.hlog"))?,
            started,
            &format!("headroom {} — {command}\nlatency in microseconds; untagged = corrected, Tag=uncorrected, Tag=connect, Tag=tls", env!("CARGO_PKG_VERSION")),
        )?;
        Ok(RunDir {
            path: path.to_path_buf(),
            intervals,
            hlog,
        })
    }

    /// Append one interval: its line (from [`crate::interval::IntervalLineExt::of`]) and its
    /// histograms. A file that cannot take them says so once (its first failure is the error)
    /// and takes nothing more; the other file goes on.
    pub fn interval(&mut self, iv: &Interval<'_>, line: &IntervalLine) -> std::io::Result<()> {
        // Through a JSON value, whose map sorts the keys as they have always been written.
        let jsonl = serde_json::to_writer(&mut self.intervals, &line.to_json())
            .map_err(std::io::Error::other)
            .and_then(|()| self.intervals.write_all(b"\n"))
            .and_then(|()| self.intervals.flush());
        let r: &Recorder = iv.merged;
        let hlog = &mut self.hlog;
        let hlog = (|| {
            hlog.write(None, iv.start, iv.length, &r.latency)?;
            hlog.write(
                Some("uncorrected"),
                iv.start,
                iv.length,
                &r.latency_uncorrected,
            )?;
            if !r.connect.is_empty() {
                hlog.write(Some("connect"), iv.start, iv.length, &r.connect)?;
            }
            if !r.tls.is_empty() {
                hlog.write(Some("tls"), iv.start, iv.length, &r.tls)?;
            }
            Ok(())
        })();
        match (jsonl, hlog) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Err(a), Err(b)) => Err(std::io::Error::new(a.kind(), format!("{a}; {b}"))),
        }
    }

    /// summary.json, written whole (into the space reserved at the start, renamed over it).
    pub fn write_summary(&self, summary: &RunSummary) -> std::io::Result<()> {
        write_summary(&self.path, summary)
    }
}

/// A run directory dropped before its summary was written (a lab run that failed) gives its
/// reserved space back.
impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path.join(SUMMARY_RESERVE_FILE));
    }
}

/// The reserved space: a hidden file (a run killed before its end leaves it, and nothing that
/// lists or reads a run directory takes it for one of its files), which becomes summary.json.
/// Its first line names the process that reserved it, so [`clear_stale_reserve`] can tell a
/// live run's reservation from a killed one's.
pub const SUMMARY_RESERVE_FILE: &str = ".summary.json.reserve";

/// What the reservation holds: one line naming this process, then spaces.
fn reserve_bytes() -> Vec<u8> {
    let mut b = format!(
        "headroom pid {}: space reserved for summary.json\n",
        std::process::id()
    )
    .into_bytes();
    b.resize(SUMMARY_RESERVE, b' ');
    b
}

/// Removes the reservation a killed run left in `dir` (its process is gone); keeps a live
/// run's. True when one was removed. `headroom report` calls it on each run directory it reads.
pub fn clear_stale_reserve(dir: &Path) -> bool {
    let path = dir.join(SUMMARY_RESERVE_FILE);
    let Ok(mut f) = File::open(&path) else {
        return false;
    };
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut f, &mut head).unwrap_or(0);
    let pid = std::str::from_utf8(&head[..n])
        .ok()
        .and_then(|t| t.strip_prefix("headroom pid "))
        .and_then(|t| t.split(':').next())
        .and_then(|p| p.parse::<u32>().ok());
    // Without a readable pid it is not ours to judge; a pid with no /proc entry, or a zombie
    // (killed, not yet reaped), has ended.
    let gone = pid.is_some_and(|p| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |stat| {
            // `pid (comm) STATE ...`: the state follows the last ')'.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        })
    });
    gone && std::fs::remove_file(&path).is_ok()
}

/// `dir`/summary.json from `summary`, pretty-printed with sorted keys, written to a temporary
/// file then renamed, so a reader never sees half of it. The temporary file is the space
/// [`RunDir::create`] reserved when there is one (overwritten from its start, then cut to
/// length), so a full disk still takes a summary of up to [`SUMMARY_RESERVE`] bytes. On failure
/// the temporary file is removed.
pub fn write_summary(dir: &Path, summary: &RunSummary) -> std::io::Result<()> {
    let tmp = dir.join(SUMMARY_RESERVE_FILE);
    let mut bytes = serde_json::to_vec_pretty(&summary.to_json())?;
    bytes.push(b'\n');
    let r = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&tmp)?;
        f.write_all(&bytes)?;
        f.set_len(bytes.len() as u64)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join("summary.json"))
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}
