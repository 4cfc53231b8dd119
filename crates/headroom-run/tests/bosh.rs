//! XMPP over BOSH (XEP-0124/0206) end to end: ejabberd's `mod_bosh` (the private node
//! `scripts/ejabberd.sh` starts, BOSH at `HEADROOM_XMPP_BOSH_URL`) behind a reverse proxy, Debian's
//! nginx, whose access log is the server side's own count of the BOSH requests it answered. Each
//! user holds the session over two HTTP connections as a BOSH client does (one poll held by the
//! server, the other connection for what the user sends), logs in, chats and closes; the test
//! checks nginx's count against headroom's, every chat received against every chat sent, and
//! that every request was answered.

mod common;

use std::process::Command;

use common::*;
use headroom_run::summary::XmppCounters;
use headroom_testkit::servers::services::{repo_root, service};

/// The tests one at a time: each loads the one ejabberd, and the 1,000-user one is timed
/// tightly enough (chats in flight when users leave) that a second load beside it shows.
static EJABBERD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One of 500 blocks of accounts, by the clock: each run logs in accounts of its own.
fn clock_block() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 500
}

/// Accounts `user{first}..=user{last}` on the shared ejabberd (existing ones count as done).
fn register(first: u64, last: u64) {
    let out = Command::new(repo_root().join("scripts/ejabberd.sh"))
        .args(["register", &first.to_string(), &last.to_string()])
        .output()
        .expect("scripts/ejabberd.sh register");
    assert!(
        out.status.success(),
        "register: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ejabberd's BOSH endpoint's `HOST:PORT`, with 1,000 users registered from `first` on.
fn bosh_upstream(first: u64) -> String {
    service("HEADROOM_XMPP_ADDR", "ejabberd.sh");
    let url = std::env::var("HEADROOM_XMPP_BOSH_URL")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            let out = Command::new(repo_root().join("scripts/ejabberd.sh"))
                .arg("bosh-url")
                .output()
                .expect("scripts/ejabberd.sh bosh-url");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        });
    register(first, first + 999);
    let rest = url.strip_prefix("http://").expect("an http:// BOSH URL");
    let (addr, path) = rest.split_once('/').expect("HOST:PORT/PATH");
    assert_eq!(path, "bosh", "{url}");
    assert!(addr.starts_with("127.0.0.1:"), "{url}");
    addr.to_string()
}

fn xmpp_of(v: &headroom_run::RunSummary) -> &XmppCounters {
    scenario_of(v)
        .protocol
        .as_ref()
        .and_then(|p| p.xmpp.as_ref())
        .unwrap_or_else(|| panic!("no xmpp counters: {}", show(v)))
}

#[test]
fn a_thousand_users_over_bosh_and_the_proxy_counts_every_request() {
    let _one = EJABBERD.lock().unwrap_or_else(|e| e.into_inner());
    // Accounts of their own for each run (1,000 of 500 blocks from 100001 on, by the clock): a
    // chat that reached a user after it left waits in ejabberd's offline store and would be
    // delivered to the next run that logs the same account in, adding to its received chats.
    let first = 100_001 + clock_block() * 1000;
    let upstream = bosh_upstream(first);
    // nginx in front: one log line per BOSH request it answered (a held poll included), long
    // polls let through unbuffered.
    let ng = Nginx::start_with(
        &format!(
            "location /bosh {{ proxy_pass http://{upstream}; proxy_http_version 1.1; \
             proxy_buffering off; proxy_read_timeout 120s; }}"
        ),
        "$request_uri $status",
    );
    let (host, port) = (ng.addr.ip(), ng.addr.port());
    // 1,000 users arrive over 5 s; each logs in over BOSH, goes online, reads its roster, waits
    // until the others are online, sends 3 chats of 100 bytes to online users, stays 2 s more so
    // that every chat sent to it arrives, goes offline (no longer a destination), waits 1 s for
    // what is on its way, and closes (the session's terminate).
    let last = first + 999;
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: xmpp}}]
xmpp: {{domain: localhost, users: {{first: {first}, last: {last}}}, username: user, password: pass, bosh: /bosh}}
load:
  phases: [{{duration: 5s, arrival_rate: 200, arrival: constant}}]
sessions:
  - name: chat
    steps:
      - xmpp: presence:initial
      - xmpp: {{type: roster:get, name: roster}}
      - think: 3s
      - loop: {{count: 3, steps: [{{xmpp: {{type: chat, to: online, size: 100}}}}, {{think: 100ms}}]}}
      - think: 2s
      - xmpp: presence:final
      - think: 1s
      - xmpp: close
"#
    );
    let f = run(&lasting(&yaml, 40));
    let v = &f.summary;
    let x = xmpp_of(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(x.logins, 1000, "{x:#?}");
    assert_eq!(scenario_of(v).sessions.completed, 1000, "{}", show(v));
    assert_eq!(by_request(v, "roster").count, 1000, "{}", show(v));
    assert_eq!(x.chat_sent, 3000, "{x:#?}");
    // Every chat received but those on their way when their receiver closed: the close does not
    // wait for the poll the server holds, and a chat ejabberd put in it is lost with it (seen:
    // 0 directly, up to 9 of 3,000 behind the proxy, whose extra hop delays the hand-over).
    assert!(x.chat_received <= x.chat_sent, "{x:#?}");
    assert!(x.chat_received * 100 >= x.chat_sent * 99, "{x:#?}");
    // Every request went through the proxy: its log has one line per BOSH request headroom
    // wrote (a line is written when the answer is, or when the client's close is seen).
    assert!(x.bosh_requests > 0, "{x:#?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let bosh = loop {
        let lines = ng.log_lines();
        let bosh: Vec<String> = lines
            .into_iter()
            .filter(|l| l.starts_with("/bosh "))
            .collect();
        if bosh.len() as u64 >= x.bosh_requests || std::time::Instant::now() > deadline {
            break bosh;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(bosh.len() as u64, x.bosh_requests, "{x:#?}");
    // Each answered, but for the poll a user leaves held when it closes (the terminate's answer
    // ends its session; nginx logs that poll 200 when ejabberd lets it go, 499 when it sees
    // the close first): at most one per user unanswered.
    assert!(x.bosh_responses <= x.bosh_requests, "{x:#?}");
    assert!(x.bosh_requests - x.bosh_responses <= 1000, "{x:#?}");
    let unanswered = bosh.iter().filter(|l| !l.ends_with(" 200")).count() as u64;
    assert!(
        bosh.iter()
            .all(|l| l.ends_with(" 200") || l.ends_with(" 499")),
        "{bosh:?}"
    );
    assert!(
        unanswered <= x.bosh_requests - x.bosh_responses,
        "{x:#?} {unanswered}"
    );
    // Two connections per user: the user's own and BOSH's second one.
    assert!(x.bosh_polls > 0 && x.bosh_empty > 0, "{x:#?}");
    assert_eq!(v.connects, 2000, "{}", show(v));
}

/// BOSH over https (`tls:` on the server, ejabberd's TLS listener for `/bosh`, its certificate
/// checked against the scripts' CA): both connections of every user run a TLS handshake, and
/// the users log in, chat and close as over plain HTTP.
#[test]
fn bosh_over_https() {
    let _one = EJABBERD.lock().unwrap_or_else(|e| e.into_inner());
    service("HEADROOM_XMPP_ADDR", "ejabberd.sh");
    let out = Command::new(repo_root().join("scripts/ejabberd.sh"))
        .arg("bosh-tls-url")
        .output()
        .expect("scripts/ejabberd.sh bosh-tls-url");
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let rest = url.strip_prefix("https://").expect("an https:// BOSH URL");
    let (addr, path) = rest.split_once('/').expect("HOST:PORT/PATH");
    assert_eq!(path, "bosh", "{url}");
    let (host, port) = addr.rsplit_once(':').unwrap();
    // Accounts of their own per run, as above (100 of 500 blocks from 700001 on).
    let first = 700_001 + clock_block() * 100;
    let last = first + 99;
    register(first, last);
    let ca = common::tls_services::test_ca();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: xmpp, tls: {{cacert: "{ca}"}}}}]
xmpp: {{domain: localhost, users: {{first: {first}, last: {last}}}, username: user, password: pass, bosh: /bosh}}
load:
  phases: [{{duration: 2s, arrival_rate: 50, arrival: constant}}]
sessions:
  - name: chat
    steps:
      - xmpp: presence:initial
      - xmpp: {{type: roster:get, name: roster}}
      - think: 2s
      - loop: {{count: 2, steps: [{{xmpp: {{type: chat, to: online, size: 100}}}}, {{think: 100ms}}]}}
      - think: 2s
      - xmpp: presence:final
      - think: 1s
      - xmpp: close
"#,
        ca = ca.display()
    );
    let f = run(&lasting(&yaml, 30));
    let v = &f.summary;
    let x = xmpp_of(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(x.logins, 100, "{x:#?}");
    assert_eq!(scenario_of(v).sessions.completed, 100, "{}", show(v));
    assert_eq!(x.chat_sent, 200, "{x:#?}");
    assert!(x.chat_received * 100 >= x.chat_sent * 99, "{x:#?}");
    assert!(x.bosh_polls > 0 && x.bosh_responses > 0, "{x:#?}");
    // Two connections per user, each over TLS.
    assert_eq!(v.connects, 200, "{}", show(v));
    assert_eq!(tls(v).handshakes, 200, "{}", show(v));
}
