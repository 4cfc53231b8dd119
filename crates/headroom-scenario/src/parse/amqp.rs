//! AMQP 0-9-1: the `amqp` step and the `amqp:` settings section (servers with `protocol:
//! amqp`). Same invariants as the parent: every error goes through `Parser::err`, located.
//!
//! ```yaml
//! servers: [{host: 127.0.0.1, port: 5672, protocol: amqp}]
//! amqp: {user: guest, password: guest, vhost: /}
//! sessions:
//!   - name: publisher
//!     steps:
//!       - amqp: {channel_open: 1}
//!       - amqp: {confirm_select: 1}
//!       - amqp: {publish: orders, routing_key: new, persistent: true, size: 100}
//!       - amqp: {wait_confirms: 5s}
//!       - amqp: close
//! ```

use super::{Parser, Vars};
use crate::model::*;
use marked_yaml::types::MarkedMappingNode;
use marked_yaml::Node;
use std::time::Duration;

const ACTIONS: &[&str] = &[
    "channel_open",
    "channel_close",
    "exchange_declare",
    "queue_declare",
    "queue_bind",
    "confirm_select",
    "qos",
    "consume",
    "publish",
    "wait_confirms",
    "wait",
    "close",
];
const MAX_WAIT: Duration = Duration::from_secs(86_400);
const CHANNEL: &str = "channel: expected a number, 1 to 65535, or a template such as \"${ch}\"";
/// Longest channel template: a number and some variables, not a text.
const MAX_CHANNEL_TEXT: usize = 255;

/// An amqp step's metric name without `name`: `amqp:TYPE`.
pub(crate) fn default_amqp_name<T>(a: &AmqpAction<T>) -> String {
    format!("amqp:{}", a.type_name())
}

impl Parser {
    /// `amqp: close` or `amqp: {ACTION: ..., options, channel, name}`.
    pub(super) fn amqp(&mut self, node: &Node, vars: &Vars) -> Option<Amqp> {
        if let Some(s) = node.as_scalar() {
            if s.as_str() != "close" {
                self.err(
                    node.span(),
                    format!(
                        "amqp: expected close or a mapping with one of {}",
                        ACTIONS.join(", ")
                    ),
                );
                return None;
            }
            let action = AmqpAction::Close;
            return Some(Amqp {
                name: default_amqp_name(&action),
                action,
            });
        }
        let m = self.map(node, "amqp")?;
        let given: Vec<(&str, &Node)> = ACTIONS
            .iter()
            .filter_map(|k| m.get_node(k).map(|n| (*k, n)))
            .collect();
        let (kind, n) = match given.as_slice() {
            [one] => *one,
            [] => {
                self.err(
                    m.span(),
                    format!("amqp: expected one of {}", ACTIONS.join(", ")),
                );
                return None;
            }
            [_, (second, n), ..] => {
                self.err(
                    n.span(),
                    format!("an amqp step takes one action ('{second}' is a second one)"),
                );
                return None;
            }
        };
        let extra: &[&str] = match kind {
            "exchange_declare" => &["type", "durable", "channel"],
            "queue_declare" => &["durable", "exclusive", "auto_delete", "channel"],
            "queue_bind" => &["exchange", "routing_key", "channel"],
            "qos" | "consume" => &["channel", "ack"],
            "publish" => &["routing_key", "persistent", "size", "text", "channel"],
            _ => &[],
        };
        let mut allowed = vec![kind, "name"];
        allowed.extend_from_slice(extra);
        if kind == "qos" {
            allowed.retain(|k| *k != "ack");
        }
        self.keys(m, &format!("amqp {kind}"), &allowed);
        let channel = match m.get_node("channel") {
            Some(c) => self.amqp_channel(c, vars),
            None => Some("1".to_string()),
        };
        let flag = |p: &mut Parser, key: &str, default: bool| match m.get_node(key) {
            Some(b) => p.boolean(b, key),
            None => Some(default),
        };
        let action = match kind {
            "channel_open" if n.as_scalar().is_some_and(|s| s.as_str() == "auto") => {
                AmqpAction::ChannelOpen { channel: None }
            }
            "channel_open" | "channel_close" | "confirm_select" => {
                let ch = self.amqp_channel(n, vars)?;
                match kind {
                    "channel_open" => AmqpAction::ChannelOpen { channel: Some(ch) },
                    "channel_close" => AmqpAction::ChannelClose { channel: ch },
                    _ => AmqpAction::ConfirmSelect { channel: ch },
                }
            }
            "exchange_declare" => {
                let exchange = self.amqp_text(n, "exchange_declare", vars);
                let kind = match m.get_node("type") {
                    Some(t) => match t.as_scalar().map(|s| s.as_str()) {
                        Some(k @ ("direct" | "fanout" | "topic" | "headers")) => {
                            Some(k.to_string())
                        }
                        _ => {
                            self.err(t.span(), "type: expected direct, fanout, topic or headers");
                            None
                        }
                    },
                    None => Some("direct".to_string()),
                };
                let durable = flag(self, "durable", false);
                AmqpAction::ExchangeDeclare {
                    channel: channel?,
                    exchange: exchange?,
                    kind: kind?,
                    durable: durable?,
                }
            }
            "queue_declare" => {
                let queue = self.amqp_text(n, "queue_declare", vars);
                let durable = flag(self, "durable", false);
                let exclusive = flag(self, "exclusive", false);
                let auto_delete = flag(self, "auto_delete", false);
                AmqpAction::QueueDeclare {
                    channel: channel?,
                    queue: queue?,
                    durable: durable?,
                    exclusive: exclusive?,
                    auto_delete: auto_delete?,
                }
            }
            "queue_bind" => {
                let queue = self.amqp_text(n, "queue_bind", vars);
                let exchange = self
                    .required(m, "exchange", "amqp queue_bind")
                    .and_then(|e| self.amqp_text(e, "exchange", vars));
                let routing_key = match m.get_node("routing_key") {
                    Some(r) => self.amqp_text(r, "routing_key", vars),
                    None => Some(String::new()),
                };
                AmqpAction::QueueBind {
                    channel: channel?,
                    queue: queue?,
                    exchange: exchange?,
                    routing_key: routing_key?,
                }
            }
            "qos" => {
                let prefetch = n
                    .as_scalar()
                    .and_then(|s| s.as_str().trim().parse::<u16>().ok());
                if prefetch.is_none() {
                    self.err(
                        n.span(),
                        "qos: expected a prefetch count, 0 (no limit) to 65535",
                    );
                }
                AmqpAction::Qos {
                    channel: channel?,
                    prefetch: prefetch?,
                }
            }
            "consume" => {
                let queue = self.amqp_text(n, "consume", vars);
                let ack = flag(self, "ack", true);
                AmqpAction::Consume {
                    channel: channel?,
                    queue: queue?,
                    ack: ack?,
                }
            }
            "publish" => {
                let exchange = match n.as_scalar() {
                    Some(_) => self.amqp_text(n, "publish", vars),
                    None => {
                        self.err(
                            n.span(),
                            "publish: expected the exchange (\"\" for the default)",
                        );
                        None
                    }
                };
                let routing_key = match m.get_node("routing_key") {
                    Some(r) => self.amqp_text(r, "routing_key", vars),
                    None => Some(String::new()),
                };
                let persistent = flag(self, "persistent", false);
                let payload = self.amqp_payload(m, vars);
                AmqpAction::Publish {
                    channel: channel?,
                    exchange: exchange?,
                    routing_key: routing_key?,
                    persistent: persistent?,
                    payload: payload?,
                }
            }
            "wait_confirms" => AmqpAction::WaitConfirms {
                timeout: self.amqp_timeout(n, "wait_confirms")?,
            },
            "wait" => {
                let Some(w) = n.as_mapping() else {
                    self.err(n.span(), "wait: expected {messages: N, timeout: DURATION}");
                    return None;
                };
                self.keys(w, "wait", &["messages", "timeout"]);
                let messages = self
                    .required(w, "messages", "wait")
                    .and_then(|x| self.count(x, "messages"));
                let timeout = match w.get_node("timeout") {
                    Some(t) => self.amqp_timeout(t, "timeout"),
                    None => Some(Duration::from_secs(60)),
                };
                AmqpAction::Wait {
                    messages: messages?,
                    timeout: timeout?,
                }
            }
            _ => {
                if n.as_scalar().and_then(|s| s.as_bool()) != Some(true) {
                    self.err(n.span(), "close: expected true");
                    return None;
                }
                AmqpAction::Close
            }
        };
        let name = match m.get_node("name") {
            Some(x) => self.name(x, "name")?,
            None => default_amqp_name(&action),
        };
        Some(Amqp { name, action })
    }

    /// A channel: a number from 1 to 65535, or text with `${var}`s that makes one when the
    /// step runs (a value that does not fails the step unsent). Kept as its text.
    fn amqp_channel(&mut self, n: &Node, vars: &Vars) -> Option<String> {
        let Some(s) = n.as_scalar().map(|s| s.as_str().trim().to_string()) else {
            self.err(n.span(), CHANNEL);
            return None;
        };
        if s.contains("${") {
            if s.len() > MAX_CHANNEL_TEXT {
                self.err(
                    n.span(),
                    format!("channel: at most {MAX_CHANNEL_TEXT} bytes"),
                );
                return None;
            }
            self.refs(n, &s, vars);
            return Some(s);
        }
        match s.parse::<u16>() {
            // Written back as the number, which reads the same.
            Ok(c) if c >= 1 => Some(c.to_string()),
            _ => {
                self.err(n.span(), CHANNEL);
                None
            }
        }
    }

    /// An exchange, queue or routing key: at most 255 bytes (AMQP's short string), `${var}`s.
    fn amqp_text(&mut self, n: &Node, what: &str, vars: &Vars) -> Option<String> {
        let t = self.string(n, what)?;
        if t.len() > 255 {
            self.err(n.span(), format!("{what}: at most 255 bytes"));
            return None;
        }
        self.refs(n, &t, vars);
        Some(t)
    }

    fn amqp_payload(&mut self, m: &MarkedMappingNode, vars: &Vars) -> Option<MqttPayload<String>> {
        match (m.get_node("size"), m.get_node("text")) {
            (Some(_), Some(t)) => {
                self.err(t.span(), "publish takes size or text, not both");
                None
            }
            (Some(sz), None) => {
                let v = sz
                    .as_scalar()
                    .and_then(|s| s.as_str().trim().parse::<u64>().ok());
                match v {
                    Some(v) if v <= super::MAX_MQTT_PAYLOAD => Some(MqttPayload::Size(v as u32)),
                    _ => {
                        self.err(
                            sz.span(),
                            format!("size: expected bytes, 0..={}", super::MAX_MQTT_PAYLOAD),
                        );
                        None
                    }
                }
            }
            (None, Some(t)) => {
                let text = self.string(t, "text")?;
                self.refs(t, &text, vars);
                Some(MqttPayload::Text(text))
            }
            (None, None) => Some(MqttPayload::Size(32)),
        }
    }

    fn amqp_timeout(&mut self, n: &Node, what: &str) -> Option<Duration> {
        let d = self.duration(n, what)?;
        if d.is_zero() || d > MAX_WAIT {
            self.err(
                n.span(),
                format!("{what}: expected more than 0, at most 24h"),
            );
            return None;
        }
        Some(d)
    }

    /// `amqp: {user, password, vhost}`.
    pub(super) fn amqp_spec(&mut self, node: &Node) -> Option<AmqpSpec> {
        let m = self.map(node, "amqp")?;
        self.keys(m, "amqp", &["user", "password", "vhost"]);
        let user = match m.get_node("user") {
            Some(u) => self.name(u, "user"),
            None => Some("guest".into()),
        };
        let password = match m.get_node("password") {
            Some(p) => self.string(p, "password"),
            None => Some("guest".into()),
        };
        let vhost = match m.get_node("vhost") {
            Some(v) => self.name(v, "vhost"),
            None => Some("/".into()),
        };
        Some(AmqpSpec {
            user: user?,
            password: password?,
            vhost: vhost?,
        })
    }
}
