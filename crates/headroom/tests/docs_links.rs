//! Every relative link in the README, the CHANGELOG and the docs resolves inside the
//! repository (a clone has nothing beside it), and a `#anchor` into a Markdown file names one
//! of its headings (GitHub's slugs: lower case, punctuation dropped, spaces as dashes).

mod common;

use std::path::PathBuf;

fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn headings(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim_start_matches('#');
            (l.starts_with('#') && t.starts_with(' ')).then(|| slug(t))
        })
        .collect()
}

/// The targets of `[text](target)` in `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find([')', ' ', '\n']) {
            out.push(rest[..end].to_string());
        }
    }
    out
}

#[test]
fn links_in_the_readme_and_docs_resolve_inside_the_repository() {
    let root = std::fs::canonicalize(common::repo_root()).unwrap();
    let mut files: Vec<PathBuf> = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    for dir in ["docs", "bench"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 10, "{files:?}");
    let mut bad = Vec::new();
    let mut checked = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(path)
            };
            let Ok(real) = std::fs::canonicalize(&file) else {
                bad.push(format!("{}: {target}: no such file", f.display()));
                continue;
            };
            if !real.starts_with(&root) {
                bad.push(format!("{}: {target}: outside the repository", f.display()));
                continue;
            }
            if !anchor.is_empty() && real.extension().is_some_and(|x| x == "md") {
                let heads = headings(&std::fs::read_to_string(&real).unwrap());
                if !heads.iter().any(|h| h == anchor) {
                    bad.push(format!("{}: {target}: no such heading", f.display()));
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} links found");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
