//! Endpoint configuration: the socket, the protocol core, the driver.

pub use smt_proto::Config as ProtocolConfig;
pub use smt_udp::{Mode, SocketConfig, DEFAULT_IP_PROTOCOL};

/// Everything [`crate::Endpoint::bind`] needs.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Link MTU. When set, `protocol.max_datagram_size` is derived from it
    /// for the bound address family and mode (IPv4/IPv6 header, UDP header
    /// or none); `None` keeps `protocol.max_datagram_size` as given.
    pub mtu: Option<usize>,
    /// Socket mode (UDP or raw IP), buffer sizes, offloads.
    pub socket: SocketConfig,
    /// The protocol core's limits and timers.
    pub protocol: ProtocolConfig,
    /// Spin on the socket instead of sleeping between packets: lowest
    /// latency, one core fully busy.
    pub busy_poll: bool,
    /// TLS offload to a NIC, with `smt-offload`'s engine model (worker
    /// threads) standing in for it: records leave with plaintext bodies
    /// for the NIC to seal, and arrive through its receive contexts
    /// (`docs/offload.md`). Nothing changes on the wire. `None` (the
    /// default): records are sealed and opened in software.
    pub offload: Option<crate::offload::OffloadConfig>,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            mtu: Some(1500),
            socket: SocketConfig::default(),
            protocol: ProtocolConfig::default(),
            busy_poll: false,
            offload: None,
        }
    }
}

impl EndpointConfig {
    /// The largest SMT packet that fits `mtu` for this address and mode.
    pub fn datagram_size_for(mtu: usize, addr: std::net::SocketAddr, mode: Mode) -> usize {
        let ip = if addr.is_ipv4() { 20 } else { 40 };
        let udp = if matches!(mode, Mode::Udp) { 8 } else { 0 };
        mtu.saturating_sub(ip + udp)
    }
}
