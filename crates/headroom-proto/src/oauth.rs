//! OAuth 1.0 request signing (RFC 5849), sans I/O: the `Authorization: OAuth ...` value a
//! request carries, signed with HMAC-SHA1 (or sent as PLAINTEXT), as Tsung's `<oauth>` does.
//!
//! The signature covers the request, so it is computed per request: [`Signer::write_value`]
//! takes the method, the base string URI ([`write_base_uri`]: scheme and host lower case, the
//! port only when it is not the scheme's default, the path without the query), the query and,
//! for an `application/x-www-form-urlencoded` body, the body; it decodes their parameters,
//! adds the `oauth_*` ones, encodes each as RFC 5849 §3.6 says, sorts them (by name, then
//! value, byte order), builds the signature base string (§3.4.1) and signs it with the key
//! `encode(consumer secret)&encode(token secret)` (§3.4.2).
//!
//! Everything goes through buffers the [`Signer`] keeps (one per user) and the caller's output:
//! once they have grown, a request allocates nothing. The HMAC (RustCrypto's `hmac` over
//! `sha1`, already used by the WebSocket and PostgreSQL codecs) lives on the stack.
//!
//! The percent-encoding of §3.6 is strict and is not `application/x-www-form-urlencoded`'s:
//! only `A-Z a-z 0-9 - . _ ~` stay as they are, every other byte (UTF-8) becomes `%XX` with
//! upper-case hex, a space `%20` (never `+`). Decoding the query and the body is the form's
//! (W3C HTML 4.0 §17.13.4, as §3.4.1.3.1 says): `+` is a space, `%XX` a byte.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

/// How the request is signed (`oauth_signature_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// HMAC-SHA1 of the signature base string (§3.4.2).
    #[default]
    HmacSha1,
    /// The key itself, in the clear (§3.4.4): for TLS connections only, says the RFC.
    Plaintext,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::HmacSha1 => "HMAC-SHA1",
            Method::Plaintext => "PLAINTEXT",
        }
    }
}

/// The credentials of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials<'a> {
    pub consumer_key: &'a str,
    pub consumer_secret: &'a str,
    /// Empty: no `oauth_token` (a request for temporary credentials).
    pub token: &'a str,
    pub token_secret: &'a str,
    pub method: Method,
    /// Send `oauth_version="1.0"` (optional in RFC 5849; Tsung sends it).
    pub version: bool,
}

/// A user's signing buffers, reused from request to request.
#[derive(Debug, Default)]
pub struct Signer {
    /// Encoded parameter names and values, back to back.
    pairs: Vec<u8>,
    /// Per parameter: its name's and value's ranges in `pairs`.
    spans: Vec<[u32; 4]>,
    /// One decoded name and its value.
    name: Vec<u8>,
    value: Vec<u8>,
    /// The signature base string of the last request signed with HMAC-SHA1.
    base: Vec<u8>,
    /// The signing key of the last request.
    key: Vec<u8>,
}

/// Appends `bytes` percent-encoded as RFC 5849 §3.6 says.
pub fn encode_into(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

/// Appends the base string URI of a request (§3.4.1.2): `http` or `https`, `://`, the
/// authority `host[:port]` lower-cased without the scheme's default port, then `path` (the
/// request target without its query).
pub fn write_base_uri(https: bool, authority: &str, path: &str, out: &mut String) {
    out.push_str(if https { "https://" } else { "http://" });
    let default = if https { ":443" } else { ":80" };
    let host = match authority.strip_suffix(default) {
        // Not "[::1]:80" cut inside an IPv6 literal: the rest must be a whole host.
        Some(h) if !h.is_empty() && (!h.starts_with('[') || h.ends_with(']')) => h,
        _ => authority,
    };
    for c in host.chars() {
        out.push(c.to_ascii_lowercase());
    }
    out.push_str(if path.is_empty() { "/" } else { path });
}

/// `%XX` of a hex digit pair.
fn hex(a: u8, b: u8) -> Option<u8> {
    let d = |x: u8| (x as char).to_digit(16).map(|v| v as u8);
    Some(d(a)? << 4 | d(b)?)
}

/// Decodes a form-encoded name or value (`+` a space, `%XX` a byte; a `%` not followed by two
/// hex digits stays as it is) into `out`.
fn form_decode(s: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < s.len() => match hex(s[i + 1], s[i + 2]) {
                Some(v) => {
                    out.push(v);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
}

impl Signer {
    pub fn new() -> Signer {
        Signer::default()
    }

    /// The signature base string of the last HMAC-SHA1 request (§3.4.1).
    pub fn base_string(&self) -> &[u8] {
        &self.base
    }

    /// One parameter, `name` and `value` as they are (not encoded).
    fn push(&mut self, name: &[u8], value: &[u8]) {
        push(&mut self.pairs, &mut self.spans, name, value);
    }

    /// The parameters of a form-encoded string (a query, a body): `&`-separated, each
    /// `name=value` or a lone `name` (an empty value); empty ones are skipped.
    fn push_form(&mut self, form: &[u8]) {
        for part in form.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
            let (n, v) = match part.iter().position(|&b| b == b'=') {
                Some(i) => (&part[..i], &part[i + 1..]),
                None => (part, &b""[..]),
            };
            form_decode(n, &mut self.name);
            form_decode(v, &mut self.value);
            push(&mut self.pairs, &mut self.spans, &self.name, &self.value);
        }
    }

    /// Appends the `Authorization` value of a request: `OAuth oauth_consumer_key="…", …,
    /// oauth_signature="…"`. `method` is the request's (upper case); `base_uri` from
    /// [`write_base_uri`]; `query` the target's query without `?` (empty: none); `form` the
    /// body when it is `application/x-www-form-urlencoded`; `nonce` and `timestamp` (seconds
    /// since the Unix epoch) are the caller's, fresh per request.
    #[allow(clippy::too_many_arguments)]
    pub fn write_value(
        &mut self,
        method: &str,
        base_uri: &str,
        query: &str,
        form: Option<&[u8]>,
        cred: &Credentials<'_>,
        nonce: &str,
        timestamp: u64,
        out: &mut Vec<u8>,
    ) {
        let mut digits = [0u8; 20];
        let ts = u64_text(timestamp, &mut digits);
        // The key: both secrets encoded, joined by '&' (§3.4.2), which PLAINTEXT sends as is.
        self.key.clear();
        encode_into(cred.consumer_secret.as_bytes(), &mut self.key);
        self.key.push(b'&');
        encode_into(cred.token_secret.as_bytes(), &mut self.key);
        let mut signature = [0u8; 28];
        let signature: &[u8] = match cred.method {
            Method::Plaintext => &self.key,
            Method::HmacSha1 => {
                self.pairs.clear();
                self.spans.clear();
                self.push_form(query.as_bytes());
                if let Some(body) = form {
                    self.push_form(body);
                }
                self.push(b"oauth_consumer_key", cred.consumer_key.as_bytes());
                self.push(b"oauth_nonce", nonce.as_bytes());
                self.push(b"oauth_signature_method", b"HMAC-SHA1");
                self.push(b"oauth_timestamp", ts);
                if !cred.token.is_empty() {
                    self.push(b"oauth_token", cred.token.as_bytes());
                }
                if cred.version {
                    self.push(b"oauth_version", b"1.0");
                }
                let pairs = &self.pairs;
                let at = |s: [u32; 4], k: usize| &pairs[s[k] as usize..s[k + 1] as usize];
                self.spans.sort_unstable_by(|x, y| {
                    at(*x, 0).cmp(at(*y, 0)).then(at(*x, 2).cmp(at(*y, 2)))
                });
                // METHOD&encode(uri)&encode(name=value&...): the parameters are encoded a
                // second time as a whole.
                self.base.clear();
                encode_into(method.as_bytes(), &mut self.base);
                self.base.push(b'&');
                encode_into(base_uri.as_bytes(), &mut self.base);
                self.base.push(b'&');
                for (i, s) in self.spans.iter().enumerate() {
                    if i > 0 {
                        self.base.extend_from_slice(b"%26");
                    }
                    encode_into(at(*s, 0), &mut self.base);
                    self.base.extend_from_slice(b"%3D");
                    encode_into(at(*s, 2), &mut self.base);
                }
                // Any key length is valid for HMAC: new_from_slice cannot fail.
                let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(&self.key) else {
                    return;
                };
                mac.update(&self.base);
                let digest: [u8; 20] = mac.finalize().into_bytes().into();
                let n = STANDARD
                    .encode_slice(digest, &mut signature)
                    .unwrap_or_default();
                &signature[..n]
            }
        };
        out.extend_from_slice(b"OAuth ");
        let mut first = true;
        let mut field = |name: &str, value: &[u8], out: &mut Vec<u8>| {
            if !first {
                out.extend_from_slice(b", ");
            }
            first = false;
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"=\"");
            encode_into(value, out);
            out.push(b'"');
        };
        field("oauth_consumer_key", cred.consumer_key.as_bytes(), out);
        field("oauth_nonce", nonce.as_bytes(), out);
        field("oauth_signature", signature, out);
        field(
            "oauth_signature_method",
            cred.method.as_str().as_bytes(),
            out,
        );
        field("oauth_timestamp", ts, out);
        if !cred.token.is_empty() {
            field("oauth_token", cred.token.as_bytes(), out);
        }
        if cred.version {
            field("oauth_version", b"1.0", out);
        }
    }
}

/// Appends one parameter, `name` and `value` encoded, to `pairs` and its ranges to `spans`.
fn push(pairs: &mut Vec<u8>, spans: &mut Vec<[u32; 4]>, name: &[u8], value: &[u8]) {
    let a = pairs.len() as u32;
    encode_into(name, pairs);
    let b = pairs.len() as u32;
    encode_into(value, pairs);
    spans.push([a, b, b, pairs.len() as u32]);
}

/// `n` in decimal, in `buf`.
fn u64_text(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests;
