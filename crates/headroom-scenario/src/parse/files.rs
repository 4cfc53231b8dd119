//! `file` steps (Tsung's fs plugin) and the `files: {root}` section they work under: the
//! `impl Parser` half for them, split from `steps.rs` to keep files short. Paths are relative to
//! the root and checked here as written (no absolute path, no `..`); the engine checks them
//! again once their variables are in.

use super::{Parser, Vars};
use crate::model::*;
use headroom_core::session::file_path_problem as path_problem;
use marked_yaml::{Node, Span};

/// Every key of a `file` step mapping: one action, and `name`.
const FILE_KEYS: &[&str] = &[
    "mkdir",
    "rmdir",
    "delete",
    "stat",
    "read",
    "write",
    "open",
    "read_chunk",
    "write_chunk",
    "close",
    "symlink",
    "size",
    "mode",
    "link",
    "name",
];

/// The actions (the keys that name one).
const ACTIONS: &[&str] = &[
    "mkdir",
    "rmdir",
    "delete",
    "stat",
    "read",
    "write",
    "open",
    "read_chunk",
    "write_chunk",
    "close",
    "symlink",
];

/// A `file` step's metric name without `name`: `file:TYPE`.
pub(crate) fn default_file_name<T>(a: &FileAction<T>) -> String {
    format!("file:{}", a.type_name())
}

impl Parser {
    /// `files: {root: /absolute/dir}`.
    pub(super) fn files(&mut self, node: &Node) -> Option<String> {
        let m = self.map(node, "files")?;
        self.keys(m, "files", &["root"]);
        let n = self.required(m, "root", "files")?;
        let root = self.string(n, "root")?;
        if !root.starts_with('/') || root.contains('\0') || root.contains("${") {
            self.err(
                n.span(),
                "root: expected an absolute directory (file steps' paths are relative to it)",
            );
            return None;
        }
        Some(root)
    }

    /// `file: close` or `file: {ACTION: ..., name}`.
    pub(super) fn file_step(&mut self, at: &Span, node: &Node, vars: &Vars) -> Option<FileStep> {
        if !self.file_root {
            self.err(
                at,
                "a file step needs a top-level `files: {root: /dir}` section: the directory its \
                 paths are under",
            );
        }
        if let Some(s) = node.as_scalar() {
            if s.as_str() == "close" {
                return Some(FileStep {
                    name: default_file_name(&FileAction::<String>::Close),
                    action: FileAction::Close,
                });
            }
            self.err(
                node.span(),
                format!(
                    "file: expected close or a mapping with one of {}",
                    ACTIONS.join(", ")
                ),
            );
            return None;
        }
        let m = self.map(node, "file")?;
        self.keys(m, "file", FILE_KEYS);
        let given: Vec<&str> = ACTIONS
            .iter()
            .copied()
            .filter(|a| m.get_node(a).is_some())
            .collect();
        let kind = match given.as_slice() {
            [one] => *one,
            [] => {
                self.err(
                    m.span(),
                    format!("file: expected one of {}", ACTIONS.join(", ")),
                );
                return None;
            }
            [first, second, ..] => {
                let span = *m.get_node(second).map_or(m.span(), |n| n.span());
                self.err(
                    &span,
                    format!(
                        "a file step takes one action ('{second}' is a second one after '{first}')"
                    ),
                );
                return None;
            }
        };
        let allowed: &[&str] = match kind {
            "write" => &["size"],
            "open" => &["mode"],
            "symlink" => &["link"],
            _ => &[],
        };
        for extra in ["size", "mode", "link"] {
            if let (Some(n), false) = (m.get_node(extra), allowed.contains(&extra)) {
                self.err(
                    n.span(),
                    format!("'{extra}' does not apply to a file {kind}"),
                );
            }
        }
        let v = m.get_node(kind)?;
        let path = |p: &mut Self, n: &Node, what: &str| -> Option<String> {
            let s = p.string(n, what)?;
            if let Some(why) = path_problem(&s) {
                p.err(n.span(), format!("{what}: {why}"));
                return None;
            }
            p.refs(n, &s, vars);
            Some(s)
        };
        let bytes = |p: &mut Self, n: &Node, what: &str, zero: bool| -> Option<u64> {
            let v = n
                .as_scalar()
                .and_then(|s| s.as_str().trim().parse::<u64>().ok())
                .filter(|&v| v <= MAX_FILE_BYTES && (zero || v > 0));
            if v.is_none() {
                let least = if zero { 0 } else { 1 };
                p.err(
                    n.span(),
                    format!("{what}: expected bytes, {least} to {MAX_FILE_BYTES} (64 MiB)"),
                );
            }
            v
        };
        let action = match kind {
            "mkdir" => FileAction::MakeDir(path(self, v, "mkdir")?),
            "rmdir" => FileAction::RemoveDir(path(self, v, "rmdir")?),
            "delete" => FileAction::Delete(path(self, v, "delete")?),
            "stat" => FileAction::Stat(path(self, v, "stat")?),
            "read" => FileAction::Read(path(self, v, "read")?),
            "write" => {
                let p = path(self, v, "write");
                // Tsung's default size.
                let size = match m.get_node("size") {
                    Some(n) => bytes(self, n, "size", true),
                    None => Some(1024),
                };
                FileAction::Write {
                    path: p?,
                    size: size?,
                }
            }
            "open" => {
                let p = path(self, v, "open");
                let write = match m.get_node("mode") {
                    Some(n) => match n.as_scalar().map(|s| s.as_str()) {
                        Some("read") => Some(false),
                        Some("write") => Some(true),
                        _ => {
                            self.err(n.span(), "mode: expected read or write");
                            None
                        }
                    },
                    None => {
                        self.err(m.span(), "file open is missing 'mode' (read or write)");
                        None
                    }
                };
                FileAction::Open {
                    path: p?,
                    write: write?,
                }
            }
            "read_chunk" => FileAction::ReadChunk(bytes(self, v, "read_chunk", false)?),
            "write_chunk" => FileAction::WriteChunk(bytes(self, v, "write_chunk", false)?),
            "close" => {
                if v.as_scalar().and_then(|s| s.as_bool()) != Some(true) {
                    self.err(v.span(), "close: expected true");
                    return None;
                }
                FileAction::Close
            }
            _ => {
                let target = path(self, v, "symlink");
                let link = match m.get_node("link") {
                    Some(n) => path(self, n, "link"),
                    None => {
                        self.err(
                            m.span(),
                            "file symlink is missing 'link' (the link to make)",
                        );
                        None
                    }
                };
                FileAction::Symlink {
                    target: target?,
                    link: link?,
                }
            }
        };
        let name = match m.get_node("name") {
            Some(n) => self.name(n, "name")?,
            None => default_file_name(&action),
        };
        Some(FileStep { name, action })
    }
}
