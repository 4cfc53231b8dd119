//! No module of a workspace crate imports, through `use crate::...` paths, a module that imports
//! it back (issue 28): a circle means two modules are one responsibility split in the wrong
//! place. Only top-level modules count (`src/x.rs` and `src/x/**`), test code is skipped.
//!
//! Known circles are listed below (none today); the list may only shrink: a new circle fails,
//! and so does a listed one that is gone (take it off the list).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// (crate, module, module) pairs that import each other today: none.
const KNOWN: [(&str, &str, &str); 0] = [];

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level module -> the top-level modules it names as `crate::m`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let top = |p: &Path| -> String {
        let rel = p.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = files.iter().map(|f| top(f)).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        if name.starts_with("tests") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let from = top(f);
        let entry = g.entry(from.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut rest = line;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                // `crate::m::...`, `crate::m`, or `crate::{a, b::c}`.
                let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    group[..end]
                        .split(',')
                        .map(|s| s.trim().split("::").next().unwrap_or(""))
                        .collect()
                } else {
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    vec![&rest[..end]]
                };
                for n in names {
                    if n != from && modules.contains(n) && n != "lib" && n != "main" {
                        entry.insert(n.to_string());
                    }
                }
            }
        }
    }
    g
}

/// Every pair of modules on a common circle, as (smaller, larger) names.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<(String, String)> {
    // Reachability by a depth-first walk from each module (the graphs have a few dozen nodes).
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(n) = stack.pop() {
            for d in g.get(&n).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    stack.push(d.clone());
                }
            }
        }
        seen
    };
    let all: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|k| (k, reach(k))).collect();
    let mut out = BTreeSet::new();
    for (a, ra) in &all {
        for b in ra {
            if *a < b && all.get(b).is_some_and(|rb| rb.contains(*a)) {
                out.insert(((*a).clone(), b.clone()));
            }
        }
    }
    out
}

#[test]
fn no_new_module_circle_in_any_crate() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = BTreeSet::new();
    let mut checked = 0;
    for e in std::fs::read_dir(&crates).unwrap() {
        let dir = e.unwrap().path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for (a, b) in circles(&graph(&src)) {
            found.insert((name.clone(), a, b));
        }
    }
    assert!(
        checked >= 12,
        "only {checked} crates found under {crates:?}"
    );
    let known: BTreeSet<(String, String, String)> = KNOWN
        .iter()
        .map(|(c, a, b)| (c.to_string(), a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(new.is_empty(), "modules that import each other: {new:?}");
    assert!(
        gone.is_empty(),
        "circles fixed: take them off KNOWN: {gone:?}"
    );
}

#[test]
fn a_circle_is_found() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    let c = circles(&g);
    assert!(c.contains(&("a".into(), "c".into())), "{c:?}");
    assert!(!c.iter().any(|(x, y)| x == "d" || y == "d"), "{c:?}");
}
