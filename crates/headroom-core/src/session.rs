//! A compiled session workload: what each virtual user does, flattened into ops.
//!
//! The scenario compiler (`headroom-scenario`) turns a validated scenario into a [`Workload`];
//! the engine interprets it. Everything a user needs at run time is resolved here once: variable
//! names become slot numbers, request and transaction names become metric ids, loops become
//! jumps, CSV files are read. The interpreter therefore does no lookups by name and, for requests
//! without variables, no encoding either.
//!
//! Ops of one session, for `loop {count: 2, steps: [request A]}` then `request B`:
//!
//! ```text
//! 0 LoopInit{slot 0}
//! 1 LoopTest{slot 0, count 2, exit 4}
//! 2 Request A
//! 3 Jump 1
//! 4 Request B
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::surge::SurgeParams;
use crate::{ArrivalProcess, Distribution};

/// Metric id of a request or transaction name (index into [`Workload::names`]).
pub type NameId = u16;
/// Variable slot (index into [`Workload::vars`]).
pub type VarId = u16;

/// Slot of the builtin `${user_id}`.
pub const VAR_USER_ID: VarId = 0;
/// Slot of the builtin `${session}` (the session's name).
pub const VAR_SESSION: VarId = 1;

/// Everything the engine needs to run sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub sessions: Vec<SessionProgram>,
    /// Cumulative normalised weights, same order as `sessions`; the last is 1.0.
    pub cumulative: Vec<f64>,
    /// Closed populations in order: `(users, session)`; `None` draws from the mix each time.
    /// User `g` (0-based, over all populations) belongs to the population whose range holds it.
    pub populations: Vec<(u32, Option<usize>)>,
    /// Names of per-name figures: requests and transactions.
    pub names: Vec<MetricName>,
    /// Names of `match` checks, index = the match's id.
    pub matches: Vec<String>,
    /// Variable names, index = slot; slots 0 and 1 are the builtins.
    pub vars: Vec<String>,
    /// CSV feeders: rows of columns, shared by every worker.
    pub feeders: Vec<Arc<Vec<Vec<String>>>>,
}

impl Workload {
    /// The session index for a uniform variate `u` in [0, 1).
    pub fn draw(&self, u: f64) -> usize {
        let i = self.cumulative.partition_point(|&c| c <= u);
        i.min(self.sessions.len().saturating_sub(1))
    }

    /// The fixed session of closed user `g`, or `None` when it draws from the mix.
    pub fn population_session(&self, g: u64) -> Option<usize> {
        let mut start = 0u64;
        for &(n, s) in &self.populations {
            start += u64::from(n);
            if g < start {
                return s;
            }
        }
        None
    }

    /// Total closed users.
    pub fn closed_users(&self) -> u32 {
        self.populations.iter().map(|p| p.0).sum()
    }
}

/// A per-name figure: a request name or a transaction name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricName {
    pub name: String,
    pub kind: NameKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    Request,
    Transaction,
}

/// One session of the mix.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionProgram {
    pub name: String,
    pub body: SessionBody,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SessionBody {
    /// Written steps, flattened.
    Ops {
        ops: Vec<Op>,
        /// Loop counter slots used by `ops`.
        loops: usize,
    },
    /// Generated SURGE pages (base file + pipelined embedded objects, OFF times between pages).
    Surge {
        params: Box<SurgeParams>,
        /// Metric ids of the base page requests and of the embedded object requests.
        page: NameId,
        object: NameId,
    },
}

/// One instruction of a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Request(RequestOp),
    /// Raw TCP: send bytes, then wait for a reply as `expect` says.
    Send(SendOp),
    Think(Distribution),
    /// Reset loop counter `slot` to 0.
    LoopInit {
        slot: u16,
    },
    /// Leave the loop (jump to `exit`) when the counter reached `count` or the condition fails;
    /// otherwise count one iteration and go on.
    LoopTest {
        slot: u16,
        count: Option<u64>,
        condition: Option<LoopCondition>,
        exit: usize,
    },
    Jump(usize),
    TxBegin(NameId),
    TxEnd(NameId),
    Connect,
    Close,
    Set {
        var: VarId,
        source: SetOp,
    },
    Extract {
        var: VarId,
        from: ExtractOp,
        default: Option<Template>,
    },
    Match(MatchOp),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopCondition {
    pub var: VarId,
    /// `true` for `while` (go on while truthy), `false` for `until`.
    pub while_true: bool,
}

/// An HTTP request with `${var}` templates.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestOp {
    pub name: NameId,
    pub method: String,
    pub path: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Option<Template>,
    /// Keep the reply's bytes: a later `extract` or `match` reads them.
    pub capture: bool,
}

/// Raw TCP: bytes to send (a template) and how the reply ends.
#[derive(Debug, Clone, PartialEq)]
pub struct SendOp {
    pub name: NameId,
    pub data: Template,
    pub expect: ExpectSpec,
    /// Keep the reply's bytes: a later `extract` or `match` reads them.
    pub capture: bool,
}

/// How a raw reply ends (compiled by `headroom-proto::raw` at run start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectSpec {
    /// Do not wait: the step is done once its bytes are written (Tsung's `ack="no_ack"`).
    Nothing,
    /// Exactly this many bytes.
    Bytes(u64),
    /// Up to and including this delimiter.
    Delimiter(Vec<u8>),
    /// A length header: `width` bytes after `offset`, counting itself (`includes_header`) or not,
    /// plus `adjust`.
    Length {
        offset: u32,
        width: u8,
        big_endian: bool,
        includes_header: bool,
        adjust: i64,
    },
    /// The shortest prefix holding a match, searched in the first `window` bytes.
    Regex { pattern: String, window: usize },
}

/// Text with `${var}` holes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template(pub Vec<Piece>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Lit(String),
    Var(VarId),
}

impl Template {
    /// A template without holes.
    pub fn literal(s: &str) -> Template {
        Template(vec![Piece::Lit(s.to_string())])
    }

    /// The text when the template has no variables.
    pub fn as_literal(&self) -> Option<String> {
        let mut s = String::new();
        for p in &self.0 {
            match p {
                Piece::Lit(l) => s.push_str(l),
                Piece::Var(_) => return None,
            }
        }
        Some(s)
    }

    /// Append the expansion to `out`; an unset variable expands to nothing.
    pub fn expand_into(&self, vars: &[String], out: &mut String) {
        for p in &self.0 {
            match p {
                Piece::Lit(l) => out.push_str(l),
                Piece::Var(v) => {
                    if let Some(val) = vars.get(*v as usize) {
                        out.push_str(val)
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SetOp {
    Value(Template),
    /// Column `column` of feeder `feeder`; sequential rows go round-robin over all users of a
    /// worker, random rows are drawn.
    Csv {
        feeder: usize,
        column: usize,
        random: bool,
    },
    RandomNumber {
        min: i64,
        max: i64,
    },
    RandomString {
        length: usize,
    },
    Sequence {
        start: i64,
        step: i64,
    },
    UserId,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtractOp {
    Regex(String),
    JsonPointer(String),
    Header(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatchOp {
    /// Index into [`Workload::matches`].
    pub id: u16,
    pub status: Option<u16>,
    pub body: Option<String>,
    pub when_matched: bool,
    pub action: MatchAction,
    pub max_loops: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchAction {
    Continue,
    Abort,
    Restart,
    /// Repeat the preceding request.
    Loop,
}

/// One open arrival phase of a session workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrivalPhase {
    pub duration: Duration,
    /// Users per second at the phase start and at its end (equal for a fixed rate).
    pub from: f64,
    pub to: f64,
    pub process: ArrivalProcess,
    /// Most users alive at once from this phase; arrivals beyond it are dropped and counted.
    pub max_users: Option<u64>,
}

impl ArrivalPhase {
    /// Rate at `t` seconds into the phase.
    pub fn rate_at(&self, t: f64) -> f64 {
        let d = self.duration.as_secs_f64();
        if d <= 0.0 {
            return self.to;
        }
        self.from + (self.to - self.from) * (t / d).clamp(0.0, 1.0)
    }

    /// Highest rate over the phase.
    pub fn peak(&self) -> f64 {
        self.from.max(self.to)
    }

    /// Expected arrivals over the phase.
    pub fn expected_arrivals(&self) -> f64 {
        (self.from + self.to) / 2.0 * self.duration.as_secs_f64()
    }
}

/// Truthiness of a variable in loop conditions: set, non-empty, not `0` or `false`.
pub fn truthy(v: &str) -> bool {
    !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> Workload {
        Workload {
            sessions: vec![
                SessionProgram {
                    name: "a".into(),
                    body: SessionBody::Ops {
                        ops: vec![],
                        loops: 0,
                    },
                };
                3
            ],
            cumulative: vec![0.2, 0.8, 1.0],
            populations: vec![(2, Some(1)), (3, None)],
            names: vec![],
            matches: vec![],
            vars: vec!["user_id".into(), "session".into()],
            feeders: vec![],
        }
    }

    #[test]
    fn draw_follows_cumulative_weights() {
        let w = w();
        assert_eq!(w.draw(0.0), 0);
        assert_eq!(w.draw(0.19), 0);
        assert_eq!(w.draw(0.2), 1);
        assert_eq!(w.draw(0.79), 1);
        assert_eq!(w.draw(0.8), 2);
        assert_eq!(w.draw(0.999), 2);
        assert_eq!(w.draw(1.0), 2);
    }

    #[test]
    fn populations_map_users() {
        let w = w();
        assert_eq!(w.population_session(0), Some(1));
        assert_eq!(w.population_session(1), Some(1));
        assert_eq!(w.population_session(2), None);
        assert_eq!(w.closed_users(), 5);
    }

    #[test]
    fn templates_expand() {
        let t = Template(vec![
            Piece::Lit("/u/".into()),
            Piece::Var(2),
            Piece::Lit("?s=".into()),
            Piece::Var(1),
        ]);
        let mut out = String::new();
        t.expand_into(&["7".into(), "web".into(), "ann".into()], &mut out);
        assert_eq!(out, "/u/ann?s=web");
        assert_eq!(t.as_literal(), None);
        assert_eq!(Template::literal("/x").as_literal().as_deref(), Some("/x"));
    }

    #[test]
    fn ramps_interpolate() {
        let p = ArrivalPhase {
            duration: Duration::from_secs(10),
            from: 1.0,
            to: 21.0,
            process: ArrivalProcess::Poisson,
            max_users: None,
        };
        assert_eq!(p.rate_at(0.0), 1.0);
        assert_eq!(p.rate_at(5.0), 11.0);
        assert_eq!(p.rate_at(20.0), 21.0);
        assert_eq!(p.expected_arrivals(), 110.0);
        assert!(truthy("x") && !truthy("0") && !truthy("") && !truthy("False"));
    }
}
