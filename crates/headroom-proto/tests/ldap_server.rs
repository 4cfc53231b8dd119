//! The LDAP client codec (`headroom_proto::ldap`) against a real server: the private OpenLDAP
//! of `scripts/slapd.sh`, whose URL is in `HEADROOM_LDAP_URL`
//! (`export HEADROOM_LDAP_URL=$(scripts/slapd.sh start)`; `scripts/test` does it). The script
//! loads `ou=people,dc=headroom,dc=test` with 1,000 inetOrgPerson entries `uid=user1..1000`
//! (cn "user N", userPassword "passN"), root DN `cn=admin,dc=headroom,dc=test` / `headroom`,
//! and turns on the monitor backend, whose `cn=Operations,cn=Monitor` counters show what the
//! server saw.
//!
//! The client here is test code: a blocking `TcpStream` on 127.0.0.1 driving the sans-I/O
//! codec as the engine's event loop will (a fixed read buffer, whatever arrived fed to the
//! decoder, requests matched to responses by message id). Every read has a timeout and every
//! loop a bound. The tests hold one lock while they talk to the server, so that the monitor
//! counters move only by what one test did.
//!
//! Run alone: `HEADROOM_LDAP_URL=$(scripts/slapd.sh start) cargo test --profile ci -p
//! headroom-proto --test ldap_server`.

use headroom_proto::ldap::{
    self, parse_entry, Decoder, LdapError, ModOp, Op, Response, ResultCode, Scope, Search,
    NOTICE_OF_DISCONNECTION_OID,
};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

// ---- allocation counting (per thread, so parallel tests do not disturb each other) ----

use headroom_testkit::thread_allocs as allocs;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

// ---- the server ----

const ADMIN: &str = "cn=admin,dc=headroom,dc=test";
const ADMIN_PASSWORD: &str = "headroom";
const PEOPLE: &str = "ou=people,dc=headroom,dc=test";
const USERS: u64 = 1000;
/// Bound on any one wait for the server.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One test at a time talks to the server (the monitor counters are the server's).
static SERVER: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    SERVER.lock().unwrap_or_else(|e| e.into_inner())
}

/// host:port of `HEADROOM_LDAP_URL`.
fn server() -> String {
    let url = match std::env::var("HEADROOM_LDAP_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "HEADROOM_LDAP_URL is not set: these tests need a real LDAP server. Run \
             `export HEADROOM_LDAP_URL=$(scripts/slapd.sh start)` (it installs Debian's slapd \
             and ldap-utils if missing, starts a private OpenLDAP on 127.0.0.1:25389 loaded \
             with ou=people,dc=headroom,dc=test and its 1,000 users, monitor backend on), then \
             run the tests again; scripts/test does both"
        ),
    };
    let addr = url
        .strip_prefix("ldap://")
        .expect("HEADROOM_LDAP_URL starts with ldap://")
        .trim_end_matches('/');
    assert!(
        addr.starts_with("127.0.0.1:"),
        "the tests only talk to 127.0.0.1, not {addr}"
    );
    addr.to_owned()
}

// ---- the blocking test client ----

/// A response, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Got {
    id: i32,
    op: Op,
    result: Option<ResultCode>,
    matched_dn: String,
    diagnostic: String,
    name: String,
    value: String,
    len: u64,
}

impl From<Response<'_>> for Got {
    fn from(r: Response<'_>) -> Got {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Got {
            id: r.id,
            op: r.op,
            result: r.result,
            matched_dn: s(r.matched_dn),
            diagnostic: s(r.diagnostic),
            name: s(r.name),
            value: s(r.value),
            len: r.len,
        }
    }
}

impl Got {
    fn code(&self) -> &'static str {
        self.result.map_or("-", ResultCode::name)
    }
}

/// What a request brought back: its entries (counted) and its final response.
#[derive(Debug)]
struct Done {
    entries: u64,
    entry_bytes: u64,
    last: Got,
}

struct Client {
    sock: TcpStream,
    dec: Decoder,
    out: Vec<u8>,
    /// The read buffer, fixed: the decoder keeps what it needs of a split message.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    next_id: i32,
}

impl Client {
    fn connect(addr: &str) -> Client {
        let sock = TcpStream::connect(addr).expect("connect to the LDAP server");
        sock.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        sock.set_nodelay(true).unwrap();
        Client {
            sock,
            dec: Decoder::new(),
            out: Vec::with_capacity(512),
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            start: 0,
            end: 0,
            next_id: 0,
        }
    }

    fn id(&mut self) -> i32 {
        self.next_id += 1;
        self.next_id
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            self.sock.write_all(&self.out).expect("send");
            self.out.clear();
        }
    }

    /// The next response, handed to `f` (it borrows the decoder or the read buffer).
    fn next_with<T>(&mut self, f: impl FnOnce(Response<'_>) -> T) -> Result<T, LdapError> {
        for _ in 0..1_000_000 {
            if self.start < self.end {
                let (n, r) = self.dec.decode(&self.buf[self.start..self.end])?;
                self.start += n;
                if let Some(r) = r {
                    return Ok(f(r));
                }
            }
            let n = match self.sock.read(&mut self.buf) {
                Ok(n) => n,
                Err(e) => panic!("reading from the server: {e}"),
            };
            if n == 0 {
                self.dec.eof()?;
                panic!("the server closed the connection between messages");
            }
            self.start = 0;
            self.end = n;
        }
        panic!("no response after 1,000,000 reads");
    }

    fn next(&mut self) -> Got {
        self.next_with(|r| Got::from(r)).expect("a valid response")
    }

    /// Sends one request (`encode` gets the message id) and reads up to its final response.
    fn call(&mut self, encode: impl FnOnce(&mut Vec<u8>, i32)) -> Done {
        let id = self.id();
        encode(&mut self.out, id);
        self.flush();
        let (mut entries, mut entry_bytes) = (0, 0);
        loop {
            let r = self.next();
            assert_eq!(r.id, id, "a response to another request: {r:?}");
            match r.op {
                Op::SearchEntry => {
                    entries += 1;
                    entry_bytes += r.len;
                }
                op if op.is_final() => {
                    return Done {
                        entries,
                        entry_bytes,
                        last: r,
                    }
                }
                _ => panic!("unexpected {r:?}"),
            }
        }
    }

    fn bind(&mut self, dn: &str, password: &str) -> Got {
        let d = self.call(|o, id| ldap::bind_simple(o, id, dn, password));
        assert_eq!(d.last.op, Op::BindResponse);
        d.last
    }

    fn search(&mut self, s: &Search<'_>) -> Done {
        let d = self.call(|o, id| ldap::search(o, id, s).expect("filter parses"));
        assert_eq!(d.last.op, Op::SearchDone, "{:?}", d.last);
        d
    }

    /// Sends an UnbindRequest and waits for the server to close the connection (so that the
    /// unbind has been processed when this returns).
    fn unbind(mut self) {
        let id = self.id();
        ldap::unbind(&mut self.out, id);
        self.flush();
        let mut buf = [0u8; 256];
        match self.sock.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("{n} bytes after an unbind: {:02x?}", &buf[..n]),
            Err(e) => panic!("waiting for the server to close after an unbind: {e}"),
        }
        assert_eq!(self.dec.eof(), Ok(()));
    }
}

fn admin(addr: &str) -> Client {
    let mut c = Client::connect(addr);
    let r = c.bind(ADMIN, ADMIN_PASSWORD);
    assert_eq!(r.code(), "success", "{r:?}");
    c
}

// ---- the server's own counters ----

/// (monitorOpInitiated, monitorOpCompleted) per operation (`Bind`, `Search`, ..., and
/// `Operations` for all of them), read from cn=Operations,cn=Monitor.
type Counters = BTreeMap<String, (u64, u64)>;

/// A connection bound as the root DN (the only DN the script lets read cn=Monitor), kept
/// open so that its own bind and unbind fall outside what it measures.
struct Monitor(Client);

impl Monitor {
    fn new(addr: &str) -> Monitor {
        let mut c = admin(addr);
        c.dec.keep_entries(true); // to read the counters' entries
        Monitor(c)
    }

    /// The counters. This search is itself counted: in `Search`'s (and `Operations`')
    /// initiated count of this reading, and in their completed count of the next one.
    fn read(&mut self) -> Counters {
        let c = &mut self.0;
        let id = c.id();
        let s = Search {
            base: "cn=Operations,cn=Monitor",
            scope: Scope::Sub,
            filter: "(objectClass=*)".into(),
            attrs: &["monitorOpInitiated", "monitorOpCompleted"],
            ..Search::default()
        };
        ldap::search(&mut c.out, id, &s).unwrap();
        c.flush();
        let mut counters = Counters::new();
        loop {
            let (op, row) = c
                .next_with(|r| {
                    let row = (r.op == Op::SearchEntry).then(|| {
                        let e = parse_entry(r.message).expect("a monitor entry");
                        let dn = String::from_utf8_lossy(e.dn).into_owned();
                        let name = dn
                            .strip_prefix("cn=")
                            .and_then(|d| d.split(',').next())
                            .unwrap_or_default()
                            .to_owned();
                        let num = |attr: &str| -> u64 {
                            let v = e.values(attr).next().expect(attr);
                            std::str::from_utf8(v).unwrap().parse().unwrap()
                        };
                        (name, (num("monitorOpInitiated"), num("monitorOpCompleted")))
                    });
                    ((r.op, r.result), row)
                })
                .expect("monitor search");
            match (op, row) {
                (_, Some((name, v))) => {
                    counters.insert(name, v);
                }
                ((Op::SearchDone, Some(ResultCode::SUCCESS)), None) => break,
                (other, None) => panic!("monitor search: {other:?}"),
            }
        }
        assert!(
            counters.contains_key("Operations") && counters.contains_key("Bind"),
            "{counters:?}"
        );
        counters
    }
}

/// after - before, per operation, leaving out those that did not move.
fn delta(before: &Counters, after: &Counters) -> BTreeMap<String, (u64, u64)> {
    after
        .iter()
        .map(|(k, a)| {
            let b = before.get(k).copied().unwrap_or_default();
            (k.clone(), (a.0 - b.0, a.1 - b.1))
        })
        .filter(|(_, d)| *d != (0, 0))
        .collect()
}

/// A DN under ou=people no other run uses (a failed run may leave its entry behind).
fn probe_dn() -> (String, String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let uid = format!("headroom-probe-{}-{nanos}", std::process::id());
    (format!("uid={uid},{PEOPLE}"), uid)
}

// ---- the tests ----

#[test]
fn operations_results_and_the_servers_counters_agree() {
    let addr = server();
    let _l = lock();
    let mut monitor = Monitor::new(&addr);
    let before = monitor.read();

    let mut c = Client::connect(&addr);
    // A wrong password: invalidCredentials (49); the connection stays usable.
    let r = c.bind("uid=user1,ou=people,dc=headroom,dc=test", "wrong");
    assert_eq!(
        (r.code(), r.result),
        ("invalidCredentials", Some(ResultCode(49)))
    );
    // The root DN.
    let r = c.bind(ADMIN, ADMIN_PASSWORD);
    assert_eq!(r.code(), "success");
    // A subtree search with a filter: the 1,000 users (no size limit on either side).
    let t = Instant::now();
    let d = c.search(&Search {
        base: PEOPLE,
        scope: Scope::Sub,
        filter: "(&(objectClass=inetOrgPerson)(uid=user*))".into(),
        attrs: &["cn", "mail"],
        ..Search::default()
    });
    let took = t.elapsed();
    assert_eq!((d.entries, d.last.code()), (USERS, "success"));
    println!(
        "search: {} entries, {} bytes of entries, {:.1} ms",
        d.entries,
        d.entry_bytes,
        took.as_secs_f64() * 1e3
    );
    // Add a new entry, then the same again: entryAlreadyExists (68).
    let (dn, uid) = probe_dn();
    let attrs: &[(&str, &[&str])] = &[
        ("objectClass", &["inetOrgPerson"]),
        ("uid", &[&uid]),
        ("cn", &["headroom probe"]),
        ("sn", &["probe"]),
        ("mail", &["probe@headroom.test"]),
    ];
    let d = c.call(|o, id| ldap::add(o, id, &dn, attrs));
    assert_eq!(
        (d.last.op, d.last.code()),
        (Op::AddResponse, "success"),
        "{:?}",
        d.last
    );
    let d = c.call(|o, id| ldap::add(o, id, &dn, attrs));
    assert_eq!(
        (d.last.op, d.last.code(), d.last.result),
        (Op::AddResponse, "entryAlreadyExists", Some(ResultCode(68)))
    );
    // Modify: replace the mail; a compare sees the new value.
    let changes: &[(ModOp, &str, &[&str])] = &[
        (ModOp::Replace, "mail", &["probe2@headroom.test"]),
        (ModOp::Add, "description", &["added by ldap_server.rs"]),
    ];
    let d = c.call(|o, id| ldap::modify(o, id, &dn, changes));
    assert_eq!(
        (d.last.op, d.last.code()),
        (Op::ModifyResponse, "success"),
        "{:?}",
        d.last
    );
    let d = c.call(|o, id| ldap::compare(o, id, &dn, "mail", "probe2@headroom.test"));
    assert_eq!(
        (d.last.op, d.last.code()),
        (Op::CompareResponse, "compareTrue")
    );
    // Delete, then again: noSuchObject (32), naming the closest entry that exists.
    let d = c.call(|o, id| ldap::delete(o, id, &dn));
    assert_eq!((d.last.op, d.last.code()), (Op::DeleteResponse, "success"));
    let d = c.call(|o, id| ldap::delete(o, id, &dn));
    assert_eq!(
        (d.last.op, d.last.code(), d.last.result),
        (Op::DeleteResponse, "noSuchObject", Some(ResultCode(32)))
    );
    assert_eq!(d.last.matched_dn, PEOPLE);
    // Abandon (of nothing outstanding: no answer), then Who am I?, which is answered.
    let id = c.id();
    ldap::abandon(&mut c.out, id, 999);
    let d = c.call(ldap::who_am_i);
    assert_eq!(
        (d.last.op, d.last.code(), d.last.value.as_str()),
        (
            Op::ExtendedResponse,
            "success",
            "dn:cn=admin,dc=headroom,dc=test"
        )
    );
    c.unbind();

    let after = monitor.read();
    let moved = delta(&before, &after);
    // Exactly this test's operations: 2 binds, 1 search (+1: the monitor's own reading,
    // initiated in `after`, and the `before` reading, completed since), 2 adds, 1 modify,
    // 1 compare, 2 deletes, 1 abandon, 1 extended, 1 unbind.
    let want: BTreeMap<String, (u64, u64)> = [
        ("Bind", 2),
        ("Search", 2),
        ("Add", 2),
        ("Modify", 1),
        ("Compare", 1),
        ("Delete", 2),
        ("Abandon", 1),
        ("Extended", 1),
        ("Unbind", 1),
        ("Operations", 2 + 2 + 2 + 1 + 1 + 2 + 1 + 1 + 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), (n, n)))
    .collect();
    assert_eq!(moved, want, "cn=Monitor operation counters moved by");
    println!("cn=Monitor moved by {moved:?}");
    // The reading is itself in flight: initiated = completed + 1 for Search.
    let (i, done) = after["Search"];
    assert_eq!(i, done + 1);
    monitor.0.unbind();
}

#[test]
fn searches_by_scope_filter_and_size_limit() {
    let addr = server();
    let _l = lock();
    let mut c = admin(&addr);
    let count = |c: &mut Client, base: &str, scope: Scope, filter: &str, size_limit: u32| {
        let d = c.search(&Search {
            base,
            scope,
            size_limit,
            filter: filter.into(),
            attrs: &["1.1"],
            ..Search::default()
        });
        (d.entries, d.last.code())
    };
    let users = "(&(objectClass=inetOrgPerson)(uid=user*))";
    // A client size limit: that many entries, then sizeLimitExceeded (4).
    assert_eq!(
        count(&mut c, PEOPLE, Scope::Sub, users, 10),
        (10, "sizeLimitExceeded")
    );
    // Scopes: one level under ou=people holds the users; base is the entry itself.
    assert_eq!(
        count(&mut c, PEOPLE, Scope::One, users, 0),
        (USERS, "success")
    );
    assert_eq!(count(&mut c, PEOPLE, Scope::Base, users, 0), (0, "success"));
    assert_eq!(
        count(
            &mut c,
            "uid=user5,ou=people,dc=headroom,dc=test",
            Scope::Base,
            "(objectClass=*)",
            0
        ),
        (1, "success")
    );
    // Filters: substrings, not, present, an escape, extensible match, or.
    let people = |c: &mut Client, f: &str| count(c, PEOPLE, Scope::Sub, f, 0);
    assert_eq!(
        people(&mut c, "(cn=user 1*)"),
        (1 + 10 + 100 + 1, "success")
    );
    assert_eq!(
        people(&mut c, "(&(uid=user*)(!(uid=user1*)))"),
        (888, "success")
    );
    assert_eq!(people(&mut c, "(&(uid=user*)(mail=*))"), (USERS, "success"));
    assert_eq!(people(&mut c, "(cn=user\\2042)"), (1, "success"));
    assert_eq!(
        people(&mut c, "(uid:caseExactMatch:=user7)"),
        (1, "success")
    );
    assert_eq!(
        people(&mut c, "(uid:caseExactMatch:=USER7)"),
        (0, "success")
    );
    assert_eq!(
        people(&mut c, "(|(uid=user1)(uid=user2)(uid=nobody))"),
        (2, "success")
    );
    // "user 99" and "user 990" to "user 999".
    assert_eq!(people(&mut c, "(cn=*er 99*)"), (11, "success"));
    // A base that does not exist.
    assert_eq!(
        count(
            &mut c,
            "ou=nowhere,dc=headroom,dc=test",
            Scope::Sub,
            users,
            0
        ),
        (0, "noSuchObject")
    );
    c.unbind();
}

#[test]
fn user_bind_who_am_i_and_starttls() {
    let addr = server();
    let _l = lock();
    let mut c = Client::connect(&addr);
    let r = c.bind("uid=user42,ou=people,dc=headroom,dc=test", "pass42");
    assert_eq!(r.code(), "success");
    let d = c.call(ldap::who_am_i);
    assert_eq!(d.last.value, "dn:uid=user42,ou=people,dc=headroom,dc=test");
    // An anonymous bind, then Who am I? says nobody.
    assert_eq!(c.bind("", "").code(), "success");
    assert_eq!(c.call(ldap::who_am_i).last.value, "");
    // StartTLS: success (OpenLDAP sends no responseName), and then the server waits for our
    // TLS ClientHello: nothing more comes in plain text.
    let d = c.call(ldap::start_tls);
    assert_eq!(
        (d.last.op, d.last.code(), d.last.name.as_str()),
        (Op::ExtendedResponse, "success", "")
    );
    assert_eq!(c.start, c.end, "bytes after the StartTLS response");
    c.sock
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b = [0u8; 16];
    match c.sock.read(&mut b) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("the server sent something after StartTLS: {other:?}"),
    }
    assert_eq!(c.dec.eof(), Ok(()));
}

#[test]
fn an_unknown_operation_gets_a_notice_of_disconnection() {
    let addr = server();
    let _l = lock();
    let mut c = admin(&addr);
    // A message with protocolOp [APPLICATION 26], which is no LDAP operation.
    c.out
        .extend_from_slice(&[0x30, 0x05, 0x02, 0x01, 0x09, 0x7a, 0x00]);
    c.flush();
    let r = c.next();
    assert_eq!(
        (r.id, r.op, r.code(), r.name.as_bytes()),
        (0, Op::Notice, "protocolError", NOTICE_OF_DISCONNECTION_OID)
    );
    assert!(!r.op.is_final());
    println!("notice: {:?}", r.diagnostic);
}

#[test]
fn pipelined_searches_are_matched_by_id() {
    let addr = server();
    let _l = lock();
    let mut c = admin(&addr);
    // 200 searches in one write; slapd works on them in parallel threads, so answers may
    // interleave: each id must get its own entry and its own done.
    let first = c.next_id + 1;
    let mut filter = String::new();
    for i in 0..200 {
        let id = c.id();
        filter.clear();
        filter.push_str(&format!("(uid=user{})", i + 1));
        let s = Search {
            base: PEOPLE,
            filter: filter.as_str().into(),
            attrs: &["cn"],
            ..Search::default()
        };
        ldap::search(&mut c.out, id, &s).unwrap();
    }
    c.flush();
    let mut entries = BTreeMap::new();
    let mut done = BTreeMap::new();
    let mut order = Vec::new();
    while done.len() < 200 {
        let r = c.next();
        assert!((first..first + 200).contains(&r.id), "{r:?}");
        match r.op {
            Op::SearchEntry => *entries.entry(r.id).or_insert(0) += 1,
            Op::SearchDone => {
                assert_eq!(r.code(), "success");
                assert!(done.insert(r.id, ()).is_none(), "two dones for {}", r.id);
                order.push(r.id);
            }
            _ => panic!("{r:?}"),
        }
    }
    assert!(entries.values().all(|&n| n == 1) && entries.len() == 200);
    let in_order = order.windows(2).filter(|w| w[0] < w[1]).count();
    println!("200 pipelined searches: {in_order} of 199 answered in order");
    c.unbind();
}

#[test]
fn live_searches_allocate_nothing() {
    use std::fmt::Write as _;
    let addr = server();
    let _l = lock();
    let mut c = admin(&addr);
    let mut filter = String::with_capacity(64);
    let mut run = |c: &mut Client, rounds: u32| {
        let mut entries = 0u64;
        for i in 0..rounds {
            filter.clear();
            write!(
                filter,
                "(&(objectClass=inetOrgPerson)(uid=user{}))",
                i % 1000 + 1
            )
            .unwrap();
            let id = c.id();
            let s = Search {
                base: PEOPLE,
                filter: filter.as_str().into(),
                attrs: &["cn", "mail"],
                ..Search::default()
            };
            ldap::search(&mut c.out, id, &s).unwrap();
            c.flush();
            loop {
                let (op, rid, code) = c.next_with(|r| (r.op, r.id, r.result)).unwrap();
                assert_eq!(rid, id);
                match op {
                    Op::SearchEntry => entries += 1,
                    Op::SearchDone => {
                        assert_eq!(code, Some(ResultCode::SUCCESS));
                        break;
                    }
                    _ => panic!("{op:?}"),
                }
            }
        }
        entries
    };
    run(&mut c, 100);
    let before = allocs();
    let t = Instant::now();
    let entries = run(&mut c, 1000);
    let took = t.elapsed();
    let spent = allocs() - before;
    assert_eq!(entries, 1000);
    assert_eq!(spent, 0, "allocations in 1,000 live searches");
    println!(
        "1,000 searches, one round trip each: {:.0} µs per search; size_of::<Decoder>() = {}",
        took.as_secs_f64() * 1e6 / 1000.0,
        std::mem::size_of::<Decoder>()
    );
    c.unbind();
}
