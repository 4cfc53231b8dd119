//! The floor client of bench/floor.sh (issue 29): the same closed HTTP/1.1 keep-alive loop over
//! epoll (edge-triggered, the next request sent right after a reply, as headroom does) and over
//! io_uring (one recv and one send per reply, one io_uring_enter per loop turn). It prints
//! responses, CPU user/sys and responses per CPU-second; bench/floor.sh counts at nginx.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const REQ: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
const END: &[u8] = b"hello\n";

fn count(buf: &[u8], tail: &mut usize) -> u32 {
    // responses end with "hello\n"; `tail` = bytes of END matched at the end of the last read
    let mut n = 0;
    for &b in buf {
        if b == END[*tail] {
            *tail += 1;
            if *tail == END.len() {
                n += 1;
                *tail = 0;
            }
        } else {
            *tail = if b == END[0] { 1 } else { 0 };
        }
    }
    n
}

fn cpu() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parsed = (args.len() == 5)
        .then(|| Some((args[3].parse::<usize>().ok()?, args[4].parse::<u64>().ok()?)))
        .flatten();
    let Some((conns, secs)) =
        parsed.filter(|_| matches!(args[1].as_str(), "epoll" | "uring" | "multi"))
    else {
        eprintln!("usage: floor epoll|uring|multi HOST:PORT CONNECTIONS SECONDS");
        std::process::exit(2);
    };
    let (mode, addr) = (args[1].clone(), args[2].clone());
    let mut socks: Vec<TcpStream> = (0..conns)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    // warm: one request each, blocking
    for s in socks.iter_mut() {
        s.write_all(REQ).unwrap();
        let mut b = [0u8; 4096];
        let mut t = 0;
        loop {
            let n = s.read(&mut b).unwrap();
            if count(&b[..n], &mut t) > 0 {
                break;
            }
        }
    }
    for s in &socks {
        s.set_nonblocking(true).unwrap();
    }
    let (u0, s0) = cpu();
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let done = match mode.as_str() {
        "epoll" => run_epoll(&socks, end),
        "uring" => run_uring(&socks, end),
        "multi" => run_multi(&socks, end),
        _ => unreachable!("checked above"),
    };
    let (u1, s1) = cpu();
    let (u, s) = (u1 - u0, s1 - s0);
    println!(
        "{mode}: {done} responses in {:.2}s, user {u:.3} sys {s:.3}, {:.0} resp/cpu-s, {:.0} resp/s",
        start.elapsed().as_secs_f64(),
        done as f64 / (u + s),
        done as f64 / start.elapsed().as_secs_f64()
    );
}

fn run_epoll(socks: &[TcpStream], end: Instant) -> u64 {
    let ep = unsafe { libc::epoll_create1(0) };
    let mut tails = vec![0usize; socks.len()];
    for (i, s) in socks.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: i as u64,
        };
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
        unsafe { libc::send(s.as_raw_fd(), REQ.as_ptr() as _, REQ.len(), 0) };
    }
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut buf = vec![0u8; 65536];
    let mut done = 0u64;
    let mut turns = 0u64;
    let spin: u32 = std::env::var("FLOOR_SPIN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while Instant::now() < end {
        // SPIN (env FLOOR_SPIN, default 0): polls without sleeping before a wait that may sleep.
        let mut n = 0;
        for _ in 0..spin {
            n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), 1024, 0) };
            if n != 0 {
                break;
            }
        }
        if n == 0 {
            n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), 1024, 100) };
        }
        turns += 1;
        for e in &evs[..n.max(0) as usize] {
            let i = e.u64 as usize;
            let fd = socks[i].as_raw_fd();
            let r = unsafe { libc::recv(fd, buf.as_mut_ptr() as _, buf.len(), 0) };
            if r <= 0 {
                continue;
            }
            let c = count(&buf[..r as usize], &mut tails[i]);
            done += c as u64;
            if c > 0 {
                unsafe { libc::send(fd, REQ.as_ptr() as _, REQ.len(), 0) };
            }
        }
    }
    eprintln!("epoll turns {turns}");
    done
}

fn run_uring(socks: &[TcpStream], end: Instant) -> u64 {
    use io_uring::{opcode, types};
    let mut ring = new_ring(socks.len());
    let n = socks.len();
    let mut bufs = vec![vec![0u8; 4096]; n];
    let mut tails = vec![0usize; n];
    let mut pending: Vec<io_uring::squeue::Entry> = Vec::with_capacity(2 * n);
    let recv = |i: usize, buf: &mut Vec<u8>| {
        opcode::Recv::new(types::Fd(socks[i].as_raw_fd()), buf.as_mut_ptr(), 4096)
            .build()
            .user_data((i * 2) as u64)
    };
    for (i, buf) in bufs.iter_mut().enumerate() {
        pending.push(send_request(types::Fd(socks[i].as_raw_fd()), i));
        pending.push(recv(i, buf));
    }
    run_turns(
        "uring",
        &mut ring,
        &mut pending,
        end,
        |i, r, _flags, pending| {
            if r <= 0 {
                panic!("recv {r}");
            }
            let c = count(&bufs[i][..r as usize], &mut tails[i]);
            if c > 0 {
                pending.push(send_request(types::Fd(socks[i].as_raw_fd()), i));
            }
            pending.push(recv(i, &mut bufs[i]));
            c
        },
    )
}

/// io_uring with one multishot recv per connection drawing from a provided-buffer ring (armed once
/// for the connection's life), and a send per reply; one io_uring_enter per loop turn.
fn run_multi(socks: &[TcpStream], end: Instant) -> u64 {
    use io_uring::{cqueue, opcode, types};
    const ENTRIES: u16 = 256;
    const BUF: usize = 2048;
    let mut ring = new_ring(socks.len());
    // The buffer ring: page-aligned (mmap), ENTRIES entries of 16 bytes; the tail shares entry 0.
    let ring_len = ENTRIES as usize * std::mem::size_of::<types::BufRingEntry>();
    // SAFETY: anonymous private mapping, checked below, never unmapped while the ring lives.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            ring_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
            -1,
            0,
        )
    };
    assert!(base != libc::MAP_FAILED);
    let entries = base as *mut types::BufRingEntry;
    let mut slab = vec![0u8; ENTRIES as usize * BUF];
    // SAFETY: the mapping is live for the ring's life and holds ENTRIES entries.
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(base as u64, ENTRIES, 7, 0)
            .unwrap();
    }
    let mut tail: u16 = 0;
    let publish = |tail: &mut u16, bid: u16, slab: &mut Vec<u8>| {
        // SAFETY: index masked into the ring; the tail is the ring's own field.
        unsafe {
            let e = &mut *entries.add((*tail & (ENTRIES - 1)) as usize);
            e.set_addr(slab.as_mut_ptr().add(bid as usize * BUF) as u64);
            e.set_len(BUF as u32);
            e.set_bid(bid);
            *tail = tail.wrapping_add(1);
            let t = types::BufRingEntry::tail(entries) as *const std::sync::atomic::AtomicU16;
            (*t).store(*tail, std::sync::atomic::Ordering::Release);
        }
    };
    for bid in 0..ENTRIES {
        publish(&mut tail, bid, &mut slab);
    }
    let n = socks.len();
    let mut tails = vec![0usize; n];
    let mut pending: Vec<io_uring::squeue::Entry> = Vec::with_capacity(2 * n);
    let recv_multi = |i: usize| {
        opcode::RecvMulti::new(types::Fd(socks[i].as_raw_fd()), 7)
            .build()
            .user_data((i * 2) as u64)
    };
    for (i, s) in socks.iter().enumerate() {
        pending.push(send_request(types::Fd(s.as_raw_fd()), i));
        pending.push(recv_multi(i));
    }
    run_turns(
        "multi",
        &mut ring,
        &mut pending,
        end,
        |i, r, flags, pending| {
            let mut c = 0;
            if r > 0 {
                let bid = cqueue::buffer_select(flags).expect("a buffer");
                c = count(&slab[bid as usize * BUF..][..r as usize], &mut tails[i]);
                publish(&mut tail, bid, &mut slab);
                if c > 0 {
                    pending.push(send_request(types::Fd(socks[i].as_raw_fd()), i));
                }
            } else if r != -libc::ENOBUFS {
                panic!("recv {r}");
            }
            if !cqueue::more(flags) {
                pending.push(recv_multi(i));
            }
            c
        },
    )
}

/// The loop both io_uring variants run until `end`: queue what is pending, one io_uring_enter a
/// turn, send completions ignored, each recv completion of connection `i` handed to `on_recv(i,
/// result, flags, pending)`, which queues what follows and returns the replies it completed.
/// Returns the replies in all.
fn run_turns(
    name: &str,
    ring: &mut io_uring::IoUring,
    pending: &mut Vec<io_uring::squeue::Entry>,
    end: Instant,
    mut on_recv: impl FnMut(usize, i32, u32, &mut Vec<io_uring::squeue::Entry>) -> u32,
) -> u64 {
    push_all(ring, pending);
    let mut done = 0u64;
    let mut turns = 0u64;
    while Instant::now() < end {
        submit_and_wait(ring);
        turns += 1;
        for cqe in ring.completion() {
            let ud = cqe.user_data() as usize;
            if ud.is_multiple_of(2) {
                done += u64::from(on_recv(ud / 2, cqe.result(), cqe.flags(), pending));
            }
        }
        push_all(ring, pending);
    }
    eprintln!("{name} turns {turns}");
    done
}

/// The ring both io_uring variants use: one issuer, completions run when we wait, room for a
/// send and a recv of every connection at once.
fn new_ring(conns: usize) -> io_uring::IoUring {
    io_uring::IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .setup_defer_taskrun()
        .build((2 * conns).next_power_of_two().max(256) as u32)
        .unwrap()
}

/// Submit what is queued and wait for one completion at most 100 ms: one io_uring_enter a turn.
fn submit_and_wait(ring: &io_uring::IoUring) {
    let ts = io_uring::types::Timespec::new().nsec(100_000_000);
    let args = io_uring::types::SubmitArgs::new().timespec(&ts);
    match ring.submitter().submit_with_args(1, &args) {
        Ok(_) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
        Err(e) => panic!("{e}"),
    }
}

/// The next request of connection `i` (user_data: i*2 is its recv, i*2+1 its send).
fn send_request(fd: io_uring::types::Fd, i: usize) -> io_uring::squeue::Entry {
    io_uring::opcode::Send::new(fd, REQ.as_ptr(), REQ.len() as u32)
        .build()
        .user_data((i * 2 + 1) as u64)
}

/// Queue the turn's entries (the ring has room: at most two per connection, `new_ring`).
fn push_all(ring: &mut io_uring::IoUring, pending: &mut Vec<io_uring::squeue::Entry>) {
    // SAFETY: every buffer an entry points at (REQ, the connections' buffers, the buffer ring)
    // lives until the run ends.
    unsafe {
        let mut sq = ring.submission();
        for e in pending.drain(..) {
            sq.push(&e).unwrap();
        }
    }
}
