use super::*;

/// Variables of the tests: their names and ids (`user_id` is 0, as in a workload).
const NAMES: &[&str] = &[
    "user_id", "session", "a", "b", "empty", "text", "big", "div",
];

fn resolve(name: &str) -> Result<VarId, String> {
    NAMES
        .iter()
        .position(|n| *n == name)
        .map(|i| i as VarId)
        .ok_or_else(|| format!("undefined variable '{name}'"))
}

fn compile(text: &str) -> Result<IntExpr<VarId>, ExprError> {
    parse(text, &mut resolve)
}

fn vars(user_id: i64, a: &str, b: &str) -> Vec<String> {
    vec![
        user_id.to_string(),
        "7".into(),
        a.into(),
        b.into(),
        String::new(),
        "12x".into(),
        "99999999999999999999".into(),
        "3".into(),
    ]
}

fn eval(text: &str, v: &[String]) -> Result<i64, EvalError> {
    compile(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .eval(v)
}

fn refused(text: &str) -> ExprError {
    match compile(text) {
        Ok(e) => panic!("{text:?} parsed as {e:?}"),
        Err(e) => e,
    }
}

#[test]
fn values_precedence_and_erlang_division() {
    let v = vars(200, "-7", "2");
    for (text, want) in [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("2 * 3 rem 4", 2),
        ("-3 * 2", -6),
        ("- (3) * 2", -6),
        ("--3", 3),
        ("7 div 2", 3),
        ("a div b", -3),
        ("a rem b", -1),
        ("7 rem -2", 1),
        ("abs(a) + 1", 8),
        ("min(a, b)", -7),
        ("max(a, b) * 10", 20),
        ("user_id", 200),
        ("${user_id} + ${session}", 207),
        ("${div} * 2", 6),
        ("if user_id > 128 then 256 else 32", 256),
        ("if a < 0 and b > 0 then 1 else 0", 1),
        ("if a < 0 and not b > 0 then 1 else 0", 0),
        ("if a > 0 or b == 2 then 1 else 0", 1),
        ("if true then 1 else 2", 1),
        ("if b != 2 then 1 else if b == 2 then 2 else 3", 2),
        ("1 + if b == 2 then 10 else 20", 11),
        ("if (if a < 0 then true else false) then 5 else 6", 5),
        ("-9223372036854775808", i64::MIN),
        ("9223372036854775807", i64::MAX),
        ("  1+2 ", 3),
    ] {
        assert_eq!(eval(text, &v), Ok(want), "{text}");
    }
}

#[test]
fn failures_at_run_time_are_errors_not_values() {
    let v = vars(1, "9223372036854775807", "0");
    for (text, want) in [
        ("a + 1", EvalError::Overflow),
        ("-a - 2", EvalError::Overflow),
        ("a * 2", EvalError::Overflow),
        ("abs(-9223372036854775808)", EvalError::Overflow),
        ("-(-9223372036854775808)", EvalError::Overflow),
        ("-9223372036854775808 div -1", EvalError::Overflow),
        ("1 div b", EvalError::DivisionByZero),
        ("1 rem b", EvalError::DivisionByZero),
        ("empty + 1", EvalError::NotInteger(4)),
        ("text", EvalError::NotInteger(5)),
        ("big", EvalError::NotInteger(6)),
    ] {
        assert_eq!(eval(text, &v), Err(want), "{text}");
    }
    // The smallest integer rem -1 is 0 (no overflow: the remainder exists).
    assert_eq!(eval("-9223372036854775808 rem -1", &v), Ok(0));
    // Only what decides the value is evaluated.
    assert_eq!(eval("if b != 0 then 1 div b else 0", &v), Ok(0));
    assert_eq!(eval("if b == 0 or 1 div b > 0 then 1 else 2", &v), Ok(1));
    assert_eq!(eval("if b != 0 and 1 div b > 0 then 1 else 2", &v), Ok(2));
    // A variable id past the session's variables is not an integer either.
    let short = vec!["1".to_string()];
    assert_eq!(eval("a", &short), Err(EvalError::NotInteger(2)));
    // Signs as Erlang's list_to_integer reads them; spaces are not digits.
    for (a, want) in [
        ("+5", Ok(5)),
        ("-5", Ok(-5)),
        (" 5", Err(EvalError::NotInteger(2))),
    ] {
        assert_eq!(eval("a", &vars(1, a, "0")), want, "{a:?}");
    }
}

#[test]
fn errors_say_what_and_where() {
    for (text, at, want) in [
        ("", 0, "expected an expression"),
        (
            "1 +",
            3,
            "expected a number, a variable or '(', found the end",
        ),
        ("(1 + 2", 6, "expected ')' to close '('"),
        ("1 2", 2, "expected an operator, found '2'"),
        ("a = 1", 2, "unexpected '=': compare with =="),
        ("a / 2", 2, "divide with div"),
        ("a && b", 2, "use and, or, not"),
        ("nope + 1", 0, "undefined variable 'nope'"),
        ("1 + ${nope}", 4, "undefined variable 'nope'"),
        ("${1a}", 0, "expected '${name}'"),
        ("foo(1)", 0, "'foo' is not a function"),
        (
            "1 + (2 < 3)",
            4,
            "'+' takes an integer, and this is a condition",
        ),
        ("if 1 then 2 else 3", 3, "'if' takes a condition"),
        ("if a > 1 then 2", 15, "expected 'else'"),
        (
            "if a > 1 then 2 else a > 3",
            21,
            "the branches of 'if' differ",
        ),
        ("a < b < 3", 6, "comparisons do not chain"),
        ("a < b", 0, "the expression is a condition"),
        ("not a", 4, "'not' takes a condition"),
        ("1 + rem", 4, "found the keyword 'rem'"),
        ("99999999999999999999", 0, "beyond a 64-bit integer"),
        ("-99999999999999999999", 0, "beyond a 64-bit integer"),
        ("5div 2", 1, "expected an operator after the number"),
        ("abs 3", 4, "expected '(' after 'abs'"),
        (
            "min(1)",
            5,
            "expected ',' between the two operands of 'min'",
        ),
        ("a + é", 4, "unexpected 'é'"),
    ] {
        let e = refused(text);
        assert_eq!(e.at, at, "{text:?}: {e}");
        assert!(e.message.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn bounds_hold_against_hostile_input() {
    // Length.
    let long = format!("1{}", " + 1".repeat(MAX_EXPR_BYTES / 4));
    assert!(long.len() > MAX_EXPR_BYTES);
    assert!(refused(&long).message.contains("at most 4096"));
    // A chain is as deep as it is long: 63 operators are 64 levels, 64 are too many.
    let chain = |n: usize| format!("1{}", " + 1".repeat(n));
    assert_eq!(eval(&chain(63), &vars(1, "0", "0")), Ok(64));
    assert!(refused(&chain(64)).message.contains("deeper than 64"));
    // Nesting, of every kind that recurses, at the bound and past it: refused, never a stack
    // overflow, whatever the length up to the byte limit.
    assert_eq!(
        eval(
            &format!("{}1{}", "(".repeat(64), ")".repeat(64)),
            &vars(1, "0", "0")
        ),
        Ok(1)
    );
    for hostile in [
        "(".repeat(MAX_EXPR_BYTES),
        "-".repeat(MAX_EXPR_BYTES - 1) + "a",
        "abs(".repeat(MAX_EXPR_BYTES / 4),
        "not ".repeat(MAX_EXPR_BYTES / 4 - 2) + "a<1",
        "if true then ".repeat(MAX_EXPR_BYTES / 13),
        format!("{}1{}", "(".repeat(65), ")".repeat(65)),
        "min(1,".repeat(MAX_EXPR_BYTES / 6),
    ] {
        let e = refused(&hostile);
        assert!(
            e.message.contains("deeper than 64") || e.message.contains("nests deeper"),
            "{}...: {e}",
            &hostile[..20]
        );
    }
    // Bytes that are not an expression at all.
    for junk in [
        "\0",
        "\u{feff}1",
        "${",
        "${}",
        "${a",
        "1e9",
        "0x10",
        "1_000",
        "'1'",
        "\"1\"",
    ] {
        refused(junk);
    }
}

/// A small deterministic generator of token soup: whatever it makes either is refused or
/// parses to a tree that prints back to itself and evaluates without panicking.
#[test]
fn token_soup_never_panics_and_round_trips() {
    const TOKENS: &[&str] = &[
        "1",
        "0",
        "-",
        "+",
        "*",
        " div ",
        " rem ",
        "(",
        ")",
        "a",
        "b",
        "user_id",
        " if ",
        " then ",
        " else ",
        " and ",
        " or ",
        " not ",
        "<",
        "==",
        ">=",
        "abs(",
        "min(",
        ",",
        "true",
        "9223372036854775807",
        "${div}",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut parsed = 0;
    for _ in 0..20_000 {
        let n = 1 + next() % 12;
        let text: String = (0..n)
            .map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize])
            .collect();
        let Ok(e) = compile(&text) else { continue };
        parsed += 1;
        let named = e
            .clone()
            .map_vars(&mut |v| Ok::<_, ()>(NAMES[v as usize]))
            .unwrap();
        let printed = named.to_string();
        let back = compile(&printed).unwrap_or_else(|err| panic!("{text} -> {printed}: {err}"));
        assert_eq!(back, e, "{text} -> {printed}");
        for v in [vars(3, "0", "-1"), vars(-5, "9223372036854775807", "0")] {
            let _ = e.eval(&v);
        }
    }
    assert!(
        parsed > 500,
        "only {parsed} parsed: the generator is too weak"
    );
}

#[test]
fn printing_parenthesises_only_what_it_must() {
    for (text, want) in [
        ("(1 + 2) * 3", "(1 + 2) * 3"),
        ("1 + (2 * 3)", "1 + 2 * 3"),
        ("1 - (2 - 3)", "1 - (2 - 3)"),
        ("(1 - 2) - 3", "1 - 2 - 3"),
        ("-(5)", "-(5)"),
        ("- -5", "-(-5)"),
        (
            "1 + (if a > 0 then 1 else 2)",
            "1 + (if a > 0 then 1 else 2)",
        ),
        ("if a > 0 then 1 else 2 + 3", "if a > 0 then 1 else 2 + 3"),
        (
            "if (a > 0 or b > 0) and a < 9 then 1 else 0",
            "if (a > 0 or b > 0) and a < 9 then 1 else 0",
        ),
        ("${div} + ${a}", "${div} + a"),
        ("abs(a - 9) rem 32 + 1", "abs(a - 9) rem 32 + 1"),
    ] {
        let e = compile(text).unwrap();
        let named = e
            .clone()
            .map_vars(&mut |v| Ok::<_, ()>(NAMES[v as usize]))
            .unwrap();
        assert_eq!(named.to_string(), want, "{text}");
        assert_eq!(compile(want).unwrap(), e, "{want}");
    }
}
