//! Seed 003's service on a real database (`experiments/io-bound-postgres.yaml --quick`, Debian's
//! PostgreSQL installed by scripts/test): headroom's async reference server in front of a
//! PostgreSQL the lab starts per run, reached over a Unix socket. Its own test binary: the rate
//! search measures what two cores give, so nothing else of the suite may run beside it.

mod common;

/// One probe of a rate search: its rate, whether it held, the mean session (ms) and the
/// server's CPU (user + system, % of a core).
type Probe = (f64, bool, f64, f64);

/// Five probes from 16 sessions/s find each configuration's break (a capacity, not a lower
/// bound), where sessions take far longer than at the first rate held; the database pool's size
/// changes the capacity little (the study: a larger pool "changed nothing"; the cores are the
/// bottleneck); the server (service and database) was sampled; every run's server stopped
/// cleanly on SIGTERM, and no PostgreSQL or service of the run is left behind.
#[test]
fn io_bound_postgres_quick_breaks_on_the_cores_not_the_pool() {
    let tmp = common::shared_tempdir();
    let out = tmp.path();
    let (stdout, stderr) = common::lab_quick("io-bound-postgres.yaml", out, 4);
    let what = format!("{stdout}\n{stderr}");
    let curve = std::fs::read_to_string(out.join("rate-curve.csv")).unwrap();
    // Per configuration (runtime, pool): its probes in order.
    let mut runs: std::collections::BTreeMap<(String, String), Vec<Probe>> = Default::default();
    for r in common::csv_records(&curve) {
        let num = |name: &str| r[name].parse::<f64>().unwrap_or(0.0);
        runs.entry((r["runtime"].clone(), r["pool"].clone()))
            .or_default()
            .push((
                num("rate"),
                r["ok"] == "true",
                num("of_mean_ms"),
                num("server_cpu_user_pct") + num("server_cpu_sys_pct"),
            ));
    }
    assert_eq!(runs.len(), 4, "{curve}");
    for ((rt, p), probes) in &runs {
        let held: Vec<_> = probes.iter().filter(|p| p.1).collect();
        assert!(!held.is_empty(), "{rt} pool {p}: {curve}");
        let Some(broke) = probes.iter().find(|p| !p.1) else {
            panic!("{rt} pool {p} never broke: {curve}")
        };
        assert!(broke.2 > 2.0 * held[0].2, "{rt} pool {p}: {curve}");
        // The server (service and database) was sampled, busier at the highest rate held than
        // at the first.
        let top = held.iter().map(|p| p.3).fold(0.0, f64::max);
        assert!(
            top > 30.0 && top > held[0].3,
            "{rt} pool {p}: server CPU {top}%\n{curve}"
        );
    }
    for rt in ["current-thread", "multi"] {
        let cap = |p: &str| common::lab_cell(out, "capacity_rate", &format!("{rt}/1"), p);
        let (one, ten) = (cap("1"), cap("10"));
        assert!(
            one.max(ten) <= 1.6 * one.min(ten),
            "{rt}: pool 1 sustains {one}/s, pool 10 {ten}/s\n{what}"
        );
    }
    // One server per broken probe and the last one, each stopped by SIGTERM: the service
    // drained, then PostgreSQL shut down fast, within the grace.
    let stops = stderr.matches(": server ").count();
    assert!(stops >= 4, "{what}");
    assert_eq!(
        stderr.matches("exited 0 after SIGTERM").count(),
        stops,
        "{what}"
    );
    let left = common::processes_mentioning(&out.display().to_string());
    assert!(left.is_empty(), "left running: {left:?}");
}
