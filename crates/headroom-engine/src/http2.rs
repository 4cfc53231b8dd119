//! HTTP/2: a connection's codec state, requests sent as streams from their parts, and the
//! response heads the browser reads.
//!
//! A user of an HTTP/2 URL run owns one connection and keeps up to `--streams` requests in
//! flight on it (the user's in-flight table, `flight.rs`), each a stream with its own intended
//! and sent instants, so every response's latency is measured from when *its* request was meant
//! to go (coordinated omission, as for HTTP/1.1). The codec ([`headroom_proto::h2::ClientConn`])
//! is sans-I/O: the worker feeds it what the transport read and writes what it put in
//! [`H2Conn::out`].
//!
//! Every request goes as a stream from the parts its HTTP/1.1 encoder kept
//! (`headroom_proto::http1::Batch`): the run's request (the same on every stream, encoded once
//! per run), a session's batch, the browser's hop. The parts are borrowed for each send, so a
//! warm send allocates nothing (the codec's HPACK encoder indexes every field after the first
//! request), and nothing re-reads the encoded bytes. The user's cookies, when it has any, go as
//! one more field written by the jar itself (`Browser::cookie_value`). Each stream's response head is
//! captured for the browser (cookies, a redirect's `Location`, a Digest challenge) and its body
//! decoded for `--compressed`, per stream, as HTTP/1.1's decoder does per connection.

use headroom_core::{ErrorKind, ProtoCounter};
use headroom_metrics::Counters;
use headroom_proto::h2::{self, ClientConn};
use headroom_proto::http1::{Capture, Captured, HeaderSet, Parts, DEFAULT_CAPTURE_BYTES};

use crate::outcome::{count_encoded, Outcome, CAPTURE_LIMIT};

/// Sends `req` (read from the parts its encoder kept: nothing re-reads its bytes) as a new
/// stream of `conn`, its frames into `out`: method, target as `:path`, `Host` as `:authority`,
/// the other fields (the codec lower-cases names and drops connection-specific ones and `Host`)
/// and the body, borrowed as the codec encodes them, not gathered or copied; with the user's
/// `cookie` field when it has one. The stream's id, or the error kind when the connection takes
/// no more streams.
pub(crate) fn send(
    conn: &mut ClientConn,
    out: &mut Vec<u8>,
    req: Parts<'_>,
    scheme: &[u8],
    cookie: Option<&[u8]>,
) -> Result<u32, ErrorKind> {
    let r = h2::Request {
        method: req.method_bytes(),
        scheme,
        authority: req.authority(),
        path: req.target_bytes(),
        headers: &[],
        body: req.body(),
    };
    let cookie = cookie.map(|v| (&b"cookie"[..], v));
    conn.send_request_with(&r, req.fields().chain(cookie), out)
        .map_err(|_| ErrorKind::Protocol)
}

/// Streams a session user may keep open at once (its batch of requests), below any server's
/// limit in practice; a batch larger than the server allows fails as a protocol error.
pub(crate) const SESSION_STREAMS: u32 = 128;

/// Sends each of `requests` (a session's batch, a URL run's request or the browser's hop) as a
/// stream of `conn` ([`send`]). Only the requests `pick` chooses (by their index in the batch)
/// go out; `opened` gets each one's index and new stream id. An error kind if no stream could
/// be opened for one.
pub(crate) fn send_parts<'r>(
    conn: &mut ClientConn,
    out: &mut Vec<u8>,
    requests: impl Iterator<Item = Parts<'r>>,
    scheme: &[u8],
    pick: &dyn Fn(usize) -> bool,
    opened: &mut dyn FnMut(usize, u32),
) -> Result<(), ErrorKind> {
    for (index, req) in requests.enumerate() {
        if pick(index) {
            opened(index, send(conn, out, req, scheme, None)?);
        }
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
    /// `:scheme` of its requests: `https` over TLS.
    pub scheme: &'static [u8],
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
    pub fn new(streams: u32, tls: bool, wanted: HeaderSet) -> H2Conn {
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
            scheme: if tls { b"https" } else { b"http" },
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
        // Where the head last looked up is: a head's fields come together, so most lookups
        // are answered without a search of every stream in flight.
        let mut at = usize::MAX;
        let fed = self.conn.feed(input, &mut self.out, &mut |e| match e {
            h2::Event::Status { stream, status } => {
                if !wanted.is_empty() {
                    at = head_of(heads, spare, wanted, stream);
                    heads[at].cap.begin();
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
                    if let Some(h) = find(heads, &mut at, stream) {
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
                if let Some(h) = find(heads, &mut at, stream) {
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
                let decoded = find(heads, &mut at, stream)
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
                at = usize::MAX;
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

/// The captured head of `stream` (its index in `heads`), begun now if it has none (from a
/// spare when there is one).
fn head_of(
    heads: &mut Vec<StreamHead>,
    spare: &mut Vec<Capture>,
    wanted: HeaderSet,
    stream: u32,
) -> usize {
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
    heads[i].body = false;
    i
}

/// The captured head of `stream`, looked up at `at` first (and `at` moved to where it is).
fn find<'a>(
    heads: &'a mut [StreamHead],
    at: &mut usize,
    stream: u32,
) -> Option<&'a mut StreamHead> {
    if heads.get(*at).is_none_or(|h| h.stream != stream) {
        *at = heads.iter().position(|h| h.stream == stream)?;
    }
    heads.get_mut(*at)
}

/// `stream`'s head is no longer needed: back to the spares.
fn release(heads: &mut Vec<StreamHead>, spare: &mut Vec<Capture>, stream: u32) {
    if let Some(i) = heads.iter().position(|h| h.stream == stream) {
        let h = heads.swap_remove(i);
        spare.push(h.cap);
    }
}
