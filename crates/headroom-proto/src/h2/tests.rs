//! Connection tests against frames built by hand: each feature of the codec, each bound, and
//! a stream split at every byte boundary.

use super::frame::*;
use super::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Status(u32, u16),
    Header(u32, String, String),
    Data(u32, Vec<u8>),
    Complete(u32, u16),
    Reset(u32, u32),
    GoAway(u32, u32, u32),
}

impl Ev {
    fn of(e: Event<'_>) -> Ev {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match e {
            Event::Status { stream, status } => Ev::Status(stream, status),
            Event::Header {
                stream,
                name,
                value,
            } => Ev::Header(stream, s(name), s(value)),
            Event::Data { stream, data } => Ev::Data(stream, data.to_vec()),
            Event::Complete { stream, status } => Ev::Complete(stream, status),
            Event::Reset { stream, code } => Ev::Reset(stream, code),
            Event::GoAway {
                last_stream_id,
                code,
                unprocessed,
            } => Ev::GoAway(last_stream_id, code, unprocessed),
        }
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    write_head(&mut v, payload.len(), kind, flags, stream);
    v.extend_from_slice(payload);
    v
}

fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    write_settings(&mut v, params);
    v
}

fn window_update(stream: u32, inc: u32) -> Vec<u8> {
    let mut v = Vec::new();
    write_window_update(&mut v, stream, inc);
    v
}

/// Splits what the client wrote into frames (after the preface if present).
fn frames(out: &[u8]) -> Vec<(Head, Vec<u8>)> {
    let mut b = out.strip_prefix(&PREFACE[..]).unwrap_or(out);
    let mut v = Vec::new();
    while !b.is_empty() {
        let h = Head::parse(b).expect("whole frame header");
        let end = HEADER_LEN + h.len as usize;
        v.push((h, b[HEADER_LEN..end].to_vec()));
        b = &b[end..];
    }
    v
}

/// The server side of the tests: an HPACK encoder for response heads.
struct Server {
    enc: hpack::Encoder,
}

impl Server {
    fn new() -> Server {
        Server {
            enc: hpack::Encoder::new(4096),
        }
    }

    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        self.enc.begin_block(&mut b);
        for (n, v) in fields {
            self.enc.field(n.as_bytes(), v.as_bytes(), &mut b);
        }
        b
    }

    fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
        let b = self.block(fields);
        let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
        frame(HEADERS, flags, stream, &b)
    }
}

struct Client {
    conn: ClientConn,
    out: Vec<u8>,
    events: Vec<Ev>,
}

impl Client {
    fn with(cfg: ClientConfig) -> Client {
        let mut out = Vec::new();
        let conn = ClientConn::new(&cfg, &mut out);
        Client {
            conn,
            out,
            events: Vec::new(),
        }
    }

    /// A client that already got the server's (empty) SETTINGS; `out` emptied.
    fn ready(cfg: ClientConfig, server_settings: &[(u16, u32)]) -> Client {
        let mut c = Client::with(cfg);
        c.feed(&settings(server_settings)).unwrap();
        c.out.clear();
        // Everything written: the count of queued control frames restarts.
        c.feed(&[]).unwrap();
        c.events.clear();
        c
    }

    fn feed(&mut self, input: &[u8]) -> Result<(), ConnError> {
        let events = &mut self.events;
        self.conn
            .feed(input, &mut self.out, &mut |e| events.push(Ev::of(e)))
    }

    fn get(&mut self, path: &str) -> u32 {
        self.send(path, b"")
    }

    fn send(&mut self, path: &str, body: &[u8]) -> u32 {
        let req = Request {
            method: if body.is_empty() { b"GET" } else { b"POST" },
            scheme: b"http",
            authority: b"localhost",
            path: path.as_bytes(),
            headers: &[(b"User-Agent", b"headroom"), (b"Connection", b"close")],
            body,
        };
        self.conn.send_request(&req, &mut self.out).unwrap()
    }

    fn take_out(&mut self) -> Vec<(Head, Vec<u8>)> {
        let f = frames(&self.out);
        self.out.clear();
        f
    }
}

fn status(stream: u32, code: u16) -> Ev {
    Ev::Status(stream, code)
}

fn cfg() -> ClientConfig {
    ClientConfig::default()
}

#[test]
fn preface_settings_and_window_update_bytes() {
    let mut out = Vec::new();
    let conn = ClientConn::new(&ClientConfig::default(), &mut out);
    let mut want = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    want.extend_from_slice(&[0, 0, 30, 0x4, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&[0, 1, 0, 0, 0x10, 0]); // HEADER_TABLE_SIZE 4096
    want.extend_from_slice(&[0, 2, 0, 0, 0, 0]); // ENABLE_PUSH 0
    want.extend_from_slice(&[0, 4, 1, 0, 0, 0]); // INITIAL_WINDOW_SIZE 2^24
    want.extend_from_slice(&[0, 5, 0, 0, 0x40, 0]); // MAX_FRAME_SIZE 16384
    want.extend_from_slice(&[0, 6, 0, 1, 0, 0]); // MAX_HEADER_LIST_SIZE 65536
    want.extend_from_slice(&[0, 0, 4, 0x8, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&((1u32 << 24) - 65_535).to_be_bytes());
    assert_eq!(out, want);
    assert!(conn.can_open());
    assert_eq!(conn.peer_max_concurrent_streams(), 100);
}

#[test]
fn server_preface_must_be_settings_and_is_acked() {
    let mut c = Client::with(cfg());
    c.out.clear();
    c.feed(&settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 50)]))
        .unwrap();
    let f = c.take_out();
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.flags, f[0].0.len), (SETTINGS, ACK, 0));
    assert_eq!(c.conn.peer_max_concurrent_streams(), 50);

    let mut c = Client::with(cfg());
    let err = c.feed(&frame(PING, 0, 0, &[0; 8])).unwrap_err();
    assert_eq!(err.code, PROTOCOL_ERROR);
    assert_eq!(c.conn.error(), Some(err));
}

#[test]
fn request_response_round_trip() {
    let mut c = Client::ready(cfg(), &[]);
    let mut srv = Server::new();
    let id = c.get("/index.html");
    assert_eq!(id, 1);
    assert_eq!(c.conn.open_streams(), 1);
    let f = c.take_out();
    assert_eq!(f.len(), 1);
    let (h, block) = &f[0];
    assert_eq!(h.kind, HEADERS);
    assert_eq!(h.flags, END_HEADERS | END_STREAM);
    let mut dec = hpack::Decoder::new(4096);
    let mut fields = Vec::new();
    dec.decode(block, usize::MAX, &mut |n, v| {
        fields.push((
            String::from_utf8_lossy(n).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ))
    })
    .unwrap();
    let want: Vec<(String, String)> = [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/index.html"),
        ("user-agent", "headroom"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    assert_eq!(fields, want, "lowercased, Connection dropped");

    let mut input = srv.headers(
        1,
        &[(":status", "200"), ("content-type", "text/plain")],
        false,
    );
    input.extend(frame(DATA, 0, 1, b"hello "));
    input.extend(frame(DATA, END_STREAM, 1, b"world"));
    c.feed(&input).unwrap();
    assert_eq!(
        c.events,
        [
            status(1, 200),
            Ev::Header(1, "content-type".into(), "text/plain".into()),
            Ev::Data(1, b"hello ".to_vec()),
            Ev::Data(1, b"world".to_vec()),
            Ev::Complete(1, 200),
        ]
    );
    assert_eq!(c.conn.open_streams(), 0);

    // The second identical request is a handful of indexed bytes.
    let id = c.get("/index.html");
    assert_eq!(id, 3);
    let f = c.take_out();
    assert!(f[0].1.len() <= 6, "{:02x?}", f[0].1);
    c.events.clear();
    c.feed(&srv.headers(3, &[(":status", "204")], true))
        .unwrap();
    assert_eq!(c.events, [status(3, 204), Ev::Complete(3, 204)]);
}

#[test]
fn informational_heads_are_skipped_and_trailers_accepted() {
    let mut c = Client::ready(cfg(), &[]);
    let mut srv = Server::new();
    c.get("/");
    let mut input = srv.headers(1, &[(":status", "100"), ("x-info", "1")], false);
    input.extend(srv.headers(1, &[(":status", "200")], false));
    input.extend(frame(DATA, 0, 1, b"body"));
    input.extend(srv.headers(1, &[("grpc-status", "0")], true));
    c.feed(&input).unwrap();
    assert_eq!(
        c.events,
        [
            status(1, 200),
            Ev::Data(1, b"body".to_vec()),
            Ev::Header(1, "grpc-status".into(), "0".into()),
            Ev::Complete(1, 200),
        ]
    );
}

#[test]
fn malformed_heads_are_stream_errors() {
    for (fields, end_stream) in [
        (&[("x-no-status", "1")][..], true),
        (&[(":status", "2000")][..], true),
        (&[(":status", "200"), (":path", "/")][..], true),
        (&[(":status", "103")][..], true),
    ] {
        let mut c = Client::ready(cfg(), &[]);
        let mut srv = Server::new();
        c.get("/");
        c.out.clear();
        c.feed(&srv.headers(1, fields, end_stream)).unwrap();
        assert_eq!(
            c.events.last(),
            Some(&Ev::Reset(1, PROTOCOL_ERROR)),
            "{fields:?}"
        );
        let f = c.take_out();
        assert_eq!(f[0].0.kind, RST_STREAM);
        assert_eq!(f[0].1, PROTOCOL_ERROR.to_be_bytes());
        assert_eq!(c.conn.open_streams(), 0);
    }
    // Trailers without END_STREAM.
    let mut c = Client::ready(cfg(), &[]);
    let mut srv = Server::new();
    c.get("/");
    c.feed(&srv.headers(1, &[(":status", "200")], false))
        .unwrap();
    c.feed(&srv.headers(1, &[("x-t", "1")], false)).unwrap();
    assert_eq!(c.events.last(), Some(&Ev::Reset(1, PROTOCOL_ERROR)));
    // DATA before the head.
    let mut c = Client::ready(cfg(), &[]);
    c.get("/");
    c.feed(&frame(DATA, 0, 1, b"x")).unwrap();
    assert_eq!(c.events, [Ev::Reset(1, PROTOCOL_ERROR)]);
}

#[test]
fn padding_is_removed_and_checked() {
    let mut c = Client::ready(cfg(), &[]);
    let mut srv = Server::new();
    c.get("/");
    // HEADERS with padding and priority fields.
    let block = srv.block(&[(":status", "200")]);
    let mut p = vec![3u8];
    p.extend_from_slice(&[0x80, 0, 0, 0, 16]); // exclusive dependency on 0, weight 16
    p.extend_from_slice(&block);
    p.extend_from_slice(&[0, 0, 0]);
    let mut input = frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG, 1, &p);
    // DATA with 4 bytes of padding, then DATA that is all padding.
    input.extend(frame(DATA, PADDED, 1, b"\x04abc\0\0\0\0"));
    input.extend(frame(DATA, PADDED | END_STREAM, 1, b"\x02\0\0"));
    c.feed(&input).unwrap();
    assert_eq!(
        c.events,
        [
            status(1, 200),
            Ev::Data(1, b"abc".to_vec()),
            Ev::Complete(1, 200)
        ]
    );
    // Padding longer than the payload: connection PROTOCOL_ERROR, GOAWAY written.
    c.get("/");
    c.out.clear();
    let err = c.feed(&frame(DATA, PADDED, 3, b"\x05abc")).unwrap_err();
    assert_eq!(err.code, PROTOCOL_ERROR);
    let f = c.take_out();
    assert_eq!(f.last().unwrap().0.kind, GOAWAY);
    assert_eq!(f.last().unwrap().1[4..], PROTOCOL_ERROR.to_be_bytes());
    // A dead connection stays dead.
    assert_eq!(c.feed(&settings(&[])), Err(err));
    assert!(!c.conn.can_open());
}

#[test]
fn continuation_frames_reassemble_the_block() {
    let mut c = Client::ready(cfg(), &[]);
    let mut srv = Server::new();
    c.get("/");
    let big = "v".repeat(100);
    let block = srv.block(&[(":status", "200"), ("x-a", &big), ("x-b", "2")]);
    let (a, rest) = block.split_at(10);
    let (b, d) = rest.split_at(50);
    let mut input = frame(HEADERS, END_STREAM, 1, a);
    input.extend(frame(CONTINUATION, 0, 1, b));
    input.extend(frame(CONTINUATION, 0, 1, &[]));
    input.extend(frame(CONTINUATION, END_HEADERS, 1, d));
    c.feed(&input).unwrap();
    assert_eq!(
        c.events,
        [
            status(1, 200),
            Ev::Header(1, "x-a".into(), big.clone()),
            Ev::Header(1, "x-b".into(), "2".into()),
            Ev::Complete(1, 200)
        ]
    );
    // Another frame in the middle of a block: PROTOCOL_ERROR.
    c.get("/");
    let mut input = frame(HEADERS, 0, 3, a);
    input.extend(frame(PING, 0, 0, &[0; 8]));
    assert_eq!(c.feed(&input).unwrap_err().code, PROTOCOL_ERROR);
    // CONTINUATION with no HEADERS before it.
    let mut c = Client::ready(cfg(), &[]);
    c.get("/");
    let err = c.feed(&frame(CONTINUATION, END_HEADERS, 1, &[0x88]));
    assert_eq!(err.unwrap_err().code, PROTOCOL_ERROR);
}

#[test]
fn continuation_floods_are_bounded() {
    // Empty CONTINUATION frames forever: cut after MAX_CONTINUATIONS.
    let mut c = Client::ready(cfg(), &[]);
    c.get("/");
    let mut input = frame(HEADERS, 0, 1, &[0x88]);
    for _ in 0..=MAX_CONTINUATIONS {
        input.extend(frame(CONTINUATION, 0, 1, &[]));
    }
    assert_eq!(c.feed(&input).unwrap_err().code, ENHANCE_YOUR_CALM);
    // Full CONTINUATION frames beyond the header block bound.
    let mut c = Client::ready(
        ClientConfig {
            max_header_list_size: 20_000,
            ..cfg()
        },
        &[],
    );
    c.get("/");
    let chunk = vec![0u8; 16_384];
    let mut input = frame(HEADERS, 0, 1, &chunk);
    input.extend(frame(CONTINUATION, 0, 1, &chunk));
    assert_eq!(c.feed(&input).unwrap_err().code, ENHANCE_YOUR_CALM);
}

#[test]
fn header_list_above_the_bound_resets_the_stream() {
    let mut c = Client::ready(
        ClientConfig {
            max_header_list_size: 300,
            ..cfg()
        },
        &[],
    );
    let mut srv = Server::new();
    c.get("/");
    let v = "x".repeat(150);
    c.feed(&srv.headers(1, &[(":status", "200"), ("a", &v), ("b", &v)], true))
        .unwrap();
    assert_eq!(
        c.events,
        [
            status(1, 200),
            Ev::Header(1, "a".into(), v.clone()),
            Ev::Reset(1, PROTOCOL_ERROR)
        ]
    );
    // HPACK stayed in step: the next response indexes the entries of the dropped one.
    c.events.clear();
    c.get("/");
    c.feed(&srv.headers(3, &[(":status", "200"), ("b", &v)], true))
        .unwrap();
    assert_eq!(
        c.events,
        [
            status(3, 200),
            Ev::Header(3, "b".into(), v),
            Ev::Complete(3, 200)
        ]
    );
}

#[test]
fn send_flow_control_holds_the_body_until_window_update() {
    // Peer defaults: 65,535-byte windows, 16 KiB frames.
    let mut c = Client::ready(cfg(), &[]);
    let body: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let id = c.send("/upload", &body);
    let f = c.take_out();
    assert_eq!((f[0].0.kind, f[0].0.flags), (HEADERS, END_HEADERS));
    let data: Vec<&(Head, Vec<u8>)> = f.iter().filter(|(h, _)| h.kind == DATA).collect();
    let sent: usize = data.iter().map(|(_, p)| p.len()).sum();
    assert_eq!(sent, 65_535);
    assert!(data.iter().all(|(h, p)| p.len() <= 16_384 && h.flags == 0));
    // A stream-only update does nothing: the connection window is empty too.
    c.feed(&window_update(id, 100_000)).unwrap();
    assert!(c.out.is_empty());
    // The connection opens by 10,000: 10,000 more bytes.
    c.feed(&window_update(0, 10_000)).unwrap();
    let f = c.take_out();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].1.len(), 10_000);
    assert_eq!(f[0].0.flags, 0);
    // Then the rest, with END_STREAM on its last frame.
    c.feed(&window_update(0, 1_000_000)).unwrap();
    let f = c.take_out();
    let rest: Vec<u8> = f.iter().flat_map(|(_, p)| p.clone()).collect();
    assert_eq!(rest, body[75_535..]);
    assert_eq!(f.last().unwrap().0.flags, END_STREAM);
    assert_eq!(
        f.iter().filter(|(h, _)| h.flags & END_STREAM != 0).count(),
        1
    );
    // Overflowing the connection window: FLOW_CONTROL_ERROR.
    let err = c.feed(&window_update(0, MAX_31)).unwrap_err();
    assert_eq!(err.code, FLOW_CONTROL_ERROR);
}

#[test]
fn stream_window_overflow_and_zero_increment_are_stream_errors() {
    let mut c = Client::ready(cfg(), &[]);
    c.get("/");
    c.get("/");
    c.out.clear();
    c.feed(&window_update(1, MAX_31)).unwrap();
    c.feed(&window_update(3, 0)).unwrap();
    assert_eq!(
        c.events,
        [
            Ev::Reset(1, FLOW_CONTROL_ERROR),
            Ev::Reset(3, PROTOCOL_ERROR)
        ]
    );
    assert_eq!(c.take_out().len(), 2);
    // On a stream never opened: connection error.
    assert_eq!(
        c.feed(&window_update(7, 1)).unwrap_err().code,
        PROTOCOL_ERROR
    );
}

#[test]
fn settings_initial_window_change_adjusts_open_streams() {
    let mut c = Client::ready(cfg(), &[(SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    let body = vec![7u8; 100];
    c.send("/", &body);
    let f = c.take_out();
    assert_eq!(f[1].1.len(), 10);
    // 10 -> 50: the stream gains 40.
    c.feed(&settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 50)]))
        .unwrap();
    let f = c.take_out();
    assert_eq!((f[0].0.kind, f[0].0.flags), (SETTINGS, ACK));
    assert_eq!(f[1].1.len(), 40);
    // 50 -> 0: the window goes to -50; an update of 60 leaves 10 to send.
    c.feed(&settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]))
        .unwrap();
    assert_eq!(c.take_out().len(), 1);
    c.feed(&window_update(1, 60)).unwrap();
    let f = c.take_out();
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].1.len(), f[0].0.flags), (10, 0));
    // Above 2^31-1: FLOW_CONTROL_ERROR.
    let err = c.feed(&settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 31)]));
    assert_eq!(err.unwrap_err().code, FLOW_CONTROL_ERROR);
}

#[test]
fn bad_settings_are_connection_errors() {
    for (input, code) in [
        (settings(&[(SETTINGS_ENABLE_PUSH, 1)]), PROTOCOL_ERROR),
        (settings(&[(SETTINGS_MAX_FRAME_SIZE, 100)]), PROTOCOL_ERROR),
        (frame(SETTINGS, 0, 0, &[0; 5]), FRAME_SIZE_ERROR),
        (frame(SETTINGS, ACK, 0, &[0; 6]), FRAME_SIZE_ERROR),
        (frame(SETTINGS, 0, 1, &[]), PROTOCOL_ERROR),
    ] {
        let mut c = Client::ready(cfg(), &[]);
        assert_eq!(c.feed(&input).unwrap_err().code, code, "{input:02x?}");
    }
}

#[test]
fn receive_window_is_replenished_and_enforced() {
    let mut c = Client::ready(
        ClientConfig {
            initial_window_size: 100_000,
            ..cfg()
        },
        &[],
    );
    let mut srv = Server::new();
    c.feed(&frame(SETTINGS, ACK, 0, &[])).unwrap();
    c.get("/");
    c.out.clear();
    c.feed(&srv.headers(1, &[(":status", "200")], false))
        .unwrap();
    let chunk = vec![1u8; 16_384];
    for _ in 0..3 {
        c.feed(&frame(DATA, 0, 1, &chunk)).unwrap();
    }
    assert!(c.out.is_empty(), "49,152 < half the window");
    c.feed(&frame(DATA, 0, 1, &chunk)).unwrap();
    let f = c.take_out();
    let updates: Vec<(u32, u32)> = f
        .iter()
        .map(|(h, p)| {
            assert_eq!(h.kind, WINDOW_UPDATE);
            (h.stream, u32::from_be_bytes(p[..4].try_into().unwrap()))
        })
        .collect();
    assert_eq!(updates, [(1, 65_536), (0, 65_536)]);
    // A frame beyond the stream window (10,000 bytes, our SETTINGS acknowledged): the stream
    // fails with FLOW_CONTROL_ERROR.
    let mut c = Client::ready(
        ClientConfig {
            initial_window_size: 10_000,
            ..cfg()
        },
        &[],
    );
    let mut srv = Server::new();
    c.feed(&frame(SETTINGS, ACK, 0, &[])).unwrap();
    c.get("/");
    c.feed(&srv.headers(1, &[(":status", "200")], false))
        .unwrap();
    c.feed(&frame(DATA, 0, 1, &[0; 10_001])).unwrap();
    assert_eq!(c.events.last(), Some(&Ev::Reset(1, FLOW_CONTROL_ERROR)));
}

#[test]
fn connection_receive_window_is_enforced() {
    // Two streams share the connection window; with no update from us in between, the
    // connection's 100,000 bytes run out.
    let mut c = Client::ready(
        ClientConfig {
            initial_window_size: 100_000,
            ..cfg()
        },
        &[],
    );
    let mut srv = Server::new();
    c.get("/");
    c.get("/");
    c.feed(&srv.headers(1, &[(":status", "200")], false))
        .unwrap();
    c.feed(&srv.headers(3, &[(":status", "200")], false))
        .unwrap();
    let mut input = frame(DATA, 0, 1, &[0; 16_384]);
    input.extend(frame(DATA, 0, 3, &[0; 16_384]));
    input.extend(frame(DATA, 0, 1, &[0; 16_384]));
    c.feed(&input).unwrap();
    assert_eq!(c.conn.conn_recv_pending, 49_152);
    // We give bytes back at half the window, so an honest server never reaches its end; a
    // server that ignores the window does: pretend it sent 99,999 bytes unanswered.
    c.conn.conn_recv_pending = 99_999;
    let err = c.feed(&frame(DATA, 0, 3, &[0; 2])).unwrap_err();
    assert_eq!(err.code, FLOW_CONTROL_ERROR);
}

#[test]
fn ping_is_acked_with_its_payload() {
    let mut c = Client::ready(cfg(), &[]);
    c.feed(&frame(PING, 0, 0, b"12345678")).unwrap();
    c.feed(&frame(PING, ACK, 0, b"abcdefgh")).unwrap();
    let f = c.take_out();
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.flags), (PING, ACK));
    assert_eq!(f[0].1, b"12345678");
    assert_eq!(
        c.feed(&frame(PING, 0, 0, b"1234567")).unwrap_err().code,
        FRAME_SIZE_ERROR
    );
}

#[test]
fn goaway_refuses_streams_above_last_id() {
    let mut c = Client::ready(cfg(), &[]);
    let mut srv = Server::new();
    for _ in 0..3 {
        c.get("/");
    }
    let mut p = 1u32.to_be_bytes().to_vec();
    p.extend_from_slice(&NO_ERROR.to_be_bytes());
    p.extend_from_slice(b"debug data");
    c.feed(&frame(GOAWAY, 0, 0, &p)).unwrap();
    assert_eq!(
        c.events,
        [
            Ev::GoAway(1, NO_ERROR, 2),
            Ev::Reset(3, REFUSED_STREAM),
            Ev::Reset(5, REFUSED_STREAM)
        ]
    );
    assert_eq!(c.conn.goaway(), Some((1, NO_ERROR)));
    assert!(!c.conn.can_open());
    assert_eq!(
        c.conn.send_request(
            &Request {
                method: b"GET",
                scheme: b"http",
                authority: b"a",
                path: b"/",
                headers: &[],
                body: b""
            },
            &mut c.out
        ),
        Err(SendError::GoingAway)
    );
    // Stream 1 finishes normally.
    c.events.clear();
    c.feed(&srv.headers(1, &[(":status", "200")], true))
        .unwrap();
    assert_eq!(c.events, [status(1, 200), Ev::Complete(1, 200)]);
    assert_eq!(c.conn.open_streams(), 0);
}

#[test]
fn rst_stream_is_reported_with_its_code() {
    let mut c = Client::ready(cfg(), &[]);
    c.get("/");
    c.get("/");
    c.feed(&frame(RST_STREAM, 0, 3, &CANCEL.to_be_bytes()))
        .unwrap();
    assert_eq!(c.events, [Ev::Reset(3, CANCEL)]);
    assert_eq!(c.conn.open_streams(), 1);
    // Frames after the reset on that stream are ignored.
    c.feed(&frame(DATA, END_STREAM, 3, b"late")).unwrap();
    c.feed(&frame(RST_STREAM, 0, 3, &CANCEL.to_be_bytes()))
        .unwrap();
    assert_eq!(c.events.len(), 1);
    // Our own reset: RST_STREAM written, no event, the slot is free.
    c.out.clear();
    c.conn.reset(1, CANCEL, &mut c.out);
    let f = c.take_out();
    assert_eq!((f[0].0.kind, f[0].0.stream), (RST_STREAM, 1));
    assert_eq!(c.conn.open_streams(), 0);
    // On an idle stream: connection error.
    let err = c.feed(&frame(RST_STREAM, 0, 9, &CANCEL.to_be_bytes()));
    assert_eq!(err.unwrap_err().code, PROTOCOL_ERROR);
}

#[test]
fn max_concurrent_streams_is_honoured() {
    // Our cap before the server's SETTINGS (which would allow 100).
    let mut c = Client::with(ClientConfig {
        max_concurrent_streams_cap: 3,
        ..cfg()
    });
    for _ in 0..3 {
        assert!(c.conn.can_open());
        c.get("/");
    }
    assert!(!c.conn.can_open());
    // The server's lower limit.
    let mut c = Client::ready(cfg(), &[(SETTINGS_MAX_CONCURRENT_STREAMS, 2)]);
    let mut srv = Server::new();
    c.get("/");
    c.get("/");
    assert!(!c.conn.can_open());
    let req = Request {
        method: b"GET",
        scheme: b"http",
        authority: b"a",
        path: b"/",
        headers: &[],
        body: b"",
    };
    assert_eq!(
        c.conn.send_request(&req, &mut c.out),
        Err(SendError::ConcurrencyLimit)
    );
    c.feed(&srv.headers(1, &[(":status", "200")], true))
        .unwrap();
    assert!(c.conn.can_open());
    assert_eq!(c.get("/"), 5);
    // Without the setting in its first SETTINGS, the server allows any number: our cap rules.
    let mut c = Client::ready(
        ClientConfig {
            max_concurrent_streams_cap: 1000,
            ..cfg()
        },
        &[],
    );
    for _ in 0..150 {
        c.get("/");
    }
    assert!(c.conn.can_open());
    // Our GOAWAY stops new streams too.
    c.conn.close(&mut c.out);
    assert!(!c.conn.can_open());
}

#[test]
fn oversized_frame_is_a_frame_size_error() {
    let mut c = Client::ready(cfg(), &[]);
    c.out.clear();
    // Only the header of a 16,385-byte frame: refused before its payload is read.
    let mut head = Vec::new();
    write_head(&mut head, 16_385, DATA, 0, 1);
    let err = c.feed(&head).unwrap_err();
    assert_eq!(err.code, FRAME_SIZE_ERROR);
    let f = c.take_out();
    assert_eq!(f[0].0.kind, GOAWAY);
    assert_eq!(f[0].1[4..], FRAME_SIZE_ERROR.to_be_bytes());
    assert!(c.conn.partial.capacity() <= 16_384 + HEADER_LEN);
}

#[test]
fn push_promise_is_refused_and_unknown_frames_ignored() {
    let mut c = Client::ready(cfg(), &[]);
    c.get("/");
    c.feed(&frame(0xfa, 0xff, 1, b"whatever")).unwrap();
    c.feed(&frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 16])).unwrap();
    assert!(c.events.is_empty());
    let err = c.feed(&frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x82]));
    assert_eq!(err.unwrap_err().code, PROTOCOL_ERROR);
}

/// A server stream exercising most frame kinds, for split feeding.
fn busy_stream() -> Vec<u8> {
    let mut srv = Server::new();
    let mut input = settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 10)]);
    input.extend(frame(PING, 0, 0, b"pingpong"));
    input.extend(window_update(0, 1000));
    let block = srv.block(&[
        (":status", "200"),
        ("server", "test"),
        ("x-long", "zzzzzzzz"),
    ]);
    input.extend(frame(HEADERS, 0, 1, &block[..5]));
    input.extend(frame(CONTINUATION, END_HEADERS, 1, &block[5..]));
    input.extend(frame(DATA, PADDED, 1, b"\x02hello\0\0"));
    input.extend(srv.headers(3, &[(":status", "404")], true));
    input.extend(frame(0x20, 0, 0, b"unknown"));
    input.extend(frame(DATA, END_STREAM, 1, b" world"));
    input.extend(frame(RST_STREAM, 0, 5, &CANCEL.to_be_bytes()));
    input
}

fn run_split(pieces: &[&[u8]]) -> (Vec<Ev>, Vec<u8>, Result<(), ConnError>) {
    let mut c = Client::with(cfg());
    for _ in 0..3 {
        c.get("/");
    }
    c.out.clear();
    let mut r = Ok(());
    for p in pieces {
        r = c.feed(p);
        if r.is_err() {
            break;
        }
    }
    (c.events, c.out, r)
}

#[test]
fn split_at_every_byte_boundary_decodes_identically() {
    let input = busy_stream();
    let whole = run_split(&[&input]);
    assert!(whole.2.is_ok());
    assert_eq!(
        whole.0,
        [
            status(1, 200),
            Ev::Header(1, "server".into(), "test".into()),
            Ev::Header(1, "x-long".into(), "zzzzzzzz".into()),
            Ev::Data(1, b"hello".to_vec()),
            status(3, 404),
            Ev::Complete(3, 404),
            Ev::Data(1, b" world".to_vec()),
            Ev::Complete(1, 200),
            Ev::Reset(5, CANCEL),
        ]
    );
    for cut in 0..=input.len() {
        let (a, b) = input.split_at(cut);
        assert_eq!(run_split(&[a, b]), whole, "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run_split(&bytes), whole, "byte by byte");
    for n in [2, 3, 7, 9, 10, 13] {
        let pieces: Vec<&[u8]> = input.chunks(n).collect();
        assert_eq!(run_split(&pieces), whole, "pieces of {n}");
    }
}

#[test]
fn large_request_header_block_uses_continuation() {
    let mut c = Client::ready(cfg(), &[]);
    let big = vec![b'a'; 40_000];
    let req = Request {
        method: b"GET",
        scheme: b"http",
        authority: b"a",
        path: b"/",
        headers: &[(b"x-big", &big)],
        body: b"",
    };
    c.conn.send_request(&req, &mut c.out).unwrap();
    let f = c.take_out();
    let kinds: Vec<(u8, u8)> = f.iter().map(|(h, _)| (h.kind, h.flags)).collect();
    assert_eq!(
        kinds,
        [
            (HEADERS, END_STREAM),
            (CONTINUATION, 0),
            (CONTINUATION, END_HEADERS)
        ]
    );
    assert!(f.iter().all(|(_, p)| p.len() <= 16_384));
    let block: Vec<u8> = f.iter().flat_map(|(_, p)| p.clone()).collect();
    let mut dec = hpack::Decoder::new(4096);
    let mut n = 0;
    dec.decode(&block, usize::MAX, &mut |name, v| {
        if name == b"x-big" {
            assert_eq!(v, &big[..]);
        }
        n += 1;
    })
    .unwrap();
    assert_eq!(n, 5);
}

#[test]
fn peer_header_table_size_is_followed_by_the_encoder() {
    let mut c = Client::ready(cfg(), &[(SETTINGS_HEADER_TABLE_SIZE, 0)]);
    c.get("/a");
    let f = c.take_out();
    // A size update to 0 first, and nothing is indexed: the next request repeats the literals.
    assert_eq!(f[0].1[0], 0x20);
    c.get("/a");
    let g = c.take_out();
    assert_eq!(g[0].1.len(), f[0].1.len() - 1);
}

#[test]
fn frames_on_streams_we_never_opened_are_connection_errors() {
    let mut srv = Server::new();
    for (input, code) in [
        (frame(DATA, 0, 1, b"x"), PROTOCOL_ERROR),
        (frame(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
        (srv.headers(2, &[(":status", "200")], true), PROTOCOL_ERROR),
        (frame(HEADERS, END_HEADERS, 0, &[0x88]), PROTOCOL_ERROR),
        (frame(PRIORITY, 0, 0, &[0; 5]), PROTOCOL_ERROR),
        (frame(GOAWAY, 0, 0, &[0; 7]), FRAME_SIZE_ERROR),
        (frame(WINDOW_UPDATE, 0, 0, &[0; 3]), FRAME_SIZE_ERROR),
        (window_update(0, 0), PROTOCOL_ERROR),
    ] {
        let mut c = Client::ready(cfg(), &[]);
        assert_eq!(c.feed(&input).unwrap_err().code, code, "{input:02x?}");
        assert!(!c.conn.can_open());
    }
}

#[test]
fn close_says_goaway_and_ids_run_out() {
    let mut c = Client::ready(cfg(), &[]);
    c.conn.close(&mut c.out);
    let f = c.take_out();
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.stream), (GOAWAY, 0));
    assert_eq!(f[0].1, [0; 8]);
    c.conn.close(&mut c.out);
    assert!(c.out.is_empty(), "one GOAWAY only");

    let mut c = Client::ready(cfg(), &[]);
    c.conn.next_id = MAX_31;
    assert_eq!(c.get("/"), MAX_31);
    assert!(!c.conn.can_open());
    let req = Request {
        method: b"GET",
        scheme: b"http",
        authority: b"a",
        path: b"/",
        headers: &[],
        body: b"",
    };
    assert_eq!(
        c.conn.send_request(&req, &mut c.out),
        Err(SendError::IdsExhausted)
    );
}

fn pings(n: u64) -> Vec<u8> {
    (0..n)
        .flat_map(|i| frame(PING, 0, 0, &i.to_be_bytes()))
        .collect()
}

/// Issue 26: a server that floods PINGs or SETTINGS and never reads. Past `max_outbound_ack`
/// ACKs waiting in `out` (nghttp2's cap, 1000 by default), the connection fails with
/// ENHANCE_YOUR_CALM and `flood` set, its GOAWAY queued, and `out` stops growing.
#[test]
fn control_frames_queued_for_a_server_that_does_not_read_are_capped() {
    for flood in [
        pings(1),
        settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 100)]),
    ] {
        let mut c = Client::ready(cfg(), &[]);
        // `out` is never emptied: nothing is written, as when the server's window is full.
        c.out.extend_from_slice(b"unwritten");
        for i in 0..DEFAULT_MAX_OUTBOUND_ACK {
            c.feed(&flood).unwrap_or_else(|e| panic!("frame {i}: {e}"));
        }
        let err = c.feed(&flood).unwrap_err();
        assert_eq!((err.code, err.flood), (ENHANCE_YOUR_CALM, true), "{err}");
        assert_eq!(c.conn.error(), Some(err));
        let f = frames(&c.out[b"unwritten".len()..]);
        assert_eq!(
            f.len() as u32,
            DEFAULT_MAX_OUTBOUND_ACK + 2,
            "ACKs, then GOAWAY"
        );
        let (h, p) = f.last().unwrap();
        assert_eq!(h.kind, GOAWAY);
        assert_eq!(p[4..8], ENHANCE_YOUR_CALM.to_be_bytes());
        // Dead: nothing more is queued, whatever comes.
        let len = c.out.len();
        assert_eq!(c.feed(&pings(100)).unwrap_err(), err);
        assert_eq!(c.out.len(), len);
    }
}

#[test]
fn control_frames_count_only_while_unwritten() {
    // A server that reads: `out` is emptied after each read, and 100,000 PINGs are answered.
    let mut c = Client::ready(cfg(), &[]);
    let batch = pings(500);
    for _ in 0..200 {
        c.feed(&batch).unwrap();
        assert_eq!(c.out.len(), 500 * 17);
        c.out.clear();
    }
    // A thousand in one read are fine; a thousand and one are a flood (as nghttp2, which
    // queues a whole read before it writes).
    let mut c = Client::ready(cfg(), &[]);
    c.feed(&pings(1000)).unwrap();
    let mut c = Client::ready(cfg(), &[]);
    assert!(c.feed(&pings(1001)).unwrap_err().flood);
    // A protocol error is not a flood.
    let mut c = Client::ready(cfg(), &[]);
    let err = c.feed(&frame(PING, 0, 1, &[0; 8])).unwrap_err();
    assert_eq!((err.code, err.flood), (PROTOCOL_ERROR, false));
}

#[test]
fn window_updates_and_resets_count_against_the_cap() {
    let small = ClientConfig {
        max_outbound_ack: 2,
        ..cfg()
    };
    // DATA before a response head: a stream error each, answered with RST_STREAM.
    let mut c = Client::ready(small, &[]);
    let ids: Vec<u32> = (0..3).map(|_| c.get("/")).collect();
    c.out.truncate(1); // unwritten bytes remain
    c.feed(&frame(DATA, 0, ids[0], b"x")).unwrap();
    c.feed(&frame(DATA, 0, ids[1], b"x")).unwrap();
    assert!(c.feed(&frame(DATA, 0, ids[2], b"x")).unwrap_err().flood);
    // A connection WINDOW_UPDATE is one more control frame.
    let mut c = Client::ready(
        ClientConfig {
            max_outbound_ack: 1,
            initial_window_size: 65_535,
            ..cfg()
        },
        &[],
    );
    let id = c.get("/");
    let mut srv = Server::new();
    c.feed(&srv.headers(id, &[(":status", "200")], false))
        .unwrap();
    c.out.truncate(1);
    c.feed(&pings(1)).unwrap();
    // 40,000 bytes: past half the stream's and the connection's window, two WINDOW_UPDATEs.
    let err = c.feed(&frame(DATA, 0, id, &[0; 16_000])).and_then(|_| {
        c.feed(&frame(DATA, 0, id, &[0; 16_000]))?;
        c.feed(&frame(DATA, 0, id, &[0; 8_000]))
    });
    assert!(err.unwrap_err().flood);
}
