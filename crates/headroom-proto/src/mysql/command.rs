//! Encoders: each function appends one packet (4-byte header, payload) to `out` and returns the
//! sequence id the server's reply (or our next packet) will carry. A payload of 16 MiB - 1
//! bytes or more is cut into fragments, each with its own header and the next sequence id.
//!
//! These are the bare byte writers; a [`super::Connection`]'s `com_*` methods call them and
//! remember what reply to expect. Use these directly only for a connection you drive yourself.

use super::packet::MAX_FRAGMENT;

pub const COM_QUIT: u8 = 0x01;
pub const COM_INIT_DB: u8 = 0x02;
pub const COM_QUERY: u8 = 0x03;
pub const COM_PING: u8 = 0x0e;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_STMT_CLOSE: u8 = 0x19;
pub const COM_RESET_CONNECTION: u8 = 0x1f;

/// `MYSQL_TYPE_VAR_STRING`: the type every parameter is sent as.
pub const TYPE_VAR_STRING: u8 = 0xfd;
/// `utf8mb4_general_ci`: the character set the handshake asks for (MySQL and MariaDB both know
/// it; MySQL 8's `utf8mb4_0900_ai_ci`, 255, is unknown to MariaDB).
pub const UTF8MB4_GENERAL_CI: u8 = 45;
/// The `max_packet_size` the handshake announces (what we accept from the server: a client
/// counts rows down, so any size).
pub const CLIENT_MAX_PACKET: u32 = 1 << 30;

/// Reserves a header at the end of `out`; returns where the packet starts.
fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    start
}

/// Ends the packet begun at `start` with sequence id `seq`: writes its header, or cuts a payload
/// of [`MAX_FRAGMENT`] bytes or more into fragments (the last one shorter, empty if need be).
/// Returns the sequence id after it.
fn finish(out: &mut Vec<u8>, start: usize, seq: u8) -> u8 {
    let len = out.len() - start - 4;
    if len < MAX_FRAGMENT as usize {
        out[start..start + 4].copy_from_slice(&header(len as u32, seq));
        return seq.wrapping_add(1);
    }
    // Rare (a statement of 16 MiB): moving the payload once is fine.
    let payload = out.split_off(start + 4);
    out.truncate(start);
    let mut seq = seq;
    let mut chunks = payload.chunks(MAX_FRAGMENT as usize);
    loop {
        let chunk = chunks.next().unwrap_or_default();
        out.extend_from_slice(&header(chunk.len() as u32, seq));
        out.extend_from_slice(chunk);
        seq = seq.wrapping_add(1);
        if chunk.len() < MAX_FRAGMENT as usize {
            return seq;
        }
    }
}

fn header(len: u32, seq: u8) -> [u8; 4] {
    let l = len.to_le_bytes();
    [l[0], l[1], l[2], seq]
}

/// A length-encoded integer.
pub fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=250 => out.push(n as u8),
        251..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// A command whose payload is its code and `arg`.
fn simple(out: &mut Vec<u8>, code: u8, arg: &[u8]) -> u8 {
    let start = begin(out);
    out.push(code);
    out.extend_from_slice(arg);
    finish(out, start, 0)
}

/// `COM_QUERY`: run `sql` (text protocol).
pub fn query(out: &mut Vec<u8>, sql: &[u8]) -> u8 {
    simple(out, COM_QUERY, sql)
}

/// `COM_STMT_PREPARE`: prepare `sql` (`?` placeholders).
pub fn prepare(out: &mut Vec<u8>, sql: &[u8]) -> u8 {
    simple(out, COM_STMT_PREPARE, sql)
}

/// `COM_INIT_DB`: make `database` the default one.
pub fn init_db(out: &mut Vec<u8>, database: &[u8]) -> u8 {
    simple(out, COM_INIT_DB, database)
}

/// `COM_PING`.
pub fn ping(out: &mut Vec<u8>) -> u8 {
    simple(out, COM_PING, &[])
}

/// `COM_QUIT`: the server closes the connection, without a reply.
pub fn quit(out: &mut Vec<u8>) -> u8 {
    simple(out, COM_QUIT, &[])
}

/// `COM_RESET_CONNECTION` (MySQL 5.7.3+, MariaDB 10.2.4+): reset the session (variables,
/// temporary tables, prepared statements) without logging in again.
pub fn reset_connection(out: &mut Vec<u8>) -> u8 {
    simple(out, COM_RESET_CONNECTION, &[])
}

/// `COM_STMT_CLOSE`: free a prepared statement, without a reply.
pub fn stmt_close(out: &mut Vec<u8>, statement_id: u32) -> u8 {
    simple(out, COM_STMT_CLOSE, &statement_id.to_le_bytes())
}

/// `COM_STMT_EXECUTE` of `statement_id` with `params` (`None`: NULL), no cursor, one
/// iteration; every parameter's type is sent (new-params-bound flag 1) as
/// `MYSQL_TYPE_VAR_STRING` and its value as a length-encoded string. The iterator is walked
/// three times (count and NULL bitmap, types, values), hence `Clone`.
pub fn execute<I, P>(out: &mut Vec<u8>, statement_id: u32, params: I) -> u8
where
    I: IntoIterator<Item = Option<P>>,
    I::IntoIter: Clone,
    P: AsRef<[u8]>,
{
    let params = params.into_iter();
    let start = begin(out);
    out.push(COM_STMT_EXECUTE);
    out.extend_from_slice(&statement_id.to_le_bytes());
    out.push(0); // flags: CURSOR_TYPE_NO_CURSOR
    out.extend_from_slice(&1u32.to_le_bytes()); // iteration count
    let bitmap = out.len();
    let mut n = 0usize;
    for (i, p) in params.clone().enumerate() {
        if i % 8 == 0 {
            out.push(0);
        }
        if p.is_none() {
            if let Some(byte) = out.last_mut() {
                *byte |= 1 << (i % 8);
            }
        }
        n = i + 1;
    }
    debug_assert_eq!(out.len() - bitmap, n.div_ceil(8));
    if n > 0 {
        out.push(1); // new-params-bound flag: types follow
        for _ in 0..n {
            out.extend_from_slice(&[TYPE_VAR_STRING, 0]); // type, not unsigned
        }
        for p in params.flatten() {
            let v = p.as_ref();
            put_lenenc_int(out, v.len() as u64);
            out.extend_from_slice(v);
        }
    }
    finish(out, start, 0)
}

/// The fixed start of the HandshakeResponse41, which is also the whole SSLRequest:
/// capabilities, max packet size, character set, 23 zero bytes.
fn response_head(out: &mut Vec<u8>, caps: u32, charset: u8) {
    out.extend_from_slice(&caps.to_le_bytes());
    out.extend_from_slice(&CLIENT_MAX_PACKET.to_le_bytes());
    out.push(charset);
    out.extend_from_slice(&[0; 23]);
}

/// SSLRequest: the HandshakeResponse41's first 32 bytes with `CLIENT_SSL` in `caps`; the TLS
/// handshake follows it, then the whole HandshakeResponse41 with the next sequence id.
pub fn ssl_request(out: &mut Vec<u8>, seq: u8, caps: u32, charset: u8) -> u8 {
    let start = begin(out);
    response_head(out, caps, charset);
    finish(out, start, seq)
}

/// HandshakeResponse41. `auth` is the plugin's reply (at most 255 bytes, sent with a 1-byte
/// length: `CLIENT_SECURE_CONNECTION`); `database` is sent when `caps` has
/// `CLIENT_CONNECT_WITH_DB`, the plugin name when it has `CLIENT_PLUGIN_AUTH`.
#[allow(clippy::too_many_arguments)]
pub fn handshake_response(
    out: &mut Vec<u8>,
    seq: u8,
    caps: u32,
    charset: u8,
    user: &[u8],
    auth: &[u8],
    database: &[u8],
    plugin: &str,
) -> u8 {
    let start = begin(out);
    response_head(out, caps, charset);
    out.extend_from_slice(user);
    out.push(0);
    let auth = auth.get(..255).unwrap_or(auth);
    out.push(auth.len() as u8);
    out.extend_from_slice(auth);
    if caps & super::caps::CONNECT_WITH_DB != 0 {
        out.extend_from_slice(database);
        out.push(0);
    }
    if caps & super::caps::PLUGIN_AUTH != 0 {
        out.extend_from_slice(plugin.as_bytes());
        out.push(0);
    }
    finish(out, start, seq)
}

/// A packet of raw authentication data (the reply to an AuthSwitchRequest or to
/// `caching_sha2_password`'s request for the password).
pub fn auth_data(out: &mut Vec<u8>, seq: u8, data: &[u8]) -> u8 {
    let start = begin(out);
    out.extend_from_slice(data);
    finish(out, start, seq)
}
