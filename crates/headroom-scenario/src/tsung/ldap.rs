//! Tsung's `ts_ldap` sessions (Tsung 1.7's `ts_config_ldap`): `bind` (user, password),
//! `search` (base, filter, scope), `add` (dn, `<attr type><value>`s), `modify` (dn,
//! `<modification type="add|replace|delete">` with their `<attr>`s: a modification without
//! one changes nothing, as in Tsung), `unbind`, and `start_tls` as the session's first request:
//! the server's `tls: {starttls: true}` (every connection upgrades when it opens). Tsung parses
//! each filter when it reads the file; so does headroom (when the run starts, or when sent for a
//! filter holding variables).

use super::proto::{NoReply, Produced};
use super::{Conv, El};
use crate::model::*;

impl Conv<'_> {
    /// `<ldap type="start_tls">`: a setting of the server, run when each connection opens
    /// (before any other request: headroom upgrades every connection of the scenario), without
    /// certificate checks as in Tsung (whose ssl options verify nothing by default).
    pub(super) fn ldap_start_tls(&mut self, el: &El) -> Produced {
        self.check_attrs(el, &["type", "cacertfile", "certfile", "keyfile"]);
        self.no_text(el);
        if self.sess.ldap_sent {
            self.error(
                el.pos,
                "<ldap type=\"start_tls\"> after other LDAP requests: headroom upgrades a connection to TLS only when it opens (put it first)",
            );
            return Produced::Nothing;
        }
        self.ignored(
            el,
            "cacertfile",
            "Tsung does not check the server's certificate with it, and neither does the import (tls: {insecure: true}); set tls.cacert to check",
        );
        for key in ["certfile", "keyfile"] {
            self.ignored(
                el,
                key,
                "no client certificate is sent; set the server's tls.cert and tls.key for one",
            );
        }
        self.sess.starttls = self.sess.starttls.or(Some(el.pos));
        self.absorb();
        Produced::NoReply(NoReply::Setup)
    }

    pub(super) fn ldap(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> bool {
        let Some(action) = self.ldap_action(el, subst) else {
            return false;
        };
        self.sess.ldap_sent = true;
        out.push(Step::Ldap(Ldap {
            name: crate::parse::default_ldap_name(&action),
            action,
        }));
        true
    }

    fn ldap_action(&mut self, el: &El, subst: bool) -> Option<LdapAction<String>> {
        let t = self.required(el, "type")?;
        let (ty, ty_pos) = (t.value.clone(), t.pos);
        self.no_text(el);
        if !matches!(ty.as_str(), "add" | "modify") {
            for c in &el.children {
                self.unexpected(c, "ldap");
            }
        }
        let action = match ty.as_str() {
            "bind" => {
                self.check_attrs(el, &["type", "user", "password"]);
                let dn = self.ldap_attr(el, "user", subst, true);
                let password = match el.attr("password") {
                    Some(p) => self.subst(&p.value.clone(), p.pos, subst),
                    None => Some(String::new()),
                };
                LdapAction::Bind {
                    dn: dn?,
                    password: password?,
                }
            }
            "search" => {
                self.check_attrs(el, &["type", "base", "filter", "scope"]);
                let base = self.ldap_attr(el, "base", subst, false);
                let filter = self.ldap_attr(el, "filter", subst, true);
                let scope = match el.attr("scope") {
                    None => Some(LdapScope::Sub),
                    Some(a) => match a.value.as_str() {
                        "wholeSubtree" => Some(LdapScope::Sub),
                        "singleLevel" => Some(LdapScope::One),
                        "baseObject" => Some(LdapScope::Base),
                        v => {
                            let (pos, v) = (a.pos, v.to_string());
                            self.error(
                                pos,
                                format!("scope=\"{v}\": expected wholeSubtree, singleLevel or baseObject"),
                            );
                            None
                        }
                    },
                };
                LdapAction::Search {
                    base: base?,
                    filter: filter?,
                    scope: scope?,
                    attrs: Vec::new(),
                    size_limit: 0,
                }
            }
            "add" => {
                self.check_attrs(el, &["type", "dn"]);
                let dn = self.ldap_attr(el, "dn", subst, true);
                let mut attrs = Vec::new();
                let mut ok = true;
                for c in &el.children {
                    if c.name != "attr" {
                        self.unexpected(c, "ldap");
                        continue;
                    }
                    match self.ldap_values(c, subst) {
                        Some(a) => attrs.push(a),
                        None => ok = false,
                    }
                }
                if attrs.is_empty() && ok {
                    self.error(
                        el.pos,
                        "<ldap type=\"add\"> without an <attr>: an entry needs attributes",
                    );
                    return None;
                }
                if !ok {
                    return None;
                }
                LdapAction::Add { dn: dn?, attrs }
            }
            "modify" => {
                self.check_attrs(el, &["type", "dn"]);
                let dn = self.ldap_attr(el, "dn", subst, true);
                let mut changes = Vec::new();
                let mut ok = true;
                for m in &el.children {
                    if m.name != "modification" {
                        self.unexpected(m, "ldap");
                        continue;
                    }
                    self.check_attrs(m, &["type"]);
                    self.no_text(m);
                    let op = match m.attr("type").map(|a| (a.value.as_str(), a.pos)) {
                        Some(("add", _)) => LdapMod::Add,
                        Some(("delete", _)) => LdapMod::Delete,
                        Some(("replace", _)) => LdapMod::Replace,
                        Some((v, pos)) => {
                            let v = v.to_string();
                            self.error(
                                pos,
                                format!("type=\"{v}\": expected add, delete or replace"),
                            );
                            ok = false;
                            continue;
                        }
                        None => {
                            self.required(m, "type");
                            ok = false;
                            continue;
                        }
                    };
                    let attrs: Vec<&El> = m.children.iter().filter(|c| c.name == "attr").collect();
                    for c in m.children.iter().filter(|c| c.name != "attr") {
                        self.unexpected(c, "modification");
                    }
                    if attrs.is_empty() {
                        self.warn(
                            m.pos,
                            "a <modification> without an <attr> changes nothing (in Tsung too): dropped",
                        );
                    }
                    for a in attrs {
                        match self.ldap_values(a, subst) {
                            Some((t, v)) => changes.push((op, t, v)),
                            None => ok = false,
                        }
                    }
                }
                if !ok {
                    return None;
                }
                if changes.is_empty() {
                    self.error(
                        el.pos,
                        "<ldap type=\"modify\"> changes nothing: no <modification> has an <attr>",
                    );
                    return None;
                }
                LdapAction::Modify { dn: dn?, changes }
            }
            "unbind" => {
                self.check_attrs(el, &["type"]);
                LdapAction::Unbind
            }
            other => {
                self.error(
                    ty_pos,
                    format!("<ldap type=\"{other}\">: expected bind, search, add, modify, unbind or start_tls"),
                );
                return None;
            }
        };
        Some(action)
    }

    /// A required attribute, substituted; `nonempty` refuses "".
    fn ldap_attr(&mut self, el: &El, key: &str, subst: bool, nonempty: bool) -> Option<String> {
        let a = self.required(el, key)?;
        let (value, pos) = (a.value.clone(), a.pos);
        if nonempty && value.trim().is_empty() {
            self.error(pos, format!("{key}=\"\": expected a value"));
            return None;
        }
        self.subst(&value, pos, subst)
    }

    /// `<attr type="T"><value>V</value>...</attr>`: the type and its values, substituted.
    fn ldap_values(&mut self, a: &El, subst: bool) -> Option<(String, Vec<String>)> {
        self.check_attrs(a, &["type"]);
        self.no_text(a);
        let t = self.required(a, "type")?.value.clone();
        let mut values = Vec::new();
        for v in &a.children {
            if v.name != "value" {
                self.unexpected(v, "attr");
                continue;
            }
            values.push(self.subst(&v.text, v.text_pos.unwrap_or(v.pos), subst)?);
        }
        Some((t, values))
    }
}
