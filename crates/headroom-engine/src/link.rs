//! Protocol links: the per-connection state of the protocols that keep a session above TCP —
//! XMPP, PostgreSQL and WebSocket — driven by the worker, sans I/O.
//!
//! A [`Link`] is made when a TCP connect completes and dropped when the connection closes. It
//! first runs the protocol's setup (XMPP login, PostgreSQL startup and authentication,
//! WebSocket upgrade): [`Link::start`] writes the first bytes into [`Link::out`], and
//! [`Link::feed`] takes whatever the socket gave, writes any answer the protocol needs into
//! `out` and says when the link is [`Outcome::Ready`]. After that the session interpreter asks
//! for requests ([`Link::xmpp_request`], [`Link::sql_request`], [`Link::ws_request`]), which
//! encode into the session's output buffer and arm [`Link::wait`]; `feed` then reports the
//! reply ([`Outcome::Reply`]) and counts everything else the server sends (XMPP stanzas by
//! kind, incoming chats, WebSocket messages and pings) in the protocol counters, whether a
//! request is waiting or the user is idle.
//!
//! `out` is separate from the session's output buffer because it carries the protocol's own
//! bytes (login steps, authentication replies, pongs) that may be due while a request is in
//! flight; the worker writes it whenever no request is half written.

use std::sync::Mutex;
use std::time::Instant;

use headroom_core::session::{
    AmqpAction, AmqpOp, LdapAction, LdapMod, LdapOp, LdapScope, LinkSpec, MqttAction, MqttConnect,
    MqttOp, MqttPayload, MqttSpec, MysqlSpec, PgSpec, SqlOp, Template, WsAction, WsOp, XmppAck,
    XmppAction, XmppDest, XmppOp, XmppSpec,
};
use headroom_core::{ErrorKind, ProtoCounter};
use headroom_metrics::{Counters, NameStats};
use headroom_proto::xmpp::{self, Jid, Kind, Login, LoginConfig, Splitter, StanzaType};
use headroom_proto::{amqp, bosh, ldap, mqtt, mysql, pg, ws};

use crate::transport::Conn;
use rand::rngs::SmallRng;
use rand::Rng;

/// What a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkWait {
    /// Nothing (done once written).
    None,
    Xmpp(xmpp::Wait),
    /// The end of the SQL unit (ReadyForQuery).
    Sql,
    /// The next data message.
    WsMessage,
    /// A pong.
    WsPong,
    /// The server's close frame.
    WsClose,
    /// MQTT: the PUBACK, PUBCOMP, SUBACK or UNSUBACK of this packet id.
    MqttAck(u16),
    /// MQTT: a PINGRESP.
    MqttPing,
    /// MQTT: the connection has received this many messages in all.
    MqttMessages(u64),
    /// LDAP: the final response to this message id.
    Ldap(i32),
    /// AMQP: the synchronous reply (Open-Ok, Declare-Ok...) on this channel.
    AmqpMethod(u16),
    /// AMQP: every publish on a confirming channel confirmed.
    AmqpConfirms,
    /// AMQP: the connection has received this many deliveries in all.
    AmqpMessages(u64),
    /// AMQP: the broker's Connection.Close-Ok.
    AmqpClose,
}

/// What one `feed` call completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The setup finished: requests may be sent.
    Ready,
    /// The awaited reply arrived; `ok` is false for an error reply (iq error, SQL error).
    Reply { ok: bool },
    /// The server ended the session (XMPP `</stream:stream>`, a WebSocket close) while no
    /// request waited for it: close the connection.
    Closed,
    /// The setup asks for TLS now (MySQL's SSLRequest, in [`Link::out`]): write it, run the
    /// handshake, then [`Link::tls_started`].
    StartTls,
}

/// No user fitted an XMPP destination (nobody online, nobody offline, no previous one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoDestination;

/// An MQTT topic or payload longer than the protocol carries once its `${var}`s are in (a
/// topic over 65,535 bytes, a payload over the step bound): nothing is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLong;

/// The longest payload a `text` publish sends once its variables are in: the scenario's bound
/// on the text as written, 1 MiB, twice over.
const MAX_TEXT_PAYLOAD: usize = 2 << 20;

/// The shared state of a run's XMPP users (Tsung's user server): who is connected and who is
/// online, for the `online`/`offline` destinations. One lock per XMPP request or login, never
/// per byte.
pub(crate) struct XmppShared {
    pub pool: Mutex<xmpp::UserPool>,
}

pub(crate) struct Link {
    /// The protocol's own bytes to write, and how many of them are written.
    pub out: Vec<u8>,
    pub written: usize,
    /// The setup is done.
    pub ready: bool,
    /// When the setup began (its latency is recorded under the workload's handshake name).
    pub started: Instant,
    /// What the request in flight waits for.
    pub wait: LinkWait,
    /// A close was sent: the connection closes once it is answered (or written).
    pub closing: bool,
    protocol: LinkProtocol,
}

/// The protocol a link speaks, with its own state.
enum LinkProtocol {
    Xmpp(Box<XmppLink>),
    Pg(Box<PgLink>),
    Ws(Box<WsLink>),
    Mqtt(Box<MqttLink>),
    Ldap(Box<LdapLink>),
    Mysql(Box<MysqlLink>),
    Amqp(Box<AmqpLink>),
}

struct XmppLink {
    split: Splitter,
    login: Login,
    /// The account number (`user{N}`).
    user: u64,
    /// With [`XmppSpec::login`]: the user and password the session's variables held at the
    /// connect (one expansion per connection); such a user is not in the shared pool.
    named: Option<Box<(String, String)>>,
    next_id: u64,
    previous: Option<u64>,
    /// Marked connected / online in the shared pool (undone at close).
    connected: bool,
    online: bool,
    /// Over BOSH: the session and its second connection.
    bosh: Option<Box<BoshLink>>,
}

/// An XMPP stream carried by BOSH (`headroom_proto::bosh`): the session, and the second HTTP
/// connection beside the user's own (connection 0), which the worker opens, writes and reads
/// (`worker/conn.rs`, `aux_*`). It closes with the link: dropping the socket ends its
/// registration with the poller.
pub(crate) struct BoshLink {
    b: bosh::Bosh,
    /// The `Host` field of every request.
    host: String,
    /// The second connection, once opened; connected once its connect completed.
    pub aux: Option<Conn>,
    pub aux_connected: bool,
    /// Over TLS (https): its handshake is under way (requests wait for its end).
    pub aux_tls: bool,
    /// When its connect began (its TLS handshake, while that runs).
    pub aux_started: Instant,
    /// Its request to write, and how much of it is written.
    pub aux_out: Vec<u8>,
    pub aux_written: usize,
    /// The session cannot go on (the worker fails the user when it sees this).
    pub failed: Option<ErrorKind>,
}

impl BoshLink {
    /// Writes the requests due: connection 0's into `out`, the second's into `aux_out`. With
    /// `poll`, the empty poll too if none is outstanding: only once the worker has acted on
    /// what came, so that a stanza the user sends at once goes first (`headroom_proto::bosh`).
    fn pump(&mut self, cfg: &XmppSpec, out: &mut Vec<u8>, poll: bool) {
        let bc = bosh::Config {
            host: &self.host,
            path: cfg.bosh.as_deref().unwrap_or("/"),
            domain: &cfg.domain,
            wait: bosh::WAIT,
        };
        let write = if poll {
            bosh::Bosh::request
        } else {
            bosh::Bosh::request_data
        };
        write(&mut self.b, 0, &bc, out);
        if self.aux_written >= self.aux_out.len() {
            self.aux_out.clear();
            self.aux_written = 0;
        }
        write(&mut self.b, 1, &bc, &mut self.aux_out);
    }

    /// Takes what the XMPP side wrote into `buf` from `mark` on (a stream open, stanzas, a
    /// close) out of `buf` into the session.
    fn take(&mut self, buf: &mut Vec<u8>, mark: usize) -> Result<(), bosh::BoshError> {
        let mark = mark.min(buf.len());
        let submitted = self.b.submit(&buf[mark..]);
        buf.truncate(mark);
        submitted
    }

    /// The second connection has a request still to write.
    pub fn aux_pending(&self) -> bool {
        self.aux_written < self.aux_out.len()
    }

    /// A request is outstanding on the second connection (its close then is an error).
    pub fn aux_outstanding(&self) -> bool {
        self.b.outstanding(1)
    }

    /// Counts what the session did since the last call.
    fn count(&mut self, c: &mut Counters) {
        let s = std::mem::take(&mut self.b.stats);
        c.proto(ProtoCounter::BoshRequests, s.requests);
        c.proto(ProtoCounter::BoshPolls, s.polls);
        c.proto(ProtoCounter::BoshResponses, s.responses);
        c.proto(ProtoCounter::BoshEmpty, s.empty);
    }
}

fn bosh_kind(e: bosh::BoshError) -> ErrorKind {
    match e {
        bosh::BoshError::Status(code) if code >= 500 => ErrorKind::Http5xx,
        bosh::BoshError::Status(_) => ErrorKind::Http4xx,
        _ => ErrorKind::Protocol,
    }
}

impl XmppLink {
    /// No longer an `online` destination (presence:final, close, disconnect).
    fn go_offline(&mut self, shared: Option<&XmppShared>) {
        if self.online {
            if let Some(Ok(mut p)) = shared.map(|s| s.pool.lock()) {
                let _ = p.set_online(self.user, false);
            }
            self.online = false;
        }
    }
}

struct PgLink {
    conn: pg::Connection,
    /// Statements prepared on this connection, by (session, op index).
    prepared: Vec<(u32, u32)>,
    /// The statement of the request in flight is being prepared by it.
    preparing: Option<(u32, u32)>,
}

struct MqttLink {
    client: mqtt::Client,
    version: mqtt::Version,
    /// Send a PINGREQ after this long without sending anything (`None`: keep-alive off).
    ping_after: Option<std::time::Duration>,
    /// When the client last sent a packet (a request, a ping): the keep-alive runs from it.
    last_sent: Instant,
    /// Messages received on this connection (a `wait` step counts against it).
    received: u64,
    /// Metric id of the publish-to-receive latency.
    delivery: usize,
}

struct AmqpLink {
    conn: amqp::Connection,
    /// The channels steps opened: number, confirm mode, publishes and confirms so far, and
    /// whether its consumer acknowledges deliveries.
    channels: Vec<AmqpChannel>,
    /// Deliveries received on this connection (a `wait` step counts against it).
    received: u64,
    /// Metric id of the publish-to-receive latency (`amqp:delivery`).
    delivery: usize,
}

#[derive(Default)]
struct AmqpChannel {
    id: u16,
    confirming: bool,
    published: u64,
    confirmed: u64,
    acks: bool,
}

impl AmqpLink {
    fn channel(&mut self, id: u16) -> &mut AmqpChannel {
        let i = match self.channels.iter().position(|c| c.id == id) {
            Some(i) => i,
            None => {
                self.channels.push(AmqpChannel {
                    id,
                    ..AmqpChannel::default()
                });
                self.channels.len() - 1
            }
        };
        &mut self.channels[i]
    }

    /// The number Tsung's client gives a channel opened without one (`ts_amqp:new_number`):
    /// 1 when none is open, else one below the lowest, else one above the highest, else the
    /// lowest free; `None` when all 65535 are taken.
    fn next_channel(&self) -> Option<u16> {
        let lowest = self.channels.iter().map(|c| c.id).min();
        let highest = self.channels.iter().map(|c| c.id).max();
        match (lowest, highest) {
            (None, _) | (_, None) => Some(1),
            (Some(lo), _) if lo > 1 => Some(lo - 1),
            (_, Some(hi)) if hi < u16::MAX => Some(hi + 1),
            _ => (1..=u16::MAX).find(|n| !self.channels.iter().any(|c| c.id == *n)),
        }
    }

    /// Every publish on a confirming channel is confirmed (or refused).
    fn confirmed(&self) -> bool {
        self.channels
            .iter()
            .all(|c| !c.confirming || c.confirmed >= c.published)
    }
}

struct MysqlLink {
    conn: mysql::Connection,
    /// Statements prepared on this connection: (session, op index) and the server's id.
    statements: Vec<((u32, u32), u32)>,
    /// The statement being prepared for the request in flight, and its parameters (its
    /// execute follows the prepare's answer).
    preparing: Option<(u32, u32)>,
    params: Vec<String>,
    /// A result of the command in flight was an error (a multi-result command ends later).
    failed: bool,
}

struct LdapLink {
    decoder: ldap::Decoder,
    /// The last message id sent (ids run from 1 per connection).
    id: i32,
    /// Expansions of the request's texts (DN, filter, values), reused.
    texts: Vec<String>,
}

struct WsLink {
    handshake: ws::HandshakeDecoder,
    frames: ws::FrameDecoder,
    subprotocol: Option<String>,
}

impl Link {
    /// A link for a fresh connection of user `global`; the setup's first bytes go to `out`.
    /// `None` for HTTP and raw TCP.
    /// `connect`: the CONNECT of the session's `connect` step, when the connection opens for
    /// one (MQTT only; the `mqtt:` section's otherwise). `vars`: the session's variables (an
    /// XMPP login from variables reads them).
    pub fn start(
        spec: &LinkSpec,
        connect: Option<&MqttConnect>,
        host: &str,
        global: u64,
        vars: &[String],
        rng: &mut SmallRng,
        tls: bool,
    ) -> Option<Link> {
        let mut out = Vec::new();
        let protocol = match spec {
            LinkSpec::Plain => return None,
            LinkSpec::Xmpp(x) => {
                let user = xmpp_user(x, global);
                let named = x.login.as_ref().map(|l| {
                    let (mut u, mut p) = (String::new(), String::new());
                    l.templates[0].expand_into(vars, &mut u);
                    l.templates[1].expand_into(vars, &mut p);
                    Box::new((u, p))
                });
                let mut login = Login::new();
                let mut split = Splitter::new();
                split.set_capture(true);
                // A configuration the login refuses (registration without accounts) fails at
                // the first event; the scenario validator already refuses it.
                let _ = login.start(&login_config(x, user, named.as_deref()), &mut out);
                let bosh = x.bosh.as_ref().map(|_| {
                    let mut bl = Box::new(BoshLink {
                        b: bosh::Bosh::new(rng.gen()),
                        host: host.to_string(),
                        aux: None,
                        aux_connected: false,
                        aux_tls: false,
                        aux_started: Instant::now(),
                        aux_out: Vec::new(),
                        aux_written: 0,
                        failed: None,
                    });
                    // The stream open: the session's creation.
                    let _ = bl.take(&mut out, 0);
                    bl.pump(x, &mut out, false);
                    bl
                });
                LinkProtocol::Xmpp(Box::new(XmppLink {
                    split,
                    login,
                    user,
                    named,
                    next_id: 1,
                    previous: None,
                    connected: false,
                    online: false,
                    bosh,
                }))
            }
            LinkSpec::Pgsql(p) => {
                let mut nonce = [0u8; pg::scram::NONCE_BYTES];
                rng.fill(&mut nonce[..]);
                let conn = pg::Connection::new(&pg_login(p), &nonce, &mut out);
                LinkProtocol::Pg(Box::new(PgLink {
                    conn,
                    prepared: Vec::new(),
                    preparing: None,
                }))
            }
            LinkSpec::WebSocket(w) => {
                let key: [u8; 16] = rng.gen();
                let origin = w.origin.as_deref().map(|o| ("Origin", o));
                ws::encode_handshake(
                    host,
                    &w.path,
                    w.subprotocol.as_deref(),
                    origin,
                    &key,
                    &mut out,
                );
                LinkProtocol::Ws(Box::new(WsLink {
                    handshake: ws::HandshakeDecoder::new(&key),
                    frames: ws::FrameDecoder::new(),
                    subprotocol: w.subprotocol.clone(),
                }))
            }
            LinkSpec::Amqp(a) => LinkProtocol::Amqp(Box::new(AmqpLink {
                conn: amqp::Connection::new(
                    &amqp::Login {
                        user: &a.user,
                        password: &a.password,
                        vhost: &a.vhost,
                    },
                    &mut out,
                ),
                channels: Vec::new(),
                received: 0,
                delivery: usize::MAX,
            })),
            LinkSpec::Mysql(m) => LinkProtocol::Mysql(Box::new(MysqlLink {
                // The server speaks first: nothing to write yet.
                conn: mysql::Connection::new(
                    &mysql_login(m),
                    mysql::Options {
                        tls,
                        ..mysql::Options::default()
                    },
                ),
                statements: Vec::new(),
                preparing: None,
                params: Vec::new(),
                failed: false,
            })),
            LinkSpec::Ldap => LinkProtocol::Ldap(Box::new(LdapLink {
                decoder: ldap::Decoder::new(),
                id: 0,
                texts: Vec::new(),
            })),
            LinkSpec::Mqtt(m) => LinkProtocol::Mqtt(Box::new(mqtt_start(
                m,
                connect.unwrap_or(&m.connect),
                global,
                &mut out,
            ))),
        };
        // LDAP has no setup: a bind is a step of its own.
        let ready = matches!(protocol, LinkProtocol::Ldap(_));
        Some(Link {
            out,
            written: 0,
            ready,
            started: Instant::now(),
            wait: LinkWait::None,
            closing: false,
            protocol,
        })
    }

    /// The protocol's goodbye before the client closes a connection it chose to leave, put in
    /// [`Link::out`]: MySQL's `COM_QUIT`, PostgreSQL's Terminate, as the clients (and Tsung's
    /// `close`) send them. Without it MariaDB counts every user as an aborted client and logs a
    /// warning for each; PostgreSQL logs an unexpected EOF. `false` (nothing written) for the
    /// other protocols, whose goodbye is a step of its own (an LDAP unbind, an MQTT DISCONNECT,
    /// XMPP's `close`), and before the setup is done or while bytes are still due.
    pub fn goodbye(&mut self) -> bool {
        if !self.ready || self.pending() || self.closing {
            return false;
        }
        self.fresh_out();
        match &mut self.protocol {
            LinkProtocol::Mysql(m) => m.conn.com_quit(&mut self.out),
            LinkProtocol::Pg(_) => pg::frontend::terminate(&mut self.out),
            _ => return false,
        }
        self.closing = true;
        true
    }

    /// The TLS handshake [`Outcome::StartTls`] asked for is done: the setup goes on over it
    /// (MySQL's HandshakeResponse into [`Link::out`]). `false` when nothing waited for it.
    pub fn tls_started(&mut self) -> bool {
        self.fresh_out();
        match &mut self.protocol {
            LinkProtocol::Mysql(m) => m.conn.tls_started(&mut self.out),
            _ => false,
        }
    }

    /// Bytes of `out` still to write.
    pub fn pending(&self) -> bool {
        self.written < self.out.len()
    }

    /// Everything in [`Link::out`] written: start it afresh (otherwise what comes is appended
    /// after what is still due).
    fn fresh_out(&mut self) {
        if !self.pending() {
            self.out.clear();
            self.written = 0;
        }
    }

    /// Takes bytes from the server: returns how many were used and what completed, if
    /// anything; call again with the rest. An error means the connection is unusable.
    /// `names`: the run's per-name figures (MQTT records publish-to-receive latency there).
    pub fn feed(
        &mut self,
        spec: &LinkSpec,
        shared: Option<&XmppShared>,
        input: &[u8],
        c: &mut Counters,
        names: &mut [NameStats],
    ) -> Result<(usize, Option<Outcome>), ErrorKind> {
        self.fresh_out();
        match &mut self.protocol {
            LinkProtocol::Xmpp(_) => {
                let LinkSpec::Xmpp(cfg) = spec else {
                    return Err(ErrorKind::Other);
                };
                let mark = self.out.len();
                let mut r = self.feed_xmpp(cfg, shared, input, c);
                // Over BOSH, an event that completes nothing (a stream header, a login step)
                // is no reason to stop: the inbox's next stanzas are here already.
                while input.is_empty() && matches!(r, Ok((0, None))) {
                    let left = self.inbox_len();
                    if left == 0 {
                        break;
                    }
                    r = self.feed_xmpp(cfg, shared, input, c);
                    if self.inbox_len() == left {
                        break;
                    }
                }
                self.bosh_after(cfg, mark, c)?;
                r
            }
            LinkProtocol::Pg(p) => {
                let (used, progress) = p.conn.decode(input, &mut self.out).map_err(|e| {
                    if e.is_auth() {
                        ErrorKind::Login
                    } else {
                        ErrorKind::Protocol
                    }
                })?;
                match progress {
                    pg::Progress::NeedMore | pg::Progress::AuthReply(_) => Ok((used, None)),
                    pg::Progress::LoggedIn(_) => {
                        self.ready = true;
                        Ok((used, Some(Outcome::Ready)))
                    }
                    pg::Progress::Complete(r) => {
                        c.proto(ProtoCounter::PgRows, r.rows);
                        let ok = r.error.is_none();
                        if !ok {
                            c.proto(ProtoCounter::PgSqlErrors, 1);
                        }
                        if let Some(key) = p.preparing.take() {
                            if ok {
                                p.prepared.push(key);
                            }
                        }
                        if self.wait == LinkWait::Sql {
                            self.wait = LinkWait::None;
                            return Ok((used, Some(Outcome::Reply { ok })));
                        }
                        Ok((used, None))
                    }
                }
            }
            LinkProtocol::Amqp(a) => {
                let (used, progress) =
                    a.conn.decode(input, &mut self.out).map_err(|e| match e {
                        amqp::AmqpError::AuthFailed => ErrorKind::Login,
                        amqp::AmqpError::Incomplete => ErrorKind::Closed,
                        _ => ErrorKind::Protocol,
                    })?;
                let done = |wait: &mut LinkWait, want: LinkWait, ok: bool| {
                    if *wait == want {
                        *wait = LinkWait::None;
                        Some(Outcome::Reply { ok })
                    } else {
                        None
                    }
                };
                let outcome = match progress {
                    amqp::Progress::NeedMore
                    | amqp::Progress::Blocked
                    | amqp::Progress::Unblocked
                    | amqp::Progress::ConsumerCancelled { .. } => None,
                    amqp::Progress::Ready => {
                        self.ready = true;
                        Some(Outcome::Ready)
                    }
                    amqp::Progress::MethodOk { channel, method } => {
                        if matches!(method, amqp::Method::ConnectionCloseOk) {
                            done(&mut self.wait, LinkWait::AmqpClose, true)
                        } else {
                            done(&mut self.wait, LinkWait::AmqpMethod(channel), true)
                        }
                    }
                    amqp::Progress::Confirm {
                        channel,
                        delivery_tag,
                        multiple,
                        ack,
                    } => {
                        let ch = a.channel(channel);
                        let before = ch.confirmed;
                        ch.confirmed = if multiple {
                            ch.confirmed.max(delivery_tag)
                        } else {
                            ch.confirmed + 1
                        };
                        let n = ch.confirmed - before;
                        c.proto(
                            if ack {
                                ProtoCounter::AmqpConfirmed
                            } else {
                                ProtoCounter::AmqpNacked
                            },
                            n,
                        );
                        if self.wait == LinkWait::AmqpConfirms && a.confirmed() {
                            self.wait = LinkWait::None;
                            Some(Outcome::Reply { ok: true })
                        } else {
                            None
                        }
                    }
                    amqp::Progress::Delivery {
                        channel,
                        delivery_tag,
                        head,
                        ..
                    } => {
                        c.proto(ProtoCounter::AmqpDelivered, 1);
                        if let (Some(sent), Some(n)) = (stamp_of(head), names.get_mut(a.delivery)) {
                            if let Some(us) = wall_micros().checked_sub(sent) {
                                n.record(us, false);
                            }
                        }
                        a.received += 1;
                        if a.channel(channel).acks {
                            amqp::client::basic_ack(&mut self.out, channel, delivery_tag, false);
                            c.proto(ProtoCounter::AmqpAcked, 1);
                        }
                        match self.wait {
                            LinkWait::AmqpMessages(want) if a.received >= want => {
                                self.wait = LinkWait::None;
                                Some(Outcome::Reply { ok: true })
                            }
                            _ => None,
                        }
                    }
                    amqp::Progress::Returned { .. } => {
                        c.proto(ProtoCounter::AmqpReturned, 1);
                        None
                    }
                    amqp::Progress::ServerClosedChannel { channel, .. } => {
                        // The broker refused a method of the channel (the codec answered its
                        // close): the step waiting on it failed; the number may open again.
                        c.proto(ProtoCounter::AmqpChannelsClosed, 1);
                        a.channels.retain(|ch| ch.id != channel);
                        done(&mut self.wait, LinkWait::AmqpMethod(channel), false)
                    }
                };
                Ok((used, outcome))
            }
            LinkProtocol::Mysql(my) => {
                let (used, progress) = my.conn.decode(input, &mut self.out).map_err(|e| {
                    if e.is_auth() {
                        ErrorKind::Login
                    } else {
                        ErrorKind::Protocol
                    }
                })?;
                let outcome = match progress {
                    mysql::Progress::NeedMore | mysql::Progress::AuthReply(_) => None,
                    mysql::Progress::StartTls => Some(Outcome::StartTls),
                    mysql::Progress::LoggedIn(_) => {
                        self.ready = true;
                        Some(Outcome::Ready)
                    }
                    mysql::Progress::Prepared { statement_id, .. } => {
                        if let Some(key) = my.preparing.take() {
                            c.proto(ProtoCounter::MysqlPrepares, 1);
                            my.statements.push((key, statement_id));
                            let values = my.params.iter().map(|v| Some(v.as_bytes()));
                            my.conn
                                .com_stmt_execute(&mut self.out, statement_id, values);
                        }
                        None
                    }
                    mysql::Progress::Complete(r) => {
                        c.proto(ProtoCounter::MysqlRows, r.rows);
                        c.proto(ProtoCounter::MysqlAffected, r.affected);
                        if r.error.is_some() {
                            c.proto(ProtoCounter::MysqlSqlErrors, 1);
                            my.failed = true;
                        }
                        // A prepare that failed ends its step: no execute follows.
                        my.preparing = None;
                        if !r.more && self.wait == LinkWait::Sql {
                            self.wait = LinkWait::None;
                            Some(Outcome::Reply { ok: !my.failed })
                        } else {
                            None
                        }
                    }
                };
                Ok((used, outcome))
            }
            LinkProtocol::Ldap(l) => {
                let (used, resp) = l.decoder.decode(input).map_err(|_| ErrorKind::Protocol)?;
                let Some(r) = resp else {
                    return Ok((used, None));
                };
                let outcome = match r.op {
                    ldap::Op::SearchEntry | ldap::Op::SearchReference => {
                        c.proto(ProtoCounter::LdapEntries, 1);
                        None
                    }
                    ldap::Op::Notice => {
                        // The server is about to close the connection (its reason counted).
                        c.proto(ProtoCounter::LdapNotices, 1);
                        if let Some(code) = r.result {
                            c.proto(ProtoCounter::ldap_result(code.0), 1);
                        }
                        Some(Outcome::Closed)
                    }
                    op if op.is_final() => {
                        let code = r.result.map_or(u32::MAX, |c| c.0);
                        c.proto(ProtoCounter::ldap_result(code), 1);
                        // A compare's answer is its result: true (6) and false (5) both are.
                        let ok = code == 0
                            || (op == ldap::Op::CompareResponse && (code == 5 || code == 6));
                        if self.wait == LinkWait::Ldap(r.id) {
                            self.wait = LinkWait::None;
                            Some(Outcome::Reply { ok })
                        } else {
                            None
                        }
                    }
                    _ => None,
                };
                Ok((used, outcome))
            }
            LinkProtocol::Mqtt(m) => {
                let (used, ev) = m.client.decode(input, &mut self.out).map_err(|e| match e {
                    mqtt::MqttError::Refused(_) => ErrorKind::Login,
                    mqtt::MqttError::Incomplete => ErrorKind::Closed,
                    _ => ErrorKind::Protocol,
                })?;
                let done = |wait: &mut LinkWait, want: LinkWait, ok: bool| {
                    if *wait == want {
                        *wait = LinkWait::None;
                        Some(Outcome::Reply { ok })
                    } else {
                        None
                    }
                };
                let outcome = match ev {
                    mqtt::Event::NeedMore => None,
                    mqtt::Event::ConnAck { .. } => {
                        if self.ready {
                            return Err(ErrorKind::Protocol);
                        }
                        self.ready = true;
                        c.proto(ProtoCounter::MqttConnects, 1);
                        Some(Outcome::Ready)
                    }
                    mqtt::Event::Message { payload, dup, .. } => {
                        c.proto(ProtoCounter::MqttReceived, 1);
                        if dup {
                            c.proto(ProtoCounter::MqttReceivedDup, 1);
                        }
                        if let (Some(sent), Some(n)) =
                            (stamp_of(payload), names.get_mut(m.delivery))
                        {
                            // The same clock at both ends (one machine, or machines in sync);
                            // a send time ahead of now (a clock stepped back) is no latency.
                            if let Some(us) = wall_micros().checked_sub(sent) {
                                n.record(us, false);
                            }
                        }
                        m.received += 1;
                        match self.wait {
                            LinkWait::MqttMessages(want) if m.received >= want => {
                                self.wait = LinkWait::None;
                                Some(Outcome::Reply { ok: true })
                            }
                            _ => None,
                        }
                    }
                    mqtt::Event::PubAck { packet_id, reason }
                    | mqtt::Event::PubComp { packet_id, reason } => {
                        let ok = reason < 0x80;
                        c.proto(
                            if ok {
                                ProtoCounter::MqttPublishAcked
                            } else {
                                ProtoCounter::MqttPublishRefused
                            },
                            1,
                        );
                        done(&mut self.wait, LinkWait::MqttAck(packet_id), ok)
                    }
                    mqtt::Event::SubAck {
                        packet_id,
                        granted,
                        failures,
                    } => {
                        let ok = failures == 0 && granted < 0x80;
                        c.proto(
                            if ok {
                                ProtoCounter::MqttSubscribed
                            } else {
                                ProtoCounter::MqttSubscribeRefused
                            },
                            1,
                        );
                        done(&mut self.wait, LinkWait::MqttAck(packet_id), ok)
                    }
                    mqtt::Event::UnsubAck {
                        packet_id,
                        failures,
                    } => done(&mut self.wait, LinkWait::MqttAck(packet_id), failures == 0),
                    mqtt::Event::PingResp => match self.wait {
                        // A wait step's ping: it ends the wait only if the messages are in.
                        LinkWait::MqttMessages(want) if m.received >= want => {
                            self.wait = LinkWait::None;
                            Some(Outcome::Reply { ok: true })
                        }
                        _ => done(&mut self.wait, LinkWait::MqttPing, true),
                    },
                    mqtt::Event::Disconnect { .. } => {
                        c.proto(ProtoCounter::MqttServerDisconnects, 1);
                        Some(Outcome::Closed)
                    }
                };
                Ok((used, outcome))
            }
            LinkProtocol::Ws(w) => {
                if !self.ready {
                    let (used, hs) = w
                        .handshake
                        .decode(input, w.subprotocol.as_deref())
                        .map_err(|e| match e {
                            ws::WsError::HandshakeStatus(_) => ErrorKind::Login,
                            _ => ErrorKind::Protocol,
                        })?;
                    return Ok(match hs {
                        ws::Handshake::NeedMore => (used, None),
                        ws::Handshake::Done(_) => {
                            self.ready = true;
                            (used, Some(Outcome::Ready))
                        }
                    });
                }
                let (used, d) = w.frames.decode(input).map_err(|_| ErrorKind::Protocol)?;
                let done = |link_wait: &mut LinkWait, want: LinkWait| {
                    if *link_wait == want {
                        *link_wait = LinkWait::None;
                        Some(Outcome::Reply { ok: true })
                    } else {
                        None
                    }
                };
                Ok(match d {
                    ws::Decoded::NeedMore => (used, None),
                    ws::Decoded::Message(_) => {
                        c.proto(ProtoCounter::WsMessagesReceived, 1);
                        (used, done(&mut self.wait, LinkWait::WsMessage))
                    }
                    ws::Decoded::Ping { .. } => {
                        c.proto(ProtoCounter::WsPingsReceived, 1);
                        let mask: [u8; 4] = mask_of(self.out.len() as u64 ^ used as u64);
                        let _ = ws::encode_pong(&mut self.out, w.frames.control_payload(), mask);
                        (used, None)
                    }
                    ws::Decoded::Pong { .. } => {
                        c.proto(ProtoCounter::WsPongsReceived, 1);
                        (used, done(&mut self.wait, LinkWait::WsPong))
                    }
                    ws::Decoded::Close(_) => {
                        c.proto(ProtoCounter::WsClosesReceived, 1);
                        if self.wait == LinkWait::WsClose {
                            self.wait = LinkWait::None;
                            (used, Some(Outcome::Reply { ok: true }))
                        } else {
                            // Answer the close, then the connection ends.
                            let _ = ws::encode_close(&mut self.out, None, mask_of(used as u64));
                            self.closing = true;
                            (used, Some(Outcome::Closed))
                        }
                    }
                })
            }
        }
    }

    /// The server closed the connection: is that an error of the protocol?
    pub fn eof_is_clean(&self) -> bool {
        match &self.protocol {
            LinkProtocol::Xmpp(x) => self.ready && !x.split.in_progress(),
            LinkProtocol::Pg(p) => self.ready && p.conn.eof().is_ok(),
            LinkProtocol::Ws(w) => self.ready && !w.frames.in_progress(),
            LinkProtocol::Mqtt(m) => self.ready && m.client.eof().is_ok(),
            LinkProtocol::Ldap(l) => l.decoder.eof().is_ok(),
            LinkProtocol::Mysql(my) => self.ready && my.conn.eof().is_ok(),
            LinkProtocol::Amqp(a) => self.ready && a.conn.eof().is_ok(),
        }
    }

    /// The connection is closing: the user is no longer connected (nor online) for others.
    /// XMPP's part of [`Link::feed`]: over TCP the socket's bytes go to the splitter; over BOSH
    /// they are HTTP responses, whose stanzas wait in the session's inbox and are handed to the
    /// splitter by the calls after (with no input: the worker calls again while
    /// [`Link::queued`]), one event per call.
    fn feed_xmpp(
        &mut self,
        cfg: &XmppSpec,
        shared: Option<&XmppShared>,
        input: &[u8],
        c: &mut Counters,
    ) -> Result<(usize, Option<Outcome>), ErrorKind> {
        let LinkProtocol::Xmpp(x) = &mut self.protocol else {
            return Err(ErrorKind::Other);
        };
        let (used, ev) = match x.bosh.as_deref_mut() {
            None => x.split.feed(input).map_err(|_| ErrorKind::Protocol)?,
            Some(bl) => {
                if !input.is_empty() {
                    let used = bl.b.feed(0, input).map_err(bosh_kind)?;
                    return Ok((used, None));
                }
                // Whitespace between stanzas is the splitter's too, but it gives no event.
                let blank =
                    bl.b.inbox()
                        .iter()
                        .take_while(|b| b.is_ascii_whitespace())
                        .count();
                bl.b.consume(blank);
                let inbox = bl.b.inbox();
                if inbox.is_empty() {
                    return Ok((0, None));
                }
                let (n, ev) = x.split.feed(inbox).map_err(|_| ErrorKind::Protocol)?;
                bl.b.consume(n);
                if ev.is_none() {
                    if n == 0 {
                        return Ok((0, None));
                    }
                    // Used without an event (a comment, say): on with the rest, each call
                    // taking at least one byte.
                    return self.feed_xmpp(cfg, shared, input, c);
                }
                (0, ev)
            }
        };
        let Some(ev) = ev else {
            return Ok((used, None));
        };
        count_xmpp(&ev, c);
        if !self.ready {
            let status = x
                .login
                .on_event(
                    &login_config(cfg, x.user, x.named.as_deref()),
                    &ev,
                    &mut self.out,
                )
                .map_err(|e| match e {
                    xmpp::LoginError::Closed => ErrorKind::Closed,
                    xmpp::LoginError::Unexpected => ErrorKind::Protocol,
                    _ => ErrorKind::Login,
                })?;
            if status == xmpp::LoginStatus::Ready {
                self.ready = true;
                x.split.set_capture(false);
                c.proto(ProtoCounter::XmppLogins, 1);
                if let (Some(s), None) = (shared, &x.named) {
                    if let Ok(mut p) = s.pool.lock() {
                        x.connected = p.set_connected(x.user, true).is_ok();
                    }
                }
                return Ok((used, Some(Outcome::Ready)));
            }
            return Ok((used, None));
        }
        if let LinkWait::Xmpp(w) = self.wait {
            match w.check(&ev) {
                xmpp::WaitOutcome::Pending => {}
                xmpp::WaitOutcome::Done => {
                    self.wait = LinkWait::None;
                    return Ok((used, Some(Outcome::Reply { ok: true })));
                }
                xmpp::WaitOutcome::Failed(xmpp::ReplyError::ErrorReply) => {
                    self.wait = LinkWait::None;
                    c.proto(ProtoCounter::XmppErrorReplies, 1);
                    return Ok((used, Some(Outcome::Reply { ok: false })));
                }
                xmpp::WaitOutcome::Failed(xmpp::ReplyError::StreamError) => {
                    return Err(ErrorKind::Protocol)
                }
                xmpp::WaitOutcome::Failed(xmpp::ReplyError::Closed) => {
                    return Err(ErrorKind::Closed)
                }
            }
        }
        match ev {
            xmpp::Event::StreamClose { .. } => Ok((used, Some(Outcome::Closed))),
            xmpp::Event::Stanza(s) if s.kind == Kind::StreamError => Err(ErrorKind::Protocol),
            _ => Ok((used, None)),
        }
    }

    /// Over BOSH: what the XMPP side wrote into `self.out` from `mark` on goes to the session
    /// (stanzas queued, a stream open or close made a request of), and the requests due are
    /// written: connection 0's into `self.out`, the second connection's into its own buffer.
    fn bosh_after(
        &mut self,
        cfg: &XmppSpec,
        mark: usize,
        c: &mut Counters,
    ) -> Result<(), ErrorKind> {
        let LinkProtocol::Xmpp(x) = &mut self.protocol else {
            return Ok(());
        };
        let Some(bl) = x.bosh.as_deref_mut() else {
            return Ok(());
        };
        bl.take(&mut self.out, mark).map_err(bosh_kind)?;
        bl.pump(cfg, &mut self.out, false);
        bl.count(c);
        Ok(())
    }

    /// Over BOSH: the session and its second connection.
    pub fn bosh_mut(&mut self) -> Option<&mut BoshLink> {
        match &mut self.protocol {
            LinkProtocol::Xmpp(x) => x.bosh.as_deref_mut(),
            _ => None,
        }
    }

    fn inbox_len(&self) -> usize {
        match &self.protocol {
            LinkProtocol::Xmpp(x) => x.bosh.as_ref().map_or(0, |b| b.b.inbox().len()),
            _ => 0,
        }
    }

    /// Over BOSH, the poll if one is due (see `BoshLink::poll`): into [`Link::out`] for the
    /// user's connection, or the second connection's buffer.
    pub fn bosh_poll(&mut self, spec: &LinkSpec, c: &mut Counters) {
        let LinkSpec::Xmpp(cfg) = spec else {
            return;
        };
        self.fresh_out();
        if let LinkProtocol::Xmpp(x) = &mut self.protocol {
            if let Some(bl) = x.bosh.as_deref_mut() {
                bl.pump(cfg, &mut self.out, true);
                bl.count(c);
            }
        }
    }

    /// Stream bytes received (over BOSH) and not yet handed to the splitter.
    pub fn queued(&self) -> bool {
        self.inbox_len() > 0
    }

    /// Response bytes read from the BOSH session's second connection: taken into the session
    /// (its stanzas into the inbox, which the next [`Link::feed`] calls hand out) and the
    /// requests due written.
    pub fn aux_input(
        &mut self,
        spec: &LinkSpec,
        mut input: &[u8],
        c: &mut Counters,
    ) -> Result<(), ErrorKind> {
        let LinkSpec::Xmpp(cfg) = spec else {
            return Err(ErrorKind::Other);
        };
        self.fresh_out();
        let LinkProtocol::Xmpp(x) = &mut self.protocol else {
            return Err(ErrorKind::Other);
        };
        let Some(bl) = x.bosh.as_deref_mut() else {
            return Err(ErrorKind::Other);
        };
        while !input.is_empty() {
            let used = bl.b.feed(1, input).map_err(bosh_kind)?;
            input = &input[used..];
        }
        bl.pump(cfg, &mut self.out, false);
        bl.count(c);
        Ok(())
    }

    pub fn release(&mut self, shared: Option<&XmppShared>) {
        if let LinkProtocol::Xmpp(x) = &mut self.protocol {
            x.go_offline(shared);
            if x.connected {
                if let Some(Ok(mut p)) = shared.map(|s| s.pool.lock()) {
                    let _ = p.set_connected(x.user, false);
                }
                x.connected = false;
            }
        }
    }

    /// Encodes XMPP request `op` into `out` and arms the wait. `Err` when no user fits the
    /// destination (nothing is written; the caller counts it and goes on).
    /// Over BOSH the request's bytes go to the session, not into `out`: the HTTP request that
    /// carries them is written into [`Link::out`] or the second connection's buffer.
    #[allow(clippy::too_many_arguments)]
    pub fn xmpp_request(
        &mut self,
        spec: &XmppSpec,
        shared: Option<&XmppShared>,
        op: &XmppOp,
        vars: &[String],
        text: &mut String,
        out: &mut Vec<u8>,
        rng: &mut SmallRng,
        c: &mut Counters,
    ) -> Result<LinkWait, NoDestination> {
        let mark = out.len();
        let LinkProtocol::Xmpp(x) = &mut self.protocol else {
            return Err(NoDestination);
        };
        let domain = spec.domain.as_str();
        let prefix = spec.username.as_str();
        let mut pick = |dest: XmppDest, x: &mut XmppLink| -> Result<u64, NoDestination> {
            let d = match dest {
                XmppDest::Online => xmpp::Destination::Online,
                XmppDest::Offline => xmpp::Destination::Offline,
                XmppDest::Random => xmpp::Destination::Random,
                XmppDest::Unique => xmpp::Destination::Unique,
                XmppDest::Previous => xmpp::Destination::Previous,
            };
            let r: u64 = rng.gen();
            let picked = match shared {
                Some(s) => match s.pool.lock() {
                    Ok(mut p) => p.pick(d, x.user, r, x.previous).ok(),
                    Err(_) => None,
                },
                None => None,
            };
            match picked {
                Some(id) => Ok(id),
                None => {
                    c.proto(ProtoCounter::XmppNoDestination, 1);
                    Err(NoDestination)
                }
            }
        };
        let id = x.next_id;
        let kind = match &op.action {
            XmppAction::PresenceInitial => {
                xmpp::presence_initial(out);
                c.proto(ProtoCounter::XmppSentPresence, 1);
                // A user logged in from variables is nobody's destination.
                if let (Some(s), None) = (shared, &x.named) {
                    if let Ok(mut p) = s.pool.lock() {
                        x.online = p.set_online(x.user, true).is_ok();
                    }
                }
                xmpp::RequestKind::NoReply
            }
            XmppAction::PresenceFinal => {
                xmpp::presence_unavailable(out);
                c.proto(ProtoCounter::XmppSentPresence, 1);
                x.go_offline(shared);
                xmpp::RequestKind::NoReply
            }
            XmppAction::PresenceBroadcast { show, status } => {
                xmpp::presence_broadcast(out, show_of(show.as_deref()), status.as_deref());
                c.proto(ProtoCounter::XmppSentPresence, 1);
                xmpp::RequestKind::NoReply
            }
            XmppAction::PresenceDirected { to, show, status } => {
                let n = pick(*to, x)?;
                xmpp::presence_directed(
                    out,
                    Jid::user(prefix, n, domain),
                    show_of(show.as_deref()),
                    status.as_deref(),
                );
                c.proto(ProtoCounter::XmppSentPresence, 1);
                xmpp::RequestKind::NoReply
            }
            XmppAction::PresenceSubscribe { to } => {
                let n = pick(*to, x)?;
                xmpp::presence_typed(
                    out,
                    Jid::user(prefix, n, domain),
                    xmpp::PresenceType::Subscribe,
                );
                c.proto(ProtoCounter::XmppSentPresence, 1);
                xmpp::RequestKind::NoReply
            }
            XmppAction::RosterGet => {
                xmpp::roster_get(out, id);
                x.next_id += 1;
                c.proto(ProtoCounter::XmppSentIq, 1);
                xmpp::RequestKind::Iq { id }
            }
            XmppAction::RosterAdd { to } => {
                let n = pick(*to, x)?;
                x.previous = Some(n);
                xmpp::roster_add(out, id, Jid::user(prefix, n, domain), None, None);
                x.next_id += 1;
                c.proto(ProtoCounter::XmppSentIq, 1);
                xmpp::RequestKind::Iq { id }
            }
            XmppAction::RosterRename { to, name } => {
                let n = pick(*to, x)?;
                xmpp::roster_rename(out, id, Jid::user(prefix, n, domain), name, None);
                x.next_id += 1;
                c.proto(ProtoCounter::XmppSentIq, 1);
                xmpp::RequestKind::Iq { id }
            }
            XmppAction::RosterRemove { to } => {
                let n = pick(*to, x)?;
                xmpp::roster_remove(out, id, Jid::user(prefix, n, domain));
                x.next_id += 1;
                c.proto(ProtoCounter::XmppSentIq, 1);
                xmpp::RequestKind::Iq { id }
            }
            XmppAction::Chat { to, size, text: t } => {
                let n = pick(*to, x)?;
                x.previous = Some(n);
                let jid = Jid::user(prefix, n, domain);
                match t {
                    Some(t) => {
                        expand(t, vars, text);
                        xmpp::chat_text(out, id, jid, text);
                    }
                    None => xmpp::chat(out, id, jid, *size),
                }
                x.next_id += 1;
                c.proto(ProtoCounter::XmppSentMessage, 1);
                c.proto(ProtoCounter::XmppChatSent, 1);
                xmpp::RequestKind::NoReply
            }
            XmppAction::Raw(t) => {
                expand(t, vars, text);
                xmpp::raw(out, text.as_bytes());
                c.proto(ProtoCounter::XmppSentOther, 1);
                xmpp::RequestKind::NoReply
            }
            XmppAction::Close => {
                xmpp::stream_close(out);
                self.closing = true;
                // Leaving: from now on the user is no destination for `online` chats (the
                // server ends the session at this close; a chat routed after it would be
                // stored offline, not received).
                x.go_offline(shared);
                xmpp::RequestKind::Close
            }
        };
        let ack = match op.ack {
            XmppAck::NoAck => xmpp::Ack::NoAck,
            XmppAck::Local => xmpp::Ack::Local,
            XmppAck::Reply => xmpp::Ack::Global,
        };
        self.wait = match xmpp::Wait::for_request(ack, kind) {
            xmpp::Wait::Nothing => LinkWait::None,
            w => LinkWait::Xmpp(w),
        };
        self.fresh_out();
        if let LinkProtocol::Xmpp(x) = &mut self.protocol {
            if let Some(bl) = x.bosh.as_deref_mut() {
                if let Err(e) = bl.take(out, mark) {
                    // Over a mebibyte waiting for the server to answer: the link fails at
                    // the worker's next look (`BoshLink::failed`).
                    bl.failed = Some(bosh_kind(e));
                }
                bl.pump(spec, &mut self.out, false);
                bl.count(c);
            }
        }
        Ok(self.wait)
    }

    /// Encodes SQL request `op`: op `key` = (session, op index) tells whether this connection
    /// prepared it already; `statement` is its prepared statement's name.
    #[allow(clippy::too_many_arguments)]
    pub fn sql_request(
        &mut self,
        op: &SqlOp,
        key: (u32, u32),
        statement: &str,
        vars: &[String],
        text: &mut String,
        params: &mut Vec<String>,
        out: &mut Vec<u8>,
        c: &mut Counters,
    ) -> LinkWait {
        expand(&op.query, vars, text);
        params.resize(op.params.len(), String::new());
        for (slot, t) in params.iter_mut().zip(op.params.iter()) {
            expand(t, vars, slot);
        }
        if let LinkProtocol::Mysql(my) = &mut self.protocol {
            // MySQL's text protocol has no parameters: a statement with some is prepared (once
            // per connection), then executed with them.
            if op.prepare || !op.params.is_empty() {
                match my.statements.iter().find(|(k, _)| *k == key) {
                    Some(&(_, id)) => {
                        let values = params.iter().map(|v| Some(v.as_bytes()));
                        my.conn.com_stmt_execute(out, id, values);
                    }
                    None => {
                        // The execute follows the prepare's answer (it names the statement).
                        my.conn.com_stmt_prepare(out, text.as_bytes());
                        my.preparing = Some(key);
                        my.params.clone_from(params);
                    }
                }
            } else {
                my.conn.com_query(out, text.as_bytes());
            }
            my.failed = false;
            c.proto(ProtoCounter::MysqlQueries, 1);
            self.wait = LinkWait::Sql;
            return self.wait;
        }
        let LinkProtocol::Pg(p) = &mut self.protocol else {
            return LinkWait::None;
        };
        let values = params.iter().map(|v| Some(v.as_bytes()));
        if op.prepare {
            let name = statement;
            if !p.prepared.contains(&key) {
                // Parse, bind, execute and sync: one unit that prepares and runs.
                pg::frontend::parse(out, name, text, &[]);
                p.preparing = Some(key);
            }
            pg::frontend::bind(out, "", name, values);
            pg::frontend::execute(out, "", 0);
            pg::frontend::sync(out);
        } else if op.params.is_empty() {
            pg::frontend::query(out, text);
        } else {
            pg::frontend::query_params(out, text, values);
        }
        c.proto(ProtoCounter::PgQueries, 1);
        self.wait = LinkWait::Sql;
        self.wait
    }

    /// The payload of the last WebSocket message received, when the request asked to keep it.
    pub fn ws_payload(&self) -> &[u8] {
        match &self.protocol {
            LinkProtocol::Ws(w) => w.frames.payload(),
            _ => &[],
        }
    }

    /// Encodes WebSocket request `op`.
    pub fn ws_request(
        &mut self,
        op: &WsOp,
        vars: &[String],
        text: &mut String,
        out: &mut Vec<u8>,
        rng: &mut SmallRng,
        c: &mut Counters,
    ) -> LinkWait {
        if let LinkProtocol::Ws(w) = &mut self.protocol {
            // Payloads are kept only for a reply a later step reads.
            w.frames.set_keep_payload(op.capture);
        }
        self.wait = match &op.action {
            WsAction::Message {
                binary,
                data,
                reply,
            } => {
                expand(data, vars, text);
                let kind = if *binary {
                    ws::MessageKind::Binary
                } else {
                    ws::MessageKind::Text
                };
                ws::encode_message(out, kind, text.as_bytes(), 1, || rng.gen());
                c.proto(ProtoCounter::WsMessagesSent, 1);
                if *reply {
                    LinkWait::WsMessage
                } else {
                    LinkWait::None
                }
            }
            WsAction::Ping => {
                let _ = ws::encode_ping(out, b"headroom", rng.gen());
                LinkWait::WsPong
            }
            WsAction::Close => {
                let _ = ws::encode_close(out, Some((1000, "")), rng.gen());
                self.closing = true;
                LinkWait::WsClose
            }
        };
        self.wait
    }
}

impl Link {
    /// Encodes MQTT request `op` into `out` (the session's batch) and arms the wait.
    pub fn mqtt_request(
        &mut self,
        op: &MqttOp,
        vars: &[String],
        texts: &mut [String; 3],
        out: &mut Vec<u8>,
        now: Instant,
        c: &mut Counters,
    ) -> Result<LinkWait, TooLong> {
        // The topic (or filter) and a text payload, expanded into the session's reused slots.
        let [text, body, _] = texts;
        let LinkProtocol::Mqtt(m) = &mut self.protocol else {
            return Ok(LinkWait::None);
        };
        // The codec refuses (panics on) strings the protocol cannot carry: check them here.
        let fits = |t: &str| t.len() <= usize::from(u16::MAX);
        let v = m.version;
        m.last_sent = now;
        self.wait = match &op.action {
            // Connected already (the session's step runs only on a ready link).
            MqttAction::Connect(_) => LinkWait::None,
            MqttAction::Publish {
                topic,
                qos,
                retain,
                payload,
            } => {
                expand(topic, vars, text);
                if !fits(text) {
                    return Err(TooLong);
                }
                let q = qos_of(*qos);
                // The body of a text payload, expanded before an id is taken for it.
                if let MqttPayload::Text(t) = payload {
                    expand(t, vars, body);
                    if body.len() > MAX_TEXT_PAYLOAD {
                        return Err(TooLong);
                    }
                }
                let id = if *qos > 0 {
                    m.client.next_packet_id()
                } else {
                    0
                };
                match payload {
                    MqttPayload::Size(n) => {
                        let n = *n as usize;
                        let stamp = stamp(wall_micros());
                        let head = &stamp[..n.min(stamp.len())];
                        mqtt::encode_publish_parts(
                            out,
                            v,
                            text,
                            q,
                            *retain,
                            id,
                            head,
                            b'x',
                            n - head.len(),
                        );
                    }
                    MqttPayload::Text(_) => {
                        mqtt::encode_publish(out, v, text, q, *retain, false, id, body.as_bytes());
                    }
                }
                c.proto(ProtoCounter::MqttPublished, 1);
                if *qos == 0 {
                    LinkWait::None
                } else {
                    LinkWait::MqttAck(id)
                }
            }
            MqttAction::Subscribe { filter, qos } => {
                expand(filter, vars, text);
                if !fits(text) {
                    return Err(TooLong);
                }
                let id = m.client.next_packet_id();
                mqtt::encode_subscribe(out, v, id, &[(text.as_str(), qos_of(*qos))]);
                LinkWait::MqttAck(id)
            }
            MqttAction::Unsubscribe { filter } => {
                expand(filter, vars, text);
                if !fits(text) {
                    return Err(TooLong);
                }
                let id = m.client.next_packet_id();
                mqtt::encode_unsubscribe(out, v, id, &[text.as_str()]);
                LinkWait::MqttAck(id)
            }
            MqttAction::Ping => {
                mqtt::encode_pingreq(out);
                c.proto(ProtoCounter::MqttPings, 1);
                LinkWait::MqttPing
            }
            MqttAction::Wait { messages, .. } => {
                // A ping carries the wait: its answer ends it if the messages are in already,
                // and it keeps the connection alive while it lasts.
                mqtt::encode_pingreq(out);
                c.proto(ProtoCounter::MqttPings, 1);
                LinkWait::MqttMessages(*messages)
            }
            MqttAction::Disconnect => {
                mqtt::encode_disconnect(out, v);
                self.closing = true;
                LinkWait::None
            }
        };
        Ok(self.wait)
    }

    /// MQTT keep-alive: when the client has sent nothing for its keep-alive, a PINGREQ goes
    /// into `out` (true: write it), as Tsung and paho ping; the broker allows one and a half
    /// keep-alives, and the sweep looks at most every 250 ms. Never while the setup runs.
    pub fn keep_alive(&mut self, now: Instant, c: &mut Counters) -> bool {
        let LinkProtocol::Mqtt(m) = &mut self.protocol else {
            return false;
        };
        let Some(after) = m.ping_after else {
            return false;
        };
        if !self.ready || self.closing || now.saturating_duration_since(m.last_sent) < after {
            return false;
        }
        if self.written >= self.out.len() {
            self.out.clear();
            self.written = 0;
        }
        mqtt::encode_pingreq(&mut self.out);
        m.last_sent = now;
        c.proto(ProtoCounter::MqttPings, 1);
        true
    }

    /// The link may want a keep-alive ping (an MQTT one with keep-alive on): the sweep asks.
    pub fn keeps_alive(&self) -> bool {
        matches!(&self.protocol, LinkProtocol::Mqtt(m) if m.ping_after.is_some())
    }
}

impl Link {
    /// Encodes LDAP request `op` into `out` and arms the wait for its final response. `Err`
    /// when its filter does not parse once its variables are in (nothing is written).
    pub fn ldap_request(
        &mut self,
        op: &LdapOp,
        vars: &[String],
        out: &mut Vec<u8>,
        c: &mut Counters,
    ) -> Result<LinkWait, ldap::FilterError> {
        let LinkProtocol::Ldap(l) = &mut self.protocol else {
            return Ok(LinkWait::None);
        };
        l.id = if l.id == i32::MAX { 1 } else { l.id + 1 };
        let id = l.id;
        // Expand every text of the request into the reused slots, in order.
        let t = &mut l.texts;
        let mut n = 0;
        let mut put = |tpl: &Template| {
            if t.len() <= n {
                t.push(String::new());
            }
            expand(tpl, vars, &mut t[n]);
            n += 1;
        };
        match &op.action {
            LdapAction::Bind { dn, password } => {
                put(dn);
                put(password);
                ldap::bind_simple(out, id, &t[0], &t[1]);
            }
            LdapAction::Search {
                base,
                filter,
                scope,
                attrs,
                size_limit,
            } => {
                put(base);
                put(filter);
                // The attributes asked for, as the codec takes them: on the stack for up to 16
                // (a search is the hot request), collected only for more.
                let mut few = [""; 16];
                let many: Vec<&str>;
                let attrs: &[&str] = if attrs.len() <= few.len() {
                    for (slot, a) in few.iter_mut().zip(attrs) {
                        *slot = a;
                    }
                    &few[..attrs.len()]
                } else {
                    many = attrs.iter().map(String::as_str).collect();
                    &many
                };
                ldap::search(
                    out,
                    id,
                    &ldap::Search {
                        base: &t[0],
                        scope: match scope {
                            LdapScope::Base => ldap::Scope::Base,
                            LdapScope::One => ldap::Scope::One,
                            LdapScope::Sub => ldap::Scope::Sub,
                        },
                        size_limit: *size_limit,
                        filter: t[1].as_str().into(),
                        attrs,
                        ..ldap::Search::default()
                    },
                )?;
            }
            LdapAction::Add { dn, attrs } => {
                put(dn);
                for (_, vals) in attrs {
                    vals.iter().for_each(&mut put);
                }
                // Writes are rare against searches: the slices of one request are built here.
                let values = value_runs(t, attrs.iter().map(|(_, v)| v.len()));
                let list: Vec<(&str, &[&str])> = attrs
                    .iter()
                    .zip(&values)
                    .map(|((a, _), v)| (a.as_str(), v.as_slice()))
                    .collect();
                ldap::add(out, id, &t[0], &list);
            }
            LdapAction::Modify { dn, changes } => {
                put(dn);
                for (_, _, vals) in changes {
                    vals.iter().for_each(&mut put);
                }
                let values = value_runs(t, changes.iter().map(|(_, _, v)| v.len()));
                let list: Vec<(ldap::ModOp, &str, &[&str])> = changes
                    .iter()
                    .zip(&values)
                    .map(|((m, a, _), v)| {
                        let m = match m {
                            LdapMod::Add => ldap::ModOp::Add,
                            LdapMod::Delete => ldap::ModOp::Delete,
                            LdapMod::Replace => ldap::ModOp::Replace,
                        };
                        (m, a.as_str(), v.as_slice())
                    })
                    .collect();
                ldap::modify(out, id, &t[0], &list);
            }
            LdapAction::Delete { dn } => {
                put(dn);
                ldap::delete(out, id, &t[0]);
            }
            LdapAction::Unbind => {
                ldap::unbind(out, id);
                self.closing = true;
                c.proto(ProtoCounter::LdapRequests, 1);
                self.wait = LinkWait::None;
                return Ok(self.wait);
            }
        }
        c.proto(ProtoCounter::LdapRequests, 1);
        self.wait = LinkWait::Ldap(id);
        Ok(self.wait)
    }
}

impl Link {
    /// Whether AMQP step `op` has nothing to wait for (its confirms are in, its messages have
    /// come): the session counts it done without a request.
    pub fn amqp_satisfied(&self, op: &AmqpOp) -> bool {
        let LinkProtocol::Amqp(a) = &self.protocol else {
            return false;
        };
        match op.action {
            AmqpAction::WaitConfirms { .. } => a.confirmed(),
            AmqpAction::Wait { messages, .. } => a.received >= messages,
            _ => false,
        }
    }

    /// Encodes AMQP request `op` into `out` and arms its wait. `delivery`: the metric id of
    /// `amqp:delivery`. `Err` (nothing written) when its channel, once its variables are in, is
    /// no number from 1 to 65535, or a channel opened without a number finds none free.
    pub fn amqp_request(
        &mut self,
        op: &AmqpOp,
        vars: &[String],
        texts: &mut [String; 3],
        out: &mut Vec<u8>,
        delivery: usize,
        c: &mut Counters,
    ) -> Result<LinkWait, ()> {
        let LinkProtocol::Amqp(a) = &mut self.protocol else {
            return Ok(LinkWait::None);
        };
        a.delivery = delivery;
        let number = |t: &Template| headroom_core::session::amqp_channel(t, vars).ok_or(());
        self.wait = match &op.action {
            AmqpAction::ChannelOpen { channel } => {
                let ch = match channel {
                    Some(t) => number(t)?,
                    None => a.next_channel().ok_or(())?,
                };
                amqp::client::channel_open(out, ch);
                a.channel(ch);
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::ChannelClose { channel } => {
                let ch = number(channel)?;
                amqp::client::channel_close(out, ch, amqp::reply::SUCCESS);
                a.channels.retain(|c| c.id != ch);
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::ExchangeDeclare {
                channel,
                exchange,
                kind,
                durable,
            } => {
                let ch = number(channel)?;
                expand(exchange, vars, &mut texts[0]);
                let opts = amqp::ExchangeOptions {
                    durable: *durable,
                    ..Default::default()
                };
                amqp::client::exchange_declare(out, ch, &texts[0], kind, opts);
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::QueueDeclare {
                channel,
                queue,
                durable,
                exclusive,
                auto_delete,
            } => {
                let ch = number(channel)?;
                expand(queue, vars, &mut texts[0]);
                let opts = amqp::QueueOptions {
                    durable: *durable,
                    exclusive: *exclusive,
                    auto_delete: *auto_delete,
                    ..Default::default()
                };
                amqp::client::queue_declare(out, ch, &texts[0], opts);
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::QueueBind {
                channel,
                queue,
                exchange,
                routing_key,
            } => {
                let ch = number(channel)?;
                expand(queue, vars, &mut texts[0]);
                expand(exchange, vars, &mut texts[1]);
                expand(routing_key, vars, &mut texts[2]);
                amqp::client::queue_bind(out, ch, &texts[0], &texts[1], &texts[2]);
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::ConfirmSelect { channel } => {
                let ch = number(channel)?;
                amqp::client::confirm_select(out, ch);
                a.channel(ch).confirming = true;
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::Qos { channel, prefetch } => {
                let ch = number(channel)?;
                amqp::client::basic_qos(out, ch, *prefetch);
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::Consume {
                channel,
                queue,
                ack,
            } => {
                let ch = number(channel)?;
                expand(queue, vars, &mut texts[0]);
                amqp::client::basic_consume(out, ch, &texts[0], "", !*ack);
                a.channel(ch).acks = *ack;
                LinkWait::AmqpMethod(ch)
            }
            AmqpAction::Publish {
                channel,
                exchange,
                routing_key,
                persistent,
                payload,
            } => {
                let ch = number(channel)?;
                let [ex, key, body] = texts;
                expand(exchange, vars, ex);
                expand(routing_key, vars, key);
                if let MqttPayload::Text(t) = payload {
                    expand(t, vars, body);
                }
                let p = amqp::Publish {
                    channel: ch,
                    exchange: ex,
                    routing_key: key,
                    mandatory: false,
                    persistent: *persistent,
                };
                match payload {
                    MqttPayload::Size(n) => {
                        let n = *n as usize;
                        let stamp = stamp(wall_micros());
                        let head = &stamp[..n.min(stamp.len())];
                        a.conn
                            .basic_publish_parts(out, &p, head, b'x', n - head.len());
                    }
                    MqttPayload::Text(_) => a.conn.basic_publish(out, &p, body.as_bytes()),
                }
                let state = a.channel(ch);
                if state.confirming {
                    state.published += 1;
                }
                c.proto(ProtoCounter::AmqpPublished, 1);
                LinkWait::None
            }
            AmqpAction::WaitConfirms { .. } => {
                // A heartbeat frame carries the wait (nothing answers it; the confirms do).
                amqp::client::heartbeat(out);
                LinkWait::AmqpConfirms
            }
            AmqpAction::Wait { messages, .. } => {
                amqp::client::heartbeat(out);
                LinkWait::AmqpMessages(*messages)
            }
            AmqpAction::Close => {
                a.conn.connection_close(out, amqp::reply::SUCCESS);
                self.closing = true;
                LinkWait::AmqpClose
            }
        };
        Ok(self.wait)
    }
}

/// The values of an add or modify, one run per attribute or change of `lens` values each,
/// from the expanded texts after the DN (`texts[0]`).
fn value_runs(texts: &[String], lens: impl Iterator<Item = usize>) -> Vec<Vec<&str>> {
    let mut at = 1;
    lens.map(|n| {
        let run = texts[at..at + n].iter().map(String::as_str).collect();
        at += n;
        run
    })
    .collect()
}

/// A fresh MQTT client for user `global`: its CONNECT goes into `out`.
fn mqtt_start(spec: &MqttSpec, c: &MqttConnect, global: u64, out: &mut Vec<u8>) -> MqttLink {
    let version = if spec.v5 {
        mqtt::Version::V5
    } else {
        mqtt::Version::V311
    };
    // Unique per user (a broker takes a second connection with the same id as the first
    // one's takeover): closed users are numbered from 0, arrived ones carry bit 40. Without a
    // prefix, the process's id keeps two runs at once apart.
    let prefix = if c.client_id.is_empty() {
        format!("headroom-{}-", std::process::id())
    } else {
        c.client_id.clone()
    };
    let id = if global >> 41 != 0 {
        format!("{prefix}o{}", global & ((1 << 40) - 1))
    } else if global >> 40 != 0 {
        format!("{prefix}a{}", global & ((1 << 40) - 1))
    } else {
        format!("{prefix}{global}")
    };
    let will = c.will.as_ref().map(|w| mqtt::Will {
        topic: &w.topic,
        payload: w.payload.as_bytes(),
        qos: qos_of(w.qos),
        retain: w.retain,
    });
    let mut connect = mqtt::Connect::new(version, &id);
    connect.clean_start = c.clean_start;
    connect.keep_alive = c.keep_alive;
    connect.username = c.username.as_deref();
    connect.password = c.password.as_deref().map(str::as_bytes);
    connect.will = will;
    connect.session_expiry = c.session_expiry;
    let client = mqtt::Client::connect(&connect, out);
    MqttLink {
        client,
        version,
        ping_after: (c.keep_alive > 0)
            .then(|| std::time::Duration::from_secs(u64::from(c.keep_alive))),
        last_sent: Instant::now(),
        received: 0,
        delivery: spec.delivery as usize,
    }
}

fn qos_of(q: u8) -> mqtt::QoS {
    match q {
        0 => mqtt::QoS::AtMostOnce,
        1 => mqtt::QoS::AtLeastOnce,
        _ => mqtt::QoS::ExactlyOnce,
    }
}

/// The send time a sized MQTT or AMQP payload starts with: `hr` and 14 hex digits of
/// microseconds since the Unix epoch (16 bytes, what the AMQP codec keeps of a body; 2^56 µs
/// is beyond year 4000; a shorter payload carries none and is not timed).
pub(crate) const STAMP_LEN: usize = 16;

fn stamp(us: u64) -> [u8; STAMP_LEN] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = [0u8; STAMP_LEN];
    s[..2].copy_from_slice(b"hr");
    for (i, b) in s[2..].iter_mut().enumerate() {
        *b = HEX[((us >> (52 - 4 * i)) & 0xf) as usize];
    }
    s
}

/// The send time of a payload that starts with a stamp.
fn stamp_of(payload: &[u8]) -> Option<u64> {
    let digits = payload.get(..STAMP_LEN)?.strip_prefix(b"hr")?;
    let mut us = 0u64;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => return None,
        };
        us = us << 4 | u64::from(v);
    }
    Some(us)
}

/// Microseconds since the Unix epoch: the clock publishers and subscribers share.
fn wall_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The account number of user `global`: `first + global mod count`. Global ids of users that
/// arrived in phases carry a high bit (1 << 40), those of `once` users 1 << 41: masked off
/// first.
fn xmpp_user(x: &XmppSpec, global: u64) -> u64 {
    let count = x.last.saturating_sub(x.first) + 1;
    x.first + (global & ((1 << 40) - 1)) % count
}

/// The login of account `user`, or of the user and password `named` (from the session's
/// variables, [`XmppSpec::login`]).
fn login_config<'a>(
    x: &'a XmppSpec,
    user: u64,
    named: Option<&'a (String, String)>,
) -> LoginConfig<'a> {
    LoginConfig {
        domain: &x.domain,
        credentials: match named {
            _ if x.anonymous => xmpp::Credentials::Anonymous,
            Some((u, p)) => xmpp::Credentials::Plain {
                user: xmpp::Name::Str(u),
                password: xmpp::Name::Str(p),
            },
            None => xmpp::Credentials::Plain {
                user: xmpp::Name::Indexed(&x.username, user),
                password: xmpp::Name::Indexed(&x.password, user),
            },
        },
        resource: x.resource.as_deref(),
        register: x.register,
    }
}

fn mysql_login(m: &MysqlSpec) -> mysql::Login<'_> {
    mysql::Login {
        user: &m.user,
        password: m.password.as_deref().unwrap_or(""),
        database: m.database.as_deref(),
    }
}

fn pg_login(p: &PgSpec) -> pg::Login<'_> {
    pg::Login {
        user: &p.user,
        password: p.password.as_deref().unwrap_or(""),
        database: &p.database,
        application_name: Some("headroom"),
    }
}

/// Counts a received XMPP event by kind.
fn count_xmpp(ev: &xmpp::Event<'_>, c: &mut Counters) {
    let xmpp::Event::Stanza(s) = ev else {
        return;
    };
    let counter = match s.kind {
        Kind::Message => {
            if s.stanza_type() == StanzaType::Chat {
                c.proto(ProtoCounter::XmppChatReceived, 1);
            }
            ProtoCounter::XmppReceivedMessage
        }
        Kind::Presence => ProtoCounter::XmppReceivedPresence,
        Kind::Iq => ProtoCounter::XmppReceivedIq,
        Kind::StreamError => {
            c.proto(ProtoCounter::XmppStreamErrors, 1);
            ProtoCounter::XmppReceivedOther
        }
        _ => ProtoCounter::XmppReceivedOther,
    };
    c.proto(counter, 1);
}

fn show_of(s: Option<&str>) -> Option<xmpp::Show> {
    match s? {
        "away" => Some(xmpp::Show::Away),
        "chat" => Some(xmpp::Show::Chat),
        "dnd" => Some(xmpp::Show::Dnd),
        "xa" => Some(xmpp::Show::Xa),
        _ => None,
    }
}

fn expand(t: &Template, vars: &[String], into: &mut String) {
    into.clear();
    t.expand_into(vars, into);
}

/// A masking key for the frames the protocol itself answers with (pongs, close replies). RFC
/// 6455 wants it unpredictable to intermediaries; these carry no user data, so a mixed counter
/// is enough here (request frames use the worker's generator).
fn mask_of(x: u64) -> [u8; 4] {
    let m = x
        .wrapping_add(0x9E37_79B9_7F4A_7C15)
        .wrapping_mul(0xBF58_476D_1CE4_E5B9);
    ((m >> 32) as u32).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_and_nothing_else_does() {
        for us in [0, 1, 1_764_000_000_123_456, (1 << 56) - 1] {
            let s = stamp(us);
            assert_eq!(stamp_of(&s), Some(us));
            let mut longer = s.to_vec();
            longer.extend_from_slice(b"xxxx");
            assert_eq!(stamp_of(&longer), Some(us));
        }
        assert_eq!(stamp_of(b"hr:0123"), None, "too short");
        assert_eq!(stamp_of(b"xx:0000000000000001"), None, "no marker");
        assert_eq!(stamp_of(b"hr:000000000000000G"), None, "not hex");
        assert_eq!(
            stamp_of(b"hr:000000000000000A"),
            None,
            "upper case is not ours"
        );
    }

    /// AMQP channels: `channel_open: auto` numbers as Tsung's client does, a template channel is
    /// resolved per step from the user's variables, and one that gives no number from 1 to 65535
    /// fails the step with nothing written.
    #[test]
    fn amqp_channels_resolve_per_step_and_auto_numbers_as_tsung() {
        use headroom_core::session::{AmqpSpec, Piece};
        use rand::SeedableRng;
        let spec = LinkSpec::Amqp(AmqpSpec {
            user: "u".into(),
            password: "p".into(),
            vhost: "/".into(),
        });
        let mut rng = SmallRng::seed_from_u64(1);
        let mut link = Link::start(&spec, None, "h", 0, &[], &mut rng, false).unwrap();
        let mut c = Counters::default();
        let mut texts: [String; 3] = Default::default();
        let var = |v| Template(vec![Piece::Var(v)]);
        // user_id, session, then `ch`.
        let mut vars: Vec<String> = vec!["0".into(), "s".into(), String::new()];
        // The channel of the one frame a request wrote (a method frame: type 1, channel, size).
        let mut send = |link: &mut Link, action, vars: &[String]| -> Result<u16, ()> {
            let mut out = Vec::new();
            let op = AmqpOp { name: 0, action };
            match link.amqp_request(&op, vars, &mut texts, &mut out, 0, &mut c) {
                Ok(_) => {
                    assert_eq!(out[0], 1, "{out:?}");
                    Ok(u16::from_be_bytes([out[1], out[2]]))
                }
                Err(()) => {
                    assert!(out.is_empty(), "{out:?}");
                    Err(())
                }
            }
        };
        let auto = || AmqpAction::ChannelOpen { channel: None };
        let opened: Vec<_> = (0..3).map(|_| send(&mut link, auto(), &vars)).collect();
        assert_eq!(opened, [Ok(1), Ok(2), Ok(3)]);
        vars[2] = "1".into();
        let close = AmqpAction::ChannelClose { channel: var(2) };
        assert_eq!(send(&mut link, close, &vars), Ok(1));
        // 2 and 3 open: one below the lowest.
        assert_eq!(send(&mut link, auto(), &vars), Ok(1));
        // 1 to 3 open: one above the highest.
        assert_eq!(send(&mut link, auto(), &vars), Ok(4));
        for (value, want) in [
            ("7", Ok(7)),
            ("65535", Ok(65535)),
            ("0", Err(())),
            ("70000", Err(())),
            ("x", Err(())),
            ("", Err(())),
        ] {
            vars[2] = value.into();
            let select = AmqpAction::ConfirmSelect { channel: var(2) };
            assert_eq!(send(&mut link, select, &vars), want, "{value:?}");
        }
    }

    #[test]
    fn xmpp_users_map_into_the_range() {
        let x = XmppSpec {
            domain: "localhost".into(),
            username: "user".into(),
            password: "pass".into(),
            first: 1,
            last: 5000,
            login: None,
            resource: None,
            anonymous: false,
            register: false,
            bosh: None,
        };
        assert_eq!(xmpp_user(&x, 0), 1);
        assert_eq!(xmpp_user(&x, 4999), 5000);
        assert_eq!(xmpp_user(&x, 5000), 1);
        // Arrived users: the phase bit is masked off, ids follow the arrival order.
        assert_eq!(xmpp_user(&x, (1 << 40) + 7), 8);
    }
}
