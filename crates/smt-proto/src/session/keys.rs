use std::sync::Arc;

use crate::crypto::{KeyUpdate, PacketCipher};

/// Which side of the session this endpoint is, as in TLS: the client is the
/// side that started the handshake. The role fixes the low bit of the RPC
/// IDs each side allocates, so the two sides' IDs never collide within one
/// direction's sequence space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Started the handshake; its RPC IDs are even.
    Client,
    /// Answered the handshake; its RPC IDs are odd.
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

/// Traffic keys of one session, one cipher per direction — what the SMT paper
/// installs with a kTLS-style `setsockopt` after the handshake.
#[derive(Clone, Debug)]
pub struct SessionKeys {
    /// This endpoint's side of the session.
    pub role: Role,
    /// Protects what this endpoint sends.
    pub tx: Arc<dyn PacketCipher>,
    /// Opens what the peer sends.
    pub rx: Arc<dyn PacketCipher>,
    /// Derives the next epoch's keys when the message-ID space or the key's
    /// AEAD limit runs low; `None`: the session cannot rekey and refuses new
    /// messages when exhausted.
    pub update: Option<Arc<dyn KeyUpdate>>,
}

impl SessionKeys {
    /// Keys for one session.
    pub fn new(role: Role, tx: Arc<dyn PacketCipher>, rx: Arc<dyn PacketCipher>) -> Self {
        Self {
            role,
            tx,
            rx,
            update: None,
        }
    }

    /// The same keys, able to rekey with `update`.
    pub fn with_update(mut self, update: Arc<dyn KeyUpdate>) -> Self {
        self.update = Some(update);
        self
    }
}
