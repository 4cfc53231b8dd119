//! HTTP/2 frame layout (RFC 9113 §4.1, §6): constants, the 9-byte header, and writers that
//! append whole frames to the caller's output buffer.

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Size of a frame header.
pub const HEADER_LEN: usize = 9;
/// Largest stream id and window (31 bits).
pub const MAX_31: u32 = (1 << 31) - 1;
/// SETTINGS_MAX_FRAME_SIZE bounds (RFC 9113 §6.5.2).
pub const MIN_MAX_FRAME: u32 = 1 << 14;
pub const MAX_MAX_FRAME: u32 = (1 << 24) - 1;
/// The initial window of every stream and of the connection (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    /// Parses the first 9 bytes of `b` (`None` if shorter). The reserved bit is dropped.
    pub fn parse(b: &[u8]) -> Option<Head> {
        let h = b.get(..HEADER_LEN)?;
        Some(Head {
            len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_31,
        })
    }
}

/// Appends a frame header. `len` must fit 24 bits (callers bound it by the peer's max size).
pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & MAX_31).to_be_bytes());
}

pub fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_head(out, params.len() * 6, SETTINGS, 0, 0);
    for (id, v) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, SETTINGS, ACK, 0);
}

pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & MAX_31).to_be_bytes());
}

pub fn write_ping(out: &mut Vec<u8>, flags: u8, payload: &[u8; 8]) {
    write_head(out, 8, PING, flags, 0);
    out.extend_from_slice(payload);
}

pub fn write_rst(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    write_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_31).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    write_head(
        out,
        data.len(),
        DATA,
        if end_stream { END_STREAM } else { 0 },
        stream,
    );
    out.extend_from_slice(data);
}

/// Appends a header block as HEADERS (+ CONTINUATION frames), each at most `max_frame` bytes.
pub fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let max_frame = max_frame.max(1);
    let mut chunks = block.chunks(max_frame);
    let first = chunks.next().unwrap_or_default();
    let mut rest = chunks.peekable();
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if rest.peek().is_none() {
        flags |= END_HEADERS;
    }
    write_head(out, first.len(), HEADERS, flags, stream);
    out.extend_from_slice(first);
    while let Some(chunk) = rest.next() {
        let flags = if rest.peek().is_none() {
            END_HEADERS
        } else {
            0
        };
        write_head(out, chunk.len(), CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}
