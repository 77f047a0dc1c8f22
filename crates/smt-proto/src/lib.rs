//! Sans-IO protocol core of the Secure Message Transport (SMT).
pub mod crypto;
