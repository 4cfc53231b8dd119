//! Table-driven tests of the HTTP/1.1 codec. The central property: a byte stream decodes to the
//! same responses however it is split across `decode` calls.

use super::*;

// ---- allocation counting (per thread, so parallel tests do not disturb each other) ----

use headroom_testkit::thread_allocs as allocs;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

// ---- helpers ----

const fn m(status: u16, keep_alive: bool, body_len: u64) -> ResponseMeta {
    ResponseMeta {
        status,
        keep_alive,
        body_len,
    }
}

/// Everything a byte stream decoded to: the completed responses, then how it ended (the first
/// error, or the result of `eof()` after the last piece).
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    metas: Vec<ResponseMeta>,
    end: Result<Option<ResponseMeta>, ProtoError>,
}

/// Feeds `pieces` in order to a fresh decoder as an engine would (looping over pipelined
/// responses), checking the `decode` contract on the way.
fn run_pieces(head: bool, pieces: &[&[u8]]) -> Outcome {
    let mut dec = ResponseDecoder::new();
    dec.set_head_request(head);
    let mut metas = Vec::new();
    for piece in pieces {
        let mut p: &[u8] = piece;
        loop {
            match dec.decode(p) {
                Err(e) => return Outcome { metas, end: Err(e) },
                Ok((n, Decoded::NeedMore)) => {
                    assert_eq!(n, p.len(), "NeedMore must consume everything");
                    break;
                }
                Ok((n, Decoded::Complete(meta))) => {
                    assert!(
                        n > 0 && n <= p.len(),
                        "Complete consumed {n} of {}",
                        p.len()
                    );
                    assert!(!dec.in_progress(), "in_progress right after Complete");
                    metas.push(meta);
                    p = &p[n..];
                    if p.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    Outcome {
        metas,
        end: dec.eof(),
    }
}

fn run_cuts(head: bool, input: &[u8], cuts: &[usize]) -> Outcome {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &c in cuts {
        pieces.push(&input[start..c]);
        start = c;
    }
    pieces.push(&input[start..]);
    run_pieces(head, &pieces)
}

/// Asserts that every way of splitting `input` gives `expected`: byte by byte, in two parts at
/// every index, and (for small inputs) in three parts at every pair of indexes.
fn assert_split_invariant(name: &str, head: bool, input: &[u8], expected: &Outcome) {
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(
        &run_pieces(head, &bytes),
        expected,
        "{name}: byte at a time"
    );
    for i in 0..=input.len() {
        assert_eq!(&run_cuts(head, input, &[i]), expected, "{name}: cut at {i}");
    }
    if input.len() <= 160 {
        for i in 0..=input.len() {
            for j in i..=input.len() {
                assert_eq!(
                    &run_cuts(head, input, &[i, j]),
                    expected,
                    "{name}: cuts {i},{j}"
                );
            }
        }
    }
}

// ---- valid streams: every framing, keep-alive rule and pipelining ----

struct Case {
    name: &'static str,
    head: bool,
    input: &'static [u8],
    metas: &'static [ResponseMeta],
    end: Result<Option<ResponseMeta>, ProtoError>,
}

const OK_NONE: Result<Option<ResponseMeta>, ProtoError> = Ok(None);

#[rustfmt::skip]
const VALID: &[Case] = &[
    Case { name: "content-length", head: false,
        input: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        metas: &[m(200, true, 5)], end: OK_NONE },
    Case { name: "content-length zero", head: false,
        input: b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        metas: &[m(200, true, 0)], end: OK_NONE },
    Case { name: "content-length repeated, equal", head: false,
        input: b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length:3\r\n\r\nabc",
        metas: &[m(200, true, 3)], end: OK_NONE },
    Case { name: "content-length list, equal", head: false,
        input: b"HTTP/1.1 201 Created\r\nContent-Length: 3 , 3\r\n\r\nabc",
        metas: &[m(201, true, 3)], end: OK_NONE },
    Case { name: "chunked with extensions", head: false,
        input: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1a;name=\"v\"\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
        metas: &[m(200, true, 31)], end: OK_NONE },
    Case { name: "chunked with trailers", head: false,
        input: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0;ext\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
        metas: &[m(200, true, 3)], end: OK_NONE },
    Case { name: "chunked last, upper case, uppercase hex", head: false,
        input: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, CHUNKED\r\n\r\nA\r\n0123456789\r\n00\r\n\r\n",
        metas: &[m(200, true, 10)], end: OK_NONE },
    Case { name: "chunked, bare LF ends trailers", head: false,
        input: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-T: y\n\n",
        metas: &[m(200, true, 1)], end: OK_NONE },
    Case { name: "chunked, empty body", head: false,
        input: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        metas: &[m(200, true, 0)], end: OK_NONE },
    Case { name: "transfer-encoding overrides content-length, then close", head: false,
        input: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
        metas: &[m(200, false, 2)], end: OK_NONE },
    Case { name: "until close", head: false,
        input: b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nabc",
        metas: &[], end: Ok(Some(m(200, false, 3))) },
    Case { name: "until close, empty", head: false,
        input: b"HTTP/1.1 200 OK\r\n\r\n",
        metas: &[], end: Ok(Some(m(200, false, 0))) },
    Case { name: "until close: transfer-encoding not ending in chunked", head: false,
        input: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\nContent-Length: 1\r\n\r\nxyz",
        metas: &[], end: Ok(Some(m(200, false, 3))) },
    Case { name: "http/1.0 closes by default", head: false,
        input: b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi",
        metas: &[m(200, false, 2)], end: OK_NONE },
    Case { name: "http/1.0 keep-alive", head: false,
        input: b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi",
        metas: &[m(200, true, 2)], end: OK_NONE },
    Case { name: "http/1.0 keep-alive and close", head: false,
        input: b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        metas: &[m(200, false, 0)], end: OK_NONE },
    Case { name: "http/1.0 until close", head: false,
        input: b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nab",
        metas: &[], end: Ok(Some(m(200, false, 2))) },
    Case { name: "http/1.1 close", head: false,
        input: b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",
        metas: &[m(200, false, 1)], end: OK_NONE },
    Case { name: "http/1.1 close in a token list", head: false,
        input: b"HTTP/1.1 200 OK\r\nconnection: Upgrade,\tCLOSE \r\nContent-Length: 1\r\n\r\nx",
        metas: &[m(200, false, 1)], end: OK_NONE },
    Case { name: "http/1.1 other connection tokens", head: false,
        input: b"HTTP/1.1 200 OK\r\nConnection: keep-alive, closed\r\nContent-Length: 1\r\n\r\nx",
        metas: &[m(200, true, 1)], end: OK_NONE },
    Case { name: "100 continue is skipped", head: false,
        input: b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
        metas: &[m(200, true, 1)], end: OK_NONE },
    Case { name: "several interim responses", head: false,
        input: b"HTTP/1.1 100 Continue\r\nContent-Length: 9\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        metas: &[m(204, true, 0)], end: OK_NONE },
    Case { name: "204 has no body", head: false,
        input: b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
        metas: &[m(204, true, 0)], end: OK_NONE },
    Case { name: "304 has no body", head: false,
        input: b"HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n",
        metas: &[m(304, true, 0)], end: OK_NONE },
    Case { name: "response to HEAD has no body", head: true,
        input: b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: bogus\r\n\r\n",
        metas: &[m(200, true, 0), m(200, true, 0), m(404, true, 0)], end: OK_NONE },
    Case { name: "101 switching protocols is final and ends http", head: false,
        input: b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        metas: &[m(101, false, 0)], end: OK_NONE },
    Case { name: "pipelined, every framing", head: false,
        input: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnope\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\ntail",
        metas: &[m(200, true, 5), m(404, true, 4), m(204, true, 0), m(500, true, 0)],
        end: Ok(Some(m(200, false, 4))) },
    Case { name: "stray empty lines between responses", head: false,
        input: b"\r\n\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\r\n",
        metas: &[m(200, true, 2), m(200, true, 2)], end: OK_NONE },
    Case { name: "bare LF line endings", head: false,
        input: b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
        metas: &[m(200, true, 2)], end: OK_NONE },
    Case { name: "no reason phrase", head: false,
        input: b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
        metas: &[m(200, true, 0)], end: OK_NONE },
    Case { name: "nothing but empty lines", head: false,
        input: b"\r\n\r\n\n",
        metas: &[], end: OK_NONE },
    Case { name: "nothing", head: false,
        input: b"",
        metas: &[], end: OK_NONE },
];

#[test]
fn valid_streams_decode_as_expected() {
    for case in VALID {
        let expected = Outcome {
            metas: case.metas.to_vec(),
            end: case.end.clone(),
        };
        assert_eq!(
            run_pieces(case.head, &[case.input]),
            expected,
            "{}: one shot",
            case.name
        );
    }
}

#[test]
fn valid_streams_decode_the_same_however_split() {
    for case in VALID {
        let expected = run_pieces(case.head, &[case.input]);
        assert_split_invariant(case.name, case.head, case.input, &expected);
    }
}

// ---- invalid streams: errors, and that splitting never turns an error into success ----

struct BadCase {
    name: &'static str,
    input: Vec<u8>,
    metas: &'static [ResponseMeta],
    err: ProtoError,
}

fn bad(name: &'static str, input: &[u8], err: ProtoError) -> BadCase {
    BadCase {
        name,
        input: input.to_vec(),
        metas: &[],
        err,
    }
}

fn bad_cases() -> Vec<BadCase> {
    use ProtoError::*;
    let mut many_headers = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many_headers.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many_headers.extend_from_slice(b"\r\n");
    let mut huge_value = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
    huge_value.resize(MAX_HEAD_LEN + 10, b'a');
    huge_value.extend_from_slice(b"\r\n\r\n");
    let mut never_ends = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    never_ends.resize(MAX_HEAD_LEN + 1, b'a');
    let mut long_ext = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;".to_vec();
    long_ext.resize(long_ext.len() + MAX_CHUNK_LINE_LEN, b'e');
    long_ext.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
    vec![
        bad("garbage", b"hello world\r\n\r\n", BadHead),
        bad("binary garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", BadHead),
        bad("a request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", BadHead),
        bad("http/2 version", b"HTTP/2 200 OK\r\n\r\n", BadHead),
        bad("bad status", b"HTTP/1.1 2x0 OK\r\n\r\n", BadHead),
        bad("status below 100", b"HTTP/1.1 099 Low\r\n\r\n", BadHead),
        bad("space in header name", b"HTTP/1.1 200 OK\r\nBad Header: 1\r\n\r\n", BadHead),
        bad("CR without LF before status", b"\r\rHTTP/1.1 200 OK\r\n\r\n", BadHead),
        bad("too many headers", &many_headers, HeadTooLarge),
        bad("head too large", &huge_value, HeadTooLarge),
        bad("head never ends", &never_ends, HeadTooLarge),
        bad("content-length not a number", b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", BadContentLength),
        bad("content-length negative", b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", BadContentLength),
        bad("content-length empty", b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", BadContentLength),
        bad("content-length plus sign", b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n", BadContentLength),
        bad("content-length conflicting", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", BadContentLength),
        bad("content-length conflicting list", b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd", BadContentLength),
        bad("content-length empty list element", b"HTTP/1.1 200 OK\r\nContent-Length: 3,\r\n\r\nabc", BadContentLength),
        bad("content-length overflow", b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n", BadContentLength),
        bad("content-length max, body never ends", b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nabc", Incomplete),
        bad("chunk size overflow", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n", BadChunk),
        bad("chunk size not hex", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", BadChunk),
        bad("chunk size missing", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", BadChunk),
        bad("chunk size bare LF", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n", BadChunk),
        bad("chunk data too long", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n", BadChunk),
        bad("chunk data CR then junk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\rX", BadChunk),
        bad("trailer CR then junk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\rX", BadChunk),
        bad("chunk line too long", &long_ext, BadChunk),
        bad("eof in head", b"HTTP/1.1 200 OK\r\nContent-", Incomplete),
        bad("eof in status line", b"HTTP/1.", Incomplete),
        bad("eof in body", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", Incomplete),
        bad("eof after interim", b"HTTP/1.1 100 Continue\r\n\r\n", Incomplete),
        bad("eof in chunk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", Incomplete),
        bad("eof in chunk size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5", Incomplete),
        bad("eof in trailers", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n", Incomplete),
        BadCase {
            name: "error after a good response",
            input: b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n".to_vec(),
            metas: &[const { m(200, true, 1) }],
            err: BadContentLength,
        },
    ]
}

#[test]
fn invalid_streams_fail_with_the_right_error() {
    for case in bad_cases() {
        let expected = Outcome {
            metas: case.metas.to_vec(),
            end: Err(case.err.clone()),
        };
        assert_eq!(run_pieces(false, &[&case.input]), expected, "{}", case.name);
    }
}

#[test]
fn invalid_streams_fail_however_split() {
    for case in bad_cases() {
        let one_shot = run_pieces(false, &[&case.input]);
        let check = |got: Outcome, how: &str| {
            assert_eq!(got.metas, one_shot.metas, "{}: {how}", case.name);
            assert!(got.end.is_err(), "{}: {how}: {:?}", case.name, got.end);
        };
        if case.input.len() <= 4096 {
            for i in 0..=case.input.len() {
                check(run_cuts(false, &case.input, &[i]), &format!("cut at {i}"));
            }
        } else {
            for i in [1, 100, MAX_HEAD_LEN - 1, MAX_HEAD_LEN, MAX_HEAD_LEN + 1] {
                check(
                    run_cuts(false, &case.input, &[i.min(case.input.len())]),
                    &format!("cut at {i}"),
                );
            }
        }
        let bytes: Vec<&[u8]> = case.input.chunks(1).collect();
        check(run_pieces(false, &bytes), "byte at a time");
    }
}

#[test]
fn limits_are_exact_in_both_paths() {
    // A head of exactly MAX_HEAD_LEN bytes is accepted, one byte more is not, whether it arrives
    // in one piece or split.
    let make = |len: usize| {
        let mut h = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: ".to_vec();
        h.resize(len - 4, b'a');
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    let ok = make(MAX_HEAD_LEN);
    let too_big = make(MAX_HEAD_LEN + 1);
    for cut in [0, 1, 40, MAX_HEAD_LEN - 2, MAX_HEAD_LEN - 1] {
        let got = run_cuts(false, &ok, &[cut]);
        assert_eq!(got.metas, [m(200, true, 0)], "cut at {cut}");
        let got = run_cuts(false, &too_big, &[cut]);
        assert_eq!(got.end, Err(ProtoError::HeadTooLarge), "cut at {cut}");
    }
}

// ---- the decoder API contract ----

#[test]
fn pipelined_responses_are_not_consumed_past_the_first() {
    let one = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let two = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let mut input = one.to_vec();
    input.extend_from_slice(two);
    input.extend_from_slice(one);
    let mut dec = ResponseDecoder::new();
    assert_eq!(
        dec.decode(&input),
        Ok((one.len(), Decoded::Complete(m(200, true, 5))))
    );
    assert_eq!(
        dec.decode(&input[one.len()..]),
        Ok((two.len(), Decoded::Complete(m(200, true, 3))))
    );
    assert_eq!(
        dec.decode(&input[one.len() + two.len()..]),
        Ok((one.len(), Decoded::Complete(m(200, true, 5))))
    );
    assert_eq!(dec.decode(b""), Ok((0, Decoded::NeedMore)));
}

#[test]
fn in_progress_eof_and_reset() {
    let mut dec = ResponseDecoder::new();
    assert!(!dec.in_progress());
    assert_eq!(dec.eof(), Ok(None));
    assert_eq!(dec.decode(b"\r\n"), Ok((2, Decoded::NeedMore)));
    assert!(!dec.in_progress(), "empty lines are not a response");
    assert_eq!(dec.decode(b"\r"), Ok((1, Decoded::NeedMore)));
    assert!(!dec.in_progress(), "nor is half of one");
    assert_eq!(dec.decode(b"\nH"), Ok((2, Decoded::NeedMore)));
    assert!(dec.in_progress());
    dec.reset();
    assert!(!dec.in_progress());
    assert_eq!(dec.eof(), Ok(None));

    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
    assert_eq!(dec.decode(head), Ok((head.len(), Decoded::NeedMore)));
    assert!(dec.in_progress());
    assert_eq!(dec.eof(), Err(ProtoError::Incomplete));
    assert!(
        !dec.in_progress(),
        "eof readies the decoder for a new connection"
    );

    // reset after an error: the next response decodes normally.
    assert_eq!(dec.decode(b"junk\r\n"), Err(ProtoError::BadHead));
    dec.reset();
    assert_eq!(dec.decode(head), Ok((head.len(), Decoded::NeedMore)));
    assert_eq!(
        dec.decode(b"ok"),
        Ok((2, Decoded::Complete(m(200, true, 2))))
    );
}

#[test]
fn head_request_setting_persists_until_changed() {
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
    let mut dec = ResponseDecoder::new();
    dec.set_head_request(true);
    for _ in 0..2 {
        assert_eq!(
            dec.decode(resp),
            Ok((resp.len(), Decoded::Complete(m(200, true, 0))))
        );
        dec.reset();
    }
    dec.set_head_request(false);
    assert_eq!(dec.decode(resp), Ok((resp.len(), Decoded::NeedMore)));
    assert_eq!(
        dec.decode(b"abc"),
        Ok((3, Decoded::Complete(m(200, true, 3))))
    );
}

#[test]
fn decoder_is_small_and_idle_decoders_hold_no_buffer() {
    assert!(std::mem::size_of::<ResponseDecoder>() <= 72);
    let dec = ResponseDecoder::new();
    assert_eq!(dec.buf.capacity(), 0);
}

/// Capture asked for (cookies, as every HTTP user of a run asks) makes no box until a head has
/// a field to capture: a server that never sets a cookie costs its users nothing (issue 29's
/// idle connections). Then the box stays, and a later head without the field captures nothing.
#[test]
fn the_capture_box_is_made_by_the_first_head_that_has_a_wanted_field() {
    let mut dec = ResponseDecoder::new();
    dec.set_capture(HeaderId::SetCookie.into(), DEFAULT_CAPTURE_BYTES);
    let plain = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 0\r\n\r\n";
    for _ in 0..3 {
        assert!(matches!(dec.decode(plain), Ok((_, Decoded::Complete(_)))));
        assert!(
            dec.capture.is_none(),
            "a head without Set-Cookie made a box"
        );
        assert_eq!(dec.captured().count(), 0);
    }
    let cookie = b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nContent-Length: 0\r\n\r\n";
    assert!(matches!(dec.decode(cookie), Ok((_, Decoded::Complete(_)))));
    let got: Vec<_> = dec.captured().collect();
    assert_eq!(got, vec![(HeaderId::SetCookie, &b"a=1"[..])]);
    assert!(matches!(dec.decode(plain), Ok((_, Decoded::Complete(_)))));
    assert_eq!(dec.captured().count(), 0, "the last head's values only");
    // Split across reads (the slow path) the same holds.
    let mut dec = ResponseDecoder::new();
    dec.set_capture(HeaderId::SetCookie.into(), DEFAULT_CAPTURE_BYTES);
    let (a, b) = cookie.split_at(20);
    assert_eq!(dec.decode(a), Ok((a.len(), Decoded::NeedMore)));
    assert!(dec.capture.is_none());
    assert!(matches!(dec.decode(b), Ok((_, Decoded::Complete(_)))));
    assert_eq!(dec.captured().count(), 1);
    // Content-Encoding wanted: the box is there from the start (every body is counted).
    let mut dec = ResponseDecoder::new();
    dec.set_capture(HeaderId::ContentEncoding.into(), DEFAULT_CAPTURE_BYTES);
    assert!(dec.capture.is_some());
}

#[test]
fn whole_heads_decode_without_allocating() {
    let input: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhelloHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\nrest";
    let mut dec = ResponseDecoder::new();
    let before = allocs();
    let mut p = input;
    let mut completed = 0;
    for _ in 0..1000 {
        p = input;
        while let Ok((n, Decoded::Complete(_))) = dec.decode(p) {
            completed += 1;
            p = &p[n..];
        }
        assert_eq!(dec.eof(), Ok(Some(m(200, false, 4))));
    }
    assert_eq!(
        allocs() - before,
        0,
        "allocations while decoding whole heads"
    );
    assert_eq!(completed, 2000);
    assert!(!p.is_empty());
    assert_eq!(dec.buf.capacity(), 0);
    // The counter does see allocations on this thread.
    let v = std::hint::black_box(vec![1u8; 16]);
    assert!(allocs() > before && v.len() == 16);
}

#[test]
fn split_heads_reuse_the_buffer_and_large_ones_are_released() {
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let mut dec = ResponseDecoder::new();
    assert_eq!(dec.decode(&resp[..10]), Ok((10, Decoded::NeedMore)));
    assert!(dec.buf.capacity() > 0);
    assert_eq!(
        dec.decode(&resp[10..]),
        Ok((resp.len() - 10, Decoded::Complete(m(200, true, 2))))
    );
    let cap = dec.buf.capacity();
    assert!(cap > 0 && dec.buf.is_empty());
    let before = allocs();
    for _ in 0..100 {
        assert_eq!(dec.decode(&resp[..10]), Ok((10, Decoded::NeedMore)));
        dec.reset();
        assert_eq!(dec.decode(&resp[..10]), Ok((10, Decoded::NeedMore)));
        assert!(matches!(
            dec.decode(&resp[10..]),
            Ok((_, Decoded::Complete(_)))
        ));
    }
    assert_eq!(allocs() - before, 0, "a warm buffer is reused");
    assert_eq!(dec.buf.capacity(), cap);

    let mut big = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: ".to_vec();
    big.resize(20_000, b'a');
    big.extend_from_slice(b"\r\n\r\n");
    assert_eq!(dec.decode(&big[..100]), Ok((100, Decoded::NeedMore)));
    assert_eq!(
        dec.decode(&big[100..]),
        Ok((big.len() - 100, Decoded::Complete(m(200, true, 0))))
    );
    assert_eq!(dec.buf.capacity(), 0, "a large head buffer is not kept");
}

// ---- no panics on mutated input (a deterministic, dependency-free stand-in for the fuzzer) ----

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b"0\r\n\r\n",
    b"HTTP/1.1 ",
    b"HTTP/1.0 200 OK\r\n",
    b"100",
    b"204",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked\r\n",
    b"Connection: close\r\n",
    b"ffffffffffffffff",
    b"18446744073709551615",
    b";",
    b",",
    b" ",
    b"\x00",
    b"\xff",
];

fn mutate(rng: &mut XorShift, data: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        match rng.below(6) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = rng.next() as u8;
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let n = rng.below(len - i + 1).min(8);
                data.drain(i..i + n);
            }
            3 => {
                let i = rng.below(len + 1);
                let piece = INTERESTING[rng.below(INTERESTING.len())];
                data.splice(i..i, piece.iter().copied());
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = rng.below(len - i + 1).min(64);
                let copy: Vec<u8> = data[i..i + n].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, copy);
            }
            _ => data.truncate(rng.below(len + 1)),
        }
    }
}

#[test]
fn mutated_streams_never_panic_and_split_consistently() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..20_000 {
        let case = &VALID[rng.below(VALID.len())];
        let mut data = case.input.to_vec();
        mutate(&mut rng, &mut data);
        let head = rng.below(8) == 0;
        let one_shot = run_pieces(head, &[&data]);
        let mut cuts: Vec<usize> = (0..rng.below(6))
            .map(|_| rng.below(data.len() + 1))
            .collect();
        cuts.sort_unstable();
        let split = run_cuts(head, &data, &cuts);
        if one_shot.end.is_ok() {
            assert_eq!(
                split,
                one_shot,
                "input {:?} cuts {cuts:?}",
                String::from_utf8_lossy(&data)
            );
        } else {
            assert_eq!(
                split.metas,
                one_shot.metas,
                "input {:?} cuts {cuts:?}",
                String::from_utf8_lossy(&data)
            );
            assert!(
                split.end.is_err(),
                "input {:?} cuts {cuts:?}",
                String::from_utf8_lossy(&data)
            );
        }
    }
}

// ---- request encoding ----

fn request(method: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpRequest {
    HttpRequest {
        method: method.to_string(),
        path: "/a?b=c".to_string(),
        host: "example.test:8080".to_string(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: body.to_vec(),
    }
}

#[test]
fn encode_request_table() {
    let ua = format!("User-Agent: {USER_AGENT}\r\n");
    let cases: Vec<(&str, HttpRequest, bool, String)> = vec![
        (
            "plain GET, keep-alive",
            request("GET", &[], b""),
            true,
            format!("GET /a?b=c HTTP/1.1\r\nHost: example.test:8080\r\n{ua}\r\n"),
        ),
        (
            "GET, close",
            request("GET", &[], b""),
            false,
            format!("GET /a?b=c HTTP/1.1\r\nHost: example.test:8080\r\n{ua}Connection: close\r\n\r\n"),
        ),
        (
            "POST with body and user headers in order",
            request("POST", &[("Accept", "*/*"), ("X-Y", "z")], b"{\"k\":1}"),
            true,
            format!("POST /a?b=c HTTP/1.1\r\nHost: example.test:8080\r\n{ua}Accept: */*\r\nX-Y: z\r\nContent-Length: 7\r\n\r\n{{\"k\":1}}"),
        ),
        (
            "PUT with an empty body still says Content-Length: 0",
            request("PUT", &[], b""),
            true,
            format!("PUT /a?b=c HTTP/1.1\r\nHost: example.test:8080\r\n{ua}Content-Length: 0\r\n\r\n"),
        ),
        (
            "user headers replace ours, case-insensitively",
            request(
                "PATCH",
                &[("host", "h"), ("USER-AGENT", "me"), ("content-length", "1"), ("connection", "keep-alive")],
                b"x",
            ),
            false,
            "PATCH /a?b=c HTTP/1.1\r\nhost: h\r\nUSER-AGENT: me\r\ncontent-length: 1\r\nconnection: keep-alive\r\n\r\nx".to_string(),
        ),
        (
            "user Transfer-Encoding suppresses Content-Length",
            request("POST", &[("Transfer-Encoding", "chunked")], b"1\r\nx\r\n0\r\n\r\n"),
            true,
            format!("POST /a?b=c HTTP/1.1\r\nHost: example.test:8080\r\n{ua}Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"),
        ),
        (
            "DELETE with a body gets a Content-Length",
            request("DELETE", &[], b"ab"),
            true,
            format!("DELETE /a?b=c HTTP/1.1\r\nHost: example.test:8080\r\n{ua}Content-Length: 2\r\n\r\nab"),
        ),
    ];
    for (name, req, keep_alive, expected) in cases {
        let mut out = b"prefix".to_vec();
        encode_request(&req, keep_alive, &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            format!("prefix{expected}"),
            "{name}"
        );
    }
}

#[test]
fn encode_request_empty_path_is_root() {
    let mut req = request("GET", &[], b"");
    req.path.clear();
    let mut out = Vec::new();
    encode_request(&req, true, &mut out);
    assert!(out.starts_with(b"GET / HTTP/1.1\r\n"));
}

#[test]
fn encoded_request_parses_as_http() {
    let req = request("POST", &[("Accept", "*/*")], b"hello");
    let mut out = Vec::new();
    encode_request(&req, false, &mut out);
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut parsed = httparse::Request::new(&mut headers);
    let n = match parsed.parse(&out) {
        Ok(httparse::Status::Complete(n)) => n,
        other => panic!("{other:?}"),
    };
    assert_eq!(parsed.method, Some("POST"));
    assert_eq!(parsed.path, Some("/a?b=c"));
    assert_eq!(parsed.headers.len(), 5);
    assert_eq!(&out[n..], b"hello");
}

// ---- header capture ----

const CAPTURE_RESPONSE: &[u8] = b"HTTP/1.1 302 Found\r\nset-cookie: a=1; Path=/\r\nServer: x\r\nLocation: /next\r\nSET-COOKIE: b=2\r\nWWW-Authenticate: Digest realm=\"r\", nonce=\"n\"\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

fn captured(dec: &ResponseDecoder) -> Vec<(HeaderId, Vec<u8>)> {
    dec.captured().map(|(id, v)| (id, v.to_vec())).collect()
}

/// Decodes `pieces` with capture of `set`, returning what was captured at each `Complete`.
fn capture_pieces(set: HeaderSet, max: usize, pieces: &[&[u8]]) -> Vec<Vec<(HeaderId, Vec<u8>)>> {
    let mut dec = ResponseDecoder::new();
    dec.set_capture(set, max);
    let mut out = Vec::new();
    for piece in pieces {
        let mut p: &[u8] = piece;
        while let Ok((n, Decoded::Complete(_))) = dec.decode(p) {
            out.push(captured(&dec));
            p = &p[n..];
        }
    }
    out
}

#[test]
fn capture_is_off_by_default() {
    let mut dec = ResponseDecoder::new();
    assert!(matches!(
        dec.decode(CAPTURE_RESPONSE),
        Ok((_, Decoded::Complete(_)))
    ));
    assert_eq!(dec.captured().count(), 0);
    assert_eq!(dec.captured_dropped(), 0);
    assert!(dec.capture.is_none());
}

#[test]
fn capture_takes_the_selected_headers_in_order() {
    let all = capture_pieces(HeaderSet::ALL, DEFAULT_CAPTURE_BYTES, &[CAPTURE_RESPONSE]);
    let first = vec![
        (HeaderId::SetCookie, b"a=1; Path=/".to_vec()),
        (HeaderId::Location, b"/next".to_vec()),
        (HeaderId::SetCookie, b"b=2".to_vec()),
        (
            HeaderId::WwwAuthenticate,
            b"Digest realm=\"r\", nonce=\"n\"".to_vec(),
        ),
        (HeaderId::ContentEncoding, b"gzip".to_vec()),
    ];
    // The second response has none of them: cleared per response.
    assert_eq!(all, vec![first.clone(), vec![]]);

    let cookies: HeaderSet = [HeaderId::SetCookie].into_iter().collect();
    let only = capture_pieces(cookies, DEFAULT_CAPTURE_BYTES, &[CAPTURE_RESPONSE]);
    let want: Vec<_> = first
        .iter()
        .filter(|(id, _)| *id == HeaderId::SetCookie)
        .cloned()
        .collect();
    assert_eq!(only, vec![want, vec![]]);
}

#[test]
fn capture_is_the_same_however_split() {
    let whole = capture_pieces(HeaderSet::ALL, DEFAULT_CAPTURE_BYTES, &[CAPTURE_RESPONSE]);
    for cut in 1..CAPTURE_RESPONSE.len() {
        let (a, b) = CAPTURE_RESPONSE.split_at(cut);
        let split = capture_pieces(HeaderSet::ALL, DEFAULT_CAPTURE_BYTES, &[a, b]);
        assert_eq!(split, whole, "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = CAPTURE_RESPONSE.chunks(1).collect();
    assert_eq!(
        capture_pieces(HeaderSet::ALL, DEFAULT_CAPTURE_BYTES, &bytes),
        whole
    );
}

#[test]
fn capture_bound_drops_whole_values_and_counts_them() {
    // 11 bytes of "a=1; Path=/" fit in 12, then "/next" (5) does not, "b=2" does not (11+3>12)...
    let mut dec = ResponseDecoder::new();
    dec.set_capture(HeaderSet::ALL, 12);
    assert!(matches!(
        dec.decode(CAPTURE_RESPONSE),
        Ok((_, Decoded::Complete(_)))
    ));
    assert_eq!(
        captured(&dec),
        vec![(HeaderId::SetCookie, b"a=1; Path=/".to_vec())]
    );
    assert_eq!(dec.captured_dropped(), 4);
    // Of the four, one is a cookie (b=2): the caller counts it as rejected (issue 26).
    assert_eq!(dec.cookies_dropped(), 1);
    assert!(dec.capture.as_ref().unwrap().capacity() <= 12);
    // The next response starts afresh.
    let rest = b"HTTP/1.1 200 OK\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n";
    assert!(matches!(dec.decode(rest), Ok((_, Decoded::Complete(_)))));
    assert_eq!(captured(&dec), vec![(HeaderId::Location, b"/x".to_vec())]);
    assert_eq!(dec.captured_dropped(), 0);
    assert_eq!(dec.cookies_dropped(), 0);
    // A bound of 0 captures nothing and never allocates.
    dec.set_capture(HeaderSet::ALL, 0);
    assert!(matches!(dec.decode(rest), Ok((_, Decoded::Complete(_)))));
    assert_eq!(dec.captured().count(), 0);
    assert_eq!(dec.captured_dropped(), 1);
}

#[test]
fn capture_replaces_interim_heads_and_survives_eof_of_a_close_delimited_body() {
    let mut dec = ResponseDecoder::new();
    dec.set_capture(HeaderSet::ALL, DEFAULT_CAPTURE_BYTES);
    let input = b"HTTP/1.1 103 Early Hints\r\nLocation: /hint\r\n\r\nHTTP/1.1 200 OK\r\nSet-Cookie: s=1\r\n\r\nbody";
    assert_eq!(dec.decode(input), Ok((input.len(), Decoded::NeedMore)));
    assert_eq!(dec.eof(), Ok(Some(m(200, false, 4))));
    assert_eq!(captured(&dec), vec![(HeaderId::SetCookie, b"s=1".to_vec())]);
    // An eof that completes nothing, and reset, clear it; the setting stays.
    assert_eq!(dec.eof(), Ok(None));
    assert_eq!(dec.captured().count(), 0);
    assert!(matches!(
        dec.decode(CAPTURE_RESPONSE),
        Ok((_, Decoded::Complete(_)))
    ));
    dec.reset();
    assert_eq!(dec.captured().count(), 0);
    assert!(matches!(
        dec.decode(CAPTURE_RESPONSE),
        Ok((_, Decoded::Complete(_)))
    ));
    assert_eq!(dec.captured().count(), 5);
    // Turning it off frees the box.
    dec.set_capture(HeaderSet::NONE, DEFAULT_CAPTURE_BYTES);
    assert!(dec.capture.is_none());
    assert_eq!(dec.captured().count(), 0);
}

#[test]
fn warm_capture_does_not_allocate() {
    let mut dec = ResponseDecoder::new();
    dec.set_capture(HeaderSet::ALL, DEFAULT_CAPTURE_BYTES);
    let mut seen = 0usize;
    let mut run = |dec: &mut ResponseDecoder| {
        // Whole (fast path), then split in the head (slow path).
        for pieces in [
            &[CAPTURE_RESPONSE][..],
            &[&CAPTURE_RESPONSE[..40], &CAPTURE_RESPONSE[40..]][..],
        ] {
            for piece in pieces {
                let mut p: &[u8] = piece;
                while let Ok((n, Decoded::Complete(_))) = dec.decode(p) {
                    seen += dec.captured().map(|(_, v)| v.len()).sum::<usize>();
                    p = &p[n..];
                }
            }
        }
    };
    run(&mut dec);
    let before = allocs();
    for _ in 0..1000 {
        run(&mut dec);
    }
    assert_eq!(allocs() - before, 0, "allocations in warm capture");
    assert!(seen > 0);
}

/// What httparse reads from one request of `bytes`: method, target, fields, body, length.
#[allow(clippy::type_complexity)]
fn parsed(bytes: &[u8]) -> (String, String, Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>, usize) {
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut hs);
    let httparse::Status::Complete(head) = req.parse(bytes).unwrap() else {
        panic!("incomplete request");
    };
    let fields: Vec<_> = req
        .headers
        .iter()
        .map(|h| (h.name.as_bytes().to_vec(), h.value.to_vec()))
        .collect();
    let len = fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(b"content-length"))
        .map_or(0, |(_, v)| std::str::from_utf8(v).unwrap().parse().unwrap());
    (
        req.method.unwrap().to_string(),
        req.path.unwrap().to_string(),
        fields,
        bytes[head..head + len].to_vec(),
        head + len,
    )
}

#[test]
fn a_batch_keeps_where_the_encoder_wrote_each_part() {
    let mut b = Batch::new();
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [u8]);
    let cases: [Case; 4] = [
        ("GET", "/", &[], b""),
        (
            "POST",
            "/login?next=/a",
            &[("X-A", "1"), ("Content-Type", "text/plain")],
            b"u=1&p=2",
        ),
        ("HEAD", "", &[("Host", "other:81")], b""),
        ("PUT", "/x", &[("Transfer-Encoding", "chunked")], b""),
    ];
    for (method, path, headers, body) in cases {
        let fields: [(&str, &[u8]); 2] = [("Cookie", b"sid=\xe9"), ("Authorization", b"")];
        b.push(
            method,
            path,
            "h:8080",
            headers.iter().copied(),
            &fields,
            body,
            false,
        );
    }
    assert_eq!(b.count(), 4);
    let mut rest: &[u8] = &b;
    for (i, r) in b.iter().enumerate() {
        // The parts are what a parser reads from the bytes, request by request.
        let (method, target, fields, body, len) = parsed(rest);
        assert_eq!(r.wire(), &rest[..len], "request {i}");
        assert_eq!(r.method(), method);
        assert_eq!(r.target(), target);
        assert_eq!(r.method_bytes(), method.as_bytes());
        assert_eq!(r.target_bytes(), target.as_bytes());
        let mine: Vec<_> = r.fields().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        assert_eq!(mine, fields, "request {i}");
        assert_eq!(r.body(), &body[..]);
        rest = &rest[len..];
        assert_eq!(b.first(i + 1).len(), b.len() - rest.len());
    }
    assert!(rest.is_empty());
    assert_eq!(b.get(0).unwrap().authority(), b"h:8080");
    assert_eq!(b.get(2).unwrap().authority(), b"other:81");
    assert_eq!(b.get(2).unwrap().target(), "/");
    assert!(b.get(4).is_none());
    assert_eq!(b.first(0), b"");
    assert_eq!(b.first(9), &b[..]);

    // Appended, the parts move with the bytes.
    let mut two = Batch::new();
    two.raw_mut().extend_from_slice(b"");
    two.append(&b);
    two.append(&b);
    assert_eq!(two.count(), 8);
    assert_eq!(&two[b.len()..], &b[..]);
    let (a, c) = (two.get(1).unwrap(), two.get(5).unwrap());
    assert_eq!(
        (a.method(), a.target(), a.body()),
        (c.method(), c.target(), c.body())
    );
    assert!(a.fields().eq(c.fields()));
    assert_eq!(c.wire(), b.get(1).unwrap().wire());
}

#[test]
fn a_request_made_from_another_keeps_its_fields_but_those_dropped() {
    let mut b = Batch::new();
    let headers = [("Cookie", "old=1"), ("Content-Type", "text/plain")];
    b.push(
        "POST",
        "/form",
        "h",
        headers.iter().copied(),
        &[],
        b"hi",
        true,
    );
    let from = b.get(0).unwrap();
    let mut hop = Batch::new();
    let drop =
        |n: &[u8]| n.eq_ignore_ascii_case(b"cookie") || n.eq_ignore_ascii_case(b"content-length");
    let fields: [(&str, &[u8]); 2] = [("Cookie", b"new=2"), ("Authorization", b"")];
    hop.push_from(from, "GET", "/next?x=1", &drop, &fields, false);
    assert_eq!(
        std::str::from_utf8(&hop).unwrap(),
        format!(
            "GET /next?x=1 HTTP/1.1\r\nHost: h\r\nUser-Agent: {USER_AGENT}\r\nContent-Type: text/plain\r\nCookie: new=2\r\n\r\n"
        )
    );
    let (method, target, fields, body, len) = parsed(&hop);
    let r = hop.get(0).unwrap();
    assert_eq!((r.method(), r.target()), (&*method, &*target));
    assert!(r.fields().map(|(n, v)| (n.to_vec(), v.to_vec())).eq(fields));
    assert_eq!((r.body(), len), (&body[..], hop.len()));
    // Same method, body kept.
    hop.clear();
    hop.push_from(from, "POST", "/kept", &|_| false, &[], true);
    assert_eq!(&hop[hop.len() - 4..], b"\r\nhi");
    assert_eq!(hop.get(0).unwrap().body(), b"hi");
    assert_eq!(parsed(&hop).4, hop.len());
}

#[test]
fn a_warm_batch_allocates_nothing_and_raw_bytes_have_no_parts() {
    let mut b = Batch::new();
    let run = |b: &mut Batch| {
        b.clear();
        for path in ["/a", "/bb", "/ccc"] {
            let fields: [(&str, &[u8]); 1] = [("Cookie", b"sid=1")];
            b.push(
                "GET",
                path,
                "h",
                [("X", "y")].into_iter(),
                &fields,
                b"",
                true,
            );
        }
    };
    run(&mut b);
    let before = allocs();
    for _ in 0..1000 {
        run(&mut b);
    }
    assert_eq!(allocs() - before, 0, "allocations in a warm batch");
    b.clear();
    b.raw_mut().extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(b.count(), 0);
    assert!(b.get(0).is_none());
    assert_eq!(b.first(1), b"GET / HTTP/1.1\r\n\r\n");
}

#[test]
fn extra_fields_are_written_as_bytes_and_empty_ones_skipped() {
    let mut out = Vec::new();
    let fields: [(&str, &[u8]); 2] = [("Cookie", b"a=\xe9t\xe9"), ("Authorization", b"")];
    encode_parts_with(
        "GET",
        "/",
        "h",
        std::iter::empty(),
        &fields,
        b"",
        true,
        &mut out,
    );
    let text = String::from_utf8_lossy(&out).into_owned();
    let want: &[u8] = b"Cookie: a=\xe9t\xe9\r\n";
    assert!(out.windows(want.len()).any(|w| w == want), "{text}");
    assert!(!text.contains("Authorization"), "{text}");
    assert!(out.ends_with(b"\r\n\r\n"), "{text}");
}
