//! The endpoint's own pcapng capture: every datagram it puts on the socket
//! (a GSO batch as the datagrams it becomes) and every datagram it reads
//! (a GRO batch split), framed as the wire had them: an IPv4 or IPv6
//! header and, over UDP, a UDP header (raw-IP link type), with the
//! endpoint's and the peer's real addresses and ports. `smt dump`,
//! Wireshark and tshark read it (`docs/observability.md`).
//!
//! The data path copies each batch into a queue and goes on; a writer
//! thread frames and writes. When the writer falls [`CAPTURE_BUFFER`]
//! bytes behind, datagrams are dropped from the capture (never from the
//! endpoint) and counted: [`Capture::summary`], and in the file's
//! closing interface statistics block (`isb_ifdrop`).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use etherparse::{IpNumber, PacketBuilder};
use pcap_parser::pcapng::{
    EnhancedPacketBlock, InterfaceDescriptionBlock, InterfaceStatisticsBlock, SectionHeaderBlock,
};
use pcap_parser::{Linktype, OptionCode, PcapNGOption, ToVec};

use crate::clock::WallClock;
use crate::spool::{Sink, Spool};

/// Bytes of datagrams the capture holds for its writer before it drops.
pub const CAPTURE_BUFFER: usize = 64 << 20;

/// A pcapng file of the datagrams of one or more endpoints. Clones write
/// to the same file; give one to each endpoint that should be in it
/// (`smt::EndpointConfig::set_observe`). The
/// file is complete after [`Capture::finish`], or once every clone (the
/// endpoints' too) is dropped.
#[derive(Clone)]
pub struct Capture {
    spool: Arc<Spool<Batch>>,
}

/// How much a capture holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureSummary {
    /// Datagrams written.
    pub datagrams: u64,
    /// Datagrams the endpoints sent or received that the capture does
    /// not hold: its writer was [`CAPTURE_BUFFER`] bytes behind, had
    /// failed, or the capture was finished.
    pub dropped: u64,
}

impl Capture {
    /// Creates (or truncates) the pcapng file at `path`.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::to_writer(File::create(path)?)
    }

    /// A capture written to `out` (a file opened as the caller wishes).
    /// The file's header is written before this returns.
    pub fn to_writer(out: impl Write + Send + 'static) -> io::Result<Self> {
        let sink = PcapNg::start(out, WallClock::now())?;
        let spool = Spool::start("smt-capture", sink, CAPTURE_BUFFER)?;
        Ok(Self {
            spool: Arc::new(spool),
        })
    }

    /// Datagrams written and dropped so far.
    pub fn summary(&self) -> CaptureSummary {
        let t = self.spool.tally();
        CaptureSummary {
            datagrams: t.written,
            dropped: t.dropped,
        }
    }

    /// Writes every datagram queued, the closing statistics, and closes
    /// the file. Datagrams that come later are dropped (and counted).
    /// Fails with the writer's error if writing failed (the file holds
    /// what came before it).
    pub fn finish(&self) -> io::Result<CaptureSummary> {
        self.spool.finish()?;
        Ok(self.summary())
    }

    fn offer(&self, batch: Batch) {
        let units = batch.bytes.len().div_ceil(batch.segment.max(1)) as u64;
        let bytes = batch.bytes.len() + std::mem::size_of::<Batch>();
        self.spool.offer(batch, bytes, units.max(1));
    }
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("summary", &self.summary())
            .finish_non_exhaustive()
    }
}

/// What goes over the wire under the SMT packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// UDP datagrams (an IP and a UDP header).
    Udp,
    /// Raw IP with this protocol number (no UDP header).
    Ip(u8),
}

/// One endpoint's way into a capture: its address and framing. The
/// driver's data path calls [`CaptureTap::sent`] and
/// [`CaptureTap::received`]; both copy and return at once.
#[derive(Clone, Debug)]
pub struct CaptureTap {
    /// The capture written to.
    pub capture: Capture,
    /// The endpoint's own address (a datagram's source or destination).
    pub local: SocketAddr,
    /// How its datagrams went over the wire.
    pub framing: Framing,
}

impl CaptureTap {
    /// `datagrams` left for `to`: one datagram, or a GSO batch of
    /// `segment`-byte datagrams (the last may be shorter).
    pub fn sent(&self, at: Instant, to: SocketAddr, datagrams: &[u8], segment: usize) {
        self.capture.offer(Batch {
            at,
            src: self.local,
            dst: to,
            framing: self.framing,
            bytes: datagrams.to_vec(),
            segment,
        });
    }

    /// One datagram arrived from `from`.
    pub fn received(&self, at: Instant, from: SocketAddr, datagram: &[u8]) {
        self.capture.offer(Batch {
            at,
            src: from,
            dst: self.local,
            framing: self.framing,
            bytes: datagram.to_vec(),
            segment: datagram.len(),
        });
    }
}

/// Datagrams of one send or receive, as the data path handed them over.
struct Batch {
    at: Instant,
    src: SocketAddr,
    dst: SocketAddr,
    framing: Framing,
    bytes: Vec<u8>,
    segment: usize,
}

/// The pcapng writer: a section header and one raw-IP interface, then an
/// enhanced packet block per datagram (nanosecond stamps), and at the
/// end the interface's statistics.
struct PcapNg<W: Write> {
    out: BufWriter<W>,
    clock: WallClock,
    frame: Vec<u8>,
    written: u64,
    first: Option<u64>,
    last: u64,
}

impl<W: Write + Send + 'static> PcapNg<W> {
    fn start(out: W, clock: WallClock) -> io::Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 20, out);
        let app = format!("smt {}", env!("CARGO_PKG_VERSION"));
        let mut shb = SectionHeaderBlock {
            block_type: 0,
            block_len1: 0,
            bom: 0,
            major_version: 1,
            minor_version: 0,
            section_len: -1,
            options: vec![option(OptionCode::ShbUserAppl, app.as_bytes())],
            block_len2: 0,
        };
        let mut idb = InterfaceDescriptionBlock {
            block_type: 0,
            block_len1: 0,
            linktype: Linktype::RAW,
            reserved: 0,
            snaplen: 0,
            options: vec![
                option(OptionCode::IfName, b"smt"),
                option(
                    OptionCode::IfDescription,
                    b"datagrams an SMT endpoint sent and received, with IP and UDP headers made \
                      from its addresses",
                ),
            ],
            block_len2: 0,
            if_tsresol: 9,
            if_tsoffset: 0,
        };
        out.write_all(&shb.to_vec().map_err(gen_error)?)?;
        out.write_all(&idb.to_vec().map_err(gen_error)?)?;
        out.flush()?;
        Ok(Self {
            out,
            clock,
            frame: Vec::with_capacity(1 << 16),
            written: 0,
            first: None,
            last: 0,
        })
    }

    fn packet(&mut self, nanos: u64, b: &Batch, datagram: &[u8]) -> io::Result<()> {
        self.frame.clear();
        ip_frame(&mut self.frame, b, datagram)?;
        let len = self.frame.len() as u32;
        let mut epb = EnhancedPacketBlock {
            block_type: 0,
            block_len1: 0,
            if_id: 0,
            ts_high: (nanos >> 32) as u32,
            ts_low: nanos as u32,
            caplen: len,
            origlen: len,
            data: &self.frame,
            options: vec![],
            block_len2: 0,
        };
        self.out.write_all(&epb.to_vec().map_err(gen_error)?)?;
        self.written += 1;
        self.first.get_or_insert(nanos);
        self.last = nanos;
        Ok(())
    }
}

impl<W: Write + Send + 'static> Sink for PcapNg<W> {
    type Item = Batch;

    fn write(&mut self, b: Batch) -> io::Result<()> {
        let nanos = self.clock.unix_nanos(b.at);
        for datagram in b.bytes.chunks(b.segment.max(1)) {
            self.packet(nanos, &b, datagram)?;
        }
        Ok(())
    }

    fn finish(&mut self, dropped: u64) -> io::Result<()> {
        let end = self.last;
        let start = self.first.unwrap_or(end);
        let stamp = |n: u64| [(n >> 32) as u32, n as u32];
        let pair = |n: u64| {
            let [hi, lo] = stamp(n);
            [hi.to_le_bytes(), lo.to_le_bytes()].concat()
        };
        let mut isb = InterfaceStatisticsBlock {
            block_type: 0,
            block_len1: 0,
            if_id: 0,
            ts_high: stamp(end)[0],
            ts_low: stamp(end)[1],
            options: vec![
                option(
                    OptionCode::Comment,
                    b"isb_ifdrop: datagrams the endpoint sent or received that the capture \
                      dropped (its writer fell behind)",
                ),
                option(OptionCode::IsbStartTime, &pair(start)),
                option(OptionCode::IsbEndTime, &pair(end)),
                option(
                    OptionCode::IsbIfRecv,
                    &(self.written + dropped).to_le_bytes(),
                ),
                option(OptionCode::IsbIfDrop, &dropped.to_le_bytes()),
            ],
            block_len2: 0,
        };
        self.out.write_all(&isb.to_vec().map_err(gen_error)?)?;
        self.out.flush()
    }
}

fn option(code: OptionCode, value: &[u8]) -> PcapNGOption<'static> {
    PcapNGOption {
        code,
        len: value.len() as u16,
        value: Cow::Owned(value.to_vec()),
    }
}

fn gen_error(e: impl std::fmt::Debug) -> io::Error {
    io::Error::other(format!("pcapng block: {e:?}"))
}

/// The datagram with the IP (and UDP) header it had on the wire.
fn ip_frame(out: &mut Vec<u8>, b: &Batch, datagram: &[u8]) -> io::Result<()> {
    let (src, dst) = wire_addresses(b.src, b.dst);
    let builder = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => PacketBuilder::ipv4(s.octets(), d.octets(), 64),
        (s, d) => PacketBuilder::ipv6(v6(s).octets(), v6(d).octets(), 64),
    };
    let written = match b.framing {
        Framing::Udp => builder
            .udp(src.port(), dst.port())
            .write(out, datagram)
            .map_err(|e| e.to_string()),
        Framing::Ip(protocol) => builder
            .write(out, IpNumber(protocol), datagram)
            .map_err(|e| e.to_string()),
    };
    written.map_err(io::Error::other)
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The addresses a datagram had on the wire, from the socket's view: an
/// IPv4 peer of a dual-stack socket (`::ffff:a.b.c.d`) spoke IPv4, and a
/// socket bound to the unspecified address answered a loopback peer from
/// loopback. (Otherwise the local address of a socket bound to the
/// unspecified address is not known per datagram: it stays unspecified.)
fn wire_addresses(src: SocketAddr, dst: SocketAddr) -> (SocketAddr, SocketAddr) {
    let (src, dst) = (unmapped(src), unmapped(dst));
    let (src_ip, dst_ip) = match (src.ip(), dst.ip()) {
        (s, d) if s.is_unspecified() => (stand_in(s, d), d),
        (s, d) if d.is_unspecified() => (s, stand_in(d, s)),
        other => other,
    };
    (
        SocketAddr::new(src_ip, src.port()),
        SocketAddr::new(dst_ip, dst.port()),
    )
}

/// What an unspecified local address was towards `peer`.
fn stand_in(unspecified: IpAddr, peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(p) if p.is_loopback() => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(p) if p.is_loopback() => Ipv6Addr::LOCALHOST.into(),
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) if unspecified.is_ipv4() => Ipv6Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => unspecified,
    }
}

fn unmapped(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_addresses_undo_mapping_and_stand_in_for_a_wildcard_bind() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let cases = [
            ("10.0.0.1:1", "10.0.0.2:2", "10.0.0.1:1", "10.0.0.2:2"),
            ("[::ffff:10.0.0.1]:1", "[::]:2", "10.0.0.1:1", "0.0.0.0:2"),
            (
                "0.0.0.0:7878",
                "127.0.0.1:5",
                "127.0.0.1:7878",
                "127.0.0.1:5",
            ),
            ("[::1]:5", "[::]:7878", "[::1]:5", "[::1]:7878"),
            (
                "[::]:7878",
                "[2001:db8::1]:5",
                "[::]:7878",
                "[2001:db8::1]:5",
            ),
        ];
        for (src, dst, want_src, want_dst) in cases {
            assert_eq!(
                wire_addresses(a(src), a(dst)),
                (a(want_src), a(want_dst)),
                "{src} > {dst}"
            );
        }
    }
}
