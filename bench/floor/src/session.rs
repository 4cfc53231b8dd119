//! What the session floor clients (src/bin/ldap.rs, src/bin/mysql.rs) share: their arguments,
//! the process's CPU, a non-blocking connect registered with epoll, Poisson arrivals.

/// `NAME HOST:PORT USERS RATE HOLD_SECONDS` (exit 2 with the usage line otherwise): the target
/// as a sockaddr, the users, their arrival rate per second, the hold.
pub fn args(name: &str) -> (libc::sockaddr_in, usize, f64, u64) {
    let args: Vec<String> = std::env::args().collect();
    let parsed = (args.len() == 5)
        .then(|| {
            Some((
                args[1].parse::<std::net::SocketAddrV4>().ok()?,
                args[2].parse::<usize>().ok()?,
                args[3].parse::<f64>().ok()?,
                args[4].parse::<u64>().ok()?,
            ))
        })
        .flatten();
    let Some((target, users, rate, hold)) = parsed.filter(|p| p.1 > 0 && p.2 > 0.0) else {
        eprintln!("usage: {name} HOST:PORT USERS RATE HOLD_SECONDS");
        std::process::exit(2);
    };
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: target.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*target.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    (addr, users, rate, hold)
}

/// The process's user and system CPU-seconds so far.
pub fn cpu() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

/// A non-blocking TCP socket (TCP_NODELAY) registered edge-triggered for `events` under `key`,
/// its connect started.
pub fn connect(addr: &libc::sockaddr_in, ep: i32, key: usize, events: i32) -> i32 {
    unsafe {
        let fd = libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            4,
        );
        let mut ev = libc::epoll_event {
            events: (events | libc::EPOLLET) as u32,
            u64: key as u64,
        };
        libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev);
        libc::connect(
            fd,
            (addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        fd
    }
}

/// Waits for events until `wake` (at most 1 s, at least 1 ms when `wake` is still ahead: a
/// sub-millisecond wait must not spin); how many of `evs` came.
pub fn wait(ep: i32, evs: &mut [libc::epoll_event], wake: std::time::Instant) -> usize {
    let now = std::time::Instant::now();
    let ms = wake.saturating_duration_since(now).as_millis();
    let ms = if ms == 0 && wake > now {
        1
    } else {
        ms.min(1000) as i32
    };
    let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, ms) };
    n.max(0) as usize
}

/// Uniform numbers in (0, 1) from a xorshift generator seeded by the process id: exponential
/// gaps `-ln(u) / rate` make Poisson arrivals.
pub fn uniform() -> impl FnMut() -> f64 {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        ((seed >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}
