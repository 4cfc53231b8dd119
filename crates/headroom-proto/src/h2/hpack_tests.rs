//! HPACK tests: the RFC 7541 Appendix C examples byte for byte, eviction, size updates, the
//! encoder's indexing and a round trip through our own decoder.

use super::*;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn decode(d: &mut Decoder, block: &[u8]) -> Fields {
    let mut got = Vec::new();
    let ok = d
        .decode(block, usize::MAX, &mut |n, v| {
            got.push((n.to_vec(), v.to_vec()))
        })
        .unwrap();
    assert!(ok);
    got
}

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

fn table(t: &DynTable) -> Fields {
    (0..t.len())
        .map(|i| {
            let (n, v) = t.get(i).unwrap();
            (n.to_vec(), v.to_vec())
        })
        .collect()
}

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &hex(blocks[0])), fields(REQ1));
    assert_eq!(
        table(d.table()),
        fields(&[(":authority", "www.example.com")])
    );
    assert_eq!(d.table().size(), 57);
    assert_eq!(decode(&mut d, &hex(blocks[1])), fields(REQ2));
    assert_eq!(d.table().size(), 110);
    assert_eq!(decode(&mut d, &hex(blocks[2])), fields(REQ3));
    assert_eq!(
        table(d.table()),
        fields(&[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ])
    );
    assert_eq!(d.table().size(), 164);
}

#[test]
fn rfc7541_c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn rfc7541_c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

const SET_COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&str; 3]) {
    // The examples use a 256-byte table, so they evict.
    let mut d = Decoder::new(256);
    let r1 = [
        (":status", "302"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    assert_eq!(decode(&mut d, &hex(blocks[0])), fields(&r1));
    assert_eq!(d.table().size(), 222);
    assert_eq!(d.table().len(), 4);
    let r2 = [
        (":status", "307"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    assert_eq!(decode(&mut d, &hex(blocks[1])), fields(&r2));
    assert_eq!(
        table(d.table()),
        fields(&[
            (":status", "307"),
            ("location", "https://www.example.com"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("cache-control", "private"),
        ])
    );
    assert_eq!(d.table().size(), 222);
    let r3 = [
        (":status", "200"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ("location", "https://www.example.com"),
        ("content-encoding", "gzip"),
        ("set-cookie", SET_COOKIE),
    ];
    assert_eq!(decode(&mut d, &hex(blocks[2])), fields(&r3));
    assert_eq!(
        table(d.table()),
        fields(&[
            ("set-cookie", SET_COOKIE),
            ("content-encoding", "gzip"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ])
    );
    assert_eq!(d.table().size(), 215);
}

#[test]
fn rfc7541_c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
    ]);
}

#[test]
fn rfc7541_c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn size_update_evicts_and_is_bounded() {
    let mut d = Decoder::new(256);
    decode(&mut d, &hex("4803 3330 37 4004 6e61 6d65 0576 616c 7565"));
    assert_eq!(d.table().len(), 2);
    // Size update to 40 at the start of a block: only the newest entry (41 bytes) does not fit
    // either, so the table empties; a field after it references the static table.
    let got = decode(&mut d, &hex("3f09 88"));
    assert_eq!(got, fields(&[(":status", "200")]));
    assert_eq!(d.table().len(), 0);
    assert_eq!(d.table().max_size(), 40);
    // Above what we advertised: refused.
    let mut sink = |_: &[u8], _: &[u8]| {};
    assert_eq!(
        d.decode(&hex("3fe2 01"), usize::MAX, &mut sink),
        Err(HpackError::SizeUpdateTooLarge)
    );
    // After a field: refused.
    assert_eq!(
        d.decode(&hex("88 20"), usize::MAX, &mut sink),
        Err(HpackError::SizeUpdateMisplaced)
    );
}

#[test]
fn bad_blocks_are_errors_not_panics() {
    let mut d = Decoder::new(4096);
    let mut sink = |_: &[u8], _: &[u8]| {};
    for (block, err) in [
        ("80", HpackError::BadIndex),
        ("be", HpackError::BadIndex),
        ("ff ff ff ff ff 0f", HpackError::IntegerOverflow),
        ("ff 80 80 80 80 80 01", HpackError::IntegerOverflow),
        ("40 0a 6375", HpackError::Truncated),
        ("41", HpackError::Truncated),
        ("ff", HpackError::Truncated),
        ("40 81 ff 00", HpackError::Huffman),
        // Index 63 names the second dynamic entry: absent.
        ("7f 00 00", HpackError::BadIndex),
    ] {
        assert_eq!(
            d.decode(&hex(block), usize::MAX, &mut sink),
            Err(err),
            "{block}"
        );
    }
}

#[test]
fn list_bound_stops_callbacks_but_keeps_table_in_step() {
    let mut d = Decoder::new(4096);
    let mut n = 0;
    // Two literal fields with indexing: 42 + 42 bytes by §4.1; a bound of 50 admits one.
    let block = hex("4004 6e61 6d65 0576 616c 7565 4004 6e61 6d65 0576 616c 7565");
    assert_eq!(d.decode(&block, 50, &mut |_, _| n += 1), Ok(false));
    assert_eq!(n, 1);
    assert_eq!(d.table().len(), 2);
}

#[test]
fn dynamic_name_reference_survives_eviction_of_its_entry() {
    // Table of 60 bytes holds one entry "name: value" (41 bytes). A literal with indexing that
    // reuses that entry's name (index 62) evicts it while inserting (§4.4).
    let mut d = Decoder::new(60);
    decode(&mut d, &hex("4004 6e61 6d65 0576 616c 7565"));
    let got = decode(&mut d, &hex("7e 06 6f74 6865 7273"));
    assert_eq!(got, fields(&[("name", "others")]));
    assert_eq!(table(d.table()), fields(&[("name", "others")]));
}

#[test]
fn many_insertions_keep_the_buffer_bounded() {
    let mut d = Decoder::new(256);
    let mut block = Vec::new();
    for i in 0..2000u32 {
        block.clear();
        let v = format!("value-{i}");
        block.extend_from_slice(&[0x40, 0x04]);
        block.extend_from_slice(b"name");
        encode_str(v.as_bytes(), &mut block);
        assert_eq!(
            decode(&mut d, &block),
            vec![(b"name".to_vec(), v.into_bytes())]
        );
        assert!(d.table().size() <= 256);
        assert!(
            d.table().bytes.len() <= 2 * 256 + 64,
            "{}",
            d.table().bytes.len()
        );
    }
}

#[test]
fn encoder_indexes_repeated_requests() {
    let mut e = Encoder::new(4096);
    let mut d = Decoder::new(4096);
    let req: &[(&[u8], &[u8])] = &[
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":authority", b"localhost:8080"),
        (b":path", b"/api/items?page=1"),
        (b"user-agent", b"headroom"),
        (b"x-custom", b"abc"),
    ];
    let mut first = Vec::new();
    let mut block = Vec::new();
    for round in 0..3 {
        block.clear();
        e.begin_block(&mut block);
        for (n, v) in req {
            e.field(n, v, &mut block);
        }
        if round == 0 {
            first = block.clone();
        } else {
            // Static :method/:scheme, then four dynamic entries: one byte each.
            assert_eq!(block.len(), req.len(), "round {round}: {block:02x?}");
        }
        let got = decode(&mut d, &block);
        let want: Fields = req.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        assert_eq!(got, want);
        assert_eq!(table(d.table()), table(e.table()));
    }
    assert!(first.len() > 40);
}

#[test]
fn encoder_follows_the_peer_table_size() {
    let mut e = Encoder::new(4096);
    let mut d = Decoder::new(4096);
    let mut block = Vec::new();
    e.begin_block(&mut block);
    e.field(b"x-a", b"1", &mut block);
    decode(&mut d, &block);
    // The peer shrinks to 0 then grows to 100 between two blocks: both sizes are signalled.
    e.set_peer_max(0);
    e.set_peer_max(100);
    block.clear();
    e.begin_block(&mut block);
    assert_eq!(block, hex("20 3f45"));
    e.field(b"x-a", b"1", &mut block);
    decode(&mut d, &block);
    assert_eq!(d.table().max_size(), 100);
    assert_eq!(table(d.table()), table(e.table()));
    assert_eq!(d.table().len(), 1);
    // A field larger than the table goes out without indexing.
    let big = vec![b'z'; 200];
    block.clear();
    e.begin_block(&mut block);
    e.field(b"x-big", &big, &mut block);
    assert_eq!(block[0] & 0xf0, 0x00);
    assert_eq!(decode(&mut d, &block), vec![(b"x-big".to_vec(), big)]);
    assert_eq!(table(d.table()), table(e.table()));
}

#[test]
fn integers_round_trip() {
    for n in 1..=7u32 {
        for v in [
            0usize,
            1,
            30,
            31,
            126,
            127,
            128,
            255,
            1337,
            65_535,
            1 << 24,
            (1 << 32) - 1,
        ] {
            let mut b = Vec::new();
            encode_int(v, n, 0, &mut b);
            let mut pos = 0;
            assert_eq!(decode_int(&b, &mut pos, n), Ok(v), "n={n} v={v}");
            assert_eq!(pos, b.len());
        }
    }
    // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
    let mut b = Vec::new();
    encode_int(1337, 5, 0, &mut b);
    assert_eq!(b, [0x1f, 0x9a, 0x0a]);
}
