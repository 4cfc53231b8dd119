//! Fuzz the Tsung importer on documents with an internal DTD subset (entities, nested or not,
//! referenced from text and attributes). The input is split at its first NUL: before it, the
//! DTD's declarations; after it, the document. Checked besides "no panic" and the RSS limit
//! (`-rss_limit_mb=2048`; a "billion laughs" must be refused, not expanded): every error is
//! located, and an accepted import round-trips through `to_yaml`.
#![no_main]

use headroom_scenario::{import_tsung, parse_str, to_yaml};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (dtd, body) = text.split_once('\0').unwrap_or((&text, "<tsung/>"));
    let xml = format!("<?xml version=\"1.0\"?>\n<!DOCTYPE tsung [\n{dtd}\n]>\n{body}");
    match import_tsung(&xml, "fuzz.xml") {
        Ok(i) => {
            let yaml = to_yaml(&i.scenario);
            // What the DTD expanded is bounded (1 MiB of entity text) by the importer.
            assert!(yaml.len() < 64 << 20, "{} bytes of YAML", yaml.len());
            match parse_str(&yaml, "/nonexistent-headroom-fuzz/fuzz.yaml") {
                Ok(back) => assert_eq!(back, i.scenario, "round trip differs:\n{yaml}"),
                Err(e) => panic!("to_yaml output does not parse: {e:?}\n{yaml}"),
            }
        }
        Err(errs) => {
            assert!(!errs.is_empty());
            for e in errs {
                assert!(e.line >= 1 && e.column >= 1, "unlocated: {e}");
                // The importer's own round-trip failure (the input's text may say "internal error").
                assert!(!e.message.starts_with("internal error of the importer"), "{e}");
            }
        }
    }
});
