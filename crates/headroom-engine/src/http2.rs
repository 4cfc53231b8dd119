//! HTTP/2: a connection's codec state, the run's request in the parts a stream sends, and the
//! response heads the browser reads.
//!
//! A user of an HTTP/2 URL run owns one connection and keeps up to `--streams` requests in
//! flight on it (the user's in-flight table, `flight.rs`), each a stream with its own intended
//! and sent instants, so every response's latency is measured from when *its* request was meant
//! to go (coordinated omission, as for HTTP/1.1). The codec ([`headroom_proto::h2::ClientConn`])
//! is sans-I/O: the worker feeds it what the transport read and writes what it put in
//! [`H2Conn::out`].
//!
//! The request is the same on every stream; its parts are kept once per run ([`H2Request`]) and
//! borrowed for each send, so a warm send allocates nothing (the codec's HPACK encoder indexes
//! every field after the first request). The user's cookies, when it has any, go as one more
//! field written by the jar itself (`Browser::cookie_value`). Each stream's response head is
//! captured for the browser (cookies, a redirect's `Location`, a Digest challenge) and its body
//! decoded for `--compressed`, per stream, as HTTP/1.1's decoder does per connection.

use headroom_core::{ErrorKind, HttpRequest, Plan, ProtoCounter};
use headroom_metrics::Counters;
use headroom_proto::h2::{self, ClientConn};
use headroom_proto::http1::{Capture, Captured, HeaderSet, DEFAULT_CAPTURE_BYTES};

use crate::outcome::{count_encoded, Outcome, CAPTURE_LIMIT};

/// Headers a request may carry over HTTP/2 in a URL run (`-H`, plus user-agent and
/// content-length); borrowed into a fixed array per send.
pub(crate) const MAX_HEADERS: usize = 64;

/// The run's request, split into the parts an HTTP/2 request is made of.
#[derive(Debug)]
pub(crate) struct H2Request {
    method: Vec<u8>,
    scheme: &'static [u8],
    authority: Vec<u8>,
    path: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

impl H2Request {
    pub fn new(plan: &Plan) -> Result<H2Request, String> {
        let r: &HttpRequest = &plan.request;
        let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut agent = false;
        for (k, v) in &r.headers {
            let lk = k.to_ascii_lowercase();
            if lk == "user-agent" {
                agent = true;
            }
            if lk == "host" {
                // :authority carries it.
                continue;
            }
            headers.push((lk.into_bytes(), v.clone().into_bytes()));
        }
        if !agent {
            headers.push((
                b"user-agent".to_vec(),
                format!("headroom/{}", env!("CARGO_PKG_VERSION")).into_bytes(),
            ));
        }
        if !r.body.is_empty() && !headers.iter().any(|(k, _)| k == b"content-length") {
            headers.push((
                b"content-length".to_vec(),
                r.body.len().to_string().into_bytes(),
            ));
        }
        if headers.len() > MAX_HEADERS {
            return Err(format!(
                "HTTP/2 requests carry at most {MAX_HEADERS} headers ({} given)",
                headers.len()
            ));
        }
        Ok(H2Request {
            method: r.method.clone().into_bytes(),
            scheme: if plan.tls.is_some() {
                b"https"
            } else {
                b"http"
            },
            authority: r.host.clone().into_bytes(),
            path: r.path.clone().into_bytes(),
            headers,
            body: r.body.clone(),
        })
    }

    /// Send it on `conn` (the frames go to `out`), with the user's `cookie` field when it has
    /// one: the new stream's id.
    pub fn send(
        &self,
        conn: &mut ClientConn,
        out: &mut Vec<u8>,
        cookie: Option<&[u8]>,
    ) -> Result<u32, h2::SendError> {
        let empty: &[u8] = &[];
        let mut hs: [(&[u8], &[u8]); MAX_HEADERS + 1] = [(empty, empty); MAX_HEADERS + 1];
        for (slot, (k, v)) in hs.iter_mut().zip(&self.headers) {
            *slot = (k.as_slice(), v.as_slice());
        }
        let mut n = self.headers.len();
        if let Some(v) = cookie {
            hs[n] = (b"cookie", v);
            n += 1;
        }
        let req = h2::Request {
            method: &self.method,
            scheme: self.scheme,
            authority: &self.authority,
            path: &self.path,
            headers: &hs[..n],
            body: &self.body,
        };
        conn.send_request(&req, out)
    }

    /// The request's path (the cookies sent with it are the ones whose path it is under).
    pub fn path(&self) -> &str {
        std::str::from_utf8(&self.path).unwrap_or("/")
    }
}

/// Streams a session user may keep open at once (its batch of requests), below any server's
/// limit in practice; a batch larger than the server allows fails as a protocol error.
pub(crate) const SESSION_STREAMS: u32 = 128;

/// Sends each HTTP/1.1 request of `wire` (a session's batch, encoded back to back) as a stream
/// of `conn`: the session encodes its requests once, as HTTP/1.1, whatever version carries
/// them, and this re-reads their parts (method, target, headers, body) without copying them.
/// Only the requests `pick` chooses (by their index in the batch) go out; `opened` gets each
/// one's index and new stream id. An error kind if a request does not parse or no stream could
/// be opened for it.
pub(crate) fn send_http1_batch(
    conn: &mut ClientConn,
    out: &mut Vec<u8>,
    wire: &[u8],
    scheme: &[u8],
    pick: &dyn Fn(usize) -> bool,
    opened: &mut dyn FnMut(usize, u32),
) -> Result<(), ErrorKind> {
    let mut rest = wire;
    let mut index = 0;
    while !rest.is_empty() {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut hs);
        let head = match req.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return Err(ErrorKind::Other),
        };
        let (Some(method), Some(path)) = (req.method, req.path) else {
            return Err(ErrorKind::Other);
        };
        let mut authority: &[u8] = b"";
        let mut len = 0usize;
        let empty: &[u8] = &[];
        let mut fields: [(&[u8], &[u8]); MAX_HEADERS] = [(empty, empty); MAX_HEADERS];
        let mut n = 0;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("host") {
                authority = h.value;
            } else {
                if h.name.eq_ignore_ascii_case("content-length") {
                    len = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|v| v.trim().parse().ok())
                        .ok_or(ErrorKind::Other)?;
                }
                fields[n] = (h.name.as_bytes(), h.value);
                n += 1;
            }
        }
        let body = rest.get(head..head + len).ok_or(ErrorKind::Other)?;
        index += 1;
        if !pick(index - 1) {
            rest = &rest[head + len..];
            continue;
        }
        let r = h2::Request {
            method: method.as_bytes(),
            scheme,
            authority,
            path: path.as_bytes(),
            headers: &fields[..n],
            body,
        };
        let stream = conn
            .send_request(&r, out)
            .map_err(|_| ErrorKind::Protocol)?;
        opened(index - 1, stream);
        rest = &rest[head + len..];
    }
    Ok(())
}

/// A user's HTTP/2 connection state.
pub(crate) struct H2Conn {
    pub conn: ClientConn,
    /// Frames to write, and how many of them are written.
    pub out: Vec<u8>,
    pub written: usize,
    /// Requests this connection keeps in flight at most (`--streams`).
    pub streams: u32,
    /// What the last read completed, handed out one per `feed` call from `next`.
    events: Vec<Outcome>,
    next: usize,
    /// The codec failed on the last read: reported once its earlier outcomes are taken.
    failed: bool,
    /// Capturing a session's reply: its body began (the head's blank line is written).
    in_body: bool,
    /// Response headers the browser reads (cookies, redirects, a Digest challenge) and whether
    /// bodies are decoded (`--compressed`): empty for a run that needs none.
    wanted: HeaderSet,
    /// The captured head (and body decoder) of each stream whose reply is not yet taken:
    /// streams interleave, so each keeps its own. At most one per stream in flight; `spare`
    /// keeps released ones, so a warm connection captures without allocating.
    heads: Vec<StreamHead>,
    spare: Vec<Capture>,
    /// The stream whose reply `feed` handed out last: its head is readable ([`H2Conn::captured`])
    /// until the next `feed`.
    shown: Option<u32>,
}

/// One stream's captured response head.
struct StreamHead {
    stream: u32,
    cap: Capture,
    /// The body began (its decoder started on the head's coding).
    body: bool,
}

impl H2Conn {
    /// A connection for up to `streams` requests at once that captures the `wanted` response
    /// headers of each (and decodes bodies if `Content-Encoding` is among them).
    pub fn new(streams: u32, wanted: HeaderSet) -> H2Conn {
        let cfg = h2::ClientConfig {
            max_concurrent_streams_cap: streams,
            ..Default::default()
        };
        let mut out = Vec::with_capacity(4096);
        let conn = ClientConn::new(&cfg, &mut out);
        H2Conn {
            conn,
            out,
            written: 0,
            streams,
            events: Vec::with_capacity(streams.min(1024) as usize),
            next: 0,
            failed: false,
            in_body: false,
            wanted,
            heads: Vec::new(),
            spare: Vec::new(),
            shown: None,
        }
    }

    /// The captured head of the reply `feed` handed out last, and how many of its
    /// `Set-Cookie`s were too big to keep; nothing when no header is wanted.
    pub fn captured(&self) -> (Captured<'_>, u32) {
        match self.heads.iter().find(|h| Some(h.stream) == self.shown) {
            Some(h) => (h.cap.iter(), h.cap.dropped_cookies()),
            None => (Captured::empty(), 0),
        }
    }

    /// The reply handed out last is taken: its head goes back to the spares.
    fn release_shown(&mut self) {
        if let Some(stream) = self.shown.take() {
            release(&mut self.heads, &mut self.spare, stream);
        }
    }

    /// The error kind of the codec's connection error: `flood` for a server that made us queue
    /// more control frames than it read (the codec's cap), `protocol` otherwise.
    fn failure(&self) -> ErrorKind {
        if self.conn.error().is_some_and(|e| e.flood) {
            ErrorKind::PeerFlood
        } else {
            ErrorKind::Protocol
        }
    }

    /// Outcomes of the last read are still to be taken.
    pub fn queued(&self) -> bool {
        self.next < self.events.len() || self.failed
    }

    /// The protocol's `feed` (the calling convention of protocol.rs): the codec takes a whole read at once, so
    /// the first call uses all of `input` and later calls (with no input) hand out the rest of
    /// what it completed. A connection error (the codec wrote its GOAWAY) comes after them.
    /// `capture`, when given, gets each response as HTTP/1.1 text (status line, headers, blank
    /// line, body) for a session's `extract` and `match`, bounded by `CAPTURE_LIMIT`.
    pub fn feed(
        &mut self,
        input: &[u8],
        c: &mut Counters,
        mut capture: Option<&mut Vec<u8>>,
    ) -> Result<(usize, Option<Outcome>), ErrorKind> {
        self.release_shown();
        if let Some(&e) = self.events.get(self.next) {
            self.next += 1;
            self.shown = shown(e);
            return Ok((0, Some(e)));
        }
        if self.failed {
            self.failed = false;
            c.proto(ProtoCounter::H2ConnectionErrors, 1);
            return Err(self.failure());
        }
        self.events.clear();
        self.next = 0;
        if input.is_empty() {
            return Ok((0, None));
        }
        let events = &mut self.events;
        let in_body = &mut self.in_body;
        let wanted = self.wanted;
        let heads = &mut self.heads;
        let spare = &mut self.spare;
        let fed = self.conn.feed(input, &mut self.out, &mut |e| match e {
            h2::Event::Status { stream, status } => {
                if !wanted.is_empty() {
                    head_of(heads, spare, wanted, stream).cap.begin();
                }
                *in_body = false;
                if let Some(cap) = capture.as_deref_mut().filter(|c| c.len() < CAPTURE_LIMIT) {
                    cap.extend_from_slice(b"HTTP/1.1 ");
                    cap.extend_from_slice(status.to_string().as_bytes());
                    cap.extend_from_slice(b" \r\n");
                }
            }
            h2::Event::Header {
                stream,
                name,
                value,
            } => {
                if !wanted.is_empty() && name.first() != Some(&b':') {
                    if let Some(h) = heads.iter_mut().find(|h| h.stream == stream) {
                        h.cap.field(name, value);
                    }
                }
                if let Some(cap) = capture.as_deref_mut().filter(|c| c.len() < CAPTURE_LIMIT) {
                    if !*in_body && name.first() != Some(&b':') {
                        cap.extend_from_slice(name);
                        cap.extend_from_slice(b": ");
                        cap.extend_from_slice(value);
                        cap.extend_from_slice(b"\r\n");
                    }
                }
            }
            h2::Event::Data { stream, data } => {
                if let Some(h) = heads.iter_mut().find(|h| h.stream == stream) {
                    if !h.body {
                        h.body = true;
                        h.cap.start_body();
                    }
                    if let Some(d) = h.cap.content() {
                        d.feed(data);
                    }
                }
                if let Some(cap) = capture.as_deref_mut().filter(|c| c.len() < CAPTURE_LIMIT) {
                    if !*in_body {
                        cap.extend_from_slice(b"\r\n");
                    }
                    cap.extend_from_slice(data);
                }
                *in_body = true;
            }
            h2::Event::Complete { stream, status } => {
                if let Some(cap) = capture.as_deref_mut().filter(|c| c.len() < CAPTURE_LIMIT) {
                    if !*in_body {
                        cap.extend_from_slice(b"\r\n");
                    }
                }
                *in_body = false;
                // `--compressed`: the body's sizes counted; one that did not decode fails its
                // request, as over HTTP/1.1 (but not the connection: the others are fine).
                let decoded = heads
                    .iter_mut()
                    .find(|h| h.stream == stream)
                    .and_then(|h| h.cap.content())
                    .and_then(|d| d.finish());
                match decoded.map(|s| count_encoded(c, s)) {
                    Some(Err(kind)) => events.push(Outcome::Failed { stream, kind }),
                    _ => events.push(Outcome::Reply {
                        stream,
                        status: Some(status),
                        keep_alive: true,
                        ok: true,
                    }),
                }
            }
            h2::Event::Reset { stream, code } => {
                release(heads, spare, stream);
                events.push(Outcome::Reset { stream, code })
            }
            h2::Event::GoAway { code, .. } => events.push(Outcome::GoAway { code }),
        });
        self.failed = fed.is_err();
        match self.events.first() {
            Some(&e) => {
                self.next = 1;
                self.shown = shown(e);
                Ok((input.len(), Some(e)))
            }
            None if self.failed => {
                self.failed = false;
                c.proto(ProtoCounter::H2ConnectionErrors, 1);
                Err(self.failure())
            }
            None => Ok((input.len(), None)),
        }
    }
}

/// The stream whose head an outcome makes readable (a reply's, or a failed one's).
fn shown(e: Outcome) -> Option<u32> {
    match e {
        Outcome::Reply { stream, .. } | Outcome::Failed { stream, .. } => Some(stream),
        _ => None,
    }
}

/// The captured head of `stream`, begun now if it has none (from a spare when there is one).
fn head_of<'a>(
    heads: &'a mut Vec<StreamHead>,
    spare: &mut Vec<Capture>,
    wanted: HeaderSet,
    stream: u32,
) -> &'a mut StreamHead {
    let i = match heads.iter().position(|h| h.stream == stream) {
        Some(i) => i,
        None => {
            let cap = spare
                .pop()
                .unwrap_or_else(|| Capture::new(wanted, DEFAULT_CAPTURE_BYTES));
            heads.push(StreamHead {
                stream,
                cap,
                body: false,
            });
            heads.len() - 1
        }
    };
    let h = &mut heads[i];
    h.body = false;
    h
}

/// `stream`'s head is no longer needed: back to the spares.
fn release(heads: &mut Vec<StreamHead>, spare: &mut Vec<Capture>, stream: u32) {
    if let Some(i) = heads.iter().position(|h| h.stream == stream) {
        let h = heads.swap_remove(i);
        spare.push(h.cap);
    }
}
