//! What content decoding allocates per response once warm, watched by a counting global
//! allocator (per thread, so the test harness does not disturb it): gzip and deflate nothing
//! (the inflate state is reset, the scratch buffer reused); br a few allocations per response,
//! since brotli-decompressor has no reset (its state is made per stream and dropped at its end).

use std::io::Write;

use headroom_proto::http1::{Decoded, HeaderId, HeaderSet, ResponseDecoder, DEFAULT_CAPTURE_BYTES};

use headroom_testkit::thread_allocs as allocs;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

fn body() -> Vec<u8> {
    (0..2000)
        .flat_map(|i| format!("row {i}: some text a server would send\n").into_bytes())
        .collect()
}

fn response(coding: &str, encoded: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\n\r\n",
        encoded.len()
    )
    .into_bytes();
    r.extend_from_slice(encoded);
    r
}

/// Decodes `wire` (one response) `n` times, cut into 1,000-byte reads; returns the allocations
/// made and checks each response decoded to `decoded` bytes.
fn run(dec: &mut ResponseDecoder, wire: &[u8], n: usize, decoded: u64) -> u64 {
    let before = allocs();
    for _ in 0..n {
        let mut done = 0;
        for mut read in wire.chunks(1000) {
            while !read.is_empty() {
                let (used, d) = dec.decode(read).unwrap();
                read = &read[used..];
                if let Decoded::Complete(_) = d {
                    let s = dec.content().unwrap();
                    assert_eq!((s.decoded, s.error), (decoded, None));
                    done += 1;
                }
            }
        }
        assert_eq!(done, 1);
    }
    allocs() - before
}

#[test]
fn warm_decoders_allocate_nothing_for_gzip_and_deflate_and_little_for_br() {
    let data = body();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&data).unwrap();
    let gz = response("gzip", &gz.finish().unwrap());
    let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zl.write_all(&data).unwrap();
    let zl = response("deflate", &zl.finish().unwrap());
    let mut br = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
        w.write_all(&data).unwrap();
    }
    let br = response("br", &br);

    let mut dec = ResponseDecoder::new();
    dec.set_capture(
        HeaderSet::from(HeaderId::ContentEncoding),
        DEFAULT_CAPTURE_BYTES,
    );
    let len = data.len() as u64;
    // Warm up: the capture buffer, the scratch buffer, the inflate state.
    run(&mut dec, &gz, 2, len);
    run(&mut dec, &zl, 2, len);
    let n = 1000;
    assert_eq!(
        run(&mut dec, &gz, n, len),
        0,
        "gzip allocations per {n} responses"
    );
    assert_eq!(
        run(&mut dec, &zl, n, len),
        0,
        "deflate allocations per {n} responses"
    );
    run(&mut dec, &br, 2, len);
    let br_allocs = run(&mut dec, &br, n, len);
    eprintln!("br: {br_allocs} allocations over {n} responses of {len} bytes");
    // A state, its ring buffer and a few Huffman tables per stream: a handful, not a number
    // that grows with the body.
    assert!(br_allocs > 0 && br_allocs <= 32 * n as u64, "{br_allocs}");
    // And gzip is still allocation-free after br ran between.
    assert_eq!(run(&mut dec, &gz, n, len), 0);
}
