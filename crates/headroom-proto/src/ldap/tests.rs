//! Unit tests of the LDAP codec: encoders byte for byte (against RFC 4511's ASN.1, by hand, and
//! against what OpenLDAP 2.5's own clients sent: `testdata/*.client.bin`), filters against
//! RFC 4515's examples and OpenLDAP's encoding of them, and the decoder on what slapd 2.5 sent
//! (`testdata/*.server.bin`, recorded by `testdata/record.sh`) and on hand-made messages, split
//! every way. The central property: a stream gives the same responses however it is split.

use super::ber::{self, Reader};
use super::*;
use crate::test_rng::Rng;
use headroom_testkit::thread_allocs as allocs;

const SEARCH_SUB_C: &[u8] = include_bytes!("testdata/search_sub.client.bin");
const SEARCH_SUB_S: &[u8] = include_bytes!("testdata/search_sub.server.bin");
const SEARCH_FIELDS_C: &[u8] = include_bytes!("testdata/search_fields.client.bin");
const SEARCH_FIELDS_S: &[u8] = include_bytes!("testdata/search_fields.server.bin");
const SIZELIMIT_C: &[u8] = include_bytes!("testdata/search_sizelimit.client.bin");
const SIZELIMIT_S: &[u8] = include_bytes!("testdata/search_sizelimit.server.bin");
const BIND_WRONG_C: &[u8] = include_bytes!("testdata/bind_wrong.client.bin");
const BIND_WRONG_S: &[u8] = include_bytes!("testdata/bind_wrong.server.bin");
const FILTERS_C: &[u8] = include_bytes!("testdata/filters.client.bin");
const FILTERS_S: &[u8] = include_bytes!("testdata/filters.server.bin");
const WRITE_C: &[u8] = include_bytes!("testdata/write.client.bin");
const WRITE_S: &[u8] = include_bytes!("testdata/write.server.bin");
const COMPARE_TRUE_C: &[u8] = include_bytes!("testdata/compare_true.client.bin");
const COMPARE_TRUE_S: &[u8] = include_bytes!("testdata/compare_true.server.bin");
const COMPARE_FALSE_S: &[u8] = include_bytes!("testdata/compare_false.server.bin");
const WHOAMI_C: &[u8] = include_bytes!("testdata/whoami.client.bin");
const WHOAMI_S: &[u8] = include_bytes!("testdata/whoami.server.bin");
const STARTTLS_C: &[u8] = include_bytes!("testdata/starttls.client.bin");
const STARTTLS_S: &[u8] = include_bytes!("testdata/starttls.server.bin");

const ADMIN: &str = "cn=admin,dc=headroom,dc=test";
const PEOPLE: &str = "ou=people,dc=headroom,dc=test";
const PROBE: &str = "uid=probe,ou=people,dc=headroom,dc=test";

/// The LDAPMessages of a recorded stream, each whole (tag and length included); stops at the
/// first bytes that are not one (the TLS handshake after StartTLS).
fn messages(stream: &[u8]) -> Vec<&[u8]> {
    let mut r = Reader::new(stream);
    let mut out = Vec::new();
    while r.peek_tag() == Some(ber::SEQUENCE) {
        let before = r.rest();
        if r.tlv().is_err() {
            break;
        }
        out.push(&before[..before.len() - r.rest().len()]);
    }
    out
}

/// The Filter element (whole) of a SearchRequest message.
fn filter_of(search_message: &[u8]) -> &[u8] {
    let mut m = Reader::new(Reader::new(search_message).expect(0x30).unwrap());
    m.expect(ber::INTEGER).unwrap();
    let mut op = Reader::new(m.expect(0x63).unwrap());
    for tag in [0x04, 0x0a, 0x0a, 0x02, 0x02, 0x01] {
        op.expect(tag).unwrap();
    }
    let before = op.rest();
    op.tlv().unwrap();
    &before[..before.len() - op.rest().len()]
}

fn enc(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = b"keep".to_vec(); // encoders append
    f(&mut out);
    assert_eq!(&out[..4], b"keep");
    out.split_off(4)
}

fn filter_ber(text: &str) -> Vec<u8> {
    let f = Filter::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let mut out = Vec::new();
    encode_filter(&mut out, text).unwrap();
    assert_eq!(out, f.as_ber());
    out
}

// ---- encoders ----

#[test]
fn encoders_write_rfc4511_bytes() {
    // BindRequest, simple.
    assert_eq!(
        enc(|o| bind_simple(o, 1, "cn=a", "pw")),
        [
            0x30, 0x12, // LDAPMessage SEQUENCE, 18 bytes
            0x02, 0x01, 0x01, // messageID INTEGER 1
            0x60, 0x0d, // [APPLICATION 0] BindRequest, 13 bytes
            0x02, 0x01, 0x03, // version INTEGER 3
            0x04, 0x04, b'c', b'n', b'=', b'a', // name LDAPDN
            0x80, 0x02, b'p', b'w', // authentication: simple [0] OCTET STRING
        ]
    );
    // An anonymous bind: empty name and password.
    assert_eq!(
        enc(|o| bind_simple(o, 1, "", "")),
        [0x30, 0x0c, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00]
    );
    // UnbindRequest: [APPLICATION 2] NULL.
    assert_eq!(
        enc(|o| unbind(o, 3)),
        [
            0x30, 0x05, // LDAPMessage
            0x02, 0x01, 0x03, // messageID 3
            0x42, 0x00, // [APPLICATION 2] NULL, primitive, empty
        ]
    );
    // DelRequest: [APPLICATION 10] LDAPDN, primitive.
    assert_eq!(
        enc(|o| delete(o, 200, "o=x")),
        [
            0x30, 0x09, // LDAPMessage
            0x02, 0x02, 0x00, 0xc8, // messageID 200 (a leading 0: 0xc8 alone is negative)
            0x4a, 0x03, b'o', b'=', b'x', // [APPLICATION 10] the DN
        ]
    );
    // AbandonRequest: [APPLICATION 16] MessageID, primitive.
    assert_eq!(
        enc(|o| abandon(o, 7, 0x1234)),
        [
            0x30, 0x07, // LDAPMessage
            0x02, 0x01, 0x07, // messageID 7
            0x50, 0x02, 0x12, 0x34, // [APPLICATION 16] the abandoned id, 0x1234
        ]
    );
    // The largest message id.
    assert_eq!(
        enc(|o| unbind(o, i32::MAX)),
        [0x30, 0x08, 0x02, 0x04, 0x7f, 0xff, 0xff, 0xff, 0x42, 0x00]
    );
    // CompareRequest.
    assert_eq!(
        enc(|o| compare(o, 2, "o=x", "sn", "1")),
        [
            0x30, 0x13, // LDAPMessage
            0x02, 0x01, 0x02, // messageID 2
            0x6e, 0x0e, // [APPLICATION 14] CompareRequest
            0x04, 0x03, b'o', b'=', b'x', // entry
            0x30, 0x07, // ava AttributeValueAssertion SEQUENCE
            0x04, 0x02, b's', b'n', // attributeDesc
            0x04, 0x01, b'1', // assertionValue
        ]
    );
    // ModifyDNRequest, with and without newSuperior.
    assert_eq!(
        enc(|o| modify_dn(o, 5, "a=1", "a=2", true, None)),
        [
            0x30, 0x12, // LDAPMessage
            0x02, 0x01, 0x05, // messageID 5
            0x6c, 0x0d, // [APPLICATION 12] ModifyDNRequest
            0x04, 0x03, b'a', b'=', b'1', // entry
            0x04, 0x03, b'a', b'=', b'2', // newrdn
            0x01, 0x01, 0xff, // deleteoldrdn TRUE (0xFF, RFC 4511 5.1)
        ]
    );
    assert_eq!(
        enc(|o| modify_dn(o, 5, "a=1", "a=2", false, Some("o=y"))),
        [
            0x30, 0x17, 0x02, 0x01, 0x05, 0x6c, 0x12, 0x04, 0x03, b'a', b'=', b'1', 0x04, 0x03,
            b'a', b'=', b'2', 0x01, 0x01, 0x00, // deleteoldrdn FALSE
            0x80, 0x03, b'o', b'=', b'y', // newSuperior [0] LDAPDN
        ]
    );
    // ExtendedRequest with a value.
    assert_eq!(
        enc(|o| extended(o, 9, "1.2", Some(b"v"))),
        [
            0x30, 0x0d, // LDAPMessage
            0x02, 0x01, 0x09, // messageID 9
            0x77, 0x08, // [APPLICATION 23] ExtendedRequest
            0x80, 0x03, b'1', b'.', b'2', // requestName [0] LDAPOID
            0x81, 0x01, b'v', // requestValue [1] OCTET STRING
        ]
    );
    // AddRequest: one attribute with two values, one with none (servers refuse it, we send
    // it as asked).
    assert_eq!(
        enc(|o| add(o, 4, "o=x", &[("cn", &["a", "b"]), ("sn", &[])])),
        [
            0x30, 0x22, // LDAPMessage
            0x02, 0x01, 0x04, // messageID 4
            0x68, 0x1d, // [APPLICATION 8] AddRequest
            0x04, 0x03, b'o', b'=', b'x', // entry
            0x30, 0x16, // attributes AttributeList SEQUENCE OF
            0x30, 0x0c, // Attribute SEQUENCE
            0x04, 0x02, b'c', b'n', // type
            0x31, 0x06, // vals SET OF
            0x04, 0x01, b'a', // value
            0x04, 0x01, b'b', // value
            0x30, 0x06, // Attribute SEQUENCE
            0x04, 0x02, b's', b'n', // type
            0x31, 0x00, // vals: empty SET
        ]
    );
    // ModifyRequest: every operation.
    assert_eq!(
        enc(|o| modify(
            o,
            6,
            "o=x",
            &[
                (ModOp::Add, "a", &["1"]),
                (ModOp::Delete, "b", &[]),
                (ModOp::Replace, "c", &["3"]),
                (ModOp::Increment, "d", &["4"]),
            ]
        )),
        [
            0x30, 0x45, // LDAPMessage
            0x02, 0x01, 0x06, // messageID 6
            0x66, 0x40, // [APPLICATION 6] ModifyRequest
            0x04, 0x03, b'o', b'=', b'x', // object
            0x30, 0x39, // changes SEQUENCE OF
            0x30, 0x0d, // change SEQUENCE
            0x0a, 0x01, 0x00, // operation add (0)
            0x30, 0x08, // modification PartialAttribute SEQUENCE
            0x04, 0x01, b'a', // type
            0x31, 0x03, 0x04, 0x01, b'1', // vals SET OF
            0x30, 0x0a, // change
            0x0a, 0x01, 0x01, // delete (1)
            0x30, 0x05, 0x04, 0x01, b'b', 0x31, 0x00, // b, no values: the whole attribute
            0x30, 0x0d, // change
            0x0a, 0x01, 0x02, // replace (2)
            0x30, 0x08, 0x04, 0x01, b'c', 0x31, 0x03, 0x04, 0x01, b'3', //
            0x30, 0x0d, // change
            0x0a, 0x01, 0x03, // increment (3, RFC 4525)
            0x30, 0x08, 0x04, 0x01, b'd', 0x31, 0x03, 0x04, 0x01, b'4', //
        ]
    );
    // SearchRequest, every field away from its default.
    let f = Filter::parse("(a=*)").unwrap();
    let got = enc(|o| {
        search(
            o,
            2,
            &Search {
                base: "o=x",
                scope: Scope::One,
                deref: Deref::FindingBase,
                size_limit: 300,
                time_limit: u32::MAX,
                types_only: true,
                filter: (&f).into(),
                attrs: &["cn", "1.1"],
            },
        )
        .unwrap()
    });
    assert_eq!(
        got,
        [
            0x30, 0x2b, // LDAPMessage
            0x02, 0x01, 0x02, // messageID 2
            0x63, 0x26, // [APPLICATION 3] SearchRequest
            0x04, 0x03, b'o', b'=', b'x', // baseObject
            0x0a, 0x01, 0x01, // scope singleLevel (1)
            0x0a, 0x01, 0x02, // derefAliases derefFindingBaseObj (2)
            0x02, 0x02, 0x01, 0x2c, // sizeLimit 300
            0x02, 0x04, 0x7f, 0xff, 0xff, 0xff, // timeLimit: maxInt (u32::MAX capped)
            0x01, 0x01, 0xff, // typesOnly TRUE
            0x87, 0x01, b'a', // filter: present [7] "a"
            0x30, 0x09, // attributes SEQUENCE OF
            0x04, 0x02, b'c', b'n', // selector
            0x04, 0x03, b'1', b'.', b'1', // selector "1.1": no attributes
        ]
    );
    // The same with the filter as text.
    let text = enc(|o| {
        search(
            o,
            2,
            &Search {
                base: "o=x",
                scope: Scope::One,
                deref: Deref::FindingBase,
                size_limit: 300,
                time_limit: u32::MAX,
                types_only: true,
                filter: "(a=*)".into(),
                attrs: &["cn", "1.1"],
            },
        )
        .unwrap()
    });
    assert_eq!(text, got);
    // The defaults: subtree from the root DSE, (objectClass=*), everything.
    assert_eq!(
        enc(|o| search(o, 1, &Search::default()).unwrap()),
        [
            0x30, 0x25, 0x02, 0x01, 0x01, 0x63, 0x20, //
            0x04, 0x00, // baseObject ""
            0x0a, 0x01, 0x02, // wholeSubtree
            0x0a, 0x01, 0x00, // neverDerefAliases
            0x02, 0x01, 0x00, // sizeLimit 0
            0x02, 0x01, 0x00, // timeLimit 0
            0x01, 0x01, 0x00, // typesOnly FALSE
            0x87, 0x0b, b'o', b'b', b'j', b'e', b'c', b't', b'C', b'l', b'a', b's', b's', 0x30,
            0x00, // attributes: none listed, all user attributes
        ]
    );
}

#[test]
fn encoders_match_openldap_clients() {
    // ldapsearch: bind as the root DN, a subtree search with a filter and two attributes,
    // unbind.
    let want = messages(SEARCH_SUB_C);
    assert_eq!(want.len(), 3);
    assert_eq!(enc(|o| bind_simple(o, 1, ADMIN, "headroom")), want[0]);
    let s = Search {
        base: PEOPLE,
        filter: "(&(objectClass=inetOrgPerson)(uid=user1*))".into(),
        attrs: &["cn", "mail"],
        ..Search::default()
    };
    assert_eq!(enc(|o| search(o, 2, &s).unwrap()), want[1]);
    assert_eq!(enc(|o| unbind(o, 3)), want[2]);

    // Every search field away from its default.
    let want = messages(SEARCH_FIELDS_C);
    let s = Search {
        base: PEOPLE,
        scope: Scope::One,
        deref: Deref::Always,
        size_limit: 10,
        time_limit: 7,
        types_only: true,
        filter: "(uid=user7)".into(),
        attrs: &["sn"],
    };
    assert_eq!(enc(|o| search(o, 2, &s).unwrap()), want[1]);
    let want = messages(SIZELIMIT_C);
    let s = Search {
        base: PEOPLE,
        size_limit: 5,
        filter: "(uid=*)".into(),
        attrs: &["1.1"],
        ..Search::default()
    };
    assert_eq!(enc(|o| search(o, 2, &s).unwrap()), want[1]);

    let want = messages(BIND_WRONG_C);
    assert_eq!(
        enc(|o| bind_simple(o, 1, "uid=user1,ou=people,dc=headroom,dc=test", "wrong")),
        want[0]
    );

    // ldapmodify -c: add, add again, modify (replace, add, delete), modrdn, delete twice.
    let want = messages(WRITE_C);
    assert_eq!(want.len(), 8);
    let entry: &[(&str, &[&str])] = &[
        ("objectClass", &["inetOrgPerson"]),
        ("uid", &["probe"]),
        ("cn", &["probe"]),
        ("sn", &["probe"]),
        ("mail", &["probe@headroom.test"]),
    ];
    assert_eq!(enc(|o| add(o, 2, PROBE, entry)), want[1]);
    assert_eq!(enc(|o| add(o, 3, PROBE, entry)), want[2]);
    let changes: &[(ModOp, &str, &[&str])] = &[
        (ModOp::Replace, "mail", &["probe2@headroom.test"]),
        (ModOp::Add, "description", &["one", "two"]),
        (ModOp::Delete, "description", &["one"]),
    ];
    assert_eq!(enc(|o| modify(o, 4, PROBE, changes)), want[3]);
    assert_eq!(
        enc(|o| modify_dn(o, 5, PROBE, "uid=probe2", true, None)),
        want[4]
    );
    let probe2 = "uid=probe2,ou=people,dc=headroom,dc=test";
    assert_eq!(enc(|o| delete(o, 6, probe2)), want[5]);
    assert_eq!(enc(|o| delete(o, 7, probe2)), want[6]);
    assert_eq!(enc(|o| unbind(o, 8)), want[7]);

    let want = messages(COMPARE_TRUE_C);
    assert_eq!(
        enc(|o| compare(o, 2, "uid=user1,ou=people,dc=headroom,dc=test", "sn", "1")),
        want[1]
    );
    let want = messages(WHOAMI_C);
    assert_eq!(enc(|o| who_am_i(o, 2)), want[1]);
    // StartTLS: the first message; then the client's TLS ClientHello.
    let want = messages(STARTTLS_C);
    assert_eq!(enc(|o| start_tls(o, 1)), want[0]);
    assert_eq!(
        STARTTLS_C[want[0].len()..][..2],
        [0x16, 0x03],
        "a TLS record follows"
    );
}

// ---- filters ----

/// The filters of `testdata/record.sh`, in order.
const RECORDED_FILTERS: [&str; 24] = [
    "(cn=Babs Jensen)",
    "(!(cn=Tim Howes))",
    "(&(objectClass=Person)(|(sn=Jensen)(cn=Babs J*)))",
    "(o=univ*of*mich*)",
    "(seeAlso=)",
    "(cn:caseExactMatch:=Fred Flintstone)",
    "(cn:=Betty Rubble)",
    "(sn:dn:2.4.6.8.10:=Barney Rubble)",
    "(o:dn:=Ace Industry)",
    "(:1.2.3:=Wilma Flintstone)",
    "(:DN:2.4.6.8.10:=Dino)",
    "(o=Parens R Us \\28for all your parenthetical needs\\29)",
    "(cn=*\\2A*)",
    "(filename=C:\\5cMyFile)",
    "(bin=\\00\\00\\00\\04)",
    "(sn=Lu\\c4\\8di\\c4\\87)",
    "(1.3.6.1.4.1.1466.0=\\04\\02\\48\\69)",
    "(&(cn=a*b*n)(dc=pablo-desktop))",
    "(cn>=user 9)",
    "(cn<=user 10)",
    "(cn~=user)",
    "(cn=*)",
    "(cn=*user 1)",
    "(cn;lang-en=x)",
];

#[test]
fn filters_encode_as_openldap_does() {
    let searches = messages(FILTERS_C);
    assert_eq!(searches.len(), 1 + RECORDED_FILTERS.len() + 1); // bind, searches, unbind
    for (text, msg) in RECORDED_FILTERS.iter().zip(&searches[1..]) {
        assert_eq!(filter_ber(text), filter_of(msg), "{text}");
    }
}

#[test]
fn rfc4515_examples_by_hand() {
    // equalityMatch [3] { attributeDesc, assertionValue }
    assert_eq!(
        filter_ber("(cn=Babs Jensen)"),
        [
            0xa3, 0x11, // equalityMatch, 17 bytes
            0x04, 0x02, b'c', b'n', // attributeDesc
            0x04, 0x0b, b'B', b'a', b'b', b's', b' ', b'J', b'e', b'n', b's', b'e', b'n',
        ]
    );
    // not [2] Filter
    assert_eq!(
        filter_ber("(!(cn=Tim Howes))"),
        [
            0xa2, 0x11, // not
            0xa3, 0x0f, 0x04, 0x02, b'c', b'n', // equalityMatch cn
            0x04, 0x09, b'T', b'i', b'm', b' ', b'H', b'o', b'w', b'e', b's',
        ]
    );
    // substrings [4] { type, SEQUENCE OF CHOICE { initial [0], any [1], final [2] } }
    assert_eq!(
        filter_ber("(o=univ*of*mich*)"),
        [
            0xa4, 0x15, // substrings
            0x04, 0x01, b'o', // type
            0x30, 0x10, // substrings SEQUENCE
            0x80, 0x04, b'u', b'n', b'i', b'v', // initial
            0x81, 0x02, b'o', b'f', // any
            0x81, 0x04, b'm', b'i', b'c', b'h', // any (no final: the value ends with '*')
        ]
    );
    // Tsung's example after substitution: and [0] SET OF Filter.
    assert_eq!(
        filter_ber("(&(cn=a*b*n)(dc=pablo-desktop))"),
        [
            0xa0, 0x26, // and
            0xa4, 0x0f, 0x04, 0x02, b'c', b'n', 0x30, 0x09, // substrings cn
            0x80, 0x01, b'a', // initial "a"
            0x81, 0x01, b'b', // any "b"
            0x82, 0x01, b'n', // final "n"
            0xa3, 0x13, 0x04, 0x02, b'd', b'c', // equalityMatch dc
            0x04, 0x0d, b'p', b'a', b'b', b'l', b'o', b'-', b'd', b'e', b's', b'k', b't', b'o',
            b'p',
        ]
    );
    // extensibleMatch [9] MatchingRuleAssertion { matchingRule [1], type [2], matchValue [3],
    // dnAttributes [4] }
    assert_eq!(
        filter_ber("(sn:dn:2.4.6.8.10:=Barney Rubble)"),
        [
            0xa9, 0x22, // extensibleMatch
            0x81, 0x0a, b'2', b'.', b'4', b'.', b'6', b'.', b'8', b'.', b'1', b'0', // rule
            0x82, 0x02, b's', b'n', // type
            0x83, 0x0d, b'B', b'a', b'r', b'n', b'e', b'y', b' ', b'R', b'u', b'b', b'b', b'l',
            b'e', // matchValue
            0x84, 0x01, 0xff, // dnAttributes TRUE (FALSE is the default, never sent)
        ]
    );
    // Escapes: \5c is the backslash.
    assert_eq!(
        filter_ber("(filename=C:\\5cMyFile)"),
        [
            0xa3, 0x15, 0x04, 0x08, b'f', b'i', b'l', b'e', b'n', b'a', b'm', b'e', //
            0x04, 0x09, b'C', b':', b'\\', b'M', b'y', b'F', b'i', b'l', b'e',
        ]
    );
    // present [7] AttributeDescription; greaterOrEqual [5]; lessOrEqual [6]; approxMatch [8].
    assert_eq!(filter_ber("(cn=*)"), [0x87, 0x02, b'c', b'n']);
    assert_eq!(
        filter_ber("(n>=1)"),
        [0xa5, 0x06, 0x04, 0x01, b'n', 0x04, 0x01, b'1']
    );
    assert_eq!(
        filter_ber("(n<=1)"),
        [0xa6, 0x06, 0x04, 0x01, b'n', 0x04, 0x01, b'1']
    );
    assert_eq!(
        filter_ber("(n~=1)"),
        [0xa8, 0x06, 0x04, 0x01, b'n', 0x04, 0x01, b'1']
    );
    // or [1], with an initial-only and a final-only substring.
    assert_eq!(
        filter_ber("(|(a=x*)(a=*y))"),
        [
            0xa1, 0x14, // or
            0xa4, 0x08, 0x04, 0x01, b'a', 0x30, 0x03, 0x80, 0x01, b'x', // a=x*: initial
            0xa4, 0x08, 0x04, 0x01, b'a', 0x30, 0x03, 0x82, 0x01, b'y', // a=*y: final
        ]
    );
}

#[test]
fn filter_leniencies_of_openldap() {
    // Spaces around the filter and between members; a bare item; (&) and (|).
    assert_eq!(
        filter_ber("  (& (a=1) (b=2) )  "),
        filter_ber("(&(a=1)(b=2))")
    );
    assert_eq!(filter_ber("(! (a=1) )"), filter_ber("(!(a=1))"));
    assert_eq!(filter_ber("uid=user1"), filter_ber("(uid=user1)"));
    assert_eq!(filter_ber("(&)"), [0xa0, 0x00]);
    assert_eq!(filter_ber("(|)"), [0xa1, 0x00]);
    // A value keeps its spaces, and may hold any UTF-8 and '=' unescaped.
    assert_eq!(
        filter_ber("(cn= a=b é )"),
        [
            0xa3, 0x0e, 0x04, 0x02, b'c', b'n', 0x04, 0x08, b' ', b'a', b'=', b'b', b' ', 0xc3,
            0xa9, b' '
        ]
    );
    // After ":dn", "dn" is a matching rule's name.
    assert_eq!(
        filter_ber("(cn:dn:dn:=a)"),
        [
            0xa9, 0x0e, 0x81, 0x02, b'd', b'n', 0x82, 0x02, b'c', b'n', 0x83, 0x01, b'a', 0x84,
            0x01, 0xff
        ]
    );
    // Upper-case hex escapes, a numeric OID with options.
    assert_eq!(
        filter_ber("(2.5.4.3;binary=\\FF)"),
        [
            0xa3, 0x13, 0x04, 0x0e, b'2', b'.', b'5', b'.', b'4', b'.', b'3', b';', b'b', b'i',
            b'n', b'a', b'r', b'y', 0x04, 0x01, 0xff
        ]
    );
}

#[test]
fn filter_errors_say_what_and_where() {
    use FilterErrorKind::*;
    let cases: &[(&str, usize, FilterErrorKind)] = &[
        ("", 0, Empty),
        ("   ", 3, Empty),
        ("(cn=a", 5, ExpectedClose),
        ("(cn=a))", 6, Trailing),
        ("(cn=a)(cn=b)", 6, Trailing),
        ("(&(cn=a)x)", 8, ExpectedClose),
        ("(!)", 2, ExpectedOpen),
        ("(!(a=1)(b=2))", 7, ExpectedClose),
        ("(=a)", 1, ExpectedAttribute),
        ("()", 1, ExpectedAttribute),
        ("(cn)", 3, ExpectedOperator),
        ("(cn!=a)", 3, ExpectedOperator),
        ("(cn>a)", 3, ExpectedOperator),
        ("(c_n=a)", 2, ExpectedOperator),
        ("(1cn=a)", 1, BadAttribute),
        ("(-cn=a)", 1, BadAttribute),
        ("(cn;=a)", 1, BadAttribute),
        ("(1..2=a)", 1, BadAttribute),
        ("(01.2=a)", 1, BadAttribute),
        ("(cn=a\\2)", 5, BadEscape),
        ("(cn=a\\zz)", 5, BadEscape),
        ("(cn=\\", 4, BadEscape),
        ("(cn=a(b)", 5, Unescaped),
        ("(cn=a\0)", 5, Unescaped),
        ("(cn>=a*)", 6, Unescaped),
        ("(cn~=*)", 5, Unescaped),
        ("(cn:=a*)", 6, Unescaped),
        ("(cn=a**b)", 6, EmptySubstring),
        ("(cn=**)", 5, EmptySubstring),
        ("(cn:1x:=a)", 4, BadMatchingRule),
        ("(cn::=a)", 4, BadMatchingRule),
        ("(cn:1.2:dn:=a)", 8, ExpectedOperator),
        ("(cn:dn=a)", 6, ExpectedOperator),
        ("(:dn:=a)", 1, MissingMatchingRule),
        ("(:=a)", 1, MissingMatchingRule),
        ("(a=1", 4, ExpectedClose),
        ("x", 1, ExpectedOperator),
    ];
    for &(text, pos, kind) in cases {
        let mut out = b"before".to_vec();
        let got = encode_filter(&mut out, text);
        assert_eq!(got, Err(FilterError { pos, kind }), "{text:?}");
        assert_eq!(out, b"before", "{text:?}: nothing appended on error");
        assert_eq!(Filter::parse(text), Err(FilterError { pos, kind }));
    }
    // The message says what and where.
    let e = Filter::parse("(cn=a**b)").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid LDAP filter: empty substring between two '*' at byte 6"
    );
    // A search with a bad filter appends nothing.
    let mut out = b"before".to_vec();
    let s = Search {
        filter: "(cn=a".into(),
        ..Search::default()
    };
    assert_eq!(
        search(&mut out, 1, &s),
        Err(FilterError {
            pos: 5,
            kind: ExpectedClose
        })
    );
    assert_eq!(out, b"before");
}

#[test]
fn filter_bounds_depth_and_length() {
    // Depth: 32 nested filters parse, 33 do not.
    let nest = |depth: usize| "(!".repeat(depth - 1) + "(a=1)" + &")".repeat(depth - 1);
    let ber = filter_ber(&nest(MAX_FILTER_DEPTH));
    assert_eq!(
        ber.iter().filter(|&&b| b == 0xa2).count(),
        MAX_FILTER_DEPTH - 1
    );
    assert_eq!(
        Filter::parse(&nest(MAX_FILTER_DEPTH + 1)),
        Err(FilterError {
            pos: 2 * MAX_FILTER_DEPTH,
            kind: FilterErrorKind::TooDeep
        })
    );
    let and = |depth: usize| "(&".repeat(depth - 1) + "(a=1)" + &")".repeat(depth - 1);
    assert!(Filter::parse(&and(MAX_FILTER_DEPTH)).is_ok());
    assert_eq!(
        Filter::parse(&and(MAX_FILTER_DEPTH + 1)).unwrap_err().kind,
        FilterErrorKind::TooDeep
    );
    // A hostile depth fails fast, without recursing into it.
    assert_eq!(
        Filter::parse(&"(!".repeat(30_000)).unwrap_err().kind,
        FilterErrorKind::TooDeep
    );

    // Length: exactly MAX_FILTER_LEN parses (a long value: 3-octet BER lengths), one more
    // byte does not.
    let long = |len: usize| format!("(cn={})", "x".repeat(len - 5));
    let ber = filter_ber(&long(MAX_FILTER_LEN));
    let value_len = MAX_FILTER_LEN - 5; // 65531 = 0xfffb
    assert_eq!(ber.len(), 5 + 4 + 4 + value_len);
    assert_eq!(
        ber[..13],
        [
            0xa3, 0x83, 0x01, 0x00, 0x03, // equalityMatch, 3 length octets: 4 + 4 + 65531
            0x04, 0x02, b'c', b'n', // attributeDesc
            0x04, 0x82, 0xff, 0xfb, // assertionValue, 2 length octets: 65531
        ]
    );
    assert_eq!(
        Filter::parse(&long(MAX_FILTER_LEN + 1)),
        Err(FilterError {
            pos: MAX_FILTER_LEN,
            kind: FilterErrorKind::TooLong
        })
    );
}

#[test]
fn lengths_are_minimal_and_nested_patching_moves_contents_right() {
    // One attribute value of each size around the length-form boundaries, inside four levels
    // of patched lengths (message, AddRequest, attribute list, attribute, value set): the
    // message must parse back to the same value, and each length be in its minimal form.
    for n in [
        0usize,
        1,
        100,
        127,
        128,
        200,
        255,
        256,
        300,
        65_535,
        65_536,
        70_000,
        1 << 24,
    ] {
        let value = "v".repeat(n);
        let msg = enc(|o| add(o, 1, "o=x", &[("a", &[value.as_str()])]));
        let mut m = Reader::new(Reader::new(&msg).expect(0x30).unwrap());
        m.expect(ber::INTEGER).unwrap();
        let mut op = Reader::new(m.expect(0x68).unwrap());
        assert_eq!(op.expect(0x04).unwrap(), b"o=x");
        let mut list = Reader::new(op.expect(0x30).unwrap());
        let mut attr = Reader::new(list.expect(0x30).unwrap());
        assert_eq!(attr.expect(0x04).unwrap(), b"a");
        let mut vals = Reader::new(attr.expect(0x31).unwrap());
        assert_eq!(vals.expect(0x04).unwrap(), value.as_bytes(), "{n}");
        assert!(vals.is_empty() && attr.is_empty() && list.is_empty() && op.is_empty());
        // The value's own length octets.
        let at = msg.len() - n;
        let want_len_octets: &[u8] = match n {
            0..=127 => &[n as u8][..],
            128..=255 => &[0x81, n as u8],
            256..=65_535 => &[0x82, (n >> 8) as u8, n as u8],
            65_536..=0xff_ffff => &[0x83, (n >> 16) as u8, (n >> 8) as u8, n as u8],
            _ => &[
                0x84,
                (n >> 24) as u8,
                (n >> 16) as u8,
                (n >> 8) as u8,
                n as u8,
            ],
        };
        assert_eq!(&msg[at - want_len_octets.len()..at], want_len_octets, "{n}");
        // The message's length octets are minimal too.
        let total = msg.len() - 2;
        let hdr = match total {
            0..=127 => 2,
            128..=255 => 3,
            256..=65_535 => 4,
            65_536..=0xff_ffff => 5,
            _ => 6,
        };
        assert_eq!(msg.len() - hdr, m_len(&msg), "{n}");
    }

    fn m_len(msg: &[u8]) -> usize {
        match ber::read_len(msg, 1).unwrap() {
            ber::Len::Done { len, .. } => len as usize,
            ber::Len::Need(_) => panic!(),
        }
    }
}

#[test]
fn integers_are_minimal_twos_complement() {
    for (v, want) in [
        (0i64, &[0x00][..]),
        (1, &[0x01]),
        (127, &[0x7f]),
        (128, &[0x00, 0x80]),
        (255, &[0x00, 0xff]),
        (256, &[0x01, 0x00]),
        (-1, &[0xff]),
        (-128, &[0x80]),
        (-129, &[0xff, 0x7f]),
        (i64::from(i32::MAX), &[0x7f, 0xff, 0xff, 0xff]),
        (i64::from(i32::MIN), &[0x80, 0x00, 0x00, 0x00]),
    ] {
        let mut out = Vec::new();
        ber::put_int(&mut out, 0x02, v);
        assert_eq!(out[2..], *want, "{v}");
        assert_eq!(usize::from(out[1]), want.len());
        if let Ok(v32) = i32::try_from(v) {
            assert_eq!(ber::int32(want), Ok(v32));
        }
    }
}

// ---- the decoder ----

/// A response, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    id: i32,
    op: Op,
    result: Option<u32>,
    matched_dn: Vec<u8>,
    diagnostic: Vec<u8>,
    name: Vec<u8>,
    value: Vec<u8>,
    len: u64,
    message: Vec<u8>,
}

impl From<Response<'_>> for Owned {
    fn from(r: Response<'_>) -> Owned {
        Owned {
            id: r.id,
            op: r.op,
            result: r.result.map(|c| c.0),
            matched_dn: r.matched_dn.to_vec(),
            diagnostic: r.diagnostic.to_vec(),
            name: r.name.to_vec(),
            value: r.value.to_vec(),
            len: r.len,
            message: r.message.to_vec(),
        }
    }
}

/// Every response of the stream fed in `pieces`, then how it ended: `Ok(in_progress)` or the
/// error. Checks the decode contract on every call.
fn decode_all<'a>(
    dec: &mut Decoder,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<Owned>, Result<bool, LdapError>) {
    let mut got = Vec::new();
    for piece in pieces {
        let mut p = piece;
        loop {
            match dec.decode(p) {
                Err(e) => {
                    // Sticky, and eof() adds no second error.
                    assert_eq!(dec.decode(b"\x30\x00").map(|(n, _)| n), Err(e));
                    assert_eq!(dec.eof(), Ok(()));
                    return (got, Err(e));
                }
                Ok((n, None)) => {
                    assert_eq!(n, p.len(), "None must consume everything");
                    break;
                }
                Ok((n, Some(r))) => {
                    assert!(n > 0 && n <= p.len(), "consumed {n} of {}", p.len());
                    assert!(r.len >= n as u64);
                    got.push(Owned::from(r));
                    p = &p[n..];
                }
            }
        }
    }
    (got, Ok(dec.in_progress()))
}

fn decode_whole(stream: &[u8]) -> Vec<Owned> {
    let mut dec = Decoder::new();
    let (got, end) = decode_all(&mut dec, [stream]);
    assert_eq!(end, Ok(false), "the stream ends between messages");
    assert_eq!(
        got.iter().map(|r| r.len).sum::<u64>(),
        stream.len() as u64,
        "the responses' lengths add up to the stream"
    );
    got
}

/// (id, op, result code name) of each response.
fn brief(got: &[Owned]) -> Vec<(i32, Op, &'static str)> {
    got.iter()
        .map(|r| (r.id, r.op, r.result.map_or("-", |c| ResultCode(c).name())))
        .collect()
}

fn random_pieces<'a>(rng: &mut Rng, data: &'a [u8], max: usize) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let n = rng.below(max + 1).min(rest.len());
        let (a, b) = rest.split_at(n);
        pieces.push(a);
        rest = b;
    }
    pieces
}

#[test]
fn recorded_search_counts_112_entries() {
    let got = decode_whole(SEARCH_SUB_S);
    assert_eq!(got.len(), 1 + 112 + 1);
    assert_eq!(brief(&got[..1]), [(1, Op::BindResponse, "success")]);
    assert!(got[1..113]
        .iter()
        .all(|r| (r.id, r.op, r.result) == (2, Op::SearchEntry, None) && r.message.is_empty()));
    assert_eq!(brief(&got[113..]), [(2, Op::SearchDone, "success")]);
    assert!(got[113].op.is_final() && !got[1].op.is_final());
    // The first entry is uid=user1's: 95 bytes on the wire (0x30 0x5f + 95 - 2).
    assert_eq!(got[1].len, 0x5f + 2);
    let entry_bytes: u64 = got[1..113].iter().map(|r| r.len).sum();
    assert_eq!(entry_bytes, SEARCH_SUB_S.len() as u64 - 14 - 14);

    let got = decode_whole(SEARCH_FIELDS_S);
    assert_eq!(
        brief(&got),
        [
            (1, Op::BindResponse, "success"),
            (2, Op::SearchEntry, "-"),
            (2, Op::SearchDone, "success")
        ]
    );
    let got = decode_whole(SIZELIMIT_S);
    assert_eq!(got.len(), 1 + 5 + 1);
    assert_eq!(brief(&got[6..]), [(2, Op::SearchDone, "sizeLimitExceeded")]);
    assert_eq!(got[6].result, Some(ResultCode::SIZE_LIMIT_EXCEEDED.0));
}

#[test]
fn recorded_results_by_name() {
    let got = decode_whole(BIND_WRONG_S);
    assert_eq!(brief(&got), [(1, Op::BindResponse, "invalidCredentials")]);
    assert_eq!(got[0].result, Some(49));

    let got = decode_whole(WRITE_S);
    assert_eq!(
        brief(&got),
        [
            (1, Op::BindResponse, "success"),
            (2, Op::AddResponse, "success"),
            (3, Op::AddResponse, "entryAlreadyExists"),
            (4, Op::ModifyResponse, "success"),
            (5, Op::ModifyDnResponse, "success"),
            (6, Op::DeleteResponse, "success"),
            (7, Op::DeleteResponse, "noSuchObject"),
        ]
    );
    // noSuchObject names the closest entry that exists.
    assert_eq!(got[6].matched_dn, PEOPLE.as_bytes());
    assert_eq!(got[2].result, Some(68));
    assert_eq!(got[6].result, Some(32));
    // Kept messages come with their bytes.
    assert_eq!(got[1].message, messages(WRITE_S)[1]);

    let got = decode_whole(COMPARE_TRUE_S);
    assert_eq!(brief(&got)[1], (2, Op::CompareResponse, "compareTrue"));
    let got = decode_whole(COMPARE_FALSE_S);
    assert_eq!(brief(&got)[1], (2, Op::CompareResponse, "compareFalse"));
    assert!(ResultCode(got[1].result.unwrap()).is_success());

    // Who am I?: an ExtendedResponse with a value and (OpenLDAP) no name.
    let got = decode_whole(WHOAMI_S);
    assert_eq!(brief(&got)[1], (2, Op::ExtendedResponse, "success"));
    assert_eq!(got[1].value, b"dn:cn=admin,dc=headroom,dc=test");
    assert_eq!(got[1].name, b"");

    // StartTLS: success, then the bytes are TLS (a handshake record), not LDAP.
    let mut dec = Decoder::new();
    let (n, r) = dec.decode(STARTTLS_S).unwrap();
    let r = r.unwrap();
    assert_eq!(
        (r.id, r.op, r.result),
        (1, Op::ExtendedResponse, Some(ResultCode::SUCCESS))
    );
    assert_eq!(n, 14);
    assert_eq!(STARTTLS_S[n..][..2], [0x16, 0x03]);
    assert_eq!(dec.eof(), Ok(()));
    // Fed to the decoder, TLS is not LDAP.
    assert_eq!(
        Decoder::new().decode(&STARTTLS_S[n..]).map(|(n, _)| n),
        Err(LdapError::Malformed)
    );

    // The filter searches: all answered (24 searches, one matched the base entry).
    let got = decode_whole(FILTERS_S);
    let done = got.iter().filter(|r| r.op == Op::SearchDone).count();
    assert_eq!(done, RECORDED_FILTERS.len());
    assert!(got.iter().all(|r| r.result.is_none_or(|c| c == 0)));
}

/// A message from its protocolOp's bytes (and controls etc. after it).
fn msg(id: u8, op_and_rest: &[u8]) -> Vec<u8> {
    let mut contents = vec![0x02, 0x01, id];
    contents.extend_from_slice(op_and_rest);
    let mut out = vec![0x30];
    ber::put_len(&mut out, contents.len());
    out.extend_from_slice(&contents);
    out
}

/// An element.
fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    ber::put(&mut out, tag, contents);
    out
}

fn ldap_result(code: u8, matched: &[u8], diag: &[u8]) -> Vec<u8> {
    [tlv(0x0a, &[code]), tlv(0x04, matched), tlv(0x04, diag)].concat()
}

/// Hand-made messages of every kind the real server did not send in the recordings.
fn hand_made() -> Vec<(Vec<u8>, Owned)> {
    let o = |id, op, result, diagnostic: &[u8], name: &[u8], value: &[u8]| Owned {
        id,
        op,
        result,
        matched_dn: vec![],
        diagnostic: diagnostic.to_vec(),
        name: name.to_vec(),
        value: value.to_vec(),
        len: 0,
        message: vec![],
    };
    let mut v = Vec::new();
    // Notice of Disconnection: id 0, ExtendedResponse with the notice's OID.
    let notice = msg(
        0,
        &tlv(
            0x78,
            &[
                ldap_result(52, b"", b"server shutting down"),
                tlv(0x8a, NOTICE_OF_DISCONNECTION_OID),
            ]
            .concat(),
        ),
    );
    v.push((
        notice,
        o(
            0,
            Op::Notice,
            Some(52),
            b"server shutting down",
            NOTICE_OF_DISCONNECTION_OID,
            b"",
        ),
    ));
    // IntermediateResponse with name and value.
    let inter = msg(
        9,
        &tlv(0x79, &[tlv(0x80, b"1.2.3"), tlv(0x81, b"val")].concat()),
    );
    v.push((
        inter,
        o(9, Op::IntermediateResponse, None, b"", b"1.2.3", b"val"),
    ));
    // An empty IntermediateResponse.
    v.push((
        msg(9, &tlv(0x79, &[])),
        o(9, Op::IntermediateResponse, None, b"", b"", b""),
    ));
    // A SearchResultReference: counted, like entries.
    let reference = msg(3, &tlv(0x73, &tlv(0x04, b"ldap://other.example/o=x??sub")));
    v.push((reference, o(3, Op::SearchReference, None, b"", b"", b"")));
    // A BindResponse with serverSaslCreds.
    let sasl = msg(
        1,
        &tlv(
            0x61,
            &[ldap_result(14, b"", b""), tlv(0x87, b"creds")].concat(),
        ),
    );
    v.push((sasl, o(1, Op::BindResponse, Some(14), b"", b"", b"")));
    // A referral result with its Referral [3].
    let referral = msg(
        4,
        &tlv(
            0x65,
            &[
                ldap_result(10, b"", b"go there"),
                tlv(
                    0xa3,
                    &[tlv(0x04, b"ldap://a/"), tlv(0x04, b"ldap://b/")].concat(),
                ),
            ]
            .concat(),
        ),
    );
    v.push((
        referral,
        o(4, Op::SearchDone, Some(10), b"go there", b"", b""),
    ));
    // Controls after the op (a paged-results control), and a trailing element the client
    // does not know (ignored, RFC 4511 section 4).
    let controls = msg(
        5,
        &[
            tlv(0x65, &ldap_result(0, b"", b"")),
            tlv(
                0xa0,
                &tlv(
                    0x30,
                    &[
                        tlv(0x04, b"1.2.840.113556.1.4.319"),
                        tlv(0x04, b"\x30\x05\x02\x01\x00\x04\x00"),
                    ]
                    .concat(),
                ),
            ),
            tlv(0x8f, b"future"),
        ]
        .concat(),
    );
    v.push((controls, o(5, Op::SearchDone, Some(0), b"", b"", b"")));
    // An LDAPResult with an unknown trailing component, a large result code (4 octets).
    let future = msg(
        6,
        &tlv(
            0x6b,
            &[
                tlv(0x0a, &[0x00, 0x00, 0x10, 0x00]),
                tlv(0x04, b"o=x"),
                tlv(0x04, b""),
                tlv(0x9e, b"?"),
            ]
            .concat(),
        ),
    );
    let mut f = o(6, Op::DeleteResponse, Some(4096), b"", b"", b"");
    f.matched_dn = b"o=x".to_vec();
    v.push((future, f));
    // An ExtendedResponse with both name and value; a long-form length (non-minimal: BER
    // allows it) on the message.
    let ext_op = tlv(
        0x78,
        &[
            ldap_result(0, b"", b""),
            tlv(0x8a, b"1.3.6.1.4.1.1466.20037"),
            tlv(0x8b, b"v"),
        ]
        .concat(),
    );
    let mut ext = vec![0x30, 0x84, 0, 0, 0, (3 + ext_op.len()) as u8, 0x02, 0x01, 7];
    ext.extend_from_slice(&ext_op);
    v.push((
        ext,
        o(
            7,
            Op::ExtendedResponse,
            Some(0),
            b"",
            b"1.3.6.1.4.1.1466.20037",
            b"v",
        ),
    ));
    for (bytes, want) in &mut v {
        want.len = bytes.len() as u64;
        if want.op != Op::SearchReference {
            want.message = bytes.clone();
        }
    }
    v
}

#[test]
fn hand_made_responses_decode() {
    for (bytes, want) in hand_made() {
        let got = decode_whole(&bytes);
        assert_eq!(got, std::slice::from_ref(&want), "{bytes:02x?}");
        assert_eq!(
            want.op.is_final(),
            !matches!(
                want.op,
                Op::IntermediateResponse | Op::SearchReference | Op::Notice
            )
        );
    }
    // Op names for counting.
    assert_eq!(Op::SearchEntry.name(), "searchResEntry");
    assert_eq!(Op::DeleteResponse.name(), "delResponse");
    assert_eq!(Op::Notice.name(), "notice");
}

/// Every recorded server stream (StartTLS's first message only) and the hand-made messages.
fn all_streams() -> Vec<u8> {
    let mut all = Vec::new();
    for s in [
        SEARCH_SUB_S,
        SEARCH_FIELDS_S,
        SIZELIMIT_S,
        BIND_WRONG_S,
        FILTERS_S,
        WRITE_S,
        COMPARE_TRUE_S,
        COMPARE_FALSE_S,
        WHOAMI_S,
        &STARTTLS_S[..14],
    ] {
        all.extend_from_slice(s);
    }
    for (bytes, _) in hand_made() {
        all.extend_from_slice(&bytes);
    }
    all
}

#[test]
fn every_split_gives_the_same_responses() {
    let all = all_streams();
    let whole = decode_whole(&all);
    // search_sub, search_fields, sizelimit, bind_wrong, filters (bind, one entry, 24 done),
    // write, compare twice, whoami, starttls, hand-made.
    assert_eq!(whole.len(), 114 + 3 + 7 + 1 + 26 + 7 + 2 + 2 + 2 + 1 + 9);
    for keep_entries in [false, true] {
        let mut dec = Decoder::new();
        dec.keep_entries(keep_entries);
        let whole = decode_all(&mut dec, [&all[..]]);
        assert_eq!(whole.1, Ok(false));
        for split in 0..=all.len() {
            let (a, b) = all.split_at(split);
            let mut dec = Decoder::new();
            dec.keep_entries(keep_entries);
            assert_eq!(decode_all(&mut dec, [a, b]), whole, "split at {split}");
        }
        let mut dec = Decoder::new();
        dec.keep_entries(keep_entries);
        assert_eq!(decode_all(&mut dec, all.chunks(1)), whole, "bytewise");
        let mut rng = Rng(0x1da9);
        for round in 0..300 {
            let mut dec = Decoder::new();
            dec.keep_entries(keep_entries);
            let pieces = random_pieces(&mut rng, &all, 64);
            assert_eq!(decode_all(&mut dec, pieces), whole, "round {round}");
        }
    }
}

#[test]
fn kept_entries_can_be_read() {
    let mut dec = Decoder::new();
    dec.keep_entries(true);
    let (got, end) = decode_all(&mut dec, SEARCH_SUB_S.chunks(100));
    assert_eq!(end, Ok(false));
    let entries: Vec<_> = got.iter().filter(|r| r.op == Op::SearchEntry).collect();
    assert_eq!(entries.len(), 112);
    let mut uids = Vec::new();
    for r in &entries {
        let e = parse_entry(&r.message).unwrap();
        let dn = std::str::from_utf8(e.dn).unwrap();
        let n: u32 = dn
            .strip_prefix("uid=user")
            .and_then(|d| d.strip_suffix(",ou=people,dc=headroom,dc=test"))
            .unwrap()
            .parse()
            .unwrap();
        // Exactly the attributes asked for, with the values the script loaded.
        let names: Vec<_> = e.attributes().map(|a| a.name).collect();
        assert_eq!(names, [&b"cn"[..], b"mail"]);
        assert_eq!(
            e.values("CN").collect::<Vec<_>>(),
            [format!("user {n}").as_bytes()]
        );
        assert_eq!(
            e.values("mail").collect::<Vec<_>>(),
            [format!("user{n}@headroom.test").as_bytes()]
        );
        assert_eq!(e.values("sn").count(), 0);
        uids.push(n);
    }
    uids.sort();
    let mut want: Vec<u32> = vec![1];
    want.extend(10..20);
    want.extend(100..200);
    want.push(1000);
    assert_eq!(uids, want);
    // Anything but an entry is refused.
    assert_eq!(
        parse_entry(messages(SEARCH_SUB_S)[0]).map(|e| e.dn),
        Err(LdapError::Malformed)
    );
    assert_eq!(parse_entry(b"\x30").map(|e| e.dn), Err(LdapError::BadBer));
    // A value that is not an OCTET STRING.
    let bad = msg(
        2,
        &tlv(
            0x64,
            &[
                tlv(0x04, b"o=x"),
                tlv(
                    0x30,
                    &tlv(
                        0x30,
                        &[tlv(0x04, b"a"), tlv(0x31, &tlv(0x02, b"\x01"))].concat(),
                    ),
                ),
            ]
            .concat(),
        ),
    );
    assert_eq!(parse_entry(&bad).map(|e| e.dn), Err(LdapError::Malformed));
}

#[test]
fn result_code_names_are_rfc4511s() {
    // RFC 4511 section 4.1.9, as printed there.
    const RFC4511: &str = "
             success                      (0),
             operationsError              (1),
             protocolError                (2),
             timeLimitExceeded            (3),
             sizeLimitExceeded            (4),
             compareFalse                 (5),
             compareTrue                  (6),
             authMethodNotSupported       (7),
             strongerAuthRequired         (8),
                  -- 9 reserved --
             referral                     (10),
             adminLimitExceeded           (11),
             unavailableCriticalExtension (12),
             confidentialityRequired      (13),
             saslBindInProgress           (14),
             noSuchAttribute              (16),
             undefinedAttributeType       (17),
             inappropriateMatching        (18),
             constraintViolation          (19),
             attributeOrValueExists       (20),
             invalidAttributeSyntax       (21),
                  -- 22-31 unused --
             noSuchObject                 (32),
             aliasProblem                 (33),
             invalidDNSyntax              (34),
                  -- 35 reserved for undefined isLeaf --
             aliasDereferencingProblem    (36),
                  -- 37-47 unused --
             inappropriateAuthentication  (48),
             invalidCredentials           (49),
             insufficientAccessRights     (50),
             busy                         (51),
             unavailable                  (52),
             unwillingToPerform           (53),
             loopDetect                   (54),
                  -- 55-63 unused --
             namingViolation              (64),
             objectClassViolation         (65),
             notAllowedOnNonLeaf          (66),
             notAllowedOnRDN              (67),
             entryAlreadyExists           (68),
             objectClassModsProhibited    (69),
                  -- 70 reserved for CLDAP --
             affectsMultipleDSAs          (71),
                  -- 72-79 unused --
             other                        (80),";
    // The IANA registry's later ones.
    const LATER: &[(u32, &str)] = &[
        (118, "canceled"),
        (119, "noSuchOperation"),
        (120, "tooLate"),
        (121, "cannotCancel"),
        (122, "assertionFailed"),
        (123, "authorizationDenied"),
        (4096, "e-syncRefreshRequired"),
    ];
    let mut named = std::collections::HashMap::new();
    for line in RFC4511.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("--") {
            continue;
        }
        let (name, rest) = line.split_once(' ').unwrap();
        let code: u32 = rest
            .trim()
            .trim_start_matches('(')
            .trim_end_matches("),")
            .parse()
            .unwrap();
        named.insert(code, name);
    }
    assert_eq!(named.len(), 39);
    named.extend(LATER.iter().copied());
    for code in 0..5000 {
        let want = named.get(&code).copied().unwrap_or("unknown");
        assert_eq!(ResultCode(code).name(), want, "{code}");
    }
    assert_eq!(ResultCode(u32::MAX).name(), "unknown");
    assert_eq!(
        ResultCode::INVALID_CREDENTIALS.to_string(),
        "invalidCredentials (49)"
    );
    assert!(ResultCode::SUCCESS.is_success() && !ResultCode::BUSY.is_success());
    for (c, name) in [
        (ResultCode::OPERATIONS_ERROR, "operationsError"),
        (ResultCode::PROTOCOL_ERROR, "protocolError"),
        (ResultCode::TIME_LIMIT_EXCEEDED, "timeLimitExceeded"),
        (ResultCode::COMPARE_FALSE, "compareFalse"),
        (ResultCode::COMPARE_TRUE, "compareTrue"),
        (ResultCode::REFERRAL, "referral"),
        (ResultCode::NO_SUCH_OBJECT, "noSuchObject"),
        (
            ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
            "insufficientAccessRights",
        ),
        (ResultCode::UNAVAILABLE, "unavailable"),
        (ResultCode::UNWILLING_TO_PERFORM, "unwillingToPerform"),
        (ResultCode::ENTRY_ALREADY_EXISTS, "entryAlreadyExists"),
    ] {
        assert_eq!(c.name(), name);
    }
}

fn first_error(bytes: &[u8]) -> Result<Vec<Owned>, LdapError> {
    let mut dec = Decoder::new();
    match decode_all(&mut dec, [bytes]) {
        (_, Err(e)) => Err(e),
        (got, Ok(_)) => Ok(got),
    }
}

#[test]
fn protocol_violations_are_errors() {
    use LdapError::*;
    let done = tlv(0x65, &ldap_result(0, b"", b""));
    let ok = msg(2, &done);
    assert!(first_error(&ok).is_ok());
    let cases: Vec<(Vec<u8>, LdapError)> = vec![
        // Not a SEQUENCE.
        (b"HTTP/1.1 400 Bad Request\r\n".to_vec(), Malformed),
        (vec![0x31, 0x00], Malformed),
        // Indefinite length (BER allows it, LDAP does not), 5 length octets, reserved 0xFF.
        ([&[0x30, 0x80][..], &ok[2..], &[0, 0]].concat(), BadBer),
        (vec![0x30, 0x85, 0, 0, 0, 0, 0x0e], BadBer),
        (vec![0x30, 0xff], BadBer),
        // An empty message, or no protocolOp.
        (vec![0x30, 0x00], Malformed),
        (vec![0x30, 0x03, 0x02, 0x01, 0x01], Malformed),
        // messageID: not an INTEGER, empty, 5 octets, negative, longer than the message.
        ([&[0x30, 0x11, 0x04], &ok[3..]].concat(), Malformed),
        ([&[0x30, 0x0f, 0x02, 0x00], &done[..]].concat(), BadBer),
        (
            [&[0x30, 0x14, 0x02, 0x05, 0, 0, 0, 0, 1], &done[..]].concat(),
            Malformed,
        ),
        (
            [&[0x30, 0x10, 0x02, 0x01, 0xff], &done[..]].concat(),
            Malformed,
        ),
        (vec![0x30, 0x03, 0x02, 0x05, 0x01], BadBer),
        (vec![0x30, 0x04, 0x02, 0x84, 0, 0], BadBer),
        // The op's length runs past the message.
        (vec![0x30, 0x05, 0x02, 0x01, 0x01, 0x65, 0x07], BadBer),
        // Requests, unknown operations, non-APPLICATION ops.
        (msg(1, &tlv(0x60, &[])), Unexpected(0x60)),
        (msg(1, &tlv(0x63, &[])), Unexpected(0x63)),
        (msg(1, &tlv(0x42, &[])), Unexpected(0x42)),
        (msg(1, &tlv(0x7a, &[])), Unexpected(0x7a)),
        (
            msg(1, &tlv(0x45, &ldap_result(0, b"", b""))),
            Unexpected(0x45),
        ),
        (msg(1, &tlv(0x30, &[])), Malformed),
        (msg(1, &tlv(0xa5, &[])), Malformed),
        (msg(1, &[0x7f, 0x00]), Malformed),
        // Message id 0 on anything but an ExtendedResponse.
        (msg(0, &done), Unexpected(0x65)),
        (msg(0, &tlv(0x64, &[])), Unexpected(0x64)),
        // LDAPResult: missing fields, wrong tags, negative or empty code, bad referral.
        (msg(2, &tlv(0x65, &tlv(0x0a, &[0]))), Malformed),
        (msg(2, &tlv(0x65, &[])), Malformed),
        (
            msg(
                2,
                &tlv(0x65, &[tlv(0x02, &[0]), tlv(4, b""), tlv(4, b"")].concat()),
            ),
            Malformed,
        ),
        (msg(2, &tlv(0x65, &ldap_result(0x80, b"", b""))), Malformed),
        (
            msg(
                2,
                &tlv(0x65, &[tlv(0x0a, &[]), tlv(4, b""), tlv(4, b"")].concat()),
            ),
            BadBer,
        ),
        (
            msg(
                2,
                &tlv(0x65, &[ldap_result(10, b"", b""), tlv(0xa3, &[])].concat()),
            ),
            Malformed,
        ),
        (
            msg(
                2,
                &tlv(
                    0x65,
                    &[ldap_result(10, b"", b""), tlv(0xa3, &tlv(0x02, &[1]))].concat(),
                ),
            ),
            Malformed,
        ),
        // An element inside running past its container.
        (
            msg(2, &tlv(0x65, &[0x0a, 0x01, 0x00, 0x04, 0x09, 0x00])),
            BadBer,
        ),
        // Controls that are not a SEQUENCE OF, garbage after the op.
        (
            msg(2, &[done.clone(), tlv(0xa0, &tlv(0x04, b"x"))].concat()),
            Malformed,
        ),
        (msg(2, &[done.clone(), vec![0x04, 0x05]].concat()), BadBer),
        // A multi-octet tag inside.
        (msg(2, &tlv(0x65, &[0x1f, 0x01, 0x00])), Malformed),
    ];
    for (bytes, want) in &cases {
        assert_eq!(first_error(bytes).map(|_| ()), Err(*want), "{bytes:02x?}");
        // The same error whatever the split.
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            let mut dec = Decoder::new();
            assert_eq!(
                decode_all(&mut dec, [a, b]).1,
                Err(*want),
                "{bytes:02x?} / {split}"
            );
        }
    }
    // An empty reference or entry is an error only if kept: counted ones are not read.
    for op in [0x73, 0x64] {
        let empty = msg(2, &tlv(op, &[]));
        assert_eq!(first_error(&empty).map(|v| v.len()), Ok(1));
        let mut dec = Decoder::new();
        dec.keep_entries(true);
        assert_eq!(decode_all(&mut dec, [&empty[..]]).1, Err(Malformed));
    }
    // Errors are Display-able for logs.
    assert_eq!(
        Unexpected(0x60).to_string(),
        "unexpected LDAP operation (tag 0x60)"
    );
}

#[test]
fn bounds_message_size_and_length_octets() {
    use LdapError::*;
    // The message limit counts the whole message: exactly the limit passes, one more fails.
    let m = msg(2, &tlv(0x65, &ldap_result(0, b"", &[b'x'; 200])));
    let mut dec = Decoder::new();
    dec.set_max_message_len(m.len() as u32);
    assert_eq!(decode_all(&mut dec, [&m[..]]).1, Ok(false));
    let mut dec = Decoder::new();
    dec.set_max_message_len(m.len() as u32 - 1);
    assert_eq!(decode_all(&mut dec, [&m[..]]).1, Err(TooLong));
    // Refused from the head alone: a 5 MiB SearchResultDone need not arrive.
    let head = [
        0x30, 0x84, 0x00, 0x50, 0x00, 0x00, // LDAPMessage, 5 MiB
        0x02, 0x01, 0x02, // messageID 2
        0x65, 0x84, 0x00, 0x4f, 0xff, 0xf0, // SearchResultDone, 5 MiB - 16
    ];
    assert_eq!(first_error(&head).map(|_| ()), Err(TooLong));
    // The default is 4 MiB: a 4 MiB message is taken, split (the buffer grows), then released.
    let big = msg(
        2,
        &tlv(0x65, &ldap_result(0, b"", &vec![b'x'; (4 << 20) - 64])),
    );
    assert!(big.len() <= DEFAULT_MAX_MESSAGE_LEN as usize);
    let mut dec = Decoder::new();
    let (most, last) = big.split_at(big.len() - 1000);
    let (got, end) = decode_all(&mut dec, most.chunks(64 * 1024));
    assert_eq!((got.len(), end), (0, Ok(true)));
    let (n, r) = dec.decode(last).unwrap();
    assert_eq!((n, r.unwrap().diagnostic.len()), (1000, (4 << 20) - 64));
    assert!(dec.buffer_capacity() >= big.len());
    assert_eq!(dec.decode(&[]).unwrap(), (0, None));
    assert_eq!(dec.buffer_capacity(), 0, "a big buffer is released");
    // A small split message keeps its buffer for the next one.
    let small = msg(2, &tlv(0x65, &ldap_result(0, b"", b"")));
    let (got, _) = decode_all(&mut dec, small.chunks(5));
    assert_eq!(got.len(), 1);
    assert_eq!(dec.decode(&[]).unwrap(), (0, None));
    assert!(dec.buffer_capacity() > 0 && dec.buffer_capacity() <= RETAINED_CAPACITY);

    // Entries have no limit and are never buffered: a 100 MiB entry fed in 1 MiB chunks.
    let mut dec = Decoder::new();
    dec.set_max_message_len(16);
    let body = 100 << 20;
    let mut entry = vec![0x30, 0x84];
    entry.extend_from_slice(&(body as u32 + 3 + 6).to_be_bytes());
    entry.extend_from_slice(&[0x02, 0x01, 0x02, 0x64, 0x84]);
    entry.extend_from_slice(&(body as u32).to_be_bytes());
    let hdr = entry.len();
    entry.resize(hdr + body, 0);
    let (got, end) = decode_all(&mut dec, entry.chunks(1 << 20));
    assert_eq!(end, Ok(false));
    assert_eq!(
        (got.len(), got[0].op, got[0].len),
        (1, Op::SearchEntry, entry.len() as u64)
    );
    assert_eq!(dec.buffer_capacity(), 0);

    // Length octets: 4 are taken (a non-minimal 4-octet length), 5 are not, anywhere.
    let mut four = vec![0x30, 0x84, 0, 0, 0, ok_contents().len() as u8];
    four.extend_from_slice(&ok_contents());
    assert_eq!(first_error(&four).map(|v| v.len()), Ok(1));
    let mut five = vec![0x30, 0x85, 0, 0, 0, 0, ok_contents().len() as u8];
    five.extend_from_slice(&ok_contents());
    assert_eq!(first_error(&five).map(|_| ()), Err(BadBer));
    let inner5 = msg(
        2,
        &[
            0x65, 0x85, 0, 0, 0, 0, 0x07, 0x0a, 0x01, 0, 0x04, 0, 0x04, 0,
        ],
    );
    assert_eq!(first_error(&inner5).map(|_| ()), Err(BadBer));
    let deep5 = msg(
        2,
        &tlv(0x65, &[0x0a, 0x85, 0, 0, 0, 0, 1, 0, 0x04, 0, 0x04, 0]),
    );
    assert_eq!(first_error(&deep5).map(|_| ()), Err(BadBer));

    fn ok_contents() -> Vec<u8> {
        let m = msg(2, &tlv(0x65, &ldap_result(0, b"", b"")));
        m[2..].to_vec()
    }
}

#[test]
fn eof_is_clean_only_between_messages() {
    let all = all_streams();
    let mut boundaries = vec![0];
    let mut dec = Decoder::new();
    let mut pos = 0;
    while pos < all.len() {
        let (n, r) = dec.decode(&all[pos..]).unwrap();
        pos += n;
        assert!(r.is_some());
        boundaries.push(pos);
    }
    let whole = decode_whole(&all);
    for cut in 0..=all.len() {
        let mut dec = Decoder::new();
        let (got, end) = decode_all(&mut dec, [&all[..cut]]);
        assert_eq!(end, Ok(!boundaries.contains(&cut)), "cut at {cut}");
        let want = if boundaries.contains(&cut) {
            Ok(())
        } else {
            Err(LdapError::Incomplete)
        };
        assert_eq!(dec.eof(), want, "cut at {cut}");
        assert!(whole.starts_with(&got));
    }
}

#[test]
fn steady_state_search_loop_allocates_nothing() {
    use std::fmt::Write;
    // A connection's buffers: the write buffer, a filter string rebuilt per request (the
    // engine's substitution), the decoder. The server's answer: 112 entries and a
    // SearchResultDone, whole and split in three (entries and the done message across reads).
    let answer = &SEARCH_SUB_S[14..];
    let mut out = Vec::with_capacity(256);
    let mut filter = String::with_capacity(64);
    let mut dec = Decoder::new();
    let f = Filter::parse("(objectClass=inetOrgPerson)").unwrap();
    let round = |out: &mut Vec<u8>, filter: &mut String, dec: &mut Decoder| {
        let (mut entries, mut done) = (0u64, 0u64);
        for i in 0..300 {
            out.clear();
            filter.clear();
            write!(
                filter,
                "(&(objectClass=inetOrgPerson)(uid=user{}*))",
                i % 10
            )
            .unwrap();
            let s = Search {
                base: PEOPLE,
                filter: filter.as_str().into(),
                attrs: &["cn", "mail"],
                ..Search::default()
            };
            search(out, i + 2, &s).unwrap();
            search(
                out,
                i + 2,
                &Search {
                    filter: (&f).into(),
                    ..s
                },
            )
            .unwrap();
            let third = answer.len() / 3;
            for pieces in [
                &[answer][..],
                &[
                    &answer[..third],
                    &answer[third..2 * third],
                    &answer[2 * third..],
                ],
            ] {
                for piece in pieces {
                    let mut p: &[u8] = piece;
                    while !p.is_empty() {
                        let (n, r) = dec.decode(p).unwrap();
                        match r.map(|r| (r.op, r.result)) {
                            Some((Op::SearchEntry, _)) => entries += 1,
                            Some((Op::SearchDone, Some(ResultCode::SUCCESS))) => done += 1,
                            Some(other) => panic!("{other:?}"),
                            None => {}
                        }
                        p = &p[n..];
                    }
                }
            }
        }
        (entries, done)
    };
    round(&mut out, &mut filter, &mut dec);
    let before = allocs();
    let t = std::time::Instant::now();
    let (entries, done) = round(&mut out, &mut filter, &mut dec);
    let took = t.elapsed();
    let spent = allocs() - before;
    println!(
        "{entries} entries and {done} searches encoded and decoded in {:.1} ms ({:.0} ns per entry)",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e9 / entries as f64
    );
    assert_eq!((entries, done), (300 * 2 * 112, 300 * 2));
    assert_eq!(spent, 0, "allocations in 600 steady-state searches");
    assert!(dec.buffer_capacity() <= RETAINED_CAPACITY);
    // The counter does see allocations on this thread.
    let v = std::hint::black_box(vec![1u8; 16]);
    assert!(allocs() > before && v.len() == 16);
    assert_eq!(std::mem::size_of::<Decoder>(), 104);
}

#[test]
fn hostile_bytes_never_panic() {
    // Mutated recordings and random bytes, whole and split: any outcome but a panic, the
    // decode contract holds (decode_all checks it), and the split run agrees with the whole.
    let all = all_streams();
    let mut rng = Rng(0xbad1da9);
    for round in 0..3000 {
        let start = rng.below(all.len());
        let mut data = all[start..(start + 400).min(all.len())].to_vec();
        match rng.below(4) {
            0 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(data.len());
                    data[at] = rng.next() as u8;
                }
            }
            1 => {
                let at = rng.below(data.len());
                data.truncate(at);
                data.extend((0..rng.below(64)).map(|_| rng.next() as u8));
            }
            2 => {
                let at = rng.below(data.len());
                let len = rng.below(32).min(data.len() - at);
                data.drain(at..at + len);
            }
            _ => data = (0..rng.below(256)).map(|_| rng.next() as u8).collect(),
        }
        for keep in [false, true] {
            let mut dec = Decoder::new();
            dec.keep_entries(keep);
            dec.set_max_message_len(1024);
            let whole = decode_all(&mut dec, [&data[..]]);
            let mut dec = Decoder::new();
            dec.keep_entries(keep);
            dec.set_max_message_len(1024);
            let pieces = random_pieces(&mut rng, &data, 16);
            assert_eq!(decode_all(&mut dec, pieces), whole, "round {round}");
        }
        // The filter parser on random text built from filter characters.
        let alphabet = b"()&|!=~<>*:\\ab0129.;-dnDN";
        let text: String = (0..rng.below(40))
            .map(|_| char::from(alphabet[rng.below(alphabet.len())]))
            .collect();
        let mut out = b"x".to_vec();
        match encode_filter(&mut out, &text) {
            Ok(()) => {
                // A filter that parses is one well-formed element.
                let mut r = Reader::new(&out[1..]);
                r.tlv().unwrap();
                assert!(r.is_empty(), "{text:?}");
            }
            Err(e) => {
                assert_eq!(out, b"x");
                assert!(e.pos <= text.len(), "{text:?}: {e}");
            }
        }
    }
}
