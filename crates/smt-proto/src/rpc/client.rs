//! A client RPC (one this endpoint started): its request on the way out,
//! its response on the way in, and what it does with a control packet
//! about it. The endpoint finds it (`endpoint/recv.rs`) and carries out
//! what it decides ([`ClientControl`]).

use std::net::SocketAddr;
use std::time::Instant;

use super::silence::{is_resend_tick, missing, starved, Silence};
use super::{Incoming, Outgoing, ServerRpcHandle};
use crate::endpoint::PeerId;
use crate::error::RpcError;
use crate::wire::Body;

#[derive(Debug)]
pub(crate) struct ClientRpc {
    pub peer: SocketAddr,
    /// The peer's slot (a new session fails the RPC, so it stays valid).
    pub peer_id: PeerId,
    pub epoch: u64,
    pub id: u64,
    /// The request in its wire form; a restart takes the data again from
    /// it (`Outgoing::recover`).
    pub request: Outgoing,
    pub response: Option<Incoming>,
    pub silent_ticks: u32,
    pub restarts: u32,
    /// The server lost the request, but no message ID is free until the
    /// previous key epoch drains: the tick retries the restart.
    pub restart_pending: bool,
    /// When the application started it, for `Stats::rtt`.
    pub started: Instant,
}

/// What the endpoint does after a client RPC took a control packet.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ClientControl {
    /// Nothing more (BUSY: the server is alive).
    Nothing,
    /// The request has bytes to send (a GRANT or RESEND).
    Sendable,
    /// The server lost the request (RPC_UNKNOWN): start it again.
    Restart,
    /// The server refused or gave up on it.
    Fail(RpcError),
    /// Not a packet a client hears.
    Unsupported,
}

/// What a tick decided for a client RPC.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ClientTick {
    /// Nothing to do (not silent, or not a tick to ask on).
    Idle,
    /// Repeat our grant (this offset) for a response we starve: the
    /// server, which waits for it, must hear that we are alive.
    KeepAlive(u32),
    /// Ask for these (offset, length) ranges of the response.
    Resend(Vec<(u32, u32)>),
    /// Silent for `abort_ticks`: fail the RPC.
    TimedOut,
}

impl ClientRpc {
    /// A call to `peer` (slot `peer_id`) as message `id` of key epoch
    /// `epoch`, its request sealed, started at `now`.
    #[inline]
    pub(crate) fn new(
        (peer, peer_id): (SocketAddr, PeerId),
        (epoch, id): (u64, u64),
        request: Outgoing,
        now: Instant,
    ) -> Self {
        Self {
            peer,
            peer_id,
            epoch,
            id,
            request,
            response: None,
            silent_ticks: 0,
            restarts: 0,
            restart_pending: false,
            started: now,
        }
    }

    /// The server lost the request: the call goes on as message `id` of
    /// key epoch `epoch` with `request` (the old one sealed again). Returns
    /// the old request and any partial response, to recycle (nothing of a
    /// response stands once the server lost the request).
    pub(crate) fn restart_as(
        &mut self,
        (epoch, id): (u64, u64),
        request: Outgoing,
    ) -> (Outgoing, Option<Incoming>) {
        self.epoch = epoch;
        self.id = id;
        self.restarts += 1;
        self.silent_ticks = 0;
        self.restart_pending = false;
        let old = std::mem::replace(&mut self.request, request);
        (old, self.response.take())
    }

    /// No fresh ID yet for a restart: the previous key epoch must drain
    /// first. The tick retries (and the wait is not silence).
    pub(crate) fn defer_restart(&mut self) {
        self.restart_pending = true;
        self.silent_ticks = 0;
    }

    /// One tick of the RPC's silence (decision table, see `silence.rs`):
    /// silence of our own doing (the request waits for its turn, or the
    /// response for a grant we give to others) is not counted.
    pub(crate) fn on_tick(&mut self, s: &Silence) -> ClientTick {
        if !self.request_done() && self.request.has_sendable() {
            // Silence is our own doing: the request still waits for the
            // sender's turn (SRPT), not for the peer (Homa's rule).
            self.silent_ticks = 0;
            return ClientTick::Idle;
        }
        if let Some(inc) = self.response.as_ref().filter(|i| starved(i, s.crowded)) {
            // Also our own doing: every byte we granted has arrived, and
            // the response waits for a grant that goes to messages with
            // fewer bytes left. Not silence; but the server, which waits
            // for that grant, must hear that we are alive: repeat the grant.
            self.silent_ticks = 0;
            return match s.ticks.is_multiple_of(u64::from(s.resend_ticks)) {
                true => ClientTick::KeepAlive(inc.granted()),
                false => ClientTick::Idle,
            };
        }
        self.silent_ticks += 1;
        if self.silent_ticks >= s.abort_ticks {
            self.log_timeout(s.ticks);
            return ClientTick::TimedOut;
        }
        if !self.is_resend_tick(s) {
            return ClientTick::Idle;
        }
        match missing(self.response.as_ref(), s.max_resend_bytes) {
            gaps if gaps.is_empty() => ClientTick::Idle,
            gaps => ClientTick::Resend(gaps),
        }
    }

    /// A client's first RESEND waits `resend_ticks`, doubled per restart:
    /// a restart means an earlier RESEND overtook its request (a slow path
    /// or a busy host), so the next attempt gives the request longer.
    fn is_resend_tick(&self, s: &Silence) -> bool {
        let r = s.resend_ticks;
        let first = (r << self.restarts.min(4)).min(s.abort_ticks / 2).max(r);
        is_resend_tick(self.silent_ticks, first, r)
    }

    #[cold]
    fn log_timeout(&self, ticks: u64) {
        let response = self.response.as_ref();
        tracing::debug!(
            peer = %self.peer,
            id = self.id,
            request_sent = self.request.sent(),
            request_len = self.request.wire_len(),
            response_received = response.map(|i| i.received()),
            response_granted = response.map(|i| i.granted()),
            response_len = response.map(|i| i.wire_len()),
            ticks,
            "client RPC timed out"
        );
    }

    /// Whether the server has our whole request: it answered, and part of
    /// the answer authenticated. Response state alone proves nothing: its
    /// first packet may be another message's with a corrupted (or forged)
    /// ID, and a client that stopped sending on it would never answer the
    /// server's RESENDs for what it lost.
    pub(crate) fn request_done(&self) -> bool {
        self.response
            .as_ref()
            .is_some_and(|r| !r.nothing_authenticated())
    }

    /// The RPC's wire key.
    pub(crate) fn key(&self) -> ServerRpcHandle {
        ServerRpcHandle {
            peer: self.peer,
            epoch: self.epoch,
            id: self.id,
        }
    }

    /// Takes a control packet about this RPC (not NEED_ACK, which asks
    /// about the response: the endpoint answers it). Any of these is a
    /// sign of life. `ticks` and `resend_ticks` pace retransmission.
    pub(crate) fn on_control(
        &mut self,
        body: Body,
        ticks: u64,
        resend_ticks: u64,
    ) -> ClientControl {
        self.silent_ticks = 0;
        match body {
            Body::Grant { offset, .. } => {
                self.request.grant(offset);
                ClientControl::Sendable
            }
            Body::Resend { offset, length, .. } => {
                self.request.resend(offset, length, ticks, resend_ticks);
                ClientControl::Sendable
            }
            Body::RpcUnknown => ClientControl::Restart,
            Body::Overloaded => ClientControl::Fail(RpcError::Overloaded),
            Body::Abandoned => ClientControl::Fail(RpcError::Abandoned),
            Body::Busy => ClientControl::Nothing,
            _ => ClientControl::Unsupported,
        }
    }
}
