//! Small numerical helpers for checking sampled distributions: the normal CDF and quantile, the
//! one-sample Kolmogorov–Smirnov statistic and its critical value, and a seedable SplitMix64
//! generator of uniform variates.
//!
//! Core has no `rand` dependency; these are enough for the workload models (which take uniform
//! variates) and for the statistical tests that check them.

/// The complementary error function, erfc(x) = 1 - erf(x), to about 1e-13 relative accuracy.
///
/// For |x| < 2.5 the Maclaurin series of erf (whose terms stay below ~20, so little is lost to
/// cancellation); beyond, the continued fraction
/// erfc(x) = exp(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))), evaluated backwards.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.5 {
        // erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1))
        let x2 = x * x;
        let mut term = x; // (-1)^n x^(2n+1) / n!
        let mut sum = x;
        let mut n = 0.0;
        loop {
            n += 1.0;
            term *= -x2 / n;
            let add = term / (2.0 * n + 1.0);
            sum += add;
            if add.abs() <= 1e-17 * sum.abs() || n > 200.0 {
                break;
            }
        }
        1.0 - sum * std::f64::consts::FRAC_2_SQRT_PI
    } else if x > 27.0 {
        0.0
    } else {
        let mut f = x;
        for n in (1..=80).rev() {
            f = x + (n as f64 / 2.0) / f;
        }
        (-x * x).exp() / (std::f64::consts::PI.sqrt() * f)
    }
}

/// The standard normal CDF Φ(x).
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// The standard normal density φ(x).
pub fn normal_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The standard normal quantile Φ⁻¹(p) for p in (0, 1); ±infinity at 0 and 1, NaN outside.
///
/// Starts from Abramowitz & Stegun 26.2.23 (error < 4.5e-4) and refines with Halley steps on
/// [`normal_cdf`], so the result is as accurate as the CDF (~1e-13).
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p.min(1.0 - p);
    let t = (-2.0 * q.ln()).sqrt();
    let mut x = t
        - (2.515517 + 0.802853 * t + 0.010328 * t * t)
            / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
    if p < 0.5 {
        x = -x;
    }
    for _ in 0..4 {
        let e = normal_cdf(x) - p;
        let d = normal_pdf(x);
        if d == 0.0 {
            break;
        }
        let u = e / d;
        // Halley: x -= u / (1 + x u / 2)
        let step = u / (1.0 + x * u / 2.0);
        x -= step;
        if step.abs() < 1e-15 * x.abs().max(1.0) {
            break;
        }
    }
    x
}

/// The one-sample Kolmogorov–Smirnov statistic D = sup |F_n(x) - F(x)| of `sorted_samples`
/// (ascending) against the continuous CDF `cdf`.
///
/// Computed at the jumps of the empirical CDF: D = max over i of max((i+1)/n - F(x_i),
/// F(x_i) - i/n). Returns 0 for an empty sample. Panics in debug builds if the samples are not
/// sorted.
pub fn ks_statistic(sorted_samples: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let n = sorted_samples.len();
    debug_assert!(
        sorted_samples.windows(2).all(|w| w[0] <= w[1]),
        "ks_statistic needs sorted samples"
    );
    let nf = n as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in sorted_samples.iter().enumerate() {
        let f = cdf(x);
        d = d.max((i + 1) as f64 / nf - f).max(f - i as f64 / nf);
    }
    d
}

/// The asymptotic critical value of the one-sample KS statistic at significance `alpha` for `n`
/// samples: sqrt(-ln(alpha/2)/2) / sqrt(n). At alpha = 0.001 that is 1.95/sqrt(n); at 0.01,
/// 1.63/sqrt(n); at 0.05, 1.36/sqrt(n). Accurate for n of a few hundred and more.
pub fn ks_critical(n: usize, alpha: f64) -> f64 {
    (-(alpha / 2.0).ln() / 2.0).sqrt() / (n.max(1) as f64).sqrt()
}

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, fast, seedable generator whose output passes
/// BigCrush. Good for reproducible workload data (file sizes), not for cryptography.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform variate in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_reference_values() {
        // Reference values from the closed forms / standard tables.
        let cases = [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_13),
            (2.0, 0.004_677_734_981_047_266),
            (2.5, 4.069_520_174_449_59e-4),
            (3.0, 2.209_049_699_858_544e-5),
            (5.0, 1.537_459_794_428_035e-12),
            (-1.0, 1.842_700_792_949_715),
        ];
        for (x, want) in cases {
            let got = erfc(x);
            assert!(
                ((got - want) / want).abs() < 1e-11,
                "erfc({x}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn normal_quantile_inverts_cdf() {
        assert!((normal_cdf(1.96) - 0.975_002_104_851_779_5).abs() < 1e-13);
        for p in [1e-12, 1e-6, 0.001, 0.025, 0.3, 0.5, 0.7, 0.975, 0.999_999] {
            let x = normal_quantile(p);
            assert!(
                ((normal_cdf(x) - p) / p).abs() < 1e-10,
                "p {p} x {x} cdf {}",
                normal_cdf(x)
            );
        }
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-11);
        assert!(normal_quantile(0.5).abs() < 1e-15);
    }

    #[test]
    fn ks_of_a_perfect_grid_is_half_a_step() {
        let n = 1000;
        let xs: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect();
        let d = ks_statistic(&xs, |x| x.clamp(0.0, 1.0));
        assert!((d - 0.5 / n as f64).abs() < 1e-12, "{d}");
        assert!((ks_critical(10_000, 0.001) - 0.019_495).abs() < 1e-5);
    }

    #[test]
    fn splitmix_is_uniform_and_reproducible() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let mut xs: Vec<f64> = (0..20_000).map(|_| a.next_f64()).collect();
        assert_eq!(xs[0], b.next_f64());
        xs.sort_by(f64::total_cmp);
        let d = ks_statistic(&xs, |x| x.clamp(0.0, 1.0));
        assert!(d < ks_critical(xs.len(), 0.001), "{d}");
    }
}
