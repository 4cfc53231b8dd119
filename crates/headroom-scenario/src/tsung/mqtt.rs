//! Tsung's `ts_mqtt` sessions (Tsung 1.7's `ts_config_mqtt`, `ts_mqtt`).
//!
//! Unlike the other protocols, an MQTT connection's setup has per-session options (clean
//! start, keep-alive, will), so Tsung's `connect` becomes headroom's `mqtt: {connect: {...}}`
//! step, which opens the connection with them there. The rest maps one to one:
//! `publish` (topic, qos, retained, the element's text as payload), `subscribe`,
//! `unsubscribe`, `disconnect`; `waitForMessages` is a think time of its `timeout` seconds
//! (default 1), exactly as Tsung compiles it, while the user's messages keep arriving.
//! Where headroom does better than Tsung it says so: QoS 2 publishes wait for their PUBCOMP
//! (Tsung 1.7 does not wait), and received QoS 2 messages get their PUBREC/PUBCOMP.

use super::{Conv, El};
use crate::model::*;
use headroom_core::Distribution;
use std::time::Duration;

/// Tsung's defaults (`ts_config_mqtt`).
const KEEPALIVE: u16 = 10;
const WAIT_TIMEOUT: f64 = 1.0;

impl Conv<'_> {
    pub(super) fn mqtt(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> bool {
        let Some(t) = self.required(el, "type") else {
            return false;
        };
        let (ty, ty_pos) = (t.value.clone(), t.pos);
        for c in &el.children {
            self.unexpected(c, "mqtt");
        }
        if ty != "publish" {
            self.no_text(el);
        }
        let action = match ty.as_str() {
            "connect" => {
                self.check_attrs(
                    el,
                    &[
                        "type",
                        "clean_start",
                        "keepalive",
                        "will_topic",
                        "will_qos",
                        "will_msg",
                        "will_retain",
                        "username",
                        "password",
                    ],
                );
                let Some(c) = self.mqtt_connect(el) else {
                    return false;
                };
                MqttAction::Connect(Box::new(c))
            }
            "publish" => {
                self.check_attrs(el, &["type", "topic", "qos", "retained"]);
                let topic = self.mqtt_topic(el, subst, false);
                let qos = self.mqtt_qos(el, "qos");
                let retain = self.bool_attr(el, "retained").or(Some(false));
                let text = self.subst(&el.text, el.text_pos.unwrap_or(el.pos), subst);
                if let Some(t) = &text {
                    if t.len() as u64 > crate::parse::MAX_MQTT_PAYLOAD {
                        self.error(
                            el.text_pos.unwrap_or(el.pos),
                            format!(
                                "a payload of {} bytes: headroom publishes at most {}",
                                t.len(),
                                crate::parse::MAX_MQTT_PAYLOAD
                            ),
                        );
                        return false;
                    }
                }
                let (Some(topic), Some(qos), Some(retain), Some(text)) = (topic, qos, retain, text)
                else {
                    return false;
                };
                MqttAction::Publish {
                    topic,
                    qos,
                    retain,
                    payload: MqttPayload::Text(text),
                }
            }
            "subscribe" => {
                self.check_attrs(el, &["type", "topic", "qos"]);
                let topic = self.mqtt_topic(el, subst, true);
                let qos = self.mqtt_qos(el, "qos");
                let (Some(filter), Some(qos)) = (topic, qos) else {
                    return false;
                };
                MqttAction::Subscribe { filter, qos }
            }
            "unsubscribe" => {
                self.check_attrs(el, &["type", "topic"]);
                let Some(filter) = self.mqtt_topic(el, subst, true) else {
                    return false;
                };
                MqttAction::Unsubscribe { filter }
            }
            "disconnect" => {
                self.check_attrs(el, &["type"]);
                MqttAction::Disconnect
            }
            "waitForMessages" => {
                self.check_attrs(el, &["type", "timeout"]);
                let secs = match el.attr("timeout") {
                    None => Some(WAIT_TIMEOUT),
                    Some(a) => match a.value.trim().parse::<f64>() {
                        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Some(v),
                        _ => {
                            let pos = a.pos;
                            self.error(
                                pos,
                                format!("timeout=\"{}\": expected seconds, 0 to 86400", a.value),
                            );
                            None
                        }
                    },
                };
                let Some(secs) = secs else {
                    return false;
                };
                // Tsung compiles it to a think time; messages keep arriving (and are counted)
                // while the user thinks.
                out.push(Step::Think(Distribution::Constant(
                    Duration::from_secs_f64(secs),
                )));
                return true;
            }
            other => {
                self.error(
                    ty_pos,
                    format!("<mqtt type=\"{other}\">: expected connect, publish, subscribe, unsubscribe, disconnect or waitForMessages"),
                );
                return false;
            }
        };
        if let MqttAction::Publish { qos: 2, .. } = action {
            self.warn(
                el.pos,
                "a QoS 2 publish waits for its PUBCOMP in headroom (Tsung 1.7 does not wait for it)",
            );
        }
        out.push(Step::Mqtt(Mqtt {
            name: crate::parse::default_mqtt_name(&action),
            action,
        }));
        true
    }

    /// A connect's options, Tsung's defaults where it says nothing.
    fn mqtt_connect(&mut self, el: &El) -> Option<MqttConnect> {
        let clean_start = self.bool_attr(el, "clean_start").unwrap_or(true);
        let keep_alive = match el.attr("keepalive") {
            None => Some(KEEPALIVE),
            Some(a) => match a.value.trim().parse::<u16>() {
                Ok(v) => Some(v),
                Err(_) => {
                    let pos = a.pos;
                    self.error(
                        pos,
                        format!(
                            "keepalive=\"{}\": expected whole seconds, 0 to 65535",
                            a.value
                        ),
                    );
                    None
                }
            },
        };
        let will = match el.attr("will_topic").map(|a| a.value.clone()) {
            Some(topic) if !topic.is_empty() => {
                let qos = self.mqtt_qos(el, "will_qos")?;
                let retain = self.bool_attr(el, "will_retain").unwrap_or(false);
                let payload = self.fixed_text(el, "will_msg")?;
                Some(MqttWill {
                    topic,
                    payload,
                    qos,
                    retain,
                })
            }
            _ => {
                for k in ["will_qos", "will_msg", "will_retain"] {
                    if let Some(a) = el.attr(k) {
                        let pos = a.pos;
                        self.warn(
                            pos,
                            format!(
                                "{k} is not honoured: the connect has no will_topic, so no will"
                            ),
                        );
                    }
                }
                None
            }
        };
        let username = el.attr("username").map(|a| a.value.clone());
        let password = el.attr("password").map(|a| a.value.clone());
        Some(MqttConnect {
            clean_start,
            keep_alive: keep_alive?,
            username,
            password,
            will,
            ..MqttConnect::default()
        })
    }

    /// An attribute's text that may not hold variables (a CONNECT's will), `""` when absent.
    fn fixed_text(&mut self, el: &El, key: &str) -> Option<String> {
        let Some(a) = el.attr(key) else {
            return Some(String::new());
        };
        if a.value.contains("%%") {
            let pos = a.pos;
            self.error(
                pos,
                format!("{key}: variables are not supported in a connect's will"),
            );
            return None;
        }
        Some(a.value.clone())
    }

    fn mqtt_qos(&mut self, el: &El, key: &str) -> Option<u8> {
        let Some(a) = el.attr(key) else {
            return Some(0);
        };
        match a.value.trim() {
            "0" => Some(0),
            "1" => Some(1),
            "2" => Some(2),
            v => {
                let (pos, v) = (a.pos, v.to_string());
                self.error(pos, format!("{key}=\"{v}\": expected 0, 1 or 2"));
                None
            }
        }
    }

    /// `topic`, substituted: required, wildcards only in a filter.
    fn mqtt_topic(&mut self, el: &El, subst: bool, filter: bool) -> Option<String> {
        let a = self.required(el, "topic")?;
        let (value, pos) = (a.value.clone(), a.pos);
        if value.is_empty() {
            self.error(pos, "topic=\"\": expected a topic");
            return None;
        }
        if !filter && (value.contains('+') || value.contains('#')) {
            self.error(
                pos,
                format!("topic=\"{value}\": '+' and '#' are wildcards of subscriptions, not of a topic published to"),
            );
            return None;
        }
        self.subst(&value, pos, subst)
    }
}
