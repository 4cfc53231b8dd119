//! The comparison of several run directories: every chart with the runs overlaid on the same
//! axes, and a table of figures with ratios against the first run.
//!
//! Each run is named by a label: its directory's file name (`runs/a` is `a`), qualified by the
//! parent directory when two are equal (`x/run`, `y/run`), and numbered when that is not enough
//! (`a`, `a (2)`). The charts are the single-run charts of [`charts::all`] for every run, with
//! one series per run on each (the most telling one, see [`pick`]) named `LABEL: SERIES`: run
//! i is drawn in colour i of [`PALETTE`] on every chart, and the runs table shows the colours.
//! Time axes are each run's time since its own start. A note of every run's chart (`no
//! errors`) stays in the plot; a note of some runs only goes under the chart, labelled.
//!
//! The figures table has one row per figure and one column per run, and for every run after the
//! first its ratio to the first (`2.00×`; `–` when either value is missing or the first is 0).
//! The settings table puts the runs' settings side by side and marks the cells that differ
//! from the first run (class `diff`; the start time is never marked, the duration only when it
//! differs by more than 1%, a missing value never).
//!
//! A run without summary.json (killed) is compared from its intervals
//! ([`Summary::from_intervals`]): counters and throughput are there, latency figures are "–".

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::charts;
use crate::data::{load_run, RunData, Summary};
use crate::html::{self, measured, Tile, Tone, MISSING};
use crate::noise::{self, Spread};
use crate::svg::{escape, Chart, Series, PALETTE};
use crate::ReportError;

/// Styles of the comparison page on top of the report's own.
const STYLE: &str = "<style>\n\
td.diff{background:#fff1c2;font-weight:600}\n\
td.ratio{color:#555}\n\
th.run{white-space:nowrap}\n\
figcaption{color:#666;font-size:0.9em}\n\
span.swatch{display:inline-block;width:1.8em;height:0.4em;margin-right:0.5em;vertical-align:middle}\n\
</style>\n";

/// Reads the run directories and renders their comparison; the first is the baseline. The
/// first directory that cannot be read gives its error (an empty list: `NotARun` of "").
pub fn render_compare(dirs: &[PathBuf]) -> Result<String, ReportError> {
    if dirs.is_empty() {
        return Err(ReportError::NotARun {
            dir: PathBuf::new(),
        });
    }
    let runs = dirs
        .iter()
        .map(|d| load_run(d))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(render_runs(&run_labels(dirs), &runs))
}

/// One label per directory, unique: the directory's file name; names that occur more than once
/// are qualified by their parent directory's name (`x/run`), and what is still equal gets a
/// number from the second occurrence on (`a (2)`).
pub fn run_labels(dirs: &[PathBuf]) -> Vec<String> {
    let base: Vec<String> = dirs.iter().map(|d| dir_name(d)).collect();
    let mut labels: Vec<String> = base
        .iter()
        .zip(dirs)
        .map(|(b, d)| {
            if base.iter().filter(|x| *x == b).count() > 1 {
                match parent_name(d) {
                    Some(p) => format!("{p}/{b}"),
                    None => b.clone(),
                }
            } else {
                b.clone()
            }
        })
        .collect();
    for i in 1..labels.len() {
        if labels[..i].contains(&labels[i]) {
            let stem = labels[i].clone();
            let mut k = 2;
            loop {
                let candidate = format!("{stem} ({k})");
                if !labels.contains(&candidate) {
                    labels[i] = candidate;
                    break;
                }
                k += 1;
            }
        }
    }
    labels
}

/// The last component of `dir` (of its canonical form for `.` and the like).
fn dir_name(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .or_else(|| {
            std::fs::canonicalize(dir)
                .ok()
                .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_else(|| dir.display().to_string());
    if name.is_empty() {
        "run".to_string()
    } else {
        name
    }
}

/// The file name of the directory holding `dir`.
fn parent_name(dir: &Path) -> Option<String> {
    let canonical = std::fs::canonicalize(dir).ok();
    let path = canonical.as_deref().unwrap_or(dir);
    path.parent()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// The comparison page of loaded runs, `labels[i]` naming `runs[i]`; the first is the baseline.
pub fn render_runs(labels: &[String], runs: &[RunData]) -> String {
    let summaries: Vec<Summary> = runs
        .iter()
        .map(|r| {
            r.summary
                .clone()
                .unwrap_or_else(|| Summary::from_intervals(&r.intervals))
        })
        .collect();
    let title = format!("headroom comparison – {}", labels.join(", "));
    let sub = format!(
        "{} runs &middot; baseline <strong>{}</strong>",
        runs.len(),
        escape(labels.first().map_or("", String::as_str))
    );
    let mut out = html::open_page(&title, "headroom comparison", &sub);
    out.push_str(STYLE);
    for ((label, run), s) in labels.iter().zip(runs).zip(&summaries) {
        for note in &run.notes {
            let _ = writeln!(
                out,
                "<p class=\"note\">{}: {}</p>",
                escape(label),
                escape(note)
            );
        }
        if s.interrupted == Some(true) {
            let _ = writeln!(
                out,
                "<p class=\"note\">{}: the run was interrupted (Ctrl-C).</p>",
                escape(label)
            );
        }
    }

    let noise: Vec<RunNoise> = runs
        .iter()
        .zip(&summaries)
        .map(|(r, s)| RunNoise::of_run(r, s))
        .collect();
    let (tone, answer, details) = verdict(labels, &summaries, &noise);
    html::verdict(&mut out, tone, &answer, &details);
    html::tiles(&mut out, &tiles(labels, &summaries));

    // overlay_charts follows charts::all, whose first four are the key charts.
    let overlays = overlay_charts(labels, runs);
    let key = 4.min(overlays.len());
    out.push_str("<div class=\"key\">\n");
    for o in &overlays[..key] {
        figure(&mut out, o);
    }
    out.push_str("</div>\n");

    runs_table(&mut out, labels, runs);
    settings_table(&mut out, labels, &summaries);
    figures_table(&mut out, labels, &summaries, &noise);

    out.push_str("<h2>More charts</h2>\n");
    for o in &overlays[key..] {
        figure(&mut out, o);
    }

    let dirs: Vec<String> = runs.iter().map(|r| r.dir.display().to_string()).collect();
    html::close_page(&mut out, &dirs.join(" · "));
    out
}

/// Each run's throughput and p99 with their 95% intervals (see [`noise`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunNoise {
    pub throughput: Option<Spread>,
    pub p99: Option<Spread>,
}

impl RunNoise {
    /// From a run's intervals (centred on its summary's figures).
    pub fn of_run(run: &RunData, summary: &Summary) -> RunNoise {
        RunNoise {
            throughput: noise::throughput(run, summary),
            p99: noise::p99(run, summary),
        }
    }
}

/// "within noise", "beyond noise" or "noise not known" for two figures.
fn noise_word(a: Option<&Spread>, b: Option<&Spread>) -> &'static str {
    match a.zip(b).and_then(|(a, b)| a.apart(b)) {
        Some(true) => "beyond noise",
        Some(false) => "within noise",
        None => "noise not known",
    }
}

/// The comparison's verdict: which run has the most throughput, and whether that is beyond
/// noise (its 95% interval apart from every other run's, see [`noise`]); each run against the
/// baseline; any run whose thresholds broke or that had errors. A winner within noise, or one
/// whose noise is not known, is not a green verdict.
fn verdict(
    labels: &[String],
    summaries: &[Summary],
    noise: &[RunNoise],
) -> (Tone, String, Vec<String>) {
    let base = &labels[0];
    let best = summaries
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.throughput_rps?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let rps_of = |i: usize| noise.get(i).and_then(|n| n.throughput.as_ref());
    let mut tone = Tone::Good;
    let answer = match best {
        None => "No run measured a throughput".to_string(),
        Some((b, rps)) => {
            let others: Vec<usize> = (0..summaries.len()).filter(|j| *j != b).collect();
            let within: Vec<usize> = others
                .iter()
                .copied()
                .filter(|j| rps_of(b).zip(rps_of(*j)).and_then(|(x, y)| x.apart(y)) == Some(false))
                .collect();
            let unknown = others.iter().any(|j| {
                rps_of(b)
                    .zip(rps_of(*j))
                    .and_then(|(x, y)| x.apart(y))
                    .is_none()
            });
            let interval = |i: usize| {
                let show = |v: f64| html::short(v);
                match rps_of(i).and_then(|s| s.ci95) {
                    Some(h) => format!(
                        "{} ± {}",
                        show(summaries[i].throughput_rps.unwrap_or(0.0)),
                        show(h)
                    ),
                    None => summaries[i]
                        .throughput_rps
                        .map_or(MISSING.to_string(), show),
                }
            };
            if !within.is_empty() {
                tone = Tone::Warn;
                let mut tied = vec![b];
                tied.extend(&within);
                tied.sort_unstable();
                let list = tied
                    .iter()
                    .map(|i| format!("{} {}", labels[*i], interval(*i)))
                    .collect::<Vec<_>>()
                    .join(", ");
                if summaries.len() == 2 {
                    format!(
                        "Within noise: {} has {} the throughput of {}, and their 95% intervals \
                         overlap ({list} responses/s)",
                        labels[1],
                        ratio(summaries[1].throughput_rps, summaries[0].throughput_rps),
                        labels[0],
                    )
                } else {
                    format!(
                        "Within noise: the most throughput is {}'s, but its 95% interval \
                         overlaps others' ({list} responses/s)",
                        labels[b]
                    )
                }
            } else {
                let winner = match b {
                    0 if summaries.len() == 2 => format!(
                        "The baseline {base} has the most throughput: {} responses/s, {} {}'s",
                        html::short(rps),
                        ratio(Some(rps), summaries[1].throughput_rps),
                        labels[1]
                    ),
                    0 => format!(
                        "The baseline {base} has the most throughput: {} responses/s",
                        html::short(rps)
                    ),
                    i => format!(
                        "{} has the most throughput: {} responses/s, {} the baseline {base}'s",
                        labels[i],
                        html::short(rps),
                        ratio(Some(rps), summaries[0].throughput_rps)
                    ),
                };
                if unknown || others.is_empty() {
                    if !others.is_empty() {
                        tone = Tone::Warn;
                    }
                    format!("{winner}; noise not known (a run has fewer than 2 intervals)")
                } else {
                    format!("{winner}, beyond noise (95% intervals apart)")
                }
            }
        }
    };
    let p99 = |s: &Summary| measured(&s.latency_us).and_then(|f| f.p99);
    let p99_of = |i: usize| noise.get(i).and_then(|n| n.p99.as_ref());
    let mut details = Vec::new();
    for (i, (label, s)) in labels.iter().zip(summaries).enumerate().skip(1) {
        details.push(escape(&format!(
            "{label} against {base}: throughput {} ({}), p99 latency {} ({}), errors {} vs {}",
            ratio(s.throughput_rps, summaries[0].throughput_rps),
            noise_word(rps_of(i), rps_of(0)),
            ratio(p99(s), p99(&summaries[0])),
            noise_word(p99_of(i), p99_of(0)),
            s.errors_total.map_or(MISSING.to_string(), html::thousands),
            summaries[0]
                .errors_total
                .map_or(MISSING.to_string(), html::thousands),
        )));
    }
    // Within-run intervals cannot see a machine whose load changed between the runs: say so
    // wherever they were the only evidence (two 5 s runs of the same load, one after the other
    // on a shared 2-core machine, measured 87k and 123k responses/s, each steady within itself).
    let within_runs_only = noise
        .iter()
        .filter_map(|n| n.throughput.as_ref())
        .any(|s| matches!(s.basis, noise::Basis::Intervals { .. }));
    if summaries.len() > 1 && within_runs_only {
        details.push(
            "Each run's 95% interval comes from its own intervals: it does not hold what \
             changes from one run to the next on a busy machine (other processes, CPU \
             frequency). <code>headroom run --repeat N</code> measures that."
                .to_string(),
        );
    }
    let differ = differing_settings(summaries);
    if summaries.len() > 1 {
        details.push(if differ.is_empty() {
            "The runs' settings are the same.".to_string()
        } else {
            escape(&format!(
                "Settings that differ from the baseline's: {} (marked in the settings table).",
                differ.join(", ")
            ))
        });
    }
    for (label, s) in labels.iter().zip(summaries) {
        let (t, answer, _) = html::run_verdict(s);
        if t != Tone::Good {
            details.push(format!("{}: {}", escape(label), escape(&answer)));
        }
        tone = tone.max(t);
    }
    (tone, answer, details)
}

/// The headline tiles of the comparison: each figure for every run, with its ratio to the
/// baseline.
fn tiles(labels: &[String], summaries: &[Summary]) -> Vec<Tile> {
    /// (data-tile, label, the figure of a run, how it is shown).
    type TileRow = (
        &'static str,
        &'static str,
        fn(&Summary) -> Option<f64>,
        fn(f64) -> String,
    );
    let rows: [TileRow; 6] = [
        (
            "throughput",
            "throughput (responses/s)",
            |s| s.throughput_rps,
            html::short,
        ),
        (
            "p50",
            "latency p50 (ms)",
            |s| measured(&s.latency_us)?.p50,
            html::short_ms,
        ),
        (
            "p99",
            "latency p99 (ms)",
            |s| measured(&s.latency_us)?.p99,
            html::short_ms,
        ),
        ("error-rate", "error rate", |s| s.error_rate, html::percent),
        (
            "connections",
            "peak connections",
            |s| as_f64(s.connections_peak),
            |v| html::thousands(v as u64),
        ),
        (
            "cpu",
            "generator CPU (% of a core)",
            html::cpu_percent,
            html::short,
        ),
    ];
    rows.into_iter()
        .map(|(key, label, of, show)| {
            let base = of(&summaries[0]);
            let mut t = String::from("<table>");
            for (i, (l, s)) in labels.iter().zip(summaries).enumerate() {
                let v = of(s);
                let r = if i == 0 {
                    String::new()
                } else {
                    ratio(v, base)
                };
                let _ = write!(
                    t,
                    "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td>\
                     <td class=\"n\">{}</td><td class=\"n ratio\">{r}</td></tr>",
                    colour(i),
                    escape(l),
                    v.map_or(MISSING.to_string(), show)
                );
            }
            t.push_str("</table>");
            Tile {
                key,
                label: label.to_string(),
                value_html: t,
                unit: String::new(),
                detail: None,
            }
        })
        .collect()
}

/// The colour of run `i` on every chart: one series per run, in run order.
fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn runs_table(out: &mut String, labels: &[String], runs: &[RunData]) {
    out.push_str(
        "<h2>Runs</h2>\n<table class=\"runs\">\n<tr><th>run</th><th>load</th><th>directory</th>\
         <th></th></tr>\n",
    );
    for (i, (label, run)) in labels.iter().zip(runs).enumerate() {
        // Each run named with its load in words (a ramp, stages, phases, a rate).
        let load = run.summary.as_ref().and_then(|s| s.load_text.as_deref());
        let _ = writeln!(
            out,
            "<tr><th class=\"run\"><span class=\"swatch\" style=\"background:{}\"></span>{}</th>\
             <td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            colour(i),
            escape(label),
            html::text(load),
            escape(&run.dir.display().to_string()),
            if i == 0 { "baseline" } else { "" }
        );
    }
    out.push_str("</table>\n");
}

/// One header cell per run.
fn run_headers(labels: &[String]) -> String {
    labels
        .iter()
        .map(|l| format!("<th class=\"run\">{}</th>", escape(l)))
        .collect()
}

/// A settings row: its name, its cells (HTML), and whether cell i differs from cell 0. A
/// missing value (a killed run's settings) is not known to differ.
type Row = (&'static str, Vec<String>, Vec<bool>);

/// The names of the settings in which some run differs from the baseline.
fn differing_settings(summaries: &[Summary]) -> Vec<&'static str> {
    settings_rows(summaries)
        .into_iter()
        .filter(|(_, _, differs)| differs.iter().any(|d| *d))
        .map(|(name, _, _)| name)
        .collect()
}

fn settings_table(out: &mut String, labels: &[String], summaries: &[Summary]) {
    let rows = settings_rows(summaries);
    let _ = writeln!(
        out,
        "<h2>Settings</h2>\n<p>Cells that differ from the baseline are marked.</p>\n\
         <table class=\"settings compare\">\n<tr><th></th>{}</tr>",
        run_headers(labels)
    );
    for (name, cells, differs) in rows {
        let _ = write!(out, "<tr><th>{name}</th>");
        for (cell, d) in cells.iter().zip(differs) {
            let class = if d { " class=\"diff\"" } else { "" };
            let _ = write!(out, "<td{class}>{cell}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

fn settings_rows(summaries: &[Summary]) -> Vec<Row> {
    fn by_text(name: &'static str, cells: Vec<String>) -> Row {
        let known = |c: &String| {
            let bare = c.trim_start_matches("<code>").trim_end_matches("</code>");
            bare != MISSING
        };
        let differs = cells
            .iter()
            .map(|c| known(c) && known(&cells[0]) && *c != cells[0])
            .collect();
        (name, cells, differs)
    }
    let col = |f: &dyn Fn(&Summary) -> String| summaries.iter().map(f).collect::<Vec<_>>();
    let load = |s: &Summary| html::text(s.load_text.as_deref());
    let duration = |s: &Summary| match (s.duration_s, s.interrupted) {
        (Some(d), Some(true)) => format!("{} s (interrupted)", html::num(d)),
        (Some(d), _) => format!("{} s", html::num(d)),
        (None, _) => MISSING.to_string(),
    };
    let duration_differs: Vec<bool> = summaries
        .iter()
        .map(|s| match (s.duration_s, summaries[0].duration_s) {
            (Some(d), Some(b)) => (d - b).abs() > 0.01 * b.abs().max(d.abs()),
            _ => false,
        })
        .collect();
    let code = |v: Option<&str>| format!("<code>{}</code>", html::text(v));
    let mut rows: Vec<Row> = vec![
        by_text("command", col(&|s| code(s.command.as_deref()))),
        by_text("target", col(&|s| code(s.target.as_deref()))),
        by_text("model", col(&|s| html::text(s.model.as_deref()))),
        by_text("load", col(&load)),
        by_text("threads", col(&|s| html::int(s.threads))),
        by_text("keepalive", col(&|s| html::boolean(s.keepalive))),
        by_text("pipeline", col(&|s| html::int(s.pipeline))),
        ("duration", col(&duration), duration_differs),
        (
            "started at",
            col(&|s| html::text(s.started_at.as_deref())),
            vec![false; summaries.len()],
        ),
        by_text(
            "headroom version",
            col(&|s| html::text(s.headroom_version.as_deref())),
        ),
    ];
    // What ran on the wire, when some run's summary says it (newer headroom).
    if summaries.iter().any(|s| s.protocol.is_some()) {
        rows.insert(
            3,
            by_text("protocol", col(&|s| html::text(s.protocol.as_deref()))),
        );
    }
    if summaries.iter().any(|s| s.tls.is_some()) {
        let tls = |s: &Summary| match &s.tls {
            Some(_) => "yes".to_string(),
            None => "no".to_string(),
        };
        rows.insert(4, by_text("TLS", col(&tls)));
    }
    rows
}

/// `value / base` as `1.23×`; "–" when either is missing or the base is 0.
pub fn ratio(value: Option<f64>, base: Option<f64>) -> String {
    match (value, base) {
        (Some(v), Some(b)) if b != 0.0 && (v / b).is_finite() => format!("{:.2}×", v / b),
        _ => MISSING.to_string(),
    }
}

/// The figures compared, as (row name, how a value is shown, the value of a summary).
type Figure = (&'static str, fn(f64) -> String, fn(&Summary) -> Option<f64>);

fn count(v: f64) -> String {
    format!("{v:.0}")
}

fn ms(us: f64) -> String {
    html::ms(Some(us))
}

fn percent(fraction: f64) -> String {
    format!("{}%", html::num((fraction * 1e6).round() / 1e4))
}

fn seconds(v: f64) -> String {
    html::num((v * 1000.0).round() / 1000.0)
}

fn mib(kb: f64) -> String {
    html::num((kb / 102.4).round() / 10.0)
}

fn as_f64(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

const FIGURES: [Figure; 15] = [
    ("throughput (responses/s)", html::num, |s| s.throughput_rps),
    ("requests", count, |s| as_f64(s.requests)),
    ("responses", count, |s| as_f64(s.responses)),
    ("errors", count, |s| as_f64(s.errors_total)),
    ("error rate", percent, |s| s.error_rate),
    ("latency mean (ms)", ms, |s| measured(&s.latency_us)?.mean),
    ("latency p50 (ms)", ms, |s| measured(&s.latency_us)?.p50),
    ("latency p90 (ms)", ms, |s| measured(&s.latency_us)?.p90),
    ("latency p99 (ms)", ms, |s| measured(&s.latency_us)?.p99),
    ("latency p99.9 (ms)", ms, |s| measured(&s.latency_us)?.p999),
    ("latency max (ms)", ms, |s| measured(&s.latency_us)?.max),
    ("connect p99 (ms)", ms, |s| measured(&s.connect_us)?.p99),
    ("peak connections", count, |s| as_f64(s.connections_peak)),
    ("generator CPU, user + system (s)", seconds, |s| {
        match (s.cpu_user_s, s.cpu_sys_s) {
            (None, None) => None,
            (u, y) => Some(u.unwrap_or(0.0) + y.unwrap_or(0.0)),
        }
    }),
    ("generator max RSS (MiB)", mib, |s| as_f64(s.max_rss_kb)),
];

/// Figures shown only when every run has them: TLS handshake time means nothing beside a
/// plain run's.
const WHEN_EVERY_RUN_HAS_IT: [Figure; 2] = [
    ("TLS handshake p50 (ms)", ms, |s| measured(&s.tls_us)?.p50),
    ("TLS handshake p99 (ms)", ms, |s| measured(&s.tls_us)?.p99),
];

fn figures_table(out: &mut String, labels: &[String], summaries: &[Summary], noise: &[RunNoise]) {
    let base = escape(&labels[0]);
    let mut header = format!("<tr><th></th><th class=\"run n\">{base}</th>");
    for l in &labels[1..] {
        let l = escape(l);
        let _ = write!(
            header,
            "<th class=\"run n\">{l}</th><th class=\"n\">{l} / {base}</th>"
        );
    }
    let _ = writeln!(
        out,
        "<h2>Figures</h2>\n<p>Latency is corrected for coordinated omission; the ratio columns \
         divide each run's value by the baseline's. A 95% interval row gives each run's noise \
         (from its per-interval values, autocorrelation allowed for; over repeats for a set of \
         repeats) and, in the ratio column, whether the run differs from the baseline beyond \
         it (the intervals apart) or within it.</p>\n<table class=\"figures compare\">\n\
         {header}</tr>"
    );
    let optional = WHEN_EVERY_RUN_HAS_IT
        .into_iter()
        .filter(|(_, _, of)| summaries.iter().all(|s| s.used_tls() && of(s).is_some()));
    for (name, show, of) in FIGURES.into_iter().chain(optional) {
        let values: Vec<Option<f64>> = summaries.iter().map(of).collect();
        figure_row(out, name, show, &values);
        match name {
            "throughput (responses/s)" => {
                let spreads: Vec<Option<&Spread>> =
                    noise.iter().map(|n| n.throughput.as_ref()).collect();
                interval_row(out, "throughput 95% interval", html::short, &spreads);
            }
            "latency p99 (ms)" => {
                let spreads: Vec<Option<&Spread>> = noise.iter().map(|n| n.p99.as_ref()).collect();
                interval_row(out, "latency p99 95% interval", ms, &spreads);
            }
            _ => {}
        }
    }
    // Responses by exact code, every code any run saw; 0 for a run that counted codes but not
    // this one, "–" for a run that did not count codes.
    let codes: std::collections::BTreeSet<&str> = summaries
        .iter()
        .flat_map(|s| s.status_codes.keys().map(String::as_str))
        .collect();
    for code in codes {
        let values: Vec<Option<f64>> = summaries
            .iter()
            .map(|s| {
                let n = s.status_codes.get(code).copied();
                as_f64(n.or((!s.status_codes.is_empty()).then_some(0)))
            })
            .collect();
        figure_row(out, &format!("status {}", escape(code)), count, &values);
    }
    out.push_str("</table>\n");
}

/// A row of 95% intervals under its figure: each run's "± h (95%, ...)", and in the ratio
/// columns whether the run differs from the baseline within or beyond noise.
fn interval_row(
    out: &mut String,
    name: &str,
    show: fn(f64) -> String,
    spreads: &[Option<&Spread>],
) {
    let _ = write!(out, "<tr><th>{name}</th>");
    for (i, s) in spreads.iter().enumerate() {
        let _ = write!(
            out,
            "<td class=\"n\">{}</td>",
            s.map_or(MISSING.to_string(), |s| escape(&s.describe(show)))
        );
        if i > 0 {
            let _ = write!(
                out,
                "<td class=\"n ratio\">{}</td>",
                noise_word(*s, spreads[0])
            );
        }
    }
    out.push_str("</tr>\n");
}

/// One row of the figures table: each run's value, and after the baseline's the ratio to it.
fn figure_row(out: &mut String, name: &str, show: fn(f64) -> String, values: &[Option<f64>]) {
    let _ = write!(out, "<tr><th>{name}</th>");
    for (i, v) in values.iter().enumerate() {
        let _ = write!(
            out,
            "<td class=\"n\">{}</td>",
            v.map_or(MISSING.to_string(), show)
        );
        if i > 0 {
            let _ = write!(out, "<td class=\"n ratio\">{}</td>", ratio(*v, values[0]));
        }
    }
    out.push_str("</tr>\n");
}

/// One overlaid chart as a `<figure>`, its notes as the caption (the comparison's page and a
/// repeat set's).
pub(crate) fn figure(out: &mut String, o: &Overlay) {
    let _ = write!(out, "<figure>\n{}", o.chart.render());
    if !o.notes.is_empty() {
        let _ = writeln!(
            out,
            "<figcaption>{}</figcaption>",
            escape(&o.notes.join(" · "))
        );
    }
    out.push_str("</figure>\n");
}

/// Every chart of [`charts::all`] with the runs overlaid: one series per run (see [`pick`]),
/// named `LABEL: SERIES`, in run order. Title and axes are the first run's, labelled ticks
/// those of every run. Time axes in seconds and minutes (a run over 20 minutes) are brought to
/// the coarser unit. A note every run's chart has is the chart's note; other notes of a run go
/// to [`Overlay::notes`] as `LABEL: note`.
pub fn overlay_charts(labels: &[String], runs: &[RunData]) -> Vec<Overlay> {
    let per_run: Vec<Vec<Chart>> = runs.iter().map(charts::all).collect();
    let Some(first) = per_run.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|base| {
            let same: Vec<Option<&Chart>> = per_run
                .iter()
                .map(|cs| cs.iter().find(|c| c.name == base.name))
                .collect();
            overlay(base, labels, &same)
        })
        .collect()
}

/// A chart of the comparison, and the notes of single runs about it (`LABEL: no errors`),
/// shown under the chart: the plot has room for one short note only.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlay {
    pub chart: Chart,
    pub notes: Vec<String>,
}

/// Seconds per unit of a time axis label written by [`charts`]; `None` for other axes.
fn time_unit(x_label: &str) -> Option<f64> {
    match x_label {
        "seconds since start" => Some(1.0),
        "minutes since start" => Some(60.0),
        _ => None,
    }
}

fn overlay(base: &Chart, labels: &[String], charts: &[Option<&Chart>]) -> Overlay {
    let mut c = Chart {
        series: Vec::new(),
        note: None,
        x_max: None,
        // `LABEL: series` names are long: widen the picture rather than clip them.
        wide_legend: true,
        ..base.clone()
    };
    // The coarsest time unit of the runs, when every one is a time axis.
    let units: Option<Vec<f64>> = charts
        .iter()
        .map(|ch| ch.and_then(|ch| time_unit(&ch.x_label)))
        .collect();
    let target = units
        .as_ref()
        .and_then(|u| u.iter().copied().reduce(f64::max));
    if let Some(t) = target {
        if let Some(i) = units.as_ref().and_then(|u| u.iter().position(|v| *v == t)) {
            if let Some(ch) = charts[i] {
                c.x_label = ch.x_label.clone();
            }
        }
    }
    // Labelled ticks (the percentile axis reaches as far as each run's samples): all of them.
    let mut ticks: Vec<(f64, String)> = Vec::new();
    for t in charts.iter().flatten().flat_map(|ch| &ch.x_ticks) {
        if !ticks.iter().any(|u| u.0 == t.0) {
            ticks.push(t.clone());
        }
    }
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    c.x_ticks = ticks;
    let mut notes: Vec<(&str, &str)> = Vec::new();
    for (i, (label, ch)) in labels.iter().zip(charts).enumerate() {
        let Some(ch) = ch else {
            c.series
                .push(Series::new(format!("{label}: –"), Vec::new()));
            notes.push((label, "chart not available"));
            continue;
        };
        let mut s = pick(ch);
        let mut x_max = ch.x_max;
        if let (Some(t), Some(u)) = (target, units.as_ref().map(|u| u[i])) {
            if u != t {
                for p in &mut s.points {
                    p.0 = p.0 * u / t;
                }
                x_max = x_max.map(|m| m * u / t);
            }
        }
        // The axis spans the longest run.
        c.x_max = match (c.x_max, x_max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        s.name = format!("{label}: {}", s.name);
        c.series.push(s);
        if let Some(n) = &ch.note {
            notes.push((label, n));
        }
    }
    let shared =
        !notes.is_empty() && notes.len() == charts.len() && notes.iter().all(|n| n.1 == notes[0].1);
    if shared {
        c.note = Some(notes[0].1.to_string());
        notes.clear();
    }
    Overlay {
        chart: c,
        notes: notes.iter().map(|(l, n)| format!("{l}: {n}")).collect(),
    }
}

/// The series of one run's chart drawn in a comparison: `users_active` of the users chart
/// (named `users`),
/// `rps` of throughput, `p99` of latency and connect, `corrected` of percentiles, and of the
/// errors chart the total of every kind (`errors`, summed at equal x). Another chart, or one
/// without the series named, gives its first series; a chart without any an empty series.
pub fn pick(chart: &Chart) -> Series {
    let preferred: &[&str] = match chart.name.as_str() {
        "users" => &["users_active", "users"],
        "throughput" => &["rps"],
        "latency" | "connect" | "tls" => &["p99"],
        "percentiles" => &["corrected"],
        "errors" => return total(&chart.series, "errors"),
        _ => &[],
    };
    let mut s = preferred
        .iter()
        .find_map(|p| chart.series.iter().find(|s| s.name == *p))
        .or_else(|| chart.series.first())
        .cloned()
        .unwrap_or_else(|| Series::new(preferred.first().copied().unwrap_or(""), Vec::new()));
    // The legend has room for about 20 characters: "LABEL: users" rather than "users_active".
    if s.name == "users_active" {
        s.name = "users".to_string();
    }
    s
}

/// The sum of `series` at equal x, in x order.
fn total(series: &[Series], name: &str) -> Series {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for s in series {
        for (x, y) in &s.points {
            match points.iter_mut().find(|p| p.0 == *x) {
                Some(p) => p.1 += y,
                None => points.push((*x, *y)),
            }
        }
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    Series::new(name, points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A run directory `root/name` with these files (`None`: not written).
    fn run_dir(root: &Path, name: &str, summary: Option<&str>, intervals: Option<&str>) -> PathBuf {
        let dir = root.join(name);
        fs::create_dir_all(&dir).unwrap();
        if let Some(s) = summary {
            fs::write(dir.join("summary.json"), s).unwrap();
        }
        if let Some(i) = intervals {
            fs::write(dir.join("intervals.jsonl"), i).unwrap();
        }
        dir
    }

    /// Two 1 s intervals; `k` scales the counts, errors are 1 reset + 2 timeouts in the first
    /// and 4 resets in the second.
    fn intervals(k: u64) -> String {
        let line = |i: u64, errors: &str| {
            format!(
                "{{\"index\":{i},\"t_s\":{i}.0,\"length_s\":1.0,\"requests\":{r},\
                 \"responses\":{r},\"rps\":{r}.0,\"errors\":{{{errors}}},\
                 \"latency_us\":{{\"mean\":900,\"p50\":800,\"p90\":1500,\"p99\":{p99},\"max\":9000}},\
                 \"connect_us\":{{\"p50\":100,\"p99\":300}},\"connects\":{k},\
                 \"connections_open\":{k},\"connections_peak\":{k},\"users_active\":{k}}}\n",
                r = 100 * k,
                p99 = 4000 / k,
            )
        };
        line(0, "\"reset\":1,\"timeout\":2") + &line(1, "\"reset\":4,\"timeout\":0")
    }

    fn summary(k: u64, extra: &str) -> String {
        format!(
            "{{\"command\":\"headroom run <x> -c {c}\",\"target\":\"http://127.0.0.1:1/\",\
             \"model\":\"closed\",\"threads\":1,\"keepalive\":true,\"pipeline\":1,\
             \"started_at\":\"2026-01-0{k}T00:00:00Z\",\"duration_s\":2.0,\
             \"throughput_rps\":{t}.0,\"requests\":{r},\"responses\":{r},\"errors_total\":{e},\
             \"latency_us\":{{\"count\":{r},\"mean\":1000,\"p50\":800,\"p90\":1500,\"p99\":{p99},\
             \"p999\":6000,\"max\":9000}},\"connect_us\":{{\"p99\":500}},\
             \"connections_peak\":{c},\"cpu_user_s\":0.25,\"cpu_sys_s\":0.75,\
             \"max_rss_kb\":{rss}{extra}}}",
            c = 10 * k,
            t = 100 * k,
            r = 200 * k,
            e = 7 * (k - 1),
            p99 = 4000 / k,
            rss = 10240 * k,
        )
    }

    /// The `<tr>` of the figures table whose header is `name`.
    fn row<'a>(html: &'a str, name: &str) -> &'a str {
        let start = html
            .find(&format!("<tr><th>{name}</th>"))
            .unwrap_or_else(|| panic!("no row {name}"));
        let end = start + html[start..].find("</tr>").unwrap();
        &html[start..end]
    }

    #[test]
    fn overlays_one_series_per_run_in_run_order() {
        let tmp = tempfile::tempdir().unwrap();
        let a = run_dir(tmp.path(), "a", Some(&summary(1, "")), Some(&intervals(1)));
        let b = run_dir(tmp.path(), "b", Some(&summary(2, "")), Some(&intervals(2)));
        let runs = [load_run(&a).unwrap(), load_run(&b).unwrap()];
        let labels = run_labels(&[a, b]);
        assert_eq!(labels, ["a", "b"]);
        let overlays = overlay_charts(&labels, &runs);
        assert!(overlays.iter().all(|o| o.notes.is_empty()));
        let charts: Vec<Chart> = overlays.into_iter().map(|o| o.chart).collect();
        let names: Vec<&str> = charts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, charts::NAMES);
        let series = |name: &str| -> Vec<String> {
            let c = charts.iter().find(|c| c.name == name).unwrap();
            c.series.iter().map(|s| s.name.clone()).collect()
        };
        assert_eq!(series("users"), ["a: users", "b: users"]);
        assert_eq!(series("throughput"), ["a: rps", "b: rps"]);
        assert_eq!(series("latency"), ["a: p99", "b: p99"]);
        assert_eq!(series("connect"), ["a: p99", "b: p99"]);
        assert_eq!(series("errors"), ["a: errors", "b: errors"]);
        assert_eq!(series("percentiles"), ["a: corrected", "b: corrected"]);
        for c in &charts {
            for s in &c.series {
                assert!(!s.points.is_empty(), "{}: {} is empty", c.name, s.name);
            }
        }
        // Errors: every kind summed per interval (x is the interval's end).
        let errors = &charts.iter().find(|c| c.name == "errors").unwrap().series[0];
        assert_eq!(errors.points, [(1.0, 3.0), (2.0, 4.0)]);
        let latency = &charts.iter().find(|c| c.name == "latency").unwrap().series;
        assert_eq!(latency[0].points, [(1.0, 4.0), (2.0, 4.0)]);
        assert_eq!(latency[1].points, [(1.0, 2.0), (2.0, 2.0)]);

        let html = render_runs(&labels, &runs);
        for name in charts::NAMES {
            assert_eq!(
                html.matches(&format!("data-chart=\"{name}\"")).count(),
                1,
                "{name}"
            );
        }
        assert!(html.contains("data-series=\"b: p99\" data-points=\"2\""));
        assert_eq!(html, render_runs(&labels, &runs), "deterministic");
    }

    #[test]
    fn status_codes_compared_code_by_code() {
        let tmp = tempfile::tempdir().unwrap();
        let a = run_dir(
            tmp.path(),
            "a",
            Some(&summary(1, ",\"status_codes\":{\"200\":190,\"404\":10}")),
            None,
        );
        let b = run_dir(
            tmp.path(),
            "b",
            Some(&summary(2, ",\"status_codes\":{\"200\":380,\"503\":20}")),
            None,
        );
        let old = run_dir(tmp.path(), "old", Some(&summary(2, "")), None);
        let html = render_compare(&[a, b, old]).unwrap();
        assert!(row(&html, "status 200").contains(">190<"));
        assert!(row(&html, "status 200").contains(">380</td><td class=\"n ratio\">2.00×"));
        let not_found = row(&html, "status 404");
        assert!(
            not_found.contains(">0</td><td class=\"n ratio\">0.00×"),
            "b counted codes and saw no 404: {not_found}"
        );
        assert!(
            not_found.ends_with(">–</td><td class=\"n ratio\">–</td>"),
            "the old run did not count codes: {not_found}"
        );
        assert!(row(&html, "status 503").contains(">0</td><td class=\"n\">20<"));
    }

    #[test]
    fn ratios_against_the_first_run() {
        let tmp = tempfile::tempdir().unwrap();
        let a = run_dir(
            tmp.path(),
            "a",
            Some(&summary(1, ",\"error_rate\":0.0")),
            Some(&intervals(1)),
        );
        let b = run_dir(
            tmp.path(),
            "b",
            Some(&summary(
                2,
                ",\"error_rate\":0.01,\"load\":{\"name\":\"closed\",\"users\":20,\
                 \"per_user\":null,\"think\":null,\"ramp\":[{\"duration_s\":1.0,\"users\":20}]}",
            )),
            Some(&intervals(2)),
        );
        let html = render_compare(&[a, b]).unwrap();
        // Each run is named with its load in words, the ramp included (issue 27).
        assert!(
            html.contains(">b</th><td>20 closed users ramped up over 1 s, back to back</td>"),
            "{html}"
        );
        let throughput = row(&html, "throughput (responses/s)");
        assert!(
            throughput.ends_with(
                "<td class=\"n\">100</td><td class=\"n\">200</td>\
                 <td class=\"n ratio\">2.00×</td>"
            ),
            "{throughput}"
        );
        assert!(row(&html, "requests").ends_with(">2.00×</td>"));
        assert!(row(&html, "latency p99 (ms)").contains(">4.000<"));
        assert!(row(&html, "latency p99 (ms)").ends_with(">0.50×</td>"));
        assert!(row(&html, "latency p99.9 (ms)").ends_with(">1.00×</td>"));
        assert!(row(&html, "peak connections").ends_with(">2.00×</td>"));
        assert!(row(&html, "generator CPU, user + system (s)").contains(">1<"));
        assert!(row(&html, "generator max RSS (MiB)").contains(">10<"));
        // A base of 0: no ratio.
        assert!(row(&html, "errors").ends_with(">7</td><td class=\"n ratio\">–</td>"));
        assert!(row(&html, "error rate").ends_with(">1%</td><td class=\"n ratio\">–</td>"));
        // The settings that differ are marked, the start time is not.
        let command = row(&html, "command");
        assert!(command.contains("<td class=\"diff\"><code>headroom run &lt;x&gt; -c 20"));
        assert!(!row(&html, "model").contains("diff"));
        assert!(!row(&html, "started at").contains("diff"));
        assert!(!row(&html, "duration").contains("diff"));

        // The verdict first: which run has the most throughput, each run against the
        // baseline, what differs, and b's errors (a warning).
        let verdict = &html[html.find("<section class=\"verdict").unwrap()..];
        let verdict = &verdict[..verdict.find("</section>").unwrap()];
        for line in [
            "data-verdict=\"warn\"",
            "⚠ b has the most throughput: 200 responses/s, 2.00× the baseline a&#39;s, beyond \
             noise (95% intervals apart)",
            "b against a: throughput 2.00× (beyond noise), p99 latency 0.50× (beyond noise), \
             errors 7 vs 0",
            "Settings that differ from the baseline&#39;s: command (marked",
            "b: 1.00% of requests failed",
        ] {
            assert!(verdict.contains(line), "{line:?} in {verdict}");
        }
        // The tiles: every run's figure, the ratio beside the others'.
        let tile = &html[html.find("data-tile=\"throughput\"").unwrap()..];
        let tile = &tile[..tile.find("</table>").unwrap()];
        assert!(
            tile.contains(">b</td><td class=\"n\">200</td><td class=\"n ratio\">2.00×</td>"),
            "{tile}"
        );
        assert!(
            html.find("data-tile=\"cpu\"").unwrap()
                < html.find("data-chart=\"throughput\"").unwrap()
        );
        assert!(html.find("data-chart=\"users\"").unwrap() < html.find("<h2>Runs</h2>").unwrap());

        assert_eq!(ratio(Some(3.0), Some(2.0)), "1.50×");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "–");
        assert_eq!(ratio(None, Some(2.0)), "–");
        assert_eq!(ratio(Some(0.0), Some(2.0)), "0.00×");
    }

    #[test]
    fn a_killed_run_compares_from_its_intervals_with_missing_figures() {
        let tmp = tempfile::tempdir().unwrap();
        let a = run_dir(tmp.path(), "a", Some(&summary(1, "")), Some(&intervals(1)));
        let killed = run_dir(tmp.path(), "killed", None, Some(&intervals(2)));
        let html = render_compare(&[a, killed]).unwrap();
        // responses summed from the intervals: 200 + 200 over 2 s.
        assert!(row(&html, "responses").ends_with(">400</td><td class=\"n ratio\">2.00×</td>"));
        assert!(row(&html, "throughput (responses/s)").ends_with(">2.00×</td>"));
        assert!(row(&html, "latency p99 (ms)")
            .ends_with("<td class=\"n\">–</td><td class=\"n ratio\">–</td>"));
        // The killed run's settings are unknown, not different.
        assert!(
            !row(&html, "command").contains("diff"),
            "{}",
            row(&html, "command")
        );
        assert!(row(&html, "duration").ends_with("<td>2 s</td><td>2 s</td>"));
        assert!(html.contains("<p class=\"note\">killed: summary.json is missing"));
        // The percentile chart has the killed run's (empty) series and its note.
        assert!(html.contains("data-legend=\"killed: corrected\""));
        assert!(!html.contains("data-series=\"killed: corrected\""));
        assert!(html.contains(
            "<figcaption>killed: no summary.json: percentiles not available</figcaption>"
        ));
        assert!(html.contains("data-series=\"killed: p99\" data-points=\"2\""));
    }

    #[test]
    fn a_run_without_responses_has_no_latency_rather_than_zero() {
        let tmp = tempfile::tempdir().unwrap();
        let a = run_dir(tmp.path(), "a", Some(&summary(1, "")), Some(&intervals(1)));
        let refused = run_dir(
            tmp.path(),
            "refused",
            Some(
                "{\"responses\":0,\"throughput_rps\":0.0,\"latency_us\":{\"count\":0,\"mean\":0.0,\
                 \"p50\":0,\"p99\":0,\"max\":0},\"connect_us\":{\"count\":0,\"p99\":0}}",
            ),
            None,
        );
        let html = render_compare(&[a, refused]).unwrap();
        assert!(row(&html, "throughput (responses/s)")
            .ends_with(">0</td><td class=\"n ratio\">0.00×</td>"));
        for figure in ["latency mean (ms)", "latency p99 (ms)", "connect p99 (ms)"] {
            assert!(
                row(&html, figure).ends_with("<td class=\"n\">–</td><td class=\"n ratio\">–</td>"),
                "{}",
                row(&html, figure)
            );
        }
    }

    #[test]
    fn equal_directory_names_get_unique_labels() {
        let tmp = tempfile::tempdir().unwrap();
        let x = run_dir(tmp.path(), "x/run", None, Some(&intervals(1)));
        let y = run_dir(tmp.path(), "y/run", None, Some(&intervals(2)));
        let a = run_dir(tmp.path(), "a", None, Some(&intervals(1)));
        let dirs = [x.clone(), y, a.clone(), a.clone(), x.join(".")];
        let labels = run_labels(&dirs);
        // The parent of `a` is the temporary directory, whatever its name.
        let t = parent_name(&a).unwrap();
        assert_eq!(
            labels,
            [
                "x/run".to_string(),
                "y/run".to_string(),
                format!("{t}/a"),
                format!("{t}/a (2)"),
                "x/run (2)".to_string(),
            ]
        );
        let html = render_compare(&dirs[..2]).unwrap();
        assert!(html.contains("data-series=\"x/run: rps\""));
        assert!(html.contains("data-series=\"y/run: rps\""));
    }

    #[test]
    fn labels_are_escaped() {
        let tmp = tempfile::tempdir().unwrap();
        let a = run_dir(tmp.path(), "<a&b>", None, Some(&intervals(1)));
        let b = run_dir(tmp.path(), "b\"", None, Some(&intervals(1)));
        let html = render_compare(&[a, b]).unwrap();
        assert!(!html.contains("<a&b>") && !html.contains("b\":"));
        assert!(html.contains("data-series=\"&lt;a&amp;b&gt;: rps\""));
        assert!(html.contains("data-series=\"b&quot;: rps\""));
    }

    #[test]
    fn a_bad_directory_gives_its_own_error() {
        let tmp = tempfile::tempdir().unwrap();
        let a = run_dir(tmp.path(), "a", Some(&summary(1, "")), Some(&intervals(1)));
        let empty = run_dir(tmp.path(), "empty", None, None);
        let bad = run_dir(tmp.path(), "bad", Some("{\"requests\": 1,\n}"), None);
        let missing = tmp.path().join("missing");

        match render_compare(&[a.clone(), empty.clone()]) {
            Err(ReportError::NotARun { dir }) => assert_eq!(dir, empty),
            other => panic!("{other:?}"),
        }
        match render_compare(&[a.clone(), bad.clone()]) {
            Err(ReportError::Json { path, line, .. }) => {
                assert_eq!(path, bad.join("summary.json"));
                assert_eq!(line, 2);
            }
            other => panic!("{other:?}"),
        }
        match render_compare(&[missing.clone(), a]) {
            Err(ReportError::Io { path, .. }) => assert_eq!(path, missing),
            other => panic!("{other:?}"),
        }
        assert!(render_compare(&[]).is_err());
    }

    #[test]
    fn time_axes_in_seconds_and_minutes_share_the_coarser_unit() {
        let tmp = tempfile::tempdir().unwrap();
        let short = run_dir(tmp.path(), "short", None, Some(&intervals(1)));
        // 1800 s: charted in minutes.
        let long_line = "{\"index\":0,\"t_s\":0.0,\"length_s\":1800.0,\"responses\":0,\
                         \"users_active\":3}\n";
        let long = run_dir(tmp.path(), "long", None, Some(long_line));
        let runs = [load_run(&short).unwrap(), load_run(&long).unwrap()];
        let overlays = overlay_charts(&run_labels(&[short, long]), &runs);
        let of = |name: &str| overlays.iter().find(|o| o.chart.name == name).unwrap();
        let users = &of("users").chart;
        assert_eq!(users.x_label, "minutes since start");
        assert_eq!(
            users.series[0].points,
            [(1.0 / 60.0, 1.0), (2.0 / 60.0, 1.0)]
        );
        assert_eq!(users.series[1].points, [(30.0, 3.0)]);
        // The axis spans the longer run, in its unit; the percentile axis is not a time.
        assert_eq!(users.x_max, Some(30.0));
        assert_eq!(of("percentiles").chart.x_max, None);
        // The long run has no response, so no latency: an empty series keeps its colour and
        // legend entry.
        let latency = &of("latency").chart;
        assert_eq!(latency.series[1].points, []);
        // A note of one run goes under the chart with its label; a note of all runs in it.
        assert_eq!(of("errors").chart.note, None);
        assert_eq!(of("errors").notes, ["long: no errors"]);
        assert_eq!(
            of("percentiles").chart.note.as_deref(),
            Some("no summary.json: percentiles not available")
        );
        assert!(of("percentiles").notes.is_empty());
    }

    /// A run directory whose intervals have these throughputs (and p99s of 1 ms), and a
    /// summary of their mean throughput.
    fn noisy_run(root: &Path, name: &str, rps: &[f64]) -> PathBuf {
        let lines: String = rps
            .iter()
            .enumerate()
            .map(|(i, r)| {
                format!(
                    "{{\"index\":{i},\"t_s\":{i}.0,\"length_s\":1.0,\"responses\":{n},\
                     \"rps\":{r},\"latency_us\":{{\"p99\":{p}}}}}\n",
                    n = *r as u64,
                    p = 1000 + 10 * i,
                )
            })
            .collect();
        let mean = rps.iter().sum::<f64>() / rps.len() as f64;
        let total = rps.iter().sum::<f64>() as u64;
        let summary = format!(
            "{{\"command\":\"headroom run x\",\"throughput_rps\":{mean},\"requests\":{total},\
             \"responses\":{total},\"errors_total\":0,\"error_rate\":0.0,\
             \"latency_us\":{{\"count\":{total},\"p99\":1010}}}}"
        );
        run_dir(root, name, Some(&summary), Some(&lines))
    }

    fn verdict_of(html: &str) -> &str {
        let v = &html[html.find("<section class=\"verdict").unwrap()..];
        &v[..v.find("</section>").unwrap()]
    }

    #[test]
    fn issue_27_ten_percent_apart_on_a_noisy_machine_is_within_noise() {
        let tmp = tempfile::tempdir().unwrap();
        let a = noisy_run(tmp.path(), "a", &[900.0, 1100.0, 950.0, 1080.0, 970.0]);
        let b = noisy_run(tmp.path(), "b", &[1000.0, 1200.0, 1050.0, 1180.0, 1070.0]);
        let html = render_compare(&[a, b]).unwrap();
        let v = verdict_of(&html);
        assert!(v.contains("data-verdict=\"warn\""), "{v}");
        assert!(
            v.contains(
                "⚠ Within noise: b has 1.10× the throughput of a, and their 95% intervals overlap \
                 (a 1,000 ± "
            ),
            "{v}"
        );
        assert!(v.contains("throughput 1.10× (within noise)"), "{v}");
        assert!(!v.contains("most throughput"), "{v}");
        let row = row(&html, "throughput 95% interval");
        assert!(row.contains("<td class=\"n\">± "), "{row}");
        assert!(
            row.ends_with("<td class=\"n ratio\">within noise</td>"),
            "{row}"
        );
    }

    #[test]
    fn runs_apart_beyond_their_noise_have_a_green_winner() {
        let tmp = tempfile::tempdir().unwrap();
        let a = noisy_run(tmp.path(), "a", &[900.0, 1100.0, 950.0, 1080.0, 970.0]);
        let b = noisy_run(tmp.path(), "b", &[1900.0, 2100.0, 1950.0, 2080.0, 1970.0]);
        let html = render_compare(&[a.clone(), b]).unwrap();
        let v = verdict_of(&html);
        assert!(v.contains("data-verdict=\"good\""), "{v}");
        assert!(
            v.contains("✓ b has the most throughput: 2,000 responses/s, 2.00× the baseline a"),
            "{v}"
        );
        assert!(v.contains("beyond noise (95% intervals apart)"), "{v}");
        assert!(
            v.contains("comes from its own intervals: it does not hold what changes from one run"),
            "{v}"
        );
        assert!(row(&html, "throughput 95% interval").ends_with(">beyond noise</td>"));
        // A run of one interval: its noise is not known, so no green winner either.
        let one = noisy_run(tmp.path(), "one", &[5000.0]);
        let html = render_compare(&[a, one]).unwrap();
        let v = verdict_of(&html);
        assert!(v.contains("data-verdict=\"warn\""), "{v}");
        assert!(
            v.contains("noise not known (a run has fewer than 2 intervals)"),
            "{v}"
        );
        assert!(row(&html, "throughput 95% interval").contains("noise not known (1 interval)"));
    }

    #[test]
    fn three_runs_the_best_within_noise_of_one_other() {
        let tmp = tempfile::tempdir().unwrap();
        let a = noisy_run(tmp.path(), "a", &[100.0, 101.0, 99.0, 100.0]);
        let b = noisy_run(tmp.path(), "b", &[1000.0, 1200.0, 1050.0, 1180.0]);
        let c = noisy_run(tmp.path(), "c", &[1100.0, 1150.0, 1000.0, 1200.0]);
        let html = render_compare(&[a, b, c]).unwrap();
        let v = verdict_of(&html);
        assert!(
            v.contains(
                "⚠ Within noise: the most throughput is c&#39;s, but its 95% interval \
                        overlaps others&#39; (b 1,108 ± "
            ),
            "{v}"
        );
        assert!(!v.contains("(a "), "a is beyond noise of c: {v}");
    }
}
