//! Fuzz the WebSocket client's decoders: the handshake response check and the frame decoder.
//!
//! Input layout: byte 0 holds flags (bit 7: keep payloads; bit 6: the stream starts with the
//! handshake response, checked with the RFC 6455 sample key; bit 5: offer the subprotocols
//! "chat, superchat"; bit 4: a small message limit, 64 bytes times byte 1) and, in its low 3
//! bits, how many of the following bytes are piece lengths; the rest is the byte stream from the
//! "server", fed in pieces of those lengths (cycled; a length of 0 feeds an empty slice), looping
//! over completed units as the engine does, then `eof()`.
//!
//! Checked besides "no panic": the `decode` contracts (consumed <= input, `NeedMore` consumes
//! everything, an event consumes at least one byte), every text message reported is valid UTF-8
//! (when kept) and the kept payload has the reported length, the incremental UTF-8 validator
//! agrees with `std::str::from_utf8` on the stream split the same way, and the split stream
//! decodes exactly like the same bytes in one piece (same events, same error).
#![no_main]

use headroom_proto::ws::{
    Decoded, FrameDecoder, Handshake, HandshakeDecoder, HandshakeMeta, MessageKind, Utf8Validator,
    WsError,
};
use libfuzzer_sys::fuzz_target;

const KEY: &[u8; 16] = b"the sample nonce";

#[derive(Debug, PartialEq)]
enum Ev {
    Handshake(HandshakeMeta),
    Msg(MessageKind, u64, u32, Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
}

#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<Ev>,
    end: Result<(), WsError>,
}

struct Setup {
    keep: bool,
    handshake: bool,
    offered: Option<&'static str>,
    max_message: Option<u64>,
}

fn run<'a>(s: &Setup, pieces: impl Iterator<Item = &'a [u8]>) -> Outcome {
    let mut hs = HandshakeDecoder::new(KEY);
    let mut dec = FrameDecoder::new();
    dec.set_keep_payload(s.keep);
    if let Some(max) = s.max_message {
        dec.set_max_message(max);
    }
    let mut events = Vec::new();
    for piece in pieces {
        let mut p = piece;
        if s.handshake && !hs.is_done() {
            match hs.decode(p, s.offered) {
                Err(e) => {
                    return Outcome {
                        events,
                        end: Err(e),
                    }
                }
                Ok((n, Handshake::NeedMore)) => {
                    assert_eq!(n, p.len(), "handshake NeedMore must consume all input");
                    continue;
                }
                Ok((n, Handshake::Done(meta))) => {
                    assert!(n <= p.len());
                    events.push(Ev::Handshake(meta));
                    p = &p[n..];
                }
            }
        }
        loop {
            match dec.decode(p) {
                Err(e) => {
                    assert_eq!(dec.decode(b""), Err(e), "errors stick");
                    return Outcome {
                        events,
                        end: Err(e),
                    };
                }
                Ok((n, Decoded::NeedMore)) => {
                    assert_eq!(n, p.len(), "NeedMore must consume all input");
                    break;
                }
                Ok((n, ev)) => {
                    assert!(n > 0 && n <= p.len(), "event consumed {n} of {}", p.len());
                    events.push(match ev {
                        Decoded::Message(m) => {
                            let payload = dec.payload().to_vec();
                            if s.keep {
                                assert_eq!(payload.len() as u64, m.len);
                                if m.kind == MessageKind::Text {
                                    assert!(std::str::from_utf8(&payload).is_ok());
                                }
                            } else {
                                assert!(payload.is_empty());
                            }
                            assert!(m.frames >= 1);
                            Ev::Msg(m.kind, m.len, m.frames, payload)
                        }
                        Decoded::Ping { len } => {
                            assert_eq!(usize::from(len), dec.control_payload().len());
                            Ev::Ping(dec.control_payload().to_vec())
                        }
                        Decoded::Pong { len } => {
                            assert_eq!(usize::from(len), dec.control_payload().len());
                            Ev::Pong(dec.control_payload().to_vec())
                        }
                        Decoded::Close(c) => {
                            assert_eq!(usize::from(c.reason_len), dec.close_reason().len());
                            Ev::Close(c.code, dec.close_reason().to_owned())
                        }
                        Decoded::NeedMore => unreachable!(),
                    });
                    p = &p[n..];
                    if p.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    let end = if s.handshake && !hs.is_done() {
        Err(WsError::Incomplete)
    } else {
        dec.eof()
    };
    assert!(!dec.in_progress());
    Outcome { events, end }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (limit, rest) = match rest.split_first() {
        Some((&l, r)) if flags & 0x10 != 0 => (Some(64 * u64::from(l)), r),
        _ => (None, rest),
    };
    let setup = Setup {
        keep: flags & 0x80 != 0,
        handshake: flags & 0x40 != 0,
        offered: (flags & 0x20 != 0).then_some("chat, superchat"),
        max_message: limit,
    };
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, stream) = rest.split_at(n_lens);
    let pieces = || headroom_fuzz::Pieces {
        data: stream,
        lens,
        i: 0,
        done: false,
    };

    let one_shot = run(&setup, std::iter::once(stream));
    let split = run(&setup, pieces());
    assert_eq!(split, one_shot, "split decoding differs from one-shot");

    let mut v = Utf8Validator::default();
    let valid = pieces().all(|p| v.feed(p)) && v.is_complete();
    assert_eq!(
        valid,
        std::str::from_utf8(stream).is_ok(),
        "incremental UTF-8"
    );
});
