//! Fuzz the HTTP/1.1 response decoder.
//!
//! Input layout: byte 0 holds flags (bit 7: the responses answer HEAD requests; bit 6: header
//! capture off; bits 3-5: the capture's byte bound, from 0 to the default) and, in its low 3
//! bits, how many of the following bytes are piece lengths; the rest is the byte stream from
//! the "server". The stream is fed in pieces of those lengths (cycled; a length of 0 feeds an
//! empty slice), looping over pipelined responses as the engine does, then `eof()`.
//!
//! Checked besides "no panic": the `decode` contract (consumed <= input, `NeedMore` consumes
//! everything, `Complete` consumes at least one byte, nothing in progress right after
//! `Complete`), and that the split stream decodes exactly like the same bytes in one piece (the
//! same responses, with the same captured header values and dropped counts; the same ending
//! when the one-piece run succeeds, an error when it fails). Captured bytes never exceed the
//! bound, and nothing is captured with capture off.
#![no_main]

use headroom_proto::http1::{
    Decoded, HeaderId, HeaderSet, ProtoError, ResponseDecoder, ResponseMeta, DEFAULT_CAPTURE_BYTES,
};
use libfuzzer_sys::fuzz_target;

/// A completed response and what was captured of it.
type Done = (ResponseMeta, Vec<(HeaderId, Vec<u8>)>, u32);

#[derive(Debug, PartialEq)]
struct Outcome {
    metas: Vec<Done>,
    end: Result<Option<Done>, ProtoError>,
}

/// Byte bounds the flags choose from.
const BOUNDS: [usize; 8] = [0, 1, 8, 32, 100, 512, 4096, DEFAULT_CAPTURE_BYTES];

fn done(dec: &ResponseDecoder, meta: ResponseMeta, capture: Option<usize>) -> Done {
    let captured: Vec<_> = dec.captured().map(|(id, v)| (id, v.to_vec())).collect();
    let bytes: usize = captured.iter().map(|(_, v)| v.len()).sum();
    match capture {
        Some(bound) => assert!(bytes <= bound, "captured {bytes} > {bound}"),
        None => assert!(captured.is_empty() && dec.captured_dropped() == 0),
    }
    (meta, captured, dec.captured_dropped())
}

fn run<'a>(head: bool, capture: Option<usize>, pieces: impl Iterator<Item = &'a [u8]>) -> Outcome {
    let mut dec = ResponseDecoder::new();
    dec.set_head_request(head);
    if let Some(bound) = capture {
        dec.set_capture(HeaderSet::ALL, bound);
    }
    let mut metas = Vec::new();
    for piece in pieces {
        let mut p = piece;
        loop {
            match dec.decode(p) {
                Err(e) => return Outcome { metas, end: Err(e) },
                Ok((n, Decoded::NeedMore)) => {
                    assert_eq!(n, p.len(), "NeedMore must consume all input");
                    break;
                }
                Ok((n, Decoded::Complete(meta))) => {
                    assert!(
                        n > 0 && n <= p.len(),
                        "Complete consumed {n} of {}",
                        p.len()
                    );
                    assert!(!dec.in_progress());
                    metas.push(done(&dec, meta, capture));
                    p = &p[n..];
                    if p.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    let end = dec.eof().map(|m| m.map(|m| done(&dec, m, capture)));
    assert!(!dec.in_progress());
    Outcome { metas, end }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let head = flags & 0x80 != 0;
    let capture = (flags & 0x40 == 0).then(|| BOUNDS[usize::from((flags >> 3) & 7)]);
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, stream) = rest.split_at(n_lens);

    let one_shot = run(head, capture, std::iter::once(stream));
    let split = run(
        head,
        capture,
        headroom_fuzz::Pieces {
            data: stream,
            lens,
            i: 0,
            done: false,
        },
    );
    if one_shot.end.is_ok() {
        assert_eq!(split, one_shot, "split decoding differs from one-shot");
    } else {
        assert_eq!(
            split.metas, one_shot.metas,
            "split decoding differs from one-shot"
        );
        assert!(
            split.end.is_err(),
            "one-shot failed, split did not: {split:?}"
        );
    }
});
