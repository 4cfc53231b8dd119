//! Small numerical helpers for checking sampled distributions: the normal CDF and quantile, the
//! one-sample Kolmogorov–Smirnov statistic and its critical value, and a seedable SplitMix64
//! generator of uniform variates. Also the 95% confidence intervals that reports put on
//! figures: over repetitions ([`mean_ci`], independent values) and over the intervals of one
//! run ([`series_mean_ci`], values that follow each other in time).
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

/// Two-sided 97.5% quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706_204_7,
    4.302_652_7,
    3.182_446_3,
    2.776_445_1,
    2.570_581_8,
    2.446_911_9,
    2.364_624_3,
    2.306_004_1,
    2.262_157_2,
    2.228_138_9,
    2.200_985_2,
    2.178_812_8,
    2.160_368_7,
    2.144_786_7,
    2.131_449_5,
    2.119_905_3,
    2.109_815_6,
    2.100_922_0,
    2.093_024_1,
    2.085_963_4,
    2.079_613_8,
    2.073_873_1,
    2.068_657_6,
    2.063_898_6,
    2.059_538_6,
    2.055_529_4,
    2.051_830_5,
    2.048_407_1,
    2.045_229_6,
    2.042_272_5,
];

/// The 97.5% quantile of Student's t with `df` degrees of freedom (df >= 1): from a table up to
/// 30, then the Cornish-Fisher expansion around the normal 1.959964 (within 1e-4 of the exact
/// quantile past 30, and tending to 1.96).
pub fn t_975(df: usize) -> f64 {
    assert!(df >= 1, "Student t needs at least one degree of freedom");
    if df <= T_975.len() {
        return T_975[df - 1];
    }
    let z: f64 = 1.959_963_984_540_054;
    let n = df as f64;
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * n)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * n * n)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * n * n * n)
}

/// A mean with the half-width of its 95% confidence interval. Serialised (a lab's
/// `tables.json`) as `{"mean": .., "ci95": .. or null, "n": ..}`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct MeanCi {
    pub mean: f64,
    /// Half-width of the 95% confidence interval of the mean (Student t), None with one value.
    pub ci95: Option<f64>,
    /// How many values.
    pub n: usize,
}

/// Mean and 95% confidence interval of the mean (Student t, sample standard deviation) of
/// `values`, all of them counted (the caller leaves out values it does not want, e.g. NaN), taken
/// as independent (repetitions of a run). None for no values; `ci95` is None for a single value.
pub fn mean_ci(values: &[f64]) -> Option<MeanCi> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let ci95 = (n > 1).then(|| {
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        t_975(n - 1) * (var / n as f64).sqrt()
    });
    Some(MeanCi { mean, ci95, n })
}

/// The mean of a time series (one value per interval of a run) with a 95% confidence interval
/// that allows for autocorrelation: see [`series_mean_ci`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesMean {
    pub mean: f64,
    /// Half-width of the 95% interval; None with fewer than two values or when the values
    /// overflow.
    pub ci95: Option<f64>,
    /// How many values.
    pub n: usize,
    /// The lag-1 autocorrelation estimated from the values (0 with fewer than two).
    pub r1: f64,
    /// The effective sample size the interval was computed with, between 1 and `n`.
    pub n_eff: f64,
}

/// Mean and 95% confidence interval of the mean of `values` taken in order, one per interval
/// of a run. Values that are not finite are left out. None when none is left.
///
/// Successive intervals of a run are not independent: a server that is slow for a second (a
/// GC pause, a neighbour's burst, a cache warming) is often slow the next second too, so the
/// plain `s/√n` understates the uncertainty of the mean. The method here is the *effective
/// sample size* from the lag-1 autocorrelation r₁, the first-order (AR(1)) correction
/// (Bayley & Hammersley 1946, "The effective number of independent observations in an
/// autocorrelated time series"; Wilks, *Statistical Methods in the Atmospheric Sciences*, 3rd
/// ed., §5.2.4, eq. 5.12; Zwiers & von Storch 1995, J. Climate 8):
///
/// - the mean's standard error is s / √n_eff with n_eff = n (1 − r₁) / (1 + r₁): for an AR(1)
///   series Var(mean) ≈ σ²/n · (1 + ρ)/(1 − ρ);
/// - the t quantile takes the degrees of freedom of s² itself, ν = n (1 − r₁²) / (1 + r₁²) − 1
///   (for an AR(1) series Var(s²) ≈ 2σ⁴/n · (1 + ρ²)/(1 − ρ²), which is that of a χ² with
///   n (1 − ρ²)/(1 + ρ²) degrees of freedom), rounded down, at least 1. Taking n_eff − 1 there
///   instead would count the autocorrelation twice over: at r₁ = 0.4 from five intervals it
///   gives t(1) = 12.7 where ν gives t(2) = 4.3.
///
/// Why not batch means (Law & Kelton, *Simulation Modeling and Analysis*, §9.5.3: the mean of
/// each block of m intervals, treated as independent)? It wants 10 to 30 batches of intervals
/// long enough to be nearly independent (Schmeiser 1982), hundreds of intervals; the runs this
/// judges are often 5 to 60 one-second intervals, where batch means is left with one interval
/// per batch and no correction at all. r₁ can be estimated from any run of two or more
/// intervals. Its limits, which the choices here lean against: r₁ from a short series is
/// biased low (by about −1/n) and noisy, and an AR(1) model misses longer memory. So a negative
/// r₁ counts as 0 (the interval is never made narrower than the independent one), and n_eff is
/// at least 1: a short run that drifts gets a very wide interval, which is the honest answer.
pub fn series_mean_ci(values: &[f64]) -> Option<SeriesMean> {
    let xs: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let mut out = SeriesMean {
        mean,
        ci95: None,
        n,
        r1: 0.0,
        n_eff: n as f64,
    };
    if n < 2 || !mean.is_finite() {
        return Some(out);
    }
    let ss: f64 = xs.iter().map(|v| (v - mean).powi(2)).sum();
    if !ss.is_finite() {
        return Some(out);
    }
    if ss == 0.0 {
        out.ci95 = Some(0.0);
        return Some(out);
    }
    let lagged: f64 = xs.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum();
    let r1 = (lagged / ss).clamp(-1.0, 1.0);
    let rho = r1.max(0.0);
    let n_eff = (n as f64 * (1.0 - rho) / (1.0 + rho)).clamp(1.0, n as f64);
    let var = ss / (n - 1) as f64;
    let nu = n as f64 * (1.0 - rho * rho) / (1.0 + rho * rho) - 1.0;
    let df = (nu.floor() as usize).max(1);
    out.r1 = r1;
    out.n_eff = n_eff;
    out.ci95 = Some(t_975(df) * (var / n_eff).sqrt()).filter(|h| h.is_finite());
    Some(out)
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

    #[test]
    fn t_quantiles_and_mean_ci() {
        assert_eq!(t_975(1), 12.706_204_7);
        assert!((t_975(31) - 2.039_513).abs() < 1e-4, "{}", t_975(31));
        assert!((t_975(1000) - 1.962_339).abs() < 1e-4);
        let c = mean_ci(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!((c.mean, c.n), (3.0, 5));
        assert!((c.ci95.unwrap() - 1.963_243).abs() < 1e-5, "{c:?}");
    }

    #[test]
    fn series_of_known_values() {
        // 1..5: mean 3, Σ(x-m)² = 10, Σ lag-1 products = 2 + 0 + 0 + 2 = 4, so r₁ = 0.4,
        // n_eff = 5 · 0.6 / 1.4 = 2.142857, ν = 5 · 0.84 / 1.16 - 1 = 2.62 so 2 degrees of
        // freedom, half-width 4.3026527 · √(2.5 / 2.142857) = 4.647396.
        let s = series_mean_ci(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!((s.mean, s.n), (3.0, 5));
        assert!((s.r1 - 0.4).abs() < 1e-12, "{s:?}");
        assert!((s.n_eff - 15.0 / 7.0).abs() < 1e-12, "{s:?}");
        assert!((s.ci95.unwrap() - 4.647_396).abs() < 1e-5, "{s:?}");
        // Alternating: r₁ < 0 counts as 0, the interval is the independent one (mean_ci's).
        let alt = [1.0, 3.0, 1.0, 3.0, 1.0, 3.0];
        let s = series_mean_ci(&alt).unwrap();
        assert!(s.r1 < -0.5, "{s:?}");
        assert_eq!(s.n_eff, 6.0);
        assert!((s.ci95.unwrap() - mean_ci(&alt).unwrap().ci95.unwrap()).abs() < 1e-12);
        // A constant series: no noise at all.
        assert_eq!(series_mean_ci(&[7.0; 4]).unwrap().ci95, Some(0.0));
    }

    #[test]
    fn series_of_hostile_values_gives_no_interval_rather_than_a_wrong_one() {
        assert_eq!(series_mean_ci(&[]), None);
        assert_eq!(series_mean_ci(&[f64::NAN, f64::INFINITY]), None);
        let one = series_mean_ci(&[f64::NAN, 5.0]).unwrap();
        assert_eq!((one.mean, one.n, one.ci95), (5.0, 1, None));
        // Finite values whose sums overflow.
        let huge = series_mean_ci(&[f64::MAX, f64::MAX, -f64::MAX]).unwrap();
        assert!(huge.ci95.is_none_or(f64::is_finite), "{huge:?}");
        let big = series_mean_ci(&[1e300, -1e300, 1e300, -1e300]).unwrap();
        assert_eq!(big.ci95, None, "{big:?}");
    }

    /// n standard normal variates (Box-Muller over SplitMix64).
    fn normals(seed: u64, n: usize) -> Vec<f64> {
        let mut g = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let (u, v) = (1.0 - g.next_f64(), g.next_f64());
                (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            })
            .collect()
    }

    #[test]
    fn an_autocorrelated_series_gets_a_wider_interval_than_an_independent_one() {
        let n = 2000;
        let independent: Vec<f64> = normals(42, n).iter().map(|e| 100.0 + e).collect();
        // AR(1) with φ = 0.9 from the same innovations, scaled to the same variance
        // (σ² = 1 / (1 - φ²)): only the order of the values differs in kind.
        let phi: f64 = 0.9;
        let scale = (1.0 - phi * phi).sqrt();
        let mut x = 0.0;
        let ar: Vec<f64> = normals(42, n)
            .iter()
            .map(|e| {
                x = phi * x + e;
                100.0 + x * scale
            })
            .collect();
        let i = series_mean_ci(&independent).unwrap();
        let a = series_mean_ci(&ar).unwrap();
        assert!(i.r1.abs() < 0.1, "{i:?}");
        assert!((a.r1 - phi).abs() < 0.05, "{a:?}");
        // n_eff ≈ 2000 · 0.1 / 1.9 = 105.
        assert!((70.0..150.0).contains(&a.n_eff), "{a:?}");
        let (wi, wa) = (i.ci95.unwrap(), a.ci95.unwrap());
        // √19 ≈ 4.4 times wider in theory.
        assert!(wa > 3.0 * wi, "independent ±{wi}, autocorrelated ±{wa}");
        // The plain independent formula would claim the AR(1) mean far more precisely.
        let naive = mean_ci(&ar).unwrap().ci95.unwrap();
        assert!(wa > 3.0 * naive, "{wa} vs naive {naive}");
        // And the wider interval covers the true mean, 100.
        assert!((a.mean - 100.0).abs() < wa, "{a:?}");
    }
}
