//! The HPACK Huffman code (RFC 7541 Appendix B): a canonical code of 257 symbols (256 octets and
//! EOS), 5 to 30 bits long.
//!
//! Decoding reads four bits at a time through a state machine built at compile time from the
//! code (as nghttp2's `huff_decode_table` does): a state is an inner node of the code's tree, and
//! each (state, nibble) says the next state and the octet completed on the way, if any (the
//! shortest code has 5 bits, so a nibble completes at most one). nginx sends the values of
//! `server`, `date`, `content-type` and `content-length` as Huffman literals in every response,
//! so this is on the hot path of an HTTP/2 run: walking one bit at a time, decoding was half of
//! the generator's user-space instructions over h2c (issue 28's note); a nibble at a time
//! takes a quarter of the steps, each a table load with no search.
//!
//! The encoder side sends plain literals (our requests are indexed after the first one), so only
//! decoding is compiled into the codec (the encoder is a test helper).

/// Code of each octet, right-aligned (RFC 7541 Appendix B; same data as the `h2` crate's table).
const CODES: [u32; 256] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8,
    0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed,
    0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4,
    0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8,
    0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
    0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb,
    0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0,
    0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75,
    0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe,
    0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4,
    0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb,
    0x7fffdf, 0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
    0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda,
    0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd,
    0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0,
    0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7,
    0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf,
    0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7,
    0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4,
    0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
    0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb,
    0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
];

/// Length in bits of each octet's code.
const CODE_LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
];

/// EOS's code: 30 ones.
const EOS_CODE: u32 = 0x3fff_ffff;
const EOS_LEN: u32 = 30;

/// A child in the code's tree: an inner node's index, or `LEAF | symbol` (EOS is symbol 256).
const LEAF: u16 = 0x8000;
/// Inner nodes of the tree: 257 leaves make 256 (the code is complete). Node 0 is the root.
const NODES: usize = 256;

/// The code's tree: each inner node's two children (bit 0, bit 1).
const fn tree() -> [[u16; 2]; NODES] {
    let mut child = [[0u16; 2]; NODES];
    let mut made = 1usize;
    let mut sym = 0usize;
    while sym <= 256 {
        let (code, len) = if sym == 256 {
            (EOS_CODE, EOS_LEN)
        } else {
            (CODES[sym], CODE_LENGTHS[sym] as u32)
        };
        let mut node = 0usize;
        let mut i = len;
        while i > 0 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            if i == 0 {
                child[node][bit] = LEAF | sym as u16;
            } else {
                if child[node][bit] == 0 {
                    // 0 is the root, never a child: free.
                    child[node][bit] = made as u16;
                    made += 1;
                }
                node = child[node][bit] as usize;
            }
        }
        sym += 1;
    }
    assert!(made == NODES, "the Huffman code is not complete");
    child
}

/// A step of the decoder: the next state, and the octet completed on the way (if `EMIT`), or a
/// failure (`FAIL`: EOS was reached, which a string must not contain).
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}
const EMIT: u8 = 1;
const FAIL: u8 = 2;

/// The decoder: `steps[state][nibble]`, and `accept[state]`: the state is a valid end of a
/// string (its bits since the last octet are at most 7 ones: a prefix of EOS, RFC 7541 §5.2).
struct Machine {
    steps: [[Step; 16]; NODES],
    accept: [bool; NODES],
}

const fn machine() -> Machine {
    let child = tree();
    let none = Step {
        next: 0,
        sym: 0,
        flags: 0,
    };
    let mut m = Machine {
        steps: [[none; 16]; NODES],
        accept: [false; NODES],
    };
    let mut state = 0usize;
    while state < NODES {
        let mut nib = 0usize;
        while nib < 16 {
            let mut node = state;
            let mut step = none;
            let mut b = 4;
            while b > 0 {
                b -= 1;
                let c = child[node][(nib >> b) & 1];
                if c & LEAF == 0 {
                    node = c as usize;
                } else if c & !LEAF == 256 {
                    step.flags = FAIL;
                    break;
                } else {
                    step.sym = (c & 0xff) as u8;
                    step.flags = EMIT;
                    node = 0;
                }
            }
            step.next = node as u8;
            m.steps[state][nib] = step;
            nib += 1;
        }
        state += 1;
    }
    // The root and the nodes 1 to 7 ones below it.
    let mut node = 0usize;
    let mut depth = 0;
    while depth <= 7 {
        m.accept[node] = true;
        node = child[node][1] as usize;
        depth += 1;
    }
    m
}

static MACHINE: Machine = machine();

/// Why a Huffman string is invalid (RFC 7541 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol, or a bit pattern that is no code.
    BadCode,
    /// Padding longer than 7 bits or not all ones.
    BadPadding,
}

/// Appends the decoding of `src` to `out`. On error `out` may hold part of the string.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    // At most 8 octets per 5 bytes: one reservation, no growth in the loop.
    out.reserve(src.len() * 8 / 5 + 1);
    let mut state = 0usize;
    for &byte in src {
        for nib in [byte >> 4, byte & 0xf] {
            let step = MACHINE.steps[state][usize::from(nib)];
            if step.flags & FAIL != 0 {
                return Err(HuffmanError::BadCode);
            }
            if step.flags & EMIT != 0 {
                out.push(step.sym);
            }
            state = usize::from(step.next);
        }
    }
    if !MACHINE.accept[state] {
        return Err(HuffmanError::BadPadding);
    }
    Ok(())
}

/// Appends the Huffman encoding of `src` (tests build their inputs with it).
#[cfg(test)]
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in src {
        acc = (acc << CODE_LENGTHS[usize::from(b)]) | u64::from(CODES[usize::from(b)]);
        bits += u32::from(CODE_LENGTHS[usize::from(b)]);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        // Pad with the most significant bits of EOS (ones).
        out.push(((acc << (8 - bits)) | ((1u64 << (8 - bits)) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest code (EOS, and a few octets), in bits.
    const MAX_LEN: usize = 30;

    /// Per-length decoding tables of the canonical code (the reference decoder's).
    struct Canon {
        first: [u32; MAX_LEN + 1],
        count: [u32; MAX_LEN + 1],
        offset: [u16; MAX_LEN + 1],
        symbols: [u8; 256],
    }

    fn canon() -> Canon {
        let mut c = Canon {
            first: [0; MAX_LEN + 1],
            count: [0; MAX_LEN + 1],
            offset: [0; MAX_LEN + 1],
            symbols: [0; 256],
        };
        let mut k = 0;
        for len in 1..=MAX_LEN {
            c.offset[len] = k as u16;
            for sym in 0..256 {
                if usize::from(CODE_LENGTHS[sym]) == len {
                    if c.count[len] == 0 {
                        c.first[len] = CODES[sym];
                    }
                    c.count[len] += 1;
                    c.symbols[k] = sym as u8;
                    k += 1;
                }
            }
        }
        c
    }

    /// The decoder this module had before the state machine: one bit at a time against the
    /// canonical code's per-length tables. The reference the machine is checked against.
    fn decode_bitwise(c: &Canon, src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
        let (mut code, mut len) = (0u32, 0usize);
        for &byte in src {
            for shift in (0..8).rev() {
                code = (code << 1) | u32::from((byte >> shift) & 1);
                len += 1;
                let (count, first) = (c.count[len], c.first[len]);
                if count > 0 && code >= first && code - first < count {
                    out.push(c.symbols[usize::from(c.offset[len]) + (code - first) as usize]);
                    code = 0;
                    len = 0;
                } else if len >= MAX_LEN {
                    return Err(HuffmanError::BadCode);
                }
            }
        }
        if len > 7 || code != (1u32 << len) - 1 {
            return Err(HuffmanError::BadPadding);
        }
        Ok(())
    }

    /// Any bytes, valid or not, decode to what the bit-at-a-time reference says: the same
    /// octets, or the same error.
    #[test]
    fn the_machine_decodes_as_the_bitwise_reference() {
        let c = canon();
        let mut rng = crate::test_rng::Rng(0x4875_6666);
        let mut enc = Vec::new();
        for round in 0..20_000 {
            enc.clear();
            if round % 2 == 0 {
                // A valid string (of octets weighted to the short codes and to all of them).
                let n = rng.below(40);
                let text: Vec<u8> = (0..n)
                    .map(|_| {
                        if rng.below(4) == 0 {
                            rng.below(256) as u8
                        } else {
                            b'a' + rng.below(26) as u8
                        }
                    })
                    .collect();
                encode(&text, &mut enc);
                if round % 4 == 0 && !enc.is_empty() {
                    // Damaged: a bit flipped, or a byte cut off.
                    let i = rng.below(enc.len());
                    if rng.below(2) == 0 {
                        enc[i] ^= 1 << rng.below(8);
                    } else {
                        enc.truncate(i);
                    }
                }
            } else {
                // Random bytes, rich in ones (long codes, EOS, long padding).
                let n = rng.below(12);
                enc.extend(
                    (0..n).map(|_| rng.below(256) as u8 | if rng.below(2) == 0 { 0xf0 } else { 0 }),
                );
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (ra, rb) = (decode(&enc, &mut a), decode_bitwise(&c, &enc, &mut b));
            assert_eq!(ra, rb, "{enc:02x?}");
            if ra.is_ok() {
                assert_eq!(a, b, "{enc:02x?}");
            }
        }
    }

    #[test]
    fn canonical_property_holds() {
        // Every code must sit at first[len] + its rank among the codes of its length.
        let c = canon();
        let mut seen = [0u32; MAX_LEN + 1];
        for sym in 0..256 {
            let len = usize::from(CODE_LENGTHS[sym]);
            assert_eq!(CODES[sym], c.first[len] + seen[len], "symbol {sym}");
            seen[len] += 1;
        }
        // EOS (30 ones) must not collide with an octet's code.
        assert!(EOS_CODE - c.first[30] >= c.count[30]);
    }

    #[test]
    fn round_trip_every_octet() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut dec = Vec::new();
        decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, all);
    }

    #[test]
    fn rfc_example_and_bad_padding() {
        // RFC 7541 C.4.1: "www.example.com".
        let enc = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut out = Vec::new();
        decode(&enc, &mut out).unwrap();
        assert_eq!(out, b"www.example.com");
        // A whole byte of padding (8 ones) is too long; zeros are not EOS bits.
        assert_eq!(
            decode(&[0xff], &mut Vec::new()),
            Err(HuffmanError::BadPadding)
        );
        assert_eq!(
            decode(&[0x00], &mut Vec::new()),
            Err(HuffmanError::BadPadding)
        );
        // EOS itself (30 ones) is an error.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xfc], &mut Vec::new()),
            Err(HuffmanError::BadCode)
        );
        assert_eq!(decode(&[], &mut Vec::new()), Ok(()));
    }
}
