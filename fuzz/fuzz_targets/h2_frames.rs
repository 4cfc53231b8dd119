//! Fuzz the HTTP/2 client connection codec with arbitrary server bytes.
//!
//! Input layout: byte 0 holds flags (bit 7: a small configuration — 2 streams, 100-byte
//! windows, a 64-byte header table and a 300-byte header list bound; bit 6: interleave requests
//! and resets with the feeding) and, in its low 3 bits, how many of the following bytes are
//! piece lengths; the rest is the byte stream from the "server", fed in pieces of those lengths
//! (cycled; a length of 0 feeds an empty slice).
//!
//! Two runs on each input:
//! * split vs one piece: three requests (one with a body larger than the windows) are sent up
//!   front, then the stream is fed split and in one piece; the events, the bytes written and
//!   the ending must be the same (a codec that buffers whole frames cannot differ).
//! * interleaved (bit 6): before each piece, the piece length's low bits choose to send a GET or
//!   a POST (body sized by the length), reset the oldest stream, or say GOAWAY.
//!
//! Checked besides "no panic": open streams never exceed the configured cap, a failed
//! connection stays failed, every event names a stream we opened (or 0 for GOAWAY), and every
//! `Complete` or `Reset` closes a stream only once.
#![no_main]

use headroom_proto::h2::{ClientConfig, ClientConn, ConnError, Event, Request};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
enum Ev {
    Status(u32, u16),
    Header(u32, Vec<u8>, Vec<u8>),
    Data(u32, Vec<u8>),
    Complete(u32, u16),
    Reset(u32, u32),
    GoAway(u32, u32, u32),
}

fn ev(e: Event<'_>) -> Ev {
    match e {
        Event::Status { stream, status } => Ev::Status(stream, status),
        Event::Header {
            stream,
            name,
            value,
        } => Ev::Header(stream, name.to_vec(), value.to_vec()),
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

fn config(small: bool) -> ClientConfig {
    if small {
        ClientConfig {
            max_concurrent_streams_cap: 2,
            initial_window_size: 100,
            max_frame_size: 16_384,
            header_table_size: 64,
            max_header_list_size: 300,
            max_outbound_ack: 8,
        }
    } else {
        ClientConfig::default()
    }
}

const BODY: [u8; 70_000] = [b'b'; 70_000];

fn request(body: &[u8]) -> Request<'_> {
    Request {
        method: if body.is_empty() { b"GET" } else { b"POST" },
        scheme: b"http",
        authority: b"127.0.0.1:8080",
        path: b"/fuzz",
        headers: &[(b"user-agent", b"headroom-fuzz"), (b"X-Mixed-Case", b"v")],
        body,
    }
}

#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<Ev>,
    out: Vec<u8>,
    end: Result<(), ConnError>,
}

/// Checks the per-event invariants against the streams we opened and still hold open.
fn check(e: &Ev, opened: &mut Vec<u32>) {
    match *e {
        Ev::GoAway(..) => {}
        Ev::Complete(id, _) | Ev::Reset(id, _) => {
            let i = opened.iter().position(|&s| s == id);
            assert!(i.is_some(), "{e:?} for a stream not open");
            opened.swap_remove(i.unwrap());
        }
        Ev::Status(id, _) | Ev::Header(id, ..) | Ev::Data(id, _) => {
            assert!(opened.contains(&id), "{e:?} for a stream not open");
        }
    }
}

fn split_run<'a>(cfg: &ClientConfig, pieces: impl Iterator<Item = &'a [u8]>) -> Outcome {
    let mut out = Vec::new();
    let mut conn = ClientConn::new(cfg, &mut out);
    let mut opened = Vec::new();
    for body in [&b""[..], &BODY[..], &b""[..]] {
        if let Ok(id) = conn.send_request(&request(body), &mut out) {
            opened.push(id);
        }
    }
    out.clear();
    let mut events = Vec::new();
    let mut end = Ok(());
    for piece in pieces {
        end = conn.feed(piece, &mut out, &mut |e| events.push(ev(e)));
        if end.is_err() {
            assert_eq!(conn.feed(b"more", &mut Vec::new(), &mut |_| {}), end);
            break;
        }
    }
    for e in &events {
        check(e, &mut opened);
    }
    if end.is_ok() {
        assert_eq!(opened.len() as u32, conn.open_streams());
    }
    Outcome { events, out, end }
}

fn interleaved_run<'a>(cfg: &ClientConfig, lens: &[u8], pieces: impl Iterator<Item = &'a [u8]>) {
    let mut out = Vec::new();
    let mut conn = ClientConn::new(cfg, &mut out);
    let mut opened: Vec<u32> = Vec::new();
    for (i, piece) in pieces.enumerate() {
        let op = lens.get(i % lens.len().max(1)).copied().unwrap_or(0);
        match op & 3 {
            0 => {}
            1 | 2 => {
                let body = if op & 3 == 2 {
                    &BODY[..usize::from(op) * 200]
                } else {
                    &b""[..]
                };
                let could = conn.can_open();
                match conn.send_request(&request(body), &mut out) {
                    Ok(id) => {
                        assert!(could);
                        opened.push(id);
                    }
                    Err(_) => assert!(!could),
                }
            }
            _ if op & 4 != 0 => conn.close(&mut out),
            _ => {
                if let Some(&id) = opened.first() {
                    conn.reset(id, 8, &mut out);
                    opened.remove(0);
                }
            }
        }
        assert!(conn.open_streams() <= cfg.max_concurrent_streams_cap);
        assert_eq!(conn.open_streams() as usize, opened.len());
        let mut events = Vec::new();
        let r = conn.feed(piece, &mut out, &mut |e| events.push(ev(e)));
        for e in &events {
            check(e, &mut opened);
        }
        if r.is_err() {
            assert_eq!(conn.feed(b"x", &mut out, &mut |_| {}), r);
            assert!(!conn.can_open());
            return;
        }
        assert_eq!(conn.open_streams() as usize, opened.len());
        // Keep memory flat over long inputs: the engine flushes `out` after each read.
        out.clear();
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let cfg = config(flags & 0x80 != 0);
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, stream) = rest.split_at(n_lens);
    let pieces = || headroom_fuzz::Pieces {
        data: stream,
        lens,
        i: 0,
        done: false,
    };

    if flags & 0x40 != 0 {
        interleaved_run(&cfg, lens, pieces());
        return;
    }
    let one_shot = split_run(&cfg, std::iter::once(stream));
    let split = split_run(&cfg, pieces());
    assert_eq!(split, one_shot, "split feeding differs from one piece");
});
