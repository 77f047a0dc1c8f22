//! A new message admitted and a complete one delivered: the DATA path's
//! steps that need the bounds' ledger and credit (`Load`). Admitting a
//! message may recount what partial messages hold or evict
//! unauthenticated partial requests (`limits.rs` decides which); a
//! delivered request frees its place among partial requests and is noted
//! in credit (`credit.rs`) before it is served or refused. Methods of
//! [`RpcParts`]; `recv.rs` calls them once it has stored a packet.

use std::time::Instant;

use super::super::credit::{CreditCtx, Credits};
use super::super::limits::Charge;
use super::super::peers::PeerId;
use super::super::{MsgKey, ServerRpcHandle};
use super::data::DataIn;
use super::rpc::{RpcParts, Settled};
use crate::error::DropReason;
use crate::rpc::{ServerMsg, MESSAGE_OVERHEAD};
use crate::wire::Body;

impl RpcParts<'_> {
    /// Whether `more` can be charged to `peer` within every bound
    /// (`limits.rs`), recounting first (at most once per tick) if the
    /// running figures say no, then evicting what `Ledger::victims` names.
    pub(super) fn admit(&mut self, now: Instant, peer: PeerId, more: Charge) -> bool {
        let (cfg, ledger) = (self.config, &mut self.load.ledger);
        if ledger.fits(cfg, self.peers, peer, more) {
            return true;
        }
        if ledger.is_stale(now, cfg.tick) {
            self.recount_usage(now);
            if self.load.ledger.fits(self.config, self.peers, peer, more) {
                return true;
            }
        }
        let victims = (self.load.ledger).victims(self.config, self.peers, self.rpcs, peer, more);
        let Some((heavy, victims)) = victims else {
            return false;
        };
        for (slot, c) in victims {
            tracing::debug!(?slot, "evicting an unauthenticated partial request");
            self.drop_server_at(slot);
            self.counters.stats.partial_evicted += 1;
            self.discharge(heavy, c);
            if self.load.ledger.fits(self.config, self.peers, peer, more) {
                return true;
            }
        }
        false
    }

    /// Adds what was just allocated for `peer` (`limits.rs`).
    #[inline]
    fn charge(&mut self, peer: PeerId, more: Charge) {
        let usage = &mut self.counters.stats.usage;
        self.load.ledger.charge(self.peers, usage, peer, more);
    }

    /// Takes back what a freed message was charged (`limits.rs`).
    #[inline]
    fn discharge(&mut self, peer: PeerId, less: Charge) {
        let stats = &mut self.counters.stats;
        self.load.ledger.discharge(self.peers, stats, peer, less);
    }

    /// Counts exactly what partially received messages hold (`limits.rs`).
    pub(crate) fn recount_usage(&mut self, now: Instant) {
        let (peers, stats) = (&mut *self.peers, &mut self.counters.stats);
        self.load.ledger.recount(now, peers, self.rpcs, stats);
    }

    /// The tick's credit housekeeping (`Credits::sweep`).
    pub(crate) fn sweep_credits(&mut self) {
        let (credits, cx) = self.credits_with();
        credits.sweep(cx);
    }

    /// The credit state with what its decisions need (`credit.rs`).
    fn credits_with(&mut self) -> (&mut Credits, CreditCtx<'_>) {
        let cx = CreditCtx {
            config: self.config,
            ticks: self.time.ticks,
            peers: self.peers,
            outbox: self.outbox,
            stats: &mut self.counters.stats,
        };
        (&mut self.load.credits, cx)
    }

    /// The first packet of a request to arrive (no RPC holds its ID):
    /// replays are rejected, before any decryption; else the server RPC is
    /// admitted (or the request refused). `first::make_and_store` makes
    /// it.
    #[inline]
    pub(super) fn open_request(&mut self, d: DataIn<'_>) -> Result<(), DropReason> {
        self.check_new_request(d.pid, d.key)?;
        if let Err(e) = self.admit_message(d.now, d.pid, true) {
            self.refuse_and_say(d.key);
            return Err(e);
        }
        self.time.arm_tick(d.now, self.config.tick);
        Ok(())
    }

    /// The first packet of the response to our call to arrive: its
    /// message is admitted (`first::make_and_store` makes it).
    #[inline]
    pub(super) fn open_response(&mut self, d: DataIn<'_>) -> Result<(), DropReason> {
        self.admit_message(d.now, d.pid, false)
    }

    /// Admits and charges a new partially received message from `peer`.
    #[inline]
    fn admit_message(
        &mut self,
        now: Instant,
        peer: PeerId,
        request: bool,
    ) -> Result<(), DropReason> {
        let charge = Charge {
            bytes: MESSAGE_OVERHEAD,
            requests: usize::from(request),
        };
        if !self.admit(now, peer, charge) {
            return Err(DropReason::OverLimit);
        }
        self.charge(peer, charge);
        Ok(())
    }

    /// A new request not admitted: refused (`refuse_unadmitted` decides),
    /// noted in credit, and the client hears OVERLOADED.
    fn refuse_and_say(&mut self, key: ServerRpcHandle) {
        if !self.refuse_unadmitted(key) {
            return;
        }
        let (credits, cx) = self.credits_with();
        credits.note_request(key.peer, true, cx);
        self.queue_control(key, Body::Overloaded);
    }

    /// Carries out what a stored DATA packet means for its message
    /// ([`Settled::of`] decides): a complete one delivered, one whose
    /// records disagree with its lengths discarded, a response of which
    /// nothing authenticated forgotten.
    #[inline]
    pub(super) fn settle(
        &mut self,
        d: DataIn<'_>,
        msg: MsgKey,
        settled: Settled,
    ) -> Result<Option<MsgKey>, DropReason> {
        match settled {
            Settled::Receiving => Ok(Some(msg)),
            Settled::Complete => {
                self.deliver(d.now, d.pid, msg, d.key);
                Ok(None)
            }
            Settled::Dropped(e) => Err(e),
            Settled::Discard(e) => {
                self.discard_incoming(msg);
                Err(e)
            }
            Settled::Forget => {
                self.forget_unauthenticated(msg);
                Err(DropReason::AuthFailure)
            }
        }
    }

    #[inline]
    fn deliver(&mut self, now: Instant, pid: PeerId, msg: MsgKey, key: ServerRpcHandle) {
        self.counters.stats.messages_received += 1;
        match msg {
            MsgKey::Client(handle) => self.complete_client(now, handle, key),
            MsgKey::Server(m) => self.deliver_request(pid, m),
        }
    }

    /// A request is complete: the application gets it, unless it holds
    /// `Config::max_pending_requests` already (then it is refused).
    #[inline]
    fn deliver_request(&mut self, pid: PeerId, m: ServerMsg) {
        // No longer a partial request: its place is free now, not at the
        // next recount (a burst of small requests would otherwise fill
        // `max_incoming_per_peer` within a tick).
        let done = Charge {
            bytes: 0,
            requests: 1,
        };
        self.discharge(pid, done);
        let full = self.load.in_service >= self.config.max_pending_requests;
        let (credits, cx) = self.credits_with();
        credits.note_request(m.rpc.peer, full, cx);
        self.serve_or_refuse(pid, m, full);
    }
}
