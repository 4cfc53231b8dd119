//! Sans-I/O protocol codecs. A codec turns a request description into bytes and decodes replies
//! incrementally from whatever slice of bytes the transport read; it never touches a socket, so
//! it can be fuzzed and unit-tested on byte strings alone.

pub mod auth;
pub mod cookie;
pub mod encoding;
pub mod h2;
pub mod http1;
pub mod json;
pub mod pg;
pub mod raw;
pub mod redirect;
pub mod starttls;
pub mod ws;
pub mod xmpp;

#[cfg(test)]
mod test_rng;
