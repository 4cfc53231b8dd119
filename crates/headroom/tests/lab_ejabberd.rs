//! Seed 000 on Debian's ejabberd (`experiments/ejabberd.yaml --quick`, installed by
//! scripts/test): each run starts its own ejabberd node in the foreground, registers its
//! accounts, loads it with the study's mix of users arriving until it breaks, and stops it. The
//! table must show the direction of the finding, and no node may outlive the lab.

mod common;

use std::path::Path;

/// The first column's mean of `metric` in the row `row` (levels joined by '/').
fn table(out: &Path, metric: &str, row: &str) -> f64 {
    common::lab_cell(out, metric, row, "")
}

/// Seed 000's maximum users on Debian's ejabberd (`experiments/ejabberd.yaml --quick`): users
/// of the study's mix arrive at 400/s and stay, against a node allowed 4,000 descriptors and one
/// allowed 2,000. Each must break (logins time out once accept fails with EMFILE) just under its
/// own limit (~3,960 and ~1,960 users here; ~40 descriptors are the node's own), the node must
/// have held about that many descriptors, and no Erlang VM of the lab may be left behind. Then
/// one scheduler against two where each login costs the server a key derivation: one must
/// break, two must hold at least twice as many users on more than one core. The verdicts say
/// why: the descriptor limit, and one scheduler's CPU.
#[test]
fn ejabberd_breaks_at_its_descriptor_limit_and_one_scheduler_before_two() {
    let tmp = tempfile::tempdir().unwrap();
    let (stdout, stderr) = common::lab_quick("ejabberd.yaml", tmp.path(), 4);
    let what = format!("{stdout}\n{stderr}");
    let out = tmp.path();
    let (high, low) = (
        "2/plain/1/262144/4000/os/400",
        "2/plain/1/262144/2000/os/400",
    );
    for (row, limit) in [(high, 4000.0), (low, 2000.0)] {
        // It broke within the run, and not before most of its descriptors served a user.
        assert_eq!(table(out, "capacity_reached", row), 1.0, "{row}\n{what}");
        let cap = table(out, "capacity_connections", row);
        assert!(
            cap >= 0.9 * limit && cap <= limit,
            "{row}: {cap} users at {limit} descriptors\n{what}"
        );
        // The node's process tree: the VM at its limit, and erl_child_setup's few.
        let fds = table(out, "server_fds_max", row);
        assert!(
            fds >= 0.95 * limit && fds <= limit + 100.0,
            "{row}: the node held {fds} descriptors\n{what}"
        );
    }
    let (ch, cl) = (
        table(out, "capacity_connections", high),
        table(out, "capacity_connections", low),
    );
    assert!(ch >= 1.6 * cl, "{ch} vs {cl}\n{what}");
    // One scheduler against two, logins costing the server ~8.5 ms each (SCRAM-stored
    // passwords), 180 arriving per second for 20 s: one scheduler takes ~115/s and breaks, two
    // take them all, using more than one core.
    let (two, one) = (
        "2/scram/1/262144/20000/os/180",
        "1/scram/1/262144/20000/os/180",
    );
    assert_eq!(table(out, "capacity_reached", one), 1.0, "{what}");
    let (c2, c1) = (
        table(out, "capacity_connections", two),
        table(out, "capacity_connections", one),
    );
    assert!(
        c2 >= 2.0 * c1,
        "2 schedulers {c2} users vs 1 scheduler {c1}\n{what}"
    );
    let (u2, u1) = (
        table(out, "server_cpu_user_pct", two),
        table(out, "server_cpu_user_pct", one),
    );
    assert!(
        u2 > 120.0 && u2 > u1 + 20.0,
        "2 schedulers {u2}% vs 1 scheduler {u1}% user CPU\n{what}"
    );
    // Why (issue 31): the descriptor limit at the break of each limited node; one scheduler
    // deriving keys is CPU-bound in its own code.
    for row in [high, low] {
        assert_eq!(
            common::lab_verdict(out, row, ""),
            "descriptor_limit",
            "{row}\n{what}"
        );
    }
    assert_eq!(common::lab_verdict(out, one, ""), "cpu_user", "{what}");
    // Every node was stopped by its SIGTERM (a clean init:stop), none killed after the grace.
    assert_eq!(
        stderr.matches("exited 0 after SIGTERM").count(),
        4,
        "{what}"
    );
    let left = common::processes_mentioning(&out.display().to_string());
    assert!(left.is_empty(), "left running: {left:?}");
}
