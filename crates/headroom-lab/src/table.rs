//! Statistics over repetitions and the studies' pivot tables: rows are combinations of some
//! factors' levels, columns of others', each cell the mean ± 95% confidence interval of one
//! metric over the repetitions of the matching configurations.

use std::collections::BTreeMap;

use crate::store::RunRecord;

/// A metric over the repetitions of one cell: its mean, the half-width of its 95% confidence
/// interval (Student t) and how many values. Serialised (in `tables.json`) as
/// `{"mean": .., "ci95": .. or null, "n": ..}`. The statistics live in `headroom_core::stats`,
/// shared with the report's comparison of runs and repeats.
pub type Cell = MeanCi;

pub use headroom_core::numbers::fmt_value;
pub use headroom_core::stats::{mean_ci, t_975, MeanCi};

/// A pivot table of one metric. Serialised (in `tables.json`) with these field names; an empty
/// cell is `null`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Table {
    pub title: String,
    /// The metric the cells hold (labels the single column of a table without column factors).
    pub metric: String,
    pub row_factors: Vec<String>,
    pub col_factors: Vec<String>,
    /// One level per row factor, for each row.
    pub rows: Vec<Vec<String>>,
    /// One level per column factor, for each column.
    pub cols: Vec<Vec<String>>,
    /// `cells[row][col]`: the metric over the cell's Ok runs that have it; None when none has.
    pub cells: Vec<Vec<Option<Cell>>>,
    /// `failed[row][col]`: how many of the cell's runs failed (server or load).
    pub failed: Vec<Vec<usize>>,
    /// `runs[row][col]`: how many runs the cell has, Ok or failed.
    pub runs: Vec<Vec<usize>>,
    /// A table of the [`VERDICT`] "metric": `texts[row][col]` is the verdicts of the cell's Ok
    /// runs (`cpu_kernel`, or `pool_exhausted ×2, mixed` when the repetitions differ); `cells`
    /// are then empty. Empty for a table of numbers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub texts: Vec<Vec<Option<String>>>,
}

/// The pseudo-metric of a table of verdicts: each run's `verdict.name` from its summary (a rate
/// search's: the verdict of its first broken probe).
pub const VERDICT: &str = "verdict";

/// Rows = combinations of the `rows` factors' levels, columns = combinations of the `cols`
/// factors' levels (the first factor varying slowest), each factor's levels in the order of
/// `level_order` (the experiment's own order: factor -> levels; levels found in runs but not
/// there come after, in the order runs have them). A row or column without any run is left out;
/// with no row (column) factors the table has a single row (column) holding every run.
///
/// A cell is `metric` over the Ok runs of the matching configurations. Factors that are neither
/// rows nor columns are pooled: the cell takes the runs of every level of them together (the
/// title says which). Ok runs without the metric, or with a non-finite value, give no value.
/// Failed runs are counted per cell and rendered as "failed 2/3" when the cell has no value, or
/// as a suffix "(1 failed)". Runs lacking one of the row or column factors are left out.
pub fn pivot(
    runs: &[RunRecord],
    rows: &[String],
    cols: &[String],
    metric: &str,
    level_order: &BTreeMap<String, Vec<String>>,
) -> Table {
    let placed: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| rows.iter().chain(cols).all(|f| r.factors.contains_key(f)))
        .collect();
    let levels_of = |factor: &String| -> Vec<String> {
        let mut levels: Vec<String> = level_order.get(factor).cloned().unwrap_or_default();
        for r in &placed {
            let level = &r.factors[factor];
            if !levels.contains(level) {
                levels.push(level.clone());
            }
        }
        levels
    };
    let combos = |factors: &[String]| -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = vec![Vec::new()];
        for f in factors {
            let levels = levels_of(f);
            out = out
                .iter()
                .flat_map(|prefix| {
                    levels.iter().map(move |l| {
                        let mut c = prefix.clone();
                        c.push(l.clone());
                        c
                    })
                })
                .collect();
        }
        out
    };
    let key = |r: &RunRecord, factors: &[String]| -> Vec<String> {
        factors.iter().map(|f| r.factors[f].clone()).collect()
    };
    let present = |factors: &[String]| -> Vec<Vec<String>> {
        combos(factors)
            .into_iter()
            .filter(|c| placed.iter().any(|r| &key(r, factors) == c))
            .collect()
    };
    let row_keys = present(rows);
    let col_keys = present(cols);

    let mut values = vec![vec![Vec::<f64>::new(); col_keys.len()]; row_keys.len()];
    let mut names = vec![vec![Vec::<String>::new(); col_keys.len()]; row_keys.len()];
    let mut failed = vec![vec![0usize; col_keys.len()]; row_keys.len()];
    let mut counts = vec![vec![0usize; col_keys.len()]; row_keys.len()];
    for r in &placed {
        let (rk, ck) = (key(r, rows), key(r, cols));
        let (Some(i), Some(j)) = (
            row_keys.iter().position(|k| *k == rk),
            col_keys.iter().position(|k| *k == ck),
        ) else {
            continue;
        };
        counts[i][j] += 1;
        if !r.status.is_ok() {
            failed[i][j] += 1;
        } else if metric == VERDICT {
            if let Some(name) = r.summary["verdict"]["name"].as_str() {
                names[i][j].push(name.to_string());
            }
        } else if let Some(v) = r.metrics.get(metric).filter(|v| v.is_finite()) {
            values[i][j].push(*v);
        }
    }
    let cells = values
        .iter()
        .map(|row| row.iter().map(|vs| mean_ci(vs)).collect())
        .collect();

    let mut pooled: Vec<&String> = placed
        .iter()
        .flat_map(|r| r.factors.keys())
        .filter(|f| !rows.contains(f) && !cols.contains(f))
        .collect();
    pooled.sort();
    pooled.dedup();
    let texts: Vec<Vec<Option<String>>> = if metric == VERDICT {
        names
            .iter()
            .map(|row| row.iter().map(|n| verdict_text(n)).collect())
            .collect()
    } else {
        Vec::new()
    };
    let mut title = if metric == VERDICT {
        "why it broke: each run's verdict (docs/verdicts.md)".to_string()
    } else {
        format!("{metric} (mean ± 95% CI over repetitions)")
    };
    if !pooled.is_empty() {
        let names: Vec<&str> = pooled.iter().map(|s| s.as_str()).collect();
        title.push_str(&format!(", pooled over {}", names.join(", ")));
    }

    Table {
        title,
        metric: metric.to_string(),
        row_factors: rows.to_vec(),
        col_factors: cols.to_vec(),
        rows: row_keys,
        cols: col_keys,
        cells,
        failed,
        runs: counts,
        texts,
    }
}

/// The verdicts of a cell's runs: one name, or each with its count when they differ
/// (`pool_exhausted ×2, mixed`), the most frequent first; `None` for none.
fn verdict_text(names: &[String]) -> Option<String> {
    let mut counted: Vec<(String, usize)> = Vec::new();
    for n in names {
        match counted.iter_mut().find(|(m, _)| m == n) {
            Some((_, c)) => *c += 1,
            None => counted.push((n.clone(), 1)),
        }
    }
    counted.sort_by_key(|c| std::cmp::Reverse(c.1));
    match counted.as_slice() {
        [] => None,
        [(n, _)] => Some(n.clone()),
        many => Some(
            many.iter()
                .map(|(n, c)| {
                    if *c > 1 {
                        format!("{n} ×{c}")
                    } else {
                        n.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A cell as "mean ± ci" (each as [`fmt_value`]), or just the mean when there is one value.
pub fn fmt_cell(c: &Cell) -> String {
    match c.ci95 {
        Some(ci) => format!("{} ± {}", fmt_value(c.mean), fmt_value(ci)),
        None => fmt_value(c.mean),
    }
}

impl Table {
    /// The text of cell (i, j): "mean ± ci", with " (1 failed)" when some runs failed,
    /// "failed 2/3" when no run gave a value and some failed, "–" when the cell is empty.
    pub fn cell_text(&self, i: usize, j: usize) -> String {
        let failed = self.failed[i][j];
        if !self.texts.is_empty() {
            return match (&self.texts[i][j], failed) {
                (Some(t), 0) => t.clone(),
                (Some(t), f) => format!("{t} ({f} failed)"),
                (None, 0) => "–".to_string(),
                (None, f) => format!("failed {f}/{}", self.runs[i][j]),
            };
        }
        match (&self.cells[i][j], failed) {
            (Some(c), 0) => fmt_cell(c),
            (Some(c), f) => format!("{} ({f} failed)", fmt_cell(c)),
            (None, 0) => "–".to_string(),
            (None, f) => format!("failed {f}/{}", self.runs[i][j]),
        }
    }

    /// Header labels: the row factors' names (or "" with none), then one per column:
    /// "factor=level" joined by ", " (or the metric's name with no column factor).
    fn header(&self) -> Vec<String> {
        let mut h: Vec<String> = if self.row_factors.is_empty() {
            vec![String::new()]
        } else {
            self.row_factors.clone()
        };
        for col in &self.cols {
            if self.col_factors.is_empty() {
                h.push(self.metric.clone());
            } else {
                let parts: Vec<String> = self
                    .col_factors
                    .iter()
                    .zip(col)
                    .map(|(f, l)| format!("{f}={l}"))
                    .collect();
                h.push(parts.join(", "));
            }
        }
        h
    }

    /// Body lines: the row's levels (or "all" with no row factor), then the cells' texts.
    fn body(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let mut line: Vec<String> = if self.row_factors.is_empty() {
                    vec!["all".to_string()]
                } else {
                    row.clone()
                };
                line.extend((0..self.cols.len()).map(|j| self.cell_text(i, j)));
                line
            })
            .collect()
    }

    fn lead(&self) -> usize {
        self.row_factors.len().max(1)
    }

    /// A Markdown table under its title in bold; level columns left-aligned, cells right-aligned.
    pub fn markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let line = |cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| esc(c)).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = format!("**{}**\n\n", self.title);
        out.push_str(&line(&self.header()));
        let align: Vec<String> = (0..self.lead())
            .map(|_| "---".to_string())
            .chain(self.cols.iter().map(|_| "---:".to_string()))
            .collect();
        out.push_str(&format!("| {} |\n", align.join(" | ")));
        for body in self.body() {
            out.push_str(&line(&body));
        }
        out
    }

    /// CSV with a header line and one line per cell: the row factors' levels, the column
    /// factors' levels, mean, ci95, n, failed (mean and ci95 empty when there is none; numbers
    /// in full precision).
    pub fn csv(&self) -> String {
        let field = csv_field;
        let mut out = String::new();
        let text = !self.texts.is_empty();
        let columns: &[&str] = if text {
            &["verdict", "n", "failed"]
        } else {
            &["mean", "ci95", "n", "failed"]
        };
        let header: Vec<String> = self
            .row_factors
            .iter()
            .chain(&self.col_factors)
            .map(|f| field(f))
            .chain(columns.iter().map(|c| c.to_string()))
            .collect();
        out.push_str(&header.join(","));
        out.push('\n');
        for (i, row) in self.rows.iter().enumerate() {
            for (j, col) in self.cols.iter().enumerate() {
                let mut line: Vec<String> = row.iter().chain(col).map(|l| field(l)).collect();
                if text {
                    let t = self.texts[i][j].as_deref().unwrap_or_default();
                    line.push(field(t));
                    line.push((self.runs[i][j] - self.failed[i][j]).to_string());
                    line.push(self.failed[i][j].to_string());
                    out.push_str(&line.join(","));
                    out.push('\n');
                    continue;
                }
                let cell = self.cells[i][j];
                line.push(cell.map(|c| c.mean.to_string()).unwrap_or_default());
                line.push(
                    cell.and_then(|c| c.ci95)
                        .map(|c| c.to_string())
                        .unwrap_or_default(),
                );
                line.push(cell.map_or(0, |c| c.n).to_string());
                line.push(self.failed[i][j].to_string());
                out.push_str(&line.join(","));
                out.push('\n');
            }
        }
        out
    }

    /// Aligned for a terminal: the title, a header, a rule, the rows; levels left-aligned, cells
    /// right-aligned, columns two spaces apart.
    pub fn text(&self) -> String {
        let header = self.header();
        let body = self.body();
        let width = |s: &str| s.chars().count();
        let widths: Vec<usize> = (0..header.len())
            .map(|k| {
                body.iter()
                    .map(|line| width(&line[k]))
                    .chain([width(&header[k])])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let lead = self.lead();
        let render = |cells: &[String]| {
            let parts: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    let pad = " ".repeat(widths[k] - width(c));
                    if k < lead {
                        format!("{c}{pad}")
                    } else {
                        format!("{pad}{c}")
                    }
                })
                .collect();
            format!("{}\n", parts.join("  ").trim_end())
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&render(&header));
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&format!("{}\n", rule.join("  ")));
        for line in &body {
            out.push_str(&render(line));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_past_the_table_approach_the_normal() {
        // Exact values from R's qt(0.975, df).
        for (df, exact) in [
            (31, 2.039513),
            (40, 2.021075),
            (60, 2.000298),
            (120, 1.979930),
        ] {
            assert!((t_975(df) - exact).abs() < 1e-4, "df {df}: {}", t_975(df));
        }
        assert!((t_975(100_000) - 1.96).abs() < 1e-3);
        // Continuous with the table at 30.
        assert!((t_975(30) - 2.042272).abs() < 1e-6);
        assert!(t_975(31) < t_975(30));
    }

    #[test]
    fn tables_serialise_with_null_for_empty_cells() {
        let t = Table {
            title: "t".into(),
            metric: "m".into(),
            row_factors: vec!["a".into()],
            col_factors: vec!["b".into()],
            rows: vec![vec!["1".into()]],
            cols: vec![vec!["x".into()], vec!["y".into()]],
            cells: vec![vec![
                Some(Cell {
                    mean: 2.5,
                    ci95: None,
                    n: 1,
                }),
                None,
            ]],
            failed: vec![vec![0, 2]],
            runs: vec![vec![1, 2]],
            texts: Vec::new(),
        };
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "title": "t", "metric": "m", "row_factors": ["a"], "col_factors": ["b"],
                "rows": [["1"]], "cols": [["x"], ["y"]],
                "cells": [[{"mean": 2.5, "ci95": null, "n": 1}, null]],
                "failed": [[0, 2]], "runs": [[1, 2]],
            })
        );
    }

    #[test]
    fn mean_ci_edge_cases() {
        assert_eq!(mean_ci(&[]), None);
        assert_eq!(
            mean_ci(&[7.0]),
            Some(Cell {
                mean: 7.0,
                ci95: None,
                n: 1
            })
        );
        let c = mean_ci(&[5.0, 5.0, 5.0]).unwrap();
        assert_eq!((c.mean, c.ci95, c.n), (5.0, Some(0.0), 3));
    }
}
