//! `to_yaml` round trips, and the Tsung and httperf importers on the fixtures in `tests/data/`
//! and `scenarios/tsung-example.xml`: concrete values, warnings at their line and column,
//! errors for what cannot be run.

use headroom_core::Distribution;
use headroom_scenario::model::*;
use headroom_scenario::{
    import_httperf, import_tsung, parse_str, to_yaml, HttperfOptions, ScenarioError,
};
use std::path::PathBuf;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// 1-based line and column (in characters) of the first `needle` in `text`.
fn pos_of(text: &str, needle: &str) -> (usize, usize) {
    let i = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in fixture"));
    let before = &text[..i];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |n| n + 1)..]
        .chars()
        .count()
        + 1;
    (line, col)
}

fn show(errs: &[ScenarioError]) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn round_trip(s: &Scenario) {
    let yaml = to_yaml(s);
    match parse_str(&yaml, "x.yaml") {
        Ok(back) => assert_eq!(&back, s, "round trip differs; YAML was:\n{yaml}"),
        Err(e) => panic!("YAML does not parse:\n{}\n---\n{yaml}", show(&e)),
    }
}

fn request(r: &Step) -> &Request {
    match r {
        Step::Request(r) => r,
        other => panic!("expected a request, got {other:?}"),
    }
}

// ---- emit -----------------------------------------------------------------------------------

#[test]
fn emit_round_trips_every_example() {
    let mut n = 0;
    for e in std::fs::read_dir(root().join("scenarios")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            // Includes are inlined by the parser: the model is what round-trips.
            let s = headroom_scenario::load(&p).unwrap_or_else(|e| panic!("{}", show(&e)));
            round_trip(&s);
            n += 1;
        }
    }
    assert!(n >= 3, "only {n} examples");
}

#[test]
fn emit_writes_short_readable_yaml() {
    let s = Scenario {
        file_root: None,
        name: Some("demo".into()),
        servers: vec![Server {
            http2: false,
            host: "127.0.0.1".into(),
            port: 8080,
            protocol: Protocol::Http,
            tls: None,
        }],
        load: Load {
            phases: vec![Phase {
                duration: Duration::from_secs(90),
                rate: Rate::Fixed(2.5),
                arrival: Arrival::Poisson,
                max_users: Some(100),
            }],
            users: vec![],
            stages: Vec::new(),
            once: Vec::new(),
        },
        sessions: vec![Session {
            name: "s".into(),
            weight: 1.0,
            steps: vec![
                Step::Set {
                    var: "id".into(),
                    source: SetSource::RandomNumber { min: 1, max: 9 },
                },
                Step::Request(Request {
                    name: "GET /a/${id}".into(),
                    method: "GET".into(),
                    path: "/a/${id}".into(),
                    headers: vec![],
                    body: None,
                    auth: None,
                    oauth: None,
                }),
                Step::Request(Request {
                    name: "post".into(),
                    method: "POST".into(),
                    path: "/p?x=1#frag".into(),
                    headers: vec![("X-Id".into(), "${id}".into())],
                    body: Some("{\"a\": 1}".into()),
                    auth: None,
                    oauth: None,
                }),
                Step::Think(Distribution::Constant(Duration::from_millis(500))),
                Step::Match(Match {
                    name: "match 500".into(),
                    status: Some(500),
                    body: None,
                    when_matched: true,
                    action: MatchAction::Abort,
                    max_loops: None,
                }),
            ],
            surge: None,
        }],
        thresholds: vec![],
        link: LinkSpec::Plain,
        http: Default::default(),
    };
    let expected = "\
name: demo
servers:
  - {host: 127.0.0.1, port: 8080}
load:
  phases:
    - {duration: 1m 30s, arrival_rate: 2.5, max_users: 100}
sessions:
  - name: s
    steps:
      - set: {var: id, random_number: {min: 1, max: 9}}
      - request: GET /a/${id}
      - request:
          name: post
          method: POST
          path: \"/p?x=1#frag\"
          headers: {X-Id: \"${id}\"}
          body: '{\"a\": 1}'
      - think: 500ms
      - match: {status: 500, do: abort}
";
    assert_eq!(to_yaml(&s), expected);
    round_trip(&s);
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// Random models within what validation allows, with strings full of YAML's special characters.
struct Gen {
    rng: XorShift,
    vars: Vec<String>,
    n: usize,
}

impl Gen {
    fn text(&mut self, non_empty: bool) -> String {
        const POOL: &[&str] = &[
            "a", "Z", "0", "7", " ", ":", "#", "{", "}", "[", "]", ",", "&", "*", "!", "|", ">",
            "'", "\"", "%", "@", "`", "-", "?", "\\", "\n", "\t", "\r", "é", "日", "\u{2028}",
            "\u{feff}", "\u{85}", "\u{fffe}", ".", "~", "$", "<<", "true", "null", "1e3", "0x1F",
            ": ", " #", "- ", "---", "...", "=", "/",
        ];
        let len = self.rng.below(8) as usize + usize::from(non_empty);
        let mut s: String = (0..len)
            .map(|_| POOL[self.rng.below(POOL.len() as u64) as usize])
            .collect();
        while s.contains("${") {
            s = s.replace("${", "$(");
        }
        s
    }

    fn name(&mut self) -> String {
        self.n += 1;
        format!("{}{}", self.text(false), self.n)
    }

    fn var(&mut self) -> String {
        self.n += 1;
        let v = format!("v{}", self.n);
        self.vars.push(v.clone());
        v
    }

    fn duration(&mut self) -> Duration {
        match self.rng.below(3) {
            0 => Duration::from_millis(self.rng.below(100_000)),
            1 => Duration::from_secs(self.rng.below(400_000)),
            _ => Duration::from_nanos(self.rng.below(1 << 40)),
        }
    }

    fn float(&mut self) -> f64 {
        (self.rng.below(1_000_000) + 1) as f64 / (self.rng.below(1000) + 1) as f64
    }

    fn request(&mut self) -> Request {
        let method = ["GET", "POST", "PUT", "DELETE"][self.rng.below(4) as usize].to_string();
        let mut path = format!("/{}", self.text(false));
        if !self.vars.is_empty() && self.rng.coin() {
            let v = &self.vars[self.rng.below(self.vars.len() as u64) as usize];
            path.push_str(&format!("${{{v}}}"));
        }
        let name = if self.rng.coin() {
            format!("{method} {path}")
        } else {
            self.name()
        };
        let mut headers = Vec::new();
        for i in 0..self.rng.below(3) {
            headers.push((format!("{}{i}", self.text(false)), self.text(false)));
        }
        let body = self.rng.coin().then(|| self.text(false));
        let oauth = (self.rng.below(4) == 0).then(|| OAuth {
            consumer_key: self.text(true),
            consumer_secret: self.text(false),
            token: self.text(false),
            token_secret: self.text(false),
            method: if self.rng.coin() {
                OAuthMethod::HmacSha1
            } else {
                OAuthMethod::Plaintext
            },
        });
        Request {
            name,
            method,
            path,
            headers,
            body,
            auth: None,
            oauth: oauth.map(Box::new),
        }
    }

    fn steps(&mut self, depth: u32) -> Vec<Step> {
        let n = 1 + self.rng.below(5);
        (0..n).map(|_| self.step(depth)).collect()
    }

    fn step(&mut self, depth: u32) -> Step {
        let kinds = if depth >= 2 { 7 } else { 9 };
        match self.rng.below(kinds) {
            0 if self.rng.below(4) == 0 => {
                let n = 1 + self.rng.below(3);
                Step::Pipeline((0..n).map(|_| self.request()).collect())
            }
            0 => Step::Request(self.request()),
            1 => Step::Think(match self.rng.below(4) {
                0 => Distribution::Constant(self.duration()),
                1 => {
                    let a = self.duration();
                    Distribution::Uniform {
                        min: a,
                        max: a + self.duration(),
                    }
                }
                2 => Distribution::Exponential {
                    mean: self.duration(),
                },
                _ => Distribution::Pareto {
                    min: self.duration(),
                    alpha: self.float(),
                },
            }),
            2 => Step::Connect,
            3 => Step::Close,
            4 => {
                let source = match self.rng.below(7) {
                    0 => SetSource::Value(self.text(false)),
                    1 => SetSource::Csv {
                        file: self.text(true),
                        column: self.rng.below(9) as usize,
                        order: if self.rng.coin() {
                            CsvOrder::Random
                        } else {
                            CsvOrder::Sequential
                        },
                    },
                    2 => {
                        let min = self.rng.next() as i32 as i64;
                        SetSource::RandomNumber {
                            min,
                            max: min + self.rng.below(1000) as i64,
                        }
                    }
                    3 => SetSource::RandomString {
                        length: 1 + self.rng.below(50) as usize,
                    },
                    4 => SetSource::Sequence {
                        start: self.rng.next() as i32 as i64,
                        step: self.rng.below(5) as i64 - 2,
                    },
                    5 => {
                        let v = match self.vars.last() {
                            Some(v) if self.rng.coin() => format!("${{{v}}}"),
                            _ => "user_id".to_string(),
                        };
                        let n = self.rng.next() as i32;
                        SetSource::Expr(format!(
                            "if {v} < {n} then abs({v} - 9) rem 32 + 1 else -({v} div 2) * min({n}, {v})"
                        ))
                    }
                    _ => SetSource::UserId,
                };
                Step::Set {
                    var: self.var(),
                    source,
                }
            }
            5 => Step::Extract(Extract {
                var: self.var(),
                from: match self.rng.below(3) {
                    0 => ExtractFrom::Regex(self.text(true)),
                    1 => ExtractFrom::JsonPointer(format!("/{}", self.text(false))),
                    _ => ExtractFrom::Header(self.text(true)),
                },
                default: self.rng.coin().then(|| self.text(false)),
            }),
            6 => {
                let status = self.rng.coin().then(|| 100 + self.rng.below(500) as u16);
                let body = (status.is_none() || self.rng.coin()).then(|| self.text(false));
                let name = if self.rng.coin() {
                    let on = status.map(|s| s.to_string()).or(body.clone()).unwrap();
                    format!("match {on}")
                } else {
                    self.name()
                };
                Step::Match(Match {
                    name,
                    status,
                    body,
                    when_matched: self.rng.coin(),
                    action: [
                        MatchAction::Continue,
                        MatchAction::Abort,
                        MatchAction::Restart,
                        MatchAction::Loop,
                    ][self.rng.below(4) as usize],
                    max_loops: self.rng.coin().then(|| 1 + self.rng.below(9)),
                })
            }
            7 => {
                let steps = self.steps(depth + 1);
                let condition = match (self.vars.last(), self.rng.below(3)) {
                    (Some(v), 0) => Some(Condition::While(v.clone())),
                    (Some(v), 1) => Some(Condition::Until(v.clone())),
                    _ => None,
                };
                let count =
                    (condition.is_none() || self.rng.coin()).then(|| 1 + self.rng.below(99));
                // A counter on some loops, its variable usable in the body.
                let counter = self.rng.coin().then(|| LoopCounter {
                    var: format!("c{depth}"),
                    start: self.rng.below(5) as i64 - 2,
                    step: self.rng.below(3) as i64 + 1,
                });
                Step::Loop(Loop {
                    count,
                    condition,
                    counter,
                    steps,
                })
            }
            _ => Step::Transaction {
                name: self.name(),
                steps: self.steps(depth + 1),
            },
        }
    }

    fn scenario(&mut self) -> Scenario {
        self.vars.clear();
        let sessions: Vec<Session> = (0..1 + self.rng.below(3))
            .map(|_| {
                self.vars.clear();
                Session {
                    name: self.name(),
                    weight: if self.rng.coin() { 1.0 } else { self.float() },
                    steps: self.steps(0),
                    surge: None,
                }
            })
            .collect();
        let phases = (0..self.rng.below(3))
            .map(|_| Phase {
                duration: self.duration(),
                rate: if self.rng.coin() {
                    Rate::Fixed(self.float())
                } else {
                    Rate::Ramp {
                        from: self.float() * self.rng.below(2) as f64,
                        to: self.float(),
                    }
                },
                arrival: if self.rng.coin() {
                    Arrival::Poisson
                } else {
                    Arrival::Constant
                },
                max_users: self.rng.coin().then(|| 1 + self.rng.below(1000)),
            })
            .collect();
        let users = (0..self.rng.below(2))
            .map(|_| Users {
                count: 1 + self.rng.below(100),
                session: self.rng.coin().then(|| {
                    sessions[self.rng.below(sessions.len() as u64) as usize]
                        .name
                        .clone()
                }),
            })
            .collect();
        let thresholds = [
            ("p99", "< 200ms"),
            ("p99.9(sign in: ${x})", "<= 1m 30s 7ns"),
            ("mean(login)", ">= 2.5"),
            ("error_rate", "< 0.07%"),
            ("rps", "> 1000"),
        ]
        .iter()
        .filter(|_| self.rng.coin())
        .map(|(k, v)| {
            let yaml = format!(
                "load: {{users: [{{count: 1}}]}}\nsessions: [{{name: a, steps: [{{request: {{name: login, path: /}}}}, {{request: {{name: \"sign in: ${{x}}\", path: /}}}}]}}]\nthresholds: {{\"{k}\": \"{v}\"}}\n"
            );
            parse_str(&yaml, "t.yaml").unwrap().thresholds.remove(0)
        })
        .collect::<Vec<_>>();
        // A threshold may name only a request or transaction of the file: a session holds the
        // two names above.
        let mut sessions = sessions;
        if !thresholds.is_empty() {
            let yaml = "load: {users: [{count: 1}]}\nsessions: [{name: named-by-thresholds, steps: [{request: {name: login, path: /}}, {request: {name: \"sign in: ${x}\", path: /}}]}]\n";
            sessions.push(parse_str(yaml, "t.yaml").unwrap().sessions.remove(0));
        }
        // Users started once, at sessions of the file.
        let once = match sessions.len() {
            0 => Vec::new(),
            n => (0..self.rng.below(3))
                .map(|_| Once {
                    session: sessions[self.rng.below(n as u64) as usize].name.clone(),
                    at: Duration::from_millis(self.rng.below(100_000)),
                })
                .collect(),
        };
        Scenario {
            file_root: None,
            name: self.rng.coin().then(|| self.text(false)),
            servers: (0..self.rng.below(3))
                .map(|_| Server {
                    http2: false,
                    host: self.text(true),
                    port: 1 + self.rng.below(65535) as u16,
                    protocol: Protocol::Http,
                    tls: None,
                })
                .collect(),
            load: Load {
                phases,
                users,
                stages: Vec::new(),
                once,
            },
            sessions,
            thresholds,
            link: LinkSpec::Plain,
            http: Default::default(),
        }
    }
}

#[test]
fn emit_round_trips_random_models() {
    let mut g = Gen {
        rng: XorShift(0x2545_F491_4F6C_DD1D),
        vars: Vec::new(),
        n: 0,
    };
    for _ in 0..3000 {
        let s = g.scenario();
        round_trip(&s);
    }
}

// ---- Tsung ----------------------------------------------------------------------------------

#[test]
fn tsung_example_converts_and_docs_show_it() {
    let text = std::fs::read_to_string(root().join("scenarios/tsung-example.xml")).unwrap();
    let imp = import_tsung(&text, "scenarios/tsung-example.xml")
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    let s = &imp.scenario;
    assert_eq!(s.name.as_deref(), Some("tsung-example"));
    assert_eq!(s.servers[0].host, "127.0.0.1");
    assert_eq!(s.servers[0].port, 8080);
    assert_eq!(s.load.phases.len(), 2);
    assert_eq!(s.load.phases[0].duration, Duration::from_secs(60));
    assert_eq!(s.load.phases[0].rate, Rate::Fixed(5.0));
    assert_eq!(s.load.phases[1].duration, Duration::from_secs(300));
    assert_eq!(s.load.phases[1].rate, Rate::Fixed(10.0));
    assert_eq!(s.load.phases[1].max_users, Some(500));
    assert_eq!(s.load.phases[1].arrival, Arrival::Poisson);
    let weights: Vec<(&str, f64)> = s
        .sessions
        .iter()
        .map(|x| (x.name.as_str(), x.weight))
        .collect();
    assert_eq!(weights, [("browse", 70.0), ("buy", 30.0)]);
    let lines: Vec<usize> = imp.warnings.iter().map(|w| w.line).collect();
    assert_eq!(
        lines,
        [
            pos_of(&text, "loglevel").0,
            pos_of(&text, "<clients>").0,
            pos_of(&text, "maxnumber").0,
            pos_of(&text, "name=\"user_agent\"").0,
        ]
    );
    round_trip(s);
    // docs/import.md shows exactly what the importer writes.
    let docs = std::fs::read_to_string(root().join("docs/import.md")).unwrap();
    let yaml = to_yaml(s);
    assert!(
        docs.contains(&yaml),
        "docs/import.md does not show the current conversion:\n{yaml}"
    );
}

#[test]
fn tsung_shop_maps_every_feature() {
    let imp = import_tsung(&data("tsung-shop.xml"), "tsung-shop.xml")
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    let s = &imp.scenario;
    round_trip(s);
    // No <servers>: the absolute URL names the server.
    assert_eq!(s.servers.len(), 1);
    assert_eq!(
        (s.servers[0].host.as_str(), s.servers[0].port),
        ("shop.example.com", 8080)
    );
    // 120/minute for 10 minutes; one every 250 ms for an hour, at most 2000.
    let p = &s.load.phases;
    assert_eq!(p[0].duration, Duration::from_secs(600));
    assert_eq!(p[0].rate, Rate::Fixed(2.0));
    assert_eq!(p[1].duration, Duration::from_secs(3600));
    assert_eq!(p[1].rate, Rate::Fixed(4.0));
    assert_eq!(p[1].max_users, Some(2000));
    // The probability-0 crawler is kept out of the mix (weight 0): only a <user> would run it.
    let names: Vec<(&str, f64)> = s
        .sessions
        .iter()
        .map(|x| (x.name.as_str(), x.weight))
        .collect();
    assert_eq!(
        names,
        [("anonymous", 60.0), ("buyer", 40.0), ("crawler", 0.0)]
    );

    let a = &s.sessions[0].steps;
    assert_eq!(request(&a[0]).path, "/");
    assert_eq!(
        a[1],
        Step::Match(Match {
            name: "match Welcome".into(),
            status: None,
            body: Some("Welcome".into()),
            when_matched: false,
            action: MatchAction::Continue,
            max_loops: None,
        })
    );
    // <thinktime/> takes the default of <option name="thinktime" value="3" random="true">.
    assert_eq!(
        a[2],
        Step::Think(Distribution::Exponential {
            mean: Duration::from_secs(3)
        })
    );
    assert_eq!(
        a[3],
        Step::Set {
            var: "sku".into(),
            source: SetSource::Csv {
                file: "data/products.csv".into(),
                column: 0,
                order: CsvOrder::Random
            }
        }
    );
    assert!(
        matches!(&a[4], Step::Set { var, source: SetSource::Csv { column: 1, .. } } if var == "category")
    );
    // for from=0 to=9 incr=2: 0, 2, 4, 6, 8 and 10 (Tsung's for_end adds incr while the
    // counter is below `to`), the counter in `page`.
    let Step::Loop(l) = &a[5] else {
        panic!("{:?}", a[5])
    };
    assert_eq!((l.count, &l.condition), (Some(6), &None));
    assert_eq!(
        l.counter,
        Some(LoopCounter {
            var: "page".into(),
            start: 0,
            step: 2
        })
    );
    let r = request(&l.steps[0]);
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("GET", "/api/v2/categories/${category}?page=2")
    );
    assert_eq!(
        l.steps[1],
        Step::Think(Distribution::Exponential {
            mean: Duration::from_millis(500)
        })
    );
    let r = request(&a[6]);
    assert_eq!(r.path, "/api/v2/products/${sku}");
    assert_eq!(
        r.headers,
        [(
            "Accept".to_string(),
            "application/json, text/html;q=0.5".to_string()
        )]
    );
    assert!(
        matches!(&a[7], Step::Match(m) if m.name == "out-of-stock" && m.body.as_deref() == Some("Out of stock."))
    );
    assert_eq!(
        a[8],
        Step::Extract(Extract {
            var: "price".into(),
            from: ExtractFrom::Regex("\"price\": *([0-9.]+)".into()),
            default: None
        })
    );
    assert_eq!(a.len(), 9, "the ^HTTP/1\\.[01] 5\\d\\d match is dropped");

    let b = &s.sessions[1].steps;
    assert!(
        matches!(&b[1], Step::Set { var, source: SetSource::Csv { file, column: 1, order: CsvOrder::SameRow } } if var == "password" && file == "data/accounts.csv")
    );
    assert_eq!(
        b[2],
        Step::Set {
            var: "channel".into(),
            source: SetSource::Value("web".into())
        }
    );
    let Step::Transaction { name, steps } = &b[3] else {
        panic!("{:?}", b[3])
    };
    assert_eq!(name, "sign-in");
    assert!(matches!(&steps[1], Step::Extract(e) if e.var == "csrf"));
    let login = request(&steps[2]);
    assert_eq!(login.method, "POST");
    assert_eq!(
        login.body.as_deref(),
        Some("user=${login}&pass=${password}&csrf=${csrf}&via=${channel}")
    );
    assert_eq!(
        login.headers,
        [(
            "Content-Type".to_string(),
            "application/x-www-form-urlencoded".to_string()
        )]
    );
    assert_eq!(
        steps[3],
        Step::Extract(Extract {
            var: "session_id".into(),
            from: ExtractFrom::JsonPointer("/session/id".into()),
            default: None
        })
    );
    assert!(
        matches!(&steps[4], Step::Extract(Extract { from: ExtractFrom::JsonPointer(p), .. }) if p == "/cart/items/0/sku")
    );
    assert_eq!(
        b[4],
        Step::Think(Distribution::Constant(Duration::from_secs(5)))
    );
    let Step::Loop(poll) = &b[6] else {
        panic!("{:?}", b[6])
    };
    // <while var="pending" neq=""/>: loop while pending is true; max_repeat caps it.
    assert_eq!(poll.count, Some(10));
    assert_eq!(poll.condition, Some(Condition::While("pending".into())));
    // <add_cookie key="lang" value="en"/>: put in the user's jar before the request, as Tsung
    // keeps it (the hand-written Cookie header stays a header).
    assert_eq!(
        poll.steps[0],
        Step::Cookie(CookieStep::Set {
            name: "lang".into(),
            value: "en".into(),
            domain: None,
            path: None
        })
    );
    let put = request(&poll.steps[1]);
    assert_eq!(put.path, "/orders?qty=${qty}&user=${user_id}");
    assert_eq!(
        put.headers,
        [
            ("Cookie".to_string(), "sid=${session_id}".to_string()),
            ("Content-Type".to_string(), "application/json".to_string())
        ]
    );
    assert!(
        matches!(&poll.steps[2], Step::Match(m) if m.action == MatchAction::Loop && m.max_loops == Some(3))
    );
    assert!(
        matches!(&poll.steps[3], Step::Extract(Extract { from: ExtractFrom::Header(h), .. }) if h == "X-Pending")
    );
    assert_eq!(
        poll.steps[4],
        Step::Think(Distribution::Uniform {
            min: Duration::from_secs(2),
            max: Duration::from_secs(4)
        })
    );
}

#[test]
fn tsung_shop_warnings_are_located() {
    let text = data("tsung-shop.xml");
    let imp = import_tsung(&text, "tsung-shop.xml").unwrap();
    let got: Vec<(usize, usize)> = imp.warnings.iter().map(|w| (w.line, w.column)).collect();
    // One warning per thing not honoured, at the attribute or element concerned.
    let expected: Vec<(usize, usize)> = [
        "loglevel=",
        "dumptraffic=",
        "<clients>",
        "<monitoring>",
        "duration=\"2\"",
        "maxnumber=",
        "<option type=\"ts_http\" name=\"user_agent\">",
        "<option name=\"tcp_rcv_buffer\"",
        "do=\"log\"",
        "version=\"1.0\"/>",
        "<setdynvars sourcetype=\"file\" fileid=\"products\"",
        "^HTTP/1",
        "delimiter=\";\"",
        "sleep_loop=",
        "probability=\"0\"",
    ]
    .iter()
    .map(|n| pos_of(&text, n))
    .collect();
    assert_eq!(got, expected, "{}", show(&imp.warnings));
    let msg = |i: usize| imp.warnings[i].message.as_str();
    assert!(
        msg(5).contains("caps the users alive at once"),
        "{}",
        msg(5)
    );
    assert!(msg(10).contains("splits CSV lines on ','"), "{}", msg(10));
    assert!(msg(11).contains("match dropped"), "{}", msg(11));
    assert!(msg(14).contains("weight 0, out of the mix"), "{}", msg(14));
    assert!(imp.warnings.iter().all(|w| w.file == "tsung-shop.xml"));
}

#[test]
fn tsung_unknown_attributes_warn_at_their_position() {
    let text = data("tsung-unknown.xml");
    let imp = import_tsung(&text, "tsung-unknown.xml").unwrap();
    let got: Vec<(usize, usize, &str)> = imp
        .warnings
        .iter()
        .map(|w| (w.line, w.column, w.message.as_str()))
        .collect();
    let at = |n| pos_of(&text, n);
    assert_eq!(
        got,
        [
            (at("colour").0, at("colour").1, "attribute 'colour' of <server> is not honoured"),
            (at("ramp=").0, at("ramp=").1, "attribute 'ramp' of <arrivalphase> is not honoured"),
            (at("priority").0, at("priority").1, "attribute 'priority' of <session> is not honoured"),
            (at("tag=").0, at("tag=").1, "attribute 'tag' of <request> is not honoured: headroom has no request tags to exclude"),
            (at("retries").0, at("retries").1, "attribute 'retries' of <request> is not honoured"),
            (at("keepalive").0, at("keepalive").1, "attribute 'keepalive' of <http> is not honoured"),
            (at("jitter").0, at("jitter").1, "attribute 'jitter' of <thinktime> is not honoured"),
            (at("<pause").0, at("<pause").1, "<pause> inside <session> is not honoured"),
        ]
    );
    // The attribute on a continuation line of its tag is located on that line.
    assert_eq!(at("keepalive"), (15, 15));
    assert_eq!(imp.scenario.sessions[0].weight, 100.0);
    assert_eq!(
        imp.scenario.load.phases[0].duration,
        Duration::from_secs(30)
    );
}

/// A Tsung file with one server, one phase and `sessions` inside `<sessions>`.
fn tsung_doc(sessions: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<tsung>\n<servers><server host=\"127.0.0.1\" port=\"8080\" type=\"tcp\"/></servers>\n\
         <load><arrivalphase phase=\"1\" duration=\"10\" unit=\"second\"><users arrivalrate=\"1\" unit=\"second\"/></arrivalphase></load>\n\
         <sessions>\n{sessions}\n</sessions>\n</tsung>\n"
    )
}

fn http_session(body: &str) -> String {
    tsung_doc(&format!(
        "<session name=\"s\" probability=\"100\" type=\"ts_http\">\n{body}\n</session>"
    ))
}

/// Issue 32: `<oauth>` becomes the request's `oauth`, signed per request: consumer key and
/// secret, the access token and its secret over variables, `encoding` the method; Tsung's
/// example's `method` attribute (which Tsung does not read) warns.
#[test]
fn tsung_oauth_becomes_the_requests_oauth() {
    let xml = http_session(
        "<setdynvars sourcetype=\"value\" value=\"t1\"><var name=\"tok\"/></setdynvars>\n\
         <request><http url=\"/token\" method=\"POST\" contents=\"a=1\"><oauth consumer_key=\"key\" consumer_secret=\"secret\" method=\"HMAC-SHA1\"/></http></request>\n\
         <request subst=\"true\"><http url=\"/echo\"><oauth consumer_key=\"key\" consumer_secret=\"secret\" access_token=\"%%_tok%%\" access_token_secret=\"s%%tok%%\" encoding=\"PLAINTEXT\"/></http></request>",
    );
    let imp = import_tsung(&xml, "t.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
    round_trip(&imp.scenario);
    let steps = &imp.scenario.sessions[0].steps;
    let token = request(&steps[1]);
    assert_eq!(
        token.oauth,
        Some(Box::new(OAuth {
            consumer_key: "key".into(),
            consumer_secret: "secret".into(),
            token: String::new(),
            token_secret: String::new(),
            method: OAuthMethod::HmacSha1,
        }))
    );
    // Tsung's default content type: the body's parameters are signed.
    assert!(token.headers.contains(&(
        "Content-Type".into(),
        "application/x-www-form-urlencoded".into()
    )));
    assert_eq!(
        request(&steps[2]).oauth,
        Some(Box::new(OAuth {
            consumer_key: "key".into(),
            consumer_secret: "secret".into(),
            token: "${tok}".into(),
            token_secret: "s${tok}".into(),
            method: OAuthMethod::Plaintext,
        }))
    );
    assert!(
        imp.warnings.iter().any(|w| w.line == 8
            && w.message.contains("attribute 'method' of <oauth> is not honoured: Tsung reads the signature method from 'encoding'")),
        "{}",
        show(&imp.warnings)
    );
}

#[test]
fn tsung_errors_name_what_and_where() {
    let cases: &[(String, &str, usize)] = &[
        (
            http_session("<request><http url=\"/\"><oauth consumer_key=\"k\" consumer_secret=\"s\" encoding=\"RSA-SHA1\"/></http></request>"),
            "encoding=\"RSA-SHA1\" is not supported: headroom signs with HMAC-SHA1 or PLAINTEXT",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><oauth consumer_key=\"k\" consumer_secret=\"s\" encoding=\"MD5\"/></http></request>"),
            "encoding=\"MD5\": expected HMAC-SHA1, PLAINTEXT or RSA-SHA1",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><oauth consumer_key=\"k\"/></http></request>"),
            "<oauth> needs the attribute 'consumer_secret'",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><oauth consumer_key=\"k\" consumer_secret=\"s\"/><oauth consumer_key=\"k\" consumer_secret=\"s\"/></http></request>"),
            "a second <oauth>: an <http> takes one",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><oauth consumer_key=\"k\" consumer_secret=\"s\"/><www_authenticate userid=\"u\" passwd=\"p\"/></http></request>"),
            "<www_authenticate> and <oauth> both write the request's Authorization",
            7,
        ),
        (
            tsung_doc("").replace("type=\"tcp\"", "type=\"bosh_ssl\""),
            "type=\"bosh\" carries XMPP: only for ts_jabber sessions",
            3,
        ),
        (
            http_session("<request><http url=\"https://127.0.0.1:8080/\"/></request>"),
            "an https:// URL to 127.0.0.1:8080, a plain server of the scenario",
            7,
        ),
        (
            // Defined, but only later: Tsung sends 'undefined' the first time and the value
            // after, which one scenario text cannot say.
            http_session("<request subst=\"true\"><http url=\"/u/%%_who%%\"/></request>\n<request><dyn_variable name=\"who\" re=\"w=(\\w+)\"/><http url=\"/\"/></request>"),
            "variable 'who' is used before it is defined",
            7,
        ),
        (
            // The counter exists from its loop on; Tsung sends 'undefined' before it.
            http_session(
                "<request subst=\"true\"><http url=\"/p/%%_i%%\"/></request>\n<for from=\"1\" to=\"2\" var=\"i\"><request><http url=\"/\"/></request></for>",
            ),
            "variable 'i' is used before it is defined",
            7,
        ),
        (
            http_session("<for from=\"1\" to=\"2\" var=\"%%_i\"><request><http url=\"/\"/></request></for>"),
            "variable name '%%_i'",
            7,
        ),
        (
            http_session(
                "<repeat name=\"r\"><request><dyn_variable name=\"st\" re=\"st=(\\w+)\"/><http url=\"/\"/></request>\n<until var=\"st\" eq=\"done\"/></repeat>",
            ),
            "not whether it equals 'done'",
            8,
        ),
        (
            http_session(
                "<request><dyn_variable name=\"a\" jsonpath=\"$.items[?(@.id==1)].name\"/><http url=\"/\"/></request>",
            ),
            "cannot become a JSON pointer",
            7,
        ),
        (
            http_session(
                "<setdynvars sourcetype=\"eval\" code=\"fun(_) -> erlang:now() end.\"><var name=\"x\"/></setdynvars>",
            ),
            "'<setdynvars sourcetype=\"eval\">' is not translated: a call to erlang:now/0",
            7,
        ),
        (
            http_session("<if var=\"x\" eq=\"1\"><request><http url=\"/\"/></request></if>"),
            "'<if>' is not supported",
            7,
        ),
        (
            http_session("<request><http url=\"/\" contents_from_file=\"body.json\"/></request>"),
            "contents_from_file is not supported",
            7,
        ),
        (
            http_session("<request><http url=\"/\"></request>"),
            "XML syntax",
            7,
        ),
        (
            http_session("<request><http url=\"/&nope;\"/></request>"),
            "&nope;",
            7,
        ),
        (
            tsung_doc("<session name=\"s\" probability=\"50\" weight=\"2\" type=\"ts_http\"><request><http url=\"/\"/></request></session>"),
            "not both",
            6,
        ),
        (
            http_session("<request><raw data=\"x\" ack=\"no_ack\"/></request>"),
            "'<raw>' belongs in a session of type ts_raw; this session is of type ts_http",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><www_authenticate userid=\"u\" passwd=\"p\" type=\"ntlm\"/></http></request>"),
            "type=\"ntlm\": expected basic or digest",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><www_authenticate userid=\"a:b\" passwd=\"p\"/></http></request>"),
            "a user name cannot contain ':'",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><add_cookie key=\"a b\" value=\"1\"/></http></request>"),
            "key=\"a b\": a cookie name is a token",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><add_cookie key=\"a\" value=\"1;2\"/></http></request>"),
            "a cookie value cannot hold ';'",
            7,
        ),
        (
            http_session("<request><http url=\"/\"><add_cookie key=\"a\" value=\"1\" path=\"x\"/></http></request>"),
            "path=\"x\": expected a path starting with '/'",
            7,
        ),
        (
            http_session("<request><dyn_variable name=\"c\" header=\"content-type/charset\"/><http url=\"/\"/></request>"),
            "header=\"content-type/charset\": a parameter of a header is not supported",
            7,
        ),
        (
            // A variable only Digest would use, used elsewhere: the error says why it is unset.
            http_session("<request><dyn_variable name=\"n\" header=\"www-authenticate/nonce\"/><http url=\"/\"/></request>\n<request subst=\"true\"><http url=\"/?n=%%_n%%\"/></request>"),
            "variable 'n' is not set: it would hold nonce of www-authenticate",
            8,
        ),
        (
            http_session("<request><dyn_variable name=\"t\" xpath=\"//item[1]/text()\"/><http url=\"/\"/></request>"),
            "xpath=\"//item[1]/text()\" is not supported",
            7,
        ),
        (
            // Tsung's own modules keep their meaning: no stand-in for them.
            http_session("<request subst=\"true\"><http url=\"/%%ts_file_server:get_next_line%%\"/></request>"),
            "'%%ts_file_server:get_next_line%%' calls Erlang code",
            7,
        ),
    ];
    for (xml, want, line) in cases {
        let errs = match import_tsung(xml, "t.xml") {
            Ok(i) => panic!("expected an error with {want:?}, got {:?}", i.scenario),
            Err(e) => e,
        };
        assert!(
            errs.iter()
                .any(|e| e.message.contains(want) && e.line == *line),
            "expected {want:?} at line {line}, got:\n{}\n--- in:\n{xml}",
            show(&errs)
        );
        assert!(errs.iter().all(|e| e.line >= 1 && e.column >= 1));
    }
}

/// `url="https://..."` names a TLS server when the file has no `<servers>` (unchecked, as
/// Tsung); to a server of the file, it must match the server's kind.
#[test]
fn tsung_https_urls() {
    let xml = http_session("<request><http url=\"https://127.0.0.1/a?b=1\"/></request>").replace(
        "<servers><server host=\"127.0.0.1\" port=\"8080\" type=\"tcp\"/></servers>",
        "",
    );
    let imp = import_tsung(&xml, "t.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
    let s = &imp.scenario.servers[0];
    assert_eq!((s.host.as_str(), s.port), ("127.0.0.1", 443));
    assert!(
        s.tls.as_ref().is_some_and(|t| t.insecure && !t.starttls),
        "{s:?}"
    );
    assert_eq!(request(&imp.scenario.sessions[0].steps[0]).path, "/a?b=1");
    assert!(
        imp.warnings
            .iter()
            .any(|w| w.line == 7 && w.message.contains("TLS without certificate checks")),
        "{}",
        show(&imp.warnings)
    );
    // To a type="ssl" server of the file: the same kind, no error.
    let ssl = http_session("<request><http url=\"https://127.0.0.1:8080/\"/></request>")
        .replace("type=\"tcp\"", "type=\"ssl\"");
    assert!(import_tsung(&ssl, "t.xml").is_ok());
}

/// Issue 16: `<www_authenticate>` becomes the request's `auth` (Basic or Digest, with variables),
/// `<add_cookie>` a cookie put in the jar before the request, a call to the file's own Erlang
/// code a random string drawn before each request that sends it, and a simple xpath a regular
/// expression that finds the same value.
#[test]
fn tsung_auth_cookies_stand_ins_and_xpath() {
    let xml = http_session(
        "<setdynvars sourcetype=\"value\" value=\"bob\"><var name=\"who\"/></setdynvars>\n\
         <request subst=\"true\"><http url=\"/a\"><www_authenticate userid=\"%%_who%%\" passwd=\"s3cret\" type=\"digest\"/>\
         <add_cookie key=\"lang\" value=\"%%_who%%\" domain=\"example.org\" path=\"/shop\"/></http></request>\n\
         <request><dyn_variable name=\"tok\" xpath=\"/resp/token/text()\"/><dyn_variable name=\"id\" xpath=\"//item/@id\"/><http url=\"/b\"><www_authenticate userid=\"u\" passwd=\"p\" type=\"basic\"/></http></request>\n\
         <for from=\"1\" to=\"2\" var=\"i\"><request subst=\"true\"><http url=\"/c/%%rand:word%%/%%_tok%%/%%rand:word%%\"/></request></for>",
    );
    let imp = import_tsung(&xml, "t.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
    round_trip(&imp.scenario);
    let steps = &imp.scenario.sessions[0].steps;
    assert_eq!(
        steps[1],
        Step::Cookie(CookieStep::Set {
            name: "lang".into(),
            value: "${who}".into(),
            domain: Some("example.org".into()),
            path: Some("/shop".into())
        })
    );
    let a = request(&steps[2]);
    assert_eq!(
        a.auth,
        Some(Auth {
            scheme: AuthScheme::Digest,
            user: "${who}".into(),
            password: "s3cret".into()
        })
    );
    assert!(a.headers.is_empty(), "{:?}", a.headers);
    let b = request(&steps[3]);
    assert_eq!(b.auth.as_ref().map(|x| x.scheme), Some(AuthScheme::Basic));
    // The xpaths, as regular expressions, find the values in a reply.
    let body = "<resp><item n=\"1\" id='i-7'/><token kind=\"a\">abc.1</token></resp>";
    for (i, want) in [(4, "abc.1"), (5, "i-7")] {
        let Step::Extract(Extract {
            from: ExtractFrom::Regex(re),
            ..
        }) = &steps[i]
        else {
            panic!("{:?}", steps[i])
        };
        let caps = regex::Regex::new(re).unwrap().captures(body);
        assert_eq!(
            caps.and_then(|c| c.get(1)).map(|m| m.as_str()),
            Some(want),
            "{re}"
        );
    }
    // %%rand:word%% twice in one request: one stand-in, drawn before it, inside the loop.
    let Step::Loop(l) = &steps[6] else {
        panic!("{:?}", steps[6])
    };
    assert_eq!(
        l.steps[0],
        Step::Set {
            var: "rand_word".into(),
            source: SetSource::RandomString { length: 20 }
        }
    );
    assert_eq!(
        request(&l.steps[1]).path,
        "/c/${rand_word}/${tok}/${rand_word}"
    );
    assert_eq!(l.steps.len(), 2);
    let says = |line: usize, want: &str| {
        assert!(
            imp.warnings
                .iter()
                .any(|w| w.line == line && w.message.contains(want)),
            "no warning at {line} with {want:?}:\n{}",
            show(&imp.warnings)
        )
    };
    says(
        9,
        "xpath=\"/resp/token/text()\" becomes the regular expression",
    );
    says(9, "the path /resp/token is not checked");
    says(10, "'%%rand:word%%' calls the file's own Erlang code");
    assert!(
        !imp.warnings.iter().any(|w| w.message.contains("cookie")),
        "cookies are honoured: {}",
        show(&imp.warnings)
    );
}

/// A `%%_var%%` the session defines nowhere is sent as Tsung sends it: the text `undefined`
/// (Tsung's `ts_search:subst`), a literal of the converted step, with one warning per variable
/// and place.
#[test]
fn tsung_undefined_variable_is_the_word_undefined() {
    let xml = http_session(
        "<request subst=\"true\"><http url=\"/u/%%_who%%?x=%%_who%%\" method=\"POST\" contents=\"n=%%_nobody%%\"/></request>\n\
         <request subst=\"false\"><http url=\"/v/%%_who%%\"/></request>",
    );
    let imp = import_tsung(&xml, "t.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
    round_trip(&imp.scenario);
    let steps = &imp.scenario.sessions[0].steps;
    let r = request(&steps[0]);
    assert_eq!(r.path, "/u/undefined?x=undefined");
    assert_eq!(r.body.as_deref(), Some("n=undefined"));
    // Without subst Tsung sends the text as written; so does headroom.
    assert_eq!(request(&steps[1]).path, "/v/%%_who%%");
    let undefined: Vec<(usize, &str)> = imp
        .warnings
        .iter()
        .filter(|w| w.message.contains("defined nowhere"))
        .map(|w| (w.line, w.message.as_str()))
        .collect();
    assert_eq!(
        undefined,
        [
            (7, "variable 'who' is defined nowhere in the session: Tsung substitutes the text 'undefined' for '%%_who%%', and so does the converted scenario (a literal)"),
            (7, "variable 'nobody' is defined nowhere in the session: Tsung substitutes the text 'undefined' for '%%_nobody%%', and so does the converted scenario (a literal)"),
        ]
    );
    // The compiled scenario sends exactly that: no variable is left to resolve.
    let c = headroom_scenario::compile(&imp.scenario, std::path::Path::new(".")).unwrap();
    assert_eq!(c.workload.vars, ["user_id", "session"]);
}

/// `<for from to incr var>`: a loop whose counter is the variable, with Tsung's passes (its
/// `for_end` adds `incr` while the counter is below `to`, so the last pass may pass `to`, and a
/// loop with to <= from runs once); the counter used after the loop keeps its last value.
#[test]
fn tsung_for_counter_is_the_loop_counter() {
    let xml = http_session(
        "<for from=\"1\" to=\"11\" incr=\"3\" var=\"ch\"><request subst=\"true\"><http url=\"/c/%%_ch%%\"/></request></for>\n\
         <for from=\"5\" to=\"1\" var=\"x\"><request subst=\"true\"><http url=\"/x/%%_x%%\"/></request></for>\n\
         <request subst=\"true\"><http url=\"/last/%%_ch%%\"/></request>",
    );
    let imp = import_tsung(&xml, "t.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
    round_trip(&imp.scenario);
    let steps = &imp.scenario.sessions[0].steps;
    let loops: Vec<(Option<u64>, Option<LoopCounter>, &str)> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Loop(l) => Some((
                l.count,
                l.counter.clone(),
                request(&l.steps[0]).path.as_str(),
            )),
            _ => None,
        })
        .collect();
    let counter = |var: &str, start, step| {
        Some(LoopCounter {
            var: var.into(),
            start,
            step,
        })
    };
    assert_eq!(
        loops,
        [
            (Some(5), counter("ch", 1, 3), "/c/${ch}"),
            (Some(1), counter("x", 5, 1), "/x/${x}"),
        ]
    );
    assert_eq!(request(&steps[2]).path, "/last/${ch}");
    assert!(
        imp.warnings.iter().all(|w| !w.message.contains("counter")),
        "{}",
        show(&imp.warnings)
    );
    // The YAML says so.
    assert!(to_yaml(&imp.scenario).contains("counter: {var: ch, start: 1, step: 3}"));
}

#[test]
fn tsung_condition_truth_mapping() {
    for (cond, expected) in [
        (
            "<while var=\"f\" eq=\"true\"/>",
            Condition::While("f".into()),
        ),
        ("<while var=\"f\" eq=\"0\"/>", Condition::Until("f".into())),
        ("<until var=\"f\" neq=\"\"/>", Condition::Until("f".into())),
        (
            "<until var=\"f\" eq=\"false\"/>",
            Condition::While("f".into()),
        ),
        ("<while var=\"f\" neq=\"1\"/>", Condition::Until("f".into())),
    ] {
        let xml = http_session(&format!(
            "<repeat name=\"r\" max_repeat=\"7\"><request><dyn_variable name=\"f\" header=\"X-F\"/><http url=\"/\"/></request>{cond}</repeat>"
        ));
        let imp = import_tsung(&xml, "t.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
        let Step::Loop(l) = &imp.scenario.sessions[0].steps[0] else {
            panic!()
        };
        assert_eq!(
            (l.count, l.condition.clone()),
            (Some(7), Some(expected)),
            "{cond}"
        );
    }
}

#[test]
fn tsung_mutants_never_panic_and_are_located() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    // The protocol fixtures (and tsung-jabber.xml) have their own in tests/import_proto.rs.
    for name in ["tsung-shop.xml", "tsung-unknown.xml"] {
        let src = data(name).into_bytes();
        for _ in 0..300 {
            let mut v = src.clone();
            for _ in 0..=rng.below(3) {
                let i = rng.below(v.len() as u64) as usize;
                match rng.below(3) {
                    0 => {
                        let n = (1 + rng.below(12) as usize).min(v.len() - i);
                        v.drain(i..i + n);
                    }
                    1 => {
                        let end = (i + 1 + rng.below(24) as usize).min(v.len());
                        let chunk = v[i..end].to_vec();
                        let at = rng.below(v.len() as u64) as usize;
                        v.splice(at..at, chunk);
                    }
                    _ => {
                        let j = rng.below(v.len() as u64) as usize;
                        v.swap(i, j);
                    }
                }
            }
            let text = String::from_utf8_lossy(&v);
            match import_tsung(&text, name) {
                Ok(imp) => round_trip(&imp.scenario),
                Err(errs) => {
                    assert!(!errs.is_empty());
                    for e in &errs {
                        assert!(e.line >= 1 && e.column >= 1, "{e}");
                        assert!(!e.message.contains("internal error"), "{e}\n{text}");
                    }
                }
            }
        }
    }
}

// ---- httperf --------------------------------------------------------------------------------

#[test]
fn httperf_wsesslog_converts() {
    let text = data("sessions.wsesslog");
    let opts = HttperfOptions {
        host: "10.0.0.7".into(),
        port: 8080,
        rate: Some(12.5),
        duration: Duration::from_secs(120),
    };
    let imp = import_httperf(&text, "sessions.wsesslog", &opts)
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    let s = &imp.scenario;
    round_trip(s);
    assert_eq!(
        (s.servers[0].host.as_str(), s.servers[0].port),
        ("10.0.0.7", 8080)
    );
    assert_eq!(
        s.load.phases,
        [Phase {
            duration: Duration::from_secs(120),
            rate: Rate::Fixed(12.5),
            arrival: Arrival::Poisson,
            max_users: None
        }]
    );
    let names: Vec<(&str, f64)> = s
        .sessions
        .iter()
        .map(|x| (x.name.as_str(), x.weight))
        .collect();
    assert_eq!(names, [("session-1", 1.0), ("session-2", 1.0)]);
    // Burst 1: its first request alone, then the other two pipelined (httperf issues them once
    // the first reply is in), its think time, burst 2; no think after the last burst.
    let a = &s.sessions[0].steps;
    assert_eq!(a.len(), 4, "{a:?}");
    assert_eq!(request(&a[0]).path, "/index.html");
    let Step::Pipeline(rest) = &a[1] else {
        panic!("the burst's other requests are a pipeline: {:?}", a[1])
    };
    let paths: Vec<&str> = rest.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/img/logo.png", "/img/banner.jpg"]);
    let names: Vec<&str> = rest.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["GET /img/logo.png", "GET /img/banner.jpg"],
        "each request keeps its own name"
    );
    assert_eq!(
        a[2],
        Step::Think(Distribution::Constant(Duration::from_millis(2500)))
    );
    assert_eq!(request(&a[3]).path, "/articles/42.html", "a burst of one");
    let b = &s.sessions[1].steps;
    assert_eq!(b.len(), 4, "{b:?}");
    let login = request(&b[0]);
    assert_eq!(
        (login.method.as_str(), login.body.as_deref()),
        ("POST", Some("user=ann&pass=secret"))
    );
    assert_eq!(
        b[1],
        Step::Think(Distribution::Constant(Duration::from_secs(1)))
    );
    assert_eq!(request(&b[2]).body.as_deref(), Some("text=Hello\nWorld"));
    // One indented request: nothing to pipeline it with.
    assert_eq!(request(&b[3]).path, "/comments/count");
    // Pipelined bursts are honoured: the only warning left is the attribute.
    let got: Vec<(usize, usize)> = imp.warnings.iter().map(|w| (w.line, w.column)).collect();
    assert_eq!(got, [pos_of(&text, "timeout=5")]);
    assert_eq!(imp.warnings[0].message, "'timeout' is not honoured");
}

#[test]
fn httperf_bursts_split_where_a_pipeline_cannot_hold_them() {
    // The first request alone, then HEAD HEAD | GET: a warning where the pipeline splits.
    let text = "/a\n  /b method=HEAD\n  /c method=HEAD\n  /d\n  /e\n";
    let imp = import_httperf(text, "h.log", &HttperfOptions::default())
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    round_trip(&imp.scenario);
    let steps = &imp.scenario.sessions[0].steps;
    let shape: Vec<Vec<&str>> = steps
        .iter()
        .map(|x| match x {
            Step::Request(r) => vec![r.method.as_str()],
            Step::Pipeline(rs) => rs.iter().map(|r| r.method.as_str()).collect(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [vec!["GET"], vec!["HEAD", "HEAD"], vec!["GET", "GET"]]
    );
    let got: Vec<(usize, usize)> = imp.warnings.iter().map(|w| (w.line, w.column)).collect();
    assert_eq!(got, [(4, 3)], "{}", show(&imp.warnings));
    assert!(
        imp.warnings[0].message.contains("the 4 pipelined requests")
            && imp.warnings[0].message.contains("HEAD"),
        "{}",
        imp.warnings[0]
    );

    // A burst longer than a pipeline may be: full pipelines, then the rest.
    let max = headroom_scenario::model::MAX_PIPELINE;
    let mut text = String::from("/p0\n");
    for i in 1..max + 3 {
        text.push_str(&format!("  /p{i}\n"));
    }
    let imp = import_httperf(&text, "long.log", &HttperfOptions::default())
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    round_trip(&imp.scenario);
    let steps = &imp.scenario.sessions[0].steps;
    let sizes: Vec<usize> = steps
        .iter()
        .map(|x| match x {
            Step::Pipeline(rs) => rs.len(),
            Step::Request(_) => 1,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(sizes, [1, max, 2]);
    assert_eq!(imp.warnings.len(), 1, "{}", show(&imp.warnings));
    assert_eq!(imp.warnings[0].line, max + 2);
    assert!(imp.warnings[0]
        .message
        .contains(&format!("more than {max}")));
}

#[test]
fn httperf_defaults_and_errors() {
    let imp = import_httperf("/a\n", "one.log", &HttperfOptions::default()).unwrap();
    assert_eq!(imp.scenario.load.phases[0].rate, Rate::Fixed(1.0));
    assert_eq!(
        imp.scenario.load.phases[0].duration,
        Duration::from_secs(60)
    );
    assert_eq!(imp.scenario.name.as_deref(), Some("one"));
    let cases = [
        ("  /indented-first\n", 1, 3, "no burst has started"),
        ("/a think=soon\n", 1, 4, "think=soon"),
        ("/a contents='open\n", 1, 13, "unclosed '"),
        ("/a method=post\n", 1, 4, "upper-case"),
        ("a.html\n", 1, 1, "starting with '/'"),
        ("# only a comment\n\n", 3, 1, "no session"),
    ];
    for (text, line, col, want) in cases {
        let errs = import_httperf(text, "x.log", &HttperfOptions::default()).unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.line == line && e.column == col && e.message.contains(want)),
            "{text:?}: {}",
            show(&errs)
        );
    }
}

#[test]
fn httperf_docs_example_is_current() {
    let docs = std::fs::read_to_string(root().join("docs/import.md")).unwrap();
    let start = docs
        .find("```\n# httperf --wsesslog")
        .expect("example in docs")
        + 4;
    let end = start + docs[start..].find("```").unwrap();
    let imp = import_httperf(
        &docs[start..end],
        "sessions.wsesslog",
        &HttperfOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{}", show(&e)));
    let yaml = to_yaml(&imp.scenario);
    assert!(
        docs.contains(&format!("```yaml\n{yaml}```")),
        "docs/import.md is stale:\n{yaml}"
    );
    assert!(
        docs.contains(&format!("`{}`", imp.warnings[0])),
        "{}",
        imp.warnings[0]
    );
}
