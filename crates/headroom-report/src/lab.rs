//! The report of a lab's output directory (written by `headroom lab`, see docs/lab.md): one
//! self-contained page with each pivot table as an HTML table and a grouped bar chart, the
//! capacity curves of every configuration, and the server's CPU, memory and descriptors over
//! time.
//!
//! Read from the directory, each optional but the tables:
//!
//! - `tables.json` (else `tables.csv`): the pivot tables;
//! - `rate-curve.csv`: every probe of a max-rate search (charts against the offered rate);
//! - `intervals.csv`: every load interval (charts over time, when there is no rate curve);
//! - `samples.csv`: every server sample.
//!
//! The SQLite store is not read: the page is made from the files the lab writes next to it.
//! The experiment's name is the directory's.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bars::{Bar, BarChart};
use crate::csv::{self, Csv, Record};
use crate::html::{self, close_page, open_page, Tile, Tone};
use crate::svg::{escape, Chart, Series};
use crate::ReportError;

/// Whether `dir` looks like a lab's output directory (it holds `lab.sqlite` or `tables.csv`
/// and no `intervals.jsonl`).
pub fn is_lab_dir(dir: &Path) -> bool {
    (dir.join("lab.sqlite").exists() || dir.join("tables.csv").exists())
        && !dir.join("intervals.jsonl").exists()
}

/// One cell of a pivot table: the mean over the cell's good runs, the half-width of its 95%
/// confidence interval (None with one run), and how many runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabCell {
    pub mean: f64,
    pub ci95: Option<f64>,
    pub n: usize,
}

/// A pivot table as the lab wrote it (`tables.json`; see `headroom_lab::table::Table`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabTable {
    pub title: String,
    pub metric: String,
    pub row_factors: Vec<String>,
    pub col_factors: Vec<String>,
    /// One level per row factor, for each row.
    pub rows: Vec<Vec<String>>,
    /// One level per column factor, for each column.
    pub cols: Vec<Vec<String>>,
    /// `cells[row][col]`.
    pub cells: Vec<Vec<Option<LabCell>>>,
    /// `failed[row][col]`: failed runs of the cell.
    pub failed: Vec<Vec<usize>>,
    /// `runs[row][col]`: runs of the cell (None when read from tables.csv, which lacks it).
    pub runs: Option<Vec<Vec<usize>>>,
    /// A table of verdicts (metric `verdict`): each cell's verdict names, `cells` empty. Empty
    /// for a table of numbers.
    pub texts: Vec<Vec<Option<String>>>,
}

/// A configuration and repetition: the factors' levels in the CSV files' column order.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunKey {
    pub factors: Vec<(String, String)>,
    pub repetition: u32,
}

impl RunKey {
    /// "poller=poll sndbuf=8k workers=1".
    pub fn config_label(&self) -> String {
        self.factors
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One probe of a rate search (a line of `rate-curve.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct LabProbe {
    pub run: RunKey,
    /// Offered rate (sessions/s).
    pub rate: f64,
    /// Whether the probe held the SLO.
    pub ok: bool,
    pub throughput_rps: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// p99 of the SLO's transaction (`slo.of`), when the search had one.
    pub of_p99_ms: Option<f64>,
}

/// One load interval (a line of `intervals.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct LabInterval {
    pub run: RunKey,
    pub probe: Option<u32>,
    pub t_s: f64,
    /// The interval's length (`None` in a file of a lab before issue 27, without the column).
    pub length_s: Option<f64>,
    pub responses: Option<f64>,
    pub latency_p99_us: Option<f64>,
    pub connections_open: Option<f64>,
}

/// One server sample (a line of `samples.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct LabSample {
    pub run: RunKey,
    pub probe: Option<u32>,
    pub t_s: f64,
    pub cpu_user_pct: Option<f64>,
    pub cpu_sys_pct: Option<f64>,
    pub rss_bytes: Option<f64>,
    pub fds: Option<f64>,
    /// Connections in the server's accept queue at the sample (`None`: not read, or a lab of
    /// an older headroom).
    pub accept_queue: Option<f64>,
    /// Whether the run was good (samples.csv has failed runs' samples too).
    pub run_ok: bool,
}

/// Everything a lab report is made from.
/// The run directories a lab reads at most for their loads: enough for any matrix the lab
/// accepts, and a bound on what a report opens.
const MAX_RUN_DIRS: usize = 4096;

/// The distinct loads in words of the run directories under `runs` (each `summary.json`), in
/// the order of the directories' names. A directory without a readable summary is skipped: the
/// loads are context for the heading, the tables hold the figures.
fn run_loads(runs: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(runs) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .take(MAX_RUN_DIRS)
        .collect();
    dirs.sort();
    let mut loads: Vec<String> = Vec::new();
    for d in dirs {
        let path = d.join("summary.json");
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let load = crate::data::parse_summary(&text, &path)
            .ok()
            .and_then(|s| s.load_text);
        if let Some(l) = load.filter(|l| !loads.contains(l)) {
            loads.push(l);
        }
    }
    loads
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabData {
    pub dir: PathBuf,
    /// The experiment's name: the directory's.
    pub name: String,
    pub tables: Vec<LabTable>,
    /// None: no rate-curve.csv (not a rate search).
    pub probes: Option<Vec<LabProbe>>,
    /// None: no intervals.csv.
    pub intervals: Option<Vec<LabInterval>>,
    /// None: no samples.csv.
    pub samples: Option<Vec<LabSample>>,
    /// Missing files and other things the reader should know, shown at the top.
    pub notes: Vec<String>,
    /// The runs' loads in words (`runs/*/summary.json`, see [`crate::data::load_words`]),
    /// each once, in the order of the run directories' names; empty when the lab kept none.
    pub loads: Vec<String>,
}

fn read_optional(path: &Path) -> Result<Option<String>, ReportError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ReportError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads the lab directory `dir`: tables.json (else tables.csv) must be there, the other files
/// may be missing (a note says so); a bad file is an error naming its line.
pub fn load_lab(dir: &Path) -> Result<LabData, ReportError> {
    fs::metadata(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let name = dir
        .file_name()
        .map(|n| n.to_os_string())
        .or_else(|| {
            dir.canonicalize()
                .ok()?
                .file_name()
                .map(|n| n.to_os_string())
        })
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut data = LabData {
        dir: dir.to_path_buf(),
        name,
        ..LabData::default()
    };
    let json_path = dir.join("tables.json");
    let csv_path = dir.join("tables.csv");
    if let Some(text) = read_optional(&json_path)? {
        data.tables = parse_tables_json(&text, &json_path)?;
    } else if let Some(text) = read_optional(&csv_path)? {
        data.tables = parse_tables_csv(&text, &csv_path)?;
        data.notes.push(
            "tables.json is missing (the lab was written by an older headroom): the tables come \
             from tables.csv, with the last factor of each as its columns. Run the lab again \
             with the same output: it finds its runs stored and rewrites every file."
                .to_string(),
        );
    } else {
        return Err(ReportError::NotALab {
            dir: dir.to_path_buf(),
        });
    }

    let path = dir.join("rate-curve.csv");
    if let Some(text) = read_optional(&path)? {
        data.probes = Some(parse_probes(&Csv::parse(&text, &path)?)?);
    }
    let path = dir.join("intervals.csv");
    if let Some(text) = read_optional(&path)? {
        data.intervals = Some(parse_intervals(&Csv::parse(&text, &path)?)?);
    } else if data.probes.is_none() {
        data.notes.push(
            "intervals.csv is missing: no connection or latency curves over time.".to_string(),
        );
    }
    data.loads = run_loads(&dir.join("runs"));
    let path = dir.join("samples.csv");
    if let Some(text) = read_optional(&path)? {
        data.samples = Some(parse_samples(&Csv::parse(&text, &path)?)?);
    } else {
        data.notes.push(
            "samples.csv is missing (the lab was written by an older headroom): no server \
             charts. Run the lab again with the same output: it finds its runs stored and \
             writes it."
                .to_string(),
        );
    }
    Ok(data)
}

/// Reads the lab directory `dir` and renders its report.
pub fn render_lab(dir: &Path) -> Result<String, ReportError> {
    Ok(page(&load_lab(dir)?))
}

// ---------------------------------------------------------------------------------------------
// Reading

fn json_error(path: &Path, line: usize, column: usize, message: String) -> ReportError {
    ReportError::Json {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// A list of lists, each entry read by `cell`; `None` when it is not that shape.
fn grid_of<T>(v: &Value, cell: impl Fn(&Value) -> Option<T>) -> Option<Vec<Vec<T>>> {
    v.as_array()?
        .iter()
        .map(|row| row.as_array()?.iter().map(&cell).collect())
        .collect()
}

/// Whether a grid is `rows` x `cols`.
fn fits<T>(g: &[Vec<T>], rows: usize, cols: usize) -> bool {
    g.len() == rows && g.iter().all(|r| r.len() == cols)
}

fn parse_tables_json(text: &str, path: &Path) -> Result<Vec<LabTable>, ReportError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
        json_error(path, e.line().max(1), e.column(), message)
    })?;
    let bad = |k: usize, what: &str| json_error(path, 1, 1, format!("table {}: {what}", k + 1));
    let Value::Array(items) = v else {
        return Err(json_error(path, 1, 1, "not an array of tables".into()));
    };
    let strings = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let string_rows =
        |v: &Value| -> Option<Vec<Vec<String>>> { v.as_array()?.iter().map(strings).collect() };
    let count_rows = |v: &Value| grid_of(v, |n| n.as_u64().map(|n| n as usize));
    let mut tables = Vec::new();
    for (k, t) in items.iter().enumerate() {
        let text_of = |key: &str| t[key].as_str().unwrap_or_default().to_string();
        let list = |key: &str| {
            strings(&t[key]).ok_or_else(|| bad(k, &format!("'{key}' is not a list of strings")))
        };
        let grid = |key: &str| {
            string_rows(&t[key])
                .ok_or_else(|| bad(k, &format!("'{key}' is not a list of lists of strings")))
        };
        let rows = grid("rows")?;
        let cols = grid("cols")?;
        let cells: Vec<Vec<Option<LabCell>>> = grid_of(&t["cells"], |c| match c {
            Value::Null => Some(None),
            Value::Object(o) => Some(Some(LabCell {
                // A NaN mean is written as null: no value.
                mean: o.get("mean")?.as_f64().unwrap_or(f64::NAN),
                ci95: o.get("ci95").and_then(Value::as_f64),
                n: o.get("n").and_then(Value::as_u64).unwrap_or(0) as usize,
            })),
            _ => None,
        })
        .ok_or_else(|| bad(k, "'cells' is not a list of lists of cells or nulls"))?;
        let failed = match &t["failed"] {
            Value::Null => vec![vec![0; cols.len()]; rows.len()],
            v => {
                count_rows(v).ok_or_else(|| bad(k, "'failed' is not a list of lists of counts"))?
            }
        };
        let runs = match &t["runs"] {
            Value::Null => None,
            v => Some(
                count_rows(v).ok_or_else(|| bad(k, "'runs' is not a list of lists of counts"))?,
            ),
        };
        let texts: Vec<Vec<Option<String>>> = match &t["texts"] {
            Value::Null => Vec::new(),
            v => grid_of(v, |c| match c {
                Value::Null => Some(None),
                Value::String(s) => Some(Some(s.clone())),
                _ => None,
            })
            .ok_or_else(|| bad(k, "'texts' is not a list of lists of strings or nulls"))?,
        };
        if !texts.is_empty() && !fits(&texts, rows.len(), cols.len()) {
            return Err(bad(
                k,
                &format!("texts must be {} rows x {} columns", rows.len(), cols.len()),
            ));
        }

        let (nr, nc) = (rows.len(), cols.len());
        if !fits(&cells, nr, nc)
            || !fits(&failed, nr, nc)
            || runs.as_deref().is_some_and(|r| !fits(r, nr, nc))
        {
            return Err(bad(
                k,
                &format!(
                    "cells, failed and runs must be {} rows x {} columns",
                    rows.len(),
                    cols.len()
                ),
            ));
        }
        tables.push(LabTable {
            title: text_of("title"),
            metric: text_of("metric"),
            row_factors: list("row_factors")?,
            col_factors: list("col_factors")?,
            rows,
            cols,
            cells,
            failed,
            runs,
            texts,
        });
    }
    Ok(tables)
}

/// tables.csv: per table a `# title` line, a header (the factors, then mean, ci95, n, failed)
/// and a line per cell. Which factors were the columns is not written: the last one is taken
/// (the lab's default layout).
fn parse_tables_csv(text: &str, path: &Path) -> Result<Vec<LabTable>, ReportError> {
    let recs = csv::records(text, path, true)?;
    let mut tables = Vec::new();
    let mut i = 0;
    while i < recs.len() {
        let title_rec = &recs[i];
        let Some(title) = title_rec.fields[0]
            .strip_prefix('#')
            .filter(|_| title_rec.fields.len() == 1)
        else {
            return Err(csv::error(
                path,
                title_rec.line,
                "expected a '# title' line",
            ));
        };
        let Some(header) = recs.get(i + 1).filter(|r| !r.fields[0].starts_with('#')) else {
            return Err(csv::error(
                path,
                title_rec.line,
                "a title without a header line",
            ));
        };
        let h = &header.fields;
        if h.len() >= 3 && h[h.len() - 3..] == ["verdict", "n", "failed"] {
            // A table of verdicts: words, no figures to chart; tables.json has it.
            i += 2;
            while i < recs.len() && !recs[i].fields[0].starts_with('#') {
                i += 1;
            }
            continue;
        }
        if h.len() < 4 || h[h.len() - 4..] != ["mean", "ci95", "n", "failed"] {
            return Err(csv::error(
                path,
                header.line,
                "the header does not end with mean,ci95,n,failed",
            ));
        }
        let factors: Vec<String> = h[..h.len() - 4].to_vec();
        let (row_factors, col_factors) = match factors.split_last() {
            Some((last, rest)) => (rest.to_vec(), vec![last.clone()]),
            None => (Vec::new(), Vec::new()),
        };
        let nr = row_factors.len();
        let parser = Csv {
            path: path.to_path_buf(),
            header: h.clone(),
            records: Vec::new(),
        };
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut cols: Vec<Vec<String>> = Vec::new();
        let mut values: BTreeMap<(usize, usize), (Option<LabCell>, usize)> = BTreeMap::new();
        i += 2;
        while i < recs.len() && !recs[i].fields[0].starts_with('#') {
            let r: &Record = &recs[i];
            if r.fields.len() != h.len() {
                return Err(csv::error(
                    path,
                    r.line,
                    format!("{} fields where the header has {}", r.fields.len(), h.len()),
                ));
            }
            let rk = r.fields[..nr].to_vec();
            let ck = r.fields[nr..factors.len()].to_vec();
            let ri = rows.iter().position(|x| *x == rk).unwrap_or_else(|| {
                rows.push(rk);
                rows.len() - 1
            });
            let ci = cols.iter().position(|x| *x == ck).unwrap_or_else(|| {
                cols.push(ck);
                cols.len() - 1
            });
            let k = factors.len();
            let mean = parser.num(r, Some(k))?;
            let ci95 = parser.num(r, Some(k + 1))?;
            let n = parser.num(r, Some(k + 2))?.unwrap_or(0.0) as usize;
            let failed = parser.num(r, Some(k + 3))?.unwrap_or(0.0) as usize;
            let cell = mean.map(|mean| LabCell { mean, ci95, n });
            values.insert((ri, ci), (cell, failed));
            i += 1;
        }
        let cells = (0..rows.len())
            .map(|r| {
                (0..cols.len())
                    .map(|c| values.get(&(r, c)).and_then(|v| v.0))
                    .collect()
            })
            .collect();
        let failed = (0..rows.len())
            .map(|r| {
                (0..cols.len())
                    .map(|c| values.get(&(r, c)).map_or(0, |v| v.1))
                    .collect()
            })
            .collect();
        tables.push(LabTable {
            title: title.trim().to_string(),
            metric: "mean".to_string(),
            row_factors,
            col_factors,
            rows,
            cols,
            cells,
            failed,
            runs: None,
            texts: Vec::new(),
        });
    }
    Ok(tables)
}

/// The run of a record: its factor columns (those before `repetition`) and repetition.
fn run_key(c: &Csv, r: &Record) -> Result<RunKey, ReportError> {
    let nf = c.factor_cols();
    let repetition = c.num(r, c.col("repetition"))?.map_or(1, |v| v as u32);
    Ok(RunKey {
        factors: c.header[..nf]
            .iter()
            .cloned()
            .zip(r.fields[..nf].iter().cloned())
            .collect(),
        repetition,
    })
}

fn require(c: &Csv, cols: &[&str]) -> Result<(), ReportError> {
    for name in cols {
        if c.col(name).is_none() {
            return Err(csv::error(
                &c.path,
                1,
                format!("no column '{name}' in the header"),
            ));
        }
    }
    Ok(())
}

fn parse_probes(c: &Csv) -> Result<Vec<LabProbe>, ReportError> {
    require(c, &["repetition", "rate", "ok"])?;
    let mut out = Vec::new();
    for r in &c.records {
        let Some(rate) = c.num(r, c.col("rate"))? else {
            continue;
        };
        out.push(LabProbe {
            run: run_key(c, r)?,
            rate,
            ok: c.boolean(r, c.col("ok"))?.unwrap_or(false),
            throughput_rps: c.num(r, c.col("throughput_rps"))?,
            latency_p99_ms: c.num(r, c.col("latency_p99_ms"))?,
            of_p99_ms: c.num(r, c.col("of_p99_ms"))?,
        });
    }
    Ok(out)
}

fn probe_of(c: &Csv, r: &Record) -> Result<Option<u32>, ReportError> {
    Ok(c.num(r, c.col("probe"))?.map(|p| p as u32))
}

fn parse_intervals(c: &Csv) -> Result<Vec<LabInterval>, ReportError> {
    require(c, &["repetition", "t_s"])?;
    let mut out = Vec::new();
    for r in &c.records {
        let Some(t_s) = c.num(r, c.col("t_s"))? else {
            continue;
        };
        out.push(LabInterval {
            run: run_key(c, r)?,
            probe: probe_of(c, r)?,
            t_s,
            length_s: c.num(r, c.col("length_s"))?,
            responses: c.num(r, c.col("responses"))?,
            latency_p99_us: c.num(r, c.col("latency_p99_us"))?,
            connections_open: c.num(r, c.col("connections_open"))?,
        });
    }
    Ok(out)
}

fn parse_samples(c: &Csv) -> Result<Vec<LabSample>, ReportError> {
    require(c, &["repetition", "t_s"])?;
    let mut out = Vec::new();
    for r in &c.records {
        let Some(t_s) = c.num(r, c.col("t_s"))? else {
            continue;
        };
        out.push(LabSample {
            run: run_key(c, r)?,
            probe: probe_of(c, r)?,
            t_s,
            cpu_user_pct: c.num(r, c.col("cpu_user_pct"))?,
            cpu_sys_pct: c.num(r, c.col("cpu_sys_pct"))?,
            rss_bytes: c.num(r, c.col("rss_bytes"))?,
            fds: c.num(r, c.col("fds"))?,
            accept_queue: c.num(r, c.col("accept_queue"))?,
            run_ok: c.boolean(r, c.col("run_ok"))?.unwrap_or(true),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Formatting

pub use crate::numbers::fmt_value;

impl LabTable {
    /// "mean ± ci", "mean" with one run, " (1 failed)" when some runs failed, "failed 2/3"
    /// when no run gave a value and some failed, "–" for an empty cell.
    pub fn cell_text(&self, i: usize, j: usize) -> String {
        let failed = self.failed[i][j];
        let value = if !self.texts.is_empty() {
            self.texts[i][j].clone()
        } else {
            self.cells[i][j]
                .filter(|c| c.mean.is_finite())
                .map(|c| match c.ci95 {
                    Some(ci) => format!("{} ± {}", fmt_value(c.mean), fmt_value(ci)),
                    None => fmt_value(c.mean),
                })
        };
        match (value, failed) {
            (Some(v), 0) => v,
            (Some(v), f) => format!("{v} ({f} failed)"),
            (None, 0) => "–".to_string(),
            (None, f) => match &self.runs {
                Some(runs) => format!("failed {f}/{}", runs[i][j]),
                None => format!("failed {f}"),
            },
        }
    }

    /// Column header j: "factor=level, ..." or the metric with no column factor.
    pub fn col_label(&self, j: usize) -> String {
        if self.col_factors.is_empty() {
            return self.metric.clone();
        }
        self.col_factors
            .iter()
            .zip(&self.cols[j])
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Row i's levels joined (or "all" with no row factor).
    fn row_label(&self, i: usize) -> String {
        if self.row_factors.is_empty() {
            "all".to_string()
        } else {
            self.rows[i].join(" · ")
        }
    }

    /// Row i as "factor=level ..." for hover texts.
    fn row_names(&self, i: usize) -> String {
        if self.row_factors.is_empty() {
            return "all".to_string();
        }
        self.row_factors
            .iter()
            .zip(&self.rows[i])
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The table as an HTML `<table>`: level columns, then a cell per column level; cells with
    /// failed runs are marked.
    pub fn html(&self) -> String {
        let mut out = String::from("<table class=\"pivot\">\n<tr>");
        if self.row_factors.is_empty() {
            out.push_str("<th></th>");
        }
        for f in &self.row_factors {
            let _ = write!(out, "<th>{}</th>", escape(f));
        }
        for j in 0..self.cols.len() {
            let _ = write!(out, "<th class=\"n\">{}</th>", escape(&self.col_label(j)));
        }
        out.push_str("</tr>\n");
        for i in 0..self.rows.len() {
            out.push_str("<tr>");
            if self.row_factors.is_empty() {
                out.push_str("<td>all</td>");
            }
            for level in &self.rows[i] {
                let _ = write!(out, "<td>{}</td>", escape(level));
            }
            for j in 0..self.cols.len() {
                let text = escape(&self.cell_text(i, j));
                if self.failed[i][j] > 0 {
                    let _ = write!(
                        out,
                        "<td class=\"n failed\" style=\"color:#b00000\">{text}</td>"
                    );
                } else {
                    let _ = write!(out, "<td class=\"n\">{text}</td>");
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        out
    }

    /// The cells with a value, as (row, column, mean).
    fn values(&self) -> Vec<(usize, usize, f64)> {
        let mut v = Vec::new();
        for (i, row) in self.cells.iter().enumerate() {
            for (j, c) in row.iter().enumerate() {
                if let Some(c) = c.filter(|c| c.mean.is_finite()) {
                    v.push((i, j, c.mean));
                }
            }
        }
        v
    }

    /// The factors of cell (i, j), rows' then columns', as (factor, level).
    fn cell_factors(&self, i: usize, j: usize) -> Vec<(&str, &str)> {
        let rows = self.row_factors.iter().zip(&self.rows[i]);
        let cols = self.col_factors.iter().zip(&self.cols[j]);
        rows.chain(cols)
            .map(|(f, l)| (f.as_str(), l.as_str()))
            .collect()
    }

    /// The table in one sentence a person reads, with no column name: the best cell against the
    /// worst ("4 handlers: 3.8 ms mean latency, 3.8× lower than 1 handler (14.5 ms)"), naming
    /// only the factors in which the two differ; or why there is nothing to compare. A metric
    /// where less is better (latency, errors) leads with its lowest cell, any other with its
    /// highest.
    pub fn finding(&self) -> String {
        let words = metric_words(&self.metric);
        let values = self.values();
        let failed: usize = self.failed.iter().flatten().sum();
        let failed_note = if failed > 0 {
            format!(" ({failed} run(s) failed)")
        } else {
            String::new()
        };
        let Some(hi) = values.iter().max_by(|a, b| a.2.total_cmp(&b.2)) else {
            return format!("{}: no configuration has a value{failed_note}", self.title);
        };
        let lo = values
            .iter()
            .min_by(|a, b| a.2.total_cmp(&b.2))
            .expect("a value");
        if values.len() == 1 || hi.2 == lo.2 {
            let whom = if values.len() == 1 {
                config_words(&self.cell_factors(hi.0, hi.1))
            } else {
                format!("every configuration ({})", values.len())
            };
            return format!("{whom}: {}{failed_note}", words.figure(hi.2));
        }
        let (lead, other) = if words.lower_better == Some(true) {
            (lo, hi)
        } else {
            (hi, lo)
        };
        // Name the factors that tell the two cells apart (all of them if none does).
        let (a, b) = (
            self.cell_factors(lead.0, lead.1),
            self.cell_factors(other.0, other.1),
        );
        let differ = |x: &[(&str, &str)], y: &[(&str, &str)]| -> Vec<(String, String)> {
            let d: Vec<(String, String)> = x
                .iter()
                .zip(y)
                .filter(|(p, q)| p.1 != q.1)
                .map(|(p, _)| (p.0.to_string(), p.1.to_string()))
                .collect();
            if d.is_empty() {
                x.iter()
                    .map(|(f, l)| (f.to_string(), l.to_string()))
                    .collect()
            } else {
                d
            }
        };
        let pairs = |v: &[(String, String)]| {
            config_words(
                &v.iter()
                    .map(|(f, l)| (f.as_str(), l.as_str()))
                    .collect::<Vec<_>>(),
            )
        };
        let (lead_name, other_name) = (pairs(&differ(&a, &b)), pairs(&differ(&b, &a)));
        let mut text = if lo.2 > 0.0 {
            let dir = if lead.2 > other.2 { "higher" } else { "lower" };
            let r = hi.2 / lo.2;
            // Close figures as a percentage: "3% higher", not "1.0× higher".
            let by = if r < 1.095 {
                let pct = ((lead.2 - other.2).abs() / other.2 * 100.0)
                    .round()
                    .max(1.0);
                format!("{pct}% {dir}")
            } else {
                format!("{}× {dir}", ratio_words(r))
            };
            format!(
                "{lead_name}: {}, {by} than {other_name} ({})",
                words.figure(lead.2),
                words.short(other.2)
            )
        } else {
            format!(
                "{lead_name}: {}, against {} with {other_name}",
                words.figure(lead.2),
                words.short(other.2)
            )
        };
        // Whether the two differ beyond noise: their 95% confidence intervals overlap.
        let ci = |i: usize, j: usize| self.cells[i][j].and_then(|c| c.ci95);
        if let (Some(h), Some(l)) = (ci(hi.0, hi.1), ci(lo.0, lo.1)) {
            if hi.2 - h <= lo.2 + l {
                text.push_str(", within each other's 95% intervals");
            }
        }
        text.push_str(&failed_note);
        text
    }

    /// The table as a grouped bar chart named `name`: a group per row, a bar per column.
    pub fn bars(&self, name: &str) -> BarChart {
        let mut c = BarChart::new(
            name,
            &self.title,
            &self.row_factors.join(" · "),
            &self.metric,
        );
        c.groups = (0..self.rows.len()).map(|i| self.row_label(i)).collect();
        c.series = (0..self.cols.len()).map(|j| self.col_label(j)).collect();
        c.values = (0..self.rows.len())
            .map(|i| {
                (0..self.cols.len())
                    .map(|j| {
                        let cell = self.cells[i][j].filter(|c| c.mean.is_finite())?;
                        let mut label = format!(
                            "{} · {}: {}",
                            self.row_names(i),
                            self.col_label(j),
                            self.cell_text(i, j)
                        );
                        if cell.n > 0 {
                            let _ = write!(label, " (n={})", cell.n);
                        }
                        Some(Bar {
                            value: cell.mean,
                            ci95: cell.ci95,
                            label: Some(label),
                        })
                    })
                    .collect()
            })
            .collect();
        if c.values.iter().flatten().all(Option::is_none) {
            c.note = Some("no cell has a value".to_string());
        }
        c
    }
}

/// How a lab metric reads in a sentence: the unit after its figure, what it measures, and
/// whether less of it is better (`None`: neither, such as a count of requests).
struct MetricWords {
    /// Multiplies the value before it is shown (a fraction shown in percent).
    scale: f64,
    /// Right after the figure: `ms`, `responses/s`, `%`.
    unit: String,
    /// After the unit: `mean latency`.
    noun: String,
    lower_better: Option<bool>,
}

impl MetricWords {
    /// The figure with its unit: "3.8 ms", "3,800 responses/s", "0.5%".
    fn short(&self, v: f64) -> String {
        let n = fmt_value(v * self.scale);
        match self.unit.as_str() {
            "" => n,
            "%" => format!("{n}%"),
            u => format!("{n} {u}"),
        }
    }

    /// The figure, its unit and what it measures: "3.8 ms mean latency".
    fn figure(&self, v: f64) -> String {
        if self.noun.is_empty() {
            self.short(v)
        } else {
            format!("{} {}", self.short(v), self.noun)
        }
    }
}

/// The words of a metric of the lab (docs/lab.md's list), and of an unknown one by its unit
/// suffix (`_ms`, `_pct`, `_rps`, `_per_s`), its name in words otherwise.
fn metric_words(metric: &str) -> MetricWords {
    let w = |scale: f64, unit: &str, noun: &str, lower_better: Option<bool>| MetricWords {
        scale,
        unit: unit.to_string(),
        noun: noun.to_string(),
        lower_better,
    };
    let less = Some(true);
    let more = Some(false);
    match metric {
        "throughput_rps" => return w(1.0, "responses/s", "", more),
        "sessions_per_s" => return w(1.0, "sessions/s", "", more),
        "tls_handshakes_per_s" => return w(1.0, "TLS handshakes/s", "", None),
        "error_rate" => return w(100.0, "%", "errors", less),
        "errors_total" => return w(1.0, "errors", "", less),
        "capacity_connections" => return w(1.0, "connections", "at capacity", more),
        "capacity_rate" => return w(1.0, "sessions/s", "sustained", more),
        "connections_peak" => return w(1.0, "connections", "at peak", None),
        "tcp_connected_peak" => return w(1.0, "TCP connections", "at peak", None),
        "server_rss_max_mb" => return w(1.0, "MB", "server memory at most", less),
        "server_fds_max" => return w(1.0, "descriptors", "in the server at most", None),
        "server_threads_max" => return w(1.0, "threads", "in the server at most", None),
        _ => {}
    }
    if let Some(rest) = metric.strip_suffix("_ms") {
        // latency_mean_ms, connect_p99_ms, tls_p50_ms, of_p99_ms.
        let (what, stat) = rest.rsplit_once('_').unwrap_or(("", rest));
        let noun = match what {
            "latency" => format!("{stat} latency"),
            "connect" => format!("{stat} connect time"),
            "tls" => format!("{stat} TLS handshake"),
            "of" => format!("{stat} latency of the SLO's transaction"),
            _ => rest.replace('_', " "),
        };
        return w(1.0, "ms", &noun, less);
    }
    for (suffix, unit) in [("_pct", "%"), ("_rps", "responses/s"), ("_per_s", "/s")] {
        if let Some(rest) = metric.strip_suffix(suffix) {
            return w(1.0, unit, &rest.replace('_', " "), None);
        }
    }
    w(1.0, "", &metric.replace('_', " "), None)
}

/// A configuration in words: "4 handlers" (a number first, "1 handler" in the singular),
/// "poller epoll" (a word after its factor), joined by ", "; "every run" without factors.
fn config_words(factors: &[(&str, &str)]) -> String {
    if factors.is_empty() {
        return "every run".to_string();
    }
    factors
        .iter()
        .map(|(f, l)| {
            let f = f.replace('_', " ");
            if l.starts_with(|c: char| c.is_ascii_digit()) {
                let f = match f.strip_suffix('s') {
                    Some(one) if *l == "1" && !one.is_empty() => one.to_string(),
                    _ => f,
                };
                format!("{l} {f}")
            } else {
                format!("{f} {l}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A ratio in two significant figures: "3.8", "1.1", "12", "1,500".
fn ratio_words(r: f64) -> String {
    if r < 10.0 {
        let t = format!("{r:.1}");
        t.strip_suffix(".0").map_or(t.clone(), str::to_string)
    } else {
        crate::numbers::thousands(r.round() as u64)
    }
}

// ---------------------------------------------------------------------------------------------
// Charts

/// A series name: the configuration, with " #N" for a repetition other than the first.
fn series_name(run: &RunKey) -> String {
    let mut s = run.config_label();
    if s.is_empty() {
        s = "run".to_string();
    }
    if run.repetition != 1 {
        let _ = write!(s, " #{}", run.repetition);
    }
    s
}

/// Distinct runs in order of first appearance.
fn runs_in_order<'a>(keys: impl Iterator<Item = &'a RunKey>) -> Vec<RunKey> {
    let mut out: Vec<RunKey> = Vec::new();
    for k in keys {
        if !out.contains(k) {
            out.push(k.clone());
        }
    }
    out
}

/// Per configuration, the run with the lowest repetition, in order of first appearance.
fn first_repetitions<'a>(keys: impl Iterator<Item = &'a RunKey>) -> Vec<RunKey> {
    let mut out: Vec<RunKey> = Vec::new();
    for k in keys {
        match out.iter_mut().find(|o| o.factors == k.factors) {
            Some(o) if k.repetition < o.repetition => *o = k.clone(),
            Some(_) => {}
            None => out.push(k.clone()),
        }
    }
    out
}

/// The p99 the search judged: the SLO transaction's when the file has it, else the requests'.
fn uses_of(probes: &[LabProbe]) -> bool {
    probes.iter().any(|p| p.of_p99_ms.is_some())
}

/// `capacity-latency` and `capacity-throughput` from the probes of a rate search.
pub fn rate_charts(probes: &[LabProbe]) -> Vec<Chart> {
    let of = uses_of(probes);
    let p99 = |p: &LabProbe| if of { p.of_p99_ms } else { p.latency_p99_ms };
    let runs = runs_in_order(probes.iter().map(|p| &p.run));
    let mut configs: Vec<&Vec<(String, String)>> = Vec::new();
    for r in &runs {
        if !configs.contains(&&r.factors) {
            configs.push(&r.factors);
        }
    }
    let make = |name: &str, title: &str, y_label: &str, f: &dyn Fn(&LabProbe) -> Option<f64>| {
        let mut c = Chart::new(name, title, "offered rate (sessions/s)", y_label);
        c.x_from_zero = true;
        c.wide_legend = true;
        for run in &runs {
            let mut points: Vec<(f64, f64)> = probes
                .iter()
                .filter(|p| &p.run == run)
                .filter_map(|p| Some((p.rate, f(p)?)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            c.series.push(Series::new(series_name(run), points));
            // Every repetition of a configuration in the configuration's colour.
            c.colours
                .push(configs.iter().position(|f| *f == &run.factors).unwrap_or(0));
        }
        let broken: Vec<(f64, f64)> = probes
            .iter()
            .filter(|p| !p.ok)
            .filter_map(|p| Some((p.rate, f(p)?)))
            .collect();
        if !broken.is_empty() {
            c.series.push(Series::new("broken probes", broken));
            c.dots = vec!["broken probes".to_string()];
        }
        if probes.is_empty() {
            c.note = Some("no probe recorded".to_string());
        }
        c
    };
    let (lat_title, lat_label) = if of {
        ("p99 of the SLO's transaction by offered rate", "p99 (ms)")
    } else {
        ("Request p99 by offered rate", "p99 (ms)")
    };
    vec![
        make("capacity-latency", lat_title, lat_label, &p99),
        make(
            "capacity-throughput",
            "Throughput by offered rate",
            "responses/s",
            &|p: &LabProbe| p.throughput_rps,
        ),
    ]
}

impl LabInterval {
    /// The interval's end, where the charts put it (as the run page does); its start in a
    /// file without `length_s`.
    fn t_end(&self) -> f64 {
        self.t_s + self.length_s.unwrap_or(0.0)
    }
}

/// `capacity-connections` and `capacity-p99` over time from the intervals, one series per
/// configuration (its first repetition). The x axis runs from 0 to the end of the charted
/// runs' last interval, whatever a series holds.
pub fn interval_charts(intervals: &[LabInterval]) -> Vec<Chart> {
    let runs = first_repetitions(intervals.iter().map(|i| &i.run));
    let span = intervals
        .iter()
        .filter(|i| runs.contains(&i.run))
        .map(LabInterval::t_end)
        .reduce(f64::max);
    let make = |name: &str, title: &str, y_label: &str, f: &dyn Fn(&LabInterval) -> Option<f64>| {
        let mut c = Chart::new(name, title, "seconds since the load started", y_label);
        c.x_from_zero = true;
        c.x_max = span;
        c.wide_legend = true;
        for run in &runs {
            let points = intervals
                .iter()
                .filter(|i| &i.run == run)
                .filter_map(|i| Some((i.t_end(), f(i)?)))
                .collect();
            c.series.push(Series::new(series_name(run), points));
        }
        if intervals.is_empty() {
            c.note = Some("no intervals recorded".to_string());
        }
        c
    };
    vec![
        make(
            "capacity-connections",
            "Connections open",
            "connections",
            &|i: &LabInterval| i.connections_open,
        ),
        make("capacity-p99", "Latency p99", "ms", &|i: &LabInterval| {
            // An interval without a response has no latency: a gap, not a dip to 0.
            match i.responses {
                Some(r) if r > 0.0 => i.latency_p99_us.map(|us| us / 1000.0),
                _ => None,
            }
        }),
    ]
}

/// The x of each sample of `run`: its time, with a search's probes laid end to end; and
/// whether it is the first sample of its probe (whose CPU is 0 by construction).
fn sample_times(samples: &[&LabSample]) -> Vec<(f64, bool)> {
    let mut out = Vec::with_capacity(samples.len());
    let mut offset = 0.0;
    let mut last_probe: Option<Option<u32>> = None;
    let mut probe_end: f64 = 0.0;
    for s in samples {
        let first = last_probe != Some(s.probe);
        if first && last_probe.is_some() {
            offset += probe_end;
            probe_end = 0.0;
        }
        last_probe = Some(s.probe);
        probe_end = probe_end.max(s.t_s);
        out.push((offset + s.t_s, first));
    }
    out
}

/// `server-cpu-sys`, `server-cpu-user`, `server-rss`, `server-fds` and (when the samples read
/// it) `server-accept-queue` over time, one series per configuration (its first repetition).
pub fn server_charts(samples: &[LabSample]) -> Vec<Chart> {
    let runs = first_repetitions(samples.iter().map(|s| &s.run));
    let searched = samples.iter().any(|s| s.probe.is_some());
    let x_label = if searched {
        "seconds under load (probes end to end)"
    } else {
        "seconds since the load started"
    };
    let make = |name: &str,
                title: &str,
                y_label: &str,
                cpu: bool,
                f: &dyn Fn(&LabSample) -> Option<f64>| {
        let mut c = Chart::new(name, title, x_label, y_label);
        c.x_from_zero = true;
        c.wide_legend = true;
        for run in &runs {
            let of_run: Vec<&LabSample> = samples.iter().filter(|s| &s.run == run).collect();
            let points = of_run
                .iter()
                .zip(sample_times(&of_run))
                .filter(|(_, (_, first))| !(cpu && *first))
                .filter_map(|(s, (x, _))| Some((x, f(s)?)))
                .collect();
            let mut name = series_name(run);
            if of_run.iter().any(|s| !s.run_ok) {
                name.push_str(" (failed)");
            }
            c.series.push(Series::new(name, points));
        }
        if samples.is_empty() {
            c.note = Some("no server samples recorded".to_string());
        }
        c
    };
    let mut charts = vec![
        make(
            "server-cpu-sys",
            "Server system CPU",
            "% of one core",
            true,
            &|s: &LabSample| s.cpu_sys_pct,
        ),
        make(
            "server-cpu-user",
            "Server user CPU",
            "% of one core",
            true,
            &|s: &LabSample| s.cpu_user_pct,
        ),
        make(
            "server-rss",
            "Server memory (RSS)",
            "MB",
            false,
            &|s: &LabSample| s.rss_bytes.map(|b| b / 1e6),
        ),
        make(
            "server-fds",
            "Server open file descriptors",
            "descriptors",
            false,
            &|s: &LabSample| s.fds,
        ),
    ];
    // A lab whose samples read the accept queue (the server on loopback, a recent headroom).
    if samples.iter().any(|s| s.accept_queue.is_some()) {
        charts.push(make(
            "server-accept-queue",
            "Connections waiting in the server's accept queue",
            "connections",
            false,
            &|s: &LabSample| s.accept_queue,
        ));
    }
    charts
}

// ---------------------------------------------------------------------------------------------
// The page

/// The distinct configurations the lab ran, from whichever per-run file it wrote.
fn configurations(data: &LabData) -> Option<usize> {
    let keys: Vec<&Vec<(String, String)>> = if let Some(p) = &data.probes {
        p.iter().map(|p| &p.run.factors).collect()
    } else if let Some(i) = &data.intervals {
        i.iter().map(|i| &i.run.factors).collect()
    } else if let Some(s) = &data.samples {
        s.iter().map(|s| &s.run.factors).collect()
    } else {
        return None;
    };
    let mut seen: Vec<&Vec<(String, String)>> = Vec::new();
    for k in keys {
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    Some(seen.len())
}

/// Runs and failed runs, counted from the first table (every run is in each table's cells).
fn run_counts(data: &LabData) -> (Option<usize>, usize) {
    let Some(t) = data.tables.first() else {
        return (None, 0);
    };
    let runs = t.runs.as_ref().map(|r| r.iter().flatten().sum());
    (runs, t.failed.iter().flatten().sum())
}

/// The lab's verdict: the first table's finding, and how many runs failed.
fn verdict(data: &LabData) -> (Tone, String, Vec<String>) {
    let (runs, failed) = run_counts(data);
    let answer = match data.tables.iter().find(|t| t.texts.is_empty()) {
        Some(t) => t.finding(),
        None => "The lab wrote no table".to_string(),
    };
    let tone = match runs {
        _ if data.tables.is_empty() => Tone::Bad,
        Some(r) if failed >= r && r > 0 => Tone::Bad,
        _ if failed > 0 => Tone::Warn,
        _ => Tone::Good,
    };
    let mut line = String::new();
    if let Some(r) = runs {
        let _ = write!(line, "{r} run(s)");
    }
    if let Some(c) = configurations(data) {
        let _ = write!(
            line,
            "{}{c} configuration(s)",
            if line.is_empty() { "" } else { " of " }
        );
    }
    if !line.is_empty() && failed == 0 {
        line.push_str(", none failed");
    } else if !line.is_empty() {
        let _ = write!(line, ", {failed} failed (see the tables)");
    }
    let mut details = Vec::new();
    if !line.is_empty() {
        details.push(escape(&line));
    }
    // Why each configuration broke (its table of verdicts), at most 12 named here.
    if let Some(t) = data.tables.iter().find(|t| !t.texts.is_empty()) {
        let mut said = Vec::new();
        for i in 0..t.rows.len() {
            for j in 0..t.cols.len() {
                if let Some(v) = &t.texts[i][j] {
                    let at = config_words(&t.cell_factors(i, j));
                    said.push(format!("{}: <strong>{}</strong>", escape(&at), escape(v)));
                }
            }
        }
        let more = said.len().saturating_sub(12);
        said.truncate(12);
        if !said.is_empty() {
            details.push(format!(
                "<span data-why=\"lab\">Why it broke (docs/verdicts.md): {}{}</span>",
                said.join("; "),
                if more > 0 {
                    format!("; and {more} more in the table of verdicts")
                } else {
                    String::new()
                }
            ));
        }
    }
    (tone, answer, details)
}

/// The lab's headline tiles: its size, its failures, and the first table's range.
fn tiles(data: &LabData) -> Vec<Tile> {
    let (runs, failed) = run_counts(data);
    let missing = || html::MISSING.to_string();
    let mut tiles = vec![
        Tile::new(
            "configurations",
            "configurations",
            configurations(data).map_or_else(missing, |c| c.to_string()),
            "",
        ),
        Tile::new(
            "runs",
            "runs",
            runs.map_or_else(missing, |r| r.to_string()),
            "",
        ),
        Tile::new("failed", "failed runs", failed.to_string(), ""),
    ];
    if let Some(t) = data.tables.iter().find(|t| t.texts.is_empty()) {
        let values = t.values();
        let hi = values.iter().max_by(|a, b| a.2.total_cmp(&b.2));
        let lo = values.iter().min_by(|a, b| a.2.total_cmp(&b.2));
        // In words, as the finding: "highest mean latency 14.5 ms", "1 handler, 10 c".
        let words = metric_words(&t.metric);
        let what = if words.noun.is_empty() {
            String::new()
        } else {
            format!(" {}", words.noun)
        };
        let name = |i: usize, j: usize| config_words(&t.cell_factors(i, j));
        let mut high = Tile::new(
            "highest",
            &format!("highest{what}"),
            hi.map_or_else(missing, |h| fmt_value(h.2 * words.scale)),
            &words.unit,
        );
        high.detail = hi.map(|h| name(h.0, h.1));
        let mut low = Tile::new(
            "lowest",
            &format!("lowest{what}"),
            lo.map_or_else(missing, |l| fmt_value(l.2 * words.scale)),
            &words.unit,
        );
        low.detail = lo.map(|l| name(l.0, l.1));
        let spread = match (hi, lo) {
            (Some(h), Some(l)) if l.2 > 0.0 => format!("{}×", fmt_value(h.2 / l.2)),
            _ => missing(),
        };
        let mut apart = Tile::new("spread", "highest / lowest", spread, "");
        apart.detail = Some(t.title.clone());
        tiles.extend([high, low, apart]);
    }
    tiles
}

/// How to read each chart, by `data-chart` name.
fn how_to_read(name: &str, data: &LabData, of: bool) -> String {
    let searched = data
        .samples
        .as_deref()
        .is_some_and(|s| s.iter().any(|x| x.probe.is_some()));
    let probes_note = if searched {
        " A search's probes are laid end to end (the pauses and warm-up between them left out)."
    } else {
        ""
    };
    match name {
        "capacity-latency" => format!(
            "Each line is one run's search (the configuration; #N for repetition N, in the same \
             colour): the p99 {} \
             measured by each probe, at the rate it offered. A ring marks a probe that broke the \
             SLO; the capacity is the highest rate that held, below the first ring.",
            if of {
                "of the SLO's transaction (of_p99_ms)"
            } else {
                "of the requests"
            }
        ),
        "capacity-throughput" => "Responses per second each probe got at the rate it offered: a \
             server that keeps up climbs in step with the rate; where a line flattens or falls \
             the server is saturated. Rings mark probes that broke the SLO."
            .to_string(),
        "capacity-connections" => "Connections open at the end of each second of the load, one \
             line per configuration (its first repetition). Slow clients arrive at a steady rate \
             and stay: a line climbs while the server accepts them, and stops climbing or falls \
             where it breaks; capacity_connections is the peak before the first interval with \
             errors."
            .to_string(),
        "capacity-p99" => "The p99 response time of each second of the load, in ms, one line per \
             configuration (its first repetition); seconds without a response leave a gap."
            .to_string(),
        "server-cpu-sys" => format!(
            "Kernel time of the server's process tree in percent of one core (200 = two cores \
             busy), per sample, one line per configuration (its first repetition); the first \
             sample of a load, always 0, is left out. Time in the kernel is where poll(), \
             epoll_wait() and the socket calls are paid.{probes_note}"
        ),
        "server-cpu-user" => format!(
            "User time of the server's process tree in percent of one core, per sample, one line \
             per configuration (its first repetition); the first sample of a load is left out.\
             {probes_note}"
        ),
        "server-rss" => format!(
            "Resident memory of the server's process tree in MB (10^6 bytes), one line per \
             configuration (its first repetition): a line that keeps rising under a steady load \
             is memory held per connection or leaked.{probes_note}"
        ),
        "server-fds" => format!(
            "Open file descriptors of the server's process tree: about one per connection, so \
             it follows the connections the server holds.{probes_note}"
        ),
        "server-accept-queue" => format!(
            "Connections the kernel completed that the server had not accepted yet, at each \
             sample (its listener on the load's port): a queue that stays full while the CPU \
             idles is a server whose workers are all taken (docs/verdicts.md).{probes_note}"
        ),
        _ => String::new(),
    }
}

fn figure(out: &mut String, svg: &str, how: &str) {
    let _ = write!(
        out,
        "<figure>\n{svg}<figcaption>{}</figcaption>\n</figure>\n",
        escape(how)
    );
}

/// The whole page for a lab.
pub fn page(data: &LabData) -> String {
    let factors: Vec<String> = {
        let mut f: Vec<String> = Vec::new();
        for t in &data.tables {
            for name in t.row_factors.iter().chain(&t.col_factors) {
                if !f.contains(name) {
                    f.push(name.clone());
                }
            }
        }
        f
    };
    let runs: Option<usize> = data
        .tables
        .first()
        .and_then(|t| t.runs.as_ref())
        .map(|r| r.iter().flatten().sum());
    let mut sub = format!("lab output <code>{}</code>", escape(&data.name));
    if !factors.is_empty() {
        let _ = write!(sub, " &middot; factors {}", escape(&factors.join(", ")));
    }
    if let Some(n) = runs {
        let _ = write!(sub, " &middot; {n} run(s)");
    }
    if data.probes.is_some() {
        sub.push_str(" &middot; max-rate search");
    }
    // The load in words: one shared by every run, or how many differ (a factor of the load).
    match data.loads.as_slice() {
        [] => {}
        [one] => {
            let _ = write!(sub, " &middot; {}", escape(one));
        }
        many => {
            let _ = write!(
                sub,
                " &middot; {} loads: {}",
                many.len(),
                escape(&many.join("; "))
            );
        }
    }
    let title = if data.name.is_empty() {
        "headroom lab report".to_string()
    } else {
        format!("headroom lab report – {}", data.name)
    };
    let mut out = open_page(&title, "headroom lab report", &sub);
    for note in &data.notes {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(note));
    }

    let (tone, answer, details) = verdict(data);
    html::verdict(&mut out, tone, &answer, &details);
    html::tiles(&mut out, &tiles(data));

    // The answer first: each table's bar chart under its one-line finding, then the capacity
    // curves, two by two.
    let of = data.probes.as_deref().is_some_and(uses_of);
    let capacity: Vec<Chart> = match (&data.probes, &data.intervals) {
        (Some(p), _) => rate_charts(p),
        (None, Some(i)) => interval_charts(i),
        (None, None) => Vec::new(),
    };
    out.push_str("<div class=\"key\">\n");
    for (k, t) in data.tables.iter().enumerate() {
        if !t.texts.is_empty() {
            continue; // words, no bars: its table is below, and the verdict box names them
        }
        let _ = write!(
            out,
            "<figure>\n<h3>{}</h3>\n<p class=\"finding\">{}</p>\n{}</figure>\n",
            escape(&t.title),
            escape(&t.finding()),
            t.bars(&format!("bars-{k}")).render()
        );
    }
    for c in &capacity {
        figure(&mut out, &c.render(), &how_to_read(&c.name, data, of));
    }
    out.push_str("</div>\n");

    out.push_str("<h2>Tables</h2>\n");
    if data.tables.is_empty() {
        out.push_str("<p>The lab wrote no table.</p>\n");
    }
    for t in &data.tables {
        let _ = writeln!(out, "<h3>{}</h3>", escape(&t.title));
        out.push_str("<div class=\"wide\">");
        out.push_str(&t.html());
        out.push_str("</div>\n");
        if !t.texts.is_empty() {
            out.push_str(
                "<p class=\"how\">Each configuration's verdict: why its server stopped scaling, \
                 from the run's figures and the server's samples (docs/verdicts.md); the \
                 repetitions' verdicts when they differ. A run's summary.json says it in a \
                 sentence with its figures.</p>\n",
            );
            continue;
        }
        let groups = if t.row_factors.is_empty() {
            "one group".to_string()
        } else {
            format!("a group per {}", t.row_factors.join(" · "))
        };
        let colours = if t.col_factors.is_empty() {
            String::new()
        } else {
            format!(", a colour per {}", t.col_factors.join(", "))
        };
        let _ = writeln!(
            out,
            "<p class=\"how\">Its bar chart, at the top: the mean of {} over each cell's good \
             runs ({groups}{colours}); whiskers: the 95% confidence interval of the mean \
             (Student t; none with a single run), cut at the top of the chart when it reaches \
             past twice the tallest bar. An empty slot has no good run. Hover a bar for its \
             value.</p>",
            escape(&t.metric)
        );
    }
    if let Some(s) = &data.samples {
        out.push_str("<h2>Server</h2>\n");
        for c in server_charts(s) {
            figure(&mut out, &c.render(), &how_to_read(&c.name, data, of));
        }
    }
    close_page(&mut out, &data.dir.display().to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLES_JSON: &str = r#"[
  {
    "title": "throughput <rps>",
    "metric": "throughput_rps",
    "row_factors": ["poller"],
    "col_factors": ["sndbuf"],
    "rows": [["poll"], ["epoll"]],
    "cols": [["8k"], ["6m"]],
    "cells": [
      [{"mean": 1234.6, "ci95": 10.0, "n": 2}, {"mean": 1000.0, "ci95": null, "n": 1}],
      [null, {"mean": 2000.0, "ci95": 50.0, "n": 2}]
    ],
    "failed": [[0, 1], [2, 0]],
    "runs": [[2, 2], [2, 2]]
  }
]
"#;

    const SAMPLES: &str =
        "poller,sndbuf,repetition,probe,t_s,cpu_user_pct,cpu_sys_pct,rss_bytes,fds,threads,run_ok
poll,8k,1,,0.0,0,0,5000000,10,3,true
poll,8k,1,,1.0,1.5,60.0,6000000,200,3,true
poll,8k,1,,2.0,1.0,65.0,7000000,400,3,true
epoll,8k,1,,0.0,0,0,5000000,10,3,true
epoll,8k,1,,1.0,1.0,3.0,5500000,200,3,true
epoll,8k,2,,1.0,1.0,4.0,5500000,200,3,true
";

    const INTERVALS: &str = "poller,sndbuf,repetition,probe,t_s,responses,errors,latency_p99_us,connections_open,connections_peak,connect_timeouts,sessions_completed
poll,8k,1,,0.0,100,0,900,100,100,0,0
poll,8k,1,,1.0,0,0,0,200,200,0,0
epoll,8k,1,,0.0,100,0,500,100,100,0,0
";

    #[test]
    fn interval_charts_span_the_load_at_each_intervals_end() {
        // Issue 27: every connection open in the first second of a 5 s load.
        let mut csv = String::from("poller,repetition,probe,t_s,length_s,connections_open\n");
        for t in 0..5 {
            csv.push_str(&format!(
                "epoll,1,,{t}.0,1.0,{}\n",
                if t == 0 { "10" } else { "" }
            ));
        }
        let c = Csv::parse(&csv, Path::new("intervals.csv")).unwrap();
        let charts = interval_charts(&parse_intervals(&c).unwrap());
        let conns = &charts[0];
        assert_eq!(conns.name, "capacity-connections");
        assert_eq!(
            conns.series[0].points,
            [(1.0, 10.0)],
            "at the interval's end"
        );
        assert_eq!(
            conns.x_max,
            Some(5.0),
            "the axis runs to the last interval's end"
        );
        assert!(conns.render().contains("data-instant=\"poller=epoll\""));
        // A file without length_s (an older lab): intervals at their start.
        let c = Csv::parse(INTERVALS, Path::new("intervals.csv")).unwrap();
        let charts = interval_charts(&parse_intervals(&c).unwrap());
        assert_eq!(charts[0].series[0].points, [(0.0, 100.0), (1.0, 200.0)]);
        assert_eq!(charts[0].x_max, Some(1.0));
    }

    #[test]
    fn the_heading_names_the_runs_load_in_words() {
        let dir = fixture(&[("tables.json", TABLES_JSON)]);
        let summary = |users: u32| {
            format!(
                "{{\"load\":{{\"name\":\"closed\",\"users\":{users},\"per_user\":null,\
                 \"think\":null,\"ramp\":[{{\"duration_s\":2.0,\"users\":{users}}}]}}}}"
            )
        };
        for (run, users) in [("a_rep1", 8), ("a_rep2", 8), ("b_rep1", 8)] {
            let d = dir.path().join("runs").join(run);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("summary.json"), summary(users)).unwrap();
        }
        // A run directory without a summary (a killed run) is skipped.
        fs::create_dir_all(dir.path().join("runs/c_rep1")).unwrap();
        let html = render_lab(dir.path()).unwrap();
        assert!(
            html.contains(" &middot; 8 closed users ramped up over 2 s, back to back</p>"),
            "{html}"
        );
        let d = dir.path().join("runs/d_rep1");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("summary.json"), summary(16)).unwrap();
        let html = render_lab(dir.path()).unwrap();
        assert!(html.contains(
            " &middot; 2 loads: 8 closed users ramped up over 2 s, back to back; 16 closed users \
             ramped up over 2 s, back to back</p>"
        ));
    }

    /// A table of verdicts: named in the verdict box, shown as words in its table, no bars;
    /// a malformed one is refused naming the table.
    #[test]
    fn a_table_of_verdicts_says_why_at_the_top_and_draws_no_bars() {
        let verdicts = r#"{
    "title": "why it broke: each run's verdict (docs/verdicts.md)",
    "metric": "verdict",
    "row_factors": ["poller"],
    "col_factors": ["sndbuf"],
    "rows": [["poll"], ["epoll"]],
    "cols": [["8k"], ["6m"]],
    "cells": [[null, null], [null, null]],
    "failed": [[0, 1], [2, 0]],
    "runs": [[2, 2], [2, 2]],
    "texts": [["cpu_kernel", "cpu_kernel ×1"], [null, "descriptor_limit <x>"]]
  }"#;
        let json = TABLES_JSON.replacen("\n]\n", &format!(",\n  {verdicts}\n]\n"), 1);
        let dir = fixture(&[("tables.json", &json)]);
        let html = render_lab(dir.path()).unwrap();
        let top = &html[html.find("<section class=\"verdict").unwrap()..];
        let top = &top[..top.find("</section>").unwrap()];
        assert!(
            top.contains("poller poll, 8k sndbuf: <strong>cpu_kernel</strong>"),
            "{top}"
        );
        assert!(
            top.contains("poller epoll, 6m sndbuf: <strong>descriptor_limit &lt;x&gt;</strong>"),
            "{top}"
        );
        // The first numeric table still gives the answer; only it gets bars.
        assert!(top.contains("epoll"), "{top}");
        assert_eq!(
            html.matches("data-chart=\"bars-").count(),
            1,
            "one bar chart"
        );
        assert!(html.contains(
            "<td class=\"n failed\" style=\"color:#b00000\">cpu_kernel ×1 (1 failed)</td>"
        ));
        assert!(html.contains("<td class=\"n failed\" style=\"color:#b00000\">failed 2/2</td>"));
        // Texts that do not fit the table are refused.
        let bad = json.replace(r#"[null, "descriptor_limit <x>"]"#, r#"[null]"#);
        let dir = fixture(&[("tables.json", &bad)]);
        let e = render_lab(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("table 2: texts must be 2 rows x 2 columns"),
            "{e}"
        );
    }

    fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    /// The `<svg ...>...</svg>` whose data-chart is `name`.
    fn chart<'a>(html: &'a str, name: &str) -> &'a str {
        let start = html
            .find(&format!("data-chart=\"{name}\""))
            .unwrap_or_else(|| panic!("no chart {name}"));
        let start = html[..start].rfind("<svg").unwrap();
        let end = start + html[start..].find("</svg>").unwrap();
        &html[start..end]
    }

    #[test]
    fn a_full_lab_directory_renders_tables_bars_and_charts() {
        let dir = fixture(&[
            ("tables.json", TABLES_JSON),
            ("samples.csv", SAMPLES),
            ("intervals.csv", INTERVALS),
        ]);
        let html = render_lab(dir.path()).unwrap();
        // The table, escaped, with its cells like tables.md.
        assert!(html.contains("<h3>throughput &lt;rps&gt;</h3>"));
        assert!(html.contains("<th class=\"n\">sndbuf=8k</th>"));
        assert!(html.contains(">1,235 ± 10.0</td>"), "{html}");
        assert!(html.contains(">1,000 (1 failed)</td>"));
        assert!(html.contains("failed\" style=\"color:#b00000\">failed 2/2</td>"));
        assert!(html.contains(">2,000 ± 50.0</td>"));
        // Its bars: three cells have a value.
        let bars = chart(&html, "bars-0");
        assert_eq!(bars.matches("class=\"bar\"").count(), 3);
        assert!(bars.contains("data-series=\"sndbuf=8k\" data-points=\"1\""));
        assert!(bars.contains("data-series=\"sndbuf=6m\" data-points=\"2\""));
        assert_eq!(bars.matches("class=\"whisker\"").count(), 2);
        // Connections and p99 over time, one series per configuration (first repetition).
        let conns = chart(&html, "capacity-connections");
        assert!(conns.contains("data-series=\"poller=poll sndbuf=8k\" data-points=\"2\""));
        assert!(conns.contains("data-series=\"poller=epoll sndbuf=8k\" data-points=\"1\""));
        let p99 = chart(&html, "capacity-p99");
        assert!(
            p99.contains("data-series=\"poller=poll sndbuf=8k\" data-points=\"1\""),
            "the interval without a response is a gap"
        );
        // Server charts: the first sample of a load (CPU 0 by construction) is left out.
        let sys = chart(&html, "server-cpu-sys");
        assert!(sys.contains("data-series=\"poller=poll sndbuf=8k\" data-points=\"2\""));
        assert!(sys.contains("data-series=\"poller=epoll sndbuf=8k\" data-points=\"1\""));
        assert!(!sys.contains("#2"), "repetition 2 is not drawn");
        let rss = chart(&html, "server-rss");
        assert!(rss.contains("data-series=\"poller=poll sndbuf=8k\" data-points=\"3\""));
        assert!(chart(&html, "server-cpu-user").contains("data-points"));
        assert!(chart(&html, "server-fds").contains("data-points"));
        assert_eq!(html.matches("<figcaption>").count(), 2 + 4);
        // The answer first: the verdict (some runs failed), the tiles, the table's finding
        // above its bar chart, the capacity charts beside it; the pivot tables after.
        let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("no {needle}"));
        let finding = "poller epoll: 2,000 responses/s, 2× higher than poller poll \
                       (1,000 responses/s) (3 run(s) failed)";
        assert!(html.contains(&format!(
            "<section class=\"verdict warn\" data-verdict=\"warn\">\n<p class=\"answer\">⚠ \
             {finding}</p>\n<p class=\"detail\">8 run(s) of 2 configuration(s), 3 failed"
        )));
        assert!(html.contains(&format!("<p class=\"finding\">{finding}</p>")));
        for tile in [
            "configurations",
            "runs",
            "failed",
            "highest",
            "lowest",
            "spread",
        ] {
            assert!(at(&format!("data-tile=\"{tile}\"")) < at("data-chart=\"bars-0\""));
        }
        assert!(html.contains("<div class=\"k\">highest / lowest</div><div class=\"v\">2.00×"));
        assert!(at("data-chart=\"bars-0\"") < at("data-chart=\"capacity-connections\""));
        assert!(at("data-chart=\"capacity-p99\"") < at("<table class=\"pivot\">"));
        // Self-contained and deterministic.
        assert!(
            !html.contains("<script")
                && !html.contains("src=\"http")
                && !html.contains("href=\"http")
        );
        assert_eq!(html, render_lab(dir.path()).unwrap());
        assert!(!html.contains("class=\"note\">"), "no file is missing");
    }

    #[test]
    fn a_tables_finding_names_its_extremes_or_says_why_not() {
        let cell = |mean: f64, ci95: Option<f64>| Some(LabCell { mean, ci95, n: 2 });
        let mut t = LabTable {
            title: "t".into(),
            metric: "capacity_connections".into(),
            row_factors: vec!["poller".into()],
            col_factors: vec![],
            rows: vec![vec!["poll".into()], vec!["epoll".into()]],
            cols: vec![vec![]],
            cells: vec![
                vec![cell(3000.0, Some(100.0))],
                vec![cell(9000.0, Some(200.0))],
            ],
            failed: vec![vec![0], vec![0]],
            runs: Some(vec![vec![2], vec![2]]),
            texts: Vec::new(),
        };
        assert_eq!(
            t.finding(),
            "poller epoll: 9,000 connections at capacity, 3× higher than poller poll \
             (3,000 connections)"
        );
        // Intervals that overlap: said, since the difference may be noise.
        t.cells[0][0] = cell(8100.0, Some(800.0));
        assert!(t.finding().ends_with(
            "1.1× higher than poller poll (8,100 connections), within each other's 95% intervals"
        ));
        // Close figures: a percentage.
        t.cells[0][0] = cell(8700.0, None);
        assert!(
            t.finding()
                .starts_with("poller epoll: 9,000 connections at capacity, 3% higher than"),
            "{}",
            t.finding()
        );
        t.metric = "latency_p99_ms".into();
        assert!(
            t.finding()
                .starts_with("poller poll: 8,700 ms p99 latency, 3% lower than"),
            "{}",
            t.finding()
        );
        t.metric = "capacity_connections".into();
        // Equal values, one value, none.
        t.cells[0][0] = cell(9000.0, None);
        assert_eq!(
            t.finding(),
            "every configuration (2): 9,000 connections at capacity"
        );
        t.cells[0][0] = None;
        t.failed[0][0] = 2;
        assert_eq!(
            t.finding(),
            "poller epoll: 9,000 connections at capacity (2 run(s) failed)"
        );
        t.cells[1][0] = None;
        assert_eq!(
            t.finding(),
            "t: no configuration has a value (2 run(s) failed)"
        );
    }

    /// Issue 27: the verdict read `latency_mean_ms: highest 14.5 with handlers=1 c=10 n=10 ...
    /// 3.84× apart`. In words: the better cell first, only the factor that differs.
    #[test]
    fn findings_are_sentences_without_column_names() {
        let cell = |mean: f64| {
            Some(LabCell {
                mean,
                ci95: None,
                n: 1,
            })
        };
        let mut t = LabTable {
            title: "mean latency (ms)".into(),
            metric: "latency_mean_ms".into(),
            row_factors: vec!["handlers".into()],
            col_factors: vec!["c".into(), "n".into()],
            rows: vec![vec!["1".into()], vec!["4".into()]],
            cols: vec![vec!["10".into(), "10".into()]],
            cells: vec![vec![cell(14.5)], vec![cell(3.78)]],
            failed: vec![vec![0], vec![0]],
            runs: None,
            texts: Vec::new(),
        };
        let f = t.finding();
        assert_eq!(
            f,
            "4 handlers: 3.78 ms mean latency, 3.8× lower than 1 handler (14.5 ms)"
        );
        assert!(!f.contains('_') && !f.contains('='), "{f}");
        // More is better: the highest first.
        t.metric = "throughput_rps".into();
        assert_eq!(
            t.finding(),
            "1 handler: 14.5 responses/s, 3.8× higher than 4 handlers (3.78 responses/s)"
        );
        // A fraction in percent; a zero cannot be a ratio.
        t.metric = "error_rate".into();
        t.cells = vec![vec![cell(0.02)], vec![cell(0.0)]];
        assert_eq!(
            t.finding(),
            "4 handlers: 0% errors, against 2.00% with 1 handler"
        );
        // An unknown metric: its name in words, its unit from the suffix, the highest first.
        t.metric = "queue_depth_p99_ms".into();
        t.cells = vec![vec![cell(2.0)], vec![cell(30.0)]];
        assert_eq!(
            t.finding(),
            "1 handler: 2.00 ms queue depth p99, 15× lower than 4 handlers (30.0 ms)",
            "a time in ms: less is better"
        );
        t.metric = "widgets".into();
        assert_eq!(
            t.finding(),
            "4 handlers: 30.0 widgets, 15× higher than 1 handler (2.00)"
        );
        // Word levels follow their factor; several differing factors are all named.
        assert_eq!(
            config_words(&[("poller", "epoll"), ("sndbuf", "6m"), ("workers", "1")]),
            "poller epoll, 6m sndbuf, 1 worker"
        );
    }

    #[test]
    fn rate_curves_chart_against_the_offered_rate() {
        let curve = "pool,repetition,probe,rate,ok,throughput_rps,sessions_per_s,latency_mean_ms,latency_p99_ms,of_mean_ms,of_p99_ms,error_rate,server_cpu_user_pct,server_cpu_sys_pct,reason
1,1,1,8.0,true,4000,8,0.1,0.3,40,70,0,5,15,
1,1,2,16.0,true,8000,16,0.1,0.3,50,90,0,10,30,
1,1,3,32.0,false,9000,16,0.1,0.3,900,4000,0,10,30,\"'session' p99 4000 ms > 1000.0 ms, \"\"quoted\"\"\"
1,1,4,24.0,true,8500,16,0.1,0.3,60,300,0,10,30,
1,2,1,8.0,true,4000,8,0.1,0.3,40,70,0,5,15,
";
        let samples =
            "pool,repetition,probe,t_s,cpu_user_pct,cpu_sys_pct,rss_bytes,fds,threads,run_ok
1,1,1,0.0,0,0,1000000,10,2,true
1,1,1,1.0,5,10,1000000,10,2,true
1,1,2,0.0,0,0,1000000,10,2,true
1,1,2,1.0,6,11,1000000,10,2,true
";
        let dir = fixture(&[
            ("tables.json", TABLES_JSON),
            ("rate-curve.csv", curve),
            ("samples.csv", samples),
        ]);
        let html = render_lab(dir.path()).unwrap();
        let lat = chart(&html, "capacity-latency");
        assert!(
            lat.contains("data-series=\"pool=1\" data-points=\"4\""),
            "{lat}"
        );
        assert!(lat.contains("data-series=\"pool=1 #2\" data-points=\"1\""));
        assert!(lat.contains("<g data-series=\"broken probes\" data-points=\"1\""));
        // Sorted by rate: 8, 16, 24, 32 left to right, so x grows along the polyline.
        let pts = lat.split("data-series=\"pool=1\"").nth(1).unwrap();
        let pts = &pts[pts.find("points=\"").unwrap() + 8..];
        let xs: Vec<f64> = pts[..pts.find('"').unwrap()]
            .split(' ')
            .map(|p| p.split(',').next().unwrap().parse().unwrap())
            .collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
        assert!(chart(&html, "capacity-throughput").contains("data-points=\"4\""));
        assert!(!html.contains("data-chart=\"capacity-connections\""));
        // Probes end to end: 2 CPU points (each probe's first sample left out), x 1 and 2.
        let sys = chart(&html, "server-cpu-sys");
        assert!(
            sys.contains("data-series=\"pool=1\" data-points=\"2\""),
            "{sys}"
        );
        assert!(html.contains("probes end to end"));
    }

    #[test]
    fn missing_files_are_notes() {
        let dir = fixture(&[("tables.json", TABLES_JSON)]);
        let html = render_lab(dir.path()).unwrap();
        assert!(html.contains("samples.csv is missing"));
        assert!(html.contains("intervals.csv is missing"));
        assert!(html.contains("data-chart=\"bars-0\""));
        assert!(!html.contains("data-chart=\"server-cpu-sys\""));
        // No tables at all: not a lab.
        let empty = fixture(&[("samples.csv", SAMPLES)]);
        let e = render_lab(empty.path()).unwrap_err();
        assert!(matches!(e, ReportError::NotALab { .. }), "{e:?}");
    }

    #[test]
    fn tables_csv_stands_in_for_tables_json() {
        let csv = "# capacity, in connections
poller,workers,sndbuf,mean,ci95,n,failed
poll,1,8k,8984.6,584.2,2,0
poll,1,6m,9104,,1,1
epoll,1,8k,,,0,2
epoll,1,6m,9042,178,2,0
# p99
poller,mean,ci95,n,failed
poll,17.7,54.4,2,0
";
        let dir = fixture(&[("tables.csv", csv)]);
        let data = load_lab(dir.path()).unwrap();
        assert_eq!(data.tables.len(), 2);
        let t = &data.tables[0];
        assert_eq!(t.title, "capacity, in connections");
        assert_eq!(
            (t.row_factors.clone(), t.col_factors.clone()),
            (
                vec!["poller".to_string(), "workers".into()],
                vec!["sndbuf".to_string()]
            )
        );
        assert_eq!(t.cell_text(0, 0), "8,985 ± 584");
        assert_eq!(t.cell_text(0, 1), "9,104 (1 failed)");
        assert_eq!(t.cell_text(1, 0), "failed 2");
        assert!(data.notes[0].contains("tables.json is missing"));
        let html = page(&data);
        assert_eq!(chart(&html, "bars-0").matches("class=\"bar\"").count(), 3);
        assert_eq!(chart(&html, "bars-1").matches("class=\"bar\"").count(), 1);
    }

    #[test]
    fn bad_files_name_the_file_and_line() {
        let bad_csv = "poller,sndbuf,repetition,probe,t_s,cpu_user_pct,cpu_sys_pct,rss_bytes,fds,threads,run_ok
poll,8k,1,,0.0,0,0,5000000,10,3,true
poll,8k,1,,1.0,lots,60.0,6000000,200,3,true
";
        let dir = fixture(&[("tables.json", TABLES_JSON), ("samples.csv", bad_csv)]);
        let e = render_lab(dir.path()).unwrap_err();
        assert!(matches!(e, ReportError::Csv { line: 3, .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("samples.csv:3: column cpu_user_pct: 'lots' is not a number"),
            "{text}"
        );

        let short = "poller,sndbuf,repetition,probe,t_s\npoll,8k,1,,0.0\npoll,8k\n";
        let dir = fixture(&[("tables.json", TABLES_JSON), ("intervals.csv", short)]);
        let e = render_lab(dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("intervals.csv:3: 2 fields where the header has 5"),
            "{e}"
        );

        let dir = fixture(&[("tables.json", "[\n  {\"title\": \n")]);
        let e = render_lab(dir.path()).unwrap_err();
        assert!(matches!(e, ReportError::Json { line: 3, .. }), "{e:?}");
        assert!(e.to_string().contains("tables.json:3:"), "{e}");

        let dir = fixture(&[(
            "tables.json",
            r#"[{"rows": [["a"]], "cols": [["b"]], "cells": [[null, null]], "row_factors": [], "col_factors": []}]"#,
        )]);
        let e = render_lab(dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("table 1: cells, failed and runs must be 1 rows x 1 columns"),
            "{e}"
        );

        let dir = fixture(&[(
            "tables.csv",
            "# t\npoller,mean,ci95,n,failed\npoll,x,,1,0\n",
        )]);
        let e = render_lab(dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("tables.csv:3: column mean: 'x' is not a number"),
            "{e}"
        );
    }

    #[test]
    fn names_and_levels_are_escaped() {
        let json = TABLES_JSON.replace("\"poll\"", "\"<poll&>\"");
        let samples = SAMPLES.replace("\npoll,8k", "\n\"<b>,x\",8k");
        let dir = fixture(&[("tables.json", &json), ("samples.csv", &samples)]);
        let html = render_lab(dir.path()).unwrap();
        assert!(html.contains("<td>&lt;poll&amp;&gt;</td>"));
        assert!(html.contains("data-series=\"poller=&lt;b&gt;,x sndbuf=8k\""));
        assert!(!html.contains("<b>") && !html.contains("<poll"));
    }

    #[test]
    fn values_format_like_tables_md() {
        assert_eq!(fmt_value(-1234567.0), "-1,234,567");
        assert_eq!(fmt_value(3.2e20), "3.20e20");
        for (x, want) in [
            (12345.0, "12,345"),
            (99.96, "100"),
            (12.345, "12.3"),
            (0.01234, "0.0123"),
            (3.0, "3.00"),
            (0.0, "0"),
        ] {
            assert_eq!(fmt_value(x), want);
        }
    }
}
