//! Tsung's `<setdynvars sourcetype="eval" code="fun({Pid,DynVars}) -> ... end.">`: Erlang code
//! that Tsung compiles and calls to set a variable. headroom runs no Erlang, but a fun that only
//! reads dynamic variables and computes an integer is arithmetic, and becomes a `set: {expr}`
//! (`headroom_core::expr`). This module translates that subset and refuses the rest, at the
//! first construct it cannot translate, saying which.
//!
//! The subset:
//! - the fun: one clause, `fun({Pid, DynVars}) -> Body end` (either variable may be `_`, or
//!   the argument one variable, matched later), a final `.` allowed; a body is expressions separated by `,`, its value the last one's;
//! - `{ok, Val} = ts_dynvars:lookup(name, DynVars)`: Val is the variable's text (Tsung's
//!   `tsung_userid`, an integer in Tsung 1.7 and text before, is either);
//!   `list_to_integer(Val)` reads it, `integer_to_list(N)` writes one;
//! - integers, `+ - * div rem`, unary `-`, `abs/1`, `min/2`, `max/2` (plain or `erlang:`);
//!   comparisons (`== /= =:= =/= < =< > >=`), `andalso orelse and or not`, `true`, `false`;
//! - matches `Pattern = Expr` binding variables (tuples of them, `_`), tuples as values;
//! - `case Expr of Pattern [when Guard] -> Body; ... end` and `if Guard -> Body; ... end`,
//!   whose patterns are variables, `_`, integers, `true`/`false` and tuples of them, and whose
//!   guards are conditions (`,` is and, `;` is or); the last clause must match whatever is
//!   left (a catch-all, `true`, or `false` after `true`): Erlang raises `case_clause` otherwise,
//!   which an expression cannot.
//!
//! A case becomes nested `if ... then ... else` (per tuple element when its clauses give
//! tuples), a value every clause gives alike stays itself. Differences from Erlang, said in
//! docs/import.md: integers are 64 bits (an overflow ends the session, where Erlang's grow), a
//! failure inside a guard ends the session (Erlang takes the clause as not matching), and a
//! variable that is not set reads as empty, which fails `list_to_integer` as Tsung's `{ok, _} =
//! false` does.
//!
//! Bounds: the code is at most [`MAX_CODE_BYTES`], nested at most [`MAX_NEST`] deep, and the
//! translation builds at most [`MAX_WORK`] expression nodes in all (a variable used twice copies
//! its expression, so a few lines could otherwise grow without end); what it gives must also
//! pass `set: {expr}`'s own bounds (4 KiB, 64 levels).

use std::collections::HashMap;

use headroom_core::expr::{BoolExpr, CmpOp, IntExpr, IntOp, MAX_EXPR_DEPTH};

/// The longest `code` attribute translated, in bytes.
pub(super) const MAX_CODE_BYTES: usize = 16 * 1024;
/// The deepest nesting of the code (parentheses, tuples, calls, case, if, operators' operands).
pub(super) const MAX_NEST: usize = 64;
/// Expression nodes the translation may build in all.
pub(super) const MAX_WORK: usize = 1 << 14;
/// Nodes of one expression: past it, its text would be over `set: {expr}`'s 4 KiB anyway.
const MAX_NODES: usize = 4096;

/// Why the code is not translated: at byte `at` of the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub at: usize,
    pub message: String,
}

type R<T> = Result<T, Refusal>;

fn refuse<T>(at: usize, message: impl Into<String>) -> R<T> {
    Err(Refusal {
        at,
        message: message.into(),
    })
}

/// Translates `code` into a headroom expression's text. `var` turns a Tsung dynamic variable's
/// name into the headroom variable holding it, or says why it cannot (not set before, ...).
pub(super) fn translate(
    code: &str,
    var: &mut dyn FnMut(&str) -> Result<String, String>,
) -> R<String> {
    if code.len() > MAX_CODE_BYTES {
        return refuse(
            0,
            format!(
                "the code is {} bytes long; headroom translates at most {MAX_CODE_BYTES}",
                code.len()
            ),
        );
    }
    let toks = lex(code)?;
    let mut p = Parser {
        toks: &toks,
        i: 0,
        nest: 0,
    };
    let fun = p.fun()?;
    let mut t = Tr { var, work: 0 };
    let mut env = Env::new();
    if let Some(arg) = &fun.arg {
        env.insert(arg.clone(), Sym::Tuple(vec![Sym::Opaque, Sym::DynVars]));
    }
    for (name, value) in [(&fun.pid, Sym::Opaque), (&fun.dynvars, Sym::DynVars)] {
        if let Some(n) = name {
            env.insert(n.clone(), value);
        }
    }
    let value = t.body(&fun.body, &mut env)?;
    let e = match value {
        Sym::Int(e) | Sym::IntText(e) => e,
        other => {
            return refuse(
                fun.body.last().map_or(0, |n| n.at),
                format!(
                    "the fun returns {}; headroom translates funs that return an integer",
                    other.kind()
                ),
            )
        }
    };
    let text = e.to_string();
    // The expression's own bounds (length, depth) hold for what the code became.
    if let Err(err) = headroom_core::expr::parse(&text, &mut |_: &str| Ok::<(), String>(())) {
        return refuse(
            0,
            format!(
                "the code translates to an expression that is too large: {}",
                err.message
            ),
        );
    }
    Ok(text)
}

// ---- tokens ----------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Int(i64),
    Var(String),
    Atom(String),
    /// Something the subset has no use for, already named (a string, a float, ...).
    Other(&'static str),
    Punct(&'static str),
    End,
}

#[derive(Debug, Clone)]
struct Token {
    t: Tok,
    at: usize,
}

/// Longest first.
const PUNCT: &[&str] = &[
    "=:=", "=/=", "...", "->", "<-", "<=", "=>", ":=", "::", "==", "/=", "=<", ">=", "++", "--",
    "||", "<<", ">>", "(", ")", "{", "}", "[", "]", ",", ";", ".", ":", "=", "<", ">", "+", "-",
    "*", "/", "|", "!", "#", "?",
];

fn lex(code: &str) -> R<Vec<Token>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let at = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'%' {
            // A comment, to the end of the line.
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let word_end = |mut j: usize| {
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'@') {
                j += 1;
            }
            j
        };
        let t = if c.is_ascii_digit() {
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if b.get(j) == Some(&b'.') && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
                return refuse(at, "a float: headroom translates integer arithmetic");
            }
            if matches!(b.get(j), Some(b'#' | b'_')) {
                return refuse(at, "an integer in base or underscore notation");
            }
            let digits = &code[i..j];
            i = j;
            match digits.parse::<i64>() {
                Ok(n) => Tok::Int(n),
                Err(_) => {
                    return refuse(at, format!("{digits} is beyond a 64-bit integer"));
                }
            }
        } else if c.is_ascii_uppercase() || c == b'_' {
            let j = word_end(i);
            let name = code[i..j].to_string();
            i = j;
            Tok::Var(name)
        } else if c.is_ascii_lowercase() {
            let j = word_end(i);
            let name = code[i..j].to_string();
            i = j;
            Tok::Atom(name)
        } else if c == b'\'' || c == b'"' {
            // A quoted atom or a string: to the closing quote, escapes skipped.
            let mut j = i + 1;
            while j < b.len() && b[j] != c {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            if j >= b.len() {
                return refuse(at, "an unterminated quote");
            }
            let inner = &code[i + 1..j];
            i = j + 1;
            if c == b'"' {
                Tok::Other("a string")
            } else if inner.contains('\\') {
                Tok::Other("a quoted atom with escapes")
            } else {
                Tok::Atom(inner.to_string())
            }
        } else if c == b'$' {
            return refuse(at, "a character literal ($c)");
        } else if let Some(p) = PUNCT.iter().find(|p| code[i..].starts_with(**p)) {
            i += p.len();
            Tok::Punct(p)
        } else {
            let ch = code[i..].chars().next().unwrap_or('?');
            return refuse(at, format!("unexpected '{ch}'"));
        };
        out.push(Token { t, at });
    }
    out.push(Token {
        t: Tok::End,
        at: code.len(),
    });
    Ok(out)
}

// ---- syntax --------------------------------------------------------------------------------

const KEYWORDS: &[&str] = &[
    "after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor", "case",
    "catch", "cond", "div", "else", "end", "fun", "if", "let", "maybe", "not", "of", "or",
    "orelse", "receive", "rem", "try", "when", "xor",
];

#[derive(Debug, Clone)]
struct Node {
    e: Ex,
    at: usize,
    /// How deep the syntax tree under it is (a leaf is 1); at most [`MAX_NEST`], so that the
    /// translation's recursion over it is bounded.
    depth: usize,
}

/// A node of `e` at `at`, refused when it would make the tree deeper than [`MAX_NEST`] (a
/// chain `A + B + C` is as deep as it is long).
fn node(e: Ex, at: usize) -> R<Node> {
    let d = |n: &Node| n.depth;
    let max = |xs: &[Node]| xs.iter().map(d).max().unwrap_or(0);
    let below = match &e {
        Ex::Int(_) | Ex::Var(_) | Ex::Atom(_) => 0,
        Ex::Tuple(xs) | Ex::Block(xs) => max(xs),
        Ex::Call { args, .. } => max(args),
        Ex::Bin(_, a, b) | Ex::Match(a, b) => d(a).max(d(b)),
        Ex::Neg(a) | Ex::Not(a) => d(a),
        Ex::Case(subject, clauses) => d(subject).max(clauses_depth(clauses)),
        Ex::If(clauses) => clauses_depth(clauses),
    };
    if below + 1 > MAX_NEST {
        return refuse(at, format!("the code nests deeper than {MAX_NEST} levels"));
    }
    Ok(Node {
        e,
        at,
        depth: below + 1,
    })
}

fn clauses_depth(clauses: &[Clause]) -> usize {
    clauses
        .iter()
        .map(|c| {
            let p = c.pattern.as_ref().map_or(0, |p| p.depth);
            let g = c.guard.iter().flatten().map(|n| n.depth).max().unwrap_or(0);
            let b = c.body.iter().map(|n| n.depth).max().unwrap_or(0);
            p.max(g).max(b)
        })
        .max()
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
enum Ex {
    Int(i64),
    Var(String),
    Atom(String),
    Tuple(Vec<Node>),
    Call {
        module: Option<String>,
        name: String,
        args: Vec<Node>,
    },
    Bin(&'static str, Box<Node>, Box<Node>),
    Neg(Box<Node>),
    Not(Box<Node>),
    Match(Box<Node>, Box<Node>),
    Case(Box<Node>, Vec<Clause>),
    If(Vec<Clause>),
    Block(Vec<Node>),
}

/// A clause of a case (with a pattern) or an if (without).
#[derive(Debug, Clone)]
struct Clause {
    pattern: Option<Node>,
    /// Alternatives (`;`) of conjunctions (`,`); empty: no guard.
    guard: Vec<Vec<Node>>,
    body: Vec<Node>,
}

struct Fun {
    /// The variable the whole argument is bound to (`fun(Arg) -> ...`), if one is.
    arg: Option<String>,
    pid: Option<String>,
    dynvars: Option<String>,
    body: Vec<Node>,
}

struct Parser<'t> {
    toks: &'t [Token],
    i: usize,
    nest: usize,
}

impl Parser<'_> {
    fn tok(&self) -> &Tok {
        &self.toks[self.i].t
    }

    fn at(&self) -> usize {
        self.toks[self.i].at
    }

    fn bump(&mut self) {
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.tok(), Tok::Punct(x) if *x == p)
    }

    fn is_kw(&self, k: &str) -> bool {
        matches!(self.tok(), Tok::Atom(x) if x == k)
    }

    fn shown(&self) -> String {
        match self.tok() {
            Tok::Int(n) => format!("'{n}'"),
            Tok::Var(v) | Tok::Atom(v) => format!("'{v}'"),
            Tok::Other(what) => what.to_string(),
            Tok::Punct(p) => format!("'{p}'"),
            Tok::End => "the end of the code".into(),
        }
    }

    fn expect(&mut self, p: &str, after: &str) -> R<()> {
        if !self.is(p) {
            return refuse(
                self.at(),
                format!("expected '{p}' {after}, found {}", self.shown()),
            );
        }
        self.bump();
        Ok(())
    }

    fn expect_kw(&mut self, k: &str, after: &str) -> R<()> {
        if !self.is_kw(k) {
            return refuse(
                self.at(),
                format!("expected '{k}' {after}, found {}", self.shown()),
            );
        }
        self.bump();
        Ok(())
    }

    fn enter(&mut self) -> R<()> {
        self.nest += 1;
        if self.nest > MAX_NEST {
            return refuse(
                self.at(),
                format!("the code nests deeper than {MAX_NEST} levels"),
            );
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nest -= 1;
    }

    /// `fun({Pid, DynVars}) -> Body end` and an optional `.`.
    fn fun(&mut self) -> R<Fun> {
        if !self.is_kw("fun") {
            return refuse(
                self.at(),
                format!(
                    "expected 'fun({{Pid, DynVars}}) -> ... end', found {}",
                    self.shown()
                ),
            );
        }
        self.bump();
        let head = self.at();
        self.expect("(", "after 'fun'")?;
        let arg = self.expr()?;
        self.expect(
            ")",
            "after the fun's argument (headroom translates a fun of one argument, {Pid, DynVars})",
        )?;
        let mut whole = None;
        let names = match &arg.e {
            Ex::Var(v) => {
                whole = (v != "_").then(|| v.clone());
                [None, None]
            }
            Ex::Tuple(xs) if xs.len() == 2 => {
                let mut names = [None, None];
                for (k, x) in xs.iter().enumerate() {
                    match &x.e {
                        Ex::Var(v) if v != "_" => names[k] = Some(v.clone()),
                        Ex::Var(_) => {}
                        _ => {
                            return refuse(
                                x.at,
                                "the fun's argument: expected {Pid, DynVars} (two variables)",
                            )
                        }
                    }
                }
                names
            }
            _ => {
                return refuse(
                    head,
                    "the fun's argument: expected {Pid, DynVars} (what Tsung calls it with) or a variable",
                )
            }
        };
        if self.is_kw("when") {
            return refuse(self.at(), "a guard on the fun's clause");
        }
        self.expect("->", "after the fun's head")?;
        let body = self.body()?;
        if self.is(";") {
            return refuse(self.at(), "a fun of several clauses");
        }
        self.expect_kw("end", "to close the fun")?;
        if self.is(".") {
            self.bump();
        }
        if *self.tok() != Tok::End {
            return refuse(
                self.at(),
                format!(
                    "expected the end of the code after the fun, found {}",
                    self.shown()
                ),
            );
        }
        let [pid, dynvars] = names;
        Ok(Fun {
            arg: whole,
            pid,
            dynvars,
            body,
        })
    }

    fn body(&mut self) -> R<Vec<Node>> {
        let mut out = vec![self.expr()?];
        while self.is(",") {
            self.bump();
            out.push(self.expr()?);
        }
        Ok(out)
    }

    /// `=` (right), then `!`.
    fn expr(&mut self) -> R<Node> {
        let left = self.orelse()?;
        if self.is("=") {
            let at = left.at;
            self.bump();
            self.enter()?;
            let right = self.expr()?;
            self.leave();
            return node(Ex::Match(Box::new(left), Box::new(right)), at);
        }
        if self.is("!") {
            return refuse(self.at(), "a message send (!)");
        }
        Ok(left)
    }

    fn orelse(&mut self) -> R<Node> {
        self.right_assoc("orelse", Self::andalso)
    }

    fn andalso(&mut self) -> R<Node> {
        self.right_assoc("andalso", Self::cmp)
    }

    fn right_assoc(&mut self, kw: &'static str, next: fn(&mut Self) -> R<Node>) -> R<Node> {
        let left = next(self)?;
        if !self.is_kw(kw) {
            return Ok(left);
        }
        self.bump();
        self.enter()?;
        let right = self.right_assoc(kw, next)?;
        self.leave();
        let at = left.at;
        node(Ex::Bin(kw, Box::new(left), Box::new(right)), at)
    }

    fn cmp(&mut self) -> R<Node> {
        let left = self.list_op()?;
        let op = match self.tok() {
            Tok::Punct(p @ ("==" | "/=" | "=:=" | "=/=" | "<" | "=<" | ">" | ">=")) => *p,
            Tok::Punct("<=") => {
                return refuse(self.at(), "'<=' (Erlang writes less-or-equal as =<)");
            }
            _ => return Ok(left),
        };
        self.bump();
        let right = self.list_op()?;
        let at = left.at;
        node(Ex::Bin(op, Box::new(left), Box::new(right)), at)
    }

    fn list_op(&mut self) -> R<Node> {
        let left = self.add()?;
        if self.is("++") || self.is("--") {
            return refuse(self.at(), "a list operator (++ or --)");
        }
        Ok(left)
    }

    fn add(&mut self) -> R<Node> {
        let mut left = self.mul()?;
        loop {
            let op = match self.tok() {
                Tok::Punct(p @ ("+" | "-")) => *p,
                Tok::Atom(w) if w == "or" => "or",
                Tok::Atom(w) if ["bor", "bxor", "bsl", "bsr", "xor"].contains(&w.as_str()) => {
                    return refuse(self.at(), format!("the operator '{w}'"));
                }
                _ => return Ok(left),
            };
            self.bump();
            left = self.binary(op, left, Self::mul)?;
        }
    }

    fn mul(&mut self) -> R<Node> {
        let mut left = self.prefix()?;
        loop {
            let op = match self.tok() {
                Tok::Punct("*") => "*",
                Tok::Punct("/") => {
                    return refuse(
                        self.at(),
                        "'/' (division to a float; integer division is div)",
                    );
                }
                Tok::Atom(w) if w == "div" => "div",
                Tok::Atom(w) if w == "rem" => "rem",
                Tok::Atom(w) if w == "and" => "and",
                Tok::Atom(w) if w == "band" => return refuse(self.at(), "the operator 'band'"),
                _ => return Ok(left),
            };
            self.bump();
            left = self.binary(op, left, Self::prefix)?;
        }
    }

    fn binary(&mut self, op: &'static str, left: Node, next: fn(&mut Self) -> R<Node>) -> R<Node> {
        let right = next(self)?;
        let at = left.at;
        node(Ex::Bin(op, Box::new(left), Box::new(right)), at)
    }

    fn prefix(&mut self) -> R<Node> {
        let at = self.at();
        let op = match self.tok() {
            Tok::Punct("-") => "-",
            Tok::Punct("+") => "+",
            Tok::Atom(w) if w == "not" => "not",
            Tok::Atom(w) if w == "bnot" => return refuse(at, "the operator 'bnot'"),
            _ => return self.postfix(),
        };
        self.bump();
        self.enter()?;
        let inner = self.prefix()?;
        self.leave();
        match op {
            "-" => match inner.e {
                Ex::Int(n) => match n.checked_neg() {
                    Some(n) => node(Ex::Int(n), at),
                    None => refuse(at, "an integer beyond 64 bits"),
                },
                _ => node(Ex::Neg(Box::new(inner)), at),
            },
            "+" => Ok(inner),
            _ => node(Ex::Not(Box::new(inner)), at),
        }
    }

    fn postfix(&mut self) -> R<Node> {
        let n = self.primary()?;
        if self.is("#") {
            return refuse(self.at(), "a record or map (#)");
        }
        Ok(n)
    }

    fn primary(&mut self) -> R<Node> {
        let at = self.at();
        let tok = self.tok().clone();
        match tok {
            Tok::Int(n) => {
                self.bump();
                node(Ex::Int(n), at)
            }
            Tok::Var(v) => {
                self.bump();
                if self.is("(") {
                    return refuse(at, format!("a call of the fun held in '{v}'"));
                }
                node(Ex::Var(v), at)
            }
            Tok::Other(what) => refuse(at, what),
            Tok::Punct("(") => {
                self.bump();
                self.enter()?;
                let inner = self.expr()?;
                self.expect(")", "to close '('")?;
                self.leave();
                Ok(inner)
            }
            Tok::Punct("{") => {
                self.bump();
                self.enter()?;
                let mut xs = Vec::new();
                if !self.is("}") {
                    xs.push(self.expr()?);
                    while self.is(",") {
                        self.bump();
                        xs.push(self.expr()?);
                    }
                }
                self.expect("}", "to close the tuple")?;
                self.leave();
                node(Ex::Tuple(xs), at)
            }
            Tok::Punct("[") => refuse(at, "a list ([...])"),
            Tok::Punct("<<") => refuse(at, "a binary (<<...>>)"),
            Tok::Punct("#") => refuse(at, "a record or map (#)"),
            Tok::Punct("?") => refuse(at, "a macro (?)"),
            Tok::Atom(w) if w == "case" => self.case(at),
            Tok::Atom(w) if w == "if" => self.if_(at),
            Tok::Atom(w) if w == "begin" => {
                self.bump();
                self.enter()?;
                let body = self.body()?;
                self.expect_kw("end", "to close 'begin'")?;
                self.leave();
                node(Ex::Block(body), at)
            }
            Tok::Atom(w) if w == "fun" => refuse(at, "a fun inside the fun"),
            Tok::Atom(w) if w == "receive" => refuse(at, "receive"),
            Tok::Atom(w) if w == "try" || w == "catch" => refuse(at, format!("'{w}'")),
            Tok::Atom(w) if KEYWORDS.contains(&w.as_str()) => refuse(
                at,
                format!("expected an expression, found the keyword '{w}'"),
            ),
            Tok::Atom(a) => {
                self.bump();
                if self.is(":") {
                    self.bump();
                    let Tok::Atom(f) = self.tok().clone() else {
                        return refuse(self.at(), "a call: expected module:function(...)");
                    };
                    self.bump();
                    if !self.is("(") {
                        return refuse(at, format!("'{a}:{f}' without a call"));
                    }
                    let args = self.args()?;
                    return node(
                        Ex::Call {
                            module: Some(a),
                            name: f,
                            args,
                        },
                        at,
                    );
                }
                if self.is("(") {
                    let args = self.args()?;
                    return node(
                        Ex::Call {
                            module: None,
                            name: a,
                            args,
                        },
                        at,
                    );
                }
                node(Ex::Atom(a), at)
            }
            _ => refuse(
                at,
                format!("expected an expression, found {}", self.shown()),
            ),
        }
    }

    fn args(&mut self) -> R<Vec<Node>> {
        self.expect("(", "")?;
        self.enter()?;
        let mut xs = Vec::new();
        if !self.is(")") {
            xs.push(self.expr()?);
            while self.is(",") {
                self.bump();
                xs.push(self.expr()?);
            }
        }
        self.expect(")", "to close the call")?;
        self.leave();
        Ok(xs)
    }

    fn case(&mut self, at: usize) -> R<Node> {
        self.bump();
        self.enter()?;
        let subject = self.expr()?;
        self.expect_kw("of", "after the case's expression")?;
        let mut clauses = vec![self.clause(true)?];
        while self.is(";") {
            self.bump();
            clauses.push(self.clause(true)?);
        }
        self.expect_kw("end", "to close 'case'")?;
        self.leave();
        node(Ex::Case(Box::new(subject), clauses), at)
    }

    fn if_(&mut self, at: usize) -> R<Node> {
        self.bump();
        self.enter()?;
        let mut clauses = vec![self.clause(false)?];
        while self.is(";") {
            self.bump();
            clauses.push(self.clause(false)?);
        }
        self.expect_kw("end", "to close 'if'")?;
        self.leave();
        node(Ex::If(clauses), at)
    }

    fn clause(&mut self, with_pattern: bool) -> R<Clause> {
        let pattern = if with_pattern {
            Some(self.expr()?)
        } else {
            None
        };
        let mut guard = Vec::new();
        if !with_pattern || self.is_kw("when") {
            if with_pattern {
                self.bump();
            }
            loop {
                let mut conj = vec![self.expr()?];
                while self.is(",") {
                    self.bump();
                    conj.push(self.expr()?);
                }
                guard.push(conj);
                if !self.is(";") {
                    break;
                }
                self.bump();
            }
        }
        self.expect("->", "after the clause's head")?;
        let body = self.body()?;
        Ok(Clause {
            pattern,
            guard,
            body,
        })
    }
}

// ---- translation ---------------------------------------------------------------------------

type I = IntExpr<String>;
type B = BoolExpr<String>;

/// What an Erlang value is, as far as the translation knows it.
#[derive(Debug, Clone, PartialEq)]
enum Sym {
    Int(I),
    Bool(B),
    /// The text of a headroom variable (what `ts_dynvars:lookup` found); `true`: it may be
    /// taken as an integer directly too (Tsung 1.7's `tsung_userid` is one).
    Text(String, bool),
    /// An integer written as text (`integer_to_list`).
    IntText(I),
    Atom(String),
    Tuple(Vec<Sym>),
    /// `ts_dynvars:lookup(name, DynVars)`: `{ok, text}` (the importer checked it is set).
    Lookup(String, bool),
    DynVars,
    /// The session's pid and other values the code may hold but not compute with.
    Opaque,
}

impl Sym {
    fn kind(&self) -> &'static str {
        match self {
            Sym::Int(_) => "an integer",
            Sym::Bool(_) => "a boolean",
            Sym::Text(..) => "a variable's text",
            Sym::IntText(_) => "an integer's text",
            Sym::Atom(_) => "an atom",
            Sym::Tuple(_) => "a tuple",
            Sym::Lookup(..) => "a lookup result",
            Sym::DynVars => "the dynamic variables",
            Sym::Opaque => "the session's pid",
        }
    }

    fn size(&self) -> usize {
        match self {
            Sym::Int(e) | Sym::IntText(e) => e.size(),
            Sym::Bool(e) => e.size(),
            Sym::Tuple(xs) => 1 + xs.iter().map(Sym::size).sum::<usize>(),
            _ => 1,
        }
    }
}

type Env = HashMap<String, Sym>;

struct Tr<'v> {
    var: &'v mut dyn FnMut(&str) -> Result<String, String>,
    /// Expression nodes built so far (bounded by [`MAX_WORK`]).
    work: usize,
}

fn and(a: B, b: B) -> B {
    match (a, b) {
        (B::Lit(true), x) | (x, B::Lit(true)) => x,
        (B::Lit(false), _) => B::Lit(false),
        (a, b) => B::And(Box::new(a), Box::new(b)),
    }
}

fn or(a: B, b: B) -> B {
    match (a, b) {
        (B::Lit(false), x) | (x, B::Lit(false)) => x,
        (B::Lit(true), _) => B::Lit(true),
        (a, b) => B::Or(Box::new(a), Box::new(b)),
    }
}

/// The variables an integer expression reads, and whether it can fail otherwise than by one of
/// them holding no integer (an operation that can overflow or divide by zero).
fn int_vars<'e>(e: &'e I, out: &mut Vec<&'e str>) -> bool {
    match e {
        I::Lit(_) => false,
        I::Var(v) => {
            out.push(v);
            false
        }
        I::Neg(a) | I::Abs(a) => {
            int_vars(a, out);
            true
        }
        I::Op(IntOp::Min | IntOp::Max, a, b) => int_vars(a, out) | int_vars(b, out),
        I::Op(_, a, b) => {
            int_vars(a, out);
            int_vars(b, out);
            true
        }
        I::If(c, a, b) => bool_vars(c, out) | int_vars(a, out) | int_vars(b, out),
    }
}

fn bool_vars<'e>(e: &'e B, out: &mut Vec<&'e str>) -> bool {
    match e {
        B::Lit(_) => false,
        B::Cmp(_, a, b) => int_vars(a, out) | int_vars(b, out),
        B::Not(a) => bool_vars(a, out),
        B::And(a, b) | B::Or(a, b) => bool_vars(a, out) | bool_vars(b, out),
        B::If(c, a, b) => bool_vars(c, out) | bool_vars(a, out) | bool_vars(b, out),
    }
}

/// Whether `if c then v else v` may be written `v`: evaluating `c` can fail only by a variable
/// holding no integer, and `v` reads each of those variables (so it fails alike).
fn condition_is_redundant(c: &B, v: &Sym) -> bool {
    let mut cv = Vec::new();
    if bool_vars(c, &mut cv) {
        return false;
    }
    let mut vv = Vec::new();
    match v {
        Sym::Int(e) | Sym::IntText(e) => {
            int_vars(e, &mut vv);
        }
        Sym::Bool(e) => {
            bool_vars(e, &mut vv);
        }
        _ => return cv.is_empty(),
    }
    cv.iter().all(|x| vv.contains(x))
}

impl Tr<'_> {
    /// `e`, within one expression's bounds (checked at every node built, so no tree the
    /// translation holds is ever deeper than one more than the bound).
    fn int_ok(&self, e: I, at: usize) -> R<I> {
        if e.size() > MAX_NODES || e.depth() > MAX_EXPR_DEPTH {
            return refuse(at, too_large());
        }
        Ok(e)
    }

    fn bool_ok(&self, e: B, at: usize) -> R<B> {
        if e.size() > MAX_NODES || e.depth() > MAX_EXPR_DEPTH {
            return refuse(at, too_large());
        }
        Ok(e)
    }

    fn charge(&mut self, n: usize, at: usize) -> R<()> {
        self.work += n;
        if self.work > MAX_WORK {
            return refuse(
                at,
                format!("the code computes more than {MAX_WORK} operations once its variables are expanded"),
            );
        }
        Ok(())
    }

    fn body(&mut self, body: &[Node], env: &mut Env) -> R<Sym> {
        let mut last = Sym::Opaque;
        for n in body {
            last = self.eval(n, env)?;
        }
        Ok(last)
    }

    fn int(&mut self, n: &Node, env: &mut Env, what: &str) -> R<I> {
        match self.eval(n, env)? {
            Sym::Int(e) => Ok(e),
            Sym::Text(v, true) => Ok(I::Var(v)),
            other => refuse(
                n.at,
                format!(
                    "{what} of {}: headroom translates integer arithmetic",
                    other.kind()
                ),
            ),
        }
    }

    fn boolean(&mut self, n: &Node, env: &mut Env, what: &str) -> R<B> {
        match self.eval(n, env)? {
            Sym::Bool(e) => Ok(e),
            other => refuse(n.at, format!("{what} of {}, not a boolean", other.kind())),
        }
    }

    fn eval(&mut self, n: &Node, env: &mut Env) -> R<Sym> {
        let at = n.at;
        self.charge(1, at)?;
        Ok(match &n.e {
            Ex::Int(v) => Sym::Int(I::Lit(*v)),
            Ex::Var(v) if v == "_" => return refuse(at, "'_' used as a value"),
            Ex::Var(v) => match env.get(v) {
                Some(s) => {
                    let s = s.clone();
                    self.charge(s.size(), at)?;
                    s
                }
                None => {
                    return refuse(
                        at,
                        format!("variable '{v}' is not bound here (a variable bound inside a case or if clause is not carried out of it)"),
                    )
                }
            },
            Ex::Atom(a) if a == "true" => Sym::Bool(B::Lit(true)),
            Ex::Atom(a) if a == "false" => Sym::Bool(B::Lit(false)),
            Ex::Atom(a) => Sym::Atom(a.clone()),
            Ex::Tuple(xs) => {
                let mut out = Vec::with_capacity(xs.len());
                for x in xs {
                    out.push(self.eval(x, env)?);
                }
                Sym::Tuple(out)
            }
            Ex::Block(body) => self.body(body, env)?,
            Ex::Neg(x) => {
                let e = I::Neg(Box::new(self.int(x, env, "'-'")?));
                Sym::Int(self.int_ok(e, at)?)
            }
            Ex::Not(x) => {
                let e = B::Not(Box::new(self.boolean(x, env, "'not'")?));
                Sym::Bool(self.bool_ok(e, at)?)
            }
            Ex::Bin(op, a, b) => self.binary(op, a, b, env, at)?,
            Ex::Match(pat, value) => {
                let v = self.eval(value, env)?;
                self.bind(pat, &v, env)?;
                v
            }
            Ex::Call { module, name, args } => self.call(module.as_deref(), name, args, env, at)?,
            Ex::Case(subject, clauses) => {
                let s = self.eval(subject, env)?;
                self.clauses(Some(s), clauses, env, at)?
            }
            Ex::If(clauses) => self.clauses(None, clauses, env, at)?,
        })
    }

    fn binary(&mut self, op: &str, a: &Node, b: &Node, env: &mut Env, at: usize) -> R<Sym> {
        let what = format!("'{op}'");
        Ok(match op {
            "andalso" | "and" | "orelse" | "or" => {
                let (x, y) = (self.boolean(a, env, &what)?, self.boolean(b, env, &what)?);
                let e = if op.starts_with('a') {
                    and(x, y)
                } else {
                    or(x, y)
                };
                Sym::Bool(self.bool_ok(e, at)?)
            }
            "==" | "/=" | "=:=" | "=/=" | "<" | "=<" | ">" | ">=" => {
                let (x, y) = (
                    self.int(a, env, "a comparison")?,
                    self.int(b, env, "a comparison")?,
                );
                let c = match op {
                    "==" | "=:=" => CmpOp::Eq,
                    "/=" | "=/=" => CmpOp::Ne,
                    "<" => CmpOp::Lt,
                    "=<" => CmpOp::Le,
                    ">" => CmpOp::Gt,
                    _ => CmpOp::Ge,
                };
                Sym::Bool(self.bool_ok(B::Cmp(c, Box::new(x), Box::new(y)), at)?)
            }
            _ => {
                let (x, y) = (self.int(a, env, &what)?, self.int(b, env, &what)?);
                let o = match op {
                    "+" => IntOp::Add,
                    "-" => IntOp::Sub,
                    "*" => IntOp::Mul,
                    "div" => IntOp::Div,
                    "rem" => IntOp::Rem,
                    _ => return refuse(at, format!("the operator '{op}'")),
                };
                Sym::Int(self.int_ok(I::Op(o, Box::new(x), Box::new(y)), at)?)
            }
        })
    }

    fn call(
        &mut self,
        module: Option<&str>,
        name: &str,
        args: &[Node],
        env: &mut Env,
        at: usize,
    ) -> R<Sym> {
        let shown = match module {
            Some(m) => format!("{m}:{name}/{}", args.len()),
            None => format!("{name}/{}", args.len()),
        };
        let bif = matches!(module, None | Some("erlang"));
        Ok(match (module, name, args) {
            (Some("ts_dynvars"), "lookup", [key, dv]) => {
                let Ex::Atom(k) = &key.e else {
                    return refuse(key.at, "ts_dynvars:lookup: expected the variable's name as an atom");
                };
                if self.eval(dv, env)? != Sym::DynVars {
                    return refuse(dv.at, "ts_dynvars:lookup: expected the fun's DynVars");
                }
                let v = (self.var)(k).map_err(|message| Refusal {
                    at: key.at,
                    message,
                })?;
                // Tsung 1.7 keeps tsung_userid as an integer, earlier versions as text.
                Sym::Lookup(v, k == "tsung_userid")
            }
            (_, "list_to_integer", [x]) if bif => match self.eval(x, env)? {
                Sym::Text(v, _) => Sym::Int(I::Var(v)),
                Sym::IntText(e) => Sym::Int(e),
                other => {
                    return refuse(
                        x.at,
                        format!("list_to_integer of {}: headroom translates it of a dynamic variable's text", other.kind()),
                    )
                }
            },
            (_, "integer_to_list", [x]) if bif => Sym::IntText(self.int(x, env, "integer_to_list")?),
            (_, "abs", [x]) if bif => {
                let e = I::Abs(Box::new(self.int(x, env, "abs")?));
                Sym::Int(self.int_ok(e, at)?)
            }
            (_, "min" | "max", [x, y]) if bif => {
                let (a, b) = (self.int(x, env, name)?, self.int(y, env, name)?);
                let op = if name == "min" { IntOp::Min } else { IntOp::Max };
                Sym::Int(self.int_ok(I::Op(op, Box::new(a), Box::new(b)), at)?)
            }
            _ => return refuse(at, format!("a call to {shown}")),
        })
    }

    /// Binds the variables of a match's pattern to `value` (a match that could fail, other
    /// than Tsung's own `{ok, Val} = lookup(...)`, is refused).
    fn bind(&mut self, pat: &Node, value: &Sym, env: &mut Env) -> R<()> {
        match self.pattern(pat, value, env, &mut Covered::default())? {
            B::Lit(true) => Ok(()),
            _ => refuse(
                pat.at,
                "a match that may fail (Erlang raises badmatch): headroom translates matches that bind variables",
            ),
        }
    }

    /// The condition under which `value` matches `pat`, binding its variables in `env`.
    fn pattern(&mut self, pat: &Node, value: &Sym, env: &mut Env, cov: &mut Covered) -> R<B> {
        Ok(match (&pat.e, value) {
            (Ex::Var(v), _) if v == "_" => B::Lit(true),
            (Ex::Var(v), _) => match env.get(v) {
                None => {
                    self.charge(value.size(), pat.at)?;
                    env.insert(v.clone(), value.clone());
                    B::Lit(true)
                }
                Some(Sym::Int(bound)) => match value {
                    Sym::Int(x) => {
                        let e = B::Cmp(CmpOp::Eq, Box::new(x.clone()), Box::new(bound.clone()));
                        self.bool_ok(e, pat.at)?
                    }
                    _ => return refuse(pat.at, format!("a pattern with the bound variable '{v}'")),
                },
                Some(_) => {
                    return refuse(pat.at, format!("a pattern with the bound variable '{v}'"))
                }
            },
            (Ex::Int(n), Sym::Int(x)) => {
                let e = B::Cmp(CmpOp::Eq, Box::new(x.clone()), Box::new(I::Lit(*n)));
                self.bool_ok(e, pat.at)?
            }
            (Ex::Atom(a), Sym::Bool(b)) if a == "true" || a == "false" => {
                let want = a == "true";
                // After a clause for the other value, this one is all that is left.
                let rest = if want { cov.false_ } else { cov.true_ };
                if want {
                    cov.true_ = true;
                } else {
                    cov.false_ = true;
                }
                if rest {
                    B::Lit(true)
                } else if want {
                    b.clone()
                } else {
                    B::Not(Box::new(b.clone()))
                }
            }
            (Ex::Atom(a), Sym::Atom(x)) => B::Lit(a == x),
            (Ex::Atom(a), Sym::Lookup(..)) if a == "false" => B::Lit(false),
            (Ex::Tuple(ps), Sym::Lookup(v, int)) => match ps.as_slice() {
                [ok, val] if matches!(&ok.e, Ex::Atom(a) if a == "ok") => self.pattern(
                    val,
                    &Sym::Text(v.clone(), *int),
                    env,
                    &mut Covered::default(),
                )?,
                _ => B::Lit(false),
            },
            (Ex::Tuple(ps), Sym::Tuple(xs)) if ps.len() == xs.len() => {
                let mut c = B::Lit(true);
                for (p, x) in ps.iter().zip(xs) {
                    let pc = self.pattern(p, x, env, &mut Covered::default())?;
                    c = self.bool_ok(and(c, pc), p.at)?;
                }
                c
            }
            // A tuple of another size, or against a value that is not one: never matches.
            (Ex::Tuple(_), Sym::Tuple(_) | Sym::Int(_) | Sym::Bool(_) | Sym::Atom(_)) => {
                B::Lit(false)
            }
            (Ex::Int(_), Sym::Tuple(_) | Sym::Bool(_) | Sym::Atom(_)) => B::Lit(false),
            (Ex::Int(_) | Ex::Atom(_) | Ex::Tuple(_), _) => {
                return refuse(
                    pat.at,
                    format!("a pattern of this kind against {}", value.kind()),
                )
            }
            _ => {
                return refuse(
                    pat.at,
                    "a pattern other than a variable, _, an integer, true/false or a tuple of them",
                )
            }
        })
    }

    fn guard(&mut self, guard: &[Vec<Node>], env: &mut Env) -> R<B> {
        if guard.is_empty() {
            return Ok(B::Lit(true));
        }
        let mut any = B::Lit(false);
        for conj in guard {
            let mut all = B::Lit(true);
            for g in conj {
                let c = self.boolean(g, env, "a guard")?;
                all = self.bool_ok(and(all, c), g.at)?;
            }
            let at = conj.first().map_or(0, |g| g.at);
            any = self.bool_ok(or(any, all), at)?;
        }
        Ok(any)
    }

    /// A case (with its subject) or an if: nested choices, the last clause the fallback.
    fn clauses(
        &mut self,
        subject: Option<Sym>,
        clauses: &[Clause],
        env: &mut Env,
        at: usize,
    ) -> R<Sym> {
        let mut arms: Vec<(B, Sym)> = Vec::new();
        let mut cov = Covered::default();
        for cl in clauses {
            let mut scope = env.clone();
            self.charge(env.values().map(Sym::size).sum(), at)?;
            let matched = match (&cl.pattern, &subject) {
                (Some(p), Some(s)) => {
                    let before = cov;
                    let c = self.pattern(p, s, &mut scope, &mut cov)?;
                    if !cl.guard.is_empty() {
                        // A guarded clause covers nothing for the clauses after it.
                        cov = before;
                    }
                    c
                }
                _ => B::Lit(true),
            };
            if matched == B::Lit(false) {
                continue;
            }
            let g = self.guard(&cl.guard, &mut scope)?;
            let c = self.bool_ok(and(matched, g), at)?;
            if c == B::Lit(false) {
                continue;
            }
            let v = self.body(&cl.body, &mut scope)?;
            let last = c == B::Lit(true);
            arms.push((c, v));
            if last {
                break;
            }
        }
        let Some((c, mut value)) = arms.pop() else {
            return refuse(at, "no clause can match");
        };
        if c != B::Lit(true) {
            let kind = if subject.is_some() { "case" } else { "if" };
            return refuse(
                at,
                format!("this {kind} may match no clause (Erlang raises an error there, which an expression cannot): end it with a clause for whatever is left (_ -> ..., or true -> ...)"),
            );
        }
        while let Some((c, v)) = arms.pop() {
            value = self.choose(c, v, value, at)?;
        }
        Ok(value)
    }

    /// `if c then a else b`, per element of tuples.
    fn choose(&mut self, c: B, a: Sym, b: Sym, at: usize) -> R<Sym> {
        match c {
            B::Lit(true) => return Ok(a),
            B::Lit(false) => return Ok(b),
            _ => {}
        }
        if a == b && condition_is_redundant(&c, &a) {
            return Ok(a);
        }
        self.charge(1 + c.size(), at)?;
        Ok(match (a, b) {
            (Sym::Int(x), Sym::Int(y)) => {
                Sym::Int(self.int_ok(I::If(Box::new(c), Box::new(x), Box::new(y)), at)?)
            }
            (Sym::IntText(x), Sym::IntText(y)) => {
                Sym::IntText(self.int_ok(I::If(Box::new(c), Box::new(x), Box::new(y)), at)?)
            }
            (Sym::Bool(x), Sym::Bool(y)) => {
                Sym::Bool(self.bool_ok(B::If(Box::new(c), Box::new(x), Box::new(y)), at)?)
            }
            (Sym::Tuple(xs), Sym::Tuple(ys)) if xs.len() == ys.len() => {
                let mut out = Vec::with_capacity(xs.len());
                for (x, y) in xs.into_iter().zip(ys) {
                    out.push(self.choose(c.clone(), x, y, at)?);
                }
                Sym::Tuple(out)
            }
            (x, y) => {
                return refuse(
                    at,
                    format!(
                        "the clauses give {} and {}: headroom translates clauses that give integers (or tuples of them) alike",
                        x.kind(),
                        y.kind()
                    ),
                )
            }
        })
    }
}

fn too_large() -> String {
    format!("the code computes an expression deeper than {MAX_EXPR_DEPTH} levels or larger than {MAX_NODES} operations")
}

/// Which of `true` and `false` the unguarded clauses of a case on a boolean have taken.
#[derive(Debug, Clone, Copy, Default)]
struct Covered {
    true_: bool,
    false_: bool,
}

#[cfg(test)]
mod tests;
