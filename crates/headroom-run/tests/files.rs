//! `file` steps (issue 32, Tsung's fs plugin) end to end: sessions make directories, write
//! files whole and by chunks, read them back, stat, link and delete under a temporary root,
//! and the run's counters are checked against what is on disk: bytes written equal the files'
//! sizes, every failure is counted under its kind (a missing file, a chunk with no file open,
//! a path that leaves the root through a variable, which is not run).

mod common;

use common::*;
use headroom_run::summary::FileCounters;
use headroom_run::RunSummary;

fn file_counters(v: &RunSummary) -> &FileCounters {
    scenario_of(v)
        .protocol
        .as_ref()
        .and_then(|p| p.file.as_ref())
        .unwrap_or_else(|| panic!("no file counters: {}", show(v)))
}

#[test]
fn file_steps_work_under_the_root_and_count_by_kind() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "x").unwrap();
    // The escape: a variable holding "..", which the parser cannot see.
    let up = format!(
        "../{}",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let yaml = format!(
        r#"
files: {{root: "{root}"}}
load: {{phases: [{{duration: 1s, arrival_rate: 3, arrival: constant}}]}}
sessions:
  - name: fs
    steps:
      - set: {{var: up, value: "{up}"}}
      - file: {{mkdir: "u${{user_id}}", name: mkdir}}
      - file: {{mkdir: "u${{user_id}}", name: mkdir}}
      - file: {{write: "u${{user_id}}/whole", size: 100000}}
      - file: {{open: "u${{user_id}}/chunks", mode: write}}
      - loop: {{count: 3, steps: [{{file: {{write_chunk: 65536}}}}]}}
      - file: close
      - file: {{open: "u${{user_id}}/chunks", mode: read}}
      - loop: {{count: 4, steps: [{{file: {{read_chunk: 65536, name: read_chunk}}}}]}}
      - file: close
      - file: {{read: "u${{user_id}}/whole"}}
      - file: {{stat: "u${{user_id}}/whole"}}
      - file: {{symlink: "u${{user_id}}/whole", link: "u${{user_id}}/link"}}
      - file: {{read: "u${{user_id}}/link", name: read_link}}
      - file: {{delete: "u${{user_id}}/link"}}
      - file: {{read: "u${{user_id}}/missing", name: missing}}
      - file: {{read_chunk: 10, name: no_file}}
      - file: {{stat: "${{up}}/secret", name: escape}}
"#,
        root = root.path().display()
    );
    let f = run(&scenario(&yaml, None));
    let v = &f.summary;
    assert_eq!(v.users_started, 3, "{}", show(v));
    assert_eq!(v.protocol, "file", "{}", show(v));
    let c = file_counters(v);
    // 18 file steps, 3 + 4 of them chunks in loops: 22 operations a session.
    assert_eq!(c.ops, 3 * 22, "{c:#?}");
    assert_eq!(c.bytes_written, 3 * (100_000 + 3 * 65536), "{c:#?}");
    // Chunks: 3 x 64 KiB, then the 4th reads nothing (the end) and starts over; whole: twice.
    assert_eq!(c.bytes_read, 3 * (3 * 65536 + 2 * 100_000), "{c:#?}");
    assert_eq!(c.already_exists, 3, "the second mkdir, {c:#?}");
    assert_eq!(
        (
            c.not_found,
            c.not_open,
            c.escapes,
            c.permission_denied,
            c.other_errors
        ),
        (3, 3, 3, 0, 0),
        "{c:#?}"
    );
    assert_eq!(v.errors.other, 9, "{}", show(v));
    assert_eq!(by_request(v, "mkdir").count, 6, "{}", show(v));
    assert_eq!(by_request(v, "read_chunk").count, 12, "{}", show(v));
    assert_eq!(by_request(v, "read_link").count, 3, "{}", show(v));
    for name in ["missing", "no_file", "escape"] {
        assert_eq!(by_request(v, name).errors, 3, "{name}: {}", show(v));
        assert_eq!(by_request(v, name).count, 0, "{name}: {}", show(v));
    }
    // On disk: what the counters say, and nothing outside the root touched.
    let dirs: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 3, "a directory per user: {dirs:?}");
    for dir in dirs {
        let size = |n: &str| std::fs::metadata(dir.join(n)).map(|m| m.len()).ok();
        assert_eq!(size("whole"), Some(100_000), "{}", dir.display());
        assert_eq!(size("chunks"), Some(3 * 65536), "{}", dir.display());
        assert!(!dir.join("link").exists(), "deleted");
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "x"
    );
}
