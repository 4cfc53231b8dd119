//! The one way headroom reads a file the user names: the scenario, its `include:`s, its CSV
//! feeders and TLS files, `--body @FILE`, an experiment. Only regular files are read (never a
//! device, a pipe or a directory: `/dev/zero` or a FIFO would be read forever), and only up to a
//! size limit, checked on the metadata first and enforced while reading (a file that grows, or a
//! `/proc` file whose size says 0, still stops at the limit).

use std::io::Read;
use std::path::Path;

/// Scenario files (YAML, Tsung XML), their `include:`s and experiment files: 4 MiB each.
///
/// Memory, not disk, sets it: a scenario is parsed into a YAML tree that keeps a line and
/// column on every node, then into the model and the compiled program, ~75 bytes a byte of
/// dense YAML at the peak (measured: 4 MiB of `- request: GET /a` lines, 304 MB). Was 16 MiB
/// (64 MiB of includes took over 3 GB); see docs/scenario.md, "Files it reads".
pub const MAX_SCENARIO_BYTES: u64 = 4 << 20;

/// A whole scenario as native YAML, its includes inlined or converted from a Tsung XML or a
/// HAR: 16 MiB (the text a run's spec carries and its builder parses; see
/// [`MAX_SCENARIO_BYTES`] for what a byte of it costs).
pub const MAX_SCENARIO_TEXT: u64 = 16 << 20;

/// Data files a scenario or the command line names: CSV feeders, TLS certificates and keys,
/// `--body @FILE`: 256 MiB. Each is held in memory (and carried to agents in the run's spec):
/// a CSV feeder as its text plus 4 bytes a row (`headroom_core::session::Feeder`), so a run
/// holds at most ~2 bytes a byte of a feeder, 4 for rows of one character (docs/scenario.md).
pub const MAX_DATA_BYTES: u64 = 256 << 20;

/// The bytes of the regular file at `path`, at most `limit` of them; otherwise one line saying
/// why, naming the file as `what` (e.g. "include", "CSV file").
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    let name = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {what} '{name}': {e}"))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "a device, pipe or socket"
        };
        return Err(format!(
            "{what} '{name}' is {kind}, not a regular file (only regular files are read)"
        ));
    }
    if meta.len() > limit {
        return Err(too_big(what, &name.to_string(), meta.len(), limit));
    }
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {what} '{name}': {e}"))?;
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {what} '{name}': {e}"))?;
    if buf.len() as u64 > limit {
        return Err(too_big(what, &name.to_string(), buf.len() as u64, limit));
    }
    Ok(buf)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_bounded_string(path: &Path, limit: u64, what: &str) -> Result<String, String> {
    let buf = read_bounded(path, limit, what)?;
    String::from_utf8(buf).map_err(|e| {
        format!(
            "{what} '{}' is not UTF-8 text (at byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

fn too_big(what: &str, name: &str, len: u64, limit: u64) -> String {
    format!(
        "{what} '{name}' is over the size limit ({}{len} bytes, at most {limit} = {} MiB are read)",
        if len > limit { "more than " } else { "" },
        limit >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_large_files_are_refused() {
        let e = read_bounded(Path::new("/dev/zero"), 1024, "include").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_bounded(Path::new("/"), 1024, "include").unwrap_err();
        assert!(e.contains("a directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("headroom-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f.txt");
        std::fs::write(&f, vec![b'a'; 2000]).unwrap();
        let e = read_bounded(&f, 1000, "CSV file").unwrap_err();
        assert!(e.contains("size limit"), "{e}");
        assert_eq!(read_bounded(&f, 2000, "CSV file").unwrap().len(), 2000);
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(read_bounded_string(&f, 10, "include")
            .unwrap_err()
            .contains("not UTF-8"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
