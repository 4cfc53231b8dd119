//! The accept queues of the listening TCP sockets on a port, from the kernel's socket
//! diagnostics (NETLINK_SOCK_DIAG, what `ss -lt` reads): for a listener, `rqueue` is the
//! connections the kernel completed that the server has not accepted yet, and `wqueue` its
//! backlog. A queue that stays full while the server's CPU idles is a server that does not
//! accept: its workers are all taken (seed 004's Apache); an empty queue beside overflows is a
//! backlog too short for a burst.
//!
//! Written by hand: one dump request and its replies, a few fixed-layout structs
//! (linux/inet_diag.h); no crate here does only this. Only listening sockets are dumped (a
//! state filter in the request), so the cost does not grow with the connections a server holds.
//! Bounded: replies are read into one 32 KiB buffer, at most 4,096 reads, each waiting at most
//! 1 s.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// One port's listeners: connections waiting to be accepted, and the backlogs, summed over
/// the port's listening sockets (several with SO_REUSEPORT, one per address family...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcceptQueue {
    pub queued: u64,
    pub backlog: u64,
    /// Listening sockets found on the port.
    pub listeners: u32,
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const TCP_LISTEN: u32 = 10;
const NLMSG_HDR: usize = 16;
/// inet_diag_msg: family, state, timer, retrans (4), inet_diag_sockid (48), expires, rqueue,
/// wqueue, uid, inode (20).
const DIAG_MSG: usize = 72;
const MAX_READS: usize = 4096;

/// The accept queues of the TCP listeners on `port` (IPv4 and IPv6) in this network namespace.
pub fn accept_queue(port: u16) -> io::Result<AcceptQueue> {
    let sock = diag_socket()?;
    let mut q = AcceptQueue::default();
    for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
        dump_listeners(&sock, family, port, &mut q)?;
    }
    Ok(q)
}

fn diag_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: Duration::from_secs(1).as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval for SO_RCVTIMEO on our socket.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    Ok(sock)
}

/// The dump request for `family`'s TCP listeners: nlmsghdr + inet_diag_req_v2.
fn request(family: u8) -> [u8; NLMSG_HDR + 56] {
    let mut r = [0u8; NLMSG_HDR + 56];
    r[0..4].copy_from_slice(&((NLMSG_HDR + 56) as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence
    let b = &mut r[NLMSG_HDR..];
    b[0] = family;
    b[1] = libc::IPPROTO_TCP as u8;
    b[4..8].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    r
}

fn dump_listeners(sock: &OwnedFd, family: u8, port: u16, q: &mut AcceptQueue) -> io::Result<()> {
    let req = request(family);
    // SAFETY: an all-zero sockaddr_nl is valid; the kernel is pid 0.
    let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `req` and `to` are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 32 * 1024];
    for _ in 0..MAX_READS {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if parse(&buf[..n as usize], port, q)? {
            return Ok(());
        }
    }
    Err(io::Error::other("sock_diag: no end to the dump"))
}

/// Adds the listeners on `port` of one read of replies to `q`; true at the dump's end.
fn parse(mut b: &[u8], port: u16, q: &mut AcceptQueue) -> io::Result<bool> {
    let u32_at = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    while b.len() >= NLMSG_HDR {
        let len = u32_at(b, 0) as usize;
        let kind = u16::from_ne_bytes([b[4], b[5]]);
        if len < NLMSG_HDR || len > b.len() {
            return Err(io::Error::other("sock_diag: a truncated reply"));
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = b.get(NLMSG_HDR..NLMSG_HDR + 4).map(|e| u32_at(e, 0) as i32);
                return Err(io::Error::from_raw_os_error(-code.unwrap_or(-libc::EIO)));
            }
            SOCK_DIAG_BY_FAMILY if len >= NLMSG_HDR + DIAG_MSG => {
                let m = &b[NLMSG_HDR..len];
                let sport = u16::from_be_bytes([m[4], m[5]]);
                if u32::from(m[1]) == TCP_LISTEN && sport == port {
                    q.queued += u64::from(u32_at(m, 56));
                    q.backlog += u64::from(u32_at(m, 60));
                    q.listeners += 1;
                }
            }
            _ => {}
        }
        // Messages are 4-byte aligned.
        let step = (len + 3) & !3;
        b = b.get(step..).unwrap_or(&[]);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_nobody_accepts_from_shows_its_queue_and_backlog() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // SAFETY: listen(2) on our socket; only sets its backlog.
        unsafe { libc::listen(l.as_raw_fd(), 16) };
        let port = l.local_addr().unwrap().port();
        let before = accept_queue(port).unwrap();
        assert_eq!(
            before,
            AcceptQueue {
                queued: 0,
                backlog: 16,
                listeners: 1
            }
        );
        let held: Vec<_> = (0..5)
            .map(|_| std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap())
            .collect();
        let q = accept_queue(port).unwrap();
        assert_eq!((q.queued, q.backlog), (5, 16), "{q:?}");
        // Accepted: the queue empties.
        let accepted: Vec<_> = (0..5).map(|_| l.accept().unwrap()).collect();
        assert_eq!(accept_queue(port).unwrap().queued, 0);
        drop((held, accepted, l));
        // No listener on a port: nothing found, no error. (A port held by a TCP socket bound
        // but not listening: no other test can listen on it meanwhile, as one could on a port
        // just freed.)
        // SAFETY: a fresh socket we own (closed below); bind and getsockname on valid memory.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0);
            let mut a: libc::sockaddr_in = std::mem::zeroed();
            a.sin_family = libc::AF_INET as libc::sa_family_t;
            a.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            assert_eq!(
                libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), len),
                0
            );
            let mut got = len;
            libc::getsockname(fd, (&mut a as *mut libc::sockaddr_in).cast(), &mut got);
            let held = u16::from_be(a.sin_port);
            assert_eq!(accept_queue(held).unwrap().listeners, 0);
            libc::close(fd);
        }
    }

    #[test]
    fn replies_are_parsed_within_their_bounds() {
        let mut q = AcceptQueue::default();
        // A message claiming more bytes than the read holds is refused, not read past.
        let mut bad = vec![0u8; NLMSG_HDR];
        bad[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        bad[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert!(parse(&bad, 80, &mut q).is_err());
        // A length below the header's is refused too (it would never advance).
        bad[0..4].copy_from_slice(&4u32.to_ne_bytes());
        assert!(parse(&bad, 80, &mut q).is_err());
        // DONE ends the dump; a short diag message is skipped.
        let mut done = vec![0u8; NLMSG_HDR];
        done[0..4].copy_from_slice(&(NLMSG_HDR as u32).to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        assert!(parse(&done, 80, &mut q).unwrap());
        let mut short = vec![0u8; NLMSG_HDR + 8];
        short[0..4].copy_from_slice(&((NLMSG_HDR + 8) as u32).to_ne_bytes());
        short[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert!(!parse(&short, 80, &mut q).unwrap());
        assert_eq!(q, AcceptQueue::default());
    }
}
