//! Sans-IO protocol core of the Secure Message Transport (SMT).
pub mod crypto;
pub mod record;
pub mod wire;
