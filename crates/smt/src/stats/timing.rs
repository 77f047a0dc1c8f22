//! What the engine times and counts itself, beside the core's counters:
//! round trips of the calls it completes (the endpoint's and each peer's)
//! and, as a server, the requests it delivered to the application and how
//! long the application took to answer them.
//!
//! Why here and not in the core: the engine sees both ends of what the
//! application waits for (a call from `call` to its reply; a request from
//! its delivery to `respond`), on the clock it reads at each command and
//! turn. The histograms are fine-grained ([`LatencyHistogram`]: 1.2 KB
//! each), so a peer gets one only once a call to it has completed, and
//! peers whose session is gone are forgotten.

use std::net::SocketAddr;
use std::time::Duration;

use smt_proto::Endpoint as Core;

use super::Counters;
use crate::engine::FastMap;
use crate::histogram::LatencyHistogram;

/// Peers' round-trip histograms kept at least, whatever the sessions; past
/// twice the sessions (and this), those of peers without one are dropped.
const KEEP_PEERS: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct Timing {
    rtt: LatencyHistogram,
    /// Looked up at every completed call: foldhash, one lookup per call
    /// (SipHash and two lookups were ~600 instructions per call).
    peer_rtt: FastMap<SocketAddr, LatencyHistogram>,
    handler_latency: LatencyHistogram,
    served: u64,
    abandoned: u64,
}

impl Timing {
    /// A call to `peer` completed `rtt` after the application made it.
    pub(crate) fn call_completed(&mut self, core: &Core, peer: SocketAddr, rtt: Duration) {
        self.rtt.record(rtt);
        if let Some(histogram) = self.peer_rtt.get_mut(&peer) {
            histogram.record(rtt);
            return;
        }
        self.forget_stale_peers(core);
        self.peer_rtt.entry(peer).or_default().record(rtt);
    }

    /// `peer` has a new session: its counters start again from zero, as
    /// the core's do.
    pub(crate) fn session_started(&mut self, peer: SocketAddr) {
        self.peer_rtt.remove(&peer);
    }

    /// The application answered a request `latency` after its delivery.
    pub(crate) fn served(&mut self, latency: Duration) {
        self.served += 1;
        self.handler_latency.record(latency);
    }

    /// A delivered request was dropped unanswered, or its response could
    /// not be sent.
    pub(crate) fn abandoned(&mut self) {
        self.abandoned += 1;
    }

    /// Adds the endpoint's figures to its counters from the core.
    pub(crate) fn fill_endpoint(&self, counters: &mut Counters) {
        counters.rpcs.served = self.served;
        counters.rpcs.abandoned = self.abandoned;
        counters.rtt = self.rtt.clone();
        counters.handler_latency = self.handler_latency.clone();
    }

    /// Adds `peer`'s figures to its session's counters from the core.
    pub(crate) fn fill_peer(&self, peer: SocketAddr, counters: &mut Counters) {
        counters.rtt = self.peer_rtt.get(&peer).cloned().unwrap_or_default();
    }

    /// Drops the histograms of peers without a session once they are many
    /// (amortised: afterwards at most half the threshold are kept, so the
    /// next look comes after as many new peers again).
    fn forget_stale_peers(&mut self, core: &Core) {
        let sessions = usize::try_from(core.stats().usage.sessions).unwrap_or(usize::MAX);
        if self.peer_rtt.len() < KEEP_PEERS.max(sessions.saturating_mul(2)) {
            return;
        }
        self.peer_rtt
            .retain(|peer, _| core.peer_stats(*peer).is_some());
    }
}
