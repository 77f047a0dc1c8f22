//! Raw IPv4 packets for spoofing: a UDP datagram from a made-up source, and
//! a forged ICMP destination-unreachable that quotes a datagram the server
//! never sent (RFC 792; Linux matches the quoted UDP header to a socket and,
//! with `IP_RECVERR`, queues the error on that socket's error queue).

use std::net::{Ipv4Addr, SocketAddrV4};

/// ICMP type 3: destination unreachable.
const DEST_UNREACHABLE: u8 = 3;
/// Code 1: host unreachable (a router's answer).
pub const HOST_UNREACHABLE: u8 = 1;
/// Code 3: port unreachable (the host's own answer).
pub const PORT_UNREACHABLE: u8 = 3;
const PROTO_ICMP: u8 = 1;
const PROTO_UDP: u8 = 17;

/// An IPv4 header (checksum and identification left 0, for the kernel to
/// fill in as `raw(7)` does with `IP_HDRINCL`) and a UDP header without a
/// checksum (0 is allowed over IPv4) in front of `payload`.
pub fn ip_udp(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let mut p = ipv4_header(*src.ip(), *dst.ip(), PROTO_UDP, 8 + payload.len());
    p.extend_from_slice(&udp_header(src, dst, payload.len()));
    p.extend_from_slice(payload);
    p
}

/// ICMP destination unreachable (`code`) from `reporter` to `server`,
/// about a datagram `server` sent to `to` whose payload started with
/// `quoted` (a router quotes the IP header and at least 8 bytes after it;
/// Linux up to 576 bytes in all).
pub fn unreachable(
    reporter: Ipv4Addr,
    server: SocketAddrV4,
    to: SocketAddrV4,
    code: u8,
    quoted: &[u8],
) -> Vec<u8> {
    let mut inner = ipv4_header(*server.ip(), *to.ip(), PROTO_UDP, 8 + quoted.len());
    // A real quoted header carries the sender's checksum; nothing checks it.
    let sum = checksum(&inner);
    inner[10..12].copy_from_slice(&sum.to_be_bytes());
    inner.extend_from_slice(&udp_header(server, to, quoted.len()));
    inner.extend_from_slice(quoted);
    let mut icmp = vec![DEST_UNREACHABLE, code, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&inner);
    let sum = checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut p = ipv4_header(reporter, *server.ip(), PROTO_ICMP, icmp.len());
    p.extend_from_slice(&icmp);
    p
}

fn ipv4_header(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, payload_len: usize) -> Vec<u8> {
    let total = u16::try_from(20 + payload_len).unwrap_or(u16::MAX);
    let mut p = Vec::with_capacity(usize::from(total));
    p.extend_from_slice(&[0x45, 0]);
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, protocol, 0, 0]); // id, DF, TTL 64, checksum
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p
}

fn udp_header(src: SocketAddrV4, dst: SocketAddrV4, payload_len: usize) -> [u8; 8] {
    let len = u16::try_from(8 + payload_len)
        .unwrap_or(u16::MAX)
        .to_be_bytes();
    let (s, d) = (src.port().to_be_bytes(), dst.port().to_be_bytes());
    [s[0], s[1], d[0], d[1], len[0], len[1], 0, 0]
}

/// The Internet checksum (RFC 1071): the one's complement of the one's
/// complement sum of 16-bit words.
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 § 3's example: the words 0001 f203 f4f5 f6f7 sum to ddf2
    /// (with the carries folded in); the checksum is its complement.
    #[test]
    fn the_checksum_matches_rfc_1071s_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&data), !0xddf2);
        // A packet with its checksum in place sums to zero.
        let mut with = data.to_vec();
        with.extend_from_slice(&checksum(&data).to_be_bytes());
        assert_eq!(checksum(&with), 0);
    }

    #[test]
    fn an_unreachable_quotes_the_servers_datagram() {
        let server = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 7000);
        let to = SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 4000);
        let p = unreachable(*to.ip(), server, to, PORT_UNREACHABLE, &[9; 40]);
        assert_eq!(p.len(), 20 + 8 + 20 + 8 + 40);
        assert_eq!(&p[12..16], &[10, 1, 2, 3], "from the unreachable host");
        assert_eq!(&p[16..20], &[192, 0, 2, 1], "to the server");
        assert_eq!((p[20], p[21]), (3, 3), "destination unreachable, port");
        assert_eq!(checksum(&p[20..]), 0, "the ICMP checksum holds");
        let quoted = &p[28..];
        assert_eq!(&quoted[12..16], &[192, 0, 2, 1], "the quoted source");
        assert_eq!(&quoted[20..22], &7000u16.to_be_bytes(), "its port");
        assert_eq!(&quoted[22..24], &4000u16.to_be_bytes());
    }
}
