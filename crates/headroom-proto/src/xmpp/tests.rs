//! Unit tests: the splitter on a login exchange captured from ejabberd 23.01 (every split point,
//! byte at a time, random partitions), XML corner cases, limits, the login machine, encoders,
//! waits and destinations.

use super::*;
use crate::test_rng::Rng;

/// What ejabberd 23.01 sent to user4 (captured with scripts/ejabberd.sh, 2026-11): login, an
/// offline chat message with a delay element and escaped body, initial presence echo, an iq error,
/// and the stream close.
const SERVER: &[&str] = &[
    "<?xml version='1.0'?><stream:stream id='10315939384604568099' version='1.0' xml:lang='en' xmlns:stream='http://etherx.jabber.org/streams' from='localhost' xmlns='jabber:client'>",
    "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>ANONYMOUS</mechanism><mechanism>DIGEST-MD5</mechanism><mechanism>PLAIN</mechanism><mechanism>SCRAM-SHA-512</mechanism><mechanism>SCRAM-SHA-256</mechanism><mechanism>SCRAM-SHA-1</mechanism><mechanism>X-OAUTH2</mechanism></mechanisms><register xmlns='http://jabber.org/features/iq-register'/></stream:features>",
    "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>",
    "<?xml version='1.0'?><stream:stream id='3797438892656649627' version='1.0' xml:lang='en' xmlns:stream='http://etherx.jabber.org/streams' from='localhost' xmlns='jabber:client'>",
    "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><session xmlns='urn:ietf:params:xml:ns:xmpp-session'><optional/></session></stream:features>",
    "<iq type='result' id='bind1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>user4@localhost/headroom</jid></bind></iq>",
    "<message xml:lang='en' to='user4@localhost' from='user3@localhost/headroom' type='chat' id='5'><delay from='localhost' stamp='2026-11-22T16:00:23.351902Z' xmlns='urn:xmpp:delay'>Offline storage</delay><body>a &amp; b &lt;c&gt; &apos;q&apos; &quot;d&quot; ]]&gt;</body></message>",
    "<presence xml:lang='en' to='user4@localhost/headroom' from='user4@localhost/headroom'/>",
    "<iq xml:lang='en' to='user4@localhost/headroom' from='user4@localhost' type='error' id='9'><query xmlns='jabber:iq:nosuch'/><error type='cancel'><service-unavailable xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/><text xml:lang='en' xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'>No module is handling this query</text></error></iq>",
    "</stream:stream>",
];

/// What our client sent in that exchange, up to the end of the login.
const CLIENT_LOGIN: &str = concat!(
    "<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>",
    "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>AHVzZXI0AHBhc3M0</auth>",
    "<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>",
    "<iq type='set' id='bind1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>headroom</resource></bind></iq>",
);

fn server_bytes() -> Vec<u8> {
    SERVER.concat().into_bytes()
}

/// An owned copy of an event, for comparing runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Open {
        id: String,
        from: String,
        version: String,
        len: usize,
    },
    Stanza {
        kind: Kind,
        name: String,
        typ: String,
        id: String,
        from: String,
        to: String,
        len: usize,
        bytes: Option<String>,
    },
    Close {
        len: usize,
    },
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn own(ev: &Event<'_>) -> Ev {
    match ev {
        Event::StreamOpen(h) => Ev::Open {
            id: s(h.id),
            from: s(h.from),
            version: s(h.version),
            len: h.len,
        },
        Event::Stanza(st) => Ev::Stanza {
            kind: st.kind,
            name: s(st.name),
            typ: s(st.typ),
            id: s(st.id),
            from: s(st.from),
            to: s(st.to),
            len: st.len,
            bytes: st.bytes.map(s),
        },
        Event::StreamClose { len } => Ev::Close { len: *len },
    }
}

/// Feeds `chunks` in order, checking the `feed` contract; returns the events and the ending.
fn run<'a>(
    sp: &mut Splitter,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<Ev>, Result<(), SplitError>) {
    let mut evs = Vec::new();
    for chunk in chunks {
        let mut p = chunk;
        loop {
            match sp.feed(p) {
                Err(e) => return (evs, Err(e)),
                Ok((n, None)) => {
                    assert_eq!(n, p.len(), "no event: everything consumed");
                    break;
                }
                Ok((n, Some(ev))) => {
                    assert!(
                        n >= 1 && n <= p.len(),
                        "event after {n} of {} bytes",
                        p.len()
                    );
                    evs.push(own(&ev));
                    p = &p[n..];
                    if p.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    (evs, Ok(()))
}

fn one_shot(data: &[u8], capture: bool) -> (Vec<Ev>, Result<(), SplitError>) {
    let mut sp = Splitter::new();
    sp.set_capture(capture);
    run(&mut sp, [data])
}

fn random_partition<'a>(data: &'a [u8], rng: &mut Rng, max_piece: usize) -> Vec<&'a [u8]> {
    let mut v = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let k = rng.below(max_piece + 1).min(rest.len()); // 0-length pieces too
        let (a, b) = rest.split_at(k);
        v.push(a);
        rest = b;
    }
    v
}

#[test]
fn captured_exchange_one_shot() {
    let data = server_bytes();
    let (evs, end) = one_shot(&data, true);
    end.unwrap();
    assert_eq!(evs.len(), 10);
    let Ev::Open {
        id,
        from,
        version,
        len,
    } = &evs[0]
    else {
        panic!("{evs:?}")
    };
    assert_eq!(
        (id.as_str(), from.as_str(), version.as_str()),
        ("10315939384604568099", "localhost", "1.0")
    );
    // The header's length excludes the XML declaration.
    assert_eq!(*len, SERVER[0].len() - "<?xml version='1.0'?>".len());
    let kinds: Vec<Kind> = evs
        .iter()
        .filter_map(|e| match e {
            Ev::Stanza { kind, .. } => Some(*kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            Kind::Features,
            Kind::Success,
            Kind::Features,
            Kind::Iq,
            Kind::Message,
            Kind::Presence,
            Kind::Iq
        ]
    );
    // Every stanza's length and captured bytes are exactly its text.
    for (ev, text) in evs.iter().zip(SERVER) {
        match ev {
            Ev::Stanza { len, bytes, .. } => {
                assert_eq!(*len, text.len());
                assert_eq!(bytes.as_deref(), Some(*text));
            }
            Ev::Close { len } => assert_eq!(*len, text.len()),
            Ev::Open { .. } => {}
        }
    }
    let Ev::Stanza {
        name,
        typ,
        id,
        from,
        to,
        ..
    } = &evs[6]
    else {
        panic!()
    };
    assert_eq!(
        (
            name.as_str(),
            typ.as_str(),
            id.as_str(),
            from.as_str(),
            to.as_str()
        ),
        (
            "message",
            "chat",
            "5",
            "user3@localhost/headroom",
            "user4@localhost"
        )
    );
    let Ev::Stanza { name, .. } = &evs[1] else {
        panic!()
    };
    assert_eq!(name, "stream:features");
    assert_eq!(evs[9], Ev::Close { len: 16 });
}

#[test]
fn captured_exchange_every_split_point() {
    let data = server_bytes();
    for capture in [false, true] {
        let want = one_shot(&data, capture);
        for cut in 0..=data.len() {
            let mut sp = Splitter::new();
            sp.set_capture(capture);
            let got = run(&mut sp, [&data[..cut], &data[cut..]]);
            assert_eq!(got, want, "split at {cut}, capture {capture}");
        }
    }
}

#[test]
fn captured_exchange_byte_at_a_time_and_random_partitions() {
    let data = server_bytes();
    let want = one_shot(&data, true);
    let mut sp = Splitter::new();
    sp.set_capture(true);
    assert_eq!(run(&mut sp, data.chunks(1)), want, "one byte at a time");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..2000 {
        let max_piece = [1, 2, 3, 7, 16, 100, 700][round % 7];
        let parts = random_partition(&data, &mut rng, max_piece);
        let mut sp = Splitter::new();
        sp.set_capture(true);
        sp.reset(); // reset keeps settings
        assert_eq!(run(&mut sp, parts.iter().copied()), want, "round {round}");
    }
}

/// Drives the login over the captured stream cut into `chunks`; returns what the client sent,
/// the login's end state and the events that came after it.
fn drive_login<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> (String, Login, Vec<Ev>) {
    let cfg = LoginConfig {
        domain: "localhost",
        credentials: Credentials::Plain {
            user: Name::Indexed("user", 4),
            password: Name::Indexed("pass", 4),
        },
        resource: Some("headroom"),
        register: false,
    };
    let mut sp = Splitter::new();
    let mut login = Login::new();
    let mut sent = Vec::new();
    login.start(&cfg, &mut sent).unwrap();
    sp.set_capture(true);
    let mut after = Vec::new();
    for chunk in chunks {
        let mut p = chunk;
        while !p.is_empty() {
            let (n, ev) = sp.feed(p).unwrap();
            p = &p[n..];
            let Some(ev) = ev else { break };
            if login.in_progress() {
                if login.on_event(&cfg, &ev, &mut sent).unwrap() == LoginStatus::Ready {
                    sp.set_capture(false);
                }
            } else {
                after.push(own(&ev));
            }
        }
    }
    (String::from_utf8(sent).unwrap(), login, after)
}

#[test]
fn login_over_captured_exchange_at_every_split_point() {
    let data = server_bytes();
    let (sent, login, after) = drive_login([&data[..]]);
    assert_eq!(sent, CLIENT_LOGIN);
    assert_eq!(login.phase(), Phase::Ready);
    assert_eq!(login.jid(), b"user4@localhost/headroom");
    assert!(
        !login.session_required(),
        "ejabberd marks session <optional/>"
    );
    assert_eq!(after.len(), 4, "{after:?}");
    assert!(
        matches!(
            &after[0],
            Ev::Stanza {
                kind: Kind::Message,
                bytes: None,
                ..
            }
        ),
        "capture off after login"
    );
    for cut in 0..=data.len() {
        let got = drive_login([&data[..cut], &data[cut..]]);
        assert_eq!(got.0, sent, "split at {cut}");
        assert_eq!(got.1.jid(), login.jid());
        assert_eq!(got.2, after, "split at {cut}");
    }
    let got = drive_login(data.chunks(1));
    assert_eq!((got.0, got.2), (sent, after));
}

#[test]
fn xml_corner_cases() {
    let data = concat!(
        "<?xml version='1.0' encoding='UTF-8'?>\n<!-- a comment with <tags> and -- dashes -->",
        "<stream:stream xmlns:stream='http://etherx.jabber.org/streams' id=\"a>b/c\" from='x'>",
        " \n\t ", // keep-alive
        "<message to='a/b>c' from=\"d'e\" type = 'chat' id='1'><body><![CDATA[</message> <x/> ]] ]>]]></body><!-- </message> --><?pi </message>?><x:y xmlns:x='u'/><empty/></message>",
        "   ",
        "<iq id='7' type='result'/>",
        "<presence\n  type='unavailable'\n/>",
        "<stream:error><conflict xmlns='urn:ietf:params:xml:ns:xmpp-streams'/><text>gone</text></stream:error>",
        "</stream:stream   >",
        "  \n",
    )
    .as_bytes();
    let (evs, end) = one_shot(data, true);
    end.unwrap();
    assert_eq!(evs.len(), 6, "{evs:?}");
    let Ev::Open { id, from, .. } = &evs[0] else {
        panic!()
    };
    assert_eq!((id.as_str(), from.as_str()), ("a>b/c", "x"));
    let Ev::Stanza {
        kind,
        to,
        from,
        typ,
        id,
        bytes,
        ..
    } = &evs[1]
    else {
        panic!()
    };
    assert_eq!(*kind, Kind::Message);
    assert_eq!(
        (to.as_str(), from.as_str(), typ.as_str(), id.as_str()),
        ("a/b>c", "d'e", "chat", "1")
    );
    let bytes = bytes.as_deref().unwrap();
    assert!(bytes.starts_with("<message ") && bytes.ends_with("<empty/></message>"));
    assert_eq!(
        child_text(bytes.as_bytes(), "body"),
        Some(&b"<![CDATA[</message> <x/> ]] ]>]]>"[..])
    );
    assert!(
        matches!(&evs[2], Ev::Stanza { kind: Kind::Iq, id, typ, .. } if id == "7" && typ == "result")
    );
    assert!(
        matches!(&evs[3], Ev::Stanza { kind: Kind::Presence, typ, .. } if typ == "unavailable")
    );
    let Ev::Stanza {
        kind: Kind::StreamError,
        bytes,
        ..
    } = &evs[4]
    else {
        panic!("{:?}", evs[4])
    };
    assert_eq!(
        error_condition(bytes.as_deref().unwrap().as_bytes()),
        Some(&b"conflict"[..])
    );
    assert_eq!(
        evs[5],
        Ev::Close {
            len: "</stream:stream   >".len()
        }
    );
    // Chunking changes nothing.
    let mut sp = Splitter::new();
    sp.set_capture(true);
    assert_eq!(run(&mut sp, data.chunks(1)), (evs.clone(), Ok(())));
    for cut in 0..=data.len() {
        let mut sp = Splitter::new();
        sp.set_capture(true);
        assert_eq!(
            run(&mut sp, [&data[..cut], &data[cut..]]),
            (evs.clone(), Ok(())),
            "split at {cut}"
        );
    }
}

#[test]
fn stream_restart_without_declaration_and_unprefixed_names() {
    let data = b"<stream:stream id='1'><success/><stream:stream id='2'><features/></stream:stream>";
    let (evs, end) = one_shot(data, false);
    end.unwrap();
    let ids: Vec<_> = evs
        .iter()
        .map(|e| match e {
            Ev::Open { id, .. } => format!("open {id}"),
            Ev::Stanza { kind, .. } => format!("{kind:?}"),
            Ev::Close { .. } => "close".into(),
        })
        .collect();
    assert_eq!(ids, ["open 1", "Success", "open 2", "Features", "close"]);
}

#[test]
fn errors() {
    let cases: &[(&str, SplitError)] = &[
        ("<message/>", SplitError::NotAStream),
        ("hello", SplitError::NotAStream),
        ("<stream:stream>text at stream level", SplitError::BadXml),
        ("<stream:stream><a></b>", SplitError::BadXml),
        ("<stream:stream><a></ab>", SplitError::BadXml),
        ("<stream:stream><ab></a>", SplitError::BadXml),
        ("<stream:stream><a x></a>", SplitError::BadXml),
        ("<stream:stream><a x='1'y='2'/></a>", SplitError::BadXml), // lenient on the space, then </a> at stream level
        ("<stream:stream><a x='<'/>", SplitError::BadXml),
        ("<stream:stream><a/ >", SplitError::BadXml),
        ("<stream:stream><!DOCTYPE x>", SplitError::BadXml),
        ("<stream:stream><![CDATA[x]]>", SplitError::BadXml),
        ("<stream:stream><a><!-x --></a>", SplitError::BadXml),
        ("<stream:stream><a><![CDAT x]]></a>", SplitError::BadXml),
        ("<stream:stream></>", SplitError::BadXml),
        ("<stream:stream></a>", SplitError::BadXml),
        ("<stream:stream/>", SplitError::BadXml),
        ("<stream:stream>< a/>", SplitError::BadXml),
        ("</stream:stream>", SplitError::NotAStream),
        (
            "<stream:stream></stream:stream> <a/>",
            SplitError::AfterClose,
        ),
        ("<stream:stream></stream:stream>x", SplitError::AfterClose),
    ];
    for (text, want) in cases {
        let (_, end) = one_shot(text.as_bytes(), true);
        assert_eq!(end, Err(*want), "{text}");
        // Split byte by byte: the same error.
        let mut sp = Splitter::new();
        let (_, end) = run(&mut sp, text.as_bytes().chunks(1));
        assert_eq!(end, Err(*want), "{text}, byte at a time");
        // And it sticks.
        assert_eq!(sp.feed(b"<a/>").map(|(n, _)| n), Err(*want));
    }
    // Lenient: no space needed between attributes.
    let (evs, end) = one_shot(b"<stream:stream><a x='1'y='2'/>", false);
    end.unwrap();
    assert_eq!(evs.len(), 2);
}

#[test]
fn limits() {
    // A stanza of exactly the limit passes; one byte more fails, whatever the chunking.
    let max = 64;
    let head = b"<stream:stream>";
    let ok = format!("<m>{}</m>", "x".repeat(max - 7));
    assert_eq!(ok.len(), max);
    let big = format!("<m>{}</m>", "x".repeat(max - 6));
    for (stanza, good) in [(ok.as_bytes(), true), (big.as_bytes(), false)] {
        let data = [&head[..], stanza].concat();
        for cut in 0..=data.len() {
            let mut sp = Splitter::with_max_stanza(max);
            sp.set_capture(true);
            let (evs, end) = run(&mut sp, [&data[..cut], &data[cut..]]);
            if good {
                assert_eq!((evs.len(), end), (2, Ok(())));
            } else {
                assert_eq!(
                    (evs.len(), end),
                    (1, Err(SplitError::TooLarge)),
                    "cut {cut}"
                );
            }
        }
    }
    // Comments, attribute values and CDATA count too.
    for inner in [
        "<!--xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-->",
        "<m a='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'/>",
        "<m><![CDATA[xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx]]></m>",
    ] {
        let data = [&head[..], inner.as_bytes()].concat();
        let mut sp = Splitter::with_max_stanza(max);
        assert_eq!(
            run(&mut sp, [&data[..]]).1,
            Err(SplitError::TooLarge),
            "{inner}"
        );
    }
    // Names and kept attributes are bounded on their own.
    let long_name = format!("<stream:stream><{}/>", "n".repeat(MAX_NAME_LEN + 1));
    assert_eq!(
        one_shot(long_name.as_bytes(), false).1,
        Err(SplitError::TooLong)
    );
    let long_id = format!("<stream:stream><a id='{}'/>", "1".repeat(MAX_ATTR_LEN + 1));
    assert_eq!(
        one_shot(long_id.as_bytes(), false).1,
        Err(SplitError::TooLong)
    );
    // Attributes we do not keep are not bounded by MAX_ATTR_LEN (only by the stanza limit).
    let long_other = format!("<stream:stream><a xid='{}'/>", "1".repeat(MAX_ATTR_LEN + 1));
    assert!(one_shot(long_other.as_bytes(), false).1.is_ok());
    // A huge stanza captured once does not stay allocated.
    let mut sp = Splitter::new();
    sp.set_capture(true);
    let huge = format!("<stream:stream><m>{}</m>", "x".repeat(100_000));
    let (evs, end) = run(&mut sp, [huge.as_bytes()]);
    assert_eq!((evs.len(), end), (2, Ok(())));
    assert!(sp.heap_bytes() > 100_000);
    sp.feed(b"<n/>").unwrap();
    assert!(
        sp.heap_bytes() <= RETAINED_CAPTURE + 1024,
        "{}",
        sp.heap_bytes()
    );
}

#[test]
fn eof_state() {
    let mut sp = Splitter::new();
    assert!(!sp.in_progress());
    let (evs, end) = run(&mut sp, [&b"<stream:stream><message><bo"[..]]);
    assert_eq!((evs.len(), end), (1, Ok(())));
    assert!(sp.in_progress() && sp.open());
    sp.feed(b"dy/></message> ").unwrap();
    assert!(!sp.in_progress());
    sp.feed(b"</stream:stream>").unwrap();
    assert!(sp.closed());
    sp.reset();
    assert!(!sp.closed() && !sp.open());
}

#[test]
fn steady_state_does_not_grow_buffers() {
    // After the first stanza, the same traffic leaves every buffer's capacity as it was.
    let mut sp = Splitter::new();
    sp.set_capture(true);
    let one = SERVER[6].as_bytes();
    sp.feed(b"<stream:stream>").unwrap();
    sp.feed(one).unwrap();
    let heap = sp.heap_bytes();
    assert!(heap > 0 && heap < 2048, "{heap}");
    eprintln!(
        "per connection: Splitter {} bytes + {heap} bytes of buffers (capture on), Login {} bytes",
        std::mem::size_of::<Splitter>(),
        std::mem::size_of::<Login>()
    );
    assert!(std::mem::size_of::<Splitter>() <= 256 && std::mem::size_of::<Login>() <= 48);
    for _ in 0..1000 {
        for chunk in one.chunks(37) {
            sp.feed(chunk).unwrap();
        }
    }
    assert_eq!(sp.heap_bytes(), heap);
}

// ---- encoders ----

#[test]
fn encoders_exact_bytes() {
    let mut out = Vec::new();
    let mut take = |f: &dyn Fn(&mut Vec<u8>)| {
        out.clear();
        f(&mut out);
        String::from_utf8(out.clone()).unwrap()
    };
    let open = take(&|o| stream_open(o, "localhost"));
    assert!(
        CLIENT_LOGIN.starts_with(&open) && open.ends_with("version='1.0'>"),
        "{open}"
    );
    assert_eq!(take(&|o| stream_close(o)), "</stream:stream>");
    assert_eq!(
        take(&|o| auth_plain(o, Name::Indexed("user", 1), Name::Indexed("pass", 1))),
        "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>AHVzZXIxAHBhc3Mx</auth>"
    );
    assert_eq!(
        take(&|o| auth_anonymous(o)),
        "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='ANONYMOUS'/>"
    );
    assert_eq!(
        take(&|o| bind(o, BIND_ID, None)),
        "<iq type='set' id='bind1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></iq>"
    );
    assert_eq!(
        take(&|o| session(o, 3)),
        "<iq type='set' id='3'><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></iq>"
    );
    assert_eq!(
        take(&|o| register(o, REGISTER_ID, Name::Str("a<b"), Name::Indexed("p&", 0))),
        "<iq type='set' id='reg1'><query xmlns='jabber:iq:register'><username>a&lt;b</username><password>p&amp;0</password></query></iq>"
    );
    assert_eq!(take(&|o| presence_initial(o)), "<presence/>");
    assert_eq!(take(&|o| presence_broadcast(o, None, None)), "<presence/>");
    assert_eq!(
        take(&|o| presence_broadcast(o, Some(Show::Away), Some("Be right back..."))),
        "<presence><show>away</show><status>Be right back...</status></presence>"
    );
    assert_eq!(
        take(&|o| presence_directed(o, Jid::user("user", 2, "localhost"), None, Some("it's me"))),
        "<presence to='user2@localhost'><status>it&apos;s me</status></presence>"
    );
    assert_eq!(
        take(&|o| presence_typed(o, Jid::Str("user2@localhost"), PresenceType::Subscribe)),
        "<presence to='user2@localhost' type='subscribe'/>"
    );
    assert_eq!(
        take(&|o| presence_unavailable(o)),
        "<presence type='unavailable'/>"
    );
    assert_eq!(
        take(&|o| roster_get(o, 18446744073709551615)),
        "<iq type='get' id='18446744073709551615'><query xmlns='jabber:iq:roster'/></iq>"
    );
    assert_eq!(
        take(&|o| roster_add(o, 1, Jid::user("user", 2, "localhost"), Some("user2@localhost"), Some("Tsung Group"))),
        "<iq type='set' id='1'><query xmlns='jabber:iq:roster'><item jid='user2@localhost' name='user2@localhost'><group>Tsung Group</group></item></query></iq>"
    );
    assert_eq!(
        take(&|o| roster_rename(o, 2, Jid::Str("u@h"), "Tsung Testuser", None)),
        "<iq type='set' id='2'><query xmlns='jabber:iq:roster'><item jid='u@h' name='Tsung Testuser'/></query></iq>"
    );
    assert_eq!(
        take(&|o| roster_remove(o, 0, Jid::Str("u@h"))),
        "<iq type='set' id='0'><query xmlns='jabber:iq:roster'><item jid='u@h' subscription='remove'/></query></iq>"
    );
    assert_eq!(
        take(&|o| chat(o, 5, Jid::user("user", 2, "localhost"), 70)),
        format!(
            "<message type='chat' to='user2@localhost' id='5'><body>{}{}</body></message>",
            std::str::from_utf8(FILLER).unwrap(),
            "abcdef"
        )
    );
    assert_eq!(
        take(&|o| chat_text(o, 6, Jid::Str("x@y"), "a & <b> \"c\"")),
        "<message type='chat' to='x@y' id='6'><body>a &amp; &lt;b&gt; &quot;c&quot;</body></message>"
    );
    assert_eq!(take(&|o| raw(o, b"<r/>")), "<r/>");
}

#[test]
fn base64_vectors() {
    // RFC 4648 test vectors, through the PLAIN encoder's streaming base64 (user "" and password
    // chosen so that the message is "\0\0" + s).
    for (s, b64) in [
        ("", "AAA="),
        ("f", "AABm"),
        ("fo", "AABmbw=="),
        ("foo", "AABmb28="),
        ("foob", "AABmb29i"),
        ("fooba", "AABmb29iYQ=="),
        ("foobar", "AABmb29iYXI="),
    ] {
        let mut out = Vec::new();
        auth_plain(&mut out, Name::Str(""), Name::Str(s));
        let text = String::from_utf8(out).unwrap();
        let got = text
            .trim_start_matches("<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>")
            .trim_end_matches("</auth>");
        assert_eq!(got, b64, "{s}");
    }
}

#[test]
fn chat_body_is_exactly_n_bytes_and_reparses() {
    for n in [0usize, 1, 63, 64, 65, 100, 1000, 4096] {
        let mut out = Vec::new();
        chat(&mut out, 9, Jid::user("user", 2, "localhost"), n);
        let (evs, end) = one_shot(&[&b"<stream:stream>"[..], &out].concat(), true);
        end.unwrap();
        let Ev::Stanza {
            bytes: Some(b), id, ..
        } = &evs[1]
        else {
            panic!()
        };
        let body = child_text(b.as_bytes(), "body").unwrap();
        assert_eq!((body.len(), text_len(body), id.as_str()), (n, n, "9"));
    }
}

#[test]
fn encoders_do_not_allocate_with_a_reused_buffer() {
    let mut out = Vec::with_capacity(4096);
    let cap = out.capacity();
    for i in 0..1000u64 {
        out.clear();
        chat(&mut out, i, Jid::user("user", i, "localhost"), 100);
        roster_get(&mut out, i);
        presence_broadcast(&mut out, Some(Show::Chat), Some("Available"));
    }
    assert_eq!(out.capacity(), cap);
}

// ---- find ----

#[test]
fn find_helpers() {
    let iq = SERVER[8].as_bytes();
    assert_eq!(error_condition(iq), Some(&b"service-unavailable"[..]));
    assert_eq!(error_condition(SERVER[6].as_bytes()), None);
    let msg = SERVER[6].as_bytes();
    let body = child_text(msg, "body").unwrap();
    assert_eq!(
        body,
        b"a &amp; b &lt;c&gt; &apos;q&apos; &quot;d&quot; ]]&gt;"
    );
    assert_eq!(text_len(body), "a & b <c> 'q' \"d\" ]]>".len());
    assert_eq!(
        text_len(b"&#x41;&#233;&#x1F600;<![CDATA[ab]]>"),
        1 + 2 + 4 + 2
    );
    assert_eq!(child_text(msg, "delay"), Some(&b"Offline storage"[..]));
    let f = SERVER[1].as_bytes();
    let mechs: Vec<_> = elements(f, "mechanism")
        .map(|e| s(&f[e.content.unwrap()]))
        .collect();
    assert_eq!(mechs.len(), 7);
    assert_eq!(mechs[2], "PLAIN");
    assert!(find_element(f, "mechanisms").is_some() && find_element(f, "bind").is_none());
    assert_eq!(
        find_element(SERVER[4].as_bytes(), "session")
            .unwrap()
            .content
            .map(|r| s(&SERVER[4].as_bytes()[r])),
        Some("<optional/>".into())
    );
    // Nested elements of the same name.
    let x = b"<a><b><b>in</b></b><c/></a>";
    let e = find_element(x, "b").unwrap();
    assert_eq!(&x[e.content.unwrap()], b"<b>in</b>");
    // Malformed input finds nothing, without panicking.
    for bad in [
        &b"<a><b"[..],
        b"<a><b>text",
        b"<",
        b"<!--",
        b"<a '>",
        b"</",
        b"<a><![CDATA[<b>",
    ] {
        let _ = find_element(bad, "b");
        let _ = child_text(bad, "b");
        let _ = error_condition(bad);
        let _ = text_len(bad);
    }
}

// ---- login ----

fn login_events(
    server: &[&str],
    cfg: &LoginConfig<'_>,
) -> (Result<LoginStatus, LoginError>, String, Login) {
    let mut sp = Splitter::new();
    sp.set_capture(true);
    let mut login = Login::new();
    let mut out = Vec::new();
    login.start(cfg, &mut out).unwrap();
    let data = server.concat();
    let mut p = data.as_bytes();
    let mut last = Ok(LoginStatus::Pending);
    while !p.is_empty() {
        let (n, ev) = sp.feed(p).unwrap();
        p = &p[n..];
        let Some(ev) = ev else { break };
        last = login.on_event(cfg, &ev, &mut out);
        if last.is_err() {
            break;
        }
    }
    (last, String::from_utf8(out).unwrap(), login)
}

const PLAIN1: LoginConfig<'static> = LoginConfig {
    domain: "localhost",
    credentials: Credentials::Plain {
        user: Name::Indexed("user", 1),
        password: Name::Indexed("pass", 1),
    },
    resource: None,
    register: false,
};

#[test]
fn login_failures_and_variants() {
    let head = "<stream:stream id='1'>";
    let feats_plain = "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>";
    // SASL failure.
    let (r, _, l) = login_events(
        &[
            head,
            feats_plain,
            "<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/></failure>",
        ],
        &PLAIN1,
    );
    assert_eq!(r, Err(LoginError::Auth));
    assert_eq!((r.unwrap_err().kind(), l.phase()), ("auth", Phase::Failed));
    // No usable mechanism.
    let anon = LoginConfig {
        credentials: Credentials::Anonymous,
        ..PLAIN1
    };
    assert_eq!(
        login_events(&[head, feats_plain], &anon).0,
        Err(LoginError::NoMechanism)
    );
    // Stream error and close during login.
    assert_eq!(
        login_events(
            &[head, "<stream:error><host-unknown/></stream:error>"],
            &PLAIN1
        )
        .0,
        Err(LoginError::StreamError)
    );
    assert_eq!(
        login_events(&[head, "</stream:stream>"], &PLAIN1).0,
        Err(LoginError::Closed)
    );
    // Features without capture.
    let mut sp = Splitter::new();
    let mut login = Login::new();
    let mut out = Vec::new();
    login.start(&PLAIN1, &mut out).unwrap();
    let (_, ev) = sp.feed(head.as_bytes()).unwrap();
    assert_eq!(
        login.on_event(&PLAIN1, &ev.unwrap(), &mut out),
        Ok(LoginStatus::Pending)
    );
    let (_, ev) = sp.feed(feats_plain.as_bytes()).unwrap();
    assert_eq!(
        login.on_event(&PLAIN1, &ev.unwrap(), &mut out),
        Err(LoginError::NotCaptured)
    );
    // Registration with anonymous credentials cannot work.
    let mut out = Vec::new();
    assert_eq!(
        Login::new().start(
            &LoginConfig {
                register: true,
                ..anon
            },
            &mut out
        ),
        Err(LoginError::Config)
    );
    // A required session (RFC 3921 server: empty <session/>), bound JID chosen by the server.
    let feats2 = "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></stream:features>";
    let bound = "<iq type='result' id='bind1'><bind><jid>user1@localhost/abc</jid></bind></iq>";
    let (r, out, l) = login_events(
        &[head, feats_plain, "<success/>", head, feats2, bound],
        &PLAIN1,
    );
    assert_eq!(r, Ok(LoginStatus::Pending));
    assert_eq!(l.phase(), Phase::Session);
    assert!(
        out.ends_with(
            "<iq type='set' id='sess1'><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></iq>"
        ),
        "{out}"
    );
    let (r, _, l) = login_events(
        &[
            head,
            feats_plain,
            "<success/>",
            head,
            feats2,
            bound,
            "<iq type='result' id='sess1'/>",
        ],
        &PLAIN1,
    );
    assert_eq!(
        (r, l.jid()),
        (Ok(LoginStatus::Ready), &b"user1@localhost/abc"[..])
    );
    assert!(l.session_required());
    // Bind refused.
    let (r, _, _) = login_events(
        &[
            head,
            feats_plain,
            "<success/>",
            head,
            feats2,
            "<iq type='error' id='bind1'><error><conflict/></error></iq>",
        ],
        &PLAIN1,
    );
    assert_eq!(r, Err(LoginError::Bind));
    // Features before the restarted header.
    assert_eq!(
        login_events(&[head, feats_plain, "<success/>", feats2], &PLAIN1).0,
        Err(LoginError::Unexpected)
    );
    // Registration: conflict counts as registered; another error does not.
    let reg = LoginConfig {
        register: true,
        ..PLAIN1
    };
    let (r, out, l) = login_events(&[head, feats_plain, "<iq type='error' id='reg1'><error type='cancel'><conflict xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"], &reg);
    assert_eq!(
        (r, l.phase(), l.registered()),
        (Ok(LoginStatus::Pending), Phase::Auth, true)
    );
    assert!(
        out.contains("<username>user1</username><password>pass1</password>")
            && out.ends_with("</auth>"),
        "{out}"
    );
    let (r, _, _) = login_events(
        &[
            head,
            feats_plain,
            "<iq type='error' id='reg1'><error type='modify'><not-acceptable/></error></iq>",
        ],
        &reg,
    );
    assert_eq!(r, Err(LoginError::Register));
}

// ---- waits ----

#[test]
fn waits() {
    let data = server_bytes();
    let mut sp = Splitter::new();
    let mut outcomes = |w: Wait| {
        sp.reset();
        let mut p = &data[..];
        let mut v = Vec::new();
        while !p.is_empty() {
            let (n, ev) = sp.feed(p).unwrap();
            p = &p[n..];
            if let Some(ev) = ev {
                v.push(w.check(&ev));
            }
        }
        v
    };
    use WaitOutcome::*;
    assert_eq!(
        Wait::for_request(Ack::NoAck, RequestKind::Iq { id: 9 }),
        Wait::Nothing
    );
    assert_eq!(
        Wait::for_request(Ack::Local, RequestKind::NoReply),
        Wait::AnyEvent
    );
    assert_eq!(
        Wait::for_request(Ack::Global, RequestKind::NoReply),
        Wait::Nothing
    );
    assert_eq!(
        Wait::for_request(Ack::Global, RequestKind::Close),
        Wait::StreamClose
    );
    // Issue 32: a close with ack local is done at the server's close, not failed by it.
    assert_eq!(
        Wait::for_request(Ack::Local, RequestKind::Close),
        Wait::StreamClose
    );
    let w = Wait::for_request(Ack::Global, RequestKind::Iq { id: 9 });
    let o = outcomes(w);
    assert_eq!(o[8], Failed(ReplyError::ErrorReply), "iq 9 is type='error'");
    assert!(o[..8].iter().all(|x| *x == Pending));
    assert_eq!(o[9], Failed(ReplyError::Closed));
    let o = outcomes(Wait::IqReply(5)); // message id 5 is not an iq
    assert!(o[..9].iter().all(|x| *x == Pending));
    let o = outcomes(Wait::AnyEvent);
    assert!(o[..9].iter().all(|x| *x == Done));
    let o = outcomes(Wait::StreamClose);
    assert_eq!(o[9], Done);
    let mut sp = Splitter::new();
    sp.feed(b"<stream:stream>").unwrap();
    let (_, ev) = sp.feed(b"<iq type='result' id='77'/>").unwrap();
    assert_eq!(Wait::IqReply(77).check(&ev.unwrap()), Done);
    let (_, ev) = sp.feed(b"<stream:error/>").unwrap();
    assert_eq!(
        Wait::IqReply(77).check(&ev.unwrap()),
        Failed(ReplyError::StreamError)
    );
}

// ---- destinations ----

#[test]
fn destinations() {
    let mut pool = UserPool::new(1, 130).unwrap();
    assert_eq!(
        pool.pick(Destination::Online, 1, 0, None),
        Err(DestError::NoOnline)
    );
    assert_eq!(pool.pick(Destination::Offline, 1, 0, None), Ok(1));
    assert_eq!(
        pool.pick(Destination::Offline, 1, 0, None),
        Ok(2),
        "round-robin"
    );
    pool.set_online(1, true).unwrap();
    assert_eq!(
        pool.pick(Destination::Online, 1, 0, None),
        Err(DestError::NoOnline),
        "not to oneself"
    );
    for id in [5, 64, 65, 130] {
        pool.set_online(id, true).unwrap();
    }
    let picks: Vec<_> = (0..6)
        .map(|_| pool.pick(Destination::Online, 1, 0, None).unwrap())
        .collect();
    assert_eq!(
        picks,
        [5, 64, 65, 130, 5, 64],
        "round-robin over the online users, wrapping"
    );
    assert_eq!(pool.online_count(), 5);
    // Offline skips the connected ones.
    pool.set_connected(3, true).unwrap();
    let picks: Vec<_> = (0..3)
        .map(|_| pool.pick(Destination::Offline, 1, 0, None).unwrap())
        .collect();
    assert_eq!(picks, [4, 6, 7]);
    pool.set_connected(5, false).unwrap();
    assert!(!pool.is_online(5) && !pool.is_connected(5));
    assert_eq!(pool.online_count(), 4);
    // Random covers the range (Lemire: 0 -> first, u64::MAX -> last).
    assert_eq!(pool.pick(Destination::Random, 1, 0, None), Ok(1));
    assert_eq!(pool.pick(Destination::Random, 1, u64::MAX, None), Ok(130));
    assert_eq!(pool.pick(Destination::Unique, 77, 0, None), Ok(1));
    assert_eq!(
        pool.pick(Destination::Previous, 1, 0, None),
        Err(DestError::NoPrevious)
    );
    assert_eq!(pool.pick(Destination::Previous, 1, 0, Some(42)), Ok(42));
    assert_eq!(pool.set_online(131, true), Err(DestError::OutOfRange));
    assert_eq!(pool.set_online(0, true), Err(DestError::OutOfRange));
    assert!(UserPool::new(5, 4).is_err() && UserPool::new(0, MAX_USERS).is_err());
    // Everyone connected: no offline user.
    let mut full = UserPool::new(10, 12).unwrap();
    for id in 10..=12 {
        full.set_connected(id, true).unwrap();
    }
    assert_eq!(
        full.pick(Destination::Offline, 10, 0, None),
        Err(DestError::NoOffline)
    );
    assert_eq!(full.connected_count(), 3);
}

/// Throughput of the splitter on the captured exchange (run with `--ignored --nocapture` in
/// release mode for a figure).
#[test]
#[ignore]
fn splitter_throughput() {
    // The stanzas between header and close, repeated: a long stream.
    let body: Vec<u8> = SERVER[6..9].concat().into_bytes();
    let mut data = b"<stream:stream>".to_vec();
    while data.len() < 64 << 20 {
        data.extend_from_slice(&body);
    }
    for capture in [false, true] {
        let mut sp = Splitter::new();
        sp.set_capture(capture);
        let t = std::time::Instant::now();
        let mut events = 0u64;
        for chunk in data.chunks(16 * 1024) {
            let mut p = chunk;
            while !p.is_empty() {
                let (n, ev) = sp.feed(p).unwrap();
                p = &p[n..];
                events += u64::from(ev.is_some());
            }
        }
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "capture {capture}: {:.0} MB/s, {:.2} M stanzas/s ({events} events)",
            data.len() as f64 / secs / 1e6,
            events as f64 / secs / 1e6,
        );
    }
}
