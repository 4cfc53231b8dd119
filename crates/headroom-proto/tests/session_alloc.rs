//! The hot-path promise of the per-user HTTP state (issue 16): once warm, a user's round trip
//! — decode a response while capturing its `Set-Cookie`, `Location` and `WWW-Authenticate`,
//! store the cookies, resolve the redirect, answer the Digest challenge, write the next
//! request's `Cookie` and `Authorization` headers — allocates nothing. A counting global
//! allocator (per thread, so the test harness does not disturb it) watches 10,000 rounds.

use headroom_proto::auth::{write_basic, DigestState};
use headroom_proto::cookie::{Jar, Stored};
use headroom_proto::http1::{Decoded, HeaderId, HeaderSet, ResponseDecoder, DEFAULT_CAPTURE_BYTES};
use headroom_proto::redirect::{resolve, Base, Scheme, Target};

use headroom_testkit::thread_allocs as allocs;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

/// A login-ish response: a session cookie refreshed every time, a cookie deleted and one
/// re-created (so buffers go to the spare list and come back), a redirect and a challenge.
const RESPONSE: &[u8] = b"HTTP/1.1 302 Found\r\n\
Set-Cookie: session=0123456789abcdef0123456789abcdef; Path=/; HttpOnly; SameSite=Lax\r\n\
Set-Cookie: flash=; Max-Age=0; Path=/app\r\n\
Set-Cookie: flash=hello; Path=/app\r\n\
Set-Cookie: prefs=dark; Domain=example.com; Path=/; Expires=Wed, 09 Jun 2100 10:18:14 GMT\r\n\
Location: ../app/./home?tab=1#top\r\n\
WWW-Authenticate: Digest realm=\"api@example.com\", qop=\"auth\", algorithm=SHA-256, nonce=\"7ypf/xlj9XXwfDPEoM4URrv\", opaque=\"FQhe\"\r\n\
Content-Length: 5\r\n\r\nmoved";

#[test]
fn a_warm_users_round_trip_does_not_allocate() {
    let mut dec = ResponseDecoder::new();
    dec.set_capture(HeaderSet::ALL, DEFAULT_CAPTURE_BYTES);
    let mut jar = Jar::new();
    let mut digest = DigestState::new();
    let mut target = Target::default();
    let mut out = Vec::with_capacity(4096);
    let base = Base {
        scheme: Scheme::Https,
        host: "www.example.com",
        port: 443,
        target: "/login/form?next=/",
    };
    let mut written = 0usize;
    let mut round = |now: u64| {
        // Whole, then split inside the head (the decoder's slow path).
        for cut in [RESPONSE.len(), 60] {
            let (a, b) = RESPONSE.split_at(cut);
            for piece in [a, b] {
                let mut p = piece;
                while let Ok((n, Decoded::Complete(meta))) = dec.decode(p) {
                    assert_eq!(meta.status, 302);
                    for (id, value) in dec.captured() {
                        match id {
                            HeaderId::SetCookie => {
                                let stored = jar.set_cookie(value, base.host, base.target, now);
                                assert!(matches!(
                                    stored,
                                    Ok(Stored::Added
                                        | Stored::Replaced
                                        | Stored::Deleted
                                        | Stored::Expired)
                                ));
                            }
                            HeaderId::Location => resolve(&base, value, &mut target).unwrap(),
                            HeaderId::WwwAuthenticate => {
                                digest.take_challenge_value(value).unwrap();
                            }
                            HeaderId::ContentEncoding => {}
                        }
                    }
                    assert_eq!(dec.captured_dropped(), 0);
                    p = &p[n..];
                }
            }
        }
        out.clear();
        jar.write_header(&target.host, &target.target, true, now, &mut out);
        digest
            .write_header(
                "Mufasa",
                "Circle of Life",
                "GET",
                &target.target,
                "f2/wE4q74E6z",
                &mut out,
            )
            .unwrap();
        write_basic("Aladdin", "open sesame", &mut out);
        written += out.len();
    };
    for i in 0..100 {
        round(1_700_000_000 + i);
    }
    let before = allocs();
    for i in 0..10_000 {
        round(1_700_000_100 + i);
    }
    let during = allocs() - before;
    assert_eq!(during, 0, "allocations in 10,000 warm rounds");
    assert_eq!(target.target, "/app/home?tab=1");
    assert_eq!(jar.len(), 3);
    let mut check = Vec::new();
    jar.write_header(
        "www.example.com",
        "/app/home",
        true,
        1_700_010_200,
        &mut check,
    );
    assert_eq!(
        check,
        b"Cookie: flash=hello; session=0123456789abcdef0123456789abcdef; prefs=dark\r\n"
    );
    assert!(written > 0);
    // The counter does see allocations on this thread.
    let v = std::hint::black_box(vec![1u8; 16]);
    assert!(allocs() > before && v.len() == 16);
}

/// Issue 32: an OAuth 1.0 signature per request (query and form parameters decoded, encoded,
/// sorted, the base string built and HMAC-SHA1'd, the header written) allocates nothing once
/// the user's signer has grown.
#[test]
fn a_warm_oauth_signer_does_not_allocate() {
    use headroom_proto::oauth::{Credentials, Method, Signer};
    let cred = Credentials {
        consumer_key: "key",
        consumer_secret: "secret",
        token: "tok",
        token_secret: "ts",
        method: Method::HmacSha1,
        version: true,
    };
    let mut s = Signer::new();
    let mut out = Vec::with_capacity(1024);
    let mut sign = |ts: u64| {
        out.clear();
        s.write_value(
            "POST",
            "http://127.0.0.1:8080/token",
            "a=1&b=x%20y&c+d=%7e",
            Some(b"e=3&f&g=h+i"),
            &cred,
            "abcdefghijklmnop",
            ts,
            &mut out,
        );
    };
    sign(1);
    let before = allocs();
    for ts in 0..10_000 {
        sign(1_700_000_000 + ts);
    }
    assert_eq!(
        allocs() - before,
        0,
        "allocations in 10,000 warm signatures"
    );
}
