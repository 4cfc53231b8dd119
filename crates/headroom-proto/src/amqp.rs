//! AMQP 0-9-1 client side (RabbitMQ's protocol), sans I/O.
//!
//! What a load generator needs to play publishers and consumers against a broker: log in (SASL
//! PLAIN), open channels, declare exchanges and queues, bind them, publish with or without
//! publisher confirms, consume with a prefetch window and acknowledge, and count what comes
//! back — confirms, deliveries, returns, closes — without keeping message bodies. Two layers:
//!
//! - [`client`]: encoders. Every function *appends* whole frames to a caller's `Vec<u8>` and
//!   allocates nothing beyond growing it, so a connection's write buffer is reused.
//! - [`Connection`]: the frame decoder and a state machine over it, fed whatever the socket
//!   returned, split anywhere. It answers the handshake itself (Connection.Start → Start-Ok,
//!   Tune → Tune-Ok + Open) and the closes the server starts (Close-Ok), writing the replies
//!   into the caller's buffer, and turns the frame stream into the few facts the engine counts
//!   ([`Progress`]).
//!
//! # How the engine uses it
//!
//! One [`Connection`] per socket, created when the socket is connected:
//!
//! ```
//! use headroom_proto::amqp::{client, Connection, Login, Method, Progress, Publish};
//!
//! let mut out = Vec::new(); // the connection's write buffer, reused
//! let login = Login { user: "guest", password: "guest", vhost: "/" };
//! let mut conn = Connection::new(&login, &mut out); // appends the protocol header
//! // ... send `out`, clear it; then for every chunk read from the socket:
//! # let chunk: &[u8] = &[];
//! let mut rest = chunk;
//! loop {
//!     let (used, progress) = conn.decode(rest, &mut out).expect("count the error, close");
//!     rest = &rest[used..];
//!     match progress {
//!         Progress::NeedMore => break, // all of `rest` consumed
//!         Progress::Ready => {
//!             // logged in: open a channel, ask for confirms
//!             client::channel_open(&mut out, 1);
//!             client::confirm_select(&mut out, 1);
//!         }
//!         Progress::MethodOk { channel: 1, method: Method::ConfirmSelectOk } => {
//!             let p = Publish { channel: 1, exchange: "", routing_key: "q", mandatory: false,
//!                               persistent: true };
//!             conn.basic_publish(&mut out, &p, b"hello");
//!         }
//!         Progress::Confirm { delivery_tag, multiple, ack, .. } => {
//!             let _ = (delivery_tag, multiple, ack); // the engine's per-channel bookkeeping
//!         }
//!         Progress::Delivery { channel, delivery_tag, body_len, head, .. } => {
//!             let _ = (body_len, head); // head: the body's first bytes (a timestamp)
//!             client::basic_ack(&mut out, channel, delivery_tag, false);
//!         }
//!         _ => {}
//!     }
//! }
//! // then send `out` if not empty (replies the codec wrote itself are there too)
//! ```
//!
//! After every `decode` call the caller sends whatever `out` holds: the codec writes Start-Ok,
//! Tune-Ok, Connection.Open, Channel.Close-Ok, Connection.Close-Ok, Channel.Flow-Ok and
//! Basic.Cancel-Ok by itself, and some of them come with no event (`NeedMore`).
//!
//! **Channels.** Encoders take the channel number; the engine chooses them in
//! `1..=`[`Connection::channel_max`] (negotiated at Tune) and tracks what it asked on each.
//! Replies come back as [`Progress::MethodOk`] with their channel, in the order the server
//! answers (in order per channel). Publisher confirms are [`Progress::Confirm`] with the
//! server's delivery tag (1, 2, 3, ... per channel after Confirm.Select, `multiple` covering
//! every tag up to it): matching them to publishes is the engine's job.
//!
//! **Errors.** A server that closes a channel (404 no such queue, 406 precondition failed, 403
//! access refused) is an ordinary event, [`Progress::ServerClosedChannel`]: the connection goes
//! on (the codec already wrote Channel.Close-Ok). Anything that ends the connection is an
//! `Err(`[`AmqpError`]`)`, a fixed-size `Copy` value counted without allocating: bytes that are
//! not AMQP, a refused login ([`AmqpError::AuthFailed`]), a Connection.Close from the server
//! ([`AmqpError::ServerClosed`], with the reply code; the codec already wrote Close-Ok, send it
//! before closing the socket). The text of the last close (e.g. `ACCESS_REFUSED - Login was
//! refused using authentication mechanism PLAIN`) is kept aside for reports
//! ([`Connection::last_close_text`]).
//!
//! # Memory
//!
//! The decoder owns no read buffer: a frame that arrives whole inside one chunk is decoded in
//! place from the caller's slice. Only a method or content-header frame split across reads is
//! copied into a per-connection `Vec`, allocated at the first split and freed again after a
//! frame larger than [`RETAINED_CAPACITY`]. Message bodies are never copied: body frames are
//! counted down as they arrive, keeping only the first [`HEAD_LEN`] bytes of each message (for
//! the engine's timestamp), so a 100 MB message costs nothing however it is split. Frames are
//! refused above the negotiated `frame_max` ([`AmqpError::TooLong`]; ours is
//! [`DEFAULT_FRAME_MAX`], settable). A ready [`Connection`] is 160 bytes (64-bit targets) plus
//! its split-frame buffer (none until a frame arrives split) and a small table of messages in
//! transit (one entry per channel with a delivery between its method and its last body frame;
//! 4 entries, 224 bytes, once the first delivery arrives). The login credentials are dropped
//! once Connection.Open is written.
//!
//! # Robustness
//!
//! No input panics the decoder (the `fuzz/` target `amqp_frames` checks this, and that any
//! split of a stream gives the same events as the stream in one piece): every length is checked
//! before use, all slicing goes through `get`, and the only variable-size structure a server
//! sends us — the field table of its properties in Connection.Start — is walked with a bounded
//! nesting depth ([`MAX_TABLE_DEPTH`]) and size ([`DEFAULT_MAX_TABLE_LEN`]). After an `Err` the
//! connection must be closed: its framing is lost.
//!
//! # Not supported
//!
//! TLS (amqps: the engine's TLS layer would wrap the bytes), SASL mechanisms other than PLAIN
//! (AMQPLAIN, EXTERNAL), Basic.Get, transactions (Tx), exchange-to-exchange bindings, message
//! properties other than delivery-mode (the codec never parses the properties of what it
//! receives), and the consumer tag of each delivery (one consumer per channel is what the engine
//! runs; the tag is in Basic.Consume-Ok).

pub mod client;
mod conn;
#[cfg(test)]
mod tests;
mod wire;

pub use client::{ExchangeOptions, Publish, QueueOptions};
pub use conn::{Connection, Login, Method, Progress, Tuning, HEAD_LEN, RETAINED_CAPACITY};
pub use wire::{
    DEFAULT_FRAME_MAX, DEFAULT_MAX_TABLE_LEN, FRAME_MIN_SIZE, MAX_TABLE_DEPTH, PROTOCOL_HEADER,
};

/// Why a connection cannot go on. Fixed size and `Copy`: counted by kind without allocating.
/// `(class, method)` pairs are the spec's numbers, e.g. (60, 60) Basic.Deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmqpError {
    /// Not an AMQP frame: its end octet is not 0xCE, its type is unknown, or a heartbeat or
    /// content frame is on a channel it cannot be on.
    #[error("bad frame")]
    BadFrame,
    /// A frame longer than the negotiated `frame_max` (ours until Connection.Tune).
    #[error("frame longer than frame_max")]
    TooLong,
    /// The arguments of this method (or its content header, or the size of its body frames) do
    /// not parse.
    #[error("malformed method {0}.{1}")]
    Malformed(u16, u16),
    /// This method makes no sense here: in the connection's state, on this channel (connection
    /// methods only on 0, the others on 1..=channel_max), while a content is arriving on the
    /// channel, or one we never ask for. (0, 0): a content header or body frame where no content
    /// was expected.
    #[error("unexpected method {0}.{1}")]
    Unexpected(u16, u16),
    /// A field table nested deeper than [`MAX_TABLE_DEPTH`] or longer than the table limit
    /// ([`DEFAULT_MAX_TABLE_LEN`] unless set).
    #[error("field table over the limits")]
    TableLimit,
    /// The server refused the login: Connection.Close 403 (ACCESS_REFUSED) before Open-Ok.
    #[error("authentication failed")]
    AuthFailed,
    /// The server offers no SASL mechanism we speak (PLAIN).
    #[error("the server does not offer SASL PLAIN")]
    NoPlainMechanism,
    /// The server speaks another protocol version: it answered our header with its own, or its
    /// Connection.Start is not 0-9.
    #[error("the server does not speak AMQP 0-9-1")]
    ProtocolVersion,
    /// The server closed the connection (Connection.Close with this reply code: 320
    /// CONNECTION_FORCED, 501 FRAME_ERROR, 530 NOT_ALLOWED, 541 INTERNAL_ERROR, ...). The codec
    /// wrote Close-Ok.
    #[error("connection closed by the server ({0})")]
    ServerClosed(u16),
    /// The connection ended in the middle of a frame, the handshake, or a message's content.
    #[error("connection closed in the middle of a frame or handshake")]
    Incomplete,
}

/// AMQP reply codes the engine may want to name (spec section 1.2, constants).
pub mod reply {
    pub const SUCCESS: u16 = 200;
    pub const CONTENT_TOO_LARGE: u16 = 311;
    pub const NO_ROUTE: u16 = 312;
    pub const NO_CONSUMERS: u16 = 313;
    pub const CONNECTION_FORCED: u16 = 320;
    pub const INVALID_PATH: u16 = 402;
    pub const ACCESS_REFUSED: u16 = 403;
    pub const NOT_FOUND: u16 = 404;
    pub const RESOURCE_LOCKED: u16 = 405;
    pub const PRECONDITION_FAILED: u16 = 406;
    pub const FRAME_ERROR: u16 = 501;
    pub const SYNTAX_ERROR: u16 = 502;
    pub const COMMAND_INVALID: u16 = 503;
    pub const CHANNEL_ERROR: u16 = 504;
    pub const UNEXPECTED_FRAME: u16 = 505;
    pub const RESOURCE_ERROR: u16 = 506;
    pub const NOT_ALLOWED: u16 = 530;
    pub const NOT_IMPLEMENTED: u16 = 540;
    pub const INTERNAL_ERROR: u16 = 541;
}
