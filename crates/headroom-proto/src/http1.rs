//! HTTP/1.1 client codec (API stub; implementation in progress).

use headroom_core::HttpRequest;

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
pub fn encode_request(req: &HttpRequest, keep_alive: bool, out: &mut Vec<u8>) {
    let _ = (req, keep_alive, out);
    unimplemented!()
}

/// Incremental response decoder, one per connection.
#[derive(Debug, Default)]
pub struct ResponseDecoder {}

impl ResponseDecoder {
    pub fn new() -> Self {
        Self::default()
    }
    /// The next response answers a HEAD request (no body whatever the headers say).
    pub fn set_head_request(&mut self, head: bool) {
        let _ = head;
    }
    /// Feed bytes. Returns how many were consumed and whether a response completed. When a
    /// response completes, the bytes after it (a pipelined next response) are not consumed: call
    /// again with the rest.
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Decoded), ProtoError> {
        let _ = input;
        unimplemented!()
    }
    /// The peer closed the connection: completes a body delimited by close, or returns
    /// `Err(Incomplete)` if a response was in progress, or `Ok(None)` if none was.
    pub fn eof(&mut self) -> Result<Option<ResponseMeta>, ProtoError> {
        unimplemented!()
    }
    /// Some bytes of a response have been received and it is not complete yet.
    pub fn in_progress(&self) -> bool {
        false
    }
    /// Forget any partial response (after an error or a reconnect); keeps buffer capacity.
    pub fn reset(&mut self) {}
}
