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
//! by the number of active peers (`Credits::share`). A peer hears
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

use super::outbox::Outbox;
use super::peers::Peers;
use super::HashMap;
use crate::config::Config;
use crate::error::DropReason;
use crate::stats::Stats;
use crate::wire::Body;

#[cfg(doc)]
use super::Endpoint;

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
    /// The peer and tick of the last `note_request` that changed nothing
    /// in `told` but that peer's `last_request` (set to that tick): the
    /// same peer again in the same tick changes nothing either, so it is
    /// answered without the map lookup (~100 instructions per request of
    /// a client's burst). Cleared by whatever else changes `told`.
    quiet: Option<(SocketAddr, u64)>,
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

/// What the credit decisions read and write of the rest of the endpoint
/// (`RpcParts::credits_with`, `recv/admit.rs`).
pub(crate) struct CreditCtx<'a> {
    pub config: &'a Config,
    pub ticks: u64,
    pub peers: &'a Peers,
    pub outbox: &'a mut Outbox,
    pub stats: &'a mut Stats,
}

impl Credits {
    /// Forgets what either side knew about `peer` (a new session).
    pub(crate) fn forget(&mut self, peer: SocketAddr) {
        self.heard.remove(&peer);
        self.told.remove(&peer);
        self.quiet = None;
    }

    /// Client side: how many requests `peer` lets us have outstanding at
    /// it, `initial` before its first CREDIT ([`Endpoint::credit`]).
    pub(crate) fn limit(&self, peer: SocketAddr, initial: u32) -> u32 {
        self.heard.get(&peer).map_or(initial, |&(_, limit)| limit)
    }

    /// A CREDIT from `peer`: kept if it is newer than the last one heard.
    pub(crate) fn on_credit(
        &mut self,
        peer: SocketAddr,
        (limit, sequence): (u32, u32),
        stats: &mut Stats,
    ) -> Result<(), DropReason> {
        let newer = self
            .heard
            .get(&peer)
            .is_none_or(|&(seen, _)| sequence > seen);
        if !newer {
            return Err(DropReason::Duplicate);
        }
        self.heard.insert(peer, (sequence, limit));
        stats.credits_received += 1;
        Ok(())
    }

    /// What each active peer may have outstanding: the capacity for
    /// requests held (`max_pending_requests`) and partially received
    /// (`max_incoming_total`) shared among the active peers, at most
    /// `max_incoming_per_peer`, at least 1.
    fn share(&self, cfg: &Config) -> u32 {
        let active = self.told.len().max(1);
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
    pub(crate) fn note_request(&mut self, peer: SocketAddr, remind: bool, mut cx: CreditCtx<'_>) {
        let ticks = cx.ticks;
        if !remind && self.quiet == Some((peer, ticks)) {
            return;
        }
        self.quiet = None;
        let t = self.told.entry(peer).or_insert(Told {
            limit: None,
            at: ticks,
            last_request: ticks,
        });
        t.last_request = ticks;
        let (told, at) = (t.limit, t.at);
        let share = self.share(cx.config);
        // A new entry (`limit: None`) is always told: a call that gets
        // here changed no entry, and no peer's share.
        if told != Some(share) || (remind && at != ticks) {
            return self.send(peer, share, &mut cx);
        }
        self.quiet = Some((peer, ticks));
    }

    /// Every `resend_ticks`: forgets peers idle for [`ACTIVE_TICKS`] (or
    /// without a session), and sends each peer that sent a request within
    /// [`REFRESH_TICKS`] its share if it changed or was last sent
    /// [`REFRESH_TICKS`] ago.
    pub(crate) fn sweep(&mut self, mut cx: CreditCtx<'_>) {
        let ticks = cx.ticks;
        if self.told.is_empty() || ticks < self.swept + u64::from(cx.config.resend_ticks) {
            return;
        }
        self.swept = ticks;
        self.quiet = None;
        let peers = cx.peers;
        self.told
            .retain(|a, t| peers.contains_key(a) && ticks - t.last_request < ACTIVE_TICKS);
        let share = self.share(cx.config);
        let due: Vec<SocketAddr> = self
            .told
            .iter()
            .filter(|(_, t)| ticks - t.last_request < REFRESH_TICKS)
            .filter(|(_, t)| t.limit != Some(share) || ticks - t.at >= REFRESH_TICKS)
            .map(|(a, _)| *a)
            .collect();
        for peer in due {
            self.send(peer, share, &mut cx);
        }
    }

    /// Queues a CREDIT of `limit` for `peer`, in its current key epoch.
    fn send(&mut self, peer: SocketAddr, limit: u32, cx: &mut CreditCtx<'_>) {
        let Some(epoch) = cx.peers.get(&peer).map(|p| p.session.current.number) else {
            return;
        };
        self.sequence = self.sequence.wrapping_add(1);
        self.quiet = None;
        let sequence = self.sequence;
        if let Some(t) = self.told.get_mut(&peer) {
            (t.limit, t.at) = (Some(limit), cx.ticks);
        }
        cx.stats.credits_sent += 1;
        let body = Body::Credit { limit, sequence };
        cx.outbox
            .queue_control(cx.config.local_port, peer, epoch, 0, body);
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::{CreditCtx, Credits};
    use crate::endpoint::Endpoint;
    use crate::Config;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    /// Notes a request from `port` in tick 5; the CREDITs sent so far.
    fn note(credits: &mut Credits, ep: &mut Endpoint, port: u16) -> u64 {
        let cx = CreditCtx {
            config: &ep.config,
            ticks: 5,
            peers: &ep.peers,
            outbox: &mut ep.outbox,
            stats: &mut ep.counters.stats,
        };
        credits.note_request(addr(port), false, cx);
        ep.counters.stats.credits_sent
    }

    /// The same peer again in a tick takes the quiet path (no lookup, no
    /// CREDIT); a new peer in that tick clears it, so the first peer still
    /// hears its halved share at its next request.
    #[test]
    fn a_new_peer_in_the_same_tick_still_moves_the_others_share() {
        let config = Config {
            max_pending_requests: 40,
            ..Config::default()
        };
        let mut ep = Endpoint::new(config).expect("valid config");
        for port in [1, 2] {
            let keys = crate::sim::null_session().0;
            ep.install_session(addr(port), keys).expect("a session");
        }
        let mut credits = Credits::default();
        assert_eq!(note(&mut credits, &mut ep, 1), 1, "first request: told");
        assert_eq!(note(&mut credits, &mut ep, 1), 1, "same share: nothing");
        assert_eq!(credits.quiet, Some((addr(1), 5)), "the quiet path is set");
        assert_eq!(note(&mut credits, &mut ep, 1), 1, "still nothing");
        assert_eq!(note(&mut credits, &mut ep, 2), 2, "a second peer: told");
        assert_eq!(note(&mut credits, &mut ep, 1), 3, "the first: its half");
    }
}
