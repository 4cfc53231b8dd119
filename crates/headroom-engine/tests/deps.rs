//! The engine stays small (DESIGN: the hot path owns its sockets, its clock and its buffers):
//! its dependency tree holds no JSON, no command line and no async runtime. A crate that brings
//! one in fails here, naming the path that pulled it (issue 28).

use std::process::Command;

/// Crates that have no business on the load path.
const FORBIDDEN: [&str; 6] = ["serde_json", "clap", "tokio", "tonic", "hyper", "schemars"];

#[test]
fn the_engine_depends_on_no_json_cli_or_async_runtime() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "headroom-engine",
            "-e",
            "normal",
            "--prefix",
            "depth",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).expect("UTF-8");
    // Lines are "<depth><name> v<version> ...": the engine itself at depth 0.
    let crates: Vec<(usize, &str)> = tree
        .lines()
        .filter_map(|l| {
            let digits = l.chars().take_while(char::is_ascii_digit).count();
            let depth = l.get(..digits)?.parse().ok()?;
            Some((depth, l.get(digits..)?.split(' ').next()?))
        })
        .collect();
    assert!(
        crates.len() > 10 && crates[0] == (0, "headroom-engine"),
        "unexpected cargo tree output:\n{tree}"
    );
    for (i, &(depth, name)) in crates.iter().enumerate() {
        if FORBIDDEN.contains(&name) {
            // The path from the engine down to it, for the message.
            let mut path = vec![name];
            let mut want = depth;
            for &(d, n) in crates[..i].iter().rev() {
                if d + 1 == want {
                    path.push(n);
                    want = d;
                }
            }
            path.reverse();
            panic!("headroom-engine depends on {name}: {}", path.join(" -> "));
        }
    }
}
