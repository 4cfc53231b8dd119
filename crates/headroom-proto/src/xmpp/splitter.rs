//! The incremental XML stream splitter: the server's byte stream in, stream-level events out.
//!
//! # Why a hand-written scanner
//!
//! The engine hands over whatever bytes one `read` returned, and a stanza may be cut anywhere:
//! inside a tag name, an attribute value, a comment, a CDATA section, between the two bytes of
//! `/>`. The splitter must stop at the end of any slice and resume at the next byte with nothing
//! but a few scalars of state, and it must not allocate per stanza. quick-xml's readers either
//! want the whole document in one buffer (`from_reader` over a `BufRead` that blocks) or, when fed
//! from a buffer, return `Eof`/errors at a cut token and expect the caller to re-feed from the
//! start of the token — that means keeping every partial stanza in a growing buffer and rescanning
//! it, which is the copy we want to avoid. An XMPP stream also never closes its root element
//! until the end, which DOM-style parsers dislike. So this is a byte-at-a-time state machine (with
//! fast skips over text, attribute values, comments and CDATA) that only tracks what the engine
//! needs: the depth, the name and five attributes of the current top-level element, and its length.
//!
//! It is not a validating parser: it checks that tags are well formed, that quotes and comments
//! close, and that each stanza's end tag names its start tag; it does not check nested end tags
//! against their start tags, nor decode entities, nor look at namespaces (names are compared as
//! written, prefix included; kinds are decided on the local name).

use std::fmt;

/// Largest stanza (from its `<` to its last `>`) accepted by default, in bytes.
pub const DEFAULT_MAX_STANZA: usize = 1 << 20;
/// Longest name of a top-level element kept (and compared with its end tag), in bytes.
pub const MAX_NAME_LEN: usize = 256;
/// Longest value of a kept attribute (`type`, `id`, `from`, `to`, `version`), raw, in bytes: a
/// JID is at most 3071 bytes (RFC 7622), escaping may lengthen it a little.
pub const MAX_ATTR_LEN: usize = 4096;
/// The capture buffer keeps this much capacity between stanzas; more (after a large stanza) is
/// freed when the next stanza starts, so an idle connection never sits on a megabyte.
pub const RETAINED_CAPTURE: usize = 16 * 1024;

/// Why the splitter gave up. After an error the splitter stays failed (an XML stream cannot be
/// resynchronised): the connection is to be closed and the error counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("stanza larger than the limit")]
    TooLarge,
    #[error("element name or attribute value longer than the limit")]
    TooLong,
    #[error("malformed XML")]
    BadXml,
    #[error("the server's stream did not start with a <stream:stream> header")]
    NotAStream,
    #[error("data after the end of the stream")]
    AfterClose,
}

impl SplitError {
    /// A short fixed name, for counters.
    pub fn kind(self) -> &'static str {
        match self {
            SplitError::TooLarge => "xmpp_too_large",
            SplitError::TooLong => "xmpp_too_long",
            SplitError::BadXml => "xmpp_bad_xml",
            SplitError::NotAStream => "xmpp_not_a_stream",
            SplitError::AfterClose => "xmpp_after_close",
        }
    }
}

/// What a top-level element is, from its local name (`stream:features` → `Features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Message,
    Presence,
    Iq,
    /// `<stream:features>`
    Features,
    /// SASL `<success>`
    Success,
    /// SASL `<failure>`
    Failure,
    /// SASL `<challenge>`
    Challenge,
    /// `<stream:error>`: the server is about to close the stream.
    StreamError,
    Other,
}

impl Kind {
    fn of(name: &[u8]) -> Kind {
        match local_name(name) {
            b"message" => Kind::Message,
            b"presence" => Kind::Presence,
            b"iq" => Kind::Iq,
            b"features" => Kind::Features,
            b"success" => Kind::Success,
            b"failure" => Kind::Failure,
            b"challenge" => Kind::Challenge,
            b"error" => Kind::StreamError,
            _ => Kind::Other,
        }
    }
}

/// The `type` attribute of a stanza, as a fixed enum (`None` when it has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StanzaType {
    None,
    Get,
    Set,
    Result,
    Error,
    Chat,
    Normal,
    Groupchat,
    Headline,
    Unavailable,
    Subscribe,
    Subscribed,
    Unsubscribe,
    Unsubscribed,
    Probe,
    Other,
}

impl StanzaType {
    pub fn parse(v: &[u8]) -> StanzaType {
        match v {
            b"" => StanzaType::None,
            b"get" => StanzaType::Get,
            b"set" => StanzaType::Set,
            b"result" => StanzaType::Result,
            b"error" => StanzaType::Error,
            b"chat" => StanzaType::Chat,
            b"normal" => StanzaType::Normal,
            b"groupchat" => StanzaType::Groupchat,
            b"headline" => StanzaType::Headline,
            b"unavailable" => StanzaType::Unavailable,
            b"subscribe" => StanzaType::Subscribe,
            b"subscribed" => StanzaType::Subscribed,
            b"unsubscribe" => StanzaType::Unsubscribe,
            b"unsubscribed" => StanzaType::Unsubscribed,
            b"probe" => StanzaType::Probe,
            _ => StanzaType::Other,
        }
    }
}

/// The server's stream header `<stream:stream ...>` (sent at the start, and again after each
/// stream restart, e.g. after SASL success). Attribute values are raw (entities not decoded) and
/// empty when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHeader<'a> {
    pub id: &'a [u8],
    pub from: &'a [u8],
    pub version: &'a [u8],
    /// Bytes of the header tag, from `<` to `>` (an XML declaration before it is not counted).
    pub len: usize,
}

/// One complete top-level element of the stream. Attribute values are raw (as on the wire,
/// entities not decoded) and empty when absent.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Stanza<'a> {
    pub kind: Kind,
    /// The element name as written, prefix included (`stream:features`).
    pub name: &'a [u8],
    /// The `type` attribute (see [`Stanza::stanza_type`]).
    pub typ: &'a [u8],
    pub id: &'a [u8],
    pub from: &'a [u8],
    pub to: &'a [u8],
    /// Bytes from its `<` to its last `>`.
    pub len: usize,
    /// The stanza's bytes, when capture is on ([`Splitter::set_capture`]).
    pub bytes: Option<&'a [u8]>,
}

impl Stanza<'_> {
    pub fn stanza_type(&self) -> StanzaType {
        StanzaType::parse(self.typ)
    }

    /// The `id` as a decimal number, as written by this module's encoders for caller ids.
    pub fn id_u64(&self) -> Option<u64> {
        parse_u64(self.id)
    }

    /// An error reply (`type='error'`) or a stream error.
    pub fn is_error(&self) -> bool {
        self.kind == Kind::StreamError || self.stanza_type() == StanzaType::Error
    }
}

impl fmt::Debug for Stanza<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        f.debug_struct("Stanza")
            .field("kind", &self.kind)
            .field("name", &s(self.name))
            .field("typ", &s(self.typ))
            .field("id", &s(self.id))
            .field("from", &s(self.from))
            .field("to", &s(self.to))
            .field("len", &self.len)
            .field("bytes", &self.bytes.map(s))
            .finish()
    }
}

/// What the splitter found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// The server opened (or, after a restart, reopened) its stream.
    StreamOpen(StreamHeader<'a>),
    /// A complete top-level element.
    Stanza(Stanza<'a>),
    /// `</stream:stream>`: the server closed its stream; `len` is the end tag's length.
    StreamClose { len: usize },
}

impl Event<'_> {
    /// Bytes of the event on the wire (whitespace, comments and XML declarations between
    /// top-level elements are not part of any event).
    pub fn len(&self) -> usize {
        match self {
            Event::StreamOpen(h) => h.len,
            Event::Stanza(s) => s.len,
            Event::StreamClose { len } => *len,
        }
    }

    /// Never true: every event covers at least one byte (here for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Before the server's stream header.
    Prolog,
    /// Inside the server's stream.
    Stream,
    /// After `</stream:stream>`.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Between top-level constructs (whitespace allowed).
    Top,
    /// After `<`.
    Lt,
    StartName,
    /// In a start tag, between attributes.
    InTag,
    AttrName,
    AfterAttrName,
    AfterEq,
    AttrValue(u8),
    /// After `/` in a start tag.
    EmptyEnd,
    EndName,
    /// After an end tag's name.
    EndSpace,
    /// In `<? ... ?>`; true when the previous byte was `?`.
    Pi(bool),
    /// After `<!`: `n` bytes of `--` (or of `[CDATA[` when `cdata`) matched.
    Bang {
        cdata: bool,
        n: u8,
    },
    /// In a comment; how many `-` just went by (at most 2).
    Comment(u8),
    /// In a CDATA section; how many `]` just went by (at most 2).
    Cdata(u8),
    /// Character data inside a stanza.
    Text,
}

const NO_SLOT: u8 = u8::MAX;
const SLOT_TYPE: usize = 0;
const SLOT_ID: usize = 1;
const SLOT_FROM: usize = 2;
const SLOT_TO: usize = 3;
const SLOT_VERSION: usize = 4;
const ATTR_BUF: usize = 8;

/// The stream splitter. One per connection; [`Splitter::reset`] for a new connection keeps its
/// buffers. See the module documentation of [`crate::xmpp`] for the calling convention.
pub struct Splitter {
    st: St,
    level: Level,
    /// Open elements of the current stanza (0 between stanzas and in a top-level start tag).
    depth: u32,
    /// Bytes of the current top-level construct so far (0 at `Top`).
    cur_len: usize,
    max: usize,
    capture: bool,
    /// Whether the current construct is being captured (`capture` when it started).
    cap_active: bool,
    cap: Vec<u8>,
    /// Name of the current top-level element (or of a top-level end tag).
    name: Vec<u8>,
    /// Bytes of the current end tag's name so far, and whether they match `name` (depth 1).
    end_pos: usize,
    end_ok: bool,
    attr: [u8; ATTR_BUF],
    /// Length of the attribute name in `attr`; `u8::MAX` when too long to be one we keep.
    attr_len: u8,
    slot: u8,
    vals: [Vec<u8>; 5],
    error: Option<SplitError>,
}

impl Default for Splitter {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Splitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Splitter")
            .field("st", &self.st)
            .field("level", &self.level)
            .field("depth", &self.depth)
            .field("cur_len", &self.cur_len)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Bytes that cannot appear in a name (besides whitespace).
#[inline]
fn is_name_stop(b: u8) -> bool {
    matches!(b, b'<' | b'>' | b'/' | b'=' | b'"' | b'\'') || is_ws(b)
}

/// The part of a name after its last `:`.
pub fn local_name(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|&c| c == b':') {
        Some(p) => name.get(p + 1..).unwrap_or(&[]),
        None => name,
    }
}

fn is_stream_name(name: &[u8]) -> bool {
    local_name(name) == b"stream"
}

/// Parses a plain decimal `u64` (no sign, no spaces, at most 20 digits, no overflow).
pub fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in v {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(n)
}

impl Splitter {
    pub fn new() -> Self {
        Self::with_max_stanza(DEFAULT_MAX_STANZA)
    }

    /// A splitter that refuses top-level constructs larger than `max` bytes
    /// ([`SplitError::TooLarge`]). `max` is at least 16.
    pub fn with_max_stanza(max: usize) -> Self {
        Splitter {
            st: St::Top,
            level: Level::Prolog,
            depth: 0,
            cur_len: 0,
            max: max.max(16),
            capture: false,
            cap_active: false,
            cap: Vec::new(),
            name: Vec::new(),
            end_pos: 0,
            end_ok: false,
            attr: [0; ATTR_BUF],
            attr_len: 0,
            slot: NO_SLOT,
            vals: Default::default(),
            error: None,
        }
    }

    /// Ready for a new connection: state cleared, buffers (and settings) kept.
    pub fn reset(&mut self) {
        self.st = St::Top;
        self.level = Level::Prolog;
        self.depth = 0;
        self.cur_len = 0;
        self.cap_active = false;
        self.cap.clear();
        self.name.clear();
        self.slot = NO_SLOT;
        for v in &mut self.vals {
            v.clear();
        }
        self.error = None;
    }

    /// Whether stanzas' bytes are kept and handed out in [`Stanza::bytes`] (needed by
    /// [`crate::xmpp::Login`] and for matching on content). Takes effect from the next stanza.
    pub fn set_capture(&mut self, on: bool) {
        self.capture = on;
    }

    pub fn capture(&self) -> bool {
        self.capture
    }

    /// Heap bytes held by the splitter's buffers (capacity), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.cap.capacity()
            + self.name.capacity()
            + self.vals.iter().map(Vec::capacity).sum::<usize>()
    }

    pub fn max_stanza(&self) -> usize {
        self.max
    }

    /// True while a top-level construct (stanza, header, comment, declaration) is partly read:
    /// a connection closed now cut it short.
    pub fn in_progress(&self) -> bool {
        self.st != St::Top
    }

    /// True after `</stream:stream>`.
    pub fn closed(&self) -> bool {
        self.level == Level::Closed
    }

    /// True once the server's stream header was seen (and the stream not closed).
    pub fn open(&self) -> bool {
        self.level == Level::Stream
    }

    /// Feeds bytes from the server. Returns how many bytes were consumed and the event they
    /// completed, if any: `(input.len(), None)` when no event completed (everything consumed), or
    /// `(n, Some(event))` with `1 <= n <= input.len()` right after the event's last byte; call
    /// again with `&input[n..]` (after dropping the event, which borrows the splitter) until the
    /// input is used up. Never panics; memory stays bounded by the limits above.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Event<'_>>), SplitError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        // Start of the current construct's bytes within `input`, for the capture buffer.
        let mut cap_from = 0usize;
        let mut i = 0usize;
        while let Some(&b) = input.get(i) {
            if self.st == St::Top {
                if is_ws(b) {
                    i += 1;
                    continue;
                }
                if b != b'<' {
                    return Err(self.fail(match self.level {
                        Level::Prolog => SplitError::NotAStream,
                        Level::Stream => SplitError::BadXml,
                        Level::Closed => SplitError::AfterClose,
                    }));
                }
                if self.level == Level::Closed {
                    return Err(self.fail(SplitError::AfterClose));
                }
                self.st = St::Lt;
                self.cur_len = 1;
                cap_from = i;
                self.cap_active = self.capture;
                if self.capture {
                    if self.cap.capacity() > RETAINED_CAPTURE {
                        self.cap = Vec::new();
                    }
                    self.cap.clear();
                }
                i += 1;
                continue;
            }
            self.cur_len += 1;
            if self.cur_len > self.max {
                return Err(self.fail(SplitError::TooLarge));
            }
            match self.st {
                St::Top => {} // handled above
                St::Lt => match b {
                    b'/' => {
                        self.st = St::EndName;
                        self.end_pos = 0;
                        self.end_ok = true;
                        if self.depth == 0 {
                            self.name.clear();
                        }
                    }
                    b'?' => self.st = St::Pi(false),
                    b'!' => self.st = St::Bang { cdata: false, n: 0 },
                    _ if is_name_stop(b) => return Err(self.fail(SplitError::BadXml)),
                    _ => {
                        self.st = St::StartName;
                        if self.depth == 0 {
                            self.name.clear();
                            self.name.push(b);
                            for v in &mut self.vals {
                                v.clear();
                            }
                        }
                    }
                },
                St::StartName => match b {
                    b'>' => {
                        if let Some(ev) = self.start_tag_done(false)? {
                            return Ok(self.emit(ev, input, cap_from, i));
                        }
                    }
                    b'/' => self.st = St::EmptyEnd,
                    _ if is_ws(b) => self.st = St::InTag,
                    _ if is_name_stop(b) => return Err(self.fail(SplitError::BadXml)),
                    _ => {
                        if self.depth == 0 {
                            if self.name.len() >= MAX_NAME_LEN {
                                return Err(self.fail(SplitError::TooLong));
                            }
                            self.name.push(b);
                        }
                    }
                },
                St::InTag => match b {
                    b'>' => {
                        if let Some(ev) = self.start_tag_done(false)? {
                            return Ok(self.emit(ev, input, cap_from, i));
                        }
                    }
                    b'/' => self.st = St::EmptyEnd,
                    _ if is_ws(b) => {}
                    _ if is_name_stop(b) => return Err(self.fail(SplitError::BadXml)),
                    _ => {
                        self.st = St::AttrName;
                        self.attr[0] = b;
                        self.attr_len = 1;
                    }
                },
                St::AttrName => match b {
                    b'=' => self.begin_value(),
                    _ if is_ws(b) => self.st = St::AfterAttrName,
                    _ if is_name_stop(b) => return Err(self.fail(SplitError::BadXml)),
                    _ => {
                        let n = usize::from(self.attr_len);
                        if n < ATTR_BUF {
                            self.attr[n] = b;
                            self.attr_len += 1;
                        } else {
                            self.attr_len = u8::MAX;
                        }
                    }
                },
                St::AfterAttrName => match b {
                    b'=' => self.begin_value(),
                    _ if is_ws(b) => {}
                    _ => return Err(self.fail(SplitError::BadXml)),
                },
                St::AfterEq => match b {
                    b'"' | b'\'' => self.st = St::AttrValue(b),
                    _ if is_ws(b) => {}
                    _ => return Err(self.fail(SplitError::BadXml)),
                },
                St::AttrValue(q) => {
                    if b == q {
                        self.st = St::InTag;
                        self.slot = NO_SLOT;
                    } else if b == b'<' {
                        return Err(self.fail(SplitError::BadXml));
                    } else {
                        // The run of value bytes from here (this byte is already counted).
                        let rest = input.get(i..).unwrap_or(&[]);
                        let run = rest
                            .iter()
                            .position(|&c| c == q || c == b'<')
                            .unwrap_or(rest.len());
                        self.cur_len += run - 1;
                        if self.cur_len > self.max {
                            return Err(self.fail(SplitError::TooLarge));
                        }
                        if self.slot != NO_SLOT {
                            let v = &mut self.vals[usize::from(self.slot)];
                            if v.len() + run > MAX_ATTR_LEN {
                                return Err(self.fail(SplitError::TooLong));
                            }
                            v.extend_from_slice(rest.get(..run).unwrap_or(&[]));
                        }
                        i += run;
                        continue;
                    }
                }
                St::EmptyEnd => {
                    if b != b'>' {
                        return Err(self.fail(SplitError::BadXml));
                    }
                    if let Some(ev) = self.start_tag_done(true)? {
                        return Ok(self.emit(ev, input, cap_from, i));
                    }
                }
                St::EndName => match b {
                    b'>' => {
                        if let Some(ev) = self.end_tag_done()? {
                            return Ok(self.emit(ev, input, cap_from, i));
                        }
                    }
                    _ if is_ws(b) => {
                        if self.end_pos == 0 {
                            return Err(self.fail(SplitError::BadXml));
                        }
                        self.st = St::EndSpace;
                    }
                    _ if is_name_stop(b) => return Err(self.fail(SplitError::BadXml)),
                    _ => {
                        if self.depth == 0 {
                            if self.name.len() >= MAX_NAME_LEN {
                                return Err(self.fail(SplitError::TooLong));
                            }
                            self.name.push(b);
                        } else if self.depth == 1 {
                            self.end_ok &= self.name.get(self.end_pos) == Some(&b);
                        }
                        self.end_pos = self.end_pos.saturating_add(1);
                    }
                },
                St::EndSpace => match b {
                    b'>' => {
                        if let Some(ev) = self.end_tag_done()? {
                            return Ok(self.emit(ev, input, cap_from, i));
                        }
                    }
                    _ if is_ws(b) => {}
                    _ => return Err(self.fail(SplitError::BadXml)),
                },
                St::Pi(prev_q) => {
                    if prev_q && b == b'>' {
                        self.after_markup();
                    } else {
                        self.st = St::Pi(b == b'?');
                    }
                }
                St::Bang { cdata, n } => {
                    const CDATA: &[u8] = b"[CDATA[";
                    if n == 0 {
                        match b {
                            b'-' => self.st = St::Bang { cdata: false, n: 1 },
                            b'[' if self.depth > 0 => self.st = St::Bang { cdata: true, n: 1 },
                            // <!DOCTYPE, <!ENTITY, ... are forbidden in XMPP; CDATA needs an element.
                            _ => return Err(self.fail(SplitError::BadXml)),
                        }
                    } else if !cdata {
                        if b != b'-' {
                            return Err(self.fail(SplitError::BadXml));
                        }
                        self.st = St::Comment(0);
                    } else {
                        if CDATA.get(usize::from(n)) != Some(&b) {
                            return Err(self.fail(SplitError::BadXml));
                        }
                        self.st = if usize::from(n) + 1 == CDATA.len() {
                            St::Cdata(0)
                        } else {
                            St::Bang { cdata, n: n + 1 }
                        };
                    }
                }
                St::Comment(d) => match b {
                    b'-' => self.st = St::Comment((d + 1).min(2)),
                    b'>' if d >= 2 => self.after_markup(),
                    _ => {
                        self.st = St::Comment(0);
                        i = self.skip_run(input, i, b'-')?;
                        continue;
                    }
                },
                St::Cdata(k) => match b {
                    b']' => self.st = St::Cdata((k + 1).min(2)),
                    b'>' if k >= 2 => self.st = St::Text,
                    _ => {
                        self.st = St::Cdata(0);
                        i = self.skip_run(input, i, b']')?;
                        continue;
                    }
                },
                St::Text => {
                    if b == b'<' {
                        self.st = St::Lt;
                    } else {
                        i = self.skip_run(input, i, b'<')?;
                        continue;
                    }
                }
            }
            i += 1;
        }
        if self.cap_active && self.st != St::Top {
            // Bounded: `cap` holds only the current construct, and `cur_len <= max` held above.
            self.cap
                .extend_from_slice(input.get(cap_from..).unwrap_or(&[]));
        }
        Ok((input.len(), None))
    }

    /// Skips from `i` (already counted) to the next `stop` byte (not consumed); returns its index.
    fn skip_run(&mut self, input: &[u8], i: usize, stop: u8) -> Result<usize, SplitError> {
        let rest = input.get(i..).unwrap_or(&[]);
        let run = rest.iter().position(|&c| c == stop).unwrap_or(rest.len());
        // `run >= 1`: the byte at `i` is not `stop`.
        self.cur_len += run.saturating_sub(1);
        if self.cur_len > self.max {
            return Err(self.fail(SplitError::TooLarge));
        }
        Ok(i + run.max(1))
    }

    fn fail(&mut self, e: SplitError) -> SplitError {
        self.error = Some(e);
        e
    }

    fn begin_value(&mut self) {
        self.st = St::AfterEq;
        self.slot = NO_SLOT;
        if self.depth == 0 && self.attr_len != u8::MAX {
            let slot = match self.attr.get(..usize::from(self.attr_len)) {
                Some(b"type") => SLOT_TYPE,
                Some(b"id") => SLOT_ID,
                Some(b"from") => SLOT_FROM,
                Some(b"to") => SLOT_TO,
                Some(b"version") => SLOT_VERSION,
                _ => return,
            };
            self.vals[slot].clear();
            self.slot = slot as u8;
        }
    }

    /// Back to where a comment or processing instruction started.
    fn after_markup(&mut self) {
        if self.depth == 0 {
            self.st = St::Top;
            self.cur_len = 0;
        } else {
            self.st = St::Text;
        }
    }

    /// A start tag ended (`empty` for `/>`): maybe an event.
    fn start_tag_done(&mut self, empty: bool) -> Result<Option<Pending>, SplitError> {
        self.slot = NO_SLOT;
        if self.depth > 0 {
            if !empty {
                self.depth += 1;
            }
            self.st = St::Text;
            return Ok(None);
        }
        if is_stream_name(&self.name) {
            if empty {
                return Err(self.fail(SplitError::BadXml));
            }
            self.level = Level::Stream;
            return Ok(Some(Pending::Open));
        }
        if self.level != Level::Stream {
            return Err(self.fail(SplitError::NotAStream));
        }
        if empty {
            return Ok(Some(Pending::Stanza));
        }
        self.depth = 1;
        self.st = St::Text;
        Ok(None)
    }

    fn end_tag_done(&mut self) -> Result<Option<Pending>, SplitError> {
        if self.end_pos == 0 {
            return Err(self.fail(SplitError::BadXml));
        }
        if self.depth == 0 {
            return match self.level {
                Level::Stream if is_stream_name(&self.name) => {
                    self.level = Level::Closed;
                    Ok(Some(Pending::Close))
                }
                Level::Prolog => Err(self.fail(SplitError::NotAStream)),
                _ => Err(self.fail(SplitError::BadXml)),
            };
        }
        if self.depth == 1 && !(self.end_ok && self.end_pos == self.name.len()) {
            return Err(self.fail(SplitError::BadXml));
        }
        self.depth -= 1;
        if self.depth == 0 {
            return Ok(Some(Pending::Stanza));
        }
        self.st = St::Text;
        Ok(None)
    }

    /// Finishes the construct whose last byte is `input[i]` and builds its event.
    fn emit(
        &mut self,
        ev: Pending,
        input: &[u8],
        cap_from: usize,
        i: usize,
    ) -> (usize, Option<Event<'_>>) {
        let len = self.cur_len;
        self.cur_len = 0;
        self.st = St::Top;
        self.depth = 0;
        let captured = self.cap_active && ev == Pending::Stanza;
        if captured {
            self.cap
                .extend_from_slice(input.get(cap_from..=i).unwrap_or(&[]));
        }
        let event = match ev {
            Pending::Open => Event::StreamOpen(StreamHeader {
                id: &self.vals[SLOT_ID],
                from: &self.vals[SLOT_FROM],
                version: &self.vals[SLOT_VERSION],
                len,
            }),
            Pending::Close => Event::StreamClose { len },
            Pending::Stanza => Event::Stanza(Stanza {
                kind: Kind::of(&self.name),
                name: &self.name,
                typ: &self.vals[SLOT_TYPE],
                id: &self.vals[SLOT_ID],
                from: &self.vals[SLOT_FROM],
                to: &self.vals[SLOT_TO],
                len,
                bytes: if captured { Some(&self.cap) } else { None },
            }),
        };
        (i + 1, Some(event))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Open,
    Stanza,
    Close,
}
