//! From a captured frame to the SMT bytes it carries: the link layer
//! (Ethernet with VLANs, Linux cooked v1 and v2, BSD loopback, raw IP),
//! IPv4 or IPv6, then UDP or SMT's own IP protocol. Headers are taken
//! apart by `etherparse`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use etherparse::{IpNumber, NetSlice, SlicedPacket, TransportSlice};
use pcap_parser::Linktype;

/// How the SMT bytes travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Inside a UDP datagram; addresses carry the UDP ports.
    Udp,
    /// Directly in an IP packet with SMT's protocol number; addresses carry
    /// the SMT header's ports.
    RawIp,
}

/// An IP payload that may be SMT.
#[derive(Clone, Debug)]
pub struct Datagram<'a> {
    /// The sender's IP address.
    pub src: IpAddr,
    /// The receiver's IP address.
    pub dst: IpAddr,
    /// UDP ports (None for raw IP, whose ports are in the SMT header).
    pub ports: Option<(u16, u16)>,
    /// How the SMT bytes were carried (UDP or raw IP).
    pub transport: Transport,
    /// The SMT bytes: the IP payload, or the UDP payload.
    pub payload: &'a [u8],
}

impl Datagram<'_> {
    /// The sender as SMT names it: address and (UDP or SMT) port.
    pub fn from(&self) -> SocketAddr {
        SocketAddr::new(self.src, self.port(0))
    }

    /// The receiver.
    pub fn to(&self) -> SocketAddr {
        SocketAddr::new(self.dst, self.port(2))
    }

    fn port(&self, at: usize) -> u16 {
        match (self.ports, self.payload.get(at..at + 2)) {
            (Some((s, d)), _) => [s, d][at / 2],
            (None, Some(p)) => u16::from_be_bytes([p[0], p[1]]),
            (None, None) => 0,
        }
    }
}

/// Why a frame carries no SMT datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// A link type this tool does not read (the number, as in pcap).
    LinkType(i32),
    /// Not IPv4 or IPv6 (ARP, another ethertype...).
    NotIp,
    /// IP, but neither UDP nor the SMT protocol number.
    OtherProtocol(u8),
    /// An IP fragment: SMT sizes its datagrams to avoid fragmentation, and
    /// this tool does not reassemble fragments.
    Fragment,
    /// The headers are cut short or inconsistent.
    Malformed(String),
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LinkType(t) => write!(f, "link type {t} is not supported"),
            Self::NotIp => f.write_str("not an IP packet"),
            Self::OtherProtocol(p) => write!(f, "IP protocol {p}"),
            Self::Fragment => f.write_str("an IP fragment (not reassembled)"),
            Self::Malformed(why) => write!(f, "malformed headers: {why}"),
        }
    }
}

/// The SMT datagram in `data`, a frame of link type `linktype`. `protocol`
/// is SMT's IP protocol number (253 by default).
pub fn decode(linktype: Linktype, data: &[u8], protocol: u8) -> Result<Datagram<'_>, Skip> {
    let sliced = match linktype {
        Linktype::ETHERNET => SlicedPacket::from_ethernet(data),
        Linktype::LINUX_SLL => SlicedPacket::from_linux_sll(data),
        // Loopback: a 4-byte family in the capturing host's byte order.
        Linktype::NULL | Linktype::LOOP => SlicedPacket::from_ip(data.get(4..).unwrap_or(&[])),
        Linktype::RAW | Linktype::IPV4 | Linktype::IPV6 => SlicedPacket::from_ip(data),
        // Linux cooked v2: 20-byte header, protocol type first.
        Linktype::LINUX_SLL2 => match data.get(..2) {
            Some([0x08, 0x00]) | Some([0x86, 0xdd]) => {
                SlicedPacket::from_ip(&data[20.min(data.len())..])
            }
            Some(_) => return Err(Skip::NotIp),
            None => return Err(Skip::Malformed("Linux cooked header cut short".into())),
        },
        other => return Err(Skip::LinkType(other.0)),
    };
    let sliced = sliced.map_err(|e| Skip::Malformed(e.to_string()))?;
    let net = sliced.net.as_ref().ok_or(Skip::NotIp)?;
    let (src, dst) = match net {
        NetSlice::Ipv4(ip) => (
            IpAddr::V4(ip.header().source_addr()),
            IpAddr::V4(ip.header().destination_addr()),
        ),
        NetSlice::Ipv6(ip) => (
            IpAddr::V6(ip.header().source_addr()),
            IpAddr::V6(ip.header().destination_addr()),
        ),
        NetSlice::Arp(_) => return Err(Skip::NotIp),
    };
    let payload = net.ip_payload_ref().ok_or(Skip::NotIp)?;
    if payload.fragmented {
        return Err(Skip::Fragment);
    }
    if let Some(TransportSlice::Udp(udp)) = &sliced.transport {
        return Ok(Datagram {
            src,
            dst,
            ports: Some((udp.source_port(), udp.destination_port())),
            transport: Transport::Udp,
            payload: udp.payload(),
        });
    }
    if payload.ip_number == IpNumber(protocol) {
        return Ok(Datagram {
            src,
            dst,
            ports: None,
            transport: Transport::RawIp,
            payload: payload.payload,
        });
    }
    Err(Skip::OtherProtocol(payload.ip_number.0))
}

#[cfg(test)]
mod tests {
    use etherparse::{PacketBuilder, SingleVlanHeader, VlanId};

    use super::*;

    const SMT: &[u8] = b"an SMT datagram";

    fn ipv4_udp() -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(40000, 7878)
            .write(&mut out, SMT)
            .unwrap();
        out
    }

    fn check(linktype: Linktype, frame: &[u8]) {
        let d = decode(linktype, frame, 253).unwrap();
        assert_eq!(d.from().to_string(), "10.0.0.1:40000");
        assert_eq!(d.to().to_string(), "10.0.0.2:7878");
        assert_eq!(d.payload, SMT);
        assert_eq!(d.transport, Transport::Udp);
    }

    #[test]
    fn reads_every_supported_link_type() {
        let ip = ipv4_udp();
        check(Linktype::RAW, &ip);
        check(Linktype::IPV4, &ip);
        // BSD loopback: the family in the capturing host's byte order.
        for family in [[2, 0, 0, 0], [0, 0, 0, 2]] {
            check(Linktype::NULL, &[&family[..], &ip].concat());
        }
        // Linux cooked v2: protocol type, reserved, ifindex, ARPHRD, type, addr len, addr.
        let sll2 = [
            &[0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6][..],
            &[0; 8],
            &ip,
        ]
        .concat();
        check(Linktype::LINUX_SLL2, &sll2);
        let mut vlan = Vec::new();
        PacketBuilder::ethernet2([2; 6], [4; 6])
            .vlan(etherparse::VlanHeader::Single(SingleVlanHeader {
                vlan_id: VlanId::try_new(7).unwrap(),
                ..Default::default()
            }))
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(40000, 7878)
            .write(&mut vlan, SMT)
            .unwrap();
        check(Linktype::ETHERNET, &vlan);
    }

    #[test]
    fn raw_ip_takes_its_ports_from_the_smt_header() {
        let mut out = Vec::new();
        let smt = [0x1b, 0x5a, 0x1e, 0xc6, 0, 0];
        PacketBuilder::ipv6([1; 16], [2; 16], 64)
            .write(&mut out, IpNumber(253), &smt)
            .unwrap();
        let d = decode(Linktype::RAW, &out, 253).unwrap();
        assert_eq!(d.transport, Transport::RawIp);
        assert_eq!((d.from().port(), d.to().port()), (7002, 7878));
        assert_eq!(
            decode(Linktype::RAW, &out, 254).unwrap_err(),
            Skip::OtherProtocol(253)
        );
    }

    #[test]
    fn what_is_not_smt_says_why() {
        assert_eq!(
            decode(Linktype(147), &[1, 2, 3], 253).unwrap_err(),
            Skip::LinkType(147)
        );
        assert!(matches!(
            decode(Linktype::RAW, &[0x45, 0], 253),
            Err(Skip::Malformed(_))
        ));
        assert!(matches!(
            decode(Linktype::NULL, &[2, 0], 253),
            Err(Skip::Malformed(_))
        ));
        assert_eq!(
            decode(Linktype::LINUX_SLL2, &[0x08, 0x06, 0], 253).unwrap_err(),
            Skip::NotIp
        );
    }
}
