//! HTTP/1.1 client codec: request encoding and incremental response decoding, sans I/O.
//!
//! # Buffering strategy, and why
//!
//! A load generator holds tens of thousands of connections, most of them idle at any instant, and
//! decodes ~200k responses per second per core. Both facts push the same way: **the decoder owns
//! no read buffer**. The transport reads into whatever buffer it likes (a per-worker scratch
//! buffer, a provided buffer of io_uring) and lends the bytes to [`ResponseDecoder::decode`],
//! which parses them *in place*:
//!
//! - **Fast path (the common case):** the whole response head is inside the slice that was handed
//!   in. `httparse` parses it directly from the caller's slice into a fixed array of 64 headers on
//!   the stack; the few facts we need (status, keep-alive, body framing) are copied out into a
//!   few scalars and the borrowed header slices are forgotten. No allocation, no copy.
//! - **Slow path:** the head was split across reads. Only then is the partial head copied into an
//!   internal `Vec<u8>`, which is allocated on first need (so a connection that never sees a
//!   split head never allocates) and keeps its capacity afterwards (a connection that sees one
//!   will likely see more), up to [`MAX_HEAD_LEN`]. A buffer that grew past
//!   [`RETAINED_CAPACITY`] for an unusually large head is released once that head is done, so an
//!   idle connection never sits on tens of KiB. New bytes are appended one line at a time and the
//!   head is re-parsed only when the buffer ends in an empty line, so feeding a head one byte per
//!   call stays linear, and only the bytes of the head are ever copied, never the body or the
//!   next pipelined response behind it.
//! - **Bodies are never buffered**: they are counted. Content-Length bodies are a countdown; a
//!   chunked body is a small state machine (size line, data, CRLF, trailers) that can stop and
//!   resume at any byte. A chunk-size line split across reads is the one other thing copied into
//!   the same `Vec` (at most [`MAX_CHUNK_LINE_LEN`] bytes), so that `httparse::parse_chunk_size`
//!   always sees a whole line and a split input decodes exactly like an unsplit one.
//!
//! The decoder itself is a few scalars, an (empty) `Vec` and an (absent) capture box: 72 bytes
//! on 64-bit targets. The capture box is made by the first head that has a field to capture.
//!
//! # Header capture
//!
//! Cookies, redirects and auth need a few header values of each response (`Set-Cookie`,
//! `Location`, `WWW-Authenticate`, `Content-Encoding`). A caller opts in with
//! [`ResponseDecoder::set_capture`]; the values of each head are then copied into a bounded
//! buffer owned by the decoder and read with [`ResponseDecoder::captured`] after
//! `Decoded::Complete`. Without it the decoder copies nothing (see the `capture` module).
//! Capturing `Content-Encoding` also hands every body's bytes (after de-chunking) to a
//! streaming decoder (`crate::encoding`) whose result [`ResponseDecoder::content`] reports.
//!
//! # Robustness
//!
//! Bytes from the network never panic the decoder: all slicing goes through `get`, all length
//! arithmetic is checked or saturating, and every failure is a [`ProtoError`] variant (a fixed
//! enum, counted by the engine without allocating). The `fuzz/` directory of the repository holds
//! a cargo-fuzz target that checks this, and that a response split at any byte boundaries decodes
//! exactly as when it arrives in one piece.

use std::ops::Range;

use headroom_core::HttpRequest;

use crate::encoding::{BodyStats, ContentDecoder};

mod batch;
mod capture;

pub use batch::{Batch, Parts};
pub use capture::{Capture, Captured, HeaderId, HeaderSet, DEFAULT_CAPTURE_BYTES};

/// Largest response head (status line + headers + empty line) accepted, in bytes.
pub const MAX_HEAD_LEN: usize = 64 * 1024;
/// Most header fields in one response head; more is reported as [`ProtoError::HeadTooLarge`].
pub const MAX_HEADERS: usize = 64;
/// Longest chunk-size line (size, extensions, CRLF) accepted, in bytes.
pub const MAX_CHUNK_LINE_LEN: usize = 4 * 1024;
/// A head buffer whose capacity grew beyond this is freed when the head completes, instead of
/// being kept for the next split head.
pub const RETAINED_CAPACITY: usize = 4 * 1024;
/// The `User-Agent` sent unless the request names its own.
pub const USER_AGENT: &str = concat!("headroom/", env!("CARGO_PKG_VERSION"));

/// What a complete response told us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseMeta {
    pub status: u16,
    /// False when the server said `Connection: close`, or for HTTP/1.0 without keep-alive.
    pub keep_alive: bool,
    /// Body bytes (after de-chunking).
    pub body_len: u64,
}

/// Progress of one `decode` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// All input consumed, response not complete yet.
    NeedMore,
    /// A response completed after consuming `.0`-th byte count (see `decode`).
    Complete(ResponseMeta),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("invalid HTTP response head")]
    BadHead,
    #[error("response head larger than the limit")]
    HeadTooLarge,
    #[error("invalid chunked encoding")]
    BadChunk,
    #[error("invalid Content-Length")]
    BadContentLength,
    #[error("connection closed before the response was complete")]
    Incomplete,
}

/// Encode `req` into `out` (appending). `keep_alive == false` adds `Connection: close`.
///
/// Writes the request line, `Host`, `User-Agent`, the user's headers in order, `Content-Length`
/// when the body is non-empty or the method is POST/PUT/PATCH, `Connection: close` when
/// `!keep_alive`, the empty line and the body. A user header named (case-insensitively) `Host`,
/// `User-Agent`, `Content-Length` or `Connection` replaces ours; a user `Transfer-Encoding` also
/// suppresses our `Content-Length` (the two must not both be sent). An empty path is sent as `/`.
///
/// Header names and values are written as given: rejecting CR/LF in them is the scenario
/// validator's job. Called once per run (the engine pre-encodes), so it may allocate.
pub fn encode_request(req: &HttpRequest, keep_alive: bool, out: &mut Vec<u8>) {
    let headers = req.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
    encode_parts(
        &req.method,
        &req.path,
        &req.host,
        headers,
        &req.body,
        keep_alive,
        out,
    );
}

/// [`encode_request`] from borrowed parts, for requests built per send (scenario templates).
/// `headers` is walked more than once, hence `Clone`. Allocates nothing beyond growing `out`.
pub fn encode_parts<'a, H>(
    method: &str,
    path: &str,
    host: &str,
    headers: H,
    body: &[u8],
    keep_alive: bool,
    out: &mut Vec<u8>,
) where
    H: Iterator<Item = (&'a str, &'a str)> + Clone,
{
    encode_parts_with(method, path, host, headers, &[], body, keep_alive, out)
}

/// [`encode_parts`] with `fields` written after the user's headers, their values as bytes: the
/// fields a browser adds per request (`Cookie`, whose value the server chose and may hold any
/// byte but a control, and a Digest `Authorization`). A field with an empty value is skipped.
/// A request encoded per send goes into a [`Batch`], which keeps its parts and its buffers.
#[allow(clippy::too_many_arguments)]
pub fn encode_parts_with<'a, H>(
    method: &str,
    path: &str,
    host: &str,
    headers: H,
    fields: &[(&str, &[u8])],
    body: &[u8],
    keep_alive: bool,
    out: &mut Vec<u8>,
) where
    H: Iterator<Item = (&'a str, &'a str)> + Clone,
{
    let mut spans = Vec::new();
    encode_marked(
        method, path, host, headers, fields, body, keep_alive, out, &mut spans,
    );
}

/// Where [`encode_marked`] wrote a request's parts (byte ranges of its output).
pub(crate) struct Marks {
    pub method: Range<usize>,
    pub target: Range<usize>,
    pub body: Range<usize>,
    pub wire: Range<usize>,
}

/// The encoder: writes the request (see [`encode_request`]) after what `out` holds, pushes the
/// name and value spans of each header field it writes to `spans`, and says where the other
/// parts went. Allocates nothing beyond growing `out` and `spans`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_marked<'a, H>(
    method: &str,
    path: &str,
    host: &str,
    headers: H,
    fields: &[(&str, &[u8])],
    body: &[u8],
    keep_alive: bool,
    out: &mut Vec<u8>,
    spans: &mut Vec<(Range<usize>, Range<usize>)>,
) -> Marks
where
    H: Iterator<Item = (&'a str, &'a str)> + Clone,
{
    let user_has = |name: &str| {
        headers
            .clone()
            .any(|(n, _)| n.trim().eq_ignore_ascii_case(name))
    };
    let path = if path.is_empty() { "/" } else { path };
    out.reserve(64 + method.len() + path.len() + host.len() + body.len());

    let start = out.len();
    let (method_span, target) = put_request_line(out, method, path);
    if !user_has("host") {
        put_marked(out, b"Host", host.as_bytes(), spans);
    }
    if !user_has("user-agent") {
        put_marked(out, b"User-Agent", USER_AGENT.as_bytes(), spans);
    }
    for (name, value) in headers.clone() {
        put_marked(out, name.as_bytes(), value.as_bytes(), spans);
    }
    let method_has_body = ["POST", "PUT", "PATCH"]
        .iter()
        .any(|m| method.eq_ignore_ascii_case(m));
    if (!body.is_empty() || method_has_body)
        && !user_has("content-length")
        && !user_has("transfer-encoding")
    {
        let mut buf = [0u8; 20];
        let len = crate::digits(body.len() as u64, &mut buf);
        put_marked(out, b"Content-Length", len, spans);
    }
    if !keep_alive && !user_has("connection") {
        put_marked(out, b"Connection", b"close", spans);
    }
    for (name, value) in fields.iter().filter(|(_, v)| !v.is_empty()) {
        put_marked(out, name.as_bytes(), value, spans);
    }
    out.extend_from_slice(b"\r\n");
    let b0 = out.len();
    out.extend_from_slice(body);
    Marks {
        method: method_span,
        target,
        body: b0..out.len(),
        wire: start..out.len(),
    }
}

/// Writes a request line, `METHOD target HTTP/1.1\r\n`, and says where its method and target
/// went.
pub(crate) fn put_request_line(
    out: &mut Vec<u8>,
    method: &str,
    target: &str,
) -> (Range<usize>, Range<usize>) {
    let m0 = out.len();
    out.extend_from_slice(method.as_bytes());
    let m1 = out.len();
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    let t1 = out.len();
    out.extend_from_slice(b" HTTP/1.1\r\n");
    (m0..m1, m1 + 1..t1)
}

/// Appends one header field, `name: value\r\n`, and pushes where its name and value went.
pub(crate) fn put_marked(
    out: &mut Vec<u8>,
    name: &[u8],
    value: &[u8],
    spans: &mut Vec<(Range<usize>, Range<usize>)>,
) {
    let n0 = out.len();
    out.extend_from_slice(name);
    let n1 = out.len();
    out.extend_from_slice(b": ");
    let v0 = out.len();
    out.extend_from_slice(value);
    spans.push((n0..n1, v0..out.len()));
    out.extend_from_slice(b"\r\n");
}

/// Incremental response decoder, one per connection.
///
/// Holds no buffer until a response head (or chunk-size line) arrives split across `decode`
/// calls; see the module documentation.
#[derive(Debug, Default)]
pub struct ResponseDecoder {
    /// Partial response head or chunk-size line; empty (and unallocated until first needed)
    /// whenever the last input ended on a boundary the state machine can resume from alone.
    buf: Vec<u8>,
    state: State,
    /// Body bytes counted so far for the response in progress.
    body_len: u64,
    /// Status and keep-alive of the response in progress (valid once its head is parsed).
    status: u16,
    keep_alive: bool,
    /// The responses answer HEAD requests: no body whatever the headers say.
    head_request: bool,
    /// An informational (1xx) head was skipped and the final response is still to come.
    interim: bool,
    /// Header capture, when the caller asked for it and a head had something to capture
    /// (`None`: the URL-mode hot path, no copy).
    capture: Option<Box<Capture>>,
    /// What [`set_capture`](Self::set_capture) asked for while `capture` is not made yet: the
    /// box is made by the first head holding a wanted field, so a user whose server never sets
    /// a cookie holds none (issue 29: 216 bytes of each idle connection's 829).
    capture_wanted: HeaderSet,
    capture_max: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Waiting for a response head, or for the rest of the one in `buf`.
    #[default]
    Head,
    /// Inside a Content-Length body.
    Length { remaining: u64 },
    /// At the start of a chunk-size line, or inside one (its first part in `buf`).
    ChunkSize,
    /// Inside chunk data.
    ChunkData { remaining: u64 },
    /// After chunk data: the CRLF that ends it (`cr_seen`: the CR is behind us).
    ChunkDataEnd { cr_seen: bool },
    /// In the trailer section after the last (zero-size) chunk.
    Trailer(TrailerPos),
    /// A body delimited by the connection closing.
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrailerPos {
    /// At the start of a line: an empty line ends the message.
    LineStart,
    /// Inside a trailer field line, skipping to its LF.
    InLine,
    /// Saw CR at the start of a line: LF ends the message.
    EndCr,
}

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// 1xx, 204, 304, or a response to HEAD.
    NoBody,
    Length(u64),
    Chunked,
    UntilClose,
}

/// The facts a response head carries that the decoder needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    status: u16,
    keep_alive: bool,
    framing: Framing,
}

/// The capture box to take a head's values into: the one made already, or a new one when the
/// head holds a field of `wanted` (none is made for heads that have nothing to capture).
fn capture_for<'c>(
    capture: &'c mut Option<Box<Capture>>,
    wanted: HeaderSet,
    max_bytes: u32,
    headers: &[httparse::Header<'_>],
) -> Option<&'c mut Capture> {
    if capture.is_none() {
        let any = headers
            .iter()
            .any(|h| HeaderId::of(h.name.as_bytes()).is_some_and(|id| wanted.contains(id)));
        if !any {
            return None;
        }
        *capture = Some(Box::new(Capture::new(wanted, max_bytes as usize)));
    }
    capture.as_deref_mut()
}

impl ResponseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next response answers a HEAD request (no body whatever the headers say).
    ///
    /// The setting stays in effect (for every later response, and across [`reset`](Self::reset))
    /// until it is changed, so an engine sending one pre-encoded request can set it once per
    /// connection; setting it before each response works as well.
    pub fn set_head_request(&mut self, head: bool) {
        self.head_request = head;
    }

    /// Capture the values of `headers` from every response head from now on, at most
    /// `max_bytes` bytes of values per response ([`DEFAULT_CAPTURE_BYTES`] is a sensible bound).
    /// An empty set turns capture off and frees its buffer.
    ///
    /// With [`HeaderId::ContentEncoding`] in the set, bodies encoded with gzip, deflate or br
    /// are also decoded as they pass (into a fixed scratch buffer, then forgotten) and their
    /// sizes reported by [`content`](Self::content): see `crate::encoding`.
    ///
    /// Like [`set_head_request`](Self::set_head_request), the setting outlives
    /// [`reset`](Self::reset). The buffer is allocated on first need and kept, so a warm decoder
    /// captures without allocating.
    pub fn set_capture(&mut self, headers: HeaderSet, max_bytes: usize) {
        self.capture_wanted = headers;
        self.capture_max = max_bytes.min(u32::MAX as usize) as u32;
        if headers.is_empty() {
            self.capture = None;
        } else if let Some(c) = self.capture.as_mut() {
            c.configure(headers, max_bytes);
        } else if headers.contains(HeaderId::ContentEncoding) {
            // Every body goes through the content decoder (it counts identity bodies too).
            self.capture = Some(Box::new(Capture::new(headers, max_bytes)));
        }
    }

    /// The captured header values of the last response head, in the order they came (several
    /// `Set-Cookie` values are several items). Read it after `Decoded::Complete` (or an `eof()`
    /// that completed a response), before the next `decode`: parsing the next head replaces it.
    /// Empty when capture is off. Values are as received (no decoding, leading and trailing
    /// whitespace removed by the parser); an informational 1xx head is replaced by the final one.
    pub fn captured(&self) -> Captured<'_> {
        self.capture
            .as_deref()
            .map_or_else(Captured::empty, Capture::iter)
    }

    /// How many wanted values of the last response head were not captured because the byte
    /// bound was reached (each dropped whole). Count it: 0 unless a server sent huge headers.
    pub fn captured_dropped(&self) -> u32 {
        self.capture.as_deref().map_or(0, Capture::dropped)
    }

    /// Of [`captured_dropped`](Self::captured_dropped), the `Set-Cookie` values: cookies too big
    /// for the capture bound (far above RFC 6265's 4096 bytes a cookie), which no jar would
    /// store either. The caller counts them as rejected.
    pub fn cookies_dropped(&self) -> u32 {
        self.capture.as_deref().map_or(0, Capture::dropped_cookies)
    }

    /// The encoded body of the last response, decoded: its coding, sizes as received and as
    /// decoded, and whether it decoded cleanly. `None` when the body was not encoded (or was
    /// empty), or when `Content-Encoding` is not captured. Read it when [`captured`]
    /// (Self::captured) is read: after `Decoded::Complete` or an `eof()` that completed a
    /// response.
    pub fn content(&self) -> Option<BodyStats> {
        self.capture
            .as_deref()
            .and_then(|c| c.content.as_ref())
            .and_then(ContentDecoder::last)
    }

    /// Feed bytes. Returns how many were consumed and whether a response completed. When a
    /// response completes, the bytes after it (a pipelined next response) are not consumed: call
    /// again with the rest.
    ///
    /// `NeedMore` always comes with all of `input` consumed (so 0 only for an empty input).
    /// After an `Err`, the decoder's state is unspecified: call [`reset`](Self::reset) (the
    /// connection should be closed anyway, since its framing is lost).
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Decoded), ProtoError> {
        let mut pos = 0usize;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            // Every state needs at least one byte to move: a response completes on the
            // transition that consumes its last byte, never on an empty input.
            let Some(&first) = rest.first() else {
                return Ok((pos, Decoded::NeedMore));
            };
            match self.state {
                State::Head => {
                    let skipped = self.skip_blank_lines(rest)?;
                    if skipped > 0 {
                        pos += skipped;
                        continue;
                    }
                    let Some((used, head)) = self.decode_head(rest)? else {
                        return Ok((input.len(), Decoded::NeedMore));
                    };
                    pos += used;
                    if let Some(meta) = self.begin_body(head) {
                        return Ok((pos, Decoded::Complete(meta)));
                    }
                }
                State::Length { remaining } => {
                    let take = take_len(remaining, rest);
                    pos += take;
                    self.count_body(rest.get(..take).unwrap_or_default());
                    let remaining = remaining.saturating_sub(take as u64);
                    if remaining == 0 {
                        return Ok((pos, Decoded::Complete(self.finish())));
                    }
                    self.state = State::Length { remaining };
                }
                State::ChunkSize => {
                    let Some((used, size)) = self.decode_chunk_size(rest)? else {
                        return Ok((input.len(), Decoded::NeedMore));
                    };
                    pos += used;
                    self.state = if size == 0 {
                        State::Trailer(TrailerPos::LineStart)
                    } else {
                        State::ChunkData { remaining: size }
                    };
                }
                State::ChunkData { remaining } => {
                    let take = take_len(remaining, rest);
                    pos += take;
                    self.count_body(rest.get(..take).unwrap_or_default());
                    let remaining = remaining.saturating_sub(take as u64);
                    self.state = if remaining == 0 {
                        State::ChunkDataEnd { cr_seen: false }
                    } else {
                        State::ChunkData { remaining }
                    };
                }
                State::ChunkDataEnd { cr_seen } => {
                    pos += 1;
                    self.state = match (cr_seen, first) {
                        (false, b'\r') => State::ChunkDataEnd { cr_seen: true },
                        (true, b'\n') => State::ChunkSize,
                        _ => return Err(ProtoError::BadChunk),
                    };
                }
                State::Trailer(TrailerPos::LineStart) => {
                    pos += 1;
                    match first {
                        b'\r' => self.state = State::Trailer(TrailerPos::EndCr),
                        // A bare LF ends a line too (RFC 9112 §2.2 lets a recipient accept it).
                        b'\n' => return Ok((pos, Decoded::Complete(self.finish()))),
                        _ => self.state = State::Trailer(TrailerPos::InLine),
                    }
                }
                State::Trailer(TrailerPos::InLine) => match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        pos += i + 1;
                        self.state = State::Trailer(TrailerPos::LineStart);
                    }
                    None => return Ok((input.len(), Decoded::NeedMore)),
                },
                State::Trailer(TrailerPos::EndCr) => {
                    if first != b'\n' {
                        return Err(ProtoError::BadChunk);
                    }
                    return Ok((pos + 1, Decoded::Complete(self.finish())));
                }
                State::UntilClose => {
                    self.count_body(rest);
                    return Ok((input.len(), Decoded::NeedMore));
                }
            }
        }
    }

    /// The peer closed the connection: completes a body delimited by close, or returns
    /// `Err(Incomplete)` if a response was in progress, or `Ok(None)` if none was.
    ///
    /// The decoder is ready for a new connection afterwards, whatever the result.
    ///
    /// When it completes a response, that response's [`captured`](Self::captured) values stay
    /// readable.
    pub fn eof(&mut self) -> Result<Option<ResponseMeta>, ProtoError> {
        let result = if self.state == State::UntilClose {
            Ok(Some(self.finish()))
        } else if self.in_progress() {
            Err(ProtoError::Incomplete)
        } else {
            Ok(None)
        };
        self.reset_state();
        if !matches!(result, Ok(Some(_))) {
            self.clear_captured();
        }
        result
    }

    /// Some bytes of a response have been received and it is not complete yet.
    ///
    /// Empty lines before a status line do not count (they are skipped, RFC 9112 §2.2); an
    /// informational 1xx head does (the final response is still owed).
    pub fn in_progress(&self) -> bool {
        self.interim || self.state != State::Head || !self.only_pending_cr()
    }

    /// Forget any partial response and the captured values (after an error or a reconnect);
    /// keeps buffer capacity.
    ///
    /// The [`set_head_request`](Self::set_head_request) and
    /// [`set_capture`](Self::set_capture) settings are kept.
    pub fn reset(&mut self) {
        self.reset_state();
        self.clear_captured();
    }

    fn clear_captured(&mut self) {
        if let Some(c) = self.capture.as_mut() {
            c.clear();
            if let Some(d) = c.content.as_mut() {
                d.abort();
            }
        }
    }

    fn reset_state(&mut self) {
        self.buf.clear();
        self.state = State::Head;
        self.body_len = 0;
        self.status = 0;
        self.keep_alive = false;
        self.interim = false;
    }

    /// True when `buf` holds nothing but (possibly) a lone CR that may start an empty line.
    fn only_pending_cr(&self) -> bool {
        matches!(self.buf.as_slice(), [] | [b'\r'])
    }

    /// Skips empty lines (CRLF or bare LF) before a status line, as `httparse` would, but without
    /// copying them into `buf`: a stray CRLF after a body must neither cost a buffer nor make the
    /// connection look busy. Returns how many bytes of `rest` were skipped.
    fn skip_blank_lines(&mut self, rest: &[u8]) -> Result<usize, ProtoError> {
        let mut i = 0usize;
        if self.buf.as_slice() == b"\r" {
            // The CR of an empty line ended the previous input.
            if rest.first() != Some(&b'\n') {
                return Err(ProtoError::BadHead);
            }
            self.buf.clear();
            i = 1;
        } else if !self.buf.is_empty() {
            return Ok(0);
        }
        loop {
            match (rest.get(i), rest.get(i + 1)) {
                (Some(b'\n'), _) => i += 1,
                (Some(b'\r'), Some(b'\n')) => i += 2,
                _ => return Ok(i),
            }
        }
    }

    /// Parses a response head from `rest` (fast path) or from `buf` + `rest` (slow path).
    /// Returns the bytes of `rest` that belonged to the head and what it said, or `None` when
    /// all of `rest` was taken into `buf` and the head is not complete yet.
    fn decode_head(&mut self, rest: &[u8]) -> Result<Option<(usize, Head)>, ProtoError> {
        let head_request = self.head_request;
        if self.buf.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut headers);
            return match resp.parse(rest) {
                Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD_LEN => {
                    let head = interpret_head(&resp, head_request)?;
                    let (wanted, max) = (self.capture_wanted, self.capture_max);
                    if let Some(c) = capture_for(&mut self.capture, wanted, max, resp.headers) {
                        c.take(resp.headers);
                    }
                    Ok(Some((n, head)))
                }
                Ok(httparse::Status::Complete(_)) => Err(ProtoError::HeadTooLarge),
                Ok(httparse::Status::Partial) if rest.len() <= MAX_HEAD_LEN => {
                    self.buf.extend_from_slice(rest);
                    Ok(None)
                }
                Ok(httparse::Status::Partial) => Err(ProtoError::HeadTooLarge),
                Err(e) => Err(map_head_error(e)),
            };
        }
        let capture = &mut self.capture;
        let (wanted, max) = (self.capture_wanted, self.capture_max);
        let found = feed_lines(
            &mut self.buf,
            rest,
            MAX_HEAD_LEN,
            ProtoError::HeadTooLarge,
            ends_with_empty_line,
            |buf| {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(buf) {
                    Ok(httparse::Status::Complete(n)) => {
                        let head = interpret_head(&resp, head_request)?;
                        if let Some(c) = capture_for(capture, wanted, max, resp.headers) {
                            c.take(resp.headers);
                        }
                        Ok(Some((n, head)))
                    }
                    Ok(httparse::Status::Partial) => Ok(None),
                    Err(e) => Err(map_head_error(e)),
                }
            },
        );
        self.release_large_buffer();
        found.map_err(|e| match e {
            ProtoError::Incomplete => ProtoError::BadHead,
            e => e,
        })
    }

    /// Parses a chunk-size line from `rest` (fast path) or from `buf` + `rest` (slow path).
    fn decode_chunk_size(&mut self, rest: &[u8]) -> Result<Option<(usize, u64)>, ProtoError> {
        if self.buf.is_empty() {
            // httparse reads a line with no digits as size 0; RFC 9112 wants 1*HEXDIG. (A line
            // that reached `buf` passed this check on its first byte.)
            if !rest.first().is_some_and(u8::is_ascii_hexdigit) {
                return Err(ProtoError::BadChunk);
            }
            return match httparse::parse_chunk_size(rest) {
                Ok(httparse::Status::Complete((n, size))) if n <= MAX_CHUNK_LINE_LEN => {
                    Ok(Some((n, size)))
                }
                Ok(httparse::Status::Partial) if rest.len() <= MAX_CHUNK_LINE_LEN => {
                    self.buf.extend_from_slice(rest);
                    Ok(None)
                }
                _ => Err(ProtoError::BadChunk),
            };
        }
        let found = feed_lines(
            &mut self.buf,
            rest,
            MAX_CHUNK_LINE_LEN,
            ProtoError::BadChunk,
            |buf| buf.last() == Some(&b'\n'),
            |buf| match httparse::parse_chunk_size(buf) {
                Ok(httparse::Status::Complete(found)) => Ok(Some(found)),
                Ok(httparse::Status::Partial) => Ok(None),
                Err(_) => Err(ProtoError::BadChunk),
            },
        );
        self.release_large_buffer();
        found.map_err(|e| match e {
            ProtoError::Incomplete => ProtoError::BadChunk,
            e => e,
        })
    }

    /// A head that went through `buf` may have grown it far beyond the usual few hundred bytes:
    /// do not let an idle connection keep that (a no-op while `buf` holds a partial item).
    fn release_large_buffer(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() > RETAINED_CAPACITY {
            self.buf = Vec::new();
        }
    }

    /// Acts on a parsed head. Returns the response when it has no body left to read.
    fn begin_body(&mut self, head: Head) -> Option<ResponseMeta> {
        if is_interim(head.status) {
            // 100 Continue, 102, 103 Early Hints: the final response follows.
            self.interim = true;
            return None;
        }
        self.status = head.status;
        self.keep_alive = head.keep_alive;
        self.body_len = 0;
        if let Some(c) = self.capture.as_deref_mut() {
            c.start_body();
        }
        match head.framing {
            Framing::NoBody | Framing::Length(0) => return Some(self.finish()),
            Framing::Length(n) => self.state = State::Length { remaining: n },
            Framing::Chunked => self.state = State::ChunkSize,
            Framing::UntilClose => {
                self.keep_alive = false;
                self.state = State::UntilClose;
            }
        }
        None
    }

    /// Body bytes as received (after de-chunking): counted, and handed to the content
    /// decoder when there is one (capture of `Content-Encoding`; one branch otherwise).
    fn count_body(&mut self, bytes: &[u8]) {
        self.body_len = self.body_len.saturating_add(bytes.len() as u64);
        if let Some(d) = self.capture.as_deref_mut().and_then(|c| c.content.as_mut()) {
            d.feed(bytes);
        }
    }

    /// Completes the response in progress and readies the decoder for the next one.
    fn finish(&mut self) -> ResponseMeta {
        let meta = ResponseMeta {
            status: self.status,
            keep_alive: self.keep_alive,
            body_len: self.body_len,
        };
        if let Some(d) = self.capture.as_deref_mut().and_then(|c| c.content.as_mut()) {
            d.finish();
        }
        self.state = State::Head;
        self.body_len = 0;
        self.interim = false;
        meta
    }
}

/// How many bytes of `rest` a body with `remaining` bytes left takes.
fn take_len(remaining: u64, rest: &[u8]) -> usize {
    usize::try_from(remaining).map_or(rest.len(), |r| r.min(rest.len()))
}

/// 1xx other than 101: an interim response, followed by the final one. 101 Switching Protocols
/// ends HTTP on the connection, so it is reported as final (with `keep_alive == false`).
fn is_interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

fn map_head_error(e: httparse::Error) -> ProtoError {
    match e {
        httparse::Error::TooManyHeaders => ProtoError::HeadTooLarge,
        _ => ProtoError::BadHead,
    }
}

/// Could `buf` hold a whole head? It must end with an empty line (LF LF or LF CR LF).
fn ends_with_empty_line(buf: &[u8]) -> bool {
    buf.ends_with(b"\n\n") || buf.ends_with(b"\n\r\n")
}

/// Appends `input` to `buf` one line (up to and including an LF) at a time and calls `parse` on
/// the whole of `buf` whenever `candidate(buf)` says it may hold a complete item.
///
/// Returns `Some((bytes of input used, item))` when `parse` completes with an item of length `n`
/// (of which `buf` held `n - <len before the call>` from this input), clearing `buf`; `None`
/// when all of `input` went into `buf`. Growing `buf` beyond `limit` is `Err(too_long)`.
///
/// Copying only up to each LF means bytes after the item (a body, a pipelined response) are
/// never copied, and parsing only at candidate positions keeps a byte-at-a-time feed linear.
/// `Err(Incomplete)` reports an item that `parse` says ended inside the earlier part of `buf`
/// (it cannot happen, since `parse` was tried there already; callers map it to their own error).
fn feed_lines<T>(
    buf: &mut Vec<u8>,
    input: &[u8],
    limit: usize,
    too_long: ProtoError,
    candidate: fn(&[u8]) -> bool,
    mut parse: impl FnMut(&[u8]) -> Result<Option<(usize, T)>, ProtoError>,
) -> Result<Option<(usize, T)>, ProtoError> {
    let before = buf.len();
    let mut pos = 0usize;
    while let Some(rest) = input.get(pos..).filter(|r| !r.is_empty()) {
        let seg = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        if buf.len().saturating_add(seg) > limit {
            return Err(too_long);
        }
        buf.extend_from_slice(rest.get(..seg).unwrap_or(rest));
        pos += seg;
        if candidate(buf) {
            if let Some((n, item)) = parse(buf)? {
                let used = n
                    .checked_sub(before)
                    .filter(|&used| used > 0 && used <= pos)
                    .ok_or(ProtoError::Incomplete)?;
                buf.clear();
                return Ok(Some((used, item)));
            }
        }
    }
    Ok(None)
}

/// Extracts status, keep-alive and framing from a parsed head.
fn interpret_head(
    resp: &httparse::Response<'_, '_>,
    head_request: bool,
) -> Result<Head, ProtoError> {
    let (Some(status), Some(minor)) = (resp.code, resp.version) else {
        return Err(ProtoError::BadHead);
    };
    if status < 100 {
        return Err(ProtoError::BadHead);
    }
    let mut close = false;
    let mut keep_alive_token = false;
    // Content-Length: None = absent; Some(Err) = invalid or conflicting (reported only if used).
    let mut content_length: Option<Result<u64, ()>> = None;
    let mut transfer_encoding = false;
    let mut chunked_last = false;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"connection") {
            for token in list_elements(h.value) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let value = parse_content_length(h.value);
            content_length = match content_length {
                None => Some(value),
                Some(prev) if prev == value => Some(prev),
                Some(_) => Some(Err(())),
            };
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Codings apply in order, across repeated fields: only the last one frames the body.
            for token in list_elements(h.value) {
                transfer_encoding = true;
                chunked_last = token.eq_ignore_ascii_case(b"chunked");
            }
        }
    }
    let mut keep_alive = if minor >= 1 {
        !close
    } else {
        keep_alive_token && !close
    };
    let framing = if head_request || status < 200 || status == 204 || status == 304 {
        Framing::NoBody
    } else if transfer_encoding {
        // Transfer-Encoding overrides Content-Length, but a message with both (or an HTTP/1.0
        // message with Transfer-Encoding) may be an attempt at request smuggling: RFC 9112 §6.1
        // and §6.3 say to close the connection after it.
        if content_length.is_some() || minor == 0 {
            keep_alive = false;
        }
        if chunked_last {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else {
        match content_length {
            Some(Ok(n)) => Framing::Length(n),
            Some(Err(())) => return Err(ProtoError::BadContentLength),
            None => Framing::UntilClose,
        }
    };
    if status == 101 || framing == Framing::UntilClose {
        keep_alive = false;
    }
    Ok(Head {
        status,
        keep_alive,
        framing,
    })
}

/// Elements of a comma-separated header list, without surrounding whitespace; empty ones skipped.
fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', tail @ ..] = s {
        s = tail;
    }
    while let [head @ .., b' ' | b'\t'] = s {
        s = head;
    }
    s
}

/// A Content-Length value: digits, or a list of identical digit strings (`42, 42`, which RFC 9110
/// §8.6 lets a recipient accept). Anything else, including an overflow, is an error.
fn parse_content_length(value: &[u8]) -> Result<u64, ()> {
    let mut result = None;
    for element in value.split(|&b| b == b',').map(trim_ows) {
        if element.is_empty() {
            return Err(());
        }
        let mut n = 0u64;
        for &b in element {
            if !b.is_ascii_digit() {
                return Err(());
            }
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(b - b'0')))
                .ok_or(())?;
        }
        match result {
            Some(prev) if prev != n => return Err(()),
            _ => result = Some(n),
        }
    }
    result.ok_or(())
}

#[cfg(test)]
mod tests;

/// A whole response kept for `extract` and `match` (its raw bytes as received).
///
/// Parsing happens only when a scenario step asks, so capturing costs one copy of the bytes.
#[derive(Debug, Clone, Copy)]
pub struct RawResponse<'a> {
    raw: &'a [u8],
    head_len: usize,
}

impl<'a> RawResponse<'a> {
    /// `None` when `raw` does not start with a complete response head.
    pub fn parse(raw: &'a [u8]) -> Option<RawResponse<'a>> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut headers);
        match r.parse(raw) {
            Ok(httparse::Status::Complete(n)) => Some(RawResponse { raw, head_len: n }),
            _ => None,
        }
    }

    /// The value of the first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut headers);
        r.parse(&self.raw[..self.head_len]).ok()?;
        r.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// The body, de-chunked when the response was chunked (trailers dropped).
    pub fn body(&self) -> std::borrow::Cow<'a, [u8]> {
        let body = &self.raw[self.head_len..];
        let chunked = self
            .header("transfer-encoding")
            .is_some_and(|v| v.windows(7).any(|w| w.eq_ignore_ascii_case(b"chunked")));
        if !chunked {
            return std::borrow::Cow::Borrowed(body);
        }
        let mut out = Vec::with_capacity(body.len());
        let mut rest = body;
        while let Ok(httparse::Status::Complete((used, size))) = httparse::parse_chunk_size(rest) {
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            rest = &rest[used..];
            if size == 0 || rest.len() < size {
                out.extend_from_slice(&rest[..size.min(rest.len())]);
                break;
            }
            out.extend_from_slice(&rest[..size]);
            rest = rest.get(size + 2..).unwrap_or(&[]);
        }
        std::borrow::Cow::Owned(out)
    }
}
