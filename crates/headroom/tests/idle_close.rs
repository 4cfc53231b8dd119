//! Issue 26: real servers close idle keep-alive connections (nginx's `keepalive_timeout`,
//! Apache's `KeepAliveTimeout`). A user who thinks longer reconnects when it next sends, as
//! browsers, wrk and k6 do: no user stalls, nothing is an error, and headroom's `idle_closed`
//! and `reconnects` match the connections the server logged.

mod common;
use common::*;

/// Users x think x duration of every run here: each user sends at 0, 1.5, 3.0 and 4.5 s.
const LOAD: [&str; 6] = ["-c", "10", "--think", "1500ms", "-d", "6s"];

fn check(what: &str, url: &str, new_connections: impl Fn() -> u64, baseline: u64) {
    let (v, out) = run_json(url, &LOAD);
    assert!(out.status.success(), "{what}: {v}");
    let responses = v["responses"].as_u64().unwrap();
    println!(
        "{what}: responses {responses} (baseline without idle timeout {baseline}), errors {}, \
         idle_closed {}, reconnects {}, connects {}, server's new connections {}",
        v["errors_total"],
        v["idle_closed"],
        v["reconnects"],
        v["connects"],
        new_connections()
    );
    // Within 5% of the same load against a server that keeps connections open (a stalled user
    // would send 1 request instead of 4).
    assert!(
        responses * 100 >= baseline * 95,
        "{what}: {responses} responses vs {baseline}"
    );
    assert_eq!(v["errors_total"], 0, "{what}: {v}");
    let idle = v["idle_closed"].as_u64().unwrap();
    let re = v["reconnects"].as_u64().unwrap();
    // Every user's connection but the last is closed by the server during the think; the
    // users' last ones may be closed by either side at the end.
    assert!(idle + 10 >= responses && idle <= responses, "{what}: {v}");
    assert!(re + 10 >= idle && re <= idle, "{what}: {v}");
    // Every connection the server saw but the users' first was a reconnect.
    assert_eq!(new_connections(), re + 10, "{what}: {v}");
    assert_eq!(v["connects"].as_u64().unwrap(), re + 10, "{what}: {v}");
}

#[test]
fn nginx_with_a_one_second_keepalive_timeout() {
    // `$connection_requests` is 1 on a connection's first request.
    let fmt = "$connection $connection_requests $status";
    let keep = Nginx::start_with("", fmt);
    let (v, _) = run_json(&keep.url("/"), &LOAD);
    let baseline = v["responses"].as_u64().unwrap();
    assert_eq!(v["idle_closed"], 0, "{v}");
    let ng = Nginx::start_with("keepalive_timeout 1s;", fmt);
    let firsts = || {
        ng.log_lines()
            .iter()
            .filter(|l| l.split(' ').nth(1) == Some("1"))
            .count() as u64
    };
    check("nginx keepalive_timeout 1s", &ng.url("/"), firsts, baseline);
}

#[test]
fn apache_with_a_one_second_keepalive_timeout() {
    // `%k`: requests before this one on its connection (0 on a new connection).
    let keep = apache::Apache::start(&[], "KeepAliveTimeout 120", "%k %>s");
    let (v, _) = run_json(&keep.url("/"), &LOAD);
    let baseline = v["responses"].as_u64().unwrap();
    assert_eq!(v["idle_closed"], 0, "{v}");
    drop(keep);
    let ap = apache::Apache::start(&[], "KeepAliveTimeout 1", "%k %>s");
    let firsts = || {
        ap.log_text()
            .lines()
            .filter(|l| l.starts_with("0 "))
            .count() as u64
    };
    check("Apache KeepAliveTimeout 1", &ap.url("/"), firsts, baseline);
}
