use super::*;

/// The dynamic variables the tests' sessions have set (Tsung's `tsung_userid` besides).
const SET: &[&str] = &["page", "n", "count"];

fn var(name: &str) -> Result<String, String> {
    if name == "tsung_userid" || SET.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(format!(
            "dynamic variable '{name}' is not set before this <setdynvars>"
        ))
    }
}

fn tr(code: &str) -> R<String> {
    translate(code, &mut var)
}

/// The value of the translation of `code` with the variables `vars` (name, text).
fn run(code: &str, vars: &[(&str, &str)]) -> Result<i64, headroom_core::expr::EvalError> {
    let text = tr(code).unwrap_or_else(|r| panic!("{code}\nrefused at {}: {}", r.at, r.message));
    let names: Vec<&str> = vars.iter().map(|v| v.0).collect();
    let e = headroom_core::expr::parse(&text, &mut |n: &str| {
        names
            .iter()
            .position(|x| *x == n)
            .map(|i| i as u16)
            .ok_or(format!("{n} not given"))
    })
    .unwrap_or_else(|e| panic!("{text}: {e}"));
    let values: Vec<String> = vars.iter().map(|v| v.1.to_string()).collect();
    e.eval(&values)
}

fn refused(code: &str) -> Refusal {
    match tr(code) {
        Ok(t) => panic!("{code}\ntranslated to {t}"),
        Err(r) => r,
    }
}

/// fs-nfs.xml's own fun (its `&lt;` decoded), as Debian ships it.
const FS_NFS: &str = "fun({Pid,DynVars})->
                                    {ok,Val} = ts_dynvars:lookup(tsung_userid,DynVars),
                                    {Id,Mod} = case list_to_integer(Val) of
                                       I when I > 128 -> {I,256};
                                       I when I > 64  -> {I,128};
                                       I when I > 32  -> {I,64};
                                       I              -> {I,32}
                                    end,
                                    case Id < 9 of
                                     true -> (abs(Id+8) rem Mod) +1;
                                     _ ->
                                             (abs(Id-9) rem Mod) +1
                                    end
                                  end.";

/// What the fun computes, in Rust: Erlang's rem is Rust's %.
fn fs_nfs_previd(id: i64) -> i64 {
    let m = if id > 128 {
        256
    } else if id > 64 {
        128
    } else if id > 32 {
        64
    } else {
        32
    };
    if id < 9 {
        (id + 8).abs() % m + 1
    } else {
        (id - 9).abs() % m + 1
    }
}

#[test]
fn fs_nfs_computes_what_the_erlang_computes() {
    let text = tr(FS_NFS).unwrap_or_else(|r| panic!("refused at {}: {}", r.at, r.message));
    // The case giving {Id, Mod} became a choice of Mod only: Id is the number in every clause.
    assert_eq!(
        text,
        "if tsung_userid < 9 then abs(tsung_userid + 8) rem (if tsung_userid > 128 then 256 else if tsung_userid > 64 then 128 else if tsung_userid > 32 then 64 else 32) + 1 \
         else abs(tsung_userid - 9) rem (if tsung_userid > 128 then 256 else if tsung_userid > 64 then 128 else if tsung_userid > 32 then 64 else 32) + 1"
    );
    for id in -3..=600 {
        let s = id.to_string();
        assert_eq!(
            run(FS_NFS, &[("tsung_userid", &s)]),
            Ok(fs_nfs_previd(id)),
            "user {id}"
        );
    }
    // A number that is not one fails, as list_to_integer does.
    assert!(run(FS_NFS, &[("tsung_userid", "")]).is_err());
}

#[test]
fn the_subset_translates_and_computes_as_erlang() {
    // (the code, its variables' values, what it gives)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], i64);
    let cases: &[Case] = &[
        // if, with ; and , in guards.
        (
            "fun({_, DynVars}) -> {ok, V} = ts_dynvars:lookup(page, DynVars), N = list_to_integer(V),
               if N > 10, N < 20; N == 0 -> N - 10; true -> N + 1 end end.",
            &[("page", "15")],
            5,
        ),
        ("fun({_, D}) -> {ok, V} = ts_dynvars:lookup(page, D), N = list_to_integer(V), if N > 10, N < 20; N == 0 -> N - 10; true -> N + 1 end end", &[("page", "0")], -10),
        ("fun({_, D}) -> {ok, V} = ts_dynvars:lookup(page, D), N = list_to_integer(V), if N > 10, N < 20; N == 0 -> N - 10; true -> N + 1 end end", &[("page", "30")], 31),
        // Integer patterns, a catch-all, integer_to_list of the result.
        (
            "fun({_Pid, D}) -> {ok, V} = ts_dynvars:lookup(n, D),
               integer_to_list(case list_to_integer(V) rem 3 of 0 -> 10; 1 -> 20; _ -> 30 end) end.",
            &[("n", "7")],
            20,
        ),
        // A boolean case covered by true and false.
        (
            "fun({_, D}) -> {ok, V} = ts_dynvars:lookup(n, D), case list_to_integer(V) > 5 of true -> 1; false -> 0 end end.",
            &[("n", "5")],
            0,
        ),
        // erlang: BIFs, andalso, orelse, not, =<, /=, =:=, comments, begin ... end.
        (
            "fun({_, D}) -> % the page
               {ok, P} = ts_dynvars:lookup(page, D), {ok, C} = ts_dynvars:lookup(count, D),
               X = erlang:max(list_to_integer(P), erlang:min(list_to_integer(C), 7)),
               Y = begin Z = erlang:abs(X - 100), Z div 3 end,
               case not (X =< 0) andalso (Y /= 1 orelse X =:= 2) of true -> Y * 2 - -1; _ -> 0 end end.",
            &[("page", "4"), ("count", "9")],
            (100 - 7) / 3 * 2 + 1,
        ),
        // Tsung 1.7's tsung_userid is an integer: arithmetic on it directly.
        (
            "fun({_, D}) -> {ok, Id} = ts_dynvars:lookup(tsung_userid, D), Id * 2 + 1 end.",
            &[("tsung_userid", "21")],
            43,
        ),
        // A tuple matched from a tuple, a variable pattern bound before (an equality).
        (
            "fun({_, D}) -> {ok, V} = ts_dynvars:lookup(n, D), N = list_to_integer(V), {A, B} = {N + 1, N - 1},
               case A - 2 of B -> A * B; _ -> 0 end end.",
            &[("n", "6")],
            35,
        ),
        // The argument as one variable, matched later; a fun that reads nothing.
        (
            "fun(Arg) -> {_, D} = Arg, {ok, V} = ts_dynvars:lookup(n, D), list_to_integer(V) + 1 end.",
            &[("n", "1")],
            2,
        ),
        ("fun(_) -> 7 * 6 end.", &[], 42),
        // Negative literals, rem and div of negatives (truncation, as Erlang).
        (
            "fun({_, D}) -> {ok, V} = ts_dynvars:lookup(n, D), N = list_to_integer(V), (N div -4) * 100 + N rem -4 end.",
            &[("n", "-7")],
            100 - 3,
        ),
    ];
    for (code, vars, want) in cases {
        assert_eq!(run(code, vars), Ok(*want), "{code} with {vars:?}");
    }
}

#[test]
fn what_it_cannot_translate_is_refused_at_the_construct() {
    let head = "fun({_, D}) -> {ok, V} = ts_dynvars:lookup(n, D), N = list_to_integer(V), ";
    let cases: &[(String, &str, &str)] = &[
        (
            format!("{head}lists:nth(1, [N]) end."),
            "[N]",
            "a list ([...])",
        ),
        (
            format!("{head}erlang:system_time() end."),
            "erlang:system_time",
            "a call to erlang:system_time/0",
        ),
        (format!("{head}now() end."), "now()", "a call to now/0"),
        (
            format!("{head}N / 2 end."),
            "/ 2",
            "'/' (division to a float; integer division is div)",
        ),
        (format!("{head}N * 1.5 end."), "1.5", "a float"),
        (format!("{head}\"abc\" end."), "\"abc\"", "a string"),
        (
            format!("{head}receive X -> X end end."),
            "receive",
            "receive",
        ),
        (
            format!("{head}N band 1 end."),
            "band",
            "the operator 'band'",
        ),
        (
            format!("{head}case N of 1 -> 2 end end."),
            "case",
            "this case may match no clause",
        ),
        (
            format!("{head}if N > 1 -> 2 end end."),
            "if N",
            "this if may match no clause",
        ),
        (
            format!("{head}case N of 1 -> 2; _ -> true end end."),
            "case",
            "the clauses give an integer and a boolean",
        ),
        (
            format!("{head}{{N, N}} end."),
            "{N, N}",
            "the fun returns a tuple",
        ),
        (
            format!("{head}N = 3 end."),
            "N = 3",
            "a match that may fail",
        ),
        (
            format!("{head}M + 1 end."),
            "M + 1",
            "variable 'M' is not bound here",
        ),
        (
            format!("{head}V + 1 end."),
            "V + 1",
            "'+' of a variable's text",
        ),
        (
            format!("{head}N ! hello end."),
            "! hello",
            "a message send (!)",
        ),
        (
            format!("{head}N + 1; ({{_, _}}) -> 0 end."),
            "; ({",
            "a fun of several clauses",
        ),
        (
            format!("{head}#{{a => N}} end."),
            "#{",
            "a record or map (#)",
        ),
        (
            format!("{head}N =< 2 andalso N <= 1 end."),
            "<= 1",
            "'<=' (Erlang writes less-or-equal as =<)",
        ),
        (
            "fun({_, D}) -> {ok, V} = ts_dynvars:lookup(other, D), list_to_integer(V) end.".into(),
            "other",
            "dynamic variable 'other' is not set before this <setdynvars>",
        ),
        (
            "fun(1) -> 1 end.".into(),
            "(1)",
            "the fun's argument: expected {Pid, DynVars}",
        ),
        (
            "1 + 2".into(),
            "1 + 2",
            "expected 'fun({Pid, DynVars}) -> ... end'",
        ),
        (
            "fun({_, D}) -> 1 end. 2".into(),
            "2",
            "expected the end of the code after the fun",
        ),
        ("fun({_, D}) -> $a end.".into(), "$a", "a character literal"),
    ];
    for (code, at, want) in cases {
        let r = refused(code);
        let where_ = code
            .find(at)
            .unwrap_or_else(|| panic!("{at:?} not in {code}"));
        assert!(
            r.message.contains(want),
            "{code}\nwant {want:?}, got {:?}",
            r.message
        );
        assert_eq!(r.at, where_, "{code}: {}", r.message);
    }
}

#[test]
fn bounds_hold_against_hostile_code() {
    let head = "fun({_, D}) -> {ok, V} = ts_dynvars:lookup(n, D), N = list_to_integer(V), ";
    // Length.
    let long = format!("{head}{} end.", "N + ".repeat(MAX_CODE_BYTES / 4) + "N");
    assert!(refused(&long)
        .message
        .contains("headroom translates at most 16384"));
    // Nesting: parentheses, and a chain of operators (its syntax tree is as deep as it is long).
    for code in [
        format!("{head}{}N{} end.", "(".repeat(200), ")".repeat(200)),
        format!("{head}{}N end.", "N + ".repeat(100)),
        format!("{head}{}N{} end.", "abs(".repeat(100), ")".repeat(100)),
        format!("{head}{}N{} end.", "{".repeat(100), "}".repeat(100)),
        format!("{head}{} end.", "- ".repeat(200) + "N"),
        format!("fun({{_, D}}) -> {}", "(".repeat(MAX_CODE_BYTES - 20)),
    ] {
        let r = refused(&code);
        assert!(
            r.message.contains("nests deeper than 64"),
            "{}...: {}",
            &code[..code.len().min(90)],
            r.message
        );
    }
    // Doubling through variables: a few lines that would expand without end.
    let mut code = head.to_string();
    let mut prev = "N".to_string();
    for i in 0..40 {
        code += &format!("A{i} = {prev} + {prev}, ");
        prev = format!("A{i}");
    }
    code += &format!("{prev} end.");
    let r = refused(&code);
    assert!(
        r.message.contains("operations") || r.message.contains("deeper than 64"),
        "{}",
        r.message
    );
    // Many clauses of a case each holding a copy of a large value: bounded work.
    let big = format!("A = {}N, ", "N + ".repeat(60));
    let clauses: String = (0..500).map(|i| format!("{i} -> A; ")).collect();
    let code = format!("{head}{big}case N of {clauses}_ -> A end end.");
    let r = refused(&code);
    assert!(r.message.contains("operations"), "{}", r.message);
    // Whatever the tokens, it returns (a refusal or a translation), never panics.
    const TOKENS: &[&str] = &[
        "fun",
        "(",
        ")",
        "{",
        "}",
        "_",
        "D",
        "N",
        "V",
        "->",
        "end",
        ".",
        ",",
        ";",
        "case",
        "of",
        "if",
        "when",
        "true",
        "false",
        "1",
        "-",
        "+",
        "*",
        "div",
        "rem",
        "<",
        "=<",
        "==",
        "=",
        "ok",
        "ts_dynvars",
        ":",
        "lookup",
        "n",
        "list_to_integer",
        "abs",
        "andalso",
        "not",
        "$",
        "\"",
        "'",
        "%",
        "[",
        "#",
        "begin",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let n = next() % 30;
        let mut code = String::from(
            "fun({_, D}) -> {ok, V} = ts_dynvars:lookup(n, D), N = list_to_integer(V), ",
        );
        for _ in 0..n {
            code += TOKENS[(next() % TOKENS.len() as u64) as usize];
            code.push(' ');
        }
        if let Ok(text) = tr(&code) {
            headroom_core::expr::parse(&text, &mut |_: &str| Ok::<(), String>(()))
                .unwrap_or_else(|e| panic!("{code} -> {text}: {e}"));
        }
    }
}
