//! Round trips through the same crates' encoders, every split of small streams, and corrupt,
//! truncated and over-long streams.

use std::io::Write;

use flate2::write::{GzEncoder, ZlibEncoder};
use flate2::{Compression, GzBuilder};

use super::*;
use crate::test_rng::Rng;

/// Text that compresses (repeated words) with some variety (numbers), `len` bytes.
fn text(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(format!("line {i} of the headroom body, ").as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// Bytes that do not compress, `len` of them.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    (0..len).map(|_| rng.next() as u8).collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn br(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        w.write_all(data).unwrap();
    }
    out
}

fn encode(coding: Coding, data: &[u8]) -> Vec<u8> {
    match coding {
        Coding::Gzip => gzip(data),
        Coding::Deflate => zlib(data),
        Coding::Br => br(data),
    }
}

/// Decodes `body` fed in the given pieces.
fn decode_parts(d: &mut ContentDecoder, coding: Coding, parts: &[&[u8]]) -> Option<BodyStats> {
    d.start(Some(coding));
    for p in parts {
        d.feed(p);
    }
    d.finish()
}

fn decode(coding: Coding, body: &[u8]) -> Option<BodyStats> {
    decode_parts(&mut ContentDecoder::new(), coding, &[body])
}

const ALL: [Coding; 3] = [Coding::Gzip, Coding::Deflate, Coding::Br];

#[test]
fn round_trips_count_encoded_and_decoded_bytes() {
    for coding in ALL {
        for data in [text(1), text(300), text(200_000), noise(50_000, 7)] {
            let body = encode(coding, &data);
            let s = decode(coding, &body).unwrap();
            assert_eq!(
                s,
                BodyStats {
                    coding,
                    encoded: body.len() as u64,
                    decoded: data.len() as u64,
                    error: None,
                },
                "{} of {} bytes",
                coding.name(),
                data.len()
            );
        }
    }
}

#[test]
fn every_split_of_a_small_stream_decodes_alike() {
    let data = text(700);
    let mut d = ContentDecoder::new();
    for coding in ALL {
        let body = encode(coding, &data);
        let whole = decode_parts(&mut d, coding, &[&body]).unwrap();
        assert_eq!(whole.decoded, data.len() as u64);
        for i in 0..=body.len() {
            let (a, b) = body.split_at(i);
            let s = decode_parts(&mut d, coding, &[a, b]);
            assert_eq!(s, Some(whole), "{} split at {i}", coding.name());
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode_parts(&mut d, coding, &bytes), Some(whole));
    }
}

#[test]
fn random_splits_of_a_large_stream_decode_alike() {
    let data = [text(100_000), noise(30_000, 3), text(50_000)].concat();
    let mut rng = Rng(99);
    let mut d = ContentDecoder::new();
    for coding in ALL {
        let body = encode(coding, &data);
        for _ in 0..5 {
            let mut parts = Vec::new();
            let mut rest = body.as_slice();
            while !rest.is_empty() {
                let (a, b) = rest.split_at(rng.below(3000).min(rest.len()).max(1));
                parts.push(a);
                rest = b;
            }
            let s = decode_parts(&mut d, coding, &parts).unwrap();
            assert_eq!((s.decoded, s.error), (data.len() as u64, None));
        }
    }
}

#[test]
fn gzip_optional_header_fields_are_skipped() {
    let data = text(5000);
    let mut e = GzBuilder::new()
        .filename("body.txt")
        .comment("a comment")
        .extra(vec![1, 2, 3, 4, 5])
        .write(Vec::new(), Compression::best());
    e.write_all(&data).unwrap();
    let mut body = e.finish().unwrap();
    // FHCRC: a 2-byte header CRC before the data (skipped, not checked).
    body[3] |= FHCRC;
    let name_end = 10 + 2 + 5 + "body.txt".len() + 1 + "a comment".len() + 1;
    body.splice(name_end..name_end, [0xab, 0xcd]);
    for i in 0..=name_end + 2 {
        let (a, b) = body.split_at(i);
        let s = decode_parts(&mut ContentDecoder::new(), Coding::Gzip, &[a, b]).unwrap();
        assert_eq!(
            (s.decoded, s.error),
            (data.len() as u64, None),
            "split at {i}"
        );
    }
}

#[test]
fn concatenated_gzip_members_decode_as_one_body() {
    let (a, b) = (text(1000), text(3000));
    let body = [gzip(&a), gzip(&b)].concat();
    let s = decode(Coding::Gzip, &body).unwrap();
    assert_eq!((s.decoded, s.error), ((a.len() + b.len()) as u64, None));
}

#[test]
fn corrupt_streams_are_errors_never_panics() {
    let data = text(2000);
    for coding in ALL {
        let body = encode(coding, &data);
        // Truncated: every proper prefix.
        for i in 1..body.len() {
            let s = decode(coding, &body[..i]).unwrap();
            assert!(s.error.is_some(), "{} cut at {i} decoded", coding.name());
        }
        // Trailing bytes after the stream's end.
        let mut long = body.clone();
        long.extend_from_slice(b"junk");
        let s = decode(coding, &long).unwrap();
        assert_eq!(
            s.error,
            Some(CodingError::TrailingData),
            "{}",
            coding.name()
        );
        assert_eq!(s.encoded, long.len() as u64);
        // Every single-byte change: an error or (header bytes that carry nothing) the same
        // length; never a panic.
        for i in 0..body.len() {
            let mut bad = body.clone();
            bad[i] ^= 0x55;
            let s = decode(coding, &bad).unwrap();
            assert!(
                s.error.is_some() || s.decoded == data.len() as u64,
                "{} byte {i}",
                coding.name()
            );
        }
    }
    // Not a stream at all.
    for coding in ALL {
        for seed in 1..50 {
            let s = decode(coding, &noise(300, seed)).unwrap();
            assert!(s.error.is_some(), "{} noise {seed}", coding.name());
        }
    }
}

#[test]
fn gzip_checksum_and_length_are_checked() {
    let data = text(4000);
    let body = gzip(&data);
    let n = body.len();
    for i in n - 8..n {
        let mut bad = body.clone();
        bad[i] ^= 1;
        let s = decode(Coding::Gzip, &bad).unwrap();
        assert_eq!(
            s.error,
            Some(CodingError::Checksum),
            "trailer byte {}",
            i + 8 - n
        );
        assert_eq!(s.decoded, data.len() as u64);
    }
    let mut bad = body.clone();
    bad[0] = 0x1e;
    assert_eq!(
        decode(Coding::Gzip, &bad).unwrap().error,
        Some(CodingError::Corrupt)
    );
}

#[test]
fn an_error_is_kept_and_the_next_body_decodes() {
    let data = text(3000);
    let mut d = ContentDecoder::new();
    for coding in ALL {
        let body = encode(coding, &data);
        let mut bad = body.clone();
        bad.truncate(body.len() / 2);
        bad.extend(noise(500, 5));
        let s = decode_parts(&mut d, coding, &[&bad, &body]).unwrap();
        assert!(s.error.is_some());
        assert_eq!(s.encoded, (bad.len() + body.len()) as u64);
        assert_eq!(d.last(), Some(s));
        let s = decode_parts(&mut d, coding, &[&body]).unwrap();
        assert_eq!((s.decoded, s.error), (data.len() as u64, None));
    }
}

#[test]
fn unencoded_and_empty_bodies_are_not_counted() {
    let mut d = ContentDecoder::new();
    d.start(None);
    d.feed(b"plain text");
    assert_eq!(d.finish(), None);
    for coding in ALL {
        // A HEAD, 204 or 304 answer with Content-Encoding and no body.
        assert_eq!(decode_parts(&mut d, coding, &[]), None);
        assert_eq!(d.last(), None);
    }
    // Started, then the connection was lost.
    d.start(Some(Coding::Gzip));
    d.feed(&gzip(b"abc")[..5]);
    d.abort();
    assert_eq!((d.finish(), d.last()), (None, None));
}

#[test]
fn coding_names_parse() {
    let table: [(&[u8], Option<Coding>); 10] = [
        (b"gzip", Some(Coding::Gzip)),
        (b" GZip ", Some(Coding::Gzip)),
        (b"x-gzip", Some(Coding::Gzip)),
        (b"deflate", Some(Coding::Deflate)),
        (b"br", Some(Coding::Br)),
        (b"BR", Some(Coding::Br)),
        (b"identity", None),
        (b"gzip, br", None),
        (b"zstd", None),
        (b"", None),
    ];
    for (value, want) in table {
        assert_eq!(
            Coding::parse(value),
            want,
            "{:?}",
            String::from_utf8_lossy(value)
        );
    }
}

/// The HTTP/1.1 decoder hands de-chunked body bytes over: a chunked gzip response, a
/// Content-Length br one and an unencoded one, pipelined, split at every byte.
#[test]
fn http1_decoder_hands_bodies_to_the_content_decoder() {
    use crate::http1::{Decoded, HeaderId, HeaderSet, ResponseDecoder, DEFAULT_CAPTURE_BYTES};
    let data = text(900);
    let gz = gzip(&data);
    let b = br(&data);
    let mut wire =
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in gz.chunks(100) {
        wire.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        wire.extend_from_slice(piece);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    wire.extend_from_slice(
        format!(
            "HTTP/1.1 200 OK\r\nContent-encoding: br\r\nContent-Length: {}\r\n\r\n",
            b.len()
        )
        .as_bytes(),
    );
    wire.extend_from_slice(&b);
    wire.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
    let want = [
        Some(BodyStats {
            coding: Coding::Gzip,
            encoded: gz.len() as u64,
            decoded: data.len() as u64,
            error: None,
        }),
        Some(BodyStats {
            coding: Coding::Br,
            encoded: b.len() as u64,
            decoded: data.len() as u64,
            error: None,
        }),
        None,
    ];
    let mut dec = ResponseDecoder::new();
    dec.set_capture(
        HeaderSet::from(HeaderId::ContentEncoding),
        DEFAULT_CAPTURE_BYTES,
    );
    for split in (0..wire.len()).step_by(7) {
        let mut got = Vec::new();
        for mut part in [&wire[..split], &wire[split..]] {
            while !part.is_empty() {
                let (used, d) = dec.decode(part).unwrap();
                part = &part[used..];
                if let Decoded::Complete(_) = d {
                    got.push(dec.content());
                }
            }
        }
        assert_eq!(got, want, "split at {split}");
    }
    // Without Content-Encoding captured, nothing is decoded.
    let mut plain = ResponseDecoder::new();
    let (_, d) = plain.decode(&wire).unwrap();
    assert!(matches!(d, Decoded::Complete(m) if m.body_len == gz.len() as u64));
    assert_eq!(plain.content(), None);
}
