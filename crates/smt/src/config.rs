//! Endpoint configuration: the socket, the protocol core, the driver.
//!
//! Every configuration type starts from `Default` (the values documented
//! on each getter) and is changed with chained `set_*` setters, as
//! `std`'s sockets are; fields are private and the types
//! `#[non_exhaustive]`, so settings can be added without breaking
//! anyone. Nothing is checked when a setter runs: [`crate::Endpoint::bind`]
//! (and [`EndpointConfig::validate`], to check early) refuses a
//! configuration that cannot work with [`crate::Error::Config`], naming
//! the setting and what to do.
//!
//! ```
//! use std::time::Duration;
//! use smt::EndpointConfig;
//! let mut config = EndpointConfig::default();
//! config
//!     .set_mtu(Some(9000))
//!     .set_call_timeout(Some(Duration::from_secs(2)));
//! config
//!     .protocol_mut()
//!     .set_max_message_len(1 << 20)
//!     .set_rpc_idle_timeout(Duration::from_secs(10));
//! config.validate("127.0.0.1:0".parse().unwrap())?;
//! # Ok::<(), smt::Error>(())
//! ```

use std::net::SocketAddr;
use std::time::Duration;

pub use smt_proto::record::SeqLayout;
pub use smt_udp::{Mode, SocketConfig, DEFAULT_IP_PROTOCOL};

use crate::error::ConfigError;
use crate::observe::Observe;
use crate::offload::OffloadConfig;
use crate::{Error, Padding};

/// Everything [`crate::Endpoint::bind`] and [`crate::LocalEndpoint::bind`]
/// need. See the module docs for how it is built and checked.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EndpointConfig {
    mtu: Option<usize>,
    socket: SocketConfig,
    protocol: ProtocolConfig,
    busy_poll: bool,
    call_timeout: Option<Duration>,
    max_outstanding_calls: usize,
    offload: Option<OffloadConfig>,
    observe: Observe,
    return_memory: bool,
}

/// The largest IP packet length field: an IPv4 packet's total length
/// (header included), an IPv6 packet's payload length (its 40-byte header
/// not included). Bounds the SMT packet a datagram can carry.
const MAX_IP_LENGTH: usize = 65_535;

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
            observe: Observe::default(),
            return_memory: true,
        }
    }
}

impl EndpointConfig {
    /// Link MTU (default 1500). When set, the protocol's
    /// [`ProtocolConfig::max_datagram_size`] is derived from it for the
    /// bound address family and mode (IPv4/IPv6 header, UDP header or
    /// none); `None` keeps `max_datagram_size` as set.
    pub fn mtu(&self) -> Option<usize> {
        self.mtu
    }

    /// Sets [`EndpointConfig::mtu`].
    pub fn set_mtu(&mut self, mtu: Option<usize>) -> &mut Self {
        self.mtu = mtu;
        self
    }

    /// Socket mode (UDP or raw IP), buffer sizes, offloads.
    pub fn socket(&self) -> &SocketConfig {
        &self.socket
    }

    /// [`EndpointConfig::socket`], to change in place.
    pub fn socket_mut(&mut self) -> &mut SocketConfig {
        &mut self.socket
    }

    /// Sets [`EndpointConfig::socket`].
    pub fn set_socket(&mut self, socket: SocketConfig) -> &mut Self {
        self.socket = socket;
        self
    }

    /// The protocol's limits and timeouts.
    pub fn protocol(&self) -> &ProtocolConfig {
        &self.protocol
    }

    /// [`EndpointConfig::protocol`], to change in place.
    pub fn protocol_mut(&mut self) -> &mut ProtocolConfig {
        &mut self.protocol
    }

    /// Sets [`EndpointConfig::protocol`].
    pub fn set_protocol(&mut self, protocol: ProtocolConfig) -> &mut Self {
        self.protocol = protocol;
        self
    }

    /// Spin on the socket instead of sleeping between packets: lowest
    /// latency, one core fully busy. Default: off.
    pub fn busy_poll(&self) -> bool {
        self.busy_poll
    }

    /// Sets [`EndpointConfig::busy_poll`].
    pub fn set_busy_poll(&mut self, on: bool) -> &mut Self {
        self.busy_poll = on;
        self
    }

    /// Give memory the endpoint freed back to the system (default on):
    /// once a second at most, after the endpoint has done something, if
    /// glibc's allocator holds more than 16 MiB free, `malloc_trim`
    /// returns it. A server that held hundreds of megabytes during a flood
    /// or a burst of large messages shrinks again afterwards. Does nothing
    /// on other platforms or allocators; turn it off if the process tunes
    /// its allocator itself.
    pub fn return_memory(&self) -> bool {
        self.return_memory
    }

    /// Sets [`EndpointConfig::return_memory`].
    pub fn set_return_memory(&mut self, on: bool) -> &mut Self {
        self.return_memory = on;
        self
    }

    /// How long a call may take, from the moment it is made until its
    /// response is complete, unless its [`CallOptions`] say otherwise.
    /// Past it the call fails with [`crate::Error::Timeout`] and the RPC
    /// is aborted at both ends. `None` (the default): no deadline; a call
    /// still fails if the peer goes silent
    /// ([`ProtocolConfig::rpc_idle_timeout`]), but waits as long as the
    /// server keeps saying it is working on it.
    pub fn call_timeout(&self) -> Option<Duration> {
        self.call_timeout
    }

    /// Sets [`EndpointConfig::call_timeout`].
    pub fn set_call_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.call_timeout = timeout;
        self
    }

    /// Calls outstanding at once, at most (waiting for a response or for a
    /// handshake); default [`DEFAULT_MAX_OUTSTANDING_CALLS`]. Beyond it,
    /// [`crate::Endpoint::call`] blocks and [`crate::Endpoint::call_async`]
    /// waits until one of them ends, and [`crate::LocalEndpoint::call`]
    /// fails with [`crate::Error::TooManyCalls`] (its owner must poll to
    /// let calls end). So is the state held for calls. At least 1.
    ///
    /// Requests waiting for the application are bounded by
    /// [`ProtocolConfig::max_pending_requests`]: beyond it, complete
    /// requests are refused unexecuted and their clients hear OVERLOADED.
    pub fn max_outstanding_calls(&self) -> usize {
        self.max_outstanding_calls
    }

    /// Sets [`EndpointConfig::max_outstanding_calls`].
    pub fn set_max_outstanding_calls(&mut self, max: usize) -> &mut Self {
        self.max_outstanding_calls = max;
        self
    }

    /// TLS offload to a NIC, with `smt-offload`'s engine model (worker
    /// threads) standing in for it: records leave with plaintext bodies
    /// for the NIC to seal, and arrive through its receive contexts
    /// (`docs/offload.md`). Nothing changes on the wire. `None` (the
    /// default): records are sealed and opened in software.
    ///
    /// Only with the `offload` feature (on by default).
    #[cfg(feature = "offload")]
    pub fn offload(&self) -> Option<&OffloadConfig> {
        self.offload.as_ref()
    }

    /// Without the `offload` feature: always `None`.
    #[cfg(not(feature = "offload"))]
    pub(crate) fn offload(&self) -> Option<&OffloadConfig> {
        self.offload.as_ref()
    }

    /// Sets [`EndpointConfig::offload`].
    ///
    /// Only with the `offload` feature (on by default).
    #[cfg(feature = "offload")]
    pub fn set_offload(&mut self, offload: Option<OffloadConfig>) -> &mut Self {
        self.offload = offload;
        self
    }

    /// What the endpoint records for debugging: a pcapng capture of
    /// every datagram it sends and receives, and a JSON-lines trace of the
    /// protocol core's events (`docs/observability.md`). Nothing by
    /// default.
    ///
    /// Only with the `observe` feature (on by default).
    #[cfg(feature = "observe")]
    pub fn observe(&self) -> &Observe {
        &self.observe
    }

    /// Without the `observe` feature: always empty.
    #[cfg(not(feature = "observe"))]
    pub(crate) fn observe(&self) -> &Observe {
        &self.observe
    }

    /// Sets [`EndpointConfig::observe`].
    ///
    /// Only with the `observe` feature (on by default).
    #[cfg(feature = "observe")]
    pub fn set_observe(&mut self, observe: Observe) -> &mut Self {
        self.observe = observe;
        self
    }

    /// The loopback interface's MTU (Linux's `/sys/class/net/lo/mtu`),
    /// capped at the largest IP packet (65,535; `lo` has 65,536), or
    /// `None` where it cannot be read. Over loopback the kernel's TCP
    /// moves data in segments of this MTU; an endpoint talking to a peer
    /// on the same machine can use it too ([`EndpointConfig::set_mtu`]).
    pub fn loopback_mtu() -> Option<usize> {
        let text = std::fs::read_to_string("/sys/class/net/lo/mtu").ok()?;
        let mtu: usize = text.trim().parse().ok()?;
        Some(mtu.min(MAX_IP_LENGTH))
    }

    /// The largest SMT packet that fits `mtu` for this address and mode.
    pub fn datagram_size_for(mtu: usize, addr: SocketAddr, mode: Mode) -> usize {
        mtu.saturating_sub(header_len(addr, mode))
    }

    /// Checks everything [`crate::Endpoint::bind`] would check on `addr`
    /// before opening a socket: [`Error::Config`] names the setting at
    /// fault and what to do.
    pub fn validate(&self, addr: SocketAddr) -> Result<(), Error> {
        self.core_config(addr).map(drop).map_err(Error::Config)
    }

    /// The protocol core's configuration for a socket bound to `addr`:
    /// the datagram size from the MTU, timeouts in ticks, the port in the
    /// header, ports checked in raw-IP mode, framing for a NIC with
    /// offload. Errors if anything cannot work.
    pub(crate) fn core_config(&self, addr: SocketAddr) -> Result<smt_proto::Config, ConfigError> {
        if self.max_outstanding_calls == 0 {
            return Err(ConfigError::new(
                "EndpointConfig::max_outstanding_calls",
                "is 0: no call could ever start; use at least 1",
            ));
        }
        if let Some(offload) = &self.offload {
            offload.validate()?;
        }
        let mut core = self.protocol.to_core()?;
        if let Some(mtu) = self.mtu {
            core.max_datagram_size = Self::datagram_size_for(mtu, addr, self.socket.mode());
            core.grant_window = self.protocol.grant_window_for(core.max_datagram_size);
            let headers = header_len(addr, self.socket.mode());
            let (least, most) = (
                smt_proto::MIN_DATAGRAM_SIZE,
                max_datagram_size(addr, self.socket.mode()),
            );
            if !(least..=most).contains(&core.max_datagram_size) {
                return Err(ConfigError::new(
                    "EndpointConfig::mtu",
                    format!(
                        "of {mtu} leaves {} bytes per SMT packet on {addr} ({}); the protocol \
                         needs {least} to {most}: use an MTU from {} to {}",
                        core.max_datagram_size,
                        self.socket.mode(),
                        least + headers,
                        most + headers
                    ),
                ));
            }
        }
        core.local_port = addr.port();
        core.verify_ports = matches!(self.socket.mode(), Mode::RawIp { .. });
        core.tx_offload = self.offload.is_some();
        core.validate().map_err(|e| {
            ConfigError::new(
                "ProtocolConfig",
                format!("settings do not work together: {}", e.0),
            )
        })?;
        Ok(core)
    }
}

/// The protocol's limits and timeouts (`smt-proto`'s configuration, with
/// timeouts as durations). Defaults follow Homa's where Homa has one:
/// a 1 ms tick, RESEND after 5 ms of silence, 72 000 bytes unscheduled, 8
/// messages granted at once; see each getter.
///
/// The protocol core counts time in ticks of [`ProtocolConfig::tick`]:
/// the durations set here are rounded up to whole ticks when the endpoint
/// is bound (a 2.5 ms timeout with 1 ms ticks fires after 3), and a
/// timer fires at most one tick late.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProtocolConfig {
    /// The core's configuration; its tick counts are derived from the
    /// durations below when the endpoint is bound.
    core: smt_proto::Config,
    resend_after: Duration,
    rpc_idle_timeout: Duration,
    handshake_timeout: Duration,
    /// `None`: [`HANDSHAKE_DEADLINE_FACTOR`] × `handshake_timeout`.
    handshake_deadline: Option<Duration>,
    /// `None`: the core's default, raised to [`GRANT_WINDOW_DATAGRAMS`]
    /// datagrams when those are large (see [`ProtocolConfig::grant_window`]).
    grant_window: Option<u32>,
}

/// The fewest datagrams a default grant window lets a sender run ahead
/// by. The default window (72,000 bytes) holds 49 datagrams at a
/// 1,500-byte MTU but 1.1 at loopback's 65,535: the sender waited for a
/// grant after every datagram (smt-bench, 1 MiB pinned: 885-929 us per
/// RPC against 694-725 us with 8 datagrams' worth).
pub const GRANT_WINDOW_DATAGRAMS: u32 = 8;

/// The default [`ProtocolConfig::handshake_deadline`], in
/// `handshake_timeout`s (2 s with the default 100 ms).
const HANDSHAKE_DEADLINE_FACTOR: u32 = 20;

impl Default for ProtocolConfig {
    fn default() -> Self {
        let core = smt_proto::Config::default();
        Self {
            resend_after: core.tick * core.resend_ticks,
            rpc_idle_timeout: core.tick * core.abort_ticks,
            handshake_timeout: core.tick * core.handshake_abort_ticks,
            handshake_deadline: None,
            grant_window: None,
            core,
        }
    }
}

/// A getter and a setter per plain setting of the core's configuration.
macro_rules! settings {
    ($( $(#[doc = $doc:literal])* $name:ident, $set:ident: $ty:ty; )*) => {
        impl ProtocolConfig {
            $(
                $(#[doc = $doc])*
                pub fn $name(&self) -> $ty {
                    self.core.$name
                }

                #[doc = concat!("Sets [`ProtocolConfig::", stringify!($name), "`].")]
                pub fn $set(&mut self, value: $ty) -> &mut Self {
                    self.core.$name = value;
                    self
                }
            )*
        }
    };
}

settings! {
    /// Split of the record sequence number between message ID and record
    /// index (default 48/16 bits). Both ends must agree.
    seq_layout, set_seq_layout: SeqLayout;
    /// Largest datagram the endpoint emits (UDP or raw-IP payload):
    /// default 1472, a 1500-byte MTU over IPv4/UDP. Replaced by one
    /// derived from [`EndpointConfig::mtu`] when that is set.
    max_datagram_size, set_max_datagram_size: usize;
    /// Plaintext bytes per TLS record, 1 to 16384 (default 16384).
    record_size, set_record_size: usize;
    /// Largest application message accepted, in bytes before padding
    /// (default 64 MiB).
    max_message_len, set_max_message_len: u64;
    /// Wire bytes a sender sends of a message before its first GRANT
    /// (Homa's "unscheduled bytes"; default 72 000). Both ends must agree.
    unscheduled_bytes, set_unscheduled_bytes: u32;
    /// Receiver: the largest byte range one RESEND asks for (default
    /// 72 000).
    max_resend_bytes, set_max_resend_bytes: u32;
    /// Incoming messages granted at once (Homa's overcommit; default 8).
    overcommit, set_overcommit: usize;
    /// The protocol's housekeeping period, and the unit its timeouts are
    /// counted in (default 1 ms): see the type's docs.
    tick, set_tick: Duration;
    /// Times a client restarts a request the server says it does not know
    /// (default 6).
    max_restarts, set_max_restarts: u32;
    /// Server: complete requests the application may hold unanswered
    /// (default 4096). A request completing beyond it is refused
    /// unexecuted and its client hears OVERLOADED
    /// ([`crate::RpcError::Overloaded`]).
    max_pending_requests, set_max_pending_requests: usize;
    /// Client: the requests a server is assumed to let us have
    /// outstanding before its first CREDIT says how many (default 128).
    /// Calls beyond a server's credit wait for a place, within their
    /// deadline, instead of being refused (`docs/protocol.md` § 4, CREDIT).
    initial_credit, set_initial_credit: u32;
    /// Authenticate control packets with a MAC (default on). Off
    /// reproduces the SMT paper's forgeable plaintext control packets, for
    /// comparison only.
    authenticate_control, set_authenticate_control: bool;
    /// Pathlet feedback (default off; `docs/protocol.md` § 4): PATH in
    /// front of datagrams with DATA for devices on the path to fill,
    /// PATH_ECHO back, a DCTCP window per pathlet. Both ends; needs
    /// authenticated control packets and no transmit offload.
    pathlet_feedback, set_pathlet_feedback: bool;
    /// With pathlet feedback: one DCTCP window for every pathlet (the
    /// baseline per-pathlet windows are compared with; default off).
    pathlet_single_window, set_pathlet_single_window: bool;
    /// Length concealment (default none).
    padding, set_padding: Padding;
    /// Message IDs above the replay floor tracked one by one (default
    /// 4096); older ones are rejected wholesale.
    replay_window, set_replay_window: u64;
    /// Partially received requests allowed per peer (default 1024).
    max_incoming_per_peer, set_max_incoming_per_peer: usize;
    /// Partially received requests allowed across all peers (default
    /// 16 384).
    max_incoming_total, set_max_incoming_total: usize;
    /// Bytes one peer's partially received messages may hold (default
    /// 128 MiB); at least one maximal message.
    max_buffered_per_peer, set_max_buffered_per_peer: usize;
    /// Bytes all peers' partially received messages may hold (default
    /// 512 MiB).
    max_buffered_total, set_max_buffered_total: usize;
    /// Wire bytes of one incoming message that may arrive past the part
    /// already authenticated (default 16 MiB).
    max_unopened_bytes, set_max_unopened_bytes: u32;
    /// Sessions the key resolver may create for new addresses (default
    /// 65 536).
    max_resolved_sessions, set_max_resolved_sessions: usize;
    /// Sessions made by a handshake are forgotten after this long without
    /// an authenticated packet and with no RPC in flight (default 10
    /// minutes); `None` keeps them. At least
    /// [`ProtocolConfig::rpc_idle_timeout`].
    session_idle_timeout, set_session_idle_timeout: Option<Duration>;
    /// Handshakes in progress at once (default 4096). A new opening to a
    /// full table displaces the oldest handshake a peer opened if that one
    /// has taken longer than two `resend_after`s, and is dropped otherwise.
    max_handshakes, set_max_handshakes: usize;
    /// Once the handshake table is half full, handshakes peers may hold
    /// open from one IP address (default 64) ...
    max_handshakes_per_ip, set_max_handshakes_per_ip: usize;
    /// ... and from one /24 (IPv4) or /64 (IPv6) prefix (default 512);
    /// openings past either are dropped.
    max_handshakes_per_prefix, set_max_handshakes_per_prefix: usize;
    /// Sessions held at once, of every origin (default 16 384). One more
    /// from a handshake or the key resolver first evicts the least proven:
    /// a session whose peer never used its keys, else the handshake
    /// session heard from least recently with nothing under way; installed
    /// and resolved sessions are never evicted.
    max_sessions, set_max_sessions: usize;
    /// Sessions a responder's handshake made whose address nothing has
    /// validated yet (default 1024); past it the oldest is forgotten.
    max_unvalidated_sessions, set_max_unvalidated_sessions: usize;
    /// Handshakes in progress beyond which an opening without a retry
    /// token is answered with a stateless RETRY (default 64; 0 retries
    /// every opening).
    retry_above_handshakes, set_retry_above_handshakes: usize;
    /// Of one receive batch, datagrams from addresses nothing vouches for
    /// that are handled, at most (default 64); the others are dropped
    /// unread.
    unvalidated_per_batch, set_unvalidated_per_batch: usize;
    /// Put several packets to one peer into one datagram (default on).
    /// Receivers always accept both.
    coalesce, set_coalesce: bool;
}

impl ProtocolConfig {
    /// Silence after which an RPC asks for the data it misses (RESEND, or
    /// NEED_ACK); default 5 ms. Shorter than
    /// [`ProtocolConfig::rpc_idle_timeout`] and
    /// [`ProtocolConfig::handshake_timeout`].
    pub fn resend_after(&self) -> Duration {
        self.resend_after
    }

    /// Sets [`ProtocolConfig::resend_after`].
    pub fn set_resend_after(&mut self, after: Duration) -> &mut Self {
        self.resend_after = after;
        self
    }

    /// Silence after which an RPC is given up (default 1 s): a client's
    /// call fails with [`crate::RpcError::Timeout`], a server frees the
    /// request. Silence only: a server that keeps answering "busy" keeps
    /// the call alive ([`EndpointConfig::call_timeout`] bounds the whole
    /// call).
    pub fn rpc_idle_timeout(&self) -> Duration {
        self.rpc_idle_timeout
    }

    /// Sets [`ProtocolConfig::rpc_idle_timeout`].
    pub fn set_rpc_idle_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.rpc_idle_timeout = timeout;
        self
    }

    /// Silence after which a handshake fails (default 100 ms), and after
    /// which a responder forgets a finished handshake's session if
    /// nothing authenticated came from the peer's address.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// Sets [`ProtocolConfig::handshake_timeout`].
    pub fn set_handshake_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.handshake_timeout = timeout;
        self
    }

    /// The longest a handshake may take in all, however often its peer
    /// sends (default 20 × [`ProtocolConfig::handshake_timeout`], 2 s):
    /// past it the handshake fails, so a peer that trickles a byte now and
    /// then cannot hold its place in the table. At least
    /// `handshake_timeout`.
    pub fn handshake_deadline(&self) -> Duration {
        self.handshake_deadline
            .unwrap_or(self.handshake_timeout * HANDSHAKE_DEADLINE_FACTOR)
    }

    /// Sets [`ProtocolConfig::handshake_deadline`].
    pub fn set_handshake_deadline(&mut self, deadline: Duration) -> &mut Self {
        self.handshake_deadline = Some(deadline);
        self
    }

    /// Receiver: how far past what has arrived each GRANT lets the sender
    /// run. Default: 72,000 bytes or [`GRANT_WINDOW_DATAGRAMS`] datagrams
    /// of the endpoint's size, whichever is larger (the datagram size
    /// from [`EndpointConfig::mtu`] when that is set, else
    /// [`ProtocolConfig::max_datagram_size`]), so a large MTU does not
    /// turn the window into one datagram at a time. A window set with
    /// [`ProtocolConfig::set_grant_window`] is kept as set.
    pub fn grant_window(&self) -> u32 {
        self.grant_window_for(self.core.max_datagram_size)
    }

    /// Sets [`ProtocolConfig::grant_window`].
    pub fn set_grant_window(&mut self, window: u32) -> &mut Self {
        self.grant_window = Some(window);
        self
    }

    /// The grant window for datagrams of `datagram` bytes: the one set,
    /// or the default for that size (see [`ProtocolConfig::grant_window`];
    /// an endpoint with [`EndpointConfig::mtu`] set uses the datagram size
    /// that MTU leaves).
    pub fn grant_window_for(&self, datagram: usize) -> u32 {
        self.grant_window.unwrap_or_else(|| {
            let scaled = u32::try_from(datagram)
                .unwrap_or(u32::MAX)
                .saturating_mul(GRANT_WINDOW_DATAGRAMS);
            scaled.max(self.core.grant_window)
        })
    }

    /// The largest message this configuration can carry: bounded by the
    /// record-index bits, the wire's 32-bit length field and
    /// [`ProtocolConfig::max_message_len`].
    pub fn message_len_limit(&self) -> u64 {
        self.core.message_len_limit()
    }

    /// The core's configuration, timeouts in ticks. Errors if a duration
    /// cannot be counted in ticks or the timeouts are out of order.
    pub(crate) fn to_core(&self) -> Result<smt_proto::Config, ConfigError> {
        let tick = self.core.tick;
        if tick.is_zero() {
            return Err(ConfigError::new(
                "ProtocolConfig::tick",
                "is zero: the protocol counts its timeouts in ticks; give it a duration (default 1 ms)",
            ));
        }
        let mut core = self.core.clone();
        core.grant_window = self.grant_window();
        core.resend_ticks = ticks(self.resend_after, tick, "ProtocolConfig::resend_after")?;
        core.abort_ticks = ticks(
            self.rpc_idle_timeout,
            tick,
            "ProtocolConfig::rpc_idle_timeout",
        )?;
        core.handshake_abort_ticks = ticks(
            self.handshake_timeout,
            tick,
            "ProtocolConfig::handshake_timeout",
        )?;
        core.handshake_deadline_ticks = ticks(
            self.handshake_deadline(),
            tick,
            "ProtocolConfig::handshake_deadline",
        )?;
        if core.handshake_deadline_ticks < core.handshake_abort_ticks {
            return Err(ConfigError::new(
                "ProtocolConfig::handshake_deadline",
                format!(
                    "{:?} is shorter than handshake_timeout ({:?}), the silence it allows; \
                     make it at least as long",
                    self.handshake_deadline(),
                    self.handshake_timeout
                ),
            ));
        }
        for (setting, ticks, timeout) in [
            (
                "ProtocolConfig::rpc_idle_timeout",
                core.abort_ticks,
                self.rpc_idle_timeout,
            ),
            (
                "ProtocolConfig::handshake_timeout",
                core.handshake_abort_ticks,
                self.handshake_timeout,
            ),
        ] {
            if ticks <= core.resend_ticks {
                return Err(ConfigError::new(
                    setting,
                    format!(
                        "{timeout:?} is not longer than resend_after ({:?}) in {tick:?} ticks: \
                         nothing could ask for lost data before giving up; make it longer \
                         (or resend_after shorter)",
                        self.resend_after
                    ),
                ));
            }
        }
        if core
            .session_idle_timeout
            .is_some_and(|t| t < self.rpc_idle_timeout)
        {
            return Err(ConfigError::new(
                "ProtocolConfig::session_idle_timeout",
                format!(
                    "is shorter than rpc_idle_timeout ({:?}): a session could be forgotten under \
                     an RPC still waiting; make it at least as long, or None",
                    self.rpc_idle_timeout
                ),
            ));
        }
        Ok(core)
    }
}

/// The IP and UDP headers in front of an SMT packet.
/// The largest SMT packet a datagram to or from `addr` can carry: 65,507
/// bytes over IPv4/UDP (a UDP send of more fails with `EMSGSIZE`), 65,515
/// in raw IPv4, 65,527 over IPv6/UDP, 65,535 in raw IPv6.
fn max_datagram_size(addr: SocketAddr, mode: Mode) -> usize {
    let counted = if addr.is_ipv4() {
        header_len(addr, mode)
    } else {
        header_len(addr, mode) - 40
    };
    MAX_IP_LENGTH - counted
}

fn header_len(addr: SocketAddr, mode: Mode) -> usize {
    let ip = if addr.is_ipv4() { 20 } else { 40 };
    let udp = if matches!(mode, Mode::Udp) { 8 } else { 0 };
    ip + udp
}

/// `d` in whole ticks, rounded up: at least 1, at most `u32::MAX`.
fn ticks(d: Duration, tick: Duration, setting: &'static str) -> Result<u32, ConfigError> {
    if d.is_zero() {
        return Err(ConfigError::new(setting, "is zero; give it a duration"));
    }
    let n = d.as_nanos().div_ceil(tick.as_nanos());
    u32::try_from(n).map_err(|_| {
        ConfigError::new(
            setting,
            format!(
                "{d:?} is {n} ticks of {tick:?}, more than the protocol counts ({}); \
                 shorten it or lengthen ProtocolConfig::tick",
                u32::MAX
            ),
        )
    })
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
    priority: u8,
    overloaded_retries: u32,
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

    /// The priority the request carries in every DATA packet
    /// (`docs/protocol.md` § 3; MTP's message priority): 0, the
    /// default, is the lowest, larger is more urgent. Devices on the path
    /// may queue by it (`smt-forwarder`); the endpoints themselves ignore
    /// it. The response is sent at priority 0.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// The priority set with [`CallOptions::priority`].
    pub fn priority_value(self) -> u8 {
        self.priority
    }

    /// Retries the call up to `attempts` times when the server refuses
    /// it with [`RpcError::Overloaded`](crate::RpcError::Overloaded) (it did not run, so
    /// sending it again is safe), each after a jittered back-off (about
    /// 2 ms, doubling up to 250 ms) and within the call's deadline; the
    /// last refusal is the outcome. Off (0) by default: the caller sees
    /// the first refusal. The request's bytes are kept until the call
    /// ends (a copy, for borrowed bytes). Calls also wait for the
    /// server's credit before they are sent, whatever this says.
    pub fn retry_overloaded(mut self, attempts: u32) -> Self {
        self.overloaded_retries = attempts;
        self
    }

    /// The attempts set with [`CallOptions::retry_overloaded`].
    pub fn overloaded_retries(self) -> u32 {
        self.overloaded_retries
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

#[cfg(test)]
mod tests {
    use super::*;

    fn any() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn the_loopback_mtu_fits_one_ip_packet_and_makes_a_valid_config() {
        // Linux has it; elsewhere there is nothing to check.
        let Some(mtu) = EndpointConfig::loopback_mtu() else {
            return;
        };
        assert!((1280..=MAX_IP_LENGTH).contains(&mtu), "{mtu}");
        let mut c = EndpointConfig::default();
        c.set_mtu(Some(mtu));
        assert!(c.validate(any()).is_ok());
    }

    /// At a 1,500-byte MTU the default window (72,000 bytes) holds many
    /// datagrams and stays; at a larger or loopback MTU it grows to
    /// `GRANT_WINDOW_DATAGRAMS` datagrams; a window set by hand is kept.
    #[test]
    fn the_default_grant_window_holds_several_datagrams() {
        let v4: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let window = |c: &EndpointConfig| c.core_config(v4).unwrap().grant_window;
        let mut c = EndpointConfig::default();
        assert_eq!(window(&c), 72_000);
        assert_eq!(c.protocol().grant_window(), 72_000);
        c.set_mtu(Some(9000));
        assert_eq!(window(&c), 72_000, "8 jumbo datagrams are 71,776 bytes");
        c.set_mtu(Some(12_000));
        assert_eq!(window(&c), 8 * (12_000 - 28));
        c.set_mtu(Some(65_535));
        assert_eq!(window(&c), 8 * 65_507);
        c.protocol_mut().set_grant_window(30_000);
        assert_eq!(window(&c), 30_000);
        assert_eq!(c.protocol().grant_window(), 30_000);
        let mut p = ProtocolConfig::default();
        p.set_max_datagram_size(16_000);
        assert_eq!(p.grant_window(), 8 * 16_000);
    }

    #[test]
    fn the_largest_datagram_follows_the_ip_version() {
        let v4: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(max_datagram_size(v4, Mode::Udp), 65_507);
        assert_eq!(max_datagram_size(v6, Mode::Udp), 65_527);
    }

    /// The defaults are the values the public fields had before the
    /// setters (and the core's own), tick counts and all; the socket's,
    /// the offload model's and the worker server's too.
    #[test]
    fn defaults_are_unchanged() {
        let c = EndpointConfig::default();
        assert_eq!(c.mtu(), Some(1500));
        assert!(!c.busy_poll());
        assert_eq!(c.call_timeout(), None);
        assert_eq!(c.max_outstanding_calls(), 16_384);
        assert!(c.offload().is_none());
        assert_eq!(c.socket(), &SocketConfig::default());
        let p = c.protocol();
        assert_eq!(p.tick(), Duration::from_millis(1));
        assert_eq!(p.resend_after(), Duration::from_millis(5));
        assert_eq!(p.rpc_idle_timeout(), Duration::from_secs(1));
        assert_eq!(p.handshake_timeout(), Duration::from_millis(100));
        let core = c.core_config(any()).unwrap();
        let old = smt_proto::Config::default();
        assert_eq!(
            (
                core.resend_ticks,
                core.abort_ticks,
                core.handshake_abort_ticks
            ),
            (5, 1000, 100)
        );
        assert_eq!(
            format!("{:?}", p.to_core().unwrap()),
            format!("{old:?}"),
            "every other core setting as the core's default"
        );
        assert_eq!(core.max_datagram_size, 1472, "from the 1500-byte MTU");
        let s = SocketConfig::default();
        assert_eq!(s.mode(), Mode::Udp);
        assert_eq!((s.recv_buffer(), s.send_buffer()), (4 << 20, 4 << 20));
        assert!(s.gso() && s.gro());
        #[cfg(feature = "offload")]
        {
            let o = OffloadConfig::default();
            assert_eq!(
                (o.queues(), o.contexts(), o.rx_contexts(), o.ring()),
                (2, 1024, 1024, 256)
            );
        }
        let w = crate::workers::WorkerConfig::default();
        assert_eq!(w.spread(), crate::workers::Spread::Messages);
        assert!(w.shards() >= 1);
        assert_eq!(w.endpoint().mtu(), Some(1500));
    }

    #[test]
    fn durations_round_up_to_whole_ticks() {
        let mut p = ProtocolConfig::default();
        p.set_tick(Duration::from_millis(2))
            .set_resend_after(Duration::from_millis(5))
            .set_rpc_idle_timeout(Duration::from_secs(60));
        let core = p.to_core().unwrap();
        assert_eq!((core.resend_ticks, core.abort_ticks), (3, 30_000));
        assert_eq!(core.handshake_abort_ticks, 50);
    }

    #[test]
    fn a_configuration_that_cannot_work_names_its_setting() {
        let setting = |c: &EndpointConfig| match c.validate(any()) {
            Err(Error::Config(e)) => e.setting(),
            other => panic!("expected a config error, got {other:?}"),
        };
        let mut c = EndpointConfig::default();
        c.set_max_outstanding_calls(0);
        assert_eq!(setting(&c), "EndpointConfig::max_outstanding_calls");
        let mut c = EndpointConfig::default();
        c.set_mtu(Some(60));
        assert_eq!(setting(&c), "EndpointConfig::mtu");
        // IPv4's total length counts its header: 65,535 is the largest
        // MTU (65,507-byte UDP payloads); one more is refused at bind,
        // not by EMSGSIZE at the first send.
        let mut c = EndpointConfig::default();
        c.set_mtu(Some(65_536));
        assert_eq!(setting(&c), "EndpointConfig::mtu");
        c.set_mtu(Some(65_535));
        assert!(c.validate(any()).is_ok());
        let mut c = EndpointConfig::default();
        c.protocol_mut().set_tick(Duration::ZERO);
        assert_eq!(setting(&c), "ProtocolConfig::tick");
        let mut c = EndpointConfig::default();
        c.protocol_mut()
            .set_rpc_idle_timeout(Duration::from_millis(5));
        assert_eq!(setting(&c), "ProtocolConfig::rpc_idle_timeout");
        let mut c = EndpointConfig::default();
        c.protocol_mut()
            .set_rpc_idle_timeout(Duration::from_secs(u64::from(u32::MAX)));
        assert_eq!(setting(&c), "ProtocolConfig::rpc_idle_timeout");
        let mut c = EndpointConfig::default();
        c.protocol_mut().set_record_size(0);
        assert_eq!(setting(&c), "ProtocolConfig");
        #[cfg(feature = "offload")]
        {
            let mut c = EndpointConfig::default();
            let mut offload = OffloadConfig::default();
            offload.set_ring(0);
            c.set_offload(Some(offload));
            assert_eq!(setting(&c), "OffloadConfig::ring");
            let mut c = EndpointConfig::default();
            c.protocol_mut().set_pathlet_feedback(true);
            assert!(c.validate(any()).is_ok(), "pathlet feedback alone works");
            c.set_offload(Some(OffloadConfig::default()));
            assert_eq!(
                setting(&c),
                "ProtocolConfig",
                "not with a NIC cutting segments"
            );
        }
        assert!(EndpointConfig::default().validate(any()).is_ok());
    }
}
