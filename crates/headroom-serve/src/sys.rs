//! The few Linux calls std does not offer, wrapped so that the rest of the crate has no `unsafe`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// One readiness report: the registration's token and the `EPOLL*` flags.
pub type Event = libc::epoll_event;

/// An empty event, to fill an events array with.
pub const EMPTY_EVENT: Event = libc::epoll_event { events: 0, u64: 0 };

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; on success we own the returned descriptor.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, flags: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: flags,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    pub fn add(&self, fd: RawFd, flags: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, flags, token)
    }

    pub fn modify(&self, fd: RawFd, flags: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, flags, token)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Wait for events; `timeout_ms < 0` waits forever. EINTR is reported as zero events.
    pub fn wait(&self, events: &mut [Event], timeout_ms: i32) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        // SAFETY: the kernel writes at most `max` events into `events`.
        let n =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) };
        ready_count(n)
    }
}

/// An eventfd: writing it makes it readable in every epoll it is registered with (level
/// triggered, never read), which is how one `stop()` wakes all workers.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall; on success we own the returned descriptor.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(EventFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Make the eventfd readable (its counter non-zero).
    pub fn signal(&self) -> io::Result<()> {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64.
        let r = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            // EAGAIN: the counter is saturated, so it is readable already.
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// `accept4` with SOCK_NONBLOCK | SOCK_CLOEXEC, without asking for the peer address.
pub fn accept_nonblocking(listener: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed; on success we own the returned descriptor.
    let fd = cvt(unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `poll(2)` over `fds`; `timeout_ms < 0` waits forever. EINTR is reported as zero ready.
/// Entries with a negative `fd` are ignored by the kernel (their `revents` come back 0).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: the kernel reads and writes exactly `fds.len()` entries of `fds`.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    ready_count(n)
}

/// A `select(2)` descriptor set: a fixed bitmap of [`libc::FD_SETSIZE`] bits.
///
/// Subtleness ahead: `FD_SET` with a descriptor at or above `FD_SETSIZE` writes past the end of
/// the bitmap (glibc's fortified build aborts instead; a plain build corrupts whatever follows).
/// Every method here checks the range first, so the unsafe calls stay in bounds.
#[derive(Clone, Copy)]
pub struct FdSet {
    set: libc::fd_set,
}

impl std::fmt::Debug for FdSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FdSet")
    }
}

/// A descriptor `select(2)` cannot watch: negative, or at or above `FD_SETSIZE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdTooHigh(pub RawFd);

impl std::fmt::Display for FdTooHigh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "descriptor {} is beyond select(2)'s FD_SETSIZE ({}); select cannot watch it",
            self.0,
            libc::FD_SETSIZE
        )
    }
}

impl std::error::Error for FdTooHigh {}

impl FdSet {
    pub fn new() -> FdSet {
        // SAFETY: an all-zero fd_set is a valid (empty) set; FD_ZERO writes only inside it.
        let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
        unsafe { libc::FD_ZERO(&mut set) };
        FdSet { set }
    }

    /// True when `select(2)` can watch `fd`.
    pub fn fits(fd: RawFd) -> bool {
        (0..libc::FD_SETSIZE as RawFd).contains(&fd)
    }

    pub fn insert(&mut self, fd: RawFd) -> Result<(), FdTooHigh> {
        if !Self::fits(fd) {
            return Err(FdTooHigh(fd));
        }
        // SAFETY: 0 <= fd < FD_SETSIZE, so the bit is inside `set`.
        unsafe { libc::FD_SET(fd, &mut self.set) };
        Ok(())
    }

    pub fn remove(&mut self, fd: RawFd) {
        if Self::fits(fd) {
            // SAFETY: 0 <= fd < FD_SETSIZE, so the bit is inside `set`.
            unsafe { libc::FD_CLR(fd, &mut self.set) };
        }
    }

    pub fn contains(&self, fd: RawFd) -> bool {
        // SAFETY: 0 <= fd < FD_SETSIZE, so the bit is inside `set`.
        Self::fits(fd) && unsafe { libc::FD_ISSET(fd, &self.set) }
    }
}

impl Default for FdSet {
    fn default() -> Self {
        FdSet::new()
    }
}

/// `select(2)` on descriptors below `nfds` (at most `FD_SETSIZE`); `timeout_ms < 0` waits
/// forever. The sets are replaced by the ready subsets. EINTR is reported as zero ready (the
/// sets are then unspecified: the caller rebuilds them on every call anyway).
pub fn select(
    nfds: RawFd,
    read: &mut FdSet,
    write: &mut FdSet,
    timeout_ms: i32,
) -> io::Result<usize> {
    let nfds = nfds.clamp(0, libc::FD_SETSIZE as RawFd);
    let mut tv = libc::timeval {
        tv_sec: (timeout_ms.max(0) / 1000) as libc::time_t,
        tv_usec: ((timeout_ms.max(0) % 1000) * 1000) as libc::suseconds_t,
    };
    let tvp: *mut libc::timeval = if timeout_ms < 0 {
        std::ptr::null_mut()
    } else {
        &mut tv
    };
    // SAFETY: `nfds <= FD_SETSIZE`, so the kernel touches only bits inside the two sets; `tvp` is
    // null or points to a live timeval.
    let n = unsafe {
        libc::select(
            nfds,
            &mut read.set,
            &mut write.set,
            std::ptr::null_mut(),
            tvp,
        )
    };
    ready_count(n)
}

/// The result of a readiness call (epoll_wait, poll, select): the number of ready descriptors,
/// with an interrupted call (EINTR) reported as nothing ready.
fn ready_count(n: libc::c_int) -> io::Result<usize> {
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// CPU time the calling thread has used so far (user and system), from
/// `CLOCK_THREAD_CPUTIME_ID`: one `clock_gettime` system call (the vDSO does not serve this
/// clock). `None` if the clock cannot be read.
pub fn thread_cpu_time() -> Option<std::time::Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec for the kernel to write; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// User CPU time of the calling thread (`getrusage(RUSAGE_THREAD)`), for tests that check work
/// was done in user space. Tick-sampled by most kernels: good to a few milliseconds.
#[cfg(test)]
pub fn thread_user_time() -> std::time::Duration {
    // SAFETY: an all-zero rusage is valid; the kernel fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live rusage for the kernel to write.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_THREAD)");
    std::time::Duration::new(ru.ru_utime.tv_sec as u64, ru.ru_utime.tv_usec as u32 * 1000)
}
