//! Grouped bar charts as inline SVG, in the look of [`crate::svg`]: the same viewBox, plot
//! area, palette, fonts, grid and nice y ticks from 0. The viewBox is widened past
//! [`crate::svg::WIDTH`] only when a series name is too long for the legend.
//!
//! A chart has groups along x (a pivot table's rows) and, in each group, one bar per series (the
//! table's columns), coloured by the palette in series order and named in the legend. A bar may
//! carry a 95% confidence interval, drawn as a whisker: a vertical line from `value - ci` to
//! `value + ci` with a cap at each end. A missing value leaves its slot empty.
//!
//! The y axis covers the bars and their whiskers, but a whisker reaching past twice the tallest
//! bar is cut at the top of the plot (its cap left off there), so one wide interval does not
//! flatten every bar; the lower end of a whisker stops at the axis (0 for non-negative bars).
//!
//! Markup, for tests: the chart is `<svg class="chart" data-chart="NAME">`; each series with at
//! least one bar a `<g data-series="NAME" data-points="N">` (N bars drawn) holding one
//! `<rect class="bar" data-group=".." data-value="..">` per bar (with a `<title>` giving the
//! value on hover) and, for a bar with an interval, `<line class="whisker">` and
//! `<line class="cap">` elements; each series has a `<g data-legend="NAME">`.

use std::fmt::Write;

use crate::svg::{
    axis_titles, compact, escape, fmt2, grid_and_frame, legend_width, y_labels, Axis, BOTTOM,
    HEIGHT, LEFT, PALETTE, RIGHT, TOP,
};

/// One bar: its value, the half-width of its 95% confidence interval, and the hover text
/// (default: "GROUP · SERIES: VALUE ± CI").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub ci95: Option<f64>,
    pub label: Option<String>,
}

impl Bar {
    pub fn new(value: f64, ci95: Option<f64>) -> Bar {
        Bar {
            value,
            ci95,
            label: None,
        }
    }
}

/// A grouped bar chart. Fill the public fields, then [`BarChart::render`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarChart {
    /// The `data-chart` attribute.
    pub name: String,
    pub title: String,
    /// What the groups are (shown under the group labels).
    pub x_label: String,
    pub y_label: String,
    /// Group labels, left to right.
    pub groups: Vec<String>,
    /// Series (bar) names, in bar order within a group; colours follow this order.
    pub series: Vec<String>,
    /// `values[group][series]`; None (or a non-finite value) draws no bar.
    pub values: Vec<Vec<Option<Bar>>>,
    /// A line of text in the plot area.
    pub note: Option<String>,
}

/// A bar is at most this wide, however few there are.
const MAX_BAR: f64 = 48.0;
/// An average label character's width at font size 11, for fitting group labels.
const CHAR_WIDTH: f64 = 6.2;

impl BarChart {
    pub fn new(name: &str, title: &str, x_label: &str, y_label: &str) -> BarChart {
        BarChart {
            name: name.to_string(),
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            ..BarChart::default()
        }
    }

    /// The bar of group `g`, series `s`, if it has a finite value.
    fn bar(&self, g: usize, s: usize) -> Option<&Bar> {
        self.values
            .get(g)?
            .get(s)?
            .as_ref()
            .filter(|b| b.value.is_finite())
    }

    /// The y axis: bars and whiskers, from 0, whiskers cut at twice the tallest bar.
    fn axis(&self) -> Axis {
        let bars: Vec<&Bar> = (0..self.groups.len())
            .flat_map(|g| (0..self.series.len()).filter_map(move |s| self.bar(g, s)))
            .collect();
        let ci = |b: &Bar| b.ci95.filter(|c| c.is_finite()).unwrap_or(0.0).abs();
        let hi = bars.iter().map(|b| b.value).fold(0.0, f64::max);
        let lo = bars.iter().map(|b| b.value).fold(0.0, f64::min);
        let hi_w = bars.iter().map(|b| b.value + ci(b)).fold(hi, f64::max);
        let lo_w = bars
            .iter()
            .filter(|b| b.value < 0.0)
            .map(|b| b.value - ci(b))
            .fold(lo, f64::min);
        let top = if hi > 0.0 { hi_w.min(2.0 * hi) } else { hi_w };
        let bottom = if lo < 0.0 { lo_w.max(2.0 * lo) } else { 0.0 };
        Axis::linear(bottom, top.max(hi), 5)
    }

    /// The chart as one `<svg>` element; all text is escaped.
    pub fn render(&self) -> String {
        let axis = self.axis();
        let py = |y: f64| BOTTOM - axis.fraction(y.clamp(axis.min, axis.max)) * (BOTTOM - TOP);
        let mut out = String::with_capacity(4096);
        let title = escape(&self.title);
        let _ = write!(
            out,
            "<svg class=\"chart\" data-chart=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" \
             viewBox=\"0 0 {} {HEIGHT}\" role=\"img\" font-family=\"sans-serif\" \
             font-size=\"11\">\n<title>{title}</title>\n\
             <text x=\"{LEFT}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{title}</text>\n",
            escape(&self.name),
            fmt2(legend_width(self.series.iter().map(String::as_str))),
        );

        // Horizontal grid, frame, y tick labels, axis labels.
        let ticks = axis.ticks();
        let y_px: Vec<f64> = ticks.iter().map(|(y, _)| py(*y)).collect();
        grid_and_frame(&mut out, &[], &y_px);
        out.push_str("<g fill=\"#444\">\n");
        y_labels(&mut out, &ticks, &py);
        let n_groups = self.groups.len().max(1);
        let group_w = (RIGHT - LEFT) / n_groups as f64;
        let max_chars = ((group_w - 4.0) / CHAR_WIDTH).floor().max(1.0) as usize;
        for (g, label) in self.groups.iter().enumerate() {
            let x = LEFT + group_w * (g as f64 + 0.5);
            let shown = if label.chars().count() > max_chars {
                let mut s: String = label.chars().take(max_chars.saturating_sub(1)).collect();
                s.push('…');
                s
            } else {
                label.clone()
            };
            let _ = writeln!(
                out,
                "<text class=\"group\" x=\"{}\" y=\"{}\" text-anchor=\"middle\"><title>{}</title>{}</text>",
                fmt2(x),
                BOTTOM + 14.0,
                escape(label),
                escape(&shown)
            );
        }
        axis_titles(&mut out, &self.x_label, &self.y_label);
        out.push_str("</g>\n");

        // Bars, whiskers and legend, one series at a time.
        let n_series = self.series.len().max(1);
        let bar_w = (group_w * 0.8 / n_series as f64).min(MAX_BAR);
        let cap_w = (bar_w * 0.5).min(12.0);
        let zero = py(0.0);
        for (s, series) in self.series.iter().enumerate() {
            let colour = PALETTE[s % PALETTE.len()];
            let name = escape(series);
            let drawn: Vec<usize> = (0..self.groups.len())
                .filter(|g| self.bar(*g, s).is_some())
                .collect();
            if !drawn.is_empty() {
                let _ = writeln!(
                    out,
                    "<g data-series=\"{name}\" data-points=\"{}\" fill=\"{colour}\">",
                    drawn.len()
                );
                for g in drawn {
                    let b = self.bar(g, s).expect("filtered above");
                    let x0 = LEFT
                        + group_w * g as f64
                        + (group_w - bar_w * n_series as f64) / 2.0
                        + bar_w * s as f64;
                    let top = py(b.value).min(zero);
                    let height = (py(b.value) - zero).abs();
                    let ci = b.ci95.filter(|c| c.is_finite()).map(f64::abs);
                    let label = b.label.clone().unwrap_or_else(|| match ci {
                        Some(c) => format!(
                            "{} · {series}: {} ± {}",
                            self.groups[g],
                            compact(b.value),
                            compact(c)
                        ),
                        None => format!("{} · {series}: {}", self.groups[g], compact(b.value)),
                    });
                    let _ = writeln!(
                        out,
                        "<rect class=\"bar\" data-group=\"{}\" data-value=\"{}\" x=\"{}\" y=\"{}\" \
                         width=\"{}\" height=\"{}\"><title>{}</title></rect>",
                        escape(&self.groups[g]),
                        b.value,
                        fmt2(x0 + 1.0),
                        fmt2(top),
                        fmt2((bar_w - 2.0).max(1.0)),
                        fmt2(height),
                        escape(&label)
                    );
                    if let Some(c) = ci.filter(|c| *c > 0.0) {
                        let xc = fmt2(x0 + bar_w / 2.0);
                        let (hi, lo) = (b.value + c, b.value - c);
                        let (y_hi, y_lo) = (fmt2(py(hi)), fmt2(py(lo)));
                        let _ = write!(
                            out,
                            "<g stroke=\"#222\" stroke-width=\"1.2\"><line class=\"whisker\" \
                             x1=\"{xc}\" y1=\"{y_hi}\" x2=\"{xc}\" y2=\"{y_lo}\"/>"
                        );
                        let (xa, xb) = (
                            fmt2(x0 + bar_w / 2.0 - cap_w / 2.0),
                            fmt2(x0 + bar_w / 2.0 + cap_w / 2.0),
                        );
                        for (v, y) in [(hi, &y_hi), (lo, &y_lo)] {
                            // A cut end gets no cap: the interval goes on past the axis.
                            if (axis.min..=axis.max).contains(&v) {
                                let _ = write!(
                                    out,
                                    "<line class=\"cap\" x1=\"{xa}\" y1=\"{y}\" x2=\"{xb}\" y2=\"{y}\"/>"
                                );
                            }
                        }
                        out.push_str("</g>\n");
                    }
                }
                out.push_str("</g>\n");
            }
            let ly = TOP + 8.0 + 16.0 * s as f64;
            let _ = writeln!(
                out,
                "<g data-legend=\"{name}\"><rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" \
                 fill=\"{colour}\"/><text x=\"{}\" y=\"{}\">{name}</text></g>",
                RIGHT + 14.0,
                ly - 5.0,
                RIGHT + 36.0,
                ly + 4.0
            );
        }
        // The zero line over the bars' feet.
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" y1=\"{z}\" x2=\"{RIGHT}\" y2=\"{z}\" stroke=\"#666\" \
             stroke-width=\"1\"/>",
            z = fmt2(zero)
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The attribute `name` of every element of `svg` that has `marker` in its start tag.
    fn attrs(svg: &str, marker: &str, name: &str) -> Vec<f64> {
        svg.split('<')
            .filter(|tag| tag.contains(marker))
            .map(|tag| {
                let key = format!(" {name}=\"");
                let start = tag.find(&key).unwrap_or_else(|| panic!("{tag}")) + key.len();
                let end = start + tag[start..].find('"').unwrap();
                tag[start..end].parse().unwrap()
            })
            .collect()
    }

    fn chart(values: Vec<Vec<Option<Bar>>>) -> BarChart {
        let mut c = BarChart::new("bars-0", "T", "rows", "v");
        c.groups = (0..values.len()).map(|g| format!("g{g}")).collect();
        c.series = (0..values[0].len()).map(|s| format!("s{s}")).collect();
        c.values = values;
        c
    }

    #[test]
    fn bar_heights_are_proportional_from_zero() {
        let c = chart(vec![
            vec![Some(Bar::new(10.0, None)), Some(Bar::new(40.0, None))],
            vec![Some(Bar::new(20.0, None)), Some(Bar::new(30.0, None))],
        ]);
        let svg = c.render();
        let heights = attrs(&svg, "class=\"bar\"", "height");
        let values = attrs(&svg, "class=\"bar\"", "data-value");
        assert_eq!(heights.len(), 4);
        // Series by series: s0 (10, 20), then s1 (40, 30).
        assert_eq!(values, [10.0, 20.0, 40.0, 30.0]);
        let per_unit = heights[0] / 10.0;
        for (h, v) in heights.iter().zip(&values) {
            assert!((h - v * per_unit).abs() < 0.02, "{h} for {v}");
        }
        // The feet stand on the axis at 0 (the plot's bottom): y + height = BOTTOM.
        let ys = attrs(&svg, "class=\"bar\"", "y");
        for (y, h) in ys.iter().zip(&heights) {
            assert!((y + h - BOTTOM).abs() < 0.02);
        }
        assert!(svg.contains("data-series=\"s0\" data-points=\"2\""));
        assert!(svg.contains("data-legend=\"s1\""));
        assert!(svg.contains(">0</text>"), "y ticks start at 0");
    }

    #[test]
    fn whiskers_span_the_interval_with_caps() {
        let c = chart(vec![vec![
            Some(Bar::new(40.0, Some(10.0))),
            Some(Bar::new(20.0, None)),
        ]]);
        let svg = c.render();
        let heights = attrs(&svg, "class=\"bar\"", "height");
        let per_unit = heights[0] / 40.0;
        let y1 = attrs(&svg, "class=\"whisker\"", "y1");
        let y2 = attrs(&svg, "class=\"whisker\"", "y2");
        assert_eq!(y1.len(), 1, "no whisker without an interval");
        assert!(
            ((y2[0] - y1[0]) - 20.0 * per_unit).abs() < 0.03,
            "{y1:?} {y2:?}"
        );
        // Centred on the bar's top.
        let top = attrs(&svg, "class=\"bar\"", "y")[0];
        assert!(((y1[0] + y2[0]) / 2.0 - top).abs() < 0.02);
        assert_eq!(attrs(&svg, "class=\"cap\"", "y1").len(), 2);
    }

    #[test]
    fn a_huge_interval_is_cut_at_twice_the_tallest_bar() {
        let c = chart(vec![vec![
            Some(Bar::new(60.0, Some(150.0))),
            Some(Bar::new(3.0, Some(1.0))),
        ]]);
        let svg = c.render();
        let axis = c.axis();
        assert!(axis.max <= 150.0, "{axis:?}");
        // The cut whisker reaches the top of the plot and the axis' 0, with no cap.
        let y1 = attrs(&svg, "class=\"whisker\"", "y1");
        let y2 = attrs(&svg, "class=\"whisker\"", "y2");
        assert_eq!((y1[0], y2[0]), (TOP, BOTTOM));
        assert_eq!(
            attrs(&svg, "class=\"cap\"", "y1").len(),
            2,
            "only the small bar's"
        );
    }

    #[test]
    fn empty_cells_draw_no_bar() {
        let c = chart(vec![
            vec![Some(Bar::new(5.0, None)), None],
            vec![None, Some(Bar::new(f64::NAN, None))],
        ]);
        let svg = c.render();
        assert_eq!(attrs(&svg, "class=\"bar\"", "height").len(), 1);
        assert!(svg.contains("data-series=\"s0\" data-points=\"1\""));
        assert!(!svg.contains("data-series=\"s1\""), "s1 has no bar");
        assert!(svg.contains("data-legend=\"s1\""), "but is in the legend");
        assert!(!svg.contains("NaN"));
        // Nothing at all: still a chart with an axis.
        let mut c = chart(vec![vec![None]]);
        c.note = Some("no values".into());
        let svg = c.render();
        assert!(svg.contains("no values") && !svg.contains("class=\"bar\""));
    }

    #[test]
    fn text_is_escaped() {
        let mut c = chart(vec![vec![Some(Bar::new(1.0, Some(0.5)))]]);
        c.title = "a <b> & \"c\"".into();
        c.groups = vec!["x<y".into()];
        c.series = vec!["s=\"q\"&".into()];
        c.y_label = "<ms>".into();
        let svg = c.render();
        assert!(svg.contains("a &lt;b&gt; &amp; &quot;c&quot;"));
        assert!(svg.contains("data-group=\"x&lt;y\""));
        assert!(svg.contains("data-series=\"s=&quot;q&quot;&amp;\""));
        assert!(
            svg.contains("x&lt;y · s=&quot;q&quot;&amp;: 1 ± 0.5"),
            "{svg}"
        );
        assert!(svg.contains("&lt;ms&gt;"));
        assert!(!svg.contains("<b>") && !svg.contains("<ms>"));
    }

    #[test]
    fn long_group_labels_are_shortened_with_the_full_text_on_hover() {
        let mut c = chart(vec![vec![Some(Bar::new(1.0, None))]; 8]);
        c.groups[0] = "a very long group label that cannot fit".into();
        let svg = c.render();
        assert!(svg.contains("<title>a very long group label that cannot fit</title>a very"));
        assert!(svg.contains('…'));
    }
}
