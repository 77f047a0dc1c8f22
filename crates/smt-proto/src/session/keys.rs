use std::sync::Arc;

use crate::crypto::PacketCipher;

/// Which side of the session this endpoint is, as in TLS: the client is the
/// side that started the handshake. The role fixes the low bit of the RPC
/// IDs each side allocates, so the two sides' IDs never collide within one
/// direction's sequence space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    /// The low bit of IDs this side allocates.
    pub fn id_bit(self) -> u64 {
        match self {
            Self::Client => 0,
            Self::Server => 1,
        }
    }
}

/// Traffic keys of one session, one cipher per direction — what the paper
/// installs with a kTLS-style `setsockopt` after the handshake.
#[derive(Clone, Debug)]
pub struct SessionKeys {
    /// This endpoint's side of the session.
    pub role: Role,
    /// Protects what this endpoint sends.
    pub tx: Arc<dyn PacketCipher>,
    /// Opens what the peer sends.
    pub rx: Arc<dyn PacketCipher>,
}

impl SessionKeys {
    /// Keys for one session.
    pub fn new(role: Role, tx: Arc<dyn PacketCipher>, rx: Arc<dyn PacketCipher>) -> Self {
        Self { role, tx, rx }
    }
}
