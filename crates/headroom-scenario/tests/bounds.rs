//! The Tsung importer expands DTD entities within a bound: nested entities are refused (a
//! "billion laughs" is not expanded), and all references together expand to at most 1 MiB.

use headroom_scenario::import_tsung;
use std::time::{Duration, Instant};

fn tsung(dtd: &str, url: &str, text: &str) -> String {
    format!(
        r#"<?xml version="1.0"?>
<!DOCTYPE tsung [
{dtd}
]>
<tsung>
 <servers><server host="127.0.0.1" port="8080" type="tcp"/></servers>
 <load><arrivalphase phase="1" duration="1" unit="second"><users arrivalrate="1" unit="second"/></arrivalphase></load>
 <sessions><session name="s" probability="100" type="ts_http">
  <request><http url="{url}" method="POST" version="1.1" contents="{text}"/></request>
 </session></sessions>
</tsung>
"#
    )
}

fn laughs() -> String {
    let mut dtd = String::from(" <!ENTITY lol0 \"lol\">\n");
    for i in 1..10 {
        dtd.push_str(&format!(
            " <!ENTITY lol{i} \"{}\">\n",
            format!("&lol{};", i - 1).repeat(10)
        ));
    }
    dtd
}

fn error_of(xml: &str) -> String {
    let start = Instant::now();
    let errs = match import_tsung(xml, "t.xml") {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    };
    assert!(start.elapsed() < Duration::from_secs(2));
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn nested_entities_are_refused_in_attributes_and_text() {
    let e = error_of(&tsung(&laughs(), "/&lol9;", "x"));
    assert!(e.contains("nested DTD entities"), "{e}");
    assert!(e.contains("lol1"), "names the entity: {e}");
    // Declared but referenced only in text: still refused at the declaration.
    let xml = tsung(&laughs(), "/", "x").replace("<tsung>", "<tsung>&lol9;");
    let e = error_of(&xml);
    assert!(e.contains("nested DTD entities"), "{e}");
}

#[test]
fn flat_entities_expand_up_to_one_mib_in_all() {
    // 64 KiB entity referenced 32 times: more than 1 MiB.
    let dtd = format!(" <!ENTITY big \"{}\">", "a".repeat(64 * 1024));
    let refs = "&big;".repeat(32);
    let e = error_of(&tsung(&dtd, "/", &refs));
    assert!(e.contains("expand to more than 1 MiB"), "{e}");
    // Within the bound (8 references), and predefined entities, are fine.
    let refs = "&big;".repeat(8);
    let imported = import_tsung(&tsung(&dtd, "/&amp;x", &refs), "t.xml");
    assert!(imported.is_ok(), "{:?}", imported.err());
    // An entity that uses a predefined one or a character reference is not "nested".
    let dtd = " <!ENTITY api \"/api?a=1&amp;b=&#50;\">";
    let imported = import_tsung(&tsung(dtd, "&api;", "x"), "t.xml");
    assert!(imported.is_ok(), "{:?}", imported.err());
}
