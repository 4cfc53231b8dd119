//! The shipped experiments that drive real servers (Debian's packages, installed by
//! scripts/test), run in their `--quick` variants: each table must show the direction of its
//! study's finding. And an experiment whose server is not installed stops at once, naming the
//! package.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::headroom;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first column's mean of `metric` in the row `row` (levels joined by '/').
fn table(out: &Path, metric: &str, row: &str) -> f64 {
    common::lab_cell(out, metric, row, "")
}

/// Seed 004 on nginx and Apache (`experiments/nginx-vs-apache.yaml --quick`): 1,500 SURGE
/// clients ramped over 15 s. nginx's one worker serves them all with no timeout; Apache's pool of
/// 64 threads serves 64 at a time, its throughput stops there and queued clients time out.
#[test]
fn nginx_against_apache_shows_the_pool_limit() {
    let tmp = common::shared_tempdir();
    let (stdout, stderr) = common::lab_quick("nginx-vs-apache.yaml", tmp.path(), 2);
    let out = tmp.path();
    let nginx = "nginx/1/0";
    let apache = "apache-worker/64/0";
    let what = format!("{stdout}\n{stderr}");
    // Every request answered, none an error page: the file set was served.
    assert_eq!(table(out, "errors_total", nginx), 0.0, "{what}");
    assert_eq!(table(out, "errors_timeout", nginx), 0.0, "{what}");
    assert!(table(out, "errors_timeout", apache) >= 50.0, "{what}");
    let (tn, ta) = (
        table(out, "throughput_rps", nginx),
        table(out, "throughput_rps", apache),
    );
    assert!(tn > 3.0 * ta && ta > 0.0, "{tn} vs {ta}\n{what}");
    // Served at once: Apache's pool, nginx nearly every client (1,500 at the top).
    let (cn, ca) = (
        table(out, "connections_peak", nginx),
        table(out, "connections_peak", apache),
    );
    assert!(ca <= 70.0 && cn >= 1000.0, "{cn} vs {ca}\n{what}");
    for server in ["nginx", "apache-worker"] {
        let run = std::fs::read_dir(out.join("runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains(&format!("server-{server}_")))
            .unwrap();
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(s["errors"]["http_4xx"], 0, "{server}: {s}");
    }
    // Why (issue 31): Apache's pool is its limit; nginx reached none (or the generator did).
    assert_eq!(
        common::lab_verdict(out, apache, ""),
        "pool_exhausted",
        "{what}"
    );
    let n = common::lab_verdict(out, nginx, "");
    assert!(n == "no_limit" || n == "client_bound", "nginx: {n}\n{what}");
}

/// A server program that is not installed stops the lab before its first run, with one line
/// naming the Debian package, and exit 1 (not a usage error: the file is right).
#[test]
fn an_experiment_whose_server_is_missing_fails_at_once_naming_the_package() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("s.yaml"),
        "load: {users: [{count: 1}]}\nsessions: [{name: a, steps: [{request: GET /}]}]\n",
    )
    .unwrap();
    let e = tmp.path().join("e.yaml");
    std::fs::write(
        &e,
        "name: needs\nserver:\n  requires: {sh: dash, headroom-test-no-such-httpd: apache2}\n  \
         command: exec headroom-test-no-such-httpd\n  ready: {port: '127.0.0.1:{port}'}\n\
         load: {scenario: s.yaml, duration: 1s}\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let t = Instant::now();
    let o = headroom()
        .arg("lab")
        .arg(&e)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("headroom-test-no-such-httpd")
            && stderr.contains("apt-get install apache2"),
        "{stderr}"
    );
    // Nothing ran: no output directory, no store.
    assert!(!out.exists());
    // Every shipped experiment's own requirements are installed here (scripts/test installs
    // them): the same check passes for them.
    for f in std::fs::read_dir(repo().join("experiments")).unwrap() {
        let p = f.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        if p.extension().is_some_and(|x| x == "yaml") && text.contains("requires:") {
            let l = headroom_lab::experiment::load(&p, false).unwrap();
            assert_eq!(l.missing_program(), None, "{}", p.display());
        }
    }
}

/// Seed 003 on Debian's PostgreSQL (`experiments/postgres.yaml --quick`): 4 clients against
/// 64 with max_connections 20. The 64 get no more sessions through than the 4 (the server's one
/// core is busy already), each session takes several times longer, and the clients past the
/// limit are refused ("too many clients"): errors, and no more than 20 served at once.
#[test]
fn postgres_pool_against_max_connections() {
    let tmp = common::shared_tempdir();
    let (stdout, stderr) = common::lab_quick("postgres.yaml", tmp.path(), 2);
    let out = tmp.path();
    let what = format!("{stdout}\n{stderr}");
    let cell = |metric: &str, clients: &str| common::lab_cell(out, metric, "20", clients);
    assert_eq!(cell("errors_total", "4"), 0.0, "{what}");
    assert!(cell("errors_total", "64") > 0.0, "{what}");
    assert!(cell("connections_peak", "64") <= 22.0, "{what}");
    let (s4, s64) = (cell("sessions_per_s", "4"), cell("sessions_per_s", "64"));
    assert!(
        s4 > 5.0 && s64 < 1.5 * s4,
        "sessions/s {s4} vs {s64}\n{what}"
    );
    let (d4, d64) = (
        cell("tx_session_mean_ms", "4"),
        cell("tx_session_mean_ms", "64"),
    );
    assert!(d64 > 2.0 * d4, "session duration {d4} vs {d64}\n{what}");
}
