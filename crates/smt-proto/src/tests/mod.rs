//! Scenario tests that read the endpoint's internal state, on the
//! [`Pair`](crate::sim::Pair) harness or a hand-driven endpoint. Tests that
//! need only the public API (and real AES-GCM keys from smt-relay) are
//! integration tests in `crates/smt-proto/tests/`.

mod credit;
mod limits;
mod refusal;
mod scenarios;
