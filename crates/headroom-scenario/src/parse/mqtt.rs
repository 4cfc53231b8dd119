//! MQTT: the `mqtt` step and the `mqtt:` settings section. Same invariants as the parent:
//! every error goes through `Parser::err`, located.
//!
//! ```yaml
//! servers: [{host: 127.0.0.1, port: 1883, protocol: mqtt}]
//! mqtt: {version: 5, keep_alive: 30s, username: u, password: p}   # optional
//! sessions:
//!   - name: sensor
//!     steps:
//!       - mqtt: {connect: {will: {topic: "dead/${user_id}", payload: bye}}}
//!       - mqtt: {publish: "sensors/${user_id}", qos: 1, size: 100}
//!       - mqtt: {subscribe: "sensors/#", qos: 1}
//!       - mqtt: {wait: {messages: 1000, timeout: 60s}}
//!       - mqtt: disconnect
//! ```

use super::{Parser, Vars};
use crate::model::*;
use marked_yaml::types::MarkedMappingNode;
use marked_yaml::Node;
use std::time::Duration;

/// The action keys of an `mqtt` step (exactly one per step).
const ACTIONS: &[&str] = &[
    "connect",
    "publish",
    "subscribe",
    "unsubscribe",
    "ping",
    "wait",
    "disconnect",
];
/// Every key of an `mqtt` step mapping.
const STEP_KEYS: &[&str] = &[
    "connect",
    "publish",
    "subscribe",
    "unsubscribe",
    "ping",
    "wait",
    "disconnect",
    "qos",
    "retain",
    "size",
    "text",
    "name",
];
const FORMS: &str = "connect, ping, disconnect, {publish: TOPIC, qos, retain, size | text}, \
                     {subscribe: FILTER, qos}, {unsubscribe: FILTER}, {wait: {messages, \
                     timeout}} or {connect: {...}}";
/// The largest payload a `publish` step makes (`size`, or a text before substitution): 1 MiB,
/// the codec's default packet bound on the receiving side, so the generator's own subscribers
/// can take what its publishers send.
pub(crate) const MAX_MQTT_PAYLOAD: u64 = 1 << 20;
/// The longest `wait`: a day (any bound beats none; a wait is a step's timeout).
const MAX_WAIT: Duration = Duration::from_secs(86_400);

/// An mqtt step's metric name without `name`: `mqtt:TYPE`.
pub(crate) fn default_mqtt_name<T>(a: &MqttAction<T>) -> String {
    format!("mqtt:{}", a.type_name())
}

impl Parser {
    /// `mqtt: ping|disconnect|connect` or `mqtt: {ACTION: ..., qos, retain, size, text, name}`.
    pub(super) fn mqtt(&mut self, node: &Node, vars: &Vars) -> Option<Mqtt> {
        if let Some(s) = node.as_scalar() {
            let action = match s.as_str() {
                "ping" => MqttAction::Ping,
                "disconnect" => MqttAction::Disconnect,
                "connect" => MqttAction::Connect(Box::new(self.mqtt_base.clone())),
                _ => {
                    self.err(node.span(), format!("mqtt: expected {FORMS}"));
                    return None;
                }
            };
            return Some(Mqtt {
                name: default_mqtt_name(&action),
                action,
            });
        }
        let m = self.map(node, "mqtt")?;
        self.keys(m, "mqtt step", STEP_KEYS);
        let given: Vec<(&str, &Node)> = ACTIONS
            .iter()
            .filter_map(|k| m.get_node(k).map(|n| (*k, n)))
            .collect();
        let (kind, n) = match given.as_slice() {
            [one] => *one,
            [] => {
                self.err(m.span(), format!("mqtt: expected {FORMS}"));
                return None;
            }
            [_, (second, n), ..] => {
                self.err(
                    n.span(),
                    format!(
                        "an mqtt step takes one of {} ('{second}' is a second one)",
                        ACTIONS.join(", ")
                    ),
                );
                return None;
            }
        };
        // The modifiers each action takes.
        let takes: &[&str] = match kind {
            "publish" => &["qos", "retain", "size", "text"],
            "subscribe" => &["qos"],
            _ => &[],
        };
        for k in m.keys() {
            let k_str = k.as_str();
            if ["qos", "retain", "size", "text"].contains(&k_str) && !takes.contains(&k_str) {
                self.err(
                    k.span(),
                    format!("'{k_str}' does not apply to an mqtt {kind}"),
                );
            }
        }
        let action = match kind {
            "publish" => {
                let topic = self.mqtt_topic(n, "publish", vars, false);
                let qos = self.mqtt_qos(m);
                let retain = match m.get_node("retain") {
                    Some(r) => self.boolean(r, "retain"),
                    None => Some(false),
                };
                let payload = match (m.get_node("size"), m.get_node("text")) {
                    (Some(_), Some(t)) => {
                        self.err(t.span(), "publish takes size or text, not both");
                        None
                    }
                    (Some(sz), None) => self.mqtt_size(sz).map(MqttPayload::Size),
                    (None, Some(t)) => {
                        let text = self.string(t, "text");
                        if let Some(text) = &text {
                            self.refs(t, text, vars);
                            if text.len() as u64 > MAX_MQTT_PAYLOAD {
                                self.err(
                                    t.span(),
                                    format!("text: at most {MAX_MQTT_PAYLOAD} bytes"),
                                );
                            }
                        }
                        text.map(MqttPayload::Text)
                    }
                    // Room for the send time and a little more, as a sensor reading.
                    (None, None) => Some(MqttPayload::Size(32)),
                };
                MqttAction::Publish {
                    topic: topic?,
                    qos: qos?,
                    retain: retain?,
                    payload: payload?,
                }
            }
            "subscribe" => {
                let filter = self.mqtt_topic(n, "subscribe", vars, true);
                let qos = self.mqtt_qos(m);
                MqttAction::Subscribe {
                    filter: filter?,
                    qos: qos?,
                }
            }
            "unsubscribe" => MqttAction::Unsubscribe {
                filter: self.mqtt_topic(n, "unsubscribe", vars, true)?,
            },
            "wait" => self.mqtt_wait(n)?,
            "connect" => {
                if n.as_scalar().and_then(|s| s.as_bool()) == Some(true) {
                    MqttAction::Connect(Box::new(self.mqtt_base.clone()))
                } else {
                    let base = self.mqtt_base.clone();
                    MqttAction::Connect(Box::new(self.mqtt_connect(n, "connect", base)?))
                }
            }
            flag => {
                if n.as_scalar().and_then(|s| s.as_bool()) != Some(true) {
                    self.err(n.span(), format!("{flag}: expected true"));
                    return None;
                }
                if flag == "ping" {
                    MqttAction::Ping
                } else {
                    MqttAction::Disconnect
                }
            }
        };
        let name = match m.get_node("name") {
            Some(n) => self.name(n, "name")?,
            None => default_mqtt_name(&action),
        };
        Some(Mqtt { name, action })
    }

    /// A topic (`publish`) or a topic filter (`subscribe`, `unsubscribe`): not empty, at most
    /// 65,535 bytes, wildcards only in filters and only as whole levels (`+`, a last `#`).
    /// Parts from `${var}`s are checked by the broker, not here.
    fn mqtt_topic(&mut self, node: &Node, what: &str, vars: &Vars, filter: bool) -> Option<String> {
        let t = self.string(node, what)?;
        if t.is_empty() {
            self.err(
                node.span(),
                format!("{what}: expected a topic, got nothing"),
            );
            return None;
        }
        if t.len() > usize::from(u16::MAX) {
            self.err(
                node.span(),
                format!("{what}: a topic is at most 65535 bytes"),
            );
            return None;
        }
        self.refs(node, &t, vars);
        let levels: Vec<&str> = t.split('/').collect();
        for (i, level) in levels.iter().enumerate() {
            let wild = level.contains('+') || level.contains('#');
            if !wild {
                continue;
            }
            if !filter {
                self.err(
                    node.span(),
                    format!("{what}: '+' and '#' are wildcards of subscriptions, not of a topic published to"),
                );
                return None;
            }
            let whole = *level == "+" || (*level == "#" && i + 1 == levels.len());
            if !whole {
                self.err(
                    node.span(),
                    format!(
                        "{what}: a wildcard is a whole level: '+' anywhere, '#' only last (got '{level}')"
                    ),
                );
                return None;
            }
        }
        if t.contains('\0') {
            self.err(node.span(), format!("{what}: a topic has no NUL character"));
            return None;
        }
        Some(t)
    }

    fn mqtt_qos(&mut self, m: &MarkedMappingNode) -> Option<u8> {
        let Some(n) = m.get_node("qos") else {
            return Some(0);
        };
        self.qos(n, "qos")
    }

    fn qos(&mut self, n: &Node, what: &str) -> Option<u8> {
        match n.as_scalar().map(|s| s.as_str().trim()) {
            Some("0") => Some(0),
            Some("1") => Some(1),
            Some("2") => Some(2),
            _ => {
                self.err(n.span(), format!("{what}: expected 0, 1 or 2"));
                None
            }
        }
    }

    fn mqtt_size(&mut self, n: &Node) -> Option<u32> {
        let v = n
            .as_scalar()
            .and_then(|s| s.as_str().trim().parse::<u64>().ok());
        match v {
            Some(v) if v <= MAX_MQTT_PAYLOAD => Some(v as u32),
            _ => {
                self.err(
                    n.span(),
                    format!("size: expected bytes, 0..={MAX_MQTT_PAYLOAD}"),
                );
                None
            }
        }
    }

    /// `wait: {messages: N, timeout: 60s}` (a wait for a time alone is a `think`).
    fn mqtt_wait(&mut self, n: &Node) -> Option<MqttAction<String>> {
        let Some(w) = n.as_mapping() else {
            self.err(
                n.span(),
                "wait: expected {messages: N, timeout: DURATION} (to wait a time alone, think)",
            );
            return None;
        };
        self.keys(w, "wait", &["messages", "timeout"]);
        let messages = self
            .required(w, "messages", "wait")
            .and_then(|x| self.count(x, "messages"));
        let timeout = match w.get_node("timeout") {
            Some(t) => self.duration(t, "timeout").and_then(|d| {
                if d.is_zero() || d > MAX_WAIT {
                    self.err(t.span(), "timeout: expected more than 0, at most 24h");
                    None
                } else {
                    Some(d)
                }
            }),
            None => Some(Duration::from_secs(60)),
        };
        Some(MqttAction::Wait {
            messages: messages?,
            timeout: timeout?,
        })
    }

    /// A CONNECT's options: `base` with what `node` sets.
    fn mqtt_connect(&mut self, node: &Node, what: &str, base: MqttConnect) -> Option<MqttConnect> {
        let m = self.map(node, what)?;
        let mut keys = vec![
            "client_id",
            "clean_start",
            "keep_alive",
            "username",
            "password",
            "will",
            "session_expiry",
        ];
        if what == "mqtt" {
            keys.push("version");
        }
        self.keys(m, what, &keys);
        let mut c = base;
        let mut ok = true;
        if let Some(n) = m.get_node("client_id") {
            match self.string(n, "client_id") {
                Some(s) if s.len() <= 200 => c.client_id = s,
                Some(_) => {
                    self.err(
                        n.span(),
                        "client_id: at most 200 bytes (a prefix; the user's number follows)",
                    );
                    ok = false;
                }
                None => ok = false,
            }
        }
        if let Some(n) = m.get_node("clean_start") {
            match self.boolean(n, "clean_start") {
                Some(b) => c.clean_start = b,
                None => ok = false,
            }
        }
        if let Some(n) = m.get_node("keep_alive") {
            match self.duration(n, "keep_alive") {
                Some(d) if d.as_secs() <= u64::from(u16::MAX) && d.subsec_nanos() == 0 => {
                    c.keep_alive = d.as_secs() as u16
                }
                Some(_) => {
                    self.err(n.span(), "keep_alive: whole seconds, 0s..=65535s (0s: off)");
                    ok = false;
                }
                None => ok = false,
            }
        }
        if let Some(n) = m.get_node("session_expiry") {
            match self.duration(n, "session_expiry") {
                Some(d) if d.as_secs() <= u64::from(u32::MAX) => {
                    c.session_expiry = d.as_secs() as u32
                }
                Some(_) => {
                    self.err(n.span(), "session_expiry: at most 4294967295s");
                    ok = false;
                }
                None => ok = false,
            }
        }
        for key in ["username", "password"] {
            if let Some(n) = m.get_node(key) {
                match self.string(n, key) {
                    Some(s) if s.len() <= usize::from(u16::MAX) => {
                        if key == "username" {
                            c.username = Some(s)
                        } else {
                            c.password = Some(s)
                        }
                    }
                    Some(_) => {
                        self.err(n.span(), format!("{key}: at most 65535 bytes"));
                        ok = false;
                    }
                    None => ok = false,
                }
            }
        }
        if let Some(n) = m.get_node("will") {
            match self.mqtt_will(n) {
                Some(w) => c.will = Some(w),
                None => ok = false,
            }
        }
        ok.then_some(c)
    }

    fn mqtt_will(&mut self, node: &Node) -> Option<MqttWill> {
        let m = self.map(node, "will")?;
        self.keys(m, "will", &["topic", "payload", "qos", "retain"]);
        let topic = self
            .required(m, "topic", "will")
            .and_then(|t| self.mqtt_topic(t, "will.topic", &Vars::new(), false));
        let payload = match m.get_node("payload") {
            Some(p) => self.string(p, "will.payload"),
            None => Some(String::new()),
        };
        let qos = match m.get_node("qos") {
            Some(q) => self.qos(q, "will.qos"),
            None => Some(0),
        };
        let retain = match m.get_node("retain") {
            Some(r) => self.boolean(r, "will.retain"),
            None => Some(false),
        };
        Some(MqttWill {
            topic: topic?,
            payload: payload?,
            qos: qos?,
            retain: retain?,
        })
    }

    /// `mqtt: {version, client_id, clean_start, keep_alive, username, password, will,
    /// session_expiry}`.
    pub(super) fn mqtt_spec(&mut self, node: &Node) -> Option<MqttSpec> {
        let m = self.map(node, "mqtt")?;
        let v5 = match m.get_node("version") {
            None => Some(false),
            Some(v) => match v.as_scalar().map(|s| s.as_str().trim()) {
                Some("3.1.1") | Some("3") | Some("4") => Some(false),
                Some("5") | Some("5.0") => Some(true),
                _ => {
                    self.err(v.span(), "version: expected 3.1.1 or 5");
                    None
                }
            },
        };
        let connect = self.mqtt_connect(node, "mqtt", MqttConnect::default());
        Some(MqttSpec {
            v5: v5?,
            connect: connect?,
            delivery: 0,
        })
    }
}
