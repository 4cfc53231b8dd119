//! Statistical checks of the SURGE samplers with fixed seeds: each sampled distribution against
//! its exact CDF or pmf, at a 0.1% significance level, so a correct sampler fails about once in
//! a thousand seeds and these seeds are fixed.
//!
//! Run with `--nocapture` to see the measured statistics.

use headroom_core::stats::{ks_critical, ks_statistic};
use headroom_core::surge::{SurgeParams, Zipf};

/// SplitMix64, self-contained so the test does not depend on the code it checks.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A tiny independent KS helper (D = sup |F_n - F| at the sample points), cross-checked against
/// the library's `ks_statistic`.
fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in xs.iter().enumerate() {
        let f = cdf(x);
        d = d
            .max(((i + 1) as f64 / n - f).abs())
            .max((f - i as f64 / n).abs());
    }
    let lib = ks_statistic(&xs, &cdf);
    assert!((lib - d).abs() < 1e-12, "library KS {lib} vs test KS {d}");
    d
}

/// The 0.1% critical value: 1.95/sqrt(n).
fn critical(n: usize) -> f64 {
    let c = 1.95 / (n as f64).sqrt();
    assert!((ks_critical(n, 0.001) - c).abs() < 1e-3 * c);
    c
}

/// Upper 0.1% point of chi-square with `df` degrees of freedom (Wilson–Hilferty; within ~1% for
/// df >= 3).
fn chi2_critical(df: usize) -> f64 {
    let d = df as f64;
    let z = 3.090_232; // standard normal 99.9th percentile
    let a = 2.0 / (9.0 * d);
    d * (1.0 - a + z * a.sqrt()).powi(3)
}

/// Chi-square statistic of observed counts against expected counts.
fn chi2(observed: &[u64], expected: &[f64]) -> f64 {
    observed
        .iter()
        .zip(expected)
        .map(|(&o, &e)| {
            assert!(e >= 5.0, "bin with expected count {e} < 5");
            (o as f64 - e).powi(2) / e
        })
        .sum()
}

#[test]
fn file_sizes_follow_the_lognormal_body_pareto_tail_mix() {
    let p = SurgeParams::default();
    let n = 40_000;
    let mut rng = Rng(1998);
    let sizes: Vec<f64> = (0..n)
        .map(|_| {
            let u = rng.next_f64();
            let v = rng.next_f64();
            p.file_size(u, v) as f64
        })
        .collect();
    let tail = sizes.iter().filter(|&&s| s >= p.tail_k).count() as f64 / n as f64;
    let d = ks(sizes, |x| p.file_size_cdf(x));
    let c = critical(n);
    println!(
        "file sizes: n {n}, D {d:.5} (critical {c:.5}); tail share {tail:.4} (want {:.4})",
        p.tail_fraction
    );
    assert!(d < c, "KS D {d} >= {c}");
    let se = (p.tail_fraction * (1.0 - p.tail_fraction) / n as f64).sqrt();
    assert!((tail - p.tail_fraction).abs() < 4.0 * se, "{tail}");
}

#[test]
fn seeded_file_set_sizes_follow_the_model_and_are_reproducible() {
    let mut p = SurgeParams::default();
    p.set("files", 20_000.0).unwrap();
    p.set("seed", 42.0).unwrap();
    let sizes = p.file_sizes();
    assert_eq!(sizes, p.file_sizes(), "same seed, same sizes");
    assert!(sizes.iter().all(|&s| (1..=p.max_size).contains(&s)));
    let d = ks(sizes.iter().map(|&s| s as f64).collect(), |x| {
        p.file_size_cdf(x)
    });
    let c = critical(sizes.len());
    println!(
        "file set sizes: n {}, D {d:.5} (critical {c:.5})",
        sizes.len()
    );
    assert!(d < c);
    // A longer set keeps the first files' sizes; another seed changes them.
    let mut q = p.clone();
    q.set("files", 20_001.0).unwrap();
    assert_eq!(&q.file_sizes()[..20_000], &sizes[..]);
    q.set("seed", 43.0).unwrap();
    assert_ne!(&q.file_sizes()[..100], &sizes[..100]);
    // Sizes are independent of popularity: the top 1000 ranks' sizes are from the same
    // distribution as all the others (two-sample-ish check against the model).
    let top: Vec<f64> = sizes[..2000].iter().map(|&s| s as f64).collect();
    let d_top = ks(top, |x| p.file_size_cdf(x));
    assert!(d_top < critical(2000), "{d_top}");
}

#[test]
fn zipf_ranks_follow_the_zipf_pmf() {
    let p = SurgeParams::default();
    let z = p.zipf();
    let n = 200_000;
    let mut rng = Rng(7);
    let mut counts = vec![0u64; z.len() as usize];
    for _ in 0..n {
        counts[z.sample(rng.next_f64()) as usize] += 1;
    }
    // KS on the discrete CDF (conservative for a discrete law).
    let mut cum = 0u64;
    let mut d: f64 = 0.0;
    for (r, &c) in counts.iter().enumerate() {
        cum += c;
        d = d.max((cum as f64 / n as f64 - z.cdf(r as u64)).abs());
    }
    // Chi-square over bins of about 5% probability each (rank 0 alone is ~12%).
    let mut obs = Vec::new();
    let mut exp = Vec::new();
    let (mut o, mut e) = (0u64, 0.0);
    for (r, &c) in counts.iter().enumerate() {
        o += c;
        e += z.pmf(r as u64) * n as f64;
        if e >= 0.05 * n as f64 {
            obs.push(o);
            exp.push(e);
            (o, e) = (0, 0.0);
        }
    }
    if e > 0.0 {
        *obs.last_mut().unwrap() += o;
        *exp.last_mut().unwrap() += e;
    }
    let x2 = chi2(&obs, &exp);
    let df = obs.len() - 1;
    println!(
        "zipf ranks: n {n}, discrete KS D {d:.5} (critical {:.5}); chi2 {x2:.2} on {df} df \
         (critical {:.2}); P(rank 0) {:.4} observed {:.4}",
        critical(n),
        chi2_critical(df),
        z.pmf(0),
        counts[0] as f64 / n as f64
    );
    assert!(d < critical(n));
    assert!(x2 < chi2_critical(df));

    // Another exponent, small n: chi-square per rank.
    let z = Zipf::new(10, 1.5);
    let n = 50_000;
    let mut counts = vec![0u64; 10];
    for _ in 0..n {
        counts[z.sample(rng.next_f64()) as usize] += 1;
    }
    let exp: Vec<f64> = (0..10).map(|r| z.pmf(r) * n as f64).collect();
    let x2 = chi2(&counts, &exp);
    println!(
        "zipf(10, 1.5): chi2 {x2:.2} on 9 df (critical {:.2})",
        chi2_critical(9)
    );
    assert!(x2 < chi2_critical(9));
}

#[test]
fn embedded_counts_follow_their_pmf() {
    let p = SurgeParams::default();
    let n = 200_000;
    let mut rng = Rng(243);
    let draws: Vec<u32> = (0..n).map(|_| p.embedded(rng.next_f64())).collect();
    assert!(draws.iter().all(|&k| (1..=p.max_embedded).contains(&k)));
    let bins: [(u32, u32); 9] = [
        (1, 1),
        (2, 2),
        (3, 3),
        (4, 4),
        (5, 5),
        (6, 6),
        (7, 9),
        (10, 19),
        (20, p.max_embedded),
    ];
    let obs: Vec<u64> = bins
        .iter()
        .map(|&(lo, hi)| draws.iter().filter(|&&k| (lo..=hi).contains(&k)).count() as u64)
        .collect();
    let exp: Vec<f64> = bins
        .iter()
        .map(|&(lo, hi)| (lo..=hi).map(|k| p.embedded_pmf(k)).sum::<f64>() * n as f64)
        .collect();
    let total: f64 = (0..=p.max_embedded).map(|k| p.embedded_pmf(k)).sum();
    assert!((total - 1.0).abs() < 1e-12, "pmf sums to {total}");
    let x2 = chi2(&obs, &exp);
    let df = bins.len() - 1;
    let xs: Vec<f64> = draws.iter().map(|&k| f64::from(k)).collect();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = (var / n as f64).sqrt();
    let want = p.mean_requests_per_page() - 1.0;
    println!(
        "embedded: n {n}, chi2 {x2:.2} on {df} df (critical {:.2}); mean {mean:.4} ± {se:.4} \
         (want {want:.4}); P(1) {:.4} observed {:.4}",
        chi2_critical(df),
        p.embedded_pmf(1),
        obs[0] as f64 / n as f64
    );
    assert!(x2 < chi2_critical(df));
    assert!((mean - want).abs() < 4.0 * se);
}

#[test]
fn off_times_follow_pareto_and_active_off_times_weibull() {
    let p = SurgeParams::default();
    let n = 40_000;
    let mut rng = Rng(15);
    let offs: Vec<f64> = (0..n)
        .map(|_| p.off_time(rng.next_f64()).as_secs_f64())
        .collect();
    assert!(offs.iter().all(|&t| (1.0..=3600.0).contains(&t)));
    let d = ks(offs, |t| p.off_cdf(t));
    let actives: Vec<f64> = (0..n)
        .map(|_| p.active_off_time(rng.next_f64()).as_secs_f64())
        .collect();
    let d_active = ks(actives, |t| p.active_off_cdf(t));
    let c = critical(n);
    println!(
        "OFF times: n {n}, Pareto D {d:.5}, Weibull (active) D {d_active:.5} (critical {c:.5})"
    );
    assert!(d < c);
    assert!(d_active < c);
}

#[test]
fn sessions_average_requests_per_session() {
    for rps in [6.5, 20.0] {
        let mut p = SurgeParams::default();
        p.set("requests_per_session", rps).unwrap();
        p.validate().unwrap();
        let z = p.zipf();
        let mut rng = Rng(4);
        let mut next = || rng.next_f64();
        let n = 20_000;
        let mut totals = Vec::with_capacity(n);
        let mut pages = 0usize;
        for _ in 0..n {
            let s = p.session(&mut next, &z);
            assert!(!s.is_empty());
            for (i, page) in s.iter().enumerate() {
                assert_eq!(
                    page.off.is_none(),
                    i + 1 == s.len(),
                    "OFF after all but last"
                );
                assert!(page.base < p.files);
                assert!(page.embedded.iter().all(|&r| r < p.files));
            }
            pages += s.len();
            let reqs: usize = s.iter().map(|pg| 1 + pg.embedded.len()).sum();
            totals.push(reqs as f64);
        }
        let mean = totals.iter().sum::<f64>() / n as f64;
        let var = totals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let se = (var / n as f64).sqrt();
        println!(
            "sessions (requests_per_session {rps}): n {n}, mean requests {mean:.4} ± {se:.4} \
             (sd {:.3}), mean pages {:.4} (want {:.4})",
            var.sqrt(),
            pages as f64 / n as f64,
            p.mean_pages_per_session()
        );
        assert!(
            (mean - rps).abs() < 4.0 * se,
            "mean {mean} vs {rps}, se {se}"
        );
    }
}

#[test]
fn set_rejects_bad_values_with_the_allowed_range() {
    let mut p = SurgeParams::default();
    let e = p.set("nope", 1.0).unwrap_err();
    assert!(
        e.contains("unknown") && e.contains("requests_per_session"),
        "{e}"
    );
    for (key, bad) in [
        ("files", 0.0),
        ("files", 2.5),
        ("files", 2e6),
        ("size_sigma", 0.0),
        ("tail_fraction", 1.5),
        ("tail_alpha", -1.0),
        ("pipeline", 0.0),
        ("off_k", f64::NAN),
        ("max_off", f64::INFINITY),
        ("requests_per_session", 0.5),
    ] {
        let before = p.clone();
        let e = p.set(key, bad).unwrap_err();
        assert!(e.contains(key) && e.contains("allowed"), "{key}={bad}: {e}");
        assert_eq!(p, before, "a rejected set leaves the params alone");
    }
    assert!(p.set("files", 500.0).is_ok() && p.files == 500);
    assert!(p.set("off_k", 0.5).is_ok() && p.off_k.as_millis() == 500);

    // Constraints between parameters are validate()'s.
    let mut q = SurgeParams::default();
    q.set("requests_per_session", 1.5).unwrap();
    let e = q.validate().unwrap_err();
    assert!(e.contains("requests_per_session"), "{e}");
    let mut q = SurgeParams::default();
    q.set("tail_k", 1e8).unwrap();
    assert!(q.validate().unwrap_err().contains("max_size"));
    let q = SurgeParams {
        prefix: "surge".into(),
        ..SurgeParams::default()
    };
    assert!(q.validate().unwrap_err().contains("prefix"));
}
