//! Fuzz the JSON-pointer lookup behind `extract: {json: ...}`: reply bodies come from the network
//! and must never panic it. The first line of the input is the pointer, the rest the document.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (ptr, doc) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"/a/0"[..], data),
    };
    let ptr = String::from_utf8_lossy(ptr);
    let _ = headroom_proto::json::pointer(doc, &ptr);
});
