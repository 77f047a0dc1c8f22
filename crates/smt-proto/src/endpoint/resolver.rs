//! Keys for peers the endpoint has none for, and the check that keys
//! given to it cannot authenticate a peer's own packets reflected back.

use std::net::SocketAddr;

use crate::SessionKeys;

/// Finds session keys for a peer without installed keys (SMT's
/// wildcard key template): called on the first packet from that peer. Return
/// distinct keys per peer (e.g. derived from a master secret and the
/// peer's address): one key shared by several clients would repeat nonces.
pub trait KeyResolver: Send {
    /// Keys for `peer`, or `None` to leave it without a session (its
    /// packet is dropped as `DropReason::UnknownSession`).
    fn resolve(&mut self, peer: SocketAddr) -> Option<SessionKeys>;
}

impl<F: FnMut(SocketAddr) -> Option<SessionKeys> + Send> KeyResolver for F {
    fn resolve(&mut self, peer: SocketAddr) -> Option<SessionKeys> {
        self(peer)
    }
}

/// Whether both directions use one key: then a peer's packets reflected
/// back to it would authenticate. Probed through the control MAC, which
/// depends only on the key (the null cipher's all-zero MAC is exempt).
pub(super) fn keys_are_reflectable(keys: &SessionKeys) -> bool {
    const PROBE: &[u8] = b"smt reflection probe";
    let tag = keys.tx.control_tag(PROBE);
    tag != [0; crate::crypto::TAG_LEN] && tag == keys.rx.control_tag(PROBE)
}
