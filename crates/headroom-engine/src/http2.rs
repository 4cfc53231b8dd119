//! HTTP/2 for URL loads: a connection's codec state and its streams in flight, for the worker.
//!
//! A user of an HTTP/2 run owns one connection and keeps up to `--streams` requests in flight on
//! it, each a stream with its own intended and sent instants, so every response's latency is
//! measured from when *its* request was meant to go (coordinated omission, as for HTTP/1.1). The
//! codec ([`headroom_proto::h2::ClientConn`]) is sans-I/O: the worker feeds it what the transport
//! read and writes what it put in [`H2Conn::out`].
//!
//! The request is the same on every stream; its parts are kept once per run ([`H2Request`]) and
//! borrowed for each send, so a warm send allocates nothing (the codec's HPACK encoder indexes
//! every field after the first request).

use std::time::Instant;

use headroom_core::{ErrorKind, HttpRequest, Plan, ProtoCounter};
use headroom_metrics::Counters;
use headroom_proto::h2::{self, ClientConn};

use crate::outcome::{Outcome, CAPTURE_LIMIT};

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

    /// Send it on `conn` (the frames go to `out`): the new stream's id.
    pub fn send(&self, conn: &mut ClientConn, out: &mut Vec<u8>) -> Result<u32, h2::SendError> {
        let empty: &[u8] = &[];
        let mut hs: [(&[u8], &[u8]); MAX_HEADERS] = [(empty, empty); MAX_HEADERS];
        for (slot, (k, v)) in hs.iter_mut().zip(&self.headers) {
            *slot = (k.as_slice(), v.as_slice());
        }
        let req = h2::Request {
            method: &self.method,
            scheme: self.scheme,
            authority: &self.authority,
            path: &self.path,
            headers: &hs[..self.headers.len()],
            body: &self.body,
        };
        conn.send_request(&req, out)
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

/// One request in flight on a stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub stream: u32,
    /// When it was meant to be sent (corrected latency) and when it was (uncorrected).
    pub intended: Instant,
    pub sent: Instant,
    /// Its index in a session's batch (0 for URL runs).
    pub index: u32,
    /// This is the request's second go: the server refused its first unprocessed (GOAWAY,
    /// REFUSED_STREAM). Refused again, it fails.
    pub again: bool,
}

/// A request the server refused unprocessed, waiting to go again: when it was meant to go, and
/// its index in a session's batch (0 for URL runs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refused {
    pub intended: Instant,
    pub index: u32,
}

/// A user's HTTP/2 connection state.
pub(crate) struct H2Conn {
    pub conn: ClientConn,
    /// Frames to write, and how many of them are written.
    pub out: Vec<u8>,
    pub written: usize,
    /// Requests in flight.
    pub slots: Vec<Slot>,
    /// What the last read completed, handed out one per `feed` call from `next`.
    events: Vec<Outcome>,
    next: usize,
    /// The codec failed on the last read: reported once its earlier outcomes are taken.
    failed: bool,
    /// Capturing a session's reply: its body began (the head's blank line is written).
    in_body: bool,
}

impl H2Conn {
    pub fn new(streams: u32) -> H2Conn {
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
            slots: Vec::with_capacity(streams.min(1024) as usize),
            events: Vec::with_capacity(streams.min(1024) as usize),
            next: 0,
            failed: false,
            in_body: false,
        }
    }

    /// When the oldest request in flight was sent: its response deadline is the connection's.
    pub fn oldest_sent(&self) -> Option<Instant> {
        self.slots.iter().map(|s| s.sent).min()
    }

    /// Take the slot of `stream` out of the in-flight list.
    pub fn take(&mut self, stream: u32) -> Option<Slot> {
        let i = self.slots.iter().position(|s| s.stream == stream)?;
        Some(self.slots.swap_remove(i))
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

    /// The protocol's `feed` (the calling convention of proto.rs): the codec takes a whole read at once, so
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
        if let Some(&e) = self.events.get(self.next) {
            self.next += 1;
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
        let fed = self.conn.feed(input, &mut self.out, &mut |e| match e {
            h2::Event::Status { status, .. } => {
                *in_body = false;
                if let Some(cap) = capture.as_deref_mut().filter(|c| c.len() < CAPTURE_LIMIT) {
                    cap.extend_from_slice(b"HTTP/1.1 ");
                    cap.extend_from_slice(status.to_string().as_bytes());
                    cap.extend_from_slice(b" \r\n");
                }
            }
            h2::Event::Header { name, value, .. } => {
                if let Some(cap) = capture.as_deref_mut().filter(|c| c.len() < CAPTURE_LIMIT) {
                    if !*in_body && name.first() != Some(&b':') {
                        cap.extend_from_slice(name);
                        cap.extend_from_slice(b": ");
                        cap.extend_from_slice(value);
                        cap.extend_from_slice(b"\r\n");
                    }
                }
            }
            h2::Event::Data { data, .. } => {
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
                events.push(Outcome::Reply {
                    stream,
                    status: Some(status),
                    keep_alive: true,
                    ok: true,
                })
            }
            h2::Event::Reset { stream, code } => events.push(Outcome::Reset { stream, code }),
            h2::Event::GoAway { code, .. } => events.push(Outcome::GoAway { code }),
        });
        self.failed = fed.is_err();
        match self.events.first() {
            Some(&e) => {
                self.next = 1;
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
