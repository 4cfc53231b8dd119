//! `headroom report RUN_DIR`: one self-contained HTML page (inline SVG charts, no network) from a
//! run directory, written into it as `report.html` (see docs/report.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::parse::UsageError;

pub const REPORT_LONG: &str = "\
Write a self-contained HTML report (inline SVG charts, no script, no network: it can be mailed or
attached to a ticket).

  One run directory (made by `headroom run --out DIR` or `headroom demo`): users and connections,
  throughput, latency percentiles, errors per second by kind and connect time over time, the full
  latency percentile distribution (from latency.hlog), settings, environment and figures, and
  per-request and per-transaction tables for scenarios. `run --out` writes it by itself at the end.

  A lab's output directory (made by `headroom lab`): the pivot tables, a bar chart per table with
  95% confidence whiskers, each configuration's capacity curve and the server's CPU and memory
  over time. `lab` writes it by itself at the end.

  A set of repeats (made by `headroom run --repeat N --out DIR`): the spread of the repeats, each
  figure's mean and 95% interval over them, and every chart with the repeats overlaid. `run`
  writes it by itself at the end.

  Several run directories: a comparison. Every chart with the runs overlaid on the same axes, and
  the figures side by side with ratios against the first run (the baseline). Each run's
  throughput and p99 get a 95% interval from its per-interval values (autocorrelation allowed
  for); when the intervals overlap the verdict says within noise instead of naming a winner.

One directory's page goes into it as report.html; a comparison goes beside the first directory
as compare-A-vs-B.html (never over a run's own report); -o chooses another file.

Examples:
  headroom run http://127.0.0.1:8080/ -d 30s --out runs/a      # writes runs/a/report.html
  headroom report runs/a -o /tmp/a.html
  headroom report runs/a runs/b                                # writes runs/compare-a-vs-b.html
  headroom report runs/a runs/b runs/c -o compare.html         # b and c against a
  headroom report headroom-runs/lab-kernel-poll

Exit codes: 0 written; 1 a directory could not be read (the message names file:line:column);
2 bad command line (no such directory, a lab or a set of repeats given to a comparison).";

#[derive(Args, Debug)]
// The text is given on the subcommand (args.rs): a variant's doc comment would replace it here.
pub struct ReportArgs {
    /// A run directory, a lab's output directory, or several run directories to compare (the
    /// first is the baseline).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where to write the page (default: DIR/report.html; a comparison:
    /// compare-A-vs-B.html beside the first directory).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

pub fn cmd_report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    for dir in &a.dirs {
        if !dir.is_dir() {
            return Err(UsageError(format!("{} is not a directory", dir.display())).into());
        }
    }
    for dir in &a.dirs {
        // A killed run's reserved space for summary.json (issue 26): not left behind.
        headroom_run::rundir::clear_stale_reserve(dir);
    }
    let dir = &a.dirs[0];
    let html = if a.dirs.len() > 1 {
        if let Some(lab) = a.dirs.iter().find(|d| headroom_report::is_lab_dir(d)) {
            return Err(UsageError(format!(
                "{} is a lab's output: compare run directories (a lab's report compares its \
                 configurations already)",
                lab.display()
            ))
            .into());
        }
        if let Some(set) = a.dirs.iter().find(|d| headroom_report::is_repeats_dir(d)) {
            return Err(UsageError(format!(
                "{} is a set of repeats (run --repeat): its report.html gives their spread; \
                 compare single runs, such as {}",
                set.display(),
                set.join("1").display()
            ))
            .into());
        }
        headroom_report::render_compare(&a.dirs)
    } else if headroom_report::is_lab_dir(dir) {
        headroom_report::render_lab(dir)
    } else if headroom_report::is_repeats_dir(dir) {
        headroom_report::render_repeats(dir)
    } else {
        headroom_report::render_run(dir)
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let out = match &a.output {
        Some(o) => o.clone(),
        None if a.dirs.len() > 1 => compare_path(&a.dirs),
        None => dir.join("report.html"),
    };
    std::fs::write(&out, html)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
    outln!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// Where a comparison goes without -o: beside the first directory, named after the runs
/// (`runs/a runs/b` -> `runs/compare-a-vs-b.html`; past three runs, `...-and-N-more`), so it
/// never replaces a run's own report.html.
fn compare_path(dirs: &[PathBuf]) -> PathBuf {
    let name = |d: &PathBuf| -> String {
        let n = std::fs::canonicalize(d)
            .ok()
            .and_then(|c| c.file_name().map(|f| f.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".into());
        n.chars()
            .map(|c| {
                if c.is_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect()
    };
    let mut file = format!(
        "compare-{}",
        dirs.iter()
            .take(3)
            .map(name)
            .collect::<Vec<_>>()
            .join("-vs-")
    );
    if dirs.len() > 3 {
        file.push_str(&format!("-and-{}-more", dirs.len() - 3));
    }
    file.push_str(".html");
    let first = std::fs::canonicalize(&dirs[0]).unwrap_or_else(|_| dirs[0].clone());
    first
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(file)
}
