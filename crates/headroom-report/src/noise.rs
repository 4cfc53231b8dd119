//! How sure a figure is: a 95% interval on a run's throughput and p99 latency, so that a
//! comparison can tell a difference from noise (issue 27).
//!
//! Within one run the interval comes from the run's per-interval values (intervals.jsonl: each
//! interval's `rps` and `latency_us.p99`), with their autocorrelation allowed for by the
//! effective sample size of [`headroom_core::stats::series_mean_ci`] (which says why that
//! method). Over the repeats of `headroom run --repeat N` it comes from the repeats' own
//! figures, taken as independent ([`headroom_core::stats::mean_ci`], Student t).
//!
//! The interval is centred on the run's own figure (summary.json's `throughput_rps` and
//! `latency_us.p99`) and its half-width is that of the mean of the per-interval values. For
//! throughput the two centres agree (responses over time). For p99 the run's p99 is not the
//! mean of the intervals' p99s, so the half-width is an approximation: the spread of the
//! intervals' p99s stands for the uncertainty of the run's.
//!
//! Two figures differ *beyond noise* when their intervals do not overlap. That is a stricter
//! test than a 5% two-sample test (non-overlapping 95% intervals mean roughly p < 0.006 for
//! equal widths: Schenker & Gentleman 2001, "On judging the significance of differences by
//! examining the overlap between confidence intervals", The American Statistician 55(3)): a
//! report that says "within noise" too often is better than one that names a winner from noise.

use headroom_core::stats::{mean_ci, series_mean_ci, SeriesMean};

use crate::data::{Interval, RunData, Summary};
use crate::html::measured;

/// A figure with the half-width of its 95% interval and where the interval came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub value: f64,
    /// None when it cannot be known (fewer than two values).
    pub ci95: Option<f64>,
    pub basis: Basis,
}

/// What a [`Spread`]'s interval was computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Basis {
    /// `n` intervals of one run, worth `n_eff` independent ones.
    Intervals { n: usize, n_eff: f64 },
    /// `n` repeats of a run.
    Repeats { n: usize },
}

impl Spread {
    /// Whether `self` and `other` differ beyond noise: Some(true) when their intervals are
    /// apart, Some(false) when they overlap, None when either interval is not known.
    pub fn apart(&self, other: &Spread) -> Option<bool> {
        let (a, b) = (self.ci95?, other.ci95?);
        Some((self.value - other.value).abs() > a + b)
    }

    /// The interval in words for a figure shown by `show`: "± 120 (95%, 5 intervals worth
    /// 2.1)", "± 120 (95% over 3 repeats)", or "noise not known (1 interval)".
    pub fn describe(&self, show: fn(f64) -> String) -> String {
        let basis = match self.basis {
            Basis::Intervals { n, n_eff } if (n_eff - n as f64).abs() < 0.05 => {
                format!("{n} interval{}", if n == 1 { "" } else { "s" })
            }
            Basis::Intervals { n, n_eff } => {
                format!("{n} intervals worth {:.1} for autocorrelation", n_eff)
            }
            Basis::Repeats { n } => format!("{n} repeat{}", if n == 1 { "" } else { "s" }),
        };
        match self.ci95 {
            Some(h) => format!("± {} (95%, {basis})", show(h)),
            None => format!("noise not known ({basis})"),
        }
    }
}

/// The per-interval values the intervals are computed from: every interval at least half as
/// long as the longest (the last one, cut short by the end of the run, is noisier by being
/// shorter and is left out), with a positive length. Throughput is the interval's `rps` (or
/// responses / length); p99 only from intervals with responses.
fn series(intervals: &[Interval], of: fn(&Interval) -> Option<f64>) -> Vec<f64> {
    let longest = intervals
        .iter()
        .filter_map(|iv| iv.length_s)
        .filter(|l| l.is_finite() && *l > 0.0)
        .fold(0.0, f64::max);
    intervals
        .iter()
        .filter(|iv| {
            iv.length_s
                .is_some_and(|l| l.is_finite() && l > 0.0 && l >= 0.5 * longest)
        })
        .filter_map(of)
        .filter(|v| v.is_finite())
        .collect()
}

fn interval_rps(iv: &Interval) -> Option<f64> {
    iv.rps.or_else(|| Some(iv.responses? as f64 / iv.length_s?))
}

fn interval_p99(iv: &Interval) -> Option<f64> {
    if iv.responses == Some(0) {
        return None;
    }
    iv.latency_us.p99
}

/// A figure of a run centred on `figure` (the run's own), or on the intervals' mean when the
/// run has none (killed before summary.json); None when neither is known.
fn of_series(figure: Option<f64>, values: &[f64]) -> Option<Spread> {
    let s: Option<SeriesMean> = series_mean_ci(values);
    let value = figure.filter(|v| v.is_finite()).or(s.map(|s| s.mean))?;
    Some(Spread {
        value,
        ci95: s.and_then(|s| s.ci95),
        basis: Basis::Intervals {
            n: s.map_or(0, |s| s.n),
            n_eff: s.map_or(0.0, |s| s.n_eff),
        },
    })
}

/// A run's throughput (responses/s) with its interval from the run's intervals.
pub fn throughput(run: &RunData, summary: &Summary) -> Option<Spread> {
    of_series(
        summary.throughput_rps,
        &series(&run.intervals, interval_rps),
    )
}

/// A run's p99 latency (µs, corrected) with its interval from the run's intervals.
pub fn p99(run: &RunData, summary: &Summary) -> Option<Spread> {
    of_series(
        measured(&summary.latency_us).and_then(|f| f.p99),
        &series(&run.intervals, interval_p99),
    )
}

/// A figure over repeats: the mean of the repeats' values and its 95% interval (Student t,
/// the repeats independent). Non-finite values are left out; None when none is left.
pub fn over_repeats(values: &[f64]) -> Option<Spread> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let c = mean_ci(&finite)?;
    Some(Spread {
        value: c.mean,
        ci95: c.ci95.filter(|h| h.is_finite()),
        basis: Basis::Repeats { n: c.n },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(length: f64, rps: f64, p99: f64) -> Interval {
        let mut i = Interval {
            length_s: Some(length),
            rps: Some(rps),
            responses: Some((rps * length) as u64),
            ..Interval::default()
        };
        i.latency_us.p99 = Some(p99);
        i
    }

    #[test]
    fn the_last_short_interval_and_empty_ones_are_left_out() {
        let ivs = [
            iv(1.0, 100.0, 10.0),
            iv(1.0, 110.0, 12.0),
            iv(1.0, 0.0, 0.0),
            iv(0.2, 5000.0, 99.0),
        ];
        assert_eq!(series(&ivs, interval_rps), [100.0, 110.0, 0.0]);
        assert_eq!(series(&ivs, interval_p99), [10.0, 12.0]);
        // No length: nothing to weigh it by.
        let bare = Interval {
            rps: Some(1.0),
            ..Interval::default()
        };
        assert!(series(&[bare], interval_rps).is_empty());
    }

    #[test]
    fn a_run_figure_is_centred_on_the_summary_with_the_intervals_spread() {
        let run = RunData {
            intervals: vec![
                iv(1.0, 100.0, 10.0),
                iv(1.0, 104.0, 14.0),
                iv(1.0, 96.0, 12.0),
                iv(1.0, 100.0, 12.0),
            ],
            ..RunData::default()
        };
        let mut s = Summary {
            throughput_rps: Some(101.0),
            ..Summary::default()
        };
        s.latency_us.p99 = Some(20.0);
        let t = throughput(&run, &s).unwrap();
        assert_eq!(t.value, 101.0);
        let want = series_mean_ci(&[100.0, 104.0, 96.0, 100.0])
            .unwrap()
            .ci95
            .unwrap();
        assert_eq!(t.ci95, Some(want));
        assert!(want > 0.0);
        assert_eq!(p99(&run, &s).unwrap().value, 20.0);
        // Killed: no summary figure, the intervals' mean.
        let t = throughput(&run, &Summary::default()).unwrap();
        assert_eq!(t.value, 100.0);
        // One interval: a figure without a known noise.
        let one = RunData {
            intervals: vec![iv(1.0, 100.0, 10.0)],
            ..RunData::default()
        };
        let t = throughput(&one, &s).unwrap();
        assert_eq!(t.ci95, None);
        assert_eq!(
            t.describe(crate::html::short),
            "noise not known (1 interval)"
        );
        assert_eq!(throughput(&RunData::default(), &Summary::default()), None);
    }

    #[test]
    fn apart_only_when_the_intervals_do_not_overlap() {
        let s = |value, ci95| Spread {
            value,
            ci95,
            basis: Basis::Repeats { n: 3 },
        };
        assert_eq!(s(100.0, Some(5.0)).apart(&s(109.0, Some(5.0))), Some(false));
        assert_eq!(s(100.0, Some(5.0)).apart(&s(111.0, Some(5.0))), Some(true));
        assert_eq!(s(100.0, Some(0.0)).apart(&s(100.0, Some(0.0))), Some(false));
        assert_eq!(s(100.0, None).apart(&s(500.0, Some(1.0))), None);
        assert_eq!(
            s(100.0, Some(5.0)).describe(crate::html::short),
            "± 5.00 (95%, 3 repeats)"
        );
        let r = over_repeats(&[10.0, 12.0, f64::NAN]).unwrap();
        assert_eq!((r.value, r.basis), (11.0, Basis::Repeats { n: 2 }));
        assert!((r.ci95.unwrap() - 12.706_204_7).abs() < 1e-6);
        assert_eq!(over_repeats(&[f64::NAN]), None);
    }

    #[test]
    fn hostile_intervals_give_no_interval_rather_than_a_panic_or_a_wrong_one() {
        let mut ivs = vec![
            iv(f64::INFINITY, 1.0, 1.0),
            iv(-1.0, 2.0, 2.0),
            iv(f64::NAN, 3.0, 3.0),
            iv(0.0, 4.0, 4.0),
        ];
        assert!(series(&ivs, interval_rps).is_empty());
        // Values whose sums overflow: a figure, no interval.
        ivs = vec![
            iv(1.0, f64::MAX, f64::MAX),
            iv(1.0, -f64::MAX, 1.0),
            iv(1.0, f64::MAX, 1.0),
        ];
        let run = RunData {
            intervals: ivs,
            ..RunData::default()
        };
        let t = throughput(&run, &Summary::default());
        assert!(t.is_none_or(|t| t.ci95.is_none_or(f64::is_finite)), "{t:?}");
        // responses/length with no rps; a zero length never divides.
        let bare = Interval {
            length_s: Some(2.0),
            responses: Some(10),
            ..Interval::default()
        };
        assert_eq!(series(&[bare], interval_rps), [5.0]);
    }
}
