//! `headroom lab EXPERIMENT.yaml`: sweep server configurations, load and sample each, store every
//! run, print the tables (see docs/lab.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::args::UsageError;

const LAB_LONG: &str = "\
Run an experiment: for each configuration of the factors (full factorial, or the listed
combinations) and each repetition, start the server from its command template, wait until it is
ready, warm up, load it with the scenario while sampling the server's process tree (CPU user and
system, memory, threads, descriptors), check it survived, stop it, and store the run in
OUTPUT/lab.sqlite. Then print the tables (mean ± 95% CI over repetitions) and write them to
OUTPUT/tables.md, tables.csv and tables.json; every load interval goes to OUTPUT/intervals.csv
and every server sample to OUTPUT/samples.csv. Last, the lab's HTML report (each table as a
table and a bar chart with 95% CIs, the capacity curves, the server's CPU and memory over time;
inline SVG, no network) goes to OUTPUT/report.html, also when some runs failed; --no-report
skips it, and `headroom report OUTPUT` writes it again.

With `capacity: {rate: ...}` each run is a search for the max sustainable rate instead: sessions
arrive at a rate that doubles from `from` while the SLO (p99, mean, error rate) holds, then
bisects to the highest rate that holds it. The figure is `capacity_rate`; every probe (the
curve that shows it) goes to OUTPUT/rate-curve.csv and to the progress lines.

A lab started again skips the runs already stored: an interrupted lab resumes where it stopped.
A server that fails to start, never becomes ready or dies mid-run is reported with the tail of
its output, stored as a failed run, and the lab goes on.

Examples:
  headroom lab experiments/rudy.yaml --quick
  headroom lab experiments/kernel-poll.yaml --output runs/kp

Exit codes: 0 the lab ran (failed configurations are results, shown in the tables); 1 it could
not run (bad scenario, store error); 2 bad command line or experiment file; 130 interrupted.";

#[derive(Args, Debug)]
#[command(long_about = LAB_LONG)]
pub struct LabArgs {
    /// The experiment file.
    pub experiment: PathBuf,
    /// Output directory (default: the file's `output`, else lab-runs/NAME).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// The short variant from the file's `quick:` section (default output: OUTPUT-quick).
    #[arg(long)]
    pub quick: bool,
    /// Forget this experiment's stored runs and start over.
    #[arg(long)]
    pub fresh: bool,
    /// No progress lines.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Do not write OUTPUT/report.html.
    #[arg(long)]
    pub no_report: bool,
}

pub fn cmd_lab(
    a: &LabArgs,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<ExitCode> {
    let loaded = headroom_lab::experiment::load(&a.experiment, a.quick).map_err(UsageError)?;
    let opts = headroom_lab::runner::LabOptions {
        output: a.output.clone(),
        fresh: a.fresh,
        headroom_bin: std::env::current_exe()?,
        progress: !a.quiet,
    };
    if !a.quiet {
        eprintln!(
            "headroom lab: {} — {} configuration(s) x {} repetition(s)",
            loaded.exp.name,
            loaded.configurations.len(),
            loaded.exp.repeat
        );
    }
    let out = headroom_lab::runner::run(&loaded, &opts, stop).map_err(|e| anyhow::anyhow!(e))?;
    for t in &out.tables {
        println!("{}", t.text());
    }
    if !out.curves.is_empty() {
        let of = loaded
            .rate_search
            .as_ref()
            .and_then(|r| r.slo.of.as_deref())
            .map(|n| format!("'{n}'"))
            .unwrap_or_else(|| "request".into());
        println!("rate curves (probed rate: mean {of} latency, or broke)");
        for c in &out.curves {
            println!("  {c}");
        }
        println!();
    }
    println!(
        "{} run(s) now, {} found stored, {} failed; results in {}",
        out.ran,
        out.skipped,
        out.failed,
        out.output.display()
    );
    if out.interrupted {
        eprintln!("headroom lab: interrupted; run the same command again to resume");
        return Ok(ExitCode::from(130));
    }
    if !a.no_report {
        // The results are stored and written already: a report that fails is a warning.
        let path = out.output.join("report.html");
        match headroom_report::render_lab(&out.output)
            .map_err(|e| e.to_string())
            .and_then(|html| std::fs::write(&path, html).map_err(|e| e.to_string()))
        {
            Ok(()) => println!("  Report       {}", path.display()),
            Err(e) => eprintln!(
                "headroom lab: warning: no report written to {}: {e}",
                path.display()
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}
