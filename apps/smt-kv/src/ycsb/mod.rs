//! YCSB core workloads A–D against the store. Placeholder while the runner
//! is written.
pub mod cli;
