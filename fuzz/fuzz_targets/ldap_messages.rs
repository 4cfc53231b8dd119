//! Fuzz the LDAP response decoder and the RFC 4515 filter parser (`headroom_proto::ldap`).
//!
//! Input layout: byte 0 holds, in its low 3 bits, how many piece lengths follow, and in bits
//! 3-4 what is fuzzed:
//!   0: the decoder on the stream (entries counted, not kept);
//!   1: the same with `keep_entries` (every message parsed whole);
//!   2: the decoder on a prefix of a real session recorded from slapd 2.5
//!      (`src/ldap/testdata/search_sub.server.bin`: a bind, 112 entries, a search done), cut
//!      where the next two bytes say, then the input;
//!   3: the filter parser on the rest of the input as text (lossy UTF-8).
//! For the decoder, the piece lengths follow byte 0, then the stream, fed in pieces of those
//! lengths (cycled; a length of 0 feeds an empty slice), looping over responses as the engine
//! does, then `eof()`. The message limit is 64 KiB, so that `TooLong` is reachable.
//!
//! Checked besides "no panic": the `decode` contracts (consumed <= input, `None` consumes
//! everything, a response at least one byte; errors are sticky), the buffer bound, and that the
//! split stream gives exactly the same responses and ending as the same bytes in one piece. For
//! filters: an error appends nothing and points inside the text; a success appends exactly one
//! well-formed BER element, the same as `Filter::parse`'s, and a search carrying it.
//!
//! Seeds (one per mode): `fuzz/seeds/ldap_messages`. Run: `cargo +nightly fuzz run
//! ldap_messages fuzz/corpus/ldap_messages fuzz/seeds/ldap_messages -- -max_total_time=300`
//! (5 minutes: 2.7 million runs, no finding, when the target was written).
#![no_main]

use headroom_proto::ldap::{self, Decoder, Filter, LdapError, Op, Response, Search};
use libfuzzer_sys::fuzz_target;

const SEARCH_SUB: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/ldap/testdata/search_sub.server.bin");
const MAX_LEN: u32 = 64 * 1024;

/// A response, owned.
#[derive(Debug, PartialEq)]
struct Got {
    id: i32,
    op: Op,
    result: Option<u32>,
    fields: [Vec<u8>; 5],
    len: u64,
}

impl From<Response<'_>> for Got {
    fn from(r: Response<'_>) -> Got {
        Got {
            id: r.id,
            op: r.op,
            result: r.result.map(|c| c.0),
            fields: [r.matched_dn, r.diagnostic, r.name, r.value, r.message].map(<[u8]>::to_vec),
            len: r.len,
        }
    }
}

fn run<'a>(
    keep: bool,
    pieces: impl Iterator<Item = &'a [u8]>,
) -> (Vec<Got>, Result<(), LdapError>) {
    let mut dec = Decoder::new();
    dec.keep_entries(keep);
    dec.set_max_message_len(MAX_LEN);
    let mut got = Vec::new();
    for piece in pieces {
        let mut p = piece;
        loop {
            match dec.decode(p) {
                Err(e) => {
                    assert_eq!(dec.decode(b"\x30\x00").map(|(n, _)| n), Err(e));
                    assert_eq!(dec.eof(), Ok(()));
                    return (got, Err(e));
                }
                Ok((n, None)) => {
                    assert_eq!(n, p.len(), "None must consume all input");
                    break;
                }
                Ok((n, Some(r))) => {
                    assert!(
                        n > 0 && n <= p.len(),
                        "response consumed {n} of {}",
                        p.len()
                    );
                    assert!(r.len >= n as u64);
                    assert!(r.message.is_empty() || r.message.len() as u64 == r.len);
                    if r.op.is_final() {
                        assert!(r.result.is_some());
                    }
                    got.push(Got::from(r));
                    p = &p[n..];
                }
            }
        }
        assert!(dec.buffer_capacity() <= 2 * MAX_LEN as usize);
    }
    (got, dec.eof())
}

/// One well-formed element exactly filling `b` (tags of one octet, definite lengths).
fn one_element(b: &[u8]) -> bool {
    let (Some(_), Some(&l)) = (b.first(), b.get(1)) else {
        return false;
    };
    let (len, at) = if l < 0x80 {
        (usize::from(l), 2)
    } else {
        let n = usize::from(l & 0x7f);
        let Some(octets) = b.get(2..2 + n) else {
            return false;
        };
        (
            octets.iter().fold(0usize, |a, &o| a << 8 | usize::from(o)),
            2 + n,
        )
    };
    at + len == b.len()
}

fn filter(text: &str) {
    let mut out = b"prefix".to_vec();
    match ldap::encode_filter(&mut out, text) {
        Err(e) => {
            assert_eq!(out, b"prefix");
            assert!(e.pos <= text.len(), "{text:?}: {e}");
            assert_eq!(Filter::parse(text), Err(e));
        }
        Ok(()) => {
            let ber = &out[6..];
            assert!(one_element(ber), "{text:?} -> {ber:02x?}");
            let f = Filter::parse(text).expect("parses twice");
            assert_eq!(f.as_ber(), ber);
            let mut by_text = Vec::new();
            let s = Search {
                filter: text.into(),
                ..Search::default()
            };
            ldap::search(&mut by_text, 1, &s).expect("the same filter");
            let mut compiled = Vec::new();
            ldap::search(
                &mut compiled,
                1,
                &Search {
                    filter: (&f).into(),
                    ..s
                },
            )
            .unwrap();
            assert_eq!(by_text, compiled);
            assert!(one_element(&by_text));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mode = (flags >> 3) & 3;
    if mode == 3 {
        filter(&String::from_utf8_lossy(rest));
        return;
    }
    let (prefix, rest): (&[u8], &[u8]) = if mode == 2 {
        let Some((cut, rest)) = rest.split_first_chunk::<2>() else {
            return;
        };
        let cut = usize::from(u16::from_be_bytes(*cut)) % (SEARCH_SUB.len() + 1);
        (&SEARCH_SUB[..cut], rest)
    } else {
        (&[], rest)
    };
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, tail) = rest.split_at(n_lens);
    let mut stream = prefix.to_vec();
    stream.extend_from_slice(tail);
    let keep = mode == 1;

    let one_shot = run(keep, std::iter::once(&stream[..]));
    let pieces: Vec<&[u8]> = headroom_fuzz::Pieces {
        data: &stream,
        lens,
        i: 0,
        done: false,
    }
    .collect();
    let split = run(keep, pieces.iter().copied());
    assert_eq!(split, one_shot, "split decoding differs from one-shot");
});
