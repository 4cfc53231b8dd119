//! Fuzz the lab's experiment parser (`headroom_lab::experiment::load_str`, with and without
//! `--quick`). Checked besides "no panic" and the RSS limit (`-rss_limit_mb=2048`): the
//! configurations are counted before they are expanded, so an accepted experiment never has more
//! than the ceiling of `max_configurations:`.
#![no_main]

use headroom_lab::experiment::{load_str, MAX_CONFIGURATIONS_CEILING};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let path = Path::new("/nonexistent-headroom-fuzz/e.yaml");
    if let Ok(l) = load_str(&text, path, first & 1 == 1) {
        assert!(!l.configurations.is_empty());
        assert!(l.configurations.len() as u64 <= MAX_CONFIGURATIONS_CEILING);
    }
});
