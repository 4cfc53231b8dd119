//! `intervals.csv`: the run's intervals as one CSV table for spreadsheets and plotting tools,
//! written beside `intervals.jsonl` (the JSON lines stay the record; this is a flat view).

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::data::{Figures, Interval};

/// One row per interval. Columns: time and counts, one `errors_KIND` column per error kind any
/// interval names, one `status_CLASS` column per status class, one `status_CODE` column per
/// exact code any interval saw (0 where a line that counted codes did not see it), then latency (corrected and
/// uncorrected) and connect-time figures in microseconds, connections, users, bytes, and the
/// server's CPU, memory, threads and descriptors when it was sampled. A missing value is an
/// empty cell.
pub fn intervals_csv(intervals: &[Interval]) -> String {
    let kinds: BTreeSet<&str> = intervals
        .iter()
        .flat_map(|iv| iv.errors.keys().map(String::as_str))
        .collect();
    let classes: BTreeSet<&str> = intervals
        .iter()
        .flat_map(|iv| iv.status.keys().map(String::as_str))
        .collect();
    let codes: BTreeSet<&str> = intervals
        .iter()
        .flat_map(|iv| iv.status_codes.iter().flatten().map(|(k, _)| k.as_str()))
        .collect();
    let mut out = String::with_capacity(256 * (intervals.len() + 1));
    out.push_str("t_s,length_s,requests,responses,rps,errors_total");
    for k in &kinds {
        let _ = write!(out, ",errors_{k}");
    }
    for c in &classes {
        let _ = write!(out, ",status_{c}");
    }
    for c in &codes {
        let _ = write!(out, ",status_{c}");
    }
    for f in ["latency", "latency_uncorrected", "connect"] {
        for p in ["mean", "p50", "p90", "p99", "max"] {
            let _ = write!(out, ",{f}_{p}_us");
        }
    }
    out.push_str(
        ",connects,disconnects,connections_open,connections_peak,users_active,users_started,\
         users_finished,bytes_sent,bytes_received",
    );
    let server = intervals.iter().any(|iv| iv.server.is_some());
    if server {
        out.push_str(
            ",server_cpu_user_pct,server_cpu_sys_pct,server_rss_bytes,server_threads,server_fds",
        );
    }
    out.push('\n');
    for iv in intervals {
        let mut row: Vec<String> = vec![
            opt(iv.t_s),
            opt(iv.length_s),
            opt(iv.requests),
            opt(iv.responses),
            opt(iv.rps),
            if iv.errors.is_empty() {
                String::new()
            } else {
                iv.errors.values().sum::<u64>().to_string()
            },
        ];
        row.extend(kinds.iter().map(|k| opt(iv.errors.get(*k))));
        row.extend(classes.iter().map(|c| opt(iv.status.get(*c))));
        row.extend(codes.iter().map(|c| {
            opt(iv
                .status_codes
                .as_ref()
                .map(|m| m.get(*c).copied().unwrap_or(0)))
        }));
        for f in [&iv.latency_us, &iv.latency_uncorrected_us, &iv.connect_us] {
            row.extend(figures(f));
        }
        row.extend(
            [
                iv.connects,
                iv.disconnects,
                iv.connections_open,
                iv.connections_peak,
                iv.users_active,
                iv.users_started,
                iv.users_finished,
                iv.bytes_sent,
                iv.bytes_received,
            ]
            .map(opt),
        );
        if server {
            let sm = iv.server.clone().unwrap_or_default();
            row.extend([opt(sm.cpu_user_pct), opt(sm.cpu_sys_pct)]);
            row.extend([sm.rss_bytes, sm.threads, sm.fds].map(opt));
        }
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

fn figures(f: &Figures) -> [String; 5] {
    [f.mean, f.p50, f.p90, f.p99, f.max].map(opt)
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_follow_the_intervals_and_gaps_stay_empty() {
        let mut a = Interval {
            t_s: Some(0.0),
            length_s: Some(1.0),
            responses: Some(10),
            ..Interval::default()
        };
        a.errors.insert("reset".into(), 2);
        a.errors.insert("timeout".into(), 1);
        a.latency_us.p99 = Some(1234.0);
        let mut b = Interval {
            t_s: Some(1.0),
            length_s: Some(1.0),
            responses: Some(0),
            ..Interval::default()
        };
        b.errors.insert("reset".into(), 0);
        b.status.insert("2xx".into(), 0);
        a.status_codes = Some([("404".to_string(), 3)].into());
        b.status_codes = Some(Default::default());
        let csv = intervals_csv(&[a, b]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        let head: Vec<&str> = lines[0].split(',').collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let row1: Vec<&str> = lines[1].split(',').collect();
        let row2: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(row1.len(), head.len());
        assert_eq!(row2.len(), head.len());
        assert_eq!(row1[col("errors_total")], "3");
        assert_eq!(row1[col("errors_timeout")], "1");
        assert_eq!(row2[col("errors_timeout")], "");
        assert_eq!(row1[col("status_2xx")], "");
        assert_eq!(row2[col("status_2xx")], "0");
        assert_eq!(row1[col("status_404")], "3");
        assert_eq!(row2[col("status_404")], "0", "counted codes, none a 404");
        assert_eq!(row1[col("latency_p99_us")], "1234");
        assert_eq!(row2[col("latency_p99_us")], "");
        assert_eq!(row2[col("t_s")], "1");
    }
}
