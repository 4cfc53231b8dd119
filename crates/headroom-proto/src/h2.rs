//! HTTP/2 client connection codec (RFC 9113, HPACK RFC 7541), sans I/O.
//!
//! # What it does
//!
//! One [`ClientConn`] is one HTTP/2 connection seen from the client, without its socket. The
//! engine writes what [`ClientConn::new`] put in its output buffer (the preface, our SETTINGS and
//! a connection WINDOW_UPDATE), then alternates:
//!
//! * [`ClientConn::send_request`] while [`ClientConn::can_open`]: appends HEADERS (+
//!   CONTINUATION when the block exceeds the peer's frame size) and the body as DATA within the
//!   stream's and the connection's send windows. Body bytes that do not fit are copied into the
//!   stream (a buffer kept with its slot, so reused) and go out from a later
//!   [`ClientConn::feed`] once the server's WINDOW_UPDATE or SETTINGS opened the window.
//! * [`ClientConn::feed`] with whatever the socket produced, in pieces of any size: every byte is
//!   consumed; whole frames are handled straight from the input slice, and only a frame cut by
//!   the end of a read is copied into the connection (at most our max frame size + 9 bytes).
//!   Outcomes come through a callback as [`Event`]s that borrow the input: `Status`, each
//!   `Header`, `Data`, `Complete` (END_STREAM: the request is answered), `Reset` (the request
//!   failed with that code) and `GoAway`. What the protocol makes us answer (SETTINGS ACK, PING
//!   ACK, WINDOW_UPDATE, RST_STREAM for a stream error, GOAWAY for a connection error) is
//!   appended to `out`, which the caller flushes.
//!
//! Flow control works on both sides: we respect the peer's INITIAL_WINDOW_SIZE (a change adjusts
//! the open streams' windows, which may go negative) and WINDOW_UPDATEs (an overflow past 2^31-1
//! is a FLOW_CONTROL_ERROR); we advertise `initial_window_size` for each stream and for the
//! connection, and give received bytes back in one WINDOW_UPDATE once half a window is used.
//! Received DATA beyond a window is a FLOW_CONTROL_ERROR.
//!
//! Errors follow RFC 9113 §5.4: a stream error (a malformed response, a window overflow on a
//! stream...) writes RST_STREAM and reports `Event::Reset` with its code; a connection error
//! writes GOAWAY and returns [`ConnError`] (an error code and a static reason): the connection
//! is dead, and every later call returns the same error. A GOAWAY from the server reports
//! `Event::GoAway` and then a `Reset` with REFUSED_STREAM for each of our streams above its last
//! stream id (unprocessed: the caller may retry them elsewhere); streams at or below it finish
//! normally, and no new stream opens.
//!
//! # Bounds (hostile input never panics nor grows memory without bound)
//!
//! * A frame longer than the SETTINGS_MAX_FRAME_SIZE we advertised is a FRAME_SIZE_ERROR before
//!   any of its payload is buffered: the partial-frame buffer holds at most that + 9 bytes.
//! * A header block spread over CONTINUATION frames is bounded in bytes (the larger of
//!   `max_header_list_size` and our max frame size) and in frames ([`MAX_CONTINUATIONS`]):
//!   beyond either it is an ENHANCE_YOUR_CALM connection error (empty CONTINUATION floods).
//! * Decoded header lists are bounded by `max_header_list_size` (RFC 7541 §4.1 sizes): a larger
//!   response is decoded to its end (to keep HPACK in step) without reporting further headers,
//!   then reset as a PROTOCOL_ERROR stream error. The HPACK dynamic table is bounded by our
//!   SETTINGS_HEADER_TABLE_SIZE.
//! * Streams live in a slab sized by the most streams ever open at once (at most our cap);
//!   frames for streams we already closed are tolerated (HEADERS decoded and dropped, DATA
//!   counted against the connection window).
//! * The control frames the server makes us queue (PING and SETTINGS ACKs, WINDOW_UPDATE,
//!   RST_STREAM) are capped, as nghttp2 caps them (`max_outbound_ack`, default 1000, and
//!   `NGHTTP2_ERR_FLOODED`): a server that floods PINGs or SETTINGS and never reads would
//!   otherwise grow `out` without end (1.7 GB in 13 s, issue 26). [`ClientConn::feed`] counts
//!   those it appends to a non-empty `out`, and an empty `out` restarts the count: the caller
//!   empties `out` once all of it is written, so an empty `out` means everything queued before
//!   has gone. Past [`ClientConfig::max_outbound_ack`] it is an ENHANCE_YOUR_CALM connection
//!   error with [`ConnError::flood`] set. One read's worth of frames counts too (nghttp2 queues
//!   a whole `mem_recv` before it sends): no real server sends a thousand PINGs at once.
//!
//! # Memory and allocation
//!
//! In steady state nothing allocates: slots, their body buffers, the header-block buffer, the
//! HPACK scratch and tables are reused. Our requests are HPACK-encoded with incremental indexing
//! (see [`hpack`]), so a repeated request is a HEADERS frame of about one byte per field. A
//! connection holds no read buffer while idle unless a read ended inside a frame.
//!
//! # What it does not do
//!
//! No server side, no server push (we send ENABLE_PUSH=0; a PUSH_PROMISE is a PROTOCOL_ERROR),
//! no priorities (PRIORITY frames and the HEADERS priority fields are parsed and ignored), no
//! TLS or ALPN (the transport's job; h2c prior knowledge is just this codec over TCP), no
//! Huffman coding of what we send, no content-length checking of responses, no extended
//! CONNECT. Frames for an already closed stream are ignored rather than answered with
//! STREAM_CLOSED. Response header names are passed on as received (not checked for case).

mod frame;
pub mod hpack;
mod huffman;
mod recv;

use frame::{Head, HEADER_LEN, MAX_31};

/// HTTP/2 error codes (RFC 9113 §7).
pub mod error_code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const SETTINGS_TIMEOUT: u32 = 0x4;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const CONNECT_ERROR: u32 = 0xa;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
    pub const INADEQUATE_SECURITY: u32 = 0xc;
    pub const HTTP_1_1_REQUIRED: u32 = 0xd;
}
use error_code::*;

/// Most CONTINUATION frames accepted for one header block.
pub const MAX_CONTINUATIONS: u32 = 256;
/// Control frames queued for the server at most by default (nghttp2's `max_outbound_ack`).
pub const DEFAULT_MAX_OUTBOUND_ACK: u32 = 1000;
/// Streams assumed allowed before the server's first SETTINGS (RFC 9113 §6.5.2 recommends at
/// least 100).
pub const DEFAULT_PEER_MAX_STREAMS: u32 = 100;
/// The largest HPACK table our encoder keeps, whatever the server allows.
pub const ENCODER_TABLE_CAP: usize = 4096;

/// Our side of the connection's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Streams we open at most at once (`--streams`); the server's limit may be lower.
    pub max_concurrent_streams_cap: u32,
    /// Receive window we advertise for each stream and for the connection (clamped to
    /// 2^31-1). A load generator wants it large, so that the server never waits for us.
    pub initial_window_size: u32,
    /// Largest frame we accept (clamped to 16,384..=16,777,215); bounds the partial-frame buffer.
    pub max_frame_size: u32,
    /// HPACK dynamic table size the server may use for its responses.
    pub header_table_size: u32,
    /// Bound on a decoded response header list (RFC 7541 §4.1 sizes), also advertised.
    pub max_header_list_size: u32,
    /// Control frames (PING and SETTINGS ACKs, WINDOW_UPDATE, RST_STREAM) queued for the
    /// server at most while it does not read; one more is a flood (see the module notes).
    pub max_outbound_ack: u32,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            max_concurrent_streams_cap: 100,
            initial_window_size: 1 << 24,
            max_frame_size: frame::MIN_MAX_FRAME,
            header_table_size: 4096,
            max_header_list_size: 64 * 1024,
            max_outbound_ack: DEFAULT_MAX_OUTBOUND_ACK,
        }
    }
}

/// One request. Header names are sent lowercased; connection-specific headers (`connection`,
/// `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`, and `host`, which
/// `authority` replaces) are left out, as RFC 9113 §8.2.2 requires.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a [u8],
    pub scheme: &'a [u8],
    pub authority: &'a [u8],
    pub path: &'a [u8],
    pub headers: &'a [(&'a [u8], &'a [u8])],
    pub body: &'a [u8],
}

/// What [`ClientConn::feed`] reports, borrowing the bytes it was fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// The final response head began (1xx responses are skipped).
    Status { stream: u32, status: u16 },
    /// One response header (or trailer) field.
    Header {
        stream: u32,
        name: &'a [u8],
        value: &'a [u8],
    },
    /// Response body bytes (padding removed).
    Data { stream: u32, data: &'a [u8] },
    /// The response ended (END_STREAM): the request is answered.
    Complete { stream: u32, status: u16 },
    /// The stream failed: reset by the server with `code`, or by us for a stream error (we wrote
    /// the RST_STREAM), or refused by a GOAWAY (REFUSED_STREAM).
    Reset { stream: u32, code: u32 },
    /// The server is going away; `unprocessed` of our streams (those above `last_stream_id`)
    /// follow as `Reset` events with REFUSED_STREAM.
    GoAway {
        last_stream_id: u32,
        code: u32,
        unprocessed: u32,
    },
}

/// A connection error: the connection is dead (a GOAWAY with `code` was written if the RFC asks
/// for one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 connection error {code:#x}: {reason}")]
pub struct ConnError {
    pub code: u32,
    pub reason: &'static str,
    /// The server made us queue more control frames than [`ClientConfig::max_outbound_ack`]
    /// without reading them (code ENHANCE_YOUR_CALM): a flood, not a malformed frame.
    pub flood: bool,
}

/// Why [`ClientConn::send_request`] opened no stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("as many streams are open as the server or our cap allows")]
    ConcurrencyLimit,
    #[error("the connection is going away (GOAWAY sent or received)")]
    GoingAway,
    #[error("stream ids are exhausted on this connection")]
    IdsExhausted,
    #[error("the connection failed")]
    Closed,
}

fn conn_err(code: u32, reason: &'static str) -> ConnError {
    ConnError {
        code,
        reason,
        flood: false,
    }
}

fn proto(reason: &'static str) -> ConnError {
    conn_err(PROTOCOL_ERROR, reason)
}

fn frame_size(reason: &'static str) -> ConnError {
    conn_err(FRAME_SIZE_ERROR, reason)
}

/// Where a stream's response stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Recv {
    /// Waiting for the (final) response head.
    #[default]
    Head,
    /// Head received; DATA or trailers may follow.
    Body,
}

#[derive(Debug, Default)]
struct Stream {
    /// 0: a free slot.
    id: u32,
    recv: Recv,
    status: u16,
    /// May go negative after the peer lowers INITIAL_WINDOW_SIZE (RFC 9113 §6.9.2).
    send_window: i64,
    /// Bytes received since our last WINDOW_UPDATE for this stream.
    recv_pending: u32,
    /// Request body bytes still to send: `body[body_off..]` (the buffer is kept with the slot).
    body: Vec<u8>,
    body_off: usize,
}

/// A header block being collected over CONTINUATION frames.
#[derive(Debug, Clone, Copy)]
struct Cont {
    stream: u32,
    end_stream: bool,
    frames: u32,
}

/// A client HTTP/2 connection (see the module comment).
#[derive(Debug)]
pub struct ClientConn {
    cap: u32,
    our_window: u32,
    our_max_frame: u32,
    our_table_size: usize,
    max_header_list: usize,
    max_block: usize,

    got_settings: bool,
    settings_acked: bool,
    peer_max_streams: u32,
    peer_initial_window: u32,
    peer_max_frame: u32,

    conn_send_window: i64,
    conn_recv_pending: u32,

    streams: Vec<Stream>,
    open: u32,
    next_id: u32,

    cont: Option<Cont>,
    block: Vec<u8>,
    hdec: hpack::Decoder,
    henc: hpack::Encoder,
    enc_buf: Vec<u8>,
    name_buf: Vec<u8>,

    partial: Vec<u8>,
    goaway_recv: Option<(u32, u32)>,
    goaway_sent: bool,
    dead: Option<ConnError>,

    /// Control frames appended to a non-empty `out` (see the module notes), and the cap.
    queued_control: u32,
    max_control: u32,
}

impl ClientConn {
    /// A connection with our settings `cfg`; writes the client preface, our SETTINGS and a
    /// WINDOW_UPDATE enlarging the connection window to `cfg.initial_window_size`.
    pub fn new(cfg: &ClientConfig, out: &mut Vec<u8>) -> ClientConn {
        let our_window = cfg.initial_window_size.min(MAX_31);
        let our_max_frame = cfg
            .max_frame_size
            .clamp(frame::MIN_MAX_FRAME, frame::MAX_MAX_FRAME);
        out.extend_from_slice(frame::PREFACE);
        frame::write_settings(
            out,
            &[
                (frame::SETTINGS_HEADER_TABLE_SIZE, cfg.header_table_size),
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, our_window),
                (frame::SETTINGS_MAX_FRAME_SIZE, our_max_frame),
                (
                    frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                    cfg.max_header_list_size,
                ),
            ],
        );
        if our_window > frame::DEFAULT_WINDOW {
            frame::write_window_update(out, 0, our_window - frame::DEFAULT_WINDOW);
        }
        let our_table_size = cfg.header_table_size as usize;
        let max_header_list = cfg.max_header_list_size as usize;
        ClientConn {
            cap: cfg.max_concurrent_streams_cap,
            our_window,
            our_max_frame,
            our_table_size,
            max_header_list,
            max_block: max_header_list.max(our_max_frame as usize),
            got_settings: false,
            settings_acked: false,
            peer_max_streams: DEFAULT_PEER_MAX_STREAMS,
            peer_initial_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::MIN_MAX_FRAME,
            conn_send_window: i64::from(frame::DEFAULT_WINDOW),
            conn_recv_pending: 0,
            streams: Vec::new(),
            open: 0,
            next_id: 1,
            cont: None,
            block: Vec::new(),
            // Until the server acknowledges our SETTINGS it may assume the default 4,096.
            hdec: hpack::Decoder::new(our_table_size.max(4096)),
            henc: hpack::Encoder::new(ENCODER_TABLE_CAP),
            enc_buf: Vec::new(),
            name_buf: Vec::new(),
            partial: Vec::new(),
            goaway_recv: None,
            goaway_sent: false,
            dead: None,
            queued_control: 0,
            max_control: cfg.max_outbound_ack,
        }
    }

    /// Whether [`send_request`](Self::send_request) would open a stream now.
    pub fn can_open(&self) -> bool {
        self.dead.is_none()
            && self.goaway_recv.is_none()
            && !self.goaway_sent
            && self.next_id <= MAX_31
            && self.open < self.peer_max_streams.min(self.cap)
    }

    /// Streams opened and not yet completed or reset.
    pub fn open_streams(&self) -> u32 {
        self.open
    }

    /// The server's GOAWAY, if one came: (last stream id, error code).
    pub fn goaway(&self) -> Option<(u32, u32)> {
        self.goaway_recv
    }

    /// The connection error that killed this connection, if any.
    pub fn error(&self) -> Option<ConnError> {
        self.dead
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS came, `u32::MAX`
    /// when it set none).
    pub fn peer_max_concurrent_streams(&self) -> u32 {
        self.peer_max_streams
    }

    /// Opens a stream for `req`: appends its HEADERS (+ CONTINUATION) and as much of its body as
    /// the send windows allow to `out`, keeping the rest for later. Returns the stream id.
    pub fn send_request(&mut self, req: &Request<'_>, out: &mut Vec<u8>) -> Result<u32, SendError> {
        self.send_request_with(req, std::iter::empty(), out)
    }

    /// [`send_request`](Self::send_request) with more header fields after `req.headers`, taken
    /// one by one as they come: a caller that keeps its fields elsewhere (spans of an encoded
    /// request) sends them without gathering them into a slice first. As for `req.headers`,
    /// names are lower-cased and connection-specific fields (and `host`) dropped.
    pub fn send_request_with<'f>(
        &mut self,
        req: &Request<'_>,
        more: impl Iterator<Item = (&'f [u8], &'f [u8])>,
        out: &mut Vec<u8>,
    ) -> Result<u32, SendError> {
        if self.dead.is_some() {
            return Err(SendError::Closed);
        }
        if self.goaway_recv.is_some() || self.goaway_sent {
            return Err(SendError::GoingAway);
        }
        if self.next_id > MAX_31 {
            return Err(SendError::IdsExhausted);
        }
        if self.open >= self.peer_max_streams.min(self.cap) {
            return Err(SendError::ConcurrencyLimit);
        }
        let id = self.next_id;
        self.next_id += 2;

        let ClientConn {
            henc,
            enc_buf,
            name_buf,
            ..
        } = self;
        enc_buf.clear();
        henc.begin_block(enc_buf);
        henc.field(b":method", req.method, enc_buf);
        henc.field(b":scheme", req.scheme, enc_buf);
        henc.field(b":authority", req.authority, enc_buf);
        henc.field(b":path", req.path, enc_buf);
        let mut put = |name: &[u8], value: &[u8]| {
            name_buf.clear();
            name_buf.extend(name.iter().map(u8::to_ascii_lowercase));
            if !matches!(
                name_buf.as_slice(),
                b"connection"
                    | b"keep-alive"
                    | b"proxy-connection"
                    | b"transfer-encoding"
                    | b"upgrade"
                    | b"host"
            ) {
                henc.field(name_buf, value, enc_buf);
            }
        };
        for &(name, value) in req.headers {
            put(name, value);
        }
        for (name, value) in more {
            put(name, value);
        }
        frame::write_headers(
            out,
            id,
            enc_buf,
            req.body.is_empty(),
            self.peer_max_frame as usize,
        );

        let slot = match self.streams.iter().position(|s| s.id == 0) {
            Some(i) => i,
            None => {
                self.streams.push(Stream::default());
                self.streams.len() - 1
            }
        };
        let peer_max_frame = self.peer_max_frame as usize;
        let s = &mut self.streams[slot];
        s.id = id;
        s.recv = Recv::Head;
        s.status = 0;
        s.send_window = i64::from(self.peer_initial_window);
        s.recv_pending = 0;
        s.body.clear();
        s.body_off = 0;
        self.open += 1;
        if !req.body.is_empty() {
            let sent = send_data(
                out,
                id,
                req.body,
                &mut s.send_window,
                &mut self.conn_send_window,
                peer_max_frame,
            );
            s.body
                .extend_from_slice(req.body.get(sent..).unwrap_or_default());
        }
        Ok(id)
    }

    /// Resets one of our streams (RST_STREAM with `code`, e.g. CANCEL after a response timeout).
    /// No event is reported for it; later frames of the stream are ignored.
    pub fn reset(&mut self, stream: u32, code: u32, out: &mut Vec<u8>) {
        if let Some(i) = self.slot(stream) {
            frame::write_rst(out, stream, code);
            self.free(i);
        }
    }

    /// Says goodbye (GOAWAY with NO_ERROR): no new streams; open ones may still complete.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        if !self.goaway_sent && self.dead.is_none() {
            frame::write_goaway(out, 0, NO_ERROR);
            self.goaway_sent = true;
        }
    }

    /// Consumes all of `input` (bytes from the server), reporting through `on` and appending
    /// what must be sent to `out`. An `Err` is a connection error: the connection is dead.
    ///
    /// `out` is what is still to be written: the caller empties it only once all of it went
    /// to the server. The control frames the server makes us queue while `out` is not empty
    /// count against [`ClientConfig::max_outbound_ack`] (see the module notes).
    pub fn feed(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        if let Some(e) = self.dead {
            return Err(e);
        }
        if out.is_empty() {
            // All we queued before went out: the server reads.
            self.queued_control = 0;
        }
        match self.feed_frames(input, out, on) {
            Ok(()) => Ok(()),
            Err(e) => {
                // Streams are dead with the connection; we accept no server stream: last id 0.
                frame::write_goaway(out, 0, e.code);
                self.dead = Some(e);
                self.partial = Vec::new();
                Err(e)
            }
        }
    }

    fn feed_frames(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        while !input.is_empty() {
            if !self.partial.is_empty() {
                // Complete the frame cut by the previous read: its header first, then its payload.
                if self.partial.len() < HEADER_LEN {
                    let take = (HEADER_LEN - self.partial.len()).min(input.len());
                    self.partial.extend_from_slice(&input[..take]);
                    input = &input[take..];
                }
                let Some(head) = Head::parse(&self.partial) else {
                    return Ok(());
                };
                self.check_len(&head)?;
                let total = HEADER_LEN + head.len as usize;
                let take = (total - self.partial.len()).min(input.len());
                self.partial.extend_from_slice(&input[..take]);
                input = &input[take..];
                if self.partial.len() < total {
                    return Ok(());
                }
                let buf = std::mem::take(&mut self.partial);
                let r = self.frame(head, buf.get(HEADER_LEN..).unwrap_or_default(), out, on);
                self.partial = buf;
                self.partial.clear();
                r?;
                self.check_flood()?;
                continue;
            }
            let Some(head) = Head::parse(input) else {
                self.partial.extend_from_slice(input);
                return Ok(());
            };
            self.check_len(&head)?;
            let total = HEADER_LEN + head.len as usize;
            let Some(whole) = input.get(..total) else {
                self.partial.extend_from_slice(input);
                return Ok(());
            };
            self.frame(head, &whole[HEADER_LEN..], out, on)?;
            self.check_flood()?;
            input = &input[total..];
        }
        Ok(())
    }

    /// One control frame (an ACK, a WINDOW_UPDATE, a RST_STREAM) was queued for the server.
    fn queued_control(&mut self) {
        self.queued_control = self.queued_control.saturating_add(1);
    }

    /// More control frames wait for a server that does not read than the cap allows.
    fn check_flood(&self) -> Result<(), ConnError> {
        if self.queued_control > self.max_control {
            return Err(ConnError {
                code: ENHANCE_YOUR_CALM,
                reason: "flood: more control frames queued than the server reads",
                flood: true,
            });
        }
        Ok(())
    }

    fn check_len(&self, head: &Head) -> Result<(), ConnError> {
        if head.len > self.our_max_frame {
            return Err(frame_size("frame larger than our SETTINGS_MAX_FRAME_SIZE"));
        }
        Ok(())
    }

    fn slot(&self, id: u32) -> Option<usize> {
        if id == 0 {
            return None;
        }
        self.streams.iter().position(|s| s.id == id)
    }

    /// Whether `id` is a stream we never opened (as opposed to one we opened and closed).
    fn is_idle(&self, id: u32) -> bool {
        id.is_multiple_of(2) || id >= self.next_id
    }

    fn free(&mut self, i: usize) {
        if let Some(s) = self.streams.get_mut(i) {
            if s.id != 0 {
                s.id = 0;
                s.body.clear();
                s.body_off = 0;
                self.open = self.open.saturating_sub(1);
            }
        }
    }

    /// Sends the request bodies that wait for window, as far as the windows now allow.
    fn flush_bodies(&mut self, out: &mut Vec<u8>) {
        let max_frame = self.peer_max_frame as usize;
        for s in self.streams.iter_mut() {
            if self.conn_send_window <= 0 {
                break;
            }
            if s.id == 0 || s.body_off >= s.body.len() {
                continue;
            }
            let rest = s.body.get(s.body_off..).unwrap_or_default();
            let sent = send_data(
                out,
                s.id,
                rest,
                &mut s.send_window,
                &mut self.conn_send_window,
                max_frame,
            );
            s.body_off += sent;
            if s.body_off >= s.body.len() {
                s.body.clear();
                s.body_off = 0;
            }
        }
    }
}

/// Appends DATA frames for as much of `data` as the windows and the frame size allow, with
/// END_STREAM on the frame that carries its last byte. Returns the bytes sent.
fn send_data(
    out: &mut Vec<u8>,
    stream: u32,
    data: &[u8],
    stream_window: &mut i64,
    conn_window: &mut i64,
    max_frame: usize,
) -> usize {
    let mut sent = 0;
    // Each round sends at least one byte or stops: bounded by `data.len()`.
    while sent < data.len() {
        let allowed = (*stream_window).min(*conn_window).max(0) as usize;
        let n = (data.len() - sent).min(allowed).min(max_frame);
        if n == 0 {
            break;
        }
        let end = sent + n == data.len();
        frame::write_data(out, stream, &data[sent..sent + n], end);
        *stream_window -= n as i64;
        *conn_window -= n as i64;
        sent += n;
    }
    sent
}

#[cfg(test)]
mod tests;
