//! The XMPP codec against a real ejabberd (scripts/ejabberd.sh: 127.0.0.1:25222, domain
//! "localhost"), through a small blocking client written here. The server is started by the
//! first test if it does not run (which installs Debian's ejabberd when missing), and users
//! user1..user40 (password pass{N}) are registered through the script.
//!
//! Every read has a timeout and every loop a bound, so a misbehaving server fails a test instead
//! of hanging it. Each test uses its own users, so the tests can run in parallel.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use headroom_proto::xmpp::{
    self, child_text, find_element, text_len, Credentials, Event, Jid, Kind, Login, LoginConfig,
    LoginError, LoginStatus, Name, PresenceType, ReplyError, Splitter, Wait, WaitOutcome,
};

const DOMAIN: &str = "localhost";
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Most events one wait may skip over before the test gives up.
const MAX_EVENTS: usize = 200;

fn addr() -> SocketAddr {
    std::env::var("HEADROOM_XMPP_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:25222".into())
        .parse()
        .expect("HEADROOM_XMPP_ADDR must be HOST:PORT")
}

/// Starts the private ejabberd if needed and registers user1..user40, once per test binary.
fn server() -> SocketAddr {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let r = READY.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/ejabberd.sh");
        if TcpStream::connect_timeout(&addr(), Duration::from_secs(2)).is_err() {
            let out = Command::new("bash")
                .arg(script)
                .arg("start")
                .output()
                .map_err(|e| format!("cannot run {script}: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "scripts/ejabberd.sh start failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let t = Instant::now();
        let out = Command::new("bash")
            .args([script, "register", "1", "40"])
            .output()
            .map_err(|e| format!("cannot run {script}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/ejabberd.sh register 1 40 failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        eprintln!(
            "ejabberd ready; {} ({:.2} s)",
            String::from_utf8_lossy(&out.stderr).trim(),
            t.elapsed().as_secs_f64()
        );
        Ok(())
    });
    if let Err(e) = r {
        panic!(
            "{e}\nThe XMPP tests need a private ejabberd on {}: run `scripts/ejabberd.sh start` \
             (as root, or with sudo available: it installs Debian's ejabberd), or point \
             HEADROOM_XMPP_ADDR at one configured like it (see docs/xmpp.md).",
            addr()
        );
    }
    addr()
}

/// An owned copy of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Open {
        id: String,
    },
    Stanza {
        kind: Kind,
        typ: String,
        id: String,
        from: String,
        len: usize,
        bytes: Option<String>,
    },
    Close,
}

fn own(ev: &Event<'_>) -> Ev {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match ev {
        Event::StreamOpen(h) => Ev::Open { id: s(h.id) },
        Event::Stanza(st) => Ev::Stanza {
            kind: st.kind,
            typ: s(st.typ),
            id: s(st.id),
            from: s(st.from),
            len: st.len,
            bytes: st.bytes.map(s),
        },
        Event::StreamClose { .. } => Ev::Close,
    }
}

/// A blocking XMPP client: one socket, the splitter, unconsumed bytes, and everything the server
/// sent (for replaying it in chunks).
struct Client {
    sock: TcpStream,
    split: Splitter,
    out: Vec<u8>,
    pending: Vec<u8>,
    pos: usize,
    received: Vec<u8>,
    sent: Vec<u8>,
    jid: String,
    next_id: u64,
}

impl Client {
    fn connect() -> Client {
        let sock = TcpStream::connect_timeout(&server(), IO_TIMEOUT).expect("connect to ejabberd");
        sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        sock.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        sock.set_nodelay(true).unwrap();
        Client {
            sock,
            split: Splitter::new(),
            out: Vec::new(),
            pending: Vec::new(),
            pos: 0,
            received: Vec::new(),
            sent: Vec::new(),
            jid: String::new(),
            next_id: 1,
        }
    }

    fn send_out(&mut self) {
        if !self.out.is_empty() {
            self.sock.write_all(&self.out).expect("write");
            self.sent.extend_from_slice(&self.out);
            self.out.clear();
        }
    }

    /// Encodes with `f` and sends.
    fn send(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        self.out.clear();
        f(&mut self.out);
        self.send_out();
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The next event, reading as needed; `None` at end of file.
    fn next_event(&mut self) -> Option<Ev> {
        let mut buf = [0u8; 4096];
        loop {
            if self.pos < self.pending.len() {
                let (n, ev) = self
                    .split
                    .feed(&self.pending[self.pos..])
                    .expect("the splitter accepts ejabberd's stream");
                self.pos += n;
                if let Some(ev) = ev {
                    return Some(own(&ev));
                }
            }
            self.pending.clear();
            self.pos = 0;
            let n = match self.sock.read(&mut buf) {
                Ok(n) => n,
                Err(e) => panic!("read from ejabberd: {e} (waited {IO_TIMEOUT:?})"),
            };
            if n == 0 {
                return None;
            }
            self.received.extend_from_slice(&buf[..n]);
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Events until `pred` holds (bounded); returns the matching one and the ones skipped.
    fn wait_for(&mut self, what: &str, mut pred: impl FnMut(&Ev) -> bool) -> (Ev, Vec<Ev>) {
        let mut skipped = Vec::new();
        for _ in 0..MAX_EVENTS {
            let ev = self.next_event().unwrap_or_else(|| {
                panic!("connection closed while waiting for {what}; got {skipped:?}")
            });
            if pred(&ev) {
                return (ev, skipped);
            }
            skipped.push(ev);
        }
        panic!("no {what} within {MAX_EVENTS} events: {skipped:?}");
    }

    /// Waits for the reply to iq `id` through the codec's own [`Wait`].
    fn iq_reply(&mut self, id: u64) -> Result<Ev, ReplyError> {
        let wait = Wait::IqReply(id);
        for _ in 0..MAX_EVENTS {
            self.split.set_capture(true);
            let mut buf = [0u8; 4096];
            // Same loop as next_event, but checking the Event itself with Wait::check.
            loop {
                if self.pos < self.pending.len() {
                    let (n, ev) = self
                        .split
                        .feed(&self.pending[self.pos..])
                        .expect("splitter");
                    self.pos += n;
                    if let Some(ev) = ev {
                        match wait.check(&ev) {
                            WaitOutcome::Done => return Ok(own(&ev)),
                            WaitOutcome::Failed(e) => return Err(e),
                            WaitOutcome::Pending => break,
                        }
                    }
                    continue;
                }
                self.pending.clear();
                self.pos = 0;
                let n = self.sock.read(&mut buf).expect("read");
                assert!(n > 0, "closed while waiting for iq {id}");
                self.received.extend_from_slice(&buf[..n]);
                self.pending.extend_from_slice(&buf[..n]);
            }
        }
        panic!("no reply to iq {id} within {MAX_EVENTS} events");
    }

    /// Runs the login machine to the end.
    fn login(&mut self, cfg: &LoginConfig<'_>) -> Result<Duration, LoginError> {
        let t = Instant::now();
        let mut login = Login::new();
        login.start(cfg, &mut self.out)?;
        self.send_out();
        self.split.set_capture(true);
        let mut buf = [0u8; 4096];
        for _ in 0..MAX_EVENTS {
            if self.pos >= self.pending.len() {
                self.pending.clear();
                self.pos = 0;
                let n = self.sock.read(&mut buf).expect("read during login");
                if n == 0 {
                    return Err(LoginError::Closed);
                }
                self.received.extend_from_slice(&buf[..n]);
                self.pending.extend_from_slice(&buf[..n]);
            }
            let (n, ev) = self
                .split
                .feed(&self.pending[self.pos..])
                .expect("splitter during login");
            self.pos += n;
            let Some(ev) = ev else { continue };
            let status = login.on_event(cfg, &ev, &mut self.out)?;
            self.send_out();
            if status == LoginStatus::Ready {
                self.jid = String::from_utf8(login.jid().to_vec()).unwrap();
                return Ok(t.elapsed());
            }
        }
        panic!("login did not finish within {MAX_EVENTS} events");
    }

    /// Closes the stream cleanly: our close, the server's close, then end of file.
    fn close(mut self) {
        self.send(xmpp::stream_close);
        let _ = self.wait_for("the server's </stream:stream>", |e| *e == Ev::Close);
        let mut buf = [0u8; 256];
        let n = self.sock.read(&mut buf).expect("read after close");
        assert_eq!(
            n, 0,
            "the server closes the connection after its </stream:stream>"
        );
    }
}

/// The events in a captured byte stream.
fn events_of(bytes: &[u8]) -> Vec<Ev> {
    let mut sp = Splitter::new();
    sp.set_capture(true);
    let mut p = bytes;
    let mut v = Vec::new();
    while !p.is_empty() {
        let (n, ev) = sp.feed(p).expect("splitter");
        p = &p[n..];
        match ev {
            Some(ev) => v.push(own(&ev)),
            None => break,
        }
    }
    v
}

fn plain(n: u64) -> LoginConfig<'static> {
    LoginConfig {
        domain: DOMAIN,
        credentials: Credentials::Plain {
            user: Name::Indexed("user", n),
            password: Name::Indexed("pass", n),
        },
        resource: Some("headroom"),
        register: false,
    }
}

fn user(n: u64) -> Jid<'static> {
    Jid::user("user", n, DOMAIN)
}

fn logged_in(n: u64) -> Client {
    let mut c = Client::connect();
    c.login(&plain(n))
        .unwrap_or_else(|e| panic!("login of user{n}: {e}"));
    c
}

fn bytes_of(ev: &Ev) -> &[u8] {
    match ev {
        Ev::Stanza { bytes: Some(b), .. } => b.as_bytes(),
        _ => panic!("no captured bytes in {ev:?}"),
    }
}

fn is_stanza(ev: &Ev, k: Kind, t: &str, from_prefix: &str) -> bool {
    matches!(ev, Ev::Stanza { kind, typ, from, .. } if *kind == k && typ == t && from.starts_with(from_prefix))
}

#[test]
fn plain_login_of_user1_and_user2() {
    for n in [1, 2] {
        let mut c = Client::connect();
        let took = c.login(&plain(n)).unwrap();
        assert_eq!(c.jid, format!("user{n}@localhost/headroom"));
        eprintln!(
            "user{n}: PLAIN login in {:.1} ms, {} bytes sent, {} received",
            took.as_secs_f64() * 1e3,
            c.sent.len(),
            c.received.len()
        );
        c.close();
    }
    // A wrong password is an "auth" failure.
    let mut c = Client::connect();
    let bad = LoginConfig {
        credentials: Credentials::Plain {
            user: Name::Indexed("user", 1),
            password: Name::Str("wrong"),
        },
        ..plain(1)
    };
    let e = c.login(&bad).unwrap_err();
    assert_eq!((e, e.kind()), (LoginError::Auth, "auth"));
}

#[test]
fn anonymous_login() {
    let mut c = Client::connect();
    let cfg = LoginConfig {
        credentials: Credentials::Anonymous,
        resource: None,
        ..plain(0)
    };
    c.login(&cfg).unwrap();
    let (local, rest) = c.jid.split_once('@').expect("a full JID");
    assert!(
        !local.is_empty() && rest.starts_with("localhost/"),
        "{}",
        c.jid
    );
    eprintln!("anonymous JID: {}", c.jid);
    c.close();
}

#[test]
fn in_band_registration_of_a_new_user() {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("hrreg{}x{stamp}", std::process::id());
    let cfg = LoginConfig {
        credentials: Credentials::Plain {
            user: Name::Str(&name),
            password: Name::Str("secret&<'"),
        },
        register: true,
        ..plain(0)
    };
    let mut c = Client::connect();
    c.login(&cfg).unwrap();
    let sent = String::from_utf8_lossy(&c.sent).into_owned();
    assert!(
        sent.contains("<query xmlns='jabber:iq:register'>"),
        "{sent}"
    );
    let evs = events_of(&c.received);
    assert!(
        evs.iter().any(|e| matches!(e, Ev::Stanza { kind: Kind::Iq, typ, id, .. } if typ == "result" && id == xmpp::REGISTER_ID)),
        "a registration result: {evs:?}"
    );
    assert_eq!(c.jid, format!("{name}@localhost/headroom"));
    c.close();
    // The account exists: a plain login works, and registering again is a conflict, taken as done.
    let mut c = Client::connect();
    c.login(&LoginConfig {
        register: false,
        ..cfg
    })
    .unwrap();
    c.close();
    let mut c = Client::connect();
    c.login(&cfg).unwrap();
    assert!(
        String::from_utf8_lossy(&c.received).contains("<conflict"),
        "second registration conflicts"
    );
    c.close();
}

/// The roster items of a roster result or push, as (jid, name, group) triples.
fn roster_items(xml: &[u8]) -> Vec<(String, String, String)> {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    xmpp::elements(xml, "item")
        .map(|e| {
            let tag = &xml[e.start_tag.clone()];
            let attr = |name: &str| {
                let pat = format!(" {name}='");
                let t = s(tag);
                t.find(&pat)
                    .map(|p| {
                        t[p + pat.len()..]
                            .split('\'')
                            .next()
                            .unwrap_or("")
                            .to_string()
                    })
                    .unwrap_or_default()
            };
            let group = e
                .content
                .and_then(|r| child_text(&xml[r], "group").map(s))
                .unwrap_or_default();
            (attr("jid"), attr("name"), group)
        })
        .collect()
}

#[test]
fn roster_get_add_rename_delete() {
    let mut c = logged_in(3);
    let contact = user(4);
    // Start clean (an earlier failed run may have left the item).
    let id = c.id();
    c.send(|o| xmpp::roster_remove(o, id, contact));
    let _ = c.iq_reply(id);
    let get = |c: &mut Client| {
        let id = c.id();
        c.send(|o| xmpp::roster_get(o, id));
        let ev = c.iq_reply(id).expect("roster result");
        roster_items(bytes_of(&ev))
    };
    assert!(!get(&mut c).iter().any(|i| i.0 == "user4@localhost"));

    let id = c.id();
    c.send(|o| xmpp::roster_add(o, id, contact, Some("user4@localhost"), Some("Tsung Group")));
    c.iq_reply(id).expect("roster add acknowledged");
    let items = get(&mut c);
    assert!(
        items.contains(&(
            "user4@localhost".into(),
            "user4@localhost".into(),
            "Tsung Group".into()
        )),
        "{items:?}"
    );

    let id = c.id();
    c.send(|o| xmpp::roster_rename(o, id, contact, "Tsung Testuser", Some("Tsung Group")));
    c.iq_reply(id).expect("rename acknowledged");
    let items = get(&mut c);
    assert!(
        items.contains(&(
            "user4@localhost".into(),
            "Tsung Testuser".into(),
            "Tsung Group".into()
        )),
        "{items:?}"
    );

    let id = c.id();
    c.send(|o| xmpp::roster_remove(o, id, contact));
    c.iq_reply(id).expect("remove acknowledged");
    assert!(!get(&mut c).iter().any(|i| i.0 == "user4@localhost"));

    // An iq the server refuses is an error reply, through the same Wait.
    let id = c.id();
    c.send(|o| {
        o.extend_from_slice(b"<iq type='get' id='");
        xmpp::encode::push_u64(o, id);
        o.extend_from_slice(b"'><query xmlns='jabber:iq:nosuch'/></iq>");
    });
    assert_eq!(c.iq_reply(id), Err(ReplyError::ErrorReply));
    c.close();
}

#[test]
fn initial_presence_is_seen_by_a_subscribed_contact() {
    // user6 is watched, user7 watches.
    let mut a = logged_in(6);
    let mut b = logged_in(7);
    for (c, other) in [(&mut a, user(7)), (&mut b, user(6))] {
        let id = c.id();
        c.send(|o| xmpp::roster_remove(o, id, other));
        let _ = c.iq_reply(id);
    }
    a.send(xmpp::presence_initial);
    b.send(xmpp::presence_initial);
    // user7 asks to see user6's presence; user6 gets the request and approves it.
    b.send(|o| xmpp::presence_typed(o, user(6), PresenceType::Subscribe));
    a.split.set_capture(true);
    a.wait_for("user7's subscribe", |e| {
        is_stanza(e, Kind::Presence, "subscribe", "user7@localhost")
    });
    a.send(|o| xmpp::presence_typed(o, user(7), PresenceType::Subscribed));
    b.wait_for("user6's available presence after approval", |e| {
        is_stanza(e, Kind::Presence, "", "user6@localhost/headroom")
    });
    // user6 leaves and comes back: user7 sees it go and come, from the initial presence alone.
    a.close();
    b.wait_for("user6's unavailable presence", |e| {
        is_stanza(e, Kind::Presence, "unavailable", "user6@localhost/headroom")
    });
    let mut a = Client::connect();
    a.login(&LoginConfig {
        resource: Some("second"),
        ..plain(6)
    })
    .unwrap();
    let t = Instant::now();
    a.send(xmpp::presence_initial);
    let (ev, skipped) = b.wait_for("user6's initial presence", |e| {
        is_stanza(e, Kind::Presence, "", "user6@localhost/second")
    });
    eprintln!(
        "initial presence of user6 seen by user7 after {:.1} ms ({ev:?}, {} other events)",
        t.elapsed().as_secs_f64() * 1e3,
        skipped.len()
    );
    a.close();
    b.close();
}

#[test]
fn chat_message_of_100_bytes_is_received_exactly() {
    let mut a = logged_in(8);
    let mut b = logged_in(9);
    b.send(xmpp::presence_initial);
    b.wait_for("own presence echo", |e| {
        is_stanza(e, Kind::Presence, "", "user9@localhost")
    });
    b.split.set_capture(true);
    let id = 1_000_000 + u64::from(std::process::id());
    let mut out = Vec::new();
    xmpp::chat(&mut out, id, user(9), 100);
    let t = Instant::now();
    a.send(|o| o.extend_from_slice(&out));
    let (ev, _) = b.wait_for(
        "user8's chat",
        |e| matches!(e, Ev::Stanza { kind: Kind::Message, id: i, .. } if *i == id.to_string()),
    );
    let latency = t.elapsed();
    let Ev::Stanza { typ, from, len, .. } = &ev else {
        unreachable!()
    };
    assert_eq!(
        (typ.as_str(), from.as_str()),
        ("chat", "user8@localhost/headroom")
    );
    let body = child_text(bytes_of(&ev), "body").expect("a body");
    assert_eq!(body.len(), 100, "body bytes on the wire");
    assert_eq!(text_len(body), 100, "body characters once parsed");
    assert_eq!(body, &[&xmpp::FILLER[..], &xmpp::FILLER[..36]].concat()[..]);
    eprintln!("chat: sent {} bytes, user9 received a {len}-byte stanza with a 100-byte body after {:.2} ms", out.len(), latency.as_secs_f64() * 1e3);
    a.close();
    b.close();
}

#[test]
fn message_to_an_offline_user_is_delivered_at_next_login() {
    // user10 is offline (no other test logs it in); user11 writes to it.
    let mut a = logged_in(11);
    let id = 2_000_000 + u64::from(std::process::id());
    a.send(|o| xmpp::chat_text(o, id, user(10), "stored & forwarded"));
    a.close(); // the server processed the message before answering the close
    let mut b = logged_in(10);
    b.split.set_capture(true);
    b.send(xmpp::presence_initial); // offline messages come after initial presence
    let (ev, skipped) = b.wait_for(
        "the stored message",
        |e| matches!(e, Ev::Stanza { kind: Kind::Message, id: i, .. } if *i == id.to_string()),
    );
    let bytes = bytes_of(&ev);
    assert_eq!(
        child_text(bytes, "body"),
        Some(&b"stored &amp; forwarded"[..])
    );
    let delay =
        find_element(bytes, "delay").expect("a delay element (XEP-0203) on a stored message");
    assert!(String::from_utf8_lossy(&bytes[delay.start_tag]).contains("urn:xmpp:delay"));
    eprintln!(
        "offline message delivered at next login ({} events before it)",
        skipped.len()
    );
    b.close();
}

#[test]
fn stream_close_is_clean() {
    let mut c = logged_in(12);
    c.send(xmpp::stream_close);
    let wait = Wait::for_request(xmpp::Ack::Global, xmpp::RequestKind::Close);
    let ev = c.next_event().expect("the server's close");
    assert_eq!(ev, Ev::Close);
    assert_eq!(wait, Wait::StreamClose);
    assert!(c.split.closed() && !c.split.in_progress());
    let mut buf = [0u8; 64];
    assert_eq!(c.sock.read(&mut buf).unwrap(), 0, "EOF after the close");
}

/// Replays what a live login received, cut at every point and a byte at a time, through a fresh
/// splitter and login machine: they must send the same bytes and end with the same JID.
#[test]
fn captured_live_login_replayed_in_every_chunking() {
    let mut c = Client::connect();
    c.login(&plain(13)).unwrap();
    let id = c.id();
    c.send(|o| xmpp::roster_get(o, id));
    c.iq_reply(id).unwrap();
    let (received, sent, jid) = (c.received.clone(), c.sent.clone(), c.jid.clone());
    c.close();
    eprintln!(
        "captured login of user13: {} bytes received, {} sent",
        received.len(),
        sent.len()
    );

    let replay = |chunks: &mut dyn Iterator<Item = &[u8]>| -> (Vec<u8>, Vec<u8>, usize) {
        let cfg = plain(13);
        let mut sp = Splitter::new();
        sp.set_capture(true);
        let mut login = Login::new();
        let mut out = Vec::new();
        login.start(&cfg, &mut out).unwrap();
        let mut after = 0;
        for chunk in chunks {
            let mut p = chunk;
            while !p.is_empty() {
                let (n, ev) = sp.feed(p).unwrap();
                p = &p[n..];
                let Some(ev) = ev else { break };
                if login.in_progress() {
                    login.on_event(&cfg, &ev, &mut out).unwrap();
                } else {
                    after += 1;
                }
            }
        }
        (out, login.jid().to_vec(), after)
    };
    let whole = replay(&mut std::iter::once(&received[..]));
    // The client sent the login's bytes, then the roster get.
    assert!(
        sent.starts_with(&whole.0),
        "the replayed login sends what the live one sent"
    );
    assert_eq!(whole.1, jid.as_bytes());
    assert_eq!(whole.2, 1, "one event after login: the roster result");
    for cut in 0..=received.len() {
        let got = replay(&mut [&received[..cut], &received[cut..]].into_iter());
        assert_eq!(got, whole, "split at {cut}");
    }
    assert_eq!(replay(&mut received.chunks(1)), whole, "byte at a time");
}
