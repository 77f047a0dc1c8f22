//! Endpoint configuration: the socket, the protocol core, the driver.

pub use smt_proto::Config as ProtocolConfig;
pub use smt_udp::{Mode, SocketConfig, DEFAULT_IP_PROTOCOL};

/// Everything [`crate::Endpoint::bind`] needs.
#[derive(Clone, Debug, Default)]
pub struct EndpointConfig {
    /// Socket mode (UDP or raw IP), buffer sizes, offloads.
    pub socket: SocketConfig,
    /// The protocol core's limits and timers.
    pub protocol: ProtocolConfig,
    /// Spin on the socket instead of sleeping between packets: lowest
    /// latency, one core fully busy.
    pub busy_poll: bool,
}
