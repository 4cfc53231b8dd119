//! What an HTTP user does besides sending its requests, as a browser would: keep cookies
//! (RFC 6265), follow redirects (RFC 9110 §15.4) and answer Digest challenges (RFC 7616).
//!
//! Sans I/O like the rest of the engine's protocol code: the worker hands a reply's captured
//! headers to [`Browser::after_reply`], which says what to do next ([`Next`]); the encoders ask
//! [`Browser::fields`] for the user's own fields (`Cookie`, a Digest `Authorization`) and write
//! them with the request's others (an HTTP/2 stream's `cookie` comes from
//! [`Browser::cookie_value`]); the browser writes its own hops (a redirect, a challenge
//! answered, a URL run's request with the user's fields) from the parts of the request before
//! (`headroom_proto::http1::Batch`), with the fields written as it writes them: nothing re-reads
//! a request headroom encoded.
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
use headroom_proto::http1::{Batch, HeaderId, HeaderSet, Parts};
use headroom_proto::redirect::{self, Base, FollowMethod, Scheme};

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
    pub hop: Batch,
    /// The values [`Browser::fields`] wrote last: `Cookie` and `Authorization`.
    cookie_field: Vec<u8>,
    auth_field: Vec<u8>,
    spare: Batch,
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
    pub fn adds_fields(&self, digest: bool) -> bool {
        !self.jar.is_empty() || (digest && self.digest.is_ready())
    }

    /// A URL run's request as this user sends it: `copies` of `run` (the run's request, as its
    /// encoder wrote it), each with the user's `Cookie` and, with Digest `creds` once
    /// challenged, an `Authorization` of its own, into [`Browser::hop`].
    pub fn own_request(
        &mut self,
        cfg: &BrowserConfig,
        run: Parts<'_>,
        copies: u32,
        creds: Option<(&str, &str)>,
        now: u64,
    ) {
        let mut own = std::mem::take(&mut self.hop);
        own.clear();
        let (method, target) = (run.method(), run.target());
        for _ in 0..copies {
            let (cookie, auth) = self.fields(cfg, method, target, creds, now);
            let fields = [
                ("Cookie", cookie.unwrap_or_default()),
                ("Authorization", auth.unwrap_or_default()),
            ];
            own.push_from(run, method, target, &|_| false, &fields, true);
        }
        self.hop = own;
    }

    /// Takes the reply to `request` (one request as sent; `None`: the browser's own [`hop`]
    /// request) with the headers the decoder captured, and says what comes next. `creds` are the
    /// request's Digest credentials, if it has any (a challenge is answered with them);
    /// `single` whether it was a batch of one (only those follow redirects). A hop is written
    /// into [`hop`] with the user's fields for it.
    ///
    /// [`hop`]: Browser::hop
    #[allow(clippy::too_many_arguments)]
    pub fn after_reply<'c>(
        &mut self,
        cfg: &BrowserConfig,
        status: u16,
        captured: impl Iterator<Item = (HeaderId, &'c [u8])> + Clone,
        request: Option<Parts<'_>>,
        single: bool,
        creds: Option<(&str, &str)>,
        c: &mut Counters,
        now: u64,
    ) -> Next {
        let Some(request) = request else {
            // The request is our own hop buffer, which the next hop is written into: read it
            // from a swapped-out buffer (both keep their capacity).
            let spare = std::mem::take(&mut self.spare);
            let sent = std::mem::replace(&mut self.hop, spare);
            let Some(parts) = sent.get(0) else {
                self.spare = std::mem::replace(&mut self.hop, sent);
                return Next::Done;
            };
            let next = self.reply(cfg, status, captured, parts, single, creds, c, now);
            if matches!(next, Next::Hop { .. }) {
                self.spare = sent;
            } else {
                self.spare = std::mem::replace(&mut self.hop, sent);
            }
            return next;
        };
        self.reply(cfg, status, captured, request, single, creds, c, now)
    }

    #[allow(clippy::too_many_arguments)]
    fn reply<'c>(
        &mut self,
        cfg: &BrowserConfig,
        status: u16,
        captured: impl Iterator<Item = (HeaderId, &'c [u8])> + Clone,
        request: Parts<'_>,
        single: bool,
        creds: Option<(&str, &str)>,
        c: &mut Counters,
        now: u64,
    ) -> Next {
        let (method, target) = (request.method(), request.target());
        let digest = creds.is_some();
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
            // The request again, with the answer and the cookies anew.
            let drop = |n: &[u8]| {
                n.eq_ignore_ascii_case(b"authorization") || n.eq_ignore_ascii_case(b"cookie")
            };
            self.write_hop(cfg, request, method, target, &drop, true, creds, now);
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
        // The request's method (or GET, without the body and its fields) to the new target,
        // with the request's fields but its cookies (the jar's for the new target go instead)
        // and a Digest answer, which is made anew for the new target.
        let (method, get) = match how {
            FollowMethod::Get => ("GET", true),
            FollowMethod::Same => (method, false),
        };
        let answers = creds.is_some() && self.digest.is_ready();
        let drop = |n: &[u8]| {
            n.eq_ignore_ascii_case(b"cookie")
                || (answers && n.eq_ignore_ascii_case(b"authorization"))
                || (get
                    && (n.eq_ignore_ascii_case(b"content-length")
                        || n.eq_ignore_ascii_case(b"content-type")
                        || n.eq_ignore_ascii_case(b"transfer-encoding")))
        };
        let to = std::mem::take(&mut self.target);
        self.write_hop(cfg, request, method, &to.target, &drop, !get, creds, now);
        self.target = to;
        Next::Hop { challenge: false }
    }

    /// Writes the next hop into [`Browser::hop`]: `method` to `target`, from `from`'s parts
    /// (its fields but those `drop` names, its body when `body`), with the user's fields for it.
    #[allow(clippy::too_many_arguments)]
    fn write_hop(
        &mut self,
        cfg: &BrowserConfig,
        from: Parts<'_>,
        method: &str,
        target: &str,
        drop: &dyn Fn(&[u8]) -> bool,
        body: bool,
        creds: Option<(&str, &str)>,
        now: u64,
    ) {
        let mut hop = std::mem::take(&mut self.hop);
        hop.clear();
        let (cookie, auth) = self.fields(cfg, method, target, creds, now);
        let fields = [
            ("Cookie", cookie.unwrap_or_default()),
            ("Authorization", auth.unwrap_or_default()),
        ];
        hop.push_from(from, method, target, drop, &fields, body);
        self.hop = hop;
    }
}

fn nonempty(v: &[u8]) -> Option<&[u8]> {
    (!v.is_empty()).then_some(v)
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

    /// One request as headroom's encoder writes it (with its parts), to 127.0.0.1:8080.
    fn req(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Batch {
        let mut b = Batch::new();
        let h = headers.iter().copied();
        b.push(method, path, "127.0.0.1:8080", h, &[], body, true);
        b
    }

    fn text(b: &Batch) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    const UA: &str = headroom_proto::http1::USER_AGENT;

    /// The values of the fields called `name` of the first request of `b`.
    fn named(b: &Batch, name: &[u8]) -> Vec<String> {
        b.get(0)
            .unwrap()
            .fields()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .collect()
    }

    #[test]
    fn cookies_are_stored_and_sent_on_every_request_of_a_batch() {
        let cfg = cfg(0);
        let mut a = Browser::new();
        let mut c = Counters::default();
        let login = req("POST", "/login", &[], b"abc");
        let got = [
            (HeaderId::SetCookie, &b"sid=42; Path=/"[..]),
            (HeaderId::SetCookie, &b"=bad"[..]),
            (HeaderId::SetCookie, &b"other=1; Domain=example.com"[..]),
        ];
        let n = a.after_reply(
            &cfg,
            200,
            caps(&got),
            login.get(0),
            true,
            None,
            &mut c,
            1000,
        );
        assert_eq!(n, Next::Done);
        assert_eq!(c.proto[ProtoCounter::HttpCookiesStored.index()], 1);
        assert_eq!(c.proto[ProtoCounter::HttpCookiesMalformed.index()], 1);
        assert_eq!(c.proto[ProtoCounter::HttpCookiesRejected.index()], 1);
        // A URL run's request, twice (a pipeline), each with the user's cookie.
        let run = req("GET", "/a", &[("X-A", "1")], b"");
        assert!(a.adds_fields(false));
        a.own_request(&cfg, run.get(0).unwrap(), 2, None, 1000);
        let one = format!(
            "GET /a HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: {UA}\r\nX-A: 1\r\nCookie: sid=42\r\n\r\n"
        );
        assert_eq!(text(&a.hop), one.repeat(2));
        assert_eq!(a.hop.count(), 2);
        assert_eq!(a.hop.get(1).unwrap().target(), "/a");
    }

    #[test]
    fn redirects_are_followed_up_to_the_limit_and_same_origin_only() {
        let cfg = cfg(2);
        let mut a = Browser::new();
        let mut c = Counters::default();
        let form = req("POST", "/form", &[("Content-Type", "text/plain")], b"hi");
        let post = form.get(0);
        let loc = [(HeaderId::Location, &b"/next?x=1"[..])];
        let n = a.after_reply(&cfg, 302, caps(&loc), post, true, None, &mut c, 0);
        assert_eq!(n, Next::Hop { challenge: false });
        assert_eq!(
            text(&a.hop),
            format!("GET /next?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: {UA}\r\n\r\n")
        );
        let hop = a.hop.clone();
        let loc = [(HeaderId::Location, &b"http://127.0.0.1:8080/third"[..])];
        assert_eq!(
            a.after_reply(&cfg, 307, caps(&loc), hop.get(0), true, None, &mut c, 0),
            Next::Hop { challenge: false }
        );
        assert_eq!(a.hop.get(0).unwrap().target(), "/third");
        // The browser's own hop, read where it is.
        assert_eq!(
            a.after_reply(&cfg, 301, caps(&loc), None, true, None, &mut c, 0),
            Next::Failed(ErrorKind::RedirectLimit)
        );
        assert_eq!(c.proto[ProtoCounter::HttpRedirects.index()], 2);
        a.end_request();
        let off = [(HeaderId::Location, &b"http://example.com/"[..])];
        assert_eq!(
            a.after_reply(&cfg, 302, caps(&off), post, true, None, &mut c, 0),
            Next::Failed(ErrorKind::RedirectOffsite)
        );
        let bad = [(HeaderId::Location, &b"http://[oops/"[..])];
        assert_eq!(
            a.after_reply(&cfg, 302, caps(&bad), post, true, None, &mut c, 0),
            Next::Failed(ErrorKind::BadLocation)
        );
        assert_eq!(
            a.after_reply(&cfg, 302, caps(&[]), post, true, None, &mut c, 0),
            Next::Failed(ErrorKind::BadLocation)
        );
        // 307 keeps the method and the body.
        let loc = [(HeaderId::Location, &b"/kept"[..])];
        a.end_request();
        assert_eq!(
            a.after_reply(&cfg, 307, caps(&loc), post, true, None, &mut c, 0),
            Next::Hop { challenge: false }
        );
        assert!(a.hop.starts_with(b"POST /kept HTTP/1.1\r\n"));
        assert!(a
            .hop
            .ends_with(b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi"));
        assert_eq!(a.hop.get(0).unwrap().body(), b"hi");
    }

    #[test]
    fn a_digest_challenge_is_answered_once() {
        let cfg = cfg(0);
        let mut a = Browser::new();
        let mut c = Counters::default();
        let secret = req("GET", "/secret", &[], b"");
        let ch = [(
            HeaderId::WwwAuthenticate,
            &br#"Digest realm="r", nonce="abc", qop="auth", algorithm=MD5"#[..],
        )];
        let creds = Some(("u", "p"));
        assert_eq!(
            a.after_reply(&cfg, 401, caps(&ch), secret.get(0), true, creds, &mut c, 0),
            Next::Hop { challenge: true }
        );
        let hop = text(&a.hop);
        assert!(hop.starts_with("GET /secret HTTP/1.1\r\nHost: "), "{hop}");
        assert!(hop.contains("\r\nAuthorization: Digest "), "{hop}");
        assert!(hop.contains("uri=\"/secret\""), "{hop}");
        assert!(hop.contains("nc=00000001"), "{hop}");
        // Refused again: the request ends with its 401.
        assert_eq!(
            a.after_reply(&cfg, 401, caps(&ch), None, true, creds, &mut c, 0),
            Next::Done
        );
        assert_eq!(c.proto[ProtoCounter::HttpAuthChallenges.index()], 1);
        assert_eq!(c.proto[ProtoCounter::HttpAuthFailed.index()], 1);
        // Without a Digest challenge nothing can be answered.
        a.end_request();
        let basic = [(HeaderId::WwwAuthenticate, &br#"Basic realm="r""#[..])];
        let mut b = Browser::new();
        assert_eq!(
            b.after_reply(
                &cfg,
                401,
                caps(&basic),
                secret.get(0),
                true,
                creds,
                &mut c,
                0
            ),
            Next::Done
        );
        assert_eq!(c.proto[ProtoCounter::HttpAuthFailed.index()], 2);
    }

    #[test]
    fn a_hop_carries_the_users_fields_anew_not_the_requests_old_ones() {
        let cfg = cfg(1);
        let mut a = Browser::new();
        let mut c = Counters::default();
        let old = [("Cookie", "stale=1"), ("Authorization", "Digest old")];
        let r = req("GET", "/app/x", &old, b"");
        let got = [
            (HeaderId::SetCookie, &b"sid=1; Path=/app"[..]),
            (
                HeaderId::WwwAuthenticate,
                &br#"Digest realm="r", nonce="n", qop="auth""#[..],
            ),
        ];
        let creds = Some(("u", "p"));
        let n = a.after_reply(&cfg, 401, caps(&got), r.get(0), true, creds, &mut c, 0);
        assert_eq!(n, Next::Hop { challenge: true });
        assert_eq!(named(&a.hop, b"cookie"), ["sid=1"]);
        let auth = named(&a.hop, b"authorization");
        assert_eq!(auth.len(), 1, "{auth:?}");
        assert!(auth[0].starts_with("Digest username=\"u\""), "{auth:?}");
        // A redirect of the answered request: the jar's cookies for the new target, a new
        // answer for it, one of each.
        let loc = [(HeaderId::Location, &b"/app/y"[..])];
        let n = a.after_reply(&cfg, 302, caps(&loc), None, true, creds, &mut c, 0);
        assert_eq!(n, Next::Hop { challenge: false });
        let auths = named(&a.hop, b"authorization");
        assert_eq!(auths.len(), 1, "{auths:?}");
        assert!(auths[0].contains("uri=\"/app/y\""), "{auths:?}");
        assert!(auths[0].contains("nc=00000002"), "{auths:?}");
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
        let r = req("GET", "/app/x", &[], b"");
        let got = [
            (HeaderId::SetCookie, &b"sid=1; Path=/app"[..]),
            (
                HeaderId::WwwAuthenticate,
                &br#"Digest realm="r", nonce="n", qop="auth""#[..],
            ),
        ];
        let creds = Some(("u", "p"));
        let n = a.after_reply(&cfg, 401, caps(&got), r.get(0), true, creds, &mut c, 0);
        assert_eq!(n, Next::Hop { challenge: true });
        let (cookie, auth) = a.fields(&cfg, "GET", "/app/y", creds, 0);
        assert_eq!(cookie, Some(&b"sid=1"[..]));
        let auth = String::from_utf8(auth.unwrap().to_vec()).unwrap();
        assert!(auth.starts_with("Digest username=\"u\""), "{auth}");
        assert!(auth.contains("uri=\"/app/y\""), "{auth}");
        // Outside the cookie's path, and without credentials: neither.
        assert_eq!(a.fields(&cfg, "GET", "/other", None, 0), (None, None));
    }
}
