//! Sans-I/O protocol codecs. A codec turns a request description into bytes and decodes replies
//! incrementally from whatever slice of bytes the transport read; it never touches a socket, so
//! it can be fuzzed and unit-tested on byte strings alone.

pub mod amqp;
pub mod auth;
pub mod bosh;
pub mod cookie;
pub mod encoding;
pub mod h2;
pub mod http1;
pub mod json;
pub mod ldap;
pub mod mqtt;
pub mod mysql;
pub mod oauth;
pub mod pg;
pub mod raw;
pub mod redirect;
pub mod starttls;
pub mod ws;
pub mod xmpp;

/// Writes `n` in decimal into the end of `buf`, returns the digits: a number written without
/// formatting machinery (encoders on the hot path, and the reference servers' responses).
pub fn digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod test_rng;
