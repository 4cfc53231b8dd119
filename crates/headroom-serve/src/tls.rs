//! TLS for every architecture (`ServerConfig::tls`): rustls 0.23 with the ring provider,
//! TLS 1.2 and 1.3, ALPN `http/1.1`, and session resumption both ways a client may ask for it.
//!
//! TLS is a layer around the same request handling, never a second server:
//!
//! - **The reactor and the async architecture** keep their plain socket code (read into the
//!   worker's scratch buffer, write the round's output with one `write`, keep the unsent tail)
//!   and put a `Session` between the socket and the parser: `Session::receive` takes the
//!   ciphertext one read returned and appends its plaintext to a per-worker buffer that is then
//!   parsed as a plain read would be; `Session::seal` turns the round's plaintext responses
//!   into ciphertext in the same `Vec`, handshake records included. The socket's readiness
//!   discipline (edge-triggered, one read until a short read, writability watched only while a
//!   tail is unsent) is therefore unchanged, and so is the plain path: a plain connection has
//!   `None` where a TLS one has its boxed session, and holds no buffer while idle. A TLS
//!   connection holds rustls' state and buffers (a few KiB) for its life.
//! - **The blocking architectures** (thread per connection, pool) read and write through a
//!   blocking `rustls::StreamOwned` over the socket, after an explicit handshake under a
//!   deadline (see `blocking.rs`).
//!
//! # Resumption
//!
//! The server keeps a session cache ([`SESSION_CACHE`] entries, `ServerSessionMemoryCache`) for
//! TLS 1.2 session IDs, and issues stateless tickets (ring's `Ticketer`: AEAD-sealed, keys
//! rotated every 6 hours) for TLS 1.3 and for TLS 1.2 clients that send the session ticket
//! extension. Whether a handshake resumed is counted (`ServerStats::tls_resumed`) from rustls'
//! `handshake_kind()`.
//!
//! # Counting
//!
//! Every TLS connection either completes its handshake (`tls_handshakes`, and `tls_resumed` when
//! it was resumed) or ends before that — bad bytes such as plain HTTP, an alert, a client that
//! leaves or resets, the handshake timeout — and counts once in `tls_handshake_failures` (the
//! cause may count too: `timeouts`, `resets`). Connections closed by the server's own stop are
//! not failures.
//!
//! # The handshake timeout
//!
//! A handshake must finish within `ServerConfig::header_timeout`, or [`DEFAULT_HANDSHAKE_TIMEOUT`]
//! when none is set: a client that opens a connection and never completes its handshake must
//! not hold a pool handler (or a thread, or a slot) for ever.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ServerSessionMemoryCache;
use rustls::{HandshakeKind, ServerConnection};

use crate::Tally;

/// TLS 1.2 sessions remembered by ID (TLS 1.3 and ticket-capable 1.2 clients resume from
/// stateless tickets instead). About 200 bytes each.
pub const SESSION_CACHE: usize = 10_000;

/// The handshake timeout when no `header_timeout` is configured.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Names the self-signed certificate is made for.
pub const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Where the server's certificate and key come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// PEM files: the certificate chain (leaf first) and its private key (PKCS#8, PKCS#1 or
    /// SEC1).
    Files { cert: PathBuf, key: PathBuf },
    /// A certificate made at start with rcgen for `localhost`, `127.0.0.1` and `::1`.
    SelfSigned,
}

/// Why TLS could not be set up: one line that names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate file '{}': {}", .0.display(), .1)]
    Cert(PathBuf, String),
    #[error("cannot read the key file '{}': {}", .0.display(), .1)]
    Key(PathBuf, String),
    #[error("the certificate file '{}' holds no PEM certificate", .0.display())]
    NoCert(PathBuf),
    #[error("certificate and key rejected: {0}")]
    Rejected(String),
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(String),
}

/// A loaded TLS setup: what every connection's session is made from.
#[derive(Debug)]
pub struct TlsServer {
    pub(crate) config: Arc<rustls::ServerConfig>,
    /// The leaf certificate (DER).
    certificate: Vec<u8>,
    /// How long a handshake may take.
    pub(crate) handshake_timeout: Duration,
}

impl TlsServer {
    /// The leaf certificate the server presents (DER).
    pub fn certificate_der(&self) -> &[u8] {
        &self.certificate
    }

    /// SHA-256 of the leaf certificate, as `openssl x509 -noout -fingerprint -sha256` prints
    /// it: upper-case hex pairs joined by colons.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.certificate)
    }
}

/// SHA-256 of `der` in upper-case hex pairs joined by colons.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let hex: Vec<String> = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

impl TlsSource {
    /// Read (or make) the certificate and key and build the server's TLS configuration.
    /// `handshake_timeout`: see the module documentation.
    pub fn load(&self, handshake_timeout: Duration) -> Result<TlsServer, TlsError> {
        let (chain, key) = match self {
            TlsSource::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
            TlsSource::SelfSigned => self_signed()?,
        };
        let certificate = chain[0].as_ref().to_vec();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Rejected(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Rejected(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
        config.ticketer = rustls::crypto::ring::Ticketer::new()
            .map_err(|e| TlsError::Rejected(format!("session tickets: {e}")))?;
        Ok(TlsServer {
            config: Arc::new(config),
            certificate,
            handshake_timeout,
        })
    }

    /// Check that the files can be loaded (a command line's validation); the self-signed
    /// certificate always can.
    pub fn check(&self) -> Result<(), TlsError> {
        match self {
            TlsSource::Files { .. } => self.load(DEFAULT_HANDSHAKE_TIMEOUT).map(|_| ()),
            TlsSource::SelfSigned => Ok(()),
        }
    }
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        e => format!("not valid PEM ({e})"),
    }
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| TlsError::Cert(path.into(), pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Cert(path.into(), pem_error(e)))?;
    if chain.is_empty() {
        return Err(TlsError::NoCert(path.into()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            TlsError::Key(path.into(), "no PEM private key in it".into())
        }
        e => TlsError::Key(path.into(), pem_error(e)),
    })
}

type Chain = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn self_signed() -> Result<Chain, TlsError> {
    let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect();
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| TlsError::SelfSigned(e.to_string()))?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| TlsError::SelfSigned(e.to_string()))?;
    Ok((vec![made.cert.der().clone()], key))
}

/// A TLS connection's state for the non-blocking architectures: rustls' sans-I/O
/// `ServerConnection` and whether its handshake was counted yet.
#[derive(Debug)]
pub(crate) struct Session {
    conn: ServerConnection,
    /// The handshake completed and was counted (then it can no longer fail).
    counted: bool,
}

/// The peer broke the TLS protocol (or sent an alert): an alert may be queued ([`Session::seal`]
/// takes it out); close the connection.
#[derive(Debug)]
pub(crate) struct Broken;

impl Session {
    pub(crate) fn new(tls: &TlsServer) -> Result<Box<Session>, rustls::Error> {
        let mut conn = ServerConnection::new(Arc::clone(&tls.config))?;
        // Output is taken out by `seal` every round, and the round's output is already bounded
        // by the caller (OUT_LIMIT): rustls' own limit would only make `write` fall short.
        conn.set_buffer_limit(None);
        Ok(Box::new(Session {
            conn,
            counted: false,
        }))
    }

    /// Take all of `input` (ciphertext, as one read returned it) and append its plaintext to
    /// `plain`. Counts the handshake in `tally` when it completes.
    pub(crate) fn receive(
        &mut self,
        mut input: &[u8],
        plain: &mut Vec<u8>,
        tally: &mut Tally,
    ) -> Result<(), Broken> {
        // Bounded: every turn consumes input, or ends the loop.
        while !input.is_empty() {
            match self.conn.read_tls(&mut input) {
                // After a close_notify rustls takes nothing more: the rest is ignored.
                Ok(0) => break,
                Ok(_) => {}
                // "Plaintext buffer full" cannot happen: it is emptied below every turn.
                Err(_) => return Err(Broken),
            }
            let state = self.conn.process_new_packets().map_err(|_| Broken)?;
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                let start = plain.len();
                plain.resize(start + n, 0);
                if self.conn.reader().read_exact(&mut plain[start..]).is_err() {
                    plain.truncate(start);
                    return Err(Broken);
                }
            }
        }
        if !self.counted && !self.conn.is_handshaking() {
            self.counted = true;
            tally.tls_handshakes += 1;
            if self.conn.handshake_kind() == Some(HandshakeKind::Resumed) {
                tally.tls_resumed += 1;
            }
        }
        Ok(())
    }

    /// Encrypt the plaintext in `out` in place: `out` becomes the ciphertext to send, preceded
    /// by any TLS records rustls had queued (handshake messages, tickets, an alert).
    pub(crate) fn seal(&mut self, out: &mut Vec<u8>) {
        if !out.is_empty() {
            // With no buffer limit, `write_all` into rustls cannot fall short.
            let _ = self.conn.writer().write_all(out);
            out.clear();
        }
        // Bounded: each turn moves queued records into `out`; a Vec never refuses bytes.
        while self.conn.wants_write() {
            match self.conn.write_tls(out) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }

    /// Records are queued to be sent (see [`Session::seal`]).
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// The handshake has not completed yet.
    pub(crate) fn handshaking(&self) -> bool {
        !self.counted
    }

    /// Queue a close_notify alert (take it out with [`Session::seal`]).
    pub(crate) fn close_notify(&mut self) {
        self.conn.send_close_notify();
    }

    /// The connection ends: a handshake that never completed is a failure.
    pub(crate) fn ended(&self, tally: &mut Tally) {
        if !self.counted {
            tally.tls_handshake_failures += 1;
        }
    }
}

/// Count a completed handshake of a blocking connection.
pub(crate) fn count_handshake(conn: &ServerConnection, tally: &mut Tally) {
    tally.tls_handshakes += 1;
    if conn.handshake_kind() == Some(HandshakeKind::Resumed) {
        tally.tls_resumed += 1;
    }
}

/// Is this I/O error rustls reporting a TLS protocol failure (`complete_io` wraps them as
/// `InvalidData`)?
pub(crate) fn is_tls_error(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidData
}
