//! Random durations (think times, inter-arrival times) as pure functions of a uniform variate.
//!
//! `sample(u)` maps `u` in [0, 1) to a value by inverse transform, so the engine supplies the
//! randomness (one fast RNG per worker) and tests can feed chosen `u` without any RNG at all.

use std::time::Duration;

/// A distribution of non-negative durations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Always the same value.
    Constant(Duration),
    /// Uniform between `min` and `max` (inclusive of `min`).
    Uniform { min: Duration, max: Duration },
    /// Exponential with the given mean (memoryless: the think time of a Poisson user).
    Exponential { mean: Duration },
    /// Pareto with scale `min` (the smallest value) and shape `alpha` (heavy tail for alpha <= 2).
    Pareto { min: Duration, alpha: f64 },
}

impl Distribution {
    /// The value for uniform variate `u` in [0, 1). Values of `u` outside that range are clamped,
    /// so a bad variate can never produce NaN or a negative duration.
    pub fn sample(&self, u: f64) -> Duration {
        let u = if u.is_finite() {
            u.clamp(0.0, 1.0 - f64::EPSILON)
        } else {
            0.0
        };
        match *self {
            Distribution::Constant(d) => d,
            Distribution::Uniform { min, max } => {
                let span = max.saturating_sub(min).as_secs_f64();
                min + Duration::from_secs_f64(span * u)
            }
            Distribution::Exponential { mean } => {
                // Inverse CDF: -mean * ln(1 - u); 1 - u is in (0, 1], so ln is finite.
                secs(-mean.as_secs_f64() * (1.0 - u).ln())
            }
            Distribution::Pareto { min, alpha } => {
                // Inverse CDF: min / (1 - u)^(1/alpha).
                secs(min.as_secs_f64() / (1.0 - u).powf(1.0 / alpha.max(1e-6)))
            }
        }
    }

    /// The mean of the distribution (infinite for Pareto with alpha <= 1).
    pub fn mean_secs(&self) -> f64 {
        match *self {
            Distribution::Constant(d) => d.as_secs_f64(),
            Distribution::Uniform { min, max } => (min.as_secs_f64() + max.as_secs_f64()) / 2.0,
            Distribution::Exponential { mean } => mean.as_secs_f64(),
            Distribution::Pareto { min, alpha } => {
                if alpha <= 1.0 {
                    f64::INFINITY
                } else {
                    alpha * min.as_secs_f64() / (alpha - 1.0)
                }
            }
        }
    }
}

/// Seconds to a Duration, saturating at one day (a think time beyond that is a mistake, and
/// `Duration::from_secs_f64` panics on overflow); NaN and negatives give zero.
fn secs(s: f64) -> Duration {
    secs_saturating(s, 86_400.0)
}

/// Seconds to a Duration, clamped to `0..=max_s`; NaN gives zero. Never panics, unlike
/// `Duration::from_secs_f64`.
pub fn secs_saturating(s: f64, max_s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s.min(max_s))
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_median_is_mean_ln2() {
        let d = Distribution::Exponential {
            mean: Duration::from_secs(1),
        };
        let m = d.sample(0.5).as_secs_f64();
        assert!((m - std::f64::consts::LN_2).abs() < 1e-9, "{m}");
        assert_eq!(d.sample(0.0), Duration::ZERO);
    }

    #[test]
    fn sample_never_panics_on_bad_variates() {
        let ds = [
            Distribution::Exponential {
                mean: Duration::from_secs(5),
            },
            Distribution::Pareto {
                min: Duration::from_millis(1),
                alpha: 0.5,
            },
            Distribution::Uniform {
                min: Duration::from_secs(2),
                max: Duration::from_secs(1),
            },
        ];
        for d in ds {
            for u in [
                f64::NAN,
                -1.0,
                0.0,
                0.999_999_999_999,
                1.0,
                2.0,
                f64::INFINITY,
            ] {
                let v = d.sample(u);
                assert!(v <= Duration::from_secs(86_400), "{d:?} {u} {v:?}");
            }
        }
    }

    #[test]
    fn uniform_spans_its_range() {
        let d = Distribution::Uniform {
            min: Duration::from_secs(1),
            max: Duration::from_secs(3),
        };
        assert_eq!(d.sample(0.0), Duration::from_secs(1));
        assert_eq!(d.sample(0.5), Duration::from_secs(2));
        assert!((d.mean_secs() - 2.0).abs() < 1e-12);
    }
}
