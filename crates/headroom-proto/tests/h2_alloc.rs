//! The hot-path promise of `headroom_proto::h2`: once a connection is warm, sending a request
//! and decoding its response allocate nothing. A counting global allocator (per thread, so the
//! test harness does not disturb it) watches 10,000 request/response exchanges over 4 streams,
//! with responses that insert a Huffman-coded `date` into the HPACK table each time (so the
//! table evicts and compacts) and frames cut across reads (so the partial-frame buffer is used).

use headroom_proto::h2::{ClientConfig, ClientConn, Event, Request};

use headroom_testkit::thread_allocs as allocs;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A response head: `:status 200` (static), a Huffman `date` literal with incremental indexing
/// (RFC 7541 C.6.1's bytes) and `content-length: 5` without indexing.
const BLOCK: &[u8] = &[
    0x88, 0x61, 0x96, 0xd0, 0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04,
    0x0b, 0x81, 0x66, 0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff, 0x0f, 0x0d, 0x01, b'5',
];

#[test]
fn steady_state_exchanges_do_not_allocate() {
    let mut out = Vec::with_capacity(1 << 16);
    let mut conn = ClientConn::new(
        &ClientConfig {
            initial_window_size: 1 << 20,
            ..ClientConfig::default()
        },
        &mut out,
    );
    let mut input = Vec::with_capacity(1 << 16);
    head(&mut input, 0, 0x4, 0, 0); // the server's SETTINGS
    head(&mut input, 0, 0x4, 0x1, 0); // and its ACK of ours
    let mut events = 0u64;
    let mut bytes = 0u64;
    let mut on = |e: Event<'_>| {
        events += 1;
        if let Event::Data { data, .. } = e {
            bytes += data.len() as u64;
        }
    };
    conn.feed(&input, &mut out, &mut on).unwrap();
    let headers: &[(&[u8], &[u8])] = &[
        (b"user-agent", b"headroom"),
        (b"accept", b"*/*"),
        (b"x-session", b"abcdef0123456789"),
    ];
    let get = Request {
        method: b"GET",
        scheme: b"http",
        authority: b"127.0.0.1:8080",
        path: b"/api/items?page=1",
        headers,
        body: b"",
    };
    let post = Request {
        method: b"POST",
        path: b"/api/items",
        body: b"{\"name\":\"x\"}",
        ..get
    };
    let mut ids = [0u32; 4];
    let mut exchange = |conn: &mut ClientConn,
                        out: &mut Vec<u8>,
                        input: &mut Vec<u8>,
                        on: &mut dyn FnMut(Event<'_>)| {
        out.clear();
        for (k, id) in ids.iter_mut().enumerate() {
            let req = if k % 2 == 0 { &get } else { &post };
            *id = conn.send_request(req, out).unwrap();
        }
        input.clear();
        // The server gives back the connection window our two bodies used, as a real one does.
        head(input, 4, 0x8, 0, 0);
        input.extend_from_slice(&(2 * post.body.len() as u32).to_be_bytes());
        for &id in &ids {
            head(input, BLOCK.len(), 0x1, 0x4, id);
            input.extend_from_slice(BLOCK);
            head(input, 5, 0x0, 0x1, id);
            input.extend_from_slice(b"hello");
        }
        // Cut inside the HEADERS frame and inside the last DATA frame.
        let (a, rest) = input.split_at(13 + 13);
        let (b, c) = rest.split_at(rest.len() - 3);
        for piece in [a, b, c] {
            conn.feed(piece, out, on).unwrap();
        }
        assert_eq!(conn.open_streams(), 0);
    };
    for _ in 0..1_000 {
        exchange(&mut conn, &mut out, &mut input, &mut on);
    }
    let before = allocs();
    for _ in 0..10_000 {
        exchange(&mut conn, &mut out, &mut input, &mut on);
    }
    let during = allocs() - before;
    assert_eq!(during, 0, "allocations in 10,000 warm exchanges");
    assert_eq!(bytes, 11_000 * 4 * 5);
    // Status, date, content-length, data, complete for each of 44,000 responses.
    assert_eq!(events, 11_000 * 4 * 5);
}
