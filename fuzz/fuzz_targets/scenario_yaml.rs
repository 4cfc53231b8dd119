//! Fuzz the scenario readers: the native YAML parser and the Tsung, httperf and HAR importers.
//!
//! The input, as UTF-8 (lossy), goes to all four. Checked besides "no panic": every error is
//! located (line and column >= 1); a scenario the parser accepts is written by `to_yaml` and
//! parses back identically; the importers never report an internal error (their own round trip
//! through `to_yaml` + `parse_str` failing), and what they return round-trips too.
#![no_main]

use headroom_scenario::{
    import_har, import_httperf, import_tsung, parse_str, to_yaml, HarOptions, HttperfOptions,
    Scenario, ScenarioError,
};
use libfuzzer_sys::fuzz_target;

/// A base directory that does not exist, so relative `include`s fail instead of reading files.
const FILE: &str = "/nonexistent-headroom-fuzz/fuzz.yaml";

fn located(errs: &[ScenarioError]) {
    assert!(!errs.is_empty());
    for e in errs {
        assert!(e.line >= 1 && e.column >= 1, "unlocated: {e}");
        assert!(!e.message.contains("internal error"), "{e}");
    }
}

fn round_trip(s: &Scenario) {
    let yaml = to_yaml(s);
    match parse_str(&yaml, FILE) {
        Ok(back) => assert_eq!(&back, s, "round trip differs:\n{yaml}"),
        Err(e) => panic!("to_yaml output does not parse: {e:?}\n{yaml}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_str(&text, FILE) {
        Ok(s) => round_trip(&s),
        Err(e) => located(&e),
    }
    match import_tsung(&text, "fuzz.xml") {
        Ok(i) => round_trip(&i.scenario),
        Err(e) => located(&e),
    }
    match import_httperf(&text, "fuzz.log", &HttperfOptions::default()) {
        Ok(i) => round_trip(&i.scenario),
        Err(e) => located(&e),
    }
    match import_har(&text, "fuzz.har", &HarOptions::default()) {
        Ok(i) => round_trip(&i.scenario),
        Err(e) => located(&e),
    }
});
