//! Fuzzes the vSphere simulator's SOAP decoding and dispatch.
//!
//! Run with `cargo fuzz run soap_request` from the repository root.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    infrasim_vsphere_sim::fuzzing::exercise(data);
});
