//! Credit-based backpressure (issue #24, item 3; `docs/protocol.md` § 4,
//! CREDIT): a server tells each client how many requests it may have
//! outstanding at it, a share of what the server holds
//! (`Config::max_pending_requests`, and the bounds on partial requests), so
//! a client waits instead of sending what would be refused. As HTTP/2's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` and QUIC's `MAX_STREAMS`, the core
//! only says the number; the driver (the `smt` crate's engine) keeps its
//! calls within it ([`Endpoint::credit`]).
//!
//! Server side: a peer is *active* while it has sent a request in the
//! last [`ACTIVE_TICKS`]; each active peer's share is the capacity divided
//! by the number of active peers ([`Endpoint::credit_share`]). A peer hears
//! its share with its first request, whenever it changes (checked every
//! `resend_ticks`) and every [`REFRESH_TICKS`] (a lost CREDIT costs at most
//! that long) while it has sent a request within the last
//! [`REFRESH_TICKS`], and when one of its requests is refused. A peer
//! idle for longer still takes its share but hears nothing until it sends
//! again: telling every active peer each change cost a server with many
//! short-lived clients a burst of one CREDIT per client every few ticks
//! (the 0-RTT tail of `smt bench-handshake`: a new client's first flight
//! waited milliseconds behind hundreds of CREDITs to closed ports).
//! The credit is advice: the server still enforces its bounds and refuses
//! what exceeds them (`recv/rpc.rs`).
//!
//! Client side: the latest CREDIT from the peer's current session holds
//! (the largest sequence number); before any, `Config::initial_credit`.

use std::net::SocketAddr;

use super::{Endpoint, HashMap};
use crate::error::DropReason;
use crate::wire::Body;

/// Ticks without a request after which a peer no longer counts as active
/// (and no longer takes a share).
pub(crate) const ACTIVE_TICKS: u64 = 1000;

/// While a peer is active, its credit is sent again this often (ticks).
pub(crate) const REFRESH_TICKS: u64 = 100;

/// Both sides' credit state.
#[derive(Debug, Default)]
pub(crate) struct Credits {
    /// Client side: per server, (sequence, limit) of its latest CREDIT.
    heard: HashMap<SocketAddr, (u32, u32)>,
    /// Server side: the peers active lately.
    told: HashMap<SocketAddr, Told>,
    /// The sequence number of the last CREDIT sent, to any peer.
    sequence: u32,
    /// The tick of the last sweep.
    swept: u64,
}

/// What a server last told an active peer.
#[derive(Debug)]
struct Told {
    /// The limit sent last (`None`: nothing sent yet).
    limit: Option<u32>,
    /// The tick it was sent at.
    at: u64,
    /// The tick of the peer's last request.
    last_request: u64,
}

impl Credits {
    /// Forgets what either side knew about `peer` (a new session).
    pub(crate) fn forget(&mut self, peer: SocketAddr) {
        self.heard.remove(&peer);
        self.told.remove(&peer);
    }
}

impl Endpoint {
    /// How many requests `peer` lets us have outstanding at it (calls to it
    /// without their response): its latest CREDIT, or
    /// `Config::initial_credit` before any. A driver that keeps its calls
    /// to `peer` within this is not refused for load the server foresaw.
    pub fn credit(&self, peer: SocketAddr) -> u32 {
        self.credits
            .heard
            .get(&peer)
            .map_or(self.config.initial_credit, |&(_, limit)| limit)
    }

    /// A CREDIT from `peer`: kept if it is newer than the last one heard.
    pub(crate) fn on_credit(
        &mut self,
        peer: SocketAddr,
        limit: u32,
        sequence: u32,
    ) -> Result<(), DropReason> {
        let newer = self
            .credits
            .heard
            .get(&peer)
            .is_none_or(|&(seen, _)| sequence > seen);
        if !newer {
            return Err(DropReason::Duplicate);
        }
        self.credits.heard.insert(peer, (sequence, limit));
        self.stats.credits_received += 1;
        Ok(())
    }

    /// What each active peer may have outstanding: the capacity for
    /// requests held (`max_pending_requests`) and partially received
    /// (`max_incoming_total`) shared among the active peers, at most
    /// `max_incoming_per_peer`, at least 1.
    pub(crate) fn credit_share(&self) -> u32 {
        let cfg = &self.config;
        let active = self.credits.told.len().max(1);
        let share = (cfg.max_pending_requests / active)
            .min(cfg.max_incoming_total / active)
            .min(cfg.max_incoming_per_peer)
            .max(1);
        u32::try_from(share).unwrap_or(u32::MAX)
    }

    /// A request from `peer` completed (delivered or refused): the peer is
    /// active, and hears its share if it has not yet, or if `remind` (a
    /// request of its was refused: its idea of its credit is stale; at
    /// most once per tick).
    pub(crate) fn note_request(&mut self, peer: SocketAddr, remind: bool) {
        let ticks = self.ticks;
        let t = self.credits.told.entry(peer).or_insert(Told {
            limit: None,
            at: ticks,
            last_request: ticks,
        });
        t.last_request = ticks;
        let (told, at) = (t.limit, t.at);
        let share = self.credit_share();
        if told != Some(share) || (remind && at != ticks) {
            self.send_credit(peer, share);
        }
    }

    /// Every `resend_ticks`: forgets peers idle for [`ACTIVE_TICKS`] (or
    /// without a session), and sends each peer that sent a request within
    /// [`REFRESH_TICKS`] its share if it changed or was last sent
    /// [`REFRESH_TICKS`] ago.
    pub(crate) fn sweep_credits(&mut self) {
        let ticks = self.ticks;
        if self.credits.told.is_empty()
            || ticks < self.credits.swept + u64::from(self.config.resend_ticks)
        {
            return;
        }
        self.credits.swept = ticks;
        let peers = &self.peers;
        self.credits
            .told
            .retain(|a, t| peers.contains_key(a) && ticks - t.last_request < ACTIVE_TICKS);
        let share = self.credit_share();
        let due: Vec<SocketAddr> = self
            .credits
            .told
            .iter()
            .filter(|(_, t)| ticks - t.last_request < REFRESH_TICKS)
            .filter(|(_, t)| t.limit != Some(share) || ticks - t.at >= REFRESH_TICKS)
            .map(|(a, _)| *a)
            .collect();
        for peer in due {
            self.send_credit(peer, share);
        }
    }

    /// Queues a CREDIT of `limit` for `peer`, in its current key epoch.
    fn send_credit(&mut self, peer: SocketAddr, limit: u32) {
        let Some(epoch) = self.peers.get(&peer).map(|p| p.session.current.number) else {
            return;
        };
        self.credits.sequence = self.credits.sequence.wrapping_add(1);
        let sequence = self.credits.sequence;
        if let Some(t) = self.credits.told.get_mut(&peer) {
            (t.limit, t.at) = (Some(limit), self.ticks);
        }
        self.stats.credits_sent += 1;
        self.queue_control(peer, epoch, 0, Body::Credit { limit, sequence });
    }
}
