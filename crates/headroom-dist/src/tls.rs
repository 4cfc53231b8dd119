//! TLS between the controller and its agents, pinned like SSH host keys.
//!
//! An agent beyond loopback serves gRPC over TLS with a certificate of its own: one it is given
//! (`--tls-cert`/`--tls-key`, e.g. made once with openssl) or a self-signed pair it makes at
//! start (`--tls-self-signed`). Either way it prints the SHA-256 fingerprint of that certificate
//! on its `listening` line. The controller trusts no certificate authority: it checks that the
//! certificate the agent presents has exactly the fingerprint pinned for that agent (a
//! `sha256:HEX` after the agent's address in a `file:` list, `--agent-fingerprint`, or the
//! fingerprint an agent it started itself printed), as `ssh` checks a host key against
//! `known_hosts`. Names, dates and issuers are not looked at: the pin is the identity. The
//! handshake's signature is still verified (the agent proves it holds the key of that
//! certificate), with rustls' ring provider.
//!
//! The server side is tonic's own (`tls-ring`; handshakes run concurrently, each bounded by
//! [`HANDSHAKE_TIMEOUT`]); the client side is [`PinnedConnector`], a connector for
//! `Endpoint::connect_with_connector`, since tonic's client TLS knows only CA roots.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tonic::transport::Uri;

/// Longest a TLS handshake may take on the agent before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest certificate or key file an agent reads (`--tls-cert`, `--tls-key`).
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// The SHA-256 of a certificate's DER bytes; written `sha256:` and 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of a certificate (its DER bytes).
    pub fn of(cert_der: &[u8]) -> Fingerprint {
        let d = ring::digest::digest(&ring::digest::SHA256, cert_der);
        let mut b = [0u8; 32];
        b.copy_from_slice(d.as_ref());
        Fingerprint(b)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Fingerprint {
    type Err = String;

    /// `sha256:` then 64 hex digits, either case, optionally in colon-separated pairs (as
    /// `openssl x509 -noout -fingerprint -sha256` prints them, after its `=`).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "'{}' is not a certificate fingerprint: write sha256: and 64 hex digits (the \
                 agent prints it at start; for a certificate file, `openssl x509 -noout \
                 -fingerprint -sha256 -in cert.pem`)",
                s.chars().take(80).collect::<String>()
            )
        };
        let hex = s
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case("sha256:"))
            .map(|_| &s[7..])
            .or_else(|| {
                s.get(..19)
                    .filter(|p| p.eq_ignore_ascii_case("sha256 fingerprint="))
                    .map(|_| &s[19..])
            })
            .ok_or_else(bad)?;
        let digits: Vec<u8> = hex.bytes().filter(|&c| c != b':').collect();
        if digits.len() != 64 || hex.len() > 95 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, pair) in digits.chunks(2).enumerate() {
            let v = std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(bad)?;
            out[i] = v;
        }
        Ok(Fingerprint(out))
    }
}

/// An agent's certificate and key (PEM), and the certificate's fingerprint.
#[derive(Clone)]
pub struct AgentIdentity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub fingerprint: Fingerprint,
}

impl fmt::Debug for AgentIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key is never printed.
        write!(f, "AgentIdentity({})", self.fingerprint)
    }
}

impl AgentIdentity {
    /// A new self-signed pair (ECDSA P-256), valid for any name: the controller pins it by its
    /// fingerprint, not by a name.
    pub fn self_signed() -> Result<AgentIdentity, String> {
        let c = rcgen::generate_simple_self_signed(vec!["headroom-agent".to_string()])
            .map_err(|e| format!("could not make a self-signed certificate: {e}"))?;
        Ok(AgentIdentity {
            fingerprint: Fingerprint::of(c.cert.der()),
            cert_pem: c.cert.pem().into_bytes(),
            key_pem: c.signing_key.serialize_pem().into_bytes(),
        })
    }

    /// The identity in PEM bytes: the first certificate of `cert_pem` is the one fingerprinted
    /// (any others are its chain); `key_pem` must hold a private key. The error is one line.
    pub fn from_pem(cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Result<AgentIdentity, String> {
        let first = CertificateDer::pem_slice_iter(&cert_pem)
            .next()
            .ok_or("holds no PEM certificate (BEGIN CERTIFICATE)")?
            .map_err(|e| format!("is not a readable PEM certificate: {e}"))?;
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            format!("the key file holds no readable PEM private key ({e}) for the certificate")
        })?;
        Ok(AgentIdentity {
            fingerprint: Fingerprint::of(first.as_ref()),
            cert_pem,
            key_pem,
        })
    }

    /// Reads `--tls-cert` and `--tls-key` (regular files of at most [`MAX_PEM_BYTES`]).
    pub fn from_files(cert: &std::path::Path, key: &std::path::Path) -> Result<Self, String> {
        let read = |p: &std::path::Path| -> Result<Vec<u8>, String> {
            use std::io::Read;
            let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let meta = f.metadata().map_err(|e| format!("{}: {e}", p.display()))?;
            if !meta.is_file() {
                return Err(format!("{}: not a regular file", p.display()));
            }
            let mut b = Vec::new();
            f.take(MAX_PEM_BYTES + 1)
                .read_to_end(&mut b)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            if b.len() as u64 > MAX_PEM_BYTES {
                return Err(format!(
                    "{}: larger than {} KiB, not a certificate or key",
                    p.display(),
                    MAX_PEM_BYTES >> 10
                ));
            }
            Ok(b)
        };
        let (c, k) = (read(cert)?, read(key)?);
        AgentIdentity::from_pem(c, k).map_err(|e| format!("--tls-cert {}: {e}", cert.display()))
    }

    /// tonic's server TLS settings for this identity.
    pub fn server_config(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(
                &self.cert_pem,
                &self.key_pem,
            ))
            .timeout(HANDSHAKE_TIMEOUT)
    }
}

/// Accepts exactly the certificate whose fingerprint is pinned, and records the one it saw.
#[derive(Debug)]
struct PinVerifier {
    pin: Fingerprint,
    seen: Arc<Mutex<Option<Fingerprint>>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = Fingerprint::of(end_entity.as_ref());
        *self.seen.lock().expect("pin state") = Some(got);
        if got == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "certificate {got} is not the pinned {}",
                self.pin
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The controller's connector to one agent: TCP, then TLS accepting only the pinned
/// certificate. [`PinnedConnector::seen`] tells, after a failed connect, which certificate the
/// agent presented (to name both fingerprints in the error).
#[derive(Clone)]
pub struct PinnedConnector {
    config: Arc<rustls::ClientConfig>,
    seen: Arc<Mutex<Option<Fingerprint>>>,
}

impl PinnedConnector {
    pub fn new(pin: Fingerprint) -> PinnedConnector {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let seen = Arc::new(Mutex::new(None));
        let verifier = Arc::new(PinVerifier {
            pin,
            seen: seen.clone(),
            provider: provider.clone(),
        });
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        PinnedConnector {
            config: Arc::new(config),
            seen,
        }
    }

    /// The fingerprint of the certificate the agent presented, once a handshake got that far.
    pub fn seen(&self) -> Option<Fingerprint> {
        *self.seen.lock().expect("pin state")
    }
}

type ConnectFuture =
    Pin<Box<dyn Future<Output = Result<TokioIo<TlsStream<TcpStream>>, io::Error>> + Send>>;

impl tonic::codegen::Service<Uri> for PinnedConnector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> ConnectFuture {
        let config = self.config.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host"))?
                .trim_matches(|c| c == '[' || c == ']')
                .to_string();
            let port = uri.port_u16().unwrap_or(7070);
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            // Any name will do: the verifier looks at the fingerprint only.
            let name = ServerName::try_from("headroom-agent").expect("a DNS name");
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await?;
            Ok(TokioIo::new(tls))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_and_print() {
        let f = Fingerprint([0xab; 32]);
        let s = f.to_string();
        assert_eq!(s, format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(s.parse::<Fingerprint>(), Ok(f));
        assert_eq!(s.to_uppercase().parse::<Fingerprint>(), Ok(f));
        let openssl = format!("sha256 Fingerprint={}", vec!["AB"; 32].join(":"));
        assert_eq!(openssl.parse::<Fingerprint>(), Ok(f));
        for bad in [
            "",
            "sha256:",
            "ab".repeat(32).as_str(),
            &format!("sha256:{}", "ab".repeat(31)),
            &format!("sha256:{}", "zz".repeat(32)),
            &format!("md5:{}", "ab".repeat(32)),
            "sha256:é",
        ] {
            let e = bad.parse::<Fingerprint>().unwrap_err();
            assert!(e.contains("sha256:"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_self_signed_identity_reads_back_with_the_same_fingerprint() {
        let a = AgentIdentity::self_signed().unwrap();
        let b = AgentIdentity::from_pem(a.cert_pem.clone(), a.key_pem.clone()).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_ne!(
            a.fingerprint,
            AgentIdentity::self_signed().unwrap().fingerprint
        );
        assert!(AgentIdentity::from_pem(b"junk".to_vec(), a.key_pem.clone()).is_err());
        assert!(AgentIdentity::from_pem(a.cert_pem.clone(), b"junk".to_vec()).is_err());
        assert!(!format!("{a:?}").contains("PRIVATE"));
    }
}
