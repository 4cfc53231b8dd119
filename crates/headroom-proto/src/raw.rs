//! Raw TCP "expect" matchers, sans I/O: when does a reply end?
//!
//! A raw TCP step sends bytes and waits for a reply whose end only the scenario can describe.
//! Four descriptions cover the usual wire formats:
//!
//! - [`Expect::bytes`]`(N)` — exactly N bytes make a reply (fixed-size records);
//! - [`Expect::delimiter`]`(D)` — everything up to and including the delimiter `D` (`\r\n`,
//!   `\0`, `END\r\n`...); a multi-byte delimiter may arrive split across reads;
//! - [`Expect::length_prefix`] — a header carrying the length: 1, 2, 4 or 8 bytes, big- or
//!   little-endian, after `offset` leading bytes, counting the header or not, plus an
//!   adjustment (PostgreSQL's messages: offset 1, 4 bytes big-endian, counting the length field
//!   but not the tag byte, so `adjust: -4`);
//! - [`Expect::regex`] — the shortest prefix of the reply that contains a match of a regular
//!   expression (the `regex` crate's bytes API), searched within the reply's first `window`
//!   bytes.
//!
//! # How the engine is meant to use it
//!
//! The compiled [`Expect`] lives in the immutable plan, shared by every user; each connection
//! holds an [`ExpectState`] (a few scalars; a regex keeps the reply's bytes, at most `window` of
//! them). The engine feeds it whatever the socket produced with [`ExpectState::feed`], which says
//! how many bytes it consumed and whether a reply completed, exactly like
//! [`http1::ResponseDecoder::decode`](crate::http1::ResponseDecoder::decode): bytes after a
//! complete reply are not consumed and belong to the next reply (pipelined requests, or a server
//! that speaks first), so the engine loops over the read until `NeedMore`. Errors are a fixed
//! enum ([`RawError`]), counted without allocating; [`ExpectState::eof`] tells a connection that
//! closed mid-reply. [`Matcher`] bundles both halves for callers that do not share the plan.
//!
//! Every matcher decides on the bytes alone, never on how they were split: a stream fed in any
//! pieces gives the same replies as the same stream in one piece (tested at every split point,
//! and fuzzed). The one exception is a regex whose match depends on what follows its end (`$`,
//! `\b`, `\B` at the end of the pattern): the regex engine sees the bytes received so far as the
//! whole text, so such a match can complete at a different byte depending on the reads.
//!
//! A regex reply costs one scan of the buffered reply per read (the regex crate's lazy DFA): a
//! reply of W bytes arriving in k reads costs O(k·W), bounded by the window. For large replies,
//! prefer a length prefix or a delimiter, which cost O(1) per read plus a scan of the new bytes.

use std::fmt;

/// Longest reply accepted by delimiter, length-prefix and regex matchers unless set otherwise
/// ([`Expect::with_max_reply`]); a length prefix announcing more fails at once.
pub const DEFAULT_MAX_REPLY: u64 = 64 * 1024 * 1024;
/// Longest delimiter accepted.
pub const MAX_DELIMITER: usize = 1024;
/// Largest regex window accepted.
pub const MAX_WINDOW: usize = 1024 * 1024;
/// Most bytes before the length field of a length prefix.
pub const MAX_OFFSET: u32 = 64 * 1024;
/// A regex window buffer whose capacity grew beyond this is freed when its reply is done.
pub const RETAINED_CAPACITY: usize = 4 * 1024;

/// Byte order of a length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Big,
    Little,
}

/// A reply that starts with a length header.
///
/// The reply's total length is `offset + width + value + adjust` when `includes_header` is
/// false (the value counts what follows the field), `value + adjust` when it is true (the value
/// counts the whole reply, header included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthPrefix {
    /// Bytes before the length field (a tag, a version), part of the reply; at most
    /// [`MAX_OFFSET`].
    pub offset: u32,
    /// Width of the length field in bytes: 1, 2, 4 or 8.
    pub width: u8,
    pub endian: Endian,
    /// The value counts the header (the `offset` bytes and the field) too.
    pub includes_header: bool,
    /// Added to the length computed as above (may be negative).
    pub adjust: i64,
}

impl LengthPrefix {
    /// A big-endian length field of `width` bytes at the start of the reply, counting only the
    /// bytes after it.
    pub fn big_endian(width: u8) -> LengthPrefix {
        LengthPrefix {
            offset: 0,
            width,
            endian: Endian::Big,
            includes_header: false,
            adjust: 0,
        }
    }

    fn header_len(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.width)
    }
}

/// A bad matcher description (from a scenario); not a hot-path error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectError {
    /// `bytes(0)`: a reply must have at least one byte.
    ZeroBytes,
    /// A delimiter must have 1 to [`MAX_DELIMITER`] bytes.
    DelimiterLength(usize),
    /// A length field must be 1, 2, 4 or 8 bytes wide.
    Width(u8),
    /// A length field offset above [`MAX_OFFSET`].
    Offset(u32),
    /// A regex window must be 1 to [`MAX_WINDOW`] bytes.
    Window(usize),
    /// The regex does not compile (the regex crate's message).
    Regex(String),
    /// The regex matches an empty reply, so it would complete before any byte arrived.
    RegexMatchesEmpty,
}

impl fmt::Display for ExpectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpectError::ZeroBytes => write!(f, "bytes: a reply must be at least 1 byte"),
            ExpectError::DelimiterLength(n) => write!(
                f,
                "delimiter: must be 1 to {MAX_DELIMITER} bytes long, not {n}"
            ),
            ExpectError::Width(w) => {
                write!(
                    f,
                    "length prefix: width must be 1, 2, 4 or 8 bytes, not {w}"
                )
            }
            ExpectError::Offset(o) => {
                write!(
                    f,
                    "length prefix: offset must be at most {MAX_OFFSET}, not {o}"
                )
            }
            ExpectError::Window(w) => {
                write!(f, "regex: window must be 1 to {MAX_WINDOW} bytes, not {w}")
            }
            ExpectError::Regex(e) => write!(f, "regex: {e}"),
            ExpectError::RegexMatchesEmpty => {
                write!(
                    f,
                    "regex: matches an empty reply (it would never wait for bytes)"
                )
            }
        }
    }
}

impl std::error::Error for ExpectError {}

/// Why a reply failed, as a fixed enum (counted by the engine without allocating).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RawError {
    #[error("reply longer than the limit without its end")]
    ReplyTooLarge,
    #[error("length prefix announces a reply shorter than its own header")]
    BadLength,
    #[error("no regex match within the reply's window")]
    NoMatchInWindow,
    #[error("connection closed before the reply was complete")]
    Incomplete,
}

/// What ends a reply; compiled once per scenario step, shared by every connection.
#[derive(Debug, Clone)]
pub struct Expect {
    kind: Kind,
    max_reply: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Bytes(u64),
    /// The delimiter and its KMP failure table: `fail[i]` is the length of the longest proper
    /// border of `delim[..=i]`, where matching resumes after a mismatch.
    Delimiter {
        delim: Box<[u8]>,
        fail: Box<[u16]>,
    },
    Length(LengthPrefix),
    Regex {
        re: regex::bytes::Regex,
        window: usize,
    },
}

impl Expect {
    /// Exactly `n` bytes make a reply (`n >= 1`). The reply limit does not apply: `n` is it.
    pub fn bytes(n: u64) -> Result<Expect, ExpectError> {
        if n == 0 {
            return Err(ExpectError::ZeroBytes);
        }
        Ok(Expect {
            kind: Kind::Bytes(n),
            max_reply: DEFAULT_MAX_REPLY,
        })
    }

    /// A reply ends with (and includes) `delim`, 1 to [`MAX_DELIMITER`] bytes.
    pub fn delimiter(delim: &[u8]) -> Result<Expect, ExpectError> {
        if delim.is_empty() || delim.len() > MAX_DELIMITER {
            return Err(ExpectError::DelimiterLength(delim.len()));
        }
        let mut fail = vec![0u16; delim.len()];
        let mut k = 0usize;
        for i in 1..delim.len() {
            while k > 0 && delim[i] != delim[k] {
                k = usize::from(fail[k - 1]);
            }
            if delim[i] == delim[k] {
                k += 1;
            }
            fail[i] = k as u16;
        }
        Ok(Expect {
            kind: Kind::Delimiter {
                delim: delim.into(),
                fail: fail.into(),
            },
            max_reply: DEFAULT_MAX_REPLY,
        })
    }

    /// A reply announced by a length header (see [`LengthPrefix`]).
    pub fn length_prefix(prefix: LengthPrefix) -> Result<Expect, ExpectError> {
        if !matches!(prefix.width, 1 | 2 | 4 | 8) {
            return Err(ExpectError::Width(prefix.width));
        }
        if prefix.offset > MAX_OFFSET {
            return Err(ExpectError::Offset(prefix.offset));
        }
        Ok(Expect {
            kind: Kind::Length(prefix),
            max_reply: DEFAULT_MAX_REPLY,
        })
    }

    /// A reply ends where the first match of `pattern` (regex crate syntax, over bytes) ends,
    /// the match lying within the reply's first `window` bytes (1 to [`MAX_WINDOW`]); no match
    /// there is [`RawError::NoMatchInWindow`]. `^` anchors at the start of the reply. A pattern
    /// that matches the empty string is refused.
    pub fn regex(pattern: &str, window: usize) -> Result<Expect, ExpectError> {
        if window == 0 || window > MAX_WINDOW {
            return Err(ExpectError::Window(window));
        }
        let re = regex::bytes::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| ExpectError::Regex(e.to_string()))?;
        if re.is_match(b"") {
            return Err(ExpectError::RegexMatchesEmpty);
        }
        Ok(Expect {
            kind: Kind::Regex { re, window },
            max_reply: DEFAULT_MAX_REPLY,
        })
    }

    /// Longest reply accepted ([`DEFAULT_MAX_REPLY`] unless set): a delimiter not seen within
    /// it, or a length prefix announcing more, is [`RawError::ReplyTooLarge`]. Not applied to
    /// `bytes(N)`.
    pub fn with_max_reply(mut self, max: u64) -> Expect {
        self.max_reply = max;
        self
    }
}

/// Progress of one [`ExpectState::feed`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// All input consumed, the reply is not complete yet.
    NeedMore,
    /// A reply completed with the last consumed byte.
    Complete(Reply),
}

/// A complete reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Its length in bytes (header, delimiter and all).
    pub len: u64,
}

/// The per-connection half of a matcher: where the current reply stands.
#[derive(Debug, Clone, Default)]
pub struct ExpectState {
    /// Bytes of the current reply consumed so far.
    len: u64,
    /// Delimiter: how many of its bytes end the reply so far. Length prefix: the field's value
    /// accumulated so far (in `field`), and the reply's total once the header is in.
    matched: usize,
    field: u64,
    total: Option<u64>,
    /// Regex: the reply's bytes so far (at most the window); after a completed reply, that
    /// reply's bytes, until the next `feed`.
    window: Vec<u8>,
    /// The last `feed` completed a reply (`window` holds it).
    completed: bool,
}

impl ExpectState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes. Returns how many were consumed and whether a reply completed; after
    /// `Complete`, the bytes behind it belong to the next reply: call again with the rest.
    ///
    /// `NeedMore` always consumes all of `input` (so 0 only for an empty input); `Complete`
    /// consumes at least one byte. After an `Err` call [`reset`](Self::reset) (the connection's
    /// framing is lost; it should be closed).
    pub fn feed(&mut self, expect: &Expect, input: &[u8]) -> Result<(usize, Progress), RawError> {
        if self.completed {
            self.completed = false;
            if self.window.capacity() > RETAINED_CAPACITY {
                self.window = Vec::new();
            }
            self.window.clear();
        }
        if input.is_empty() {
            return Ok((0, Progress::NeedMore));
        }
        let done = match &expect.kind {
            Kind::Bytes(n) => self.count(*n, input),
            Kind::Delimiter { delim, fail } => {
                self.delimiter(delim, fail, expect.max_reply, input)?
            }
            Kind::Length(prefix) => self.length(prefix, expect.max_reply, input)?,
            Kind::Regex { re, window } => self.regex(re, *window, input)?,
        };
        Ok(match done {
            Some(used) => {
                let reply = Reply {
                    len: self.len.saturating_add(used as u64),
                };
                self.finish();
                (used, Progress::Complete(reply))
            }
            None => {
                self.len = self.len.saturating_add(input.len() as u64);
                (input.len(), Progress::NeedMore)
            }
        })
    }

    /// The bytes of the reply just completed by a regex matcher (valid until the next `feed`);
    /// for a regex matcher in progress, the reply's bytes so far. Empty for the other matchers.
    pub fn reply_bytes(&self) -> &[u8] {
        &self.window
    }

    /// The peer closed the connection: `Err(Incomplete)` if a reply was in progress. Resets.
    pub fn eof(&mut self) -> Result<(), RawError> {
        let result = if self.in_progress() {
            Err(RawError::Incomplete)
        } else {
            Ok(())
        };
        self.reset();
        result
    }

    /// Some bytes of a reply have been received and it is not complete yet.
    pub fn in_progress(&self) -> bool {
        self.len > 0
    }

    /// Forget any partial reply (after an error or a reconnect); keeps buffer capacity.
    pub fn reset(&mut self) {
        self.len = 0;
        self.finish();
        self.window.clear();
    }

    fn finish(&mut self) {
        self.len = 0;
        self.matched = 0;
        self.field = 0;
        self.total = None;
        self.completed = true;
    }

    /// `Some(bytes of input used)` when the reply (of `total` bytes) completes in `input`.
    fn count(&self, total: u64, input: &[u8]) -> Option<usize> {
        let remaining = total.saturating_sub(self.len);
        usize::try_from(remaining)
            .ok()
            .filter(|&r| r <= input.len())
    }

    fn delimiter(
        &mut self,
        delim: &[u8],
        fail: &[u16],
        max: u64,
        input: &[u8],
    ) -> Result<Option<usize>, RawError> {
        let mut matched = self.matched;
        let mut i = 0usize;
        let first = delim.first().copied().unwrap_or_default();
        while i < input.len() {
            if matched == 0 {
                // Fast path: skip to the next byte that could start the delimiter.
                match input
                    .get(i..)
                    .and_then(|r| r.iter().position(|&b| b == first))
                {
                    Some(j) => i += j,
                    None => {
                        i = input.len();
                        break;
                    }
                }
            }
            let b = input.get(i).copied().unwrap_or_default();
            while matched > 0 && delim.get(matched) != Some(&b) {
                matched = fail.get(matched - 1).map_or(0, |&f| usize::from(f));
            }
            if delim.get(matched) == Some(&b) {
                matched += 1;
            }
            i += 1;
            if matched == delim.len() {
                if self.len.saturating_add(i as u64) > max {
                    return Err(RawError::ReplyTooLarge);
                }
                return Ok(Some(i));
            }
        }
        self.matched = matched;
        if self.len.saturating_add(i as u64) >= max {
            // Even the delimiter's last byte arriving next would make the reply too long.
            return Err(RawError::ReplyTooLarge);
        }
        Ok(None)
    }

    fn length(
        &mut self,
        prefix: &LengthPrefix,
        max: u64,
        input: &[u8],
    ) -> Result<Option<usize>, RawError> {
        let header_len = prefix.header_len();
        let mut used = 0usize;
        if self.total.is_none() {
            // Header bytes, one at a time (at most offset + 8 of them per reply).
            while self.len.saturating_add(used as u64) < header_len {
                let Some(&b) = input.get(used) else {
                    return Ok(None);
                };
                let at = self.len + used as u64;
                if at >= u64::from(prefix.offset) {
                    let k = at - u64::from(prefix.offset);
                    self.field = match prefix.endian {
                        Endian::Big => (self.field << 8) | u64::from(b),
                        Endian::Little => self.field | (u64::from(b) << (8 * k)),
                    };
                }
                used += 1;
            }
            let mut total = i128::from(self.field) + i128::from(prefix.adjust);
            if !prefix.includes_header {
                total += i128::from(header_len);
            }
            if total < i128::from(header_len) {
                return Err(RawError::BadLength);
            }
            if total > i128::from(max) {
                return Err(RawError::ReplyTooLarge);
            }
            self.total = Some(total as u64);
        }
        let total = self.total.unwrap_or(header_len);
        let have = self.len.saturating_add(used as u64);
        let remaining = total.saturating_sub(have);
        let rest = input.len() - used;
        match usize::try_from(remaining) {
            Ok(r) if r <= rest => Ok(Some(used + r)),
            _ => Ok(None),
        }
    }

    fn regex(
        &mut self,
        re: &regex::bytes::Regex,
        window: usize,
        input: &[u8],
    ) -> Result<Option<usize>, RawError> {
        let old = self.window.len();
        let take = window.saturating_sub(old).min(input.len());
        self.window
            .extend_from_slice(input.get(..take).unwrap_or_default());
        if !re.is_match(&self.window) {
            if self.window.len() >= window {
                return Err(RawError::NoMatchInWindow);
            }
            return Ok(None);
        }
        // The shortest prefix holding a match: no prefix up to `old` bytes held one (the earlier
        // reads would have completed), the whole window does. Binary search between them, so
        // the reply ends at the same byte however the reads were split.
        let (mut lo, mut hi) = (old, self.window.len());
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if re.is_match(self.window.get(..mid).unwrap_or_default()) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        self.window.truncate(hi);
        Ok(Some(hi - old))
    }
}

/// An [`Expect`] with its own state, for callers that do not share the plan.
#[derive(Debug, Clone)]
pub struct Matcher {
    pub expect: Expect,
    pub state: ExpectState,
}

impl Matcher {
    pub fn new(expect: Expect) -> Matcher {
        Matcher {
            expect,
            state: ExpectState::new(),
        }
    }

    /// [`ExpectState::feed`] with this matcher's description.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Progress), RawError> {
        self.state.feed(&self.expect, input)
    }

    /// [`ExpectState::eof`].
    pub fn eof(&mut self) -> Result<(), RawError> {
        self.state.eof()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies (lengths) and the final error, feeding `pieces` the way the engine does.
    fn run(expect: &Expect, pieces: &[&[u8]]) -> (Vec<u64>, Option<RawError>) {
        let mut st = ExpectState::new();
        let mut replies = Vec::new();
        for &piece in pieces {
            let mut p = piece;
            loop {
                match st.feed(expect, p) {
                    Err(e) => return (replies, Some(e)),
                    Ok((n, Progress::NeedMore)) => {
                        assert_eq!(n, p.len());
                        break;
                    }
                    Ok((n, Progress::Complete(r))) => {
                        assert!(n >= 1 && n <= p.len(), "consumed {n} of {}", p.len());
                        replies.push(r.len);
                        p = &p[n..];
                        if p.is_empty() {
                            break;
                        }
                    }
                }
            }
        }
        let end = st.eof().err();
        (replies, end)
    }

    /// Checks `stream` against the expected outcome in one piece, byte by byte, and at every
    /// split point and every pair of split points.
    fn check(expect: &Expect, stream: &[u8], want: (Vec<u64>, Option<RawError>)) {
        assert_eq!(run(expect, &[stream]), want, "one piece");
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(run(expect, &bytes), want, "byte by byte");
        for i in 0..=stream.len() {
            let (a, b) = stream.split_at(i);
            assert_eq!(run(expect, &[a, b]), want, "split at {i}");
            for j in i..=stream.len() {
                let pieces = [&stream[..i], &stream[i..j], &stream[j..]];
                assert_eq!(run(expect, &pieces), want, "splits at {i}, {j}");
            }
        }
    }

    #[test]
    fn bytes_counts_and_leaves_the_rest() {
        let e = Expect::bytes(4).unwrap();
        check(&e, b"abcdefghij", (vec![4, 4], Some(RawError::Incomplete)));
        check(&e, b"abcdefgh", (vec![4, 4], None));
        check(&Expect::bytes(1).unwrap(), b"xyz", (vec![1, 1, 1], None));
        assert_eq!(Expect::bytes(0).unwrap_err(), ExpectError::ZeroBytes);
    }

    #[test]
    fn delimiter_split_anywhere() {
        let e = Expect::delimiter(b"\r\n").unwrap();
        check(
            &e,
            b"+OK\r\n:42\r\n\r\n-ERR x\r",
            (vec![5, 5, 2], Some(RawError::Incomplete)),
        );
        // Self-overlapping delimiters need the failure table: "aab" in "aaab", "abab" in "ababab".
        check(
            &Expect::delimiter(b"aab").unwrap(),
            b"aaabxaab",
            (vec![4, 4], None),
        );
        check(
            &Expect::delimiter(b"abab").unwrap(),
            b"abababzabab",
            (vec![4, 7], None),
        );
        check(
            &Expect::delimiter(b"END\r\n").unwrap(),
            b"VALUE k 0 3\r\nEN\r\nEND\r\nEND\r\n",
            (vec![22, 5], None),
        );
        check(
            &Expect::delimiter(b"\0").unwrap(),
            b"\0a\0",
            (vec![1, 2], None),
        );
        assert!(Expect::delimiter(b"").is_err());
        assert!(Expect::delimiter(&[b'x'; MAX_DELIMITER + 1]).is_err());
    }

    #[test]
    fn delimiter_reply_limit() {
        let e = Expect::delimiter(b"\n").unwrap().with_max_reply(4);
        check(&e, b"abc\nabcd\n", (vec![4], Some(RawError::ReplyTooLarge)));
        check(&e, b"abc\nabcd", (vec![4], Some(RawError::ReplyTooLarge)));
        check(&e, b"ab\nabc", (vec![3], Some(RawError::Incomplete)));
    }

    #[test]
    fn length_prefix_forms() {
        // 2-byte big-endian, counting only the payload.
        let e = Expect::length_prefix(LengthPrefix::big_endian(2)).unwrap();
        check(&e, b"\x00\x03abc\x00\x00\x00\x01z", (vec![5, 2, 3], None));
        // 4-byte little-endian, counting the whole reply.
        let e = Expect::length_prefix(LengthPrefix {
            offset: 0,
            width: 4,
            endian: Endian::Little,
            includes_header: true,
            adjust: 0,
        })
        .unwrap();
        check(
            &e,
            b"\x06\x00\x00\x00ab\x04\x00\x00\x00",
            (vec![6, 4], None),
        );
        check(&e, b"\x03\x00\x00\x00", (vec![], Some(RawError::BadLength)));
        // PostgreSQL: a tag byte, then a 4-byte big-endian length counting itself.
        let pg = Expect::length_prefix(LengthPrefix {
            offset: 1,
            width: 4,
            endian: Endian::Big,
            includes_header: false,
            adjust: -4,
        })
        .unwrap();
        let stream = b"R\x00\x00\x00\x08\x00\x00\x00\x00Z\x00\x00\x00\x05I";
        check(&pg, stream, (vec![9, 6], None));
        // 1- and 8-byte fields; an announced length beyond the limit fails at the header.
        let one = Expect::length_prefix(LengthPrefix::big_endian(1)).unwrap();
        check(
            &one,
            b"\x00\x02hi\x01",
            (vec![1, 3], Some(RawError::Incomplete)),
        );
        let eight = Expect::length_prefix(LengthPrefix::big_endian(8))
            .unwrap()
            .with_max_reply(100);
        check(&eight, b"\0\0\0\0\0\0\0\x01x", (vec![9], None));
        check(
            &eight,
            b"\xff\0\0\0\0\0\0\0x",
            (vec![], Some(RawError::ReplyTooLarge)),
        );
        assert_eq!(
            Expect::length_prefix(LengthPrefix::big_endian(3)).unwrap_err(),
            ExpectError::Width(3)
        );
    }

    #[test]
    fn regex_shortest_reply_whatever_the_split() {
        let e = Expect::regex(r"\d+ items\r\n", 64).unwrap();
        check(
            &e,
            b"got 12 items\r\n3 items\r\nx",
            (vec![14, 9], Some(RawError::Incomplete)),
        );
        // A greedy pattern completes at the earliest end, not where one read happened to stop.
        let e = Expect::regex(r"a+", 16).unwrap();
        check(&e, b"xaaay", (vec![2, 1, 1], Some(RawError::Incomplete)));
        // `^` anchors at the start of each reply.
        let e = Expect::regex(r"^OK", 16).unwrap();
        check(&e, b"OKOK", (vec![2, 2], None));
        // No match within the window.
        let e = Expect::regex(r"DONE", 8).unwrap();
        check(&e, b"xxxxxDONE", (vec![], Some(RawError::NoMatchInWindow)));
        check(&e, b"xxxxDONE", (vec![8], None));
        assert_eq!(
            Expect::regex("x*", 8).unwrap_err(),
            ExpectError::RegexMatchesEmpty
        );
        assert!(matches!(Expect::regex("(", 8), Err(ExpectError::Regex(_))));
        assert_eq!(Expect::regex("x", 0).unwrap_err(), ExpectError::Window(0));
    }

    #[test]
    fn regex_keeps_the_reply_bytes() {
        let mut m = Matcher::new(Expect::regex(r"\n", 32).unwrap());
        assert_eq!(m.feed(b"hel").unwrap(), (3, Progress::NeedMore));
        assert_eq!(
            m.feed(b"lo\nrest").unwrap(),
            (3, Progress::Complete(Reply { len: 6 }))
        );
        assert_eq!(m.state.reply_bytes(), b"hello\n");
        assert_eq!(m.feed(b"rest").unwrap(), (4, Progress::NeedMore));
        assert_eq!(m.state.reply_bytes(), b"rest");
        assert_eq!(m.eof(), Err(RawError::Incomplete));
    }
}
