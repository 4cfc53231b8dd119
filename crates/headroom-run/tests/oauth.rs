//! OAuth 1.0 signed requests (issue 32, Tsung's `<oauth>`) end to end: a scenario gets a token
//! and its secret from a server, then signs requests with them, over HTTP/1.1 to a test server
//! and over HTTP/2 (h2c) through nginx to the same server. The server keeps every request as it
//! arrived, and the test checks each one's `Authorization: OAuth ...` by recomputing RFC 5849's
//! signature from the request itself, with its own encoder and ring's HMAC-SHA1 (not
//! headroom's code): method, URL, query and form-body parameters, nonce, timestamp, token.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use common::*;

/// One request as the server read it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one whole request (head, then a `Content-Length` body); `None` at the peer's close.
fn read_one(c: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Seen> {
    let mut b = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = c.read(&mut b).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < end + len {
        let n = c.read(&mut b).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&b[..n]);
    }
    let body = buf[end..end + len].to_vec();
    buf.drain(..end + len);
    Some(Seen {
        method,
        target,
        headers,
        body,
    })
}

/// The token endpoint's answer: a token and a secret that need encoding.
const TOKEN: &str = "tok-1";
const SECRET: &str = "sec 1+&/";

/// A keep-alive server keeping every request: `/…/token` answers the token as JSON, anything
/// else `ok`.
fn recording_server() -> (TestServer, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let server = TestServer::start(move |mut c| {
        let mut buf = Vec::new();
        while let Some(r) = read_one(&mut c, &mut buf) {
            let body = if r.target.contains("/token") {
                format!("{{\"token\": \"{TOKEN}\", \"secret\": \"{SECRET}\"}}")
            } else {
                "ok".to_string()
            };
            keep.lock().unwrap().push(r);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if c.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    });
    (server, seen)
}

/// RFC 5849 §3.6: unreserved bytes as they are, every other `%XX` (upper case).
fn pct(s: &[u8]) -> String {
    let mut out = String::new();
    for &b in s {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-decoding, with `+` as a space when `form`.
fn unpct(s: &str, form: bool) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' if form => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            x => out.push(x),
        }
        i += 1;
    }
    out
}

/// A form-encoded string's parameters, decoded.
fn form(s: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (unpct(k, true), unpct(v, true))
        })
        .collect()
}

fn base64(b: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `Authorization: OAuth` parameters of `r`, decoded, in order.
fn oauth_params(r: &Seen) -> Vec<(String, String)> {
    let v = r
        .header("authorization")
        .unwrap_or_else(|| panic!("no Authorization: {r:?}"));
    let rest = v
        .strip_prefix("OAuth ")
        .unwrap_or_else(|| panic!("not OAuth: {v}"));
    rest.split(", ")
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            let v = v.trim_matches('"');
            (k.to_string(), String::from_utf8(unpct(v, false)).unwrap())
        })
        .collect()
}

/// Checks `r`'s signature as a server would, for a client that addressed `authority` and
/// signs with these secrets; returns its nonce.
fn verify(r: &Seen, authority: &str, consumer_secret: &str, token_secret: &str) -> String {
    let params = oauth_params(r);
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("oauth_signature_method").as_deref(), Some("HMAC-SHA1"));
    assert_eq!(get("oauth_version").as_deref(), Some("1.0"));
    assert_eq!(get("oauth_consumer_key").as_deref(), Some("key 1"));
    let nonce = get("oauth_nonce").expect("a nonce");
    assert!(nonce.len() >= 8, "{nonce}");
    let ts: u64 = get("oauth_timestamp").unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(ts <= now && ts + 120 >= now, "timestamp {ts}, now {now}");
    let (path, query) = r.target.split_once('?').unwrap_or((&r.target, ""));
    let mut all: Vec<(Vec<u8>, Vec<u8>)> = form(query);
    if r.header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"))
    {
        all.extend(form(std::str::from_utf8(&r.body).unwrap()));
    }
    for (k, v) in &params {
        if k != "oauth_signature" {
            all.push((k.as_bytes().to_vec(), v.as_bytes().to_vec()));
        }
    }
    let mut enc: Vec<(String, String)> = all.iter().map(|(k, v)| (pct(k), pct(v))).collect();
    enc.sort();
    let normalized = enc
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let base = format!(
        "{}&{}&{}",
        pct(r.method.as_bytes()),
        pct(format!("http://{authority}{path}").as_bytes()),
        pct(normalized.as_bytes())
    );
    let key = format!(
        "{}&{}",
        pct(consumer_secret.as_bytes()),
        pct(token_secret.as_bytes())
    );
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key.as_bytes()),
        base.as_bytes(),
    );
    assert_eq!(
        get("oauth_signature").unwrap(),
        base64(tag.as_ref()),
        "signature of {r:?}\nbase string {base}"
    );
    nonce
}

/// 10 sessions: a form POST for a token (consumer credentials only), then two GETs signed with
/// the token and secret extracted from its answer. `prefix` goes before every path (nginx
/// passes `/sleep/` on to the test server).
fn yaml(port: u16, prefix: &str, http2: bool) -> String {
    let h2 = if http2 { ", http: 2" } else { "" };
    format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}{h2}}}]
load: {{phases: [{{duration: 1s, arrival_rate: 10, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - request:
          name: token
          method: POST
          path: "{prefix}/token?scope=read%20write&x=a+b"
          headers: {{Content-Type: application/x-www-form-urlencoded}}
          body: "grant=client+credentials&star=%2A&empty"
          oauth: {{consumer_key: "key 1", consumer_secret: "s3cr&t"}}
      - extract: {{var: tok, json: /token}}
      - extract: {{var: sec, json: /secret}}
      - request:
          name: echo
          path: "{prefix}/echo?b=2&a=1&a=0"
          oauth: {{consumer_key: "key 1", consumer_secret: "s3cr&t", token: "${{tok}}", token_secret: "${{sec}}"}}
      - request:
          name: again
          path: "{prefix}/echo/%7Euser"
          oauth: {{consumer_key: "key 1", consumer_secret: "s3cr&t", token: "${{tok}}", token_secret: "${{sec}}"}}
"#
    )
}

/// Every request `seen` verifies: 10 token requests without a token, 20 with it; 30 nonces.
fn check(seen: &[Seen], authority: &str) {
    assert_eq!(seen.len(), 30, "{seen:#?}");
    let mut nonces = HashSet::new();
    for r in seen {
        let token = oauth_params(r)
            .into_iter()
            .find(|(k, _)| k == "oauth_token")
            .map(|(_, v)| v);
        let secret = if r.target.contains("/token") {
            assert_eq!(token, None, "{r:?}");
            ""
        } else {
            assert_eq!(token.as_deref(), Some(TOKEN), "{r:?}");
            SECRET
        };
        nonces.insert(verify(r, authority, "s3cr&t", secret));
    }
    assert_eq!(nonces.len(), 30, "a nonce per request");
}

#[test]
fn oauth_signatures_verify_at_the_server_over_http1() {
    let (server, seen) = recording_server();
    let f = run(&scenario(&yaml(server.addr.port(), "", false), None));
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.responses, 30, "{}", show(v));
    check(&seen.lock().unwrap(), &server.addr.to_string());
}

#[test]
fn oauth_signatures_verify_at_the_server_over_h2c_through_nginx() {
    let (server, seen) = recording_server();
    let ng = Nginx::builder().h2c(true).upstream(server.addr).start();
    let url = ng.url("/");
    let port: u16 = url
        .rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse().ok())
        .unwrap();
    let f = run(&scenario(&yaml(port, "/sleep", true), None));
    let v = &f.summary;
    assert_eq!(v.protocol, "h2c", "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.responses, 30, "{}", show(v));
    // Signed for the URL the client addressed (nginx's), checked where nginx passed it.
    check(&seen.lock().unwrap(), &format!("127.0.0.1:{port}"));
}
