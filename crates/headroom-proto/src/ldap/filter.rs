//! RFC 4515 string filters, parsed straight into their BER form (RFC 4511 section 4.5.1.7)
//! in the caller's buffer: a search whose filter changes per request (Tsung's substitutions)
//! costs no allocation, only the bytes it appends.
//!
//! ```text
//! filter         = LPAREN filtercomp RPAREN
//! filtercomp     = and / or / not / item
//! and            = AMPERSAND filterlist         -> [0] SET OF Filter
//! or             = VERTBAR filterlist           -> [1] SET OF Filter
//! not            = EXCLAMATION filter           -> [2] Filter
//! item           = simple / present / substring / extensible
//! simple         = attr filtertype assertionvalue
//!                  ; =  [3] equalityMatch, ~= [8] approxMatch,
//!                  ; >= [5] greaterOrEqual, <= [6] lessOrEqual
//! present        = attr EQUALS ASTERISK         -> [7] AttributeDescription
//! substring      = attr EQUALS [initial] any [final]   -> [4] SubstringFilter
//! extensible     = ( attr [dnattrs] [matchingrule] COLON EQUALS assertionvalue )
//!                  / ( [dnattrs] matchingrule COLON EQUALS assertionvalue )
//!                                               -> [9] MatchingRuleAssertion
//! assertionvalue = *( normal / ESC HEX HEX )    ; not NUL ( ) * \ unescaped
//! ```
//!
//! Accepted beyond the letter of RFC 4515, as OpenLDAP's own parser does: spaces around the
//! whole filter and between the members of `&`, `|` and after `!`; a bare item without
//! parentheses at the top (`uid=user1`); empty `(&)` and `(|)` (RFC 4526's absolute true and
//! false). Refused with the byte offset of the problem ([`FilterError`]): anything else, an
//! empty `any` substring (`a**b`), `*` in a value of `~=`, `>=`, `<=` or `:=`, and filters
//! longer than [`MAX_FILTER_LEN`] or nested deeper than [`MAX_FILTER_DEPTH`].

use super::ber::{begin, end, put, OCTET_STRING, SEQUENCE};

/// Longest filter string accepted, in bytes.
pub const MAX_FILTER_LEN: usize = 64 * 1024;
/// Deepest nesting of filters accepted: `(a=b)` is depth 1, `(!(a=b))` depth 2. The parser
/// recurses once per level, so this bounds its stack too.
pub const MAX_FILTER_DEPTH: usize = 32;

/// Why a filter string does not parse, and where (a byte offset into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid LDAP filter: {kind} at byte {pos}")]
pub struct FilterError {
    pub pos: usize,
    pub kind: FilterErrorKind,
}

/// What is wrong with a filter string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FilterErrorKind {
    #[error("empty filter")]
    Empty,
    #[error("filter longer than {MAX_FILTER_LEN} bytes")]
    TooLong,
    #[error("filters nested deeper than {MAX_FILTER_DEPTH}")]
    TooDeep,
    #[error("expected '('")]
    ExpectedOpen,
    #[error("expected ')'")]
    ExpectedClose,
    #[error("expected an attribute description")]
    ExpectedAttribute,
    #[error("invalid attribute description")]
    BadAttribute,
    #[error("expected '=', '~=', '>=', '<=' or ':='")]
    ExpectedOperator,
    #[error("'\\' must be followed by two hex digits")]
    BadEscape,
    #[error("this character must be escaped (\\XX) in a value")]
    Unescaped,
    #[error("empty substring between two '*'")]
    EmptySubstring,
    #[error("invalid matching rule (an OID or a name)")]
    BadMatchingRule,
    #[error("an extensible match without an attribute needs a matching rule")]
    MissingMatchingRule,
    #[error("unexpected characters after the filter")]
    Trailing,
}

/// Filter CHOICE tags (context class; constructed unless noted).
mod tag {
    pub const AND: u8 = 0xa0;
    pub const OR: u8 = 0xa1;
    pub const NOT: u8 = 0xa2;
    pub const EQUALITY: u8 = 0xa3;
    pub const SUBSTRINGS: u8 = 0xa4;
    pub const GREATER_OR_EQUAL: u8 = 0xa5;
    pub const LESS_OR_EQUAL: u8 = 0xa6;
    /// present: [7] AttributeDescription, primitive.
    pub const PRESENT: u8 = 0x87;
    pub const APPROX: u8 = 0xa8;
    pub const EXTENSIBLE: u8 = 0xa9;
    // SubstringFilter's substrings, primitive.
    pub const INITIAL: u8 = 0x80;
    pub const ANY: u8 = 0x81;
    pub const FINAL: u8 = 0x82;
    // MatchingRuleAssertion's fields, primitive.
    pub const RULE: u8 = 0x81;
    pub const TYPE: u8 = 0x82;
    pub const MATCH_VALUE: u8 = 0x83;
    pub const DN_ATTRIBUTES: u8 = 0x84;
}

/// A filter parsed once, kept as its BER encoding: what a search whose filter never changes
/// should use (the request then only copies these bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct Filter {
    ber: Box<[u8]>,
}

impl Filter {
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let mut ber = Vec::with_capacity(text.len() + 8);
        encode_filter(&mut ber, text)?;
        Ok(Filter {
            ber: ber.into_boxed_slice(),
        })
    }

    /// The Filter element as sent in a SearchRequest.
    pub fn as_ber(&self) -> &[u8] {
        &self.ber
    }
}

impl std::str::FromStr for Filter {
    type Err = FilterError;
    fn from_str(s: &str) -> Result<Filter, FilterError> {
        Filter::parse(s)
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Filter(")?;
        for b in self.ber.iter() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// Parses `text` (RFC 4515) and appends its BER Filter element to `out`. On error nothing is
/// appended (`out` is truncated back to where it was).
pub fn encode_filter(out: &mut Vec<u8>, text: &str) -> Result<(), FilterError> {
    let at = out.len();
    let r = Parser {
        s: text.as_bytes(),
        pos: 0,
        out,
    }
    .top();
    if r.is_err() {
        out.truncate(at);
    }
    r
}

struct Parser<'s, 'o> {
    s: &'s [u8],
    pos: usize,
    out: &'o mut Vec<u8>,
}

type Res<T = ()> = Result<T, FilterError>;

fn err<T>(pos: usize, kind: FilterErrorKind) -> Res<T> {
    Err(FilterError { pos, kind })
}

/// keychar = ALPHA / DIGIT / HYPHEN
fn keychar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// descr = ALPHA *keychar, or numericoid = number 1*( DOT number ), number = DIGIT / ( LDIGIT
/// 1*DIGIT ).
fn oid(s: &[u8]) -> bool {
    match s.first() {
        Some(c) if c.is_ascii_alphabetic() => s.iter().all(|&b| keychar(b)),
        Some(c) if c.is_ascii_digit() => s.split(|&b| b == b'.').all(|n| {
            !n.is_empty() && n.iter().all(u8::is_ascii_digit) && (n.len() == 1 || n[0] != b'0')
        }),
        _ => false,
    }
}

/// attributedescription = attributetype options; options = *( SEMI 1*keychar )
fn attribute_description(s: &[u8]) -> bool {
    let mut parts = s.split(|&b| b == b';');
    parts.next().is_some_and(oid) && parts.all(|o| !o.is_empty() && o.iter().all(|&b| keychar(b)))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

impl Parser<'_, '_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    fn top(&mut self) -> Res {
        if self.s.len() > MAX_FILTER_LEN {
            return err(MAX_FILTER_LEN, FilterErrorKind::TooLong);
        }
        self.skip_spaces();
        match self.peek() {
            None => return err(self.pos, FilterErrorKind::Empty),
            Some(b'(') => self.filter(1)?,
            Some(_) => self.item()?,
        }
        self.skip_spaces();
        if self.pos < self.s.len() {
            return err(self.pos, FilterErrorKind::Trailing);
        }
        Ok(())
    }

    /// `( filtercomp )` at nesting `depth`.
    fn filter(&mut self, depth: usize) -> Res {
        if depth > MAX_FILTER_DEPTH {
            return err(self.pos, FilterErrorKind::TooDeep);
        }
        if self.peek() != Some(b'(') {
            return err(self.pos, FilterErrorKind::ExpectedOpen);
        }
        self.pos += 1;
        match self.peek() {
            Some(b'&') => self.list(tag::AND, depth)?,
            Some(b'|') => self.list(tag::OR, depth)?,
            Some(b'!') => {
                self.pos += 1;
                self.skip_spaces();
                let at = begin(self.out, tag::NOT);
                self.filter(depth + 1)?;
                end(self.out, at);
                self.skip_spaces();
            }
            _ => self.item()?,
        }
        if self.peek() != Some(b')') {
            return err(self.pos, FilterErrorKind::ExpectedClose);
        }
        self.pos += 1;
        Ok(())
    }

    /// `&` or `|` (at `pos`) and its members.
    fn list(&mut self, tag: u8, depth: usize) -> Res {
        self.pos += 1;
        let at = begin(self.out, tag);
        self.skip_spaces();
        while self.peek() == Some(b'(') {
            self.filter(depth + 1)?;
            self.skip_spaces();
        }
        end(self.out, at);
        Ok(())
    }

    /// An item: everything between the parentheses that is not `&`, `|` or `!`.
    fn item(&mut self) -> Res {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| keychar(b) || b == b'.' || b == b';')
        {
            self.pos += 1;
        }
        let attr = &self.s[start..self.pos];
        let check = |attr: &[u8]| {
            if attribute_description(attr) {
                Ok(())
            } else {
                err(start, FilterErrorKind::BadAttribute)
            }
        };
        let op = self.peek();
        let then = self.s.get(self.pos + 1).copied();
        match (op, then) {
            (Some(b'='), _) if !attr.is_empty() => {
                check(attr)?;
                self.pos += 1;
                self.equality(attr)
            }
            (Some(b'~' | b'>' | b'<'), Some(b'=')) if !attr.is_empty() => {
                check(attr)?;
                self.pos += 2;
                let t = match op {
                    Some(b'~') => tag::APPROX,
                    Some(b'>') => tag::GREATER_OR_EQUAL,
                    _ => tag::LESS_OR_EQUAL,
                };
                let at = begin(self.out, t);
                put(self.out, OCTET_STRING, attr);
                let to = self.value_end();
                self.value(OCTET_STRING, self.pos, to)?;
                self.pos = to;
                end(self.out, at);
                Ok(())
            }
            (Some(b':'), _) => {
                if !attr.is_empty() {
                    check(attr)?;
                }
                self.extensible(attr, start)
            }
            _ if attr.is_empty() => err(start, FilterErrorKind::ExpectedAttribute),
            _ => err(self.pos, FilterErrorKind::ExpectedOperator),
        }
    }

    /// Where the value starting at `pos` ends: the next `)` or the end of the string.
    fn value_end(&self) -> usize {
        self.s
            .get(self.pos..)
            .and_then(|rest| rest.iter().position(|&b| b == b')'))
            .map_or(self.s.len(), |n| self.pos + n)
    }

    /// After `attr=`: present, substrings or equality, depending on the `*`s.
    fn equality(&mut self, attr: &[u8]) -> Res {
        let to = self.value_end();
        let raw = &self.s[self.pos..to];
        if raw == b"*" {
            put(self.out, tag::PRESENT, attr);
        } else if raw.contains(&b'*') {
            let at = begin(self.out, tag::SUBSTRINGS);
            put(self.out, OCTET_STRING, attr);
            let seq = begin(self.out, SEQUENCE);
            let pieces = raw.split(|&b| b == b'*').count();
            let mut from = self.pos;
            for (i, piece) in raw.split(|&b| b == b'*').enumerate() {
                let t = if i == 0 {
                    tag::INITIAL
                } else if i == pieces - 1 {
                    tag::FINAL
                } else {
                    tag::ANY
                };
                if piece.is_empty() {
                    if t == tag::ANY {
                        return err(from, FilterErrorKind::EmptySubstring);
                    }
                } else {
                    self.value(t, from, from + piece.len())?;
                }
                from += piece.len() + 1;
            }
            end(self.out, seq);
            end(self.out, at);
        } else {
            let at = begin(self.out, tag::EQUALITY);
            put(self.out, OCTET_STRING, attr);
            self.value(OCTET_STRING, self.pos, to)?;
            end(self.out, at);
        }
        self.pos = to;
        Ok(())
    }

    /// `attr [:dn] [:rule] := value` from the first `:` (at `pos`); `attr` may be empty.
    fn extensible(&mut self, attr: &[u8], start: usize) -> Res {
        let mut dn = false;
        let mut rule: Option<&[u8]> = None;
        loop {
            // At a ':'.
            self.pos += 1;
            if self.peek() == Some(b'=') {
                self.pos += 1;
                break;
            }
            let from = self.pos;
            while self.peek().is_some_and(|b| keychar(b) || b == b'.') {
                self.pos += 1;
            }
            let token = &self.s[from..self.pos];
            if !dn && rule.is_none() && token.eq_ignore_ascii_case(b"dn") {
                dn = true;
            } else if rule.is_none() && oid(token) {
                rule = Some(token);
            } else if rule.is_none() {
                return err(from, FilterErrorKind::BadMatchingRule);
            } else {
                return err(from, FilterErrorKind::ExpectedOperator);
            }
            if self.peek() != Some(b':') {
                return err(self.pos, FilterErrorKind::ExpectedOperator);
            }
        }
        if attr.is_empty() && rule.is_none() {
            return err(start, FilterErrorKind::MissingMatchingRule);
        }
        let at = begin(self.out, tag::EXTENSIBLE);
        if let Some(rule) = rule {
            put(self.out, tag::RULE, rule);
        }
        if !attr.is_empty() {
            put(self.out, tag::TYPE, attr);
        }
        let to = self.value_end();
        self.value(tag::MATCH_VALUE, self.pos, to)?;
        self.pos = to;
        if dn {
            put(self.out, tag::DN_ATTRIBUTES, &[0xff]);
        }
        end(self.out, at);
        Ok(())
    }

    /// Appends `s[from..to]`, unescaped, as a primitive element with tag `tag`.
    fn value(&mut self, tag: u8, from: usize, to: usize) -> Res {
        let at = begin(self.out, tag);
        let mut i = from;
        while i < to {
            let b = self.s[i];
            match b {
                b'\\' => {
                    let byte = self
                        .s
                        .get(i + 1..i + 3)
                        .filter(|_| i + 3 <= to)
                        .and_then(|h| Some(hex(h[0])? << 4 | hex(h[1])?));
                    let Some(byte) = byte else {
                        return err(i, FilterErrorKind::BadEscape);
                    };
                    self.out.push(byte);
                    i += 3;
                }
                b'(' | b'*' | 0 => return err(i, FilterErrorKind::Unescaped),
                _ => {
                    self.out.push(b);
                    i += 1;
                }
            }
        }
        end(self.out, at);
        Ok(())
    }
}
