//! scripts/demo checks the Rust toolchain before building: Debian 12's cargo (Rust 1.63) is too
//! old for the workspace (1.85), and the script says so in one line with where to get a newer
//! one, instead of failing minutes into a build. A fake `rustc` and `cargo` on PATH stand in
//! for the old toolchain.

mod common;

use std::os::unix::fs::PermissionsExt;

fn fake(dir: &std::path::Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn demo_with(rustc_version: &str) -> std::process::Output {
    let tmp = tempfile::tempdir().unwrap();
    fake(
        tmp.path(),
        "rustc",
        &format!("echo 'rustc {rustc_version} (debian)'"),
    );
    // A cargo that would build: the script must stop before calling it.
    fake(tmp.path(), "cargo", "echo cargo-was-called >&2; exit 42");
    std::process::Command::new("bash")
        .arg(common::repo_root().join("scripts/demo"))
        .env("PATH", format!("{}:/usr/bin:/bin", tmp.path().display()))
        .output()
        .unwrap()
}

#[test]
fn an_old_rust_is_refused_in_one_line_before_any_build() {
    let out = demo_with("1.63.0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("Rust 1.63.0 found; headroom needs 1.85 or newer"),
        "{stderr}"
    );
    assert!(stderr.contains("rustup"), "{stderr}");
    assert!(!stderr.contains("cargo-was-called"), "{stderr}");
}

#[test]
fn a_new_enough_rust_goes_on_to_the_build() {
    let out = demo_with("1.85.0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cargo-was-called"), "{stderr}");
    assert_eq!(out.status.code(), Some(42), "{stderr}");
}
