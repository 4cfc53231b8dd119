//! Integer expressions: the `expr` source of a scenario's `set` step.
//!
//! A small, total language over 64-bit signed integers, so that a scenario can compute one
//! number from others (another user's id from its own, a page from a counter) without running
//! code. It is what Tsung's `<setdynvars sourcetype="eval">` Erlang funs become when they only
//! do arithmetic (see the Tsung importer). From the loosest binding to the tightest:
//!
//! ```text
//! expr  := "if" expr "then" expr "else" expr       (the else branch reaches as far right as it can)
//!        | expr "or" expr | expr "and" expr | "not" expr
//!        | sum ("==" | "!=" | "<" | "<=" | ">" | ">=") sum      (not chained: a < b < c is refused)
//! sum   := sum ("+" | "-") term | term
//! term  := term ("*" | "div" | "rem") unary | unary
//! unary := "-" unary | atom
//! atom  := INTEGER | NAME | "${" NAME "}" | "true" | "false" | "(" expr ")"
//!        | "abs" "(" expr ")" | "min" "(" expr "," expr ")" | "max" "(" expr "," expr ")"
//!        | "if" ...
//! ```
//!
//! A `NAME` is a session variable (`user_id`, `session`, or one an earlier step sets); a
//! variable named like a keyword is written `${name}`. Types are checked when the expression is
//! parsed: `if` takes a comparison (or `and`/`or`/`not` of them) and two branches of one type,
//! arithmetic takes integers, and the whole expression is an integer. `div` truncates towards
//! zero and `rem` takes the sign of the dividend (Erlang's `div` and `rem`, C's `/` and `%`);
//! `and`, `or` and `if` evaluate only what decides them, so `if d != 0 then n div d else 0`
//! never divides by zero.
//!
//! Bounds, so that a scenario (or a Tsung file) cannot make the parser or the evaluator use
//! unbounded stack or time: the text is at most [`MAX_EXPR_BYTES`], the tree at most
//! [`MAX_EXPR_DEPTH`] deep (a chain `a + b + c` is as deep as it is long). Evaluation is a walk
//! of that tree on the stack: it allocates nothing. What can only go wrong when it runs — a
//! variable that does not hold an integer, an overflow, a division by zero — is an
//! [`EvalError`], never a panic or a wrapped value.

use std::fmt;

/// A variable's index among a session's variables; `session::VarId` is this one (defined here
/// so that `session`, which holds compiled expressions, imports `expr` and not the reverse).
pub type VarId = u16;

/// `BoolExpr::And` or `BoolExpr::Or`, as the parser's `logic` builds them.
type Join<V> = fn(Box<BoolExpr<V>>, Box<BoolExpr<V>>) -> BoolExpr<V>;

/// The longest expression text, in bytes.
pub const MAX_EXPR_BYTES: usize = 4096;
/// The deepest expression tree (a literal or a variable is 1 deep; `a + b` is 2).
pub const MAX_EXPR_DEPTH: usize = 64;

/// An integer operator of two operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
    /// Truncating division (towards zero).
    Div,
    /// The remainder of [`IntOp::Div`]: the sign of the dividend.
    Rem,
    Min,
    Max,
}

/// A comparison of two integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// An expression of integer type over variables `V` (names as parsed, [`VarId`]s compiled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntExpr<V> {
    Lit(i64),
    Var(V),
    Neg(Box<IntExpr<V>>),
    Abs(Box<IntExpr<V>>),
    Op(IntOp, Box<IntExpr<V>>, Box<IntExpr<V>>),
    If(Box<BoolExpr<V>>, Box<IntExpr<V>>, Box<IntExpr<V>>),
}

/// An expression of boolean type: the condition of an `if`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoolExpr<V> {
    Lit(bool),
    Cmp(CmpOp, Box<IntExpr<V>>, Box<IntExpr<V>>),
    Not(Box<BoolExpr<V>>),
    And(Box<BoolExpr<V>>, Box<BoolExpr<V>>),
    Or(Box<BoolExpr<V>>, Box<BoolExpr<V>>),
    If(Box<BoolExpr<V>>, Box<BoolExpr<V>>, Box<BoolExpr<V>>),
}

/// Why an expression does not parse: at byte `at` of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    pub at: usize,
    pub message: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at character {}: {}", self.at + 1, self.message)
    }
}

/// Why an evaluation failed. Fixed and small: counted on the hot path, worded at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalError {
    /// A result beyond a 64-bit signed integer (`abs` and `-` of the smallest one included).
    Overflow,
    /// `div` or `rem` by zero.
    DivisionByZero,
    /// The variable does not hold an integer (empty, not digits, or beyond 64 bits).
    NotInteger(VarId),
}

/// The integer a variable's text holds: an optional sign and decimal digits, nothing else (no
/// spaces: Erlang's `list_to_integer` refuses them too); `None` for anything else.
pub fn int_value(text: &str) -> Option<i64> {
    text.parse::<i64>().ok()
}

impl IntExpr<VarId> {
    /// The value of the expression with the session's variables `vars` (by [`VarId`]).
    /// Recursion is bounded by the parser's [`MAX_EXPR_DEPTH`]; allocates nothing.
    pub fn eval(&self, vars: &[String]) -> Result<i64, EvalError> {
        Ok(match self {
            IntExpr::Lit(n) => *n,
            IntExpr::Var(v) => vars
                .get(*v as usize)
                .and_then(|s| int_value(s))
                .ok_or(EvalError::NotInteger(*v))?,
            IntExpr::Neg(a) => a.eval(vars)?.checked_neg().ok_or(EvalError::Overflow)?,
            IntExpr::Abs(a) => a.eval(vars)?.checked_abs().ok_or(EvalError::Overflow)?,
            IntExpr::Op(op, a, b) => {
                let (a, b) = (a.eval(vars)?, b.eval(vars)?);
                match op {
                    IntOp::Add => a.checked_add(b).ok_or(EvalError::Overflow)?,
                    IntOp::Sub => a.checked_sub(b).ok_or(EvalError::Overflow)?,
                    IntOp::Mul => a.checked_mul(b).ok_or(EvalError::Overflow)?,
                    IntOp::Div if b == 0 => return Err(EvalError::DivisionByZero),
                    IntOp::Div => a.checked_div(b).ok_or(EvalError::Overflow)?,
                    IntOp::Rem if b == 0 => return Err(EvalError::DivisionByZero),
                    // i64::MIN rem -1 is 0, which is what the wrapping remainder gives.
                    IntOp::Rem => a.wrapping_rem(b),
                    IntOp::Min => a.min(b),
                    IntOp::Max => a.max(b),
                }
            }
            IntExpr::If(c, a, b) => {
                if c.eval(vars)? {
                    a.eval(vars)?
                } else {
                    b.eval(vars)?
                }
            }
        })
    }
}

impl BoolExpr<VarId> {
    pub fn eval(&self, vars: &[String]) -> Result<bool, EvalError> {
        Ok(match self {
            BoolExpr::Lit(b) => *b,
            BoolExpr::Cmp(op, a, b) => {
                let (a, b) = (a.eval(vars)?, b.eval(vars)?);
                match op {
                    CmpOp::Eq => a == b,
                    CmpOp::Ne => a != b,
                    CmpOp::Lt => a < b,
                    CmpOp::Le => a <= b,
                    CmpOp::Gt => a > b,
                    CmpOp::Ge => a >= b,
                }
            }
            BoolExpr::Not(a) => !a.eval(vars)?,
            BoolExpr::And(a, b) => a.eval(vars)? && b.eval(vars)?,
            BoolExpr::Or(a, b) => a.eval(vars)? || b.eval(vars)?,
            BoolExpr::If(c, a, b) => {
                if c.eval(vars)? {
                    a.eval(vars)?
                } else {
                    b.eval(vars)?
                }
            }
        })
    }
}

impl<V> IntExpr<V> {
    /// The same expression over other variables (names to ids); the first error stops it.
    pub fn map_vars<U, E>(self, f: &mut impl FnMut(V) -> Result<U, E>) -> Result<IntExpr<U>, E> {
        Ok(match self {
            IntExpr::Lit(n) => IntExpr::Lit(n),
            IntExpr::Var(v) => IntExpr::Var(f(v)?),
            IntExpr::Neg(a) => IntExpr::Neg(Box::new(a.map_vars(f)?)),
            IntExpr::Abs(a) => IntExpr::Abs(Box::new(a.map_vars(f)?)),
            IntExpr::Op(op, a, b) => {
                IntExpr::Op(op, Box::new(a.map_vars(f)?), Box::new(b.map_vars(f)?))
            }
            IntExpr::If(c, a, b) => IntExpr::If(
                Box::new(c.map_vars(f)?),
                Box::new(a.map_vars(f)?),
                Box::new(b.map_vars(f)?),
            ),
        })
    }

    /// How deep the tree is (1 for a literal or a variable).
    pub fn depth(&self) -> usize {
        match self {
            IntExpr::Lit(_) | IntExpr::Var(_) => 1,
            IntExpr::Neg(a) | IntExpr::Abs(a) => 1 + a.depth(),
            IntExpr::Op(_, a, b) => 1 + a.depth().max(b.depth()),
            IntExpr::If(c, a, b) => 1 + c.depth().max(a.depth()).max(b.depth()),
        }
    }

    /// How many nodes the tree has.
    pub fn size(&self) -> usize {
        match self {
            IntExpr::Lit(_) | IntExpr::Var(_) => 1,
            IntExpr::Neg(a) | IntExpr::Abs(a) => 1 + a.size(),
            IntExpr::Op(_, a, b) => 1 + a.size() + b.size(),
            IntExpr::If(c, a, b) => 1 + c.size() + a.size() + b.size(),
        }
    }
}

impl<V> BoolExpr<V> {
    pub fn map_vars<U, E>(self, f: &mut impl FnMut(V) -> Result<U, E>) -> Result<BoolExpr<U>, E> {
        Ok(match self {
            BoolExpr::Lit(b) => BoolExpr::Lit(b),
            BoolExpr::Cmp(op, a, b) => {
                BoolExpr::Cmp(op, Box::new(a.map_vars(f)?), Box::new(b.map_vars(f)?))
            }
            BoolExpr::Not(a) => BoolExpr::Not(Box::new(a.map_vars(f)?)),
            BoolExpr::And(a, b) => {
                BoolExpr::And(Box::new(a.map_vars(f)?), Box::new(b.map_vars(f)?))
            }
            BoolExpr::Or(a, b) => BoolExpr::Or(Box::new(a.map_vars(f)?), Box::new(b.map_vars(f)?)),
            BoolExpr::If(c, a, b) => BoolExpr::If(
                Box::new(c.map_vars(f)?),
                Box::new(a.map_vars(f)?),
                Box::new(b.map_vars(f)?),
            ),
        })
    }

    pub fn depth(&self) -> usize {
        match self {
            BoolExpr::Lit(_) => 1,
            BoolExpr::Not(a) => 1 + a.depth(),
            BoolExpr::Cmp(_, a, b) => 1 + a.depth().max(b.depth()),
            BoolExpr::And(a, b) | BoolExpr::Or(a, b) => 1 + a.depth().max(b.depth()),
            BoolExpr::If(c, a, b) => 1 + c.depth().max(a.depth()).max(b.depth()),
        }
    }

    pub fn size(&self) -> usize {
        match self {
            BoolExpr::Lit(_) => 1,
            BoolExpr::Not(a) => 1 + a.size(),
            BoolExpr::Cmp(_, a, b) => 1 + a.size() + b.size(),
            BoolExpr::And(a, b) | BoolExpr::Or(a, b) => 1 + a.size() + b.size(),
            BoolExpr::If(c, a, b) => 1 + c.size() + a.size() + b.size(),
        }
    }
}

// ---- parsing -------------------------------------------------------------------------------

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "and", "or", "not", "div", "rem", "abs", "min", "max", "true", "false",
];

/// Whether `name` must be written `${name}` in an expression (it is a keyword).
pub fn is_keyword(name: &str) -> bool {
    KEYWORDS.contains(&name)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    /// Decimal digits (their value is read where a sign may fold in).
    Digits(&'a str),
    /// A name or a keyword.
    Word(&'a str),
    /// `${name}`: always a variable.
    VarRef(&'a str),
    Sym(&'static str),
    End,
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

const SYMBOLS: &[&str] = &[
    "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "(", ")", ",",
];

impl<'a> Lexer<'a> {
    /// The next token and where it starts.
    fn next(&mut self) -> Result<(Tok<'a>, usize), ExprError> {
        let b = self.text.as_bytes();
        while self.pos < b.len() && b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let at = self.pos;
        let Some(&c) = b.get(at) else {
            return Ok((Tok::End, at));
        };
        let run = |from: usize, f: fn(u8) -> bool| {
            let mut i = from;
            while i < b.len() && f(b[i]) {
                i += 1;
            }
            i
        };
        if c.is_ascii_digit() {
            let end = run(at, |c| c.is_ascii_digit());
            if b.get(end)
                .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
            {
                return Err(err(end, "expected an operator after the number"));
            }
            self.pos = end;
            return Ok((Tok::Digits(&self.text[at..end]), at));
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let end = run(at, |c| c.is_ascii_alphanumeric() || c == b'_');
            self.pos = end;
            return Ok((Tok::Word(&self.text[at..end]), at));
        }
        if self.text[at..].starts_with("${") {
            let start = at + 2;
            let end = run(start, |c| c.is_ascii_alphanumeric() || c == b'_');
            if end == start || b.get(end) != Some(&b'}') || b[start].is_ascii_digit() {
                return Err(err(at, "expected '${name}' (letters, digits, _)"));
            }
            self.pos = end + 1;
            return Ok((Tok::VarRef(&self.text[start..end]), at));
        }
        for s in SYMBOLS {
            if self.text[at..].starts_with(s) {
                self.pos = at + s.len();
                return Ok((Tok::Sym(s), at));
            }
        }
        let ch = self.text[at..].chars().next().unwrap_or('?');
        let hint = match ch {
            '=' => ": compare with ==",
            '/' | '%' => ": divide with div, take the remainder with rem",
            '&' | '|' | '!' => ": use and, or, not",
            _ => "",
        };
        Err(err(at, format!("unexpected '{ch}'{hint}")))
    }
}

fn err(at: usize, message: impl Into<String>) -> ExprError {
    ExprError {
        at,
        message: message.into(),
    }
}

/// A parsed piece: its value, where it starts, how deep its tree is.
enum Typed<V> {
    Int(IntExpr<V>),
    Bool(BoolExpr<V>),
}

struct Node<V> {
    e: Typed<V>,
    at: usize,
    depth: usize,
}

struct Parser<'a, 'r, V, E> {
    lex: Lexer<'a>,
    tok: Tok<'a>,
    at: usize,
    /// How deep the parser has recursed (parentheses, `if`, `not`, unary minus, calls).
    nest: usize,
    resolve: &'r mut dyn FnMut(&str) -> Result<V, E>,
}

/// Parses `text` as an integer expression, each variable resolved by `resolve` (a name to
/// whatever the caller keeps: itself, a [`VarId`], or an error message for a variable it does
/// not know, reported at that variable).
pub fn parse<V, E: fmt::Display>(
    text: &str,
    resolve: &mut dyn FnMut(&str) -> Result<V, E>,
) -> Result<IntExpr<V>, ExprError> {
    if text.len() > MAX_EXPR_BYTES {
        return Err(err(
            0,
            format!(
                "the expression is {} bytes long; at most {MAX_EXPR_BYTES} are allowed",
                text.len()
            ),
        ));
    }
    let mut p = Parser {
        lex: Lexer { text, pos: 0 },
        tok: Tok::End,
        at: 0,
        nest: 0,
        resolve,
    };
    p.bump()?;
    if p.tok == Tok::End {
        return Err(err(0, "expected an expression"));
    }
    let n = p.expr()?;
    if p.tok != Tok::End {
        return Err(err(
            p.at,
            format!("expected an operator, found {}", p.shown()),
        ));
    }
    match n.e {
        Typed::Int(e) => Ok(e),
        Typed::Bool(_) => Err(err(
            n.at,
            "the expression is a condition; a set needs an integer (use if ... then ... else ...)",
        )),
    }
}

impl<V, E: fmt::Display> Parser<'_, '_, V, E> {
    fn bump(&mut self) -> Result<(), ExprError> {
        let (t, at) = self.lex.next()?;
        self.tok = t;
        self.at = at;
        Ok(())
    }

    fn shown(&self) -> String {
        match self.tok {
            Tok::Digits(d) => format!("'{d}'"),
            Tok::Word(w) => format!("'{w}'"),
            Tok::VarRef(v) => format!("'${{{v}}}'"),
            Tok::Sym(s) => format!("'{s}'"),
            Tok::End => "the end".into(),
        }
    }

    fn is_word(&self, w: &str) -> bool {
        self.tok == Tok::Word(w)
    }

    fn expect_word(&mut self, w: &str, after: &str) -> Result<(), ExprError> {
        if !self.is_word(w) {
            return Err(err(
                self.at,
                format!("expected '{w}' {after}, found {}", self.shown()),
            ));
        }
        self.bump()
    }

    fn expect_sym(&mut self, s: &str, after: &str) -> Result<(), ExprError> {
        if !matches!(self.tok, Tok::Sym(t) if t == s) {
            return Err(err(
                self.at,
                format!("expected '{s}' {after}, found {}", self.shown()),
            ));
        }
        self.bump()
    }

    /// Enters one level of nesting (bounded, so deep input cannot exhaust the stack).
    fn enter(&mut self) -> Result<(), ExprError> {
        self.nest += 1;
        if self.nest > MAX_EXPR_DEPTH {
            return Err(err(
                self.at,
                format!("the expression nests deeper than {MAX_EXPR_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    fn node(&self, e: Typed<V>, at: usize, depth: usize) -> Result<Node<V>, ExprError> {
        if depth > MAX_EXPR_DEPTH {
            return Err(err(
                at,
                format!(
                    "the expression is deeper than {MAX_EXPR_DEPTH} levels (a chain of operators counts one level per operator)"
                ),
            ));
        }
        Ok(Node { e, at, depth })
    }

    fn int(n: Node<V>, what: &str) -> Result<(IntExpr<V>, usize), ExprError> {
        match n.e {
            Typed::Int(e) => Ok((e, n.depth)),
            Typed::Bool(_) => Err(err(
                n.at,
                format!("{what} takes an integer, and this is a condition"),
            )),
        }
    }

    fn boolean(n: Node<V>, what: &str) -> Result<(BoolExpr<V>, usize), ExprError> {
        match n.e {
            Typed::Bool(e) => Ok((e, n.depth)),
            Typed::Int(_) => Err(err(
                n.at,
                format!(
                    "{what} takes a condition (a comparison such as x > 0), and this is an integer"
                ),
            )),
        }
    }

    /// `left WHAT right` for `and` and `or`: both sides conditions, one level deeper than the
    /// deeper of them.
    fn logic(
        &mut self,
        left: Node<V>,
        right: Node<V>,
        what: &str,
        make: Join<V>,
    ) -> Result<Node<V>, ExprError> {
        let at = left.at;
        let (a, da) = Self::boolean(left, what)?;
        let (b, db) = Self::boolean(right, what)?;
        self.node(
            Typed::Bool(make(Box::new(a), Box::new(b))),
            at,
            1 + da.max(db),
        )
    }

    /// `or` (loosest) down to comparisons.
    fn expr(&mut self) -> Result<Node<V>, ExprError> {
        let mut left = self.and()?;
        while self.is_word("or") {
            self.bump()?;
            let right = self.and()?;
            left = self.logic(left, right, "'or'", BoolExpr::Or)?;
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Node<V>, ExprError> {
        let mut left = self.not()?;
        while self.is_word("and") {
            self.bump()?;
            let right = self.not()?;
            left = self.logic(left, right, "'and'", BoolExpr::And)?;
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Node<V>, ExprError> {
        if !self.is_word("not") {
            return self.cmp();
        }
        let at = self.at;
        self.enter()?;
        self.bump()?;
        let inner = self.not()?;
        self.nest -= 1;
        let (a, d) = Self::boolean(inner, "'not'")?;
        self.node(Typed::Bool(BoolExpr::Not(Box::new(a))), at, 1 + d)
    }

    fn cmp(&mut self) -> Result<Node<V>, ExprError> {
        let left = self.sum()?;
        let op = match self.tok {
            Tok::Sym("==") => CmpOp::Eq,
            Tok::Sym("!=") => CmpOp::Ne,
            Tok::Sym("<") => CmpOp::Lt,
            Tok::Sym("<=") => CmpOp::Le,
            Tok::Sym(">") => CmpOp::Gt,
            Tok::Sym(">=") => CmpOp::Ge,
            _ => return Ok(left),
        };
        self.bump()?;
        let right = self.sum()?;
        if matches!(self.tok, Tok::Sym("==" | "!=" | "<" | "<=" | ">" | ">=")) {
            return Err(err(
                self.at,
                "comparisons do not chain: write a < b and b < c",
            ));
        }
        let at = left.at;
        let (a, da) = Self::int(left, "a comparison")?;
        let (b, db) = Self::int(right, "a comparison")?;
        self.node(
            Typed::Bool(BoolExpr::Cmp(op, Box::new(a), Box::new(b))),
            at,
            1 + da.max(db),
        )
    }

    fn sum(&mut self) -> Result<Node<V>, ExprError> {
        let mut left = self.term()?;
        loop {
            let op = match self.tok {
                Tok::Sym("+") => IntOp::Add,
                Tok::Sym("-") => IntOp::Sub,
                _ => return Ok(left),
            };
            let what = if op == IntOp::Add { "'+'" } else { "'-'" };
            self.bump()?;
            let right = self.term()?;
            left = self.binary(op, left, right, what)?;
        }
    }

    fn term(&mut self) -> Result<Node<V>, ExprError> {
        let mut left = self.unary()?;
        loop {
            let (op, what) = match self.tok {
                Tok::Sym("*") => (IntOp::Mul, "'*'"),
                Tok::Word("div") => (IntOp::Div, "'div'"),
                Tok::Word("rem") => (IntOp::Rem, "'rem'"),
                _ => return Ok(left),
            };
            self.bump()?;
            let right = self.unary()?;
            left = self.binary(op, left, right, what)?;
        }
    }

    fn binary(
        &mut self,
        op: IntOp,
        left: Node<V>,
        right: Node<V>,
        what: &str,
    ) -> Result<Node<V>, ExprError> {
        let at = left.at;
        let (a, da) = Self::int(left, what)?;
        let (b, db) = Self::int(right, what)?;
        self.node(
            Typed::Int(IntExpr::Op(op, Box::new(a), Box::new(b))),
            at,
            1 + da.max(db),
        )
    }

    fn unary(&mut self) -> Result<Node<V>, ExprError> {
        if self.tok != Tok::Sym("-") {
            return self.atom();
        }
        let at = self.at;
        self.bump()?;
        if let Tok::Digits(d) = self.tok {
            // A negative literal, so that the smallest integer can be written.
            let n = literal(d, true).ok_or_else(|| err(at, too_large(d)))?;
            self.bump()?;
            return self.node(Typed::Int(IntExpr::Lit(n)), at, 1);
        }
        self.enter()?;
        let inner = self.unary()?;
        self.nest -= 1;
        let (a, d) = Self::int(inner, "'-'")?;
        self.node(Typed::Int(IntExpr::Neg(Box::new(a))), at, 1 + d)
    }

    fn atom(&mut self) -> Result<Node<V>, ExprError> {
        let at = self.at;
        match self.tok {
            Tok::Digits(d) => {
                let n = literal(d, false).ok_or_else(|| err(at, too_large(d)))?;
                self.bump()?;
                self.node(Typed::Int(IntExpr::Lit(n)), at, 1)
            }
            Tok::VarRef(name) => {
                let v = (self.resolve)(name).map_err(|e| err(at, e.to_string()))?;
                self.bump()?;
                self.node(Typed::Int(IntExpr::Var(v)), at, 1)
            }
            Tok::Word("true" | "false") => {
                let b = self.is_word("true");
                self.bump()?;
                self.node(Typed::Bool(BoolExpr::Lit(b)), at, 1)
            }
            Tok::Word("if") => {
                self.enter()?;
                self.bump()?;
                let c = self.expr()?;
                self.expect_word("then", "after the condition of 'if'")?;
                let a = self.expr()?;
                self.expect_word("else", "after the 'then' branch ('if' needs both branches)")?;
                let b = self.expr()?;
                self.nest -= 1;
                let (c, dc) = Self::boolean(c, "'if'")?;
                let depth = 1 + dc.max(a.depth).max(b.depth);
                let e = match (a.e, b.e) {
                    (Typed::Int(a), Typed::Int(b)) => {
                        Typed::Int(IntExpr::If(Box::new(c), Box::new(a), Box::new(b)))
                    }
                    (Typed::Bool(a), Typed::Bool(b)) => {
                        Typed::Bool(BoolExpr::If(Box::new(c), Box::new(a), Box::new(b)))
                    }
                    _ => {
                        return Err(err(
                            b.at,
                            "the branches of 'if' differ: one is an integer, the other a condition",
                        ))
                    }
                };
                self.node(e, at, depth)
            }
            Tok::Word(f @ ("abs" | "min" | "max")) => {
                self.enter()?;
                self.bump()?;
                self.expect_sym("(", &format!("after '{f}'"))?;
                let a = self.expr()?;
                let what = format!("'{f}'");
                let (a, da) = Self::int(a, &what)?;
                let e = if f == "abs" {
                    self.expect_sym(")", "to close 'abs('")?;
                    (IntExpr::Abs(Box::new(a)), 1 + da)
                } else {
                    self.expect_sym(",", &format!("between the two operands of '{f}'"))?;
                    let b = self.expr()?;
                    let (b, db) = Self::int(b, &what)?;
                    self.expect_sym(")", &format!("to close '{f}('"))?;
                    let op = if f == "min" { IntOp::Min } else { IntOp::Max };
                    (IntExpr::Op(op, Box::new(a), Box::new(b)), 1 + da.max(db))
                };
                self.nest -= 1;
                self.node(Typed::Int(e.0), at, e.1)
            }
            Tok::Word(w) if is_keyword(w) => Err(err(
                at,
                format!("expected a number, a variable or '(', found the keyword '{w}' (a variable of that name is written ${{{w}}})"),
            )),
            Tok::Word(name) => {
                self.bump()?;
                if self.tok == Tok::Sym("(") {
                    return Err(err(
                        at,
                        format!("'{name}' is not a function: the functions are abs, min and max"),
                    ));
                }
                let v = (self.resolve)(name).map_err(|e| err(at, e.to_string()))?;
                self.node(Typed::Int(IntExpr::Var(v)), at, 1)
            }
            Tok::Sym("(") => {
                self.enter()?;
                self.bump()?;
                let inner = self.expr()?;
                self.expect_sym(")", "to close '('")?;
                self.nest -= 1;
                // Parentheses group; they add no level to the tree.
                Ok(Node { at, ..inner })
            }
            _ => Err(err(
                at,
                format!("expected a number, a variable or '(', found {}", self.shown()),
            )),
        }
    }
}

fn literal(digits: &str, negative: bool) -> Option<i64> {
    let mut n: i64 = 0;
    for b in digits.bytes() {
        let d = i64::from(b - b'0');
        n = n.checked_mul(10)?;
        n = if negative {
            n.checked_sub(d)?
        } else {
            n.checked_add(d)?
        };
    }
    Some(n)
}

fn too_large(d: &str) -> String {
    let shown: String = d.chars().take(24).collect();
    let more = if d.len() > 24 { "..." } else { "" };
    format!("{shown}{more} is beyond a 64-bit integer")
}

// ---- printing ------------------------------------------------------------------------------

/// Binding strength when printing (higher binds tighter), to put parentheses where needed.
const P_IF: u8 = 0;
const P_OR: u8 = 1;
const P_AND: u8 = 2;
const P_NOT: u8 = 3;
const P_CMP: u8 = 4;
const P_SUM: u8 = 5;
const P_TERM: u8 = 6;
const P_UNARY: u8 = 7;
const P_ATOM: u8 = 8;

fn var_text<V: fmt::Display>(v: &V, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let s = v.to_string();
    if is_keyword(&s) {
        write!(f, "${{{s}}}")
    } else {
        f.write_str(&s)
    }
}

impl<V: fmt::Display> IntExpr<V> {
    fn prec(&self) -> u8 {
        match self {
            IntExpr::Lit(n) if *n < 0 => P_UNARY,
            IntExpr::Lit(_) | IntExpr::Var(_) | IntExpr::Abs(_) => P_ATOM,
            IntExpr::Op(IntOp::Min | IntOp::Max, ..) => P_ATOM,
            IntExpr::Neg(_) => P_UNARY,
            IntExpr::Op(IntOp::Add | IntOp::Sub, ..) => P_SUM,
            IntExpr::Op(..) => P_TERM,
            IntExpr::If(..) => P_IF,
        }
    }

    /// Prints `self` where a form binding at least `min` is needed.
    fn show(&self, min: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prec() < min {
            f.write_str("(")?;
            self.show(P_IF, f)?;
            return f.write_str(")");
        }
        match self {
            IntExpr::Lit(n) => write!(f, "{n}"),
            IntExpr::Var(v) => var_text(v, f),
            // A literal operand is parenthesised: `-5` would read back as the literal -5.
            IntExpr::Neg(a) => {
                f.write_str("-")?;
                match **a {
                    IntExpr::Lit(n) => write!(f, "({n})"),
                    _ => a.show(P_UNARY, f),
                }
            }
            IntExpr::Abs(a) => {
                f.write_str("abs(")?;
                a.show(P_IF, f)?;
                f.write_str(")")
            }
            IntExpr::Op(op @ (IntOp::Min | IntOp::Max), a, b) => {
                f.write_str(if *op == IntOp::Min { "min(" } else { "max(" })?;
                a.show(P_IF, f)?;
                f.write_str(", ")?;
                b.show(P_IF, f)?;
                f.write_str(")")
            }
            IntExpr::Op(op, a, b) => {
                let (p, s) = match op {
                    IntOp::Add => (P_SUM, " + "),
                    IntOp::Sub => (P_SUM, " - "),
                    IntOp::Mul => (P_TERM, " * "),
                    IntOp::Div => (P_TERM, " div "),
                    _ => (P_TERM, " rem "),
                };
                // Left-associative: the right operand of the same strength is parenthesised.
                a.show(p, f)?;
                f.write_str(s)?;
                b.show(p + 1, f)
            }
            IntExpr::If(c, a, b) => {
                f.write_str("if ")?;
                c.show(P_IF, f)?;
                f.write_str(" then ")?;
                a.show(P_IF, f)?;
                f.write_str(" else ")?;
                b.show(P_IF, f)
            }
        }
    }
}

impl<V: fmt::Display> BoolExpr<V> {
    fn prec(&self) -> u8 {
        match self {
            BoolExpr::Lit(_) => P_ATOM,
            BoolExpr::Cmp(..) => P_CMP,
            BoolExpr::Not(_) => P_NOT,
            BoolExpr::And(..) => P_AND,
            BoolExpr::Or(..) => P_OR,
            BoolExpr::If(..) => P_IF,
        }
    }

    fn show(&self, min: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prec() < min {
            f.write_str("(")?;
            self.show(P_IF, f)?;
            return f.write_str(")");
        }
        match self {
            BoolExpr::Lit(b) => write!(f, "{b}"),
            BoolExpr::Cmp(op, a, b) => {
                let s = match op {
                    CmpOp::Eq => " == ",
                    CmpOp::Ne => " != ",
                    CmpOp::Lt => " < ",
                    CmpOp::Le => " <= ",
                    CmpOp::Gt => " > ",
                    CmpOp::Ge => " >= ",
                };
                a.show(P_SUM, f)?;
                f.write_str(s)?;
                b.show(P_SUM, f)
            }
            BoolExpr::Not(a) => {
                f.write_str("not ")?;
                a.show(P_NOT, f)
            }
            BoolExpr::And(a, b) => {
                a.show(P_AND, f)?;
                f.write_str(" and ")?;
                b.show(P_NOT, f)
            }
            BoolExpr::Or(a, b) => {
                a.show(P_OR, f)?;
                f.write_str(" or ")?;
                b.show(P_AND, f)
            }
            BoolExpr::If(c, a, b) => {
                f.write_str("if ")?;
                c.show(P_IF, f)?;
                f.write_str(" then ")?;
                a.show(P_IF, f)?;
                f.write_str(" else ")?;
                b.show(P_IF, f)
            }
        }
    }
}

/// The expression as text that [`parse`] reads back to the same tree (up to a negated literal
/// `-(5)`, which reads back as itself, and parentheses).
impl<V: fmt::Display> fmt::Display for IntExpr<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.show(P_IF, f)
    }
}

impl<V: fmt::Display> fmt::Display for BoolExpr<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.show(P_IF, f)
    }
}

#[cfg(test)]
mod tests;
