//! The SURGE web workload model (Barford & Crovella, "Generating Representative Web Workloads
//! for Network and Server Performance Evaluation", ACM SIGMETRICS 1998, Table 1 "Summary
//! statistics for models used in SURGE"; also Boston University TR BU-CS-97-006).
//!
//! Pure sampling code: every sampler maps uniform variates in [0, 1) to a value by inverse
//! transform, as [`crate::Distribution`] does, so the engine supplies the randomness and tests
//! can check each distribution exactly.
//!
//! The model, with the paper's parameters as defaults ([`SurgeParams::default`]):
//!
//! | what | distribution | parameters |
//! |---|---|---|
//! | file sizes, body | lognormal, truncated at `tail_k` | μ = 9.357, σ = 1.318 (ln bytes) |
//! | file sizes, tail | Pareto | k = 133,000 bytes, α = 1.1 |
//! | popularity | Zipf over the files' ranks | exponent 1 |
//! | embedded references per page | Pareto, floored to an integer | k = 1, α = 2.43 |
//! | inactive OFF (between pages) | Pareto | k = 1 s, α = 1.5 |
//! | active OFF (between embedded objects) | Weibull | scale 1.46 s, shape 0.382 |
//!
//! Sizes are drawn independently of popularity ranks (SURGE matches the two marginals and
//! leaves them uncorrelated). Heavy tails are capped so a generated file set and a session stay
//! finite: see the `max_*` fields.

use std::time::Duration;

use crate::secs_saturating;
use crate::stats::{normal_cdf, normal_pdf, normal_quantile, SplitMix64};

/// Parameters of the SURGE model. `Default` is the paper's model; [`SurgeParams::set`]
/// overrides one numeric parameter by name, [`SurgeParams::validate`] checks the whole.
#[derive(Debug, Clone, PartialEq)]
pub struct SurgeParams {
    /// Number of distinct files (popularity ranks 0..files).
    pub files: u64,
    /// Zipf exponent of file popularity: P(rank r) ∝ (r+1)^-exponent.
    pub zipf_exponent: f64,
    /// Lognormal body of file sizes: mean of ln(size in bytes).
    pub size_mu: f64,
    /// Lognormal body of file sizes: standard deviation of ln(size in bytes).
    pub size_sigma: f64,
    /// Pareto tail of file sizes: scale k in bytes, also the cut between body and tail.
    pub tail_k: f64,
    /// Pareto tail of file sizes: shape α.
    pub tail_alpha: f64,
    /// Fraction of files drawn from the tail (the rest from the body, truncated at `tail_k`).
    pub tail_fraction: f64,
    /// Largest file size in bytes (the Pareto tail is capped here).
    pub max_size: u64,
    /// Embedded references per page: Pareto scale k (the count is floor of the Pareto value).
    pub embedded_k: f64,
    /// Embedded references per page: Pareto shape α.
    pub embedded_alpha: f64,
    /// Most embedded objects on one page.
    pub max_embedded: u32,
    /// Inactive OFF time between pages: Pareto scale k.
    pub off_k: Duration,
    /// Inactive OFF time between pages: Pareto shape α.
    pub off_alpha: f64,
    /// Longest OFF time (inactive or active).
    pub max_off: Duration,
    /// Active OFF time between embedded objects: Weibull scale, in seconds.
    pub active_off_scale: f64,
    /// Active OFF time between embedded objects: Weibull shape.
    pub active_off_shape: f64,
    /// Mean requests (base files + embedded objects) per session.
    pub requests_per_session: f64,
    /// Embedded objects of a page written back to back on a connection.
    pub pipeline: u32,
    /// URL path prefix of the files, starting and ending with '/'.
    pub prefix: String,
    /// Seed of the file sizes of a file set.
    pub seed: u64,
}

/// The popularity ranks of a page's files and the OFF time after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// Rank of the base (HTML) file.
    pub base: u64,
    /// Ranks of the embedded objects, in request order.
    pub embedded: Vec<u64>,
    /// Inactive OFF time before the next page; `None` after the last page of a session.
    pub off: Option<Duration>,
}

/// Allowed range of one numeric parameter.
struct Spec {
    key: &'static str,
    lo: f64,
    hi: f64,
    /// Whether `lo` itself is allowed.
    lo_inclusive: bool,
    integer: bool,
    unit: &'static str,
}

const fn spec(key: &'static str, lo: f64, hi: f64, lo_inclusive: bool, integer: bool) -> Spec {
    Spec {
        key,
        lo,
        hi,
        lo_inclusive,
        integer,
        unit: "",
    }
}

const fn unit(mut s: Spec, unit: &'static str) -> Spec {
    s.unit = unit;
    s
}

/// Every overridable key with its range, in [`SurgeParams::KEYS`] order.
const SPECS: &[Spec] = &[
    spec("files", 1.0, 1_000_000.0, true, true),
    spec("zipf_exponent", 0.0, 10.0, true, false),
    spec("size_mu", 0.0, 20.0, true, false),
    spec("size_sigma", 0.0, 5.0, false, false),
    unit(spec("tail_k", 1.0, 1e9, true, false), " bytes"),
    spec("tail_alpha", 0.0, 10.0, false, false),
    spec("tail_fraction", 0.0, 1.0, true, false),
    unit(spec("max_size", 1.0, 1_073_741_824.0, true, true), " bytes"),
    spec("embedded_k", 0.0, 10_000.0, false, false),
    spec("embedded_alpha", 0.0, 10.0, false, false),
    spec("max_embedded", 0.0, 10_000.0, true, true),
    unit(spec("off_k", 0.0, 3600.0, false, false), " seconds"),
    spec("off_alpha", 0.0, 10.0, false, false),
    unit(spec("max_off", 0.0, 86_400.0, false, false), " seconds"),
    unit(
        spec("active_off_scale", 0.0, 3600.0, false, false),
        " seconds",
    ),
    spec("active_off_shape", 0.0, 10.0, false, false),
    spec("requests_per_session", 1.0, 10_000.0, true, false),
    spec("pipeline", 1.0, 1024.0, true, true),
    spec("seed", 0.0, 9_007_199_254_740_992.0, true, true),
];

impl Default for SurgeParams {
    fn default() -> SurgeParams {
        let size_mu = 9.357; // Barford & Crovella 1998, Table 1: file sizes, body: lognormal μ = 9.357
        let size_sigma = 1.318; // ibid.: body lognormal σ = 1.318
        let tail_k = 133_000.0; // ibid.: file sizes, tail: Pareto k = 133K (bytes)
        let tail_alpha = 1.1; // ibid.: tail Pareto α = 1.1
        SurgeParams {
            // Not a paper value: a file set small enough to write in seconds (~110 MB).
            files: 2000,
            // Barford & Crovella 1998, §3 / Table 1: popularity follows Zipf's law, exponent 1.
            zipf_exponent: 1.0,
            size_mu,
            size_sigma,
            tail_k,
            tail_alpha,
            // Not printed in the table: the share of files above the cut. Chosen so the mixed
            // density is continuous at tail_k (≈ 0.0487 for the paper's parameters); see
            // `continuous_tail_fraction` and docs/surge.md.
            tail_fraction: continuous_tail_fraction(size_mu, size_sigma, tail_k, tail_alpha),
            // Cap (ours): 64 MiB. Removes 1.1e-3 of the tail's mass (5e-5 of all files).
            max_size: 64 << 20,
            // Barford & Crovella 1998, Table 1: embedded references: Pareto k = 1, α = 2.43.
            embedded_k: 1.0,
            embedded_alpha: 2.43,
            // Cap (ours): 100 objects; P(count >= 100) = 100^-2.43 ≈ 1.4e-5.
            max_embedded: 100,
            // Barford & Crovella 1998, Table 1: inactive OFF times: Pareto k = 1 (s), α = 1.5.
            off_k: Duration::from_secs(1),
            off_alpha: 1.5,
            // Cap (ours): one hour; P(OFF > 1 h) = 3600^-1.5 ≈ 4.6e-6.
            max_off: Duration::from_secs(3600),
            // Barford & Crovella 1998, Table 1: active OFF times: Weibull α = 1.46 (scale),
            // β = 0.382 (shape), p(x) = β x^(β-1) / α^β · exp(-(x/α)^β).
            active_off_scale: 1.46,
            active_off_shape: 0.382,
            // Seed 004: 6.5 requests per session.
            requests_per_session: 6.5,
            // Ours: embedded objects pipelined 4 deep (browsers of the time used ~4 connections).
            pipeline: 4,
            prefix: "/file/".into(),
            seed: 0,
        }
    }
}

/// The tail fraction p that makes the density of the mixed size distribution continuous at the
/// cut `k`: (1-p)·f_body(k) = p·f_tail(k), with f_body the lognormal truncated to (0, k) and
/// f_tail(k) = α/k the Pareto density at its scale. So p = r/(1+r) with
/// r = φ(z)/(σ·Φ(z)·α), z = (ln k - μ)/σ.
pub fn continuous_tail_fraction(mu: f64, sigma: f64, k: f64, alpha: f64) -> f64 {
    let z = (k.ln() - mu) / sigma;
    let r = normal_pdf(z) / (sigma * normal_cdf(z) * alpha);
    r / (1.0 + r)
}

/// Clamp a uniform variate into [0, 1); NaN becomes 0.
fn unit_variate(u: f64) -> f64 {
    if u.is_finite() {
        u.clamp(0.0, 1.0 - f64::EPSILON)
    } else {
        0.0
    }
}

impl SurgeParams {
    /// The keys [`SurgeParams::set`] accepts (every numeric parameter; `prefix` is a string).
    pub const KEYS: &'static [&'static str] = &[
        "files",
        "zipf_exponent",
        "size_mu",
        "size_sigma",
        "tail_k",
        "tail_alpha",
        "tail_fraction",
        "max_size",
        "embedded_k",
        "embedded_alpha",
        "max_embedded",
        "off_k",
        "off_alpha",
        "max_off",
        "active_off_scale",
        "active_off_shape",
        "requests_per_session",
        "pipeline",
        "seed",
    ];

    /// The value of numeric parameter `key` (durations in seconds), or `None` for an unknown key.
    pub fn get(&self, key: &str) -> Option<f64> {
        Some(match key {
            "files" => self.files as f64,
            "zipf_exponent" => self.zipf_exponent,
            "size_mu" => self.size_mu,
            "size_sigma" => self.size_sigma,
            "tail_k" => self.tail_k,
            "tail_alpha" => self.tail_alpha,
            "tail_fraction" => self.tail_fraction,
            "max_size" => self.max_size as f64,
            "embedded_k" => self.embedded_k,
            "embedded_alpha" => self.embedded_alpha,
            "max_embedded" => f64::from(self.max_embedded),
            "off_k" => self.off_k.as_secs_f64(),
            "off_alpha" => self.off_alpha,
            "max_off" => self.max_off.as_secs_f64(),
            "active_off_scale" => self.active_off_scale,
            "active_off_shape" => self.active_off_shape,
            "requests_per_session" => self.requests_per_session,
            "pipeline" => f64::from(self.pipeline),
            "seed" => self.seed as f64,
            _ => return None,
        })
    }

    /// Override one numeric parameter (durations in seconds). Checks the value's own range;
    /// constraints between parameters are left to [`SurgeParams::validate`], so keys can be set in
    /// any order.
    pub fn set(&mut self, key: &str, value: f64) -> Result<(), String> {
        let Some(spec) = SPECS.iter().find(|s| s.key == key) else {
            return Err(format!(
                "unknown SURGE parameter '{key}'; known: {}",
                Self::KEYS.join(", ")
            ));
        };
        check(spec, value)?;
        match key {
            "files" => self.files = value as u64,
            "zipf_exponent" => self.zipf_exponent = value,
            "size_mu" => self.size_mu = value,
            "size_sigma" => self.size_sigma = value,
            "tail_k" => self.tail_k = value,
            "tail_alpha" => self.tail_alpha = value,
            "tail_fraction" => self.tail_fraction = value,
            "max_size" => self.max_size = value as u64,
            "embedded_k" => self.embedded_k = value,
            "embedded_alpha" => self.embedded_alpha = value,
            "max_embedded" => self.max_embedded = value as u32,
            "off_k" => self.off_k = Duration::from_secs_f64(value),
            "off_alpha" => self.off_alpha = value,
            "max_off" => self.max_off = Duration::from_secs_f64(value),
            "active_off_scale" => self.active_off_scale = value,
            "active_off_shape" => self.active_off_shape = value,
            "requests_per_session" => self.requests_per_session = value,
            "pipeline" => self.pipeline = value as u32,
            "seed" => self.seed = value as u64,
            _ => unreachable!("SPECS and set() disagree on {key}"),
        }
        Ok(())
    }

    /// Check every parameter's range and the constraints between them.
    pub fn validate(&self) -> Result<(), String> {
        for spec in SPECS {
            let v = self.get(spec.key).expect("every spec has a getter");
            check(spec, v)?;
        }
        if self.tail_k > self.max_size as f64 {
            return Err(format!(
                "SURGE tail_k {} is above max_size {}: the tail would be all cap",
                self.tail_k, self.max_size
            ));
        }
        if self.off_k > self.max_off {
            return Err(format!(
                "SURGE off_k {}s is above max_off {}s",
                self.off_k.as_secs_f64(),
                self.max_off.as_secs_f64()
            ));
        }
        if self.max_embedded > 0 && self.embedded_k > f64::from(self.max_embedded) {
            return Err(format!(
                "SURGE embedded_k {} is above max_embedded {}",
                self.embedded_k, self.max_embedded
            ));
        }
        let per_page = self.mean_requests_per_page();
        if self.requests_per_session < per_page {
            return Err(format!(
                "SURGE requests_per_session {} is below the mean requests of one page ({per_page:.3} \
                 with these embedded_k/embedded_alpha/max_embedded); a session has at least one page",
                self.requests_per_session
            ));
        }
        let p = &self.prefix;
        if !p.starts_with('/')
            || !p.ends_with('/')
            || p.contains("..")
            || p.contains("//")
            || p.chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '?' || c == '#')
        {
            return Err(format!(
                "bad SURGE prefix '{p}': a URL path that starts and ends with '/', e.g. /surge/"
            ));
        }
        Ok(())
    }

    /// A file size in bytes: `u` picks the tail (u < tail_fraction) or the body, `v` the value by
    /// inverse transform. Body: lognormal(size_mu, size_sigma) truncated to (0, tail_k); tail:
    /// Pareto(tail_k, tail_alpha) capped at max_size. Rounded to whole bytes, at least 1.
    pub fn file_size(&self, u: f64, v: f64) -> u64 {
        let (u, v) = (unit_variate(u), unit_variate(v));
        let x = if u < self.tail_fraction {
            self.tail_k / (1.0 - v).powf(1.0 / self.tail_alpha)
        } else {
            let cut = normal_cdf(self.body_cut_z());
            (self.size_mu + self.size_sigma * normal_quantile(v * cut)).exp()
        };
        let max = self.max_size.max(1);
        if x.is_nan() || x >= max as f64 {
            max
        } else {
            (x.round() as u64).clamp(1, max)
        }
    }

    /// P(size <= x) of the (continuous, unrounded) size distribution, cap included: 1 at and
    /// above max_size.
    pub fn file_size_cdf(&self, x: f64) -> f64 {
        if x.is_nan() || x <= 0.0 {
            return 0.0;
        }
        if x >= self.max_size as f64 {
            return 1.0;
        }
        let p = self.tail_fraction;
        if x < self.tail_k {
            let z = (x.ln() - self.size_mu) / self.size_sigma;
            (1.0 - p) * normal_cdf(z) / normal_cdf(self.body_cut_z())
        } else {
            (1.0 - p) + p * (1.0 - (self.tail_k / x).powf(self.tail_alpha))
        }
    }

    fn body_cut_z(&self) -> f64 {
        (self.tail_k.ln() - self.size_mu) / self.size_sigma
    }

    /// The sizes of files of ranks 0..files, drawn from SplitMix64(seed): two variates per
    /// file, in rank order, so a size does not depend on the file's popularity and the first
    /// files keep their sizes when `files` grows.
    pub fn file_sizes(&self) -> Vec<u64> {
        let mut rng = SplitMix64::new(self.seed);
        (0..self.files)
            .map(|_| {
                let u = rng.next_f64();
                let v = rng.next_f64();
                self.file_size(u, v)
            })
            .collect()
    }

    /// Objects embedded in a page: floor(X) for X ~ Pareto(embedded_k, embedded_alpha), capped at
    /// max_embedded. With k = 1 every page has at least one embedded object.
    pub fn embedded(&self, u: f64) -> u32 {
        let u = unit_variate(u);
        let x = self.embedded_k / (1.0 - u).powf(1.0 / self.embedded_alpha);
        let cap = f64::from(self.max_embedded);
        if x.is_nan() || x.floor() >= cap {
            self.max_embedded
        } else {
            x.floor().max(0.0) as u32
        }
    }

    /// P(embedded >= n).
    pub fn embedded_survival(&self, n: u32) -> f64 {
        if n == 0 {
            1.0
        } else if n > self.max_embedded {
            0.0
        } else {
            // floor(X) >= n  <=>  X >= n
            (self.embedded_k / f64::from(n))
                .powf(self.embedded_alpha)
                .min(1.0)
        }
    }

    /// P(embedded == n).
    pub fn embedded_pmf(&self, n: u32) -> f64 {
        self.embedded_survival(n) - self.embedded_survival(n.saturating_add(1))
    }

    /// Mean requests per page: 1 (the base file) + E[embedded] under the cap, computed exactly
    /// as the sum of P(embedded >= n) for n = 1..=max_embedded.
    pub fn mean_requests_per_page(&self) -> f64 {
        1.0 + (1..=self.max_embedded)
            .map(|n| self.embedded_survival(n))
            .sum::<f64>()
    }

    /// Inactive OFF time between pages: Pareto(off_k, off_alpha), capped at max_off.
    pub fn off_time(&self, u: f64) -> Duration {
        let u = unit_variate(u);
        let s = self.off_k.as_secs_f64() / (1.0 - u).powf(1.0 / self.off_alpha);
        secs_saturating(s, self.max_off.as_secs_f64())
    }

    /// P(OFF <= t seconds), cap included.
    pub fn off_cdf(&self, t: f64) -> f64 {
        let k = self.off_k.as_secs_f64();
        if t.is_nan() || t < k {
            0.0
        } else if t >= self.max_off.as_secs_f64() {
            1.0
        } else {
            1.0 - (k / t).powf(self.off_alpha)
        }
    }

    /// Active OFF time between a page's embedded objects (SURGE's user "thinks" between them):
    /// Weibull(scale active_off_scale s, shape active_off_shape), capped at max_off. Not used
    /// by [`SurgeParams::session`], which pipelines the embedded objects as a browser does.
    pub fn active_off_time(&self, u: f64) -> Duration {
        let u = unit_variate(u);
        let s = self.active_off_scale * (-(1.0 - u).ln()).powf(1.0 / self.active_off_shape);
        secs_saturating(s, self.max_off.as_secs_f64())
    }

    /// P(active OFF <= t seconds), cap included.
    pub fn active_off_cdf(&self, t: f64) -> f64 {
        if t.is_nan() || t <= 0.0 {
            0.0
        } else if t >= self.max_off.as_secs_f64() {
            1.0
        } else {
            1.0 - (-(t / self.active_off_scale).powf(self.active_off_shape)).exp()
        }
    }

    /// Mean pages per session: requests_per_session / mean_requests_per_page (at least 1).
    pub fn mean_pages_per_session(&self) -> f64 {
        (self.requests_per_session / self.mean_requests_per_page()).max(1.0)
    }

    /// Pages in a session: geometric on 1, 2, … with mean [`SurgeParams::mean_pages_per_session`],
    /// so that (by Wald's identity) a session averages requests_per_session requests.
    pub fn page_count(&self, u: f64) -> u64 {
        let u = unit_variate(u);
        let p = 1.0 / self.mean_pages_per_session();
        if p >= 1.0 {
            return 1;
        }
        // P(N > n) = (1-p)^n  =>  N = 1 + floor(ln(1-u) / ln(1-p))
        let extra = ((1.0 - u).ln() / (1.0 - p).ln()).floor();
        if extra.is_finite() && extra > 0.0 {
            1 + extra as u64
        } else {
            1
        }
    }

    /// One page: a base file and its embedded objects (ranks from `zipf`), then an OFF time
    /// unless `last`.
    pub fn page(&self, rand: &mut dyn FnMut() -> f64, zipf: &Zipf, last: bool) -> Page {
        let base = zipf.sample(rand());
        let n = self.embedded(rand());
        let embedded = (0..n).map(|_| zipf.sample(rand())).collect();
        let off = if last {
            None
        } else {
            Some(self.off_time(rand()))
        };
        Page {
            base,
            embedded,
            off,
        }
    }

    /// One session: [`SurgeParams::page_count`] pages, each a base file plus embedded files
    /// (independent Zipf ranks, so a page may repeat a file), with an OFF time after every page
    /// but the last. `zipf` should be `self.zipf()` (built once and shared).
    pub fn session(&self, rand: &mut dyn FnMut() -> f64, zipf: &Zipf) -> Vec<Page> {
        debug_assert_eq!(
            zipf.len(),
            self.files.max(1),
            "zipf built for another file count"
        );
        let pages = self.page_count(rand());
        let mut out = Vec::with_capacity(pages.min(1 << 16) as usize);
        for i in 0..pages {
            out.push(self.page(rand, zipf, i + 1 == pages));
        }
        out
    }

    /// The popularity distribution of these parameters.
    pub fn zipf(&self) -> Zipf {
        Zipf::new(self.files, self.zipf_exponent)
    }

    /// The file's name relative to the file set's directory: the zero-padded rank (at least six
    /// digits, more when `files` needs them) and `.html`, e.g. `000017.html`.
    pub fn file_rel_name(&self, rank: u64) -> String {
        let mut s = String::new();
        self.write_rel_name(rank, &mut s);
        s
    }

    fn write_rel_name(&self, rank: u64, out: &mut String) {
        use std::fmt::Write as _;
        let digits = self.files.saturating_sub(1).max(1).ilog10() as usize + 1;
        let width = digits.max(6);
        let _ = write!(out, "{rank:0width$}.html");
    }

    /// Append the URL path of rank `rank` to `out` ([`SurgeParams::file_name`] without the
    /// allocation: the engine builds one per SURGE request into a buffer it keeps).
    pub fn push_file_name(&self, rank: u64, out: &mut String) {
        out.push_str(&self.prefix);
        self.write_rel_name(rank, out);
    }

    /// URL path of the file of popularity rank `rank` (0 = most popular): the prefix and
    /// [`SurgeParams::file_rel_name`], e.g. `/file/000017.html`.
    pub fn file_name(&self, rank: u64) -> String {
        let mut s = String::new();
        self.push_file_name(rank, &mut s);
        s
    }
}

fn check(spec: &Spec, value: f64) -> Result<(), String> {
    let low_ok = if spec.lo_inclusive {
        value >= spec.lo
    } else {
        value > spec.lo
    };
    let ok =
        value.is_finite() && low_ok && value <= spec.hi && (!spec.integer || value.fract() == 0.0);
    if ok {
        return Ok(());
    }
    let what = if spec.integer { "an integer " } else { "" };
    let range = if spec.lo_inclusive {
        format!("{}{} to {}", what, spec.lo, spec.hi)
    } else {
        format!("{}above {} up to {}", what, spec.lo, spec.hi)
    };
    Err(format!(
        "bad SURGE {} {value}: allowed {range}{}",
        spec.key, spec.unit
    ))
}

/// Zipf popularity over ranks 0..n: P(rank r) = (r+1)^-s / H(n, s). Sampling is a binary search
/// of the precomputed CDF (8 bytes per rank).
#[derive(Debug, Clone, PartialEq)]
pub struct Zipf {
    cdf: Vec<f64>,
    exponent: f64,
    total: f64,
}

impl Zipf {
    /// Zipf over `n` ranks (at least 1) with `exponent` s >= 0 (0 is uniform).
    pub fn new(n: u64, exponent: f64) -> Zipf {
        let n = n.max(1);
        let mut cdf = Vec::with_capacity(n as usize);
        let mut total = 0.0;
        for r in 0..n {
            total += ((r + 1) as f64).powf(-exponent);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        *cdf.last_mut().expect("n >= 1") = 1.0;
        Zipf {
            cdf,
            exponent,
            total,
        }
    }

    /// The rank (0-based) for uniform variate `u` in [0, 1).
    pub fn sample(&self, u: f64) -> u64 {
        let u = unit_variate(u);
        let i = self.cdf.partition_point(|&c| c <= u);
        i.min(self.cdf.len() - 1) as u64
    }

    /// P(rank == r).
    pub fn pmf(&self, rank: u64) -> f64 {
        if rank >= self.len() {
            0.0
        } else {
            ((rank + 1) as f64).powf(-self.exponent) / self.total
        }
    }

    /// P(rank <= r).
    pub fn cdf(&self, rank: u64) -> f64 {
        if rank >= self.len() {
            1.0
        } else {
            self.cdf[rank as usize]
        }
    }

    /// Number of ranks.
    pub fn len(&self) -> u64 {
        self.cdf.len() as u64
    }

    /// Always false (a Zipf has at least one rank); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_cite_the_paper() {
        let p = SurgeParams::default();
        p.validate().unwrap();
        assert_eq!(p.size_mu, 9.357);
        assert!(
            (p.tail_fraction - 0.0487).abs() < 5e-4,
            "{}",
            p.tail_fraction
        );
        // E[embedded] = Σ_{n=1}^{100} n^-2.43 ≈ 1.369 (ζ(2.43) ≈ 1.371 less the cap's 0.0014).
        let m = p.mean_requests_per_page();
        assert!((m - 2.369).abs() < 0.001, "{m}");
        for k in SurgeParams::KEYS {
            assert!(SPECS.iter().any(|s| s.key == *k), "{k}");
            let v = p.get(k).unwrap();
            let mut q = p.clone();
            q.set(k, v).unwrap_or_else(|e| panic!("{k}: {e}"));
            assert_eq!(q, p, "{k}");
        }
        assert_eq!(SPECS.len(), SurgeParams::KEYS.len());
    }

    #[test]
    fn density_is_continuous_at_the_cut() {
        let p = SurgeParams::default();
        let k = p.tail_k;
        let h = 1e-3;
        let below = (p.file_size_cdf(k) - p.file_size_cdf(k - h)) / h;
        let above = (p.file_size_cdf(k + h) - p.file_size_cdf(k)) / h;
        assert!(((below - above) / above).abs() < 1e-4, "{below} {above}");
    }

    #[test]
    fn samplers_are_inverse_cdfs() {
        let p = SurgeParams::default();
        for u in [0.01, 0.3, 0.5, 0.9, 0.99] {
            let t = p.off_time(u).as_secs_f64();
            assert!((p.off_cdf(t) - u).abs() < 1e-6, "off {u} {t}");
            let t = p.active_off_time(u).as_secs_f64();
            assert!((p.active_off_cdf(t) - u).abs() < 1e-6, "active {u} {t}");
            // Body sizes (u >= tail_fraction picks the body).
            let s = p.file_size(0.9, u) as f64;
            let want = (1.0 - p.tail_fraction) * u;
            assert!((p.file_size_cdf(s) - want).abs() < 1e-3, "size {u} {s}");
        }
        assert_eq!(p.off_time(1.0), p.max_off.min(p.off_time(1.0)));
        assert_eq!(p.file_size(0.0, 1.0), p.max_size);
        assert_eq!(p.embedded(1.0), p.max_embedded);
        assert_eq!(p.embedded(0.0), 1);
    }

    #[test]
    fn zipf_basics() {
        let z = Zipf::new(4, 1.0);
        let h = 1.0 + 0.5 + 1.0 / 3.0 + 0.25;
        assert!((z.pmf(0) - 1.0 / h).abs() < 1e-12);
        assert_eq!(z.sample(0.0), 0);
        assert_eq!(z.sample(0.999_999), 3);
        assert_eq!(z.sample(f64::NAN), 0);
        assert_eq!(z.cdf(3), 1.0);
        let u = Zipf::new(5, 0.0);
        assert!((u.pmf(4) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn file_names_are_padded_ranks() {
        let mut p = SurgeParams::default();
        assert_eq!(p.file_name(17), "/file/000017.html");
        assert_eq!(p.file_rel_name(0), "000000.html");
        p.files = 1_000_000;
        assert_eq!(p.file_rel_name(999_999), "999999.html");
        p.files = 1_000_001;
        assert_eq!(p.file_rel_name(5), "0000005.html");
    }

    #[test]
    fn page_count_mean_matches() {
        let p = SurgeParams::default();
        let n = 100_000;
        let mean: f64 = (0..n)
            .map(|i| p.page_count((i as f64 + 0.5) / n as f64) as f64)
            .sum::<f64>()
            / n as f64;
        let want = p.mean_pages_per_session();
        assert!((mean - want).abs() < 0.01 * want, "{mean} vs {want}");
    }
}
