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
//!   never inject a request line. An authority (host, port, user info) is read by core's one
//!   URL parser, [`headroom_core::url`], by its rules: a host is an ASCII name or an IP
//!   address (no IDNA here).
//!
//! Every failure is a [`LocationError`], counted as `bad_location`; nothing panics.

use std::fmt;

use headroom_core::url;

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
}

impl From<Scheme> for url::Scheme {
    fn from(s: Scheme) -> url::Scheme {
        match s {
            Scheme::Http => url::Scheme::Http,
            Scheme::Https => url::Scheme::Https,
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

/// Resolves `location` against `base` into `out` (whose buffers are reused). On error `out`
/// holds something unspecified.
///
/// An absolute or scheme-relative `Location` is taken apart by core's one URL parser
/// ([`url::Url`]); what is left here is reference resolution itself.
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
    let (scheme, rest) = match url::split_scheme(location) {
        Some((name, rest)) => {
            let scheme = match url::Scheme::parse(name) {
                Some(url::Scheme::Http) => Scheme::Http,
                Some(url::Scheme::Https) => Scheme::Https,
                _ => return Err(LocationError::UnsupportedScheme),
            };
            (Some(scheme), rest)
        }
        None => (None, location),
    };
    out.target.clear();
    if rest.starts_with(b"//") {
        let scheme = scheme.unwrap_or(base.scheme);
        let u = url::Url::with_scheme(scheme.into(), rest).map_err(location_error)?;
        out.scheme = scheme;
        out.port = u.port;
        out.host.clear();
        if u.is_ipv6() {
            out.host.push('[');
        }
        out.host
            .extend(u.host.chars().map(|c| c.to_ascii_lowercase()));
        if u.is_ipv6() {
            out.host.push(']');
        }
        push_path(&mut out.target, [].into_iter(), u.path);
        push_query(&mut out.target, u.query);
        return Ok(());
    }
    if scheme.is_some_and(|s| s != base.scheme) {
        return Err(LocationError::NoHost);
    }
    // A relative reference (`http:g` against an http base is the relative `g`).
    out.scheme = base.scheme;
    let (path, query) = url::split_path_query(rest);
    out.host.clear();
    out.host
        .extend(base.host.chars().map(|c| c.to_ascii_lowercase()));
    out.port = base.port;
    let (base_path, base_query) = url::split_path_query(base.target.as_bytes());
    if path.is_empty() {
        // Same path; the reference's query, else the base's.
        push_path(&mut out.target, [].into_iter(), base_path);
        push_query(&mut out.target, query.or(base_query));
    } else if path.first() == Some(&b'/') {
        push_path(&mut out.target, [].into_iter(), path);
        push_query(&mut out.target, query);
    } else {
        // Merge (§5.2.3): the base path up to its last '/', then the reference.
        let dir = match base_path.iter().rposition(|&b| b == b'/') {
            Some(i) => base_path.get(..i).unwrap_or_default(),
            None => &[][..],
        };
        push_path(&mut out.target, dir.split(|&b| b == b'/').skip(1), path);
        push_query(&mut out.target, query);
    }
    Ok(())
}

/// The parser's error as a `Location`'s (the bounds were checked before, and the scheme).
fn location_error(e: url::UrlError) -> LocationError {
    use url::UrlErrorKind as K;
    match e.kind {
        K::TooLong => LocationError::TooLong,
        K::ControlChar => LocationError::ControlChar,
        K::UnsupportedScheme => LocationError::UnsupportedScheme,
        K::NoScheme | K::NoAuthority | K::NoHost => LocationError::NoHost,
        K::BadHost | K::UnclosedBracket | K::AfterIpv6 | K::BadUserinfo => LocationError::BadHost,
        K::BadPort => LocationError::BadPort,
    }
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
    url::percent_encode(out, bytes, b"\"<>\\^`{|}");
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
