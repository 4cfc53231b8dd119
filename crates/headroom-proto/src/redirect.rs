//! Redirect targets: resolve a `Location` value against the URL of the request it answered
//! (RFC 9110 §10.2.2, by RFC 3986 §5.2 reference resolution), sans I/O.
//!
//! `Location` may be an absolute URL (`http://h:8080/p`), scheme-relative (`//h/p`), an
//! absolute path (`/p?q`) or a relative one (`../p`), with dot segments to remove and a
//! fragment to drop. The result is a typed [`Target`] (scheme, host, port, request target),
//! written into buffers the caller keeps, so following redirects allocates nothing once warm.
//!
//! Choices a reader might not expect, each what browsers do:
//! - `http:g` with the base's own scheme and no authority is taken as the relative `g`
//!   (RFC 3986 §5.2.2 allows it "for backward compatibility").
//! - Userinfo (`http://user:pass@h/`) is dropped: credentials come from the run's auth options.
//! - Spaces, non-ASCII bytes and `"<>\^`{|}` in the path and query are percent-encoded; a
//!   control character (CR, LF, NUL, tab, …) anywhere refuses the value, so a `Location` can
//!   never inject a request line. A host must be ASCII (no IDNA here).
//!
//! Every failure is a [`LocationError`], counted as `bad_location`; nothing panics.

use std::fmt;

/// Longest `Location` value accepted, in bytes.
pub const MAX_LOCATION_LEN: usize = 8 * 1024;

/// The schemes a load generator follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scheme {
    #[default]
    Http,
    Https,
}

impl Scheme {
    pub const fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn parse(s: &[u8]) -> Option<Scheme> {
        if s.eq_ignore_ascii_case(b"http") {
            Some(Scheme::Http)
        } else if s.eq_ignore_ascii_case(b"https") {
            Some(Scheme::Https)
        } else {
            None
        }
    }
}

/// The URL of the request a `Location` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Base<'a> {
    pub scheme: Scheme,
    /// As in a URL: a name, an IPv4 address, or an IPv6 address in brackets.
    pub host: &'a str,
    pub port: u16,
    /// The request target: path and query, starting with `/` (empty is taken as `/`).
    pub target: &'a str,
}

/// Where a redirect goes. Fill one with [`resolve`] and keep it: its buffers are reused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    /// Lower-case; an IPv6 address keeps its brackets (as in a `Host` header).
    pub host: String,
    pub port: u16,
    /// Origin-form request target: path (dot segments removed) and query, starting with `/`.
    pub target: String,
}

impl Target {
    /// Same scheme, host and port as `base` (the connection can be reused).
    pub fn same_origin(&self, base: &Base<'_>) -> bool {
        self.scheme == base.scheme
            && self.port == base.port
            && self.host.eq_ignore_ascii_case(base.host)
    }

    /// The `Host` header value: the host, and the port unless it is the scheme's default.
    pub fn authority(&self) -> Authority<'_> {
        Authority(self)
    }
}

/// `host[:port]` of a [`Target`], for a `Host` header (see [`Target::authority`]).
#[derive(Debug, Clone, Copy)]
pub struct Authority<'a>(&'a Target);

impl fmt::Display for Authority<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.host)?;
        if self.0.port != self.0.scheme.default_port() {
            write!(f, ":{}", self.0.port)?;
        }
        Ok(())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority(),
            self.target
        )
    }
}

/// Why a `Location` could not be followed. All are counted as `bad_location`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum LocationError {
    #[error("empty Location")]
    Empty,
    #[error("Location longer than the limit")]
    TooLong,
    #[error("control character in Location")]
    ControlChar,
    #[error("Location with a scheme other than http or https")]
    UnsupportedScheme,
    #[error("Location without a host")]
    NoHost,
    #[error("invalid host in Location")]
    BadHost,
    #[error("invalid port in Location")]
    BadPort,
}

impl LocationError {
    /// The counter this is counted under.
    pub const fn kind(self) -> &'static str {
        "bad_location"
    }
}

/// The method of the request that follows a redirect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FollowMethod {
    /// The same method and body (307, 308; and 301/302 for anything but POST).
    Same,
    /// `GET` without a body (303 for anything but HEAD; 301/302 after a POST, as browsers do
    /// and RFC 9110 §15.4.2-3 allow).
    Get,
}

/// For a redirect status (301, 302, 303, 307, 308), how the next request is made; `None` for
/// any other status (including 300 and 304, which are not followed).
pub fn follow_method(status: u16, method: &str) -> Option<FollowMethod> {
    match status {
        301 | 302 if method.eq_ignore_ascii_case("POST") => Some(FollowMethod::Get),
        303 if !method.eq_ignore_ascii_case("HEAD") => Some(FollowMethod::Get),
        301 | 302 | 303 | 307 | 308 => Some(FollowMethod::Same),
        _ => None,
    }
}

/// The parts of a URI reference (RFC 3986 Appendix B), fragment dropped.
struct Reference<'a> {
    scheme: Option<&'a [u8]>,
    authority: Option<&'a [u8]>,
    path: &'a [u8],
    query: Option<&'a [u8]>,
}

fn split_reference(r: &[u8]) -> Reference<'_> {
    let r = match r.iter().position(|&b| b == b'#') {
        Some(i) => r.get(..i).unwrap_or_default(),
        None => r,
    };
    let mut rest = r;
    let mut scheme = None;
    if let Some(i) = r.iter().position(|&b| matches!(b, b':' | b'/' | b'?')) {
        let candidate = r.get(..i).unwrap_or_default();
        if r.get(i) == Some(&b':') && is_scheme(candidate) {
            scheme = Some(candidate);
            rest = r.get(i + 1..).unwrap_or_default();
        }
    }
    let mut authority = None;
    if let Some(after) = rest.strip_prefix(b"//") {
        let end = after
            .iter()
            .position(|&b| matches!(b, b'/' | b'?'))
            .unwrap_or(after.len());
        authority = after.get(..end);
        rest = after.get(end..).unwrap_or_default();
    }
    let (path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(i) => (rest.get(..i).unwrap_or_default(), rest.get(i + 1..)),
        None => (rest, None),
    };
    Reference {
        scheme,
        authority,
        path,
        query,
    }
}

/// `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`
fn is_scheme(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphabetic)
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Resolves `location` against `base` into `out` (whose buffers are reused). On error `out`
/// holds something unspecified.
pub fn resolve(base: &Base<'_>, location: &[u8], out: &mut Target) -> Result<(), LocationError> {
    let location = trim_ows(location);
    if location.is_empty() {
        return Err(LocationError::Empty);
    }
    if location.len() > MAX_LOCATION_LEN {
        return Err(LocationError::TooLong);
    }
    if location.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return Err(LocationError::ControlChar);
    }
    let mut r = split_reference(location);
    if let Some(s) = r.scheme {
        let scheme = Scheme::parse(s).ok_or(LocationError::UnsupportedScheme)?;
        if r.authority.is_none() {
            if scheme != base.scheme {
                return Err(LocationError::NoHost);
            }
            // `http:g` against an http base: the relative `g`.
            r.scheme = None;
        }
        out.scheme = scheme;
    } else {
        out.scheme = base.scheme;
    }
    out.target.clear();
    if let Some(authority) = r.authority {
        parse_authority(authority, out)?;
        push_path(&mut out.target, [].into_iter(), r.path);
        push_query(&mut out.target, r.query);
        return Ok(());
    }
    out.host.clear();
    out.host
        .extend(base.host.chars().map(|c| c.to_ascii_lowercase()));
    out.port = base.port;
    let base_target = base.target.as_bytes();
    let base_target = match base_target.iter().position(|&b| b == b'#') {
        Some(i) => base_target.get(..i).unwrap_or_default(),
        None => base_target,
    };
    let (base_path, base_query) = match base_target.iter().position(|&b| b == b'?') {
        Some(i) => (
            base_target.get(..i).unwrap_or_default(),
            base_target.get(i + 1..),
        ),
        None => (base_target, None),
    };
    if r.path.is_empty() {
        // Same path; the reference's query, else the base's.
        push_path(&mut out.target, [].into_iter(), base_path);
        push_query(&mut out.target, r.query.or(base_query));
    } else if r.path.first() == Some(&b'/') {
        push_path(&mut out.target, [].into_iter(), r.path);
        push_query(&mut out.target, r.query);
    } else {
        // Merge (§5.2.3): the base path up to its last '/', then the reference.
        let dir = match base_path.iter().rposition(|&b| b == b'/') {
            Some(i) => base_path.get(..i).unwrap_or_default(),
            None => &[][..],
        };
        push_path(&mut out.target, dir.split(|&b| b == b'/').skip(1), r.path);
        push_query(&mut out.target, r.query);
    }
    Ok(())
}

/// `[ userinfo "@" ] host [ ":" port ]` into `out.host` and `out.port` (the scheme's default
/// when absent or empty).
fn parse_authority(authority: &[u8], out: &mut Target) -> Result<(), LocationError> {
    let hostport = match authority.iter().rposition(|&b| b == b'@') {
        Some(i) => authority.get(i + 1..).unwrap_or_default(),
        None => authority,
    };
    let (host, port) = if hostport.first() == Some(&b'[') {
        let close = hostport
            .iter()
            .position(|&b| b == b']')
            .ok_or(LocationError::BadHost)?;
        let host = hostport.get(..=close).unwrap_or_default();
        let inner = host.get(1..close).unwrap_or_default();
        if inner.is_empty()
            || !inner
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.'))
        {
            return Err(LocationError::BadHost);
        }
        let port = match hostport.get(close + 1..).unwrap_or_default() {
            [] => None,
            [b':', port @ ..] => Some(port),
            _ => return Err(LocationError::BadHost),
        };
        (host, port)
    } else {
        match hostport.iter().rposition(|&b| b == b':') {
            Some(i) => (hostport.get(..i).unwrap_or_default(), hostport.get(i + 1..)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(LocationError::NoHost);
    }
    let reg_name_ok = host.first() == Some(&b'[')
        || host
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b));
    if !reg_name_ok {
        return Err(LocationError::BadHost);
    }
    out.port = match port {
        None | Some([]) => out.scheme.default_port(),
        Some(digits) => parse_port(digits).ok_or(LocationError::BadPort)?,
    };
    out.host.clear();
    out.host
        .extend(host.iter().map(|&b| char::from(b.to_ascii_lowercase())));
    Ok(())
}

fn parse_port(digits: &[u8]) -> Option<u16> {
    if digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
    u16::try_from(n).ok().filter(|&p| p != 0)
}

/// Writes `prefix` segments (each without its leading '/') then the segments of `path`, with
/// dot segments removed (RFC 3986 §5.2.4, done segment by segment so that the merged path never
/// has to be built first). `path` is absolute (starts with '/') when `prefix` is empty, or
/// relative to the directory `prefix` names. An empty result is `/`.
fn push_path<'a>(out: &mut String, prefix: impl Iterator<Item = &'a [u8]>, path: &'a [u8]) {
    let start = out.len();
    let rel = path.strip_prefix(b"/").unwrap_or(path);
    // An empty path (`//host`, an empty base path) has no segments at all.
    let rel_segments = (!path.is_empty()).then(|| rel.split(|&b| b == b'/'));
    let mut segments = prefix.chain(rel_segments.into_iter().flatten()).peekable();
    while let Some(seg) = segments.next() {
        let last = segments.peek().is_none();
        match seg {
            b"." => {}
            b".." => {
                let cut = out
                    .get(start..)
                    .and_then(|o| o.rfind('/'))
                    .map_or(start, |i| start + i);
                out.truncate(cut);
            }
            _ => {
                out.push('/');
                push_encoded(out, seg);
                continue;
            }
        }
        if last {
            out.push('/');
        }
    }
    if out.len() == start {
        out.push('/');
    }
}

fn push_query(out: &mut String, query: Option<&[u8]>) {
    if let Some(q) = query {
        out.push('?');
        push_encoded(out, q);
    }
}

/// Appends `bytes` (controls already refused), percent-encoding what may not stand in a
/// request target.
fn push_encoded(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b >= 0x80 || b" \"<>\\^`{|}".contains(&b) {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        } else {
            out.push(char::from(b));
        }
    }
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', tail @ ..] = s {
        s = tail;
    }
    while let [head @ .., b' ' | b'\t'] = s {
        s = head;
    }
    s
}

#[cfg(test)]
mod tests;
