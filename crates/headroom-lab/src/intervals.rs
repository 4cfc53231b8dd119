//! The load intervals a lab keeps: each run's intervals.jsonl lines (headroom-format's typed
//! [`IntervalLine`], the same a run directory holds), tagged with the rate probe they belong to,
//! and what the lab reads from them: the connection capacity and the rows of intervals.csv.
//!
//! Stores written before the lab kept the typed line hold a flat line of their own (`errors` a
//! number, `latency_p99_us` at the top); [`LabInterval::read`] reads both, so an older lab's
//! store still makes its tables and curves.

use headroom_run::interval::{IntervalLatency, IntervalLine, IntervalScenario};

/// One load interval as the lab stores it: the line's JSON with `probe` beside its keys. (Not
/// `#[serde(flatten)]`: serde buffers a flattened struct, and a buffered map cannot give
/// `status_codes` its numeric keys back.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabInterval {
    /// The rate probe (1, 2, ...) of a search; none in a run of one load.
    pub probe: Option<u32>,
    pub line: IntervalLine,
}

/// The columns of intervals.csv after the factors and the repetition, in order.
pub const CSV_COLUMNS: [&str; 13] = [
    "probe",
    "t_s",
    // The interval's end is t_s + length_s: the report charts each at its end, on an axis
    // that runs to the end of the run's last interval.
    "length_s",
    "responses",
    "errors",
    "latency_p99_us",
    "connections_open",
    "connections_peak",
    "connect_timeouts",
    "sessions_completed",
    "tls_p99_us",
    "tls_handshakes",
    "tls_resumed",
];

impl LabInterval {
    /// A stored interval, of either form (see the module's docs). `None` for a row that is
    /// neither (a store edited by hand): it is left out rather than read as zeros.
    pub fn read(mut v: serde_json::Value) -> Option<LabInterval> {
        if v.get("errors").is_some_and(|e| e.is_number()) {
            return Some(Self::from_flat(&v));
        }
        let probe = v.as_object_mut()?.remove("probe");
        Some(LabInterval {
            probe: probe.and_then(|p| p.as_u64()).map(|p| p as u32),
            line: serde_json::from_value(v).ok()?,
        })
    }

    /// The interval as stored.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.line).expect("an IntervalLine is plain data");
        if let Some(p) = self.probe {
            v["probe"] = p.into();
        }
        v
    }

    /// The flat line older labs stored: its figures where the typed line keeps them. It held
    /// the failures' total and the connect timeouts only, so the rest of the total is counted
    /// under `other`.
    fn from_flat(v: &serde_json::Value) -> LabInterval {
        let n = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        let f = |k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
        let timeouts = n("connect_timeouts");
        let mut line = IntervalLine {
            index: n("index"),
            t_s: f("t_s"),
            length_s: f("length_s"),
            responses: n("responses"),
            latency_us: IntervalLatency {
                p50: n("latency_p50_us"),
                p99: n("latency_p99_us"),
                ..IntervalLatency::default()
            },
            tls_us: IntervalLatency {
                p50: n("tls_p50_us"),
                p99: n("tls_p99_us"),
                ..IntervalLatency::default()
            },
            tls_handshakes: n("tls_handshakes"),
            tls_resumed: n("tls_resumed"),
            connections_open: n("connections_open"),
            connections_peak: n("connections_peak"),
            tcp_connected_peak: n("tcp_connected_peak"),
            ..IntervalLine::default()
        };
        line.errors.connect_timeout = timeouts;
        line.errors.other = n("errors").saturating_sub(timeouts);
        if n("sessions_completed") > 0 {
            line.scenario = Some(IntervalScenario {
                sessions_completed: n("sessions_completed"),
                ..IntervalScenario::default()
            });
        }
        LabInterval {
            probe: v.get("probe").and_then(|p| p.as_u64()).map(|p| p as u32),
            line,
        }
    }

    /// Every failure in the interval.
    pub fn errors(&self) -> u64 {
        self.line.errors.total()
    }

    pub fn sessions_completed(&self) -> u64 {
        self.line
            .scenario
            .as_ref()
            .map_or(0, |s| s.sessions_completed)
    }

    /// The interval's cells under [`CSV_COLUMNS`].
    pub fn csv_cells(&self) -> Vec<String> {
        let l = &self.line;
        let real = |x: f64| serde_json::Value::from(x).to_string();
        vec![
            self.probe.map(|p| p.to_string()).unwrap_or_default(),
            real(l.t_s),
            real(l.length_s),
            l.responses.to_string(),
            self.errors().to_string(),
            l.latency_us.p99.to_string(),
            l.connections_open.to_string(),
            l.connections_peak.to_string(),
            l.errors.connect_timeout.to_string(),
            self.sessions_completed().to_string(),
            l.tls_us.p99.to_string(),
            l.tls_handshakes.to_string(),
            l.tls_resumed.to_string(),
        ]
    }
}

/// The lines of one load as the lab keeps them, with the probe they belong to.
pub fn kept(lines: Vec<IntervalLine>, probe: Option<u32>) -> Vec<LabInterval> {
    lines
        .into_iter()
        .map(|line| LabInterval { probe, line })
        .collect()
}

/// When the server counts as broken in a load's intervals (the experiment's `capacity:`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakRule {
    pub max_error_rate: f64,
    /// Microseconds.
    pub p99: Option<u64>,
    pub p99_intervals: u32,
}

impl BreakRule {
    /// Errors only, as before `p99:` existed.
    pub fn errors(max_error_rate: f64) -> BreakRule {
        BreakRule {
            max_error_rate,
            p99: None,
            p99_intervals: 3,
        }
    }
}

/// Concurrent-connection capacity (seed 000): the most connections open at once before the
/// server broke: the first interval whose error rate passes `rule.max_error_rate` or that has a
/// connect timeout, or the first of `rule.p99_intervals` intervals in a row whose p99 passes
/// `rule.p99`. Returns the capacity and whether such a break was reached (otherwise the load
/// never found the limit and the figure is a lower bound).
pub fn connection_capacity<'a>(
    intervals: impl IntoIterator<Item = &'a IntervalLine>,
    rule: &BreakRule,
) -> (f64, bool) {
    let (cap, at) = connection_break(intervals, rule);
    (cap, at.is_some())
}

/// [`connection_capacity`], with where the break was found: the position of the interval
/// that decided it (the bad interval, or the last of the slow ones), `None` without a break.
/// The verdict at the capacity point reads the run up to there.
pub fn connection_break<'a>(
    intervals: impl IntoIterator<Item = &'a IntervalLine>,
    rule: &BreakRule,
) -> (f64, Option<usize>) {
    let mut best = 0u64;
    // The peak before the current run of slow intervals, and how long that run is.
    let mut before_slow = 0u64;
    let mut slow = 0u32;
    for (k, iv) in intervals.into_iter().enumerate() {
        let errors = iv.errors.total();
        let rate = errors as f64 / (iv.responses + errors).max(1) as f64;
        if rate > rule.max_error_rate || iv.errors.connect_timeout > 0 {
            return ((if slow > 0 { before_slow } else { best }) as f64, Some(k));
        }
        if rule.p99.is_some_and(|limit| iv.latency_us.p99 > limit) {
            if slow == 0 {
                before_slow = best;
            }
            slow += 1;
            if slow >= rule.p99_intervals {
                return (before_slow as f64, Some(k));
            }
        } else {
            slow = 0;
        }
        best = best.max(iv.connections_peak);
    }
    (best as f64, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(responses: u64, errors: u64, peak: u64) -> IntervalLine {
        let mut l = IntervalLine {
            responses,
            connections_peak: peak,
            ..IntervalLine::default()
        };
        l.errors.reset = errors;
        l
    }

    #[test]
    fn the_break_is_found_at_the_interval_that_decides_it() {
        let iv = |peak: u64, err: u64, p99: u64| {
            let mut l = line(100, err, peak);
            l.latency_us.p99 = p99;
            l
        };
        let rule = BreakRule {
            p99: Some(10_000),
            p99_intervals: 3,
            ..BreakRule::errors(0.01)
        };
        // Slow from the 2nd interval: decided at the 4th (index 3), the peak before the 2nd.
        let slow = [
            iv(10, 0, 1),
            iv(20, 0, 20_000),
            iv(30, 0, 20_000),
            iv(40, 0, 20_000),
        ];
        assert_eq!(connection_break(&slow, &rule), (10.0, Some(3)));
        // Errors decide at once.
        let bad = [iv(10, 0, 1), iv(20, 50, 1), iv(30, 0, 1)];
        assert_eq!(connection_break(&bad, &rule), (10.0, Some(1)));
        assert_eq!(connection_break(&bad[..1], &rule), (10.0, None));
    }

    #[test]
    fn capacity_is_the_peak_before_the_first_bad_interval() {
        let iv = |peak: u64, ok: u64, err: u64, ct: u64| {
            let mut l = line(ok, err, peak);
            l.errors.connect_timeout = ct;
            l
        };
        let e = BreakRule::errors;
        let good = [iv(100, 50, 0, 0), iv(250, 80, 0, 0), iv(240, 90, 0, 0)];
        assert_eq!(connection_capacity(&good, &e(0.01)), (250.0, false));
        let errors = [
            iv(100, 50, 0, 0),
            iv(300, 80, 0, 0),
            iv(350, 90, 10, 0),
            iv(400, 1, 0, 0),
        ];
        assert_eq!(connection_capacity(&errors, &e(0.01)), (300.0, true));
        assert_eq!(connection_capacity(&errors, &e(0.2)), (400.0, false));
        // A connect timeout breaks it whatever the error rate.
        let timeouts = [iv(100, 50, 0, 0), iv(200, 80, 0, 1)];
        assert_eq!(connection_capacity(&timeouts, &e(0.5)), (100.0, true));
    }

    #[test]
    fn a_p99_limit_breaks_at_the_first_of_enough_slow_intervals_in_a_row() {
        let iv = |peak: u64, p99_ms: u64| {
            let mut l = line(100, 0, peak);
            l.latency_us.p99 = p99_ms * 1000;
            l
        };
        let rule = BreakRule {
            max_error_rate: 0.01,
            p99: Some(10_000),
            p99_intervals: 3,
        };
        // One slow second (a start's jitter) and two in a row do not end it; three do, and the
        // capacity is the peak before the first of them.
        let curve = [
            iv(400, 12),
            iv(2000, 3),
            iv(4000, 11),
            iv(6000, 15),
            iv(8000, 4),
            iv(10000, 12),
            iv(12000, 18),
            iv(14000, 25),
            iv(16000, 30),
        ];
        assert_eq!(connection_capacity(&curve, &rule), (8000.0, true));
        // Without the limit: a lower bound at the top.
        assert_eq!(
            connection_capacity(&curve, &BreakRule::errors(0.01)),
            (16000.0, false)
        );
        // Two slow intervals in a row then an error: the peak before the slow ones.
        let mut err = iv(13000, 20);
        err.errors.reset = 50;
        let curve = [iv(8000, 4), iv(10000, 12), iv(12000, 18), err];
        assert_eq!(connection_capacity(&curve, &rule), (8000.0, true));
        // One interval in a row is enough when the rule says so.
        let one = BreakRule {
            p99_intervals: 1,
            ..rule
        };
        assert_eq!(connection_capacity(&[iv(400, 12)], &one), (0.0, true));
    }

    #[test]
    fn a_stored_line_reads_back_with_its_probe() {
        let mut l = line(7, 2, 5);
        l.tls_handshakes = 4;
        let stored = LabInterval {
            probe: Some(3),
            line: l,
        };
        let mut s = stored.clone();
        s.line.status_codes.insert(200, 7);
        let stored = s;
        let text = stored.to_json().to_string();
        // The intervals.jsonl line's own keys, the probe beside them.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["probe"], 3);
        assert_eq!(v["errors"]["reset"], 2);
        assert_eq!(LabInterval::read(v), Some(stored.clone()));
        // Without a probe, no key.
        let plain = LabInterval {
            probe: None,
            ..stored
        };
        let v = plain.to_json();
        assert!(v.get("probe").is_none());
        assert_eq!(LabInterval::read(v), Some(plain));
    }

    #[test]
    fn an_older_stores_flat_line_reads_as_the_same_figures() {
        // As the lab stored it before it kept the typed line.
        let v = json!({
            "index": 4, "t_s": 5.000187, "length_s": 1.0, "responses": 900, "errors": 12,
            "latency_p50_us": 800, "latency_p99_us": 4100, "connections_open": 300,
            "connections_peak": 310, "tcp_connected_peak": 320, "connect_timeouts": 2,
            "sessions_completed": 17, "tls_p50_us": 0, "tls_p99_us": 950,
            "tls_handshakes": 40, "tls_resumed": 30, "probe": 2
        });
        let i = LabInterval::read(v).unwrap();
        assert_eq!(i.probe, Some(2));
        assert_eq!(i.errors(), 12);
        assert_eq!(i.line.errors.connect_timeout, 2);
        assert_eq!(i.sessions_completed(), 17);
        assert_eq!(
            i.csv_cells().join(","),
            "2,5.000187,1.0,900,12,4100,300,310,2,17,950,40,30"
        );
        // The capacity reads it as it read the flat line: the timeout breaks it.
        assert_eq!(
            connection_capacity([&i.line], &BreakRule::errors(0.5)),
            (0.0, true)
        );
    }

    #[test]
    fn a_row_of_neither_form_is_left_out() {
        assert_eq!(LabInterval::read(json!({"errors": "many"})), None);
        assert_eq!(LabInterval::read(json!([1, 2])), None);
    }
}
