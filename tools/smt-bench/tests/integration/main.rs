//! All of `smt-bench`'s integration tests but those named below, in one test
//! binary: each `tests/*.rs` file is a binary of its own that links the
//! whole dependency tree, and the links were a third of CI's test build
//! (issue #27). One module per former file, so
//! `cargo test -p smt-bench --test integration slots::` runs one of them.
//! Its tests run in parallel threads of one process: a test that must
//! not share its process stays a file of its own in `tests/`.
//!
//! A new test file goes in this directory, with its `mod` line here
//! (a `tests/*.rs` file of its own builds and links one more binary).

mod link_mtu;
mod slots;
mod smoke;
mod workers;
