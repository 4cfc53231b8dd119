//! Encoders: every function *appends* one client packet to a caller's `Vec<u8>` (reserving its
//! exact size first, so at most one growth) and allocates nothing else. See the module
//! documentation of [`crate::mqtt`] for the layouts and the panics.

use super::{Connect, QoS, Version, MAX_STRING_LEN, MAX_TOPIC_ALIASES};

/// Largest remaining length the 4-byte variable byte integer can say (256 MiB - 1).
pub const MAX_REMAINING_LEN: usize = 268_435_455;

/// Bytes of `n` as a variable byte integer (1 to 4).
pub(crate) fn varint_len(n: usize) -> usize {
    match n {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        _ => 4,
    }
}

/// Appends `n` as a variable byte integer: 7 bits a byte, least significant group first, the
/// high bit set on every byte but the last.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let mut b = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            b |= 0x80;
        }
        out.push(b);
        if n == 0 {
            break;
        }
    }
}

/// The fixed header: the type and flags byte, then the remaining length. Reserves the whole
/// packet.
fn fixed_header(out: &mut Vec<u8>, byte0: u8, remaining: usize) {
    assert!(
        remaining <= MAX_REMAINING_LEN,
        "MQTT packet of {remaining} bytes after its fixed header: the protocol's limit is {MAX_REMAINING_LEN}"
    );
    out.reserve(1 + varint_len(remaining) + remaining);
    out.push(byte0);
    put_varint(out, remaining);
}

/// A string or binary field: its length as two bytes, then the bytes.
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    assert!(
        b.len() <= MAX_STRING_LEN,
        "MQTT string or binary field of {} bytes: the protocol's limit is {MAX_STRING_LEN}",
        b.len()
    );
    out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    out.extend_from_slice(b);
}

/// CONNECT (type 1). Variable header: protocol name `"\0\x04MQTT"`, level (4 or 5), connect
/// flags, keep alive, and in MQTT 5 the properties (Session Expiry Interval 0x11 when not 0,
/// Topic Alias Maximum 0x22 when not 0 (at most [`MAX_TOPIC_ALIASES`]), Maximum Packet Size
/// 0x27 when not 0). Payload: client id, then if a will is given (MQTT 5: its properties,
/// always empty) its topic and payload, then the user name and password if given.
///
/// MQTT 3.1.1 forbids a password without a user name (the broker closes the connection); it is
/// encoded as asked.
pub fn encode_connect(out: &mut Vec<u8>, c: &Connect<'_>) {
    let v5 = c.version == Version::V5;
    let alias_max = c.topic_alias_maximum.min(MAX_TOPIC_ALIASES);
    let mut props = 0;
    if v5 {
        props += if c.session_expiry != 0 { 5 } else { 0 };
        props += if alias_max != 0 { 3 } else { 0 };
        props += if c.max_packet_size != 0 { 5 } else { 0 };
    }
    // Protocol name, level, flags, keep alive.
    let mut rem = 6 + 1 + 1 + 2;
    if v5 {
        rem += varint_len(props) + props;
    }
    rem += 2 + c.client_id.len();
    if let Some(w) = &c.will {
        rem += usize::from(v5) + 2 + w.topic.len() + 2 + w.payload.len();
    }
    if let Some(u) = c.username {
        rem += 2 + u.len();
    }
    if let Some(p) = c.password {
        rem += 2 + p.len();
    }
    fixed_header(out, 0x10, rem);
    out.extend_from_slice(b"\x00\x04MQTT");
    out.push(c.version.level());
    let mut flags = 0u8;
    if c.username.is_some() {
        flags |= 0x80;
    }
    if c.password.is_some() {
        flags |= 0x40;
    }
    if let Some(w) = &c.will {
        flags |= 0x04 | ((w.qos as u8) << 3);
        if w.retain {
            flags |= 0x20;
        }
    }
    if c.clean_start {
        flags |= 0x02;
    }
    out.push(flags);
    out.extend_from_slice(&c.keep_alive.to_be_bytes());
    if v5 {
        put_varint(out, props);
        if c.session_expiry != 0 {
            out.push(0x11);
            out.extend_from_slice(&c.session_expiry.to_be_bytes());
        }
        if alias_max != 0 {
            out.push(0x22);
            out.extend_from_slice(&alias_max.to_be_bytes());
        }
        if c.max_packet_size != 0 {
            out.push(0x27);
            out.extend_from_slice(&c.max_packet_size.to_be_bytes());
        }
    }
    put_bytes(out, c.client_id.as_bytes());
    if let Some(w) = &c.will {
        if v5 {
            out.push(0); // will properties: none
        }
        put_bytes(out, w.topic.as_bytes());
        put_bytes(out, w.payload);
    }
    if let Some(u) = c.username {
        put_bytes(out, u.as_bytes());
    }
    if let Some(p) = c.password {
        put_bytes(out, p);
    }
}

/// The fixed and variable header of a PUBLISH whose payload is `payload_len` bytes.
#[allow(clippy::too_many_arguments)]
fn publish_header(
    out: &mut Vec<u8>,
    v: Version,
    topic: &str,
    qos: QoS,
    retain: bool,
    dup: bool,
    packet_id: u16,
    payload_len: usize,
) {
    debug_assert!(
        qos == QoS::AtMostOnce || packet_id != 0,
        "a QoS 1/2 PUBLISH needs a packet id from 1"
    );
    let with_id = qos != QoS::AtMostOnce;
    let rem =
        2 + topic.len() + if with_id { 2 } else { 0 } + usize::from(v == Version::V5) + payload_len;
    // DUP must be 0 for QoS 0 [MQTT-3.3.1-2].
    let dup = dup && with_id;
    let byte0 = 0x30 | (u8::from(dup) << 3) | ((qos as u8) << 1) | u8::from(retain);
    fixed_header(out, byte0, rem);
    put_bytes(out, topic.as_bytes());
    if with_id {
        out.extend_from_slice(&packet_id.to_be_bytes());
    }
    if v == Version::V5 {
        out.push(0); // properties: none
    }
}

/// PUBLISH (type 3): flags DUP (bit 3, forced to 0 at QoS 0), QoS (bits 1-2), RETAIN (bit 0);
/// topic, packet id (QoS 1 and 2 only; must not be 0 there), MQTT 5 properties (none), payload.
#[allow(clippy::too_many_arguments)]
pub fn encode_publish(
    out: &mut Vec<u8>,
    v: Version,
    topic: &str,
    qos: QoS,
    retain: bool,
    dup: bool,
    packet_id: u16,
    payload: &[u8],
) {
    publish_header(out, v, topic, qos, retain, dup, packet_id, payload.len());
    out.extend_from_slice(payload);
}

/// PUBLISH whose payload is `head` followed by `fill_len` bytes of `fill` (the engine's
/// timestamp, then filler up to the message size), written straight into `out`: no payload
/// is built anywhere else. DUP is 0 (a first transmission).
#[allow(clippy::too_many_arguments)]
pub fn encode_publish_parts(
    out: &mut Vec<u8>,
    v: Version,
    topic: &str,
    qos: QoS,
    retain: bool,
    packet_id: u16,
    head: &[u8],
    fill: u8,
    fill_len: usize,
) {
    publish_header(
        out,
        v,
        topic,
        qos,
        retain,
        false,
        packet_id,
        head.len() + fill_len,
    );
    out.extend_from_slice(head);
    out.resize(out.len() + fill_len, fill);
}

/// SUBSCRIBE (type 8, flags 0b0010): packet id, MQTT 5 properties (none), then each filter
/// with its options byte: the maximum QoS (MQTT 5's No Local, Retain As Published and Retain
/// Handling bits are 0: the defaults).
pub fn encode_subscribe(out: &mut Vec<u8>, v: Version, packet_id: u16, filters: &[(&str, QoS)]) {
    let rem = 2
        + usize::from(v == Version::V5)
        + filters.iter().map(|(f, _)| 2 + f.len() + 1).sum::<usize>();
    fixed_header(out, 0x82, rem);
    out.extend_from_slice(&packet_id.to_be_bytes());
    if v == Version::V5 {
        out.push(0);
    }
    for (f, qos) in filters {
        put_bytes(out, f.as_bytes());
        out.push(*qos as u8);
    }
}

/// UNSUBSCRIBE (type 10, flags 0b0010): packet id, MQTT 5 properties (none), the filters.
pub fn encode_unsubscribe(out: &mut Vec<u8>, v: Version, packet_id: u16, filters: &[&str]) {
    let rem =
        2 + usize::from(v == Version::V5) + filters.iter().map(|f| 2 + f.len()).sum::<usize>();
    fixed_header(out, 0xa2, rem);
    out.extend_from_slice(&packet_id.to_be_bytes());
    if v == Version::V5 {
        out.push(0);
    }
    for f in filters {
        put_bytes(out, f.as_bytes());
    }
}

/// PINGREQ (type 12): two bytes.
pub fn encode_pingreq(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0xc0, 0x00]);
}

/// DISCONNECT (type 14), normal disconnection: two bytes in both versions (MQTT 5 lets the
/// reason code 0x00 and the properties be left out). The broker discards the will.
pub fn encode_disconnect(out: &mut Vec<u8>, _v: Version) {
    out.extend_from_slice(&[0xe0, 0x00]);
}

/// DISCONNECT with an MQTT 5 reason code, e.g. 0x04 "Disconnect with Will Message" (the broker
/// then publishes the will). MQTT 3.1.1 has no reason code: the same as [`encode_disconnect`].
pub fn encode_disconnect_reason(out: &mut Vec<u8>, v: Version, reason: u8) {
    if v == Version::V5 && reason != 0 {
        out.extend_from_slice(&[0xe0, 0x01, reason]);
    } else {
        encode_disconnect(out, v);
    }
}

/// An acknowledgement: type and flags byte, packet id, and in MQTT 5 a reason code when it is
/// not 0x00 (Success; then the remaining length is 2 and both the code and the properties are
/// left out, as MQTT 5 allows).
pub(crate) fn ack(out: &mut Vec<u8>, byte0: u8, packet_id: u16, reason: u8) {
    let [hi, lo] = packet_id.to_be_bytes();
    if reason == 0 {
        out.extend_from_slice(&[byte0, 0x02, hi, lo]);
    } else {
        out.extend_from_slice(&[byte0, 0x03, hi, lo, reason]);
    }
}

/// PUBACK (type 4): our answer to a QoS 1 PUBLISH. The same bytes in both versions.
pub fn encode_puback(out: &mut Vec<u8>, packet_id: u16) {
    ack(out, 0x40, packet_id, 0);
}

/// PUBREC (type 5): our first answer to a QoS 2 PUBLISH.
pub fn encode_pubrec(out: &mut Vec<u8>, packet_id: u16) {
    ack(out, 0x50, packet_id, 0);
}

/// PUBREL (type 6, flags 0b0010): our answer to the PUBREC of our QoS 2 PUBLISH.
pub fn encode_pubrel(out: &mut Vec<u8>, packet_id: u16) {
    ack(out, 0x62, packet_id, 0);
}

/// PUBCOMP (type 7): our answer to a PUBREL. `reason` (MQTT 5 only, 0 in 3.1.1): 0x00 Success
/// or 0x92 Packet Identifier not found.
pub fn encode_pubcomp(out: &mut Vec<u8>, v: Version, packet_id: u16, reason: u8) {
    let reason = if v == Version::V5 { reason } else { 0 };
    ack(out, 0x70, packet_id, reason);
}
