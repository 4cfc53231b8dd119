//! The readiness mechanisms a reactor worker can run on: `select(2)`, `poll(2)` and `epoll(7)`,
//! behind one small trait so that one event loop ([`crate::reactor`]) serves all three.
//!
//! The three differ exactly where seed 000's kernel-poll factor lives:
//!
//! - [`Select`] keeps two bitmaps of [`libc::FD_SETSIZE`] (1024) bits. Every call copies them,
//!   the kernel scans every descriptor below the highest one, and we scan the result again: cost
//!   O(highest descriptor) per call, whatever is ready. A descriptor at or above 1024 cannot be
//!   represented at all; [`PollSet::fits`] says so and [`Select::register`] refuses it rather than
//!   write past the bitmap.
//! - [`Poll`] keeps one `pollfd` per descriptor, maintained in place (swap-remove on close) and
//!   handed whole to the kernel on every call, which then looks at every socket: O(registered
//!   descriptors) per call. DESIGN.md measured ~1.6 ms per call over 9,000 idle sockets.
//! - [`Epoll`] registers a descriptor once; the kernel keeps the ready list, so a wait costs
//!   O(ready), ~0.2 µs at any size.
//!
//! Semantics the loop relies on. select and poll are **level-triggered**: a descriptor is
//! reported on every wait while it is ready *and watched*, so a connection must watch only what
//! it will act on: reading while it takes input, writing only while it holds an unsent tail
//! (then not reading: that is the back-pressure), nothing while it waits on a timer. epoll is
//! registered **edge-triggered** for connections (and the listener): the loop reads until a
//! short read and writes until the tail is gone, so nothing is left behind an edge; see
//! `reactor.rs`. Changing a connection's interest is therefore rare: at most twice per response
//! that does not fit the socket, and around a `/sleep`; epoll skips the change whenever its
//! registration would be the same, so its steady state stays one `epoll_wait` + one `read` + one
//! `write` per request.
//!
//! Flags reported by [`PollSet::event`] use the `EPOLL*` bit values (`EPOLLIN`, `EPOLLOUT`,
//! `EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`), which on Linux are also the `POLL*` values.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::sys::{self, Epoll as EpollFd, FdSet, FdTooHigh};

pub(crate) const IN: u32 = libc::EPOLLIN as u32;
pub(crate) const OUT: u32 = libc::EPOLLOUT as u32;
pub(crate) const RDHUP: u32 = libc::EPOLLRDHUP as u32;
pub(crate) const HUP: u32 = libc::EPOLLHUP as u32;
pub(crate) const ERR: u32 = libc::EPOLLERR as u32;
const ET: u32 = libc::EPOLLET as u32;

/// What a registered descriptor waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Input (and hang-ups).
    Read,
    /// Room to write an unsent tail. Level-triggered pollers then stop watching input; epoll
    /// keeps its (edge-triggered) input registration, which costs nothing while idle.
    Write,
    /// Nothing for now (a `/sleep` in progress, an accept back-off). The descriptor stays
    /// registered; level-triggered pollers do not report it at all, not even a hang-up.
    None,
}

/// A worker's set of watched descriptors. `token`s are small integers chosen by the caller
/// (unique among registered descriptors).
pub(crate) trait PollSet {
    /// Name for messages: "select", "poll" or "epoll".
    const NAME: &'static str;

    /// Whether this poller can watch `fd` at all (select: `fd < FD_SETSIZE`).
    fn fits(_fd: RawFd) -> bool {
        true
    }

    /// Register the stop eventfd: watched for input, level-triggered, for ever.
    fn register_stop(&mut self, fd: RawFd, token: u64) -> io::Result<()>;

    /// Register a listener or a connection.
    fn register(&mut self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()>;

    /// Change what a registered descriptor waits for (`old` is its current interest).
    fn reregister(&mut self, fd: RawFd, token: u64, old: Interest, new: Interest)
        -> io::Result<()>;

    /// Forget a descriptor; call it *before* closing the descriptor (select and poll hold the
    /// number, which the next accept may reuse).
    fn deregister(&mut self, fd: RawFd, token: u64);

    /// Stop watching the stop eventfd, which stays open (a draining worker; see `reactor.rs`).
    fn deregister_stop(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.deregister(fd, token);
        Ok(())
    }

    /// Wait for readiness (`None`: for ever); returns the number of events, read with
    /// [`PollSet::event`]. A signal interrupting the wait gives 0 events.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<usize>;

    /// Event `i` of the last wait: (token, `EPOLL*` flags).
    fn event(&self, i: usize) -> (u64, u32);
}

/// Milliseconds for the kernel, rounded up (a timer due in 0.3 ms must not become a busy
/// `timeout = 0` loop) and capped; `-1` waits for ever.
pub(crate) fn timeout_ms(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            i32::try_from(ms).unwrap_or(i32::MAX)
        }
    }
}

// --- epoll -------------------------------------------------------------------------------------

/// Events taken per `epoll_wait`.
const EPOLL_EVENTS: usize = 256;

/// epoll, edge-triggered for connections and listener.
pub(crate) struct Epoll {
    epoll: EpollFd,
    events: Vec<sys::Event>,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        Ok(Epoll {
            epoll: EpollFd::new()?,
            events: vec![sys::EMPTY_EVENT; EPOLL_EVENTS],
        })
    }

    fn flags(interest: Interest) -> u32 {
        match interest {
            // A connection's registration while nothing waits to be written. RDHUP lets the
            // read loop see a half-close without an extra read.
            Interest::Read | Interest::None => IN | RDHUP | ET,
            Interest::Write => IN | RDHUP | OUT | ET,
        }
    }
}

impl PollSet for Epoll {
    const NAME: &'static str = "epoll";

    fn register_stop(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.epoll.add(fd, IN, token)
    }

    fn register(&mut self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.epoll.add(fd, Self::flags(interest), token)
    }

    fn reregister(
        &mut self,
        fd: RawFd,
        token: u64,
        old: Interest,
        new: Interest,
    ) -> io::Result<()> {
        let flags = Self::flags(new);
        if flags == Self::flags(old) {
            return Ok(());
        }
        self.epoll.modify(fd, flags, token)
    }

    /// Nothing to do: closing the descriptor removes it from the epoll (it is never duplicated),
    /// so a close costs no `epoll_ctl`.
    fn deregister(&mut self, _fd: RawFd, _token: u64) {}

    /// The eventfd is not closed, so it must be deleted explicitly.
    fn deregister_stop(&mut self, fd: RawFd, _token: u64) -> io::Result<()> {
        self.epoll.delete(fd)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        self.epoll.wait(&mut self.events, timeout_ms(timeout))
    }

    #[inline]
    fn event(&self, i: usize) -> (u64, u32) {
        // epoll_event is packed on x86-64: copy the fields out, never borrow them.
        let ev = self.events[i];
        (ev.u64, ev.events)
    }
}

// --- poll --------------------------------------------------------------------------------------

/// Slot marker in [`Poll::slot`] for a token that is not registered.
const NO_SLOT: u32 = u32::MAX;

/// poll(2) over a `pollfd` array maintained in place.
///
/// A descriptor with [`Interest::None`] stays in the array with its `fd` bit-inverted (`!fd`,
/// negative): poll(2) skips negative descriptors entirely, hang-ups included, and inverting
/// again restores it without a second array.
#[derive(Default)]
pub(crate) struct Poll {
    fds: Vec<libc::pollfd>,
    /// Token of each entry of `fds`.
    tokens: Vec<u64>,
    /// Index into `fds` of each token (`NO_SLOT` when absent); tokens are small.
    slot: Vec<u32>,
    /// Events of the last wait.
    ready: Vec<(u64, u32)>,
}

impl Poll {
    pub fn new() -> Poll {
        Poll::default()
    }

    fn events(interest: Interest) -> i16 {
        match interest {
            Interest::Read | Interest::None => libc::POLLIN | libc::POLLRDHUP,
            Interest::Write => libc::POLLOUT,
        }
    }

    fn slot_of(&self, token: u64) -> Option<usize> {
        match self.slot.get(token as usize) {
            Some(&s) if s != NO_SLOT => Some(s as usize),
            _ => None,
        }
    }

    fn add(&mut self, fd: RawFd, token: u64, events: i16, enabled: bool) -> io::Result<()> {
        if self.slot_of(token).is_some() {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        let t = token as usize;
        if self.slot.len() <= t {
            self.slot.resize(t + 1, NO_SLOT);
        }
        self.slot[t] = self.fds.len() as u32;
        self.fds.push(libc::pollfd {
            fd: if enabled { fd } else { !fd },
            events,
            revents: 0,
        });
        self.tokens.push(token);
        Ok(())
    }
}

impl PollSet for Poll {
    const NAME: &'static str = "poll";

    fn register_stop(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.add(fd, token, libc::POLLIN, true)
    }

    fn register(&mut self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.add(
            fd,
            token,
            Self::events(interest),
            interest != Interest::None,
        )
    }

    fn reregister(
        &mut self,
        fd: RawFd,
        token: u64,
        _old: Interest,
        new: Interest,
    ) -> io::Result<()> {
        let i = self
            .slot_of(token)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let p = &mut self.fds[i];
        p.fd = if new == Interest::None { !fd } else { fd };
        p.events = Self::events(new);
        Ok(())
    }

    fn deregister(&mut self, _fd: RawFd, token: u64) {
        let Some(i) = self.slot_of(token) else {
            return;
        };
        self.slot[token as usize] = NO_SLOT;
        self.fds.swap_remove(i);
        self.tokens.swap_remove(i);
        if let Some(&moved) = self.tokens.get(i) {
            self.slot[moved as usize] = i as u32;
        }
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        self.ready.clear();
        let n = sys::poll(&mut self.fds, timeout_ms(timeout))?;
        if n == 0 {
            return Ok(0);
        }
        // The O(n) scan that makes poll what it is (the kernel just did the same).
        for (p, &token) in self.fds.iter().zip(&self.tokens) {
            if p.revents != 0 {
                let mut flags = p.revents as u16 as u32;
                if p.revents & libc::POLLNVAL != 0 {
                    flags |= ERR;
                }
                self.ready.push((token, flags));
                if self.ready.len() == n {
                    break;
                }
            }
        }
        Ok(self.ready.len())
    }

    #[inline]
    fn event(&self, i: usize) -> (u64, u32) {
        self.ready[i]
    }
}

// --- select ------------------------------------------------------------------------------------

/// select(2) over two bitmaps; descriptors must be below `FD_SETSIZE` (1024).
pub(crate) struct Select {
    /// What each descriptor waits for; copied into the working sets before every call.
    want_read: FdSet,
    want_write: FdSet,
    /// Working copies the kernel overwrites with the ready subsets.
    read: FdSet,
    write: FdSet,
    /// Token of each registered descriptor, indexed by descriptor.
    token: Box<[u64]>,
    registered: FdSet,
    /// Highest registered descriptor, or -1.
    max_fd: RawFd,
    ready: Vec<(u64, u32)>,
}

impl Select {
    pub fn new() -> Select {
        Select {
            want_read: FdSet::new(),
            want_write: FdSet::new(),
            read: FdSet::new(),
            write: FdSet::new(),
            token: vec![0; libc::FD_SETSIZE].into_boxed_slice(),
            registered: FdSet::new(),
            max_fd: -1,
            ready: Vec::new(),
        }
    }

    fn set_interest(&mut self, fd: RawFd, interest: Interest) {
        self.want_read.remove(fd);
        self.want_write.remove(fd);
        // `fd` fits: it is registered.
        let _ = match interest {
            Interest::Read => self.want_read.insert(fd),
            Interest::Write => self.want_write.insert(fd),
            Interest::None => Ok(()),
        };
    }
}

impl PollSet for Select {
    const NAME: &'static str = "select";

    fn fits(fd: RawFd) -> bool {
        FdSet::fits(fd)
    }

    fn register_stop(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.register(fd, token, Interest::Read)
    }

    fn register(&mut self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        if !FdSet::fits(fd) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, FdTooHigh(fd)));
        }
        if self.registered.contains(fd) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        self.registered.insert(fd).map_err(io::Error::other)?;
        self.token[fd as usize] = token;
        self.max_fd = self.max_fd.max(fd);
        self.set_interest(fd, interest);
        Ok(())
    }

    fn reregister(
        &mut self,
        fd: RawFd,
        _token: u64,
        _old: Interest,
        new: Interest,
    ) -> io::Result<()> {
        if !self.registered.contains(fd) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        self.set_interest(fd, new);
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd, _token: u64) {
        if !self.registered.contains(fd) {
            return;
        }
        self.registered.remove(fd);
        self.want_read.remove(fd);
        self.want_write.remove(fd);
        while self.max_fd >= 0 && !self.registered.contains(self.max_fd) {
            self.max_fd -= 1;
        }
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        self.ready.clear();
        self.read = self.want_read;
        self.write = self.want_write;
        let n = sys::select(
            self.max_fd + 1,
            &mut self.read,
            &mut self.write,
            timeout_ms(timeout),
        )?;
        if n == 0 {
            return Ok(0);
        }
        // `n` counts bits, so a descriptor ready both ways counts twice.
        let mut bits = 0;
        for fd in 0..=self.max_fd {
            let mut flags = 0;
            if self.read.contains(fd) {
                flags |= IN;
            }
            if self.write.contains(fd) {
                flags |= OUT;
            }
            if flags != 0 {
                self.ready.push((self.token[fd as usize], flags));
                bits += (flags.count_ones()) as usize;
                if bits >= n {
                    break;
                }
            }
        }
        Ok(self.ready.len())
    }

    #[inline]
    fn event(&self, i: usize) -> (u64, u32) {
        self.ready[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    /// The same script for every poller: interest changes, level vs edge, deregistration.
    fn script<P: PollSet>(mut p: P, level: bool) {
        let (a, mut a_peer) = pair();
        let (b, _b_peer) = pair();
        p.register(a.as_raw_fd(), 10, Interest::Read).unwrap();
        p.register(b.as_raw_fd(), 11, Interest::Read).unwrap();
        let short = Some(Duration::from_millis(0));
        assert_eq!(p.wait(short).unwrap(), 0, "{}: nothing ready", P::NAME);

        a_peer.write_all(b"x").unwrap();
        assert_eq!(p.wait(short).unwrap(), 1);
        let (t, f) = p.event(0);
        assert_eq!(t, 10);
        assert!(f & IN != 0, "{}: {f:#x}", P::NAME);
        // Not read: level-triggered pollers say it again, epoll (edge) does not.
        assert_eq!(p.wait(short).unwrap(), usize::from(level), "{}", P::NAME);

        // Watching nothing: not reported even though readable.
        p.reregister(a.as_raw_fd(), 10, Interest::Read, Interest::None)
            .unwrap();
        a_peer.write_all(b"y").unwrap();
        if level {
            assert_eq!(p.wait(short).unwrap(), 0, "{}", P::NAME);
        }
        // Watching writability only: reported writable, never readable on level pollers.
        p.reregister(a.as_raw_fd(), 10, Interest::None, Interest::Write)
            .unwrap();
        assert_eq!(p.wait(short).unwrap(), 1, "{}", P::NAME);
        let (t, f) = p.event(0);
        assert_eq!(t, 10);
        assert!(f & OUT != 0);
        if level {
            assert_eq!(f & IN, 0, "{}", P::NAME);
        }

        // Deregistered: never reported again, and the other one still is.
        p.deregister(a.as_raw_fd(), 10);
        drop(a);
        drop(_b_peer);
        assert_eq!(p.wait(short).unwrap(), 1, "{}", P::NAME);
        assert_eq!(p.event(0).0, 11);
    }

    #[test]
    fn poll_script() {
        script(Poll::new(), true);
    }

    #[test]
    fn select_script() {
        script(Select::new(), true);
    }

    #[test]
    fn epoll_script() {
        script(Epoll::new().unwrap(), false);
    }

    #[test]
    fn select_refuses_descriptors_beyond_fd_setsize() {
        let mut s = Select::new();
        assert!(!Select::fits(1024));
        assert!(Select::fits(1023));
        let e = s.register(1024, 5, Interest::Read).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("FD_SETSIZE"), "{e}");
        assert!(s.register(-1, 5, Interest::Read).is_err());
        assert_eq!(s.max_fd, -1);
    }

    #[test]
    fn poll_swap_remove_keeps_the_token_index() {
        let mut p = Poll::new();
        let pairs: Vec<_> = (0..5).map(|_| pair()).collect();
        for (i, (a, _)) in pairs.iter().enumerate() {
            p.register(a.as_raw_fd(), 100 + i as u64, Interest::Read)
                .unwrap();
        }
        p.deregister(pairs[1].0.as_raw_fd(), 101);
        p.deregister(pairs[4].0.as_raw_fd(), 104);
        for (i, (a, _)) in pairs.iter().enumerate() {
            let present = p.slot_of(100 + i as u64);
            assert_eq!(present.is_some(), i != 1 && i != 4);
            if let Some(s) = present {
                assert_eq!(p.fds[s].fd, a.as_raw_fd());
                assert_eq!(p.tokens[s], 100 + i as u64);
            }
        }
        (&pairs[3].1).write_all(b"z").unwrap();
        assert_eq!(p.wait(Some(Duration::ZERO)).unwrap(), 1);
        assert_eq!(p.event(0).0, 103);
    }

    #[test]
    fn timeouts_round_up() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_micros(300))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_millis(7))), 7);
        assert_eq!(timeout_ms(Some(Duration::from_secs(1 << 40))), i32::MAX);
    }
}
