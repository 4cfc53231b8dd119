//! LDAP sessions end to end against a real directory on 127.0.0.1: Debian's slapd, private,
//! started by `scripts/slapd.sh` (`scripts/test` exports `HEADROOM_LDAP_URL`; without it the
//! script is run here): suffix dc=headroom,dc=test, root DN cn=admin (password headroom),
//! users uid=user1..user1000 (password passN) under ou=people, and the monitor backend, whose
//! cn=Operations,cn=Monitor counters say what the server did. Each test compares them with what
//! headroom counted. The tests hold one lock: the counters are the server's. Every run is
//! bounded (`-d`).

mod common;

use common::*;
use headroom_run::summary::LdapCounters;
use headroom_run::RunSummary;
use headroom_testkit::servers::services::service;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;

static DIRECTORY: Mutex<()> = Mutex::new(());

const ADMIN: &str = "cn=admin,dc=headroom,dc=test";

fn ldap() -> String {
    let url = service("HEADROOM_LDAP_URL", "slapd.sh");
    let addr = url
        .strip_prefix("ldap://")
        .unwrap_or(&url)
        .trim_end_matches('/');
    assert!(addr.starts_with("127.0.0.1:"), "slapd at {url}");
    addr.to_string()
}

fn ldap_counters(v: &RunSummary) -> &LdapCounters {
    scenario_of(v)
        .protocol
        .as_ref()
        .and_then(|p| p.ldap.as_ref())
        .unwrap_or_else(|| panic!("no ldap counters: {}", show(v)))
}

/// cn=Operations,cn=Monitor: completed operations by name (`Bind`, `Search`, `Add`...), read
/// with Debian's ldapsearch as the root DN. The reading is itself a bind, a search and an
/// unbind: a later reading counts this one's bind (done before it reads) and search
/// (completed after it read), so between two readings Bind and Search move by one more than
/// the run did; Add, Modify and Delete move by exactly the run's.
fn completed(addr: &str) -> BTreeMap<String, u64> {
    let out = Command::new("ldapsearch")
        .args([
            "-x",
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-H",
            &format!("ldap://{addr}"),
        ])
        .args([
            "-D",
            ADMIN,
            "-w",
            "headroom",
            "-b",
            "cn=Operations,cn=Monitor",
        ])
        .args(["-s", "one", "(objectClass=*)", "monitorOpCompleted"])
        .output()
        .unwrap_or_else(|e| panic!("ldapsearch (Debian's ldap-utils): {e}"));
    assert!(
        out.status.success(),
        "ldapsearch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut map = BTreeMap::new();
    let mut name = String::new();
    for line in text.lines() {
        if let Some(dn) = line.strip_prefix("dn: cn=") {
            name = dn.split(',').next().unwrap_or_default().to_string();
        } else if let Some(v) = line.strip_prefix("monitorOpCompleted: ") {
            map.insert(name.clone(), v.trim().parse().unwrap());
        }
    }
    assert!(map.contains_key("Bind"), "no counters in:\n{text}");
    map
}

fn moved(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, op: &str) -> u64 {
    after[op] - before[op]
}

/// A thousand users, each once: bind as one of the directory's users, two searches (an
/// equality and a substring filter, as Tsung's ldap.xml has), then bind as the root DN to add
/// an entry, modify it and delete it. No error, and the server's operation counters equal
/// headroom's.
#[test]
fn a_thousand_users_bind_search_add_modify_delete() {
    let _dir = DIRECTORY.lock().unwrap_or_else(|e| e.into_inner());
    let addr = ldap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: ldap}}]
load:
  users: [{{count: 1000}}]
sessions:
  - name: directory
    steps:
      - set: {{var: n, random_number: {{min: 1, max: 1000}}}}
      - set: {{var: r, random_number: {{min: 1, max: 1000000000}}}}
      - ldap: {{bind: "uid=user${{n}},ou=people,dc=headroom,dc=test", password: "pass${{n}}"}}
      - ldap: {{search: "ou=people,dc=headroom,dc=test", filter: "(uid=user${{n}})", attrs: [cn, mail], name: by-uid}}
      - ldap: {{search: "dc=headroom,dc=test", filter: "(&(cn=user*${{n}})(objectClass=inetOrgPerson))", name: by-cn}}
      - ldap: {{bind: "{ADMIN}", password: headroom, name: admin}}
      - ldap: {{add: "uid=t${{user_id}}-${{r}},ou=people,dc=headroom,dc=test", attrs: {{objectClass: [inetOrgPerson, organizationalPerson, person], cn: "temp ${{user_id}}", sn: "${{r}}"}}}}
      - ldap: {{modify: "uid=t${{user_id}}-${{r}},ou=people,dc=headroom,dc=test", changes: [{{replace: sn, values: [changed]}}, {{add: mail, values: ["t${{user_id}}@headroom.test"]}}]}}
      - ldap: {{delete: "uid=t${{user_id}}-${{r}},ou=people,dc=headroom,dc=test"}}
      - think: 60s
"#
    );
    let before = completed(&addr);
    let f = run(&lasting(&yaml, 15));
    let v = &f.summary;
    let after = completed(&addr);
    let l = ldap_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    for (name, want) in [
        ("ldap:bind", 1000),
        ("by-uid", 1000),
        ("by-cn", 1000),
        ("admin", 1000),
        ("ldap:add", 1000),
        ("ldap:modify", 1000),
        ("ldap:delete", 1000),
    ] {
        assert_eq!(by_request(v, name).count, want, "{name}: {}", show(v));
    }
    assert!(v.target.contains("(ldap://127.0.0.1:"), "{}", v.target);
    assert_eq!(l.requests, 7000, "{l:#?}");
    assert_eq!(l.success, 7000, "{l:#?}");
    // Each uid search finds its user; each cn search at least that one (user1 finds user1,
    // user11, user21, ..., user991: the substring matches every cn ending in 1).
    assert!(l.entries >= 2000, "{l:#?}");
    // What the server counted: the run's operations, exactly (and its own reading's).
    assert_eq!(moved(&before, &after, "Bind"), 2000 + 1, "{after:?}");
    assert_eq!(moved(&before, &after, "Search"), 2000 + 1, "{after:?}");
    assert_eq!(moved(&before, &after, "Add"), 1000, "{after:?}");
    assert_eq!(moved(&before, &after, "Modify"), 1000, "{after:?}");
    assert_eq!(moved(&before, &after, "Delete"), 1000, "{after:?}");
}

/// Results by name: a wrong password, an entry that exists, one that does not; a filter that
/// does not parse once its variable is in fails its step without a request; an unbind closes.
#[test]
fn results_by_name_and_bad_filters() {
    let _dir = DIRECTORY.lock().unwrap_or_else(|e| e.into_inner());
    let addr = ldap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: ldap}}]
load:
  users: [{{count: 1}}]
sessions:
  - name: s
    steps:
      - set: {{var: bad, value: "(uid=x"}}
      - ldap: {{bind: "uid=user1,ou=people,dc=headroom,dc=test", password: wrong, name: wrong}}
      - ldap: {{bind: "{ADMIN}", password: headroom}}
      - ldap: {{add: "uid=user1,ou=people,dc=headroom,dc=test", attrs: {{objectClass: [inetOrgPerson], cn: x, sn: y}}, name: exists}}
      - ldap: {{delete: "uid=nobody,ou=people,dc=headroom,dc=test", name: absent}}
      - ldap: {{search: "ou=people,dc=headroom,dc=test", filter: "${{bad}}", name: bad-filter}}
      - ldap: {{search: "uid=user7,ou=people,dc=headroom,dc=test", scope: base, name: one}}
      - ldap: unbind
      - think: 60s
"#
    );
    let f = run(&lasting(&yaml, 3));
    let v = &f.summary;
    let l = ldap_counters(v);
    assert_eq!(l.invalid_credentials, 1, "{l:#?}");
    assert_eq!(l.entry_already_exists, 1, "{l:#?}");
    assert_eq!(l.no_such_object, 1, "{l:#?}");
    for name in ["wrong", "exists", "absent"] {
        assert_eq!(by_request(v, name).errors, 1, "{name}: {}", show(v));
    }
    assert_eq!(v.errors.error_reply, 3, "{}", show(v));
    assert_eq!(by_request(v, "bad-filter").errors, 1, "{}", show(v));
    assert_eq!(v.errors.other, 1, "{}", show(v));
    assert_eq!(by_request(v, "one").count, 1, "{}", show(v));
    assert_eq!(l.entries, 1, "{l:#?}");
    // bind x2, add, delete, search, unbind: the bad filter was never sent.
    assert_eq!(l.requests, 6, "{l:#?}");
    assert_eq!(by_request(v, "ldap:unbind").count, 1, "{}", show(v));
}

/// A filter without variables that does not parse is refused when the run starts, naming it.
#[test]
fn a_literal_filter_that_does_not_parse_is_refused_at_start() {
    let yaml = "servers: [{host: 127.0.0.1, port: 1, protocol: ldap}]\n\
                load: {users: [{count: 1}]}\n\
                sessions: [{name: s, steps: [{ldap: {search: dc=x, filter: \"(cn=a\"}}]}]\n";
    let built = headroom_run::build(&lasting(yaml, 1)).expect("builds");
    let err = headroom_run::pipeline::execute(
        &built.plan,
        &built.thresholds,
        &mut headroom_run::pipeline::LocalEngine::now(),
        None,
        &mut [],
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        "test",
    )
    .err()
    .expect("refused before any connection");
    let msg = format!("{err:#}");
    assert!(msg.contains("ldap filter \"(cn=a\""), "{msg}");
}

/// LDAP over TLS from the first byte (slapd's ldaps:// listener, the test PKI's certificate
/// checked against its CA).
#[test]
fn ldaps() {
    // Its binds and searches would move the counters another test compares.
    let _dir = DIRECTORY.lock().unwrap_or_else(|e| e.into_inner());
    ldap(); // started by its script if it does not run
    let out =
        Command::new(headroom_testkit::servers::services::repo_root().join("scripts/slapd.sh"))
            .arg("ldaps-url")
            .output()
            .expect("scripts/slapd.sh ldaps-url");
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let addr = url
        .strip_prefix("ldaps://")
        .expect("ldaps:// URL")
        .trim_end_matches('/');
    let (host, port) = addr.rsplit_once(':').unwrap();
    let ca = std::path::PathBuf::from(
        std::env::var("HEADROOM_TEST_CA").unwrap_or_else(|_| "/tmp/headroom-pki/ca.pem".into()),
    );
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: ldap, tls: {{cacert: ca.pem}}}}]
load:
  users: [{{count: 3}}]
sessions:
  - name: s
    steps:
      - ldap: {{bind: "uid=user7,ou=people,dc=headroom,dc=test", password: pass7}}
      - ldap: {{search: "ou=people,dc=headroom,dc=test", filter: "(uid=user7)"}}
      - think: 60s
"#
    );
    let mut spec = scenario_with_files(&yaml, &[("ca.pem", &ca)]);
    spec.duration = secs(2);
    let f = run(&spec);
    let v = &f.summary;
    let l = ldap_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(l.success, 6, "{l:#?}");
    assert_eq!(l.entries, 3, "{l:#?}");
    assert_eq!(tls(v).handshakes, 3, "{}", show(v));
}

/// StartTLS on the plain port (`tls: {starttls: true}`): each connection asks for TLS with the
/// extended operation, checks slapd's certificate against the test CA, and binds and searches
/// over TLS. slapd completed exactly one Extended operation per connection, and the handshakes
/// are counted. (Its `security ssf` is not raised here, so the same binds also work in plain
/// text: the count of Extended operations is what shows StartTLS happened, the handshakes
/// that TLS did.)
#[test]
fn start_tls() {
    let _dir = DIRECTORY.lock().unwrap_or_else(|e| e.into_inner());
    let addr = ldap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let ca = std::path::PathBuf::from(
        std::env::var("HEADROOM_TEST_CA").unwrap_or_else(|_| "/tmp/headroom-pki/ca.pem".into()),
    );
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: ldap, tls: {{starttls: true, cacert: ca.pem}}}}]
load:
  users: [{{count: 5}}]
sessions:
  - name: s
    steps:
      - ldap: {{bind: "uid=user7,ou=people,dc=headroom,dc=test", password: pass7}}
      - ldap: {{search: "ou=people,dc=headroom,dc=test", filter: "(uid=user7)"}}
      - think: 60s
"#
    );
    let mut spec = scenario_with_files(&yaml, &[("ca.pem", &ca)]);
    spec.duration = secs(2);
    let before = completed(&addr);
    let f = run(&spec);
    let after = completed(&addr);
    let v = &f.summary;
    let l = ldap_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(l.success, 10, "{l:#?}");
    assert_eq!(l.entries, 5, "{l:#?}");
    assert_eq!(tls(v).handshakes, 5, "{}", show(v));
    assert_eq!(
        moved(&before, &after, "Extended"),
        5,
        "{before:?} -> {after:?}"
    );
    // Two readings: each bind and search of the run, and one of each of the first reading.
    assert_eq!(moved(&before, &after, "Bind"), 6, "{before:?} -> {after:?}");
}
