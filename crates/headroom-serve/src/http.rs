//! HTTP/1.1 request handling without I/O, shared by every server architecture.
//!
//! A connection's input is fed to an [`InputState`] in whatever pieces the socket delivered; it
//! answers every complete request in order by appending pre-encoded responses to an output buffer
//! that the caller writes in one go. Nothing here reads a socket, so the same code serves the
//! reactor, the thread-per-connection server and the fuzz targets, and the tests can split input
//! at every byte.
//!
//! Routes: `GET /` returns the configured body; `GET /bytes/N` returns `N` bytes (`N` at most
//! [`MAX_BYTES`], 400 above); anything else is 404. The method is not checked except that `HEAD`
//! gets no body. Request bodies with `Content-Length` are skipped, not stored.
//!
//! Subtleness ahead: a malformed request (400), a head over [`MAX_HEAD`] (431) or a chunked
//! request body (501) ends the connection after the error response, because the server can no
//! longer tell where the next request starts. `Connection: close`, and HTTP/1.0 without
//! `Connection: keep-alive`, end it after their response.

/// Largest request head (request line + headers) accepted; above it the answer is 431.
pub const MAX_HEAD: usize = 16 * 1024;
/// Largest `N` of `/bytes/N` (16 MiB); above it the answer is 400.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// Headers parsed per request; more is answered with 431.
const MAX_HEADERS: usize = 64;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// How the response tells the client about the connection's future.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persist {
    /// HTTP/1.1 default: no `Connection` header needed.
    KeepAlive11,
    /// HTTP/1.0 client that asked for keep-alive: `Connection: keep-alive`.
    KeepAlive10,
    /// The connection ends after this response: `Connection: close`.
    Close,
}

impl Persist {
    fn index(self) -> usize {
        self as usize
    }
    fn header(self) -> &'static [u8] {
        match self {
            Persist::KeepAlive11 => b"",
            Persist::KeepAlive10 => b"Connection: keep-alive\r\n",
            Persist::Close => b"Connection: close\r\n",
        }
    }
}

/// One fixed response, encoded once per [`Persist`] variant.
#[derive(Debug, Clone)]
struct Canned {
    /// Full response (head + body) per [`Persist::index`].
    full: [Box<[u8]>; 3],
    /// Length of the head within `full`, for `HEAD` requests.
    head_len: [usize; 3],
}

impl Canned {
    fn new(status: &str, body: &[u8]) -> Canned {
        let encode = |p: Persist| {
            let mut v = Vec::with_capacity(128 + body.len());
            push_head(&mut v, status, body.len(), p);
            let head_len = v.len();
            v.extend_from_slice(body);
            (v.into_boxed_slice(), head_len)
        };
        let (a, la) = encode(Persist::KeepAlive11);
        let (b, lb) = encode(Persist::KeepAlive10);
        let (c, lc) = encode(Persist::Close);
        Canned {
            full: [a, b, c],
            head_len: [la, lb, lc],
        }
    }

    fn push(&self, p: Persist, head_only: bool, out: &mut Vec<u8>) {
        let full = &self.full[p.index()];
        let len = if head_only {
            self.head_len[p.index()]
        } else {
            full.len()
        };
        out.extend_from_slice(&full[..len]);
    }
}

/// Append a response head with `Content-Length: len`; no formatting machinery, no allocation
/// beyond `out` growing.
fn push_head(out: &mut Vec<u8>, status: &str, len: usize, p: Persist) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\nContent-Type: text/plain\r\nContent-Length: ");
    push_decimal(out, len as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(p.header());
    out.extend_from_slice(b"\r\n");
}

fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Every response the server sends, encoded once at start-up.
#[derive(Debug, Clone)]
pub struct Responses {
    root: Canned,
    not_found: Canned,
    bad_request: Canned,
    bad_bytes: Canned,
    head_too_large: Canned,
    not_implemented: Canned,
}

impl Responses {
    /// Encode the responses; `body` is the body of `GET /`.
    pub fn new(body: &[u8]) -> Responses {
        Responses {
            root: Canned::new("200 OK", body),
            not_found: Canned::new("404 Not Found", b"not found\n"),
            bad_request: Canned::new("400 Bad Request", b"bad request\n"),
            bad_bytes: Canned::new(
                "400 Bad Request",
                b"bad request: /bytes/N takes 0 <= N <= 16777216\n",
            ),
            head_too_large: Canned::new(
                "431 Request Header Fields Too Large",
                b"request head too large\n",
            ),
            not_implemented: Canned::new(
                "501 Not Implemented",
                b"transfer-encoding is not supported; send Content-Length\n",
            ),
        }
    }
}

/// A request that cannot be answered from canned bytes. Parsing stops after it (the rest of a
/// pipelined input stays pending); the architecture runs it — blocking, awaiting, or on a
/// timer — appends its response, and then calls [`InputState::resume`] to go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slow {
    pub route: SlowRoute,
    /// The response may keep the connection open (HTTP/1.1 without `Connection: close`, or 1.0
    /// with keep-alive, and the keep-alive request limit not reached).
    pub keep_alive: bool,
    /// A HEAD request: headers only.
    pub head: bool,
}

/// The slow endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlowRoute {
    /// `/sleep/MS`: answer after MS milliseconds (the handler blocks or awaits).
    Sleep { ms: u64 },
    /// `/db/read/N`: N random reads on the `subscriber` table through the pool.
    DbRead { n: u32 },
    /// `/db/write/N`: N inserts.
    DbWrite { n: u32 },
    /// `/file/PATH` under the docroot (PATH already checked: relative, no `..`).
    File { path: String },
    /// `/status`: JSON counters.
    Status,
}

/// What one call to [`InputState::feed`] or [`InputState::resume`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// A slow request to run now (see [`Slow`]); `None` when every request was answered.
    pub slow: Option<Slow>,
    /// Responses appended to the output (every status, 100 Continue not counted).
    pub responses: u64,
    /// Of those, error responses (400, 431, 501) to requests that were not valid HTTP for us.
    pub bad_requests: u64,
    /// The connection must end once the output is written; later input is to be discarded.
    pub close: bool,
}

/// Per-connection request parsing state: the leftover bytes of an incomplete request and the
/// body bytes still to skip.
///
/// Invariant: while a connection is idle between requests, `pending` is an empty `Vec` that owns
/// no allocation, so an idle connection costs `size_of::<InputState>()` bytes, not a buffer.
#[derive(Debug, Default)]
pub struct InputState {
    /// Input not yet answered: an incomplete request head, or complete requests held back because
    /// the output reached its limit (then `backlog` is set).
    pending: Vec<u8>,
    /// Request body bytes still to be discarded before the next request starts.
    skip: u64,
    /// `pending` may hold complete requests: call [`InputState::resume`] before reading more.
    backlog: bool,
    /// A response that ends the connection was produced; everything after is ignored.
    closed: bool,
}

impl InputState {
    /// True when `pending` may hold complete requests that were not answered because the output
    /// reached its limit; the caller should write the output and then call [`InputState::resume`]
    /// before reading more input (this is the back-pressure that bounds pipelining).
    pub fn has_backlog(&self) -> bool {
        self.backlog
    }

    /// Bytes buffered for this connection (0 while idle).
    pub fn buffered(&self) -> usize {
        self.pending.len()
    }

    /// Answer what `data` (just read from the socket) completes, appending the responses to
    /// `out`. Stops adding responses once `out` holds `out_limit` bytes or more, keeping the
    /// rest (see [`InputState::has_backlog`]).
    ///
    /// When nothing is pending, `data` is parsed in place and only an incomplete tail is copied.
    pub fn feed(
        &mut self,
        data: &[u8],
        responses: &Responses,
        out: &mut Vec<u8>,
        out_limit: usize,
    ) -> Batch {
        if self.closed {
            return Batch {
                close: true,
                ..Batch::default()
            };
        }
        if self.pending.is_empty() {
            let (consumed, batch) = self.answer(data, responses, out, out_limit);
            if !self.closed && consumed < data.len() {
                self.pending.extend_from_slice(&data[consumed..]);
            }
            batch
        } else {
            self.pending.extend_from_slice(data);
            self.resume(responses, out, out_limit)
        }
    }

    /// Answer requests already buffered (after a backlog); see [`InputState::feed`].
    pub fn resume(&mut self, responses: &Responses, out: &mut Vec<u8>, out_limit: usize) -> Batch {
        let pending = std::mem::take(&mut self.pending);
        let (consumed, batch) = self.answer(&pending, responses, out, out_limit);
        if !self.closed && consumed < pending.len() {
            self.pending = pending;
            self.pending.drain(..consumed);
        }
        // else: `pending` is dropped here, so an idle connection holds no buffer.
        batch
    }

    /// Parse and answer complete requests at the start of `input`; returns how many bytes were
    /// consumed (answered requests and skipped body bytes).
    fn answer(
        &mut self,
        input: &[u8],
        responses: &Responses,
        out: &mut Vec<u8>,
        out_limit: usize,
    ) -> (usize, Batch) {
        let mut batch = Batch::default();
        let mut pos = 0;
        self.backlog = false;
        loop {
            if self.skip > 0 {
                let n = self.skip.min((input.len() - pos) as u64);
                self.skip -= n;
                pos += n as usize;
                if self.skip > 0 {
                    break;
                }
            }
            if pos == input.len() {
                break;
            }
            if out.len() >= out_limit {
                self.backlog = true;
                break;
            }
            match answer_one(&input[pos..], responses, out) {
                One::Partial => break,
                One::Done {
                    consumed,
                    body,
                    close,
                    bad,
                } => {
                    batch.responses += 1;
                    batch.bad_requests += u64::from(bad);
                    pos += consumed;
                    if close {
                        self.closed = true;
                        batch.close = true;
                        self.skip = 0;
                        self.backlog = false;
                        return (input.len(), batch);
                    }
                    self.skip = body;
                }
            }
        }
        (pos, batch)
    }
}

enum One {
    /// The head is not complete yet (and not over the limit).
    Partial,
    /// One request was answered.
    Done {
        /// Bytes of the head.
        consumed: usize,
        /// Body bytes that follow the head and are to be skipped.
        body: u64,
        /// The connection ends after this response.
        close: bool,
        /// It was an error response to an invalid request.
        bad: bool,
    },
}

/// Parse the request at the start of `input` and append its response to `out`.
fn answer_one(input: &[u8], responses: &Responses, out: &mut Vec<u8>) -> One {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let fail = |canned: &Canned, out: &mut Vec<u8>| {
        canned.push(Persist::Close, false, out);
        One::Done {
            consumed: input.len(),
            body: 0,
            close: true,
            bad: true,
        }
    };
    let head_len = match req.parse(input) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Complete(_)) | Err(httparse::Error::TooManyHeaders) => {
            return fail(&responses.head_too_large, out)
        }
        Ok(httparse::Status::Partial) if input.len() > MAX_HEAD => {
            return fail(&responses.head_too_large, out)
        }
        Ok(httparse::Status::Partial) => return One::Partial,
        Err(_) => return fail(&responses.bad_request, out),
    };

    let http11 = req.version == Some(1);
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    let mut content_length: Option<u64> = None;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            match parse_decimal(h.value) {
                Some(n) if content_length.is_none() || content_length == Some(n) => {
                    content_length = Some(n)
                }
                _ => return fail(&responses.bad_request, out),
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return fail(&responses.not_implemented, out);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                conn_close |= token.eq_ignore_ascii_case(b"close");
                conn_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    let persist = if conn_close || !(http11 || conn_keep_alive) {
        Persist::Close
    } else if http11 {
        Persist::KeepAlive11
    } else {
        Persist::KeepAlive10
    };
    let body = content_length.unwrap_or(0);
    let head_only = req.method == Some("HEAD");
    let path = req.path.unwrap_or("/");
    let path = path.split_once('?').map_or(path, |(p, _query)| p);

    // The client waits for this before sending the body; the final response may follow at once.
    if expect_continue && http11 && body > 0 && input.len() == head_len {
        out.extend_from_slice(CONTINUE);
    }
    let mut bad = false;
    if path == "/" {
        responses.root.push(persist, head_only, out);
    } else if let Some(n) = path.strip_prefix("/bytes/") {
        match parse_decimal(n.as_bytes()) {
            Some(n) if n <= MAX_BYTES as u64 => {
                push_head(out, "200 OK", n as usize, persist);
                if !head_only {
                    out.resize(out.len() + n as usize, b'x');
                }
            }
            _ => {
                responses.bad_bytes.push(persist, head_only, out);
                bad = true;
            }
        }
    } else {
        responses.not_found.push(persist, head_only, out);
    }
    One::Done {
        consumed: head_len,
        body,
        close: persist == Persist::Close,
        bad,
    }
}

/// A non-empty run of ASCII digits (surrounding blanks allowed) that fits in a u64.
fn parse_decimal(s: &[u8]) -> Option<u64> {
    let s = s.trim_ascii();
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 256 * 1024;

    fn run(chunks: &[&[u8]]) -> (Vec<u8>, Batch) {
        let r = Responses::new(b"hi\n");
        let mut st = InputState::default();
        let mut out = Vec::new();
        let mut total = Batch::default();
        for c in chunks {
            let b = st.feed(c, &r, &mut out, LIMIT);
            total.responses += b.responses;
            total.bad_requests += b.bad_requests;
            total.close |= b.close;
        }
        (out, total)
    }

    fn text(v: &[u8]) -> String {
        String::from_utf8_lossy(v).into_owned()
    }

    #[test]
    fn root_keep_alive_has_no_connection_header() {
        let (out, b) = run(&[b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]);
        assert_eq!(
            text(&out),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nhi\n"
        );
        assert_eq!(b.responses, 1);
        assert!(!b.close);
    }

    #[test]
    fn http10_closes_unless_keep_alive() {
        let (out, b) = run(&[b"GET / HTTP/1.0\r\n\r\n"]);
        assert!(text(&out).contains("Connection: close\r\n"));
        assert!(b.close);
        let (out, b) = run(&[b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"]);
        assert!(text(&out).contains("Connection: keep-alive\r\n"));
        assert!(!b.close);
    }

    #[test]
    fn connection_close_token_in_a_list() {
        let (out, b) =
            run(&[b"GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\nGET / HTTP/1.1\r\n\r\n"]);
        assert!(b.close);
        assert_eq!(b.responses, 1, "nothing after a close is answered");
        assert!(text(&out).contains("Connection: close\r\n"));
    }

    #[test]
    fn bytes_route_and_limits() {
        let (out, _) = run(&[b"GET /bytes/5?x=1 HTTP/1.1\r\n\r\n"]);
        assert!(text(&out).ends_with("Content-Length: 5\r\n\r\nxxxxx"));
        let (out, b) = run(&[b"GET /bytes/16777217 HTTP/1.1\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 400 "));
        assert!(
            !b.close,
            "a well-formed request for too much keeps the connection"
        );
        let (out, _) = run(&[b"GET /bytes/0 HTTP/1.1\r\n\r\n"]);
        assert!(text(&out).ends_with("Content-Length: 0\r\n\r\n"));
        let (out, _) = run(&[b"HEAD /bytes/7 HTTP/1.1\r\n\r\n"]);
        assert!(text(&out).ends_with("Content-Length: 7\r\n\r\n"));
        let (out, _) = run(&[b"GET /nope HTTP/1.1\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 404 Not Found\r\n"));
    }

    #[test]
    fn garbage_is_400_and_close() {
        let (out, b) = run(&[b"\x00\x01 hello\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 400 Bad Request\r\n"));
        assert!(b.close);
        assert_eq!(b.bad_requests, 1);
    }

    #[test]
    fn oversized_head_is_431() {
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 10, b'a');
        let (out, b) = run(&[&big[..1000], &big[1000..]]);
        assert!(text(&out).starts_with("HTTP/1.1 431 "));
        assert!(b.close);
        // A head still under the limit just waits for more.
        let (out, b) = run(&[&big[..MAX_HEAD]]);
        assert!(out.is_empty());
        assert_eq!(b, Batch::default());
    }

    #[test]
    fn content_length_body_is_skipped_across_reads() {
        let req =
            b"POST /nope HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789GET / HTTP/1.1\r\n\r\n";
        let (whole, b) = run(&[req]);
        assert_eq!(b.responses, 2);
        for split in 0..=req.len() {
            let (out, b2) = run(&[&req[..split], &req[split..]]);
            assert_eq!(out, whole, "split at {split}");
            assert_eq!(b2, b);
        }
    }

    #[test]
    fn bad_content_length_and_chunked() {
        let (out, b) = run(&[b"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 400 "));
        assert!(b.close);
        let (_, b) = run(&[b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"]);
        assert!(b.close);
        let (out, b) = run(&[b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 501 "));
        assert!(b.close);
    }

    #[test]
    fn expect_continue_gets_100_first() {
        let (out, _) =
            run(&[b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn backlog_stops_at_the_output_limit_and_resumes() {
        let r = Responses::new(b"hi\n");
        let one = b"GET / HTTP/1.1\r\n\r\n";
        let input: Vec<u8> = one.iter().copied().cycle().take(one.len() * 10).collect();
        let mut st = InputState::default();
        let mut out = Vec::new();
        // A limit of one byte: one response per call.
        let b = st.feed(&input, &r, &mut out, 1);
        assert_eq!(b.responses, 1);
        assert!(st.has_backlog());
        let mut n = 1;
        while st.has_backlog() {
            out.clear();
            n += st.resume(&r, &mut out, 1).responses;
        }
        assert_eq!(n, 10);
        assert_eq!(st.buffered(), 0);
        assert_eq!(st.pending.capacity(), 0, "idle state owns no buffer");
    }

    #[test]
    fn pipelined_split_anywhere_gives_the_same_output() {
        let mut req = Vec::new();
        for i in 0..5 {
            req.extend_from_slice(format!("GET /bytes/{i} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
        }
        req.extend_from_slice(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
        let (whole, b) = run(&[&req]);
        assert_eq!(b.responses, 6);
        for i in 0..=req.len() {
            for j in i..=req.len() {
                let (out, _) = run(&[&req[..i], &req[i..j], &req[j..]]);
                assert_eq!(out, whole, "split at {i},{j}");
            }
        }
    }

    /// Random and mutated input never panics and never answers past a close.
    #[test]
    fn random_input_never_panics() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let base: &[u8] =
            b"GET /bytes/12 HTTP/1.1\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc";
        let r = Responses::new(b"x");
        for _ in 0..20_000 {
            let mut input = base.repeat(1 + (next() % 3) as usize);
            for _ in 0..(next() % 6) {
                let i = (next() as usize) % input.len();
                input[i] = next() as u8;
            }
            let mut st = InputState::default();
            let mut out = Vec::new();
            let mut pos = 0;
            while pos < input.len() {
                let n = 1 + (next() as usize) % 40;
                let end = (pos + n).min(input.len());
                let b = st.feed(&input[pos..end], &r, &mut out, 1 + (next() as usize) % 512);
                while st.has_backlog() {
                    st.resume(&r, &mut out, usize::MAX);
                }
                pos = end;
                if b.close {
                    assert_eq!(
                        st.feed(b"GET / HTTP/1.1\r\n\r\n", &r, &mut out, LIMIT)
                            .responses,
                        0
                    );
                    break;
                }
            }
        }
    }
}
