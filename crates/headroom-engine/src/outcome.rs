//! What one `feed` of a protocol completed ([`Outcome`]), and the capture bound every protocol
//! shares. Its own module so that the protocols (`http2`, the links) and the calling convention
//! over them (`proto`) depend on it, and not on each other.

use headroom_core::{ErrorKind, ProtoCounter};
use headroom_metrics::Counters;
use headroom_proto::encoding::BodyStats;

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
    /// A reply completed but cannot be taken as the server's answer (its body did not decode):
    /// the request failed with `kind`. HTTP/2 only; over HTTP/1.1 the connection fails.
    Failed { stream: u32, kind: ErrorKind },
    /// HTTP/2: the server reset a stream with `code`.
    Reset { stream: u32, code: u32 },
    /// HTTP/2: the server sent GOAWAY with `code`; the streams above its last id were not
    /// processed (the codec's `Reset`s with REFUSED_STREAM follow for each).
    GoAway { code: u32 },
    /// The server ended the session unasked (XMPP `</stream:stream>`, a WebSocket close).
    Closed,
    /// Bytes after every reply that was asked for: the connection cannot be trusted for reuse.
    Unexpected,
    /// A protocol's setup asks for TLS now (MySQL's SSLRequest is written first).
    StartTls,
}

/// Counts one encoded response body; one that did not decode (corrupt, truncated, a bad gzip
/// checksum) fails its request as a `protocol` error, as curl's `--compressed` fails it: the
/// reply is not what the server meant to send.
pub(crate) fn count_encoded(c: &mut Counters, s: BodyStats) -> Result<(), ErrorKind> {
    c.proto(ProtoCounter::HttpCompressedResponses, 1);
    c.proto(ProtoCounter::HttpBodyBytesEncoded, s.encoded);
    c.proto(ProtoCounter::HttpBodyBytesDecoded, s.decoded);
    match s.error {
        None => Ok(()),
        Some(_) => Err(ErrorKind::Protocol),
    }
}
