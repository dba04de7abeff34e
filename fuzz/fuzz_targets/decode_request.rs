//! Fuzzes request decoding end to end: routing, query and selector parsing, JSON / YAML /
//! protobuf bodies, and the full handler of an in-memory API server.
//!
//! Run with `cargo fuzz run decode_request` from the repository root.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    infrasim_kube_api::fuzzing::exercise(data);
});
