//! Endpoint configuration: the socket, the protocol core, the driver.

use std::time::Duration;

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
    /// How long a call may take, from the moment it is made until its
    /// response is complete, unless its [`CallOptions`] say otherwise.
    /// Past it the call fails with [`crate::Error::Timeout`] and the RPC
    /// is aborted at both ends. `None` (the default): no deadline; a call
    /// still fails if the peer goes silent (`protocol.abort_ticks`), but
    /// waits as long as the server keeps saying it is working on it.
    pub call_timeout: Option<Duration>,
    /// Calls outstanding at once, at most (waiting for a response or for a
    /// handshake). Beyond it, [`crate::Endpoint::call`] blocks and
    /// [`crate::Endpoint::call_async`] waits until one of them ends, and
    /// [`crate::LocalEndpoint::call`] fails with
    /// [`crate::Error::TooManyCalls`] (its owner must poll to let calls
    /// end). So is the state held for calls. At least 1.
    ///
    /// Requests waiting for the application are bounded by
    /// `protocol.max_pending_requests`: beyond it, complete requests are
    /// refused unexecuted and their clients hear OVERLOADED.
    pub max_outstanding_calls: usize,
    /// TLS offload to a NIC, with `smt-offload`'s engine model (worker
    /// threads) standing in for it: records leave with plaintext bodies
    /// for the NIC to seal, and arrive through its receive contexts
    /// (`docs/offload.md`). Nothing changes on the wire. `None` (the
    /// default): records are sealed and opened in software.
    pub offload: Option<crate::offload::OffloadConfig>,
}

/// Default [`EndpointConfig::max_outstanding_calls`]: far above what one
/// peer's server admits at once (`max_incoming_per_peer`, 1024), so it
/// only stops a runaway caller.
pub const DEFAULT_MAX_OUTSTANDING_CALLS: usize = 16_384;

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            mtu: Some(1500),
            socket: SocketConfig::default(),
            protocol: ProtocolConfig::default(),
            busy_poll: false,
            call_timeout: None,
            max_outstanding_calls: DEFAULT_MAX_OUTSTANDING_CALLS,
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

/// Settings of one call, for [`crate::Endpoint::call_with`],
/// [`crate::Endpoint::call_async_with`] and
/// [`crate::LocalEndpoint::call_with`]. The default follows the
/// endpoint's configuration; a `Duration` converts into options with that
/// timeout:
///
/// ```no_run
/// # fn f(ep: &smt::Endpoint, peer: std::net::SocketAddr) -> Result<(), smt::Error> {
/// use std::time::Duration;
/// let reply = ep.call_with(peer, b"ping", Duration::from_millis(250))?;
/// let reply = ep.call_with(peer, b"slow job", smt::CallOptions::new().no_timeout())?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallOptions {
    timeout: Deadline,
}

/// Which deadline a call has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Deadline {
    /// [`EndpointConfig::call_timeout`].
    #[default]
    EndpointDefault,
    None,
    After(Duration),
}

impl CallOptions {
    /// The endpoint's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fails the call with [`crate::Error::Timeout`] if its response is
    /// not complete `timeout` after the call was made (handshake
    /// included), and aborts the RPC at both ends.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Deadline::After(timeout);
        self
    }

    /// No deadline for this call, whatever the endpoint's default.
    pub fn no_timeout(mut self) -> Self {
        self.timeout = Deadline::None;
        self
    }

    /// The call's timeout, given the endpoint's default.
    pub(crate) fn timeout_or(self, default: Option<Duration>) -> Option<Duration> {
        match self.timeout {
            Deadline::EndpointDefault => default,
            Deadline::None => None,
            Deadline::After(t) => Some(t),
        }
    }
}

impl From<Duration> for CallOptions {
    /// Options with this timeout.
    fn from(timeout: Duration) -> Self {
        Self::new().timeout(timeout)
    }
}
