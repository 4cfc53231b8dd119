//! The wire format shared by the encoders and the decoder: frame constants, a bounds-checked
//! reader of the spec's data types, the field-table walker, and the append-only writers.
//!
//! A frame (spec 2.3.5, 4.2.3): type octet, channel short, payload size long, payload, the
//! frame-end octet 0xCE. Integers are big-endian. A method payload is class-id short,
//! method-id short, then the arguments; consecutive `bit` arguments share octets (first bit in
//! the lowest bit).

/// What the client sends first: "AMQP", 0, then protocol version 0-9-1.
pub const PROTOCOL_HEADER: &[u8; 8] = b"AMQP\0\0\x09\x01";
/// Every peer accepts frames of this size (spec `frame-min-size`), so no negotiation may go
/// below it.
pub const FRAME_MIN_SIZE: u32 = 4096;
/// The largest frame we accept and announce in Tune-Ok (128 KiB, RabbitMQ's own default): the
/// negotiated value is the smaller of this and the server's.
pub const DEFAULT_FRAME_MAX: u32 = 128 * 1024;
/// Deepest nesting of field tables and arrays accepted in what the server sends (RabbitMQ's
/// server properties nest 2 deep).
pub const MAX_TABLE_DEPTH: u8 = 8;
/// Longest field table accepted (bytes, its length prefix excluded). RabbitMQ's server
/// properties are about 500 bytes.
pub const DEFAULT_MAX_TABLE_LEN: u32 = 64 * 1024;

pub(super) const FRAME_METHOD: u8 = 1;
pub(super) const FRAME_HEADER: u8 = 2;
pub(super) const FRAME_BODY: u8 = 3;
pub(super) const FRAME_HEARTBEAT: u8 = 8;
pub(super) const FRAME_END: u8 = 0xCE;
/// Type, channel and size.
pub(super) const FRAME_HEADER_LEN: usize = 7;
/// Header and end octet: what a frame adds to its payload.
pub(super) const FRAME_OVERHEAD: u32 = 8;

/// A cursor over a payload: every read checks the length first and returns `None` past the end.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let b = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(b)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.bytes(N)?.try_into().ok()
    }

    pub fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.array()?))
    }

    /// A short string: length octet, bytes.
    pub fn shortstr(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.bytes(usize::from(n))
    }

    /// A long string: length long, bytes.
    pub fn longstr(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()?;
        self.bytes(usize::try_from(n).ok()?)
    }

    /// Where a short string starts (its bytes, after the length octet) and its length, for an
    /// event that refers back into the payload.
    pub fn shortstr_at(&mut self) -> Option<(u32, u8)> {
        let n = self.u8()?;
        let at = u32::try_from(self.pos).ok()?;
        self.bytes(usize::from(n))?;
        Some((at, n))
    }
}

/// Why a field table was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TableError {
    /// It does not parse.
    Malformed,
    /// Deeper than [`MAX_TABLE_DEPTH`] or longer than the limit.
    Limit,
}

/// Walks (validates and skips) a field table at the reader: a long size, then that many bytes of
/// (short-string name, type octet, value). Nothing is kept.
pub(super) fn skip_table(r: &mut Reader<'_>, max_len: u32) -> Result<(), TableError> {
    let len = r.u32().ok_or(TableError::Malformed)?;
    if len > max_len {
        return Err(TableError::Limit);
    }
    let body = r
        .bytes(usize::try_from(len).map_err(|_| TableError::Limit)?)
        .ok_or(TableError::Malformed)?;
    table_fields(body, 1)
}

fn table_fields(body: &[u8], depth: u8) -> Result<(), TableError> {
    if depth > MAX_TABLE_DEPTH {
        return Err(TableError::Limit);
    }
    let mut r = Reader::new(body);
    while !r.is_empty() {
        r.shortstr().ok_or(TableError::Malformed)?;
        field_value(&mut r, depth)?;
    }
    Ok(())
}

fn array_values(body: &[u8], depth: u8) -> Result<(), TableError> {
    if depth > MAX_TABLE_DEPTH {
        return Err(TableError::Limit);
    }
    let mut r = Reader::new(body);
    while !r.is_empty() {
        field_value(&mut r, depth)?;
    }
    Ok(())
}

/// One typed value (type octet, value), the types RabbitMQ reads and writes (its errata of
/// spec 4.2.1): t b B s u I i l L f d D S T F A x V.
fn field_value(r: &mut Reader<'_>, depth: u8) -> Result<(), TableError> {
    const BAD: TableError = TableError::Malformed;
    let fixed = match r.u8().ok_or(BAD)? {
        b'V' => 0,
        b't' | b'b' | b'B' => 1,
        b's' | b'u' => 2,
        b'I' | b'i' | b'f' => 4,
        b'D' => 5,
        b'l' | b'L' | b'd' | b'T' => 8,
        b'S' | b'x' => {
            r.longstr().ok_or(BAD)?;
            return Ok(());
        }
        b'F' => return table_fields(r.longstr().ok_or(BAD)?, depth + 1),
        b'A' => return array_values(r.longstr().ok_or(BAD)?, depth + 1),
        _ => return Err(BAD),
    };
    r.bytes(fixed).ok_or(BAD)?;
    Ok(())
}

// ---- writers: append to the caller's buffer ----

pub(super) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(super) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(super) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// A short string; longer than 255 bytes is cut at 255 (names and routing keys longer than that
/// cannot be sent: the server would refuse them anyway).
pub(super) fn put_shortstr(out: &mut Vec<u8>, s: &[u8]) {
    let s = s.get(..255).unwrap_or(s);
    out.push(s.len() as u8);
    out.extend_from_slice(s);
}

/// A long string (at most 4 GiB - 1, far beyond any frame).
pub(super) fn put_longstr(out: &mut Vec<u8>, s: &[u8]) {
    put_u32(out, u32::try_from(s.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(s);
}

/// Starts a frame: type, channel, a size patched by [`end_frame`]. Returns where it starts.
pub(super) fn start_frame(out: &mut Vec<u8>, typ: u8, channel: u16) -> usize {
    let at = out.len();
    out.push(typ);
    put_u16(out, channel);
    put_u32(out, 0);
    at
}

/// Ends the frame started at `at`: patches its payload size, appends the end octet.
pub(super) fn end_frame(out: &mut Vec<u8>, at: usize) {
    let size = out.len() - at - FRAME_HEADER_LEN;
    let size = u32::try_from(size).unwrap_or(u32::MAX).to_be_bytes();
    if let Some(slot) = out.get_mut(at + 3..at + FRAME_HEADER_LEN) {
        slot.copy_from_slice(&size);
    }
    out.push(FRAME_END);
}

/// Starts a method frame: frame header, class-id, method-id.
pub(super) fn start_method(out: &mut Vec<u8>, channel: u16, class: u16, method: u16) -> usize {
    let at = start_frame(out, FRAME_METHOD, channel);
    put_u16(out, class);
    put_u16(out, method);
    at
}

/// Starts a field table: a size patched by [`end_table`]. Returns where it starts.
pub(super) fn start_table(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    put_u32(out, 0);
    at
}

pub(super) fn end_table(out: &mut [u8], at: usize) {
    let size = out.len() - at - 4;
    let size = u32::try_from(size).unwrap_or(u32::MAX).to_be_bytes();
    if let Some(slot) = out.get_mut(at..at + 4) {
        slot.copy_from_slice(&size);
    }
}

/// A table field whose value is a long string (`S`).
pub(super) fn put_field_str(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    put_shortstr(out, name.as_bytes());
    out.push(b'S');
    put_longstr(out, value);
}

/// A table field whose value is a boolean (`t`).
pub(super) fn put_field_bool(out: &mut Vec<u8>, name: &str, value: bool) {
    put_shortstr(out, name.as_bytes());
    out.push(b't');
    out.push(u8::from(value));
}
