//! The LDAP floor client (bench/ldap-vs-tsung.sh, FLOOR=1): the least a generator can do to run
//! the session of Tsung's examples/ldap.xml as the bench renders it — per user: connect, bind,
//! search, search, think 1 s, search, add an entry, modify it, think HOLD s, close — with users
//! arriving as a Poisson process at RATE/s until USERS have arrived. One thread, edge-triggered
//! epoll, requests encoded once per user into a buffer, replies read to the end of each
//! message (a search's entries skipped) and nothing else: no clock read per operation, no
//! histogram, no parsing beyond the BER header and the protocolOp tag, no error accounting
//! beyond a count. It prints the operations answered and its CPU; what any client doing the
//! same system calls would at least spend. Not part of headroom: a measuring stick.
#[path = "../session.rs"]
mod session;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

fn tlv(tag: u8, content: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    let n = content.len();
    if n < 128 {
        out.push(n as u8);
    } else if n < 256 {
        out.extend_from_slice(&[0x81, n as u8]);
    } else {
        out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    }
    out.extend_from_slice(content);
}

fn t(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    tlv(tag, content, &mut v);
    v
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn int(v: u8) -> Vec<u8> {
    t(0x02, &[v])
}

fn message(id: u8, op: Vec<u8>) -> Vec<u8> {
    t(0x30, &cat(&[int(id), op]))
}

fn search(id: u8, base: &str, attr: &str, value: &str) -> Vec<u8> {
    let filter = t(
        0xa3,
        &cat(&[t(0x04, attr.as_bytes()), t(0x04, value.as_bytes())]),
    );
    let body = cat(&[
        t(0x04, base.as_bytes()),
        t(0x0a, &[2]), // wholeSubtree
        t(0x0a, &[0]), // neverDerefAliases
        int(0),        // sizeLimit
        int(0),        // timeLimit
        t(0x01, &[0]), // typesOnly false
        filter,
        t(0x30, &[]), // all attributes
    ]);
    message(id, t(0x63, &body))
}

fn attribute(name: &str, values: &[&str]) -> Vec<u8> {
    let vals: Vec<Vec<u8>> = values.iter().map(|v| t(0x04, v.as_bytes())).collect();
    t(
        0x30,
        &cat(&[t(0x04, name.as_bytes()), t(0x31, &cat(&vals))]),
    )
}

/// The six requests of one user's session, `cn` its entry's name.
fn session(cn: &str) -> [Vec<u8>; 6] {
    let base = "ou=people,dc=headroom,dc=test";
    let dn = format!("cn={cn},{base}");
    let bind = message(
        1,
        t(
            0x60,
            &cat(&[
                int(3),
                t(0x04, b"cn=admin,dc=headroom,dc=test"),
                t(0x80, b"headroom"),
            ]),
        ),
    );
    let add = message(
        5,
        t(
            0x68,
            &cat(&[
                t(0x04, dn.as_bytes()),
                t(
                    0x30,
                    &cat(&[
                        attribute(
                            "objectClass",
                            &["organizationalPerson", "inetOrgPerson", "person"],
                        ),
                        attribute("cn", &[cn]),
                        attribute("sn", &["fffs"]),
                    ]),
                ),
            ]),
        ),
    );
    let change = |a: &str, v: &str| t(0x30, &cat(&[t(0x0a, &[2]), attribute(a, &[v])]));
    let modify = message(
        6,
        t(
            0x66,
            &cat(&[
                t(0x04, dn.as_bytes()),
                t(
                    0x30,
                    &cat(&[change("sn", "SomeSN"), change("mail", "some@mail.com")]),
                ),
            ]),
        ),
    );
    [
        bind,
        search(2, base, "cn", "user2"),
        search(3, base, "cn", &format!("a{cn}n")),
        search(4, base, "filename", "C:\\MyFile"),
        add,
        modify,
    ]
}

/// Complete messages at the start of `buf`: how many bytes they take and how many were final
/// (a response other than a search's entry or reference).
fn messages(buf: &[u8]) -> (usize, u32) {
    let (mut at, mut finals) = (0, 0);
    loop {
        let b = &buf[at..];
        if b.len() < 2 {
            return (at, finals);
        }
        let (len, head) = match b[1] {
            n if n < 0x80 => (n as usize, 2),
            0x81 if b.len() >= 3 => (b[2] as usize, 3),
            0x82 if b.len() >= 4 => (((b[2] as usize) << 8) | b[3] as usize, 4),
            0x83 if b.len() >= 5 => (
                ((b[2] as usize) << 16) | ((b[3] as usize) << 8) | b[4] as usize,
                5,
            ),
            0x81..=0x83 => return (at, finals),
            _ => panic!("a message longer than 16 MiB"),
        };
        if b.len() < head + len {
            return (at, finals);
        }
        // messageID: 0x02 L ..., then the protocolOp's tag.
        let op = b[head + 2 + b[head + 1] as usize];
        if op != 0x64 && op != 0x73 {
            finals += 1;
        }
        at += head + len;
    }
}

#[derive(Clone, Copy, PartialEq)]
enum St {
    Connecting,
    Waiting,
    Thinking,
    Done,
}

struct User {
    fd: i32,
    st: St,
    step: usize,
    reqs: [Vec<u8>; 6],
    buf: Vec<u8>,
}

fn send(u: &User) -> bool {
    let r = &u.reqs[u.step];
    let n = unsafe { libc::send(u.fd, r.as_ptr().cast(), r.len(), libc::MSG_NOSIGNAL) };
    n == r.len() as isize
}

fn main() {
    let (addr, users, rate, hold) = session::args("ldap");
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    let start = Instant::now();
    let (u0, s0) = session::cpu();
    // Poisson arrivals.
    let mut uniform = session::uniform();
    let mut next_arrival = start;
    let cn_base = 1_000_000_000u64 + u64::from(std::process::id()) * 10_000;
    let mut list: Vec<User> = Vec::with_capacity(users);
    let mut timers: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut scratch = vec![0u8; 65536];
    let (mut ops, mut failed, mut done) = (0u64, 0u64, 0usize);
    // Bounded: every user ends within its session (1 s + HOLD s + replies), or the run at twice
    // the arrivals' mean span + HOLD + 60 s (within the bench's own timeout, so that the last
    // line is printed).
    let limit = start + Duration::from_secs_f64(users as f64 / rate * 2.0 + hold as f64 + 60.0);
    while done < users && Instant::now() < limit {
        let now = Instant::now();
        while list.len() < users && next_arrival <= now {
            let key = list.len();
            let fd = session::connect(&addr, ep, key, libc::EPOLLIN | libc::EPOLLOUT);
            let cn = (cn_base + key as u64).to_string();
            list.push(User {
                fd,
                st: St::Connecting,
                step: 0,
                reqs: session(&cn),
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
            if u.step == 6 {
                unsafe { libc::close(u.fd) };
                u.st = St::Done;
                done += 1;
            } else {
                u.st = St::Waiting;
                if !send(u) {
                    failed += 1;
                }
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
            if u.st == St::Connecting {
                if e.events & libc::EPOLLOUT as u32 == 0 {
                    continue;
                }
                u.st = St::Waiting;
                if !send(u) {
                    failed += 1;
                }
                continue;
            }
            if e.events & libc::EPOLLIN as u32 == 0 || u.st != St::Waiting {
                continue;
            }
            loop {
                let r = unsafe { libc::recv(u.fd, scratch.as_mut_ptr().cast(), scratch.len(), 0) };
                if r <= 0 {
                    break;
                }
                u.buf.extend_from_slice(&scratch[..r as usize]);
                if (r as usize) < scratch.len() {
                    break;
                }
            }
            let (used, finals) = messages(&u.buf);
            u.buf.drain(..used);
            for _ in 0..finals {
                ops += 1;
                u.step += 1;
                match u.step {
                    3 => {
                        u.st = St::Thinking;
                        timers.push(Reverse((Instant::now() + Duration::from_secs(1), key)));
                    }
                    6 => {
                        u.st = St::Thinking;
                        timers.push(Reverse((Instant::now() + Duration::from_secs(hold), key)));
                    }
                    _ => {
                        if !send(u) {
                            failed += 1;
                        }
                    }
                }
            }
        }
    }
    let (u1, s1) = session::cpu();
    let (u, s) = (u1 - u0, s1 - s0);
    println!(
        "floor-ldap: {ops} operations, {done} of {users} users done, {failed} sends failed, \
         user {u:.3} sys {s:.3}, {:.2} us CPU per operation, {:.1} s",
        (u + s) * 1e6 / ops.max(1) as f64,
        start.elapsed().as_secs_f64()
    );
    if done < users || failed > 0 {
        std::process::exit(1);
    }
}
