//! A control packet about one RPC (RESEND, NEED_ACK, BUSY, RPC_UNKNOWN,
//! ABANDONED, OVERLOADED, GRANT, ...), decided by the owners it concerns —
//! the RPC (`ClientRpc::on_control`, `ServerRpc::on_control`: their
//! decision tables), or, for an ID no RPC holds, the peer's ID allocator
//! and replay guard — on the parts they need ([`Parts`]), and returned as
//! a [`Then`] for `Endpoint::apply_control` (`recv.rs`) to carry out (the
//! endpoint alone marks messages sendable, restarts and fails calls, frees
//! requests).

use super::super::peers::{PeerId, Peers};
use super::super::table::RpcTables;
use super::super::{MsgKey, RpcHandle, ServerRpcHandle};
use super::packet::rpc_key;
use super::rpc::RpcParts;
use crate::config::Config;
use crate::error::{DropReason, RpcError};
use crate::rpc::{missing, ClientControl, ServerControl, ServerMsg, ServerSlot};
use crate::session::ReplayCheck;
use crate::wire::Body;

/// What deciding a control packet works on: the peers (their RPC index,
/// IDs and replay guards), the RPC tables, the configuration and the tick.
pub(super) struct Parts<'a> {
    pub(super) peers: &'a mut Peers,
    pub(super) rpcs: &'a mut RpcTables,
    pub(super) config: &'a Config,
    pub(super) ticks: u64,
}

/// What a control packet asks of the endpoint, beside whether it is
/// counted as dropped (the `Result` returned with it).
#[must_use]
pub(in crate::endpoint) enum Then {
    Nothing,
    /// The message has bytes to send again.
    Sendable(MsgKey),
    /// The server lost our request: send it under a fresh ID.
    Restart(RpcHandle),
    Fail(RpcHandle, RpcError),
    /// Ask for the response's missing ranges now.
    Resend(ServerRpcHandle, Vec<(u32, u32)>),
    /// Acknowledge a call we completed (its ACK was lost).
    Ack(ServerRpcHandle),
    /// Answer with a control packet about the packet's RPC.
    Say(Body),
    /// The client is done with its request (or cancelled it): free it.
    ClientGone {
        slot: ServerSlot,
        cancelled: bool,
    },
}

/// A control packet's outcome: what to do, and whether it is dropped.
pub(super) type Decided = (Then, Result<(), DropReason>);

impl RpcParts<'_> {
    /// A control packet of a session (decision table): ACK and CREDIT
    /// are the peer's as a whole (taken here), the rest about one RPC of
    /// ours (`local`) or of the peer's, decided by [`for_client`] or
    /// [`for_server`] and returned for `Endpoint::apply_control`.
    pub(super) fn on_control(
        &mut self,
        pid: PeerId,
        key: ServerRpcHandle,
        local: bool,
        body: Body,
    ) -> Decided {
        match body {
            Body::Ack(ids) => {
                self.on_ack(pid, key, &ids);
                return (Then::Nothing, Ok(()));
            }
            Body::Credit { limit, sequence } => {
                let stats = &mut self.counters.stats;
                let taken = self
                    .load
                    .credits
                    .on_credit(key.peer, (limit, sequence), stats);
                return (Then::Nothing, taken);
            }
            Body::Handshake { .. } | Body::Data(_) | Body::KeyUpdate => {
                return (Then::Nothing, Err(DropReason::Unsupported))
            }
            _ => {}
        }
        let parts = Parts {
            peers: self.peers,
            rpcs: self.rpcs,
            config: self.config,
            ticks: self.time.ticks,
        };
        match local {
            true => for_client(parts, pid, key, body),
            false => for_server(parts, pid, key, body),
        }
    }
}

/// A control packet about an RPC we started.
pub(super) fn for_client(p: Parts<'_>, pid: PeerId, key: ServerRpcHandle, body: Body) -> Decided {
    let Some(handle) = p.peers.client(&rpc_key(pid, &key)) else {
        return for_unknown_call(p.peers, pid, key, body);
    };
    let Some(rpc) = p.rpcs.clients.get_mut(&handle) else {
        return (Then::Nothing, Err(DropReason::UnknownRpc));
    };
    if body == Body::NeedAck {
        // The server believes it sent the whole response, but we are
        // still missing some of it: ask for it now rather than on the
        // next silent tick (and NEED_ACK is no sign of progress).
        let gaps = missing(rpc.response.as_ref(), p.config.max_resend_bytes);
        return (Then::Resend(key, gaps), Ok(()));
    }
    let interval = u64::from(p.config.resend_ticks);
    let then = match rpc.on_control(body, p.ticks, interval) {
        ClientControl::Nothing => Then::Nothing,
        ClientControl::Sendable => Then::Sendable(MsgKey::Client(handle)),
        ClientControl::Restart => Then::Restart(handle),
        ClientControl::Fail(e) => Then::Fail(handle, e),
        ClientControl::Unsupported => return (Then::Nothing, Err(DropReason::Unsupported)),
    };
    (then, Ok(()))
}

/// A control packet about an ID of ours that no call holds (decision
/// table): a NEED_ACK for an ID we allocated is a call we completed
/// whose ACK was lost; a RESEND is for a call we no longer know.
fn for_unknown_call(peers: &Peers, pid: PeerId, key: ServerRpcHandle, body: Body) -> Decided {
    let unknown = Err(DropReason::UnknownRpc);
    match body {
        Body::NeedAck if was_allocated(peers, pid, key) => (Then::Ack(key), Ok(())),
        Body::Resend { .. } => (Then::Say(Body::RpcUnknown), unknown),
        _ => (Then::Nothing, unknown),
    }
}

/// Whether we allocated `key`'s ID under its key epoch.
pub(super) fn was_allocated(peers: &Peers, pid: PeerId, key: ServerRpcHandle) -> bool {
    peers
        .at(pid)
        .and_then(|s| s.session.epoch(key.epoch))
        .is_some_and(|e| e.ids.was_allocated(key.id))
}

/// A control packet about an RPC the peer started.
pub(super) fn for_server(p: Parts<'_>, pid: PeerId, key: ServerRpcHandle, body: Body) -> Decided {
    let interval = u64::from(p.config.resend_ticks);
    let found = p.peers.server(&rpc_key(pid, &key));
    let Some((slot, rpc)) = found.and_then(|s| Some((s, p.rpcs.servers.get_mut(s)?))) else {
        return for_unknown_request(p.peers, pid, key, body);
    };
    let then = match rpc.on_control(body, p.ticks, interval) {
        ServerControl::Nothing => Then::Nothing,
        ServerControl::Sendable => Then::Sendable(MsgKey::Server(ServerMsg { rpc: key, slot })),
        ServerControl::Busy => Then::Say(Body::Busy),
        ServerControl::ClientGone { cancelled } => Then::ClientGone { slot, cancelled },
        ServerControl::Unsupported => return (Then::Nothing, Err(DropReason::Unsupported)),
    };
    (then, Ok(()))
}

/// A control packet about a request we hold no state for (decision
/// table, on the peer's replay guard). RPC_UNKNOWN makes the client
/// resend the request under a new ID, so it is only said for IDs never
/// delivered, and the ID is then retired: late packets of it can no
/// longer start a second execution. A retired ID keeps getting
/// RPC_UNKNOWN: the first answer may have been lost. At most once, even
/// across restarts. A refused ID hears OVERLOADED again, never ABANDONED.
fn for_unknown_request(
    peers: &mut Peers,
    pid: PeerId,
    key: ServerRpcHandle,
    body: Body,
) -> Decided {
    let unknown = Err(DropReason::UnknownRpc);
    let resend = matches!(body, Body::Resend { .. });
    let Some(epoch) = peers
        .at_mut(pid)
        .and_then(|s| s.session.epoch_mut(key.epoch))
    else {
        return (Then::Nothing, Err(DropReason::KeyPhase));
    };
    if resend && epoch.replay.is_refused(key.id) {
        return (Then::Say(Body::Overloaded), unknown);
    }
    let fresh = epoch.replay.check(key.id) == ReplayCheck::Fresh;
    if resend && (fresh || epoch.replay.is_retired(key.id)) {
        epoch.replay.retire(key.id);
        return (Then::Say(Body::RpcUnknown), unknown);
    }
    if resend {
        // Delivered, and its state is gone (abandoned, timed out): no
        // answer will ever come, so say so (again, if the first ABANDONED
        // was lost) rather than let the client wait.
        return (Then::Say(Body::Abandoned), unknown);
    }
    (Then::Nothing, unknown)
}
