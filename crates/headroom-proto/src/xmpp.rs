//! XMPP client protocol (RFC 6120/6121 subset, at parity with Tsung's jabber plugin), sans I/O.
//!
//! Four pieces, each pure and fuzzable:
//!
//! - [`Splitter`]: the server's byte stream in, in chunks of any size, [`Event`]s out: the stream
//!   header ([`StreamHeader`]: `id`, `from`, `version`), each complete top-level element
//!   ([`Stanza`]: its [`Kind`], name, `type`/`id`/`from`/`to` and byte length, and its bytes when
//!   capture is on), and the stream close. Handles XML declarations, comments, CDATA, quoted
//!   `>` and `/`, empty-element tags, prefixes (`stream:features`), whitespace keep-alives and
//!   stream restarts; a stanza over the limit (default 1 MiB) is an error, not a larger buffer.
//! - Encoders ([`encode`], re-exported here): each appends one request to the caller's buffer.
//! - [`Login`]: stream open → features → (in-band registration) → SASL PLAIN or ANONYMOUS →
//!   restart → bind → (session, only when required) → ready with the bound JID.
//! - [`Wait`] (what a request waits for, from Tsung's `ack`) and [`UserPool`] (Tsung's chat
//!   destinations: online, offline, random, unique, previous).
//!
//! # How the engine uses it
//!
//! One [`Splitter`] and one [`Login`] per virtual user's connection, one write buffer (`Vec<u8>`,
//! reused) per connection or per worker. Bytes are read into the worker's scratch buffer and lent
//! to the splitter; the splitter copies nothing but the few bytes of the current stanza's name
//! and kept attributes (and the stanza itself when capture is on):
//!
//! ```
//! use headroom_proto::xmpp::{self, Credentials, Event, Login, LoginConfig, LoginStatus, Name, Splitter};
//!
//! let cfg = LoginConfig {
//!     domain: "localhost",
//!     credentials: Credentials::Plain { user: Name::Indexed("user", 1), password: Name::Indexed("pass", 1) },
//!     resource: Some("headroom"),
//!     register: false,
//! };
//! let (mut split, mut login, mut out) = (Splitter::new(), Login::new(), Vec::new());
//! login.start(&cfg, &mut out).unwrap();            // engine: write `out` to the socket
//! split.set_capture(true);                          // the login reads features and bind results
//! # let read: &[u8] = b"<?xml version='1.0'?><stream:stream id='1' from='localhost' version='1.0'>";
//! // engine: on readable, read into its scratch buffer, then:
//! let mut input = read;
//! while !input.is_empty() {
//!     let (used, event) = split.feed(input).expect("count the error, close the connection");
//!     input = &input[used..];
//!     let Some(event) = event else { break };
//!     if login.in_progress() {
//!         out.clear();
//!         if login.on_event(&cfg, &event, &mut out).unwrap() == LoginStatus::Ready {
//!             // split.set_capture(false) unless the scenario matches on content
//!         }
//!         // write `out` if not empty; time the step when login.phase() changed
//!     } else {
//!         // count the event (kind, type, len, error), check the outstanding Wait
//!     }
//! }
//! ```
//!
//! After login, each scenario request is an encoder call with a caller id (a per-user counter),
//! plus a [`Wait`] from [`Wait::for_request`]: `Nothing` completes it at once (Tsung
//! `no_ack`), `AnyEvent` at the next event (`local`), `IqReply(id)` at the iq result or error
//! with that id. Every event goes through [`Wait::check`] while a request is outstanding;
//! whatever else arrives (chat messages from other users, presence) is counted by its [`Kind`]
//! and length — a chat message's delivery is measured on the receiver's side.
//!
//! # Allocation and memory
//!
//! Steady state allocates nothing: the splitter keeps its name, attribute and capture buffers
//! between stanzas (allocated on first use: ~200 bytes of struct, a few hundred bytes of buffers,
//! the capture buffer only when capture is on and shrunk back to 16 KiB after a larger stanza);
//! encoders write into the caller's buffer; [`Login`] keeps the bound JID in a reused `Vec`.
//! Memory per connection is bounded by the stanza limit (capture) plus [`MAX_NAME_LEN`] and five
//! times [`MAX_ATTR_LEN`].
//!
//! # Robustness
//!
//! No byte sequence panics the splitter or the login machine (no unchecked indexing of input,
//! checked arithmetic on lengths); errors are fixed enums with a `kind()` name for counters. The
//! `fuzz/` target `xmpp_stream` feeds arbitrary bytes in arbitrary chunks to both and checks
//! that chunking never changes the outcome.

mod ack;
mod dest;
pub mod encode;
pub(crate) mod find;
mod login;
mod splitter;

#[cfg(test)]
mod tests;

pub use ack::{Ack, ReplyError, RequestKind, Wait, WaitOutcome};
pub use dest::{DestError, Destination, UserPool, MAX_USERS};
pub use encode::{
    auth_anonymous, auth_plain, bind, chat, chat_text, presence_broadcast, presence_directed,
    presence_initial, presence_typed, presence_unavailable, push_escaped, push_filler, raw,
    register, roster_add, roster_get, roster_remove, roster_rename, roster_set, session,
    stream_close, stream_open, IqId, Jid, Name, PresenceType, Show, FILLER,
};
pub use find::{child_text, elements, error_condition, find_element, text_len, Element};
pub use login::{
    Credentials, Login, LoginConfig, LoginError, LoginStatus, Phase, BIND_ID, MAX_JID_LEN,
    REGISTER_ID, SESSION_ID,
};
pub use splitter::{
    local_name, parse_u64, Event, Kind, SplitError, Splitter, Stanza, StanzaType, StreamHeader,
    DEFAULT_MAX_STANZA, MAX_ATTR_LEN, MAX_NAME_LEN, RETAINED_CAPTURE,
};
