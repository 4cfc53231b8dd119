//! Unit tests of the MQTT codec: encoders byte for byte against the specifications' examples,
//! every server packet, every error and bound, and the client on byte streams recorded from a
//! real mosquitto 2.0.11 (`testdata/`, re-recorded by `tests/mqtt_server.rs`'s
//! `record_testdata`), split every way. The central property: a stream gives the same events
//! and the same answers however it is split.

use super::encode::put_varint;
use super::*;
use crate::test_rng::Rng;
use headroom_testkit::thread_allocs as allocs;

const SESSION_V4: &[u8] = include_bytes!("testdata/session_v4.server.bin");
const SESSION_V4_CLIENT: &[u8] = include_bytes!("testdata/session_v4.client.bin");
const SESSION_V4_ANSWERS: &[u8] = include_bytes!("testdata/session_v4.answers.bin");
const SESSION_V5: &[u8] = include_bytes!("testdata/session_v5.server.bin");
const SESSION_V5_CLIENT: &[u8] = include_bytes!("testdata/session_v5.client.bin");
const SESSION_V5_ANSWERS: &[u8] = include_bytes!("testdata/session_v5.answers.bin");
const REFUSED_V4: &[u8] = include_bytes!("testdata/refused_v4.server.bin");
const REFUSED_V5: &[u8] = include_bytes!("testdata/refused_v5.server.bin");

use Version::{V311, V5};

/// One packet: `byte0`, the remaining length, `body`.
fn pkt(byte0: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![byte0];
    put_varint(&mut v, body.len());
    v.extend_from_slice(body);
    v
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// A PUBLISH from the server: topic, packet id (QoS 1/2), MQTT 5 properties, payload.
fn publish(v: Version, flags: u8, topic: &str, id: u16, props: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(topic.len() as u16).to_be_bytes());
    b.extend_from_slice(topic.as_bytes());
    if flags & 0x06 != 0 {
        b.extend_from_slice(&id.to_be_bytes());
    }
    if v == V5 {
        put_varint(&mut b, props.len());
        b.extend_from_slice(props);
    }
    b.extend_from_slice(payload);
    pkt(0x30 | flags, &b)
}

const CONNACK_V4: &[u8] = b"\x20\x02\x00\x00";
const CONNACK_V5: &[u8] = b"\x20\x03\x00\x00\x00";

fn connack(v: Version) -> &'static [u8] {
    match v {
        V311 => CONNACK_V4,
        V5 => CONNACK_V5,
    }
}

/// Random pieces of `data` of 0..=max bytes (0: an empty slice is fed too).
fn random_pieces<'a>(rng: &mut Rng, data: &'a [u8], max: usize) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let n = rng.below(max + 1).min(rest.len());
        let (a, b) = rest.split_at(n);
        pieces.push(a);
        rest = b;
    }
    pieces
}

// ---- owned events and runs ----

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    ConnAck(bool),
    Message(Vec<u8>, Vec<u8>, QoS, bool, bool),
    PubAck(u16, u8),
    PubComp(u16, u8),
    SubAck(u16, u8, u16),
    UnsubAck(u16, u16),
    PingResp,
    Disconnect(u8),
}

fn owned(e: Event<'_>) -> Option<Ev> {
    Some(match e {
        Event::NeedMore => return None,
        Event::ConnAck { session_present } => Ev::ConnAck(session_present),
        Event::Message {
            topic,
            payload,
            qos,
            retain,
            dup,
        } => Ev::Message(topic.to_vec(), payload.to_vec(), qos, retain, dup),
        Event::PubAck { packet_id, reason } => Ev::PubAck(packet_id, reason),
        Event::PubComp { packet_id, reason } => Ev::PubComp(packet_id, reason),
        Event::SubAck {
            packet_id,
            granted,
            failures,
        } => Ev::SubAck(packet_id, granted, failures),
        Event::UnsubAck {
            packet_id,
            failures,
        } => Ev::UnsubAck(packet_id, failures),
        Event::PingResp => Ev::PingResp,
        Event::Disconnect { reason } => Ev::Disconnect(reason),
    })
}

fn msg(topic: &str, payload: &[u8], qos: QoS, retain: bool, dup: bool) -> Ev {
    Ev::Message(topic.into(), payload.into(), qos, retain, dup)
}

#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<Ev>,
    /// What the client answered.
    out: Vec<u8>,
    /// The first error, or `eof()` after the last piece.
    end: Result<(), MqttError>,
}

/// A client of version `v` announcing `alias_max` topic aliases, fed `pieces`.
fn run_with(client: &mut Client, pieces: &mut dyn Iterator<Item = &[u8]>) -> Outcome {
    let mut out = Vec::new();
    let mut events = Vec::new();
    let mut end = Ok(());
    'feed: for piece in pieces {
        let mut p = piece;
        loop {
            match client.decode(p, &mut out) {
                Err(e) => {
                    // Sticky, and eof() adds no second error.
                    assert_eq!(client.decode(b"\xd0\x00", &mut out).map(|r| r.0), Err(e));
                    assert_eq!(client.eof(), Ok(()));
                    assert!(!client.is_connected());
                    end = Err(e);
                    break 'feed;
                }
                Ok((n, ev)) => {
                    let ev = owned(ev);
                    match ev {
                        None => {
                            assert_eq!(n, p.len(), "NeedMore must consume everything");
                            break;
                        }
                        Some(ev) => {
                            assert!(n > 0 && n <= p.len(), "{ev:?} consumed {n} of {}", p.len());
                            events.push(ev);
                            p = &p[n..];
                        }
                    }
                }
            }
        }
    }
    if end.is_ok() {
        end = client.eof();
    }
    Outcome { events, out, end }
}

fn client(v: Version, alias_max: u16) -> Client {
    let c = Connect {
        topic_alias_maximum: alias_max,
        ..Connect::new(v, "t")
    };
    Client::connect(&c, &mut Vec::new())
}

fn run<'a>(v: Version, alias_max: u16, pieces: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    run_with(&mut client(v, alias_max), &mut pieces.into_iter())
}

/// `bytes` after a CONNACK, in one piece; the events after the ConnAck.
fn after_connack(v: Version, bytes: &[u8]) -> Outcome {
    let stream = cat(&[connack(v).to_vec(), bytes.to_vec()]);
    let mut o = run(v, 4, [&stream[..]]);
    assert_eq!(o.events.first(), Some(&Ev::ConnAck(false)), "{o:?}");
    o.events.remove(0);
    o
}

fn error_of(v: Version, bytes: &[u8]) -> MqttError {
    after_connack(v, bytes).end.expect_err("an error")
}

// ---- encoders ----

#[test]
fn varints_are_the_specs_table() {
    // MQTT 3.1.1 Table 2.4 / MQTT 5 1.5.5: the smallest and largest value of each length.
    for (n, want) in [
        (0usize, &b"\x00"[..]),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (2_097_151, b"\xff\xff\x7f"),
        (2_097_152, b"\x80\x80\x80\x01"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ] {
        let mut out = Vec::new();
        put_varint(&mut out, n);
        assert_eq!(out, want, "{n}");
        assert_eq!(encode::varint_len(n), want.len());
    }
}

#[test]
fn connect_3_1_1_bytes() {
    // The flags of MQTT 3.1.1's example (3.1.2.11, Figure 3.6): user name, password, will QoS
    // 1, will flag, clean session = 0xCE; keep alive 10.
    let c = Connect {
        keep_alive: 10,
        username: Some("u"),
        password: Some(b"pw"),
        will: Some(Will {
            topic: "w",
            payload: b"bye",
            qos: QoS::AtLeastOnce,
            retain: false,
        }),
        ..Connect::new(V311, "cid")
    };
    let mut out = b"keep".to_vec(); // encoders append
    encode_connect(&mut out, &c);
    let want: &[u8] = &[
        b'k', b'e', b'e', b'p', //
        0x10, 30, // CONNECT, remaining length 30
        0, 4, b'M', b'Q', b'T', b'T', // protocol name
        4,    // protocol level: 3.1.1
        0xce, // flags: user name, password, will QoS 1, will, clean session
        0, 10, // keep alive 10 s
        0, 3, b'c', b'i', b'd', // client id
        0, 1, b'w', // will topic
        0, 3, b'b', b'y', b'e', // will payload
        0, 1, b'u', // user name
        0, 2, b'p', b'w', // password
    ];
    assert_eq!(out, want);

    // The smallest: empty client id, clean session, keep alive 60; a retained QoS 2 will.
    out.clear();
    encode_connect(&mut out, &Connect::new(V311, ""));
    assert_eq!(out, b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00");
    out.clear();
    let c = Connect {
        clean_start: false,
        keep_alive: 0,
        will: Some(Will {
            topic: "",
            payload: b"",
            qos: QoS::ExactlyOnce,
            retain: true,
        }),
        session_expiry: 99, // MQTT 5 only: ignored
        topic_alias_maximum: 9,
        max_packet_size: 1000,
        ..Connect::new(V311, "a")
    };
    encode_connect(&mut out, &c);
    // flags: will retain 0x20 | will QoS 2 0x10 | will 0x04 = 0x34.
    assert_eq!(
        out,
        b"\x10\x11\x00\x04MQTT\x04\x34\x00\x00\x00\x01a\x00\x00\x00\x00"
    );
}

#[test]
fn connect_5_bytes() {
    // MQTT 5's example (3.1.2.11, Figure 3-8): level 5, flags 0xCE, keep alive 10, properties
    // length 5: Session Expiry Interval (0x11) 10.
    let c = Connect {
        keep_alive: 10,
        username: Some("u"),
        password: Some(b"pw"),
        will: Some(Will {
            topic: "w",
            payload: b"bye",
            qos: QoS::AtLeastOnce,
            retain: false,
        }),
        session_expiry: 10,
        ..Connect::new(V5, "cid")
    };
    let mut out = Vec::new();
    encode_connect(&mut out, &c);
    let want: &[u8] = &[
        0x10, 37, // CONNECT, remaining length 37
        0, 4, b'M', b'Q', b'T', b'T', // protocol name
        5,    // protocol version 5
        0xce, // flags
        0, 10, // keep alive
        5, 0x11, 0, 0, 0, 10, // properties: 5 bytes, Session Expiry Interval 10
        0, 3, b'c', b'i', b'd', // client id
        0,    // will properties: none
        0, 1, b'w', // will topic
        0, 3, b'b', b'y', b'e', // will payload
        0, 1, b'u', // user name
        0, 2, b'p', b'w', // password
    ];
    assert_eq!(out, want);

    // Topic Alias Maximum (0x22) capped to MAX_TOPIC_ALIASES, Maximum Packet Size (0x27); a
    // password without a user name (allowed in MQTT 5).
    out.clear();
    let c = Connect {
        password: Some(b"p"),
        topic_alias_maximum: 1000,
        max_packet_size: 0x0001_0000,
        ..Connect::new(V5, "")
    };
    encode_connect(&mut out, &c);
    assert_eq!(
        out,
        b"\x10\x18\x00\x04MQTT\x05\x42\x00\x3c\x08\x22\x00\x40\x27\x00\x01\x00\x00\x00\x00\x00\x01p"
    );
    // No properties at all: a zero length.
    out.clear();
    encode_connect(&mut out, &Connect::new(V5, ""));
    assert_eq!(out, b"\x10\x0d\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x00");
}

#[test]
fn connect_is_what_the_broker_accepted() {
    // The recordings' first packets: the CONNECT of tests/mqtt_server.rs's scripted session,
    // which mosquitto accepted (the recorded CONNACKs say 0).
    for (v, client) in [(V311, SESSION_V4_CLIENT), (V5, SESSION_V5_CLIENT)] {
        let id = format!("headroom-rec-{}", v.level());
        let c = Connect {
            username: Some("headroom"),
            password: Some(b"headroom"),
            ..Connect::new(v, &id)
        };
        let mut out = Vec::new();
        encode_connect(&mut out, &c);
        assert!(client.starts_with(&out), "{v:?}");
    }
}

#[test]
fn publish_bytes() {
    let mut out = Vec::new();
    // MQTT 3.1.1 3.3.2.3's example: topic "a/b", packet identifier 10; QoS 1.
    encode_publish(
        &mut out,
        V311,
        "a/b",
        QoS::AtLeastOnce,
        false,
        false,
        10,
        b"hi",
    );
    assert_eq!(
        out,
        [
            0x32, 9, // PUBLISH, QoS 1; remaining length 9
            0, 3, b'a', b'/', b'b', // topic
            0, 10, // packet id
            b'h', b'i', // payload
        ]
    );
    // MQTT 5: a property length of 0 after the packet id.
    out.clear();
    encode_publish(
        &mut out,
        V5,
        "a/b",
        QoS::AtLeastOnce,
        false,
        false,
        10,
        b"hi",
    );
    assert_eq!(out, b"\x32\x0a\x00\x03a/b\x00\x0a\x00hi");
    // QoS 0: no packet id, DUP forced to 0; RETAIN.
    out.clear();
    encode_publish(&mut out, V311, "t", QoS::AtMostOnce, true, true, 7, b"");
    assert_eq!(out, b"\x31\x03\x00\x01t");
    // QoS 2, DUP, RETAIN: 0x30 | 0x08 | 0x04 | 0x01.
    out.clear();
    encode_publish(
        &mut out,
        V5,
        "t",
        QoS::ExactlyOnce,
        true,
        true,
        0x1234,
        b"x",
    );
    assert_eq!(out, b"\x3d\x07\x00\x01t\x12\x34\x00x");
    // A two-byte remaining length: 2 + 3 + 2 + 1 + 200 = 208 = 0xd0 0x01.
    out.clear();
    encode_publish(
        &mut out,
        V5,
        "a/b",
        QoS::AtLeastOnce,
        false,
        false,
        1,
        &[7; 200],
    );
    assert_eq!(&out[..3], b"\x32\xd0\x01");
    assert_eq!(out.len(), 3 + 208);

    // The two-part payload is the same packet as the payload in one piece.
    for v in [V311, V5] {
        for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
            for fill_len in [0, 1, 100, 20_000] {
                let mut payload = b"stamp".to_vec();
                payload.resize(5 + fill_len, b'.');
                let mut want = Vec::new();
                encode_publish(&mut want, v, "x/y", qos, true, false, 9, &payload);
                let mut got = b"before".to_vec();
                encode_publish_parts(&mut got, v, "x/y", qos, true, 9, b"stamp", b'.', fill_len);
                assert_eq!(&got[..6], b"before");
                assert_eq!(got[6..], want[..], "{v:?} {qos:?} {fill_len}");
            }
        }
    }
}

#[test]
fn subscribe_unsubscribe_and_short_packets_bytes() {
    let mut out = Vec::new();
    // MQTT 3.1.1 3.8.3's example: packet id 10, "a/b" QoS 1, "c/d" QoS 2.
    encode_subscribe(
        &mut out,
        V311,
        10,
        &[("a/b", QoS::AtLeastOnce), ("c/d", QoS::ExactlyOnce)],
    );
    assert_eq!(
        out,
        [
            0x82, 14, // SUBSCRIBE (flags 0b0010), remaining length 14
            0, 10, // packet id
            0, 3, b'a', b'/', b'b', 1, // filter, options: QoS 1
            0, 3, b'c', b'/', b'd', 2, // filter, options: QoS 2
        ]
    );
    out.clear();
    encode_subscribe(&mut out, V5, 10, &[("a/b", QoS::AtMostOnce)]);
    // Packet id, property length 0, the filter and its options.
    assert_eq!(out, b"\x82\x09\x00\x0a\x00\x00\x03a/b\x00");
    // MQTT 3.1.1 3.10.3's example: packet id 10, "a/b", "c/d".
    out.clear();
    encode_unsubscribe(&mut out, V311, 10, &["a/b", "c/d"]);
    assert_eq!(out, b"\xa2\x0c\x00\x0a\x00\x03a/b\x00\x03c/d");
    out.clear();
    encode_unsubscribe(&mut out, V5, 10, &["a/b"]);
    assert_eq!(out, b"\xa2\x08\x00\x0a\x00\x00\x03a/b");

    out.clear();
    encode_pingreq(&mut out);
    encode_disconnect(&mut out, V311);
    encode_disconnect(&mut out, V5);
    encode_disconnect_reason(&mut out, V5, 0x04); // Disconnect with Will Message
    encode_disconnect_reason(&mut out, V5, 0x00);
    encode_disconnect_reason(&mut out, V311, 0x04); // no reason codes in 3.1.1
    assert_eq!(out, b"\xc0\x00\xe0\x00\xe0\x00\xe0\x01\x04\xe0\x00\xe0\x00");
    out.clear();
    encode_puback(&mut out, 0x0102);
    encode_pubrec(&mut out, 0x0102);
    encode_pubrel(&mut out, 0x0102); // flags 0b0010
    encode_pubcomp(&mut out, V311, 0x0102, 0x92); // no reason codes in 3.1.1
    encode_pubcomp(&mut out, V5, 0x0102, 0x92); // Packet Identifier not found
    encode_pubcomp(&mut out, V5, 0x0102, 0);
    assert_eq!(
        out,
        b"\x40\x02\x01\x02\x50\x02\x01\x02\x62\x02\x01\x02\x70\x02\x01\x02\x70\x03\x01\x02\x92\x70\x02\x01\x02"
    );
}

#[test]
#[should_panic(expected = "protocol's limit is 65535")]
fn a_topic_over_64_kib_panics() {
    let topic = "t".repeat(65_536);
    encode_publish(
        &mut Vec::new(),
        V311,
        &topic,
        QoS::AtMostOnce,
        false,
        false,
        0,
        b"",
    );
}

#[test]
fn a_topic_of_64_kib_is_fine() {
    let topic = "t".repeat(65_535);
    let mut out = Vec::new();
    encode_publish(
        &mut out,
        V311,
        &topic,
        QoS::AtMostOnce,
        false,
        false,
        0,
        b"",
    );
    assert_eq!(&out[..6], b"\x30\x81\x80\x04\xff\xff"); // 65537 = 0x81 0x80 0x04
}

// ---- the recorded sessions ----

#[test]
fn recorded_sessions_replay() {
    use QoS::*;
    for (v, server, answers) in [
        (V311, SESSION_V4, SESSION_V4_ANSWERS),
        (V5, SESSION_V5, SESSION_V5_ANSWERS),
    ] {
        let o = run(v, 0, [server]);
        assert_eq!(o.end, Ok(()), "{v:?}");
        // What the client answered is what the real broker got (and completed the flows with).
        assert_eq!(o.out, answers, "{v:?}");
        let base = format!("hrt/rec/{}", v.level());
        let m = |q: u8, len: usize, qos: QoS| {
            Ev::Message(
                format!("{base}/{q}/q").into_bytes(),
                vec![b'0' + q; len],
                qos,
                false,
                false,
            )
        };
        // SUBACK: "+/q" granted QoS 2, "#" QoS 1. Our publishes: QoS 0, then QoS 1 (id 2),
        // QoS 2 (id 3), each delivered back to us (3.1.1: one copy at the highest QoS; 5: a
        // copy per subscription), the pings, the UNSUBACK (id 4).
        let want = match v {
            V311 => vec![
                Ev::ConnAck(false),
                Ev::SubAck(1, 2, 0),
                m(0, 300, AtMostOnce),
                m(1, 600, AtLeastOnce),
                Ev::PubAck(2, 0),
                m(2, 900, ExactlyOnce),
                Ev::PubComp(3, 0),
                Ev::PingResp,
                Ev::PingResp,
                Ev::UnsubAck(4, 0),
                Ev::PingResp,
            ],
            V5 => vec![
                Ev::ConnAck(false),
                Ev::SubAck(1, 2, 0),
                m(0, 300, AtMostOnce),
                m(0, 300, AtMostOnce),
                m(1, 600, AtLeastOnce),
                m(1, 600, AtLeastOnce),
                Ev::PubAck(2, 0),
                m(2, 900, ExactlyOnce),
                m(2, 900, AtLeastOnce),
                Ev::PubComp(3, 0),
                Ev::PingResp,
                Ev::PingResp,
                Ev::UnsubAck(4, 0),
                Ev::PingResp,
            ],
        };
        assert_eq!(o.events, want, "{v:?}");
    }
    // The refusals of a wrong password.
    assert_eq!(run(V311, 0, [REFUSED_V4]).end, Err(MqttError::Refused(5)));
    assert_eq!(run(V5, 0, [REFUSED_V5]).end, Err(MqttError::Refused(0x87)));
    // mosquitto's MQTT 5 CONNACK says Topic Alias Maximum 10.
    let mut c = client(V5, 0);
    c.decode(&SESSION_V5[..8], &mut Vec::new()).unwrap();
    assert_eq!(c.server_limits().topic_alias_maximum, 10);
}

/// A stream with every server packet the client takes, both versions' flavours.
fn everything(v: Version) -> Vec<u8> {
    let mut parts = vec![
        b"\x20\x02\x01\x00".to_vec(),   // CONNACK, session present
        pkt(0x90, b"\x00\x01\x01\x80"), // SUBACK: QoS 1, failure (MQTT 5: below)
        publish(v, 0x00, "a/b", 0, b"", b"qos0"),
        publish(v, 0x01, "a/b", 0, b"", b""), // retained, empty
        publish(v, 0x02, "c", 7, b"", b"qos1"),
        publish(v, 0x04, "d", 8, b"", b"qos2"),
        publish(v, 0x0c, "d", 8, b"", b"qos2"), // DUP of a held id: not reported again
        pkt(0x62, b"\x00\x08"),                 // PUBREL 8: PUBCOMP
        publish(v, 0x0c, "d", 8, b"", b"again"), // id 8 free again: a new message
        pkt(0x62, b"\x00\x08"),
        pkt(0x62, b"\x00\x09"), // PUBREL for an id not held: PUBCOMP anyway
        pkt(0x40, b"\x00\x02"), // PUBACK
        pkt(0x50, b"\x00\x03"), // PUBREC: PUBREL
        pkt(0x70, b"\x00\x03"), // PUBCOMP
        pkt(0xd0, b""),         // PINGRESP
    ];
    if v == V311 {
        parts.push(pkt(0xb0, b"\x00\x05")); // UNSUBACK
    } else {
        // CONNACK with properties: Receive Maximum 20, Maximum QoS 1, Retain Available 0,
        // Maximum Packet Size 4096, Topic Alias Maximum 5, Server Keep Alive 30, Assigned
        // Client Identifier "x", User Property ("k", "v").
        parts[0] = pkt(
            0x20,
            b"\x01\x00\x1d\x21\x00\x14\x24\x01\x25\x00\x27\x00\x00\x10\x00\x22\x00\x05\
              \x13\x00\x1e\x12\x00\x01x\x26\x00\x01k\x00\x01v",
        );
        // SUBACK: packet id, no properties, QoS 1, failure.
        parts[1] = pkt(0x90, b"\x00\x01\x00\x01\x80");
        parts.extend([
            // Topic aliases: set 1 = "al/one", use it, replace it, use it.
            publish(v, 0x00, "al/one", 0, b"\x23\x00\x01", b"set"),
            publish(v, 0x02, "", 10, b"\x23\x00\x01", b"use"),
            publish(v, 0x00, "al/two", 0, b"\x23\x00\x01\x01\x01", b"reset"),
            publish(v, 0x04, "", 11, b"\x23\x00\x01\x0b\x05", b"use 2"),
            // PUBLISH properties skipped: Message Expiry, Content Type, Response Topic,
            // Correlation Data, User Property, Subscription Identifier (3 bytes).
            publish(
                v,
                0x00,
                "p",
                0,
                b"\x02\x00\x00\x00\x05\x03\x00\x01t\x08\x00\x01r\x09\x00\x02cd\
                  \x26\x00\x01k\x00\x02vv\x0b\xff\xff\x01",
                b"props",
            ),
            pkt(0x40, b"\x00\x04\x10"), // PUBACK: No matching subscribers
            pkt(0x40, b"\x00\x05\x80\x03\x1f\x00\x00"), // PUBACK failure, a Reason String
            pkt(0x50, b"\x00\x06\x97"), // PUBREC Quota exceeded: done, no PUBREL
            pkt(0x70, b"\x00\x07\x92"), // PUBCOMP Packet Identifier not found
            pkt(0x90, b"\x00\x0a\x00\x02\x00\x87\x8f"), // SUBACK: QoS 2, QoS 0, two failures
            pkt(0xb0, b"\x00\x0b\x00\x00\x11\x87"), // UNSUBACK: success, none existed, failure
            pkt(0xe0, b"\x8e\x06\x1f\x00\x03bye"), // DISCONNECT: Session taken over
        ]);
    }
    cat(&parts)
}

#[test]
fn every_server_packet() {
    use QoS::*;
    let o = run(V311, 0, [&everything(V311)[..]]);
    assert_eq!(o.end, Ok(()));
    assert_eq!(
        o.events,
        [
            Ev::ConnAck(true),
            Ev::SubAck(1, 1, 1),
            msg("a/b", b"qos0", AtMostOnce, false, false),
            msg("a/b", b"", AtMostOnce, true, false),
            msg("c", b"qos1", AtLeastOnce, false, false),
            msg("d", b"qos2", ExactlyOnce, false, false),
            msg("d", b"again", ExactlyOnce, false, true),
            Ev::PubAck(2, 0),
            Ev::PubComp(3, 0),
            Ev::PingResp,
            Ev::UnsubAck(5, 0),
        ]
    );
    assert_eq!(
        o.out,
        cat(&[
            b"\x40\x02\x00\x07".to_vec(), // PUBACK 7
            b"\x50\x02\x00\x08".to_vec(), // PUBREC 8
            b"\x50\x02\x00\x08".to_vec(), // PUBREC 8 again (the DUP)
            b"\x70\x02\x00\x08".to_vec(), // PUBCOMP 8
            b"\x50\x02\x00\x08".to_vec(), // PUBREC 8 (the new message)
            b"\x70\x02\x00\x08".to_vec(), // PUBCOMP 8
            b"\x70\x02\x00\x09".to_vec(), // PUBCOMP 9 (not held)
            b"\x62\x02\x00\x03".to_vec(), // PUBREL 3
        ])
    );

    let mut c = client(V5, 4);
    let o = run_with(&mut c, &mut [&everything(V5)[..]].into_iter());
    assert_eq!(o.end, Ok(()));
    assert_eq!(
        o.events,
        [
            Ev::ConnAck(true),
            Ev::SubAck(1, 1, 1),
            msg("a/b", b"qos0", AtMostOnce, false, false),
            msg("a/b", b"", AtMostOnce, true, false),
            msg("c", b"qos1", AtLeastOnce, false, false),
            msg("d", b"qos2", ExactlyOnce, false, false),
            msg("d", b"again", ExactlyOnce, false, true),
            Ev::PubAck(2, 0),
            Ev::PubComp(3, 0),
            Ev::PingResp,
            msg("al/one", b"set", AtMostOnce, false, false),
            msg("al/one", b"use", AtLeastOnce, false, false),
            msg("al/two", b"reset", AtMostOnce, false, false),
            msg("al/two", b"use 2", ExactlyOnce, false, false),
            msg("p", b"props", AtMostOnce, false, false),
            Ev::PubAck(4, 0x10),
            Ev::PubAck(5, 0x80),
            Ev::PubComp(6, 0x97),
            Ev::PubComp(7, 0x92),
            Ev::SubAck(10, 2, 2),
            Ev::UnsubAck(11, 1),
            Ev::Disconnect(0x8e),
        ]
    );
    assert_eq!(
        o.out,
        cat(&[
            b"\x40\x02\x00\x07".to_vec(),
            b"\x50\x02\x00\x08".to_vec(),
            b"\x50\x02\x00\x08".to_vec(),
            b"\x70\x02\x00\x08".to_vec(),
            b"\x50\x02\x00\x08".to_vec(),
            b"\x70\x02\x00\x08".to_vec(),
            b"\x70\x03\x00\x09\x92".to_vec(), // PUBCOMP 9: Packet Identifier not found
            b"\x62\x02\x00\x03".to_vec(),
            b"\x40\x02\x00\x0a".to_vec(), // PUBACK 10 (the aliased QoS 1)
            b"\x50\x02\x00\x0b".to_vec(), // PUBREC 11 (the aliased QoS 2)
        ])
    );
    assert_eq!(
        c.server_limits(),
        ServerLimits {
            receive_maximum: 20,
            maximum_qos: AtLeastOnce,
            retain_available: false,
            maximum_packet_size: Some(4096),
            topic_alias_maximum: 5,
            server_keep_alive: Some(30),
            wildcard_subscriptions: true,
            shared_subscriptions: true,
        }
    );
    assert_eq!(c.awaiting_pubrel(), 1); // 11, never released
    assert!(!c.is_connected()); // after the server's DISCONNECT
                                // After DISCONNECT, nothing more may come.
    let mut out = Vec::new();
    assert_eq!(
        c.decode(b"\xd0\x00", &mut out).map(|r| r.0),
        Err(MqttError::Unexpected(13))
    );
}

#[test]
fn connack_variants() {
    let first = |v: Version, bytes: &[u8]| {
        let o = run(v, 0, [bytes]);
        (o.events, o.end)
    };
    let ok = |p: bool| (vec![Ev::ConnAck(p)], Ok(()));
    let refused = |c: u8| (vec![], Err(MqttError::Refused(c)));
    assert_eq!(first(V311, b"\x20\x02\x00\x00"), ok(false));
    assert_eq!(first(V311, b"\x20\x02\x01\x00"), ok(true));
    // 3.1.1 return codes 1 to 5.
    for code in 1..=5 {
        assert_eq!(first(V311, &[0x20, 2, 0, code]), refused(code));
    }
    assert_eq!(first(V5, b"\x20\x03\x00\x00\x00"), ok(false));
    assert_eq!(first(V5, b"\x20\x03\x01\x00\x00"), ok(true));
    // 0x86 Bad User Name or Password, with a Reason String.
    assert_eq!(
        first(V5, b"\x20\x07\x00\x86\x04\x1f\x00\x01x"),
        refused(0x86)
    );
    // A 3.1.1-only broker answering an MQTT 5 CONNECT: 2 bytes, code 1.
    assert_eq!(first(V5, b"\x20\x02\x00\x01"), refused(1));
    // Server keep alive; Maximum QoS 0.
    let mut c = client(V5, 0);
    c.decode(b"\x20\x08\x00\x00\x05\x13\x00\x05\x24\x00", &mut Vec::new())
        .unwrap();
    let l = c.server_limits();
    assert_eq!(
        (l.server_keep_alive, l.maximum_qos),
        (Some(5), QoS::AtMostOnce)
    );
    assert_eq!(client(V5, 0).server_limits(), ServerLimits::default());
}

// ---- errors ----

#[test]
fn every_error() {
    use MqttError::*;
    // A remaining length whose 4th byte says more: BadLength, found at its 5th header byte.
    let o = run(V311, 0, [&b"\x20\x80\x80\x80\x80\x01"[..]]);
    assert_eq!(o.end, Err(BadLength));
    assert_eq!(error_of(V5, b"\x30\xff\xff\xff\xff"), BadLength);
    // Over the limit (fixed header included): TooLong as soon as the header says so.
    let mut c = client(V311, 0);
    c.set_max_packet(10);
    let mut out = Vec::new();
    c.decode(CONNACK_V4, &mut out).unwrap();
    let ok = publish(V311, 0, "t", 0, b"", b"12345"); // 2 + 8 = 10 bytes
    assert_eq!(ok.len(), 10);
    assert!(matches!(
        c.decode(&ok, &mut out),
        Ok((10, Event::Message { .. }))
    ));
    let long = publish(V311, 0, "t", 0, b"", b"123456");
    assert_eq!(c.decode(&long[..2], &mut out).map(|r| r.0), Err(TooLong));
    assert_eq!(
        c.buffer_capacity(),
        0,
        "refused before any of it was buffered"
    );

    // Malformed, by packet type.
    let malformed: &[(Version, Vec<u8>, u8)] = &[
        (V311, b"\x20\x02\x02\x00".to_vec(), 2), // CONNACK reserved flag bit
        (V311, b"\x20\x03\x00\x00\x00".to_vec(), 2), // 3.1.1 CONNACK of 3 bytes
        (V311, b"\x20\x01\x00".to_vec(), 2),
        (V311, b"\x21\x02\x00\x00".to_vec(), 2), // flags on CONNACK
        (V5, b"\x20\x04\x00\x00\x02\x24".to_vec(), 2), // property cut short
        (V5, b"\x20\x05\x00\x00\x02\x24\x02".to_vec(), 2), // Maximum QoS 2
        (V5, b"\x20\x06\x00\x00\x03\x21\x00\x00".to_vec(), 2), // Receive Maximum 0
        (V5, b"\x20\x05\x00\x00\x02\x23\x00".to_vec(), 2), // cut Topic Alias (not allowed)
        (V5, b"\x20\x06\x00\x00\x03\x23\x00\x01".to_vec(), 2), // Topic Alias: not in CONNACK
        (V5, b"\x20\x05\x00\x00\x01\x24\x00".to_vec(), 2), // more after the properties
        (V5, b"\x20\x04\x00\x00\x01\x7f".to_vec(), 2), // unknown property
    ];
    for (v, bytes, ty) in malformed {
        assert_eq!(
            run(*v, 0, [&bytes[..]]).end,
            Err(Malformed(*ty)),
            "{bytes:x?}"
        );
    }
    let malformed_after: &[(Version, Vec<u8>, u8)] = &[
        (V311, pkt(0x36, b"\x00\x01t\x00\x01"), 3), // QoS 3
        (V311, pkt(0x38, b"\x00\x01t"), 3),         // DUP at QoS 0
        (V311, pkt(0x30, b"\x00\x05t"), 3),         // topic past the end
        (V311, pkt(0x30, b"\x00"), 3),
        (V311, pkt(0x32, b"\x00\x01t\x00\x00"), 3), // packet id 0
        (V311, pkt(0x32, b"\x00\x01t\x00"), 3),     // packet id cut
        (V311, pkt(0x30, b"\x00\x00x"), 3),         // empty topic, no alias
        (V5, publish(V5, 0, "", 0, b"", b"x"), 3),  // empty topic, no alias
        (V5, pkt(0x30, b"\x00\x01t\x05\x02"), 3),   // properties past the end
        (V5, publish(V5, 0, "t", 0, b"\x11\x00\x00\x00\x01", b""), 3), // Session Expiry
        (V5, publish(V5, 0, "t", 0, b"\x0b\x80\x80\x80\x80", b""), 3), // varint of 5 bytes
        (
            V5,
            publish(V5, 0, "t", 0, b"\x26\x00\x01k\x00\x05v", b""),
            3,
        ), // pair cut
        (V311, pkt(0x40, b"\x00\x01\x00"), 4),      // 3.1.1 PUBACK of 3 bytes
        (V311, pkt(0x40, b"\x00"), 4),
        (V311, pkt(0x40, b"\x00\x00"), 4),       // packet id 0
        (V311, pkt(0x41, b"\x00\x01"), 4),       // flags
        (V5, pkt(0x40, b"\x00\x01\x00\x05"), 4), // properties past the end
        (V5, pkt(0x40, b"\x00\x01\x00\x02\x01\x00"), 4), // Payload Format: not in PUBACK
        (V311, pkt(0x52, b"\x00\x01"), 5),
        (V311, pkt(0x60, b"\x00\x01"), 6), // PUBREL without its 0b0010
        (V311, pkt(0x70, b""), 7),
        (V311, pkt(0x90, b"\x00\x01"), 9), // SUBACK without codes
        (V311, pkt(0x90, b"\x00\x01\x03"), 9), // code 3
        (V311, pkt(0x90, b"\x00\x01\x87"), 9), // MQTT 5 code in 3.1.1
        (V311, pkt(0x90, b"\x00\x00\x00"), 9), // packet id 0
        (V5, pkt(0x90, b"\x00\x01\x00\x04"), 9), // code 4
        (V311, pkt(0xb0, b"\x00\x01\x00"), 11), // 3.1.1 UNSUBACK of 3 bytes
        (V5, pkt(0xb0, b"\x00\x01\x00"), 11), // MQTT 5 UNSUBACK without codes
        (V5, pkt(0xb0, b"\x00\x01\x00\x02"), 11), // code 2
        (V311, pkt(0xd0, b"\x00"), 13),    // PINGRESP with a body
        (V311, pkt(0xd1, b""), 13),
        (V5, pkt(0xe0, b"\x00\x03"), 14), // DISCONNECT properties past the end
        (V5, pkt(0xe0, b"\x00\x02\x23\x00"), 14),
        (V5, pkt(0xe2, b""), 14),
    ];
    for (v, bytes, ty) in malformed_after {
        assert_eq!(error_of(*v, bytes), Malformed(*ty), "{v:?} {bytes:x?}");
    }

    // Unexpected: before the CONNACK, a second CONNACK, client-to-server packets, AUTH, a
    // 3.1.1 DISCONNECT, the reserved type 0.
    assert_eq!(run(V311, 0, [&b"\xd0\x00"[..]]).end, Err(Unexpected(13)));
    assert_eq!(
        run(V5, 0, [&publish(V5, 0, "t", 0, b"", b"")[..]]).end,
        Err(Unexpected(3))
    );
    for (v, bytes, ty) in [
        (V311, CONNACK_V4.to_vec(), 2),
        (V311, b"\x10\x00".to_vec(), 1),
        (V311, pkt(0x82, b"\x00\x01\x00\x01t\x00"), 8),
        (V311, pkt(0xa2, b"\x00\x01\x00\x01t"), 10),
        (V311, b"\xc0\x00".to_vec(), 12),
        (V311, b"\xe0\x00".to_vec(), 14),
        (V311, b"\xf0\x00".to_vec(), 15),
        (V5, b"\xf0\x00".to_vec(), 15),
        (V5, b"\x00\x00".to_vec(), 0),
    ] {
        assert_eq!(error_of(v, &bytes), Unexpected(ty), "{v:?} {bytes:x?}");
    }
    // Refused.
    assert_eq!(run(V311, 0, [REFUSED_V4]).end, Err(Refused(5)));

    // Topic aliases (the client announced 4): 0, above 4, never set.
    for props in [&b"\x23\x00\x00"[..], b"\x23\x00\x05", b"\x23\xff\xff"] {
        assert_eq!(
            error_of(V5, &publish(V5, 0, "t", 0, props, b"")),
            TopicAlias
        );
    }
    assert_eq!(
        error_of(V5, &publish(V5, 0, "", 0, b"\x23\x00\x02", b"")),
        TopicAlias
    );
    // A client that announced none takes none.
    let stream = cat(&[
        CONNACK_V5.to_vec(),
        publish(V5, 0, "t", 0, b"\x23\x00\x01", b""),
    ]);
    assert_eq!(run(V5, 0, [&stream[..]]).end, Err(TopicAlias));

    // Incomplete: the end mid-packet or before the CONNACK; fine between packets.
    assert_eq!(run(V311, 0, [&b""[..]]).end, Err(Incomplete));
    assert_eq!(run(V311, 0, [&b"\x20\x02\x00"[..]]).end, Err(Incomplete));
    assert_eq!(run(V311, 0, [CONNACK_V4]).end, Ok(()));
    let cut = cat(&[CONNACK_V4.to_vec(), b"\xd0".to_vec()]);
    assert_eq!(run(V311, 0, [&cut[..]]).end, Err(Incomplete));

    // Display names the packet.
    assert_eq!(Malformed(3).to_string(), "malformed PUBLISH packet");
    assert_eq!(Unexpected(2).to_string(), "unexpected CONNACK packet");
    assert_eq!(Refused(0x87).to_string(), "connection refused (code 0x87)");
}

#[test]
fn eof_is_clean_only_between_packets_once_connected() {
    for (v, stream) in [(V311, SESSION_V4), (V5, SESSION_V5)] {
        // Packet boundaries, found by a plain walk of the fixed headers.
        let mut boundaries = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let (len, n) = client_varint(&stream[at + 1..]);
            at += 1 + n + len;
            boundaries.push(at);
        }
        for cut in 0..stream.len() {
            let got = run(v, 0, [&stream[..cut]]).end;
            let want = if boundaries.contains(&cut) {
                Ok(())
            } else {
                Err(MqttError::Incomplete)
            };
            assert_eq!(got, want, "{v:?} cut at {cut}");
        }
    }
}

fn client_varint(b: &[u8]) -> (usize, usize) {
    let mut v = 0;
    for (i, byte) in b.iter().enumerate().take(4) {
        v |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("bad varint");
}

// ---- any split gives the same events ----

#[test]
fn any_split_gives_the_same_events_and_answers() {
    let streams: [(Version, u16, Vec<u8>); 4] = [
        (V311, 0, SESSION_V4.to_vec()),
        (V5, 0, SESSION_V5.to_vec()),
        (V311, 0, everything(V311)),
        (V5, 4, everything(V5)),
    ];
    let mut rng = Rng(0x6d717474);
    for (v, alias_max, stream) in &streams {
        let whole = run(*v, *alias_max, [&stream[..]]);
        assert_eq!(whole.end, Ok(()));
        for split in 0..=stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(run(*v, *alias_max, [a, b]), whole, "{v:?} split at {split}");
        }
        // Three pieces at every pair of points would be slow for the 3.7 kB recording: a
        // sample of them, bytewise, and random pieces.
        for _ in 0..500 {
            let i = rng.below(stream.len() + 1);
            let j = i + rng.below(stream.len() - i + 1);
            let pieces = [&stream[..i], &stream[i..j], &stream[j..]];
            assert_eq!(run(*v, *alias_max, pieces), whole, "{v:?} at {i}, {j}");
        }
        assert_eq!(run(*v, *alias_max, stream.chunks(1)), whole, "bytewise");
        for round in 0..300 {
            let pieces = random_pieces(&mut rng, stream, 40);
            assert_eq!(run(*v, *alias_max, pieces), whole, "{v:?} round {round}");
        }
    }
}

#[test]
fn hostile_bytes_never_panic() {
    // Mutated streams and random bytes, whole and split: any outcome but a panic, and the
    // split run agrees with the whole one.
    let seeds: [(Version, Vec<u8>); 4] = [
        (V311, SESSION_V4.to_vec()),
        (V5, SESSION_V5.to_vec()),
        (V311, everything(V311)),
        (V5, everything(V5)),
    ];
    let mut rng = Rng(0xbad);
    for round in 0..4000 {
        let (v, seed) = &seeds[round % seeds.len()];
        let mut data = seed.clone();
        match rng.below(4) {
            0 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(data.len());
                    data[at] = rng.next() as u8;
                }
            }
            1 => {
                let at = rng.below(data.len());
                data.truncate(at);
                let extra = rng.below(64);
                data.extend((0..extra).map(|_| rng.next() as u8));
            }
            2 => {
                let at = rng.below(data.len());
                let len = rng.below(32).min(data.len() - at);
                data.drain(at..at + len);
            }
            _ => {
                data = connack(*v).to_vec();
                data.extend((0..rng.below(256)).map(|_| rng.next() as u8));
            }
        }
        let whole = run(*v, 4, [&data[..]]);
        let pieces = random_pieces(&mut rng, &data, 16);
        assert_eq!(run(*v, 4, pieces), whole, "round {round}");
    }
}

// ---- bounds ----

#[test]
fn split_buffer_is_reused_and_released_after_a_large_packet() {
    let big = publish(V311, 0x02, "t", 1, b"", &vec![b'x'; 100_000]);
    let small = publish(V311, 0x02, "t", 2, b"", &[b'y'; 1000]);
    for (retained, keeps) in [(RETAINED_CAPACITY, false), (1 << 20, true)] {
        let mut c = client(V311, 0);
        c.set_retained_capacity(retained);
        let mut out = Vec::new();
        c.decode(CONNACK_V4, &mut out).unwrap();
        let (a, b) = big.split_at(50_000);
        assert_eq!(c.decode(a, &mut out).unwrap(), (a.len(), Event::NeedMore));
        assert!(c.buffer_capacity() >= 49_990);
        let (n, ev) = c.decode(b, &mut out).unwrap();
        let Event::Message { payload, .. } = ev else {
            panic!("{ev:?}")
        };
        assert_eq!((n, payload.len()), (b.len(), 100_000));
        // Released (or kept) at the next call, whatever it brings.
        let (a, b) = small.split_at(500);
        c.decode(a, &mut out).unwrap();
        assert_eq!(c.buffer_capacity() >= 100_000, keeps, "retained {retained}");
        assert!(matches!(
            c.decode(b, &mut out),
            Ok((_, Event::Message { .. }))
        ));
        c.decode(b"", &mut out).unwrap();
        assert!(c.buffer_capacity() <= retained);
        assert_eq!(out, b"\x40\x02\x00\x01\x40\x02\x00\x02");
    }
}

#[test]
fn qos2_ids_awaiting_pubrel_are_bounded_and_compact() {
    let mut c = client(V311, 0);
    let mut out = Vec::with_capacity(1 << 20);
    c.decode(CONNACK_V4, &mut out).unwrap();
    let mut p = Vec::new();
    for id in 1..=u16::MAX {
        p.clear();
        p.extend_from_slice(&publish(V311, 0x04, "t", id, b"", b""));
        let (_, ev) = c.decode(&p, &mut out).unwrap();
        assert!(matches!(ev, Event::Message { .. }), "{id}");
        if id == SMALL_ID_SET as u16 {
            // Up to SMALL_ID_SET ids: a small vector.
            assert!(c.heap_bytes() <= 2 * SMALL_ID_SET * 2, "{}", c.heap_bytes());
        }
    }
    // Every id held: 65,535 of them in an 8 KiB bitset.
    assert_eq!(c.awaiting_pubrel(), 65_535);
    assert_eq!(c.heap_bytes(), 8192);
    // A retransmission of any is answered, not reported.
    let dup = publish(V311, 0x0c, "t", 40_000, b"", b"");
    let (_, ev) = c.decode(&dup, &mut out).unwrap();
    assert_eq!(ev, Event::NeedMore);
    assert_eq!(out.len(), 65_536 * 4);
    out.clear();
    for id in 1..=u16::MAX {
        let [hi, lo] = id.to_be_bytes();
        c.decode(&[0x62, 2, hi, lo], &mut out).unwrap();
    }
    assert_eq!(c.awaiting_pubrel(), 0);
    assert_eq!(out.len(), 65_535 * 4);
    assert_eq!(&out[..4], b"\x70\x02\x00\x01");
}

#[test]
fn packet_ids_wrap_and_skip_those_in_flight() {
    let mut c = client(V311, 0);
    assert_eq!(c.next_packet_id(), 1);
    assert_eq!(c.next_packet_id(), 2);
    assert_eq!(c.in_flight(), 2);
    let mut out = Vec::new();
    c.decode(CONNACK_V4, &mut out).unwrap();
    c.decode(b"\x40\x02\x00\x01", &mut out).unwrap(); // PUBACK 1
    assert_eq!(c.in_flight(), 1);
    // Round to the end: 3..=65535 all taken but released as we go, except 2.
    for want in 3..=u16::MAX {
        let id = c.next_packet_id();
        assert_eq!(id, want);
        c.release_packet_id(id);
    }
    // Wrapped: 1 is free, 2 is still in flight and skipped.
    assert_eq!(c.next_packet_id(), 1);
    assert_eq!(c.next_packet_id(), 3);
    // Acks of every kind free their id: PUBCOMP, failed PUBREC, SUBACK, UNSUBACK.
    for id in 4..=7 {
        assert_eq!(c.next_packet_id(), id);
    }
    for bytes in [
        &b"\x70\x02\x00\x01"[..],
        b"\x90\x03\x00\x03\x00",
        b"\xb0\x02\x00\x04",
        b"\x50\x02\x00\x05", // a successful PUBREC does not: PUBCOMP comes next
    ] {
        c.decode(bytes, &mut out).unwrap();
    }
    assert_eq!(c.in_flight(), 4); // 2, 5, 6, 7
                                  // All 65,535 in flight: the next id is given anyway (after one scan).
    let mut c = client(V311, 0);
    for _ in 0..u16::MAX {
        c.next_packet_id();
    }
    assert_eq!(c.in_flight(), 65_535);
    assert_eq!(c.heap_bytes(), 8192);
    assert_eq!(c.next_packet_id(), 1);
    assert_eq!(c.next_packet_id(), 2);
}

#[test]
fn topic_alias_table_is_bounded() {
    // Announcing more than MAX_TOPIC_ALIASES announces (and accepts) MAX_TOPIC_ALIASES.
    let mut c = client(V5, 1000);
    let mut out = Vec::new();
    c.decode(CONNACK_V5, &mut out).unwrap();
    let max = MAX_TOPIC_ALIASES;
    let at_max = publish(V5, 0, "t", 0, &[0x23, 0, max as u8], b"");
    assert!(matches!(
        c.decode(&at_max, &mut out),
        Ok((_, Event::Message { .. }))
    ));
    let over = publish(V5, 0, "t", 0, &[0x23, 0, max as u8 + 1], b"");
    assert_eq!(
        c.decode(&over, &mut out).map(|r| r.0),
        Err(MqttError::TopicAlias)
    );

    // The topics held are bounded in bytes: 64 aliases of 1 KiB fit, replacing one with a
    // longer topic fits while the sum stays within MAX_ALIAS_BYTES.
    let mut c = client(V5, 64);
    c.decode(CONNACK_V5, &mut out).unwrap();
    let kib = "k".repeat(1024);
    for alias in 1..=64u8 {
        let p = publish(V5, 0, &kib, 0, &[0x23, 0, alias], b"");
        assert!(c.decode(&p, &mut out).is_ok(), "{alias}");
    }
    assert!(c.heap_bytes() >= MAX_ALIAS_BYTES);
    // Replacing with the same size is fine; one byte more is over the budget.
    let p = publish(V5, 0, &kib, 0, b"\x23\x00\x01", b"");
    assert!(c.decode(&p, &mut out).is_ok());
    let longer = format!("{kib}+");
    let p = publish(V5, 0, &longer, 0, b"\x23\x00\x01", b"");
    assert_eq!(
        c.decode(&p, &mut out).map(|r| r.0),
        Err(MqttError::TopicAlias)
    );
    // MQTT 3.1.1 has no properties, so no aliases: announcing some changes nothing.
    let c = client(V311, 10);
    assert_eq!(c.heap_bytes(), 0);
}

#[test]
fn property_and_code_counts_are_bounded_by_the_packet() {
    // 100,000 user properties in one PUBLISH (under the 1 MiB limit): parsed in one pass.
    let mut props = Vec::new();
    for _ in 0..100_000 {
        props.extend_from_slice(b"\x26\x00\x01k\x00\x01v");
    }
    let p = publish(V5, 0, "t", 0, &props, b"body");
    assert!(p.len() < DEFAULT_MAX_PACKET as usize);
    let o = after_connack(V5, &p);
    assert_eq!(o.events, [msg("t", b"body", QoS::AtMostOnce, false, false)]);
    // A SUBACK of 70,000 failed filters: the count saturates.
    let mut body = b"\x00\x01\x00".to_vec();
    body.resize(3 + 70_000, 0x80);
    let o = after_connack(V5, &pkt(0x90, &body));
    assert_eq!(o.events, [Ev::SubAck(1, 0x80, u16::MAX)]);
}

// ---- no allocation in the steady state ----

#[test]
fn steady_state_publish_and_receive_allocate_nothing() {
    // A connected client publishing at QoS 1 and 2 and receiving at QoS 0, 1, 2 (one through
    // an alias), whole and split into three pieces.
    let mut c = client(V5, 4);
    let mut out = Vec::with_capacity(4096);
    c.decode(CONNACK_V5, &mut out).unwrap();
    let inbound = cat(&[
        publish(V5, 0x00, "s/0", 0, b"", &[1; 100]),
        publish(V5, 0x02, "s/1", 1, b"", &[2; 300]),
        publish(V5, 0x04, "s/2", 2, b"\x23\x00\x01", &[3; 1000]),
        pkt(0x62, b"\x00\x02"),
        publish(V5, 0x00, "", 0, b"\x23\x00\x01", &[4; 10]),
    ]);
    // The broker's side, with the acks of our two publishes appended each time.
    let mut stream = Vec::with_capacity(4096);
    let round = |c: &mut Client, out: &mut Vec<u8>, stream: &mut Vec<u8>| {
        let mut bytes = 0;
        for split in [usize::MAX, 7, 500, 1300] {
            out.clear();
            let q1 = c.next_packet_id();
            encode_publish_parts(
                out,
                V5,
                "p/x",
                QoS::AtLeastOnce,
                false,
                q1,
                b"ts",
                b'.',
                200,
            );
            let q2 = c.next_packet_id();
            encode_publish_parts(
                out,
                V5,
                "p/x",
                QoS::ExactlyOnce,
                false,
                q2,
                b"ts",
                b'.',
                200,
            );
            stream.clear();
            stream.extend_from_slice(&inbound);
            let ([a, b], [d, e]) = (q1.to_be_bytes(), q2.to_be_bytes());
            // PUBACK q1 (No matching subscribers), PUBREC q2, PUBCOMP q2.
            stream.extend_from_slice(&[0x40, 3, a, b, 0x10, 0x50, 2, d, e, 0x70, 2, d, e]);
            let (x, rest) = stream.split_at(split.min(stream.len()));
            let (y, z) = rest.split_at(rest.len() / 2);
            for piece in [x, y, z] {
                let mut p = piece;
                while !p.is_empty() {
                    let (n, ev) = c.decode(p, out).unwrap();
                    if let Event::Message { payload, .. } = ev {
                        bytes += payload.len();
                    }
                    p = &p[n..];
                }
            }
        }
        bytes
    };
    round(&mut c, &mut out, &mut stream);
    let before = allocs();
    let mut bytes = 0;
    for _ in 0..1000 {
        bytes += round(&mut c, &mut out, &mut stream);
    }
    let spent = allocs() - before;
    assert_eq!(bytes, 1000 * 4 * 1410);
    assert_eq!(spent, 0, "allocations in 4000 steady-state rounds");
    assert_eq!(c.in_flight(), 0);
    assert_eq!(c.awaiting_pubrel(), 0);
}

#[test]
fn idle_client_size() {
    let c = client(V5, 0);
    assert_eq!(c.heap_bytes(), 0);
    assert!(
        std::mem::size_of::<Client>() <= 256,
        "{}",
        std::mem::size_of::<Client>()
    );
}

#[test]
fn connect_gives_the_client_its_settings() {
    // Maximum Packet Size announced: the client's own limit too.
    let c = Connect {
        max_packet_size: 20,
        ..Connect::new(V311, "m")
    };
    let mut out = Vec::new();
    let mut client = Client::connect(&c, &mut out);
    assert_eq!(client.version(), V311);
    assert_eq!(&out[..2], b"\x10\x0d"); // the CONNECT (3.1.1: no properties)
    client.decode(CONNACK_V4, &mut out).unwrap();
    let fits = publish(V311, 0, "t", 0, b"", &[0; 15]); // 2 + 3 + 15 = 20
    assert!(matches!(
        client.decode(&fits, &mut out),
        Ok((20, Event::Message { .. }))
    ));
    let over = publish(V311, 0, "t", 0, b"", &[0; 16]);
    assert_eq!(
        client.decode(&over, &mut out).map(|r| r.0),
        Err(MqttError::TooLong)
    );
    // Client::new: no aliases, the default limit.
    let mut client = Client::new(V5);
    client.decode(CONNACK_V5, &mut out).unwrap();
    assert!(client.is_connected());
    let alias = publish(V5, 0, "t", 0, b"\x23\x00\x01", b"");
    assert_eq!(
        client.decode(&alias, &mut out).map(|r| r.0),
        Err(MqttError::TopicAlias)
    );
    let mut client = Client::new(V5);
    client.decode(CONNACK_V5, &mut out).unwrap();
    let big = publish(
        V5,
        0,
        "t",
        0,
        b"",
        &vec![0; DEFAULT_MAX_PACKET as usize - 8],
    );
    assert_eq!(big.len(), DEFAULT_MAX_PACKET as usize);
    assert!(client.decode(&big, &mut out).is_ok());
    let big = publish(
        V5,
        0,
        "t",
        0,
        b"",
        &vec![0; DEFAULT_MAX_PACKET as usize - 7],
    );
    assert_eq!(
        client.decode(&big, &mut out).map(|r| r.0),
        Err(MqttError::TooLong)
    );
}
