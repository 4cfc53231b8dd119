//! The page of a set of repeats: `headroom run --repeat N --out DIR` runs the same load N times
//! into `DIR/1` ... `DIR/N`, and this page (DIR/report.html) shows how much they spread.
//!
//! The verdict gives the mean and 95% interval over the repeats of the throughput and the p99
//! latency ([`noise::over_repeats`]: Student t, the repeats independent). A table puts every
//! repeat's headline figures side by side with their mean, interval, smallest and largest, and
//! each repeat's own interval from its intervals (what a single run would have claimed). The
//! charts are the comparison's: one series per repeat on the same axes.
//!
//! The page is made from the repeats' directories, not from DIR/repeats.json: a set cut short
//! still has a page from the repeats that ran.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::compare::{figure, overlay_charts, RunNoise};
use crate::data::{load_run, RunData, Summary};
use crate::html::{self, measured, Tone, MISSING};
use crate::noise::{self, Spread};
use crate::svg::escape;
use crate::ReportError;

/// The most numbered directories a set is read from (`run --repeat` takes up to 100).
pub const MAX_REPEATS: usize = 1000;

/// The most bytes of DIR/repeats.json read (a set of 100 repeats writes about 1 KiB).
const MAX_REPEATS_JSON: u64 = 64 * 1024;

/// Whether `d` is a run directory (summary.json or intervals.jsonl).
fn is_run_dir(d: &Path) -> bool {
    d.join("summary.json").is_file() || d.join("intervals.jsonl").is_file()
}

/// The directories DIR/repeats.json lists (`runs`), when it can be read: at most
/// [`MAX_REPEATS_JSON`] bytes, a JSON object whose `runs` is an array of numbers written as
/// strings ("1", "2"; anything else, such as a path, is not followed). None otherwise.
fn listed(dir: &Path) -> Option<Vec<PathBuf>> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(dir.join("repeats.json"))
        .ok()?
        .take(MAX_REPEATS_JSON + 1)
        .read_to_string(&mut text)
        .ok()?;
    if text.len() as u64 > MAX_REPEATS_JSON {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let runs = v.get("runs")?.as_array()?;
    runs.iter()
        .take(MAX_REPEATS)
        .map(|r| {
            let name = r.as_str()?;
            (!name.is_empty() && name.len() <= 4 && name.bytes().all(|b| b.is_ascii_digit()))
                .then(|| dir.join(name))
        })
        .collect()
}

/// The repeats of the set in `dir`: those DIR/repeats.json lists (the repeats that finished,
/// written after each: a set run again with fewer repeats does not show the old ones), each a
/// run directory; without a readable repeats.json, DIR/1, DIR/2 ... as long as they are run
/// directories (at most [`MAX_REPEATS`]).
pub fn repeat_dirs(dir: &Path) -> Vec<PathBuf> {
    if let Some(dirs) = listed(dir) {
        return dirs.into_iter().filter(|d| is_run_dir(d)).collect();
    }
    (1..=MAX_REPEATS)
        .map(|k| dir.join(k.to_string()))
        .take_while(|d| is_run_dir(d))
        .collect()
}

/// Whether `dir` is a set of repeats: not a run directory itself, and it has repeats.json or
/// DIR/1 is a run directory.
pub fn is_repeats_dir(dir: &Path) -> bool {
    !dir.join("summary.json").exists()
        && !dir.join("intervals.jsonl").exists()
        && (dir.join("repeats.json").is_file() || is_run_dir(&dir.join("1")))
}

/// Reads the set of repeats in `dir` and renders its page. `NotARun` of `dir` when it has no
/// repeat; the first repeat that cannot be read gives its error.
pub fn render_repeats(dir: &Path) -> Result<String, ReportError> {
    let dirs = repeat_dirs(dir);
    if dirs.is_empty() {
        return Err(ReportError::NotARun {
            dir: dir.to_path_buf(),
        });
    }
    let runs = dirs
        .iter()
        .map(|d| load_run(d))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(render_repeat_runs(dir, &runs))
}

/// A figure of the spread table: its name, how a value is shown, the value of a summary.
type Figure = (&'static str, fn(f64) -> String, fn(&Summary) -> Option<f64>);

fn ms(us: f64) -> String {
    html::short_ms(us)
}

const FIGURES: [Figure; 5] = [
    ("throughput (responses/s)", html::short, |s| {
        s.throughput_rps
    }),
    ("latency p50 (ms)", ms, |s| measured(&s.latency_us)?.p50),
    ("latency p99 (ms)", ms, |s| measured(&s.latency_us)?.p99),
    ("latency p99.9 (ms)", ms, |s| measured(&s.latency_us)?.p999),
    ("error rate", html::percent, |s| s.error_rate),
];

/// The page of loaded repeats, in the order they ran; `dir` is the set's directory.
pub fn render_repeat_runs(dir: &Path, runs: &[RunData]) -> String {
    let labels: Vec<String> = (1..=runs.len()).map(|k| k.to_string()).collect();
    let summaries: Vec<Summary> = runs
        .iter()
        .map(|r| {
            r.summary
                .clone()
                .unwrap_or_else(|| Summary::from_intervals(&r.intervals))
        })
        .collect();
    let name = dir
        .file_name()
        .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into());
    let command = summaries.iter().find_map(|s| s.command.clone());
    let sub = format!(
        "{} repeat{} of the same load{}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        command.map_or(String::new(), |c| format!(": <code>{}</code>", escape(&c)))
    );
    let mut out = html::open_page(
        &format!("headroom repeats – {name}"),
        "headroom repeats",
        &sub,
    );
    for (label, run) in labels.iter().zip(runs) {
        for note in &run.notes {
            let _ = writeln!(
                out,
                "<p class=\"note\">repeat {}: {}</p>",
                escape(label),
                escape(note)
            );
        }
    }

    let over = |of: fn(&Summary) -> Option<f64>| {
        noise::over_repeats(&summaries.iter().filter_map(of).collect::<Vec<_>>())
    };
    let throughput = over(FIGURES[0].2);
    let p99 = over(FIGURES[2].2);
    let (tone, answer, details) = verdict(&labels, &summaries, throughput, p99);
    html::verdict(&mut out, tone, &answer, &details);

    spread_table(&mut out, &labels, runs, &summaries);

    let overlays = overlay_charts(&labels, runs);
    let key = 4.min(overlays.len());
    out.push_str("<div class=\"key\">\n");
    for o in &overlays[..key] {
        figure(&mut out, o);
    }
    out.push_str("</div>\n");
    out.push_str(
        "<h2>Repeats</h2>\n<table class=\"runs\">\n<tr><th>repeat</th><th>directory</th>\
         <th>report</th></tr>\n",
    );
    for (label, run) in labels.iter().zip(runs) {
        let _ = writeln!(
            out,
            "<tr><th>{l}</th><td><code>{}</code></td>\
             <td><a href=\"{l}/report.html\">{l}/report.html</a></td></tr>",
            escape(&run.dir.display().to_string()),
            l = escape(label),
        );
    }
    out.push_str("</table>\n<h2>More charts</h2>\n");
    for o in &overlays[key..] {
        figure(&mut out, o);
    }
    html::close_page(&mut out, &dir.display().to_string());
    out
}

/// The set's verdict: the throughput and p99 over the repeats with their 95% intervals; how
/// far apart the repeats' throughputs are; any repeat that failed or had errors.
fn verdict(
    labels: &[String],
    summaries: &[Summary],
    throughput: Option<Spread>,
    p99: Option<Spread>,
) -> (Tone, String, Vec<String>) {
    let n = summaries.len();
    let with_ci = |s: &Spread, show: fn(f64) -> String| match s.ci95 {
        Some(h) => format!("{} ± {}", show(s.value), show(h)),
        None => show(s.value),
    };
    let mut tone = Tone::Good;
    let mut answer = format!("{n} repeat{}", if n == 1 { "" } else { "s" });
    match &throughput {
        Some(t) => {
            let _ = write!(
                answer,
                ": throughput {} responses/s",
                with_ci(t, html::short)
            );
        }
        None => answer.push_str(": no throughput measured"),
    }
    if let Some(p) = &p99 {
        let _ = write!(answer, ", latency p99 {} ms", with_ci(p, html::short_ms));
    }
    if throughput.is_some_and(|t| t.ci95.is_some()) {
        answer.push_str(" (mean and 95% interval over the repeats)");
    } else {
        tone = Tone::Warn;
        answer.push_str(" (noise not known: fewer than 2 repeats)");
    }
    let mut details = Vec::new();
    let rps: Vec<f64> = summaries.iter().filter_map(|s| s.throughput_rps).collect();
    if let (Some(t), true) = (&throughput, rps.len() > 1) {
        let lo = rps.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        details.push(escape(&format!(
            "The repeats' throughput ranges from {} to {} responses/s{}.",
            html::short(lo),
            html::short(hi),
            if t.value > 0.0 {
                format!(" ({} of the mean)", html::percent((hi - lo) / t.value))
            } else {
                String::new()
            }
        )));
    }
    for (label, s) in labels.iter().zip(summaries) {
        let (t, a, _) = html::run_verdict(s);
        if t != Tone::Good {
            details.push(format!("repeat {}: {}", escape(label), escape(&a)));
        }
        tone = tone.max(t);
    }
    (tone, answer, details)
}

/// Every repeat's headline figures, their mean, 95% interval, smallest and largest; below the
/// throughput and p99, each repeat's own interval from its intervals.
fn spread_table(out: &mut String, labels: &[String], runs: &[RunData], summaries: &[Summary]) {
    let heads: String = labels
        .iter()
        .map(|l| format!("<th class=\"run n\">{}</th>", escape(l)))
        .collect();
    let _ = writeln!(
        out,
        "<h2>Spread over the repeats</h2>\n<p>Each repeat's figure, then their mean, the 95% \
         interval of the mean (Student t over the repeats), the smallest and the largest. The \
         rows \"within the repeat\" give each repeat's own 95% interval from its intervals: \
         what one run alone would have claimed.</p>\n<table class=\"figures repeats\">\n\
         <tr><th></th>{heads}<th class=\"n\">mean</th><th class=\"n\">95% interval</th>\
         <th class=\"n\">min</th><th class=\"n\">max</th></tr>"
    );
    let noise: Vec<RunNoise> = runs
        .iter()
        .zip(summaries)
        .map(|(r, s)| RunNoise::of_run(r, s))
        .collect();
    for (name, show, of) in FIGURES {
        let values: Vec<Option<f64>> = summaries.iter().map(of).collect();
        let _ = write!(out, "<tr><th>{name}</th>");
        for v in &values {
            let _ = write!(
                out,
                "<td class=\"n\">{}</td>",
                v.map_or(MISSING.to_string(), show)
            );
        }
        let known: Vec<f64> = values.iter().flatten().copied().collect();
        let s = noise::over_repeats(&known);
        let cell = |v: Option<f64>| v.map_or(MISSING.to_string(), show);
        let finite = || known.iter().copied().filter(|v| v.is_finite());
        let _ = writeln!(
            out,
            "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            cell(s.map(|s| s.value)),
            s.and_then(|s| s.ci95)
                .map_or(MISSING.to_string(), |h| format!("± {}", show(h))),
            cell(finite().reduce(f64::min)),
            cell(finite().reduce(f64::max)),
        );
        let within: Option<Vec<Option<&Spread>>> = match name {
            "throughput (responses/s)" => {
                Some(noise.iter().map(|n| n.throughput.as_ref()).collect())
            }
            "latency p99 (ms)" => Some(noise.iter().map(|n| n.p99.as_ref()).collect()),
            _ => None,
        };
        if let Some(within) = within {
            let _ = write!(
                out,
                "<tr><th>{} within the repeat</th>",
                name.split(" (").next().unwrap_or(name)
            );
            for w in within {
                let _ = write!(
                    out,
                    "<td class=\"n\">{}</td>",
                    w.and_then(|w| w.ci95)
                        .map_or(MISSING.to_string(), |h| format!("± {}", show(h)))
                );
            }
            out.push_str("<td></td><td></td><td></td><td></td></tr>\n");
        }
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_run(dir: &Path, rps: &[f64], p99: u64) {
        std::fs::create_dir_all(dir).unwrap();
        let lines: String = rps
            .iter()
            .enumerate()
            .map(|(i, r)| {
                format!(
                    "{{\"index\":{i},\"t_s\":{i}.0,\"length_s\":1.0,\"responses\":{n},\
                     \"rps\":{r},\"latency_us\":{{\"p99\":{p99}}}}}\n",
                    n = *r as u64
                )
            })
            .collect();
        std::fs::write(dir.join("intervals.jsonl"), lines).unwrap();
        let mean = rps.iter().sum::<f64>() / rps.len() as f64;
        let total = rps.iter().sum::<f64>() as u64;
        std::fs::write(
            dir.join("summary.json"),
            format!(
                "{{\"command\":\"headroom run x --repeat 3\",\"throughput_rps\":{mean},\
                 \"requests\":{total},\"responses\":{total},\"errors_total\":0,\
                 \"error_rate\":0.0,\"latency_us\":{{\"count\":{total},\"p50\":500,\
                 \"p99\":{p99}}}}}"
            ),
        )
        .unwrap();
    }

    #[test]
    fn a_set_of_three_shows_mean_and_interval_over_the_repeats() {
        let tmp = tempfile::tempdir().unwrap();
        let set = tmp.path().join("set");
        write_run(&set.join("1"), &[100.0, 100.0], 1000);
        write_run(&set.join("2"), &[110.0, 110.0], 2000);
        write_run(&set.join("3"), &[120.0, 120.0], 3000);
        // Not a repeat: the numbering stops at the first gap.
        write_run(&set.join("5"), &[9999.0, 9999.0], 1);
        assert!(is_repeats_dir(&set));
        assert!(!is_repeats_dir(&set.join("1")));
        assert!(!is_repeats_dir(tmp.path()));
        assert_eq!(repeat_dirs(&set).len(), 3);
        let html = render_repeats(&set).unwrap();
        // repeats.json, when there, says which repeats are the set's: not an older set's 3, and
        // not a path out of the directory.
        std::fs::write(set.join("repeats.json"), r#"{"runs": ["1", "2"]}"#).unwrap();
        assert_eq!(repeat_dirs(&set), [set.join("1"), set.join("2")]);
        std::fs::write(
            set.join("repeats.json"),
            r#"{"runs": ["1", "../x", "/etc"]}"#,
        )
        .unwrap();
        assert_eq!(repeat_dirs(&set).len(), 3, "a bad list is not followed");
        std::fs::write(set.join("repeats.json"), " ".repeat(70 * 1024) + "{}").unwrap();
        assert_eq!(repeat_dirs(&set).len(), 3, "nor one too long to read");
        std::fs::write(set.join("repeats.json"), r#"{"runs": []}"#).unwrap();
        assert!(is_repeats_dir(&set) && repeat_dirs(&set).is_empty());
        assert!(matches!(
            render_repeats(&set),
            Err(ReportError::NotARun { .. })
        ));
        std::fs::remove_file(set.join("repeats.json")).unwrap();
        // mean 110, half-width t(2) · 10 / √3 = 4.302653 · 5.7735 = 24.84.
        let v = &html[html.find("<section class=\"verdict").unwrap()..];
        let v = &v[..v.find("</section>").unwrap()];
        assert!(v.contains("data-verdict=\"good\""), "{v}");
        assert!(
            v.contains(
                "3 repeats: throughput 110 ± 24.8 responses/s, latency p99 2.00 ± 2.48 ms \
                 (mean and 95% interval over the repeats)"
            ),
            "{v}"
        );
        assert!(
            v.contains("ranges from 100 to 120 responses/s (18.2% of the mean)"),
            "{v}"
        );
        assert!(html.contains(
            "<tr><th>throughput (responses/s)</th><td class=\"n\">100</td>\
             <td class=\"n\">110</td><td class=\"n\">120</td><td class=\"n\">110</td>\
             <td class=\"n\">± 24.8</td><td class=\"n\">100</td><td class=\"n\">120</td></tr>"
        ));
        // Each repeat's own interval: constant intervals, no noise within.
        assert!(html.contains("<tr><th>throughput within the repeat</th><td class=\"n\">± 0</td>"));
        assert!(html.contains("<a href=\"2/report.html\">"));
        assert!(!html.contains("9,999") && !html.contains("9999"));
        assert!(html.contains("data-series=\"3: rps\""));
    }

    #[test]
    fn one_repeat_has_no_known_noise_and_an_empty_set_is_not_a_run() {
        let tmp = tempfile::tempdir().unwrap();
        write_run(&tmp.path().join("1"), &[100.0, 100.0], 1000);
        let html = render_repeats(tmp.path()).unwrap();
        assert!(html.contains("data-verdict=\"warn\""));
        assert!(html.contains(
            "1 repeat: throughput 100 responses/s, latency p99 1.00 ms \
                               (noise not known: fewer than 2 repeats)"
        ));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            render_repeats(empty.path()),
            Err(ReportError::NotARun { .. })
        ));
        // A repeat that is not JSON names its file.
        std::fs::create_dir_all(tmp.path().join("2")).unwrap();
        std::fs::write(tmp.path().join("2").join("summary.json"), "{").unwrap();
        match render_repeats(tmp.path()) {
            Err(ReportError::Json { path, .. }) => {
                assert_eq!(path, tmp.path().join("2").join("summary.json"))
            }
            other => panic!("{other:?}"),
        }
    }
}
