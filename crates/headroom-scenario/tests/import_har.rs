//! The HAR importer: requests, think times, pages and the server from entries built here; one
//! located warning for each thing not honoured; errors for what cannot be replayed; and hostile
//! input (truncated JSON, huge numbers, wrong types) that must never panic.

use headroom_core::Distribution;
use headroom_scenario::har::{looks_like_har, read_har_file, MAX_HAR_BYTES, MAX_HAR_WARNINGS};
use headroom_scenario::model::*;
use headroom_scenario::{import_har, parse_str, to_yaml, HarOptions, ScenarioError};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

fn show(errs: &[ScenarioError]) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn round_trip(s: &Scenario) {
    let yaml = to_yaml(s);
    match parse_str(&yaml, "x.yaml") {
        Ok(back) => assert_eq!(&back, s, "round trip differs; YAML was:\n{yaml}"),
        Err(e) => panic!("YAML does not parse:\n{}\n---\n{yaml}", show(&e)),
    }
}

/// `2025-03-01T10:00:00Z` plus `ms` (under an hour), as HAR writes it.
fn iso(ms: u64) -> String {
    format!(
        "2025-03-01T10:{:02}:{:02}.{:03}Z",
        ms / 60_000,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// A complete entry: `method url`, started `start` ms after 10:00, lasting `time` ms, a 200.
fn entry(method: &str, url: &str, start: u64, time: f64) -> Value {
    json!({
        "startedDateTime": iso(start),
        "time": time,
        "request": {
            "method": method, "url": url, "httpVersion": "HTTP/1.1",
            "headers": [], "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0
        },
        "response": {
            "status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": [],
            "cookies": [], "content": {"size": 0, "mimeType": "text/html"}, "redirectURL": "",
            "headersSize": -1, "bodySize": 0
        },
        "cache": {}, "timings": {"send": 0, "wait": time, "receive": 0}
    })
}

fn with(mut e: Value, pointer: &str, v: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let p = if parent.is_empty() {
        &mut e
    } else {
        e.pointer_mut(parent).unwrap()
    };
    p.as_object_mut().unwrap().insert(key.to_string(), v);
    e
}

fn headers(e: Value, hs: &[(&str, &str)]) -> Value {
    let list: Vec<Value> = hs
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    with(e, "/request/headers", Value::Array(list))
}

/// A HAR text with `pages` and one entry per line: entry `i` starts at line `i + 3`, column 3.
fn har(pages: &[(&str, &str)], entries: &[Value]) -> String {
    let pages: Vec<Value> = pages
        .iter()
        .map(|(id, title)| json!({"id": id, "title": title, "startedDateTime": iso(0), "pageTimings": {}}))
        .collect();
    let mut s = format!(
        "{{\"log\": {{\"version\": \"1.2\", \"creator\": {{\"name\": \"test\", \"version\": \"1\"}},\n\"pages\": {}, \"entries\": [\n",
        Value::Array(pages)
    );
    for (i, e) in entries.iter().enumerate() {
        let sep = if i + 1 < entries.len() { "," } else { "" };
        s.push_str(&format!("  {e}{sep}\n"));
    }
    s.push_str("]}}\n");
    s
}

fn import(text: &str) -> headroom_scenario::Imported {
    let imp = import_har(text, "rec.har", &HarOptions::default())
        .unwrap_or_else(|e| panic!("{}\n{text}", show(&e)));
    round_trip(&imp.scenario);
    imp
}

/// Every request of the session, depth first.
fn requests(steps: &[Step]) -> Vec<&Request> {
    let mut out = Vec::new();
    for s in steps {
        match s {
            Step::Request(r) => out.push(r),
            Step::Transaction { steps, .. } => out.extend(requests(steps)),
            _ => {}
        }
    }
    out
}

fn think_ms(ms: u64) -> Step {
    Step::Think(Distribution::Constant(Duration::from_millis(ms)))
}

/// The warning at entry `i` (line i + 3, column 3) holding `want`; panics showing all of them.
fn warned_at(ws: &[ScenarioError], i: usize, want: &str) {
    assert!(
        ws.iter()
            .any(|w| w.line == i + 3 && w.column == 3 && w.message.contains(want)),
        "no warning at entries[{i}] with {want:?}:\n{}",
        show(ws)
    );
}

#[test]
fn har_converts_requests_think_times_pages_and_server() {
    let login = headers(
        entry(
            "POST",
            "http://shop.test:8080/login?next=%2Fcart",
            3000,
            40.0,
        ),
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Origin", "http://shop.test:8080"),
        ],
    );
    let login = with(
        login,
        "/request/postData",
        json!({"mimeType": "application/x-www-form-urlencoded", "text": "user=ann&pass=s%26cret"}),
    );
    let text = har(
        &[("p1", "Shop home"), ("p2", "")],
        &[
            with(
                entry("GET", "http://shop.test:8080/", 0, 100.0),
                "/pageref",
                json!("p1"),
            ),
            with(
                entry("GET", "http://shop.test:8080/app.css", 100, 20.0),
                "/pageref",
                json!("p1"),
            ),
            with(
                entry("GET", "http://shop.test:8080/logo.png", 110, 30.0),
                "/pageref",
                json!("p1"),
            ),
            // Outside any page, 1.86 s after the logo ended (140 ms).
            with(login, "/pageref", Value::Null),
            with(
                entry("GET", "http://shop.test:8080/cart#top", 3540, 10.0),
                "/pageref",
                json!("p2"),
            ),
            with(
                entry(
                    "GET",
                    "http://shop.test:8080/api/items?id=7&x=%20",
                    3550,
                    5.0,
                ),
                "/pageref",
                json!("p2"),
            ),
        ],
    );
    let imp = import(&text);
    let s = &imp.scenario;
    assert_eq!(s.name.as_deref(), Some("rec"));
    assert_eq!(
        s.servers,
        [Server {
            http2: false,
            host: "shop.test".into(),
            port: 8080,
            protocol: Protocol::Http,
            tls: None
        }]
    );
    assert_eq!(
        s.load.users,
        [Users {
            count: 1,
            session: None
        }]
    );
    assert!(s.load.phases.is_empty());
    assert_eq!(s.sessions.len(), 1);
    let steps = &s.sessions[0].steps;
    let req = |m: &str, p: &str, name: &str| {
        Step::Request(Request {
            name: name.into(),
            method: m.into(),
            path: p.into(),
            headers: Vec::new(),
            body: None,
            auth: None,
            oauth: None,
        })
    };
    let Step::Transaction { name, steps: home } = &steps[0] else {
        panic!("{steps:?}")
    };
    assert_eq!(name, "Shop home");
    // app.css starts when / ends: no think; logo.png overlaps app.css: no think either.
    assert_eq!(
        home,
        &[
            req("GET", "/", "GET /"),
            req("GET", "/app.css", "GET /app.css"),
            req("GET", "/logo.png", "GET /logo.png"),
        ]
    );
    assert_eq!(steps[1], think_ms(2860));
    let Step::Request(login) = &steps[2] else {
        panic!("{steps:?}")
    };
    assert_eq!(
        (
            login.method.as_str(),
            login.path.as_str(),
            login.name.as_str()
        ),
        ("POST", "/login?next=%2Fcart", "POST /login")
    );
    assert_eq!(login.body.as_deref(), Some("user=ann&pass=s%26cret"));
    assert_eq!(
        login.headers,
        [
            (
                "Content-Type".to_string(),
                "application/x-www-form-urlencoded".to_string()
            ),
            ("Origin".to_string(), "http://shop.test:8080".to_string())
        ]
    );
    // The think before a page goes before its transaction; the page without a title is named
    // by its id.
    assert_eq!(steps[3], think_ms(500));
    let Step::Transaction { name, steps: cart } = &steps[4] else {
        panic!("{steps:?}")
    };
    assert_eq!(name, "p2");
    assert_eq!(
        cart,
        &[
            req("GET", "/cart", "GET /cart"),
            req("GET", "/api/items?id=7&x=%20", "GET /api/items"),
        ]
    );
    assert_eq!(steps.len(), 5);
    // The only thing not honoured: the logo was fetched while the stylesheet was.
    assert_eq!(imp.warnings.len(), 1, "{}", show(&imp.warnings));
    warned_at(&imp.warnings, 2, "entries[2] GET http://shop.test:8080/logo.png: this request started before the one before it had finished");
}

#[test]
fn har_load_options() {
    let text = har(&[], &[entry("GET", "https://a.test/", 0, 1.0)]);
    let opts = HarOptions {
        users: None,
        rate: Some(2.5),
        duration: Duration::from_secs(30),
    };
    let s = import_har(&text, "a.har", &opts).unwrap().scenario;
    assert_eq!(
        s.load.phases,
        [Phase {
            duration: Duration::from_secs(30),
            rate: Rate::Fixed(2.5),
            arrival: Arrival::Poisson,
            max_users: None
        }]
    );
    assert!(s.load.users.is_empty());
    assert_eq!((s.servers[0].port, s.servers[0].tls.is_some()), (443, true));
    round_trip(&s);
    let s = import_har(
        &text,
        "a.har",
        &HarOptions {
            users: Some(40),
            ..HarOptions::default()
        },
    )
    .unwrap()
    .scenario;
    assert_eq!(s.load.users[0].count, 40);
    for (opts, want) in [
        (
            HarOptions {
                users: Some(1),
                rate: Some(1.0),
                ..HarOptions::default()
            },
            "exclude each other",
        ),
        (
            HarOptions {
                users: Some(0),
                ..HarOptions::default()
            },
            "at least 1",
        ),
        (
            HarOptions {
                rate: Some(f64::NAN),
                ..HarOptions::default()
            },
            "positive number",
        ),
        (
            HarOptions {
                rate: Some(1.0),
                duration: Duration::ZERO,
                ..HarOptions::default()
            },
            "more than 0s",
        ),
    ] {
        let errs = import_har(&text, "a.har", &opts).unwrap_err();
        assert!(errs[0].message.contains(want), "{}", show(&errs));
    }
}

#[test]
fn har_headers_dropped_merged_and_kept() {
    let e0 = headers(
        entry("GET", "http://h.test/", 0, 1.0),
        &[
            (":authority", "h.test"),
            (":method", "GET"),
            ("Host", "h.test"),
            ("Connection", "keep-alive"),
            ("Proxy-Connection", "keep-alive"),
            ("Content-Length", "0"),
            ("sec-ch-ua", "\"Chromium\";v=\"156\""),
            ("Sec-Fetch-Mode", "navigate"),
            ("Upgrade-Insecure-Requests", "1"),
            ("Accept-Encoding", "gzip, deflate, br"),
            ("accept", "text/html"),
            ("Accept", "*/*"),
            ("cookie", "a=1"),
            ("Cookie", "b=2"),
            ("User-Agent", "  Mozilla/5.0  "),
            ("Bad Name", "x"),
            ("X-Split", "a\r\nInjected: yes"),
            ("X-Var", "${user}"),
            ("X-Empty", ""),
        ],
    );
    let e0 = with(e0, "/request/httpVersion", json!("h2"));
    let e1 = headers(
        entry("GET", "http://h.test/b", 1, 1.0),
        &[("te", "trailers"), ("Cookie", "c=3")],
    );
    let e1 = with(e1, "/request/httpVersion", json!("HTTP/2.0"));
    let e2 = with(
        entry("GET", "http://h.test/c", 2, 1.0),
        "/request/headers",
        json!([{"name": 5}, "x"]),
    );
    let e3 = with(
        entry("GET", "http://h.test/d", 3, 1.0),
        "/request/headers",
        json!({"a": "b"}),
    );
    let e4 = with(
        entry("GET", "http://h.test/e", 4, 1.0),
        "/request/cookies",
        json!([{"name": "a", "value": "1"}]),
    );
    let imp = import(&har(&[], &[e0, e1, e2, e3, e4]));
    let rs = requests(&imp.scenario.sessions[0].steps);
    let got: Vec<(&str, &str)> = rs[0]
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("accept", "text/html, */*"),
            ("User-Agent", "Mozilla/5.0"),
            ("X-Empty", ""),
        ]
    );
    // Cookie headers go; the cookies the browser had before the recording are set at the start.
    assert!(rs[1].headers.is_empty(), "{:?}", rs[1].headers);
    let preset: Vec<(&str, &str)> = imp.scenario.sessions[0]
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Cookie(CookieStep::Set { name, value, .. }) => {
                Some((name.as_str(), value.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(preset, [("a", "1"), ("b", "2"), ("c", "3")]);
    assert!(matches!(imp.scenario.sessions[0].steps[0], Step::Cookie(_)));
    let w = &imp.warnings;
    warned_at(w, 0, "header name 'Bad Name' is not an HTTP token: dropped");
    warned_at(
        w,
        0,
        "header X-Split: its value holds a line break or NUL: dropped",
    );
    warned_at(w, 0, "header X-Var: its value holds '${'");
    warned_at(
        w,
        0,
        "entries[0] GET http://h.test/: this request holds HTTP/2 pseudo-headers (:authority, :method): dropped",
    );
    warned_at(
        w,
        0,
        "2 requests (this one and 1 after it) hold connection-level headers (connection, content-length, host, proxy-connection, te)",
    );
    warned_at(
        w,
        0,
        "this request holds browser-only headers (sec-ch-ua, sec-fetch-mode, upgrade-insecure-requests): dropped",
    );
    warned_at(w, 0, "this request holds Accept-Encoding: dropped");
    warned_at(
        w,
        0,
        "2 requests (this one and 1 after it) hold a Cookie header: dropped, each user's cookie jar",
    );
    warned_at(w, 0, "2 requests (this one and 1 after it) were recorded over HTTP/2.0, h2: replayed over HTTP/1.1");
    warned_at(w, 2, "a header without a string name and value: dropped");
    warned_at(w, 3, "request.headers is not an array: no header is sent");
    warned_at(
        w,
        4,
        "request.cookies lists cookies but no Cookie header was recorded: not sent",
    );
    assert_eq!(w.len(), 13, "{}", show(w));
}

#[test]
fn har_bodies_every_form() {
    let post = |i: u64, pd: Value| {
        with(
            entry("POST", &format!("http://h.test/p{i}"), i, 1.0),
            "/request/postData",
            pd,
        )
    };
    let entries = [
        // 0: JSON text; Content-Type from mimeType.
        post(
            0,
            json!({"mimeType": "application/json", "text": "{\"a\": [1, 2]}\n"}),
        ),
        // 1: base64 of UTF-8 text.
        post(
            1,
            json!({"mimeType": "text/plain", "text": "aMOpbGxvCg==", "encoding": "base64"}),
        ),
        // 2: base64 of bytes that are not UTF-8.
        post(
            2,
            json!({"mimeType": "application/octet-stream", "text": "/wD+", "_encoding": "base64"}),
        ),
        // 3: says base64 but is not.
        post(3, json!({"text": "not base64!", "encoding": "base64"})),
        // 4: an encoding nobody knows.
        post(4, json!({"text": "x", "encoding": "rot13"})),
        // 5: form params, no text.
        post(
            5,
            json!({"mimeType": "application/x-www-form-urlencoded; charset=UTF-8",
                       "params": [{"name": "q", "value": "a b&c"}, {"name": "n", "value": "é"}, {"value": "orphan"}]}),
        ),
        // 6: multipart params, no text.
        post(
            6,
            json!({"mimeType": "multipart/form-data; boundary=x", "params": [{"name": "f", "fileName": "a.png"}]}),
        ),
        // 7: a body size but no postData.
        with(
            entry("POST", "http://h.test/p7", 7, 1.0),
            "/request/bodySize",
            json!(1234),
        ),
        // 8: a body holding ${ (headroom's variables).
        post(8, json!({"text": "{\"t\": \"${x}\"}"})),
        // 9: wrong types.
        post(9, json!({"text": 42})),
        // 10: postData not an object.
        post(10, json!("text")),
        // 11: a Content-Type header wins over mimeType.
        headers(
            post(11, json!({"mimeType": "text/plain", "text": "hi"})),
            &[("content-type", "text/x-custom")],
        ),
    ];
    let imp = import(&har(&[], &entries));
    let rs = requests(&imp.scenario.sessions[0].steps);
    let bodies: Vec<Option<&str>> = rs.iter().map(|r| r.body.as_deref()).collect();
    assert_eq!(
        bodies,
        [
            Some("{\"a\": [1, 2]}\n"),
            Some("héllo\n"),
            None,
            None,
            None,
            Some("q=a+b%26c&n=%C3%A9"),
            None,
            None,
            None,
            None,
            None,
            Some("hi"),
        ]
    );
    assert_eq!(
        rs[0].headers,
        [("Content-Type".to_string(), "application/json".to_string())]
    );
    assert_eq!(
        rs[11].headers,
        [("content-type".to_string(), "text/x-custom".to_string())]
    );
    let w = &imp.warnings;
    warned_at(w, 2, "the body is binary (3 bytes, not UTF-8)");
    warned_at(
        w,
        3,
        "postData.text says base64 but is not: sent without a body",
    );
    warned_at(w, 4, "postData encoding 'rot13' is not understood");
    warned_at(w, 5, "a postData param without a string name: dropped");
    warned_at(w, 5, "the body is rebuilt from them, URL-encoded");
    warned_at(w, 6, "a multipart body is not rebuilt");
    warned_at(
        w,
        7,
        "request.bodySize is 1234 but no postData was recorded",
    );
    warned_at(w, 8, "the body holds '${'");
    warned_at(w, 9, "postData.text is not a string");
    warned_at(w, 10, "request.postData is not an object");
    assert_eq!(w.len(), 10, "{}", show(w));
}

#[test]
fn har_entries_not_replayed_are_warned_and_skipped() {
    let mut e = vec![
        entry("GET", "http://main.test/", 0, 1.0),      // 0 kept
        entry("GET", "ws://main.test/socket", 1, 1.0),  // 1 scheme
        entry("GET", "wss://main.test/socket", 2, 1.0), // 2 scheme
        entry("GET", "data:image/png;base64,AAAA", 3, 1.0), // 3 scheme
        entry("GET", "chrome-extension://abcdef/inject.js", 4, 1.0), // 4 scheme
        entry("GET", "ftp://main.test/x", 5, 1.0),      // 5 scheme
        entry("CONNECT", "http://main.test:443/", 6, 1.0), // 6 method
        entry("get", "http://main.test/lower", 7, 1.0), // 7 method
        entry("M-SEARCH", "http://main.test/ssdp", 8, 1.0), // 8 method
        with(
            entry("GET", "http://main.test/cached.js", 9, 1.0),
            "/_fromCache",
            json!("memory"),
        ), // 9
        with(
            entry("GET", "http://main.test/blocked", 10, 1.0),
            "/response/_error",
            json!("net::ERR_BLOCKED_BY_CLIENT"),
        ), // 10
        with(
            entry("GET", "http://main.test/aborted", 11, 1.0),
            "/response/status",
            json!(0),
        ), // 11
        with(
            entry("GET", "http://main.test/noresp", 12, 1.0),
            "/response",
            Value::Null,
        ), // 12
        entry("GET", "https://cdn.test/lib.js", 13, 1.0), // 13 other origin
        entry("GET", "http://main.test:8080/", 14, 1.0), // 14 other origin (port)
        entry("GET", "http://u:p@main.test/userinfo", 15, 1.0), // 15 kept, warned
        entry("GET", "http://main.test/a/${b}", 16, 1.0), // 16 kept, encoded
        json!(17),                                      // 17 not an object
        json!({"request": "GET /"}),                    // 18 no request object
        json!({"request": {"method": "GET"}}),          // 19 no url
        entry("GET", "http://:80/", 20, 1.0),           // 20 bad URL
        with(
            entry("GET", "http://main.test/p", 21, 1.0),
            "/pageref",
            json!("nowhere"),
        ), // 21
        with(
            entry("GET", "http://main.test/q", 22, 1.0),
            "/pageref",
            json!(3),
        ), // 22
        with(
            entry("GET", "http://main.test/r", 23, 1.0),
            "/startedDateTime",
            json!("yesterday"),
        ), // 23
        with(
            entry("GET", "http://main.test/s", 24, 1.0),
            "/time",
            json!(-1),
        ), // 24
        with(
            entry("GET", "http://main.test/t", 25, 1.0),
            "/time",
            json!("slow"),
        ), // 25
    ];
    // 26: an hour and a half later (think cut to an hour).
    e.push(with(
        entry("GET", "http://main.test/late", 0, 1.0),
        "/startedDateTime",
        json!("2025-03-01T11:30:00.000Z"),
    ));
    let imp = import(&har(&[], &e));
    let rs = requests(&imp.scenario.sessions[0].steps);
    let paths: Vec<&str> = rs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/",
            "/userinfo",
            "/a/$%7Bb}",
            "/p",
            "/q",
            "/r",
            "/s",
            "/t",
            "/late"
        ]
    );
    assert_eq!(imp.scenario.servers[0].host, "main.test");
    assert_eq!(imp.scenario.servers[0].port, 80);
    let steps = &imp.scenario.sessions[0].steps;
    assert!(steps.contains(&think_ms(3_600_000)), "{steps:?}");
    let w = &imp.warnings;
    warned_at(
        w,
        1,
        "scheme 'ws:' is not supported (a WebSocket is not replayed",
    );
    warned_at(w, 2, "scheme 'wss:' is not supported");
    warned_at(
        w,
        3,
        "scheme 'data:' is not supported (made inside the browser",
    );
    warned_at(
        w,
        4,
        "scheme 'chrome-extension:' is not supported (a browser or extension resource)",
    );
    warned_at(
        w,
        5,
        "scheme 'ftp:' is not supported (only http and https are replayed)",
    );
    warned_at(w, 6, "CONNECT (a proxy tunnel) is not replayed: skipped");
    warned_at(w, 7, "method 'get' is not supported");
    warned_at(w, 8, "method 'M-SEARCH' is not supported");
    warned_at(
        w,
        9,
        "served from the browser's memory cache, never sent to the server: skipped",
    );
    warned_at(
        w,
        10,
        "no response was recorded (net::ERR_BLOCKED_BY_CLIENT): skipped",
    );
    warned_at(w, 11, "no response was recorded (status 0): skipped");
    warned_at(w, 12, "no response was recorded (status 0): skipped");
    warned_at(
        w,
        13,
        "https://cdn.test:443 is not the scenario's server http://main.test:80",
    );
    warned_at(w, 14, "http://main.test:8080 is not the scenario's server");
    warned_at(w, 15, "user:password@ in the URL is not honoured");
    warned_at(w, 16, "sent as '$%7B'");
    warned_at(w, 17, "entries[17]: not an object: skipped");
    warned_at(w, 18, "entries[18]: no request object: skipped");
    warned_at(
        w,
        19,
        "request.method or request.url is missing or not a string",
    );
    warned_at(
        w,
        20,
        "entries[20] GET http://:80/: the URL has an empty or malformed host: skipped",
    );
    warned_at(w, 21, "pageref 'nowhere' names no page of log.pages");
    warned_at(w, 22, "pageref is not a string");
    warned_at(
        w,
        23,
        "startedDateTime is missing or not an ISO 8601 date-time",
    );
    warned_at(w, 24, "time is not a number of milliseconds >= 0");
    warned_at(w, 25, "time is not a number of milliseconds >= 0");
    warned_at(w, 26, "the think time is cut to 3600 s");
    // The warnings come in file order.
    let lines: Vec<usize> = w.iter().map(|x| x.line).collect();
    assert!(lines.windows(2).all(|p| p[0] <= p[1]), "{lines:?}");
}

#[test]
fn har_origin_is_the_busiest_and_ties_go_to_the_first() {
    let e = [
        entry("GET", "https://[::1]:8443/a", 0, 1.0),
        entry("GET", "http://x.test/b", 1, 1.0),
        entry("GET", "http://X.TEST:80/c", 2, 1.0),
        entry("GET", "https://[::1]:8443/d", 3, 1.0),
    ];
    let imp = import(&har(&[], &e));
    assert_eq!(imp.scenario.servers[0].host, "::1");
    assert_eq!(imp.scenario.servers[0].port, 8443);
    assert!(imp.scenario.servers[0].tls.is_some());
    let e = [
        entry("GET", "https://[::1]:8443/a", 0, 1.0),
        entry("GET", "http://x.test/b", 1, 1.0),
        entry("GET", "http://X.TEST:80/c", 2, 1.0),
    ];
    let imp = import(&har(&[], &e));
    assert_eq!(imp.scenario.servers[0].host, "x.test");
    assert!(imp.scenario.servers[0].tls.is_none());
    warned_at(
        &imp.warnings,
        0,
        "https://[::1]:8443 is not the scenario's server http://x.test:80",
    );
}

#[test]
fn har_errors_are_located() {
    let opts = HarOptions::default();
    let err = |text: &str| import_har(text, "e.har", &opts).unwrap_err();
    let e = err("{\"log\": {\"entries\": [\n  {\"a\": 1,}\n]}}");
    assert_eq!((e[0].line, e[0].column), (2, 11), "{}", show(&e));
    assert!(
        // serde_json's word for it, read one entry at a time (issue 26): the comma's position
        // is what locates it.
        e[0].message
            .starts_with("not valid JSON: key must be a string"),
        "{}",
        show(&e)
    );
    assert!(!e[0].message.contains("at line"));
    let e = err("\u{feff}{]");
    assert_eq!((e[0].line, e[0].column), (1, 3), "{}", show(&e));
    for (text, want) in [
        ("[]", "not a HAR file"),
        ("{\"log\": []}", "not a HAR file"),
        ("{\"log\": {}}", "log.entries: expected an array"),
        (
            "{\"log\": {\"entries\": {}}}",
            "log.entries: expected an array",
        ),
        ("{\"log\": {\"entries\": []}}", "log.entries is empty"),
        ("", "not valid JSON"),
        (
            "{\"log\": {\"entries\": [1, {\"request\": 2}]}}",
            "none of the 2 entries",
        ),
    ] {
        let e = err(text);
        assert!(
            e.iter().all(|x| x.line >= 1 && x.column >= 1),
            "{}",
            show(&e)
        );
        assert!(
            e.iter().any(|x| x.message.contains(want)),
            "{text}: {}",
            show(&e)
        );
    }
    // When nothing can be replayed, each entry's reason is an error.
    let e = err(&har(
        &[],
        &[
            entry("GET", "ws://a/", 0, 1.0),
            entry("GET", "data:,x", 1, 1.0),
        ],
    ));
    assert_eq!(e.len(), 3, "{}", show(&e));
    assert_eq!((e[0].line, e[1].line), (3, 4));
    // Too big, even when given as text.
    let big = " ".repeat(MAX_HAR_BYTES as usize + 1);
    let e = err(&big);
    assert!(
        e[0].message.contains("HAR files above 64 MiB are refused"),
        "{}",
        show(&e)
    );
}

#[test]
fn har_pages_in_odd_shapes() {
    let e = [
        with(
            entry("GET", "http://h.test/", 0, 1.0),
            "/pageref",
            json!("a"),
        ),
        with(
            entry("GET", "http://h.test/x", 5, 1.0),
            "/pageref",
            json!("b"),
        ),
        with(
            entry("GET", "http://h.test/y", 9, 1.0),
            "/pageref",
            json!("a"),
        ),
    ];
    let mut text = har(&[("a", "  A  "), ("b", "B")], &e);
    let imp = import(&text);
    let names: Vec<&str> = imp.scenario.sessions[0]
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Transaction { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    // A page that comes back is a second transaction of the same name.
    assert_eq!(names, ["A", "B", "A"]);
    // pages that are not an array, and a page without an id.
    text = text.replacen("\"pages\": [", "\"pages\": [{\"title\": \"no id\"}, ", 1);
    let imp = import(&text);
    assert!(imp
        .warnings
        .iter()
        .any(|w| w.message.contains("log.pages[0] has no string id")));
    let text = har(&[], &e).replacen("\"pages\": []", "\"pages\": 7", 1);
    let imp = import(&text);
    assert!(imp
        .warnings
        .iter()
        .any(|w| w.message.contains("log.pages is not an array")));
    assert!(imp
        .warnings
        .iter()
        .any(|w| w.message.contains("pageref 'a' names no page")));
}

#[test]
fn har_warnings_are_capped() {
    let n = MAX_HAR_WARNINGS + 5;
    let mut e: Vec<Value> = (0..n).map(|_| json!(1)).collect();
    e.push(entry("GET", "http://h.test/", 0, 1.0));
    let imp = import(&har(&[], &e));
    assert_eq!(imp.warnings.len(), MAX_HAR_WARNINGS + 1);
    let last = imp.warnings.last().unwrap();
    assert!(
        last.message.starts_with("5 more warning(s) not listed"),
        "{last}"
    );
}

#[test]
fn har_hostile_input_never_panics() {
    let mut e = vec![
        headers(
            with(
                entry("POST", "http://h.test/a?b=c", 0, 12.5),
                "/request/postData",
                json!({"mimeType": "text/plain", "text": "body ü"}),
            ),
            &[("Cookie", "a=b"), (":path", "/a")],
        ),
        with(
            entry("GET", "http://h.test/p", 20, 1.0),
            "/pageref",
            json!("p1"),
        ),
    ];
    e.push(entry("GET", "http://h.test/q", 30, 1.0));
    let text = har(&[("p1", "P")], &e);
    // Every truncation: an error or a scenario, never a panic.
    let mut cut = 0;
    for (i, _) in text.char_indices() {
        match import_har(&text[..i], "t.har", &HarOptions::default()) {
            Ok(imp) => round_trip(&imp.scenario),
            Err(errs) => {
                assert!(errs.iter().all(|x| x.line >= 1 && x.column >= 1));
                cut += 1;
            }
        }
    }
    assert!(cut > 0);
    // Every value replaced by values of other types and extreme numbers.
    let base: Value = serde_json::from_str(&text).unwrap();
    let mut pointers = Vec::new();
    collect_pointers(&base, String::new(), &mut pointers);
    let odd = [
        json!(null),
        json!(true),
        json!(-1),
        json!(1e308),
        json!(-1e308),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(0.000001),
        json!(""),
        json!("${x}"),
        json!("\u{0}\r\n"),
        json!([]),
        json!([1, "a"]),
        json!({}),
        json!({"name": 1}),
        json!("9999-12-31T23:59:59.999999999+23:59"),
        json!("0000-01-01T00:00:00Z"),
    ];
    for p in &pointers {
        for v in &odd {
            let mut doc = base.clone();
            *doc.pointer_mut(p).unwrap() = v.clone();
            let t = doc.to_string();
            match import_har(&t, "t.har", &HarOptions::default()) {
                Ok(imp) => round_trip(&imp.scenario),
                Err(errs) => assert!(
                    errs.iter().all(|x| x.line >= 1
                        && x.column >= 1
                        && !x.message.contains("internal error")),
                    "{p} = {v}: {}",
                    show(&errs)
                ),
            }
        }
    }
    // Numbers serde_json cannot hold, deep nesting, a lone surrogate.
    for t in [
        r#"{"log": {"entries": [{"time": 1e400}]}}"#.to_string(),
        r#"{"log": {"entries": [{"time": 123456789012345678901234567890}]}}"#.to_string(),
        format!(
            "{{\"log\": {{\"entries\": [{}1{}]}}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
        r#"{"log": {"entries": [{"request": {"method": "GET", "url": "http://a/\ud800"}}]}}"#
            .to_string(),
    ] {
        if let Err(errs) = import_har(&t, "t.har", &HarOptions::default()) {
            assert!(errs.iter().all(|x| x.line >= 1 && x.column >= 1));
        }
    }
}

fn collect_pointers(v: &Value, at: String, out: &mut Vec<String>) {
    if !at.is_empty() {
        out.push(at.clone());
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                collect_pointers(
                    x,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect_pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn har_files_are_bounded_before_reading() {
    let dir = tempfile_dir();
    // A directory, a character device: refused without reading.
    let e = read_har_file(&dir).unwrap_err();
    assert!(e.starts_with("not a regular file"), "{e}");
    let e = read_har_file(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(e.starts_with("not a regular file"), "{e}");
    // One byte over the limit (sparse: nothing is written).
    let big = dir.join("big.har");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_HAR_BYTES + 1)
        .unwrap();
    let e = read_har_file(&big).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "{} bytes: HAR files above 64 MiB are refused",
            MAX_HAR_BYTES + 1
        )),
        "{e}"
    );
    let bin = dir.join("bin.har");
    std::fs::write(&bin, b"{\"log\": \xff}").unwrap();
    let e = read_har_file(&bin).unwrap_err();
    assert_eq!(e, "not UTF-8 text (at byte 8): a HAR is JSON in UTF-8");
    assert!(read_har_file(&dir.join("missing.har"))
        .unwrap_err()
        .starts_with("cannot read it"));
    let ok = dir.join("ok.har");
    std::fs::write(&ok, har(&[], &[entry("GET", "http://a/", 0, 1.0)])).unwrap();
    let imp = headroom_scenario::load_har(&ok, &HarOptions::default()).unwrap();
    assert_eq!(imp.scenario.servers[0].host, "a");
    let e = headroom_scenario::load_har(&big, &HarOptions::default()).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (1, 1));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("headroom-har-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn har_is_told_from_a_json_scenario() {
    assert!(looks_like_har(&har(
        &[],
        &[entry("GET", "http://a/", 0, 1.0)]
    )));
    assert!(looks_like_har("{\"log\": {\"entries\": [1,"));
    assert!(!looks_like_har(
        "{\"load\": {\"users\": [{\"count\": 1}]}, \"sessions\": []}"
    ));
    assert!(!looks_like_har("load: {}\n"));
}

#[test]
fn har_docs_example_is_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let docs = std::fs::read_to_string(root.join("docs/import.md")).unwrap();
    let start = docs
        .find("```json\n")
        .expect("a HAR example in docs/import.md")
        + 8;
    let end = start + docs[start..].find("```").unwrap();
    let imp = import_har(&docs[start..end], "shop.har", &HarOptions::default())
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    let yaml = to_yaml(&imp.scenario);
    assert!(
        docs.contains(&format!("```yaml\n{yaml}```")),
        "docs/import.md is stale:\n{yaml}\nwarnings:\n{}",
        show(&imp.warnings)
    );
    for w in &imp.warnings {
        assert!(docs.contains(&w.to_string()), "not in docs/import.md: {w}");
    }
}

#[test]
fn har_cookies_set_during_the_recording_are_left_to_the_jar() {
    let e0 = with(
        entry("POST", "http://h.test/login", 0, 1.0),
        "/response/headers",
        json!([{"name": "Set-Cookie", "value": "sid=abc; Path=/; HttpOnly"}]),
    );
    let e1 = headers(
        entry("GET", "http://h.test/cart", 1, 1.0),
        &[("Cookie", "sid=abc; consent=yes")],
    );
    let imp = import(&har(&[], &[e0, e1]));
    let steps = &imp.scenario.sessions[0].steps;
    // Only the cookie the browser had before: the session's own comes from the server.
    assert_eq!(
        steps[0],
        Step::Cookie(CookieStep::Set {
            name: "consent".into(),
            value: "yes".into(),
            domain: None,
            path: None
        })
    );
    assert_eq!(
        steps
            .iter()
            .filter(|s| matches!(s, Step::Cookie(_)))
            .count(),
        1
    );
    let rs = requests(steps);
    assert!(rs.iter().all(|r| r.headers.is_empty()), "{rs:?}");
}
