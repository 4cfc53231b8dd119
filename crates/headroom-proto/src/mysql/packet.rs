//! The packet framing: a 3-byte little-endian payload length, a 1-byte sequence id, the
//! payload. A payload of 16 MiB - 1 bytes or more is sent in fragments of [`MAX_FRAGMENT`]
//! bytes, the last one shorter (possibly empty), each with the next sequence id.
//! [`PacketDecoder`] cuts a byte stream split anywhere into whole payloads.

use super::MysqlError;

/// Longest fragment: a fragment of exactly this length is continued by the next one.
pub const MAX_FRAGMENT: u32 = 0xff_ffff;
/// Longest payload of a packet that is kept (every packet under [`Keep::All`]; terminators and
/// errors under [`Keep::Terminators`]), in bytes: 16 MiB, MySQL's default `max_allowed_packet`.
/// A real server's kept packets (handshake, OK, ERR, EOF, column count) are tens of bytes;
/// [`PacketDecoder::set_max_len`] lowers it.
pub const DEFAULT_MAX_PACKET_LEN: u32 = 16 << 20;
/// A split-packet buffer whose capacity grew beyond this is freed once its packet has been
/// returned, instead of being kept for the next split packet.
pub const RETAINED_CAPACITY: usize = 4 * 1024;

/// Which packets have their payload kept (returned in [`Packet::body`]); the others are
/// counted down as they arrive and returned with an empty body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every packet.
    All,
    /// Only packets that may end a run of rows or definitions: those starting with 0xFE (EOF,
    /// or OK under `CLIENT_DEPRECATE_EOF`) or 0xFF (ERR) whose first fragment is shorter than
    /// [`MAX_FRAGMENT`] (a row starting with 0xFE is a 9-byte length prefix, so at least 16 MiB),
    /// and empty packets. Rows and column definitions are skipped.
    Terminators,
}

/// One packet (all its fragments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Sequence id of its first fragment.
    pub seq: u8,
    /// Fragments it came in (1 unless its payload is 16 MiB - 1 bytes or more); the next
    /// packet's sequence id is `seq + fragments` (mod 256).
    pub fragments: u32,
    /// Payload length (all fragments).
    pub len: u64,
    /// Whether the payload was kept: then `body` is all of it; otherwise `body` is empty.
    pub kept: bool,
    pub body: &'a [u8],
}

impl Packet<'_> {
    /// Bytes it took on the wire: headers and payload.
    pub fn wire_len(&self) -> u64 {
        4 * u64::from(self.fragments) + self.len
    }

    /// The sequence id the packet after this one must carry.
    pub fn next_seq(&self) -> u8 {
        (u32::from(self.seq).wrapping_add(self.fragments) & 0xff) as u8
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a fragment's header, or inside it (`hdr_len` bytes of it in `hdr`).
    Header,
    /// Inside a fragment's payload: `left` bytes of it still to come.
    Body { left: u32 },
}

/// The packet being read.
#[derive(Debug, Clone, Copy, Default)]
struct Current {
    seq: u8,
    fragments: u32,
    len: u64,
    /// Length of the fragment being read.
    frag_len: u32,
    /// `None` until the payload's first byte decides it (under [`Keep::Terminators`]).
    keep: Option<bool>,
    /// A fragment of [`MAX_FRAGMENT`] bytes ended: the next header continues this packet.
    continued: bool,
    /// Sequence id the next fragment must carry.
    next_seq: u8,
}

/// Incremental packet decoder, one per connection. See the module documentation of
/// [`crate::mysql`] for its memory behaviour.
#[derive(Debug, Clone)]
pub struct PacketDecoder {
    state: State,
    hdr: [u8; 4],
    hdr_len: u8,
    cur: Current,
    keep: Keep,
    /// The payload of a kept packet that arrived split or in fragments; returned from here.
    buf: Vec<u8>,
    /// `buf` holds a payload already returned: clear it on the next call.
    buf_returned: bool,
    max_len: u32,
    /// The error that stopped the decoder; returned again by every later call.
    failed: Option<MysqlError>,
}

impl Default for PacketDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl PacketDecoder {
    /// A decoder keeping every payload up to [`DEFAULT_MAX_PACKET_LEN`].
    pub fn new() -> Self {
        PacketDecoder {
            state: State::Header,
            hdr: [0; 4],
            hdr_len: 0,
            cur: Current::default(),
            keep: Keep::All,
            buf: Vec::new(),
            buf_returned: false,
            max_len: DEFAULT_MAX_PACKET_LEN,
            failed: None,
        }
    }

    /// Longest kept payload accepted; longer is [`MysqlError::TooLong`]. Skipped packets have no
    /// limit (they cost no memory).
    pub fn set_max_len(&mut self, max_len: u32) {
        self.max_len = max_len;
    }

    /// Which packets are kept from the next packet on (a packet already started keeps its
    /// decision).
    pub fn set_keep(&mut self, keep: Keep) {
        self.keep = keep;
    }

    /// A packet has been started and not finished.
    pub fn in_progress(&self) -> bool {
        self.hdr_len > 0 || self.state != State::Header || self.cur.continued
    }

    /// Capacity of the split-packet buffer (0 when none is held), for memory accounting.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Feeds bytes; returns how many were consumed and the packet they completed, if any. The
    /// bytes after a complete packet are not consumed: call again with the rest.
    ///
    /// `None` comes with all of `input` consumed; `Some` with at least one byte consumed. The
    /// packet borrows from `input` (when it arrived whole) or from the decoder (when split or
    /// fragmented). After an `Err` every later call returns the same error.
    pub fn decode<'a>(
        &'a mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<Packet<'a>>), MysqlError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.buf_returned {
            self.buf_returned = false;
            self.buf.clear();
            if self.buf.capacity() > RETAINED_CAPACITY {
                self.buf = Vec::new();
            }
        }
        let mut pos = 0usize;
        loop {
            match self.state {
                State::Header => {
                    let have = usize::from(self.hdr_len);
                    let rest = input.get(pos..).unwrap_or_default();
                    let take = (4 - have).min(rest.len());
                    self.hdr[have..have + take].copy_from_slice(&rest[..take]);
                    pos += take;
                    if have + take < 4 {
                        self.hdr_len = (have + take) as u8;
                        return Ok((pos, None));
                    }
                    self.hdr_len = 0;
                    let frag_len = u32::from_le_bytes([self.hdr[0], self.hdr[1], self.hdr[2], 0]);
                    let seq = self.hdr[3];
                    if self.cur.continued {
                        if seq != self.cur.next_seq {
                            return self.fail(MysqlError::Sequence {
                                expected: self.cur.next_seq,
                                got: seq,
                            });
                        }
                        self.cur.continued = false;
                        self.cur.fragments = self.cur.fragments.saturating_add(1);
                        self.cur.len = self.cur.len.saturating_add(u64::from(frag_len));
                        if self.cur.keep == Some(true) && self.cur.len > u64::from(self.max_len) {
                            return self.fail(MysqlError::TooLong);
                        }
                    } else {
                        self.cur = Current {
                            seq,
                            fragments: 1,
                            len: u64::from(frag_len),
                            frag_len,
                            keep: match self.keep {
                                Keep::All => Some(true),
                                // Nothing to look at: kept, so that the connection sees it.
                                Keep::Terminators if frag_len == 0 => Some(true),
                                Keep::Terminators => None,
                            },
                            continued: false,
                            next_seq: seq,
                        };
                        if self.cur.keep == Some(true) && frag_len > self.max_len {
                            return self.fail(MysqlError::TooLong);
                        }
                    }
                    self.cur.frag_len = frag_len;
                    self.cur.next_seq = seq.wrapping_add(1);
                    self.state = State::Body { left: frag_len };
                }
                State::Body { left } => {
                    let rest = input.get(pos..).unwrap_or_default();
                    if self.cur.keep.is_none() {
                        let Some(&first) = rest.first() else {
                            return Ok((pos, None));
                        };
                        let keep = matches!(first, 0xfe | 0xff) && self.cur.frag_len < MAX_FRAGMENT;
                        if keep && self.cur.frag_len > self.max_len {
                            return self.fail(MysqlError::TooLong);
                        }
                        self.cur.keep = Some(keep);
                    }
                    let keep = self.cur.keep == Some(true);
                    let take = (left as usize).min(rest.len());
                    let left = left - take as u32;
                    let chunk = rest.get(..take).unwrap_or_default();
                    pos += take;
                    if left > 0 {
                        if keep {
                            self.buf.extend_from_slice(chunk);
                        }
                        self.state = State::Body { left };
                        return Ok((pos, None));
                    }
                    // The fragment is complete.
                    self.state = State::Header;
                    if self.cur.frag_len == MAX_FRAGMENT {
                        if keep {
                            self.buf.extend_from_slice(chunk);
                        }
                        self.cur.continued = true;
                        if pos == input.len() {
                            return Ok((pos, None));
                        }
                        continue;
                    }
                    let cur = self.cur;
                    let packet = |body| Packet {
                        seq: cur.seq,
                        fragments: cur.fragments,
                        len: cur.len,
                        kept: keep,
                        body,
                    };
                    if !keep {
                        return Ok((pos, Some(packet(&[]))));
                    }
                    if self.buf.is_empty() && take as u64 == cur.len {
                        // Fast path: the whole payload is in this input.
                        return Ok((pos, Some(packet(chunk))));
                    }
                    self.buf.extend_from_slice(chunk);
                    self.buf_returned = true;
                    return Ok((pos, Some(packet(&self.buf))));
                }
            }
        }
    }

    fn fail<'a>(&mut self, e: MysqlError) -> Result<(usize, Option<Packet<'a>>), MysqlError> {
        self.failed = Some(e);
        Err(e)
    }
}
