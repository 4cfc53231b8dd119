//! Packet framing: the fixed header (a type and flags byte, then the remaining length as a
//! variable byte integer of 1 to 4 bytes), then that many bytes. [`Framer`] cuts a byte stream
//! split anywhere into packets, borrowing a packet from the caller's input when it arrived
//! whole, and copying it into one reused buffer when it did not.

use super::MqttError;

/// Where the body of a complete packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loc {
    /// `input[start..end]` of the slice given to [`Framer::step`].
    Input { start: usize, end: usize },
    /// The framer's buffer ([`Framer::buffered`]).
    Buf,
}

/// A complete packet: its first byte (type << 4 | flags) and where its body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub byte0: u8,
    pub loc: Loc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a packet, or inside its fixed header (`hdr_len` bytes of it in `hdr`).
    Header,
    /// Inside a body: `left` of its `len` bytes still to come.
    Body { byte0: u8, len: u32, left: u32 },
}

#[derive(Debug)]
pub(crate) struct Framer {
    state: State,
    hdr: [u8; 5],
    hdr_len: u8,
    /// The body of a packet that arrived split; returned from here when complete.
    buf: Vec<u8>,
    /// `buf` holds a packet already returned: clear it on the next step.
    buf_returned: bool,
    /// Largest whole packet (fixed header included) accepted.
    pub max_packet: u32,
    /// `buf` is freed after returning a packet when its capacity grew beyond this.
    pub retained: usize,
}

impl Framer {
    pub fn new(max_packet: u32, retained: usize) -> Framer {
        Framer {
            state: State::Header,
            hdr: [0; 5],
            hdr_len: 0,
            buf: Vec::new(),
            buf_returned: false,
            max_packet,
            retained,
        }
    }

    /// A packet has been started and not finished.
    pub fn in_progress(&self) -> bool {
        self.hdr_len > 0 || matches!(self.state, State::Body { .. })
    }

    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The body of a packet returned as [`Loc::Buf`] (until the next step).
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// Feeds bytes; returns how many were consumed and the packet they completed, if any. The
    /// bytes after a complete packet are not consumed. `None` comes with all of `input`
    /// consumed, `Some` with at least one byte consumed.
    pub fn step(&mut self, input: &[u8]) -> Result<(usize, Option<Frame>), MqttError> {
        if self.buf_returned {
            self.buf_returned = false;
            self.buf.clear();
            if self.buf.capacity() > self.retained {
                self.buf = Vec::new();
            }
        }
        let mut pos = 0usize;
        if self.state == State::Header {
            let mut done = false;
            while let Some(&b) = input.get(pos) {
                pos += 1;
                let at = usize::from(self.hdr_len);
                if let Some(slot) = self.hdr.get_mut(at) {
                    *slot = b;
                }
                self.hdr_len += 1;
                if self.hdr_len >= 2 && b & 0x80 == 0 {
                    done = true;
                    break;
                }
                if self.hdr_len >= 5 {
                    // A fourth length byte that says "more follows".
                    return Err(MqttError::BadLength);
                }
            }
            if !done {
                return Ok((pos, None));
            }
            let n = usize::from(self.hdr_len);
            let mut len: u32 = 0;
            for (i, b) in self.hdr.get(1..n).unwrap_or_default().iter().enumerate() {
                len |= u32::from(b & 0x7f) << (7 * i);
            }
            self.hdr_len = 0;
            if u64::from(len) + n as u64 > u64::from(self.max_packet) {
                return Err(MqttError::TooLong);
            }
            self.state = State::Body {
                byte0: self.hdr[0],
                len,
                left: len,
            };
        }
        let State::Body { byte0, len, left } = self.state else {
            return Ok((pos, None)); // unreachable: the header branch always ends in Body
        };
        let rest = input.get(pos..).unwrap_or_default();
        let take = (left as usize).min(rest.len());
        let left = left - take as u32;
        if self.buf.is_empty() && left == 0 && take == len as usize {
            // Fast path: the whole body is in this input.
            self.state = State::Header;
            let frame = Frame {
                byte0,
                loc: Loc::Input {
                    start: pos,
                    end: pos + take,
                },
            };
            return Ok((pos + take, Some(frame)));
        }
        self.buf
            .extend_from_slice(rest.get(..take).unwrap_or_default());
        pos += take;
        if left > 0 {
            self.state = State::Body { byte0, len, left };
            return Ok((pos, None));
        }
        self.state = State::Header;
        self.buf_returned = true;
        Ok((
            pos,
            Some(Frame {
                byte0,
                loc: Loc::Buf,
            }),
        ))
    }
}
