//! The protocol above a connection, as the worker sees it: one calling convention for every
//! protocol headroom speaks, whatever transport (plain TCP or TLS) carries it.
//!
//! Each protocol is sans-I/O and follows the same three rules, as the codecs in
//! `headroom-proto` already do:
//! - **encode** into an output buffer: a request into the session's or the run's batch
//!   (`headroom_proto::http1::Batch`: the bytes HTTP/1.1 writes, and the parts of each request,
//!   which HTTP/2 sends as a stream's fields and the browser builds its hops from: nothing
//!   re-reads what headroom encoded), and the protocol's own bytes (login steps, pongs,
//!   SETTINGS acks, window updates) into [`Protocol::out`], which the worker writes whenever no
//!   request is half written;
//! - **feed** received bytes: [`feed`] takes what the socket gave and returns how much it used
//!   and at most one [`Outcome`]; the worker calls it again with the rest until it returns
//!   `(0, None)`;
//! - **outcomes**: the setup is [`Outcome::Ready`], a [`Outcome::Reply`] completed (with its
//!   status, whether the connection may be reused, and whether it was an error reply), the server
//!   ended the session ([`Outcome::Closed`]), bytes came that nobody asked for
//!   ([`Outcome::Unexpected`]), HTTP/2's stream resets and GOAWAY; or an error kind, after which
//!   the connection is unusable.
//!
//! The worker therefore has one read path, one write path for protocol bytes and one place that
//! acts on outcomes. It never asks *which* protocol a connection speaks, only what it can do:
//! - sending: [`Protocol::frames_requests`] (requests go as the protocol's own frames through
//!   [`Protocol::submit`], or as the encoded bytes themselves), [`Protocol::can_open`] and
//!   [`Protocol::open`] (another request as a stream of its own, up to
//!   [`Protocol::capacity`]),
//!   [`Protocol::urgent`] (its own bytes go at once), [`Protocol::going_away`];
//! - the requests in flight: every protocol's are entries of the user's one table
//!   (`flight.rs`); streams are settled by id, the others answer in order (the oldest entry).
//!   The table is topped up by one policy per run (`flight::Refill`): a batch when it is
//!   empty (HTTP/1.1's pipeline, sessions, links, raw TCP, hops) or per reply (HTTP/2 streams
//!   of the run's one request); every request takes its quota when committed, whatever the
//!   protocol;
//! - replies: [`Protocol::captured`] (the head the browser reads: cookies, `Location`, a challenge);
//! - the end: [`eof`] (what the server's close means), [`Protocol::stateless`] (a request that
//!   found the connection closed may go again), [`Protocol::release`].
//!
//! Adding a protocol is one module behind this interface (a sans-I/O codec in `headroom-proto`,
//! its connection state here or in `link.rs`) and one variant of [`Protocol`] with its answers to
//! the questions above; the worker does not change. The links entered so (XMPP, PostgreSQL,
//! WebSocket, MQTT: `link.rs`, one `Link` variant each), as did HTTP/2.

use headroom_core::{ErrorKind, ProtoCounter};
use headroom_metrics::Counters;
use headroom_proto::http1::{Captured, Decoded, Parts, ResponseDecoder};
use headroom_proto::raw;

use crate::http2::H2Conn;
use crate::link::{self, Link};
use crate::session::{Awaiting, Program, SessionState};

pub(crate) use crate::outcome::{count_encoded, Outcome, CAPTURE_LIMIT};

/// The protocol state of one connection.
pub(crate) enum Protocol {
    /// HTTP/1.1 (the user's response decoder) and raw TCP (the session's reply matcher): both
    /// keep their state on the user, because it outlives a connection's setup.
    Plain,
    /// XMPP, PostgreSQL, WebSocket: a setup, then requests and unasked server traffic.
    Link(Box<Link>),
    /// HTTP/2: a connection's codec and its streams in flight.
    H2(Box<H2Conn>),
}

impl Protocol {
    /// Reads whatever the user's state: the server speaks unasked (presence, chats, pings,
    /// SETTINGS), so every byte goes through the protocol's decoder. Plain HTTP reads only while
    /// a reply is awaited or the connection idles.
    pub fn reads_always(&self) -> bool {
        !matches!(self, Protocol::Plain)
    }

    /// The protocol's own bytes still to write, and how many of them are written.
    pub fn out(&mut self) -> Option<(&mut Vec<u8>, &mut usize)> {
        match self {
            Protocol::Plain => None,
            Protocol::Link(l) => Some((&mut l.out, &mut l.written)),
            Protocol::H2(h) => Some((&mut h.out, &mut h.written)),
        }
    }

    /// Bytes of [`Protocol::out`] are waiting.
    pub fn pending(&self) -> bool {
        match self {
            Protocol::Plain => false,
            Protocol::Link(l) => l.pending(),
            Protocol::H2(h) => h.written < h.out.len(),
        }
    }

    /// Outcomes of an earlier `feed` are still to be taken (HTTP/2 reports all a read completed
    /// at once, and hands them out one per call).
    pub fn queued(&self) -> bool {
        match self {
            Protocol::H2(h) => h.queued(),
            Protocol::Link(l) => l.queued(),
            Protocol::Plain => false,
        }
    }

    /// The connection carries nothing but the requests (no setup, no streams, no session
    /// state): a request that found it closed by the server may go again on a new one.
    pub fn stateless(&self) -> bool {
        matches!(self, Protocol::Plain)
    }

    /// Requests go as the protocol's own frames (HTTP/2 streams), not as the bytes the
    /// session or the run encoded: [`submit`](Protocol::submit) takes them.
    pub fn frames_requests(&self) -> bool {
        matches!(self, Protocol::H2(_))
    }

    /// How many requests may be in flight on this connection at once: HTTP/2 the streams the
    /// run asked for (`--streams`; a session's batch up to its own bound), the server's limit
    /// below that is [`Protocol::can_open`]'s; 1 for the protocols that answer in order (an
    /// HTTP/1.1 pipeline is one batch of them, sent whole).
    pub fn capacity(&self) -> usize {
        match self {
            Protocol::H2(h) => h.streams as usize,
            _ => 1,
        }
    }

    /// Another request may open a stream of its own on this connection now (below the
    /// server's limit, no GOAWAY); false for protocols that answer in order.
    pub fn can_open(&self) -> bool {
        match self {
            Protocol::H2(h) => h.conn.can_open(),
            _ => false,
        }
    }

    /// The server said it is going away (HTTP/2 GOAWAY): no new stream will be opened.
    pub fn going_away(&self) -> bool {
        match self {
            Protocol::H2(h) => h.conn.goaway().is_some(),
            _ => false,
        }
    }

    /// Opens a stream for `req` (the run's request, with the user's cookies): its id.
    pub fn open(&mut self, req: Parts<'_>, cookie: Option<&[u8]>) -> Option<u32> {
        match self {
            Protocol::H2(h) => {
                crate::http2::send(&mut h.conn, &mut h.out, req, h.scheme, cookie).ok()
            }
            _ => None,
        }
    }

    /// Sends `requests` (a batch's, read from the parts their encoder kept) as the protocol's
    /// own requests, those `pick` chooses by their index; `opened` gets each one's index and
    /// stream. An error kind if one could not be opened.
    pub fn submit<'r>(
        &mut self,
        requests: impl Iterator<Item = Parts<'r>>,
        pick: &dyn Fn(usize) -> bool,
        opened: &mut dyn FnMut(usize, u32),
    ) -> Result<(), ErrorKind> {
        match self {
            Protocol::H2(h) => {
                let (conn, out) = (&mut h.conn, &mut h.out);
                crate::http2::send_parts(conn, out, requests, h.scheme, pick, opened)
            }
            _ => Err(ErrorKind::Other),
        }
    }

    pub fn link(&self) -> Option<&Link> {
        match self {
            Protocol::Link(l) => Some(l),
            _ => None,
        }
    }

    pub fn link_mut(&mut self) -> Option<&mut Link> {
        match self {
            Protocol::Link(l) => Some(l),
            _ => None,
        }
    }

    /// Bytes of [`Protocol::out`] should go at once, not at the end of the read: a link's
    /// answers (a pong, a login step); HTTP/2's frames wait for the requests the read makes
    /// room for, to go in one write.
    pub fn urgent(&self) -> bool {
        match self {
            Protocol::Link(l) => l.pending(),
            _ => false,
        }
    }

    /// The connection is closed: give back what the protocol holds beyond it (a link's
    /// shared XMPP state). Leaves no protocol state behind.
    pub fn release(&mut self, xmpp: Option<&crate::link::XmppShared>) {
        if let Protocol::Link(mut link) = std::mem::replace(self, Protocol::Plain) {
            link.release(xmpp);
        }
    }

    /// The captured head of the reply the last `feed` completed (cookies, a redirect's
    /// `Location`, a challenge), and how many `Set-Cookie`s were too big to keep: HTTP/2 keeps
    /// one per stream, HTTP/1.1 the user's decoder the last one.
    pub fn captured<'a>(&'a self, decoder: &'a ResponseDecoder) -> (Captured<'a>, u32) {
        match self {
            Protocol::H2(h) => h.captured(),
            _ => (decoder.captured(), decoder.cookies_dropped()),
        }
    }

    /// A close was sent on a link: the connection ends once it is answered.
    pub fn closing(&self) -> bool {
        self.link().is_some_and(|l| l.closing)
    }
}

/// The user state `feed` needs besides the protocol's own.
pub(crate) struct FeedCx<'a> {
    pub decoder: &'a mut ResponseDecoder,
    pub sess: Option<&'a mut SessionState>,
    /// A reply is awaited (the user is reading).
    pub reading: bool,
    pub program: Option<&'a Program>,
    pub counters: &'a mut Counters,
    /// The run's per-name figures (a link records latencies it measures itself there).
    pub names: &'a mut [headroom_metrics::NameStats],
}

/// Takes bytes from the server: how many were used and what completed, if anything. Call again
/// with the rest; `(0, None)` means the protocol needs more bytes. An error means the
/// connection is unusable.
pub(crate) fn feed(
    proto: &mut Protocol,
    cx: FeedCx<'_>,
    buf: &[u8],
) -> Result<(usize, Option<Outcome>), ErrorKind> {
    match proto {
        Protocol::Plain => feed_plain(cx, buf),
        Protocol::Link(l) => {
            if buf.is_empty() && !l.queued() {
                return Ok((0, None));
            }
            let Some(prog) = cx.program else {
                return Err(ErrorKind::Other);
            };
            let (used, o) = l.feed(&prog.w.link, prog.xmpp.as_ref(), buf, cx.counters, cx.names)?;
            if let (Some(link::Outcome::Reply { .. }), Some(st)) =
                (o, cx.sess.filter(|st| st.capture))
            {
                // A WebSocket reply a later extract or match reads: its message, whole.
                st.reply.clear();
                let p = l.ws_payload();
                st.reply.extend_from_slice(&p[..p.len().min(CAPTURE_LIMIT)]);
            }
            let o = o.map(|o| match o {
                link::Outcome::Ready => Outcome::Ready,
                link::Outcome::Reply { ok } => Outcome::Reply {
                    stream: 0,
                    status: None,
                    keep_alive: true,
                    ok,
                },
                link::Outcome::Closed => Outcome::Closed,
                link::Outcome::StartTls => Outcome::StartTls,
            });
            Ok((used, o))
        }
        Protocol::H2(h) => {
            let capture = cx.sess.filter(|st| st.capture).map(|st| &mut st.reply);
            h.feed(buf, cx.counters, capture)
        }
    }
}

/// HTTP/1.1 responses, or a raw reply as the session's matcher delimits it.
fn feed_plain(cx: FeedCx<'_>, buf: &[u8]) -> Result<(usize, Option<Outcome>), ErrorKind> {
    if buf.is_empty() {
        return Ok((0, None));
    }
    if !cx.reading {
        // A stray CRLF after a body is a known server quirk, not an error.
        if buf.iter().all(|&b| b == b'\r' || b == b'\n') {
            return Ok((buf.len(), None));
        }
        return Ok((buf.len(), Some(Outcome::Unexpected)));
    }
    let mut sess = cx.sess;
    if let Some(st) = sess.as_deref_mut() {
        if let Awaiting::Raw { session, pc } = st.awaiting {
            let Some(expect) = cx.program.and_then(|p| p.expect(session, pc)) else {
                return Ok((0, None));
            };
            return match st.raw.feed(expect, buf) {
                Ok((used, progress)) => {
                    if st.capture && st.reply.len() < CAPTURE_LIMIT {
                        st.reply.extend_from_slice(&buf[..used]);
                    }
                    let done = matches!(progress, raw::Progress::Complete(_));
                    Ok((used, done.then_some(reply(None, true))))
                }
                Err(_) => {
                    st.raw.reset();
                    Err(ErrorKind::Protocol)
                }
            };
        }
    }
    let (used, d) = cx.decoder.decode(buf).map_err(|_| ErrorKind::Protocol)?;
    if let Some(st) = sess {
        if st.capture && st.reply.len() < CAPTURE_LIMIT {
            st.reply.extend_from_slice(&buf[..used]);
        }
    }
    Ok(match d {
        Decoded::NeedMore => (used, None),
        Decoded::Complete(meta) => {
            // `--compressed` only (the decoder decodes bodies when it captures
            // Content-Encoding); otherwise one branch on an absent capture box.
            if let Some(s) = cx.decoder.content() {
                count_encoded(cx.counters, s)?;
            }
            (used, Some(reply(Some(meta.status), meta.keep_alive)))
        }
    })
}

fn reply(status: Option<u16>, keep_alive: bool) -> Outcome {
    Outcome::Reply {
        stream: 0,
        status,
        keep_alive,
        ok: true,
    }
}

/// The server closed a plain connection while a reply was awaited: the reply that completes by
/// the close (an HTTP body delimited by it), or the error.
fn eof_plain(
    decoder: &mut ResponseDecoder,
    sess: Option<&mut SessionState>,
) -> Result<Outcome, ErrorKind> {
    if let Some(st) = sess {
        if matches!(st.awaiting, Awaiting::Raw { .. }) {
            // A raw reply ends only as its matcher says: a close before that fails it.
            st.raw.reset();
            return Err(ErrorKind::Closed);
        }
    }
    match decoder.eof() {
        Ok(Some(meta)) => Ok(reply(Some(meta.status), false)),
        _ => Err(ErrorKind::Closed),
    }
}

/// What the server's close of a connection means.
pub(crate) enum Eof {
    /// It completed the awaited reply (an HTTP/1.1 body delimited by the close).
    Reply(Outcome),
    /// The request(s) in flight failed with this kind.
    Failed(ErrorKind),
    /// A link's close: what it means depends on whether the link said goodbye (`link_eof`).
    Link,
    /// Nothing was in flight: an idle or keep-alive timeout, not a failure. `go_on`: the user
    /// may be between requests without a timer (a connection of streams idles so): it goes on.
    Idle { go_on: bool },
}

/// The server closed the connection; `in_flight`: streams were in flight on it.
pub(crate) fn eof(proto: &Protocol, cx: FeedCx<'_>, in_flight: bool) -> Eof {
    match proto {
        Protocol::Link(_) => Eof::Link,
        Protocol::H2(_) if in_flight => Eof::Failed(ErrorKind::Closed),
        Protocol::H2(_) => Eof::Idle { go_on: true },
        Protocol::Plain if !cx.reading => Eof::Idle { go_on: false },
        Protocol::Plain => match eof_plain(cx.decoder, cx.sess) {
            Ok(o) => Eof::Reply(o),
            Err(kind) => Eof::Failed(kind),
        },
    }
}

/// Count an HTTP/2 reset of `code` (and a failed request when it ended one in flight).
pub(crate) fn count_reset(c: &mut Counters, code: u32, in_flight: bool) {
    if in_flight {
        c.error(ErrorKind::StreamReset);
    }
    c.proto(ProtoCounter::h2_rst(code), 1);
}
