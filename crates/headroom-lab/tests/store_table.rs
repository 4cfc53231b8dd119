//! The lab's store (SQLite, resume) and tables (mean ± CI pivots).

use std::collections::BTreeMap;

use headroom_lab::intervals::LabInterval;
use headroom_lab::store::{Factors, RunRecord, RunStatus, Store, StoreError};
use headroom_lab::table::{fmt_cell, mean_ci, pivot, Cell};
use headroom_run::interval::IntervalLine;
use serde_json::json;

fn factors(pairs: &[(&str, &str)]) -> Factors {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ok_run(f: &Factors, repetition: u32, throughput: f64) -> RunRecord {
    RunRecord {
        factors: f.clone(),
        repetition,
        status: RunStatus::Ok,
        started_at: format!("2025-11-22T10:0{repetition}:00Z"),
        duration_s: 10.25,
        metrics: [
            ("throughput_rps".to_string(), throughput),
            ("latency_p99_ms".to_string(), 1.5 + repetition as f64),
            ("errors_total".to_string(), 0.0),
        ]
        .into_iter()
        .collect(),
        summary: json!({"requests": 1000 * repetition, "latency_ms": {"p50": 0.25, "p99": 1.5}}),
        intervals: (0..3)
            .map(|i| {
                let mut line = IntervalLine {
                    index: i,
                    t_s: i as f64 + 1.0,
                    requests: 100 + i,
                    rps: 100.5,
                    ..IntervalLine::default()
                };
                line.status_codes.insert(200, 100 + i);
                LabInterval {
                    probe: (repetition > 1).then_some(repetition),
                    line,
                }
            })
            .collect(),
        samples: (0..4)
            .map(|i| json!({"t_s": 0.5 * i as f64, "cpu_user_pct": 12.5, "rss_bytes": 1 << 20}))
            .collect(),
    }
}

fn failed_run(f: &Factors, repetition: u32) -> RunRecord {
    RunRecord {
        factors: f.clone(),
        repetition,
        status: RunStatus::ServerFailed {
            reason: "exited with status 1 before becoming ready".into(),
            stderr_tail: "bind: address already in use\n".into(),
        },
        started_at: "2025-11-22T11:00:00Z".into(),
        duration_s: 0.5,
        metrics: BTreeMap::new(),
        summary: serde_json::Value::Null,
        intervals: Vec::new(),
        samples: Vec::new(),
    }
}

fn spec() -> serde_json::Value {
    json!({"name": "bufs", "repeat": 3, "factors": {"poller": ["epoll", "poll"], "sndbuf": ["8k", "64k"]}})
}

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("lab.sqlite")).unwrap()
}

/// Six runs of a 2x2 factorial, one of them a server failure.
fn six_runs() -> Vec<RunRecord> {
    let a = factors(&[("poller", "epoll"), ("sndbuf", "8k")]);
    let b = factors(&[("poller", "poll"), ("sndbuf", "64k")]);
    vec![
        ok_run(&a, 1, 12000.0),
        ok_run(&a, 2, 12500.5),
        ok_run(&b, 1, 9000.25),
        failed_run(&b, 2),
        ok_run(&a, 3, 11999.75),
        ok_run(&b, 3, 9100.0),
    ]
}

#[test]
fn runs_round_trip_in_the_order_saved() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    let runs = six_runs();
    let mut ids = Vec::new();
    for r in &runs {
        ids.push(store.save_run(exp, r).unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(store.runs(exp).unwrap(), runs);
    assert_eq!(store.count_runs(exp).unwrap(), 6);
}

/// A store written before the lab kept headroom-format's interval line holds its own flat line:
/// it still reads, with the same figures in intervals.csv's cells.
#[test]
fn an_older_stores_flat_intervals_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lab.sqlite");
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    let mut run = failed_run(&factors(&[("poller", "epoll")]), 1);
    run.status = RunStatus::Ok;
    let id = store.save_run(exp, &run).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let flat = [
        r#"{"connect_timeouts":0,"connections_open":40,"connections_peak":41,"errors":0,"index":0,"latency_p50_us":900,"latency_p99_us":2100,"length_s":1.0,"responses":500,"sessions_completed":0,"t_s":0.000213,"tcp_connected_peak":41,"tls_handshakes":0,"tls_p50_us":0,"tls_p99_us":0,"tls_resumed":0}"#,
        r#"{"connect_timeouts":3,"connections_open":70,"connections_peak":80,"errors":9,"index":1,"latency_p50_us":950,"latency_p99_us":5000,"length_s":1.0,"probe":2,"responses":480,"sessions_completed":12,"t_s":1.000198,"tcp_connected_peak":90,"tls_handshakes":20,"tls_p50_us":700,"tls_p99_us":1500,"tls_resumed":15}"#,
    ];
    for (i, text) in flat.iter().enumerate() {
        conn.execute(
            "INSERT INTO intervals (run_id, idx, json) VALUES (?1, ?2, ?3)",
            rusqlite::params![id, i as i64, text],
        )
        .unwrap();
    }
    let read = store.runs(exp).unwrap();
    let ivs = &read[0].intervals;
    assert_eq!(ivs.len(), 2);
    assert_eq!(
        ivs[0].csv_cells().join(","),
        ",0.000213,1.0,500,0,2100,40,41,0,0,0,0,0"
    );
    assert_eq!(
        ivs[1].csv_cells().join(","),
        "2,1.000198,1.0,480,9,5000,70,80,3,12,1500,20,15"
    );
    assert_eq!(ivs[1].line.tcp_connected_peak, 90);
    assert_eq!(ivs[1].line.latency_us.p50, 950);
}

#[test]
fn non_finite_numbers_come_back_as_nan() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    let mut run = ok_run(&factors(&[("poller", "epoll")]), 1, f64::INFINITY);
    run.metrics.insert("latency_p99_ms".into(), f64::NAN);
    run.duration_s = f64::NAN;
    store.save_run(exp, &run).unwrap();
    let back = &store.runs(exp).unwrap()[0];
    assert!(back.metrics["throughput_rps"].is_nan());
    assert!(back.metrics["latency_p99_ms"].is_nan());
    assert_eq!(back.metrics["errors_total"], 0.0);
    assert!(back.duration_s.is_nan());
}

#[test]
fn computed_floats_round_trip() {
    // Values as a run computes them (17 significant digits). serde_json reads them back exactly
    // only with its `float_roundtrip` feature; without it, within one unit in the last place.
    let exact = serde_json::from_str::<f64>("230.23569247695954").unwrap() == 230.23569247695954;
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    let values: Vec<f64> = (1..200).map(|i| 1e5 / (i as f64 + 0.7)).collect();
    let mut run = ok_run(&factors(&[("poller", "epoll")]), 1, 0.1 + 0.2);
    for (i, v) in values.iter().enumerate() {
        run.metrics.insert(format!("m{i}"), *v);
    }
    store.save_run(exp, &run).unwrap();
    let back = &store.runs(exp).unwrap()[0];
    for (k, v) in &run.metrics {
        let got = back.metrics[k];
        if exact {
            assert_eq!(got, *v, "{k}");
        } else {
            assert!(
                (got - v).abs() <= v.abs() * 2.0 * f64::EPSILON,
                "{k}: {got} vs {v}"
            );
        }
    }
}

#[test]
fn has_run_is_true_for_stored_runs_ok_or_failed() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    let a = factors(&[("poller", "epoll"), ("sndbuf", "8k")]);
    let b = factors(&[("poller", "poll"), ("sndbuf", "8k")]);
    assert!(!store.has_run(exp, &a, 1).unwrap());
    store.save_run(exp, &ok_run(&a, 1, 1.0)).unwrap();
    store.save_run(exp, &failed_run(&b, 2)).unwrap();
    assert!(store.has_run(exp, &a, 1).unwrap());
    assert!(!store.has_run(exp, &a, 2).unwrap());
    assert!(!store.has_run(exp, &b, 1).unwrap());
    // A failed run is stored too: it is not retried on resume.
    assert!(store.has_run(exp, &b, 2).unwrap());
    // Another experiment in the same file has its own runs.
    let other = store.experiment("other", &json!({"x": 1})).unwrap();
    assert_ne!(other, exp);
    assert!(!store.has_run(other, &a, 1).unwrap());
}

#[test]
fn reopening_the_file_keeps_runs() {
    let dir = tempfile::tempdir().unwrap();
    let runs = six_runs();
    let exp = {
        let mut store = open(&dir);
        let exp = store.experiment("bufs", &spec()).unwrap();
        for r in &runs[..4] {
            store.save_run(exp, r).unwrap();
        }
        exp
    };
    let mut store = open(&dir);
    assert_eq!(store.experiment("bufs", &spec()).unwrap(), exp);
    assert!(store.has_run(exp, &runs[3].factors, 2).unwrap());
    for r in &runs[4..] {
        store.save_run(exp, r).unwrap();
    }
    assert_eq!(store.runs(exp).unwrap(), runs);
}

#[test]
fn spec_key_order_does_not_matter_but_a_changed_spec_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    let reordered: serde_json::Value = serde_json::from_str(
        r#"{"factors": {"sndbuf": ["8k", "64k"], "poller": ["epoll", "poll"]}, "repeat": 3, "name": "bufs"}"#,
    )
    .unwrap();
    assert_eq!(store.experiment("bufs", &reordered).unwrap(), exp);

    let mut changed = spec();
    changed["repeat"] = json!(5);
    changed["factors"]["sndbuf"] = json!(["8k", "64k", "256k"]);
    let err = store.experiment("bufs", &changed).unwrap_err();
    assert!(matches!(err, StoreError::SpecChanged { .. }), "{err:?}");
    let db = dir.path().join("lab.sqlite");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: the runs stored for experiment 'bufs' came from another version of the \
             experiment file (changed: factors.sndbuf, repeat); mixing them would compare runs \
             of different experiments. Either write this version's results to a new output \
             directory, or run again with --fresh to delete the stored runs of 'bufs' and start \
             over",
            db.display()
        )
    );
    // The stored spec is untouched.
    assert_eq!(store.experiment("bufs", &spec()).unwrap(), exp);
}

#[test]
fn reset_deletes_the_experiment_and_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    for r in six_runs() {
        store.save_run(exp, &r).unwrap();
    }
    let other = store.experiment("other", &json!({"x": 1})).unwrap();
    let kept = ok_run(&factors(&[("x", "1")]), 1, 5.0);
    store.save_run(other, &kept).unwrap();

    assert_eq!(store.reset("bufs").unwrap(), 6);
    assert_eq!(store.reset("bufs").unwrap(), 0);
    assert_eq!(store.reset("never-was").unwrap(), 0);
    // Saving into the deleted experiment is refused, not silently orphaned.
    assert!(store.save_run(exp, &six_runs()[0]).is_err());
    // The experiment comes back with the spec it is given now, and no runs.
    let mut changed = spec();
    changed["repeat"] = json!(5);
    let exp2 = store.experiment("bufs", &changed).unwrap();
    assert!(store.runs(exp2).unwrap().is_empty());
    assert!(!store.has_run(exp2, &six_runs()[0].factors, 1).unwrap());
    assert_eq!(store.runs(other).unwrap(), vec![kept]);

    // No intervals or samples are left behind.
    let conn = rusqlite::Connection::open(dir.path().join("lab.sqlite")).unwrap();
    let count = |table: &str| -> i64 {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count("runs"), 1);
    assert_eq!(count("configurations"), 1);
    assert_eq!(count("intervals"), 3);
    assert_eq!(count("samples"), 4);
}

#[test]
fn saving_a_stored_repetition_again_is_an_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    let f = factors(&[("poller", "epoll"), ("sndbuf", "8k")]);
    let first = ok_run(&f, 1, 100.0);
    store.save_run(exp, &first).unwrap();
    let err = store.save_run(exp, &ok_run(&f, 1, 200.0)).unwrap_err();
    assert!(
        matches!(err, StoreError::DuplicateRun { repetition: 1, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().ends_with(
            r#"a run of configuration {"poller":"epoll","sndbuf":"8k"} repetition 1 is already stored"#
        ),
        "{err}"
    );
    assert_eq!(store.runs(exp).unwrap(), vec![first]);
}

#[test]
fn a_failed_save_leaves_no_partial_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lab.sqlite");
    let mut store = open(&dir);
    let exp = store.experiment("bufs", &spec()).unwrap();
    // Make the third sample's insert fail, after the run and its intervals are inserted.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER fail_sample BEFORE INSERT ON samples WHEN NEW.idx = 2
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )
    .unwrap();
    let run = ok_run(&factors(&[("poller", "epoll"), ("sndbuf", "8k")]), 1, 1.0);
    let err = store.save_run(exp, &run).unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    assert!(!store.has_run(exp, &run.factors, 1).unwrap());
    assert!(store.runs(exp).unwrap().is_empty());
    for table in ["runs", "configurations", "intervals", "samples"] {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
    // Once the cause is gone the same run saves whole.
    conn.execute_batch("DROP TRIGGER fail_sample").unwrap();
    store.save_run(exp, &run).unwrap();
    assert_eq!(store.runs(exp).unwrap(), vec![run]);
}

#[test]
fn the_database_is_in_wal_mode_with_foreign_keys() {
    let dir = tempfile::tempdir().unwrap();
    let _store = open(&dir);
    let conn = rusqlite::Connection::open(dir.path().join("lab.sqlite")).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 1);
    drop(conn);
    // A newer schema is refused rather than misread.
    let conn = rusqlite::Connection::open(dir.path().join("lab.sqlite")).unwrap();
    conn.execute_batch("PRAGMA user_version = 2").unwrap();
    let err = Store::open(&dir.path().join("lab.sqlite")).err().unwrap();
    assert!(err.to_string().contains("newer headroom"), "{err}");
}

// ---- tables ----

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn mean_ci_of_known_values() {
    // [1..5]: mean 3, s = sqrt(2.5), t(4) = 2.776445 -> 2.776445 * sqrt(2.5 / 5) = 1.963243.
    let c = mean_ci(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    assert_eq!(c.n, 5);
    assert!(close(c.mean, 3.0));
    assert!((c.ci95.unwrap() - 1.963243).abs() < 1e-5, "{c:?}");
    // Two values: t(1) = 12.706; s = sqrt(2) for [10, 12]; se = 1 -> 12.706.
    let c = mean_ci(&[10.0, 12.0]).unwrap();
    assert!(close(c.mean, 11.0));
    assert!((c.ci95.unwrap() - 12.706205).abs() < 1e-5);
    assert_eq!(mean_ci(&[]), None);
    assert_eq!(
        mean_ci(&[4.0]),
        Some(Cell {
            mean: 4.0,
            ci95: None,
            n: 1
        })
    );
    assert_eq!(
        fmt_cell(&mean_ci(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap()),
        "3.00 ± 1.96"
    );
    assert_eq!(
        fmt_cell(&mean_ci(&[12000.0, 12500.0, 13000.0]).unwrap()),
        "12,500 ± 1,242"
    );
}

/// A 2x2 factorial (poller x sndbuf), 3 repetitions, levels given in the experiment's order
/// (not alphabetical), runs saved in a scrambled order.
fn factorial() -> (Vec<RunRecord>, BTreeMap<String, Vec<String>>) {
    let order: BTreeMap<String, Vec<String>> = [
        ("poller", vec!["poll", "epoll"]),
        ("sndbuf", vec!["64k", "8k"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    let base = |p: &str, s: &str| -> f64 {
        match (p, s) {
            ("poll", "64k") => 1000.0,
            ("poll", "8k") => 2000.0,
            ("epoll", "64k") => 3000.0,
            _ => 4000.0,
        }
    };
    let mut runs = Vec::new();
    for rep in 1..=3u32 {
        for (p, s) in [
            ("epoll", "8k"),
            ("poll", "64k"),
            ("epoll", "64k"),
            ("poll", "8k"),
        ] {
            let f = factors(&[("poller", p), ("sndbuf", s)]);
            // Repetitions at base - 10, base, base + 10.
            let v = base(p, s) + 10.0 * (rep as f64 - 2.0);
            runs.push(ok_run(&f, rep, v));
        }
    }
    (runs, order)
}

#[test]
fn pivot_of_a_2x2_factorial() {
    let (runs, order) = factorial();
    let t = pivot(
        &runs,
        &["poller".into()],
        &["sndbuf".into()],
        "throughput_rps",
        &order,
    );
    assert_eq!(
        t.rows,
        vec![vec!["poll".to_string()], vec!["epoll".to_string()]]
    );
    assert_eq!(
        t.cols,
        vec![vec!["64k".to_string()], vec!["8k".to_string()]]
    );
    let means: Vec<Vec<f64>> = t
        .cells
        .iter()
        .map(|r| r.iter().map(|c| c.unwrap().mean).collect())
        .collect();
    assert_eq!(means, vec![vec![1000.0, 2000.0], vec![3000.0, 4000.0]]);
    for c in t.cells.iter().flatten() {
        let c = c.unwrap();
        assert_eq!(c.n, 3);
        // s = 10, se = 10 / sqrt(3), t(2) = 4.302653.
        assert!((c.ci95.unwrap() - 4.302653 * 10.0 / 3f64.sqrt()).abs() < 1e-4);
    }
    assert_eq!(t.failed, vec![vec![0, 0], vec![0, 0]]);
    assert_eq!(t.title, "throughput_rps (mean ± 95% CI over repetitions)");

    // Transposed: rows sndbuf, columns poller.
    let t = pivot(
        &runs,
        &["sndbuf".into()],
        &["poller".into()],
        "throughput_rps",
        &order,
    );
    assert_eq!(
        t.rows,
        vec![vec!["64k".to_string()], vec!["8k".to_string()]]
    );
    assert_eq!(t.cells[1][0].unwrap().mean, 2000.0);

    // Both factors as rows, none as columns: one column, rows in the experiment's order with
    // the first factor varying slowest.
    let t = pivot(
        &runs,
        &["poller".into(), "sndbuf".into()],
        &[],
        "throughput_rps",
        &order,
    );
    let rows: Vec<String> = t.rows.iter().map(|r| r.join("/")).collect();
    assert_eq!(rows, ["poll/64k", "poll/8k", "epoll/64k", "epoll/8k"]);
    assert_eq!(t.cols, vec![Vec::<String>::new()]);
    let means: Vec<f64> = t.cells.iter().map(|r| r[0].unwrap().mean).collect();
    assert_eq!(means, [1000.0, 2000.0, 3000.0, 4000.0]);

    // sndbuf pooled: each poller's cell holds both buffer sizes' runs.
    let t = pivot(&runs, &["poller".into()], &[], "throughput_rps", &order);
    assert_eq!(
        t.title,
        "throughput_rps (mean ± 95% CI over repetitions), pooled over sndbuf"
    );
    assert_eq!(t.cells[0][0].unwrap().n, 6);
    assert_eq!(t.cells[0][0].unwrap().mean, 1500.0);
    assert_eq!(t.cells[1][0].unwrap().mean, 3500.0);
}

#[test]
fn pivot_counts_failed_runs_per_cell() {
    let (mut runs, order) = factorial();
    // poll/64k: all three runs failed; epoll/8k: one of three.
    for r in runs.iter_mut() {
        let (p, s) = (r.factors["poller"].as_str(), r.factors["sndbuf"].as_str());
        if (p, s) == ("poll", "64k") || ((p, s) == ("epoll", "8k") && r.repetition == 2) {
            *r = failed_run(&r.factors, r.repetition);
        }
    }
    // A level the experiment file does not list goes after the listed ones.
    runs.push(ok_run(
        &factors(&[("poller", "select"), ("sndbuf", "8k")]),
        1,
        50.0,
    ));
    let t = pivot(
        &runs,
        &["poller".into()],
        &["sndbuf".into()],
        "throughput_rps",
        &order,
    );
    assert_eq!(t.rows.concat(), ["poll", "epoll", "select"]);
    assert_eq!(t.failed, vec![vec![3, 0], vec![0, 1], vec![0, 0]]);
    assert_eq!(t.runs, vec![vec![3, 3], vec![3, 3], vec![0, 1]]);
    assert_eq!(t.cells[0][0], None);
    let c = t.cells[1][1].unwrap();
    assert_eq!((c.n, c.mean), (2, 4000.0));
    assert_eq!(t.cell_text(0, 0), "failed 3/3");
    assert_eq!(t.cell_text(1, 1), "4,000 ± 127 (1 failed)");
    assert_eq!(t.cell_text(2, 0), "–");
    assert_eq!(t.cell_text(2, 1), "50.0");
}

#[test]
fn a_table_of_verdicts_names_each_cells_verdicts() {
    let (mut runs, order) = factorial();
    for r in runs.iter_mut() {
        let name = match (r.factors["poller"].as_str(), r.repetition) {
            ("poll", _) => "cpu_kernel",
            ("epoll", 1) => "mixed",
            _ => "descriptor_limit",
        };
        r.summary = serde_json::json!({"verdict": {"name": name}});
    }
    // One epoll/8k run failed: counted, not named.
    let failed = runs
        .iter_mut()
        .find(|r| {
            r.factors["poller"] == "epoll" && r.factors["sndbuf"] == "8k" && r.repetition == 3
        })
        .unwrap();
    *failed = failed_run(&failed.factors.clone(), 3);
    let t = pivot(
        &runs,
        &["poller".into()],
        &["sndbuf".into()],
        headroom_lab::table::VERDICT,
        &order,
    );
    assert!(t.title.starts_with("why it broke"), "{}", t.title);
    assert_eq!(t.cell_text(0, 0), "cpu_kernel");
    assert_eq!(t.cell_text(1, 0), "descriptor_limit ×2, mixed");
    assert_eq!(t.cell_text(1, 1), "mixed, descriptor_limit (1 failed)");
    let csv = t.csv();
    assert!(csv.starts_with("poller,sndbuf,verdict,n,failed\n"), "{csv}");
    assert!(
        csv.contains("epoll,64k,\"descriptor_limit ×2, mixed\",3,0\n"),
        "{csv}"
    );
    assert!(
        t.text().contains("descriptor_limit ×2, mixed"),
        "{}",
        t.text()
    );
}

#[test]
fn markdown_csv_and_text_of_a_small_table() {
    let order: BTreeMap<String, Vec<String>> = [
        (
            "conns".to_string(),
            vec!["10".to_string(), "100".to_string()],
        ),
        ("poller".to_string(), vec!["epoll".to_string()]),
    ]
    .into_iter()
    .collect();
    let e10 = factors(&[("conns", "10"), ("poller", "epoll")]);
    let e100 = factors(&[("conns", "100"), ("poller", "epoll")]);
    let runs = vec![
        ok_run(&e10, 1, 1000.0),
        ok_run(&e10, 2, 1100.0),
        ok_run(&e10, 3, 1200.0),
        ok_run(&e100, 1, 0.5),
        failed_run(&e100, 2),
    ];
    let t = pivot(
        &runs,
        &["poller".into()],
        &["conns".into()],
        "throughput_rps",
        &order,
    );
    assert_eq!(
        t.markdown(),
        "**throughput_rps (mean ± 95% CI over repetitions)**\n\
         \n\
         | poller | conns=10 | conns=100 |\n\
         | --- | ---: | ---: |\n\
         | epoll | 1,100 ± 248 | 0.500 (1 failed) |\n"
    );
    assert_eq!(
        t.csv(),
        "poller,conns,mean,ci95,n,failed\n\
         epoll,10,1100,248.41376945744702,3,0\n\
         epoll,100,0.5,,1,1\n"
    );
    assert_eq!(
        t.text(),
        "throughput_rps (mean ± 95% CI over repetitions)\n\
         poller     conns=10         conns=100\n\
         ------  -----------  ----------------\n\
         epoll   1,100 ± 248  0.500 (1 failed)\n"
    );
}

#[test]
fn csv_quotes_levels_that_need_it() {
    let runs = vec![ok_run(&factors(&[("args", "-a, \"b\"")]), 1, 2.0)];
    let t = pivot(
        &runs,
        &["args".into()],
        &[],
        "throughput_rps",
        &BTreeMap::new(),
    );
    assert_eq!(
        t.csv(),
        "args,mean,ci95,n,failed\n\"-a, \"\"b\"\"\",2,,1,0\n"
    );
}

#[test]
fn a_table_without_column_factors_has_one_column_named_after_the_metric() {
    let runs = vec![
        ok_run(&factors(&[("poller", "epoll")]), 1, 10.0),
        ok_run(&factors(&[("poller", "epoll")]), 2, 12.0),
        ok_run(&factors(&[("poller", "poll")]), 1, 7.0),
    ];
    let mut t = pivot(
        &runs,
        &["poller".into()],
        &[],
        "throughput_rps",
        &BTreeMap::new(),
    );
    t.title = "Pollers".into();
    assert_eq!(
        t.markdown(),
        "**Pollers**\n\
         \n\
         | poller | throughput_rps |\n\
         | --- | ---: |\n\
         | epoll | 11.0 ± 12.7 |\n\
         | poll | 7.00 |\n"
    );
    // Neither rows nor columns: one cell of every run.
    let t = pivot(&runs, &[], &[], "throughput_rps", &BTreeMap::new());
    assert_eq!(t.cells[0][0].unwrap().n, 3);
    assert_eq!(
        t.text(),
        "throughput_rps (mean ± 95% CI over repetitions), pooled over poller\n     throughput_rps\n---  --------------\nall     9.67 ± 6.25\n"
    );
}
