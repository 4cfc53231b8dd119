//! Fuzz the HTTP/1.1 request parser of the reference servers (`headroom_serve::http`).
//!
//! Input layout: byte 0 holds flags (bits 0-2: how many of the following bytes are piece
//! lengths; bit 3: a keep-alive limit, taken from byte 1 when set; bits 4-5: the output limit of
//! the split run, 1 B / 64 B / 4 KiB / 256 KiB), then those bytes, then the byte stream from the
//! "client". The stream is fed in pieces of those lengths (cycled; a length of 0 feeds an empty
//! slice) the way an architecture does: slow requests are "run" by appending a marker, then
//! parsing resumes; a backlog is resumed before more input is fed.
//!
//! Checked besides "no panic": the concatenated output (responses and slow markers) of the split
//! run with a small output limit equals that of the one-piece run with no limit; nothing is
//! answered after a close; `served()` counts every response and slow request; input fed while a
//! slow request is in flight is only buffered.
#![no_main]

use headroom_serve::http::{Batch, InputState, Responses};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
struct Outcome {
    out: Vec<u8>,
    answered: u64,
    closed: bool,
}

fn run<'a>(r: &Responses, out_limit: usize, pieces: impl Iterator<Item = &'a [u8]>) -> Outcome {
    let mut st = InputState::default();
    let mut all = Vec::new();
    let mut out = Vec::new();
    let mut answered = 0u64;
    let mut closed = false;
    for piece in pieces {
        if closed {
            let b = st.feed(piece, r, &mut out, out_limit);
            assert!(b.close && b.responses == 0 && b.slow.is_none() && out.is_empty());
            continue;
        }
        let mut b: Batch = st.feed(piece, r, &mut out, out_limit);
        loop {
            all.append(&mut out);
            answered += b.responses;
            closed |= b.close;
            if let Some(slow) = b.slow.take() {
                assert!(st.awaiting_slow() || b.close);
                // Input while the slow request runs is buffered, not answered.
                let before = st.buffered();
                let e = st.feed(b"", r, &mut out, out_limit);
                assert!(out.is_empty() && e.responses == 0);
                assert!(st.buffered() >= before || b.close);
                all.extend_from_slice(format!("<SLOW {:?} {}>", slow, b.close).as_bytes());
                answered += 1;
                if b.close {
                    break;
                }
                b = st.resume(r, &mut out, out_limit);
            } else if st.has_backlog() {
                b = st.resume(r, &mut out, out_limit);
            } else {
                break;
            }
        }
        assert!(!st.awaiting_slow());
        assert!(
            answered == st.served() || closed,
            "{} vs {}",
            answered,
            st.served()
        );
    }
    Outcome {
        out: all,
        answered,
        closed,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let mut limit = None;
    if flags & 8 != 0 {
        let Some((&l, r)) = rest.split_first() else {
            return;
        };
        limit = Some(u64::from(l));
        rest = r;
    }
    let out_limit = [1, 64, 4096, 256 * 1024][usize::from((flags >> 4) & 3)];
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, stream) = rest.split_at(n_lens);
    let r = Responses::new(b"hello\n").keepalive_requests(limit);

    let one_shot = run(&r, usize::MAX, std::iter::once(stream));
    let split = run(
        &r,
        out_limit,
        headroom_fuzz::Pieces {
            data: stream,
            lens,
            i: 0,
            done: false,
        },
    );
    assert_eq!(split, one_shot, "split parsing differs from one-shot");
});
