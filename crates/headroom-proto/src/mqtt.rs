//! MQTT 3.1.1 and MQTT 5 client, sans I/O.
//!
//! What a load generator needs to play many MQTT clients: connect (anonymous or with a user
//! name and password, with or without a will), publish at QoS 0, 1 and 2, subscribe and
//! unsubscribe, ping, and take what the broker sends, answering its QoS 1 and 2 flows itself.
//! Two layers:
//!
//! - Encoders ([`encode_connect`], [`encode_publish`], [`encode_publish_parts`],
//!   [`encode_subscribe`], [`encode_unsubscribe`], [`encode_pingreq`], [`encode_disconnect`],
//!   and the acknowledgements): each *appends* one packet to a caller's `Vec<u8>` and allocates
//!   nothing beyond growing it, so a connection's write buffer is reused from packet to packet.
//! - [`Client`]: one per connection. It cuts the broker's byte stream (split anywhere) into
//!   packets and turns them into [`Event`]s, at most one per call, writing the answers the
//!   protocol needs into the caller's buffer.
//!
//! # How the engine uses it
//!
//! ```
//! use headroom_proto::mqtt::{encode_publish_parts, encode_subscribe, Client, Connect, Event, QoS, Version};
//!
//! let mut out = Vec::new(); // the connection's write buffer, reused
//! let c = Connect { username: Some("headroom"), password: Some(b"headroom"), ..Connect::new(Version::V5, "user-1") };
//! let mut client = Client::connect(&c, &mut out); // appends the CONNECT
//! // ... send `out`, clear it; then for every chunk read from the socket:
//! # let chunk: &[u8] = b"\x20\x03\x00\x00\x00";
//! let mut rest = chunk;
//! loop {
//!     let (used, event) = client.decode(rest, &mut out).expect("count the error, close");
//!     match event {
//!         Event::NeedMore => break, // all of `rest` consumed
//!         Event::ConnAck { session_present: _ } => {
//!             let id = client.next_packet_id();
//!             encode_subscribe(&mut out, Version::V5, id, &[("hr/+/x", QoS::AtLeastOnce)]);
//!         }
//!         Event::Message { topic: _, payload: _, qos: _, .. } => {
//!             // count it; read the timestamp the sender put at the payload's start
//!         }
//!         Event::PubAck { packet_id: _, reason: _ } => { /* our QoS 1 publish is done */ }
//!         _ => {}
//!     }
//!     rest = &rest[used..];
//! }
//! // publishing: a timestamp, then filler up to the message size, written straight into `out`
//! let id = client.next_packet_id();
//! encode_publish_parts(&mut out, Version::V5, "hr/1/x", QoS::AtLeastOnce, false, id, b"ts", b'.', 100);
//! // then send `out` if not empty
//! ```
//!
//! # Events and the QoS flows
//!
//! [`Event::ConnAck`] once (a refusal is `Err(`[`MqttError::Refused`]`(code))`: the 3.1.1
//! return code, e.g. 5 not authorized, or the MQTT 5 reason code, e.g. 0x87; mosquitto refuses
//! a wrong password with those two). Then, in any order:
//!
//! - [`Event::Message`] for every PUBLISH the broker sends. QoS 1: the client has appended the
//!   PUBACK to `out`. QoS 2: the client has appended the PUBREC and holds the packet id until
//!   the broker's PUBREL, which it answers with PUBCOMP without an event. A PUBLISH with an id
//!   still held (the broker retransmitting, DUP or not) is answered with PUBREC again and
//!   **not** reported: a QoS 2 message is reported exactly once ("method B" of MQTT 3.1.1
//!   4.3.3 / MQTT 5 4.3.3, delivery at the PUBLISH). A PUBREL for an id not held is still
//!   answered with PUBCOMP, as both versions require (MQTT 5: reason 0x92, Packet Identifier
//!   not found); it is not an error.
//! - [`Event::PubAck`] when our QoS 1 PUBLISH is acknowledged; [`Event::PubComp`] when our QoS
//!   2 PUBLISH is complete: the client answered the broker's PUBREC with PUBREL itself, and
//!   reports the PUBCOMP. An MQTT 5 PUBREC with a failure reason (>= 0x80) ends the exchange:
//!   no PUBREL, and it is reported as `PubComp` with that reason. Acks are reported whatever
//!   their id: the engine matches them to what it sent.
//! - [`Event::SubAck`] (the first return code, and how many filters failed), [`Event::UnsubAck`]
//!   (MQTT 5: how many failed), [`Event::PingResp`], and MQTT 5's [`Event::Disconnect`] from the
//!   server (with its reason code; after it any packet is [`MqttError::Unexpected`]).
//!
//! An MQTT 5 PUBREC's success reason (e.g. 0x10 No matching subscribers) is not reported: the
//! event is the PUBCOMP's. Keep alive is the engine's: it sends [`encode_pingreq`] when it has
//! sent nothing for the keep alive interval (the server's, [`ServerLimits::server_keep_alive`],
//! when it gave one), and counts the [`Event::PingResp`].
//!
//! Packet ids: [`Client::next_packet_id`] counts 1 to 65535 and round again, skipping ids still
//! in flight (handed out and not yet acknowledged by PUBACK, PUBCOMP, a failed PUBREC, SUBACK
//! or UNSUBACK). The client does not enforce the server's Receive Maximum (see
//! [`Client::server_limits`]): how many publishes to keep in flight is the engine's choice.
//!
//! # MQTT 5
//!
//! Properties are parsed and checked (each identifier's type, allowed in its packet, inside
//! the packet), then skipped, except what the client needs: the CONNACK's limits (Receive
//! Maximum, Maximum QoS, Retain Available, Maximum Packet Size, Topic Alias Maximum, Server Keep
//! Alive, wildcard and shared subscriptions available) kept in [`ServerLimits`], reason codes
//! (reported in the events), and the Topic Alias of an incoming PUBLISH. Strings in properties
//! are not checked for UTF-8, nor topics: they are reported as bytes.
//!
//! Topic aliases from the server: the client accepts aliases 1 to the Topic Alias Maximum it
//! announced in its CONNECT ([`Connect::topic_alias_maximum`], 0 by default: none announced,
//! so any alias from the server is [`MqttError::TopicAlias`]; at most [`MAX_TOPIC_ALIASES`]).
//! A PUBLISH with a topic and an alias sets the alias (replacing its topic); one with an empty
//! topic and an alias uses it (an alias never set is an error). The table holds at most
//! [`MAX_ALIAS_BYTES`] of topics in all (beyond: [`MqttError::TopicAlias`]). The client sends
//! no aliases itself.
//!
//! The CONNECT says Session Expiry Interval (when not 0), Topic Alias Maximum (when not 0),
//! Maximum Packet Size (when [`Connect::max_packet_size`] is not 0: the broker then drops
//! larger messages for this client instead of sending them); its will has no properties.
//! SUBSCRIBE options are the QoS alone (No Local, Retain As Published and Retain Handling at
//! their defaults).
//!
//! # Errors
//!
//! Anything the connection cannot go on from is an `Err(`[`MqttError`]`)`, a fixed-size `Copy`
//! value counted by kind without allocating: a remaining length of more than 4 bytes
//! ([`MqttError::BadLength`]), a packet over the limit ([`MqttError::TooLong`]), a packet whose
//! body does not parse or whose reserved flags are wrong ([`MqttError::Malformed`], with the
//! packet type), a packet that makes no sense where it comes (a second CONNACK, anything before
//! the CONNACK, a packet only clients send, AUTH, a 3.1.1 DISCONNECT: [`MqttError::Unexpected`]),
//! a refused CONNECT, a topic alias out of range, and a connection closed mid-packet or before
//! the CONNACK ([`MqttError::Incomplete`], from [`Client::eof`]). After an `Err` the connection
//! must be closed: every later `decode` returns the same error.
//!
//! # Memory and bounds
//!
//! The client owns no read buffer: a packet that arrives whole inside one chunk is decoded in
//! place from the caller's slice, and the event borrows from it. Only a packet split across
//! reads is copied into one per-connection `Vec`, allocated at the first split, reused, and
//! freed again after a packet that grew it beyond [`RETAINED_CAPACITY`]
//! ([`Client::set_retained_capacity`]). Every packet is refused above [`DEFAULT_MAX_PACKET`]
//! bytes, fixed header included ([`MqttError::TooLong`]; [`Client::set_max_packet`]), before
//! any of its body is buffered.
//!
//! The packet ids of incoming QoS 2 messages awaiting PUBREL, and those of our packets in
//! flight, are two sets of at most 65,535 ids each: a plain `Vec<u16>` while a set holds at most
//! [`SMALL_ID_SET`] ids (128 bytes), then an 8 KiB bitset for the rest of the connection.
//!
//! An idle connected [`Client`] is `size_of::<Client>()` = 224 bytes (on 64-bit targets) and no
//! heap ([`Client::heap_bytes`], measured against mosquitto in `tests/mqtt_server.rs`); after
//! 1,200 publish/receive rounds at QoS 1 (QoS 2), 8 (16) bytes of id sets more. The split
//! buffer comes on top while packets arrive split: at most [`RETAINED_CAPACITY`] kept between
//! packets.
//!
//! # Robustness
//!
//! No input panics the client (the `fuzz/` target `mqtt_packets` checks this, and that any
//! split of a stream gives the same events and answers as the stream in one piece): lengths are
//! checked before use, all slicing goes through `get`, property loops are bounded by the packet
//! size, every count is bounded.
//!
//! # Panics
//!
//! The encoders panic on a string or binary field (topic, filter, client id, user name,
//! password, will payload) over [`MAX_STRING_LEN`] bytes, or a packet over 256 MiB: both are the
//! protocol's own limits, and the engine checks its scenario's values once when it loads them.
//!
//! # Not supported
//!
//! MQTT 3.1 (protocol level 3), enhanced authentication (AUTH), topic aliases from the client,
//! will and publish properties, subscription options beyond the QoS, subscription identifiers,
//! the Assigned Client Identifier (not kept), validating UTF-8 in topics and strings, and
//! resending our unacknowledged publishes after a reconnect (a new [`Client`] starts afresh).

mod client;
mod encode;
mod framer;
#[cfg(test)]
mod tests;

pub use client::{Client, SMALL_ID_SET};
pub use encode::{
    encode_connect, encode_disconnect, encode_disconnect_reason, encode_pingreq, encode_puback,
    encode_pubcomp, encode_publish, encode_publish_parts, encode_pubrec, encode_pubrel,
    encode_subscribe, encode_unsubscribe, MAX_REMAINING_LEN,
};

/// Largest packet accepted from the server by default, fixed header included.
pub const DEFAULT_MAX_PACKET: u32 = 1 << 20;
/// A split-packet buffer whose capacity grew beyond this is freed once its packet has been
/// returned, instead of being kept for the next split packet.
pub const RETAINED_CAPACITY: usize = 16 * 1024;
/// Longest string or binary field: its length is two bytes.
pub const MAX_STRING_LEN: usize = u16::MAX as usize;
/// Most topic aliases a client accepts from the server (what it announces is capped to this).
pub const MAX_TOPIC_ALIASES: u16 = 64;
/// Most bytes of topics the alias table holds in all.
pub const MAX_ALIAS_BYTES: usize = 64 * 1024;

/// The protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// MQTT 3.1.1, protocol level 4.
    V311,
    /// MQTT 5.0, protocol level 5.
    V5,
}

impl Version {
    /// The protocol level of the CONNECT: 4 or 5.
    pub fn level(self) -> u8 {
        match self {
            Version::V311 => 4,
            Version::V5 => 5,
        }
    }
}

/// Quality of service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum QoS {
    AtMostOnce = 0,
    AtLeastOnce = 1,
    ExactlyOnce = 2,
}

impl QoS {
    /// The QoS of a number (0, 1, 2); `None` for 3 and above.
    pub fn from_bits(b: u8) -> Option<QoS> {
        match b {
            0 => Some(QoS::AtMostOnce),
            1 => Some(QoS::AtLeastOnce),
            2 => Some(QoS::ExactlyOnce),
            _ => None,
        }
    }
}

/// The will: what the broker publishes when the connection ends without a DISCONNECT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Will<'a> {
    pub topic: &'a str,
    pub payload: &'a [u8],
    pub qos: QoS,
    pub retain: bool,
}

/// What a CONNECT says. [`Connect::new`] gives the usual defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connect<'a> {
    pub version: Version,
    /// Empty: the broker assigns one (MQTT 3.1.1 only with `clean_start`).
    pub client_id: &'a str,
    /// MQTT 3.1.1's Clean Session, MQTT 5's Clean Start.
    pub clean_start: bool,
    /// Seconds; 0: no keep alive.
    pub keep_alive: u16,
    pub username: Option<&'a str>,
    pub password: Option<&'a [u8]>,
    pub will: Option<Will<'a>>,
    /// MQTT 5 only (ignored for 3.1.1): Session Expiry Interval in seconds (0: the session
    /// ends with the connection; 0xFFFFFFFF: never).
    pub session_expiry: u32,
    /// MQTT 5 only: the Topic Alias Maximum announced (0: none), capped to
    /// [`MAX_TOPIC_ALIASES`]. Use [`Client::connect`] so the client accepts the same.
    pub topic_alias_maximum: u16,
    /// MQTT 5 only: the Maximum Packet Size announced (0: none; the broker then sends packets
    /// of any size, and those over the client's limit are [`MqttError::TooLong`]).
    /// [`Client::connect`] sets the client's limit to it.
    pub max_packet_size: u32,
}

impl<'a> Connect<'a> {
    /// Clean start, keep alive 60 s, no credentials, no will, no MQTT 5 properties.
    pub fn new(version: Version, client_id: &'a str) -> Connect<'a> {
        Connect {
            version,
            client_id,
            clean_start: true,
            keep_alive: 60,
            username: None,
            password: None,
            will: None,
            session_expiry: 0,
            topic_alias_maximum: 0,
            max_packet_size: 0,
        }
    }
}

/// What the server's CONNACK said about its limits (MQTT 5 properties). Before the CONNACK
/// and in MQTT 3.1.1, the protocol's defaults: nothing limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// How many QoS 1/2 publishes the server takes in flight from us (default 65,535).
    pub receive_maximum: u16,
    pub maximum_qos: QoS,
    pub retain_available: bool,
    /// Largest packet the server accepts (`None`: the protocol's limit).
    pub maximum_packet_size: Option<u32>,
    /// Topic aliases the server accepts from us (the client sends none).
    pub topic_alias_maximum: u16,
    /// The keep alive the server wants instead of ours (seconds), if it said so.
    pub server_keep_alive: Option<u16>,
    pub wildcard_subscriptions: bool,
    pub shared_subscriptions: bool,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            receive_maximum: u16::MAX,
            maximum_qos: QoS::ExactlyOnce,
            retain_available: true,
            maximum_packet_size: None,
            topic_alias_maximum: 0,
            server_keep_alive: None,
            wildcard_subscriptions: true,
            shared_subscriptions: true,
        }
    }
}

/// What one [`Client::decode`] call produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// All the input was used; more bytes are needed for the next event.
    NeedMore,
    /// The broker accepted the connection.
    ConnAck {
        session_present: bool,
    },
    /// An incoming PUBLISH (a QoS 2 one is reported once, at the PUBLISH). `topic` is the
    /// alias's topic when the PUBLISH used one.
    Message {
        topic: &'a [u8],
        payload: &'a [u8],
        qos: QoS,
        retain: bool,
        dup: bool,
    },
    /// Our QoS 1 publish is done (MQTT 5: `reason` >= 0x80 is a failure; 0 in 3.1.1).
    PubAck {
        packet_id: u16,
        reason: u8,
    },
    /// Our QoS 2 publish is done: the PUBCOMP's reason, or a failed PUBREC's (MQTT 5).
    PubComp {
        packet_id: u16,
        reason: u8,
    },
    /// `granted`: the first return code (0x80 and above: failure); `failures`: how many of the
    /// filters failed.
    SubAck {
        packet_id: u16,
        granted: u8,
        failures: u16,
    },
    /// `failures`: how many filters failed (MQTT 5 reason codes >= 0x80; 0 in 3.1.1).
    UnsubAck {
        packet_id: u16,
        failures: u16,
    },
    PingResp,
    /// The server's DISCONNECT (MQTT 5), with its reason code; it closes the connection next.
    Disconnect {
        reason: u8,
    },
}

/// Why a connection cannot go on. Fixed size and `Copy`: counted by kind without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MqttError {
    /// A remaining length whose fourth byte says more follows: not MQTT.
    #[error("invalid remaining length")]
    BadLength,
    /// A packet longer than the client's limit.
    #[error("packet longer than the limit")]
    TooLong,
    /// The body (or the reserved flags) of a packet of this type does not parse.
    #[error("malformed {} packet", packet_name(*.0))]
    Malformed(u8),
    /// A packet of this type makes no sense where it came.
    #[error("unexpected {} packet", packet_name(*.0))]
    Unexpected(u8),
    /// The broker refused the connection: the CONNACK's return code (3.1.1) or reason code (5).
    #[error("connection refused (code {0:#04x})")]
    Refused(u8),
    /// An MQTT 5 topic alias from the server beyond the maximum we announced, never set, or
    /// beyond the alias table's size.
    #[error("invalid topic alias")]
    TopicAlias,
    /// The connection ended in the middle of a packet, or before the CONNACK.
    #[error("connection closed before the packet was complete")]
    Incomplete,
}

/// The name of a packet type (the high nibble of its first byte).
pub fn packet_name(ty: u8) -> &'static str {
    match ty {
        1 => "CONNECT",
        2 => "CONNACK",
        3 => "PUBLISH",
        4 => "PUBACK",
        5 => "PUBREC",
        6 => "PUBREL",
        7 => "PUBCOMP",
        8 => "SUBSCRIBE",
        9 => "SUBACK",
        10 => "UNSUBSCRIBE",
        11 => "UNSUBACK",
        12 => "PINGREQ",
        13 => "PINGRESP",
        14 => "DISCONNECT",
        15 => "AUTH",
        _ => "reserved",
    }
}
