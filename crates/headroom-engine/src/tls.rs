//! TLS for the engine's connections: the client configuration built once per run from a plan's
//! [`TlsOptions`], the classification of rustls' errors into the fixed [`ErrorKind`]s, the one-line
//! explanation a person can act on, and a blocking probe for the preflight.
//!
//! rustls is used through its sans-I/O `ClientConnection` (see `transport.rs`): the worker's
//! epoll loop reads ciphertext into it and takes plaintext out, exactly as it does for a plain
//! socket, so no protocol knows whether TLS carries it.
//!
//! # Resumption, per user
//!
//! Each user keeps its own sessions, as a browser does ([`UserSessions`]): the TLS 1.2 session
//! (ID or ticket) and the newest [`TICKETS_PER_USER`] TLS 1.3 tickets the server gave it, and
//! resumes only those. "Resumed" then means what it means for a real client: every handshake of
//! a user after its first one resumes, however many users reconnect at once. A store shared by
//! the users of a worker cannot promise that: TLS 1.3 tickets are single-use (RFC 8446 C.4), so
//! 50 users reconnecting together took the few tickets a shared store held and the rest made
//! full handshakes (issue 26: 60-81% resumed at `-c 50`, where wrk resumes 97-99%).
//!
//! rustls asks its `ClientSessionStore` by server name only, and keeps the store of the
//! `ClientConfig` a connection was made from. So a user's store rides in a `ClientConfig` of its
//! own: a clone of the run's, made at the user's first TLS connect (users without TLS, or runs
//! with `--no-tls-resume`, have none), whose store every later handshake and ticket of that
//! user's connections reaches with no help from the worker. The clone shares the run's verifier,
//! certificate resolver and provider (`Arc`s), so the sessions stay compatible with it, and its
//! lock is never contended (one user, one worker thread).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headroom_core::{ErrorKind, TlsOptions, TlsVersion};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{
    ClientSessionStore, Resumption, Tls12ClientSessionValue, Tls13ClientSessionValue,
    WebPkiServerVerifier,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, Error, NamedGroup,
    RootCertStore, SignatureScheme,
};

/// TLS 1.3 tickets a user keeps (the newest; an older one is dropped for a new one). OpenSSL
/// (nginx, Apache) sends 2 after a full handshake and 1 after a resumed one, rustls 2 after
/// each: one is all a user needs to resume its next connection, the second is a spare for a
/// server that sends none after a resumption.
pub const TICKETS_PER_USER: usize = 2;

/// A run's TLS client settings, ready to make connections.
#[derive(Clone)]
pub struct TlsClient {
    /// The run's configuration. Its own resumption is off: a user resumes from its own store
    /// ([`UserSessions`]), and the preflight's one handshake has nothing to resume.
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    resume: bool,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.name)
            .finish()
    }
}

impl TlsClient {
    /// Build the configuration: trusted roots (`ca_pem`, else the system's store), client
    /// certificate, versions, ALPN and resumption. Errors say which input is wrong.
    pub fn new(o: &TlsOptions) -> Result<TlsClient, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
        if o.min_version <= TlsVersion::Tls12 && o.max_version >= TlsVersion::Tls12 {
            versions.push(&rustls::version::TLS12);
        }
        if o.max_version >= TlsVersion::Tls13 {
            versions.push(&rustls::version::TLS13);
        }
        if versions.is_empty() {
            return Err("no TLS version between --tls-min and --tls-max".into());
        }
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS versions: {e}"))?;
        // -k/--insecure: every certificate is accepted; signatures are still checked, so the
        // handshake costs what it costs with verification, minus the chain's.
        let (chain, pinned) = if o.insecure {
            (None, Vec::new())
        } else {
            let (roots, pinned) = roots(o.ca_pem.as_deref())?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("--cacert: {}", decamel(&format!("{e:?}"))))?;
            (Some(webpki), pinned)
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                chain,
                pinned,
                provider,
            }));
        let mut config = match (&o.client_cert_pem, &o.client_key_pem) {
            (Some(c), Some(k)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(c)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--cert: not a PEM certificate chain ({e})"))?;
                if chain.is_empty() {
                    return Err("--cert: no certificate in the file".into());
                }
                let key = PrivateKeyDer::from_pem_slice(k)
                    .map_err(|e| format!("--key: not a PEM private key ({e})"))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    format!(
                        "--cert/--key: {}",
                        words(&e, "the client certificate (--cert)")
                    )
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        config.alpn_protocols = o.alpn.clone();
        config.resumption = Resumption::disabled();
        let name = ServerName::try_from(o.server_name.clone())
            .map_err(|_| format!("'{}' is not a valid TLS server name", o.server_name))?;
        Ok(TlsClient {
            config: Arc::new(config),
            name,
            resume: o.resume,
        })
    }

    /// A new client connection for the user whose sessions are `user` (nothing sent yet: its
    /// ClientHello waits in its buffer). With resumption on, the user's store is made at its
    /// first connect and offers its session; without, `user` stays `None`.
    pub(crate) fn connect(
        &self,
        user: &mut Option<UserSessions>,
    ) -> Result<rustls::ClientConnection, Error> {
        let config = if self.resume {
            &user
                .get_or_insert_with(|| UserSessions::new(&self.config))
                .0
        } else {
            &self.config
        };
        rustls::ClientConnection::new(config.clone(), self.name.clone())
    }

    /// A connection that resumes nothing and leaves nothing to resume (the preflight's probe).
    fn connect_once(&self) -> Result<rustls::ClientConnection, Error> {
        rustls::ClientConnection::new(self.config.clone(), self.name.clone())
    }
}

/// One user's TLS sessions: the run's configuration with a store of the user's own (see the
/// module doc). Made at the user's first TLS connect, dropped with the user.
///
/// Memory: one `ClientConfig` clone and the store, plus what the sessions kept hold (at most
/// [`TICKETS_PER_USER`] TLS 1.3 tickets and one TLS 1.2 session, which rustls drops after a
/// TLS 1.3 handshake): each the ticket (nginx: ~200 bytes), the secret and rustls' own copy of
/// the server's certificate chain. Measured (docs/cli.md, TLS): 2.2 KB per user with a 0.4 KB
/// chain (21 MiB at 10,000 users); a longer chain adds about twice its size.
pub(crate) struct UserSessions(Arc<ClientConfig>);

impl UserSessions {
    fn new(run: &Arc<ClientConfig>) -> UserSessions {
        let mut c = (**run).clone();
        c.resumption = Resumption::store(Arc::new(UserStore::default()));
        UserSessions(Arc::new(c))
    }
}

/// The `ClientSessionStore` of one user: at most one TLS 1.2 session and [`TICKETS_PER_USER`]
/// TLS 1.3 tickets, in place (no allocation of its own after it is made). It ignores the
/// server name rustls gives it: a user's connections all go to the run's one name
/// ([`TlsClient::connect`]).
#[derive(Default)]
struct UserStore(Mutex<Sessions>);

#[derive(Default)]
struct Sessions {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    /// Oldest first; `tls13[..n13]` are held.
    tls13: [Option<Tls13ClientSessionValue>; TICKETS_PER_USER],
    n13: usize,
}

impl Sessions {
    fn insert_tls13(&mut self, t: Tls13ClientSessionValue) {
        if self.n13 == TICKETS_PER_USER {
            // Full: drop the oldest (the one nearest its expiry).
            self.tls13.rotate_left(1);
            self.n13 -= 1;
        }
        self.tls13[self.n13] = Some(t);
        self.n13 += 1;
    }

    /// The newest ticket, taken out (each may be used once).
    fn take_tls13(&mut self) -> Option<Tls13ClientSessionValue> {
        if self.n13 == 0 {
            return None;
        }
        self.n13 -= 1;
        self.tls13[self.n13].take()
    }
}

impl UserStore {
    /// The sessions; a poisoned lock (a panic elsewhere with it held) still yields them: the
    /// data is whole between calls.
    fn get(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for UserStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secrets stay out of any debug output.
        let s = self.get();
        f.debug_struct("UserStore")
            .field("tls12", &s.tls12.is_some())
            .field("tls13", &s.n13)
            .finish()
    }
}

impl ClientSessionStore for UserStore {
    fn set_kx_hint(&self, _: ServerName<'static>, group: NamedGroup) {
        self.get().kx_hint = Some(group);
    }

    fn kx_hint(&self, _: &ServerName<'_>) -> Option<NamedGroup> {
        self.get().kx_hint
    }

    fn set_tls12_session(&self, _: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.get().tls12 = Some(value);
    }

    fn tls12_session(&self, _: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.get().tls12.clone()
    }

    fn remove_tls12_session(&self, _: &ServerName<'static>) {
        self.get().tls12 = None;
    }

    fn insert_tls13_ticket(&self, _: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.get().insert_tls13(value);
    }

    fn take_tls13_ticket(&self, _: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.get().take_tls13()
    }
}

/// The trusted roots, and the certificates of `--cacert` kept whole for pinning.
fn roots(ca_pem: Option<&[u8]>) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), String> {
    let mut roots = RootCertStore::empty();
    let mut pinned = Vec::new();
    match ca_pem {
        Some(pem) => {
            for c in CertificateDer::pem_slice_iter(pem) {
                let c = c.map_err(|e| format!("--cacert: not a PEM certificate ({e})"))?;
                roots
                    .add(c.clone())
                    .map_err(|e| format!("--cacert: a certificate was refused ({e})"))?;
                pinned.push(c);
            }
            if pinned.is_empty() {
                return Err("--cacert: no certificate in the file".into());
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "no trusted CA certificates found in the system's store (install Debian's \
                     ca-certificates), so no server can be verified: give --cacert FILE or \
                     -k/--insecure"
                        .into(),
                );
            }
        }
    }
    Ok((roots, pinned))
}

/// The usual chain verification (none with `-k`), plus pinning: a server certificate that is
/// itself one of the `--cacert` certificates is trusted as it is. That is how curl treats a
/// self-signed certificate given as its own CA (`openssl req -x509` makes one with CA:TRUE,
/// which the chain verification refuses as an end entity).
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Ok(v) => Ok(v),
            Err(_)
                if self
                    .pinned
                    .iter()
                    .any(|p| p.as_ref() == end_entity.as_ref()) =>
            {
                Ok(ServerCertVerified::assertion())
            }
            Err(e) => Err(e),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The error kind of a failed handshake or TLS stream.
pub fn classify(e: &Error) -> ErrorKind {
    match e {
        Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                ErrorKind::TlsUntrusted
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => ErrorKind::TlsExpired,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                ErrorKind::TlsWrongName
            }
            // A self-signed certificate made as a CA (`openssl req -x509`): webpki says
            // "CA used as end entity" before it looks for an issuer; for a person it is
            // untrusted, and --cacert (pinning) or -k is the fix.
            CertificateError::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
                ErrorKind::TlsUntrusted
            }
            _ => ErrorKind::TlsCertificate,
        },
        Error::NoCertificatesPresented | Error::UnsupportedNameType => ErrorKind::TlsCertificate,
        Error::AlertReceived(a) => match a {
            AlertDescription::ProtocolVersion
            | AlertDescription::HandshakeFailure
            | AlertDescription::InsufficientSecurity => ErrorKind::TlsVersion,
            AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateRequired
            | AlertDescription::AccessDenied => ErrorKind::TlsCertificate,
            _ => ErrorKind::TlsAlert,
        },
        Error::PeerIncompatible(_) => ErrorKind::TlsVersion,
        Error::InvalidMessage(_)
        | Error::InappropriateMessage { .. }
        | Error::InappropriateHandshakeMessage { .. }
        | Error::DecryptError
        | Error::PeerMisbehaved(_) => ErrorKind::TlsMalformed,
        _ => ErrorKind::TlsAlert,
    }
}

/// One line that names the cause of a TLS failure and the fix.
pub fn explain(e: &Error, o: &TlsOptions) -> String {
    let name = &o.server_name;
    if matches!(
        e,
        Error::AlertReceived(AlertDescription::NoApplicationProtocol)
    ) {
        let offered: Vec<String> = o
            .alpn
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        if o.alpn.iter().any(|p| p == b"h2") {
            return "the server does not speak HTTP/2 over TLS: it refused ALPN h2; drop \
                    --http2 for HTTP/1.1, or enable http2 on the server"
                .into();
        }
        return format!(
            "the server accepts none of the protocols offered by ALPN ({})",
            offered.join(", ")
        );
    }
    let kind = classify(e);
    // The wrong-name sentence names the certificate already.
    let whose = if kind == ErrorKind::TlsWrongName {
        "it"
    } else {
        "the server's certificate"
    };
    let why = words(e, whose);
    match kind {
        ErrorKind::TlsUntrusted => {
            format!(
                "{why}; give its CA (or a self-signed certificate itself) with --cacert FILE, or \
                 -k/--insecure to skip verification"
            )
        }
        ErrorKind::TlsExpired => format!("{why}; renew it, or -k/--insecure to load it anyway"),
        ErrorKind::TlsWrongName => format!(
            "the server's certificate is not valid for '{name}' ({why}); use a URL with a name \
             the certificate holds, or -k/--insecure"
        ),
        ErrorKind::TlsVersion => format!(
            "no TLS version or cipher suite in common with the server ({why}); headroom offered \
             TLS {}..{}: widen --tls-min/--tls-max",
            o.min_version.name(),
            o.max_version.name()
        ),
        ErrorKind::TlsCertificate => format!(
            "the TLS handshake failed on a certificate: {why}; if the server asks for a client \
             certificate, give --cert FILE --key FILE"
        ),
        ErrorKind::TlsMalformed => format!(
            "the server did not answer in TLS ({why}): is this a plain-text port? use http:// \
             (or ws://, or the server's TLS port)"
        ),
        _ => format!("the server ended the TLS handshake: {why}"),
    }
}

/// A rustls error in words a person reads (never a Rust enum's name); `whose` names the
/// certificate a certificate error is about (`the server's certificate`).
pub fn words(e: &Error, whose: &str) -> String {
    match e {
        Error::InvalidCertificate(c) => certificate_words(c, whose),
        Error::AlertReceived(a) => format!(
            "the server sent the TLS alert '{}'",
            decamel(&format!("{a:?}"))
        ),
        Error::NoCertificatesPresented => "the server presented no certificate".into(),
        Error::UnsupportedNameType => "the server name is of a kind TLS cannot check".into(),
        Error::DecryptError => "a message could not be decrypted".into(),
        Error::InvalidMessage(_)
        | Error::InappropriateMessage { .. }
        | Error::InappropriateHandshakeMessage { .. } => {
            "the reply is not a TLS message headroom expected".into()
        }
        Error::PeerIncompatible(p) => {
            format!("the server is incompatible: {}", decamel(&format!("{p:?}")))
        }
        Error::PeerMisbehaved(p) => {
            format!(
                "the server broke the TLS protocol: {}",
                decamel(&format!("{p:?}"))
            )
        }
        Error::General(m) => m.clone(),
        other => decamel(&format!("{other:?}")),
    }
}

fn certificate_words(c: &CertificateError, whose: &str) -> String {
    match c {
        CertificateError::BadEncoding => format!("{whose} is not a well-formed X.509 certificate"),
        CertificateError::Expired => format!("{whose} has expired"),
        CertificateError::ExpiredContext { time, not_after } => format!(
            "{whose} expired on {} (it is now {})",
            date(*not_after),
            date(*time)
        ),
        CertificateError::NotValidYet => format!("{whose} is not valid yet"),
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "{whose} is not valid before {} (it is now {})",
            date(*not_before),
            date(*time)
        ),
        CertificateError::Revoked => format!("{whose} has been revoked"),
        CertificateError::UnknownIssuer => format!(
            "{whose} is not signed by a CA headroom trusts (self-signed, or signed by a private CA)"
        ),
        CertificateError::BadSignature => {
            format!("{whose}'s signature does not verify with its issuer's key")
        }
        CertificateError::NotValidForName => format!("{whose} holds other names"),
        CertificateError::NotValidForNameContext { presented, .. } => {
            let names: Vec<&str> = presented.iter().map(|p| quoted(p)).collect();
            format!("{whose} holds only the names {}", names.join(", "))
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            format!("{whose} is not made for this use (its extended key usage)")
        }
        CertificateError::UnhandledCriticalExtension => {
            format!("{whose} has a critical extension that cannot be checked")
        }
        CertificateError::Other(o) => {
            let name = format!("{o:?}");
            if name.contains("CaUsedAsEndEntity") {
                format!(
                    "{whose} is itself a CA certificate (CA:TRUE, as `openssl req -x509` \
                     makes), self-signed or used in place of the server's own"
                )
            } else if name.contains("UnsupportedCertVersion") {
                format!(
                    "{whose} is an X.509 version 1 certificate (made without extensions); only \
                     version 3 is accepted: make it again with an extension (openssl x509 -req \
                     ... -extfile FILE, FILE holding e.g. basicConstraints=CA:FALSE)"
                )
            } else if name.contains("EndEntityUsedAsCa") {
                format!("{whose} is issued by a certificate that is not a CA")
            } else {
                format!("{whose} was refused: {}", decamel(&name))
            }
        }
        other => format!("{whose} was refused: {}", decamel(&format!("{other:?}"))),
    }
}

/// `DnsName("wrong.example")` (how rustls lists a certificate's names) as `wrong.example`; a
/// text without quotes as it is.
fn quoted(p: &str) -> &str {
    match (p.find('"'), p.rfind('"')) {
        (Some(a), Some(b)) if b > a => &p[a + 1..b],
        _ => p,
    }
}

/// `Other(OtherError(CaUsedAsEndEntity))` as `ca used as end entity`: the innermost name of a
/// Debug form, in lowercase words (for the cases [`words`] does not name itself).
fn decamel(debug: &str) -> String {
    let inner = debug
        .split(['(', ')', '{', '}', ',', ' '])
        .filter(|t| t.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter(|t| t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .rfind(|t| !["Other", "OtherError"].contains(t))
        .unwrap_or("unknown");
    let mut out = String::new();
    let mut prev_lower = false;
    for ch in inner.chars() {
        if ch == '_' {
            out.push(' ');
            prev_lower = false;
            continue;
        }
        if ch.is_ascii_uppercase() && prev_lower {
            out.push(' ');
        }
        prev_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// A Unix time as `2026-11-20 12:00:00 UTC` (the proleptic Gregorian calendar).
pub fn date(t: UnixTime) -> String {
    let secs = t.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60
    )
}

/// What a blocking handshake found.
#[derive(Debug, Clone)]
pub struct Probe {
    pub version: Option<&'static str>,
    pub alpn: Option<Vec<u8>>,
    pub handshake: Duration,
}

/// Why a probe failed: the kind, and one line for a person.
#[derive(Debug, Clone)]
pub struct ProbeError {
    pub kind: Option<ErrorKind>,
    pub message: String,
}

/// One blocking TCP connect and TLS handshake to `target` (the preflight of a TLS run): a wrong
/// certificate or a plain-text port is one clear line before the load, not a run of failures.
pub fn probe(target: SocketAddr, o: &TlsOptions, timeout: Duration) -> Result<Probe, ProbeError> {
    let fail = |kind, message| ProbeError { kind, message };
    let client = TlsClient::new(o).map_err(|m| fail(None, m))?;
    let mut tcp = std::net::TcpStream::connect_timeout(&target, timeout)
        .map_err(|e| fail(None, format!("cannot connect to {target}: {e}")))?;
    let _ = tcp.set_read_timeout(Some(timeout));
    let _ = tcp.set_write_timeout(Some(timeout));
    let mut conn = client
        .connect_once()
        .map_err(|e| fail(Some(classify(&e)), explain(&e, o)))?;
    let start = Instant::now();
    while conn.is_handshaking() {
        if start.elapsed() > timeout {
            return Err(fail(
                None,
                format!("the TLS handshake with {target} did not finish within {timeout:?}"),
            ));
        }
        match conn.complete_io(&mut tcp) {
            Ok(_) => {}
            Err(e) => {
                if let Some(t) = e.get_ref().and_then(|x| x.downcast_ref::<Error>()) {
                    return Err(fail(Some(classify(t)), explain(t, o)));
                }
                let kind = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    Some(ErrorKind::TlsMalformed)
                } else {
                    None
                };
                return Err(fail(
                    kind,
                    format!(
                        "the TLS handshake with {target} failed: {e} (a plain-text port, or a \
                         server that closed the connection?)"
                    ),
                ));
            }
        }
    }
    let handshake = start.elapsed();
    // Close politely; the probe keeps no session (each user resumes only its own).
    conn.send_close_notify();
    let _ = conn.write_tls(&mut tcp);
    let _ = tcp.flush();
    let mut sink = [0u8; 64];
    let _ = tcp.set_read_timeout(Some(Duration::from_millis(10)));
    let _ = tcp.read(&mut sink);
    Ok(Probe {
        version: conn.protocol_version().map(|v| match v {
            rustls::ProtocolVersion::TLSv1_3 => "1.3",
            rustls::ProtocolVersion::TLSv1_2 => "1.2",
            _ => "other",
        }),
        alpn: conn.alpn_protocol().map(|p| p.to_vec()),
        handshake,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_names_each_failure() {
        let c = |e| classify(&Error::InvalidCertificate(e));
        assert_eq!(c(CertificateError::UnknownIssuer), ErrorKind::TlsUntrusted);
        assert_eq!(c(CertificateError::Expired), ErrorKind::TlsExpired);
        assert_eq!(
            c(CertificateError::NotValidForName),
            ErrorKind::TlsWrongName
        );
        assert_eq!(c(CertificateError::Revoked), ErrorKind::TlsCertificate);
        assert_eq!(
            classify(&Error::AlertReceived(AlertDescription::ProtocolVersion)),
            ErrorKind::TlsVersion
        );
        assert_eq!(
            classify(&Error::AlertReceived(AlertDescription::DecodeError)),
            ErrorKind::TlsAlert
        );
        assert_eq!(
            classify(&Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            )),
            ErrorKind::TlsMalformed
        );
    }

    #[test]
    fn bad_inputs_are_one_line_errors() {
        let mut o = TlsOptions::new("localhost");
        o.ca_pem = Some(b"not a pem".to_vec());
        let e = TlsClient::new(&o).unwrap_err();
        assert!(e.contains("--cacert"), "{e}");
        let mut o = TlsOptions::new("localhost");
        o.insecure = true;
        o.client_cert_pem =
            Some(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec());
        o.client_key_pem = Some(b"nothing".to_vec());
        let e = TlsClient::new(&o).unwrap_err();
        assert!(e.contains("--"), "{e}");
        assert!(!e.contains('\n'));
        let mut o = TlsOptions::new("bad name with spaces");
        o.insecure = true;
        assert!(TlsClient::new(&o).is_err());
    }

    /// No Rust enum name in a message: no `Other(`, no CamelCase word.
    fn assert_words(m: &str) {
        assert!(!m.contains("Other(") && !m.contains("OtherError"), "{m}");
        let camel = m.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
            w.len() > 1
                && w.starts_with(|c: char| c.is_ascii_uppercase())
                && w.chars().skip(1).any(|c| c.is_ascii_lowercase())
                && w.chars().skip(1).any(|c| c.is_ascii_uppercase())
        });
        assert!(!camel, "a CamelCase word in: {m}");
    }

    #[test]
    fn every_certificate_failure_is_words_and_dates_are_dates() {
        let o = TlsOptions::new("localhost");
        let t = |s| UnixTime::since_unix_epoch(Duration::from_secs(s));
        let m = explain(
            &Error::InvalidCertificate(CertificateError::ExpiredContext {
                time: t(1_795_608_000),
                not_after: t(1_609_459_200),
            }),
            &o,
        );
        assert!(m.contains("expired on 2021-01-01 00:00:00 UTC"), "{m}");
        assert!(m.contains("it is now 2026-11-25 12:00:00 UTC"), "{m}");
        assert_words(&m);
        assert_eq!(date(t(1_795_176_000)), "2026-11-20 12:00:00 UTC");
        assert_eq!(date(t(951_782_400)), "2000-02-29 00:00:00 UTC");
        for e in [
            CertificateError::UnknownIssuer,
            CertificateError::BadEncoding,
            CertificateError::Revoked,
            CertificateError::NotValidForName,
            CertificateError::UnknownRevocationStatus,
            CertificateError::ApplicationVerificationFailure,
            CertificateError::NotValidYetContext {
                time: t(0),
                not_before: t(4_102_444_800),
            },
        ] {
            assert_words(&explain(&Error::InvalidCertificate(e), &o));
        }
        for a in [
            AlertDescription::HandshakeFailure,
            AlertDescription::CertificateRequired,
            AlertDescription::DecodeError,
            AlertDescription::Unknown(200),
        ] {
            let m = explain(&Error::AlertReceived(a), &o);
            assert_words(&m);
        }
        assert!(explain(
            &Error::AlertReceived(AlertDescription::HandshakeFailure),
            &o
        )
        .contains("'handshake failure'"));
        assert_words(&explain(
            &Error::PeerIncompatible(rustls::PeerIncompatible::Tls12NotOffered),
            &o,
        ));
        assert_eq!(
            decamel("Other(OtherError(CaUsedAsEndEntity))"),
            "ca used as end entity"
        );
        assert_eq!(decamel("Unknown(200)"), "unknown");
        let m = explain(
            &Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("localhost").unwrap(),
                presented: vec!["DnsName(\"wrong.example\")".into(), "10.0.0.1".into()],
            }),
            &o,
        );
        assert!(m.contains("only the names wrong.example, 10.0.0.1"), "{m}");
        assert_words(&m);
    }

    #[test]
    fn versions_and_ip_names_build() {
        let mut o = TlsOptions::new("127.0.0.1");
        o.insecure = true;
        o.max_version = TlsVersion::Tls12;
        let c = TlsClient::new(&o).unwrap();
        assert!(matches!(c.name, ServerName::IpAddress(_)));
        o.min_version = TlsVersion::Tls13;
        o.max_version = TlsVersion::Tls13;
        assert!(TlsClient::new(&o).is_ok());
    }
}
