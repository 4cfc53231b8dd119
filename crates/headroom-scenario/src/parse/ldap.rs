//! LDAP: the `ldap` step (servers with `protocol: ldap`; no settings section: a bind is a
//! step). Same invariants as the parent: every error goes through `Parser::err`, located.
//!
//! ```yaml
//! servers: [{host: 127.0.0.1, port: 389, protocol: ldap}]
//! sessions:
//!   - name: lookup
//!     steps:
//!       - ldap: {bind: "cn=admin,dc=example,dc=org", password: secret}
//!       - ldap: {search: "ou=people,dc=example,dc=org", filter: "(uid=user${user_id})", attrs: [cn, mail]}
//!       - ldap: {add: "uid=n${user_id},ou=people,dc=example,dc=org", attrs: {objectClass: [inetOrgPerson], cn: x, sn: y}}
//!       - ldap: {modify: "uid=n${user_id},ou=people,dc=example,dc=org", changes: [{replace: sn, values: [z]}]}
//!       - ldap: {delete: "uid=n${user_id},ou=people,dc=example,dc=org"}
//!       - ldap: unbind
//! ```
//!
//! A filter is checked against RFC 4515 when the run starts (the engine's codec parses it);
//! here only its variables are.

use super::{Parser, Vars};
use crate::model::*;
use marked_yaml::types::MarkedMappingNode;
use marked_yaml::Node;

const ACTIONS: &[&str] = &["bind", "search", "add", "modify", "delete", "unbind"];
const FORMS: &str = "unbind, {bind: DN, password}, {search: BASE, filter, scope, attrs, \
                     size_limit}, {add: DN, attrs: {TYPE: [VALUES]}}, {modify: DN, changes: \
                     [{add|delete|replace: TYPE, values}]} or {delete: DN}";
/// Most attributes of an add, changes of a modify, values of one attribute, attributes asked
/// for by a search: bounds on what one step writes.
const MAX_ITEMS: usize = 1024;

/// An ldap step's metric name without `name`: `ldap:TYPE`.
pub(crate) fn default_ldap_name<T>(a: &LdapAction<T>) -> String {
    format!("ldap:{}", a.type_name())
}

impl Parser {
    /// `ldap: unbind` or `ldap: {ACTION: ..., options, name}`.
    pub(super) fn ldap(&mut self, node: &Node, vars: &Vars) -> Option<Ldap> {
        if let Some(s) = node.as_scalar() {
            if s.as_str() != "unbind" {
                self.err(node.span(), format!("ldap: expected {FORMS}"));
                return None;
            }
            let action = LdapAction::Unbind;
            return Some(Ldap {
                name: default_ldap_name(&action),
                action,
            });
        }
        let m = self.map(node, "ldap")?;
        let given: Vec<(&str, &Node)> = ACTIONS
            .iter()
            .filter_map(|k| m.get_node(k).map(|n| (*k, n)))
            .collect();
        let (kind, n) = match given.as_slice() {
            [one] => *one,
            [] => {
                self.err(m.span(), format!("ldap: expected {FORMS}"));
                return None;
            }
            [_, (second, n), ..] => {
                self.err(
                    n.span(),
                    format!(
                        "an ldap step takes one of {} ('{second}' is a second one)",
                        ACTIONS.join(", ")
                    ),
                );
                return None;
            }
        };
        let extra: &[&str] = match kind {
            "bind" => &["password"],
            "search" => &["filter", "scope", "attrs", "size_limit"],
            "add" => &["attrs"],
            "modify" => &["changes"],
            _ => &[],
        };
        let mut allowed = vec![kind, "name"];
        allowed.extend_from_slice(extra);
        self.keys(m, &format!("ldap {kind}"), &allowed);
        let action = match kind {
            "unbind" => {
                if n.as_scalar().and_then(|s| s.as_bool()) != Some(true) {
                    self.err(n.span(), "unbind: expected true");
                    return None;
                }
                LdapAction::Unbind
            }
            "bind" => {
                let dn = self.ldap_text(n, "bind", vars, true);
                let password = match m.get_node("password") {
                    Some(p) => self.ldap_text(p, "password", vars, false),
                    None => Some(String::new()),
                };
                LdapAction::Bind {
                    dn: dn?,
                    password: password?,
                }
            }
            "search" => {
                let base = self.ldap_text(n, "search", vars, false);
                let filter = match m.get_node("filter") {
                    Some(f) => self.ldap_text(f, "filter", vars, true),
                    None => Some("(objectClass=*)".to_string()),
                };
                let scope = match m.get_node("scope") {
                    None => Some(LdapScope::Sub),
                    Some(s) => match s.as_scalar().map(|x| x.as_str()) {
                        Some("base") => Some(LdapScope::Base),
                        Some("one") | Some("onelevel") => Some(LdapScope::One),
                        Some("sub") | Some("subtree") => Some(LdapScope::Sub),
                        _ => {
                            self.err(s.span(), "scope: expected base, one or sub");
                            None
                        }
                    },
                };
                let attrs = match m.get_node("attrs") {
                    Some(a) => self.ldap_names(a, "attrs"),
                    None => Some(Vec::new()),
                };
                let size_limit = match m.get_node("size_limit") {
                    None => Some(0),
                    Some(x) => match x
                        .as_scalar()
                        .and_then(|v| v.as_str().trim().parse::<u32>().ok())
                    {
                        Some(v) if v <= i32::MAX as u32 => Some(v),
                        _ => {
                            self.err(
                                x.span(),
                                "size_limit: expected entries, 0 (no limit) to 2147483647",
                            );
                            None
                        }
                    },
                };
                LdapAction::Search {
                    base: base?,
                    filter: filter?,
                    scope: scope?,
                    attrs: attrs?,
                    size_limit: size_limit?,
                }
            }
            "add" => {
                let dn = self.ldap_text(n, "add", vars, true);
                let attrs = match self.required(m, "attrs", "ldap add") {
                    Some(a) => self.ldap_attrs(a, vars),
                    None => None,
                };
                LdapAction::Add {
                    dn: dn?,
                    attrs: attrs?,
                }
            }
            "modify" => {
                let dn = self.ldap_text(n, "modify", vars, true);
                let changes = match self.required(m, "changes", "ldap modify") {
                    Some(c) => self.ldap_changes(c, vars),
                    None => None,
                };
                LdapAction::Modify {
                    dn: dn?,
                    changes: changes?,
                }
            }
            _ => LdapAction::Delete {
                dn: self.ldap_text(n, "delete", vars, true)?,
            },
        };
        let name = match m.get_node("name") {
            Some(x) => self.name(x, "name")?,
            None => default_ldap_name(&action),
        };
        Some(Ldap { name, action })
    }

    /// A DN, password, base or filter: text with `${var}`s; `nonempty` for what may not be "".
    fn ldap_text(&mut self, n: &Node, what: &str, vars: &Vars, nonempty: bool) -> Option<String> {
        let t = self.string(n, what)?;
        if nonempty && t.trim().is_empty() {
            self.err(n.span(), format!("{what}: expected text, got nothing"));
            return None;
        }
        self.refs(n, &t, vars);
        Some(t)
    }

    /// A list of attribute names (or one name).
    fn ldap_names(&mut self, n: &Node, what: &str) -> Option<Vec<String>> {
        let items: Vec<&Node> = match n.as_sequence() {
            Some(s) => s.iter().collect(),
            None => vec![n],
        };
        if items.len() > MAX_ITEMS {
            self.err(n.span(), format!("{what}: at most {MAX_ITEMS}"));
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        for i in items {
            out.push(self.name(i, what)?);
        }
        Some(out)
    }

    /// Values: a list, or one value.
    fn ldap_values(&mut self, n: &Node, what: &str, vars: &Vars) -> Option<Vec<String>> {
        let items: Vec<&Node> = match n.as_sequence() {
            Some(s) => s.iter().collect(),
            None => vec![n],
        };
        if items.len() > MAX_ITEMS {
            self.err(n.span(), format!("{what}: at most {MAX_ITEMS} values"));
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        for i in items {
            out.push(self.ldap_text(i, what, vars, false)?);
        }
        Some(out)
    }

    /// `attrs: {TYPE: [VALUES] | VALUE, ...}`.
    fn ldap_attrs(&mut self, n: &Node, vars: &Vars) -> Option<Vec<(String, Vec<String>)>> {
        let m: &MarkedMappingNode = self.map(n, "attrs")?;
        if m.is_empty() || m.len() > MAX_ITEMS {
            self.err(
                n.span(),
                format!("attrs: expected 1 to {MAX_ITEMS} attributes"),
            );
            return None;
        }
        let mut out = Vec::with_capacity(m.len());
        let mut ok = true;
        for (k, v) in m.iter() {
            match self.ldap_values(v, k.as_str(), vars) {
                Some(vals) if !vals.is_empty() => out.push((k.as_str().to_string(), vals)),
                Some(_) => {
                    self.err(
                        v.span(),
                        format!("{}: an added attribute needs a value", k.as_str()),
                    );
                    ok = false;
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// `changes: [{add|delete|replace: TYPE, values: [...]}]`.
    fn ldap_changes(
        &mut self,
        n: &Node,
        vars: &Vars,
    ) -> Option<Vec<(LdapMod, String, Vec<String>)>> {
        let list = self.seq(n, "changes")?;
        if list.is_empty() || list.len() > MAX_ITEMS {
            self.err(
                n.span(),
                format!("changes: expected 1 to {MAX_ITEMS} changes"),
            );
            return None;
        }
        let mut out = Vec::with_capacity(list.len());
        let mut ok = true;
        for c in list {
            let Some(m) = self.map(c, "change") else {
                ok = false;
                continue;
            };
            self.keys(m, "change", &["add", "delete", "replace", "values"]);
            let ops: Vec<(LdapMod, &Node)> = [
                ("add", LdapMod::Add),
                ("delete", LdapMod::Delete),
                ("replace", LdapMod::Replace),
            ]
            .into_iter()
            .filter_map(|(k, op)| m.get_node(k).map(|n| (op, n)))
            .collect();
            let [(op, attr)] = ops.as_slice() else {
                self.err(
                    c.span(),
                    "a change takes exactly one of add, delete, replace (the attribute's name)",
                );
                ok = false;
                continue;
            };
            let Some(attr) = self.name(attr, op.as_str()) else {
                ok = false;
                continue;
            };
            let values = match m.get_node("values") {
                Some(v) => self.ldap_values(v, "values", vars),
                None => Some(Vec::new()),
            };
            match values {
                Some(v) if v.is_empty() && *op == LdapMod::Add => {
                    self.err(c.span(), "an add change needs values");
                    ok = false;
                }
                Some(v) => out.push((*op, attr, v)),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}
