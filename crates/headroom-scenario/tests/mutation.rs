//! A deterministic mutation loop over the examples: random deletions, duplications and swaps of
//! bytes never panic the parser, and every error it reports is located (line >= 1).

use std::path::PathBuf;

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
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut XorShift, src: &[u8]) -> Vec<u8> {
    let mut v = src.to_vec();
    for _ in 0..=rng.below(4) {
        if v.is_empty() {
            break;
        }
        let i = rng.below(v.len());
        match rng.below(3) {
            0 => {
                let n = 1 + rng.below(8).min(v.len() - i - 1);
                v.drain(i..i + n);
            }
            1 => {
                let end = (i + 1 + rng.below(16)).min(v.len());
                let chunk = v[i..end].to_vec();
                let at = rng.below(v.len());
                v.splice(at..at, chunk);
            }
            _ => {
                let j = rng.below(v.len());
                v.swap(i, j);
            }
        }
    }
    v
}

#[test]
fn mutated_examples_never_panic_and_errors_are_located() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut sources = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            // The real file name, so `include`s in a mutant still resolve.
            sources.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
    }
    sources.sort();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut bad) = (0, 0);
    for _ in 0..5_000 {
        let (name, src) = &sources[rng.below(sources.len())];
        let text = String::from_utf8_lossy(&mutate(&mut rng, src)).into_owned();
        match headroom_scenario::parse_str(&text, name) {
            Ok(_) => ok += 1,
            Err(errs) => {
                bad += 1;
                assert!(!errs.is_empty(), "an Err carries at least one error");
                for e in errs {
                    assert!(e.line >= 1 && e.column >= 1, "unlocated: {e:?}\n{text}");
                    assert!(!e.message.is_empty());
                }
            }
        }
    }
    assert!(
        bad > 1_000,
        "mutations should mostly break files: ok {ok}, bad {bad}"
    );
}
