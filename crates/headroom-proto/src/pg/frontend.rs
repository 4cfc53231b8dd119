//! Frontend (client) messages. Each function appends to `out` and allocates nothing beyond
//! growing it, so a connection's write buffer is reused from message to message.
//!
//! Strings are sent as given, as C strings. A NUL byte inside one makes the server reject the
//! message (the length prefix keeps the framing intact, so the connection survives with an
//! error); refusing them is the scenario validator's job. A message must stay under the server's
//! 1 GiB limit; lengths are written as 32-bit big-endian integers, counts (parameters, types) as
//! 16-bit ones, so at most 65,535 parameters per statement (PostgreSQL's own limit).

/// Protocol version 3.0, as sent in the StartupMessage.
pub const PROTOCOL_VERSION: u32 = 3 << 16;
/// The request code of a CancelRequest.
const CANCEL_REQUEST_CODE: u32 = 80_877_102;

/// What a `Describe` or `Close` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A prepared statement (`S`).
    Statement,
    /// A portal (`P`).
    Portal,
}

impl Target {
    fn byte(self) -> u8 {
        match self {
            Target::Statement => b'S',
            Target::Portal => b'P',
        }
    }
}

/// Starts a message of type `tag` (0: none, for the startup-phase packets): writes the type and
/// a placeholder length, returns where the length goes.
fn begin(out: &mut Vec<u8>, tag: u8) -> usize {
    if tag != 0 {
        out.push(tag);
    }
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

/// Ends the message begun at `at`: its length counts itself and the body, not the type byte.
fn finish(out: &mut [u8], at: usize) {
    let len = u32::try_from(out.len() - at).unwrap_or(u32::MAX);
    if let Some(slot) = out.get_mut(at..at + 4) {
        slot.copy_from_slice(&len.to_be_bytes());
    }
}

fn cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

fn u16_count(n: usize) -> [u8; 2] {
    u16::try_from(n).unwrap_or(u16::MAX).to_be_bytes()
}

/// StartupMessage: protocol 3.0, `user`, `database` (omitted when empty: the server then takes
/// the user name), `application_name` if given, then `options` (run-time parameters such as
/// `("synchronous_commit", "off")`, or `("options", "-c statement_timeout=5s")`).
pub fn startup(
    out: &mut Vec<u8>,
    user: &str,
    database: &str,
    application_name: Option<&str>,
    options: &[(&str, &str)],
) {
    let at = begin(out, 0);
    out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    cstr(out, "user");
    cstr(out, user);
    if !database.is_empty() {
        cstr(out, "database");
        cstr(out, database);
    }
    if let Some(name) = application_name {
        cstr(out, "application_name");
        cstr(out, name);
    }
    for (name, value) in options {
        cstr(out, name);
        cstr(out, value);
    }
    out.push(0);
    finish(out, at);
}

/// CancelRequest for the query running on the connection whose BackendKeyData was
/// (`backend_pid`, `secret_key`); sent on a *new* connection, which the server then closes.
pub fn cancel_request(out: &mut Vec<u8>, backend_pid: u32, secret_key: u32) {
    out.extend_from_slice(&16u32.to_be_bytes());
    out.extend_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
    out.extend_from_slice(&backend_pid.to_be_bytes());
    out.extend_from_slice(&secret_key.to_be_bytes());
}

/// PasswordMessage with the password in clear (answer to AuthenticationCleartextPassword).
pub fn password(out: &mut Vec<u8>, password: &str) {
    let at = begin(out, b'p');
    cstr(out, password);
    finish(out, at);
}

/// PasswordMessage answering AuthenticationMD5Password:
/// `"md5" + md5hex(md5hex(password + user) + salt)`.
pub fn md5_password(out: &mut Vec<u8>, user: &str, password: &str, salt: [u8; 4]) {
    use md5::{Digest, Md5};
    let mut inner = Md5::new();
    inner.update(password.as_bytes());
    inner.update(user.as_bytes());
    let inner_hex = hex32(&inner.finalize());
    let mut outer = Md5::new();
    outer.update(inner_hex);
    outer.update(salt);
    let outer_hex = hex32(&outer.finalize());

    let at = begin(out, b'p');
    out.extend_from_slice(b"md5");
    out.extend_from_slice(&outer_hex);
    out.push(0);
    finish(out, at);
}

/// Lowercase hex of a 16-byte digest.
fn hex32(digest: &[u8]) -> [u8; 32] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = [0u8; 32];
    for (pair, b) in s.chunks_exact_mut(2).zip(digest) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 15)];
    }
    s
}

/// SASLInitialResponse: the chosen mechanism and its first message (for SCRAM, the
/// client-first-message of [`super::scram::ScramClient::client_first`]).
pub fn sasl_initial_response(out: &mut Vec<u8>, mechanism: &str, data: &[u8]) {
    let at = begin(out, b'p');
    cstr(out, mechanism);
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(data);
    finish(out, at);
}

/// SASLResponse: the next message of the mechanism (for SCRAM, the client-final-message).
pub fn sasl_response(out: &mut Vec<u8>, data: &[u8]) {
    let at = begin(out, b'p');
    out.extend_from_slice(data);
    finish(out, at);
}

/// Query (simple protocol): one or more `;`-separated statements, results in text. One unit.
pub fn query(out: &mut Vec<u8>, sql: &str) {
    let at = begin(out, b'Q');
    cstr(out, sql);
    finish(out, at);
}

/// Parse: prepare `sql` as `statement` (`""`: the unnamed statement, replaced by the next
/// Parse). `param_types` are type OIDs, 0 (or fewer than the placeholders) letting the server
/// infer them, as for `$1::int`.
pub fn parse(out: &mut Vec<u8>, statement: &str, sql: &str, param_types: &[u32]) {
    let at = begin(out, b'P');
    cstr(out, statement);
    cstr(out, sql);
    out.extend_from_slice(&u16_count(param_types.len()));
    for oid in param_types {
        out.extend_from_slice(&oid.to_be_bytes());
    }
    finish(out, at);
}

/// Bind: make `portal` (`""`: unnamed) from `statement` with these parameter values, all in
/// text format (`None` is SQL NULL); results are asked for in text format too.
pub fn bind<I, P>(out: &mut Vec<u8>, portal: &str, statement: &str, params: I)
where
    I: IntoIterator<Item = Option<P>>,
    P: AsRef<[u8]>,
{
    let at = begin(out, b'B');
    cstr(out, portal);
    cstr(out, statement);
    out.extend_from_slice(&0u16.to_be_bytes()); // no format codes: every parameter is text
    let count_at = out.len();
    out.extend_from_slice(&[0, 0]);
    let mut count = 0usize;
    for param in params {
        count += 1;
        match param {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(value) => {
                let value = value.as_ref();
                let len = i32::try_from(value.len()).unwrap_or(i32::MAX);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(value);
            }
        }
    }
    if let Some(slot) = out.get_mut(count_at..count_at + 2) {
        slot.copy_from_slice(&u16_count(count));
    }
    out.extend_from_slice(&0u16.to_be_bytes()); // no result format codes: all text
    finish(out, at);
}

/// Describe a statement (answered by ParameterDescription, then RowDescription or NoData) or a
/// portal (RowDescription or NoData).
pub fn describe(out: &mut Vec<u8>, target: Target, name: &str) {
    let at = begin(out, b'D');
    out.push(target.byte());
    cstr(out, name);
    finish(out, at);
}

/// Execute `portal`, returning at most `max_rows` rows (0: all; otherwise the server stops with
/// PortalSuspended when the limit is reached).
pub fn execute(out: &mut Vec<u8>, portal: &str, max_rows: u32) {
    let at = begin(out, b'E');
    cstr(out, portal);
    out.extend_from_slice(&max_rows.to_be_bytes());
    finish(out, at);
}

/// Close a prepared statement or a portal (answered by CloseComplete).
pub fn close(out: &mut Vec<u8>, target: Target, name: &str) {
    let at = begin(out, b'C');
    out.push(target.byte());
    cstr(out, name);
    finish(out, at);
}

/// Sync: ends an extended-protocol unit; the server answers with ReadyForQuery (after skipping
/// to here if a message of the unit failed).
pub fn sync(out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'S', 0, 0, 0, 4]);
}

/// Flush: asks the server to send what it has produced so far, without ending the unit.
pub fn flush(out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'H', 0, 0, 0, 4]);
}

/// Terminate: a polite goodbye before closing the socket.
pub fn terminate(out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'X', 0, 0, 0, 4]);
}

/// One unit preparing `sql` as the named `statement`: Parse + Sync. Answered by ParseComplete
/// and ReadyForQuery (or an error, e.g. `42P05` if the name is taken). The statement lives until
/// the connection ends (or a [`close`]), for [`execute_prepared`] to use as often as it likes.
pub fn prepare(out: &mut Vec<u8>, statement: &str, sql: &str) {
    parse(out, statement, sql, &[]);
    sync(out);
}

/// One unit executing a prepared `statement` with text `params`: Bind (unnamed portal) +
/// Execute (all rows) + Sync. Answered by BindComplete, DataRows, CommandComplete and
/// ReadyForQuery. No Describe: the rows are counted, not interpreted.
pub fn execute_prepared<I, P>(out: &mut Vec<u8>, statement: &str, params: I)
where
    I: IntoIterator<Item = Option<P>>,
    P: AsRef<[u8]>,
{
    bind(out, "", statement, params);
    execute(out, "", 0);
    sync(out);
}

/// One unit running `sql` once with text `params`, as libpq's `PQexecParams` does: Parse
/// (unnamed statement) + Bind + Describe (portal) + Execute + Sync. Answered by ParseComplete,
/// BindComplete, RowDescription (or NoData), DataRows, CommandComplete and ReadyForQuery.
pub fn query_params<I, P>(out: &mut Vec<u8>, sql: &str, params: I)
where
    I: IntoIterator<Item = Option<P>>,
    P: AsRef<[u8]>,
{
    parse(out, "", sql, &[]);
    bind(out, "", "", params);
    describe(out, Target::Portal, "");
    execute(out, "", 0);
    sync(out);
}
