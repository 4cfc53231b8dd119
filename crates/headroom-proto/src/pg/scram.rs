//! SCRAM-SHA-256 client (RFC 5802 with RFC 7677's hash), as PostgreSQL uses it: no channel
//! binding (GS2 header `n,,`, so `c=biws` in the final message), the user name left to the
//! StartupMessage (PostgreSQL ignores the `n=` attribute; send `""`).
//!
//! PBKDF2-HMAC-SHA-256 is hand-rolled over the `hmac` crate: PostgreSQL only ever needs its
//! first 32-byte block, which is RFC 5802's `Hi()` itself, and the keyed HMAC state is cloned
//! per iteration instead of re-keyed (half the SHA-256 compressions of a naive loop).
//!
//! The client side costs one PBKDF2 of the server's iteration count (4096 by default: about a
//! millisecond) per login; the count is capped at [`MAX_SCRAM_ITERATIONS`] so that a hostile
//! server cannot turn a login into a CPU sink.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The mechanism name, as in AuthenticationSASL and SASLInitialResponse.
pub const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
/// Highest iteration count accepted from a server (PostgreSQL's default is 4096; pgjdbc and
/// rust-postgres cap at the same 100,000).
pub const MAX_SCRAM_ITERATIONS: u32 = 100_000;
/// Random bytes a nonce is made of by [`crate::pg::Connection`] callers (24 base64 characters,
/// as PostgreSQL's own client sends 18 random bytes).
pub const NONCE_BYTES: usize = 18;
/// Longest salt accepted (PostgreSQL sends 16 bytes).
const MAX_SALT_LEN: usize = 64;

type HmacSha256 = Hmac<Sha256>;

/// Why a SCRAM exchange failed on the client's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("malformed server-first-message")]
    BadServerFirst,
    #[error("the server nonce does not extend ours")]
    NonceMismatch,
    #[error("iteration count 0 or above the limit")]
    BadIterations,
    #[error("malformed server-final-message")]
    BadServerFinal,
    #[error("the server reported an error in its final message")]
    ServerRejected,
    #[error("the server signature does not verify: it does not know the password")]
    BadSignature,
    #[error("SCRAM message out of order")]
    OutOfOrder,
    #[error("the server accepted the login without proving it knows the password")]
    Unverified,
}

#[derive(Clone)]
enum State {
    /// client-first sent (or to be sent), waiting for server-first.
    First,
    /// client-final sent; the server signature the server-final must carry.
    Final { server_signature: [u8; 32] },
    /// The server signature verified.
    Verified,
    /// A step failed.
    Failed,
}

/// One SCRAM-SHA-256 exchange, client side.
#[derive(Clone)]
pub struct ScramClient {
    /// `n=USER,r=NONCE`: the client-first-message without its GS2 header, part of AuthMessage.
    first_bare: String,
    /// Length of the `n=USER,r=` prefix of `first_bare` (the nonce follows).
    nonce_at: usize,
    state: State,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient").finish_non_exhaustive()
    }
}

impl ScramClient {
    /// Starts an exchange for `user` (`""` for PostgreSQL) with a nonce made from
    /// `random_bytes`, base64-encoded: give [`NONCE_BYTES`] bytes from a good RNG.
    pub fn new(user: &str, random_bytes: &[u8]) -> ScramClient {
        let mut first_bare = String::with_capacity(8 + user.len() + random_bytes.len() * 2);
        first_bare.push_str("n=");
        for c in user.chars() {
            match c {
                '=' => first_bare.push_str("=3D"),
                ',' => first_bare.push_str("=2C"),
                c => first_bare.push(c),
            }
        }
        first_bare.push_str(",r=");
        let nonce_at = first_bare.len();
        STANDARD.encode_string(random_bytes, &mut first_bare);
        ScramClient {
            first_bare,
            nonce_at,
            state: State::First,
        }
    }

    /// A client with the nonce given as text (printable ASCII except `,`), for reproducing a
    /// recorded exchange or a published test vector.
    pub fn with_nonce(user: &str, nonce: &str) -> ScramClient {
        let mut c = ScramClient::new(user, &[]);
        c.first_bare.push_str(nonce);
        c
    }

    fn nonce(&self) -> &str {
        self.first_bare.get(self.nonce_at..).unwrap_or_default()
    }

    /// Appends the client-first-message (`n,,n=USER,r=NONCE`): the data of the
    /// SASLInitialResponse.
    pub fn client_first(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"n,,");
        out.extend_from_slice(self.first_bare.as_bytes());
    }

    /// Takes the server-first-message (the data of AuthenticationSASLContinue) and appends the
    /// client-final-message (`c=biws,r=NONCE,p=PROOF`): the data of the SASLResponse.
    pub fn client_final(
        &mut self,
        password: &[u8],
        server_first: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), ScramError> {
        if !matches!(self.state, State::First) {
            return Err(ScramError::OutOfOrder);
        }
        self.state = State::Failed;
        let first = parse_server_first(server_first)?;
        let ours = self.nonce().as_bytes();
        if first.nonce.len() <= ours.len() || !first.nonce.starts_with(ours) {
            return Err(ScramError::NonceMismatch);
        }
        if first.iterations == 0 || first.iterations > MAX_SCRAM_ITERATIONS {
            return Err(ScramError::BadIterations);
        }
        let mut salt = [0u8; MAX_SALT_LEN];
        let salt_len = STANDARD
            .decode_slice(first.salt, &mut salt)
            .map_err(|_| ScramError::BadServerFirst)?;
        let salted = hi(
            password,
            salt.get(..salt_len).unwrap_or_default(),
            first.iterations,
        );

        let client_key = hmac(&salted, &[b"Client Key"]);
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        // AuthMessage = client-first-bare "," server-first "," client-final-without-proof
        let auth = [
            self.first_bare.as_bytes(),
            b",",
            server_first,
            b",c=biws,r=",
            first.nonce,
        ];
        let client_signature = hmac(&stored_key, &auth);
        let mut proof = client_key;
        for (p, s) in proof.iter_mut().zip(client_signature) {
            *p ^= s;
        }
        let server_key = hmac(&salted, &[b"Server Key"]);
        let server_signature = hmac(&server_key, &auth);

        out.extend_from_slice(b"c=biws,r=");
        out.extend_from_slice(first.nonce);
        out.extend_from_slice(b",p=");
        let mut b64 = [0u8; 44];
        let n = STANDARD.encode_slice(proof, &mut b64).unwrap_or(0);
        out.extend_from_slice(b64.get(..n).unwrap_or_default());
        self.state = State::Final { server_signature };
        Ok(())
    }

    /// Checks the server-final-message (the data of AuthenticationSASLFinal): `v=SIGNATURE`
    /// must prove the server knows the password. Only then is the login authentic.
    pub fn verify_server_final(&mut self, server_final: &[u8]) -> Result<(), ScramError> {
        let State::Final { server_signature } = std::mem::replace(&mut self.state, State::Failed)
        else {
            return Err(ScramError::OutOfOrder);
        };
        let first_attr = server_final
            .split(|&b| b == b',')
            .next()
            .unwrap_or_default();
        if first_attr.starts_with(b"e=") {
            return Err(ScramError::ServerRejected);
        }
        let v = first_attr
            .strip_prefix(b"v=")
            .ok_or(ScramError::BadServerFinal)?;
        let mut got = [0u8; 48];
        let n = STANDARD
            .decode_slice(v, &mut got)
            .map_err(|_| ScramError::BadServerFinal)?;
        if got.get(..n) == Some(&server_signature[..]) {
            self.state = State::Verified;
            Ok(())
        } else {
            Err(ScramError::BadSignature)
        }
    }

    /// The server's signature has been verified: the login is authentic.
    pub fn is_verified(&self) -> bool {
        matches!(self.state, State::Verified)
    }
}

struct ServerFirst<'a> {
    nonce: &'a [u8],
    salt: &'a [u8],
    iterations: u32,
}

/// `r=NONCE,s=SALT,i=COUNT[,extensions]`; a mandatory extension (`m=`) is refused.
fn parse_server_first(msg: &[u8]) -> Result<ServerFirst<'_>, ScramError> {
    let mut attrs = msg.split(|&b| b == b',');
    let mut next = |key: &[u8]| {
        attrs
            .next()
            .and_then(|a| a.strip_prefix(key))
            .ok_or(ScramError::BadServerFirst)
    };
    let nonce = next(b"r=")?;
    let salt = next(b"s=")?;
    let count = next(b"i=")?;
    // printable = %x21-2B / %x2D-7E (no comma: split already excluded it)
    if !nonce.iter().all(|&b| (0x21..=0x7e).contains(&b)) {
        return Err(ScramError::BadServerFirst);
    }
    if count.is_empty() || count.len() > 10 || !count.iter().all(u8::is_ascii_digit) {
        return Err(ScramError::BadIterations);
    }
    let iterations = count.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    let iterations = u32::try_from(iterations).map_err(|_| ScramError::BadIterations)?;
    Ok(ServerFirst {
        nonce,
        salt,
        iterations,
    })
}

/// HMAC-SHA-256 of the concatenation of `parts` under `key`.
fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // Any key length is valid for HMAC; new_from_slice cannot fail.
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        return [0; 32];
    };
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

/// RFC 5802 `Hi(password, salt, i)`: PBKDF2-HMAC-SHA-256's first block.
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let Ok(keyed) = HmacSha256::new_from_slice(password) else {
        return [0; 32];
    };
    let mut mac = keyed.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut u: [u8; 32] = mac.finalize().into_bytes().into();
    let mut acc = u;
    for _ in 1..iterations {
        let mut mac = keyed.clone();
        mac.update(&u);
        u = mac.finalize().into_bytes().into();
        for (a, b) in acc.iter_mut().zip(u) {
            *a ^= b;
        }
    }
    acc
}
