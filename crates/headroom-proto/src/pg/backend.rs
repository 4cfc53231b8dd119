//! The backend message framing: a type byte, a 32-bit big-endian length that counts itself and
//! the body, the body. [`MessageDecoder`] cuts a byte stream split anywhere into messages.

use super::PgError;

/// Longest body of a message whose body is kept (every type not set to skip), in bytes.
/// Generous for what a client keeps (an ErrorResponse with detail and context, a RowDescription
/// of a few thousand columns); [`MessageDecoder::set_max_len`] changes it.
pub const DEFAULT_MAX_MESSAGE_LEN: u32 = 1 << 20;
/// A split-message buffer whose capacity grew beyond this is freed once its message has been
/// returned, instead of being kept for the next split message.
pub const RETAINED_CAPACITY: usize = 4 * 1024;

/// One backend message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// The type byte: `R` authentication, `Z` ReadyForQuery, `D` DataRow, ...
    pub tag: u8,
    /// The body's length in bytes (the wire length minus the 4 bytes of the length itself).
    pub len: u32,
    /// The body, or empty for a type set to skip ([`MessageDecoder::set_skip`]) whatever its
    /// length.
    pub body: &'a [u8],
}

impl Message<'_> {
    /// Bytes the message took on the wire: type byte, length and body.
    pub fn wire_len(&self) -> u64 {
        5 + u64::from(self.len)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a message, or inside its 5-byte header (`hdr_len` bytes of it in `hdr`).
    Header,
    /// Inside a body: `left` of its `len` bytes still to come; `keep`: copy them to `buf`.
    Body {
        tag: u8,
        len: u32,
        left: u32,
        keep: bool,
    },
}

/// Incremental backend message decoder, one per connection. See the module documentation of
/// [`crate::pg`] for its memory behaviour.
#[derive(Debug, Clone)]
pub struct MessageDecoder {
    state: State,
    hdr: [u8; 5],
    hdr_len: u8,
    /// The body of a kept message that arrived split; returned from here when complete.
    buf: Vec<u8>,
    /// `buf` holds a message already returned: clear it on the next call.
    buf_returned: bool,
    max_len: u32,
    /// Message types whose bodies are counted down instead of kept, one bit per byte value.
    skip: [u64; 4],
    /// The error that stopped the decoder; returned again by every later call.
    failed: Option<PgError>,
}

impl Default for MessageDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl MessageDecoder {
    /// A decoder keeping every body up to [`DEFAULT_MAX_MESSAGE_LEN`].
    pub fn new() -> Self {
        MessageDecoder {
            state: State::Header,
            hdr: [0; 5],
            hdr_len: 0,
            buf: Vec::new(),
            buf_returned: false,
            max_len: DEFAULT_MAX_MESSAGE_LEN,
            skip: [0; 4],
            failed: None,
        }
    }

    /// Longest kept body accepted; longer is [`PgError::TooLong`]. Skipped types have no limit
    /// (they cost no memory).
    pub fn set_max_len(&mut self, max_len: u32) {
        self.max_len = max_len;
    }

    /// Whether bodies of messages of type `tag` are skipped: counted down as they arrive, never
    /// copied, and returned as an empty [`Message::body`] (with the true [`Message::len`]).
    pub fn set_skip(&mut self, tag: u8, skip: bool) {
        let (word, bit) = (usize::from(tag >> 6), tag & 63);
        if skip {
            self.skip[word] |= 1 << bit;
        } else {
            self.skip[word] &= !(1 << bit);
        }
    }

    fn skipped(&self, tag: u8) -> bool {
        self.skip[usize::from(tag >> 6)] & (1 << (tag & 63)) != 0
    }

    /// A message has been started and not finished.
    pub fn in_progress(&self) -> bool {
        self.hdr_len > 0 || matches!(self.state, State::Body { .. })
    }

    /// Capacity of the split-message buffer (0 when none is held), for memory accounting.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Feeds bytes; returns how many were consumed and the message they completed, if any.
    /// The bytes after a complete message are not consumed: call again with the rest.
    ///
    /// `None` comes with all of `input` consumed; `Some` with at least one byte consumed. The
    /// message borrows from `input` (when it arrived whole) or from the decoder (when split).
    /// After an `Err` every later call returns the same error.
    pub fn decode<'a>(
        &'a mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<Message<'a>>), PgError> {
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
        if self.state == State::Header {
            let have = usize::from(self.hdr_len);
            let take = (5 - have).min(input.len());
            self.hdr[have..have + take].copy_from_slice(&input[..take]);
            pos = take;
            if have + take < 5 {
                self.hdr_len = (have + take) as u8;
                return Ok((pos, None));
            }
            self.hdr_len = 0;
            let tag = self.hdr[0];
            let wire = u32::from_be_bytes([self.hdr[1], self.hdr[2], self.hdr[3], self.hdr[4]]);
            if !(4..=i32::MAX as u32).contains(&wire) {
                return self.fail(PgError::BadLength);
            }
            let len = wire - 4;
            let keep = !self.skipped(tag);
            if keep && len > self.max_len {
                return self.fail(PgError::TooLong);
            }
            self.state = State::Body {
                tag,
                len,
                left: len,
                keep,
            };
        }
        let State::Body {
            tag,
            len,
            left,
            keep,
        } = self.state
        else {
            return Ok((pos, None)); // unreachable: the header branch always ends in Body
        };
        let rest = input.get(pos..).unwrap_or_default();
        let take = (left as usize).min(rest.len());
        let left = left - take as u32;
        pos += take;
        if !keep {
            if left > 0 {
                self.state = State::Body {
                    tag,
                    len,
                    left,
                    keep,
                };
                return Ok((pos, None));
            }
            self.state = State::Header;
            return Ok((
                pos,
                Some(Message {
                    tag,
                    len,
                    body: &[],
                }),
            ));
        }
        if self.buf.is_empty() && left == 0 && take == len as usize {
            // Fast path: the whole body is in this input.
            self.state = State::Header;
            let body = rest.get(..take).unwrap_or_default();
            return Ok((pos, Some(Message { tag, len, body })));
        }
        self.buf
            .extend_from_slice(rest.get(..take).unwrap_or_default());
        if left > 0 {
            self.state = State::Body {
                tag,
                len,
                left,
                keep,
            };
            return Ok((pos, None));
        }
        self.state = State::Header;
        self.buf_returned = true;
        Ok((
            pos,
            Some(Message {
                tag,
                len,
                body: &self.buf,
            }),
        ))
    }

    fn fail<'a>(&mut self, e: PgError) -> Result<(usize, Option<Message<'a>>), PgError> {
        self.failed = Some(e);
        Err(e)
    }
}
