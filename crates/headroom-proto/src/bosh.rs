//! BOSH (XEP-0124) carrying an XMPP stream (XEP-0206), client side, sans I/O.
//!
//! The XMPP codec ([`crate::xmpp`]) writes and reads a plain XMPP stream; this module sits
//! between it and two HTTP/1.1 connections, as a BOSH client does:
//! - **out**: [`Bosh::submit`] takes what the XMPP side wrote (a stream open, stanzas, a stream
//!   close) and [`Bosh::request`] writes the HTTP POSTs that carry it: the session's creation
//!   for the first stream open, a restart (`xmpp:restart='true'`) for the open after SASL,
//!   queued stanzas wrapped in `<body rid sid>`, a `type='terminate'` for the close, and an empty
//!   poll whenever no request is outstanding, so that the server always holds one;
//! - **in**: [`Bosh::feed`] takes a connection's HTTP response bytes; each complete response's
//!   `<body>` children go to [`Bosh::inbox`], with a stream header made up where the server's
//!   stream (re)starts and a stream close where it ends the session, so the XMPP splitter sees
//!   the stream it would have seen over TCP.
//!
//! A poll is written only once the inbox is read, and by [`Bosh::request`] only (the client
//! calls [`Bosh::request_data`] as soon as the XMPP side wrote, `request` once it has acted on
//! what came): the XMPP side's answer to what came (a restart after SASL success, the next step's
//! stanza) must be the next request. ejabberd 23.01 (`ejabberd_bosh:active1`) holds a request
//! that arrives before the one numbered just below it until the server has a stanza for the
//! client; when the earlier one is an empty poll and the later the stanza, nothing ever comes
//! and both wait for good (seen at 300 users: a poll, then the initial presence 0.9 ms later on
//! the other connection, neither answered). Writing the stanza instead of the poll avoids it.
//!
//! Connections: at most one request outstanding on each of two (XEP-0124 `hold='1'`,
//! `requests='2'`), as Tsung's `ts_bosh` does: when the server holds one connection's poll, the
//! other sends; stanzas submitted while both are busy wait in the queue (bounded by
//! [`MAX_QUEUE`]) for the first to come back. No pipelining: a server handles one connection's
//! requests in order, so a request behind a held one would wait for the hold to end.
//!
//! Bounds: a response head over [`MAX_HEAD`] bytes, a body over [`MAX_BODY`], a chunked body, a
//! status other than 200, a body that is not `<body>`, a `sid` over [`MAX_SID`] bytes, bytes
//! nobody asked for: each an error ([`BoshError`]), never a panic nor a larger buffer. Steady
//! state allocates nothing: every buffer is kept and reused.

use crate::xmpp::encode::push_u64;
use crate::xmpp::find::tag_end;
use crate::xmpp::{find_element, push_escaped};

/// The BOSH namespace.
pub const NS: &str = "http://jabber.org/protocol/httpbind";
/// Longest response head (status line and fields).
pub const MAX_HEAD: usize = 8 * 1024;
/// Longest response body: a full stanza (the XMPP limit, 1 MiB) and its wrapper.
pub const MAX_BODY: usize = (1 << 20) + 4096;
/// Most stanza bytes waiting for a free connection.
pub const MAX_QUEUE: usize = 1 << 20;
/// Longest session id kept.
pub const MAX_SID: usize = 128;
/// What the client asks the server to wait before answering an empty poll (seconds; Tsung's).
pub const WAIT: u32 = 60;

/// How a BOSH exchange failed; `kind()` is the name the engine counts it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BoshError {
    #[error("HTTP status {0} from the BOSH endpoint")]
    Status(u16),
    #[error("a BOSH response that is not HTTP/1.1 or has no Content-Length")]
    Http,
    #[error("a BOSH response head over {MAX_HEAD} bytes")]
    HeadTooLong,
    #[error("a BOSH body over {MAX_BODY} bytes")]
    BodyTooLong,
    #[error("a BOSH response whose body is not <body>")]
    NotBody,
    #[error("the session's creation was answered without a sid")]
    NoSid,
    #[error("bytes from the BOSH endpoint with no request outstanding")]
    Unasked,
    #[error("over {MAX_QUEUE} bytes of stanzas waiting for a connection")]
    QueueFull,
}

impl BoshError {
    pub fn kind(self) -> &'static str {
        match self {
            BoshError::Status(_) => "bosh_status",
            BoshError::QueueFull => "bosh_queue",
            _ => "protocol",
        }
    }
}

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Nothing sent; the XMPP side's first stream open creates the session.
    Fresh,
    /// The creation is due (submitted, not yet written).
    CreateDue,
    /// The creation is outstanding.
    Creating,
    /// Open: stanzas and polls.
    Open,
    /// The terminate is written; nothing more goes out.
    Closing,
    /// The server ended the session (or answered the terminate).
    Ended,
}

/// Figures the engine counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// HTTP requests written (creation, restart, stanzas, polls, terminate).
    pub requests: u64,
    /// Of them, empty polls (nothing to send, written so the server holds a request).
    pub polls: u64,
    /// Complete responses read.
    pub responses: u64,
    /// Of them, with an empty body (a poll the server let go).
    pub empty: u64,
}

/// The client's view of one BOSH session over two connections (0 and 1).
#[derive(Debug)]
pub struct Bosh {
    stage: Stage,
    sid: Vec<u8>,
    rid: u64,
    restart: bool,
    terminate: bool,
    queue: Vec<u8>,
    outstanding: [bool; 2],
    resp: [Response; 2],
    inbox: Vec<u8>,
    inbox_at: usize,
    scratch: Vec<u8>,
    pub stats: Stats,
}

/// Where the endpoint is and who the session is for; borrowed on every call.
#[derive(Debug, Clone, Copy)]
pub struct Config<'a> {
    /// The `Host` field.
    pub host: &'a str,
    /// The endpoint's path, e.g. `/bosh` or `/http-bind`.
    pub path: &'a str,
    /// The XMPP domain (the body's `to`).
    pub domain: &'a str,
    /// Seconds the server may hold an empty poll.
    pub wait: u32,
}

/// One connection's response being read.
#[derive(Debug, Default)]
struct Response {
    head: Vec<u8>,
    /// `Some(length)` once the head is read.
    body_len: Option<usize>,
    body: Vec<u8>,
}

impl Bosh {
    /// A session whose first request id is `rid` (random, as XEP-0124 asks: up to 2^32 so that
    /// every later one stays below 2^53).
    pub fn new(rid: u64) -> Bosh {
        Bosh {
            stage: Stage::Fresh,
            sid: Vec::new(),
            rid: rid & 0xFFFF_FFFF,
            restart: false,
            terminate: false,
            queue: Vec::new(),
            outstanding: [false; 2],
            resp: [Response::default(), Response::default()],
            inbox: Vec::new(),
            inbox_at: 0,
            scratch: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// The server ended the session, or answered our terminate.
    pub fn ended(&self) -> bool {
        self.stage == Stage::Ended
    }

    /// A request is outstanding on connection `conn`.
    pub fn outstanding(&self, conn: usize) -> bool {
        self.outstanding.get(conn).copied().unwrap_or(false)
    }

    /// Takes what the XMPP side wrote: a stream open (`<?xml ...?><stream:stream ...>`: the
    /// creation, then restarts), stanzas (queued), a stream close (the terminate, with whatever
    /// is queued).
    pub fn submit(&mut self, mut xmpp: &[u8]) -> Result<(), BoshError> {
        loop {
            let trimmed = trim_start(xmpp);
            if trimmed.is_empty() {
                return Ok(());
            }
            if let Some(rest) = open_tag(trimmed) {
                if self.stage == Stage::Fresh {
                    self.stage = Stage::CreateDue;
                } else {
                    self.restart = true;
                    // The new stream's header, before anything the server sends in it (the
                    // old stream's last stanza, SASL success, is in already: the XMPP side
                    // restarts only after reading it).
                    self.push_header(b"");
                }
                xmpp = rest;
                continue;
            }
            let (stanzas, close) = match find(trimmed, b"</stream:stream>") {
                Some(i) => (&trimmed[..i], true),
                None => (trimmed, false),
            };
            if self.queue.len() + stanzas.len() > MAX_QUEUE {
                return Err(BoshError::QueueFull);
            }
            self.queue.extend_from_slice(stanzas);
            if close {
                self.terminate = true;
            }
            return Ok(());
        }
    }

    /// Writes the next request for connection `conn` into `out`, if one is due there: the
    /// creation (connection 0 only), a restart, the queued stanzas, the terminate, or an empty
    /// poll when no request is outstanding anywhere. Returns whether it wrote one.
    pub fn request(&mut self, conn: usize, cfg: &Config<'_>, out: &mut Vec<u8>) -> bool {
        self.write(conn, cfg, out, true)
    }

    /// [`Bosh::request`] without the empty poll: what the XMPP side gave, only. A client
    /// writes this as soon as the XMPP side wrote, and the poll only once it has acted on what
    /// came (see the module notes: a poll written just before a stanza races it).
    pub fn request_data(&mut self, conn: usize, cfg: &Config<'_>, out: &mut Vec<u8>) -> bool {
        self.write(conn, cfg, out, false)
    }

    fn write(&mut self, conn: usize, cfg: &Config<'_>, out: &mut Vec<u8>, poll: bool) -> bool {
        if conn > 1 || self.outstanding[conn] {
            return false;
        }
        let mut body = std::mem::take(&mut self.scratch);
        body.clear();
        let rid = self.rid;
        match self.stage {
            Stage::CreateDue if conn == 0 => {
                body.extend_from_slice(b"<body content='text/xml; charset=utf-8' hold='1' rid='");
                push_u64(&mut body, rid);
                body.extend_from_slice(b"' to='");
                push_escaped(&mut body, cfg.domain.as_bytes());
                body.extend_from_slice(b"' ver='1.6' wait='");
                push_u64(&mut body, u64::from(cfg.wait));
                body.extend_from_slice(b"' xml:lang='en' xmlns='");
                body.extend_from_slice(NS.as_bytes());
                body.extend_from_slice(b"' xmlns:xmpp='urn:xmpp:xbosh' xmpp:version='1.0'/>");
                self.stage = Stage::Creating;
            }
            Stage::Open if self.restart => {
                self.restart = false;
                self.open_body(&mut body, rid);
                body.extend_from_slice(b"' to='");
                push_escaped(&mut body, cfg.domain.as_bytes());
                body.extend_from_slice(
                    b"' xml:lang='en' xmlns:xmpp='urn:xmpp:xbosh' xmpp:restart='true'/>",
                );
            }
            Stage::Open if self.terminate => {
                self.terminate = false;
                self.open_body(&mut body, rid);
                body.extend_from_slice(b"' type='terminate'>");
                body.extend_from_slice(&self.queue);
                body.extend_from_slice(b"</body>");
                self.queue.clear();
                self.stage = Stage::Closing;
            }
            // A poll waits until the inbox is read: what the XMPP side answers to it goes
            // first (after SASL success a poll ahead of the restart leaves ejabberd answering
            // neither).
            Stage::Open
                if !self.queue.is_empty()
                    || (poll
                        && !self.outstanding.contains(&true)
                        && self.inbox_at == self.inbox.len()) =>
            {
                if self.queue.is_empty() {
                    self.stats.polls += 1;
                    self.open_body(&mut body, rid);
                    body.extend_from_slice(b"'/>");
                } else {
                    self.open_body(&mut body, rid);
                    body.extend_from_slice(b"'>");
                    body.extend_from_slice(&self.queue);
                    body.extend_from_slice(b"</body>");
                    self.queue.clear();
                }
            }
            _ => {
                self.scratch = body;
                return false;
            }
        }
        out.extend_from_slice(b"POST ");
        out.extend_from_slice(cfg.path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(cfg.host.as_bytes());
        out.extend_from_slice(b"\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: ");
        push_u64(out, body.len() as u64);
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(&body);
        if body.capacity() > 64 * 1024 {
            body = Vec::new();
        }
        self.scratch = body;
        self.rid += 1;
        self.outstanding[conn] = true;
        self.stats.requests += 1;
        true
    }

    fn open_body(&self, body: &mut Vec<u8>, rid: u64) {
        body.extend_from_slice(b"<body rid='");
        push_u64(body, rid);
        body.extend_from_slice(b"' sid='");
        push_escaped(body, &self.sid);
        body.extend_from_slice(b"' xmlns='");
        body.extend_from_slice(NS.as_bytes());
    }

    /// Feeds response bytes read from connection `conn`; returns how many it used (all of
    /// them, unless a response ended before: the rest would be bytes nobody asked for, and the
    /// next call says so). A complete response frees the connection and fills the inbox.
    pub fn feed(&mut self, conn: usize, input: &[u8]) -> Result<usize, BoshError> {
        if input.is_empty() {
            return Ok(0);
        }
        if conn > 1 || !self.outstanding[conn] {
            return Err(BoshError::Unasked);
        }
        let mut used = 0;
        if self.resp[conn].body_len.is_none() {
            let r = &mut self.resp[conn];
            // Look for the head's end from where the last read could have started it.
            let from = r.head.len().saturating_sub(3);
            let room = MAX_HEAD.saturating_sub(r.head.len());
            let take = input.len().min(room);
            r.head.extend_from_slice(&input[..take]);
            let Some(end) = find(&r.head[from..], b"\r\n\r\n").map(|i| from + i + 4) else {
                if take < input.len() || r.head.len() >= MAX_HEAD {
                    return Err(BoshError::HeadTooLong);
                }
                return Ok(input.len());
            };
            // What came after the head belongs to the body.
            let extra = r.head.len() - end;
            used = take - extra;
            let len = parse_head(&r.head[..end])?;
            r.head.clear();
            r.body_len = Some(len);
            r.body.clear();
        }
        let r = &mut self.resp[conn];
        let want = r.body_len.unwrap_or(0);
        let take = (want - r.body.len()).min(input.len() - used);
        r.body.extend_from_slice(&input[used..used + take]);
        used += take;
        if r.body.len() == want {
            r.body_len = None;
            let body = std::mem::take(&mut r.body);
            self.outstanding[conn] = false;
            self.stats.responses += 1;
            let result = self.on_body(&body);
            let r = &mut self.resp[conn];
            r.body = body;
            if r.body.capacity() > 64 * 1024 {
                r.body = Vec::new();
            }
            result?;
        }
        Ok(used)
    }

    fn on_body(&mut self, body: &[u8]) -> Result<(), BoshError> {
        // The root element, after an XML declaration if any, must be a whole `<body>`.
        let mut b = trim_start(body);
        if b.starts_with(b"<?xml") {
            let end = find(b, b"?>").ok_or(BoshError::NotBody)?;
            b = trim_start(&b[end + 2..]);
        }
        let e = find_element(b, "body")
            .filter(|e| e.start_tag.start == 0 && b.starts_with(b"<body"))
            .ok_or(BoshError::NotBody)?;
        let tag = &b[e.start_tag.clone()];
        let content = e.content.map_or(&b[0..0], |r| &b[r]);
        if self.stage == Stage::Creating {
            let sid = attr(tag, b"sid").filter(|s| !s.is_empty() && s.len() <= MAX_SID);
            let Some(sid) = sid else {
                return Err(BoshError::NoSid);
            };
            self.sid.clear();
            self.sid.extend_from_slice(sid);
            self.stage = Stage::Open;
            let from = attr(tag, b"from").unwrap_or(b"");
            self.push_header(from);
        }
        if trim_start(content).is_empty() {
            self.stats.empty += 1;
        } else {
            self.inbox.extend_from_slice(content);
        }
        if attr(tag, b"type") == Some(b"terminate") && self.stage != Stage::Ended {
            // The session is over (the server's doing, or its answer to ours): nothing more goes
            // out, and the stream ends once the other request is answered too (the server lets
            // every held one go at once): a chat it carries is the user's.
            self.stage = Stage::Closing;
        }
        if self.stage == Stage::Closing && !self.outstanding.contains(&true) {
            self.inbox.extend_from_slice(b"</stream:stream>");
            self.stage = Stage::Ended;
        }
        Ok(())
    }

    fn push_header(&mut self, from: &[u8]) {
        self.inbox.extend_from_slice(
            b"<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0' id='",
        );
        self.inbox.extend_from_slice(&self.sid);
        if !from.is_empty() {
            self.inbox.extend_from_slice(b"' from='");
            self.inbox.extend_from_slice(from);
        }
        self.inbox.extend_from_slice(b"'>");
    }

    /// The XMPP stream's bytes received and not yet consumed.
    pub fn inbox(&self) -> &[u8] {
        &self.inbox[self.inbox_at..]
    }

    /// `n` bytes of the inbox were used.
    pub fn consume(&mut self, n: usize) {
        self.inbox_at = (self.inbox_at + n).min(self.inbox.len());
        if self.inbox_at == self.inbox.len() {
            self.inbox.clear();
            self.inbox_at = 0;
            if self.inbox.capacity() > 64 * 1024 {
                self.inbox = Vec::new();
            }
        }
    }
}

/// The body's length from a response head; refuses what is not a 200 with a Content-Length.
fn parse_head(head: &[u8]) -> Result<usize, BoshError> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(BoshError::Http),
    }
    let code = resp.code.unwrap_or(0);
    if code != 200 {
        return Err(BoshError::Status(code));
    }
    let mut len = None;
    for f in resp.headers.iter() {
        if f.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(f.value).map_err(|_| BoshError::Http)?;
            len = Some(v.trim().parse::<usize>().map_err(|_| BoshError::Http)?);
        } else if f.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(BoshError::Http);
        }
    }
    let len = len.ok_or(BoshError::Http)?;
    if len > MAX_BODY {
        return Err(BoshError::BodyTooLong);
    }
    Ok(len)
}

/// After `<?xml ...?>` and whitespace, a `<stream:stream ...>` open tag: the bytes after it.
fn open_tag(b: &[u8]) -> Option<&[u8]> {
    let mut b = b;
    if b.starts_with(b"<?xml") {
        let end = find(b, b"?>")?;
        b = trim_start(&b[end + 2..]);
    }
    if !b.starts_with(b"<stream:stream") {
        return None;
    }
    let end = tag_end(b, 0)?;
    Some(&b[end + 1..])
}

/// The value of attribute `name` in a start tag (unescaped as is: ids and sids carry no
/// entities in practice; the value is only echoed back).
fn attr<'a>(tag: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut i = 0;
    while i < tag.len() {
        let c = tag[i];
        if c == b'\'' || c == b'"' {
            let end = tag[i + 1..].iter().position(|&d| d == c)?;
            i += end + 2;
            continue;
        }
        if c.is_ascii_whitespace()
            && tag[i + 1..].starts_with(name)
            && tag.get(i + 1 + name.len()) == Some(&b'=')
        {
            let q = *tag.get(i + 2 + name.len())?;
            if q != b'\'' && q != b'"' {
                return None;
            }
            let start = i + 3 + name.len();
            let len = tag.get(start..)?.iter().position(|&d| d == q)?;
            return Some(&tag[start..start + len]);
        }
        i += 1;
    }
    None
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests;
