//! HTTP cookies for virtual users (RFC 6265 §5, the user-agent side): parse a `Set-Cookie`
//! value, keep it in a per-user [`Jar`], write the `Cookie` header of the next request.
//!
//! # Why by hand
//!
//! The two well-kept crates do not fit the hot path. `cookie` parses (and builds) one cookie
//! but has no store, no domain or path matching and no `Cookie` header ordering, and it brings
//! the `time` crate for dates; `cookie_store` has the store but keys it by `url::Url`, keeps
//! cookies in nested `HashMap<String, …>`s and builds each request's cookie list as new owned
//! values, so every request allocates, and a jar per virtual user (tens of thousands of them)
//! costs several maps each. What is needed here is small: the parsing algorithm of §5.2, the
//! date algorithm of §5.1.1, domain and path matching (§5.1.3, §5.1.4) and the storage model
//! (§5.3) over a short `Vec`, in a few hundred lines. (`httpdate`, already in the lock file,
//! reads only the three exact HTTP-date forms; real `Expires` values need §5.1.1's tolerant
//! token algorithm: two-digit years, any token order, trailing junk.)
//!
//! # Shape
//!
//! - [`parse_set_cookie`] borrows from the header value: no allocation.
//! - A [`Jar`] holds at most [`JarLimits::max_cookies`] cookies (50 by default, RFC 6265 §6.1's
//!   minimum), each at most [`JarLimits::max_cookie_bytes`] bytes of name, value, domain and path
//!   (4096). Each cookie is one `Vec<u8>`; a replaced cookie reuses its buffer and a removed
//!   one's buffer is kept for the next, so a warm jar stores without allocating when the cookies
//!   it is sent are no larger than before. When full, expired cookies go first, then the least
//!   recently sent (§5.3 leaves the choice to the user agent); [`Jar::evicted`] counts them.
//! - The jar is kept in `Cookie` header order (§5.4: longer paths first, then earlier creation),
//!   so [`Jar::write_header`] is one pass that allocates nothing beyond growing its output.
//!
//! # Time
//!
//! Every call that needs the time takes `now`, in whole seconds since the Unix epoch (UTC), from
//! the caller's clock: `Expires` is an absolute date, so the jar cannot use a monotonic clock
//! alone, and tests can move time freely. A session cookie (neither `Expires` nor `Max-Age`)
//! never expires within a run.
//!
//! # Departures from RFC 6265, and why
//!
//! - No public-suffix list: a load generator talks to the servers under test, where the
//!   cross-site leak the list prevents is not a risk, and a `Domain=localhost`-style test setup
//!   must work. A `Domain` must still domain-match the request host (§5.3 step 6).
//! - From RFC 6265bis: control characters (other than tab) in a `Set-Cookie` reject it whole (so a
//!   cookie can never inject a header line), and `Domain` or `Path` values longer than 1024 bytes
//!   are ignored.
//! - Hosts are compared without their port (cookies ignore ports, §8.5): callers pass the host
//!   alone. An IP address literal only ever matches itself.

use std::net::Ipv4Addr;

/// Default bound on the cookies of one jar (RFC 6265 §6.1: at least 50 per domain).
pub const MAX_COOKIES: usize = 50;
/// Default bound on one cookie: name, value, domain and path together (RFC 6265 §6.1: 4096).
pub const MAX_COOKIE_BYTES: usize = 4096;
/// A `Domain` or `Path` attribute longer than this is ignored (RFC 6265bis §5.6).
pub const MAX_ATTRIBUTE_VALUE: usize = 1024;

/// Why a `Set-Cookie` was not stored. Each is counted, never fatal; [`kind`](Self::kind) names
/// the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum CookieError {
    /// No `=` before the first `;` (§5.2 step 2).
    #[error("Set-Cookie without a name=value pair")]
    NoNameValue,
    /// The name is empty (§5.2 step 5).
    #[error("Set-Cookie with an empty cookie name")]
    EmptyName,
    /// A control character other than tab (RFC 6265bis §5.6 step 1).
    #[error("Set-Cookie with a control character")]
    ControlChar,
    /// Name, value, domain and path together exceed the jar's per-cookie bound.
    #[error("cookie larger than the per-cookie bound")]
    TooLarge,
    /// The `Domain` attribute does not domain-match the request host (§5.3 step 6).
    #[error("cookie Domain does not match the request host")]
    DomainMismatch,
    /// The request host given by the caller is empty.
    #[error("empty request host")]
    EmptyHost,
}

impl CookieError {
    /// The counter this error is counted under: `cookie_malformed` for a `Set-Cookie` that does
    /// not parse, `cookie_rejected` for one that parses but may not be stored.
    pub const fn kind(self) -> &'static str {
        match self {
            CookieError::NoNameValue | CookieError::EmptyName | CookieError::ControlChar => {
                "cookie_malformed"
            }
            CookieError::TooLarge | CookieError::DomainMismatch | CookieError::EmptyHost => {
                "cookie_rejected"
            }
        }
    }
}

/// A parsed `Set-Cookie` value, borrowing from it (RFC 6265 §5.2). Attributes other than those
/// below (`SameSite`, `Priority`, …) are ignored, as the RFC says for unknown ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetCookie<'a> {
    /// Non-empty, without surrounding whitespace.
    pub name: &'a [u8],
    /// Without surrounding whitespace; quotes are part of the value (§5.2 keeps them).
    pub value: &'a [u8],
    /// The last valid `Expires`, in seconds since the Unix epoch (0 for dates before 1970).
    pub expires: Option<u64>,
    /// The last valid `Max-Age`, in seconds (saturated to the range of `i64`). Wins over
    /// `Expires` whatever their order (§5.3 step 3).
    pub max_age: Option<i64>,
    /// The last non-empty `Domain`, without its leading dot (case as sent).
    pub domain: Option<&'a [u8]>,
    /// The last `Path`; one that is empty or does not start with `/` means the default path
    /// (§5.2.4), which the store works out from the request path.
    pub path: Option<&'a [u8]>,
    pub secure: bool,
    pub http_only: bool,
}

/// Parses a `Set-Cookie` field value per RFC 6265 §5.2. Never panics, never allocates.
pub fn parse_set_cookie(input: &[u8]) -> Result<SetCookie<'_>, CookieError> {
    if input.iter().any(|&b| is_ctl(b)) {
        return Err(CookieError::ControlChar);
    }
    let mut parts = input.split(|&b| b == b';');
    let pair = parts.next().unwrap_or_default();
    let eq = pair
        .iter()
        .position(|&b| b == b'=')
        .ok_or(CookieError::NoNameValue)?;
    let name = trim_wsp(pair.get(..eq).unwrap_or_default());
    let value = trim_wsp(pair.get(eq + 1..).unwrap_or_default());
    if name.is_empty() {
        return Err(CookieError::EmptyName);
    }
    let mut cookie = SetCookie {
        name,
        value,
        expires: None,
        max_age: None,
        domain: None,
        path: None,
        secure: false,
        http_only: false,
    };
    for av in parts {
        let (key, val) = match av.iter().position(|&b| b == b'=') {
            Some(i) => (
                av.get(..i).unwrap_or_default(),
                av.get(i + 1..).unwrap_or_default(),
            ),
            None => (av, &[][..]),
        };
        let (key, val) = (trim_wsp(key), trim_wsp(val));
        if key.eq_ignore_ascii_case(b"expires") {
            if let Some(t) = parse_cookie_date(val) {
                cookie.expires = Some(t);
            }
        } else if key.eq_ignore_ascii_case(b"max-age") {
            if let Some(delta) = parse_max_age(val) {
                cookie.max_age = Some(delta);
            }
        } else if key.eq_ignore_ascii_case(b"domain") {
            let val = val.strip_prefix(b".").unwrap_or(val);
            if !val.is_empty() && val.len() <= MAX_ATTRIBUTE_VALUE {
                cookie.domain = Some(val);
            }
        } else if key.eq_ignore_ascii_case(b"path") {
            if val.len() <= MAX_ATTRIBUTE_VALUE {
                cookie.path = Some(val);
            }
        } else if key.eq_ignore_ascii_case(b"secure") {
            cookie.secure = true;
        } else if key.eq_ignore_ascii_case(b"httponly") {
            cookie.http_only = true;
        }
    }
    Ok(cookie)
}

/// §5.2.2: an optional `-` and digits only; anything else ignores the attribute. A value
/// beyond `i64` saturates (it means "forever" or "already expired" either way).
fn parse_max_age(val: &[u8]) -> Option<i64> {
    let (negative, digits) = match val.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, val),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0i64, |n, &d| {
        n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
    });
    Some(if negative { -magnitude } else { magnitude })
}

/// Parses a cookie date per RFC 6265 §5.1.1 (the tolerant algorithm browsers use: tokens in any
/// order, two-digit years, trailing junk on a token). Returns seconds since the Unix epoch, 0
/// for a valid date before 1970, `None` when it does not parse.
pub fn parse_cookie_date(input: &[u8]) -> Option<u64> {
    let mut time = None;
    let mut day = None;
    let mut month = None;
    let mut year = None;
    for token in input
        .split(|&b| is_date_delimiter(b))
        .filter(|t| !t.is_empty())
    {
        if time.is_none() {
            if let Some(t) = parse_hms(token) {
                time = Some(t);
                continue;
            }
        }
        if day.is_none() {
            if let Some(d) = leading_number(token, 1, 2) {
                day = Some(d);
                continue;
            }
        }
        if month.is_none() {
            if let Some(m) = parse_month(token) {
                month = Some(m);
                continue;
            }
        }
        if year.is_none() {
            if let Some(y) = leading_number(token, 2, 4) {
                year = Some(y);
                continue;
            }
        }
    }
    let ((hour, minute, second), day, month, mut year) = (time?, day?, month?, year?);
    if (70..=99).contains(&year) {
        year += 1900;
    } else if year <= 69 {
        year += 2000;
    }
    if year < 1601 || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    if day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
    Some(u64::try_from(secs).unwrap_or(0))
}

/// §5.1.1 delimiter: %x09 / %x20-2F / %x3B-40 / %x5B-60 / %x7B-7E.
fn is_date_delimiter(b: u8) -> bool {
    matches!(b, 0x09 | 0x20..=0x2f | 0x3b..=0x40 | 0x5b..=0x60 | 0x7b..=0x7e)
}

/// `min*max DIGIT ( non-digit *OCTET )`: the number made of the token's leading digits, when
/// there are between `min` and `max` of them.
fn leading_number(token: &[u8], min: usize, max: usize) -> Option<u32> {
    let n = token.iter().take_while(|b| b.is_ascii_digit()).count();
    if n < min || n > max {
        return None;
    }
    Some(
        token
            .get(..n)?
            .iter()
            .fold(0u32, |v, &d| v * 10 + u32::from(d - b'0')),
    )
}

/// `hms-time ( non-digit *OCTET )` with `hms-time = time-field ":" time-field ":" time-field`
/// and `time-field = 1*2DIGIT`.
fn parse_hms(token: &[u8]) -> Option<(u32, u32, u32)> {
    let mut rest = token;
    let mut fields = [0u32; 3];
    for (i, field) in fields.iter_mut().enumerate() {
        let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 || n > 2 {
            return None;
        }
        *field = leading_number(rest, 1, 2)?;
        rest = rest.get(n..)?;
        if i < 2 {
            rest = rest.strip_prefix(b":")?;
        }
    }
    // What follows the seconds must not be a digit (a third digit was already refused above).
    Some((fields[0], fields[1], fields[2]))
}

/// `month = ( "jan" / … / "dec" ) *OCTET`, case-insensitive. Returns 1–12.
fn parse_month(token: &[u8]) -> Option<u32> {
    const MONTHS: [&[u8; 3]; 12] = [
        b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
        b"dec",
    ];
    let prefix = token.get(..3)?;
    MONTHS
        .iter()
        .position(|m| prefix.eq_ignore_ascii_case(&m[..]))
        .map(|i| i as u32 + 1)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        _ => 0,
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_ctl(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

fn trim_wsp(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', tail @ ..] = s {
        s = tail;
    }
    while let [head @ .., b' ' | b'\t'] = s {
        s = head;
    }
    s
}

/// Bounds of one jar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JarLimits {
    /// Most cookies held; storing one more evicts (expired first, then least recently sent).
    pub max_cookies: usize,
    /// Most bytes of name + value + domain + path in one cookie; a larger one is refused as
    /// [`CookieError::TooLarge`].
    pub max_cookie_bytes: usize,
}

impl Default for JarLimits {
    fn default() -> Self {
        JarLimits {
            max_cookies: MAX_COOKIES,
            max_cookie_bytes: MAX_COOKIE_BYTES,
        }
    }
}

/// What storing a `Set-Cookie` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stored {
    /// A new cookie.
    Added,
    /// It replaced the cookie of the same name, domain and path (keeping its creation time).
    Replaced,
    /// It was already expired (`Max-Age<=0`, a past `Expires`) and deleted the cookie of the
    /// same name, domain and path: how servers log users out.
    Deleted,
    /// It was already expired and there was nothing to delete.
    Expired,
}

/// One stored cookie. Its bytes are `name | value | domain | path` in `buf`.
#[derive(Debug)]
struct Cookie {
    buf: Vec<u8>,
    name_end: u32,
    value_end: u32,
    domain_end: u32,
    /// Seconds since the Unix epoch; `u64::MAX` for a session cookie.
    expiry: u64,
    /// Last time sent or stored (a jar-wide sequence), for eviction. (Creation order needs no
    /// field: it is the order among cookies of equal path length, as inserted.)
    last_access: u64,
    persistent: bool,
    host_only: bool,
    secure: bool,
    http_only: bool,
}

impl Cookie {
    fn name(&self) -> &[u8] {
        self.buf.get(..self.name_end as usize).unwrap_or_default()
    }
    fn value(&self) -> &[u8] {
        self.buf
            .get(self.name_end as usize..self.value_end as usize)
            .unwrap_or_default()
    }
    fn domain(&self) -> &[u8] {
        self.buf
            .get(self.value_end as usize..self.domain_end as usize)
            .unwrap_or_default()
    }
    fn path(&self) -> &[u8] {
        self.buf.get(self.domain_end as usize..).unwrap_or_default()
    }
    fn path_len(&self) -> usize {
        self.buf.len().saturating_sub(self.domain_end as usize)
    }
    fn expired(&self, now: u64) -> bool {
        self.expiry <= now
    }
    /// §5.4 step 1: may this cookie go with a request to `host` and `path`?
    fn matches(&self, host: &[u8], path: &[u8], secure: bool) -> bool {
        let domain_ok = if self.host_only {
            host.eq_ignore_ascii_case(self.domain())
        } else {
            domain_match(host, self.domain())
        };
        domain_ok && path_match(path, self.path()) && (secure || !self.secure)
    }
}

/// A read-only view of a stored cookie ([`Jar::iter`]).
#[derive(Debug, Clone, Copy)]
pub struct CookieView<'a> {
    cookie: &'a Cookie,
}

impl<'a> CookieView<'a> {
    pub fn name(&self) -> &'a [u8] {
        self.cookie.name()
    }
    pub fn value(&self) -> &'a [u8] {
        self.cookie.value()
    }
    /// Lower-case; the request host itself for a host-only cookie.
    pub fn domain(&self) -> &'a [u8] {
        self.cookie.domain()
    }
    pub fn path(&self) -> &'a [u8] {
        self.cookie.path()
    }
    /// Seconds since the Unix epoch; `None` for a session cookie.
    pub fn expiry(&self) -> Option<u64> {
        self.cookie.persistent.then_some(self.cookie.expiry)
    }
    pub fn host_only(&self) -> bool {
        self.cookie.host_only
    }
    pub fn secure(&self) -> bool {
        self.cookie.secure
    }
    pub fn http_only(&self) -> bool {
        self.cookie.http_only
    }
}

/// The cookies of one virtual user. See the module documentation.
#[derive(Debug, Default)]
pub struct Jar {
    limits: JarLimits,
    /// In `Cookie` header order: longer paths first, then earlier creation.
    cookies: Vec<Cookie>,
    /// Buffers of removed cookies, reused by the next ones (live + spare <= max_cookies).
    spare: Vec<Vec<u8>>,
    /// Jar-wide sequence for creation and access order.
    clock: u64,
    evicted: u64,
}

impl Jar {
    /// An empty jar with the default limits (allocates nothing until a cookie is stored).
    pub fn new() -> Jar {
        Jar::default()
    }

    /// A jar with other bounds (`max_cookies` of at least 1).
    pub fn with_limits(limits: JarLimits) -> Jar {
        Jar {
            limits: JarLimits {
                max_cookies: limits.max_cookies.max(1),
                ..limits
            },
            ..Jar::default()
        }
    }

    pub fn limits(&self) -> JarLimits {
        self.limits
    }

    /// Cookies held (expired ones included until a store or [`remove_expired`](Self::remove_expired)
    /// drops them; they are never sent).
    pub fn len(&self) -> usize {
        self.cookies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    /// Cookies evicted so far to make room (not counting expired or replaced ones).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// The stored cookies, in `Cookie` header order.
    pub fn iter(&self) -> impl Iterator<Item = CookieView<'_>> + '_ {
        self.cookies.iter().map(|cookie| CookieView { cookie })
    }

    /// Forgets every cookie (a scenario's "clear cookies" step; a user starting afresh). Keeps
    /// the buffers for reuse.
    pub fn clear(&mut self) {
        let Jar { cookies, spare, .. } = self;
        spare.extend(cookies.drain(..).map(|c| c.buf));
    }

    /// Drops the cookies that expired by `now`.
    pub fn remove_expired(&mut self, now: u64) {
        let Jar { cookies, spare, .. } = self;
        cookies.retain_mut(|c| {
            if c.expired(now) {
                spare.push(std::mem::take(&mut c.buf));
            }
            !c.expired(now)
        });
    }

    /// Parses a `Set-Cookie` value received in answer to a request for `host` (without port)
    /// and `request_path` (query and fragment are ignored), and stores it.
    pub fn set_cookie(
        &mut self,
        set_cookie: &[u8],
        host: &str,
        request_path: &str,
        now: u64,
    ) -> Result<Stored, CookieError> {
        let parsed = parse_set_cookie(set_cookie)?;
        self.store(&parsed, host, request_path, now)
    }

    /// Stores a parsed `Set-Cookie` per RFC 6265 §5.3. See [`set_cookie`](Self::set_cookie).
    pub fn store(
        &mut self,
        sc: &SetCookie<'_>,
        host: &str,
        request_path: &str,
        now: u64,
    ) -> Result<Stored, CookieError> {
        let host = host.as_bytes();
        if host.is_empty() {
            return Err(CookieError::EmptyHost);
        }
        // Step 3: Max-Age wins over Expires.
        let (persistent, expiry) = match (sc.max_age, sc.expires) {
            (Some(delta), _) if delta <= 0 => (true, 0),
            (Some(delta), _) => (true, now.saturating_add(delta.unsigned_abs())),
            (None, Some(at)) => (true, at),
            (None, None) => (false, u64::MAX),
        };
        // Step 6: a Domain must domain-match the host; without one the cookie is host-only.
        // (A Domain equal to the host is not host-only: the cookie also goes to subdomains.)
        let (domain, host_only) = match sc.domain {
            Some(d) if domain_match(host, d) => (d, false),
            Some(_) => return Err(CookieError::DomainMismatch),
            None => (host, true),
        };
        // Step 7.
        let path = match sc.path {
            Some(p) if p.first() == Some(&b'/') => p,
            _ => default_path(request_path.as_bytes()),
        };
        let size = sc.name.len() + sc.value.len() + domain.len() + path.len();
        if size > self.limits.max_cookie_bytes || size > u32::MAX as usize {
            return Err(CookieError::TooLarge);
        }

        // Step 11: the same name, domain and path (domain compared without case).
        let old = self.cookies.iter().position(|c| {
            c.name() == sc.name && c.path() == path && c.domain().eq_ignore_ascii_case(domain)
        });
        if expiry <= now {
            return Ok(match old {
                Some(i) => {
                    self.remove_at(i);
                    Stored::Deleted
                }
                None => Stored::Expired,
            });
        }
        self.clock += 1;
        let tick = self.clock;
        let fill = |c: &mut Cookie| {
            c.buf.clear();
            c.buf.extend_from_slice(sc.name);
            c.name_end = c.buf.len() as u32;
            c.buf.extend_from_slice(sc.value);
            c.value_end = c.buf.len() as u32;
            c.buf.extend(domain.iter().map(u8::to_ascii_lowercase));
            c.domain_end = c.buf.len() as u32;
            c.buf.extend_from_slice(path);
            c.expiry = expiry;
            c.last_access = tick;
            c.persistent = persistent;
            c.host_only = host_only;
            c.secure = sc.secure;
            c.http_only = sc.http_only;
        };
        if let Some(i) = old {
            // Same path, same creation time: its place in the order does not change.
            if let Some(c) = self.cookies.get_mut(i) {
                fill(c);
            }
            return Ok(Stored::Replaced);
        }
        if self.cookies.len() >= self.limits.max_cookies {
            self.remove_expired(now);
        }
        while self.cookies.len() >= self.limits.max_cookies {
            let lru = self
                .cookies
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.last_access)
                .map(|(i, _)| i);
            match lru {
                Some(i) => self.remove_at(i),
                None => break,
            }
            self.evicted += 1;
        }
        let mut cookie = Cookie {
            buf: self.spare.pop().unwrap_or_default(),
            name_end: 0,
            value_end: 0,
            domain_end: 0,
            expiry: 0,
            last_access: tick,
            persistent: false,
            host_only: false,
            secure: false,
            http_only: false,
        };
        fill(&mut cookie);
        // The newest cookie goes after every cookie with a path at least as long.
        let at = self
            .cookies
            .iter()
            .position(|c| c.path_len() < cookie.path_len())
            .unwrap_or(self.cookies.len());
        self.cookies.insert(at, cookie);
        Ok(Stored::Added)
    }

    fn remove_at(&mut self, i: usize) {
        if i < self.cookies.len() {
            let c = self.cookies.remove(i);
            self.spare.push(c.buf);
        }
    }

    /// Appends `Cookie: a=b; c=d\r\n` with the cookies for a request to `host` (without port)
    /// and `request_path` (its query and fragment are ignored) over a secure channel or not, in
    /// RFC 6265 §5.4 order; appends nothing when none match. Returns how many were written.
    ///
    /// Allocates nothing beyond growing `out` (none when it has the capacity).
    pub fn write_header(
        &mut self,
        host: &str,
        request_path: &str,
        secure: bool,
        now: u64,
        out: &mut Vec<u8>,
    ) -> usize {
        let start = out.len();
        out.extend_from_slice(b"Cookie: ");
        let n = self.write_value(host, request_path, secure, now, out);
        if n == 0 {
            out.truncate(start);
        } else {
            out.extend_from_slice(b"\r\n");
        }
        n
    }

    /// Like [`write_header`](Self::write_header), but only the field value: `a=b; c=d`.
    pub fn write_value(
        &mut self,
        host: &str,
        request_path: &str,
        secure: bool,
        now: u64,
        out: &mut Vec<u8>,
    ) -> usize {
        let host = host.as_bytes();
        let path = strip_query(request_path.as_bytes());
        self.clock += 1;
        let tick = self.clock;
        let mut n = 0;
        for c in &mut self.cookies {
            if c.expired(now) || !c.matches(host, path, secure) {
                continue;
            }
            if n > 0 {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(c.name());
            out.push(b'=');
            out.extend_from_slice(c.value());
            c.last_access = tick;
            n += 1;
        }
        n
    }
}

/// RFC 6265 §5.1.3: `host` (a request host) domain-matches `domain` (lower-case or not).
pub fn domain_match(host: &[u8], domain: &[u8]) -> bool {
    if host.eq_ignore_ascii_case(domain) {
        return true;
    }
    if domain.is_empty() || host.len() <= domain.len() || is_ip_literal(host) {
        return false;
    }
    let cut = host.len() - domain.len();
    host.get(cut..)
        .is_some_and(|tail| tail.eq_ignore_ascii_case(domain))
        && host.get(cut - 1) == Some(&b'.')
}

/// An IPv4 address or a bracketed / bare IPv6 address: those match only themselves.
fn is_ip_literal(host: &[u8]) -> bool {
    host.contains(&b':')
        || host.first() == Some(&b'[')
        || std::str::from_utf8(host).is_ok_and(|h| h.parse::<Ipv4Addr>().is_ok())
}

/// RFC 6265 §5.1.4: `request_path` (without query) path-matches `cookie_path`.
pub fn path_match(request_path: &[u8], cookie_path: &[u8]) -> bool {
    let request_path = if request_path.is_empty() {
        &b"/"[..]
    } else {
        request_path
    };
    if request_path == cookie_path {
        return true;
    }
    request_path.starts_with(cookie_path)
        && (cookie_path.last() == Some(&b'/') || request_path.get(cookie_path.len()) == Some(&b'/'))
}

/// RFC 6265 §5.1.4: the default path of a cookie set in answer to `request_path`: its directory.
pub fn default_path(request_path: &[u8]) -> &[u8] {
    let path = strip_query(request_path);
    if path.first() != Some(&b'/') {
        return b"/";
    }
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => path.get(..i).unwrap_or(b"/"),
    }
}

/// The path part of a request target: up to `?` or `#`.
fn strip_query(target: &[u8]) -> &[u8] {
    let end = target
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(target.len());
    target.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests;
