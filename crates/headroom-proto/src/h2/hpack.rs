//! HPACK (RFC 7541), written for this codec rather than taken from a crate.
//!
//! Why by hand: the maintained crates did not fit a sans-I/O codec that must not allocate per
//! request. `hpack` 0.3 (unmaintained since 2016) and its forks `fluke-hpack` 0.3 /
//! `loona-hpack` 0.4 decode Huffman strings into a fresh `Vec` per string and store every
//! dynamic-table entry as two new `Vec`s, `set_max_table_size` asserts (panics) on a bad size,
//! and their encoder never indexes (so every request would carry its literals again);
//! `httlib-hpack` 0.1 decodes into a `Vec<(Vec<u8>, Vec<u8>, u8)>` (three allocations per field);
//! the `h2` crate keeps its HPACK private. What is here is small: integers and strings (§5), a
//! dynamic table stored in one byte buffer (§4), the static table (Appendix A) and the Huffman
//! decoder (`huffman.rs`).
//!
//! * [`Decoder`]: decodes one complete header block (HEADERS + CONTINUATION payloads
//!   concatenated), calling back with each field as borrowed slices. A field's bytes come from
//!   the block itself, the static table, the dynamic table or a reused scratch buffer (Huffman
//!   strings), so a steady-state response allocates nothing. The dynamic table is bounded by the
//!   size we advertised; the list size by the caller's bound.
//! * [`Encoder`]: incremental indexing of every field that fits the table, so after the first
//!   request each field of a repeated request is one indexed byte (or two). It models the peer's
//!   decoder table exactly (same insertions and evictions) and signals size changes (§6.3)
//!   when the peer lowers its SETTINGS_HEADER_TABLE_SIZE. Literals are sent without Huffman
//!   coding: they go out once per connection.

use super::huffman;
use std::collections::VecDeque;

/// RFC 7541 §4.1: each entry costs its name and value lengths plus 32.
pub const ENTRY_OVERHEAD: usize = 32;

/// The static table (RFC 7541 Appendix A); index 1 is `STATIC[0]`.
pub const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// Why a header block cannot be decoded; every one is a COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("header block ends inside a field")]
    Truncated,
    #[error("HPACK integer too large")]
    IntegerOverflow,
    #[error("index 0 or beyond the tables")]
    BadIndex,
    #[error("invalid Huffman string")]
    Huffman,
    #[error("dynamic table size update above the advertised limit")]
    SizeUpdateTooLarge,
    #[error("dynamic table size update after a field")]
    SizeUpdateMisplaced,
}

// ---------------------------------------------------------------------------------------------
// Primitives (RFC 7541 §5)

/// Largest integer accepted: table sizes, indices and lengths all fit far below it, and the
/// bound keeps the shifts of the decoder in range.
const MAX_INT: u64 = (1 << 32) - 1;

/// Decodes an integer with an `n`-bit prefix at `block[*pos]`, advancing `pos`.
fn decode_int(block: &[u8], pos: &mut usize, n: u32) -> Result<usize, HpackError> {
    let first = *block.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let mask = (1u16 << n) - 1;
    let mut value = u64::from(u16::from(first) & mask);
    if value < u64::from(mask) {
        return Ok(value as usize);
    }
    let mut shift = 0u32;
    loop {
        let b = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if value > MAX_INT {
            return Err(HpackError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| HpackError::IntegerOverflow);
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
}

/// Appends an integer with an `n`-bit prefix; `flags` holds the bits above the prefix.
pub fn encode_int(value: usize, n: u32, flags: u8, out: &mut Vec<u8>) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Where a decoded string lives: a range of the block (raw) or of the scratch buffer (Huffman).
#[derive(Clone, Copy)]
enum Str {
    Block(usize, usize),
    Scratch(usize, usize),
}

impl Str {
    fn len(self) -> usize {
        match self {
            Str::Block(a, b) | Str::Scratch(a, b) => b - a,
        }
    }

    fn get<'a>(self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Str::Block(a, b) => block.get(a..b).unwrap_or_default(),
            Str::Scratch(a, b) => scratch.get(a..b).unwrap_or_default(),
        }
    }
}

fn decode_str(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Str, HpackError> {
    let huff = block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = decode_int(block, pos, 7)?;
    let end = pos.checked_add(len).ok_or(HpackError::Truncated)?;
    let raw = block.get(*pos..end).ok_or(HpackError::Truncated)?;
    *pos = end;
    if !huff {
        return Ok(Str::Block(end - len, end));
    }
    // The decoded string is at most 8/5 of the encoded one: bounded by the block.
    let start = scratch.len();
    huffman::decode(raw, scratch).map_err(|_| HpackError::Huffman)?;
    Ok(Str::Scratch(start, scratch.len()))
}

// ---------------------------------------------------------------------------------------------
// Dynamic table (RFC 7541 §2.3.2, §4)

/// Entries as byte ranges of one buffer, oldest first. The buffer only grows at its end; evicted
/// entries leave a dead prefix that is cut (one `copy_within`) once it outgrows the live part,
/// so inserting copies the new entry and, now and then, at most one table's worth of bytes —
/// and never allocates once the buffer reached about twice the table size.
#[derive(Debug, Default)]
pub struct DynTable {
    bytes: Vec<u8>,
    /// Offset in "virtual" bytes of `bytes[0]`: entries keep virtual offsets across compaction.
    base: usize,
    entries: VecDeque<Entry>,
    /// Sum of the entries' sizes (§4.1).
    size: usize,
    max_size: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    start: usize,
    name_len: usize,
    value_len: usize,
}

/// The name of a field being inserted.
#[derive(Clone, Copy)]
enum NameSrc<'a> {
    Bytes(&'a [u8]),
    /// Index into the dynamic table (0 = newest): copied before anything is evicted (§4.4).
    Dyn(usize),
}

impl DynTable {
    pub fn new(max_size: usize) -> DynTable {
        DynTable {
            max_size,
            ..DynTable::default()
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Entry `i` (0 = newest) as (name, value).
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let n = self.entries.len();
        let e = self.entries.get(n.checked_sub(1)?.checked_sub(i)?)?;
        let start = e.start.checked_sub(self.base)?;
        let mid = start + e.name_len;
        let end = mid + e.value_len;
        Some((self.bytes.get(start..mid)?, self.bytes.get(mid..end)?))
    }

    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict(max_size);
    }

    fn evict(&mut self, to: usize) {
        while self.size > to {
            match self.entries.pop_front() {
                Some(e) => self.size -= e.name_len + e.value_len + ENTRY_OVERHEAD,
                None => {
                    self.size = 0;
                    break;
                }
            }
        }
        if self.entries.is_empty() {
            self.base += self.bytes.len();
            self.bytes.clear();
        }
    }

    fn insert(&mut self, name: NameSrc<'_>, value: &[u8]) {
        let name_len = match name {
            NameSrc::Bytes(b) => b.len(),
            NameSrc::Dyn(i) => self.get(i).map_or(0, |(n, _)| n.len()),
        };
        let entry_size = name_len + value.len() + ENTRY_OVERHEAD;
        if entry_size > self.max_size {
            // §4.4: an entry larger than the table empties it and is not added.
            self.evict(0);
            return;
        }
        // Cut the dead prefix once it is larger than what lives after it.
        let dead = self
            .entries
            .front()
            .map_or(self.bytes.len(), |e| e.start - self.base);
        if dead > 0 && dead >= self.bytes.len() - dead {
            self.bytes.copy_within(dead.., 0);
            self.bytes.truncate(self.bytes.len() - dead);
            self.base += dead;
        }
        let start = self.base + self.bytes.len();
        match name {
            NameSrc::Bytes(b) => self.bytes.extend_from_slice(b),
            NameSrc::Dyn(i) => {
                let n = self.entries.len();
                if let Some(e) = n
                    .checked_sub(1)
                    .and_then(|last| last.checked_sub(i))
                    .and_then(|k| self.entries.get(k).copied())
                {
                    let from = e.start - self.base;
                    self.bytes.extend_from_within(from..from + e.name_len);
                }
            }
        }
        self.bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            start,
            name_len,
            value_len: value.len(),
        });
        self.size += entry_size;
        self.evict(self.max_size);
    }

    /// Index (0 = newest) of an entry equal to (name, value), and of one with that name.
    fn find(&self, name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
        let mut name_hit = None;
        let n = self.entries.len();
        for (k, e) in self.entries.iter().enumerate().rev() {
            if e.name_len != name.len() {
                continue;
            }
            let start = e.start - self.base;
            let Some(en) = self.bytes.get(start..start + e.name_len) else {
                continue;
            };
            if en != name {
                continue;
            }
            let i = n - 1 - k;
            name_hit.get_or_insert(i);
            if e.value_len == value.len()
                && self
                    .bytes
                    .get(start + e.name_len..start + e.name_len + e.value_len)
                    == Some(value)
            {
                return (Some(i), name_hit);
            }
        }
        (None, name_hit)
    }
}

// ---------------------------------------------------------------------------------------------
// Decoder

/// Decodes header blocks from the peer (see the module comment).
#[derive(Debug)]
pub struct Decoder {
    table: DynTable,
    /// The largest table size the peer may ask for (our SETTINGS_HEADER_TABLE_SIZE).
    max_allowed: usize,
    /// Huffman-decoded strings of the current field (reused).
    scratch: Vec<u8>,
}

impl Decoder {
    /// A decoder whose peer may use a table of up to `max_allowed` bytes. The table starts at
    /// the protocol's default of 4,096 bytes (or `max_allowed` if smaller): the peer's encoder
    /// assumes that size until it sends a size update, and both sides must evict alike.
    pub fn new(max_allowed: usize) -> Decoder {
        Decoder {
            table: DynTable::new(max_allowed.min(4096)),
            max_allowed,
            scratch: Vec::new(),
        }
    }

    pub fn table(&self) -> &DynTable {
        &self.table
    }

    /// Changes the bound for size updates (when our advertised setting takes effect).
    pub fn set_max_allowed(&mut self, max_allowed: usize) {
        self.max_allowed = max_allowed;
        if self.table.max_size() > max_allowed {
            self.table.set_max_size(max_allowed);
        }
    }

    /// Decodes one whole header block, calling `on(name, value)` for each field while the sum
    /// of field sizes (§4.1 sizes, as SETTINGS_MAX_HEADER_LIST_SIZE counts them) stays within
    /// `max_list`. Past it, the block is still decoded to the end (so that the dynamic table
    /// stays in step with the peer's) but `on` is no longer called, and the result is
    /// `Ok(false)`. An `Err` leaves the table out of step: the connection must die.
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list: usize,
        on: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<bool, HpackError> {
        let mut pos = 0usize;
        let mut list = 0usize;
        let mut within = true;
        let mut any_field = false;
        while let Some(&b) = block.get(pos) {
            self.scratch.clear();
            if b & 0x80 != 0 {
                // §6.1 indexed field.
                let idx = decode_int(block, &mut pos, 7)?;
                let (name, value) = self.lookup(idx)?;
                list = list.saturating_add(name.len() + value.len() + ENTRY_OVERHEAD);
                within &= list <= max_list;
                if within {
                    on(name, value);
                }
                any_field = true;
                continue;
            }
            if b & 0xe0 == 0x20 {
                // §6.3 dynamic table size update: only before the first field.
                if any_field {
                    return Err(HpackError::SizeUpdateMisplaced);
                }
                let size = decode_int(block, &mut pos, 5)?;
                if size > self.max_allowed {
                    return Err(HpackError::SizeUpdateTooLarge);
                }
                self.table.set_max_size(size);
                continue;
            }
            // §6.2 literals: with incremental indexing (01), without (0000), never (0001).
            let (index, prefix) = if b & 0xc0 == 0x40 {
                (true, 6)
            } else {
                (false, 4)
            };
            let name_idx = decode_int(block, &mut pos, prefix)?;
            let name = if name_idx == 0 {
                Some(decode_str(block, &mut pos, &mut self.scratch)?)
            } else {
                // Validate now; resolve after the value (the table does not change meanwhile).
                self.lookup(name_idx)?;
                None
            };
            let value = decode_str(block, &mut pos, &mut self.scratch)?;
            let Decoder { table, scratch, .. } = self;
            let name_bytes = match name {
                Some(s) => s.get(block, scratch),
                None => lookup_in(table, name_idx)?.0,
            };
            let value_bytes = value.get(block, scratch);
            list = list.saturating_add(name_bytes.len() + value.len() + ENTRY_OVERHEAD);
            within &= list <= max_list;
            if within {
                on(name_bytes, value_bytes);
            }
            any_field = true;
            if index {
                let src = match name {
                    Some(s) => NameSrc::Bytes(s.get(block, scratch)),
                    None if name_idx > STATIC.len() => NameSrc::Dyn(name_idx - STATIC.len() - 1),
                    None => NameSrc::Bytes(STATIC.get(name_idx - 1).map_or(&[][..], |e| e.0)),
                };
                table.insert(src, value_bytes);
            }
        }
        Ok(within)
    }

    fn lookup(&self, idx: usize) -> Result<(&[u8], &[u8]), HpackError> {
        lookup_in(&self.table, idx)
    }
}

fn lookup_in(table: &DynTable, idx: usize) -> Result<(&[u8], &[u8]), HpackError> {
    match idx {
        0 => Err(HpackError::BadIndex),
        i if i <= STATIC.len() => Ok(STATIC[i - 1]),
        i => table.get(i - STATIC.len() - 1).ok_or(HpackError::BadIndex),
    }
}

// ---------------------------------------------------------------------------------------------
// Encoder

/// Encodes our request header blocks (see the module comment).
#[derive(Debug)]
pub struct Encoder {
    table: DynTable,
    /// The most we let our table grow to, whatever the peer allows.
    own_cap: usize,
    /// Size updates to signal at the start of the next block: the smallest size the table went
    /// through since the last block, and the final one (§4.2).
    pending: Option<(usize, usize)>,
}

impl Encoder {
    /// An encoder for a peer whose decoder table is the default 4,096 bytes, never using more
    /// than `own_cap` bytes.
    pub fn new(own_cap: usize) -> Encoder {
        let size = own_cap.min(4096);
        let mut e = Encoder {
            table: DynTable::new(4096),
            own_cap,
            pending: None,
        };
        if size != 4096 {
            e.table.set_max_size(size);
            e.pending = Some((size, size));
        }
        e
    }

    pub fn table(&self) -> &DynTable {
        &self.table
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE changed: follow it (within our cap).
    pub fn set_peer_max(&mut self, peer_max: usize) {
        let size = peer_max.min(self.own_cap);
        if size == self.table.max_size() && self.pending.is_none() {
            return;
        }
        self.table.set_max_size(size);
        self.pending = Some(match self.pending {
            Some((min, _)) => (min.min(size), size),
            None => (size, size),
        });
    }

    /// Starts a header block: writes the pending size updates, if any.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        if let Some((min, last)) = self.pending.take() {
            if min < last {
                encode_int(min, 5, 0x20, out);
            }
            encode_int(last, 5, 0x20, out);
        }
    }

    /// Appends one field. `name` must be lowercase (HTTP/2 requires it; the caller folds it).
    pub fn field(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let (exact, dyn_name) = self.table.find(name, value);
        if let Some(i) = exact {
            encode_int(i + STATIC.len() + 1, 7, 0x80, out);
            return;
        }
        let mut static_name = None;
        for (k, (n, v)) in STATIC.iter().enumerate() {
            if *n == name {
                if *v == value {
                    encode_int(k + 1, 7, 0x80, out);
                    return;
                }
                static_name.get_or_insert(k + 1);
            }
        }
        let name_idx = static_name.or(dyn_name.map(|i| i + STATIC.len() + 1));
        let fits = name.len() + value.len() + ENTRY_OVERHEAD <= self.table.max_size();
        let (prefix, flags) = if fits { (6, 0x40) } else { (4, 0x00) };
        match name_idx {
            Some(i) => encode_int(i, prefix, flags, out),
            None => {
                encode_int(0, prefix, flags, out);
                encode_str(name, out);
            }
        }
        encode_str(value, out);
        if fits {
            self.table.insert(NameSrc::Bytes(name), value);
        }
    }
}

fn encode_str(s: &[u8], out: &mut Vec<u8>) {
    encode_int(s.len(), 7, 0, out);
    out.extend_from_slice(s);
}

#[cfg(test)]
#[path = "hpack_tests.rs"]
mod tests;
