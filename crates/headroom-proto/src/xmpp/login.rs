//! The login state machine: stream open → features → (registration) → SASL → restart →
//! features → bind → (session) → ready. Pure: it writes what to send into the caller's buffer
//! and consumes [`Event`]s from the [`Splitter`](super::Splitter); the caller does the I/O and
//! the timing (each [`Phase`] change is a step the engine may time).

use super::encode::{self, Name};
use super::find::{child_text, elements, error_condition, find_element};
use super::splitter::{Event, Kind, Stanza, StanzaType};

/// Ids of the iqs the login machine sends (never decimal, so never a caller's id).
pub const REGISTER_ID: &str = "reg1";
pub const BIND_ID: &str = "bind1";
pub const SESSION_ID: &str = "sess1";
/// Longest bound JID kept, in bytes.
pub const MAX_JID_LEN: usize = 3071;

/// How to authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credentials<'a> {
    /// SASL PLAIN.
    Plain { user: Name<'a>, password: Name<'a> },
    /// SASL ANONYMOUS: the server makes up a JID.
    Anonymous,
}

/// What the login needs; borrowed on every call, so the machine itself holds no strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginConfig<'a> {
    /// The server's domain (the stream's `to`).
    pub domain: &'a str,
    pub credentials: Credentials<'a>,
    /// The resource asked for at bind (`None`: the server picks one).
    pub resource: Option<&'a str>,
    /// Register the account in-band (XEP-0077) before authenticating; "already exists"
    /// (`<conflict/>`) counts as registered. Needs [`Credentials::Plain`].
    pub register: bool,
}

/// Where the login is; the engine may time each phase (from the first byte sent in it to the
/// event that ends it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started.
    Idle,
    /// Stream opened, waiting for the header and the features.
    Connect,
    /// Registration sent, waiting for its result.
    Register,
    /// SASL auth sent, waiting for success.
    Auth,
    /// Restarted stream after SASL, waiting for the header and the features.
    Restart,
    /// Bind sent, waiting for the bound JID.
    Bind,
    /// Session sent, waiting for its result.
    Session,
    /// Logged in: [`Login::jid`] is the full JID.
    Ready,
    /// Failed; see the error returned.
    Failed,
}

/// How a login failed; `kind()` is the name the engine counts it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    #[error("authentication failed (SASL failure)")]
    Auth,
    #[error("the server offers no SASL mechanism we can use")]
    NoMechanism,
    #[error("in-band registration failed")]
    Register,
    #[error("resource binding failed")]
    Bind,
    #[error("session establishment failed")]
    Session,
    #[error("the server sent a stream error")]
    StreamError,
    #[error("the server closed the stream")]
    Closed,
    #[error("unexpected reply during login")]
    Unexpected,
    #[error("the splitter does not capture stanzas (set_capture(true) during login)")]
    NotCaptured,
    #[error("the login configuration cannot work (registration needs a user and password)")]
    Config,
}

impl LoginError {
    pub fn kind(self) -> &'static str {
        match self {
            LoginError::Auth | LoginError::NoMechanism => "auth",
            LoginError::Register => "register",
            LoginError::Bind => "bind",
            LoginError::Session => "session",
            LoginError::StreamError => "stream_error",
            LoginError::Closed => "closed",
            LoginError::Unexpected => "protocol",
            LoginError::NotCaptured | LoginError::Config => "config",
        }
    }
}

/// Progress of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginStatus {
    /// Keep feeding events (after sending whatever was written).
    Pending,
    /// Logged in.
    Ready,
}

/// The login state machine of one connection: 32 bytes, plus the bound JID's buffer.
#[derive(Debug, Clone)]
pub struct Login {
    phase: Phase,
    header_seen: bool,
    registered: bool,
    session_required: bool,
    mech_plain: bool,
    mech_anonymous: bool,
    jid: Vec<u8>,
}

impl Default for Login {
    fn default() -> Self {
        Self::new()
    }
}

impl Login {
    pub fn new() -> Self {
        Login {
            phase: Phase::Idle,
            header_seen: false,
            registered: false,
            session_required: false,
            mech_plain: false,
            mech_anonymous: false,
            jid: Vec::new(),
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// True until ready or failed: the splitter must capture stanzas meanwhile.
    pub fn in_progress(&self) -> bool {
        !matches!(self.phase, Phase::Ready | Phase::Failed)
    }

    /// The full JID the server bound (`user1@localhost/headroom`), once ready.
    pub fn jid(&self) -> &[u8] {
        &self.jid
    }

    /// Whether the server required session establishment (RFC 3921 servers).
    pub fn session_required(&self) -> bool {
        self.session_required
    }

    /// Whether the in-band registration was done (or found the account existing).
    pub fn registered(&self) -> bool {
        self.registered
    }

    /// Starts (or restarts, on a new connection) the login: writes the stream header.
    pub fn start(&mut self, cfg: &LoginConfig<'_>, out: &mut Vec<u8>) -> Result<(), LoginError> {
        *self = Login {
            jid: std::mem::take(&mut self.jid),
            ..Login::new()
        };
        self.jid.clear();
        if cfg.register && cfg.credentials == Credentials::Anonymous {
            self.phase = Phase::Failed;
            return Err(LoginError::Config);
        }
        encode::stream_open(out, cfg.domain);
        self.phase = Phase::Connect;
        Ok(())
    }

    /// Consumes one event from the splitter; may write the next request into `out`.
    pub fn on_event(
        &mut self,
        cfg: &LoginConfig<'_>,
        ev: &Event<'_>,
        out: &mut Vec<u8>,
    ) -> Result<LoginStatus, LoginError> {
        match self.step(cfg, ev, out) {
            Ok(s) => Ok(s),
            Err(e) => {
                self.phase = Phase::Failed;
                Err(e)
            }
        }
    }

    fn step(
        &mut self,
        cfg: &LoginConfig<'_>,
        ev: &Event<'_>,
        out: &mut Vec<u8>,
    ) -> Result<LoginStatus, LoginError> {
        let st = match ev {
            Event::StreamClose { .. } => return Err(LoginError::Closed),
            Event::StreamOpen(_) => {
                return match self.phase {
                    Phase::Connect | Phase::Restart if !self.header_seen => {
                        self.header_seen = true;
                        Ok(LoginStatus::Pending)
                    }
                    _ => Err(LoginError::Unexpected),
                };
            }
            Event::Stanza(s) => s,
        };
        if st.kind == Kind::StreamError {
            return Err(LoginError::StreamError);
        }
        match self.phase {
            Phase::Idle | Phase::Ready | Phase::Failed => Err(LoginError::Unexpected),
            Phase::Connect => {
                if st.kind != Kind::Features {
                    return Ok(LoginStatus::Pending);
                }
                if !self.header_seen {
                    return Err(LoginError::Unexpected);
                }
                let bytes = st.bytes.ok_or(LoginError::NotCaptured)?;
                for m in elements(bytes, "mechanism") {
                    match m.content.and_then(|r| bytes.get(r)).map(<[u8]>::trim_ascii) {
                        Some(b"PLAIN") => self.mech_plain = true,
                        Some(b"ANONYMOUS") => self.mech_anonymous = true,
                        _ => {}
                    }
                }
                if cfg.register {
                    let Credentials::Plain { user, password } = cfg.credentials else {
                        return Err(LoginError::Config);
                    };
                    encode::register(out, REGISTER_ID, user, password);
                    self.phase = Phase::Register;
                    return Ok(LoginStatus::Pending);
                }
                self.send_auth(cfg, out)
            }
            Phase::Register => {
                if !is_reply(st, REGISTER_ID) {
                    return Ok(LoginStatus::Pending);
                }
                match st.stanza_type() {
                    StanzaType::Result => {}
                    _ => {
                        let bytes = st.bytes.ok_or(LoginError::NotCaptured)?;
                        if error_condition(bytes) != Some(b"conflict") {
                            return Err(LoginError::Register);
                        }
                    }
                }
                self.registered = true;
                self.send_auth(cfg, out)
            }
            Phase::Auth => match st.kind {
                Kind::Success => {
                    encode::stream_open(out, cfg.domain);
                    self.phase = Phase::Restart;
                    self.header_seen = false;
                    Ok(LoginStatus::Pending)
                }
                Kind::Failure | Kind::Challenge => Err(LoginError::Auth),
                _ => Ok(LoginStatus::Pending),
            },
            Phase::Restart => {
                if st.kind != Kind::Features {
                    return Ok(LoginStatus::Pending);
                }
                if !self.header_seen {
                    return Err(LoginError::Unexpected);
                }
                let bytes = st.bytes.ok_or(LoginError::NotCaptured)?;
                if find_element(bytes, "bind").is_none() {
                    return Err(LoginError::Bind);
                }
                self.session_required = match find_element(bytes, "session") {
                    None => false,
                    Some(s) => match s.content {
                        None => true,
                        Some(r) => bytes
                            .get(r)
                            .is_some_and(|c| find_element(c, "optional").is_none()),
                    },
                };
                encode::bind(out, BIND_ID, cfg.resource);
                self.phase = Phase::Bind;
                Ok(LoginStatus::Pending)
            }
            Phase::Bind => {
                if !is_reply(st, BIND_ID) {
                    return Ok(LoginStatus::Pending);
                }
                if st.stanza_type() != StanzaType::Result {
                    return Err(LoginError::Bind);
                }
                let bytes = st.bytes.ok_or(LoginError::NotCaptured)?;
                let jid = child_text(bytes, "jid").ok_or(LoginError::Bind)?;
                if jid.is_empty() || jid.len() > MAX_JID_LEN {
                    return Err(LoginError::Bind);
                }
                self.jid.clear();
                self.jid.extend_from_slice(jid);
                if self.session_required {
                    encode::session(out, SESSION_ID);
                    self.phase = Phase::Session;
                    return Ok(LoginStatus::Pending);
                }
                self.phase = Phase::Ready;
                Ok(LoginStatus::Ready)
            }
            Phase::Session => {
                if !is_reply(st, SESSION_ID) {
                    return Ok(LoginStatus::Pending);
                }
                if st.stanza_type() != StanzaType::Result {
                    return Err(LoginError::Session);
                }
                self.phase = Phase::Ready;
                Ok(LoginStatus::Ready)
            }
        }
    }

    fn send_auth(
        &mut self,
        cfg: &LoginConfig<'_>,
        out: &mut Vec<u8>,
    ) -> Result<LoginStatus, LoginError> {
        match cfg.credentials {
            Credentials::Plain { user, password } => {
                if !self.mech_plain {
                    return Err(LoginError::NoMechanism);
                }
                encode::auth_plain(out, user, password);
            }
            Credentials::Anonymous => {
                if !self.mech_anonymous {
                    return Err(LoginError::NoMechanism);
                }
                encode::auth_anonymous(out);
            }
        }
        self.phase = Phase::Auth;
        Ok(LoginStatus::Pending)
    }
}

/// An iq result or error answering `id`.
fn is_reply(st: &Stanza<'_>, id: &str) -> bool {
    st.kind == Kind::Iq
        && st.id == id.as_bytes()
        && matches!(st.stanza_type(), StanzaType::Result | StanzaType::Error)
}
