//! Fuzz the XMPP stream splitter and the login state machine.
//!
//! Input layout: byte 0 holds flags (bit 7: capture stanzas; bit 6: a 64-byte stanza limit
//! instead of 1 MiB; bit 5: drive the login machine; bit 4: ANONYMOUS instead of PLAIN; bit 3:
//! register first) and, in its low 3 bits, how many of the following bytes are piece lengths;
//! the rest is the byte stream from the "server", fed in pieces of those lengths (cycled; a
//! length of 0 feeds an empty slice), looping over events as the engine does.
//!
//! Checked besides "no panic": the `feed` contract (`None` consumes everything, an event consumes
//! at least one byte and at most the input), that a stanza's length is at most the limit and its
//! captured bytes are exactly `len` long, and that the split stream gives exactly what the same
//! bytes give in one piece: the same events, the same login output and status, the same error.
//! The helpers that look inside captured stanzas run on every captured stanza too.
#![no_main]

use headroom_proto::xmpp::{
    child_text, elements, error_condition, text_len, Credentials, Event, Login, LoginConfig,
    LoginError, Name, SplitError, Splitter, Wait,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<String>,
    login_out: Vec<u8>,
    login: Result<(), LoginError>,
    end: Result<(), SplitError>,
}

fn run<'a>(flags: u8, pieces: impl Iterator<Item = &'a [u8]>) -> Outcome {
    let max = if flags & 0x40 != 0 { 64 } else { 1 << 20 };
    let mut sp = Splitter::with_max_stanza(max);
    sp.set_capture(flags & 0x80 != 0);
    let drive_login = flags & 0x20 != 0;
    let cfg = LoginConfig {
        domain: "localhost",
        credentials: if flags & 0x10 != 0 {
            Credentials::Anonymous
        } else {
            Credentials::Plain {
                user: Name::Indexed("user", 1),
                password: Name::Str("pass1"),
            }
        },
        resource: Some("headroom"),
        register: flags & 0x08 != 0,
    };
    let mut login = Login::new();
    let mut out = Vec::new();
    let mut login_res = Ok(());
    if drive_login {
        login_res = login.start(&cfg, &mut out);
    }
    let mut events = Vec::new();
    for piece in pieces {
        let mut p = piece;
        loop {
            let (n, ev) = match sp.feed(p) {
                Ok(x) => x,
                Err(e) => {
                    return Outcome {
                        events,
                        login_out: out,
                        login: login_res,
                        end: Err(e),
                    }
                }
            };
            let Some(ev) = ev else {
                assert_eq!(n, p.len(), "no event must consume all input");
                break;
            };
            assert!(n >= 1 && n <= p.len(), "event consumed {n} of {}", p.len());
            assert!(ev.len() <= max && !ev.is_empty());
            if let Event::Stanza(st) = &ev {
                if let Some(b) = st.bytes {
                    assert_eq!(b.len(), st.len, "captured bytes are the stanza");
                    let _ = child_text(b, "body");
                    let _ = error_condition(b);
                    let _ = elements(b, "mechanism").count();
                    let _ = text_len(b);
                }
                let _ = st.stanza_type();
                let _ = st.id_u64();
            }
            let _ = Wait::IqReply(1).check(&ev);
            events.push(format!("{ev:?}"));
            if drive_login && login_res.is_ok() && login.in_progress() {
                if let Err(e) = login.on_event(&cfg, &ev, &mut out) {
                    login_res = Err(e);
                }
            }
            p = &p[n..];
            if p.is_empty() {
                break;
            }
        }
    }
    Outcome {
        events,
        login_out: out,
        login: login_res,
        end: Ok(()),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let n_lens = usize::from(flags & 7).min(rest.len());
    let (lens, stream) = rest.split_at(n_lens);

    let one_shot = run(flags, std::iter::once(stream));
    let split = run(
        flags,
        headroom_fuzz::Pieces {
            data: stream,
            lens,
            i: 0,
            done: false,
        },
    );
    assert_eq!(split, one_shot, "split input differs from one-shot");
});
