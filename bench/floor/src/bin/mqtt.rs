//! The MQTT floor client (bench/mqtt-vs-tsung.sh, TOOLS=... floor): the least a generator can do
//! to run the sessions of Tsung's examples/mqtt.xml as the bench renders it. One subscriber
//! first: connect (clean session, keep-alive 10, no will), subscribe to test_topic at QoS 1,
//! wait 60 s (Tsung's waitForMessages, a think time) while every message arrives and gets its
//! PUBACK, unsubscribe, disconnect. From its SUBACK on (so that it gets every message live, none
//! as a retained one), publishers arriving as a Poisson process at RATE/s until USERS have
//! arrived, each: connect (clean session, keep-alive 10, a will: will_topic, "will_msg", QoS 0,
//! not retained), 10 x publish "test_message" to test_topic at QoS 1, retained, each after the
//! previous one's PUBACK, think HOLD s, disconnect, close. Keep-alive as headroom keeps it: a
//! PINGREQ once a connection has sent no request (CONNECT, PUBLISH, SUBSCRIBE, UNSUBSCRIBE,
//! PINGREQ; not the subscriber's PUBACKs) for 10 s, so that a publisher holding HOLD s is not
//! dropped by the broker (at 1.5 x keep-alive).
//!
//! MQTT 3.1.1 (protocol level 4), packets encoded by hand: the ten PUBLISHes (packet ids 1 to 10)
//! and the other fixed packets once for all users, a CONNECT once per user (its client id).
//! One thread, edge-triggered epoll, every reply read to its end (fixed header and remaining
//! length) and nothing else: no clock read per operation (one per wake-up), no histogram, no
//! parsing beyond a packet's type, a CONNACK's or SUBACK's return code and a received PUBLISH's
//! packet id; the subscriber's PUBACKs of one read go out in one send.
//!
//! Its last stdout line is the floors' common one, "floor-mqtt: N operations, D of U users done,
//! F sends failed, user .. sys .., X us CPU per operation, T s", then the MQTT counts. An
//! operation is a publish acknowledged or a message received (the bench's count); U is the
//! publishers and the subscriber (USERS + 1); F counts failures of any kind (a refused or
//! closed connection, an unexpected packet, a short send), each stopping its user. It exits 1
//! unless every user finished, nothing failed, and both counts are 10 x USERS. Not part of
//! headroom: a measuring stick.
#[path = "../session.rs"]
mod session;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

const TOPIC: &[u8] = b"test_topic";
const PAYLOAD: &[u8] = b"test_message";
const PUBLISHES: usize = 10;
const KEEP_ALIVE: u16 = 10;
/// The subscriber's waitForMessages.
const WAIT: Duration = Duration::from_secs(60);
const PINGREQ: [u8; 2] = [0xc0, 0];
const DISCONNECT: [u8; 2] = [0xe0, 0];
/// A packet from the broker longer than this is a failure.
const MAX_PACKET: usize = 1 << 20;

/// A packet: `first` (type and flags), the remaining length, `body`.
fn packet(first: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![first];
    let mut n = body.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        v.push(if n > 0 { b | 0x80 } else { b });
        if n == 0 {
            break;
        }
    }
    v.extend_from_slice(body);
    v
}

fn string(s: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

/// CONNECT, clean session, keep-alive 10; with the publishers' will when `will`.
fn connect(client_id: &str, will: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    string(b"MQTT", &mut b);
    b.push(4);
    // Clean session; will flag (will QoS 0, will retain off).
    b.push(if will { 0x02 | 0x04 } else { 0x02 });
    b.extend_from_slice(&KEEP_ALIVE.to_be_bytes());
    string(client_id.as_bytes(), &mut b);
    if will {
        string(b"will_topic", &mut b);
        string(b"will_msg", &mut b);
    }
    packet(0x10, &b)
}

/// The ten QoS 1 retained PUBLISHes of a publisher, packet ids 1 to 10.
fn publishes() -> Vec<Vec<u8>> {
    (1..=PUBLISHES as u16)
        .map(|id| {
            let mut b = Vec::new();
            string(TOPIC, &mut b);
            b.extend_from_slice(&id.to_be_bytes());
            b.extend_from_slice(PAYLOAD);
            packet(0x30 | 1 << 1 | 1, &b)
        })
        .collect()
}

/// SUBSCRIBE (0x82) or UNSUBSCRIBE (0xa2) of test_topic, packet id `id`.
fn filter(first: u8, id: u16, qos: Option<u8>) -> Vec<u8> {
    let mut b = id.to_be_bytes().to_vec();
    string(TOPIC, &mut b);
    b.extend(qos);
    packet(first, &b)
}

/// The first complete packet of `b`: (its first byte, where its body starts, its length), None
/// when incomplete, Err when its remaining length is malformed or over MAX_PACKET.
fn next_packet(b: &[u8]) -> Result<Option<(u8, usize, usize)>, ()> {
    let (mut len, mut shift, mut at) = (0usize, 0, 1);
    loop {
        let Some(&c) = b.get(at) else {
            return Ok(None);
        };
        len |= ((c & 0x7f) as usize) << shift;
        at += 1;
        if c & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 21 {
            return Err(());
        }
    }
    if at + len > MAX_PACKET {
        return Err(());
    }
    Ok((b.len() >= at + len).then(|| (b[0], at, at + len)))
}

#[derive(Clone, Copy, PartialEq)]
enum St {
    Connecting,
    Connack,
    /// A publisher waiting for the PUBACK of its publish number `step`.
    Publishing,
    /// A publisher's HOLD s.
    Thinking,
    Subscribing,
    /// The subscriber's 60 s.
    Waiting,
    Unsubscribing,
    Done,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// The end of a think time (the publisher's hold, the subscriber's wait).
    End,
    /// Time to see whether a keep-alive ping is due.
    Ping,
}

struct Conn {
    fd: i32,
    st: St,
    step: usize,
    /// When it last sent a request: the loop's clock of that wake-up.
    last_sent: Instant,
    /// The CONNECT, until sent.
    connect: Vec<u8>,
    buf: Vec<u8>,
}

fn send(fd: i32, r: &[u8]) -> bool {
    let n = unsafe { libc::send(fd, r.as_ptr().cast(), r.len(), libc::MSG_NOSIGNAL) };
    n == r.len() as isize
}

#[derive(Default)]
struct Counts {
    connects: u64,
    published: u64,
    acked: u64,
    subscribed: u64,
    received: u64,
    pings: u64,
    pongs: u64,
    open: u64,
    peak_open: u64,
}

fn main() {
    let (addr, users, rate, hold) = session::args("mqtt");
    let publish = publishes();
    let subscribe = filter(0x82, 1, Some(1));
    let unsubscribe = filter(0xa2, 2, None);
    let keep_alive = Duration::from_secs(u64::from(KEEP_ALIVE));
    let hold = Duration::from_secs(hold);
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    let start = Instant::now();
    let (u0, s0) = session::cpu();
    let mut uniform = session::uniform();
    let prefix = format!("floor-{}-", std::process::id());
    // Key 0 the subscriber, 1..=users the publishers.
    let total = users + 1;
    let mut list: Vec<Conn> = Vec::with_capacity(total);
    let mut timers: BinaryHeap<Reverse<(Instant, usize, Timer)>> = BinaryHeap::new();
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut scratch = vec![0u8; 65536];
    let mut acks: Vec<u8> = Vec::with_capacity(4096);
    let mut c = Counts::default();
    // failed: failures of any kind (each stops its user); stopped: users so stopped.
    let (mut failed, mut done, mut stopped) = (0u64, 0usize, 0usize);
    // Publishers arrive from the subscriber's SUBACK on.
    let mut next_arrival: Option<Instant> = None;
    let new_conn = |key: usize, id: String, will: bool, now: Instant, list: &mut Vec<Conn>| {
        list.push(Conn {
            fd: session::connect(&addr, ep, key, libc::EPOLLIN | libc::EPOLLOUT),
            st: St::Connecting,
            step: 0,
            last_sent: now,
            connect: connect(&id, will),
            buf: Vec::new(),
        });
    };
    new_conn(0, format!("{prefix}sub"), false, start, &mut list);
    c.open += 1;
    c.peak_open = 1;
    // Bounded: every user ends within its session; the run at twice the arrivals' mean span +
    // HOLD (or the subscriber's 60 s) + 45 s, within the bench's own timeout.
    let limit = start
        + Duration::from_secs_f64(
            (users as f64 / rate * 2.0 + hold.as_secs_f64()).max(60.0) + 45.0,
        );
    let mut now = start;
    while done + stopped < total && now < limit {
        // Arrivals, then due timers, at this wake-up's clock.
        while let Some(at) = next_arrival.filter(|&at| at <= now && list.len() < total) {
            let key = list.len();
            new_conn(key, format!("{prefix}{key}"), true, now, &mut list);
            c.open += 1;
            c.peak_open = c.peak_open.max(c.open);
            next_arrival = Some(at + Duration::from_secs_f64(-uniform().ln() / rate));
        }
        while let Some(&Reverse((at, key, timer))) = timers.peek() {
            if at > now {
                break;
            }
            timers.pop();
            let u = &mut list[key];
            let ok = match (timer, u.st) {
                (Timer::Ping, St::Thinking | St::Waiting) => {
                    if now.saturating_duration_since(u.last_sent) >= keep_alive {
                        c.pings += 1;
                        u.last_sent = now;
                        timers.push(Reverse((now + keep_alive, key, Timer::Ping)));
                        send(u.fd, &PINGREQ)
                    } else {
                        timers.push(Reverse((u.last_sent + keep_alive, key, Timer::Ping)));
                        true
                    }
                }
                (Timer::End, St::Thinking) => {
                    let ok = send(u.fd, &DISCONNECT);
                    unsafe { libc::close(u.fd) };
                    u.st = St::Done;
                    u.buf = Vec::new();
                    c.open -= 1;
                    if ok {
                        done += 1;
                    } else {
                        stopped += 1;
                    }
                    ok
                }
                (Timer::End, St::Waiting) => {
                    u.st = St::Unsubscribing;
                    u.last_sent = now;
                    send(u.fd, &unsubscribe)
                }
                _ => true,
            };
            if !ok {
                failed += 1;
                if u.st != St::Done {
                    unsafe { libc::close(u.fd) };
                    u.st = St::Done;
                    c.open -= 1;
                    stopped += 1;
                }
            }
        }
        let mut wake = limit;
        if let Some(at) = next_arrival.filter(|_| list.len() < total) {
            wake = wake.min(at);
        }
        if let Some(&Reverse((at, _, _))) = timers.peek() {
            wake = wake.min(at);
        }
        let n = session::wait(ep, &mut evs, wake);
        now = Instant::now();
        for e in &evs[..n] {
            let key = e.u64 as usize;
            let u = &mut list[key];
            if u.st == St::Done {
                continue;
            }
            let mut ok = true;
            if u.st == St::Connecting {
                if e.events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    ok = false;
                } else if e.events & libc::EPOLLOUT as u32 != 0 {
                    ok = send(u.fd, &u.connect);
                    u.connect = Vec::new();
                    u.last_sent = now;
                    u.st = St::Connack;
                }
            } else if e.events & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                // Read to EAGAIN (a short read means drained); the peer's close or an error is
                // a failure.
                loop {
                    let r =
                        unsafe { libc::recv(u.fd, scratch.as_mut_ptr().cast(), scratch.len(), 0) };
                    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN)
                    {
                        break;
                    }
                    if r <= 0 {
                        ok = false;
                        break;
                    }
                    u.buf.extend_from_slice(&scratch[..r as usize]);
                    if (r as usize) < scratch.len() {
                        break;
                    }
                }
                let mut at = 0;
                while ok && u.st != St::Done {
                    let (first, body, end) = match next_packet(&u.buf[at..]) {
                        Ok(Some(p)) => p,
                        Ok(None) => break,
                        Err(()) => {
                            ok = false;
                            break;
                        }
                    };
                    let p = &u.buf[at..at + end];
                    let body = &p[body..];
                    at += end;
                    match (first >> 4, u.st) {
                        // CONNACK, accepted.
                        (2, St::Connack) if body.get(1) == Some(&0) => {
                            c.connects += 1;
                            u.last_sent = now;
                            if key == 0 {
                                u.st = St::Subscribing;
                                ok = send(u.fd, &subscribe);
                            } else {
                                u.st = St::Publishing;
                                c.published += 1;
                                ok = send(u.fd, &publish[0]);
                            }
                        }
                        // PUBACK of the publish awaited.
                        (4, St::Publishing) => {
                            c.acked += 1;
                            u.step += 1;
                            u.last_sent = now;
                            if u.step < PUBLISHES {
                                c.published += 1;
                                ok = send(u.fd, &publish[u.step]);
                            } else {
                                u.st = St::Thinking;
                                timers.push(Reverse((now + hold, key, Timer::End)));
                                timers.push(Reverse((now + keep_alive, key, Timer::Ping)));
                            }
                        }
                        // SUBACK, granted (not 0x80).
                        (9, St::Subscribing) if body.get(2).is_some_and(|&q| q < 0x80) => {
                            c.subscribed += 1;
                            u.st = St::Waiting;
                            timers.push(Reverse((now + WAIT, key, Timer::End)));
                            timers.push(Reverse((u.last_sent + keep_alive, key, Timer::Ping)));
                            next_arrival = Some(now);
                        }
                        // A message, to the subscriber: QoS 1 gets its PUBACK.
                        (3, St::Waiting | St::Unsubscribing) => {
                            c.received += 1;
                            if first & 0x06 == 0x02 {
                                // Topic (length, bytes), then the packet id.
                                let tl = body.get(..2).map(|l| u16::from_be_bytes([l[0], l[1]]));
                                match tl.and_then(|tl| body.get(2 + tl as usize..4 + tl as usize)) {
                                    Some(id) => acks.extend_from_slice(&[0x40, 2, id[0], id[1]]),
                                    None => ok = false,
                                }
                            }
                        }
                        // UNSUBACK: the subscriber's session ends.
                        (11, St::Unsubscribing) => {
                            let sent = send(u.fd, &DISCONNECT);
                            unsafe { libc::close(u.fd) };
                            u.st = St::Done;
                            c.open -= 1;
                            if sent {
                                done += 1;
                            } else {
                                failed += 1;
                                stopped += 1;
                            }
                        }
                        (13, _) => c.pongs += 1,
                        _ => ok = false,
                    }
                }
                if !acks.is_empty() {
                    if u.st != St::Done && !send(u.fd, &acks) {
                        ok = false;
                    }
                    acks.clear();
                }
                if u.st == St::Done {
                    u.buf = Vec::new();
                } else {
                    u.buf.drain(..at);
                }
            }
            if !ok && u.st != St::Done {
                unsafe { libc::close(u.fd) };
                u.st = St::Done;
                u.buf = Vec::new();
                c.open -= 1;
                failed += 1;
                stopped += 1;
            }
        }
    }
    let (u1, s1) = session::cpu();
    let (u, s) = (u1 - u0, s1 - s0);
    let ops = c.acked + c.received;
    println!(
        "floor-mqtt: {ops} operations, {done} of {total} users done, {failed} sends failed, \
         user {u:.3} sys {s:.3}, {:.2} us CPU per operation, {:.1} s; {} connects, {} published, \
         {} publish_acked, {} subscribed, {} received, {} pings, {} pongs, {} peak connections",
        (u + s) * 1e6 / ops.max(1) as f64,
        start.elapsed().as_secs_f64(),
        c.connects,
        c.published,
        c.acked,
        c.subscribed,
        c.received,
        c.pings,
        c.pongs,
        c.peak_open,
    );
    let want = (PUBLISHES * users) as u64;
    if done < total || failed > 0 || c.acked != want || c.received != want {
        std::process::exit(1);
    }
}
