//! A thin edge-triggered epoll wrapper.
//!
//! Why not mio: mio's `Poll::poll` rounds its timeout to whole milliseconds (epoll_wait), and a
//! load generator that schedules sends (`--rate`, think times, arrivals) measures latency from the
//! scheduled instant — a wake-up up to 1 ms late would show up in every corrected latency. Here
//! `epoll_pwait2` takes a nanosecond timeout (Linux 5.11+), falling back to `epoll_wait` when the
//! kernel lacks it. Every socket is registered once, edge-triggered, for reading and writing, so
//! the steady state makes no `epoll_ctl` calls at all (wrk makes two per request).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub const IN: u32 = libc::EPOLLIN as u32;
pub const OUT: u32 = libc::EPOLLOUT as u32;
pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;
pub const ERR: u32 = libc::EPOLLERR as u32;
pub const HUP: u32 = libc::EPOLLHUP as u32;
const ET: u32 = libc::EPOLLET as u32;

pub type Event = libc::epoll_event;

pub struct Epoll {
    fd: OwnedFd,
    has_pwait2: bool,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the returned descriptor is owned by the OwnedFd.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh, valid descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll {
            fd,
            has_pwait2: true,
        })
    }

    /// Register `fd` edge-triggered for input, output and peer half-close, with `data` handed
    /// back in its events. Closing the descriptor removes it (no DEL needed).
    pub fn add(&self, fd: RawFd, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: IN | OUT | RDHUP | ET,
            u64: data,
        };
        // SAFETY: valid epoll fd and event pointer for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Wait for events into `events` (its capacity is the batch size). `None` waits forever.
    pub fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        let cap = events.capacity().min(i32::MAX as usize) as i32;
        let n = loop {
            let n = if self.has_pwait2 {
                let ts = timeout.map(|t| libc::timespec {
                    tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
                    tv_nsec: t.subsec_nanos() as libc::c_long,
                });
                let tsp = ts
                    .as_ref()
                    .map_or(std::ptr::null(), |t| t as *const libc::timespec);
                // SAFETY: events has room for `cap` entries; tsp is null or points to a live
                // timespec; a null sigmask means "do not change it".
                unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        self.fd.as_raw_fd(),
                        events.as_mut_ptr(),
                        cap,
                        tsp,
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    ) as i32
                }
            } else {
                let ms = timeout.map_or(-1, |t| {
                    // Round up, so we never wake before the deadline and spin.
                    let ms = t.as_nanos().div_ceil(1_000_000);
                    ms.min(i32::MAX as u128) as i32
                });
                // SAFETY: as above.
                unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), cap, ms) }
            };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSYS) if self.has_pwait2 => self.has_pwait2 = false,
                _ => return Err(err),
            }
        };
        // SAFETY: the kernel initialised the first n entries, n <= capacity.
        unsafe { events.set_len(n) };
        Ok(())
    }
}
