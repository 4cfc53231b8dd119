//! `pipeline` steps in the interpreter, without sockets: one `Send` carries every request of the
//! pipeline (templated or not) with one name per request, an `extract` after it reads the last
//! reply, and a warm user builds the batch in the buffers it already has.

use super::*;
use rand::SeedableRng;

struct H {
    prog: Program,
    st: SessionState,
    rng: SmallRng,
    rec: Recorder,
    cursors: Vec<usize>,
}

impl H {
    fn new(yaml: &str) -> H {
        let s = headroom_scenario::parse_str(yaml, "t.yaml").expect("valid scenario");
        let c = headroom_scenario::compile(&s, std::path::Path::new(".")).expect("compiles");
        let prog = Program::new(Arc::new(c.workload), "example.test", true).expect("program");
        let mut rng = SmallRng::seed_from_u64(7);
        let mut st = SessionState::new(&prog, 42);
        st.begin(&prog, 0, &mut rng, Instant::now());
        let mut rec = Recorder::new();
        rec.ensure_names(prog.names(), prog.matches());
        let cursors = vec![0; prog.w.feeders.len()];
        H {
            prog,
            st,
            rng,
            rec,
            cursors,
        }
    }

    fn step(&mut self) -> Action {
        let mut env = Env {
            rng: &mut self.rng,
            rec: &mut self.rec,
            cursors: &mut self.cursors,
            cursor_step: 1,
            requests_left: None,
            now: Instant::now(),
            link: None,
            browser: &mut None,
            browser_cfg: None,
            join: true,
            join_spare: &mut Vec::new(),
        };
        self.st.advance(&self.prog, &mut env)
    }

    /// The request lines of the batch just produced, in the order they are written.
    fn request_lines(&self) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.st.out).to_string();
        text.split("\r\n")
            .filter(|l| l.ends_with(" HTTP/1.1"))
            .map(str::to_string)
            .collect()
    }

    /// The metric names of the batch just produced.
    fn names(&self) -> Vec<String> {
        self.st
            .names
            .iter()
            .map(|&id| self.prog.w.names[id as usize].name.clone())
            .collect()
    }

    /// Play the worker's part for a batch: one reply per request, in order; `last_status` is
    /// the last one's and, when the batch captures, every reply's bytes are kept back to back.
    fn replies(&mut self, bodies: &[(u16, &str)]) {
        self.st.reply.clear();
        for (status, body) in bodies {
            self.st.last_status = *status;
            if self.st.capture {
                let raw = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                self.st.reply.extend_from_slice(raw.as_bytes());
            }
        }
    }
}

#[test]
fn a_pipeline_is_one_batch_with_a_name_per_request_and_templates_expanded() {
    let mut h = H::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - set: {var: who, value: "ann-${user_id}"}
  - pipeline:
    - request: {name: page, path: "/u/${who}"}
    - request: GET /style.css
    - request: {name: post, method: POST, path: /log, body: "by ${who}", headers: {X-U: "${who}"}}
  - request: GET /after
"#,
    );
    assert_eq!(h.step(), Action::Send);
    assert_eq!(
        h.request_lines(),
        [
            "GET /u/ann-42 HTTP/1.1",
            "GET /style.css HTTP/1.1",
            "POST /log HTTP/1.1"
        ]
    );
    assert_eq!(h.names(), ["page", "GET /style.css", "post"]);
    let out = String::from_utf8_lossy(&h.st.out).to_string();
    assert!(out.contains("X-U: ann-42\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\nby ann-42"), "{out}");
    assert!(!h.st.capture, "nothing reads the replies");
    h.replies(&[(200, ""), (200, ""), (200, "")]);
    assert_eq!(h.step(), Action::Send);
    assert_eq!(h.request_lines(), ["GET /after HTTP/1.1"]);
    assert_eq!(h.names(), ["GET /after"]);
    h.replies(&[(200, "")]);
    assert_eq!(h.step(), Action::Done { aborted: false });
}

#[test]
fn extract_and_match_after_a_pipeline_read_its_last_reply() {
    let mut h = H::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - pipeline:
    - request: GET /a
    - request: GET /b
    - request: GET /c
  - extract: {var: tok, regex: 'tok=(\w+)'}
  - match: {name: saw-first, body: "tok=FIRST", do: abort}
  - request: "GET /next/${tok}"
"#,
    );
    assert_eq!(h.step(), Action::Send);
    assert_eq!(h.st.names.len(), 3);
    assert!(
        h.st.capture,
        "the extract after the pipeline keeps the replies"
    );
    h.replies(&[(200, "tok=FIRST"), (404, "tok=MIDDLE"), (200, "tok=LAST")]);
    assert_eq!(
        h.step(),
        Action::Send,
        "the match on the first reply must not fire"
    );
    assert_eq!(h.request_lines(), ["GET /next/LAST HTTP/1.1"]);
    assert_eq!(h.rec.matches[0], 0);
}

#[test]
fn a_capture_cut_short_keeps_the_last_reply_that_began() {
    let mut h = H::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - pipeline: [{request: GET /a}, {request: GET /b}]
  - extract: {var: tok, regex: 'tok=(\w+)'}
  - request: "GET /next/${tok}"
"#,
    );
    assert_eq!(h.step(), Action::Send);
    h.replies(&[(200, "tok=ONE"), (200, "tok=TWO-and-more")]);
    // The worker stops capturing at its limit: the last reply's body is cut.
    let cut = h.st.reply.len() - 9;
    h.st.reply.truncate(cut);
    assert_eq!(h.step(), Action::Send);
    assert_eq!(h.request_lines(), ["GET /next/TWO HTTP/1.1"]);
}

#[test]
fn match_loop_repeats_the_whole_pipeline() {
    let mut h = H::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - pipeline: [{request: GET /a}, {request: GET /b}]
  - match: {name: busy, status: 503, do: loop, max_loops: 2}
"#,
    );
    let mut batches = Vec::new();
    loop {
        match h.step() {
            Action::Send => {
                batches.push(h.request_lines());
                h.replies(&[(200, ""), (503, "")]);
            }
            Action::Done { aborted } => {
                assert!(!aborted);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(batches.len() < 10, "bounded");
    }
    assert_eq!(
        batches.len(),
        3,
        "the first pass and two loops: {batches:?}"
    );
    for b in &batches {
        assert_eq!(b, &["GET /a HTTP/1.1", "GET /b HTTP/1.1"]);
    }
    assert_eq!(h.rec.matches[0], 3);
}

#[test]
fn a_head_pipeline_is_read_as_head_replies() {
    let mut h = H::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - pipeline: [{request: HEAD /a}, {request: HEAD /b}]
  - extract: {var: len, header: Content-Length}
  - request: "GET /len/${len}"
"#,
    );
    assert_eq!(h.step(), Action::Send);
    assert!(h.st.head);
    // Replies to HEAD announce a length but carry no body.
    h.st.reply.clear();
    h.st.reply
        .extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n");
    h.st.reply
        .extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 22\r\n\r\n");
    h.st.last_status = 200;
    assert_eq!(h.step(), Action::Send);
    assert_eq!(h.request_lines(), ["GET /len/22 HTTP/1.1"]);
}

#[test]
fn a_warm_user_builds_pipelines_in_the_buffers_it_has() {
    let mut h = H::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - set: {var: n, sequence: {start: 1000, step: 1}}
  - pipeline:
    - request: "GET /item/${n}"
    - request: GET /static
    - request: {method: POST, path: /p, body: "n=${n}"}
"#,
    );
    let mut seen = None;
    for round in 0..50 {
        if round > 0 {
            let now = Instant::now();
            h.st.begin(&h.prog, 0, &mut h.rng, now);
        }
        assert_eq!(h.step(), Action::Send);
        assert_eq!(h.st.names.len(), 3);
        h.replies(&[(200, ""), (200, ""), (200, "")]);
        assert_eq!(h.step(), Action::Done { aborted: false });
        let buffers = (
            h.st.out.as_ptr(),
            h.st.out.capacity(),
            h.st.names.as_ptr(),
            h.st.names.capacity(),
        );
        // After the first few rounds every buffer has the size it needs and stays put.
        if round == 2 {
            seen = Some(buffers);
        } else if round > 2 {
            assert_eq!(
                Some(buffers),
                seen,
                "round {round} reallocated a batch buffer"
            );
        }
    }
}

#[test]
fn a_pipeline_cut_by_the_step_budget_resumes_into_the_same_batch() {
    // LoopInit, 3332 x (LoopTest, Set, Jump), the exiting LoopTest: 9,998 ops, so the step
    // budget (10,000) runs out after the pipeline's second request.
    assert_eq!(STEP_BUDGET, 10_000, "recount the ops below");
    let mut h = H::new(
        r#"
load: {users: [{count: 1}]}
sessions:
- name: s
  steps:
  - loop: {count: 3332, steps: [{set: {var: x, value: "1"}}]}
  - pipeline: [{request: GET /a}, {request: "GET /b/${x}"}, {request: GET /c}]
"#,
    );
    assert_eq!(h.step(), Action::Yield);
    assert_eq!(
        h.st.names.len(),
        2,
        "two requests in before the budget ran out"
    );
    assert_eq!(h.step(), Action::Send);
    assert_eq!(
        h.request_lines(),
        ["GET /a HTTP/1.1", "GET /b/1 HTTP/1.1", "GET /c HTTP/1.1"]
    );
    assert_eq!(h.names(), ["GET /a", "GET /b/${x}", "GET /c"]);
}
