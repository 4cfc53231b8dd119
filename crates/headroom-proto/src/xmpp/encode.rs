//! Encoders: each appends one client-to-server unit to the caller's buffer. Nothing here
//! allocates beyond the growth of that buffer (numbers, escaping, base64 and the body filler are
//! written in place), so with a reused buffer the steady state allocates nothing.
//!
//! Ids: stanzas that expect a reply take the caller's id (a per-user counter) and write it in
//! decimal, `id='42'`, which [`super::Stanza::id_u64`] reads back; the login machine uses its own
//! non-numeric ids (`reg1`, `bind1`, `sess1`), so the two never collide.

use crate::digits;

/// A name that may carry a user number: `Name::Indexed("user", 7)` is `user7`, as in Tsung's
/// `username`/`passwd` options (`tsunguser7` / `sesame7`). Written without formatting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    Str(&'a str),
    Indexed(&'a str, u64),
}

impl Name<'_> {
    /// Calls `f` on each byte of the name.
    fn for_each_byte(&self, mut f: impl FnMut(u8)) {
        match *self {
            Name::Str(s) => s.bytes().for_each(f),
            Name::Indexed(p, n) => {
                p.bytes().for_each(&mut f);
                let mut buf = [0u8; 20];
                digits(n, &mut buf).iter().for_each(|&b| f(b));
            }
        }
    }

    fn write_escaped(&self, out: &mut Vec<u8>) {
        match *self {
            Name::Str(s) => push_escaped(out, s.as_bytes()),
            Name::Indexed(p, n) => {
                push_escaped(out, p.as_bytes());
                push_u64(out, n);
            }
        }
    }

    /// The name as a `String` (for tests and messages; not for the hot path).
    pub fn to_string_lossy(&self) -> String {
        let mut v = Vec::new();
        self.for_each_byte(|b| v.push(b));
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// An address: a string as it is, or `local@domain` from a [`Name`] (so `user7@localhost` needs
/// no formatting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jid<'a> {
    Str(&'a str),
    Bare { local: Name<'a>, domain: &'a str },
}

impl<'a> Jid<'a> {
    /// `{prefix}{n}@{domain}`.
    pub fn user(prefix: &'a str, n: u64, domain: &'a str) -> Jid<'a> {
        Jid::Bare {
            local: Name::Indexed(prefix, n),
            domain,
        }
    }

    fn write_escaped(&self, out: &mut Vec<u8>) {
        match *self {
            Jid::Str(s) => push_escaped(out, s.as_bytes()),
            Jid::Bare { local, domain } => {
                local.write_escaped(out);
                out.push(b'@');
                push_escaped(out, domain.as_bytes());
            }
        }
    }
}

/// `<show/>` values of RFC 6121 (absent show means plain "available").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    Away,
    Chat,
    Dnd,
    Xa,
}

impl Show {
    pub fn as_str(self) -> &'static str {
        match self {
            Show::Away => "away",
            Show::Chat => "chat",
            Show::Dnd => "dnd",
            Show::Xa => "xa",
        }
    }
}

/// Subscription-related presence types (RFC 6121 §3), and `unavailable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresenceType {
    Subscribe,
    Subscribed,
    Unsubscribe,
    Unsubscribed,
    Unavailable,
    Probe,
}

impl PresenceType {
    pub fn as_str(self) -> &'static str {
        match self {
            PresenceType::Subscribe => "subscribe",
            PresenceType::Subscribed => "subscribed",
            PresenceType::Unsubscribe => "unsubscribe",
            PresenceType::Unsubscribed => "unsubscribed",
            PresenceType::Unavailable => "unavailable",
            PresenceType::Probe => "probe",
        }
    }
}

/// The bytes of the chat body filler: ASCII letters, digits, `-` and `.`, none of which XML
/// escapes, so a body of N filler bytes is N bytes on the wire and N characters once parsed.
pub const FILLER: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.";

/// Appends `n` bytes of [`FILLER`], cycling from its start (deterministic).
pub fn push_filler(out: &mut Vec<u8>, n: usize) {
    let mut left = n;
    while left > 0 {
        let k = left.min(FILLER.len());
        out.extend_from_slice(&FILLER[..k]);
        left -= k;
    }
}

/// Appends `n` in decimal.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(digits(n, &mut buf));
}

/// Appends `s` escaped for XML text and single- or double-quoted attribute values.
pub fn push_escaped(out: &mut Vec<u8>, s: &[u8]) {
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        let rep: &[u8] = match c {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'\'' => b"&apos;",
            b'"' => b"&quot;",
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        out.extend_from_slice(rep);
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
}

/// Base64 (RFC 4648, padded) streamed into `out` a byte at a time.
struct B64<'o> {
    out: &'o mut Vec<u8>,
    acc: u32,
    n: u8,
}

const B64_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

impl B64<'_> {
    fn push(&mut self, b: u8) {
        self.acc = (self.acc << 8) | u32::from(b);
        self.n += 1;
        if self.n == 3 {
            for shift in [18u32, 12, 6, 0] {
                self.out
                    .push(B64_ALPHABET[((self.acc >> shift) & 63) as usize]);
            }
            self.acc = 0;
            self.n = 0;
        }
    }

    fn finish(self) {
        match self.n {
            1 => {
                let a = self.acc << 16;
                self.out.push(B64_ALPHABET[((a >> 18) & 63) as usize]);
                self.out.push(B64_ALPHABET[((a >> 12) & 63) as usize]);
                self.out.extend_from_slice(b"==");
            }
            2 => {
                let a = self.acc << 8;
                self.out.push(B64_ALPHABET[((a >> 18) & 63) as usize]);
                self.out.push(B64_ALPHABET[((a >> 12) & 63) as usize]);
                self.out.push(B64_ALPHABET[((a >> 6) & 63) as usize]);
                self.out.push(b'=');
            }
            _ => {}
        }
    }
}

/// Stream header to `domain` (with an XML declaration; used for the first stream and for every
/// restart).
pub fn stream_open(out: &mut Vec<u8>, domain: &str) {
    out.extend_from_slice(b"<?xml version='1.0'?><stream:stream to='");
    push_escaped(out, domain.as_bytes());
    out.extend_from_slice(
        b"' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>",
    );
}

/// `</stream:stream>`: the client closes its stream (the server answers with its own close).
pub fn stream_close(out: &mut Vec<u8>) {
    out.extend_from_slice(b"</stream:stream>");
}

/// SASL PLAIN (RFC 4616) with an empty authorization identity: base64 of `\0user\0password`.
pub fn auth_plain(out: &mut Vec<u8>, user: Name<'_>, password: Name<'_>) {
    out.extend_from_slice(b"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>");
    let mut b = B64 { out, acc: 0, n: 0 };
    b.push(0);
    user.for_each_byte(|c| b.push(c));
    b.push(0);
    password.for_each_byte(|c| b.push(c));
    b.finish();
    out.extend_from_slice(b"</auth>");
}

/// SASL ANONYMOUS (RFC 4505) without trace information.
pub fn auth_anonymous(out: &mut Vec<u8>) {
    out.extend_from_slice(
        b"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='ANONYMOUS'/>",
    );
}

fn iq_open(out: &mut Vec<u8>, typ: &str, id: IqId<'_>) {
    out.extend_from_slice(b"<iq type='");
    out.extend_from_slice(typ.as_bytes());
    out.extend_from_slice(b"' id='");
    match id {
        IqId::Num(n) => push_u64(out, n),
        IqId::Str(s) => push_escaped(out, s.as_bytes()),
    }
    out.extend_from_slice(b"'>");
}

/// An iq id: the caller's counter, or a fixed string (the login machine's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IqId<'a> {
    Num(u64),
    Str(&'a str),
}

impl From<u64> for IqId<'_> {
    fn from(n: u64) -> Self {
        IqId::Num(n)
    }
}

impl<'a> From<&'a str> for IqId<'a> {
    fn from(s: &'a str) -> Self {
        IqId::Str(s)
    }
}

/// Resource binding (RFC 6120 §7), with the resource the client wants (the server may pick
/// another; `None` lets it choose).
pub fn bind<'a>(out: &mut Vec<u8>, id: impl Into<IqId<'a>>, resource: Option<&str>) {
    iq_open(out, "set", id.into());
    match resource {
        Some(r) => {
            out.extend_from_slice(b"<bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>");
            push_escaped(out, r.as_bytes());
            out.extend_from_slice(b"</resource></bind></iq>");
        }
        None => out.extend_from_slice(b"<bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></iq>"),
    }
}

/// Session establishment (RFC 3921 §3; optional or absent in RFC 6121 servers).
pub fn session<'a>(out: &mut Vec<u8>, id: impl Into<IqId<'a>>) {
    iq_open(out, "set", id.into());
    out.extend_from_slice(b"<session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></iq>");
}

/// In-band registration (XEP-0077) of `username`/`password`, sent before authentication.
pub fn register<'a>(
    out: &mut Vec<u8>,
    id: impl Into<IqId<'a>>,
    username: Name<'_>,
    password: Name<'_>,
) {
    iq_open(out, "set", id.into());
    out.extend_from_slice(b"<query xmlns='jabber:iq:register'><username>");
    username.write_escaped(out);
    out.extend_from_slice(b"</username><password>");
    password.write_escaped(out);
    out.extend_from_slice(b"</password></query></iq>");
}

/// Initial presence, `<presence/>`: the user becomes available; the server sends it to the
/// contacts subscribed to the user and the contacts' presence back (Tsung's `presence:initial`).
pub fn presence_initial(out: &mut Vec<u8>) {
    out.extend_from_slice(b"<presence/>");
}

fn presence_body(out: &mut Vec<u8>, show: Option<Show>, status: Option<&str>) {
    if show.is_none() && status.is_none() {
        out.extend_from_slice(b"/>");
        return;
    }
    out.push(b'>');
    if let Some(s) = show {
        out.extend_from_slice(b"<show>");
        out.extend_from_slice(s.as_str().as_bytes());
        out.extend_from_slice(b"</show>");
    }
    if let Some(t) = status {
        out.extend_from_slice(b"<status>");
        push_escaped(out, t.as_bytes());
        out.extend_from_slice(b"</status>");
    }
    out.extend_from_slice(b"</presence>");
}

/// Broadcast presence with a show and status text (Tsung's `presence:broadcast`).
pub fn presence_broadcast(out: &mut Vec<u8>, show: Option<Show>, status: Option<&str>) {
    out.extend_from_slice(b"<presence");
    presence_body(out, show, status);
}

/// Directed presence to one address (Tsung's `presence:directed`).
pub fn presence_directed(out: &mut Vec<u8>, to: Jid<'_>, show: Option<Show>, status: Option<&str>) {
    out.extend_from_slice(b"<presence to='");
    to.write_escaped(out);
    out.push(b'\'');
    presence_body(out, show, status);
}

/// `<presence to='JID' type='subscribe'/>` and friends (Tsung's `presence:subscribe`;
/// `Unavailable` without `to` is [`presence_unavailable`]).
pub fn presence_typed(out: &mut Vec<u8>, to: Jid<'_>, typ: PresenceType) {
    out.extend_from_slice(b"<presence to='");
    to.write_escaped(out);
    out.extend_from_slice(b"' type='");
    out.extend_from_slice(typ.as_str().as_bytes());
    out.extend_from_slice(b"'/>");
}

/// `<presence type='unavailable'/>`: the user goes offline (Tsung's `presence:final`).
pub fn presence_unavailable(out: &mut Vec<u8>) {
    out.extend_from_slice(b"<presence type='unavailable'/>");
}

/// Roster get (RFC 6121 §2.2).
pub fn roster_get(out: &mut Vec<u8>, id: u64) {
    iq_open(out, "get", IqId::Num(id));
    out.extend_from_slice(b"<query xmlns='jabber:iq:roster'/></iq>");
}

/// Roster set of one item: adds it, or updates (renames, regroups) an existing one
/// (RFC 6121 §2.3, §2.4). Tsung's `iq:roster:add` uses the group "Tsung Group".
pub fn roster_set(
    out: &mut Vec<u8>,
    id: u64,
    jid: Jid<'_>,
    name: Option<&str>,
    group: Option<&str>,
) {
    iq_open(out, "set", IqId::Num(id));
    out.extend_from_slice(b"<query xmlns='jabber:iq:roster'><item jid='");
    jid.write_escaped(out);
    out.push(b'\'');
    if let Some(n) = name {
        out.extend_from_slice(b" name='");
        push_escaped(out, n.as_bytes());
        out.push(b'\'');
    }
    match group {
        Some(g) => {
            out.extend_from_slice(b"><group>");
            push_escaped(out, g.as_bytes());
            out.extend_from_slice(b"</group></item></query></iq>");
        }
        None => out.extend_from_slice(b"/></query></iq>"),
    }
}

/// Adds a contact (a roster set; see [`roster_set`]).
pub fn roster_add(
    out: &mut Vec<u8>,
    id: u64,
    jid: Jid<'_>,
    name: Option<&str>,
    group: Option<&str>,
) {
    roster_set(out, id, jid, name, group);
}

/// Renames a contact: a roster set with the new name, the group repeated (a roster set
/// replaces the item, so a group left out would be dropped).
pub fn roster_rename(
    out: &mut Vec<u8>,
    id: u64,
    jid: Jid<'_>,
    new_name: &str,
    group: Option<&str>,
) {
    roster_set(out, id, jid, Some(new_name), group);
}

/// Deletes a contact (`subscription='remove'`, RFC 6121 §2.5).
pub fn roster_remove(out: &mut Vec<u8>, id: u64, jid: Jid<'_>) {
    iq_open(out, "set", IqId::Num(id));
    out.extend_from_slice(b"<query xmlns='jabber:iq:roster'><item jid='");
    jid.write_escaped(out);
    out.extend_from_slice(b"' subscription='remove'/></query></iq>");
}

/// A chat message whose body is exactly `body_len` bytes of [`FILLER`] (Tsung's
/// `<jabber type="chat" size="N">`).
pub fn chat(out: &mut Vec<u8>, id: u64, to: Jid<'_>, body_len: usize) {
    chat_head(out, id, to);
    push_filler(out, body_len);
    out.extend_from_slice(b"</body></message>");
}

/// A chat message with the given body text (escaped; Tsung's `data=`).
pub fn chat_text(out: &mut Vec<u8>, id: u64, to: Jid<'_>, body: &str) {
    chat_head(out, id, to);
    push_escaped(out, body.as_bytes());
    out.extend_from_slice(b"</body></message>");
}

fn chat_head(out: &mut Vec<u8>, id: u64, to: Jid<'_>) {
    out.extend_from_slice(b"<message type='chat' to='");
    to.write_escaped(out);
    out.extend_from_slice(b"' id='");
    push_u64(out, id);
    out.extend_from_slice(b"'><body>");
}

/// Raw bytes, as they are (Tsung's `type="raw"`).
pub fn raw(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
}
