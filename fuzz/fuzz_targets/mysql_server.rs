//! Fuzz the MySQL packet decoder and the client connection state machine on server bytes.
//!
//! Input layout: byte 0 holds, in its low 3 bits, how many piece lengths follow; in bits 3-4
//! where the stream starts:
//!   0: the input bytes alone (a connection waiting for the server's greeting);
//!   1: after a canned login (a recorded MariaDB greeting and OK): replies from the start;
//!   2: a prefix of a real session recorded from MariaDB 10.11 with CLIENT_DEPRECATE_EOF
//!      (`src/mysql/testdata`), cut where the next two bytes say, then the input;
//!   3: the same with the session recorded without it (EOF-terminated result sets);
//! and in bit 5 whether the connection asks for TLS (then `tls_started` is called at
//! `StartTls`). Then the piece lengths, then the rest of the stream. The stream is fed in
//! pieces of those lengths (cycled; a length of 0 feeds an empty slice), looping over events
//! as the engine does, then `eof()`. After the login and after each command's final event the
//! next command of a fixed cycle is written (query, prepare, execute, ping, init_db, close), so
//! the connection always has replies to expect.
//!
//! Checked besides "no panic": the `decode` contracts (consumed <= input, `NeedMore`/`None`
//! consume everything, an event at least one byte; errors are sticky), and that the split
//! stream gives exactly the same packets, events, written bytes and ending as the same bytes in
//! one piece.
#![no_main]

use headroom_proto::mysql::{
    Connection, Keep, Login, MysqlError, Options, PacketDecoder, Progress,
};
use libfuzzer_sys::fuzz_target;

const SESSION: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/mysql/testdata/session.server.bin");
const SESSION_EOF: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/mysql/testdata/session_eof.server.bin");
/// The recorded greeting (104 bytes) and the login's OK (11 bytes).
const LOGIN_LEN: usize = 104 + 11;

#[derive(Debug, PartialEq)]
struct Outcome {
    packets: Vec<(u8, u32, u64, bool, Vec<u8>)>,
    packet_end: Result<bool, MysqlError>,
    events: Vec<Progress>,
    out: Vec<u8>,
    end: Result<(), MysqlError>,
    last_error: String,
}

/// The next command of the cycle (`statement`: the last prepared one).
fn command(i: usize, statement: u32, conn: &mut Connection, out: &mut Vec<u8>) {
    match i % 6 {
        0 => conn.com_query(out, "SELECT id, name FROM items"),
        1 => conn.com_stmt_prepare(out, "SELECT ?"),
        2 => conn.com_stmt_execute(out, statement, [Some("1"), None]),
        3 => conn.com_ping(out),
        4 => conn.com_init_db(out, "headroom"),
        _ => {
            conn.com_stmt_close(out, statement);
            conn.com_query(out, "DO 1");
        }
    }
}

fn run<'a>(opts: Options, pieces: impl Iterator<Item = &'a [u8]> + Clone) -> Outcome {
    // The framing layer alone: rows skipped as the connection skips them.
    let mut dec = PacketDecoder::new();
    dec.set_keep(Keep::Terminators);
    dec.set_max_len(64 * 1024);
    let mut packets = Vec::new();
    let mut packet_end = Ok(false);
    'framing: for piece in pieces.clone() {
        let mut p = piece;
        loop {
            match dec.decode(p) {
                Err(e) => {
                    assert_eq!(dec.decode(b"\x01\0\0\0\0").map(|(n, _)| n), Err(e));
                    packet_end = Err(e);
                    break 'framing;
                }
                Ok((n, None)) => {
                    assert_eq!(n, p.len(), "None must consume all input");
                    break;
                }
                Ok((n, Some(m))) => {
                    assert!(n > 0 && n <= p.len(), "packet consumed {n} of {}", p.len());
                    // Kept: the whole payload; skipped: nothing of a non-empty one.
                    assert!(if m.kept {
                        m.body.len() as u64 == m.len
                    } else {
                        m.body.is_empty() && m.len > 0
                    });
                    packets.push((m.seq, m.fragments, m.len, m.kept, m.body.to_vec()));
                    p = &p[n..];
                }
            }
        }
    }
    if packet_end.is_ok() {
        packet_end = Ok(dec.in_progress());
    }

    // The connection state machine.
    let login = Login {
        user: "headroom",
        password: "headroom",
        database: Some("headroom"),
    };
    let mut out = Vec::new();
    let mut conn = Connection::new(&login, opts);
    conn.set_max_packet_len(64 * 1024);
    let mut events = Vec::new();
    let mut end = Ok(());
    let (mut next, mut statement) = (0usize, 0u32);
    'feed: for piece in pieces {
        let mut p = piece;
        loop {
            match conn.decode(p, &mut out) {
                Err(e) => {
                    assert_eq!(conn.decode(b"\x01\0\0\x01\0", &mut out), Err(e));
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
                    let done = match ev {
                        Progress::StartTls => {
                            assert!(conn.tls_started(&mut out));
                            false
                        }
                        Progress::LoggedIn(_) => true,
                        Progress::Prepared { statement_id, .. } => {
                            statement = statement_id;
                            true
                        }
                        Progress::Complete(r) => !r.more,
                        _ => false,
                    };
                    if done {
                        command(next, statement, &mut conn, &mut out);
                        next += 1;
                    }
                }
            }
        }
    }
    if end.is_ok() {
        end = conn.eof();
    }
    assert!(conn.buffer_capacity() <= 128 * 1024);
    Outcome {
        packets,
        packet_end,
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
    let mut opts = Options {
        tls: flags & 0x20 != 0,
        ..Options::default()
    };
    let (prefix, rest): (&[u8], &[u8]) = match (flags >> 3) & 3 {
        0 => (&[], rest),
        1 => (&SESSION[..LOGIN_LEN], rest),
        mode => {
            let recorded = if mode == 2 {
                SESSION
            } else {
                opts.deprecate_eof = false;
                SESSION_EOF
            };
            let Some((cut, rest)) = rest.split_first_chunk::<2>() else {
                return;
            };
            let cut = usize::from(u16::from_be_bytes(*cut)) % (recorded.len() + 1);
            (&recorded[..cut], rest)
        }
    };
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, tail) = rest.split_at(n_lens);
    let mut stream = prefix.to_vec();
    stream.extend_from_slice(tail);

    let one_shot = run(opts, std::iter::once(&stream[..]));
    let pieces: Vec<&[u8]> = headroom_fuzz::Pieces {
        data: &stream,
        lens,
        i: 0,
        done: false,
    }
    .collect();
    let split = run(opts, pieces.iter().copied());
    assert_eq!(split, one_shot, "split decoding differs from one-shot");
});
