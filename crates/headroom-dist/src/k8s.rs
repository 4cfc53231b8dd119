//! The Kubernetes objects of a distributed run, as multi-document YAML for `kubectl apply -f -`:
//! the third launcher beside [`crate::launch`]'s local and SSH agents. Where those start agent
//! processes themselves, this one describes them for a cluster to start.
//!
//! N agents run as an Indexed Job behind a headless Service, so agent i has the stable DNS name
//! `<job>-<i>.<service>`; a controller Job runs `headroom run SCENARIO --agents
//! file:/etc/headroom/agents.txt`, the scenario text and agents.txt coming from a ConfigMap. The
//! token comes from a Secret whose value is a placeholder the user replaces (never a real default
//! token); `headroom agent` refuses [`TOKEN_PLACEHOLDER`] as a token.
//!
//! The agents listen on the pod network in plain HTTP/2 (`--insecure-plaintext` on the agents
//! and the controller): each pod would make its own self-signed certificate, which a
//! controller reading a static agents.txt cannot pin. The manifest says so in a comment and
//! how to change it (a certificate in a Secret, `--tls-cert`/`--tls-key` on the agents, its
//! fingerprint in `--agent-fingerprint`); docs/distributed.md's threat model too.
//!
//! [`manifest`] is pure (a [`ManifestOpts`] in, text out, or why not in one sentence that names
//! the flag to change); the `headroom k8s manifest` command (the binary's `k8s.rs`) maps its
//! flags to a [`ManifestOpts`], reads the scenario file, and prints or writes the text.
//!
//! Nothing here talks to a cluster, and the tests parse the YAML rather than apply it: no cluster
//! is available where headroom is built.

use std::fmt::Write as _;
use std::path::Path;

/// Port the agents listen on in their pods (also `headroom agent`'s default port).
pub const DEFAULT_AGENT_PORT: u16 = 7070;
/// Image of the agents and the controller: users build and push it themselves.
pub const DEFAULT_IMAGE: &str = "headroom:latest";
/// Value of the token in the Secret template; the comment above it says to replace it.
pub const TOKEN_PLACEHOLDER: &str = "REPLACE-ME-with-a-long-random-token";
/// Where the ConfigMap is mounted in the controller.
const CONFIG_DIR: &str = "/etc/headroom";
/// The controller's live dashboard and Prometheus ports (its Service exposes both).
const DASHBOARD_PORT: u16 = 8089;
const METRICS_PORT: u16 = 9464;
/// A ConfigMap holds at most 1 MiB; keep room for agents.txt and the metadata.
const MAX_SCENARIO_BYTES: usize = 900 * 1024;
/// More agents than this is a typo rather than a plan.
const MAX_AGENTS: u32 = 10_000;
/// A DNS-1123 label (a pod's hostname, a label value) is at most 63 characters.
const MAX_LABEL: usize = 63;
/// Image of the init container that waits until every agent accepts connections.
const WAIT_IMAGE: &str = "busybox:1.36";

/// Everything [`manifest`] needs, the scenario already read.
#[derive(Debug, Clone)]
pub struct ManifestOpts {
    /// The scenario's file name (its extension tells `headroom run` YAML from Tsung XML).
    pub scenario_file: String,
    /// The scenario's text, embedded as it is.
    pub scenario_text: String,
    pub agents: u32,
    pub namespace: String,
    /// `None`: derived from `scenario_file`.
    pub name: Option<String>,
    pub image: String,
    pub port: u16,
    pub cpu: Option<String>,
    pub memory: Option<String>,
    pub target: Option<String>,
    pub secret: bool,
    pub run_args: Vec<String>,
}

impl ManifestOpts {
    /// Defaults for everything but the scenario and the agent count.
    pub fn new(scenario_file: &str, scenario_text: &str, agents: u32) -> ManifestOpts {
        ManifestOpts {
            scenario_file: scenario_file.to_string(),
            scenario_text: scenario_text.to_string(),
            agents,
            namespace: "default".into(),
            name: None,
            image: DEFAULT_IMAGE.into(),
            port: DEFAULT_AGENT_PORT,
            cpu: None,
            memory: None,
            target: None,
            secret: true,
            run_args: Vec::new(),
        }
    }
}

/// The file name of `path` as a ConfigMap key allows it (`[-._a-zA-Z0-9]+`, other characters
/// made `-`), else `scenario.<ext>`.
pub fn file_name(path: &Path) -> String {
    let name: String = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if config_key_ok(&name) {
        return name;
    }
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .filter(|e| config_key_ok(e))
        .unwrap_or_else(|| "yaml".into());
    format!("scenario.{ext}")
}

fn config_key_ok(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k != "."
        && k != ".."
        && k != "agents.txt"
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// `s` made a DNS-1035 label of at most `max` characters (Kubernetes Service names; also a valid
/// DNS-1123 label): lowercase ASCII letters, digits and `-`, starting with a letter and ending
/// with a letter or digit. Other characters become `-`, runs of `-` one; a name starting with a
/// digit gets `hr-` in front; nothing left gives `headroom`.
pub fn sanitize_label(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "hr-");
    }
    if out.trim_end_matches('-').is_empty() {
        out = "headroom".into();
    }
    out.truncate(max.max(1));
    out.trim_end_matches('-').to_string()
}

/// Why `s` is not a DNS-1035 label of at most `max` characters, if it is not.
pub fn check_label(s: &str, max: usize) -> Result<(), String> {
    let why = if s.is_empty() {
        "is empty".to_string()
    } else if s.len() > max {
        format!("has {} characters, at most {max} fit", s.len())
    } else if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        format!("contains {c:?}")
    } else if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        "does not start with a letter".into()
    } else if s.ends_with('-') {
        "ends with '-'".into()
    } else {
        return Ok(());
    };
    Err(why)
}

/// The longest name prefix that leaves room for `-controller` and `-agents-<N-1>` in 63 chars.
fn max_name_len(agents: u32) -> usize {
    let digits = (agents.saturating_sub(1)).to_string().len();
    (MAX_LABEL - "-controller".len()).min(MAX_LABEL - "-agents-".len() - digits)
}

/// A Kubernetes quantity as `--cpu`/`--memory` take it: a decimal number and a suffix.
fn check_quantity(flag: &str, v: &str, suffixes: &[&str], example: &str) -> Result<(), String> {
    let num_end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, suffix) = v.split_at(num_end);
    let num_ok = !num.is_empty()
        && num.split('.').count() <= 2
        && num.split('.').all(|p| !p.is_empty())
        && num.parse::<f64>().is_ok_and(|x| x > 0.0);
    if num_ok && (suffix.is_empty() || suffixes.contains(&suffix)) {
        Ok(())
    } else {
        Err(format!(
            "{flag} '{v}' is not a Kubernetes quantity; use e.g. {example} (suffixes: {})",
            suffixes.join(", ")
        ))
    }
}

/// `s` as a double-quoted YAML scalar: any text, nothing it contains can end the scalar.
fn q(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{feff}' || c == '\u{85}' => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            '\u{2028}' | '\u{2029}' => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// `text` as the value of a mapping key at column `indent`, exactly: a literal block scalar
/// (`|`) indented two more, its chomping indicator keeping the trailing newlines as they are;
/// text a block scalar cannot hold exactly (carriage returns, control characters, a BOM, lines
/// of only spaces and tabs, which YAML may fold into the indentation) goes double-quoted.
fn block(text: &str, indent: usize) -> String {
    let needs_quoting = text.is_empty()
        || text.chars().any(|c| {
            c == '\r'
                || c == '\u{feff}'
                || c == '\u{85}'
                || c == '\u{2028}'
                || c == '\u{2029}'
                || c == '\u{7f}'
                || ((c as u32) < 0x20 && c != '\n' && c != '\t')
        })
        || text
            .split('\n')
            .any(|l| !l.is_empty() && l.trim_matches([' ', '\t']).is_empty());
    if needs_quoting {
        return q(text);
    }
    let body = text.trim_end_matches('\n');
    let trailing = text.len() - body.len();
    let chomp = match trailing {
        0 => "-",
        1 => "",
        _ => "+",
    };
    // The first line's leading space would be taken as indentation: say the indentation.
    let first = body.split('\n').find(|l| !l.is_empty()).unwrap_or("");
    let ind = if first.starts_with([' ', '\t']) {
        "2"
    } else {
        ""
    };
    let pad = " ".repeat(indent + 2);
    let mut o = format!("|{ind}{chomp}\n");
    for line in body.split('\n') {
        if !line.is_empty() {
            o.push_str(&pad);
            o.push_str(line);
        }
        o.push('\n');
    }
    // `|+` keeps the final newlines: the text's own, after the body's last one.
    for _ in 1..trailing {
        o.push('\n');
    }
    o.pop(); // the caller ends the line
    o
}

/// The Kubernetes objects of a distributed run of `opts.scenario_text` by `opts.agents` agents,
/// as multi-document YAML; or why not, in one sentence that says what to use instead.
pub fn manifest(opts: &ManifestOpts) -> Result<String, String> {
    let n = opts.agents;
    if n == 0 {
        return Err("--agents 0: a distributed run needs at least 1 agent".into());
    }
    if n > MAX_AGENTS {
        return Err(format!(
            "--agents {n}: at most {MAX_AGENTS} agents (each agent already holds many users)"
        ));
    }
    if opts.port == 0 {
        return Err("--port 0: agents need a fixed port, from 1 to 65535".into());
    }
    let max = max_name_len(n);
    let name = match &opts.name {
        Some(given) => {
            check_label(given, max).map_err(|why| {
                format!(
                    "--name '{given}' {why}; a name is lowercase letters, digits and '-', starts \
                     with a letter and ends with a letter or digit, at most {max} characters \
                     with {n} agents (it prefixes Service names), e.g. '{}'",
                    sanitize_label(given, max)
                )
            })?;
            given.clone()
        }
        None => {
            let stem = opts
                .scenario_file
                .rsplit_once('.')
                .map_or(opts.scenario_file.as_str(), |(s, _)| s);
            sanitize_label(stem, max)
        }
    };
    let ns = &opts.namespace;
    let ns_ok = !ns.is_empty()
        && ns.len() <= MAX_LABEL
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if !ns_ok {
        return Err(format!(
            "--namespace '{ns}' is not a Kubernetes namespace name; use lowercase letters, digits \
             and '-', at most 63, not starting or ending with '-', e.g. 'load-tests'"
        ));
    }
    if opts.image.is_empty()
        || opts
            .image
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "--image '{}' is not an image reference; use e.g. registry.example.com/headroom:0.1",
            opts.image
        ));
    }
    if let Some(cpu) = &opts.cpu {
        check_quantity("--cpu", cpu, &["m"], "2 or 500m")?;
    }
    if let Some(mem) = &opts.memory {
        let sfx = [
            "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
        ];
        check_quantity("--memory", mem, &sfx, "1Gi or 512Mi")?;
    }
    if let Some(t) = &opts.target {
        if t.is_empty() || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "--target '{t}' is not HOST:PORT; use e.g. web.shop.svc:8080"
            ));
        }
    }
    if !config_key_ok(&opts.scenario_file) {
        return Err(format!(
            "scenario file name '{}' cannot be a ConfigMap key; rename it to letters, digits, \
             '-', '_' and '.'",
            opts.scenario_file
        ));
    }
    if opts.scenario_text.len() > MAX_SCENARIO_BYTES {
        return Err(format!(
            "the scenario has {} bytes; a ConfigMap holds at most 1 MiB, keep it under {} KiB",
            opts.scenario_text.len(),
            MAX_SCENARIO_BYTES / 1024
        ));
    }

    let port = opts.port;
    let secret = format!("{name}-token");
    let config = format!("{name}-config");
    let agents_svc = format!("{name}-agents");
    let agents_job = format!("{name}-agents");
    let ctl = format!("{name}-controller");
    let endpoints: Vec<String> = (0..n)
        .map(|i| format!("{agents_job}-{i}.{agents_svc}.{ns}.svc.cluster.local:{port}"))
        .collect();
    let mut agents_txt =
        format!("# {n} headroom agents of the Indexed Job {agents_job} (one host:port per line)\n");
    for e in &endpoints {
        agents_txt.push_str(e);
        agents_txt.push('\n');
    }
    let flow = |v: &[String]| {
        let items: Vec<String> = v.iter().map(|s| q(s)).collect();
        format!("[{}]", items.join(", "))
    };
    let scenario_path = format!("{CONFIG_DIR}/{}", opts.scenario_file);
    let mut run = vec![
        "headroom".to_string(),
        "run".into(),
        scenario_path,
        "--agents".into(),
        format!("file:{CONFIG_DIR}/agents.txt"),
        "--dashboard".into(),
        format!("0.0.0.0:{DASHBOARD_PORT}"),
        "--metrics-listen".into(),
        format!("0.0.0.0:{METRICS_PORT}"),
        // The agents speak plain HTTP/2 in the cluster: see the module's notes.
        "--insecure-plaintext".into(),
    ];
    if let Some(t) = &opts.target {
        run.push("--target".into());
        run.push(t.clone());
    }
    run.extend(opts.run_args.iter().cloned());
    let agent_cmd = vec![
        "headroom".to_string(),
        "agent".into(),
        "--listen".into(),
        format!("0.0.0.0:{port}"),
        "--insecure-plaintext".into(),
    ];
    let wait = format!(
        "grep -v '^#' {CONFIG_DIR}/agents.txt | while read -r ep; do \
         until nc -z -w 2 \"${{ep%:*}}\" \"${{ep##*:}}\"; do echo \"waiting for $ep\"; sleep 1; \
         done; done"
    );
    let image = q(&opts.image);

    let mut y = Yaml::default();
    y.comment(&format!(
        "Generated by `headroom k8s manifest`: a distributed headroom run of {} by {n} agents.",
        opts.scenario_file
    ));
    y.comment("Apply:   kubectl apply -f THIS_FILE   (or pipe: ... | kubectl apply -f -)");
    y.comment(&format!("Follow:  kubectl logs -n {ns} -f job/{ctl}"));
    y.comment("Remove:  kubectl delete -f THIS_FILE   (agents keep listening until then)");
    y.comment(&format!(
        "The image {} is yours to build and push (docs/distributed.md). Not yet tested against \
         a live cluster.",
        opts.image
    ));
    y.comment(
        "Agents and controller talk plain HTTP/2 on the pod network (--insecure-plaintext): \
         the token crosses it in clear.",
    );
    y.comment(
        "For TLS: put one certificate and key in a Secret, mount it in the agents, replace \
         --insecure-plaintext with",
    );
    y.comment(
        "--tls-cert FILE --tls-key FILE there, and with --agent-fingerprint sha256:... (openssl \
         x509 -noout -fingerprint -sha256) in the controller.",
    );

    if opts.secret {
        y.doc();
        y.comment(
            "The token the controller and the agents share: an agent serves only requests that \
             carry it.",
        );
        y.comment(
            "REPLACE the placeholder below with a long random value before applying (e.g. \
             `openssl rand -hex 32`),",
        );
        y.comment("or create the Secret yourself and leave this document out (--no-secret):");
        y.comment(&format!(
            "  kubectl create secret generic {secret} -n {ns} \
             --from-literal=token=\"$(openssl rand -hex 32)\""
        ));
        y.meta("v1", "Secret", &secret, ns, &name, "token");
        y.line(0, "type: Opaque");
        y.line(0, "stringData:");
        y.line(2, &format!("token: {}  # REPLACE ME", q(TOKEN_PLACEHOLDER)));
    }

    y.doc();
    y.comment(&format!(
        "The scenario, byte for byte, and the agents' endpoints; mounted at {CONFIG_DIR} in the \
         controller."
    ));
    y.meta("v1", "ConfigMap", &config, ns, &name, "config");
    y.line(0, "data:");
    y.line(
        2,
        &format!("{}: {}", opts.scenario_file, block(&opts.scenario_text, 2)),
    );
    y.line(2, &format!("agents.txt: {}", block(&agents_txt, 2)));

    y.doc();
    y.comment(&format!(
        "Headless: agent i answers at {agents_job}-i.{agents_svc}.{ns}.svc.cluster.local."
    ));
    y.meta("v1", "Service", &agents_svc, ns, &name, "agent");
    y.line(0, "spec:");
    y.line(2, "clusterIP: None");
    y.line(2, "selector:");
    y.labels(4, &name, "agent");
    y.line(2, "ports:");
    y.line(4, "- name: agent");
    y.line(6, &format!("port: {port}"));
    y.line(6, &format!("targetPort: {port}"));

    y.doc();
    y.comment(
        "An agent sends load where it is told: only the controller may reach it (where the \
         network plugin enforces policies).",
    );
    y.meta(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        &agents_svc,
        ns,
        &name,
        "agent",
    );
    y.line(0, "spec:");
    y.line(2, "podSelector:");
    y.line(4, "matchLabels:");
    y.labels(6, &name, "agent");
    y.line(2, "policyTypes: [Ingress]");
    y.line(2, "ingress:");
    y.line(4, "- from:");
    y.line(8, "- podSelector:");
    y.line(12, "matchLabels:");
    y.labels(14, &name, "controller");
    y.line(6, "ports:");
    y.line(8, &format!("- port: {port}"));
    y.line(10, "protocol: TCP");

    y.doc();
    y.comment(&format!(
        "{n} agents. Pod i's hostname is {agents_job}-i; with the subdomain its DNS name is \
         stable."
    ));
    y.comment(
        "Descriptors: a pod spec has no ulimit; the container runtime's RLIMIT_NOFILE applies, \
         and headroom raises",
    );
    y.comment(
        "its soft limit to the hard one at start. See it with `kubectl exec POD -- sh -c 'ulimit \
         -Hn'` (if the image has a shell).",
    );
    y.comment(&format!(
        "backoffLimit {n}: a failed agent does not end the others; the controller's \
         --on-agent-loss decides."
    ));
    y.meta("batch/v1", "Job", &agents_job, ns, &name, "agent");
    y.line(0, "spec:");
    y.line(2, "completionMode: Indexed");
    y.line(2, &format!("completions: {n}"));
    y.line(2, &format!("parallelism: {n}"));
    y.line(2, &format!("backoffLimit: {n}"));
    y.line(2, "template:");
    y.line(4, "metadata:");
    y.line(6, "labels:");
    y.labels(8, &name, "agent");
    y.line(4, "spec:");
    y.line(6, &format!("subdomain: {agents_svc}"));
    y.line(6, "restartPolicy: Never");
    y.line(
        6,
        "topologySpreadConstraints:  # one agent per node where possible",
    );
    y.line(8, "- maxSkew: 1");
    y.line(10, "topologyKey: kubernetes.io/hostname");
    y.line(10, "whenUnsatisfiable: ScheduleAnyway");
    y.line(10, "labelSelector:");
    y.line(12, "matchLabels:");
    y.labels(14, &name, "agent");
    y.line(6, "containers:");
    y.line(8, "- name: agent");
    y.line(10, &format!("image: {image}"));
    y.line(10, "imagePullPolicy: IfNotPresent");
    y.line(10, &format!("command: {}", flow(&agent_cmd)));
    y.token_env(10, &secret);
    y.line(10, "ports:");
    y.line(12, "- name: agent");
    y.line(14, &format!("containerPort: {port}"));
    y.line(10, "readinessProbe:");
    y.line(12, "tcpSocket:");
    y.line(14, &format!("port: {port}"));
    y.line(12, "periodSeconds: 2");
    let limits: Vec<(&str, &String)> = [("cpu", &opts.cpu), ("memory", &opts.memory)]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect();
    if limits.is_empty() {
        y.line(
            10,
            "resources: {}  # --cpu / --memory set requests = limits",
        );
    } else {
        y.line(
            10,
            "resources:  # requests = limits: the agent's CPU is not shared",
        );
        for what in ["requests", "limits"] {
            y.line(12, &format!("{what}:"));
            for (k, v) in &limits {
                y.line(14, &format!("{k}: {}", q(v)));
            }
        }
    }

    y.doc();
    y.comment(&format!(
        "The controller's live dashboard ({DASHBOARD_PORT}) and Prometheus /metrics \
         ({METRICS_PORT}):"
    ));
    y.comment(&format!(
        "  kubectl port-forward -n {ns} svc/{ctl} {DASHBOARD_PORT}"
    ));
    y.meta("v1", "Service", &ctl, ns, &name, "controller");
    y.line(0, "spec:");
    y.line(2, "selector:");
    y.labels(4, &name, "controller");
    y.line(2, "ports:");
    for (pname, p) in [("dashboard", DASHBOARD_PORT), ("metrics", METRICS_PORT)] {
        y.line(4, &format!("- name: {pname}"));
        y.line(6, &format!("port: {p}"));
        y.line(6, &format!("targetPort: {p}"));
    }

    y.doc();
    y.comment(
        "The controller: waits until every agent accepts connections, then runs the scenario \
         once.",
    );
    y.comment("backoffLimit 0: a retried run would load the server twice.");
    y.meta("batch/v1", "Job", &ctl, ns, &name, "controller");
    y.line(0, "spec:");
    y.line(2, "backoffLimit: 0");
    y.line(2, "template:");
    y.line(4, "metadata:");
    y.line(6, "labels:");
    y.labels(8, &name, "controller");
    y.line(4, "spec:");
    y.line(6, "restartPolicy: Never");
    y.line(6, "initContainers:");
    y.line(8, "- name: wait-for-agents");
    y.line(10, &format!("image: {WAIT_IMAGE}"));
    y.line(10, &format!("command: [\"sh\", \"-c\", {}]", q(&wait)));
    y.line(10, "volumeMounts:");
    y.line(12, "- name: config");
    y.line(14, &format!("mountPath: {CONFIG_DIR}"));
    y.line(6, "containers:");
    y.line(8, "- name: controller");
    y.line(10, &format!("image: {image}"));
    y.line(10, "imagePullPolicy: IfNotPresent");
    y.line(10, &format!("command: {}", flow(&run)));
    y.token_env(10, &secret);
    y.line(10, "ports:");
    for (pname, p) in [("dashboard", DASHBOARD_PORT), ("metrics", METRICS_PORT)] {
        y.line(12, &format!("- name: {pname}"));
        y.line(14, &format!("containerPort: {p}"));
    }
    y.line(10, "volumeMounts:");
    y.line(12, "- name: config");
    y.line(14, &format!("mountPath: {CONFIG_DIR}"));
    y.line(14, "readOnly: true");
    y.line(6, "volumes:");
    y.line(8, "- name: config");
    y.line(10, "configMap:");
    y.line(12, &format!("name: {config}"));
    Ok(y.0)
}

/// YAML text built line by line, each line at an explicit indentation.
#[derive(Default)]
struct Yaml(String);

impl Yaml {
    fn line(&mut self, indent: usize, text: &str) {
        for _ in 0..indent {
            self.0.push(' ');
        }
        self.0.push_str(text);
        self.0.push('\n');
    }

    fn comment(&mut self, text: &str) {
        self.line(0, &format!("# {text}"));
    }

    fn doc(&mut self) {
        self.0.push_str("---\n");
    }

    /// apiVersion, kind and metadata of an object of the run `instance`.
    fn meta(&mut self, api: &str, kind: &str, name: &str, ns: &str, instance: &str, comp: &str) {
        self.line(0, &format!("apiVersion: {api}"));
        self.line(0, &format!("kind: {kind}"));
        self.line(0, "metadata:");
        self.line(2, &format!("name: {name}"));
        self.line(2, &format!("namespace: {ns}"));
        self.line(2, "labels:");
        self.labels(4, instance, comp);
    }

    fn labels(&mut self, indent: usize, instance: &str, component: &str) {
        self.line(indent, "app.kubernetes.io/name: headroom");
        self.line(indent, &format!("app.kubernetes.io/instance: {instance}"));
        self.line(indent, &format!("app.kubernetes.io/component: {component}"));
    }

    /// `env:` with HEADROOM_TOKEN from the Secret: the token never appears in argv or the spec.
    fn token_env(&mut self, indent: usize, secret: &str) {
        self.line(indent, "env:");
        self.line(indent + 2, "- name: HEADROOM_TOKEN");
        self.line(indent + 4, "valueFrom:");
        self.line(indent + 6, "secretKeyRef:");
        self.line(indent + 8, &format!("name: {secret}"));
        self.line(indent + 8, "key: token");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use marked_yaml::Node;

    const SCENARIO: &str = "name: mix\nservers:\n  - {host: web, port: 8080}\n";

    /// The documents of a multi-document stream, each parsed (marked-yaml takes one at a time).
    pub fn docs(y: &str) -> Vec<Node> {
        let mut out = Vec::new();
        let mut cur = String::new();
        for line in y.split_inclusive('\n') {
            if line.trim_end() == "---" {
                if !cur.trim().is_empty() && !only_comments(&cur) {
                    out.push(parse(&cur));
                }
                cur.clear();
            } else {
                cur.push_str(line);
            }
        }
        if !cur.trim().is_empty() && !only_comments(&cur) {
            out.push(parse(&cur));
        }
        out
    }

    fn only_comments(s: &str) -> bool {
        s.lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    }

    fn parse(s: &str) -> Node {
        marked_yaml::parse_yaml(0, s).unwrap_or_else(|e| panic!("{e}\n{s}"))
    }

    /// The node at `path` (mapping keys, or sequence indexes as numbers).
    pub fn at<'a>(n: &'a Node, path: &str) -> &'a Node {
        let mut cur = n;
        for k in path.split('.') {
            cur = match (k.parse::<usize>(), cur) {
                (Ok(i), Node::Sequence(s)) => s.get_node(i),
                (_, Node::Mapping(m)) => m.get_node(k),
                _ => None,
            }
            .unwrap_or_else(|| panic!("no {k} in {path}"));
        }
        cur
    }

    pub fn s<'a>(n: &'a Node, path: &str) -> &'a str {
        at(n, path).as_scalar().expect("a scalar").as_str()
    }

    fn kind<'a>(d: &'a [Node], kind: &str, name: &str) -> &'a Node {
        d.iter()
            .find(|n| s(n, "kind") == kind && s(n, "metadata.name") == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    #[test]
    fn sanitizer_makes_dns_labels() {
        for (input, want) in [
            ("mix", "mix"),
            ("My_Scenario v2", "my-scenario-v2"),
            ("--a..b--", "a-b"),
            ("2024-load", "hr-2024-load"),
            ("ÉtéLoad", "t-load"),
            ("", "headroom"),
            ("___", "headroom"),
            ("UPPER", "upper"),
        ] {
            let got = sanitize_label(input, 63);
            assert_eq!(got, want, "{input:?}");
            assert_eq!(check_label(&got, 63), Ok(()), "{got}");
        }
        let long = "a".repeat(40) + "-" + &"b".repeat(40);
        let got = sanitize_label(&long, 41);
        assert_eq!(got, "a".repeat(40), "truncated, no trailing '-'");
        let got = sanitize_label(&"x".repeat(100), 63);
        assert_eq!(got.len(), 63);
    }

    #[test]
    fn bad_names_are_refused_with_the_rule() {
        for (bad, says) in [
            ("Mix", "contains 'M'"),
            ("mix_1", "contains '_'"),
            ("1mix", "does not start with a letter"),
            ("mix-", "ends with '-'"),
            ("", "is empty"),
        ] {
            let mut o = ManifestOpts::new("mix.yaml", SCENARIO, 3);
            o.name = Some(bad.into());
            let e = manifest(&o).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains("lowercase letters, digits and '-'"), "{e}");
        }
        let mut o = ManifestOpts::new("mix.yaml", SCENARIO, 3);
        o.name = Some("a".repeat(53));
        assert!(manifest(&o).unwrap_err().contains("at most 52"));
        o.name = Some("a".repeat(52));
        assert!(manifest(&o).is_ok());
    }

    #[test]
    fn bad_options_are_refused() {
        let base = ManifestOpts::new("mix.yaml", SCENARIO, 3);
        let cases: Vec<(ManifestOpts, &str)> = vec![
            (
                ManifestOpts {
                    agents: 0,
                    ..base.clone()
                },
                "at least 1 agent",
            ),
            (
                ManifestOpts {
                    port: 0,
                    ..base.clone()
                },
                "--port 0",
            ),
            (
                ManifestOpts {
                    namespace: "Prod".into(),
                    ..base.clone()
                },
                "--namespace 'Prod'",
            ),
            (
                ManifestOpts {
                    image: "a b".into(),
                    ..base.clone()
                },
                "--image",
            ),
            (
                ManifestOpts {
                    cpu: Some("two".into()),
                    ..base.clone()
                },
                "--cpu 'two'",
            ),
            (
                ManifestOpts {
                    cpu: Some("1.".into()),
                    ..base.clone()
                },
                "--cpu '1.'",
            ),
            (
                ManifestOpts {
                    memory: Some("1GB".into()),
                    ..base.clone()
                },
                "--memory '1GB'",
            ),
            (
                ManifestOpts {
                    target: Some("a b:1".into()),
                    ..base.clone()
                },
                "--target",
            ),
            (
                ManifestOpts {
                    scenario_text: "x".repeat(MAX_SCENARIO_BYTES + 1),
                    ..base.clone()
                },
                "1 MiB",
            ),
        ];
        for (o, says) in cases {
            let e = manifest(&o).unwrap_err();
            assert!(e.contains(says), "{says}: {e}");
        }
        let ok = ManifestOpts {
            cpu: Some("500m".into()),
            memory: Some("1.5Gi".into()),
            ..base
        };
        assert!(manifest(&ok).is_ok());
    }

    #[test]
    fn indexed_job_secret_env_and_endpoints() {
        let mut o = ManifestOpts::new("mix.yaml", SCENARIO, 3);
        o.namespace = "load".into();
        o.cpu = Some("2".into());
        o.memory = Some("1Gi".into());
        o.target = Some("web.shop.svc:8080".into());
        o.run_args = vec!["--on-agent-loss".into(), "stop".into()];
        let y = manifest(&o).unwrap();
        let d = docs(&y);
        assert_eq!(d.len(), 7, "{y}");
        let job = kind(&d, "Job", "mix-agents");
        assert_eq!(s(job, "spec.completionMode"), "Indexed");
        assert_eq!(s(job, "spec.completions"), "3");
        assert_eq!(s(job, "spec.parallelism"), "3");
        assert_eq!(s(job, "spec.template.spec.subdomain"), "mix-agents");
        let c = at(job, "spec.template.spec.containers.0");
        assert_eq!(s(c, "image"), "headroom:latest");
        assert_eq!(s(c, "command.3"), "0.0.0.0:7070");
        assert_eq!(s(c, "env.0.name"), "HEADROOM_TOKEN");
        assert_eq!(s(c, "env.0.valueFrom.secretKeyRef.name"), "mix-token");
        assert_eq!(s(c, "env.0.valueFrom.secretKeyRef.key"), "token");
        assert_eq!(s(c, "resources.requests.cpu"), "2");
        assert_eq!(s(c, "resources.limits.memory"), "1Gi");
        let svc = kind(&d, "Service", "mix-agents");
        assert_eq!(s(svc, "spec.clusterIP"), "None");
        assert_eq!(s(svc, "metadata.namespace"), "load");
        let secret = kind(&d, "Secret", "mix-token");
        assert_eq!(s(secret, "stringData.token"), TOKEN_PLACEHOLDER);
        let cm = kind(&d, "ConfigMap", "mix-config");
        let data = at(cm, "data").as_mapping().unwrap();
        assert_eq!(data.get_scalar("mix.yaml").unwrap().as_str(), SCENARIO);
        let eps: Vec<&str> = data
            .get_scalar("agents.txt")
            .unwrap()
            .as_str()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect();
        assert_eq!(
            eps,
            [
                "mix-agents-0.mix-agents.load.svc.cluster.local:7070",
                "mix-agents-1.mix-agents.load.svc.cluster.local:7070",
                "mix-agents-2.mix-agents.load.svc.cluster.local:7070",
            ]
        );
        let ctl = kind(&d, "Job", "mix-controller");
        let c = at(ctl, "spec.template.spec.containers.0");
        let cmd: Vec<&str> = at(c, "command")
            .as_sequence()
            .unwrap()
            .iter()
            .map(|n| n.as_scalar().unwrap().as_str())
            .collect();
        assert_eq!(
            cmd[..5],
            [
                "headroom",
                "run",
                "/etc/headroom/mix.yaml",
                "--agents",
                "file:/etc/headroom/agents.txt"
            ]
        );
        assert!(cmd.ends_with(&["--target", "web.shop.svc:8080", "--on-agent-loss", "stop"]));
        assert_eq!(s(c, "env.0.valueFrom.secretKeyRef.name"), "mix-token");
        kind(&d, "Service", "mix-controller");
        kind(&d, "NetworkPolicy", "mix-agents");

        o.secret = false;
        let d = docs(&manifest(&o).unwrap());
        assert!(d.iter().all(|n| s(n, "kind") != "Secret"));
    }

    /// Text a block scalar must carry exactly: trailing newlines (none, one, several), a leading
    /// space, a `---` line and a `#` line, quotes, tabs; else double quotes (CR, blank-ish lines).
    #[test]
    fn scenario_text_survives_byte_for_byte() {
        for text in [
            SCENARIO,
            "no newline at the end",
            "two newlines\n\n",
            "\n\nleading blank lines\n",
            "  leading space\nnext\n",
            "---\n# not a comment here\nkey: \"q\" 'x' \\ \t tab\n...\n",
            "crlf\r\nline\r\n",
            "spaces-only line\n   \nafter\n",
            "tab-only line\n\t\nafter",
            "",
            "unicode: é ☃ \u{1F600}\n",
            "bell\u{7}\n",
            "\tfirst line starts with a tab\n",
            "# a comment first\nkey: |\n  nested block\n",
        ] {
            let o = ManifestOpts::new("s.yaml", text, 1);
            let y = manifest(&o).unwrap();
            let d = docs(&y);
            let cm = d.iter().find(|n| s(n, "kind") == "ConfigMap").unwrap();
            let data = at(cm, "data").as_mapping().unwrap();
            assert_eq!(data.get_scalar("s.yaml").unwrap().as_str(), text, "{y}");
        }
    }

    #[test]
    fn names_derive_from_the_file_and_fit_the_hostnames() {
        let o = ManifestOpts::new(
            &file_name(Path::new("x/My Load_Test.v2.yaml")),
            SCENARIO,
            1000,
        );
        let d = docs(&manifest(&o).unwrap());
        let job = d
            .iter()
            .find(|n| s(n, "kind") == "Job" && s(n, "spec.completionMode") == "Indexed")
            .map(|n| s(n, "metadata.name"))
            .unwrap();
        assert_eq!(job, "my-load-test-v2-agents");
        let o = ManifestOpts::new(&format!("{}.yaml", "x".repeat(200)), SCENARIO, 1000);
        let y = manifest(&o).unwrap();
        for n in docs(&y) {
            let name = s(&n, "metadata.name");
            assert_eq!(check_label(name, 63), Ok(()), "{name}");
        }
        assert!(y.contains(&format!("{}-agents-999.", "x".repeat(52))));
        assert_eq!(
            check_label(&format!("{}-agents-999", "x".repeat(52)), 63),
            Ok(())
        );
    }

    #[test]
    fn file_names_become_config_keys() {
        assert_eq!(file_name(Path::new("scenarios/mix.yaml")), "mix.yaml");
        assert_eq!(file_name(Path::new("a b/my shop.xml")), "my-shop.xml");
        assert_eq!(file_name(Path::new("..")), "scenario.yaml");
        assert_eq!(file_name(Path::new("agents.txt")), "scenario.txt");
    }
}
