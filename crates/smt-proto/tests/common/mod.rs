//! Set-up shared by the integration tests that drive two endpoints by hand
//! (not through `smt_proto::sim`): loopback addresses and endpoints with an
//! installed null-cipher session.

use std::net::SocketAddr;
use std::sync::Arc;

use smt_proto::crypto::NullCipher;
use smt_proto::{Config, Endpoint, Role, SessionKeys};

pub const CLIENT: u16 = 40_000;
pub const SERVER: u16 = 4_000;

pub fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// An endpoint on `config.local_port` with a null-cipher session to
/// `peer` installed.
pub fn null_session_endpoint(config: Config, peer: u16, role: Role) -> Endpoint {
    let mut ep = Endpoint::new(config).expect("valid config");
    let keys = SessionKeys::new(role, Arc::new(NullCipher), Arc::new(NullCipher));
    ep.install_session(addr(peer), keys)
        .expect("null keys are not reflectable");
    ep
}
