//! `headroom run --repeat N`: the same load N times, one run directory each (`DIR/1` ...
//! `DIR/N`), and `DIR/repeats.json`, the spread over them: each headline figure's mean and the
//! half-width of its 95% confidence interval over the repeats (Student t, the repeats taken as
//! independent: each starts afresh, unlike the intervals within a run), with its smallest and
//! largest value.
//!
//! The report of `DIR` (`headroom report DIR`) reads the repeats' own directories, not this
//! file: a set cut short (Ctrl-C, a killed process) still has a report from what ran.

use headroom_core::stats::mean_ci;

use crate::RunSummary;

/// Bumped when a field changes meaning or goes away (adding one does not).
pub const REPEATS_FORMAT_VERSION: u32 = 1;

/// The most repeats `--repeat` takes: a spread is known from 2; past 100 a lab experiment (with
/// its store and tables) is the better tool.
pub const MAX_REPEATS: u32 = 100;

/// A figure over the repeats that have it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Spread {
    pub mean: f64,
    /// Half-width of the 95% confidence interval of the mean; `null` with one value.
    pub ci95: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// How many repeats have the figure.
    pub n: usize,
}

/// repeats.json.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Repeats {
    pub format_version: u32,
    /// The command line, as each repeat's summary.json has it.
    pub command: String,
    /// `--repeat N`.
    pub asked: u32,
    /// The repeats' directories relative to this one, in the order they ran ("1", "2", ...).
    pub runs: Vec<String>,
    /// Whether the set stopped before its N repeats (Ctrl-C).
    pub interrupted: bool,
    pub throughput_rps: Option<Spread>,
    /// Corrected for coordinated omission; repeats without a response left out.
    pub latency_p50_us: Option<Spread>,
    pub latency_p99_us: Option<Spread>,
    pub error_rate: Option<Spread>,
}

fn spread(values: impl Iterator<Item = f64>) -> Option<Spread> {
    let values: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    let c = mean_ci(&values)?;
    Some(Spread {
        mean: c.mean,
        ci95: c.ci95,
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        n: c.n,
    })
}

impl Repeats {
    /// The spread of the repeats that ran, `(directory name, summary)` in the order they ran.
    pub fn build(asked: u32, runs: &[(String, &RunSummary)]) -> Repeats {
        let answered = || runs.iter().map(|(_, s)| *s).filter(|s| s.responses > 0);
        Repeats {
            format_version: REPEATS_FORMAT_VERSION,
            command: runs
                .first()
                .map(|(_, s)| s.command.clone())
                .unwrap_or_default(),
            asked,
            runs: runs.iter().map(|(d, _)| d.clone()).collect(),
            interrupted: runs.len() < asked as usize || runs.iter().any(|(_, s)| s.interrupted),
            throughput_rps: spread(runs.iter().map(|(_, s)| s.throughput_rps)),
            latency_p50_us: spread(answered().map(|s| s.latency_us.p50 as f64)),
            latency_p99_us: spread(answered().map(|s| s.latency_us.p99 as f64)),
            error_rate: spread(runs.iter().map(|(_, s)| s.error_rate)),
        }
    }

    /// The spread in two lines for the human summary after the last repeat.
    pub fn human(&self) -> String {
        let ci = |s: &Spread, scale: f64| match s.ci95 {
            Some(h) => format!("{:.1} ± {:.1}", s.mean / scale, h / scale),
            None => format!("{:.1}", s.mean / scale),
        };
        let mut out = format!(
            "Repeats        {} of {}{} (mean ± 95% interval over the repeats)\n",
            self.runs.len(),
            self.asked,
            if self.interrupted {
                ", interrupted"
            } else {
                ""
            }
        );
        if let Some(t) = &self.throughput_rps {
            out.push_str(&format!(
                "  Throughput   {} responses/s (min {:.1}, max {:.1})\n",
                ci(t, 1.0),
                t.min,
                t.max
            ));
        }
        if let Some(p) = &self.latency_p99_us {
            out.push_str(&format!(
                "  Latency p99  {} ms (min {:.2}, max {:.2})\n",
                ci(p, 1000.0),
                p.min / 1000.0,
                p.max / 1000.0
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_known_values() {
        let s = spread([10.0, 12.0, f64::NAN].into_iter()).unwrap();
        assert_eq!((s.mean, s.min, s.max, s.n), (11.0, 10.0, 12.0, 2));
        assert!((s.ci95.unwrap() - 12.706_204_7).abs() < 1e-6);
        let one = spread([5.0].into_iter()).unwrap();
        assert_eq!((one.mean, one.ci95, one.n), (5.0, None, 1));
        assert_eq!(spread(std::iter::empty()), None);
    }
}
