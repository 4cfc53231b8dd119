//! HTTP authentication for virtual users, sans I/O: Basic (RFC 7617) and Digest (RFC 7616).
//!
//! Basic is a fixed header per user: [`write_basic`] base64-encodes `user:password` straight
//! into the output (the `base64` crate's streaming encoder, no intermediate buffer).
//!
//! Digest is a small exchange: a request gets `401` with `WWW-Authenticate: Digest realm=…,
//! nonce=…`; [`parse_digest_challenge`] reads it (borrowing, no allocation) and a per-user
//! [`DigestState`] keeps the realm, nonce and opaque in reused buffers with the nonce count, so
//! that every later request carries a fresh `Authorization: Digest …` computed by
//! [`DigestState::write_header`] until the server calls the nonce stale. Supported: `qop=auth`
//! (and the legacy RFC 2069 form without qop), algorithms MD5, MD5-sess, SHA-256, SHA-256-sess,
//! `userhash`, `username*` for non-ASCII user names. Refused with a typed error: `auth-int`
//! alone (it hashes the body, which the engine does not hand over) and SHA-512-256.
//!
//! The hashes are RustCrypto's `md-5` and `sha2` (already used by the PostgreSQL codec); the
//! challenge parser is hand-written because no well-kept crate parses `WWW-Authenticate`
//! without allocating per value.

use std::io::Write as _;

use base64::engine::general_purpose::STANDARD;
use md5::Md5;
use sha2::{Digest as _, Sha256};

/// Longest realm, nonce or opaque kept, in bytes (a real one is tens of bytes).
pub const MAX_PARAM_LEN: usize = 1024;

/// Appends `Authorization: Basic base64(user:password)\r\n` (RFC 7617; the bytes as given,
/// which is UTF-8 for a `&str`). Allocates nothing beyond growing `out`.
pub fn write_basic(user: &str, password: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"Authorization: ");
    write_basic_value(user, password, out);
    out.extend_from_slice(b"\r\n");
}

/// Appends the field value alone: `Basic base64(user:password)`.
pub fn write_basic_value(user: &str, password: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"Basic ");
    let mut enc = base64::write::EncoderWriter::new(out, &STANDARD);
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(user.as_bytes());
    let _ = enc.write_all(b":");
    let _ = enc.write_all(password.as_bytes());
    let _ = enc.finish();
}

/// Why a challenge cannot be answered. Counted, never fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AuthError {
    #[error("no Digest challenge in WWW-Authenticate")]
    NotDigest,
    #[error("malformed WWW-Authenticate")]
    Malformed,
    #[error("Digest challenge without a realm")]
    MissingRealm,
    #[error("Digest challenge without a nonce")]
    MissingNonce,
    #[error("Digest parameter longer than the limit")]
    TooLarge,
    #[error("unsupported Digest algorithm")]
    UnsupportedAlgorithm,
    #[error("Digest challenge offers only qop=auth-int")]
    AuthIntOnly,
    #[error("Digest challenge offers no known qop")]
    UnsupportedQop,
    #[error("no Digest challenge received yet")]
    NoChallenge,
}

impl AuthError {
    /// The counter this is counted under: `auth_unsupported` for a valid challenge asking for
    /// what is not implemented, `auth_challenge` for a bad or missing one.
    pub const fn kind(self) -> &'static str {
        match self {
            AuthError::UnsupportedAlgorithm
            | AuthError::AuthIntOnly
            | AuthError::UnsupportedQop => "auth_unsupported",
            _ => "auth_challenge",
        }
    }
}

/// A Digest algorithm (RFC 7616 §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    #[default]
    Md5,
    Md5Sess,
    Sha256,
    Sha256Sess,
}

impl Algorithm {
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "MD5",
            Algorithm::Md5Sess => "MD5-sess",
            Algorithm::Sha256 => "SHA-256",
            Algorithm::Sha256Sess => "SHA-256-sess",
        }
    }

    fn parse(token: &[u8]) -> Option<Algorithm> {
        [
            Algorithm::Md5,
            Algorithm::Md5Sess,
            Algorithm::Sha256,
            Algorithm::Sha256Sess,
        ]
        .into_iter()
        .find(|a| token.eq_ignore_ascii_case(a.name().as_bytes()))
    }

    const fn session(self) -> bool {
        matches!(self, Algorithm::Md5Sess | Algorithm::Sha256Sess)
    }
}

/// The protection the client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Qop {
    /// `qop=auth`.
    #[default]
    Auth,
    /// No qop in the challenge: the RFC 2069 computation, without `nc` and `cnonce`.
    Legacy,
}

/// A Digest challenge, borrowing from the header value. Quoted values are as they appear
/// between the quotes (backslash escapes included); they are unescaped when hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestChallenge<'a> {
    pub realm: &'a [u8],
    pub nonce: &'a [u8],
    pub opaque: Option<&'a [u8]>,
    pub algorithm: Algorithm,
    /// The challenge named its algorithm (echoed back only then, as RFC 2617 clients do).
    pub algorithm_given: bool,
    pub qop: Qop,
    /// The previous nonce was merely stale: retry with this one, the credentials were fine.
    pub stale: bool,
    pub userhash: bool,
}

/// Finds the first Digest challenge in a `WWW-Authenticate` value (which may hold several
/// challenges, of any schemes) that can be answered. When none can, the error of the first
/// Digest challenge is returned ([`AuthError::NotDigest`] when there is none). With several
/// `WWW-Authenticate` fields, try them in order: servers list their preferred algorithm first.
pub fn parse_digest_challenge(value: &[u8]) -> Result<DigestChallenge<'_>, AuthError> {
    let mut cur = Cursor { s: value, pos: 0 };
    let mut first_err = None;
    loop {
        cur.skip_list_separators();
        if cur.at_end() {
            return Err(first_err.unwrap_or(AuthError::NotDigest));
        }
        let scheme = cur.token().ok_or(AuthError::Malformed)?;
        let is_digest = scheme.eq_ignore_ascii_case(b"digest");
        let mut b = Builder::default();
        // The parameters, up to the next challenge (a token not followed by '=') or the end.
        loop {
            cur.skip_list_separators();
            let mark = cur.pos;
            let Some(name) = cur.token() else {
                if cur.at_end() {
                    break;
                }
                return Err(AuthError::Malformed);
            };
            cur.skip_ows();
            if !cur.eat(b'=') {
                cur.pos = mark; // the next challenge's scheme
                break;
            }
            cur.skip_ows();
            let value = match cur.peek() {
                Some(b'"') => cur.quoted().ok_or(AuthError::Malformed)?,
                // token68 padding (`Basic abc=`, `Negotiate YII==`): skip to the next comma.
                Some(b'=' | b',') | None => {
                    cur.skip_to_comma();
                    continue;
                }
                Some(_) => cur.token().ok_or(AuthError::Malformed)?,
            };
            if is_digest {
                b.param(name, value);
            }
        }
        if is_digest {
            match b.finish() {
                Ok(c) => return Ok(c),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
    }
}

/// The Digest parameters seen so far.
#[derive(Default)]
struct Builder<'a> {
    realm: Option<&'a [u8]>,
    nonce: Option<&'a [u8]>,
    opaque: Option<&'a [u8]>,
    algorithm: Option<&'a [u8]>,
    qop: Option<&'a [u8]>,
    stale: bool,
    userhash: bool,
}

impl<'a> Builder<'a> {
    fn param(&mut self, name: &[u8], value: &'a [u8]) {
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"realm") {
            self.realm = Some(value);
        } else if is(b"nonce") {
            self.nonce = Some(value);
        } else if is(b"opaque") {
            self.opaque = Some(value);
        } else if is(b"algorithm") {
            self.algorithm = Some(value);
        } else if is(b"qop") {
            self.qop = Some(value);
        } else if is(b"stale") {
            self.stale = value.eq_ignore_ascii_case(b"true");
        } else if is(b"userhash") {
            self.userhash = value.eq_ignore_ascii_case(b"true");
        }
        // domain, charset and extensions are ignored.
    }

    fn finish(self) -> Result<DigestChallenge<'a>, AuthError> {
        let realm = self.realm.ok_or(AuthError::MissingRealm)?;
        let nonce = self.nonce.ok_or(AuthError::MissingNonce)?;
        let too_long = |v: &[u8]| v.len() > MAX_PARAM_LEN;
        if too_long(realm) || too_long(nonce) || self.opaque.is_some_and(too_long) {
            return Err(AuthError::TooLarge);
        }
        let algorithm = match self.algorithm {
            None => Algorithm::Md5,
            Some(a) => Algorithm::parse(a).ok_or(AuthError::UnsupportedAlgorithm)?,
        };
        let qop = match self.qop {
            None => Qop::Legacy,
            Some(list) => {
                let mut options = list
                    .split(|&b| b == b',')
                    .map(trim_ows)
                    .filter(|o| !o.is_empty());
                if options.clone().any(|o| o.eq_ignore_ascii_case(b"auth")) {
                    Qop::Auth
                } else if options.any(|o| o.eq_ignore_ascii_case(b"auth-int")) {
                    return Err(AuthError::AuthIntOnly);
                } else {
                    return Err(AuthError::UnsupportedQop);
                }
            }
        };
        Ok(DigestChallenge {
            realm,
            nonce,
            opaque: self.opaque,
            algorithm,
            algorithm_given: self.algorithm.is_some(),
            qop,
            stale: self.stale,
            userhash: self.userhash,
        })
    }
}

/// A position in a header value, for the challenge grammar of RFC 9110 §11.6.1.
struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }
    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.pos += usize::from(hit);
        hit
    }
    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }
    fn skip_list_separators(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.pos += 1;
        }
    }
    fn skip_to_comma(&mut self) {
        while !matches!(self.peek(), Some(b',') | None) {
            self.pos += 1;
        }
    }
    fn token(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        while self.peek().is_some_and(is_tchar) {
            self.pos += 1;
        }
        self.s.get(start..self.pos).filter(|t| !t.is_empty())
    }
    /// A quoted-string, returned without its quotes and with its escapes kept. Control
    /// characters other than tab are refused, escaped or not (RFC 9110 §5.6.4): the value is
    /// echoed into our `Authorization` header, where a CR or LF would start a new line.
    fn quoted(&mut self) -> Option<&'a [u8]> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.pos;
        loop {
            match self.peek()? {
                b'"' => {
                    let inner = self.s.get(start..self.pos);
                    self.pos += 1;
                    return inner;
                }
                b'\\' => {
                    self.pos += 1;
                    if is_ctl(self.peek()?) {
                        return None;
                    }
                    self.pos += 1;
                }
                b if is_ctl(b) => return None,
                _ => self.pos += 1,
            }
        }
    }
}

fn is_ctl(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
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

/// The Digest state of one user: the last challenge and the nonce count.
#[derive(Debug, Default, Clone)]
pub struct DigestState {
    /// Realm, nonce and opaque as received (escapes kept), reused across challenges.
    realm: Vec<u8>,
    nonce: Vec<u8>,
    opaque: Vec<u8>,
    has_opaque: bool,
    algorithm: Algorithm,
    algorithm_given: bool,
    qop: Qop,
    userhash: bool,
    /// Requests sent with the current nonce.
    nc: u32,
    ready: bool,
}

impl DigestState {
    pub fn new() -> DigestState {
        DigestState::default()
    }

    /// A challenge has been taken: [`write_header`](Self::write_header) can answer it.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// Parses a `WWW-Authenticate` value and takes its Digest challenge
    /// ([`parse_digest_challenge`]); on error the state is unchanged.
    pub fn take_challenge_value<'v>(
        &mut self,
        value: &'v [u8],
    ) -> Result<DigestChallenge<'v>, AuthError> {
        let c = parse_digest_challenge(value)?;
        self.take_challenge(&c);
        Ok(c)
    }

    /// Takes a challenge: a new nonce restarts the nonce count.
    pub fn take_challenge(&mut self, c: &DigestChallenge<'_>) {
        if self.nonce != c.nonce {
            self.nc = 0;
        }
        for (buf, v) in [
            (&mut self.realm, c.realm),
            (&mut self.nonce, c.nonce),
            (&mut self.opaque, c.opaque.unwrap_or_default()),
        ] {
            buf.clear();
            buf.extend_from_slice(v);
        }
        self.has_opaque = c.opaque.is_some();
        self.algorithm = c.algorithm;
        self.algorithm_given = c.algorithm_given;
        self.qop = c.qop;
        self.userhash = c.userhash;
        self.ready = true;
    }

    /// The nonce count the next [`write_header`](Self::write_header) sends.
    pub fn next_nc(&self) -> u32 {
        self.nc.wrapping_add(1).max(1)
    }

    /// Appends `Authorization: Digest …\r\n` for a request (`uri` is its request target, as
    /// sent) with client nonce `cnonce` (unique per request in spirit; the caller's RNG), and
    /// counts the nonce use. Allocates nothing beyond growing `out`. Before any challenge it
    /// writes nothing and returns [`AuthError::NoChallenge`].
    pub fn write_header(
        &mut self,
        user: &str,
        password: &str,
        method: &str,
        uri: &str,
        cnonce: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), AuthError> {
        if !self.ready {
            return Err(AuthError::NoChallenge);
        }
        out.extend_from_slice(b"Authorization: ");
        self.write_value(user, password, method, uri, cnonce, out)?;
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Like [`write_header`](Self::write_header), but only the field value (`Digest …`).
    pub fn write_value(
        &mut self,
        user: &str,
        password: &str,
        method: &str,
        uri: &str,
        cnonce: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), AuthError> {
        if !self.ready {
            return Err(AuthError::NoChallenge);
        }
        self.nc = self.next_nc();
        let mut nc_hex = [0u8; 8];
        hex_into(&self.nc.to_be_bytes(), &mut nc_hex);
        let alg = self.algorithm;
        let (realm, nonce) = (&self.realm[..], &self.nonce[..]);
        let user = user.as_bytes();
        let cnonce = cnonce.as_bytes();

        // HA1 = H(user:realm:password), for -sess H(that:nonce:cnonce) (RFC 7616 §3.4.2).
        let mut ha1 = Hex::hash(alg, |h| {
            h.update(user);
            h.update(b":");
            h.update_unescaped(realm);
            h.update(b":");
            h.update(password.as_bytes());
        });
        if alg.session() {
            ha1 = Hex::hash(alg, |h| {
                h.update(ha1.as_bytes());
                h.update(b":");
                h.update_unescaped(nonce);
                h.update(b":");
                h.update(cnonce);
            });
        }
        let ha2 = Hex::hash(alg, |h| {
            h.update(method.as_bytes());
            h.update(b":");
            h.update(uri.as_bytes());
        });
        let response = Hex::hash(alg, |h| {
            h.update(ha1.as_bytes());
            h.update(b":");
            h.update_unescaped(nonce);
            h.update(b":");
            if self.qop == Qop::Auth {
                h.update(&nc_hex);
                h.update(b":");
                h.update(cnonce);
                h.update(b":auth:");
            }
            h.update(ha2.as_bytes());
        });

        out.extend_from_slice(b"Digest ");
        if self.userhash {
            let hashed = Hex::hash(alg, |h| {
                h.update(user);
                h.update(b":");
                h.update_unescaped(realm);
            });
            put_quoted(out, b"username", hashed.as_bytes());
        } else if user.iter().all(|&b| (0x20..0x7f).contains(&b)) {
            put_quoted(out, b"username", user);
        } else {
            // RFC 7616 §3.4.4: `username*` in the RFC 8187 extended notation.
            out.extend_from_slice(b"username*=UTF-8''");
            put_pct_encoded(out, user);
        }
        out.extend_from_slice(b", ");
        put_raw_quoted(out, b"realm", realm);
        out.extend_from_slice(b", ");
        put_quoted(out, b"uri", uri.as_bytes());
        if self.algorithm_given {
            out.extend_from_slice(b", algorithm=");
            out.extend_from_slice(alg.name().as_bytes());
        }
        out.extend_from_slice(b", ");
        put_raw_quoted(out, b"nonce", nonce);
        if self.qop == Qop::Auth {
            out.extend_from_slice(b", nc=");
            out.extend_from_slice(&nc_hex);
            out.extend_from_slice(b", ");
            put_quoted(out, b"cnonce", cnonce);
            out.extend_from_slice(b", qop=auth");
        }
        out.extend_from_slice(b", ");
        put_raw_quoted(out, b"response", response.as_bytes());
        if self.has_opaque {
            out.extend_from_slice(b", ");
            put_raw_quoted(out, b"opaque", &self.opaque);
        }
        if self.userhash {
            out.extend_from_slice(b", userhash=true");
        }
        Ok(())
    }
}

/// `name="value"` with `"` and `\` escaped.
fn put_quoted(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b"=\"");
    for &b in value {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// `name="value"` for a value still in its quoted form (as received).
fn put_raw_quoted(out: &mut Vec<u8>, name: &[u8], raw: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b"=\"");
    out.extend_from_slice(raw);
    out.push(b'"');
}

/// RFC 8187 `value-chars`: attr-char as is, the rest as %XX.
fn put_pct_encoded(out: &mut Vec<u8>, value: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in value {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 15)];
    }
}

/// One of the two hash functions, behind one interface.
enum Hasher {
    Md5(Md5),
    Sha256(Sha256),
}

impl Hasher {
    fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }

    /// Hashes a quoted-string's content as its unescaped value (`\x` is `x`).
    fn update_unescaped(&mut self, raw: &[u8]) {
        let mut rest = raw;
        while let Some(i) = rest.iter().position(|&b| b == b'\\') {
            self.update(rest.get(..i).unwrap_or_default());
            self.update(rest.get(i + 1..i + 2).unwrap_or_default());
            rest = rest.get(i + 2..).unwrap_or_default();
        }
        self.update(rest);
    }
}

/// A lower-case hex digest on the stack (32 or 64 characters).
#[derive(Clone, Copy)]
struct Hex {
    buf: [u8; 64],
    len: usize,
}

impl Hex {
    fn hash(alg: Algorithm, feed: impl FnOnce(&mut Hasher)) -> Hex {
        let mut h = match alg {
            Algorithm::Md5 | Algorithm::Md5Sess => Hasher::Md5(Md5::new()),
            Algorithm::Sha256 | Algorithm::Sha256Sess => Hasher::Sha256(Sha256::new()),
        };
        feed(&mut h);
        let mut hex = Hex {
            buf: [0; 64],
            len: 0,
        };
        match h {
            Hasher::Md5(h) => {
                hex_into(&h.finalize(), &mut hex.buf);
                hex.len = 32;
            }
            Hasher::Sha256(h) => {
                hex_into(&h.finalize(), &mut hex.buf);
                hex.len = 64;
            }
        }
        hex
    }

    fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
