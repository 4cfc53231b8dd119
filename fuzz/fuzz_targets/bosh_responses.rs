//! Fuzz the BOSH client (`headroom_proto::bosh::Bosh`): a server's HTTP responses on the two
//! connections of a session.
//!
//! Input layout: byte 0's low 3 bits say how many piece lengths follow, bit 3 whether the
//! session is created first (a canned creation answer, so responses go to an open session);
//! then the piece lengths, then the stream. Each piece goes to connection (length's low bit)
//! after a request was written there when one is due (stanzas submitted between pieces, so both
//! kinds of request happen), as the engine does.
//!
//! Checked besides "no panic": `feed` never uses more than it was given and errors are final
//! for the connection's bytes; the inbox never exceeds what the bounds allow (bodies of at
//! most `MAX_BODY` each, one per request, plus made-up stream headers); nothing is written after
//! the session ended.
#![no_main]

use headroom_proto::bosh::{Bosh, Config, MAX_BODY, MAX_QUEUE};
use libfuzzer_sys::fuzz_target;

const CFG: Config<'static> = Config {
    host: "127.0.0.1:5280",
    path: "/bosh",
    domain: "localhost",
    wait: 60,
};

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let n = (head & 7) as usize;
    if rest.len() < n {
        return;
    }
    let (lens, mut stream) = rest.split_at(n);
    let mut b = Bosh::new(1000);
    let mut out = Vec::new();
    b.submit(b"<?xml version='1.0'?><stream:stream to='localhost' version='1.0'>")
        .unwrap();
    assert!(b.request(0, &CFG, &mut out));
    if head & 8 != 0 {
        let body = "<body xmlns='http://jabber.org/protocol/httpbind' sid='s1' from='localhost'><stream:features/></body>";
        let r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        assert_eq!(b.feed(0, r.as_bytes()), Ok(r.len()));
    }
    let mut failed = [false; 2];
    let mut requests = 1usize;
    let mut i = 0;
    while !stream.is_empty() {
        // At least one byte a piece: a zero length would feed nothing, forever (until the
        // queue of stanzas submitted meanwhile hit its bound: ~58,000 turns a run, the target
        // ran 200 inputs a second).
        let len = (lens.get(i % n.max(1)).copied().unwrap_or(255) as usize).max(1);
        i += 1;
        let conn = len & 1;
        let piece = &stream[..len.min(stream.len())];
        stream = &stream[piece.len()..];
        if i % 3 == 0 && b.submit(b"<message to='x'/>").is_err() {
            return;
        }
        out.clear();
        let ended = b.ended();
        if b.request(conn, &CFG, &mut out) {
            assert!(!ended, "a request after the session ended");
            requests += 1;
        }
        if failed[conn] {
            continue;
        }
        match b.feed(conn, piece) {
            Ok(used) => assert!(used <= piece.len()),
            Err(_) => failed[conn] = true,
        }
        // Each request's answer adds at most a body, and made-up stream headers/closes.
        assert!(b.inbox().len() <= requests * (MAX_BODY + 512) + MAX_QUEUE);
        let n = b.inbox().len();
        if i % 2 == 0 {
            b.consume(n);
        }
    }
});
