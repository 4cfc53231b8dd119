//! What an HTTP user does besides sending its requests, as a browser would: keep cookies
//! (RFC 6265), follow redirects (RFC 9110 §15.4) and answer Digest challenges (RFC 7616).
//!
//! Sans I/O like the rest of the engine's protocol code: the worker hands a reply's captured
//! headers to [`Browser::after_reply`], which says what to do next ([`Next`]); the encoders ask
//! [`Browser::fields`] for the user's own fields (`Cookie`, a Digest `Authorization`) and write
//! them with the request's others (an HTTP/2 stream's `cookie` comes from
//! [`Browser::cookie_value`]); the browser's own hops get theirs from [`Browser::decorate`].
//!
//! Cost when nothing is used: a user gets a `Browser` only once the server sets a cookie, a
//! redirect is to be followed or a challenge answered; until then the decoder's header capture
//! (one branch per head, see `headroom_proto::http1::capture`) is the whole price. A warm browser
//! allocates nothing per request: the jar keeps its cookies' buffers, decoration and redirect
//! requests are written into buffers the browser keeps.
//!
//! Redirects are followed for a batch of one request only (a pipelined batch's replies are
//! taken as they are), to the run's own origin only: headroom loads one server, so a redirect
//! elsewhere is counted as `redirect_offsite`, not followed.

use std::time::{SystemTime, UNIX_EPOCH};

use headroom_core::{ErrorKind, ProtoCounter};
use headroom_metrics::Counters;
use headroom_proto::auth::DigestState;
use headroom_proto::cookie::{CookieError, Jar, Stored};
use headroom_proto::http1::{HeaderId, HeaderSet};
use headroom_proto::redirect::{self, Base, FollowMethod, Scheme};

/// Most request headers a redirected request may carry (it is one headroom encoded itself).
const MAX_HEADERS: usize = 64;

/// The run's settings every user's browser reads; one per worker.
pub(crate) struct BrowserConfig {
    pub cookies: bool,
    pub follow: u32,
    /// Host of the run's target as cookies see it (no port), its port and scheme.
    pub host: String,
    pub port: u16,
    pub scheme: Scheme,
    /// URL runs: Digest credentials for every request.
    pub digest: Option<(String, String)>,
    /// Some request may be answered with a Digest challenge (URL credentials or a scenario
    /// request with `auth: digest`).
    pub any_digest: bool,
    /// `--compressed`: the decoder decodes gzip, deflate and br bodies (it captures
    /// `Content-Encoding`, which turns its content decoder on) and their sizes are counted.
    pub compressed: bool,
}

impl BrowserConfig {
    /// The response headers the decoder must keep for this run (empty: none).
    pub fn capture(&self) -> HeaderSet {
        let mut set = HeaderSet::NONE;
        if self.cookies {
            set = set.with(HeaderId::SetCookie);
        }
        if self.follow > 0 {
            set = set.with(HeaderId::Location);
        }
        if self.any_digest {
            set = set.with(HeaderId::WwwAuthenticate);
        }
        if self.compressed {
            set = set.with(HeaderId::ContentEncoding);
        }
        set
    }

    pub fn active(&self) -> bool {
        !self.capture().is_empty()
    }
}

/// The host part of a `Host` header value (cookies ignore ports, RFC 6265 §8.5).
pub(crate) fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        // [v6]:port
        return rest.split(']').next().unwrap_or(rest);
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => authority,
    }
}

/// Seconds since the Unix epoch, the clock cookie expiry is kept in.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What the worker does after a reply the browser has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// The reply ends the request: go on as usual.
    Done,
    /// The reply ends the request, which failed with this kind (a redirect not followed).
    Failed(ErrorKind),
    /// Send the request in [`Browser::hop`] (a redirect, or the request again with a Digest
    /// answer): the reply was one hop of the request, not its end.
    Hop { challenge: bool },
}

/// One user's HTTP state beyond its connection.
#[derive(Default)]
pub(crate) struct Browser {
    pub jar: Jar,
    digest: DigestState,
    /// Hops of the current request so far (redirects followed).
    pub hops: u32,
    /// The current request was already sent again with a Digest answer.
    answered: bool,
    /// When the current request's first hop was meant to go (its whole time is from there).
    pub chain_start: Option<std::time::Instant>,
    /// The next hop's request, or a URL run's own request (the run's with this user's fields).
    pub hop: Vec<u8>,
    scratch: Vec<u8>,
    /// The values [`Browser::fields`] wrote last: `Cookie` and `Authorization`.
    cookie_field: Vec<u8>,
    auth_field: Vec<u8>,
    spare: Vec<u8>,
    target: redirect::Target,
    cnonce: u64,
    cnonce_text: String,
}

impl Browser {
    pub fn new() -> Box<Browser> {
        Box::default()
    }

    /// A new session (a closed user starting over): a fresh jar and no challenge, as a new
    /// browser would have.
    pub fn new_session(&mut self) {
        self.jar.clear();
        self.digest = DigestState::new();
        self.end_request();
    }

    /// The current request is over (whatever its end).
    pub fn end_request(&mut self) {
        self.hops = 0;
        self.answered = false;
        self.chain_start = None;
    }

    /// The user's `Cookie` field value for a request to `target` (`None`: no cookie applies):
    /// what an HTTP/2 stream sends as its `cookie` field ([`Browser::fields`] without a Digest
    /// answer).
    pub fn cookie_value(&mut self, cfg: &BrowserConfig, target: &str, now: u64) -> Option<&[u8]> {
        self.fields(cfg, "", target, None, now).0
    }

    /// The fields this user adds to a request of `method` to `target`, for the encoder to write
    /// with the request's others: its `Cookie` (the jar's cookies that apply) and, with Digest
    /// `creds` once a challenge is taken, its `Authorization` (the nonce count goes up). Written
    /// by the jar and the Digest state into buffers the browser keeps: nothing allocates once
    /// warm, and nothing re-reads the request.
    pub fn fields(
        &mut self,
        cfg: &BrowserConfig,
        method: &str,
        target: &str,
        creds: Option<(&str, &str)>,
        now: u64,
    ) -> (Option<&[u8]>, Option<&[u8]>) {
        self.cookie_field.clear();
        self.auth_field.clear();
        if cfg.cookies && !self.jar.is_empty() {
            let secure = cfg.scheme == Scheme::Https;
            self.jar
                .write_value(&cfg.host, target, secure, now, &mut self.cookie_field);
        }
        if let Some((user, password)) = creds.filter(|_| self.digest.is_ready()) {
            self.next_cnonce();
            let _ = self.digest.write_value(
                user,
                password,
                method,
                target,
                &self.cnonce_text,
                &mut self.auth_field,
            );
        }
        (nonempty(&self.cookie_field), nonempty(&self.auth_field))
    }

    /// A fresh client nonce for a Digest answer, in `cnonce_text`.
    fn next_cnonce(&mut self) {
        use std::fmt::Write as _;
        self.cnonce = self.cnonce.wrapping_add(1);
        self.cnonce_text.clear();
        let _ = write!(
            self.cnonce_text,
            "{:016x}",
            self.cnonce ^ 0x6865_6164_726f_6f6d
        );
    }

    /// Something to add to a request: cookies, or a Digest answer to give.
    pub fn decorates(&self, digest: bool) -> bool {
        !self.jar.is_empty() || (digest && self.digest.is_ready())
    }

    /// Rewrites `batch` (requests back to back) with the user's `Cookie` header and, when
    /// `digest` holds credentials, a Digest `Authorization`, right after each request line.
    /// Requests that match no cookie are copied unchanged. For the browser's own hops (a
    /// redirect, a challenge answered), which it built from the request before; a request the
    /// run or a session encodes gets its fields from the encoder ([`Browser::fields`]).
    pub fn decorate(
        &mut self,
        cfg: &BrowserConfig,
        batch: &mut Vec<u8>,
        digest: Option<(&str, &str)>,
        now: u64,
    ) {
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let mut rest: &[u8] = batch;
        while !rest.is_empty() {
            let Some(len) = request_len(rest) else {
                // Not a request headroom encoded (cannot happen): keep the bytes as they are.
                out.extend_from_slice(rest);
                break;
            };
            let (one, tail) = rest.split_at(len);
            rest = tail;
            let Some(line_end) = one.windows(2).position(|w| w == b"\r\n").map(|i| i + 2) else {
                out.extend_from_slice(one);
                continue;
            };
            out.extend_from_slice(&one[..line_end]);
            let (method, target) = request_line(&one[..line_end]);
            if cfg.cookies {
                self.jar.write_header(
                    &cfg.host,
                    target,
                    cfg.scheme == Scheme::Https,
                    now,
                    &mut out,
                );
            }
            if let Some((user, password)) = digest {
                if self.digest.is_ready() {
                    self.next_cnonce();
                    let _ = self.digest.write_header(
                        user,
                        password,
                        method,
                        target,
                        &self.cnonce_text,
                        &mut out,
                    );
                }
            }
            out.extend_from_slice(&one[line_end..]);
        }
        std::mem::swap(batch, &mut out);
        self.scratch = out;
    }

    /// Takes the reply to `request` (one request as sent; `None`: the browser's own [`hop`]
    /// request) with the headers the decoder captured, and says what comes next. `digest` tells
    /// whether the request had Digest credentials; `single` whether it was a batch of one (only
    /// those follow redirects).
    ///
    /// [`hop`]: Browser::hop
    #[allow(clippy::too_many_arguments)]
    pub fn after_reply<'c>(
        &mut self,
        cfg: &BrowserConfig,
        status: u16,
        captured: impl Iterator<Item = (HeaderId, &'c [u8])> + Clone,
        request: Option<&[u8]>,
        single: bool,
        digest: bool,
        c: &mut Counters,
        now: u64,
    ) -> Next {
        let Some(request) = request else {
            // The request is our own hop buffer, which the next hop is written into: read it
            // from a swapped-out buffer (both keep their capacity).
            let spare = std::mem::take(&mut self.spare);
            let sent = std::mem::replace(&mut self.hop, spare);
            let next = self.reply(cfg, status, captured, &sent, single, digest, c, now);
            if matches!(next, Next::Hop { .. }) {
                self.spare = sent;
            } else {
                self.spare = std::mem::replace(&mut self.hop, sent);
            }
            return next;
        };
        self.reply(cfg, status, captured, request, single, digest, c, now)
    }

    #[allow(clippy::too_many_arguments)]
    fn reply<'c>(
        &mut self,
        cfg: &BrowserConfig,
        status: u16,
        captured: impl Iterator<Item = (HeaderId, &'c [u8])> + Clone,
        request: &[u8],
        single: bool,
        digest: bool,
        c: &mut Counters,
        now: u64,
    ) -> Next {
        let line_end = request
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(request.len(), |i| i + 2);
        let (method, target) = request_line(&request[..line_end]);
        if cfg.cookies {
            for (id, value) in captured.clone() {
                if id != HeaderId::SetCookie {
                    continue;
                }
                let before = self.jar.evicted();
                match self.jar.set_cookie(value, &cfg.host, target, now) {
                    Ok(Stored::Added | Stored::Replaced) => {
                        c.proto(ProtoCounter::HttpCookiesStored, 1)
                    }
                    Ok(Stored::Deleted | Stored::Expired) => {}
                    Err(e) => c.proto(
                        match e {
                            CookieError::NoNameValue
                            | CookieError::EmptyName
                            | CookieError::ControlChar => ProtoCounter::HttpCookiesMalformed,
                            _ => ProtoCounter::HttpCookiesRejected,
                        },
                        1,
                    ),
                }
                let evicted = self.jar.evicted() - before;
                if evicted > 0 {
                    c.proto(ProtoCounter::HttpCookiesEvicted, evicted);
                }
            }
        }
        if status == 401 && digest {
            if self.answered {
                // The answer was refused: the request ends with its 401.
                c.proto(ProtoCounter::HttpAuthFailed, 1);
                return Next::Done;
            }
            let mut taken = false;
            for (id, value) in captured.clone() {
                if id == HeaderId::WwwAuthenticate
                    && self.digest.take_challenge_value(value).is_ok()
                {
                    taken = true;
                    break;
                }
            }
            if !taken || !single {
                c.proto(ProtoCounter::HttpAuthFailed, 1);
                return Next::Done;
            }
            self.answered = true;
            c.proto(ProtoCounter::HttpAuthChallenges, 1);
            self.hop.clear();
            self.hop.extend_from_slice(request);
            // The hop gets the answer and the cookies anew when it is decorated.
            strip_header(&mut self.hop, b"authorization", &mut self.scratch);
            strip_header(&mut self.hop, b"cookie", &mut self.scratch);
            return Next::Hop { challenge: true };
        }
        if cfg.follow == 0 || !(300..400).contains(&status) {
            return Next::Done;
        }
        let Some(how) = redirect::follow_method(status, method) else {
            return Next::Done;
        };
        if !single {
            return Next::Done;
        }
        let location = captured
            .filter(|(id, _)| *id == HeaderId::Location)
            .map(|(_, v)| v)
            .next();
        let Some(location) = location else {
            return Next::Failed(ErrorKind::BadLocation);
        };
        let base = Base {
            scheme: cfg.scheme,
            host: &cfg.host,
            port: cfg.port,
            target,
        };
        if redirect::resolve(&base, location, &mut self.target).is_err() {
            return Next::Failed(ErrorKind::BadLocation);
        }
        if !self.target.same_origin(&base) {
            return Next::Failed(ErrorKind::RedirectOffsite);
        }
        if self.hops >= cfg.follow {
            return Next::Failed(ErrorKind::RedirectLimit);
        }
        self.hops += 1;
        self.answered = false;
        c.proto(ProtoCounter::HttpRedirects, 1);
        let mut hop = std::mem::take(&mut self.hop);
        redirect_request(request, how, &self.target.target, &mut hop);
        self.hop = hop;
        Next::Hop { challenge: false }
    }
}

fn nonempty(v: &[u8]) -> Option<&[u8]> {
    (!v.is_empty()).then_some(v)
}

/// The `i`th request of a batch encoded by headroom (the whole batch if it cannot be split).
pub(crate) fn nth_request(batch: &[u8], i: usize) -> &[u8] {
    let mut rest = batch;
    for _ in 0..i {
        match request_len(rest) {
            Some(n) => rest = &rest[n..],
            None => return batch,
        }
    }
    match request_len(rest) {
        Some(n) => &rest[..n],
        None => rest,
    }
}

/// Method and request target of a request line (`GET /a?b HTTP/1.1\r\n`).
fn request_line(line: &[u8]) -> (&str, &str) {
    let line = std::str::from_utf8(line).unwrap_or("");
    let mut parts = line.split(' ');
    let method = parts.next().unwrap_or("GET");
    let target = parts.next().unwrap_or("/");
    (method, target)
}

/// Length of the first request in `buf` (head and `Content-Length` body), if complete.
pub(crate) fn request_len(buf: &[u8]) -> Option<usize> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return None,
    };
    let mut body = 0usize;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            body = std::str::from_utf8(h.value).ok()?.trim().parse().ok()?;
        }
    }
    let end = head.checked_add(body)?;
    (end <= buf.len()).then_some(end)
}

/// Writes the request for a redirect hop: `orig`'s method (or GET, dropping the body and its
/// headers) to `target`, with `orig`'s headers but its cookies (the jar adds the hop's own).
fn redirect_request(orig: &[u8], how: FollowMethod, target: &str, out: &mut Vec<u8>) {
    out.clear();
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(head)) = req.parse(orig) else {
        return;
    };
    let method = match how {
        FollowMethod::Get => "GET",
        FollowMethod::Same => req.method.unwrap_or("GET"),
    };
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for h in req.headers.iter() {
        let drop = h.name.eq_ignore_ascii_case("cookie")
            || (how == FollowMethod::Get
                && (h.name.eq_ignore_ascii_case("content-length")
                    || h.name.eq_ignore_ascii_case("content-type")
                    || h.name.eq_ignore_ascii_case("transfer-encoding")));
        if drop {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if how == FollowMethod::Same {
        out.extend_from_slice(&orig[head..]);
    }
}

/// Removes every header named `name` (lower-case) from the one request in `req`.
fn strip_header(req: &mut Vec<u8>, name: &[u8], scratch: &mut Vec<u8>) {
    scratch.clear();
    let mut pos = 0;
    let mut in_head = true;
    while pos < req.len() {
        if !in_head {
            scratch.extend_from_slice(&req[pos..]);
            break;
        }
        let end = req[pos..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(req.len(), |i| pos + i + 2);
        let line = &req[pos..end];
        if line == b"\r\n" {
            in_head = false;
        }
        let matches = line.len() > name.len()
            && line[..name.len()].eq_ignore_ascii_case(name)
            && line[name.len()] == b':';
        if !matches {
            scratch.extend_from_slice(line);
        }
        pos = end;
    }
    std::mem::swap(req, scratch);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(follow: u32) -> BrowserConfig {
        BrowserConfig {
            cookies: true,
            follow,
            host: "127.0.0.1".into(),
            port: 8080,
            scheme: Scheme::Http,
            digest: None,
            any_digest: true,
            compressed: false,
        }
    }

    #[test]
    fn compressed_runs_capture_content_encoding_alone_or_with_the_rest() {
        let mut c = BrowserConfig {
            cookies: false,
            follow: 0,
            any_digest: false,
            ..cfg(0)
        };
        assert!(!c.active());
        c.compressed = true;
        assert!(c.active());
        assert_eq!(c.capture(), HeaderSet::from(HeaderId::ContentEncoding));
        let all = BrowserConfig {
            compressed: true,
            ..cfg(3)
        };
        assert_eq!(all.capture(), HeaderSet::ALL);
        assert!(!cfg(3).capture().contains(HeaderId::ContentEncoding));
    }

    fn caps<'a>(
        v: &'a [(HeaderId, &'a [u8])],
    ) -> impl Iterator<Item = (HeaderId, &'a [u8])> + Clone + 'a {
        v.iter().copied()
    }

    #[test]
    fn host_of_strips_ports() {
        assert_eq!(host_of("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_of("example.com"), "example.com");
        assert_eq!(host_of("[::1]:80"), "::1");
    }

    #[test]
    fn cookies_are_stored_and_sent_on_every_request_of_a_batch() {
        let cfg = cfg(0);
        let mut a = Browser::new();
        let mut c = Counters::default();
        let req = b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
        let got = [
            (HeaderId::SetCookie, &b"sid=42; Path=/"[..]),
            (HeaderId::SetCookie, &b"=bad"[..]),
            (HeaderId::SetCookie, &b"other=1; Domain=example.com"[..]),
        ];
        let n = a.after_reply(&cfg, 200, caps(&got), Some(req), true, false, &mut c, 1000);
        assert_eq!(n, Next::Done);
        assert_eq!(c.proto[ProtoCounter::HttpCookiesStored.index()], 1);
        assert_eq!(c.proto[ProtoCounter::HttpCookiesMalformed.index()], 1);
        assert_eq!(c.proto[ProtoCounter::HttpCookiesRejected.index()], 1);
        let mut batch =
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
                .to_vec();
        assert!(a.decorates(false));
        a.decorate(&cfg, &mut batch, None, 1000);
        assert_eq!(
            std::str::from_utf8(&batch).unwrap(),
            "GET /a HTTP/1.1\r\nCookie: sid=42\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nCookie: sid=42\r\nContent-Length: 2\r\n\r\nhi"
        );
    }

    #[test]
    fn redirects_are_followed_up_to_the_limit_and_same_origin_only() {
        let cfg = cfg(2);
        let mut a = Browser::new();
        let mut c = Counters::default();
        let req = b"POST /form HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nhi";
        let loc = [(HeaderId::Location, &b"/next?x=1"[..])];
        let n = a.after_reply(&cfg, 302, caps(&loc), Some(req), true, false, &mut c, 0);
        assert_eq!(n, Next::Hop { challenge: false });
        assert_eq!(
            std::str::from_utf8(&a.hop).unwrap(),
            "GET /next?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
        let hop = a.hop.clone();
        let loc = [(HeaderId::Location, &b"http://127.0.0.1:8080/third"[..])];
        assert_eq!(
            a.after_reply(&cfg, 307, caps(&loc), Some(&hop), true, false, &mut c, 0),
            Next::Hop { challenge: false }
        );
        let hop = a.hop.clone();
        assert_eq!(
            a.after_reply(&cfg, 301, caps(&loc), Some(&hop), true, false, &mut c, 0),
            Next::Failed(ErrorKind::RedirectLimit)
        );
        assert_eq!(c.proto[ProtoCounter::HttpRedirects.index()], 2);
        a.end_request();
        let off = [(HeaderId::Location, &b"http://example.com/"[..])];
        assert_eq!(
            a.after_reply(&cfg, 302, caps(&off), Some(req), true, false, &mut c, 0),
            Next::Failed(ErrorKind::RedirectOffsite)
        );
        let bad = [(HeaderId::Location, &b"http://[oops/"[..])];
        assert_eq!(
            a.after_reply(&cfg, 302, caps(&bad), Some(req), true, false, &mut c, 0),
            Next::Failed(ErrorKind::BadLocation)
        );
        assert_eq!(
            a.after_reply(&cfg, 302, caps(&[]), Some(req), true, false, &mut c, 0),
            Next::Failed(ErrorKind::BadLocation)
        );
        // 307 keeps the method and the body.
        let loc = [(HeaderId::Location, &b"/kept"[..])];
        a.end_request();
        assert_eq!(
            a.after_reply(&cfg, 307, caps(&loc), Some(req), true, false, &mut c, 0),
            Next::Hop { challenge: false }
        );
        assert!(a.hop.starts_with(b"POST /kept HTTP/1.1\r\n"));
        assert!(a
            .hop
            .ends_with(b"Content-Length: 2\r\nContent-Type: text/plain\r\n\r\nhi"));
    }

    #[test]
    fn a_digest_challenge_is_answered_once() {
        let cfg = cfg(0);
        let mut a = Browser::new();
        let mut c = Counters::default();
        let req = b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n";
        let ch = [(
            HeaderId::WwwAuthenticate,
            &br#"Digest realm="r", nonce="abc", qop="auth", algorithm=MD5"#[..],
        )];
        assert_eq!(
            a.after_reply(&cfg, 401, caps(&ch), Some(req), true, true, &mut c, 0),
            Next::Hop { challenge: true }
        );
        let mut hop = a.hop.clone();
        assert!(a.decorates(true));
        a.decorate(&cfg, &mut hop, Some(("u", "p")), 0);
        let text = String::from_utf8(hop.clone()).unwrap();
        assert!(
            text.starts_with("GET /secret HTTP/1.1\r\nAuthorization: Digest "),
            "{text}"
        );
        assert!(text.contains("uri=\"/secret\""), "{text}");
        assert!(text.contains("nc=00000001"), "{text}");
        // Refused again: the request ends with its 401.
        assert_eq!(
            a.after_reply(&cfg, 401, caps(&ch), Some(&hop), true, true, &mut c, 0),
            Next::Done
        );
        assert_eq!(c.proto[ProtoCounter::HttpAuthChallenges.index()], 1);
        assert_eq!(c.proto[ProtoCounter::HttpAuthFailed.index()], 1);
        // Without a Digest challenge nothing can be answered.
        a.end_request();
        let basic = [(HeaderId::WwwAuthenticate, &br#"Basic realm="r""#[..])];
        let mut b = Browser::new();
        assert_eq!(
            b.after_reply(&cfg, 401, caps(&basic), Some(req), true, true, &mut c, 0),
            Next::Done
        );
        assert_eq!(c.proto[ProtoCounter::HttpAuthFailed.index()], 2);
    }

    #[test]
    fn fields_are_the_jars_cookies_for_the_path_and_a_digest_answer_once_challenged() {
        let cfg = cfg(0);
        let mut a = Browser::new();
        let mut c = Counters::default();
        assert_eq!(
            a.fields(&cfg, "GET", "/", Some(("u", "p")), 0),
            (None, None)
        );
        let req = b"GET /app/x HTTP/1.1\r\nHost: x\r\n\r\n";
        let got = [
            (HeaderId::SetCookie, &b"sid=1; Path=/app"[..]),
            (
                HeaderId::WwwAuthenticate,
                &br#"Digest realm="r", nonce="n", qop="auth""#[..],
            ),
        ];
        let n = a.after_reply(&cfg, 401, caps(&got), Some(req), true, true, &mut c, 0);
        assert_eq!(n, Next::Hop { challenge: true });
        let (cookie, auth) = a.fields(&cfg, "GET", "/app/y", Some(("u", "p")), 0);
        assert_eq!(cookie, Some(&b"sid=1"[..]));
        let auth = String::from_utf8(auth.unwrap().to_vec()).unwrap();
        assert!(auth.starts_with("Digest username=\"u\""), "{auth}");
        assert!(auth.contains("uri=\"/app/y\""), "{auth}");
        // Outside the cookie's path, and without credentials: neither.
        assert_eq!(a.fields(&cfg, "GET", "/other", None, 0), (None, None));
    }

    #[test]
    fn strip_header_only_touches_the_head() {
        let mut r =
            b"GET / HTTP/1.1\r\nAuthorization: x\r\nHost: h\r\n\r\nAuthorization: body".to_vec();
        let mut s = Vec::new();
        strip_header(&mut r, b"authorization", &mut s);
        assert_eq!(
            std::str::from_utf8(&r).unwrap(),
            "GET / HTTP/1.1\r\nHost: h\r\n\r\nAuthorization: body"
        );
    }
}
