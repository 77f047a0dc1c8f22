//! All of `smt-proto`'s integration tests but those named below, in one test
//! binary: each `tests/*.rs` file is a binary of its own that links the
//! whole dependency tree, and the links were a third of CI's test build
//! (issue #27). One module per former file, so
//! `cargo test -p smt-proto --test integration amplification::` runs one of them.
//! Its tests run in parallel threads of one process: a test that must
//! not share its process stays a file of its own in `tests/`.
//!
//! A new test file goes in this directory, with its `mod` line here
//! (a `tests/*.rs` file of its own builds and links one more binary).
//!
//! Binaries of their own, and why:
//! - `tests/allocations.rs`: installs a counting `#[global_allocator]`
//!   for the whole process.
//! - `tests/large_frees.rs`: installs a counting `#[global_allocator]`
//!   for the whole process.
//! - `tests/large_send.rs`: counts page faults of 256 MiB messages:
//!   other tests' allocations and frees in the same heap would change
//!   which pages are fresh.

mod amplification;
mod coalesce;
mod fuzz_seeds;
mod handshake_limits;
mod held_keys;
mod mtu;
mod netsim;
mod pathlet_endpoint;
mod pathlet_wire;
mod record_layer;
mod rekey;
mod rfc8448_records;
mod scenarios;
mod security;
mod sim_soak;
mod spurious;
mod timers;
mod trace;
mod wire_bytes;
