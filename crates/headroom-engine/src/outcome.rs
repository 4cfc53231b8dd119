//! What one `feed` of a protocol completed ([`Outcome`]), and the capture bound every protocol
//! shares. Its own module so that the protocols (`http2`, the links) and the calling convention
//! over them (`proto`) depend on it, and not on each other.

/// Raw replies and HTTP responses kept for extraction are bounded per batch.
pub(crate) const CAPTURE_LIMIT: usize = 4 << 20;

/// What one `feed` completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The protocol's setup (login, startup, upgrade) finished: requests may be sent.
    Ready,
    /// A reply completed. `stream` is the HTTP/2 stream (0 elsewhere); `status` the HTTP status
    /// (none for raw and session protocols); `keep_alive` false when the server will close;
    /// `ok` false for an error reply (iq error, SQL error).
    Reply {
        stream: u32,
        status: Option<u16>,
        keep_alive: bool,
        ok: bool,
    },
    /// HTTP/2: the server reset a stream with `code`.
    Reset { stream: u32, code: u32 },
    /// HTTP/2: the server sent GOAWAY with `code`; the streams above its last id were not
    /// processed (the codec's `Reset`s with REFUSED_STREAM follow for each).
    GoAway { code: u32 },
    /// The server ended the session unasked (XMPP `</stream:stream>`, a WebSocket close).
    Closed,
    /// Bytes after every reply that was asked for: the connection cannot be trusted for reuse.
    Unexpected,
}
