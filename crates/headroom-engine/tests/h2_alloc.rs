//! HTTP/2 users allocate nothing per request once warm, cookies and all: nginx (h2c, 1 worker)
//! sets a cookie on every reply, every stream captures its head (per stream: they interleave),
//! the jar stores the cookie, and every request sends it back as its `cookie` field. A run of
//! 20x more requests makes (almost) no more allocations. Needs nginx (scripts/test installs
//! Debian's nginx-light).

use std::net::SocketAddr;
use std::time::Duration;

use headroom_core::{Http2Options, LoadModel, ProtoCounter};

mod common;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

/// Allocations and counters of `requests` on 2 users x 4 streams.
fn run(addr: SocketAddr, requests: u64) -> (u64, headroom_metrics::Counters) {
    let model = LoadModel::Closed {
        users: 2,
        per_user: None,
        think: None,
    };
    let mut p = common::plan(addr, model, 1);
    p.request.path = "/cookie".into();
    p.http2 = Some(Http2Options { streams: 4 });
    p.browser.cookies = true;
    p.stop.duration = Some(Duration::from_secs(60));
    p.stop.requests = Some(requests);
    // One interval for the whole run: snapshots allocate, and they are not per request.
    p.interval = Duration::from_secs(60);
    let before = headroom_testkit::process_allocs();
    let out = common::run(&p);
    let after = headroom_testkit::process_allocs();
    let c = out.total.counters;
    assert_eq!(c.responses, requests, "{c:?}");
    assert_eq!(c.errors_total(), 0, "{c:?}");
    (after - before, c)
}

#[test]
fn http2_users_with_cookies_allocate_nothing_per_request_once_warm() {
    let ng = headroom_testkit::servers::nginx::Nginx::builder()
        .h2c(true)
        .site(
            r#"location = /cookie { add_header Set-Cookie "sid=$connection; Path=/" always; return 200 "ok\n"; }"#,
            "$status",
        )
        .start();
    run(ng.addr, 500); // warm up lazily initialised state
    let (small, _) = run(ng.addr, 2_000);
    let (large, c) = run(ng.addr, 40_000);
    // Every reply stored its cookie: the jar and the per-stream capture were in use throughout.
    assert_eq!(c.proto[ProtoCounter::HttpCookiesStored.index()], 40_000);
    let extra = large.saturating_sub(small);
    assert!(
        extra < 100,
        "40,000 HTTP/2 requests with cookies made {large} allocations against {small} for 2,000: {extra} extra"
    );
}
