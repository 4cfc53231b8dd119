//! Tsung's `ts_fs` sessions (the fs plugin, `ts_fs.erl` and `ts_config_fs`): each `<fs cmd>`
//! is a file operation on the machine Tsung runs on, which becomes a `file` step. The commands:
//! `make_dir`, `del_dir`, `delete`, `stat`, `read` (the whole file), `write` (a file of `size`
//! bytes, default 1024), `open` (`mode` read or write, Tsung's default write) with the
//! `read_chunk` / `write_chunk` (`size` bytes) that follow it, `close`, and `make_symlink`
//! (`path` the existing file, `dest` the link).
//!
//! Tsung's paths are absolute; headroom's are relative to the scenario's `files: {root}`. The
//! root is the deepest directory every path of the file starts with before its first variable
//! (`/mnt/bench` for `/mnt/bench/%%_tsung_userid%%/...`), found once the sessions are
//! converted ([`Conv::file_root`]), and the steps' paths are cut below it.

use super::proto::Produced;
use super::{Conv, El};
use crate::model::*;

impl Conv<'_> {
    pub(super) fn fs(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> Produced {
        self.check_attrs(el, &["cmd", "size", "path", "mode", "dest", "position"]);
        self.no_text(el);
        for c in &el.children {
            self.unexpected(c, "fs");
        }
        self.ignored(
            el,
            "position",
            "headroom's chunks follow one another from the start of the file",
        );
        // Tsung's defaults: cmd write, size 1024, mode write.
        let cmd = el.attr("cmd").map_or("write", |a| a.value.as_str());
        let size = match el.attr("size") {
            None => Some(1024),
            Some(a) => match a.value.trim().parse::<u64>() {
                Ok(v) if v <= MAX_FILE_BYTES => Some(v),
                _ => {
                    let pos = a.pos;
                    self.error(
                        pos,
                        format!(
                            "size=\"{}\": expected bytes, 0 to {MAX_FILE_BYTES} (64 MiB)",
                            a.value
                        ),
                    );
                    None
                }
            },
        };
        let uses = |key: &str| match cmd {
            "open" => ["path", "mode"].contains(&key),
            "read_chunk" | "write_chunk" => key == "size",
            "write" => ["path", "size"].contains(&key),
            "make_symlink" => ["path", "dest"].contains(&key),
            "close" => false,
            _ => key == "path",
        };
        for key in ["size", "path", "mode", "dest"] {
            if !uses(key) {
                self.ignored(el, key, &format!("cmd=\"{cmd}\" does not use it"));
            }
        }
        let path = |conv: &mut Self, key: &str| -> Option<String> {
            let a = conv.required(el, key)?;
            let (v, pos) = (a.value.clone(), a.pos);
            if !v.starts_with('/') {
                conv.error(
                    pos,
                    format!("{key}=\"{v}\": a relative path, which Tsung opens from its working directory; headroom needs an absolute one (its directory becomes the files root)"),
                );
                return None;
            }
            let p = conv.subst(&v, pos, subst)?;
            conv.fs_paths.push((p.clone(), pos));
            Some(p)
        };
        let action = match cmd {
            "make_dir" => path(self, "path").map(FileAction::MakeDir),
            "del_dir" => path(self, "path").map(FileAction::RemoveDir),
            "delete" => path(self, "path").map(FileAction::Delete),
            "stat" => path(self, "path").map(FileAction::Stat),
            "read" => path(self, "path").map(FileAction::Read),
            "write" => {
                let p = path(self, "path");
                p.zip(size)
                    .map(|(path, size)| FileAction::Write { path, size })
            }
            "open" => {
                let p = path(self, "path");
                let write = match el.attr("mode").map(|a| (a.value.as_str(), a.pos)) {
                    None | Some(("write", _)) => Some(true),
                    Some(("read", _)) => Some(false),
                    Some((m, pos)) => {
                        let msg = format!("mode=\"{m}\": expected read or write");
                        self.error(pos, msg);
                        None
                    }
                };
                p.zip(write)
                    .map(|(path, write)| FileAction::Open { path, write })
            }
            "read_chunk" | "write_chunk" => match size {
                Some(0) => {
                    self.error(
                        el.pos,
                        format!("cmd=\"{cmd}\" with size=\"0\": a chunk is at least 1 byte"),
                    );
                    None
                }
                Some(n) if cmd == "read_chunk" => Some(FileAction::ReadChunk(n)),
                Some(n) => Some(FileAction::WriteChunk(n)),
                None => None,
            },
            "close" => Some(FileAction::Close),
            "make_symlink" => {
                let target = path(self, "path");
                let link = path(self, "dest");
                target
                    .zip(link)
                    .map(|(target, link)| FileAction::Symlink { target, link })
            }
            other => {
                let pos = el.attr("cmd").map_or(el.pos, |a| a.pos);
                self.error(
                    pos,
                    format!("cmd=\"{other}\": expected read, write, open, read_chunk, write_chunk, close, delete, del_dir, make_dir, make_symlink or stat"),
                );
                None
            }
        };
        let Some(action) = action else {
            return Produced::Nothing;
        };
        out.push(Step::File(FileStep {
            name: format!("file:{}", action.type_name()),
            action,
        }));
        Produced::Unreadable
    }

    /// The files root of the file's `fs` paths (the deepest directory all of them start with
    /// before their first variable), and the steps' paths cut below it; `None` without `fs`
    /// steps.
    pub(super) fn file_root(&mut self, sessions: &mut [Session]) -> Option<String> {
        let paths = std::mem::take(&mut self.fs_paths);
        let mut root: Option<Vec<String>> = None;
        for (p, _) in &paths {
            let literal = &p[..p.find("${").unwrap_or(p.len())];
            // Its directory: a path is never the root itself.
            let dir: Vec<String> = literal
                .rsplit_once('/')
                .map_or("", |(d, _)| d)
                .split('/')
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
            root = Some(match root {
                None => dir,
                Some(r) => r
                    .iter()
                    .zip(&dir)
                    .take_while(|(a, b)| a == b)
                    .map(|(a, _)| a.clone())
                    .collect(),
            });
        }
        let root = format!("/{}", root?.join("/"));
        for (p, pos) in &paths {
            let rest = cut(p, &root);
            if let Some(why) = headroom_core::session::file_path_problem(rest) {
                self.error(*pos, format!("path \"{p}\": {why}"));
            }
        }
        for s in sessions {
            cut_steps(&mut s.steps, &root);
        }
        Some(root)
    }
}

/// `path` below `root` (`root` with or without its own `/`).
fn cut<'p>(path: &'p str, root: &str) -> &'p str {
    let rest = path.strip_prefix(root).unwrap_or(path);
    rest.strip_prefix('/').unwrap_or(rest)
}

fn cut_steps(steps: &mut [Step], root: &str) {
    for s in steps {
        match s {
            Step::File(f) => {
                let a = std::mem::replace(&mut f.action, FileAction::Close);
                f.action = a
                    .map_path(|p| Ok::<_, ()>(cut(&p, root).to_string()))
                    .unwrap_or(FileAction::Close);
            }
            Step::Loop(l) => cut_steps(&mut l.steps, root),
            Step::Transaction { steps, .. } => cut_steps(steps, root),
            _ => {}
        }
    }
}
