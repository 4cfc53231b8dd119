//! Fuzz `set: {expr}` and the Tsung importer's translation of Erlang eval funs into it.
//!
//! Input starting with `fun`: an Erlang fun, put (XML-escaped) into a Tsung file's
//! `<setdynvars sourcetype="eval" code>` and imported: every refusal is located, and what is
//! accepted round-trips through `to_yaml`. Otherwise the first line holds up to four
//! comma-separated values for the variables `user_id`, `a`, `b`, `c`, and the rest is an
//! expression: parsed (bounded: no stack overflow whatever the nesting), and when it parses,
//! evaluated (an error, never a panic or a wrapped value) and printed back to the same tree.
#![no_main]

use headroom_core::expr::{parse, IntExpr};
use headroom_scenario::{import_tsung, parse_str, to_yaml};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 4] = ["user_id", "a", "b", "c"];

fn resolve(name: &str) -> Result<u16, String> {
    NAMES
        .iter()
        .position(|n| *n == name)
        .map(|i| i as u16)
        .ok_or_else(|| format!("undefined variable '{name}'"))
}

fn eval_fun(code: &str) {
    let escaped = code
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let xml = format!(
        "<?xml version=\"1.0\"?>\n<tsung>\n<servers><server host=\"127.0.0.1\" port=\"80\" type=\"tcp\"/></servers>\n\
         <load><arrivalphase phase=\"1\" duration=\"10\" unit=\"second\"><users arrivalrate=\"1\" unit=\"second\"/></arrivalphase></load>\n\
         <sessions>\n<session name=\"s\" probability=\"100\" type=\"ts_http\">\n\
         <setdynvars sourcetype=\"random_number\" start=\"1\" end=\"9\"><var name=\"n\"/></setdynvars>\n\
         <setdynvars sourcetype=\"eval\" code=\"{escaped}\"><var name=\"x\"/></setdynvars>\n\
         <request subst=\"true\"><http url=\"/%%_x%%\"/></request>\n</session>\n</sessions>\n</tsung>\n"
    );
    match import_tsung(&xml, "fuzz.xml") {
        Ok(i) => {
            let yaml = to_yaml(&i.scenario);
            match parse_str(&yaml, "/nonexistent-headroom-fuzz/fuzz.yaml") {
                Ok(back) => assert_eq!(back, i.scenario, "round trip differs:\n{yaml}"),
                Err(e) => panic!("to_yaml output does not parse: {e:?}\n{yaml}"),
            }
        }
        Err(errs) => {
            for e in errs {
                assert!(e.line >= 1 && e.column >= 1, "unlocated: {e}");
                assert!(!e.message.starts_with("internal error of the importer"), "{e}");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if text.starts_with("fun") {
        eval_fun(&text);
        return;
    }
    let (values, expr) = text.split_once('\n').unwrap_or(("1,2,3,4", &text));
    let mut vars: Vec<String> = values.split(',').take(4).map(String::from).collect();
    vars.resize(4, String::new());
    let Ok(e) = parse(expr, &mut resolve) else {
        return;
    };
    let _ = e.eval(&vars);
    let named: IntExpr<&str> = e
        .clone()
        .map_vars(&mut |v| Ok::<_, ()>(NAMES[v as usize]))
        .unwrap();
    let printed = named.to_string();
    let back = parse(&printed, &mut resolve)
        .unwrap_or_else(|err| panic!("{expr:?} printed as {printed:?}, which does not parse: {err}"));
    assert_eq!(back, e, "{expr:?} printed as {printed:?}");
});
