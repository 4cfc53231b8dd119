//! `headroom_proto::raw` matchers over real TCP: a server thread on 127.0.0.1:0 answers each
//! request line with scripted replies, written in awkward pieces (Nagle off, a pause between
//! writes) so the client's reads split replies, delimiters and length headers in the middle;
//! the client reads into a small buffer and feeds each read to the matcher, as the engine will.
//! Every read has a timeout and every test a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use headroom_proto::raw::{Endian, Expect, LengthPrefix, Matcher, Progress, RawError};

const DEADLINE: Duration = Duration::from_secs(20);

/// A server for one connection: for each request line it reads, it writes the next reply
/// (`replies[i]`), cut into pieces whose sizes cycle through `pieces`, pausing between pieces.
/// After the last reply it writes `trailer` and closes.
fn serve(
    replies: Vec<Vec<u8>>,
    pieces: &'static [usize],
    trailer: Vec<u8>,
) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        let mut k = 0usize;
        for reply in &replies {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let mut rest = &reply[..];
            while !rest.is_empty() {
                let n = pieces[k % pieces.len()].clamp(1, rest.len());
                k += 1;
                writer.write_all(&rest[..n]).unwrap();
                rest = &rest[n..];
                thread::sleep(Duration::from_micros(300));
            }
        }
        writer.write_all(&trailer).unwrap();
    });
    (addr, handle)
}

/// Sends one request line per expected reply and feeds every read (at most `read_size` bytes)
/// to the matcher; returns the replies' lengths, their bytes as the client split them out, and
/// the end of the connection (`eof`).
fn client(
    addr: SocketAddr,
    expect: Expect,
    requests: usize,
    read_size: usize,
) -> (Vec<u64>, Vec<Vec<u8>>, Result<(), RawError>, usize) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut m = Matcher::new(expect);
    let mut lens = Vec::new();
    let mut bodies = Vec::new();
    let mut current = Vec::new();
    let mut buf = vec![0u8; read_size];
    let mut reads = 0usize;
    stream.write_all(b"next\n").unwrap();
    loop {
        assert!(started.elapsed() < DEADLINE, "deadline");
        let n = stream.read(&mut buf).unwrap();
        reads += 1;
        if n == 0 {
            return (lens, bodies, m.eof(), reads);
        }
        let mut p = &buf[..n];
        loop {
            match m.feed(p) {
                Err(e) => return (lens, bodies, Err(e), reads),
                Ok((used, Progress::NeedMore)) => {
                    current.extend_from_slice(&p[..used]);
                    break;
                }
                Ok((used, Progress::Complete(r))) => {
                    current.extend_from_slice(&p[..used]);
                    assert_eq!(r.len as usize, current.len());
                    lens.push(r.len);
                    bodies.push(std::mem::take(&mut current));
                    p = &p[used..];
                    if lens.len() < requests {
                        stream.write_all(b"next\n").unwrap();
                    }
                    if p.is_empty() {
                        break;
                    }
                }
            }
        }
    }
}

#[test]
fn bytes_over_tcp() {
    let replies: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 100]).collect();
    let (addr, h) = serve(replies.clone(), &[7, 33, 1, 64, 250], Vec::new());
    let (lens, bodies, end, reads) = client(addr, Expect::bytes(100).unwrap(), 20, 37);
    h.join().unwrap();
    assert_eq!(lens, vec![100; 20]);
    assert_eq!(bodies, replies);
    assert_eq!(end, Ok(()));
    eprintln!("bytes(100): 20 replies in {reads} reads");
}

#[test]
fn delimiter_over_tcp_split_inside_the_delimiter() {
    // Replies end with "\r\n\r\n"; pieces of 3 and 5 bytes cut the delimiter in every way.
    let replies: Vec<Vec<u8>> = (0..30)
        .map(|i| format!("HEAD {i}\r\nX: {}\r\n\r\n", "y".repeat(i * 7)).into_bytes())
        .collect();
    let (addr, h) = serve(replies.clone(), &[3, 5, 2, 1], b"partial\r\n".to_vec());
    let (lens, bodies, end, reads) = client(addr, Expect::delimiter(b"\r\n\r\n").unwrap(), 30, 11);
    h.join().unwrap();
    assert_eq!(bodies, replies);
    assert_eq!(lens.len(), 30);
    assert_eq!(
        end,
        Err(RawError::Incomplete),
        "the trailer has no delimiter"
    );
    eprintln!("delimiter: 30 replies in {reads} reads");
}

#[test]
fn length_prefix_over_tcp() {
    // PostgreSQL-style messages: a tag, a 4-byte big-endian length counting itself.
    let mut replies = Vec::new();
    for i in 0..25u32 {
        let body = vec![b'a' + (i % 26) as u8; (i * i * 13) as usize % 3000];
        let mut msg = vec![b'D'];
        msg.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        msg.extend_from_slice(&body);
        replies.push(msg);
    }
    let (addr, h) = serve(replies.clone(), &[2, 3, 1, 700, 4], Vec::new());
    let expect = Expect::length_prefix(LengthPrefix {
        offset: 1,
        width: 4,
        endian: Endian::Big,
        includes_header: false,
        adjust: -4,
    })
    .unwrap();
    let (lens, bodies, end, reads) = client(addr, expect, 25, 64);
    h.join().unwrap();
    assert_eq!(bodies, replies);
    assert_eq!(end, Ok(()));
    eprintln!(
        "length prefix: 25 replies ({} bytes) in {reads} reads",
        lens.iter().sum::<u64>()
    );
    // Little-endian 2-byte lengths counting the whole reply, several replies per request.
    let mut replies = Vec::new();
    for i in 0..10u16 {
        let total = 2 + i * 3;
        let mut msg = total.to_le_bytes().to_vec();
        msg.extend(std::iter::repeat_n(b'z', usize::from(total - 2)));
        replies.push(msg);
    }
    let joined = vec![replies.concat()];
    let (addr, h) = serve(joined, &[1, 2, 3], Vec::new());
    let expect = Expect::length_prefix(LengthPrefix {
        offset: 0,
        width: 2,
        endian: Endian::Little,
        includes_header: true,
        adjust: 0,
    })
    .unwrap();
    let (_, bodies, end, _) = client(addr, expect, 1, 5);
    h.join().unwrap();
    assert_eq!(
        bodies, replies,
        "pipelined replies in one write each split out"
    );
    assert_eq!(end, Ok(()));
}

#[test]
fn regex_over_tcp() {
    let replies: Vec<Vec<u8>> = (0..20)
        .map(|i| {
            format!(
                "working...\r\n{}done: {} items\r\n",
                "x".repeat(i * 5),
                i * 11
            )
            .into_bytes()
        })
        .collect();
    let (addr, h) = serve(replies.clone(), &[4, 9, 1], Vec::new());
    let expect = Expect::regex(r"done: \d+ items\r\n", 512).unwrap();
    let (_, bodies, end, reads) = client(addr, expect, 20, 13);
    h.join().unwrap();
    assert_eq!(bodies, replies);
    assert_eq!(end, Ok(()));
    eprintln!("regex: 20 replies in {reads} reads");
    // A reply that never matches within the window fails once the window is full.
    let (addr, h) = serve(vec![vec![b'.'; 300]], &[50], Vec::new());
    let (lens, _, end, _) = client(addr, Expect::regex("DONE", 256).unwrap(), 1, 64);
    h.join().unwrap();
    assert!(lens.is_empty());
    assert_eq!(end, Err(RawError::NoMatchInWindow));
}
