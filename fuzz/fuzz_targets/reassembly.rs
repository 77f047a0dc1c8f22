//! Message reassembly driven by arbitrary operation sequences. The body and
//! its input format live in the library (`smt_proto::fuzzing`, built with
//! `--cfg fuzzing`), next to the crate-private state it drives.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    smt_proto::fuzzing::reassembly_ops(data);
});
