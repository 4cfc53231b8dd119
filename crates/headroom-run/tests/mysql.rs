//! MySQL sessions end to end against a real server on 127.0.0.1: Debian's MariaDB, private,
//! started by `scripts/mariadb.sh` (`scripts/test` exports `HEADROOM_MYSQL_URL`; without it the
//! script is run here), with Tsung's example database (`test`, user test/test, tables gens and
//! te of 10 rows each) and `headroom` (table items, 100 rows). Each test compares headroom's
//! counts with the server's own `SHOW GLOBAL STATUS`. The tests hold one lock: the counters are
//! the server's. Every run is bounded (`-d`).

mod common;

use common::*;
use headroom_core::spec::RunSpec;
use headroom_run::summary::MysqlCounters;
use headroom_run::RunSummary;
use headroom_testkit::servers::services::{repo_root, service};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;

static SERVER: Mutex<()> = Mutex::new(());

fn mysql() -> String {
    let url = service("HEADROOM_MYSQL_URL", "mariadb.sh");
    let rest = url.strip_prefix("mysql://").expect("mysql:// URL");
    let addr = rest.split_once('@').map_or(rest, |x| x.1);
    let addr = addr.split('/').next().unwrap_or_default();
    assert!(addr.starts_with("127.0.0.1:"), "MariaDB at {url}");
    addr.to_string()
}

fn mysql_counters(v: &RunSummary) -> &MysqlCounters {
    scenario_of(v)
        .protocol
        .as_ref()
        .and_then(|p| p.mysql.as_ref())
        .unwrap_or_else(|| panic!("no mysql counters: {}", show(v)))
}

const STATUS: [&str; 8] = [
    "Questions",
    "Com_select",
    "Com_show_tables",
    "Com_stmt_prepare",
    "Com_stmt_execute",
    "Connections",
    "Aborted_clients",
    "Ssl_accepts",
];

/// The server's own counters (`SHOW GLOBAL STATUS`, through scripts/mariadb.sh's client). A
/// reading is itself a connection and statements: [`Status::run`] takes its cost out.
fn status() -> BTreeMap<String, u64> {
    let list = STATUS.map(|s| format!("'{s}'")).join(",");
    let out = Command::new(repo_root().join("scripts/mariadb.sh"))
        .args(["sql", "-N", "-e"])
        .arg(format!(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ({list})"
        ))
        .output()
        .expect("scripts/mariadb.sh sql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
        .collect()
}

/// What the server did during `f`, less what reading its counters costs (measured by two
/// readings back to back first).
fn server_delta(f: impl FnOnce()) -> BTreeMap<String, u64> {
    let r0 = status();
    let r1 = status();
    f();
    let r2 = status();
    STATUS
        .iter()
        .map(|k| {
            let cost = r1[*k] - r0[*k];
            (k.to_string(), r2[*k] - r1[*k] - cost)
        })
        .collect()
}

/// Tsung's stock `examples/mysql.xml` (Debian's tsung) as `headroom run mysql.xml --target`
/// imports it, its arrivals made 1,000 users (10 s at 100/s, evenly spaced; each runs the
/// session once): connect, log in as test, `SHOW TABLES`, `SELECT * FROM gens`, `SELECT *
/// FROM te`, close. No error, the rows the tables hold, and the server counted exactly these
/// statements and connections, and no aborted client.
#[test]
fn a_thousand_users_run_tsungs_mysql_example() {
    let _lock = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mysql();
    let example = std::path::Path::new("/usr/share/doc/tsung/examples/mysql.xml");
    let xml = std::fs::read_to_string(example).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (Debian's tsung package; scripts/test installs it)",
            example.display()
        )
    });
    let mut sc = headroom_scenario::import_tsung(&xml, "mysql.xml")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .scenario;
    use headroom_scenario::model::{Arrival, Phase, Rate};
    sc.load.phases = vec![Phase {
        duration: std::time::Duration::from_secs(10),
        rate: Rate::Fixed(100.0),
        arrival: Arrival::Constant,
        max_users: None,
    }];
    let built = headroom_run::files::scenario_spec(
        "mysql.xml",
        &sc,
        std::path::Path::new("."),
        Some(addr.clone()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut spec = RunSpec::new(headroom_core::spec::Target::Scenario(built));
    spec.duration = secs(15);
    let mut f = None;
    let moved = server_delta(|| f = Some(run(&spec)));
    let f = f.unwrap();
    let v = &f.summary;
    let m = mysql_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(by_request(v, "mysql:login").count, 1000, "{}", show(v));
    assert_eq!(scenario_of(v).sessions.completed, 1000, "{}", show(v));
    assert_eq!(m.queries, 3000, "{m:#?}");
    assert_eq!(m.rows, 1000 * (2 + 10 + 10), "{m:#?}");
    assert_eq!(m.sql_errors, 0, "{m:#?}");
    assert_eq!(moved["Connections"], 1000, "{moved:?}");
    // MariaDB counts each COM_QUIT as a question: 3,000 statements and 1,000 goodbyes.
    assert_eq!(moved["Questions"], 4000, "{moved:?}");
    assert_eq!(moved["Com_select"], 2000, "{moved:?}");
    assert_eq!(moved["Com_show_tables"], 1000, "{moved:?}");
    // Each user said goodbye (COM_QUIT, as Tsung's close does) before closing: the server
    // counted no client as aborted.
    assert_eq!(moved["Aborted_clients"], 0, "{moved:?}");
}

/// Statements with parameters are prepared once per connection and executed after; an error
/// reply fails its step and the connection goes on; a wrong password is a login error.
#[test]
fn prepared_statements_errors_and_logins() {
    let _lock = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mysql();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mysql}}]
mysql: {{user: headroom, password: headroom, database: headroom}}
load:
  users: [{{count: 50}}]
sessions:
  - name: items
    steps:
      - loop:
          count: 10
          steps:
            - set: {{var: n, random_number: {{min: 1, max: 100}}}}
            - sql: {{query: "SELECT name FROM items WHERE id = ?", params: ["${{n}}"], name: by-id}}
      - sql: {{query: "SELECT * FROM no_such_table", name: missing}}
      - sql: {{query: "SELECT COUNT(*) FROM items", name: count}}
      - think: 60s
"#
    );
    let mut f = None;
    let moved = server_delta(|| f = Some(run(&lasting(&yaml, 8))));
    let f = f.unwrap();
    let v = &f.summary;
    let m = mysql_counters(v);
    assert_eq!(by_request(v, "by-id").count, 500, "{}", show(v));
    assert_eq!(by_request(v, "by-id").errors, 0, "{}", show(v));
    assert_eq!(by_request(v, "missing").errors, 50, "{}", show(v));
    assert_eq!(by_request(v, "count").count, 50, "{}", show(v));
    assert_eq!(v.errors.error_reply, 50, "{}", show(v));
    assert_eq!(m.sql_errors, 50, "{m:#?}");
    assert_eq!(m.prepares, 50, "{m:#?}");
    // 500 executions of one row each, 50 counts of one row.
    assert_eq!(m.rows, 550, "{m:#?}");
    assert_eq!(moved["Com_stmt_prepare"], 50, "{moved:?}");
    assert_eq!(moved["Com_stmt_execute"], 500, "{moved:?}");
    assert_eq!(moved["Connections"], 50, "{moved:?}");

    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mysql}}]
mysql: {{user: headroom, password: wrong}}
load:
  users: [{{count: 1}}]
sessions: [{{name: s, steps: [{{sql: SELECT 1}}, {{think: 60s}}]}}]
"#
    );
    let f = run(&lasting(&yaml, 1));
    let v = &f.summary;
    assert!(v.errors.login >= 1, "{}", show(v));
    assert_eq!(mysql_counters(v).queries, 0, "{}", show(v));
}

/// `tls:` on a MySQL server: after the greeting each user asks for TLS (SSLRequest), checks
/// the server's certificate against the scripts' CA, and logs in over it — as `headroom_tls`,
/// whom MariaDB refuses without TLS (REQUIRE SSL). The server accepted as many TLS sessions as
/// headroom counted handshakes; without `tls:` the same login is refused.
#[test]
fn tls_logs_in_a_user_that_requires_it() {
    let _lock = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mysql();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let ca = common::tls_services::test_ca();
    let scenario = |tls: &str| {
        format!(
            r#"
servers: [{{host: {host}, port: {port}, protocol: mysql{tls}}}]
mysql: {{user: headroom_tls, password: headroom, database: headroom}}
load:
  users: [{{count: 20}}]
sessions:
  - name: tls
    steps:
      - sql: {{query: "SELECT COUNT(*) FROM items", name: count}}
      - sql: {{query: "SHOW STATUS LIKE 'Ssl_version'", name: version}}
      - think: 60s
"#
        )
    };
    let yaml = scenario(&format!(", tls: {{cacert: \"{}\"}}", ca.display()));
    let mut f = None;
    let moved = server_delta(|| f = Some(run(&lasting(&yaml, 4))));
    let f = f.unwrap();
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(by_request(v, "mysql:login").count, 20, "{}", show(v));
    assert_eq!(by_request(v, "count").count, 20, "{}", show(v));
    assert_eq!(mysql_counters(v).rows, 40, "{}", show(v));
    let tls = v.tls.as_ref().expect("a tls section");
    assert_eq!(tls.handshakes, 20, "{}", show(v));
    assert_eq!(moved["Connections"], 20, "{moved:?}");
    assert_eq!(moved["Ssl_accepts"], 20, "{moved:?}");

    // Without TLS, MariaDB refuses the login (1045).
    let f = run(&lasting(&scenario(""), 2));
    let v = &f.summary;
    assert!(v.errors.login >= 1, "{}", show(v));
    assert_eq!(mysql_counters(v).queries, 0, "{}", show(v));
}
