//! A new message's first packet: the message made and the packet stored
//! into it as the making left it. The RPC just inserted and the peer
//! just indexed are lent on, not looked up again (the slow path,
//! `store_and_open`, finds both anew: two lookups and two calls per
//! message).

use super::super::peer::Peer;
use super::super::peers::Peers;
use super::super::table::RpcTables;
use super::super::{MsgKey, RpcHandle, ServerRpc, ServerState};
use super::data::{store_in, store_within_bounds, DataIn, Opened, StoreParts};
use super::RpcParts;
use crate::config::Config;
use crate::error::DropReason;
use crate::rpc::{Incoming, SegmentBuf, ServerMsg, ServerSlot};

/// Which new message a DATA packet opens (what `store_fast` found).
#[derive(Clone, Copy)]
pub(super) enum New {
    /// A request no RPC holds the ID of.
    Request,
    /// The response to our call.
    Response(RpcHandle),
}

/// The message just made, lent on ([`make_server`], [`make_response`]).
enum Made<'a> {
    /// Its `Incoming` with its RPC's silence counter, and its peer.
    Ready((&'a mut Incoming, &'a mut u32), Option<&'a mut Peer>),
    /// The call is gone: a duplicate, as `store_and_open` finds it.
    Gone,
    /// The peer's index held a stale entry for the ID (its slot found
    /// nothing), now the new RPC's: the caller frees the slot it named
    /// and stores on the slow path.
    Stale(ServerSlot),
}

/// A spare segment list per message (`Buffers::segment_lists`).
pub(super) type Lists = Vec<Vec<(u32, SegmentBuf)>>;

impl New {
    /// Admits the new message (`RpcParts::open_request` /
    /// `open_response`): before it is made, as no RPC is borrowed yet.
    #[inline(always)]
    pub(super) fn admit(self, mut parts: RpcParts<'_>, d: DataIn<'_>) -> Result<(), DropReason> {
        match self {
            New::Request => parts.open_request(d),
            New::Response(_) => parts.open_response(d),
        }
    }
}

/// Makes the admitted message `new` names and stores the packet into it,
/// with `store_data`'s checks in its order: the message is made, then held
/// to the length limit. `None` for the outcome: the peer's index held a
/// stale entry for the ID (its slot now freed), and the caller stores the
/// packet on the slow path (`store_and_open`).
#[inline(always)]
pub(super) fn make_and_store(
    mut parts: StoreParts<'_>,
    (rpcs, peers, lists): (&mut RpcTables, &mut Peers, &mut Lists),
    d: DataIn<'_>,
    new: New,
) -> Result<(MsgKey, Option<Result<Opened, DropReason>>), DropReason> {
    let cfg = parts.config;
    let (msg, made) = match new {
        New::Request => make_server(rpcs, peers, lists, cfg, d),
        New::Response(handle) => make_response(rpcs, peers, lists, cfg, d, handle),
    };
    let over_limit = u64::from(d.h.message_len) > parts.len_limit;
    if let Made::Stale(old) = made {
        // What `new_server` did at once: the stale slot freed.
        rpcs.servers.remove(old);
        return if over_limit {
            Err(DropReason::OverLimit)
        } else {
            Ok((msg, None))
        };
    }
    if over_limit {
        return Err(DropReason::OverLimit);
    }
    let outcome = match made {
        Made::Ready(inc, Some(peer)) => store_within_bounds(&mut parts, inc, peer, d, msg),
        Made::Ready(inc, None) => store_in(&mut parts, inc, None, d, msg, false),
        Made::Gone => Err(DropReason::Duplicate),
        Made::Stale(_) => return Ok((msg, None)),
    };
    Ok((msg, Some(outcome)))
}

/// A new message's `Incoming`, on a spare segment list.
#[inline(always)]
fn new_incoming(lists: &mut Lists, cfg: &Config, d: DataIn<'_>) -> Incoming {
    let list = lists.pop().unwrap_or_default();
    Incoming::reuse(list, d.h, cfg.unscheduled_bytes, cfg.max_unopened_bytes)
}

/// Makes the server RPC of an admitted new request (built in its slot)
/// and indexes it under its peer: the RPC and the peer, lent on.
#[inline(always)]
fn make_server<'a>(
    rpcs: &'a mut RpcTables,
    peers: &'a mut Peers,
    lists: &mut Lists,
    cfg: &Config,
    d: DataIn<'_>,
) -> (MsgKey, Made<'a>) {
    let make = || ServerRpc::new(new_incoming(lists, cfg, d));
    let (slot, rpc) = rpcs.servers.insert(d.key, d.pid, make);
    let mut peer = peers.at_mut(d.pid);
    let index = peer.as_deref_mut().map(|p| &mut p.rpcs);
    let replaced = index.and_then(|r| r.add_server(d.key.epoch, d.key.id, slot));
    let msg = MsgKey::Server(ServerMsg { rpc: d.key, slot });
    if let Some(old) = replaced {
        return (msg, Made::Stale(old));
    }
    // Made receiving just above: the other arm is never taken.
    let ServerState::Receiving(inc) = &mut rpc.state else {
        return (msg, Made::Gone);
    };
    (msg, Made::Ready((inc, &mut rpc.silent_ticks), peer))
}

/// Makes the response message of our call `handle` (admitted): its
/// `Incoming` and the call, lent on with the peer.
#[inline(always)]
fn make_response<'a>(
    rpcs: &'a mut RpcTables,
    peers: &'a mut Peers,
    lists: &mut Lists,
    cfg: &Config,
    d: DataIn<'_>,
    handle: RpcHandle,
) -> (MsgKey, Made<'a>) {
    let incoming = new_incoming(lists, cfg, d);
    let msg = MsgKey::Client(handle);
    let Some(rpc) = rpcs.clients.get_mut(&handle) else {
        return (msg, Made::Gone);
    };
    let inc = rpc.response.insert(incoming);
    (
        msg,
        Made::Ready((inc, &mut rpc.silent_ticks), peers.at_mut(d.pid)),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::sim::{Link, Outcome, Pair, TestKeys};

    /// A stale entry in the peer's index (the slot it names freed under
    /// it): the request's next packet makes the RPC anew, which takes the
    /// entry's place; the stale slot is freed and the packet stored on
    /// the slow path. The call still completes.
    #[test]
    fn a_stale_index_entry_gives_way_to_the_new_rpc() {
        let mut pair = Pair::with_keys(TestKeys::Keyed(7), Link::default(), 3);
        let request = vec![0x5a; 200_000];
        let handle = pair.call(&request);
        while pair.server.server_rpcs() == 0 {
            pair.run_for(Duration::from_micros(10));
        }
        let servers = &mut pair.server.rpcs.servers;
        let slot = servers.slots().map(|(m, _, _)| m.slot).next();
        let slot = slot.expect("the request, partly received");
        assert!(servers.remove(slot).is_some());
        assert_eq!(pair.server.server_rpcs(), 0);
        while pair.server.server_rpcs() == 0 {
            pair.run_for(Duration::from_micros(10));
        }
        assert_eq!(
            pair.server.server_rpcs(),
            1,
            "made anew, in the stale one's place"
        );
        assert!(pair.run(Duration::from_secs(30)));
        assert!(matches!(
            pair.outcomes.get(&handle),
            Some(Outcome::Response(_))
        ));
    }
}
