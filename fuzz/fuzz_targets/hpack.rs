//! Fuzz the HPACK decoder (and, through it, the encoder).
//!
//! Input layout: byte 0 is the table size we "advertised" (times 4: 0..=1020 bytes), byte 1 the
//! header list bound (times 8), byte 2 how many of the following bytes are block lengths (low 3
//! bits); the rest is cut into header blocks of those lengths (cycled; 0 means the rest), each
//! decoded in turn by one decoder, as the blocks of one connection are.
//!
//! Checked besides "no panic": the dynamic table stays within the advertised size; a block
//! over the list bound reports fewer fields than an unbounded decoder of the same stream; and
//! every decoded list, re-encoded by our encoder, decodes to the same fields through a second
//! decoder kept in step with it (so encoder and decoder agree on indexing and eviction).
#![no_main]

use headroom_proto::h2::hpack::{Decoder, Encoder};
use libfuzzer_sys::fuzz_target;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fuzz_target!(|data: &[u8]| {
    let [size, list, n, rest @ ..] = data else {
        return;
    };
    let max_table = usize::from(*size) * 4;
    let max_list = usize::from(*list) * 8;
    let n_lens = usize::from(n & 7).min(rest.len());
    let (lens, mut stream) = rest.split_at(n_lens);

    let mut bounded = Decoder::new(max_table);
    let mut unbounded = Decoder::new(max_table);
    let mut enc = Encoder::new(256);
    let mut dec2 = Decoder::new(4096);
    let mut block2 = Vec::new();
    let mut i = 0usize;
    // Each round consumes at least one byte: bounded by the input length.
    while !stream.is_empty() {
        let len = match lens.get(i % lens.len().max(1)) {
            Some(&0) | None => stream.len(),
            Some(&l) => usize::from(l).min(stream.len()),
        };
        i += 1;
        let (block, tail) = stream.split_at(len);
        stream = tail;

        let mut all: Fields = Vec::new();
        let full = unbounded.decode(block, usize::MAX, &mut |n, v| all.push((n.to_vec(), v.to_vec())));
        let mut some: Fields = Vec::new();
        let part = bounded.decode(block, max_list, &mut |n, v| some.push((n.to_vec(), v.to_vec())));
        assert!(bounded.table().size() <= max_table);
        match (full, part) {
            (Ok(true), Ok(within)) => {
                assert_eq!(some, all[..some.len()]);
                assert_eq!(within, some.len() == all.len());
                // Past the bound the block is still decoded: both tables stay in step.
                assert_eq!(bounded.table().size(), unbounded.table().size());
            }
            (Err(a), Err(b)) => {
                assert_eq!(a, b);
                return;
            }
            other => panic!("bounded and unbounded decoders disagree: {other:?}"),
        }

        block2.clear();
        enc.begin_block(&mut block2);
        for (n, v) in &all {
            enc.field(n, v, &mut block2);
        }
        let mut again: Fields = Vec::new();
        dec2.decode(&block2, usize::MAX, &mut |n, v| again.push((n.to_vec(), v.to_vec())))
            .expect("our own block decodes");
        assert_eq!(again, all, "encoder/decoder round trip");
    }
});
