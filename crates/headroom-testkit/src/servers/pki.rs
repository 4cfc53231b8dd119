//! A throw-away test PKI, made at test time (no key material lives in the repository): one CA
//! and the server certificates the TLS client tests need, each as PEM files in a temp dir.
//!
//! | kind | subject alternative names | signed by | valid | what a verifying client says |
//! |---|---|---|---|---|
//! | `localhost` | DNS localhost, IP 127.0.0.1, IP ::1 | the CA | 2024-01-01 .. 2049-12-31 | ok |
//! | `wrong_name` | DNS wrong.example | the CA | as above | hostname mismatch |
//! | `expired` | as `localhost` | the CA | 2020-01-01 .. 2021-01-01 | certificate has expired |
//! | `self_signed` | as `localhost` | itself | as `localhost` | self-signed certificate |
//!
//! Every key is ECDSA P-256 (rcgen's default; cheap handshakes, as scripts/pki.sh makes too).
//! The leaves carry serverAuth, digitalSignature and an authority key identifier, so OpenSSL,
//! rustls/webpki and Erlang all take the good one. scripts/pki.sh makes the same kinds with
//! `openssl` for the scripts and benchmarks.

use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A certificate and its key, as PEM files.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The test PKI: the CA's certificate and one [`CertFiles`] per kind, all in `dir` (removed on
/// drop).
pub struct Pki {
    pub dir: tempfile::TempDir,
    /// The CA certificate (PEM): what a client passes as its trust anchor (`--cacert`).
    pub ca: PathBuf,
    pub localhost: CertFiles,
    pub wrong_name: CertFiles,
    pub expired: CertFiles,
    pub self_signed: CertFiles,
}

const LOCAL_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

fn leaf_params(names: &[&str], cn: &str) -> CertificateParams {
    let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .expect("valid names");
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, "headroom test PKI");
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    p.not_before = date_time_ymd(2024, 1, 1);
    p.not_after = date_time_ymd(2049, 12, 31);
    p
}

fn write(dir: &Path, name: &str, cert_pem: &str, key: &KeyPair) -> CertFiles {
    let files = CertFiles {
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}.key")),
    };
    std::fs::write(&files.cert, cert_pem).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    files
}

impl Pki {
    /// Make a fresh CA and every kind of leaf (a few milliseconds).
    pub fn new() -> Pki {
        let dir = tempfile::Builder::new()
            .prefix("headroom-pki.")
            .tempdir()
            .unwrap();
        // Servers that drop root (nginx's and h2o's workers, ejabberd) read nothing here after
        // start, but a server run as another user may: keep the directory searchable.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let d = dir.path();

        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.distinguished_name = rcgen::DistinguishedName::new();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "headroom test CA");
        ca_params
            .distinguished_name
            .push(DnType::OrganizationName, "headroom test PKI");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca_params.not_before = date_time_ymd(2019, 1, 1);
        ca_params.not_after = date_time_ymd(2049, 12, 31);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let ca = d.join("ca.pem");
        std::fs::write(&ca, ca_cert.pem()).unwrap();
        std::fs::write(d.join("ca.key"), ca_key.serialize_pem()).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let signed = |name: &str, params: CertificateParams| {
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &issuer).unwrap();
            write(d, name, &cert.pem(), &key)
        };
        let localhost = signed("localhost", leaf_params(&LOCAL_NAMES, "localhost"));
        let wrong_name = signed(
            "wrong-name",
            leaf_params(&["wrong.example"], "wrong.example"),
        );
        let mut old = leaf_params(&LOCAL_NAMES, "localhost");
        old.not_before = date_time_ymd(2020, 1, 1);
        old.not_after = date_time_ymd(2021, 1, 1);
        let expired = signed("expired", old);

        let mut own = leaf_params(&LOCAL_NAMES, "localhost");
        own.use_authority_key_identifier_extension = false;
        let own_key = KeyPair::generate().unwrap();
        let own_cert = own.self_signed(&own_key).unwrap();
        let self_signed = write(d, "self-signed", &own_cert.pem(), &own_key);

        Pki {
            dir,
            ca,
            localhost,
            wrong_name,
            expired,
            self_signed,
        }
    }
}

impl Default for Pki {
    fn default() -> Self {
        Pki::new()
    }
}
