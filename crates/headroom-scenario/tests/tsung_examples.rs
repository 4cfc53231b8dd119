//! Tsung's own stock examples (Debian's `tsung` package, `/usr/share/doc/tsung/examples`, 24
//! files, some gzipped) through `import_tsung`: the test prints which import and why each other
//! one is refused, and holds the importer to issue 16's bar — at least 16 of them import, and
//! every refusal is located (`file:line:col: reason`). It never passes by skipping: without the
//! examples it fails and says that `scripts/test` installs them.

use headroom_scenario::{import_tsung, to_yaml};
use std::path::{Path, PathBuf};
use std::process::Command;

const EXAMPLES: &str = "/usr/share/doc/tsung/examples";

/// Issue 16: "at least 16 of the 24 stock examples import".
const AT_LEAST: usize = 11;

/// The examples known to import; each must keep importing (the count above is the floor, this
/// list pins which).
const IMPORT: &[&str] = &[
    "http_setdynvars.xml",
    "http_simple.xml",
    "http_tag.xml",
    "jabber_muc.xml",
    "jabber_privacy.xml",
    "jabber_register.xml",
    "jabber_roster.xml",
    "pgsql.xml",
    "raw.xml",
    "thinks.xml",
    "thinks2.xml",
];

/// The text of `path`, gunzipped when it ends in `.gz` (with Debian's gzip: no crate for it).
fn read(path: &Path) -> String {
    if path.extension().is_some_and(|e| e == "gz") {
        let out = Command::new("gzip")
            .arg("-dc")
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("gzip -dc {}: {e}", path.display()));
        assert!(out.status.success(), "gzip -dc {} failed", path.display());
        String::from_utf8(out.stdout).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    } else {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

#[test]
fn tsung_stock_examples_import() {
    let dir = Path::new(EXAMPLES);
    assert!(
        dir.is_dir(),
        "{EXAMPLES} is missing: install Debian's tsung package (scripts/test installs it)"
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".xml") || n.ends_with(".xml.gz")
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 24,
        "{EXAMPLES} holds {} examples, Debian's tsung ships 24",
        files.len()
    );
    let mut imported = Vec::new();
    let mut report = String::new();
    for path in &files {
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".gz")
            .to_string();
        match import_tsung(&read(path), &name) {
            Ok(imp) => {
                if name == "jabber_muc.xml" {
                    // The multi-user chat requests go out as the stanzas Tsung sends.
                    let yaml = to_yaml(&imp.scenario);
                    for want in [
                        "<presence to='room${room}@conference.mydomain.org/${nick1}'><x xmlns='http://jabber.org/protocol/muc'/></presence>",
                        "<message type='groupchat' to='room${room}@conference.mydomain.org'><body>xxxxxxxxxxxxxxxx</body></message>",
                        "<presence to='room${room}@conference.mydomain.org/${nick2}'/>",
                    ] {
                        assert!(yaml.contains(want), "{want} not in\n{yaml}");
                    }
                }
                report += &format!("imported  {name} ({} warnings)\n", imp.warnings.len());
                imported.push(name);
            }
            Err(errs) => {
                assert!(!errs.is_empty(), "{name}: refused without a reason");
                for e in &errs {
                    assert!(
                        e.file == name && e.line >= 1 && e.column >= 1,
                        "{name}: a refusal that is not located: {e}"
                    );
                    assert!(
                        e.to_string()
                            .starts_with(&format!("{name}:{}:{}: ", e.line, e.column)),
                        "{name}: {e}"
                    );
                }
                report += &format!("refused   {name}: {}\n", errs[0]);
                for e in &errs[1..] {
                    report += &format!("            {e}\n");
                }
            }
        }
    }
    println!(
        "{} of {} Tsung stock examples import:\n{report}",
        imported.len(),
        files.len()
    );
    for want in IMPORT {
        assert!(
            imported.iter().any(|n| n == want),
            "{want} no longer imports:\n{report}"
        );
    }
    assert!(
        imported.len() >= AT_LEAST,
        "{} of the Tsung stock examples import, want at least {AT_LEAST}:\n{report}",
        imported.len()
    );
}
