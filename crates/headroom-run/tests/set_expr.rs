//! `set: {expr}` end to end: users compute another user's id from their own (as Tsung's
//! fs-nfs.xml does in Erlang) and use it in a path, and an expression that divides by zero for
//! some users ends their sessions, counted in summary.json's `protocol.expr` and `aborted`.
//! File steps only, so no server is needed and the disk shows what each user computed.

mod common;

use common::*;
use headroom_run::summary::ExprCounters;
use headroom_run::RunSummary;

fn expr_counters(v: &RunSummary) -> &ExprCounters {
    scenario_of(v)
        .protocol
        .as_ref()
        .and_then(|p| p.expr.as_ref())
        .unwrap_or_else(|| panic!("no expr counters: {}", show(v)))
}

#[test]
fn expressions_compute_paths_and_their_failures_end_sessions() {
    let root = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
files: {{root: "{root}"}}
load: {{phases: [{{duration: 1s, arrival_rate: 4, arrival: constant}}]}}
sessions:
  - name: fs
    steps:
      - set: {{var: prev, expr: "if user_id > 0 then user_id - 1 else 0"}}
      - file: {{mkdir: "u${{user_id}}"}}
      - file: {{mkdir: "u${{user_id}}/p${{prev}}"}}
      - set: {{var: half, expr: "10 div (user_id rem 2)"}}
      - file: {{mkdir: "u${{user_id}}/odd"}}
"#,
        root = root.path().display()
    );
    let f = run(&scenario(&yaml, None));
    let v = &f.summary;
    assert_eq!(v.users_started, 4, "{}", show(v));
    let ids: Vec<u64> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix('u').unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    let even = ids.iter().filter(|&&id| id % 2 == 0).count() as u64;
    for id in &ids {
        let dir = root.path().join(format!("u{id}"));
        assert!(
            dir.join(format!("p{}", id - 1)).is_dir(),
            "{}",
            dir.display()
        );
        assert_eq!(dir.join("odd").is_dir(), id % 2 == 1, "{}", dir.display());
    }
    let c = expr_counters(v);
    assert_eq!(c.evaluated, 8, "{c:#?}");
    assert_eq!(
        (c.division_by_zero, c.overflow, c.not_integer),
        (even, 0, 0),
        "{c:#?}"
    );
    assert_eq!(scenario_of(v).sessions.aborted, even, "{}", show(v));
    assert_eq!(scenario_of(v).sessions.completed, 4 - even, "{}", show(v));
}
