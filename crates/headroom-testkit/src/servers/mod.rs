//! The real servers tests start on loopback (feature `servers`): nginx with TLS, HTTP/2 and
//! small sites ([`nginx`], [`tls_nginx`]), Apache ([`apache`]), h2o ([`h2o`]), a certificate
//! authority ([`pki`]), their access logs ([`access_log`]), free ports and readiness probes
//! ([`net`]), a tiny misbehaving server ([`test_server`]), and the protocol servers scripts/test starts
//! ([`services`]: ejabberd, PostgreSQL). Each is started by the test,
//! bound to 127.0.0.1, and stopped when dropped; scripts/test installs the Debian packages.

pub mod access_log;
pub mod apache;
pub mod h2o;
pub mod net;
pub mod nginx;
pub mod pki;
pub mod services;
pub mod test_server;
pub mod tls_nginx;
