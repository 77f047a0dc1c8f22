//! `smt-bench`: SMT against its peers on loopback, every system on the
//! same workloads in the same run. See `docs/benchmarks.md`,
//! "Peer comparison (smt-bench)".
//!
//! - [`systems`]: SMT (AES-128-GCM, null cipher, raw IP, GRO off, busy
//!   poll), TCP and TLS 1.3 pools, pipelined TLS 1.3 (writes coalesced,
//!   or one write per request), quinn, and the bare UDP/TCP floor, each
//!   behind the same [`systems::Slot`] interface;
//! - [`workload`]: closed loops and a Poisson open loop over slots;
//! - [`run`]: one system at a time, pinned or not, nothing left running;
//! - [`report`], [`plot`]: tables with ratios, targets, JSON, CSV, SVG.

#![warn(missing_docs, unreachable_pub)]

pub mod cli;
pub mod dist;
pub mod plot;
pub mod record;
pub mod report;
pub mod run;
pub mod sys;
pub mod systems;
pub mod workload;
