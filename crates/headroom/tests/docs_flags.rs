//! docs/cli.md against the binary (issue 27): every long flag a subcommand defines (its
//! `--help`, nested subcommands included) is named in docs/cli.md, and every `--flag` the page
//! names is defined by some subcommand, so neither drifts from the other.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{headroom, repo_root};

/// Flags that need no line of their own, each with its reason.
const EXCEPTIONS: &[(&str, &str)] = &[
    ("--help", "clap's own, on every subcommand"),
    ("--version", "clap's own, on every subcommand"),
];

/// Flags docs/cli.md names that are other tools', each with its reason.
const OTHER_TOOLS: &[(&str, &str)] = &[
    ("--vus", "k6's, which `-c` with a file is compared to"),
    (
        "--wsesslog",
        "httperf's: the session file format `import httperf` reads",
    ),
];

/// `headroom ARGS --help`.
fn help(args: &[&str]) -> String {
    let out = headroom().args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "headroom {args:?} --help: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The names under `Commands:` (but `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's line is indented by two; its description's later lines by more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags an option line defines: `  -c, --connections <N>`, `      --http2`. Flags
/// named in descriptions (other tools' flags, examples) are not definitions.
fn defined(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = match t.strip_prefix('-') {
                Some(rest) if !rest.starts_with('-') => rest.split_once(", ")?.1,
                _ => t,
            };
            t.strip_prefix("--")
                .map(|rest| rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')))
                .and_then(|mut words| words.next())
                .filter(|w| !w.is_empty())
                .map(|w| format!("--{w}"))
        })
        .collect()
}

/// Every `--flag` written in `text`.
fn named(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-'
            && b[i + 1] == b'-'
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-'))
            && (b[i + 2].is_ascii_lowercase() || b[i + 2].is_ascii_digit());
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while j < b.len() && (b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'-') {
            j += 1;
        }
        out.insert(text[i..j].trim_end_matches('-').to_string());
        i = j;
    }
    out
}

/// Every subcommand path (`["run"]`, `["import", "har"]`, ...) with the flags it defines.
fn all_flags() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<Vec<String>> = subcommands(&help(&[]))
        .into_iter()
        .map(|c| vec![c])
        .collect();
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let h = help(&args);
        for c in subcommands(&h) {
            let mut p = path.clone();
            p.push(c);
            todo.push(p);
        }
        out.insert(path.join(" "), defined(&h));
    }
    out
}

#[test]
fn the_parsers_read_what_they_should() {
    let h = "Options:\n  -c, --connections <N>\n          Users (--rate)\n      --http2\n      \
             --set <KEY=VALUE>\n  -h, --help\n\nExamples:\n  kubectl --from-literal x\n";
    assert_eq!(
        defined(h),
        BTreeSet::from([
            "--connections".into(),
            "--http2".into(),
            "--set".into(),
            "--help".into()
        ])
    );
    assert_eq!(
        named("`--tls-min/--tls-max`, a-- b, ---x, --http2."),
        BTreeSet::from(["--tls-min".into(), "--tls-max".into(), "--http2".into()])
    );
    assert_eq!(
        subcommands("Commands:\n  run   Load\n        more\n  help  Print\n\nOptions:\n"),
        vec!["run".to_string()]
    );
}

#[test]
fn docs_cli_md_names_every_flag_and_only_flags_that_exist() {
    let doc = std::fs::read_to_string(repo_root().join("docs/cli.md")).unwrap();
    let in_doc = named(&doc);
    let flags = all_flags();
    for sub in ["run", "serve", "agent", "import har", "k8s manifest"] {
        assert!(flags.contains_key(sub), "no subcommand {sub}: {flags:?}");
    }
    assert!(flags["run"].contains("--http2"), "{:?}", flags["run"]);
    let excepted: BTreeSet<&str> = EXCEPTIONS.iter().map(|(f, _)| *f).collect();

    let mut missing = Vec::new();
    for (sub, fs) in &flags {
        for f in fs {
            if !in_doc.contains(f) && !excepted.contains(f.as_str()) {
                missing.push(format!("headroom {sub} {f}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/cli.md does not name these flags:\n{}",
        missing.join("\n")
    );

    let every: BTreeSet<&String> = flags.values().flatten().collect();
    let others: BTreeSet<&str> = OTHER_TOOLS.iter().map(|(f, _)| *f).collect();
    let stale: Vec<&String> = in_doc
        .iter()
        .filter(|f| !every.contains(f) && !others.contains(f.as_str()))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/cli.md names flags no subcommand has: {stale:?}"
    );
}
