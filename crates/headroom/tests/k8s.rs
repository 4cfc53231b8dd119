//! `headroom k8s manifest` as a user runs it: the YAML it prints is parsed (there is no cluster
//! here to apply it to) and checked for what makes a distributed run work: an Indexed Job of N
//! agents, the token from a Secret, N distinct agent endpoints, the scenario byte for byte, and
//! names Kubernetes accepts.

mod common;
use common::*;

use marked_yaml::Node;

/// The documents of a multi-document YAML stream (marked-yaml parses one document at a time;
/// a `---` line at column 0 separates them, and the block scalars are indented, so no line of
/// the embedded scenario can be taken for one).
fn docs(y: &str) -> Vec<Node> {
    y.split("\n---\n")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| marked_yaml::parse_yaml(0, d).unwrap_or_else(|e| panic!("{e}\n{d}")))
        .collect()
}

/// The node at `path`: mapping keys and sequence indexes, separated by `/`.
fn at<'a>(n: &'a Node, path: &str) -> &'a Node {
    let mut cur = n;
    for k in path.split('/') {
        cur = match (k.parse::<usize>(), cur) {
            (Ok(i), Node::Sequence(s)) => s.get_node(i),
            (_, Node::Mapping(m)) => m.get_node(k),
            _ => None,
        }
        .unwrap_or_else(|| panic!("no {k} in {path}"));
    }
    cur
}

fn s<'a>(n: &'a Node, path: &str) -> &'a str {
    at(n, path).as_scalar().expect("a scalar").as_str()
}

fn find<'a>(d: &'a [Node], kind: &str, pred: impl Fn(&Node) -> bool) -> &'a Node {
    let mut hits = d.iter().filter(|n| s(n, "kind") == kind && pred(n));
    let first = hits.next().unwrap_or_else(|| panic!("no {kind}"));
    assert!(hits.next().is_none(), "one {kind} that fits");
    first
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
}

#[test]
fn manifest_of_three_agents() {
    let scenario = repo_root().join("scenarios/mix.yaml");
    let out = headroom()
        .args(["k8s", "manifest"])
        .arg(&scenario)
        .args(["--agents", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // mix.yaml names 127.0.0.1: the agents in their pods would load themselves.
    assert!(
        stderr.contains("--target"),
        "warns about loopback: {stderr}"
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    let d = docs(&yaml);

    // The agents: an Indexed Job of 3, the token from the Secret, never in the spec.
    let job = find(
        &d,
        "Job",
        |n| matches!(at(n, "spec"), Node::Mapping(m) if m.get_node("completionMode").is_some()),
    );
    assert_eq!(s(job, "spec/completionMode"), "Indexed");
    assert_eq!(s(job, "spec/completions"), "3");
    assert_eq!(s(job, "spec/parallelism"), "3");
    let pod = at(job, "spec/template/spec");
    let svc_name = s(pod, "subdomain");
    let agent = at(pod, "containers/0");
    assert_eq!(s(agent, "image"), "headroom:latest");
    let cmd: Vec<&str> = (0..4).map(|i| s(agent, &format!("command/{i}"))).collect();
    assert_eq!(cmd, ["headroom", "agent", "--listen", "0.0.0.0:7070"]);
    assert_eq!(s(agent, "env/0/name"), "HEADROOM_TOKEN");
    let secret_name = s(agent, "env/0/valueFrom/secretKeyRef/name");
    assert_eq!(s(agent, "env/0/valueFrom/secretKeyRef/key"), "token");
    let secret = find(&d, "Secret", |n| s(n, "metadata/name") == secret_name);
    let token = s(secret, "stringData/token");
    assert!(token.starts_with("REPLACE-ME"), "a placeholder: {token}");
    assert!(
        yaml.contains("REPLACE the placeholder"),
        "says to replace it"
    );

    // The headless Service the subdomain names.
    let svc = find(&d, "Service", |n| s(n, "metadata/name") == svc_name);
    assert_eq!(s(svc, "spec/clusterIP"), "None");

    // The ConfigMap: the scenario byte for byte, and 3 distinct endpoints in agents.txt.
    let cm = find(&d, "ConfigMap", |_| true);
    let data = at(cm, "data").as_mapping().unwrap();
    let text = data.get_scalar("mix.yaml").unwrap().as_str();
    assert_eq!(text.as_bytes(), std::fs::read(&scenario).unwrap());
    let eps: Vec<&str> = data
        .get_scalar("agents.txt")
        .unwrap()
        .as_str()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    let distinct: std::collections::BTreeSet<&str> = eps.iter().copied().collect();
    assert_eq!(eps.len(), 3, "{eps:?}");
    assert_eq!(distinct.len(), 3, "{eps:?}");
    let job_name = s(job, "metadata/name");
    for (i, ep) in eps.iter().enumerate() {
        let want = format!("{job_name}-{i}.{svc_name}.default.svc.cluster.local:7070");
        assert_eq!(*ep, want);
        let host = ep.rsplit_once(':').unwrap().0;
        assert!(host.split('.').all(is_dns_label), "{host}");
    }

    // The controller runs the scenario from the ConfigMap against the agents in agents.txt.
    let ctl = find(&d, "Job", |n| {
        s(n, "metadata/name") != job_name && s(n, "metadata/name").ends_with("controller")
    });
    let c = at(ctl, "spec/template/spec/containers/0");
    let run: Vec<&str> = (0..5).map(|i| s(c, &format!("command/{i}"))).collect();
    assert_eq!(
        run,
        [
            "headroom",
            "run",
            "/etc/headroom/mix.yaml",
            "--agents",
            "file:/etc/headroom/agents.txt"
        ]
    );
    assert_eq!(s(c, "env/0/valueFrom/secretKeyRef/name"), secret_name);
    find(&d, "Service", |n| {
        s(n, "metadata/name") == s(ctl, "metadata/name")
    });

    // Every object's name is a DNS label, and so is each agent pod's hostname.
    assert_eq!(d.len(), 7);
    for n in &d {
        let name = s(n, "metadata/name");
        assert!(is_dns_label(name), "{name}");
        assert_eq!(s(n, "metadata/namespace"), "default");
    }
    assert!(is_dns_label(&format!("{job_name}-2")));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let mix = repo_root().join("scenarios/mix.yaml");
    let mix = mix.to_str().unwrap();
    for (args, says) in [
        (vec![mix, "--agents", "0"], "at least 1 agent"),
        (
            vec![mix, "--agents", "2", "--name", "My_Run"],
            "--name 'My_Run'",
        ),
        (
            vec!["/nonexistent/x.yaml", "--agents", "2"],
            "cannot read scenario",
        ),
        (
            vec![mix, "--agents", "2", "--memory", "lots"],
            "--memory 'lots'",
        ),
    ] {
        let out = headroom()
            .args(["k8s", "manifest"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn help_teaches() {
    let out = headroom()
        .args(["k8s", "manifest", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for want in [
        "Indexed",
        "kubectl apply -f -",
        "--agents",
        "--image",
        "build and push",
        "Examples:",
    ] {
        assert!(help.contains(want), "{want}: {help}");
    }
    let out = headroom().args(["k8s", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("headroom k8s manifest"));
}
