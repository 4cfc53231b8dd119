//! Tsung's `ts_mysql` sessions (Tsung 1.7's `ts_config_mysql`): `connect` opens the
//! connection, `authenticate` (database, username, password) logs in — in headroom the login is
//! part of opening the connection, so it becomes the scenario's `mysql:` section and no step —,
//! `sql` is a statement, `close` closes. The login must be the same in every session.

use super::proto::{NoReply, Produced};
use super::{Conv, El};
use crate::model::*;

impl Conv<'_> {
    pub(super) fn mysql(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> Produced {
        let Some(t) = self.required(el, "type") else {
            return Produced::Nothing;
        };
        let (ty, ty_pos) = (t.value.clone(), t.pos);
        for c in &el.children {
            self.unexpected(c, "mysql");
        }
        if ty != "sql" {
            self.no_text(el);
        }
        match ty.as_str() {
            "connect" => {
                self.check_attrs(el, &["type"]);
                self.proto_connect(out);
                Produced::NoReply(NoReply::Setup)
            }
            "authenticate" => {
                self.check_attrs(el, &["type", "database", "username", "password"]);
                let user = self.fixed(el, "username", None);
                let password = self.fixed(el, "password", Some(""));
                let database = self.fixed(el, "database", Some(""));
                let (Some(user), Some(password), Some(database)) = (user, password, database)
                else {
                    return Produced::Nothing;
                };
                if user.is_empty() {
                    self.error(el.pos, "username=\"\": expected a name");
                    return Produced::Nothing;
                }
                let spec = MysqlSpec {
                    user,
                    password: Some(password),
                    database: (!database.is_empty()).then_some(database),
                };
                if !self.sess_mysql(spec, el.pos) {
                    return Produced::Nothing;
                }
                self.proto_absorb();
                Produced::NoReply(NoReply::Setup)
            }
            "sql" => {
                self.check_attrs(el, &["type"]);
                let text = el.text.trim();
                let pos = el.text_pos.unwrap_or(el.pos);
                if text.is_empty() {
                    self.error(el.pos, "<mysql type=\"sql\"> without a query");
                    return Produced::Nothing;
                }
                let Some(query) = self.subst(text, pos, subst) else {
                    return Produced::Nothing;
                };
                self.proto_act();
                out.push(Step::Sql(Sql {
                    name: crate::parse::default_sql_name(&query),
                    query,
                    params: Vec::new(),
                    prepare: false,
                }));
                Produced::Readable
            }
            "close" => {
                self.check_attrs(el, &["type"]);
                self.proto_act();
                out.push(Step::Close);
                self.proto_closed();
                Produced::NoReply(NoReply::Close)
            }
            other => {
                self.error(
                    ty_pos,
                    format!(
                        "<mysql type=\"{other}\">: expected connect, authenticate, sql or close"
                    ),
                );
                Produced::Nothing
            }
        }
    }
}
