//! WebSocket client codec (RFC 6455), sans I/O: the opening handshake, frame encoding with client
//! masking, and an incremental frame decoder that reassembles messages.
//!
//! # How the engine is meant to use it
//!
//! One connection (one virtual user) holds a [`HandshakeDecoder`] while it upgrades, then a
//! [`FrameDecoder`] for the rest of its life; both are fed whatever bytes the socket produced, in
//! pieces of any size, and say how many bytes they consumed, like
//! [`http1::ResponseDecoder`](crate::http1::ResponseDecoder):
//!
//! 1. **Upgrade.** Take 16 random bytes from the worker's RNG as the key, append the request
//!    with [`encode_handshake`] to the connection's write buffer, and make a
//!    `HandshakeDecoder::new(&key)`. Feed it reads until it returns
//!    [`Handshake::Done`]; the bytes it did not consume (a server may send frames right behind
//!    its `101`) belong to the frame decoder. A refusal comes back as
//!    [`WsError::HandshakeStatus`] with the HTTP status, every other mismatch as its own
//!    [`WsError`] variant. The decoder copies nothing when the response head arrives in one
//!    read, and otherwise buffers at most [`MAX_HANDSHAKE_LEN`] bytes, freed once done.
//! 2. **Send.** [`encode_message`] appends a text or binary message (in one frame, or in N frames
//!    when asked) to a reused `Vec<u8>`, masking the payload while copying it with keys drawn
//!    from a closure (the worker's RNG; RFC 6455 wants a fresh key per frame). For payloads built
//!    in place, [`encode_frame_header`] + [`apply_mask`]. Nothing allocates beyond the growth of
//!    the caller's buffer.
//! 3. **Receive.** Loop [`FrameDecoder::decode`] over each read until it returns
//!    [`Decoded::NeedMore`] (which always consumes the whole slice). It reports
//!    * [`Decoded::Message`] — a complete message (kind, length, frame count): count it, and
//!      complete the request/reply the user is waiting for, if any. Data payloads are counted,
//!      not buffered, unless [`FrameDecoder::set_keep_payload`] asked for them (for a scenario's
//!      match/extract); then [`FrameDecoder::payload`] holds the message until the next call.
//!    * [`Decoded::Ping`] — answer with [`encode_pong`] of [`FrameDecoder::control_payload`];
//!    * [`Decoded::Pong`] — count it (an answer to our ping: its round trip is a latency);
//!    * [`Decoded::Close`] — answer with [`encode_close`] (echoing the code, RFC 6455 §5.5.1),
//!      then close the socket once the write is out. The decoder refuses bytes after it.
//! 4. **Fail.** An `Err` is a fixed enum (counted without allocating); [`WsError::close_code`] is
//!    the status to send in our close frame before dropping the connection (1002 protocol
//!    error, 1007 invalid UTF-8, 1009 too big). [`FrameDecoder::eof`] tells a clean end (a
//!    close frame was received) from a dropped connection.
//!
//! Control frames may arrive between the fragments of a message; the decoder reports them at
//! once and goes on reassembling the message.
//!
//! # Memory
//!
//! A [`FrameDecoder`] is about 200 bytes: a few scalars, a 125-byte array for the last control
//! payload (so answering a ping never allocates) and an empty `Vec` that only fills when payloads
//! are kept, bounded by the maximum message size ([`DEFAULT_MAX_MESSAGE`] unless set). Text is
//! validated as UTF-8 incrementally as it streams by, so validation needs no buffer either; an
//! invalid byte fails the message at once rather than at its end.
//!
//! # Robustness
//!
//! Bytes from the network never panic the codec: slicing goes through `get`, length arithmetic
//! is checked, and `fuzz/fuzz_targets/ws_frames.rs` feeds arbitrary streams in arbitrary pieces
//! to both decoders, checking that a split stream decodes exactly as the same bytes in one piece.

use base64::Engine as _;
use sha1::{Digest as _, Sha1};

/// The GUID of RFC 6455 §1.3, appended to the key before hashing.
pub const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// Largest handshake response head accepted (status line, headers, empty line), in bytes.
pub const MAX_HANDSHAKE_LEN: usize = 16 * 1024;
/// Largest control frame payload (RFC 6455 §5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;
/// Largest message (sum of its fragments) a [`FrameDecoder`] accepts unless told otherwise.
pub const DEFAULT_MAX_MESSAGE: u64 = 16 * 1024 * 1024;
/// A kept-payload buffer whose capacity grew beyond this is freed when the next message starts.
pub const RETAINED_CAPACITY: usize = 64 * 1024;

/// Frame opcodes (RFC 6455 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Opcode {
    Continuation = 0x0,
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xA,
}

impl Opcode {
    /// The opcode of a 4-bit value, `None` for the reserved ones.
    pub fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    /// Close, ping and pong.
    pub fn is_control(self) -> bool {
        (self as u8) & 0x8 != 0
    }
}

/// The two kinds of data message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Text,
    Binary,
}

impl MessageKind {
    fn opcode(self) -> Opcode {
        match self {
            MessageKind::Text => Opcode::Text,
            MessageKind::Binary => Opcode::Binary,
        }
    }
}

/// Everything that can go wrong, as a fixed enum (counted by the engine without allocating).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WsError {
    #[error("invalid HTTP response to the WebSocket upgrade")]
    HandshakeBadHead,
    #[error("WebSocket handshake response larger than the limit")]
    HandshakeTooLarge,
    #[error("WebSocket upgrade refused with HTTP status {0}")]
    HandshakeStatus(u16),
    #[error("handshake response lacks `Upgrade: websocket`")]
    HandshakeNoUpgrade,
    #[error("handshake response lacks `Connection: Upgrade`")]
    HandshakeNoConnection,
    #[error("handshake response has a missing or wrong Sec-WebSocket-Accept")]
    HandshakeBadAccept,
    #[error("handshake response selects a subprotocol that was not offered")]
    HandshakeProtocol,
    #[error("handshake response enables an extension (none is supported)")]
    HandshakeExtension,
    #[error("server frame is masked")]
    MaskedFrame,
    #[error("frame sets reserved bits (no extension was negotiated)")]
    ReservedBits,
    #[error("frame has reserved opcode {0:#x}")]
    BadOpcode(u8),
    #[error("control frame is fragmented")]
    FragmentedControl,
    #[error("control frame payload longer than 125 bytes")]
    ControlTooLong,
    #[error("continuation frame outside a fragmented message")]
    UnexpectedContinuation,
    #[error("new data frame inside a fragmented message")]
    ExpectedContinuation,
    #[error("frame length has its most significant bit set")]
    BadLength,
    #[error("message larger than the limit")]
    MessageTooLarge,
    #[error("text message is not valid UTF-8")]
    InvalidUtf8,
    #[error("close frame payload is malformed (1 byte, or a reason that is not UTF-8)")]
    BadClosePayload,
    #[error("close frame carries invalid status code {0}")]
    BadCloseCode(u16),
    #[error("bytes received after the close frame")]
    DataAfterClose,
    #[error("connection closed in the middle of a frame or message")]
    Incomplete,
    #[error("connection closed without a close frame")]
    NoClose,
}

impl WsError {
    /// The status code to put in our close frame when failing the connection because of this
    /// error (RFC 6455 §7.4.1): 1007 for invalid UTF-8, 1009 for a message too big, 1002
    /// (protocol error) otherwise. Meaningless for handshake errors (there is no WebSocket yet).
    pub fn close_code(self) -> u16 {
        match self {
            WsError::InvalidUtf8 => 1007,
            WsError::MessageTooLarge => 1009,
            _ => 1002,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handshake

/// The `Sec-WebSocket-Key` value for 16 random bytes: their base64 (24 ASCII bytes).
pub fn encode_key(key: &[u8; 16]) -> [u8; 24] {
    let mut out = [0u8; 24];
    // 16 bytes always encode to exactly 24: the call cannot fail.
    let _ = base64::engine::general_purpose::STANDARD.encode_slice(key, &mut out);
    out
}

/// The `Sec-WebSocket-Accept` value a server must answer to `key_b64` (the key as sent):
/// base64(SHA-1(key + GUID)), 28 ASCII bytes.
pub fn accept_for(key_b64: &[u8]) -> [u8; 28] {
    let mut sha = Sha1::new();
    sha.update(key_b64);
    sha.update(GUID.as_bytes());
    let digest = sha.finalize();
    let mut out = [0u8; 28];
    let _ = base64::engine::general_purpose::STANDARD.encode_slice(digest, &mut out);
    out
}

/// Appends the opening handshake (RFC 6455 §4.1) to `out`.
///
/// Writes `GET path HTTP/1.1`, `Host`, `Upgrade: websocket`, `Connection: Upgrade`,
/// `Sec-WebSocket-Key` (from `key`, 16 random bytes), `Sec-WebSocket-Version: 13`,
/// `Sec-WebSocket-Protocol: protocol` when given (one name or a comma-separated list), then the
/// caller's `headers` in order (Origin, Cookie, Authorization...) and the empty line. An empty
/// path is sent as `/`. Names and values are written as given (rejecting CR/LF is the scenario
/// validator's job). Offering an extension through `headers` makes the handshake fail if the
/// server accepts it ([`WsError::HandshakeExtension`]): frames with RSV bits cannot be decoded.
pub fn encode_handshake<'a, H>(
    host: &str,
    path: &str,
    protocol: Option<&str>,
    headers: H,
    key: &[u8; 16],
    out: &mut Vec<u8>,
) where
    H: IntoIterator<Item = (&'a str, &'a str)>,
{
    let path = if path.is_empty() { "/" } else { path };
    out.reserve(160 + host.len() + path.len());
    out.extend_from_slice(b"GET ");
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ");
    out.extend_from_slice(&encode_key(key));
    out.extend_from_slice(b"\r\nSec-WebSocket-Version: 13\r\n");
    if let Some(p) = protocol {
        out.extend_from_slice(b"Sec-WebSocket-Protocol: ");
        out.extend_from_slice(p.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Progress of [`HandshakeDecoder::decode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// All input consumed, the response head is not complete yet.
    NeedMore,
    /// The server accepted the upgrade; the bytes after the consumed count are frames.
    Done(HandshakeMeta),
}

/// What an accepted handshake told us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeMeta {
    /// Bytes of the response head (status line through the empty line).
    pub head_len: usize,
    /// The subprotocol the server selected, as an index into the offered comma-separated list;
    /// `None` when it selected none.
    pub protocol: Option<u8>,
}

/// Checks the server's answer to [`encode_handshake`], fed in pieces of any size.
#[derive(Debug, Clone)]
pub struct HandshakeDecoder {
    /// The part of the head received so far, when it arrived split; freed once done.
    buf: Vec<u8>,
    accept: [u8; 28],
    /// Set once the server accepted.
    done: Option<HandshakeMeta>,
}

impl HandshakeDecoder {
    /// A decoder expecting the answer to the handshake sent with `key`.
    pub fn new(key: &[u8; 16]) -> Self {
        HandshakeDecoder {
            buf: Vec::new(),
            accept: accept_for(&encode_key(key)),
            done: None,
        }
    }

    /// Feed bytes. `offered` is the `protocol` given to [`encode_handshake`] (to check the
    /// server's choice against).
    ///
    /// Returns how many bytes were consumed: all of them with `NeedMore`, exactly the head with
    /// `Done` (the rest are frames). A response other than `101` is
    /// [`WsError::HandshakeStatus`] as soon as its head is complete (its body is not read).
    /// Calling again after `Done` consumes nothing and returns `Done` again. After an `Err`
    /// the decoder's state is unspecified: the connection is to be dropped.
    pub fn decode(
        &mut self,
        input: &[u8],
        offered: Option<&str>,
    ) -> Result<(usize, Handshake), WsError> {
        if let Some(meta) = self.done {
            return Ok((0, Handshake::Done(meta)));
        }
        if self.buf.is_empty() {
            // Fast path: the whole head is in this input; parse it in place.
            if let Some(end) = head_end(input, 0) {
                if end > MAX_HANDSHAKE_LEN {
                    return Err(WsError::HandshakeTooLarge);
                }
                let head = input.get(..end).unwrap_or_default();
                let meta = check_response(head, &self.accept, offered)?;
                self.done = Some(meta);
                return Ok((end, Handshake::Done(meta)));
            }
            if input.len() >= MAX_HANDSHAKE_LEN {
                return Err(WsError::HandshakeTooLarge);
            }
            self.buf.extend_from_slice(input);
            return Ok((input.len(), Handshake::NeedMore));
        }
        let before = self.buf.len();
        let room = MAX_HANDSHAKE_LEN.saturating_sub(before);
        let piece = input.get(..input.len().min(room)).unwrap_or_default();
        self.buf.extend_from_slice(piece);
        match head_end(&self.buf, before) {
            Some(end) => {
                self.buf.truncate(end);
                let result = check_response(&self.buf, &self.accept, offered);
                self.buf = Vec::new();
                let meta = result?;
                self.done = Some(meta);
                Ok((end.saturating_sub(before), Handshake::Done(meta)))
            }
            None if self.buf.len() >= MAX_HANDSHAKE_LEN => Err(WsError::HandshakeTooLarge),
            None => Ok((input.len(), Handshake::NeedMore)),
        }
    }

    /// Part of a response head has been received and the handshake is not done.
    pub fn in_progress(&self) -> bool {
        self.done.is_none() && !self.buf.is_empty()
    }

    /// The handshake succeeded.
    pub fn is_done(&self) -> bool {
        self.done.is_some()
    }
}

/// The end (exclusive) of the first empty line (`\n\n` or `\n\r\n`) whose final LF is at or
/// after `from`: the length of a response head, or `None` if it is not complete.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.max(1);
    let tail = buf.get(start..)?;
    for (j, &b) in tail.iter().enumerate() {
        if b != b'\n' {
            continue;
        }
        let i = start + j;
        let prev = buf.get(i - 1).copied();
        let prev2 = i.checked_sub(2).and_then(|k| buf.get(k)).copied();
        if prev == Some(b'\n') || (prev == Some(b'\r') && prev2 == Some(b'\n')) {
            return Some(i + 1);
        }
    }
    None
}

/// Checks a complete response head against RFC 6455 §4.1 (the client's requirements).
fn check_response(
    head: &[u8],
    accept: &[u8; 28],
    offered: Option<&str>,
) -> Result<HandshakeMeta, WsError> {
    let mut headers = [httparse::EMPTY_HEADER; crate::http1::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Err(httparse::Error::TooManyHeaders) => return Err(WsError::HandshakeTooLarge),
        _ => return Err(WsError::HandshakeBadHead),
    }
    let (Some(code), Some(1)) = (resp.code, resp.version) else {
        return Err(WsError::HandshakeBadHead);
    };
    if code != 101 {
        return Err(WsError::HandshakeStatus(code));
    }
    let mut upgrade = false;
    let mut connection = false;
    let mut accepts = 0u32;
    let mut accept_ok = false;
    let mut protocol: Option<&[u8]> = None;
    let mut protocols = 0u32;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade |= list_elements(h.value).any(|t| t.eq_ignore_ascii_case(b"websocket"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection |= list_elements(h.value).any(|t| t.eq_ignore_ascii_case(b"upgrade"));
        } else if name.eq_ignore_ascii_case(b"sec-websocket-accept") {
            accepts += 1;
            accept_ok = trim_ows(h.value) == accept.as_slice();
        } else if name.eq_ignore_ascii_case(b"sec-websocket-extensions") {
            if list_elements(h.value).next().is_some() {
                return Err(WsError::HandshakeExtension);
            }
        } else if name.eq_ignore_ascii_case(b"sec-websocket-protocol") {
            protocols += 1;
            protocol = Some(trim_ows(h.value));
        }
    }
    if !upgrade {
        return Err(WsError::HandshakeNoUpgrade);
    }
    if !connection {
        return Err(WsError::HandshakeNoConnection);
    }
    if accepts != 1 || !accept_ok {
        return Err(WsError::HandshakeBadAccept);
    }
    let protocol = match protocol {
        None => None,
        Some(_) if protocols > 1 => return Err(WsError::HandshakeProtocol),
        Some(chosen) => {
            let offered = offered.unwrap_or_default().as_bytes();
            let index = list_elements(offered)
                .position(|p| p == chosen)
                .ok_or(WsError::HandshakeProtocol)?;
            Some(u8::try_from(index).map_err(|_| WsError::HandshakeProtocol)?)
        }
    };
    Ok(HandshakeMeta {
        head_len: head.len(),
        protocol,
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

// ---------------------------------------------------------------------------------------------
// Encoding

/// Appends a frame header: FIN, opcode, the payload length in the shortest of the 7/16/64-bit
/// forms, and the masking key when `mask` is given (clients must mask every frame, servers must
/// not). The caller appends `len` payload bytes, masked with [`apply_mask`] when masking.
///
/// Writes what it is asked, valid or not (a fragmented or over-long control frame too), so that
/// tests can produce invalid frames; the `encode_*` helpers below only produce valid ones.
pub fn encode_frame_header(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: Opcode,
    len: u64,
    mask: Option<[u8; 4]>,
) {
    let b0 = (u8::from(fin) << 7) | opcode as u8;
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    out.push(b0);
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if let Ok(len16) = u16::try_from(len) {
        out.push(mask_bit | 126);
        out.extend_from_slice(&len16.to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&len.to_be_bytes());
    }
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
}

/// Appends one whole frame; `payload` is masked while it is copied when `mask` is given.
/// Like [`encode_frame_header`], writes whatever it is asked.
pub fn encode_frame(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: Opcode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) {
    encode_frame_header(out, fin, opcode, payload.len() as u64, mask);
    match mask {
        Some(key) => extend_masked(out, payload, key),
        None => out.extend_from_slice(payload),
    }
}

/// Appends a message as `frames` masked frames (clamped to 1..=payload length; one frame for an
/// empty payload), of near-equal sizes, each with a fresh key from `next_mask`. Returns the
/// number of frames written.
pub fn encode_message(
    out: &mut Vec<u8>,
    kind: MessageKind,
    payload: &[u8],
    frames: usize,
    mut next_mask: impl FnMut() -> [u8; 4],
) -> usize {
    let frames = frames.clamp(1, payload.len().max(1));
    out.reserve(payload.len() + frames * 14);
    let base = payload.len() / frames;
    let extra = payload.len() % frames;
    let mut rest = payload;
    for i in 0..frames {
        let len = base + usize::from(i < extra);
        let (piece, tail) = rest.split_at(len.min(rest.len()));
        rest = tail;
        let opcode = if i == 0 {
            kind.opcode()
        } else {
            Opcode::Continuation
        };
        encode_frame(out, i + 1 == frames, opcode, piece, Some(next_mask()));
    }
    frames
}

/// Appends a masked ping. `Err(ControlTooLong)` (and nothing written) beyond 125 bytes.
pub fn encode_ping(out: &mut Vec<u8>, payload: &[u8], mask: [u8; 4]) -> Result<(), WsError> {
    encode_control(out, Opcode::Ping, payload, mask)
}

/// Appends a masked pong; answer a ping with its payload ([`FrameDecoder::control_payload`]).
pub fn encode_pong(out: &mut Vec<u8>, payload: &[u8], mask: [u8; 4]) -> Result<(), WsError> {
    encode_control(out, Opcode::Pong, payload, mask)
}

fn encode_control(
    out: &mut Vec<u8>,
    opcode: Opcode,
    payload: &[u8],
    mask: [u8; 4],
) -> Result<(), WsError> {
    if payload.len() > MAX_CONTROL_PAYLOAD {
        return Err(WsError::ControlTooLong);
    }
    encode_frame(out, true, opcode, payload, Some(mask));
    Ok(())
}

/// Appends a masked close frame: empty for `None`, else the status code and a UTF-8 reason.
///
/// Errors (nothing written): a code that must not be sent ([`WsError::BadCloseCode`]: only
/// 1000-1003, 1007-1014 and 3000-4999 may be), or a reason longer than 123 bytes
/// ([`WsError::ControlTooLong`]).
pub fn encode_close(
    out: &mut Vec<u8>,
    close: Option<(u16, &str)>,
    mask: [u8; 4],
) -> Result<(), WsError> {
    let Some((code, reason)) = close else {
        encode_frame(out, true, Opcode::Close, &[], Some(mask));
        return Ok(());
    };
    if !valid_close_code(code) {
        return Err(WsError::BadCloseCode(code));
    }
    if reason.len() > MAX_CONTROL_PAYLOAD - 2 {
        return Err(WsError::ControlTooLong);
    }
    encode_frame_header(
        out,
        true,
        Opcode::Close,
        2 + reason.len() as u64,
        Some(mask),
    );
    let mut key = mask;
    extend_masked(out, &code.to_be_bytes(), key);
    key.rotate_left(2);
    extend_masked(out, reason.as_bytes(), key);
    Ok(())
}

/// A status code that may appear in a close frame (RFC 6455 §7.4; 1012-1014 are registered
/// with IANA since). 1004-1006 and 1015 are reserved and never sent; 2000-2999 are for
/// extensions (none here); 3000-4999 belong to libraries and applications.
pub fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// XORs `data` with the masking key, as if `data` started `offset` bytes into the payload (so a
/// payload can be masked in several pieces).
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: usize) {
    let mut key = mask;
    key.rotate_left(offset % 4);
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (b, k) in chunks.into_remainder().iter_mut().zip(key.iter().cycle()) {
        *b ^= k;
    }
}

/// Appends `data` XORed with `mask` (from payload offset 0), in one pass.
fn extend_masked(out: &mut Vec<u8>, data: &[u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    out.reserve(data.len());
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        out.extend_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    out.extend(
        chunks
            .remainder()
            .iter()
            .zip(mask.iter().cycle())
            .map(|(b, k)| b ^ k),
    );
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Progress of one [`FrameDecoder::decode`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// All input consumed; nothing completed.
    NeedMore,
    /// A whole data message (all its fragments) arrived.
    Message(Message),
    /// A ping; its payload is in [`FrameDecoder::control_payload`]. Answer with a pong.
    Ping { len: u8 },
    /// A pong; its payload is in [`FrameDecoder::control_payload`].
    Pong { len: u8 },
    /// A close frame. Answer with a close; the decoder accepts no further bytes.
    Close(Close),
}

/// A complete data message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    pub kind: MessageKind,
    /// Payload bytes, all fragments together.
    pub len: u64,
    /// Frames it came in (1 when not fragmented).
    pub frames: u32,
}

/// A received close frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close {
    /// The status code; `None` for an empty close frame (1005, "no status", in RFC terms).
    pub code: Option<u16>,
    /// Bytes of the reason ([`FrameDecoder::close_reason`]).
    pub reason_len: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Collecting a frame header: `have` bytes of it are in `hdr`.
    Header,
    /// Inside the payload of the current frame.
    Payload { remaining: u64 },
    /// A close frame was received.
    Closed,
    /// An error occurred; it is returned again until `reset`.
    Failed(WsError),
}

/// Incremental decoder of server frames, one per connection; see the module documentation.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    state: State,
    /// Header bytes received so far (2 to 10: server frames carry no mask).
    hdr: [u8; 10],
    hdr_have: u8,
    /// FIN and opcode of the frame in progress (valid in `Payload`).
    fin: bool,
    opcode: Opcode,
    /// The message being reassembled: its kind (`None` between messages), length, frames.
    msg_kind: Option<MessageKind>,
    msg_len: u64,
    msg_frames: u32,
    utf8: Utf8Validator,
    max_message: u64,
    keep_payload: bool,
    /// The message's payload, when kept.
    payload: Vec<u8>,
    /// The last control frame's payload.
    ctrl: [u8; MAX_CONTROL_PAYLOAD],
    ctrl_len: u8,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// A decoder with the default message limit ([`DEFAULT_MAX_MESSAGE`]), payloads not kept.
    pub fn new() -> Self {
        FrameDecoder {
            state: State::Header,
            hdr: [0; 10],
            hdr_have: 0,
            fin: false,
            opcode: Opcode::Continuation,
            msg_kind: None,
            msg_len: 0,
            msg_frames: 0,
            utf8: Utf8Validator::default(),
            max_message: DEFAULT_MAX_MESSAGE,
            keep_payload: false,
            payload: Vec::new(),
            ctrl: [0; MAX_CONTROL_PAYLOAD],
            ctrl_len: 0,
        }
    }

    /// Largest message accepted, in bytes (the sum of its fragments): a frame header that would
    /// take a message past it is [`WsError::MessageTooLarge`] before its payload is read.
    pub fn set_max_message(&mut self, max: u64) {
        self.max_message = max;
    }

    /// Keep data payloads, so that [`payload`](Self::payload) returns each completed message.
    /// Off by default (messages are counted and validated, not stored).
    pub fn set_keep_payload(&mut self, keep: bool) {
        self.keep_payload = keep;
    }

    /// The payload of the message just reported by `decode` (valid until the next call), when
    /// payloads are kept; empty otherwise.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The payload of the last ping, pong or close frame (for a close: code and reason).
    pub fn control_payload(&self) -> &[u8] {
        self.ctrl
            .get(..usize::from(self.ctrl_len))
            .unwrap_or_default()
    }

    /// The reason of the close frame just reported (empty if none).
    pub fn close_reason(&self) -> &str {
        let reason = self.control_payload().get(2..).unwrap_or_default();
        std::str::from_utf8(reason).unwrap_or_default()
    }

    /// Feed bytes. Returns how many were consumed and what completed; after a message or
    /// control frame, the bytes behind it are not consumed: call again with the rest.
    ///
    /// `NeedMore` always consumes all of `input` (so 0 only for an empty input); every other
    /// result consumes at least one byte. After an `Err`, every call returns the same error
    /// until [`reset`](Self::reset); after [`Decoded::Close`], any byte is
    /// [`WsError::DataAfterClose`].
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Decoded), WsError> {
        match self.decode_inner(input) {
            Err(e) => {
                self.state = State::Failed(e);
                Err(e)
            }
            ok => ok,
        }
    }

    fn decode_inner(&mut self, input: &[u8]) -> Result<(usize, Decoded), WsError> {
        let mut pos = 0usize;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            match self.state {
                State::Failed(e) => return Err(e),
                State::Closed if rest.is_empty() => return Ok((pos, Decoded::NeedMore)),
                State::Closed => return Err(WsError::DataAfterClose),
                State::Header => {
                    if rest.is_empty() {
                        return Ok((pos, Decoded::NeedMore));
                    }
                    let (used, ready) = self.take_header(rest)?;
                    pos += used;
                    if ready {
                        if let Some(done) = self.begin_frame()? {
                            return Ok((pos, done));
                        }
                    }
                }
                State::Payload { remaining } => {
                    if rest.is_empty() {
                        return Ok((pos, Decoded::NeedMore));
                    }
                    let take = usize::try_from(remaining).map_or(rest.len(), |r| r.min(rest.len()));
                    let chunk = rest.get(..take).unwrap_or_default();
                    self.payload_bytes(chunk)?;
                    pos += take;
                    let remaining = remaining - take as u64;
                    if remaining > 0 {
                        self.state = State::Payload { remaining };
                        return Ok((pos, Decoded::NeedMore));
                    }
                    if let Some(done) = self.end_frame()? {
                        return Ok((pos, done));
                    }
                }
            }
        }
    }

    /// The peer closed the connection: `Ok` if a close frame had been received,
    /// `Err(Incomplete)` in the middle of a frame or a fragmented message, `Err(NoClose)`
    /// otherwise (an abnormal closure, 1006 in RFC terms). Resets the decoder.
    pub fn eof(&mut self) -> Result<(), WsError> {
        let result = match self.state {
            State::Closed => Ok(()),
            State::Failed(e) => Err(e),
            _ if self.in_progress() => Err(WsError::Incomplete),
            _ => Err(WsError::NoClose),
        };
        self.reset();
        result
    }

    /// Some bytes of a frame or message have been received and it is not complete yet.
    pub fn in_progress(&self) -> bool {
        self.hdr_have > 0 || matches!(self.state, State::Payload { .. }) || self.msg_kind.is_some()
    }

    /// A close frame was received.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Forget any partial frame or message (for a new connection); keeps the settings.
    pub fn reset(&mut self) {
        self.state = State::Header;
        self.hdr_have = 0;
        self.msg_kind = None;
        self.msg_len = 0;
        self.msg_frames = 0;
        self.utf8 = Utf8Validator::default();
        self.payload.clear();
        self.ctrl_len = 0;
    }

    /// Copies header bytes from `rest`, validating the first two as soon as they are in. Returns
    /// the bytes used and whether the header is complete.
    fn take_header(&mut self, rest: &[u8]) -> Result<(usize, bool), WsError> {
        let mut used = 0usize;
        loop {
            let have = usize::from(self.hdr_have);
            let need = if have < 2 {
                2
            } else {
                match self.hdr[1] & 0x7F {
                    126 => 4,
                    127 => 10,
                    _ => 2,
                }
            };
            if have >= need {
                return Ok((used, true));
            }
            let src = rest.get(used..).unwrap_or_default();
            let n = (need - have).min(src.len());
            if n == 0 {
                return Ok((used, false));
            }
            if let (Some(dst), Some(src)) = (self.hdr.get_mut(have..have + n), src.get(..n)) {
                dst.copy_from_slice(src);
            }
            used += n;
            self.hdr_have += n as u8;
            if have == 0 {
                self.check_byte0(self.hdr[0])?;
            }
            if have < 2 && self.hdr_have >= 2 {
                self.check_byte1(self.hdr[1])?;
            }
        }
    }

    /// Validates FIN/RSV/opcode (byte 0) and MASK/length-7 (byte 1) as soon as each arrives
    /// (RFC 6455 §5.2, §5.4, §5.5), so a bad frame fails on its first bad byte.
    fn check_byte0(&mut self, b0: u8) -> Result<(), WsError> {
        if b0 & 0x70 != 0 {
            return Err(WsError::ReservedBits);
        }
        let opcode = Opcode::from_bits(b0 & 0x0F).ok_or(WsError::BadOpcode(b0 & 0x0F))?;
        let fin = b0 & 0x80 != 0;
        if opcode.is_control() {
            if !fin {
                return Err(WsError::FragmentedControl);
            }
        } else if opcode == Opcode::Continuation {
            if self.msg_kind.is_none() {
                return Err(WsError::UnexpectedContinuation);
            }
        } else if self.msg_kind.is_some() {
            return Err(WsError::ExpectedContinuation);
        }
        self.fin = fin;
        self.opcode = opcode;
        Ok(())
    }

    fn check_byte1(&self, b1: u8) -> Result<(), WsError> {
        if b1 & 0x80 != 0 {
            return Err(WsError::MaskedFrame);
        }
        if self.opcode.is_control() && usize::from(b1 & 0x7F) > MAX_CONTROL_PAYLOAD {
            return Err(WsError::ControlTooLong);
        }
        Ok(())
    }

    /// The header is complete: checks the length, starts the message or control frame, and
    /// completes a frame with an empty payload at once.
    fn begin_frame(&mut self) -> Result<Option<Decoded>, WsError> {
        let len = match self.hdr[1] & 0x7F {
            126 => u64::from(u16::from_be_bytes([self.hdr[2], self.hdr[3]])),
            127 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.hdr[2..10]);
                let len = u64::from_be_bytes(b);
                if len >> 63 != 0 {
                    return Err(WsError::BadLength);
                }
                len
            }
            n => u64::from(n),
        };
        self.hdr_have = 0;
        match self.opcode {
            Opcode::Ping | Opcode::Pong | Opcode::Close => self.ctrl_len = 0,
            Opcode::Text | Opcode::Binary | Opcode::Continuation => {
                if self.opcode != Opcode::Continuation {
                    self.start_message();
                }
                let total = self.msg_len.checked_add(len);
                if total.is_none_or(|t| t > self.max_message) {
                    return Err(WsError::MessageTooLarge);
                }
                self.msg_frames = self.msg_frames.saturating_add(1);
            }
        }
        if len == 0 {
            return self.end_frame();
        }
        self.state = State::Payload { remaining: len };
        Ok(None)
    }

    fn start_message(&mut self) {
        self.msg_kind = Some(if self.opcode == Opcode::Text {
            MessageKind::Text
        } else {
            MessageKind::Binary
        });
        self.msg_len = 0;
        self.msg_frames = 0;
        self.utf8 = Utf8Validator::default();
        if self.payload.capacity() > RETAINED_CAPACITY {
            self.payload = Vec::new();
        }
        self.payload.clear();
    }

    fn payload_bytes(&mut self, chunk: &[u8]) -> Result<(), WsError> {
        if self.opcode.is_control() {
            let at = usize::from(self.ctrl_len);
            if let Some(dst) = self.ctrl.get_mut(at..at + chunk.len()) {
                dst.copy_from_slice(chunk);
                self.ctrl_len += chunk.len() as u8;
            }
            return Ok(());
        }
        if self.msg_kind == Some(MessageKind::Text) && !self.utf8.feed(chunk) {
            return Err(WsError::InvalidUtf8);
        }
        if self.keep_payload {
            self.payload.extend_from_slice(chunk);
        }
        self.msg_len += chunk.len() as u64;
        Ok(())
    }

    /// The current frame's payload is complete.
    fn end_frame(&mut self) -> Result<Option<Decoded>, WsError> {
        self.state = State::Header;
        let len = self.ctrl_len;
        match self.opcode {
            Opcode::Ping => Ok(Some(Decoded::Ping { len })),
            Opcode::Pong => Ok(Some(Decoded::Pong { len })),
            Opcode::Close => {
                let close = parse_close(self.control_payload())?;
                self.state = State::Closed;
                Ok(Some(Decoded::Close(close)))
            }
            Opcode::Text | Opcode::Binary | Opcode::Continuation => {
                if !self.fin {
                    return Ok(None);
                }
                let kind = self.msg_kind.take().unwrap_or(MessageKind::Binary);
                if kind == MessageKind::Text && !self.utf8.is_complete() {
                    return Err(WsError::InvalidUtf8);
                }
                Ok(Some(Decoded::Message(Message {
                    kind,
                    len: self.msg_len,
                    frames: self.msg_frames,
                })))
            }
        }
    }
}

/// A close frame's payload: empty, or a valid code and a UTF-8 reason (RFC 6455 §5.5.1).
fn parse_close(payload: &[u8]) -> Result<Close, WsError> {
    match payload {
        [] => Ok(Close {
            code: None,
            reason_len: 0,
        }),
        [_] => Err(WsError::BadClosePayload),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !valid_close_code(code) {
                return Err(WsError::BadCloseCode(code));
            }
            if std::str::from_utf8(reason).is_err() {
                return Err(WsError::BadClosePayload);
            }
            Ok(Close {
                code: Some(code),
                reason_len: reason.len() as u8,
            })
        }
    }
}

/// Incremental UTF-8 validation: fed a text message in pieces split anywhere, even inside a
/// code point, it accepts exactly what `std::str::from_utf8` accepts on the whole.
///
/// State: how many continuation bytes the current code point still needs, and the range the
/// next one must fall in (narrower than 0x80..=0xBF right after E0, ED, F0 and F4, which is how
/// UTF-8 excludes overlong forms, surrogates and code points above U+10FFFF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utf8Validator {
    need: u8,
    lo: u8,
    hi: u8,
}

impl Default for Utf8Validator {
    fn default() -> Self {
        Utf8Validator {
            need: 0,
            lo: 0x80,
            hi: 0xBF,
        }
    }
}

impl Utf8Validator {
    /// Feeds more bytes; false as soon as they cannot be part of valid UTF-8.
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        // Finish a code point begun in an earlier piece, byte by byte.
        while self.need > 0 {
            let Some((&b, tail)) = bytes.split_first() else {
                return true;
            };
            if !self.step(b) {
                return false;
            }
            bytes = tail;
        }
        // The rest in one go with the standard library's validator; only an incomplete code
        // point at the very end goes through the state machine.
        match std::str::from_utf8(bytes) {
            Ok(_) => true,
            Err(e) if e.error_len().is_some() => false,
            Err(e) => bytes
                .get(e.valid_up_to()..)
                .unwrap_or_default()
                .iter()
                .all(|&b| self.step(b)),
        }
    }

    /// True when the bytes fed so far end on a code point boundary.
    pub fn is_complete(&self) -> bool {
        self.need == 0
    }

    fn step(&mut self, b: u8) -> bool {
        if self.need > 0 {
            if b < self.lo || b > self.hi {
                return false;
            }
            self.need -= 1;
            self.lo = 0x80;
            self.hi = 0xBF;
            return true;
        }
        let (need, lo, hi) = match b {
            0x00..=0x7F => return true,
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            _ => return false,
        };
        *self = Utf8Validator { need, lo, hi };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RFC 6455 §1.3 sample key: the bytes "the sample nonce".
    const KEY: &[u8; 16] = b"the sample nonce";

    /// A real exchange, captured from Debian's python3-websockets 10.4 serving
    /// `scripts/ws_echo.py`'s `/mix` path to a client that sent [`KEY`]. The 70,000-byte binary
    /// payload (bytes `i % 251`) is rebuilt rather than pasted; the rest is byte for byte.
    const MIX_HEAD: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nDate: Sun, 22 Nov 2026 15:51:53 GMT\r\nServer: Python/3.11 websockets/10.4\r\n\r\n";
    const MIX_BIG_HEADER: &[u8] = b"\x82\x7f\x00\x00\x00\x00\x00\x01\x11p";
    const MIX_POST: &[u8] = b"\x89\x0eare you there?\x01\x04frag\x00\x07mented \x89\x03mid\x00\x08text \xe2\x9c\x93\x80\x00\x81\x16h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9d\x84\x9e\x88\x05\x03\xe8bye";

    /// The frames before the big one: "hello", empty binary, 125 't', 126 'b'.
    fn mix_pre() -> Vec<u8> {
        let mut v = b"\x81\x05hello\x82\x00\x81\x7d".to_vec();
        v.extend_from_slice(&[b't'; 125]);
        v.extend_from_slice(b"\x82\x7e\x00\x7e");
        v.extend_from_slice(&[b'b'; 126]);
        v
    }

    fn mix(with_big: bool) -> Vec<u8> {
        let mut v = MIX_HEAD.to_vec();
        v.extend_from_slice(&mix_pre());
        if with_big {
            v.extend_from_slice(MIX_BIG_HEADER);
            v.extend((0..70_000u32).map(|i| (i % 251) as u8));
        }
        v.extend_from_slice(MIX_POST);
        v
    }

    /// What a client sees, in a comparable form.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Ev {
        Handshake(HandshakeMeta),
        Msg(MessageKind, u64, u32, Option<Vec<u8>>),
        Ping(Vec<u8>),
        Pong(Vec<u8>),
        Close(Option<u16>, String),
        Err(WsError),
    }

    /// Feeds the pieces through a handshake decoder, then a frame decoder, as the engine would.
    fn run<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, keep: bool) -> Vec<Ev> {
        let mut hs = HandshakeDecoder::new(KEY);
        let mut dec = FrameDecoder::new();
        dec.set_keep_payload(keep);
        let mut out = Vec::new();
        for piece in pieces {
            let mut p = piece;
            if !hs.is_done() {
                match hs.decode(p, None) {
                    Err(e) => {
                        out.push(Ev::Err(e));
                        return out;
                    }
                    Ok((n, Handshake::NeedMore)) => {
                        assert_eq!(n, p.len());
                        continue;
                    }
                    Ok((n, Handshake::Done(meta))) => {
                        out.push(Ev::Handshake(meta));
                        p = &p[n..];
                    }
                }
            }
            loop {
                match dec.decode(p) {
                    Err(e) => {
                        out.push(Ev::Err(e));
                        return out;
                    }
                    Ok((n, Decoded::NeedMore)) => {
                        assert_eq!(n, p.len(), "NeedMore consumes everything");
                        break;
                    }
                    Ok((n, ev)) => {
                        assert!(n >= 1 && n <= p.len());
                        out.push(match ev {
                            Decoded::Message(m) => Ev::Msg(
                                m.kind,
                                m.len,
                                m.frames,
                                keep.then(|| dec.payload().to_vec()),
                            ),
                            Decoded::Ping { len } => {
                                assert_eq!(usize::from(len), dec.control_payload().len());
                                Ev::Ping(dec.control_payload().to_vec())
                            }
                            Decoded::Pong { .. } => Ev::Pong(dec.control_payload().to_vec()),
                            Decoded::Close(c) => Ev::Close(c.code, dec.close_reason().to_owned()),
                            Decoded::NeedMore => unreachable!(),
                        });
                        p = &p[n..];
                        if p.is_empty() {
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    fn mix_expected(with_big: bool, keep: bool) -> Vec<Ev> {
        let k = |b: &[u8]| keep.then(|| b.to_vec());
        let mut v = vec![
            Ev::Handshake(HandshakeMeta {
                head_len: MIX_HEAD.len(),
                protocol: None,
            }),
            Ev::Msg(MessageKind::Text, 5, 1, k(b"hello")),
            Ev::Msg(MessageKind::Binary, 0, 1, k(b"")),
            Ev::Msg(MessageKind::Text, 125, 1, k(&[b't'; 125])),
            Ev::Msg(MessageKind::Binary, 126, 1, k(&[b'b'; 126])),
        ];
        if with_big {
            let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
            v.push(Ev::Msg(MessageKind::Binary, 70_000, 1, k(&big)));
        }
        v.extend([
            Ev::Ping(b"are you there?".to_vec()),
            Ev::Ping(b"mid".to_vec()),
            Ev::Msg(
                MessageKind::Text,
                19,
                4,
                k("fragmented text \u{2713}".as_bytes()),
            ),
            Ev::Msg(
                MessageKind::Text,
                22,
                1,
                k("h\u{e9}llo w\u{f6}rld \u{2713} \u{1d11e}".as_bytes()),
            ),
            Ev::Close(Some(1000), "bye".to_owned()),
        ]);
        v
    }

    #[test]
    fn captured_exchange_in_one_piece_and_byte_by_byte() {
        for keep in [false, true] {
            let stream = mix(true);
            assert_eq!(run([&stream[..]], keep), mix_expected(true, keep));
            let bytes: Vec<&[u8]> = stream.chunks(1).collect();
            assert_eq!(run(bytes, keep), mix_expected(true, keep));
        }
    }

    #[test]
    fn captured_exchange_at_every_split_point() {
        let stream = mix(true);
        let want = mix_expected(true, false);
        for i in 0..=stream.len() {
            let (a, b) = stream.split_at(i);
            assert_eq!(run([a, b], false), want, "split at {i}");
        }
        // Kept payloads too (every split of the frames around the big one, a sample inside it).
        let want = mix_expected(true, true);
        let big_at = MIX_HEAD.len() + mix_pre().len() + MIX_BIG_HEADER.len();
        let splits = (0..big_at + 64)
            .chain((big_at + 64..big_at + 70_000).step_by(997))
            .chain(big_at + 70_000 - 64..=stream.len());
        for i in splits {
            let (a, b) = stream.split_at(i);
            assert_eq!(run([a, b], true), want, "split at {i}");
        }
    }

    #[test]
    fn captured_exchange_at_every_pair_of_split_points() {
        let stream = mix(false);
        for keep in [false, true] {
            let want = mix_expected(false, keep);
            for i in 0..=stream.len() {
                for j in i..=stream.len() {
                    let pieces = [&stream[..i], &stream[i..j], &stream[j..]];
                    assert_eq!(run(pieces, keep), want, "splits at {i} and {j}");
                }
            }
        }
    }

    #[test]
    fn rfc_sample_key_and_accept() {
        assert_eq!(&encode_key(KEY), b"dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(
            &accept_for(b"dGhlIHNhbXBsZSBub25jZQ=="),
            b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn handshake_request_golden() {
        let mut out = b"left alone|".to_vec();
        encode_handshake(
            "example.com:8080",
            "/chat?room=1",
            Some("chat, superchat"),
            [("Origin", "http://example.com")],
            KEY,
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "left alone|GET /chat?room=1 HTTP/1.1\r\nHost: example.com:8080\r\n\
             Upgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Protocol: chat, superchat\r\nOrigin: http://example.com\r\n\r\n"
        );
        let mut out = Vec::new();
        encode_handshake("h", "", None, std::iter::empty(), KEY, &mut out);
        assert!(out.starts_with(b"GET / HTTP/1.1\r\nHost: h\r\n"));
        assert!(!out.windows(8).any(|w| w == b"Protocol"));
    }

    const ACCEPT: &str = "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n";

    fn check(head: &str, offered: Option<&str>) -> Result<HandshakeMeta, WsError> {
        let mut hs = HandshakeDecoder::new(KEY);
        match hs.decode(head.as_bytes(), offered)? {
            (n, Handshake::Done(meta)) => {
                assert_eq!(n, head.len());
                Ok(meta)
            }
            (_, Handshake::NeedMore) => panic!("incomplete: {head:?}"),
        }
    }

    #[test]
    fn handshake_response_checks() {
        let ok = |extra: &str| {
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\n{ACCEPT}{extra}\r\n"
            )
        };
        assert_eq!(check(&ok(""), None).unwrap().protocol, None);
        // Tokens are case-insensitive and may sit in lists; bare LF line ends are tolerated.
        let varied = format!(
            "HTTP/1.1 101 OK\nUpgrade: WebSocket\nConnection: keep-alive, UPGRADE\n{}\n\n",
            ACCEPT.trim_end()
        );
        assert!(check(&varied, None).is_ok());
        // The subprotocol must be one of those offered; its index is reported.
        let proto = ok("Sec-WebSocket-Protocol: superchat\r\n");
        assert_eq!(
            check(&proto, Some("chat, superchat")).unwrap().protocol,
            Some(1)
        );
        assert_eq!(check(&proto, Some("chat")), Err(WsError::HandshakeProtocol));
        assert_eq!(check(&proto, None), Err(WsError::HandshakeProtocol));
        assert_eq!(check(&ok(""), Some("chat")).unwrap().protocol, None);
        assert_eq!(
            check(
                &ok("Sec-WebSocket-Extensions: permessage-deflate\r\n"),
                None
            ),
            Err(WsError::HandshakeExtension)
        );
        assert_eq!(
            check(
                &format!("HTTP/1.1 101 S\r\nConnection: Upgrade\r\n{ACCEPT}\r\n"),
                None
            ),
            Err(WsError::HandshakeNoUpgrade)
        );
        assert_eq!(
            check(
                &format!(
                    "HTTP/1.1 101 S\r\nUpgrade: websocket\r\nConnection: close\r\n{ACCEPT}\r\n"
                ),
                None
            ),
            Err(WsError::HandshakeNoConnection)
        );
        assert_eq!(
            check(
                "HTTP/1.1 101 S\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                None
            ),
            Err(WsError::HandshakeBadAccept)
        );
        assert_eq!(
            check(
                &ok("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
                None
            ),
            Err(WsError::HandshakeBadAccept),
            "two accept fields"
        );
        let wrong = "HTTP/1.1 101 S\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                     Sec-WebSocket-Accept: S3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        assert_eq!(check(wrong, None), Err(WsError::HandshakeBadAccept));
        assert_eq!(
            check("HTTP/1.1 403 Forbidden\r\nContent-Length: 5\r\n\r\n", None),
            Err(WsError::HandshakeStatus(403))
        );
        assert_eq!(
            check(&ok("").replace("HTTP/1.1", "HTTP/1.0"), None),
            Err(WsError::HandshakeBadHead)
        );
        assert_eq!(
            check("garbage\r\n\r\n", None),
            Err(WsError::HandshakeBadHead)
        );
    }

    #[test]
    fn handshake_size_limit_holds_at_any_split() {
        let filler = "X-Filler: ".to_owned() + &"a".repeat(MAX_HANDSHAKE_LEN) + "\r\n";
        let head = format!("HTTP/1.1 101 S\r\n{filler}\r\n");
        for split in [
            0,
            1,
            100,
            MAX_HANDSHAKE_LEN - 1,
            MAX_HANDSHAKE_LEN,
            head.len(),
        ] {
            let mut hs = HandshakeDecoder::new(KEY);
            let (a, b) = head.as_bytes().split_at(split);
            let r = hs.decode(a, None).and_then(|_| hs.decode(b, None));
            assert_eq!(r, Err(WsError::HandshakeTooLarge), "split at {split}");
        }
    }

    #[test]
    fn rfc_examples_encode() {
        // RFC 6455 §5.7.
        let mut out = Vec::new();
        encode_frame(&mut out, true, Opcode::Text, b"Hello", None);
        assert_eq!(out, b"\x81\x05Hello");
        out.clear();
        encode_frame(
            &mut out,
            true,
            Opcode::Text,
            b"Hello",
            Some([0x37, 0xfa, 0x21, 0x3d]),
        );
        assert_eq!(out, b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58");
        out.clear();
        encode_frame(&mut out, false, Opcode::Text, b"Hel", None);
        encode_frame(&mut out, true, Opcode::Continuation, b"lo", None);
        assert_eq!(out, b"\x01\x03Hel\x80\x02lo");
        out.clear();
        encode_pong(&mut out, b"Hello", [0x37, 0xfa, 0x21, 0x3d]).unwrap();
        assert_eq!(out, b"\x8a\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58");
        out.clear();
        encode_frame_header(&mut out, true, Opcode::Binary, 256, None);
        assert_eq!(out, b"\x82\x7e\x01\x00");
        out.clear();
        encode_frame_header(&mut out, true, Opcode::Binary, 65536, None);
        assert_eq!(out, b"\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00");
        // The length forms at their edges.
        for (len, header_len) in [(0, 2), (125, 2), (126, 4), (65535, 4), (65536, 10)] {
            out.clear();
            encode_frame_header(&mut out, true, Opcode::Binary, len, Some([1, 2, 3, 4]));
            assert_eq!(out.len(), header_len + 4, "length {len}");
        }
    }

    #[test]
    fn rfc_examples_decode() {
        let stream = b"\x81\x05Hello\x01\x03Hel\x89\x05Hello\x80\x02lo\x8a\x00\x88\x00";
        assert_eq!(
            run_frames(stream),
            vec![
                Ev::Msg(MessageKind::Text, 5, 1, Some(b"Hello".to_vec())),
                Ev::Ping(b"Hello".to_vec()),
                Ev::Msg(MessageKind::Text, 5, 2, Some(b"Hello".to_vec())),
                Ev::Pong(vec![]),
                Ev::Close(None, String::new()),
            ]
        );
    }

    /// Frames only (no handshake), payloads kept, every split point checked against one piece.
    fn run_frames(stream: &[u8]) -> Vec<Ev> {
        let mut with_head = MIX_HEAD.to_vec();
        with_head.extend_from_slice(stream);
        let whole = run([&with_head[..]], true);
        for i in MIX_HEAD.len()..=with_head.len() {
            let (a, b) = with_head.split_at(i);
            assert_eq!(run([a, b], true), whole, "split at {i}");
        }
        whole.into_iter().skip(1).collect()
    }

    /// Re-encodes client (masked) frames as server (unmasked) ones, to feed them to the decoder.
    fn unmask(mut client: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        while !client.is_empty() {
            let (b0, b1) = (client[0], client[1]);
            assert!(b1 & 0x80 != 0, "client frames are masked");
            let (len, at) = match b1 & 0x7f {
                126 => (u16::from_be_bytes([client[2], client[3]]) as usize, 4),
                127 => (
                    u64::from_be_bytes(client[2..10].try_into().unwrap()) as usize,
                    10,
                ),
                n => (n as usize, 2),
            };
            let key: [u8; 4] = client[at..at + 4].try_into().unwrap();
            let mut payload = client[at + 4..at + 4 + len].to_vec();
            apply_mask(&mut payload, key, 0);
            let opcode = Opcode::from_bits(b0 & 0x0f).unwrap();
            encode_frame(&mut out, b0 & 0x80 != 0, opcode, &payload, None);
            client = &client[at + 4 + len..];
        }
        out
    }

    fn masks() -> impl FnMut() -> [u8; 4] {
        let mut n = 0x1234_5678u32;
        move || {
            n = n.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            n.to_le_bytes()
        }
    }

    #[test]
    fn fragmented_encoding_round_trips() {
        let text = "fragments of a longer text with \u{2713} and \u{1d11e} inside".repeat(50);
        for frames in [0, 1, 2, 3, 7, 100, text.len(), text.len() + 5] {
            let mut out = Vec::new();
            let n = encode_message(
                &mut out,
                MessageKind::Text,
                text.as_bytes(),
                frames,
                masks(),
            );
            assert_eq!(n, frames.clamp(1, text.len()));
            let mut dec = FrameDecoder::new();
            dec.set_keep_payload(true);
            let server = unmask(&out);
            let (used, ev) = dec.decode(&server).unwrap();
            assert_eq!(used, server.len());
            let want = Message {
                kind: MessageKind::Text,
                len: text.len() as u64,
                frames: n as u32,
            };
            assert_eq!(ev, Decoded::Message(want));
            assert_eq!(dec.payload(), text.as_bytes());
        }
        let mut out = Vec::new();
        assert_eq!(
            encode_message(&mut out, MessageKind::Binary, b"", 5, masks()),
            1
        );
        assert_eq!(unmask(&out), b"\x82\x00");
    }

    #[test]
    fn masking_in_pieces_matches_masking_whole() {
        let data: Vec<u8> = (0..100u8).collect();
        let key = [0xde, 0xad, 0xbe, 0xef];
        let naive: Vec<u8> = data
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i % 4])
            .collect();
        let mut out = Vec::new();
        extend_masked(&mut out, &data, key);
        assert_eq!(out, naive);
        for split in 0..data.len() {
            let mut d = data.clone();
            let (a, b) = d.split_at_mut(split);
            apply_mask(a, key, 0);
            apply_mask(b, key, split);
            assert_eq!(d, naive, "split at {split}");
        }
    }

    #[test]
    fn control_and_close_encoders_validate() {
        let mut out = Vec::new();
        assert!(encode_ping(&mut out, &[0; 125], [0; 4]).is_ok());
        out.clear();
        assert_eq!(
            encode_ping(&mut out, &[0; 126], [0; 4]),
            Err(WsError::ControlTooLong)
        );
        assert!(out.is_empty());
        encode_close(&mut out, Some((1000, "bye")), [9, 8, 7, 6]).unwrap();
        assert_eq!(unmask(&out), b"\x88\x05\x03\xe8bye");
        out.clear();
        encode_close(&mut out, None, [9, 8, 7, 6]).unwrap();
        assert_eq!(unmask(&out), b"\x88\x00");
        for bad in [0, 999, 1004, 1005, 1006, 1015, 2000, 2999, 5000] {
            assert_eq!(
                encode_close(&mut out, Some((bad, "")), [0; 4]),
                Err(WsError::BadCloseCode(bad))
            );
        }
        assert_eq!(
            encode_close(&mut out, Some((1000, &"r".repeat(124))), [0; 4]),
            Err(WsError::ControlTooLong)
        );
    }

    /// Decodes `stream` (server frames) in one piece and at every split; the outcome must agree.
    fn decode_all(stream: &[u8], max: u64) -> Vec<Ev> {
        let go = |pieces: &[&[u8]]| {
            let mut dec = FrameDecoder::new();
            dec.set_max_message(max);
            let mut evs = Vec::new();
            'outer: for &piece in pieces {
                let mut p = piece;
                loop {
                    match dec.decode(p) {
                        Err(e) => {
                            evs.push(Ev::Err(e));
                            break 'outer;
                        }
                        Ok((_, Decoded::NeedMore)) => break,
                        Ok((n, Decoded::Message(m))) => {
                            evs.push(Ev::Msg(m.kind, m.len, m.frames, None));
                            p = &p[n..];
                        }
                        Ok((n, Decoded::Ping { .. })) => {
                            evs.push(Ev::Ping(dec.control_payload().to_vec()));
                            p = &p[n..];
                        }
                        Ok((n, Decoded::Pong { .. })) => {
                            evs.push(Ev::Pong(dec.control_payload().to_vec()));
                            p = &p[n..];
                        }
                        Ok((n, Decoded::Close(c))) => {
                            evs.push(Ev::Close(c.code, dec.close_reason().to_owned()));
                            p = &p[n..];
                        }
                    }
                }
            }
            evs
        };
        let whole = go(&[stream]);
        for i in 0..=stream.len() {
            let (a, b) = stream.split_at(i);
            assert_eq!(go(&[a, b]), whole, "split at {i} of {stream:?}");
        }
        whole
    }

    fn last(stream: &[u8]) -> Ev {
        decode_all(stream, DEFAULT_MAX_MESSAGE).pop().unwrap()
    }

    #[test]
    fn protocol_errors() {
        use WsError::*;
        assert_eq!(last(b"\x81\x85\x00\x00\x00\x00hello"), Ev::Err(MaskedFrame));
        assert_eq!(last(b"\xc1\x05hello"), Ev::Err(ReservedBits));
        assert_eq!(last(b"\xa1\x05hello"), Ev::Err(ReservedBits));
        assert_eq!(last(b"\x83\x00"), Ev::Err(BadOpcode(3)));
        assert_eq!(last(b"\x8b\x00"), Ev::Err(BadOpcode(0xb)));
        assert_eq!(last(b"\x09\x00"), Ev::Err(FragmentedControl));
        assert_eq!(last(b"\x89\x7e\x00\x7e"), Ev::Err(ControlTooLong));
        assert_eq!(last(b"\x80\x00"), Ev::Err(UnexpectedContinuation));
        assert_eq!(last(b"\x01\x01a\x81\x01b"), Ev::Err(ExpectedContinuation));
        assert_eq!(
            last(b"\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x00"),
            Ev::Err(BadLength)
        );
        // Too large: reported at the header, before the payload.
        assert_eq!(
            decode_all(b"\x82\x7e\x01\x00", 255).pop(),
            Some(Ev::Err(MessageTooLarge))
        );
        assert_eq!(
            decode_all(b"\x02\x06abcdef\x80\x05", 10).pop(),
            Some(Ev::Err(MessageTooLarge)),
            "fragments add up"
        );
        assert_eq!(
            decode_all(b"\x82\x7e\x00\xff", 255).pop(),
            None,
            "at the limit, only the payload is missing"
        );
        // Close payloads.
        assert_eq!(last(b"\x88\x01\x03"), Ev::Err(BadClosePayload));
        assert_eq!(last(b"\x88\x02\x03\xed"), Ev::Err(BadCloseCode(1005)));
        assert_eq!(last(b"\x88\x02\x03\xe7"), Ev::Err(BadCloseCode(999)));
        assert_eq!(last(b"\x88\x02\x13\x88"), Ev::Err(BadCloseCode(5000)));
        assert_eq!(last(b"\x88\x03\x03\xe8\xff"), Ev::Err(BadClosePayload));
        assert_eq!(
            last(b"\x88\x02\x0f\xa0"),
            Ev::Close(Some(4000), String::new())
        );
        assert_eq!(last(b"\x88\x00\x81\x00"), Ev::Err(DataAfterClose));
        // An error sticks.
        let mut dec = FrameDecoder::new();
        assert_eq!(dec.decode(b"\x83"), Err(BadOpcode(3)));
        assert_eq!(dec.decode(b""), Err(BadOpcode(3)));
        dec.reset();
        assert!(matches!(
            dec.decode(b"\x81\x00"),
            Ok((2, Decoded::Message(_)))
        ));
    }

    #[test]
    fn utf8_is_checked_across_fragments_and_fails_fast() {
        use WsError::InvalidUtf8;
        // "€" (E2 82 AC) split across fragments, with a ping between them.
        let ok = b"\x01\x02a\xe2\x89\x01p\x00\x01\x82\x80\x02\xacb";
        assert_eq!(
            decode_all(ok, DEFAULT_MAX_MESSAGE),
            vec![
                Ev::Ping(b"p".to_vec()),
                Ev::Msg(MessageKind::Text, 5, 3, None)
            ]
        );
        // A code point cut short by the end of the message.
        assert_eq!(last(b"\x01\x02a\xe2\x80\x01\x82"), Ev::Err(InvalidUtf8));
        // An invalid byte fails at once, in a non-final fragment.
        assert_eq!(last(b"\x01\x02a\xff"), Ev::Err(InvalidUtf8));
        // Surrogates and overlong forms are not UTF-8; binary is not checked.
        assert_eq!(last(b"\x81\x03\xed\xa0\x80"), Ev::Err(InvalidUtf8));
        assert_eq!(last(b"\x81\x02\xc0\xaf"), Ev::Err(InvalidUtf8));
        assert_eq!(
            last(b"\x82\x02\xc0\xaf"),
            Ev::Msg(MessageKind::Binary, 2, 1, None)
        );
    }

    #[test]
    fn utf8_validator_agrees_with_std_at_every_split() {
        let mut seqs: Vec<Vec<u8>> = Vec::new();
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                seqs.push(vec![a, b]);
            }
        }
        let mut n = 7u32;
        for _ in 0..30_000 {
            let mut v = Vec::new();
            for _ in 0..(n % 6 + 1) {
                n = n.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                // Bias towards bytes that start or continue multi-byte sequences.
                v.push(if n & 0x100 != 0 {
                    0x80 | (n >> 24) as u8
                } else {
                    (n >> 24) as u8
                });
            }
            seqs.push(v);
        }
        for s in &seqs {
            let want = std::str::from_utf8(s).is_ok();
            for i in 0..=s.len() {
                let mut v = Utf8Validator::default();
                let got = v.feed(&s[..i]) && v.feed(&s[i..]) && v.is_complete();
                assert_eq!(got, want, "{s:x?} split at {i}");
            }
        }
    }

    #[test]
    fn eof_tells_clean_from_abrupt() {
        let mut dec = FrameDecoder::new();
        assert_eq!(dec.eof(), Err(WsError::NoClose));
        dec.decode(b"\x81\x05hel").unwrap();
        assert!(dec.in_progress());
        assert_eq!(dec.eof(), Err(WsError::Incomplete));
        dec.decode(b"\x01\x01a").unwrap();
        assert_eq!(
            dec.eof(),
            Err(WsError::Incomplete),
            "a fragmented message is pending"
        );
        dec.decode(b"\x88\x00").unwrap();
        assert!(dec.is_closed());
        assert_eq!(dec.eof(), Ok(()));
    }

    #[test]
    fn decoder_stays_small() {
        assert!(
            std::mem::size_of::<FrameDecoder>() <= 216,
            "{}",
            std::mem::size_of::<FrameDecoder>()
        );
    }
}
