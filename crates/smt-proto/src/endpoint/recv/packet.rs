//! What `recv.rs` checks of one packet before it routes it (the header
//! parsed once, the ports, the control MAC's place, the internal key of
//! its RPC: free functions of the packet's bytes).

use std::net::SocketAddr;

use super::super::peers::PeerId;
use super::super::table::RpcKey;
use super::super::ServerRpcHandle;
use crate::error::DropReason;
use crate::wire::{DataHeader, Packet, PacketType, Repr, WireError};

/// The internal key of an RPC of peer `peer` with wire key `key`.
pub(super) fn rpc_key(peer: PeerId, key: &ServerRpcHandle) -> RpcKey {
    RpcKey {
        peer,
        epoch: key.epoch,
        id: key.id,
    }
}

/// The destination port is ours (when we know it) and the source port is
/// zero (the sender did not know its port) or the datagram's.
pub(super) fn ports_match(packet: &Packet<&[u8]>, local_port: u16, from: SocketAddr) -> bool {
    let dst_ok = local_port == 0 || packet.dst_port() == local_port;
    let src_ok = packet.src_port() == 0 || packet.src_port() == from.port();
    dst_ok && src_ok
}

/// The header of a session's packet, parsed once (a `Repr` returned from
/// a helper that also checked the packet was copied with `memcpy`, per
/// packet; this one is inlined into its caller), with its ID in range.
#[inline(always)]
pub(super) fn parse_header(packet: &Packet<&[u8]>, id_limit: u64) -> Result<Repr, DropReason> {
    let repr = Repr::parse(packet).map_err(|e| match e {
        WireError::UnknownType(_) => DropReason::UnknownType,
        _ => DropReason::Malformed,
    })?;
    if repr.id >= id_limit {
        return Err(DropReason::Malformed);
    }
    Ok(repr)
}

/// The header of a session's DATA packet (the caller checked its type),
/// parsed once, with its ID in range: what [`parse_header`] checks of a
/// DATA packet, without a `Repr` to move (144 bytes, for its ACK variant).
/// `split`: the header as the datagram's split parsed it (`Split`), taken
/// as it is; without it, the packet is parsed here (and rejected: the
/// split parses every DATA header it can).
#[inline(always)]
pub(super) fn parse_data_header(
    packet: &Packet<&[u8]>,
    split: Option<&DataHeader>,
    id_limit: u64,
) -> Result<DataHeader, DropReason> {
    let h = match split {
        Some(h) => *h,
        None => DataHeader::parse(packet).map_err(|_| DropReason::Malformed)?,
    };
    if packet.id() >= id_limit {
        return Err(DropReason::Malformed);
    }
    Ok(h)
}

/// Whether a datagram's first packet is a PATH (its type byte; the parse
/// comes later).
pub(super) fn starts_with_path(datagram: &[u8]) -> bool {
    Packet::new_checked(datagram).is_ok_and(|p| p.packet_type() == PacketType::PATH)
}
