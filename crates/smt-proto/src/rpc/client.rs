//! A client RPC (one this endpoint started): its request on the way out,
//! its response on the way in, and what it does with a control packet
//! about it. The endpoint finds it (`endpoint/recv.rs`) and carries out
//! what it decides ([`ClientControl`]).

use std::net::SocketAddr;
use std::time::Instant;

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

impl ClientRpc {
    /// Whether the server has our whole request: it answered, and part of
    /// the answer authenticated. Response state alone proves nothing: its
    /// first packet may be another message's with a corrupted (or forged)
    /// ID, and a client that stopped sending on it would never answer the
    /// server's RESENDs for what it lost.
    pub fn request_done(&self) -> bool {
        self.response
            .as_ref()
            .is_some_and(|r| !r.nothing_authenticated())
    }

    /// The RPC's wire key.
    pub fn key(&self) -> ServerRpcHandle {
        ServerRpcHandle {
            peer: self.peer,
            epoch: self.epoch,
            id: self.id,
        }
    }

    /// Takes a control packet about this RPC (not NEED_ACK, which asks
    /// about the response: the endpoint answers it). Any of these is a
    /// sign of life. `ticks` and `resend_ticks` pace retransmission.
    pub fn on_control(&mut self, body: Body, ticks: u64, resend_ticks: u64) -> ClientControl {
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
