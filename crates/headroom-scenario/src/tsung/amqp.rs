//! Tsung's `ts_amqp` sessions (Tsung 1.7's `ts_config_amqp`, `ts_amqp`).
//!
//! `connection.open` becomes a `connect` step (headroom logs in and opens the virtual host
//! when the connection opens, timed as `amqp:connect`), its `vhost` and the `ts_amqp` options'
//! username and password the scenario's `amqp:` section; `connection.close` is `amqp: close`.
//! The channel methods map one to one, with Tsung's defaults: channel 1, `routing_key` "/",
//! `ack` false, `payload_size` 100. A `channel.open` without a channel (or channel 0) takes
//! the number Tsung's client would (`channel_open: auto`). A channel may be a variable, such as
//! a `<for>` counter (`channel="%%_loops%%"`): it is resolved when the step runs.
//! `waitForConfirms` and `waitForMessages` are think times of their `timeout` (defaults 1 s and
//! 60 s), exactly as Tsung compiles them, while confirms and deliveries keep arriving.

use super::proto::{NoReply, Produced};
use super::{Conv, El};
use crate::model::*;
use headroom_core::Distribution;
use std::time::Duration;

/// Tsung's defaults (`ts_config_amqp`).
const CONFIRMS_TIMEOUT: f64 = 1.0;
const MESSAGES_TIMEOUT: f64 = 60.0;
const PAYLOAD_SIZE: u64 = 100;
const ROUTING_KEY: &str = "/";

impl Conv<'_> {
    pub(super) fn amqp(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> Produced {
        let Some(t) = self.required(el, "type") else {
            return Produced::Nothing;
        };
        let (ty, ty_pos) = (t.value.clone(), t.pos);
        self.no_text(el);
        for c in &el.children {
            self.unexpected(c, "amqp");
        }
        let action = match ty.as_str() {
            "connection.open" => {
                self.check_attrs(el, &["type", "vhost"]);
                let Some(vhost) = self.fixed(el, "vhost", Some("/")) else {
                    return Produced::Nothing;
                };
                if !self.sess_amqp_vhost(vhost, el.pos) {
                    return Produced::Nothing;
                }
                self.proto_connect(out);
                return Produced::NoReply(NoReply::Setup);
            }
            "connection.close" => {
                self.check_attrs(el, &["type"]);
                self.proto_act();
                out.push(amqp_step(AmqpAction::Close));
                self.proto_closed();
                return Produced::NoReply(NoReply::Close);
            }
            "waitForConfirms" | "waitForMessages" => {
                self.check_attrs(el, &["type", "timeout"]);
                let default = if ty == "waitForConfirms" {
                    CONFIRMS_TIMEOUT
                } else {
                    MESSAGES_TIMEOUT
                };
                let Some(secs) = self.amqp_timeout(el, default) else {
                    return Produced::Nothing;
                };
                // Tsung compiles both to a think time; confirms and deliveries keep arriving
                // (and are counted) while the user thinks.
                out.push(Step::Think(Distribution::Constant(
                    Duration::from_secs_f64(secs),
                )));
                self.proto_act();
                return Produced::Unreadable;
            }
            "channel.open" => {
                self.check_attrs(el, &["type", "channel"]);
                // Without a channel Tsung's client picks one ("0" asks for that too).
                let channel = match el.attr("channel") {
                    Some(a) if a.value.trim() == "0" => None,
                    Some(_) => match self.amqp_channel(el, subst) {
                        Some(c) => Some(c),
                        None => return Produced::Nothing,
                    },
                    None => None,
                };
                AmqpAction::ChannelOpen { channel }
            }
            "channel.close" | "confirm.select" => {
                self.check_attrs(el, &["type", "channel"]);
                let Some(channel) = self.amqp_channel(el, subst) else {
                    return Produced::Nothing;
                };
                if ty == "channel.close" {
                    AmqpAction::ChannelClose { channel }
                } else {
                    AmqpAction::ConfirmSelect { channel }
                }
            }
            "basic.qos" => {
                self.check_attrs(el, &["type", "channel", "prefetch_count", "prefetch_size"]);
                if let Some(a) = el.attr("prefetch_size").filter(|a| a.value.trim() != "0") {
                    let pos = a.pos;
                    self.warn(
                        pos,
                        "attribute 'prefetch_size' of <amqp> is not honoured: headroom's qos sets the prefetch count (RabbitMQ refuses a prefetch size)",
                    );
                }
                let channel = self.amqp_channel(el, subst);
                let prefetch = match el.attr("prefetch_count") {
                    None => Some(0),
                    Some(a) => match a.value.trim().parse::<u16>() {
                        Ok(v) => Some(v),
                        Err(_) => {
                            let pos = a.pos;
                            self.error(
                                pos,
                                format!(
                                    "prefetch_count=\"{}\": expected 0 (no limit) to 65535",
                                    a.value
                                ),
                            );
                            None
                        }
                    },
                };
                let (Some(channel), Some(prefetch)) = (channel, prefetch) else {
                    return Produced::Nothing;
                };
                AmqpAction::Qos { channel, prefetch }
            }
            "basic.consume" => {
                self.check_attrs(el, &["type", "channel", "queue", "ack"]);
                let channel = self.amqp_channel(el, subst);
                let queue = self.amqp_name(el, "queue", "", subst);
                // Tsung's default: no acknowledgements (the broker counts each delivery done).
                let ack = self.bool_attr(el, "ack").or(Some(false));
                let (Some(channel), Some(queue), Some(ack)) = (channel, queue, ack) else {
                    return Produced::Nothing;
                };
                AmqpAction::Consume {
                    channel,
                    queue,
                    ack,
                }
            }
            "basic.publish" => {
                self.check_attrs(
                    el,
                    &[
                        "type",
                        "channel",
                        "exchange",
                        "routing_key",
                        "persistent",
                        "payload_size",
                        "payload",
                    ],
                );
                let channel = self.amqp_channel(el, subst);
                let exchange = self.amqp_name(el, "exchange", "", subst);
                let routing_key = self.amqp_name(el, "routing_key", ROUTING_KEY, subst);
                let persistent = self.bool_attr(el, "persistent").or(Some(false));
                let payload = self.amqp_payload(el, subst);
                let (
                    Some(channel),
                    Some(exchange),
                    Some(routing_key),
                    Some(persistent),
                    Some(payload),
                ) = (channel, exchange, routing_key, persistent, payload)
                else {
                    return Produced::Nothing;
                };
                AmqpAction::Publish {
                    channel,
                    exchange,
                    routing_key,
                    persistent,
                    payload,
                }
            }
            other => {
                self.error(
                    ty_pos,
                    format!("<amqp type=\"{other}\">: expected connection.open, channel.open, confirm.select, basic.qos, basic.consume, basic.publish, waitForConfirms, waitForMessages, channel.close or connection.close (what Tsung 1.7 sends)"),
                );
                return Produced::Nothing;
            }
        };
        self.proto_act();
        out.push(amqp_step(action));
        Produced::Unreadable
    }

    /// `<option type="ts_amqp" name value>`: the login's username and password (Tsung's
    /// defaults guest/guest); headroom asks for no heartbeat, whatever the option says.
    pub(super) fn amqp_option(&mut self, o: &El) {
        self.check_attrs(o, &["type", "name", "value"]);
        self.no_text(o);
        for c in &o.children {
            self.unexpected(c, "option");
        }
        let name = o.attr("name").map(|a| a.value.clone()).unwrap_or_default();
        match name.as_str() {
            "username" | "password" => {
                let Some(v) = self.required(o, "value") else {
                    return;
                };
                if v.value.contains("%%") {
                    let pos = v.pos;
                    self.error(
                        pos,
                        format!("{name}: variables are not supported in connection settings (headroom logs every connection of the scenario in the same way)"),
                    );
                    return;
                }
                if v.value.is_empty() && name == "username" {
                    let pos = v.pos;
                    self.error(pos, "username: expected a non-empty value");
                    return;
                }
                let value = v.value.clone();
                self.link.amqp_options.push(o.pos);
                if name == "username" {
                    self.link.amqp_user = Some(value);
                } else {
                    self.link.amqp_password = Some(value);
                }
            }
            "heartbeat" => self.warn(
                o.pos,
                "<option type=\"ts_amqp\" name=\"heartbeat\"> is not honoured: headroom's connections ask for no heartbeat (Tune-Ok heartbeat 0), so neither side sends one",
            ),
            other => self.warn(
                o.pos,
                format!("<option type=\"ts_amqp\" name=\"{other}\"> is not honoured: Tsung 1.7 knows username, password and heartbeat"),
            ),
        }
    }

    /// `channel` (Tsung's default 1), substituted: a number from 1 to 65535, or text with a
    /// variable that makes one when the step runs.
    fn amqp_channel(&mut self, el: &El, subst: bool) -> Option<String> {
        let Some(a) = el.attr("channel") else {
            return Some("1".into());
        };
        let (value, pos) = (a.value.trim().to_string(), a.pos);
        let text = self.subst(&value, pos, subst)?;
        if text.contains("${") {
            return Some(text);
        }
        match text.parse::<u16>() {
            Ok(c) if c >= 1 => Some(c.to_string()),
            _ => {
                self.error(
                    pos,
                    format!("channel=\"{value}\": expected a channel number, 1 to 65535 (or, with subst=\"true\", a variable holding one)"),
                );
                None
            }
        }
    }

    /// An exchange, queue or routing key, substituted: at most 255 bytes (AMQP's short string).
    fn amqp_name(&mut self, el: &El, key: &str, default: &str, subst: bool) -> Option<String> {
        let Some(a) = el.attr(key) else {
            return Some(default.to_string());
        };
        let (value, pos) = (a.value.clone(), a.pos);
        let text = self.subst(&value, pos, subst)?;
        if text.len() > 255 {
            self.error(pos, format!("{key}: at most 255 bytes"));
            return None;
        }
        Some(text)
    }

    /// `payload` (substituted) when given and not empty, as Tsung, else `payload_size` bytes.
    fn amqp_payload(&mut self, el: &El, subst: bool) -> Option<MqttPayload<String>> {
        if let Some(p) = el.attr("payload").filter(|p| !p.value.is_empty()) {
            let (value, pos) = (p.value.clone(), p.pos);
            if let Some(s) = el.attr("payload_size") {
                let pos = s.pos;
                self.warn(
                    pos,
                    "attribute 'payload_size' of <amqp> is not honoured: the payload given beside it is sent (as Tsung does)",
                );
            }
            let text = self.subst(&value, pos, subst)?;
            if text.len() as u64 > crate::parse::MAX_MQTT_PAYLOAD {
                self.error(
                    pos,
                    format!(
                        "a payload of {} bytes: headroom publishes at most {}",
                        text.len(),
                        crate::parse::MAX_MQTT_PAYLOAD
                    ),
                );
                return None;
            }
            return Some(MqttPayload::Text(text));
        }
        let size = match el.attr("payload_size") {
            None => PAYLOAD_SIZE,
            Some(a) => match a.value.trim().parse::<u64>() {
                Ok(v) if v <= crate::parse::MAX_MQTT_PAYLOAD => v,
                _ => {
                    let pos = a.pos;
                    self.error(
                        pos,
                        format!(
                            "payload_size=\"{}\": expected bytes, 0 to {}",
                            a.value,
                            crate::parse::MAX_MQTT_PAYLOAD
                        ),
                    );
                    return None;
                }
            },
        };
        Some(MqttPayload::Size(size as u32))
    }

    /// A wait's `timeout` in seconds, `default` when absent.
    fn amqp_timeout(&mut self, el: &El, default: f64) -> Option<f64> {
        let Some(a) = el.attr("timeout") else {
            return Some(default);
        };
        match a.value.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Some(v),
            _ => {
                let pos = a.pos;
                self.error(
                    pos,
                    format!("timeout=\"{}\": expected seconds, 0 to 86400", a.value),
                );
                None
            }
        }
    }
}

fn amqp_step(action: AmqpAction<String>) -> Step {
    Step::Amqp(Amqp {
        name: crate::parse::default_amqp_name(&action),
        action,
    })
}
