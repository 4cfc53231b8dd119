//! Plain types shared by every headroom crate.
//!
//! Nothing here does I/O. The command line (or a scenario file) is turned into a [`Plan`], an
//! immutable, validated description of one run; the engine executes it and never sees where it
//! came from. Failures on the hot path are one of the fixed [`ErrorKind`]s, counted in an array
//! indexed by the kind, so that counting an error never allocates.

use std::net::SocketAddr;
use std::time::Duration;

pub mod expr;
pub mod numbers;
mod random;
pub mod session;
pub mod spec;
pub mod stats;
pub mod status;
pub mod surge;
pub mod url;
pub use random::{secs_saturating, Distribution};
pub use status::{StatusSet, STATUS_CODES, STATUS_MAX, STATUS_MIN};

/// Every way a request or a connection can fail, as counted per interval.
///
/// The order is the order of the counters array and of the summary; append only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The connect did not complete within `--connect-timeout`.
    ConnectTimeout,
    /// The connect was refused (ECONNREFUSED: nothing listening).
    Refused,
    /// The peer reset the connection (ECONNRESET / EPIPE).
    Reset,
    /// The peer closed the connection while a response was expected or incomplete.
    Closed,
    /// No complete response within `--timeout` of sending the request.
    Timeout,
    /// The reply was not valid HTTP (or not valid for the protocol in use).
    Protocol,
    /// A complete response with a 4xx status.
    Http4xx,
    /// A complete response with a 5xx status.
    Http5xx,
    /// The local side ran out of something: no free source port (EADDRNOTAVAIL), no descriptor
    /// (EMFILE/ENFILE), no buffer space.
    LocalResource,
    /// Any other socket error; rare, kept so nothing is dropped.
    Other,
    /// The protocol's connection setup failed: XMPP login (SASL failure, bind), PostgreSQL
    /// authentication, WebSocket upgrade refused.
    Login,
    /// A well-formed reply that says the request failed: an XMPP iq of type `error`, an SQL
    /// ErrorResponse.
    ErrorReply,
    /// TLS: the server's certificate is not signed by a trusted CA (self-signed, unknown issuer).
    TlsUntrusted,
    /// TLS: the server's certificate has expired (or is not valid yet).
    TlsExpired,
    /// TLS: the server's certificate is not valid for the name asked for (SNI / URL host).
    TlsWrongName,
    /// TLS: any other certificate problem (bad encoding, revoked, wrong usage, refused client
    /// certificate).
    TlsCertificate,
    /// TLS: no protocol version or cipher suite in common (e.g. a TLS 1.3-only server and
    /// `--tls-max 1.2`).
    TlsVersion,
    /// TLS: the server ended the handshake with another alert.
    TlsAlert,
    /// TLS: the server's bytes are not TLS at all (plain HTTP on an https URL) or are malformed.
    TlsMalformed,
    /// HTTP/2: the request's stream was reset (RST_STREAM from the server, a stream error, or
    /// refused by a GOAWAY); the codes are counted under `http2` in the protocol counters.
    StreamReset,
    /// A complete response whose status is not in `--expect-status` ([`Plan::expect_status`]).
    /// With an expected set, this replaces [`ErrorKind::Http4xx`] and [`ErrorKind::Http5xx`].
    UnexpectedStatus,
    /// A redirect chain longer than the run follows (`--follow N`, `follow:`).
    RedirectLimit,
    /// A redirect without a `Location`, or with one that does not parse.
    BadLocation,
    /// A redirect to another origin than the run's target: headroom loads one server and does
    /// not follow it there.
    RedirectOffsite,
    /// The server flooded the connection: HTTP/2 control frames it made us queue (PING and
    /// SETTINGS ACKs, WINDOW_UPDATE, RST_STREAM) beyond the cap while it did not read them
    /// (nghttp2's `max_outbound_ack`, 1000). The connection was closed with GOAWAY
    /// ENHANCE_YOUR_CALM; each request in flight on it counts once.
    PeerFlood,
}

impl ErrorKind {
    /// All kinds, in counter order.
    pub const ALL: [ErrorKind; 25] = [
        ErrorKind::ConnectTimeout,
        ErrorKind::Refused,
        ErrorKind::Reset,
        ErrorKind::Closed,
        ErrorKind::Timeout,
        ErrorKind::Protocol,
        ErrorKind::Http4xx,
        ErrorKind::Http5xx,
        ErrorKind::LocalResource,
        ErrorKind::Other,
        ErrorKind::Login,
        ErrorKind::ErrorReply,
        ErrorKind::TlsUntrusted,
        ErrorKind::TlsExpired,
        ErrorKind::TlsWrongName,
        ErrorKind::TlsCertificate,
        ErrorKind::TlsVersion,
        ErrorKind::TlsAlert,
        ErrorKind::TlsMalformed,
        ErrorKind::StreamReset,
        ErrorKind::UnexpectedStatus,
        ErrorKind::RedirectLimit,
        ErrorKind::BadLocation,
        ErrorKind::RedirectOffsite,
        ErrorKind::PeerFlood,
    ];
    /// Number of kinds (the length of a counters array).
    pub const COUNT: usize = Self::ALL.len();

    /// The stable name used in summary.json, intervals.jsonl and the human summary.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Closed => "closed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Http4xx => "http_4xx",
            ErrorKind::Http5xx => "http_5xx",
            ErrorKind::LocalResource => "local_resource",
            ErrorKind::Other => "other",
            ErrorKind::Login => "login",
            ErrorKind::ErrorReply => "error_reply",
            ErrorKind::TlsUntrusted => "tls_untrusted",
            ErrorKind::TlsExpired => "tls_expired",
            ErrorKind::TlsWrongName => "tls_wrong_name",
            ErrorKind::TlsCertificate => "tls_certificate",
            ErrorKind::TlsVersion => "tls_version",
            ErrorKind::TlsAlert => "tls_alert",
            ErrorKind::TlsMalformed => "tls_malformed",
            ErrorKind::StreamReset => "stream_reset",
            ErrorKind::UnexpectedStatus => "unexpected_status",
            ErrorKind::RedirectLimit => "redirect_limit",
            ErrorKind::BadLocation => "bad_location",
            ErrorKind::RedirectOffsite => "redirect_offsite",
            ErrorKind::PeerFlood => "flood",
        }
    }

    /// Index into a counters array.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// Classify an OS error from connect/read/write.
    pub fn from_io(err: &std::io::Error, connecting: bool) -> ErrorKind {
        match err.raw_os_error() {
            Some(libc_errno::ECONNREFUSED) => ErrorKind::Refused,
            Some(libc_errno::ECONNRESET) | Some(libc_errno::EPIPE) => ErrorKind::Reset,
            Some(libc_errno::ETIMEDOUT) if connecting => ErrorKind::ConnectTimeout,
            Some(libc_errno::ETIMEDOUT) => ErrorKind::Timeout,
            Some(libc_errno::EADDRNOTAVAIL)
            | Some(libc_errno::EMFILE)
            | Some(libc_errno::ENFILE)
            | Some(libc_errno::ENOBUFS)
            | Some(libc_errno::EADDRINUSE) => ErrorKind::LocalResource,
            _ => match err.kind() {
                std::io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
                std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::ConnectionAborted => ErrorKind::Reset,
                std::io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
                _ => ErrorKind::Other,
            },
        }
    }
}

/// Linux errno values used for classification (kept here so core needs no libc).
/// Protocol counters (XMPP, PostgreSQL, WebSocket): what was sent and received, by kind, so a
/// summary can say "messages received against messages sent" and count stanzas per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtoCounter {
    XmppSentMessage,
    XmppSentPresence,
    XmppSentIq,
    XmppSentOther,
    XmppReceivedMessage,
    XmppReceivedPresence,
    XmppReceivedIq,
    XmppReceivedOther,
    /// Chat messages sent by the users.
    XmppChatSent,
    /// Chat messages (type `chat`, with a body) received by the users.
    XmppChatReceived,
    /// Logins that reached a bound resource.
    XmppLogins,
    /// Iq replies of type `error` to a request that waited for its reply.
    XmppErrorReplies,
    /// `<stream:error>`s from the server.
    XmppStreamErrors,
    /// Chats or presences not sent because no user fitted the destination.
    XmppNoDestination,
    PgQueries,
    PgRows,
    /// Statements answered with an ErrorResponse (SQLSTATE).
    PgSqlErrors,
    WsMessagesSent,
    WsMessagesReceived,
    WsPingsReceived,
    WsPongsReceived,
    WsClosesReceived,
    /// TLS handshakes completed (full or resumed).
    TlsHandshakes,
    /// TLS handshakes that resumed an earlier session (ticket or session id).
    TlsResumed,
    /// HTTP/2: GOAWAY frames received.
    H2GoAway,
    /// HTTP/2: streams reset (by the server, by us for a stream error, or refused by a GOAWAY),
    /// by error code (RFC 9113 §7); codes above 0xd are counted as `rst_other`.
    H2RstNoError,
    H2RstProtocolError,
    H2RstInternalError,
    H2RstFlowControlError,
    H2RstSettingsTimeout,
    H2RstStreamClosed,
    H2RstFrameSizeError,
    H2RstRefusedStream,
    H2RstCancel,
    H2RstCompressionError,
    H2RstConnectError,
    H2RstEnhanceYourCalm,
    H2RstInadequateSecurity,
    H2RstHttp11Required,
    H2RstOther,
    /// HTTP/2: connections that ended in a connection error (ours or the server's GOAWAY with
    /// an error code).
    H2ConnectionErrors,
    /// HTTP: redirects followed (each a request of its own, timed and counted as one).
    HttpRedirects,
    /// HTTP: cookies stored in users' jars from `Set-Cookie` (new or replaced).
    HttpCookiesStored,
    /// HTTP: `Set-Cookie` values that do not parse (RFC 6265 §5.2), ignored.
    HttpCookiesMalformed,
    /// HTTP: `Set-Cookie` values refused by the storage rules (domain or path mismatch, too
    /// big), ignored.
    HttpCookiesRejected,
    /// HTTP: cookies dropped because a user's jar was full.
    HttpCookiesEvicted,
    /// HTTP: 401 challenges answered (Digest), each followed by the request sent again.
    HttpAuthChallenges,
    /// HTTP: 401 challenges that could not be answered (no credentials, unknown scheme, a
    /// malformed challenge, or the answer refused again).
    HttpAuthFailed,
    /// HTTP (`--compressed`): responses with a `Content-Encoding`, their bodies as sent and
    /// as decoded.
    HttpCompressedResponses,
    HttpBodyBytesEncoded,
    HttpBodyBytesDecoded,
    /// HTTP/2: requests the server refused unprocessed (streams above a GOAWAY's last id, or
    /// reset with REFUSED_STREAM) that went again, once, on a new or the same connection (RFC
    /// 9113 §8.7).
    H2Resent,
    /// MQTT: CONNACKs that accepted the connection.
    MqttConnects,
    /// MQTT: PUBLISH packets sent (any QoS).
    MqttPublished,
    /// MQTT: QoS 1 and 2 publishes the broker completed (PUBACK, PUBCOMP) with success.
    MqttPublishAcked,
    /// MQTT: QoS 1 and 2 publishes the broker refused (MQTT 5 reason code 0x80 and above).
    MqttPublishRefused,
    /// MQTT: Messages (PUBLISH) received from the broker.
    MqttReceived,
    /// MQTT: Received messages with the DUP flag: a QoS 1 or 2 message sent again.
    MqttReceivedDup,
    /// MQTT: Subscriptions the broker granted (SUBACK).
    MqttSubscribed,
    /// MQTT: Subscriptions the broker refused (SUBACK failure code).
    MqttSubscribeRefused,
    /// MQTT: PINGREQs sent: ping steps, and the keep-alive's own while a user sends nothing.
    MqttPings,
    /// MQTT: MQTT 5 DISCONNECTs from the broker.
    MqttServerDisconnects,
    /// LDAP requests sent (binds, searches, adds, modifies, deletes, unbinds).
    LdapRequests,
    /// LDAP search entries received.
    LdapEntries,
    /// LDAP results `success` (0).
    LdapSuccess,
    /// LDAP results `noSuchObject` (32).
    LdapNoSuchObject,
    /// LDAP results `invalidCredentials` (49).
    LdapInvalidCredentials,
    /// LDAP results `entryAlreadyExists` (68).
    LdapEntryAlreadyExists,
    /// LDAP results `insufficientAccessRights` (50).
    LdapInsufficientAccessRights,
    /// LDAP results `sizeLimitExceeded` (4).
    LdapSizeLimitExceeded,
    /// LDAP results `busy` (51) and `unavailable` (52).
    LdapBusy,
    /// LDAP results `unwillingToPerform` (53).
    LdapUnwillingToPerform,
    /// LDAP results of any other code.
    LdapOtherResults,
    /// LDAP notices of disconnection from the server.
    LdapNotices,
    /// MySQL statements sent (queries and prepared executions).
    MysqlQueries,
    /// MySQL result rows received.
    MysqlRows,
    /// MySQL rows changed, as the server's OK packets say.
    MysqlAffected,
    /// MySQL statements answered with an ERR packet.
    MysqlSqlErrors,
    /// MySQL statements prepared (once per connection and statement).
    MysqlPrepares,
    /// AMQP messages published.
    AmqpPublished,
    /// AMQP publishes the broker confirmed (Basic.Ack, a multiple one counted per message).
    AmqpConfirmed,
    /// AMQP publishes the broker refused (Basic.Nack).
    AmqpNacked,
    /// AMQP mandatory publishes returned unroutable.
    AmqpReturned,
    /// AMQP messages delivered to the users' consumers.
    AmqpDelivered,
    /// AMQP deliveries the users acknowledged.
    AmqpAcked,
    /// AMQP channels the broker closed (an error of the method that caused it).
    AmqpChannelsClosed,
    /// BOSH HTTP requests written (session creation, restarts, stanzas, polls, terminate).
    BoshRequests,
    /// Of them, empty polls (written so that the server holds one request).
    BoshPolls,
    /// BOSH responses read.
    BoshResponses,
    /// Of them, empty (a held poll the server let go).
    BoshEmpty,
    /// File steps run (each operation, whatever its end).
    FileOps,
    /// Bytes read and written by file steps.
    FileBytesRead,
    FileBytesWritten,
    /// File steps failed, by why: the path (or a directory on it) does not exist.
    FileNotFound,
    /// ... permission denied.
    FilePermissionDenied,
    /// ... it exists already (a directory made twice, a link over a file).
    FileAlreadyExists,
    /// ... the file system is full (or the quota reached).
    FileNoSpace,
    /// ... a chunk read or write, or a close, with no file open.
    FileNotOpen,
    /// ... the path, once its variables are in, leaves the scenario's file root (absolute,
    /// or with a `..`): not run.
    FileEscapes,
    /// ... any other error of the file system.
    FileOtherErrors,
    /// `set: {expr}` evaluations, whatever their end.
    ExprEvaluated,
    /// Of them, failed (each ending its session): a result beyond 64 bits.
    ExprOverflow,
    /// ... a `div` or `rem` by zero.
    ExprDivisionByZero,
    /// ... a variable read held no integer (empty, not digits, beyond 64 bits).
    ExprNotInteger,
    // New counters go last: counters travel to agents by index.
}

impl ProtoCounter {
    pub const ALL: [ProtoCounter; 104] = [
        ProtoCounter::XmppSentMessage,
        ProtoCounter::XmppSentPresence,
        ProtoCounter::XmppSentIq,
        ProtoCounter::XmppSentOther,
        ProtoCounter::XmppReceivedMessage,
        ProtoCounter::XmppReceivedPresence,
        ProtoCounter::XmppReceivedIq,
        ProtoCounter::XmppReceivedOther,
        ProtoCounter::XmppChatSent,
        ProtoCounter::XmppChatReceived,
        ProtoCounter::XmppLogins,
        ProtoCounter::XmppErrorReplies,
        ProtoCounter::XmppStreamErrors,
        ProtoCounter::XmppNoDestination,
        ProtoCounter::PgQueries,
        ProtoCounter::PgRows,
        ProtoCounter::PgSqlErrors,
        ProtoCounter::WsMessagesSent,
        ProtoCounter::WsMessagesReceived,
        ProtoCounter::WsPingsReceived,
        ProtoCounter::WsPongsReceived,
        ProtoCounter::WsClosesReceived,
        ProtoCounter::TlsHandshakes,
        ProtoCounter::TlsResumed,
        ProtoCounter::H2GoAway,
        ProtoCounter::H2RstNoError,
        ProtoCounter::H2RstProtocolError,
        ProtoCounter::H2RstInternalError,
        ProtoCounter::H2RstFlowControlError,
        ProtoCounter::H2RstSettingsTimeout,
        ProtoCounter::H2RstStreamClosed,
        ProtoCounter::H2RstFrameSizeError,
        ProtoCounter::H2RstRefusedStream,
        ProtoCounter::H2RstCancel,
        ProtoCounter::H2RstCompressionError,
        ProtoCounter::H2RstConnectError,
        ProtoCounter::H2RstEnhanceYourCalm,
        ProtoCounter::H2RstInadequateSecurity,
        ProtoCounter::H2RstHttp11Required,
        ProtoCounter::H2RstOther,
        ProtoCounter::H2ConnectionErrors,
        ProtoCounter::HttpRedirects,
        ProtoCounter::HttpCookiesStored,
        ProtoCounter::HttpCookiesMalformed,
        ProtoCounter::HttpCookiesRejected,
        ProtoCounter::HttpCookiesEvicted,
        ProtoCounter::HttpAuthChallenges,
        ProtoCounter::HttpAuthFailed,
        ProtoCounter::HttpCompressedResponses,
        ProtoCounter::HttpBodyBytesEncoded,
        ProtoCounter::HttpBodyBytesDecoded,
        ProtoCounter::H2Resent,
        ProtoCounter::MqttConnects,
        ProtoCounter::MqttPublished,
        ProtoCounter::MqttPublishAcked,
        ProtoCounter::MqttPublishRefused,
        ProtoCounter::MqttReceived,
        ProtoCounter::MqttReceivedDup,
        ProtoCounter::MqttSubscribed,
        ProtoCounter::MqttSubscribeRefused,
        ProtoCounter::MqttPings,
        ProtoCounter::MqttServerDisconnects,
        ProtoCounter::LdapRequests,
        ProtoCounter::LdapEntries,
        ProtoCounter::LdapSuccess,
        ProtoCounter::LdapNoSuchObject,
        ProtoCounter::LdapInvalidCredentials,
        ProtoCounter::LdapEntryAlreadyExists,
        ProtoCounter::LdapInsufficientAccessRights,
        ProtoCounter::LdapSizeLimitExceeded,
        ProtoCounter::LdapBusy,
        ProtoCounter::LdapUnwillingToPerform,
        ProtoCounter::LdapOtherResults,
        ProtoCounter::LdapNotices,
        ProtoCounter::MysqlQueries,
        ProtoCounter::MysqlRows,
        ProtoCounter::MysqlAffected,
        ProtoCounter::MysqlSqlErrors,
        ProtoCounter::MysqlPrepares,
        ProtoCounter::AmqpPublished,
        ProtoCounter::AmqpConfirmed,
        ProtoCounter::AmqpNacked,
        ProtoCounter::AmqpReturned,
        ProtoCounter::AmqpDelivered,
        ProtoCounter::AmqpAcked,
        ProtoCounter::AmqpChannelsClosed,
        ProtoCounter::BoshRequests,
        ProtoCounter::BoshPolls,
        ProtoCounter::BoshResponses,
        ProtoCounter::BoshEmpty,
        ProtoCounter::FileOps,
        ProtoCounter::FileBytesRead,
        ProtoCounter::FileBytesWritten,
        ProtoCounter::FileNotFound,
        ProtoCounter::FilePermissionDenied,
        ProtoCounter::FileAlreadyExists,
        ProtoCounter::FileNoSpace,
        ProtoCounter::FileNotOpen,
        ProtoCounter::FileEscapes,
        ProtoCounter::FileOtherErrors,
        ProtoCounter::ExprEvaluated,
        ProtoCounter::ExprOverflow,
        ProtoCounter::ExprDivisionByZero,
        ProtoCounter::ExprNotInteger,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// `(protocol, name)` as written in summary.json: `"xmpp": {"received_message": N}`.
    pub fn name(self) -> (&'static str, &'static str) {
        use ProtoCounter::*;
        match self {
            XmppSentMessage => ("xmpp", "sent_message"),
            XmppSentPresence => ("xmpp", "sent_presence"),
            XmppSentIq => ("xmpp", "sent_iq"),
            XmppSentOther => ("xmpp", "sent_other"),
            XmppReceivedMessage => ("xmpp", "received_message"),
            XmppReceivedPresence => ("xmpp", "received_presence"),
            XmppReceivedIq => ("xmpp", "received_iq"),
            XmppReceivedOther => ("xmpp", "received_other"),
            XmppChatSent => ("xmpp", "chat_sent"),
            XmppChatReceived => ("xmpp", "chat_received"),
            XmppLogins => ("xmpp", "logins"),
            XmppErrorReplies => ("xmpp", "error_replies"),
            XmppStreamErrors => ("xmpp", "stream_errors"),
            XmppNoDestination => ("xmpp", "no_destination"),
            PgQueries => ("pgsql", "queries"),
            PgRows => ("pgsql", "rows"),
            PgSqlErrors => ("pgsql", "sql_errors"),
            WsMessagesSent => ("websocket", "messages_sent"),
            WsMessagesReceived => ("websocket", "messages_received"),
            WsPingsReceived => ("websocket", "pings_received"),
            WsPongsReceived => ("websocket", "pongs_received"),
            WsClosesReceived => ("websocket", "closes_received"),
            TlsHandshakes => ("tls", "handshakes"),
            TlsResumed => ("tls", "resumed"),
            H2GoAway => ("http2", "goaway"),
            H2RstNoError => ("http2", "rst_no_error"),
            H2RstProtocolError => ("http2", "rst_protocol_error"),
            H2RstInternalError => ("http2", "rst_internal_error"),
            H2RstFlowControlError => ("http2", "rst_flow_control_error"),
            H2RstSettingsTimeout => ("http2", "rst_settings_timeout"),
            H2RstStreamClosed => ("http2", "rst_stream_closed"),
            H2RstFrameSizeError => ("http2", "rst_frame_size_error"),
            H2RstRefusedStream => ("http2", "rst_refused_stream"),
            H2RstCancel => ("http2", "rst_cancel"),
            H2RstCompressionError => ("http2", "rst_compression_error"),
            H2RstConnectError => ("http2", "rst_connect_error"),
            H2RstEnhanceYourCalm => ("http2", "rst_enhance_your_calm"),
            H2RstInadequateSecurity => ("http2", "rst_inadequate_security"),
            H2RstHttp11Required => ("http2", "rst_http_1_1_required"),
            H2RstOther => ("http2", "rst_other"),
            H2ConnectionErrors => ("http2", "connection_errors"),
            HttpRedirects => ("http", "redirects_followed"),
            HttpCookiesStored => ("http", "cookies_stored"),
            HttpCookiesMalformed => ("http", "cookies_malformed"),
            HttpCookiesRejected => ("http", "cookies_rejected"),
            HttpCookiesEvicted => ("http", "cookies_evicted"),
            HttpAuthChallenges => ("http", "auth_challenges"),
            HttpAuthFailed => ("http", "auth_failed"),
            HttpCompressedResponses => ("http", "compressed_responses"),
            HttpBodyBytesEncoded => ("http", "body_bytes_encoded"),
            HttpBodyBytesDecoded => ("http", "body_bytes_decoded"),
            H2Resent => ("http2", "resent"),
            MqttConnects => ("mqtt", "connects"),
            MqttPublished => ("mqtt", "published"),
            MqttPublishAcked => ("mqtt", "publish_acked"),
            MqttPublishRefused => ("mqtt", "publish_refused"),
            MqttReceived => ("mqtt", "received"),
            MqttReceivedDup => ("mqtt", "received_dup"),
            MqttSubscribed => ("mqtt", "subscribed"),
            MqttSubscribeRefused => ("mqtt", "subscribe_refused"),
            MqttPings => ("mqtt", "pings"),
            MqttServerDisconnects => ("mqtt", "server_disconnects"),
            LdapRequests => ("ldap", "requests"),
            LdapEntries => ("ldap", "entries"),
            LdapSuccess => ("ldap", "success"),
            LdapNoSuchObject => ("ldap", "no_such_object"),
            LdapInvalidCredentials => ("ldap", "invalid_credentials"),
            LdapEntryAlreadyExists => ("ldap", "entry_already_exists"),
            LdapInsufficientAccessRights => ("ldap", "insufficient_access_rights"),
            LdapSizeLimitExceeded => ("ldap", "size_limit_exceeded"),
            LdapBusy => ("ldap", "busy"),
            LdapUnwillingToPerform => ("ldap", "unwilling_to_perform"),
            LdapOtherResults => ("ldap", "other_results"),
            LdapNotices => ("ldap", "notices"),
            MysqlQueries => ("mysql", "queries"),
            MysqlRows => ("mysql", "rows"),
            MysqlAffected => ("mysql", "affected"),
            MysqlSqlErrors => ("mysql", "sql_errors"),
            MysqlPrepares => ("mysql", "prepares"),
            AmqpPublished => ("amqp", "published"),
            AmqpConfirmed => ("amqp", "confirmed"),
            AmqpNacked => ("amqp", "nacked"),
            AmqpReturned => ("amqp", "returned"),
            AmqpDelivered => ("amqp", "delivered"),
            AmqpAcked => ("amqp", "acked"),
            AmqpChannelsClosed => ("amqp", "channels_closed"),
            BoshRequests => ("xmpp", "bosh_requests"),
            BoshPolls => ("xmpp", "bosh_polls"),
            BoshResponses => ("xmpp", "bosh_responses"),
            BoshEmpty => ("xmpp", "bosh_empty"),
            FileOps => ("file", "ops"),
            FileBytesRead => ("file", "bytes_read"),
            FileBytesWritten => ("file", "bytes_written"),
            FileNotFound => ("file", "not_found"),
            FilePermissionDenied => ("file", "permission_denied"),
            FileAlreadyExists => ("file", "already_exists"),
            FileNoSpace => ("file", "no_space"),
            FileNotOpen => ("file", "not_open"),
            FileEscapes => ("file", "escapes"),
            FileOtherErrors => ("file", "other_errors"),
            ExprEvaluated => ("expr", "evaluated"),
            ExprOverflow => ("expr", "overflow"),
            ExprDivisionByZero => ("expr", "division_by_zero"),
            ExprNotInteger => ("expr", "not_integer"),
        }
    }

    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// The counter of an LDAP result code.
    pub fn ldap_result(code: u32) -> ProtoCounter {
        use ProtoCounter::*;
        match code {
            0 => LdapSuccess,
            4 => LdapSizeLimitExceeded,
            32 => LdapNoSuchObject,
            49 => LdapInvalidCredentials,
            50 => LdapInsufficientAccessRights,
            51 | 52 => LdapBusy,
            53 => LdapUnwillingToPerform,
            68 => LdapEntryAlreadyExists,
            _ => LdapOtherResults,
        }
    }

    /// The counter of an RST_STREAM error code.
    pub fn h2_rst(code: u32) -> ProtoCounter {
        use ProtoCounter::*;
        const BY_CODE: [ProtoCounter; 14] = [
            H2RstNoError,
            H2RstProtocolError,
            H2RstInternalError,
            H2RstFlowControlError,
            H2RstSettingsTimeout,
            H2RstStreamClosed,
            H2RstFrameSizeError,
            H2RstRefusedStream,
            H2RstCancel,
            H2RstCompressionError,
            H2RstConnectError,
            H2RstEnhanceYourCalm,
            H2RstInadequateSecurity,
            H2RstHttp11Required,
        ];
        BY_CODE.get(code as usize).copied().unwrap_or(H2RstOther)
    }
}

mod libc_errno {
    pub const EPIPE: i32 = 32;
    pub const EMFILE: i32 = 24;
    pub const ENFILE: i32 = 23;
    pub const EADDRINUSE: i32 = 98;
    pub const EADDRNOTAVAIL: i32 = 99;
    pub const ENOBUFS: i32 = 105;
    pub const ECONNRESET: i32 = 104;
    pub const ETIMEDOUT: i32 = 110;
    pub const ECONNREFUSED: i32 = 111;
}

/// How new requests come about.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadModel {
    /// A fixed population of `users`, each looping requests (closed model). With `per_user`
    /// each user does that many requests and then leaves (the C x N run of seed 002).
    Closed {
        users: u32,
        per_user: Option<u64>,
        think: Option<Distribution>,
    },
    /// `rate` requests per second in total spread evenly over `connections` keep-alive users;
    /// each request has an intended send time on a fixed schedule, and latency is measured from
    /// it (coordinated omission corrected, as wrk2 does).
    Rate { connections: u32, rate: f64 },
    /// Users arrive at `rate` per second (Poisson or constant), each does `per_user` requests
    /// with `think` between them, then leaves (open model).
    Open {
        rate: f64,
        process: ArrivalProcess,
        per_user: u64,
        think: Option<Distribution>,
        max_users: Option<u64>,
    },
    /// A scenario's load: `users` closed users running sessions back to back (see
    /// [`session::Workload::populations`]) and/or open arrival `phases`, one after another, each
    /// arriving user running one session. Needs [`Plan::workload`].
    Sessions {
        users: u32,
        phases: Vec<session::ArrivalPhase>,
    },
}

impl LoadModel {
    /// The name reported in summaries: `closed`, `rate` or `open`.
    pub fn name(&self) -> &'static str {
        match self {
            LoadModel::Closed { .. } => "closed",
            LoadModel::Rate { .. } => "rate",
            LoadModel::Open { .. } => "open",
            LoadModel::Sessions { .. } => "sessions",
        }
    }
}

/// How arrival instants are spaced in an open model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalProcess {
    /// Exponential inter-arrival times (a Poisson process).
    Poisson,
    /// Evenly spaced arrivals.
    Constant,
}

/// Socket options applied to every client connection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SocketOptions {
    /// SO_SNDBUF in bytes (the kernel doubles it); `None` leaves the kernel's autotuning.
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes; `None` leaves the kernel's autotuning.
    pub rcvbuf: Option<u32>,
    /// TCP_NODELAY (on by default: a load generator must not batch small requests).
    pub nodelay: bool,
    /// Local source addresses to spread connections over (bound before connect with
    /// IP_BIND_ADDRESS_NO_PORT so each address keeps its own ~28k ephemeral ports per target).
    pub bind: Vec<std::net::IpAddr>,
}

/// A TLS protocol version, for `--tls-min` / `--tls-max`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum TlsVersion {
    #[serde(rename = "1.2")]
    Tls12,
    #[serde(rename = "1.3")]
    Tls13,
}

impl TlsVersion {
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

/// TLS on every connection of a run (`https://`, `wss://`, `tls:` in a scenario). Files are
/// carried as their bytes, read once where the run was described: an agent never opens a path.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsOptions {
    /// The name sent as SNI and checked against the certificate (the URL's host). An IP address
    /// is checked against the certificate's IP SANs and sends no SNI.
    pub server_name: String,
    /// ALPN protocols offered, in order (e.g. `h2`, `http/1.1`); empty offers none.
    pub alpn: Vec<Vec<u8>>,
    /// Accept any certificate (`-k/--insecure`): the handshake is still done and timed.
    pub insecure: bool,
    /// Trusted CA certificates (PEM) instead of the system's store (`--cacert`).
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate chain and key (PEM) for mutual TLS (`--cert`, `--key`).
    pub client_cert_pem: Option<Vec<u8>>,
    pub client_key_pem: Option<Vec<u8>>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// Resume sessions (tickets / session ids) on reconnects; off: a full handshake each time.
    pub resume: bool,
    /// How TLS starts on a fresh connection.
    pub upgrade: TlsUpgrade,
}

/// How TLS starts: at once, or after the protocol's own plain-text exchange.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TlsUpgrade {
    /// The handshake is the first thing on the connection (https, wss, XMPP direct TLS).
    #[default]
    Direct,
    /// XMPP STARTTLS: open the stream to `domain`, ask for TLS, then log in over it.
    XmppStartTls { domain: String },
    /// PostgreSQL SSLRequest; with `required` false (`sslmode=prefer`) a server that says no is
    /// used in plain text.
    PgSslRequest { required: bool },
    /// MySQL/MariaDB: after the server's greeting the client asks for TLS (SSLRequest), and
    /// logs in over it. The protocol's link drives the exchange; the handshake starts when it
    /// says.
    MysqlSslRequest,
    /// LDAP's StartTLS extended operation (RFC 4511 §4.14) on the plain port, then the whole
    /// connection over TLS.
    LdapStartTls,
}

impl TlsOptions {
    /// TLS to `server_name` with the defaults: system CAs, TLS 1.2 to 1.3, resumption on.
    pub fn new(server_name: impl Into<String>) -> TlsOptions {
        TlsOptions {
            server_name: server_name.into(),
            alpn: Vec::new(),
            insecure: false,
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            min_version: TlsVersion::Tls12,
            max_version: TlsVersion::Tls13,
            resume: true,
            upgrade: TlsUpgrade::Direct,
        }
    }
}

/// One HTTP request, as the user described it; the protocol crate encodes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    pub method: String,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Value of the Host header.
    pub host: String,
    /// Extra headers in the order given (a user-given Host or User-Agent replaces ours).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// When a run ends (the first condition met).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StopCondition {
    /// Wall-clock length of the load.
    pub duration: Option<Duration>,
    /// Total requests over all workers.
    pub requests: Option<u64>,
}

/// An immutable, validated description of one run. Built by the CLI (or a scenario compiler);
/// executed by the engine.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where to connect.
    pub target: SocketAddr,
    /// A human name of the target for messages, e.g. the URL.
    pub target_name: String,
    pub request: HttpRequest,
    pub model: LoadModel,
    /// How the closed population comes and goes (`--ramp-up`, a scenario's `stages:`); empty:
    /// every closed user starts at once and stays. Applies to [`LoadModel::Closed`] and the
    /// closed users of [`LoadModel::Sessions`], whose `users` must be the stages' peak.
    pub ramp: Vec<RampStage>,
    pub stop: StopCondition,
    /// Worker threads (one event loop each).
    pub threads: usize,
    /// Length of a reporting interval.
    pub interval: Duration,
    pub connect_timeout: Duration,
    /// Response timeout, from the moment the request is written.
    pub timeout: Duration,
    /// The statuses a reply may have (`--expect-status`, URL runs only). Empty: no expectation,
    /// and a 4xx or 5xx counts as `http_4xx` / `http_5xx`. Not empty: any other status counts as
    /// `unexpected_status` (instead of `http_4xx`/`http_5xx`) and an expected one is never an
    /// error, whatever its class.
    pub expect_status: StatusSet,
    /// Keep connections open between requests (HTTP keep-alive).
    pub keepalive: bool,
    /// Requests written back to back on a connection before waiting for the replies.
    pub pipeline: u32,
    pub socket: SocketOptions,
    /// Sessions to run (scenario files); `None` repeats `request`. With a workload, `request`
    /// gives only the Host header and the target.
    pub workload: Option<std::sync::Arc<session::Workload>>,
    /// This process's share of a distributed run (agent `index` of `count`); one process alone
    /// is segment 0 of 1.
    pub segment: Segment,
    /// Wall-clock instant the load starts at (a distributed run starts every agent at once);
    /// `None` starts at once.
    pub start_at: Option<std::time::SystemTime>,
    /// TLS on every connection (`None`: plain TCP). Whatever the protocol, it never sees which.
    pub tls: Option<std::sync::Arc<TlsOptions>>,
    /// Speak HTTP/2 (over TLS by ALPN, or h2c with prior knowledge on plain TCP); `None` is
    /// HTTP/1.1.
    pub http2: Option<Http2Options>,
    /// How each HTTP user (HTTP/1.1 or HTTP/2) behaves beyond sending its requests: cookies,
    /// redirects, credentials, compression.
    pub browser: BrowserOptions,
    /// Timers (paced sends at `--rate`, think times, a session's waits) due within this of a
    /// worker's wake-up fire in it, early, instead of each waking the worker on its own
    /// (`--timer-slack`). A request sent early has its latency measured from when it went;
    /// the schedule itself never moves, so a rate is held exactly.
    pub timer_slack: Duration,
}

/// `--timer-slack`'s default: about wrk2's millisecond timers. At `--rate 10000` it cut the
/// generator's CPU per response from 3.1x the closed model's to about 1.5x (bench/rate-cost.sh).
pub const DEFAULT_TIMER_SLACK: Duration = Duration::from_millis(1);
/// The most `--timer-slack` may be: beyond it a "constant" rate would be bursts.
pub const MAX_TIMER_SLACK: Duration = Duration::from_millis(100);

/// Most redirects a request may follow (`--follow`, `follow:`); browsers stop at 20.
pub const MAX_FOLLOW: u32 = 20;
/// One stage of a closed population's ramp (k6's ramping-vus): the number of users alive moves
/// linearly from where the previous stage left it (0 before the first) to `users` over
/// `duration`; after the last stage it stays there. A user above the number leaves when it is
/// next free to (URL runs: before its next request; scenarios: when its session ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RampStage {
    pub duration: Duration,
    pub users: u32,
}

impl RampStage {
    /// The most users any stage asks for.
    pub fn peak(stages: &[RampStage]) -> u32 {
        stages.iter().map(|s| s.users).max().unwrap_or(0)
    }

    /// The stages' total length.
    pub fn total(stages: &[RampStage]) -> Duration {
        stages.iter().map(|s| s.duration).sum()
    }
}

/// What an HTTP user does besides sending requests, as a browser would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserOptions {
    /// A cookie jar per user (on by default, as in Tsung and k6; `--no-cookies`).
    pub cookies: bool,
    /// Redirects followed per request at most (0: none, as wrk).
    pub follow: u32,
    /// Credentials for every request of a URL run (`-a`, URL userinfo). Scenario requests
    /// carry their own ([`session::RequestOp::auth`]).
    pub credentials: Option<Credentials>,
    /// Ask for compressed bodies (`Accept-Encoding: gzip, br`) and count their sizes as sent
    /// and as decoded.
    pub compressed: bool,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        BrowserOptions {
            cookies: true,
            follow: 0,
            credentials: None,
            compressed: false,
        }
    }
}

/// A user name and password, and how to present them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub scheme: AuthScheme,
    pub user: String,
    pub password: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthScheme {
    /// RFC 7617: sent with every request.
    Basic,
    /// RFC 7616: the server's 401 challenge is answered, then every later request answers it.
    Digest,
}

impl AuthScheme {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthScheme::Basic => "basic",
            AuthScheme::Digest => "digest",
        }
    }
}

/// HTTP/2 settings of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2Options {
    /// Requests in flight at once on each connection (`--streams`), never above the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub streams: u32,
}

/// An execution segment: agent `index` of `count`, each running the same number of worker
/// threads. Worker `w` of agent `a` is global worker slot `a * threads + w` of
/// `count * threads`, and every split the engine makes between workers (users, arrivals, rates,
/// request budgets, user ids, source addresses) is made over these global slots. The segments
/// of all agents therefore add up exactly to the whole run, and user ids never collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub index: u32,
    pub count: u32,
}

impl Default for Segment {
    fn default() -> Self {
        Segment { index: 0, count: 1 }
    }
}

impl Plan {
    /// Check the plan's internal consistency; the CLI validates flags first, this is the last
    /// line of defence for programmatic callers.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.threads == 0 {
            return Err(PlanError("threads must be at least 1".into()));
        }
        if self.pipeline == 0 {
            return Err(PlanError("pipeline depth must be at least 1".into()));
        }
        if self.segment.count == 0 || self.segment.index >= self.segment.count {
            return Err(PlanError(format!(
                "segment {} of {} does not exist",
                self.segment.index, self.segment.count
            )));
        }
        if let Some(t) = &self.tls {
            if t.min_version > t.max_version {
                return Err(PlanError(format!(
                    "the lowest TLS version ({}) is above the highest ({})",
                    t.min_version.name(),
                    t.max_version.name()
                )));
            }
            if t.client_cert_pem.is_some() != t.client_key_pem.is_some() {
                return Err(PlanError(
                    "a client certificate needs its key, and a key its certificate".into(),
                ));
            }
        }
        if let Some(h) = &self.http2 {
            if h.streams == 0 {
                return Err(PlanError("streams must be at least 1".into()));
            }
            if self.pipeline > 1 {
                return Err(PlanError(
                    "HTTP/2 has no pipelining: use --streams for requests in flight".into(),
                ));
            }
            if !self.keepalive {
                return Err(PlanError(
                    "HTTP/2 keeps its connections: --no-keepalive does not apply".into(),
                ));
            }
            if let Some(w) = &self.workload {
                if w.link != crate::session::LinkSpec::Plain {
                    return Err(PlanError("HTTP/2 carries HTTP requests only".into()));
                }
                if h.streams != 1 {
                    return Err(PlanError(
                        "a scenario's users send their own requests: --streams does not apply"
                            .into(),
                    ));
                }
            }
            let streams_fit = matches!(
                self.model,
                LoadModel::Closed { think: None, .. } | LoadModel::Rate { .. }
            );
            if h.streams > 1 && !streams_fit {
                return Err(PlanError(
                    "--streams above 1 needs -c alone or with --rate (with --think or \
                     --arrival-rate each connection has one stream)"
                        .into(),
                ));
            }
        }
        if self.interval < Duration::from_millis(10) {
            return Err(PlanError("interval must be at least 10ms".into()));
        }
        if self.timer_slack > MAX_TIMER_SLACK {
            return Err(PlanError(format!(
                "timer slack must be at most {}ms",
                MAX_TIMER_SLACK.as_millis()
            )));
        }
        match &self.model {
            LoadModel::Closed { users, .. } if *users == 0 => {
                return Err(PlanError("connections must be at least 1".into()))
            }
            LoadModel::Rate { connections, rate } => {
                if *connections == 0 {
                    return Err(PlanError("connections must be at least 1".into()));
                }
                if !(rate.is_finite() && *rate > 0.0) {
                    return Err(PlanError("rate must be a positive number".into()));
                }
                if self.pipeline > 1 {
                    return Err(PlanError("--rate and --pipeline cannot be combined".into()));
                }
            }
            LoadModel::Open { rate, per_user, .. } => {
                if !(rate.is_finite() && *rate > 0.0) {
                    return Err(PlanError("arrival rate must be a positive number".into()));
                }
                if *per_user == 0 {
                    return Err(PlanError("per-user must be at least 1".into()));
                }
            }
            LoadModel::Sessions { users, phases } => {
                let Some(w) = &self.workload else {
                    return Err(PlanError("a sessions load needs a workload".into()));
                };
                if w.sessions.is_empty() {
                    return Err(PlanError("the workload has no sessions".into()));
                }
                if *users == 0 && phases.is_empty() && w.once.is_empty() {
                    return Err(PlanError(
                        "the load has neither users, phases nor once users".into(),
                    ));
                }
                for p in phases {
                    if !(p.from.is_finite() && p.to.is_finite() && p.from >= 0.0 && p.to >= 0.0)
                        || p.peak() <= 0.0
                    {
                        return Err(PlanError("a phase's arrival rate must be positive".into()));
                    }
                }
            }
            _ => {}
        }
        self.validate_ramp()?;
        if self.workload.is_some() && !self.expect_status.is_empty() {
            return Err(PlanError(
                "--expect-status applies to URL runs; a scenario checks statuses with `match` \
                 steps"
                    .into(),
            ));
        }
        if self.workload.is_some() && !matches!(self.model, LoadModel::Sessions { .. }) {
            return Err(PlanError(
                "a workload runs only under a sessions load".into(),
            ));
        }
        let open_ended = match &self.model {
            LoadModel::Closed { per_user, .. } => per_user.is_none(),
            LoadModel::Sessions { users, .. } => *users > 0,
            _ => true,
        };
        if open_ended && self.stop.duration.is_none() && self.stop.requests.is_none() {
            let max_users = matches!(
                self.model,
                LoadModel::Open {
                    max_users: Some(_),
                    ..
                }
            );
            if !max_users {
                return Err(PlanError(
                    "the run has no end: give a duration or a request count".into(),
                ));
            }
        }
        Ok(())
    }
}

impl Plan {
    fn validate_ramp(&self) -> Result<(), PlanError> {
        if self.ramp.is_empty() {
            return Ok(());
        }
        let users = match &self.model {
            LoadModel::Closed { users, .. } => *users,
            LoadModel::Sessions { users, .. } if *users > 0 => *users,
            _ => {
                return Err(PlanError(
                    "a ramp (--ramp-up, stages) needs a closed population (-c users, or a \
                     scenario's users)"
                        .into(),
                ))
            }
        };
        if self.ramp.len() > MAX_RAMP_STAGES {
            return Err(PlanError(format!(
                "{} ramp stages: at most {MAX_RAMP_STAGES}",
                self.ramp.len()
            )));
        }
        let peak = RampStage::peak(&self.ramp);
        if peak != users {
            return Err(PlanError(format!(
                "the ramp's stages peak at {peak} users but the population has {users}"
            )));
        }
        Ok(())
    }
}

/// Stages a ramp may have: each costs the engine a few comparisons when it looks for the next
/// user to start or stop.
pub const MAX_RAMP_STAGES: usize = 1000;

/// A plan that cannot run, with a message a person can act on.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kind_indexes_are_dense_and_names_unique() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        let mut names: Vec<_> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::COUNT);
    }

    #[test]
    fn io_errors_classify() {
        let e = std::io::Error::from_raw_os_error(111);
        assert_eq!(ErrorKind::from_io(&e, true), ErrorKind::Refused);
        let e = std::io::Error::from_raw_os_error(104);
        assert_eq!(ErrorKind::from_io(&e, false), ErrorKind::Reset);
        let e = std::io::Error::from_raw_os_error(99);
        assert_eq!(ErrorKind::from_io(&e, true), ErrorKind::LocalResource);
        let e = std::io::Error::from_raw_os_error(110);
        assert_eq!(ErrorKind::from_io(&e, true), ErrorKind::ConnectTimeout);
    }
}
