//! Line charts as inline SVG, written by hand.
//!
//! Why not a plotting crate: a report is text, so a chart is text too. Writing the SVG directly
//! needs no font or raster backend (the browser lays out the labels), gives byte-for-byte
//! deterministic output for the same input (golden files, diffs between reports), and keeps
//! files small — a polyline of a few thousand points with two decimals is tens of kilobytes,
//! with nothing else embedded.
//!
//! Layout: a fixed [`WIDTH`] x [`HEIGHT`] viewBox (the page scales it), the plot on the left,
//! the legend on the right. Both axes get "nice" tick steps (1, 2 or 5 x 10^k) with grid lines;
//! y starts at 0 unless a value is negative; x may be logarithmic with labelled ticks of the
//! caller's choosing (the percentile chart).
//!
//! Every chart is `<svg class="chart" data-chart="NAME">` and every drawn series a
//! `<polyline data-series="NAME" data-points="N">`, where N is the number of points drawn, so
//! tests (and browser tests) can check that each chart is there and not empty. A series of one
//! point (one instant) draws no line: it gets `<g data-instant="NAME">`, a large dot with a
//! stem down to the x axis, so it is seen at any width.
//!
//! Size bound: a series with more than [`MAX_POINTS`] points is downsampled by cutting it into
//! `MAX_POINTS / 2` runs of consecutive points and keeping the lowest and the highest point of
//! each run, in their original order: the line keeps its envelope, so a one-interval spike
//! survives, at most `MAX_POINTS` points are written, and the coordinates have at most two
//! decimals. Points with a NaN or infinite coordinate (or x <= 0 on a log axis) are skipped.

use std::fmt::Write;

/// viewBox width and height.
pub const WIDTH: f64 = 720.0;
pub const HEIGHT: f64 = 300.0;
pub(crate) const LEFT: f64 = 58.0;
pub(crate) const RIGHT: f64 = 560.0;
pub(crate) const TOP: f64 = 30.0;
pub(crate) const BOTTOM: f64 = 256.0;
/// Above this many points a series is downsampled (min and max per bucket).
pub const MAX_POINTS: usize = 2000;
/// Series with at most this many points also get a dot per point: a single point draws no line.
const MARKER_LIMIT: usize = 30;

/// The radius of the dot of a series of one point (one instant), in viewBox units: at 400 px
/// wide (a chart scaled to about half) still a dot of 6 px.
const INSTANT_R: f64 = 6.0;

/// The colour of [`Chart::dots`] series.
const DOT_COLOUR: &str = "#333";

/// Series colours, in order (Tableau 10: distinct, readable on white).
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// One line: a name for the legend and `data-series`, and its (x, y) points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// A line chart. Build it with [`Chart::new`], fill the public fields, call [`Chart::render`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chart {
    /// The `data-chart` attribute: a stable identifier (`latency`), not shown.
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Logarithmic x axis (base 10); points with x <= 0 are skipped.
    pub log_x: bool,
    /// Start the x axis at 0 whatever the data (time since the run start).
    pub x_from_zero: bool,
    /// Run the x axis at least to this value whatever the data: a time chart spans its whole
    /// run (the run's duration), so a series whose events all fell in the first second reads
    /// as one early instant of a 5 s run, not as a dot on a 0–1 s axis.
    pub x_max: Option<f64>,
    /// Labelled x ticks replacing the automatic ones: (x, label).
    pub x_ticks: Vec<(f64, String)>,
    /// A line of text in the plot area ("no errors").
    pub note: Option<String>,
    /// Names of series drawn as hollow rings without a line (marks on other series' points,
    /// e.g. the probes that broke an SLO), in dark grey.
    pub dots: Vec<String>,
    /// Widen the viewBox past [`WIDTH`] when a series name is too long for the legend (the
    /// plot keeps its size; the page scales the whole chart down a little).
    pub wide_legend: bool,
    /// The palette index of each series (for example the same colour for every repetition of
    /// a configuration); a series past the end of this list takes its own position.
    pub colours: Vec<usize>,
}

impl Chart {
    pub fn new(name: &str, title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            name: name.to_string(),
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            ..Chart::default()
        }
    }

    /// The chart as one `<svg>` element. Text from the caller (titles, series names) is escaped.
    pub fn render(&self) -> String {
        // The points actually drawn: finite, on the axis, downsampled.
        let drawn: Vec<Vec<(f64, f64)>> = self
            .series
            .iter()
            .map(|s| {
                let finite: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log_x || *x > 0.0))
                    .collect();
                downsample(&finite, MAX_POINTS)
            })
            .collect();
        let all = || drawn.iter().flatten();
        let (mut x_lo, mut x_hi) = min_max(all().map(|p| p.0));
        let (y_lo, y_hi) = min_max(all().map(|p| p.1));
        for (x, _) in &self.x_ticks {
            x_lo = x_lo.min(*x);
            x_hi = x_hi.max(*x);
        }
        if let Some(m) = self.x_max.filter(|m| m.is_finite()) {
            x_hi = x_hi.max(m);
        }
        let x_axis = if self.log_x {
            Axis::log(x_lo, x_hi)
        } else {
            if self.x_from_zero {
                x_lo = x_lo.min(0.0);
            }
            Axis::linear(x_lo, x_hi, 8)
        };
        // y from 0 unless a value is negative (and then up to at least 0).
        let y_axis = Axis::linear(y_lo.min(0.0), y_hi.max(0.0), 5);
        let px = |x: f64| LEFT + x_axis.fraction(x) * (RIGHT - LEFT);
        let py = |y: f64| BOTTOM - y_axis.fraction(y) * (BOTTOM - TOP);

        let mut out = String::with_capacity(4096 + drawn.iter().map(Vec::len).sum::<usize>() * 16);
        let title = escape(&self.title);
        let _ = write!(
            out,
            "<svg class=\"chart\" data-chart=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" \
             viewBox=\"0 0 {} {HEIGHT}\" role=\"img\" font-family=\"sans-serif\" \
             font-size=\"11\">\n<title>{title}</title>\n\
             <text x=\"{LEFT}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{title}</text>\n",
            escape(&self.name),
            if self.wide_legend {
                fmt2(legend_width(self.series.iter().map(|s| s.name.as_str())))
            } else {
                fmt2(WIDTH)
            },
        );

        // Grid and tick labels.
        let x_ticks: Vec<(f64, String)> = if self.x_ticks.is_empty() {
            x_axis.ticks()
        } else {
            self.x_ticks.clone()
        };
        let y_ticks = y_axis.ticks();
        let x_px: Vec<f64> = x_ticks.iter().map(|(x, _)| px(*x)).collect();
        let y_px: Vec<f64> = y_ticks.iter().map(|(y, _)| py(*y)).collect();
        grid_and_frame(&mut out, &x_px, &y_px);
        out.push_str("<g fill=\"#444\">\n");
        for (x, label) in &x_ticks {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                fmt2(px(*x)),
                BOTTOM + 14.0,
                escape(label)
            );
        }
        y_labels(&mut out, &y_ticks, &py);
        axis_titles(&mut out, &self.x_label, &self.y_label);
        out.push_str("</g>\n");

        // Lines, dots and legend.
        for (i, (s, pts)) in self.series.iter().zip(&drawn).enumerate() {
            let name = escape(&s.name);
            if self.dots.contains(&s.name) {
                let ly = TOP + 8.0 + 16.0 * i as f64;
                if !pts.is_empty() {
                    let _ = write!(
                        out,
                        "<g data-series=\"{name}\" data-points=\"{}\" fill=\"none\" \
                         stroke=\"{DOT_COLOUR}\" stroke-width=\"1.5\">",
                        pts.len()
                    );
                    for (x, y) in pts {
                        let _ = write!(
                            out,
                            "<circle cx=\"{}\" cy=\"{}\" r=\"5\"/>",
                            fmt2(px(*x)),
                            fmt2(py(*y))
                        );
                    }
                    out.push_str("</g>\n");
                }
                let _ = writeln!(
                    out,
                    "<g data-legend=\"{name}\"><circle cx=\"{}\" cy=\"{ly}\" r=\"5\" fill=\"none\" \
                     stroke=\"{DOT_COLOUR}\" stroke-width=\"1.5\"/><text x=\"{}\" y=\"{}\">{name}</text></g>",
                    RIGHT + 21.0,
                    RIGHT + 36.0,
                    ly + 4.0
                );
                continue;
            }
            let colour = PALETTE[self.colours.get(i).copied().unwrap_or(i) % PALETTE.len()];
            if !pts.is_empty() {
                let _ = write!(
                    out,
                    "<polyline data-series=\"{name}\" data-points=\"{}\" fill=\"none\" \
                     stroke=\"{colour}\" stroke-width=\"1.5\" stroke-linejoin=\"round\" \
                     points=\"",
                    pts.len()
                );
                for (j, (x, y)) in pts.iter().enumerate() {
                    if j > 0 {
                        out.push(' ');
                    }
                    let _ = write!(out, "{},{}", fmt2(px(*x)), fmt2(py(*y)));
                }
                out.push_str("\"/>\n");
                if pts.len() == 1 {
                    // One instant (every connection opened in the first interval): a dot alone
                    // is lost on a long axis, so a stem down to the axis and a larger dot.
                    let (x, y) = (fmt2(px(pts[0].0)), fmt2(py(pts[0].1)));
                    let _ = writeln!(
                        out,
                        "<g data-instant=\"{name}\" stroke=\"{colour}\" fill=\"{colour}\">\
                         <line x1=\"{x}\" y1=\"{y}\" x2=\"{x}\" y2=\"{BOTTOM}\" \
                         stroke-width=\"2\" stroke-dasharray=\"3 2\"/>\
                         <circle cx=\"{x}\" cy=\"{y}\" r=\"{INSTANT_R}\" stroke=\"#fff\" \
                         stroke-width=\"1.5\"/></g>"
                    );
                } else if pts.len() <= MARKER_LIMIT {
                    let _ = write!(out, "<g fill=\"{colour}\">");
                    for (x, y) in pts {
                        let _ = write!(
                            out,
                            "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\"/>",
                            fmt2(px(*x)),
                            fmt2(py(*y))
                        );
                    }
                    out.push_str("</g>\n");
                }
            }
            let ly = TOP + 8.0 + 16.0 * i as f64;
            let _ = writeln!(
                out,
                "<g data-legend=\"{name}\"><line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" \
                 stroke=\"{colour}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{name}</text></g>",
                RIGHT + 12.0,
                RIGHT + 30.0,
                RIGHT + 36.0,
                ly + 4.0
            );
        }
        if let Some(note) = &self.note {
            let _ = writeln!(
                out,
                "<text class=\"note\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666\" \
                 font-size=\"13\">{}</text>",
                fmt2((LEFT + RIGHT) / 2.0),
                fmt2(TOP + 24.0),
                escape(note)
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

/// The plot's grid (vertical lines at `x_px`, horizontal at `y_px`, already in pixels) and
/// its frame; shared by the line and bar charts.
pub(crate) fn grid_and_frame(out: &mut String, x_px: &[f64], y_px: &[f64]) {
    out.push_str("<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n");
    for p in x_px {
        let p = fmt2(*p);
        let _ = writeln!(
            out,
            "<line x1=\"{p}\" y1=\"{TOP}\" x2=\"{p}\" y2=\"{BOTTOM}\"/>"
        );
    }
    for p in y_px {
        let p = fmt2(*p);
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" y1=\"{p}\" x2=\"{RIGHT}\" y2=\"{p}\"/>"
        );
    }
    out.push_str("</g>\n");
    let _ = writeln!(
        out,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"none\" \
         stroke=\"#999\"/>",
        RIGHT - LEFT,
        BOTTOM - TOP
    );
}

/// The y tick labels left of the plot (inside an open `<g fill>`); `py` maps a value to pixels.
pub(crate) fn y_labels(out: &mut String, ticks: &[(f64, String)], py: &dyn Fn(f64) -> f64) {
    for (y, label) in ticks {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            LEFT - 5.0,
            fmt2(py(*y) + 4.0),
            escape(label)
        );
    }
}

/// The axis titles: `x_label` under the plot, `y_label` turned along its left side (inside an
/// open `<g fill>`).
pub(crate) fn axis_titles(out: &mut String, x_label: &str, y_label: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        fmt2((LEFT + RIGHT) / 2.0),
        BOTTOM + 34.0,
        escape(x_label)
    );
    let _ = writeln!(
        out,
        "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        fmt2((TOP + BOTTOM) / 2.0),
        escape(y_label)
    );
}

/// The viewBox width that fits a legend of these names right of the plot: at least [`WIDTH`].
pub(crate) fn legend_width<'a>(names: impl Iterator<Item = &'a str>) -> f64 {
    // About 6.4 units per character at font size 11, after the 36-unit swatch.
    let longest = names.map(|n| n.chars().count()).max().unwrap_or(0) as f64;
    WIDTH.max((RIGHT + 36.0 + longest * 6.4 + 8.0).ceil())
}

/// Lowest and highest value; (0, 0) when there is none.
fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values
        .fold(None, |acc: Option<(f64, f64)>, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
        .unwrap_or((0.0, 0.0))
}

/// At most `max` points: above it, the lowest and highest point of each of `max / 2` runs of
/// consecutive points, kept in their original order (spikes survive, the envelope is exact).
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 2 {
        return points.to_vec();
    }
    let buckets = max / 2;
    let size = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max);
    for chunk in points.chunks(size) {
        let mut lo = 0;
        let mut hi = 0;
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[lo].1 {
                lo = i;
            }
            if p.1 > chunk[hi].1 {
                hi = i;
            }
        }
        let (a, b) = (lo.min(hi), lo.max(hi));
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    out
}

/// An axis range. Linear axes run from a multiple of `step` to a multiple of `step`; log axes
/// from one power of ten to another (`step` unused).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    pub min: f64,
    pub max: f64,
    pub step: f64,
    pub log: bool,
}

impl Axis {
    /// A linear axis covering `lo..=hi` with at most about `max_ticks` intervals of a nice step.
    /// An empty range (a constant series, a single point) is widened so it still has ticks.
    pub fn linear(lo: f64, hi: f64, max_ticks: usize) -> Axis {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
            (lo.min(hi), lo.max(hi))
        } else {
            (0.0, 1.0)
        };
        if hi - lo <= f64::EPSILON * hi.abs().max(lo.abs()) {
            if lo == 0.0 {
                hi = 1.0;
            } else {
                // A constant non-zero value (a single point): widen around it.
                let pad = lo.abs() * 0.5;
                lo -= pad;
                hi += pad;
            }
        }
        let step = nice_step(hi - lo, max_ticks.max(1));
        let mut min = (lo / step).floor() * step;
        let mut max = (hi / step).ceil() * step;
        // Guard against float noise pushing a bound one step out (973/100 = 9.73 is fine, but
        // 0.3/0.1 = 2.9999999999999996 must not lose the top tick).
        if (lo - (min + step)).abs() < step * 1e-9 {
            min += step;
        }
        if (hi - (max - step)).abs() < step * 1e-9 {
            max -= step;
        }
        if max <= min {
            max = min + step;
        }
        Axis {
            min,
            max,
            step,
            log: false,
        }
    }

    /// A base-10 log axis from the power of ten at or below `lo` to the one at or above `hi`.
    pub fn log(lo: f64, hi: f64) -> Axis {
        let lo = if lo > 0.0 && lo.is_finite() { lo } else { 1.0 };
        let hi = if hi > 0.0 && hi.is_finite() { hi } else { lo };
        let min = 10f64.powf(lo.log10().floor());
        let mut max = 10f64.powf(hi.log10().ceil());
        if max <= min {
            max = min * 10.0;
        }
        Axis {
            min,
            max,
            step: 10.0,
            log: true,
        }
    }

    /// Where `v` falls between `min` (0) and `max` (1).
    pub fn fraction(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
        } else {
            (v - self.min) / (self.max - self.min)
        }
    }

    /// Tick positions and labels.
    pub fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            let first = self.min.log10().round() as i32;
            let last = self.max.log10().round() as i32;
            return (first..=last)
                .map(|k| {
                    let v = 10f64.powi(k);
                    (v, compact(v))
                })
                .collect();
        }
        let n = ((self.max - self.min) / self.step).round() as i64;
        (0..=n)
            // Computed from the index, not accumulated, so float error does not build up.
            .map(|i| {
                let v = self.min + i as f64 * self.step;
                (v, tick_label(v, self.step))
            })
            .collect()
    }
}

/// The smallest of 1, 2, 5 x 10^k that splits `span` into at most `max_ticks` steps.
pub fn nice_step(span: f64, max_ticks: usize) -> f64 {
    let raw = span / max_ticks as f64;
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let factor = if norm <= 1.0 + 1e-9 {
        1.0
    } else if norm <= 2.0 + 1e-9 {
        2.0
    } else if norm <= 5.0 + 1e-9 {
        5.0
    } else {
        10.0
    };
    factor * magnitude
}

/// The unit (1, k, M, G) for `v`: its divisor and suffix.
fn unit_of(v: f64) -> (f64, &'static str) {
    let a = v.abs();
    if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    }
}

/// A tick label precise enough to tell ticks `step` apart: 1.05k with a step of 50.
pub fn tick_label(v: f64, step: f64) -> String {
    if v.abs() < step * 1e-6 {
        return "0".to_string();
    }
    let (div, suffix) = unit_of(v);
    let scaled_step = step / div;
    let decimals = if scaled_step >= 1.0 {
        0
    } else {
        ((-scaled_step.log10()).ceil() as usize).min(12)
    };
    format!("{}{suffix}", trim(&format!("{:.*}", decimals, v / div)))
}

/// A value in few characters: 1.2k, 3.5M, 0.25, 0.0042, 12.5.
pub fn compact(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    let (div, suffix) = unit_of(v);
    if div > 1.0 {
        let s = trim(&format!("{:.1}", v / div));
        // 999_950 rounds to "1000.0k": say 1M instead.
        if s.trim_start_matches('-') == "1000" && suffix != "G" {
            let (_, next) = unit_of(div * 1000.0);
            return format!("{}1{next}", if v < 0.0 { "-" } else { "" });
        }
        return format!("{s}{suffix}");
    }
    let a = v.abs();
    let decimals = if a >= 100.0 {
        0
    } else if a >= 1.0 {
        2
    } else {
        // Two significant digits below 1.
        ((-a.log10()).floor() as usize + 2).min(12)
    };
    trim(&format!("{v:.decimals$}"))
}

/// Drops trailing zeros after a decimal point, and the point itself; "-0" becomes "0".
fn trim(s: &str) -> String {
    let t = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    };
    if t == "-0" {
        "0".to_string()
    } else {
        t.to_string()
    }
}

/// A coordinate with at most two decimals.
pub(crate) fn fmt2(v: f64) -> String {
    trim(&format!("{v:.2}"))
}

/// Escapes text for HTML and SVG content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(a: &Axis) -> Vec<f64> {
        a.ticks().into_iter().map(|t| t.0).collect()
    }

    #[test]
    fn nice_ticks_0_to_973() {
        let a = Axis::linear(0.0, 973.0, 5);
        assert!(a.step == 100.0 || a.step == 200.0, "step {}", a.step);
        assert_eq!(a.min, 0.0);
        assert_eq!(a.max, 1000.0);
        assert_eq!(values(&a), vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        let labels: Vec<String> = a.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["0", "200", "400", "600", "800", "1k"]);
    }

    #[test]
    fn nice_ticks_small_values() {
        let a = Axis::linear(0.0, 0.0042, 5);
        assert!((a.step - 0.001).abs() < 1e-12, "step {}", a.step);
        assert!((a.max - 0.005).abs() < 1e-12);
        let labels: Vec<String> = a.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["0", "0.001", "0.002", "0.003", "0.004", "0.005"]);
    }

    #[test]
    fn nice_ticks_no_float_noise() {
        let a = Axis::linear(0.0, 0.3, 3);
        assert_eq!(a.ticks().len(), 4, "{:?}", a.ticks());
        assert_eq!(a.ticks()[3].1, "0.3");
    }

    #[test]
    fn nice_ticks_constant_and_single_point() {
        // All zero: 0..1.
        let a = Axis::linear(0.0, 0.0, 5);
        assert_eq!((a.min, a.max), (0.0, 1.0));
        // A constant 7 (y from 0 makes it 0..7).
        let a = Axis::linear(0.0, 7.0, 5);
        assert_eq!((a.min, a.max, a.step), (0.0, 8.0, 2.0));
        // A single point at x = 5 not from zero: widened around it.
        let a = Axis::linear(5.0, 5.0, 5);
        assert!(a.min < 5.0 && a.max > 5.0, "{a:?}");
        assert!(a.ticks().len() >= 2);
    }

    #[test]
    fn tick_labels_resolve_the_step() {
        assert_eq!(tick_label(1050.0, 50.0), "1.05k");
        assert_eq!(tick_label(1500.0, 500.0), "1.5k");
        assert_eq!(tick_label(2_000_000.0, 1_000_000.0), "2M");
        assert_eq!(tick_label(0.25, 0.05), "0.25");
    }

    #[test]
    fn compact_values() {
        assert_eq!(compact(1234.0), "1.2k");
        assert_eq!(compact(3_500_000.0), "3.5M");
        assert_eq!(compact(0.25), "0.25");
        assert_eq!(compact(0.0042), "0.0042");
        assert_eq!(compact(12.5), "12.5");
        assert_eq!(compact(999_990.0), "1M");
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(-2500.0), "-2.5k");
    }

    #[test]
    fn downsample_keeps_spikes_and_bound() {
        let mut pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        pts[4321].1 = 99.0;
        pts[777].1 = -5.0;
        let d = downsample(&pts, MAX_POINTS);
        assert!(d.len() <= MAX_POINTS, "{}", d.len());
        assert!(d.contains(&(4321.0, 99.0)));
        assert!(d.contains(&(777.0, -5.0)));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0), "x order kept");
        let short: Vec<(f64, f64)> = pts[..100].to_vec();
        assert_eq!(downsample(&short, MAX_POINTS), short);
    }

    #[test]
    fn chart_renders_series_and_skips_bad_points() {
        let mut c = Chart::new("t", "T <1>", "s", "ms");
        c.series.push(Series::new(
            "a&b",
            vec![
                (1.0, 2.0),
                (2.0, f64::NAN),
                (3.0, f64::INFINITY),
                (4.0, 1.0),
            ],
        ));
        c.series.push(Series::new("empty", vec![]));
        let svg = c.render();
        assert!(svg.starts_with("<svg class=\"chart\" data-chart=\"t\""));
        assert!(svg.contains("data-series=\"a&amp;b\" data-points=\"2\""));
        assert!(svg.contains("T &lt;1&gt;"));
        assert!(
            !svg.contains("data-series=\"empty\""),
            "no line for an empty series"
        );
        assert!(svg.contains("data-legend=\"empty\""), "but a legend entry");
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn single_point_gets_a_dot() {
        let mut c = Chart::new("one", "One", "s", "n");
        c.series.push(Series::new("x", vec![(1.0, 3.0)]));
        let svg = c.render();
        assert!(svg.contains("data-points=\"1\""));
        assert!(svg.contains("<g data-instant=\"x\""), "{svg}");
        assert!(svg.contains(&format!("r=\"{INSTANT_R}\"")), "a large dot");
        // Two points are a line with small dots, not instants.
        c.series[0].points.push((2.0, 4.0));
        assert!(!c.render().contains("data-instant"));
    }

    /// The x of the last vertical grid line's label: the axis's end.
    fn last_x_tick(svg: &str) -> String {
        let labels: Vec<&str> = svg
            .lines()
            .filter(|l| {
                l.contains("text-anchor=\"middle\">")
                    && l.contains(&format!("y=\"{}\"", BOTTOM + 14.0))
            })
            .collect();
        let l = labels.last().unwrap();
        l[l.find('>').unwrap() + 1..l.find("</").unwrap()].to_string()
    }

    #[test]
    fn x_max_stretches_the_axis_to_the_run() {
        // Every event in the first second of a 5 s run: the axis still runs 0 to 5.
        let mut c = Chart::new("connect", "Connect", "seconds since start", "ms");
        c.x_from_zero = true;
        c.series.push(Series::new("p99", vec![(1.0, 0.4)]));
        assert_eq!(
            last_x_tick(&c.render()),
            "1",
            "without x_max: the data's span"
        );
        c.x_max = Some(5.0);
        let svg = c.render();
        assert_eq!(last_x_tick(&svg), "5", "{svg}");
        // The point sits a fifth of the way along the plot.
        let x = LEFT + (RIGHT - LEFT) / 5.0;
        assert!(svg.contains(&format!("cx=\"{}\"", fmt2(x))), "{svg}");
        // Data past x_max is not cut off.
        c.x_max = Some(0.5);
        assert_eq!(last_x_tick(&c.render()), "1");
    }

    #[test]
    fn coordinates_have_at_most_two_decimals() {
        let mut c = Chart::new("d", "D", "s", "n");
        c.series.push(Series::new(
            "x",
            (0..50).map(|i| (i as f64 / 3.0, i as f64 / 7.0)).collect(),
        ));
        let svg = c.render();
        let start = svg.find("points=\"").unwrap() + 8;
        let end = start + svg[start..].find('"').unwrap();
        for coord in svg[start..end].split([' ', ',']) {
            let decimals = coord.split('.').nth(1).map_or(0, str::len);
            assert!(decimals <= 2, "{coord}");
        }
    }

    #[test]
    fn dots_series_are_rings_without_a_line() {
        let mut c = Chart::new("d", "D", "x", "y");
        c.series
            .push(Series::new("line", vec![(1.0, 1.0), (2.0, 4.0)]));
        c.series.push(Series::new("broke", vec![(2.0, 4.0)]));
        c.dots = vec!["broke".into()];
        let svg = c.render();
        assert!(svg.contains("<polyline data-series=\"line\" data-points=\"2\""));
        assert!(svg.contains("<g data-series=\"broke\" data-points=\"1\""));
        assert!(!svg.contains("<polyline data-series=\"broke\""));
        assert!(svg.contains("data-legend=\"broke\""));
    }

    #[test]
    fn a_wide_legend_widens_the_view_box() {
        let mut c = Chart::new("w", "W", "x", "y");
        c.series.push(Series::new(
            "poller=poll sndbuf=8k workers=1",
            vec![(1.0, 1.0)],
        ));
        assert!(
            c.render().contains("viewBox=\"0 0 720 300\""),
            "off by default"
        );
        c.wide_legend = true;
        assert!(
            c.render().contains("viewBox=\"0 0 803 300\""),
            "{}",
            c.render()
        );
        c.series[0].name = "short".into();
        assert!(c.render().contains("viewBox=\"0 0 720 300\""));
    }

    #[test]
    fn colours_can_be_chosen_per_series() {
        let mut c = Chart::new("c", "C", "x", "y");
        for name in ["a", "a #2", "b"] {
            c.series
                .push(Series::new(name, vec![(1.0, 1.0), (2.0, 2.0)]));
        }
        c.colours = vec![0, 0];
        let svg = c.render();
        let colour_of = |name: &str| {
            let tag = svg
                .split('<')
                .find(|t| t.starts_with(&format!("polyline data-series=\"{name}\"")))
                .unwrap();
            let start = tag.find("stroke=\"").unwrap() + 8;
            tag[start..start + 7].to_string()
        };
        assert_eq!(colour_of("a"), PALETTE[0]);
        assert_eq!(colour_of("a #2"), PALETTE[0]);
        assert_eq!(colour_of("b"), PALETTE[2], "past the list: its position");
    }

    #[test]
    fn log_axis_with_labelled_ticks() {
        let mut c = Chart::new("p", "P", "percentile", "ms");
        c.log_x = true;
        c.x_ticks = vec![(2.0, "50%".into()), (10000.0, "max".into())];
        c.series.push(Series::new(
            "lat",
            vec![(2.0, 1.0), (10.0, 2.0), (10000.0, 9.0)],
        ));
        let svg = c.render();
        assert!(svg.contains(">50%<") && svg.contains(">max<"));
        assert!(svg.contains("data-points=\"3\""));
    }
}
