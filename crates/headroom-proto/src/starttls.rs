//! The plain-text exchanges that come before TLS on protocols that upgrade a connection:
//! XMPP's STARTTLS (RFC 6120 §5), PostgreSQL's SSLRequest and LDAP's StartTLS extended
//! operation (RFC 4511 §4.14). Sans-I/O like every codec here: [`Negotiation::xmpp`] /
//! [`Negotiation::pg`] / [`Negotiation::ldap`] write the first bytes, [`Negotiation::feed`]
//! takes what the server sent and says when TLS may start.
//!
//! Bounds: at most [`MAX_PRE_TLS`] bytes are kept before the answer is found (a server that
//! talks on without offering TLS is an error, not a growing buffer). Bytes after the server's
//! go-ahead are refused: they would be plain text injected ahead of the TLS stream (the
//! "buffer stuffing" of CVE-2021-23222 in libpq).

/// Most bytes kept while waiting for the server's answer.
pub const MAX_PRE_TLS: usize = 16 * 1024;

/// The message id of LDAP's StartTLS request: the connection's first.
const LDAP_START_TLS_ID: i32 = 1;

/// PostgreSQL's SSLRequest: length 8, code 80877103.
pub const PG_SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// What the exchange has come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More bytes from the server are needed.
    NeedMore,
    /// Start the TLS handshake now.
    StartTls,
    /// The server will not speak TLS here (PostgreSQL 'N', XMPP without `<starttls/>` or with
    /// `<failure/>`).
    Refused(&'static str),
}

/// The server's bytes broke the exchange.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NegotiationError(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Pg,
    Ldap,
    XmppFeatures,
    XmppProceed,
    Done,
}

/// One connection's exchange before TLS.
#[derive(Debug)]
pub struct Negotiation {
    stage: Stage,
    buf: Vec<u8>,
}

impl Negotiation {
    /// PostgreSQL: write the SSLRequest.
    pub fn pg(out: &mut Vec<u8>) -> Negotiation {
        out.extend_from_slice(&PG_SSL_REQUEST);
        Negotiation {
            stage: Stage::Pg,
            buf: Vec::new(),
        }
    }

    /// LDAP: the StartTLS ExtendedRequest (message id 1, the connection's first).
    pub fn ldap(out: &mut Vec<u8>) -> Negotiation {
        crate::ldap::start_tls(out, LDAP_START_TLS_ID);
        Negotiation {
            stage: Stage::Ldap,
            buf: Vec::new(),
        }
    }

    /// XMPP: open the stream to `domain`; `<starttls/>` follows once the server offers it.
    pub fn xmpp(domain: &str, out: &mut Vec<u8>) -> Negotiation {
        out.extend_from_slice(b"<?xml version='1.0'?><stream:stream to='");
        crate::xmpp::push_escaped(out, domain.as_bytes());
        out.extend_from_slice(
            b"' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' \
              version='1.0'>",
        );
        Negotiation {
            stage: Stage::XmppFeatures,
            buf: Vec::new(),
        }
    }

    /// Take the server's bytes (all of them); what to send goes to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<Progress, NegotiationError> {
        match self.stage {
            Stage::Done => Err(NegotiationError("bytes after the go-ahead for TLS")),
            Stage::Pg => match input {
                [] => Ok(Progress::NeedMore),
                [b'S'] => {
                    self.stage = Stage::Done;
                    Ok(Progress::StartTls)
                }
                [b'N'] => {
                    self.stage = Stage::Done;
                    Ok(Progress::Refused(
                        "the PostgreSQL server does not accept SSL",
                    ))
                }
                [b'S' | b'N', ..] => Err(NegotiationError(
                    "the PostgreSQL server sent bytes after its answer to SSLRequest",
                )),
                // 'E': an ErrorResponse (a server too old for SSLRequest), or anything else.
                _ => Err(NegotiationError(
                    "the PostgreSQL server answered SSLRequest with neither 'S' nor 'N'",
                )),
            },
            Stage::Ldap => {
                if self.buf.len() + input.len() > MAX_PRE_TLS {
                    return Err(NegotiationError(
                        "the LDAP server sent more than 16 KiB before answering StartTLS",
                    ));
                }
                self.buf.extend_from_slice(input);
                self.ldap_progress()
            }
            Stage::XmppFeatures | Stage::XmppProceed => {
                if self.buf.len() + input.len() > MAX_PRE_TLS {
                    return Err(NegotiationError(
                        "the XMPP server sent more than 16 KiB before answering STARTTLS",
                    ));
                }
                self.buf.extend_from_slice(input);
                self.xmpp_progress(out)
            }
        }
    }

    /// The answer to StartTLS: one ExtendedResponse to id 1 (OpenLDAP sends it without a
    /// responseName), `success` or not, and nothing after it.
    fn ldap_progress(&mut self) -> Result<Progress, NegotiationError> {
        use crate::ldap::{Decoder, Op, ResultCode};
        // The whole answer is kept (bounded above) and decoded afresh: one small message.
        let mut d = Decoder::new();
        let (used, resp) = d
            .decode(&self.buf)
            .map_err(|_| NegotiationError("the LDAP server's answer to StartTLS is not LDAP"))?;
        let Some(r) = resp else {
            return Ok(Progress::NeedMore);
        };
        self.stage = Stage::Done;
        if r.op == Op::Notice {
            // A notice of disconnection (RFC 4511 §4.4.1): the server is going away.
            return Ok(Progress::Refused(
                "the LDAP server sent a notice of disconnection",
            ));
        }
        if r.op != Op::ExtendedResponse || r.id != LDAP_START_TLS_ID {
            return Err(NegotiationError(
                "the LDAP server answered StartTLS with another response",
            ));
        }
        if r.result != Some(ResultCode::SUCCESS) {
            return Ok(Progress::Refused("the LDAP server refused StartTLS"));
        }
        if used < self.buf.len() {
            return Err(NegotiationError(
                "the LDAP server sent bytes after its answer to StartTLS",
            ));
        }
        Ok(Progress::StartTls)
    }

    fn xmpp_progress(&mut self, out: &mut Vec<u8>) -> Result<Progress, NegotiationError> {
        let b = &self.buf[..];
        if find(b, b"<stream:error").is_some() {
            self.stage = Stage::Done;
            return Ok(Progress::Refused("the XMPP server sent a stream error"));
        }
        if self.stage == Stage::XmppFeatures {
            let end = find(b, b"</stream:features>").or_else(|| {
                // An empty features element: `<stream:features/>`.
                find(b, b"<stream:features/>")
            });
            let Some(end) = end else {
                return Ok(Progress::NeedMore);
            };
            if find(&b[..end], b"<starttls").is_none() {
                self.stage = Stage::Done;
                return Ok(Progress::Refused("the XMPP server does not offer STARTTLS"));
            }
            out.extend_from_slice(b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>");
            self.buf.clear();
            self.stage = Stage::XmppProceed;
            return Ok(Progress::NeedMore);
        }
        if let Some(at) = find(b, b"<proceed") {
            let Some(close) = b[at..].iter().position(|&c| c == b'>') else {
                return Ok(Progress::NeedMore);
            };
            let mut end = at + close + 1;
            if b[at + close - 1] != b'/' {
                // `<proceed ...></proceed>`
                match find(&b[end..], b"</proceed>") {
                    Some(i) => end += i + b"</proceed>".len(),
                    None => return Ok(Progress::NeedMore),
                }
            }
            if b[end..].iter().any(|c| !c.is_ascii_whitespace()) {
                return Err(NegotiationError(
                    "the XMPP server sent bytes after <proceed/>",
                ));
            }
            self.stage = Stage::Done;
            self.buf = Vec::new();
            return Ok(Progress::StartTls);
        }
        if find(b, b"<failure").is_some() {
            self.stage = Stage::Done;
            return Ok(Progress::Refused("the XMPP server refused STARTTLS"));
        }
        Ok(Progress::NeedMore)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_answers() {
        let mut out = Vec::new();
        let mut n = Negotiation::pg(&mut out);
        assert_eq!(out, PG_SSL_REQUEST);
        assert_eq!(n.feed(b"", &mut out), Ok(Progress::NeedMore));
        assert_eq!(n.feed(b"S", &mut out), Ok(Progress::StartTls));
        assert!(n.feed(b"x", &mut out).is_err());
        let mut n = Negotiation::pg(&mut out);
        assert!(matches!(n.feed(b"N", &mut out), Ok(Progress::Refused(_))));
        let mut n = Negotiation::pg(&mut out);
        assert!(n.feed(b"Sinjected", &mut out).is_err(), "buffer stuffing");
        let mut n = Negotiation::pg(&mut out);
        assert!(n.feed(b"E\0\0\0\x10", &mut out).is_err());
    }

    /// An ExtendedResponse to `id` with `code`, no name: as OpenLDAP answers StartTLS.
    fn ext_response(id: u8, code: u8) -> Vec<u8> {
        vec![
            0x30, 0x0c, 0x02, 0x01, id, 0x78, 0x07, 0x0a, 0x01, code, 0x04, 0x00, 0x04, 0x00,
        ]
    }

    #[test]
    fn ldap_start_tls_answers() {
        let mut out = Vec::new();
        let mut n = Negotiation::ldap(&mut out);
        // LDAPMessage { 1, ExtendedRequest { [0] "1.3.6.1.4.1.1466.20037" } }
        assert_eq!(&out[..5], &[0x30, 0x1d, 0x02, 0x01, 0x01]);
        assert!(out.ends_with(b"1.3.6.1.4.1.1466.20037"));
        out.clear();
        let ok = ext_response(1, 0);
        for (i, c) in ok[..ok.len() - 1].chunks(3).enumerate() {
            assert_eq!(n.feed(c, &mut out), Ok(Progress::NeedMore), "piece {i}");
        }
        assert_eq!(
            n.feed(&ok[ok.len() - 1..], &mut out),
            Ok(Progress::StartTls)
        );
        assert!(out.is_empty());
        assert!(n.feed(b"x", &mut out).is_err(), "bytes after the go-ahead");

        // Refused (unavailable, 52), a notice of disconnection: refusals.
        let mut n = Negotiation::ldap(&mut out);
        assert!(matches!(
            n.feed(&ext_response(1, 52), &mut out),
            Ok(Progress::Refused(_))
        ));
        let mut n = Negotiation::ldap(&mut out);
        let mut notice = ext_response(0, 52);
        notice[4] = 0;
        assert!(matches!(
            n.feed(&notice, &mut out),
            Ok(Progress::Refused(_))
        ));
        // Buffer stuffing, another id, another op, not BER, too much: errors.
        let mut n = Negotiation::ldap(&mut out);
        let mut stuffed = ext_response(1, 0);
        stuffed.extend_from_slice(&ext_response(2, 0));
        assert!(n.feed(&stuffed, &mut out).is_err(), "buffer stuffing");
        let mut n = Negotiation::ldap(&mut out);
        assert!(n.feed(&ext_response(7, 0), &mut out).is_err());
        let mut n = Negotiation::ldap(&mut out);
        let mut bind = ext_response(1, 0);
        bind[5] = 0x61; // BindResponse
        assert!(n.feed(&bind, &mut out).is_err());
        let mut n = Negotiation::ldap(&mut out);
        assert!(n.feed(b"HTTP/1.1 400 Bad Request\r\n", &mut out).is_err());
        let mut n = Negotiation::ldap(&mut out);
        // A message that announces 64 KiB: more than is kept before the answer.
        let mut big = vec![0x30, 0x83, 0x01, 0x00, 0x00];
        let mut r = Ok(Progress::NeedMore);
        for _ in 0..20 {
            r = n.feed(&big, &mut out);
            if r.is_err() {
                break;
            }
            big = vec![0; 1024];
        }
        assert!(r.is_err(), "{r:?}");
    }

    #[test]
    fn xmpp_starttls_in_pieces() {
        let mut out = Vec::new();
        let mut n = Negotiation::xmpp("example.com", &mut out);
        assert!(String::from_utf8_lossy(&out).contains("to='example.com'"));
        out.clear();
        let server = b"<?xml version='1.0'?><stream:stream from='example.com' id='1' \
            xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>\
            <stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>\
            <mechanisms/></stream:features>";
        for (i, c) in server.chunks(7).enumerate() {
            let p = n.feed(c, &mut out).unwrap();
            assert_eq!(p, Progress::NeedMore, "chunk {i}");
        }
        assert_eq!(
            out,
            b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>".to_vec()
        );
        assert_eq!(
            n.feed(
                b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'",
                &mut out
            ),
            Ok(Progress::NeedMore)
        );
        assert_eq!(n.feed(b"/>", &mut out), Ok(Progress::StartTls));
    }

    #[test]
    fn xmpp_refusals_and_bounds() {
        let mut out = Vec::new();
        let mut n = Negotiation::xmpp("d", &mut out);
        let p = n.feed(
            b"<stream:stream><stream:features><mechanisms/></stream:features>",
            &mut out,
        );
        assert!(matches!(p, Ok(Progress::Refused(_))));
        let mut n = Negotiation::xmpp("d", &mut out);
        assert!(matches!(
            n.feed(b"<stream:error><host-unknown/></stream:error>", &mut out),
            Ok(Progress::Refused(_))
        ));
        let mut n = Negotiation::xmpp("d", &mut out);
        let junk = vec![b'a'; 4096];
        let mut r = Ok(Progress::NeedMore);
        for _ in 0..5 {
            r = n.feed(&junk, &mut out);
            if r.is_err() {
                break;
            }
        }
        assert!(r.is_err(), "more than 16 KiB without an answer is refused");
        let mut n = Negotiation::xmpp("d", &mut out);
        n.feed(b"<stream:features><starttls/></stream:features>", &mut out)
            .unwrap();
        assert!(n.feed(b"<proceed/><injected/>", &mut out).is_err());
    }
}
