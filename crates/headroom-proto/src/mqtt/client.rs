//! The client connection state machine: CONNACK, then the broker's packets, answering the QoS
//! 1 and 2 flows itself. See the module documentation of [`crate::mqtt`].

use super::encode;
use super::framer::{Framer, Loc};
use super::{
    Connect, Event, MqttError, QoS, ServerLimits, Version, DEFAULT_MAX_PACKET, MAX_ALIAS_BYTES,
    MAX_TOPIC_ALIASES, RETAINED_CAPACITY,
};
use std::marker::PhantomData;

/// Packet types (the high nibble of a packet's first byte).
const CONNACK: u8 = 2;
const PUBLISH: u8 = 3;
const PUBACK: u8 = 4;
const PUBREC: u8 = 5;
const PUBREL: u8 = 6;
const PUBCOMP: u8 = 7;
const SUBACK: u8 = 9;
const UNSUBACK: u8 = 11;
const PINGRESP: u8 = 13;
const DISCONNECT: u8 = 14;

/// An id set holds up to this many ids in a plain `Vec<u16>` (128 bytes, searched linearly);
/// beyond, it becomes an 8 KiB bitset for the rest of the connection.
pub const SMALL_ID_SET: usize = 64;

/// A set of packet ids: a small vector while it holds at most [`SMALL_ID_SET`] ids, then a
/// bitset of all 65,536 (8 KiB, allocated once, kept).
#[derive(Debug, Default)]
struct IdSet {
    small: Vec<u16>,
    bits: Option<Box<[u64]>>,
    len: u32,
}

impl IdSet {
    fn contains(&self, id: u16) -> bool {
        match &self.bits {
            Some(bits) => bits
                .get(usize::from(id >> 6))
                .is_some_and(|w| w & (1 << (id & 63)) != 0),
            None => self.small.contains(&id),
        }
    }

    /// Adds `id`; false if it was there already.
    fn insert(&mut self, id: u16) -> bool {
        if self.contains(id) {
            return false;
        }
        if self.bits.is_none() && self.small.len() >= SMALL_ID_SET {
            let mut bits = vec![0u64; 1024].into_boxed_slice();
            for &s in &self.small {
                if let Some(w) = bits.get_mut(usize::from(s >> 6)) {
                    *w |= 1 << (s & 63);
                }
            }
            self.small = Vec::new();
            self.bits = Some(bits);
        }
        match &mut self.bits {
            Some(bits) => {
                if let Some(w) = bits.get_mut(usize::from(id >> 6)) {
                    *w |= 1 << (id & 63);
                }
            }
            None => self.small.push(id),
        }
        self.len += 1;
        true
    }

    /// Removes `id`; false if it was not there.
    fn remove(&mut self, id: u16) -> bool {
        let found = match &mut self.bits {
            Some(bits) => match bits.get_mut(usize::from(id >> 6)) {
                Some(w) if *w & (1 << (id & 63)) != 0 => {
                    *w &= !(1 << (id & 63));
                    true
                }
                _ => false,
            },
            None => match self.small.iter().position(|&s| s == id) {
                Some(i) => {
                    self.small.swap_remove(i);
                    true
                }
                None => false,
            },
        };
        if found {
            self.len -= 1;
        }
        found
    }

    fn len(&self) -> usize {
        self.len as usize
    }

    fn heap_bytes(&self) -> usize {
        self.small.capacity() * 2 + self.bits.as_ref().map_or(0, |b| b.len() * 8)
    }
}

/// The topics the server gave aliases to (MQTT 5, "Topic Alias" on an incoming PUBLISH).
#[derive(Debug, Default)]
struct Aliases {
    /// The Topic Alias Maximum we announced: aliases 1..=max are valid.
    max: u16,
    /// `topics[alias - 1]`, grown to the highest alias used; an empty topic is "unset".
    topics: Vec<Vec<u8>>,
    /// Sum of the topics' lengths (bounded by [`MAX_ALIAS_BYTES`]).
    bytes: usize,
}

impl Aliases {
    fn index(&self, alias: u16) -> Result<usize, MqttError> {
        if alias == 0 || alias > self.max {
            return Err(MqttError::TopicAlias);
        }
        Ok(usize::from(alias - 1))
    }

    /// Maps `alias` to `topic` (replacing its earlier topic).
    fn set(&mut self, alias: u16, topic: &[u8]) -> Result<(), MqttError> {
        let i = self.index(alias)?;
        if self.topics.len() <= i {
            self.topics.resize_with(i + 1, Vec::new);
        }
        let slot = self.topics.get_mut(i).ok_or(MqttError::TopicAlias)?;
        let bytes = self.bytes - slot.len() + topic.len();
        if bytes > MAX_ALIAS_BYTES {
            return Err(MqttError::TopicAlias);
        }
        slot.clear();
        slot.extend_from_slice(topic);
        self.bytes = bytes;
        Ok(())
    }

    /// The index of `alias`'s topic; an alias never set is an error.
    fn get(&self, alias: u16) -> Result<usize, MqttError> {
        let i = self.index(alias)?;
        match self.topics.get(i) {
            Some(t) if !t.is_empty() => Ok(i),
            _ => Err(MqttError::TopicAlias),
        }
    }

    fn topic(&self, i: usize) -> &[u8] {
        self.topics.get(i).map(Vec::as_slice).unwrap_or_default()
    }

    fn heap_bytes(&self) -> usize {
        self.topics.capacity() * std::mem::size_of::<Vec<u8>>()
            + self.topics.iter().map(Vec::capacity).sum::<usize>()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// CONNECT sent, waiting for the CONNACK.
    Connecting,
    Connected,
    /// The server sent DISCONNECT (MQTT 5): nothing more may come.
    Closed,
}

/// Where an incoming message's topic is.
#[derive(Debug, Clone, Copy)]
enum TopicAt {
    /// `body[start..end]`.
    Body(usize, usize),
    /// The alias table's entry.
    Alias(usize),
}

/// What one packet amounts to, without borrowing anything (so that the decode loop can go on
/// after a packet that reports nothing).
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Handled (an answer may have been written): report nothing, go on.
    Silent,
    Report(Event<'static>),
    Message {
        topic: TopicAt,
        payload: (usize, usize),
        qos: QoS,
        retain: bool,
        dup: bool,
    },
}

/// Everything but the framer, so that a packet borrowed from the framer can be handled.
#[derive(Debug)]
struct State {
    version: Version,
    phase: Phase,
    /// Incoming QoS 2 messages reported and answered with PUBREC, awaiting the server's PUBREL.
    incoming: IdSet,
    /// Ids handed out by `next_packet_id` and not yet acknowledged.
    outgoing: IdSet,
    next_id: u16,
    aliases: Aliases,
    limits: ServerLimits,
}

/// One MQTT client connection's protocol state. See the module documentation of
/// [`crate::mqtt`].
#[derive(Debug)]
pub struct Client {
    framer: Framer,
    st: State,
    failed: Option<MqttError>,
}

impl Client {
    /// A connection that has sent (or is about to send) its CONNECT, announcing no Topic Alias
    /// Maximum. See [`Client::connect`] to encode the CONNECT and take its settings.
    pub fn new(version: Version) -> Client {
        Client {
            framer: Framer::new(DEFAULT_MAX_PACKET, RETAINED_CAPACITY),
            st: State {
                version,
                phase: Phase::Connecting,
                incoming: IdSet::default(),
                outgoing: IdSet::default(),
                next_id: 1,
                aliases: Aliases::default(),
                limits: ServerLimits::default(),
            },
            failed: None,
        }
    }

    /// Appends the CONNECT of `c` to `out` and returns the connection expecting its CONNACK,
    /// with `c`'s version, Topic Alias Maximum (MQTT 5; at most [`MAX_TOPIC_ALIASES`]) and, when
    /// `c.max_packet_size` is not 0, that as the largest packet accepted.
    pub fn connect(c: &Connect<'_>, out: &mut Vec<u8>) -> Client {
        encode::encode_connect(out, c);
        let mut client = Client::new(c.version);
        if c.version == Version::V5 {
            client.st.aliases.max = c.topic_alias_maximum.min(MAX_TOPIC_ALIASES);
        }
        if c.max_packet_size != 0 {
            client.set_max_packet(c.max_packet_size);
        }
        client
    }

    pub fn version(&self) -> Version {
        self.st.version
    }

    /// Largest packet (fixed header included) accepted from the server; a longer one is
    /// [`MqttError::TooLong`]. Default [`DEFAULT_MAX_PACKET`].
    pub fn set_max_packet(&mut self, max: u32) {
        self.framer.max_packet = max;
    }

    /// The split-packet buffer is freed after a packet that grew it beyond `bytes` (default
    /// [`RETAINED_CAPACITY`]); raise it when messages larger than that are usual, so that they
    /// do not allocate each time they arrive split.
    pub fn set_retained_capacity(&mut self, bytes: usize) {
        self.framer.retained = bytes;
    }

    /// A packet id for a QoS 1/2 PUBLISH, a SUBSCRIBE or an UNSUBSCRIBE: 1, 2, ... 65535, 1,
    /// ..., skipping ids still in flight. The id is in flight from now until the server's
    /// PUBACK, PUBCOMP (or failed PUBREC), SUBACK or UNSUBACK with it arrives, or
    /// [`Client::release_packet_id`]: take one only for a packet that will be acknowledged.
    /// With all 65,535 ids in flight (after a scan of them all) the next one is given anyway.
    pub fn next_packet_id(&mut self) -> u16 {
        let st = &mut self.st;
        for _ in 0..u16::MAX {
            let id = st.next_id;
            st.next_id = if id == u16::MAX { 1 } else { id + 1 };
            if st.outgoing.insert(id) {
                return id;
            }
        }
        let id = st.next_id;
        st.next_id = if id == u16::MAX { 1 } else { id + 1 };
        id
    }

    /// Forgets an id handed out by [`Client::next_packet_id`] (a packet never sent, or given
    /// up on).
    pub fn release_packet_id(&mut self, id: u16) {
        self.st.outgoing.remove(id);
    }

    /// Ids handed out and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.st.outgoing.len()
    }

    /// Incoming QoS 2 messages awaiting the server's PUBREL.
    pub fn awaiting_pubrel(&self) -> usize {
        self.st.incoming.len()
    }

    /// The CONNACK has arrived (and accepted us), the server has not sent DISCONNECT and the
    /// connection has not failed.
    pub fn is_connected(&self) -> bool {
        self.st.phase == Phase::Connected && self.failed.is_none()
    }

    /// What the server's CONNACK said about its limits (MQTT 5 properties; the protocol's
    /// defaults before the CONNACK and in MQTT 3.1.1).
    pub fn server_limits(&self) -> ServerLimits {
        self.st.limits
    }

    /// A packet is partly received.
    pub fn in_progress(&self) -> bool {
        self.framer.in_progress()
    }

    /// Capacity of the split-packet buffer (0 when none is held).
    pub fn buffer_capacity(&self) -> usize {
        self.framer.buffer_capacity()
    }

    /// Heap bytes the connection holds: the split-packet buffer, the two packet id sets and
    /// the topic alias table (for memory accounting; `size_of::<Client>()` is the rest).
    pub fn heap_bytes(&self) -> usize {
        self.framer.buffer_capacity()
            + self.st.incoming.heap_bytes()
            + self.st.outgoing.heap_bytes()
            + self.st.aliases.heap_bytes()
    }

    /// Takes bytes from the broker: returns how many were used and at most one event. Answers
    /// the broker itself into `out` (PUBACK, PUBREC, PUBREL, PUBCOMP). The bytes after an
    /// event are not consumed: call again with the rest until [`Event::NeedMore`], which comes
    /// with all of `input` consumed (any other event with at least one byte).
    ///
    /// An event borrows from `input` (a packet that arrived whole) or from the client (one
    /// that arrived split, or an aliased topic). After an `Err` the connection is unusable
    /// (close it): every later call returns the same error.
    pub fn decode<'a>(
        &'a mut self,
        input: &'a [u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Event<'a>), MqttError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut pos = 0usize;
        let (frame_at, frame, step) = loop {
            let rest = input.get(pos..).unwrap_or_default();
            if rest.is_empty() {
                return Ok((pos, Event::NeedMore));
            }
            let at = pos;
            let step = self.framer.step(rest).and_then(|(used, frame)| {
                pos += used;
                match frame {
                    None => Ok(None),
                    Some(f) => {
                        let body = match f.loc {
                            Loc::Input { start, end } => rest.get(start..end).unwrap_or_default(),
                            Loc::Buf => self.framer.buffered(),
                        };
                        self.st.handle(f.byte0, body, out).map(|s| Some((f, s)))
                    }
                }
            });
            match step {
                Err(e) => {
                    self.failed = Some(e);
                    return Err(e);
                }
                Ok(None) => return Ok((pos, Event::NeedMore)),
                Ok(Some((_, Step::Silent))) => {}
                Ok(Some((f, s))) => break (at, f, s),
            }
        };
        let event = match step {
            Step::Silent => Event::NeedMore, // not reached: silent steps loop
            Step::Report(e) => e,
            Step::Message {
                topic,
                payload,
                qos,
                retain,
                dup,
            } => {
                let body = match frame.loc {
                    Loc::Input { start, end } => input
                        .get(frame_at..)
                        .and_then(|r| r.get(start..end))
                        .unwrap_or_default(),
                    Loc::Buf => self.framer.buffered(),
                };
                let topic = match topic {
                    TopicAt::Body(a, b) => body.get(a..b).unwrap_or_default(),
                    TopicAt::Alias(i) => self.st.aliases.topic(i),
                };
                Event::Message {
                    topic,
                    payload: body.get(payload.0..payload.1).unwrap_or_default(),
                    qos,
                    retain,
                    dup,
                }
            }
        };
        Ok((pos, event))
    }

    /// The server closed the connection. `Ok` between packets once connected (or after an
    /// error already returned, or the server's DISCONNECT); [`MqttError::Incomplete`] in the
    /// middle of a packet or before the CONNACK.
    pub fn eof(&self) -> Result<(), MqttError> {
        if self.failed.is_some() {
            return Ok(());
        }
        if self.framer.in_progress() || self.st.phase == Phase::Connecting {
            Err(MqttError::Incomplete)
        } else {
            Ok(())
        }
    }
}

impl State {
    fn v5(&self) -> bool {
        self.version == Version::V5
    }

    /// One packet: its first byte and body.
    fn handle(&mut self, byte0: u8, body: &[u8], out: &mut Vec<u8>) -> Result<Step, MqttError> {
        let ty = byte0 >> 4;
        let flags = byte0 & 0x0f;
        match self.phase {
            Phase::Connecting if ty != CONNACK => return Err(MqttError::Unexpected(ty)),
            Phase::Closed => return Err(MqttError::Unexpected(ty)),
            _ => {}
        }
        // Client-to-server packets (CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ), a DISCONNECT
        // in 3.1.1, AUTH (enhanced authentication is not supported), the reserved type 0.
        let known = matches!(
            ty,
            CONNACK | PUBLISH | PUBACK | PUBREC | PUBREL | PUBCOMP | SUBACK | UNSUBACK | PINGRESP
        ) || (ty == DISCONNECT && self.v5());
        if !known {
            return Err(MqttError::Unexpected(ty));
        }
        // Reserved flags: 0b0010 for PUBREL, PUBLISH's are its own, 0 for the rest.
        let want_flags = match ty {
            PUBLISH => flags,
            PUBREL => 0b0010,
            _ => 0,
        };
        if flags != want_flags {
            return Err(MqttError::Malformed(ty));
        }
        match ty {
            CONNACK => self.connack(body),
            PUBLISH => self.publish(flags, body, out),
            PUBACK => {
                let (id, reason) = self.ack_body(PUBACK, body)?;
                self.outgoing.remove(id);
                Ok(Step::Report(Event::PubAck {
                    packet_id: id,
                    reason,
                }))
            }
            PUBREC => {
                let (id, reason) = self.ack_body(PUBREC, body)?;
                if reason >= 0x80 {
                    // Refused: the exchange ends here, no PUBREL.
                    self.outgoing.remove(id);
                    return Ok(Step::Report(Event::PubComp {
                        packet_id: id,
                        reason,
                    }));
                }
                encode::encode_pubrel(out, id);
                Ok(Step::Silent)
            }
            PUBREL => {
                let (id, _) = self.ack_body(PUBREL, body)?;
                let held = self.incoming.remove(id);
                // Unknown id (a PUBREL retransmitted after our PUBCOMP was lost): still
                // answered [MQTT-4.3.3-11]; MQTT 5 says so with 0x92.
                let reason = if held { 0 } else { 0x92 };
                encode::encode_pubcomp(out, self.version, id, reason);
                Ok(Step::Silent)
            }
            PUBCOMP => {
                let (id, reason) = self.ack_body(PUBCOMP, body)?;
                self.outgoing.remove(id);
                Ok(Step::Report(Event::PubComp {
                    packet_id: id,
                    reason,
                }))
            }
            SUBACK => self.suback(body),
            UNSUBACK => self.unsuback(body),
            PINGRESP => {
                if !body.is_empty() {
                    return Err(MqttError::Malformed(PINGRESP));
                }
                Ok(Step::Report(Event::PingResp))
            }
            DISCONNECT if self.v5() => {
                let reason = body.first().copied().unwrap_or(0);
                if body.len() > 1 {
                    let (props, end) = props_at(DISCONNECT, body, 1)?;
                    if end != body.len() {
                        return Err(MqttError::Malformed(DISCONNECT));
                    }
                    each_prop(DISCONNECT, props, |id, _| {
                        matches!(id, 0x11 | 0x1f | 0x26 | 0x1c)
                    })?;
                }
                self.phase = Phase::Closed;
                Ok(Step::Report(Event::Disconnect { reason }))
            }
            _ => Err(MqttError::Unexpected(ty)),
        }
    }

    fn connack(&mut self, body: &[u8]) -> Result<Step, MqttError> {
        const BAD: MqttError = MqttError::Malformed(CONNACK);
        if self.phase != Phase::Connecting {
            return Err(MqttError::Unexpected(CONNACK));
        }
        let (&ack_flags, rest) = body.split_first().ok_or(BAD)?;
        let (&code, _) = rest.split_first().ok_or(BAD)?;
        if ack_flags & 0xfe != 0 {
            return Err(BAD);
        }
        if !self.v5() && body.len() != 2 {
            return Err(BAD);
        }
        if code != 0 {
            return Err(MqttError::Refused(code));
        }
        let mut limits = ServerLimits::default();
        // MQTT 5: properties. Two bytes alone (no property length) are taken too: what a
        // 3.1.1-only broker answers to an MQTT 5 CONNECT (with code 1, refused above).
        if self.v5() && body.len() > 2 {
            let (props, end) = props_at(CONNACK, body, 2)?;
            if end != body.len() {
                return Err(BAD);
            }
            let mut ok = true;
            each_prop(CONNACK, props, |id, p| {
                match (id, p) {
                    (0x21, Prop::U16(n)) => {
                        ok &= n != 0;
                        limits.receive_maximum = n;
                    }
                    (0x24, Prop::Byte(q)) => {
                        ok &= q <= 1;
                        limits.maximum_qos = QoS::from_bits(q).unwrap_or(QoS::AtMostOnce);
                    }
                    (0x25, Prop::Byte(b)) => {
                        ok &= b <= 1;
                        limits.retain_available = b == 1;
                    }
                    (0x27, Prop::U32(n)) => {
                        ok &= n != 0;
                        limits.maximum_packet_size = Some(n);
                    }
                    (0x22, Prop::U16(n)) => limits.topic_alias_maximum = n,
                    (0x13, Prop::U16(n)) => limits.server_keep_alive = Some(n),
                    (0x28, Prop::Byte(b)) => {
                        ok &= b <= 1;
                        limits.wildcard_subscriptions = b == 1;
                    }
                    (0x2a, Prop::Byte(b)) => {
                        ok &= b <= 1;
                        limits.shared_subscriptions = b == 1;
                    }
                    // Session Expiry Interval, Assigned Client Identifier, Reason String,
                    // User Property, Subscription Identifiers Available, Response Information,
                    // Server Reference, Authentication Method and Data: not kept.
                    (0x11 | 0x12 | 0x1f | 0x26 | 0x29 | 0x1a | 0x1c | 0x15 | 0x16, _) => {}
                    _ => return false,
                }
                true
            })?;
            if !ok {
                return Err(BAD);
            }
        }
        self.limits = limits;
        self.phase = Phase::Connected;
        Ok(Step::Report(Event::ConnAck {
            session_present: ack_flags & 1 != 0,
        }))
    }

    fn publish(&mut self, flags: u8, body: &[u8], out: &mut Vec<u8>) -> Result<Step, MqttError> {
        const BAD: MqttError = MqttError::Malformed(PUBLISH);
        let qos = QoS::from_bits((flags >> 1) & 3).ok_or(BAD)?;
        let dup = flags & 0x08 != 0;
        let retain = flags & 0x01 != 0;
        if qos == QoS::AtMostOnce && dup {
            return Err(BAD);
        }
        let topic_len = usize::from(be_u16(body, 0).ok_or(BAD)?);
        let topic_end = 2 + topic_len;
        if topic_end > body.len() {
            return Err(BAD);
        }
        let mut pos = topic_end;
        let mut packet_id = 0;
        if qos != QoS::AtMostOnce {
            packet_id = be_u16(body, pos).ok_or(BAD)?;
            if packet_id == 0 {
                return Err(BAD);
            }
            pos += 2;
        }
        let mut alias = None;
        if self.v5() {
            let (props, end) = props_at(PUBLISH, body, pos)?;
            each_prop(PUBLISH, props, |id, p| match (id, p) {
                (0x23, Prop::U16(a)) => {
                    alias = Some(a);
                    true
                }
                // Payload Format Indicator, Message Expiry Interval, Content Type, Response
                // Topic, Correlation Data, Subscription Identifier, User Property.
                (0x01 | 0x02 | 0x03 | 0x08 | 0x09 | 0x0b | 0x26, _) => true,
                _ => false,
            })?;
            pos = end;
        }
        let topic = match (topic_len, alias) {
            (0, None) => return Err(BAD),
            (0, Some(a)) => TopicAt::Alias(self.aliases.get(a)?),
            (_, Some(a)) => {
                self.aliases
                    .set(a, body.get(2..topic_end).unwrap_or_default())?;
                TopicAt::Body(2, topic_end)
            }
            (_, None) => TopicAt::Body(2, topic_end),
        };
        match qos {
            QoS::AtMostOnce => {}
            QoS::AtLeastOnce => encode::encode_puback(out, packet_id),
            QoS::ExactlyOnce => {
                encode::encode_pubrec(out, packet_id);
                if !self.incoming.insert(packet_id) {
                    // Still held: a retransmission of a message already reported.
                    return Ok(Step::Silent);
                }
            }
        }
        Ok(Step::Message {
            topic,
            payload: (pos, body.len()),
            qos,
            retain,
            dup,
        })
    }

    /// PUBACK, PUBREC, PUBREL, PUBCOMP: packet id, then in MQTT 5 an optional reason code
    /// (absent: 0x00) and optional properties (absent when the remaining length is below 4).
    fn ack_body(&self, ty: u8, body: &[u8]) -> Result<(u16, u8), MqttError> {
        let bad = MqttError::Malformed(ty);
        let id = be_u16(body, 0).ok_or(bad)?;
        if id == 0 {
            return Err(bad);
        }
        if !self.v5() {
            return if body.len() == 2 {
                Ok((id, 0))
            } else {
                Err(bad)
            };
        }
        let reason = body.get(2).copied().unwrap_or(0);
        if body.len() > 3 {
            let (props, end) = props_at(ty, body, 3)?;
            if end != body.len() {
                return Err(bad);
            }
            each_prop(ty, props, |id, _| matches!(id, 0x1f | 0x26))?;
        }
        Ok((id, reason))
    }

    fn suback(&mut self, body: &[u8]) -> Result<Step, MqttError> {
        const BAD: MqttError = MqttError::Malformed(SUBACK);
        let id = be_u16(body, 0).ok_or(BAD)?;
        if id == 0 {
            return Err(BAD);
        }
        let mut pos = 2;
        if self.v5() {
            let (props, end) = props_at(SUBACK, body, pos)?;
            each_prop(SUBACK, props, |id, _| matches!(id, 0x1f | 0x26))?;
            pos = end;
        }
        let codes = body.get(pos..).unwrap_or_default();
        let &granted = codes.first().ok_or(BAD)?;
        let valid = |c: &u8| match self.version {
            Version::V311 => matches!(c, 0 | 1 | 2 | 0x80),
            Version::V5 => matches!(
                c,
                0 | 1 | 2 | 0x80 | 0x83 | 0x87 | 0x8f | 0x91 | 0x97 | 0x9e | 0xa1 | 0xa2
            ),
        };
        if !codes.iter().all(valid) {
            return Err(BAD);
        }
        let failures = codes.iter().filter(|&&c| c >= 0x80).count();
        self.outgoing.remove(id);
        Ok(Step::Report(Event::SubAck {
            packet_id: id,
            granted,
            failures: u16::try_from(failures).unwrap_or(u16::MAX),
        }))
    }

    fn unsuback(&mut self, body: &[u8]) -> Result<Step, MqttError> {
        const BAD: MqttError = MqttError::Malformed(UNSUBACK);
        let id = be_u16(body, 0).ok_or(BAD)?;
        if id == 0 {
            return Err(BAD);
        }
        let mut failures = 0;
        if self.v5() {
            let (props, end) = props_at(UNSUBACK, body, 2)?;
            each_prop(UNSUBACK, props, |id, _| matches!(id, 0x1f | 0x26))?;
            let codes = body.get(end..).unwrap_or_default();
            if codes.is_empty()
                || !codes
                    .iter()
                    .all(|c| matches!(c, 0 | 0x11 | 0x80 | 0x83 | 0x87 | 0x8f | 0x91))
            {
                return Err(BAD);
            }
            failures = codes.iter().filter(|&&c| c >= 0x80).count();
        } else if body.len() != 2 {
            return Err(BAD);
        }
        self.outgoing.remove(id);
        Ok(Step::Report(Event::UnsubAck {
            packet_id: id,
            failures: u16::try_from(failures).unwrap_or(u16::MAX),
        }))
    }
}

// ---- MQTT 5 properties ----

/// A property's value, by the type its identifier has (MQTT 5, 2.2.2.2).
#[derive(Debug, Clone, Copy)]
enum Prop<'a> {
    Byte(u8),
    U16(u16),
    U32(u32),
    /// A variable byte integer, a UTF-8 string (not checked for UTF-8), binary data or a user
    /// property's name and value: checked to fit, and skipped (the client keeps none).
    Skipped(PhantomData<&'a [u8]>),
}

/// The properties starting at `body[pos]` (a variable byte integer length, then that many
/// bytes): the properties' bytes and the position after them.
fn props_at(ty: u8, body: &[u8], pos: usize) -> Result<(&[u8], usize), MqttError> {
    let bad = MqttError::Malformed(ty);
    let (len, n) = read_varint(body.get(pos..).unwrap_or_default()).ok_or(bad)?;
    let start = pos + n;
    let end = start.checked_add(len as usize).ok_or(bad)?;
    let props = body.get(start..end).ok_or(bad)?;
    Ok((props, end))
}

/// Calls `f` with every property of `props`; a property `f` refuses (not allowed in this
/// packet), an unknown identifier or a value running past the end is `Malformed(ty)`. Every
/// property takes at least two bytes, so the loop is bounded by the packet's size.
fn each_prop<'a>(
    ty: u8,
    mut props: &'a [u8],
    mut f: impl FnMut(u8, Prop<'a>) -> bool,
) -> Result<(), MqttError> {
    let bad = MqttError::Malformed(ty);
    while let Some((&id, rest)) = props.split_first() {
        let (value, used) = match id {
            0x01 | 0x17 | 0x19 | 0x24 | 0x25 | 0x28 | 0x29 | 0x2a => {
                (Prop::Byte(*rest.first().ok_or(bad)?), 1)
            }
            0x13 | 0x21 | 0x22 | 0x23 => (Prop::U16(be_u16(rest, 0).ok_or(bad)?), 2),
            0x02 | 0x11 | 0x18 | 0x27 => (Prop::U32(be_u32(rest, 0).ok_or(bad)?), 4),
            0x0b => {
                let (_, n) = read_varint(rest).ok_or(bad)?;
                (Prop::Skipped(PhantomData), n)
            }
            0x03 | 0x08 | 0x09 | 0x12 | 0x15 | 0x16 | 0x1a | 0x1c | 0x1f => {
                let n = read_bytes(rest, 0).ok_or(bad)?;
                (Prop::Skipped(PhantomData), n)
            }
            0x26 => {
                let n = read_bytes(rest, 0).ok_or(bad)?;
                let m = read_bytes(rest, n).ok_or(bad)?;
                (Prop::Skipped(PhantomData), n + m)
            }
            _ => return Err(bad),
        };
        if !f(id, value) {
            return Err(bad);
        }
        props = rest.get(used..).ok_or(bad)?;
    }
    Ok(())
}

/// A variable byte integer at the start of `b`: its value and length (1 to 4 bytes).
fn read_varint(b: &[u8]) -> Option<(u32, usize)> {
    let mut v = 0u32;
    for i in 0..4 {
        let byte = *b.get(i)?;
        v |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// A two-byte length and that many bytes at `b[at..]`: how many bytes they take.
fn read_bytes(b: &[u8], at: usize) -> Option<usize> {
    let len = usize::from(be_u16(b, at)?);
    b.get(at + 2..at + 2 + len)?;
    Some(2 + len)
}

fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
