//! YCSB's core workloads A–D against the store, over TCP, TLS 1.3/TCP and
//! SMT (as in Gao et al. § 5.3, Fig. 8): the generator ([`zipf`], [`workload`]),
//! the runner ([`run`]), the table and JSON ([`report`]) and the figure
//! ([`plot`]). `smt-kv ycsb --help` for the command.

pub mod cli;
pub mod plot;
pub mod report;
pub mod run;
pub mod workload;
pub mod zipf;
