//! Users that behave like real users (issue 16): cookies, redirects, Basic and Digest auth,
//! exact codes — against real servers on loopback: nginx (Set-Cookie, `return 30x`,
//! `auth_basic`, error codes) and Apache for Digest (`mod_auth_digest`: nginx has none).
//! Every figure is checked against what the server logged. (The CLI's side, credentials given
//! twice or Digest without any, is crates/headroom/tests/users.rs.)

mod common;

use std::collections::{BTreeMap, HashSet};
use std::process::{Command, Stdio};

use common::*;
use headroom_core::spec::RunSpec;

/// `URL -c C -n N --follow F -d BOUND`.
fn following(url: &str, c: u32, n: u64, follow: u32) -> RunSpec {
    let mut spec = counted(url, c, n);
    spec.follow = follow;
    spec
}

/// nginx with a login that sets a per-login session cookie, a page that needs it, a chain of
/// three redirects, Basic auth, and 404 / 429. The log shows the cookie and the user.
fn site() -> Nginx {
    Nginx::start_with(
        r#"
    root {dir};
    location = /login { add_header Set-Cookie "sid=$request_id; Path=/; HttpOnly" always; return 200 "welcome\n"; }
    location = /private { if ($cookie_sid = "") { return 401; } return 200 "secret\n"; }
    location = /r1 { return 302 /r2; }
    location = /r2 { return 301 http://127.0.0.1:{port}/r3; }
    location = /r3 { return 307 /final; }
    location = /final { return 200 "done\n"; }
    location = /nowhere { return 302; }
    location = /away { return 302 http://192.0.2.1/; }
    location = /basic { auth_basic "headroom"; auth_basic_user_file {dir}/htpasswd; try_files /ok.txt =404; }
    location = /limited { return 429; }
    location = /badcookie { add_header Set-Cookie "=oops" always; add_header Set-Cookie "x=1; Domain=example.com" always; add_header Set-Cookie "good=1" always; return 200 "ok\n"; }
"#,
        "$request_uri $status c=$cookie_sid u=$remote_user",
    )
}

fn write_site_files(ng: &Nginx) {
    std::fs::write(ng.dir().join("ok.txt"), "basic ok\n").unwrap();
    // nginx reads {PLAIN} passwords as they are.
    std::fs::write(ng.dir().join("htpasswd"), "alice:{PLAIN}wonderland\n").unwrap();
}

/// `(uri, status, cookie, user)` of every logged request.
fn log(ng: &Nginx) -> Vec<(String, u16, String, String)> {
    ng.log_lines()
        .iter()
        .filter_map(|l| {
            let mut p = l.split(' ');
            let uri = p.next()?.to_string();
            let status = p.next()?.parse().ok()?;
            let cookie = p.next()?.strip_prefix("c=")?.to_string();
            let user = p.next()?.strip_prefix("u=")?.to_string();
            Some((uri, status, cookie, user))
        })
        .collect()
}

fn count(log: &[(String, u16, String, String)], uri: &str, status: u16) -> usize {
    log.iter()
        .filter(|(u, s, _, _)| u == uri && *s == status)
        .count()
}

#[test]
fn issue16_thousand_users_log_in_and_reach_the_cookie_protected_page() {
    let ng = site();
    // Constant arrivals every 4 ms from 0: 1,000 of them before 3,998 ms (the next would be at
    // 4,000 ms, where float rounding could go either way).
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}}}]
load:
  phases: [{{duration: 3998ms, arrival_rate: 250, arrival: constant, max_users: 1000}}]
sessions:
  - name: visit
    steps:
      - request: {{method: POST, path: /login, body: "user=${{user_id}}"}}
      - request: GET /private
"#,
        port = ng.addr.port()
    );
    let f = run(&scenario(&yaml, None));
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.responses, 2000, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.status_codes, BTreeMap::from([(200, 2000)]), "{}", show(v));
    assert_eq!(http(v).cookies_stored, 1000, "{}", show(v));
    let sessions = &v.scenario.as_ref().expect("a scenario's section").sessions;
    assert_eq!(sessions.completed, 1000, "{}", show(v));
    assert_eq!(sessions.aborted, 0, "{}", show(v));
    let l = log(&ng);
    assert_eq!(count(&l, "/login", 200), 1000);
    assert_eq!(
        count(&l, "/private", 200),
        1000,
        "every user reached the page"
    );
    assert_eq!(count(&l, "/private", 401), 0);
    // The server counts the cookies: each user sent its own, and none came back to /login.
    let private: HashSet<&str> = l
        .iter()
        .filter(|(u, ..)| u == "/private")
        .map(|(_, _, c, _)| c.as_str())
        .collect();
    assert_eq!(private.len(), 1000, "1,000 distinct session cookies");
    assert!(!private.contains("-"));
    assert!(l
        .iter()
        .filter(|(u, ..)| u == "/login")
        .all(|(_, _, c, _)| c == "-"));

    // Without a jar the page refuses every user.
    let before = l.len();
    let mut spec = scenario(&yaml, None);
    spec.no_cookies = true;
    let f = run(&spec);
    let v = &f.summary;
    assert_eq!(http(v).cookies_stored, 0, "{}", show(v));
    assert!(!http(v).cookies, "{}", show(v));
    assert_eq!(code(v, 401), 1000, "{}", show(v));
    let l = log(&ng);
    assert_eq!(count(&l[before..], "/private", 401), 1000);
}

#[test]
fn issue16_a_chain_of_three_redirects_is_followed_hop_by_hop() {
    let ng = site();
    let n = 50u64;
    let f = run(&following(&ng.url("/r1"), 2, n, 3));
    assert_clean(&f);
    let v = &f.summary;
    // Every hop is a request of its own, answered, timed and counted by its code.
    assert_eq!(v.requests, 4 * n, "{}", show(v));
    assert_eq!(v.responses, 4 * n, "{}", show(v));
    assert_eq!(
        v.status_codes,
        BTreeMap::from([(302, n), (301, n), (307, n), (200, n)]),
        "{}",
        show(v)
    );
    assert_eq!(v.latency_us.count, 4 * n, "{}", show(v));
    assert_eq!(http(v).redirects_followed, 3 * n, "{}", show(v));
    assert_eq!(http(v).follow, 3, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let l = log(&ng);
    for (uri, code) in [("/r1", 302), ("/r2", 301), ("/r3", 307), ("/final", 200)] {
        assert_eq!(count(&l, uri, code), n as usize, "{uri}");
    }

    // A chain longer than allowed ends where the limit is, counted as redirect_limit.
    let mut spec = following(&ng.url("/r1"), 1, 10, 2);
    spec.duration = None;
    let v = run(&spec).summary;
    assert_eq!(v.errors.redirect_limit, 10, "{}", show(&v));
    assert_eq!(v.responses, 30, "{}", show(&v));
    assert!(!v.status_codes.contains_key(&200), "{}", show(&v));
    // Without --follow (wrk's default) the 302 is the reply.
    let mut spec = counted(&ng.url("/r1"), 1, 10);
    spec.duration = None;
    let v = run(&spec).summary;
    assert_eq!(v.status_codes, BTreeMap::from([(302, 10)]), "{}", show(&v));
    assert_eq!(v.errors_total, 0, "{}", show(&v));
    // Elsewhere, or nowhere: counted with their kind, never followed.
    let mut spec = following(&ng.url("/away"), 1, 5, 3);
    spec.duration = None;
    let v = run(&spec).summary;
    assert_eq!(v.errors.redirect_offsite, 5, "{}", show(&v));
    assert_eq!(http(&v).redirects_followed, 0, "{}", show(&v));
    let mut spec = following(&ng.url("/nowhere"), 1, 5, 3);
    spec.duration = None;
    let v = run(&spec).summary;
    assert_eq!(v.errors.bad_location, 5, "{}", show(&v));
    assert_eq!(http(&v).redirects_followed, 0, "{}", show(&v));

    // In a scenario the step's own figure covers the whole chain, once per step.
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}}}]
follow: 3
load: {{users: [{{count: 2}}]}}
sessions:
  - name: s
    steps:
      - request: {{name: chain, path: /r1}}
"#,
        port = ng.addr.port()
    );
    let f = run(&scenario(&yaml, Some(40)));
    assert_clean(&f);
    let v = &f.summary;
    let chain = &v
        .scenario
        .as_ref()
        .expect("a scenario's section")
        .by_request["chain"];
    assert_eq!(chain.count, 40, "{}", show(v));
    assert_eq!(chain.errors, 0, "{}", show(v));
    assert_eq!(v.responses, 160, "{}", show(v));
}

#[test]
fn issue16_401_404_and_429_are_counted_per_code() {
    let ng = site();
    for (path, code, n) in [
        ("/private", 401u16, 21u64),
        ("/missing", 404, 17),
        ("/limited", 429, 13),
    ] {
        let v = run(&counted(&ng.url(path), 2, n)).summary;
        assert_eq!(v.status_codes, BTreeMap::from([(code, n)]), "{}", show(&v));
        assert_eq!(v.errors.http_4xx, n, "{}", show(&v));
        assert_eq!(v.errors_total, n, "{}", show(&v));
    }
}

#[test]
fn issue16_basic_auth_from_a_flag_or_the_url_is_accepted_by_nginx() {
    let ng = site();
    write_site_files(&ng);
    let n = 30u64;
    let url = ng.url("/basic");
    let with_userinfo = url.replace("http://", "http://alice:wonderland@");
    for (target, auth) in [
        (url.as_str(), Some("alice:wonderland")),
        (with_userinfo.as_str(), None),
    ] {
        let mut spec = counted(target, 3, n);
        spec.auth = auth.map(String::from);
        let f = run(&spec);
        assert_clean(&f);
        let v = &f.summary;
        assert_eq!(v.status_codes, BTreeMap::from([(200, n)]), "{}", show(v));
        assert_eq!(http(v).auth.as_deref(), Some("basic"), "{}", show(v));
    }
    let l = log(&ng);
    assert_eq!(
        l.iter()
            .filter(|(u, s, _, who)| u == "/basic" && *s == 200 && who == "alice")
            .count(),
        2 * n as usize
    );
    // A wrong password is refused by the server, each time.
    let mut spec = counted(&url, 1, 5);
    spec.duration = None;
    spec.auth = Some("alice:nope".into());
    let f = run(&spec);
    assert_nothing_succeeded(&f);
    assert_eq!(
        f.summary.status_codes,
        BTreeMap::from([(401, 5)]),
        "{}",
        show(&f.summary)
    );
}

/// Debian's Apache on a loopback port, with Digest auth (MD5, qop=auth) on `/digest/`.
struct Apache(apache::Apache);

impl Apache {
    fn start() -> Apache {
        // htdigest's format: user:realm:MD5(user:realm:password).
        let ha1 = format!("{:032x}", md5_hex(b"bob:headroom:s3cret"));
        let conf = r#"<Location /digest/>
  AuthType Digest
  AuthName "headroom"
  AuthDigestProvider file
  AuthUserFile {dir}/digest
  Require valid-user
</Location>"#;
        let ap = apache::Apache::start(
            &["authn_core", "authn_file", "authz_user", "auth_digest"],
            conf,
            "%U %>s u=%u",
        );
        let dir = ap.dir.path();
        std::fs::create_dir_all(dir.join("www/digest")).unwrap();
        std::fs::write(dir.join("www/digest/index.html"), "digest ok\n").unwrap();
        std::fs::write(dir.join("digest"), format!("bob:headroom:{ha1}\n")).unwrap();
        let _ = Command::new("chmod")
            .args(["-R", "a+rX", &dir.display().to_string()])
            .status();
        Apache(ap)
    }

    fn url(&self, path: &str) -> String {
        self.0.url(path)
    }

    /// `(path, status, user)` of every logged request.
    fn log(&self) -> Vec<(String, u16, String)> {
        self.0
            .log_text()
            .lines()
            .filter_map(|l| {
                let mut p = l.split(' ');
                Some((
                    p.next()?.to_string(),
                    p.next()?.parse().ok()?,
                    p.next()?.strip_prefix("u=")?.to_string(),
                ))
            })
            .collect()
    }
}

/// MD5 of `data`, as a number printed in hex by the caller (the test's own, independent of
/// headroom's Digest code).
fn md5_hex(data: &[u8]) -> u128 {
    let out = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .expect("md5sum");
    let hex = String::from_utf8_lossy(&out.stdout);
    u128::from_str_radix(hex.split_whitespace().next().unwrap(), 16).unwrap()
}

#[test]
fn issue16_digest_auth_is_accepted_by_apache() {
    let ap = Apache::start();
    let n = 200u64;
    let users = 4u64;
    let mut spec = counted(&ap.url("/digest/"), users as u32, n);
    spec.auth = Some("bob:s3cret".into());
    spec.digest = true;
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    // Each user is challenged once, answers, and then answers every later request at once
    // (the nonce count going up): n 200s, one 401 per user, no errors.
    assert_eq!(
        v.status_codes,
        BTreeMap::from([(200, n), (401, users)]),
        "{}",
        show(v)
    );
    assert_eq!(http(v).auth_challenges, users, "{}", show(v));
    assert_eq!(http(v).auth_failed, 0, "{}", show(v));
    assert_eq!(http(v).auth.as_deref(), Some("digest"), "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let l = ap.log();
    let ok = l
        .iter()
        .filter(|(p, s, u)| p.starts_with("/digest/") && *s == 200 && u == "bob");
    assert_eq!(ok.count(), n as usize, "{l:?}");

    // The same from a scenario's `auth:`, with a templated user.
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}}}]
load: {{users: [{{count: 2}}]}}
sessions:
  - name: s
    steps:
      - set: {{var: who, value: bob}}
      - request: {{name: page, path: /digest/, auth: {{user: "${{who}}", password: s3cret, scheme: digest}}}}
"#,
        port = ap.0.addr.port()
    );
    let f = run(&scenario(&yaml, Some(40)));
    assert_clean(&f);
    let v = &f.summary;
    let page = &v
        .scenario
        .as_ref()
        .expect("a scenario's section")
        .by_request["page"];
    assert_eq!(page.count, 40, "{}", show(v));
    assert_eq!(page.errors, 0, "{}", show(v));
    assert_eq!(code(v, 200), 40, "{}", show(v));
    // A wrong password: the answer is refused, counted, and the request ends with its 401.
    let mut spec = counted(&ap.url("/digest/"), 1, 3);
    spec.duration = None;
    spec.auth = Some("bob:wrong".into());
    spec.digest = true;
    let f = run(&spec);
    // Nothing succeeded (`headroom run` exits 1): the challenges were hops, not successes.
    assert_nothing_succeeded(&f);
    let v = &f.summary;
    assert_eq!(http(v).auth_failed, 3, "{}", show(v));
    assert!(!v.status_codes.contains_key(&200), "{}", show(v));
    // Each request: the challenge, then the refused answer, which is the request's error.
    assert_eq!(v.status_codes, BTreeMap::from([(401, 6)]), "{}", show(v));
    assert_eq!(http(v).auth_challenges, 3, "{}", show(v));
    assert_eq!(v.errors.http_4xx, 3, "{}", show(v));
    assert_eq!(v.errors_total, 3, "{}", show(v));
}

#[test]
fn issue16_bad_set_cookie_values_are_counted_and_the_run_goes_on() {
    let ng = site();
    let n = 25u64;
    let f = run(&counted(&ng.url("/badcookie"), 1, n));
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.status_codes, BTreeMap::from([(200, n)]), "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    // A nameless cookie does not parse; one for another domain is refused; the good one is
    // stored (replaced) on every reply.
    assert_eq!(http(v).cookies_malformed, n, "{}", show(v));
    assert_eq!(http(v).cookies_rejected, n, "{}", show(v));
    assert_eq!(http(v).cookies_stored, n, "{}", show(v));
}
