//! The one parser of absolute `http`, `https`, `ws` and `wss` URLs (RFC 3986 §3, the parts a
//! client needs): a run's target URL, the URLs of a HAR import and the absolute `Location` of a
//! redirect all go through [`Url::parse`] (a `Location` such as `//h/p` through
//! [`Url::with_scheme`]), so they agree on what a host, a port and a request target are.
//!
//! It borrows from its input and allocates nothing; what a caller does with the parts (lower
//! case, percent-encoding, refusing what it cannot send) is the caller's. Choices a reader might
//! not expect:
//! - The input is bytes, not `str`: a `Location` header may hold anything. Non-ASCII bytes may
//!   stand in the path and query (see [`percent_encode`]); a host must be ASCII (no IDNA).
//! - A control character (C0 or DEL) anywhere, the fragment included, refuses the URL, so that no
//!   URL can ever carry a line break into a request line. A space is refused in the authority;
//!   in the path and query it is the caller's to refuse or encode (browsers encode it).
//! - An IPv6 host must be a valid address in brackets (zone identifiers are not accepted); a
//!   name is letters, digits and `-._~`, at most 253 bytes (DNS's limit), case kept.
//! - An empty port (`http://h:/`) is the scheme's default, as RFC 3986 §3.2.3 says; a port is at
//!   most five digits, 1 to 65535.
//! - The fragment is dropped.
//!
//! Every failure is a [`UrlError`] naming what was wrong and where (a byte range of the input,
//! to quote it); nothing indexes without `get`, and nothing panics, whatever the input.

use std::net::Ipv6Addr;
use std::ops::Range;

/// Longest URL accepted, in bytes (browsers go to 2 MB; servers take 8 KiB request lines).
pub const MAX_URL_LEN: usize = 64 * 1024;

/// Longest host name accepted, in bytes (a DNS name has at most 253 characters).
pub const MAX_HOST_LEN: usize = 253;

/// The schemes [`Url::parse`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
    Ws,
    Wss,
}

impl Scheme {
    pub const fn default_port(self) -> u16 {
        match self {
            Scheme::Http | Scheme::Ws => 80,
            Scheme::Https | Scheme::Wss => 443,
        }
    }

    /// `https` and `wss`: TLS on the connection.
    pub const fn is_tls(self) -> bool {
        matches!(self, Scheme::Https | Scheme::Wss)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Ws => "ws",
            Scheme::Wss => "wss",
        }
    }

    /// The scheme named `s`, in any case.
    pub fn parse(s: &[u8]) -> Option<Scheme> {
        [Scheme::Http, Scheme::Https, Scheme::Ws, Scheme::Wss]
            .into_iter()
            .find(|k| s.eq_ignore_ascii_case(k.as_str().as_bytes()))
    }
}

/// An absolute URL taken apart; every part borrowed from the input, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Url<'a> {
    pub scheme: Scheme,
    /// What stood before the last `@` of the authority (still percent-encoded); `None` without
    /// an `@`.
    pub userinfo: Option<&'a [u8]>,
    /// A name or an IPv4 address, case kept; or an IPv6 address, without its brackets. ASCII.
    pub host: &'a str,
    /// The port written, else the scheme's default.
    pub port: u16,
    /// Empty or starting with `/`; dot segments kept.
    pub path: &'a [u8],
    /// What followed the first `?`, up to the fragment.
    pub query: Option<&'a [u8]>,
}

impl<'a> Url<'a> {
    /// An absolute URL: `scheme://[userinfo@]host[:port][/path][?query][#fragment]`.
    pub fn parse(input: &'a [u8]) -> Result<Url<'a>, UrlError> {
        check_bytes(input)?;
        let Some((name, rest)) = split_scheme(input) else {
            return Err(UrlError::new(UrlErrorKind::NoScheme, 0..0));
        };
        let at = name.len() + 1;
        if !rest.starts_with(b"//") {
            return Err(UrlError::new(UrlErrorKind::NoAuthority, at..at));
        }
        let scheme = Scheme::parse(name)
            .ok_or_else(|| UrlError::new(UrlErrorKind::UnsupportedScheme, 0..name.len()))?;
        after_scheme(scheme, input, at)
    }

    /// A reference that starts with its authority (`//host[:port]/path`, as a `Location` may
    /// be), under `scheme`. Error ranges are into `reference`.
    pub fn with_scheme(scheme: Scheme, reference: &'a [u8]) -> Result<Url<'a>, UrlError> {
        check_bytes(reference)?;
        if !reference.starts_with(b"//") {
            return Err(UrlError::new(UrlErrorKind::NoAuthority, 0..0));
        }
        after_scheme(scheme, reference, 0)
    }

    /// The host is an IPv6 address (written in brackets in a URL or a `Host` header).
    pub fn is_ipv6(&self) -> bool {
        self.host.contains(':')
    }

    /// Appends the origin-form request target: the path (`/` when empty) and `?query`, with
    /// [`percent_encode`]`(.., extra)`.
    pub fn push_target(&self, out: &mut String, extra: &[u8]) {
        if self.path.is_empty() {
            out.push('/');
        }
        percent_encode(out, self.path, extra);
        if let Some(q) = self.query {
            out.push('?');
            percent_encode(out, q, extra);
        }
    }
}

/// What is wrong with a URL, and where: `range` is the part of the input at fault (empty where
/// something is missing), to quote in a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct UrlError {
    pub kind: UrlErrorKind,
    pub range: Range<usize>,
}

impl UrlError {
    fn new(kind: UrlErrorKind, range: Range<usize>) -> UrlError {
        UrlError { kind, range }
    }

    /// The part of `input` (the parser's input) at fault; empty if it is not text.
    pub fn part<'i>(&self, input: &'i str) -> &'i str {
        input.get(self.range.clone()).unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum UrlErrorKind {
    #[error("longer than {MAX_URL_LEN} bytes")]
    TooLong,
    #[error("a control character")]
    ControlChar,
    #[error("no scheme")]
    NoScheme,
    #[error("no '//' after the scheme")]
    NoAuthority,
    #[error("a scheme other than http, https, ws or wss")]
    UnsupportedScheme,
    #[error("no host")]
    NoHost,
    #[error("a host that is not a name or an IP address")]
    BadHost,
    #[error("an unclosed '[' in the host")]
    UnclosedBracket,
    #[error("text after the IPv6 address")]
    AfterIpv6,
    #[error("a port that is not 1-65535")]
    BadPort,
    #[error("a space in the user info")]
    BadUserinfo,
}

/// The scheme of a URI reference (RFC 3986 §3.1: a letter, then letters, digits, `+-.`, before
/// the first `:`, with no `/?#` before it) and what follows its `:`; `None` for a reference
/// without one (`/p`, `//h/p`, `g`, `127.0.0.1:80`).
pub fn split_scheme(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = input
        .iter()
        .position(|&b| matches!(b, b':' | b'/' | b'?' | b'#'))?;
    let name = input.get(..i)?;
    let is_scheme = name.first().is_some_and(u8::is_ascii_alphabetic)
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if input.get(i) != Some(&b':') || !is_scheme {
        return None;
    }
    Some((name, input.get(i + 1..).unwrap_or_default()))
}

/// A path and query (what follows the authority, or a relative reference) split at the first
/// `?`, the fragment dropped.
pub fn split_path_query(tail: &[u8]) -> (&[u8], Option<&[u8]>) {
    let tail = match tail.iter().position(|&b| b == b'#') {
        Some(i) => tail.get(..i).unwrap_or_default(),
        None => tail,
    };
    match tail.iter().position(|&b| b == b'?') {
        Some(i) => (tail.get(..i).unwrap_or_default(), tail.get(i + 1..)),
        None => (tail, None),
    }
}

/// Appends `bytes`, percent-encoding (`%XX`, upper-case hex) what may not stand in a request
/// line — space, controls and every non-ASCII byte — and the bytes of `extra`.
pub fn percent_encode(out: &mut String, bytes: &[u8], extra: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b <= b' ' || b >= 0x7f || extra.contains(&b) {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        } else {
            out.push(char::from(b));
        }
    }
}

/// The bounds every input is held to before it is read: its length, and no control character.
fn check_bytes(input: &[u8]) -> Result<(), UrlError> {
    if input.len() > MAX_URL_LEN {
        return Err(UrlError::new(
            UrlErrorKind::TooLong,
            MAX_URL_LEN..input.len(),
        ));
    }
    if let Some(i) = input.iter().position(|&b| b < 0x20 || b == 0x7f) {
        return Err(UrlError::new(UrlErrorKind::ControlChar, i..i + 1));
    }
    Ok(())
}

/// The URL from its authority on: `input[at..]` starts with `//`.
fn after_scheme(scheme: Scheme, input: &[u8], at: usize) -> Result<Url<'_>, UrlError> {
    let start = at + 2;
    let rest = input.get(start..).unwrap_or_default();
    let len = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let authority = rest.get(..len).unwrap_or_default();
    let (path, query) = split_path_query(rest.get(len..).unwrap_or_default());
    let (userinfo, hostport, hp_at) = match authority.iter().rposition(|&b| b == b'@') {
        Some(i) => (
            authority.get(..i),
            authority.get(i + 1..).unwrap_or_default(),
            start + i + 1,
        ),
        None => (None, authority, start),
    };
    if let Some(i) = userinfo.and_then(|u| u.iter().position(|&b| b == b' ')) {
        return Err(UrlError::new(
            UrlErrorKind::BadUserinfo,
            start + i..start + i + 1,
        ));
    }
    let whole = hp_at..hp_at + hostport.len();
    let (host, port, port_at) = if hostport.first() == Some(&b'[') {
        let close = hostport
            .iter()
            .position(|&b| b == b']')
            .ok_or_else(|| UrlError::new(UrlErrorKind::UnclosedBracket, whole.clone()))?;
        let inner = hostport.get(1..close).unwrap_or_default();
        let host = std::str::from_utf8(inner)
            .ok()
            .filter(|h| h.parse::<Ipv6Addr>().is_ok())
            .ok_or_else(|| UrlError::new(UrlErrorKind::BadHost, hp_at..hp_at + close + 1))?;
        let port = match hostport.get(close + 1..).unwrap_or_default() {
            [] => None,
            [b':', port @ ..] => Some(port),
            _ => {
                return Err(UrlError::new(
                    UrlErrorKind::AfterIpv6,
                    hp_at + close + 1..whole.end,
                ))
            }
        };
        (host, port, hp_at + close + 2)
    } else {
        let (host, port) = match hostport.iter().rposition(|&b| b == b':') {
            Some(i) => (hostport.get(..i).unwrap_or_default(), hostport.get(i + 1..)),
            None => (hostport, None),
        };
        if host.is_empty() {
            return Err(UrlError::new(UrlErrorKind::NoHost, hp_at..hp_at));
        }
        let name_ok = host.len() <= MAX_HOST_LEN
            && host
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
        let host = std::str::from_utf8(host)
            .ok()
            .filter(|_| name_ok)
            .ok_or_else(|| UrlError::new(UrlErrorKind::BadHost, hp_at..hp_at + host.len()))?;
        (host, port, hp_at + host.len() + 1)
    };
    let port = match port {
        None | Some([]) => scheme.default_port(),
        Some(digits) => parse_port(digits)
            .ok_or_else(|| UrlError::new(UrlErrorKind::BadPort, port_at..port_at + digits.len()))?,
    };
    Ok(Url {
        scheme,
        userinfo,
        host,
        port,
        path,
        query,
    })
}

/// 1 to 65535 in at most five digits (no sign, no space).
fn parse_port(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
    u16::try_from(n).ok().filter(|&p| p != 0)
}

#[cfg(test)]
mod tests;
