//! The transport beneath every protocol: a connection is a non-blocking TCP socket, carrying
//! its bytes plain or through TLS. The worker and the protocols call [`Conn::send`],
//! [`Conn::recv`] and [`Conn::flush`] and never look at which — as wrk's `struct sock` table
//! (connect, read, write, readable) sits beneath its HTTP parser.
//!
//! Plain: `send` is one `send(2)` and `recv` one `recv(2)`, as before this layer existed.
//!
//! TLS (rustls' sans-I/O `ClientConnection`): `send` hands plaintext to rustls, which encrypts it
//! into its own buffer, then writes what it can to the socket; whatever the socket did not take
//! waits in rustls until the socket is writable again ([`Conn::wants_write`], and the worker's
//! writable event calls [`Conn::flush`]). `recv` gives plaintext: it reads ciphertext from the
//! socket into rustls (`read_tls`, straight from the socket, no buffer of ours), lets rustls
//! decrypt, and copies the plaintext into the caller's scratch buffer. Records rustls consumes
//! itself (session tickets, key updates, alerts) give no plaintext and are handled inside.
//!
//! Subtleties:
//! - A plain `recv` that returns fewer bytes than asked means the socket was drained, so the
//!   worker skips the `recv` that would say EAGAIN ([`Conn::short_read_drains`]). Not so with
//!   TLS: plaintext comes a record at a time, so the worker reads until `WouldBlock`.
//! - A peer that closes without TLS's close_notify (most HTTP servers after `Connection: close`)
//!   reads as a plain end of stream: the protocol decides whether that was premature.

use std::io::{self, Read, Write};

use headroom_core::{ErrorKind, TlsUpgrade};
use headroom_metrics::{Counters, Negotiated};
use headroom_proto::starttls::{Negotiation, Progress};
use socket2::Socket;

use crate::tls::classify;

/// Why a transport call did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IoErr {
    /// Try again when the socket is ready (EAGAIN).
    WouldBlock,
    /// The connection failed; count it as this kind.
    Failed(ErrorKind),
}

/// Bytes of plaintext rustls buffers, not yet encrypted and written, before `send` refuses more
/// (its default is 64 KiB; a generator writes a request and then waits, so this bounds only a
/// large body on a slow connection).
const TLS_SEND_LIMIT: usize = 256 * 1024;

/// One connection: the socket, and TLS if the run speaks it.
pub(crate) struct Conn {
    pub sock: Socket,
    tls: Option<Box<rustls::ClientConnection>>,
    /// The plain-text exchange before TLS (STARTTLS, SSLRequest), while it runs.
    pre: Option<Box<PreTls>>,
}

struct PreTls {
    neg: Negotiation,
    out: Vec<u8>,
    written: usize,
    /// The TLS connection to start once the server says yes.
    tls: rustls::ClientConnection,
    /// A server that says no fails the connection (else it is used in plain text).
    required: bool,
}

/// `Write`/`Read` on the socket for rustls, with MSG_NOSIGNAL (a peer's close must not raise
/// SIGPIPE).
struct SockIo<'a>(&'a Socket);

impl Write for SockIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send_with_flags(buf, libc::MSG_NOSIGNAL)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for SockIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut s: &Socket = self.0;
        s.read(buf)
    }
}

fn io_err(e: &io::Error) -> IoErr {
    if e.kind() == io::ErrorKind::WouldBlock {
        return IoErr::WouldBlock;
    }
    if let Some(t) = e.get_ref().and_then(|x| x.downcast_ref::<rustls::Error>()) {
        return IoErr::Failed(classify(t));
    }
    IoErr::Failed(ErrorKind::from_io(e, false))
}

impl Conn {
    pub fn plain(sock: Socket) -> Conn {
        Conn {
            sock,
            tls: None,
            pre: None,
        }
    }

    /// Start TLS on this (connected) socket, at once or after the protocol's plain-text
    /// exchange: [`Conn::handshake`] drives both.
    pub fn start_tls(&mut self, mut tls: rustls::ClientConnection, upgrade: &TlsUpgrade) {
        tls.set_buffer_limit(Some(TLS_SEND_LIMIT));
        let mut out = Vec::new();
        let (neg, required) = match upgrade {
            // MySQL's SSLRequest is the link's: the handshake starts once it is written.
            TlsUpgrade::Direct | TlsUpgrade::MysqlSslRequest => {
                self.tls = Some(Box::new(tls));
                return;
            }
            TlsUpgrade::XmppStartTls { domain } => (Negotiation::xmpp(domain, &mut out), true),
            TlsUpgrade::PgSslRequest { required } => (Negotiation::pg(&mut out), *required),
            TlsUpgrade::LdapStartTls => (Negotiation::ldap(&mut out), true),
        };
        self.pre = Some(Box::new(PreTls {
            neg,
            out,
            written: 0,
            tls,
            required,
        }));
    }

    /// True once TLS carries the connection (false for a plain one, and for a server that
    /// declined an optional upgrade).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The plain-text exchange before TLS. `Ok(true)` when it is over (TLS started, or
    /// declined and not required), `Ok(false)` while it waits.
    fn pre_tls(&mut self, c: &mut Counters) -> Result<bool, IoErr> {
        let Some(pre) = self.pre.as_mut() else {
            return Ok(true);
        };
        let mut buf = [0u8; 2048];
        // Bounded: the negotiation refuses more than 16 KiB of server bytes.
        loop {
            while pre.written < pre.out.len() {
                let out = &pre.out[pre.written..];
                pre.written += Self::send_plain(&self.sock, out, &mut c.bytes_sent)?;
            }
            pre.out.clear();
            pre.written = 0;
            let n = match SockIo(&self.sock).read(&mut buf) {
                Ok(0) => return Err(IoErr::Failed(ErrorKind::Closed)),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(&e)),
            };
            c.bytes_received += n as u64;
            match pre.neg.feed(&buf[..n], &mut pre.out) {
                Ok(Progress::NeedMore) => {}
                Ok(Progress::StartTls) => {
                    let pre = self.pre.take().expect("checked above");
                    self.tls = Some(Box::new(pre.tls));
                    return Ok(true);
                }
                Ok(Progress::Refused(_)) if !pre.required => {
                    self.pre = None;
                    return Ok(true);
                }
                Ok(Progress::Refused(_)) => return Err(IoErr::Failed(ErrorKind::Login)),
                Err(_) => return Err(IoErr::Failed(ErrorKind::Protocol)),
            }
        }
    }

    /// The protocol the server chose by ALPN (TLS only).
    pub fn alpn(&self) -> Option<&[u8]> {
        self.tls.as_ref().and_then(|t| t.alpn_protocol())
    }

    /// What the TLS handshake agreed on, `http` being the HTTP version spoken over it (as
    /// [`Negotiated::http`]); `None` without TLS or before the handshake ended.
    pub fn negotiated(&self, http: u8) -> Option<Negotiated> {
        let t = self.tls.as_ref()?;
        let mut n = Negotiated {
            version: u16::from(t.protocol_version()?),
            suite: u16::from(t.negotiated_cipher_suite()?.suite()),
            group: t
                .negotiated_key_exchange_group()
                .map_or(0, |g| u16::from(g.name())),
            http,
            ..Negotiated::default()
        };
        n.set_alpn(t.alpn_protocol());
        Some(n)
    }

    /// True if this handshake resumed an earlier session.
    pub fn resumed(&self) -> bool {
        self.tls
            .as_ref()
            .and_then(|t| t.handshake_kind())
            .is_some_and(|k| k == rustls::HandshakeKind::Resumed)
    }

    /// A short plain read means the socket is drained (see the module notes).
    #[inline]
    pub fn short_read_drains(&self) -> bool {
        self.tls.is_none()
    }

    /// Encrypted bytes wait for the socket to take them.
    #[inline]
    pub fn wants_write(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Send application bytes; returns how many were taken (all of them or part; never 0 for a
    /// non-empty `buf` — a full socket is `WouldBlock`). The counters count the bytes that
    /// crossed the socket (ciphertext under TLS).
    pub fn send(&mut self, buf: &[u8], c: &mut Counters) -> Result<usize, IoErr> {
        let sent = &mut c.bytes_sent;
        let Some(tls) = self.tls.as_mut() else {
            return Self::send_plain(&self.sock, buf, sent);
        };
        let n = tls.writer().write(buf).map_err(|e| io_err(&e))?;
        match Self::flush_tls(tls, &self.sock, sent) {
            Ok(()) | Err(IoErr::WouldBlock) => {}
            Err(e) => return Err(e),
        }
        if n == 0 && !buf.is_empty() {
            return Err(IoErr::WouldBlock);
        }
        Ok(n)
    }

    /// Write what TLS holds (handshake messages, encrypted records). `Ok` when all is out;
    /// `WouldBlock` when the socket is full (a writable event will come).
    pub fn flush(&mut self, c: &mut Counters) -> Result<(), IoErr> {
        match self.tls.as_mut() {
            Some(tls) => Self::flush_tls(tls, &self.sock, &mut c.bytes_sent),
            None => Ok(()),
        }
    }

    fn flush_tls(
        tls: &mut rustls::ClientConnection,
        sock: &Socket,
        sent: &mut u64,
    ) -> Result<(), IoErr> {
        while tls.wants_write() {
            match tls.write_tls(&mut SockIo(sock)) {
                Ok(n) => *sent += n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(&e)),
            }
        }
        Ok(())
    }

    /// Receive application bytes into `buf`. `Ok(0)` is the end of the stream. The counters
    /// count the bytes read from the socket (ciphertext under TLS).
    pub fn recv(&mut self, buf: &mut [u8], c: &mut Counters) -> Result<usize, IoErr> {
        let Some(tls) = self.tls.as_mut() else {
            let mut s: &Socket = &self.sock;
            loop {
                match s.read(buf) {
                    Ok(n) => {
                        c.bytes_received += n as u64;
                        return Ok(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err(&e)),
                }
            }
        };
        // Bounded: each turn either returns or consumes socket bytes; a socket gives at most
        // what it holds before it says EAGAIN or EOF.
        loop {
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Closed without close_notify: an end of stream like any other.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(io_err(&e)),
            }
            if Self::pump(tls, &self.sock, c)? == 0 {
                // The peer closed: plaintext already decrypted is still read above first.
                return match tls.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                    Err(e) => Err(io_err(&e)),
                };
            }
        }
    }

    /// Drive a TLS handshake: read and answer what the server sent. `Ok(true)` once it is done,
    /// `Ok(false)` while it waits for the server, `Err` when it failed.
    pub fn handshake(&mut self, c: &mut Counters) -> Result<bool, IoErr> {
        if !self.pre_tls(c)? {
            return Ok(false);
        }
        let Some(tls) = self.tls.as_mut() else {
            return Ok(true);
        };
        // Bounded as in `recv`.
        while tls.is_handshaking() {
            match Self::flush_tls(tls, &self.sock, &mut c.bytes_sent) {
                Ok(()) | Err(IoErr::WouldBlock) => {}
                Err(e) => return Err(e),
            }
            let got = match Self::pump(tls, &self.sock, c) {
                Err(IoErr::WouldBlock) => return Ok(false),
                r => r?,
            };
            if got == 0 {
                // Closed mid-handshake: a server that does not speak TLS (or refused us
                // without an alert).
                return Err(IoErr::Failed(ErrorKind::TlsMalformed));
            }
        }
        match Self::flush_tls(tls, &self.sock, &mut c.bytes_sent) {
            Ok(()) | Err(IoErr::WouldBlock) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// One read of ciphertext into rustls, processed; what rustls then has to say (handshake
    /// messages, an alert on failure) goes out at once, and a full socket keeps it for the
    /// writable event. Returns the bytes read (0: the peer closed); a TLS error is classified.
    fn pump(
        tls: &mut rustls::ClientConnection,
        sock: &Socket,
        c: &mut Counters,
    ) -> Result<usize, IoErr> {
        let got = loop {
            match tls.read_tls(&mut SockIo(sock)) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(&e)),
            }
        };
        c.bytes_received += got as u64;
        let processed = tls.process_new_packets();
        let flushed = Self::flush_tls(tls, sock, &mut c.bytes_sent);
        if let Err(e) = processed {
            return Err(IoErr::Failed(classify(&e)));
        }
        match flushed {
            Ok(()) | Err(IoErr::WouldBlock) => Ok(got),
            Err(e) => Err(e),
        }
    }

    /// One plain `send(2)`, retried on EINTR.
    fn send_plain(sock: &Socket, buf: &[u8], sent: &mut u64) -> Result<usize, IoErr> {
        loop {
            match sock.send_with_flags(buf, libc::MSG_NOSIGNAL) {
                Ok(n) => {
                    *sent += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(&e)),
            }
        }
    }
}
