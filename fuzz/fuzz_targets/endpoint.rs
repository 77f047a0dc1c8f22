//! A whole server endpoint (null cipher) fed arbitrary datagrams, timeouts
//! and application answers. The harness body lives in the library
//! (`smt_proto::fuzzing`, built with `--cfg fuzzing`); the input format is
//! documented there.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let start = std::time::Instant::now();
    smt_proto::fuzzing::endpoint_datagrams(start, data);
});
