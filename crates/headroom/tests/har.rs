//! HAR import end to end (issue 16): Debian's Chromium, driven over the DevTools protocol, opens
//! a page with a stylesheet, a script, images and an API call, and posts its form; the HAR is
//! built from the Network events it reports. `headroom import har` converts it, `headroom run`
//! replays it against the same server, and the server must see the same requests (method, path
//! and query, POST body) in the same order as the HAR holds them.
//!
//! The server is a small HTTP/1.1 keep-alive server started here on 127.0.0.1; every response
//! says `Cache-Control: no-store`, so what the browser loads is what it asked the server for.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::chromium::{artifact_dir, Browser};

/// What the server saw of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    method: String,
    target: String,
    body: String,
}

struct SiteServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for SiteServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A 1x1 transparent PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

const HOME: &str = r#"<!doctype html>
<html><head><title>Shop</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/style.css">
<script src="/app.js"></script>
</head><body>
<h1>Shop</h1>
<img src="/logo.png" alt="logo">
<form method="post" action="/submit">
<input name="user" value="ann">
<input name="note" value="hi there &amp; more">
<button>Send</button>
</form>
</body></html>
"#;

const THANKS: &str = r#"<!doctype html>
<html><head><title>Thanks</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/style.css">
</head><body><p>Thanks</p></body></html>
"#;

const APP_JS: &str = "window.apiDone = false;\n\
fetch('/api/items?page=2&sort=name').then(r => r.json()).then(() => { window.apiDone = true; });\n";

fn respond(c: &mut TcpStream, status: &str, ctype: &str, extra: &str, body: &[u8]) -> bool {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\n{extra}\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).is_ok() && c.write_all(body).is_ok()
}

fn serve_conn(c: TcpStream, seen: Arc<Mutex<Vec<Seen>>>) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, target) = (method.to_string(), target.to_string());
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                if n.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().unwrap().push(Seen {
            method: method.clone(),
            target: target.clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let path = target.split('?').next().unwrap_or("");
        let ok = match (method.as_str(), path) {
            ("GET", "/") => respond(&mut w, "200 OK", "text/html", "", HOME.as_bytes()),
            ("GET", "/thanks") => respond(&mut w, "200 OK", "text/html", "", THANKS.as_bytes()),
            ("GET", "/style.css") => respond(
                &mut w,
                "200 OK",
                "text/css",
                "",
                b"body { font-family: sans-serif; background: url(/bg.png); }\n",
            ),
            ("GET", "/app.js") => respond(
                &mut w,
                "200 OK",
                "application/javascript",
                "",
                APP_JS.as_bytes(),
            ),
            ("GET", "/logo.png") | ("GET", "/bg.png") => {
                respond(&mut w, "200 OK", "image/png", "", PNG)
            }
            ("GET", "/api/items") => respond(
                &mut w,
                "200 OK",
                "application/json",
                "",
                b"{\"items\": [1, 2]}",
            ),
            ("POST", "/submit") => respond(
                &mut w,
                "303 See Other",
                "text/plain",
                "Location: /thanks\r\n",
                b"",
            ),
            _ => respond(&mut w, "404 Not Found", "text/plain", "", b"no"),
        };
        if !ok {
            return;
        }
    }
}

fn start_site() -> SiteServer {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (s, st) = (seen.clone(), stop.clone());
    std::thread::spawn(move || {
        while !st.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((c, _)) => {
                    c.set_nonblocking(false).unwrap();
                    let s = s.clone();
                    std::thread::spawn(move || serve_conn(c, s));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    SiteServer { port, seen, stop }
}

/// (method, target, body) of the HAR entries a replay sends: the http(s) ones that got a
/// response and did not come from the browser's cache, in file order.
fn replayable(har: &serde_json::Value) -> Vec<Seen> {
    har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["response"]["status"].as_u64().unwrap_or(0) > 0)
        .filter(|e| e.get("_fromCache").is_none() && e["response"].get("_error").is_none())
        .filter(|e| e["request"]["url"].as_str().unwrap().starts_with("http://"))
        .map(|e| {
            let url = e["request"]["url"].as_str().unwrap();
            let after_host = &url["http://".len()..];
            let target = &after_host[after_host.find('/').unwrap()..];
            Seen {
                method: e["request"]["method"].as_str().unwrap().to_string(),
                target: target.split('#').next().unwrap().to_string(),
                body: e["request"]["postData"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            }
        })
        .collect()
}

#[test]
fn a_har_recorded_by_chromium_imports_and_replays_the_same_requests_in_order() {
    let site = start_site();
    let base = format!("http://127.0.0.1:{}", site.port);

    // Record: the page and its assets, the API call, then the form post and its redirect.
    let mut b = Browser::launch();
    b.record_network();
    b.open(&format!("{base}/"));
    assert!(
        b.wait_for("window.apiDone === true", Duration::from_secs(20)),
        "the page's fetch did not finish"
    );
    assert!(
        b.network_idle(Duration::from_secs(20)),
        "requests still open"
    );
    b.navigate_by("document.forms[0].submit()");
    assert!(
        b.network_idle(Duration::from_secs(20)),
        "requests still open"
    );
    let har = b.har();
    let errors = b.errors();
    drop(b);
    assert!(errors.is_empty(), "the browser reported errors: {errors:?}");
    let recorded = site.seen.lock().unwrap().clone();

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shop.har");
    let text = serde_json::to_string_pretty(&har).unwrap();
    std::fs::write(&file, &text).unwrap();
    std::fs::write(artifact_dir().join("chromium-shop.har"), &text).unwrap();

    // What the browser did: every asset, the API call with its query, the POST with the form's
    // body, the redirect's target; and the server saw each of them.
    let want = replayable(&har);
    let targets: Vec<String> = want
        .iter()
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    for t in [
        "GET /",
        "GET /style.css",
        "GET /app.js",
        "GET /logo.png",
        "GET /bg.png",
        "GET /api/items?page=2&sort=name",
        "POST /submit",
        "GET /thanks",
    ] {
        assert!(
            targets.iter().any(|x| x == t),
            "{t} not in the HAR: {targets:?}"
        );
    }
    let post = want.iter().find(|s| s.method == "POST").unwrap();
    assert_eq!(post.body, "user=ann&note=hi+there+%26+more");
    for w in &want {
        assert!(
            recorded.contains(w),
            "{w:?} is in the HAR but the server never saw it: {recorded:?}"
        );
    }

    // Import: a scenario, with the browser's connection and fetch headers dropped (warned).
    let out = common::headroom()
        .args(["import", "har"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "import failed: {stderr}");
    let yaml = String::from_utf8(out.stdout).unwrap();
    std::fs::write(artifact_dir().join("chromium-shop.yaml"), &yaml).unwrap();
    for w in [
        "connection-level headers (",
        "browser-only headers (",
        "Accept-Encoding: dropped",
    ] {
        assert!(stderr.contains(w), "no warning {w:?}:\n{stderr}");
    }
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with("headroom: warning: ")
                && l.contains(&format!("{}:", file.display()))),
        "every warning names the file and a position:\n{stderr}"
    );
    assert!(
        yaml.contains(&format!("- {{host: 127.0.0.1, port: {}}}", site.port)),
        "{yaml}"
    );
    assert!(
        yaml.contains("transaction:"),
        "pages are transactions:\n{yaml}"
    );
    assert!(!yaml.to_ascii_lowercase().contains("sec-fetch"), "{yaml}");
    assert!(
        yaml.contains("body: user=ann&note=hi+there+%26+more"),
        "{yaml}"
    );

    // Replay the HAR directly: one user, one pass (a budget of as many requests as it holds).
    site.seen.lock().unwrap().clear();
    let n = want.len().to_string();
    let (summary, out) = common::run_json(file.to_str().unwrap(), &["-n", n.as_str()]);
    assert!(
        out.status.success(),
        "run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        common::num(&summary, &["requests"]),
        want.len() as u64,
        "{summary}"
    );
    let replayed = site.seen.lock().unwrap().clone();
    let show = |v: &[Seen]| {
        v.iter()
            .map(|s| format!("{} {} {:?}", s.method, s.target, s.body))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        replayed,
        want,
        "the replay differs from the recording.\nreplayed:\n{}\nrecorded (HAR):\n{}",
        show(&replayed),
        show(&want)
    );
}

#[test]
fn import_har_refuses_oversized_and_non_regular_files_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.har");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 * 1024 * 1024 + 1)
        .unwrap();
    for (path, want) in [
        (big.clone(), "HAR files above 64 MiB are refused"),
        (dir.path().to_path_buf(), "not a regular file"),
        (std::path::PathBuf::from("/dev/null"), "not a regular file"),
    ] {
        for cmd in [&["import", "har"][..], &["run"][..]] {
            let mut c = common::headroom();
            c.args(cmd).arg(&path);
            if cmd[0] == "run" && path.extension().is_none() {
                // `run` takes only .har/.json paths for HAR files.
                continue;
            }
            let out = c.output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{cmd:?} {}", path.display());
            let line = common::one_line(&out);
            assert!(line.contains(want), "{cmd:?}: {line}");
        }
    }
    // A broken HAR: the JSON error with its line and column, exit 2.
    let bad = dir.path().join("bad.har");
    std::fs::write(&bad, "{\"log\": {\"entries\": [\n  {,}\n]}}").unwrap();
    let out = common::headroom()
        .args(["import", "har"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line = common::one_line(&out);
    assert!(
        line.contains(&format!("{}:2:4: not valid JSON", bad.display())),
        "{line}"
    );
}

/// A HAR saved as `.json` runs too (told from a scenario written in JSON by its `log.entries`),
/// and so does a scenario written in JSON.
#[test]
fn run_takes_a_har_saved_as_json_and_a_json_scenario() {
    let server = common::TestServer::ok();
    let dir = tempfile::tempdir().unwrap();
    let entry = |path: &str, ms: u64| {
        serde_json::json!({
            "startedDateTime": format!("2025-03-01T10:00:00.{ms:03}Z"), "time": 1,
            "request": {"method": "GET", "url": format!("http://{}{path}", server.addr), "headers": []},
            "response": {"status": 200}
        })
    };
    let har =
        serde_json::json!({"log": {"entries": [entry("/a", 0), entry("/b", 2), entry("/c", 4)]}});
    let file = dir.path().join("rec.json");
    std::fs::write(&file, har.to_string()).unwrap();
    let (v, out) = common::run_json(file.to_str().unwrap(), &["-n", "6"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(common::num(&v, &["requests"]), 6, "{v}");
    let yaml_in_json = serde_json::json!({
        "servers": [{"host": "127.0.0.1", "port": server.addr.port()}],
        "load": {"users": [{"count": 1}]},
        "sessions": [{"name": "s", "steps": [{"request": "GET /x"}]}]
    });
    let file = dir.path().join("scenario.json");
    std::fs::write(&file, yaml_in_json.to_string()).unwrap();
    let (v, out) = common::run_json(file.to_str().unwrap(), &["-n", "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(common::num(&v, &["requests"]), 4, "{v}");
}
