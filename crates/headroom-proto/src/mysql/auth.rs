//! Authentication plugins: their names, and the scrambles of the two we speak.

use sha1::{Digest as _, Sha1};
use sha2::Sha256;

/// Length of the nonce ("scramble", "auth-plugin-data") both plugins we speak use.
pub const NONCE_LEN: usize = 20;

/// An authentication plugin, as the server names it in its handshake or AuthSwitchRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthPlugin {
    /// `mysql_native_password`: SHA-1 scramble. MariaDB's default, MySQL's before 8.0.
    NativePassword,
    /// `caching_sha2_password`: SHA-256 scramble, then the cleartext password over TLS when the
    /// server's cache does not have the user. MySQL 8's default.
    CachingSha2,
    /// `sha256_password` (MySQL 5.6+: RSA or TLS only).
    Sha256,
    /// `client_ed25519` (MariaDB's `ed25519`).
    Ed25519,
    /// `auth_gssapi_client` (MariaDB's `gssapi`, Kerberos).
    Gssapi,
    /// `dialog` (MariaDB's PAM).
    Dialog,
    /// `mysql_clear_password`.
    ClearPassword,
    /// `mysql_old_password`, or a bare AuthSwitchRequest (the pre-4.1 scramble).
    OldPassword,
    /// Any other name.
    Other,
}

impl AuthPlugin {
    /// The plugin of a name as it appears on the wire.
    pub fn from_name(name: &[u8]) -> AuthPlugin {
        match name {
            b"mysql_native_password" => AuthPlugin::NativePassword,
            b"caching_sha2_password" => AuthPlugin::CachingSha2,
            b"sha256_password" => AuthPlugin::Sha256,
            b"client_ed25519" => AuthPlugin::Ed25519,
            b"auth_gssapi_client" => AuthPlugin::Gssapi,
            b"dialog" => AuthPlugin::Dialog,
            b"mysql_clear_password" => AuthPlugin::ClearPassword,
            b"mysql_old_password" => AuthPlugin::OldPassword,
            _ => AuthPlugin::Other,
        }
    }

    /// Its name on the wire (`""` for [`AuthPlugin::Other`]).
    pub fn name(self) -> &'static str {
        match self {
            AuthPlugin::NativePassword => "mysql_native_password",
            AuthPlugin::CachingSha2 => "caching_sha2_password",
            AuthPlugin::Sha256 => "sha256_password",
            AuthPlugin::Ed25519 => "client_ed25519",
            AuthPlugin::Gssapi => "auth_gssapi_client",
            AuthPlugin::Dialog => "dialog",
            AuthPlugin::ClearPassword => "mysql_clear_password",
            AuthPlugin::OldPassword => "mysql_old_password",
            AuthPlugin::Other => "",
        }
    }

    /// One of the two plugins this codec speaks.
    pub fn is_supported(self) -> bool {
        matches!(self, AuthPlugin::NativePassword | AuthPlugin::CachingSha2)
    }
}

/// `mysql_native_password`'s reply to `nonce`: `SHA1(pw) XOR SHA1(nonce ++ SHA1(SHA1(pw)))`,
/// 20 bytes (empty for an empty password, as libmysqlclient sends it). The server stores
/// `SHA1(SHA1(pw))` (what `PASSWORD()` shows in hex after a `*`) and checks that
/// `SHA1(reply XOR SHA1(nonce ++ stored)) == stored`.
pub fn native_password(password: &[u8], nonce: &[u8], out: &mut Vec<u8>) {
    if password.is_empty() {
        return;
    }
    let stage1: [u8; 20] = Sha1::digest(password).into();
    let stage2: [u8; 20] = Sha1::digest(stage1).into();
    let mut h = Sha1::new();
    h.update(nonce);
    h.update(stage2);
    let mask: [u8; 20] = h.finalize().into();
    out.extend(stage1.iter().zip(mask).map(|(a, b)| a ^ b));
}

/// `caching_sha2_password`'s reply to `nonce`:
/// `SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) ++ nonce)`, 32 bytes (a single NUL byte for an
/// empty password, as libmysqlclient sends it).
pub fn caching_sha2(password: &[u8], nonce: &[u8], out: &mut Vec<u8>) {
    if password.is_empty() {
        out.push(0);
        return;
    }
    let stage1: [u8; 32] = Sha256::digest(password).into();
    let stage2: [u8; 32] = Sha256::digest(stage1).into();
    let mut h = Sha256::new();
    h.update(stage2);
    h.update(nonce);
    let mask: [u8; 32] = h.finalize().into();
    out.extend(stage1.iter().zip(mask).map(|(a, b)| a ^ b));
}

/// The reply of `plugin` (one of the two supported) to `nonce`, appended to `out`.
pub(crate) fn scramble(plugin: AuthPlugin, password: &[u8], nonce: &[u8], out: &mut Vec<u8>) {
    match plugin {
        AuthPlugin::CachingSha2 => caching_sha2(password, nonce, out),
        _ => native_password(password, nonce, out),
    }
}
