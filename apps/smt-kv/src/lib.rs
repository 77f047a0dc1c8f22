//! `smt-kv`: a Redis-compatible key-value store served over plain TCP,
//! TLS 1.3 over TCP and SMT, from one event loop on one database (after
//! the Redis port of Gao et al., "Designing Transport-Level Encryption for
//! Datacenter Networks", § 5.3), with a YCSB A–D runner (their Fig. 8).
//!
//! - [`resp`]: RESP2 requests (multibulk and inline, with Redis's limits
//!   and quirks) and replies;
//! - [`db`]: the keyspace (strings, hashes, lists, sets, sorted sets,
//!   TTLs, SCAN cursors);
//! - [`cmd`]: the commands and their errors, in Redis's words, and AUTH;
//! - [`server`]: the event loop and its three front ends;
//! - [`kv_client`]: [`kv_client::KvClient`], the client over SMT for Rust
//!   programs, which speaks the [`redis`] crate's traits (`Commands`,
//!   pipelines, `FromRedisValue`);
//! - [`client`]: blocking raw clients over each transport (YCSB, tests,
//!   `smt-kv cli`);
//! - [`ycsb`]: the workload generator, runner, report and plot.
//!
//! See `docs/apps.md`.

#![warn(missing_docs, unreachable_pub)]

pub mod client;
pub mod cmd;
pub mod db;
pub mod kv_client;
pub mod num;
pub mod resp;
pub mod server;
pub mod session;
pub mod ycsb;

/// The `redis` crate whose traits [`kv_client::KvClient`] implements:
/// `use smt_kv::redis::Commands` gets the same version.
pub use redis;
