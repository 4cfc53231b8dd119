//! Issue 26: real servers close idle keep-alive connections (nginx's `keepalive_timeout`,
//! Apache's `KeepAliveTimeout`). A user who thinks longer reconnects when it next sends, as
//! browsers, wrk and k6 do: no user stalls, nothing is an error, and the summary's
//! `idle_closed` and `reconnects` match the connections the server logged.

mod common;
use common::*;

use headroom_core::spec::RunSpec;

/// Users x think x duration of every run here (`-c 10 --think 1500ms -d 6s`): each user sends
/// at 0, 1.5, 3.0 and 4.5 s.
fn load(url: &str) -> RunSpec {
    let mut spec = url_spec(url);
    spec.connections = Some(10);
    spec.think = Some("1500ms".into());
    spec.duration = secs(6);
    spec
}

fn check(what: &str, url: &str, new_connections: impl Fn() -> u64, baseline: u64) {
    let f = run(&load(url));
    assert_clean(&f);
    let v = &f.summary;
    let responses = v.responses;
    println!(
        "{what}: responses {responses} (baseline without idle timeout {baseline}), errors {}, \
         idle_closed {}, reconnects {}, connects {}, server's new connections {}",
        v.errors_total,
        v.idle_closed,
        v.reconnects,
        v.connects,
        new_connections()
    );
    // Within 5% of the same load against a server that keeps connections open (a stalled user
    // would send 1 request instead of 4).
    assert!(
        responses * 100 >= baseline * 95,
        "{what}: {responses} responses vs {baseline}"
    );
    assert_eq!(v.errors_total, 0, "{what}: {}", show(v));
    assert_eq!(v.errors.total(), 0, "{what}: {}", show(v));
    let idle = v.idle_closed;
    let re = v.reconnects;
    // Every user's connection but the last is closed by the server during the think; the
    // users' last ones may be closed by either side at the end.
    assert!(
        idle + 10 >= responses && idle <= responses,
        "{what}: {}",
        show(v)
    );
    assert!(re + 10 >= idle && re <= idle, "{what}: {}", show(v));
    // Every connection the server saw but the users' first was a reconnect.
    assert_eq!(new_connections(), re + 10, "{what}: {}", show(v));
    assert_eq!(v.connects, re + 10, "{what}: {}", show(v));
}

/// The same load against a server that keeps connections open: its responses, and no
/// connection closed while idle.
fn baseline(url: &str) -> u64 {
    let f = run(&load(url));
    assert_clean(&f);
    assert_eq!(f.summary.idle_closed, 0, "{}", show(&f.summary));
    assert_eq!(f.summary.reconnects, 0, "{}", show(&f.summary));
    f.summary.responses
}

#[test]
fn nginx_with_a_one_second_keepalive_timeout() {
    // `$connection_requests` is 1 on a connection's first request.
    let fmt = "$connection $connection_requests $status";
    let keep = Nginx::start_with("", fmt);
    let baseline = baseline(&keep.url("/"));
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
    let baseline = baseline(&keep.url("/"));
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
