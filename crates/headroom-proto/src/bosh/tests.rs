use super::*;

const CFG: Config<'static> = Config {
    host: "127.0.0.1:5280",
    path: "/bosh",
    domain: "localhost",
    wait: 60,
};

fn response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The body of the one request in `out`.
fn body_of(out: &[u8]) -> String {
    let s = std::str::from_utf8(out).unwrap();
    let (head, body) = s.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("POST /bosh HTTP/1.1\r\nHost: 127.0.0.1:5280\r\n"),
        "{head}"
    );
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(len, body.len(), "Content-Length matches the body");
    body.to_string()
}

fn created() -> Bosh {
    let mut b = Bosh::new(1000);
    b.submit(b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>").unwrap();
    let mut out = Vec::new();
    assert!(
        !b.request(1, &CFG, &mut out),
        "the creation goes on connection 0 only"
    );
    assert!(b.request(0, &CFG, &mut out));
    let body = body_of(&out);
    assert!(body.starts_with("<body content='text/xml; charset=utf-8' hold='1' rid='1000' to='localhost' ver='1.6' wait='60'"), "{body}");
    assert!(body.ends_with("xmpp:version='1.0'/>"), "{body}");
    out.clear();
    assert!(
        !b.request(1, &CFG, &mut out),
        "nothing else while the creation is outstanding"
    );
    let r = response("<body xmlns='http://jabber.org/protocol/httpbind' sid='abc123' wait='60' requests='2' from='localhost' xmlns:stream='http://etherx.jabber.org/streams'><stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features></body>");
    assert_eq!(b.feed(0, &r).unwrap(), r.len());
    b
}

#[test]
fn creation_gives_the_xmpp_side_a_stream_header_and_the_features() {
    let b = created();
    let inbox = std::str::from_utf8(b.inbox()).unwrap();
    assert!(inbox.starts_with("<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0' id='abc123' from='localhost'>"), "{inbox}");
    assert!(inbox.ends_with("</stream:features>"), "{inbox}");
    assert_eq!(b.stats.responses, 1);
}

#[test]
fn one_poll_is_always_held_and_stanzas_take_the_free_connection() {
    let mut b = created();
    let n = b.inbox().len();
    b.consume(n);
    let mut out = Vec::new();
    // Nothing outstanding: a poll, on the first connection asked; but not while the client
    // only writes what the XMPP side gave.
    assert!(!b.request_data(0, &CFG, &mut out) && !b.request_data(1, &CFG, &mut out));
    assert!(out.is_empty());
    assert!(b.request(0, &CFG, &mut out));
    assert_eq!(
        body_of(&out),
        format!("<body rid='1001' sid='abc123' xmlns='{NS}'/>")
    );
    assert_eq!(b.stats.polls, 1);
    out.clear();
    assert!(!b.request(1, &CFG, &mut out), "one poll held is enough");
    // A stanza: on the other connection.
    b.submit(b"<presence/>").unwrap();
    assert!(!b.request(0, &CFG, &mut out), "connection 0 is busy");
    assert!(b.request(1, &CFG, &mut out));
    assert_eq!(
        body_of(&out),
        format!("<body rid='1002' sid='abc123' xmlns='{NS}'><presence/></body>")
    );
    out.clear();
    // Both busy: stanzas queue.
    b.submit(b"<message to='a'/>").unwrap();
    b.submit(b"<message to='b'/>").unwrap();
    assert!(!b.request(0, &CFG, &mut out) && !b.request(1, &CFG, &mut out));
    // The held poll comes back empty, in two pieces: the queue goes out on it, together.
    let r = response(&format!("<body xmlns='{NS}'/>"));
    let (a, c) = r.split_at(10);
    assert_eq!(b.feed(0, a).unwrap(), a.len());
    assert!(b.outstanding(0));
    assert_eq!(b.feed(0, c).unwrap(), c.len());
    assert!(!b.outstanding(0));
    assert!(b.inbox().is_empty());
    assert_eq!(b.stats.empty, 1);
    assert!(b.request(0, &CFG, &mut out));
    assert_eq!(
        body_of(&out),
        format!(
            "<body rid='1003' sid='abc123' xmlns='{NS}'><message to='a'/><message to='b'/></body>"
        )
    );
}

#[test]
fn a_restart_makes_a_new_stream_header_and_a_terminate_ends_the_stream() {
    let mut b = created();
    let n = b.inbox().len();
    b.consume(n);
    let mut out = Vec::new();
    b.submit(b"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>AGEAYg==</auth>")
        .unwrap();
    assert!(b.request(0, &CFG, &mut out));
    out.clear();
    b.feed(
        0,
        &response(&format!(
            "<body xmlns='{NS}'><success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/></body>"
        )),
    )
    .unwrap();
    assert_eq!(
        std::str::from_utf8(b.inbox()).unwrap(),
        "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
    );
    let n = b.inbox().len();
    b.consume(n);
    b.submit(b"<?xml version='1.0'?><stream:stream to='localhost' version='1.0'>")
        .unwrap();
    assert!(
        std::str::from_utf8(b.inbox())
            .unwrap()
            .starts_with("<stream:stream "),
        "a new header at once"
    );
    assert!(b.request(1, &CFG, &mut out));
    let body = body_of(&out);
    assert!(body.starts_with("<body rid='1002' sid='abc123' xmlns='http://jabber.org/protocol/httpbind' to='localhost'"), "{body}");
    assert!(body.ends_with("xmpp:restart='true'/>"), "{body}");
    out.clear();
    b.feed(1, &response(&format!("<body xmlns='{NS}'><stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features></body>"))).unwrap();
    assert!(std::str::from_utf8(b.inbox())
        .unwrap()
        .ends_with("</stream:features>"));
    let n = b.inbox().len();
    b.consume(n);
    // The close: queued presence and the terminate in one request; its answer ends the stream.
    b.submit(b"<presence type='unavailable'/></stream:stream>")
        .unwrap();
    assert!(b.request(0, &CFG, &mut out));
    assert_eq!(
        body_of(&out),
        format!("<body rid='1003' sid='abc123' xmlns='{NS}' type='terminate'><presence type='unavailable'/></body>")
    );
    out.clear();
    assert!(!b.request(1, &CFG, &mut out), "nothing after the terminate");
    b.feed(0, &response(&format!("<body xmlns='{NS}'/>")))
        .unwrap();
    assert_eq!(b.inbox(), b"</stream:stream>");
    assert!(b.ended());
}

#[test]
fn the_server_ending_the_session_closes_the_stream() {
    let mut b = created();
    let n = b.inbox().len();
    b.consume(n);
    let mut out = Vec::new();
    assert!(b.request(0, &CFG, &mut out));
    b.submit(b"<presence/>").unwrap();
    assert!(b.request(1, &CFG, &mut out));
    b.feed(
        0,
        &response(&format!(
            "<body xmlns='{NS}' type='terminate' condition='item-not-found'/>"
        )),
    )
    .unwrap();
    // The other request is still to be answered (the server lets it go at once): what it
    // carries comes before the stream's end, and nothing more goes out meanwhile.
    assert!(b.inbox().is_empty() && !b.ended());
    out.clear();
    b.submit(b"<message to='x'/>").unwrap();
    assert!(
        !b.request(0, &CFG, &mut out),
        "nothing goes out after a terminate"
    );
    b.feed(
        1,
        &response(&format!("<body xmlns='{NS}'><message from='a'/></body>")),
    )
    .unwrap();
    assert_eq!(b.inbox(), b"<message from='a'/></stream:stream>");
    assert!(b.ended());
    assert!(!b.request(0, &CFG, &mut out) && !b.request(1, &CFG, &mut out));
}

#[test]
fn hostile_responses_are_errors_not_panics_nor_larger_buffers() {
    let fresh = || {
        let mut b = Bosh::new(1);
        b.submit(b"<stream:stream to='x'>").unwrap();
        assert!(b.request(0, &CFG, &mut Vec::new()));
        b
    };
    let cases: Vec<(Vec<u8>, BoshError)> = vec![
        (
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
            BoshError::Status(404),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            BoshError::Http,
        ),
        (b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), BoshError::Http),
        (b"garbage\r\n\r\n".to_vec(), BoshError::Http),
        (
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                MAX_BODY + 1
            )
            .into_bytes(),
            BoshError::BodyTooLong,
        ),
        (response("<html/>"), BoshError::NotBody),
        (response("<bodyx/>"), BoshError::NotBody),
        (response("<body xmlns='x'><unclosed>"), BoshError::NotBody),
        (response("<body xmlns='x'/>"), BoshError::NoSid),
        (
            response(&format!("<body sid='{}'/>", "s".repeat(MAX_SID + 1))),
            BoshError::NoSid,
        ),
    ];
    for (input, want) in cases {
        let mut b = fresh();
        // Any chunking gives the same verdict.
        for step in [1, 7, input.len()] {
            let mut b2 = fresh();
            let mut got = None;
            for chunk in input.chunks(step) {
                if let Err(e) = b2.feed(0, chunk) {
                    got = Some(e);
                    break;
                }
            }
            assert_eq!(
                got,
                Some(want),
                "{:?} in chunks of {step}",
                String::from_utf8_lossy(&input)
            );
        }
        assert_eq!(b.feed(0, &input).unwrap_err(), want);
    }
    // A head that never ends.
    let mut b = fresh();
    let endless = vec![b'a'; 1024];
    let mut err = None;
    for _ in 0..20 {
        if let Err(e) = b.feed(0, &endless) {
            err = Some(e);
            break;
        }
    }
    assert_eq!(err, Some(BoshError::HeadTooLong));
    // Bytes with nothing asked, and bytes after a complete response.
    let mut b = Bosh::new(1);
    assert_eq!(b.feed(0, b"x").unwrap_err(), BoshError::Unasked);
    let mut b = fresh();
    let mut r = response("<body sid='s'/>");
    r.extend_from_slice(b"HTTP/1.1");
    let used = b.feed(0, &r).unwrap();
    assert_eq!(used, r.len() - 8);
    assert_eq!(b.feed(0, &r[used..]).unwrap_err(), BoshError::Unasked);
    // Too many queued stanzas.
    let mut b = fresh();
    let big = vec![b'x'; MAX_QUEUE / 2 + 1];
    b.submit(&big).unwrap();
    assert_eq!(b.submit(&big).unwrap_err(), BoshError::QueueFull);
}

#[test]
fn warm_sessions_allocate_nothing_per_exchange() {
    let mut b = created();
    let n = b.inbox().len();
    b.consume(n);
    let mut out = Vec::with_capacity(4096);
    let reply = response(&format!(
        "<body xmlns='{NS}'><message from='a' to='b'><body>hi</body></message></body>"
    ));
    // Warm up: every buffer reaches its size.
    for _ in 0..3 {
        b.submit(b"<message to='x'><body>hello</body></message>")
            .unwrap();
        out.clear();
        assert!(b.request(0, &CFG, &mut out));
        b.feed(0, &reply).unwrap();
        let n = b.inbox().len();
        b.consume(n);
    }
    let before = headroom_testkit::thread_allocs();
    for _ in 0..100 {
        b.submit(b"<message to='x'><body>hello</body></message>")
            .unwrap();
        out.clear();
        assert!(b.request(0, &CFG, &mut out));
        b.feed(0, &reply).unwrap();
        let n = b.inbox().len();
        b.consume(n);
    }
    assert_eq!(headroom_testkit::thread_allocs() - before, 0);
}
