//! Receive storage: a batch of 64 KiB slots, and where the datagrams of the last receive lie.

use std::{array, fmt, io::IoSliceMut, net::SocketAddr};

use quinn_udp::{RecvMeta, BATCH_SIZE};

use crate::{Features, Mode};

/// Bytes per receive slot. A slot holds one received buffer: one datagram, or with GRO a run of
/// same-size datagrams that the kernel caps below 64 KiB in total (`GRO_LEGACY_MAX_SIZE` for
/// anything but TCP). No IPv4 or IPv6 packet without jumbograms exceeds 65 535 bytes either, so
/// nothing is ever truncated.
const SLOT: usize = 1 << 16;

/// Storage for one batch of received datagrams, reused across [`Socket::recv`] calls.
///
/// Holds [`Features::recv_batch`] slots of 64 KiB each (2 MiB for the usual batch of 32).
///
/// [`Socket::recv`]: crate::Socket::recv
pub struct RecvBuffers {
    storage: Box<[u8]>,
    meta: Vec<RecvMeta>,
    filled: Vec<Filled>,
    /// Slots the last receive call filled, before framing dropped any.
    slots_received: usize,
    /// Slots the last receive call offered the kernel: all of them, or one
    /// ([`Socket::recv_one`](crate::Socket::recv_one)).
    slots_offered: usize,
    /// The receive call's headers, prepared once (Linux: smt-udp's own `recvmmsg`).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    headers: crate::sys::RecvHeaders,
}

impl RecvBuffers {
    /// Allocates slots for one receive call of a socket with these `features`.
    pub fn new(features: &Features) -> Self {
        let slots = features.recv_batch.clamp(1, BATCH_SIZE);
        Self {
            storage: vec![0; slots * SLOT].into_boxed_slice(),
            meta: vec![RecvMeta::default(); slots],
            filled: Vec::with_capacity(slots),
            slots_received: 0,
            slots_offered: slots,
            #[cfg(any(target_os = "linux", target_os = "android"))]
            headers: crate::sys::RecvHeaders::new(slots),
        }
    }

    /// Whether the last receive filled every slot it offered. If it did
    /// not, the socket was drained at that moment: a caller woken by
    /// edge-triggered readiness can sleep without another (empty) receive
    /// call, since anything arriving later raises a new edge. After a
    /// [`Socket::recv_one`](crate::Socket::recv_one) that got a datagram it
    /// is always true: more may wait, nothing said otherwise.
    pub fn was_full(&self) -> bool {
        self.slots_received >= self.slots_offered
    }

    /// The datagrams of the last receive, in arrival order, each with its source address.
    ///
    /// GRO buffers are already split: every item is one datagram as its sender sent it. In
    /// raw-IP mode items are IP payloads (the IPv4 header is stripped) and addresses have port 0.
    pub fn iter(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + Clone + '_ {
        self.filled.iter().flat_map(move |filled| {
            let bytes = &self.storage[filled.start..filled.end];
            let stride = filled.stride;
            (0..filled.count()).map(move |i| {
                let end = ((i + 1) * stride).min(bytes.len());
                (filled.addr, &bytes[i * stride..end])
            })
        })
    }

    /// Receives one batch from `fd` with the headers prepared at construction, then frames what
    /// arrived. Returns the number of datagrams [`Self::iter`] yields.
    /// `one` offers the kernel the first slot only.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) fn fill_from(
        &mut self,
        framing: Framing,
        fd: std::os::fd::BorrowedFd<'_>,
        one: bool,
    ) -> std::io::Result<usize> {
        self.filled.clear();
        self.slots_received = 0;
        self.slots_offered = if one { 1 } else { self.meta.len() };
        let meta = &mut self.meta[..self.slots_offered];
        let received = self.headers.recv(fd, &mut self.storage, SLOT, meta)?;
        Ok(self.frame(framing, received))
    }

    /// Hands the slots to `receive` (which fills slots and metadata and returns how many it
    /// filled), then frames what arrived. Returns the number of datagrams [`Self::iter`] yields.
    #[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
    /// `one` offers the first slot only.
    pub(crate) fn fill(
        &mut self,
        framing: Framing,
        one: bool,
        receive: impl FnOnce(&mut [IoSliceMut<'_>], &mut [RecvMeta]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        self.filled.clear();
        self.slots_received = 0;
        self.slots_offered = if one { 1 } else { self.meta.len() };
        let mut slots = self.storage.chunks_mut(SLOT);
        let mut bufs: [IoSliceMut<'_>; BATCH_SIZE] =
            array::from_fn(|_| IoSliceMut::new(slots.next().unwrap_or_default()));
        let offered = self.slots_offered;
        let received = receive(&mut bufs[..offered], &mut self.meta[..offered])?;
        Ok(self.frame(framing, received))
    }

    /// Locates the datagrams of the `received` slots the last call filled.
    fn frame(&mut self, framing: Framing, received: usize) -> usize {
        self.slots_received = received;
        for (i, meta) in self.meta.iter().take(received).enumerate() {
            let slot = &self.storage[i * SLOT..(i + 1) * SLOT];
            self.filled.extend(framing.frame(meta, slot, i * SLOT));
        }
        self.filled.iter().map(Filled::count).sum()
    }
}

#[cfg(test)]
impl RecvBuffers {
    /// How many receive slots the last receive filled (and kept).
    pub(crate) fn slots_filled(&self) -> usize {
        self.filled.len()
    }
}

impl fmt::Debug for RecvBuffers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvBuffers")
            .field("slots", &self.meta.len())
            .field("filled", &self.filled.len())
            .finish_non_exhaustive()
    }
}

/// What surrounds the datagrams in a received buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// UDP: the buffer is one datagram, or several of `stride` bytes each (GRO).
    Udp,
    /// Raw IPv4: the buffer starts with the IP header, which is stripped.
    RawIpv4,
    /// Raw IPv6: the kernel already removed the IP header.
    RawIpv6,
}

impl Framing {
    pub(crate) fn new(mode: Mode, local: SocketAddr) -> Self {
        match (mode, local) {
            (Mode::Udp, _) => Self::Udp,
            (Mode::RawIp { .. }, SocketAddr::V4(_)) => Self::RawIpv4,
            (Mode::RawIp { .. }, SocketAddr::V6(_)) => Self::RawIpv6,
        }
    }

    /// Locates the datagrams in `slot` (which begins at `offset` in the storage), or `None` to
    /// drop a raw IPv4 packet whose header is malformed.
    fn frame(self, meta: &RecvMeta, slot: &[u8], offset: usize) -> Option<Filled> {
        let len = meta.len.min(slot.len());
        let (start, addr, stride) = match self {
            Self::Udp => (0, meta.addr, meta.stride),
            Self::RawIpv6 => (0, with_port_zero(meta.addr), len),
            Self::RawIpv4 => (
                ipv4_header_len(&slot[..len])?,
                with_port_zero(meta.addr),
                len,
            ),
        };
        Some(Filled {
            addr,
            start: offset + start,
            end: offset + len,
            // A stride of 0 (never sent by the kernel) or beyond the data means "one datagram".
            stride: if stride == 0 || stride >= len - start {
                (len - start).max(1)
            } else {
                stride
            },
        })
    }
}

/// The IHL field of an IPv4 header in bytes, if the header is well formed and fits in `packet`.
fn ipv4_header_len(packet: &[u8]) -> Option<usize> {
    const MIN_HEADER: usize = 20;
    let header_len = match packet.first() {
        Some(&first) if first >> 4 == 4 => usize::from(first & 0x0f) * 4,
        _ => 0,
    };
    if header_len < MIN_HEADER || header_len > packet.len() {
        tracing::debug!(
            len = packet.len(),
            header_len,
            "dropping raw IPv4 packet: bad header"
        );
        return None;
    }
    Some(header_len)
}

fn with_port_zero(mut addr: SocketAddr) -> SocketAddr {
    addr.set_port(0);
    addr
}

/// One filled slot: `storage[start..end]` holds datagrams of `stride` bytes (the last may be
/// shorter) from `addr`.
#[derive(Debug, Clone, Copy)]
struct Filled {
    addr: SocketAddr,
    start: usize,
    end: usize,
    /// Always at least 1.
    stride: usize,
}

impl Filled {
    /// How many datagrams the slot holds; an empty buffer is one empty datagram.
    fn count(&self) -> usize {
        (self.end - self.start).div_ceil(self.stride).max(1)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn buffers(slots: usize) -> RecvBuffers {
        RecvBuffers::new(&Features {
            mode: Mode::Udp,
            gso_max_segments: 1,
            gro_segments: 1,
            recv_batch: slots,
            recv_buffer: 0,
            send_buffer: 0,
        })
    }

    /// Fills slot `i` with `packets[i]` as if the kernel had received it with this `stride`.
    fn fake_receive(
        bufs: &mut RecvBuffers,
        framing: Framing,
        addr: SocketAddr,
        packets: &[(&[u8], usize)],
    ) -> usize {
        let result = bufs.fill(framing, false, |slots, meta| {
            for (i, (packet, stride)) in packets.iter().enumerate() {
                slots[i][..packet.len()].copy_from_slice(packet);
                meta[i].addr = addr;
                meta[i].len = packet.len();
                meta[i].stride = *stride;
            }
            Ok(packets.len())
        });
        result.unwrap()
    }

    fn collect(bufs: &RecvBuffers) -> Vec<(SocketAddr, Vec<u8>)> {
        bufs.iter().map(|(addr, d)| (addr, d.to_vec())).collect()
    }

    #[test]
    fn gro_buffers_split_by_stride_with_a_short_tail() {
        let mut bufs = buffers(2);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 7));
        let gro: Vec<u8> = (0..10).collect();
        let count = fake_receive(&mut bufs, Framing::Udp, addr, &[(&gro, 4), (b"xy", 2)]);
        assert_eq!(count, 4);
        let expected: [&[u8]; 4] = [&[0, 1, 2, 3], &[4, 5, 6, 7], &[8, 9], b"xy"];
        let got = collect(&bufs);
        assert_eq!(
            got.iter().map(|(_, d)| d.as_slice()).collect::<Vec<_>>(),
            expected
        );
        assert!(got.iter().all(|(a, _)| *a == addr));
    }

    #[test]
    fn an_empty_datagram_is_one_item() {
        let mut bufs = buffers(1);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 7));
        assert_eq!(fake_receive(&mut bufs, Framing::Udp, addr, &[(b"", 0)]), 1);
        assert_eq!(collect(&bufs), [(addr, vec![])]);
    }

    #[test]
    fn raw_ipv4_header_is_stripped_and_port_zeroed() {
        let mut bufs = buffers(1);
        let mut packet = vec![0x46, 0, 0, 0];
        packet.resize(24, 0xee); // IHL 6: 24-byte header with options
        packet.extend_from_slice(b"payload");
        let from = SocketAddr::from((Ipv4Addr::LOCALHOST, 253));
        let len = packet.len();
        assert_eq!(
            fake_receive(&mut bufs, Framing::RawIpv4, from, &[(&packet, len)]),
            1
        );
        let expected = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        assert_eq!(collect(&bufs), [(expected, b"payload".to_vec())]);
    }

    #[test]
    fn malformed_raw_ipv4_headers_are_dropped() {
        let mut bufs = buffers(4);
        let from = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let short: &[u8] = &[0x45; 10];
        let bad_ihl: &[u8] = &[0x44; 30];
        let wrong_version: &[u8] = &[0x65; 30];
        let fine: &[u8] = &[0x45; 21];
        let packets = [(short, 10), (bad_ihl, 30), (wrong_version, 30), (fine, 21)];
        assert_eq!(fake_receive(&mut bufs, Framing::RawIpv4, from, &packets), 1);
        assert_eq!(collect(&bufs), [(from, vec![0x45])]);
    }

    #[test]
    fn raw_ipv6_payload_is_kept_whole() {
        let mut bufs = buffers(1);
        let from = SocketAddr::from((Ipv6Addr::LOCALHOST, 253));
        assert_eq!(
            fake_receive(&mut bufs, Framing::RawIpv6, from, &[(b"abc", 1)]),
            1
        );
        let expected = SocketAddr::from((Ipv6Addr::LOCALHOST, 0));
        assert_eq!(collect(&bufs), [(expected, b"abc".to_vec())]);
    }

    #[test]
    fn batch_is_capped_at_what_one_call_can_fill() {
        assert_eq!(buffers(1000).meta.len(), BATCH_SIZE);
        assert_eq!(buffers(0).meta.len(), 1);
    }
}
