//! The 0-RTT exchange behind `smt_proto`'s [`Handshake`] trait.
//!
//! The core's `Handshake` yields keys once ([`Handshake::take_keys`]); here
//! that is the SMT-key, available at once on both sides, so the client can
//! send in its first flight. The forward-secret key comes out separately
//! through `take_fs_keys`:
//!
//! - the endpoint installs the SMT-key as **epoch 0** as soon as
//!   `take_keys` returns it;
//! - it installs the fs-key as **epoch 1** when `take_fs_keys` returns it
//!   (the server: right after the hello, together with the reply it
//!   writes; the client: once it has read the ServerReply0), and keeps
//!   epoch 0 as the previous epoch so 0-RTT messages still in flight
//!   complete;
//! - message IDs restart in epoch 1: the keys differ, so an ID reused
//!   across epochs never reuses a nonce under one key.
//!
//! Without forward secrecy there is no fs-key: the SMT-key carries a key
//! update, and later epochs come from it as with TLS 1.3's KeyUpdate.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use smt_proto::{AddressProof, Handshake, HandshakeError, SessionKeys};

use crate::exchange::{ZeroRttClient, ZeroRttServer};
use crate::keys::KeyPool;
use crate::message::frame_len;
use crate::ticket::VerifiedTicket;
use crate::TicketError;

/// The keys of the two epochs a 0-RTT exchange yields, each taken once:
/// the SMT-key (epoch 0) and, with forward secrecy, the fs-key (epoch 1).
#[derive(Default)]
struct EpochKeys {
    smt: Option<SessionKeys>,
    fs: Option<SessionKeys>,
}

impl EpochKeys {
    /// The fs-key through `Handshake::take_next_keys`: only after the
    /// SMT-key was taken, since it is the *next* epoch.
    fn take_next(&mut self) -> Option<SessionKeys> {
        if self.smt.is_some() {
            return None;
        }
        self.fs.take()
    }
}

/// The client side as a [`Handshake`]: `write` emits the ClientHello0,
/// `take_keys` returns the SMT-key immediately (0-RTT), and with forward
/// secrecy `read` consumes the ServerReply0, after which
/// [`ZeroRttClientHandshake::take_fs_keys`] returns the fs-key.
pub struct ZeroRttClientHandshake {
    hello: Option<Vec<u8>>,
    keys: EpochKeys,
    pending: Option<ZeroRttClient>,
    inbox: Vec<u8>,
}

impl ZeroRttClientHandshake {
    /// Starts the exchange, stamped with the system clock (see
    /// [`ZeroRttClient::start`]).
    pub fn new(verified: &VerifiedTicket, pool: &KeyPool, fs: bool) -> Self {
        Self::new_at(verified, pool, fs, SystemTime::now())
    }

    /// Starts the exchange with `now` as the hello's time (see
    /// [`ZeroRttClient::start_at`]).
    pub fn new_at(verified: &VerifiedTicket, pool: &KeyPool, fs: bool, now: SystemTime) -> Self {
        let (hello, smt_keys, pending) = ZeroRttClient::start_at(verified, pool, fs, now);
        Self {
            hello: Some(hello),
            keys: EpochKeys {
                smt: Some(smt_keys),
                fs: None,
            },
            pending: Some(pending),
            inbox: Vec::new(),
        }
    }

    /// The fs-key (`Role::Client`), once, after the ServerReply0 was read
    /// and its confirmation checked. Install it as the next epoch.
    pub fn take_fs_keys(&mut self) -> Option<SessionKeys> {
        self.keys.fs.take()
    }

    /// Whether nothing more is expected from the server: forward secrecy
    /// was not requested, or the reply was processed.
    pub fn is_complete(&self) -> bool {
        self.pending
            .as_ref()
            .is_none_or(|pending| !pending.forward_secrecy())
    }
}

impl Handshake for ZeroRttClientHandshake {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        if data.is_empty() {
            return Ok(());
        }
        if self.is_complete() {
            return Err(HandshakeError::Protocol(
                "unexpected handshake bytes: the 0-RTT exchange expects no (more) reply".to_owned(),
            ));
        }
        self.inbox.extend_from_slice(data);
        let Some(len) = complete_message(&self.inbox)? else {
            return Ok(());
        };
        debug_assert_eq!(len, self.inbox.len());
        // NOTE(unwrap): `is_complete` returned false, so `pending` is set.
        let pending = self.pending.take().expect("a reply is expected");
        let keys = pending.finish(&self.inbox)?;
        self.inbox.clear();
        self.keys.fs = Some(keys);
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        if let Some(hello) = self.hello.take() {
            out.extend_from_slice(&hello);
        }
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        self.keys.smt.take()
    }

    fn take_next_keys(&mut self) -> Option<SessionKeys> {
        self.keys.take_next()
    }
}

impl fmt::Debug for ZeroRttClientHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZeroRttClientHandshake")
            .field("hello_pending", &self.hello.is_some())
            .field("complete", &self.is_complete())
            .field("buffered", &self.inbox.len())
            .finish_non_exhaustive()
    }
}

/// The server side as a [`Handshake`]: `read` consumes the ClientHello0,
/// `take_keys` then returns the SMT-key, and with forward secrecy `write`
/// emits the ServerReply0 and [`ZeroRttServerHandshake::take_fs_keys`]
/// returns the fs-key.
pub struct ZeroRttServerHandshake {
    server: Arc<ZeroRttServer>,
    now: SystemTime,
    inbox: Vec<u8>,
    outbox: Vec<u8>,
    keys: EpochKeys,
    accepted: bool,
    forward_secrecy: bool,
}

impl ZeroRttServerHandshake {
    /// A handshake for one peer. `now` is the time the hello is judged at
    /// (the ticket's validity): pass the time the peer's first handshake
    /// bytes arrived, since the `Handshake` trait carries no clock.
    pub fn new(server: Arc<ZeroRttServer>, now: SystemTime) -> Self {
        Self {
            server,
            now,
            inbox: Vec::new(),
            outbox: Vec::new(),
            keys: EpochKeys::default(),
            accepted: false,
            forward_secrecy: false,
        }
    }

    /// The fs-key (`Role::Server`), once, when the hello asked for forward
    /// secrecy. Install it as the next epoch once the reply is written.
    pub fn take_fs_keys(&mut self) -> Option<SessionKeys> {
        self.keys.fs.take()
    }

    /// Whether the hello was accepted.
    pub fn is_complete(&self) -> bool {
        self.accepted
    }
}

impl Handshake for ZeroRttServerHandshake {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        if data.is_empty() {
            return Ok(());
        }
        if self.accepted {
            return Err(HandshakeError::Protocol(
                "unexpected handshake bytes after the ClientHello0".to_owned(),
            ));
        }
        self.inbox.extend_from_slice(data);
        if complete_message(&self.inbox)?.is_none() {
            return Ok(());
        }
        let accepted = self.server.accept(&self.inbox, self.now)?;
        self.inbox.clear();
        self.accepted = true;
        self.keys.smt = Some(accepted.smt_keys);
        if let Some((reply, fs_keys)) = accepted.reply {
            self.outbox = reply;
            self.keys.fs = Some(fs_keys);
            self.forward_secrecy = true;
        }
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.outbox);
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        self.keys.smt.take()
    }

    fn take_next_keys(&mut self) -> Option<SessionKeys> {
        self.keys.take_next()
    }

    /// The SMT-key comes from the hello alone, which anyone holding the
    /// (public) ticket can build and send from any address: it proves
    /// nothing. The fs-key depends on the server's ephemeral key, sent only
    /// to the address: a packet under it proves the address. Without
    /// forward secrecy nothing does.
    fn address_proof(&self) -> AddressProof {
        if self.forward_secrecy {
            AddressProof::NextKeys
        } else {
            AddressProof::Never
        }
    }

    /// From the hello's flags: with forward secrecy the fs-key will prove
    /// the address, without it nothing will. An opening that is not a
    /// whole hello proves nothing (it fails when read anyway).
    fn opening_address_proof(&self, opening: &[u8]) -> AddressProof {
        let hello = opening
            .get(..crate::message::CLIENT_HELLO_LEN)
            .unwrap_or(opening);
        match crate::message::ClientHello0::decode(hello) {
            Ok(hello) if hello.flags.forward_secrecy() => AddressProof::NextKeys,
            _ => AddressProof::Never,
        }
    }
}

impl fmt::Debug for ZeroRttServerHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZeroRttServerHandshake")
            .field("accepted", &self.accepted)
            .field("buffered", &self.inbox.len())
            .field("reply_pending", &!self.outbox.is_empty())
            .finish_non_exhaustive()
    }
}

/// `Some(len)` once `inbox` holds exactly one whole message, `None` while
/// it holds a prefix of one; an error for a bad header or trailing bytes.
fn complete_message(inbox: &[u8]) -> Result<Option<usize>, TicketError> {
    match frame_len(inbox)? {
        Some(len) if inbox.len() > len => {
            Err(TicketError::Malformed("bytes after the 0-RTT message"))
        }
        Some(len) if inbox.len() == len => Ok(Some(len)),
        _ => Ok(None),
    }
}
