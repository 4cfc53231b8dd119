//! Fuzz the PostgreSQL backend message decoder and the client connection state machine.
//!
//! Input layout: byte 0 holds, in its low 3 bits, how many piece lengths follow, and in bits
//! 3-4 where the stream starts:
//!   0: the input bytes alone (a connection that has just sent its StartupMessage);
//!   1: after a canned trust login (AuthenticationOk, ReadyForQuery): units from the start;
//!   2: a prefix of a real MD5 session recorded from PostgreSQL 15 (`src/pg/testdata`), cut
//!      where the next two bytes say, then the input;
//!   3: the same with a recorded SCRAM-SHA-256 login (fixed nonce, so it replays).
//! Then the piece lengths, then the rest of the stream. The stream is fed in pieces of those
//! lengths (cycled; a length of 0 feeds an empty slice), looping over events as the engine
//! does, then `eof()`.
//!
//! Checked besides "no panic": the `decode` contracts (consumed <= input, `NeedMore`/`None`
//! consume everything, an event at least one byte; errors are sticky), and that the split
//! stream gives exactly the same messages, events, reply bytes and ending as the same bytes in
//! one piece.
#![no_main]

use headroom_proto::pg::{Connection, Login, MessageDecoder, PgError, Progress};
use libfuzzer_sys::fuzz_target;

const MD5_SESSION: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/pg/testdata/md5_session.server.bin");
const SCRAM_LOGIN: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/pg/testdata/scram_login.server.bin");
const TRUST_LOGIN: &[u8] = b"R\0\0\0\x08\0\0\0\0Z\0\0\0\x05I";
const NONCE: &[u8] = b"headroom-pg-tests!";

#[derive(Debug, PartialEq)]
struct Outcome {
    messages: Vec<(u8, u32, Vec<u8>)>,
    msg_end: Result<bool, PgError>,
    events: Vec<Progress>,
    out: Vec<u8>,
    end: Result<(), PgError>,
    last_error: String,
}

fn run<'a>(user: &str, pieces: impl Iterator<Item = &'a [u8]> + Clone) -> Outcome {
    // The framing layer alone, every body kept but DataRows (as the connection does).
    let mut dec = MessageDecoder::new();
    dec.set_skip(b'D', true);
    dec.set_max_len(64 * 1024);
    let mut messages = Vec::new();
    let mut msg_end = Ok(false);
    'framing: for piece in pieces.clone() {
        let mut p = piece;
        loop {
            match dec.decode(p) {
                Err(e) => {
                    assert_eq!(dec.decode(b"Z\0\0\0\x05I").map(|(n, _)| n), Err(e));
                    msg_end = Err(e);
                    break 'framing;
                }
                Ok((n, None)) => {
                    assert_eq!(n, p.len(), "None must consume all input");
                    break;
                }
                Ok((n, Some(m))) => {
                    assert!(n > 0 && n <= p.len(), "message consumed {n} of {}", p.len());
                    assert!(m.body.is_empty() || m.body.len() == m.len as usize);
                    messages.push((m.tag, m.len, m.body.to_vec()));
                    p = &p[n..];
                }
            }
        }
    }
    if msg_end.is_ok() {
        msg_end = Ok(dec.in_progress());
    }

    // The connection state machine.
    let login = Login {
        user,
        password: "headroom",
        database: "headroom",
        application_name: Some("headroom-proto-tests"),
    };
    let mut out = Vec::new();
    let mut conn = Connection::new(&login, NONCE, &mut out);
    let mut events = Vec::new();
    let mut end = Ok(());
    'feed: for piece in pieces {
        let mut p = piece;
        loop {
            match conn.decode(p, &mut out) {
                Err(e) => {
                    assert_eq!(conn.decode(b"Z\0\0\0\x05I", &mut out), Err(e));
                    assert!(!conn.is_ready());
                    end = Err(e);
                    break 'feed;
                }
                Ok((n, Progress::NeedMore)) => {
                    assert_eq!(n, p.len(), "NeedMore must consume all input");
                    break;
                }
                Ok((n, ev)) => {
                    assert!(n > 0 && n <= p.len(), "{ev:?} consumed {n} of {}", p.len());
                    events.push(ev);
                    p = &p[n..];
                }
            }
        }
    }
    if end.is_ok() {
        end = conn.eof();
    }
    assert!(conn.buffer_capacity() <= 2 * 1024 * 1024);
    Outcome {
        messages,
        msg_end,
        events,
        out,
        end,
        last_error: conn.last_error_message().to_owned(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (prefix, user, rest): (&[u8], &str, &[u8]) = match (flags >> 3) & 3 {
        0 => (&[], "headroom_md5", rest),
        1 => (TRUST_LOGIN, "headroom", rest),
        mode => {
            let (recorded, user) = if mode == 2 {
                (MD5_SESSION, "headroom_md5")
            } else {
                (SCRAM_LOGIN, "headroom_scram")
            };
            let Some((cut, rest)) = rest.split_first_chunk::<2>() else {
                return;
            };
            let cut = usize::from(u16::from_be_bytes(*cut)) % (recorded.len() + 1);
            (&recorded[..cut], user, rest)
        }
    };
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, tail) = rest.split_at(n_lens);
    let mut stream = prefix.to_vec();
    stream.extend_from_slice(tail);

    let one_shot = run(user, std::iter::once(&stream[..]));
    let pieces: Vec<&[u8]> = headroom_fuzz::Pieces {
        data: &stream,
        lens,
        i: 0,
        done: false,
    }
    .collect();
    let split = run(user, pieces.iter().copied());
    assert_eq!(split, one_shot, "split decoding differs from one-shot");
});
