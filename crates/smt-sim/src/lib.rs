//! Deterministic simulation harness for SMT.
