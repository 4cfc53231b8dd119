//! HTTP/1.1 request handling without I/O, shared by every server architecture.
//!
//! A connection's input is fed to an [`InputState`] in whatever pieces the socket delivered; it
//! answers every complete request in order by appending pre-encoded responses to an output buffer
//! that the caller writes in one go. Nothing here reads a socket, so the same code serves the
//! reactor, the thread-per-connection server and the fuzz targets, and the tests can split input
//! at every byte.
//!
//! Routes come in two kinds.
//!
//! - **Canned** (answered here, from bytes encoded at start-up, without allocating): `GET /`
//!   returns the configured body; `GET /bytes/N` returns `N` bytes (`N` at most [`MAX_BYTES`],
//!   400 above; the body is produced in pieces of at most the caller's output limit as the
//!   output drains, never whole: see [`InputState::has_backlog`]); `GET /status/CODE` answers with status CODE (200 to 599, 400 otherwise), for
//!   tests that need a chosen status; `GET /cookie/N` answers 200 with `Set-Cookie: sid=N;
//!   Path=/` (N a decimal of at most 19 digits), the cheapest login there is; an unknown path
//!   is 404.
//! - **Slow** ([`Slow`]): `/sleep/MS` (MS at most [`MAX_SLEEP_MS`]), `/cpu/US` (US in
//!   1..=[`MAX_CPU_US`] microseconds of CPU work), `/db/read/N` and `/db/write/N` (N in
//!   1..=[`MAX_DB_OPS`]), `/file/PATH` (PATH relative, without `..` or NUL), `/status` and
//!   `/metrics`. Their answer takes time, CPU or I/O, so the parser stops right after such a request
//!   and hands it to the architecture ([`Batch::slow`]), which runs it (see
//!   [`crate::handlers`]), appends the response and calls [`InputState::resume`]; what the client
//!   pipelined behind it stays pending meanwhile, so responses always go out in request order.
//!   Malformed arguments (`/sleep/x`, `/cpu/0`, `/db/read/0`, `/file/../etc/passwd`) get a
//!   canned 400.
//!
//! The method is not checked except that `HEAD` gets no body. Request bodies with
//! `Content-Length` are skipped, not stored.
//!
//! A connection may be limited to a number of requests ([`Responses::keepalive_requests`]): the
//! last one is answered with `Connection: close` and ends it, whatever its kind.
//!
//! Subtleness ahead: a malformed request (400), a head over [`MAX_HEAD`] (431) or a chunked
//! request body (501) ends the connection after the error response, because the server can no
//! longer tell where the next request starts. `Connection: close`, and HTTP/1.0 without
//! `Connection: keep-alive`, end it after their response.

/// Largest request head (request line + headers) accepted; above it the answer is 431.
pub const MAX_HEAD: usize = 16 * 1024;
/// Largest `N` of `/bytes/N` (16 MiB); above it the answer is 400.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// Largest `MS` of `/sleep/MS` (one minute); above it the answer is 400.
pub const MAX_SLEEP_MS: u64 = 60_000;
/// Largest `US` of `/cpu/US` (one second of CPU); 0 or above it the answer is 400.
pub const MAX_CPU_US: u64 = 1_000_000;
/// Largest `N` of `/db/read/N` and `/db/write/N`; 0 or above it the answer is 400.
pub const MAX_DB_OPS: u32 = 10_000;
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

/// Append a `text/plain` response head with `Content-Length: len`; no formatting machinery, no
/// allocation beyond `out` growing.
fn push_head(out: &mut Vec<u8>, status: &str, len: usize, p: Persist) {
    push_head_typed(out, status, "text/plain", len as u64, p);
}

fn push_head_typed(out: &mut Vec<u8>, status: &str, content_type: &str, len: u64, p: Persist) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    push_decimal(out, len);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(p.header());
    out.extend_from_slice(b"\r\n");
}

/// Append the head of a slow request's response: status line (`status` like `"200 OK"`),
/// `Content-Type`, `Content-Length: len` and the `Connection` header that [`Slow::keep_alive`]
/// and [`Slow::http10`] call for. The body (unless [`Slow::head`]) is the caller's to append.
/// See [`crate::handlers::respond`] for a whole response.
pub fn push_slow_head(out: &mut Vec<u8>, slow: &Slow, status: &str, content_type: &str, len: u64) {
    push_head_typed(out, status, content_type, len, slow.persist());
}

/// The response of `/status/CODE`: status `code` (200..=599) with the body `status CODE\n`,
/// except 204 and 304, which have none (and 204 no `Content-Length`, RFC 9110 §8.6). Written
/// straight into `out`: no formatting machinery, no allocation beyond `out` growing.
fn push_code(out: &mut Vec<u8>, code: u16, p: Persist, head_only: bool) {
    let reason: &[u8] = match code {
        200 => b"OK",
        201 => b"Created",
        204 => b"No Content",
        301 => b"Moved Permanently",
        302 => b"Found",
        304 => b"Not Modified",
        400 => b"Bad Request",
        401 => b"Unauthorized",
        403 => b"Forbidden",
        404 => b"Not Found",
        429 => b"Too Many Requests",
        500 => b"Internal Server Error",
        502 => b"Bad Gateway",
        503 => b"Service Unavailable",
        504 => b"Gateway Timeout",
        _ => b"Status",
    };
    let body = !matches!(code, 204 | 304);
    out.extend_from_slice(b"HTTP/1.1 ");
    push_decimal(out, u64::from(code));
    out.push(b' ');
    out.extend_from_slice(reason);
    out.extend_from_slice(b"\r\nContent-Type: text/plain\r\n");
    if code != 204 {
        out.extend_from_slice(if body {
            b"Content-Length: 11\r\n" as &[u8]
        } else {
            b"Content-Length: 0\r\n"
        });
    }
    out.extend_from_slice(p.header());
    out.extend_from_slice(b"\r\n");
    if body && !head_only {
        out.extend_from_slice(b"status ");
        push_decimal(out, u64::from(code));
        out.push(b'\n');
    }
}

/// The response of `/cookie/N`: 200, `Set-Cookie: sid=N; Path=/`, body `cookie\n`.
fn push_cookie(out: &mut Vec<u8>, n: u64, p: Persist, head_only: bool) {
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nSet-Cookie: sid=",
    );
    push_decimal(out, n);
    out.extend_from_slice(b"; Path=/\r\n");
    out.extend_from_slice(p.header());
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(b"cookie\n");
    }
}

fn push_decimal(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(headroom_proto::digits(n, &mut [0u8; 20]));
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
    bad_sleep: Canned,
    bad_cpu: Canned,
    bad_db: Canned,
    bad_file: Canned,
    bad_code: Canned,
    /// Requests served per connection at most (the last one says `Connection: close`).
    keepalive_requests: Option<u64>,
}

impl Responses {
    /// Encode the responses; `body` is the body of `GET /`. No keep-alive request limit.
    pub fn new(body: &[u8]) -> Responses {
        Responses {
            keepalive_requests: None,
            bad_sleep: Canned::new(
                "400 Bad Request",
                b"bad request: /sleep/MS takes 0 <= MS <= 60000\n",
            ),
            bad_cpu: Canned::new(
                "400 Bad Request",
                b"bad request: /cpu/US takes 1 <= US <= 1000000\n",
            ),
            bad_db: Canned::new(
                "400 Bad Request",
                b"bad request: /db/read/N and /db/write/N take 1 <= N <= 10000\n",
            ),
            bad_file: Canned::new(
                "400 Bad Request",
                b"bad request: /file/PATH takes a relative path without '..'\n",
            ),
            bad_code: Canned::new(
                "400 Bad Request",
                b"bad request: /status/CODE takes 200 <= CODE <= 599\n",
            ),
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

    /// Limit every connection to `limit` requests: the `limit`-th response carries
    /// `Connection: close` and ends the connection (`Some(0)` behaves like `Some(1)`). `None`
    /// (the default) serves requests for as long as the client keeps the connection.
    pub fn keepalive_requests(mut self, limit: Option<u64>) -> Responses {
        self.keepalive_requests = limit;
        self
    }

    /// The keep-alive request limit (see [`Responses::keepalive_requests`]).
    pub fn keepalive_limit(&self) -> Option<u64> {
        self.keepalive_requests
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
    /// An HTTP/1.0 request: a kept-alive response must say `Connection: keep-alive`.
    pub http10: bool,
}

impl Slow {
    fn persist(&self) -> Persist {
        match (self.keep_alive, self.http10) {
            (false, _) => Persist::Close,
            (true, false) => Persist::KeepAlive11,
            (true, true) => Persist::KeepAlive10,
        }
    }
}

/// The slow endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlowRoute {
    /// `/sleep/MS`: answer after MS milliseconds (the handler blocks or awaits).
    Sleep { ms: u64 },
    /// `/cpu/US`: answer after US microseconds of CPU work on the thread that serves the
    /// request (pure computation in user space; see [`crate::handlers::burn_cpu`]).
    Cpu { us: u64 },
    /// `/db/read/N`: N random reads on the `subscriber` table through the pool.
    DbRead { n: u32 },
    /// `/db/write/N`: N inserts.
    DbWrite { n: u32 },
    /// `/file/PATH` under the docroot (PATH already checked: relative, not empty, no `..`
    /// component, no NUL; the query string removed; not percent-decoded).
    File { path: String },
    /// `/status`: JSON counters.
    Status,
    /// `/metrics`: the same counters in the Prometheus text format.
    Metrics,
}

/// What one call to [`InputState::feed`] or [`InputState::resume`] did.
///
/// Subtleness ahead, for callers: when `slow` is `Some`, the output holds the responses to the
/// requests *before* the slow one, and the connection's answer is not complete. The caller runs
/// the slow request, appends its response after them (writing the earlier ones first is fine),
/// counts it (it is not in `responses`), and then:
/// - if `close` is false, calls [`InputState::resume`] (not `feed`) to answer what was pipelined
///   behind it, before reading more;
/// - if `close` is true, ends the connection after writing that response (the slow request
///   itself was the last one: `Connection: close`, HTTP/1.0, or the keep-alive limit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// A slow request to run now (see [`Slow`]); `None` when every request was answered.
    pub slow: Option<Slow>,
    /// Responses appended to the output (every status, 100 Continue not counted, the slow
    /// request's not included).
    pub responses: u64,
    /// Of those, error responses (400, 431, 501) to requests that were not valid HTTP for us.
    pub bad_requests: u64,
    /// The connection must end once the output (and the slow response, if any) is written;
    /// later input is to be discarded.
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
    /// A slow request was handed out and not answered yet: input is only buffered until
    /// [`InputState::resume`].
    waiting: bool,
    /// The next response ends the connection (the server is draining).
    last: bool,
    /// Requests parsed so far on this connection (canned, slow and errors), for the keep-alive
    /// request limit.
    served: u64,
    /// Bytes of a `/bytes/N` body not yet appended to the output: the body is produced a piece
    /// at a time (at most the output limit per call), so a client that does not read holds the
    /// server to one piece, not `N` bytes. While non-zero, `backlog` is set.
    body_left: u64,
    /// The response whose body is being produced ends the connection: once `body_left` is 0
    /// the batch says `close` (and the input after that request is discarded).
    close_after_body: bool,
}

impl InputState {
    /// True while a slow request handed out in [`Batch::slow`] has not been answered: the caller
    /// must not expect answers from `feed` (it only buffers) until it calls
    /// [`InputState::resume`]. Readers should stop reading meanwhile (back-pressure).
    pub fn awaiting_slow(&self) -> bool {
        self.waiting
    }

    /// True between requests: nothing buffered, no body to skip, no slow request in flight, no
    /// backlog. An idle connection can be closed without cutting a request short (drain, idle
    /// timeout).
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.skip == 0
            && !self.waiting
            && !self.backlog
            && self.body_left == 0
    }

    /// True while the head of a request has started to arrive but is not complete (the span the
    /// header timeout limits).
    pub fn in_head(&self) -> bool {
        !self.pending.is_empty() && !self.backlog && !self.waiting && !self.closed
    }

    /// Requests parsed so far on this connection.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Make the next response the last one (`Connection: close`); used when the server drains.
    pub fn close_after_next(&mut self) {
        self.last = true;
    }

    /// True when `pending` may hold complete requests that were not answered because the output
    /// reached its limit, or a `/bytes/N` body is not all produced yet; the caller should write
    /// the output and then call [`InputState::resume`] before reading more input (this is the
    /// back-pressure that bounds pipelining and the output queued per connection).
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
        if self.waiting {
            // The answer to the slow request must come first: buffer only.
            self.pending.extend_from_slice(data);
            return Batch::default();
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

    /// Answer requests already buffered: after a backlog, and after the response to a slow
    /// request was appended; see [`InputState::feed`] and [`Batch`].
    pub fn resume(&mut self, responses: &Responses, out: &mut Vec<u8>, out_limit: usize) -> Batch {
        self.waiting = false;
        if self.closed {
            return Batch {
                close: true,
                ..Batch::default()
            };
        }
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
            if self.body_left > 0 {
                // The rest of a `/bytes/N` body, as much as the output limit allows (at least
                // one byte into an empty output, so that any limit makes progress).
                let room = out_limit.saturating_sub(out.len());
                let mut n = (self.body_left).min(room as u64) as usize;
                if n == 0 && out.is_empty() {
                    n = 1;
                }
                out.resize(out.len() + n, b'x');
                self.body_left -= n as u64;
                if self.body_left > 0 {
                    self.backlog = true;
                    let consumed = if self.close_after_body {
                        input.len()
                    } else {
                        pos
                    };
                    return (consumed, batch);
                }
                if self.close_after_body {
                    self.close_after_body = false;
                    self.closed = true;
                    batch.close = true;
                    return (input.len(), batch);
                }
            }
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
            let force_close = self.last
                || responses
                    .keepalive_requests
                    .is_some_and(|limit| self.served + 1 >= limit);
            match answer_one(&input[pos..], responses, out, force_close) {
                One::Partial => break,
                One::Slow {
                    consumed,
                    body,
                    slow,
                } => {
                    self.served += 1;
                    pos += consumed;
                    let keep_alive = slow.keep_alive;
                    batch.slow = Some(slow);
                    if !keep_alive {
                        self.closed = true;
                        batch.close = true;
                        self.skip = 0;
                        return (input.len(), batch);
                    }
                    self.skip = body;
                    self.waiting = true;
                    break;
                }
                One::Done {
                    consumed,
                    body,
                    close,
                    bad,
                    stream,
                } => {
                    self.served += 1;
                    batch.responses += 1;
                    batch.bad_requests += u64::from(bad);
                    pos += consumed;
                    if stream > 0 {
                        // The body follows at the top of the loop, piece by piece.
                        self.body_left = stream;
                        if close {
                            self.close_after_body = true;
                            self.skip = 0;
                            pos = input.len();
                            continue;
                        }
                    }
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
    /// A slow request: nothing was appended; the caller runs it.
    Slow {
        /// Bytes of the head.
        consumed: usize,
        /// Body bytes that follow the head and are to be skipped.
        body: u64,
        slow: Slow,
    },
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
        /// Body bytes of `/bytes/N` still to produce after the head that was appended.
        stream: u64,
    },
}

/// Where a path goes.
enum Route<'a> {
    Root,
    Bytes(usize),
    /// `/status/CODE`: an answer with this status.
    Code(u16),
    /// `/cookie/N`: a 200 that sets the cookie `sid=N`.
    Cookie(u64),
    Slow(SlowRoute),
    /// A known route with a bad argument: this canned 400.
    Bad(&'a Canned),
    NotFound,
}

/// Classify a path (query string already removed). Allocates only for `/file/PATH`.
fn route<'r>(path: &str, responses: &'r Responses) -> Route<'r> {
    if path == "/" {
        return Route::Root;
    }
    if let Some(n) = path.strip_prefix("/bytes/") {
        return match parse_decimal(n.as_bytes()) {
            Some(n) if n <= MAX_BYTES as u64 => Route::Bytes(n as usize),
            _ => Route::Bad(&responses.bad_bytes),
        };
    }
    if let Some(ms) = path.strip_prefix("/sleep/") {
        return match parse_decimal(ms.as_bytes()) {
            Some(ms) if ms <= MAX_SLEEP_MS => Route::Slow(SlowRoute::Sleep { ms }),
            _ => Route::Bad(&responses.bad_sleep),
        };
    }
    if let Some(us) = path.strip_prefix("/cpu/") {
        return match parse_decimal(us.as_bytes()) {
            Some(us) if (1..=MAX_CPU_US).contains(&us) => Route::Slow(SlowRoute::Cpu { us }),
            _ => Route::Bad(&responses.bad_cpu),
        };
    }
    if let Some(rest) = path.strip_prefix("/db/") {
        let (write, n) = if let Some(n) = rest.strip_prefix("read/") {
            (false, n)
        } else if let Some(n) = rest.strip_prefix("write/") {
            (true, n)
        } else {
            return Route::NotFound;
        };
        return match parse_decimal(n.as_bytes()) {
            Some(n) if (1..=u64::from(MAX_DB_OPS)).contains(&n) => {
                let n = n as u32;
                Route::Slow(if write {
                    SlowRoute::DbWrite { n }
                } else {
                    SlowRoute::DbRead { n }
                })
            }
            _ => Route::Bad(&responses.bad_db),
        };
    }
    if let Some(p) = path.strip_prefix("/file/") {
        let ok = !p.is_empty()
            && !p.starts_with('/')
            && !p.contains('\0')
            && !p.split('/').any(|c| c == "..");
        return if ok {
            Route::Slow(SlowRoute::File { path: p.to_owned() })
        } else {
            Route::Bad(&responses.bad_file)
        };
    }
    if let Some(code) = path.strip_prefix("/status/") {
        return match parse_decimal(code.as_bytes()) {
            Some(c) if (200..=599).contains(&c) => Route::Code(c as u16),
            _ => Route::Bad(&responses.bad_code),
        };
    }
    if let Some(n) = path.strip_prefix("/cookie/") {
        return match parse_decimal(n.as_bytes()) {
            Some(n) => Route::Cookie(n),
            None => Route::NotFound,
        };
    }
    if path == "/status" {
        return Route::Slow(SlowRoute::Status);
    }
    if path == "/metrics" {
        return Route::Slow(SlowRoute::Metrics);
    }
    Route::NotFound
}

/// Parse the request at the start of `input` and append its response to `out` (or hand it out
/// as [`One::Slow`]). `force_close`: this response ends the connection whatever the request says
/// (keep-alive limit reached, or draining).
fn answer_one(input: &[u8], responses: &Responses, out: &mut Vec<u8>, force_close: bool) -> One {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let fail = |canned: &Canned, out: &mut Vec<u8>| {
        canned.push(Persist::Close, false, out);
        One::Done {
            consumed: input.len(),
            body: 0,
            close: true,
            bad: true,
            stream: 0,
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
    let persist = if force_close || conn_close || !(http11 || conn_keep_alive) {
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
    let mut stream = 0;
    match route(path, responses) {
        Route::Root => responses.root.push(persist, head_only, out),
        Route::Bytes(n) => {
            push_head(out, "200 OK", n, persist);
            if !head_only {
                stream = n as u64; // produced by the caller, `InputState::answer`
            }
        }
        Route::Code(code) => push_code(out, code, persist, head_only),
        Route::Cookie(n) => push_cookie(out, n, persist, head_only),
        Route::Slow(route) => {
            return One::Slow {
                consumed: head_len,
                body,
                slow: Slow {
                    route,
                    keep_alive: persist != Persist::Close,
                    head: head_only,
                    http10: !http11,
                },
            }
        }
        Route::Bad(canned) => {
            canned.push(persist, head_only, out);
            bad = true;
        }
        Route::NotFound => responses.not_found.push(persist, head_only, out),
    }
    One::Done {
        consumed: head_len,
        body,
        close: persist == Persist::Close,
        bad,
        stream,
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

    /// Issue 18 finding 6: a `/bytes/N` body is produced a piece at a time, at most the output
    /// limit per call, and the pieces add up to the whole response; a request pipelined behind
    /// it is answered after the last piece.
    #[test]
    fn bytes_body_is_produced_in_pieces_of_the_output_limit() {
        let r = Responses::new(b"hi\n");
        let req = b"GET /bytes/1000 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n";
        for limit in [1, 7, 100, 999, 1000, 5000] {
            let mut st = InputState::default();
            let mut out = Vec::new();
            let mut all = Vec::new();
            let mut b = st.feed(req, &r, &mut out, limit);
            let mut responses = b.responses;
            let mut most = 0;
            loop {
                // The head is appended whole; besides it, no call adds more than the limit
                // (and the response pipelined behind the body).
                let body_part = if all.is_empty() {
                    out.len() - head.len()
                } else {
                    out.len()
                };
                most = most.max(body_part);
                all.append(&mut out);
                assert!(!b.close);
                if !st.has_backlog() {
                    break;
                }
                assert!(!st.is_idle(), "a body is being produced");
                b = st.resume(&r, &mut out, limit);
                responses += b.responses;
            }
            // One canned response may follow the last piece in the same call.
            let slack = r_root(&r).len();
            assert!(
                most <= limit.max(1) + slack,
                "limit {limit}: a call added {most}"
            );
            let want = format!("{head}{}{}", "x".repeat(1000), text(&r_root(&r)));
            assert_eq!(text(&all), want, "limit {limit}");
            assert_eq!(responses, 2, "limit {limit}");
            assert!(st.is_idle());
        }
    }

    fn r_root(r: &Responses) -> Vec<u8> {
        let mut v = Vec::new();
        r.root.push(Persist::KeepAlive11, false, &mut v);
        v
    }

    /// A `/bytes/N` that ends the connection says `close` only with its last piece, and what
    /// was pipelined behind it is discarded, not answered and not buffered.
    #[test]
    fn bytes_body_that_closes_closes_after_its_last_piece() {
        let r = Responses::new(b"hi\n");
        let mut st = InputState::default();
        let mut out = Vec::new();
        let req = b"GET /bytes/10 HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        let mut all = Vec::new();
        let mut b = st.feed(req, &r, &mut out, 4);
        let mut calls = 1;
        while !b.close {
            assert!(st.has_backlog(), "call {calls}");
            assert_eq!(st.buffered(), 0, "the pipelined request is dropped");
            all.append(&mut out);
            b = st.resume(&r, &mut out, 4);
            calls += 1;
        }
        all.append(&mut out);
        assert!(
            text(&all).ends_with("Connection: close\r\n\r\nxxxxxxxxxx"),
            "{}",
            text(&all)
        );
        // The head fills the first call's output; then 4 + 4 + 2 bytes.
        assert_eq!(calls, 4);
        assert!(st.feed(b"GET / HTTP/1.1\r\n\r\n", &r, &mut out, 4).close);
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

    /// Feeds `chunks` like an architecture does: slow requests are "run" by appending a marker
    /// response `<SLOW route>\n`, then parsing resumes. Returns the output and the slow
    /// requests in the order they were handed out.
    fn drive(r: &Responses, chunks: &[&[u8]], out_limit: usize) -> (Vec<u8>, Vec<Slow>, bool) {
        let mut st = InputState::default();
        let mut all = Vec::new();
        let mut out = Vec::new();
        let mut slows = Vec::new();
        let mut closed = false;
        for c in chunks {
            let mut b = st.feed(c, r, &mut out, out_limit);
            loop {
                // "Written": the output limit applies to each call's output.
                all.append(&mut out);
                closed |= b.close;
                if let Some(slow) = b.slow.take() {
                    all.extend_from_slice(format!("<SLOW {:?}>\n", slow.route).as_bytes());
                    slows.push(slow);
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
        }
        (all, slows, closed)
    }

    fn slow_of(req: &[u8]) -> Option<Slow> {
        let r = Responses::new(b"hi\n");
        let mut st = InputState::default();
        let mut out = Vec::new();
        let b = st.feed(req, &r, &mut out, LIMIT);
        b.slow
    }

    #[test]
    fn cookie_route_sets_the_cookie_asked_for() {
        let (out, b) = run(&[b"GET /cookie/42 HTTP/1.1\r\n\r\nHEAD /cookie/7 HTTP/1.1\r\n\r\n"]);
        assert_eq!(
            text(&out),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\
             Set-Cookie: sid=42; Path=/\r\n\r\ncookie\n\
             HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\
             Set-Cookie: sid=7; Path=/\r\n\r\n"
        );
        assert_eq!((b.responses, b.bad_requests), (2, 0));
        let (out, _) = run(&[b"GET /cookie/x HTTP/1.1\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn status_route_answers_the_code_asked_for() {
        let (out, b) =
            run(&[b"GET /status/404 HTTP/1.1\r\n\r\nGET /status/429?x=1 HTTP/1.1\r\n\r\n"]);
        assert_eq!(
            text(&out),
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\n\
             status 404\n\
             HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\n\
             status 429\n"
        );
        assert_eq!((b.responses, b.bad_requests, b.close), (2, 0, false));
        let (out, _) = run(&[b"GET /status/599 HTTP/1.0\r\n\r\n"]);
        assert!(text(&out).starts_with("HTTP/1.1 599 Status\r\n"));
        assert!(text(&out).contains("Connection: close\r\n"));
        let (out, _) = run(&[b"GET /status/204 HTTP/1.1\r\n\r\n"]);
        assert_eq!(
            text(&out),
            "HTTP/1.1 204 No Content\r\nContent-Type: text/plain\r\n\r\n"
        );
        let (out, _) = run(&[b"HEAD /status/503 HTTP/1.1\r\n\r\n"]);
        assert!(text(&out).ends_with("Content-Length: 11\r\n\r\n"));
        for bad in ["/status/199", "/status/600", "/status/x", "/status/"] {
            let (out, b) = run(&[format!("GET {bad} HTTP/1.1\r\n\r\n").as_bytes()]);
            assert!(text(&out).starts_with("HTTP/1.1 400 "), "{bad}");
            assert_eq!((b.bad_requests, b.close), (1, false), "{bad}");
        }
    }

    #[test]
    fn slow_routes_are_classified() {
        let route = |path: &str| {
            slow_of(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes()).map(|s| s.route)
        };
        assert_eq!(route("/sleep/50"), Some(SlowRoute::Sleep { ms: 50 }));
        assert_eq!(route("/sleep/0"), Some(SlowRoute::Sleep { ms: 0 }));
        assert_eq!(
            route("/sleep/60000?x"),
            Some(SlowRoute::Sleep { ms: 60_000 })
        );
        assert_eq!(route("/cpu/1"), Some(SlowRoute::Cpu { us: 1 }));
        assert_eq!(route("/cpu/1000"), Some(SlowRoute::Cpu { us: 1000 }));
        assert_eq!(
            route("/cpu/1000000?x"),
            Some(SlowRoute::Cpu { us: 1_000_000 })
        );
        assert_eq!(route("/db/read/1"), Some(SlowRoute::DbRead { n: 1 }));
        assert_eq!(
            route("/db/write/10000"),
            Some(SlowRoute::DbWrite { n: 10_000 })
        );
        assert_eq!(
            route("/file/a/b.txt?v=2"),
            Some(SlowRoute::File {
                path: "a/b.txt".into()
            })
        );
        assert_eq!(route("/status"), Some(SlowRoute::Status));
        assert_eq!(route("/metrics"), Some(SlowRoute::Metrics));
        for canned in [
            "/",
            "/bytes/3",
            "/nope",
            "/db/delete/1",
            "/cpu",
            "/cpux/1",
            "/status/x",
            "/statusx",
        ] {
            assert_eq!(route(canned), None, "{canned}");
        }
    }

    #[test]
    fn bad_slow_arguments_are_400_and_keep_the_connection() {
        for path in [
            "/sleep/60001",
            "/sleep/x",
            "/sleep/",
            "/cpu/0",
            "/cpu/1000001",
            "/cpu/99999999999999999999",
            "/cpu/x",
            "/cpu/-1",
            "/cpu/1.5",
            "/cpu/",
            "/cpu/?x",
            "/db/read/0",
            "/db/write/10001",
            "/db/read/",
            "/file/",
            "/file//etc/passwd",
            "/file/../secret",
            "/file/a/../../b",
            "/file/a/..",
        ] {
            let req = format!("GET {path} HTTP/1.1\r\n\r\nGET /bytes/1 HTTP/1.1\r\n\r\n");
            let (out, b) = run(&[req.as_bytes()]);
            let out = text(&out);
            assert!(
                out.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{path}: {out}"
            );
            assert!(out.ends_with("\r\n\r\nx"), "{path}: then served on");
            assert_eq!(
                (b.responses, b.bad_requests, b.close),
                (2, 1, false),
                "{path}"
            );
        }
        let (out, _) = run(&[b"GET /cpu/0 HTTP/1.1\r\n\r\n"]);
        assert!(
            text(&out).ends_with("\r\n\r\nbad request: /cpu/US takes 1 <= US <= 1000000\n"),
            "{}",
            text(&out)
        );
        // Dots inside names are fine.
        assert!(slow_of(b"GET /file/a..b/.c HTTP/1.1\r\n\r\n").is_some());
    }

    #[test]
    fn slow_request_flags() {
        let s = slow_of(b"HEAD /sleep/1 HTTP/1.1\r\n\r\n").unwrap();
        assert!(s.head && s.keep_alive && !s.http10);
        let s = slow_of(b"GET /sleep/1 HTTP/1.0\r\n\r\n").unwrap();
        assert!(!s.keep_alive && s.http10);
        let s = slow_of(b"GET /sleep/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert!(s.keep_alive && s.http10);
        let mut out = Vec::new();
        push_slow_head(&mut out, &s, "200 OK", "application/json", 2);
        assert_eq!(
            text(&out),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
             Connection: keep-alive\r\n\r\n"
        );
        let s = slow_of(b"GET /status HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        assert!(!s.keep_alive);
    }

    #[test]
    fn parsing_stops_at_a_slow_request_and_buffers_until_resume() {
        let r = Responses::new(b"hi\n");
        let mut st = InputState::default();
        let mut out = Vec::new();
        let b = st.feed(
            b"GET /bytes/1 HTTP/1.1\r\n\r\nGET /sleep/5 HTTP/1.1\r\n\r\nGET /bytes/2 HTTP/1.1\r\n",
            &r,
            &mut out,
            LIMIT,
        );
        assert_eq!(b.responses, 1, "only the request before the slow one");
        assert_eq!(b.slow.unwrap().route, SlowRoute::Sleep { ms: 5 });
        assert!(!b.close);
        assert!(st.awaiting_slow());
        assert!(!st.is_idle() && !st.in_head() && !st.has_backlog());
        assert!(text(&out).ends_with("\r\n\r\nx"));
        // More input while the slow request runs is only buffered.
        let b = st.feed(b"\r\nGET /bytes/3 HTTP/1.1\r\n\r\n", &r, &mut out, LIMIT);
        assert_eq!(b, Batch::default());
        out.clear();
        let b = st.resume(&r, &mut out, LIMIT);
        assert_eq!((b.responses, b.slow, b.close), (2, None, false));
        assert!(text(&out).ends_with("\r\n\r\nxxx"));
        assert!(st.is_idle());
        assert_eq!(st.served(), 4);
        assert_eq!(st.pending.capacity(), 0, "idle state owns no buffer");
    }

    #[test]
    fn slow_requests_in_a_pipeline_are_answered_in_order_split_anywhere() {
        let r = Responses::new(b"hi\n");
        let req: &[u8] = b"GET /bytes/1 HTTP/1.1\r\n\r\n\
            GET /sleep/5 HTTP/1.1\r\n\r\n\
            POST /bytes/2 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc\
            POST /status HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz\
            GET /file/a.txt HTTP/1.1\r\n\r\n\
            GET /bytes/3 HTTP/1.1\r\nConnection: close\r\n\r\n";
        let (whole, slows, closed) = drive(&r, &[req], LIMIT);
        assert!(closed);
        let whole_text = text(&whole);
        let order: Vec<usize> = [
            "\r\n\r\nx",
            "<SLOW Sleep",
            "\r\n\r\nxx",
            "<SLOW Status",
            "<SLOW File",
            "\r\n\r\nxxx",
        ]
        .iter()
        .map(|m| {
            whole_text
                .find(m)
                .unwrap_or_else(|| panic!("{m} missing in {whole_text}"))
        })
        .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "out of order: {whole_text}"
        );
        assert_eq!(slows.len(), 3);
        for i in 0..=req.len() {
            for j in (i..=req.len()).step_by(7) {
                let (out, s, c) = drive(&r, &[&req[..i], &req[i..j], &req[j..]], LIMIT);
                assert_eq!(out, whole, "split at {i},{j}");
                assert_eq!((s, c), (slows.clone(), closed));
            }
            // A tiny output limit adds backlog rounds on top.
            let (out, _, _) = drive(&r, &[&req[..i], &req[i..]], 1);
            assert_eq!(out, whole, "limit 1, split at {i}");
        }
    }

    #[test]
    fn keepalive_request_limit_closes_on_the_last() {
        let r = Responses::new(b"hi\n").keepalive_requests(Some(3));
        let one: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
        let mut st = InputState::default();
        let mut out = Vec::new();
        for i in 1..=2 {
            out.clear();
            let b = st.feed(one, &r, &mut out, LIMIT);
            assert!(!b.close, "request {i}");
            assert!(!text(&out).contains("Connection:"));
        }
        out.clear();
        let b = st.feed(one, &r, &mut out, LIMIT);
        assert!(b.close);
        assert!(text(&out).contains("Connection: close\r\n"));
        // Pipelined: the third is the last; the fourth is never answered.
        let (out, b) = {
            let mut st = InputState::default();
            let mut out = Vec::new();
            let b = st.feed(&one.repeat(4), &r, &mut out, LIMIT);
            (out, b)
        };
        assert_eq!((b.responses, b.close), (3, true));
        assert_eq!(text(&out).matches("Connection: close").count(), 1);
        // A slow request as the last one: not kept alive, and the batch closes.
        let mut st = InputState::default();
        let mut out = Vec::new();
        let b = st.feed(
            b"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\nGET /sleep/1 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            &r,
            &mut out,
            LIMIT,
        );
        assert_eq!(b.responses, 2);
        assert!(b.close);
        assert!(!b.slow.unwrap().keep_alive);
        assert_eq!(st.resume(&r, &mut out, LIMIT).responses, 0);
        // Some(0) behaves like Some(1), and the 100 Continue is no request.
        let r0 = Responses::new(b"").keepalive_requests(Some(0));
        let (out, _, closed) = drive(&r0, &[one], LIMIT);
        assert!(closed && text(&out).contains("Connection: close"));
    }

    #[test]
    fn close_after_next_ends_the_connection_after_one_response() {
        let r = Responses::new(b"hi\n");
        let mut st = InputState::default();
        let mut out = Vec::new();
        assert!(st.is_idle());
        st.feed(b"GET / HTTP/1.1\r\n", &r, &mut out, LIMIT);
        assert!(st.in_head() && !st.is_idle());
        st.close_after_next();
        let b = st.feed(b"\r\nGET / HTTP/1.1\r\n\r\n", &r, &mut out, LIMIT);
        assert_eq!((b.responses, b.close), (1, true));
        assert!(text(&out).contains("Connection: close\r\n"));
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
            b"GET /bytes/12 HTTP/1.1\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc\
            GET /sleep/1 HTTP/1.1\r\n\r\nGET /file/a HTTP/1.1\r\n\r\n";
        let r = Responses::new(b"x").keepalive_requests(Some(7));
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
                let mut b = st.feed(&input[pos..end], &r, &mut out, 1 + (next() as usize) % 512);
                while (b.slow.is_some() && !b.close) || st.has_backlog() {
                    let close = b.close;
                    b = st.resume(&r, &mut out, usize::MAX);
                    b.close |= close;
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
