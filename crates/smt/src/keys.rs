//! Session keys without a handshake (pre-shared-key mode), the PSK nonce
//! exchange and the PSK key log: the `smt-handshake` crate's [`psk`
//! module](smt_handshake::psk), re-exported so that applications need only
//! this crate.

pub use smt_handshake::psk::*;
