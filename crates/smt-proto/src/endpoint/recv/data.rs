//! DATA with the peer in hand: what `recv.rs`'s fast path and the
//! endpoint's slow path (`store_and_open`) store a packet with. Free
//! functions over the peer, the RPC's message and the endpoint's parts
//! borrowed field by field ([`StoreParts`]), so the peer and the RPC are
//! each found once.

use std::time::Instant;

use super::super::limits::{self, Charge};
use super::super::offload::Nic;
use super::super::peer::Peer;
use super::super::peers::PeerId;
use super::super::scheduler::Scheduler;
use super::super::table::{ClientTable, RpcTables, ServerTable};
use super::super::{MsgKey, RpcHandle, ServerRpcHandle, ServerState};
use crate::buffers::BufferPool;
use crate::config::Config;
use crate::crypto::PacketCipher;
use crate::error::DropReason;
use crate::offload::KeyId;
use crate::record::OffloadTally;
use crate::rpc::{Accepted, Incoming, ServerMsg};
use crate::stats::Stats;
use crate::wire::DataHeader;

/// The endpoint's parts a DATA packet is stored with, borrowed field by
/// field ([`StoreParts`]), so the peer can stay borrowed beside them.
macro_rules! store_parts {
    ($ep:ident) => {
        StoreParts {
            len_limit: $ep.len_limit,
            stats: &mut $ep.counters.stats,
            scheduler: &mut $ep.scheduler,
            config: &$ep.config,
            ledger: &mut $ep.load.ledger,
            buffers: &mut $ep.buffers.pool,
            nic: &$ep.nic,
        }
    };
}

pub(super) use store_parts;

/// One DATA packet on its way into its message: when, from which peer,
/// for which RPC, and what it carries.
#[derive(Clone, Copy)]
pub(super) struct DataIn<'p> {
    pub now: Instant,
    pub pid: PeerId,
    pub key: ServerRpcHandle,
    pub h: &'p DataHeader,
    pub payload: &'p [u8],
}

impl<'p> DataIn<'p> {
    #[inline(always)]
    pub(super) fn new(
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        h: &'p DataHeader,
        payload: &'p [u8],
    ) -> Self {
        Self {
            now,
            pid,
            key,
            h,
            payload,
        }
    }
}

/// The endpoint's parts that storing a DATA packet uses besides the peer
/// and the RPC, borrowed apart so that those two can be held at once.
pub(super) struct StoreParts<'a> {
    /// `Config::message_len_limit` (`Endpoint::len_limit`).
    pub len_limit: u64,
    pub stats: &'a mut Stats,
    pub scheduler: &'a mut Scheduler,
    pub config: &'a Config,
    pub ledger: &'a mut limits::Ledger,
    pub buffers: &'a mut BufferPool,
    pub nic: &'a Nic,
}

/// What storing one DATA packet led to.
pub(super) enum Opened {
    Stored,
    Complete,
    /// A segment failed to authenticate (and whether nothing of the
    /// message has authenticated yet).
    Failed {
        nothing_authenticated: bool,
    },
    /// The message's records disagree with its lengths: drop the packet
    /// and the message (`discard_incoming`).
    Discard(DropReason),
    /// Storing the packet takes a new buffer of this many bytes: nothing
    /// was done; the memory bounds must admit it first.
    NeedsRoom(usize),
}

/// What the fast path made of a DATA packet: stored, or dropped, or what
/// the caller must do first (what it found is passed on, not looked up
/// again).
pub(super) enum Fast {
    /// No RPC holds the ID of this request: `RpcParts::open_request` (`admit.rs`).
    NewRequest,
    /// The first packet of our call's response: `Endpoint::new_response`.
    NewResponse(RpcHandle),
    /// An ID of ours that no call holds: `rpc::unknown_response`.
    UnknownResponse,
    /// Dropped before anything was stored.
    Dropped(DropReason),
    /// Stored, or tried: the outcome, for `after_store`.
    Stored(MsgKey, Result<Opened, DropReason>),
}

/// DATA with the peer in hand (the packet's one peer lookup): one RPC
/// lookup in the peer's index; for a message already being received, the
/// packet stored in place, admitted at once when the bounds have room for
/// a new buffer (else `RpcParts::admit` decides, in `after_store`).
pub(super) fn store_fast(
    peer: &mut Peer,
    rpcs: &mut RpcTables,
    mut parts: StoreParts<'_>,
    d: DataIn<'_>,
    local: bool,
) -> Fast {
    let (msg, inc) = match receiving_at(peer, rpcs, d.key, local) {
        Ok(found) => found,
        Err(fast) => return fast,
    };
    if u64::from(d.h.message_len) > parts.len_limit {
        return Fast::Dropped(DropReason::OverLimit);
    }
    let outcome = store_within_bounds(&mut parts, inc, peer, d, msg);
    Fast::Stored(msg, outcome)
}

/// Stores a DATA packet into its message (see `store_in`); one that needs
/// a new buffer is admitted at once when the bounds have room for it (as
/// `RpcParts::admit` would, without a side effect); else it is left
/// alone ([`Opened::NeedsRoom`]) for `RpcParts::admit` to decide, which
/// may recount or evict first.
#[inline(always)]
pub(super) fn store_within_bounds(
    parts: &mut StoreParts<'_>,
    (inc, silent): (&mut Incoming, &mut u32),
    peer: &mut Peer,
    d: DataIn<'_>,
    msg: MsgKey,
) -> Result<Opened, DropReason> {
    // What `store_in` asks first when not yet admitted, asked here once:
    // the first packet of every message needs a buffer, and a refused
    // `store_in` followed by an admitted one was two calls per message.
    let more = inc.allocation_for(d.h);
    let charge = Charge {
        bytes: more,
        requests: 0,
    };
    if more > 0 && !limits::fits(parts.config, peer.usage, parts.ledger.total, charge) {
        return Ok(Opened::NeedsRoom(more));
    }
    store_in(parts, (inc, silent), Some(peer), d, msg, true)
}

/// The message being received that DATA for `key` goes to, with its RPC's
/// silence counter: one lookup in the peer's index and one in the table.
/// `Err`: what the fast path reports instead (see [`Fast`]).
#[inline(always)]
fn receiving_at<'a>(
    peer: &Peer,
    rpcs: &'a mut RpcTables,
    key: ServerRpcHandle,
    local: bool,
) -> Result<(MsgKey, (&'a mut Incoming, &'a mut u32)), Fast> {
    let found = match local {
        true => {
            let Some(handle) = peer.rpcs.client(key.epoch, key.id) else {
                return Err(Fast::UnknownResponse);
            };
            let Some(c) = rpcs.clients.get_mut(&handle) else {
                return Err(Fast::Dropped(DropReason::UnknownRpc));
            };
            let Some(inc) = c.response.as_mut() else {
                return Err(Fast::NewResponse(handle));
            };
            (MsgKey::Client(handle), (inc, &mut c.silent_ticks))
        }
        false => {
            let Some(slot) = peer.rpcs.server(key.epoch, key.id) else {
                return Err(Fast::NewRequest);
            };
            let Some(rpc) = rpcs.servers.get_mut(slot) else {
                return Err(Fast::NewRequest);
            };
            let ServerState::Receiving(inc) = &mut rpc.state else {
                // The client is still sending: it has not heard the
                // response yet. (Silence is reset by progress only,
                // `progressed`, and by this.)
                rpc.silent_ticks = 0;
                return Err(Fast::Dropped(DropReason::Duplicate));
            };
            let msg = MsgKey::Server(ServerMsg { rpc: key, slot });
            (msg, (inc, &mut rpc.silent_ticks))
        }
    };
    Ok(found)
}

/// Stores a DATA packet into its message `inc` (with the RPC's silence
/// counter), opens what became complete and does the bookkeeping on the
/// peer (`book_opened`). Unless `admitted`, a packet that needs a new
/// buffer is left alone ([`Opened::NeedsRoom`]).
pub(super) fn store_in(
    p: &mut StoreParts<'_>,
    (inc, silent): (&mut Incoming, &mut u32),
    peer: Option<&mut Peer>,
    d: DataIn<'_>,
    msg: MsgKey,
    admitted: bool,
) -> Result<Opened, DropReason> {
    if !admitted {
        let more = inc.allocation_for(d.h);
        if more > 0 {
            return Ok(Opened::NeedsRoom(more));
        }
    }
    let rx = peer
        .as_deref()
        .and_then(|p| p.session.epoch(d.key.epoch))
        .ok_or(DropReason::UnknownSession)?;
    let held = inc.buffered_bytes();
    // Receive offload: the NIC's word counts only for the key this
    // RPC belongs to (the epoch, and the session, it was routed to).
    let decrypted = p.nic.rx_mark.is_some_and(|k| k == KeyId::of(&rx.rx));
    if let Err(e) = inc.accept(d.h, d.payload, decrypted, p.buffers) {
        return not_accepted(inc, e);
    }
    // Progress, not mere arrival, keeps an RPC alive (see `progressed`).
    *silent = 0;
    if inc.granted() < inc.wire_len() {
        p.scheduler.mark_grantable(msg);
    }
    let mine = peer.as_deref().map_or(0, |p| p.usage.bytes);
    let (tally, result) = open_in(p, inc, &*rx.rx, d.key.id, mine);
    let nothing_authenticated = inc.nothing_authenticated();
    let grown = inc.buffered_bytes().saturating_sub(held);
    book_opened(p, peer, d, (tally, result.is_ok()), grown);
    opened_from(result, nothing_authenticated)
}

/// Opens what of message `id` became complete under `rx`, within what
/// the memory bounds spare (the peer holds `mine` bytes): the records
/// opened (and offloaded) and the result.
#[inline]
fn open_in(
    p: &mut StoreParts<'_>,
    inc: &mut Incoming,
    rx: &dyn PacketCipher,
    id: u64,
    mine: usize,
) -> ((u64, OffloadTally), Result<Accepted, DropReason>) {
    let mut tally = (0, OffloadTally::default());
    let spare = limits::spare(p.config, &p.ledger.total, mine);
    let (opened, offloaded) = (&mut tally.0, &mut tally.1);
    let layout = p.config.seq_layout;
    let result = inc.open_ready(rx, layout, id, opened, offloaded, spare, p.buffers);
    (tally, result)
}

/// What a packet the message did not accept leads to. Lengths that
/// disagree with the first packet's, before anything authenticated: either
/// header may be the corrupted one, and keeping the first would refuse
/// every genuine packet until the timeout. Start over (the caller discards
/// the message).
fn not_accepted(inc: &Incoming, e: DropReason) -> Result<Opened, DropReason> {
    if e == DropReason::ProtocolViolation && inc.authenticated_bytes() == 0 {
        return Ok(Opened::Discard(e));
    }
    Err(e)
}

/// Counts the records a DATA packet opened (for the endpoint and its
/// peer, which hears it is alive if they authenticated) and charges what
/// its message grew by.
fn book_opened(
    p: &mut StoreParts<'_>,
    mut peer: Option<&mut Peer>,
    d: DataIn<'_>,
    ((opened, offloaded), ok): ((u64, OffloadTally), bool),
    grown: usize,
) {
    p.stats.records_opened += opened;
    if offloaded != OffloadTally::default() {
        offloaded.count(p.stats, peer.as_deref_mut().map(|p| &mut p.session.stats));
    }
    if let Some(peer) = peer.as_deref_mut() {
        peer.session.stats.records_opened += opened;
        if ok && opened > 0 {
            peer.authenticated(d.now);
        }
    }
    if grown > 0 {
        let more = Charge {
            bytes: grown,
            requests: 0,
        };
        let entry = peer.map(|p| (d.pid, p));
        let (charged, total) = (&mut p.ledger.charged, &mut p.ledger.total);
        limits::add_charge(entry, charged, total, &mut p.stats.usage, more);
    }
}

/// The message still being received that `msg` names, with the RPC's
/// silence counter; `None` once it is complete or the RPC is gone (a
/// duplicate). A free function so the caller can hold other fields of the
/// endpoint at once.
#[inline]
pub(super) fn receiving_in<'a>(
    clients: &'a mut ClientTable,
    servers: &'a mut ServerTable,
    msg: MsgKey,
) -> Option<(&'a mut Incoming, &'a mut u32)> {
    match msg {
        MsgKey::Client(handle) => {
            let c = clients.get_mut(&handle)?;
            Some((c.response.as_mut()?, &mut c.silent_ticks))
        }
        MsgKey::Server(m) => {
            let s = servers.get_mut(m.slot)?;
            match &mut s.state {
                ServerState::Receiving(inc) => Some((inc, &mut s.silent_ticks)),
                _ => None,
            }
        }
    }
}

/// What `Incoming::open_ready`'s result means for the packet (decision
/// table): an authentication failure is reported with whether anything of
/// the message had authenticated (the caller decides whether to abandon or
/// restart it); a protocol violation discards the message; other errors
/// pass through.
#[inline]
fn opened_from(
    result: Result<Accepted, DropReason>,
    nothing_authenticated: bool,
) -> Result<Opened, DropReason> {
    match result {
        Ok(Accepted::Stored) => Ok(Opened::Stored),
        Ok(Accepted::Complete) => Ok(Opened::Complete),
        Err(DropReason::AuthFailure) => Ok(Opened::Failed {
            nothing_authenticated,
        }),
        Err(DropReason::ProtocolViolation) => Ok(Opened::Discard(DropReason::ProtocolViolation)),
        Err(e) => Err(e),
    }
}
