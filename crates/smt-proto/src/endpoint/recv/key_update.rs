//! A KEY_UPDATE from a peer, after `Peer::take_key_update` has checked it
//! (MAC under the next or current keys, stale copies, confirmation): the
//! peer moved to its next key epoch, so the RPCs of the epoch before the
//! one it left go, and the move is confirmed (again, for a repeat whose
//! confirmation was lost).

use std::net::SocketAddr;
use std::time::Instant;

use super::super::peer::KeyUpdateSeen;
use super::super::peers::PeerId;
use super::super::{trace_event, ServerRpcHandle, KEY_UPDATE_CONFIRM};
use super::rpc::RpcParts;
use crate::error::DropReason;
use crate::trace::Traced;
use crate::wire::Body;

impl RpcParts<'_> {
    /// A KEY_UPDATE from the peer in slot `pid` at `from` (see the module
    /// docs).
    pub(super) fn on_key_update(
        &mut self,
        now: Instant,
        (pid, from): (PeerId, SocketAddr),
        phase: bool,
        datagram: &[u8],
    ) -> Result<(), DropReason> {
        let peer = self.peers.at_mut(pid).ok_or(DropReason::UnknownSession)?;
        let previous = match peer.take_key_update(now, phase, datagram)? {
            KeyUpdateSeen::Confirmed => return Ok(()),
            KeyUpdateSeen::Repeated { current } => {
                self.confirm_key_update(from, current);
                return Ok(());
            }
            KeyUpdateSeen::Announced { previous } => previous,
        };
        if let Some(prev) = previous {
            self.forget_servers(pid, Some(prev));
            self.fail_clients(pid, Some(prev));
        }
        let Some(peer) = self.peers.at_mut(pid) else {
            return Ok(());
        };
        peer.session.advance();
        let epoch = peer.session.current.number;
        tracing::debug!(%from, epoch, "peer rekeyed");
        self.confirm_key_update(from, epoch);
        let by_peer = true;
        trace_event!(
            self,
            Traced::Rekeyed {
                peer: from,
                epoch,
                by_peer
            }
        );
        Ok(())
    }

    /// Tells `peer` we now receive under key epoch `epoch`.
    fn confirm_key_update(&mut self, peer: SocketAddr, epoch: u64) {
        let id = KEY_UPDATE_CONFIRM;
        self.queue_control(ServerRpcHandle { peer, epoch, id }, Body::KeyUpdate);
    }
}
