//! Fuzz the AMQP 0-9-1 client connection: frame decoder, handshake and state machine.
//!
//! Input layout: byte 0 holds, in its low 3 bits, how many piece lengths follow, and in bits
//! 3-4 where the stream starts:
//!   0: the input bytes alone (a connection that has just sent its protocol header);
//!   1: after the handshake recorded from RabbitMQ 3.10 (`src/amqp/testdata`): frames from the
//!      start of a ready connection;
//!   2: a prefix of the recorded session (deliveries, confirms, a return, closes), cut where
//!      the next two bytes say, then the input;
//!   3: the same with the recorded refused login.
//! Then the piece lengths, then the rest of the stream. The stream is fed in pieces of those
//! lengths (cycled; a length of 0 feeds an empty slice), looping over events as the engine
//! does, then `eof()`. After a Channel.Close-Ok on channel 1 the driver sends Connection.Close
//! (as the recording did), so the closing state is exercised too.
//!
//! Checked besides "no panic": the `decode` contracts (consumed <= input, `NeedMore` consumes
//! everything, an event at least one byte; errors are sticky; a delivery's head is at most
//! HEAD_LEN bytes and never longer than its body), that the split-frame buffer stays within a
//! frame, and that the split stream gives exactly the same events, reply bytes and ending as
//! the same bytes in one piece.
#![no_main]

use headroom_proto::amqp::{AmqpError, Connection, Login, Method, Progress, Tuning, HEAD_LEN};
use libfuzzer_sys::fuzz_target;

const SESSION: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/amqp/testdata/session.server.bin");
const WRONG: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/amqp/testdata/wrong_password.server.bin");
/// Start, Tune and Open-Ok of `SESSION`.
const HANDSHAKE_LEN: usize = 544;

#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<String>,
    out: Vec<u8>,
    end: Result<(), AmqpError>,
    heartbeats: u64,
}

fn run<'a>(password: &str, pieces: impl Iterator<Item = &'a [u8]>) -> Outcome {
    let login = Login {
        user: "headroom",
        password,
        vhost: "/",
    };
    // The recordings' tuning: frame_max 4096.
    let tuning = Tuning {
        frame_max: 4096,
        ..Tuning::default()
    };
    let mut out = Vec::new();
    let mut ours = Vec::new();
    let mut conn = Connection::with_tuning(&login, tuning, &mut out);
    let mut events = Vec::new();
    let mut end = Ok(());
    'feed: for piece in pieces {
        let mut p = piece;
        loop {
            match conn.decode(p, &mut out) {
                Err(e) => {
                    assert_eq!(conn.decode(&[1, 0, 0], &mut out).map(|r| r.0), Err(e));
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
                    if let Progress::Delivery { head, body_len, .. } = ev {
                        assert!(head.len() <= HEAD_LEN);
                        assert_eq!(head.len() as u64, body_len.min(HEAD_LEN as u64));
                    }
                    let close = ev
                        == Progress::MethodOk {
                            channel: 1,
                            method: Method::ChannelCloseOk,
                        };
                    events.push(format!("{ev:?}"));
                    if close {
                        conn.connection_close(&mut ours, 200);
                    }
                    p = &p[n..];
                }
            }
        }
        assert!(conn.buffer_capacity() <= 2 * 4096 + 64);
    }
    if end.is_ok() {
        end = conn.eof();
    }
    Outcome {
        events,
        out,
        end,
        heartbeats: conn.heartbeats_received(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (prefix, password, rest): (&[u8], &str, &[u8]) = match (flags >> 3) & 3 {
        0 => (&[], "headroom", rest),
        1 => (&SESSION[..HANDSHAKE_LEN], "headroom", rest),
        mode => {
            let (recorded, password) = if mode == 2 {
                (SESSION, "headroom")
            } else {
                (WRONG, "wrong")
            };
            let Some((cut, rest)) = rest.split_first_chunk::<2>() else {
                return;
            };
            let cut = usize::from(u16::from_be_bytes(*cut)) % (recorded.len() + 1);
            (&recorded[..cut], password, rest)
        }
    };
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, tail) = rest.split_at(n_lens);
    let mut stream = prefix.to_vec();
    stream.extend_from_slice(tail);

    let one_shot = run(password, std::iter::once(&stream[..]));
    let pieces: Vec<&[u8]> = headroom_fuzz::Pieces {
        data: &stream,
        lens,
        i: 0,
        done: false,
    }
    .collect();
    let split = run(password, pieces.iter().copied());
    assert_eq!(split, one_shot, "split decoding differs from one-shot");
});
