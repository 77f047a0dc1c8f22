//! `poll_transmit`: control packets first, then DATA by SRPT.

use std::net::SocketAddr;
use std::time::Instant;

use super::{Endpoint, MsgKey, ServerRpcHandle, ServerState, Transmit};
use crate::crypto::TAG_LEN;
use crate::rpc::Outgoing;
use crate::wire::{Body, Packet, Repr};

impl Endpoint {
    /// Writes the next datagram to send into `buf` and says where it goes.
    /// Call until it returns `None`.
    ///
    /// # Panics
    /// If `buf` is shorter than `Config::max_datagram_size`: a programming
    /// error in the driver, not something the network can cause.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        assert!(
            buf.len() >= self.config.max_datagram_size,
            "poll_transmit needs a buffer of at least Config::max_datagram_size ({} bytes)",
            self.config.max_datagram_size
        );
        self.flush_acks(now);
        if std::mem::take(&mut self.grants_dirty) {
            self.update_grants();
        }
        if let Some((destination, bytes)) = self.prebuilt.pop_front() {
            let len = bytes.len().min(buf.len());
            buf[..len].copy_from_slice(&bytes[..len]);
            return Some(self.count_tx(Transmit { destination, len }));
        }
        if let Some((destination, len)) = self.write_handshake_packet(buf) {
            return Some(self.count_tx(Transmit { destination, len }));
        }
        let t = loop {
            match self.control.pop_front() {
                // A control packet of an epoch already forgotten is dropped.
                Some((peer, epoch, repr)) => match self.write_control(peer, epoch, &repr, buf) {
                    Some(t) => break t,
                    None => continue,
                },
                None => break self.write_next_data(buf)?,
            }
        };
        Some(self.count_tx(t))
    }

    fn count_tx(&mut self, t: Transmit) -> Transmit {
        self.stats.datagrams_tx += 1;
        self.stats.bytes_tx += t.len as u64;
        if let Some(s) = self.sessions.get_mut(&t.destination) {
            s.stats.datagrams_tx += 1;
            s.stats.bytes_tx += t.len as u64;
        }
        t
    }

    /// Sends the pending ACKs a tick after the first of them was queued
    /// (a full batch leaves at once, from `queue_ack`). The peer keeps a
    /// response until it is acknowledged and asks only after several silent
    /// ticks, so one tick of delay costs nothing but lets completions share
    /// a packet.
    fn flush_acks(&mut self, now: Instant) {
        if self.pending_acks.values().all(|ids| ids.is_empty()) {
            self.ack_deadline = None;
            return;
        }
        match self.ack_deadline {
            Some(deadline) if now >= deadline => self.ack_deadline = None,
            Some(_) => return,
            None => {
                self.ack_deadline = Some(now + self.config.tick);
                return;
            }
        }
        let pending = std::mem::take(&mut self.pending_acks);
        let pending = pending.into_iter().filter(|(_, ids)| !ids.is_empty());
        for ((peer, epoch), ids) in pending {
            self.queue_control(peer, epoch, 0, Body::Ack(ids));
        }
    }

    fn write_control(
        &mut self,
        peer: SocketAddr,
        epoch: u64,
        repr: &Repr,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let len = repr.buffer_len();
        repr.emit(&mut Packet::new_unchecked(&mut buf[..len]));
        // KEY_UPDATE switches keys: it is authenticated even when other
        // control packets are not.
        let len = if self.config.authenticate_control || repr.body == Body::KeyUpdate {
            let keys = self.sessions.get(&peer)?.epoch(epoch)?;
            let tag = keys.tx.control_tag(&buf[..len]);
            buf[len..len + TAG_LEN].copy_from_slice(&tag);
            len + TAG_LEN
        } else {
            len
        };
        match repr.body {
            Body::Grant { .. } => self.stats.grants_sent += 1,
            Body::Resend { .. } => self.stats.resends_sent += 1,
            _ => {}
        }
        self.stats.control_packets_tx += 1;
        Some(Transmit {
            destination: peer,
            len,
        })
    }

    /// Sends one packet of the message with the fewest bytes left to send
    /// among those allowed to send (sender-side SRPT, as Homa).
    fn write_next_data(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let key = self.pick_srpt()?;
        let ports = self.config.local_port;
        let (k, out) = self.outgoing_mut(key)?;
        let p = out.next_packet()?;
        let len = out.write_packet(p, (ports, k.peer.port()), k.epoch & 1 == 1, k.id, buf);
        self.mark_sendable(key);
        self.stats.data_packets_tx += 1;
        if p.retransmit {
            self.stats.retransmitted_packets += 1;
        }
        Some(Transmit {
            destination: k.peer,
            len,
        })
    }

    /// The sendable message with the fewest bytes left (ties: the lowest
    /// key), from the ranked candidates in `self.sendable`.
    fn pick_srpt(&mut self) -> Option<MsgKey> {
        while let Some((rank, key)) = self.sendable.pop_first() {
            let Some(out) = self.outgoing(key) else {
                continue;
            };
            if !out.has_sendable() {
                // Re-added when a grant or resend request arrives.
                continue;
            }
            let remaining = out.remaining();
            if remaining != rank {
                self.sendable.insert((remaining, key));
                continue;
            }
            return Some(key);
        }
        None
    }

    /// Ranks `key` among the candidates if it has anything to send.
    pub(crate) fn mark_sendable(&mut self, key: MsgKey) {
        if let Some(out) = self.outgoing(key) {
            if out.has_sendable() {
                let rank = out.remaining();
                self.sendable.insert((rank, key));
            }
        }
    }

    /// The outgoing message `key` names, if it is still being sent (a
    /// client's request until its response starts).
    fn outgoing(&self, key: MsgKey) -> Option<&Outgoing> {
        match key {
            MsgKey::Client(h) => {
                let c = self.clients.get(&h)?;
                c.response.is_none().then_some(&c.request)
            }
            MsgKey::Server(k) => match &self.servers.get(&k)?.state {
                ServerState::Responding(out) => Some(out),
                _ => None,
            },
        }
    }

    /// Puts every message with something to send among the candidates: a
    /// safety net run each tick, so a path that made a message sendable
    /// without saying so costs a tick of delay, not a stuck message.
    pub(crate) fn rescan_sendable(&mut self) {
        let clients = self
            .clients
            .iter()
            .filter(|(_, c)| c.response.is_none() && c.request.has_sendable())
            .map(|(h, _)| MsgKey::Client(*h));
        let servers = self.servers.iter().filter_map(|(k, s)| match &s.state {
            ServerState::Responding(out) if out.has_sendable() => Some(MsgKey::Server(*k)),
            _ => None,
        });
        let all: Vec<MsgKey> = clients.chain(servers).collect();
        for key in all {
            self.mark_sendable(key);
        }
    }

    fn outgoing_mut(&mut self, key: MsgKey) -> Option<(ServerRpcHandle, &mut Outgoing)> {
        match key {
            MsgKey::Client(h) => {
                let c = self.clients.get_mut(&h)?;
                Some((c.key(), &mut c.request))
            }
            MsgKey::Server(k) => match &mut self.servers.get_mut(&k)?.state {
                ServerState::Responding(out) => Some((k, out)),
                _ => None,
            },
        }
    }
}
