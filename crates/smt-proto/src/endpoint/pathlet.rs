//! Pathlet feedback in the endpoint (`Config::pathlet_feedback`,
//! `docs/protocol.md` § 4): the PATH in front of datagrams with DATA, the
//! PATH held until its datagram's other packets say whether to believe it,
//! PATH_ECHO sent at a window's worth of bytes or at the tick, and echoes
//! received fed to the peer's windows. With the switch off nothing here
//! runs: the endpoint drops PATH and PATH_ECHO as unsupported.

use std::net::SocketAddr;
use std::time::Instant;

use super::peers::PeerId;
use super::Endpoint;
use crate::crypto::TAG_LEN;
use crate::error::DropReason;
use crate::wire::{first_packet_len, Packet, PacketType, Packets, PathEchoRepr, PathRepr};

impl Endpoint {
    /// Puts the PATH in front of the datagram written at
    /// `buf[reserve..reserve + len]` if it carries DATA (the datagram then
    /// starts at `buf[0]` either way). Returns the datagram's length.
    pub(crate) fn prepend_path(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        (reserve, len): (usize, usize),
        to: SocketAddr,
        data_packets: u64,
    ) -> usize {
        let (src, single) = (self.config.local_port, self.config.pathlet_single_window);
        let fb = (self.counters.stats.data_packets_tx != data_packets)
            .then(|| self.peers.get_mut(&to))
            .flatten()
            .map(|p| p.pathlet_mut(single));
        let Some(fb) = fb else {
            buf.copy_within(reserve..reserve + len, 0);
            return len;
        };
        let path = fb.path(now, src, to.port());
        let plen = path.buffer_len();
        let start = reserve - plen;
        path.emit(&mut Packet::new_unchecked(&mut buf[start..reserve]));
        buf.copy_within(start..reserve + len, 0);
        fb.charge_datagram((plen + len) as u64);
        plen + len
    }

    /// A datagram from `from` that starts with a PATH: the rest is
    /// handled as usual, and the PATH counted only if one of those packets
    /// was accepted under the peer's keys (a DATA packet, or a control
    /// packet whose MAC verified).
    pub(crate) fn handle_datagram_with_path(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        mut before: impl FnMut(&mut Self),
    ) {
        let Ok(path_len) = first_packet_len(datagram, true) else {
            return self.drop_packet(from, DropReason::Malformed);
        };
        let path = Packet::new_checked(&datagram[..path_len])
            .ok()
            .and_then(|p| PathRepr::parse(&p).ok());
        let Some(path) = path else {
            self.drop_packet(from, DropReason::Malformed);
            return;
        };
        let (mut accepted, mut last_data) = (false, None);
        for packet in Packets::new(&datagram[path_len..], true) {
            self.counters.stats.coalesced_packets_rx += 1;
            before(self);
            let drops = self.counters.stats.drops.total();
            let go_on = self.handle_packet(now, from, packet);
            // Not dropped: a DATA packet that opened (neither a replay nor
            // a duplicate) or a control packet whose MAC verified; a
            // HANDSHAKE proves nothing about the sender.
            let ty = Packet::new_checked(packet).map(|p| (p.packet_type(), p.id()));
            if self.counters.stats.drops.total() == drops {
                match ty {
                    Ok((PacketType::HANDSHAKE, _)) | Err(_) => {}
                    Ok((PacketType::DATA, id)) => (accepted, last_data) = (true, Some(id)),
                    Ok(_) => accepted = true,
                }
            }
            if !go_on {
                break;
            }
        }
        if !accepted {
            self.counters.stats.paths_not_believed += 1;
            return;
        }
        let Some(pid) = self.peers.id(&from) else {
            return;
        };
        let single = self.config.pathlet_single_window;
        let due = match self.peers.at_mut(pid) {
            Some(p) => p
                .pathlet_mut(single)
                .record(&path, datagram.len(), last_data),
            None => false,
        };
        self.counters.stats.paths_counted += 1;
        if due {
            self.queue_path_echo(pid, from);
        }
    }

    /// A PATH_ECHO whose MAC verified (`check_packet`): to the peer's
    /// windows; messages a window held back may send again.
    pub(crate) fn on_path_echo(
        &mut self,
        now: Instant,
        pid: PeerId,
        packet: &Packet<&[u8]>,
    ) -> Result<(), DropReason> {
        if !self.config.pathlet_feedback {
            return Err(DropReason::Unsupported);
        }
        let echo = PathEchoRepr::parse(packet).map_err(|_| DropReason::Malformed)?;
        let single = self.config.pathlet_single_window;
        let peer = self.peers.at_mut(pid).ok_or(DropReason::UnknownSession)?;
        if !peer.pathlet_mut(single).on_echo(now, &echo) {
            return Err(DropReason::Duplicate);
        }
        self.counters.stats.path_echoes_rx += 1;
        self.rescan_sendable();
        Ok(())
    }

    /// Sends what `pid` counted as a PATH_ECHO under its current keys, with
    /// the control MAC (a prebuilt datagram of its own).
    fn queue_path_echo(&mut self, pid: PeerId, to: SocketAddr) {
        let local = self.config.local_port;
        let Some(peer) = self.peers.at_mut(pid) else {
            return;
        };
        let epoch = &peer.session.current;
        let (phase, tx) = (epoch.phase(), epoch.tx.clone());
        let Some(echo) = peer
            .pathlet
            .as_mut()
            .and_then(|fb| fb.take_echo((local, to.port()), phase))
        else {
            return;
        };
        let len = echo.buffer_len();
        let mut bytes = vec![0; len + TAG_LEN];
        echo.emit(&mut Packet::new_unchecked(&mut bytes[..len]));
        let tag = tx.control_tag(&bytes[..len]);
        bytes[len..].copy_from_slice(&tag);
        self.outbox.push_prebuilt(to, bytes);
        self.counters.stats.path_echoes_tx += 1;
    }

    /// At each tick: echoes for every peer with something counted, and the
    /// windows forget messages that are gone.
    pub(crate) fn tick_pathlets(&mut self, now: Instant) {
        let peers: Vec<(PeerId, SocketAddr)> = self
            .peers
            .slots()
            .filter(|(_, _, p)| p.pathlet.is_some())
            .map(|(pid, addr, _)| (pid, *addr))
            .collect();
        for (pid, addr) in peers {
            self.queue_path_echo(pid, addr);
            // The peer's own index says which of its messages are still
            // there (no scan of every RPC).
            let Some(p) = self.peers.at_mut(pid) else {
                continue;
            };
            if let Some(fb) = p.pathlet.as_deref_mut() {
                let rpcs = &p.rpcs;
                fb.tick(now, |id| rpcs.has_id(id));
            }
        }
    }
}
