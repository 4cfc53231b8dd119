//! `headroom_proto::ws` against a real, independent WebSocket server: Debian's
//! python3-websockets running `scripts/ws_echo.py` (see `scripts/ws-echo.sh`).
//!
//! The server's URL comes from `HEADROOM_WS_URL` (`export HEADROOM_WS_URL=$(scripts/ws-echo.sh
//! start)`); when it is unset, the first test runs `scripts/ws-echo.sh start` itself (which
//! installs the package if missing and is idempotent). The client is a small blocking
//! `TcpStream` loop written here, feeding the decoders whatever each `read` returned, as the
//! engine will. Every read has a timeout and every test a deadline; traffic stays on 127.0.0.1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use headroom_proto::ws::{
    encode_close, encode_frame, encode_handshake, encode_message, encode_ping, encode_pong,
    Decoded, FrameDecoder, Handshake, HandshakeDecoder, HandshakeMeta, MessageKind, Opcode,
    WsError,
};

const DEADLINE: Duration = Duration::from_secs(20);

/// `host:port` of the server, started once per test binary if need be.
fn server() -> &'static str {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        let url = std::env::var("HEADROOM_WS_URL").unwrap_or_else(|_| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = std::process::Command::new(root.join("scripts/ws-echo.sh"))
                .arg("start")
                .current_dir(&root)
                .output()
                .expect("run scripts/ws-echo.sh start");
            assert!(
                out.status.success(),
                "scripts/ws-echo.sh start failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        });
        let addr = url
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .to_owned();
        assert!(addr.starts_with("127.0.0.1:"), "loopback only, not {addr}");
        addr
    })
}

/// What the client saw, in a comparable form.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Msg(MessageKind, Vec<u8>, u32),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
}

struct Client {
    stream: TcpStream,
    dec: FrameDecoder,
    /// Bytes read but not yet consumed by the decoder.
    pending: Vec<u8>,
    /// Everything the server sent, as read (for the recorded-stream test).
    recording: Vec<u8>,
    mask_state: u32,
    started: Instant,
    /// Payloads are kept (set_keep_payload) and returned in `Ev::Msg`.
    keep: bool,
}

impl Client {
    fn connect(path: &str, protocol: Option<&str>) -> (Client, HandshakeMeta) {
        let addr = server();
        let stream = TcpStream::connect(addr).expect("connect to the echo server");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        let mut c = Client {
            stream,
            dec: FrameDecoder::new(),
            pending: Vec::new(),
            recording: Vec::new(),
            mask_state: 0x9e37_79b9,
            started: Instant::now(),
            keep: true,
        };
        c.dec.set_keep_payload(true);
        let key: [u8; 16] = std::array::from_fn(|_| c.next_mask()[0]);
        let mut req = Vec::new();
        encode_handshake(
            addr,
            path,
            protocol,
            [("Origin", "http://127.0.0.1")],
            &key,
            &mut req,
        );
        c.stream.write_all(&req).unwrap();
        let mut hs = HandshakeDecoder::new(&key);
        loop {
            let n = c.read_some();
            assert!(n > 0, "server closed during the handshake");
            let (used, state) = hs.decode(&c.pending, protocol).expect("handshake accepted");
            c.pending.drain(..used);
            if let Handshake::Done(meta) = state {
                return (c, meta);
            }
        }
    }

    fn next_mask(&mut self) -> [u8; 4] {
        self.mask_state = self
            .mask_state
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        self.mask_state.to_le_bytes()
    }

    fn masks(&mut self) -> impl FnMut() -> [u8; 4] + '_ {
        move || self.next_mask()
    }

    /// One `read` into `pending`; 0 at EOF.
    fn read_some(&mut self) -> usize {
        assert!(self.started.elapsed() < DEADLINE, "test deadline passed");
        let mut buf = [0u8; 16 * 1024];
        let n = self.stream.read(&mut buf).expect("read (5 s timeout)");
        self.pending.extend_from_slice(&buf[..n]);
        self.recording.extend_from_slice(&buf[..n]);
        n
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next event, reading as needed; `Err` for a decoder error or EOF (as `Incomplete` /
    /// `NoClose` from `eof`).
    fn next(&mut self) -> Result<Ev, WsError> {
        loop {
            let (used, ev) = self.dec.decode(&self.pending)?;
            self.pending.drain(..used);
            let ev = match ev {
                Decoded::NeedMore => {
                    if self.read_some() == 0 {
                        self.dec.eof()?;
                        panic!("EOF after a close frame, while waiting for an event");
                    }
                    continue;
                }
                Decoded::Message(m) if self.keep => {
                    assert_eq!(m.len as usize, self.dec.payload().len());
                    Ev::Msg(m.kind, self.dec.payload().to_vec(), m.frames)
                }
                Decoded::Message(m) => {
                    assert!(self.dec.payload().is_empty(), "payloads are not kept");
                    Ev::Msg(m.kind, vec![0; m.len as usize], m.frames)
                }
                Decoded::Ping { .. } => Ev::Ping(self.dec.control_payload().to_vec()),
                Decoded::Pong { .. } => Ev::Pong(self.dec.control_payload().to_vec()),
                Decoded::Close(c) => Ev::Close(c.code, self.dec.close_reason().to_owned()),
            };
            return Ok(ev);
        }
    }

    /// After the close handshake: the server must close the TCP connection.
    fn expect_eof(&mut self) {
        assert!(
            self.pending.is_empty(),
            "bytes after close: {:?}",
            self.pending
        );
        assert_eq!(
            self.read_some(),
            0,
            "the server closes after the close handshake"
        );
        assert_eq!(self.dec.eof(), Ok(()));
    }

    fn close(&mut self, code: u16, reason: &str) {
        let mut out = Vec::new();
        let mask = self.next_mask();
        encode_close(&mut out, Some((code, reason)), mask).unwrap();
        self.send(&out);
    }
}

fn text_payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

fn binary_payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 % 256) as u8).collect()
}

#[test]
fn handshake_is_checked_and_accepted() {
    let (mut c, meta) = Client::connect("/echo", None);
    assert_eq!(meta.protocol, None);
    let head = String::from_utf8_lossy(&c.recording[..meta.head_len]).into_owned();
    eprintln!("handshake response ({} bytes):\n{head}", meta.head_len);
    assert!(head.starts_with("HTTP/1.1 101 "));
    assert!(
        head.contains("websockets/"),
        "the independent server answered"
    );
    // Offering a subprotocol the server does not speak: it selects none, which is allowed.
    let (mut c2, meta) = Client::connect("/echo", Some("chat, superchat"));
    assert_eq!(meta.protocol, None);
    c2.close(1000, "");
    assert_eq!(c2.next(), Ok(Ev::Close(Some(1000), String::new())));
    c.close(1000, "");
    assert_eq!(c.next(), Ok(Ev::Close(Some(1000), String::new())));
}

#[test]
fn echo_of_every_length_form() {
    let (mut c, _) = Client::connect("/echo", None);
    let sizes = [0usize, 1, 125, 126, 65_535, 65_536, 1 << 20];
    for kind in [MessageKind::Text, MessageKind::Binary] {
        for size in sizes {
            let payload = match kind {
                MessageKind::Text => text_payload(size),
                MessageKind::Binary => binary_payload(size),
            };
            let mut out = Vec::new();
            encode_message(&mut out, kind, &payload, 1, c.masks());
            let t = Instant::now();
            c.send(&out);
            let got = c.next().unwrap();
            eprintln!(
                "{kind:?} {size} bytes: {} bytes on the wire, echoed in {:?}",
                out.len(),
                t.elapsed()
            );
            assert_eq!(got, Ev::Msg(kind, payload, 1), "{kind:?} of {size} bytes");
        }
    }
    c.close(1000, "");
    assert_eq!(c.next(), Ok(Ev::Close(Some(1000), String::new())));
    c.expect_eof();
}

#[test]
fn fragmented_message_with_a_ping_inside_is_echoed_whole() {
    let (mut c, _) = Client::connect("/echo", None);
    // Multi-byte characters: the even split cuts some of them across frames.
    let text = "fragments \u{2713} of \u{1d11e} one message, ".repeat(400);
    let bytes = text.as_bytes();
    let mut first = Vec::new();
    encode_message(&mut first, MessageKind::Text, bytes, 7, c.masks());
    // Send the frames with a ping between the third and fourth.
    let frames = split_client_frames(&first);
    assert_eq!(frames.len(), 7);
    for (i, f) in frames.iter().enumerate() {
        c.send(f);
        if i == 2 {
            let mut ping = Vec::new();
            let mask = c.next_mask();
            encode_ping(&mut ping, b"between fragments", mask).unwrap();
            c.send(&ping);
        }
    }
    assert_eq!(c.next(), Ok(Ev::Pong(b"between fragments".to_vec())));
    assert_eq!(
        c.next(),
        Ok(Ev::Msg(MessageKind::Text, bytes.to_vec(), 1)),
        "echoed whole, in one frame"
    );
    eprintln!("{} bytes sent in 7 frames came back in 1", bytes.len());
    c.close(1000, "");
    assert_eq!(c.next(), Ok(Ev::Close(Some(1000), String::new())));
    c.expect_eof();
}

/// Splits a buffer of client frames into frames (their lengths from their headers).
fn split_client_frames(mut buf: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    while !buf.is_empty() {
        let (len, at) = match buf[1] & 0x7f {
            126 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
                10,
            ),
            n => (n as usize, 2),
        };
        let end = at + 4 + len;
        frames.push(buf[..end].to_vec());
        buf = &buf[end..];
    }
    frames
}

#[test]
fn ping_gets_a_pong_with_the_same_payload() {
    let (mut c, _) = Client::connect("/echo", None);
    for payload in [&b""[..], b"hello", &[0xA5; 125]] {
        let mut out = Vec::new();
        let mask = c.next_mask();
        encode_ping(&mut out, payload, mask).unwrap();
        let t = Instant::now();
        c.send(&out);
        assert_eq!(c.next(), Ok(Ev::Pong(payload.to_vec())));
        eprintln!("ping of {} bytes: pong in {:?}", payload.len(), t.elapsed());
    }
    c.close(1000, "");
    assert_eq!(c.next(), Ok(Ev::Close(Some(1000), String::new())));
}

#[test]
fn server_ping_is_answered_with_our_pong() {
    let (mut c, _) = Client::connect("/ping?payload=are-you-there", None);
    assert_eq!(c.next(), Ok(Ev::Ping(b"are-you-there".to_vec())));
    let mut out = Vec::new();
    let mask = c.next_mask();
    let payload = c.dec.control_payload().to_vec();
    encode_pong(&mut out, &payload, mask).unwrap();
    c.send(&out);
    // The server waited for our pong (and checked its payload) before saying this.
    assert_eq!(
        c.next(),
        Ok(Ev::Msg(
            MessageKind::Text,
            b"pong:are-you-there".to_vec(),
            1
        ))
    );
    c.close(1000, "");
    assert_eq!(c.next(), Ok(Ev::Close(Some(1000), String::new())));
}

#[test]
fn close_handshake_with_code_1000() {
    // Client-initiated: the server echoes the code and reason, then closes the connection.
    let (mut c, _) = Client::connect("/echo", None);
    c.close(1000, "done here");
    assert_eq!(c.next(), Ok(Ev::Close(Some(1000), "done here".to_owned())));
    c.expect_eof();
    // Server-initiated: we answer with the same code, then the server closes.
    let (mut c, _) = Client::connect("/close?code=1000&reason=bye", None);
    assert_eq!(c.next(), Ok(Ev::Close(Some(1000), "bye".to_owned())));
    c.close(1000, "");
    c.expect_eof();
    let (mut c, _) = Client::connect("/close?code=4000&reason=app", None);
    assert_eq!(c.next(), Ok(Ev::Close(Some(4000), "app".to_owned())));
    c.close(4000, "");
    c.expect_eof();
}

#[test]
fn server_sends_many_messages_then_closes() {
    let (mut c, _) = Client::connect("/count?n=500&size=1000&type=binary", None);
    c.dec.set_keep_payload(false);
    c.keep = false;
    let t = Instant::now();
    let mut n = 0;
    loop {
        match c.next().unwrap() {
            Ev::Msg(MessageKind::Binary, payload, 1) if payload.len() == 1000 => n += 1,
            Ev::Close(code, reason) => {
                assert_eq!((code, reason.as_str()), (Some(1000), "done"));
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(n, 500);
    eprintln!(
        "500 binary messages of 1000 bytes in {:?} ({} bytes read)",
        t.elapsed(),
        c.recording.len()
    );
    c.close(1000, "");
    c.expect_eof();
}

#[test]
fn our_errors_and_the_servers_agree() {
    // An unmasked client frame is a protocol error for the server: it closes with 1002.
    let (mut c, _) = Client::connect("/echo", None);
    let mut out = Vec::new();
    encode_frame(&mut out, true, Opcode::Text, b"unmasked", None);
    c.send(&out);
    assert!(matches!(c.next(), Ok(Ev::Close(Some(1002), _))));
    // A message beyond our limit fails before its payload is read, asking for 1009.
    let (mut c, _) = Client::connect("/count?n=1&size=2000&type=text", None);
    c.dec.set_max_message(1000);
    let err = c.next().unwrap_err();
    assert_eq!((err, err.close_code()), (WsError::MessageTooLarge, 1009));
}

/// Feeds a recorded server stream (handshake response and frames) in the given pieces.
fn replay(key: &[u8; 16], pieces: &[&[u8]]) -> Vec<Result<Ev, WsError>> {
    let mut hs = HandshakeDecoder::new(key);
    let mut dec = FrameDecoder::new();
    dec.set_keep_payload(true);
    let mut evs = Vec::new();
    for &piece in pieces {
        let mut p = piece;
        if !hs.is_done() {
            match hs.decode(p, None) {
                Ok((n, _)) => p = &p[n..],
                Err(e) => {
                    evs.push(Err(e));
                    return evs;
                }
            }
        }
        loop {
            match dec.decode(p) {
                Err(e) => {
                    evs.push(Err(e));
                    return evs;
                }
                Ok((_, Decoded::NeedMore)) => break,
                Ok((n, ev)) => {
                    evs.push(Ok(match ev {
                        Decoded::Message(m) => Ev::Msg(m.kind, dec.payload().to_vec(), m.frames),
                        Decoded::Ping { .. } => Ev::Ping(dec.control_payload().to_vec()),
                        Decoded::Pong { .. } => Ev::Pong(dec.control_payload().to_vec()),
                        Decoded::Close(c) => Ev::Close(c.code, dec.close_reason().to_owned()),
                        Decoded::NeedMore => unreachable!(),
                    }));
                    p = &p[n..];
                }
            }
        }
    }
    evs
}

#[test]
fn recorded_server_stream_decodes_the_same_at_every_split_point() {
    // Record /mix: every frame kind, a fragmented text with a ping between fragments, a big
    // binary, multi-byte UTF-8, a close.
    let key = *b"recorded-key-16b";
    let stream = TcpStream::connect(server()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut stream = stream;
    let mut req = Vec::new();
    encode_handshake(server(), "/mix", None, std::iter::empty(), &key, &mut req);
    stream.write_all(&req).unwrap();
    let mut recording = Vec::new();
    let started = Instant::now();
    let mut buf = [0u8; 64 * 1024];
    let mut reads = 0;
    // Until the close frame is in (the server then waits for ours).
    while !replay(&key, &[&recording])
        .last()
        .is_some_and(|e| matches!(e, Ok(Ev::Close(..))))
    {
        assert!(started.elapsed() < DEADLINE);
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "EOF before the close frame");
        recording.extend_from_slice(&buf[..n]);
        reads += 1;
    }
    let mut out = Vec::new();
    encode_close(&mut out, Some((1000, "")), [1, 2, 3, 4]).unwrap();
    stream.write_all(&out).unwrap();

    let whole = replay(&key, &[&recording]);
    let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let want: Vec<Result<Ev, WsError>> = vec![
        Ok(Ev::Msg(MessageKind::Text, b"hello".to_vec(), 1)),
        Ok(Ev::Msg(MessageKind::Binary, vec![], 1)),
        Ok(Ev::Msg(MessageKind::Text, vec![b't'; 125], 1)),
        Ok(Ev::Msg(MessageKind::Binary, vec![b'b'; 126], 1)),
        Ok(Ev::Msg(MessageKind::Binary, big, 1)),
        Ok(Ev::Ping(b"are you there?".to_vec())),
        Ok(Ev::Ping(b"mid".to_vec())),
        Ok(Ev::Msg(
            MessageKind::Text,
            "fragmented text \u{2713}".into(),
            4,
        )),
        Ok(Ev::Msg(
            MessageKind::Text,
            "h\u{e9}llo w\u{f6}rld \u{2713} \u{1d11e}".into(),
            1,
        )),
        Ok(Ev::Close(Some(1000), "bye".to_owned())),
    ];
    assert_eq!(whole, want);
    let t = Instant::now();
    for i in 0..=recording.len() {
        let (a, b) = recording.split_at(i);
        assert_eq!(replay(&key, &[a, b]), want, "split at {i}");
    }
    // Three pieces, around the frame boundaries: the small frames before the big binary, and
    // from the end of its payload on (79 bytes of frames follow it).
    let payload_start = recording.len() - 79 - 70_000;
    let edges: Vec<usize> = (0..400.min(payload_start + 16))
        .chain(payload_start + 70_000 - 64..=recording.len())
        .collect();
    let mut pairs = 0u64;
    for (x, &i) in edges.iter().enumerate() {
        for &j in edges[x..].iter().step_by(3) {
            let p = [&recording[..i], &recording[i..j], &recording[j..]];
            assert_eq!(replay(&key, &p), want, "splits at {i}, {j}");
            pairs += 1;
        }
    }
    eprintln!(
        "recorded {} bytes in {reads} reads; {} single splits and {pairs} split pairs agree ({:?})",
        recording.len(),
        recording.len() + 1,
        t.elapsed()
    );
}
