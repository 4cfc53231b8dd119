//! Fuzz the MQTT client codec (`headroom_proto::mqtt::Client`): the broker's byte stream.
//!
//! Input layout: byte 0 holds, in its low 3 bits, how many piece lengths follow; bit 3 the
//! version (0: MQTT 3.1.1, 1: MQTT 5, announcing 4 topic aliases); in bits 4-5 where the stream
//! starts:
//!   0: the input bytes alone (a client that has just sent its CONNECT);
//!   1: after a canned CONNACK (accepted): packets from the start;
//!   2, 3: a prefix of a real session recorded from mosquitto 2.0.11 (`src/mqtt/testdata`, of
//!      the version chosen), cut where the next two bytes say, then the input.
//! Then the piece lengths, then the rest of the stream. The stream is fed in pieces of those
//! lengths (cycled; a length of 0 feeds an empty slice), looping over events as the engine
//! does, then `eof()`.
//!
//! Checked besides "no panic": the `decode` contracts (consumed <= input, `NeedMore` consumes
//! everything, an event at least one byte; errors are sticky), the memory bounds (split buffer,
//! id sets, alias table), and that the split stream gives exactly the same events, answers and
//! ending as the same bytes in one piece.
#![no_main]

use headroom_proto::mqtt::{Client, Connect, Event, MqttError, QoS, Version};
use libfuzzer_sys::fuzz_target;

const SESSION_V4: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/mqtt/testdata/session_v4.server.bin");
const SESSION_V5: &[u8] =
    include_bytes!("../../crates/headroom-proto/src/mqtt/testdata/session_v5.server.bin");
/// The client's limit here: small enough for the fuzzer to reach it.
const MAX_PACKET: u32 = 64 * 1024;

#[derive(Debug, PartialEq)]
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

#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<Ev>,
    out: Vec<u8>,
    end: Result<(), MqttError>,
    awaiting_pubrel: usize,
}

fn run<'a>(v: Version, pieces: impl Iterator<Item = &'a [u8]>) -> Outcome {
    let c = Connect {
        topic_alias_maximum: 4,
        ..Connect::new(v, "fuzz")
    };
    let mut client = Client::connect(&c, &mut Vec::new());
    client.set_max_packet(MAX_PACKET);
    let mut out = Vec::new();
    let mut events = Vec::new();
    let mut end = Ok(());
    'feed: for piece in pieces {
        let mut p = piece;
        loop {
            match client.decode(p, &mut out) {
                Err(e) => {
                    assert_eq!(client.decode(b"\xd0\x00", &mut out).map(|r| r.0), Err(e));
                    assert!(!client.is_connected());
                    end = Err(e);
                    break 'feed;
                }
                Ok((n, ev)) => match owned(ev) {
                    None => {
                        assert_eq!(n, p.len(), "NeedMore must consume all input");
                        break;
                    }
                    Some(ev) => {
                        assert!(n > 0 && n <= p.len(), "{ev:?} consumed {n} of {}", p.len());
                        if let Ev::Message(topic, payload, ..) = &ev {
                            assert!(topic.len() + payload.len() <= MAX_PACKET as usize);
                        }
                        events.push(ev);
                        p = &p[n..];
                    }
                },
            }
            // The split buffer holds at most one packet (growth by doubling), the id sets at
            // most 8 KiB each, the alias table 4 topics of at most MAX_PACKET.
            assert!(client.buffer_capacity() <= 2 * MAX_PACKET as usize);
            assert!(
                client.heap_bytes() <= 2 * MAX_PACKET as usize + 2 * 8192 + 4 * MAX_PACKET as usize
            );
        }
    }
    if end.is_ok() {
        end = client.eof();
    }
    Outcome {
        events,
        out,
        end,
        awaiting_pubrel: client.awaiting_pubrel(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let v = if flags & 0x08 == 0 {
        Version::V311
    } else {
        Version::V5
    };
    let (prefix, rest): (&[u8], &[u8]) = match (flags >> 4) & 3 {
        0 => (&[], rest),
        1 => match v {
            Version::V311 => (b"\x20\x02\x00\x00", rest),
            Version::V5 => (b"\x20\x03\x00\x00\x00", rest),
        },
        _ => {
            let recorded = match v {
                Version::V311 => SESSION_V4,
                Version::V5 => SESSION_V5,
            };
            let Some((cut, rest)) = rest.split_first_chunk::<2>() else {
                return;
            };
            let cut = usize::from(u16::from_be_bytes(*cut)) % (recorded.len() + 1);
            (&recorded[..cut], rest)
        }
    };
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, tail) = rest.split_at(n_lens);
    let mut stream = prefix.to_vec();
    stream.extend_from_slice(tail);

    let one_shot = run(v, std::iter::once(&stream[..]));
    let pieces: Vec<&[u8]> = headroom_fuzz::Pieces {
        data: &stream,
        lens,
        i: 0,
        done: false,
    }
    .collect();
    let split = run(v, pieces.iter().copied());
    assert_eq!(split, one_shot, "split decoding differs from one-shot");
});
