//! `headroom k8s manifest`'s objects against Kubernetes' own schemas: the JSON schemas of each
//! release's OpenAPI document, bundled by the `kubernetes-validate` package (PyPI), which
//! scripts/k8s-validate.sh installs into a private virtualenv (scripts/test sets
//! HEADROOM_K8S_VALIDATE to it). Strict: a field Kubernetes does not know is an error, as
//! `kubectl apply --validate=strict` makes it. No cluster is needed, and none is contacted.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Kubernetes releases checked: the newest ones the package bundles, current as of
/// 2026-11 (1.37 the newest, 1.35 the oldest still supported upstream).
const VERSIONS: [&str; 3] = ["1.35.0", "1.36.0", "1.37.0"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The validator: HEADROOM_K8S_VALIDATE, else what scripts/k8s-validate.sh installs.
fn validator() -> PathBuf {
    const HOW: &str = "run scripts/k8s-validate.sh (needs python3 and PyPI) and set \
                       HEADROOM_K8S_VALIDATE to the path it prints, as scripts/test does";
    if let Some(p) = std::env::var_os("HEADROOM_K8S_VALIDATE").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "HEADROOM_K8S_VALIDATE={} is not a file: {HOW}",
            p.display()
        );
        return p;
    }
    let o = Command::new("bash")
        .arg(repo().join("scripts/k8s-validate.sh"))
        .output()
        .expect("run scripts/k8s-validate.sh");
    let why = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "kubernetes-validate is missing and could not be installed ({}): {HOW}",
        why.lines().last().unwrap_or("no output").trim()
    );
    PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
}

/// Validates `file` strictly against every release of [`VERSIONS`]: Ok, or the validator's
/// complaints.
fn validate(bin: &Path, file: &Path) -> Result<usize, String> {
    let mut objects = 0;
    for v in VERSIONS {
        let o = Command::new(bin)
            .args(["-k", v, "--strict", "--no-warn"])
            .arg(file)
            .output()
            .expect("run kubernetes-validate");
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if !o.status.success() || out.contains("ERROR") {
            return Err(format!("against {v}:\n{out}"));
        }
        objects = out.matches("passed for resource").count();
    }
    Ok(objects)
}

#[test]
fn every_variant_of_the_manifest_validates_against_kubernetes_schemas() {
    let bin = validator();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = repo().join("scenarios/mix.yaml");
    let variants: [&[&str]; 4] = [
        &["--agents", "1"],
        &[
            "--agents",
            "3",
            "--target",
            "web.shop.svc:8080",
            "--cpu",
            "2",
            "--memory",
            "1Gi",
            "--namespace",
            "load",
            "--name",
            "mix-run",
            "--image",
            "registry.example/headroom:1.2",
            "--port",
            "7171",
            "--",
            "-d",
            "5m",
            "--on-agent-loss",
            "stop",
        ],
        &["--agents", "16", "--no-secret", "--cpu", "500m"],
        &["--agents", "2", "--memory", "512Mi", "--no-secret"],
    ];
    for (i, args) in variants.iter().enumerate() {
        let file = tmp.path().join(format!("m{i}.yaml"));
        let o = headroom()
            .args(["k8s", "manifest"])
            .arg(&scenario)
            .arg("-o")
            .arg(&file)
            .args(*args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        let objects = validate(&bin, &file).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        // Secret (unless --no-secret), ConfigMap, two Services, NetworkPolicy, two Jobs.
        let want = if args.contains(&"--no-secret") { 6 } else { 7 };
        assert_eq!(objects, want, "{args:?}");
    }
}

/// The check can fail: a misspelled field and a wrongly typed one are each refused.
#[test]
fn the_schema_check_refuses_what_kubernetes_would() {
    let bin = validator();
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.yaml");
    let o = headroom()
        .args(["k8s", "manifest"])
        .arg(repo().join("scenarios/mix.yaml"))
        .args(["--agents", "2", "-o"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let text = std::fs::read_to_string(&good).unwrap();
    validate(&bin, &good).unwrap();
    for (from, to, want) in [
        ("restartPolicy:", "restartPolcy:", "restartPolcy"),
        (
            "completionMode: Indexed",
            "completionMode: 3",
            "completionMode",
        ),
    ] {
        assert!(text.contains(from), "{from} not in the manifest");
        let bad = tmp.path().join("bad.yaml");
        std::fs::write(&bad, text.replacen(from, to, 1)).unwrap();
        let e = validate(&bin, &bad).unwrap_err();
        assert!(e.contains(want), "{from}: {e}");
    }
}
