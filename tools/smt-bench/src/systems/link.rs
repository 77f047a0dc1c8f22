//! The link's own MTU, for the `-link` systems: every system in this
//! tool talks over loopback, where the kernel's TCP (and so every TLS
//! system) moves data in segments of the loopback MTU (65 536 on Linux),
//! while SMT's and quinn's defaults assume a 1500-byte Ethernet link. The
//! `-link` systems give SMT and quinn the same ceiling TCP has, so no
//! system in a comparison has a bigger MTU than its peers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

use smt::{EndpointConfig, Mode};

/// The address every system in this tool binds (any port): its peer is
/// on the same loopback interface.
pub const LOOPBACK: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));

/// The largest IP packet without jumbograms: an interface MTU above it
/// (`lo` has 65 536) still carries no larger datagram.
pub const MAX_IP_PACKET: usize = 65_535;

/// The MTU used when the loopback interface's cannot be read (not
/// Linux): the Ethernet default every system has anyway, so a `-link`
/// system then measures the same as its 1500-byte twin, never more.
const FALLBACK_MTU: usize = 1500;

/// The MTU of the route to `peer`: the loopback interface's (capped at
/// the largest IP packet) for a loopback peer. The bench binds only
/// loopback addresses, so any other peer gets the 1500-byte default.
pub fn route_mtu(peer: SocketAddr) -> usize {
    if !peer.ip().is_loopback() {
        return FALLBACK_MTU;
    }
    EndpointConfig::loopback_mtu().unwrap_or(FALLBACK_MTU)
}

/// The largest UDP payload one IP packet of `mtu` carries to `ip`: what
/// quinn calls its MTU (`initial_mtu`, `max_udp_payload_size`), and what
/// SMT derives from `EndpointConfig::mtu` in UDP mode.
pub fn udp_payload(mtu: usize, ip: IpAddr) -> usize {
    let mtu = mtu.min(MAX_IP_PACKET);
    EndpointConfig::datagram_size_for(mtu, SocketAddr::new(ip, 0), Mode::Udp)
}

/// One line for the run's notes: the MTU and UDP payload `system` used.
pub fn note(system: &str, peer: SocketAddr) -> String {
    let mtu = route_mtu(peer);
    let payload = udp_payload(mtu, peer.ip());
    let mut line = format!("{system}: link MTU {mtu} B (UDP payload {payload} B per datagram)");
    if system.starts_with("smt") {
        let window = EndpointConfig::default()
            .protocol()
            .grant_window_for(payload);
        line.push_str(&format!(", grant window {window} B"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_udp_payload_is_the_mtu_less_the_headers_within_one_ip_packet() {
        let v4: IpAddr = "127.0.0.1".parse().expect("literal");
        let v6: IpAddr = "::1".parse().expect("literal");
        assert_eq!(udp_payload(1500, v4), 1472);
        assert_eq!(udp_payload(1500, v6), 1452);
        assert_eq!(
            udp_payload(65_536, v4),
            65_507,
            "lo's MTU is one more than a packet"
        );
        assert_eq!(udp_payload(65_536, v6), 65_487);
    }

    #[test]
    fn a_peer_off_loopback_gets_the_ethernet_default() {
        let far: SocketAddr = "192.0.2.1:9".parse().expect("literal");
        assert_eq!(route_mtu(far), FALLBACK_MTU);
        let lo: SocketAddr = "127.0.0.1:9".parse().expect("literal");
        assert!((FALLBACK_MTU..=MAX_IP_PACKET).contains(&route_mtu(lo)));
    }
}
