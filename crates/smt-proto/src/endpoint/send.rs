//! `poll_transmit`: control packets first, then DATA by SRPT; `seal`,
//! which makes a message's records when the application sends it; and
//! `apply_control`, the sends a received control packet asks for.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use super::peers::PeerId;
use super::recv::Then;
use super::scheduler::Scheduler;
use super::table::RpcTables;
use super::{Endpoint, MsgKey, ServerRpcHandle, ServerState, Transmit};
use crate::buffers::BufferPool;
use crate::config::Config;
use crate::crypto::{CryptoError, PacketCipher, TAG_LEN};
use crate::error::SendError;
use crate::payload::Payload;
use crate::record::{
    frame_message_into, seal_message_into, MessageLayout, Plaintext, SealedMessage, SeqLayout,
};
use crate::rpc::{Outgoing, PacketRef};
use crate::stats::Stats;
use crate::trace::MessageKind;
use crate::trace::{PacketSummary, Traced};
use crate::wire::{Body, Packet, Packets, Repr, MIN_PACKET_LEN};

impl Endpoint {
    /// Writes the next datagram to send into `buf` and says where it goes.
    /// Call until it returns `None`.
    ///
    /// With `Config::coalesce`, packets for the same peer that fit after
    /// the first join it in the datagram (control packets in their queue
    /// order, then DATA by SRPT), each byte for byte as it would be alone.
    /// Bounded work: at most one datagram's worth of packets.
    ///
    /// # Panics
    /// If `buf` is shorter than `Config::max_datagram_size`: a programming
    /// error in the driver, not something the network can cause.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.trace_now(now);
        let limit = self.config.max_datagram_size;
        assert!(
            buf.len() >= limit,
            "poll_transmit needs a buffer of at least Config::max_datagram_size ({limit} bytes)"
        );
        self.grant_if_dirty();
        // With pathlet feedback, the datagram is written after room for
        // its PATH, which goes in front once it is known to carry DATA.
        let reserve = if self.config.pathlet_feedback {
            crate::pathlet::PATH_RESERVE
        } else {
            0
        };
        let data_packets = self.counters.stats.data_packets_tx;
        let Some((first, len)) = self.write_datagram(&mut buf[reserve..limit]) else {
            self.flush_tx_tally();
            return None;
        };
        let len = if reserve > 0 {
            let at = (reserve, len);
            self.prepend_path(now, buf, at, first.destination, data_packets)
        } else {
            len
        };
        if self.counters.trace.is_some() {
            self.trace_datagram(first.destination, &buf[..len]);
        }
        Some(self.count_tx(Transmit {
            destination: first.destination,
            len,
        }))
    }

    /// Computes the grants once for everything received since they last
    /// were (`Scheduler::grant`), queueing a GRANT for each that rose.
    fn grant_if_dirty(&mut self) {
        if !self.scheduler.take_grants_dirty() {
            return;
        }
        let (scheduler, clients, servers, outbox, config) = (
            &mut self.scheduler,
            &mut self.rpcs.clients,
            &mut self.rpcs.servers,
            &mut self.outbox,
            &mut self.config,
        );
        let limits = (u64::from(config.grant_window), config.overcommit);
        scheduler.grant(clients, servers, limits, |k, body| {
            outbox.queue_control(config.local_port, k.peer, k.epoch, k.id, body);
        });
    }

    /// Writes the next datagram into `buf`: its first packet, then (with
    /// `Config::coalesce`) the packets for the same peer and epoch that
    /// fit after it. Returns the first packet's transmit and the length.
    fn write_datagram(&mut self, buf: &mut [u8]) -> Option<(Transmit, usize)> {
        let (first, epoch) = self.write_first_packet(buf)?;
        let mut len = first.len;
        if let Some(epoch) = epoch.filter(|_| self.config.coalesce) {
            let to = (first.destination, epoch);
            while let Some((more, packets, data)) = self.write_packet_for(to, &mut buf[len..]) {
                len += more;
                self.counters.stats.coalesced_packets_tx += packets;
                if data {
                    // A DATA run stops only where nothing more can join.
                    break;
                }
            }
        }
        Some((first, len))
    }

    /// Traces each packet of a datagram about to leave.
    #[cold]
    fn trace_datagram(&mut self, peer: SocketAddr, datagram: &[u8]) {
        let tagged = self.config.authenticate_control;
        for packet in Packets::new(datagram, tagged) {
            let packet = PacketSummary::of(packet, tagged);
            self.record_trace(Traced::Sent { peer, packet });
        }
    }

    /// The first packet of the next datagram and its key epoch: a prebuilt
    /// datagram or a handshake packet (both travel alone: no epoch), else a
    /// control packet, else DATA (with `Config::coalesce`, the run of DATA
    /// packets that fills the datagram: no epoch either).
    fn write_first_packet(&mut self, buf: &mut [u8]) -> Option<(Transmit, Option<u64>)> {
        if let Some((destination, bytes)) = self.outbox.pop_prebuilt() {
            let len = bytes.len().min(buf.len());
            buf[..len].copy_from_slice(&bytes[..len]);
            return Some((Transmit { destination, len }, None));
        }
        if let Some((destination, len)) = self.handshakes().write_packet(buf) {
            return Some((Transmit { destination, len }, None));
        }
        loop {
            match self.outbox.pop_control() {
                // A control packet of an epoch already forgotten is dropped.
                Some((peer, epoch, repr)) => {
                    if let Some(t) = self.write_control(peer, epoch, &repr, buf) {
                        return Some((t, Some(epoch)));
                    }
                }
                None => {
                    // Transmit offload: a DATA packet is its NIC segment,
                    // alone in its datagram.
                    // With `Config::coalesce`, the run fills the datagram:
                    // no control packet is queued (or it would have gone
                    // first), and the packet that stopped the run stops
                    // any further one. No epoch: nothing more joins.
                    let run = self.config.coalesce && !self.config.tx_offload;
                    let (t, _, packets) = self.write_next_data(None, run, buf)?;
                    self.counters.stats.coalesced_packets_tx += packets - 1;
                    return Some((t, None));
                }
            }
        }
    }

    /// More packets for `peer` in key epoch `epoch` that fit in `buf`: the
    /// next control packet if it is one, else (with none queued for
    /// anyone) the next DATA packets by SRPT while they are. Returns their
    /// length and count, and whether they were DATA (after which nothing
    /// more joins the datagram). One epoch per datagram: a datagram is then wholly current
    /// or wholly stale for its receiver, and a stale packet (whose MAC the
    /// receiver can no longer check) cannot take current ones down with
    /// it.
    fn write_packet_for(
        &mut self,
        to: (SocketAddr, u64),
        buf: &mut [u8],
    ) -> Option<(usize, u64, bool)> {
        if buf.len() < MIN_PACKET_LEN {
            return None;
        }
        while let Some((peer, epoch, repr)) = self.outbox.next_control() {
            if (peer, epoch) != to || self.control_len(repr) > buf.len() {
                return None;
            }
            let (to, epoch, repr) = self.outbox.pop_control()?;
            if let Some(t) = self.write_control(to, epoch, &repr, buf) {
                return Some((t.len, 1, false));
            }
        }
        if self.config.tx_offload {
            // DATA for the NIC travels alone (`write_first_packet`).
            return None;
        }
        let (t, _, packets) = self.write_next_data(Some(to), true, buf)?;
        Some((t.len, packets, true))
    }

    /// A control packet's length on the wire, with its MAC.
    fn control_len(&self, repr: &Repr) -> usize {
        let tagged = self.config.authenticate_control || repr.body == Body::KeyUpdate;
        repr.buffer_len() + if tagged { TAG_LEN } else { 0 }
    }

    /// Counts a datagram. The peer's counters are added to once per run of
    /// datagrams to it (when another peer's datagram follows, or nothing
    /// is left to send), not per datagram: a hash lookup per packet was a
    /// tenth of the core's cost of sending a megabyte.
    fn count_tx(&mut self, t: Transmit) -> Transmit {
        self.counters.stats.datagrams_tx += 1;
        self.counters.stats.bytes_tx += t.len as u64;
        if self.counters.tx_tally.peer != Some(t.destination) {
            self.flush_tx_tally();
            self.counters.tx_tally.peer = Some(t.destination);
        }
        self.counters.tx_tally.datagrams += 1;
        self.counters.tx_tally.bytes += t.len as u64;
        t
    }

    /// Adds the tallied datagrams to their peer's counters.
    fn flush_tx_tally(&mut self) {
        let tally = std::mem::take(&mut self.counters.tx_tally);
        if let Some(s) = tally.peer.and_then(|p| self.peers.get_mut(&p)) {
            s.session.stats.datagrams_tx += tally.datagrams;
            s.session.stats.bytes_tx += tally.bytes;
        }
    }

    /// Whether a control packet may go to `peer`: reactive packets about
    /// its requests (or about IDs we do not know) to an address not yet
    /// validated are bounded by the amplification budget (peer.rs). ACKs
    /// and packets about our own calls go to a server the application
    /// chose to call, and KEY_UPDATE answers an authenticated packet.
    fn may_react(&mut self, peer: Option<PeerId>, repr: &Repr, len: usize) -> bool {
        if matches!(repr.body, Body::Ack(_) | Body::KeyUpdate) {
            return true;
        }
        let Some(p) = peer.and_then(|id| self.peers.at_mut(id)) else {
            return true;
        };
        p.session.is_local_id(repr.id) || p.may_react(len)
    }

    fn write_control(
        &mut self,
        peer: SocketAddr,
        epoch: u64,
        repr: &Repr,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let len = repr.buffer_len();
        let total = self.control_len(repr);
        // The packet's one address hash; the peer is indexed after it.
        let pid = self.peers.id(&peer);
        if !self.may_react(pid, repr, total) {
            tracing::debug!(%peer, "control packet to an unvalidated address over its amplification budget: dropped");
            self.counters.stats.amplification_limited += 1;
            return None;
        }
        if total > buf.len() {
            // Only a datagram size below what the configuration checks
            // allow could cause it; dropping beats a panic (the peer asks
            // again).
            tracing::debug!(%peer, total, "control packet larger than the datagram: dropped");
            return None;
        }
        repr.emit(&mut Packet::new_unchecked(&mut buf[..len]));
        // KEY_UPDATE switches keys: it is authenticated even when other
        // control packets are not.
        if total > len {
            self.tag_control(pid?, epoch, &mut buf[..total], len)?;
        }
        self.count_control(pid, &repr.body);
        Some(Transmit {
            destination: peer,
            len: total,
        })
    }

    /// Writes the control MAC of the packet in `buf[..len]` (under key
    /// epoch `epoch` of peer `pid`) into the rest of `buf`. `None` if that
    /// epoch is gone.
    fn tag_control(&self, pid: PeerId, epoch: u64, buf: &mut [u8], len: usize) -> Option<()> {
        let keys = self.peers.at(pid)?.session.epoch(epoch)?;
        let tag = keys.tx.control_tag(&buf[..len]);
        buf[len..].copy_from_slice(&tag);
        Some(())
    }

    /// Counts a control packet sent (to peer `pid`, if it has a session).
    fn count_control(&mut self, pid: Option<PeerId>, body: &Body) {
        match body {
            Body::Grant { .. } => self.counters.stats.grants_sent += 1,
            Body::Resend { .. } => {
                self.counters.stats.resends_sent += 1;
                if let Some(s) = pid.and_then(|id| self.peers.at_mut(id)) {
                    s.session.stats.resends_sent += 1;
                }
            }
            _ => {}
        }
        self.counters.stats.control_packets_tx += 1;
    }

    /// Writes DATA packets of the messages with the fewest bytes left to
    /// send among those allowed to send (sender-side SRPT, as Homa): the
    /// next one, then with `run` more (of that message or the next) while
    /// the next goes to the same peer and key epoch and fits in `buf`.
    /// With `to` (peer, epoch), only packets that go there. Returns the
    /// transmit (its length all the packets'), their key epoch and count;
    /// `None` if nothing was written. The candidate that stops a run keeps
    /// its rank. A run is one call: control packets, which go first, are
    /// queued for no one whenever DATA is written (`write_packet_for`) and
    /// nothing here queues one, so asking between packets changes nothing.
    ///
    /// Candidates in `sendable` may be stale (gone, waiting for a grant,
    /// or ranked by an old count): those are dropped or re-ranked here. One
    /// RPC lookup per candidate. The message sent from stays at the top of
    /// the queue, re-ranked in place: it has fewer bytes left than before,
    /// so it stays the smallest, and a run of its packets costs no pops
    /// and pushes.
    fn write_next_data(
        &mut self,
        to: Option<(SocketAddr, u64)>,
        run: bool,
        buf: &mut [u8],
    ) -> Option<(Transmit, u64, u64)> {
        let (cfg, ticks, nic) = (&self.config, self.time.ticks, &mut self.nic);
        let (scheduler, rpcs) = (&mut self.scheduler, &mut self.rpcs);
        let (stats, peers) = (&mut self.counters.stats, &mut self.peers);
        let mut sent = DataRun::to(to);
        while let Some(top) = scheduler.next_sendable() {
            let Some((k, out)) = ready_candidate(scheduler, rpcs, top) else {
                continue;
            };
            let buf = &mut buf[sent.len..];
            // A ready candidate has a packet to send (`candidate_verdict`).
            let Some(p) = out.peek_packet().filter(|p| sent.takes(k, p, buf.len())) else {
                break;
            };
            if !may_seal(out, &p, k, cfg.pathlet_feedback, peers, stats) {
                unqueue_next(scheduler, out);
                continue;
            }
            out.take_packet(p, ticks);
            requeue_after_write(scheduler, out);
            let ports = (cfg.local_port, k.peer.port());
            let Some(len) = out.write_packet(p, ports, k.epoch & 1 == 1, k.id, buf) else {
                continue;
            };
            if cfg.tx_offload && out.for_nic {
                nic.tx_records = Some(out.tx_records(p, k, cfg.seq_layout, len));
            }
            count_data_sent(cfg, stats, peers, k, len, p.retransmit);
            if !sent.add((k.peer, k.epoch), len, run) {
                break;
            }
        }
        sent.into_transmit()
    }

    /// Ranks `key` among the candidates if it has anything to send and is
    /// not ranked already.
    pub(crate) fn mark_sendable(&mut self, key: MsgKey) {
        let Some((_, out, true)) = outgoing_in(&mut self.rpcs.clients, &mut self.rpcs.servers, key)
        else {
            return;
        };
        if let Some(rank) = out.queue_rank() {
            self.scheduler.push_sendable(rank, key);
        }
    }

    /// Puts every message with something to send among the candidates: a
    /// safety net run each tick, so a path that made a message sendable
    /// without saying so costs a tick of delay, not a stuck message.
    pub(crate) fn rescan_sendable(&mut self) {
        let clients = self
            .rpcs
            .clients
            .iter()
            .filter(|(_, c)| !c.request_done() && c.request.has_sendable())
            .map(|(h, _)| MsgKey::Client(h));
        let servers = self
            .rpcs
            .servers
            .slots()
            .filter_map(|(m, _, s)| match &s.state {
                ServerState::Responding(out) if out.has_sendable() => Some(MsgKey::Server(m)),
                _ => None,
            });
        let all: Vec<MsgKey> = clients.chain(servers).collect();
        for key in all {
            self.mark_sendable(key);
        }
    }
}

impl Transmit {
    fn new(destination: SocketAddr, len: usize) -> Self {
        Self { destination, len }
    }
}

/// The DATA packets one `write_next_data` call wrote: where they go (the
/// first one sets it), their bytes and their count.
struct DataRun {
    to: Option<(SocketAddr, u64)>,
    len: usize,
    packets: u64,
}

impl DataRun {
    /// Nothing written yet, to `to` if given.
    #[inline]
    fn to(to: Option<(SocketAddr, u64)>) -> Self {
        Self {
            to,
            len: 0,
            packets: 0,
        }
    }

    /// Whether packet `p` of RPC `k` may join: the run goes where `k`
    /// goes (or has no destination yet) and `p` fits in the `room` left.
    #[inline]
    fn takes(&self, k: ServerRpcHandle, p: &PacketRef, room: usize) -> bool {
        self.to.is_none_or(|to| to == (k.peer, k.epoch)) && p.wire_len() <= room
    }

    /// Adds a packet of `len` bytes to `to`; returns `run`: whether more
    /// may follow.
    #[inline]
    fn add(&mut self, to: (SocketAddr, u64), len: usize, run: bool) -> bool {
        self.to = Some(to);
        self.len += len;
        self.packets += 1;
        run
    }

    /// The datagram's transmit so far, its key epoch and packet count, if
    /// a packet was written.
    #[inline]
    fn into_transmit(self) -> Option<(Transmit, u64, u64)> {
        let (peer, epoch) = self.to.filter(|_| self.packets > 0)?;
        Some((Transmit::new(peer, self.len), epoch, self.packets))
    }
}

/// What `write_next_data` does with the candidate at the top of the queue
/// before looking at where its packet goes.
enum Verdict {
    /// Nothing to send now: off the queue.
    Unqueue,
    /// Ranked by an old count: re-ranked by this one.
    Rerank(u64),
    /// Rightly the smallest: its next packet may go.
    Ready,
}

/// The candidate at the top of the queue (ranked `rank`) with its wire key,
/// if it may send now; else it is dropped, taken off or re-ranked
/// (`candidate_verdict`) and `None`: the caller looks at the next.
#[inline(always)]
fn ready_candidate<'a>(
    scheduler: &mut Scheduler,
    rpcs: &'a mut RpcTables,
    (rank, key): (u64, MsgKey),
) -> Option<(ServerRpcHandle, &'a mut Outgoing)> {
    let Some((k, out, sending)) = outgoing_in(&mut rpcs.clients, &mut rpcs.servers, key) else {
        scheduler.pop_next();
        return None;
    };
    match candidate_verdict(out, sending, rank) {
        Verdict::Unqueue => {
            unqueue_next(scheduler, out);
            None
        }
        Verdict::Rerank(remaining) => {
            scheduler.rerank_next(remaining);
            None
        }
        Verdict::Ready => Some((k, out)),
    }
}

/// Judges the candidate `out`, ranked at `rank`, whose message is still
/// being sent if `sending`.
#[inline]
fn candidate_verdict(out: &Outgoing, sending: bool, rank: u64) -> Verdict {
    if !sending || !out.has_sendable() {
        // Queued again when a grant or resend request arrives (or by the
        // tick's rescan).
        return Verdict::Unqueue;
    }
    match out.remaining() {
        remaining if remaining != rank => Verdict::Rerank(remaining),
        _ => Verdict::Ready,
    }
}

/// Whether `out`'s next packet `p` may be sealed and sent now: not held
/// back by its pathlet's window, and sealed. Counts or logs why not.
#[inline]
fn may_seal(
    out: &mut Outgoing,
    p: &PacketRef,
    k: ServerRpcHandle,
    pathlet: bool,
    peers: &mut super::peers::Peers,
    stats: &mut Stats,
) -> bool {
    // Retransmissions are loss recovery: the loss already cut the window,
    // and holding them back could leave a window whose bytes the receiver
    // never counts (duplicates) full for good.
    let held =
        pathlet && !p.retransmit && !within_pathlet_window(peers, k.peer, k.id, p.wire_len());
    if held {
        // Sent again after an echo (or the tick's rescan).
        stats.pathlet_held += 1;
        return false;
    }
    if out.seal_for(p).is_err() {
        // Cannot happen (the sequence numbers were checked and the record
        // budget reserved when the message was framed); the message sends
        // nothing more and its RPC times out.
        tracing::error!(peer = %k.peer, id = k.id, "sealing a record failed");
        return false;
    }
    true
}

/// Takes the candidate at the top of the queue off it; it is ranked again
/// by `mark_sendable`.
#[inline]
fn unqueue_next(scheduler: &mut Scheduler, out: &mut Outgoing) {
    out.queued = false;
    scheduler.pop_next();
}

/// After a packet of the top candidate was written: it stays at the top,
/// re-ranked in place (it has fewer bytes left, so it is still the
/// smallest), unless it has nothing more to send.
#[inline]
fn requeue_after_write(scheduler: &mut Scheduler, out: &mut Outgoing) {
    if out.has_sendable() {
        scheduler.rerank_next(out.remaining());
    } else {
        unqueue_next(scheduler, out);
    }
}

/// Counts a DATA packet of `len` bytes sent for RPC `k`, and tells its
/// pathlet.
#[inline]
fn count_data_sent(
    cfg: &Config,
    stats: &mut Stats,
    peers: &mut super::peers::Peers,
    k: ServerRpcHandle,
    len: usize,
    retransmit: bool,
) {
    stats.data_packets_tx += 1;
    if cfg.pathlet_feedback {
        if let Some(peer) = peers.get_mut(&k.peer) {
            peer.pathlet_mut(cfg.pathlet_single_window)
                .on_data_sent(k.id, len as u64, retransmit);
        }
    }
    if retransmit {
        // Rare: the peer's own count is worth a lookup here.
        stats.retransmitted_packets += 1;
        if let Some(s) = peers.get_mut(&k.peer) {
            s.session.stats.retransmitted_packets += 1;
        }
    }
}

/// Whether message `id` to `peer` may send a packet of `len` bytes under
/// its pathlet's window (always, before an echo has placed it or the
/// peer's messages); a new message starts where they were seen.
fn within_pathlet_window(
    peers: &mut super::peers::Peers,
    peer: SocketAddr,
    id: u64,
    len: usize,
) -> bool {
    let Some(fb) = peers.get_mut(&peer).and_then(|p| p.pathlet.as_deref_mut()) else {
        return true;
    };
    fb.adopt(id);
    fb.allowance(id) >= len as u64
}

/// The outgoing message `key` names with its wire key, and whether it is
/// still being sent (a client's request until `ClientRpc::request_done`); a
/// free function so the caller can hold other fields of the endpoint at
/// once.
fn outgoing_in<'a>(
    clients: &'a mut super::table::ClientTable,
    servers: &'a mut super::table::ServerTable,
    key: MsgKey,
) -> Option<(ServerRpcHandle, &'a mut Outgoing, bool)> {
    match key {
        MsgKey::Client(h) => {
            let c = clients.get_mut(&h)?;
            let (k, sending) = (c.key(), !c.request_done());
            Some((k, &mut c.request, sending))
        }
        MsgKey::Server(m) => Some((m.rpc, servers.get_mut(m.slot)?.responding_mut()?, true)),
    }
}

impl Endpoint {
    /// Seals `data` as message `id` of key epoch `epoch` towards `peer`,
    /// padded to `padded` bytes (`Padding::padded_len`, which the caller
    /// worked out to check the length): whole now if it is small, else
    /// record by record as its packets leave, from the caller's bytes (a
    /// borrowed slice is copied once first; see `record::seal`). The
    /// records' key budget is reserved now.
    pub(crate) fn seal(
        &mut self,
        peer_id: PeerId,
        key: (u64, u64),
        data: Payload<'_>,
        padded: u64,
    ) -> Result<Outgoing, SendError> {
        self.seal_with(peer_id, key, data, padded, |_, out| out)
    }

    /// [`Endpoint::seal`], the message handed to `place` with the RPC
    /// tables, which keeps it where its RPC lives: built as it is handed
    /// over, not returned and moved (an `Outgoing` is 320 bytes; copying
    /// it out of a `Result`, and for a response into the RPC's state, was
    /// two memcpys per message, ~190 instructions per RPC). Never
    /// inlined: inlined into its callers, it pushed the layout and pool
    /// helpers it inlines out of line, which cost more.
    #[inline(never)]
    pub(crate) fn seal_with<R>(
        &mut self,
        peer_id: PeerId,
        (epoch, id): (u64, u64),
        data: Payload<'_>,
        padded: u64,
        place: impl FnOnce(&mut RpcTables, Outgoing) -> R,
    ) -> Result<R, SendError> {
        let cfg = &self.config;
        let len = data.len() as u64;
        let layout = MessageLayout::new(len, padded, cfg.record_size);
        let wire = self.buffers.pool.take_filled(layout.wire_len() as usize);
        let (peer, p) = self.peers.entry_mut(peer_id).ok_or(SendError::NoSession)?;
        let session = &mut p.session;
        let keys = session.epoch_mut(epoch).ok_or(SendError::NoSession)?;
        if keys.records_sealed.saturating_add(layout.records()) > keys.tx.record_limit() {
            return Err(SendError::KeyExhausted);
        }
        let (cipher, for_nic) = sealing_cipher(cfg, &keys.tx, &self.nic);
        let pool = &mut self.buffers.pool;
        let sealed =
            seal_payload(cipher, cfg.seq_layout, id, data, layout, wire, pool).map_err(|_| {
                SendError::MessageTooLarge {
                    len,
                    max: cfg.message_len_limit(),
                }
            })?;
        keys.records_sealed += layout.records();
        count_sealed(&mut session.stats, layout.records());
        count_sealed(&mut self.counters.stats, layout.records());
        let (mss, unscheduled) = (cfg.mss() as u16, cfg.unscheduled_bytes);
        if self.counters.trace.is_some() {
            self.trace_sealed(peer, (epoch, id), len, layout);
        }
        Ok(place(
            &mut self.rpcs,
            Outgoing::new(sealed, mss, unscheduled, for_nic),
        ))
    }

    /// Traces a message sealed (tracing is on).
    #[cold]
    fn trace_sealed(
        &mut self,
        peer: SocketAddr,
        (epoch, id): (u64, u64),
        len: u64,
        l: MessageLayout,
    ) {
        let kind = match self
            .peers
            .get(&peer)
            .is_some_and(|p| p.session.is_local_id(id))
        {
            true => MessageKind::Request,
            false => MessageKind::Response,
        };
        let (wire_len, records) = (l.wire_len(), l.records());
        #[rustfmt::skip]
        self.record_trace(Traced::Sealed { peer, epoch, id, kind, len, wire_len, records });
    }
}

/// The cipher a message's records are sealed with, and whether the NIC
/// seals them. Transmit offload: the records are framed with plaintext
/// bodies and empty tags (what the null cipher "seals"), for the NIC to
/// seal under `tx`, if that key can be handed to a NIC.
#[inline]
fn sealing_cipher(
    cfg: &Config,
    tx: &Arc<dyn PacketCipher>,
    nic: &super::offload::Nic,
) -> (Arc<dyn PacketCipher>, bool) {
    match cfg.tx_offload && tx.offload_key().is_some() {
        false => (tx.clone(), false),
        true => (nic.framing.clone(), true),
    }
}

/// Seals `data` as message `id` whole if it is small (`Payload::EAGER_LIMIT`),
/// else frames it to be sealed record by record as its packets leave.
#[inline]
fn seal_payload(
    cipher: Arc<dyn PacketCipher>,
    seq: SeqLayout,
    id: u64,
    data: Payload<'_>,
    layout: MessageLayout,
    wire: Vec<u8>,
    pool: &mut BufferPool,
) -> Result<SealedMessage, CryptoError> {
    match (data, layout.data_len() as usize <= Payload::EAGER_LIMIT) {
        (Payload::Borrowed(d), true) => seal_message_into(cipher, seq, id, d, layout, wire),
        (Payload::Owned(d), true) => seal_message_into(cipher, seq, id, &d, layout, wire),
        (Payload::Owned(d), false) => {
            frame_message_into(cipher, seq, id, Plaintext::Shared(d), layout, wire)
        }
        (Payload::Borrowed(d), false) => {
            // Lent, not given: copied once, into a buffer that comes back
            // to the pool (fresh megabytes fault in page by page).
            let mut copy = pool.take(d.len());
            copy.extend_from_slice(d);
            frame_message_into(cipher, seq, id, Plaintext::Copied(copy), layout, wire)
        }
    }
}

/// Counts a message of `records` records sealed (or framed to be).
#[inline]
fn count_sealed(stats: &mut Stats, records: u64) {
    stats.records_sealed += records;
    stats.messages_sent += 1;
}

impl Endpoint {
    /// Carries out what a control packet about the RPC `key` decided
    /// (`recv/control.rs`): mostly sends to queue.
    pub(super) fn apply_control(&mut self, now: Instant, key: ServerRpcHandle, then: Then) {
        match then {
            Then::Nothing => {}
            Then::Sendable(msg) => self.mark_sendable(msg),
            Then::Restart(handle) => self.restart(now, handle),
            Then::Fail(handle, e) => self.fail_client(handle, e),
            Then::Resend(k, gaps) => self.queue_resends(k, gaps),
            Then::Ack(k) => self.rpc_parts().queue_ack(now, k),
            Then::Say(body) => self.queue_control(key.peer, key.epoch, key.id, body),
            Then::ClientGone { slot, cancelled } => {
                self.rpc_parts().client_gone(key, slot, cancelled);
            }
        }
    }
}
