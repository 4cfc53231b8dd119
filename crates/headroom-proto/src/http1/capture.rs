//! Opt-in capture of selected response header values (`Set-Cookie`, `Location`,
//! `WWW-Authenticate`, `Content-Encoding`) for the cookie jar, redirects, auth and compression.
//!
//! Off by default: a decoder without capture carries one `None` pointer and pays one branch per
//! head, so URL mode's hot path is unchanged. Turned on, the values of each response head are
//! copied into one byte buffer owned by the decoder, cleared when the next head is parsed. The
//! buffer grows on first need up to its byte bound and keeps its capacity, so a warm decoder
//! captures without allocating. A value that does not fit is dropped whole (a truncated
//! `Set-Cookie` would be a different cookie) and counted, never an error: the response itself
//! is fine, the caller decides what a lost cookie means.
//!
//! Capturing `Content-Encoding` also turns on body decoding: the capture box then holds a
//! [`ContentDecoder`] that the decoder hands each body's bytes to (see `crate::encoding`), and
//! the coding is taken from the parsed head itself, so a value dropped for the byte bound still
//! decodes.

use crate::encoding::{Coding, ContentDecoder};

/// A response header the decoder can capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderId {
    SetCookie,
    Location,
    WwwAuthenticate,
    ContentEncoding,
}

impl HeaderId {
    pub const ALL: [HeaderId; 4] = [
        HeaderId::SetCookie,
        HeaderId::Location,
        HeaderId::WwwAuthenticate,
        HeaderId::ContentEncoding,
    ];

    /// The field name as usually spelled (matching is case-insensitive).
    pub const fn name(self) -> &'static str {
        match self {
            HeaderId::SetCookie => "Set-Cookie",
            HeaderId::Location => "Location",
            HeaderId::WwwAuthenticate => "WWW-Authenticate",
            HeaderId::ContentEncoding => "Content-Encoding",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }

    /// The id of a field name (case-insensitive), if it is one of ours.
    pub fn of(name: &[u8]) -> Option<HeaderId> {
        // Most fields of a head are none of these: their length alone says so.
        if !matches!(name.len(), 8 | 10 | 16) {
            return None;
        }
        HeaderId::ALL
            .into_iter()
            .find(|id| name.eq_ignore_ascii_case(id.name().as_bytes()))
    }
}

/// A set of [`HeaderId`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct HeaderSet(u8);

impl HeaderSet {
    pub const NONE: HeaderSet = HeaderSet(0);
    pub const ALL: HeaderSet = HeaderSet(0b1111);

    /// This set and `id`.
    pub const fn with(self, id: HeaderId) -> HeaderSet {
        HeaderSet(self.0 | id.bit())
    }

    pub const fn contains(self, id: HeaderId) -> bool {
        self.0 & id.bit() != 0
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl From<HeaderId> for HeaderSet {
    fn from(id: HeaderId) -> HeaderSet {
        HeaderSet::NONE.with(id)
    }
}

impl FromIterator<HeaderId> for HeaderSet {
    fn from_iter<I: IntoIterator<Item = HeaderId>>(iter: I) -> HeaderSet {
        iter.into_iter().fold(HeaderSet::NONE, HeaderSet::with)
    }
}

/// Default bound on the captured bytes of one response: room for a few full-size (4 KiB)
/// cookies, far more than a login response sets.
pub const DEFAULT_CAPTURE_BYTES: usize = 16 * 1024;

/// One captured value: which header, and where its bytes sit in `Capture::bytes`.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: HeaderId,
    start: u32,
    end: u32,
}

/// The capture state of a decoder (boxed, so a decoder without it stays small).
#[derive(Debug)]
pub struct Capture {
    wanted: HeaderSet,
    /// Bound on `bytes.len()`; also the most capacity `bytes` is ever given.
    max_bytes: usize,
    bytes: Vec<u8>,
    /// At most `MAX_HEADERS` per head, so bounded by the head parser.
    entries: Vec<Entry>,
    /// Values of the current head that did not fit in `max_bytes`.
    dropped: u32,
    /// Of those, `Set-Cookie`s: cookies the jar never sees (counted as rejected by the caller).
    dropped_cookies: u32,
    /// Present while `Content-Encoding` is wanted: the bodies' decoder.
    pub(super) content: Option<ContentDecoder>,
    /// The coding the current head's `Content-Encoding` names (`None`: none, one headroom does
    /// not decode, or several codings).
    coding: Option<Coding>,
    /// `Content-Encoding` fields of the head begun by [`Capture::begin`] so far.
    codings: u32,
}

impl Capture {
    pub fn new(wanted: HeaderSet, max_bytes: usize) -> Capture {
        // u32 offsets: a bound past 4 GiB would be meaningless for a response head anyway.
        let max_bytes = max_bytes.min(u32::MAX as usize);
        Capture {
            wanted,
            max_bytes,
            bytes: Vec::new(),
            entries: Vec::new(),
            dropped: 0,
            dropped_cookies: 0,
            content: wanted
                .contains(HeaderId::ContentEncoding)
                .then(ContentDecoder::new),
            coding: None,
            codings: 0,
        }
    }

    pub(super) fn configure(&mut self, wanted: HeaderSet, max_bytes: usize) {
        self.wanted = wanted;
        self.max_bytes = max_bytes.min(u32::MAX as usize);
        self.clear();
        if !wanted.contains(HeaderId::ContentEncoding) {
            self.content = None;
        } else if self.content.is_none() {
            self.content = Some(ContentDecoder::new());
        }
    }

    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
        self.dropped = 0;
        self.dropped_cookies = 0;
    }

    /// Replaces what was captured with the wanted values of `headers` (one parsed head).
    pub(super) fn take(&mut self, headers: &[httparse::Header<'_>]) {
        self.clear();
        self.coding = None;
        let mut codings = 0u32;
        for h in headers {
            let Some(id) = HeaderId::of(h.name.as_bytes()) else {
                continue;
            };
            if self.wanted.contains(id) {
                self.push(id, h.value);
                if id == HeaderId::ContentEncoding {
                    codings += 1;
                    self.coding = Coding::parse(h.value).filter(|_| codings == 1);
                }
            }
        }
    }

    /// Begins a new response head whose fields come one at a time ([`field`](Self::field)),
    /// as HTTP/2's HPACK decoder hands them out: what was captured before is forgotten.
    pub fn begin(&mut self) {
        self.clear();
        self.coding = None;
        self.codings = 0;
    }

    /// One field of the head begun by [`begin`](Self::begin): kept if wanted (and it fits).
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        let Some(id) = HeaderId::of(name) else {
            return;
        };
        if self.wanted.contains(id) {
            self.push(id, value);
            if id == HeaderId::ContentEncoding {
                self.codings = self.codings.saturating_add(1);
                self.coding = Coding::parse(value).filter(|_| self.codings == 1);
            }
        }
    }

    /// The body's decoder, when `Content-Encoding` is wanted: [`start_body`](Self::start_body)
    /// starts it on the head's coding; feed it the body and finish it at the body's end.
    pub fn content(&mut self) -> Option<&mut ContentDecoder> {
        self.content.as_mut()
    }

    /// A final response's body begins: the content decoder (if any) starts on its coding.
    pub fn start_body(&mut self) {
        if let Some(d) = self.content.as_mut() {
            d.start(self.coding);
        }
    }

    fn push(&mut self, id: HeaderId, value: &[u8]) {
        let start = self.bytes.len();
        let end = start.saturating_add(value.len());
        if end > self.max_bytes {
            self.dropped = self.dropped.saturating_add(1);
            if id == HeaderId::SetCookie {
                self.dropped_cookies = self.dropped_cookies.saturating_add(1);
            }
            return;
        }
        if end > self.bytes.capacity() {
            // Grow geometrically, but never past the bound (plain `extend` could double past it).
            let target = end.max(self.bytes.capacity().saturating_mul(2).max(256));
            let target = target.min(self.max_bytes);
            self.bytes.reserve_exact(target - start);
        }
        self.bytes.extend_from_slice(value);
        // Both fit in u32: `end <= max_bytes <= u32::MAX`.
        self.entries.push(Entry {
            id,
            start: start as u32,
            end: end as u32,
        });
    }

    pub fn iter(&self) -> Captured<'_> {
        Captured {
            bytes: &self.bytes,
            entries: self.entries.iter(),
        }
    }

    pub(super) fn dropped(&self) -> u32 {
        self.dropped
    }

    pub fn dropped_cookies(&self) -> u32 {
        self.dropped_cookies
    }

    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

/// The captured values of the last response head, in the order they came: see
/// [`ResponseDecoder::captured`](super::ResponseDecoder::captured).
#[derive(Debug, Clone)]
pub struct Captured<'a> {
    bytes: &'a [u8],
    entries: std::slice::Iter<'a, Entry>,
}

impl<'a> Captured<'a> {
    /// An iterator over nothing (capture off).
    pub fn empty() -> Captured<'a> {
        Captured {
            bytes: &[],
            entries: [].iter(),
        }
    }
}

impl<'a> Iterator for Captured<'a> {
    type Item = (HeaderId, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let e = self.entries.next()?;
        let value = self
            .bytes
            .get(e.start as usize..e.end as usize)
            .unwrap_or_default();
        Some((e.id, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

#[cfg(test)]
mod field_tests {
    use super::*;

    #[test]
    fn every_header_is_known_by_its_name_in_any_case_and_no_other_name_is() {
        for id in HeaderId::ALL {
            let name = id.name();
            assert_eq!(HeaderId::of(name.as_bytes()), Some(id));
            assert_eq!(HeaderId::of(name.to_ascii_lowercase().as_bytes()), Some(id));
            assert_eq!(HeaderId::of(&name.as_bytes()[1..]), None);
        }
        for other in [
            "server",
            "date",
            "content-type",
            "content-length",
            "set-cookie2",
        ] {
            assert_eq!(HeaderId::of(other.as_bytes()), None, "{other}");
        }
    }

    #[test]
    fn fields_one_at_a_time_are_captured_bounded_and_forgotten_at_the_next_head() {
        let wanted = HeaderSet::NONE
            .with(HeaderId::SetCookie)
            .with(HeaderId::ContentEncoding);
        let mut c = Capture::new(wanted, 16);
        c.begin();
        c.field(b"set-cookie", b"a=1");
        c.field(b"location", b"/not-wanted");
        c.field(b"SET-COOKIE", b"toolong=0123456789");
        c.field(b"content-encoding", b"gzip");
        let got: Vec<_> = c.iter().collect();
        assert_eq!(
            got,
            vec![
                (HeaderId::SetCookie, &b"a=1"[..]),
                (HeaderId::ContentEncoding, &b"gzip"[..])
            ]
        );
        assert_eq!(c.dropped_cookies(), 1);
        c.start_body();
        assert!(c.content().is_some(), "Content-Encoding wanted: a decoder");
        c.begin();
        assert_eq!(c.iter().count(), 0);
        assert_eq!(c.dropped_cookies(), 0);
        // Two codings: not decoded (as for HTTP/1.1 heads).
        c.field(b"content-encoding", b"gzip");
        c.field(b"content-encoding", b"br");
        assert_eq!(c.coding, None);
    }
}
