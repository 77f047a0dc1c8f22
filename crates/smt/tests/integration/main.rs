//! All of `smt`'s integration tests but those named below, in one test
//! binary: each `tests/*.rs` file is a binary of its own that links the
//! whole dependency tree, and the links were a third of CI's test build
//! (issue #27). One module per former file, so
//! `cargo test -p smt --test integration attack_bitflip::` runs one of them.
//! Its tests run in parallel threads of one process: a test that must
//! not share its process stays a file of its own in `tests/`.
//!
//! A new test file goes in this directory, with its `mod` line here
//! (a `tests/*.rs` file of its own builds and links one more binary).
//!
//! Binaries of their own, and why:
//! - `tests/flood.rs`: samples the process's resident memory
//!   (`/proc/self/status`) as its bound: tests beside it in one process
//!   would add theirs.
//! - `tests/icmp_flood.rs`: measures the process's CPU time
//!   (`/proc/self/stat`) while it should be idle: other tests' threads
//!   in the same process would count.
//! - `tests/large.rs`: `.ci/run`'s long-tests step finds this binary by
//!   its target name `large`.
//! - `tests/relay.rs`: its retransmission bounds hold for endpoints
//!   with the CPU to read what arrived: its 10,000-RPC runs take turns
//!   with each other only (`ONE_RUN_AT_A_TIME`), and beside other
//!   tests' traffic in one process they would be starved.
//! - `tests/soak.rs`: samples the process's resident memory
//!   (`/proc/self/status`) as its bound: tests beside it in one process
//!   would add theirs.
//! - `tests/workers.rs`: its thousand-RPC runs take turns with each
//!   other only (`HEAVY`): beside other tests' traffic in one process
//!   the lossy run would count retransmissions for packets that only
//!   waited for a CPU.

#[path = "../attack_common/mod.rs"]
mod attack_common;
#[path = "../common/mod.rs"]
mod common;

mod attack_bitflip;
mod attack_forge;
mod attack_psk;
mod attack_replay;
mod attack_splice;
mod attack_zero_rtt;
mod burst;
mod cancellation;
mod close_wakes;
mod deadlines;
mod drive;
mod hygiene;
mod local;
mod loopback;
mod metrics;
#[cfg(feature = "observe")]
mod observe;
#[cfg(feature = "offload")]
mod offload;
#[cfg(feature = "offload")]
mod offload_sockets;
mod pathlet;
mod raw_burst;
mod receive_modes;
mod restart;
mod session_identity;
#[cfg(feature = "serde")]
mod stats;
mod tls;
mod unreachable;
mod zero_rtt;
