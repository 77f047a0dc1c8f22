//! Session establishment on the client side: which handshake a call to a
//! peer without keys starts, and the calls that wait for one (or for a key
//! epoch to drain).
//!
//! The server side needs nothing here: the core opens a handshake when a
//! HANDSHAKE packet arrives and asks the acceptor for it.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use smt_handshake::{KeyPool, VerifiedTicket, ZeroRttClientHandshake};
use smt_proto::{Endpoint as Core, HandshakeError, HandshakeKind};
use smt_tls::{ServerName, TlsClient};

use super::outcome::CallToken;
use crate::keys::PskClient;

/// Ephemeral key pairs kept ready for 0-RTT hellos (SMT paper §4.5.1).
const KEY_POOL_SIZE: usize = 16;

/// A call that has no RPC yet: its bytes wait with it (the caller's own
/// when it gave owned bytes; a copy of a borrowed slice).
pub(crate) struct Parked {
    pub call: CallToken,
    pub data: bytes::Bytes,
}

/// What a started handshake means for the calls that wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Started {
    /// Keys come after one or more round trips.
    Later,
    /// 0-RTT: the keys are installed already; the call can leave with the
    /// hello.
    ZeroRtt,
}

/// The client's ways to get keys, and the calls parked meanwhile.
pub(crate) struct Sessions {
    /// Establishes sessions with TLS 1.3.
    tls_client: Option<TlsClient>,
    /// Establishes sessions with the PSK nonce exchange (preferred over TLS).
    psk_client: Option<PskClient>,
    /// SMT-tickets for 0-RTT sessions, by peer, with their forward-secrecy
    /// choice (preferred over everything else).
    tickets: HashMap<SocketAddr, (Box<VerifiedTicket>, bool)>,
    /// The names TLS verifies peers' certificates against, by peer (else
    /// the peer's IP address).
    server_names: HashMap<SocketAddr, ServerName<'static>>,
    key_pool: KeyPool,
    /// Calls waiting for a handshake with their peer.
    waiting: HashMap<SocketAddr, Vec<Parked>>,
    /// Calls waiting for a key epoch to drain (`SendError::RekeyPending`),
    /// retried every turn.
    deferred: VecDeque<(SocketAddr, Parked)>,
}

impl Sessions {
    pub(super) fn new() -> Self {
        Self {
            tls_client: None,
            psk_client: None,
            tickets: HashMap::new(),
            server_names: HashMap::new(),
            key_pool: KeyPool::new(KEY_POOL_SIZE),
            waiting: HashMap::new(),
            deferred: VecDeque::new(),
        }
    }

    pub(super) fn set_tls_client(&mut self, client: TlsClient) {
        self.tls_client = Some(client);
    }

    pub(super) fn set_psk_client(&mut self, client: PskClient) {
        self.psk_client = Some(client);
    }

    pub(super) fn set_ticket(
        &mut self,
        peer: SocketAddr,
        ticket: VerifiedTicket,
        forward_secrecy: bool,
    ) {
        self.tickets
            .insert(peer, (Box::new(ticket), forward_secrecy));
    }

    pub(super) fn set_server_name(&mut self, peer: SocketAddr, name: ServerName<'static>) {
        self.server_names.insert(peer, name);
    }

    /// Whether a call to `peer` without a session can get one.
    pub(super) fn can_connect(&self, peer: SocketAddr) -> bool {
        self.tls_client.is_some() || self.psk_client.is_some() || self.tickets.contains_key(&peer)
    }

    /// Starts the handshake `peer` gets: a 0-RTT ticket if one is set,
    /// else the PSK nonce exchange, else TLS 1.3 naming the peer by the
    /// name set for it, or by its IP address.
    pub(super) fn start_handshake(
        &mut self,
        core: &mut Core,
        now: Instant,
        peer: SocketAddr,
        local_addr: SocketAddr,
    ) -> Result<Started, HandshakeError> {
        if let Some((ticket, fs)) = self.tickets.get(&peer) {
            let hs = ZeroRttClientHandshake::new(ticket, &self.key_pool, *fs);
            core.connect(now, peer, Box::new(hs), HandshakeKind::SMT_TICKET);
            return Ok(Started::ZeroRtt);
        }
        if let Some(psk) = &self.psk_client {
            let hs = psk.handshake(local_addr);
            core.connect(now, peer, Box::new(hs), HandshakeKind::PSK_NONCE);
            return Ok(Started::Later);
        }
        let Some(client) = &self.tls_client else {
            return Err(HandshakeError::Protocol(
                "no way to establish a session is set".into(),
            ));
        };
        let name = self
            .server_names
            .get(&peer)
            .cloned()
            .unwrap_or_else(|| ServerName::IpAddress(peer.ip().into()));
        let hs = client
            .handshake_to(name)
            .map_err(|e| HandshakeError::Protocol(e.to_string()))?;
        core.connect(now, peer, hs, HandshakeKind::TLS13);
        Ok(Started::Later)
    }

    /// Replaces the key pair a 0-RTT hello used, off the call's path.
    pub(super) fn refill_key_pool(&self) {
        self.key_pool.refill();
    }

    /// Parks a call until the handshake with `peer` ends.
    pub(super) fn wait_for_handshake(&mut self, peer: SocketAddr, parked: Parked) {
        self.waiting.entry(peer).or_default().push(parked);
    }

    /// The calls that waited for the handshake with `peer`.
    pub(super) fn handshake_ended(&mut self, peer: SocketAddr) -> Vec<Parked> {
        self.waiting.remove(&peer).unwrap_or_default()
    }

    /// Parks a call until the next turn.
    pub(super) fn defer(&mut self, peer: SocketAddr, parked: Parked) {
        self.deferred.push_back((peer, parked));
    }

    /// The deferred calls, to be retried now; `None` if there are none
    /// (every turn asks: taking and dropping an empty queue cost ~70
    /// instructions a turn).
    pub(super) fn take_deferred(&mut self) -> Option<VecDeque<(SocketAddr, Parked)>> {
        if self.deferred.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.deferred))
    }

    /// Forgets a parked call; false if none has that token.
    pub(super) fn cancel(&mut self, call: CallToken) -> bool {
        let before = self.parked_count();
        for calls in self.waiting.values_mut() {
            calls.retain(|p| p.call != call);
        }
        self.deferred.retain(|(_, p)| p.call != call);
        self.parked_count() != before
    }

    fn parked_count(&self) -> usize {
        self.waiting.values().map(Vec::len).sum::<usize>() + self.deferred.len()
    }

    /// Every parked call, removed (the endpoint is closing).
    pub(super) fn drain(&mut self) -> Vec<CallToken> {
        let waiting = self.waiting.drain().flat_map(|(_, calls)| calls);
        let deferred = self.deferred.drain(..).map(|(_, p)| p);
        waiting.chain(deferred).map(|p| p.call).collect()
    }

    /// Whether any call waits for a handshake or a key epoch.
    pub(super) fn has_parked(&self) -> bool {
        !self.waiting.is_empty() || !self.deferred.is_empty()
    }
}
