//! Fuzz the `WWW-Authenticate` Digest challenge parser and the `Authorization` writer.
//!
//! Input: one `WWW-Authenticate` field value. Checked besides "no panic": a parsed challenge
//! has a realm and a nonce within the bound; the state that takes it writes one header line
//! whose only CR LF is its end (nothing from the challenge can inject a line), with a nonce
//! count that starts at 1 and counts up; a value that fails leaves the state unready.
#![no_main]

use headroom_proto::auth::{parse_digest_challenge, DigestState, MAX_PARAM_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut st = DigestState::new();
    match parse_digest_challenge(data) {
        Ok(c) => {
            assert!(c.realm.len() <= MAX_PARAM_LEN && c.nonce.len() <= MAX_PARAM_LEN);
            st.take_challenge(&c);
        }
        Err(e) => {
            assert!(!e.kind().is_empty());
            assert!(st.take_challenge_value(data).is_err());
            assert!(!st.is_ready());
            return;
        }
    }
    let mut out = Vec::new();
    for nc in 1..=3u32 {
        assert_eq!(st.next_nc(), nc);
        out.clear();
        st.write_header(
            "Mufasa",
            "Circle of Life",
            "GET",
            "/dir/index.html",
            "0a4f113b",
            &mut out,
        )
        .expect("a taken challenge can be answered");
        assert!(out.starts_with(b"Authorization: Digest ") && out.ends_with(b"\r\n"));
        let line = &out[..out.len() - 2];
        assert!(!line.contains(&b'\r') && !line.contains(&b'\n'));
    }
});
