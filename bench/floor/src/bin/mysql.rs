//! The MySQL floor client (bench/mysql-vs-tsung.sh, FLOOR=mysql): the least a generator can do
//! to run the session of Tsung's examples/mysql.xml as the bench renders it — per user: connect,
//! read the greeting, log in as test/test to database test (mysql_native_password), SHOW TABLES,
//! SELECT * FROM gens, SELECT * FROM te, think HOLD s, COM_QUIT, close — with users arriving as
//! a Poisson process at RATE/s until USERS have arrived. One thread, edge-triggered epoll, the
//! three statements encoded once for all users, the login once per user (it hashes the
//! greeting's scramble), replies read to the end of each packet and nothing else: no clock read
//! per operation, no histogram, no parsing beyond the 4-byte packet header and each packet's
//! first byte (the greeting's scramble aside), no error accounting beyond a count. Without
//! CLIENT_DEPRECATE_EOF a result set is its column count, the column definitions, an EOF, the
//! rows and an EOF (0xFE, shorter than 9 bytes); an OK ends a statement without one. It prints
//! the operations answered (logins + statements, as the bench counts them) and its CPU; what any
//! client doing the same system calls would at least spend. Not part of headroom: a measuring
//! stick.
#[path = "../session.rs"]
mod session;
use sha1::{Digest, Sha1};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

// CLIENT_LONG_PASSWORD (MariaDB: CLIENT_MYSQL) | CONNECT_WITH_DB | PROTOCOL_41 |
// SECURE_CONNECTION | PLUGIN_AUTH; not DEPRECATE_EOF: result sets end with an EOF packet.
const CAPS: u32 = 1 | 1 << 3 | 1 << 9 | 1 << 15 | 1 << 19;
const STATEMENTS: [&str; 3] = ["SHOW TABLES", "SELECT * FROM gens", "SELECT * FROM te"];
const COM_QUIT: [u8; 5] = [1, 0, 0, 0, 0x01];
/// A reply (the greeting, the login's answer, a result set) longer than this is a failure.
const MAX_REPLY: usize = 16 << 20;

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut v = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
    v.extend_from_slice(payload);
    v
}

/// HandshakeResponse41 to a protocol-10 greeting's payload, or None when it is not one (an ERR
/// such as "too many connections", a greeting too short to hold the scramble).
fn login(greeting: &[u8]) -> Option<Vec<u8>> {
    if greeting.first() != Some(&10) {
        return None;
    }
    // Server version (NUL-ended), connection id (4), scramble part 1 (8), filler (1),
    // capabilities (2), charset (1), status (2), capabilities (2), scramble length (1),
    // reserved (10), scramble part 2 (12 + NUL).
    let p1 = 1 + greeting[1..].iter().position(|&b| b == 0)? + 1 + 4;
    let p2 = p1 + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    let mut scramble = greeting.get(p1..p1 + 8)?.to_vec();
    scramble.extend_from_slice(greeting.get(p2..p2 + 12)?);
    let stage1 = Sha1::digest(b"test");
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(&scramble);
    h.update(stage2);
    let mask = h.finalize();
    let mut p = Vec::with_capacity(100);
    p.extend_from_slice(&CAPS.to_le_bytes());
    p.extend_from_slice(&(16u32 << 20).to_le_bytes()); // max packet size
    p.push(45); // utf8mb4_general_ci
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(b"test\0");
    p.push(20);
    p.extend(stage1.iter().zip(mask.iter()).map(|(a, b)| a ^ b));
    p.extend_from_slice(b"test\0mysql_native_password\0");
    Some(packet(1, &p))
}

#[derive(Clone, Copy, PartialEq)]
enum St {
    Waiting,
    Thinking,
    Done,
}

struct User {
    fd: i32,
    st: St,
    /// 0 the greeting, 1 the login's answer, 2..=4 the statements' result sets.
    step: usize,
    /// Of the current result set: 0 nothing yet, 1 in the column definitions, 2 in the rows.
    part: u8,
    /// Bytes of the current reply already consumed.
    taken: usize,
    buf: Vec<u8>,
}

/// What one packet of the current reply does.
enum Next {
    More,
    Answered,
    Failed,
}

fn on_packet(step: usize, part: &mut u8, p: &[u8]) -> Next {
    let first = p.first().copied();
    match step {
        1 if first == Some(0x00) => Next::Answered,
        1 => Next::Failed, // ERR, or an AuthSwitchRequest (0xFE): not the plugin asked for
        _ => match (*part, first) {
            (_, Some(0xff)) | (_, None) => Next::Failed,
            (0, Some(0x00)) => Next::Answered, // an OK: no result set
            (0, _) => {
                *part = 1;
                Next::More
            }
            (1, Some(0xfe)) if p.len() < 9 => {
                *part = 2;
                Next::More
            }
            (2, Some(0xfe)) if p.len() < 9 => Next::Answered,
            _ => Next::More,
        },
    }
}

fn send(fd: i32, r: &[u8]) -> bool {
    let n = unsafe { libc::send(fd, r.as_ptr().cast(), r.len(), libc::MSG_NOSIGNAL) };
    n == r.len() as isize
}

fn main() {
    let (addr, users, rate, hold) = session::args("mysql");
    let queries: Vec<Vec<u8>> = STATEMENTS
        .iter()
        .map(|s| packet(0, &[&[0x03], s.as_bytes()].concat()))
        .collect();
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    let start = Instant::now();
    let (u0, s0) = session::cpu();
    // Poisson arrivals.
    let mut uniform = session::uniform();
    let mut next_arrival = start;
    let mut list: Vec<User> = Vec::with_capacity(users);
    let mut timers: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut scratch = vec![0u8; 65536];
    // failed: failures of any kind (each stops its user); stopped: users so stopped.
    let (mut ops, mut failed, mut done, mut stopped) = (0u64, 0u64, 0usize, 0usize);
    // Bounded: every user ends within its session (HOLD s + replies), or the run at twice the
    // arrivals' mean span + HOLD + 60 s (within the bench's own timeout).
    let limit = start + Duration::from_secs_f64(users as f64 / rate * 2.0 + hold as f64 + 60.0);
    while done + stopped < users && Instant::now() < limit {
        let now = Instant::now();
        while list.len() < users && next_arrival <= now {
            let key = list.len();
            list.push(User {
                // The server speaks first: readable is all there is to wait for (a refused or
                // reset connection reports EPOLLERR/EPOLLHUP regardless).
                fd: session::connect(&addr, ep, key, libc::EPOLLIN),
                st: St::Waiting,
                step: 0,
                part: 0,
                taken: 0,
                buf: Vec::new(),
            });
            next_arrival += Duration::from_secs_f64(-uniform().ln() / rate);
        }
        while let Some(&Reverse((at, key))) = timers.peek() {
            if at > now {
                break;
            }
            timers.pop();
            let u = &mut list[key];
            if u.st != St::Thinking {
                continue;
            }
            let ok = send(u.fd, &COM_QUIT);
            unsafe { libc::close(u.fd) };
            u.st = St::Done;
            if ok {
                done += 1;
            } else {
                failed += 1;
                stopped += 1;
            }
        }
        let mut wake = limit;
        if list.len() < users {
            wake = wake.min(next_arrival);
        }
        if let Some(&Reverse((at, _))) = timers.peek() {
            wake = wake.min(at);
        }
        let n = session::wait(ep, &mut evs, wake);
        for e in &evs[..n] {
            let key = e.u64 as usize;
            let u = &mut list[key];
            if u.st == St::Done {
                continue;
            }
            // Read to EAGAIN (a short read means drained); the peer's close or an error is a
            // failure, as is a reply over MAX_REPLY.
            let mut ok = true;
            loop {
                let r = unsafe { libc::recv(u.fd, scratch.as_mut_ptr().cast(), scratch.len(), 0) };
                if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                    break;
                }
                if r <= 0 {
                    ok = false;
                    break;
                }
                u.buf.extend_from_slice(&scratch[..r as usize]);
                if u.taken + u.buf.len() > MAX_REPLY {
                    ok = false;
                    break;
                }
                if (r as usize) < scratch.len() {
                    break;
                }
            }
            // Complete packets: a 3-byte length and a sequence id, then the payload.
            let mut at = 0;
            while ok && u.st == St::Waiting {
                let b = &u.buf[at..];
                if b.len() < 4 {
                    break;
                }
                let len = b[0] as usize | (b[1] as usize) << 8 | (b[2] as usize) << 16;
                if b.len() < 4 + len {
                    break;
                }
                at += 4 + len;
                u.taken += 4 + len;
                let p = &b[4..4 + len];
                if u.step == 0 {
                    match login(p) {
                        Some(req) if send(u.fd, &req) => {
                            u.step = 1;
                            u.taken = 0;
                        }
                        _ => ok = false,
                    }
                    continue;
                }
                match on_packet(u.step, &mut u.part, p) {
                    Next::More => {}
                    Next::Failed => ok = false,
                    Next::Answered => {
                        ops += 1;
                        u.step += 1;
                        u.part = 0;
                        u.taken = 0;
                        if u.step == 5 {
                            u.st = St::Thinking;
                            timers.push(Reverse((Instant::now() + Duration::from_secs(hold), key)));
                        } else if !send(u.fd, &queries[u.step - 2]) {
                            ok = false;
                        }
                    }
                }
            }
            u.buf.drain(..at);
            if !ok {
                unsafe { libc::close(u.fd) };
                u.st = St::Done;
                u.buf = Vec::new();
                failed += 1;
                stopped += 1;
            }
        }
    }
    let (u1, s1) = session::cpu();
    let (u, s) = (u1 - u0, s1 - s0);
    println!(
        "floor-mysql: {ops} operations, {done} of {users} users done, {failed} sends failed, \
         user {u:.3} sys {s:.3}, {:.2} us CPU per operation, {:.1} s",
        (u + s) * 1e6 / ops.max(1) as f64,
        start.elapsed().as_secs_f64()
    );
    if done < users || failed > 0 {
        std::process::exit(1);
    }
}
