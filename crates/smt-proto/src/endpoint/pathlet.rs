//! Pathlet feedback in the endpoint (`Config::pathlet_feedback`,
//! `docs/protocol.md` § 4): the PATH in front of datagrams with DATA, the
//! PATH held until its datagram's other packets say whether to believe it,
//! PATH_ECHO sent at a window's worth of bytes or at the tick, and echoes
//! received fed to the peer's windows. With the switch off nothing here
//! runs: the endpoint drops PATH and PATH_ECHO as unsupported.
//!
//! Functions over the parts of the endpoint they need ([`Parts`]); the
//! endpoint calls them and applies what they return (`recv.rs` handles
//! the packets behind a PATH, `send.rs` rescans after an echo).

use std::net::SocketAddr;
use std::time::Instant;

use super::outbox::Outbox;
use super::peers::{PeerId, Peers};
use crate::config::Config;
use crate::crypto::TAG_LEN;
use crate::error::DropReason;
use crate::stats::Stats;
use crate::wire::{first_packet_len, Packet, PacketType, PathEchoRepr, PathRepr};

/// What pathlet feedback reads and changes in the endpoint.
pub(crate) struct Parts<'a> {
    pub config: &'a Config,
    pub peers: &'a mut Peers,
    pub stats: &'a mut Stats,
    pub outbox: &'a mut Outbox,
}

/// What the packets behind a PATH showed: whether one was accepted under
/// the peer's keys, and the ID of the last DATA packet among them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Believed {
    accepted: bool,
    last_data: Option<u64>,
}

impl Believed {
    /// `packet` was handled without a drop: a DATA packet that opened
    /// (neither a replay nor a duplicate) or a control packet whose MAC
    /// verified; a HANDSHAKE proves nothing about the sender.
    pub(super) fn not_dropped(&mut self, packet: &[u8]) {
        match Packet::new_checked(packet).map(|p| (p.packet_type(), p.id())) {
            Ok((PacketType::HANDSHAKE, _)) | Err(_) => {}
            Ok((PacketType::DATA, id)) => (self.accepted, self.last_data) = (true, Some(id)),
            Ok(_) => self.accepted = true,
        }
    }
}

/// The PATH a datagram starts with, and the bytes after it.
pub(crate) fn split_path(datagram: &[u8]) -> Result<(PathRepr, &[u8]), DropReason> {
    let path_len = first_packet_len(datagram, true).map_err(|_| DropReason::Malformed)?;
    let path = Packet::new_checked(&datagram[..path_len])
        .ok()
        .and_then(|p| PathRepr::parse(&p).ok())
        .ok_or(DropReason::Malformed)?;
    Ok((path, &datagram[path_len..]))
}

/// Puts the PATH in front of the datagram written at
/// `buf[reserve..reserve + len]` if it carries DATA (`has_data`; the
/// datagram then starts at `buf[0]` either way). Returns the datagram's
/// length.
pub(crate) fn prepend_path(
    p: &mut Parts<'_>,
    now: Instant,
    buf: &mut [u8],
    (reserve, len): (usize, usize),
    to: SocketAddr,
    has_data: bool,
) -> usize {
    let (src, single) = (p.config.local_port, p.config.pathlet_single_window);
    let fb = has_data
        .then(|| p.peers.get_mut(&to))
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

/// Counts the PATH of a `len`-byte datagram from `from` if the packets
/// behind it were believed, and sends an echo if one is due.
pub(crate) fn count_path(
    p: &mut Parts<'_>,
    from: SocketAddr,
    path: &PathRepr,
    len: usize,
    seen: Believed,
) {
    if !seen.accepted {
        p.stats.paths_not_believed += 1;
        return;
    }
    let Some(pid) = p.peers.id(&from) else {
        return;
    };
    let single = p.config.pathlet_single_window;
    let due = match p.peers.at_mut(pid) {
        Some(peer) => peer.pathlet_mut(single).record(path, len, seen.last_data),
        None => false,
    };
    p.stats.paths_counted += 1;
    if due {
        queue_path_echo(p, pid, from);
    }
}

/// A PATH_ECHO whose MAC verified (`check_packet`): to the peer's
/// windows. Ok: counted, and messages a window held back may send again
/// (the caller rescans them).
pub(crate) fn on_path_echo(
    p: &mut Parts<'_>,
    now: Instant,
    pid: PeerId,
    packet: &Packet<&[u8]>,
) -> Result<(), DropReason> {
    if !p.config.pathlet_feedback {
        return Err(DropReason::Unsupported);
    }
    let echo = PathEchoRepr::parse(packet).map_err(|_| DropReason::Malformed)?;
    let single = p.config.pathlet_single_window;
    let peer = p.peers.at_mut(pid).ok_or(DropReason::UnknownSession)?;
    if !peer.pathlet_mut(single).on_echo(now, &echo) {
        return Err(DropReason::Duplicate);
    }
    p.stats.path_echoes_rx += 1;
    Ok(())
}

/// Sends what `pid` counted as a PATH_ECHO under its current keys, with
/// the control MAC (a prebuilt datagram of its own).
fn queue_path_echo(p: &mut Parts<'_>, pid: PeerId, to: SocketAddr) {
    let local = p.config.local_port;
    let Some(peer) = p.peers.at_mut(pid) else {
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
    p.outbox.push_prebuilt(to, bytes);
    p.stats.path_echoes_tx += 1;
}

/// At each tick: echoes for every peer with something counted, and the
/// windows forget messages that are gone.
pub(crate) fn tick_pathlets(p: &mut Parts<'_>, now: Instant) {
    let peers: Vec<(PeerId, SocketAddr)> = p
        .peers
        .slots()
        .filter(|(_, _, peer)| peer.pathlet.is_some())
        .map(|(pid, addr, _)| (pid, *addr))
        .collect();
    for (pid, addr) in peers {
        queue_path_echo(p, pid, addr);
        // The peer's own index says which of its messages are still
        // there (no scan of every RPC).
        let Some(peer) = p.peers.at_mut(pid) else {
            continue;
        };
        if let Some(fb) = peer.pathlet.as_deref_mut() {
            let rpcs = &peer.rpcs;
            fb.tick(now, |id| rpcs.has_id(id));
        }
    }
}
