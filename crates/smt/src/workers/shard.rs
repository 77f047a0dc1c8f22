//! One shard: a whole `smt_proto::Endpoint` on its own thread, owning the
//! message IDs the dispatcher routes to it (`route::shard_of`). Its RPC
//! tables, replay windows, buffers and timers are its own; nothing in it
//! is shared with another shard, so no lock is taken per message.
//!
//! Call order per turn (the core's, `docs/architecture.md`): wait for the
//! inbox until the core's deadline → handle every packet and command
//! received (a bounded number of batches) → `handle_timeout` if due →
//! run the application handler on each new request and seal its response →
//! drain `poll_transmit` onto the shared socket.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smt_proto::{Endpoint as Core, Event};

use super::inbox::{Batch, ToShard};
use super::tx::{Tx, Wire};
use super::Handler;

/// Batches taken from the inbox per turn at most (the inbox's bound, so
/// the shard drains it): timers fire only after what has arrived is read,
/// or a shard starved of CPU would count as the peer's silence the time
/// its packets waited in the inbox and ask for them again.
const BATCHES_PER_TURN: usize = super::INBOX_BATCHES;

/// Longest sleep with no timer armed (the inbox wakes the shard anyway).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// A shard and what it needs to run.
pub(crate) struct Shard {
    pub core: Core,
    pub wire: Wire,
    pub inbox: flume::Receiver<ToShard>,
    /// Handled batches go back to the dispatcher for reuse.
    pub spare: flume::Sender<Batch>,
    pub handler: Arc<dyn Handler>,
    pub tx: Tx,
}

/// What a shard reports when it stops.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ShardStats {
    /// The shard's protocol counters.
    pub counters: crate::stats::Counters,
    /// Requests handed to the handler.
    pub requests: u64,
    /// Datagrams lost to send errors (the protocol retransmitted them).
    pub send_lost: u64,
}

impl Shard {
    /// A shard with its own protocol core, sending on `wire`.
    pub fn new(
        protocol: &smt_proto::Config,
        wire: Wire,
        inbox: flume::Receiver<ToShard>,
        spare: flume::Sender<Batch>,
        handler: Arc<dyn Handler>,
    ) -> Result<Self, smt_proto::ConfigError> {
        Ok(Self {
            core: Core::new(protocol.clone())?,
            tx: Tx::new(&wire, protocol.max_datagram_size),
            wire,
            inbox,
            spare,
            handler,
        })
    }

    /// Runs until the inbox is closed (the server is closing).
    pub fn run(mut self) -> ShardStats {
        let mut requests = 0;
        loop {
            let deadline = self.core.poll_timeout();
            let wait = deadline.unwrap_or_else(|| Instant::now() + IDLE_WAIT);
            let first = match self.inbox.recv_deadline(wait) {
                Ok(m) => Some(m),
                Err(flume::RecvTimeoutError::Timeout) => None,
                Err(flume::RecvTimeoutError::Disconnected) => break,
            };
            let now = Instant::now();
            if let Some(m) = first {
                self.take(now, m);
                for _ in 1..BATCHES_PER_TURN {
                    let Ok(m) = self.inbox.try_recv() else { break };
                    self.take(now, m);
                }
            }
            if deadline.is_some_and(|d| now >= d) {
                self.core.handle_timeout(now);
            }
            requests += self.serve(now);
            self.tx.transmit(&mut self.core, &self.wire, now);
        }
        self.stats(requests)
    }

    pub(super) fn stats(&self, requests: u64) -> ShardStats {
        ShardStats {
            counters: self.core.stats().into(),
            requests,
            send_lost: self.tx.lost,
        }
    }

    pub(super) fn take(&mut self, now: Instant, message: ToShard) {
        match message {
            ToShard::Packets(mut batch) => {
                // As the engine does: validated peers first, strangers
                // within the core's per-batch budget (a flood from spoofed
                // addresses must not crowd out established peers here
                // either).
                self.core.handle_batch(now, batch.iter());
                batch.clear();
                // The dispatcher may be gone (closing): the batch is freed.
                let _ = self.spare.send(batch);
            }
            ToShard::Install(peer, keys, reply) => {
                let _ = reply.send(self.core.install_session(peer, keys));
            }
            ToShard::Resolver(resolver) => self.core.set_key_resolver(resolver),
        }
    }

    /// Runs the handler on every complete request and seals the responses.
    /// Returns how many requests it handled.
    pub(super) fn serve(&mut self, now: Instant) -> u64 {
        let mut served = 0;
        while let Some(event) = self.core.poll_event() {
            let Event::Request { rpc, data } = event else {
                // A shard starts no RPCs and no handshakes: nothing else
                // concerns it.
                continue;
            };
            served += 1;
            let response = self.handler.handle(rpc.peer, data);
            if let Err(e) = self.core.send_response(now, rpc, &response) {
                // Too large for the configuration, or the session was
                // replaced meanwhile: the client's call fails or restarts.
                tracing::debug!(peer = %rpc.peer, id = rpc.id, "response not sent: {e}");
            }
            self.core.recycle(response);
        }
        served
    }
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, UdpSocket};

    use smt_proto::DropReason;

    use super::super::inbox::{Batch, ToShard};
    use super::*;

    /// A batch routed to a shard goes through the core's admission: with
    /// a budget of 2 datagrams from unvalidated addresses per batch, 5
    /// strangers' datagrams give 3 dropped as over budget (before, the
    /// shard handled each datagram alone and the budget never applied).
    #[test]
    fn a_shard_admits_strangers_within_the_per_batch_budget() {
        let protocol = smt_proto::Config {
            unvalidated_per_batch: 2,
            ..Default::default()
        };
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let (_to_shard, inbox) = flume::unbounded();
        let (spare, _spares) = flume::unbounded();
        let handler: Arc<dyn Handler> = Arc::new(|_: SocketAddr, r: Vec<u8>| r);
        let mut shard =
            Shard::new(&protocol, Wire::Own(socket), inbox, spare, handler).expect("shard");
        let mut batch = Batch::default();
        for port in 1..=5u16 {
            let from = SocketAddr::from(([127, 0, 0, 9], port));
            batch.push(from, &[0x5a; 40]);
        }
        shard.take(Instant::now(), ToShard::Packets(batch));
        let stats = shard.core.stats();
        assert_eq!(stats.drops.get(DropReason::OverBudget), 3, "{stats:?}");
    }
}
