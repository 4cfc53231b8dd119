//! Published vectors, not this code's own output: RFC 5849 §3.4.1.1's base string, OAuth Core
//! 1.0 Appendix A.5's (the photos example, also RFC 5849's) and Twitter's documented request
//! ("Creating a signature": a form body with `+`, `,` and `!`, over https).

use super::*;

#[allow(clippy::too_many_arguments)]
fn value(
    s: &mut Signer,
    method: &str,
    uri: &str,
    query: &str,
    form: Option<&str>,
    cred: &Credentials<'_>,
    nonce: &str,
    ts: u64,
) -> String {
    let mut out = Vec::new();
    s.write_value(
        method,
        uri,
        query,
        form.map(str::as_bytes),
        cred,
        nonce,
        ts,
        &mut out,
    );
    String::from_utf8(out).unwrap()
}

/// The `oauth_signature` of a header value, still encoded.
fn signature_of(v: &str) -> &str {
    let i = v.find("oauth_signature=\"").unwrap() + "oauth_signature=\"".len();
    &v[i..i + v[i..].find('"').unwrap()]
}

#[test]
fn rfc_5849_section_3_4_1_1_base_string() {
    // POST /request?b5=%3D%253D&a3=a&c%40=&a2=r%20b, body c2&a3=2+q; no oauth_version.
    let cred = Credentials {
        consumer_key: "9djdj82h48djs9d2",
        consumer_secret: "j49sk3j29djd",
        token: "kkk9d7dh3k39sjv7",
        token_secret: "dh893hdasih9",
        method: Method::HmacSha1,
        version: false,
    };
    let mut s = Signer::new();
    let mut uri = String::new();
    write_base_uri(false, "Example.com:80", "/request", &mut uri);
    assert_eq!(uri, "http://example.com/request");
    value(
        &mut s,
        "POST",
        &uri,
        "b5=%3D%253D&a3=a&c%40=&a2=r%20b",
        Some("c2&a3=2+q"),
        &cred,
        "7d8f3e4a",
        137131201,
    );
    assert_eq!(
        std::str::from_utf8(s.base_string()).unwrap(),
        "POST&http%3A%2F%2Fexample.com%2Frequest&a2%3Dr%2520b%26a3%3D2%2520q\
         %26a3%3Da%26b5%3D%253D%25253D%26c%2540%3D%26c2%3D%26oauth_consumer_\
         key%3D9djdj82h48djs9d2%26oauth_nonce%3D7d8f3e4a%26oauth_signature_m\
         ethod%3DHMAC-SHA1%26oauth_timestamp%3D137131201%26oauth_token%3Dkkk\
         9d7dh3k39sjv7"
    );
}

#[test]
fn oauth_core_appendix_a5_photos_signature() {
    let cred = Credentials {
        consumer_key: "dpf43f3p2l4k3l03",
        consumer_secret: "kd94hf93k423kf44",
        token: "nnch734d00sl2jdk",
        token_secret: "pfkkdhi9sl3r4s00",
        method: Method::HmacSha1,
        version: true,
    };
    let mut s = Signer::new();
    let mut uri = String::new();
    write_base_uri(false, "photos.example.net", "/photos", &mut uri);
    let v = value(
        &mut s,
        "GET",
        &uri,
        "file=vacation.jpg&size=original",
        None,
        &cred,
        "kllo9940pd9333jh",
        1191242096,
    );
    assert_eq!(
        std::str::from_utf8(s.base_string()).unwrap(),
        "GET&http%3A%2F%2Fphotos.example.net%2Fphotos&file%3Dvacation.jpg%26oauth_consumer_key%3Ddpf43f3p2l4k3l03%26oauth_nonce%3Dkllo9940pd9333jh%26oauth_signature_method%3DHMAC-SHA1%26oauth_timestamp%3D1191242096%26oauth_token%3Dnnch734d00sl2jdk%26oauth_version%3D1.0%26size%3Doriginal"
    );
    // tR3+Ty81lMeYAr/Fid0kMTYa/WM=, encoded in the header.
    assert_eq!(signature_of(&v), "tR3%2BTy81lMeYAr%2FFid0kMTYa%2FWM%3D");
    assert_eq!(
        v,
        "OAuth oauth_consumer_key=\"dpf43f3p2l4k3l03\", oauth_nonce=\"kllo9940pd9333jh\", \
         oauth_signature=\"tR3%2BTy81lMeYAr%2FFid0kMTYa%2FWM%3D\", \
         oauth_signature_method=\"HMAC-SHA1\", oauth_timestamp=\"1191242096\", \
         oauth_token=\"nnch734d00sl2jdk\", oauth_version=\"1.0\""
    );
}

#[test]
fn twitter_documented_signature_with_a_form_body_over_https() {
    let cred = Credentials {
        consumer_key: "xvz1evFS4wEEPTGEFPHBog",
        consumer_secret: "kAcSOqF21Fu85e7zjz7ZN2U4ZRhfV3WpwPAoE3Z7kBw",
        token: "370773112-GmHxMAgYyLbNEtIKZeRNFsMKPR9EyMZeS9weJAEb",
        token_secret: "LswwdoUaIvS8ltyTt5jkRh4J50vUPVVHtR2YPi5kE",
        method: Method::HmacSha1,
        version: true,
    };
    let mut s = Signer::new();
    let mut uri = String::new();
    write_base_uri(
        true,
        "api.twitter.com:443",
        "/1.1/statuses/update.json",
        &mut uri,
    );
    assert_eq!(uri, "https://api.twitter.com/1.1/statuses/update.json");
    let v = value(
        &mut s,
        "POST",
        &uri,
        "include_entities=true",
        Some("status=Hello%20Ladies%20%2b%20Gentlemen%2c%20a%20signed%20OAuth%20request%21"),
        &cred,
        "kYjzVBB8Y0ZFabxSWbWovY3uYSQ2pTgmZeNu2VS4cg",
        1318622958,
    );
    // hCtSmYh+iHYCEqBWrE7C7hYmtUk=
    assert_eq!(signature_of(&v), "hCtSmYh%2BiHYCEqBWrE7C7hYmtUk%3D");
}

#[test]
fn plaintext_sends_the_key_encoded() {
    // RFC 5849 §3.4.4: the secrets joined by '&', which the header then encodes as %26.
    let cred = Credentials {
        consumer_key: "k",
        consumer_secret: "djr9rjt0jd78jf88",
        token: "",
        token_secret: "jjd999tj88uiths3",
        method: Method::Plaintext,
        version: false,
    };
    let v = value(
        &mut Signer::new(),
        "GET",
        "http://h/",
        "",
        None,
        &cred,
        "n",
        1,
    );
    assert_eq!(signature_of(&v), "djr9rjt0jd78jf88%26jjd999tj88uiths3");
    assert!(v.contains("oauth_signature_method=\"PLAINTEXT\""));
    assert!(!v.contains("oauth_token"), "no token, no oauth_token: {v}");
}

#[test]
fn section_3_6_encoding_is_strict() {
    let mut out = Vec::new();
    encode_into("AZaz09-._~ +*/%é!".as_bytes(), &mut out);
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        "AZaz09-._~%20%2B%2A%2F%25%C3%A9%21"
    );
    // A '%' not followed by two hex digits is taken as itself; '+' is a space.
    let mut d = Vec::new();
    form_decode(b"a%2x%4", &mut d);
    assert_eq!(d, b"a%2x%4");
    form_decode(b"r+b%20c%7e", &mut d);
    assert_eq!(d, b"r b c~");
}

#[test]
fn base_uris_keep_other_ports_and_ipv6_literals() {
    let uri = |https, a: &str, p: &str| {
        let mut s = String::new();
        write_base_uri(https, a, p, &mut s);
        s
    };
    assert_eq!(
        uri(false, "127.0.0.1:8080", "/a"),
        "http://127.0.0.1:8080/a"
    );
    assert_eq!(uri(true, "H:80", "/"), "https://h:80/");
    assert_eq!(uri(false, "[::1]:80", "/x"), "http://[::1]/x");
    assert_eq!(uri(false, "[::1]", ""), "http://[::1]/");
}
