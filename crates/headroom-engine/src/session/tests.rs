//! The step language, run without sockets: each test drives `advance` by hand, playing the
//! worker's part (feeding replies) where a step needs one.

use super::*;
use rand::SeedableRng;

fn program(yaml: &str) -> Program {
    let s = headroom_scenario::parse_str(yaml, "t.yaml").expect("valid scenario");
    let c = headroom_scenario::compile(&s, std::path::Path::new(".")).expect("compiles");
    Program::new(Arc::new(c.workload), "example.test", true).expect("program")
}

struct Harness {
    prog: Program,
    st: SessionState,
    rng: SmallRng,
    rec: Recorder,
    cursors: Vec<usize>,
    now: Instant,
    browser: Option<Box<Browser>>,
}

impl Harness {
    fn new(yaml: &str) -> Harness {
        let prog = program(yaml);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut st = SessionState::new(&prog, 42);
        st.begin(&prog, 0, &mut rng, Instant::now());
        let mut rec = Recorder::new();
        rec.ensure_names(prog.names(), prog.matches());
        let cursors = vec![0; prog.w.feeders.len()];
        Harness {
            prog,
            st,
            rng,
            rec,
            cursors,
            now: Instant::now(),
            browser: None,
        }
    }

    fn step(&mut self) -> Action {
        let mut env = Env {
            rng: &mut self.rng,
            rec: &mut self.rec,
            cursors: &mut self.cursors,
            cursor_step: 1,
            requests_left: None,
            now: self.now,
            link: None,
            browser: &mut self.browser,
            browser_cfg: None,
            join: true,
            join_spare: &mut Vec::new(),
        };
        self.st.advance(&self.prog, &mut env)
    }

    /// The request line of the batch just produced.
    fn request_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.st.out).to_string();
        text.lines().next().unwrap_or_default().to_string()
    }

    /// Play a reply to the batch (what the worker does on a complete response).
    fn reply(&mut self, status: u16, headers: &str, body: &str) {
        self.st.last_status = status;
        self.st.reply.clear();
        if self.st.capture {
            let raw = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n{headers}\r\n{body}",
                body.len()
            );
            self.st.reply.extend_from_slice(raw.as_bytes());
        }
    }
}

#[test]
fn a_counted_loop_sends_its_request_count_times() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{loop: {count: 3, steps: [{request: GET /a}]}}, {request: GET /b}]}]\n",
    );
    let mut lines = Vec::new();
    loop {
        match h.step() {
            Action::Send => {
                lines.push(h.request_line());
                h.reply(200, "", "");
            }
            Action::Done { aborted } => {
                assert!(!aborted);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        lines,
        [
            "GET /a HTTP/1.1",
            "GET /a HTTP/1.1",
            "GET /a HTTP/1.1",
            "GET /b HTTP/1.1"
        ]
    );
}

#[test]
fn variables_flow_from_set_and_extract_into_requests() {
    let mut h = Harness::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - set: {var: who, value: "ann-${user_id}"}
  - request: {name: login, method: POST, path: /login, body: '{"u": "${who}"}'}
  - extract: {var: tok, json: /token}
  - extract: {var: loc, header: Location}
  - extract: {var: id, regex: 'id=(\d+)'}
  - request: {name: next, path: "/x/${tok}/${id}${loc}", headers: {X-S: "${session}"}}
"#,
    );
    assert_eq!(h.step(), Action::Send);
    let first = String::from_utf8_lossy(&h.st.out).to_string();
    assert!(first.starts_with("POST /login HTTP/1.1\r\n"), "{first}");
    assert!(first.ends_with("\r\n\r\n{\"u\": \"ann-42\"}"), "{first}");
    assert!(first.contains("Content-Length: 15\r\n"), "{first}");
    assert!(h.st.capture, "extracts follow: the reply is kept");
    h.reply(
        200,
        "Location: /here\r\n",
        "{\"token\": \"T0K\", \"note\": \"id=981\"}",
    );
    assert_eq!(h.step(), Action::Send);
    let second = String::from_utf8_lossy(&h.st.out).to_string();
    assert!(
        second.starts_with("GET /x/T0K/981/here HTTP/1.1\r\n"),
        "{second}"
    );
    assert!(second.contains("X-S: s\r\n"), "{second}");
}

#[test]
fn extract_defaults_apply_when_nothing_matches() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{request: GET /}, {extract: {var: t, regex: 'nope=(\\w+)', default: none}}, {request: \"GET /${t}\"}]}]\n",
    );
    assert_eq!(h.step(), Action::Send);
    h.reply(200, "", "nothing here");
    assert_eq!(h.step(), Action::Send);
    assert_eq!(h.request_line(), "GET /none HTTP/1.1");
}

#[test]
fn match_abort_ends_the_session_and_is_counted() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{request: GET /}, {match: {status: 500, do: abort, name: boom}}, {request: GET /never}]}]\n",
    );
    assert_eq!(h.step(), Action::Send);
    h.reply(500, "", "");
    assert_eq!(h.step(), Action::Done { aborted: true });
    assert_eq!(h.rec.matches, vec![1]);
}

#[test]
fn match_nomatch_continues_and_counts_only_firings() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{request: GET /}, {match: {body: welcome, when: nomatch, do: abort}}, {request: GET /ok}]}]\n",
    );
    assert_eq!(h.step(), Action::Send);
    h.reply(200, "", "<h1>welcome</h1>");
    assert_eq!(h.step(), Action::Send, "the body matched: no firing");
    assert_eq!(h.request_line(), "GET /ok HTTP/1.1");
    assert_eq!(h.rec.matches, vec![0]);
}

#[test]
fn match_loop_repeats_the_request_up_to_max_loops() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{request: GET /poll}, {match: {status: 202, do: loop, max_loops: 2}}, {request: GET /done}]}]\n",
    );
    let mut lines = Vec::new();
    for _ in 0..4 {
        assert_eq!(h.step(), Action::Send);
        lines.push(h.request_line());
        h.reply(202, "", "");
    }
    assert_eq!(
        lines,
        [
            "GET /poll HTTP/1.1",
            "GET /poll HTTP/1.1",
            "GET /poll HTTP/1.1",
            "GET /done HTTP/1.1"
        ]
    );
    assert_eq!(h.rec.matches, vec![3], "fired three times, looped twice");
}

#[test]
fn while_loops_stop_when_the_variable_turns_false() {
    let mut h = Harness::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - set: {var: more, value: '1'}
  - loop:
      while: more
      count: 10
      steps:
      - request: GET /page
      - extract: {var: more, header: X-More, default: '0'}
"#,
    );
    let mut n = 0;
    loop {
        match h.step() {
            Action::Send => {
                n += 1;
                let more = if n < 3 { "X-More: yes\r\n" } else { "" };
                h.reply(200, more, "");
            }
            Action::Done { .. } => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(n, 3);
}

#[test]
fn transactions_are_timed_and_failures_mark_them() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{transaction: {name: tx, steps: [{request: GET /a}, {request: GET /b}]}}, {transaction: {name: tx2, steps: [{request: GET /c}]}}]}]\n",
    );
    let tx = h.prog.w.names.iter().position(|n| n.name == "tx").unwrap();
    let tx2 = h.prog.w.names.iter().position(|n| n.name == "tx2").unwrap();
    assert_eq!(h.step(), Action::Send);
    h.now += Duration::from_millis(30);
    assert_eq!(h.step(), Action::Send);
    h.now += Duration::from_millis(20);
    assert_eq!(h.step(), Action::Send, "/c");
    let t = &h.rec.names[tx];
    assert_eq!((t.count, t.errors), (1, 0));
    let ms = t.latency.max() / 1000;
    assert!((49..=51).contains(&ms), "tx took {ms} ms");
    // /c fails: the session ends aborted and tx2 counts an error, no latency.
    h.st.on_failure();
    assert_eq!(h.step(), Action::Done { aborted: true });
    assert_eq!((h.rec.names[tx2].count, h.rec.names[tx2].errors), (0, 1));
}

#[test]
fn think_times_and_connect_close_reach_the_worker() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [connect, {think: 2s}, {think: 0s}, {request: GET /}, close]}]\n",
    );
    assert_eq!(h.step(), Action::Connect);
    assert_eq!(h.step(), Action::Think(Duration::from_secs(2)));
    assert_eq!(h.step(), Action::Send, "a zero think is skipped");
    assert_eq!(h.step(), Action::Close);
    assert_eq!(h.step(), Action::Done { aborted: false });
}

#[test]
fn an_endless_loop_without_io_yields() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{set: {var: x, value: '1'}}, {loop: {while: x, steps: [{set: {var: y, value: '2'}}]}}, {request: GET /}]}]\n",
    );
    assert_eq!(h.step(), Action::Yield);
    assert_eq!(h.step(), Action::Yield);
}

#[test]
fn sequences_count_per_user_and_csv_rows_go_round() {
    let dir = std::env::temp_dir().join(format!("headroom-seq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("u.csv"), "ann,1\nbob,2\n").unwrap();
    let s = headroom_scenario::parse_str(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{loop: {count: 3, steps: [{set: {var: n, sequence: {start: 5, step: 10}}}, {set: {var: u, csv: {file: u.csv, column: 0}}}, {request: \"GET /${u}/${n}\"}]}}]}]\n",
        "t.yaml",
    )
    .unwrap();
    let c = headroom_scenario::compile(&s, &dir).unwrap();
    let prog = Program::new(Arc::new(c.workload), "h", true).unwrap();
    let lines = request_lines(&prog, 0, 1, 3);
    assert_eq!(
        lines,
        [
            "GET /ann/5 HTTP/1.1",
            "GET /bob/15 HTTP/1.1",
            "GET /ann/25 HTTP/1.1"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 32: two columns of one row into two variables (`order: same_row`, what a Tsung
/// `<setdynvars sourcetype="file">` of two `<var>`s reads), and the workers' rows in turn: worker
/// 1 of 2 reads rows 1, 3, 5, ... (0-based), so no two workers hand out the same account.
#[test]
fn same_row_columns_stay_together_and_workers_take_rows_in_turn() {
    let dir = std::env::temp_dir().join(format!("headroom-same-row-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("u.csv"),
        "ann,a1\nbob,b2\ncid,c3\ndan,d4\neve,e5\n",
    )
    .unwrap();
    let s = headroom_scenario::parse_str(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: s, steps: [{loop: {count: 3, steps: [{set: {var: u, csv: {file: u.csv, column: 0}}}, {set: {var: p, csv: {file: u.csv, column: 1, order: same_row}}}, {request: \"GET /${u}/${p}\"}]}}]}]\n",
        "t.yaml",
    )
    .unwrap();
    let c = headroom_scenario::compile(&s, &dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let prog = Program::new(Arc::new(c.workload), "h", true).unwrap();
    // Worker slot 1 of 2.
    let lines = request_lines(&prog, 1, 2, 3);
    // Rows 1, 3, then 5 mod 5 = 0: each name with its own password.
    assert_eq!(
        lines,
        [
            "GET /bob/b2 HTTP/1.1",
            "GET /dan/d4 HTTP/1.1",
            "GET /ann/a1 HTTP/1.1"
        ]
    );
}

#[test]
fn a_surge_session_pipelines_embedded_objects_and_thinks_between_pages() {
    let mut h = Harness::new(
        "load: {users: [{count: 1}]}\n\
         sessions: [{name: web, surge: {files: 100, pipeline: 3, requests_per_session: 20}}]\n",
    );
    let (mut requests, mut pages, mut thinks, mut max_batch) = (0, 0, 0, 0);
    loop {
        match h.step() {
            Action::Send => {
                let n = h.st.names.len();
                let text = String::from_utf8_lossy(&h.st.out).to_string();
                assert_eq!(text.matches(" HTTP/1.1\r\n").count(), n);
                assert!(text.starts_with("GET /file/"), "{text}");
                if n == 1 && h.st.names[0] == 0 {
                    pages += 1;
                }
                max_batch = max_batch.max(n);
                requests += n;
            }
            Action::Think(d) => {
                assert!(d > Duration::ZERO);
                thinks += 1;
            }
            Action::Done { aborted } => {
                assert!(!aborted);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(pages >= 1 && requests >= pages);
    assert!(
        max_batch <= 3,
        "pipeline depth 3, saw a batch of {max_batch}"
    );
    assert!(
        thinks < pages,
        "an OFF time between pages, none after the last"
    );
}

#[test]
fn basic_auth_is_written_and_digest_credentials_are_kept_for_the_agent() {
    let mut h = Harness::new(
        r#"
servers: [{host: 127.0.0.1, port: 80}]
load: {users: [{count: 1}]}
sessions:
  - name: s
    steps:
      - set: {var: who, value: alice}
      - request: {path: /a, auth: {user: "${who}", password: "pw"}}
      - request: {path: /b, auth: {user: bob, password: "s3cret", scheme: digest}}
"#,
    );
    assert_eq!(h.step(), Action::Send);
    let text = String::from_utf8_lossy(&h.st.out).to_string();
    // base64("alice:pw")
    assert!(
        text.contains("Authorization: Basic YWxpY2U6cHc=\r\n"),
        "{text}"
    );
    assert!(!h.st.digest);
    assert_eq!(h.step(), Action::Send);
    let text = String::from_utf8_lossy(&h.st.out).to_string();
    assert!(!text.contains("Authorization"), "{text}");
    assert!(h.st.digest);
    assert_eq!(
        (h.st.auth_user.as_str(), h.st.auth_password.as_str()),
        ("bob", "s3cret")
    );
}

#[test]
fn cookie_steps_fill_and_empty_the_jar() {
    let mut h = Harness::new(
        r#"
servers: [{host: 127.0.0.1, port: 80}]
load: {users: [{count: 1}]}
sessions:
  - name: s
    steps:
      - cookie: {set: {name: sid, value: "u${user_id}"}}
      - cookie: {set: {name: scoped, value: "1", path: /admin}}
      - request: GET /
      - cookie: clear
      - request: GET /
"#,
    );
    assert_eq!(h.step(), Action::Send);
    let a = h.browser.as_ref().expect("a cookie step makes the browser");
    let names: Vec<String> = a
        .jar
        .iter()
        .map(|c| {
            format!(
                "{}={}@{}",
                String::from_utf8_lossy(c.name()),
                String::from_utf8_lossy(c.value()),
                String::from_utf8_lossy(c.path())
            )
        })
        .collect();
    assert_eq!(names, ["scoped=1@/admin", "sid=u42@/"]);
    assert_eq!(h.step(), Action::Send);
    assert!(h.browser.as_ref().unwrap().jar.is_empty());
}

/// The request lines of one user's first `n` sends, its feeder cursor starting at `cursor` and
/// moving by `step` (a worker's slot and the number of workers).
fn request_lines(prog: &Program, cursor: usize, step: usize, n: usize) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut st = SessionState::new(prog, 1);
    st.begin(prog, 0, &mut rng, Instant::now());
    let mut rec = Recorder::new();
    let mut cursors = vec![cursor; 1];
    let mut agent = None;
    let mut lines = Vec::new();
    for _ in 0..n {
        let mut env = Env {
            rng: &mut rng,
            rec: &mut rec,
            cursors: &mut cursors,
            cursor_step: step,
            requests_left: None,
            now: Instant::now(),
            link: None,
            browser: &mut agent,
            browser_cfg: None,
            join: true,
            join_spare: &mut Vec::new(),
        };
        assert_eq!(st.advance(prog, &mut env), Action::Send);
        let out = String::from_utf8_lossy(&st.out);
        lines.push(out.lines().next().unwrap().to_string());
    }
    lines
}

/// `set: {expr}` computes from the user's id and other variables (a variable may read itself),
/// and the request sends what it computed.
#[test]
fn set_expressions_compute_from_variables_and_the_user_id() {
    let mut h = Harness::new(
        "servers: [{host: 127.0.0.1, port: 80}]\n\
         load: {users: [{count: 1}]}\n\
         sessions:\n\
         - name: s\n\
         \x20 steps:\n\
         \x20   - set: {var: n, value: \"7\"}\n\
         \x20   - set: {var: m, expr: \"if user_id > 32 then abs(user_id - 9) rem 64 + 1 else 0\"}\n\
         \x20   - set: {var: n, expr: \"n * 2 + m\"}\n\
         \x20   - request: GET /${m}/${n}\n",
    );
    // User 42: m = 33 rem 64 + 1 = 34, n = 7 * 2 + 34 = 48.
    assert_eq!(h.step(), Action::Send);
    assert_eq!(h.request_line(), "GET /34/48 HTTP/1.1");
    let c = &h.rec.counters;
    assert_eq!(c.proto[ProtoCounter::ExprEvaluated.index()], 2);
}

/// An expression that cannot be computed ends the session, counted by why; nothing is sent.
#[test]
fn a_failed_set_expression_ends_the_session_and_says_why() {
    for (expr, counter) in [
        ("x + 1", ProtoCounter::ExprNotInteger),
        ("unset + 1", ProtoCounter::ExprNotInteger),
        ("1 div (user_id - 42)", ProtoCounter::ExprDivisionByZero),
        ("user_id rem 0", ProtoCounter::ExprDivisionByZero),
        ("user_id * 9223372036854775807", ProtoCounter::ExprOverflow),
    ] {
        let mut h = Harness::new(&format!(
            "servers: [{{host: 127.0.0.1, port: 80}}]\n\
             load: {{users: [{{count: 1}}]}}\n\
             sessions:\n\
             - name: s\n\
             \x20 steps:\n\
             \x20   - set: {{var: x, value: \"4x\"}}\n\
             \x20   - extract: {{var: unset, regex: \"nothing (here)\"}}\n\
             \x20   - set: {{var: y, expr: \"{expr}\"}}\n\
             \x20   - request: GET /${{y}}\n"
        ));
        assert_eq!(h.step(), Action::Done { aborted: true }, "{expr}");
        let c = &h.rec.counters;
        assert_eq!(c.proto[counter.index()], 1, "{expr}");
        assert_eq!(c.proto[ProtoCounter::ExprEvaluated.index()], 1, "{expr}");
        assert!(h.st.out.is_empty(), "{expr}: something was sent");
    }
}

/// Publishes wait for nothing, so consecutive ones (through loops and transactions) join one
/// batch, written in one send; a step that waits ends the batch as its last request. The batch
/// is bounded (`JOIN_REQUESTS`), never takes more than the user's requests left, and at a rate
/// (`join: false`) every publish goes alone. A transaction that ended inside the batch ends
/// when the batch is written.
#[test]
fn publishes_join_one_batch_until_a_step_waits() {
    let yaml = "servers: [{host: 127.0.0.1, port: 5672, protocol: amqp}]\n\
         amqp: {user: u, password: p, vhost: /}\n\
         load: {users: [{count: 1}]}\n\
         sessions:\n\
         - name: s\n\
         \x20 steps:\n\
         \x20   - loop: {count: 3, steps: [{transaction: {name: pub, steps: [\n\
         \x20       {amqp: {publish: ex, routing_key: q, size: 10}},\n\
         \x20       {amqp: {publish: ex, routing_key: q, text: hello}}]}}]}\n\
         \x20   - amqp: {channel_close: 1}\n\
         \x20   - think: 1s\n\
         \x20   - loop: {count: 200, steps: [{amqp: {publish: ex, routing_key: q, size: 10}}]}\n\
         \x20   - think: 1s\n";
    let batches = |join: bool, requests_left: Option<u64>| {
        let mut h = Harness::new(yaml);
        let mut link = Link::start(&h.prog.w.link, None, "h", 0, &[], &mut h.rng, false)
            .expect("an amqp link");
        link.ready = true;
        let mut got = Vec::new();
        let mut spare = Vec::new();
        for _ in 0..300 {
            let mut env = Env {
                rng: &mut h.rng,
                rec: &mut h.rec,
                cursors: &mut h.cursors,
                cursor_step: 1,
                requests_left,
                now: h.now,
                link: Some(&mut link),
                browser: &mut h.browser,
                browser_cfg: None,
                join,
                join_spare: &mut spare,
            };
            match h.st.advance(&h.prog, &mut env) {
                Action::Send => {
                    // Every joined request's bytes are in the batch: AMQP frames end in 0xCE.
                    let frames = h.st.out.windows(1).filter(|w| w[0] == 0xCE).count();
                    assert!(frames >= h.st.names.len(), "{frames} frame ends");
                    got.push((h.st.names.len(), h.st.awaiting == Awaiting::Link));
                    h.now += Duration::from_millis(5);
                    h.st.batch_written(&mut h.rec, h.now);
                    h.st.lend_back(&mut spare);
                    // The worker keeps the big buffer; the user, its own small one.
                    assert!(h.st.out.raw_mut().capacity() < 1024);
                }
                Action::Think(_) => got.push((0, false)),
                Action::Done { .. } => break,
                a => panic!("{a:?}"),
            }
        }
        if join && requests_left.is_none() {
            assert!(spare.capacity() >= 1024, "{}", spare.capacity());
        }
        let pubs = h.prog.w.names.iter().position(|n| n.name == "pub").unwrap();
        (got, h.rec.names[pubs].count)
    };
    // Six publishes and the close that waits, in one batch; then 200 publishes in batches
    // of 32 (`JOIN_REQUESTS`).
    let (got, txs) = batches(true, None);
    let mut want = vec![(7, true), (0, false)];
    want.extend([(32, false); 6]);
    want.extend([(8, false), (0, false)]);
    assert_eq!(got, want);
    assert_eq!(txs, 3, "each transaction ends once its batch is written");
    // At a rate: one request per batch.
    let (got, txs) = batches(false, None);
    assert_eq!(got.len(), 6 + 1 + 1 + 200 + 1);
    assert!(got.iter().all(|&(n, _)| n <= 1), "{got:?}");
    assert_eq!(txs, 3);
    // Five requests left: a batch never holds more.
    let (got, _) = batches(true, Some(5));
    assert_eq!(got[0], (5, false), "{got:?}");
}
