//! SURGE file sets (Barford & Crovella 1998): the files a reference server serves so that a
//! `surge` scenario session has files of SURGE's sizes to request.
//!
//! The file of popularity rank r is `DIR/<SurgeParams::file_rel_name(r)>` (e.g.
//! `DIR/000017.html`), its size drawn from the lognormal-body / Pareto-tail model with the
//! seeded generator of [`SurgeParams::file_sizes`], independently of its rank. A manifest,
//! `DIR/surge-manifest.json` ([`MANIFEST`]), records the parameters, the seed and every file's
//! rank, name and size. The sampling code is `headroom_core::surge`; this module does the I/O:
//! [`params_from_flags`] checks the parameters, [`write_fileset`] writes the set and the
//! manifest, [`FilesetSummary::paragraph`] says what was written.
//!
//! It sits beside the servers that serve the set (`headroom serve --docroot DIR`); its caller is
//! the binary's `headroom surge fileset` command (`surge.rs` there: the flags and printing). A
//! [`FilesetError::Usage`] is bad input (the command exits 2), a [`FilesetError::Io`] a failure
//! of the file system (exit 1).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use headroom_core::numbers::thousands;
use headroom_core::surge::SurgeParams;

/// Name of the manifest written next to the files.
pub const MANIFEST: &str = "surge-manifest.json";

/// Why a file set was not written.
#[derive(Debug)]
pub enum FilesetError {
    /// Bad input: exit code 2.
    Usage(String),
    /// The file system failed: exit code 1.
    Io(String),
}

impl std::fmt::Display for FilesetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FilesetError::Usage(m) | FilesetError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for FilesetError {}

/// What was written.
#[derive(Debug, Clone)]
pub struct FilesetSummary {
    pub dir: PathBuf,
    pub params: SurgeParams,
    /// Sizes by rank.
    pub sizes: Vec<u64>,
}

impl FilesetSummary {
    pub fn total_bytes(&self) -> u64 {
        self.sizes.iter().sum()
    }

    /// The one-paragraph report printed after writing.
    pub fn paragraph(&self) -> String {
        let n = self.sizes.len() as u64;
        let total = self.total_bytes();
        let mut sorted = self.sizes.clone();
        sorted.sort_unstable();
        let median = match sorted.len() {
            0 => 0.0,
            l if l % 2 == 1 => sorted[l / 2] as f64,
            l => (sorted[l / 2 - 1] + sorted[l / 2]) as f64 / 2.0,
        };
        let max = sorted.last().copied().unwrap_or(0);
        let mean = if n == 0 { 0.0 } else { total as f64 / n as f64 };
        let tail = self
            .sizes
            .iter()
            .filter(|&&s| s as f64 >= self.params.tail_k)
            .count();
        let p = &self.params;
        format!(
            "headroom surge: wrote {} SURGE files (seed {}) to {}: {} in total; size mean {}, \
             median {}, max {}; {} files ({:.1}%) in the Pareto tail at or above {} bytes. The manifest \
             is {}. Serve the set with `headroom serve --docroot {}` and load it with the \
             scenario session `sessions: [{{name: web, surge: {{files: {}}}}}]`; file {} is the \
             most popular, {} the least.",
            thousands(n),
            p.seed,
            self.dir.display(),
            human_bytes(total as f64),
            human_bytes(mean),
            human_bytes(median),
            human_bytes(max as f64),
            thousands(tail as u64),
            if n == 0 {
                0.0
            } else {
                100.0 * tail as f64 / n as f64
            },
            thousands(p.tail_k.round() as u64),
            self.dir.join(MANIFEST).display(),
            self.dir.display(),
            p.files,
            p.file_name(0),
            p.file_name(p.files.saturating_sub(1)),
        )
    }
}

/// The parameters of `headroom surge fileset`'s flags: defaults, then `--files` and `--seed`,
/// then each `--set KEY=VALUE` in order; the errors name the flag.
pub fn params_from_flags(
    files: u64,
    seed: u64,
    sets: &[String],
) -> Result<SurgeParams, FilesetError> {
    let usage = FilesetError::Usage;
    let mut p = SurgeParams::default();
    p.set("files", files as f64)
        .map_err(|e| usage(format!("bad --files {files}: {}", after_colon(&e))))?;
    p.set("seed", seed as f64)
        .map_err(|e| usage(format!("bad --seed {seed}: {}", after_colon(&e))))?;
    for kv in sets {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(usage(format!(
                "bad --set '{kv}': expected KEY=VALUE, e.g. --set tail_fraction=0.07"
            )));
        };
        let (k, v) = (k.trim(), v.trim());
        let value: f64 = v.parse().map_err(|_| {
            usage(format!(
                "bad --set '{kv}': '{v}' is not a number (durations are in seconds)"
            ))
        })?;
        p.set(k, value).map_err(usage)?;
    }
    p.validate().map_err(usage)?;
    Ok(p)
}

/// Write the file set of `params` into `dir` (created if missing; must be empty unless
/// `force`), then the manifest.
pub fn write_fileset(
    dir: &Path,
    params: &SurgeParams,
    force: bool,
) -> Result<FilesetSummary, FilesetError> {
    params.validate().map_err(FilesetError::Usage)?;
    let shown = dir.display();
    match fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(FilesetError::Usage(format!(
                "'{shown}' exists and is not a directory"
            )))
        }
        Ok(_) => {
            let mut entries = fs::read_dir(dir)
                .map_err(|e| FilesetError::Io(format!("cannot read directory {shown}: {e}")))?;
            if !force && entries.next().is_some() {
                return Err(FilesetError::Usage(format!(
                    "'{shown}' is not empty; pick an empty or new directory, or add --force to \
                     write into it (files of the same names are replaced)"
                )));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(dir)
            .map_err(|e| FilesetError::Io(format!("cannot create directory {shown}: {e}")))?,
        Err(e) => return Err(FilesetError::Io(format!("cannot access {shown}: {e}"))),
    }

    let sizes = params.file_sizes();
    let filler = filler_block();
    for (rank, &size) in sizes.iter().enumerate() {
        let rank = rank as u64;
        let path = dir.join(params.file_rel_name(rank));
        write_file(&path, rank, size, &filler)
            .map_err(|e| FilesetError::Io(format!("cannot write {}: {e}", path.display())))?;
    }

    let summary = FilesetSummary {
        dir: dir.to_path_buf(),
        params: params.clone(),
        sizes,
    };
    let manifest = manifest_text(&summary);
    let path = dir.join(MANIFEST);
    let tmp = dir.join(format!(".{MANIFEST}.tmp"));
    let write = || -> io::Result<()> {
        let mut f = BufWriter::new(File::create(&tmp)?);
        f.write_all(manifest.as_bytes())?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| FilesetError::Io(format!("cannot write {}: {e}", path.display())))?;
    Ok(summary)
}

/// The manifest as pretty JSON, keys in a fixed order (model, seed, parameters, totals, then one
/// line per file: rank, name, url, size).
pub fn manifest_text(s: &FilesetSummary) -> String {
    use serde_json::{json, Map, Value};
    let p = &s.params;
    let mut params = Map::new();
    for k in SurgeParams::KEYS {
        let v = p.get(k).expect("every key has a value");
        let v = if v.fract() == 0.0 && v.abs() < 9.0e15 {
            json!(v as i64)
        } else {
            json!(v)
        };
        params.insert((*k).to_string(), v);
    }
    params.insert("prefix".into(), json!(p.prefix));
    let j = |v: Value| v.to_string();
    let mut out = String::with_capacity(200 + s.sizes.len() * 80);
    out.push_str("{\n");
    let head = [
        (
            "generator",
            j(json!(format!(
                "headroom {} surge fileset",
                env!("CARGO_PKG_VERSION")
            ))),
        ),
        (
            "model",
            j(json!(
                "SURGE (Barford & Crovella, SIGMETRICS 1998): lognormal-body/Pareto-tail file \
                 sizes, independent of the Zipf popularity ranks"
            )),
        ),
        ("seed", j(json!(p.seed))),
        ("params", j(Value::Object(params))),
        ("file_count", j(json!(s.sizes.len()))),
        ("total_bytes", j(json!(s.total_bytes()))),
    ];
    for (k, v) in head {
        out.push_str(&format!("  \"{k}\": {v},\n"));
    }
    out.push_str("  \"files\": [\n");
    for (rank, &size) in s.sizes.iter().enumerate() {
        let rank = rank as u64;
        let sep = if rank + 1 == s.sizes.len() as u64 {
            ""
        } else {
            ","
        };
        out.push_str(&format!(
            "    {{\"rank\": {rank}, \"name\": {}, \"url\": {}, \"size\": {size}}}{sep}\n",
            j(json!(p.file_rel_name(rank))),
            j(json!(p.file_name(rank))),
        ));
    }
    out.push_str("  ]\n}\n");
    out
}

/// 64 KiB of HTML-ish text, written repeatedly as the body of every file.
fn filler_block() -> Vec<u8> {
    let line = b"<p>SURGE filler: the quick brown fox jumps over the lazy dog 0123456789.</p>\n";
    let mut block = Vec::with_capacity(64 * 1024);
    while block.len() + line.len() <= 64 * 1024 {
        block.extend_from_slice(line);
    }
    block
}

/// Write exactly `size` bytes: an HTML head naming the rank, filler, and the closing tags (or,
/// for files too small for head and tail, just the first `size` bytes of filler).
fn write_file(path: &Path, rank: u64, size: u64, filler: &[u8]) -> io::Result<()> {
    let head =
        format!("<!DOCTYPE html>\n<html><head><title>SURGE file {rank}</title></head><body>\n");
    let foot: &[u8] = b"</body></html>\n";
    let mut f = BufWriter::with_capacity(64 * 1024, File::create(path)?);
    let size = size as usize;
    let body = if size >= head.len() + foot.len() {
        f.write_all(head.as_bytes())?;
        size - head.len() - foot.len()
    } else {
        size
    };
    let mut left = body;
    while left > 0 {
        let n = left.min(filler.len());
        f.write_all(&filler[..n])?;
        left -= n;
    }
    if body != size {
        f.write_all(foot)?;
    }
    f.flush()
}

/// The part of a core error message after "bad SURGE key value: ", for flag-specific messages.
fn after_colon(e: &str) -> &str {
    e.split_once(": ").map_or(e, |(_, rest)| rest)
}

/// Bytes in binary units: 812 B, 11.3 KiB, 109.8 MiB.
fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024.0 {
        return format!("{b:.0} B");
    }
    let mut v = b / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::stats::{ks_critical, ks_statistic};

    /// `headroom surge fileset DIR EXTRA...` as the command does it (`--files` defaults to
    /// 2000, `--seed` to 0), for the flags the tests use.
    fn fileset(dir: &Path, extra: &[&str]) -> Result<FilesetSummary, FilesetError> {
        let (mut files, mut seed, mut sets, mut force) = (2000, 0, Vec::new(), false);
        let mut it = extra.iter();
        while let Some(&flag) = it.next() {
            let mut value = || *it.next().expect("a value");
            match flag {
                "--files" => files = value().parse().unwrap(),
                "--seed" => seed = value().parse().unwrap(),
                "--set" => sets.push(value().to_string()),
                "--force" => force = true,
                _ => panic!("{flag}?"),
            }
        }
        write_fileset(dir, &params_from_flags(files, seed, &sets)?, force)
    }

    #[test]
    fn writes_the_files_and_a_matching_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("set");
        let s = fileset(&dir, &["--files", "3000", "--seed", "11"]).unwrap();
        let p = &s.params;
        assert_eq!((p.files, p.seed), (3000, 11));

        // Exactly the files plus the manifest.
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 3001);
        assert_eq!(names.last().unwrap(), MANIFEST);
        assert_eq!(names[0], "000000.html");

        // The manifest lists every file with its size on disk.
        let m: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(m["file_count"], 3000);
        assert_eq!(m["seed"], 11);
        assert_eq!(m["params"]["files"], 3000);
        assert_eq!(m["params"]["size_mu"], 9.357);
        assert_eq!(m["params"]["prefix"], "/file/");
        let files = m["files"].as_array().unwrap();
        assert_eq!(files.len(), 3000);
        let mut total = 0;
        let mut sizes = Vec::new();
        for (rank, f) in files.iter().enumerate() {
            assert_eq!(f["rank"], rank as u64);
            let name = f["name"].as_str().unwrap();
            assert_eq!(name, p.file_rel_name(rank as u64));
            assert_eq!(f["url"], p.file_name(rank as u64));
            let size = f["size"].as_u64().unwrap();
            assert_eq!(fs::metadata(dir.join(name)).unwrap().len(), size, "{name}");
            total += size;
            sizes.push(size as f64);
        }
        assert_eq!(m["total_bytes"], total);
        assert_eq!(total, s.total_bytes());

        // The sizes follow the model (KS at 0.1%).
        sizes.sort_by(f64::total_cmp);
        let d = ks_statistic(&sizes, |x| p.file_size_cdf(x));
        let c = ks_critical(sizes.len(), 0.001);
        assert!(d < c, "KS D {d} >= {c}");

        // Content: HTML head and tail around the filler, when there is room.
        let big = files
            .iter()
            .find(|f| f["size"].as_u64().unwrap() > 200)
            .unwrap();
        let body = fs::read(dir.join(big["name"].as_str().unwrap())).unwrap();
        assert!(body.starts_with(b"<!DOCTYPE html>"));
        assert!(body.ends_with(b"</body></html>\n"));

        let text = s.paragraph();
        assert!(
            text.contains("3,000 SURGE files") && text.contains("--docroot"),
            "{text}"
        );
        assert!(text.contains("surge: {files: 3000}"), "{text}");
    }

    #[test]
    fn the_same_seed_writes_the_same_set() {
        let tmp = tempfile::tempdir().unwrap();
        let a = fileset(&tmp.path().join("a"), &["--files", "50"]).unwrap();
        let b = fileset(&tmp.path().join("b"), &["--files", "50"]).unwrap();
        assert_eq!(a.sizes, b.sizes);
        let c = fileset(&tmp.path().join("c"), &["--files", "50", "--seed", "1"]).unwrap();
        assert_ne!(a.sizes, c.sizes);
    }

    #[test]
    fn tiny_files_are_exact_too() {
        let tmp = tempfile::tempdir().unwrap();
        let filler = filler_block();
        for size in [1u64, 10, 90, 100, 65_536, 200_000] {
            let path = tmp.path().join(format!("f{size}"));
            write_file(&path, 3, size, &filler).unwrap();
            assert_eq!(fs::metadata(&path).unwrap().len(), size);
        }
    }

    #[test]
    fn bad_input_is_a_usage_error_and_io_failure_an_io_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("x");
        let usage = |extra: &[&str]| match fileset(&dir, extra) {
            Err(FilesetError::Usage(m)) => m,
            other => panic!("{extra:?}: expected a usage error, got {other:?}"),
        };
        let m = usage(&["--set", "nope=1"]);
        assert!(m.contains("unknown SURGE parameter 'nope'"), "{m}");
        let m = usage(&["--set", "tail_fraction=2"]);
        assert!(
            m.contains("tail_fraction") && m.contains("allowed 0 to 1"),
            "{m}"
        );
        let m = usage(&["--set", "tail_fraction"]);
        assert!(m.contains("KEY=VALUE"), "{m}");
        let m = usage(&["--set", "off_k=1s"]);
        assert!(m.contains("not a number"), "{m}");
        let m = usage(&["--files", "0"]);
        assert!(m.starts_with("bad --files 0: allowed"), "{m}");
        assert!(!dir.exists(), "nothing written on bad input");

        // A non-empty directory needs --force.
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("other.txt"), "x").unwrap();
        let m = usage(&["--files", "5"]);
        assert!(m.contains("not empty") && m.contains("--force"), "{m}");
        let s = fileset(&dir, &["--files", "5", "--force"]).unwrap();
        assert_eq!(s.sizes.len(), 5);
        assert!(dir.join("other.txt").exists());

        // DIR is a file: usage. DIR under a file: I/O.
        let file = tmp.path().join("plain");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            fileset(&file, &["--files", "5"]),
            Err(FilesetError::Usage(_))
        ));
        match fileset(&file.join("sub"), &["--files", "5"]) {
            Err(FilesetError::Io(m)) => assert!(m.contains("plain"), "{m}"),
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }

    #[test]
    fn human_figures() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(human_bytes(812.0), "812 B");
        assert_eq!(human_bytes(11_571.0), "11.3 KiB");
        assert_eq!(human_bytes(64.0 * 1024.0 * 1024.0), "64.0 MiB");
    }
}
